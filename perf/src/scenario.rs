//! Named scenario presets. Each turns a few parameters into a [`Plan`]; flags override the
//! parameters (`--nodes`, `--pods`, `--rate`, ...).

use crate::plan::{NodeShape, Plan, PlannedPod, Prefill, Rng, node, pod, taint, toleration};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// N pods at once onto an empty cluster.
    Burst,
    /// Poisson arrivals at a fixed offered rate (latency below saturation).
    Steady,
    /// Short-lived agent pods that finish after a random lifetime and free their node.
    Churn,
    /// Nodes pre-filled to random levels; small pods fill the gaps.
    Fragmented,
    /// Cluster pre-filled to 95%, more pods than fit: conflicts expected, no livelock allowed.
    NearFull,
    /// Several pod sizes and priorities, taints and selectors on part of the cluster.
    Mixed,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Burst => "burst",
            Scenario::Steady => "steady",
            Scenario::Churn => "churn",
            Scenario::Fragmented => "fragmented",
            Scenario::NearFull => "near-full",
            Scenario::Mixed => "mixed",
        }
    }

    /// Default parameters of the preset.
    pub fn defaults(self) -> Params {
        let base = Params {
            nodes: 5_000,
            pods: 100_000,
            rate: None,
            lifetime_mean: Duration::from_secs(5),
            seed: 1,
            pod_cpu_milli: 250,
            pod_memory: 512 << 20,
            shape: NodeShape::default(),
            fill: None,
        };
        match self {
            Scenario::Burst => base,
            Scenario::Steady => Params {
                pods: 50_000,
                rate: Some(10_000.0),
                ..base
            },
            Scenario::Churn => Params {
                pods: 300_000,
                rate: Some(5_000.0),
                ..base
            },
            Scenario::Fragmented => Params {
                pods: 50_000,
                pod_cpu_milli: 100,
                pod_memory: 128 << 20,
                ..base
            },
            Scenario::NearFull => Params {
                nodes: 1_000,
                pods: 20_000,
                pod_cpu_milli: 500,
                pod_memory: 1 << 30,
                ..base
            },
            Scenario::Mixed => Params {
                pods: 50_000,
                ..base
            },
        }
    }
}

/// Knobs of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub nodes: usize,
    pub pods: usize,
    /// Offered arrival rate (pods/s); `None` = all at once.
    pub rate: Option<f64>,
    pub lifetime_mean: Duration,
    pub seed: u64,
    pub pod_cpu_milli: i64,
    pub pod_memory: i64,
    pub shape: NodeShape,
    /// Pre-fill every node to this fraction of its CPU and memory with a pod bound by another
    /// scheduler (`--fill`). Near-full defaults to 0.95; fragmented draws its own random levels
    /// and ignores it.
    pub fill: Option<f64>,
}

fn arrivals(p: &Params, rng: &mut Rng) -> Vec<Duration> {
    let mut t = 0.0f64;
    (0..p.pods)
        .map(|_| match p.rate {
            None => Duration::ZERO,
            Some(rate) => {
                t += rng.exp(1.0 / rate);
                Duration::from_secs_f64(t)
            }
        })
        .collect()
}

fn nodes(p: &Params) -> Plan {
    let mut plan = Plan::default();
    for i in 0..p.nodes {
        plan.nodes.push(node(format!("node-{i:05}"), p.shape));
        plan.shapes.push(p.shape);
    }
    plan
}

/// Fill node `i` to `fraction` of its CPU and memory with one pod bound by another scheduler.
fn prefill(plan: &mut Plan, i: usize, fraction: f64) {
    let s = plan.shapes[i];
    let cpu = (s.cpu_milli as f64 * fraction) as i64;
    let mem = (s.memory as f64 * fraction) as i64;
    if cpu == 0 && mem == 0 {
        return;
    }
    let mut input = pod(format!("prefill-{i:05}"), cpu, mem);
    input.namespace = "other".into();
    input.node_name = Some(plan.nodes[i].name.clone());
    input.phase = magma_engine::model::PodPhase::Running;
    plan.prefill.push(Prefill {
        input,
        cpu_milli: cpu,
        memory: mem,
    });
}

pub fn build(s: Scenario, p: &Params) -> Plan {
    let mut rng = Rng::new(p.seed);
    let mut plan = nodes(p);
    let times = arrivals(p, &mut rng);
    let simple = |i: usize, cpu, mem, t| PlannedPod {
        input: pod(format!("p-{i:07}"), cpu, mem),
        cpu_milli: cpu,
        memory: mem,
        arrival: t,
        lifetime: None,
    };
    match s {
        Scenario::Burst | Scenario::Steady | Scenario::Churn | Scenario::Mixed => {
            if let Some(f) = p.fill {
                for i in 0..plan.nodes.len() {
                    prefill(&mut plan, i, f);
                }
            }
        }
        Scenario::Fragmented | Scenario::NearFull => {}
    }
    match s {
        Scenario::Burst | Scenario::Steady => {
            plan.pods = times
                .into_iter()
                .enumerate()
                .map(|(i, t)| simple(i, p.pod_cpu_milli, p.pod_memory, t))
                .collect();
        }
        Scenario::Churn => {
            plan.pods = times
                .into_iter()
                .enumerate()
                .map(|(i, t)| PlannedPod {
                    lifetime: Some(Duration::from_secs_f64(
                        rng.exp(p.lifetime_mean.as_secs_f64()),
                    )),
                    ..simple(i, p.pod_cpu_milli, p.pod_memory, t)
                })
                .collect();
        }
        Scenario::Fragmented => {
            for i in 0..plan.nodes.len() {
                let f = rng.f64() * 0.9;
                prefill(&mut plan, i, f);
            }
            plan.pods = times
                .into_iter()
                .enumerate()
                .map(|(i, t)| simple(i, p.pod_cpu_milli, p.pod_memory, t))
                .collect();
        }
        Scenario::NearFull => {
            for i in 0..plan.nodes.len() {
                prefill(&mut plan, i, p.fill.unwrap_or(0.95));
            }
            plan.pods = times
                .into_iter()
                .enumerate()
                .map(|(i, t)| simple(i, p.pod_cpu_milli, p.pod_memory, t))
                .collect();
        }
        Scenario::Mixed => {
            // 20% of nodes are GPU nodes tainted dedicated=gpu:NoSchedule; 30% carry a zone label.
            for (i, n) in plan.nodes.iter_mut().enumerate() {
                if i % 5 == 0 {
                    n.taints.push(taint("dedicated", "gpu", "NoSchedule"));
                    n.allocatable.push(("nvidia.com/gpu".into(), "8".into()));
                }
                if i % 10 < 3 {
                    n.labels.push((
                        "topology.kubernetes.io/zone".into(),
                        format!("zone-{}", i % 3),
                    ));
                }
            }
            let sizes = [
                (100, 128 << 20),
                (250, 512 << 20),
                (1000, 1 << 30),
                (2000, 4 << 30),
            ];
            plan.pods = times
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let (cpu, mem) = sizes[rng.below(sizes.len() as u64) as usize];
                    let mut pp = simple(i, cpu, mem, t);
                    pp.input.priority = [0, 100, 1000][rng.below(3) as usize];
                    let r = rng.below(10);
                    if r == 0 {
                        pp.input
                            .tolerations
                            .push(toleration("dedicated", "gpu", "NoSchedule"));
                        pp.input.containers[0]
                            .requests
                            .push(("nvidia.com/gpu".into(), "1".into()));
                    } else if r < 3 {
                        pp.input.node_selector.push((
                            "topology.kubernetes.io/zone".into(),
                            format!("zone-{}", r % 3),
                        ));
                    }
                    pp
                })
                .collect();
        }
    }
    plan
}
