//! PreBind for volumes (kube-scheduler's VolumeBinding `PreBind`, `binder.go`'s
//! `BindPodVolumes`): before a pod whose `WaitForFirstConsumer` claims the engine chose to
//! provision is bound, each claim gets `volume.kubernetes.io/selected-node: <node>` (a merge
//! patch of its metadata; kube-scheduler sets only this annotation, the PV controller adds
//! `volume.kubernetes.io/storage-provisioner` itself), then the bind waits until every claim is
//! bound (`spec.volumeName` set and `status.phase` `Bound`), at most the intent's
//! `volume_timeout`, and checks that each bound PV's node affinity still matches the node
//! (`checkBindings`). Any failure becomes `binding volumes: …`, kube-scheduler's text.
//!
//! No polling: the claims informer is the PersistentVolumeClaim watch (`watch`), which hands
//! every event of a claim somebody waits for to that waiter ([`Claims`]). The patch's answer
//! gives the claim's UID and resourceVersion; events older than it are ignored (like
//! `checkBindings`' resourceVersion comparison), so a lagging watch cannot report a stale
//! state as the claim's answer.
//!
//! The node's labels and the bound PVs are read afresh (`GET`) once the claims are bound,
//! through the bind client and its rate limit; the node only when some PV has node affinity.
//!
//! Differences from kube-scheduler: a bound PV that cannot be read fails the bind at once
//! (kube-scheduler keeps polling until its timeout; the engine's next attempt then reports the
//! missing PV); a pod deleted while it waits is noticed by the binding call (404, forgotten),
//! not before; static binding of unbound claims to existing PVs is not done (the engine does
//! not choose PVs).

use crate::apicall::{Caller, api_message};
use crate::convert::{node_input, pv_node_affinity};
use crate::slim::Node;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use magma_engine::core::StaticBinding;
use magma_engine::model::{Interner, ResourceRegistry, compile_node, compile_node_term};
use magma_engine::volumes::SELECTED_NODE_ANNOTATION;
use std::cmp::Ordering as CmpOrdering;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What a claim looks like in one event (only the fields PreBind reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimState {
    pub uid: String,
    pub resource_version: Option<String>,
    /// `metadata.annotations` is present at all.
    pub annotated: bool,
    pub selected_node: Option<String>,
    pub volume_name: Option<String>,
    pub phase: Option<String>,
}

impl ClaimState {
    pub fn of(pvc: &PersistentVolumeClaim) -> ClaimState {
        let ann = pvc.metadata.annotations.as_ref();
        ClaimState {
            uid: pvc.metadata.uid.clone().unwrap_or_default(),
            resource_version: pvc.metadata.resource_version.clone(),
            annotated: ann.is_some_and(|a| !a.is_empty()),
            selected_node: ann.and_then(|a| a.get(SELECTED_NODE_ANNOTATION)).cloned(),
            volume_name: pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .filter(|v| !v.is_empty()),
            phase: pvc.status.as_ref().and_then(|s| s.phase.clone()),
        }
    }

    /// `spec.volumeName` set and `status.phase == Bound`.
    pub fn bound_volume(&self) -> Option<&str> {
        self.volume_name
            .as_deref()
            .filter(|_| self.phase.as_deref() == Some("Bound"))
    }
}

/// One observation of a claim a bind waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    Present(ClaimState),
    /// Deleted (the UID of the deleted object), or missing from a relist (`None`).
    Gone(Option<String>),
}

type Key = (String, String);
type Waiters = HashMap<Key, Vec<(u64, usize, mpsc::UnboundedSender<(usize, Observed)>)>>;

/// The claims binds are waiting for, fed by the PersistentVolumeClaim watch. Costs one atomic
/// load per claim event while nobody waits.
#[derive(Debug, Default)]
pub struct Claims {
    waiting: AtomicUsize,
    next: AtomicU64,
    waiters: Mutex<Waiters>,
    /// What the ResourceClaim and DeviceClass watches show PreBind of the DRA claims
    /// (`crate::dra`).
    pub resource: crate::dra::ResourceClaims,
}

/// A bind's registration: every event of its claims arrives on `rx` as (claim index, what).
/// Dropping it unregisters.
pub struct Registration {
    claims: Arc<Claims>,
    id: u64,
    keys: Vec<Key>,
    pub rx: mpsc::UnboundedReceiver<(usize, Observed)>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut w = self.claims.lock();
        for k in &self.keys {
            if let Some(list) = w.get_mut(k) {
                list.retain(|(id, _, _)| *id != self.id);
                if list.is_empty() {
                    w.remove(k);
                }
            }
        }
        self.claims
            .waiting
            .fetch_sub(self.keys.len(), Ordering::AcqRel);
    }
}

impl Claims {
    pub fn new() -> Arc<Claims> {
        Arc::new(Claims::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start receiving the events of these claims (namespace, name).
    pub fn register(self: &Arc<Self>, keys: Vec<Key>) -> Registration {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut w = self.lock();
            for (i, k) in keys.iter().enumerate() {
                w.entry(k.clone()).or_default().push((id, i, tx.clone()));
            }
        }
        self.waiting.fetch_add(keys.len(), Ordering::AcqRel);
        Registration {
            claims: self.clone(),
            id,
            keys,
            rx,
        }
    }

    fn send(&self, key: &Key, what: impl Fn() -> Observed) {
        let w = self.lock();
        if let Some(list) = w.get(key) {
            let what = what();
            for (_, i, tx) in list {
                let _ = tx.send((*i, what.clone()));
            }
        }
    }

    /// A claim was added or changed (watch or relist).
    pub fn observe(&self, pvc: &PersistentVolumeClaim) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(key) = crate::convert::claim_key(pvc) {
            self.send(&key, || Observed::Present(ClaimState::of(pvc)));
        }
    }

    /// A claim was deleted.
    pub fn deleted(&self, pvc: &PersistentVolumeClaim) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(key) = crate::convert::claim_key(pvc) {
            self.send(&key, || Observed::Gone(pvc.metadata.uid.clone()));
        }
    }

    /// A relist completed with exactly these claims: waited-for claims not among them are gone.
    pub fn relisted<'a>(&self, present: impl IntoIterator<Item = (&'a str, &'a str)>) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        let present: std::collections::HashSet<(&str, &str)> = present.into_iter().collect();
        let w = self.lock();
        for (k, list) in w.iter() {
            if !present.contains(&(k.0.as_str(), k.1.as_str())) {
                for (_, i, tx) in list {
                    let _ = tx.send((*i, Observed::Gone(None)));
                }
            }
        }
    }
}

/// What PreBind came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreBind {
    /// Every claim is bound and its PV fits the node: bind the pod.
    Ready,
    /// `binding volumes: …`: the engine backs the pod off with this reason.
    Failed(String),
    /// Leadership was lost or the scheduler is stopping: give the pod back untouched.
    Abandoned,
}

/// What PreBind needs besides the intent.
#[derive(Clone)]
pub struct Context {
    /// The client, rate limit and per-call timeout.
    pub calls: Caller,
    pub claims: Arc<Claims>,
    pub leading: watch::Receiver<bool>,
    pub stop: watch::Receiver<bool>,
}

/// Compare two resourceVersions (integers, KEP-5504); `None` when either is not one.
fn compare_rv(a: Option<&str>, b: Option<&str>) -> Option<CmpOrdering> {
    magma_engine::shard::resource_version_order(a?, b?)
}

/// One claim's progress.
#[derive(Debug)]
struct Tracked {
    namespace: String,
    name: String,
    /// Bound statically to this PV (its `claimRef` written by us), or provisioned (`None`).
    pv: Option<String>,
    /// As the patch answered.
    uid: String,
    patched_rv: Option<String>,
    /// An event of this claim (by UID) showed our annotation.
    seen_ours: bool,
    /// The PV it is bound to, once it is.
    bound: Option<String>,
}

fn gone(t: &Tracked) -> String {
    format!(
        "binding volumes: failed to check provisioning pvc: could not find \
         v1.PersistentVolumeClaim \"{}/{}\"",
        t.namespace, t.name
    )
}

/// Apply one observation to a claim's progress (`checkBindings` for one claim).
fn check(t: &mut Tracked, node: &str, what: &Observed) -> Result<(), String> {
    let s = match what {
        Observed::Gone(None) => return Err(gone(t)),
        Observed::Gone(Some(uid)) if *uid == t.uid => return Err(gone(t)),
        Observed::Gone(Some(_)) => return Ok(()),
        Observed::Present(s) => s,
    };
    // Later than the patch: it says where the claim stands. Unknown (resourceVersions that are
    // not integers): only once the annotation was seen on it, as events come in order.
    let fresh = match compare_rv(s.resource_version.as_deref(), t.patched_rv.as_deref()) {
        Some(CmpOrdering::Less) => return Ok(()),
        Some(_) => true,
        None => t.seen_ours && s.uid == t.uid,
    };
    if s.uid != t.uid {
        // Deleted and created again since the patch: the claim we annotated is gone.
        return if fresh { Err(gone(t)) } else { Ok(()) };
    }
    if let Some(pv) = &t.pv {
        // Static binding: the PV controller binds the claim to the PV whose claimRef we wrote.
        match (fresh, s.volume_name.as_deref()) {
            (true, Some(v)) if v != pv => {
                return Err(format!(
                    "binding volumes: pvc \"{}\" was bound to pv \"{v}\", not \"{pv}\"",
                    t.name
                ));
            }
            _ => t.bound = s.bound_volume().filter(|v| v == pv).map(str::to_owned),
        }
        return Ok(());
    }
    match s.selected_node.as_deref() {
        Some(n) if n == node => t.seen_ours = true,
        _ if !fresh => return Ok(()),
        None if !s.annotated => {
            return Err(format!(
                "binding volumes: selectedNode annotation reset for PVC \"{}\"",
                t.name
            ));
        }
        _ => {
            return Err(format!(
                "binding volumes: provisioning failed for PVC \"{}\"",
                t.name
            ));
        }
    }
    t.bound = s.bound_volume().map(str::to_owned);
    Ok(())
}

/// An API call under the rate limit and the call timeout.
async fn call<T>(
    ctx: &Context,
    f: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    ctx.calls.call(f).await?.map_err(|e| api_message(&e))
}

/// Resolves when leadership is lost or the scheduler stops.
async fn interrupted(mut leading: watch::Receiver<bool>, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        _ = leading.wait_for(|l| !*l) => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// Run PreBind for a pod going to `node`, by `deadline`: `claims` (namespace, name) to
/// provision there, and `statics` to bind to existing PVs.
pub async fn bind_volumes(
    ctx: &Context,
    node: &str,
    claims: &[(Arc<str>, Arc<str>)],
    statics: &[StaticBinding],
    deadline: Instant,
) -> PreBind {
    let work = async {
        let result = provision(ctx, node, claims, statics, deadline).await;
        match result {
            Ok(volumes) => check_volumes(ctx, node, &volumes).await,
            Err(e) => Err(e),
        }
    };
    tokio::select! {
        r = work => match r {
            Ok(()) => PreBind::Ready,
            Err(msg) => PreBind::Failed(msg),
        },
        _ = interrupted(ctx.leading.clone(), ctx.stop.clone()) => PreBind::Abandoned,
    }
}

/// Write each static binding's PV `claimRef` and annotate every claim to provision, then wait
/// until each claim is bound; returns the PVs they are bound to.
async fn provision(
    ctx: &Context,
    node: &str,
    claims: &[(Arc<str>, Arc<str>)],
    statics: &[StaticBinding],
    deadline: Instant,
) -> Result<Vec<String>, String> {
    let keys: Vec<Key> = claims
        .iter()
        .map(|(ns, n)| (ns.to_string(), n.to_string()))
        .chain(
            statics
                .iter()
                .map(|s| (s.namespace.to_string(), s.claim.to_string())),
        )
        .collect();
    // Registered before the writes, so no event after them is missed.
    let mut reg = ctx.claims.register(keys);
    let patch = serde_json::json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: node}}});
    let mut tracked = Vec::with_capacity(claims.len());
    for (ns, name) in claims {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.calls.client.clone(), ns);
        let (pp, body) = (PatchParams::default(), Patch::Merge(&patch));
        let fut = api.patch(name, &pp, &body);
        let pvc = tokio::select! {
            r = call(ctx, fut) => r.map_err(|e| format!("binding volumes: {e}"))?,
            _ = tokio::time::sleep_until(deadline) => return Err(timed_out(&[], claims)),
        };
        let s = ClaimState::of(&pvc);
        let mut t = Tracked {
            namespace: ns.to_string(),
            name: name.to_string(),
            pv: None,
            uid: s.uid.clone(),
            patched_rv: s.resource_version.clone(),
            seen_ours: false,
            bound: None,
        };
        check(&mut t, node, &Observed::Present(s))?;
        tracked.push(t);
    }
    for b in statics {
        let t = tokio::select! {
            r = bind_static(ctx, b) => r?,
            _ = tokio::time::sleep_until(deadline) => return Err(timed_out(&tracked, claims)),
        };
        tracked.push(t);
    }
    while tracked.iter().any(|t| t.bound.is_none()) {
        tokio::select! {
            m = reg.rx.recv() => {
                // The registry holds a sender for as long as `reg` lives.
                let Some((i, what)) = m else { break };
                if let Some(t) = tracked.get_mut(i) {
                    check(t, node, &what)?;
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Err(timed_out(&tracked, claims));
            }
        }
    }
    Ok(tracked.into_iter().filter_map(|t| t.bound).collect())
}

/// Static binding (kube-scheduler's `bindAPIUpdate` for a chosen PV): read the claim (its UID)
/// and the PV, then write the PV's `claimRef` to the claim, on the PV's resourceVersion, so a PV
/// someone else took meanwhile is not taken from them. The PV controller then binds the claim.
async fn bind_static(ctx: &Context, b: &StaticBinding) -> Result<Tracked, String> {
    let fail = |e: String| format!("binding volumes: {e}");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(ctx.calls.client.clone(), &b.namespace);
    let pvc = call(ctx, pvcs.get(&b.claim)).await.map_err(fail)?;
    let s = ClaimState::of(&pvc);
    let pvs: Api<PersistentVolume> = Api::all(ctx.calls.client.clone());
    let pv = call(ctx, pvs.get(&b.pv)).await.map_err(fail)?;
    let taken = pv
        .spec
        .as_ref()
        .and_then(|sp| sp.claim_ref.as_ref())
        .is_some_and(|r| {
            r.name.as_deref() != Some(&*b.claim) || r.namespace.as_deref() != Some(&*b.namespace)
        });
    if taken {
        return Err(fail(format!(
            "pv \"{}\" is already bound to another claim",
            b.pv
        )));
    }
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": pv.metadata.resource_version,
            "annotations": {BOUND_BY_CONTROLLER_ANNOTATION: "yes"},
        },
        "spec": {"claimRef": {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1",
            "namespace": &*b.namespace, "name": &*b.claim, "uid": &s.uid,
            "resourceVersion": &s.resource_version,
        }},
    });
    call(
        ctx,
        pvs.patch(&b.pv, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map_err(|e| fail(format!("pv \"{}\": {e}", b.pv)))?;
    let mut t = Tracked {
        namespace: b.namespace.to_string(),
        name: b.claim.to_string(),
        pv: Some(b.pv.to_string()),
        uid: s.uid.clone(),
        patched_rv: s.resource_version.clone(),
        seen_ours: true,
        bound: None,
    };
    check(&mut t, "", &Observed::Present(s))?;
    Ok(t)
}

/// The annotation the PV controller (and a scheduler binding a PV) writes on a PV it bound.
pub const BOUND_BY_CONTROLLER_ANNOTATION: &str = "pv.kubernetes.io/bound-by-controller";

fn timed_out(tracked: &[Tracked], claims: &[(Arc<str>, Arc<str>)]) -> String {
    let waiting: Vec<String> = claims
        .iter()
        .enumerate()
        .filter(|(i, _)| tracked.get(*i).is_none_or(|t| t.bound.is_none()))
        .map(|(_, (ns, n))| format!("{ns}/{n}"))
        .chain(
            tracked
                .iter()
                .skip(claims.len())
                .filter(|t| t.bound.is_none())
                .map(|t| format!("{}/{}", t.namespace, t.name)),
        )
        .collect();
    format!(
        "binding volumes: context deadline exceeded (persistentvolumeclaims not bound: {})",
        waiting.join(", ")
    )
}

/// `checkBindings`' node affinity check of each bound PV against the node.
async fn check_volumes(ctx: &Context, node: &str, volumes: &[String]) -> Result<(), String> {
    let pvs: Api<PersistentVolume> = Api::all(ctx.calls.client.clone());
    let mut node_meta = None;
    let mut interner = Interner::default();
    for name in volumes {
        let pv = call(ctx, pvs.get(name))
            .await
            .map_err(|e| format!("binding volumes: failed to get pv \"{name}\": {e}"))?;
        let Some(terms) = pv_node_affinity(&pv) else {
            continue;
        };
        let meta = match &node_meta {
            Some(m) => m,
            None => {
                let nodes: Api<Node> = Api::all(ctx.calls.client.clone());
                let n = call(ctx, nodes.get(node))
                    .await
                    .map_err(|e| format!("binding volumes: failed to get node \"{node}\": {e}"))?;
                // Only the name and labels matter here.
                let input = node_input(&n).map(|i| magma_engine::model::NodeInput {
                    name: i.name,
                    labels: i.labels,
                    ..Default::default()
                });
                let compiled = input
                    .ok_or_else(|| format!("binding volumes: node \"{node}\" has no name"))
                    .and_then(|i| {
                        compile_node(&i, &mut interner, &mut ResourceRegistry::default())
                            .map_err(|e| format!("binding volumes: node \"{node}\": {e}"))
                    })?;
                node_meta.insert(compiled.meta)
            }
        };
        let mut matched = false;
        for t in &terms {
            let term = compile_node_term(t, &mut interner)
                .map_err(|e| format!("binding volumes: pv \"{name}\" node affinity: {e}"))?;
            matched |= term.matches(meta);
        }
        if !matched {
            return Err(format!(
                "binding volumes: pv \"{name}\" node affinity doesn't match node \"{node}\": \
                 no matching NodeSelectorTerms"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(
        uid: &str,
        rv: &str,
        node: Option<&str>,
        volume: Option<&str>,
        bound: bool,
    ) -> Observed {
        Observed::Present(ClaimState {
            uid: uid.into(),
            resource_version: Some(rv.into()),
            annotated: node.is_some(),
            selected_node: node.map(str::to_owned),
            volume_name: volume.map(str::to_owned),
            phase: Some(if bound { "Bound" } else { "Pending" }.into()),
        })
    }

    fn tracked(rv: &str) -> Tracked {
        Tracked {
            namespace: "ns".into(),
            name: "c".into(),
            pv: None,
            uid: "u1".into(),
            patched_rv: Some(rv.into()),
            seen_ours: false,
            bound: None,
        }
    }

    #[test]
    fn a_claim_is_ready_when_bound_with_our_annotation() {
        let mut t = tracked("10");
        check(&mut t, "n1", &state("u1", "10", Some("n1"), None, false)).unwrap();
        assert_eq!(t.bound, None);
        // Volume name without the Bound phase: not yet.
        check(
            &mut t,
            "n1",
            &state("u1", "11", Some("n1"), Some("pv"), false),
        )
        .unwrap();
        assert_eq!(t.bound, None);
        check(
            &mut t,
            "n1",
            &state("u1", "12", Some("n1"), Some("pv"), true),
        )
        .unwrap();
        assert_eq!(t.bound.as_deref(), Some("pv"));
    }

    /// A claim bound statically is ready once bound to its PV, and a claim the PV controller
    /// bound to another PV fails the bind.
    #[test]
    fn a_static_claim_is_ready_when_bound_to_its_pv() {
        let mut t = Tracked {
            pv: Some("pv-a".into()),
            ..tracked("10")
        };
        check(&mut t, "", &state("u1", "11", None, None, false)).unwrap();
        assert_eq!(t.bound, None);
        check(&mut t, "", &state("u1", "12", None, Some("pv-a"), true)).unwrap();
        assert_eq!(t.bound.as_deref(), Some("pv-a"));
        let mut t = Tracked {
            pv: Some("pv-a".into()),
            ..tracked("10")
        };
        assert_eq!(
            check(&mut t, "", &state("u1", "11", None, Some("pv-b"), true)).unwrap_err(),
            "binding volumes: pvc \"c\" was bound to pv \"pv-b\", not \"pv-a\""
        );
    }

    #[test]
    fn events_older_than_the_patch_are_ignored() {
        let mut t = tracked("10");
        // Before the patch the claim had no annotation, or another incarnation existed.
        check(&mut t, "n1", &state("u1", "9", None, None, false)).unwrap();
        check(&mut t, "n1", &state("u0", "5", None, None, false)).unwrap();
        check(&mut t, "n1", &Observed::Gone(Some("u0".into()))).unwrap();
        assert_eq!(t.bound, None);
    }

    #[test]
    fn reset_annotation_deletion_and_replacement_fail() {
        let mut t = tracked("10");
        assert_eq!(
            check(&mut t, "n1", &state("u1", "11", None, None, false)).unwrap_err(),
            "binding volumes: selectedNode annotation reset for PVC \"c\""
        );
        let mut t = tracked("10");
        assert_eq!(
            check(&mut t, "n1", &state("u1", "11", Some("n2"), None, false)).unwrap_err(),
            "binding volumes: provisioning failed for PVC \"c\""
        );
        let gone = "binding volumes: failed to check provisioning pvc: could not find \
                    v1.PersistentVolumeClaim \"ns/c\"";
        let mut t = tracked("10");
        assert_eq!(
            check(&mut t, "n1", &Observed::Gone(Some("u1".into()))).unwrap_err(),
            gone
        );
        assert_eq!(
            check(&mut t, "n1", &Observed::Gone(None)).unwrap_err(),
            gone
        );
        assert_eq!(
            check(&mut t, "n1", &state("u2", "12", None, None, false)).unwrap_err(),
            gone
        );
    }

    #[test]
    fn opaque_resource_versions_wait_for_our_annotation_first() {
        let mut t = tracked("abc");
        // Unknown order: an unannotated state may predate the patch.
        check(&mut t, "n1", &state("u1", "xyz", None, None, false)).unwrap();
        check(&mut t, "n1", &state("u1", "xyz", Some("n1"), None, false)).unwrap();
        assert!(t.seen_ours);
        // After ours was seen, a reset is a reset.
        assert!(check(&mut t, "n1", &state("u1", "xyz", None, None, false)).is_err());
    }

    #[test]
    fn the_registry_routes_events_and_relists_to_waiters() {
        let claims = Claims::new();
        let pvc = |name: &str, uid: &str| -> PersistentVolumeClaim {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": "3"}
            }))
            .unwrap()
        };
        claims.observe(&pvc("a", "u")); // nobody waits: nothing happens
        let mut reg = claims.register(vec![("ns".into(), "a".into()), ("ns".into(), "b".into())]);
        claims.observe(&pvc("a", "u"));
        claims.observe(&pvc("other", "x"));
        claims.deleted(&pvc("b", "ub"));
        claims.relisted([("ns", "a")]);
        let (i, o) = reg.rx.try_recv().unwrap();
        assert!(i == 0 && matches!(o, Observed::Present(ref s) if s.uid == "u"));
        assert_eq!(
            reg.rx.try_recv().unwrap(),
            (1, Observed::Gone(Some("ub".into())))
        );
        assert_eq!(reg.rx.try_recv().unwrap(), (1, Observed::Gone(None)));
        assert!(reg.rx.try_recv().is_err());
        drop(reg);
        assert_eq!(claims.waiting.load(Ordering::Acquire), 0);
        assert!(claims.lock().is_empty());
    }
}
