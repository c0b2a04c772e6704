//! Cases ported from kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/nodevolumelimits/csi_test.go`, table `TestCSILimits`
//! (Apache-2.0, The Kubernetes Authors), run against Magma's `NodeVolumeLimits` through the
//! deterministic harness (`testing::Sim`). Ported from the stored version at commit
//! `991b78f93068` (the ~v1.33 copy with `vaLister`; the 1.34–1.36 `csi.go` was not in the index,
//! see `notes/research-29.md` §1).
//!
//! Each case builds upstream's fixtures in Magma's storage inputs, on one node
//! (`node-for-max-pd-test-1`):
//!
//! - for each driver `d` of the case and `j` in 0..4, a PV `csi-<d>-<j>` with
//!   `spec.csi{driver: d, volumeHandle: csi-<d>-<j>}` and a claim of the same name bound to it
//!   (no class); the claims `csi-4` (class `csi-sc`, unbound), `csi-5` (no class, unbound) and
//!   `csi-6` (class `csi-sc`, bound to the missing PV `missing-in-action`); the class `csi-sc`
//!   whose provisioner is the case's first driver;
//! - `limitSource`: `csinode` is a CSINode listing every driver with `allocatable.count` =
//!   `maxVols`, `csinode-with-no-limit` lists them without a count, unset is no CSINode;
//! - the existing pods bound to the node, then the incoming pod; the harness settles and the
//!   pod is either bound (upstream's `Success`) or reported with the scheduler's message.
//!   Upstream's `Unschedulable` `node(s) exceed max volume count` is Magma's
//!   `0/1 nodes are unavailable: 1 node(s) exceed max volume count.`
//!
//! Port conventions: upstream's pods have no names and the empty namespace; here each has a
//! name of its alias and the namespace `default` (the claims too), except the ephemeral-volume
//! pods, which keep `test/abc` and their uids. Upstream calls the plugin alone; here the whole
//! chain runs, so `csi-sc` is a `WaitForFirstConsumer` class (with upstream's default
//! `Immediate`, VolumeBinding would refuse every pod whose own claim is unbound before
//! NodeVolumeLimits is consulted; for existing pods the mode changes nothing).
//!
//! Not ported (Magma does not translate in-tree volumes through CSI migration, does not model
//! inline volumes, and does not watch VolumeAttachments):
//! - "should count VolumeAttachments towards volume limit when no pods exist" and
//!   "should schedule pod when VolumeAttachments count does not exceed limit" (VolumeAttachments);
//! - "should count in-tree volumes if migration is enabled", "nil csi node", "should count
//!   unbound in-tree volumes if migration is enabled", "should not limit pod if volume used does
//!   not report limits", "should not count non-migratable in-tree volumes", "should count
//!   in-tree inline volumes if migration is enabled", the three "should (not) count in-tree,
//!   (inline) and csi volumes if migration is enabled (when scheduling in-tree volumes)" rows,
//!   "should count in-tree and csi volumes if migration is enabled (when scheduling csi
//!   volumes)" and "don't skip Filter when the pod has inline migratable volumes" (in-tree
//!   AWS EBS / hostPath PVs and inline AWS EBS volumes, CSI migration);
//! - `TestCSILimitsQHint`, `TestCSILimitsAddedPVCQHint`,
//!   `TestCSILimitsDeletedVolumeAttachmentQHint`: upstream's queueing-hint functions (Magma wakes
//!   pods by its own event classes; VolumeAttachments are not watched).
//!
//! Messages: the "ephemeral volume missing" / "not owned" rows are refused upstream by
//! NodeVolumeLimits' Filter (`looking up PVC test/abc-xyz: persistentvolumeclaims "abc-xyz" not
//! found`, UnschedulableAndUnresolvable; `PVC test/abc-xyz was not created for pod test/abc (pod
//! is not owner)`, Error). Magma refuses such pods earlier, in VolumeBinding (kube-scheduler's
//! VolumeBinding PreFilter does too): `waiting for ephemeral volume controller to create the
//! persistentvolumeclaim "abc-xyz"` / `persistentvolumeclaim "abc-xyz" not found`. Those rows
//! assert that the pod is not bound and is reported unschedulable for the claim, not the text.
//! "ephemeral volume not owned" (a claim without a controller owner) is refused as upstream's
//! VolumeBinding refuses it, with its text.
//!
//! After upstream's rows come Magma's own boundary rows (limit 0, limit 1 and the first pod,
//! exactly at the limit, one over, a claim shared under a limit of 1, a `WaitForFirstConsumer`
//! claim provisioned on the node, no CSINode at all).

use magma_engine::PodInput;
use magma_engine::core::{Input, StatusReason};
use magma_engine::testing::{Sim, bound, mk_node, mk_pod};
use magma_engine::volumes::{
    CsiNodeInput, PodVolumeInput, PvInput, PvcInput, StorageClassInput, StorageInput,
};

const NODE: &str = "node-for-max-pd-test-1";
const EBS: &str = "ebs.csi.aws.com";
const GCE: &str = "pd.csi.storage.gke.io";
const SC: &str = "csi-sc";
const TOO_MANY: &str = "0/1 nodes are unavailable: 1 node(s) exceed max volume count.";

// ---------------------------------------------------------------------------------------------
// Fixtures

/// Upstream's `limitSource` and `maxVols`.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// No CSINode.
    NoCsiNode,
    /// `csinode-with-no-limit`.
    Unlimited,
    /// `csinode` with `allocatable.count`.
    Count(i64),
}

/// What upstream expects of the incoming pod.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// `Success`: the pod is bound to the node.
    Fit,
    /// `Unschedulable`, `node(s) exceed max volume count`.
    TooMany,
    /// Refused before NodeVolumeLimits (see the module doc): not bound, and reported with a
    /// message naming this claim.
    Refused(&'static str),
}

struct Case {
    new_pod: PodInput,
    existing: Vec<PodInput>,
    drivers: &'static [&'static str],
    limit: Limit,
    extra_claims: Vec<PvcInput>,
    want: Want,
}

/// A pod `name` in `default` using the claims `claims`.
fn pvc_pod(name: &str, claims: &[&str]) -> PodInput {
    let mut p = mk_pod(name, "10m", "16Mi");
    for (i, c) in claims.iter().enumerate() {
        p.volumes.push(PodVolumeInput {
            name: format!("v{i}"),
            claim: Some(c.to_string()),
            ephemeral: false,
        });
    }
    p
}

/// `test/abc` with uid `uid` and generic ephemeral volumes `volumes` (claims `abc-<volume>`).
fn ephemeral_pod(uid: &str, volumes: &[&str]) -> PodInput {
    let mut p = mk_pod("abc", "10m", "16Mi");
    p.namespace = "test".into();
    p.uid = uid.into();
    for v in volumes {
        p.volumes.push(PodVolumeInput {
            name: v.to_string(),
            claim: None,
            ephemeral: true,
        });
    }
    p
}

fn ebs(j: u32) -> String {
    format!("csi-{EBS}-{j}")
}

fn gce(j: u32) -> String {
    format!("csi-{GCE}-{j}")
}

// Upstream's pods (`TestCSILimits`), one function per alias.

/// `csiEBSOneVolPod`.
fn csi_ebs_one() -> PodInput {
    pvc_pod("csi-ebs-one", &[&ebs(0)])
}

/// `csiEBSTwoVolPod`.
fn csi_ebs_two() -> PodInput {
    pvc_pod("csi-ebs-two", &[&ebs(1), &ebs(2)])
}

/// `runningPod`.
fn running() -> PodInput {
    pvc_pod("running", &[&ebs(3)])
}

/// `pendingVolumePod`: the unbound claim `csi-4`.
fn pending() -> PodInput {
    pvc_pod("pending", &["csi-4"])
}

/// `unboundPVCPod2`: another pod using `csi-4`.
fn unbound2() -> PodInput {
    pvc_pod("unbound2", &["csi-4"])
}

/// `missingPVPod`: `csi-6`, bound to a PV that does not exist.
fn missing_pv() -> PodInput {
    pvc_pod("missing-pv", &["csi-6"])
}

/// `noSCPVCPod`: `csi-5`, without a class.
fn no_sc() -> PodInput {
    pvc_pod("no-sc", &["csi-5"])
}

/// `gceTwoVolPod`.
fn gce_two() -> PodInput {
    pvc_pod("gce-two", &[&gce(1), &gce(2)])
}

/// `ephemeralVolumePod`: `test/abc`, uid 12345, volume `xyz`.
fn eph() -> PodInput {
    ephemeral_pod("12345", &["xyz"])
}

/// `ephemeralTwoVolumePod`: `test/abc`, uid 12345II, volumes `x` and `y`.
fn eph2() -> PodInput {
    ephemeral_pod("12345II", &["x", "y"])
}

/// `onlyConfigmapAndSecretVolPod`: Magma's pod input carries only claim volumes, so a pod with
/// configMap and secret volumes only has none.
fn only_configmap_and_secret() -> PodInput {
    mk_pod("cm-secret", "10m", "16Mi")
}

/// `pvcPodWithConfigmapAndSecret` (the configMap and secret are not carried, as above).
fn pvc_with_configmap_and_secret() -> PodInput {
    pvc_pod("pvc-cm-secret", &[&ebs(0)])
}

/// `ephemeralPodWithConfigmapAndSecret` (upstream gives it no uid).
fn eph_with_configmap_and_secret() -> PodInput {
    ephemeral_pod("uid-abc-cm-secret", &["xyz"])
}

/// An ephemeral claim `test/<name>` of class `csi-sc`, unbound, controlled by `owner`.
fn ephemeral_claim(name: &str, owner: Option<&str>) -> PvcInput {
    PvcInput {
        namespace: "test".into(),
        name: name.into(),
        uid: format!("pvc-uid-{name}"),
        storage_class: Some(SC.into()),
        volume_name: None,
        phase: "Pending".into(),
        access_modes: vec!["ReadWriteOnce".into()],
        terminating: false,
        owner_uid: owner.map(str::to_owned),
        ..Default::default()
    }
}

/// `ephemeralClaim`: `abc-xyz`, owned by `eph` (uid 12345).
fn eph_claim() -> PvcInput {
    ephemeral_claim("abc-xyz", Some("12345"))
}

/// `conflictingClaim`: `abc-xyz` without owner references.
fn conflicting_claim() -> PvcInput {
    ephemeral_claim("abc-xyz", None)
}

fn claim(name: &str, class: Option<&str>, volume: Option<&str>) -> PvcInput {
    PvcInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("pvc-uid-{name}"),
        storage_class: class.map(str::to_owned),
        volume_name: volume.map(str::to_owned),
        phase: if volume.is_some() { "Bound" } else { "Pending" }.into(),
        access_modes: vec!["ReadWriteOnce".into()],
        ..Default::default()
    }
}

/// Upstream's listers (`getFakeCSIPVLister`, `getFakeCSIPVCLister`,
/// `getFakeCSIStorageClassLister`, `getFakeCSINodeLister`) as Magma's storage inputs.
fn storage(drivers: &[&str], limit: Limit, extra_claims: &[PvcInput]) -> Vec<StorageInput> {
    let mut out = vec![StorageInput::Class(StorageClassInput {
        name: SC.into(),
        provisioner: drivers[0].into(),
        // See the module doc: upstream's class has the default (Immediate) mode.
        binding_mode: "WaitForFirstConsumer".into(),
        allowed_topologies: vec![],
    })];
    for d in drivers {
        for j in 0..4 {
            let name = format!("csi-{d}-{j}");
            out.push(StorageInput::Pv(PvInput {
                name: name.clone(),
                csi: Some((d.to_string(), name.clone())),
                ..Default::default()
            }));
            out.push(StorageInput::Pvc(claim(&name, None, Some(&name))));
        }
    }
    out.push(StorageInput::Pvc(claim("csi-4", Some(SC), None)));
    out.push(StorageInput::Pvc(claim("csi-5", None, None)));
    out.push(StorageInput::Pvc(claim(
        "csi-6",
        Some(SC),
        Some("missing-in-action"),
    )));
    out.extend(extra_claims.iter().cloned().map(StorageInput::Pvc));
    let count = match limit {
        Limit::NoCsiNode => None,
        Limit::Unlimited => Some(None),
        Limit::Count(n) => Some(Some(n)),
    };
    if let Some(count) = count {
        out.push(StorageInput::CsiNode(CsiNodeInput {
            node: NODE.into(),
            drivers: drivers.iter().map(|d| (d.to_string(), count)).collect(),
        }));
    }
    out
}

/// The incoming pod's fate: the node it is bound to, or its last unschedulable message as the
/// filters gave it (upstream's tables check Filter; PostFilter's `preemption: ...` is cut).
fn outcome(c: &Sim, uid: &str) -> Result<String, String> {
    if let Some(n) = c.node_of(uid) {
        return Ok(n.to_owned());
    }
    Err(c
        .statuses
        .iter()
        .rev()
        .find(|s| &*s.uid == uid && s.reason == StatusReason::Unschedulable)
        .map_or_else(
            || "<not reported>".to_owned(),
            |s| match s.message.split_once(" preemption: ") {
                Some((filters, _)) => filters.to_owned(),
                None => s.message.to_string(),
            },
        ))
}

fn world(drivers: &[&str], limit: Limit, extra_claims: &[PvcInput]) -> Sim {
    let mut c = Sim::workers(1);
    for s in storage(drivers, limit, extra_claims) {
        c.h.input(Input::Storage(s));
    }
    c.add_node(mk_node(NODE, "64", "256Gi", 110));
    c
}

fn check(case: Case) {
    let mut c = world(case.drivers, case.limit, &case.extra_claims);
    for p in case.existing {
        c.add_pod(bound(p, NODE));
    }
    c.settle();
    let uid = case.new_pod.uid.clone();
    c.add_pod(case.new_pod);
    c.settle();
    let got = outcome(&c, &uid);
    match case.want {
        Want::Fit => assert_eq!(got, Ok(NODE.to_owned())),
        Want::TooMany => assert_eq!(got, Err(TOO_MANY.to_owned())),
        Want::Refused(claim) => {
            let msg = got.expect_err("the pod must not be bound");
            assert!(
                msg.starts_with("0/1 nodes are unavailable: 1 ") && msg.contains(claim),
                "{msg}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// TestCSILimits (upstream's rows, in upstream's order)

#[test]
fn fits_when_node_volume_limit_ge_new_pods_csi_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(4),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn doesnt_when_node_volume_limit_le_pods_csi_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn should_when_driver_does_not_support_volume_limits() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Unlimited,
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn count_pending_pvcs_towards_volume_limit_le_pods_csi_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![pending(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn count_multiple_pending_pvcs_towards_volume_limit_ge_pods_csi_volume() {
    // Two pods on the same unbound claim count it once: 3 + 1 <= 4.
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![pending(), unbound2(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(4),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn should_count_pvcs_with_invalid_pv_name_but_valid_sc() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![missing_pv(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn dont_count_pvcs_with_missing_sc_towards_volume_limit() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), no_sc()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn count_pvcs_with_the_same_type_towards_volume_limit() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![gce_two(), csi_ebs_two()],
        drivers: &[EBS, GCE],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn dont_count_pvcs_with_different_type_towards_volume_limit() {
    check(Case {
        new_pod: gce_two(),
        existing: vec![csi_ebs_two(), running()],
        drivers: &[EBS, GCE],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn ephemeral_volume_missing() {
    // Upstream: UnschedulableAndUnresolvable from NodeVolumeLimits, `looking up PVC test/abc-xyz:
    // persistentvolumeclaims "abc-xyz" not found`; Magma: VolumeBinding, `waiting for ephemeral
    // volume controller to create the persistentvolumeclaim "abc-xyz"`.
    check(Case {
        new_pod: eph(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Unlimited,
        extra_claims: vec![],
        want: Want::Refused("persistentvolumeclaim \"abc-xyz\""),
    });
}

#[test]
fn ephemeral_volume_not_owned() {
    // Upstream: Error from NodeVolumeLimits, `PVC test/abc-xyz was not created for pod test/abc
    // (pod is not owner)`; upstream's VolumeBinding PreFilter refuses it with the same text,
    // and so does Magma's.
    check(Case {
        new_pod: eph(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Unlimited,
        extra_claims: vec![conflicting_claim()],
        want: Want::Refused("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"),
    });
}

#[test]
fn ephemeral_volume_unbound() {
    check(Case {
        new_pod: eph(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Unlimited,
        extra_claims: vec![eph_claim()],
        want: Want::Fit,
    });
}

#[test]
fn ephemeral_doesnt_when_node_volume_limit_le_pods_csi_volume() {
    check(Case {
        new_pod: eph(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![eph_claim()],
        want: Want::TooMany,
    });
}

#[test]
fn ephemeral_doesnt_when_node_volume_limit_le_pods_ephemeral_csi_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), eph2()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![
            ephemeral_claim("abc-x", Some("12345II")),
            ephemeral_claim("abc-y", Some("12345II")),
        ],
        want: Want::TooMany,
    });
}

#[test]
fn persistent_doesnt_when_node_volume_limit_le_pods_ephemeral_csi_volume_plus_persistent_volume_ephemeral_disabled()
 {
    // Upstream's `ephemeralEnabled: false` no longer changes anything (the gate is gone); Magma
    // has no such switch: the same case as the next row.
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), eph(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(3),
        extra_claims: vec![eph_claim()],
        want: Want::TooMany,
    });
}

#[test]
fn persistent_doesnt_when_node_volume_limit_le_pods_ephemeral_csi_volume_plus_persistent_volume() {
    // 1 + 1 + 2 attached, + 1 new > 3.
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), eph(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(3),
        extra_claims: vec![eph_claim()],
        want: Want::TooMany,
    });
}

#[test]
fn persistent_okay_when_node_volume_limit_gt_pods_ephemeral_csi_volume_plus_persistent_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), eph(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(5),
        extra_claims: vec![eph_claim()],
        want: Want::Fit,
    });
}

#[test]
fn skip_filter_when_the_pod_only_uses_secrets_and_configmaps() {
    // Upstream: PreFilter `Skip`. Magma: no claim, nothing to count; the pod is bound.
    check(Case {
        new_pod: only_configmap_and_secret(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn dont_skip_filter_when_the_pod_has_pvcs() {
    check(Case {
        new_pod: pvc_with_configmap_and_secret(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn dont_skip_filter_when_the_pod_has_ephemeral_volumes() {
    // As `ephemeral_volume_missing`: refused for the missing claim, by VolumeBinding in Magma.
    check(Case {
        new_pod: eph_with_configmap_and_secret(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Unlimited,
        extra_claims: vec![],
        want: Want::Refused("persistentvolumeclaim \"abc-xyz\""),
    });
}

// ---------------------------------------------------------------------------------------------
// Magma's boundary rows (not upstream's): `attached + new > limit` refuses, each volume counted
// once per node.

#[test]
fn magma_limit_zero_takes_no_volume() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Count(0),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn magma_limit_zero_still_takes_a_pod_without_volumes() {
    check(Case {
        new_pod: only_configmap_and_secret(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Count(0),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn magma_limit_one_takes_the_first_pod() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![],
        drivers: &[EBS],
        limit: Limit::Count(1),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn magma_exactly_at_the_limit_fits() {
    // 2 attached + 1 new = 3 = limit.
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(3),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn magma_one_over_the_limit_is_refused() {
    // 3 attached + 1 new = 4 > 3.
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(3),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}

#[test]
fn magma_a_volume_already_attached_is_not_new() {
    // The node is full (2 of 2), but the pod's only volume is one of them.
    check(Case {
        new_pod: pvc_pod("again", &[&ebs(1)]),
        existing: vec![csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::Count(2),
        extra_claims: vec![],
        want: Want::Fit,
    });
}

#[test]
fn magma_no_csinode_means_no_limit() {
    check(Case {
        new_pod: csi_ebs_one(),
        existing: vec![running(), csi_ebs_two()],
        drivers: &[EBS],
        limit: Limit::NoCsiNode,
        extra_claims: vec![],
        want: Want::Fit,
    });
}

/// Two pending pods sharing one claim on a node that takes one volume: both are bound, in one
/// settle (whichever is decided first, the other's volume is the same one).
fn shared_claim_under_limit_one(claim: &str) {
    let mut c = world(&[EBS], Limit::Count(1), &[]);
    c.add_pod(pvc_pod("a", &[claim]));
    c.add_pod(pvc_pod("b", &[claim]));
    c.settle();
    assert_eq!(outcome(&c, "uid-a"), Ok(NODE.to_owned()));
    assert_eq!(outcome(&c, "uid-b"), Ok(NODE.to_owned()));
}

#[test]
fn magma_two_pods_sharing_a_bound_claim_on_a_limit_one_node_both_bind() {
    shared_claim_under_limit_one(&ebs(0));
}

#[test]
fn magma_two_pods_sharing_an_unbound_claim_on_a_limit_one_node_both_bind() {
    shared_claim_under_limit_one("csi-4");
}

#[test]
fn magma_a_wait_for_first_consumer_claim_provisioned_on_the_node_counts() {
    // `csi-4` (class `csi-sc`, WaitForFirstConsumer, provisioner ebs) is provisioned on the node
    // for `a`; until its PV exists it counts under the provisioner: the node (limit 1) is full.
    let mut c = world(&[EBS], Limit::Count(1), &[]);
    c.add_pod(pvc_pod("a", &["csi-4"]));
    c.settle();
    assert_eq!(outcome(&c, "uid-a"), Ok(NODE.to_owned()));
    c.add_pod(csi_ebs_one());
    c.settle();
    assert_eq!(outcome(&c, "uid-csi-ebs-one"), Err(TOO_MANY.to_owned()));
}

#[test]
fn magma_a_pods_own_wait_for_first_consumer_claim_is_a_new_volume() {
    check(Case {
        new_pod: pending(),
        existing: vec![csi_ebs_one()],
        drivers: &[EBS],
        limit: Limit::Count(1),
        extra_claims: vec![],
        want: Want::TooMany,
    });
}
