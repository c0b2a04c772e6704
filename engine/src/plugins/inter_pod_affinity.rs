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
//! Cost: PreFilter and PreScore look placed pods up in the snapshot's indexes (`index`): the
//! symmetric rule visits only the nodes holding a pod whose required anti-affinity may select
//! this pod, and the pod's own terms only the nodes holding a pod with the label of one `In`
//! requirement of the term's selector. A term with a namespace selector or without an `In`
//! requirement scans every node.

use super::{
    Cycle, Filter, MAX_NODE_SCORE, Names, Node, Normalize, OnFailure, Range, Reads, Reason, Scorer,
    Switch, Verdict, Weight,
};
use crate::event::{self, Events};
use crate::model::{AffinityTerm, CompiledPod, NodeMeta, PodInfo};
use crate::snapshot::Snapshot;

pub struct InterPodAffinity;

/// kube-scheduler's default `hardPodAffinityWeight`: how much a placed pod's *required* affinity
/// term matching the incoming pod counts in the score.
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

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
    /// Domains holding a pod matching a required anti-affinity term.
    anti_domains: Vec<(u32, u32)>,
    /// Domains a placed pod's required anti-affinity term keeps this pod out of, by key:
    /// (key, sorted values), so a node costs one label lookup per key, not one per domain.
    existing: Vec<(u32, Box<[u32]>)>,
    /// No pod anywhere matches the affinity terms, and this pod matches them itself.
    first_pod: bool,
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
        // The symmetric rule: placed pods whose required anti-affinity matches this pod, on the
        // nodes the anti-affinity index gives for its namespace and labels.
        let mut existing = Vec::new();
        let mut slots = Vec::new();
        snap.index()
            .anti_terms
            .candidates(pod.info.namespace, &pod.info.labels, &mut slots);
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
        if required.is_empty() && anti.is_empty() && existing.is_empty() {
            return None;
        }
        let (mut affinity, mut anti_domains) = (Vec::new(), Vec::new());
        if !required.is_empty() || !anti.is_empty() {
            debug_assert!(snap.pods_indexed, "the driver turns the pod index on first");
            // Only the nodes holding a pod that may match: a pod matching every required term
            // matches the first; one matching an anti-affinity term, that term.
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
        }
        let first_pod = !required.is_empty()
            && affinity.is_empty()
            && required.iter().all(|t| t.matches(&pod.info, ns));
        Some(FilterState {
            required,
            anti,
            affinity: sorted(affinity),
            anti_domains: sorted(anti_domains),
            existing: by_key(existing),
            first_pod,
        })
    }

    #[inline]
    fn filter<V: Verdict<Rules>>(st: &FilterState<'_>, node: Node<'_>, v: &mut V) -> bool {
        let Some(meta) = node.meta() else {
            return true;
        };
        let domain = |key: u32| meta.label(key).map(|l| (key, l.value));
        if !st.required.is_empty() {
            let mut found = true;
            for t in st.required {
                match domain(t.topology_key) {
                    None => {
                        v.fail(Rules::Affinity);
                        return false;
                    }
                    Some(d) => found &= st.affinity.binary_search(&d).is_ok(),
                }
            }
            if !found && !st.first_pod {
                v.fail(Rules::Affinity);
                return false;
            }
        }
        if st.anti.iter().any(|t| {
            domain(t.topology_key).is_some_and(|d| st.anti_domains.binary_search(&d).is_ok())
        }) {
            v.fail(Rules::AntiAffinity);
            return false;
        }
        if st.existing.iter().any(|(k, values)| {
            meta.label(*k)
                .is_some_and(|l| values.binary_search(&l.value).is_ok())
        }) {
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

/// PreScore state: the score of each topology domain, grouped by key: (key, [(value, score)]).
pub struct ScoreState {
    domains: Vec<(u32, Vec<(u32, i64)>)>,
}

fn add(scores: &mut Vec<(u32, u32, i64)>, node: &NodeMeta, t: &AffinityTerm, w: i64) {
    if let Some(l) = node.label(t.topology_key) {
        scores.push((t.topology_key, l.value, w));
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
    type State<'a> = ScoreState;

    fn pre_score<'a>(cx: Cycle<'a>) -> Option<ScoreState> {
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
        let mut raw: Vec<(u32, u32, i64)> = Vec::new();
        if let Some(a) = own {
            // Placed pods matching the pod's own terms: on the nodes the label index gives.
            let terms = a.preferred.iter().chain(&a.preferred_anti).map(|(_, t)| t);
            let slots = term_slots(snap, terms);
            for (node, pods) in placed_in(snap, &slots) {
                for e in pods {
                    for (w, t) in a.preferred.iter().filter(|(_, t)| t.matches(e, ns)) {
                        add(&mut raw, node, t, i64::from(*w));
                    }
                    for (w, t) in a.preferred_anti.iter().filter(|(_, t)| t.matches(e, ns)) {
                        add(&mut raw, node, t, -i64::from(*w));
                    }
                }
            }
        }
        // Placed pods whose own terms score this pod.
        for (slot, e) in snap.affinity_pods.iter() {
            let (Some(a), Some(node)) = (e.affinity.as_deref(), snap.node(*slot as usize)) else {
                continue;
            };
            for t in a.required.iter().filter(|t| t.matches(&pod.info, ns)) {
                add(&mut raw, node, t, HARD_POD_AFFINITY_WEIGHT);
            }
            for (w, t) in a.preferred.iter().filter(|(_, t)| t.matches(&pod.info, ns)) {
                add(&mut raw, node, t, i64::from(*w));
            }
            for (w, t) in a
                .preferred_anti
                .iter()
                .filter(|(_, t)| t.matches(&pod.info, ns))
            {
                add(&mut raw, node, t, -i64::from(*w));
            }
        }
        if raw.is_empty() {
            return None;
        }
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
        Some(ScoreState { domains })
    }

    #[inline]
    fn score(st: &ScoreState, node: Node<'_>) -> i64 {
        let Some(meta) = node.meta() else { return 0 };
        st.domains
            .iter()
            .filter_map(|(k, values)| {
                let l = meta.label(*k)?;
                values
                    .binary_search_by_key(&l.value, |&(v, _)| v)
                    .ok()
                    .map(|i| values[i].1)
            })
            .sum()
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
