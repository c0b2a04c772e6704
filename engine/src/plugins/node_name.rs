//! NodeName: a pod handed to the scheduler with `spec.nodeName` set goes only to that node.
//! Always on, as upstream.

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Verdict};
use crate::event::{self, Events};

pub struct NodeName;

/// `node(s) didn't match the requested node name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OtherNode;

impl Reason for OtherNode {
    fn wake(self) -> Events {
        event::NODE_ADDED
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) didn't match the requested node name".to_owned()
    }
}

impl Filter for NodeName {
    const NAME: &'static str = "NodeName";
    const RARE: bool = true;
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = OtherNode;
    /// The wanted node's name id.
    type State<'a> = u32;

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<u32> {
        cx.pod.node_name
    }

    #[inline(always)]
    fn filter<V: Verdict<OtherNode>>(name: &u32, node: Node<'_>, v: &mut V) -> bool {
        if node.meta().is_none_or(|m| m.name_id != *name) {
            v.fail(OtherNode);
            return false;
        }
        true
    }
}
