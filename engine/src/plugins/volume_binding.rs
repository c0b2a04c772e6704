//! VolumeBinding (with VolumeRestrictions' ReadWriteOncePod rule): a pod's PersistentVolumeClaims
//! as kube-scheduler's `volumebinding` checks them. The claims are resolved when the pod is
//! handed off (`volumes`, which gives the order of the checks):
//!
//! - a missing, refused, `Lost` or deleted claim, an ephemeral claim not created yet or not the
//!   pod's, an unbound claim not left to the scheduler (no class, a missing or `Immediate` class,
//!   or pre-bound by its user: `spec.volumeName` without `pv.kubernetes.io/bind-completed`), a
//!   missing PV, or a ReadWriteOncePod claim another pod uses fail every node with
//!   kube-scheduler's text (`persistentvolumeclaim "X" not found`, ...);
//! - a bound claim's PV node affinity must match the node, `node(s) had volume node affinity
//!   conflict`;
//! - an unbound claim of a `WaitForFirstConsumer` class may take an existing PV (static binding:
//!   local PVs), the smallest that fits on the node, or the one pre-bound to it by `claimRef`
//!   (`volumes::matching`); the adapter then writes the PV's `claimRef` in PreBind and waits for
//!   the PV controller to bind the claim;
//! - otherwise it is provisioned on the chosen node: its class needs a provisioner (neither
//!   empty nor `kubernetes.io/no-provisioner`: local PVs are made by hand) and its
//!   `allowedTopologies` must match the node, or `node(s) didn't find available persistent
//!   volumes to bind`; once claimed, the bind intent asks the adapter to write
//!   `volume.kubernetes.io/selected-node` on the claim and to wait
//!   (`volumebinding.bindTimeoutSeconds`) until it is bound before binding the pod
//!   (kube-scheduler's Reserve and PreBind).
//!
//! A node can fail both ways at once; both reasons are reported, as upstream's `FindPodVolumes`.
//!
//! Not done: storage capacity (`CSIStorageCapacity`).

use super::{Cycle, Filter, Names, Node, OnFailure, Reason, Switch, Verdict};
use crate::event::{self, Events};
use crate::volumes::{Blocked, PodVolumes};

pub struct VolumeBinding;

/// `volumebinding.bindTimeoutSeconds` (kube-scheduler's default): how long the adapter waits for
/// provisioned claims to be bound before it gives the bind up.
pub const BIND_TIMEOUT_KEY: &str = "volumebinding.bindTimeoutSeconds";
pub const BIND_TIMEOUT_DEFAULT: i64 = 600;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Volumes {
    /// The pod cannot go anywhere (see [`Blocked`]).
    Blocked(Blocked),
    /// `node(s) had volume node affinity conflict`.
    NodeConflict,
    /// `node(s) didn't find available persistent volumes to bind`.
    BindConflict,
}

impl Reason for Volumes {
    fn wake(self) -> Events {
        match self {
            Volumes::Blocked(b) => b.wake(),
            Volumes::NodeConflict | Volumes::BindConflict => {
                event::STORAGE_CHANGED | event::NODE_ADDED | event::NODE_LABELS_CHANGED
            }
        }
    }

    fn message(self, names: &Names<'_>) -> String {
        match self {
            Volumes::Blocked(b) => b.message(&names.pod),
            Volumes::NodeConflict => "node(s) had volume node affinity conflict".to_owned(),
            Volumes::BindConflict => {
                "node(s) didn't find available persistent volumes to bind".to_owned()
            }
        }
    }
}

impl Filter for VolumeBinding {
    const NAME: &'static str = "VolumeBinding";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.VolumeBindingEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Volumes;
    type State<'a> = &'a PodVolumes;

    #[inline]
    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<&'a PodVolumes> {
        cx.volumes
            .filter(|v| v.blocked.is_some() || !v.bound.is_empty() || !v.provision.is_empty())
    }

    fn filter<V: Verdict<Volumes>>(v: &&PodVolumes, node: Node<'_>, out: &mut V) -> bool {
        if let Some(b) = v.blocked {
            out.fail(Volumes::Blocked(b));
            return false;
        }
        let Some(meta) = node.meta() else {
            return true;
        };
        let fits = |terms: &Option<Box<[crate::model::Term]>>| {
            terms
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| t.matches(meta)))
        };
        // Both checks run and each reports its reason (`FindPodVolumes`).
        let mut ok = true;
        if !v.bound.iter().all(|b| fits(&b.node_affinity)) {
            out.fail(Volumes::NodeConflict);
            if !V::EXPLAIN {
                return false;
            }
            ok = false;
        }
        // Each claim to bind takes an existing PV that fits the node, or is provisioned there
        // (kube-scheduler's `findMatchingVolumes` and `checkVolumeProvisions`, `volumes::assign`).
        if !v.provision.is_empty() && crate::volumes::assign(v, meta).is_none() {
            out.fail(Volumes::BindConflict);
            ok = false;
        }
        ok
    }
}
