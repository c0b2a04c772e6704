//! NodePorts: a pod's host ports must be free on the node (same protocol and port conflict when
//! either side binds every address or both bind the same one). The cache keeps the ports in use
//! per node; nodes without any carry no flag and are never looked at.

use super::{Cycle, Filter, Names, Node, NodeFacts, OnFailure, Reason, Switch, Verdict};
use crate::event::{self, Events};
use crate::model::HostPort;

pub struct NodePorts;

/// Flag of a node where some pod uses host ports.
pub const PORTS: u8 = 1 << 4;

/// `node(s) didn't have free ports for the requested pod ports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortsTaken;

impl Reason for PortsTaken {
    fn wake(self) -> Events {
        event::NODE_ADDED | event::ROOM_FREED
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) didn't have free ports for the requested pod ports".to_owned()
    }
}

impl Filter for NodePorts {
    const NAME: &'static str = "NodePorts";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.NodePortsEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    const FLAG: u8 = PORTS;
    type Reason = PortsTaken;
    /// The pod's host ports.
    type State<'a> = &'a [HostPort];

    fn flag(node: &NodeFacts<'_>) -> bool {
        !node.ports.is_empty()
    }

    #[inline(always)]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a [HostPort]> {
        Some(&*cx.pod.host_ports).filter(|p| !p.is_empty())
    }

    #[inline(always)]
    fn filter<V: Verdict<PortsTaken>>(wanted: &&[HostPort], node: Node<'_>, v: &mut V) -> bool {
        if !node.has(PORTS) {
            return true;
        }
        let conflict = node.chunk.ports[node.i]
            .as_deref()
            .is_some_and(|used| wanted.iter().any(|p| used.iter().any(|u| p.conflicts(u))));
        if conflict {
            v.fail(PortsTaken);
            return false;
        }
        true
    }
}
