//! What the workload's pods look like, from one watch over all pods (upstream reads the
//! scheduler's shared pod informer): per pod its labels, whether it is scheduled
//! (`spec.nodeName` set) and whether it was attempted (has a `PodScheduled` condition). The
//! throughput collectors count pods as they become scheduled, in the watch handler, so a pod
//! created, scheduled and deleted between two samples still counts (as upstream's handler).
//! Waiters (barriers, createPods' wait) wake on every change through a version channel.
//! A collector also keeps how many of its pods exist and are not scheduled yet (`waiting`),
//! exactly: counted from the pods seen when it starts, then moved by every add, schedule and
//! delete, so a sample shows whether the scheduler keeps up with the pods' creation.
//!
//! The watch decodes each pod as a [`Pod`] of this module: only the fields above. The harness
//! shares the machine with the scheduler and the API simulator, and a full k8s-openapi pod
//! (every container, condition, annotation and `managedFields` entry allocated, then dropped)
//! cost it a tenth of the run's CPU in the constraint workloads, whose pods are the largest.

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A pod as the tracker reads it: namespace, name and labels, `spec.nodeName` and the types
/// of `status.conditions`. serde skips every other field unread.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Pod {
    #[serde(default, deserialize_with = "meta")]
    metadata: ObjectMeta,
    spec: Option<PodSpec>,
    status: Option<PodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct PodStatus {
    conditions: Option<Vec<PodCondition>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
struct PodCondition {
    #[serde(rename = "type", default)]
    type_: String,
}

/// The metadata the tracker reads, and the `resourceVersion` the watcher resumes from.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
}

fn meta<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    Ok(Option::<Meta>::deserialize(d)?
        .map(|m| ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            resource_version: m.resource_version,
            labels: m.labels,
            ..ObjectMeta::default()
        })
        .unwrap_or_default())
}

impl kube::Resource for Pod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Debug, Clone)]
struct PodRec {
    labels: BTreeMap<String, String>,
    scheduled: bool,
    attempted: bool,
}

/// Which pods a collector or barrier looks at: namespaces (empty = all) and equality labels.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub namespaces: HashSet<String>,
    pub labels: BTreeMap<String, String>,
}

impl Filter {
    fn matches(&self, ns: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(ns))
            && self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// Pods that matched a collector's filter when they became scheduled, and those that match it
/// now and are not scheduled.
#[derive(Debug, Default)]
pub struct Counter {
    filter: Filter,
    scheduled: AtomicUsize,
    waiting: AtomicUsize,
}

impl Counter {
    pub fn scheduled(&self) -> usize {
        self.scheduled.load(Ordering::Acquire)
    }

    /// Pods matching the filter that exist and are not scheduled, as the watch sees them now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Moves `waiting` by a pod's change: it waited before (`was`) and waits now (`is`).
    fn moved(&self, was: bool, is: bool) {
        match (was, is) {
            (false, true) => {
                self.waiting.fetch_add(1, Ordering::AcqRel);
            }
            (true, false) => {
                self.waiting.fetch_sub(1, Ordering::AcqRel);
            }
            _ => {}
        }
    }
}

#[derive(Default)]
struct State {
    pods: HashMap<(String, String), PodRec>,
    counters: Vec<Arc<Counter>>,
}

pub struct Tracker {
    state: Mutex<State>,
    version: tokio::sync::watch::Sender<u64>,
}

/// Counts for one namespace under a filter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub scheduled: usize,
    pub attempted: usize,
    pub total: usize,
}

fn is_attempted(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "PodScheduled"))
}

impl Tracker {
    pub fn new() -> Arc<Tracker> {
        Arc::new(Tracker {
            state: Mutex::default(),
            version: tokio::sync::watch::channel(0).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the pod watch; the returned task runs until aborted.
    pub fn spawn_watch(self: &Arc<Self>, client: kube::Client) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let api: Api<Pod> = Api::all(client);
            let mut s = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = s.next().await {
                match ev {
                    Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => me.apply(&p),
                    Ok(Event::Delete(p)) => me.delete(&p),
                    Ok(Event::Init) | Ok(Event::InitDone) => {}
                    Err(e) => {
                        eprintln!("scheduler-perf: pod watch: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        })
    }

    pub fn apply(&self, p: &Pod) {
        let (Some(ns), Some(name)) = (p.metadata.namespace.clone(), p.metadata.name.clone()) else {
            return;
        };
        let scheduled = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let labels: BTreeMap<String, String> = p.metadata.labels.clone().unwrap_or_default();
        {
            let mut st = self.lock();
            let prev = st.pods.get(&(ns.clone(), name.clone()));
            let was = prev.is_some_and(|r| r.scheduled);
            for c in &st.counters {
                let matches = c.filter.matches(&ns, &labels);
                if scheduled && !was && matches {
                    c.scheduled.fetch_add(1, Ordering::AcqRel);
                }
                let waited = prev.is_some_and(|r| !r.scheduled && c.filter.matches(&ns, &r.labels));
                c.moved(waited, !scheduled && matches);
            }
            st.pods.insert(
                (ns, name),
                PodRec {
                    labels,
                    scheduled,
                    attempted: is_attempted(p),
                },
            );
        }
        self.version.send_modify(|v| *v += 1);
    }

    pub fn delete(&self, p: &Pod) {
        if let (Some(ns), Some(name)) = (p.metadata.namespace.clone(), p.metadata.name.clone()) {
            let mut st = self.lock();
            if let Some(r) = st.pods.remove(&(ns.clone(), name)) {
                for c in &st.counters {
                    c.moved(!r.scheduled && c.filter.matches(&ns, &r.labels), false);
                }
            }
            drop(st);
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// A collector counting pods that become scheduled from now on (and those waiting, from
    /// the pods that wait now).
    pub fn counter(&self, filter: Filter) -> Arc<Counter> {
        let mut st = self.lock();
        let waiting = st
            .pods
            .iter()
            .filter(|((ns, _), r)| !r.scheduled && filter.matches(ns, &r.labels))
            .count();
        let c = Arc::new(Counter {
            filter,
            scheduled: AtomicUsize::new(0),
            waiting: AtomicUsize::new(waiting),
        });
        st.counters.push(c.clone());
        c
    }

    pub fn drop_counter(&self, c: &Arc<Counter>) {
        self.lock().counters.retain(|x| !Arc::ptr_eq(x, c));
    }

    pub fn counts(&self, ns: &str, labels: &BTreeMap<String, String>) -> Counts {
        let st = self.lock();
        let mut c = Counts::default();
        for ((pns, _), r) in &st.pods {
            if pns == ns && labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)) {
                c.total += 1;
                c.scheduled += usize::from(r.scheduled);
                c.attempted += usize::from(!r.scheduled && r.attempted);
            }
        }
        c
    }

    /// Names of the pods in `ns` matching `labels`, as this watch currently sees them.
    pub fn pod_names(&self, ns: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
        let st = self.lock();
        let mut v: Vec<String> = st
            .pods
            .iter()
            .filter(|((pns, _), r)| {
                pns == ns && labels.iter().all(|(k, v)| r.labels.get(k) == Some(v))
            })
            .map(|((_, n), _)| n.clone())
            .collect();
        v.sort();
        v
    }

    /// Waits until `done` holds, re-checking on every change; `Err` with the last state's
    /// description after `timeout`. While nothing changes, says on stderr every
    /// [`STALL_REPORT`] what it still waits for (a scaled workload whose pods cannot all fit
    /// would otherwise wait out the whole timeout without a word).
    pub async fn wait_until(
        &self,
        timeout: Duration,
        done: impl FnMut(&Tracker) -> Result<(), String>,
    ) -> anyhow::Result<()> {
        self.wait_reporting(timeout, STALL_REPORT, done, |waited, why| {
            eprintln!(
                "scheduler-perf: still waiting after {:.0} s (timeout {:.0} s): {why}",
                waited.as_secs_f64(),
                timeout.as_secs_f64()
            )
        })
        .await
    }

    /// [`Tracker::wait_until`], with `report(waited, why)` called when `every` passes without
    /// a change.
    async fn wait_reporting(
        &self,
        timeout: Duration,
        every: Duration,
        mut done: impl FnMut(&Tracker) -> Result<(), String>,
        mut report: impl FnMut(Duration, &str),
    ) -> anyhow::Result<()> {
        let mut rx = self.version.subscribe();
        let start = tokio::time::Instant::now();
        let deadline = start + timeout;
        loop {
            rx.borrow_and_update();
            let why = match done(self) {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            loop {
                let quiet = (tokio::time::Instant::now() + every).min(deadline);
                match tokio::time::timeout_at(quiet, rx.changed()).await {
                    Ok(Ok(())) => break,
                    Ok(Err(_)) => anyhow::bail!("pod watch ended while waiting: {why}"),
                    Err(_) if quiet >= deadline => {
                        anyhow::bail!("timed out after {timeout:?}: {why}")
                    }
                    Err(_) => report(start.elapsed(), &why),
                }
            }
        }
    }
}

/// How long a wait goes without a change before it says what it waits for.
pub const STALL_REPORT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, name: &str, node: Option<&str>, label: &str) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name, "labels": {"type": label}},
            "spec": {"containers": [], "nodeName": node}
        }))
        .unwrap()
    }

    /// A pod as the API returns it decodes to what the tracker reads, the rest skipped.
    #[test]
    fn a_full_pod_decodes_to_what_the_tracker_reads() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": "a", "name": "p", "uid": "u1", "resourceVersion": "7",
                "labels": {"type": "x"}, "annotations": {"k": "v"},
                "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
            },
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "affinity": {"podAntiAffinity": {}}},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "lastTransitionTime": "2026-12-07T00:00:00Z"}
            ]}
        }))
        .unwrap();
        assert_eq!(p.metadata.namespace.as_deref(), Some("a"));
        assert_eq!(p.metadata.name.as_deref(), Some("p"));
        assert_eq!(p.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            p.metadata.labels,
            Some(BTreeMap::from([("type".into(), "x".into())]))
        );
        assert!(is_attempted(&p));
        let t = Tracker::new();
        t.apply(&p);
        let c = t.counts("a", &BTreeMap::from([("type".into(), "x".into())]));
        assert_eq!((c.scheduled, c.attempted, c.total), (0, 1, 1));
        let placed: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "a", "name": "p", "labels": {"type": "x"}},
            "spec": {"nodeName": "n1", "unknownField": [1, 2]}
        }))
        .unwrap();
        t.apply(&placed);
        let c = t.counts("a", &BTreeMap::new());
        assert_eq!((c.scheduled, c.attempted, c.total), (1, 0, 1));
        let bare: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "a", "name": "q"}, "status": {"conditions": null}
        }))
        .unwrap();
        assert!(!is_attempted(&bare));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_wait_says_what_it_waits_for_until_its_timeout() {
        let t = Tracker::new();
        let mut reports = Vec::new();
        let res = t
            .wait_reporting(
                Duration::from_secs(35),
                Duration::from_secs(10),
                |t| {
                    let c = t.counts("a", &BTreeMap::new());
                    Err(format!("{} of 2 pods scheduled", c.scheduled))
                },
                |waited, why| reports.push((waited.as_secs(), why.to_owned())),
            )
            .await;
        let err = res.unwrap_err().to_string();
        assert!(
            err.contains("timed out after 35s: 0 of 2 pods scheduled"),
            "{err}"
        );
        assert_eq!(
            reports,
            [10, 20, 30].map(|s| (s, "0 of 2 pods scheduled".to_owned()))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_when_its_pods_are_scheduled_without_a_stall_report() {
        let t = Tracker::new();
        let writer = t.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            writer.apply(&pod("a", "p", Some("n"), "x"));
        });
        let mut reports = 0;
        t.wait_reporting(
            Duration::from_secs(60),
            Duration::from_secs(10),
            |t| match t.counts("a", &BTreeMap::new()).scheduled {
                1 => Ok(()),
                n => Err(format!("{n} of 1")),
            },
            |_, _| reports += 1,
        )
        .await
        .unwrap();
        assert_eq!(reports, 0);
    }

    #[test]
    fn a_collector_counts_each_matching_pod_once_when_it_becomes_scheduled() {
        let t = Tracker::new();
        t.apply(&pod("a", "early", Some("n"), "x")); // scheduled before the collector
        let c = t.counter(Filter {
            namespaces: HashSet::from(["a".to_string()]),
            labels: BTreeMap::from([("type".to_string(), "x".to_string())]),
        });
        t.apply(&pod("a", "p", None, "x"));
        t.apply(&pod("a", "p", Some("n"), "x"));
        t.apply(&pod("a", "p", Some("n"), "x")); // a later update: not again
        t.apply(&pod("b", "q", Some("n"), "x")); // other namespace
        t.apply(&pod("a", "r", Some("n"), "y")); // other label
        t.apply(&pod("a", "s", Some("n"), "x")); // added already scheduled
        assert_eq!(c.scheduled(), 2);
        assert_eq!(c.waiting(), 0);
        let all = t.counts("a", &BTreeMap::new());
        assert_eq!((all.scheduled, all.total), (4, 4));
        t.delete(&pod("a", "p", None, "x"));
        assert_eq!(t.counts("a", &BTreeMap::new()).total, 3);
        assert_eq!(c.scheduled(), 2);
    }

    #[test]
    fn a_collector_knows_which_of_its_pods_wait() {
        let t = Tracker::new();
        t.apply(&pod("a", "before", None, "x")); // waiting when the collector starts
        t.apply(&pod("a", "placed", Some("n"), "x"));
        let c = t.counter(Filter {
            namespaces: HashSet::from(["a".to_string()]),
            labels: BTreeMap::from([("type".to_string(), "x".to_string())]),
        });
        assert_eq!(c.waiting(), 1);
        t.apply(&pod("a", "p", None, "x"));
        t.apply(&pod("a", "p", None, "x")); // an update that still waits: once
        t.apply(&pod("b", "q", None, "x")); // other namespace
        t.apply(&pod("a", "r", None, "y")); // other label
        assert_eq!(c.waiting(), 2);
        t.apply(&pod("a", "before", Some("n"), "x")); // scheduled: it waited before the collector
        assert_eq!((c.waiting(), c.scheduled()), (1, 1));
        t.apply(&pod("a", "r", None, "x")); // relabelled into the filter
        assert_eq!(c.waiting(), 2);
        t.apply(&pod("a", "r", None, "y")); // and out again
        assert_eq!(c.waiting(), 1);
        t.delete(&pod("a", "p", None, "x")); // deleted while waiting
        t.delete(&pod("a", "placed", Some("n"), "x")); // deleted scheduled: no change
        assert_eq!(c.waiting(), 0);
    }
}
