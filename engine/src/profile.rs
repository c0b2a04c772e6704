//! The compiled configuration the workers use: a [`Profile`], carried by every snapshot so that
//! a reload takes effect at the next cycle.
//!
//! Owns these plain types only; it uses nothing else in the engine. Who fills them and who reads
//! them sits above it:
//! - `conf` compiles a configuration file into a `Profile` (`Profile::parse`, `Profile::compile`;
//!   `Profile::default` is the built-in configuration) and validates the sampling flags
//!   (`Sampling::new`);
//! - `plugins` declares each plugin's switch or weight, which give [`FilterSwitches`] and
//!   [`ScoreWeights`] their defaults, their argument keys and their reading (`DEFAULT`, `OFF`,
//!   `NONE`, `keys`, `KEYS`, `read`, `max_total`: the `plugins!` chain in `plugins/mod.rs`, which
//!   must name exactly the fields below, as the compiler checks).

/// Which filters are on (`predicates` arguments; `plugins::Filter::SWITCH`), one field per
/// filter of the chain, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterSwitches {
    pub fit: bool,
    pub nominated_room: bool,
    pub pod_count: bool,
    pub node_unschedulable: bool,
    pub node_name: bool,
    pub node_affinity: bool,
    pub taint_toleration: bool,
    pub node_ports: bool,
    pub inter_pod_affinity: bool,
    pub node_volume_limits: bool,
    pub volume_zone: bool,
    pub pod_topology_spread: bool,
    pub volume_binding: bool,
    pub dynamic_resources: bool,
}

/// Scorer weights (`nodeorder` arguments; `plugins::Scorer::WEIGHT`), one field per scorer of
/// the chain, plain ones first, then the normalised ones. Zero disables a scorer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreWeights {
    pub least_allocated: i64,
    pub most_allocated: i64,
    pub balanced_allocation: i64,
    pub node_affinity: i64,
    pub taint_toleration: i64,
    pub inter_pod_affinity: i64,
    pub pod_topology_spread: i64,
}

/// Feasible-node sampling (flags `--minimum-feasible-nodes`, `--minimum-percentage-nodes-to-find`,
/// `--percentage-nodes-to-find`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampling {
    pub minimum_feasible_nodes: u32,
    pub minimum_percentage_nodes_to_find: u32,
    /// 0 = adaptive (`50 - N/125` %).
    pub percentage_nodes_to_find: u32,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            minimum_feasible_nodes: 100,
            minimum_percentage_nodes_to_find: 5,
            percentage_nodes_to_find: 0,
        }
    }
}

impl Sampling {
    /// Upstream's `numFeasibleNodesToFind`: all nodes up to the minimum, otherwise a percentage
    /// (adaptive `50 - N/125`, floored at the minimum percentage), never below the minimum.
    /// N=1000 → 420; 5000 → 500; 6000 → 300; 10000 → 500.
    pub fn nodes_to_find(&self, n: usize) -> usize {
        let min = self.minimum_feasible_nodes as usize;
        if n <= min || self.percentage_nodes_to_find >= 100 {
            return n;
        }
        let pct = if self.percentage_nodes_to_find > 0 {
            self.percentage_nodes_to_find as i64
        } else {
            (50 - (n as i64) / 125).max(self.minimum_percentage_nodes_to_find as i64)
        };
        let num = (n as i64 * pct / 100) as usize;
        num.max(min)
    }
}

/// The compiled configuration the workers use.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Which filters are on (each plugin declares its `predicates` switch and default).
    pub filters: FilterSwitches,
    /// Scorer weights (each plugin declares its `nodeorder` key and default).
    pub weights: ScoreWeights,
    /// `configurations[allocate].candidateNodeCount`, default 3, must be > 0.
    pub candidate_node_count: usize,
    /// `volumebinding.bindTimeoutSeconds` (`predicates` argument, default 600): how long a bind
    /// waits for the claims it provisions to be bound.
    pub volume_bind_timeout: std::time::Duration,
    /// `predicate.DynamicResourceAllocationEnable` (default true, as upstream follows the DRA
    /// feature gate): false keeps every pod with ResourceClaims pending with a condition that
    /// says so (`plugins::dynamic_resources`). Upstream ignores the key; Magma honours it.
    pub dynamic_resources: bool,
    pub sampling: Sampling,
    /// Things the configuration asks for that Magma accepts but does not do, for the log.
    pub warnings: Vec<String>,
}
