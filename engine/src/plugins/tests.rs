//! Plugin tables: pods × nodes against Kubernetes semantics, through a real cache snapshot.

use crate::allocate::{Backlog, Decision, Scratch, allocate, failure_message};
use crate::binder::BindVersions;
use crate::cache::Cache;
use crate::conf::Profile;
use crate::model::*;
use crate::plugins::node_affinity::Mismatch;
use crate::plugins::node_ports::PortsTaken;
use crate::plugins::node_unschedulable::Cordoned;
use crate::plugins::noderesources::{Insufficient, TooManyPods};
use crate::plugins::taint_toleration::Untolerated;
use crate::plugins::{Cycle, Failure, Filters, Node, Ranges, ScoreWeights, Scores};
use crate::snapshot::{CHUNK, Snapshot};
use std::sync::Arc;

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
    /// The filter chain's fast check of `p` on node `slot`.
    fn fits(&mut self, p: &PodInput, slot: usize) -> bool {
        let cp = self.compile(p);
        let s = self.snap();
        let mut f = Filters::new(Cycle {
            pod: &cp,
            snap: &s,
            volumes: None,
            claims: None,
        });
        let chunk = s.arena.chunk(slot / CHUNK);
        f.enter_chunk(chunk);
        f.fits(Node::new(chunk, slot % CHUNK))
    }
    /// The filter chain's explanation of `p` on node `slot`.
    fn reasons(&mut self, p: &PodInput, slot: usize) -> Vec<Failure> {
        let cp = self.compile(p);
        let s = self.snap();
        let mut f = Filters::new(Cycle {
            pod: &cp,
            snap: &s,
            volumes: None,
            claims: None,
        });
        let chunk = s.arena.chunk(slot / CHUNK);
        f.enter_chunk(chunk);
        let mut out = Vec::new();
        f.explain(Node::new(chunk, slot % CHUNK), &mut |r| out.push(r));
        out
    }
    /// The weighted sum of the plain scorers for `p` on node `slot` under `weights`.
    fn base_score(&mut self, p: &PodInput, slot: usize, weights: ScoreWeights) -> i64 {
        self.cache.set_profile(Arc::new(Profile {
            weights,
            ..Profile::default()
        }));
        let cp = self.compile(p);
        let s = self.snap();
        let mut sc = Scores::new(Cycle {
            pod: &cp,
            snap: &s,
            volumes: None,
            claims: None,
        });
        let chunk = s.arena.chunk(slot / CHUNK);
        sc.enter_chunk(chunk);
        sc.score(Node::new(chunk, slot % CHUNK), &mut Ranges::default())
            .base
    }
    /// Names of the candidates allocate picks, best first, or the failure message.
    fn allocate(&mut self, p: &PodInput) -> Result<Vec<String>, String> {
        self.allocate_behind(p, Backlog::default())
    }
    /// [`World::allocate`] with `backlog` behind the decision.
    fn allocate_behind(&mut self, p: &PodInput, backlog: Backlog) -> Result<Vec<String>, String> {
        let cp = self.compile(p);
        let s = self.snap();
        let mut scratch = Scratch::new(1);
        match allocate(
            &s,
            &cp,
            None,
            None,
            None,
            self.cache.versions(),
            backlog,
            &mut scratch,
        ) {
            Decision::Candidates => Ok(scratch
                .candidates
                .iter()
                .map(|c| s.node(c.slot as usize).unwrap().name.to_string())
                .collect()),
            Decision::Unschedulable(sum) => {
                Err(failure_message(&sum, &self.cache.names().for_pod(&cp)))
            }
        }
    }
}

/// A profile from a scheduler configuration that must parse.
fn conf(yaml: &str) -> Profile {
    Profile::parse(yaml, Default::default()).unwrap()
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
        [
            Failure::Fit(Insufficient(CPU)),
            Failure::Fit(Insufficient(MEMORY))
        ]
    );
}

#[test]
fn many_resources_at_once_are_all_checked() {
    // More resources than the fit resolves to rows per chunk: the slow path.
    let names: Vec<String> = (0..10).map(|i| format!("example.com/r{i}")).collect();
    let mut w = World::new();
    let mut n = node("n0", "4", "4Gi");
    for (i, r) in names.iter().enumerate() {
        n.allocatable
            .push((r.clone(), if i == 7 { "1" } else { "4" }.into()));
    }
    w.node(n);
    let mut p = pod("many", "1", "1Gi");
    for r in &names {
        p.containers[0].requests.push((r.clone(), "2".into()));
    }
    assert!(!w.fits(&p, 0), "r7 has 1, the pod asks for 2");
    let r7 = w.cache.registry().lookup("example.com/r7").unwrap();
    assert_eq!(w.reasons(&p, 0), [Failure::Fit(Insufficient(r7))]);
    p.containers[0]
        .requests
        .retain(|(r, _)| r != "example.com/r7");
    assert!(w.fits(&p, 0));
    p.containers[0].requests[0].1 = "5".into();
    assert_eq!(w.reasons(&p, 0), [Failure::Fit(Insufficient(CPU))]);
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
    assert_eq!(w.reasons(&p, 1), [Failure::Fit(Insufficient(gpu_slot))]);
    p.containers[0].requests[2].1 = "3".into();
    assert!(!w.fits(&p, 0));
    w.bind(&pod("occupant", "100m", "100Mi"), "small");
    assert!(!w.fits(&pod("another", "100m", "100Mi"), 1));
    assert_eq!(
        w.reasons(&pod("another", "100m", "100Mi"), 1),
        [Failure::PodCount(TooManyPods)]
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
    assert_eq!(w.reasons(&p, 0), [Failure::NodeUnschedulable(Cordoned)]);
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
    assert_eq!(w.reasons(&p, 0), [Failure::NodeAffinity(Mismatch)]);
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
        [Failure::TaintToleration(Untolerated {
            key: w.cache.interner().get("dedicated").unwrap(),
            value: w.cache.interner().get("gpu").unwrap()
        })]
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
        [Failure::NodePorts(PortsTaken)]
    );
}

#[test]
fn disabled_predicates_are_not_applied() {
    let profile = conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: false\n      predicate.TaintTolerationEnable: false\n      predicate.NodePortsEnable: false\n  - name: nodeorder\n",
    );
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
    let binpack = conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n      mostrequested.weight: 1\n",
    );
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
    // outweighs the affinity weight (2), as with upstream's defaults. a and c score too far
    // below b to be offered as fallbacks (`allocate::CANDIDATE_SCORE_GAP_PCT`).
    assert_eq!(got, ["b"]);
    let mut w = World::new();
    w.node(labels(node("a", "4", "8Gi"), &[("disk", "hdd")]));
    w.node(taint(
        labels(node("c", "4", "8Gi"), &[("disk", "ssd")]),
        "spot",
        "true",
        "PreferNoSchedule",
    ));
    assert_eq!(w.allocate(&p).unwrap(), ["a"], "without b: a over c");
}

/// Packing offers an empty node as a fallback only while the backlog fills every bin the
/// decisions in flight may open (`allocate`, "Fallbacks"): here 8 in flight, 4 pods of 1 CPU per
/// 4-CPU node, so 32 waiting pods; a pod that requests no CPU or memory fills a bin at 110 (the
/// pod count).
#[test]
fn packing_falls_back_to_an_empty_node_only_with_a_backlog_to_fill_it() {
    let binpack = conf(
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      mostrequested.weight: 10\n",
    );
    let mut w = World::with_profile(binpack);
    w.node(node("used", "4", "8Gi"))
        .node(node("e0", "4", "8Gi"))
        .node(node("e1", "4", "8Gi"));
    w.bind(&pod("x", "1", "1Gi"), "used");
    let p = pod("p", "1", "1Gi");
    let behind = |waiting, in_flight| Backlog { waiting, in_flight };
    assert_eq!(w.allocate(&p).unwrap(), ["used"], "nothing waits");
    assert_eq!(w.allocate_behind(&p, behind(31, 8)).unwrap(), ["used"]);
    let got = w.allocate_behind(&p, behind(32, 8)).unwrap();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0], "used");
    // No CPU or memory requested: a bin holds 110 such pods.
    let tiny = pod("t", "", "");
    assert_eq!(w.allocate_behind(&tiny, behind(879, 8)).unwrap(), ["used"]);
    assert_eq!(w.allocate_behind(&tiny, behind(880, 8)).unwrap().len(), 3);
}

#[test]
fn balanced_allocation_formula() {
    let mut w = World::new();
    w.node(node("n0", "4", "4Gi"));
    w.bind(&pod("x", "2", "1Gi"), "n0");
    let p = pod("p", "1", "1Gi");
    // cpu (2+1)/4 = .75, mem (1+1)/4 = .5 → std .125 → 87; least: cpu (4-3)/4=25, mem (4-2)/4=50 → 37.
    let only = |least, bal| ScoreWeights {
        least_allocated: least,
        balanced_allocation: bal,
        ..ScoreWeights::NONE
    };
    assert_eq!(w.base_score(&p, 0, only(0, 1)), 87);
    assert_eq!(w.base_score(&p, 0, only(1, 0)), 37);
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
        allocate(
            &s,
            &p,
            None,
            None,
            None,
            w.cache.versions(),
            Backlog::default(),
            &mut scratch
        ),
        Decision::Candidates
    );
    assert_eq!(scratch.candidates.len(), 3);
    // 1000 nodes → 420 feasible nodes are examined; the rotating start moves past them.
    let first: Vec<u32> = scratch.candidates.iter().map(|c| c.slot).collect();
    allocate(
        &s,
        &p,
        None,
        None,
        None,
        w.cache.versions(),
        Backlog::default(),
        &mut scratch,
    );
    let second: Vec<u32> = scratch.candidates.iter().map(|c| c.slot).collect();
    assert_ne!(
        first, second,
        "consecutive cycles look at different windows"
    );
}

/// The fast check and the explanation are one chain: for random pods on random nodes (labels,
/// taints, cordons, full nodes, host ports in use, extended resources, many resources at once),
/// under random switches, `fits` holds exactly when `explain` finds no reason.
mod chain_agreement {
    use super::*;
    use crate::plugins::FilterSwitches;
    use proptest::prelude::*;

    const KEYS: [&str; 3] = ["zone", "disk", "gen"];
    const VALUES: [&str; 3] = ["a", "b", "3"];
    const EFFECTS: [&str; 3] = ["NoSchedule", "NoExecute", "PreferNoSchedule"];
    const EXTENDED: [&str; 10] = [
        "nvidia.com/gpu",
        "example.com/a",
        "example.com/b",
        "example.com/c",
        "example.com/d",
        "example.com/e",
        "example.com/f",
        "example.com/g",
        "example.com/h",
        "example.com/i",
    ];

    fn label() -> impl Strategy<Value = (String, String)> {
        (0..KEYS.len(), 0..VALUES.len()).prop_map(|(k, v)| (KEYS[k].into(), VALUES[v].into()))
    }

    fn node_input(i: usize) -> impl Strategy<Value = NodeInput> {
        (
            prop::collection::vec(label(), 0..3),
            prop::collection::vec((0..2usize, 0..2usize, 0..3usize), 0..3),
            any::<bool>(),
            (1u32..8, 1u32..3, 0u32..4, 0u32..3),
        )
            .prop_map(
                move |(labels, taints, cordoned, (cpu, pods, gpus, extended))| {
                    let mut n = node(&format!("n{i}"), &cpu.to_string(), "8Gi");
                    n.labels = labels;
                    n.allocatable[2].1 = pods.to_string();
                    n.allocatable
                        .push(("nvidia.com/gpu".into(), gpus.to_string()));
                    for r in &EXTENDED[1..=extended as usize] {
                        n.allocatable.push((r.to_string(), "4".into()));
                    }
                    n.taints = taints
                        .into_iter()
                        .map(|(k, v, e)| TaintInput {
                            key: KEYS[k].into(),
                            value: VALUES[v].into(),
                            effect: EFFECTS[e].into(),
                        })
                        .collect();
                    n.unschedulable = cordoned;
                    n
                },
            )
    }

    fn pod_input() -> impl Strategy<Value = PodInput> {
        (
            (100u32..3000, 0u32..3, 0usize..10),
            prop::collection::vec(label(), 0..2),
            prop::option::of(prop::collection::vec(
                prop::collection::vec((0..3usize, 0..4usize, 0..3usize), 1..3),
                1..3,
            )),
            prop::collection::vec((0..3usize, any::<bool>(), 0..4usize), 0..3),
            prop::collection::vec(prop_oneof![Just(80), Just(443), Just(9000)], 0..2),
            prop::option::of(0usize..6),
        )
            .prop_map(
                |((cpu, gpus, extended), selector, required, tols, ports, name)| {
                    let mut p = pod("p", &format!("{cpu}m"), "1Gi");
                    p.containers[0]
                        .requests
                        .push(("nvidia.com/gpu".into(), gpus.to_string()));
                    // Up to nine extended resources: more than eight takes the slow path.
                    for r in EXTENDED.iter().take(extended).skip(1) {
                        p.containers[0].requests.push((r.to_string(), "1".into()));
                    }
                    p.node_selector = selector;
                    let ops = ["In", "NotIn", "Exists", "DoesNotExist"];
                    p.affinity = required.map(|terms| NodeAffinityInput {
                        required: Some(
                            terms
                                .into_iter()
                                .map(|reqs| SelectorTermInput {
                                    match_expressions: reqs
                                        .into_iter()
                                        .map(|(k, op, v)| SelectorRequirementInput {
                                            key: KEYS[k].into(),
                                            operator: ops[op].into(),
                                            values: if op < 2 {
                                                vec![VALUES[v].into()]
                                            } else {
                                                vec![]
                                            },
                                        })
                                        .collect(),
                                    match_fields: vec![],
                                })
                                .collect(),
                        ),
                        preferred: vec![],
                    });
                    for (k, exists, e) in tols {
                        let effect = if e == 3 { "" } else { EFFECTS[e] };
                        p = if exists {
                            tolerate(p, KEYS[k], "Exists", "", effect)
                        } else {
                            tolerate(p, KEYS[k], "Equal", VALUES[k], effect)
                        };
                    }
                    for port in ports {
                        p = host_port(p, port, "TCP", "");
                    }
                    p.node_name = name.map(|i| format!("n{i}"));
                    p
                },
            )
    }

    fn switches() -> impl Strategy<Value = FilterSwitches> {
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(a, t, p)| FilterSwitches {
            node_affinity: a,
            taint_toleration: t,
            node_ports: p,
            ..FilterSwitches::DEFAULT
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn fits_is_explain_is_empty(
            nodes in (1usize..7).prop_flat_map(|n| (0..n).map(node_input).collect::<Vec<_>>()),
            residents in prop::collection::vec((0usize..7, 100u32..3000, prop::option::of(prop_oneof![Just(80), Just(443)])), 0..8),
            pods in prop::collection::vec(pod_input(), 1..6),
            filters in switches(),
        ) {
            let mut w = World::with_profile(Profile { filters, ..Profile::default() });
            for n in &nodes {
                w.node(n.clone());
            }
            for (k, (on, cpu, port)) in residents.into_iter().enumerate() {
                let mut r = pod(&format!("resident-{k}"), &format!("{cpu}m"), "512Mi");
                if let Some(port) = port {
                    r = host_port(r, port, "TCP", "");
                }
                w.bind(&r, &format!("n{}", on % nodes.len()));
            }
            for p in &pods {
                let cp = w.compile(p);
                let s = w.snap();
                let mut f = Filters::new(Cycle { pod: &cp, snap: &s, volumes: None, claims: None });
                let mut any_fits = false;
                for slot in 0..nodes.len() {
                    let chunk = s.arena.chunk(slot / CHUNK);
                    f.enter_chunk(chunk);
                    let node = Node::new(chunk, slot % CHUNK);
                    let mut reasons = Vec::new();
                    f.explain(node, &mut |r| reasons.push(r));
                    let fits = f.fits(node);
                    prop_assert_eq!(fits, reasons.is_empty(), "pod {:?} on n{}: {:?}", p, slot, reasons);
                    any_fits |= fits;
                }
                // And allocate agrees: a node that fits is found (every node is scanned).
                let mut scratch = Scratch::new(3);
                let d = allocate(&s, &cp, None, None, None, w.cache.versions(), Backlog::default(), &mut scratch);
                prop_assert_eq!(d == Decision::Candidates, any_fits);
            }
        }
    }
}
