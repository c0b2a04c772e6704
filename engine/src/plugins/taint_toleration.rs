//! TaintToleration: a NoSchedule or NoExecute taint the pod does not tolerate rejects the node;
//! PreferNoSchedule taints it does not tolerate count against it in the score (fewest is best,
//! kube-scheduler's reverse normalisation). Nodes without taints carry no flag and are never
//! looked at.

use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, NodeFacts, Normalize, OnFailure, Range, Reason,
    Scorer, Switch, Verdict, Weight,
};
use crate::event::{self, Events};
use crate::model::{CompiledPod, NodeMeta, TaintEffect, Toleration};

pub struct TaintToleration;

/// Flag of a node with NoSchedule or NoExecute taints.
pub const HARD_TAINTS: u8 = 1 << 2;
/// Flag of a node with PreferNoSchedule taints.
pub const SOFT_TAINTS: u8 = 1 << 3;

/// `node(s) had untolerated taint {key: value}` (taint key and value ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Untolerated {
    pub key: u32,
    pub value: u32,
}

impl Reason for Untolerated {
    fn wake(self) -> Events {
        event::NODE_ADDED | event::NODE_TAINT_REMOVED
    }

    fn message(self, names: &Names<'_>) -> String {
        format!(
            "node(s) had untolerated taint {{{}: {}}}",
            names.strings.resolve(self.key),
            names.strings.resolve(self.value)
        )
    }
}

/// The first NoSchedule/NoExecute taint the pod does not tolerate.
#[inline]
pub fn untolerated(tolerations: &[Toleration], meta: &NodeMeta) -> Option<Untolerated> {
    meta.taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .find(|t| !tolerations.iter().any(|tol| tol.tolerates(t)))
        .map(|t| Untolerated {
            key: t.key,
            value: t.value,
        })
}

impl Filter for TaintToleration {
    const NAME: &'static str = "TaintToleration";
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.TaintTolerationEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    const FLAG: u8 = HARD_TAINTS;
    type Reason = Untolerated;
    type State<'a> = &'a [Toleration];

    fn flag(node: &NodeFacts<'_>) -> bool {
        node.meta
            .taints
            .iter()
            .any(|t| t.effect != TaintEffect::PreferNoSchedule)
    }

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a [Toleration]> {
        Some(&cx.pod.tolerations)
    }

    #[inline(always)]
    fn filter<V: Verdict<Untolerated>>(
        tolerations: &&[Toleration],
        node: Node<'_>,
        v: &mut V,
    ) -> bool {
        if !node.has(HARD_TAINTS) {
            return true;
        }
        let Some(meta) = node.meta() else {
            return true;
        };
        match untolerated(tolerations, meta) {
            Some(u) => {
                v.fail(u);
                false
            }
            None => true,
        }
    }
}

/// Number of PreferNoSchedule taints not tolerated by the pod's tolerations whose effect is
/// empty or PreferNoSchedule.
#[inline]
pub fn intolerable_prefer_taints(pod: &CompiledPod, meta: &NodeMeta) -> i64 {
    meta.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
        .filter(|t| {
            !pod.tolerations
                .iter()
                .filter(|tol| {
                    tol.effect
                        .is_none_or(|e| e == TaintEffect::PreferNoSchedule)
                })
                .any(|tol| tol.tolerates(t))
        })
        .count() as i64
}

impl Scorer for TaintToleration {
    const NAME: &'static str = "TaintToleration";
    const WEIGHT: Weight = Weight {
        key: "tainttoleration.weight",
        default: 3,
    };
    const NORMALIZED: bool = true;
    const FLAG: u8 = SOFT_TAINTS;
    type State<'a> = &'a CompiledPod;

    fn flag(node: &NodeFacts<'_>) -> bool {
        node.meta
            .taints
            .iter()
            .any(|t| t.effect == TaintEffect::PreferNoSchedule)
    }

    #[inline(always)]
    fn pre_score<'a>(cx: Cycle<'a>) -> Option<&'a CompiledPod> {
        Some(cx.pod)
    }

    #[inline(always)]
    fn score(pod: &&CompiledPod, node: Node<'_>) -> i64 {
        if !node.has(SOFT_TAINTS) {
            return 0;
        }
        node.meta()
            .map_or(0, |meta| intolerable_prefer_taints(pod, meta))
    }
}

impl Normalize for TaintToleration {
    const USES_MIN: bool = false;

    /// Reverse: `100 - raw * 100 / max`; no intolerable taint anywhere → every node gets 100.
    #[inline]
    fn normalize(raw: i64, range: Range) -> i64 {
        if range.max > 0 {
            MAX_NODE_SCORE - raw * MAX_NODE_SCORE / range.max
        } else {
            MAX_NODE_SCORE
        }
    }
}
