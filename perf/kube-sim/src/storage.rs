//! Storage kinds: PersistentVolumeClaims, PersistentVolumes (core `v1`), StorageClasses and
//! CSINodes (`storage.k8s.io/v1`). The defaults of `pkg/apis/{core,storage}/v1`, the registry
//! strategies (status reset on create, `lastPhaseTransitionTime`), the validation of
//! `pkg/apis/core/validation` (`ValidatePersistentVolumeClaim[Update|StatusUpdate]`,
//! `ValidatePersistentVolume[Update|StatusUpdate]`) and `pkg/apis/storage/validation`
//! (`ValidateStorageClass[Update]`, `ValidateCSINode[Update]`), and the admission plugins that
//! touch claims (`DefaultStorageClass`, `PersistentVolumeClaimResize`), with the real field paths
//! and messages. The generic store calls [`admit_create`], [`admit_update`] and
//! [`admit_status_update`] for these kinds.

use crate::error::ApiError;
use crate::meta;
use crate::resources::ResourceDef;
use crate::validation::{self as v, FieldError, quote, render, same};
use serde_json::{Map, Value, json};

/// Storage key of PersistentVolumeClaims.
pub(crate) const PVC_KEY: &str = "/persistentvolumeclaims";
/// Storage key of PersistentVolumes.
pub(crate) const PV_KEY: &str = "/persistentvolumes";
/// Storage key of StorageClasses.
pub(crate) const SC_KEY: &str = "storage.k8s.io/storageclasses";
/// Storage key of CSINodes.
pub(crate) const CSINODE_KEY: &str = "storage.k8s.io/csinodes";

/// StorageClass annotation marking the default class (`DefaultStorageClass` admission).
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_DEFAULT_CLASS_ANNOTATION: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// The deprecated claim annotation naming its class (read before `spec.storageClassName`).
pub const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
const PV_RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];
const SC_RECLAIM_POLICIES: [&str; 2] = ["Delete", "Retain"];
const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];
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

/// Whether `key` is one of the kinds this module handles.
pub(crate) fn handles(key: &str) -> bool {
    matches!(key, PVC_KEY | PV_KEY | SC_KEY | CSINODE_KEY)
}

/// A string at a JSON pointer, or "".
pub(crate) fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// An array at a JSON pointer, or empty.
pub(crate) fn arr_at<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A present, non-null value at a JSON pointer.
fn present<'a>(obj: &'a Value, ptr: &str) -> Option<&'a Value> {
    obj.pointer(ptr).filter(|v| !v.is_null())
}

/// `obj[field]` as an object, created (or replaced when not an object).
fn object_mut<'a>(obj: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj.as_object_mut().expect("object");
    let e = m.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut().expect("object")
}

/// Sets `field` of `m` when missing or null.
fn default_field(m: &mut Map<String, Value>, field: &str, value: Value) {
    if m.get(field).is_none_or(Value::is_null) {
        m.insert(field.into(), value);
    }
}

/// Sets `status.phase` when missing or empty.
fn default_phase(obj: &mut Value, phase: &str) {
    let st = object_mut(obj, "status");
    if st
        .get("phase")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        st.insert("phase".into(), json!(phase));
    }
}

/// The class of a claim as `GetPersistentVolumeClaimClass` reads it (beta annotation first).
pub(crate) fn claim_class(pvc: &Value) -> &str {
    let ann = pvc
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .and_then(Value::as_str);
    ann.unwrap_or_else(|| str_at(pvc, "/spec/storageClassName"))
}

fn is_default_class(sc: &Value) -> bool {
    let ann = sc.pointer("/metadata/annotations");
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

/// The 400 the decoder answers for an object it cannot read (here: malformed quantities).
fn decode(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let lists: &[&str] = match def.key.as_ref() {
        PVC_KEY => &[
            "/spec/resources/requests",
            "/spec/resources/limits",
            "/status/capacity",
            "/status/allocatedResources",
        ],
        PV_KEY => &["/spec/capacity"],
        _ => &[],
    };
    for p in lists {
        v::decode_quantities(obj, p).map_err(|m| {
            ApiError::bad_request(format!(
                "{k} in version \"{}\" cannot be handled as a {k}: {m}",
                def.version,
                k = def.kind
            ))
        })?;
    }
    Ok(())
}

fn invalid(def: &ResourceDef, name: &str, errs: Vec<FieldError>) -> Result<(), ApiError> {
    v::check(&def.group, &def.kind, name, errs)
}

/// Create: defaults, the create strategy, admission (`default_class` is the class the
/// `DefaultStorageClass` plugin would assign) and validation. `.status` is already dropped for
/// PVs and PVCs.
pub(crate) fn admit_create(
    def: &ResourceDef,
    obj: &mut Value,
    name: &str,
    default_class: Option<String>,
) -> Result<(), ApiError> {
    decode(def, obj)?;
    let errs = match def.key.as_ref() {
        PVC_KEY => {
            default_pvc(obj);
            let spec = object_mut(obj, "spec");
            let unset = spec.get("storageClassName").is_none_or(Value::is_null);
            let beta = obj
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
                .is_some();
            if unset
                && !beta
                && let Some(c) = default_class
            {
                object_mut(obj, "spec").insert("storageClassName".into(), json!(c));
            }
            normalize_data_sources(obj);
            validate_pvc(obj)
        }
        PV_KEY => {
            default_pv(obj);
            obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": meta::now()});
            validate_pv(obj)
        }
        SC_KEY => {
            default_sc(obj);
            validate_sc(obj)
        }
        CSINODE_KEY => validate_csinode(obj),
        _ => Vec::new(),
    };
    invalid(def, name, errs)
}

/// Main-resource update: `new` already carries the old status and metadata. Defaults, then the
/// update validation.
pub(crate) fn admit_update(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    name: &str,
) -> Result<(), ApiError> {
    decode(def, new)?;
    let errs = match def.key.as_ref() {
        PVC_KEY => {
            default_pvc(new);
            validate_pvc_update(old, new)
        }
        PV_KEY => {
            default_pv(new);
            validate_pv_update(old, new)
        }
        SC_KEY => {
            default_sc(new);
            let mut e = validate_sc(new);
            e.extend(validate_sc_update(old, new));
            e
        }
        CSINODE_KEY => validate_csinode_update(old, new),
        _ => Vec::new(),
    };
    invalid(def, name, errs)
}

/// `/status` update: `new` is the old object with the new status. `rv_given`: the request named
/// a `resourceVersion` (PV and PVC status updates require one).
pub(crate) fn admit_status_update(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    name: &str,
    rv_given: bool,
) -> Result<(), ApiError> {
    decode(def, new)?;
    let mut errs = Vec::new();
    match def.key.as_ref() {
        PVC_KEY => {
            default_phase(new, "Pending");
            if !rv_given {
                errs.push(FieldError::required("resourceVersion", ""));
            }
            if let Some(cap) = new.pointer("/status/capacity").and_then(Value::as_object) {
                for (r, q) in cap {
                    basic_quantity(&mut errs, q, &format!("status.capacity[{r}]"));
                }
            }
        }
        PV_KEY => {
            default_phase(new, "Pending");
            if !rv_given {
                errs.push(FieldError::required("resourceVersion", ""));
            }
            let (op, np) = (str_at(old, "/status/phase"), str_at(new, "/status/phase"));
            let (ot, nt) = (
                old.pointer("/status/lastPhaseTransitionTime"),
                new.pointer("/status/lastPhaseTransitionTime"),
            );
            if op != np
                && (nt.is_none_or(Value::is_null) || nt == ot)
                && !(op.is_empty() && np == "Pending")
            {
                object_mut(new, "status")
                    .insert("lastPhaseTransitionTime".into(), json!(meta::now()));
            }
        }
        _ => {}
    }
    invalid(def, name, errs)
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
        o.pointer("/spec/resources/requests/storage")
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
fn default_pvc(pvc: &mut Value) {
    default_field(object_mut(pvc, "spec"), "volumeMode", json!("Filesystem"));
    default_phase(pvc, "Pending");
}

/// `NormalizeDataSources`: `dataSource` and `dataSourceRef` mirror each other when one is unset.
fn normalize_data_sources(pvc: &mut Value) {
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

/// `SetDefaults_PersistentVolume` and `SetDefaults_HostPathVolumeSource`.
fn default_pv(pv: &mut Value) {
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

/// `SetDefaults_StorageClass`.
fn default_sc(sc: &mut Value) {
    let m = sc.as_object_mut().expect("checked object");
    default_field(m, "reclaimPolicy", json!("Delete"));
    default_field(m, "volumeBindingMode", json!("Immediate"));
}

fn access_modes(errs: &mut Vec<FieldError>, modes: Option<&Value>, path: &str, detail: &str) {
    let list = modes
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if list.is_empty() {
        errs.push(FieldError::required(path, detail));
    }
    let (mut rwop, mut other) = (false, false);
    for m in list {
        let s = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&s) {
            errs.push(FieldError::not_supported(path, render(m), &ACCESS_MODES));
        }
        if s == "ReadWriteOncePod" {
            rwop = true;
        } else if ACCESS_MODES.contains(&s) {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

pub(crate) fn label_selector(errs: &mut Vec<FieldError>, sel: &Value, path: &str) {
    if let Some(labels) = sel.get("matchLabels").and_then(Value::as_object) {
        let p = format!("{path}.matchLabels");
        for (k, val) in labels {
            errs.extend(v::label_name(k, &p));
            let s = val.as_str().unwrap_or("");
            for m in v::label_value(s) {
                errs.push(FieldError::invalid_str(&p, s, &m));
            }
        }
    }
    for (i, req) in arr_at(sel, "/matchExpressions").iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let values = arr_at(req, "/values");
        match str_at(req, "/operator") {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            op => errs.push(FieldError::invalid_str(
                format!("{p}.operator"),
                op,
                "not a valid selector operator",
            )),
        }
        errs.extend(v::label_name(str_at(req, "/key"), &format!("{p}.key")));
        for (j, val) in values.iter().enumerate() {
            let s = val.as_str().unwrap_or("");
            for m in v::label_value(s) {
                errs.push(FieldError::invalid_str(format!("{p}.values[{j}]"), s, &m));
            }
        }
    }
}

fn class_name_errs(errs: &mut Vec<FieldError>, obj: &Value, ptr: &str, path: &str) {
    let name = str_at(obj, ptr);
    if !name.is_empty() {
        for m in v::dns1123_subdomain(name) {
            errs.push(FieldError::invalid_str(path, name, &m));
        }
    }
}

fn volume_mode_errs(errs: &mut Vec<FieldError>, obj: &Value) {
    if let Some(m) = present(obj, "/spec/volumeMode")
        && !m.as_str().is_some_and(|s| VOLUME_MODES.contains(&s))
    {
        errs.push(FieldError::not_supported(
            "spec.volumeMode",
            render(m),
            &VOLUME_MODES,
        ));
    }
}

/// `Quantity.Value()`: rounded away from zero to an integer.
fn quantity_int(nanos: i128) -> i128 {
    let g = 1_000_000_000;
    if nanos >= 0 {
        (nanos + g - 1) / g
    } else {
        -((-nanos + g - 1) / g)
    }
}

/// The string form of a quantity value, as `Quantity.String()` (approximated by the input).
fn quantity_str(q: &Value) -> String {
    match q {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `validateBasicResource`.
fn basic_quantity(errs: &mut Vec<FieldError>, q: &Value, path: &str) {
    let n = v::quantity_of(q).unwrap_or(0);
    if n < 0 {
        errs.push(FieldError::invalid(
            path,
            quantity_int(n).to_string(),
            "must be a valid resource quantity",
        ));
    }
}

/// `ValidatePositiveQuantityValue`.
fn positive_quantity(errs: &mut Vec<FieldError>, q: &Value, path: &str) {
    if v::quantity_of(q).unwrap_or(0) <= 0 {
        errs.push(FieldError::invalid_str(
            path,
            &quantity_str(q),
            "must be greater than zero",
        ));
    }
}

/// `ValidatePersistentVolumeClaim` (metadata and spec).
pub(crate) fn validate_pvc(pvc: &Value) -> Vec<FieldError> {
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
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `ValidatePersistentVolumeClaimUpdate` (includes the create validation of the new object).
pub(crate) fn validate_pvc_update(old: &Value, new: &Value) -> Vec<FieldError> {
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
        let old_req = os.pointer("/resources/requests/storage").cloned();
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
        s.pointer("/resources/requests/storage")
            .and_then(v::quantity_of)
            .unwrap_or(0)
    };
    if size(&ns) < size(&os) {
        // RecoverVolumeExpansionFailure (GA in 1.34): shrinking is allowed down to just above
        // the recorded capacity.
        let status_size = new
            .pointer("/status/capacity/storage")
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

fn node_selector_requirement(errs: &mut Vec<FieldError>, req: &Value, p: &str) {
    let n = arr_at(req, "/values").len();
    match str_at(req, "/operator") {
        "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
            format!("{p}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::forbidden(
            format!("{p}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if n != 1 => errs.push(FieldError::required(
            format!("{p}.values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        op => errs.push(FieldError::invalid_str(
            format!("{p}.operator"),
            op,
            "not a valid selector operator",
        )),
    }
    errs.extend(v::label_name(str_at(req, "/key"), &format!("{p}.key")));
}

fn node_field_requirement(errs: &mut Vec<FieldError>, req: &Value, p: &str) {
    let values = arr_at(req, "/values");
    match str_at(req, "/operator") {
        "In" | "NotIn" => {
            if values.len() != 1 {
                errs.push(FieldError::required(
                    format!("{p}.values"),
                    "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
                ));
            }
        }
        op => errs.push(FieldError::invalid_str(
            format!("{p}.operator"),
            op,
            "not a valid selector operator",
        )),
    }
    let key = str_at(req, "/key");
    if key != "metadata.name" {
        errs.push(FieldError::invalid_str(
            format!("{p}.key"),
            key,
            "not a valid field selector key",
        ));
    } else {
        for (i, val) in values.iter().enumerate() {
            let s = val.as_str().unwrap_or("");
            for m in v::dns1123_subdomain(s) {
                errs.push(FieldError::invalid_str(format!("{p}.values[{i}]"), s, &m));
            }
        }
    }
}

/// `ValidateNodeSelector` at `path` (e.g. `spec.nodeAffinity.required`).
pub(crate) fn node_selector(errs: &mut Vec<FieldError>, sel: &Value, path: &str) {
    let terms = arr_at(sel, "/nodeSelectorTerms");
    if terms.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.nodeSelectorTerms"),
            "must have at least one node selector term",
        ));
        return;
    }
    for (i, term) in terms.iter().enumerate() {
        let tp = format!("{path}.nodeSelectorTerms[{i}]");
        for (j, req) in arr_at(term, "/matchExpressions").iter().enumerate() {
            node_selector_requirement(errs, req, &format!("{tp}.matchExpressions[{j}]"));
        }
        for (j, req) in arr_at(term, "/matchFields").iter().enumerate() {
            node_field_requirement(errs, req, &format!("{tp}.matchFields[{j}]"));
        }
    }
}

/// `ValidatePersistentVolume` (metadata and spec).
pub(crate) fn validate_pv(pv: &Value) -> Vec<FieldError> {
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
pub(crate) fn validate_pv_update(old: &Value, new: &Value) -> Vec<FieldError> {
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

/// `ValidateStorageClass`.
pub(crate) fn validate_sc(sc: &Value) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(sc, "name"));
    let prov = str_at(sc, "/provisioner");
    if prov.is_empty() {
        errs.push(FieldError::required("provisioner", ""));
    } else {
        let lower = prov.to_ascii_lowercase();
        for m in v::qualified_name(&lower) {
            errs.push(FieldError::invalid_str("provisioner", &lower, &m));
        }
    }
    if let Some(params) = sc.get("parameters").and_then(Value::as_object) {
        if params.len() > 512 {
            errs.push(FieldError::too_long("parameters", 512));
        } else {
            let mut size = 0;
            for (k, val) in params {
                if k.is_empty() {
                    errs.push(FieldError::invalid_str(
                        "parameters",
                        k,
                        "field can not be empty.",
                    ));
                }
                size += k.len() + val.as_str().map_or(0, str::len);
            }
            if size > 256 * 1024 {
                errs.push(FieldError::too_long("parameters", 256 * 1024));
            }
        }
    }
    if let Some(r) = present(sc, "/reclaimPolicy").filter(|r| r.as_str() != Some(""))
        && !r.as_str().is_some_and(|s| SC_RECLAIM_POLICIES.contains(&s))
    {
        errs.push(FieldError::not_supported(
            "reclaimPolicy",
            render(r),
            &SC_RECLAIM_POLICIES,
        ));
    }
    match present(sc, "/volumeBindingMode") {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(m) if !m.as_str().is_some_and(|s| BINDING_MODES.contains(&s)) => errs.push(
            FieldError::not_supported("volumeBindingMode", render(m), &BINDING_MODES),
        ),
        Some(_) => {}
    }
    // validateAllowedTopologies: a term equal to an earlier one (or empty, which equals the
    // zero entries the real code preallocates) is a duplicate.
    let terms = arr_at(sc, "/allowedTopologies");
    let mut seen: Vec<Vec<(String, Vec<String>)>> = Vec::new();
    for (i, term) in terms.iter().enumerate() {
        let tp = format!("allowedTopologies[{i}]");
        let mut expr_map: Vec<(String, Vec<String>)> = Vec::new();
        for (j, expr) in arr_at(term, "/matchLabelExpressions").iter().enumerate() {
            let ep = format!("{tp}.matchLabelExpressions[{j}]");
            let values = arr_at(expr, "/values");
            if values.is_empty() {
                errs.push(FieldError::required(format!("{ep}.values"), ""));
            }
            let mut set: Vec<String> = Vec::new();
            for (k, val) in values.iter().enumerate() {
                let s = val.as_str().unwrap_or("").to_string();
                if set.contains(&s) {
                    errs.push(FieldError::duplicate(
                        format!("{ep}.values[{k}]"),
                        quote(&s),
                    ));
                } else {
                    set.push(s);
                }
            }
            set.sort();
            let key = str_at(expr, "/key").to_string();
            errs.extend(v::label_name(&key, &format!("{ep}.key")));
            if expr_map.iter().any(|(k, _)| *k == key) {
                errs.push(FieldError::duplicate(format!("{ep}.key"), quote(&key)));
            }
            expr_map.retain(|(k, _)| *k != key);
            expr_map.push((key, set));
        }
        expr_map.sort();
        if expr_map.is_empty() || seen.contains(&expr_map) {
            errs.push(FieldError::duplicate(
                format!("{tp}.matchLabelExpressions"),
                quote(""),
            ));
        }
        seen.push(expr_map);
    }
    errs
}

/// `ValidateStorageClassUpdate`.
pub(crate) fn validate_sc_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !same(old.get("parameters"), new.get("parameters")) {
        errs.push(FieldError::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    if str_at(old, "/provisioner") != str_at(new, "/provisioner") {
        errs.push(FieldError::forbidden(
            "provisioner",
            "updates to provisioner are forbidden.",
        ));
    }
    if str_at(old, "/reclaimPolicy") != str_at(new, "/reclaimPolicy") {
        errs.push(FieldError::forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    if !same(old.get("volumeBindingMode"), new.get("volumeBindingMode")) {
        errs.push(FieldError::invalid(
            "volumeBindingMode",
            render(new.get("volumeBindingMode").unwrap_or(&Value::Null)),
            "field is immutable",
        ));
    }
    errs
}

/// `ValidateCSINode` (node IDs up to 256 bytes, as the registry allows).
pub(crate) fn validate_csinode(n: &Value) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(n, "name"));
    let mut names: Vec<&str> = Vec::new();
    for (i, d) in arr_at(n, "/spec/drivers").iter().enumerate() {
        let p = format!("spec.drivers[{i}]");
        let name = str_at(d, "/name");
        errs.extend(v::csi_driver_name(name, &format!("{p}.name")));
        let id = str_at(d, "/nodeID");
        if id.is_empty() {
            errs.push(FieldError::required(format!("{p}.nodeID"), ""));
        }
        if id.len() > 256 {
            errs.push(FieldError::invalid_str(
                format!("{p}.nodeID"),
                id,
                "must be 256 characters or less",
            ));
        }
        if let Some(c) = present(d, "/allocatable/count") {
            let ok = c.as_i64().is_some_and(|c| c >= 0);
            if !ok {
                errs.push(FieldError::invalid(
                    format!("{p}.allocatable.count"),
                    render(c),
                    "must be greater than or equal to 0",
                ));
            }
        }
        if names.contains(&name) {
            errs.push(FieldError::duplicate(format!("{p}.name"), quote(name)));
        }
        names.push(name);
        let mut keys: Vec<&str> = Vec::new();
        for k in arr_at(d, "/topologyKeys") {
            let k = k.as_str().unwrap_or("");
            if k.is_empty() {
                errs.push(FieldError::required(&p, ""));
            }
            if keys.contains(&k) {
                errs.push(FieldError::duplicate(&p, quote(k)));
            }
            keys.push(k);
            for m in v::qualified_name(k) {
                errs.push(FieldError::invalid_str(&p, k, &m));
            }
        }
    }
    errs
}

/// `ValidateCSINodeUpdate`: a driver entry may change only its `allocatable`
/// (`MutableCSINodeAllocatableCount`).
pub(crate) fn validate_csinode_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate_csinode(new);
    let strip = |d: &Value| {
        let mut d = d.clone();
        if let Some(m) = d.as_object_mut() {
            m.remove("allocatable");
        }
        d
    };
    for od in arr_at(old, "/spec/drivers") {
        for nd in arr_at(new, "/spec/drivers") {
            if od.get("name") == nd.get("name") && !same(Some(&strip(od)), Some(&strip(nd))) {
                errs.push(FieldError::invalid(
                    "spec.drivers",
                    render(nd),
                    "field is immutable",
                ));
            }
        }
    }
    errs
}

/// A StorageClass (`reclaimPolicy` and `volumeBindingMode` as given; the server defaults them
/// when None).
pub fn storage_class_object(name: &str, provisioner: &str, binding_mode: Option<&str>) -> Value {
    let mut sc = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
    });
    if let Some(m) = binding_mode {
        sc["volumeBindingMode"] = json!(m);
    }
    sc
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

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::message).collect()
    }

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

    #[test]
    fn storage_class_and_csinode_rules() {
        let mut sc = storage_class_object("fast", "csi.example.com", None);
        default_sc(&mut sc);
        assert_eq!(
            (&sc["volumeBindingMode"], &sc["reclaimPolicy"]),
            (&json!("Immediate"), &json!("Delete"))
        );
        assert!(validate_sc(&sc).is_empty());
        sc["allowedTopologies"] = json!([{"matchLabelExpressions": [{"key": "zone", "values": []}]}, {"matchLabelExpressions": []}]);
        assert_eq!(
            msgs(&validate_sc(&sc)),
            [
                "allowedTopologies[0].matchLabelExpressions[0].values: Required value",
                "allowedTopologies[1].matchLabelExpressions: Duplicate value: \"\"",
            ]
        );
        let n = json!({"metadata": {"name": "node-1"}, "spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": -1}},
            {"name": "csi.example.com", "nodeID": ""}]}});
        assert_eq!(
            msgs(&validate_csinode(&n)),
            [
                "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
                "spec.drivers[1].nodeID: Required value",
                "spec.drivers[1].name: Duplicate value: \"csi.example.com\"",
            ]
        );
        let classes = [
            json!({"metadata": {"name": "b", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}}),
            json!({"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}}),
            json!({"metadata": {"name": "c", "creationTimestamp": "2026-01-02T00:00:00Z"}}),
        ];
        assert_eq!(default_class(classes.iter()).as_deref(), Some("a"));
    }
}
