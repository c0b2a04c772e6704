//! Test support: `mk_*` builders for nodes and pods, a real-time clock, and `Cluster`, a tiny
//! stand-in for the API server that answers the engine's bind intents at once (and echoes the
//! binding back as a watch event), recording every binding so tests can check that each pod was
//! bound exactly once and no node went over its allocatable.

#![allow(dead_code, clippy::disallowed_methods)]

use magma_engine::core::{BindResult, Input, Intent, StatusIntent};
use magma_engine::model::{ContainerInput, NodeInput, PodInput, TaintInput};
use magma_engine::{Clock, Engine, EngineOptions, Nanos};
use magma_engine::{ShardInput, ShardStatusIntent};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct RealClock(Instant);

impl RealClock {
    pub fn new() -> Arc<RealClock> {
        Arc::new(RealClock(Instant::now()))
    }
}

impl Clock for RealClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos() as u64)
    }
}

pub fn mk_node(name: &str, cpu: &str, mem: &str, pods: u32) -> NodeInput {
    NodeInput {
        name: name.into(),
        allocatable: vec![
            ("cpu".into(), cpu.into()),
            ("memory".into(), mem.into()),
            ("pods".into(), pods.to_string()),
        ],
        ready: true,
        ..Default::default()
    }
}

pub fn with_labels(mut n: NodeInput, labels: &[(&str, &str)]) -> NodeInput {
    n.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    n
}

pub fn with_taint(mut n: NodeInput, key: &str, value: &str, effect: &str) -> NodeInput {
    n.taints.push(TaintInput {
        key: key.into(),
        value: value.into(),
        effect: effect.into(),
    });
    n
}

pub fn mk_pod(name: &str, cpu: &str, mem: &str) -> PodInput {
    PodInput {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        containers: vec![ContainerInput {
            requests: vec![("cpu".into(), cpu.into()), ("memory".into(), mem.into())],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A pod as the watch shows it after binding.
pub fn bound(mut p: PodInput, node: &str) -> PodInput {
    p.node_name = Some(node.into());
    p.phase = magma_engine::model::PodPhase::Running;
    p
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What the fake API server saw.
#[derive(Default)]
pub struct Cluster {
    pub pods: HashMap<String, PodInput>,
    pub nodes: HashMap<String, NodeInput>,
    /// uid → node, in bind order.
    pub bindings: Vec<(String, String)>,
    pub statuses: Vec<StatusIntent>,
    pub double_binds: Vec<String>,
    pub errors: Vec<String>,
    /// NodeShards by name; status writes are applied and echoed like a watch would.
    pub shards: HashMap<String, ShardInput>,
    pub shard_writes: Vec<ShardStatusIntent>,
    /// Nodes whose pods the engine asked to list afresh.
    pub pod_lists: Vec<Vec<String>>,
    /// Hold bind intents instead of answering them (see `release_binds`).
    pub hold_binds: bool,
    pub held: Vec<magma_engine::BindIntent>,
}

impl Cluster {
    pub fn start(opts: EngineOptions) -> (Engine, Cluster) {
        (
            Engine::start(opts, RealClock::new()).expect("engine starts"),
            Cluster::default(),
        )
    }

    pub fn add_node(&mut self, e: &Engine, n: NodeInput) {
        self.nodes.insert(n.name.clone(), n.clone());
        e.handle().send(Input::NodeApply(n));
    }

    pub fn add_pod(&mut self, e: &Engine, p: PodInput) {
        self.pods.insert(p.uid.clone(), p.clone());
        e.handle().send(Input::PodApply(p));
    }

    pub fn delete_pod(&mut self, e: &Engine, uid: &str) {
        self.pods.remove(uid);
        e.handle().send(Input::PodDelete { uid: uid.into() });
    }

    /// Create or replace a NodeShard's spec (as the shard controller would), keeping its status.
    pub fn set_shard(&mut self, e: &Engine, name: &str, desired: &[&str]) {
        self.change_shard(e, name, |s| s.nodes_desired = strings(desired));
    }

    /// Write another scheduler's status (as that scheduler would).
    pub fn set_shard_in_use(&mut self, e: &Engine, name: &str, in_use: &[&str]) {
        self.change_shard(e, name, |s| s.nodes_in_use = strings(in_use));
    }

    /// Change a NodeShard (created empty if missing) and show the engine the result.
    fn change_shard(&mut self, e: &Engine, name: &str, f: impl FnOnce(&mut ShardInput)) {
        let entry = self
            .shards
            .entry(name.to_owned())
            .or_insert_with(|| ShardInput {
                name: name.to_owned(),
                ..Default::default()
            });
        f(entry);
        e.handle().send(Input::ShardApply(entry.clone()));
    }

    /// A pod bound by someone else that the engine's watch has not delivered yet.
    pub fn add_unseen_bound_pod(&mut self, p: PodInput) {
        self.pods.insert(p.uid.clone(), p);
    }

    pub fn in_use(&self, shard: &str) -> Vec<String> {
        let mut v = self
            .shards
            .get(shard)
            .map(|s| s.nodes_in_use.clone())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Answer the bind intents held while `hold_binds` was set.
    pub fn release_binds(&mut self, e: &Engine) {
        for b in std::mem::take(&mut self.held) {
            self.answer_bind(e, b);
        }
    }

    fn answer_bind(&mut self, e: &Engine, b: magma_engine::BindIntent) {
        let uid = b.pod.uid.to_string();
        let result = match self.pods.get_mut(&uid) {
            None => BindResult::PodGone,
            Some(p) if p.node_name.is_some() => {
                self.double_binds.push(uid.clone());
                BindResult::AlreadyBound
            }
            Some(p) => {
                p.node_name = Some(b.node.to_string());
                p.phase = magma_engine::model::PodPhase::Running;
                self.bindings.push((uid.clone(), b.node.to_string()));
                BindResult::Bound
            }
        };
        let echo = (result == BindResult::Bound).then(|| self.pods[&uid].clone());
        e.handle().send(Input::BindOutcome { uid, result });
        if let Some(p) = echo {
            e.handle().send(Input::PodApply(p));
        }
    }

    pub fn bound_count(&self) -> usize {
        self.pods.values().filter(|p| p.node_name.is_some()).count()
    }

    /// Answer intents until `done(self)` holds or `timeout` passes. Binds succeed at once.
    pub fn run_until(
        &mut self,
        e: &Engine,
        timeout: Duration,
        mut done: impl FnMut(&Cluster) -> bool,
    ) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if done(self) {
                return true;
            }
            match e.intents().recv_timeout(Duration::from_millis(20)) {
                Ok(Intent::Bind(b)) if self.hold_binds => self.held.push(b),
                Ok(Intent::Bind(b)) => self.answer_bind(e, b),
                Ok(Intent::Status(s)) => self.statuses.push(s),
                Ok(Intent::ListNodePods(nodes)) => {
                    // A consistent read: every pod the API server has on those nodes, including
                    // any the engine's (simulated) watch has not delivered.
                    for p in self.pods.values() {
                        if p.node_name.as_ref().is_some_and(|n| nodes.contains(n)) {
                            e.handle().send(Input::PodApply(p.clone()));
                        }
                    }
                    self.pod_lists.push(nodes.clone());
                    e.handle().send(Input::NodePodsListed(nodes));
                }
                Ok(Intent::ShardStatus(w)) => {
                    // The API server applies the status write; the watch echoes the object.
                    let written = match self.shards.get_mut(&*w.shard) {
                        Some(s) => {
                            s.nodes_in_use = w.nodes_in_use.clone();
                            s.nodes_to_add = w.nodes_to_add.clone();
                            s.nodes_to_remove = w.nodes_to_remove.clone();
                            e.handle().send(Input::ShardApply(s.clone()));
                            Some(w.clone())
                        }
                        None => None,
                    };
                    self.shard_writes.push(w);
                    e.handle().send(Input::ShardStatusWritten(written));
                }
                Ok(Intent::Error(err)) => self.errors.push(err.to_string()),
                Err(_) => {}
            }
        }
        done(self)
    }

    /// Requests placed on each node versus its allocatable: the nodes over it.
    pub fn overcommitted(&self) -> Vec<String> {
        let mut used: HashMap<&str, (i64, i64, i64)> = HashMap::new();
        for p in self.pods.values() {
            let Some(n) = &p.node_name else { continue };
            let e = used.entry(n.as_str()).or_default();
            for c in &p.containers {
                for (r, q) in &c.requests {
                    match r.as_str() {
                        "cpu" => e.0 += magma_engine::model::parse_scaled(r, q, 1000).unwrap(),
                        "memory" => e.1 += magma_engine::model::parse_scaled(r, q, 1).unwrap(),
                        _ => {}
                    }
                }
            }
            e.2 += 1;
        }
        let mut out = Vec::new();
        for (name, (cpu, mem, pods)) in used {
            let n = &self.nodes[name];
            let get = |k: &str, scale| {
                n.allocatable
                    .iter()
                    .find(|(r, _)| r == k)
                    .map_or(0, |(r, q)| {
                        magma_engine::model::parse_scaled(r, q, scale).unwrap()
                    })
            };
            if cpu > get("cpu", 1000) || mem > get("memory", 1) || pods > get("pods", 1) {
                out.push(name.to_owned());
            }
        }
        out
    }

    /// Each pod bound at most once.
    pub fn duplicate_bindings(&self) -> usize {
        let mut seen = std::collections::HashSet::new();
        self.bindings
            .iter()
            .filter(|(u, _)| !seen.insert(u.clone()))
            .count()
            + self.double_binds.len()
    }
}
