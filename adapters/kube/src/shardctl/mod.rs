//! The sharding controller (`shard-controller`): it decides which nodes each scheduler's
//! NodeShard should hold and keeps the NodeShards' `spec.nodesDesired` in line.
//!
//! The I/O-free core: [`config`] parses and validates the sharding ConfigMap (and the
//! deprecated flag form), [`policy`] implements `allocation-rate`, `warmup` and `node-limit`,
//! [`assign`](mod@assign) runs the greedy, exclusive assignment with the anti-flap and resync-significance
//! rules, [`handoff`] keeps nodes that are still being released from moving again, [`plan`]
//! turns all that into the writes of one sync (including the stale-shard rules), and [`index`]
//! is the in-memory view of nodes and pod requests the watches feed. None of these talks to the
//! API server, reads a clock or sleeps.
//!
//! The runtime: [`flags`] (the binary's command line), [`controller`] (watches, leader
//! election, debounced triggers, conditional NodeShard writes) and [`metrics`] (its Prometheus
//! registry). `docs/shard-controller.md` is the user-facing description.

pub mod assign;
pub mod config;
pub mod controller;
pub mod flags;
pub mod handoff;
pub mod index;
pub mod metrics;
pub mod node;
pub mod plan;
pub mod policy;

pub use assign::{
    MinNodesUnmet, NodeUsage, ShardAssignment, ShardNode, assign, should_update,
    significant_change, significant_usage_change,
};
pub use config::{ConfigError, SchedulerSpec, ShardingConfig, WeightedPolicy};
pub use handoff::{InTransit, ObservedShard, in_transit, pin_in_transit};
pub use plan::{ShardWrite, SyncPlan, plan_sync};
pub use policy::{Policy, PolicyError};
