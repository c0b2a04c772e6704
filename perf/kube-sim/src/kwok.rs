//! KWOK-like behaviour: the fake nodes created at start, the NodeShard CRD the simulator can
//! preinstall, and the lifecycle of bound pods (Running after a delay, then Succeeded and deleted
//! after their lifetime; a pod deleted gracefully is finished by the kubelet after the
//! termination delay: a terminal status, then a delete with grace period 0). Lifecycle steps are
//! spawned tasks that re-check the pod's UID, so a pod deleted or replaced meanwhile is left
//! alone.
//!
//! The kubelet's side of the shared state is here too, as an `impl Inner` block: what the server
//! calls when a pod is bound, resized or deleted gracefully (`Inner::after_bound`,
//! `after_resized`, `after_graceful_delete`) and the status writes the lifecycle tasks make. It
//! uses the shared state (`inner`), the store and `deletion`; the server and `sim` call it.

use crate::config::SimConfig;
use crate::deletion;
use crate::inner::Inner;
use crate::managed::Manager;
use crate::meta;
use crate::meta::Pointer;
use crate::store::Stored;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Annotation overriding [`SimConfig::pod_lifetime`] for one pod, in milliseconds.
pub const LIFETIME_ANNOTATION: &str = "kube-sim.magma.io/lifetime-ms";

/// Name of the `i`th fake node.
pub fn node_name(i: usize) -> String {
    format!("node-{i:05}")
}

/// A Ready node with the configured capacity, labelled `type: kwok`.
pub fn node_object(cfg: &SimConfig, name: &str, index: usize) -> Value {
    let res = json!({"cpu": cfg.node_cpu, "memory": cfg.node_memory, "pods": cfg.node_pods.to_string(),
                     "ephemeral-storage": "1Ti"});
    let now = meta::now();
    let ip = format!(
        "10.{}.{}.{}",
        64 + (index >> 16) % 64,
        (index >> 8) & 0xff,
        index & 0xff
    );
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {
            "capacity": res,
            "allocatable": res,
            "phase": "Running",
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure", "message": "",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID", "message": "",
                 "lastHeartbeatTime": now, "lastTransitionTime": now},
            ],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": "v1.34.0-kwok",
                         "containerRuntimeVersion": "kwok", "kernelVersion": "", "osImage": "", "kubeProxyVersion": "",
                         "machineID": "", "systemUUID": "", "bootID": ""},
        },
    })
}

/// A minimal pod (one container, the given requests) for tests and benchmarks.
pub fn pod_object(ns: &str, name: &str, scheduler: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "main", "image": "sandbox",
                 "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    })
}

/// The NodeShard CRD (as in Volcano's `shard.volcano.sh_nodeshards.yaml`, schema abbreviated).
pub fn nodeshard_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodeshards.shard.volcano.sh"},
        "spec": {
            "group": "shard.volcano.sh",
            "names": {"kind": "NodeShard", "listKind": "NodeShardList", "plural": "nodeshards",
                      "shortNames": ["nsh"], "singular": "nodeshard"},
            "scope": "Cluster",
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                          "subresources": {"status": {}}}],
        },
    })
}

static POD_IP: AtomicU32 = AtomicU32::new(1);

fn pod_ip() -> String {
    let n = POD_IP.fetch_add(1, Ordering::Relaxed);
    format!(
        "10.{}.{}.{}",
        128 + ((n >> 16) & 0x3f),
        (n >> 8) & 0xff,
        n & 0xff
    )
}

fn container_statuses(pod: &Value, state: Value, ready: bool) -> Value {
    let running = state.get("running").is_some();
    let cs = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Value::Array(
        cs.iter()
            .map(|c| {
                let mut s = json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
                       "restartCount": 0, "started": ready, "state": state});
                // A kubelet with in-place resize (v1.33+) reports what it actuated; without it the
                // real server refuses resizes of the running pod.
                if running {
                    s["resources"] = c.get("resources").cloned().unwrap_or_else(|| json!({}));
                }
                s
            })
            .collect(),
    )
}

/// Starts the lifecycle of a pod that was just bound (or created bound).
pub(crate) fn pod_bound(
    inner: &Arc<Inner>,
    ns: String,
    name: String,
    uid: String,
    lifetime_ms: Option<u64>,
) {
    let Some(delay) = inner.cfg.running_delay else {
        return;
    };
    let lifetime = lifetime_ms
        .map(Duration::from_millis)
        .or(inner.cfg.pod_lifetime);
    let inner = inner.clone();
    let rt = inner.rt.clone();
    rt.spawn(async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if !inner.kwok_running(&ns, &name, &uid) {
            return;
        }
        let Some(lifetime) = lifetime else { return };
        tokio::time::sleep(lifetime).await;
        if inner.kwok_succeeded(&ns, &name, &uid) {
            inner.kwok_delete(&ns, &name, &uid);
        }
    });
}

/// A node's `InternalIP` address, read from its encoding without building the whole object.
fn internal_ip(node: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Node {
        #[serde(default)]
        status: Value,
    }
    let n: Node = serde_json::from_slice(node).ok()?;
    n.status
        .get("addresses")
        .and_then(Value::as_array)?
        .iter()
        .find(|x| x["type"] == "InternalIP")
        .and_then(|x| x["address"].as_str())
        .map(str::to_string)
}

/// The pod-level part of a running pod's status, as a v1.36 kubelet reports it for a pod with
/// pod-level resources: `status.resources` (the requests and limits applied at pod level) and
/// `status.allocatedResources` (the pod-level requests it admitted). Pods without pod-level
/// resources get neither.
fn pod_level_status(pod: &mut Value) {
    let spec = &pod["spec"];
    if !crate::podres::is_set(spec) {
        return;
    }
    let pick = |which: &str| -> Option<Value> {
        spec.at(&format!("/resources/{which}"))
            .and_then(Value::as_object)
            .map(|m| {
                Value::Object(
                    m.iter()
                        .filter(|(k, _)| crate::podres::supported(k))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                )
            })
            .filter(|m| m.as_object().is_some_and(|m| !m.is_empty()))
    };
    let mut resources = serde_json::Map::new();
    if let Some(l) = pick("limits") {
        resources.insert("limits".into(), l);
    }
    let requests = pick("requests");
    if let Some(r) = &requests {
        resources.insert("requests".into(), r.clone());
    }
    let st = &mut pod["status"];
    st["resources"] = Value::Object(resources);
    match requests {
        Some(r) => st["allocatedResources"] = r,
        None => {
            if let Some(o) = st.as_object_mut() {
                o.remove("allocatedResources");
            }
        }
    }
}

/// The cpu (millicores) and memory (bytes) a pod needs on its node, as the kubelet's admission
/// counts them: the pod-level requests where set, else the containers' aggregate requests.
pub(crate) fn pod_needs(pod: &Value) -> (i128, i128) {
    let spec = &pod["spec"];
    let aggregate = crate::podres::aggregate_requests(spec);
    let get = |name: &str| -> i128 {
        spec.at(&format!("/resources/requests/{name}"))
            .and_then(crate::validation::quantity_of)
            .or_else(|| aggregate.get(name).copied())
            .unwrap_or(0)
    };
    let up = |nanos: i128, unit: i128| (nanos + unit - 1).div_euclid(unit);
    (up(get("cpu"), 1_000_000), up(get("memory"), 1_000_000_000))
}

/// Whether the node can take a resized pod (`canResizePod`): `Err((reason, message))` with the
/// kubelet's `PodResizePending` reason and message when it cannot: `Infeasible` when the pod
/// alone exceeds the node's allocatable, `Deferred` when the other pods on the node leave no
/// room (`others`: their needs).
pub(crate) fn resize_fits(
    pod: &Value,
    node: &Value,
    others: (i128, i128),
) -> Result<(), (&'static str, String)> {
    let alloc = |name: &str, unit: i128| {
        node.at(&format!("/status/allocatable/{name}"))
            .and_then(crate::validation::quantity_of)
            .map_or(i128::MAX, |n| n / unit)
    };
    let (cpu_cap, mem_cap) = (alloc("cpu", 1_000_000), alloc("memory", 1_000_000_000));
    let (cpu, mem) = pod_needs(pod);
    if mem > mem_cap {
        return Err((
            "Infeasible",
            format!(
                "Node didn't have enough capacity: memory, requested: {mem}, capacity: {mem_cap}"
            ),
        ));
    }
    if cpu > cpu_cap {
        return Err((
            "Infeasible",
            format!("Node didn't have enough capacity: cpu, requested: {cpu}, capacity: {cpu_cap}"),
        ));
    }
    if cpu + others.0 > cpu_cap {
        return Err((
            "Deferred",
            format!(
                "Node didn't have enough resource: cpu, requested: {cpu}, used: {}, capacity: {cpu_cap}",
                others.0
            ),
        ));
    }
    if mem + others.1 > mem_cap {
        return Err((
            "Deferred",
            format!(
                "Node didn't have enough resource: memory, requested: {mem}, used: {}, capacity: {mem_cap}",
                others.1
            ),
        ));
    }
    Ok(())
}

/// Starts the simulated kubelet's termination of a pod deleted gracefully: after
/// `min(termination_delay, deletionGracePeriodSeconds)` the kubelet reports it terminated and
/// deletes it (`Inner::kwok_finish`). Nothing happens without a termination delay (the kubelet
/// never finishes) or for pods that are not bound.
pub(crate) fn pod_terminating(inner: &Arc<Inner>, pod: &Value) {
    let Some(delay) = inner.cfg.termination_delay else {
        return;
    };
    if pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return;
    }
    let grace = crate::deletion::grace_of(pod).unwrap_or(0).max(0);
    let wait = delay.min(Duration::from_secs(grace.unsigned_abs()));
    let (ns, name, uid) = (
        meta::meta_str(pod, "namespace").to_string(),
        meta::meta_str(pod, "name").to_string(),
        meta::meta_str(pod, "uid").to_string(),
    );
    let inner = inner.clone();
    let rt = inner.rt.clone();
    rt.spawn(async move {
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        inner.kwok_finish(&ns, &name, &uid);
    });
}

/// The status a kubelet reports for a terminating pod once its containers have stopped: the
/// containers that ran terminated with exit code 0 (`Completed`: they stopped on SIGTERM), the
/// others `ContainerStatusUnknown` (137), as the kubelet reports containers it never started;
/// the phase `Succeeded` when every container exited 0, else `Failed`; `Ready` and
/// `ContainersReady` False (`PodCompleted`). False when the pod is gone, not terminating or
/// already finished.
pub(crate) fn set_terminated(pod: &mut Value, uid: &str) -> bool {
    if meta::meta_str(pod, "uid") != uid
        || !deletion::terminating(pod)
        || matches!(
            pod.at("/status/phase").and_then(Value::as_str),
            Some("Succeeded" | "Failed")
        )
    {
        return false;
    }
    let now = meta::now();
    let specs = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old: Vec<Value> = pod
        .at("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut all_ok = !specs.is_empty();
    let statuses: Vec<Value> = specs
        .iter()
        .map(|c| {
            let prev = old.iter().find(|s| s["name"] == c["name"]);
            let started = prev.and_then(|s| s.at("/state/running/startedAt"));
            let state = match started {
                Some(at) => json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                   "startedAt": at, "finishedAt": now}}),
                None => {
                    all_ok = false;
                    json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                           "message": "The container could not be located when the pod was terminated"}})
                }
            };
            let mut st = json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": false,
                                "restartCount": 0, "started": false, "state": state});
            if let Some(r) = prev.and_then(|p| p.get("resources")) {
                st["resources"] = r.clone();
            }
            st
        })
        .collect();
    pod["status"]["containerStatuses"] = Value::Array(statuses);
    pod["status"]["phase"] = json!(if all_ok { "Succeeded" } else { "Failed" });
    for t in ["Ready", "ContainersReady"] {
        crate::kinds::set_condition(
            pod,
            json!({"type": t, "status": "False", "reason": "PodCompleted", "lastProbeTime": null, "lastTransitionTime": now}),
        );
    }
    true
}

/// Marks a bound Pending pod Running (false when it is gone, terminating or not in that state).
pub(crate) fn set_running(pod: &mut Value, uid: &str, host_ip: &str) -> bool {
    if meta::meta_str(pod, "uid") != uid
        || pod.at("/status/phase") != Some(&json!("Pending"))
        || deletion::terminating(pod)
    {
        return false;
    }
    let now = meta::now();
    let ip = pod_ip();
    let statuses = container_statuses(pod, json!({"running": {"startedAt": now}}), true);
    let st = &mut pod["status"];
    st["phase"] = json!("Running");
    st["hostIP"] = json!(host_ip);
    st["hostIPs"] = json!([{"ip": host_ip}]);
    st["podIP"] = json!(ip);
    st["podIPs"] = json!([{"ip": ip}]);
    st["startTime"] = json!(now);
    st["containerStatuses"] = statuses;
    pod_level_status(pod);
    for t in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
    ] {
        crate::kinds::set_condition(
            pod,
            json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now}),
        );
    }
    true
}

/// The simulated kubelet's answer to a resize of a Running pod: when the node cannot take it
/// (`fits`: [`resize_fits`]), the `PodResizePending` condition with the kubelet's reason and
/// message (observed at the pod's generation) and nothing else; otherwise the resize is
/// actuated at once: each container's status reports its spec's resources, the pod-level
/// `status.resources` / `status.allocatedResources` the pod-level ones, and a pending condition
/// goes (the real kubelet also sets `PodResizeInProgress` while it works, which this one, done
/// at once, skips). False when the pod is gone, not running, or already reports them.
pub(crate) fn actuate_resize(
    pod: &mut Value,
    uid: &str,
    fits: Result<(), (&'static str, String)>,
) -> bool {
    if meta::meta_str(pod, "uid") != uid || pod.at("/status/phase") != Some(&json!("Running")) {
        return false;
    }
    if let Err((reason, message)) = fits {
        let generation = pod.at("/metadata/generation").cloned().unwrap_or(json!(1));
        let pending = pod
            .at("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodResizePending"));
        if pending.is_some_and(|c| {
            c["reason"] == reason
                && c["message"] == message
                && c["observedGeneration"] == generation
        }) {
            return false;
        }
        crate::kinds::set_condition(
            pod,
            json!({"type": "PodResizePending", "status": "True", "reason": reason, "message": message,
                   "lastProbeTime": null, "lastTransitionTime": meta::now(), "observedGeneration": generation}),
        );
        return true;
    }
    let before = pod.clone();
    if let Some(Value::Array(conds)) = pod.pointer_mut("/status/conditions") {
        conds.retain(|c| c["type"] != "PodResizePending");
    }
    let spec: Vec<(Value, Value)> = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].clone(),
                        c.get("resources").cloned().unwrap_or_else(|| json!({})),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(statuses) = pod
        .pointer_mut("/status/containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for s in statuses {
            if let Some((_, r)) = spec.iter().find(|(n, _)| *n == s["name"]) {
                s["resources"] = r.clone();
            }
        }
    }
    pod_level_status(pod);
    *pod != before
}

/// Marks a Running pod Succeeded (not one being deleted: the kubelet is terminating it).
pub(crate) fn set_succeeded(pod: &mut Value, uid: &str) -> bool {
    if meta::meta_str(pod, "uid") != uid
        || pod.at("/status/phase") != Some(&json!("Running"))
        || deletion::terminating(pod)
    {
        return false;
    }
    let now = meta::now();
    let term = json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": pod.at("/status/startTime"), "finishedAt": now}});
    pod["status"]["containerStatuses"] = container_statuses(pod, term, false);
    pod["status"]["phase"] = json!("Succeeded");
    for t in ["Ready", "ContainersReady"] {
        crate::kinds::set_condition(
            pod,
            json!({"type": t, "status": "False", "reason": "PodCompleted", "lastProbeTime": null, "lastTransitionTime": now}),
        );
    }
    true
}

/// The field manager of the simulated kubelet's writes (node creation, pod status).
pub(crate) fn manager() -> Manager {
    Manager::update("kubelet")
}

/// The simulated kubelet's side of the shared state: what the server calls when a pod is bound,
/// resized or deleted gracefully, and the lifecycle steps the tasks above run under the state
/// lock.
impl Inner {
    /// Starts the KWOK lifecycle for a pod that is bound now.
    pub(crate) fn after_bound(self: &Arc<Self>, pod: &Stored) {
        // Parsed only when the encoding names the annotation.
        let lifetime = pod
            .mentions(LIFETIME_ANNOTATION)
            .then(|| pod.value())
            .and_then(|v| {
                v.at("/metadata/annotations")
                    .and_then(|a| a.get(LIFETIME_ANNOTATION))
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok())
            });
        pod_bound(
            self,
            pod.namespace().to_string(),
            pod.name().to_string(),
            pod.uid().to_string(),
            lifetime,
        );
    }

    /// A pod was resized (`pods/resize`): the simulated kubelet checks that its node can take
    /// it (`resize_fits`) and actuates it or reports it pending, in its own status write
    /// after the resize (`actuate_resize`).
    pub(crate) fn after_resized(self: &Arc<Self>, pod: &Stored) {
        if self.cfg.running_delay.is_none() {
            return; // no simulated kubelet
        }
        let (ns, name) = (pod.namespace().to_string(), pod.name().to_string());
        let uid = pod.uid().to_string();
        let inner = self.clone();
        self.rt.clone().spawn(async move {
            let mut st = inner.state();
            let pods = st.registry.get("", "v1", "pods").expect("built in");
            let nodes = st.registry.get("", "v1", "nodes").expect("built in");
            let Ok(pod) = st.get(&pods, &ns, &name) else {
                return;
            };
            let node_name = pod.index().field("spec.nodeName").unwrap_or("").to_string();
            let fits = match st.get(&nodes, "", &node_name) {
                Ok(node) => {
                    // What the node's other admitted (running) pods need.
                    let mut others = (0, 0);
                    for p in st.list(&pods, None).1 {
                        let v = &p.value();
                        if v.at("/spec/nodeName").and_then(Value::as_str) == Some(&node_name)
                            && meta::meta_str(v, "uid") != uid
                            && v.at("/status/phase").and_then(Value::as_str) == Some("Running")
                        {
                            let (c, m) = pod_needs(v);
                            others = (others.0 + c, others.1 + m);
                        }
                    }
                    resize_fits(&pod.value(), &node.value(), others)
                }
                Err(_) => Ok(()),
            };
            let _ = st.modify_status(&pods, &ns, &name, &manager(), |p| {
                actuate_resize(p, &uid, fits)
            });
        });
    }

    pub(crate) fn kwok_running(&self, ns: &str, name: &str, uid: &str) -> bool {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let nodes = st.registry.get("", "v1", "nodes").expect("built in");
        let node = st
            .get(&pods, ns, name)
            .ok()
            .and_then(|p| p.index().field("spec.nodeName").map(str::to_string));
        let Some(node) = node else { return false };
        let host_ip = st
            .get(&nodes, "", &node)
            .ok()
            .and_then(|n| internal_ip(&n.json()))
            .unwrap_or_else(|| "10.255.255.254".into());
        st.modify_status(&pods, ns, name, &manager(), |p| {
            set_running(p, uid, &host_ip)
        })
        .is_some()
    }

    pub(crate) fn kwok_succeeded(&self, ns: &str, name: &str, uid: &str) -> bool {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        st.modify_status(&pods, ns, name, &manager(), |p| set_succeeded(p, uid))
            .is_some()
    }

    /// A DELETE left a pod terminating: the simulated kubelet finishes it (`pod_terminating`).
    pub(crate) fn after_graceful_delete(self: &Arc<Self>, pod: &Stored) {
        pod_terminating(self, &pod.value());
    }

    /// The simulated kubelet finishes a terminating pod: its terminal status (its own write),
    /// then a delete with grace period 0 and the pod's UID as precondition, as a kubelet's
    /// status manager sends once the pod's phase is terminal. A pod with finalizers stays
    /// (marked with grace period 0) until they are removed.
    pub(crate) fn kwok_finish(&self, ns: &str, name: &str, uid: &str) {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let Ok(pod) = st.get(&pods, ns, name) else {
            return;
        };
        if pod.uid() != uid || !deletion::terminating(&pod.value()) {
            return;
        }
        let _ = st.modify_status(&pods, ns, name, &manager(), |p| set_terminated(p, uid));
        if let Err(e) = st.delete_request(&pods, ns, name, &deletion::DeleteOptions::force(uid)) {
            tracing::debug!(pod = %format!("{ns}/{name}"), "the kubelet's delete failed: {e}");
        }
    }

    pub(crate) fn kwok_delete(&self, ns: &str, name: &str, uid: &str) {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let _ = st.delete(&pods, ns, name, Some(&serde_json::json!({"uid": uid})));
    }
}
