//! The scheduling queue: activeQ, backoffQ, the unschedulable pool and the gated set, for the
//! pods Magma owns. Single-threaded; owned by the engine's driver, which is the only code that
//! touches it. Workers never see it: the driver moves pods from activeQ into the lock-free
//! hand-off (`sync::HandOff`) in queue order.
//!
//! - activeQ order: urgent marker (a binding conflict sets it, like upstream's annotation value
//!   100), then `volcano.sh/scheduling-priority`, then `spec.priority`, then FIFO by enqueue time.
//! - backoffQ: per-pod exponential backoff after an unschedulable attempt, `initial << (n-1)`
//!   capped at `max` (1 s → 10 s by default).
//! - unschedulable pool: pods that fit nowhere, each with the cluster [`event`](crate::event)s
//!   that can make it fit (its failures' wake-ups). Such an event moves it back (to activeQ if
//!   its backoff has expired, else to backoffQ). Pods are flushed back after `max_unschedulable`.
//! - When activeQ is empty, `pop` takes the pod whose backoff ends first without waiting for it
//!   (kube-scheduler's `SchedulerPopFromBackoffQ`, on by default since 1.33): a deletion that
//!   makes room binds the waiting pod at once on an idle scheduler, while under load the backoff
//!   still orders retries. Pods backing off after an error (a failed bind) wait it out, in a heap
//!   of their own.
//! - Updates and deletes apply wherever the pod is; heaps use lazy deletion by generation.
//!
//! Priority inversion is bounded by the hand-off capacity: a pod that becomes the most urgent
//! waits behind at most `capacity` pods already handed off.

use crate::clock::Nanos;
use crate::model::CompiledPod;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use crate::event::Events;

/// Add `by` to the pool count of every bit of `wake`.
fn count_wake(counts: &mut [u32; 32], wake: Events, by: i32) {
    for (b, c) in counts.iter_mut().enumerate() {
        if wake & (1 << b) != 0 {
            *c = c.saturating_add_signed(by);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueOptions {
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub max_unschedulable: Duration,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(10),
            max_unschedulable: Duration::from_secs(300),
        }
    }
}

/// Where a pod is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    Gated,
    Active,
    Backoff {
        until: Nanos,
    },
    Unschedulable {
        since: Nanos,
        /// The cluster events that can make it fit (the union of its failures' wake-ups).
        wake: Events,
    },
    /// Handed to a worker.
    InFlight,
    /// Claimed; the bind is in the adapter's hands.
    Binding,
    /// Nominated by preemption; held out of the queue while the adapter deletes its victims
    /// and writes its nomination (`preemption`, asynchronous as kube-scheduler 1.33+). `wake`:
    /// the events that wake it once that is done (its failed attempt's).
    Preempting {
        wake: Events,
    },
}

/// One pod the queue owns. Read-only outside the queue: every move goes through the queue's
/// methods, which keep the heaps and the depth counters in step with `state`.
#[derive(Debug)]
pub struct Entry {
    pod: Arc<CompiledPod>,
    state: PodState,
    /// Bumped on every move or update; heap entries with an older generation are stale.
    generation: u64,
    urgent: bool,
    /// Unschedulable attempts (drives the backoff).
    attempts: u32,
    /// First time the queue saw the pod (arrival, for latency).
    arrived: Nanos,
    /// Last message reported for this pod (status intents are emitted only on change).
    last_message: Option<Arc<str>>,
    /// Decided in the lane (`docs/constraints.md`): set from the pod's constraints, and for good
    /// once a decision outside it turned out to need it.
    lane: bool,
    seq: u64,
    /// Its backoff follows an error (a failed bind), not an unschedulable attempt: it is never
    /// popped early.
    error_backoff: bool,
}

impl Entry {
    /// The pod as last applied (an update while in flight replaces it here).
    pub fn pod(&self) -> &Arc<CompiledPod> {
        &self.pod
    }

    pub fn state(&self) -> PodState {
        self.state
    }

    /// Generation of the current state; a worker result carries the one it was handed off with.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Sent back because every candidate conflicted: ahead of non-urgent pods.
    pub fn urgent(&self) -> bool {
        self.urgent
    }

    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn arrived(&self) -> Nanos {
        self.arrived
    }
}

#[derive(Debug, PartialEq, Eq)]
struct ActiveKey {
    urgent: bool,
    scheduling_priority: i32,
    priority: i32,
    seq: Reverse<u64>,
    uid: Arc<str>,
    generation: u64,
}

impl Ord for ActiveKey {
    fn cmp(&self, o: &Self) -> Ordering {
        (
            self.urgent,
            self.scheduling_priority,
            self.priority,
            self.seq,
        )
            .cmp(&(o.urgent, o.scheduling_priority, o.priority, o.seq))
    }
}
impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Counts per sub-queue, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepths {
    pub active: usize,
    pub backoff: usize,
    pub unschedulable: usize,
    pub gated: usize,
    pub in_flight: usize,
    pub binding: usize,
    pub preempting: usize,
}

#[derive(Default)]
pub struct SchedulingQueue {
    opts: QueueOptions,
    entries: crate::FastMap<Arc<str>, Entry>,
    active: BinaryHeap<ActiveKey>,
    /// Active pods that must be decided in the lane (one at a time, `docs/constraints.md`).
    lane: BinaryHeap<ActiveKey>,
    /// Pool pods per wake-up event bit, so an event no pool pod waits for costs nothing.
    wake_counts: [u32; 32],
    backoff: BinaryHeap<Reverse<(Nanos, u64, Arc<str>)>>,
    /// Backoffs after an error (`requeue_backoff`), which `pop` never takes early.
    error_backoff: BinaryHeap<Reverse<(Nanos, u64, Arc<str>)>>,
    /// Pool entries by time of entry, for the periodic flush: (since, generation, uid).
    pool_order: std::collections::VecDeque<(Nanos, u64, Arc<str>)>,
    seq: u64,
    generation_counter: u64,
    depths: QueueDepths,
}

impl SchedulingQueue {
    pub fn new(opts: QueueOptions) -> Self {
        Self {
            opts,
            ..Default::default()
        }
    }

    pub fn options(&self) -> QueueOptions {
        self.opts
    }

    pub fn get(&self, uid: &str) -> Option<&Entry> {
        self.entries.get(uid)
    }

    /// Record `message` as the last one reported for `uid`. `false` when it is the same as
    /// the last (status intents are emitted only on change) or the pod is not queued.
    pub fn note_message(&mut self, uid: &str, message: &Arc<str>) -> bool {
        match self.entries.get_mut(uid) {
            Some(e) if e.last_message.as_deref() == Some(&**message) => false,
            Some(e) => {
                e.last_message = Some(message.clone());
                true
            }
            None => false,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn depths(&self) -> QueueDepths {
        self.depths
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &Entry)> {
        self.entries.iter()
    }

    fn next_gen(&mut self) -> u64 {
        self.generation_counter += 1;
        self.generation_counter
    }

    fn depth_mut(&mut self, s: PodState) -> &mut usize {
        match s {
            PodState::Gated => &mut self.depths.gated,
            PodState::Active => &mut self.depths.active,
            PodState::Backoff { .. } => &mut self.depths.backoff,
            PodState::Unschedulable { .. } => &mut self.depths.unschedulable,
            PodState::InFlight => &mut self.depths.in_flight,
            PodState::Binding => &mut self.depths.binding,
            PodState::Preempting { .. } => &mut self.depths.preempting,
        }
    }

    /// Move `uid` to `state`, maintaining heaps and depth counters.
    fn set_state(&mut self, uid: &Arc<str>, state: PodState) {
        let generation = self.next_gen();
        self.seq += 1;
        let seq = self.seq;
        let Some(e) = self.entries.get_mut(uid) else {
            return;
        };
        let old = e.state;
        e.state = state;
        e.generation = generation;
        let (urgent, sp, prio) = (e.urgent, e.pod.scheduling_priority, e.pod.priority);
        let lane = e.lane;
        if let PodState::Unschedulable { wake, .. } = old {
            count_wake(&mut self.wake_counts, wake, -1);
        }
        if let PodState::Unschedulable { wake, .. } = state {
            count_wake(&mut self.wake_counts, wake, 1);
        }
        match state {
            PodState::Active => {
                e.seq = seq;
                let heap = if lane {
                    &mut self.lane
                } else {
                    &mut self.active
                };
                heap.push(ActiveKey {
                    urgent,
                    scheduling_priority: sp,
                    priority: prio,
                    seq: Reverse(seq),
                    uid: uid.clone(),
                    generation,
                });
            }
            PodState::Backoff { until } => {
                let heap = if e.error_backoff {
                    &mut self.error_backoff
                } else {
                    &mut self.backoff
                };
                heap.push(Reverse((until, generation, uid.clone())))
            }
            PodState::Unschedulable { since, .. } => {
                self.pool_order.push_back((since, generation, uid.clone()))
            }
            _ => {}
        }
        *self.depth_mut(old) -= 1;
        *self.depth_mut(state) += 1;
    }

    /// A pending pod arrived or changed (watch add/update). Returns `true` if it is new.
    pub fn upsert(&mut self, pod: Arc<CompiledPod>, now: Nanos) -> bool {
        let uid = pod.uid.clone();
        if let Some(e) = self.entries.get_mut(&uid) {
            let was_gated = e.state == PodState::Gated;
            e.lane |= pod.lane;
            e.pod = pod.clone();
            match e.state {
                // The worker's result carries the spec it decided on; the driver compares.
                // A preempting pod stays held until its API calls are done.
                PodState::InFlight | PodState::Binding | PodState::Preempting { .. } => {}
                _ if pod.gated => {
                    if !was_gated {
                        self.set_state(&uid, PodState::Gated);
                    }
                }
                PodState::Gated => self.set_state(&uid, PodState::Active),
                // An update may make an unschedulable pod schedulable: retry it (after backoff).
                PodState::Unschedulable { .. } => self.requeue_after_backoff(&uid, now),
                // Re-key in its heap so priority changes take effect.
                PodState::Active => self.set_state(&uid, PodState::Active),
                PodState::Backoff { until } => self.set_state(&uid, PodState::Backoff { until }),
            }
            return false;
        }
        let state = if pod.gated {
            PodState::Gated
        } else {
            PodState::Active
        };
        let lane = pod.lane;
        self.entries.insert(
            uid.clone(),
            Entry {
                pod,
                state: PodState::Gated,
                generation: 0,
                urgent: false,
                attempts: 0,
                arrived: now,
                last_message: None,
                lane,
                seq: 0,
                error_backoff: false,
            },
        );
        self.depths.gated += 1;
        if state != PodState::Gated {
            self.set_state(&uid, state);
        }
        true
    }

    /// Remove a pod wherever it is. Returns its entry.
    pub fn remove(&mut self, uid: &str) -> Option<Entry> {
        let e = self.entries.remove(uid)?;
        if let PodState::Unschedulable { wake, .. } = e.state {
            count_wake(&mut self.wake_counts, wake, -1);
        }
        *self.depth_mut(e.state) -= 1;
        Some(e)
    }

    /// Pop the next pod from activeQ (moving expired backoff first), marking it in flight. Lane
    /// pods are considered only when `lane_free` (the driver hands off one at a time).
    pub fn pop(&mut self, now: Nanos, lane_free: bool) -> Option<(Arc<CompiledPod>, u64, bool)> {
        self.flush_backoff(now);
        let live = |entries: &crate::FastMap<Arc<str>, Entry>, k: &ActiveKey| {
            entries
                .get(&k.uid)
                .is_some_and(|e| e.generation == k.generation && e.state == PodState::Active)
        };
        // Drop stale tops so the two heads compare live pods.
        while self.active.peek().is_some_and(|k| !live(&self.entries, k)) {
            self.active.pop();
        }
        while self.lane.peek().is_some_and(|k| !live(&self.entries, k)) {
            self.lane.pop();
        }
        if self.active.is_empty() && (self.lane.is_empty() || !lane_free) {
            // Nothing ready: the first unschedulable backoff to end goes now (module doc),
            // unless it is a lane pod and the lane is busy (then it keeps its place).
            while let Some(Reverse((until, generation, uid))) = self.backoff.peek().cloned() {
                let Some(e) = self.entries.get(&uid) else {
                    self.backoff.pop();
                    continue;
                };
                if e.generation != generation || e.state != (PodState::Backoff { until }) {
                    self.backoff.pop();
                    continue;
                }
                if e.lane && !lane_free {
                    break;
                }
                self.backoff.pop();
                self.set_state(&uid, PodState::Active);
                break;
            }
        }
        let from_lane = match (self.active.peek(), self.lane.peek().filter(|_| lane_free)) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(l)) => l > a,
        };
        let k = if from_lane {
            self.lane.pop()
        } else {
            self.active.pop()
        }?;
        self.set_state(&k.uid, PodState::InFlight);
        let e = &self.entries[&k.uid];
        Some((e.pod.clone(), e.generation, from_lane))
    }

    /// From now on this pod is decided in the lane (its constraint turned out to span nodes).
    pub fn move_to_lane(&mut self, uid: &str) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.lane = true;
        }
    }

    /// Some pod in the unschedulable pool waits for one of `events`.
    fn pool_waits_for(&self, events: Events) -> bool {
        (0..32).any(|b| events & (1 << b) != 0 && self.wake_counts[b] > 0)
    }

    /// Return a popped pod that was not handed off (hand-off full, or the engine paused).
    pub fn unpop(&mut self, uid: &Arc<str>) {
        if self
            .entries
            .get(uid)
            .is_some_and(|e| e.state == PodState::InFlight)
        {
            self.set_state(uid, PodState::Active);
        }
    }

    /// Move backoff-expired pods to activeQ.
    pub fn flush_backoff(&mut self, now: Nanos) {
        self.flush_heap(now, false);
        self.flush_heap(now, true);
    }

    fn flush_heap(&mut self, now: Nanos, errors: bool) {
        loop {
            let heap = if errors {
                &mut self.error_backoff
            } else {
                &mut self.backoff
            };
            if heap
                .peek()
                .is_none_or(|Reverse((until, _, _))| *until > now)
            {
                break;
            }
            let (until, generation, uid) = heap.pop().expect("peeked").0;
            let live = self.entries.get(&uid).is_some_and(|e| {
                e.generation == generation && e.state == (PodState::Backoff { until })
            });
            if live {
                self.set_state(&uid, PodState::Active);
            }
        }
    }

    /// Flush pods that stayed in the pool longer than `max_unschedulable`.
    pub fn flush_unschedulable(&mut self, now: Nanos) {
        let max = self.opts.max_unschedulable;
        while self
            .pool_order
            .front()
            .is_some_and(|(since, _, _)| now.saturating_since(*since) >= max)
        {
            let (since, generation, uid) = self.pool_order.pop_front().expect("peeked");
            let live = self.entries.get(&uid).is_some_and(|e| {
                e.generation == generation
                    && matches!(e.state, PodState::Unschedulable { since: s, .. } if s == since)
            });
            if live {
                self.requeue_after_backoff(&uid, now);
            }
        }
    }

    fn backoff_duration(&self, attempts: u32) -> Duration {
        if attempts == 0 {
            return Duration::ZERO;
        }
        let shift = (attempts - 1).min(30);
        self.opts
            .initial_backoff
            .saturating_mul(1 << shift)
            .min(self.opts.max_backoff)
    }

    /// Retry an unschedulable pod now (to activeQ if its backoff has expired, else backoffQ).
    pub fn retry(&mut self, uid: &Arc<str>, now: Nanos) {
        if matches!(
            self.entries.get(uid).map(|e| e.state),
            Some(PodState::Unschedulable { .. })
        ) {
            self.requeue_after_backoff(uid, now);
        }
    }

    /// Back to activeQ if the pod's backoff (from its last failure) has expired, else backoffQ.
    fn requeue_after_backoff(&mut self, uid: &Arc<str>, now: Nanos) {
        let Some(e) = self.entries.get_mut(uid) else {
            return;
        };
        e.error_backoff = false;
        let e = &self.entries[uid];
        let since = match e.state {
            PodState::Unschedulable { since, .. } => since,
            _ => now,
        };
        let until = since.saturating_add(self.backoff_duration(e.attempts));
        if until <= now {
            self.set_state(uid, PodState::Active);
        } else {
            self.set_state(uid, PodState::Backoff { until });
        }
    }

    /// Cluster `events` happened: move back every pod one of them may help.
    pub fn on_cluster_event(&mut self, events: Events, now: Nanos) -> usize {
        self.on_cluster_event_with(events, now, |_| true)
    }

    /// [`SchedulingQueue::on_cluster_event`], where a pod that only `event::ROOM_FREED` can help
    /// moves back only if `room(pod)` says the room freed fits it. `room` is asked in queue
    /// order (priority, then the longest waiting first), so it can give each freed room to the
    /// first pods it fits and keep the others where they are.
    pub fn on_cluster_event_with(
        &mut self,
        events: Events,
        now: Nanos,
        mut room: impl FnMut(&CompiledPod) -> bool,
    ) -> usize {
        if events == 0 || self.depths.unschedulable == 0 || !self.pool_waits_for(events) {
            return 0;
        }
        // (judged, scheduling priority, priority, in the pool since, queue order, uid)
        type Waiting = (bool, i32, i32, Nanos, u64, Arc<str>);
        let mut movable: Vec<Waiting> = self
            .entries
            .iter()
            .filter_map(|(u, e)| match e.state {
                PodState::Unschedulable { wake, since } if wake & events != 0 => {
                    let judged = wake & events == crate::event::ROOM_FREED;
                    let (sp, p) = (e.pod.scheduling_priority, e.pod.priority);
                    Some((judged, sp, p, since, e.seq, u.clone()))
                }
                _ => None,
            })
            .collect();
        movable.sort_by(|a, b| (b.1, b.2, a.3, a.4).cmp(&(a.1, a.2, b.3, b.4)));
        let mut moved = 0;
        for (judged, _, _, _, _, uid) in movable {
            if judged && !room(&self.entries[&uid].pod) {
                continue;
            }
            self.requeue_after_backoff(&uid, now);
            moved += 1;
        }
        moved
    }

    /// The worker found no fitting node; `wake`: the events that can make the pod fit.
    pub fn mark_unschedulable(&mut self, uid: &Arc<str>, wake: Events, now: Nanos) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.attempts = e.attempts.saturating_add(1);
            e.urgent = false;
            self.set_state(uid, PodState::Unschedulable { since: now, wake });
        }
    }

    /// Held back before any attempt (upstream's PreEnqueue): to the pool like an unschedulable
    /// pod, but not counted as an attempt, so it has no backoff to serve when it is woken.
    pub fn mark_waiting(&mut self, uid: &Arc<str>, wake: Events, now: Nanos) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.urgent = false;
            self.set_state(uid, PodState::Unschedulable { since: now, wake });
        }
    }

    /// Every candidate conflicted: back to activeQ at once, ahead of non-urgent pods.
    pub fn requeue_urgent(&mut self, uid: &Arc<str>) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.urgent = true;
            self.set_state(uid, PodState::Active);
        }
    }

    /// A retryable failure (bind error): back off without marking the pod unschedulable.
    pub fn requeue_backoff(&mut self, uid: &Arc<str>, now: Nanos) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.attempts = e.attempts.saturating_add(1);
            e.urgent = false;
            e.error_backoff = true;
            let until = now.saturating_add(self.backoff_duration(self.entries[uid].attempts));
            self.set_state(uid, PodState::Backoff { until });
        }
    }

    /// Put back in activeQ (e.g. the engine was paused while the pod was in flight).
    pub fn requeue_active(&mut self, uid: &Arc<str>) {
        if self.entries.contains_key(uid) {
            self.set_state(uid, PodState::Active);
        }
    }

    /// Preemption nominated the pod (`PodState::Preempting`): held until its API calls are
    /// done, then woken by `wake`.
    pub fn mark_preempting(&mut self, uid: &Arc<str>, wake: Events) {
        if self.entries.contains_key(uid) {
            self.set_state(uid, PodState::Preempting { wake });
        }
    }

    /// Its preemption's API calls are done: it waits in the pool for its victims to leave, as
    /// an unschedulable pod woken by the events of its failed attempt (the room they free is
    /// judged for it, `event::ROOM_FREED`).
    pub fn preemption_done(&mut self, uid: &Arc<str>, now: Nanos) {
        if let Some(&PodState::Preempting { wake }) = self.entries.get(uid).map(|e| &e.state) {
            self.set_state(uid, PodState::Unschedulable { since: now, wake });
        }
    }

    pub fn mark_binding(&mut self, uid: &Arc<str>) {
        if let Some(e) = self.entries.get_mut(uid) {
            e.urgent = false;
            self.set_state(uid, PodState::Binding);
        }
    }

    /// Earliest time something in the queue needs attention (backoff expiry, pool flush).
    pub fn next_deadline(&self) -> Option<Nanos> {
        let b = self.backoff.peek().map(|Reverse((t, _, _))| *t);
        let p = self
            .pool_order
            .front()
            .map(|(s, _, _)| s.saturating_add(self.opts.max_unschedulable));
        match (b, p) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests;
