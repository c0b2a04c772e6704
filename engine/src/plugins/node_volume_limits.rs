//! NodeVolumeLimits (CSI), as kube-scheduler's `CSILimits` counts: per CSI driver, the unique
//! volumes the pods on a node attach plus the pod's own volumes not attached there yet may not
//! exceed the node's CSINode `allocatable.count` (`attached + new > limit` refuses, so a limit
//! of 1 takes one volume and a limit of 0 none), `node(s) exceed max volume count`. A volume is
//! counted once however many pods use it. Which volumes count is `volumes::Storage::csi_of`:
//! claims bound to a CSI PV by (driver, handle); claims not bound yet (or bound to a missing PV)
//! under their class's provisioner, each with a handle of its own; generic ephemeral volumes as
//! the claims they are. CSI inline volumes and in-tree PVs are not counted (upstream counts
//! in-tree ones through CSI migration, which Magma does not translate). A node without a
//! CSINode limit for a driver has no limit.

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Switch, Verdict};
use crate::event::{self, Events};
use crate::volumes::{CsiLimits, CsiVolumes};

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

/// The pod's CSI volumes (sorted, unique) and the nodes' limits (by node name id).
pub struct NewVolumes<'a> {
    volumes: &'a CsiVolumes,
    limits: &'a CsiLimits,
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
        let v = cx.volumes.filter(|v| v.blocked.is_none())?;
        (!v.csi.is_empty() && !cx.snap.csi_limits.is_empty()).then_some(NewVolumes {
            volumes: &v.csi,
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
        // Every driver's references on the node, read from the chunk: a bound on each
        // driver's, so most nodes pass without their pods being read.
        let all_references = i64::from(node.chunk.csi_refs[node.i]);
        let pods = node.chunk.pods[node.i].as_deref().unwrap_or(&[]);
        for &(driver, limit) in limits.iter() {
            let mine = || st.volumes.iter().filter(|(d, _)| *d == driver);
            let wanted = mine().count() as i64;
            if wanted == 0 || all_references + wanted <= limit {
                continue;
            }
            // The node's pods' references to the driver's volumes bound the volumes attached
            // there (a volume two pods use counts twice): within the limit with the pod's own,
            // the node fits without finding which are attached (the common case).
            let references: usize = pods
                .iter()
                .map(|p| p.csi.iter().filter(|(d, _)| *d == driver).count())
                .sum();
            if references as i64 + wanted <= limit {
                continue;
            }
            // The driver's volumes attached on the node, each once (most nodes hold a few).
            let mut attached: smallvec::SmallVec<[&str; 16]> = pods
                .iter()
                .flat_map(|p| p.csi.iter())
                .filter(|(d, _)| *d == driver)
                .map(|(_, h)| &**h)
                .collect();
            attached.sort_unstable();
            attached.dedup();
            let new = mine()
                .filter(|(_, h)| attached.binary_search(&&**h).is_err())
                .count();
            if attached.len() as i64 + new as i64 > limit {
                v.fail(TooManyVolumes);
                return false;
            }
        }
        true
    }
}
