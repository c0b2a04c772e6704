//! NodeVolumeLimits (CSI): the CSI volumes attached on a node, per driver, may not exceed the
//! node's CSINode `allocatable.count`: the pod's bound CSI volumes not attached there yet, and
//! one new volume per claim to provision, count against it, `node(s) exceed max volume count`.
//! A node without a CSINode limit for a driver has no limit.

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Switch, Verdict};
use crate::event::{self, Events};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct NodeVolumeLimits;

/// `node(s) exceed max volume count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TooManyVolumes;

impl Reason for TooManyVolumes {
    fn wake(self) -> Events {
        event::STORAGE_CHANGED | event::NODE_ADDED | event::POD_REMOVED
    }

    fn message(self, _: &Names<'_>) -> String {
        "node(s) exceed max volume count".to_owned()
    }
}

/// The pod's CSI volumes: bound ones (driver, handle) and new ones per driver; and the nodes'
/// limits (by node name id).
pub struct NewVolumes<'a> {
    bound: SmallVec<[(u32, u32); 4]>,
    fresh: SmallVec<[(u32, i64); 4]>,
    limits: &'a BTreeMap<u32, Arc<[(u32, i64)]>>,
}

impl Filter for NodeVolumeLimits {
    const NAME: &'static str = "NodeVolumeLimits";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.NodeVolumeLimitsEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = TooManyVolumes;
    type State<'a> = NewVolumes<'a>;

    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<NewVolumes<'a>> {
        let v = cx.volumes?;
        if cx.snap.csi_limits.is_empty() {
            return None;
        }
        let bound: SmallVec<[(u32, u32); 4]> = v.bound.iter().filter_map(|b| b.csi).collect();
        let mut fresh: SmallVec<[(u32, i64); 4]> = SmallVec::new();
        for p in v.provision.iter() {
            match fresh.iter_mut().find(|(d, _)| *d == p.driver) {
                Some((_, n)) => *n += 1,
                None => fresh.push((p.driver, 1)),
            }
        }
        (!bound.is_empty() || !fresh.is_empty()).then_some(NewVolumes {
            bound,
            fresh,
            limits: &cx.snap.csi_limits,
        })
    }

    fn filter<V: Verdict<TooManyVolumes>>(st: &NewVolumes<'_>, node: Node<'_>, v: &mut V) -> bool {
        let Some(meta) = node.meta() else {
            return true;
        };
        let Some(limits) = st.limits.get(&meta.name_id) else {
            return true;
        };
        let pods = node.chunk.pods[node.i].as_deref().unwrap_or(&[]);
        let attached = |driver: u32| {
            let mut handles: SmallVec<[u32; 16]> = pods
                .iter()
                .flat_map(|p| p.csi.iter())
                .filter(|(d, _)| *d == driver)
                .map(|&(_, h)| h)
                .collect();
            handles.sort_unstable();
            handles.dedup();
            handles
        };
        for &(driver, limit) in limits.iter() {
            let have = attached(driver);
            let new_bound = st
                .bound
                .iter()
                .filter(|&&(d, h)| d == driver && have.binary_search(&h).is_err())
                .count() as i64;
            let fresh = st
                .fresh
                .iter()
                .find(|(d, _)| *d == driver)
                .map_or(0, |&(_, n)| n);
            if new_bound + fresh > 0 && have.len() as i64 + new_bound + fresh > limit {
                v.fail(TooManyVolumes);
                return false;
            }
        }
        true
    }
}
