//! PodTopologySpread: `DoNotSchedule` constraints as a filter, `ScheduleAnyway` ones as a score,
//! following kube-scheduler's `podtopologyspread` plugin.
//!
//! - Domains are counted over every node that has all the pod's constraint keys and passes the
//!   constraint's inclusion policies (`nodeAffinityPolicy: Honor`, the default, counts only
//!   nodes matching the pod's node selector and required node affinity; `nodeTaintsPolicy:
//!   Honor` only nodes whose NoSchedule/NoExecute taints the pod tolerates). A domain's count is
//!   the placed pods (bound or claimed, not terminating) in the pod's namespace matching the
//!   constraint's selector (with `matchLabelKeys` merged in).
//! - Filter: a node without the key fails with `node(s) didn't match pod topology spread
//!   constraints (missing required label)`; otherwise `count(domain) + self-match - minimum >
//!   maxSkew` fails with `node(s) didn't match pod topology spread constraints`. The minimum is
//!   0 while fewer domains than `minDomains` exist.
//! - Score (`podtopologyspread.weight`, 2): per node, `Σ count × log(domains + 2) + (maxSkew − 1)`
//!   over the soft constraints, rounded; nodes missing a key are ignored (score 0); normalised as
//!   `100 × (max + min − s) / max`. One difference: kube-scheduler sizes `domains` from the
//!   nodes that passed the filters, Magma (which scores while it filters) from every eligible
//!   node; the two agree whenever the feasible nodes are the eligible ones. With the
//!   NodeAffinity and TaintToleration filters on (the default) every feasible node is eligible,
//!   so they agree whenever every eligible node is feasible.
//! - Cost: PreFilter and PreScore for constraints on one key whose inclusion policies do not
//!   depend on the node take the domains from the snapshot's domain index and each domain's
//!   count from the constraint's aggregate (`index::terms`, once the cache watches it: the
//!   driver asks as it first sees the pod): O(domains). Before that, the matching pods come from
//!   the label index (`index`): O(domains + matching pods). Otherwise they scan every node with
//!   the keys.
//! - Not done: the system default constraints kube-scheduler derives from Services and
//!   ReplicaSets (Magma does not watch those); pods without constraints of their own are not
//!   spread.

use super::node_affinity;
use super::taint_toleration;
use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, Normalize, OnFailure, Range, Reads, Reason, Scorer,
    Switch, Verdict, Weight,
};
use crate::event::{self, Events};
use crate::model::{CompiledPod, NodeMeta, PodInfo, SpreadConstraint};
use crate::snapshot::Snapshot;
use std::sync::Arc;

pub struct PodTopologySpread;

/// Why a node fails a `DoNotSchedule` constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Skew {
    /// `node(s) didn't match pod topology spread constraints (missing required label)`.
    MissingLabel,
    /// `node(s) didn't match pod topology spread constraints`.
    TooSkewed,
}

impl Reason for Skew {
    fn wake(self) -> Events {
        match self {
            Skew::MissingLabel => event::NODE_ADDED | event::NODE_LABELS_CHANGED,
            Skew::TooSkewed => {
                event::NODE_ADDED | event::NODE_LABELS_CHANGED | event::POD_REMOVED
                // A pod added elsewhere can raise the minimum.
                | event::POD_ADDED
            }
        }
    }

    fn message(self, _: &Names<'_>) -> String {
        match self {
            Skew::MissingLabel => {
                "node(s) didn't match pod topology spread constraints (missing required label)"
                    .to_owned()
            }
            Skew::TooSkewed => "node(s) didn't match pod topology spread constraints".to_owned(),
        }
    }
}

/// Does `node` count for constraint `c` of `pod` (its inclusion policies)?
fn included(c: &SpreadConstraint, pod: &CompiledPod, node: &NodeMeta) -> bool {
    (!c.honor_node_affinity || !pod.has_node_constraints || node_affinity::matches(pod, node))
        && (!c.honor_node_taints || taint_toleration::untolerated(&pod.tolerations, node).is_none())
}

/// Placed pods on a node that a constraint counts: same namespace, not terminating, matching.
fn count(c: &SpreadConstraint, namespace: u32, pods: &[Arc<PodInfo>]) -> i64 {
    pods.iter()
        .filter(|p| p.namespace == namespace && !p.terminating && c.selector.matches(&p.labels))
        .count() as i64
}

/// Every node in `snap` with all of `keys`, with its slot.
fn nodes_with<'a>(
    snap: &'a Snapshot,
    keys: &'a [u32],
) -> impl Iterator<Item = (usize, &'a NodeMeta)> + 'a {
    (0..snap.arena.slots()).filter_map(move |slot| {
        let meta = snap.node(slot)?;
        keys.iter()
            .all(|&k| meta.label(k).is_some())
            .then_some((slot, &**meta))
    })
}

/// PreFilter's counts by scanning every node with the keys: (domain value, matching pods) per
/// node, summed per domain by the caller.
fn count_by_scan(snap: &Snapshot, pod: &CompiledPod, keys: &[u32], hard: &mut [Hard<'_>]) {
    for (slot, meta) in nodes_with(snap, keys) {
        let pods = snap.pods_on(slot);
        for h in hard.iter_mut() {
            if !included(h.c, pod, meta) {
                continue;
            }
            let value = meta.label(h.c.topology_key).expect("has every key").value;
            h.counts.push((value, count(h.c, pod.info.namespace, pods)));
        }
    }
}

/// Whether every node with its key counts for `c` (no inclusion policy that depends on the
/// node), so the domain index can stand for the scan.
fn every_node(c: &SpreadConstraint, pod: &CompiledPod) -> bool {
    (!c.honor_node_affinity || !pod.has_node_constraints) && !c.honor_node_taints
}

/// The one key of `keys` when the index can count for `constraints` (all on that key, every
/// node counting, the key indexed): the domains of the key, sorted.
fn indexed_domains<'s, 'c>(
    snap: &'s Snapshot,
    pod: &CompiledPod,
    keys: &[u32],
    mut constraints: impl Iterator<Item = &'c SpreadConstraint>,
) -> Option<(u32, &'s [u32])> {
    let key = *keys.first()?;
    if keys.iter().any(|&k| k != key) || !constraints.all(|c| every_node(c, pod)) {
        return None;
    }
    Some((key, snap.index().domains.values(key)?))
}

/// A constraint's counts from the snapshot's indexes: once the cache watches the constraint,
/// every domain of `values` with its count (`index::terms`), O(domains); before, every domain
/// of `values` at 0 (`index::Domains`) plus the matching pods on the nodes the label index gives
/// (`index::PodLabels`), unsummed, O(domains + matching pods). `false` (nothing pushed) when the
/// selector cannot be looked up: the caller scans.
fn index_counts(
    snap: &Snapshot,
    pod: &CompiledPod,
    (key, values): (u32, &[u32]),
    c: &SpreadConstraint,
    out: &mut Vec<(u32, i64)>,
) -> bool {
    if let Some(w) = snap.index().terms.watched_spread(c, pod.info.namespace) {
        // Counted per domain as pods come and go (`index::terms`): O(domains).
        out.extend(values.iter().map(|&v| (v, w.matching.sums.get(v))));
        return true;
    }
    let mut slots = Vec::new();
    if !snap
        .index()
        .pod_labels
        .selector_slots(pod.info.namespace, &c.selector, &mut slots)
    {
        return false;
    }
    slots.sort_unstable();
    slots.dedup();
    out.extend(values.iter().map(|&v| (v, 0)));
    for &slot in &slots {
        // Pods on a node without the key are not counted (as the scan skips the node).
        let Some(label) = snap.node(slot as usize).and_then(|m| m.label(key)) else {
            continue;
        };
        let n = count(c, pod.info.namespace, snap.pods_on(slot as usize));
        if n > 0 {
            out.push((label.value, n));
        }
    }
    true
}

/// PreFilter's counts from the indexes ([`index_counts`]) when they can stand for the scan;
/// `false` otherwise.
fn counted_by_index(
    snap: &Snapshot,
    pod: &CompiledPod,
    keys: &[u32],
    hard: &mut [Hard<'_>],
) -> bool {
    let Some(domains) = indexed_domains(snap, pod, keys, hard.iter().map(|h| h.c)) else {
        return false;
    };
    hard.iter_mut()
        .all(|h| index_counts(snap, pod, domains, h.c, &mut h.counts))
}

/// One hard constraint as PreFilter worked it out.
pub struct Hard<'a> {
    c: &'a SpreadConstraint,
    /// (domain value, matching pods), sorted by value.
    counts: Vec<(u32, i64)>,
    /// The global minimum the skew is measured against.
    min: i64,
    self_match: i64,
}

/// PreFilter state: the pod's `DoNotSchedule` constraints with their counts.
pub struct FilterState<'a> {
    hard: Vec<Hard<'a>>,
}

impl Filter for PodTopologySpread {
    const NAME: &'static str = "PodTopologySpread";
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.PodTopologySpreadEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Skew;
    type State<'a> = FilterState<'a>;

    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<FilterState<'a>> {
        let pod = cx.pod;
        if !pod.spread.iter().any(|c| c.hard) {
            return None;
        }
        debug_assert!(
            cx.snap.pods_indexed,
            "the driver turns the pod index on first"
        );
        let keys: Vec<u32> = pod
            .spread
            .iter()
            .filter(|c| c.hard)
            .map(|c| c.topology_key)
            .collect();
        let mut hard: Vec<Hard<'a>> = pod
            .spread
            .iter()
            .filter(|c| c.hard)
            .map(|c| Hard {
                c,
                counts: Vec::new(),
                min: 0,
                self_match: i64::from(c.selector.matches(&pod.info.labels)),
            })
            .collect();
        if !counted_by_index(cx.snap, pod, &keys, &mut hard) {
            for h in &mut hard {
                h.counts.clear();
            }
            count_by_scan(cx.snap, pod, &keys, &mut hard);
        }
        for h in &mut hard {
            h.counts.sort_unstable_by_key(|&(v, _)| v);

            h.counts.dedup_by(|b, a| {
                if a.0 == b.0 {
                    a.1 += b.1;
                    true
                } else {
                    false
                }
            });
            let domains = h.counts.len();
            h.min = if domains < h.c.min_domains as usize {
                0
            } else {
                h.counts.iter().map(|&(_, n)| n).min().unwrap_or(0)
            };
        }
        Some(FilterState { hard })
    }

    #[inline]
    fn filter<V: Verdict<Skew>>(st: &FilterState<'_>, node: Node<'_>, v: &mut V) -> bool {
        let Some(meta) = node.meta() else {
            return true;
        };
        for h in &st.hard {
            let Some(label) = meta.label(h.c.topology_key) else {
                v.fail(Skew::MissingLabel);
                return false;
            };
            let matching = h
                .counts
                .binary_search_by_key(&label.value, |&(v, _)| v)
                .map_or(0, |i| h.counts[i].1);
            if matching + h.self_match - h.min > i64::from(h.c.max_skew) {
                v.fail(Skew::TooSkewed);
                return false;
            }
        }
        true
    }

    /// A skew depends on the pods of the node's whole domain (pods added in other domains only
    /// raise the minimum, so they cannot make a decision wrong).
    fn reads(st: &FilterState<'_>, reads: &mut Reads) {
        for h in &st.hard {
            if !reads.domains.contains(&h.c.topology_key) {
                reads.domains.push(h.c.topology_key);
            }
        }
    }
}

/// PreScore's eligible nodes and counts by scanning every node with the keys.
fn soft_by_scan(snap: &Snapshot, pod: &CompiledPod, keys: &[u32], soft: &mut [(Soft<'_>, usize)]) {
    for (slot, meta) in nodes_with(snap, keys) {
        let pods = snap.pods_on(slot);
        for (s, eligible) in soft.iter_mut() {
            if !included(s.c, pod, meta) {
                continue;
            }
            *eligible += 1;
            if let Some(counts) = &mut s.counts {
                let value = meta.label(s.c.topology_key).expect("has every key").value;
                counts.push((value, count(s.c, pod.info.namespace, pods)));
            }
        }
    }
}

/// PreScore's eligible nodes (every node with the key: the domains' sizes) and counts from the
/// indexes when they can stand for the scan; `false` otherwise.
fn soft_by_index(
    snap: &Snapshot,
    pod: &CompiledPod,
    keys: &[u32],
    soft: &mut [(Soft<'_>, usize)],
) -> bool {
    let Some(domains) = indexed_domains(snap, pod, keys, soft.iter().map(|(s, _)| s.c)) else {
        return false;
    };
    let (key, values) = domains;
    let nodes: usize = values
        .iter()
        .map(|&v| snap.index().domains.slots(key, v).map_or(0, <[u32]>::len))
        .sum();
    soft.iter_mut().all(|(s, eligible)| {
        *eligible = nodes;
        match &mut s.counts {
            Some(counts) => index_counts(snap, pod, domains, s.c, counts),
            None => true,
        }
    })
}

/// One soft constraint as PreScore worked it out.
pub struct Soft<'a> {
    c: &'a SpreadConstraint,
    /// `None` for the hostname key, counted per node instead; else (value, count), sorted.
    counts: Option<Vec<(u32, i64)>>,
    weight: f64,
}

/// PreScore state: the pod's `ScheduleAnyway` constraints.
pub struct ScoreState<'a> {
    pod: &'a CompiledPod,
    keys: Vec<u32>,
    soft: Vec<Soft<'a>>,
}

impl Scorer for PodTopologySpread {
    const NAME: &'static str = "PodTopologySpread";
    const WEIGHT: Weight = Weight {
        key: "podtopologyspread.weight",
        default: 2,
    };
    const NORMALIZED: bool = true;
    type State<'a> = ScoreState<'a>;

    fn pre_score<'a>(cx: Cycle<'a>) -> Option<ScoreState<'a>> {
        let pod = cx.pod;
        if !pod.spread.iter().any(|c| !c.hard) {
            return None;
        }
        let keys: Vec<u32> = pod
            .spread
            .iter()
            .filter(|c| !c.hard)
            .map(|c| c.topology_key)
            .collect();
        // A constraint on the hostname key counts per node (kube-scheduler's shortcut).
        let hostname = cx.snap.hostname_key;
        let mut soft: Vec<(Soft<'a>, usize)> = pod
            .spread
            .iter()
            .filter(|c| !c.hard)
            .map(|c| {
                let per_node = c.topology_key == hostname;
                (
                    Soft {
                        c,
                        counts: (!per_node).then(Vec::new),
                        weight: 0.0,
                    },
                    0,
                )
            })
            .collect();
        if !soft_by_index(cx.snap, pod, &keys, &mut soft) {
            for (s, eligible) in &mut soft {
                *eligible = 0;
                if let Some(counts) = &mut s.counts {
                    counts.clear();
                }
            }
            soft_by_scan(cx.snap, pod, &keys, &mut soft);
        }
        let soft = soft
            .into_iter()
            .map(|(mut s, eligible)| {
                let size = match &mut s.counts {
                    Some(counts) => {
                        counts.sort_unstable_by_key(|&(v, _)| v);
                        counts.dedup_by(|b, a| {
                            if a.0 == b.0 {
                                a.1 += b.1;
                                true
                            } else {
                                false
                            }
                        });
                        counts.len()
                    }
                    None => eligible,
                };
                s.weight = ((size + 2) as f64).ln();
                s
            })
            .collect();
        Some(ScoreState { pod, keys, soft })
    }

    /// The rounded weighted count, or −1 for a node missing a key (ignored).
    fn score(st: &ScoreState<'_>, node: Node<'_>) -> i64 {
        let Some(meta) = node.meta() else {
            return -1;
        };
        if st.keys.iter().any(|&k| meta.label(k).is_none()) {
            return -1;
        }
        let mut score = 0.0;
        for s in &st.soft {
            let value = meta.label(s.c.topology_key).expect("checked").value;
            let cnt = match &s.counts {
                Some(counts) => counts
                    .binary_search_by_key(&value, |&(v, _)| v)
                    .map_or(0, |i| counts[i].1),
                None => {
                    let pods = node.chunk.pods[node.i].as_deref().unwrap_or(&[]);
                    count(s.c, st.pod.info.namespace, pods)
                }
            };
            score += cnt as f64 * s.weight + f64::from(s.c.max_skew - 1);
        }
        score.round() as i64
    }
}

impl Normalize for PodTopologySpread {
    const USES_MIN: bool = true;

    /// Fewer matching pods is better: `100 × (max + min − s) / max`; ignored nodes 0; all 100
    /// when every count is 0.
    fn normalize(raw: i64, range: Range) -> i64 {
        if raw < 0 {
            return 0;
        }
        let max = range.max.max(0);
        if max == 0 {
            return MAX_NODE_SCORE;
        }
        MAX_NODE_SCORE * (max + range.min - raw) / max
    }

    fn counts(raw: i64) -> bool {
        raw >= 0
    }
}
