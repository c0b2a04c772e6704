//! DynamicResources (DRA, `resource.k8s.io/v1`): a pod's ResourceClaims, resolved when it is
//! handed off (`dra`). A claim that holds the pod back (not made yet, missing, being deleted,
//! made for another pod, not allocatable as written, or DRA switched off in the profile) rejects
//! every node with its reason, before any resource is counted, so the pod takes nothing from
//! others. Otherwise each node is judged by the structured allocator (`dra::allocator`): devices
//! for every claim not allocated yet, from the devices published at hand-off, and the nodes an
//! allocated claim allows. The driver decides the chosen node's devices again when it applies
//! the claim (`Cache::allocate_claims`): two pods never get one device.
//!
//! Extended resources a DeviceClass provides (`dra::extended`) are a claim like the others,
//! with requests only for the resources the node does not offer itself.
//!
//! Always on: `predicate.DynamicResourceAllocationEnable: false` does not skip this filter (a pod
//! with claims bound without its devices would be worse than a pending one); it makes the filter
//! say that DRA is switched off (`Profile::dynamic_resources`). Pods without claims skip it
//! (`RARE`).

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Verdict};
use crate::dra::allocator::{self, NoFit};
use crate::dra::{Blocked, DraSnapshot, PodClaims};
use crate::event::Events;

pub struct DynamicResources;

impl Reason for Blocked {
    fn wake(self) -> Events {
        Blocked::wake(&self)
    }

    fn message(self, names: &Names<'_>) -> String {
        Blocked::message(&self, &names.pod)
    }
}

/// What the filter holds for one pod.
pub enum DraState<'a> {
    Blocked(Blocked),
    Claims(&'a PodClaims, &'a DraSnapshot),
}

impl Filter for DynamicResources {
    const NAME: &'static str = "DynamicResources";
    const RARE: bool = true;
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Blocked;
    type State<'a> = DraState<'a>;

    #[inline]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<DraState<'a>> {
        let c: &PodClaims = cx.claims?;
        if let Some(b) = c.blocked {
            return Some(DraState::Blocked(b));
        }
        if c.claims.is_empty() {
            return None;
        }
        Some(match c.devices.as_deref() {
            Some(d) => DraState::Claims(c, d),
            None => DraState::Blocked(Blocked::CannotAllocate),
        })
    }

    fn filter<V: Verdict<Blocked>>(state: &DraState<'_>, node: Node<'_>, v: &mut V) -> bool {
        let (claims, snap) = match state {
            DraState::Blocked(b) => {
                v.fail(*b);
                return false;
            }
            DraState::Claims(c, s) => (c, s),
        };
        let Some(meta) = node.meta() else {
            return false;
        };
        // Extended resources the node offers itself are NodeResourcesFit's (`dra::extended`).
        let on_node = claims.for_node(|s| node.chunk.alloc(s, node.i));
        match allocator::allocate(&snap.devices, &snap.in_use, &on_node, meta) {
            Ok(_) => true,
            Err(NoFit::CannotAllocate) => {
                v.fail(Blocked::CannotAllocate);
                false
            }
            Err(NoFit::Unavailable) => {
                v.fail(Blocked::Unavailable);
                false
            }
            Err(NoFit::InvalidPools) => {
                v.fail(Blocked::InvalidPools);
                false
            }
        }
    }
}
