//! The room of nominated pods (kube-scheduler's `RunFilterPluginsWithNominatedPods`): a pod
//! that preemption nominated to a node (`preemption`) counts there, for every pod of no higher
//! priority, as if it were already running, so the room its victims free is not taken from it
//! while they terminate. A pod of higher priority does not see it; the nominated pod does not
//! count against itself.
//!
//! Part of the resource fit (its reason reads `Insufficient <resource>`, as upstream's, where
//! the nominated pods are added before NodeResourcesFit runs). Only nodes with a nomination are
//! looked at (a node flag), and while no pod is nominated anywhere the filter is off: pods pay
//! nothing for it.

use super::noderesources::Insufficient;
use super::{Cycle, Filter, Names, Node, NodeFacts, OnFailure, Reason, Verdict};
use crate::event::Events;
use crate::model::{CompiledPod, Slot};

pub struct NominatedRoom;

/// Flag of a node some pod is nominated to.
pub const NOMINATED: u8 = 1 << 5;

/// `Insufficient <resource>` once the nominated pods' requests are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortOfNominated(pub Slot);

impl Reason for ShortOfNominated {
    fn wake(self) -> Events {
        Insufficient(self.0).wake()
    }

    fn message(self, names: &Names<'_>) -> String {
        Insufficient(self.0).message(names)
    }
}

impl Filter for NominatedRoom {
    const NAME: &'static str = "NodeResourcesFit";
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    const RARE: bool = true;
    const FLAG: u8 = NOMINATED;
    type Reason = ShortOfNominated;
    type State<'a> = &'a CompiledPod;

    fn flag(facts: &NodeFacts<'_>) -> bool {
        facts.nominated
    }

    #[inline]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a CompiledPod> {
        (cx.snap.nominated > 0).then_some(cx.pod)
    }

    fn filter<V: Verdict<ShortOfNominated>>(pod: &&CompiledPod, node: Node<'_>, v: &mut V) -> bool {
        if !node.has(NOMINATED) {
            return true;
        }
        let Some(nominees) = node.chunk.nominees[node.i].as_deref() else {
            return true;
        };
        let counted = || {
            nominees
                .iter()
                .filter(|n| n.priority >= pod.priority && n.uid != pod.uid)
        };
        let mut ok = true;
        for &(s, r) in &pod.requests {
            let kept: i64 = counted()
                .flat_map(|n| n.requests.iter())
                .filter(|&&(x, _)| x == s)
                .map(|&(_, a)| a)
                .sum();
            if kept > 0 && node.chunk.free(s, node.i) - kept < r {
                if !V::EXPLAIN {
                    return false;
                }
                v.fail(ShortOfNominated(s));
                ok = false;
            }
        }
        ok
    }
}
