//! The load the harness puts on the API server: the scenario's pods (created `creators` at a
//! time, every k-th unschedulable when asked), its watches over them (when each pod was seen
//! bound, or with its `Unschedulable` condition), the scheduler's pod informer held during the
//! ceiling, and the ceiling run itself (the harness binding pods as fast as the API accepts).
//! It uses the options (`options`) and the end-to-end helpers (`crate::e2e`).

use super::options::{Constraint, ProcOptions};
use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Mutex;

/// CPU of an unschedulable scenario pod: more than any simulated node has.
const UNSCHEDULABLE_CPU: &str = "100000";

/// The zone label [`Constraint::ZoneSpread`] spreads over.
const ZONE: &str = "topology.kubernetes.io/zone";

fn pod_object(
    ns: &str,
    name: &str,
    scheduler: &str,
    cpu: &str,
    constraint: Constraint,
) -> anyhow::Result<Pod> {
    let mut v = kube_sim::pod_object(ns, name, scheduler, cpu, "128Mi");
    v["metadata"]["labels"] = serde_json::json!({"magma-procs": "1"});
    let selector = serde_json::json!({"matchLabels": {"magma-procs": "1"}});
    match constraint {
        Constraint::None => {}
        Constraint::HostnameAntiAffinity => {
            v["spec"]["affinity"] = serde_json::json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}});
        }
        Constraint::ZoneSpread { .. } => {
            v["spec"]["topologySpreadConstraints"] = serde_json::json!([{
                "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector}]);
        }
    }
    Ok(serde_json::from_value(v)?)
}

/// Labels every node `topology.kubernetes.io/zone: zone-<i mod zones>` (by its index in the
/// name order), `creators` patches at a time.
pub(super) async fn label_zones(
    client: &kube::Client,
    zones: usize,
    creators: usize,
) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{ListParams, Patch, PatchParams};
    let api: Api<Node> = Api::all(client.clone());
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    let sem = Arc::new(tokio::sync::Semaphore::new(creators.max(1)));
    let mut tasks = Vec::with_capacity(names.len());
    for (i, name) in names.into_iter().enumerate() {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let patch = serde_json::json!({"metadata": {"labels": {ZONE: format!("zone-{}", i % zones.max(1))}}});
        tasks.push(tokio::spawn(async move {
            let r = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            drop(permit);
            r.map(|_| ())
                .with_context(|| format!("labelling node {name}"))
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// A scenario's creation: when each pod was created, and which of them (by index) ask for more
/// than any node has.
pub(super) struct Tracked<'a> {
    pub(super) created: Arc<Mutex<HashMap<String, Instant>>>,
    pub(super) unschedulable: &'a dyn Fn(usize) -> bool,
    pub(super) constraint: Constraint,
}

/// Create `n` pods named `{prefix}{i}` in `ns` for `scheduler`, `creators` at a time.
pub(super) async fn create_pods(
    client: &kube::Client,
    ns: &str,
    prefix: &str,
    scheduler: &str,
    n: usize,
    creators: usize,
    scenario: Option<Tracked<'_>>,
) -> anyhow::Result<()> {
    let (created, unschedulable, constraint) = match scenario {
        Some(t) => (Some(t.created), t.unschedulable, t.constraint),
        None => (
            None,
            &(|_| false) as &dyn Fn(usize) -> bool,
            Constraint::None,
        ),
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let sem = Arc::new(tokio::sync::Semaphore::new(creators.max(1)));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        let name = format!("{prefix}{i:07}");
        let cpu = if unschedulable(i) {
            UNSCHEDULABLE_CPU
        } else {
            "100m"
        };
        let p = pod_object(ns, &name, scheduler, cpu, constraint)?;
        let (api, created) = (api.clone(), created.clone());
        tasks.push(tokio::spawn(async move {
            if let Some(c) = &created {
                c.lock().await.insert(name, Instant::now());
            }
            let r = api.create(&PostParams::default(), &p).await;
            drop(permit);
            r.map(|_| ())
        }));
    }
    for t in tasks {
        t.await?.context("creating a pod")?;
    }
    Ok(())
}

/// The harness's bind watch: when each pod of namespace `ns` (labelled `magma-procs=1`) was
/// first seen bound. Runs in the ceiling run too, so the API serves the harness's watch in both.
/// Pods are decoded as the scheduler decodes them (`magma_kube::slim::Pod`: name and node are
/// all this watch reads): decoding full k8s-openapi pods made the harness the slowest watcher
/// of a 3,000 pods/s burst on two CPUs, often force-closed by the simulator, and its waits used
/// up the dispatch budget all watches share, so the scheduler's watch was closed with it
/// (13 of 32 runs; with slim pods 4 of 16: on two saturated CPUs every watcher still lags at
/// times; BENCHMARKS.md, "History").
fn bind_watch(
    client: &kube::Client,
    ns: &str,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
) -> tokio::task::JoinHandle<()> {
    watch_scenario(client, ns, bound, None)
}

/// [`bind_watch`], also noting when each pod was first seen with its `PodScheduled=False`
/// `Unschedulable` condition (`conditioned`).
pub(super) fn watch_scenario(
    client: &kube::Client,
    ns: &str,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
    conditioned: Option<Arc<Mutex<HashMap<String, Instant>>>>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<magma_kube::slim::Pod> = Api::namespaced(client.clone(), ns);
    let wc = watcher::Config::default().labels("magma-procs=1");
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, wc).boxed();
        while let Some(ev) = s.next().await {
            let Ok(Event::Apply(p) | Event::InitApply(p)) = ev else {
                continue;
            };
            let Some(name) = p.metadata.name.clone() else {
                continue;
            };
            if p.spec.and_then(|s| s.node_name).is_some() {
                bound.lock().await.entry(name).or_insert_with(Instant::now);
            } else if let Some(c) = &conditioned
                && p.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                    })
            {
                c.lock().await.entry(name).or_insert_with(Instant::now);
            }
        }
    })
}

/// A zero-cost scheduler's pod informer: the scheduler's own pod watch (its field selector),
/// every event decoded into the scheduler's pod type and dropped.
fn informer_watch(client: &kube::Client) -> tokio::task::JoinHandle<()> {
    let api: Api<magma_kube::slim::Pod> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, magma_kube::watch::pod_watch_config()).boxed();
        while s.next().await.is_some() {}
    })
}

/// The API's binding ceiling over this transport (`procs` module doc): `n` pods for a scheduler nobody
/// runs, in their own namespace, bound by the harness itself `creators` at a time.
pub(super) async fn ceiling(o: &ProcOptions, client: &kube::Client) -> anyhow::Result<f64> {
    let (nodes, n, creators) = (o.nodes, o.pods, o.creators);
    let ns = "magma-blast";
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    // The same watch as the scenario's, started as early (before the pods exist), so the
    // harness loads the API alike in both runs.
    let watch = bind_watch(client, ns, Arc::default());
    let informer = (!o.bare_ceiling).then(|| informer_watch(client));
    create_pods(client, ns, "blast-", "nobody", n, creators, None).await?;
    let sem = Arc::new(tokio::sync::Semaphore::new(creators.max(1)));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let name = format!("blast-{i:07}");
        let node = kube_sim::node_name(i % nodes.max(1));
        tasks.push(tokio::spawn(async move {
            let ok = crate::e2e::post_binding(&api, &name, node).await;
            drop(permit);
            ok
        }));
    }
    let mut ok = 0usize;
    for t in tasks {
        ok += usize::from(t.await.unwrap_or(false));
    }
    let rate = ok as f64 / start.elapsed().as_secs_f64();
    watch.abort();
    if let Some(i) = informer {
        i.abort();
    }
    anyhow::ensure!(ok == n, "the ceiling run bound {ok} of {n} pods");
    Ok(rate)
}
