//! The engine runtime: one driver thread (the single writer, running `core::Core`) and its
//! workers (N threads, or with one worker the driver itself), wired together. This is the only
//! module that spawns threads; it reads time only through the injected `Clock` and waits only
//! on channels.
//!
//! With one worker (`--scheduler-worker-count=1`, upstream's default) there is no worker thread:
//! the driver runs the worker's turn itself ([`OnDriver`]) for the pod its last flush handed off,
//! takes the result as if it had arrived on its inbox, and flushes before the next turn once a
//! turn has claimed a node. One scheduling cycle at a time either way, but no thread hand-off
//! per pod: a worker thread costs each pod two wake-ups (driver → worker through the hand-off,
//! worker → driver through the inbox), which on a small machine cost more than the cycle they
//! run (BENCHMARKS.md, "History"). The protocols do not change: the driver announces and leaves
//! worker 0's epoch, claims with the same CAS, and handles the result in the same order as a
//! thread's.
//!
//! Embedders (the kube adapter, the perf harness) feed [`Input`]s through an [`EngineHandle`]
//! and consume [`Intent`]s from [`Engine::intents`]. [`Engine::shutdown`] stops the workers,
//! lets the driver account for every result already produced, returns the pods still waiting
//! in the hand-off to the queue, and hands back the `Core` for inspection.

use crate::binder::BindVersions;
use crate::cache::Cache;
use crate::clock::{Clock, Nanos};
use crate::conf::Profile;
use crate::core::{Core, Input, Intent};
use crate::queue::QueueOptions;
use crate::snapshot::Snapshot;
use crate::stats::{Stats, StatsSnapshot};
use crate::sync::HandOff;
use crate::worker::{Outcome, Shared, Task, Worker};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Workers (`--scheduler-worker-count`), > 0: scheduling cycles run in parallel. One worker
    /// runs on the driver's thread (the module doc); more are threads of their own.
    pub workers: usize,
    /// Pin worker `i` to core `i mod cores` (`core_affinity`); with one worker, the driver that
    /// runs it to the first core.
    pub pin_workers: bool,
    pub queue: QueueOptions,
    /// Capacity of the worker hand-off; bounds priority inversion (a newly most-urgent pod waits
    /// behind at most this many pods already handed off). Default `max(16, 8 × workers)`: deep
    /// enough that worker threads rarely park between pods, shallow enough to cost well under a
    /// millisecond of inversion. With one worker, on the driver, 1: the driver refills it at
    /// every flush, so the next pod decided is always the queue's first.
    pub handoff_capacity: Option<usize>,
    /// At most this many pods handed off or binding at once (`None`: no bound). The adapter
    /// sizes its bind queue to it, so the engine, not a blocked channel, holds pods back when
    /// binds are the bottleneck.
    pub max_binds_in_flight: Option<usize>,
    pub profile: Profile,
    /// `--scheduler-sharding-mode` and `--scheduler-sharding-name`.
    pub sharding: crate::shard::ShardingOptions,
    /// Longest the driver waits without any input before it looks at the queue's timers.
    pub idle_tick: Duration,
    /// DefaultPreemption (`preemption`): an unschedulable pod may evict pods of lower priority.
    /// On by default, as kube-scheduler's.
    pub preemption: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            workers: 1,
            pin_workers: false,
            queue: QueueOptions::default(),
            handoff_capacity: None,
            max_binds_in_flight: None,
            profile: Profile::default(),
            sharding: crate::shard::ShardingOptions::default(),
            idle_tick: Duration::from_millis(100),
            preemption: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("scheduler-worker-count must be greater than 0")]
    NoWorkers,
    #[error("failed to spawn a thread: {0}")]
    Spawn(String),
}

#[allow(clippy::large_enum_variant)] // see `Input`
enum Msg {
    Input(Input),
    Stop,
}

/// Cloneable sender of inputs.
#[derive(Clone)]
pub struct EngineHandle {
    tx: Sender<Msg>,
}

impl EngineHandle {
    /// Hand an input to the engine. Returns `false` once the engine has stopped.
    pub fn send(&self, input: Input) -> bool {
        self.tx.send(Msg::Input(input)).is_ok()
    }
}

pub struct Engine {
    tx: Sender<Msg>,
    intents: flume::Receiver<Intent>,
    shared: Arc<Shared>,
    stats: Arc<Stats>,
    driver: Option<JoinHandle<Core>>,
    workers: Vec<JoinHandle<()>>,
    /// Dropped to wake the workers that wait for a task (after `shared.stop()`); nothing is
    /// ever sent on it.
    wake_to_stop: Option<Sender<std::convert::Infallible>>,
}

impl Engine {
    pub fn start(opts: EngineOptions, clock: Arc<dyn Clock>) -> Result<Engine, EngineError> {
        if opts.workers == 0 {
            return Err(EngineError::NoWorkers);
        }
        let versions = Arc::new(BindVersions::default());
        let profile = Arc::new(opts.profile.clone());
        let mut cache = Cache::new(versions.clone(), profile.clone());
        // The first snapshot already carries the view sharding starts with (hard: no node).
        let s = &opts.sharding;
        cache.set_view(crate::shard::View::new(s.mode, &s.shard_name, None));
        let first = cache
            .publish()
            .unwrap_or_else(|| Arc::new(Snapshot::empty(profile)));
        let shared = Arc::new(Shared::new(opts.workers, first, versions));
        let stats = Arc::new(Stats::new(opts.workers));
        // One worker runs on the driver (module doc): no worker thread, a hand-off of one.
        let single = opts.workers == 1;
        let handoff = HandOff::new(opts.handoff_capacity.unwrap_or(if single {
            1
        } else {
            (8 * opts.workers).max(16)
        }));
        let (tx, rx) = crossbeam_channel::unbounded::<Msg>();
        let (itx, irx) = flume::unbounded::<Intent>();
        let (wake_to_stop, stop_rx) = crossbeam_channel::bounded(0);
        let core = Core::new(
            cache,
            opts.queue,
            handoff.clone(),
            shared.clone(),
            itx,
            stats.clone(),
        )
        .with_sharding(opts.sharding)
        .with_max_binds_in_flight(opts.max_binds_in_flight.unwrap_or(usize::MAX))
        .with_preemption(opts.preemption);

        let cores = if opts.pin_workers {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let on_driver = single.then(|| OnDriver {
            worker: Worker::new(0),
            handoff: handoff.clone(),
            shared: shared.clone(),
            stats: stats.clone(),
        });
        let threads = if single { 0 } else { opts.workers };
        let mut workers = Vec::with_capacity(threads);
        for id in 0..threads {
            let (shared, stats, clock, handoff, tx, stop_rx) = (
                shared.clone(),
                stats.clone(),
                clock.clone(),
                handoff.clone(),
                tx.clone(),
                stop_rx.clone(),
            );
            let pin = (!cores.is_empty()).then(|| cores[id % cores.len()]);
            let h = std::thread::Builder::new()
                .name(format!("magma-worker-{id}"))
                .spawn(move || {
                    if let Some(core) = pin {
                        core_affinity::set_for_current(core);
                    }
                    let mut w = Worker::new(id);
                    let counters = &stats.workers[id];
                    while !shared.stopping() {
                        // `None`: stopping (the wake channel is dropped only after the flag).
                        let Some(task) = handoff.pop_until(&stop_rx) else {
                            break;
                        };
                        w.turn(&shared, counters, &*clock, task, |r| {
                            let _ = tx.send(Msg::Input(Input::Worker(r)));
                        });
                    }
                })
                .map_err(|e| EngineError::Spawn(e.to_string()))?;
            workers.push(h);
        }
        let idle_tick = opts.idle_tick;
        let pin = on_driver.as_ref().and(cores.first().copied());
        let driver = std::thread::Builder::new()
            .name("magma-driver".into())
            .spawn(move || {
                if let Some(id) = pin {
                    core_affinity::set_for_current(id);
                }
                drive(core, rx, clock, idle_tick, on_driver)
            })
            .map_err(|e| EngineError::Spawn(e.to_string()))?;
        Ok(Engine {
            tx,
            intents: irx,
            shared,
            stats,
            driver: Some(driver),
            workers,
            wake_to_stop: Some(wake_to_stop),
        })
    }

    pub fn handle(&self) -> EngineHandle {
        EngineHandle {
            tx: self.tx.clone(),
        }
    }

    /// What the engine asks of the outside world, in emission order: received with `recv` on
    /// a thread, or `recv_async` in a task (the adapter's router, which then wakes no thread
    /// of its own per intent).
    pub fn intents(&self) -> &flume::Receiver<Intent> {
        &self.intents
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The shared counters (cheap to clone; for metrics collectors that outlive a borrow).
    pub fn stats_handle(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Pods per sub-queue as of the driver's last flush.
    pub fn queue_depths(&self) -> crate::queue::QueueDepths {
        self.stats.queue_depths()
    }

    /// The snapshot workers currently schedule against.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot()
    }

    /// Leading: workers claim. Not leading: in-flight pods go back untouched, nothing is
    /// handed off, and nothing new is claimed from the moment this returns.
    pub fn set_leading(&self, leading: bool) {
        (self.leading_setter())(leading)
    }

    /// An owned switch for [`Engine::set_leading`], for tasks that outlive a borrow.
    pub fn leading_setter(&self) -> impl Fn(bool) + Send + Sync + 'static {
        let shared = self.shared.clone();
        let tx = self.tx.clone();
        move |leading| {
            // Workers stop claiming at once; the driver learns of it in order with its other
            // inputs (a true → false → true flip is two inputs, so no term start is lost).
            shared.set_leading(leading);
            let _ = tx.send(Msg::Input(Input::Leadership(leading)));
        }
    }

    /// Stop the workers, let the driver account for every result, return the `Core`.
    pub fn shutdown(mut self) -> Core {
        self.shared.stop();
        self.wake_to_stop.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        let _ = self.tx.send(Msg::Stop);
        self.driver
            .take()
            .expect("driver runs until shutdown")
            .join()
            .expect("driver thread panicked")
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shared.stop();
        self.wake_to_stop.take();
        let _ = self.tx.send(Msg::Stop);
    }
}

/// Most inputs the driver takes before it publishes and refills the hand-off. Large enough to
/// coalesce many changes into one publication, small enough that a flood of new pods (a burst
/// of 100k) does not keep the workers waiting for the first one.
const MAX_BATCH: usize = 4096;

/// The one worker of a single-worker engine, run by the driver between its flushes.
struct OnDriver {
    worker: Worker,
    handoff: HandOff<Task>,
    shared: Arc<Shared>,
    stats: Arc<Stats>,
}

impl OnDriver {
    /// Run the worker's turn for the pods in the hand-off (only a flush refills it), each result
    /// handled by `core` as soon as it is produced, until a turn claims a node (or burns a
    /// version, or meets a conflict): the driver then flushes before the next turn, so every
    /// decision sees every claim made before it, as a sequential scheduler assumes a pod before
    /// its next cycle. (Decided on one snapshot, a batch would all pick the node the first pod
    /// just claimed, and with packing scores the rest would be retried.) Stops taking pods once
    /// the engine is stopping, as a worker thread does. Returns whether any turn ran: its result
    /// is then unpublished, and the driver must flush before it waits.
    fn run(&mut self, core: &mut Core, clock: &dyn Clock) -> bool {
        let mut ran = false;
        while !self.shared.stopping() {
            let Some(task) = self.handoff.try_pop() else {
                break;
            };
            let counters = &self.stats.workers[self.worker.id];
            let mut claimed = false;
            self.worker.turn(&self.shared, counters, clock, task, |r| {
                claimed = !matches!(r.outcome, Outcome::Unschedulable(_) | Outcome::Paused);
                core.handle(Input::Worker(r), clock.now())
            });
            ran = true;
            if claimed {
                break;
            }
        }
        ran
    }
}

fn drive(
    mut core: Core,
    rx: Receiver<Msg>,
    clock: Arc<dyn Clock>,
    idle_tick: Duration,
    mut on_driver: Option<OnDriver>,
) -> Core {
    let now_nanos = || clock.now().0;
    let mut deadline: Option<Nanos> = None;
    // The driver ran turns since its last flush: take what is queued without waiting, flush.
    let mut ran = false;
    loop {
        let now = clock.now();
        let wait = deadline.map_or(idle_tick, |d| d.saturating_since(now).min(idle_tick));
        let mut stop = false;
        let next = if ran {
            rx.try_recv().map_err(|e| match e {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            rx.recv_timeout(wait)
        };
        match next {
            Ok(Msg::Input(i)) => {
                core.handle(i, clock.now());
                // Coalesce: everything already queued goes into the same publication.
                for _ in 0..MAX_BATCH {
                    match rx.try_recv() {
                        Ok(Msg::Input(i)) => core.handle(i, clock.now()),
                        Ok(Msg::Stop) => {
                            stop = true;
                            break;
                        }
                        Err(_) => break,
                    }
                }
            }
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => stop = true,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if stop {
            core.drain_handoff();
            core.flush(clock.now(), now_nanos);
            core.drain_handoff();
            return core;
        }
        deadline = core.flush(clock.now(), now_nanos);
        ran = on_driver
            .as_mut()
            .is_some_and(|w| w.run(&mut core, &*clock));
    }
}
