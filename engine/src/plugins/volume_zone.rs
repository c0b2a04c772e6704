//! VolumeZone: a bound claim's PV zone and region labels (`topology.kubernetes.io/zone` and
//! `region`, and their beta keys; a value may list several zones joined by `__`) must hold the
//! node's value of the same label, `node(s) had no available volume zone`.

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Switch, Verdict};
use crate::event::{self, Events};
use crate::volumes::BoundVolume;

pub struct VolumeZone;

/// `node(s) had no available volume zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ZoneConflict;

impl Reason for ZoneConflict {
    fn wake(self) -> Events {
        event::STORAGE_CHANGED | event::NODE_ADDED | event::NODE_LABELS_CHANGED
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) had no available volume zone".to_owned()
    }
}

impl Filter for VolumeZone {
    const NAME: &'static str = "VolumeZone";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.VolumeZoneEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = ZoneConflict;
    type State<'a> = &'a [BoundVolume];

    #[inline]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a [BoundVolume]> {
        let v = cx.volumes?;
        v.bound
            .iter()
            .any(|b| !b.zones.is_empty())
            .then_some(&*v.bound)
    }

    fn filter<V: Verdict<ZoneConflict>>(bound: &&[BoundVolume], node: Node<'_>, v: &mut V) -> bool {
        let Some(meta) = node.meta() else {
            return true;
        };
        let ok = bound.iter().all(|b| {
            b.zones.iter().all(|(key, values)| {
                meta.label(*key)
                    .is_some_and(|l| values.binary_search(&l.value).is_ok())
            })
        });
        if !ok {
            v.fail(ZoneConflict);
        }
        ok
    }
}
