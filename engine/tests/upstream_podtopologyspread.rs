//! Cases ported from kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go` and
//! `pkg/scheduler/framework/plugins/podtopologyspread/scoring_test.go` (Apache-2.0, The
//! Kubernetes Authors), run against Magma's `PodTopologySpread` through the public engine API.
//! Ported from the stored versions at commits `e7827879dbc2` (filtering) and `38f68d59a73f`
//! (scoring), both of the `backend/cache` era.
//!
//! Each case builds a `Cache` with the pod index on, applies the upstream nodes and the existing
//! pods bound to them, publishes a snapshot and compiles the incoming pod; then:
//!
//! - filtering: `Filters` with only PodTopologySpread switched on (upstream runs the plugin
//!   alone, so nodes another plugin would reject still count as candidates), `fits`/`explain`
//!   per node. Upstream's `Success` is a pass, `Unschedulable` is
//!   `node(s) didn't match pod topology spread constraints` and `UnschedulableAndUnresolvable`
//!   is `... (missing required label)`, checked through `Failure::message`. PreFilter `Skip` is
//!   `Filter::pre_filter` returning `None`;
//! - scoring: `Scores` with only `podtopologyspread.weight` = 1, `score` on upstream's candidate
//!   nodes (`nodes`; `failedNodes` are in the cluster but not scored, as upstream) and
//!   `finish`, compared with upstream's normalised `framework.NodeScoreList`.
//!
//! `TestPreFilterState` and `TestPreScoreStateEmptyNodes` assert the plugins' internal state
//! (per-domain counts, critical paths, ignored nodes), which Magma keeps private; those cases are
//! ported as the verdicts that state implies, derived with upstream's own rules (`Filter`:
//! a missing key is unresolvable, else `count + selfMatch - min > maxSkew` is unschedulable,
//! `min` being 0 while fewer domains than `minDomains` exist; `NormalizeScore`: with every
//! count 0 an ignored node scores 0 and every other 100).
//!
//! Not ported, one line each where they are: the system default constraints derived from
//! Services and ReplicaSets (Magma does not watch them); the feature-gate-off variants
//! (`enableNodeInclusionPolicy`/`enableMatchLabelKeys` false with non-default settings);
//! `TestPreFilterStateAddPod`/`RemovePod` (preemption); `TestPreFilterDisabled` (cycle-state
//! plumbing); `minDomains` with `ScheduleAnyway` (Magma rejects it as the API server does).
//!
//! Score cases where Magma's domain count differs from upstream's by design (the module doc of
//! `plugins/pod_topology_spread.rs`: upstream sizes the normalising weight from the candidate
//! nodes, Magma from every eligible node) are kept in their own test with Magma's values and
//! upstream's in a comment, so a change to either side shows.

use magma_engine::conf::Profile;
use magma_engine::model::{
    LabelSelectorInput, NodeAffinityInput, PodInput, SelectorRequirementInput, SelectorTermInput,
    TaintInput, TolerationInput, TopologySpreadInput,
};
use magma_engine::plugins::pod_topology_spread::PodTopologySpread;
use magma_engine::plugins::{FilterSwitches, ScoreWeights};

use crate::world;

// Upstream's reasons (`podtopologyspread/filtering.go`) by status code.
const TOO_SKEWED: &str = "node(s) didn't match pod topology spread constraints";
const MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// `framework.Success`.
const SUCCESS: Option<&str> = None;
/// `framework.Unschedulable`.
const UNSCHED: Option<&str> = Some(TOO_SKEWED);
/// `framework.UnschedulableAndUnresolvable`.
const UNRESOLVABLE: Option<&str> = Some(MISSING_LABEL);

const HOSTNAME: &str = "kubernetes.io/hostname";
const DNS: bool = true;
const SA: bool = false;
const HONOR: &str = "Honor";
const IGNORE: &str = "Ignore";
/// `v1.TaintNodeUnschedulable`.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

// ---------------------------------------------------------------------------------------------
// Helpers

type Labels = &'static [(&'static str, &'static str)];

/// A node as upstream's `st.MakeNode()` builds it.
#[derive(Clone)]
struct N {
    name: &'static str,
    labels: Labels,
    /// `Taints(taints)`: `node.kubernetes.io/unschedulable:NoSchedule`.
    tainted: bool,
}

fn n(name: &'static str, labels: Labels) -> N {
    N {
        name,
        labels,
        tainted: false,
    }
}

impl N {
    fn tainted(mut self) -> N {
        self.tainted = true;
        self
    }
}

/// node-a, node-b in zone1 and node-x, node-y in zone2, each with its `node` label.
fn abxy() -> Vec<N> {
    vec![
        n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
        n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
        n("node-x", &[("zone", "zone2"), ("node", "node-x")]),
        n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
    ]
}

/// The cluster of one case: PodTopologySpread on.
struct World(world::World);

impl World {
    fn new(nodes: &[N]) -> World {
        let profile = Profile {
            filters: FilterSwitches {
                pod_topology_spread: true,
                ..FilterSwitches::OFF
            },
            weights: ScoreWeights {
                pod_topology_spread: 1,
                ..ScoreWeights::NONE
            },
            ..Profile::default()
        };
        let inputs = nodes
            .iter()
            .map(|n| {
                let mut input = world::node(n.name, n.labels);
                if n.tainted {
                    input.taints = vec![TaintInput {
                        key: UNSCHEDULABLE_TAINT.into(),
                        value: String::new(),
                        effect: "NoSchedule".into(),
                    }];
                }
                input
            })
            .collect();
        World(world::World::new(profile, inputs))
    }

    fn bind(&mut self, p: &P, node: &str) {
        self.0.bind(&p.0, node)
    }

    /// Whether PreFilter skips, and per node of `nodes` `None` when the pod passes or the text
    /// of its one failure.
    fn filter(&mut self, p: &P, nodes: &[N]) -> (bool, Vec<Option<String>>) {
        let on: Vec<&str> = nodes.iter().map(|n| n.name).collect();
        self.0.filter::<PodTopologySpread>(&p.0, &on)
    }

    /// The normalised scores on the candidate `nodes`, or `None` when PreScore skips.
    fn scores(&mut self, p: &P, nodes: &[N]) -> Option<Vec<i64>> {
        let on: Vec<&str> = nodes.iter().map(|n| n.name).collect();
        self.0.scores::<PodTopologySpread>(&p.0, &on)
    }
}

/// A pod as upstream's `st.MakePod()` builds it (namespace "", like upstream's default).
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
    fn foo(self) -> P {
        self.label("foo", "")
    }
    fn bar(self) -> P {
        self.label("bar", "")
    }
    fn terminating(mut self) -> P {
        self.0.terminating = true;
        self
    }
    fn node_selector(mut self, k: &str, v: &str) -> P {
        self.0.node_selector.push((k.into(), v.into()));
        self
    }
    fn node_affinity(mut self, key: &str, op: &str, values: &[&str]) -> P {
        self.0.affinity = Some(NodeAffinityInput {
            required: Some(vec![SelectorTermInput {
                match_expressions: vec![req(key, op, values)],
                match_fields: vec![],
            }]),
            preferred: vec![],
        });
        self
    }
    /// `NodeAffinityIn(key, values, NodeSelectorTypeMatchExpressions)`.
    fn node_affinity_in(self, key: &str, values: &[&str]) -> P {
        self.node_affinity(key, "In", values)
    }
    /// `NodeAffinityNotIn(key, values)`.
    fn node_affinity_not_in(self, key: &str, values: &[&str]) -> P {
        self.node_affinity(key, "NotIn", values)
    }
    /// `Toleration(key)`: `key` with operator `Exists`.
    fn toleration(mut self, key: &str) -> P {
        self.0.tolerations.push(TolerationInput {
            key: key.into(),
            operator: "Exists".into(),
            ..Default::default()
        });
        self
    }
    fn spread(mut self, c: TopologySpreadInput) -> P {
        self.0.topology_spread.push(c);
        self
    }
}

fn req(key: &str, op: &str, values: &[&str]) -> SelectorRequirementInput {
    SelectorRequirementInput {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// `fooSelector`: `foo` exists.
fn foo_sel() -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![],
        match_expressions: vec![req("foo", "Exists", &[])],
    })
}

/// `barSelector`: `bar` exists.
fn bar_sel() -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![],
        match_expressions: vec![req("bar", "Exists", &[])],
    })
}

/// `st.MakeLabelSelector().Label(k, v)`.
fn match_label(k: &str, v: &str) -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![(k.into(), v.into())],
        match_expressions: vec![],
    })
}

/// `st.MakeLabelSelector().Obj()`: an empty selector (selects everything).
fn empty_sel() -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput::default())
}

/// `SpreadConstraint(maxSkew, key, mode, selector, nil, nil, nil, nil)`.
fn sc(
    max_skew: i32,
    key: &str,
    hard: bool,
    selector: Option<LabelSelectorInput>,
) -> TopologySpreadInput {
    TopologySpreadInput {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: if hard {
            "DoNotSchedule"
        } else {
            "ScheduleAnyway"
        }
        .into(),
        label_selector: selector,
        ..Default::default()
    }
}

/// The `minDomains` argument.
fn min_domains(mut c: TopologySpreadInput, n: i32) -> TopologySpreadInput {
    c.min_domains = Some(n);
    c
}

/// The `nodeAffinityPolicy` argument.
fn nap(mut c: TopologySpreadInput, p: &str) -> TopologySpreadInput {
    c.node_affinity_policy = Some(p.into());
    c
}

/// The `nodeTaintsPolicy` argument.
fn ntp(mut c: TopologySpreadInput, p: &str) -> TopologySpreadInput {
    c.node_taints_policy = Some(p.into());
    c
}

/// The `matchLabelKeys` argument.
fn mlk(mut c: TopologySpreadInput, keys: &[&str]) -> TopologySpreadInput {
    c.match_label_keys = keys.iter().map(|k| k.to_string()).collect();
    c
}

/// `count` pods on `node`, each as `p` builds it.
fn on(node: &'static str, count: usize, p: P) -> Vec<(P, &'static str)> {
    vec![(p, node); count]
}

struct FilterCase {
    name: &'static str,
    pod: P,
    nodes: Vec<N>,
    pods: Vec<(P, &'static str)>,
    /// Per node, in `nodes` order.
    want: Vec<Option<&'static str>>,
}

/// `pod`'s verdicts on `nodes` with `pods` bound, with the constraints' counts aggregated
/// (watched), from the label index (not yet watched) and scanned (`world::Terms`); PreFilter
/// never skips in these tables.
fn verdicts_each_way<'a>(
    name: &'a str,
    nodes: &'a [N],
    pods: &'a [(P, &'static str)],
    pod: &'a P,
) -> impl Iterator<Item = (world::Terms, Vec<Option<String>>)> + 'a {
    world::ALL_TERMS.into_iter().map(move |terms| {
        let mut w = World::new(nodes);
        w.0.terms = terms;
        for (p, node) in pods {
            w.bind(p, node);
        }
        let (skip, got) = w.filter(pod, nodes);
        assert!(!skip, "{name} ({terms:?}): PreFilter skipped");
        (terms, got)
    })
}

fn run_filter_cases(cases: Vec<FilterCase>) {
    for c in cases {
        let want: Vec<Option<String>> = c.want.iter().map(|w| w.map(str::to_owned)).collect();
        for (terms, got) in verdicts_each_way(c.name, &c.nodes, &c.pods, &c.pod) {
            assert_eq!(got, want, "{} ({terms:?})", c.name);
        }
    }
}

struct ScoreCase {
    name: &'static str,
    pod: P,
    /// Upstream's candidate nodes (scored).
    nodes: Vec<N>,
    /// Upstream's `failedNodes`: in the cluster, not scored.
    failed: Vec<N>,
    pods: Vec<(P, &'static str)>,
    want: Vec<i64>,
}

fn run_score_cases(cases: Vec<ScoreCase>) {
    for c in cases {
        let all: Vec<N> = c.nodes.iter().chain(&c.failed).cloned().collect();
        for terms in world::ALL_TERMS {
            let mut w = World::new(&all);
            w.0.terms = terms;
            for (p, node) in &c.pods {
                w.bind(p, node);
            }
            let want = Some(c.want.clone());
            assert_eq!(w.scores(&c.pod, &c.nodes), want, "{} ({terms:?})", c.name);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// filtering_test.go: TestPreFilterState (as the verdicts its expected state implies)

/// One constraint of upstream's expected `preFilterState`, with the incoming pod's self-match.
struct Want {
    key: &'static str,
    max_skew: i64,
    min_domains: usize,
    self_match: bool,
    /// `TpPairToMatchNum` for this key.
    counts: &'static [(&'static str, i64)],
    /// `TpKeyToCriticalPaths[key][0].MatchNum`.
    min: i64,
}

fn want(
    key: &'static str,
    max_skew: i64,
    self_match: bool,
    counts: &'static [(&'static str, i64)],
    min: i64,
) -> Want {
    Want {
        key,
        max_skew,
        min_domains: 1,
        self_match,
        counts,
        min,
    }
}

/// Upstream's `Filter` on a node with `labels`, given the expected PreFilter state.
fn implied_verdict(state: &[Want], labels: Labels) -> Option<&'static str> {
    for c in state {
        let Some((_, value)) = labels.iter().find(|(k, _)| *k == c.key) else {
            return UNRESOLVABLE;
        };
        let count = c
            .counts
            .iter()
            .find(|(v, _)| v == value)
            .map_or(0, |&(_, n)| n);
        // `TpKeyToDomainsNum` is the number of pairs of the key.
        let min = if c.counts.len() < c.min_domains {
            0
        } else {
            c.min
        };
        if count + i64::from(c.self_match) - min > c.max_skew {
            return UNSCHED;
        }
    }
    SUCCESS
}

struct StateCase {
    name: &'static str,
    pod: P,
    nodes: Vec<N>,
    pods: Vec<(P, &'static str)>,
    state: Vec<Want>,
}

fn run_state_cases(cases: Vec<StateCase>) {
    for c in cases {
        let want: Vec<Option<String>> = c
            .nodes
            .iter()
            .map(|n| implied_verdict(&c.state, n.labels).map(str::to_owned))
            .collect();
        for (terms, got) in verdicts_each_way(c.name, &c.nodes, &c.pods, &c.pod) {
            assert_eq!(got, want, "{} ({terms:?})", c.name);
        }
    }
}

#[test]
fn pre_filter_state() {
    let p = || pod().foo();
    let cases = vec![
        StateCase {
            name: "clean cluster with one spreadConstraint",
            pod: p().spread(sc(5, "zone", DNS, match_label("foo", "bar"))),
            nodes: abxy(),
            pods: vec![],
            state: vec![want("zone", 5, false, &[("zone1", 0), ("zone2", 0)], 0)],
        },
        StateCase {
            name: "normal case with one spreadConstraint",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 2, p()),
            ]
            .concat(),
            state: vec![want("zone", 1, true, &[("zone1", 3), ("zone2", 2)], 2)],
        },
        StateCase {
            name: "normal case with null label selector",
            pod: p().spread(sc(1, "zone", DNS, None)),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 2, p()),
            ]
            .concat(),
            state: vec![want("zone", 1, false, &[("zone1", 0), ("zone2", 0)], 0)],
        },
        StateCase {
            name: "normal case with one spreadConstraint, on a 3-zone cluster",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: [
                abxy(),
                vec![
                    n("node-o", &[("zone", "zone3"), ("node", "node-o")]),
                    n("node-p", &[("zone", "zone3"), ("node", "node-p")]),
                ],
            ]
            .concat(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 2, p()),
            ]
            .concat(),
            state: vec![want(
                "zone",
                1,
                true,
                &[("zone1", 3), ("zone2", 2), ("zone3", 0)],
                0,
            )],
        },
        StateCase {
            name: "namespace mismatch doesn't count",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: abxy(),
            pods: vec![
                (p(), "node-a"),
                (p().ns("ns1"), "node-a"),
                (p(), "node-b"),
                (p().ns("ns2"), "node-y"),
                (p(), "node-y"),
            ],
            state: vec![want("zone", 1, true, &[("zone1", 2), ("zone2", 1)], 1)],
        },
        StateCase {
            name: "normal case with two spreadConstraints",
            pod: p()
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 3), ("zone2", 4)], 3),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)],
                    0,
                ),
            ],
        },
        StateCase {
            name: "soft spreadConstraints should be bypassed",
            pod: p()
                .spread(sc(1, "zone", SA, foo_sel()))
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", SA, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 3), ("zone2", 4)], 3),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 2), ("node-b", 1), ("node-y", 4)],
                    1,
                ),
            ],
        },
        StateCase {
            name: "different labelSelectors - simple version",
            pod: p().bar().spread(sc(1, "zone", DNS, foo_sel())).spread(sc(
                1,
                "node",
                DNS,
                bar_sel(),
            )),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![(p(), "node-a"), (pod().bar(), "node-b")],
            state: vec![
                want("zone", 1, true, &[("zone1", 1), ("zone2", 0)], 0),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 0), ("node-b", 1), ("node-y", 0)],
                    0,
                ),
            ],
        },
        StateCase {
            name: "different labelSelectors - complex pods",
            pod: p().bar().spread(sc(1, "zone", DNS, foo_sel())).spread(sc(
                1,
                "node",
                DNS,
                bar_sel(),
            )),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![
                (p(), "node-a"),
                (p().bar(), "node-a"),
                (p(), "node-b"),
                (p(), "node-y"),
                (p().bar(), "node-y"),
                (p(), "node-y"),
                (p().bar(), "node-y"),
            ],
            state: vec![
                want("zone", 1, true, &[("zone1", 3), ("zone2", 4)], 3),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 1), ("node-b", 0), ("node-y", 2)],
                    0,
                ),
            ],
        },
        StateCase {
            name: "two spreadConstraints, and with podAffinity",
            pod: p()
                .node_affinity_not_in("node", &["node-x"])
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 3), ("zone2", 4)], 3),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 2), ("node-b", 1), ("node-y", 4)],
                    1,
                ),
            ],
        },
        // Not ported: "default constraints and a service" (system default constraints).
        // Not ported: "default constraints and a service that doesn't match" (system default constraints).
        // Not ported: "default constraints and a service, but pod has constraints" (system default constraints; no nodes).
        // Not ported: "default soft constraints and a service" (system default constraints).
        StateCase {
            name: "TpKeyToDomainsNum is calculated when MinDomains is enabled",
            pod: p()
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 3), ("zone2", 4)], 3),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 2), ("node-b", 1), ("node-x", 0), ("node-y", 4)],
                    0,
                ),
            ],
        },
        // Not ported: "feature gate disabled with NodeAffinityPolicy" (feature gate off).
        StateCase {
            name: "NodeAffinityPolicy honored with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "node", DNS, bar_sel())),
            nodes: nodes_abc_foo_foo_bar(),
            pods: bar_pods_1_2_0(),
            state: vec![want("node", 1, false, &[("node-a", 1), ("node-b", 2)], 1)],
        },
        StateCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(nap(sc(1, "node", DNS, bar_sel()), IGNORE)),
            nodes: nodes_abc_foo_foo_bar(),
            pods: bar_pods_1_2_0(),
            state: vec![want(
                "node",
                1,
                false,
                &[("node-a", 1), ("node-b", 2), ("node-c", 0)],
                0,
            )],
        },
        StateCase {
            name: "NodeAffinityPolicy honored with nodeAffinity",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(sc(1, "node", DNS, bar_sel())),
            nodes: nodes_abc_foo_foo_bar(),
            pods: bar_pods_1_2_0(),
            state: vec![want("node", 1, false, &[("node-a", 1), ("node-b", 2)], 1)],
        },
        StateCase {
            name: "NodeAffinityPolicy ignored with nodeAffinity",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(nap(sc(1, "node", DNS, bar_sel()), IGNORE)),
            nodes: nodes_abc_foo_foo_bar(),
            pods: bar_pods_1_2_0(),
            state: vec![want(
                "node",
                1,
                false,
                &[("node-a", 1), ("node-b", 2), ("node-c", 0)],
                0,
            )],
        },
        // Not ported: "feature gate disabled with NodeTaintsPolicy" (feature gate off).
        StateCase {
            name: "NodeTaintsPolicy ignored",
            pod: p().spread(sc(1, "node", DNS, bar_sel())),
            nodes: nodes_abc_tainted_c(),
            pods: bar_pods_1_2_0(),
            state: vec![want(
                "node",
                1,
                false,
                &[("node-a", 1), ("node-b", 2), ("node-c", 0)],
                0,
            )],
        },
        StateCase {
            name: "NodeTaintsPolicy honored",
            pod: p().spread(ntp(sc(1, "node", DNS, bar_sel()), HONOR)),
            nodes: nodes_abc_tainted_c(),
            pods: bar_pods_1_2_0(),
            state: vec![want("node", 1, false, &[("node-a", 1), ("node-b", 2)], 1)],
        },
        StateCase {
            name: "NodeTaintsPolicy honored with tolerated taints",
            pod: p()
                .toleration(UNSCHEDULABLE_TAINT)
                .spread(ntp(sc(1, "node", DNS, bar_sel()), HONOR)),
            nodes: nodes_abc_tainted_c(),
            pods: bar_pods_1_2_0(),
            state: vec![want(
                "node",
                1,
                false,
                &[("node-a", 1), ("node-b", 2), ("node-c", 0)],
                0,
            )],
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(nap(sc(1, "node", DNS, foo_sel()), IGNORE)),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
            ],
            pods: [on("node-b", 2, p()), on("node-x", 1, p())].concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 0), ("zone2", 1)], 0),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 0), ("node-b", 2), ("node-x", 1)],
                    0,
                ),
            ],
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
            pod: p()
                .spread(ntp(sc(1, "zone", DNS, foo_sel()), HONOR))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]).tainted(),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
            ],
            pods: [on("node-b", 2, p()), on("node-x", 1, p())].concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 0), ("zone2", 1)], 0),
                want(
                    "node",
                    1,
                    true,
                    &[("node-a", 0), ("node-b", 2), ("node-x", 1)],
                    0,
                ),
            ],
        },
        StateCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n(
                    "node-b",
                    &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
                )
                .tainted(),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: [
                on("node-a", 2, p()),
                on("node-x", 1, p()),
                on("node-y", 1, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 0), ("zone2", 1)], 0),
                want("node", 1, true, &[("node-b", 0), ("node-x", 1)], 0),
            ],
        },
        StateCase {
            name: "two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
            pod: p()
                .node_selector("foo", "")
                .spread(nap(sc(1, "zone", DNS, foo_sel()), IGNORE))
                .spread(ntp(sc(1, "node", DNS, foo_sel()), HONOR)),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n(
                    "node-b",
                    &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
                )
                .tainted(),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n(
                    "node-y",
                    &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
                ),
            ],
            pods: [
                on("node-a", 2, p()),
                on("node-x", 2, p()),
                on("node-y", 1, p()),
            ]
            .concat(),
            state: vec![
                want("zone", 1, true, &[("zone1", 2), ("zone2", 3)], 2),
                want("node", 1, true, &[("node-x", 2), ("node-y", 1)], 1),
            ],
        },
        // Not ported: "matchLabelKeys ignored when feature gate disabled" (feature gate off).
        StateCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            pod: p()
                .label("bar", "a")
                .spread(mlk(sc(1, "zone", DNS, foo_sel()), &["bar"])),
            nodes: abxy(),
            pods: vec![
                (p(), "node-a"),
                (p().label("bar", "a"), "node-a"),
                (p(), "node-b"),
                (p().label("bar", "a"), "node-y"),
                (pod().bar(), "node-y"),
            ],
            state: vec![want("zone", 1, true, &[("zone1", 1), ("zone2", 1)], 1)],
        },
        StateCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            pod: pod()
                .label("foo", "a")
                .spread(mlk(sc(1, "zone", DNS, empty_sel()), &["foo"])),
            nodes: abxy(),
            pods: foo_a_pods(),
            state: vec![want("zone", 1, true, &[("zone1", 3), ("zone2", 2)], 2)],
        },
        StateCase {
            name: "key in matchLabelKeys is ignored when LabelSelector is nil when feature gate enabled",
            pod: p().spread(mlk(sc(1, "zone", DNS, None), &["bar"])),
            nodes: abxy(),
            pods: foo_a_pods(),
            state: vec![want("zone", 1, false, &[("zone1", 0), ("zone2", 0)], 0)],
        },
        // Not ported: "no pod is matched when LabelSelector is nil when feature gate disabled" (feature gate off).
        StateCase {
            name: "key in matchLabelKeys is ignored when it isn't exist in pod.labels",
            pod: p().spread(mlk(sc(1, "zone", DNS, foo_sel()), &["bar"])),
            nodes: abxy(),
            pods: foo_a_pods(),
            state: vec![want("zone", 1, true, &[("zone1", 3), ("zone2", 2)], 2)],
        },
    ];
    assert_eq!(cases.len(), 26);
    run_state_cases(cases);

    // "skip if not specified": no constraint, PreFilter skips.
    let mut w = World::new(&[n("node-a", &[("zone", "zone1"), ("node", "node-a")])]);
    let (skip, v) = w.filter(&p(), &[n("node-a", &[])]);
    assert!(skip, "skip if not specified");
    assert_eq!(v, [None]);
}

/// node-a, node-b with `foo`, node-c with `bar` (each with its `node` label).
fn nodes_abc_foo_foo_bar() -> Vec<N> {
    vec![
        n("node-a", &[("node", "node-a"), ("foo", "")]),
        n("node-b", &[("node", "node-b"), ("foo", "")]),
        n("node-c", &[("node", "node-c"), ("bar", "")]),
    ]
}

/// node-a, node-b, and node-c tainted with `bar`.
fn nodes_abc_tainted_c() -> Vec<N> {
    vec![
        n("node-a", &[("node", "node-a")]),
        n("node-b", &[("node", "node-b")]),
        n("node-c", &[("node", "node-c"), ("bar", "")]).tainted(),
    ]
}

/// One `bar` pod on node-a, two on node-b, an unlabelled one on node-c.
fn bar_pods_1_2_0() -> Vec<(P, &'static str)> {
    [
        on("node-a", 1, pod().bar()),
        on("node-b", 2, pod().bar()),
        on("node-c", 1, pod()),
    ]
    .concat()
}

/// `foo=a` pods spread 2/1/0/2 over node-a, node-b, node-x, node-y.
fn foo_a_pods() -> Vec<(P, &'static str)> {
    let fa = || pod().label("foo", "a");
    [
        on("node-a", 2, fa()),
        on("node-b", 1, fa()),
        on("node-y", 2, fa()),
    ]
    .concat()
}

// Not ported: TestPreFilterStateAddPod, 16 cases (preemption AddPod).
// Not ported: TestPreFilterStateRemovePod, 9 cases (preemption RemovePod).
// Not ported: TestPreFilterDisabled (Filter without PreFilter cannot be expressed).

// ---------------------------------------------------------------------------------------------
// filtering_test.go: TestSingleConstraint

#[test]
fn single_constraint() {
    let p = || pod().foo();
    let spread_2_1_0_3 = || {
        [
            on("node-a", 2, p()),
            on("node-b", 1, p()),
            on("node-y", 3, p()),
        ]
        .concat()
    };
    let abc = || {
        vec![
            n("node-a", &[("node", "node-a")]),
            n("node-b", &[("node", "node-b")]),
            n("node-c", &[("node", "node-c")]),
        ]
    };
    let pods_2_2_1 = || {
        [
            on("node-a", 2, p()),
            on("node-b", 2, p()),
            on("node-c", 1, p()),
        ]
        .concat()
    };
    let zone_2_1 = || vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")];
    let inclusion_nodes = |taint_y: bool| {
        let y = n("node-y", &[("node", "node-y")]);
        vec![
            n("node-a", &[("node", "node-a"), ("foo", "")]),
            n("node-b", &[("node", "node-b"), ("foo", "")]),
            n("node-x", &[("node", "node-x"), ("foo", "")]),
            if taint_y { y.tainted() } else { y },
        ]
    };
    let inclusion_pods = || vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")];
    let cases = vec![
        FilterCase {
            name: "no existing pods",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: abxy(),
            pods: vec![],
            want: vec![SUCCESS, SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "no existing pods, incoming pod doesn't match itself",
            pod: p().spread(sc(1, "zone", DNS, bar_sel())),
            nodes: abxy(),
            pods: vec![],
            want: vec![SUCCESS, SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "existing pods in a different namespace do not count",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: abxy(),
            pods: vec![
                (p().ns("ns1"), "node-a"),
                (p().ns("ns2"), "node-a"),
                (p(), "node-x"),
                (p(), "node-y"),
            ],
            want: vec![SUCCESS, SUCCESS, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "existing pods do not match null selector",
            pod: p().spread(sc(1, "zone", DNS, None)),
            nodes: abxy(),
            pods: vec![(p(), "node-x"), (p(), "node-y")],
            want: vec![SUCCESS, SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "pods spread across zones as 3/3, all nodes fit",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: abxy(),
            pods: spread_2_1_0_3(),
            want: vec![SUCCESS, SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
            pod: p().spread(sc(1, "zone", DNS, foo_sel())),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-b", &[("zon", "zone1"), ("node", "node-b")]),
                n("node-x", &[("zone", "zone2"), ("node", "node-x")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![
                (p(), "node-a"),
                (p(), "node-b"),
                (p(), "node-x"),
                (p(), "node-y"),
            ],
            want: vec![SUCCESS, UNRESOLVABLE, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "pod cannot be scheduled as all nodes don't have label 'rack'",
            pod: p().spread(sc(1, "rack", DNS, foo_sel())),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-x", &[("zone", "zone2"), ("node", "node-x")]),
            ],
            pods: vec![],
            want: vec![UNRESOLVABLE, UNRESOLVABLE],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, only node-x fits",
            pod: p().spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: spread_2_1_0_3(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
            pod: p().spread(sc(2, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: spread_2_1_0_3(),
            want: vec![UNSCHED, SUCCESS, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
            pod: pod().bar().spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: spread_2_1_0_3(),
            want: vec![UNSCHED, SUCCESS, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
            pod: p()
                .node_affinity_in("node", &["node-a", "node-y"])
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: abxy(),
            pods: spread_2_1_0_3(),
            want: vec![SUCCESS, SUCCESS, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "terminating Pods should be excluded",
            pod: p().spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n("node-a", &[("node", "node-a")]),
                n("node-b", &[("node", "node-b")]),
            ],
            pods: vec![(p().terminating(), "node-a"), (p(), "node-b")],
            want: vec![SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
            pod: p().node_affinity_not_in("node", &["node-b"]).spread(sc(
                1,
                "zone",
                DNS,
                foo_sel(),
            )),
            nodes: abxy(),
            pods: [on("node-b", 2, p()), on("node-y", 1, p())].concat(),
            want: vec![SUCCESS, SUCCESS, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
            pod: p().spread(min_domains(sc(2, "node", DNS, foo_sel()), 4)),
            nodes: abc(),
            pods: pods_2_2_1(),
            want: vec![UNSCHED, UNSCHED, SUCCESS],
        },
        FilterCase {
            name: "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
            pod: p().spread(min_domains(sc(2, "node", DNS, foo_sel()), 2)),
            nodes: abc(),
            pods: pods_2_2_1(),
            want: vec![SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
            pod: p().spread(min_domains(sc(2, "zone", DNS, foo_sel()), 3)),
            nodes: abxy(),
            pods: zone_2_1(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
            pod: p().spread(min_domains(sc(2, "zone", DNS, foo_sel()), 1)),
            nodes: abxy(),
            pods: zone_2_1(),
            want: vec![SUCCESS, SUCCESS, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: inclusion_nodes(false),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(nap(sc(1, "node", DNS, foo_sel()), IGNORE)),
            nodes: inclusion_nodes(false),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "NodeAffinityPolicy honored with nodeAffinity",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: inclusion_nodes(false),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "NodeAffinityPolicy ignored with labelSelectors (nodeAffinity)",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(nap(sc(1, "node", DNS, foo_sel()), IGNORE)),
            nodes: inclusion_nodes(false),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "NodeTaintsPolicy honored",
            pod: p().spread(ntp(sc(1, "node", DNS, foo_sel()), HONOR)),
            nodes: inclusion_nodes(true),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, SUCCESS],
        },
        FilterCase {
            name: "NodeTaintsPolicy ignored",
            pod: p().spread(sc(1, "node", DNS, foo_sel())),
            nodes: inclusion_nodes(true),
            pods: inclusion_pods(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
    ];
    assert_eq!(cases.len(), 23);
    run_filter_cases(cases);
}

// ---------------------------------------------------------------------------------------------
// filtering_test.go: TestMultipleConstraints

#[test]
fn multiple_constraints() {
    let p = || pod().foo();
    let zone_and_node = || {
        p().spread(sc(1, "zone", DNS, foo_sel()))
            .spread(sc(1, "node", DNS, foo_sel()))
    };
    let foo_zone_bar_node = |p: P| {
        p.spread(sc(1, "zone", DNS, foo_sel()))
            .spread(sc(1, "node", DNS, bar_sel()))
    };
    let cases = vec![
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
            pod: zone_and_node(),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 3, p()),
            ]
            .concat(),
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
            pod: zone_and_node(),
            nodes: abxy(),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            want: vec![UNSCHED, UNSCHED, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
            pod: foo_zone_bar_node(p().bar()),
            nodes: abxy(),
            pods: vec![(p(), "node-a"), (pod().bar(), "node-y")],
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
            pod: foo_zone_bar_node(p().bar()),
            nodes: abxy(),
            pods: vec![
                (p(), "node-a"),
                (pod().bar(), "node-x"),
                (pod().bar(), "node-y"),
            ],
            want: vec![UNSCHED, UNSCHED, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
            pod: foo_zone_bar_node(p().bar()),
            nodes: abxy(),
            pods: vec![
                (p(), "node-a"),
                (p().bar(), "node-a"),
                (p(), "node-y"),
                (p().bar(), "node-y"),
                (p(), "node-y"),
            ],
            want: vec![UNSCHED, SUCCESS, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
            pod: foo_zone_bar_node(pod().bar()),
            nodes: abxy(),
            pods: vec![
                (p(), "node-a"),
                (pod().bar(), "node-x"),
                (pod().bar(), "node-y"),
            ],
            want: vec![SUCCESS, SUCCESS, UNSCHED, UNSCHED],
        },
        FilterCase {
            name: "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
            pod: zone_and_node(),
            nodes: vec![
                n("node-a", &[("zone", "zone1"), ("node", "node-a")]),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n("node-x", &[("zone", "zone2")]),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![(p(), "node-a"), (p(), "node-y")],
            want: vec![UNSCHED, SUCCESS, UNRESOLVABLE, UNSCHED],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(nap(sc(1, "node", DNS, foo_sel()), IGNORE)),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n(
                    "node-b",
                    &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
                ),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]),
            ],
            pods: vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")],
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
            pod: p()
                .spread(ntp(sc(1, "zone", DNS, foo_sel()), HONOR))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n(
                    "node-b",
                    &[("zone", "zone1"), ("node", "node-b"), ("foo", "")],
                ),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n("node-y", &[("zone", "zone2"), ("node", "node-y")]).tainted(),
            ],
            pods: vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")],
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "zone", DNS, foo_sel()))
                .spread(sc(1, "node", DNS, foo_sel())),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n(
                    "node-y",
                    &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
                )
                .tainted(),
            ],
            pods: vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")],
            want: vec![UNSCHED, SUCCESS, SUCCESS, UNSCHED],
        },
        FilterCase {
            name: "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
            pod: p()
                .node_selector("foo", "")
                .spread(ntp(sc(1, "zone", DNS, foo_sel()), HONOR))
                .spread(nap(sc(1, "node", DNS, foo_sel()), IGNORE)),
            nodes: vec![
                n(
                    "node-a",
                    &[("zone", "zone1"), ("node", "node-a"), ("foo", "")],
                ),
                n("node-b", &[("zone", "zone1"), ("node", "node-b")]),
                n(
                    "node-x",
                    &[("zone", "zone2"), ("node", "node-x"), ("foo", "")],
                ),
                n(
                    "node-y",
                    &[("zone", "zone2"), ("node", "node-y"), ("foo", "")],
                )
                .tainted(),
            ],
            pods: vec![(p(), "node-a"), (p(), "node-b"), (p(), "node-y")],
            want: vec![UNSCHED, UNSCHED, SUCCESS, UNSCHED],
        },
    ];
    assert_eq!(cases.len(), 11);
    run_filter_cases(cases);
}

// ---------------------------------------------------------------------------------------------
// scoring_test.go: TestPreScoreSkip, TestPreScoreStateEmptyNodes

#[test]
fn pre_score_skip() {
    let nodes = [
        n("node-a", &[(HOSTNAME, "node-a")]),
        n("node-b", &[(HOSTNAME, "node-b")]),
    ];
    let mut w = World::new(&nodes);
    // "the pod doesn't have soft topology spread Constraints"
    assert_eq!(w.scores(&pod().ns("default"), &nodes), None);
    // Not ported: "default constraints and a replicaset that doesn't match" (system default constraints).
}

/// The `preScoreState` upstream expects with no pods placed implies, through `Score` and
/// `NormalizeScore`, that every candidate scores 100 but the `IgnoredNodes`, which score 0.
#[test]
fn pre_score_state_empty_nodes() {
    let three = |x: Labels| {
        vec![
            n("node-a", &[("zone", "zone1"), (HOSTNAME, "node-a")]),
            n("node-b", &[("zone", "zone1"), (HOSTNAME, "node-b")]),
            n("node-x", x),
        ]
    };
    let x_in_zone2: Labels = &[("zone", "zone2"), (HOSTNAME, "node-x")];
    let inclusion = |tainted_x: bool| {
        let x = n("node-x", &[("zone", "zone2"), (HOSTNAME, "node-x")]);
        vec![
            n(
                "node-a",
                &[("zone", "zone1"), ("foo", ""), (HOSTNAME, "node-a")],
            ),
            n(
                "node-b",
                &[("zone", "zone1"), ("foo", ""), (HOSTNAME, "node-b")],
            ),
            if tainted_x { x.tainted() } else { x },
        ]
    };
    let p = || pod().foo();
    // (name, pod, nodes, the ignored nodes' indices)
    let cases: Vec<(&str, P, Vec<N>, &[usize])> = vec![
        (
            "normal case",
            p().spread(sc(1, "zone", SA, foo_sel()))
                .spread(sc(1, HOSTNAME, SA, foo_sel())),
            three(x_in_zone2),
            &[],
        ),
        (
            "null selector",
            p().spread(sc(1, "zone", SA, None)),
            three(x_in_zone2),
            &[],
        ),
        (
            "node-x doesn't have label zone",
            p().spread(sc(1, "zone", SA, foo_sel()))
                .spread(sc(1, HOSTNAME, SA, bar_sel())),
            three(&[(HOSTNAME, "node-x")]),
            &[2],
        ),
        // Not ported: "system default constraints and a replicaset" (system default constraints).
        // Not ported: "default constraints and a replicaset" (system default constraints).
        (
            "default constraints and a replicaset, but pod has constraints",
            pod()
                .ns("default")
                .label("foo", "bar")
                .label("baz", "sup")
                .spread(sc(1, "zone", DNS, bar_sel()))
                .spread(sc(2, "planet", SA, match_label("baz", "sup"))),
            vec![n("node-a", &[("planet", "mars"), ("galaxy", "andromeda")])],
            &[],
        ),
        (
            "NodeAffinityPolicy honored with labelSelectors",
            p().node_selector("foo", "")
                .spread(sc(1, "zone", SA, bar_sel())),
            inclusion(false),
            &[],
        ),
        (
            "NodeAffinityPolicy ignored with labelSelectors",
            p().node_selector("foo", "")
                .spread(nap(sc(1, "zone", SA, bar_sel()), IGNORE)),
            inclusion(false),
            &[],
        ),
        (
            "NodeAffinityPolicy honored with nodeAffinity",
            p().node_affinity_in("foo", &[""])
                .spread(sc(1, "zone", SA, bar_sel())),
            inclusion(false),
            &[],
        ),
        (
            "NodeAffinityPolicy ignored with nodeAffinity",
            p().node_affinity_in("foo", &[""])
                .spread(nap(sc(1, "zone", SA, bar_sel()), IGNORE)),
            inclusion(false),
            &[],
        ),
        (
            "NodeTaintsPolicy honored",
            p().spread(ntp(sc(1, "zone", SA, bar_sel()), HONOR)),
            inclusion(true),
            &[],
        ),
        (
            "NodeTaintsPolicy ignored",
            p().spread(sc(1, "zone", SA, bar_sel())),
            inclusion(true),
            &[],
        ),
    ];
    assert_eq!(cases.len(), 10);
    for (name, pod, nodes, ignored) in cases {
        let mut w = World::new(&nodes);
        let want: Vec<i64> = (0..nodes.len())
            .map(|i| if ignored.contains(&i) { 0 } else { 100 })
            .collect();
        assert_eq!(w.scores(&pod, &nodes), Some(want), "{name}");
    }
}

// ---------------------------------------------------------------------------------------------
// scoring_test.go: TestPodTopologySpreadScore

fn hosts(names: &[&'static str]) -> Vec<N> {
    names
        .iter()
        .map(|&name| {
            let labels: Labels = match name {
                "node-a" => &[(HOSTNAME, "node-a")],
                "node-b" => &[(HOSTNAME, "node-b")],
                "node-c" => &[(HOSTNAME, "node-c")],
                "node-d" => &[(HOSTNAME, "node-d")],
                "node-x" => &[(HOSTNAME, "node-x")],
                "node-y" => &[(HOSTNAME, "node-y")],
                _ => unreachable!(),
            };
            n(name, labels)
        })
        .collect()
}

fn zoned(names: &[(&'static str, &'static str)]) -> Vec<N> {
    names
        .iter()
        .map(|&(name, zone)| {
            let labels: Labels = match (name, zone) {
                ("node-a", "zone1") => &[("zone", "zone1"), (HOSTNAME, "node-a")],
                ("node-b", "zone1") => &[("zone", "zone1"), (HOSTNAME, "node-b")],
                ("node-c", "zone2") => &[("zone", "zone2"), (HOSTNAME, "node-c")],
                ("node-d", "zone2") => &[("zone", "zone2"), (HOSTNAME, "node-d")],
                ("node-x", "zone2") => &[("zone", "zone2"), (HOSTNAME, "node-x")],
                ("node-y", "zone2") => &[("zone", "zone2"), (HOSTNAME, "node-y")],
                _ => unreachable!(),
            };
            n(name, labels)
        })
        .collect()
}

/// node-a, node-b with `foo` and node-c without, or (`tainted_c`) none with `foo` and node-c
/// tainted; each with its `node` label.
fn inclusion_abc(tainted_c: bool) -> Vec<N> {
    if tainted_c {
        vec![
            n("node-a", &[("node", "node-a")]),
            n("node-b", &[("node", "node-b")]),
            n("node-c", &[("node", "node-c")]).tainted(),
        ]
    } else {
        vec![
            n("node-a", &[("node", "node-a"), ("foo", "")]),
            n("node-b", &[("node", "node-b"), ("foo", "")]),
            n("node-c", &[("node", "node-c")]),
        ]
    }
}

#[test]
fn pod_topology_spread_score() {
    let p = || pod().foo();
    let on_host = |max_skew| p().spread(sc(max_skew, HOSTNAME, SA, foo_sel()));
    let pods_2_1_0_3 = || {
        [
            on("node-a", 2, p()),
            on("node-b", 1, p()),
            on("node-d", 3, p()),
        ]
        .concat()
    };
    let pods_4_3_2_1 = || {
        [
            on("node-a", 4, p()),
            on("node-b", 3, p()),
            on("node-c", 2, p()),
            on("node-d", 1, p()),
        ]
        .concat()
    };
    let different_selectors = |p: P| {
        p.spread(sc(1, "zone", SA, foo_sel()))
            .spread(sc(1, HOSTNAME, SA, bar_sel()))
    };
    let inclusion_pods = || {
        [
            on("node-a", 2, p()),
            on("node-b", 1, p()),
            on("node-c", 1, p()),
        ]
        .concat()
    };
    let abcd = || {
        zoned(&[
            ("node-a", "zone1"),
            ("node-b", "zone1"),
            ("node-c", "zone2"),
            ("node-d", "zone2"),
        ])
    };
    let cases = vec![
        ScoreCase {
            name: "one constraint on node, no existing pods",
            pod: on_host(1),
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            pods: vec![],
            want: vec![100, 100],
        },
        ScoreCase {
            name: "one constraint on node, only one node is candidate",
            pod: on_host(1),
            nodes: hosts(&["node-a"]),
            failed: hosts(&["node-b"]),
            pods: [on("node-a", 2, p()), on("node-b", 1, p())].concat(),
            want: vec![100],
        },
        ScoreCase {
            name: "one constraint on node, all nodes have the same number of matching pods",
            pod: on_host(1),
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            pods: vec![(p(), "node-a"), (p(), "node-b")],
            want: vec![100, 100],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates",
            pod: on_host(1),
            nodes: hosts(&["node-a", "node-b", "node-c", "node-d"]),
            failed: vec![],
            pods: pods_2_1_0_3(),
            want: vec![20, 60, 100, 0],
        },
        ScoreCase {
            name: "one constraint on node, null selector",
            pod: p().spread(sc(1, HOSTNAME, SA, None)),
            nodes: hosts(&["node-a", "node-b", "node-c", "node-d"]),
            failed: vec![],
            pods: pods_2_1_0_3(),
            want: vec![100, 100, 100, 100],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates, maxSkew=2",
            pod: on_host(2),
            nodes: hosts(&["node-a", "node-b", "node-c", "node-d"]),
            failed: vec![],
            pods: pods_2_1_0_3(),
            want: vec![33, 66, 100, 16],
        },
        ScoreCase {
            name: "one constraint on node, all 4 nodes are candidates, maxSkew=3",
            pod: on_host(3),
            nodes: hosts(&["node-a", "node-b", "node-c", "node-d"]),
            failed: vec![],
            pods: pods_4_3_2_1(),
            want: vec![44, 66, 77, 100],
        },
        // Not ported: "system defaulting, nodes don't have zone, pods match service" (system default constraints).
        ScoreCase {
            name: "one constraint on zone, 3 out of 4 nodes are candidates",
            pod: p().spread(sc(1, "zone", SA, foo_sel())),
            nodes: zoned(&[
                ("node-a", "zone1"),
                ("node-b", "zone1"),
                ("node-x", "zone2"),
            ]),
            failed: zoned(&[("node-y", "zone2")]),
            pods: [
                on("node-a", 4, p()),
                on("node-b", 2, p()),
                on("node-x", 1, p()),
                on("node-y", 3, p()),
            ]
            .concat(),
            want: vec![75, 75, 100],
        },
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors",
            pod: different_selectors(p().bar()),
            nodes: zoned(&[
                ("node-a", "zone1"),
                ("node-b", "zone1"),
                ("node-x", "zone2"),
                ("node-y", "zone2"),
            ]),
            failed: vec![],
            pods: vec![
                (p(), "node-a"),
                (p().bar(), "node-b"),
                (p(), "node-y"),
                (pod().bar(), "node-y"),
            ],
            want: vec![60, 20, 100, 60],
        },
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
            pod: different_selectors(p().bar()),
            nodes: zoned(&[
                ("node-a", "zone1"),
                ("node-b", "zone1"),
                ("node-x", "zone2"),
                ("node-y", "zone2"),
            ]),
            failed: vec![],
            pods: vec![
                (pod().bar(), "node-b"),
                (p(), "node-x"),
                (p().bar(), "node-y"),
            ],
            want: vec![100, 60, 40, 0],
        },
        ScoreCase {
            name: "existing pods in a different namespace do not count",
            pod: on_host(1),
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            pods: vec![
                (p().ns("ns1"), "node-a"),
                (p(), "node-a"),
                (p(), "node-b"),
                (p(), "node-b"),
            ],
            want: vec![100, 33],
        },
        ScoreCase {
            name: "terminating Pods should be excluded",
            pod: on_host(1),
            nodes: hosts(&["node-a", "node-b"]),
            failed: vec![],
            pods: vec![(p().terminating(), "node-a"), (p(), "node-b")],
            want: vec![100, 0],
        },
        // Not ported: "minDomains has no effect when ScheduleAnyway": Magma rejects the pod, as
        // the API server does (checked below).
        ScoreCase {
            name: "NodeAffinityPolicy ignored with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(nap(sc(1, "node", SA, foo_sel()), IGNORE)),
            nodes: inclusion_abc(false),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![66, 100, 100],
        },
        ScoreCase {
            name: "NodeAffinityPolicy ignored with nodeAffinity",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(nap(sc(1, "node", SA, foo_sel()), IGNORE)),
            nodes: inclusion_abc(false),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![66, 100, 100],
        },
        ScoreCase {
            name: "NodeTaintsPolicy ignored",
            pod: p().spread(sc(1, "node", SA, foo_sel())),
            nodes: inclusion_abc(true),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![66, 100, 100],
        },
        // Not ported: "matchLabelKeys ignored when feature gate disabled" (feature gate off).
        ScoreCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
            pod: p()
                .bar()
                .spread(mlk(sc(1, "zone", SA, empty_sel()), &["foo"]))
                .spread(mlk(sc(1, HOSTNAME, SA, empty_sel()), &["bar"])),
            nodes: abcd(),
            failed: vec![],
            pods: vec![
                (p(), "node-a"),
                (p().bar(), "node-b"),
                (p(), "node-c"),
                (pod().bar(), "node-c"),
            ],
            want: vec![60, 20, 60, 100],
        },
        ScoreCase {
            name: "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
            pod: p()
                .bar()
                .label("baz", "")
                .spread(sc(1, "zone", SA, foo_sel()))
                .spread(mlk(sc(1, HOSTNAME, SA, bar_sel()), &["baz"])),
            nodes: abcd(),
            failed: vec![],
            pods: vec![
                (p(), "node-a"),
                (p().bar().label("baz", ""), "node-b"),
                (p(), "node-c"),
                (pod().bar(), "node-c"),
                (pod().bar().label("baz", ""), "node-c"),
            ],
            want: vec![60, 20, 60, 100],
        },
    ];
    assert_eq!(cases.len(), 17);
    run_score_cases(cases);

    // "minDomains has no effect when ScheduleAnyway": not a valid pod (API validation), and
    // Magma's model rejects it.
    let mut w = World::new(&[]);
    let mut bad = p().spread(min_domains(sc(2, "node", SA, foo_sel()), 10)).0;
    bad.uid = "bad".into();
    bad.name = "bad".into();
    assert!(w.0.cache.compile_pod(&bad).is_err());
}

/// The upstream score cases in which Magma's normalising weight differs by design: upstream
/// sizes it from the candidate nodes (`filteredNodes`), Magma, which scores while it filters,
/// from every node the constraint counts (`plugins/pod_topology_spread.rs`). The two differ
/// when a node that failed another filter is still counted (`failedNodes`), or when a candidate
/// is not counted (a node the pod's node affinity or untolerated taints exclude, which upstream's
/// unit test keeps as a candidate because it runs the plugin alone; with the NodeAffinity and
/// TaintToleration filters on, as by default, no such node is feasible). Magma's values are
/// asserted; upstream's are in the comments.
#[test]
fn pod_topology_spread_score_where_domains_are_sized_differently() {
    let p = || pod().foo();
    let on_host = || p().spread(sc(1, HOSTNAME, SA, foo_sel()));
    let pods_4_2_1_3 = || {
        [
            on("node-a", 4, p()),
            on("node-b", 2, p()),
            on("node-x", 1, p()),
            on("node-y", 3, p()),
        ]
        .concat()
    };
    let inclusion_pods = || {
        [
            on("node-a", 2, p()),
            on("node-b", 1, p()),
            on("node-c", 1, p()),
        ]
        .concat()
    };
    let cases = vec![
        // Upstream: [33, 83, 100] (weight ln(3+2): 3 candidates; Magma counts node-y too).
        ScoreCase {
            name: "one constraint on node, 3 out of 4 nodes are candidates",
            pod: on_host(),
            nodes: hosts(&["node-a", "node-b", "node-x"]),
            failed: hosts(&["node-y"]),
            pods: pods_4_2_1_3(),
            want: vec![28, 71, 100],
        },
        // Upstream: [16, 0, 100] (2 counted candidates; Magma counts node-a, node-x, node-y).
        ScoreCase {
            name: "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
            pod: on_host(),
            nodes: vec![
                n("node-a", &[(HOSTNAME, "node-a")]),
                n("node-b", &[("n", "node-b")]),
                n("node-x", &[(HOSTNAME, "node-x")]),
            ],
            failed: hosts(&["node-y"]),
            pods: pods_4_2_1_3(),
            want: vec![33, 0, 100],
        },
        // Upstream: [100, 63] (hostname weight from 2 candidates; Magma: 4 nodes).
        ScoreCase {
            name: "two Constraints on zone and node, 2 out of 4 nodes are candidates",
            pod: p()
                .spread(sc(1, "zone", SA, foo_sel()))
                .spread(sc(1, HOSTNAME, SA, foo_sel())),
            nodes: zoned(&[("node-a", "zone1"), ("node-x", "zone2")]),
            failed: zoned(&[("node-b", "zone1"), ("node-y", "zone2")]),
            pods: [
                on("node-a", 2, p()),
                on("node-b", 1, p()),
                on("node-x", 2, p()),
                on("node-y", 4, p()),
            ]
            .concat(),
            want: vec![100, 66],
        },
        // Upstream: [50, 25, 100] (hostname weight from 3 candidates; Magma: 4 nodes).
        ScoreCase {
            name: "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
            pod: p().bar().spread(sc(1, "zone", SA, foo_sel())).spread(sc(
                1,
                HOSTNAME,
                SA,
                bar_sel(),
            )),
            nodes: zoned(&[
                ("node-a", "zone1"),
                ("node-b", "zone1"),
                ("node-x", "zone2"),
            ]),
            failed: zoned(&[("node-y", "zone2")]),
            pods: vec![
                (p(), "node-a"),
                (p().bar(), "node-b"),
                (p(), "node-y"),
                (pod().bar(), "node-y"),
            ],
            want: vec![60, 20, 100],
        },
        // Upstream: [0, 33, 100] (node-c is a candidate, so 3 domains; Magma counts 2).
        ScoreCase {
            name: "NodeAffinityPolicy honoed with labelSelectors",
            pod: p()
                .node_selector("foo", "")
                .spread(sc(1, "node", SA, foo_sel())),
            nodes: inclusion_abc(false),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![0, 66, 100],
        },
        // Upstream: [0, 33, 100], as above.
        ScoreCase {
            name: "NodeAffinityPolicy honoed with nodeAffinity",
            pod: p()
                .node_affinity_in("foo", &[""])
                .spread(sc(1, "node", SA, foo_sel())),
            nodes: inclusion_abc(false),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![0, 66, 100],
        },
        // Upstream: [0, 33, 100] (node-c, tainted, is a candidate; Magma does not count it).
        ScoreCase {
            name: "NodeTaintsPolicy honored",
            pod: p().spread(ntp(sc(1, "node", SA, foo_sel()), HONOR)),
            nodes: inclusion_abc(true),
            failed: vec![],
            pods: inclusion_pods(),
            want: vec![0, 66, 100],
        },
    ];
    assert_eq!(cases.len(), 7);
    run_score_cases(cases);
}
