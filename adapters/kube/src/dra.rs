//! PreBind for ResourceClaims (kube-scheduler's DynamicResources `PreBind`, `bindClaim`, and
//! `Unreserve`): before a pod with claims is bound, each claim the engine allocated for it
//! (`BindIntent::devices`) gets the allocation written and the pod added to its
//! `status.reservedFor`; a claim allocated already only gets the reservation.
//!
//! For a claim to allocate (`devices: Some`), as `bindClaim` does:
//! 1. A claim being deleted, or allocated meanwhile by someone else, fails the bind
//!    (`claim ns/c got deleted in the meantime`, `… got allocated elsewhere in the meantime`).
//! 2. The finalizer `resource.kubernetes.io/delete-protection` is added (a write of the claim
//!    itself; kept when it is there already).
//! 3. `status.allocation` (`devices.results` `{request, driver, pool, device, adminAccess}`, and
//!    for a share of a device that allows multiple allocations `shareID` and `consumedCapacity`; the
//!    `devices.config` of the classes and the claim as kube-scheduler's allocator copies them,
//!    and the engine's `nodeSelector`: the node by `metadata.name` when a device is local to it,
//!    the slices' selectors otherwise, none for devices every node reaches) and the pod's entry in
//!    `status.reservedFor` (`{resource: pods, name, uid}`) are written in one status write.
//!
//! A claim allocated already (`devices: None`) gets only step 3's reservation, unless it is
//! reserved for the pod already (PreBind skips such claims). When that allocation is another
//! of this scheduler's binds still being written (the engine counts a decided allocation at
//! once, where kube-scheduler keeps such pods waiting while the claim's allocation is in
//! flight), the bind waits for the claim watch (or that bind's answer) to show it, at most the
//! API call timeout.
//!
//! Every write carries the `resourceVersion` it was decided on (optimistic concurrency). A
//! conflict is retried on the claim read afresh, as `retry.RetryOnConflict(retry.DefaultRetry,
//! …)` does (five attempts, 10 ms apart), so a benign change (another pod reserving a shared
//! claim) costs a retry and a real one (allocated elsewhere) fails the bind. Any failure is the
//! PreBind failure the engine backs the pod off with (its devices released), with upstream's
//! texts (`add allocation and reservation to claim ns/c: …`).
//!
//! **Unreserve.** When the bind does not go through after claims were written (a later claim's
//! or the binding's failure, or the pod gone), every claim this bind reserved loses the pod's
//! entry, as upstream's Unreserve does. Unlike upstream, a claim whose allocation this bind
//! wrote and that nobody else reserved meanwhile is also deallocated (its allocation and the
//! finalizer removed): kube-scheduler leaves it allocated and deallocates it in PostFilter when
//! the pod cannot use it, which Magma does not do, so a claim left allocated would pin its pod
//! to the node it failed on. A pod already bound (409) is not unreserved.
//!
//! **No GET on the hot path.** The claim watch keeps what PreBind reads of each claim
//! ([`ResourceClaims`]: UID, resourceVersion, finalizers, reservations, allocation, and the
//! request structure and configs of its spec), and the DeviceClass watch each class's
//! `config`, so the first attempt writes at once; the claim is read (GET) only after a
//! conflict, or when the watch has not shown it yet. Writes go through the bind client and its
//! rate limit.
//!
//! Differences from kube-scheduler besides Unreserve: the node selector always names the node,
//! also for devices every node (or a node selector) reaches, where upstream's allocator writes
//! none or the devices' selector; `allocationTimestamp` and binding conditions are not written
//! (their features are off).

use crate::apicall::{Caller, api_message};
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceClaimConfiguration, DeviceClass, DeviceClassConfiguration, DeviceRequestAllocationResult,
    ResourceClaim, ResourceClaimConsumerReference,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use magma_engine::dra::extended::{EXTENDED_CLAIM_ANNOTATION, NewClaim};
use magma_engine::dra::{AllocatedInput, ClaimAllocation};
use magma_engine::model::SelectorTermInput;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The finalizer kube-scheduler puts on a claim it allocates (`resourceapi.Finalizer`).
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// Attempts per claim write on conflicts (`retry.DefaultRetry.Steps`).
const ATTEMPTS: usize = 5;
/// Wait between them (`retry.DefaultRetry.Duration`).
const RETRY_AFTER: Duration = Duration::from_millis(10);

/// A claim's request: its name, the class of `exactly`, and the `firstAvailable` entries
/// (name, class).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestShape {
    pub name: String,
    pub class: Option<String>,
    pub subrequests: Vec<(String, String)>,
}

/// What PreBind reads of a claim (from the watch, a GET, or a write's answer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimState {
    pub uid: String,
    pub resource_version: Option<String>,
    pub finalizers: Vec<String>,
    pub reserved_for: Vec<ResourceClaimConsumerReference>,
    pub allocation: Option<AllocationResult>,
    pub deleting: bool,
    /// `spec.devices.requests` (immutable), for the allocation's configs.
    pub requests: Arc<[RequestShape]>,
    /// `spec.devices.config`.
    pub config: Arc<[DeviceClaimConfiguration]>,
}

impl ClaimState {
    pub fn of(c: &ResourceClaim) -> ClaimState {
        let devices = c.spec.devices.as_ref();
        let status = c.status.as_ref();
        ClaimState {
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: c.metadata.resource_version.clone(),
            finalizers: c.metadata.finalizers.clone().unwrap_or_default(),
            reserved_for: status
                .and_then(|s| s.reserved_for.clone())
                .unwrap_or_default(),
            allocation: status.and_then(|s| s.allocation.clone()),
            deleting: c.metadata.deletion_timestamp.is_some(),
            requests: devices
                .and_then(|d| d.requests.as_ref())
                .into_iter()
                .flatten()
                .map(|r| RequestShape {
                    name: r.name.clone(),
                    class: r.exactly.as_ref().map(|e| e.device_class_name.clone()),
                    subrequests: r
                        .first_available
                        .iter()
                        .flatten()
                        .map(|s| (s.name.clone(), s.device_class_name.clone()))
                        .collect(),
                })
                .collect(),
            config: devices
                .and_then(|d| d.config.clone())
                .unwrap_or_default()
                .into(),
        }
    }

    fn reserved_for_pod(&self, pod_uid: &str) -> bool {
        self.reserved_for.iter().any(|r| r.uid == pod_uid)
    }
}

fn newer(a: Option<&str>, than: Option<&str>) -> bool {
    match (a, than) {
        (Some(a), Some(b)) => magma_engine::shard::resource_version_order(a, b)
            .is_some_and(|o| o == std::cmp::Ordering::Greater),
        (Some(_), None) => true,
        _ => false,
    }
}

type Key = (String, String);

/// The claims and class configs PreBind reads, kept by the ResourceClaim and DeviceClass
/// watches (see the module doc).
#[derive(Debug)]
pub struct ResourceClaims {
    claims: Mutex<HashMap<Key, Arc<ClaimState>>>,
    /// Classes with a `config` (the others need no entry).
    classes: Mutex<HashMap<String, Arc<[DeviceClassConfiguration]>>>,
    /// Bumped on every claim change (for binds waiting for another bind's allocation).
    changed: tokio::sync::watch::Sender<u64>,
    /// Claims as our writes were answered, for the engine ahead of the watch
    /// ([`ResourceClaims::take_echoes`]).
    echoes: Mutex<Vec<magma_engine::dra::ClaimInput>>,
}

impl Default for ResourceClaims {
    fn default() -> Self {
        ResourceClaims {
            claims: Mutex::default(),
            classes: Mutex::default(),
            changed: tokio::sync::watch::channel(0).0,
            echoes: Mutex::default(),
        }
    }
}

fn key_of(c: &ResourceClaim) -> Option<Key> {
    Some((
        c.metadata.namespace.clone().filter(|n| !n.is_empty())?,
        c.metadata.name.clone().filter(|n| !n.is_empty())?,
    ))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ResourceClaims {
    /// A write of ours was answered with `updated`: our view takes it, and the engine will be
    /// shown it before the bind's outcome (so it never frees devices the server still gives a
    /// claim, nor gives them again, while the watch lags behind our writes).
    fn wrote(&self, updated: &ResourceClaim) {
        if let (Some((ns, name)), Some((input, _))) =
            (key_of(updated), crate::convert::dra::claim_input(updated))
        {
            self.offer(&ns, &name, &ClaimState::of(updated));
            lock(&self.echoes).push(input);
        }
    }

    /// A claim we deleted: our earlier answers for it are not shown to the engine (they could
    /// reach it after the watch's deletion and bring the claim back).
    fn forget(&self, namespace: &str, name: &str) {
        lock(&self.echoes).retain(|c| c.namespace != namespace || c.name != name);
    }

    /// The claims our writes answered since the last call, oldest first.
    pub fn take_echoes(&self) -> Vec<magma_engine::dra::ClaimInput> {
        std::mem::take(&mut *lock(&self.echoes))
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// A claim was added or changed (the watch's events come in order; one older than what
    /// a write of ours answered is not taken).
    pub fn put(&self, namespace: String, name: String, s: ClaimState) {
        let mut claims = lock(&self.claims);
        let k = (namespace, name);
        let stale = claims
            .get(&k)
            .is_some_and(|o| newer(o.resource_version.as_deref(), s.resource_version.as_deref()));
        if !stale {
            claims.insert(k, Arc::new(s));
            drop(claims);
            self.bump();
        }
    }

    /// A claim was deleted.
    pub fn deleted(&self, c: &ResourceClaim) {
        if let Some(k) = key_of(c) {
            lock(&self.claims).remove(&k);
            self.bump();
        }
    }

    /// A relist: exactly these claims exist.
    pub fn relisted(&self, all: Vec<(Key, ClaimState)>) {
        *lock(&self.claims) = all.into_iter().map(|(k, s)| (k, Arc::new(s))).collect();
        self.bump();
    }

    /// A write's answer: kept when it is newer than what the watch showed.
    fn offer(&self, namespace: &str, name: &str, s: &ClaimState) {
        let mut claims = lock(&self.claims);
        let k = (namespace.to_owned(), name.to_owned());
        let fresher = claims
            .get(&k)
            .is_none_or(|o| newer(s.resource_version.as_deref(), o.resource_version.as_deref()));
        if fresher {
            claims.insert(k, Arc::new(s.clone()));
            drop(claims);
            self.bump();
        }
    }

    /// Wait until the claim `uid` shows an allocation, at most `timeout`: the engine decided a
    /// pod on a claim whose allocation another of its binds is writing. `None`: the claim is
    /// gone, replaced, or not allocated in time.
    async fn allocated(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        timeout: Duration,
    ) -> Option<ClaimState> {
        let mut rx = self.changed.subscribe();
        let wait = async {
            loop {
                match self.get(namespace, name) {
                    Some(s) if s.uid == uid && s.allocation.is_some() => {
                        return Some((*s).clone());
                    }
                    Some(s) if s.uid != uid || s.deleting => return None,
                    None => return None,
                    Some(_) => {}
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ClaimState>> {
        lock(&self.claims)
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// A DeviceClass was added or changed: its `config`.
    pub fn put_class(&self, name: String, config: Vec<DeviceClassConfiguration>) {
        let mut classes = lock(&self.classes);
        if config.is_empty() {
            classes.remove(&name);
        } else {
            classes.insert(name, config.into());
        }
    }

    pub fn class_deleted(&self, c: &DeviceClass) {
        if let Some(name) = &c.metadata.name {
            lock(&self.classes).remove(name);
        }
    }

    /// A relist of the classes: (name, config) of each.
    pub fn classes_relisted(&self, all: Vec<(String, Vec<DeviceClassConfiguration>)>) {
        *lock(&self.classes) = all
            .into_iter()
            .filter(|(_, c)| !c.is_empty())
            .map(|(n, c)| (n, c.into()))
            .collect();
    }

    fn class_config(&self, class: &str) -> Option<Arc<[DeviceClassConfiguration]>> {
        lock(&self.classes).get(class).cloned()
    }
}

/// The pod a PreBind writes for.
#[derive(Debug, Clone, Copy)]
pub struct PodRef<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// What one bind wrote to one claim (for Unreserve).
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub namespace: String,
    pub name: String,
    /// The pod was added to `reservedFor`.
    pub reserved: bool,
    /// The allocation this bind wrote.
    pub allocation: Option<AllocationResult>,
    /// The claim as the last write answered.
    pub state: ClaimState,
    /// This bind created the claim (for the pod's extended resources): Unreserve deletes it.
    pub created: bool,
}

/// `status.allocation` for `devices` with `node_selector` (the engine's): the results, the configs kube-scheduler's
/// allocator copies (each class's `config` once, naming every request that used the class,
/// then the claim's configs that apply to an allocated request or subrequest), and the node
/// selector.
pub fn allocation(
    devices: &[AllocatedInput],
    node_selector: Option<&SelectorTermInput>,
    claim: &ClaimState,
    class_config: impl Fn(&str) -> Option<Arc<[DeviceClassConfiguration]>>,
) -> AllocationResult {
    let results: Vec<DeviceRequestAllocationResult> = devices
        .iter()
        .map(|d| DeviceRequestAllocationResult {
            request: d.request.clone(),
            driver: d.driver.clone(),
            pool: d.pool.clone(),
            device: d.device.clone(),
            admin_access: d.admin_access.then_some(true),
            // A share of a device that allows multiple allocations: a new `shareID` (a UID,
            // as upstream's allocator makes) unless the engine read one, and what it consumes.
            share_id: d.share.as_ref().map(|s| {
                s.id.clone()
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
            }),
            consumed_capacity: d.share.as_ref().map(|s| {
                s.consumed
                    .iter()
                    .map(|(k, q)| (k.clone(), Quantity(q.clone())))
                    .collect()
            }),
            ..Default::default()
        })
        .collect();
    // Per request: the name it was allocated under and its class (for `firstAvailable`, the
    // subrequest the allocation used; the first when none shows).
    let chosen: Vec<(String, Option<String>, Option<String>)> = claim
        .requests
        .iter()
        .map(|r| {
            if r.subrequests.is_empty() {
                return (r.name.clone(), r.class.clone(), None);
            }
            let picked = devices
                .iter()
                .find_map(|d| {
                    let (req, sub) = d.request.split_once('/')?;
                    (req == r.name).then_some(sub)
                })
                .and_then(|sub| r.subrequests.iter().find(|(n, _)| n == sub))
                .or_else(|| r.subrequests.first());
            match picked {
                Some((sub, class)) => (
                    format!("{}/{sub}", r.name),
                    Some(class.clone()),
                    Some(format!("{}/{sub}", r.name)),
                ),
                None => (r.name.clone(), None, None),
            }
        })
        .collect();
    let mut config: Vec<DeviceAllocationConfiguration> = Vec::new();
    let mut class_ranges: HashMap<String, (usize, usize)> = HashMap::new();
    for (request_name, class, _) in &chosen {
        let Some(class) = class else { continue };
        if let Some(&(start, end)) = class_ranges.get(class) {
            for c in &mut config[start..end] {
                c.requests
                    .get_or_insert_default()
                    .push(request_name.clone());
            }
            continue;
        }
        let start = config.len();
        for c in class_config(class).iter().flat_map(|c| c.iter()) {
            config.push(DeviceAllocationConfiguration {
                source: "FromClass".into(),
                requests: Some(vec![request_name.clone()]),
                opaque: c.opaque.clone(),
            });
        }
        class_ranges.insert(class.clone(), (start, config.len()));
    }
    for c in claim.config.iter() {
        let of_claim = || DeviceAllocationConfiguration {
            source: "FromClaim".into(),
            requests: c.requests.clone(),
            opaque: c.opaque.clone(),
        };
        let names = c.requests.as_deref().unwrap_or_default();
        if names.is_empty() {
            config.push(of_claim());
            continue;
        }
        for (r, (_, _, sub)) in claim.requests.iter().zip(&chosen) {
            if names.contains(&r.name) || sub.as_ref().is_some_and(|s| names.contains(s)) {
                config.push(of_claim());
            }
        }
    }
    AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: (!config.is_empty()).then_some(config),
        }),
        node_selector: node_selector.map(|t| NodeSelector {
            node_selector_terms: vec![crate::convert::api_term(t)],
        }),
        allocation_timestamp: None,
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// An API call's outcome: a conflict (retry on a fresh read) or another error.
enum Failure {
    Conflict(String),
    Other(String),
}

async fn write(
    ctx: &Caller,
    f: impl std::future::Future<Output = Result<ResourceClaim, kube::Error>>,
) -> Result<ResourceClaim, Failure> {
    match ctx.call(f).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) if is_conflict(&e) => Err(Failure::Conflict(api_message(&e))),
        Ok(Err(e)) => Err(Failure::Other(api_message(&e))),
        Err(timeout) => Err(Failure::Other(timeout)),
    }
}

fn consumer(pod: PodRef<'_>) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: "pods".into(),
        name: pod.name.to_owned(),
        uid: pod.uid.to_owned(),
    }
}

/// Write one claim's allocation (if any) and the pod's reservation (`bindClaim`). What was
/// written is pushed to `written` as soon as it is, so a later failure can be undone.
async fn bind_claim(
    ctx: &Caller,
    claims: &ResourceClaims,
    pod: PodRef<'_>,
    c: &ClaimAllocation,
    written: &mut Vec<Written>,
) -> Result<(), String> {
    let (ns, name) = (&*c.namespace, &*c.name);
    let api: Api<ResourceClaim> = Api::namespaced(ctx.client.clone(), ns);
    let mut state = claims
        .get(ns, name)
        .filter(|s| s.uid == *c.uid)
        .map(|s| (*s).clone());
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
        }
        // Whether `s` was just read: the watch's view may lag behind, so a claim it shows
        // deleted or allocated is read afresh before the bind fails for it.
        let (mut s, fresh) = match state.take() {
            Some(s) => (s, false),
            None => {
                let got = read(ctx, &api, name).await.map_err(|e| {
                    let after = if attempt == 0 { "" } else { " after conflict" };
                    format!("get claim {ns}/{name}{after}: {e}")
                })?;
                let got =
                    got.ok_or_else(|| format!("claim {ns}/{name} got deleted in the meantime"))?;
                (got, true)
            }
        };
        let gone = s.uid != *c.uid || s.deleting;
        let taken = c.devices.is_some() && s.allocation.is_some() && !s.reserved_for_pod(pod.uid);
        if (gone || taken) && !fresh {
            last = format!("claim {ns}/{name} changed in the meantime");
            continue;
        }
        if gone {
            return Err(format!("claim {ns}/{name} got deleted in the meantime"));
        }
        if s.reserved_for_pod(pod.uid) {
            // Reserved by an earlier attempt whose Unreserve did not land: it counts only if
            // the allocation is the one this decision made (the same devices, so the node).
            match (&c.devices, &s.allocation) {
                (Some(d), Some(a)) if !same_devices(a, d) => {
                    if !fresh {
                        last = format!("claim {ns}/{name} changed in the meantime");
                        continue;
                    }
                    return Err(format!(
                        "claim {ns}/{name} got allocated elsewhere in the meantime"
                    ));
                }
                (Some(_), None) => {}
                _ => return Ok(()),
            }
        }
        if c.devices.is_none() && s.allocation.is_none() {
            // Allocated by another bind of ours whose write has not landed yet.
            s = claims
                .allocated(ns, name, &c.uid, ctx.call_timeout)
                .await
                .ok_or_else(|| {
                    format!(
                        "claim {ns}/{name} is not allocated (the allocation another pod's \
                         bind was writing did not land)"
                    )
                })?;
            if s.reserved_for_pod(pod.uid) {
                return Ok(());
            }
        }
        let mut alloc = None;
        if let Some(devices) = &c.devices {
            if s.allocation.is_some() {
                return Err(format!(
                    "claim {ns}/{name} got allocated elsewhere in the meantime"
                ));
            }
            if !s
                .finalizers
                .iter()
                .any(|f| f == DELETE_PROTECTION_FINALIZER)
            {
                let mut finalizers = s.finalizers.clone();
                finalizers.push(DELETE_PROTECTION_FINALIZER.into());
                let patch = json!({"metadata": {
                    "resourceVersion": s.resource_version, "finalizers": finalizers}});
                match write(
                    ctx,
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await
                {
                    Ok(updated) => {
                        claims.wrote(&updated);
                        s = ClaimState::of(&updated);
                    }
                    Err(Failure::Conflict(e)) => {
                        last = format!("add finalizer to claim {ns}/{name}: {e}");
                        continue;
                    }
                    Err(Failure::Other(e)) => {
                        return Err(format!("add finalizer to claim {ns}/{name}: {e}"));
                    }
                }
            }
            alloc = Some(allocation(devices, c.node_selector.as_ref(), &s, |class| {
                claims.class_config(class)
            }));
        }
        let mut reserved = s.reserved_for.clone();
        if !s.reserved_for_pod(pod.uid) {
            reserved.push(consumer(pod));
        }
        let mut status = json!({"reservedFor": reserved});
        if let Some(a) = &alloc {
            status["allocation"] = serde_json::to_value(a).expect("an allocation serializes");
        }
        let patch = json!({"metadata": {"resourceVersion": s.resource_version}, "status": status});
        let what = if alloc.is_some() {
            "add allocation and reservation to claim"
        } else {
            "add reservation to claim"
        };
        match write(
            ctx,
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(updated) => {
                claims.wrote(&updated);
                let s = ClaimState::of(&updated);
                written.push(Written {
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                    reserved: true,
                    allocation: alloc,
                    state: s,
                    created: false,
                });
                return Ok(());
            }
            Err(Failure::Conflict(e)) => last = format!("{what} {ns}/{name}: {e}"),
            Err(Failure::Other(e)) => return Err(format!("{what} {ns}/{name}: {e}")),
        }
    }
    Err(last)
}

/// PreBind of the claims `devices` for `pod`. On failure, the claims written so far
/// are unreserved (and the claim made for its extended resources deleted) before the error is
/// returned.
pub async fn bind_claims(
    ctx: &Caller,
    claims: &ResourceClaims,
    pod: PodRef<'_>,
    devices: &[ClaimAllocation],
) -> Result<Vec<Written>, String> {
    let mut written = Vec::new();
    for c in devices {
        let done = match &c.create {
            None => bind_claim(ctx, claims, pod, c, &mut written).await,
            Some(new) => bind_extended(ctx, claims, pod, c, new, &mut written).await,
        };
        if let Err(e) = done {
            unreserve(ctx, claims, pod, &written).await;
            return Err(e);
        }
    }
    Ok(written)
}

/// The claim for the pod's extended resources backed by DRA, as upstream's PreBind creates it
/// (`createExtendedResourceClaimInAPI`): `generateName` `<pod>-extended-resources-`, owned by
/// the pod (controller), annotated `resource.kubernetes.io/extended-resource-claim: "true"`, one
/// `ExactCount` request per container and resource.
pub fn extended_claim(pod: PodRef<'_>, new: &NewClaim) -> Value {
    let requests: Vec<Value> = new
        .requests
        .iter()
        .map(|r| {
            json!({"name": &*r.name, "exactly": {
                "deviceClassName": &*r.class, "allocationMode": "ExactCount", "count": r.count}})
        })
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{}-extended-resources-", pod.name),
            "namespace": pod.namespace,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name,
                "uid": pod.uid, "controller": true}],
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
        },
        "spec": {"devices": {"requests": requests}},
    })
}

/// `status.extendedResourceClaimStatus` naming the claim `claim` made for the pod.
pub fn extended_status(claim: &str, new: &NewClaim) -> Value {
    let mappings: Vec<Value> = new
        .mappings
        .iter()
        .map(|m| {
            json!({"containerName": &*m.container, "resourceName": &*m.resource_name,
                "requestName": &*m.request})
        })
        .collect();
    json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": claim}}})
}

/// PreBind of the claim for the pod's extended resources: created, then allocated and reserved
/// as any claim (`bind_claim`), then named in the pod's status with its request mappings
/// (`patchPodExtendedResourceClaimStatus`). Created is recorded at once, so any later failure
/// deletes it (Unreserve).
async fn bind_extended(
    ctx: &Caller,
    claims: &ResourceClaims,
    pod: PodRef<'_>,
    c: &ClaimAllocation,
    new: &NewClaim,
    written: &mut Vec<Written>,
) -> Result<(), String> {
    let api: Api<ResourceClaim> = Api::namespaced(ctx.client.clone(), pod.namespace);
    let body: ResourceClaim = serde_json::from_value(extended_claim(pod, new))
        .map_err(|e| format!("create claim for extended resources: {e}"))?;
    let created = match ctx.call(api.create(&PostParams::default(), &body)).await {
        Ok(Ok(created)) => created,
        Ok(Err(e)) => {
            return Err(format!(
                "create claim for extended resources {}/<generated>: {}",
                pod.namespace,
                api_message(&e)
            ));
        }
        Err(timeout) => return Err(format!("create claim for extended resources: {timeout}")),
    };
    claims.wrote(&created);
    let state = ClaimState::of(&created);
    let name = created.metadata.name.clone().unwrap_or_default();
    written.push(Written {
        namespace: pod.namespace.to_owned(),
        name: name.clone(),
        reserved: false,
        allocation: None,
        state: state.clone(),
        created: true,
    });
    let real = ClaimAllocation {
        name: Arc::from(name.as_str()),
        uid: Arc::from(state.uid.as_str()),
        create: None,
        ..c.clone()
    };
    bind_claim(ctx, claims, pod, &real, written).await?;
    let pods: Api<k8s_openapi::api::core::v1::Pod> =
        Api::namespaced(ctx.client.clone(), pod.namespace);
    let patch = extended_status(&name, new);
    match ctx
        .call(pods.patch_status(pod.name, &PatchParams::default(), &Patch::Merge(&patch)))
        .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!(
            "update pod {}/{} ExtendedResourceClaimStatus: {}",
            pod.namespace,
            pod.name,
            api_message(&e)
        )),
        Err(timeout) => Err(format!(
            "update pod {}/{} ExtendedResourceClaimStatus: {timeout}",
            pod.namespace, pod.name
        )),
    }
}

/// Delete a claim this scheduler made for a pod's extended resources (upstream's
/// `deleteClaim`): the finalizer `resource.kubernetes.io/delete-protection` removed first, then
/// deleted on the condition that it is still that claim (UID). Gone already is done. `claims`:
/// PreBind's view, read first and told of the deletion; without it the claim is read afresh.
pub async fn delete_claim(
    ctx: &Caller,
    claims: Option<&ResourceClaims>,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<(), String> {
    let api: Api<ResourceClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let mut s = claims
        .and_then(|c| c.get(namespace, name))
        .filter(|s| s.uid == uid)
        .map(|s| (*s).clone());
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
        }
        let cur = match s.take() {
            Some(c) => c,
            None => match read(ctx, &api, name).await? {
                Some(c) if c.uid == uid => c,
                _ => return Ok(()),
            },
        };
        if !cur
            .finalizers
            .iter()
            .any(|f| f == DELETE_PROTECTION_FINALIZER)
        {
            break;
        }
        let rest: Vec<&String> = cur
            .finalizers
            .iter()
            .filter(|f| *f != DELETE_PROTECTION_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"uid": uid, "resourceVersion": cur.resource_version,
            "finalizers": if rest.is_empty() { Value::Null } else { json!(rest) }}});
        match write(
            ctx,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(_) => break,
            Err(Failure::Conflict(_)) if attempt + 1 < ATTEMPTS => {}
            Err(Failure::Conflict(e) | Failure::Other(e)) => {
                return Err(format!("update resourceclaim {namespace}/{name}: {e}"));
            }
        }
    }
    // Whatever our writes answered for it is not the claim's last word any more.
    if let Some(claims) = claims {
        claims.forget(namespace, name);
    }
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match ctx.call(api.delete(name, &params)).await? {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(format!(
            "delete resourceclaim {namespace}/{name}: {}",
            api_message(&e)
        )),
    }
}

/// Does the allocation `a` give exactly `devices` (request, driver, pool, device)?
fn same_devices(a: &AllocationResult, devices: &[AllocatedInput]) -> bool {
    let mut have: Vec<(&str, &str, &str, &str)> = a
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| (&*r.request, &*r.driver, &*r.pool, &*r.device))
        .collect();
    let mut want: Vec<(&str, &str, &str, &str)> = devices
        .iter()
        .map(|d| (&*d.request, &*d.driver, &*d.pool, &*d.device))
        .collect();
    have.sort_unstable();
    want.sort_unstable();
    have == want
}

fn same_results(a: Option<&AllocationResult>, b: Option<&AllocationResult>) -> bool {
    let results = |x: Option<&AllocationResult>| {
        x.and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
    };
    results(a) == results(b)
}

/// Unreserve: take the pod out of every claim this bind reserved; deallocate a claim whose
/// allocation it wrote when nobody else reserved it (see the module doc). Failures are only
/// logged (the claim watch shows the engine what stays).
pub async fn unreserve(
    ctx: &Caller,
    claims: &ResourceClaims,
    pod: PodRef<'_>,
    written: &[Written],
) {
    let created = |w: &Written| {
        written
            .iter()
            .any(|c| c.created && c.namespace == w.namespace && c.name == w.name)
    };
    for w in written.iter().filter(|w| w.reserved && !created(w)) {
        if let Err(e) = unreserve_claim(ctx, claims, pod, w).await {
            tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name),
                claim = %format!("{}/{}", w.namespace, w.name), error = %e, "unreserve failed");
        }
    }
    // The claim made for the pod's extended resources goes with the attempt (upstream's
    // `unreserveExtendedResourceClaim`).
    for w in written.iter().filter(|w| w.created) {
        if let Err(e) = delete_claim(ctx, Some(claims), &w.namespace, &w.name, &w.state.uid).await {
            tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name),
                claim = %format!("{}/{}", w.namespace, w.name), error = %e,
                "deleting the claim made for extended resources failed");
        }
    }
}

/// Read a claim afresh; `None` when it is gone.
async fn read(
    ctx: &Caller,
    api: &Api<ResourceClaim>,
    name: &str,
) -> Result<Option<ClaimState>, String> {
    match ctx.call(api.get(name)).await? {
        Ok(c) => Ok(Some(ClaimState::of(&c))),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(api_message(&e)),
    }
}

async fn unreserve_claim(
    ctx: &Caller,
    claims: &ResourceClaims,
    pod: PodRef<'_>,
    w: &Written,
) -> Result<(), String> {
    let (ns, name) = (w.namespace.as_str(), w.name.as_str());
    let api: Api<ResourceClaim> = Api::namespaced(ctx.client.clone(), ns);
    let fresh = |s: Option<ClaimState>| s.filter(|s| s.uid == w.state.uid);
    // 1. The pod's reservation, and the allocation when it is ours and nobody else's.
    let mut s = w.state.clone();
    let mut deallocated = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
            let got = read(ctx, &api, name).await;
            match fresh(got.map_err(|e| format!("get claim {ns}/{name}: {e}"))?) {
                Some(got) => s = got,
                None => return Ok(()),
            }
        }
        if !s.reserved_for_pod(pod.uid) {
            deallocated = Some(false);
            break;
        }
        let rest: Vec<_> = s
            .reserved_for
            .iter()
            .filter(|r| r.uid != pod.uid)
            .cloned()
            .collect();
        let ours =
            w.allocation.is_some() && same_results(s.allocation.as_ref(), w.allocation.as_ref());
        let dealloc = ours && rest.is_empty();
        let mut status =
            json!({"reservedFor": if rest.is_empty() { Value::Null } else { json!(rest) }});
        if dealloc {
            status["allocation"] = Value::Null;
        }
        let patch = json!({"metadata": {"resourceVersion": s.resource_version}, "status": status});
        let what = format!("remove reservation from claim {ns}/{name}");
        match write(
            ctx,
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(updated) => {
                claims.wrote(&updated);
                s = ClaimState::of(&updated);
                deallocated = Some(dealloc);
                break;
            }
            Err(Failure::Conflict(e)) if attempt + 1 < ATTEMPTS => {
                tracing::debug!(claim = %format!("{ns}/{name}"), error = %e, "unreserve conflict; retrying");
            }
            Err(Failure::Conflict(e) | Failure::Other(e)) => return Err(format!("{what}: {e}")),
        }
    }
    if deallocated != Some(true) {
        return Ok(());
    }
    // 2. The allocation is gone: so is the reason for the finalizer.
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(RETRY_AFTER).await;
            let got = read(ctx, &api, name).await;
            match fresh(got.map_err(|e| format!("get claim {ns}/{name}: {e}"))?) {
                Some(got) => s = got,
                None => return Ok(()),
            }
        }
        if s.allocation.is_some()
            || !s
                .finalizers
                .iter()
                .any(|f| f == DELETE_PROTECTION_FINALIZER)
        {
            return Ok(());
        }
        let rest: Vec<&String> = s
            .finalizers
            .iter()
            .filter(|f| *f != DELETE_PROTECTION_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"resourceVersion": s.resource_version,
            "finalizers": if rest.is_empty() { Value::Null } else { json!(rest) }}});
        match write(
            ctx,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(updated) => {
                claims.wrote(&updated);
                return Ok(());
            }
            Err(Failure::Conflict(_)) if attempt + 1 < ATTEMPTS => {}
            Err(Failure::Conflict(e) | Failure::Other(e)) => {
                return Err(format!("remove finalizer from claim {ns}/{name}: {e}"));
            }
        }
    }
    Ok(())
}

/// DynamicResources PostFilter's deallocation (`Intent::Deallocate`): the claim's
/// `status.allocation` and `status.reservedFor` cleared, on the condition that the claim is
/// still at the version the engine saw (a merge patch naming `metadata.resourceVersion`; the
/// server answers a changed claim with a conflict, and that change reaches the engine and its
/// pod through the watch anyway). The finalizer stays; the resource-claim controller removes it
/// once the claim is deallocated.
///
/// The claim an earlier attempt made for the pod's extended resources (`delete`) is deleted
/// instead (`delete_claim`, read afresh: the watch shows the engine the outcome).
pub async fn deallocate(ctx: &Caller, d: &magma_engine::dra::Deallocation) -> Result<(), String> {
    if d.delete {
        return delete_claim(ctx, None, &d.namespace, &d.name, &d.uid).await;
    }
    let api: Api<ResourceClaim> = Api::namespaced(ctx.client.clone(), &d.namespace);
    let body = json!({
        "metadata": {"uid": &*d.uid, "resourceVersion": &*d.resource_version},
        "status": {"allocation": null, "reservedFor": null},
    });
    let (params, patch) = (PatchParams::default(), Patch::Merge(&body));
    match write(ctx, api.patch_status(&d.name, &params, &patch)).await {
        Ok(_) => Ok(()),
        Err(Failure::Conflict(e) | Failure::Other(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_state(v: Value) -> ClaimState {
        ClaimState::of(&serde_json::from_value(v).unwrap())
    }

    fn dev(request: &str, device: &str) -> AllocatedInput {
        AllocatedInput {
            request: request.into(),
            driver: "gpu.example.com".into(),
            pool: "n1".into(),
            device: device.into(),
            admin_access: false,
            share: None,
        }
    }

    fn on_n1() -> SelectorTermInput {
        magma_engine::dra::devices::node_name_term("n1")
    }

    /// The engine's node selector is written as it is: a slice's label selector (an `Exists`
    /// requirement has no `values`), or none for devices every node reaches.
    #[test]
    fn the_allocation_carries_the_engines_node_selector() {
        let s = claim_state(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "5"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
        }));
        let everywhere = allocation(&[dev("gpu", "gpu-0")], None, &s, |_| None);
        assert_eq!(
            serde_json::to_value(&everywhere)
                .unwrap()
                .get("nodeSelector"),
            None
        );
        let rack = SelectorTermInput {
            match_expressions: vec![magma_engine::model::SelectorRequirementInput {
                key: "rack".into(),
                operator: "Exists".into(),
                values: vec![],
            }],
            match_fields: vec![],
        };
        let a = allocation(&[dev("gpu", "gpu-0")], Some(&rack), &s, |_| None);
        assert_eq!(
            serde_json::to_value(&a).unwrap()["nodeSelector"],
            json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Exists"}]}]})
        );
    }

    #[test]
    fn the_allocation_names_the_node_and_the_devices() {
        let s = claim_state(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "5"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
        }));
        let mut admin = dev("gpu", "gpu-1");
        admin.admin_access = true;
        let a = allocation(&[dev("gpu", "gpu-0"), admin], Some(&on_n1()), &s, |_| None);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({
                "devices": {"results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"},
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-1", "adminAccess": true}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}
            })
        );
    }

    /// A share of a device that allows multiple allocations gets a new `shareID` (a UID, as
    /// upstream's allocator makes) and its `consumedCapacity`; one read back keeps its ID.
    #[test]
    fn shares_get_a_share_id_and_their_consumed_capacity() {
        let s = claim_state(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                "capacity": {"requests": {"memory": "40Gi"}}}}]}}
        }));
        let share = |id: Option<&str>| {
            let mut d = dev("gpu", "shared-0");
            d.share = Some(magma_engine::dra::Share {
                id: id.map(str::to_string),
                consumed: vec![("memory".into(), "40Gi".into())],
            });
            d
        };
        let a = allocation(
            &[share(None), share(Some("kept"))],
            Some(&on_n1()),
            &s,
            |_| None,
        );
        let v = serde_json::to_value(&a).unwrap();
        let results = v["devices"]["results"].as_array().unwrap();
        let id = results[0]["shareID"].as_str().unwrap();
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
        assert_eq!(results[0]["consumedCapacity"], json!({"memory": "40Gi"}));
        assert_eq!(results[1]["shareID"], "kept");
        let plain = allocation(&[dev("gpu", "gpu-0")], Some(&on_n1()), &s, |_| None);
        let v = serde_json::to_value(&plain).unwrap();
        assert!(v["devices"]["results"][0].get("shareID").is_none());
        assert!(v["devices"]["results"][0].get("consumedCapacity").is_none());
    }

    /// kube-scheduler's allocator: each class's configs once, naming every request that used
    /// it (a `firstAvailable` request by the subrequest chosen), then the claim's configs that
    /// apply to an allocated request or subrequest, once per request they name.
    #[test]
    fn configs_are_copied_as_kube_schedulers_allocator_does() {
        let s = claim_state(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
            "spec": {"devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "gpu"}},
                    {"name": "b", "firstAvailable": [
                        {"name": "big", "deviceClassName": "big"},
                        {"name": "small", "deviceClassName": "gpu"}]},
                    {"name": "c", "exactly": {"deviceClassName": "plain"}}],
                "config": [
                    {"opaque": {"driver": "d", "parameters": {"all": true}}},
                    {"requests": ["a", "c"], "opaque": {"driver": "d", "parameters": {"ac": true}}},
                    {"requests": ["b/small"], "opaque": {"driver": "d", "parameters": {"small": true}}},
                    {"requests": ["b/big"], "opaque": {"driver": "d", "parameters": {"big": true}}}]}}
        }));
        let class = |name: &str| -> Option<Arc<[DeviceClassConfiguration]>> {
            (name == "gpu").then(|| {
                vec![
                    serde_json::from_value(
                        json!({"opaque": {"driver": "d", "parameters": {"class": "gpu"}}}),
                    )
                    .unwrap(),
                ]
                .into()
            })
        };
        let a = allocation(
            &[dev("a", "g0"), dev("b/small", "g1"), dev("c", "g2")],
            Some(&on_n1()),
            &s,
            class,
        );
        let config = serde_json::to_value(a.devices.unwrap().config.unwrap()).unwrap();
        assert_eq!(
            config,
            json!([
                {"source": "FromClass", "requests": ["a", "b/small"],
                 "opaque": {"driver": "d", "parameters": {"class": "gpu"}}},
                {"source": "FromClaim", "opaque": {"driver": "d", "parameters": {"all": true}}},
                {"source": "FromClaim", "requests": ["a", "c"], "opaque": {"driver": "d", "parameters": {"ac": true}}},
                {"source": "FromClaim", "requests": ["a", "c"], "opaque": {"driver": "d", "parameters": {"ac": true}}},
                {"source": "FromClaim", "requests": ["b/small"], "opaque": {"driver": "d", "parameters": {"small": true}}},
            ])
        );
    }

    #[test]
    fn the_claim_for_extended_resources_is_upstreams() {
        use magma_engine::dra::extended::{ClaimRequest, Mapping};
        let new = NewClaim {
            requests: vec![ClaimRequest {
                name: "container-0-request-1".into(),
                class: "gpu".into(),
                count: 2,
                resource: 0,
            }],
            mappings: vec![Mapping {
                container: "main".into(),
                resource_name: "example.com/gpu".into(),
                request: "container-0-request-1".into(),
                resource: 0,
            }],
        };
        let pod = PodRef {
            namespace: "ns",
            name: "p",
            uid: "pod-uid",
        };
        let c: ResourceClaim = serde_json::from_value(extended_claim(pod, &new)).unwrap();
        assert_eq!(
            c.metadata.generate_name.as_deref(),
            Some("p-extended-resources-")
        );
        let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (&*owner.kind, &*owner.uid, owner.controller),
            ("Pod", "pod-uid", Some(true))
        );
        assert_eq!(
            c.metadata.annotations.as_ref().unwrap()[EXTENDED_CLAIM_ANNOTATION],
            "true"
        );
        let r = &c.spec.devices.as_ref().unwrap().requests.as_ref().unwrap()[0];
        let e = r.exactly.as_ref().unwrap();
        assert_eq!(
            (
                &*r.name,
                &*e.device_class_name,
                e.count,
                e.allocation_mode.as_deref()
            ),
            ("container-0-request-1", "gpu", Some(2), Some("ExactCount"))
        );
        let status: k8s_openapi::api::core::v1::PodStatus = serde_json::from_value(
            extended_status("p-extended-resources-x1", &new)["status"].clone(),
        )
        .unwrap();
        let s = status.extended_resource_claim_status.unwrap();
        assert_eq!(s.resource_claim_name, "p-extended-resources-x1");
        assert_eq!(
            (
                &*s.request_mappings[0].container_name,
                &*s.request_mappings[0].resource_name,
                &*s.request_mappings[0].request_name
            ),
            ("main", "example.com/gpu", "container-0-request-1")
        );
    }

    #[test]
    fn the_store_keeps_the_newest_state() {
        let store = ResourceClaims::default();
        let c = |rv: &str| -> ResourceClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": rv,
                             "finalizers": ["x"]},
                "spec": {},
                "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]}
            }))
            .unwrap()
        };
        store.put("ns".into(), "c".into(), ClaimState::of(&c("5")));
        // The watch lagging behind a write's answer does not take the store back.
        store.offer("ns", "c", &ClaimState::of(&c("6")));
        store.put("ns".into(), "c".into(), ClaimState::of(&c("5")));
        assert_eq!(
            store.get("ns", "c").unwrap().resource_version.as_deref(),
            Some("6")
        );
        let s = store.get("ns", "c").unwrap();
        assert!(s.reserved_for_pod("pu") && s.finalizers == ["x"]);
        store.offer("ns", "c", &ClaimState::of(&c("4")));
        assert_eq!(
            store.get("ns", "c").unwrap().resource_version.as_deref(),
            Some("6")
        );
        store.offer("ns", "c", &ClaimState::of(&c("7")));
        assert_eq!(
            store.get("ns", "c").unwrap().resource_version.as_deref(),
            Some("7")
        );
        store.deleted(&c("8"));
        assert!(store.get("ns", "c").is_none());
        store.relisted(vec![(("ns".into(), "d".into()), ClaimState::of(&c("9")))]);
        assert!(store.get("ns", "d").is_some());
    }
}
