//! Fixtures shared by the loom models (`tests/*.rs`, built only with `RUSTFLAGS="--cfg loom"`)
//! and the real-thread stress test (`tests/stress.rs`, built only without it).
//!
//! Everything here drives real engine code: the [`Cache`], [`Shared`], [`BindVersions`] and
//! [`Core`] the engine runs, with their sync primitives swapped for loom's by `engine/src/sync.rs`.
//! The only code mirrored rather than called is the worker thread's loop ([`worker_step`]),
//! because `engine::Engine` spawns OS threads and is not built under loom.
//!
//! [`BindVersions`]: magma_engine::binder::BindVersions

use crossbeam_channel::Receiver;
use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::clock::{Clock, ManualClock, Nanos};
use magma_engine::conf::Profile;
use magma_engine::core::{BindIntent, Core, Input, Intent};
use magma_engine::model::{CPU, CompiledPod, ContainerInput, NodeInput, PodInput, compile_pod};
use magma_engine::queue::{PodState, QueueOptions};
use magma_engine::shard::{ShardStatusIntent, ShardingOptions};
use magma_engine::snapshot::{CHUNK, Snapshot};
use magma_engine::stats::Stats;
use magma_engine::sync::HandOff;
use magma_engine::worker::{Shared, Task, Worker, WorkerResult};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// A ready node with `cpu_millis` of CPU, plenty of memory and pods.
pub fn node(name: &str, cpu_millis: i64) -> NodeInput {
    NodeInput {
        name: name.into(),
        allocatable: vec![
            ("cpu".into(), format!("{cpu_millis}m")),
            ("memory".into(), "64Gi".into()),
            ("pods".into(), "110".into()),
        ],
        ready: true,
        ..Default::default()
    }
}

/// A pending pod `name` (uid `uid-<name>`) requesting `cpu_millis` of CPU.
pub fn pod(name: &str, cpu_millis: i64) -> PodInput {
    PodInput {
        uid: format!("uid-{name}"),
        namespace: "default".into(),
        name: name.into(),
        containers: vec![ContainerInput {
            requests: vec![
                ("cpu".into(), format!("{cpu_millis}m")),
                ("memory".into(), "1Mi".into()),
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Compile a pod with the cache's interner and registry, as the driver does.
pub fn compile(cache: &mut Cache, p: &PodInput) -> Arc<CompiledPod> {
    Arc::new(compile_pod(p, &mut cache.interner, &mut cache.registry).expect("valid test pod"))
}

/// The pod's CPU request, in the engine's internal unit.
pub fn cpu_request(p: &CompiledPod) -> i64 {
    p.requests
        .iter()
        .find(|&&(s, _)| s == CPU)
        .map_or(0, |&(_, a)| a)
}

/// Free CPU of `slot` as `snap` shows it.
pub fn free_cpu(snap: &Snapshot, slot: usize) -> i64 {
    snap.arena.chunk(slot / CHUNK).free(CPU, slot % CHUNK)
}

/// Allocatable CPU of `slot` as `snap` shows it.
pub fn alloc_cpu(snap: &Snapshot, slot: usize) -> i64 {
    snap.arena.chunk(slot / CHUNK).alloc(CPU, slot % CHUNK)
}

/// DESIGN.md §3 "Bind versions", checked on a snapshot some thread holds: `S.v(n) ≤ c(n)`, and
/// when they are equal, `S` contains every pod claimed on `n`. Claims only ever place pods of
/// `request` CPU on `n`, and `bumps` is the number of non-claim increments of its counter, so
/// equality means the snapshot must show exactly `(c(n) − bumps) × request` in use.
pub fn check_version_invariant(
    snap: &Snapshot,
    versions: &BindVersions,
    slot: usize,
    bumps: u64,
    request: i64,
) {
    let seen = snap.version(slot);
    // Loaded after the snapshot: the counter can only have grown since.
    let counter = versions.current(slot);
    assert!(
        seen <= counter,
        "snapshot {} shows version {seen} of slot {slot}, ahead of its counter {counter}",
        snap.seq
    );
    if seen == counter {
        let claims = counter - bumps;
        let used = alloc_cpu(snap, slot) - free_cpu(snap, slot);
        assert_eq!(
            used,
            claims as i64 * request,
            "snapshot {} has the counter's version {seen} of slot {slot} but not all {claims} claimed pods",
            snap.seq
        );
    }
}

/// The driver side of a model: the real [`Core`] (cache + queue + hand-off pump) with the
/// [`Shared`] state its workers use, a manual clock, and the intents it emitted.
pub struct Driver {
    pub core: Core,
    pub shared: Arc<Shared>,
    pub handoff: HandOff<Task>,
    pub stats: Arc<Stats>,
    pub clock: Arc<ManualClock>,
    intents: Receiver<Intent>,
    /// Every bind intent emitted so far.
    pub binds: Vec<BindIntent>,
    /// Every NodeShard status intent emitted so far (sharding on).
    pub shard_statuses: Vec<ShardStatusIntent>,
}

impl Driver {
    /// A driver for `workers` workers with a hand-off of `capacity` tasks.
    pub fn new(workers: usize, capacity: usize) -> Driver {
        Driver::build(workers, capacity, None)
    }

    /// The same, scheduling within a NodeShard (`Core::with_sharding`).
    pub fn sharded(workers: usize, capacity: usize, sharding: ShardingOptions) -> Driver {
        Driver::build(workers, capacity, Some(sharding))
    }

    fn build(workers: usize, capacity: usize, sharding: Option<ShardingOptions>) -> Driver {
        let versions = Arc::new(BindVersions::default());
        let profile = Arc::new(Profile::default());
        let mut cache = Cache::new(versions.clone(), profile.clone());
        let first = cache
            .publish()
            .unwrap_or_else(|| Arc::new(Snapshot::empty(profile)));
        let shared = Arc::new(Shared::new(workers, first, versions));
        let stats = Arc::new(Stats::new(workers));
        let handoff = HandOff::new(capacity);
        let (itx, intents) = crossbeam_channel::unbounded();
        let core = Core::new(
            cache,
            QueueOptions::default(),
            handoff.clone(),
            shared.clone(),
            itx,
            stats.clone(),
        );
        let core = match sharding {
            Some(opts) => core.with_sharding(opts),
            None => core,
        };
        Driver {
            core,
            shared,
            handoff,
            stats,
            clock: Arc::new(ManualClock::new(Nanos(1))),
            intents,
            binds: Vec::new(),
            shard_statuses: Vec::new(),
        }
    }

    pub fn input(&mut self, input: Input) {
        let now = self.clock.now();
        self.core.handle(input, now);
        self.collect();
    }

    /// Publish, move due pods, refill the hand-off (what the driver does after every batch).
    pub fn flush(&mut self) {
        let now = self.clock.now();
        self.core.flush(now, || 0);
        self.collect();
    }

    fn collect(&mut self) {
        while let Ok(i) = self.intents.try_recv() {
            match i {
                Intent::Bind(b) => self.binds.push(b),
                Intent::ShardStatus(s) => self.shard_statuses.push(s),
                _ => {}
            }
        }
    }

    /// Handle every worker result waiting in `inbox`; returns how many there were.
    pub fn handle_results(&mut self, inbox: &HandOff<WorkerResult>) -> usize {
        let mut n = 0;
        while let Some(r) = inbox.try_pop() {
            self.input(Input::Worker(r));
            n += 1;
        }
        n
    }

    /// The engine's stop path (`engine::drive` on `Msg::Stop`), after every worker has exited.
    pub fn stop(&mut self, inbox: &HandOff<WorkerResult>) {
        self.handle_results(inbox);
        self.core.drain_handoff();
        self.flush();
        self.core.drain_handoff();
    }

    /// Everything settled (no worker running, every result handled): check that each pod is in
    /// exactly one defined state and that the books balance. DESIGN.md §3 "No lost pod",
    /// "No double booking", "Bind versions".
    pub fn check_settled(&self) {
        let core = &self.core;
        assert_eq!(core.audit(), vec![], "audit");
        // No pod lost in flight: with every worker gone and the hand-off drained, nothing may
        // still be marked as handed off.
        for (uid, e) in core.queue().iter() {
            assert_ne!(e.state, PodState::InFlight, "pod {uid} lost in flight");
        }
        // No pod delivered twice.
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
            .filter(|(_, e)| e.state == PodState::Binding)
            .map(|(u, _)| u.to_string())
            .collect();
        let placed: BTreeSet<String> = core.cache().placed_uids().into_iter().collect();
        assert_eq!(placed, binding, "assumed pods vs binding pods");
        for uid in &placed {
            assert!(core.cache().placement(uid).is_some_and(|p| p.assumed));
        }
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

/// One turn of a worker thread, as `engine::Engine::start` runs it: take a task if one is
/// ready, run the real scheduling cycle, send the result, and only then leave the epoch.
/// Returns whether there was a task.
pub fn worker_step(
    worker: &mut Worker,
    shared: &Shared,
    stats: &Stats,
    clock: &dyn Clock,
    handoff: &HandOff<Task>,
    inbox: &HandOff<WorkerResult>,
) -> bool {
    worker_step_observed(worker, shared, stats, clock, handoff, inbox, |_| {})
}

/// [`worker_step`], letting the model look at the result (e.g. record a claim in its ledger)
/// after the cycle and before the result is sent, i.e. while the worker is still in its epoch.
pub fn worker_step_observed(
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
    let result = worker.cycle(shared, &stats.workers[worker.id], clock, task);
    observe(&result);
    assert!(inbox.try_push(result).is_ok(), "model inbox too small");
    shared.leave(worker.id);
    true
}

/// Stack of every model thread. Loom runs threads as coroutines with 32 KiB stacks by default;
/// the driver's cache and the workers' scheduling cycle need more.
#[cfg(loom)]
const STACK: usize = 1 << 20;

/// `loom::thread::spawn` with a stack large enough for the engine's code.
#[cfg(loom)]
pub fn spawn<F, T>(f: F) -> loom::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    loom::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .expect("loom spawn")
}

/// `loom::model`, with the model's body on a thread with a large stack (the model's own thread
/// has the default coroutine stack). Bounds come from the environment (`LOOM_MAX_PREEMPTIONS`).
#[cfg(loom)]
pub fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let f = Arc::new(f);
    loom::model(move || {
        let f = f.clone();
        spawn(move || f()).join().expect("model body panicked");
    });
}
