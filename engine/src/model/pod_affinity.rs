//! Pod labels, label selectors, inter-pod (anti-)affinity terms and topology spread constraints:
//! the inputs as the API spells them, their compiled forms, and the validated conversions.
//!
//! Semantics follow Kubernetes (`metav1.LabelSelectorAsSelector`, kube-scheduler's
//! `framework.AffinityTerm`, `podtopologyspread`): a missing label selector selects nothing and
//! an empty one everything; a term with neither `namespaces` nor `namespaceSelector` covers the
//! pod's own namespace, an empty `namespaceSelector` every namespace; `matchLabelKeys` and
//! `mismatchLabelKeys` add `key in (value)` / `key notin (value)` for the pod's own labels (as
//! the API server merges them into the selector), keys the pod lacks being ignored.
//!
//! Owns these types and conversions. Uses the model's shared parts (`model`: interner, errors)
//! and its selector requirements (`selector`), nothing else.

use super::selector::SelectorRequirementInput;
use super::{Interner, ModelError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A label selector as the API spells it (`matchLabels` and `matchExpressions`, ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelectorInput {
    pub match_labels: Vec<(String, String)>,
    /// Operators `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub match_expressions: Vec<SelectorRequirementInput>,
}

/// `v1.PodAffinityTerm`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinityTermInput {
    /// `None`: the field is absent (the term selects no pod).
    pub label_selector: Option<LabelSelectorInput>,
    pub namespaces: Vec<String>,
    pub namespace_selector: Option<LabelSelectorInput>,
    pub topology_key: String,
    pub match_label_keys: Vec<String>,
    pub mismatch_label_keys: Vec<String>,
}

/// `spec.affinity.podAffinity` and `podAntiAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinityInput {
    pub required: Vec<PodAffinityTermInput>,
    pub preferred: Vec<(i32, PodAffinityTermInput)>,
    pub required_anti: Vec<PodAffinityTermInput>,
    pub preferred_anti: Vec<(i32, PodAffinityTermInput)>,
}

impl PodAffinityInput {
    pub fn is_empty(&self) -> bool {
        self.required.is_empty()
            && self.preferred.is_empty()
            && self.required_anti.is_empty()
            && self.preferred_anti.is_empty()
    }
}

/// `v1.TopologySpreadConstraint`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologySpreadInput {
    pub max_skew: i32,
    pub topology_key: String,
    /// `DoNotSchedule` or `ScheduleAnyway`.
    pub when_unsatisfiable: String,
    pub label_selector: Option<LabelSelectorInput>,
    pub min_domains: Option<i32>,
    /// `Honor` (default) or `Ignore`.
    pub node_affinity_policy: Option<String>,
    /// `Ignore` (default) or `Honor`.
    pub node_taints_policy: Option<String>,
    pub match_label_keys: Vec<String>,
}

/// A namespace and its labels (for `namespaceSelector`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceInput {
    pub name: String,
    pub labels: Vec<(String, String)>,
}

// ---------------------------------------------------------------------------------------------
// Compiled forms
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelReq {
    pub key: u32,
    pub op: LabelOp,
    /// Sorted value ids (In/NotIn).
    pub values: Box<[u32]>,
}

/// A compiled label selector over interned labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// The selector was absent: it selects nothing.
    nothing: bool,
    reqs: Box<[LabelReq]>,
}

/// The value of `key` in labels sorted by key.
#[inline]
pub fn label_value(labels: &[(u32, u32)], key: u32) -> Option<u32> {
    labels
        .binary_search_by_key(&key, |&(k, _)| k)
        .ok()
        .map(|i| labels[i].1)
}

impl LabelSelector {
    /// Selects nothing (an absent selector).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            nothing: true,
            reqs: Box::new([]),
        }
    }

    /// Selects everything (an empty selector).
    pub fn everything() -> LabelSelector {
        LabelSelector {
            nothing: false,
            reqs: Box::new([]),
        }
    }

    pub fn selects_nothing(&self) -> bool {
        self.nothing
    }

    /// A requirement every matching label set meets by holding `key` with one of `values`
    /// (the `In` requirement with the fewest values), to look matching pods up by label
    /// (`index`); `None` when there is none to look up by. A selector that selects nothing
    /// gives no values.
    pub fn lookup(&self) -> Option<(u32, &[u32])> {
        if self.nothing {
            return Some((0, &[]));
        }
        self.reqs
            .iter()
            .filter(|r| r.op == LabelOp::In)
            .min_by_key(|r| r.values.len())
            .map(|r| (r.key, &*r.values))
    }

    /// Do labels (sorted by key) match?
    pub fn matches(&self, labels: &[(u32, u32)]) -> bool {
        if self.nothing {
            return false;
        }
        self.reqs.iter().all(|r| {
            let v = label_value(labels, r.key);
            match r.op {
                LabelOp::In => v.is_some_and(|v| r.values.binary_search(&v).is_ok()),
                LabelOp::NotIn => v.is_none_or(|v| r.values.binary_search(&v).is_err()),
                LabelOp::Exists => v.is_some(),
                LabelOp::DoesNotExist => v.is_none(),
            }
        })
    }

    /// The selector with `key op (value)` added (matchLabelKeys / mismatchLabelKeys).
    fn with(mut self, key: u32, op: LabelOp, value: u32) -> LabelSelector {
        if self.nothing {
            return self;
        }
        let mut reqs = self.reqs.into_vec();
        reqs.push(LabelReq {
            key,
            op,
            values: Box::new([value]),
        });
        self.reqs = reqs.into();
        self
    }
}

/// A compiled pod (anti-)affinity term (hashed by content: `index::terms` keeps one aggregate
/// per distinct term).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AffinityTerm {
    pub selector: LabelSelector,
    /// Namespace ids the term covers by name.
    pub namespaces: Box<[u32]>,
    /// Namespaces the term covers by label (`None`: none by label).
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: u32,
}

/// Namespace labels by namespace id, for `namespaceSelector` (the snapshot carries one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    labels: BTreeMap<u32, Box<[(u32, u32)]>>,
}

impl Namespaces {
    pub fn set(&mut self, ns: u32, labels: Box<[(u32, u32)]>) {
        self.labels.insert(ns, labels);
    }

    pub fn remove(&mut self, ns: u32) {
        self.labels.remove(&ns);
    }

    pub fn clear(&mut self) {
        self.labels.clear();
    }

    /// Labels of a namespace (none when it is not known).
    pub fn labels(&self, ns: u32) -> &[(u32, u32)] {
        self.labels.get(&ns).map_or(&[], |l| l)
    }
}

impl AffinityTerm {
    /// Kubernetes' `PodMatchesTermsNamespaceAndSelector`: the pod is in one of the term's
    /// namespaces and its labels match the selector.
    pub fn matches(&self, pod: &PodInfo, namespaces: &Namespaces) -> bool {
        let in_ns = self.namespaces.contains(&pod.namespace)
            || self
                .namespace_selector
                .as_ref()
                .is_some_and(|s| s.matches(namespaces.labels(pod.namespace)));
        in_ns && self.selector.matches(&pod.labels)
    }
}

/// A compiled `podAffinity` + `podAntiAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodAffinity {
    pub required: Box<[AffinityTerm]>,
    pub preferred: Box<[(i32, AffinityTerm)]>,
    pub required_anti: Box<[AffinityTerm]>,
    pub preferred_anti: Box<[(i32, AffinityTerm)]>,
}

/// A compiled topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: u32,
    /// `DoNotSchedule` (a filter) rather than `ScheduleAnyway` (a score).
    pub hard: bool,
    /// With `matchLabelKeys` merged in.
    pub selector: LabelSelector,
    /// 1 when unset.
    pub min_domains: i32,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node selector
    /// and required node affinity count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor`: only nodes whose taints the pod tolerates count.
    pub honor_node_taints: bool,
}

/// What the cross-node plugins need of a pod placed on a node (shared by the cache, the
/// snapshots and the compiled pod). Equal when everything but `epoch` is (the same labels split
/// at another epoch are the same pod).
#[derive(Debug, Clone, Default)]
pub struct PodInfo {
    /// Interned namespace name.
    pub namespace: u32,
    /// Its labels whose key some selector read when they were compiled (`Interner::
    /// mark_selectable`), interned, sorted by key.
    pub labels: Box<[(u32, u32)]>,
    /// Its other labels, sorted by key: no selector read their keys when they were compiled,
    /// so their values are kept as strings, not interned (`compile_pod_labels`).
    pub raw: RawLabels,
    /// The label epoch (`Interner::label_epoch`) `labels` and `raw` were split at.
    pub epoch: u32,
    pub affinity: Option<Arc<PodAffinity>>,
    /// Being deleted: not counted by topology spread (as kube-scheduler).
    pub terminating: bool,
    /// CSI volumes it has attached on its node: (driver id, volume handle), resolved when it is
    /// placed (`volumes::Storage::csi_of`; handles are not interned); empty for pods without
    /// claims.
    pub csi: Box<[(u32, Arc<str>)]>,
    /// Names of the claims it uses (ReadWriteOncePod exclusivity).
    pub claims: Box<[Arc<str>]>,
}

/// What compiled pods share (`model::compile_pod_with`):
/// - the `PodInfo` of a namespace's pods with no labels, no terms, no claims, not terminating:
///   one per namespace, shared by every such pod, so compiling one allocates none;
/// - the last compiled `PodAffinity`, reused by the next pod whose terms are equal (pods of one
///   template), so a scan over placed pods can match a run of them against another pod once
///   (`InterPodAffinity`'s PreScore, by address).
///
/// Pods sharing them are told apart by their uid, never by their address.
#[derive(Debug, Default)]
pub struct PlainInfos {
    by_namespace: crate::FastMap<u32, Arc<PodInfo>>,
    last_affinity: Option<Arc<PodAffinity>>,
}

impl PlainInfos {
    /// `a`, or the last one given if that is equal.
    pub fn share_affinity(&mut self, a: Arc<PodAffinity>) -> Arc<PodAffinity> {
        match &self.last_affinity {
            Some(last) if **last == *a => last.clone(),
            _ => {
                self.last_affinity = Some(a.clone());
                a
            }
        }
    }

    /// The shared `PodInfo` of `namespace`.
    pub fn get(&mut self, namespace: u32) -> Arc<PodInfo> {
        self.by_namespace
            .entry(namespace)
            .or_insert_with(|| {
                Arc::new(PodInfo {
                    namespace,
                    ..PodInfo::default()
                })
            })
            .clone()
    }
}

impl PartialEq for PodInfo {
    fn eq(&self, o: &Self) -> bool {
        let PodInfo {
            namespace,
            labels,
            raw,
            epoch: _,
            affinity,
            terminating,
            csi,
            claims,
        } = self;
        *namespace == o.namespace
            && *labels == o.labels
            && *raw == o.raw
            && *affinity == o.affinity
            && *terminating == o.terminating
            && *csi == o.csi
            && *claims == o.claims
    }
}

impl Eq for PodInfo {}

impl PodInfo {
    /// Some label of `raw` may have a key that became selectable since it was split (label
    /// epoch `epoch` now): a decision about the pod must wait for it to be converted
    /// ([`PodInfo::converted`]).
    #[inline]
    pub fn stale(&self, epoch: u32) -> bool {
        !self.raw.is_empty() && self.epoch != epoch
    }

    /// Whether a label of `raw` has a key selectable now.
    pub fn has_selectable_raw(&self, interner: &Interner) -> bool {
        self.raw.iter().any(|&(k, _)| interner.is_selectable(k))
    }

    /// The same pod with the labels of `raw` whose key is selectable now interned, split at the
    /// current label epoch.
    pub fn converted(&self, interner: &mut Interner) -> PodInfo {
        let mut labels = self.labels.to_vec();
        let mut raw = Vec::new();
        for (k, v) in self.raw.iter() {
            if interner.is_selectable(*k) {
                labels.push((*k, interner.intern(v)));
            } else {
                raw.push((*k, v.clone()));
            }
        }
        labels.sort_unstable();
        PodInfo {
            labels: labels.into(),
            raw: raw.into(),
            epoch: interner.label_epoch(),
            ..self.clone()
        }
    }

    /// Has required anti-affinity terms (the symmetric rule applies to others).
    pub fn has_required_anti(&self) -> bool {
        self.affinity
            .as_ref()
            .is_some_and(|a| !a.required_anti.is_empty())
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

fn label_op(op: &str) -> Result<LabelOp, ModelError> {
    Ok(match op {
        "In" => LabelOp::In,
        "NotIn" => LabelOp::NotIn,
        "Exists" => LabelOp::Exists,
        "DoesNotExist" => LabelOp::DoesNotExist,
        other => return Err(ModelError::LabelSelectorOperator(other.to_owned())),
    })
}

/// Compile a label selector over pods' labels (`None`: absent, selects nothing); its keys
/// become selectable (`Interner::mark_selectable`).
pub fn compile_selector(
    s: Option<&LabelSelectorInput>,
    interner: &mut Interner,
) -> Result<LabelSelector, ModelError> {
    compile_selector_marking(s, interner, true)
}

/// Compile a label selector over other objects' labels (a namespace's, a PersistentVolume's,
/// interned whole): it makes no pod label key selectable.
pub fn compile_other_selector(
    s: Option<&LabelSelectorInput>,
    interner: &mut Interner,
) -> Result<LabelSelector, ModelError> {
    compile_selector_marking(s, interner, false)
}

fn compile_selector_marking(
    s: Option<&LabelSelectorInput>,
    interner: &mut Interner,
    mark: bool,
) -> Result<LabelSelector, ModelError> {
    let Some(s) = s else {
        return Ok(LabelSelector::nothing());
    };
    let mut reqs = Vec::with_capacity(s.match_labels.len() + s.match_expressions.len());
    for (k, v) in &s.match_labels {
        if k.is_empty() {
            return Err(ModelError::Empty {
                what: "label selector key",
            });
        }
        let key = interner.intern(k);
        if mark {
            interner.mark_selectable(key);
        }
        reqs.push(LabelReq {
            key,
            op: LabelOp::In,
            values: Box::new([interner.intern(v)]),
        });
    }
    for e in &s.match_expressions {
        let op = label_op(&e.operator)?;
        if e.key.is_empty() {
            return Err(ModelError::Empty {
                what: "label selector key",
            });
        }
        let bad = |why: &str| ModelError::LabelSelectorValues {
            key: e.key.clone(),
            op: e.operator.clone(),
            why: why.into(),
        };
        match op {
            LabelOp::In | LabelOp::NotIn if e.values.is_empty() => {
                return Err(bad("requires at least one value"));
            }
            LabelOp::Exists | LabelOp::DoesNotExist if !e.values.is_empty() => {
                return Err(bad("must not have values"));
            }
            _ => {}
        }
        let mut values: Vec<u32> = e.values.iter().map(|v| interner.intern(v)).collect();
        values.sort_unstable();
        values.dedup();
        let key = interner.intern(&e.key);
        if mark {
            interner.mark_selectable(key);
        }
        reqs.push(LabelReq {
            key,
            op,
            values: values.into(),
        });
    }
    Ok(LabelSelector {
        nothing: false,
        reqs: reqs.into(),
    })
}

/// A pod's labels no selector read when it was compiled: (interned key, value), sorted by key.
pub type RawLabels = Box<[(u32, Arc<str>)]>;

/// Compile a pod's labels: the values of the keys some selector reads interned, sorted by key
/// (`PodInfo::labels`), the others kept as strings, sorted by key (`PodInfo::raw`). A selector
/// compiled later makes its keys selectable; `Cache::sync_labels` then converts the pods
/// compiled before (`PodInfo::converted`).
pub fn compile_pod_labels(
    labels: &[(String, String)],
    interner: &mut Interner,
) -> (Box<[(u32, u32)]>, RawLabels) {
    let mut interned: Vec<(u32, u32)> = Vec::new();
    let mut raw: Vec<(u32, Arc<str>)> = Vec::new();
    for (k, v) in labels {
        // Keys are interned (a workload's label keys are few); values only for selectable keys.
        let key = interner.intern(k);
        if interner.is_selectable(key) {
            interned.push((key, interner.intern(v)));
        } else {
            raw.push((key, Arc::from(v.as_str())));
        }
    }
    interned.sort_unstable();
    interned.dedup_by_key(|l| l.0);
    raw.sort_unstable_by_key(|l| l.0);
    raw.dedup_by_key(|l| l.0);
    (interned.into(), raw.into())
}

/// Mark the label keys `input`'s own selectors read (its pod affinity terms and spread
/// constraints), before its labels are compiled: a pod whose selector reads its own labels
/// (`matchLabelKeys`, a spread counting its own kind) finds them interned.
pub fn mark_own_selector_keys(
    affinity: Option<&PodAffinityInput>,
    spread: &[TopologySpreadInput],
    interner: &mut Interner,
) {
    let mut mark = |k: &str| {
        let key = interner.intern(k);
        interner.mark_selectable(key);
    };
    fn selector(s: Option<&LabelSelectorInput>, mark: &mut impl FnMut(&str)) {
        for (k, _) in s.map_or(&[][..], |s| &s.match_labels) {
            mark(k);
        }
        for e in s.map_or(&[][..], |s| &s.match_expressions) {
            mark(&e.key);
        }
    }
    if let Some(a) = affinity {
        let terms = a
            .required
            .iter()
            .chain(&a.required_anti)
            .chain(a.preferred.iter().map(|(_, t)| t))
            .chain(a.preferred_anti.iter().map(|(_, t)| t));
        for t in terms {
            selector(t.label_selector.as_ref(), &mut mark);
            for k in t.match_label_keys.iter().chain(&t.mismatch_label_keys) {
                mark(k);
            }
        }
    }
    for c in spread {
        selector(c.label_selector.as_ref(), &mut mark);
        for k in &c.match_label_keys {
            mark(k);
        }
    }
}

/// Compile labels into sorted (key, value) ids.
pub fn compile_labels(labels: &[(String, String)], interner: &mut Interner) -> Box<[(u32, u32)]> {
    let mut out: Vec<(u32, u32)> = labels
        .iter()
        .map(|(k, v)| (interner.intern(k), interner.intern(v)))
        .collect();
    out.sort_unstable();
    out.dedup_by_key(|l| l.0);
    out.into()
}

/// Add `key in/notin (the pod's value)` for each key the pod has.
fn merge_label_keys(
    mut selector: LabelSelector,
    keys: &[String],
    op: LabelOp,
    own: &[(u32, u32)],
    interner: &mut Interner,
) -> LabelSelector {
    for k in keys {
        let key = interner.intern(k);
        interner.mark_selectable(key);
        if let Some(v) = label_value(own, key) {
            selector = selector.with(key, op, v);
        }
    }
    selector
}

fn compile_term(
    t: &PodAffinityTermInput,
    own_namespace: u32,
    own_labels: &[(u32, u32)],
    interner: &mut Interner,
) -> Result<AffinityTerm, ModelError> {
    if t.topology_key.is_empty() {
        return Err(ModelError::Empty {
            what: "pod affinity term topologyKey",
        });
    }
    if let Some(k) = t
        .match_label_keys
        .iter()
        .find(|k| t.mismatch_label_keys.contains(k))
    {
        return Err(ModelError::LabelKeysConflict(k.clone()));
    }
    let selector = compile_selector(t.label_selector.as_ref(), interner)?;
    let selector = merge_label_keys(
        selector,
        &t.match_label_keys,
        LabelOp::In,
        own_labels,
        interner,
    );
    let selector = merge_label_keys(
        selector,
        &t.mismatch_label_keys,
        LabelOp::NotIn,
        own_labels,
        interner,
    );
    let namespace_selector = t
        .namespace_selector
        .as_ref()
        .map(|s| compile_other_selector(Some(s), interner))
        .transpose()?;
    let mut namespaces: Vec<u32> = t.namespaces.iter().map(|n| interner.intern(n)).collect();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(own_namespace);
    }
    namespaces.sort_unstable();
    namespaces.dedup();
    Ok(AffinityTerm {
        selector,
        namespaces: namespaces.into(),
        namespace_selector,
        topology_key: interner.intern(&t.topology_key),
    })
}

fn weighted(
    terms: &[(i32, PodAffinityTermInput)],
    ns: u32,
    own: &[(u32, u32)],
    interner: &mut Interner,
) -> Result<Box<[(i32, AffinityTerm)]>, ModelError> {
    terms
        .iter()
        .map(|(w, t)| {
            if !(1..=100).contains(w) {
                return Err(ModelError::PreferredWeight(*w));
            }
            Ok((*w, compile_term(t, ns, own, interner)?))
        })
        .collect()
}

/// Compile a pod's `podAffinity`/`podAntiAffinity` (`None` when it has no term).
pub fn compile_pod_affinity(
    a: &PodAffinityInput,
    own_namespace: u32,
    own_labels: &[(u32, u32)],
    interner: &mut Interner,
) -> Result<Option<Arc<PodAffinity>>, ModelError> {
    if a.is_empty() {
        return Ok(None);
    }
    let plain = |terms: &[PodAffinityTermInput], interner: &mut Interner| {
        terms
            .iter()
            .map(|t| compile_term(t, own_namespace, own_labels, interner))
            .collect::<Result<Box<[_]>, _>>()
    };
    Ok(Some(Arc::new(PodAffinity {
        required: plain(&a.required, interner)?,
        required_anti: plain(&a.required_anti, interner)?,
        preferred: weighted(&a.preferred, own_namespace, own_labels, interner)?,
        preferred_anti: weighted(&a.preferred_anti, own_namespace, own_labels, interner)?,
    })))
}

/// Compile a pod's topology spread constraints.
pub fn compile_spread(
    constraints: &[TopologySpreadInput],
    own_labels: &[(u32, u32)],
    interner: &mut Interner,
) -> Result<Box<[SpreadConstraint]>, ModelError> {
    constraints
        .iter()
        .map(|c| {
            let bad = |why: String| ModelError::SpreadConstraint {
                key: c.topology_key.clone(),
                why,
            };
            if c.topology_key.is_empty() {
                return Err(ModelError::Empty {
                    what: "topology spread constraint topologyKey",
                });
            }
            if c.max_skew <= 0 {
                return Err(bad(format!(
                    "maxSkew {} must be greater than 0",
                    c.max_skew
                )));
            }
            let hard = match c.when_unsatisfiable.as_str() {
                "DoNotSchedule" => true,
                "ScheduleAnyway" => false,
                other => {
                    return Err(bad(format!(
                        "whenUnsatisfiable {other:?} must be DoNotSchedule or ScheduleAnyway"
                    )));
                }
            };
            let min_domains = match c.min_domains {
                None => 1,
                Some(m) if m <= 0 => {
                    return Err(bad(format!("minDomains {m} must be greater than 0")));
                }
                Some(_) if !hard => {
                    return Err(bad(
                        "minDomains may only be set with whenUnsatisfiable DoNotSchedule".into(),
                    ));
                }
                Some(m) => m,
            };
            let policy = |p: &Option<String>, default: bool, what: &str| match p.as_deref() {
                None => Ok(default),
                Some("Honor") => Ok(true),
                Some("Ignore") => Ok(false),
                Some(other) => Err(bad(format!("{what} {other:?} must be Honor or Ignore"))),
            };
            let honor_node_affinity = policy(&c.node_affinity_policy, true, "nodeAffinityPolicy")?;
            let honor_node_taints = policy(&c.node_taints_policy, false, "nodeTaintsPolicy")?;
            if let Some(sel) = &c.label_selector
                && let Some(k) = c.match_label_keys.iter().find(|k| {
                    sel.match_labels.iter().any(|(l, _)| l == *k)
                        || sel.match_expressions.iter().any(|e| &e.key == *k)
                })
            {
                return Err(bad(format!(
                    "matchLabelKeys key {k:?} is also in the labelSelector"
                )));
            }
            let selector = compile_selector(c.label_selector.as_ref(), interner)?;
            let selector = merge_label_keys(
                selector,
                &c.match_label_keys,
                LabelOp::In,
                own_labels,
                interner,
            );
            Ok(SpreadConstraint {
                max_skew: c.max_skew,
                topology_key: interner.intern(&c.topology_key),
                hard,
                selector,
                min_domains,
                honor_node_affinity,
                honor_node_taints,
            })
        })
        .collect()
}
