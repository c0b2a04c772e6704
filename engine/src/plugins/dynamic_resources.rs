//! DynamicResources (DRA, `resource.k8s.io/v1`): a pod's ResourceClaims, resolved when it is
//! handed off (`dra`). A claim that holds the pod back (not made yet, missing, being deleted,
//! made for another pod, not allocatable, or DRA switched off in the profile) rejects every node
//! with its reason, before any resource is counted, so the pod takes nothing from others.
//!
//! Always on: `predicate.DynamicResourceAllocationEnable: false` does not skip this filter (a pod
//! with claims bound without its devices would be worse than a pending one); it makes the filter
//! say that DRA is switched off (`Profile::dynamic_resources`).

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Verdict};
use crate::dra::{Blocked, PodClaims};
use crate::event::Events;

pub struct DynamicResources;

impl Reason for Blocked {
    fn wake(self) -> Events {
        Blocked::wake(&self)
    }

    fn message(self, names: &Names<'_>) -> String {
        Blocked::message(&self, names.strings)
    }
}

impl Filter for DynamicResources {
    const NAME: &'static str = "DynamicResources";
    const RARE: bool = true;
    const SWITCH: Option<super::Switch> = None;
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Blocked;
    type State<'a> = Blocked;

    #[inline]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<Blocked> {
        cx.claims.and_then(|c: &PodClaims| c.blocked)
    }

    fn filter<V: Verdict<Blocked>>(blocked: &Blocked, _: Node<'_>, v: &mut V) -> bool {
        v.fail(*blocked);
        false
    }
}
