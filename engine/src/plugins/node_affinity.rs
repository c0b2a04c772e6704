//! NodeAffinity: `nodeSelector` and required node affinity as a filter, preferred node affinity
//! as a score (the sum of the weights of the terms a node matches, normalised so the best node
//! scores 100, as kube-scheduler's `NormalizeScore` does).

use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, Normalize, OnFailure, Range, Reason, Scorer,
    Switch, Verdict, Weight,
};
use crate::event::{self, Events};
use crate::model::{CompiledPod, NodeMeta};

pub struct NodeAffinity;

/// `node(s) didn't match Pod's node affinity/selector`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mismatch;

impl Reason for Mismatch {
    fn wake(self) -> Events {
        event::NODE_ADDED | event::NODE_LABELS_CHANGED
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) didn't match Pod's node affinity/selector".to_owned()
    }
}

/// `nodeSelector` and required node affinity (terms ORed) both hold on `meta`.
#[inline]
pub fn matches(pod: &CompiledPod, meta: &NodeMeta) -> bool {
    if !pod
        .node_selector
        .iter()
        .all(|&(k, v)| meta.label(k).is_some_and(|l| l.value == v))
    {
        return false;
    }
    match &pod.required {
        None => true,
        Some(terms) => terms.iter().any(|t| t.matches(meta)),
    }
}

impl Filter for NodeAffinity {
    const NAME: &'static str = "NodeAffinity";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.NodeAffinityEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Mismatch;
    type State<'a> = &'a CompiledPod;

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a CompiledPod> {
        cx.pod.has_node_constraints.then_some(cx.pod)
    }

    #[inline(always)]
    fn filter<V: Verdict<Mismatch>>(pod: &&CompiledPod, node: Node<'_>, v: &mut V) -> bool {
        if node.meta().is_none_or(|m| !matches(pod, m)) {
            v.fail(Mismatch);
            return false;
        }
        true
    }
}

impl Scorer for NodeAffinity {
    const NAME: &'static str = "NodeAffinity";
    const RARE: bool = true;
    const WEIGHT: Weight = Weight {
        key: "nodeaffinity.weight",
        default: 2,
    };
    const NORMALIZED: bool = true;
    type State<'a> = &'a CompiledPod;

    #[inline(always)]
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<&'a CompiledPod> {
        (!cx.pod.preferred.is_empty()).then_some(cx.pod)
    }

    /// The sum of the weights of the preferred terms the node matches.
    #[inline(always)]
    fn score(pod: &&CompiledPod, node: Node<'_>) -> i64 {
        node.meta().map_or(0, |meta| {
            pod.preferred
                .iter()
                .filter(|(_, t)| t.matches(meta))
                .map(|(w, _)| *w as i64)
                .sum()
        })
    }
}

impl Normalize for NodeAffinity {
    const USES_MIN: bool = false;

    /// `raw * 100 / max`; all zero when no node matches any term.
    #[inline]
    fn normalize(raw: i64, range: Range) -> i64 {
        if range.max > 0 {
            raw * MAX_NODE_SCORE / range.max
        } else {
            0
        }
    }
}
