//! Watches: one pod informer (every pod not yet finished, as kube-scheduler's), nodes (with
//! `--node-selector`), and what the cross-node plugins read: namespaces (pod affinity
//! `namespaceSelector`), PersistentVolumeClaims (all namespaces), PersistentVolumes,
//! StorageClasses and CSINodes (`storage.k8s.io/v1`), ResourceClaims, ResourceSlices and
//! DeviceClasses (`resource.k8s.io/v1`, when served), and PodDisruptionBudgets (`policy/v1`,
//! preemption), turned into engine inputs as they arrive.
//! The PersistentVolumeClaim watch also feeds the binds waiting for their claims to be
//! provisioned (`prebind::Claims`), and the ResourceClaim and DeviceClass watches what
//! ResourceClaim PreBind reads (`dra::ResourceClaims`). Scheduling starts once every one of them has delivered its first list
//! ([`SyncState`]).
//!
//! Every watch goes through the relist feeder ([`crate::feed`]): kube-runtime's `watcher`
//! (list, then watch; relists on `410 Gone` and on reconnect, with backoff), each relist one
//! engine reset carrying the complete set, so nothing is lost or duplicated across a relist. No
//! object store is kept: every event is converted once (`convert`) and dropped.
//!
//! **One pod watch.** Pods are watched once, with kube-scheduler's field selector
//! `status.phase!=Succeeded,status.phase!=Failed`, and split in the handler: a pod with
//! `spec.nodeName` is assigned (any scheduler: accounting), a pod without one is pending and
//! ours if its `schedulerName` is, and anything else is skipped before it is converted. The
//! API server's watch cache serves that selector with a full-size watcher buffer; a watch on
//! the indexed `spec.nodeName` field gets a 10-event buffer and is force-closed under bursts
//! (issue 15). One watch also decodes each pod change once, not once per watch it matches.
//! A finished pod leaves the selector, so it arrives as a delete and frees its node.

use crate::convert::{
    claim_key, class_input, csi_node_input, is_pending_for, namespace_input, node_input,
    node_selected, pdb_input, pod_input, pv_input, pvc_input, resource_claim_input, slice_input,
    storage_class_input,
};
use crate::dra::ClaimState;
use crate::feed::{self, Change};
use crate::prebind::Claims;
use crate::slim::{Node, Pod};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::runtime::watcher;
use kube::{Api, Client};
use magma_engine::EngineHandle;
use magma_engine::core::Input;
use magma_engine::dra::DraInput;
use magma_engine::model::PodInput;
use magma_engine::pdb::PdbChange;
use magma_engine::volumes::StorageInput;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Which initial lists have completed.
#[derive(Debug)]
pub struct SyncState {
    pods: AtomicBool,
    nodes: AtomicBool,
    shards: AtomicBool,
    namespaces: AtomicBool,
    claims: AtomicBool,
    volumes: AtomicBool,
    classes: AtomicBool,
    csi_nodes: AtomicBool,
    resource_claims: AtomicBool,
    resource_slices: AtomicBool,
    device_classes: AtomicBool,
    pdbs: AtomicBool,
    notify: Notify,
}

impl SyncState {
    /// `shards`: whether the NodeShard watch is part of the sync (soft and hard mode).
    pub fn new(shards: bool) -> SyncState {
        SyncState {
            pods: AtomicBool::new(false),
            nodes: AtomicBool::new(false),
            shards: AtomicBool::new(!shards),
            namespaces: AtomicBool::new(false),
            claims: AtomicBool::new(false),
            volumes: AtomicBool::new(false),
            classes: AtomicBool::new(false),
            csi_nodes: AtomicBool::new(false),
            resource_claims: AtomicBool::new(false),
            resource_slices: AtomicBool::new(false),
            device_classes: AtomicBool::new(false),
            pdbs: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    fn flags(&self) -> [&AtomicBool; 12] {
        [
            &self.pods,
            &self.nodes,
            &self.shards,
            &self.namespaces,
            &self.claims,
            &self.volumes,
            &self.classes,
            &self.csi_nodes,
            &self.resource_claims,
            &self.resource_slices,
            &self.device_classes,
            &self.pdbs,
        ]
    }

    pub fn synced(&self) -> bool {
        self.flags().iter().all(|f| f.load(Ordering::Acquire))
    }

    /// The watches that have not delivered their first list yet (for the log).
    pub fn unsynced(&self) -> Vec<&'static str> {
        const NAMES: [&str; 12] = [
            "pods",
            "nodes",
            "nodeshards",
            "namespaces",
            "persistentvolumeclaims",
            "persistentvolumes",
            "storageclasses",
            "csinodes",
            "resourceclaims",
            "resourceslices",
            "deviceclasses",
            "poddisruptionbudgets",
        ];
        self.flags()
            .iter()
            .zip(NAMES)
            .filter(|(f, _)| !f.load(Ordering::Acquire))
            .map(|(_, n)| n)
            .collect()
    }

    fn mark(&self, flag: &AtomicBool) {
        flag.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// The NodeShard watch delivered its first list.
    pub fn mark_shards(&self) {
        self.mark(&self.shards);
    }

    /// Wait until every watch has delivered its initial list.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.synced() {
                return;
            }
            notified.await;
        }
    }
}

/// What the watches need to know.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub scheduler_name: String,
    pub node_selector: Vec<(String, String)>,
}

/// Start the watches. They run until aborted. `claims` hears every claim event (PreBind).
pub fn spawn(
    client: Client,
    engine: EngineHandle,
    cfg: WatchConfig,
    sync: Arc<SyncState>,
    claims: Arc<Claims>,
) -> Vec<JoinHandle<()>> {
    let mark = |flag: fn(&SyncState) -> &AtomicBool| {
        let sync = sync.clone();
        move || sync.mark(flag(&sync))
    };
    let all = watcher::Config::default;
    vec![
        tokio::spawn(feed_pods(
            feed::watch(
                Api::<Pod>::all(client.clone()),
                pod_watch_config(),
                "pods",
                pod_classifier(cfg.scheduler_name.clone()),
            ),
            engine.clone(),
            mark(|s| &s.pods),
        )),
        tokio::spawn(feed_nodes(
            Api::<Node>::all(client.clone()),
            cfg.node_selector,
            engine.clone(),
            mark(|s| &s.nodes),
        )),
        tokio::spawn(feed_kind(
            feed::watch(
                Api::<Namespace>::all(client.clone()),
                all(),
                "namespaces",
                |n: Namespace| namespace_input(&n),
            ),
            engine.clone(),
            Input::NamespaceApply,
            |n: Namespace| n.metadata.name.map(Input::NamespaceDelete),
            Input::NamespaceReset,
            mark(|s| &s.namespaces),
        )),
        tokio::spawn(feed_claims(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            engine.clone(),
            claims.clone(),
            mark(|s| &s.claims),
        )),
        tokio::spawn(feed_kind(
            feed::watch(
                Api::<PersistentVolume>::all(client.clone()),
                all(),
                "persistentvolumes",
                |v: PersistentVolume| pv_input(&v),
            ),
            engine.clone(),
            |v| Input::Storage(StorageInput::Pv(v)),
            |v: PersistentVolume| {
                v.metadata
                    .name
                    .map(|n| Input::Storage(StorageInput::PvDelete(n)))
            },
            |all| Input::Storage(StorageInput::PvReset(all)),
            mark(|s| &s.volumes),
        )),
        tokio::spawn(feed_kind(
            feed::watch(
                Api::<StorageClass>::all(client.clone()),
                all(),
                "storageclasses",
                |c: StorageClass| storage_class_input(&c),
            ),
            engine.clone(),
            |c| Input::Storage(StorageInput::Class(c)),
            |c: StorageClass| {
                c.metadata
                    .name
                    .map(|n| Input::Storage(StorageInput::ClassDelete(n)))
            },
            |all| Input::Storage(StorageInput::ClassReset(all)),
            mark(|s| &s.classes),
        )),
        tokio::spawn(feed_dra(
            client.clone(),
            engine.clone(),
            claims.clone(),
            [
                Box::new(mark(|s| &s.resource_claims)),
                Box::new(mark(|s| &s.resource_slices)),
                Box::new(mark(|s| &s.device_classes)),
            ],
        )),
        tokio::spawn(feed_pdbs(client.clone(), engine.clone(), mark(|s| &s.pdbs))),
        tokio::spawn(feed_kind(
            feed::watch(
                Api::<CSINode>::all(client),
                all(),
                "csinodes",
                |n: CSINode| csi_node_input(&n),
            ),
            engine.clone(),
            |n| Input::Storage(StorageInput::CsiNode(n)),
            |n: CSINode| {
                n.metadata
                    .name
                    .map(|n| Input::Storage(StorageInput::CsiNodeDelete(n)))
            },
            |all| Input::Storage(StorageInput::CsiNodeReset(all)),
            mark(|s| &s.csi_nodes),
        )),
    ]
}

/// kube-scheduler's pod informer: every pod that has not finished.
pub fn pod_watch_config() -> watcher::Config {
    watcher::Config::default().fields(POD_FIELD_SELECTOR)
}

/// The pod watch's field selector (kube-scheduler's `status.phase!=Succeeded,…Failed`).
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// A pod as the engine sees it: assigned to a node (by any scheduler), or pending for us.
#[derive(Debug)]
pub enum PodSeen {
    Assigned(PodInput),
    Pending(PodInput),
}

/// Splits the pod watch: assigned pods of every scheduler, pending pods of ours; other
/// schedulers' pending pods are skipped before they are converted.
pub fn pod_classifier(scheduler_name: String) -> impl FnMut(Pod) -> Option<PodSeen> + Send {
    move |p: Pod| {
        let assigned = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if assigned {
            pod_input(p).map(PodSeen::Assigned)
        } else if is_pending_for(&p, &scheduler_name) {
            pod_input(p).map(PodSeen::Pending)
        } else {
            None
        }
    }
}

/// Feed the pod watch's changes to the engine: a reset is one assigned-pods reset and one
/// pending-pods reset; a delete of an assigned pod frees its node, a pending one leaves the
/// queue (a bind in flight waits for its outcome).
pub async fn feed_pods(
    changes: impl Stream<Item = Change<PodSeen, Pod>>,
    engine: EngineHandle,
    synced: impl Fn(),
) {
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                let (mut assigned, mut pending) = (Vec::new(), Vec::new());
                for p in all {
                    match p {
                        PodSeen::Assigned(i) => assigned.push(i),
                        PodSeen::Pending(i) => pending.push(i),
                    }
                }
                tracing::debug!(
                    assigned = assigned.len(),
                    pending = pending.len(),
                    "pod watch listed"
                );
                engine.send(Input::BoundPodReset(assigned));
                engine.send(Input::PendingPodReset(pending));
                synced();
            }
            Change::Apply(PodSeen::Assigned(i) | PodSeen::Pending(i)) => {
                engine.send(Input::PodApply(i));
            }
            Change::Delete(p) => {
                let assigned = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty());
                if let Some(uid) = p.metadata.uid {
                    tracing::trace!(pod = ?p.metadata.name, assigned, "pod left the watch");
                    engine.send(if assigned {
                        Input::PodDelete { uid }
                    } else {
                        Input::PendingPodDelete { uid }
                    });
                }
            }
        }
    }
}

/// Feed one kind's changes: `apply`, `delete` (from the last state), `reset` (the complete
/// set); `synced` after each list.
async fn feed_kind<K, T>(
    changes: impl Stream<Item = Change<T, K>>,
    engine: EngineHandle,
    apply: fn(T) -> Input,
    delete: fn(K) -> Option<Input>,
    reset: fn(Vec<T>) -> Input,
    synced: impl Fn(),
) {
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                engine.send(reset(all));
                synced();
            }
            Change::Apply(i) => {
                engine.send(apply(i));
            }
            Change::Delete(k) => {
                if let Some(i) = delete(k) {
                    engine.send(i);
                }
            }
        }
    }
}

/// Nodes: a node that stops matching `--node-selector` is deleted from the engine's view.
async fn feed_nodes(
    api: Api<Node>,
    selector: Vec<(String, String)>,
    engine: EngineHandle,
    synced: impl Fn(),
) {
    let convert = move |n: Node| Some((node_selected(&n, &selector), node_input(&n)?));
    let changes = feed::watch(api, watcher::Config::default(), "nodes", convert);
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                let selected = all.into_iter().filter(|(s, _)| *s).map(|(_, n)| n);
                engine.send(Input::NodeReset(selected.collect()));
                synced();
            }
            Change::Apply((true, n)) => {
                engine.send(Input::NodeApply(n));
            }
            // It no longer matches --node-selector: stop scheduling onto it.
            Change::Apply((false, n)) => {
                engine.send(Input::NodeDelete(n.name));
            }
            Change::Delete(n) => {
                if let Some(name) = n.metadata.name {
                    engine.send(Input::NodeDelete(name));
                }
            }
        }
    }
}

/// The DRA objects (`resource.k8s.io/v1`): ResourceClaims, ResourceSlices and DeviceClasses,
/// when the API server serves the group. A server without it has none (a pod naming a claim
/// then waits for it, `dra`): the watches are not started and count as synced. `synced`: the
/// claims', slices' and classes' marks.
async fn feed_dra(
    client: Client,
    engine: EngineHandle,
    claims: Arc<Claims>,
    synced: [Box<dyn Fn() + Send>; 3],
) {
    let [claims_synced, slices_synced, classes_synced] = synced;
    if !serves(&client, RESOURCE_API).await {
        tracing::info!("{RESOURCE_API} is not served: pods with resource claims will wait");
        engine.send(Input::Dra(DraInput::ClaimReset(Vec::new())));
        engine.send(Input::Dra(DraInput::SliceReset(Vec::new())));
        engine.send(Input::Dra(DraInput::ClassReset(Vec::new())));
        claims_synced();
        slices_synced();
        classes_synced();
        return;
    }
    tokio::join!(
        feed_resource_claims(
            client.clone(),
            engine.clone(),
            claims.clone(),
            claims_synced
        ),
        feed_slices(client.clone(), engine.clone(), slices_synced),
        feed_classes(client, engine, claims, classes_synced),
    );
}

/// A claim as the engine and PreBind see it, with what Magma cannot allocate as it asks.
type ConvertedClaim = (
    magma_engine::dra::ClaimInput,
    Vec<String>,
    (String, String),
    ClaimState,
);

fn convert_claim(c: ResourceClaim) -> Option<ConvertedClaim> {
    let (input, problems) = resource_claim_input(&c)?;
    let key = (input.namespace.clone(), input.name.clone());
    Some((input, problems, key, ClaimState::of(&c)))
}

fn warn_claim(problems: &[String]) {
    for p in problems {
        tracing::warn!(problem = %p, "resource claim request not supported; its pods wait");
    }
}

/// ResourceClaims feed the engine and PreBind's view of them (`dra::ResourceClaims`).
async fn feed_resource_claims(
    client: Client,
    engine: EngineHandle,
    claims: Arc<Claims>,
    synced: impl Fn(),
) {
    let changes = feed::watch(
        Api::<ResourceClaim>::all(client),
        watcher::Config::default(),
        "resourceclaims",
        convert_claim,
    );
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                let mut inputs = Vec::with_capacity(all.len());
                let mut states = Vec::with_capacity(all.len());
                for (input, problems, key, state) in all {
                    warn_claim(&problems);
                    inputs.push(input);
                    states.push((key, state));
                }
                claims.resource.relisted(states);
                engine.send(Input::Dra(DraInput::ClaimReset(inputs)));
                synced();
            }
            Change::Apply((input, problems, (namespace, name), state)) => {
                warn_claim(&problems);
                claims.resource.put(namespace, name, state);
                engine.send(Input::Dra(DraInput::Claim(input)));
            }
            Change::Delete(c) => {
                claims.resource.deleted(&c);
                if let (Some(namespace), Some(name)) = (c.metadata.namespace, c.metadata.name) {
                    engine.send(Input::Dra(DraInput::ClaimDelete { namespace, name }));
                }
            }
        }
    }
}

/// ResourceSlices. A slice the engine cannot take is logged and removed from its view (its
/// earlier version's devices are not allocated any more); the others are not affected.
async fn feed_slices(client: Client, engine: EngineHandle, synced: impl Fn()) {
    let changes = feed::watch(
        Api::<ResourceSlice>::all(client),
        watcher::Config::default(),
        "resourceslices",
        |s: ResourceSlice| slice_input(&s),
    );
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                let mut inputs = Vec::with_capacity(all.len());
                for s in all {
                    match s {
                        Ok(i) => inputs.push(i),
                        Err(r) => tracing::warn!(error = %r.error, "resource slice left out"),
                    }
                }
                engine.send(Input::Dra(DraInput::SliceReset(inputs)));
                synced();
            }
            Change::Apply(Ok(i)) => {
                engine.send(Input::Dra(DraInput::Slice(i)));
            }
            Change::Apply(Err(r)) => {
                tracing::warn!(error = %r.error, "resource slice left out");
                engine.send(Input::Dra(DraInput::SliceDelete(r.name)));
            }
            Change::Delete(s) => {
                if let Some(name) = s.metadata.name {
                    engine.send(Input::Dra(DraInput::SliceDelete(name)));
                }
            }
        }
    }
}

/// DeviceClasses feed the engine (their selectors) and PreBind (their configs).
async fn feed_classes(
    client: Client,
    engine: EngineHandle,
    claims: Arc<Claims>,
    synced: impl Fn(),
) {
    let changes = feed::watch(
        Api::<DeviceClass>::all(client),
        watcher::Config::default(),
        "deviceclasses",
        |c: DeviceClass| {
            let input = class_input(&c)?;
            Some((input, c.spec.config.unwrap_or_default()))
        },
    );
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                let (inputs, configs): (Vec<_>, Vec<_>) = all
                    .into_iter()
                    .map(|(i, config)| {
                        let name = i.name.clone();
                        (i, (name, config))
                    })
                    .unzip();
                claims.resource.classes_relisted(configs);
                engine.send(Input::Dra(DraInput::ClassReset(inputs)));
                synced();
            }
            Change::Apply((input, config)) => {
                claims.resource.put_class(input.name.clone(), config);
                engine.send(Input::Dra(DraInput::Class(input)));
            }
            Change::Delete(c) => {
                claims.resource.class_deleted(&c);
                if let Some(name) = c.metadata.name {
                    engine.send(Input::Dra(DraInput::ClassDelete(name)));
                }
            }
        }
    }
}

/// PodDisruptionBudgets (`policy/v1`), for preemption's choice of victims. A server without
/// the group has none: the watch is not started and counts as synced.
async fn feed_pdbs(client: Client, engine: EngineHandle, synced: impl Fn()) {
    if !serves(&client, POLICY_API).await {
        tracing::info!("{POLICY_API} is not served: preemption sees no disruption budgets");
        engine.send(Input::Pdb(PdbChange::Reset(Vec::new())));
        synced();
        return;
    }
    feed_kind(
        feed::watch(
            Api::<PodDisruptionBudget>::all(client),
            watcher::Config::default(),
            "poddisruptionbudgets",
            |p: PodDisruptionBudget| pdb_input(&p),
        ),
        engine,
        |p| Input::Pdb(PdbChange::Apply(p)),
        |p: PodDisruptionBudget| {
            let (namespace, name) = (p.metadata.namespace?, p.metadata.name?);
            Some(Input::Pdb(PdbChange::Delete { namespace, name }))
        },
        |all| Input::Pdb(PdbChange::Reset(all)),
        synced,
    )
    .await
}

/// The PodDisruptionBudget API group and version the scheduler reads.
pub const POLICY_API: &str = "policy/v1";

/// The DRA API group and version the scheduler reads.
pub const RESOURCE_API: &str = "resource.k8s.io/v1";

/// Whether the API server serves `group/version` (its discovery document exists). Errors other
/// than 404 are retried: discovery passed at start, so they are transient.
async fn serves(client: &Client, group_version: &str) -> bool {
    let mut backoff = std::time::Duration::from_millis(200);
    loop {
        match client.list_api_group_resources(group_version).await {
            Ok(_) => return true,
            Err(kube::Error::Api(s)) if s.code == 404 => return false,
            Err(e) => {
                tracing::warn!(error = %e, "discovery of {group_version} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(std::time::Duration::from_secs(10));
            }
        }
    }
}

/// Claims feed the engine and the binds waiting for them (PreBind); a relist tells those
/// binds which claims are gone.
async fn feed_claims(
    api: Api<PersistentVolumeClaim>,
    engine: EngineHandle,
    claims: Arc<Claims>,
    synced: impl Fn(),
) {
    let changes = feed::watch(
        api,
        watcher::Config::default(),
        "persistentvolumeclaims",
        Some,
    );
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(all) => {
                for c in &all {
                    claims.observe(c);
                }
                let keys: Vec<(String, String)> = all.iter().filter_map(claim_key).collect();
                claims.relisted(keys.iter().map(|(ns, n)| (ns.as_str(), n.as_str())));
                let inputs = all.iter().filter_map(pvc_input).collect();
                engine.send(Input::Storage(StorageInput::PvcReset(inputs)));
                synced();
            }
            Change::Apply(c) => {
                claims.observe(&c);
                if let Some(i) = pvc_input(&c) {
                    engine.send(Input::Storage(StorageInput::Pvc(i)));
                }
            }
            Change::Delete(c) => {
                claims.deleted(&c);
                if let Some((namespace, name)) = claim_key(&c) {
                    engine.send(Input::Storage(StorageInput::PvcDelete { namespace, name }));
                }
            }
        }
    }
}
