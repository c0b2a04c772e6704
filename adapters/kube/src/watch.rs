//! Watches: pending pods for this scheduler, assigned pods from every scheduler (for
//! accounting), nodes (with `--node-selector`), and what the cross-node plugins read:
//! namespaces (pod affinity `namespaceSelector`), PersistentVolumeClaims (all namespaces),
//! PersistentVolumes, StorageClasses and CSINodes (`storage.k8s.io/v1`), turned into engine
//! inputs as they arrive. The claim watch also feeds the binds waiting for their claims to be
//! provisioned (`prebind::Claims`). Scheduling starts once every one of them has delivered its
//! first list ([`SyncState`]).
//!
//! Each watch uses kube-runtime's `watcher` (list, then watch; relists on `410 Gone` and on
//! reconnect, with backoff). A relist (`Init` … `InitDone`) becomes one engine reset carrying
//! the complete set, so nothing is lost or duplicated across a relist. No object store is kept:
//! every event is converted (`convert`) and dropped.
//!
//! A pod that stops matching the pending watch (because it was bound) is reported as deleted by
//! the API server; that is why pending deletes only remove the pod from the queue, and only the
//! assigned-pods watch removes a pod's resources from its node.

use crate::convert::{
    claim_key, csi_node_input, is_pending_for, namespace_input, node_input, node_selected,
    pod_input, pv_input, pvc_input, storage_class_input,
};
use crate::prebind::Claims;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use magma_engine::EngineHandle;
use magma_engine::core::Input;
use magma_engine::model::{NodeInput, PodInput};
use magma_engine::volumes::StorageInput;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Which initial lists have completed.
#[derive(Debug)]
pub struct SyncState {
    pending: AtomicBool,
    bound: AtomicBool,
    nodes: AtomicBool,
    shards: AtomicBool,
    namespaces: AtomicBool,
    claims: AtomicBool,
    volumes: AtomicBool,
    classes: AtomicBool,
    csi_nodes: AtomicBool,
    notify: Notify,
}

impl SyncState {
    /// `shards`: whether the NodeShard watch is part of the sync (soft and hard mode).
    pub fn new(shards: bool) -> SyncState {
        SyncState {
            pending: AtomicBool::new(false),
            bound: AtomicBool::new(false),
            nodes: AtomicBool::new(false),
            shards: AtomicBool::new(!shards),
            namespaces: AtomicBool::new(false),
            claims: AtomicBool::new(false),
            volumes: AtomicBool::new(false),
            classes: AtomicBool::new(false),
            csi_nodes: AtomicBool::new(false),
            notify: Notify::new(),
        }
    }

    fn flags(&self) -> [&AtomicBool; 9] {
        [
            &self.pending,
            &self.bound,
            &self.nodes,
            &self.shards,
            &self.namespaces,
            &self.claims,
            &self.volumes,
            &self.classes,
            &self.csi_nodes,
        ]
    }

    pub fn synced(&self) -> bool {
        self.flags().iter().all(|f| f.load(Ordering::Acquire))
    }

    /// The watches that have not delivered their first list yet (for the log).
    pub fn unsynced(&self) -> Vec<&'static str> {
        const NAMES: [&str; 9] = [
            "pending pods",
            "assigned pods",
            "nodes",
            "nodeshards",
            "namespaces",
            "persistentvolumeclaims",
            "persistentvolumes",
            "storageclasses",
            "csinodes",
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
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let mark = |flag: fn(&SyncState) -> &AtomicBool| {
        let sync = sync.clone();
        move || sync.mark(flag(&sync))
    };
    vec![
        tokio::spawn(watch_pending(
            pods.clone(),
            engine.clone(),
            cfg.clone(),
            sync.clone(),
        )),
        tokio::spawn(watch_bound(pods, engine.clone(), sync.clone())),
        tokio::spawn(watch_nodes(nodes, engine.clone(), cfg, sync.clone())),
        tokio::spawn(watch_kind(
            Api::<Namespace>::all(client.clone()),
            Feed {
                what: "namespaces",
                convert: namespace_input,
                apply: Input::NamespaceApply,
                delete: |n: &Namespace| n.metadata.name.clone().map(Input::NamespaceDelete),
                reset: Input::NamespaceReset,
            },
            engine.clone(),
            mark(|s| &s.namespaces),
            |_: &Event<Namespace>| {},
        )),
        tokio::spawn(watch_kind(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            Feed {
                what: "persistentvolumeclaims",
                convert: pvc_input,
                apply: |c| Input::Storage(StorageInput::Pvc(c)),
                delete: |c: &PersistentVolumeClaim| {
                    claim_key(c).map(|(namespace, name)| {
                        Input::Storage(StorageInput::PvcDelete { namespace, name })
                    })
                },
                reset: |all| Input::Storage(StorageInput::PvcReset(all)),
            },
            engine.clone(),
            mark(|s| &s.claims),
            claim_observer(claims),
        )),
        tokio::spawn(watch_kind(
            Api::<PersistentVolume>::all(client.clone()),
            Feed {
                what: "persistentvolumes",
                convert: pv_input,
                apply: |v| Input::Storage(StorageInput::Pv(v)),
                delete: |v: &PersistentVolume| {
                    v.metadata
                        .name
                        .clone()
                        .map(|n| Input::Storage(StorageInput::PvDelete(n)))
                },
                reset: |all| Input::Storage(StorageInput::PvReset(all)),
            },
            engine.clone(),
            mark(|s| &s.volumes),
            |_: &Event<PersistentVolume>| {},
        )),
        tokio::spawn(watch_kind(
            Api::<StorageClass>::all(client.clone()),
            Feed {
                what: "storageclasses",
                convert: storage_class_input,
                apply: |c| Input::Storage(StorageInput::Class(c)),
                delete: |c: &StorageClass| {
                    c.metadata
                        .name
                        .clone()
                        .map(|n| Input::Storage(StorageInput::ClassDelete(n)))
                },
                reset: |all| Input::Storage(StorageInput::ClassReset(all)),
            },
            engine.clone(),
            mark(|s| &s.classes),
            |_: &Event<StorageClass>| {},
        )),
        tokio::spawn(watch_kind(
            Api::<CSINode>::all(client),
            Feed {
                what: "csinodes",
                convert: csi_node_input,
                apply: |n| Input::Storage(StorageInput::CsiNode(n)),
                delete: |n: &CSINode| {
                    n.metadata
                        .name
                        .clone()
                        .map(|n| Input::Storage(StorageInput::CsiNodeDelete(n)))
                },
                reset: |all| Input::Storage(StorageInput::CsiNodeReset(all)),
            },
            engine,
            mark(|s| &s.csi_nodes),
            |_: &Event<CSINode>| {},
        )),
    ]
}

/// How one kind's objects become engine inputs.
struct Feed<K, T> {
    what: &'static str,
    /// `None`: the object cannot be identified; it is skipped.
    convert: fn(&K) -> Option<T>,
    apply: fn(T) -> Input,
    delete: fn(&K) -> Option<Input>,
    /// A relist: the complete set.
    reset: fn(Vec<T>) -> Input,
}

/// Watch every object of a kind: adds and changes as `apply`, deletions as `delete`, a relist
/// (`Init` … `InitDone`) as one `reset` with the complete set; `synced` after the first list.
/// `observe` sees every event first.
async fn watch_kind<K, T>(
    api: Api<K>,
    feed: Feed<K, T>,
    engine: EngineHandle,
    synced: impl Fn(),
    mut observe: impl FnMut(&Event<K>),
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<Vec<T>> = None;
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(error = %e, "{} watch error; retrying", feed.what);
                continue;
            }
        };
        observe(&ev);
        match ev {
            Event::Init => relist = Some(Vec::new()),
            Event::InitApply(o) => {
                if let (Some(list), Some(i)) = (relist.as_mut(), (feed.convert)(&o)) {
                    list.push(i);
                }
            }
            Event::InitDone => {
                engine.send((feed.reset)(relist.take().unwrap_or_default()));
                synced();
            }
            Event::Apply(o) => {
                if let Some(i) = (feed.convert)(&o) {
                    engine.send((feed.apply)(i));
                }
            }
            Event::Delete(o) => {
                if let Some(i) = (feed.delete)(&o) {
                    engine.send(i);
                }
            }
        }
    }
}

/// Hands claim events to the binds waiting for them; a relist's end tells them which claims
/// are gone.
fn claim_observer(claims: Arc<Claims>) -> impl FnMut(&Event<PersistentVolumeClaim>) {
    let mut seen: Option<Vec<(String, String)>> = None;
    move |ev| match ev {
        Event::Init => seen = Some(Vec::new()),
        Event::InitApply(c) => {
            if let (Some(seen), Some(k)) = (seen.as_mut(), claim_key(c)) {
                seen.push(k);
            }
            claims.observe(c);
        }
        Event::InitDone => {
            let seen = seen.take().unwrap_or_default();
            claims.relisted(seen.iter().map(|(ns, n)| (ns.as_str(), n.as_str())));
        }
        Event::Apply(c) => claims.observe(c),
        Event::Delete(c) => claims.deleted(c),
    }
}

async fn watch_pending(
    api: Api<Pod>,
    engine: EngineHandle,
    cfg: WatchConfig,
    sync: Arc<SyncState>,
) {
    let name = cfg.scheduler_name;
    let wc =
        watcher::Config::default().fields(&format!("spec.schedulerName={name},spec.nodeName="));
    let mut stream = watcher::watcher(api, wc).default_backoff().boxed();
    let mut relist: Option<Vec<PodInput>> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => relist = Some(Vec::new()),
            Ok(Event::InitApply(p)) => {
                if let (Some(list), true) = (relist.as_mut(), is_pending_for(&p, &name)) {
                    list.extend(pod_input(&p));
                }
            }
            Ok(Event::InitDone) => {
                engine.send(Input::PendingPodReset(relist.take().unwrap_or_default()));
                sync.mark(&sync.pending);
            }
            Ok(Event::Apply(p)) => {
                if let Some(i) = pod_input(&p) {
                    // A bound pod seen on this watch is accounted like any assigned pod.
                    if is_pending_for(&p, &name) || i.node_name.is_some() {
                        engine.send(Input::PodApply(i));
                    }
                }
            }
            Ok(Event::Delete(p)) => {
                if let Some(uid) = p.metadata.uid {
                    engine.send(Input::PendingPodDelete { uid });
                }
            }
            Err(e) => tracing::warn!(error = %e, "pending-pods watch error; retrying"),
        }
    }
}

async fn watch_bound(api: Api<Pod>, engine: EngineHandle, sync: Arc<SyncState>) {
    let wc = watcher::Config::default().fields("spec.nodeName!=");
    let mut stream = watcher::watcher(api, wc).default_backoff().boxed();
    let mut relist: Option<Vec<PodInput>> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => relist = Some(Vec::new()),
            Ok(Event::InitApply(p)) => {
                if let (Some(list), Some(i)) = (relist.as_mut(), pod_input(&p))
                    && i.node_name.is_some()
                {
                    list.push(i);
                }
            }
            Ok(Event::InitDone) => {
                engine.send(Input::BoundPodReset(relist.take().unwrap_or_default()));
                sync.mark(&sync.bound);
            }
            Ok(Event::Apply(p)) => {
                if let Some(i) = pod_input(&p).filter(|i| i.node_name.is_some()) {
                    engine.send(Input::PodApply(i));
                }
            }
            Ok(Event::Delete(p)) => {
                if let Some(uid) = p.metadata.uid {
                    engine.send(Input::PodDelete { uid });
                }
            }
            Err(e) => tracing::warn!(error = %e, "assigned-pods watch error; retrying"),
        }
    }
}

async fn watch_nodes(api: Api<Node>, engine: EngineHandle, cfg: WatchConfig, sync: Arc<SyncState>) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<Vec<NodeInput>> = None;
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => relist = Some(Vec::new()),
            Ok(Event::InitApply(n)) => {
                if let (Some(list), true) = (relist.as_mut(), node_selected(&n, &cfg.node_selector))
                {
                    list.extend(node_input(&n));
                }
            }
            Ok(Event::InitDone) => {
                engine.send(Input::NodeReset(relist.take().unwrap_or_default()));
                sync.mark(&sync.nodes);
            }
            Ok(Event::Apply(n)) => match node_input(&n) {
                Some(i) if node_selected(&n, &cfg.node_selector) => {
                    engine.send(Input::NodeApply(i));
                }
                // It no longer matches --node-selector: stop scheduling onto it.
                Some(i) => {
                    engine.send(Input::NodeDelete(i.name));
                }
                None => {}
            },
            Ok(Event::Delete(n)) => {
                if let Some(name) = n.metadata.name {
                    engine.send(Input::NodeDelete(name));
                }
            }
            Err(e) => tracing::warn!(error = %e, "nodes watch error; retrying"),
        }
    }
}
