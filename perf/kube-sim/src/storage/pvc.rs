//! PersistentVolumeClaims (core `v1`): the defaults (`SetDefaults_PersistentVolumeClaim`,
//! `NormalizeDataSources`), `ValidatePersistentVolumeClaim[Update]`, and the admission plugins
//! that touch claims: `DefaultStorageClass` (which class a claim without one gets) and
//! `PersistentVolumeClaimResize`. It uses `common` and `selectors`.

use super::common::{
    access_modes, class_name_errs, default_field, default_phase, object_mut, positive_quantity,
    present, str_at, volume_mode_errs,
};
use super::selectors::label_selector;
use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use crate::validation::{self as v, FieldError, render, same};
use serde_json::{Map, Value, json};

/// StorageClass annotation marking the default class (`DefaultStorageClass` admission).
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The deprecated claim annotation naming its class (read before `spec.storageClassName`).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// The class of a claim as `GetPersistentVolumeClaimClass` reads it (beta annotation first).
pub(crate) fn claim_class(pvc: &Value) -> &str {
    let ann = pvc
        .at("/metadata/annotations")
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .and_then(Value::as_str);
    ann.unwrap_or_else(|| str_at(pvc, "/spec/storageClassName"))
}

fn is_default_class(sc: &Value) -> bool {
    let ann = sc.at("/metadata/annotations");
    [DEFAULT_CLASS_ANNOTATION, BETA_DEFAULT_CLASS_ANNOTATION]
        .iter()
        .any(|a| ann.and_then(|m| m.get(*a)).and_then(Value::as_str) == Some("true"))
}

/// The class `DefaultStorageClass` assigns: among classes annotated as default, the newest
/// (ties: the first by name).
pub(crate) fn default_class<'a>(classes: impl Iterator<Item = &'a Value>) -> Option<String> {
    let mut best: Option<(&str, &str)> = None;
    for sc in classes.filter(|sc| is_default_class(sc)) {
        let (ts, name) = (
            meta::meta_str(sc, "creationTimestamp"),
            meta::meta_str(sc, "name"),
        );
        if best.is_none_or(|(bts, bname)| ts > bts || (ts == bts && name < bname)) {
            best = Some((ts, name));
        }
    }
    best.map(|(_, n)| n.to_string())
}

/// `PersistentVolumeClaimResize` admission on a main-resource update of a claim: growing the
/// request needs a bound claim whose class allows expansion (403 otherwise).
pub(crate) fn resize_admission(
    old: &Value,
    new: &Value,
    name: &str,
    class: impl Fn(&str) -> Option<Value>,
) -> Result<(), ApiError> {
    let size = |o: &Value| {
        o.at("/spec/resources/requests/storage")
            .and_then(v::quantity_of)
            .unwrap_or(0)
    };
    if size(new) <= size(old) {
        return Ok(());
    }
    if str_at(old, "/status/phase") != "Bound" {
        return Err(ApiError::forbidden(
            "",
            "persistentvolumeclaims",
            name,
            "Only bound persistent volume claims can be expanded",
        ));
    }
    let (nc, oc) = (claim_class(new), claim_class(old));
    let allowed = !nc.is_empty()
        && nc == oc
        && class(nc).is_some_and(|sc| sc.get("allowVolumeExpansion") == Some(&json!(true)));
    if !allowed {
        return Err(ApiError::forbidden(
            "",
            "persistentvolumeclaims",
            name,
            "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
        ));
    }
    Ok(())
}

/// `SetDefaults_PersistentVolumeClaim[Spec]`.
pub(super) fn default_pvc(pvc: &mut Value) {
    default_field(object_mut(pvc, "spec"), "volumeMode", json!("Filesystem"));
    default_phase(pvc, "Pending");
}

/// `NormalizeDataSources`: `dataSource` and `dataSourceRef` mirror each other when one is unset.
pub(super) fn normalize_data_sources(pvc: &mut Value) {
    let spec = object_mut(pvc, "spec");
    let ds = spec.get("dataSource").filter(|v| v.is_object()).cloned();
    let dsr = spec.get("dataSourceRef").filter(|v| v.is_object()).cloned();
    match (ds, dsr) {
        (Some(ds), None) => {
            spec.insert("dataSourceRef".into(), ds);
        }
        (None, Some(r))
            if r.get("namespace")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty) =>
        {
            let mut d = Map::new();
            for f in ["apiGroup", "kind", "name"] {
                if let Some(x) = r.get(f) {
                    d.insert(f.into(), x.clone());
                }
            }
            spec.insert("dataSource".into(), Value::Object(d));
        }
        _ => {}
    }
}

/// `ValidatePersistentVolumeClaim` (metadata and spec).
pub(super) fn validate_pvc(pvc: &Value) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(pvc, "name"));
    let spec = pvc.get("spec").unwrap_or(&Value::Null);
    access_modes(
        &mut errs,
        spec.get("accessModes"),
        "spec.accessModes",
        "at least 1 access mode is required",
    );
    if let Some(sel) = present(spec, "/selector") {
        label_selector(&mut errs, sel, "spec.selector");
    }
    match present(spec, "/resources/requests/storage") {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => positive_quantity(&mut errs, q, "spec.resources[storage]"),
    }
    class_name_errs(
        &mut errs,
        spec,
        "/storageClassName",
        "spec.storageClassName",
    );
    volume_mode_errs(&mut errs, pvc);
    for src in ["dataSource", "dataSourceRef"] {
        if let Some(ds) = present(spec, &format!("/{src}")) {
            for f in ["name", "kind"] {
                if str_at(ds, &format!("/{f}")).is_empty() {
                    errs.push(FieldError::required(format!("spec.{src}.{f}"), ""));
                }
            }
        }
    }
    errs
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.at("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `ValidatePersistentVolumeClaimUpdate` (includes the create validation of the new object).
pub(super) fn validate_pvc_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_pvc(new);
    let os = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    let ns = new.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut om = os.as_object().cloned().unwrap_or_default();
    let mut nm = ns.as_object().cloned().unwrap_or_default();
    // volumeName may be set once.
    if str_at(&os, "/volumeName").is_empty() {
        match nm.get("volumeName") {
            Some(x) => om.insert("volumeName".into(), x.clone()),
            None => om.remove("volumeName"),
        };
    }
    // storageClassName: upgrade from the beta annotation or from nil.
    let class_set =
        |m: &Map<String, Value>| m.get("storageClassName").is_some_and(|x| !x.is_null());
    let (old_ann, new_ann) = (
        annotation(old, BETA_STORAGE_CLASS_ANNOTATION),
        annotation(new, BETA_STORAGE_CLASS_ANNOTATION),
    );
    let new_class = nm.get("storageClassName").and_then(Value::as_str);
    let from_annotation = old_ann.is_some()
        && !class_set(&om)
        && new_class.is_some()
        && new_class == old_ann
        && (new_ann.is_none() || new_ann == old_ann);
    if from_annotation {
        nm.remove("storageClassName");
    } else {
        if old_ann.unwrap_or("") != new_ann.unwrap_or("") {
            errs.push(FieldError::invalid_str(
                format!("metadata.annotations.{BETA_STORAGE_CLASS_ANNOTATION}"),
                new_ann.unwrap_or(""),
                "field is immutable",
            ));
        }
        let from_nil =
            class_set(&nm) && !class_set(&om) && (old_ann.is_none() || new_class == old_ann);
        if from_nil {
            nm.remove("storageClassName");
        }
    }
    // Bound claims may change their request; the attributes class is checked elsewhere.
    if str_at(new, "/status/phase") == "Bound" {
        let old_req = os.at("/resources/requests/storage").cloned();
        if let Some(req) = nm
            .get_mut("resources")
            .and_then(|r| r.get_mut("requests"))
            .and_then(Value::as_object_mut)
        {
            match old_req {
                Some(q) => req.insert("storage".into(), q),
                None => req.remove("storage"),
            };
        }
    }
    match om.get("volumeAttributesClassName") {
        Some(x) => nm.insert("volumeAttributesClassName".into(), x.clone()),
        None => nm.remove("volumeAttributesClassName"),
    };
    if !same(Some(&Value::Object(om)), Some(&Value::Object(nm))) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ));
    }
    let size = |s: &Value| {
        s.at("/resources/requests/storage")
            .and_then(v::quantity_of)
            .unwrap_or(0)
    };
    if size(&ns) < size(&os) {
        // RecoverVolumeExpansionFailure (GA in 1.34): shrinking is allowed down to just above
        // the recorded capacity.
        let status_size = new
            .at("/status/capacity/storage")
            .and_then(v::quantity_of)
            .unwrap_or(0);
        if size(&ns) <= status_size {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    if !same(os.get("volumeMode"), ns.get("volumeMode")) {
        errs.push(FieldError::invalid(
            "volumeMode",
            render(ns.get("volumeMode").unwrap_or(&Value::Null)),
            "field is immutable",
        ));
    }
    errs
}

/// A ReadWriteOnce claim for `size` of `class` (None: no `storageClassName`, so the default
/// class applies).
pub fn pvc_object(ns: &str, name: &str, class: Option<&str>, size: &str) -> Value {
    let mut pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    });
    if let Some(c) = class {
        pvc["spec"]["storageClassName"] = json!(c);
    }
    pvc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::common::msgs;

    #[test]
    fn pvc_rules() {
        let mut p = pvc_object("default", "c", Some("fast"), "1Gi");
        default_pvc(&mut p);
        assert_eq!(p["spec"]["volumeMode"], "Filesystem");
        assert_eq!(p["status"]["phase"], "Pending");
        assert!(validate_pvc(&p).is_empty());
        let mut bad = p.clone();
        bad["spec"]["accessModes"] = json!(["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"]);
        bad["spec"]["resources"]["requests"]["storage"] = json!("0");
        assert_eq!(
            msgs(&validate_pvc(&bad)),
            [
                "spec.accessModes: Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
            ]
        );
        let mut upd = p.clone();
        upd["spec"]["volumeName"] = json!("pv-1");
        assert!(validate_pvc_update(&p, &upd).is_empty());
        let mut again = upd.clone();
        again["spec"]["volumeName"] = json!("pv-2");
        assert_eq!(
            msgs(&validate_pvc_update(&upd, &again)),
            [
                "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
            ]
        );
    }

    #[test]
    fn default_class_is_the_newest_default_then_first_by_name() {
        let classes = [
            json!({"metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}}),
            json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}}),
            json!({"metadata": {"name": "c", "creationTimestamp": "2026-01-02T00:00:00Z"}}),
        ];
        assert_eq!(default_class(classes.iter()).as_deref(), Some("a"));
    }
}
