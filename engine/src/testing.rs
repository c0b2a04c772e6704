//! A deterministic harness for the engine (feature `testing`), for the engine's scenario and
//! property tests and the loom models.
//!
//! - [`Harness`] is the engine without its threads: the real [`Core`] (cache, queue, pump,
//!   sharding), the [`Shared`] state and hand-off its workers use, real [`Worker`]s stepped one
//!   turn at a time with [`Worker::turn`] (the function every worker thread runs), and a
//!   [`ManualClock`]. Nothing happens unless the test says so, so a failing case replays
//!   exactly, and backoff and timeouts are tested by moving the clock, not by waiting.
//! - [`Sim`] puts a tiny API server in front of it: it records nodes, pods and NodeShards,
//!   answers bind intents (bound, and the watch echoes the binding), writes NodeShard status
//!   and lists pods when asked, and records every binding, so a test can check that each pod
//!   was bound exactly once and no node went over its allocatable. [`Sim::settle`] runs the
//!   engine until nothing is left to do at the current time; [`Sim::run_until`] also moves the
//!   clock from deadline to deadline, as time would pass.
//!
//! Workers stepped one after another before the driver sees their results decide on the same
//! snapshot, as concurrent workers do, so claims conflict and the CAS path is exercised. Under
//! `--cfg loom` the same types run inside loom models, with workers on loom threads
//! ([`Harness::worker`]).

use crate::binder::BindVersions;
use crate::cache::Cache;
use crate::clock::{Clock, ManualClock, Nanos};
use crate::conf::Profile;
use crate::core::{BindIntent, BindResult, Core, CoreError, Input, Intent, StatusIntent};
use crate::model::{ContainerInput, NodeInput, PodInput, PodPhase, TaintInput, parse_scaled};
use crate::queue::{PodState, QueueOptions};
use crate::shard::{ShardInput, ShardStatusIntent, ShardingMode, ShardingOptions, WrittenStatus};
use crate::snapshot::Snapshot;
use crate::stats::Stats;
use crate::sync::HandOff;
use crate::worker::{Shared, Task, Worker, WorkerResult};
use flume::Receiver;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// Most rounds [`Sim::settle`] and [`Sim::run_until`] take before they call it a livelock.
const ROUNDS: usize = 100_000;

/// How a [`Harness`] is built.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    pub workers: usize,
    /// Capacity of the worker hand-off.
    pub handoff_capacity: usize,
    pub queue: QueueOptions,
    pub profile: Profile,
    /// Schedule within a NodeShard (`Core::with_sharding`).
    pub sharding: Option<ShardingOptions>,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        HarnessOptions {
            workers: 1,
            handoff_capacity: 16,
            queue: QueueOptions::default(),
            profile: Profile::default(),
            sharding: None,
        }
    }
}

impl HarnessOptions {
    pub fn workers(workers: usize) -> HarnessOptions {
        HarnessOptions {
            workers,
            handoff_capacity: (8 * workers).max(16),
            ..HarnessOptions::default()
        }
    }
}

/// The engine's driver and workers, stepped by the test (see the module doc).
pub struct Harness {
    core: Core,
    shared: Arc<Shared>,
    handoff: HandOff<Task>,
    /// Worker results not yet handed to the driver.
    inbox: HandOff<WorkerResult>,
    stats: Arc<Stats>,
    clock: Arc<ManualClock>,
    /// Workers stepped on the test's thread (`None` while lent to a thread, see `worker`).
    workers: Vec<Option<Worker>>,
    intents: Receiver<Intent>,
    /// Intents not yet taken by [`Harness::take_intents`], in emission order.
    pending: VecDeque<Intent>,
    /// Every bind intent emitted so far.
    pub binds: Vec<BindIntent>,
    /// Every NodeShard status intent emitted so far.
    pub shard_statuses: Vec<ShardStatusIntent>,
    /// What the last flush said the queue and the coordinator next need a look at.
    deadline: Option<Nanos>,
}

/// Capacity of the harness's result inbox (results wait there until the driver takes them).
const INBOX: usize = 1024;

impl Harness {
    pub fn new(opts: HarnessOptions) -> Harness {
        let versions = Arc::new(BindVersions::default());
        let profile = Arc::new(opts.profile);
        let mut cache = Cache::new(versions.clone(), profile.clone());
        if let Some(s) = &opts.sharding {
            cache.set_view(crate::shard::View::new(s.mode, &s.shard_name, None));
        }
        let first = cache
            .publish()
            .unwrap_or_else(|| Arc::new(Snapshot::empty(profile)));
        let shared = Arc::new(Shared::new(opts.workers, first, versions));
        let stats = Arc::new(Stats::new(opts.workers));
        let handoff = HandOff::new(opts.handoff_capacity);
        let (itx, intents) = flume::unbounded();
        let core = Core::new(
            cache,
            opts.queue,
            handoff.clone(),
            shared.clone(),
            itx,
            stats.clone(),
        );
        let core = match opts.sharding {
            Some(s) => core.with_sharding(s),
            None => core,
        };
        Harness {
            core,
            shared,
            handoff,
            inbox: HandOff::new(INBOX),
            stats,
            clock: Arc::new(ManualClock::new(Nanos(1))),
            workers: (0..opts.workers).map(|w| Some(Worker::new(w))).collect(),
            intents,
            pending: VecDeque::new(),
            binds: Vec::new(),
            shard_statuses: Vec::new(),
            deadline: None,
        }
    }

    pub fn core(&self) -> &Core {
        &self.core
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub fn handoff(&self) -> &HandOff<Task> {
        &self.handoff
    }

    pub fn stats(&self) -> &Arc<Stats> {
        &self.stats
    }

    pub fn clock(&self) -> &Arc<ManualClock> {
        &self.clock
    }

    pub fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// Move the clock forward (nothing runs until the test steps the engine).
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Hand one input to the driver.
    pub fn input(&mut self, input: Input) {
        let now = self.clock.now();
        self.core.handle(input, now);
        self.collect();
    }

    /// Publish, move due pods, refill the hand-off: what the driver does after every batch.
    pub fn flush(&mut self) {
        let now = self.clock.now();
        self.deadline = self.core.flush(now, || 0);
        self.collect();
    }

    /// When the last flush said the engine next needs a look without any input.
    pub fn deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    /// Leadership as `Engine::set_leading` changes it: the workers' flag at once, then the
    /// driver's ordered input.
    pub fn set_leading(&mut self, leading: bool) {
        self.shared.set_leading(leading);
        self.input(Input::Leadership(leading));
    }

    fn collect(&mut self) {
        while let Ok(i) = self.intents.try_recv() {
            match &i {
                Intent::Bind(b) => self.binds.push(b.clone()),
                Intent::ShardStatus(s) => self.shard_statuses.push(s.clone()),
                _ => {}
            }
            self.pending.push_back(i);
        }
    }

    /// The intents emitted since the last call, in order.
    pub fn take_intents(&mut self) -> Vec<Intent> {
        self.pending.drain(..).collect()
    }

    /// One turn of worker `w` on this thread: take a task if one is ready, run the scheduling
    /// cycle, leave the result for the driver. Returns whether there was a task.
    pub fn step(&mut self, w: usize) -> bool {
        let mut worker = self.workers[w]
            .take()
            .unwrap_or_else(|| panic!("worker {w} is lent to a thread"));
        let had = self.worker_turn(&mut worker, |_| {});
        self.workers[w] = Some(worker);
        had
    }

    /// A turn of each worker in order; how many had a task.
    pub fn step_all(&mut self) -> usize {
        (0..self.workers.len()).filter(|&w| self.step(w)).count()
    }

    fn worker_turn(&self, worker: &mut Worker, observe: impl FnOnce(&WorkerResult)) -> bool {
        turn(
            worker,
            &self.shared,
            &self.stats,
            &*self.clock,
            &self.handoff,
            &self.inbox,
            observe,
        )
    }

    /// Take back a worker lent with [`Harness::worker`].
    pub fn give_back(&mut self, handle: WorkerHandle) {
        let w = handle.worker.id;
        assert!(self.workers[w].is_none(), "worker {w} was not lent");
        self.workers[w] = Some(handle.worker);
    }

    /// Lend worker `w` to another thread (a loom model's): it steps with [`WorkerHandle::step`]
    /// while the test drives the harness.
    pub fn worker(&mut self, w: usize) -> WorkerHandle {
        WorkerHandle {
            worker: self.workers[w].take().expect("worker already lent"),
            shared: self.shared.clone(),
            stats: self.stats.clone(),
            clock: self.clock.clone(),
            handoff: self.handoff.clone(),
            inbox: self.inbox.clone(),
        }
    }

    /// Hand every waiting worker result to the driver; how many there were.
    pub fn results(&mut self) -> usize {
        self.results_observed(|_| {})
    }

    /// [`Harness::results`], letting the caller look at each result before the driver does.
    pub fn results_observed(&mut self, mut observe: impl FnMut(&WorkerResult)) -> usize {
        let mut n = 0;
        while let Some(r) = self.inbox.try_pop() {
            observe(&r);
            self.input(Input::Worker(r));
            n += 1;
        }
        n
    }

    /// Take back every task still waiting in the hand-off (`Core::drain_handoff`).
    pub fn drain_handoff(&mut self) {
        self.core.drain_handoff();
    }

    /// The engine's stop path (`engine::drive` on `Msg::Stop`), once every worker has exited.
    pub fn stop(&mut self) {
        self.shared.stop();
        self.results();
        self.core.drain_handoff();
        self.flush();
        self.core.drain_handoff();
    }

    /// Everything settled (no worker running, every result handled): each pod is in exactly one
    /// defined state and the books balance. DESIGN.md §3 "No lost pod", "No double booking",
    /// "Bind versions".
    pub fn check_settled(&self) {
        let core = &self.core;
        assert_eq!(core.audit(), vec![], "audit");
        for (uid, e) in core.queue().iter() {
            assert_ne!(e.state(), PodState::InFlight, "pod {uid} lost in flight");
        }
        let mut per_uid: HashMap<&str, usize> = HashMap::new();
        for b in &self.binds {
            *per_uid.entry(&b.pod.uid).or_default() += 1;
        }
        for (uid, n) in per_uid {
            assert_eq!(n, 1, "pod {uid} got {n} bind intents");
        }
        // No phantom allocation: the cache assumes exactly the pods that are binding.
        let binding: BTreeSet<String> = core
            .queue()
            .iter()
            .filter(|(_, e)| e.state() == PodState::Binding)
            .map(|(u, _)| u.to_string())
            .collect();
        let placed: BTreeSet<String> = core
            .cache()
            .placed_uids()
            .into_iter()
            .filter(|u| core.cache().placement(u).is_some_and(|p| p.assumed))
            .collect();
        assert_eq!(placed, binding, "assumed pods vs binding pods");
        // No claim lost: the last snapshot has counted every increment of every counter.
        let snap = core.current_snapshot();
        let versions = core.cache().versions();
        for name in core.cache().node_names() {
            let slot = core.cache().node_slot(name).expect("named node") as usize;
            assert_eq!(
                snap.version(slot),
                versions.current(slot),
                "node {name}: snapshot version vs counter after the final publication"
            );
        }
    }
}

/// One turn of a worker loop, as every worker thread runs it (`Worker::turn`), taking its task
/// without waiting; `observe` sees the result while the worker is still in its epoch.
fn turn(
    worker: &mut Worker,
    shared: &Shared,
    stats: &Stats,
    clock: &dyn Clock,
    handoff: &HandOff<Task>,
    inbox: &HandOff<WorkerResult>,
    observe: impl FnOnce(&WorkerResult),
) -> bool {
    let Some(task) = handoff.try_pop() else {
        return false;
    };
    worker.turn(shared, &stats.workers[worker.id], clock, task, |r| {
        observe(&r);
        assert!(inbox.try_push(r).is_ok(), "harness inbox full");
    });
    true
}

/// A worker lent to another thread ([`Harness::worker`]).
pub struct WorkerHandle {
    worker: Worker,
    shared: Arc<Shared>,
    stats: Arc<Stats>,
    clock: Arc<ManualClock>,
    handoff: HandOff<Task>,
    inbox: HandOff<WorkerResult>,
}

impl WorkerHandle {
    /// One turn of the worker loop; whether there was a task.
    pub fn step(&mut self) -> bool {
        self.step_observed(|_| {})
    }

    /// [`WorkerHandle::step`], letting the caller look at the result after the cycle and before
    /// it is sent, i.e. while the worker is still in its epoch.
    pub fn step_observed(&mut self, observe: impl FnOnce(&WorkerResult)) -> bool {
        turn(
            &mut self.worker,
            &self.shared,
            &self.stats,
            &*self.clock,
            &self.handoff,
            &self.inbox,
            observe,
        )
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/// A ready node with `cpu`, `mem` and room for `pods` pods (quantities as the API spells them).
/// A request mapping of `status.extendedResourceClaimStatus`: (container, resource, request).
pub type RequestMapping = (String, String, String);

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

/// A pending pod `name` (uid `uid-<name>`, namespace `default`) requesting `cpu` and `mem`.
pub fn mk_pod(name: &str, cpu: &str, mem: &str) -> PodInput {
    PodInput {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        containers: vec![ContainerInput {
            name: "main".into(),
            requests: vec![("cpu".into(), cpu.into()), ("memory".into(), mem.into())],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A pod as the watch shows it after binding.
pub fn bound(mut p: PodInput, node: &str) -> PodInput {
    p.node_name = Some(node.into());
    p.phase = PodPhase::Running;
    p
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Sim: the harness behind a tiny API server
// ---------------------------------------------------------------------------------------------

/// The engine behind a fake API server (see the module doc).
pub struct Sim {
    pub h: Harness,
    pub pods: BTreeMap<String, PodInput>,
    pub nodes: BTreeMap<String, NodeInput>,
    /// uid → node, in bind order.
    pub bindings: Vec<(String, String)>,
    pub statuses: Vec<StatusIntent>,
    /// Bind intents for pods the server already had bound.
    pub double_binds: Vec<String>,
    pub errors: Vec<CoreError>,
    /// NodeShards by name; status writes are applied and echoed like a watch would.
    pub shards: BTreeMap<String, ShardInput>,
    pub shard_writes: Vec<ShardStatusIntent>,
    /// Nodes whose pods the engine asked to list afresh.
    pub pod_lists: Vec<Vec<String>>,
    /// Hold bind intents instead of answering them (see [`Sim::release_binds`]).
    pub hold_binds: bool,
    pub held: Vec<BindIntent>,
    /// Hold the answers of pod lists (see [`Sim::release_lists`]): each is read when asked.
    pub hold_lists: bool,
    pub held_lists: Vec<(Vec<String>, Vec<PodInput>)>,
    /// Hold the NodeShard watch's events (see [`Sim::release_shard_events`]): answers to status
    /// writes still come at once, as from a server whose watch cache lags.
    pub hold_shard_watch: bool,
    pub held_shard_events: VecDeque<ShardInput>,
    /// The next NodeShard status write fails: `Some(false)` before the server applies it,
    /// `Some(true)` after (the answer is lost). Taken by that write.
    pub fail_shard_write: Option<bool>,
    /// NodeShards' resourceVersions: one counter for the resource, as a server's.
    shard_rv: u64,
    /// In hard mode, our NodeShard: every binding must land on a node its stored status lists
    /// and no other NodeShard's stored status lists.
    own_shard: Option<String>,
    /// Bindings that broke that rule: what was wrong with each.
    pub shard_violations: Vec<String>,
    /// Preemptions the engine asked for, in order.
    pub preemptions: Vec<crate::core::PreemptIntent>,
    /// Preemption victims become terminating (deleted later with [`Sim::delete_pod`]) instead
    /// of going at once.
    pub terminate_victims: bool,
    /// Preemption victims are left as they are (their deletion not seen yet: deleted later with
    /// [`Sim::delete_pod`]).
    pub hold_victims: bool,
    /// ResourceClaims as the server holds them (`add_claim`): the allocations bind intents
    /// write are stored here and echoed to the engine, as the claim watch would.
    pub claims: BTreeMap<(String, String), crate::dra::ClaimInput>,
    /// Allocations written for claims that had one already (a double allocation).
    pub double_allocations: Vec<String>,
    /// Claims made for pods' extended resources so far (their names' suffix).
    extended_claims_made: usize,
    /// Each pod's `status.extendedResourceClaimStatus`: the claim and its request mappings
    /// (container, resource, request).
    pub extended_status: BTreeMap<String, (String, Vec<RequestMapping>)>,
    /// Deallocations the engine asked for (`Intent::Deallocate`), in order.
    pub deallocations: Vec<crate::dra::Deallocation>,
    /// Record deallocations without carrying them out (to see a Filter's verdict before
    /// PostFilter changes the claim).
    pub hold_deallocations: bool,
}

impl Sim {
    pub fn new(opts: HarnessOptions) -> Sim {
        let own_shard = opts
            .sharding
            .as_ref()
            .filter(|o| o.mode == ShardingMode::Hard)
            .map(|o| o.shard_name.clone());
        Sim {
            h: Harness::new(opts),
            pods: BTreeMap::new(),
            nodes: BTreeMap::new(),
            bindings: Vec::new(),
            statuses: Vec::new(),
            double_binds: Vec::new(),
            errors: Vec::new(),
            shards: BTreeMap::new(),
            shard_writes: Vec::new(),
            pod_lists: Vec::new(),
            hold_binds: false,
            held: Vec::new(),
            hold_lists: false,
            held_lists: Vec::new(),
            hold_shard_watch: false,
            held_shard_events: VecDeque::new(),
            fail_shard_write: None,
            shard_rv: 0,
            own_shard,
            shard_violations: Vec::new(),
            preemptions: Vec::new(),
            terminate_victims: false,
            hold_victims: false,
            claims: BTreeMap::new(),
            deallocations: Vec::new(),
            hold_deallocations: false,
            double_allocations: Vec::new(),
            extended_claims_made: 0,
            extended_status: BTreeMap::new(),
        }
    }

    /// A sim with `workers` workers and otherwise default options.
    pub fn workers(workers: usize) -> Sim {
        Sim::new(HarnessOptions::workers(workers))
    }

    pub fn add_node(&mut self, n: NodeInput) {
        self.nodes.insert(n.name.clone(), n.clone());
        self.h.input(Input::NodeApply(n));
    }

    pub fn add_pod(&mut self, p: PodInput) {
        self.pods.insert(p.uid.clone(), p.clone());
        self.h.input(Input::PodApply(p));
    }

    pub fn delete_pod(&mut self, uid: &str) {
        self.pods.remove(uid);
        self.h.input(Input::PodDelete { uid: uid.into() });
    }

    /// Create or replace a NodeShard's spec (as the shard controller would), keeping its status.
    pub fn set_shard(&mut self, name: &str, desired: &[&str]) {
        self.change_shard(name, |s| s.nodes_desired = strings(desired));
    }

    /// Write another scheduler's status (as that scheduler would).
    pub fn set_shard_in_use(&mut self, name: &str, in_use: &[&str]) {
        self.change_shard(name, |s| s.nodes_in_use = strings(in_use));
    }

    /// Change a NodeShard (created empty if missing) and show the engine the result.
    fn change_shard(&mut self, name: &str, f: impl FnOnce(&mut ShardInput)) {
        let entry = self
            .shards
            .entry(name.to_owned())
            .or_insert_with(|| ShardInput {
                name: name.to_owned(),
                ..Default::default()
            });
        f(entry);
        self.shard_rv += 1;
        entry.resource_version = Some(self.shard_rv.to_string());
        let s = entry.clone();
        self.deliver_shard(s);
    }

    /// A NodeShard event, delivered or held (`hold_shard_watch`; behind any still held, as a
    /// watch delivers in order).
    fn deliver_shard(&mut self, s: ShardInput) {
        if self.hold_shard_watch || !self.held_shard_events.is_empty() {
            self.held_shard_events.push_back(s);
        } else {
            self.h.input(Input::ShardApply(s));
        }
    }

    /// Deliver the first `n` NodeShard events held while `hold_shard_watch` was set, in order.
    pub fn release_shard_events(&mut self, n: usize) {
        for _ in 0..n {
            let Some(s) = self.held_shard_events.pop_front() else {
                return;
            };
            self.h.input(Input::ShardApply(s));
        }
    }

    /// A pod bound by someone else that the engine's watch has not delivered yet.
    pub fn add_unseen_bound_pod(&mut self, p: PodInput) {
        self.pods.insert(p.uid.clone(), p);
    }

    /// `nodesInUse` of a NodeShard as the server holds it, sorted.
    pub fn in_use(&self, shard: &str) -> Vec<String> {
        let mut v = self
            .shards
            .get(shard)
            .map(|s| s.nodes_in_use.clone())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Deliver the answers of the pod lists held while `hold_lists` was set, as read when they
    /// were asked for (a response arriving after later watch events).
    pub fn release_lists(&mut self) {
        for (nodes, pods) in std::mem::take(&mut self.held_lists) {
            self.h.input(Input::NodePodsListed { nodes, pods });
        }
    }

    /// What a relist of the pod watch would return now: the pods the server has.
    pub fn pod_relist(&self) -> Vec<PodInput> {
        self.pods.values().cloned().collect()
    }

    /// Deliver a relist of the pod watch read earlier ([`Sim::pod_relist`]), as the adapter
    /// feeds one: every assigned pod, then every pending one.
    pub fn deliver_pod_relist(&mut self, pods: Vec<PodInput>) {
        let (assigned, pending) = pods.into_iter().partition(|p| p.node_name.is_some());
        self.h.input(Input::BoundPodReset(assigned));
        self.h.input(Input::PendingPodReset(pending));
    }

    /// Answer the bind intents held while `hold_binds` was set.
    pub fn release_binds(&mut self) {
        for b in std::mem::take(&mut self.held) {
            self.answer_bind(b);
        }
    }

    /// Answer a bind the way the server would, with `result` instead of the real outcome.
    pub fn answer_bind_with(&mut self, b: &BindIntent, result: BindResult) {
        self.h.input(Input::BindOutcome {
            uid: b.pod.uid.to_string(),
            result,
        });
    }

    /// Create or replace a ResourceClaim (as its owner would) and show the engine.
    pub fn add_claim(&mut self, c: crate::dra::ClaimInput) {
        self.claims
            .insert((c.namespace.clone(), c.name.clone()), c.clone());
        self.h.input(Input::Dra(crate::dra::DraInput::Claim(c)));
    }

    /// A DRA change other than a claim (slices, classes) shown to the engine.
    pub fn dra(&mut self, change: crate::dra::DraInput) {
        self.h.input(Input::Dra(change));
    }

    /// DynamicResources PreBind, as the adapter does it against the server: each claim's
    /// allocation written (refused when it has one already), the pod added to `reservedFor`,
    /// each change echoed by the claim watch.
    fn write_claims(&mut self, b: &BindIntent) -> Result<(), String> {
        for a in &b.devices {
            let mut k = (a.namespace.to_string(), a.name.to_string());
            if let Some(new) = &a.create {
                // The claim for the pod's extended resources: created (owned by the pod,
                // annotated) and echoed, then allocated below like any claim.
                let n = self.extended_claims_made;
                self.extended_claims_made += 1;
                let name = format!("{}-extended-resources-{n:05}", b.pod.name);
                let c = crate::dra::ClaimInput {
                    namespace: a.namespace.to_string(),
                    name: name.clone(),
                    uid: format!("uid-{name}"),
                    owner_uid: Some(b.pod.uid.to_string()),
                    requests: new.requests.iter().map(|r| r.input()).collect(),
                    resource_version: "1".into(),
                    extended: true,
                    ..Default::default()
                };
                self.claims
                    .insert((c.namespace.clone(), name.clone()), c.clone());
                self.h.input(Input::Dra(crate::dra::DraInput::Claim(c)));
                self.extended_status.insert(
                    b.pod.uid.to_string(),
                    (
                        name.clone(),
                        new.mappings
                            .iter()
                            .map(|m| {
                                (
                                    m.container.to_string(),
                                    m.resource_name.to_string(),
                                    m.request.to_string(),
                                )
                            })
                            .collect(),
                    ),
                );
                k.1 = name;
            }
            let Some(c) = self.claims.get_mut(&k) else {
                return Err(format!("resourceclaim {}/{} not found", k.0, k.1));
            };
            if let Some(devices) = &a.devices {
                if c.allocation.is_some() {
                    self.double_allocations.push(format!("{}/{}", k.0, k.1));
                    return Err("allocated already".into());
                }
                // A share gets its `shareID` when written (the adapter makes a UID).
                let mut devices = devices.clone();
                for (i, d) in devices.iter_mut().enumerate() {
                    if let Some(s) = &mut d.share {
                        s.id.get_or_insert_with(|| format!("share-{}-{}-{i}", k.0, k.1));
                    }
                }
                c.allocation = Some(crate::dra::AllocationInput {
                    devices,
                    nodes: a.node_selector.clone().map(|t| vec![t]),
                });
            }
            if !c.reserved_for.iter().any(|u| **u == *b.pod.uid) {
                c.reserved_for.push(b.pod.uid.to_string());
            }
            let echo = c.clone();
            self.h.input(Input::Dra(crate::dra::DraInput::Claim(echo)));
        }
        Ok(())
    }

    fn answer_bind(&mut self, b: BindIntent) {
        let uid = b.pod.uid.to_string();
        if let Err(e) = self.write_claims(&b) {
            self.h.input(Input::BindOutcome {
                uid,
                result: BindResult::PreBindFailed(e),
            });
            return;
        }
        let result = match self.pods.get_mut(&uid) {
            None => BindResult::PodGone,
            Some(p) if p.node_name.is_some() => {
                self.double_binds.push(uid.clone());
                BindResult::AlreadyBound
            }
            Some(p) => {
                p.node_name = Some(b.node.to_string());
                p.phase = PodPhase::Running;
                self.bindings.push((uid.clone(), b.node.to_string()));
                if let Some(own) = &self.own_shard {
                    for (name, s) in &self.shards {
                        let listed = s.nodes_in_use.iter().any(|n| **n == *b.node);
                        if listed != (name == own) {
                            self.shard_violations.push(format!(
                                "{uid} bound onto {}, which NodeShard {name} {} in use",
                                b.node,
                                if listed { "lists" } else { "does not list" }
                            ));
                        }
                    }
                    if !self.shards.contains_key(own) {
                        self.shard_violations
                            .push(format!("{uid} bound while NodeShard {own} does not exist"));
                    }
                }
                BindResult::Bound
            }
        };
        let echo = (result == BindResult::Bound).then(|| self.pods[&uid].clone());
        self.h.input(Input::BindOutcome { uid, result });
        if let Some(p) = echo {
            self.h.input(Input::PodApply(p));
        }
    }

    /// Answer every intent emitted so far; whether there were any.
    pub fn answer(&mut self) -> bool {
        let intents = self.h.take_intents();
        let any = !intents.is_empty();
        for i in intents {
            match i {
                Intent::Bind(b) if self.hold_binds => self.held.push(b),
                Intent::Bind(b) => self.answer_bind(b),
                Intent::Status(s) => self.statuses.push(s),
                Intent::ListNodePods(nodes) => {
                    // A consistent read: every pod the server has on those nodes, including any
                    // the engine's (simulated) watch has not delivered.
                    let on: Vec<PodInput> = self
                        .pods
                        .values()
                        .filter(|p| p.node_name.as_ref().is_some_and(|n| nodes.contains(n)))
                        .cloned()
                        .collect();
                    self.pod_lists.push(nodes.clone());
                    if self.hold_lists {
                        self.held_lists.push((nodes, on));
                    } else {
                        self.h.input(Input::NodePodsListed { nodes, pods: on });
                    }
                }
                Intent::ShardStatus(w) => {
                    // The server applies the status write; the watch echoes the object (before
                    // the answer, unless the watch is held).
                    let fail = self.fail_shard_write.take();
                    let written = match self.shards.get_mut(&*w.shard) {
                        // Failed before the server applied it.
                        Some(_) if fail == Some(false) => None,
                        Some(s) => {
                            s.nodes_in_use = w.nodes_in_use.clone();
                            s.nodes_to_add = w.nodes_to_add.clone();
                            s.nodes_to_remove = w.nodes_to_remove.clone();
                            self.shard_rv += 1;
                            s.resource_version = Some(self.shard_rv.to_string());
                            let echo = s.clone();
                            self.deliver_shard(echo);
                            Some(WrittenStatus {
                                status: w.lists(),
                                resource_version: Some(self.shard_rv.to_string()),
                            })
                        }
                        None => None,
                    };
                    // Applied, but the answer was lost (a timeout after the commit).
                    let written = written.filter(|_| fail.is_none());
                    self.shard_writes.push(w);
                    self.h.input(Input::ShardStatusWritten(written));
                }
                Intent::Preempt(p) => {
                    // The server: the nomination written (and echoed by the watch), the victims
                    // deleted (at once, unless held as terminating), the answer.
                    if let Some(pod) = self.pods.get_mut(&*p.preemptor.uid) {
                        pod.nominated_node_name = Some(p.node.to_string());
                        let echo = pod.clone();
                        self.h.input(Input::PodApply(echo));
                    }
                    for v in &p.victims {
                        if self.hold_victims {
                            continue;
                        }
                        if self.terminate_victims {
                            if let Some(pod) = self.pods.get_mut(&*v.uid) {
                                // DisruptionTarget written, then the graceful deletion.
                                pod.preempted = true;
                                pod.terminating = true;
                                let echo = pod.clone();
                                self.h.input(Input::PodApply(echo));
                            }
                        } else {
                            self.delete_pod(&v.uid);
                        }
                    }
                    self.preemptions.push(p.clone());
                    self.h.input(Input::PreemptionDone {
                        uid: p.preemptor.uid.to_string(),
                        result: Ok(()),
                    });
                }
                Intent::Deallocate(d) => {
                    // The server: the allocation cleared if the claim is still at that version.
                    let key = (d.namespace.to_string(), d.name.to_string());
                    if d.delete {
                        // A stale claim made for a pod's extended resources: deleted.
                        if !self.hold_deallocations && self.claims.remove(&key).is_some() {
                            self.h.input(Input::Dra(crate::dra::DraInput::ClaimDelete {
                                namespace: key.0.clone(),
                                name: key.1.clone(),
                            }));
                        }
                    } else if !self.hold_deallocations
                        && let Some(c) = self.claims.get_mut(&key)
                        && c.resource_version == *d.resource_version
                    {
                        c.allocation = None;
                        c.reserved_for.clear();
                        let echo = c.clone();
                        self.h.input(Input::Dra(crate::dra::DraInput::Claim(echo)));
                    }
                    self.deallocations.push(d);
                }
                Intent::Error(e) => self.errors.push(e),
            }
        }
        any
    }

    /// One round: flush, answer, a turn of every worker, hand their results to the driver.
    /// Whether anything happened.
    pub fn round(&mut self) -> bool {
        self.h.flush();
        let answered = self.answer();
        let stepped = self.h.step_all() > 0;
        let handled = self.h.results() > 0;
        answered || stepped || handled
    }

    /// Run until nothing is left to do at the current time.
    pub fn settle(&mut self) {
        for _ in 0..ROUNDS {
            if !self.round() {
                return;
            }
        }
        panic!("the engine did not settle in {ROUNDS} rounds (a livelock?)");
    }

    /// Let `d` of time pass: settle, jump to the engine's next deadline, settle again, until `d`
    /// has passed.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(d, |_| false);
    }

    /// Like [`Sim::run_for`], stopping as soon as `done` holds after settling. Whether it did.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&Sim) -> bool) -> bool {
        let end = self.h.now().saturating_add(limit);
        for _ in 0..ROUNDS {
            self.settle();
            if done(self) {
                return true;
            }
            let now = self.h.now();
            match self.h.deadline() {
                // A deadline at or before now after settling would spin the real driver.
                Some(t) if t <= now => {
                    panic!("the engine reports a passed deadline {t:?} at {now:?}")
                }
                Some(t) if t <= end => self.h.clock().set(t),
                _ => {
                    if now < end {
                        self.h.clock().set(end);
                        self.settle();
                    }
                    return done(self);
                }
            }
        }
        panic!("time did not pass in {ROUNDS} rounds (a deadline that keeps coming back?)");
    }

    pub fn bound_count(&self) -> usize {
        self.pods.values().filter(|p| p.node_name.is_some()).count()
    }

    /// The node a pod is bound to.
    pub fn node_of(&self, uid: &str) -> Option<&str> {
        self.pods.get(uid).and_then(|p| p.node_name.as_deref())
    }

    /// Requests placed on each node versus its allocatable: the nodes over it.
    pub fn overcommitted(&self) -> Vec<String> {
        let mut used: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new();
        for p in self.pods.values() {
            let Some(n) = &p.node_name else { continue };
            let e = used.entry(n.as_str()).or_default();
            for c in &p.containers {
                for (r, q) in &c.requests {
                    match r.as_str() {
                        "cpu" => e.0 += parse_scaled(r, q, 1000).expect("valid test quantity"),
                        "memory" => e.1 += parse_scaled(r, q, 1).expect("valid test quantity"),
                        _ => {}
                    }
                }
            }
            e.2 += 1;
        }
        let mut out = Vec::new();
        for (name, (cpu, mem, pods)) in used {
            let Some(n) = self.nodes.get(name) else {
                continue;
            };
            let get = |k: &str, scale| {
                n.allocatable
                    .iter()
                    .find(|(r, _)| r == k)
                    .map_or(0, |(r, q)| {
                        parse_scaled(r, q, scale).expect("valid quantity")
                    })
            };
            if cpu > get("cpu", 1000) || mem > get("memory", 1) || pods > get("pods", 1) {
                out.push(name.to_owned());
            }
        }
        out
    }

    /// Pods bound more than once, counting bind intents for already-bound pods.
    pub fn duplicate_bindings(&self) -> usize {
        let mut seen = BTreeSet::new();
        self.bindings
            .iter()
            .filter(|(u, _)| !seen.insert(u.clone()))
            .count()
            + self.double_binds.len()
    }

    /// Distinct pods that got a status intent.
    pub fn reported(&self) -> BTreeSet<String> {
        self.statuses.iter().map(|s| s.uid.to_string()).collect()
    }
}
