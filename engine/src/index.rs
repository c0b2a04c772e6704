//! The indexes the cross-node plugins and the post-claim validation read instead of scanning
//! every node or every placed pod (issue 32): node slots by topology domain ([`Domains`]), node
//! slots by the labels of the pods placed there ([`PodLabels`]), and placed pods' required
//! anti-affinity terms by the labels they select ([`AntiTerms`]); and, apart from those, the
//! placed pods whose affinity terms score others ([`ScoringPods`]), and affinity terms
//! aggregated by domain ([`terms`]: answers rather than candidates).
//!
//! Owns the maps and how they are shared; the cache (single writer) keeps its working copy up
//! to date as nodes and placed pods change, and every snapshot carries a clone, so a snapshot's
//! indexes describe exactly its nodes and pods. Each map is a [`PMap`]: a fixed array of shards
//! behind one `Arc`, each shard a hash table behind its own `Arc`, each entry a vector behind
//! a third. Publishing clones one `Arc`; the first change after a publication copies the top
//! ([`SHARDS`] pointers), the one shard the key lands in and the one entry it changes; the
//! entries of the pod indexes list slots in blocks ([`SlotBlock`]), each behind its own `Arc`,
//! so a change there copies the entry's block pointers and one block. So a publication stays
//! O(what changed) (DESIGN §3), and a reader pays O(its matches).
//!
//! Readers may treat [`PodLabels`] and [`AntiTerms`] answers as candidates: they check every
//! pod they find with the full selector, so an index never decides a verdict by itself.

pub mod terms;

use crate::FastMap;
use crate::model::{AffinityTerm, LabelSelector, NodeMeta, PodInfo};
use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

/// The indexes, as the cache keeps them and a snapshot carries them (behind one `Arc`,
/// and none at all until something is indexed: publishing costs clusters without constraints
/// nothing).
#[derive(Clone, Default)]
pub struct Indexes {
    pub domains: Domains,
    pub pod_labels: PodLabels,
    pub anti_terms: AntiTerms,
    /// Affinity terms aggregated by domain ([`terms`]).
    pub terms: terms::Terms,
}

impl Indexes {
    /// What a snapshot without indexes reads.
    pub fn empty() -> &'static Indexes {
        static EMPTY: std::sync::LazyLock<Indexes> = std::sync::LazyLock::new(Indexes::default);
        &EMPTY
    }
}

/// Placed pods whose affinity terms score others (`plugins::inter_pod_affinity::scores_others`),
/// with their slots, in slot order: what InterPodAffinity's PreScore visits for the symmetric
/// score. Kept in chunks of [`SCORING_CHUNK`] slots, each behind its own `Arc`, so publishing
/// clones one `Arc` and the first change after it copies the chunk pointers and the one chunk
/// it touches (it was a list rebuilt and sorted at every publication).
#[derive(Clone, Default)]
pub struct ScoringPods {
    chunks: Arc<Vec<Arc<ScoringChunk>>>,
    len: usize,
}

/// The scoring pods of [`SCORING_CHUNK`] consecutive slots, with their slots, in slot order.
type ScoringChunk = Vec<(u32, Arc<PodInfo>)>;

/// Slots per [`ScoringPods`] chunk.
pub const SCORING_CHUNK: usize = 64;

impl ScoringPods {
    /// `info` placed on `slot`.
    pub fn insert(&mut self, slot: u32, info: Arc<PodInfo>) {
        let c = slot as usize / SCORING_CHUNK;
        let chunks = Arc::make_mut(&mut self.chunks);
        if chunks.len() <= c {
            chunks.resize_with(c + 1, Default::default);
        }
        let chunk = Arc::make_mut(&mut chunks[c]);
        let i = chunk.partition_point(|(s, _)| *s <= slot);
        chunk.insert(i, (slot, info));
        self.len += 1;
    }

    /// `info` (by address) no longer on `slot`.
    pub fn remove(&mut self, slot: u32, info: &Arc<PodInfo>) {
        let c = slot as usize / SCORING_CHUNK;
        let Some(i) = self.chunks.get(c).and_then(|chunk| {
            chunk
                .iter()
                .position(|(s, p)| *s == slot && Arc::ptr_eq(p, info))
        }) else {
            return;
        };
        Arc::make_mut(&mut Arc::make_mut(&mut self.chunks)[c]).remove(i);
        self.len -= 1;
    }

    /// Every pod with its slot, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &(u32, Arc<PodInfo>)> {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

/// Shards per map: the top copied by the first change after a publication.
pub const SHARDS: usize = 64;

/// One shard of a [`PMap`]: its entries, each shared until changed.
type Shard<K, V> = FastMap<K, Arc<Vec<V>>>;

/// A persistent hash map from `K` to a vector of `V` (see the module doc).
pub struct PMap<K, V> {
    shards: Arc<Vec<Arc<Shard<K, V>>>>,
}

impl<K, V> Clone for PMap<K, V> {
    fn clone(&self) -> Self {
        PMap {
            shards: self.shards.clone(),
        }
    }
}

impl<K, V> Default for PMap<K, V> {
    fn default() -> Self {
        PMap {
            shards: Arc::new((0..SHARDS).map(|_| Arc::default()).collect()),
        }
    }
}

fn shard_of<K: Hash>(k: &K) -> usize {
    (foldhash::fast::FixedState::with_seed(0x6d61676d61).hash_one(k) % SHARDS as u64) as usize
}

impl<K: Hash + Eq + Clone, V: Clone> PMap<K, V> {
    /// The entry of `k` (empty when there is none).
    pub fn get(&self, k: &K) -> &[V] {
        self.shards[shard_of(k)].get(k).map_or(&[], |v| v)
    }

    /// Change the entry of `k` in place (copying what a snapshot still shares); an entry left
    /// empty is removed.
    pub fn update(&mut self, k: K, f: impl FnOnce(&mut Vec<V>)) {
        use std::collections::hash_map::Entry;
        let shard = Arc::make_mut(&mut Arc::make_mut(&mut self.shards)[shard_of(&k)]);
        match shard.entry(k) {
            Entry::Occupied(mut o) => {
                f(Arc::make_mut(o.get_mut()));
                if o.get().is_empty() {
                    o.remove();
                }
            }
            Entry::Vacant(e) => {
                let mut v = Vec::new();
                f(&mut v);
                if !v.is_empty() {
                    e.insert(Arc::new(v));
                }
            }
        }
    }

    /// Number of entries (tests).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Insert `x` into a sorted vector (no duplicates).
fn insert_sorted<T: Ord>(v: &mut Vec<T>, x: T) {
    if let Err(i) = v.binary_search(&x) {
        v.insert(i, x);
    }
}

fn remove_sorted<T: Ord>(v: &mut Vec<T>, x: &T) {
    if let Ok(i) = v.binary_search(x) {
        v.remove(i);
    }
}

/// Node slots by topology domain: `(key, value)` → the sorted slots of the live nodes with that
/// label, for the keys some pod's constraints name (indexed from the first such pod on,
/// [`Domains::add_key`]).
#[derive(Clone, Default)]
pub struct Domains {
    keys: Arc<Vec<u32>>,
    slots: PMap<(u32, u32), u32>,
    /// key → the sorted values that have nodes.
    values: PMap<u32, u32>,
}

impl Domains {
    /// Whether any key is indexed.
    pub fn has_keys(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Whether `key` is indexed.
    pub fn indexes(&self, key: u32) -> bool {
        self.keys.binary_search(&key).is_ok()
    }

    /// The slots of the domain `(key, value)`; `None` when `key` is not indexed.
    pub fn slots(&self, key: u32, value: u32) -> Option<&[u32]> {
        self.indexes(key).then(|| self.slots.get(&(key, value)))
    }

    /// The values of `key` that have nodes, sorted; `None` when `key` is not indexed.
    pub fn values(&self, key: u32) -> Option<&[u32]> {
        self.indexes(key).then(|| self.values.get(&key))
    }

    fn insert(&mut self, key: u32, value: u32, slot: u32) {
        let mut first = false;
        self.slots.update((key, value), |v| {
            first = v.is_empty();
            insert_sorted(v, slot)
        });
        if first {
            self.values.update(key, |v| insert_sorted(v, value));
        }
    }

    fn remove(&mut self, key: u32, value: u32, slot: u32) {
        let mut last = false;
        self.slots.update((key, value), |v| {
            remove_sorted(v, &slot);
            last = v.is_empty();
        });
        if last {
            self.values.update(key, |v| remove_sorted(v, &value));
        }
    }

    /// Index `key` from now on, starting with `nodes`. Whether it was new.
    pub fn add_key<'a>(
        &mut self,
        key: u32,
        nodes: impl IntoIterator<Item = (u32, &'a NodeMeta)>,
    ) -> bool {
        if self.indexes(key) {
            return false;
        }
        insert_sorted(Arc::make_mut(&mut self.keys), key);
        for (slot, meta) in nodes {
            if let Some(l) = meta.label(key) {
                self.insert(key, l.value, slot);
            }
        }
        true
    }

    /// A node is now in `slot` with `meta` (`sign` 1) or no longer (-1).
    pub fn node(&mut self, slot: u32, meta: &NodeMeta, sign: i64) {
        for &key in self.keys.clone().iter() {
            if let Some(l) = meta.label(key) {
                if sign > 0 {
                    self.insert(key, l.value, slot);
                } else {
                    self.remove(key, l.value, slot);
                }
            }
        }
    }

    /// A node's labels changed: whether any indexed key's value differs.
    pub fn moves(&self, old: &NodeMeta, new: &NodeMeta) -> bool {
        self.keys
            .iter()
            .any(|&k| old.label(k).map(|l| l.value) != new.label(k).map(|l| l.value))
    }
}

/// Slots per [`SlotBlock`]: a change copies at most this many `(slot, pods)` of a list.
const SLOT_BLOCK: u32 = if cfg!(test) { 4 } else { 512 };

/// The `(slot, pods)` of one range of [`SLOT_BLOCK`] slots, sorted by slot, shared between
/// snapshots. An index entry is a vector of these, sorted by block, so the first change after
/// a publication copies the entry's block pointers and one block, not every slot holding a
/// pod with that label (a label all pods share lists every node: 5,000 slots copied per
/// publication in the constraint replay).
#[derive(Clone)]
pub struct SlotBlock {
    /// The block's first slot / [`SLOT_BLOCK`].
    block: u32,
    slots: Arc<Vec<(u32, u32)>>,
}

/// The `(slot, pods)` of a block list, in slot order.
pub fn block_slots(blocks: &[SlotBlock]) -> impl Iterator<Item = &(u32, u32)> + '_ {
    blocks.iter().flat_map(|b| b.slots.iter())
}

/// Node slots by the labels of the pods placed there: `(namespace, key, value)` → sorted
/// `(slot, pods)` in blocks, maintained while the pod index is on (`Cache::enable_pod_index`),
/// for the label keys some pod's selector looks pods up by ([`PodLabels::add_key`]). Labels no
/// selector reads (a per-pod id, a batch signature) are not indexed: they would cost an entry
/// each, and every publication would copy the shard they land in.
#[derive(Clone, Default)]
pub struct PodLabels {
    /// The label keys indexed, sorted.
    keys: Arc<Vec<u32>>,
    slots: PMap<(u32, u32, u32), SlotBlock>,
}

impl PodLabels {
    /// A pod with `info` counted on `slot` (`sign` 1) or no longer (-1).
    pub fn pod(&mut self, slot: u32, info: &PodInfo, sign: i64) {
        if self.keys.is_empty() {
            return;
        }
        for &(k, v) in info.labels.iter() {
            if self.indexes(k) {
                self.slots
                    .update((info.namespace, k, v), |e| count_slot(e, slot, sign));
            }
        }
    }

    /// Whether label `key` is indexed.
    pub fn indexes(&self, key: u32) -> bool {
        self.keys.binary_search(&key).is_ok()
    }

    /// Index label `key` from now on, starting with the placed `pods`. Whether it was new.
    pub fn add_key<'a>(
        &mut self,
        key: u32,
        pods: impl IntoIterator<Item = (u32, &'a PodInfo)>,
    ) -> bool {
        if self.indexes(key) {
            return false;
        }
        insert_sorted(Arc::make_mut(&mut self.keys), key);
        for (slot, info) in pods {
            if let Some(v) = crate::model::label_value(&info.labels, key) {
                self.slots
                    .update((info.namespace, key, v), |e| count_slot(e, slot, 1));
            }
        }
        true
    }

    /// The `In` requirement `selector` is looked up by, if the index can answer it: `None`
    /// when it has none or its key is not indexed (the caller scans).
    fn lookup<'s>(&self, selector: &'s LabelSelector) -> Option<(u32, &'s [u32])> {
        selector
            .lookup()
            .filter(|(key, values)| values.is_empty() || self.indexes(*key))
    }

    /// `(slot, pods)` for the pods in `namespace` labelled `key=value`, in slot order.
    pub fn slots(
        &self,
        namespace: u32,
        key: u32,
        value: u32,
    ) -> impl Iterator<Item = &(u32, u32)> + '_ {
        block_slots(self.slots.get(&(namespace, key, value)))
    }

    /// The slots whose pods in `namespace` may match `selector` (every pod it matches is on
    /// one of them), pushed to `out` unsorted; `false` (nothing pushed) when the selector has no
    /// `In` requirement to look up by, or its key is not indexed.
    pub fn selector_slots(
        &self,
        namespace: u32,
        selector: &LabelSelector,
        out: &mut Vec<u32>,
    ) -> bool {
        let Some((key, values)) = self.lookup(selector) else {
            return false;
        };
        for &v in values {
            out.extend(self.slots(namespace, key, v).map(|&(s, _)| s));
        }
        true
    }

    /// The `(slot, pods)` lists holding every pod `term` may match (a slot may be in several);
    /// `None` when the term cannot be looked up (as [`PodLabels::term_slots`]).
    pub fn term_lists<'a>(
        &'a self,
        term: &'a AffinityTerm,
    ) -> Option<impl Iterator<Item = &'a [SlotBlock]> + 'a> {
        if term.namespace_selector.is_some() {
            return None;
        }
        let (key, values) = self.lookup(&term.selector)?;
        Some(
            term.namespaces
                .iter()
                .flat_map(move |&ns| values.iter().map(move |&v| self.slots.get(&(ns, key, v)))),
        )
    }

    /// The slots whose pods may match `term` (every pod it matches is on one of them), pushed
    /// to `out` sorted and deduplicated; `false` (nothing pushed) when the term cannot be looked
    /// up: a namespace selector, a selector without an `In` requirement, or its key not
    /// indexed.
    pub fn term_slots(&self, term: &AffinityTerm, out: &mut Vec<u32>) -> bool {
        if term.namespace_selector.is_some() {
            return false;
        }
        let Some((key, values)) = self.lookup(&term.selector) else {
            return false;
        };
        let start = out.len();
        for &ns in term.namespaces.iter() {
            for &v in values {
                out.extend(self.slots(ns, key, v).map(|&(s, _)| s));
            }
        }
        out[start..].sort_unstable();
        let mut tail = out.split_off(start);
        tail.dedup();
        out.append(&mut tail);
        true
    }
}

/// Placed pods' required anti-affinity terms by what they select: `(namespace, key, value)` →
/// sorted `(slot, pods)` for the pods on `slot` with a term naming that namespace whose selector
/// requires `key` in a set holding `value`; pods with a term that cannot be looked up that way
/// (a namespace selector, no `In` requirement) are counted apart ([`AntiTerms::candidates`]
/// always gives their slots). Readers check the pods of each slot with the whole term.
#[derive(Clone, Default)]
pub struct AntiTerms {
    keyed: PMap<(u32, u32, u32), SlotBlock>,
    unkeyed: Arc<Vec<SlotBlock>>,
    /// Pods indexed: none, and a pod looks nothing up.
    pods: usize,
}

/// Count a pod on `slot` in a block list (`sign` 1) or no longer (-1): one block copied
/// when a snapshot shares it, an empty block dropped.
fn count_slot(blocks: &mut Vec<SlotBlock>, slot: u32, sign: i64) {
    let b = slot / SLOT_BLOCK;
    let i = match blocks.binary_search_by_key(&b, |e| e.block) {
        Ok(i) => i,
        Err(_) if sign < 0 => {
            debug_assert!(false, "a pod removed that was not indexed");
            return;
        }
        Err(i) => {
            let slots = Arc::default();
            blocks.insert(i, SlotBlock { block: b, slots });
            i
        }
    };
    let block = Arc::make_mut(&mut blocks[i].slots);
    count_in_block(block, slot, sign);
    if block.is_empty() {
        blocks.remove(i);
    }
}

/// Count a pod on `slot` in a sorted `(slot, pods)` list (`sign` 1) or no longer (-1).
fn count_in_block(e: &mut Vec<(u32, u32)>, slot: u32, sign: i64) {
    match e.binary_search_by_key(&slot, |&(s, _)| s) {
        Ok(i) if sign > 0 => e[i].1 += 1,
        Ok(i) => {
            e[i].1 -= 1;
            if e[i].1 == 0 {
                e.remove(i);
            }
        }
        Err(i) if sign > 0 => e.insert(i, (slot, 1)),
        Err(_) => debug_assert!(false, "a pod removed that was not indexed"),
    }
}

impl AntiTerms {
    /// The keys `info`'s required anti-affinity terms are found under, and whether some term
    /// is unkeyed.
    fn keys(info: &PodInfo) -> (Vec<(u32, u32, u32)>, bool) {
        let mut keys = Vec::new();
        let mut unkeyed = false;
        let terms = info
            .affinity
            .as_deref()
            .map_or(&[][..], |a| &a.required_anti);
        for t in terms {
            match (t.namespace_selector.is_none(), t.selector.lookup()) {
                (true, Some((k, values))) => {
                    for &ns in t.namespaces.iter() {
                        keys.extend(values.iter().map(|&v| (ns, k, v)));
                    }
                }
                _ => unkeyed = true,
            }
        }
        keys.sort_unstable();
        keys.dedup();
        (keys, unkeyed)
    }

    /// A pod with `info` counted on `slot` (`sign` 1) or no longer (-1).
    pub fn pod(&mut self, slot: u32, info: &PodInfo, sign: i64) {
        if !info.has_required_anti() {
            return;
        }
        let (keys, unkeyed) = AntiTerms::keys(info);
        self.pods = self.pods.wrapping_add_signed(sign as isize);
        for k in keys {
            self.keyed.update(k, |e| count_slot(e, slot, sign));
        }
        if unkeyed {
            count_slot(Arc::make_mut(&mut self.unkeyed), slot, sign);
        }
    }

    /// The slots holding a pod whose required anti-affinity terms may select a pod in
    /// `namespace` with `labels` (every such pod is on one of them), sorted and deduplicated
    /// into `out`.
    pub fn candidates(&self, namespace: u32, labels: &[(u32, u32)], out: &mut Vec<u32>) {
        out.clear();
        if self.pods == 0 {
            return;
        }
        for &(k, v) in labels {
            out.extend(block_slots(self.keyed.get(&(namespace, k, v))).map(|&(s, _)| s));
        }
        out.extend(block_slots(&self.unkeyed).map(|&(s, _)| s));
        out.sort_unstable();
        out.dedup();
    }

    pub fn is_empty(&self) -> bool {
        self.pods == 0
    }
}

#[cfg(test)]
mod tests;
