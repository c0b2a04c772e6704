//! What of a workload Magma (and this harness) can replay faithfully, decided before it runs:
//! feature gates, priority classes, and objects the target does not serve. Each finding is
//! - **unsupported**: the workload is not run (the part could change what is measured);
//! - **partial**: run, with the part left out, only where it cannot change which pods get
//!   scheduled where (e.g. Service churn: Magma has no Service-dependent plugin);
//! - a **note**: a kube-scheduler setting that has no Magma counterpart and does not change
//!   the workload (its internal feature gates).

use super::config::{Op, TestCase, Unsupported, Workload};
use super::objects::Template;
use serde_json::Value;
use std::collections::BTreeMap;

/// kube-scheduler implementation switches: they change how kube-scheduler works internally,
/// not what the workload asks of a scheduler.
const INTERNAL_GATES: &[&str] = &[
    "SchedulerQueueingHints",
    "SchedulerAsyncAPICalls",
    "SchedulerAsyncPreemption",
    "SchedulerPopFromBackoffQ",
];

/// Gates of API features Magma implements as kube-scheduler does with the gate on (on by
/// default upstream): a note either way.
const IMPLEMENTED_GATES: &[(&str, &str)] = &[
    (
        "InPlacePodVerticalScaling",
        "Magma counts a resizing pod at the larger of its spec and its status' actuated and allocated resources, as kube-scheduler does with the gate on; kube-sim serves pods/resize",
    ),
    (
        "DynamicResourceAllocation",
        "Magma allocates devices for ResourceClaims with its structured allocator and writes the allocation before binding, as kube-scheduler's DynamicResources plugin; kube-sim serves resource.k8s.io/v1 and runs the resource claim controller",
    ),
    (
        "DRAPrioritizedList",
        "Magma's allocator takes the first satisfiable firstAvailable subrequest",
    ),
    (
        "DRAPartitionableDevices",
        "Magma's allocator keeps devices within their pool's shared counters (sharedCounters/consumesCounters)",
    ),
    (
        "DRAConsumableCapacity",
        "Magma's allocator shares devices that allow multiple allocations while their capacities last (requestPolicy, capacity requests, distinctAttribute) and writes shareID and consumedCapacity",
    ),
    (
        "DRAResourceClaimDeviceStatus",
        "claims' status.devices is written by drivers; kube-scheduler does not read it either",
    ),
];

/// Gates of API features Magma does not implement: off is what Magma does, on is unsupported.
const FEATURE_REASONS: &[(&str, &str)] = &[
    (
        "DRAExtendedResource",
        "Magma does not serve extended resources from DRA devices (DeviceClass extendedResourceName)",
    ),
    (
        "DRADeviceTaints",
        "Magma honours taints in ResourceSlices but does not apply DeviceTaintRules",
    ),
    (
        "DRADeviceBindingConditions",
        "Magma does not wait for device binding conditions",
    ),
    (
        "NodeDeclaredFeatures",
        "Magma has no NodeDeclaredFeatures filter",
    ),
    ("GenericWorkload", "Magma does not schedule PodGroups"),
];

#[derive(Debug, Default, Clone)]
pub struct Findings {
    pub unsupported: Vec<Unsupported>,
    pub partial: Vec<Unsupported>,
    pub notes: Vec<String>,
}

/// Kinds kube-sim serves (its lib.rs table); on a real cluster every kind is tried.
const SIM_KINDS: &[&str] = &[
    "Pod",
    "Node",
    "Namespace",
    "ConfigMap",
    "Event",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "CSINode",
    "Lease",
    "PodDisruptionBudget",
    "PriorityClass",
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
];

pub fn check(tc: &TestCase, w: &Workload, ops: &[Op], embedded: bool) -> Findings {
    let mut f = Findings::default();
    let mut gates = tc.feature_gates.clone();
    gates.extend(w.feature_gates.clone());
    for (gate, on) in &gates {
        if INTERNAL_GATES.contains(&gate.as_str()) {
            f.notes.push(format!(
                "featureGate {gate}={on}: a kube-scheduler implementation switch with no Magma counterpart (ignored)"
            ));
        } else if let Some((_, how)) = IMPLEMENTED_GATES.iter().find(|(g, _)| g == gate) {
            f.notes.push(format!("featureGate {gate}={on}: {how}"));
        } else if let Some((_, why)) = FEATURE_REASONS.iter().find(|(g, _)| g == gate) {
            if *on {
                f.unsupported.push(Unsupported {
                    what: format!("featureGate {gate}=true"),
                    reason: why.to_string(),
                });
            } else {
                f.notes
                    .push(format!("featureGate {gate}=false: {why}, which matches"));
            }
        } else if *on {
            f.unsupported.push(Unsupported {
                what: format!("featureGate {gate}=true"),
                reason: "a feature gate this harness does not know; Magma may not implement it"
                    .into(),
            });
        } else {
            f.notes.push(format!(
                "featureGate {gate}=false: not known to this harness (assumed off in Magma)"
            ));
        }
    }
    for (k, _) in tc.other.iter().chain(w.other.iter()) {
        let reason = match k.as_str() {
            "schedulerConfigPath" => {
                "a KubeSchedulerConfiguration for kube-scheduler; Magma runs its own default profile"
            }
            "metricsCollectorConfig" => {
                "kube-scheduler's Prometheus histograms; only SchedulingThroughput is measured"
            }
            _ => "a field this harness does not interpret",
        };
        f.unsupported.push(Unsupported {
            what: format!("field {k}"),
            reason: reason.into(),
        });
    }
    for sel in [&tc.threshold_metric_selector, &w.threshold_metric_selector]
        .into_iter()
        .flatten()
    {
        let name = sel.get("name").and_then(Value::as_str).unwrap_or("");
        if name != "SchedulingThroughput" {
            f.notes.push(format!(
                "thresholdMetricSelector names {name:?}: the threshold is not compared (only SchedulingThroughput is measured)"
            ));
        }
    }
    priority_classes(ops, &mut f);
    created_objects(ops, embedded, &mut f);
    if embedded {
        for op in ops {
            if let Op::Churn { templates, .. } = op {
                for t in templates {
                    match Template::load(t, &BTreeMap::new()).and_then(|t| t.render(0, 1)) {
                        Ok(obj) => {
                            let kind = obj["kind"].as_str().unwrap_or("").to_string();
                            if !SIM_KINDS.contains(&kind.as_str()) {
                                f.partial.push(Unsupported {
                                    what: format!("churn of {kind} ({})", t.display()),
                                    reason: format!(
                                        "kube-sim does not serve {kind}s; Magma watches no {kind}s, so the measured pods' placement cannot depend on them (the API load they add is not reproduced)"
                                    ),
                                });
                            }
                        }
                        Err(e) => f.unsupported.push(Unsupported {
                            what: format!("churn template {}", t.display()),
                            reason: format!("{e:#}"),
                        }),
                    }
                }
            }
        }
    }
    f
}

/// The `resource.k8s.io` version kube-sim serves (the real server also serves `v1beta1` and
/// `v1beta2` and converts).
const SIM_DRA_VERSION: &str = "resource.k8s.io/v1";

/// Objects of `createAny`: kinds the target must serve (the embedded simulator: [`SIM_KINDS`],
/// DRA at `v1`) and Magma must act on, since they can change where pods go.
fn created_objects(ops: &[Op], embedded: bool, f: &mut Findings) {
    for op in ops {
        let Op::CreateAny {
            template, count, ..
        } = op
        else {
            continue;
        };
        let obj = match Template::from_ref(template).and_then(|t| t.render(0, (*count).max(1))) {
            Ok(o) => o,
            Err(e) => {
                f.unsupported.push(Unsupported {
                    what: format!("createAny template {}", template.path.display()),
                    reason: format!("{e:#}"),
                });
                continue;
            }
        };
        let kind = obj["kind"].as_str().unwrap_or("");
        let version = obj["apiVersion"].as_str().unwrap_or("");
        let what = format!(
            "createAny of {version} {kind} ({})",
            template.path.display()
        );
        let reason = if kind == "DeviceTaintRule" {
            Some(
                "Magma does not apply DeviceTaintRules (and kube-sim does not serve them)"
                    .to_string(),
            )
        } else if !embedded {
            None
        } else if !SIM_KINDS.contains(&kind) {
            Some(format!("kube-sim does not serve {kind}s"))
        } else if version == super::dra::V1BETA2 {
            // Same schema as v1: created as v1, as the real API server converts it.
            f.notes.push(format!(
                "{what}: created as resource.k8s.io/v1 (kube-sim serves v1 only; v1beta2 has its schema)"
            ));
            None
        } else if version.starts_with("resource.k8s.io/") && version != SIM_DRA_VERSION {
            Some(format!(
                "kube-sim serves resource.k8s.io at v1 only, not {version} (the real API server converts)"
            ))
        } else {
            None
        };
        if let Some(reason) = reason {
            f.unsupported.push(Unsupported { what, reason });
        }
    }
}

/// Pods naming a PriorityClass: this harness creates none (upstream's templates set
/// `spec.priority` directly, which the embedded simulator admits as scheduler_perf's API
/// server does, its Priority admission plugin off). Preemption itself is Magma's as
/// kube-scheduler's, so workloads that preempt are run.
fn priority_classes(ops: &[Op], f: &mut Findings) {
    let sets = ops.iter().flat_map(|op| match op {
        Op::CreatePodSets(inner) => inner.as_slice(),
        _ => &[],
    });
    for op in ops.iter().chain(sets) {
        let Op::CreatePods {
            template: Some(t), ..
        } = op
        else {
            continue;
        };
        if let Ok(p) = Template::from_ref(t).and_then(|t| t.render(0, 1))
            && p["spec"]["priorityClassName"].is_string()
        {
            f.unsupported.push(Unsupported {
                what: format!("priorityClassName in {}", t.path.display()),
                reason: "PriorityClass objects are not created by this harness".into(),
            });
        }
    }
}
