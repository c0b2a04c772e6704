//! Workload plans: the nodes of a simulated cluster and the pods that arrive on it, generated
//! deterministically from a seed. A scenario (see `scenario`) is a function producing a plan.

use magma_engine::model::{ContainerInput, NodeInput, PodInput, TaintInput, TolerationInput};
use std::time::Duration;

/// Small, fast, seedable PRNG (SplitMix64): plans must be reproducible from `--seed`.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

/// Node shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeShape {
    pub cpu_milli: i64,
    pub memory: i64,
    pub pods: i64,
}

impl Default for NodeShape {
    /// KWOK's default fake node: 32 CPU, 256 Gi, 110 pods.
    fn default() -> Self {
        NodeShape {
            cpu_milli: 32_000,
            memory: 256 << 30,
            pods: 110,
        }
    }
}

/// One pod of the plan.
#[derive(Debug, Clone)]
pub struct PlannedPod {
    pub input: PodInput,
    pub cpu_milli: i64,
    pub memory: i64,
    /// Offset from the start of the run at which the pod is created.
    pub arrival: Duration,
    /// Run time after binding, after which the pod succeeds and is deleted (churn).
    pub lifetime: Option<Duration>,
}

/// A pre-existing pod bound by another scheduler (pre-fill).
#[derive(Debug, Clone)]
pub struct Prefill {
    pub input: PodInput,
    pub cpu_milli: i64,
    pub memory: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub nodes: Vec<NodeInput>,
    pub shapes: Vec<NodeShape>,
    pub prefill: Vec<Prefill>,
    pub pods: Vec<PlannedPod>,
}

pub fn node(name: String, shape: NodeShape) -> NodeInput {
    NodeInput {
        name: name.clone(),
        labels: vec![
            ("kubernetes.io/hostname".into(), name),
            ("type".into(), "kwok".into()),
        ],
        allocatable: vec![
            ("cpu".into(), format!("{}m", shape.cpu_milli)),
            ("memory".into(), shape.memory.to_string()),
            ("pods".into(), shape.pods.to_string()),
        ],
        capacity: vec![],
        ready: true,
        ..Default::default()
    }
}

pub fn taint(key: &str, value: &str, effect: &str) -> TaintInput {
    TaintInput {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    }
}

pub fn toleration(key: &str, value: &str, effect: &str) -> TolerationInput {
    TolerationInput {
        key: key.into(),
        operator: "Equal".into(),
        value: value.into(),
        effect: effect.into(),
    }
}

/// An agent-sandbox pod: one container with CPU and memory requests.
pub fn pod(name: String, cpu_milli: i64, memory: i64) -> PodInput {
    PodInput {
        uid: format!("uid-{name}"),
        namespace: "agents".into(),
        name,
        containers: vec![ContainerInput {
            requests: vec![
                ("cpu".into(), format!("{cpu_milli}m")),
                ("memory".into(), memory.to_string()),
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}
