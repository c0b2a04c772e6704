//! The sharding controller's Prometheus metrics (text format 0.0.4, prometheus-client like the
//! scheduler's). This module owns the metric definitions and their storage; the controller
//! records into it and the admin server encodes it. Recording rates are a few per sync, so the
//! prometheus-client families (a lock per new label set) are fine here.
//!
//! | Name | Type | Labels |
//! |---|---|---|
//! | `magma_shardctl_syncs_total` | counter | `result` = `ok` \| `error` |
//! | `magma_shardctl_sync_duration_seconds` | histogram | – |
//! | `magma_shardctl_shard_nodes` | gauge (size of `spec.nodesDesired`) | `shard` |
//! | `magma_shardctl_config_reloads_total` | counter | `result` = `ok` \| `rejected` |
//! | `magma_shardctl_leader` | gauge 0/1 | – |
//! | `magma_shardctl_nodeshard_writes_total` | counter | `verb` = `create` \| `update` \| `delete`, `result` = `ok` \| `conflict` \| `error` |

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// The controller's metrics; clones share one registry.
#[derive(Clone)]
pub struct ControllerMetrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    syncs: Family<Labels, Counter>,
    sync_duration: Histogram,
    shard_nodes: Family<Labels, Gauge>,
    reloads: Family<Labels, Counter>,
    leader: Gauge,
    writes: Family<Labels, Counter>,
}

impl fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn result(r: &str) -> Labels {
    vec![("result", r.to_owned())]
}

impl ControllerMetrics {
    pub fn new() -> ControllerMetrics {
        let syncs = Family::<Labels, Counter>::default();
        // 1 ms .. ~33 s: a sync is a computation plus a few API round trips.
        let sync_duration = Histogram::new(exponential_buckets(0.001, 2.0, 16));
        let shard_nodes = Family::<Labels, Gauge>::default();
        let reloads = Family::<Labels, Counter>::default();
        let leader = Gauge::default();
        let writes = Family::<Labels, Counter>::default();
        // Known label values are present from the start (at 0), so rates work at once.
        for r in ["ok", "error"] {
            let _ = syncs.get_or_create(&result(r));
        }
        for r in ["ok", "rejected"] {
            let _ = reloads.get_or_create(&result(r));
        }
        for verb in ["create", "update", "delete"] {
            for r in ["ok", "conflict", "error"] {
                let _ = writes
                    .get_or_create(&vec![("verb", verb.to_owned()), ("result", r.to_owned())]);
            }
        }
        let mut registry = Registry::default();
        registry.register(
            "magma_shardctl_syncs",
            "Shard syncs by result",
            syncs.clone(),
        );
        registry.register(
            "magma_shardctl_sync_duration_seconds",
            "Duration of one shard sync (computation and NodeShard writes)",
            sync_duration.clone(),
        );
        registry.register(
            "magma_shardctl_shard_nodes",
            "Nodes in each NodeShard's spec.nodesDesired",
            shard_nodes.clone(),
        );
        registry.register(
            "magma_shardctl_config_reloads",
            "Sharding ConfigMap loads by result (rejected: invalid, empty or missing sharding.yaml)",
            reloads.clone(),
        );
        registry.register(
            "magma_shardctl_leader",
            "1 while this replica leads (writes NodeShards)",
            leader.clone(),
        );
        registry.register(
            "magma_shardctl_nodeshard_writes",
            "NodeShard API writes by verb and result",
            writes.clone(),
        );
        ControllerMetrics {
            inner: Arc::new(Inner {
                registry,
                syncs,
                sync_duration,
                shard_nodes,
                reloads,
                leader,
                writes,
            }),
        }
    }

    /// One sync finished after `took`.
    pub fn observe_sync(&self, ok: bool, took: Duration) {
        let i = &self.inner;
        i.syncs
            .get_or_create(&result(if ok { "ok" } else { "error" }))
            .inc();
        i.sync_duration.observe(took.as_secs_f64());
    }

    pub fn observe_reload(&self, ok: bool) {
        self.inner
            .reloads
            .get_or_create(&result(if ok { "ok" } else { "rejected" }))
            .inc();
    }

    /// `result`: `ok`, `conflict` or `error`.
    pub fn observe_write(&self, verb: &'static str, result: &'static str) {
        self.inner
            .writes
            .get_or_create(&vec![
                ("verb", verb.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
    }

    pub fn set_leader(&self, leading: bool) {
        self.inner.leader.set(i64::from(leading));
    }

    pub fn set_shard_nodes(&self, shard: &str, nodes: usize) {
        self.inner
            .shard_nodes
            .get_or_create(&vec![("shard", shard.to_owned())])
            .set(i64::try_from(nodes).unwrap_or(i64::MAX));
    }

    /// The NodeShard is gone: drop its series.
    pub fn remove_shard(&self, shard: &str) {
        self.inner
            .shard_nodes
            .remove(&vec![("shard", shard.to_owned())]);
    }

    /// The text exposition (format 0.0.4, [`crate::metrics::CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.inner.registry)
        {
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_promised_names() {
        let m = ControllerMetrics::new();
        m.observe_sync(true, Duration::from_millis(3));
        m.observe_reload(false);
        m.observe_write("update", "conflict");
        m.set_leader(true);
        m.set_shard_nodes("agent-scheduler", 7);
        let text = m.encode();
        for line in [
            "magma_shardctl_syncs_total{result=\"ok\"} 1",
            "magma_shardctl_syncs_total{result=\"error\"} 0",
            "magma_shardctl_sync_duration_seconds_count 1",
            "magma_shardctl_shard_nodes{shard=\"agent-scheduler\"} 7",
            "magma_shardctl_config_reloads_total{result=\"rejected\"} 1",
            "magma_shardctl_leader 1",
            "magma_shardctl_nodeshard_writes_total{verb=\"update\",result=\"conflict\"} 1",
            "# TYPE magma_shardctl_sync_duration_seconds histogram",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        m.remove_shard("agent-scheduler");
        assert!(!m.encode().contains("shard=\"agent-scheduler\""));
    }
}
