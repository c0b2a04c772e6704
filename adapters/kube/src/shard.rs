//! The scheduler's side of sharding: the NodeShard watch (engine inputs) and the writer of this
//! scheduler's NodeShard status (the engine's [`ShardStatusIntent`]s). Used only in soft and
//! hard mode; in mode `none` Magma neither watches nor writes NodeShards, as upstream.
//!
//! The watch turns a relist into one `ShardReset`, so the coordinator always holds the complete
//! set. The writer owns the `/status` subresource of the one NodeShard named by
//! `--scheduler-sharding-name` and nothing else: it reads the object, replaces its status with
//! the engine's `nodesInUse` (recomputing `nodesToAdd`/`nodesToRemove` from the spec it just
//! read) and `lastUpdateTime = now`, conditional on the resourceVersion it read. A `409` means the
//! object changed meanwhile (usually the controller rewrote the spec): it re-reads and retries.
//! Every outcome goes back to the engine, which retries failures itself after a pause.
//!
//! The lister answers the engine's `ListNodePods`: before a node acquired from another shard
//! is used, its pods are listed with a consistent read (`spec.nodeName=<node>`) and fed to the
//! engine, so pods the previous owner bound moments ago count even if the pod watch lags.

use crate::convert::pod_input;
use crate::feed::Change;
use crate::metrics::{Metrics, ShardWriteLabel};
use crate::nodeshard::{NodeShard, status_for};
use crate::slim::Pod;
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use magma_engine::core::Input;
use magma_engine::{EngineHandle, ShardInput, ShardStatusIntent, StatusLists, WrittenStatus};
use std::time::Duration;

/// Attempts of one status write when it meets `409 Conflict`.
pub const CONFLICT_ATTEMPTS: u32 = 5;

/// The engine's view of a NodeShard. `None` without a name (cannot happen for a stored object).
pub fn shard_input(ns: &NodeShard) -> Option<ShardInput> {
    let status = ns.status.clone().unwrap_or_default();
    Some(ShardInput {
        name: ns.metadata.name.clone()?,
        nodes_desired: ns.spec.nodes_desired.clone(),
        nodes_in_use: status.nodes_in_use,
        nodes_to_add: status.nodes_to_add,
        nodes_to_remove: status.nodes_to_remove,
        resource_version: ns.metadata.resource_version.clone(),
    })
}

/// Watch every NodeShard and feed the engine until aborted. `synced` is called once the first
/// list has been delivered.
pub async fn watch(
    client: Client,
    engine: EngineHandle,
    own: String,
    synced: impl Fn() + Send + 'static,
) {
    let api: Api<NodeShard> = Api::all(client);
    let changes = crate::feed::watch(api, watcher::Config::default(), "NodeShard", |ns| {
        shard_input(&ns)
    });
    let mut changes = std::pin::pin!(changes);
    while let Some(change) = changes.next().await {
        match change {
            Change::Reset(list) => {
                if !list.iter().any(|s| s.name == own) {
                    tracing::warn!(
                        nodeshard = %own,
                        "this scheduler's NodeShard does not exist: hard mode schedules no pod \
                         and soft mode schedules on every node until it is created"
                    );
                }
                engine.send(Input::ShardReset(list));
                synced();
            }
            Change::Apply(s) => {
                engine.send(Input::ShardApply(s));
            }
            Change::Delete(ns) => {
                if let Some(name) = ns.metadata.name {
                    if name == own {
                        tracing::warn!(nodeshard = %own, "this scheduler's NodeShard was deleted");
                    }
                    engine.send(Input::ShardDelete(name));
                }
            }
        }
    }
}

/// Write every status intent in turn, reporting each outcome to the engine.
pub async fn run_writer(
    client: Client,
    engine: EngineHandle,
    metrics: Metrics,
    rx: flume::Receiver<ShardStatusIntent>,
) {
    let api: Api<NodeShard> = Api::all(client);
    while let Ok(intent) = rx.recv_async().await {
        let written = write_status(&api, &intent, &metrics).await;
        engine.send(Input::ShardStatusWritten(written));
    }
}

/// Answer every `ListNodePods` request: list each node's pods and send them in one
/// `NodePodsListed` answer. A failed list is retried with backoff until it succeeds.
pub async fn run_lister(client: Client, engine: EngineHandle, rx: flume::Receiver<Vec<String>>) {
    let api: Api<Pod> = Api::all(client);
    while let Ok(nodes) = rx.recv_async().await {
        let mut listed = Vec::new();
        for node in &nodes {
            let lp = ListParams::default().fields(&format!("spec.nodeName={node}"));
            let mut wait = Duration::from_millis(200);
            let pods = loop {
                match api.list(&lp).await {
                    Ok(list) => {
                        tracing::debug!(
                            %node,
                            pods = list.items.len(),
                            resource_version = list.metadata.resource_version.as_deref().unwrap_or(""),
                            "listed the pods of an acquired node"
                        );
                        break list.items;
                    }
                    Err(e) => {
                        tracing::warn!(%node, error = %e, "cannot list the pods of an acquired node; retrying");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(10));
                    }
                }
            };
            listed.extend(pods.into_iter().filter_map(pod_input));
        }
        engine.send(Input::NodePodsListed {
            nodes,
            pods: listed,
        });
    }
}

/// One status write (see the module doc). Returns the status as the server stored it, with the
/// object's resourceVersion after the write, or `None`.
pub async fn write_status(
    api: &Api<NodeShard>,
    intent: &ShardStatusIntent,
    metrics: &Metrics,
) -> Option<WrittenStatus> {
    let name = &*intent.shard;
    for attempt in 1..=CONFLICT_ATTEMPTS {
        let mut current = match api.get(name).await {
            Ok(ns) => ns,
            Err(e) => {
                metrics.observe_shard_write(ShardWriteLabel::Error);
                tracing::warn!(nodeshard = name, error = %e, "cannot read the NodeShard to update its status");
                return None;
            }
        };
        let mut status = status_for(&intent.nodes_in_use, &current.spec.nodes_desired);
        status.last_update_time = Some(Time(now()));
        let lists = StatusLists {
            nodes_in_use: status.nodes_in_use.clone(),
            nodes_to_add: status.nodes_to_add.clone(),
            nodes_to_remove: status.nodes_to_remove.clone(),
        };
        current.status = Some(status);
        match api
            .replace_status(name, &PostParams::default(), &current)
            .await
        {
            Ok(stored) => {
                metrics.observe_shard_write(ShardWriteLabel::Ok);
                let resource_version = stored.metadata.resource_version;
                tracing::debug!(
                    nodeshard = name,
                    in_use = ?lists.nodes_in_use,
                    to_add = lists.nodes_to_add.len(),
                    to_remove = lists.nodes_to_remove.len(),
                    resource_version = resource_version.as_deref().unwrap_or(""),
                    "NodeShard status written"
                );
                return Some(WrittenStatus {
                    status: lists,
                    resource_version,
                });
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                metrics.observe_shard_write(ShardWriteLabel::Conflict);
                tracing::debug!(
                    nodeshard = name,
                    attempt,
                    "NodeShard changed meanwhile; re-reading"
                );
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
            }
            Err(e) => {
                metrics.observe_shard_write(ShardWriteLabel::Error);
                tracing::warn!(nodeshard = name, error = %e, "NodeShard status write failed");
                return None;
            }
        }
    }
    tracing::warn!(
        nodeshard = name,
        "NodeShard status write kept conflicting; retrying later"
    );
    None
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}
