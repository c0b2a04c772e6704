//! NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes only pods that tolerate
//! `node.kubernetes.io/unschedulable:NoSchedule`. Always on, as upstream.

use super::{Cycle, Filter, Names, Node, NodeFacts, OnFailure, Reason, Verdict};
use crate::event::{self, Events};

pub struct NodeUnschedulable;

/// Flag of a cordoned node.
pub const UNSCHEDULABLE: u8 = 1 << 1;

/// `node(s) were unschedulable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cordoned;

impl Reason for Cordoned {
    fn wake(self) -> Events {
        event::NODE_ADDED | event::NODE_SCHEDULABLE
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) were unschedulable".to_owned()
    }
}

impl Filter for NodeUnschedulable {
    const NAME: &'static str = "NodeUnschedulable";
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    const FLAG: u8 = UNSCHEDULABLE;
    type Reason = Cordoned;
    type State<'a> = ();

    fn flag(node: &NodeFacts<'_>) -> bool {
        node.meta.unschedulable
    }

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<()> {
        (!cx.pod.tolerates_unschedulable).then_some(())
    }

    #[inline(always)]
    fn filter<V: Verdict<Cordoned>>(_: &(), node: Node<'_>, v: &mut V) -> bool {
        if node.has(UNSCHEDULABLE) {
            v.fail(Cordoned);
            return false;
        }
        true
    }
}
