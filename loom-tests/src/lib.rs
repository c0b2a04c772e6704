//! Fixtures shared by the loom models (`tests/*.rs`, built only with `RUSTFLAGS="--cfg loom"`)
//! and the real-thread stress test (`tests/stress.rs`, built only without it).
//!
//! Everything here drives real engine code: the [`Cache`], [`Shared`] and [`BindVersions`] the
//! engine runs, with their sync primitives swapped for loom's by `engine/src/sync.rs`. Models of
//! the driver use the engine's own deterministic harness (`magma_engine::testing::Harness`: the
//! real `Core`, and workers running `Worker::turn`, the loop body every worker thread runs), so
//! nothing of the engine is mirrored here.
//!
//! [`Shared`]: magma_engine::worker::Shared

use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::model::{CPU, CompiledPod, NodeInput, PodInput};
use magma_engine::queue::PodState;
use magma_engine::snapshot::{CHUNK, Snapshot};
use magma_engine::testing::{HarnessOptions, mk_node, mk_pod};
use std::sync::Arc;

pub use magma_engine::testing::Harness;

/// A ready node with `cpu_millis` of CPU, plenty of memory and pods.
pub fn node(name: &str, cpu_millis: i64) -> NodeInput {
    mk_node(name, &format!("{cpu_millis}m"), "64Gi", 110)
}

/// A pending pod `name` (uid `uid-<name>`) requesting `cpu_millis` of CPU.
pub fn pod(name: &str, cpu_millis: i64) -> PodInput {
    mk_pod(name, &format!("{cpu_millis}m"), "1Mi")
}

/// Compile a pod with the cache's interner and registry, as the driver does.
pub fn compile(cache: &mut Cache, p: &PodInput) -> Arc<CompiledPod> {
    Arc::new(cache.compile_pod(p).expect("valid test pod"))
}

/// A harness for `workers` workers with a hand-off of `capacity` tasks (loom's coroutines
/// explore every interleaving of a few pods; small queues keep the models finite).
pub fn harness(workers: usize, capacity: usize) -> Harness {
    Harness::new(HarnessOptions {
        workers,
        handoff_capacity: capacity,
        ..HarnessOptions::default()
    })
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

/// Two workers each take one task from the hand-off and decide it at once, on the view they
/// were handed (`observe` sees each worker's result); then the model's thread settles: results
/// applied, the next view published, what is left decided one at a time by worker 0, until
/// nothing is left. Returns what each worker's `observe` returned.
#[cfg(loom)]
pub fn race_then_settle<T: Send + 'static>(
    d: &mut Harness,
    observe: fn(&magma_engine::worker::WorkerResult) -> T,
) -> Vec<Option<T>> {
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let mut worker = d.worker(w);
            spawn(move || {
                let mut seen = None;
                worker.step_observed(|r| seen = Some(observe(r)));
                (worker, seen)
            })
        })
        .collect();
    let mut seen = Vec::new();
    for w in workers {
        let (worker, s) = w.join().unwrap();
        seen.push(s);
        d.give_back(worker);
    }
    while d.results() + usize::from(d.step(0)) > 0 {
        d.flush();
    }
    d.flush();
    seen
}

/// Of two pods `uid-<a>` and `uid-<b>`, the one `winners` (exactly one) does not name is still
/// the engine's and reported unschedulable: not lost, not bound.
pub fn other_is_unschedulable(d: &Harness, winners: &[&str], a: &str, b: &str) {
    assert_eq!(winners.len(), 1, "exactly one of them gets it: {winners:?}");
    let (a, b) = (format!("uid-{a}"), format!("uid-{b}"));
    let left = if winners[0] == a { b } else { a };
    let e = d
        .core()
        .queue()
        .get(&left)
        .expect("the other pod is still ours");
    assert!(
        matches!(e.state(), PodState::Unschedulable { .. }),
        "{left} is {:?}, not reported unschedulable",
        e.state()
    );
}
