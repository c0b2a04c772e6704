//! Constraints that span nodes, on the deterministic harness: the four cases a new user hit
//! (required anti-affinity on the hostname, a 4-to-0 topology spread, a required affinity to a
//! database pod, a pod whose claim does not exist), the lane and the burned claims under
//! concurrent workers, and the volume plugins.

use magma_engine::core::{Input, StatusReason};
use magma_engine::model::{
    LabelSelectorInput, PodAffinityInput, PodAffinityTermInput, PodInput, SelectorRequirementInput,
    SelectorTermInput, TopologySpreadInput,
};
use magma_engine::testing::{HarnessOptions, Sim, bound, mk_node, mk_pod, with_labels};
use magma_engine::volumes::{
    CsiNodeInput, PodVolumeInput, PvInput, PvcInput, StorageClassInput, StorageInput,
};
use std::collections::BTreeMap;
use std::time::Duration;

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
const BACKOFFS: Duration = Duration::from_secs(30);

fn app(mut p: PodInput, app: &str) -> PodInput {
    p.labels = vec![("app".into(), app.into())];
    p
}

fn selector(app: &str) -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![("app".into(), app.into())],
        match_expressions: vec![],
    })
}

fn term(app: &str, key: &str) -> PodAffinityTermInput {
    PodAffinityTermInput {
        label_selector: selector(app),
        topology_key: key.into(),
        ..Default::default()
    }
}

fn anti(mut p: PodInput, app: &str, key: &str) -> PodInput {
    p.pod_affinity
        .get_or_insert_with(PodAffinityInput::default)
        .required_anti
        .push(term(app, key));
    p
}

fn affinity(mut p: PodInput, app: &str, key: &str) -> PodInput {
    p.pod_affinity
        .get_or_insert_with(PodAffinityInput::default)
        .required
        .push(term(app, key));
    p
}

fn spread(mut p: PodInput, app: &str, key: &str, max_skew: i32, hard: bool) -> PodInput {
    p.topology_spread.push(TopologySpreadInput {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: if hard {
            "DoNotSchedule"
        } else {
            "ScheduleAnyway"
        }
        .into(),
        label_selector: selector(app),
        ..Default::default()
    });
    p
}

/// `n` nodes `n0..`, each with its hostname label and `zone-<i % zones>`.
fn zoned(c: &mut Sim, n: usize, zones: usize, cpu: &str) {
    for i in 0..n {
        let name = format!("n{i}");
        let zone = format!("zone-{}", i % zones);
        c.add_node(with_labels(
            mk_node(&name, cpu, "64Gi", 110),
            &[(HOSTNAME, &name), (ZONE, &zone)],
        ));
    }
}

fn zone_of(c: &Sim, node: &str) -> String {
    let n = &c.nodes[node];
    n.labels
        .iter()
        .find(|(k, _)| k == ZONE)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[test]
fn required_anti_affinity_on_the_hostname_never_shares_a_node() {
    // A Deployment of 6 replicas, each refusing another replica on its node, on 4 nodes.
    let mut c = Sim::workers(4);
    zoned(&mut c, 4, 2, "8");
    for i in 0..6 {
        c.add_pod(anti(
            app(mk_pod(&format!("web-{i}"), "100m", "128Mi"), "web"),
            "web",
            HOSTNAME,
        ));
    }
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 4
        && c.reported().len() == 2));
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in c.pods.values() {
        if let Some(n) = &p.node_name {
            *per_node.entry(n.clone()).or_default() += 1;
        }
    }
    assert!(per_node.values().all(|&n| n == 1), "{per_node:?}");
    let s = c
        .statuses
        .iter()
        .find(|s| s.reason == StatusReason::Unschedulable)
        .unwrap();
    assert_eq!(
        &*s.message,
        "0/4 nodes are unavailable: 4 node(s) didn't match pod anti-affinity rules. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    );
    assert_eq!(c.duplicate_bindings(), 0);
}

#[test]
fn a_zone_spread_of_max_skew_one_is_kept_even_in_a_burst() {
    // Two zones of two nodes; 4 pods with maxSkew 1 on the zone: 2 and 2, never 4 and 0.
    let mut c = Sim::workers(4);
    zoned(&mut c, 4, 2, "8");
    for i in 0..4 {
        c.add_pod(spread(
            app(mk_pod(&format!("s-{i}"), "100m", "128Mi"), "spread"),
            "spread",
            ZONE,
            1,
            true,
        ));
    }
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 4));
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for p in c.pods.values() {
        *per_zone
            .entry(zone_of(&c, p.node_name.as_deref().unwrap()))
            .or_default() += 1;
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        [2, 2],
        "{per_zone:?}"
    );
}

#[test]
fn a_pod_with_required_affinity_lands_beside_its_database() {
    let mut c = Sim::workers(2);
    zoned(&mut c, 6, 3, "8");
    c.add_pod(app(mk_pod("db", "100m", "128Mi"), "db"));
    c.settle();
    let db_zone = zone_of(&c, c.node_of("uid-db").unwrap());
    for i in 0..5 {
        c.add_pod(affinity(
            app(mk_pod(&format!("api-{i}"), "100m", "128Mi"), "api"),
            "db",
            ZONE,
        ));
    }
    c.settle();
    assert_eq!(c.bound_count(), 6);
    for i in 0..5 {
        let n = c.node_of(&format!("uid-api-{i}")).unwrap();
        assert_eq!(
            zone_of(&c, n),
            db_zone,
            "api-{i} on {n} is away from the db"
        );
    }
}

#[test]
fn a_pod_waiting_for_its_affinity_is_woken_when_the_database_arrives() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 2, 2, "8");
    c.add_pod(affinity(
        app(mk_pod("api", "100m", "128Mi"), "api"),
        "db",
        ZONE,
    ));
    c.settle();
    assert_eq!(c.bound_count(), 0);
    assert_eq!(
        &*c.statuses[0].message,
        "0/2 nodes are unavailable: 2 node(s) didn't match pod affinity rules. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    // The database is bound by someone else, in zone-1.
    let db = bound(app(mk_pod("db", "100m", "128Mi"), "db"), "n1");
    c.pods.insert(db.uid.clone(), db.clone());
    c.h.input(Input::PodApply(db));
    assert!(c.run_until(BACKOFFS, |c| c.node_of("uid-api").is_some()));
    assert_eq!(c.node_of("uid-api"), Some("n1"));
}

#[test]
fn the_first_pod_of_a_self_affine_group_is_placed_and_the_rest_follow() {
    let mut c = Sim::workers(3);
    zoned(&mut c, 6, 3, "8");
    for i in 0..4 {
        c.add_pod(affinity(
            app(mk_pod(&format!("g-{i}"), "100m", "128Mi"), "g"),
            "g",
            ZONE,
        ));
    }
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 4));
    let zones: std::collections::BTreeSet<String> = c
        .pods
        .values()
        .map(|p| zone_of(&c, p.node_name.as_deref().unwrap()))
        .collect();
    assert_eq!(zones.len(), 1, "the group is in one zone: {zones:?}");
}

#[test]
fn an_existing_pods_anti_affinity_keeps_matching_pods_out_of_its_zone() {
    let mut c = Sim::workers(2);
    zoned(&mut c, 4, 2, "8");
    c.add_pod(anti(
        app(mk_pod("loner", "100m", "128Mi"), "loner"),
        "noisy",
        ZONE,
    ));
    c.settle();
    let zone = zone_of(&c, c.node_of("uid-loner").unwrap());
    for i in 0..6 {
        c.add_pod(app(mk_pod(&format!("noisy-{i}"), "100m", "128Mi"), "noisy"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 7);
    for i in 0..6 {
        let n = c.node_of(&format!("uid-noisy-{i}")).unwrap();
        assert_ne!(zone_of(&c, n), zone, "noisy-{i} in the loner's zone");
    }
}

#[test]
fn zone_anti_affinity_and_matching_pods_racing_on_many_workers_stay_apart() {
    // Lane pods with zone anti-affinity against app=web and unconstrained app=web pods, handed off
    // together to 4 workers deciding on the same snapshot: claims that could not see each other
    // are burned and retried, never both kept.
    let mut c = Sim::new(HarnessOptions::workers(4));
    zoned(&mut c, 6, 3, "32");
    for i in 0..3 {
        c.add_pod(anti(
            app(mk_pod(&format!("db-{i}"), "100m", "128Mi"), "db"),
            "web",
            ZONE,
        ));
        c.add_pod(app(mk_pod(&format!("web-{i}"), "100m", "128Mi"), "web"));
    }
    c.run_until(BACKOFFS, |_| false);
    let zone_has = |c: &Sim, zone: &str, prefix: &str| {
        c.pods.values().any(|p| {
            p.name.starts_with(prefix)
                && p.node_name
                    .as_deref()
                    .is_some_and(|n| zone_of(c, n) == zone)
        })
    };
    for z in ["zone-0", "zone-1", "zone-2"] {
        assert!(
            !(zone_has(&c, z, "db-") && zone_has(&c, z, "web-")),
            "a db and a web pod share {z}"
        );
    }
    // Every pod is bound or reported.
    for p in c.pods.values() {
        assert!(
            p.node_name.is_some() || c.reported().contains(&p.uid),
            "{} lost",
            p.uid
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Labels no selector reads (`docs/constraints.md`)

/// A pod labelled `app=<app>` and with an id label no selector reads.
fn sandbox(name: &str, app_name: &str) -> PodInput {
    let mut p = app(mk_pod(name, "100m", "128Mi"), app_name);
    p.labels.push(("sandbox-id".into(), format!("id-{name}")));
    p
}

#[test]
fn labels_no_selector_reads_are_not_interned() {
    let mut c = Sim::workers(2);
    zoned(&mut c, 4, 2, "64");
    c.add_pod(sandbox("first", "web"));
    c.settle();
    let interned = c.h.core().cache().interner().len();
    for i in 0..400 {
        c.add_pod(sandbox(&format!("s-{i}"), "web"));
    }
    c.settle();
    assert_eq!(c.bound_count(), 401);
    assert_eq!(
        c.h.core().cache().interner().len(),
        interned,
        "no label value interned per pod"
    );
}

#[test]
fn placed_pods_labelled_before_any_selector_read_the_key_are_seen_by_the_first_one() {
    // Every node holds an app=web pod, placed while no selector read `app`: a pod refusing
    // app=web on its node has nowhere to go.
    let mut c = Sim::workers(2);
    zoned(&mut c, 4, 2, "8");
    for i in 0..4 {
        c.add_pod(bound(sandbox(&format!("web-{i}"), "web"), &format!("n{i}")));
    }
    c.settle();
    c.add_pod(anti(mk_pod("loner", "100m", "128Mi"), "web", HOSTNAME));
    assert!(c.run_until(BACKOFFS, |c| c.reported().contains("uid-loner")));
    assert_eq!(c.node_of("uid-loner"), None);
    // And one spreading over them counts them: 4 web pods in zone-0 and zone-1 each hold two.
    let mut p = spread(sandbox("spreader", "web"), "web", ZONE, 1, true);
    p.labels.retain(|(k, _)| k != "app");
    c.add_pod(p);
    c.settle();
    assert!(c.node_of("uid-spreader").is_some());
}

#[test]
fn a_pending_pod_labelled_before_a_placed_pods_term_read_the_key_keeps_out_of_its_way() {
    // `web` is compiled (and handed off) while no selector reads `app`; then a pod placed by
    // someone else on the only node refuses app=web there. The worker holding `web` must not
    // decide on labels split before that (`PodInfo::stale`): it gives the pod back, the driver
    // converts it, and it is refused.
    use magma_engine::core::Input;
    use magma_engine::testing::Harness;
    let mut h = Harness::new(HarnessOptions::workers(1));
    h.input(Input::NodeApply(with_labels(
        mk_node("n0", "8", "64Gi", 110),
        &[(HOSTNAME, "n0")],
    )));
    h.input(Input::PodApply(sandbox("web", "web")));
    h.flush(); // `web` handed off, not yet taken by the worker
    h.input(Input::PodApply(bound(
        anti(mk_pod("guard", "100m", "128Mi"), "web", HOSTNAME),
        "n0",
    )));
    h.flush(); // the snapshot with `guard` and the new label epoch
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        h.step(0);
        h.results_observed(|r| outcomes.push(format!("{:?}", r.outcome)));
        h.flush();
    }
    assert!(
        matches!(outcomes.first().map(String::as_str), Some("Stale")),
        "{outcomes:?}"
    );
    assert!(
        outcomes.iter().all(|o| !o.starts_with("Claimed")),
        "web placed beside guard: {outcomes:?}"
    );
    assert!(
        outcomes.iter().any(|o| o.starts_with("Unschedulable")),
        "{outcomes:?}"
    );
}

#[test]
fn preemption_plans_with_the_labels_a_term_placed_meanwhile_reads() {
    // `web` (high priority, app=web as a string: no selector read `app` yet) is decided
    // unschedulable for room on n0, the only node. Before the driver takes the result, a pod
    // placed by someone else on n0 refuses app=web there. Evicting the low-priority `filler`
    // would not help: preemption must see `web`'s app label (`Core::preempt` converts it).
    use magma_engine::core::{Input, Intent};
    use magma_engine::testing::Harness;
    let mut h = Harness::new(HarnessOptions::workers(1));
    h.input(Input::NodeApply(with_labels(
        mk_node("n0", "1", "64Gi", 110),
        &[(HOSTNAME, "n0")],
    )));
    let mut filler = bound(mk_pod("filler", "900m", "128Mi"), "n0");
    filler.priority = 0;
    h.input(Input::PodApply(filler));
    let mut web = sandbox("web", "web");
    web.containers[0].requests = vec![("cpu".into(), "500m".into())];
    web.priority = 1000;
    h.input(Input::PodApply(web));
    h.flush();
    h.step(0); // decided on a snapshot without `guard`: no room on n0
    let mut guard = bound(anti(mk_pod("guard", "10m", "16Mi"), "web", HOSTNAME), "n0");
    guard.priority = 2000;
    h.input(Input::PodApply(guard));
    h.results();
    h.flush();
    let preempted: Vec<String> = h
        .take_intents()
        .into_iter()
        .filter_map(|i| match i {
            Intent::Preempt(p) => Some(format!("{p:?}")),
            _ => None,
        })
        .collect();
    assert!(
        preempted.is_empty(),
        "filler evicted for a node web can never use: {preempted:?}"
    );
}

#[test]
fn a_pool_pod_labelled_before_a_term_read_its_key_is_woken_by_the_room_freed() {
    // `web` (app=web as a string: no selector read `app` yet) waits for room on n0. Then a pod
    // placed on n0 refuses pods *without* an app label, which `web` is not. When room is
    // freed on n0, the check that wakes pods must not judge `web` by its labels as handed off
    // (no `app`: refused): `room_for` answers Unknown for a stale pod, and it is placed.
    let mut c = Sim::workers(1);
    c.add_node(with_labels(
        mk_node("n0", "1", "64Gi", 110),
        &[(HOSTNAME, "n0")],
    ));
    c.add_pod(bound(mk_pod("filler", "900m", "128Mi"), "n0"));
    let mut web = sandbox("web", "web");
    web.containers[0].requests = vec![("cpu".into(), "500m".into())];
    c.add_pod(web);
    c.settle();
    assert_eq!(c.node_of("uid-web"), None, "no room yet");
    let mut guard = mk_pod("guard", "10m", "16Mi");
    guard.pod_affinity = Some(PodAffinityInput {
        required_anti: vec![PodAffinityTermInput {
            label_selector: Some(LabelSelectorInput {
                match_labels: vec![],
                match_expressions: vec![SelectorRequirementInput {
                    key: "app".into(),
                    operator: "DoesNotExist".into(),
                    values: vec![],
                }],
            }),
            topology_key: HOSTNAME.into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    guard.labels = vec![("app".into(), "guard".into())];
    c.add_pod(bound(guard, "n0"));
    c.settle();
    c.delete_pod("uid-filler");
    assert!(
        c.run_until(Duration::from_secs(5), |c| c.node_of("uid-web").is_some()),
        "web not woken by the room freed on n0"
    );
}

// ---------------------------------------------------------------------------------------------
// Volumes

fn with_claim(mut p: PodInput, claim: &str) -> PodInput {
    p.volumes.push(PodVolumeInput {
        name: "data".into(),
        claim: Some(claim.into()),
        ephemeral: false,
    });
    p
}

fn pvc(name: &str, class: &str, volume: Option<&str>) -> PvcInput {
    PvcInput {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("pvc-uid-{name}"),
        storage_class: Some(class.into()),
        volume_name: volume.map(str::to_owned),
        phase: if volume.is_some() { "Bound" } else { "Pending" }.into(),
        access_modes: vec!["ReadWriteOnce".into()],
        ..Default::default()
    }
}

fn in_zone(zone: &str) -> Vec<SelectorTermInput> {
    vec![SelectorTermInput {
        match_expressions: vec![SelectorRequirementInput {
            key: ZONE.into(),
            operator: "In".into(),
            values: vec![zone.into()],
        }],
        match_fields: vec![],
    }]
}

fn storage(c: &mut Sim, s: StorageInput) {
    c.h.input(Input::Storage(s));
}

#[test]
fn a_claim_that_appears_while_its_pod_is_in_flight_wakes_it() {
    // The claim arrives after the pod was handed off (its volumes resolved without it) and
    // before the worker decides. Storage is not in the snapshot, so no publication marks the
    // change: the wake-up must still reach the decision, or the pod waits for the 5 min flush.
    let mut c = Sim::workers(1);
    zoned(&mut c, 2, 2, "8");
    storage(
        &mut c,
        StorageInput::Class(StorageClassInput {
            name: "fast".into(),
            provisioner: "csi.example.com".into(),
            binding_mode: "WaitForFirstConsumer".into(),
            ..Default::default()
        }),
    );
    c.add_pod(with_claim(mk_pod("p", "100m", "128Mi"), "data-p"));
    c.h.flush();
    assert_eq!(
        c.h.handoff().len(),
        1,
        "in flight, its claim resolved as missing"
    );
    storage(
        &mut c,
        StorageInput::Pv(PvInput {
            name: "pv-1".into(),
            node_affinity: Some(in_zone("zone-1")),
            labels: vec![(ZONE.into(), "zone-1".into())],
            csi: Some(("csi.example.com".into(), "vol-1".into())),
            ..Default::default()
        }),
    );
    storage(
        &mut c,
        StorageInput::Pvc(pvc("data-p", "fast", Some("pv-1"))),
    );
    c.h.flush();
    let start = c.h.now();
    c.settle();
    assert_eq!(
        c.node_of("uid-p"),
        Some("n1"),
        "retried at once with its claim"
    );
    assert_eq!(c.h.now(), start);
}

#[test]
fn a_pod_whose_claim_does_not_exist_waits_and_is_woken_when_it_appears() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 2, 2, "8");
    storage(
        &mut c,
        StorageInput::Class(StorageClassInput {
            name: "fast".into(),
            provisioner: "csi.example.com".into(),
            binding_mode: "WaitForFirstConsumer".into(),
            ..Default::default()
        }),
    );
    c.add_pod(with_claim(mk_pod("p", "100m", "128Mi"), "data-p"));
    c.settle();
    assert_eq!(c.bound_count(), 0);
    assert_eq!(
        &*c.statuses[0].message,
        "0/2 nodes are unavailable: 2 persistentvolumeclaim \"data-p\" not found. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    );
    storage(
        &mut c,
        StorageInput::Pv(PvInput {
            name: "pv-1".into(),
            node_affinity: Some(in_zone("zone-1")),
            labels: vec![(ZONE.into(), "zone-1".into())],
            csi: Some(("csi.example.com".into(), "vol-1".into())),
            ..Default::default()
        }),
    );
    storage(
        &mut c,
        StorageInput::Pvc(pvc("data-p", "fast", Some("pv-1"))),
    );
    assert!(c.run_until(BACKOFFS, |c| c.bound_count() == 1));
    assert_eq!(
        c.node_of("uid-p"),
        Some("n1"),
        "the PV's node affinity pins it to zone-1"
    );
}

#[test]
fn an_unbound_immediate_claim_waits_and_a_wait_for_first_consumer_claim_is_provisioned() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 4, 2, "8");
    c.hold_binds = true;
    for (name, mode) in [("slow", "Immediate"), ("late", "WaitForFirstConsumer")] {
        storage(
            &mut c,
            StorageInput::Class(StorageClassInput {
                name: name.into(),
                provisioner: "csi.example.com".into(),
                binding_mode: mode.into(),
                allowed_topologies: in_zone("zone-0"),
            }),
        );
    }
    storage(&mut c, StorageInput::Pvc(pvc("imm", "slow", None)));
    storage(&mut c, StorageInput::Pvc(pvc("wffc", "late", None)));
    c.add_pod(with_claim(mk_pod("a", "100m", "128Mi"), "imm"));
    c.add_pod(with_claim(mk_pod("b", "100m", "128Mi"), "wffc"));
    c.settle();
    let a = c
        .statuses
        .iter()
        .find(|s| &*s.uid == "uid-a")
        .expect("a is reported");
    assert!(
        a.message
            .contains("pod has unbound immediate PersistentVolumeClaims"),
        "{}",
        a.message
    );
    assert_eq!(
        c.held.len(),
        1,
        "b is claimed, its bind waits for provisioning"
    );
    let b = &c.held[0];
    assert_eq!(
        zone_of(&c, &b.node),
        "zone-0",
        "the class's allowed topology"
    );
    assert_eq!(b.provision, [("default".into(), "wffc".into())]);
    assert_eq!(b.volume_timeout, Duration::from_secs(600));
}

#[test]
fn csi_attach_limits_and_volume_zones_filter_nodes() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 2, 2, "8");
    storage(
        &mut c,
        StorageInput::CsiNode(CsiNodeInput {
            node: "n0".into(),
            drivers: vec![("csi.example.com".into(), Some(1))],
        }),
    );
    for i in 0..2 {
        storage(
            &mut c,
            StorageInput::Pv(PvInput {
                name: format!("pv-{i}"),
                labels: vec![(ZONE.into(), "zone-0__zone-1".into())],
                csi: Some(("csi.example.com".into(), format!("vol-{i}"))),
                ..Default::default()
            }),
        );
        storage(
            &mut c,
            StorageInput::Pvc(pvc(&format!("c{i}"), "any", Some(&format!("pv-{i}")))),
        );
    }
    // n0 takes one CSI volume; the second pod must go to n1.
    let mut p0 = with_claim(mk_pod("p0", "100m", "128Mi"), "c0");
    p0.node_selector = vec![(HOSTNAME.into(), "n0".into())];
    c.add_pod(p0);
    c.settle();
    assert_eq!(c.node_of("uid-p0"), Some("n0"));
    let mut p1 = with_claim(mk_pod("p1", "100m", "128Mi"), "c1");
    p1.node_selector = vec![(HOSTNAME.into(), "n0".into())];
    c.add_pod(p1);
    c.settle();
    let s = c
        .statuses
        .iter()
        .find(|s| &*s.uid == "uid-p1")
        .expect("p1 is reported");
    assert_eq!(
        &*s.message,
        "0/2 nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) exceed max volume count. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
    );
}

// ---------------------------------------------------------------------------------------------
// Static binding (`volumes::matching`)

fn local_class(c: &mut Sim) {
    storage(
        c,
        StorageInput::Class(StorageClassInput {
            name: "local".into(),
            provisioner: "kubernetes.io/no-provisioner".into(),
            binding_mode: "WaitForFirstConsumer".into(),
            allowed_topologies: vec![],
        }),
    );
}

fn on_host(node: &str) -> Vec<SelectorTermInput> {
    vec![SelectorTermInput {
        match_expressions: vec![SelectorRequirementInput {
            key: HOSTNAME.into(),
            operator: "In".into(),
            values: vec![node.into()],
        }],
        match_fields: vec![],
    }]
}

fn local_pv(name: &str, size: &str, affinity: Vec<SelectorTermInput>) -> PvInput {
    PvInput {
        name: name.into(),
        node_affinity: Some(affinity),
        capacity: Some(size.into()),
        access_modes: vec!["ReadWriteOnce".into()],
        storage_class: Some("local".into()),
        phase: "Available".into(),
        ..Default::default()
    }
}

fn local_claim(name: &str, size: &str) -> PvcInput {
    PvcInput {
        request: Some(size.into()),
        ..pvc(name, "local", None)
    }
}

/// A local claim takes the smallest existing PV that fits, on that PV's node; the bind intent
/// names the PV to bind the claim to, and nothing to provision.
#[test]
fn a_local_claim_takes_the_smallest_existing_pv_that_fits() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 3, 1, "8");
    c.hold_binds = true;
    local_class(&mut c);
    for (name, size, node) in [
        ("pv-big", "100Gi", "n2"),
        ("pv-small", "10Gi", "n2"),
        ("pv-tiny", "1Gi", "n1"),
    ] {
        storage(
            &mut c,
            StorageInput::Pv(local_pv(name, size, on_host(node))),
        );
    }
    storage(&mut c, StorageInput::Pvc(local_claim("nvme", "5Gi")));
    c.add_pod(with_claim(mk_pod("p", "100m", "128Mi"), "nvme"));
    c.settle();
    assert_eq!(c.held.len(), 1, "claimed, its bind waiting for PreBind");
    let b = &c.held[0];
    assert_eq!(&*b.node, "n2", "the only node with a PV of 5Gi or more");
    assert_eq!(b.bind_pvs.len(), 1);
    assert_eq!(
        (&*b.bind_pvs[0].claim, &*b.bind_pvs[0].pv),
        ("nvme", "pv-small")
    );
    assert!(b.provision.is_empty(), "nothing to provision");
}

/// What a PV must have to be chosen: the claim's class, size, access modes, volume mode and
/// selector; none of the others is.
#[test]
fn a_pv_that_does_not_match_the_claim_is_never_chosen() {
    type Spoil = Box<dyn Fn(&mut PvInput)>;
    let mismatches: Vec<(&str, Spoil)> = vec![
        ("too small", Box::new(|p| p.capacity = Some("1Gi".into()))),
        (
            "another class",
            Box::new(|p| p.storage_class = Some("other".into())),
        ),
        (
            "read-only",
            Box::new(|p| p.access_modes = vec!["ReadOnlyMany".into()]),
        ),
        ("block", Box::new(|p| p.volume_mode = Some("Block".into()))),
        ("not available", Box::new(|p| p.phase = "Released".into())),
        ("being deleted", Box::new(|p| p.terminating = true)),
        (
            "claimed by another",
            Box::new(|p| p.claim_ref = Some(("default".into(), "x".into()))),
        ),
        (
            "labels the selector refuses",
            Box::new(|p| p.labels = vec![("tier".into(), "slow".into())]),
        ),
    ];
    for (what, change) in mismatches {
        let mut c = Sim::workers(1);
        zoned(&mut c, 1, 1, "8");
        local_class(&mut c);
        let mut pv = local_pv("pv", "10Gi", on_host("n0"));
        pv.labels = vec![("tier".into(), "fast".into())];
        change(&mut pv);
        storage(&mut c, StorageInput::Pv(pv));
        let mut claim = local_claim("nvme", "5Gi");
        claim.selector = Some(LabelSelectorInput {
            match_labels: vec![("tier".into(), "fast".into())],
            match_expressions: vec![],
        });
        storage(&mut c, StorageInput::Pvc(claim));
        c.add_pod(with_claim(mk_pod("p", "100m", "128Mi"), "nvme"));
        c.settle();
        assert_eq!(c.bound_count(), 0, "{what}");
        let s = c
            .statuses
            .iter()
            .find(|s| &*s.uid == "uid-p")
            .unwrap_or_else(|| panic!("{what}: not reported"));
        assert_eq!(
            &*s.message,
            "0/1 nodes are unavailable: 1 node(s) didn't find available persistent volumes to bind. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            "{what}"
        );
    }
}

/// Two pods, one PV reachable from two nodes, four workers: exactly one pod gets it; the other
/// is told no PV is left. Both decisions run in the lane, and the first one's reservation is
/// in place before the second is resolved.
#[test]
fn two_pods_never_get_one_pv() {
    for round in 0..20 {
        let mut c = Sim::workers(4);
        zoned(&mut c, 2, 1, "8");
        c.hold_binds = true;
        local_class(&mut c);
        storage(
            &mut c,
            StorageInput::Pv(local_pv("shared", "10Gi", in_zone("zone-0"))),
        );
        for i in 0..2 {
            storage(
                &mut c,
                StorageInput::Pvc(local_claim(&format!("c{i}"), "5Gi")),
            );
            c.add_pod(with_claim(
                mk_pod(&format!("p{i}"), "100m", "128Mi"),
                &format!("c{i}"),
            ));
        }
        c.settle();
        let chosen: Vec<&str> = c
            .held
            .iter()
            .flat_map(|b| b.bind_pvs.iter().map(|s| &*s.pv))
            .collect();
        assert_eq!(chosen, ["shared"], "round {round}: {chosen:?}");
        assert!(
            c.statuses.iter().any(|s| s
                .message
                .contains("didn't find available persistent volumes to bind")),
            "round {round}: the other pod is told"
        );
    }
}

/// A bind that fails gives the PV back: the next attempt (the pod's own, after its backoff) can
/// take it again.
#[test]
fn a_failed_bind_releases_its_pv() {
    let mut c = Sim::workers(1);
    zoned(&mut c, 1, 1, "8");
    c.hold_binds = true;
    local_class(&mut c);
    storage(
        &mut c,
        StorageInput::Pv(local_pv("pv", "10Gi", on_host("n0"))),
    );
    storage(&mut c, StorageInput::Pvc(local_claim("nvme", "5Gi")));
    c.add_pod(with_claim(mk_pod("p", "100m", "128Mi"), "nvme"));
    c.settle();
    let b = c.held.pop().expect("claimed");
    c.answer_bind_with(
        &b,
        magma_engine::core::BindResult::PreBindFailed("binding volumes: test".into()),
    );
    c.hold_binds = true;
    assert!(c.run_until(BACKOFFS, |c| !c.held.is_empty()));
    assert_eq!(
        &*c.held[0].bind_pvs[0].pv, "pv",
        "taken again after the failure"
    );
}
