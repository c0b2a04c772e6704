//! Deliberate bugs, one predicate each, that the loom models must catch
//! (`loom-tests/run-mutations.sh`; the table in `loom-tests/README.md` says which model catches
//! which). Protocol code asks `if mutation::split_claim() { <the bug> }` at the one place the bug
//! would live, so the correct path reads straight through and every mutation is named here.
//!
//! In every build except a loom build each predicate is a `const fn` returning `false`: the bug
//! is compiled out. Under `--cfg loom` the environment variable `MAGMA_MUTATION` names the one
//! mutation in force (unset or empty: none), read once per process, so a single loom build
//! checks every mutation. An unknown name panics rather than silently testing nothing.

macro_rules! mutations {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Every mutation, by name.
        pub const ALL: &[&str] = &[$(stringify!($name)),*];

        $(
            $(#[$doc])*
            #[cfg(not(loom))]
            #[inline(always)]
            pub const fn $name() -> bool {
                false
            }

            $(#[$doc])*
            #[cfg(loom)]
            pub fn $name() -> bool {
                active() == Some(stringify!($name))
            }
        )*
    };
}

mutations! {
    /// `Cache::apply_claim`: the claim's version reaches the arena before the claimed pod does.
    version_before_contents,
    /// `Cache::apply_bound_pod`: no bump for a pod another scheduler bound.
    skip_external_bump,
    /// `BindVersions::try_claim`: load-compare-store instead of one CAS.
    split_claim,
    /// `Core::worker_result`: a result is matched to its pod by uid only, not by generation.
    no_generation_check,
    /// `Cache::forget`: the assumption is dropped but its requests stay counted.
    forget_leaks,
    /// `Core::drain_handoff`: drained tasks are dropped instead of returned to the queue.
    drain_without_unpop,
    /// `Shared::enter`: the snapshot is loaded before the epoch is announced.
    epoch_after_load,
    /// `Shared::publish`: the sequence is announced before the snapshot is stored.
    publish_seq_first,
    /// `shard` drain rule: a status is written while a worker may use the older view.
    shard_release_ignores_workers,
    /// `shard` drain rule: a claim the cache has not applied does not hold the node.
    shard_release_ignores_claims,
    /// `shard` drain rule: a pod still binding does not hold the node.
    shard_release_ignores_binds,
    /// `BindVersions::unchanged`: a lane pod does not check the other nodes of its domain.
    lane_skips_validation,
    /// `worker`: a lane pod validates before it bumps the anti-affinity epoch.
    epoch_after_validation,
    /// `Cache::nominate`: a nomination keeps room on the node without bumping its version.
    nomination_without_bump,
    /// `Core::pump`: a pod that may take an existing PV is handed off outside the lane.
    static_pv_outside_lane,
    /// `worker`: a pod outside the lane does not compare the anti-affinity epoch.
    claim_ignores_epoch,
    /// `Cache::allocate_claims`: the worker's devices (chosen on the hand-off's view) are
    /// assumed without checking them against the decisions the driver applied since.
    dra_trust_worker,
}

/// The mutation named by `MAGMA_MUTATION`, if any.
#[cfg(loom)]
fn active() -> Option<&'static str> {
    static ACTIVE: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let name = std::env::var("MAGMA_MUTATION").unwrap_or_default();
        if name.is_empty() {
            return None;
        }
        match ALL.iter().find(|m| **m == name) {
            Some(m) => Some(*m),
            None => panic!("MAGMA_MUTATION={name:?} is not a mutation; known: {ALL:?}"),
        }
    })
}
