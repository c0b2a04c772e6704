//! Sharding: the NodeShard coordinator and the node-set view workers schedule against.
//!
//! Owns the scheduler's knowledge of every `NodeShard` (desired nodes, nodes in use as last
//! reported by each scheduler), the set of nodes this scheduler may use, the [`View`] every
//! snapshot carries of it, and the decision of what to write to its own shard's status and when.
//!
//! - [`Coordinator`] is the pure state machine of the rules below (unit-tested on its own).
//! - [`Sharding`] is what the driver (`core`) runs: the coordinator, turned into the snapshot's
//!   [`View`] (node names to slot masks), the leadership edge (a new term, rule 5), and the drain
//!   rule that gates every status write. It sees the cache and the bind versions only through
//!   [`NodeBook`], and the workers only through the horizon (the lowest snapshot sequence any
//!   worker may still hold, `worker::Shared::horizon`).
//! - The view is applied in one place, the scan in `allocate`: [`View::All`] scans every node,
//!   [`View::Only`] the shard's, [`View::First`] the shard's and then, if none fits, the rest;
//!   [`View::Missing`] schedules nothing and says why.
//! - [`status_lists`] is the one place the three status lists are computed (the coordinator
//!   for what to write, the adapter again against the spec it writes over).
//!
//! Rules (`docs/sharding.md` has the full story; upstream is `volcano-agent-scheduler.md` §7.2):
//!
//! 1. `available = own.nodesDesired − ⋃ other.status.nodesInUse` (upstream's formula).
//! 2. **Write before use.** A node enters the view only when it is available *and* listed in our
//!    own status's `nodesInUse` as the watch shows it. The status of every other shard that the
//!    watch delivered before our own echo is at least as new as our write, so a node another
//!    scheduler claimed first is seen before we use it; two schedulers never use one node.
//!    Our own object as the watch shows it can be older than our writes: a write may still be
//!    in flight, and its answer can come before the watch shows older versions of the object
//!    (a real server's watch cache lags behind its answers). So a node must also be listed by
//!    every write we issued that the watch has not shown yet (by resourceVersion,
//!    [`resource_version_order`]): in flight, answered, or failed (it may still have landed).
//!    Otherwise an older version of our object, still listing a node a later write of ours
//!    releases, would let us use that node again without claiming it anew while another
//!    scheduler may already be claiming it (say the controller took the node away and gave it
//!    back before our release landed).
//! 3. The status to report: `nodesInUse = available ∪ {nodes still draining}`,
//!    `nodesToAdd = desired − inUse`, `nodesToRemove = inUse − desired`. A node that left the
//!    view stays in `nodesInUse` until it is drained, so another scheduler takes it only once
//!    nothing of ours can still land on it.
//! 4. **Worker sync** (upstream's rule): no status is written while a worker may still schedule
//!    against a view older than the current one. Writes are serialised: one in flight at a time,
//!    so a burst of changes yields one write of the latest state, and a failed write is retried
//!    after [`RETRY_AFTER`] (even when the status then looks right: it may still land). Rules 3
//!    and 4 as the driver applies them ([`Sharding::status`]) are checked by the loom model
//!    `sharding_worker_sync`: once a status drops a node, no claim on it succeeds, and every
//!    earlier claim is applied and bound.
//! 5. **Hand-over hold.** When this replica starts leading, the nodes its shard's status already
//!    lists as in use may carry binds of its predecessor (another replica, or this process before
//!    a restart). They are not released before the hold (bind timeout + margin) has passed.
//! 6. **Fresh pods before use.** A node acquired from another shard may carry pods its previous
//!    owner bound moments ago that our pod watch has not delivered yet. Before a node that any
//!    other shard listed as in use since we started enters the view, the driver asks the
//!    adapter to list its pods afresh (a consistent read) and feed them in
//!    ([`Coordinator::take_pod_lists`], [`Coordinator::pods_listed`]). Other nodes need no
//!    list: scheduling starts only once every watch has delivered its first list. The list is
//!    read at one moment and fed in later, among events of the pod watch that may be newer or
//!    older than it. Its answer ([`crate::core::Input::NodePodsListed`]) carries the pods, so
//!    the driver knows where they come from, and two cases are handled without comparing
//!    resourceVersions (the API calls them opaque):
//!    - A pod that left (deleted or finished) while a list was in flight is not brought back by
//!      that list: a pod that is gone never returns (its UID is unique and a finished phase is
//!      final), so [`Sharding::pod_gone`] remembers it until every list in flight is answered,
//!      and the answer's view of it is dropped. Without that, the node would count a finished
//!      pod for good.
//!    - A relist of the pod watch replaces every placed pod with what its list showed, and that
//!      list may be older than a node's list fed in before it: the pods the previous owner bound
//!      in between would vanish until the watch caught up. So on a relist
//!      ([`Coordinator::pods_reset`]) every node listed since the previous relist leaves the
//!      view and is listed again before it is used, and the answers of lists in flight are
//!      dropped and asked again (they may be older than the relist).
//! 7. Own shard missing: no view. Hard mode then schedules nothing (the pods are reported
//!    unschedulable with the reason); soft mode schedules like `none`. Nothing is written.
//!
//! Uses only `clock`, `event`, `mutation` and `resource_version`: the snapshot carries the
//! [`View`] (and checks that its chunk is one mask word, [`MASK_SLOTS`]), not the other way.

use crate::clock::Nanos;
use crate::event::{self, Events};
use crate::mutation;
pub use crate::resource_version::resource_version_order;
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
    /// `metadata.resourceVersion` (rule 2: which of our writes this object includes).
    pub resource_version: Option<String>,
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

impl ShardStatusIntent {
    /// The three lists it writes.
    pub fn lists(&self) -> StatusLists {
        StatusLists {
            nodes_in_use: self.nodes_in_use.clone(),
            nodes_to_add: self.nodes_to_add.clone(),
            nodes_to_remove: self.nodes_to_remove.clone(),
        }
    }
}

/// The answer to a [`ShardStatusIntent`] that succeeded: the status as the server stored it
/// (the adapter recomputes the two derived lists from the spec it writes over) and the object's
/// resourceVersion after the write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenStatus {
    pub status: StatusLists,
    pub resource_version: Option<String>,
}

/// Whether an object at resourceVersion `seen` includes a write answered with `written`: it is
/// that write's echo or newer. Versions that do not compare include only themselves.
fn includes(seen: Option<&str>, written: Option<&str>) -> bool {
    match (seen, written) {
        (Some(s), Some(w)) => resource_version_order(s, w).map_or(s == w, |o| o.is_ge()),
        _ => false,
    }
}

/// Node slots per mask word of a [`NodeSet`]: one word per snapshot chunk (the snapshot checks
/// that its `CHUNK` is this).
pub const MASK_SLOTS: usize = u64::BITS as usize;

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
            let (c, i) = (slot as usize / MASK_SLOTS, slot as usize % MASK_SLOTS);
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
        self.mask(slot as usize / MASK_SLOTS) & (1 << (slot as usize % MASK_SLOTS)) != 0
    }
}

/// Upstream's reason for a node outside the shard in hard mode.
pub const NOT_IN_SHARD: &str = "node isn't in scheduler node shard";

/// What can make a pod rejected for [`NOT_IN_SHARD`] fit: a node entering the view.
pub const NOT_IN_SHARD_WAKE: Events = event::NODE_ADDED;

/// The sentence added to the unschedulable message while our NodeShard does not exist.
pub fn missing_shard_note(shard: &str) -> String {
    format!(
        " NodeShard {shard:?} does not exist: in hard sharding mode no pod is scheduled until it \
         does."
    )
}

/// The nodes a snapshot lets workers use (DESIGN.md §3: a node-set filter on the worker's view,
/// not a per-node predicate). Applied by the scan in `allocate`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum View {
    /// Every node: mode `none`, or `soft` while our NodeShard does not exist.
    #[default]
    All,
    /// Hard mode: the shard's nodes only; the others fail with [`NOT_IN_SHARD`].
    Only(Arc<NodeSet>),
    /// Soft mode: the shard's nodes first, the others only when none of those fits.
    First(Arc<NodeSet>),
    /// Hard mode while our NodeShard (named) does not exist: no node.
    Missing(Arc<str>),
}

impl View {
    /// The view of `mode` for a shard view of `slots` (`None`: our NodeShard does not exist).
    pub fn new(mode: ShardingMode, shard: &str, slots: Option<NodeSet>) -> View {
        match (mode, slots) {
            (ShardingMode::None, _) | (ShardingMode::Soft, None) => View::All,
            (ShardingMode::Hard, None) => View::Missing(Arc::from(shard)),
            (ShardingMode::Hard, Some(s)) => View::Only(Arc::new(s)),
            (ShardingMode::Soft, Some(s)) => View::First(Arc::new(s)),
        }
    }

    /// Node slots of chunk `c` a pod may use at all (one bit each); the rest fail with
    /// [`NOT_IN_SHARD`].
    #[inline]
    pub fn admits(&self, c: usize) -> u64 {
        match self {
            View::All | View::First(_) => u64::MAX,
            View::Only(set) => set.mask(c),
            View::Missing(_) => 0,
        }
    }

    /// Nodes in the shard's view (for the scan's sample size), or `None` when every node is.
    pub fn shard_nodes(&self) -> Option<usize> {
        match self {
            View::All => None,
            View::Only(set) | View::First(set) => Some(set.count),
            View::Missing(_) => Some(0),
        }
    }
}

/// A NodeShard's three status lists, sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusLists {
    pub nodes_in_use: Vec<String>,
    pub nodes_to_add: Vec<String>,
    pub nodes_to_remove: Vec<String>,
}

/// The status a scheduler reports when it uses `in_use` and its shard desires `desired`:
/// `nodesInUse` as given, `nodesToAdd = desired − inUse`, `nodesToRemove = inUse − desired`
/// (upstream's arithmetic, §7.2). The one place these lists are computed.
pub fn status_lists<A, B>(
    in_use: impl IntoIterator<Item = A>,
    desired: impl IntoIterator<Item = B>,
) -> StatusLists
where
    A: AsRef<str>,
    B: AsRef<str>,
{
    let in_use: BTreeSet<String> = in_use.into_iter().map(|s| s.as_ref().to_owned()).collect();
    let desired: BTreeSet<String> = desired.into_iter().map(|s| s.as_ref().to_owned()).collect();
    StatusLists {
        nodes_to_add: desired.difference(&in_use).cloned().collect(),
        nodes_to_remove: in_use.difference(&desired).cloned().collect(),
        nodes_in_use: in_use.into_iter().collect(),
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

/// A status write of ours the watch has not shown yet (rule 2).
#[derive(Debug)]
struct Unechoed {
    /// As asked for, then as the server stored it.
    status: StatusLists,
    /// The object's resourceVersion after the write; `None` while in flight or when it failed.
    resource_version: Option<String>,
    /// How it stands.
    outcome: WriteOutcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteOutcome {
    InFlight,
    Stored,
    /// It failed as far as we know; it may still have been applied.
    Failed,
}

/// Our own status as we last know it: our last stored write not yet echoed, else the watch's.
fn latest<'a>(unechoed: &'a [Unechoed], own: &'a Known) -> &'a StatusLists {
    unechoed
        .iter()
        .rev()
        .find(|w| w.outcome == WriteOutcome::Stored)
        .map_or(&own.status, |w| &w.status)
}

/// `v` sorted, without duplicates.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Whether sorted `list` holds `node`.
fn has(list: &[String], node: &str) -> bool {
    list.binary_search_by(|n| n.as_str().cmp(node)).is_ok()
}

#[derive(Debug, Default)]
struct Known {
    desired: BTreeSet<String>,
    /// As the watch shows it, normalised (sorted, no duplicates) so it compares as sets.
    status: StatusLists,
    resource_version: Option<String>,
}

/// The coordinator (see the module doc).
#[derive(Debug)]
pub struct Coordinator {
    opts: ShardingOptions,
    shards: BTreeMap<String, Known>,
    dirty: bool,
    view: Option<BTreeSet<String>>,
    revision: u64,
    /// Rule 2: our writes the watch has not shown yet, oldest first. One is in flight at a
    /// time (the last, if any), so the resourceVersions of those stored ascend.
    unechoed: Vec<Unechoed>,
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
    /// Rule 6, relists: nodes listed since the pod watch's last relist, and lists in flight
    /// at that relist (their answer may be older than it: listed again once answered).
    listed_since_reset: BTreeSet<String>,
    relist: BTreeSet<String>,
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
            unechoed: Vec::new(),
            retry_at: None,
            hold_pending: false,
            hold: None,
            held_elsewhere: BTreeSet::new(),
            listing: BTreeSet::new(),
            to_list: Vec::new(),
            listed_since_reset: BTreeSet::new(),
            relist: BTreeSet::new(),
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
            // Our own object changed: the writes it includes are echoed (rule 2).
            let rv = s.resource_version.as_deref();
            if let Some(last) = self
                .unechoed
                .iter()
                .rposition(|w| includes(rv, w.resource_version.as_deref()))
            {
                // Those before it were stored earlier, or failed before it was sent.
                self.unechoed.drain(..=last);
            }
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
                status: StatusLists {
                    nodes_in_use: sorted(s.nodes_in_use),
                    nodes_to_add: sorted(s.nodes_to_add),
                    nodes_to_remove: sorted(s.nodes_to_remove),
                },
                resource_version: s.resource_version,
            },
        );
        self.dirty = true;
    }

    pub fn delete(&mut self, name: &str) {
        self.dirty |= self.shards.remove(name).is_some();
    }

    /// A relist: this is every NodeShard.
    pub fn reset(&mut self, all: Vec<ShardInput>) {
        self.shards.clear();
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
                available.retain(|n| !has(&s.status.nodes_in_use, n));
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
            // Rule 2: claimed in what the watch shows, and not released by a later write.
            a.retain(|n| {
                has(&own.status.nodes_in_use, n)
                    && self.unechoed.iter().all(|w| has(&w.status.nodes_in_use, n))
            });
            a
        });
        let view = candidates.map(|c| {
            // Rule 6.
            self.listing.retain(|n| c.contains(n));
            let listing = &self.listing;
            self.relist.retain(|n| listing.contains(n));
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
                if !self.relist.remove(n) {
                    self.held_elsewhere.remove(n);
                    self.listed_since_reset.insert(n.clone());
                }
                // Else the answer may predate a relist since: still held, asked again.
                self.dirty = true;
            }
        }
    }

    /// Some list of nodes' pods is in flight (asked for, not answered).
    pub fn listing(&self) -> bool {
        !self.listing.is_empty()
    }

    /// Whether the answer of a list of `nodes` may be fed in: none of them was being listed
    /// when the pod watch last relisted.
    pub fn answer_is_current(&self, nodes: &[String]) -> bool {
        !nodes.iter().any(|n| self.relist.contains(n))
    }

    /// The pod watch relisted (rule 6): every node listed since its previous relist, or being
    /// listed, is listed again before it is used.
    pub fn pods_reset(&mut self) {
        let listed = std::mem::take(&mut self.listed_since_reset);
        self.dirty |= !listed.is_empty() || !self.listing.is_empty();
        self.held_elsewhere.extend(listed);
        self.relist.extend(self.listing.iter().cloned());
    }

    /// This replica started leading (rule 5).
    pub fn term_started(&mut self) {
        self.hold_pending = true;
        self.hold = None;
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
        let current = latest(&self.unechoed, own);
        let in_flight = self.unechoed.last().map(|w| w.outcome) == Some(WriteOutcome::InFlight);
        // A write that failed may or may not have been applied: only a new one settles it.
        let unsure = self
            .unechoed
            .iter()
            .any(|w| w.outcome == WriteOutcome::Failed);
        if std::mem::take(&mut self.hold_pending) {
            let until = Nanos(
                now.0
                    .saturating_add(self.opts.handover_hold.as_nanos() as u64),
            );
            let inherited = current.nodes_in_use.iter().cloned().collect();
            self.hold = Some((inherited, until));
        }
        if self.hold.as_ref().is_some_and(|(_, until)| now >= *until) {
            self.hold = None;
        }
        let held = |n: &str| self.hold.as_ref().is_some_and(|(h, _)| h.contains(n));
        let draining: BTreeSet<&String> = current
            .nodes_in_use
            .iter()
            .filter(|n| !available.contains(*n) && (held(n) || !drained(n)))
            .collect();
        self.gauges.draining = draining.len();
        self.gauges.in_use = current.nodes_in_use.len();
        let want = status_lists(available.iter().chain(draining), &own.desired);
        if (*current == want && !unsure)
            || in_flight
            || !workers_current
            || self.retry_at.is_some_and(|t| now < t)
        {
            return None;
        }
        self.retry_at = None;
        let intent = ShardStatusIntent {
            shard: Arc::from(self.opts.shard_name.as_str()),
            nodes_in_use: want.nodes_in_use.clone(),
            nodes_to_add: want.nodes_to_add.clone(),
            nodes_to_remove: want.nodes_to_remove.clone(),
            revision: self.revision,
        };
        // From now on it may land at any moment: the view stays within it (rule 2).
        self.unechoed.push(Unechoed {
            status: want,
            resource_version: None,
            outcome: WriteOutcome::InFlight,
        });
        self.dirty = true;
        Some(intent)
    }

    /// The outcome of the write [`Coordinator::status_to_write`] asked for: `Some` as the
    /// server stored it, or `None` when it failed.
    pub fn write_done(&mut self, written: Option<WrittenStatus>, now: Nanos) {
        let Some(pos) = self
            .unechoed
            .iter()
            .rposition(|w| w.outcome == WriteOutcome::InFlight)
        else {
            return;
        };
        self.dirty = true;
        match written {
            Some(w) => {
                let echoed = self.shards.get(&self.opts.shard_name).is_some_and(|own| {
                    includes(
                        own.resource_version.as_deref(),
                        w.resource_version.as_deref(),
                    )
                });
                if echoed {
                    // The watch showed it before its answer came.
                    self.unechoed.drain(..=pos);
                } else {
                    self.unechoed[pos] = Unechoed {
                        status: StatusLists {
                            nodes_in_use: sorted(w.status.nodes_in_use),
                            nodes_to_add: sorted(w.status.nodes_to_add),
                            nodes_to_remove: sorted(w.status.nodes_to_remove),
                        },
                        resource_version: w.resource_version,
                        outcome: WriteOutcome::Stored,
                    };
                }
            }
            None => {
                self.unechoed[pos].outcome = WriteOutcome::Failed;
                // Failed writes in a row bound the view by what they all list: one entry, so
                // an API that keeps failing does not grow the list.
                if pos > 0 && self.unechoed[pos - 1].outcome == WriteOutcome::Failed {
                    let last = self.unechoed.remove(pos);
                    let prev = &mut self.unechoed[pos - 1].status.nodes_in_use;
                    prev.retain(|n| has(&last.status.nodes_in_use, n));
                }
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

/// What the shard driving logic needs of the cache and the bind versions (implemented by
/// `cache::Cache`, which holds both).
pub trait NodeBook {
    /// The slot a node lives in.
    fn slot(&self, node: &str) -> Option<u32>;
    /// Increments of the slot's bind version the cache has accounted for (claims and bumps).
    fn applied(&self, slot: u32) -> u64;
    /// The slot's bind-version counter now (`binder`).
    fn counter(&self, slot: u32) -> u64;
    /// Pods assumed on the slot whose binding is not confirmed yet.
    fn binding(&self, slot: u32) -> u32;
}

/// The drain rule (rule 3): nothing of ours can land on `node` any more. Every claim on it has
/// reached the driver (counter = applied) and no pod assumed there is still binding. Each
/// `mutation::shard_release_*` is a deliberate bug the loom model `sharding_worker_sync` catches.
fn drained(book: &impl NodeBook, node: &str) -> bool {
    book.slot(node).is_none_or(|slot| {
        (book.binding(slot) == 0 || mutation::shard_release_ignores_binds())
            && (book.counter(slot) == book.applied(slot)
                || mutation::shard_release_ignores_claims())
    })
}

/// A change of the view the next snapshot must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewChange {
    pub view: View,
    /// A node (or the whole view) appeared: unschedulable pods may fit now.
    pub grew: bool,
}

/// Sharding as the driver runs it (see the module doc): the coordinator, the view it puts in
/// snapshots, the leadership edge, and the drain and worker-sync gates on every status write.
///
/// The driver calls, for each flush: [`Sharding::refresh`] before publishing (the view the
/// publication carries, and the nodes whose pods must be listed afresh), then
/// [`Sharding::status`] after it (the status to write, if due). Inputs (NodeShard events, write
/// outcomes, pod lists, leadership) go to the methods of the same name, in order.
#[derive(Debug)]
pub struct Sharding {
    coord: Coordinator,
    /// First snapshot sequence carrying the current view.
    view_seq: u64,
    /// A node got or lost a slot: the view's slot set must be rebuilt.
    slots_dirty: bool,
    leading: bool,
    /// Rule 6: pods gone while a list of nodes' pods was in flight.
    gone: std::collections::HashSet<Box<str>>,
}

impl Sharding {
    /// Sharding for `opts.mode` (not `none`), leading or not; and the view snapshots carry
    /// until the first refresh (hard mode: nothing, until our NodeShard is seen).
    pub fn new(opts: ShardingOptions, leading: bool) -> (Sharding, View) {
        let view = View::new(opts.mode, &opts.shard_name, None);
        let mut coord = Coordinator::new(opts);
        if leading {
            coord.term_started();
        }
        let s = Sharding {
            coord,
            view_seq: 0,
            slots_dirty: false,
            leading,
            gone: std::collections::HashSet::new(),
        };
        (s, view)
    }

    pub fn coordinator(&self) -> &Coordinator {
        &self.coord
    }

    pub fn apply(&mut self, s: ShardInput) {
        self.coord.apply(s);
    }

    pub fn delete(&mut self, name: &str) {
        self.coord.delete(name);
    }

    pub fn reset(&mut self, all: Vec<ShardInput>) {
        self.coord.reset(all);
    }

    pub fn write_done(&mut self, written: Option<WrittenStatus>, now: Nanos) {
        self.coord.write_done(written, now);
    }

    pub fn pods_listed(&mut self, nodes: &[String]) {
        self.coord.pods_listed(nodes);
        if !self.coord.listing() {
            self.gone.clear();
        }
    }

    /// The pod watch relisted (rule 6).
    pub fn pods_reset(&mut self) {
        self.coord.pods_reset();
    }

    /// A pod left for good (deleted, or finished): while a list of nodes' pods is in flight,
    /// that list may still show it; remember that it is gone. (A pod missing from a relist is
    /// not remembered: it may have been bound after the relist was read.)
    pub fn pod_gone(&mut self, uid: &str) {
        if self.coord.listing() {
            self.gone.insert(uid.into());
        }
    }

    /// Whether `uid` left while a list now answered was in flight: what the list says of it is
    /// older than its departure.
    pub fn is_gone(&self, uid: &str) -> bool {
        self.gone.contains(uid)
    }

    /// Whether the answer of a list of `nodes` may be used: it was not in flight when the pod
    /// watch relisted.
    pub fn answer_is_current(&self, nodes: &[String]) -> bool {
        self.coord.answer_is_current(nodes)
    }

    /// A node got or lost a slot.
    pub fn nodes_changed(&mut self) {
        self.slots_dirty = true;
    }

    /// Leadership as the driver's inputs tell it; gaining it starts a term (rule 5).
    pub fn set_leading(&mut self, leading: bool) {
        if leading && !self.leading {
            self.coord.term_started();
        }
        self.leading = leading;
    }

    /// Before a publication with sequence `next_seq`: the view it must carry, if it changed,
    /// and the nodes whose pods must be listed afresh before use (rule 6).
    pub fn refresh(
        &mut self,
        book: &impl NodeBook,
        next_seq: u64,
    ) -> (Option<ViewChange>, Vec<String>) {
        let changed = self.coord.refresh_view();
        let lists = self.coord.take_pod_lists();
        let slots_dirty = std::mem::take(&mut self.slots_dirty);
        if changed.is_none() && !slots_dirty {
            return (None, lists);
        }
        let slots = self
            .coord
            .view()
            .map(|names| NodeSet::from_slots(names.iter().filter_map(|n| book.slot(n))));
        let view = View::new(self.coord.mode(), self.coord.shard_name(), slots);
        if changed.is_some() {
            // Workers on an older snapshot may still use the old view (worker-sync rule).
            self.view_seq = next_seq;
        }
        let grew = changed == Some(true);
        (Some(ViewChange { view, grew }), lists)
    }

    /// After a publication: our NodeShard's status to write now, if it is due and allowed
    /// (rules 3–5). `horizon`: the lowest snapshot sequence a worker may still hold.
    pub fn status(
        &mut self,
        now: Nanos,
        horizon: u64,
        book: &impl NodeBook,
    ) -> Option<ShardStatusIntent> {
        if !self.leading {
            return None;
        }
        // A worker still on an older view holds the write back (rule 4).
        let workers_current = horizon >= self.view_seq || mutation::shard_release_ignores_workers();
        self.coord
            .status_to_write(now, workers_current, |n| drained(book, n))
    }

    /// When sharding next needs a look without any input.
    pub fn next_deadline(&self, now: Nanos) -> Option<Nanos> {
        self.coord.next_deadline(now)
    }

    pub fn gauges(&self) -> ShardGauges {
        self.coord.gauges()
    }

    pub fn shard_name(&self) -> &str {
        self.coord.shard_name()
    }
}

#[cfg(test)]
mod tests;
