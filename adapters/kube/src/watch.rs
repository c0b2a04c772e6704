//! Watches: pending pods for this scheduler, assigned pods from every scheduler (for
//! accounting), and nodes (with `--node-selector`), turned into engine inputs as they arrive.
//!
//! Each watch uses kube-runtime's `watcher` (list, then watch; relists on `410 Gone` and on
//! reconnect, with backoff). A relist (`Init` … `InitDone`) becomes one engine reset carrying
//! the complete set, so nothing is lost or duplicated across a relist. No object store is kept:
//! every event is converted (`convert`) and dropped.
//!
//! A pod that stops matching the pending watch (because it was bound) is reported as deleted by
//! the API server; that is why pending deletes only remove the pod from the queue, and only the
//! assigned-pods watch removes a pod's resources from its node.

use crate::convert::{is_pending_for, node_input, node_selected, pod_input};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use magma_engine::EngineHandle;
use magma_engine::core::Input;
use magma_engine::model::{NodeInput, PodInput};
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
            notify: Notify::new(),
        }
    }

    pub fn synced(&self) -> bool {
        self.pending.load(Ordering::Acquire)
            && self.bound.load(Ordering::Acquire)
            && self.nodes.load(Ordering::Acquire)
            && self.shards.load(Ordering::Acquire)
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

/// Start the three watches. They run until aborted.
pub fn spawn(
    client: Client,
    engine: EngineHandle,
    cfg: WatchConfig,
    sync: Arc<SyncState>,
) -> Vec<JoinHandle<()>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client);
    vec![
        tokio::spawn(watch_pending(
            pods.clone(),
            engine.clone(),
            cfg.clone(),
            sync.clone(),
        )),
        tokio::spawn(watch_bound(pods, engine.clone(), sync.clone())),
        tokio::spawn(watch_nodes(nodes, engine, cfg, sync)),
    ]
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
