//! Constraints that span nodes, as a property test on the deterministic harness: random pods with
//! required and preferred pod (anti-)affinity (hostname and zone keys, selectors over a few app
//! labels, sometimes matching the pod itself) and `DoNotSchedule`/`ScheduleAnyway` topology
//! spreads (maxSkew 1–2, zone and hostname, some `minDomains`), some without constraints, on
//! random nodes (a few zones, some nodes without the zone label), some pods deleted, interleaved
//! with random scheduling steps (a worker's turn, results, flushes, the API server answering,
//! time passing) over 1–6 workers.
//!
//! After every run an independent checker (a naive re-implementation over the placements, not
//! the engine's plugins) replays the bindings in the order the API server saw them and checks
//! that
//!
//! 1. no pod was bound where it broke a required anti-affinity of its own or of a pod already
//!    bound (the symmetric rule), or a required affinity of its own (with kube-scheduler's
//!    first-pod exemption), or a `DoNotSchedule` spread's `maxSkew`, at the moment it was bound;
//! 2. every pod left unbound fits on no node given the final placements (by the checker's own
//!    filter: resources, the three affinity rules, the hard spreads), and was reported.
//!
//! "At the moment it was bound" has to allow for what the decision could and could not see:
//! pods deleted while it was being decided may or may not have been in its snapshot. So each
//! rule uses the side that cannot wrongly fail: what a rule forbids is looked for among the pods
//! bound before it and still there (every one of those the decision saw, or the engine must have
//! kept the two claims from both standing); what a rule needs (an affinity target, the spread's
//! minimum) is looked for among every pod placed at any point since the pod was created (a
//! superset of its snapshot, publications and hand-offs happening only at flushes after it was
//! added); and the first-pod exemption is refused only for a matching pod placed throughout that
//! window or bound before it and still there.

use magma_engine::model::{
    LabelSelectorInput, PodAffinityInput, PodAffinityTermInput, PodInput, TopologySpreadInput,
};
use magma_engine::queue::QueueOptions;
use magma_engine::testing::{HarnessOptions, Sim, mk_node, mk_pod, with_labels};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

const HOSTNAME: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";
const APPS: [&str; 3] = ["a", "b", "c"];
/// A term's app index meaning "the pod's own app".
const OWN: usize = APPS.len();

// ---------------------------------------------------------------------------------------------
// The generated model

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Host,
    Zone,
}

impl Key {
    fn label(self) -> &'static str {
        match self {
            Key::Host => HOSTNAME,
            Key::Zone => ZONE,
        }
    }
}

#[derive(Debug, Clone)]
struct NodeSpec {
    zone: Option<usize>,
    cpu: u32,
    pods: u32,
}

/// A term selecting `app=APPS[app]` (or the pod's own app) over `key`.
#[derive(Debug, Clone, Copy)]
struct TermSpec {
    app: usize,
    key: Key,
}

#[derive(Debug, Clone, Copy)]
struct SpreadSpec {
    app: usize,
    key: Key,
    max_skew: i32,
    hard: bool,
    min_domains: Option<i32>,
}

#[derive(Debug, Clone)]
struct PodSpec {
    app: Option<usize>,
    cpu_milli: u32,
    affinity: Option<TermSpec>,
    anti: Option<TermSpec>,
    /// (weight, term, anti-affinity)
    preferred: Option<(i32, TermSpec, bool)>,
    spreads: Vec<SpreadSpec>,
}

#[derive(Debug, Clone)]
enum Op {
    AddPod(PodSpec),
    DeletePod(usize),
    /// One worker's turn (mod the worker count).
    Step(usize),
    Results,
    Flush,
    Answer,
    /// Time passes (milliseconds).
    Advance(u8),
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![Just(Key::Host), Just(Key::Zone)]
}

fn term() -> impl Strategy<Value = TermSpec> {
    (0..=OWN, key()).prop_map(|(app, key)| TermSpec { app, key })
}

fn spread() -> impl Strategy<Value = SpreadSpec> {
    (
        0..=OWN,
        key(),
        1..=2i32,
        any::<bool>(),
        prop::option::weighted(0.3, 1..=4i32),
    )
        .prop_map(|(app, key, max_skew, hard, min_domains)| SpreadSpec {
            app,
            key,
            max_skew,
            hard,
            min_domains: min_domains.filter(|_| hard),
        })
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        prop::option::weighted(0.85, 0..APPS.len()),
        100u32..1500,
        prop::option::weighted(0.25, term()),
        prop::option::weighted(0.35, term()),
        prop::option::weighted(0.3, (1..=100i32, term(), any::<bool>())),
        prop::collection::vec(spread(), 0..=2),
        prop::bool::weighted(0.25),
    )
        .prop_map(
            |(app, cpu_milli, affinity, anti, preferred, spreads, plain)| {
                if plain {
                    PodSpec {
                        app,
                        cpu_milli,
                        affinity: None,
                        anti: None,
                        preferred: None,
                        spreads: vec![],
                    }
                } else {
                    PodSpec {
                        app,
                        cpu_milli,
                        affinity,
                        anti,
                        preferred,
                        spreads,
                    }
                }
            },
        )
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (prop::option::weighted(0.8, 0..3usize), 2u32..=4, 3u32..=8)
        .prop_map(|(zone, cpu, pods)| NodeSpec { zone, cpu, pods })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => pod_spec().prop_map(Op::AddPod),
        1 => any::<usize>().prop_map(Op::DeletePod),
        5 => any::<usize>().prop_map(Op::Step),
        2 => Just(Op::Results),
        2 => Just(Op::Flush),
        2 => Just(Op::Answer),
        1 => any::<u8>().prop_map(Op::Advance),
    ]
}

// ---------------------------------------------------------------------------------------------
// Building the engine's inputs

fn app_selector(app: &str) -> Option<LabelSelectorInput> {
    Some(LabelSelectorInput {
        match_labels: vec![("app".into(), app.into())],
        match_expressions: vec![],
    })
}

/// The pod as the checker sees it: every "own app" resolved.
#[derive(Debug, Clone)]
struct Pod {
    uid: String,
    app: Option<usize>,
    cpu_milli: u32,
    affinity: Option<(usize, Key)>,
    anti: Option<(usize, Key)>,
    /// The `DoNotSchedule` spreads: (app, key, maxSkew, minDomains).
    hard: Vec<(usize, Key, i64, usize)>,
}

fn resolve(spec: &PodSpec, uid: String) -> Pod {
    let own = |app: usize| {
        if app == OWN {
            spec.app.unwrap_or(0)
        } else {
            app
        }
    };
    Pod {
        uid,
        app: spec.app,
        cpu_milli: spec.cpu_milli,
        affinity: spec.affinity.map(|t| (own(t.app), t.key)),
        anti: spec.anti.map(|t| (own(t.app), t.key)),
        hard: spec
            .spreads
            .iter()
            .filter(|s| s.hard)
            .map(|s| {
                let min = s.min_domains.unwrap_or(1) as usize;
                (own(s.app), s.key, i64::from(s.max_skew), min)
            })
            .collect(),
    }
}

fn pod_input(spec: &PodSpec, name: &str) -> PodInput {
    let mut p = mk_pod(name, &format!("{}m", spec.cpu_milli), "128Mi");
    let own = |app: usize| {
        if app == OWN {
            spec.app.unwrap_or(0)
        } else {
            app
        }
    };
    if let Some(a) = spec.app {
        p.labels = vec![("app".into(), APPS[a].into())];
    }
    let term = |t: TermSpec| PodAffinityTermInput {
        label_selector: app_selector(APPS[own(t.app)]),
        topology_key: t.key.label().into(),
        ..Default::default()
    };
    let mut a = PodAffinityInput::default();
    if let Some(t) = spec.affinity {
        a.required.push(term(t));
    }
    if let Some(t) = spec.anti {
        a.required_anti.push(term(t));
    }
    if let Some((w, t, anti)) = spec.preferred {
        if anti {
            a.preferred_anti.push((w, term(t)));
        } else {
            a.preferred.push((w, term(t)));
        }
    }
    if !a.is_empty() {
        p.pod_affinity = Some(a);
    }
    p.topology_spread = spec
        .spreads
        .iter()
        .map(|s| TopologySpreadInput {
            max_skew: s.max_skew,
            topology_key: s.key.label().into(),
            when_unsatisfiable: if s.hard {
                "DoNotSchedule"
            } else {
                "ScheduleAnyway"
            }
            .into(),
            label_selector: app_selector(APPS[own(s.app)]),
            min_domains: s.min_domains,
            ..Default::default()
        })
        .collect();
    p
}

// ---------------------------------------------------------------------------------------------
// The checker: a naive re-implementation of the rules over placements

struct Cluster {
    nodes: Vec<NodeSpec>,
}

/// Placed pods: (pod index, node index).
type Placed = [(usize, usize)];

impl Cluster {
    /// The node's value of `key` (the node itself for the hostname).
    fn dom(&self, node: usize, key: Key) -> Option<usize> {
        match key {
            Key::Host => Some(node),
            Key::Zone => self.nodes[node].zone,
        }
    }

    /// The pod's own required anti-affinity and placed pods' (the symmetric rule).
    fn anti_ok(&self, pods: &[Pod], p: &Pod, n: usize, present: &Placed) -> Result<(), String> {
        if let Some((app, key)) = p.anti
            && let Some(d) = self.dom(n, key)
            && let Some(&(x, m)) = present
                .iter()
                .find(|&&(x, m)| pods[x].app == Some(app) && self.dom(m, key) == Some(d))
        {
            return Err(format!(
                "its anti-affinity to app={} on {key:?} holds {} on n{m}",
                APPS[app], pods[x].uid
            ));
        }
        for &(x, m) in present {
            if let Some((app, key)) = pods[x].anti
                && p.app == Some(app)
                && let (Some(dn), Some(dm)) = (self.dom(n, key), self.dom(m, key))
                && dn == dm
            {
                return Err(format!(
                    "{} on n{m} keeps app={} out of its {key:?}",
                    pods[x].uid, APPS[app]
                ));
            }
        }
        Ok(())
    }

    /// The pod's required affinity: a matching pod among `maybe` in the node's domain, or the
    /// first-pod exemption, refused when a matching pod among `definite` sits on a node with the
    /// key.
    fn affinity_ok(
        &self,
        pods: &[Pod],
        p: &Pod,
        n: usize,
        maybe: &Placed,
        definite: &Placed,
    ) -> Result<(), String> {
        let Some((app, key)) = p.affinity else {
            return Ok(());
        };
        let Some(d) = self.dom(n, key) else {
            return Err(format!("n{n} lacks its affinity's key {key:?}"));
        };
        let matching = |&(x, _): &(usize, usize)| pods[x].app == Some(app);
        if maybe
            .iter()
            .any(|&(x, m)| matching(&(x, m)) && self.dom(m, key) == Some(d))
        {
            return Ok(());
        }
        if p.app == Some(app)
            && !definite
                .iter()
                .any(|&(x, m)| matching(&(x, m)) && self.dom(m, key).is_some())
        {
            return Ok(());
        }
        Err(format!(
            "no app={} pod in its {key:?} of n{n}, and not the first of its group",
            APPS[app]
        ))
    }

    /// The pod's `DoNotSchedule` spreads: the count in the node's domain among `counted`, the
    /// minimum among `minimum`.
    fn spread_ok(
        &self,
        pods: &[Pod],
        p: &Pod,
        n: usize,
        counted: &Placed,
        minimum: &Placed,
    ) -> Result<(), String> {
        if p.hard.is_empty() {
            return Ok(());
        }
        let eligible: Vec<usize> = (0..self.nodes.len())
            .filter(|&e| {
                p.hard
                    .iter()
                    .all(|&(_, key, _, _)| self.dom(e, key).is_some())
            })
            .collect();
        if !eligible.contains(&n) {
            return Err(format!("n{n} lacks a spread key"));
        }
        for &(app, key, max_skew, min_domains) in &p.hard {
            let count = |set: &Placed, v: usize| {
                set.iter()
                    .filter(|&&(x, m)| {
                        eligible.contains(&m)
                            && pods[x].app == Some(app)
                            && self.dom(m, key) == Some(v)
                    })
                    .count() as i64
            };
            let domains: BTreeSet<usize> =
                eligible.iter().filter_map(|&e| self.dom(e, key)).collect();
            let min = if domains.len() < min_domains {
                0
            } else {
                domains
                    .iter()
                    .map(|&v| count(minimum, v))
                    .min()
                    .unwrap_or(0)
            };
            let own = self.dom(n, key).expect("eligible");
            let skew = count(counted, own) + i64::from(p.app == Some(app)) - min;
            if skew > max_skew {
                return Err(format!(
                    "spread of app={} on {key:?}: skew {skew} > maxSkew {max_skew} on n{n}",
                    APPS[app]
                ));
            }
        }
        Ok(())
    }

    /// The checker's own filter over the final placements.
    fn fits(&self, pods: &[Pod], p: &Pod, n: usize, placed: &Placed) -> Result<(), String> {
        let here: Vec<usize> = placed
            .iter()
            .filter(|&&(_, m)| m == n)
            .map(|&(x, _)| x)
            .collect();
        let cpu: u32 = here.iter().map(|&x| pods[x].cpu_milli).sum();
        let node = &self.nodes[n];
        if cpu + p.cpu_milli > node.cpu * 1000 || here.len() as u32 >= node.pods {
            return Err(format!("n{n} is full"));
        }
        self.affinity_ok(pods, p, n, placed, placed)?;
        self.anti_ok(pods, p, n, placed)?;
        self.spread_ok(pods, p, n, placed, placed)
    }
}

/// What the run recorded, by op index (the state at the end of op `t`; op 0 is the setup, the
/// final settling is the last op).
#[derive(Default)]
struct Trace {
    /// uid → index in `pods`.
    index: HashMap<String, usize>,
    added: Vec<usize>,
    deleted: Vec<Option<usize>>,
    /// Per pod, its placements in the cache: (first op it was placed at the end of, first op it
    /// was not, node).
    placed: Vec<Vec<(usize, Option<usize>, usize)>>,
    /// Bindings in the order the API server made them: (pod, node, op).
    binds: Vec<(usize, usize, usize)>,
    seen_bindings: usize,
}

fn node_index(name: &str) -> usize {
    name.trim_start_matches('n')
        .parse()
        .expect("node name n<i>")
}

impl Trace {
    fn poll(&mut self, c: &Sim, t: usize) {
        for (uid, node) in &c.bindings[self.seen_bindings..] {
            self.binds.push((self.index[uid], node_index(node), t));
        }
        self.seen_bindings = c.bindings.len();
        let cache = c.h.core().cache();
        for (uid, &i) in &self.index {
            let now = cache.placement(uid).map(|p| node_index(p.node));
            let iv = &mut self.placed[i];
            let open = iv.last().filter(|l| l.1.is_none()).map(|l| l.2);
            match (open, now) {
                (None, Some(node)) => iv.push((t, None, node)),
                (Some(_), None) => iv.last_mut().expect("open").1 = Some(t),
                (Some(was), Some(node)) if was != node => {
                    iv.last_mut().expect("open").1 = Some(t);
                    iv.push((t, None, node));
                }
                _ => {}
            }
        }
    }
}

/// Check every binding at the moment it was made (see the module doc).
fn check_bindings(cluster: &Cluster, pods: &[Pod], trace: &Trace) -> Result<(), String> {
    for (k, &(p, n, b)) in trace.binds.iter().enumerate() {
        let a = trace.added[p];
        // Bound before it and not deleted before its binding.
        let present: Vec<(usize, usize)> = trace.binds[..k]
            .iter()
            .filter(|&&(x, _, _)| x != p && trace.deleted[x].is_none_or(|d| d > b))
            .map(|&(x, m, _)| (x, m))
            .collect();
        // Placed at the end of some op in [a, b] / of every one.
        let mut maybe = Vec::new();
        let mut throughout = Vec::new();
        for (x, iv) in trace.placed.iter().enumerate() {
            if x == p {
                continue;
            }
            for &(start, end, m) in iv {
                if start <= b && end.is_none_or(|e| e > a) {
                    maybe.push((x, m));
                }
                if start <= a && end.is_none_or(|e| e > b) {
                    throughout.push((x, m));
                }
            }
        }
        let definite: Vec<(usize, usize)> = throughout.iter().chain(&present).copied().collect();
        let pod = &pods[p];
        let verdict = cluster
            .anti_ok(pods, pod, n, &present)
            .and_then(|()| cluster.affinity_ok(pods, pod, n, &maybe, &definite))
            .and_then(|()| cluster.spread_ok(pods, pod, n, &present, &maybe));
        if let Err(why) = verdict {
            return Err(format!(
                "{} bound to n{n} (binding #{k}, op {b}, added at op {a}): {why}",
                pod.uid
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The run

fn run(workers: usize, nodes: Vec<NodeSpec>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    run_sim(workers, nodes, ops).map(drop)
}

/// [`run`], returning the settled `Sim`.
fn run_sim(workers: usize, nodes: Vec<NodeSpec>, ops: Vec<Op>) -> Result<Sim, TestCaseError> {
    let mut c = Sim::new(HarnessOptions {
        queue: QueueOptions {
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_unschedulable: Duration::from_secs(300),
        },
        ..HarnessOptions::workers(workers)
    });
    for (i, n) in nodes.iter().enumerate() {
        let name = format!("n{i}");
        let zone = n.zone.map(|z| format!("zone-{z}"));
        let mut labels = vec![(HOSTNAME, name.as_str())];
        if let Some(z) = &zone {
            labels.push((ZONE, z.as_str()));
        }
        c.add_node(with_labels(
            mk_node(&name, &n.cpu.to_string(), "64Gi", n.pods),
            &labels,
        ));
    }
    let cluster = Cluster { nodes };
    let mut pods: Vec<Pod> = Vec::new();
    let mut live: Vec<usize> = Vec::new();
    let mut trace = Trace::default();
    for (i, op) in ops.into_iter().enumerate() {
        let t = i + 1;
        match op {
            Op::AddPod(spec) => {
                let name = format!("p{}", pods.len());
                let input = pod_input(&spec, &name);
                let uid = input.uid.clone();
                trace.index.insert(uid.clone(), pods.len());
                trace.added.push(t);
                trace.deleted.push(None);
                trace.placed.push(Vec::new());
                live.push(pods.len());
                pods.push(resolve(&spec, uid));
                c.add_pod(input);
            }
            Op::DeletePod(k) if !live.is_empty() => {
                let p = live.swap_remove(k % live.len());
                trace.deleted[p] = Some(t);
                c.delete_pod(&pods[p].uid);
            }
            Op::Step(w) => {
                c.h.step(w % workers);
            }
            Op::Results => {
                c.h.results();
            }
            Op::Flush => c.h.flush(),
            Op::Answer => {
                c.answer();
            }
            Op::Advance(ms) => c.h.advance(Duration::from_millis(u64::from(ms))),
            Op::DeletePod(_) => {}
        }
        trace.poll(&c, t);
    }
    // Let it settle, with time passing for the backoffs: every live pod bound or reported.
    let settled = |c: &Sim| {
        c.pods
            .values()
            .all(|p| p.node_name.is_some() || c.statuses.iter().any(|s| *s.uid == p.uid))
    };
    c.run_until(Duration::from_secs(10), settled);
    c.run_for(Duration::from_secs(1));
    let last = trace.added.len() + 1_000_000;
    trace.poll(&c, last);
    c.h.check_settled();
    prop_assert!(c.errors.is_empty(), "engine errors: {:?}", c.errors);
    prop_assert_eq!(c.duplicate_bindings(), 0);
    prop_assert!(
        c.overcommitted().is_empty(),
        "overcommitted: {:?}",
        c.overcommitted()
    );

    // 1. Every binding, at the moment it was made.
    if let Err(e) = check_bindings(&cluster, &pods, &trace) {
        return Err(TestCaseError::fail(e));
    }

    // 2. Every live pod left unbound fits nowhere now, and was reported.
    let placed: Vec<(usize, usize)> = c
        .pods
        .values()
        .filter_map(|p| Some((trace.index[&p.uid], node_index(p.node_name.as_deref()?))))
        .collect();
    for p in c.pods.values().filter(|p| p.node_name.is_none()) {
        let pod = &pods[trace.index[&p.uid]];
        prop_assert!(
            c.statuses.iter().any(|s| *s.uid == p.uid),
            "{} unbound but never reported",
            p.uid
        );
        for n in 0..cluster.nodes.len() {
            prop_assert!(
                cluster.fits(&pods, pod, n, &placed).is_err(),
                "{} ({:?}) left unbound, but fits on n{} given the final placements",
                p.uid,
                pod,
                n
            );
        }
    }
    Ok(c)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, max_shrink_iters: 512, ..ProptestConfig::default() })]

    #[test]
    fn cross_node_constraints_hold_under_random_interleavings(
        workers in 1usize..=6,
        nodes in prop::collection::vec(node_spec(), 2..=6),
        ops in prop::collection::vec(op(), 1..160),
    ) {
        run(workers, nodes, ops)?;
    }
}

/// A burst of zone anti-affinity pods and pods they keep out, on many workers at once (the race
/// the anti-affinity epoch closes), followed by deletions.
#[test]
fn a_burst_of_zone_anti_affinity_on_six_workers() {
    let nodes: Vec<NodeSpec> = (0..6)
        .map(|i| NodeSpec {
            zone: Some(i % 3),
            cpu: 4,
            pods: 8,
        })
        .collect();
    let mut ops = Vec::new();
    for i in 0..12 {
        let loner = i % 2 == 0;
        ops.push(Op::AddPod(PodSpec {
            app: Some(if loner { 0 } else { 1 }),
            cpu_milli: 200,
            affinity: None,
            anti: loner.then_some(TermSpec {
                app: 1,
                key: Key::Zone,
            }),
            preferred: None,
            spreads: vec![],
        }));
    }
    for _ in 0..4 {
        ops.push(Op::Flush);
        ops.extend((0..6).map(Op::Step));
        ops.push(Op::Results);
        ops.push(Op::Answer);
    }
    ops.extend([Op::DeletePod(0), Op::DeletePod(3), Op::Flush]);
    run(6, nodes, ops).unwrap();
}

/// A pod its hostname anti-affinity keeps off both nodes is reported, and placed once one of the
/// pods it avoids is deleted (the final check: nothing left unbound that fits).
#[test]
fn a_pod_kept_out_by_anti_affinity_is_placed_once_the_pod_leaves() {
    let nodes = vec![
        NodeSpec {
            zone: None,
            cpu: 4,
            pods: 8,
        };
        2
    ];
    // Two app=b pods, one per node (a hard hostname spread of maxSkew 1 keeps them apart).
    let b = PodSpec {
        app: Some(1),
        cpu_milli: 200,
        affinity: None,
        anti: None,
        preferred: None,
        spreads: vec![SpreadSpec {
            app: OWN,
            key: Key::Host,
            max_skew: 1,
            hard: true,
            min_domains: None,
        }],
    };
    let loner = PodSpec {
        app: Some(0),
        anti: Some(TermSpec {
            app: 1,
            key: Key::Host,
        }),
        spreads: vec![],
        ..b.clone()
    };
    let round = [Op::Flush, Op::Step(0), Op::Results, Op::Answer];
    let mut ops = vec![Op::AddPod(b.clone())];
    ops.extend(round.iter().cloned().cycle().take(8));
    ops.push(Op::AddPod(b));
    ops.extend(round.iter().cloned().cycle().take(8));
    ops.push(Op::AddPod(loner));
    ops.extend(round.iter().cloned().cycle().take(8));
    // Delete the first app=b pod (index 0 of the live pods).
    ops.push(Op::DeletePod(0));
    let c = run_sim(1, nodes, ops).unwrap();
    assert!(
        c.statuses.iter().any(|s| &*s.uid == "uid-p2"),
        "the loner was reported while kept out"
    );
    assert!(
        c.node_of("uid-p2").is_some(),
        "the loner is placed in the end"
    );
}
