//! The I/O-free core of the sharding controller (`shard-controller`): it decides which nodes
//! each scheduler's NodeShard should hold. [`config`] parses and validates the sharding
//! ConfigMap (and the deprecated flag form), [`policy`] implements `allocation-rate`, `warmup`
//! and `node-limit`, and [`assign`] runs the greedy, exclusive assignment with the anti-flap and
//! resync-significance rules. Nothing here talks to the API server, reads a clock or sleeps;
//! watching the ConfigMap, nodes and pods, writing NodeShards and electing a leader belong to
//! the caller.

pub mod assign;
pub mod config;
pub mod policy;

pub use assign::{
    MinNodesUnmet, NodeUsage, ShardAssignment, ShardNode, assign, should_update,
    significant_change, significant_usage_change,
};
pub use config::{ConfigError, SchedulerSpec, ShardingConfig, WeightedPolicy};
pub use policy::{Policy, PolicyError};
