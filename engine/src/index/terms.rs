//! Pod affinity terms aggregated by topology domain, so that InterPodAffinity's PreFilter and
//! PreScore cost O(distinct terms) per pod rather than O(matching placed pods), and its Filter
//! one bit test per node and term (issue 32, point 3).
//!
//! Two kinds of aggregate, each kept per distinct term (by content: pods of one template share
//! theirs):
//! - **watched** terms ([`Watched`]): terms pods ask about (their own required anti-affinity
//!   and preferred terms, a single required affinity term, and topology spread constraints as
//!   terms over the pod's namespace that skip terminating pods, [`Terms::spread_term`]),
//!   registered by the cache when the driver first sees such a pod
//!   (`Cache::watch_terms`, at most [`MAX_WATCHED`], the least recently asked dropped first;
//!   counting one costs O(the placed pods it may match), through the label index).
//!   Each holds how many placed pods match the term in each domain of its key, and the slots
//!   whose domain holds one.
//! - **carried** terms ([`Carried`]): terms placed pods carry. Each holds how many pods carry
//!   it as required anti-affinity in each domain (and the slots whose domain holds one), and
//!   the weight pods carrying it give a pod it matches, per domain: kube-scheduler's
//!   `hardPodAffinityWeight` for required affinity, `+w` for preferred affinity, `−w` for
//!   preferred anti-affinity.
//!
//! The cache (single writer) keeps them as pods are counted on and off nodes
//! ([`Terms::pod`]), as nodes come, go or change domain ([`Terms::refresh_slot`]) and as
//! namespaces change (`Cache::set_namespace` recounts watched terms with a namespace
//! selector); every snapshot carries a clone. A domain is a `(key, value)` of the snapshot's
//! domain index (`index::Domains`), which indexes every aggregate's key before the aggregate
//! exists; the slots of a domain whose count turns non-zero (or zero) get their bit set (or
//! cleared) from it. Sums and bits are shared between snapshots in shards: a publication copies
//! what changed since the last one, never a whole aggregate.
//!
//! Unlike the other indexes, these are answers, not candidates: a reader checks no pod, so
//! they must equal a recount of the snapshot's own pods (the tests below recount after every
//! step). A snapshot whose pods differ from the cache's (preemption's `Cache::without`) carries
//! none ([`Terms::partial`]), and its readers scan placed pods as before.

use super::Domains;
use crate::FastMap;
use crate::model::{AffinityTerm, LabelSelector, Namespaces, NodeMeta, PodInfo, SpreadConstraint};
use std::sync::Arc;

/// Watched terms kept at most; past it, the least recently asked is dropped (its pods' readers
/// scan, as for a term not yet watched). A placed pod updates only the watched terms that may
/// select it (by its namespace and labels, [`Terms::pod`]), and a reader finds its term by hash,
/// so the number watched costs neither; each costs its sums and a bit per node slot.
pub const MAX_WATCHED: usize = 1024;

/// kube-scheduler's default `hardPodAffinityWeight`: what a placed pod's *required* affinity
/// term matching the incoming pod counts in the score.
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// Bits of a value that pick its sum within a [`Sums`] leaf, and within a mid-level node.
const LEAF_BITS: u32 = 6;
const MID_BITS: u32 = 6;
const LEAF: usize = 1 << LEAF_BITS;
const MID: usize = 1 << MID_BITS;

/// 64 consecutive values' sums.
type SumLeaf = [i64; LEAF];
/// 64 consecutive leaves (4,096 values), each present once one of its sums is non-zero.
type SumMid = [Option<Arc<SumLeaf>>; MID];

/// Values from here on are kept in [`Sums::spill`], not the tree: the top stays at most
/// `RADIX_LIMIT >> 12` = 256 pointers whatever ids the interner has handed out.
const RADIX_LIMIT: u32 = 1 << 20;

/// Sums by domain value: a radix tree over the value's id, three levels deep (top by
/// `value >> 12`, then 64 leaves of 64 sums), every node shared between snapshots; values of
/// [`RADIX_LIMIT`] and above in a sorted list beside it.
///
/// The Score reads one sum per scanned node and key: three dependent loads, no search and no
/// hashing (a binary search over one of 16 sorted shards was 4 % of all samples in the
/// preferred-anti-affinity replay). The first change after a publication copies the top
/// (one pointer per 4,096 values up to the largest, 256 at most), one mid node (64 pointers)
/// and one leaf (512 bytes). Values are interned ids handed out in sequence, so the values of
/// one key (its nodes' labels, interned as the nodes come) sit in few leaves: 8 bytes a
/// value for consecutive ids, up to 1 KB a value when each is 4,096 ids from the next. A leaf
/// whose sums all return to 0 is dropped, and a mid node left without leaves with it.
#[derive(Clone, Default)]
pub struct Sums {
    top: Arc<Vec<Option<Arc<SumMid>>>>,
    /// `(value, sum)` of the values from [`RADIX_LIMIT`] on, sorted by value.
    spill: Arc<Vec<(u32, i64)>>,
    /// Non-zero sums.
    len: usize,
}

impl Sums {
    /// The sum of the domain with `value` (0 when it has none).
    #[inline]
    pub fn get(&self, value: u32) -> i64 {
        if value >= RADIX_LIMIT {
            return self
                .spill
                .binary_search_by_key(&value, |&(v, _)| v)
                .map_or(0, |i| self.spill[i].1);
        }
        let v = value as usize;
        match self.top.get(v >> (LEAF_BITS + MID_BITS)) {
            Some(Some(mid)) => match &mid[(v >> LEAF_BITS) % MID] {
                Some(leaf) => leaf[v % LEAF],
                None => 0,
            },
            _ => 0,
        }
    }

    /// Add `d` to the sum of `value`: (before, after).
    fn add(&mut self, value: u32, d: i64) -> (i64, i64) {
        let before = self.get(value);
        if d == 0 {
            return (before, before);
        }
        let after = before + d;
        match (before != 0, after != 0) {
            (false, true) => self.len += 1,
            (true, false) => self.len -= 1,
            _ => {}
        }
        if value >= RADIX_LIMIT {
            let spill = Arc::make_mut(&mut self.spill);
            match spill.binary_search_by_key(&value, |&(v, _)| v) {
                Ok(i) if after == 0 => {
                    spill.remove(i);
                }
                Ok(i) => spill[i].1 = after,
                Err(i) => spill.insert(i, (value, after)),
            }
            return (before, after);
        }
        let v = value as usize;
        let (t, m, l) = (
            v >> (LEAF_BITS + MID_BITS),
            (v >> LEAF_BITS) % MID,
            v % LEAF,
        );
        let top = Arc::make_mut(&mut self.top);
        if top.len() <= t {
            top.resize(t + 1, None);
        }
        let mid =
            Arc::make_mut(top[t].get_or_insert_with(|| Arc::new(std::array::from_fn(|_| None))));
        let leaf = Arc::make_mut(mid[m].get_or_insert_with(|| Arc::new([0; LEAF])));
        leaf[l] = after;
        if after == 0 && leaf.iter().all(|&s| s == 0) {
            mid[m] = None;
            if mid.iter().all(Option::is_none) {
                top[t] = None;
                while top.last().is_some_and(Option::is_none) {
                    top.pop();
                }
            }
        }
        (before, after)
    }

    /// Whether every sum is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every non-zero `(value, sum)`, by value.
    pub fn iter(&self) -> impl Iterator<Item = (u32, i64)> + '_ {
        let leaves = self.top.iter().enumerate().flat_map(|(t, mid)| {
            mid.iter()
                .flat_map(|mid| mid.iter().enumerate())
                .filter_map(move |(m, leaf)| Some(((t * MID + m) * LEAF, leaf.as_ref()?)))
        });
        let tree = leaves.flat_map(|(base, leaf)| {
            leaf.iter()
                .enumerate()
                .filter(|&(_, &s)| s != 0)
                .map(move |(l, &s)| ((base + l) as u32, s))
        });
        tree.chain(self.spill.iter().copied())
    }
}

/// Slots per [`SlotBits`] chunk.
const BITS_CHUNK: usize = 4096;

/// A set of node slots, in chunks shared between snapshots.
#[derive(Clone, Default)]
pub struct SlotBits {
    chunks: Arc<Vec<Arc<[u64; BITS_CHUNK / 64]>>>,
}

impl SlotBits {
    #[inline]
    pub fn contains(&self, slot: usize) -> bool {
        self.chunks
            .get(slot / BITS_CHUNK)
            .is_some_and(|c| c[(slot % BITS_CHUNK) / 64] >> (slot % 64) & 1 != 0)
    }

    fn set(&mut self, slot: usize, on: bool) {
        if self.contains(slot) == on {
            return;
        }
        let chunks = Arc::make_mut(&mut self.chunks);
        let c = slot / BITS_CHUNK;
        if chunks.len() <= c {
            chunks.resize_with(c + 1, || Arc::new([0; BITS_CHUNK / 64]));
        }
        let word = &mut Arc::make_mut(&mut chunks[c])[(slot % BITS_CHUNK) / 64];
        if on {
            *word |= 1 << (slot % 64);
        } else {
            *word &= !(1 << (slot % 64));
        }
    }

    /// Every slot in the set, in order (tests).
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.chunks.len() * BITS_CHUNK).filter(|&s| self.contains(s))
    }
}

/// Sums per domain of one topology key, with (when `bits`) the slots whose domain's sum is
/// non-zero.
#[derive(Clone)]
pub struct ByDomain {
    pub key: u32,
    pub sums: Sums,
    /// Kept only for counts (a sum of weights may cancel to 0 with pods still there).
    blocked: Option<SlotBits>,
}

impl ByDomain {
    fn new(key: u32, bits: bool) -> Self {
        ByDomain {
            key,
            sums: Sums::default(),
            blocked: bits.then(SlotBits::default),
        }
    }

    /// The slots whose domain's count is non-zero (empty for a sum of weights).
    pub fn blocked(&self) -> &SlotBits {
        static NONE: std::sync::LazyLock<SlotBits> = std::sync::LazyLock::new(SlotBits::default);
        self.blocked.as_ref().unwrap_or(&NONE)
    }

    /// Add `d` to the domain of `meta` (nothing when the node has no such label).
    fn add(&mut self, meta: Option<&NodeMeta>, d: i64, domains: &Domains) {
        let Some(value) = meta.and_then(|m| m.label(self.key)).map(|l| l.value) else {
            return;
        };
        let (before, after) = self.sums.add(value, d);
        if let Some(bits) = &mut self.blocked
            && (before != 0) != (after != 0)
        {
            let slots = domains.slots(self.key, value);
            debug_assert!(slots.is_some(), "an aggregate's key is indexed first");
            for &s in slots.unwrap_or(&[]) {
                bits.set(s as usize, after != 0);
            }
        }
    }

    /// Whether `slot`'s bit differs from what its node's domain says (`None`: no node there).
    fn stale(&self, slot: u32, meta: Option<&NodeMeta>) -> bool {
        self.blocked.as_ref().is_some_and(|bits| {
            let on = meta
                .and_then(|m| m.label(self.key))
                .is_some_and(|l| self.sums.get(l.value) != 0);
            bits.contains(slot as usize) != on
        })
    }

    /// Set `slot`'s bit from its node's domain (`None`: no node there).
    fn refresh(&mut self, slot: u32, meta: Option<&NodeMeta>) {
        if let Some(bits) = &mut self.blocked {
            let on = meta
                .and_then(|m| m.label(self.key))
                .is_some_and(|l| self.sums.get(l.value) != 0);
            bits.set(slot as usize, on);
        }
    }
}

/// A term pods ask about: the placed pods matching it, counted per domain of its key.
#[derive(Clone)]
pub struct Watched {
    /// Shared, so copying the list after a publication copies no selector.
    pub term: Arc<AffinityTerm>,
    /// Terminating pods are not counted (a topology spread constraint's count, as the term
    /// [`Terms::spread_term`] makes of it).
    pub live_only: bool,
    pub matching: ByDomain,
}

impl Watched {
    fn counts(&self, p: &PodInfo, ns: &Namespaces) -> bool {
        !(self.live_only && p.terminating) && self.term.matches(p, ns)
    }
}

/// A term placed pods carry.
#[derive(Clone)]
pub struct Carried {
    /// Occurrences among placed pods (the aggregate goes with the last).
    carriers: u32,
    /// Of those, as required anti-affinity.
    anti_carriers: u32,
    /// Of those, as a term that scores (required or preferred affinity, preferred
    /// anti-affinity).
    score_carriers: u32,
    /// Pods carrying it as required anti-affinity, per domain.
    pub anti: ByDomain,
    /// The weights of the pods carrying it as a scoring term, summed per domain.
    pub score: ByDomain,
}

impl Carried {
    pub fn has_anti(&self) -> bool {
        self.anti_carriers > 0
    }

    pub fn scores(&self) -> bool {
        self.score_carriers > 0
    }
}

/// What a placed pod's term is to the pods it matches.
#[derive(Clone, Copy)]
enum Role {
    Anti,
    Score(i64),
}

/// The watched and carried aggregates (see the module doc).
#[derive(Clone, Default)]
pub struct Terms {
    watched: Arc<Vec<Watched>>,
    /// Where each watched term is in `watched`: by [`watch_hash`], and by what it may select
    /// (the `(namespace, key, value)` of one `In` requirement of its selector, for each of its
    /// namespaces) or, for a term with a namespace selector or no `In` requirement, listed apart.
    /// Rebuilt when a term is watched or dropped.
    lookup: Arc<Lookup>,
    /// Keys shared, so copying the map after a publication copies no selector.
    carried: Arc<FastMap<Arc<AffinityTerm>, Carried>>,
    /// The aggregates do not describe this snapshot's pods: readers scan.
    partial: bool,
}

/// The indexes of the watched terms ([`Terms::lookup`]).
#[derive(Clone, Default)]
struct Lookup {
    by_hash: FastMap<u64, Vec<u16>>,
    by_label: FastMap<(u32, u32, u32), Vec<u16>>,
    unkeyed: Vec<u16>,
}

/// What identifies a watched term, hashed (the spread lookup hashes the same fields without
/// building a term).
fn watch_hash(
    selector: &LabelSelector,
    namespaces: &[u32],
    namespace_selector: Option<&LabelSelector>,
    topology_key: u32,
    live_only: bool,
) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x7465_726d).build_hasher();
    selector.hash(&mut h);
    namespaces.hash(&mut h);
    namespace_selector.hash(&mut h);
    topology_key.hash(&mut h);
    live_only.hash(&mut h);
    h.finish()
}

fn hash_of(w: &Watched) -> u64 {
    let t = &w.term;
    watch_hash(
        &t.selector,
        &t.namespaces,
        t.namespace_selector.as_ref(),
        t.topology_key,
        w.live_only,
    )
}

impl Terms {
    /// The watched term with this hash that `is` accepts.
    fn find(&self, hash: u64, is: impl Fn(&Watched) -> bool) -> Option<&Watched> {
        if self.partial {
            return None;
        }
        let at = self.lookup.by_hash.get(&hash)?;
        at.iter()
            .map(|&i| &self.watched[i as usize])
            .find(|w| is(w))
    }

    /// The aggregate of a watched term; `None` when the term is not watched or the aggregates
    /// are [`partial`](Terms::partial).
    pub fn watched(&self, term: &AffinityTerm) -> Option<&Watched> {
        let t = term;
        let hash = watch_hash(
            &t.selector,
            &t.namespaces,
            t.namespace_selector.as_ref(),
            t.topology_key,
            false,
        );
        self.find(hash, |w| !w.live_only && *w.term == *term)
    }

    /// Rebuild [`Lookup`] from `watched`.
    fn index(&mut self) {
        let mut l = Lookup::default();
        for (i, w) in self.watched.iter().enumerate() {
            let i = i as u16;
            l.by_hash.entry(hash_of(w)).or_default().push(i);
            let t = &w.term;
            match (t.namespace_selector.is_none(), t.selector.lookup()) {
                (true, Some((k, values))) => {
                    for &ns in t.namespaces.iter() {
                        for &v in values {
                            l.by_label.entry((ns, k, v)).or_default().push(i);
                        }
                    }
                }
                _ => l.unkeyed.push(i),
            }
        }
        self.lookup = Arc::new(l);
    }

    /// The aggregate of a topology spread constraint of a pod in `namespace` (the live pods in
    /// that namespace matching its selector, per domain of its key), as
    /// [`Terms::watched`].
    pub fn watched_spread(&self, c: &SpreadConstraint, namespace: u32) -> Option<&Watched> {
        let hash = watch_hash(&c.selector, &[namespace], None, c.topology_key, true);
        self.find(hash, |w| {
            w.live_only
                && w.term.topology_key == c.topology_key
                && *w.term.namespaces == [namespace]
                && w.term.namespace_selector.is_none()
                && w.term.selector == c.selector
        })
    }

    /// The term a spread constraint of a pod in `namespace` counts by (with `live_only`).
    pub fn spread_term(c: &SpreadConstraint, namespace: u32) -> AffinityTerm {
        AffinityTerm {
            selector: c.selector.clone(),
            namespaces: Box::new([namespace]),
            namespace_selector: None,
            topology_key: c.topology_key,
        }
    }

    /// Every term placed pods carry, with its aggregate; `None` when the aggregates are
    /// [`partial`](Terms::partial).
    pub fn carried(&self) -> Option<impl Iterator<Item = (&AffinityTerm, &Carried)>> {
        (!self.partial).then(|| self.carried.iter().map(|(t, c)| (&**t, c)))
    }

    /// The same terms marked as not describing the pods of the snapshot that carries them.
    pub fn partial(&self) -> Terms {
        Terms {
            partial: true,
            ..Default::default()
        }
    }

    pub fn watched_len(&self) -> usize {
        self.watched.len()
    }

    /// Watch `term` (`live_only`: not counting terminating pods), counting the placed pods
    /// matching it (`pods`: every node with its pods). Its key must be indexed in `domains`.
    pub fn watch<'a>(
        &mut self,
        (term, live_only): (&AffinityTerm, bool),
        pods: impl IntoIterator<Item = (u32, &'a NodeMeta, &'a [Arc<PodInfo>])>,
        ns: &Namespaces,
        domains: &Domains,
    ) {
        let mut w = Watched {
            term: Arc::new(term.clone()),
            live_only,
            matching: ByDomain::new(term.topology_key, true),
        };
        for (_, meta, infos) in pods {
            for p in infos {
                if w.counts(p, ns) {
                    w.matching.add(Some(meta), 1, domains);
                }
            }
        }
        let watched = Arc::make_mut(&mut self.watched);
        match watched
            .iter()
            .position(|x| x.live_only == live_only && *x.term == *term)
        {
            Some(i) => watched[i] = w,
            None => watched.push(w),
        }
        debug_assert!(watched.len() <= MAX_WATCHED, "the cache drops one first");
        self.index();
    }

    /// Stop watching `term`.
    pub fn unwatch(&mut self, (term, live_only): (&AffinityTerm, bool)) {
        if let Some(i) = self
            .watched
            .iter()
            .position(|w| w.live_only == live_only && *w.term == *term)
        {
            Arc::make_mut(&mut self.watched).remove(i);
            self.index();
        }
    }

    /// The watched terms with a namespace selector (what a namespace change recounts).
    pub fn watched_by_namespace_labels(&self) -> Vec<(AffinityTerm, bool)> {
        self.watched
            .iter()
            .filter(|w| w.term.namespace_selector.is_some())
            .map(|w| ((*w.term).clone(), w.live_only))
            .collect()
    }

    /// The topology keys of `info`'s terms: the domain index must list them before the pod is
    /// counted (its required anti-affinity aggregates keep slot bits by domain, and a node
    /// moving to another domain of any of them moves its pods' sums).
    pub fn carried_keys(info: &PodInfo) -> impl Iterator<Item = u32> + '_ {
        info.affinity.as_deref().into_iter().flat_map(|a| {
            a.required_anti
                .iter()
                .chain(a.required.iter())
                .chain(a.preferred.iter().map(|(_, t)| t))
                .chain(a.preferred_anti.iter().map(|(_, t)| t))
                .map(|t| t.topology_key)
        })
    }

    /// A pod with `info` counted on the node `meta` (`sign` 1) or no longer
    /// (−1). The keys of its terms ([`Terms::carried_keys`]) and of every watched term must be
    /// indexed in `domains`.
    pub fn pod(
        &mut self,
        meta: Option<&NodeMeta>,
        info: &PodInfo,
        sign: i64,
        ns: &Namespaces,
        domains: &Domains,
    ) {
        if let Some(a) = info.affinity.as_deref() {
            let roles = a
                .required_anti
                .iter()
                .map(|t| (t, Role::Anti))
                .chain(
                    a.required
                        .iter()
                        .map(|t| (t, Role::Score(HARD_POD_AFFINITY_WEIGHT))),
                )
                .chain(
                    a.preferred
                        .iter()
                        .map(|(w, t)| (t, Role::Score(i64::from(*w)))),
                )
                .chain(
                    a.preferred_anti
                        .iter()
                        .map(|(w, t)| (t, Role::Score(-i64::from(*w)))),
                );
            for (t, role) in roles {
                self.carry(t, role, meta, sign, domains);
            }
        }
        if self.watched.is_empty() {
            return;
        }
        // The watched terms that may select the pod, then those that do.
        let mut hits: smallvec::SmallVec<[u16; 8]> = info
            .labels
            .iter()
            .flat_map(|&(k, v)| {
                self.lookup
                    .by_label
                    .get(&(info.namespace, k, v))
                    .map_or(&[][..], |l| &l[..])
            })
            .chain(&self.lookup.unkeyed)
            .copied()
            .filter(|&i| self.watched[i as usize].counts(info, ns))
            .collect();
        if hits.is_empty() {
            return;
        }
        hits.sort_unstable();
        hits.dedup();
        let watched = Arc::make_mut(&mut self.watched);
        for &i in &hits {
            watched[i as usize].matching.add(meta, sign, domains);
        }
    }

    fn carry(
        &mut self,
        t: &AffinityTerm,
        role: Role,
        meta: Option<&NodeMeta>,
        sign: i64,
        domains: &Domains,
    ) {
        let carried = Arc::make_mut(&mut self.carried);
        let c = match carried.get_mut(t) {
            Some(c) => c,
            None if sign > 0 => carried
                .entry(Arc::new(t.clone()))
                .or_insert_with(|| Carried {
                    carriers: 0,
                    anti_carriers: 0,
                    score_carriers: 0,
                    anti: ByDomain::new(t.topology_key, true),
                    score: ByDomain::new(t.topology_key, false),
                }),
            None => {
                debug_assert!(false, "a carried term removed that was not counted");
                return;
            }
        };
        let one = |n: &mut u32| *n = n.wrapping_add_signed(sign as i32);
        one(&mut c.carriers);
        match role {
            Role::Anti => {
                one(&mut c.anti_carriers);
                c.anti.add(meta, sign, domains);
            }
            Role::Score(w) => {
                one(&mut c.score_carriers);
                c.score.add(meta, sign * w, domains);
            }
        }
        if c.carriers == 0 {
            carried.remove(t);
        }
    }

    /// The node in `slot` is now `meta` (`None`: gone): its bit in every aggregate follows its
    /// domain. Call after its pods are counted with their new domain.
    pub fn refresh_slot(&mut self, slot: u32, meta: Option<&NodeMeta>) {
        // Only what changes is copied from what snapshots share.
        if self.watched.iter().any(|w| w.matching.stale(slot, meta)) {
            for w in Arc::make_mut(&mut self.watched).iter_mut() {
                w.matching.refresh(slot, meta);
            }
        }
        if self.carried.values().any(|c| c.anti.stale(slot, meta)) {
            for c in Arc::make_mut(&mut self.carried).values_mut() {
                c.anti.refresh(slot, meta);
            }
        }
    }

    /// Whether no term is watched or carried.
    pub fn is_empty(&self) -> bool {
        self.watched.is_empty() && self.carried.is_empty()
    }

    /// Every watched term (tests).
    pub fn watched_all(&self) -> &[Watched] {
        &self.watched
    }
}

#[cfg(test)]
mod tests {
    //! [`Sums`] against a map, through changes made while earlier clones (snapshots) are held.

    use super::Sums;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn check(sums: &Sums, model: &BTreeMap<u32, i64>) {
        let listed: Vec<(u32, i64)> = sums.iter().collect();
        let want: Vec<(u32, i64)> = model.iter().map(|(&v, &s)| (v, s)).collect();
        assert_eq!(listed, want);
        assert_eq!(sums.is_empty(), model.is_empty());
        for (&v, &s) in model {
            assert_eq!(sums.get(v), s);
        }
    }

    proptest! {
        #[test]
        fn sums_equal_a_map_and_clones_keep_theirs(
            ops in proptest::collection::vec(
                // Values clustered (interned ids in sequence) and far apart (across levels).
                (prop_oneof![
                    0u32..200,
                    4_000u32..4_200,
                    Just(300_000),
                    1_048_570u32..1_048_580,
                    Just(u32::MAX),
                ],
                 -3i64..=3, any::<bool>()),
                1..300,
            )
        ) {
            let mut sums = Sums::default();
            let mut model: BTreeMap<u32, i64> = BTreeMap::new();
            let mut held: Vec<(Sums, BTreeMap<u32, i64>)> = Vec::new();
            for (value, d, publish) in ops {
                if publish {
                    held.push((sums.clone(), model.clone()));
                }
                let before = model.get(&value).copied().unwrap_or(0);
                prop_assert_eq!(sums.add(value, d), (before, before + d));
                if before + d == 0 {
                    model.remove(&value);
                } else {
                    model.insert(value, before + d);
                }
                check(&sums, &model);
            }
            for (s, m) in &held {
                check(s, m);
            }
            // Every sum back to 0 leaves nothing allocated.
            for (&v, &s) in &model.clone() {
                sums.add(v, -s);
            }
            prop_assert!(sums.is_empty());
            prop_assert!(sums.top.is_empty() && sums.spill.is_empty());
        }
    }
}
