//! Cases ported from kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go` and
//! `pkg/scheduler/framework/plugins/interpodaffinity/scoring_test.go` (Apache-2.0, The
//! Kubernetes Authors), run against Magma's `InterPodAffinity` through the public engine API.
//! Ported from the stored versions at commits `072825f9a367` (filtering, the `backend/cache`
//! era) and `8a4d98ac2f6d` (scoring).
//!
//! Each case builds a `Cache` with the pod index on, applies the upstream nodes and the existing
//! pods bound to them, publishes a snapshot and compiles the incoming pod; then:
//!
//! - filtering: `Filters` with only InterPodAffinity switched on (upstream runs the plugin
//!   alone), `fits`/`explain` per node, and each failure's text (`Failure::message`) compared
//!   with upstream's reason (`ErrReasonAffinityRulesNotMatch` and friends). Upstream's PreFilter
//!   `Skip` is `Filter::pre_filter` returning `None`; upstream's status codes
//!   (`Unschedulable`/`UnschedulableAndUnresolvable`) are only noted, Magma has no preemption to
//!   tell them apart for;
//! - scoring: `Scores` with only `podaffinity.weight` = 1, `score` on every node (all feasible,
//!   as upstream scores the nodes it is given) and `finish`, compared with upstream's
//!   normalised `framework.NodeScoreList`. Upstream's PreScore `Skip` is `Scorer::pre_score`
//!   returning `None`.
//!
//! Port conventions: upstream's `defaultNamespace` ("") stays the empty namespace; a pod built
//! with `Node(..)` for an incoming pod drops it (Magma's always-on NodeName filter would
//! otherwise reject the other nodes; the upstream plugin under test ignores it); a term with an
//! empty `topologyKey` (which the API server rejects, as Magma's model does) gets `region`,
//! which every affected case's verdict does not depend on. The upstream namespaces
//! (`subteam{1,2}.team{1,2}` labelled `team: team{1,2}`) are set on every cache.
//!
//! Not ported, one line each where they are:
//! - cases feeding label values upstream's selector parser rejects (`{{.bad-value.}}`): Magma
//!   leaves label syntax to the API server;
//! - `TestPreFilterStateAddRemovePod`: the preemption AddPod/RemovePod extensions;
//! - `TestPreFilterStateClone`, `TestPreFilterDisabled`: upstream's cycle-state plumbing;
//! - `IgnorePreferredTermsOfExistingPods` and `HardPodAffinityWeight: 0`: arguments Magma does
//!   not have (it always scores existing pods' preferred terms, with hard weight 1).

use magma_engine::conf::Profile;
use magma_engine::model::{
    LabelSelectorInput, PodAffinityInput, PodAffinityTermInput, PodInput, SelectorRequirementInput,
};
use magma_engine::plugins::inter_pod_affinity::InterPodAffinity;
use magma_engine::plugins::{FilterSwitches, ScoreWeights};

use crate::world;

// Upstream's reasons (`interpodaffinity/filtering.go`).
const AFFINITY: &str = "node(s) didn't match pod affinity rules";
const ANTI: &str = "node(s) didn't match pod anti-affinity rules";
const EXISTING: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
const MAX: i64 = 100;

// ---------------------------------------------------------------------------------------------
// Helpers

type Labels = &'static [(&'static str, &'static str)];

/// The cluster of one case: InterPodAffinity on, and scoring_test.go's `namespaces`.
struct World(world::World);

impl World {
    fn new(nodes: &[(&str, Labels)]) -> World {
        let profile = Profile {
            filters: FilterSwitches {
                inter_pod_affinity: true,
                ..FilterSwitches::OFF
            },
            weights: ScoreWeights {
                inter_pod_affinity: 1,
                ..ScoreWeights::NONE
            },
            ..Profile::default()
        };
        let mut w = world::World::new(
            profile,
            nodes.iter().map(|(n, l)| world::node(n, l)).collect(),
        );
        for (ns, team) in [
            ("subteam1.team1", "team1"),
            ("subteam2.team1", "team1"),
            ("subteam1.team2", "team2"),
            ("subteam2.team2", "team2"),
        ] {
            w.cache
                .set_namespace(ns, Some(&[("team".to_owned(), team.to_owned())]));
        }
        World(w)
    }

    fn bind(&mut self, p: &P, node: &str) {
        self.0.bind(&p.0, node)
    }

    /// Whether PreFilter skips, and per node (in the order given) `None` when the pod passes or
    /// the text of its one failure.
    fn filter(&mut self, p: &P) -> (bool, Vec<Option<String>>) {
        let nodes = self.0.nodes.clone();
        let on: Vec<&str> = nodes.iter().map(String::as_str).collect();
        self.0.filter::<InterPodAffinity>(&p.0, &on)
    }

    /// The normalised scores on every node, or `None` when PreScore skips.
    fn scores(&mut self, p: &P) -> Option<Vec<i64>> {
        let nodes = self.0.nodes.clone();
        let on: Vec<&str> = nodes.iter().map(String::as_str).collect();
        self.0.scores::<InterPodAffinity>(&p.0, &on)
    }
}

/// A pod as upstream's `st.MakePod()` builds it.
#[derive(Clone, Default)]
struct P(PodInput);

fn pod() -> P {
    P::default()
}

impl P {
    fn ns(mut self, ns: &str) -> P {
        self.0.namespace = ns.into();
        self
    }
    fn label(mut self, k: &str, v: &str) -> P {
        self.0.labels.push((k.into(), v.into()));
        self
    }
    fn labels(self, l: Labels) -> P {
        l.iter().fold(self, |p, (k, v)| p.label(k, v))
    }
    fn terms(mut self, f: impl FnOnce(&mut PodAffinityInput)) -> P {
        f(self.0.pod_affinity.get_or_insert_with(Default::default));
        self
    }
    fn aff(self, t: PodAffinityTermInput) -> P {
        self.terms(|a| a.required.push(t))
    }
    fn anti(self, t: PodAffinityTermInput) -> P {
        self.terms(|a| a.required_anti.push(t))
    }
    fn pref(self, w: i32, t: PodAffinityTermInput) -> P {
        self.terms(|a| a.preferred.push((w, t)))
    }
    fn pref_anti(self, w: i32, t: PodAffinityTermInput) -> P {
        self.terms(|a| a.preferred_anti.push((w, t)))
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> SelectorRequirementInput {
    SelectorRequirementInput {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

fn in_(key: &str, values: &[&str]) -> SelectorRequirementInput {
    req(key, "In", values)
}

fn not_in(key: &str, values: &[&str]) -> SelectorRequirementInput {
    req(key, "NotIn", values)
}

fn exists(key: &str) -> SelectorRequirementInput {
    req(key, "Exists", &[])
}

fn not_exists(key: &str) -> SelectorRequirementInput {
    req(key, "DoesNotExist", &[])
}

fn selector(exprs: Vec<SelectorRequirementInput>) -> LabelSelectorInput {
    LabelSelectorInput {
        match_labels: vec![],
        match_expressions: exprs,
    }
}

/// A term selecting `exprs` (ANDed) over `topology`.
fn term(topology: &str, exprs: Vec<SelectorRequirementInput>) -> PodAffinityTermInput {
    PodAffinityTermInput {
        label_selector: Some(selector(exprs)),
        topology_key: topology.into(),
        ..Default::default()
    }
}

/// `st.PodAffinityIn`/`PodAntiAffinityIn(labelKey, topologyKey, values)`.
fn t_in(key: &str, topology: &str, values: &[&str]) -> PodAffinityTermInput {
    term(topology, vec![in_(key, values)])
}

fn t_not_in(key: &str, topology: &str, values: &[&str]) -> PodAffinityTermInput {
    term(topology, vec![not_in(key, values)])
}

fn t_exists(key: &str, topology: &str) -> PodAffinityTermInput {
    term(topology, vec![exists(key)])
}

fn with_ns_selector(mut t: PodAffinityTermInput, s: LabelSelectorInput) -> PodAffinityTermInput {
    t.namespace_selector = Some(s);
    t
}

fn with_namespaces(mut t: PodAffinityTermInput, ns: &[&str]) -> PodAffinityTermInput {
    t.namespaces = ns.iter().map(|n| n.to_string()).collect();
    t
}

fn team1() -> LabelSelectorInput {
    selector(vec![in_("team", &["team1"])])
}

struct FilterCase {
    name: &'static str,
    pod: P,
    pods: Vec<(P, &'static str)>,
    nodes: &'static [(&'static str, Labels)],
    /// Upstream's PreFilter returns `Skip`.
    skip: bool,
    /// Per node: `None` passes, else upstream's reason.
    want: Vec<Option<&'static str>>,
}

/// Each case with the pods' terms aggregated, the incoming pod's not watched, and scanned
/// (`world::Terms`).
fn run_filter_cases(cases: Vec<FilterCase>) {
    for c in cases {
        for terms in world::ALL_TERMS {
            let mut w = World::new(c.nodes);
            w.0.terms = terms;
            for (p, n) in &c.pods {
                w.bind(p, n);
            }
            let (skip, got) = w.filter(&c.pod);
            assert_eq!(skip, c.skip, "{} ({terms:?}): PreFilter skip", c.name);
            let want: Vec<Option<String>> = c.want.iter().map(|w| w.map(str::to_owned)).collect();
            assert_eq!(got, want, "{} ({terms:?})", c.name);
        }
    }
}

struct ScoreCase {
    name: &'static str,
    pod: P,
    pods: Vec<(P, &'static str)>,
    nodes: &'static [(&'static str, Labels)],
    /// `None`: upstream's PreScore returns `Skip`.
    want: Option<Vec<i64>>,
}

fn run_score_cases(cases: Vec<ScoreCase>) {
    for c in cases {
        for terms in world::ALL_TERMS {
            let mut w = World::new(c.nodes);
            w.0.terms = terms;
            for (p, n) in &c.pods {
                w.bind(p, n);
            }
            assert_eq!(w.scores(&c.pod), c.want, "{} ({terms:?})", c.name);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// filtering_test.go: TestRequiredAffinitySingleNode

const SERVICE: Labels = &[("service", "securityscan")];
const SECURITY: Labels = &[("security", "S1")];
const NODE1: &[(&str, Labels)] = &[("node1", &[("region", "r1"), ("zone", "z11")])];

#[test]
fn required_affinity_single_node() {
    // `pod` of the upstream test: podLabel, on node1.
    let existing = || vec![(pod().labels(SERVICE), "node1")];
    let one = |name, pod, pods, want: Option<&'static str>| FilterCase {
        name,
        pod,
        pods,
        nodes: NODE1,
        skip: false,
        want: vec![want],
    };
    let cases = vec![
        FilterCase {
            skip: true,
            ..one(
                "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
                pod(),
                vec![],
                None,
            )
        },
        one(
            "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
            pod()
                .labels(SECURITY)
                .aff(t_in("service", "region", &["securityscan", "value2"])),
            existing(),
            None,
        ),
        one(
            "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
            pod()
                .labels(SECURITY)
                .aff(t_not_in("service", "region", &["securityscan3", "value3"])),
            existing(),
            None,
        ),
        // Upstream's term has no topologyKey (see the module doc): `region` here.
        one(
            "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
            pod().labels(SECURITY).aff(with_namespaces(
                t_in("service", "region", &["securityscan", "value2"]),
                &["DiffNameSpace"],
            )),
            vec![(pod().ns("ns").label("service", "securityscan"), "node1")],
            Some(AFFINITY), // UnschedulableAndUnresolvable
        ),
        // Upstream's topologyKey is "" (see the module doc): `region` here.
        one(
            "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
            pod()
                .labels(SERVICE)
                .aff(t_in("service", "region", &["antivirusscan", "value2"])),
            existing(),
            Some(AFFINITY),
        ),
        one(
            "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution",
            pod()
                .labels(SECURITY)
                .aff(term(
                    "region",
                    vec![exists("service"), not_exists("wrongkey")],
                ))
                .aff(term(
                    "region",
                    vec![
                        in_("service", &["securityscan"]),
                        not_in("service", &["WrongValue"]),
                    ],
                )),
            existing(),
            None,
        ),
        one(
            "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
            pod()
                .labels(SECURITY)
                .aff(term(
                    "region",
                    vec![exists("service"), not_exists("wrongkey")],
                ))
                .aff(term(
                    "region",
                    vec![
                        in_("service", &["securityscan2"]),
                        not_in("service", &["WrongValue"]),
                    ],
                )),
            existing(),
            Some(AFFINITY),
        ),
        one(
            "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
            pod()
                .labels(SECURITY)
                .aff(t_in("service", "region", &["securityscan", "value2"]))
                .anti(t_in("service", "node", &["antivirusscan", "value2"])),
            existing(),
            None,
        ),
        one(
            "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
            pod()
                .labels(SECURITY)
                .aff(t_in("service", "region", &["securityscan", "value2"]))
                .anti(t_in("service", "node", &["antivirusscan", "value2"])),
            vec![(
                pod()
                    .labels(SERVICE)
                    .anti(t_in("service", "node", &["antivirusscan", "value2"])),
                "node1",
            )],
            None,
        ),
        one(
            "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
            pod()
                .labels(SECURITY)
                .aff(t_in("service", "region", &["securityscan", "value2"]))
                .anti(t_in("service", "zone", &["securityscan", "value2"])),
            existing(),
            Some(ANTI), // Unschedulable
        ),
        one(
            "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            pod()
                .labels(SERVICE)
                .aff(t_in("service", "region", &["securityscan", "value2"]))
                .anti(t_in("service", "node", &["antivirusscan", "value2"])),
            vec![(
                pod()
                    .labels(SERVICE)
                    .anti(t_in("service", "zone", &["securityscan", "value2"])),
                "node1",
            )],
            Some(EXISTING),
        ),
        one(
            "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
            pod()
                .labels(SERVICE)
                .aff(t_not_in("service", "region", &["securityscan", "value2"])),
            vec![(pod().label("service", "securityscan"), "node2")],
            Some(AFFINITY),
        ),
        one(
            "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
            pod().labels(SERVICE),
            vec![(
                pod()
                    .labels(SERVICE)
                    .anti(t_in("service", "zone", &["securityscan", "value2"])),
                "node1",
            )],
            Some(EXISTING),
        ),
        FilterCase {
            skip: true,
            ..one(
                "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
                pod().labels(SERVICE),
                vec![(
                    pod().labels(SERVICE).anti(t_not_in(
                        "service",
                        "zone",
                        &["securityscan", "value2"],
                    )),
                    "node1",
                )],
                None,
            )
        },
        one(
            "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
            pod()
                .labels(SERVICE)
                .anti(t_exists("service", "region"))
                .anti(t_exists("security", "region")),
            vec![(
                pod().labels(SECURITY).anti(t_exists("security", "zone")),
                "node1",
            )],
            Some(ANTI),
        ),
        one(
            "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
            pod()
                .labels(SERVICE)
                .anti(t_exists("service", "zone"))
                .anti(t_exists("security", "zone")),
            vec![(
                pod().labels(SECURITY).anti(t_exists("security", "zone")),
                "node1",
            )],
            Some(ANTI),
        ),
        one(
            "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
            pod().labels(SECURITY).anti(t_exists("security", "zone")),
            vec![(
                pod()
                    .labels(SERVICE)
                    .anti(t_exists("service", "zone"))
                    .anti(t_exists("security", "zone")),
                "node1",
            )],
            Some(EXISTING),
        ),
        one(
            "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
            pod()
                .labels(&[("abc", ""), ("xyz", "")])
                .anti(t_exists("abc", "zone"))
                .anti(t_exists("def", "zone")),
            vec![(
                pod()
                    .labels(&[("def", ""), ("xyz", "")])
                    .anti(t_exists("abc", "zone"))
                    .anti(t_exists("def", "zone")),
                "node1",
            )],
            Some(ANTI),
        ),
        one(
            "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
            pod()
                .labels(&[("def", ""), ("xyz", "")])
                .anti(t_exists("abc", "zone"))
                .anti(t_exists("def", "zone")),
            vec![(
                pod()
                    .labels(&[("abc", ""), ("xyz", "")])
                    .anti(t_exists("abc", "zone"))
                    .anti(t_exists("def", "zone")),
                "node1",
            )],
            Some(ANTI),
        ),
        // Not ported: "PodAffinity fails PreFilter with an invalid affinity label syntax" (label syntax).
        // Not ported: "PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax" (label syntax).
        one(
            "affinity with NamespaceSelector",
            pod().labels(SECURITY).aff(with_ns_selector(
                t_in("service", "region", &["securityscan", "value2"]),
                team1(),
            )),
            vec![(pod().ns("subteam1.team1").labels(SERVICE), "node1")],
            None,
        ),
        one(
            "affinity with non-matching NamespaceSelector",
            pod().labels(SECURITY).aff(with_ns_selector(
                t_in("service", "region", &["securityscan", "value2"]),
                team1(),
            )),
            vec![(pod().ns("subteam1.team2").labels(SERVICE), "node1")],
            Some(AFFINITY),
        ),
        one(
            "anti-affinity with matching NamespaceSelector",
            pod()
                .ns("subteam1.team1")
                .labels(SECURITY)
                .anti(with_ns_selector(
                    t_in("service", "zone", &["securityscan", "value2"]),
                    team1(),
                )),
            vec![(pod().ns("subteam2.team1").labels(SERVICE), "node1")],
            Some(ANTI),
        ),
        one(
            "anti-affinity with matching all NamespaceSelector",
            pod()
                .ns("subteam1.team1")
                .labels(SECURITY)
                .anti(with_ns_selector(
                    t_in("service", "zone", &["securityscan", "value2"]),
                    selector(vec![]),
                )),
            vec![(pod().ns("subteam2.team1").labels(SERVICE), "node1")],
            Some(ANTI),
        ),
        one(
            "anti-affinity with non-matching NamespaceSelector",
            pod()
                .ns("subteam1.team1")
                .labels(SECURITY)
                .anti(with_ns_selector(
                    t_in("service", "zone", &["securityscan", "value2"]),
                    team1(),
                )),
            vec![(pod().ns("subteam1.team2").labels(SERVICE), "node1")],
            None,
        ),
    ];
    assert_eq!(cases.len(), 24);
    run_filter_cases(cases);
}

// ---------------------------------------------------------------------------------------------
// filtering_test.go: TestRequiredAffinityMultipleNodes

const CHINA: Labels = &[("region", "China")];
const CHINA_AZ1: Labels = &[("region", "China"), ("az", "az1")];
const INDIA: Labels = &[("region", "India")];
const R1_Z1_A: Labels = &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")];
const R1_Z1_B: Labels = &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeB")];
const R1_Z2_B: Labels = &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")];
const ABC: &[(&str, Labels)] = &[("nodeA", CHINA), ("nodeB", CHINA_AZ1), ("nodeC", INDIA)];
const AB_SAME_ZONE: &[(&str, Labels)] = &[("nodeA", R1_Z1_A), ("nodeB", R1_Z1_B)];
const AB_TWO_ZONES: &[(&str, Labels)] = &[("nodeA", R1_Z1_A), ("nodeB", R1_Z2_B)];

#[test]
fn required_affinity_multiple_nodes() {
    let cases = vec![
        FilterCase {
            name: "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
            pod: pod().aff(t_in("foo", "region", &["bar"])),
            pods: vec![(pod().label("foo", "bar"), "node1")],
            nodes: &[("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)],
            skip: false,
            want: vec![None, None, Some(AFFINITY)],
        },
        FilterCase {
            name: "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
            pod: pod()
                .labels(&[("foo", "bar"), ("service", "securityscan")])
                .aff(t_in("foo", "zone", &["bar"]))
                .aff(t_in("service", "zone", &["securityscan"])),
            pods: vec![(pod().label("foo", "bar"), "nodeA")],
            nodes: &[
                ("nodeA", &[("zone", "az1"), ("hostname", "h1")]),
                ("nodeB", &[("zone", "az2"), ("hostname", "h2")]),
            ],
            skip: false,
            want: vec![None, None],
        },
        FilterCase {
            name: "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
            pod: pod()
                .labels(&[("foo", "bar"), ("service", "securityscan")])
                .aff(t_in("foo", "zone", &["bar"]))
                .aff(t_in("service", "zone", &["securityscan"])),
            pods: vec![(pod().label("foo", "bar"), "nodeA")],
            nodes: &[
                ("nodeA", &[("zoneLabel", "az1"), ("hostname", "h1")]),
                ("nodeB", &[("zoneLabel", "az2"), ("hostname", "h2")]),
            ],
            skip: false,
            want: vec![Some(AFFINITY), Some(AFFINITY)],
        },
        FilterCase {
            name: "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
            pod: pod().anti(t_in("foo", "region", &["abc"])),
            pods: vec![(pod().label("foo", "abc"), "nodeA")],
            nodes: &[
                ("nodeA", &[("region", "r1"), ("hostname", "nodeA")]),
                ("nodeB", &[("region", "r1"), ("hostname", "nodeB")]),
            ],
            skip: false,
            want: vec![Some(ANTI), Some(ANTI)],
        },
        FilterCase {
            name: "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
            pod: pod().anti(t_in("foo", "region", &["abc"])).anti(t_in(
                "service",
                "zone",
                &["securityscan"],
            )),
            pods: vec![(
                pod().labels(&[("foo", "abc"), ("service", "securityscan")]),
                "nodeA",
            )],
            nodes: &[
                (
                    "nodeA",
                    &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
                ),
                (
                    "nodeB",
                    &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
                ),
            ],
            skip: false,
            want: vec![Some(ANTI), Some(ANTI)],
        },
        FilterCase {
            name: "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
            pod: pod().anti(t_in("foo", "region", &["abc"])),
            pods: vec![(pod().label("foo", "abc"), "nodeA")],
            nodes: ABC,
            skip: false,
            want: vec![Some(ANTI), Some(ANTI), None],
        },
        FilterCase {
            name: "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
            pod: pod()
                .ns("NS1")
                .label("foo", "123")
                .anti(t_in("foo", "region", &["bar"])),
            pods: vec![
                (pod().ns("NS1").label("foo", "bar"), "nodeA"),
                (
                    pod().ns("NS2").anti(t_in("foo", "region", &["123"])),
                    "nodeC",
                ),
            ],
            nodes: ABC,
            skip: false,
            want: vec![Some(ANTI), Some(ANTI), None],
        },
        FilterCase {
            name: "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
            pod: pod().label("foo", ""),
            pods: vec![(pod().anti(t_exists("foo", "invalid-node-label")), "nodeA")],
            nodes: AB_SAME_ZONE,
            skip: true,
            want: vec![None, None],
        },
        // The incoming pod's `Node("nodeA")` is dropped (module doc).
        FilterCase {
            name: "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
            pod: pod().anti(t_exists("foo", "invalid-node-label")),
            pods: vec![(pod().label("foo", ""), "nodeA")],
            nodes: AB_SAME_ZONE,
            skip: false,
            want: vec![None, None],
        },
        FilterCase {
            name: "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
            pod: pod().label("foo", "").label("bar", ""),
            pods: vec![
                (pod().anti(t_exists("foo", "zone")), "nodeA"),
                (pod().anti(t_exists("bar", "region")), "nodeA"),
            ],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(EXISTING), Some(EXISTING)],
        },
        FilterCase {
            name: "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
            pod: pod()
                .anti(t_exists("foo", "zone"))
                .anti(t_exists("bar", "region")),
            pods: vec![
                (pod().label("foo", ""), "nodeA"),
                (pod().label("bar", ""), "nodeB"),
            ],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(ANTI), Some(ANTI)],
        },
        FilterCase {
            name: "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
            pod: pod().label("foo", "").label("bar", ""),
            pods: vec![(
                pod()
                    .anti(t_exists("foo", "invalid-node-label"))
                    .anti(t_exists("bar", "zone")),
                "nodeA",
            )],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(EXISTING), None],
        },
        FilterCase {
            name: "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
            pod: pod()
                .anti(t_exists("foo", "invalid-node-label"))
                .anti(t_exists("bar", "zone")),
            pods: vec![(pod().label("foo", "").label("bar", ""), "nodeA")],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(ANTI), None],
        },
        FilterCase {
            name: "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
            pod: pod().label("foo", "").label("bar", ""),
            pods: vec![(
                pod()
                    .anti(t_exists("foo", "region"))
                    .anti(t_exists("bar", "zone")),
                "nodeA",
            )],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(EXISTING), Some(EXISTING)],
        },
        FilterCase {
            name: "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
            pod: pod()
                .anti(t_exists("foo", "region"))
                .anti(t_exists("bar", "zone")),
            pods: vec![(pod().label("foo", "").label("bar", ""), "nodeA")],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(ANTI), Some(ANTI)],
        },
        FilterCase {
            name: "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",
            pod: pod().label("foo", "").label("bar", ""),
            pods: vec![
                (
                    pod()
                        .anti(t_exists("foo", "zone"))
                        .anti(t_exists("labelA", "zone")),
                    "nodeA",
                ),
                (
                    pod()
                        .anti(t_exists("bar", "zone"))
                        .anti(t_exists("labelB", "zone")),
                    "nodeB",
                ),
            ],
            nodes: &[
                (
                    "nodeA",
                    &[("region", "r1"), ("zone", "z1"), ("hostname", "nodeA")],
                ),
                (
                    "nodeB",
                    &[("region", "r1"), ("zone", "z2"), ("hostname", "nodeB")],
                ),
                (
                    "nodeC",
                    &[("region", "r1"), ("zone", "z3"), ("hostname", "nodeC")],
                ),
            ],
            skip: false,
            want: vec![Some(EXISTING), Some(EXISTING), None],
        },
        FilterCase {
            name: "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
            pod: pod()
                .aff(t_exists("foo", "region"))
                .aff(t_exists("bar", "zone")),
            pods: vec![(pod().label("foo", "").label("bar", ""), "nodeA")],
            nodes: AB_SAME_ZONE,
            skip: false,
            want: vec![None, None],
        },
        FilterCase {
            name: "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",
            pod: pod()
                .aff(t_exists("foo", "region"))
                .aff(t_exists("bar", "zone")),
            pods: vec![
                (pod().label("foo", ""), "nodeA"),
                (pod().label("bar", ""), "nodeB"),
            ],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![Some(AFFINITY), Some(AFFINITY)],
        },
    ];
    assert_eq!(cases.len(), 18);
    run_filter_cases(cases);
}

// Not ported: TestPreFilterDisabled (Filter without PreFilter cannot be expressed: `Filters::new`
// runs PreFilter).
// Not ported: TestPreFilterStateAddRemovePod, 3 cases (preemption AddPod/RemovePod).
// Not ported: TestPreFilterStateClone (cycle-state cloning).

// ---------------------------------------------------------------------------------------------
// Magma's own rows (not upstream's): the first-pod exemption holds only while no placed pod
// matches the term, whichever way the matches are found (`world::Terms`).

#[test]
fn first_pod_exemption_ends_with_the_first_match() {
    let wants_red = || {
        pod()
            .label("color", "red")
            .aff(t_in("color", "zone", &["red"]))
    };
    run_filter_cases(vec![
        FilterCase {
            name: "no red pod anywhere: the first red pod may go anywhere",
            pod: wants_red(),
            pods: vec![(pod().label("color", "blue"), "nodeA")],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![None, None],
        },
        FilterCase {
            name: "a red pod in z1: only z1 is left",
            pod: wants_red(),
            pods: vec![(pod().label("color", "red"), "nodeA")],
            nodes: AB_TWO_ZONES,
            skip: false,
            want: vec![None, Some(AFFINITY)],
        },
    ]);
}

// filtering_test.go: TestGetTPMapMatchingIncomingAffinityAntiAffinity
//
// Upstream asserts the two maps `getIncomingAffinityAntiAffinityCounts` builds for nodeA; Magma
// keeps the same sets in its private PreFilter state, so each map is checked through the
// verdict it implies on nodeA (the incoming pods carry no labels, so the first-pod exemption
// never applies): the pod with only its affinity terms passes exactly when the affinity map is
// non-empty, the pod with only its anti-affinity terms fails exactly when the anti-affinity
// map is non-empty, and the whole pod gets the verdict of the first failing rule.

#[test]
fn incoming_affinity_anti_affinity_maps() {
    let existing = |labels: Labels| pod().labels(labels);
    let a: Labels = &[("aaa", "")];
    let b: Labels = &[("bbb", "")];
    let ab: Labels = &[("aaa", ""), ("bbb", "")];
    // (name, existing pod's labels, affinity terms' label keys, anti-affinity terms' keys,
    //  affinity map non-empty, anti-affinity map non-empty)
    type Row = (
        &'static str,
        Option<Labels>,
        &'static [&'static str],
        &'static [&'static str],
        bool,
        bool,
    );
    let rows: Vec<Row> = vec![
        ("nil test", None, &[], &[], false, false),
        (
            "incoming pod without affinity/anti-affinity causes a no-op",
            Some(a),
            &[],
            &[],
            false,
            false,
        ),
        (
            "no pod has label that violates incoming pod's affinity and anti-affinity",
            Some(b),
            &["aaa"],
            &["aaa"],
            false,
            false,
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - single term case",
            Some(a),
            &["aaa"],
            &["aaa"],
            true,
            true,
        ),
        (
            "existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
            Some(ab),
            &["aaa", "bbb"],
            &["aaa"],
            true,
            true,
        ),
        (
            "existing pod not match incoming pod's affinity but matches anti-affinity",
            Some(a),
            &["aaa", "bbb"],
            &["aaa", "bbb"],
            false,
            true,
        ),
        (
            "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
            Some(ab),
            &["aaa", "ccc"],
            &["aaa", "ccc"],
            false,
            true,
        ),
        (
            "incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
            Some(b),
            &["aaa", "bbb"],
            &["aaa", "bbb"],
            false,
            true,
        ),
    ];
    for (name, labels, aff, anti, aff_map, anti_map) in rows {
        let mut w = World::new(&[("nodeA", &[("hostname", "nodeA")])]);
        if let Some(l) = labels {
            w.bind(&existing(l), "nodeA");
        }
        let with_aff = aff
            .iter()
            .fold(pod(), |p, k| p.aff(t_exists(k, "hostname")));
        let with_anti = anti
            .iter()
            .fold(pod(), |p, k| p.anti(t_exists(k, "hostname")));
        let whole = anti
            .iter()
            .fold(with_aff.clone(), |p, k| p.anti(t_exists(k, "hostname")));
        if !aff.is_empty() {
            let (_, v) = w.filter(&with_aff);
            assert_eq!(
                v,
                [(!aff_map).then(|| AFFINITY.to_owned())],
                "{name}: affinity map"
            );
        }
        if !anti.is_empty() {
            let (_, v) = w.filter(&with_anti);
            assert_eq!(
                v,
                [anti_map.then(|| ANTI.to_owned())],
                "{name}: anti-affinity map"
            );
        }
        let want = if !aff.is_empty() && !aff_map {
            Some(AFFINITY)
        } else if anti_map {
            Some(ANTI)
        } else {
            None
        };
        let (skip, v) = w.filter(&whole);
        assert_eq!(skip, aff.is_empty() && anti.is_empty(), "{name}: skip");
        assert_eq!(v, [want.map(str::to_owned)], "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// scoring_test.go: TestPreferredAffinity

const AZ1: Labels = &[("az", "az1")];
const AZ2: Labels = &[("az", "az2")];
const S1: Labels = &[("security", "S1")];
const S2: Labels = &[("security", "S2")];

fn security_in(v: &str, topology: &str) -> PodAffinityTermInput {
    t_in("security", topology, &[v])
}

/// stayWithS1InRegion
fn stay_with_s1_in_region(p: P) -> P {
    p.pref(5, security_in("S1", "region"))
}

/// stayWithS2InRegion
fn stay_with_s2_in_region(p: P) -> P {
    p.pref(6, security_in("S2", "region"))
}

/// affinity3
fn affinity3(p: P) -> P {
    p.pref(
        8,
        term(
            "region",
            vec![not_in("security", &["S1"]), in_("security", &["S2"])],
        ),
    )
    .pref(
        2,
        term("region", vec![exists("security"), not_exists("wrongkey")]),
    )
}

/// hardAffinity
fn hard_affinity(p: P) -> P {
    p.aff(t_in("security", "region", &["S1", "value2"]))
        .aff(term(
            "region",
            vec![exists("security"), not_exists("wrongkey")],
        ))
}

/// awayFromS1InAz
fn away_from_s1_in_az(p: P) -> P {
    p.pref_anti(5, security_in("S1", "az"))
}

/// awayFromS2InAz
fn away_from_s2_in_az(p: P) -> P {
    p.pref_anti(5, security_in("S2", "az"))
}

/// stayWithS1InRegionAwayFromS2InAz
fn stay_s1_away_s2(p: P) -> P {
    p.pref(8, security_in("S1", "region"))
        .pref_anti(5, security_in("S2", "az"))
}

fn ns_selected(t: PodAffinityTermInput) -> PodAffinityTermInput {
    with_ns_selector(with_namespaces(t, &["subteam2.team2"]), team1())
}

/// affinityNamespaceSelector
fn affinity_namespace_selector(p: P) -> P {
    p.pref(5, ns_selected(security_in("S1", "region")))
}

/// antiAffinityNamespaceSelector
fn anti_affinity_namespace_selector(p: P) -> P {
    p.pref_anti(5, ns_selected(security_in("S1", "region")))
}

#[test]
fn preferred_affinity() {
    const N3: &[(&str, Labels)] = &[("node1", CHINA), ("node2", INDIA), ("node3", AZ1)];
    let s = |labels: Labels| pod().labels(labels);
    let cases = vec![
        ScoreCase {
            name: "all nodes are same priority as Affinity is nil",
            pod: s(S1),
            pods: vec![],
            nodes: N3,
            want: None,
        },
        ScoreCase {
            name: "Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't match either pods in nodes or in topology key",
            pod: stay_with_s1_in_region(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S2), "node2"), (s(S1), "node3")],
            nodes: N3,
            want: Some(vec![MAX, 0, 0]),
        },
        ScoreCase {
            name: "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
            pod: stay_with_s1_in_region(pod()),
            pods: vec![(s(S1), "node1")],
            nodes: &[("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)],
            want: Some(vec![MAX, MAX, 0]),
        },
        ScoreCase {
            name: "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
            pod: stay_with_s2_in_region(s(S1)),
            pods: vec![
                (s(S2), "node1"),
                (s(S2), "node1"),
                (s(S2), "node2"),
                (s(S2), "node3"),
                (s(S2), "node4"),
                (s(S2), "node5"),
            ],
            nodes: &[
                ("node1", CHINA),
                ("node2", INDIA),
                ("node3", CHINA),
                ("node4", CHINA),
                ("node5", INDIA),
            ],
            want: Some(vec![MAX, 0, MAX, MAX, 0]),
        },
        ScoreCase {
            name: "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures",
            pod: affinity3(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S2), "node2"), (s(S1), "node3")],
            nodes: N3,
            want: Some(vec![20, MAX, 0]),
        },
        ScoreCase {
            name: "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
            pod: s(S2),
            pods: vec![
                (stay_with_s1_in_region(s(S1)), "node1"),
                (stay_with_s2_in_region(s(S2)), "node2"),
            ],
            nodes: N3,
            want: Some(vec![0, MAX, 0]),
        },
        ScoreCase {
            name: "Affinity symmetry with namespace selector",
            pod: s(S1).ns("subteam1.team1"),
            pods: vec![
                (affinity_namespace_selector(s(S1)), "node1"),
                (stay_with_s2_in_region(s(S2)), "node2"),
            ],
            nodes: N3,
            want: Some(vec![MAX, 0, 0]),
        },
        ScoreCase {
            name: "AntiAffinity symmetry with namespace selector",
            pod: s(S1).ns("subteam1.team1"),
            pods: vec![
                (anti_affinity_namespace_selector(s(S1)), "node1"),
                (stay_with_s2_in_region(s(S2)), "node2"),
            ],
            nodes: N3,
            want: Some(vec![0, MAX, MAX]),
        },
        ScoreCase {
            name: "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
            pod: s(S1),
            pods: vec![
                (hard_affinity(s(S1)), "node1"),
                (hard_affinity(s(S2)), "node2"),
            ],
            nodes: N3,
            want: Some(vec![MAX, MAX, 0]),
        },
        ScoreCase {
            name: "Anti Affinity: pod that does not match existing pods in node will get high score",
            pod: away_from_s1_in_az(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S2), "node2")],
            nodes: &[("node1", AZ1), ("node2", CHINA)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others",
            pod: away_from_s1_in_az(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S1), "node2")],
            nodes: &[("node1", AZ1), ("node2", CHINA)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
            pod: away_from_s1_in_az(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S1), "node1"), (s(S2), "node2")],
            nodes: &[("node1", AZ1), ("node2", INDIA)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
            pod: s(S2),
            pods: vec![
                (away_from_s2_in_az(s(S1)), "node1"),
                (away_from_s1_in_az(s(S2)), "node2"),
            ],
            nodes: &[("node1", AZ1), ("node2", AZ2)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
            pod: stay_s1_away_s2(s(S1)),
            pods: vec![(s(S1), "node1"), (s(S1), "node2")],
            nodes: &[("node1", CHINA), ("node2", AZ1)],
            want: Some(vec![MAX, 0]),
        },
        ScoreCase {
            name: "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
            pod: stay_s1_away_s2(s(S1)),
            pods: vec![
                (s(S1), "node1"),
                (s(S1), "node1"),
                (s(S1), "node2"),
                (s(S1), "node3"),
                (s(S1), "node3"),
                (s(S1), "node4"),
                (s(S1), "node5"),
            ],
            nodes: &[
                ("node1", CHINA_AZ1),
                ("node2", INDIA),
                ("node3", CHINA),
                ("node4", CHINA),
                ("node5", INDIA),
            ],
            want: Some(vec![MAX, 0, MAX, MAX, 0]),
        },
        ScoreCase {
            name: "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
            pod: stay_s1_away_s2(s(S1)),
            pods: vec![
                (s(S1), "node1"),
                (s(S2), "node2"),
                (stay_s1_away_s2(pod()), "node3"),
                (away_from_s1_in_az(pod()), "node4"),
            ],
            nodes: &[
                ("node1", CHINA),
                ("node2", AZ1),
                ("node3", INDIA),
                ("node4", AZ2),
            ],
            want: Some(vec![MAX, 0, MAX, 0]),
        },
        ScoreCase {
            name: "Avoid panic when partial nodes in a topology don't have pods with affinity",
            pod: s(S1),
            pods: vec![(s(S1), "node1"), (stay_s1_away_s2(pod()), "node2")],
            nodes: &[("node1", CHINA), ("node2", CHINA)],
            want: Some(vec![0, 0]),
        },
        // Not ported: "invalid Affinity fails PreScore" (label syntax).
        // Not ported: "invalid AntiAffinity fails PreScore" (label syntax).
        ScoreCase {
            name: "Affinity with pods matching NamespaceSelector",
            pod: affinity_namespace_selector(s(S1).ns("subteam1.team1")),
            pods: vec![
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team2"), "node1"),
                (s(S1).ns("subteam2.team1"), "node2"),
            ],
            nodes: &[("node1", CHINA), ("node2", INDIA)],
            want: Some(vec![MAX, 0]),
        },
        ScoreCase {
            name: "Affinity with pods matching both NamespaceSelector and Namespaces fields",
            pod: affinity_namespace_selector(s(S1).ns("subteam1.team1")),
            pods: vec![
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam2.team2"), "node1"),
                (s(S1).ns("subteam2.team1"), "node2"),
            ],
            nodes: &[("node1", CHINA), ("node2", INDIA)],
            want: Some(vec![MAX, 0]),
        },
        ScoreCase {
            name: "Affinity with pods matching NamespaceSelector (anti-affinity)",
            pod: anti_affinity_namespace_selector(s(S1).ns("subteam1.team1")),
            pods: vec![
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team2"), "node1"),
                (s(S1).ns("subteam2.team1"), "node2"),
            ],
            nodes: &[("node1", CHINA), ("node2", INDIA)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "Affinity with pods matching both NamespaceSelector and Namespaces fields (anti-affinity)",
            pod: anti_affinity_namespace_selector(s(S1).ns("subteam1.team1")),
            pods: vec![
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam1.team1"), "node1"),
                (s(S1).ns("subteam2.team2"), "node1"),
                (s(S1).ns("subteam2.team1"), "node2"),
            ],
            nodes: &[("node1", CHINA), ("node2", INDIA)],
            want: Some(vec![0, MAX]),
        },
        // Not ported: "Ignore preferred terms of existing pods" (IgnorePreferredTermsOfExistingPods).
        ScoreCase {
            name: "Do not ignore preferred terms of existing pods",
            pod: s(S2),
            pods: vec![
                (stay_s1_away_s2(s(S1)), "node1"),
                (stay_with_s2_in_region(s(S2)), "node2"),
            ],
            nodes: &[("node1", CHINA), ("node2", INDIA)],
            want: Some(vec![0, MAX]),
        },
        ScoreCase {
            name: "No nodes to score",
            pod: s(S2),
            pods: vec![],
            nodes: &[],
            want: None,
        },
    ];
    assert_eq!(cases.len(), 23);
    run_score_cases(cases);
}

// ---------------------------------------------------------------------------------------------
// scoring_test.go: TestPreferredAffinityWithHardPodAffinitySymmetricWeight

#[test]
fn preferred_affinity_with_hard_pod_affinity_symmetric_weight() {
    const N3: &[(&str, Labels)] = &[("node1", CHINA), ("node2", INDIA), ("node3", AZ1)];
    // hardPodAffinity
    let hard = || {
        pod().aff(with_ns_selector(
            with_namespaces(t_in("service", "region", &["S1"]), &["", "subteam2.team2"]),
            team1(),
        ))
    };
    let existing = || vec![(hard(), "node1"), (hard(), "node2")];
    let incoming = |ns: &str| pod().ns(ns).label("service", "S1");
    let cases = vec![
        ScoreCase {
            name: "with default weight",
            pod: incoming(""),
            pods: existing(),
            nodes: N3,
            want: Some(vec![MAX, MAX, 0]),
        },
        // Not ported: "with zero weight" (Magma's hard pod affinity weight is always 1).
        ScoreCase {
            name: "with no matching namespace",
            pod: incoming("subteam1.team2"),
            pods: existing(),
            nodes: N3,
            want: None,
        },
        ScoreCase {
            name: "with matching NamespaceSelector",
            pod: incoming("subteam1.team1"),
            pods: existing(),
            nodes: N3,
            want: Some(vec![MAX, MAX, 0]),
        },
        ScoreCase {
            name: "with matching Namespaces",
            pod: incoming("subteam2.team2"),
            pods: existing(),
            nodes: N3,
            want: Some(vec![MAX, MAX, 0]),
        },
    ];
    assert_eq!(cases.len(), 4);
    run_score_cases(cases);
}
