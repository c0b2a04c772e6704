//! Plugin tables: pods × nodes against Kubernetes semantics, through a real cache snapshot.

use crate::allocate::{Decision, Scratch, allocate, failure_message};
use crate::binder::BindVersions;
use crate::cache::Cache;
use crate::conf::{PredicateSet, Profile, Weights};
use crate::model::*;
use crate::plugins::nodeorder;
use crate::plugins::predicates::{self, Failure};
use crate::snapshot::{CHUNK, Snapshot};
use std::sync::Arc;

const ALL: PredicateSet = PredicateSet {
    node_affinity: true,
    node_ports: true,
    taint_toleration: true,
};

struct World {
    cache: Cache,
    snap: Option<Arc<Snapshot>>,
}

impl World {
    fn new() -> World {
        World::with_profile(Profile::default())
    }
    fn with_profile(p: Profile) -> World {
        World {
            cache: Cache::new(Arc::new(BindVersions::default()), Arc::new(p)),
            snap: None,
        }
    }
    fn node(&mut self, n: NodeInput) -> &mut Self {
        self.cache.apply_node(&n, 0).unwrap();
        self
    }
    fn compile(&mut self, p: &PodInput) -> CompiledPod {
        self.cache.compile_pod(p).unwrap()
    }
    fn bind(&mut self, p: &PodInput, node: &str) {
        let c = self.compile(p);
        self.cache.apply_bound_pod(&c, node, false);
    }
    fn snap(&mut self) -> Arc<Snapshot> {
        if let Some(s) = self.cache.publish() {
            self.snap = Some(s);
        }
        self.snap.clone().expect("published")
    }
    fn fits(&mut self, p: &PodInput, slot: usize) -> bool {
        let cp = self.compile(p);
        let s = self.snap();
        predicates::fits(&cp, ALL, s.arena.chunk(slot / CHUNK), slot % CHUNK)
    }
    fn reasons(&mut self, p: &PodInput, slot: usize) -> Vec<Failure> {
        let cp = self.compile(p);
        let s = self.snap();
        let mut out = Vec::new();
        predicates::explain(
            &cp,
            ALL,
            s.arena.chunk(slot / CHUNK),
            slot % CHUNK,
            &mut |f| out.push(f),
        );
        out
    }
    /// Names of the candidates allocate picks, best first, or the failure message.
    fn allocate(&mut self, p: &PodInput) -> Result<Vec<String>, String> {
        let cp = self.compile(p);
        let s = self.snap();
        let mut scratch = Scratch::new(1);
        match allocate(&s, &cp, self.cache.versions(), &mut scratch) {
            Decision::Candidates => Ok(scratch
                .candidates
                .iter()
                .map(|c| s.node(c.slot as usize).unwrap().name.to_string())
                .collect()),
            Decision::Unschedulable(sum) => Err(failure_message(
                &sum,
                |r| self.cache.registry().name(r).to_owned(),
                |id| self.cache.interner().resolve(id).to_owned(),
            )),
        }
    }
}

fn node(name: &str, cpu: &str, mem: &str) -> NodeInput {
    NodeInput {
        name: name.into(),
        allocatable: vec![
            ("cpu".into(), cpu.into()),
            ("memory".into(), mem.into()),
            ("pods".into(), "110".into()),
        ],
        ready: true,
        ..Default::default()
    }
}

fn pod(name: &str, cpu: &str, mem: &str) -> PodInput {
    PodInput {
        uid: name.into(),
        namespace: "ns".into(),
        name: name.into(),
        containers: vec![ContainerInput {
            requests: [("cpu", cpu), ("memory", mem)]
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn labels(mut n: NodeInput, l: &[(&str, &str)]) -> NodeInput {
    n.labels = l
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    n
}

fn taint(mut n: NodeInput, key: &str, value: &str, effect: &str) -> NodeInput {
    n.taints.push(TaintInput {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    });
    n
}

fn tolerate(mut p: PodInput, key: &str, op: &str, value: &str, effect: &str) -> PodInput {
    p.tolerations.push(TolerationInput {
        key: key.into(),
        operator: op.into(),
        value: value.into(),
        effect: effect.into(),
    });
    p
}

fn host_port(mut p: PodInput, port: i32, proto: &str, ip: &str) -> PodInput {
    p.containers[0].ports.push(PortInput {
        host_port: port,
        protocol: proto.into(),
        host_ip: ip.into(),
    });
    p
}

#[test]
fn resource_fit_table() {
    let mut w = World::new();
    w.node(node("n0", "2", "4Gi"));
    w.bind(&pod("existing", "1", "1Gi"), "n0");
    let cases = [
        (pod("fits", "1", "3Gi"), true),
        (pod("exact", "1", "3Gi"), true),
        (pod("cpu", "1001m", "1Gi"), false),
        (pod("mem", "100m", "3073Mi"), false),
        (pod("nothing", "", ""), true),
    ];
    for (p, want) in cases {
        assert_eq!(w.fits(&p, 0), want, "{}", p.name);
    }
    assert_eq!(
        w.reasons(&pod("both", "2", "4Gi"), 0),
        [Failure::Insufficient(CPU), Failure::Insufficient(MEMORY)]
    );
}

#[test]
fn init_containers_and_overhead_count_in_fit() {
    let mut w = World::new();
    w.node(node("n0", "2", "4Gi"));
    let mut p = pod("init-heavy", "500m", "1Gi");
    p.init_containers.push(ContainerInput {
        requests: vec![("cpu".into(), "3".into())],
        ..Default::default()
    });
    assert!(!w.fits(&p, 0), "the init container alone needs 3 CPUs");
    let mut p = pod("overhead", "1900m", "1Gi");
    p.overhead = vec![("cpu".into(), "200m".into())];
    assert!(!w.fits(&p, 0), "overhead pushes it past 2 CPUs");
}

#[test]
fn extended_resources_and_pod_count() {
    let mut w = World::new();
    let mut gpu = node("gpu", "8", "8Gi");
    gpu.allocatable.push(("nvidia.com/gpu".into(), "2".into()));
    w.node(gpu);
    let mut small = node("small", "8", "8Gi");
    small.allocatable[2].1 = "1".into();
    w.node(small);
    let mut p = pod("wants-gpu", "1", "1Gi");
    p.containers[0]
        .requests
        .push(("nvidia.com/gpu".into(), "2".into()));
    assert!(w.fits(&p, 0));
    assert!(!w.fits(&p, 1), "a node without the resource has none");
    let gpu_slot = w.cache.registry().lookup("nvidia.com/gpu").unwrap();
    assert_eq!(w.reasons(&p, 1), [Failure::Insufficient(gpu_slot)]);
    p.containers[0].requests[2].1 = "3".into();
    assert!(!w.fits(&p, 0));
    w.bind(&pod("occupant", "100m", "100Mi"), "small");
    assert!(!w.fits(&pod("another", "100m", "100Mi"), 1));
    assert_eq!(
        w.reasons(&pod("another", "100m", "100Mi"), 1),
        [Failure::TooManyPods]
    );
}

#[test]
fn unschedulable_nodes_unless_tolerated() {
    let mut w = World::new();
    let mut n = node("cordoned", "4", "4Gi");
    n.unschedulable = true;
    w.node(n);
    let p = pod("p", "1", "1Gi");
    assert!(!w.fits(&p, 0));
    assert_eq!(w.reasons(&p, 0), [Failure::Unschedulable]);
    let p = tolerate(p, UNSCHEDULABLE_TAINT_KEY, "Exists", "", "NoSchedule");
    assert!(w.fits(&p, 0));
}

#[test]
fn node_selector_and_required_affinity() {
    let mut w = World::new();
    w.node(labels(
        node("a", "4", "4Gi"),
        &[("zone", "a"), ("gen", "3")],
    ));
    w.node(labels(node("b", "4", "4Gi"), &[("zone", "b")]));
    let mut p = pod("sel", "1", "1Gi");
    p.node_selector = vec![("zone".into(), "b".into())];
    assert_eq!((w.fits(&p, 0), w.fits(&p, 1)), (false, true));
    assert_eq!(w.reasons(&p, 0), [Failure::Affinity]);
    let term = |exprs: Vec<SelectorRequirementInput>| SelectorTermInput {
        match_expressions: exprs,
        match_fields: vec![],
    };
    let req = |k: &str, op: &str, v: &[&str]| SelectorRequirementInput {
        key: k.into(),
        operator: op.into(),
        values: v.iter().map(|s| s.to_string()).collect(),
    };
    let mut p = pod("aff", "1", "1Gi");
    // (zone In [a] AND gen Gt 2) OR (zone NotIn [a, b])
    p.affinity = Some(NodeAffinityInput {
        required: Some(vec![
            term(vec![req("zone", "In", &["a"]), req("gen", "Gt", &["2"])]),
            term(vec![req("zone", "NotIn", &["a", "b"])]),
        ]),
        preferred: vec![],
    });
    assert_eq!((w.fits(&p, 0), w.fits(&p, 1)), (true, false));
    // Selector and affinity must both hold.
    p.node_selector = vec![("zone".into(), "b".into())];
    assert_eq!((w.fits(&p, 0), w.fits(&p, 1)), (false, false));
    // matchFields on metadata.name (how DaemonSets pin pods).
    let mut p = pod("field", "1", "1Gi");
    p.affinity = Some(NodeAffinityInput {
        required: Some(vec![SelectorTermInput {
            match_expressions: vec![],
            match_fields: vec![req("metadata.name", "In", &["b"])],
        }]),
        preferred: vec![],
    });
    assert_eq!((w.fits(&p, 0), w.fits(&p, 1)), (false, true));
}

#[test]
fn taint_effects() {
    let mut w = World::new();
    w.node(taint(
        node("ns", "4", "4Gi"),
        "dedicated",
        "gpu",
        "NoSchedule",
    ));
    w.node(taint(
        node("ne", "4", "4Gi"),
        "dedicated",
        "gpu",
        "NoExecute",
    ));
    w.node(taint(
        node("pref", "4", "4Gi"),
        "dedicated",
        "gpu",
        "PreferNoSchedule",
    ));
    let p = pod("p", "1", "1Gi");
    assert_eq!(
        (w.fits(&p, 0), w.fits(&p, 1), w.fits(&p, 2)),
        (false, false, true),
        "PreferNoSchedule does not filter"
    );
    assert_eq!(
        w.reasons(&p, 0),
        [Failure::Taint {
            key: w.cache.interner().get("dedicated").unwrap(),
            value: w.cache.interner().get("gpu").unwrap()
        }]
    );
    let p = tolerate(p, "dedicated", "Equal", "gpu", "NoSchedule");
    assert_eq!(
        (w.fits(&p, 0), w.fits(&p, 1)),
        (true, false),
        "a NoSchedule toleration does not cover NoExecute"
    );
    let p = tolerate(pod("all", "1", "1Gi"), "dedicated", "Exists", "", "");
    assert_eq!((w.fits(&p, 0), w.fits(&p, 1)), (true, true));
}

#[test]
fn host_port_conflicts() {
    let mut w = World::new();
    w.node(node("n0", "8", "8Gi"));
    w.bind(
        &host_port(pod("web", "100m", "100Mi"), 8080, "TCP", "10.0.0.1"),
        "n0",
    );
    let cases = [
        (
            host_port(pod("same", "1", "1Gi"), 8080, "TCP", "10.0.0.1"),
            false,
        ),
        (
            host_port(pod("wildcard", "1", "1Gi"), 8080, "TCP", ""),
            false,
        ),
        (
            host_port(pod("other-ip", "1", "1Gi"), 8080, "TCP", "10.0.0.2"),
            true,
        ),
        (
            host_port(pod("udp", "1", "1Gi"), 8080, "UDP", "10.0.0.1"),
            true,
        ),
        (
            host_port(pod("other-port", "1", "1Gi"), 9090, "TCP", ""),
            true,
        ),
        (pod("no-ports", "1", "1Gi"), true),
    ];
    for (p, want) in cases {
        assert_eq!(w.fits(&p, 0), want, "{}", p.name);
    }
    assert_eq!(
        w.reasons(&host_port(pod("x", "1", "1Gi"), 8080, "", ""), 0),
        [Failure::Ports]
    );
}

#[test]
fn disabled_predicates_are_not_applied() {
    let profile = Profile::parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: false\n      predicate.TaintTolerationEnable: false\n      predicate.NodePortsEnable: false\n  - name: nodeorder\n",
        Default::default(),
    )
    .unwrap();
    let mut w = World::with_profile(profile);
    w.node(taint(
        labels(node("n0", "4", "4Gi"), &[("zone", "a")]),
        "k",
        "v",
        "NoSchedule",
    ));
    let mut p = pod("p", "1", "1Gi");
    p.node_selector = vec![("zone".into(), "b".into())];
    assert_eq!(w.allocate(&p), Ok(vec!["n0".to_owned()]));
}

#[test]
fn least_requested_spreads_and_most_requested_packs() {
    let mut w = World::new();
    w.node(node("busy", "4", "8Gi"))
        .node(node("idle", "4", "8Gi"));
    w.bind(&pod("x", "3", "6Gi"), "busy");
    assert_eq!(w.allocate(&pod("p", "500m", "1Gi")).unwrap()[0], "idle");
    let binpack = Profile::parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n      mostrequested.weight: 1\n",
        Default::default(),
    )
    .unwrap();
    let mut w = World::with_profile(binpack);
    w.node(node("busy", "4", "8Gi"))
        .node(node("idle", "4", "8Gi"));
    w.bind(&pod("x", "3", "6Gi"), "busy");
    assert_eq!(w.allocate(&pod("p", "500m", "1Gi")).unwrap()[0], "busy");
}

#[test]
fn preferred_affinity_and_prefer_no_schedule_taints_steer() {
    let mut w = World::new();
    w.node(labels(node("a", "4", "8Gi"), &[("disk", "hdd")]));
    w.node(labels(node("b", "4", "8Gi"), &[("disk", "ssd")]));
    w.node(taint(
        labels(node("c", "4", "8Gi"), &[("disk", "ssd")]),
        "spot",
        "true",
        "PreferNoSchedule",
    ));
    let mut p = pod("p", "1", "1Gi");
    p.affinity = Some(NodeAffinityInput {
        required: None,
        preferred: vec![(
            50,
            SelectorTermInput {
                match_expressions: vec![SelectorRequirementInput {
                    key: "disk".into(),
                    operator: "In".into(),
                    values: vec!["ssd".into()],
                }],
                match_fields: vec![],
            },
        )],
    });
    let got = w.allocate(&p).unwrap();
    // b: affinity 100×2 + taints 100×3; a: 0 + 100×3; c: 100×2 + 0×3 — the taint weight (3)
    // outweighs the affinity weight (2), as with upstream's defaults.
    assert_eq!(got, ["b", "a", "c"]);
}

#[test]
fn balanced_allocation_formula() {
    let mut w = World::new();
    w.node(node("n0", "4", "4Gi"));
    w.bind(&pod("x", "2", "1Gi"), "n0");
    let s = w.snap();
    let p = w.compile(&pod("p", "1", "1Gi"));
    // cpu (2+1)/4 = .75, mem (1+1)/4 = .5 → std .125 → 87; least: cpu (4-3)/4=25, mem (4-2)/4=50 → 37.
    let only = |least, bal| Weights {
        least_requested: least,
        balanced_resource: bal,
        ..Weights::NONE
    };
    let chunk = s.arena.chunk(0);
    assert_eq!(nodeorder::score(&p, &only(0, 1), chunk, 0, None).base, 87);
    assert_eq!(nodeorder::score(&p, &only(1, 0), chunk, 0, None).base, 37);
}

#[test]
fn no_fit_message_matches_upstream_format() {
    let mut w = World::new();
    w.node(node("a", "1", "1Gi"));
    w.node(node("b", "1", "1Gi"));
    w.node(taint(
        node("c", "8", "8Gi"),
        "dedicated",
        "gpu",
        "NoSchedule",
    ));
    let mut d = node("d", "8", "8Gi");
    d.unschedulable = true;
    w.node(d);
    let msg = w.allocate(&pod("p", "2", "2Gi")).unwrap_err();
    assert_eq!(
        msg,
        "0/4 nodes are unavailable: 1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable, 2 Insufficient cpu, 2 Insufficient memory."
    );
    let mut w = World::new();
    assert_eq!(
        w.allocate(&pod("p", "1", "1Gi")),
        Err("0/0 nodes are unavailable".to_owned())
    );
}

#[test]
fn candidates_are_distinct_best_first_and_bounded_by_k() {
    let mut w = World::new();
    for i in 0..10 {
        w.node(node(&format!("n{i}"), "4", "8Gi"));
    }
    for i in 0..9 {
        // n0 gets the most load, n9 none.
        for j in 0..(9 - i) {
            w.bind(
                &pod(&format!("x{i}-{j}"), "100m", "100Mi"),
                &format!("n{i}"),
            );
        }
    }
    let got = w.allocate(&pod("p", "100m", "100Mi")).unwrap();
    assert_eq!(got, ["n9", "n8", "n7"]);
}

#[test]
fn nodes_with_in_flight_claims_are_tried_last() {
    let mut w = World::new();
    w.node(node("a", "8", "8Gi")).node(node("b", "4", "4Gi"));
    let s = w.snap();
    // A claim on "a" that the snapshot does not reflect yet.
    assert!(w.cache.versions().try_claim(0, s.version(0)));
    let got = w.allocate(&pod("p", "100m", "100Mi")).unwrap();
    assert_eq!(
        got,
        ["b", "a"],
        "the bigger, better-scored node goes last while claimed"
    );
}

#[test]
fn sampling_stops_at_the_upstream_count() {
    let mut w = World::new();
    for i in 0..1000 {
        w.node(node(&format!("n{i:04}"), "4", "8Gi"));
    }
    let s = w.snap();
    let p = w.compile(&pod("p", "100m", "100Mi"));
    let mut scratch = Scratch::new(7);
    assert_eq!(
        allocate(&s, &p, w.cache.versions(), &mut scratch),
        Decision::Candidates
    );
    assert_eq!(scratch.candidates.len(), 3);
    // 1000 nodes → 420 feasible nodes are examined; the rotating start moves past them.
    let first: Vec<u32> = scratch.candidates.iter().map(|c| c.slot).collect();
    allocate(&s, &p, w.cache.versions(), &mut scratch);
    let second: Vec<u32> = scratch.candidates.iter().map(|c| c.slot).collect();
    assert_ne!(
        first, second,
        "consecutive cycles look at different windows"
    );
}
