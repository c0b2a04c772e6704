//! Cache tests: copy-on-write publication, the bind-version rules (claims counted, external
//! capacity reductions bump), completed pods, orphans, and slot reuse.

use super::*;
use crate::binder::Candidate;
use crate::model::{ContainerInput, NodeInput, PodInput};
use crate::snapshot::CHUNK;

fn mk_node(name: &str, cpu: &str) -> NodeInput {
    NodeInput {
        name: name.into(),
        allocatable: vec![
            ("cpu".into(), cpu.into()),
            ("memory".into(), "16Gi".into()),
            ("pods".into(), "110".into()),
        ],
        ready: true,
        ..Default::default()
    }
}

fn mk_pod(cache: &mut Cache, name: &str, cpu: &str) -> CompiledPod {
    let input = PodInput {
        uid: format!("uid-{name}"),
        namespace: "ns".into(),
        name: name.into(),
        containers: vec![ContainerInput {
            requests: vec![("cpu".into(), cpu.into())],
            ..Default::default()
        }],
        ..Default::default()
    };
    cache.compile_pod(&input).unwrap()
}

fn cache() -> Cache {
    Cache::new(
        Arc::new(BindVersions::default()),
        Arc::new(Profile::default()),
    )
}

fn free_cpu(s: &Snapshot, slot: usize) -> i64 {
    s.arena
        .chunk(slot / CHUNK)
        .free(crate::model::CPU, slot % CHUNK)
}

#[test]
fn publication_copies_only_changed_chunks() {
    let mut c = cache();
    for i in 0..(4 * CHUNK) {
        c.apply_node(&mk_node(&format!("n{i}"), "4"), 0).unwrap();
    }
    let s1 = c.publish().unwrap();
    assert!(c.publish().is_none(), "nothing changed: nothing to publish");
    let p = mk_pod(&mut c, "a", "1");
    c.apply_bound_pod(&p, "n70", false);
    let s2 = c.publish().unwrap();
    assert_eq!(
        s2.arena.shared_chunks(&s1.arena),
        3,
        "only the chunk holding n70 was copied"
    );
    assert_eq!(free_cpu(&s1, 70), 4000, "old snapshots are immutable");
    assert_eq!(free_cpu(&s2, 70), 3000);
    assert!(s2.seq > s1.seq);
}

#[test]
fn claims_and_external_changes_advance_versions() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    let v0 = s.version(0);
    assert_eq!(v0, c.versions().current(0), "a fresh snapshot is current");
    // A worker claims on s.
    assert!(c.versions().try_claim(0, v0));
    assert!(
        c.versions().current(0) > s.version(0),
        "snapshot now stale for n0"
    );
    let p = mk_pod(&mut c, "a", "1");
    let node = c.apply_claim(
        Candidate {
            slot: 0,
            version: v0,
            incarnation: s.incarnation(0),
        },
        Some(&p),
    );
    assert_eq!(node.as_deref(), Some("n0"));
    let s2 = c.publish().unwrap();
    assert_eq!(
        s2.version(0),
        c.versions().current(0),
        "after applying the claim the snapshot is current"
    );
    assert_eq!(free_cpu(&s2, 0), 3000, "and includes the claimed pod");
    // Another scheduler's pod reduces capacity: the version moves.
    let q = mk_pod(&mut c, "other", "1");
    c.apply_bound_pod(&q, "n0", false);
    assert!(
        !c.versions().try_claim(0, s2.version(0)),
        "stale decision cannot be claimed"
    );
    let s3 = c.publish().unwrap();
    assert_eq!(s3.version(0), c.versions().current(0));
}

#[test]
fn invariant_holds_when_a_bump_races_an_unapplied_claim() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    // Worker claims (CAS done, message not yet applied) ...
    assert!(c.versions().try_claim(0, s.version(0)));
    // ... while the writer applies an external, capacity-reducing change.
    let q = mk_pod(&mut c, "other", "1");
    c.apply_bound_pod(&q, "n0", false);
    let s2 = c.publish().unwrap();
    assert!(
        s2.version(0) < c.versions().current(0),
        "the unapplied claim keeps the snapshot behind the counter"
    );
    let p = mk_pod(&mut c, "a", "1");
    c.apply_claim(
        Candidate {
            slot: 0,
            version: s.version(0),
            incarnation: s.incarnation(0),
        },
        Some(&p),
    );
    let s3 = c.publish().unwrap();
    assert_eq!(s3.version(0), c.versions().current(0));
    assert_eq!(free_cpu(&s3, 0), 2000);
}

#[test]
fn capacity_increases_do_not_invalidate_decisions() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let p = mk_pod(&mut c, "a", "1");
    c.apply_bound_pod(&p, "n0", false);
    let s = c.publish().unwrap();
    let mask = c.remove_pod(&p.uid);
    assert_eq!(mask, event::POD_REMOVED | event::ROOM_FREED);
    let mut bigger = mk_node("n0", "8");
    bigger.labels.clear();
    let mask = c.apply_node(&bigger, 0).unwrap();
    assert_eq!(
        mask & event::NODE_ALLOCATABLE_GREW,
        event::NODE_ALLOCATABLE_GREW
    );
    assert!(
        c.versions().try_claim(0, s.version(0)),
        "more room never makes an older decision unsafe"
    );
}

#[test]
fn restricting_node_updates_bump() {
    for change in ["cordon", "taint", "label", "shrink"] {
        let mut c = cache();
        c.apply_node(&mk_node("n0", "4"), 0).unwrap();
        let s = c.publish().unwrap();
        let mut n = mk_node("n0", "4");
        match change {
            "cordon" => n.unschedulable = true,
            "taint" => n.taints.push(crate::model::TaintInput {
                key: "k".into(),
                value: "v".into(),
                effect: "NoSchedule".into(),
            }),
            "label" => n.labels.push(("zone".into(), "b".into())),
            _ => n.allocatable[0].1 = "2".into(),
        }
        c.apply_node(&n, 0).unwrap();
        assert!(
            !c.versions().try_claim(0, s.version(0)),
            "{change} must invalidate older decisions"
        );
    }
}

#[test]
fn completed_pods_stop_counting_immediately() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let p = mk_pod(&mut c, "a", "3");
    c.apply_bound_pod(&p, "n0", false);
    assert_eq!(free_cpu(&c.publish().unwrap(), 0), 1000);
    let mask = c.apply_bound_pod(&p, "n0", true);
    assert_eq!(mask, event::POD_REMOVED | event::ROOM_FREED);
    assert_eq!(free_cpu(&c.publish().unwrap(), 0), 4000);
    assert!(c.placement(&p.uid).is_none());
}

#[test]
fn assumption_confirmed_by_watch_is_not_double_counted() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    let p = mk_pod(&mut c, "a", "1");
    assert!(c.versions().try_claim(0, s.version(0)));
    c.apply_claim(
        Candidate {
            slot: 0,
            version: s.version(0),
            incarnation: s.incarnation(0),
        },
        Some(&p),
    );
    assert!(c.placement(&p.uid).unwrap().assumed);
    let v = c.versions().current(0);
    c.apply_bound_pod(&p, "n0", false);
    assert!(!c.placement(&p.uid).unwrap().assumed);
    assert_eq!(
        c.versions().current(0),
        v,
        "confirmation is not a new reduction"
    );
    assert_eq!(free_cpu(&c.publish().unwrap(), 0), 3000);
}

#[test]
fn forgetting_a_failed_bind_frees_capacity_without_phantoms() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    let p = mk_pod(&mut c, "a", "4");
    assert!(c.versions().try_claim(0, s.version(0)));
    c.apply_claim(
        Candidate {
            slot: 0,
            version: s.version(0),
            incarnation: s.incarnation(0),
        },
        Some(&p),
    );
    assert_eq!(free_cpu(&c.publish().unwrap(), 0), 0);
    assert_eq!(c.forget(&p.uid), event::POD_REMOVED | event::ROOM_FREED);
    let s2 = c.publish().unwrap();
    assert_eq!(
        free_cpu(&s2, 0),
        4000,
        "no phantom allocation after a failed bind"
    );
    assert_eq!(c.forget(&p.uid), 0, "forgetting twice is harmless");
}

#[test]
fn claim_for_a_deleted_pod_counts_the_version_but_assumes_nothing() {
    let mut c = cache();
    c.apply_node(&mk_node("n0", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    assert!(c.versions().try_claim(0, s.version(0)));
    assert_eq!(
        c.apply_claim(
            Candidate {
                slot: 0,
                version: s.version(0),
                incarnation: s.incarnation(0)
            },
            None
        ),
        None
    );
    let s2 = c.publish().unwrap();
    assert_eq!(s2.version(0), c.versions().current(0));
    assert_eq!(free_cpu(&s2, 0), 4000);
}

#[test]
fn pods_on_unknown_nodes_are_counted_when_the_node_arrives() {
    let mut c = cache();
    let p = mk_pod(&mut c, "ds", "1");
    c.apply_bound_pod(&p, "late", false);
    c.apply_node(&mk_node("late", "4"), 0).unwrap();
    let s = c.publish().unwrap();
    assert_eq!(free_cpu(&s, 0), 3000);
}

#[test]
fn removed_slots_are_reused_only_past_the_horizon() {
    let mut c = cache();
    c.apply_node(&mk_node("a", "4"), 0).unwrap();
    let s1 = c.publish().unwrap();
    c.delete_node("a");
    let s2 = c.publish().unwrap();
    assert!(s2.node(0).is_none());
    // A worker still holds s1: the slot must not be reused.
    c.apply_node(&mk_node("b", "4"), s1.seq).unwrap();
    assert_eq!(c.node_slot("b"), Some(1));
    // Nobody holds anything older than s2: reuse.
    c.apply_node(&mk_node("c", "4"), s2.seq).unwrap();
    assert_eq!(c.node_slot("c"), Some(0));
    let s3 = c.publish().unwrap();
    assert_ne!(
        s3.incarnation(0),
        s1.incarnation(0),
        "a reused slot is a new incarnation"
    );
    assert!(
        s3.version(0) > s1.version(0),
        "versions keep growing across incarnations"
    );
    // A decision made on the old incarnation can never be claimed on the new node.
    assert!(!c.versions().try_claim(0, s1.version(0)));
}

#[test]
fn reset_removes_missing_nodes() {
    let mut c = cache();
    for n in ["a", "b", "c"] {
        c.apply_node(&mk_node(n, "4"), 0).unwrap();
    }
    let (_, errors) = c.reset_nodes(&[mk_node("b", "4"), mk_node("d", "4")], 0);
    assert!(errors.is_empty());
    let mut names: Vec<String> = c.node_names().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(names, ["b", "d"]);
    assert_eq!(c.live_nodes(), 2);
}

#[test]
fn new_resources_extend_rows_without_touching_other_chunks() {
    let mut c = cache();
    for i in 0..(2 * CHUNK) {
        c.apply_node(&mk_node(&format!("n{i}"), "4"), 0).unwrap();
    }
    let s1 = c.publish().unwrap();
    let mut gpu = mk_node("n0", "4");
    gpu.allocatable.push(("nvidia.com/gpu".into(), "8".into()));
    c.apply_node(&gpu, 0).unwrap();
    let s2 = c.publish().unwrap();
    assert_eq!(s2.arena.shared_chunks(&s1.arena), 1);
    let slot = c.registry().lookup("nvidia.com/gpu").unwrap();
    assert_eq!(s2.arena.chunk(0).free(slot, 0), 8);
    assert_eq!(
        s2.arena.chunk(1).free(slot, 0),
        0,
        "chunks without the row read as zero"
    );
    assert_eq!(s2.gpu_slot, Some(slot));
}

#[test]
fn pods_without_labels_terms_or_claims_share_their_namespaces_pod_info() {
    let mut c = cache();
    let (a, b) = (mk_pod(&mut c, "a", "1"), mk_pod(&mut c, "b", "1"));
    assert!(
        Arc::ptr_eq(&a.info, &b.info),
        "no PodInfo allocated per plain pod"
    );
    c.apply_node(&mk_node("n", "4"), 0).unwrap();
    let slot = c.node_slot("n").unwrap() as usize;
    c.enable_pod_index();
    c.apply_bound_pod(&a, "n", false);
    c.apply_bound_pod(&b, "n", false);
    assert_eq!(c.publish().unwrap().pods_on(slot).len(), 2);
    c.remove_pod(&a.uid);
    let s = c.publish().unwrap();
    assert_eq!(
        s.pods_on(slot).len(),
        1,
        "removing one leaves the other counted"
    );
    assert_eq!(free_cpu(&s, slot), 3000);
}

/// Past `MAX_WATCHED` distinct terms the least recently asked is dropped (its pods' readers scan
/// again), a term asked again is kept, and a placed pod is counted only by the terms that select
/// it.
#[test]
fn watched_terms_drop_the_least_recently_asked() {
    use crate::index::terms::MAX_WATCHED;
    use crate::model::{LabelSelectorInput, PodAffinityInput, PodAffinityTermInput};
    let mut c = cache();
    let mut n1 = mk_node("n1", "64");
    n1.labels = vec![(HOSTNAME_KEY.into(), "n1".into())];
    c.apply_node(&n1, 0).unwrap();
    // A pod with required anti-affinity to the app `a<i>` on the hostname, labelled `a<i>`.
    let anti = |c: &mut Cache, i: usize| {
        let app = format!("a{i}");
        let input = PodInput {
            uid: format!("uid-{i}"),
            namespace: "ns".into(),
            name: format!("p{i}"),
            labels: vec![("app".into(), app.clone())],
            pod_affinity: Some(PodAffinityInput {
                required_anti: vec![PodAffinityTermInput {
                    label_selector: Some(LabelSelectorInput {
                        match_labels: vec![("app".into(), app)],
                        match_expressions: vec![],
                    }),
                    topology_key: HOSTNAME_KEY.into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        c.compile_pod(&input).unwrap()
    };
    let first = anti(&mut c, 0);
    c.watch_terms(&first);
    for i in 1..MAX_WATCHED {
        let p = anti(&mut c, i);
        c.watch_terms(&p);
    }
    assert_eq!(c.watched_terms(), MAX_WATCHED);
    // Asked again, the first term becomes the most recent; the second is the oldest.
    c.watch_terms(&first);
    let term = |p: &CompiledPod| p.info.affinity.as_deref().unwrap().required_anti[0].clone();
    let new = anti(&mut c, MAX_WATCHED);
    c.watch_terms(&new);
    assert_eq!(c.watched_terms(), MAX_WATCHED);
    let second = anti(&mut c, 1);
    let snap = c.publish().unwrap();
    let terms = &snap.index().terms;
    assert!(terms.watched(&term(&first)).is_some(), "asked again: kept");
    assert!(
        terms.watched(&term(&second)).is_none(),
        "least recently asked: dropped"
    );
    assert!(terms.watched(&term(&new)).is_some());
    // The placed pod `a<MAX>` counts for its own term only.
    c.apply_bound_pod(&new, "n1", false);
    let snap = c.publish().unwrap();
    let terms = &snap.index().terms;
    let counted =
        |t: &crate::model::AffinityTerm| terms.watched(t).unwrap().matching.sums.iter().count();
    assert_eq!(counted(&term(&new)), 1);
    assert_eq!(counted(&term(&first)), 0);
}

/// A pod held back by its own claims (a template's claim not made yet, a claim not seen yet,
/// an ephemeral volume's claim not made yet) is told so by name, and none of those names is
/// interned: a stream of such pods leaves the interner as it was.
#[test]
fn pods_held_back_by_their_own_claims_intern_nothing() {
    use crate::model::{PodVolumeInput, pod_claims::PodClaimInput};
    let mut c = cache();
    let held = |c: &mut Cache, i: usize| {
        let input = PodInput {
            uid: format!("uid-{i}"),
            namespace: "ns".into(),
            name: format!("sandbox-{i}"),
            resource_claims: vec![PodClaimInput {
                name: "gpu".into(),
                template: Some("gpu-template".into()),
                made: (i % 2 == 1).then(|| Some(format!("sandbox-{i}-gpu-x7k2p"))),
                ..Default::default()
            }],
            volumes: vec![PodVolumeInput {
                name: "scratch".into(),
                ephemeral: true,
                ..Default::default()
            }],
            ..Default::default()
        };
        let pod = c.compile_pod(&input).unwrap();
        let claims = c.resolve_claims(&pod);
        let volumes = c.resolve_volumes(&pod, |_| false);
        let names = c.names().for_task(&pod, Some(&volumes), Some(&claims));
        (
            claims.blocked.expect("held back").message(&names.pod),
            volumes.blocked.expect("held back").message(&names.pod),
        )
    };
    assert_eq!(
        held(&mut c, 0),
        (
            "pod \"ns/sandbox-0\": ResourceClaim not created yet".to_owned(),
            "waiting for ephemeral volume controller to create the persistentvolumeclaim \
             \"sandbox-0-scratch\""
                .to_owned()
        )
    );
    assert_eq!(
        held(&mut c, 1).0,
        "resourceclaim.resource.k8s.io \"sandbox-1-gpu-x7k2p\" not found"
    );
    interns_nothing_per_run(&mut c, 0, |c, i| {
        held(c, i + 2);
    });
}

/// Runs `one(cache, i)` for `i` in `0..2_000` and checks that the interner holds no more
/// strings after the first `warm` runs than it did after them: nothing interned per run.
fn interns_nothing_per_run(c: &mut Cache, warm: usize, mut one: impl FnMut(&mut Cache, usize)) {
    for i in 0..warm {
        one(c, i);
    }
    let interned = c.interner().len();
    for i in warm..2_000 {
        one(c, i);
    }
    assert_eq!(c.interner().len(), interned, "nothing interned per run");
}

/// CSI volume handles are not interned: each provisioned volume has a handle of its own (and a
/// claim not bound yet a synthetic one), so a stream of pods with volumes of their own, each
/// resolved while its claim waits, then placed with it bound and gone again, leaves the
/// interner as it was. NodeVolumeLimits still counts them by handle.
#[test]
fn csi_volume_handles_are_not_interned() {
    use crate::model::PodVolumeInput;
    use crate::volumes::{PvInput, PvcInput, StorageClassInput, StorageInput};
    const DRIVER: &str = "csi.example.com";
    let mut c = cache();
    c.apply_node(&mk_node("n0", "64"), 0).unwrap();
    let (_, errors) = c.apply_storage(StorageInput::Class(StorageClassInput {
        name: "fast".into(),
        provisioner: DRIVER.into(),
        binding_mode: "WaitForFirstConsumer".into(),
        ..Default::default()
    }));
    assert!(errors.is_empty(), "{errors:?}");
    let claim = |i: usize, volume: Option<String>| PvcInput {
        namespace: "ns".into(),
        name: format!("sandbox-{i}-scratch"),
        uid: format!("pvc-uid-{i}"),
        storage_class: Some("fast".into()),
        volume_name: volume,
        phase: "Pending".into(),
        access_modes: vec!["ReadWriteOnce".into()],
        owner_uid: Some(format!("uid-{i}")),
        request: Some("1Gi".into()),
        ..Default::default()
    };
    let driver = c
        .interner()
        .get(DRIVER)
        .expect("the class's provisioner is interned");
    let one = |c: &mut Cache, i: usize| {
        let input = PodInput {
            uid: format!("uid-{i}"),
            namespace: "ns".into(),
            name: format!("sandbox-{i}"),
            volumes: vec![PodVolumeInput {
                name: "scratch".into(),
                ephemeral: true,
                ..Default::default()
            }],
            ..Default::default()
        };
        let pod = c.compile_pod(&input).unwrap();
        // Handed off while its claim waits for the first consumer: it counts a synthetic
        // handle under the class's provisioner.
        assert!(
            c.apply_storage(StorageInput::Pvc(claim(i, None)))
                .1
                .is_empty()
        );
        let pending = c.resolve_volumes(&pod, |_| false);
        assert!(pending.blocked.is_none(), "{:?}", pending.blocked);
        let synthetic = format!(
            "{}ns/sandbox-{i}-scratch",
            crate::volumes::UNBOUND_HANDLE_PREFIX
        );
        assert_eq!(&*pending.csi, &[(driver, Arc::from(synthetic.as_str()))]);
        // Provisioned, bound, and placed: it counts the volume's own handle.
        let pv = format!("pvc-{i}");
        let handle = format!("vol-{i:08x}");
        let (_, errors) = c.apply_storage(StorageInput::Pv(PvInput {
            name: pv.clone(),
            csi: Some((DRIVER.into(), handle.clone())),
            capacity: Some("1Gi".into()),
            access_modes: vec!["ReadWriteOnce".into()],
            storage_class: Some("fast".into()),
            phase: "Bound".into(),
            claim_ref: Some(("ns".into(), format!("sandbox-{i}-scratch"))),
            ..Default::default()
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let mut bound = claim(i, Some(pv.clone()));
        bound.phase = "Bound".into();
        assert!(c.apply_storage(StorageInput::Pvc(bound)).1.is_empty());
        c.apply_bound_pod(&pod, "n0", false);
        let placed = &c.pods[&*pod.uid].info.csi;
        assert_eq!(&**placed, &[(driver, Arc::from(handle.as_str()))]);
        // Gone: the pod, its claim, its volume.
        c.remove_pod(&pod.uid);
        c.apply_storage(StorageInput::PvcDelete {
            namespace: "ns".into(),
            name: format!("sandbox-{i}-scratch"),
        });
        c.apply_storage(StorageInput::PvDelete(pv));
        c.publish();
    };
    interns_nothing_per_run(&mut c, 1, one);
}

/// A pod whose own claim cannot be allocated as it is (a template with a request Magma cannot
/// read makes one such claim per pod), or whose volume claim is lost (its volume named by the
/// claim), is told why with the claim's and the volume's names, and none of those texts is
/// interned: a stream of such pods leaves the interner as it was.
#[test]
fn why_a_pods_own_claim_is_refused_is_not_interned() {
    use crate::dra::{ClaimInput, DraInput, RequestInput};
    use crate::model::{PodVolumeInput, pod_claims::PodClaimInput};
    use crate::volumes::{PvcInput, StorageInput};
    let mut c = cache();
    let one = |c: &mut Cache, i: usize| {
        let claim = format!("sandbox-{i}-gpu-x7k2p");
        let (_, errors, _) = c.apply_dra(DraInput::Claim(ClaimInput {
            namespace: "ns".into(),
            name: claim.clone(),
            uid: format!("claim-uid-{i}"),
            owner_uid: Some(format!("uid-{i}")),
            // Neither `exactly` nor `firstAvailable`.
            requests: vec![RequestInput {
                name: "gpu".into(),
                ..Default::default()
            }],
            ..Default::default()
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let pvc = format!("data-{i}");
        let (_, errors) = c.apply_storage(StorageInput::Pvc(PvcInput {
            namespace: "ns".into(),
            name: pvc.clone(),
            uid: format!("pvc-uid-{i}"),
            volume_name: Some(format!("pvc-{i:08x}")),
            phase: "Lost".into(),
            access_modes: vec!["ReadWriteOnce".into()],
            ..Default::default()
        }));
        assert!(errors.is_empty(), "{errors:?}");
        let input = PodInput {
            uid: format!("uid-{i}"),
            namespace: "ns".into(),
            name: format!("sandbox-{i}"),
            resource_claims: vec![PodClaimInput {
                name: "gpu".into(),
                template: Some("gpu-template".into()),
                made: Some(Some(claim.clone())),
                ..Default::default()
            }],
            volumes: vec![PodVolumeInput {
                name: "data".into(),
                claim: Some(pvc.clone()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let pod = c.compile_pod(&input).unwrap();
        let claims = c.resolve_claims(&pod);
        let volumes = c.resolve_volumes(&pod, |_| false);
        let names = c.names().for_task(&pod, Some(&volumes), Some(&claims));
        let got = (
            claims.blocked.expect("refused").message(&names.pod),
            volumes.blocked.expect("lost").message(&names.pod),
        );
        assert_eq!(
            got,
            (
                format!("resource claim ns/{claim}, request gpu: unknown request type"),
                format!(
                    "persistentvolumeclaim \"{pvc}\" bound to non-existent persistentvolume \
                     \"pvc-{i:08x}\""
                )
            )
        );
        c.apply_dra(DraInput::ClaimDelete {
            namespace: "ns".into(),
            name: claim,
        });
        c.apply_storage(StorageInput::PvcDelete {
            namespace: "ns".into(),
            name: pvc,
        });
    };
    interns_nothing_per_run(&mut c, 1, one);
}
