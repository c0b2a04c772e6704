//! InterPodAffinity: required pod affinity and anti-affinity as a filter, preferred terms as a
//! score, following kube-scheduler's `interpodaffinity` plugin.
//!
//! - Filter, in kube-scheduler's order, one reason per node:
//!   1. every required affinity term's `topologyKey` must be on the node, and its domain must
//!      hold a pod matching *all* the terms, `node(s) didn't match pod affinity rules`; unless
//!      no pod on a node with one of the terms' keys matches them and the pod matches its own
//!      terms (the first pod of a group that wants to be together);
//!   2. no required anti-affinity term may have a matching pod in the node's domain,
//!      `node(s) didn't match pod anti-affinity rules`;
//!   3. no placed pod's required anti-affinity term that matches this pod may cover the node's
//!      domain (the symmetric rule), `node(s) didn't satisfy existing pods anti-affinity rules`.
//!
//!   Placed pods are every pod bound (by any scheduler) or claimed by Magma.
//! - Score (`podaffinity.weight`, 2): per topology domain, `+w` for each placed pod matching a
//!   preferred affinity term of weight `w`, `−w` for anti-affinity; and the other way round for
//!   placed pods' preferred terms matching this pod, plus 1 (kube-scheduler's
//!   `hardPodAffinityWeight`) for their required affinity terms. A node scores the sum over its
//!   domains, normalised to `100 × (s − min) / (max − min)`, `min` and `max` taken over the
//!   feasible nodes' sums (all 0 when they are equal), as kube-scheduler's `NormalizeScore`.
//!
//! The filter reads the node's whole domain for each anti-affinity term and, for the first-pod
//! exemption, every node; `binder` steps 5–7 keep those decisions exact under concurrency.
//!
//! Cost: PreFilter and PreScore read the snapshot's term aggregates (`index::terms`) where
//! they can, and look placed pods up in its other indexes (`index`) where they cannot:
//! - the pod's own required anti-affinity and preferred terms, and its required affinity term
//!   when it has one, once the cache watches them (the driver asks as it first sees the pod):
//!   the Filter tests the node's bit in each term's set of slots whose domain holds a matching
//!   pod, and the Score reads the count of matching pods in the node's domain, so the pod pays
//!   O(its terms), not O(matching pods);
//! - placed pods' terms (the symmetric rule and score): each distinct term placed pods carry is
//!   matched against the pod once, and its slots (required anti-affinity) or its weights per
//!   domain (the scoring terms) read as above: O(distinct carried terms).
//!
//! Otherwise (a term not yet watched, and every term in a snapshot without aggregates:
//! preemption's), the symmetric rule visits only the nodes holding a pod whose required
//! anti-affinity may select this pod, and the pod's own terms only the nodes holding a pod with
//! the label of one `In` requirement of the term's selector. A term with a namespace selector or
//! without an `In` requirement scans every node. Several required affinity terms (a domain
//! needs one pod matching them all, which no aggregate counts) are always found this way: a
//! scan marks the domains it has found (one bit per domain of the snapshot's
//! domain index) and looks at a domain's pods only until one matches; it stops once every
//! domain of the term's key is found (one pod, for a key all nodes share). PreScore's symmetric
//! part visits the placed pods whose terms score others (`index::ScoringPods`), matching a run of
//! pods that share their terms (one template, `model::PlainInfos`) once, and sums per domain
//! without sorting an entry per pod.

use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, Normalize, OnFailure, Range, Reads, Reason, Scorer,
    Switch, Verdict, Weight,
};
use crate::event::{self, Events};
use crate::index::terms::{HARD_POD_AFFINITY_WEIGHT, SlotBits, Sums};
use crate::model::{AffinityTerm, CompiledPod, Namespaces, NodeMeta, PodAffinity, PodInfo};
use crate::snapshot::Snapshot;

pub struct InterPodAffinity;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rules {
    /// `node(s) didn't match pod affinity rules`.
    Affinity,
    /// `node(s) didn't match pod anti-affinity rules`.
    AntiAffinity,
    /// `node(s) didn't satisfy existing pods anti-affinity rules`.
    ExistingAntiAffinity,
}

impl Reason for Rules {
    fn wake(self) -> Events {
        let always = event::NODE_ADDED | event::NODE_LABELS_CHANGED | event::NAMESPACE_CHANGED;
        match self {
            Rules::Affinity => always | event::POD_ADDED,
            Rules::AntiAffinity | Rules::ExistingAntiAffinity => always | event::POD_REMOVED,
        }
    }

    fn message(self, _: &Names<'_>) -> String {
        match self {
            Rules::Affinity => "node(s) didn't match pod affinity rules",
            Rules::AntiAffinity => "node(s) didn't match pod anti-affinity rules",
            Rules::ExistingAntiAffinity => {
                "node(s) didn't satisfy existing pods anti-affinity rules"
            }
        }
        .to_owned()
    }
}

/// Every node slot with its description and its placed pods.
fn placed(snap: &Snapshot) -> impl Iterator<Item = (&NodeMeta, &[std::sync::Arc<PodInfo>])> {
    (0..snap.arena.slots()).filter_map(move |slot| Some((&**snap.node(slot)?, snap.pods_on(slot))))
}

/// The node slots whose placed pods may match one of `terms` (every pod that matches one is
/// on them), looked up in the snapshot's label index; `None` when some term cannot be looked
/// up (`index::PodLabels::term_slots`): every slot.
fn term_slots<'t>(
    snap: &Snapshot,
    terms: impl IntoIterator<Item = &'t AffinityTerm>,
) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for t in terms {
        if !snap.index().pod_labels.term_slots(t, &mut out) {
            return None;
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// Like [`placed`], restricted to `slots` when given.
fn placed_in<'s>(
    snap: &'s Snapshot,
    slots: &'s Option<Vec<u32>>,
) -> Box<dyn Iterator<Item = (&'s NodeMeta, &'s [std::sync::Arc<PodInfo>])> + 's> {
    match slots {
        Some(slots) => Box::new(slots.iter().filter_map(move |&slot| {
            let slot = slot as usize;
            Some((&**snap.node(slot)?, snap.pods_on(slot)))
        })),
        None => Box::new(placed(snap)),
    }
}

/// Whether a placed pod's terms can score others (required affinity through
/// `hardPodAffinityWeight`, preferred affinity and anti-affinity): the snapshot lists those
/// pods in `affinity_pods`. Required anti-affinity is a filter only, looked up in
/// `anti_terms`.
pub fn scores_others(info: &PodInfo) -> bool {
    info.affinity.as_deref().is_some_and(|a| {
        !a.required.is_empty() || !a.preferred.is_empty() || !a.preferred_anti.is_empty()
    })
}

/// `(key, value)` of the domain of `node` for each term that `pred` selects.
fn push_domains<'t>(
    out: &mut Vec<(u32, u32)>,
    node: &NodeMeta,
    terms: impl IntoIterator<Item = &'t AffinityTerm>,
) {
    for t in terms {
        if let Some(l) = node.label(t.topology_key) {
            out.push((t.topology_key, l.value));
        }
    }
}

/// Domains found so far during a scan, one bit per domain of each key in the snapshot's domain
/// index (`index::Domains`): a scan of placed pods then looks at a domain's pods only until one
/// matches, and the result comes out sorted without sorting one entry per pod. `None` when a
/// key is not indexed (the caller scans as before).
struct Found<'s> {
    /// (key, its sorted values, a bit per value, how many bits are set).
    keys: Vec<(u32, &'s [u32], Vec<u64>, usize)>,
    /// Domains of nodes whose value the index does not list (it lists every live node's:
    /// kept anyway, so the result never depends on it).
    extra: Vec<(u32, u32)>,
}

/// Where a node's domain for a key is in [`Found`].
#[derive(Clone, Copy)]
enum Bit {
    At(usize, usize),
    Unlisted(u32, u32),
}

impl<'s> Found<'s> {
    fn new<'t>(
        snap: &'s Snapshot,
        terms: impl IntoIterator<Item = &'t AffinityTerm>,
    ) -> Option<Self> {
        let mut keys: Vec<(u32, &'s [u32], Vec<u64>, usize)> = Vec::new();
        for t in terms {
            let k = t.topology_key;
            if keys.iter().any(|(key, ..)| *key == k) {
                continue;
            }
            let values = snap.index().domains.values(k)?;
            keys.push((k, values, vec![0; values.len().div_ceil(64)], 0));
        }
        keys.sort_unstable_by_key(|(k, ..)| *k);
        Some(Found {
            keys,
            extra: Vec::new(),
        })
    }

    /// The bit of `node`'s domain for `key`, one of the keys given to [`Found::new`] (`None`:
    /// the node has no such label).
    fn bit(&self, node: &NodeMeta, key: u32) -> Option<Bit> {
        let value = node.label(key)?.value;
        let at = self
            .keys
            .iter()
            .position(|(k, ..)| *k == key)
            .and_then(|k| {
                let i = self.keys[k].1.binary_search(&value).ok()?;
                Some(Bit::At(k, i))
            });
        debug_assert!(
            at.is_some(),
            "the domain index lists every live node's value"
        );
        Some(at.unwrap_or(Bit::Unlisted(key, value)))
    }

    fn has(&self, bit: Bit) -> bool {
        match bit {
            Bit::At(k, i) => self.keys[k].2[i / 64] & (1 << (i % 64)) != 0,
            Bit::Unlisted(k, v) => self.extra.contains(&(k, v)),
        }
    }

    fn insert(&mut self, bit: Bit) {
        if self.has(bit) {
            return;
        }
        match bit {
            Bit::At(k, i) => {
                self.keys[k].2[i / 64] |= 1 << (i % 64);
                self.keys[k].3 += 1;
            }
            Bit::Unlisted(k, v) => self.extra.push((k, v)),
        }
    }

    /// Whether every domain of every key is found (no node can add one).
    fn complete(&self) -> bool {
        self.keys.iter().all(|(_, values, _, n)| *n == values.len())
    }

    /// Whether every domain of `key` is found.
    fn complete_key(&self, key: u32) -> bool {
        self.keys
            .iter()
            .any(|(k, values, _, n)| *k == key && *n == values.len())
    }

    /// The domains found, sorted by (key, value).
    fn into_sorted(self) -> Vec<(u32, u32)> {
        let mut out = self.extra;
        for (key, values, bits, _) in self.keys {
            for (w, &word) in bits.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let b = word.trailing_zeros() as usize;
                    out.push((key, values[w * 64 + b]));
                    word &= word - 1;
                }
            }
        }
        sorted(out)
    }
}

fn sorted(mut v: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    v.sort_unstable();
    v.dedup();
    v
}

/// `(key, value)` domains grouped by key: (key, sorted values).
fn by_key(v: Vec<(u32, u32)>) -> Vec<(u32, Box<[u32]>)> {
    let mut out: Vec<(u32, Vec<u32>)> = Vec::new();
    for (k, val) in sorted(v) {
        match out.last_mut() {
            Some((key, values)) if *key == k => values.push(val),
            _ => out.push((k, vec![val])),
        }
    }
    out.into_iter().map(|(k, v)| (k, v.into())).collect()
}

/// PreFilter state.
pub struct FilterState<'a> {
    required: &'a [AffinityTerm],
    anti: &'a [AffinityTerm],
    /// Domains holding a pod that matches every required affinity term.
    affinity: Vec<(u32, u32)>,
    /// For one required affinity term that the cache watches: the slots whose domain holds a
    /// matching pod (`affinity` then stays empty).
    affinity_slots: Option<&'a SlotBits>,
    /// Domains holding a pod matching a required anti-affinity term.
    anti_domains: Vec<(u32, u32)>,
    /// Domains a placed pod's required anti-affinity term keeps this pod out of, by key:
    /// (key, sorted values), so a node costs one label lookup per key, not one per domain.
    existing: Vec<(u32, Box<[u32]>)>,
    /// The slots the pod's own required anti-affinity terms keep it out of, one set per term,
    /// from their watched aggregates (`index::terms`) when every term is watched (`anti` is
    /// then not scanned, and `anti_domains` stays empty).
    anti_slots: Vec<&'a SlotBits>,
    /// The slots placed pods' required anti-affinity terms keep it out of, one set per
    /// carried term that matches the pod, when the snapshot's aggregates are exact (then
    /// `existing` stays empty).
    existing_slots: Vec<&'a SlotBits>,
    /// No pod anywhere matches the affinity terms, and this pod matches them itself.
    first_pod: bool,
}

/// Calls `f` with the nodes (and their placed pods) that may hold a pod matching `term`, from
/// the label index (a node may come twice), or every node when the term cannot be looked up
/// there; stops when `f` says so.
fn scan_slots(
    snap: &Snapshot,
    term: &AffinityTerm,
    mut f: impl FnMut(&NodeMeta, &[std::sync::Arc<PodInfo>]) -> bool,
) {
    match snap.index().pod_labels.term_lists(term) {
        Some(lists) => {
            for list in lists {
                for &(slot, _) in crate::index::block_slots(list) {
                    if let Some(node) = snap.node(slot as usize)
                        && f(node, snap.pods_on(slot as usize))
                    {
                        return;
                    }
                }
            }
        }
        None => {
            for (node, pods) in placed(snap) {
                if f(node, pods) {
                    return;
                }
            }
        }
    }
}

/// The required affinity terms on one node: unless every domain of the node for the terms is
/// found already, a pod there matching all the terms adds them all.
fn scan_required(
    found: &mut Found<'_>,
    node: &NodeMeta,
    pods: &[std::sync::Arc<PodInfo>],
    required: &[AffinityTerm],
    ns: &Namespaces,
) {
    if required.is_empty() {
        return;
    }
    let open = required.iter().any(|t| {
        found
            .bit(node, t.topology_key)
            .is_some_and(|bit| !found.has(bit))
    });
    if open
        && pods
            .iter()
            .any(|p| required.iter().all(|t| t.matches(p, ns)))
    {
        for t in required {
            if let Some(bit) = found.bit(node, t.topology_key) {
                found.insert(bit);
            }
        }
    }
}

impl Filter for InterPodAffinity {
    const NAME: &'static str = "InterPodAffinity";
    const RARE: bool = true;
    const SWITCH: Option<Switch> = Some(Switch {
        key: "predicate.PodAffinityEnable",
        default: true,
    });
    const ON_FAILURE: OnFailure = OnFailure::Stop;
    type Reason = Rules;
    type State<'a> = FilterState<'a>;

    fn pre_filter<'a>(cx: Cycle<'a>) -> Option<FilterState<'a>> {
        let (snap, pod) = (cx.snap, cx.pod);
        let ns = &*snap.namespaces;
        let (required, anti): (&'a [AffinityTerm], &'a [AffinityTerm]) =
            match pod.info.affinity.as_deref() {
                Some(a) => (&a.required, &a.required_anti),
                None => (&[], &[]),
            };
        let terms = &snap.index().terms;
        // The symmetric rule: the carried terms (one per distinct term of the placed pods) that
        // match this pod; or, when the snapshot's aggregates are partial, the placed pods whose
        // required anti-affinity matches it, on the nodes the anti-affinity index gives for its
        // namespace and labels.
        let mut existing = Vec::new();
        let mut existing_slots = Vec::new();
        let mut slots = Vec::new();
        match terms.carried() {
            Some(carried) => {
                for (t, c) in carried {
                    // A term whose pods are on nodes without its key keeps nothing out.
                    if c.has_anti() && !c.anti.sums.is_empty() && t.matches(&pod.info, ns) {
                        existing_slots.push(c.anti.blocked());
                    }
                }
            }
            None => {
                snap.index()
                    .anti_terms
                    .candidates(pod.info.namespace, &pod.info.labels, &mut slots)
            }
        }
        for &slot in &slots {
            let Some(node) = snap.node(slot as usize) else {
                continue;
            };
            for e in snap.pods_on(slot as usize) {
                if let Some(a) = e.affinity.as_deref() {
                    push_domains(
                        &mut existing,
                        node,
                        a.required_anti.iter().filter(|t| t.matches(&pod.info, ns)),
                    );
                }
            }
        }
        if required.is_empty()
            && anti.is_empty()
            && existing.is_empty()
            && existing_slots.is_empty()
        {
            return None;
        }
        // The pod's own anti-affinity terms, from their aggregates when every one is watched.
        let watched_anti: Option<Vec<&SlotBits>> = anti
            .iter()
            .map(|t| Some(terms.watched(t)?.matching.blocked()))
            .collect();
        let (anti_slots, scan_anti): (Vec<&SlotBits>, &[AffinityTerm]) = match watched_anti {
            Some(slots) => (slots, &[]),
            None => (Vec::new(), anti),
        };
        // One required affinity term (the common case) from its aggregate when watched; more
        // need a pod matching all of them, which no aggregate counts.
        let watched_required = match required {
            [t] => terms.watched(t),
            _ => None,
        };
        let required_to_scan: &[AffinityTerm] = if watched_required.is_some() {
            &[]
        } else {
            required
        };
        let (mut affinity, mut anti_domains) = (Vec::new(), Vec::new());
        if !required_to_scan.is_empty() || !scan_anti.is_empty() {
            debug_assert!(snap.pods_indexed, "the driver turns the pod index on first");
            // Only the nodes holding a pod that may match: a pod matching every required term
            // matches the first; one matching an anti-affinity term, that term.
            let (required, anti) = (required_to_scan, scan_anti);
            match (Found::new(snap, required), Found::new(snap, anti)) {
                (Some(mut found), Some(mut found_anti)) => {
                    // A domain already found needs no more matches: a node's pods are looked
                    // at only for the terms whose domain there is still open, and a scan
                    // stops once every domain of its keys is found.
                    if let Some(first) = required.first() {
                        scan_slots(snap, first, |node, pods| {
                            scan_required(&mut found, node, pods, required, ns);
                            found.complete()
                        });
                    }
                    for t in anti {
                        scan_slots(snap, t, |node, pods| {
                            if let Some(bit) = found_anti.bit(node, t.topology_key)
                                && !found_anti.has(bit)
                                && pods.iter().any(|p| t.matches(p, ns))
                            {
                                found_anti.insert(bit);
                            }
                            found_anti.complete_key(t.topology_key)
                        });
                    }
                    affinity = found.into_sorted();
                    anti_domains = found_anti.into_sorted();
                }
                _ => {
                    let slots = term_slots(snap, required.iter().take(1).chain(anti));
                    for (node, pods) in placed_in(snap, &slots) {
                        for p in pods {
                            if !required.is_empty() && required.iter().all(|t| t.matches(p, ns)) {
                                push_domains(&mut affinity, node, required);
                            }
                            push_domains(
                                &mut anti_domains,
                                node,
                                anti.iter().filter(|t| t.matches(p, ns)),
                            );
                        }
                    }
                    affinity = sorted(affinity);
                    anti_domains = sorted(anti_domains);
                }
            }
        }
        let none_match = match watched_required {
            Some(w) => w.matching.sums.is_empty(),
            None => affinity.is_empty(),
        };
        let first_pod =
            !required.is_empty() && none_match && required.iter().all(|t| t.matches(&pod.info, ns));
        Some(FilterState {
            required,
            anti,
            affinity,
            affinity_slots: watched_required.map(|w| w.matching.blocked()),
            anti_domains,
            existing: by_key(existing),
            anti_slots,
            existing_slots,
            first_pod,
        })
    }

    #[inline]
    fn filter<V: Verdict<Rules>>(st: &FilterState<'_>, node: Node<'_>, v: &mut V) -> bool {
        let Some(meta) = node.meta() else {
            return true;
        };
        let domain = |key: u32| meta.label(key).map(|l| (key, l.value));
        let slot = node.slot();
        if !st.required.is_empty() {
            let mut found = true;
            for t in st.required {
                match domain(t.topology_key) {
                    None => {
                        v.fail(Rules::Affinity);
                        return false;
                    }
                    Some(d) => {
                        found &= match st.affinity_slots {
                            Some(slots) => slots.contains(slot),
                            None => st.affinity.binary_search(&d).is_ok(),
                        }
                    }
                }
            }
            if !found && !st.first_pod {
                v.fail(Rules::Affinity);
                return false;
            }
        }
        if st.anti_slots.iter().any(|s| s.contains(slot))
            || !st.anti_domains.is_empty()
                && st.anti.iter().any(|t| {
                    domain(t.topology_key)
                        .is_some_and(|d| st.anti_domains.binary_search(&d).is_ok())
                })
        {
            v.fail(Rules::AntiAffinity);
            return false;
        }
        if st.existing_slots.iter().any(|s| s.contains(slot))
            || st.existing.iter().any(|(k, values)| {
                meta.label(*k)
                    .is_some_and(|l| values.binary_search(&l.value).is_ok())
            })
        {
            v.fail(Rules::ExistingAntiAffinity);
            return false;
        }
        true
    }

    /// Anti-affinity reads the node's domain for each term (and claiming there changes it for
    /// others: the epoch); the first-pod exemption reads every node.
    fn reads(st: &FilterState<'_>, reads: &mut Reads) {
        for t in st.anti {
            if !reads.domains.contains(&t.topology_key) {
                reads.domains.push(t.topology_key);
            }
            if !reads.anti.contains(&t.topology_key) {
                reads.anti.push(t.topology_key);
            }
        }
        reads.everywhere |= st.first_pod;
    }
}

/// PreScore state: the score of each topology domain, grouped by key: (key, [(value, score)]);
/// and terms read from their aggregates (`index::terms`): (key, weight, sums per domain).
pub struct ScoreState<'a> {
    domains: Vec<(u32, Vec<(u32, i64)>)>,
    terms: Vec<(u32, i64, &'a Sums)>,
}

/// The `(topology key, weight)` of each of a placed pod's terms that score `pod`: its required
/// affinity terms (`hardPodAffinityWeight`), preferred affinity (`+w`) and anti-affinity (`−w`).
fn scoring_terms(a: &PodAffinity, pod: &PodInfo, ns: &Namespaces) -> Vec<(u32, i64)> {
    let required = a
        .required
        .iter()
        .filter(|t| t.matches(pod, ns))
        .map(|t| (t.topology_key, HARD_POD_AFFINITY_WEIGHT));
    let preferred = a
        .preferred
        .iter()
        .filter(|(_, t)| t.matches(pod, ns))
        .map(|(w, t)| (t.topology_key, i64::from(*w)));
    let anti = a
        .preferred_anti
        .iter()
        .filter(|(_, t)| t.matches(pod, ns))
        .map(|(w, t)| (t.topology_key, -i64::from(*w)));
    required.chain(preferred).chain(anti).collect()
}

/// Scores summed per topology domain: for a key the snapshot's domain index lists, one sum per
/// listed value (no sort, no entry per pod); for another key, a list of `(value, weight)`
/// merged at the end.
struct DomainSums<'s> {
    snap: &'s Snapshot,
    /// (key, its sorted values, a sum per value).
    dense: Vec<(u32, &'s [u32], Vec<i64>)>,
    /// Keys the index does not list.
    unlisted: Vec<u32>,
    raw: Vec<(u32, u32, i64)>,
}

impl<'s> DomainSums<'s> {
    fn new(snap: &'s Snapshot) -> Self {
        DomainSums {
            snap,
            dense: Vec::new(),
            unlisted: Vec::new(),
            raw: Vec::new(),
        }
    }

    /// `w` for `node`'s domain of `key` (nothing when the node has no such label).
    fn add(&mut self, node: &NodeMeta, key: u32, w: i64) {
        let Some(l) = node.label(key) else { return };
        let k = match self.dense.iter().position(|(k, ..)| *k == key) {
            Some(k) => Some(k),
            None if self.unlisted.contains(&key) => None,
            None => match self.snap.index().domains.values(key) {
                Some(values) => {
                    self.dense.push((key, values, vec![0; values.len()]));
                    Some(self.dense.len() - 1)
                }
                None => {
                    self.unlisted.push(key);
                    None
                }
            },
        };
        match k.and_then(|k| Some((k, self.dense[k].1.binary_search(&l.value).ok()?))) {
            Some((k, i)) => self.dense[k].2[i] += w,
            None => self.raw.push((key, l.value, w)),
        }
    }

    /// Per key (sorted), the sorted `(value, score)` of the domains that scored, with the
    /// terms read from aggregates.
    fn into_state(self, terms: Vec<(u32, i64, &'s Sums)>) -> Option<ScoreState<'s>> {
        let mut raw = self.raw;
        raw.sort_unstable_by_key(|&(k, v, _)| (k, v));
        let mut domains: Vec<(u32, Vec<(u32, i64)>)> = Vec::new();
        for (k, v, w) in raw {
            match domains.last_mut() {
                Some((key, values)) if *key == k => match values.last_mut() {
                    Some((value, score)) if *value == v => *score += w,
                    _ => values.push((v, w)),
                },
                _ => domains.push((k, vec![(v, w)])),
            }
        }
        // The index's keys are not in `raw` (a key is listed or not for the whole snapshot),
        // and their values come out sorted.
        for (key, values, sums) in self.dense {
            let scored: Vec<(u32, i64)> = values
                .iter()
                .zip(sums)
                .filter(|&(_, s)| s != 0)
                .map(|(&v, s)| (v, s))
                .collect();
            if !scored.is_empty() {
                domains.push((key, scored));
            }
        }
        if domains.is_empty() && terms.is_empty() {
            return None;
        }
        domains.sort_unstable_by_key(|(k, _)| *k);
        Some(ScoreState { domains, terms })
    }
}

impl Scorer for InterPodAffinity {
    const NAME: &'static str = "InterPodAffinity";
    const RARE: bool = true;
    const WEIGHT: Weight = Weight {
        key: "podaffinity.weight",
        default: 2,
    };
    const NORMALIZED: bool = true;
    type State<'a> = ScoreState<'a>;

    fn pre_score<'a>(cx: Cycle<'a>) -> Option<ScoreState<'a>> {
        let (snap, pod): (&Snapshot, &CompiledPod) = (cx.snap, cx.pod);
        let ns = &*snap.namespaces;
        let own = pod
            .info
            .affinity
            .as_deref()
            .filter(|a| !a.preferred.is_empty() || !a.preferred_anti.is_empty());
        if own.is_none() && snap.affinity_pods.is_empty() {
            return None;
        }
        let mut sums = DomainSums::new(snap);
        let index = &snap.index().terms;
        // Terms read from their aggregates: (key, weight, sums per domain).
        let mut from_terms: Vec<(u32, i64, &'a Sums)> = Vec::new();
        // The pod's own terms, from their aggregates when every one is watched.
        let own = own.filter(|a| {
            let weighted = a
                .preferred
                .iter()
                .map(|(w, t)| (i64::from(*w), t))
                .chain(a.preferred_anti.iter().map(|(w, t)| (-i64::from(*w), t)));
            let start = from_terms.len();
            for (w, t) in weighted {
                match index.watched(t) {
                    // No matching pod anywhere: nothing to add (as the scan adds nothing).
                    Some(watched) if watched.matching.sums.is_empty() => {}
                    Some(watched) => from_terms.push((t.topology_key, w, &watched.matching.sums)),
                    None => {
                        from_terms.truncate(start);
                        return true;
                    }
                }
            }
            false
        });
        if let Some(a) = own {
            // Placed pods matching the pod's own terms: on the nodes the label index gives.
            let terms = a.preferred.iter().chain(&a.preferred_anti).map(|(_, t)| t);
            let slots = term_slots(snap, terms);
            for (node, pods) in placed_in(snap, &slots) {
                for e in pods {
                    for (w, t) in a.preferred.iter().filter(|(_, t)| t.matches(e, ns)) {
                        sums.add(node, t.topology_key, i64::from(*w));
                    }
                    for (w, t) in a.preferred_anti.iter().filter(|(_, t)| t.matches(e, ns)) {
                        sums.add(node, t.topology_key, -i64::from(*w));
                    }
                }
            }
        }
        // Placed pods whose own terms score this pod: the carried terms (one per distinct term)
        // that match it; or, when the snapshot's aggregates are partial, the placed pods. Pods
        // of one template share their terms (`model::PlainInfos`): a run of them is matched
        // once.
        if let Some(carried) = index.carried() {
            for (t, c) in carried {
                if c.scores() && !c.score.sums.is_empty() && t.matches(&pod.info, ns) {
                    from_terms.push((t.topology_key, 1, &c.score.sums));
                }
            }
            return sums.into_state(from_terms);
        }
        let mut last: Option<(&PodAffinity, Vec<(u32, i64)>)> = None;
        for (slot, e) in snap.affinity_pods.iter() {
            let (Some(a), Some(node)) = (e.affinity.as_deref(), snap.node(*slot as usize)) else {
                continue;
            };
            if !last.as_ref().is_some_and(|(l, _)| std::ptr::eq(*l, a)) {
                last = Some((a, scoring_terms(a, &pod.info, ns)));
            }
            if let Some((_, terms)) = &last {
                for &(key, w) in terms {
                    sums.add(node, key, w);
                }
            }
        }
        sums.into_state(from_terms)
    }

    #[inline]
    fn score(st: &ScoreState<'_>, node: Node<'_>) -> i64 {
        let Some(meta) = node.meta() else { return 0 };
        let scanned: i64 = st
            .domains
            .iter()
            .filter_map(|(k, values)| {
                let l = meta.label(*k)?;
                values
                    .binary_search_by_key(&l.value, |&(v, _)| v)
                    .ok()
                    .map(|i| values[i].1)
            })
            .sum();
        let aggregated: i64 = st
            .terms
            .iter()
            .filter_map(|&(k, w, sums)| Some(w * sums.get(meta.label(k)?.value)))
            .sum();
        scanned + aggregated
    }
}

impl Normalize for InterPodAffinity {
    const USES_MIN: bool = true;

    /// `100 × (s − min) / (max − min)` over the feasible nodes' scores (kube-scheduler starts
    /// `minCount` at `MaxInt64` and `maxCount` at `MinInt64`, so a range that excludes 0 is not
    /// widened to it); all 0 when every node scores the same.
    fn normalize(raw: i64, range: Range) -> i64 {
        let diff = range.max.saturating_sub(range.min);
        if diff <= 0 {
            return 0;
        }
        (MAX_NODE_SCORE as f64 * ((raw - range.min) as f64 / diff as f64)) as i64
    }
}
