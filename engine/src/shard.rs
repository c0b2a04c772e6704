//! Sharding: the NodeShard coordinator and the node-set view workers schedule against.
//!
//! Owns the scheduler's knowledge of every `NodeShard` (desired nodes, nodes in use as last
//! reported by each scheduler), the set of nodes this scheduler may use ([`Coordinator::view`]),
//! and the decision of what to write to its own shard's status and when. It is a pure state
//! machine run by the driver (`core`); it touches nothing else. The driver turns the view into a
//! [`NodeSet`] of slots carried by every snapshot, and answers the coordinator's one question
//! about the outside world: is a node *drained* (no worker on an older view, no claim not yet
//! applied, no claimed pod still binding to it).
//!
//! Rules (`docs/sharding.md` has the full story; upstream is `volcano-agent-scheduler.md` §7.2):
//!
//! 1. `available = own.nodesDesired − ⋃ other.status.nodesInUse` (upstream's formula).
//! 2. **Write before use.** A node enters the view only when it is available *and* listed in our
//!    own status's `nodesInUse` as the watch shows it. The status of every other shard that the
//!    watch delivered before our own echo is at least as new as our write, so a node another
//!    scheduler claimed first is seen before we use it; two schedulers never use one node.
//! 3. The status to report: `nodesInUse = available ∪ {nodes still draining}`,
//!    `nodesToAdd = desired − inUse`, `nodesToRemove = inUse − desired`. A node that left the
//!    view stays in `nodesInUse` until it is drained, so another scheduler takes it only once
//!    nothing of ours can still land on it.
//! 4. **Worker sync** (upstream's rule): no status is written while a worker may still schedule
//!    against a view older than the current one. Writes are serialised: one in flight at a time,
//!    so a burst of changes yields one write of the latest state, and a failed write is retried
//!    after [`RETRY_AFTER`]. Rules 3 and 4 as the driver applies them (`Core::shard_status`)
//!    are checked by the loom model `sharding_worker_sync`: once a status drops a node, no claim
//!    on it succeeds, and every earlier claim is applied and bound.
//! 5. **Hand-over hold.** When this replica starts leading, the nodes its shard's status already
//!    lists as in use may carry binds of its predecessor (another replica, or this process before
//!    a restart). They are not released before the hold (bind timeout + margin) has passed.
//! 6. **Fresh pods before use.** A node acquired from another shard may carry pods its previous
//!    owner bound moments ago that our pod watch has not delivered yet. Before a node that any
//!    other shard listed as in use since we started enters the view, the driver asks the
//!    adapter to list its pods afresh (a consistent read) and feed them in
//!    ([`Coordinator::take_pod_lists`], [`Coordinator::pods_listed`]). Other nodes need no
//!    list: scheduling starts only once every watch has delivered its first list.
//! 7. Own shard missing: no view. Hard mode then schedules nothing (the pods are reported
//!    unschedulable with the reason); soft mode schedules like `none`. Nothing is written.

use crate::clock::Nanos;
use crate::snapshot::CHUNK;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// How a failed status write is retried.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// `--scheduler-sharding-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShardingMode {
    /// Every cached node; NodeShards are ignored and nothing is written.
    #[default]
    None,
    /// Shard nodes first; other nodes only when no shard node fits.
    Soft,
    /// Only shard nodes.
    Hard,
}

impl ShardingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ShardingMode::None => "none",
            ShardingMode::Soft => "soft",
            ShardingMode::Hard => "hard",
        }
    }
}

impl std::fmt::Display for ShardingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ShardingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ShardingMode::None),
            "soft" => Ok(ShardingMode::Soft),
            "hard" => Ok(ShardingMode::Hard),
            _ => Err("valid values are none, soft, hard".into()),
        }
    }
}

/// How this scheduler shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardingOptions {
    pub mode: ShardingMode,
    /// `--scheduler-sharding-name`: the NodeShard this scheduler owns.
    pub shard_name: String,
    /// Rule 5: how long inherited in-use nodes are held at the start of a term.
    pub handover_hold: Duration,
}

impl Default for ShardingOptions {
    fn default() -> Self {
        Self {
            mode: ShardingMode::None,
            shard_name: "agent-scheduler".into(),
            handover_hold: Duration::from_secs(15),
        }
    }
}

/// A NodeShard as the watch shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardInput {
    pub name: String,
    pub nodes_desired: Vec<String>,
    /// `status.nodesInUse`.
    pub nodes_in_use: Vec<String>,
    /// `status.nodesToAdd` and `status.nodesToRemove` (compared, to know whether a write is due).
    pub nodes_to_add: Vec<String>,
    pub nodes_to_remove: Vec<String>,
}

/// Write this status to our own NodeShard (through `/status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardStatusIntent {
    pub shard: Arc<str>,
    /// Sorted.
    pub nodes_in_use: Vec<String>,
    pub nodes_to_add: Vec<String>,
    pub nodes_to_remove: Vec<String>,
    /// View revision this status belongs to.
    pub revision: u64,
}

/// The node slots of a view, as one bit per slot: `masks[c]` bit `i` is slot `c·64 + i`
/// (a chunk is 64 slots, so one word per chunk).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeSet {
    pub masks: Vec<u64>,
    /// Number of slots set.
    pub count: usize,
}

impl NodeSet {
    pub fn from_slots(slots: impl IntoIterator<Item = u32>) -> NodeSet {
        let mut s = NodeSet::default();
        for slot in slots {
            let (c, i) = (slot as usize / CHUNK, slot as usize % CHUNK);
            if s.masks.len() <= c {
                s.masks.resize(c + 1, 0);
            }
            if s.masks[c] & (1 << i) == 0 {
                s.masks[c] |= 1 << i;
                s.count += 1;
            }
        }
        s
    }

    /// The mask of chunk `c` (0 beyond the end).
    #[inline]
    pub fn mask(&self, c: usize) -> u64 {
        self.masks.get(c).copied().unwrap_or(0)
    }

    pub fn contains(&self, slot: u32) -> bool {
        self.mask(slot as usize / CHUNK) & (1 << (slot as usize % CHUNK)) != 0
    }
}

/// Gauges the coordinator exposes (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardGauges {
    pub desired: usize,
    pub view: usize,
    pub in_use: usize,
    pub draining: usize,
    pub missing: bool,
}

/// The three status lists, as sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Status {
    in_use: BTreeSet<String>,
    to_add: BTreeSet<String>,
    to_remove: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Known {
    desired: BTreeSet<String>,
    status: Status,
}

/// The coordinator (see the module doc).
#[derive(Debug)]
pub struct Coordinator {
    opts: ShardingOptions,
    shards: BTreeMap<String, Known>,
    dirty: bool,
    view: Option<BTreeSet<String>>,
    revision: u64,
    /// A write is in flight.
    in_flight: bool,
    /// The last write that succeeded, until our own shard's next watch event.
    written: Option<Status>,
    retry_at: Option<Nanos>,
    /// Rule 5: set at a term's start, taken at its first status computation.
    hold_pending: bool,
    hold: Option<(BTreeSet<String>, Nanos)>,
    /// Rule 6: nodes another shard listed in use since we started and whose pods were not
    /// listed afresh since, the lists asked for and not answered yet, and
    /// those still to ask for.
    held_elsewhere: BTreeSet<String>,
    listing: BTreeSet<String>,
    to_list: Vec<String>,
    gauges: ShardGauges,
}

impl Coordinator {
    pub fn new(opts: ShardingOptions) -> Coordinator {
        Coordinator {
            opts,
            shards: BTreeMap::new(),
            dirty: true,
            view: None,
            revision: 0,
            in_flight: false,
            written: None,
            retry_at: None,
            hold_pending: false,
            hold: None,
            held_elsewhere: BTreeSet::new(),
            listing: BTreeSet::new(),
            to_list: Vec::new(),
            gauges: ShardGauges {
                missing: true,
                ..ShardGauges::default()
            },
        }
    }

    pub fn mode(&self) -> ShardingMode {
        self.opts.mode
    }

    pub fn shard_name(&self) -> &str {
        &self.opts.shard_name
    }

    pub fn apply(&mut self, s: ShardInput) {
        if s.name == self.opts.shard_name {
            // Our own object changed (often the echo of our write): compare with it from now on.
            self.written = None;
        } else {
            // Rule 6: every node another shard lists as in use, as each status arrives (a later
            // status in the same batch may already have dropped it, and our desired set may
            // gain it only after that).
            self.held_elsewhere.extend(s.nodes_in_use.iter().cloned());
        }
        self.shards.insert(
            s.name,
            Known {
                desired: s.nodes_desired.into_iter().collect(),
                status: Status {
                    in_use: s.nodes_in_use.into_iter().collect(),
                    to_add: s.nodes_to_add.into_iter().collect(),
                    to_remove: s.nodes_to_remove.into_iter().collect(),
                },
            },
        );
        self.dirty = true;
    }

    pub fn delete(&mut self, name: &str) {
        if name == self.opts.shard_name {
            self.written = None;
        }
        self.dirty |= self.shards.remove(name).is_some();
    }

    /// A relist: this is every NodeShard.
    pub fn reset(&mut self, all: Vec<ShardInput>) {
        self.shards.clear();
        self.written = None;
        self.dirty = true;
        for s in all {
            self.apply(s);
        }
    }

    /// Nodes workers may use; `None` while our own NodeShard does not exist.
    pub fn view(&self) -> Option<&BTreeSet<String>> {
        self.view.as_ref()
    }

    pub fn revision(&self) -> u64 {
        self.revision
    }

    pub fn gauges(&self) -> ShardGauges {
        self.gauges
    }

    /// Rule 1.
    fn available(&self) -> Option<BTreeSet<String>> {
        let own = self.shards.get(&self.opts.shard_name)?;
        let mut available = own.desired.clone();
        for (name, s) in &self.shards {
            if *name != self.opts.shard_name {
                available.retain(|n| !s.status.in_use.contains(n));
            }
        }
        Some(available)
    }

    /// Recompute the view after shard changes (rules 1, 2, 6). Returns `Some(grew)` when it
    /// changed (the revision advanced): `grew` when a node or the whole view appeared.
    pub fn refresh_view(&mut self) -> Option<bool> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        let candidates = self.available().map(|mut a| {
            let own = &self.shards[&self.opts.shard_name];
            a.retain(|n| own.status.in_use.contains(n));
            a
        });
        let view = candidates.map(|c| {
            // Rule 6.
            self.listing.retain(|n| c.contains(n));
            for n in c.iter().filter(|n| self.held_elsewhere.contains(*n)) {
                if self.listing.insert(n.clone()) {
                    self.to_list.push(n.clone());
                }
            }
            let held = &self.held_elsewhere;
            c.into_iter().filter(|n| !held.contains(n)).collect()
        });
        self.gauges.missing = view.is_none();
        self.gauges.desired = self
            .shards
            .get(&self.opts.shard_name)
            .map_or(0, |s| s.desired.len());
        if view == self.view {
            return None;
        }
        let grew = match (&self.view, &view) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(old), Some(new)) => new.iter().any(|n| !old.contains(n)),
        };
        self.gauges.view = view.as_ref().map_or(0, BTreeSet::len);
        self.view = view;
        self.revision += 1;
        Some(grew)
    }

    /// Nodes whose pods the driver must have listed afresh before they can be used (rule 6).
    pub fn take_pod_lists(&mut self) -> Vec<String> {
        std::mem::take(&mut self.to_list)
    }

    /// The pods of `nodes` were listed and fed in (before this call, in input order).
    pub fn pods_listed(&mut self, nodes: &[String]) {
        for n in nodes {
            if self.listing.remove(n) {
                self.held_elsewhere.remove(n);
                self.dirty = true;
            }
        }
    }

    /// This replica started leading (rule 5).
    pub fn term_started(&mut self) {
        self.hold_pending = true;
        self.hold = None;
        self.written = None;
        self.retry_at = None;
    }

    /// The status to write now, if any (rules 3–5). `workers_current`: no worker may still
    /// schedule against a view older than the current one. `drained(node)`: nothing of ours can
    /// still land on a node outside the view.
    pub fn status_to_write(
        &mut self,
        now: Nanos,
        workers_current: bool,
        drained: impl Fn(&str) -> bool,
    ) -> Option<ShardStatusIntent> {
        let available = self.available()?;
        let own = &self.shards[&self.opts.shard_name];
        if std::mem::take(&mut self.hold_pending) {
            let until = Nanos(
                now.0
                    .saturating_add(self.opts.handover_hold.as_nanos() as u64),
            );
            self.hold = Some((own.status.in_use.clone(), until));
        }
        if self.hold.as_ref().is_some_and(|(_, until)| now >= *until) {
            self.hold = None;
        }
        let held = |n: &str| self.hold.as_ref().is_some_and(|(h, _)| h.contains(n));
        let draining: BTreeSet<String> = own
            .status
            .in_use
            .iter()
            .filter(|n| !available.contains(*n) && (held(n) || !drained(n)))
            .cloned()
            .collect();
        self.gauges.draining = draining.len();
        let in_use: BTreeSet<String> = available.union(&draining).cloned().collect();
        self.gauges.in_use = own.status.in_use.len();
        let want = Status {
            to_add: own.desired.difference(&in_use).cloned().collect(),
            to_remove: in_use.difference(&own.desired).cloned().collect(),
            in_use,
        };
        if *self.written.as_ref().unwrap_or(&own.status) == want
            || self.in_flight
            || !workers_current
            || self.retry_at.is_some_and(|t| now < t)
        {
            return None;
        }
        self.retry_at = None;
        self.in_flight = true;
        self.written = None;
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect();
        Some(ShardStatusIntent {
            shard: Arc::from(self.opts.shard_name.as_str()),
            nodes_in_use: list(&want.in_use),
            nodes_to_add: list(&want.to_add),
            nodes_to_remove: list(&want.to_remove),
            revision: self.revision,
        })
    }

    /// The outcome of the write [`Coordinator::status_to_write`] asked for: `Some(status)` as
    /// written (the adapter may have recomputed the two derived lists from a fresher spec), or
    /// `None` when it failed.
    pub fn write_done(&mut self, written: Option<&ShardStatusIntent>, now: Nanos) {
        self.in_flight = false;
        match written {
            Some(w) => {
                let set = |v: &[String]| v.iter().cloned().collect();
                self.written = Some(Status {
                    in_use: set(&w.nodes_in_use),
                    to_add: set(&w.nodes_to_add),
                    to_remove: set(&w.nodes_to_remove),
                });
            }
            None => {
                self.retry_at = Some(Nanos(now.0.saturating_add(RETRY_AFTER.as_nanos() as u64)));
            }
        }
    }

    /// When the coordinator next needs a look without any input (retry, end of the hold), if
    /// that is after `now`. A retry time or hold end at or before `now` is no deadline any more:
    /// it only gates [`Coordinator::status_to_write`], which this flush already asked at `now`
    /// (or, while not leading, has nothing to do until the next term resets both). Reporting it
    /// would make the driver spin until the next write or term.
    pub fn next_deadline(&self, now: Nanos) -> Option<Nanos> {
        let hold_end = self.hold.as_ref().map(|(_, t)| *t);
        [self.retry_at, hold_end]
            .into_iter()
            .flatten()
            .filter(|&t| t > now)
            .min()
    }
}

#[cfg(test)]
mod tests;
