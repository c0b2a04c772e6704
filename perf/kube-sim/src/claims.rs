//! The resource claim controller of kube-controller-manager (`pkg/controller/resourceclaim`),
//! on by default as there ([`SimConfig::resource_claim_controller`](crate::SimConfig)). It
//! follows the store's commits of pods that have `spec.resourceClaims`, of ResourceClaims and of
//! ResourceClaimTemplates (the store hands it only those, so pods without claims cost nothing)
//! and writes through the store like API calls, each change its own `resourceVersion` and watch
//! event:
//!
//! - A pod claim naming a `resourceClaimTemplateName` gets a ResourceClaim made from the
//!   template (its `spec`, labels and annotations) with `generateName` `<pod>-<claim>-`
//!   (both parts shortened proportionally past 57 characters), an owner reference to the pod
//!   (`controller` and `blockOwnerDeletion` true) and the annotation
//!   [`POD_CLAIM_NAME_ANNOTATION`] naming the pod claim, created by `kube-controller-manager`;
//!   then the pod's `status.resourceClaimStatuses` gets `{name, resourceClaimName}` through a
//!   server-side apply of `ResourceClaimController` (one write for all new entries). A claim
//!   the controller made earlier (owned by the pod, with the annotation) is reused. While the
//!   template does not exist nothing happens; its creation makes the claims of the pods
//!   waiting for it. Pods that are done (Succeeded or Failed) get no new claims.
//! - A scheduled pod (`spec.nodeName`) whose claim is allocated but not reserved for it is
//!   added to the claim's `status.reservedFor` (`{resource: pods, name, uid}`), while fewer
//!   than 256 consumers are.
//! - A claim's `reservedFor` entries for pods that are gone, replaced (another UID) or done are
//!   removed; when that empties the list and the claim carries the scheduler's
//!   [`DELETE_PROTECTION_FINALIZER`](crate::DELETE_PROTECTION_FINALIZER) (it allocated the
//!   claim), the same status write clears `status.allocation` (deallocation), and a second
//!   write removes the finalizer. An unreserved claim made for a pod that is done or replaced
//!   is deleted.
//! - A claim being deleted (a `deletionTimestamp`, held by the scheduler's finalizer) that
//!   nobody reserves is deallocated and loses the finalizer, which completes its deletion.
//! - A pod with a claim made for its extended resources (`status.extendedResourceClaimStatus`,
//!   DRA extended resources) is followed too: that claim's reservation is released when the
//!   pod is done or gone, like any claim's.
//! - Garbage collection: a ResourceClaim all of whose owners are pods that no longer exist is
//!   deleted (as kube-controller-manager's garbage collector does for any dependent: a plain
//!   DELETE, which a finalizer holds).
//!
//! No event scans a namespace: the controller keeps, from the events it follows, which pods
//! name each claim and template and which claims name each pod UID (`Index`), as
//! kube-controller-manager's informer indexes do; each sync then reads those objects afresh.
//!
//! Like kube-controller-manager's work queue, the controller syncs each object once for all the
//! events about it that are waiting: it takes the events queued (up to [`BATCH`]), updates the
//! index from each in order, then runs each distinct sync they call for once, in the order first
//! asked (`Work`). Every sync reads the current objects, so one sync does what several would;
//! when the controller falls behind a burst, it catches up instead of syncing each pod once per
//! write it has seen.
//!
//! It uses the shared state (`inner`), the store (whose commits it follows through
//! `State::follow`) and the DRA object rules (`dra`); `sim` starts it.

use crate::deletion::DeleteOptions;
use crate::dra;
use crate::inner::Inner;
use crate::managed::{Manager, Operation};
use crate::meta;
use crate::meta::Pointer;
use crate::resources::ResourceDef;
use crate::store::{Event, EventType, Part, State, Stored};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, MutexGuard};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The annotation of a claim made from a template: the pod claim (`spec.resourceClaims[].name`)
/// it was made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The field manager of the controller's pod status applies.
const FIELD_MANAGER: &str = "ResourceClaimController";

/// The field manager of kube-controller-manager's other writes (its User-Agent).
const KCM: &str = "kube-controller-manager";

/// At most this many consumers may reserve a claim.
const RESERVED_FOR_MAX: usize = 256;

fn has_claims(pod: &Value) -> bool {
    pod.at("/spec/resourceClaims")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
        || !extended_claim(pod).is_empty()
}

/// The claim a scheduler made for the pod's extended resources
/// (`status.extendedResourceClaimStatus.resourceClaimName`; empty without one).
fn extended_claim(pod: &Value) -> &str {
    s(pod, "/status/extendedResourceClaimStatus/resourceClaimName")
}

/// Whether a commit may concern the controller (decided under the store lock: cheap, nothing
/// parsed). A pod is handed over when its encoding has a non-empty `resourceClaims` list (the
/// encoding is compact, and only `spec.resourceClaims` is a list of objects by that name); the
/// controller checks the parsed pod again ([`has_claims`]) and ignores any other.
fn relevant(ev: &Event) -> bool {
    match ev.key.as_ref() {
        "/pods" => {
            ev.obj.mentions("\"resourceClaims\":[{")
                || ev.obj.mentions("\"extendedResourceClaimStatus\":{")
        }
        dra::CLAIM_KEY | dra::TEMPLATE_KEY => true,
        _ => false,
    }
}

/// How many parsed versions [`Parsed`] keeps: a batch's events and the versions its syncs read.
const PARSED_MAX: usize = 256;

/// The most events taken at once (module doc).
const BATCH: usize = 128;

/// A sync an event calls for; equal ones in a batch run once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Work {
    /// A pod deleted: the claims it reserved or owned (by its UID).
    PodGone {
        ns: String,
        uid: String,
    },
    Pod {
        ns: String,
        name: String,
    },
    Claim {
        ns: String,
        name: String,
    },
}

/// The objects the controller parsed lately, by version: a stored version never changes, so
/// its parse holds for as long as the version lives. Each event's object is parsed once (its
/// index update and its syncs share it), and a sync that reads a version an earlier event or
/// sync parsed (the pod an event named, the claim just written, a template) does not parse it
/// again. Bounded (the last [`PARSED_MAX`] versions), so it keeps no more than a few objects
/// alive whatever the number of pods. Parsed without `managedFields`, which the controller
/// never reads ([`Stored::value_without_managed_fields`]).
#[derive(Default)]
struct Parsed {
    recent: VecDeque<(Arc<Stored>, Arc<Value>)>,
}

impl Parsed {
    /// The parse of `s`, if kept.
    fn cached(&self, s: &Arc<Stored>) -> Option<Arc<Value>> {
        self.recent
            .iter()
            .find(|(k, _)| Arc::ptr_eq(k, s))
            .map(|(_, v)| v.clone())
    }

    /// The parse of `s` (parsed now unless kept).
    fn get(&mut self, s: &Arc<Stored>) -> Arc<Value> {
        if let Some(v) = self.cached(s) {
            return v;
        }
        let v = Arc::new(s.value_without_managed_fields());
        if self.recent.len() >= PARSED_MAX {
            self.recent.pop_back();
        }
        self.recent.push_front((s.clone(), v.clone()));
        v
    }
}

/// The state lock, the definitions, and an object's current version with its parse.
type Current<'a> = (MutexGuard<'a, State>, Defs, Arc<Stored>, Arc<Value>);

/// The state lock with the current version of an object and its parse, parsed without the lock
/// held: the version is read under the lock, parsed after releasing it, and read again (a
/// write in between means another try; after a few, it is parsed under the lock).
fn read_current<'a>(
    inner: &'a Inner,
    parsed: &mut Parsed,
    def: impl Fn(&Defs) -> &Arc<ResourceDef>,
    ns: &str,
    name: &str,
) -> Option<Current<'a>> {
    for attempt in 0..3 {
        let st = inner.state();
        let d = defs(&st);
        let cur = st.get(def(&d), ns, name).ok()?;
        if let Some(v) = parsed.cached(&cur) {
            return Some((st, d, cur, v));
        }
        if attempt == 2 {
            let v = parsed.get(&cur);
            return Some((st, d, cur, v));
        }
        drop(st);
        parsed.get(&cur);
    }
    unreachable!("the last attempt returns")
}

/// Starts the controller when the configuration asks for it.
pub(crate) fn spawn(inner: &Arc<Inner>) -> Option<JoinHandle<()>> {
    if !inner.cfg.resource_claim_controller {
        return None;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    inner.state().follow(
        |ev, _| relevant(ev),
        move |ev| {
            let _ = tx.send(ev);
        },
    );
    let inner = inner.clone();
    let rt = inner.rt.clone();
    Some(rt.spawn(async move {
        let mut index = Index::default();
        let mut parsed = Parsed::default();
        let mut batch = Vec::with_capacity(BATCH);
        let mut work: Vec<Work> = Vec::new();
        let mut asked: HashSet<Work> = HashSet::new();
        while rx.recv_many(&mut batch, BATCH).await > 0 {
            for ev in batch.drain(..) {
                // Parsed once, outside the state lock, for the index and the work it asks.
                let obj = parsed.get(&ev.obj);
                if ev.key.as_ref() == "/pods" && !has_claims(&obj) {
                    continue; // `relevant` lets through pods that may have claims
                }
                index.observe(&ev, &obj);
                for w in on_event(&index, &ev, &obj) {
                    if asked.insert(w.clone()) {
                        work.push(w);
                    }
                }
            }
            for w in work.drain(..) {
                match &w {
                    Work::PodGone { ns, uid } => pod_gone(&inner, &index, &mut parsed, ns, uid),
                    Work::Pod { ns, name } => sync_pod(&inner, &mut index, &mut parsed, ns, name),
                    Work::Claim { ns, name } => sync_claim(&inner, &mut parsed, ns, name),
                }
            }
            asked.clear();
        }
    }))
}

/// (namespace, name).
type Key = (String, String);

/// Which objects an event concerns, kept from the events the controller follows, so that no
/// event scans a namespace (as kube-controller-manager's informer indexes do). Candidates only:
/// every sync reads the objects again from the store under its lock, so an entry that is stale
/// costs a lookup, never a wrong write.
#[derive(Default)]
struct Index {
    /// Pods by a claim they name (`resourceClaimName`, or a template's claim from
    /// `status.resourceClaimStatuses`).
    pods_by_claim: HashMap<Key, HashSet<String>>,
    /// Pods by a template they name.
    pods_by_template: HashMap<Key, HashSet<String>>,
    /// What each pod is indexed under: (claims, templates).
    pod_keys: HashMap<Key, (Vec<String>, Vec<String>)>,
    /// Claims by a pod UID in their owner references or `status.reservedFor`.
    claims_by_uid: HashMap<Key, HashSet<String>>,
    /// The UIDs each claim is indexed under.
    claim_uids: HashMap<Key, Vec<String>>,
}

impl Index {
    fn observe(&mut self, ev: &Event, obj: &Value) {
        let ns = meta::meta_str(obj, "namespace");
        let name = meta::meta_str(obj, "name");
        let gone = ev.etype == EventType::Deleted;
        match ev.key.as_ref() {
            "/pods" => {
                let keys = if gone {
                    (Vec::new(), Vec::new())
                } else {
                    let templates = arr(obj, "/spec/resourceClaims")
                        .iter()
                        .map(|c| s(c, "/resourceClaimTemplateName"))
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect();
                    (claim_names(obj), templates)
                };
                let pod = (ns.to_string(), name.to_string());
                let (old_claims, old_templates) = self.pod_keys.remove(&pod).unwrap_or_default();
                unlink(&mut self.pods_by_claim, ns, &old_claims, name);
                unlink(&mut self.pods_by_template, ns, &old_templates, name);
                link(&mut self.pods_by_claim, ns, &keys.0, name);
                link(&mut self.pods_by_template, ns, &keys.1, name);
                if !gone {
                    self.pod_keys.insert(pod, keys);
                }
            }
            dra::CLAIM_KEY => {
                let uids: Vec<String> = if gone {
                    Vec::new()
                } else {
                    arr(obj, "/metadata/ownerReferences")
                        .iter()
                        .chain(arr(obj, "/status/reservedFor"))
                        .map(|r| s(r, "/uid").to_string())
                        .filter(|u| !u.is_empty())
                        .collect()
                };
                let claim = (ns.to_string(), name.to_string());
                let old = self.claim_uids.remove(&claim).unwrap_or_default();
                unlink(&mut self.claims_by_uid, ns, &old, name);
                link(&mut self.claims_by_uid, ns, &uids, name);
                if !gone {
                    self.claim_uids.insert(claim, uids);
                }
            }
            _ => {}
        }
    }

    /// A claim the controller just made for the pod with `uid` (its event comes later).
    fn made(&mut self, ns: &str, uid: &str, claim: &str) {
        let uids = self
            .claim_uids
            .entry((ns.to_string(), claim.to_string()))
            .or_default();
        if !uids.iter().any(|u| u == uid) {
            uids.push(uid.to_string());
        }
        link(&mut self.claims_by_uid, ns, &[uid.to_string()], claim);
    }

    fn get(map: &HashMap<Key, HashSet<String>>, ns: &str, k: &str) -> Vec<String> {
        map.get(&(ns.to_string(), k.to_string()))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

fn link(map: &mut HashMap<Key, HashSet<String>>, ns: &str, keys: &[String], v: &str) {
    for k in keys {
        map.entry((ns.to_string(), k.clone()))
            .or_default()
            .insert(v.to_string());
    }
}

fn unlink(map: &mut HashMap<Key, HashSet<String>>, ns: &str, keys: &[String], v: &str) {
    for k in keys {
        let key = (ns.to_string(), k.clone());
        if let Some(set) = map.get_mut(&key) {
            set.remove(v);
            if set.is_empty() {
                map.remove(&key);
            }
        }
    }
}

struct Defs {
    pods: Arc<ResourceDef>,
    claims: Arc<ResourceDef>,
    templates: Arc<ResourceDef>,
}

fn defs(st: &State) -> Defs {
    Defs {
        pods: st.registry.get("", "v1", "pods").expect("built in"),
        claims: st
            .registry
            .get(dra::GROUP, "v1", "resourceclaims")
            .expect("built in"),
        templates: st
            .registry
            .get(dra::GROUP, "v1", "resourceclaimtemplates")
            .expect("built in"),
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.at(ptr).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, ptr: &str) -> &'a [Value] {
    v.at(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `isPodDone`: a terminal phase, or deleted and not scheduled (such a pod only lingers while
/// finalizers hold it).
fn pod_done(pod: &Value) -> bool {
    matches!(s(pod, "/status/phase"), "Succeeded" | "Failed")
        || (crate::deletion::terminating(pod) && s(pod, "/spec/nodeName").is_empty())
}

/// The pod controlling a claim (`owningPod`): name and UID.
fn owning_pod(claim: &Value) -> Option<(&str, &str)> {
    arr(claim, "/metadata/ownerReferences")
        .iter()
        .find_map(|o| {
            (o.get("controller").and_then(Value::as_bool) == Some(true)
                && s(o, "/apiVersion") == "v1"
                && s(o, "/kind") == "Pod")
                .then(|| (s(o, "/name"), s(o, "/uid")))
        })
}

/// The syncs an event calls for, in the order they run (`obj`: the event's object, parsed;
/// `index` already holds what the event says).
fn on_event(index: &Index, ev: &Event, obj: &Value) -> Vec<Work> {
    let ns = meta::meta_str(obj, "namespace");
    let pod = |name: &str| Work::Pod {
        ns: ns.to_string(),
        name: name.to_string(),
    };
    let claim = |name: &str| Work::Claim {
        ns: ns.to_string(),
        name: name.to_string(),
    };
    match (ev.key.as_ref(), ev.etype) {
        ("/pods", EventType::Deleted) => vec![Work::PodGone {
            ns: ns.to_string(),
            uid: meta::meta_str(obj, "uid").to_string(),
        }],
        ("/pods", _) => {
            let mut w = vec![pod(meta::meta_str(obj, "name"))];
            if pod_done(obj) {
                w.extend(claim_names(obj).iter().map(|c| claim(c)));
            }
            w
        }
        (dra::TEMPLATE_KEY, EventType::Added | EventType::Modified) => {
            let template = meta::meta_str(obj, "name");
            Index::get(&index.pods_by_template, ns, template)
                .iter()
                .map(|p| pod(p))
                .collect()
        }
        (dra::CLAIM_KEY, EventType::Added | EventType::Modified) => {
            let name = meta::meta_str(obj, "name");
            // Scheduled pods using it may need a reservation.
            std::iter::once(claim(name))
                .chain(
                    Index::get(&index.pods_by_claim, ns, name)
                        .iter()
                        .map(|p| pod(p)),
                )
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The claim names a pod uses (`resourceclaim.Name` for each pod claim that has one, and the
/// claim made for its extended resources).
fn claim_names(pod: &Value) -> Vec<String> {
    let mut names: Vec<String> = arr(pod, "/spec/resourceClaims")
        .iter()
        .filter_map(|c| claim_name(pod, c).map(|(n, _)| n))
        .collect();
    let extended = extended_claim(pod);
    if !extended.is_empty() {
        names.push(extended.to_string());
    }
    names
}

/// `resourceclaim.Name`: the claim a pod claim refers to and whether the claim must be owned by
/// the pod (None: not known yet, or not needed).
fn claim_name(pod: &Value, pod_claim: &Value) -> Option<(String, bool)> {
    let direct = s(pod_claim, "/resourceClaimName");
    if !direct.is_empty() {
        return Some((direct.to_string(), false));
    }
    if s(pod_claim, "/resourceClaimTemplateName").is_empty() {
        return None;
    }
    let name = s(pod_claim, "/name");
    arr(pod, "/status/resourceClaimStatuses")
        .iter()
        .find(|st| s(st, "/name") == name)
        .and_then(|st| st.get("resourceClaimName").and_then(Value::as_str))
        .map(|n| (n.to_string(), true))
}

fn owned_by(claim: &Value, pod: &Value) -> bool {
    owning_pod(claim).is_some_and(|(_, uid)| uid == meta::meta_str(pod, "uid"))
}

/// [`owned_by`] for a stored claim, parsed (through `parsed`) only when its encoding names the
/// pod's UID.
fn stored_owned_by(parsed: &mut Parsed, claim: &Arc<Stored>, pod: &Value) -> bool {
    let uid = meta::meta_str(pod, "uid");
    !uid.is_empty() && claim.mentions(uid) && owned_by(&parsed.get(claim), pod)
}

/// [`pod_done`] for a stored pod, read from its index (`status.phase`, `spec.nodeName`) and
/// parsed only when its encoding names a `deletionTimestamp`.
fn stored_pod_done(pod: &Stored) -> bool {
    let index = pod.index();
    matches!(index.field("status.phase"), Some("Succeeded" | "Failed"))
        || (index.field("spec.nodeName").unwrap_or("").is_empty()
            && pod.mentions("\"deletionTimestamp\"")
            && crate::deletion::terminating(&pod.value_without_managed_fields()))
}

/// The `generateName` of a claim made for a pod claim (`<pod>-<claim>-`, shortened past 57).
fn generate_name(pod: &str, claim: &str) -> String {
    let name = format!("{pod}-{claim}-");
    const MAX: usize = 57;
    if name.len() <= MAX {
        return name;
    }
    let (p, c) = (pod.len() * MAX / name.len(), claim.len() * MAX / name.len());
    format!("{}-{}", &pod[..p], &claim[..c])
}

fn sync_pod(inner: &Inner, index: &mut Index, parsed: &mut Parsed, ns: &str, name: &str) {
    let Some((mut st, d, mut stored, pod)) = read_current(inner, parsed, |d| &d.pods, ns, name)
    else {
        return;
    };
    let pod = &*pod;
    let mut statuses: Vec<Value> = Vec::new();
    if !pod_done(pod) {
        for pc in arr(pod, "/spec/resourceClaims") {
            let Some(template) = pc
                .get("resourceClaimTemplateName")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            else {
                continue;
            };
            if let Some((existing, _)) = claim_name(pod, pc)
                && st
                    .get(&d.claims, ns, &existing)
                    .is_ok_and(|c| stored_owned_by(parsed, &c, pod))
            {
                continue;
            }
            let pc_name = s(pc, "/name");
            // A claim made earlier for this pod claim, should the pod's status not name it.
            let annotation = format!(
                "/metadata/annotations/{}",
                POD_CLAIM_NAME_ANNOTATION.replace('/', "~1")
            );
            let found = Index::get(&index.claims_by_uid, ns, meta::meta_str(pod, "uid"))
                .into_iter()
                .find(|c| {
                    st.get(&d.claims, ns, c).is_ok_and(|c| {
                        stored_owned_by(parsed, &c, pod)
                            && s(&parsed.get(&c), &annotation) == pc_name
                    })
                });
            let claim_name = match found {
                Some(n) => n,
                None => {
                    let Ok(t) = st.get(&d.templates, ns, template) else {
                        continue; // until the template exists
                    };
                    // One parse per template version, kept across pods.
                    let t = parsed.get(&t);
                    let mut annotations = t
                        .at("/spec/metadata/annotations")
                        .cloned()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    annotations[POD_CLAIM_NAME_ANNOTATION] = json!(pc_name);
                    let mut metadata = json!({
                        "generateName": generate_name(name, pc_name),
                        "namespace": ns,
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                            "uid": meta::meta_str(pod, "uid"), "controller": true,
                            "blockOwnerDeletion": true}],
                        "annotations": annotations,
                    });
                    if let Some(l) = t.at("/spec/metadata/labels").filter(|l| l.is_object()) {
                        metadata["labels"] = l.clone();
                    }
                    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": metadata,
                        "spec": t.at("/spec/spec").cloned().unwrap_or_else(|| json!({}))});
                    match st.create_by(
                        &d.claims,
                        Some(ns),
                        claim,
                        Some(&Manager::update(KCM)),
                        None,
                    ) {
                        Ok(c) => {
                            let claim = c.name().to_string();
                            index.made(ns, meta::meta_str(pod, "uid"), &claim);
                            claim
                        }
                        Err(e) => {
                            tracing::warn!(pod = %format!("{ns}/{name}"), "creating the claim failed: {e}");
                            continue;
                        }
                    }
                }
            };
            statuses.push(json!({"name": pc_name, "resourceClaimName": claim_name}));
        }
    }
    if !statuses.is_empty() {
        let applied = json!({"status": {"resourceClaimStatuses": statuses}});
        let mgr = Manager {
            name: FIELD_MANAGER.into(),
            operation: Operation::Apply,
        };
        let written = st.apply_status(&d.pods, ns, name, &mgr, &applied, |p| {
            let list = p["status"]
                .as_object_mut()
                .expect("pod status")
                .entry("resourceClaimStatuses")
                .or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            let list = list.as_array_mut().expect("array");
            for st in &statuses {
                match list.iter_mut().find(|x| x["name"] == st["name"]) {
                    Some(x) => *x = st.clone(),
                    None => list.push(st.clone()),
                }
            }
            true
        });
        if let Some(w) = written {
            stored = w;
        }
    }
    if stored
        .index()
        .field("spec.nodeName")
        .unwrap_or("")
        .is_empty()
    {
        return; // the scheduler reserves
    }
    let pod = &*parsed.get(&stored);
    for pc in arr(pod, "/spec/resourceClaims") {
        let Some((claim_name, check_owner)) = claim_name(pod, pc) else {
            continue;
        };
        let Ok(claim) = st.get(&d.claims, ns, &claim_name) else {
            continue;
        };
        if !claim.mentions("\"allocation\"") {
            continue; // not allocated: nothing to reserve
        }
        let claim = parsed.get(&claim);
        if check_owner && !owned_by(&claim, pod) {
            continue;
        }
        let reserved = arr(&claim, "/status/reservedFor");
        let uid = meta::meta_str(pod, "uid");
        if claim.at("/status/allocation").is_some_and(|a| !a.is_null())
            && !reserved.iter().any(|r| s(r, "/uid") == uid)
            && reserved.len() < RESERVED_FOR_MAX
        {
            let mut c = (*claim).clone();
            let mut list = reserved.to_vec();
            list.push(json!({"resource": "pods", "name": name, "uid": uid}));
            c["status"]["reservedFor"] = Value::Array(list);
            if let Err(e) = st.update_by(
                &d.claims,
                ns,
                &claim_name,
                c,
                Part::Status,
                Some(&Manager::update(KCM)),
                None,
            ) {
                tracing::warn!(claim = %format!("{ns}/{claim_name}"), "reserving failed: {e}");
            }
        }
    }
}

fn sync_claim(inner: &Inner, parsed: &mut Parsed, ns: &str, name: &str) {
    let Some((mut st, d, _, claim)) = read_current(inner, parsed, |d| &d.claims, ns, name) else {
        return;
    };
    let reserved = arr(&claim, "/status/reservedFor").to_vec();
    let valid: Vec<Value> = reserved
        .iter()
        .filter(|r| {
            if !s(r, "/apiGroup").is_empty() || s(r, "/resource") != "pods" {
                return true;
            }
            match st.get(&d.pods, ns, s(r, "/name")) {
                Err(_) => false,
                Ok(p) => p.uid() == s(r, "/uid") && !stored_pod_done(&p),
            }
        })
        .cloned()
        .collect();
    let finalizer = arr(&claim, "/metadata/finalizers")
        .iter()
        .any(|f| f.as_str() == Some(dra::DELETE_PROTECTION_FINALIZER));
    let mut claim = claim;
    if valid.len() < reserved.len() {
        let mut c = (*claim).clone();
        let status = c["status"].as_object_mut().expect("claim status");
        if valid.is_empty() {
            status.remove("reservedFor");
            if finalizer {
                // Allocated by the scheduler: deallocate with the last consumer gone.
                status.remove("allocation");
            }
        } else {
            status.insert("reservedFor".into(), Value::Array(valid.clone()));
        }
        match st.update_by(
            &d.claims,
            ns,
            name,
            c,
            Part::Status,
            Some(&Manager::update(KCM)),
            None,
        ) {
            Ok(w) => claim = parsed.get(&w),
            Err(e) => {
                tracing::warn!(claim = %format!("{ns}/{name}"), "releasing failed: {e}");
                return;
            }
        }
        if finalizer && claim.at("/status/allocation").is_none_or(Value::is_null) {
            let mut c = (*claim).clone();
            if let Some(Value::Array(f)) = c.pointer_mut("/metadata/finalizers") {
                f.retain(|x| x.as_str() != Some(dra::DELETE_PROTECTION_FINALIZER));
            }
            match st.update_by(
                &d.claims,
                ns,
                name,
                c,
                Part::Main,
                Some(&Manager::update(KCM)),
                None,
            ) {
                Ok(w) => claim = parsed.get(&w),
                Err(e) => {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "removing the finalizer failed: {e}");
                    return;
                }
            }
        }
    } else if finalizer && valid.is_empty() && crate::deletion::terminating(&claim) {
        // Deleted while unused (say allocated, then its last consumer went before the
        // deletion): deallocated, then the finalizer goes, which completes the deletion.
        if claim.at("/status/allocation").is_some_and(|a| !a.is_null()) {
            let mut c = (*claim).clone();
            if let Some(status) = c["status"].as_object_mut() {
                status.remove("allocation");
            }
            match st.update_by(
                &d.claims,
                ns,
                name,
                c,
                Part::Status,
                Some(&Manager::update(KCM)),
                None,
            ) {
                Ok(w) => claim = parsed.get(&w),
                Err(e) => {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "deallocating failed: {e}");
                    return;
                }
            }
        }
        let mut c = (*claim).clone();
        if let Some(Value::Array(f)) = c.pointer_mut("/metadata/finalizers") {
            f.retain(|x| x.as_str() != Some(dra::DELETE_PROTECTION_FINALIZER));
        }
        if let Err(e) = st.update_by(
            &d.claims,
            ns,
            name,
            c,
            Part::Main,
            Some(&Manager::update(KCM)),
            None,
        ) {
            tracing::warn!(claim = %format!("{ns}/{name}"), "removing the finalizer failed: {e}");
        }
        return;
    }
    if !valid.is_empty() {
        return;
    }
    if let Some((pod_name, pod_uid)) = owning_pod(&claim)
        && let Ok(pod) = st.get(&d.pods, ns, pod_name)
        && (pod.uid() != pod_uid || stored_pod_done(&pod))
    {
        let _ = st.delete_request(&d.claims, ns, name, &DeleteOptions::default());
    }
}

/// A pod was deleted: its reservations are released, and the claims it alone owned are
/// garbage-collected.
fn pod_gone(inner: &Inner, index: &Index, parsed: &mut Parsed, ns: &str, uid: &str) {
    let (reserving, orphans): (Vec<String>, Vec<String>) = {
        let st = inner.state();
        let d = defs(&st);
        let alive = |o: &Value| {
            st.get(&d.pods, ns, s(o, "/name"))
                .is_ok_and(|p| p.uid() == s(o, "/uid"))
        };
        // Each parsed once (usually kept from the claim's last event).
        let claims: Vec<_> = Index::get(&index.claims_by_uid, ns, uid)
            .into_iter()
            .filter_map(|c| st.get(&d.claims, ns, &c).ok())
            .map(|c| (c.name().to_string(), parsed.get(&c)))
            .collect();
        let reserving = claims
            .iter()
            .filter(|(_, c)| {
                arr(c, "/status/reservedFor")
                    .iter()
                    .any(|r| s(r, "/uid") == uid)
            })
            .map(|(name, _)| name.clone())
            .collect();
        let orphans = claims
            .iter()
            .filter(|(_, c)| {
                let owners = arr(c, "/metadata/ownerReferences");
                owners.iter().any(|o| s(o, "/uid") == uid)
                    && owners.iter().all(|o| s(o, "/kind") == "Pod" && !alive(o))
            })
            .map(|(name, _)| name.clone())
            .collect();
        (reserving, orphans)
    };
    for c in reserving {
        sync_claim(inner, parsed, ns, &c);
    }
    let mut st = inner.state();
    let d = defs(&st);
    // A plain DELETE, as the garbage collector sends: a finalizer still on a claim holds it
    // (marked) until it is removed.
    for c in orphans {
        let _ = st.delete_request(&d.claims, ns, &c, &DeleteOptions::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names() {
        assert_eq!(generate_name("pod", "gpu"), "pod-gpu-");
        let long = "p".repeat(60);
        let n = generate_name(&long, "claim-name");
        assert!(n.len() <= 57, "{n}");
        assert!(n.starts_with("ppp") && n.contains("-clai"), "{n}");
    }

    /// The filter under the lock reads bytes only: every pod with claims passes, a pod with an
    /// empty list or none does not, and whatever passes is checked again parsed.
    #[test]
    fn relevant_pods() {
        let registry = crate::resources::Registry::default();
        let pods = registry.get("", "v1", "pods").expect("built in");
        let ev = |pod: Value| Event {
            rv: 1,
            key: pods.key.clone(),
            etype: EventType::Added,
            obj: Stored::new(&pods, &pod),
            prev: None,
        };
        let with = json!({"metadata": {"name": "a", "annotations": {"x": "resourceClaims"}},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}});
        assert!(relevant(&ev(with.clone())) && has_claims(&with));
        // A claim made for its extended resources.
        let extended = json!({"metadata": {"name": "e"}, "status": {"extendedResourceClaimStatus":
            {"resourceClaimName": "e-extended-resources-x", "requestMappings": []}}});
        assert!(relevant(&ev(extended.clone())) && has_claims(&extended));
        assert_eq!(claim_names(&extended), ["e-extended-resources-x"]);
        for without in [
            json!({"metadata": {"name": "b"}, "spec": {"resourceClaims": []}}),
            json!({"metadata": {"name": "c", "annotations": {"resourceClaims": "[{"}},
                   "spec": {"containers": [{"resources": {"claims": [{"name": "gpu"}]}}]}}),
        ] {
            assert!(!relevant(&ev(without.clone())) && !has_claims(&without));
        }
    }
}
