//! PersistentVolumes (core `v1`, cluster-scoped): the defaults (`SetDefaults_PersistentVolume`,
//! `SetDefaults_HostPathVolumeSource`) and `ValidatePersistentVolume[Update]`: capacity, reclaim
//! policy, node affinity, and the volume sources (one of them; `hostPath`, `local`, `nfs` and
//! `csi` checked further). It uses `common` and `selectors`.

use super::common::{
    access_modes, basic_quantity, class_name_errs, default_field, default_phase, object_mut,
    positive_quantity, present, str_at, volume_mode_errs,
};
use super::selectors::node_selector;
use crate::meta;
use crate::validation::{self as v, FieldError, render, same};
use serde_json::{Map, Value, json};

const PV_RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];

const HOST_PATH_TYPES: [&str; 8] = [
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// The `PersistentVolumeSource` members in the order `ValidatePersistentVolumeSpec` checks them:
/// the JSON key and the path its "more than 1 volume type" error names.
const PV_SOURCES: [(&str, &str); 22] = [
    ("hostPath", "hostPath"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("nfs", "nfs"),
    ("rbd", "rbd"),
    ("quobyte", "quobyte"),
    ("cephfs", "cephFS"),
    ("iscsi", "iscsi"),
    ("cinder", "cinder"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("scaleIO", "scaleIO"),
    ("local", "local"),
    ("storageos", "storageos"),
    ("csi", "csi"),
];

/// `SetDefaults_PersistentVolume` and `SetDefaults_HostPathVolumeSource`.
pub(super) fn default_pv(pv: &mut Value) {
    let spec = object_mut(pv, "spec");
    if spec
        .get("persistentVolumeReclaimPolicy")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        spec.insert("persistentVolumeReclaimPolicy".into(), json!("Retain"));
    }
    default_field(spec, "volumeMode", json!("Filesystem"));
    if let Some(hp) = spec.get_mut("hostPath").and_then(Value::as_object_mut) {
        default_field(hp, "type", json!(""));
    }
    default_phase(pv, "Pending");
}

fn backsteps(errs: &mut Vec<FieldError>, path: &str, field: &str) {
    if path.split('/').any(|p| p == "..") {
        errs.push(FieldError::invalid_str(
            field,
            path,
            "must not contain '..'",
        ));
    }
}

fn secret_ref(errs: &mut Vec<FieldError>, r: &Value, path: &str) {
    let name = str_at(r, "/name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for m in v::dns1123_subdomain(name) {
            errs.push(FieldError::invalid_str(format!("{path}.name"), name, &m));
        }
    }
    let ns = str_at(r, "/namespace");
    if ns.is_empty() {
        errs.push(FieldError::required(format!("{path}.namespace"), ""));
    } else {
        for m in v::dns1123_label(ns) {
            errs.push(FieldError::invalid_str(format!("{path}.namespace"), ns, &m));
        }
    }
}

/// `ValidatePersistentVolume` (metadata and spec).
pub(super) fn validate_pv(pv: &Value) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(pv, "name"));
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    access_modes(&mut errs, spec.get("accessModes"), "spec.accessModes", "");
    let cap = spec.get("capacity").and_then(Value::as_object);
    if cap.is_none_or(Map::is_empty) {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if cap.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        let shown = cap.map_or_else(
            || "core.ResourceList(nil)".to_string(),
            |c| Value::Object(c.clone()).to_string(),
        );
        errs.push(FieldError::not_supported(
            "spec.capacity",
            shown,
            &["storage"],
        ));
    }
    for (r, q) in cap.into_iter().flatten() {
        let p = format!("spec.capacity[{r}]");
        basic_quantity(&mut errs, q, &p);
        positive_quantity(&mut errs, q, &p);
    }
    let reclaim = spec.get("persistentVolumeReclaimPolicy");
    if let Some(r) = reclaim.filter(|r| r.as_str() != Some(""))
        && !r.as_str().is_some_and(|s| PV_RECLAIM_POLICIES.contains(&s))
    {
        errs.push(FieldError::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            render(r),
            &PV_RECLAIM_POLICIES,
        ));
    }
    let affinity = present(spec, "/nodeAffinity");
    if let Some(na) = affinity {
        match present(na, "/required") {
            Some(req) => node_selector(&mut errs, req, "spec.nodeAffinity.required"),
            None => errs.push(FieldError::required(
                "spec.nodeAffinity.required",
                "must specify required node constraints",
            )),
        }
    }
    let mut volumes = 0;
    for (key, forbidden_path) in PV_SOURCES {
        let Some(src) = present(spec, &format!("/{key}")) else {
            continue;
        };
        if key == "flexVolume" {
            // As the real validation: counted without the "more than 1" check.
            volumes += 1;
            if str_at(src, "/driver").is_empty() {
                errs.push(FieldError::required("spec.flexVolume.driver", ""));
            }
            continue;
        }
        if volumes > 0 {
            errs.push(FieldError::forbidden(
                format!("spec.{forbidden_path}"),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        volumes += 1;
        match key {
            "hostPath" => {
                let path = str_at(src, "/path");
                if path.is_empty() {
                    errs.push(FieldError::required("spec.hostPath.path", ""));
                } else {
                    backsteps(&mut errs, path, "spec.hostPath.path");
                    if let Some(t) = present(src, "/type")
                        && !t.as_str().is_some_and(|t| HOST_PATH_TYPES.contains(&t))
                    {
                        errs.push(FieldError::not_supported(
                            "spec.hostPath.type",
                            render(t),
                            &HOST_PATH_TYPES,
                        ));
                    }
                }
            }
            "local" => {
                let path = str_at(src, "/path");
                if path.is_empty() {
                    errs.push(FieldError::required("spec.local.path", ""));
                } else {
                    if !path.starts_with('/') {
                        errs.push(FieldError::invalid_str(
                            "spec.local",
                            path,
                            "must be an absolute path",
                        ));
                    }
                    backsteps(&mut errs, path, "spec.local.path");
                }
                if affinity.is_none() {
                    errs.push(FieldError::required(
                        "spec.nodeAffinity",
                        "Local volume requires node affinity",
                    ));
                }
            }
            "nfs" => {
                if str_at(src, "/server").is_empty() {
                    errs.push(FieldError::required("spec.nfs.server", ""));
                }
                let path = str_at(src, "/path");
                if path.is_empty() {
                    errs.push(FieldError::required("spec.nfs.path", ""));
                }
                if !path.starts_with('/') {
                    errs.push(FieldError::invalid_str(
                        "spec.nfs.path",
                        path,
                        "must be an absolute path",
                    ));
                }
            }
            "csi" => {
                errs.extend(v::csi_driver_name(
                    str_at(src, "/driver"),
                    "spec.csi.driver",
                ));
                if str_at(src, "/volumeHandle").is_empty() {
                    errs.push(FieldError::required("spec.csi.volumeHandle", ""));
                }
                for r in [
                    "controllerPublishSecretRef",
                    "controllerExpandSecretRef",
                    "nodePublishSecretRef",
                    "nodeStageSecretRef",
                    "nodeExpandSecretRef",
                ] {
                    if let Some(x) = present(src, &format!("/{r}")) {
                        secret_ref(&mut errs, x, &format!("spec.csi.{r}"));
                    }
                }
            }
            _ => {}
        }
    }
    if volumes == 0 {
        errs.push(FieldError::required("spec", "must specify a volume type"));
    }
    let host_root = present(spec, "/hostPath/path")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.is_empty() && p.chars().all(|c| c == '/'));
    if host_root && reclaim.and_then(Value::as_str) == Some("Recycle") {
        errs.push(FieldError::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    class_name_errs(
        &mut errs,
        spec,
        "/storageClassName",
        "spec.storageClassName",
    );
    volume_mode_errs(&mut errs, pv);
    errs
}

/// The `PersistentVolumeSource` part of a PV spec.
fn pv_source(spec: &Value) -> Map<String, Value> {
    PV_SOURCES
        .iter()
        .filter_map(|(k, _)| spec.get(*k).map(|x| (k.to_string(), x.clone())))
        .collect()
}

/// `ValidatePersistentVolumeUpdate` (includes the create validation of the new object).
pub(super) fn validate_pv_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_pv(new);
    let os = old.get("spec").unwrap_or(&Value::Null);
    let ns = new.get("spec").unwrap_or(&Value::Null);
    let old_src = pv_source(os);
    let mut new_src = pv_source(ns);
    // A missing controllerExpandSecretRef may be set.
    if present(os, "/csi").is_some()
        && present(os, "/csi/controllerExpandSecretRef").is_none()
        && let Some(csi) = new_src.get_mut("csi").and_then(Value::as_object_mut)
    {
        csi.remove("controllerExpandSecretRef");
    }
    if !same(Some(&Value::Object(old_src)), Some(&Value::Object(new_src))) {
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            "spec.persistentvolumesource is immutable after creation",
        ));
    }
    if !same(os.get("volumeMode"), ns.get("volumeMode")) {
        errs.push(FieldError::invalid(
            "volumeMode",
            render(ns.get("volumeMode").unwrap_or(&Value::Null)),
            "field is immutable",
        ));
    }
    if present(os, "/nodeAffinity").is_some()
        && !same(os.get("nodeAffinity"), ns.get("nodeAffinity"))
    {
        errs.push(FieldError::invalid(
            "nodeAffinity",
            render(ns.get("nodeAffinity").unwrap_or(&Value::Null)),
            "field is immutable",
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::common::msgs;

    #[test]
    fn pv_rules() {
        let mut pv = json!({"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"}, "local": {"path": "/mnt/a"}}});
        default_pv(&mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(
            msgs(&validate_pv(&pv)),
            ["spec.nodeAffinity: Required value: Local volume requires node affinity"]
        );
        pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "Gt", "values": []},
            {"key": "k", "operator": "Near"}]}]}});
        pv["spec"]["hostPath"] = json!({"path": "/x"});
        assert_eq!(
            msgs(&validate_pv(&pv)),
            [
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[1].operator: Invalid value: \"Near\": not a valid selector operator",
                "spec.local: Forbidden: may not specify more than 1 volume type",
            ]
        );
        let none = json!({"metadata": {"name": "pv"}, "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}});
        assert_eq!(
            msgs(&validate_pv(&none)),
            ["spec: Required value: must specify a volume type"]
        );
    }
}
