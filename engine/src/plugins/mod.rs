//! Filter and score plugins, with upstream's names, switches and weights.
//!
//! - [`predicates`]: NodeUnschedulable, resource fit (including pod count and extended
//!   resources), NodeName, nodeSelector + required node affinity, TaintToleration
//!   (NoSchedule/NoExecute), NodePorts. Each reads one node slot of a snapshot chunk.
//! - [`nodeorder`]: LeastAllocated, MostAllocated, BalancedAllocation, NodeAffinity (preferred
//!   terms) and TaintToleration (PreferNoSchedule), combined with the configured weights.
//!
//! Upstream filters Magma does not implement (InterPodAffinity, PodTopologySpread, volume
//! filters, DRA) are accepted in the configuration and reported as warnings (see `conf`).
//! The plugins own no state; they read snapshots and compiled pods only.

pub mod nodeorder;
pub mod predicates;

#[cfg(test)]
mod tests;
