//! The structured allocator (kube-scheduler's DynamicResources Filter, with
//! `k8s.io/dynamic-resource-allocation/structured`): for one pod and one node, devices for every
//! request of every claim the pod has that is not allocated yet, or the reason there are none.
//!
//! Per request, in claim order: the devices its class's and its own CEL selectors match
//! (resolved when the pod is handed off, [`Alternative::candidates`]), reachable from the node,
//! not in use (admin access excepted), not given to an earlier request of the pod, whose taints
//! the request tolerates, and whose counters (partitionable devices) still have room.
//! `ExactCount` takes `count` of them, `All` every one (and needs the pool complete). A request
//! with `firstAvailable` takes the first of its subrequests that can be satisfied. `matchAttribute`
//! constraints make every device of the requests they name agree on the attribute,
//! `distinctAttribute` ones make them all differ; they and the subrequests make it a search, done
//! depth-first with backtracking and a step budget ([`STEP_BUDGET`]: exceeding it fails the
//! node, as upstream's context timeout would).
//!
//! Consumable capacity (`capacity`): a device that allows multiple allocations is shared by
//! requests (of this pod's claims and of others) while what they consume of its capacities
//! fits, and consumes its counters once; a request's `capacity.requests` select devices that
//! publish those capacities (`capacity::consumption`). Requests and devices without capacity
//! skip all of it.
//!
//! A claim already allocated pins the pod to the nodes its allocation allows
//! ([`ClaimState::Allocated`]); its devices are in use already.
//!
//! Pure: reads the published [`DevicesView`] and [`InUse`], writes nothing.

use super::cel::AttrValue;
use super::devices::{DevId, DevicesView};
use crate::model::{NodeMeta, TaintEffect, Term, Toleration};
use std::sync::Arc;

/// Most device choices the search may make for one pod on one node (devices it turns away
/// without choosing them are not counted).
pub const STEP_BUDGET: usize = 10_000;

/// Most devices one claim's allocation holds (`AllocationResultsMaxSize`).
pub const MAX_RESULTS: usize = 32;

/// How many devices a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Count {
    Exact(u32),
    All,
}

/// A request, or one subrequest of a `firstAvailable` request.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// `req`, or `req/sub` for a subrequest (as the allocation result names it).
    pub name: Arc<str>,
    /// The devices its class's and its own selectors match and that have the capacity it asks
    /// for, ascending.
    pub candidates: Arc<[DevId]>,
    /// Parallel to `candidates`: what a share of each consumes (empty for a device taken
    /// whole); `None` when no candidate is shared and no capacity is asked
    /// (`devices::Serving::consumes`).
    pub consumes: Option<Arc<[Box<[i128]>]>>,
    pub count: Count,
    pub admin: bool,
    pub tolerations: Arc<[Toleration]>,
    /// `capacity.requests`: (name as written, milli-units); empty for most requests.
    pub capacity: Arc<[(Arc<str>, i128)]>,
}

/// A request of a claim: one alternative (`exactly`), or several in order (`firstAvailable`).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub name: Arc<str>,
    pub alternatives: Box<[Alternative]>,
}

/// `matchAttribute`: the devices of `requests` (every request when empty) agree on `attribute`
/// (`domain/name`); `distinctAttribute` (`distinct`): no two of them have the same value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub requests: Box<[Arc<str>]>,
    pub attribute: Arc<str>,
    pub distinct: bool,
}

/// A claim of the pod, as the allocator sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimState {
    /// Needs devices.
    Unallocated {
        requests: Box<[Request]>,
        constraints: Box<[Constraint]>,
    },
    /// Allocated already (by an earlier pod sharing it, or by someone else): the pod may only
    /// go where the allocation allows. `None`: anywhere.
    Allocated { nodes: Option<Arc<[Term]>> },
}

/// A claim of the pod (resolved at hand-off).
#[derive(Debug, Clone, PartialEq)]
pub struct PodClaim {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
    pub uid: Arc<str>,
    pub state: ClaimState,
}

/// Devices allocated or reserved, as of a snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InUse {
    /// One bit per device id.
    pub devices: Vec<u64>,
    /// Counters consumed, in milli-units by counter id (`DevicesView::counters`).
    pub counters: Vec<i128>,
    /// Devices that allow multiple allocations and have shares: what the shares consume, per
    /// capacity of the device (`Device::capacity`).
    pub shares: std::collections::BTreeMap<DevId, Box<[i128]>>,
    /// One bit per device id: a device that allows multiple allocations whose shares leave
    /// one of its capacities less than any share consumes (`capacity::least_share`): no
    /// request can have it, and the Filter skips it at the cost of a bit test.
    pub exhausted: Vec<u64>,
    /// One bit per device id: a device whose counters no longer fit beside what is consumed
    /// (partitionable devices). It counts only while the device has no share (a shared
    /// device's counters were consumed with its first share).
    pub counters_out: Vec<u64>,
}

impl InUse {
    pub fn contains(&self, id: DevId) -> bool {
        self.devices
            .get(id as usize / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    pub fn insert(&mut self, id: DevId) {
        let w = id as usize / 64;
        if self.devices.len() <= w {
            self.devices.resize(w + 1, 0);
        }
        self.devices[w] |= 1 << (id % 64);
    }

    /// Is `id` taken whole, or shared until no share fits ([`InUse::exhausted`])? Admin
    /// access aside, no request can have it.
    pub fn unavailable(&self, id: DevId) -> bool {
        let (w, bit) = (id as usize / 64, 1u64 << (id % 64));
        self.devices.get(w).is_some_and(|x| x & bit != 0)
            || self.exhausted.get(w).is_some_and(|x| x & bit != 0)
            || self.counters_out.get(w).is_some_and(|x| x & bit != 0) && self.shared(id).is_none()
    }

    /// Mark `id` exhausted.
    pub fn exhaust(&mut self, id: DevId) {
        set_bit(&mut self.exhausted, id);
    }

    /// Mark `id` as one whose counters no longer fit.
    pub fn counters_out(&mut self, id: DevId) {
        set_bit(&mut self.counters_out, id);
    }

    /// What is consumed of counter `id`.
    pub fn used(&self, id: u32) -> i128 {
        self.counters.get(id as usize).copied().unwrap_or(0)
    }

    /// Consume `amount` of counter `id`.
    pub fn consume(&mut self, id: u32, amount: i128) {
        let i = id as usize;
        if self.counters.len() <= i {
            self.counters.resize(i + 1, 0);
        }
        self.counters[i] += amount;
    }

    /// What the shares of `id` consume (`None`: it has none).
    pub fn shared(&self, id: DevId) -> Option<&[i128]> {
        if self.shares.is_empty() {
            return None;
        }
        self.shares.get(&id).map(|b| &**b)
    }

    /// Add a share of `id` consuming `amount`; false when the device had none yet (its
    /// counters are to be consumed now).
    pub fn add_share(&mut self, id: DevId, amount: &[i128]) -> bool {
        match self.shares.get_mut(&id) {
            Some(used) => {
                for (u, a) in used.iter_mut().zip(amount) {
                    *u += a;
                }
                true
            }
            None => {
                self.shares.insert(id, amount.into());
                false
            }
        }
    }

    pub fn remove(&mut self, id: DevId) {
        if let Some(w) = self.devices.get_mut(id as usize / 64) {
            *w &= !(1 << (id % 64));
        }
    }
}

fn set_bit(bits: &mut Vec<u64>, id: DevId) {
    let w = id as usize / 64;
    if bits.len() <= w {
        bits.resize(w + 1, 0);
    }
    bits[w] |= 1 << (id % 64);
}

/// One device given to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given {
    /// `req` or `req/sub`.
    pub request: Arc<str>,
    pub device: DevId,
    pub admin: bool,
    /// A share of a device that allows multiple allocations: what it consumes, per capacity.
    pub consumed: Option<Box<[i128]>>,
}

/// Why no allocation is possible on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoFit {
    /// `cannot allocate all claims`.
    CannotAllocate,
    /// `resourceclaim not available on the node`: an allocated claim does not allow it.
    Unavailable,
    /// `invalid resource pools were encountered`: devices that could have served were in
    /// pools upstream skips as invalid.
    InvalidPools,
}

impl NoFit {
    pub fn message(self) -> &'static str {
        match self {
            NoFit::CannotAllocate => "cannot allocate all claims",
            NoFit::Unavailable => "resourceclaim not available on the node",
            NoFit::InvalidPools => "invalid resource pools were encountered",
        }
    }
}

/// What one pod's unallocated claims get on a node: per claim (in the pod's claim order, the
/// allocated ones with nothing), the devices given.
pub type Allocation = Vec<Vec<Given>>;

struct Search<'a> {
    view: &'a DevicesView,
    in_use: &'a InUse,
    node: &'a NodeMeta,
    /// Devices taken by this pod so far.
    taken: Vec<DevId>,
    /// Counters consumed by this pod so far: (counter id, milli-units), a few entries.
    counters: Vec<(u32, i128)>,
    /// Shares this pod takes so far (devices that allow multiple allocations).
    shares: Vec<(DevId, Box<[i128]>)>,
    steps: usize,
    /// A candidate was left out because its pool is invalid.
    saw_invalid: bool,
    /// Per (claim, request) in order: the devices given.
    out: Vec<Vec<Given>>,
}

/// Each (claim index, request) of the pod to satisfy, flattened.
struct Slot<'a> {
    claim: usize,
    request: &'a Request,
    constraints: &'a [Constraint],
    /// The fewest devices the claim's later requests take (for the results limit).
    min_after: usize,
}

impl Search<'_> {
    /// Can `id` (`alt.candidates[ci]`) be given to `alt` on this node now?
    fn usable(&mut self, id: DevId, ci: usize, alt: &Alternative) -> bool {
        let Some(Some(d)) = self.view.devices.get(id as usize) else {
            return false;
        };
        // Nothing comes from a pool while it is being updated (not every slice of its newest
        // generation is known).
        if d.invalid_pool {
            self.saw_invalid = true;
            return false;
        }
        if d.incomplete_pool || !d.reach.admits(self.node) {
            return false;
        }
        // Admin access shares devices: with other claims and with the pod's other requests.
        // A device that allows multiple allocations is shared while its capacities last
        // (unless someone took it whole).
        if self.in_use.contains(id) && !alt.admin
            || !d.multi && !alt.admin && self.taken.contains(&id)
        {
            return false;
        }
        let tolerated = d.taints.iter().all(|t| {
            t.effect == TaintEffect::PreferNoSchedule
                || alt.tolerations.iter().any(|tol| tol.tolerates(t))
        });
        if !tolerated || !self.capacity_fits(id, ci, alt) {
            return false;
        }
        alt.admin || d.consumes.is_empty() || self.counters_fit(id)
    }

    /// What a share of `id` (`alt.candidates[ci]`) consumes; `None` for a device taken whole.
    fn share<'a>(&self, id: DevId, ci: usize, alt: &'a Alternative) -> Option<&'a [i128]> {
        let d = self.view.devices.get(id as usize)?.as_ref()?;
        if !d.multi {
            return None;
        }
        alt.consumes.as_ref().map(|c| &*c[ci])
    }

    /// Does a share of `id` (`alt.candidates[ci]`) fit the device now, beside what its shares
    /// (this pod's included) consume? True at once for a device taken whole (the candidates
    /// have what the request asks) and for a request and cluster without capacity.
    fn capacity_fits(&self, id: DevId, ci: usize, alt: &Alternative) -> bool {
        self.capacity_fits_beside(id, ci, alt, true)
    }

    /// [`Self::capacity_fits`], counting this pod's own shares only if `mine`.
    fn capacity_fits_beside(&self, id: DevId, ci: usize, alt: &Alternative, mine: bool) -> bool {
        let Some(amount) = self.share(id, ci, alt) else {
            return true;
        };
        let Some(Some(d)) = self.view.devices.get(id as usize) else {
            return false;
        };
        let used = self.in_use.shared(id);
        d.capacity.iter().enumerate().all(|(i, c)| {
            let mut total = used.and_then(|u| u.get(i)).copied().unwrap_or(0)
                + amount.get(i).copied().unwrap_or(0);
            for (s, a) in self.shares.iter().filter(|_| mine) {
                if *s == id {
                    total += a.get(i).copied().unwrap_or(0);
                }
            }
            total <= c.value
        })
    }

    /// Has `id` a share already (then its counters are consumed already)?
    fn has_share(&self, id: DevId) -> bool {
        self.in_use.shared(id).is_some() || self.shares.iter().any(|(s, _)| *s == id)
    }

    fn counters_fit(&self, id: DevId) -> bool {
        let d = self.view.devices[id as usize]
            .as_ref()
            .expect("usable device");
        if d.multi && self.has_share(id) {
            return true;
        }
        d.counters.iter().all(|&(k, amount)| {
            let cap = self.view.counters.get(k as usize).copied().unwrap_or(0);
            let mine: i128 = self
                .counters
                .iter()
                .filter(|&&(c, _)| c == k)
                .map(|&(_, a)| a)
                .sum();
            self.in_use.used(k) + mine + amount <= cap
        })
    }

    /// Admin access takes nothing: the device stays available to the pod's other requests. A
    /// share takes `share` of the device's capacities, and its counters with the first share.
    fn take(&mut self, id: DevId, admin: bool, share: Option<&[i128]>) {
        if admin {
            return;
        }
        let d = self.view.devices[id as usize]
            .as_ref()
            .expect("usable device");
        let counted = match share {
            Some(amount) => {
                let first = !self.has_share(id);
                self.shares.push((id, amount.into()));
                first
            }
            None => {
                self.taken.push(id);
                true
            }
        };
        if counted {
            for &(k, amount) in d.counters.iter() {
                self.counters.push((k, amount));
            }
        }
    }

    fn untake(&mut self, id: DevId, admin: bool, share: bool) {
        if admin {
            return;
        }
        if share {
            if let Some(i) = self.shares.iter().rposition(|(x, _)| *x == id) {
                self.shares.remove(i);
            }
            // Its counters went with the first share, now the last one.
            if self.has_share(id) {
                return;
            }
        } else if let Some(i) = self.taken.iter().rposition(|&x| x == id) {
            self.taken.swap_remove(i);
        }
        let d = self.view.devices[id as usize]
            .as_ref()
            .expect("usable device");
        for &(k, amount) in d.counters.iter() {
            if let Some(i) = self.counters.iter().rposition(|&e| e == (k, amount)) {
                self.counters.swap_remove(i);
            }
        }
    }

    fn attribute(&self, id: DevId, name: &str) -> Option<&AttrValue> {
        let d = self.view.devices[id as usize].as_ref()?;
        d.attributes
            .binary_search_by(|(k, _)| (**k).cmp(name))
            .ok()
            .map(|i| &d.attributes[i].1)
    }

    /// Do the devices given so far (and `id` for `request`) satisfy the constraints of the
    /// claim?
    fn constraints_hold(&self, slot: &Slot<'_>, request: &str, id: DevId) -> bool {
        for c in slot.constraints {
            let covers = |r: &str| {
                c.requests.is_empty()
                    || c.requests
                        .iter()
                        .any(|x| **x == *r || r.split('/').next() == Some(x))
            };
            if !covers(request) {
                continue;
            }
            let Some(v) = self.attribute(id, &c.attribute) else {
                return false;
            };
            for g in self.out[slot.claim].iter() {
                if covers(&g.request)
                    && (self.attribute(g.device, &c.attribute) == Some(v)) == c.distinct
                {
                    return false;
                }
            }
        }
        true
    }

    /// Satisfy slots `i..` (depth-first). `Err(())`: the budget ran out.
    fn solve(&mut self, slots: &[Slot<'_>], i: usize) -> Result<bool, ()> {
        let Some(slot) = slots.get(i) else {
            return Ok(true);
        };
        let view = self.view;
        let local = view
            .by_node
            .get(&self.node.name_id)
            .map_or(&[][..], Vec::as_slice);
        for alt in slot.request.alternatives.iter() {
            let mut usable = Vec::new();
            let (want, complete) = match alt.count {
                // The first `want` usable devices first: most pods get them, and the scan
                // stops there (there may be one device per node of the cluster, and this runs
                // per node). Four times as many each time the search needs others
                // (constraints, counters, the pod's earlier picks), up to all of them.
                Count::Exact(n) => {
                    let want = n as usize;
                    (want, self.collect(local, alt, want, &mut usable))
                }
                // `All`: every matching device the node reaches, none of them in use (upstream
                // fails the request rather than give it some of them).
                Count::All => {
                    self.collect(local, alt, usize::MAX, &mut usable);
                    // (A device shared while capacity lasts counts only if other claims'
                    // shares leave it room: upstream leaves the others out of "all". One the
                    // pod's own earlier requests used up is in "all" and fails it.)
                    let reachable = local
                        .iter()
                        .chain(view.shared.iter())
                        .filter_map(|&id| Some((id, alt.candidates.binary_search(&id).ok()?)))
                        .filter(|&(id, ci)| {
                            view.devices[id as usize].as_ref().is_some_and(|d| {
                                d.reach.admits(self.node)
                                    && (!d.multi || self.capacity_fits_beside(id, ci, alt, false))
                            })
                        })
                        .count();
                    // Nor given to the pod's other requests, admin access included (upstream:
                    // "allocating"), unless shared.
                    let given = |&(id, _): &(DevId, usize)| {
                        self.out
                            .iter()
                            .flatten()
                            .any(|g| g.device == id && g.consumed.is_none())
                    };
                    if reachable != usable.len() || usable.iter().any(given) {
                        continue;
                    }
                    (usable.len(), true)
                }
            };
            // A claim holds at most `MAX_RESULTS` devices (`AllocationResultsMaxSize`).
            // (Counting what the claim's later requests need at least: an alternative that
            // leaves them no room is skipped, not searched.)
            if want == 0
                || usable.len() < want
                || self.out[slot.claim].len() + want + slot.min_after > MAX_RESULTS
            {
                continue;
            }
            let before = self.out[slot.claim].len();
            if self.pick(slots, i, alt, &usable, 0, want)? {
                return Ok(true);
            }
            debug_assert_eq!(self.out[slot.claim].len(), before);
            let (mut limit, mut complete) = (want, complete);
            while !complete {
                limit = limit.saturating_mul(4);
                usable.clear();
                complete = self.collect(local, alt, limit, &mut usable);
                if self.pick(slots, i, alt, &usable, 0, want)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The devices `alt` can use on this node now, with their candidate index: the node's own
    /// then those more than one node reaches, ascending within each (the candidates are looked
    /// up, not scanned), at most `limit`. Whether every device was looked at.
    fn collect(
        &mut self,
        local: &[DevId],
        alt: &Alternative,
        limit: usize,
        out: &mut Vec<(DevId, usize)>,
    ) -> bool {
        let view = self.view;
        for &id in local.iter().chain(view.shared.iter()) {
            if out.len() >= limit {
                return false;
            }
            // Devices in use first, at a bit test each: after a burst they are most of them.
            if !alt.admin && self.in_use.unavailable(id) {
                continue;
            }
            if let Ok(ci) = alt.candidates.binary_search(&id)
                && self.usable(id, ci, alt)
            {
                out.push((id, ci));
            }
        }
        true
    }

    /// Pick `want` more devices for `alt` from `usable[from..]`, then go on with slot `i + 1`.
    fn pick(
        &mut self,
        slots: &[Slot<'_>],
        i: usize,
        alt: &Alternative,
        usable: &[(DevId, usize)],
        from: usize,
        want: usize,
    ) -> Result<bool, ()> {
        if want == 0 {
            return self.solve(slots, i + 1);
        }
        let slot = &slots[i];
        for k in from..usable.len() {
            if usable.len() - k < want {
                break;
            }
            let (id, ci) = usable[k];
            let share = self.share(id, ci, alt);
            if (!alt.admin && share.is_none() && self.taken.contains(&id))
                || !self.constraints_hold(slot, &alt.name, id)
            {
                continue;
            }
            // Counters and shared capacities may have been consumed by this pod's earlier
            // picks.
            if !alt.admin && !self.counters_fit(id)
                || share.is_some() && !self.capacity_fits(id, ci, alt)
            {
                continue;
            }
            // A choice made: the budget counts these (each costs a descent), not the devices
            // a check turns away (those cost a scan of the usable ones at most).
            self.steps += 1;
            if self.steps > STEP_BUDGET {
                return Err(());
            }
            self.take(id, alt.admin, share);
            let shared = share.is_some();
            self.out[slot.claim].push(Given {
                request: alt.name.clone(),
                device: id,
                admin: alt.admin,
                consumed: share.map(Box::from),
            });
            if self.pick(slots, i, alt, usable, k + 1, want - 1)? {
                return Ok(true);
            }
            self.out[slot.claim].pop();
            self.untake(id, alt.admin, shared);
            // The last request, without constraints: one device is as good as another of the
            // same alternative, so no need to try the others in its place. (An earlier
            // request's choice can matter to a later one whose selectors differ.)
            if i + 1 == slots.len() && slot.constraints.is_empty() && alt.count != Count::All {
                let d = self.view.devices[id as usize].as_ref();
                if d.is_some_and(|d| d.consumes.is_empty()) {
                    return Ok(false);
                }
            }
        }
        Ok(false)
    }
}

/// Devices for the pod's unallocated claims on `node`, or why not.
pub fn allocate(
    view: &DevicesView,
    in_use: &InUse,
    claims: &[PodClaim],
    node: &NodeMeta,
) -> Result<Allocation, NoFit> {
    let mut slots = Vec::new();
    for (ci, c) in claims.iter().enumerate() {
        match &c.state {
            ClaimState::Allocated { nodes } => {
                if let Some(terms) = nodes
                    && !terms.iter().any(|t| t.matches(node))
                {
                    return Err(NoFit::Unavailable);
                }
            }
            ClaimState::Unallocated {
                requests,
                constraints,
            } => {
                for (k, r) in requests.iter().enumerate() {
                    let min_after = requests[k + 1..]
                        .iter()
                        .map(|r| {
                            r.alternatives
                                .iter()
                                .map(|a| match a.count {
                                    Count::Exact(n) => n as usize,
                                    Count::All => 1,
                                })
                                .min()
                                .unwrap_or(0)
                        })
                        .sum();
                    slots.push(Slot {
                        claim: ci,
                        request: r,
                        constraints,
                        min_after,
                    });
                }
            }
        }
    }
    let mut s = Search {
        view,
        in_use,
        node,
        taken: Vec::new(),
        counters: Vec::new(),
        shares: Vec::new(),
        steps: 0,
        saw_invalid: false,
        out: vec![Vec::new(); claims.len()],
    };
    match s.solve(&slots, 0) {
        Ok(true) => Ok(s.out),
        Ok(false) | Err(()) if s.saw_invalid => Err(NoFit::InvalidPools),
        Ok(false) | Err(()) => Err(NoFit::CannotAllocate),
    }
}
