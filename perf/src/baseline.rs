//! The baseline: a deliberately straightforward reference scheduler, run on the same plan in the
//! same process so every report can print Magma's figure beside it (`baseline_throughput_pods_per_s`).
//!
//! It is written the way schedulers commonly start out, not the way Magma is written:
//!
//! 1. One thread. The node cache is a `Mutex<HashMap<String, Node>>`; a node keeps its
//!    allocatable and requested amounts as `HashMap<String, i64>` keyed by resource name, its
//!    labels as a `HashMap<String, String>` and its taints as a `Vec` of strings.
//! 2. Every scheduling cycle takes the lock and clones the whole map (the snapshot), then scans
//!    every node of it: resource fit (including the pod count), NodeUnschedulable, NodeName,
//!    nodeSelector and required node affinity, taints, host ports — all on strings.
//! 3. Feasible nodes are scored with the same formulas and upstream weights as Magma's default
//!    profile (LeastAllocated 1, BalancedAllocation 1, NodeAffinity 2, TaintToleration 3, the
//!    last two normalised over the feasible nodes); ties are broken at random (reservoir), as
//!    kube-scheduler does.
//! 4. The best node is bound: the lock is taken again and the pod's requests are added to it.
//!
//! It does not sample nodes (Magma, like upstream, stops after `nodes_to_find` feasible nodes),
//! retries nothing (a pod that fits nowhere is counted unschedulable at once) and ignores the
//! plan's arrival times and lifetimes: the pods it is given are all queued at the start, in
//! activeQ order (priority, then FIFO), and its throughput is saturation throughput.
//!
//! Only the parsing of quantities and of the effective pod request (Kubernetes' init-container
//! rule) is borrowed from the engine's model; nothing of the engine runs in the scheduling loop.

use crate::latency::Latency;
use crate::plan::{Plan, Rng};
use hdrhistogram::Histogram;
use magma_engine::model::{
    NodeInput, PodInput, ResourceRegistry, SelectorRequirementInput, SelectorTermInput, TaintInput,
    TolerationInput, effective_requests, parse_resource_list,
};
use serde::Serialize;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;
use std::time::Instant;

const MAX_NODE_SCORE: i64 = 100;
const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";

/// What the baseline did with (a prefix of) a plan.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BaselineReport {
    /// Pods given to the baseline (the first N of the plan).
    pub pods: usize,
    pub bound: u64,
    pub unschedulable: u64,
    pub elapsed_s: f64,
    /// Bound pods per second, from the first pop to the last bind.
    pub throughput_pods_per_s: f64,
    /// One scheduling cycle (snapshot, filter, score, bind) per pod.
    pub cycle_latency_ms: Latency,
    /// Share of the cycle time spent copying the cache (the snapshot), 0..1.
    pub snapshot_share: f64,
    /// Nodes whose requests exceed allocatable at the end (must be 0).
    pub overcommitted_nodes: u64,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    labels: HashMap<String, String>,
    taints: Vec<TaintInput>,
    unschedulable: bool,
    allocatable: HashMap<String, i64>,
    requested: HashMap<String, i64>,
    /// Requested CPU and memory with kube-scheduler's non-zero defaults, for scoring.
    nonzero_requested: HashMap<String, i64>,
    /// (protocol, host IP, port) in use.
    used_ports: Vec<(String, String, i32)>,
}

#[derive(Debug, Clone)]
struct Pod {
    requests: HashMap<String, i64>,
    nonzero: HashMap<String, i64>,
    node_name: Option<String>,
    node_selector: HashMap<String, String>,
    required: Option<Vec<SelectorTermInput>>,
    preferred: Vec<(i32, SelectorTermInput)>,
    tolerations: Vec<TolerationInput>,
    host_ports: Vec<(String, String, i32)>,
}

fn named(
    registry: &ResourceRegistry,
    list: &magma_engine::model::ResourceList,
) -> HashMap<String, i64> {
    list.iter()
        .map(|&(s, a)| (registry.name(s).to_owned(), a))
        .collect()
}

fn to_node(input: &NodeInput, registry: &mut ResourceRegistry) -> anyhow::Result<Node> {
    let alloc = parse_resource_list(registry, &input.allocatable)?;
    let capacity = parse_resource_list(registry, &input.capacity)?;
    let mut allocatable = named(registry, &alloc);
    for (k, v) in named(registry, &capacity) {
        allocatable.entry(k).or_insert(v);
    }
    Ok(Node {
        name: input.name.clone(),
        labels: input.labels.iter().cloned().collect(),
        taints: input.taints.clone(),
        unschedulable: input.unschedulable,
        allocatable,
        requested: HashMap::new(),
        nonzero_requested: HashMap::new(),
        used_ports: Vec::new(),
    })
}

fn port_key(protocol: &str, ip: &str, port: i32) -> (String, String, i32) {
    let protocol = if protocol.is_empty() { "TCP" } else { protocol };
    let ip = if ip == "::" { "0.0.0.0" } else { ip };
    let ip = if ip.is_empty() { "0.0.0.0" } else { ip };
    (protocol.to_owned(), ip.to_owned(), port)
}

fn to_pod(input: &PodInput, registry: &mut ResourceRegistry) -> anyhow::Result<Pod> {
    let req = effective_requests(registry, input, false)?;
    let nz = effective_requests(registry, input, true)?;
    let mut requests = named(registry, &req);
    *requests.entry("pods".to_owned()).or_default() += 1;
    let nz = named(registry, &nz);
    let nonzero = ["cpu", "memory"]
        .into_iter()
        .map(|r| (r.to_owned(), nz.get(r).copied().unwrap_or(0)))
        .collect();
    let host_ports = input
        .containers
        .iter()
        .chain(input.init_containers.iter().filter(|c| c.restartable))
        .flat_map(|c| c.ports.iter())
        .filter(|p| p.host_port != 0)
        .map(|p| port_key(&p.protocol, &p.host_ip, p.host_port))
        .collect();
    let (required, preferred) = match &input.affinity {
        Some(a) => (a.required.clone(), a.preferred.clone()),
        None => (None, Vec::new()),
    };
    Ok(Pod {
        requests,
        nonzero,
        node_name: input.node_name.clone().filter(|n| !n.is_empty()),
        node_selector: input.node_selector.iter().cloned().collect(),
        required,
        preferred,
        tolerations: input.tolerations.clone(),
        host_ports,
    })
}

fn tolerates(t: &TolerationInput, taint: &TaintInput) -> bool {
    if !t.effect.is_empty() && t.effect != taint.effect {
        return false;
    }
    if t.key.is_empty() {
        return t.operator == "Exists";
    }
    t.key == taint.key && (t.operator == "Exists" || t.value == taint.value)
}

fn requirement_matches(r: &SelectorRequirementInput, value: Option<&String>) -> bool {
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| r.values.contains(v)),
        "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        op @ ("Gt" | "Lt") => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                r.values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if op == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

fn term_matches(t: &SelectorTermInput, node: &Node) -> bool {
    if t.match_expressions.is_empty() && t.match_fields.is_empty() {
        return false;
    }
    t.match_expressions
        .iter()
        .all(|r| requirement_matches(r, node.labels.get(&r.key)))
        && t.match_fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(&node.name)))
}

fn get(m: &HashMap<String, i64>, k: &str) -> i64 {
    m.get(k).copied().unwrap_or(0)
}

/// All filters, in upstream's order.
fn feasible(pod: &Pod, node: &Node) -> bool {
    for (r, &want) in &pod.requests {
        if get(&node.allocatable, r) - get(&node.requested, r) < want {
            return false;
        }
    }
    if node.unschedulable {
        let cordon = TaintInput {
            key: UNSCHEDULABLE_TAINT_KEY.to_owned(),
            value: String::new(),
            effect: "NoSchedule".to_owned(),
        };
        if !pod.tolerations.iter().any(|t| tolerates(t, &cordon)) {
            return false;
        }
    }
    if pod.node_name.as_ref().is_some_and(|n| *n != node.name) {
        return false;
    }
    if !pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    if let Some(terms) = &pod.required
        && !terms.iter().any(|t| term_matches(t, node))
    {
        return false;
    }
    for taint in &node.taints {
        if taint.effect != "PreferNoSchedule"
            && !pod.tolerations.iter().any(|t| tolerates(t, taint))
        {
            return false;
        }
    }
    for (proto, ip, port) in &pod.host_ports {
        let wildcard = |a: &str| a == "0.0.0.0";
        if node.used_ports.iter().any(|(p2, ip2, port2)| {
            p2 == proto && port2 == port && (wildcard(ip) || wildcard(ip2) || ip == ip2)
        }) {
            return false;
        }
    }
    true
}

/// LeastAllocated + BalancedAllocation (the part that needs no normalisation).
fn base_score(pod: &Pod, node: &Node) -> i64 {
    let mut sum = 0;
    let mut n = 0;
    for r in ["cpu", "memory"] {
        let alloc = get(&node.allocatable, r);
        if alloc == 0 {
            continue;
        }
        let req = get(&node.nonzero_requested, r) + get(&pod.nonzero, r);
        sum += if req > alloc {
            0
        } else {
            (alloc - req) * MAX_NODE_SCORE / alloc
        };
        n += 1;
    }
    let least = if n == 0 { 0 } else { sum / n };
    let mut fractions = Vec::new();
    for r in ["cpu", "memory", "nvidia.com/gpu"] {
        let req = get(&pod.requests, r);
        if r == "nvidia.com/gpu" && req == 0 {
            continue;
        }
        let alloc = get(&node.allocatable, r);
        if alloc <= 0 {
            continue;
        }
        fractions.push(((get(&node.requested, r) + req) as f64 / alloc as f64).min(1.0));
    }
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = fractions.iter().sum::<f64>() / n as f64;
            (fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64)
                .sqrt()
        }
    };
    let balanced = ((1.0 - std) * MAX_NODE_SCORE as f64) as i64;
    least + balanced
}

fn affinity_raw(pod: &Pod, node: &Node) -> i64 {
    pod.preferred
        .iter()
        .filter(|(_, t)| term_matches(t, node))
        .map(|(w, _)| *w as i64)
        .sum()
}

fn intolerable_prefer_taints(pod: &Pod, node: &Node) -> i64 {
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|taint| {
            !pod.tolerations
                .iter()
                .filter(|t| t.effect.is_empty() || t.effect == "PreferNoSchedule")
                .any(|t| tolerates(t, taint))
        })
        .count() as i64
}

/// One scheduling cycle on a snapshot: the name of the best node, if any fits.
fn schedule_one(pod: &Pod, snapshot: &HashMap<String, Node>, rng: &mut Rng) -> Option<String> {
    let mut scored: Vec<(&Node, i64, i64, i64)> = Vec::new();
    let (mut max_aff, mut max_taint) = (0, 0);
    for node in snapshot.values() {
        if !feasible(pod, node) {
            continue;
        }
        let aff = affinity_raw(pod, node);
        let taints = intolerable_prefer_taints(pod, node);
        max_aff = max_aff.max(aff);
        max_taint = max_taint.max(taints);
        scored.push((node, base_score(pod, node), aff, taints));
    }
    let mut best: Option<(&Node, i64)> = None;
    let mut ties = 0u64;
    for (node, base, aff, taints) in scored {
        let mut s = base;
        if max_aff > 0 {
            s += 2 * (aff * MAX_NODE_SCORE / max_aff);
        }
        s += 3 * if max_taint > 0 {
            MAX_NODE_SCORE - taints * MAX_NODE_SCORE / max_taint
        } else {
            MAX_NODE_SCORE
        };
        match best {
            Some((_, b)) if s < b => {}
            Some((_, b)) if s == b => {
                ties += 1;
                if rng.below(ties + 1) == 0 {
                    best = Some((node, s));
                }
            }
            _ => {
                ties = 0;
                best = Some((node, s));
            }
        }
    }
    best.map(|(n, _)| n.name.clone())
}

fn assume(node: &mut Node, pod: &Pod) {
    for (r, a) in &pod.requests {
        *node.requested.entry(r.clone()).or_default() += a;
    }
    for (r, a) in &pod.nonzero {
        *node.nonzero_requested.entry(r.clone()).or_default() += a;
    }
    node.used_ports.extend(pod.host_ports.iter().cloned());
}

/// Schedule the first `limit` pods of `plan` (all of them when `None`) with the baseline.
pub fn run(plan: &Plan, limit: Option<usize>) -> anyhow::Result<BaselineReport> {
    let mut registry = ResourceRegistry::default();
    let cache: Mutex<HashMap<String, Node>> = Mutex::new(HashMap::new());
    {
        let mut nodes = cache.lock().expect("baseline cache lock");
        for n in &plan.nodes {
            nodes.insert(n.name.clone(), to_node(n, &mut registry)?);
        }
        for f in &plan.prefill {
            let pod = to_pod(&f.input, &mut registry)?;
            if let Some(node) = f.input.node_name.as_ref().and_then(|n| nodes.get_mut(n)) {
                assume(node, &pod);
            }
        }
    }
    let n = limit.unwrap_or(plan.pods.len()).min(plan.pods.len());
    let pods = &plan.pods[..n];
    let mut cycle = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut rng = Rng::new(0xBA5E);
    let (mut bound, mut unschedulable) = (0u64, 0u64);

    let start = Instant::now();
    // activeQ order: higher priority first, then FIFO.
    let mut queue: BinaryHeap<(i32, std::cmp::Reverse<usize>)> = pods
        .iter()
        .enumerate()
        .map(|(i, p)| (p.input.priority, std::cmp::Reverse(i)))
        .collect();
    let mut last_bind = start;
    let mut copying = std::time::Duration::ZERO;
    while let Some((_, std::cmp::Reverse(i))) = queue.pop() {
        let t0 = Instant::now();
        let pod = to_pod(&pods[i].input, &mut registry)?;
        let t1 = Instant::now();
        let snapshot = cache.lock().expect("baseline cache lock").clone();
        copying += t1.elapsed();
        match schedule_one(&pod, &snapshot, &mut rng) {
            Some(name) => {
                let mut nodes = cache.lock().expect("baseline cache lock");
                let node = nodes.get_mut(&name).expect("snapshot node is in the cache");
                assume(node, &pod);
                bound += 1;
                last_bind = Instant::now();
            }
            None => unschedulable += 1,
        }
        drop(snapshot);
        cycle.record((t0.elapsed().as_nanos() as u64).max(1))?;
    }
    let total = start.elapsed().as_secs_f64();
    let elapsed = last_bind.saturating_duration_since(start).as_secs_f64();
    let overcommitted = cache
        .lock()
        .expect("baseline cache lock")
        .values()
        .filter(|n| n.requested.iter().any(|(r, &u)| u > get(&n.allocatable, r)))
        .count() as u64;
    Ok(BaselineReport {
        pods: n,
        bound,
        unschedulable,
        elapsed_s: elapsed,
        throughput_pods_per_s: if elapsed > 0.0 {
            bound as f64 / elapsed
        } else {
            0.0
        },
        cycle_latency_ms: Latency::from_histogram(&cycle),
        snapshot_share: if total > 0.0 {
            copying.as_secs_f64() / total
        } else {
            0.0
        },
        overcommitted_nodes: overcommitted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{NodeShape, PlannedPod, node, pod, taint, toleration};
    use std::time::Duration;

    fn plan_of(nodes: Vec<NodeInput>, pods: Vec<PodInput>) -> Plan {
        Plan {
            shapes: vec![NodeShape::default(); nodes.len()],
            nodes,
            prefill: vec![],
            pods: pods
                .into_iter()
                .map(|input| PlannedPod {
                    input,
                    cpu_milli: 0,
                    memory: 0,
                    arrival: Duration::ZERO,
                    lifetime: None,
                })
                .collect(),
        }
    }

    #[test]
    fn pod_count_limits_a_node() {
        let shape = NodeShape {
            cpu_milli: 64_000,
            memory: 1 << 40,
            pods: 3,
        };
        let nodes = vec![node("a".into(), shape)];
        let pods = (0..5).map(|i| pod(format!("p{i}"), 10, 1 << 20)).collect();
        let r = run(&plan_of(nodes, pods), None).unwrap();
        assert_eq!((r.bound, r.unschedulable, r.overcommitted_nodes), (3, 2, 0));
    }

    #[test]
    fn taints_and_selectors_are_honoured() {
        let mut tainted = node("gpu".into(), NodeShape::default());
        tainted.taints.push(taint("dedicated", "gpu", "NoSchedule"));
        let mut zoned = node("z".into(), NodeShape::default());
        zoned.labels.push(("zone".into(), "a".into()));
        let mut tolerant = pod("t".into(), 10, 1 << 20);
        tolerant
            .node_selector
            .push(("kubernetes.io/hostname".into(), "gpu".into()));
        tolerant
            .tolerations
            .push(toleration("dedicated", "gpu", "NoSchedule"));
        let mut intolerant = pod("i".into(), 10, 1 << 20);
        intolerant
            .node_selector
            .push(("kubernetes.io/hostname".into(), "gpu".into()));
        let mut selective = pod("s".into(), 10, 1 << 20);
        selective.node_selector.push(("zone".into(), "a".into()));
        let r = run(
            &plan_of(vec![tainted, zoned], vec![tolerant, intolerant, selective]),
            None,
        )
        .unwrap();
        assert_eq!((r.bound, r.unschedulable), (2, 1));
    }

    #[test]
    fn least_requested_spreads_pods() {
        let nodes = (0..4)
            .map(|i| node(format!("n{i}"), NodeShape::default()))
            .collect();
        let pods = (0..4)
            .map(|i| pod(format!("p{i}"), 4000, 1 << 30))
            .collect();
        let plan = plan_of(nodes, pods);
        let mut registry = ResourceRegistry::default();
        let mut snapshot: HashMap<String, Node> = plan
            .nodes
            .iter()
            .map(|n| (n.name.clone(), to_node(n, &mut registry).unwrap()))
            .collect();
        let mut rng = Rng::new(1);
        let mut used = std::collections::HashSet::new();
        for p in &plan.pods {
            let pod = to_pod(&p.input, &mut registry).unwrap();
            let name = schedule_one(&pod, &snapshot, &mut rng).unwrap();
            assume(snapshot.get_mut(&name).unwrap(), &pod);
            used.insert(name);
        }
        assert_eq!(used.len(), 4, "each pod goes to an empty node");
    }
}
