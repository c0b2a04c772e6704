//! Cases ported from kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go` (Apache-2.0,
//! The Kubernetes Authors), tables `TestPostFilter`, `TestDryRunPreemption`,
//! `TestSelectBestCandidate`, `TestPodEligibleToPreemptOthers` and `TestPreempt`, run against
//! Magma's DefaultPreemption (`preemption`, `core::preempt`). Ported from the stored
//! master/1.37-dev copy (index id 3489822106, with the pod-group rows); its single-pod rows are
//! those of 1.34–1.36 (`notes/research-30-preemption.md` §0, §4).
//!
//! How each table is run:
//!
//! - `TestDryRunPreemption` calls upstream's `DryRunPreemption` on every node and compares the
//!   candidates (node, victims sorted by name, `NumPDBViolations`). Here the same question goes
//!   to [`preemption::plan`] one node at a time (`potential` = that node's slot) on a `Cache`
//!   holding the upstream nodes, pods and budgets; a `None` is "not a candidate". Each row is
//!   also run end to end on the `Sim` harness: the node preemption picks must be one of the
//!   candidates, with that candidate's victims.
//! - `TestPostFilter`, `TestSelectBestCandidate`, `TestPodEligibleToPreemptOthers` and
//!   `TestPreempt` run end to end on the `Sim` harness (one worker): the nodes, the pods bound
//!   to them and the budgets, then the preemptor; `settle`. Upstream's `NominatedNodeName` and
//!   victims are the `PreemptIntent`'s node and victims; upstream's PostFilter status message
//!   is what Magma appends to its filter message (`0/N nodes are unavailable: ... preemption:
//!   0/N nodes are available: ...`), asserted in full. The filter part is Magma's own (upstream's
//!   tables assert only the PostFilter part): its pod-count reason is Volcano's `node(s) pod
//!   number exceeded`, recorded besides the failure that ends a node's explanation, where
//!   kube-scheduler's NodeResourcesFit says `Too many pods`.
//!
//! Port conventions:
//! - units as upstream's: `small` = 100m/100 (bytes), `medium` 200m/200, `large` 300m/300,
//!   `veryLarge` 500m/500, `nodeRes` 200m/400; `st.MakeNode().Capacity(res)` is cpu and memory
//!   as given (0 when not given) and 32 pods unless `res` sets `pods`. Upstream's start times
//!   `epochTimeN` (`Unix(0, N)`, N nanoseconds) become N milliseconds (`started_unix_ms`): only
//!   their order matters. Priorities `neg` −100, `low` 0, `mid` 100, `high` 1000, `veryHigh`
//!   10000. Pods without `Req` request nothing.
//! - upstream's pods in the empty namespace and its unnamed budgets in the empty namespace are
//!   in `default` here (`mk_pod`'s namespace, and the budgets with them).
//! - `Terminating()` is `terminating: true`; the `DisruptionTarget=True/PreemptionByScheduler`
//!   condition is `preempted: true`; `PreemptNever` is `preemption_never`.
//! - `TestPostFilter` hands PostFilter an explicit node→status map; here the statuses come from
//!   Magma's real filters, so each node the map marks `Unschedulable` (U) must really be
//!   resolvable by removing pods, and each `UnschedulableAndUnresolvable` (UU) or absent node
//!   must fail for a reason no removal fixes (an untolerated taint, a node selector, a request
//!   above the node's allocatable). Rows whose inputs already produce the map are ported as
//!   they are. Three rows ("no candidate nodes found, ...") hand a U status to nodes whose
//!   allocatable is below the pod's request: upstream's own `NodeResourcesFit.Filter` reports
//!   such a node `UnschedulableAndUnresolvable` (`InsufficientResource.Unresolvable`), so with
//!   real filters upstream too would answer `Preemption is not helpful for scheduling` there.
//!   Those rows are ported twice: as given (asserting what the real filters lead to) and as a
//!   "resolvable" variant that keeps upstream's expected message, where the U nodes get cpu
//!   400m and a pod of the preemptor's priority holding 200m (still short after the lower pods
//!   go, but the request no longer exceeds the allocatable), and a `{pods: 1}` node with no
//!   lower-priority pod gets cpu 300m/memory 300 (so only its pod count rejects the pod).
//! - `TestPodEligibleToPreemptOthers` calls the eligibility check alone; here it is observed
//!   through the PostFilter outcome, so each row gets `node1` with room for one pod, taken by
//!   `p1` (upstream's `st.MakeNode()` has 32), and the preemptor needs that room: eligible rows
//!   preempt (or say why no node helps), ineligible ones answer upstream's message.
//!
//! Not ported (one line each):
//! - TestPostFilter "preemption result filtered out by extenders": scheduler extenders.
//! - TestPostFilter "only one node but failed with TestPlugin", "one failed with TestPlugin
//!   and the other pass": plugin-error injection (a PreFilter extension failing RemovePod).
//! - TestDryRunPreemption "a pod that does not fit on any node", "a pod that fits with no
//!   preemption", "a pod that fits on one node with no preemption", "get Unschedulable in the
//!   preemption phase when the filter plugins filtering the nodes": fake filter plugins
//!   (False/True/Match/FakeFilter return codes); and every row's `expectedNumFilterCalled`
//!   (filter call counts).
//! - TestDryRunPreemption "all nodes are possible candidates, but DefaultPreemptionArgs limits
//!   to 2", "some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
//!   "preemption offset across multiple scheduling cycles and wrap around", "preemption looks
//!   past numCandidates until a non-PDB violating node is found": custom
//!   `DefaultPreemptionArgs` (40 %, 1–2 nodes) with upstream's seeded random offset; Magma's
//!   limits are the defaults (10 %, 100) and its offset rotates.
//! - TestDryRunPreemption, TestSelectBestCandidate, TestPreempt "gang ..." / "workload: ..." /
//!   "single pod preemptor triggers atomic preemption of a distributed workload victim" /
//!   "distributed gang victim ...": pod groups (workload-aware preemption, mocked
//!   `CanPlacePods`).
//! - TestPreempt "Scheduler extenders allow only node1, otherwise node3 would have been
//!   chosen", "Scheduler extenders do not allow any preemption", "One scheduler extender allows
//!   only node1, the other returns error but ignorable. Only node1 would be chosen", "One
//!   scheduler extender allows only node1, but it is not interested in given pod, otherwise
//!   node1 would have been chosen": scheduler extenders.
//! - TestPreempt's checks of the PATCH and DELETE calls and the DisruptionTarget condition
//!   text, and its sync/async and async-API variants: the adapter's API calls, not the engine.
//! - TestCustomSelection, TestCustomOrdering: custom `IsEligiblePreemptor` /
//!   `MoreImportantVictim` hooks (Magma has none), most rows with pod groups.
//! - TestSelectVictimsOnDomain: a mocked `CanPlacePods` (blocking rules) in place of the
//!   filters, on the master-only domain API.
//!
//! After the eligibility rows comes one row derived from upstream's `PodEligibleToPreemptOthers`
//! source rather than its table (§1.3 of the notes): a nominated node that became
//! `UnschedulableAndUnresolvable` makes the pod eligible again even while its victims terminate.

use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::conf::Profile;
use magma_engine::core::{Input, StatusReason};
use magma_engine::model::{
    LabelSelectorInput, NodeInput, PodAffinityInput, PodAffinityTermInput, PodInput,
    SelectorRequirementInput, TaintInput, TopologySpreadInput,
};
use magma_engine::pdb::{PdbChange, PdbInput};
use magma_engine::preemption;
use magma_engine::testing::{Sim, bound, mk_pod};
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// Upstream's constants

const NEG: i32 = -100;
const LOW: i32 = 0;
const MID: i32 = 100;
const HIGH: i32 = 1000;
const VERY_HIGH: i32 = 10_000;

/// (cpu, memory) as upstream's resource maps spell them.
type Res = (&'static str, &'static str);
const SMALL: Res = ("100m", "100");
const MEDIUM: Res = ("200m", "200");
const LARGE: Res = ("300m", "300");
const VERY_LARGE: Res = ("500m", "500");
/// TestPostFilter's `nodeRes`.
const NODE_RES: Res = ("200m", "400");

/// `LabelKeyIsViolatingPDB` and its values.
const VIOLATING_KEY: &str = "test.kubernetes.io/is-violating-pdb";
const VIOLATING: &str = "violating";
const NON_VIOLATING: &str = "non-violating";

const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
const NEVER: &str = "not eligible due to preemptionPolicy=Never.";
const TERMINATING: &str = "not eligible due to a terminating pod on the nominated node.";

/// A taint no pod here tolerates: the port's way to an `UnschedulableAndUnresolvable` node.
const TAINT: (&str, &str) = ("example.com/unresolvable", "yes");
const TAINTED: &str = "node(s) had untolerated taint {example.com/unresolvable: yes}";

/// Magma's pod-count reason in its filter message (Volcano's text, recorded besides the
/// failure that ends a node's explanation; kube-scheduler's NodeResourcesFit says `Too many
/// pods`). The filter part of the messages is Magma's own (module doc).
const POD_COUNT: &str = "node(s) pod number exceeded";

// ---------------------------------------------------------------------------------------------
// Builders (upstream's `st.MakeNode()` and `st.MakePod()`)

/// A node as `st.MakeNode()` builds it.
#[derive(Clone)]
struct N(NodeInput);

/// `st.MakeNode().Name(spec)`; a spec `name/zone[/region]` also labels the node `hostname`,
/// `zone` and `region` (TestDryRunPreemption's and TestPreempt's `labelKeys`).
fn make_node(spec: &str) -> N {
    let parts: Vec<&str> = spec.split('/').collect();
    let labels = if parts.len() > 1 {
        ["hostname", "zone", "region"]
            .iter()
            .zip(&parts)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    } else {
        Vec::new()
    };
    N(NodeInput {
        name: parts[0].into(),
        labels,
        allocatable: vec![
            ("cpu".into(), "0".into()),
            ("memory".into(), "0".into()),
            ("pods".into(), "32".into()),
        ],
        ready: true,
        ..Default::default()
    })
}

impl N {
    fn set(mut self, resource: &str, q: &str) -> N {
        for (r, v) in &mut self.0.allocatable {
            if r == resource {
                *v = q.into();
            }
        }
        self
    }

    /// `Capacity(res)` (cpu and memory).
    fn capacity(self, (cpu, mem): Res) -> N {
        self.set("cpu", cpu).set("memory", mem)
    }

    /// `Capacity({pods: n})`.
    fn pods(self, n: u32) -> N {
        self.set("pods", &n.to_string())
    }

    /// The hostname label TestDryRunPreemption gives every node.
    fn hostname(mut self) -> N {
        let name = self.0.name.clone();
        self.0.labels.push(("hostname".into(), name));
        self
    }

    fn tainted(mut self) -> N {
        self.0.taints.push(TaintInput {
            key: TAINT.0.into(),
            value: TAINT.1.into(),
            effect: "NoSchedule".into(),
        });
        self
    }
}

/// A pod as `st.MakePod()` builds it.
#[derive(Clone)]
struct P(PodInput);

/// `st.MakePod().Name(name).Priority(priority)`: namespace `default`, uid `uid-<name>`, one
/// container requesting nothing.
fn make_pod(name: &str, priority: i32) -> P {
    let mut p = mk_pod(name, "0", "0");
    p.containers[0].requests.clear();
    p.priority = priority;
    P(p)
}

impl P {
    /// `Req(res)`.
    fn req(mut self, (cpu, mem): Res) -> P {
        self.0.containers[0].requests =
            vec![("cpu".into(), cpu.into()), ("memory".into(), mem.into())];
        self
    }

    /// `Node(name)`: bound there, running.
    fn node(self, name: &str) -> P {
        P(bound(self.0, name))
    }

    /// `StartTime(epochTimeN)`, N in milliseconds.
    fn start(mut self, n: i64) -> P {
        self.0.started_unix_ms = Some(n);
        self
    }

    fn label(mut self, k: &str, v: &str) -> P {
        self.0.labels.push((k.into(), v.into()));
        self
    }

    /// `PreemptionPolicy(v1.PreemptNever)`.
    fn never(mut self) -> P {
        self.0.preemption_never = true;
        self
    }

    /// `NominatedNodeName(name)`.
    fn nominated(mut self, name: &str) -> P {
        self.0.nominated_node_name = Some(name.into());
        self
    }

    /// `Terminating()`.
    fn terminating(mut self) -> P {
        self.0.terminating = true;
        self
    }

    /// `Condition(v1.DisruptionTarget, v1.ConditionTrue, v1.PodReasonPreemptionByScheduler)`.
    fn disruption_target(mut self) -> P {
        self.0.preempted = true;
        self
    }

    /// `PodAntiAffinityExists(key, topologyKey, st.PodAntiAffinityWithRequiredReq)`.
    fn anti_affinity_exists(mut self, key: &str, topology_key: &str) -> P {
        self.0.pod_affinity = Some(PodAffinityInput {
            required_anti: vec![PodAffinityTermInput {
                label_selector: Some(exists(key)),
                topology_key: topology_key.into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        self
    }

    /// `SpreadConstraint(maxSkew, topologyKey, DoNotSchedule, MakeLabelSelector().Exists(key))`.
    fn spread(mut self, max_skew: i32, topology_key: &str, key: &str) -> P {
        self.0.topology_spread.push(TopologySpreadInput {
            max_skew,
            topology_key: topology_key.into(),
            when_unsatisfiable: "DoNotSchedule".into(),
            label_selector: Some(exists(key)),
            ..Default::default()
        });
        self
    }

    fn uid(&self) -> String {
        self.0.uid.clone()
    }
}

fn exists(key: &str) -> LabelSelectorInput {
    LabelSelectorInput {
        match_labels: vec![],
        match_expressions: vec![SelectorRequirementInput {
            key: key.into(),
            operator: "Exists".into(),
            values: vec![],
        }],
    }
}

/// A budget in `default` selecting `key=value`, with its status.
fn pdb(name: &str, key: &str, value: &str, allowed: i32, disrupted: &[&str]) -> PdbInput {
    PdbInput {
        namespace: "default".into(),
        name: name.into(),
        selector: Some(LabelSelectorInput {
            match_labels: vec![(key.into(), value.into())],
            match_expressions: vec![],
        }),
        disruptions_allowed: allowed,
        disrupted: disrupted.iter().map(|d| d.to_string()).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Running a case

/// The cluster on the `Sim` harness, the preemptor added last and everything settled.
fn run(nodes: &[N], pods: &[P], pdbs: &[PdbInput], preemptor: &P) -> Sim {
    let mut c = Sim::workers(1);
    for n in nodes {
        c.add_node(n.0.clone());
    }
    for p in pods {
        c.add_pod(p.0.clone());
    }
    for b in pdbs {
        c.h.input(Input::Pdb(PdbChange::Apply(b.clone())));
    }
    c.add_pod(preemptor.0.clone());
    c.settle();
    c
}

/// Upstream's PostFilter result: the nominated node and the victims (sorted by name) of the
/// first preemption the preemptor made, if any.
fn nominated(c: &Sim, preemptor: &P) -> Option<(String, Vec<String>)> {
    let p = c
        .preemptions
        .iter()
        .find(|p| *p.preemptor.uid == *preemptor.0.uid)?;
    let mut victims: Vec<String> = p.victims.iter().map(|v| v.name.to_string()).collect();
    victims.sort();
    Some((p.node.to_string(), victims))
}

/// The last unschedulable message written for the preemptor.
fn message(c: &Sim, preemptor: &P) -> Option<String> {
    c.statuses
        .iter()
        .rev()
        .find(|s| *s.uid == *preemptor.0.uid)
        .map(|s| {
            assert_eq!(s.reason, StatusReason::Unschedulable);
            s.message.to_string()
        })
}

fn names(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// Upstream's `PostFilterResultWithNominatedNode(node)` with `Success`: the preemptor is
/// nominated to `node` with these victims, and once they are gone it is bound there.
fn assert_preempts(c: &Sim, preemptor: &P, node: &str, victims: &[&str]) {
    assert_eq!(
        nominated(c, preemptor),
        Some((node.to_owned(), names(victims))),
        "nominated node and victims"
    );
    assert_eq!(c.preemptions.len(), 1, "one preemption");
    assert_eq!(
        c.node_of(&preemptor.uid()),
        Some(node),
        "bound where it was nominated once its victims were gone"
    );
}

/// Upstream's result without a nomination and the status `preemption: <why>`: nothing is
/// preempted, and Magma's message is its filter message `filtered` then `preemption: <why>`.
fn assert_no_preemption(c: &Sim, preemptor: &P, filtered: &str, why: &str) {
    assert_eq!(nominated(c, preemptor), None, "no preemption");
    assert_eq!(c.node_of(&preemptor.uid()), None, "still pending");
    assert_eq!(
        message(c, preemptor).as_deref(),
        Some(format!("{filtered} preemption: {why}").as_str())
    );
}

// ---------------------------------------------------------------------------------------------
// TestPostFilter

/// `onePodRes`: a node with room for one pod and no cpu or memory.
fn one_pod(name: &str) -> N {
    make_node(name).pods(1)
}

#[test]
fn post_filter_pod_with_higher_priority_can_be_made_schedulable() {
    let p = make_pod("p", HIGH);
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_preempts(&c, &p, "node1", &["p1"]);
}

#[test]
fn post_filter_pod_with_tied_priority_is_still_unschedulable() {
    let p = make_pod("p", LOW);
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/1 nodes are unavailable: 1 {POD_COUNT}."),
        &format!("0/1 nodes are available: 1 {NO_VICTIMS}."),
    );
}

/// node1 is `UnschedulableAndUnresolvable` in upstream's map: here an untolerated taint.
#[test]
fn post_filter_preemption_should_respect_filtered_nodes_statuses() {
    let p = make_pod("p", HIGH);
    let c = run(
        &[one_pod("node1").tainted()],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/1 nodes are unavailable: 1 {TAINTED}, 1 {POD_COUNT}."),
        &format!("0/1 nodes are available: 1 {NOT_HELPFUL}."),
    );
}

/// node1 is absent from upstream's map (absent means `UnschedulableAndUnresolvable`): here the
/// pod's node selector excludes it.
#[test]
fn post_filter_preemption_should_respect_absent_node_to_status_reader_entry() {
    let mut p = make_pod("p", HIGH);
    p.0.node_selector = vec![("example.com/pool".into(), "none".into())];
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!(
            "0/1 nodes are unavailable: 1 node(s) didn't match Pod's node affinity/selector, 1 {POD_COUNT}."
        ),
        &format!("0/1 nodes are available: 1 {NOT_HELPFUL}."),
    );
}

#[test]
fn post_filter_pod_can_be_made_schedulable_on_one_node() {
    let p = make_pod("p", MID);
    let c = run(
        &[one_pod("node1"), one_pod("node2")],
        &[
            make_pod("p1", HIGH).node("node1"),
            make_pod("p2", LOW).node("node2"),
        ],
        &[],
        &p,
    );
    assert_preempts(&c, &p, "node2", &["p2"]);
}

/// node1: one violation and a `high` victim; node2: one violation and a `mid` victim.
#[test]
fn post_filter_pod_can_be_made_schedulable_on_min_highest_priority_node() {
    let p = make_pod("p", VERY_HIGH);
    let c = run(
        &[one_pod("node1"), one_pod("node2")],
        &[
            make_pod("p1", HIGH)
                .label(VIOLATING_KEY, NON_VIOLATING)
                .node("node1"),
            make_pod("p2", LOW)
                .label(VIOLATING_KEY, VIOLATING)
                .node("node1"),
            make_pod("p3", MID)
                .label(VIOLATING_KEY, VIOLATING)
                .node("node2"),
        ],
        &[
            // MinAvailable 100%: the disruption controller allows none.
            pdb("violating-pdb", VIOLATING_KEY, VIOLATING, 0, &[]),
            pdb(
                "non-violating-pdb",
                VIOLATING_KEY,
                NON_VIOLATING,
                i32::MAX,
                &[],
            ),
        ],
        &p,
    );
    assert_preempts(&c, &p, "node2", &["p3"]);
}

/// As given: nodes of 200m and a 300m pod. Upstream's map calls both nodes `Unschedulable`
/// (its expected `2 Insufficient cpu`); their allocatable is below the request, which real
/// filters (upstream's and Magma's) call unresolvable.
#[test]
fn post_filter_no_candidate_nodes_found_no_enough_resource_after_removing_low_priority_pods() {
    let p = make_pod("p", HIGH).req(LARGE);
    let c = run(
        &[
            make_node("node1").capacity(NODE_RES),
            make_node("node2").capacity(NODE_RES),
        ],
        &[
            make_pod("p1", LOW).node("node1"),
            make_pod("p2", LOW).node("node2"),
        ],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        "0/2 nodes are unavailable: 2 Insufficient cpu.",
        &format!("0/2 nodes are available: 2 {NOT_HELPFUL}."),
    );
}

/// A node upstream's map calls `Unschedulable` for lack of cpu, with real filters: 400m of cpu,
/// 200m of it held by a pod of the preemptor's priority, and the low pod `low` (module doc).
fn short_node(name: &str, holder: &str, low: &str) -> (N, [P; 2]) {
    (
        make_node(name).capacity(("400m", "400")),
        [
            make_pod(holder, HIGH).req(("200m", "100")).node(name),
            make_pod(low, LOW).node(name),
        ],
    )
}

/// The resolvable variant: still short of cpu once the low pods go.
#[test]
fn post_filter_no_candidate_nodes_found_no_enough_resource_resolvable_variant() {
    let p = make_pod("p", HIGH).req(LARGE);
    let (n1, p1) = short_node("node1", "h1", "p1");
    let (n2, p2) = short_node("node2", "h2", "p2");
    let c = run(&[n1, n2], &[p1, p2].concat(), &[], &p);
    assert_no_preemption(
        &c,
        &p,
        "0/2 nodes are unavailable: 2 Insufficient cpu.",
        "0/2 nodes are available: 2 Insufficient cpu.",
    );
}

/// As given: every node's allocatable is below the 300m request (node1 and node3 have none),
/// which real filters call unresolvable (module doc); upstream's map says `Unschedulable`.
#[test]
fn post_filter_no_candidate_nodes_found_with_mixed_reasons() {
    let p = make_pod("p", HIGH).req(LARGE);
    let c = run(
        &[
            one_pod("node1"),
            make_node("node2").capacity(NODE_RES),
            one_pod("node3"),
        ],
        &[
            make_pod("p1", HIGH).node("node1"),
            make_pod("p2", LOW).node("node2"),
            make_pod("p3", HIGH).node("node3"),
        ],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        "0/3 nodes are unavailable: 2 Insufficient memory, 3 Insufficient cpu.",
        &format!("0/3 nodes are available: 3 {NOT_HELPFUL}."),
    );
}

/// The resolvable variant: node1 and node3 can hold the pod but for their one pod slot, taken
/// by a pod of its priority; node2 stays short of cpu once its low pod goes.
#[test]
fn post_filter_no_candidate_nodes_found_with_mixed_reasons_resolvable_variant() {
    let p = make_pod("p", HIGH).req(LARGE);
    let (n2, p2) = short_node("node2", "h2", "p2");
    let c = run(
        &[
            one_pod("node1").capacity(LARGE),
            n2,
            one_pod("node3").capacity(LARGE),
        ],
        &[
            vec![make_pod("p1", HIGH).node("node1")],
            p2.to_vec(),
            vec![make_pod("p3", HIGH).node("node3")],
        ]
        .concat(),
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/3 nodes are unavailable: 1 Insufficient cpu, 2 {POD_COUNT}."),
        &format!("0/3 nodes are available: 1 Insufficient cpu, 2 {NO_VICTIMS}."),
    );
}

/// As given: four nodes of 200m; upstream's map: node1 and node2 `Unschedulable`, node4
/// `UnschedulableAndUnresolvable`, node3 absent. With real filters all four are unresolvable
/// (the 300m request exceeds their allocatable).
#[test]
fn post_filter_no_candidate_nodes_found_with_mixed_reason_2_unresolvable_nodes() {
    let p = make_pod("p", HIGH).req(LARGE);
    let c = run(
        &[
            make_node("node1").capacity(NODE_RES),
            make_node("node2").capacity(NODE_RES),
            make_node("node3").capacity(NODE_RES),
            make_node("node4").capacity(NODE_RES),
        ],
        &[
            make_pod("p1", LOW).node("node1"),
            make_pod("p2", LOW).node("node2"),
        ],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        "0/4 nodes are unavailable: 4 Insufficient cpu.",
        &format!("0/4 nodes are available: 4 {NOT_HELPFUL}."),
    );
}

/// The resolvable variant: node1 and node2 as in the other variants; node3 and node4 keep
/// `nodeRes`, below the request (unresolvable, as upstream's map has them).
#[test]
fn post_filter_no_candidate_nodes_found_with_mixed_reason_2_unresolvable_nodes_resolvable_variant()
{
    let p = make_pod("p", HIGH).req(LARGE);
    let (n1, p1) = short_node("node1", "h1", "p1");
    let (n2, p2) = short_node("node2", "h2", "p2");
    let c = run(
        &[
            n1,
            n2,
            make_node("node3").capacity(NODE_RES),
            make_node("node4").capacity(NODE_RES),
        ],
        &[p1, p2].concat(),
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        "0/4 nodes are unavailable: 4 Insufficient cpu.",
        &format!("0/4 nodes are available: 2 Insufficient cpu, 2 {NOT_HELPFUL}."),
    );
}

// ---------------------------------------------------------------------------------------------
// TestDryRunPreemption

/// One candidate: the node, its victims sorted by name, and how many violate a budget.
type Candidate = (String, Vec<String>, usize);

fn cand(node: &str, victims: &[&str], violations: usize) -> Candidate {
    (node.to_owned(), names(victims), violations)
}

/// Upstream's `DryRunPreemption` over every node: [`preemption::plan`] asked of each node alone.
fn dry_run(nodes: &[N], pods: &[P], pdbs: &[PdbInput], preemptor: &P) -> Vec<Candidate> {
    let mut cache = Cache::new(
        Arc::new(BindVersions::default()),
        Arc::new(Profile::default()),
    );
    cache.enable_pod_index();
    for n in nodes {
        cache.apply_node(&n.0, 0).expect("valid node");
    }
    for p in pods {
        let c = cache.compile_pod(&p.0).expect("valid pod");
        cache.apply_bound_pod(&c, p.0.node_name.as_deref().expect("bound"), false);
    }
    for b in pdbs {
        assert!(cache.apply_pdb(PdbChange::Apply(b.clone())).is_empty());
    }
    cache.publish();
    let pod = cache.compile_pod(&preemptor.0).expect("valid preemptor");
    let mut out: Vec<Candidate> = nodes
        .iter()
        .filter_map(|n| {
            let slot = cache.node_slot(&n.0.name).expect("node");
            let plan = preemption::plan(&cache, &pod, None, None, &[slot], 0)?;
            let mut victims: Vec<String> =
                plan.victims.iter().map(|v| v.name.to_string()).collect();
            victims.sort();
            Some((plan.node.to_string(), victims, plan.pdb_violations))
        })
        .collect();
    out.sort();
    out
}

/// A TestDryRunPreemption row: the candidates as upstream's, and end to end the node chosen is
/// one of them with its victims (`fits_now`: the preemptor fits some node as it is, so end to
/// end it is bound there without preempting).
fn check_dry_run(
    nodes: &[N],
    pods: &[P],
    pdbs: &[PdbInput],
    preemptor: &P,
    want: &[Candidate],
    fits_now: Option<&str>,
) {
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(dry_run(nodes, pods, pdbs, preemptor), want, "candidates");
    let c = run(nodes, pods, pdbs, preemptor);
    match (fits_now, nominated(&c, preemptor)) {
        (Some(node), got) => {
            assert_eq!(got, None, "no preemption: it fits {node}");
            assert_eq!(c.node_of(&preemptor.uid()), Some(node));
        }
        (None, None) => assert!(want.is_empty(), "end to end no preemption, want {want:?}"),
        (None, Some((node, victims))) => assert!(
            want.iter().any(|(n, v, _)| *n == node && *v == victims),
            "end to end {node} {victims:?} is not a candidate of {want:?}"
        ),
    }
}

/// `nodeNames` of the row: `st.MakeNode().Capacity(veryLargeRes)`, labelled by name.
fn dry_nodes(specs: &[&str]) -> Vec<N> {
    specs
        .iter()
        .map(|s| {
            let n = make_node(s).capacity(VERY_LARGE);
            if s.contains('/') { n } else { n.hostname() }
        })
        .collect()
}

#[test]
fn dry_run_a_pod_that_fits_on_both_nodes_when_lower_priority_pods_are_preempted() {
    check_dry_run(
        &dry_nodes(&["node1", "node2"]),
        &[
            make_pod("p1", MID).req(LARGE).node("node1"),
            make_pod("p2", MID).req(LARGE).node("node2"),
        ],
        &[],
        &make_pod("p", HIGH).req(LARGE),
        &[cand("node1", &["p1"], 0), cand("node2", &["p2"], 0)],
        None,
    );
}

#[test]
fn dry_run_a_pod_that_would_fit_on_the_nodes_but_other_pods_running_are_higher_priority() {
    let p = make_pod("p", LOW).req(LARGE);
    let nodes = dry_nodes(&["node1", "node2"]);
    let pods = [
        make_pod("p1", MID).req(LARGE).node("node1"),
        make_pod("p2", MID).req(LARGE).node("node2"),
    ];
    check_dry_run(&nodes, &pods, &[], &p, &[], None);
    let c = run(&nodes, &pods, &[], &p);
    assert_no_preemption(
        &c,
        &p,
        "0/2 nodes are unavailable: 2 Insufficient cpu, 2 Insufficient memory.",
        &format!("0/2 nodes are available: 2 {NO_VICTIMS}."),
    );
}

#[test]
fn dry_run_medium_priority_pod_is_preempted_but_lower_priority_one_stays_as_it_is_small() {
    check_dry_run(
        &dry_nodes(&["node1", "node2"]),
        &[
            make_pod("p1.1", LOW).req(SMALL).node("node1"),
            make_pod("p1.2", MID).req(LARGE).node("node1"),
            make_pod("p2", MID).req(LARGE).node("node2"),
        ],
        &[],
        &make_pod("p", HIGH).req(LARGE),
        &[cand("node1", &["p1.2"], 0), cand("node2", &["p2"], 0)],
        None,
    );
}

#[test]
fn dry_run_mixed_priority_pods_are_preempted() {
    check_dry_run(
        &dry_nodes(&["node1", "node2"]),
        &[
            make_pod("p1.1", MID).req(SMALL).node("node1"),
            make_pod("p1.2", LOW).req(SMALL).node("node1"),
            make_pod("p1.3", MID).req(MEDIUM).node("node1"),
            make_pod("p1.4", HIGH).req(SMALL).node("node1"),
            make_pod("p2", HIGH).req(LARGE).node("node2"),
        ],
        &[],
        &make_pod("p", HIGH).req(LARGE),
        &[cand("node1", &["p1.2", "p1.3"], 0)],
        None,
    );
}

#[test]
fn dry_run_mixed_priority_pods_are_preempted_pick_later_start_time_one_when_priorities_are_equal() {
    check_dry_run(
        &dry_nodes(&["node1", "node2"]),
        &[
            make_pod("p1.1", LOW).req(SMALL).start(5).node("node1"),
            make_pod("p1.2", LOW).req(SMALL).start(4).node("node1"),
            make_pod("p1.3", MID).req(MEDIUM).start(3).node("node1"),
            make_pod("p1.4", HIGH).req(SMALL).start(2).node("node1"),
            make_pod("p2", HIGH).req(LARGE).start(1).node("node2"),
        ],
        &[],
        &make_pod("p", HIGH).req(LARGE),
        &[cand("node1", &["p1.1", "p1.3"], 0)],
        None,
    );
}

/// Upstream dry-runs every node; end to end the preemptor fits node2 as it is.
#[test]
fn dry_run_pod_with_anti_affinity_is_preempted() {
    check_dry_run(
        &dry_nodes(&["node1", "node2"]),
        &[
            make_pod("p1.1", LOW)
                .label("foo", "")
                .req(SMALL)
                .anti_affinity_exists("foo", "hostname")
                .node("node1"),
            make_pod("p1.2", MID).req(SMALL).node("node1"),
            make_pod("p1.3", HIGH).req(SMALL).node("node1"),
            make_pod("p2", HIGH).req(SMALL).node("node2"),
        ],
        &[],
        &make_pod("p", HIGH).label("foo", "").req(SMALL),
        &[cand("node1", &["p1.1"], 0)],
        Some("node2"),
    );
}

#[test]
fn dry_run_preemption_to_resolve_pod_topology_spread_filter_failure() {
    check_dry_run(
        &dry_nodes(&["node-a/zone1", "node-b/zone1", "node-x/zone2"]),
        &[
            make_pod("pod-a1", MID).label("foo", "").node("node-a"),
            make_pod("pod-a2", LOW).label("foo", "").node("node-a"),
            make_pod("pod-b1", LOW).label("foo", "").node("node-b"),
            make_pod("pod-x1", HIGH).label("foo", "").node("node-x"),
            make_pod("pod-x2", HIGH).label("foo", "").node("node-x"),
        ],
        &[],
        &make_pod("p", HIGH)
            .label("foo", "")
            .spread(1, "zone", "foo")
            .spread(1, "hostname", "foo"),
        &[
            cand("node-a", &["pod-a2"], 0),
            cand("node-b", &["pod-b1"], 0),
        ],
        None,
    );
}

/// Two `mid` `medium` pods labelled `app=foo` on node1, a `high` `veryLarge` preemptor.
fn pdb_row(extra: bool, allowed: i32, disrupted: &[&str], want: Candidate) {
    let mut pods = vec![
        make_pod("p1.1", MID)
            .label("app", "foo")
            .req(MEDIUM)
            .node("node1"),
        make_pod("p1.2", MID)
            .label("app", "foo")
            .req(MEDIUM)
            .node("node1"),
    ];
    if extra {
        pods.push(
            make_pod("p1.3", MID)
                .label("app", "foo")
                .req(MEDIUM)
                .node("node1"),
        );
    }
    check_dry_run(
        &dry_nodes(&["node1"]),
        &pods,
        &[pdb("pdb", "app", "foo", allowed, disrupted)],
        &make_pod("p", HIGH).req(VERY_LARGE),
        &[want],
        None,
    );
}

#[test]
fn dry_run_preemption_with_violation_of_same_pdb() {
    pdb_row(false, 1, &[], cand("node1", &["p1.1", "p1.2"], 1));
}

#[test]
fn dry_run_pdb_with_pod_whose_eviction_was_processed_the_victim_doesnt_belong_to_disrupted_pods() {
    pdb_row(false, 1, &["p2"], cand("node1", &["p1.1", "p1.2"], 1));
}

#[test]
fn dry_run_pdb_with_pod_whose_eviction_was_processed_the_victim_belongs_to_disrupted_pods() {
    pdb_row(false, 1, &["p1.2"], cand("node1", &["p1.1", "p1.2"], 0));
}

#[test]
fn dry_run_pdb_the_victim_which_belongs_to_disrupted_pods_is_treated_as_non_violating() {
    pdb_row(
        true,
        1,
        &["p1.3"],
        cand("node1", &["p1.1", "p1.2", "p1.3"], 1),
    );
}

// ---------------------------------------------------------------------------------------------
// TestSelectBestCandidate: nodes `veryLarge`, the preemptor `veryLarge` (every lower-priority
// pod is a victim), no budgets.

fn check_best(node_names: &[&str], pods: &[P], preemptor_priority: i32, want: &str) {
    let nodes: Vec<N> = node_names
        .iter()
        .map(|n| make_node(n).capacity(VERY_LARGE))
        .collect();
    let p = make_pod("p", preemptor_priority).req(VERY_LARGE);
    let c = run(&nodes, pods, &[], &p);
    let got = nominated(&c, &p).map(|(n, _)| n);
    assert_eq!(got.as_deref(), Some(want), "the node picked");
}

#[test]
fn select_best_node_with_min_highest_priority_pod_is_picked() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(MEDIUM).start(0).node("node1"),
            make_pod("p1.2", MID).req(LARGE).start(0).node("node1"),
            make_pod("p2.1", MID).req(MEDIUM).start(0).node("node2"),
            make_pod("p2.2", LOW).req(MEDIUM).start(0).node("node2"),
            make_pod("p3.1", LOW).req(MEDIUM).start(0).node("node3"),
            make_pod("p3.2", LOW).req(MEDIUM).start(0).node("node3"),
        ],
        HIGH,
        "node3",
    );
}

#[test]
fn select_best_when_highest_priorities_are_the_same_minimum_sum_of_priorities_is_picked() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(MEDIUM).start(0).node("node1"),
            make_pod("p1.2", MID).req(LARGE).start(0).node("node1"),
            make_pod("p2.1", MID).req(LARGE).start(0).node("node2"),
            make_pod("p2.2", LOW).req(MEDIUM).start(0).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(0).node("node3"),
            make_pod("p3.2", MID).req(MEDIUM).start(0).node("node3"),
        ],
        HIGH,
        "node2",
    );
}

#[test]
fn select_best_when_highest_priority_and_sum_are_the_same_minimum_number_of_pods_is_picked() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(SMALL).start(0).node("node1"),
            make_pod("p1.2", NEG).req(SMALL).start(0).node("node1"),
            make_pod("p1.3", MID).req(SMALL).start(0).node("node1"),
            make_pod("p1.4", NEG).req(SMALL).start(0).node("node1"),
            make_pod("p2.1", MID).req(LARGE).start(0).node("node2"),
            make_pod("p2.2", NEG).req(MEDIUM).start(0).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(0).node("node3"),
            make_pod("p3.2", NEG).req(SMALL).start(0).node("node3"),
            make_pod("p3.3", LOW).req(SMALL).start(0).node("node3"),
        ],
        HIGH,
        "node2",
    );
}

#[test]
fn select_best_sum_of_adjusted_priorities_is_considered() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(SMALL).start(0).node("node1"),
            make_pod("p1.2", NEG).req(SMALL).start(0).node("node1"),
            make_pod("p1.3", NEG).req(SMALL).start(0).node("node1"),
            make_pod("p2.1", MID).req(LARGE).start(0).node("node2"),
            make_pod("p2.2", NEG).req(MEDIUM).start(0).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(0).node("node3"),
            make_pod("p3.2", NEG).req(SMALL).start(0).node("node3"),
            make_pod("p3.3", LOW).req(SMALL).start(0).node("node3"),
        ],
        HIGH,
        "node2",
    );
}

#[test]
fn select_best_non_overlapping_lowest_high_priority_sum_priorities_and_number_of_pods() {
    check_best(
        &["node1", "node2", "node3", "node4"],
        &[
            make_pod("p1.1", MID).req(SMALL).start(0).node("node1"),
            make_pod("p1.2", LOW).req(SMALL).start(0).node("node1"),
            make_pod("p1.3", LOW).req(SMALL).start(0).node("node1"),
            make_pod("p2.1", HIGH).req(LARGE).start(0).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(0).node("node3"),
            make_pod("p3.2", LOW).req(SMALL).start(0).node("node3"),
            make_pod("p3.3", LOW).req(SMALL).start(0).node("node3"),
            make_pod("p3.4", LOW).req(MEDIUM).start(0).node("node3"),
            make_pod("p4.1", MID).req(MEDIUM).start(0).node("node4"),
            make_pod("p4.2", MID).req(SMALL).start(0).node("node4"),
            make_pod("p4.3", MID).req(SMALL).start(0).node("node4"),
            make_pod("p4.4", NEG).req(SMALL).start(0).node("node4"),
        ],
        VERY_HIGH,
        "node1",
    );
}

#[test]
fn select_best_same_priority_same_number_of_victims_different_start_time_for_each_nodes_pod() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(MEDIUM).start(2).node("node1"),
            make_pod("p1.2", MID).req(MEDIUM).start(2).node("node1"),
            make_pod("p2.1", MID).req(MEDIUM).start(3).node("node2"),
            make_pod("p2.2", MID).req(MEDIUM).start(3).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(1).node("node3"),
            make_pod("p3.2", MID).req(MEDIUM).start(1).node("node3"),
        ],
        HIGH,
        "node2",
    );
}

#[test]
fn select_best_same_priority_same_number_of_victims_different_start_time_for_all_pods() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", MID).req(MEDIUM).start(4).node("node1"),
            make_pod("p1.2", MID).req(MEDIUM).start(2).node("node1"),
            make_pod("p2.1", MID).req(MEDIUM).start(5).node("node2"),
            make_pod("p2.2", MID).req(MEDIUM).start(1).node("node2"),
            make_pod("p3.1", MID).req(MEDIUM).start(3).node("node3"),
            make_pod("p3.2", MID).req(MEDIUM).start(6).node("node3"),
        ],
        HIGH,
        "node3",
    );
}

#[test]
fn select_best_different_priority_same_number_of_victims_different_start_time_for_all_pods() {
    check_best(
        &["node1", "node2", "node3"],
        &[
            make_pod("p1.1", LOW).req(MEDIUM).start(4).node("node1"),
            make_pod("p1.2", MID).req(MEDIUM).start(2).node("node1"),
            make_pod("p2.1", MID).req(MEDIUM).start(6).node("node2"),
            make_pod("p2.2", LOW).req(MEDIUM).start(1).node("node2"),
            make_pod("p3.1", LOW).req(MEDIUM).start(3).node("node3"),
            make_pod("p3.2", MID).req(MEDIUM).start(5).node("node3"),
        ],
        HIGH,
        "node2",
    );
}

// ---------------------------------------------------------------------------------------------
// TestPodEligibleToPreemptOthers (observed through PostFilter, module doc)

/// "Pod with nominated node": its nominated node is `UnschedulableAndUnresolvable` (upstream:
/// an untolerated taint) and holds a low pod terminating without a DisruptionTarget: eligible,
/// and no node can be helped.
#[test]
fn eligible_pod_with_nominated_node() {
    let p = make_pod("p", HIGH).nominated("node1");
    let c = run(
        &[one_pod("node1").tainted()],
        &[make_pod("p1", LOW).terminating().node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/1 nodes are unavailable: 1 {TAINTED}, 1 {POD_COUNT}."),
        &format!("0/1 nodes are available: 1 {NOT_HELPFUL}."),
    );
}

#[test]
fn eligible_pod_without_nominated_node() {
    let p = make_pod("p", HIGH);
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_preempts(&c, &p, "node1", &["p1"]);
}

#[test]
fn eligible_pod_with_preempt_never_preemption_policy() {
    let p = make_pod("p", HIGH).never();
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/1 nodes are unavailable: 1 {POD_COUNT}."),
        NEVER,
    );
}

/// The preemptor arrives nominated to node1 (its `status.nominatedNodeName`), where its victim
/// is terminating with the scheduler's DisruptionTarget: not eligible, nothing more preempted.
#[test]
fn eligible_preemption_victim_pod_terminating_as_indicated_by_the_disruption_target_condition() {
    let p = make_pod("p", HIGH).nominated("node1");
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW)
            .terminating()
            .disruption_target()
            .node("node1")],
        &[],
        &p,
    );
    assert_no_preemption(
        &c,
        &p,
        &format!("0/1 nodes are unavailable: 1 {POD_COUNT}."),
        TERMINATING,
    );
}

/// The same row with the nomination made by this engine's own preemption: the victim
/// terminates (DisruptionTarget written), a node is added (waking the preemptor), and the
/// preemptor is not eligible again.
#[test]
fn eligible_preemption_victim_pod_terminating_after_our_own_preemption() {
    let p = make_pod("p", HIGH);
    let mut c = Sim::workers(1);
    c.terminate_victims = true;
    c.add_node(one_pod("node1").0);
    c.add_pod(make_pod("p1", LOW).node("node1").0);
    c.add_pod(p.0.clone());
    c.settle();
    assert_eq!(
        nominated(&c, &p),
        Some(("node1".to_owned(), names(&["p1"])))
    );
    c.add_node(one_pod("node2").tainted().0);
    c.settle();
    assert_eq!(c.preemptions.len(), 1, "no second preemption");
    assert_eq!(
        message(&c, &p).as_deref(),
        Some(
            format!(
                "0/2 nodes are unavailable: 1 {TAINTED}, 1 {POD_COUNT}. preemption: {TERMINATING}"
            )
            .as_str()
        )
    );
}

/// The nominated node's low pod terminates without a DisruptionTarget (not a preemption's
/// victim): eligible. It is still the victim on node1 (upstream keeps terminating pods as
/// victims), but no eviction is asked for it: the preemption's victims to evict are none.
#[test]
fn eligible_non_victim_pods_terminating() {
    let p = make_pod("p", HIGH).nominated("node1");
    let c = run(
        &[one_pod("node1")],
        &[make_pod("p1", LOW).terminating().node("node1")],
        &[],
        &p,
    );
    assert_eq!(nominated(&c, &p), Some(("node1".to_owned(), vec![])));
    assert_eq!(c.preemptions.len(), 1);
}

/// Upstream's `PodEligibleToPreemptOthers` source (no table row): when the nominated node's
/// status is `UnschedulableAndUnresolvable`, the pod is eligible even while a victim of its
/// preemption terminates there. Here node1 is tainted after the preemption, and a node added
/// (also tainted) wakes the preemptor: eligible, and no node can be helped.
#[test]
fn eligible_again_when_the_nominated_node_became_unresolvable() {
    let p = make_pod("p", HIGH);
    let mut c = Sim::workers(1);
    c.terminate_victims = true;
    c.add_node(one_pod("node1").0);
    c.add_pod(make_pod("p1", LOW).node("node1").0);
    c.add_pod(p.0.clone());
    c.settle();
    assert_eq!(
        nominated(&c, &p),
        Some(("node1".to_owned(), names(&["p1"])))
    );
    c.add_node(one_pod("node1").tainted().0);
    c.add_node(one_pod("node2").tainted().0);
    c.settle();
    assert_eq!(c.preemptions.len(), 1, "no second preemption");
    assert_eq!(
        message(&c, &p).as_deref(),
        Some(
            format!(
                "0/2 nodes are unavailable: 1 {POD_COUNT}, 2 {TAINTED}. preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."
            )
            .as_str()
        )
    );
}

// ---------------------------------------------------------------------------------------------
// TestPreempt: nodes `veryLarge`; after the preemption the victims terminate, the preemptor
// is decided again (upstream calls `Preempt` a second time) and preempts nothing more; once
// they are gone it is bound to its node. `held`: while they terminate their room is still
// theirs (resources); PodTopologySpread, upstream's as Magma's, does not count terminating
// pods, so there the preemptor may be bound as soon as its victim terminates.

fn check_preempt(
    node_specs: &[&str],
    pods: &[P],
    preemptor: &P,
    want: Option<(&str, &[&str])>,
    held: bool,
) {
    let nodes: Vec<N> = node_specs
        .iter()
        .map(|n| make_node(n).capacity(VERY_LARGE))
        .collect();
    let mut c = Sim::workers(1);
    c.terminate_victims = true;
    for n in &nodes {
        c.add_node(n.0.clone());
    }
    for p in pods {
        c.add_pod(p.0.clone());
    }
    c.add_pod(preemptor.0.clone());
    c.settle();
    let Some((node, victims)) = want else {
        assert_eq!(nominated(&c, preemptor), None, "no preemption");
        assert!(
            message(&c, preemptor).is_some_and(|m| m.ends_with(&format!(" preemption: {NEVER}"))),
            "{:?}",
            message(&c, preemptor)
        );
        return;
    };
    assert_eq!(
        nominated(&c, preemptor),
        Some((node.to_owned(), names(victims))),
        "nominated node and victims"
    );
    // Decided again while the victims terminate (a node the pod cannot use wakes it).
    c.add_node(make_node("wake").tainted().0);
    c.settle();
    assert_eq!(c.preemptions.len(), 1, "no more preemption");
    if held {
        assert_eq!(
            c.node_of(&preemptor.uid()),
            None,
            "its victims still terminate"
        );
    }
    for v in victims {
        c.delete_pod(&format!("uid-{v}"));
    }
    c.settle();
    assert_eq!(c.node_of(&preemptor.uid()), Some(node));
    assert_eq!(c.preemptions.len(), 1);
}

fn basic_pods() -> Vec<P> {
    vec![
        make_pod("p1.1", LOW).req(SMALL).node("node1"),
        make_pod("p1.2", LOW).req(SMALL).node("node1"),
        make_pod("p2.1", HIGH).req(LARGE).node("node2"),
        make_pod("p3.1", MID).req(MEDIUM).node("node3"),
    ]
}

/// With `PreemptionPolicy: PreemptLowerPriority` (Magma's default).
#[test]
fn preempt_basic_preemption_logic() {
    check_preempt(
        &["node1", "node2", "node3"],
        &basic_pods(),
        &make_pod("p", HIGH).req(VERY_LARGE),
        Some(("node1", &["p1.1", "p1.2"])),
        true,
    );
}

#[test]
fn preempt_preemption_for_topology_spread_constraints() {
    check_preempt(
        &["node-a/zone1", "node-b/zone1", "node-x/zone2"],
        &[
            make_pod("p-a1", HIGH).label("foo", "").node("node-a"),
            make_pod("p-a2", HIGH).label("foo", "").node("node-a"),
            make_pod("p-b1", LOW).label("foo", "").node("node-b"),
            make_pod("p-x1", HIGH).label("foo", "").node("node-x"),
            make_pod("p-x2", HIGH).label("foo", "").node("node-x"),
        ],
        &make_pod("p", HIGH)
            .label("foo", "")
            .spread(1, "zone", "foo")
            .spread(1, "hostname", "foo"),
        Some(("node-b", &["p-b1"])),
        false,
    );
}

#[test]
fn preempt_no_preempting_in_pod() {
    check_preempt(
        &["node1", "node2", "node3"],
        &basic_pods(),
        &make_pod("p", HIGH).req(VERY_LARGE).never(),
        None,
        true,
    );
}

#[test]
fn preempt_preemption_policy_is_nil() {
    check_preempt(
        &["node1", "node2", "node3"],
        &basic_pods(),
        &make_pod("p", HIGH).req(VERY_LARGE),
        Some(("node1", &["p1.1", "p1.2"])),
        true,
    );
}
