//! The storage controllers ([`SimConfig::provisioner`](crate::SimConfig::provisioner)): the
//! PersistentVolume controller of kube-controller-manager and a CSI external provisioner, as a
//! background task that follows the store's event stream (resyncing everything when it falls
//! behind) and writes through the store like API calls, so every change has its own
//! `resourceVersion` and watch event, in the order the real controllers make them:
//!
//! 1. A pending claim whose StorageClass exists (and is not `kubernetes.io/no-provisioner`) is
//!    handed to the provisioner: the PV controller sets `volume.kubernetes.io/storage-provisioner`
//!    and `volume.beta.kubernetes.io/storage-provisioner`. For `Immediate` classes that happens
//!    at once; for `WaitForFirstConsumer` classes once the claim carries
//!    `volume.kubernetes.io/selected-node` (the scheduler's choice).
//! 2. After the configured delay the provisioner creates the PV `pvc-<claim uid>`: the claim's
//!    request, access modes and volume mode, the class's name, reclaim policy and mount options,
//!    `claimRef` to the claim, `csi: {driver: <provisioner>, volumeHandle}`, the
//!    `pv.kubernetes.io/provisioned-by` annotation, and node affinity: for WaitForFirstConsumer
//!    one term pinning every topology key of the class's `allowedTopologies` (or
//!    `kubernetes.io/hostname`) to the selected node's label value; for Immediate the class's
//!    first allowed topology term, if any. A selected node that is missing, lacks a key or lies
//!    outside `allowedTopologies` gets no volume (a failing provisioner).
//! 3. The PV controller binds (`bind`, each step written only when it changes something): PV
//!    `status.phase: Bound`; the claim's `spec.volumeName` and the
//!    `pv.kubernetes.io/bind-completed` / `pv.kubernetes.io/bound-by-controller` annotations;
//!    the claim's `status` (`Bound`, access modes and capacity of the volume). A PV created with
//!    a `claimRef` to a pending claim (static pre-binding, as a scheduler does) is bound the same
//!    way at once, its `claimRef` completed first when it has no UID.
//!
//! A claim that names its volume (`spec.volumeName` without `bind-completed`: pre-bound by its
//! user) is never provisioned (`syncUnboundClaim`): when the volume exists and has no
//! `claimRef` (and satisfies the claim: not being deleted, big enough, same class, volume mode
//! and access modes) or its `claimRef` names the claim (without a UID or with the claim's), the
//! two are bound as in step 3; otherwise (no such volume, a volume that does not satisfy it, or
//! one claimed by another claim) the claim stays `Pending`, and is synced again when the volume
//! changes. `bound-by-controller` goes only on what the controller set: the volume when its
//! `claimRef` did not already name the claim, the claim when it did not name the volume. A
//! claim with `bind-completed` (`syncBoundClaim`) becomes `Lost` when its volume is missing or
//! bound to another claim UID, and is bound again when its volume lost its `claimRef`.
//!
//! A volume not bound to a claim becomes `Available`. Claims whose class does not exist (until it
//! is created) are left alone. A deleted claim makes its volume `Released`, and a released
//! dynamically provisioned volume with reclaim policy `Delete` is deleted after the delay. With
//! [`Provisioner::Never`] step 1 and all binding happen, step 2 and the deletion never do.
//!
//! Unlike upstream, which emits events (`VolumeMismatch`, `FailedBinding`, `ClaimLost`) and
//! retries a claim whose volume was missing or claimed on its periodic resync (15 s), no events
//! are written and the claims naming a volume are synced as soon as the volume changes.
//!
//! It uses the shared state (`inner`), the store (whose broadcast it follows) and the storage
//! object rules (`storage`); `sim` starts it.

use crate::config::Provisioner;
use crate::error::ApiError;
use crate::inner::Inner;
use crate::meta;
use crate::meta::Pointer;
use crate::resources::ResourceDef;
use crate::storage::{self, arr_at, str_at};
use crate::store::{Event, EventType, Part, State};
use crate::validation::quantity_of;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::{JoinHandle, JoinSet};

/// The node the scheduler chose for a WaitForFirstConsumer claim.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// Set by the PV controller on a claim handed to an external provisioner.
pub const STORAGE_PROVISIONER_ANNOTATION: &str = "volume.kubernetes.io/storage-provisioner";
/// The deprecated twin of [`STORAGE_PROVISIONER_ANNOTATION`], still set.
pub const BETA_STORAGE_PROVISIONER_ANNOTATION: &str =
    "volume.beta.kubernetes.io/storage-provisioner";
/// `"yes"` on a claim whose binding is complete.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";
/// `"yes"` on a claim (or volume) the controller bound.
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner that created a volume.
pub const PROVISIONED_BY_ANNOTATION: &str = "pv.kubernetes.io/provisioned-by";
/// The topology key used when a class has no `allowedTopologies`.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The provisioner of classes for pre-created (local) volumes: never provisioned.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

struct Defs {
    pvc: Arc<ResourceDef>,
    pv: Arc<ResourceDef>,
    sc: Arc<ResourceDef>,
    nodes: Arc<ResourceDef>,
}

fn defs(st: &State) -> Defs {
    let get = |g: &str, p: &str| st.registry.get(g, "v1", p).expect("built in");
    Defs {
        pvc: get("", "persistentvolumeclaims"),
        pv: get("", "persistentvolumes"),
        sc: get("storage.k8s.io", "storageclasses"),
        nodes: get("", "nodes"),
    }
}

/// Starts the controllers when the configuration asks for them.
pub(crate) fn spawn(inner: &Arc<Inner>) -> Option<JoinHandle<()>> {
    let delay = match inner.cfg.provisioner {
        Provisioner::Off => return None,
        Provisioner::After(d) => Some(d),
        Provisioner::Never => None,
    };
    let rx = inner.state().subscribe();
    let c = Controller {
        inner: inner.clone(),
        delay,
        in_flight: HashSet::new(),
        tasks: JoinSet::new(),
    };
    Some(inner.rt.spawn(c.run(rx)))
}

struct Controller {
    inner: Arc<Inner>,
    /// Provisioning (and deletion) latency; None: never.
    delay: Option<Duration>,
    /// Keys of the delayed operations under way (`<claim uid>`, `delete/<volume uid>`).
    in_flight: HashSet<String>,
    tasks: JoinSet<String>,
}

fn annotations(obj: &Value) -> Option<&Map<String, Value>> {
    obj.at("/metadata/annotations").and_then(Value::as_object)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    annotations(obj)
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn set_annotation(obj: &mut Value, key: &str, value: &str) {
    let a = meta::metadata_mut(obj)
        .entry("annotations")
        .or_insert_with(|| json!({}));
    if !a.is_object() {
        *a = json!({});
    }
    a.as_object_mut()
        .expect("object")
        .insert(key.into(), json!(value));
}

fn ids(obj: &Value) -> (String, String, String) {
    (
        meta::meta_str(obj, "namespace").to_string(),
        meta::meta_str(obj, "name").to_string(),
        meta::meta_str(obj, "uid").to_string(),
    )
}

/// A claim still waiting for a volume (no `volumeName`, not Bound or Lost).
fn pending(claim: &Value) -> bool {
    str_at(claim, "/spec/volumeName").is_empty()
        && !matches!(str_at(claim, "/status/phase"), "Bound" | "Lost")
}

fn selected_node(claim: &Value) -> Option<&str> {
    annotation(claim, SELECTED_NODE_ANNOTATION).filter(|n| !n.is_empty())
}

fn wait_for_first_consumer(class: &Value) -> bool {
    str_at(class, "/volumeBindingMode") == "WaitForFirstConsumer"
}

/// The claim's StorageClass, when it exists and has a provisioner that provisions.
fn class_of(st: &State, d: &Defs, claim: &Value) -> Option<Value> {
    let name = storage::claim_class(claim);
    if name.is_empty() {
        return None;
    }
    let sc = st.get(&d.sc, "", name).ok()?.value();
    (str_at(&sc, "/provisioner") != NO_PROVISIONER).then_some(sc)
}

/// Why a volume cannot take a claim (`checkVolumeSatisfyClaim`: being deleted, too small,
/// another class, volume mode or access modes), or None.
fn mismatch(pv: &Value, claim: &Value) -> Option<&'static str> {
    let size = |o: &Value, p: &str| o.at(p).and_then(quantity_of).unwrap_or(0);
    let pv_modes = arr_at(pv, "/spec/accessModes");
    if pv
        .at("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        Some("the volume is marked for deletion")
    } else if size(pv, "/spec/capacity/storage") < size(claim, "/spec/resources/requests/storage") {
        Some("requested PV is too small")
    } else if storage::claim_class(pv) != storage::claim_class(claim) {
        // `GetPersistentVolumeClass` reads a volume as `claim_class` reads a claim.
        Some("storageClassName does not match")
    } else if str_at(pv, "/spec/volumeMode") != str_at(claim, "/spec/volumeMode") {
        Some("incompatible volumeMode")
    } else if !arr_at(claim, "/spec/accessModes")
        .iter()
        .all(|m| pv_modes.contains(m))
    {
        Some("incompatible accessMode")
    } else {
        None
    }
}

/// Whether a volume satisfies a claim (see [`mismatch`]).
fn satisfies(pv: &Value, claim: &Value) -> bool {
    mismatch(pv, claim).is_none()
}

/// The volume's `claimRef`, when set.
fn claim_ref_of(pv: &Value) -> Option<&Value> {
    pv.at("/spec/claimRef").filter(|r| !r.is_null())
}

/// `IsVolumeBoundToClaim`: the volume's `claimRef` names the claim, without a UID or with its UID.
fn volume_bound_to_claim(pv: &Value, claim: &Value) -> bool {
    let (ns, name, uid) = ids(claim);
    claim_ref_of(pv).is_some_and(|r| {
        let ref_uid = str_at(r, "/uid");
        str_at(r, "/namespace") == ns
            && str_at(r, "/name") == name
            && (ref_uid.is_empty() || ref_uid == uid)
    })
}

/// A volume whose `claimRef` names the claim (without a UID or with its UID) and that can be
/// bound to it.
fn prebound_volume(st: &State, d: &Defs, claim: &Value) -> Option<Value> {
    let (_, pvs) = st.list(&d.pv, None);
    pvs.iter().map(|s| s.value()).find(|pv| {
        volume_bound_to_claim(pv, claim)
            && matches!(
                str_at(pv, "/spec/claimRef/kind"),
                "" | "PersistentVolumeClaim"
            )
            && !matches!(str_at(pv, "/status/phase"), "Released" | "Failed")
            && satisfies(pv, claim)
    })
}

fn claim_ref(claim: &Value) -> Value {
    let (ns, name, uid) = ids(claim);
    json!({"kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid,
           "apiVersion": "v1", "resourceVersion": meta::meta_str(claim, "resourceVersion")})
}

/// The PV controller's `bind`, each step written only when it changes something and each its
/// own write: the volume's `claimRef` (`bound-by-controller` on the volume only when its
/// `claimRef` did not already name the claim), the volume's phase, the claim's `volumeName`
/// (`bound-by-controller` on the claim only when the controller sets it) and `bind-completed`,
/// the claim's status (`Bound`, the volume's access modes, and its capacity when the claim
/// becomes Bound: a bound claim's capacity is left to resizing).
fn bind(st: &mut State, d: &Defs, pv: &Value, claim: &Value) -> Result<(), ApiError> {
    let pv_name = meta::meta_str(pv, "name").to_string();
    let (ns, name, uid) = ids(claim);
    // bindVolumeToClaim
    let mut pv = pv.clone();
    let by_user = volume_bound_to_claim(&pv, claim);
    let rebind = claim_ref_of(&pv).is_none_or(|r| {
        str_at(r, "/namespace") != ns || str_at(r, "/name") != name || str_at(r, "/uid") != uid
    });
    let mark = !by_user && annotation(&pv, BOUND_BY_CONTROLLER_ANNOTATION).is_none();
    if rebind || mark {
        if rebind {
            pv["spec"]["claimRef"] = claim_ref(claim);
        }
        if mark {
            set_annotation(&mut pv, BOUND_BY_CONTROLLER_ANNOTATION, "yes");
        }
        pv = st.update(&d.pv, "", &pv_name, pv, Part::Main)?.value();
    }
    // updateVolumePhase
    if str_at(&pv, "/status/phase") != "Bound" {
        let mut n = pv.clone();
        n["status"]["phase"] = json!("Bound");
        pv = st.update(&d.pv, "", &pv_name, n, Part::Status)?.value();
    }
    // bindClaimToVolume
    let mut c = claim.clone();
    let mut dirty = false;
    if str_at(claim, "/spec/volumeName") != pv_name {
        c["spec"]["volumeName"] = json!(pv_name);
        if annotation(&c, BOUND_BY_CONTROLLER_ANNOTATION).is_none() {
            set_annotation(&mut c, BOUND_BY_CONTROLLER_ANNOTATION, "yes");
        }
        dirty = true;
    }
    if annotation(&c, BIND_COMPLETED_ANNOTATION).is_none() {
        set_annotation(&mut c, BIND_COMPLETED_ANNOTATION, "yes");
        dirty = true;
    }
    if dirty {
        c = st.update(&d.pvc, &ns, &name, c, Part::Main)?.value();
    }
    // updateClaimStatus(Bound, volume)
    update_claim_status(st, d, &c, "Bound", Some(&pv))
}

/// The PV controller's `updateClaimStatus`: the phase; with a volume its access modes (and its
/// capacity when the phase changes), without one no access modes nor capacity. Written only
/// when something changes.
fn update_claim_status(
    st: &mut State,
    d: &Defs,
    claim: &Value,
    phase: &str,
    pv: Option<&Value>,
) -> Result<(), ApiError> {
    let (ns, name, _) = ids(claim);
    let mut c = claim.clone();
    let becoming = str_at(claim, "/status/phase") != phase;
    let mut dirty = becoming;
    if !c.get("status").is_some_and(Value::is_object) {
        c["status"] = json!({});
    }
    let s = c["status"].as_object_mut().expect("object");
    s.insert("phase".into(), json!(phase));
    match pv {
        None => {
            dirty |= s.remove("accessModes").is_some();
            dirty |= s.remove("capacity").is_some();
        }
        Some(pv) => {
            let modes = pv.at("/spec/accessModes").cloned();
            if s.get("accessModes") != modes.as_ref() {
                match modes {
                    Some(m) => s.insert("accessModes".into(), m),
                    None => s.remove("accessModes"),
                };
                dirty = true;
            }
            let storage =
                |o: Option<&Value>| o.and_then(|v| v.get("storage")).and_then(quantity_of);
            let pv_capacity = pv.at("/spec/capacity");
            if becoming && storage(s.get("capacity")) != storage(pv_capacity) {
                s.insert(
                    "capacity".into(),
                    pv_capacity.cloned().unwrap_or_else(|| json!({})),
                );
                dirty = true;
            }
        }
    }
    if dirty {
        st.update(&d.pvc, &ns, &name, c, Part::Status)?;
    }
    Ok(())
}

/// `syncUnboundClaim` for a claim that names its volume (`spec.volumeName`, no
/// `bind-completed`): bound to it when the volume is unclaimed and satisfies the claim, or when
/// its `claimRef` already names the claim; otherwise (no such volume, a volume that does not
/// satisfy the claim or is claimed by another claim) the claim stays `Pending`.
fn sync_requested_volume(st: &mut State, d: &Defs, claim: &Value) -> Result<(), ApiError> {
    let volume = str_at(claim, "/spec/volumeName");
    let Ok(pv) = st.get(&d.pv, "", volume) else {
        // Retried when the volume appears.
        return update_claim_status(st, d, claim, "Pending", None);
    };
    let pv = pv.value();
    if claim_ref_of(&pv).is_none() {
        if let Some(why) = mismatch(&pv, claim) {
            tracing::debug!(claim = %claim_key(claim), "cannot bind to requested volume {volume:?}: {why}");
            return update_claim_status(st, d, claim, "Pending", None);
        }
        bind(st, d, &pv, claim)
    } else if volume_bound_to_claim(&pv, claim) {
        bind(st, d, &pv, claim)
    } else if annotation(claim, BOUND_BY_CONTROLLER_ANNOTATION).is_none() {
        // Bound to another claim: retried when the volume changes.
        update_claim_status(st, d, claim, "Pending", None)
    } else {
        // Upstream: "THIS SHOULD NEVER HAPPEN" (someone removed `bind-completed`); an error,
        // nothing written.
        tracing::warn!(claim = %claim_key(claim), "volume {volume:?} already claimed by another claim");
        Ok(())
    }
}

/// `syncBoundClaim` for a claim with `bind-completed`: `Lost` when it names no volume, a missing
/// one or one bound to another claim (UID); bound again (each step only when it changes
/// something) when its volume has no `claimRef` or names it.
fn sync_bound_claim(st: &mut State, d: &Defs, claim: &Value) -> Result<(), ApiError> {
    let lost = |st: &mut State| {
        if str_at(claim, "/status/phase") == "Lost" {
            return Ok(());
        }
        update_claim_status(st, d, claim, "Lost", None)
    };
    let volume = str_at(claim, "/spec/volumeName");
    if volume.is_empty() {
        return lost(st);
    }
    let Ok(pv) = st.get(&d.pv, "", volume) else {
        return lost(st);
    };
    let pv = pv.value();
    match claim_ref_of(&pv) {
        Some(r) if str_at(r, "/uid") != meta::meta_str(claim, "uid") => lost(st),
        _ => bind(st, d, &pv, claim),
    }
}

fn claim_key(claim: &Value) -> String {
    let (ns, name, _) = ids(claim);
    format!("{ns}/{name}")
}

fn in_expr(key: &str, values: Value) -> Value {
    json!({"key": key, "operator": "In", "values": values})
}

/// The node affinity of a new volume (None: unconstrained), or why it cannot be provisioned.
fn volume_affinity(
    st: &State,
    d: &Defs,
    class: &Value,
    node: Option<&str>,
) -> Result<Option<Value>, String> {
    let terms = arr_at(class, "/allowedTopologies");
    let term = |exprs: Vec<Value>| json!({"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}});
    let Some(node_name) = node else {
        let exprs: Vec<Value> = terms
            .first()
            .map(|t| arr_at(t, "/matchLabelExpressions"))
            .unwrap_or_default()
            .iter()
            .map(|e| {
                in_expr(
                    str_at(e, "/key"),
                    e.get("values").cloned().unwrap_or_default(),
                )
            })
            .collect();
        return Ok((!exprs.is_empty()).then(|| term(exprs)));
    };
    let node = st
        .get(&d.nodes, "", node_name)
        .map_err(|_| format!("selected node {node_name:?} not found"))?;
    let node = node.value();
    let labels = node.at("/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let mut keys: Vec<&str> = Vec::new();
    for t in terms {
        for e in arr_at(t, "/matchLabelExpressions") {
            let k = str_at(e, "/key");
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() {
        keys.push(HOSTNAME_LABEL);
    }
    let allowed = terms.is_empty()
        || terms.iter().any(|t| {
            arr_at(t, "/matchLabelExpressions").iter().all(|e| {
                label(str_at(e, "/key"))
                    .is_some_and(|v| arr_at(e, "/values").iter().any(|x| x.as_str() == Some(v)))
            })
        });
    if !allowed {
        return Err(format!(
            "selected node {node_name:?} is outside the class's allowedTopologies"
        ));
    }
    let exprs = keys
        .iter()
        .map(|k| {
            label(k)
                .map(|v| in_expr(k, json!([v])))
                .ok_or_else(|| format!("selected node {node_name:?} has no label {k:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(term(exprs)))
}

/// The volume the provisioner creates for a claim.
fn volume_for(claim: &Value, class: &Value, pv_name: &str, affinity: Option<Value>) -> Value {
    let provisioner = str_at(class, "/provisioner");
    let mut spec = json!({
        "accessModes": claim.at("/spec/accessModes").cloned().unwrap_or_default(),
        "capacity": {"storage": claim.at("/spec/resources/requests/storage").cloned().unwrap_or_default()},
        "claimRef": claim_ref(claim),
        "csi": {"driver": provisioner, "volumeHandle": format!("kube-sim-{}", meta::meta_str(claim, "uid"))},
        "persistentVolumeReclaimPolicy": class.get("reclaimPolicy").cloned().unwrap_or_else(|| json!("Delete")),
        "storageClassName": meta::meta_str(class, "name"),
        "volumeMode": claim.at("/spec/volumeMode").cloned().unwrap_or_else(|| json!("Filesystem")),
    });
    if let Some(a) = affinity {
        spec["nodeAffinity"] = a;
    }
    if let Some(m) = class.get("mountOptions").filter(|m| m.is_array()) {
        spec["mountOptions"] = m.clone();
    }
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "annotations": {PROVISIONED_BY_ANNOTATION: provisioner}},
        "spec": spec,
    })
}

/// The delayed step: create the claim's volume and bind both, if the claim still needs it.
fn provision(inner: &Inner, ns: &str, name: &str, uid: &str) {
    let mut st = inner.state();
    let d = defs(&st);
    let Ok(claim) = st.get(&d.pvc, ns, name) else {
        return;
    };
    let claim = claim.value();
    if meta::meta_str(&claim, "uid") != uid || !pending(&claim) {
        return;
    }
    let Some(class) = class_of(&st, &d, &claim) else {
        return;
    };
    let node = if wait_for_first_consumer(&class) {
        match selected_node(&claim) {
            Some(n) => Some(n.to_string()),
            None => return,
        }
    } else {
        None
    };
    let pv_name = format!("pvc-{uid}");
    let pv = match st.get(&d.pv, "", &pv_name) {
        Ok(pv) => pv.value(),
        Err(_) => {
            let affinity = match volume_affinity(&st, &d, &class, node.as_deref()) {
                Ok(a) => a,
                Err(why) => {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "not provisioning: {why}");
                    return;
                }
            };
            let obj = volume_for(&claim, &class, &pv_name, affinity);
            match st.create(&d.pv, None, obj) {
                Ok(s) => s.value(),
                Err(e) => {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "creating the volume failed: {e}");
                    return;
                }
            }
        }
    };
    if str_at(&pv, "/spec/claimRef/uid") == uid
        && let Err(e) = bind(&mut st, &d, &pv, &claim)
    {
        tracing::warn!(claim = %format!("{ns}/{name}"), "binding failed: {e}");
    }
}

/// The delayed deletion of a released volume (reclaim policy `Delete`).
fn delete_released(inner: &Inner, name: &str, uid: &str) {
    let mut st = inner.state();
    let d = defs(&st);
    let Ok(pv) = st.get(&d.pv, "", name) else {
        return;
    };
    if pv.uid() == uid && str_at(&pv.value(), "/status/phase") == "Released" {
        let _ = st.delete(&d.pv, "", name, Some(&json!({"uid": uid})));
    }
}

impl Controller {
    async fn run(mut self, mut rx: broadcast::Receiver<Arc<Event>>) {
        self.resync();
        loop {
            tokio::select! {
                r = rx.recv() => match r {
                    Ok(ev) => self.on_event(&ev),
                    Err(RecvError::Lagged(_)) => self.resync(),
                    Err(RecvError::Closed) => return,
                },
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    if let Ok(key) = done {
                        self.in_flight.remove(&key);
                    }
                }
            }
        }
    }

    fn on_event(&mut self, ev: &Event) {
        // It sees every commit: only those of its kinds are parsed, once.
        if ![storage::PVC_KEY, storage::PV_KEY, storage::SC_KEY].contains(&ev.key.as_ref()) {
            return;
        }
        let obj = &ev.obj.value();
        match (ev.key.as_ref(), ev.etype) {
            (storage::PVC_KEY, EventType::Deleted) => self.claim_deleted(obj),
            (storage::PVC_KEY, _) => {
                let (ns, name, _) = ids(obj);
                self.sync_claim(&ns, &name);
            }
            (storage::PV_KEY, etype) => {
                // The claim the volume names (upstream also syncs it when the volume is deleted,
                // so that it becomes Lost at once), the volume, then the claims naming the
                // volume (upstream: their next periodic sync).
                let key = (
                    str_at(obj, "/spec/claimRef/namespace").to_string(),
                    str_at(obj, "/spec/claimRef/name").to_string(),
                );
                if !key.1.is_empty() {
                    self.sync_claim(&key.0, &key.1);
                }
                let volume = meta::meta_str(obj, "name");
                if etype != EventType::Deleted {
                    self.sync_volume(volume);
                }
                for (ns, name) in self.claims_naming(volume) {
                    if (&ns, &name) != (&key.0, &key.1) {
                        self.sync_claim(&ns, &name);
                    }
                }
            }
            (storage::SC_KEY, EventType::Added | EventType::Modified) => {
                let class = meta::meta_str(obj, "name");
                let claims: Vec<(String, String)> = {
                    let st = self.inner.state();
                    let d = defs(&st);
                    st.list(&d.pvc, None)
                        .1
                        .iter()
                        .map(|s| s.value())
                        .filter(|c| pending(c) && storage::claim_class(c) == class)
                        .map(|c| {
                            let (ns, name, _) = ids(&c);
                            (ns, name)
                        })
                        .collect()
                };
                for (ns, name) in claims {
                    self.sync_claim(&ns, &name);
                }
            }
            _ => {}
        }
    }

    /// The PV controller's claim sync (`syncClaim`): a claim with `bind-completed` is checked
    /// against its volume ([`sync_bound_claim`]), one naming a volume is bound to it when it can
    /// be ([`sync_requested_volume`]); a pending claim is bound to a volume pre-bound to it, or
    /// handed to the provisioner and its provisioning scheduled.
    fn sync_claim(&mut self, ns: &str, name: &str) {
        let uid = {
            let mut st = self.inner.state();
            let d = defs(&st);
            let Ok(claim) = st.get(&d.pvc, ns, name) else {
                return;
            };
            let claim = claim.value();
            let named = if annotation(&claim, BIND_COMPLETED_ANNOTATION).is_some() {
                Some(sync_bound_claim(&mut st, &d, &claim))
            } else if !str_at(&claim, "/spec/volumeName").is_empty() {
                Some(sync_requested_volume(&mut st, &d, &claim))
            } else {
                None
            };
            if let Some(r) = named {
                if let Err(e) = r {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "binding failed: {e}");
                }
                return;
            }
            if !pending(&claim) {
                return;
            }
            if let Some(pv) = prebound_volume(&st, &d, &claim) {
                if let Err(e) = bind(&mut st, &d, &pv, &claim) {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "binding failed: {e}");
                }
                return;
            }
            let Some(class) = class_of(&st, &d, &claim) else {
                return;
            };
            if wait_for_first_consumer(&class) && selected_node(&claim).is_none() {
                return;
            }
            let prov = str_at(&class, "/provisioner");
            let handed = [
                STORAGE_PROVISIONER_ANNOTATION,
                BETA_STORAGE_PROVISIONER_ANNOTATION,
            ]
            .iter()
            .all(|a| annotation(&claim, a) == Some(prov));
            if !handed {
                let mut c = claim.clone();
                set_annotation(&mut c, STORAGE_PROVISIONER_ANNOTATION, prov);
                set_annotation(&mut c, BETA_STORAGE_PROVISIONER_ANNOTATION, prov);
                if let Err(e) = st.update(&d.pvc, ns, name, c, Part::Main) {
                    tracing::warn!(claim = %format!("{ns}/{name}"), "annotating failed: {e}");
                }
            }
            meta::meta_str(&claim, "uid").to_string()
        };
        let Some(delay) = self.delay else { return };
        if self.in_flight.insert(uid.clone()) {
            let inner = self.inner.clone();
            let (ns, name) = (ns.to_string(), name.to_string());
            self.tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                provision(&inner, &ns, &name, &uid);
                uid
            });
        }
    }

    /// The PV controller's volume sync: a new volume not bound to a claim (no `claimRef`, or one
    /// without UID that could not be bound) becomes `Available`; a volume whose claim is gone is
    /// released.
    fn sync_volume(&mut self, name: &str) {
        let orphan = {
            let mut st = self.inner.state();
            let d = defs(&st);
            let Ok(pv) = st.get(&d.pv, "", name) else {
                return;
            };
            let mut pv = pv.value();
            let phase = str_at(&pv, "/status/phase");
            let uid = str_at(&pv, "/spec/claimRef/uid");
            if uid.is_empty() {
                if matches!(phase, "" | "Pending") {
                    pv["status"]["phase"] = json!("Available");
                    if let Err(e) = st.update(&d.pv, "", name, pv, Part::Status) {
                        tracing::warn!(volume = %name, "making available failed: {e}");
                    }
                }
                return;
            }
            if matches!(phase, "Released" | "Failed") {
                return;
            }
            let claim = st
                .get(
                    &d.pvc,
                    str_at(&pv, "/spec/claimRef/namespace"),
                    str_at(&pv, "/spec/claimRef/name"),
                )
                .ok();
            if claim.is_some_and(|c| c.uid() == uid) {
                return;
            }
            pv
        };
        self.release(vec![orphan]);
    }

    /// A claim is gone: its volumes are released (and deleted later when their policy says so).
    fn claim_deleted(&mut self, claim: &Value) {
        let uid = meta::meta_str(claim, "uid");
        let pvs: Vec<Value> = {
            let st = self.inner.state();
            let d = defs(&st);
            st.list(&d.pv, None)
                .1
                .iter()
                .map(|s| s.value())
                .filter(|pv| !uid.is_empty() && str_at(pv, "/spec/claimRef/uid") == uid)
                .collect()
        };
        self.release(pvs);
    }

    fn release(&mut self, pvs: Vec<Value>) {
        let mut deletions = Vec::new();
        {
            let mut st = self.inner.state();
            let d = defs(&st);
            for pv in pvs {
                let (_, name, uid) = ids(&pv);
                let Ok(cur) = st.get(&d.pv, "", &name) else {
                    continue;
                };
                let mut cur = cur.value();
                if meta::meta_str(&cur, "uid") != uid {
                    continue;
                }
                if !matches!(str_at(&cur, "/status/phase"), "Released" | "Failed") {
                    cur["status"]["phase"] = json!("Released");
                    if let Err(e) = st.update(&d.pv, "", &name, cur.clone(), Part::Status) {
                        tracing::warn!(volume = %name, "releasing failed: {e}");
                        continue;
                    }
                }
                if str_at(&cur, "/spec/persistentVolumeReclaimPolicy") == "Delete"
                    && annotation(&cur, PROVISIONED_BY_ANNOTATION).is_some()
                {
                    deletions.push((name, uid));
                }
            }
        }
        let Some(delay) = self.delay else { return };
        for (name, uid) in deletions {
            if self.in_flight.insert(format!("delete/{uid}")) {
                let inner = self.inner.clone();
                self.tasks.spawn(async move {
                    tokio::time::sleep(delay).await;
                    delete_released(&inner, &name, &uid);
                    format!("delete/{uid}")
                });
            }
        }
    }

    /// The claims whose `spec.volumeName` is `volume`.
    fn claims_naming(&self, volume: &str) -> Vec<(String, String)> {
        let st = self.inner.state();
        let d = defs(&st);
        st.list(&d.pvc, None)
            .1
            .iter()
            .map(|s| s.value())
            .filter(|c| str_at(c, "/spec/volumeName") == volume)
            .map(|c| {
                let (ns, name, _) = ids(&c);
                (ns, name)
            })
            .collect()
    }

    /// Brings everything up to date (at start and after missing events).
    fn resync(&mut self) {
        let (claims, pvs) = {
            let st = self.inner.state();
            let d = defs(&st);
            let values = |def: &ResourceDef| -> Vec<Value> {
                st.list(def, None).1.iter().map(|s| s.value()).collect()
            };
            (values(&d.pvc), values(&d.pv))
        };
        for c in &claims {
            let (ns, name, _) = ids(c);
            self.sync_claim(&ns, &name);
        }
        let orphans: Vec<Value> = pvs
            .into_iter()
            .filter(|pv| {
                let uid = str_at(pv, "/spec/claimRef/uid");
                !uid.is_empty()
                    && str_at(pv, "/status/phase") == "Bound"
                    && !claims.iter().any(|c| meta::meta_str(c, "uid") == uid)
            })
            .collect();
        self.release(orphans);
    }
}
