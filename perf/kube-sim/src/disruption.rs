//! The disruption controller of kube-controller-manager (`pkg/controller/disruption`), on by
//! default as there ([`SimConfig::disruption_controller`](crate::SimConfig)). It follows the
//! store's commits of PodDisruptionBudgets, and of pods while any budget exists (or when they
//! carry a `DisruptionTarget` condition), and writes each budget's status through the store
//! (`UpdateStatus` by `kube-controller-manager`, its own `resourceVersion` and watch event) as
//! `trySync` computes it:
//!
//! - the pods of a budget: the pods of its namespace its selector selects
//!   (`LabelSelectorAsSelector`: no selector selects none, `{}` all), whatever their phase;
//! - `getExpectedPodCount`: with `maxUnavailable`, `expectedPods` is the scale of the pods'
//!   controllers and `desiredHealthy = expectedPods - maxUnavailable` (percentages of
//!   `expectedPods` rounded up, `GetScaledValueFromIntOrPercent(…, true)`), at least 0; with an
//!   integer `minAvailable`, `expectedPods` is the number of selected pods and
//!   `desiredHealthy = minAvailable`; with a percentage `minAvailable`, `expectedPods` is the
//!   controllers' scale and `desiredHealthy` the percentage of it, rounded up. Pods without a
//!   controller owner reference are unmanaged and count 0 towards the scale (upstream warns
//!   with an `UnmanagedPods` event); a controller is found as `getExpectedScale`'s finders do:
//!   kube-sim serves no workload resources, so a ReplicationController, ReplicaSet,
//!   Deployment or StatefulSet owner is never found, while an owner that is a custom resource
//!   whose CRD version has a `scale` subresource counts its `specReplicasPath` (when its UID
//!   matches). An owner that is not found fails the sync (`found no controllers for pod "p"`),
//!   as do owners of kinds without a scale subresource (`configmaps does not implement the
//!   scale subresource`) or unknown kinds (`no matches for kind "X" in version "v"`);
//! - `currentHealthy`: selected pods without a `deletionTimestamp`, not in `disruptedPods`
//!   within the 2-minute `DeletionTimeout`, whose `Ready` condition is `True`
//!   (`IsPodReady`; the simulated kubelet sets it when a pod becomes Running, and to False
//!   when it finishes);
//! - `disruptionsAllowed = currentHealthy - desiredHealthy`, 0 when negative or when
//!   `expectedPods` is 0; `observedGeneration`; `disruptedPods` as `buildDisruptedPodMap` keeps
//!   them (entries for pods that exist, are not terminating and are younger than 2 minutes:
//!   nothing adds entries, as there is no eviction API here, but a status writer may); and the
//!   `DisruptionAllowed` condition (`True`/`SufficientPods` when disruptions are allowed,
//!   `False`/`InsufficientPods` otherwise, `observedGeneration` set, `lastTransitionTime`
//!   renewed when the status flips), written only when something changed;
//! - a failed sync (`failSafe`): `disruptionsAllowed: 0` and `DisruptionAllowed=False` with
//!   reason `SyncFailed` and the error as message;
//! - a pod whose `DisruptionTarget=True` condition was not set by the kubelet
//!   (`TerminationByKubelet`) and that is neither terminating nor finished gets the condition
//!   set to False (no reason) once it is older than
//!   [`SimConfig::stale_disruption_condition_timeout`](crate::SimConfig) (2 minutes).
//!
//! Budgets are recomputed when they change and when a pod they select (before or after the
//! change) is added, changed or deleted; commits that arrive together are handled once per
//! budget. Unlike kube-controller-manager, a pod change resyncs every budget that selects the
//! pod (upstream only the first it finds, and only by its new labels), and no Events are
//! written (`NoPods`, `UnmanagedPods`, `CalculateExpectedPodCountFailed`, …).
//!
//! It uses the shared state (`inner`), the store (whose commits it follows through
//! `State::follow`) and the budget rules (`policy`); `sim` starts it.

use crate::inner::Inner;
use crate::managed::Manager;
use crate::meta;
use crate::meta::Pointer;
use crate::policy::{self, IntOrString, PDB_KEY};
use crate::resources::ResourceDef;
use crate::store::{Event, EventType, Part, State};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How long a pod may stay in `disruptedPods` before it is expected to be terminating.
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The field manager of the controller's writes (kube-controller-manager's User-Agent).
const KCM: &str = "kube-controller-manager";

/// Work for the controller.
#[derive(Debug)]
enum Msg {
    /// A commit of a budget or a pod.
    Event(Arc<Event>),
    /// Sync this budget again (a `disruptedPods` entry expires).
    Resync(String, String),
    /// Check this pod's `DisruptionTarget` condition again.
    StalePod(String, String),
}

/// Whether a commit may concern the controller (decided under the store lock: cheap, nothing
/// parsed). `budgets`: how many PodDisruptionBudgets exist. Without budgets, a pod is handed
/// over when its encoding names the `DisruptionTarget` condition; the controller, which parses
/// it, does nothing for one that does not have it (no budget selects it, no stale condition).
fn relevant(ev: &Event, budgets: usize) -> bool {
    match ev.key.as_ref() {
        PDB_KEY => true,
        "/pods" => budgets > 0 || ev.obj.mentions("DisruptionTarget"),
        _ => false,
    }
}

/// Starts the controller when the configuration asks for it.
pub(crate) fn spawn(inner: &Arc<Inner>) -> Option<JoinHandle<()>> {
    if !inner.cfg.disruption_controller {
        return None;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let events = tx.clone();
    inner.state().follow(
        |ev, st| relevant(ev, st.count(PDB_KEY)),
        move |ev| {
            let _ = events.send(Msg::Event(ev));
        },
    );
    let c = Controller {
        inner: inner.clone(),
        tx,
        stale_pending: HashSet::new(),
    };
    Some(inner.rt.spawn(c.run(rx)))
}

struct Controller {
    inner: Arc<Inner>,
    /// For timers that come back as messages.
    tx: mpsc::UnboundedSender<Msg>,
    /// Pods with a stale-condition check scheduled.
    stale_pending: HashSet<(String, String)>,
}

struct Defs {
    pods: Arc<ResourceDef>,
    pdbs: Arc<ResourceDef>,
}

fn defs(st: &State) -> Defs {
    Defs {
        pods: st.registry.get("", "v1", "pods").expect("built in"),
        pdbs: st
            .registry
            .get(policy::GROUP, "v1", "poddisruptionbudgets")
            .expect("built in"),
    }
}

fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj.at("/metadata/labels").and_then(Value::as_object)
}

impl Controller {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(m) = rx.try_recv() {
                batch.push(m);
            }
            let mut budgets: BTreeSet<(String, String)> = BTreeSet::new();
            let mut stale: BTreeSet<(String, String)> = BTreeSet::new();
            for m in batch {
                match m {
                    Msg::Event(ev) => self.on_event(&ev, &mut budgets),
                    Msg::Resync(ns, name) => {
                        budgets.insert((ns, name));
                    }
                    Msg::StalePod(ns, name) => {
                        self.stale_pending.remove(&(ns.clone(), name.clone()));
                        stale.insert((ns, name));
                    }
                }
            }
            for (ns, name) in budgets {
                if let Some(after) = sync(&self.inner, &ns, &name) {
                    self.later(after, Msg::Resync(ns, name));
                }
            }
            for (ns, name) in stale {
                self.check_stale(&ns, &name);
            }
        }
    }

    /// Sends `m` back to the controller after `d`.
    fn later(&self, d: Duration, m: Msg) {
        let tx = self.tx.clone();
        self.inner.rt.spawn(async move {
            tokio::time::sleep(d).await;
            let _ = tx.send(m);
        });
    }

    fn on_event(&mut self, ev: &Event, budgets: &mut BTreeSet<(String, String)>) {
        let ns = ev.obj.namespace().to_string();
        if ev.key.as_ref() == PDB_KEY {
            budgets.insert((ns, ev.obj.name().to_string()));
            return;
        }
        // A pod: the budgets that select it, before or after the change (the budgets read
        // under the lock, every object parsed once after it).
        let pdbs = {
            let st = self.inner.state();
            let d = defs(&st);
            st.list(&d.pdbs, Some(&ns)).1
        };
        let obj = &ev.obj.value();
        let prev = if pdbs.is_empty() {
            None
        } else {
            ev.prev.as_ref().map(|p| p.value())
        };
        for b in pdbs {
            let b_v = b.value();
            let sel = b_v.at("/spec/selector");
            if policy::selects(sel, labels(obj))
                || prev
                    .as_ref()
                    .is_some_and(|p| policy::selects(sel, labels(p)))
            {
                budgets.insert((ns.clone(), b.name().to_string()));
            }
        }
        if ev.etype != EventType::Deleted
            && let Some(after) = stale_after(obj, self.inner.cfg.stale_disruption_condition_timeout)
        {
            let key = (ns, meta::meta_str(obj, "name").to_string());
            if self.stale_pending.insert(key.clone()) {
                self.later(after, Msg::StalePod(key.0, key.1));
            }
        }
    }

    /// `syncStalePodDisruption`: a stale `DisruptionTarget=True` condition becomes False.
    fn check_stale(&mut self, ns: &str, name: &str) {
        let timeout = self.inner.cfg.stale_disruption_condition_timeout;
        let mut st = self.inner.state();
        let d = defs(&st);
        let Ok(pod) = st.get(&d.pods, ns, name) else {
            return;
        };
        match stale_after(&pod.value(), timeout) {
            None => return,
            Some(after) if !after.is_zero() => {
                drop(st);
                if self
                    .stale_pending
                    .insert((ns.to_string(), name.to_string()))
                {
                    self.later(after, Msg::StalePod(ns.to_string(), name.to_string()));
                }
                return;
            }
            Some(_) => {}
        }
        let mut p = pod.value();
        let generation = p.at("/metadata/generation").cloned().unwrap_or(json!(1));
        crate::kinds::set_condition(
            &mut p,
            json!({"type": "DisruptionTarget", "status": "False", "lastProbeTime": null,
                   "lastTransitionTime": meta::now(), "observedGeneration": generation}),
        );
        if let Err(e) = st.update_by(
            &d.pods,
            ns,
            name,
            p,
            Part::Status,
            Some(&Manager::update(KCM)),
            None,
        ) {
            tracing::warn!(pod = %format!("{ns}/{name}"), "resetting DisruptionTarget failed: {e}");
        }
    }
}

/// The pod's `DisruptionTarget` condition.
fn disruption_target(pod: &Value) -> Option<&Value> {
    pod.at("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "DisruptionTarget")
}

/// `nonTerminatingPodHasStaleDisruptionCondition`: Some(time left until the condition is stale)
/// for a pod that is not terminating nor finished and whose `DisruptionTarget=True` condition
/// was not set by the kubelet.
fn stale_after(pod: &Value, timeout: Duration) -> Option<Duration> {
    if crate::deletion::terminating(pod) {
        return None;
    }
    let c = disruption_target(pod)?;
    if c["status"] != "True"
        || c["reason"] == "TerminationByKubelet"
        || matches!(
            pod.at("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
    {
        return None;
    }
    let since = c
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(meta::parse_rfc3339)
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    Some(timeout.saturating_sub(since))
}

/// `GetScaledValueFromIntOrPercent(x, total, true)`.
fn scaled_up(x: &IntOrString, total: i64) -> Result<i64, String> {
    match x {
        IntOrString::Int(i) => Ok(i64::from(*i)),
        IntOrString::Str(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_string(),
                );
            };
            let v: i64 = digits.parse().map_err(|_| {
                format!(
                    "invalid value for IntOrString: invalid value {}: strconv.Atoi: parsing {}: {}",
                    crate::validation::quote(s),
                    crate::validation::quote(digits),
                    if digits.bytes().all(|b| b.is_ascii_digit()) && !digits.is_empty() {
                        "value out of range"
                    } else {
                        "invalid syntax"
                    }
                )
            })?;
            Ok((v as f64 * total as f64 / 100.0).ceil() as i64)
        }
    }
}

/// The controller owner reference of a pod (`metav1.GetControllerOf`).
fn controller_of(pod: &Value) -> Option<&Value> {
    pod.at("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The finders of `getExpectedScale` for one controller reference: Ok(Some((uid, scale))) when
/// found, Ok(None) when not, Err for the errors that fail the sync.
fn find_controller(st: &State, r: &Value, ns: &str) -> Result<Option<(String, i64)>, String> {
    let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("");
    let api_version = s("apiVersion");
    let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [v] => ("", *v),
        [g, v] => (*g, *v),
        _ => {
            return Err(format!("unexpected GroupVersion string: {api_version}"));
        }
    };
    let kind = s("kind");
    // The workload controllers (informers in kube-controller-manager): kube-sim serves none,
    // so they are never found; their resources have a scale subresource, so the scale finder
    // finds nothing either.
    if version == "v1"
        && matches!(
            (group, kind),
            ("", "ReplicationController") | ("apps", "ReplicaSet" | "Deployment" | "StatefulSet")
        )
    {
        return Ok(None);
    }
    // Built-in owners without a scale subresource that kube-sim does not serve.
    if version == "v1"
        && let Some(gr) = match (group, kind) {
            ("apps", "DaemonSet") => Some("daemonsets.apps"),
            ("batch", "Job") => Some("jobs.batch"),
            ("batch", "CronJob") => Some("cronjobs.batch"),
            _ => None,
        }
    {
        return Err(format!("{gr} does not implement the scale subresource"));
    }
    let Some(def) = st
        .registry
        .defs()
        .iter()
        .find(|d| d.group == group && d.version == version && d.kind == kind)
        .cloned()
    else {
        return Err(format!(
            "no matches for kind {} in version {}",
            crate::validation::quote(kind),
            crate::validation::quote(api_version)
        ));
    };
    let Some(path) = def.scale_replicas_path.as_deref() else {
        let gr = if def.group.is_empty() {
            def.plural.clone()
        } else {
            format!("{}.{}", def.plural, def.group)
        };
        return Err(format!("{gr} does not implement the scale subresource"));
    };
    let ns = if def.namespaced { ns } else { "" };
    let Ok(owner) = st.get(&def, ns, s("name")) else {
        return Ok(None);
    };
    if owner.uid() != s("uid") {
        return Ok(None);
    }
    let pointer = format!("/{}", path.trim_start_matches('.').replace('.', "/"));
    let replicas = owner
        .value()
        .at(&pointer)
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Ok(Some((s("uid").to_string(), replicas)))
}

/// `getExpectedScale`: the summed scale of the pods' controllers (unmanaged pods count 0).
fn expected_scale(st: &State, pods: &[&Value], ns: &str) -> Result<i64, String> {
    let mut scales: Vec<(String, i64)> = Vec::new();
    for pod in pods {
        let Some(r) = controller_of(pod) else {
            continue; // unmanaged
        };
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
        if scales.iter().any(|(u, _)| u == uid) {
            continue;
        }
        match find_controller(st, r, ns)? {
            Some(found) => scales.push(found),
            None => {
                return Err(format!(
                    "found no controllers for pod {}",
                    crate::validation::quote(meta::meta_str(pod, "name"))
                ));
            }
        }
    }
    Ok(scales.iter().map(|(_, n)| n).sum())
}

/// `getExpectedPodCount`: (expectedPods, desiredHealthy).
fn expected_pod_count(
    st: &State,
    spec: &Value,
    pods: &[&Value],
    ns: &str,
) -> Result<(i64, i64), String> {
    if let Some(max) = spec.get("maxUnavailable").and_then(IntOrString::of) {
        let expected = expected_scale(st, pods, ns)?;
        let max = scaled_up(&max, expected)?;
        return Ok((expected, (expected - max).max(0)));
    }
    match spec.get("minAvailable").and_then(IntOrString::of) {
        Some(IntOrString::Int(i)) => Ok((pods.len() as i64, i64::from(i))),
        Some(min @ IntOrString::Str(_)) => {
            let expected = expected_scale(st, pods, ns)?;
            Ok((expected, scaled_up(&min, expected)?))
        }
        None => Ok((0, 0)),
    }
}

fn is_ready(pod: &Value) -> bool {
    pod.at("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// `apimeta.SetStatusCondition` of `DisruptionAllowed` in `status.conditions`.
fn set_condition(
    status: &mut Value,
    status_value: &str,
    reason: &str,
    message: &str,
    generation: i64,
) {
    if !status.get("conditions").is_some_and(Value::is_array) {
        status["conditions"] = json!([]);
    }
    let conds = status["conditions"].as_array_mut().expect("array");
    let mut c = json!({"type": "DisruptionAllowed", "status": status_value,
                       "lastTransitionTime": meta::now(), "reason": reason, "message": message});
    if generation != 0 {
        c["observedGeneration"] = json!(generation);
    }
    match conds.iter_mut().find(|x| x["type"] == "DisruptionAllowed") {
        None => conds.push(c),
        Some(old) => {
            if old["status"] == status_value && old.get("lastTransitionTime").is_some() {
                c["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = c;
        }
    }
}

fn int(v: &Value, field: &str) -> i64 {
    v.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// Syncs one budget (`trySync`, `failSafe` on error); Some(d): sync again after d (an entry of
/// `disruptedPods` expires then).
fn sync(inner: &Inner, ns: &str, name: &str) -> Option<Duration> {
    let mut st = inner.state();
    let d = defs(&st);
    let pdb = st.get(&d.pdbs, ns, name).ok()?.value();
    let generation = pdb
        .at("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let sel = pdb.at("/spec/selector");
    let all = st.list(&d.pods, Some(ns)).1;
    let pods: Vec<Value> = all
        .iter()
        .map(|p| p.value())
        .filter(|p| policy::selects(sel, labels(p)))
        .collect();
    let pods: Vec<&Value> = pods.iter().collect();
    let old_status = pdb.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut status = old_status.clone();
    let mut recheck = None;
    match expected_pod_count(&st, pdb.get("spec").unwrap_or(&Value::Null), &pods, ns) {
        Err(e) => {
            // failSafe.
            status["disruptionsAllowed"] = json!(0);
            let observed = int(&status, "observedGeneration");
            set_condition(&mut status, "False", "SyncFailed", &e, observed);
        }
        Ok((expected, desired)) => {
            let now = SystemTime::now();
            // buildDisruptedPodMap.
            let mut disrupted = Map::new();
            if let Some(old) = old_status.get("disruptedPods").and_then(Value::as_object) {
                for p in &pods {
                    if crate::deletion::terminating(p) {
                        continue;
                    }
                    let Some(t) = old.get(meta::meta_str(p, "name")) else {
                        continue;
                    };
                    let Some(at) = t.as_str().and_then(meta::parse_rfc3339) else {
                        continue;
                    };
                    let expires = at + DELETION_TIMEOUT;
                    if let Ok(left) = expires.duration_since(now) {
                        recheck = Some(recheck.map_or(left, |r: Duration| r.min(left)));
                        disrupted.insert(meta::meta_str(p, "name").to_string(), t.clone());
                    }
                }
            }
            // countHealthyPods.
            let current = pods
                .iter()
                .filter(|p| {
                    !crate::deletion::terminating(p)
                        && !disrupted.contains_key(meta::meta_str(p, "name"))
                        && is_ready(p)
                })
                .count() as i64;
            let mut allowed = current - desired;
            if expected <= 0 || allowed <= 0 {
                allowed = 0;
            }
            let cond_ok = old_status
                .get("conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "DisruptionAllowed"))
                .is_some_and(|c| {
                    int(&old_status, "observedGeneration") == generation
                        && if allowed > 0 {
                            c["status"] == "True" && c["reason"] == "SufficientPods"
                        } else {
                            c["status"] == "False" && c["reason"] == "InsufficientPods"
                        }
                });
            let old_disrupted = old_status
                .get("disruptedPods")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if int(&old_status, "currentHealthy") == current
                && int(&old_status, "desiredHealthy") == desired
                && int(&old_status, "expectedPods") == expected
                && int(&old_status, "disruptionsAllowed") == allowed
                && old_disrupted == disrupted
                && int(&old_status, "observedGeneration") == generation
                && cond_ok
            {
                return recheck;
            }
            status = json!({"currentHealthy": current, "desiredHealthy": desired,
                            "expectedPods": expected, "disruptionsAllowed": allowed,
                            "observedGeneration": generation});
            if !disrupted.is_empty() {
                status["disruptedPods"] = Value::Object(disrupted);
            }
            if let Some(c) = old_status.get("conditions") {
                status["conditions"] = c.clone();
            }
            if allowed > 0 {
                set_condition(&mut status, "True", "SufficientPods", "", generation);
            } else {
                set_condition(&mut status, "False", "InsufficientPods", "", generation);
            }
        }
    }
    if status == old_status {
        return recheck;
    }
    let mut new = pdb;
    new["status"] = status;
    if let Err(e) = st.update_by(
        &d.pdbs,
        ns,
        name,
        new,
        Part::Status,
        Some(&Manager::update(KCM)),
        None,
    ) {
        tracing::warn!(pdb = %format!("{ns}/{name}"), "updating the status failed: {e}");
    }
    recheck
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_up() {
        let p = |s: &str| IntOrString::Str(s.into());
        assert_eq!(scaled_up(&p("50%"), 5), Ok(3));
        assert_eq!(scaled_up(&p("34%"), 3), Ok(2));
        assert_eq!(scaled_up(&p("0%"), 7), Ok(0));
        assert_eq!(scaled_up(&p("100%"), 7), Ok(7));
        assert_eq!(scaled_up(&IntOrString::Int(2), 7), Ok(2));
        assert!(
            scaled_up(&p("99999999999999999999%"), 1)
                .unwrap_err()
                .contains("value out of range")
        );
    }
}
