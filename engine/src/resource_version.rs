//! Kubernetes resourceVersions: how two of one resource order. Used where a watch may deliver
//! a version older than one already seen (the sharding coordinator's own status writes, the
//! ResourceClaims the scheduler wrote, the adapter's writes).
//!
//! Owns this one rule; it uses nothing else.

/// How two resourceVersions of one resource order: `Some` when both are integers, as every
/// Kubernetes API server since 1.35 guarantees (KEP-5504, "comparable resource versions"; etcd's
/// revisions before that), `None` when either is not (only equality then means anything).
pub fn resource_version_order(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    let parse = |s: &str| {
        s.parse::<u64>()
            .ok()
            .filter(|v| *v > 0 && !s.starts_with('0'))
    };
    Some(parse(a)?.cmp(&parse(b)?))
}
