//! The driver's state machine: the single writer that owns the cache and the queue.
//!
//! It consumes [`Input`]s (cluster events from the adapter, worker results, bind outcomes,
//! configuration updates) and produces [`Intent`]s (bind this pod to that node; write this
//! status) — no I/O, no clock: `now` is passed in. After a batch of inputs, [`Core::flush`]
//! publishes one snapshot for all the changes (coalescing), moves due pods between sub-queues,
//! and tops up the worker hand-off in queue order. Sharding's part of a flush (the view the
//! publication carries, the status to write after it) is `shard::Sharding`'s.
//!
//! Lifecycle of a pod it owns (DESIGN.md §3 "No lost pod"): exactly one of gated, activeQ,
//! backoffQ, unschedulable pool, in flight (hand-off or worker), binding — until the bind
//! succeeds or the pod is deleted. [`Core::audit`] checks this and the capacity invariant.
//!
//! A pod is decided once per attempt, and never again once its binding has succeeded: the
//! bind's answer removes it from the queue and leaves its placement assumed until the watch
//! echoes the binding. Updates of the still-pending pod that the watch delivers in between
//! (the echo of an earlier `PodScheduled=False`, say) are older than the binding and are
//! ignored; queued again, the pod would be decided again, and that second claim would move its
//! placement off the node it is bound to, leaving the node under-counted until the echo came
//! (an overcommit; found by the rebalance test of `sharding_e2e`).

use crate::allocate::{Backlog, FailureSummary, failure_message};
use crate::cache::{Cache, CacheError};
use crate::clock::Nanos;
use crate::conf::Profile;
use crate::event::{self, Events};
use crate::model::{CompiledPod, NamespaceInput, NodeInput, PodInput};
use crate::mutation;
use crate::queue::{PodState, QueueDepths, QueueOptions, SchedulingQueue};
use crate::shard::{
    ShardInput, ShardStatusIntent, Sharding, ShardingMode, ShardingOptions, WrittenStatus,
};
use crate::snapshot::Snapshot;
use crate::stats::{Stats, inc};
use crate::sync::HandOff;
use crate::volumes::StorageInput;
use crate::worker::{Outcome, Shared, Task, WorkerResult};
use flume::Sender;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// Something happened that the engine must know.
// Worker results are the most frequent input; moving them by value through the channel is
// cheaper than a box per pod.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Input {
    NodeApply(NodeInput),
    NodeDelete(String),
    /// A relist: this is the complete node set.
    NodeReset(Vec<NodeInput>),
    /// A pod was added or changed. Pending pods must be ones this scheduler owns; assigned pods
    /// (`node_name` set) may come from any scheduler.
    PodApply(PodInput),
    PodDelete {
        uid: String,
    },
    /// A pod left the pending set (deleted, or bound — the assigned-pods watch reports that).
    /// Only the queue forgets it; a pod whose bind is in flight waits for the bind outcome.
    PendingPodDelete {
        uid: String,
    },
    /// A relist of the pending pods this scheduler owns (the complete set). Queued pods not in
    /// it are gone (deleted or bound elsewhere); pods whose bind is in flight are left to the
    /// bind outcome.
    PendingPodReset(Vec<PodInput>),
    /// A relist of the assigned pods (the complete set, any scheduler). Placements not in it are
    /// dropped, except our own assumptions whose binding the watch has not shown yet.
    BoundPodReset(Vec<PodInput>),
    Profile(Arc<Profile>),
    /// A PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode changed (`volumes`).
    Storage(StorageInput),
    /// A ResourceClaim changed (`dra`).
    Dra(crate::dra::DraInput),
    /// A PodDisruptionBudget changed (`pdb`).
    Pdb(crate::pdb::PdbChange),
    /// The adapter finished a preemption's API calls ([`Intent::Preempt`]) for the pod `uid`:
    /// `Ok`, or the error that stopped them (the nomination is then reverted).
    PreemptionDone {
        uid: String,
        result: Result<(), String>,
    },
    /// A namespace was added or its labels changed (pod affinity `namespaceSelector`).
    NamespaceApply(NamespaceInput),
    NamespaceDelete(String),
    /// A relist of the namespaces (the complete set).
    NamespaceReset(Vec<NamespaceInput>),
    /// A NodeShard was added or changed (ignored in sharding mode `none`).
    ShardApply(ShardInput),
    ShardDelete(String),
    /// A relist of the NodeShards (the complete set).
    ShardReset(Vec<ShardInput>),
    /// The outcome of an [`Intent::ShardStatus`]: the status as written, or `None` if the write
    /// failed (it is retried).
    ShardStatusWritten(Option<WrittenStatus>),
    /// The answer to an [`Intent::ListNodePods`]: the pods of these nodes, listed afresh.
    NodePodsListed {
        nodes: Vec<String>,
        /// Every pod the list returned for those nodes.
        pods: Vec<PodInput>,
    },
    /// Leadership changed (`Engine::set_leading`): while not leading nothing is handed off or
    /// written. Ordered with the other inputs, so a lost-and-regained lease is a new term
    /// (`shard` rule 5) however quickly it flips.
    Leadership(bool),
    /// Nothing happened, but look at the queue now.
    Tick,
    BindOutcome {
        uid: String,
        result: BindResult,
    },
    Worker(WorkerResult),
}

/// What the API server said to a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindResult {
    Bound,
    /// 409: the pod is already bound (by us earlier, or by someone else).
    AlreadyBound,
    /// 404: the pod no longer exists.
    PodGone,
    /// 429/5xx/timeout or any other error: retry after backoff.
    Failed(String),
    /// PreBind (volumes) failed before the binding was sent: retry after backoff.
    PreBindFailed(String),
    /// Not sent (e.g. leadership was lost first): the assumption is dropped and the pod goes
    /// back to activeQ without a status write; whoever leads next schedules it.
    Abandoned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusReason {
    Unschedulable,
    SchedulerError,
}

impl StatusReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::Unschedulable => "Unschedulable",
            StatusReason::SchedulerError => "SchedulerError",
        }
    }
}

/// Bind `pod` to `node`.
#[derive(Debug, Clone)]
pub struct BindIntent {
    pub pod: Arc<CompiledPod>,
    pub node: Arc<str>,
    /// Claims to provision on `node` first (`WaitForFirstConsumer`): write
    /// `volume.kubernetes.io/selected-node` on each, wait until each is bound (at most
    /// `volume_timeout`), then bind the pod (kube-scheduler's VolumeBinding PreBind).
    pub provision: Vec<(Arc<str>, Arc<str>)>,
    /// Claims to bind to existing PVs first (static binding, `volumes::matching`): write each
    /// PV's `claimRef`, then wait, with `provision`, until every claim is bound.
    pub bind_pvs: Vec<StaticBinding>,
    /// The pod's ResourceClaims (DynamicResources PreBind): write each claim's allocation
    /// where it has none yet (`devices`), and the pod into its `status.reservedFor`, before
    /// the binding.
    pub devices: Vec<crate::dra::ClaimAllocation>,
    pub volume_timeout: Duration,
    pub arrived: Nanos,
    pub popped: Nanos,
    pub claimed: Nanos,
}

/// A claim by (namespace, name).
type ClaimRef = (Arc<str>, Arc<str>);

/// A pod, by identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub uid: Arc<str>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

/// What a preemption writes (`Intent::Preempt`).
#[derive(Debug, Clone)]
pub struct PreemptIntent {
    pub preemptor: PodRef,
    pub node: Arc<str>,
    /// The pods to evict, most important first (those already terminating are left out: no
    /// call is needed for them).
    pub victims: Vec<PodRef>,
    /// Pods of lower priority nominated to the node: their `status.nominatedNodeName` is
    /// cleared.
    pub unnominate: Vec<PodRef>,
}

/// A claim to bind to an existing PersistentVolume (`BindIntent::bind_pvs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticBinding {
    pub namespace: Arc<str>,
    pub claim: Arc<str>,
    pub pv: Arc<str>,
}

/// Write a `PodScheduled=False` condition and a `FailedScheduling` event.
#[derive(Debug, Clone)]
pub struct StatusIntent {
    pub uid: Arc<str>,
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub reason: StatusReason,
    pub message: Arc<str>,
    /// Also clear `status.nominatedNodeName` (a failed binding: kube-scheduler's
    /// `clearNominatedNode`).
    pub clear_nominated: bool,
}

#[derive(Debug, Clone)]
pub enum Intent {
    Bind(BindIntent),
    Status(StatusIntent),
    /// Preempt for a pod (`preemption`): write its nomination, clear the lower-priority
    /// nominations on the node, and delete the victims gracefully; answer with
    /// [`Input::PreemptionDone`].
    Preempt(PreemptIntent),
    /// Clear a ResourceClaim's allocation (`status.allocation` and `status.reservedFor`, on the
    /// condition that the claim is still at `resource_version`): a pod names it that fits on no
    /// node its allocation allows (upstream's DynamicResources PostFilter). The claim's next
    /// version comes back through the watch and wakes the pod.
    Deallocate(crate::dra::Deallocation),
    /// Write our own NodeShard's status (`shard` module: only when the worker-sync rule allows).
    ShardStatus(ShardStatusIntent),
    /// List the pods of these nodes afresh (a consistent read) and answer with
    /// [`Input::NodePodsListed`]: the nodes were acquired from another shard
    /// (`shard` module, rule 6). Retry until it succeeds.
    ListNodePods(Vec<String>),
    /// Input the engine rejected (for the embedder's log); the engine keeps going.
    Error(CoreError),
}

/// A violated invariant found by [`Core::audit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditError {
    Overcommitted {
        node: String,
        resource: String,
        used: i64,
        allocatable: i64,
    },
    QueueDepthMismatch {
        counted: QueueDepths,
        recorded: QueueDepths,
    },
}

/// Errors the driver reports to the embedder (for its log); the engine keeps going.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("node rejected: {0}")]
    Node(#[from] CacheError),
    #[error("storage object rejected: {0}")]
    Storage(crate::model::ModelError),
    #[error("pod {namespace}/{name} rejected: {error}")]
    Pod {
        namespace: String,
        name: String,
        error: crate::model::ModelError,
    },
}

pub struct Core {
    cache: Cache,
    queue: SchedulingQueue,
    handoff: HandOff<Task>,
    shared: Arc<Shared>,
    intents: Sender<Intent>,
    stats: Arc<Stats>,
    /// Reasons accumulated since the last flush, applied to the pool once per flush.
    pending_events: Events,
    /// Recent wake-ups: (first snapshot sequence containing the change, reasons it helps).
    /// A worker that decided "unschedulable" on an older snapshot missed them (the pool was
    /// woken before its pod entered it), so its pod is retried instead of parked.
    /// (snapshot seq, wake number, events) of recent flushes' cluster events.
    wakes: std::collections::VecDeque<(u64, u64, Events)>,
    /// Wake-ups recorded so far (numbers the `wakes` entries; a task carries the number it was
    /// handed off after).
    wake_no: u64,
    /// Sharding (`shard` module); `None` in mode `none`.
    shard: Option<Sharding>,
    /// See [`Core::with_max_binds_in_flight`].
    max_binds_in_flight: usize,
    /// As the last `Input::Leadership` said (initially: as `Shared` says at construction).
    leading: bool,
    /// The lane task in flight (uid, generation): no other is handed off until its result is
    /// applied and published (`docs/constraints.md`).
    lane_busy: Option<(Arc<str>, u64)>,
    /// Where the next preemption search starts (upstream starts at a random offset).
    preemption_offset: usize,
    /// DefaultPreemption is on (the default; `Core::set_preemption`).
    preemption: bool,
    /// Pods moved back from the pool for the room a removal freed on a node (uid → node slot):
    /// if such a pod's next attempt does not take that room, the node's room is judged again
    /// (`wake_for_room`), so no waiting pod is left behind room nobody took.
    room_woken: crate::FastMap<Arc<str>, u32>,
    /// Pods by the ResourceClaims they name, registered each time such a pod is resolved
    /// (`pump`): a change to one of those claims retries them (kube-scheduler's queueing hint
    /// for claims), where a cluster-wide event would wake every pod with claims. An entry is
    /// taken whole when its claim changes; the pods re-register when next resolved.
    claim_waiters: crate::FastMap<crate::dra::ClaimKey, Vec<Arc<str>>>,
    /// Pods handed off whose claim changed meanwhile: an unschedulable decision is retried.
    claims_touched: foldhash::HashSet<Arc<str>>,
    /// Pods held back by upstream's PreEnqueue reasons (`hold_back`), reported only if still
    /// held [`HOLD_REPORT_GRACE`] later: (when, pod, message) by uid, and the uids in the order
    /// they are due.
    held: crate::FastMap<Arc<str>, (Nanos, Arc<CompiledPod>, String)>,
    held_due: std::collections::VecDeque<(Nanos, Arc<str>)>,
}

/// How long a pod may wait for its ResourceClaim to be made (by the resource-claim
/// controller, usually within milliseconds) before it is reported unschedulable. Upstream
/// reports such a pod never (its PreEnqueue keeps it out of the queue); Magma reports every
/// waiting pod, but not the ordinary wait of a pod whose template's claim is on its way: that
/// would double the API writes of a burst of such pods.
pub const HOLD_REPORT_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Wake-ups remembered for stale unschedulable decisions.
const WAKE_HISTORY: usize = 256;

impl Core {
    pub fn new(
        cache: Cache,
        queue_opts: QueueOptions,
        handoff: HandOff<Task>,
        shared: Arc<Shared>,
        intents: Sender<Intent>,
        stats: Arc<Stats>,
    ) -> Core {
        Core {
            leading: shared.leading(),
            cache,
            queue: SchedulingQueue::new(queue_opts),
            handoff,
            shared,
            intents,
            stats,
            pending_events: 0,
            wakes: std::collections::VecDeque::new(),
            wake_no: 0,
            shard: None,
            max_binds_in_flight: usize::MAX,
            lane_busy: None,
            room_woken: Default::default(),
            claim_waiters: Default::default(),
            claims_touched: Default::default(),
            held: Default::default(),
            held_due: Default::default(),
            preemption_offset: 0,
            preemption: true,
        }
    }

    /// At most `n` pods handed off or binding at once (backpressure from the bind executor:
    /// the adapter's bind queue holds at least this many, so handing the engine's intents on
    /// never waits; see `EngineOptions::max_binds_in_flight`).
    pub fn with_max_binds_in_flight(mut self, n: usize) -> Core {
        self.max_binds_in_flight = n.max(1);
        self
    }

    /// DefaultPreemption on or off (`EngineOptions::preemption`).
    pub fn with_preemption(mut self, on: bool) -> Core {
        self.preemption = on;
        self
    }

    /// Schedule within a NodeShard (`--scheduler-sharding-mode` soft or hard).
    pub fn with_sharding(mut self, opts: ShardingOptions) -> Core {
        if opts.mode != ShardingMode::None {
            let (sharding, view) = Sharding::new(opts, self.leading);
            self.cache.set_view(view);
            self.shard = Some(sharding);
        }
        self
    }

    /// Sharding, if it is on.
    pub fn shard(&self) -> Option<&Sharding> {
        self.shard.as_ref()
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    pub fn queue(&self) -> &SchedulingQueue {
        &self.queue
    }

    fn emit(&self, intent: Intent) {
        // The receiver lives as long as the engine; a closed channel means shutdown.
        let _ = self.intents.send(intent);
    }

    /// Report a pod's failed attempt (its condition and event), clearing its nomination too
    /// when `clear_nominated`.
    fn report_clearing(
        &mut self,
        pod: &Arc<CompiledPod>,
        reason: StatusReason,
        message: String,
        clear_nominated: bool,
    ) {
        // A newer word than a held-back pod's pending report (`report_held`) replaces it.
        if !self.held.is_empty() {
            self.held.remove(&pod.uid);
        }
        let message: Arc<str> = Arc::from(message);
        if self.queue.get(&pod.uid).is_some() && !self.queue.note_message(&pod.uid, &message) {
            return;
        }
        inc(&self.stats.driver.status_intents, 1);
        self.emit(Intent::Status(StatusIntent {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            reason,
            message,
            clear_nominated,
        }));
    }

    pub fn handle(&mut self, input: Input, now: Nanos) {
        let offered = self.cache.registry().len();
        self.handle_input(input, now);
        if self.cache.registry().len() != offered {
            self.reresolve_requests(now);
        }
    }

    /// Nodes offer resource names they did not before: pods that asked for one of them while no
    /// node offered it (a requested-only slot, `ResourceRegistry`) are recompiled to the new
    /// slots, as an update (a decision in flight becomes stale). Runs only when a node brings a
    /// new name, never per pod.
    fn reresolve_requests(&mut self, now: Nanos) {
        let registry = self.cache.registry();
        let changed: Vec<Arc<CompiledPod>> = self
            .queue
            .iter()
            .filter_map(|(_, e)| e.pod().reresolved(registry))
            .map(Arc::new)
            .collect();
        for pod in changed {
            self.queue.upsert(pod, now);
        }
    }

    fn handle_input(&mut self, input: Input, now: Nanos) {
        match input {
            Input::NodeApply(n) => {
                let before = self.cache.node_slot(&n.name);
                match self.cache.apply_node(&n, self.shared.horizon()) {
                    Ok(events) => self.pending_events |= events,
                    Err(e) => self.emit(Intent::Error(e.into())),
                }
                if before != self.cache.node_slot(&n.name) {
                    self.nodes_changed();
                }
            }
            Input::NodeDelete(name) => {
                if self.cache.node_slot(&name).is_some() {
                    self.nodes_changed();
                }
                self.pending_events |= self.cache.delete_node(&name);
            }
            Input::NodeReset(nodes) => {
                let (events, errors) = self.cache.reset_nodes(&nodes, self.shared.horizon());
                self.pending_events |= events;
                self.nodes_changed();
                for e in errors {
                    self.emit(Intent::Error(e.into()));
                }
            }
            Input::ShardApply(s) => {
                if let Some(c) = &mut self.shard {
                    c.apply(s);
                }
            }
            Input::ShardDelete(name) => {
                if let Some(c) = &mut self.shard {
                    c.delete(&name);
                }
            }
            Input::ShardReset(all) => {
                if let Some(c) = &mut self.shard {
                    c.reset(all);
                }
            }
            Input::ShardStatusWritten(written) => {
                if let Some(c) = &mut self.shard {
                    c.write_done(written, now);
                }
            }
            Input::NodePodsListed { nodes, pods } => {
                let Some(c) = &self.shard else { return };
                // Shard rule 6: an answer read before a relist of the pod watch is dropped (the
                // nodes are listed again), and it never brings back a pod that left meanwhile.
                if c.answer_is_current(&nodes) {
                    let pods: Vec<PodInput> =
                        pods.into_iter().filter(|p| !c.is_gone(&p.uid)).collect();
                    for p in pods {
                        self.apply_pod(p, now);
                    }
                }
                if let Some(c) = &mut self.shard {
                    c.pods_listed(&nodes);
                }
            }
            Input::PodApply(p) => self.apply_pod(p, now),
            Input::PodDelete { uid } => self.delete_pod(&uid, now),
            Input::PendingPodDelete { uid } => {
                if self
                    .queue
                    .get(&uid)
                    .is_some_and(|e| e.state() != PodState::Binding)
                {
                    self.queue.remove(&uid);
                    self.drop_nomination(&uid);
                }
            }
            Input::PendingPodReset(pods) => {
                let keep: HashSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
                let gone: Vec<Arc<str>> = self
                    .queue
                    .iter()
                    .filter(|(u, e)| e.state() != PodState::Binding && !keep.contains(&***u))
                    .map(|(u, _)| u.clone())
                    .collect();
                for uid in gone {
                    self.queue.remove(&uid);
                    self.drop_nomination(&uid);
                }
                for p in pods {
                    self.apply_pod(p, now);
                }
            }
            Input::BoundPodReset(pods) => {
                let keep: HashSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
                let gone: Vec<String> = self
                    .cache
                    .placed_uids()
                    .into_iter()
                    .filter(|u| {
                        !keep.contains(u.as_str())
                            && self.cache.placement(u).is_some_and(|p| !p.assumed)
                    })
                    .collect();
                for uid in gone {
                    self.pending_events |= self.cache.remove_pod(&uid);
                }
                if let Some(c) = &mut self.shard {
                    c.pods_reset();
                }
                for p in pods {
                    self.apply_pod(p, now);
                }
            }
            Input::Profile(p) => self.cache.set_profile(p),
            Input::Storage(change) => {
                let (events, errors) = self.cache.apply_storage(change);
                self.pending_events |= events;
                for error in errors {
                    self.emit(Intent::Error(CoreError::Storage(error)));
                }
            }
            Input::Dra(change) => {
                let (events, errors, touched) = self.cache.apply_dra(change);
                self.pending_events |= events;
                match touched {
                    crate::dra::Touched::None => {}
                    crate::dra::Touched::One(k) => self.claims_changed([k], now),
                    crate::dra::Touched::All => {
                        let all: Vec<_> = self.claim_waiters.keys().cloned().collect();
                        self.claims_changed(all, now);
                    }
                }
                for error in errors {
                    self.emit(Intent::Error(CoreError::Storage(error)));
                }
            }
            Input::Pdb(change) => {
                for error in self.cache.apply_pdb(change) {
                    self.emit(Intent::Error(CoreError::Storage(error)));
                }
            }
            Input::PreemptionDone { uid, result } => self.preemption_done(&uid, result, now),
            Input::NamespaceApply(n) => {
                self.pending_events |= self.cache.set_namespace(&n.name, Some(&n.labels));
            }
            Input::NamespaceDelete(name) => {
                self.pending_events |= self.cache.set_namespace(&name, None);
            }
            Input::NamespaceReset(all) => {
                self.pending_events |= self.cache.reset_namespaces(&all);
            }
            Input::Leadership(leading) => {
                self.leading = leading;
                if let Some(c) = &mut self.shard {
                    c.set_leading(leading);
                }
            }
            Input::Tick => {}
            Input::BindOutcome { uid, result } => self.bind_outcome(&uid, result, now),
            Input::Worker(r) => self.worker_result(r, now),
        }
    }

    fn apply_pod(&mut self, p: PodInput, now: Nanos) {
        let compiled = match self.cache.compile_pod(&p) {
            Ok(c) => Arc::new(c),
            Err(error) => {
                inc(&self.stats.driver.rejected_pods, 1);
                let was_queued = self.queue.remove(&p.uid).is_some();
                if p.node_name.is_none() || was_queued {
                    // Visible, never silently dropped: the adapter writes the condition.
                    let message: Arc<str> = Arc::from(format!("invalid pod spec: {error}"));
                    inc(&self.stats.driver.status_intents, 1);
                    self.emit(Intent::Status(StatusIntent {
                        uid: Arc::from(p.uid.as_str()),
                        namespace: Arc::from(p.namespace.as_str()),
                        name: Arc::from(p.name.as_str()),
                        reason: StatusReason::SchedulerError,
                        message,
                        clear_nominated: false,
                    }));
                }
                self.emit(Intent::Error(CoreError::Pod {
                    namespace: p.namespace,
                    name: p.name,
                    error,
                }));
                return;
            }
        };
        match p.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(node) => {
                // Bound (by us or anyone): it leaves the queue; the cache counts it.
                if let Some(e) = self.queue.remove(&compiled.uid)
                    && e.state() == PodState::Binding
                {
                    inc(&self.stats.driver.binds_confirmed, 1);
                }
                let terminal = p.phase.is_terminal();
                self.pending_events |= self.cache.apply_bound_pod(&compiled, node, terminal);
                if terminal && let Some(c) = &mut self.shard {
                    c.pod_gone(&compiled.uid);
                }
            }
            None if p.phase.is_terminal() => self.delete_pod(&p.uid, now),
            None => {
                if let Some(pl) = self.cache.placement(&compiled.uid)
                    && (!pl.assumed || self.queue.get(&compiled.uid).is_none())
                {
                    // A stale unbound view of a pod we already saw bound, or whose binding
                    // already succeeded (the answer came before the watch's echo, which is on
                    // its way): ignore. Queued again, it would be decided again, and the
                    // second claim would move its placement off the node it is bound to.
                    return;
                }
                if let Some(node) = p.nominated_node_name.as_deref() {
                    self.restore_nomination(&compiled, node);
                }
                if self
                    .queue
                    .get(&compiled.uid)
                    .is_some_and(|e| **e.pod() == *compiled)
                {
                    // Nothing the scheduler reads changed: our own `PodScheduled` condition
                    // coming back, an event, a status or annotation write. The pod stays where
                    // it is, as kube-scheduler ignores updates `isPodUpdated` says are none.
                    inc(&self.stats.driver.unchanged_updates, 1);
                    return;
                }
                if compiled.needs_pod_index() {
                    self.cache.enable_pod_index();
                    self.cache.index_label_keys(compiled.selector_keys());
                    self.cache.watch_terms(&compiled);
                    let spread = compiled.spread.iter().map(|c| c.topology_key);
                    self.cache.index_domains(
                        compiled
                            .required_keys()
                            .chain(spread)
                            .chain(compiled.preferred_keys()),
                    );
                }
                self.queue.upsert(compiled, now);
            }
        }
    }

    /// A pending pod of ours whose `status.nominatedNodeName` names a node has its room kept
    /// there, as upstream's nominator reads it from the API: a nomination made before a restart
    /// or by a previous leader is honoured as one of ours. Left alone while the pod's own
    /// preemption or binding is in flight (their writes echo back), and when the cache already
    /// nominates it there. A nomination cleared in the API is not dropped here: the engine
    /// clears its own (`Core::preempt`, `Core::preemption_done`), and the pod's next attempt
    /// re-decides a stale one.
    fn restore_nomination(&mut self, pod: &CompiledPod, node: &str) {
        if self
            .queue
            .get(&pod.uid)
            .is_some_and(|e| matches!(e.state(), PodState::Preempting { .. } | PodState::Binding))
        {
            return;
        }
        let Some(slot) = self.cache.node_slot(node) else {
            return;
        };
        if self.cache.nomination(&pod.uid) != Some(slot) {
            self.cache
                .nominate(&pod.uid, slot, pod.priority, pod.requests.clone());
        }
    }

    /// A pending pod is gone: the room kept for it (`preemption`) is free again.
    fn drop_nomination(&mut self, uid: &str) {
        if self.cache.unnominate(uid).is_some() {
            self.pending_events |= event::ROOM_FREED;
        }
    }

    /// Give back the devices the pod `uid` assumed: they wake the pods short of devices, and
    /// the pods waiting on those claims by name.
    fn release_claims(&mut self, uid: &str, now: Nanos) {
        let keys = self.cache.release_claims(uid);
        if !keys.is_empty() {
            self.pending_events |= event::DEVICES_FREED;
            self.claims_changed(keys, now);
        }
    }

    /// These claims changed: the pods waiting for them are retried, and those being decided
    /// are retried if their decision says unschedulable.
    fn claims_changed(&mut self, keys: impl IntoIterator<Item = crate::dra::ClaimKey>, now: Nanos) {
        if self.claim_waiters.is_empty() {
            return;
        }
        for k in keys {
            for uid in self.claim_waiters.remove(&k).unwrap_or_default() {
                match self.queue.get(&uid).map(|e| e.state()) {
                    Some(PodState::Unschedulable { .. }) => self.queue.retry(&uid, now),
                    Some(PodState::InFlight) => {
                        self.claims_touched.insert(uid);
                    }
                    _ => {}
                }
            }
        }
    }

    fn delete_pod(&mut self, uid: &str, now: Nanos) {
        self.room_attempt_done(uid, None);
        self.pending_events |= self.cache.release_pvs(uid);
        self.release_claims(uid, now);
        self.queue.remove(uid);
        self.pending_events |= self.cache.remove_pod(uid);
        if let Some(c) = &mut self.shard {
            c.pod_gone(uid);
        }
    }

    fn bind_outcome(&mut self, uid: &str, result: BindResult, now: Nanos) {
        // A bind that did not go through gives back the PVs its decision chose; a bound pod's
        // are released once the PVs are seen bound (`volumes::Storage::apply`).
        if result != BindResult::Bound {
            self.pending_events |= self.cache.release_pvs(uid);
            self.release_claims(uid, now);
        }
        self.bind_outcome_inner(uid, result, now)
    }

    fn bind_outcome_inner(&mut self, uid: &str, result: BindResult, now: Nanos) {
        match result {
            BindResult::Bound => {
                if self.queue.remove(uid).is_some() {
                    inc(&self.stats.driver.binds_confirmed, 1);
                }
            }
            BindResult::Abandoned => {
                self.pending_events |= self.cache.forget(uid);
                if let Some(e) = self.queue.get(uid)
                    && e.state() == PodState::Binding
                {
                    let uid = e.pod().uid.clone();
                    self.queue.requeue_active(&uid);
                }
            }
            BindResult::AlreadyBound | BindResult::PodGone => {
                self.queue.remove(uid);
                self.pending_events |= self.cache.forget(uid);
            }
            BindResult::Failed(_) | BindResult::PreBindFailed(_) => {
                inc(&self.stats.driver.bind_failures, 1);
                let node = self.cache.placement(uid).map(|p| p.node.to_owned());
                self.pending_events |= self.cache.forget(uid);
                let Some(e) = self.queue.get(uid) else { return };
                if e.state() != PodState::Binding {
                    return;
                }
                let pod = e.pod().clone();
                let node = node.unwrap_or_default();
                // Volcano's texts (`volcano-agent-scheduler.md` §6.2).
                let message = match result {
                    BindResult::PreBindFailed(msg) => format!(
                        "execute preBind for pod {}/{} failed: {msg}, resync the task",
                        pod.namespace, pod.name
                    ),
                    BindResult::Failed(msg) => format!("failed to bind to node {node}: {msg}"),
                    _ => unreachable!("matched above"),
                };
                self.report_clearing(&pod, StatusReason::SchedulerError, message, true);
                self.queue.requeue_backoff(&pod.uid, now);
            }
        }
    }

    fn worker_result(&mut self, r: WorkerResult, now: Nanos) {
        let uid = r.task.pod.uid.clone();
        let claim_touched = !self.claims_touched.is_empty() && self.claims_touched.remove(&uid);
        if matches!(r.outcome, Outcome::Unschedulable(_)) {
            self.room_attempt_done(&uid, None);
        }
        let live = self.queue.get(&uid).is_some_and(|e| {
            (e.generation() == r.task.generation || mutation::no_generation_check())
                && e.state() == PodState::InFlight
        });
        if r.task.lane
            && self
                .lane_busy
                .as_ref()
                .is_some_and(|(u, g)| *u == uid && *g == r.task.generation)
        {
            // The lane's result: the next lane pod is handed off after this flush publishes it.
            self.lane_busy = None;
        }
        if let Outcome::Burned {
            candidate,
            bumped,
            to_lane,
        } = &r.outcome
        {
            // The CAS happened: counted as a bump, no pod (`binder` steps 5–7).
            self.cache.apply_claim(*candidate, None);
            if *bumped {
                self.cache.count_anti_bump();
            }
            if live {
                if *to_lane {
                    self.queue.move_to_lane(&uid);
                }
                self.queue.requeue_urgent(&uid);
            } else {
                inc(&self.stats.driver.stale_results, 1);
            }
            return;
        }
        if let Outcome::Claimed { candidate, bumped } = &r.outcome {
            // The CAS happened: the cache must count it whatever became of the pod.
            if *bumped {
                self.cache.count_anti_bump();
            }
            // DynamicResources Reserve: the devices are decided again against every decision
            // applied so far (the worker chose them on the hand-off's view); none left there
            // voids the decision like a lost CAS.
            let devices = match r.task.claims.as_deref() {
                Some(c) if live && !c.claims.is_empty() => {
                    let d = self.cache.allocate_claims(&r.task.pod, c, candidate.slot);
                    if d.is_none() {
                        inc(&self.stats.driver.device_conflicts, 1);
                    }
                    d
                }
                _ => Some(Vec::new()),
            };
            let pod = (live && devices.is_some()).then_some(&*r.task.pod);
            let assumed = self.cache.apply_claim(*candidate, pod);
            if assumed.is_none() && devices.as_ref().is_some_and(|d| !d.is_empty()) {
                self.release_claims(&uid, now);
            }
            self.room_attempt_done(&uid, assumed.is_some().then_some(candidate.slot));
            match assumed {
                Some(node) => {
                    self.pending_events |= event::POD_ADDED;
                    self.queue.mark_binding(&uid);
                    inc(&self.stats.driver.bind_intents, 1);
                    let (provision, bind_pvs) = match r.task.volumes.as_deref() {
                        Some(v) => self.volume_bindings(v, candidate.slot, &uid),
                        None => (Vec::new(), Vec::new()),
                    };
                    self.emit(Intent::Bind(BindIntent {
                        pod: r.task.pod.clone(),
                        node,
                        provision,
                        bind_pvs,
                        devices: devices.unwrap_or_default(),
                        volume_timeout: self.cache.profile().volume_bind_timeout,
                        arrived: r.task.arrived,
                        popped: r.popped,
                        claimed: r.done,
                    }));
                }
                None if live => self.queue.requeue_urgent(&uid),
                None => inc(&self.stats.driver.stale_results, 1),
            }
            return;
        }
        if !live {
            inc(&self.stats.driver.stale_results, 1);
            return;
        }
        match r.outcome {
            Outcome::Claimed { .. } | Outcome::Burned { .. } => unreachable!("handled above"),
            Outcome::Conflict | Outcome::Stale => self.queue.requeue_urgent(&uid),
            Outcome::Paused => self.queue.requeue_active(&uid),
            Outcome::Unschedulable(summary) => {
                let task = &r.task;
                let names = self.cache.names().for_task(
                    &task.pod,
                    task.volumes.as_deref(),
                    task.claims.as_deref(),
                );
                let message = failure_message(&summary, &names);
                let pod = r.task.pod.clone();
                // The pod changed while the worker held it (say, a toleration was added): the
                // decision was about the old spec, so the new one gets its own attempt.
                let updated = self
                    .queue
                    .get(&uid)
                    .is_some_and(|e| !Arc::ptr_eq(e.pod(), &r.task.pod));
                self.queue.mark_unschedulable(&uid, summary.wake, now);
                // Decided on a view older than a wake-up that could help: retry it. The view is
                // the snapshot, and for a pod with claims also what was resolved at hand-off
                // (storage objects, ResourceClaims and other pods' claims are not in the
                // snapshot, and a change to them publishes none).
                let handed = (r.task.volumes.is_some() || r.task.claims.is_some())
                    .then_some(r.task.wakes_seen);
                let after = |s: u64, n: u64| s > r.snapshot_seq || handed.is_some_and(|h| n > h);
                let history_covers = self.wakes.len() < WAKE_HISTORY
                    || self.wakes.front().is_none_or(|&(s, n, _)| {
                        s <= r.snapshot_seq + 1 && handed.is_none_or(|h| n <= h + 1)
                    });
                let missed = if history_covers {
                    self.wakes
                        .iter()
                        .filter(|&&(s, n, _)| after(s, n))
                        .fold(0, |a, &(_, _, m)| a | m)
                } else {
                    event::ALL
                };
                let mut message = message;
                let mut clear_nominated = false;
                if missed & summary.wake != 0 || updated || claim_touched {
                    self.queue.retry(&uid, now);
                } else if self.leading {
                    // PostFilter: preempt pods of lower priority (`preemption`); upstream
                    // appends its answer when it did not. Without victims, DynamicResources
                    // deallocates a claim of the pod nobody uses, so that it can be allocated
                    // where the pod fits.
                    let planned = if self.preemption {
                        match self.preempt(&r.task, &summary) {
                            Some((why, cleared)) => {
                                message.push_str(" preemption: ");
                                message.push_str(&why);
                                clear_nominated = cleared;
                                false
                            }
                            None => true,
                        }
                    } else {
                        false
                    };
                    if !planned
                        && r.task.claims.is_some()
                        && let Some(d) = self.cache.deallocatable(&pod)
                    {
                        inc(&self.stats.driver.deallocations, 1);
                        self.emit(Intent::Deallocate(d));
                    }
                }
                self.report_clearing(&pod, StatusReason::Unschedulable, message, clear_nominated);
            }
        }
    }

    /// Publish pending changes as one snapshot, move due pods, refill the hand-off. Returns the
    /// next time the queue needs attention.
    pub fn flush(&mut self, now: Nanos, clock_nanos: impl Fn() -> u64) -> Option<Nanos> {
        let t0 = clock_nanos();
        self.refresh_shard_view();
        if let Some(snap) = self.cache.publish() {
            self.shared.publish(snap);
            inc(&self.stats.driver.publications, 1);
            inc(
                &self.stats.driver.publish_nanos,
                clock_nanos().saturating_sub(t0),
            );
        }
        if self.pending_events != 0 {
            self.wake_for(self.pending_events, now);
            let seq = self.shared.latest_seq();
            self.wake_no += 1;
            self.wakes
                .push_back((seq, self.wake_no, self.pending_events));
            if self.wakes.len() > WAKE_HISTORY {
                self.wakes.pop_front();
            }
            self.pending_events = 0;
        }
        self.queue.flush_unschedulable(now);
        self.report_held(now);
        self.pump(now);
        let d = self.queue.depths();
        self.shared.set_backlog(Backlog {
            waiting: d.active,
            in_flight: d.in_flight,
        });
        self.stats.set_queue_depths(d);
        let shard_deadline = self.shard_status(now);
        let held = self.held_due.front().map(|&(due, _)| due);
        [self.queue.next_deadline(), shard_deadline, held]
            .into_iter()
            .flatten()
            .min()
    }

    /// Move back the pool's pods `events` can help. A pod only room can help (every node lacked
    /// resources, a pod slot or host ports: `event::ROOM_FREED`) moves back only if it passes
    /// every filter on a node whose room was freed, with the room given to the pods before it in
    /// queue order already taken off (kube-scheduler's queueing hints): a deletion that frees
    /// one pod's room wakes one pod, not the pool.
    fn wake_for(&mut self, events: Events, now: Nanos) {
        let freed = self.cache.take_freed();
        if events & event::ROOM_FREED == 0 {
            self.queue.on_cluster_event(events, now);
            return;
        }
        let snap = self.shared.snapshot();
        let mut taken: crate::FastMap<u32, crate::model::ResourceList> = Default::default();
        let woken = &mut self.room_woken;
        self.queue.on_cluster_event_with(events, now, |pod| {
            match room_for(&snap, pod, &freed, &mut taken) {
                Room::Fits(slot) => {
                    woken.insert(pod.uid.clone(), slot);
                    true
                }
                Room::Unknown => true,
                Room::None => false,
            }
        });
    }

    /// A pod moved back for a node's freed room had its attempt (`taken`: claimed there): if
    /// it did not take that room, judge the node's room again at the next flush.
    fn room_attempt_done(&mut self, uid: &str, taken: Option<u32>) {
        if let Some(slot) = self.room_woken.remove(uid)
            && taken != Some(slot)
        {
            self.cache.refree(slot);
            self.pending_events |= event::ROOM_FREED;
        }
    }

    /// The claims a pod claimed on `slot` binds in PreBind: those given an existing PV there
    /// (reserved for it now, `volumes::matching`) and those to provision. The same assignment
    /// the decision's filter made on that node.
    fn volume_bindings(
        &mut self,
        v: &crate::volumes::PodVolumes,
        slot: u32,
        uid: &Arc<str>,
    ) -> (Vec<ClaimRef>, Vec<StaticBinding>) {
        let assigned = self
            .cache
            .node_meta(slot)
            .and_then(|meta| crate::volumes::assign(v, &meta))
            .unwrap_or_default();
        let mut provision = Vec::new();
        let mut bind_pvs = Vec::new();
        for (i, p) in v.provision.iter().enumerate() {
            match assigned.iter().find(|&&(k, _)| k as usize == i) {
                Some(&(_, m)) => bind_pvs.push(StaticBinding {
                    namespace: p.namespace.clone(),
                    claim: p.name.clone(),
                    pv: p.statics[m as usize].name.clone(),
                }),
                None => provision.push((p.namespace.clone(), p.name.clone())),
            }
        }
        if !bind_pvs.is_empty() {
            self.cache
                .reserve_pvs(uid, bind_pvs.iter().map(|b| b.pv.clone()));
        }
        (provision, bind_pvs)
    }

    /// DefaultPreemption for a pod just found unschedulable (`preemption`): if it may preempt
    /// and some node's lower-priority pods can make room, nominate it there (its room is kept
    /// from now on) and hold it while the adapter evicts the victims. Otherwise upstream's
    /// message saying why not, and whether the pod's nomination was cleared.
    fn preempt(&mut self, task: &Task, summary: &FailureSummary) -> Option<(String, bool)> {
        // Judged against the cache as it is now: with the labels as it has them
        // (`Cache::converted_pod`; the worker's decision was on its snapshot's).
        let converted = self.cache.converted_pod(&task.pod).map(Arc::new);
        let pod = converted.as_ref().unwrap_or(&task.pod);
        inc(&self.stats.driver.preemption_attempts, 1);
        if let Err(why) = crate::preemption::eligible(&self.cache, pod, summary) {
            return Some((why.message().to_owned(), false));
        }
        let offset = self.preemption_offset;
        self.preemption_offset = offset.wrapping_add(1);
        let Some(plan) = crate::preemption::plan(
            &self.cache,
            pod,
            task.volumes.as_deref(),
            task.claims.as_deref(),
            &summary.resolvable,
            offset,
        ) else {
            inc(&self.stats.driver.preemptions_unhelpful, 1);
            // No candidate: upstream clears the nomination the pod had.
            let cleared = self.cache.unnominate(&pod.uid).is_some();
            if cleared {
                self.pending_events |= event::ROOM_FREED;
            }
            let why = crate::preemption::no_plan_message(
                &self.cache,
                summary,
                pod,
                task.volumes.as_deref(),
                task.claims.as_deref(),
            );
            return Some((why, cleared));
        };
        inc(&self.stats.driver.preemptions, 1);
        inc(
            &self.stats.driver.preemption_victims,
            plan.victims.len() as u64,
        );
        for v in &plan.victims {
            self.cache.mark_evicting(&v.uid);
        }
        let mut unnominate = Vec::new();
        for uid in &plan.lower_nominees {
            self.cache.unnominate(uid);
            if let Some(e) = self.queue.get(uid) {
                let p = e.pod();
                unnominate.push(PodRef {
                    uid: p.uid.clone(),
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                });
            }
        }
        self.cache
            .nominate(&pod.uid, plan.slot, pod.priority, pod.requests.clone());
        self.queue.mark_preempting(&pod.uid, summary.wake);
        self.emit(Intent::Preempt(PreemptIntent {
            preemptor: PodRef {
                uid: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            },
            node: plan.node,
            victims: plan
                .victims
                .into_iter()
                .filter(|v| !v.terminating)
                .map(|v| PodRef {
                    uid: v.uid,
                    namespace: v.namespace,
                    name: v.name,
                })
                .collect(),
            unnominate,
        }));
        None
    }

    /// The adapter finished a preemption's API calls: the pod waits for its victims to leave
    /// (it is woken by the room they free); after a failure its nomination is reverted and it
    /// backs off.
    fn preemption_done(&mut self, uid: &str, result: Result<(), String>, now: Nanos) {
        let Some(e) = self.queue.get(uid) else {
            self.cache.unnominate(uid);
            return;
        };
        if !matches!(e.state(), PodState::Preempting { .. }) {
            return;
        }
        let pod = e.pod().clone();
        match result {
            Ok(()) => {
                self.queue.preemption_done(&pod.uid, now);
                // Victims already gone (their deletions seen before the answer): look again.
                self.pending_events |= event::ROOM_FREED;
                if let Some(slot) = self.cache.nomination(&pod.uid) {
                    self.cache.refree(slot);
                }
            }
            Err(msg) => {
                self.pending_events |= self
                    .cache
                    .unnominate(&pod.uid)
                    .map_or(0, |_| event::ROOM_FREED);
                self.report_clearing(
                    &pod,
                    StatusReason::SchedulerError,
                    format!("preemption failed: {msg}"),
                    true,
                );
                self.queue.requeue_backoff(&pod.uid, now);
            }
        }
    }

    /// A node got or lost a slot: the shard view's slot set must be rebuilt.
    fn nodes_changed(&mut self) {
        if let Some(c) = &mut self.shard {
            c.nodes_changed();
        }
    }

    /// Recompute the shard view; the next publication carries it.
    fn refresh_shard_view(&mut self) {
        let Some(c) = &mut self.shard else { return };
        let (change, lists) = c.refresh(&self.cache, self.cache.next_seq());
        if !lists.is_empty() {
            self.emit(Intent::ListNodePods(lists));
        }
        if let Some(change) = change {
            self.cache.set_view(change.view);
            if change.grew {
                self.pending_events |= event::NODE_ADDED;
            }
        }
    }

    /// Emit our NodeShard's status when it is due and allowed (`shard` rules 3–5). Returns when
    /// sharding next needs a look.
    fn shard_status(&mut self, now: Nanos) -> Option<Nanos> {
        let c = self.shard.as_mut()?;
        if let Some(intent) = c.status(now, self.shared.horizon(), &self.cache) {
            inc(&self.stats.driver.shard_status_intents, 1);
            let _ = self.intents.send(Intent::ShardStatus(intent));
        }
        self.stats.set_shard_gauges(c.gauges());
        c.next_deadline(now)
    }

    fn pump(&mut self, now: Nanos) {
        if !self.leading {
            return;
        }
        while self.handoff.len() < self.handoff.capacity() {
            let d = self.queue.depths();
            if d.in_flight + d.binding >= self.max_binds_in_flight {
                inc(&self.stats.driver.bind_backpressure, 1);
                break;
            }
            let Some((pod, generation, lane)) = self.queue.pop(now, self.lane_busy.is_none())
            else {
                break;
            };
            // Its labels as the snapshot the worker will load has them (`Cache::sync_labels`,
            // published in this flush before the hand-off).
            let pod = match self.cache.converted_pod(&pod) {
                Some(c) => {
                    let c = Arc::new(c);
                    self.queue.upsert(c.clone(), now);
                    c
                }
                None => pod,
            };
            let arrived = self.queue.get(&pod.uid).map_or(now, |e| e.arrived());
            let uid = pod.uid.clone();
            let volumes = (!pod.claims.is_empty()).then(|| {
                let (queue, ns, me) = (&self.queue, pod.info.namespace, &pod.uid);
                // A pod already handed off or binding with the same ReadWriteOncePod claim.
                let in_flight = |claim: &str| {
                    queue.iter().any(|(u, e)| {
                        u != me
                            && matches!(e.state(), PodState::InFlight | PodState::Binding)
                            && e.pod().info.namespace == ns
                            && e.pod().info.claims.iter().any(|c| &**c == claim)
                    })
                };
                Arc::new(self.cache.resolve_volumes(&pod, in_flight))
            });
            // A pod that may take an existing PV is decided in the lane: a PV reachable from
            // several nodes must not be chosen by two decisions at once (`volumes::matching`).
            let static_pv = volumes
                .as_deref()
                .is_some_and(|v| v.provision.iter().any(|p| !p.statics.is_empty()));
            if static_pv && !lane && !mutation::static_pv_outside_lane() {
                self.queue.move_to_lane(&uid);
                self.queue.unpop(&uid);
                continue;
            }
            let claims =
                (!pod.resource_claims.is_empty() || self.cache.dra_extended(&pod)).then(|| {
                    for k in crate::dra::claim_keys(&pod.namespace, &pod.resource_claims) {
                        // Once per pod (a pod tried again and again registers again and again;
                        // a claim has at most its consumers here).
                        let waiting = self.claim_waiters.entry(k).or_default();
                        if !waiting.contains(&uid) {
                            waiting.push(uid.clone());
                        }
                    }
                    Arc::new(self.cache.resolve_claims(&pod))
                });
            if let Some(b) = claims.as_deref().and_then(|c| c.blocked)
                && b.before_nodes()
            {
                self.hold_back(&pod, b, claims.as_deref(), now);
                continue;
            }
            if self
                .handoff
                .try_push(Task {
                    pod,
                    generation,
                    arrived,
                    lane,
                    volumes,
                    claims,
                    wakes_seen: self.wake_no,
                    nominated: self.cache.nomination(&uid),
                })
                .is_err()
            {
                self.queue.unpop(&uid);
                break;
            }
            if lane {
                self.lane_busy = Some((uid, generation));
            }
        }
    }

    /// A pod its claims hold back before any node is looked at (`dra::Blocked::before_nodes`):
    /// decided here, with no worker and no snapshot, as upstream's PreEnqueue (not an attempt,
    /// no preemption) and PreFilter (an attempt; preemption cannot help) decide it. The pod is
    /// reported unschedulable, visibly, and woken by name when one of its claims changes
    /// (`claim_waiters`), or by the events its reason names.
    fn hold_back(
        &mut self,
        pod: &Arc<CompiledPod>,
        why: crate::dra::Blocked,
        claims: Option<&crate::dra::PodClaims>,
        now: Nanos,
    ) {
        inc(&self.stats.driver.claim_holds, 1);
        self.room_attempt_done(&pod.uid, None);
        let nodes = self.shared.snapshot().nodes;
        let summary = FailureSummary {
            nodes,
            reasons: vec![(why.into(), nodes as u32)],
            wake: why.wake(),
            missing_shard: None,
            unresolvable: nodes as u32,
            resolvable: Vec::new(),
        };
        let names = self.cache.names().for_task(pod, None, claims);
        let mut message = failure_message(&summary, &names);
        if why.pre_enqueue() {
            self.queue.mark_waiting(&pod.uid, summary.wake, now);
            let due = now.saturating_add(HOLD_REPORT_GRACE);
            match self.held.entry(pod.uid.clone()) {
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    let (_, p, m) = e.get_mut();
                    (*p, *m) = (pod.clone(), message);
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert((due, pod.clone(), message));
                    self.held_due.push_back((due, pod.uid.clone()));
                }
            }
            return;
        }
        self.queue.mark_unschedulable(&pod.uid, summary.wake, now);
        if self.leading && self.preemption {
            // PostFilter runs and finds every node unresolvable.
            let why = match crate::preemption::eligible(&self.cache, pod, &summary) {
                Err(not) => not.message().to_owned(),
                Ok(()) => {
                    crate::preemption::no_plan_message(&self.cache, &summary, pod, None, claims)
                }
            };
            message.push_str(" preemption: ");
            message.push_str(&why);
        }
        self.report_clearing(pod, StatusReason::Unschedulable, message, false);
    }

    /// Report the pods held back since [`HOLD_REPORT_GRACE`] ago that are still waiting.
    fn report_held(&mut self, now: Nanos) {
        while let Some(&(due, _)) = self.held_due.front()
            && due <= now
        {
            let (_, uid) = self.held_due.pop_front().expect("peeked");
            // Not an older hold's turn: that one was replaced by a newer word, and the pod
            // held again since has its own.
            if self.held.get(&uid).is_none_or(|h| h.0 != due) {
                continue;
            }
            let (_, pod, message) = self.held.remove(&uid).expect("checked");
            if matches!(
                self.queue.get(&uid).map(|e| e.state()),
                Some(PodState::Unschedulable { .. })
            ) {
                self.report_clearing(&pod, StatusReason::Unschedulable, message, false);
            }
        }
    }

    /// Take back every pod still waiting in the hand-off (shutdown, lost leadership).
    pub fn drain_handoff(&mut self) {
        while let Some(t) = self.handoff.try_pop() {
            if t.lane {
                self.lane_busy = None;
            }
            if !mutation::drain_without_unpop() {
                self.queue.unpop(&t.pod.uid);
            }
        }
    }

    /// Check the engine's invariants: no node over allocatable (for what the cache counts) and
    /// queue bookkeeping consistent.
    pub fn audit(&self) -> Vec<AuditError> {
        let mut out = Vec::new();
        for name in self.cache.node_names() {
            let Some((used, alloc)) = self.cache.node_usage(name) else {
                continue;
            };
            for &(s, u) in &used {
                let a = alloc.iter().find(|&&(x, _)| x == s).map_or(0, |&(_, a)| a);
                if u > a {
                    out.push(AuditError::Overcommitted {
                        node: name.to_string(),
                        resource: self.cache.registry().name(s).to_owned(),
                        used: u,
                        allocatable: a,
                    });
                }
            }
        }
        let mut counted = QueueDepths::default();
        for (_, e) in self.queue.iter() {
            match e.state() {
                PodState::Gated => counted.gated += 1,
                PodState::Active => counted.active += 1,
                PodState::Backoff { .. } => counted.backoff += 1,
                PodState::Unschedulable { .. } => counted.unschedulable += 1,
                PodState::InFlight => counted.in_flight += 1,
                PodState::Binding => counted.binding += 1,
                PodState::Preempting { .. } => counted.preempting += 1,
            }
        }
        if counted != self.queue.depths() {
            out.push(AuditError::QueueDepthMismatch {
                counted,
                recorded: self.queue.depths(),
            });
        }
        out
    }

    /// The snapshot workers currently see.
    pub fn current_snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot()
    }

    /// Time a pod of the queue waited since it arrived.
    pub fn waited(&self, uid: &str, now: Nanos) -> Option<Duration> {
        self.queue
            .get(uid)
            .map(|e| now.saturating_since(e.arrived()))
    }
}

/// What a node's freed room does for a waiting pod (`Core::wake_for`).
enum Room {
    /// It passes every filter on this freed node, with room left for it: moved back.
    Fits(u32),
    /// It cannot be judged on the snapshot alone (its volumes and claims are resolved at
    /// hand-off): moved back.
    Unknown,
    /// No freed node takes it.
    None,
}

/// Judge `pod` against the nodes whose room was freed (`freed`, slots), on `snap` (which holds
/// the removals), less the room already given to pods before it (`taken`); on a fit, that room
/// is given to it.
fn room_for(
    snap: &Snapshot,
    pod: &CompiledPod,
    freed: &[u32],
    taken: &mut crate::FastMap<u32, crate::model::ResourceList>,
) -> Room {
    use crate::plugins::{Cycle, Filters, Node};
    use crate::snapshot::CHUNK;
    if !pod.claims.is_empty() || !pod.resource_claims.is_empty() || pod.extended.is_some() {
        return Room::Unknown;
    }
    if pod.info.stale(snap.label_epoch) {
        // Labels split before a key some placed pod's term here reads became selectable: the
        // filters would miss that term (`PodInfo::stale`); its attempt converts them.
        return Room::Unknown;
    }
    let mut filters = Filters::new(Cycle {
        pod,
        snap,
        volumes: None,
        claims: None,
    });
    for &slot in freed {
        let (ci, i) = (slot as usize / CHUNK, slot as usize % CHUNK);
        if ci >= snap.arena.num_chunks() || snap.view.admits(ci) & (1 << i) == 0 {
            continue;
        }
        let chunk = snap.arena.chunk(ci);
        filters.enter_chunk(chunk);
        if !filters.fits(Node::new(chunk, i)) {
            continue;
        }
        let given = taken.entry(slot).or_default();
        let got = |s| {
            given
                .binary_search_by_key(&s, |&(x, _)| x)
                .map_or(0, |j| given[j].1)
        };
        if pod
            .requests
            .iter()
            .all(|&(s, a)| chunk.free(s, i) - got(s) >= a)
        {
            for &(s, a) in &pod.requests {
                match given.binary_search_by_key(&s, |&(x, _)| x) {
                    Ok(j) => given[j].1 += a,
                    Err(j) => given.insert(j, (s, a)),
                }
            }
            return Room::Fits(slot);
        }
    }
    Room::None
}
