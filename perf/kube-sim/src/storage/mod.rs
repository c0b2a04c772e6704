//! Storage kinds: PersistentVolumeClaims, PersistentVolumes (core `v1`), StorageClasses and
//! CSINodes (`storage.k8s.io/v1`). The defaults of `pkg/apis/{core,storage}/v1`, the registry
//! strategies (status reset on create, `lastPhaseTransitionTime`), the validation of
//! `pkg/apis/core/validation` (`ValidatePersistentVolumeClaim[Update|StatusUpdate]`,
//! `ValidatePersistentVolume[Update|StatusUpdate]`) and `pkg/apis/storage/validation`
//! (`ValidateStorageClass[Update]`, `ValidateCSINode[Update]`), and the admission plugins that
//! touch claims (`DefaultStorageClass`, `PersistentVolumeClaimResize`), with the real field paths
//! and messages.
//!
//! This module holds the storage keys and the registry strategies the generic store calls for
//! these kinds ([`admit_create`], [`admit_update`], [`admit_status_update`]: decoding, defaults,
//! the create strategy, validation). Below it, one module per kind: `pvc` (claims and their
//! admission plugins), `pv`, `class` (StorageClasses) and `csinode`; under those, `selectors`
//! (label and node selector validation, which `policy` and `dra` use too) and `common` (what the
//! kinds share). None of them uses this module.

mod class;
mod common;
mod csinode;
mod pv;
mod pvc;
mod selectors;

use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use crate::resources::ResourceDef;
use crate::validation::{self as v, FieldError};
use class::{default_sc, validate_sc, validate_sc_update};
use common::{basic_quantity, default_phase, object_mut};
use csinode::{validate_csinode, validate_csinode_update};
use pv::{default_pv, validate_pv, validate_pv_update};
use pvc::{default_pvc, normalize_data_sources, validate_pvc, validate_pvc_update};
use serde_json::{Value, json};

pub use class::storage_class_object;
pub(crate) use common::{arr_at, str_at};
pub use pvc::{BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION, pvc_object};
pub(crate) use pvc::{claim_class, default_class, resize_admission};
pub(crate) use selectors::{label_selector, node_selector};

/// Storage key of PersistentVolumeClaims.
pub(crate) const PVC_KEY: &str = "/persistentvolumeclaims";
/// Storage key of PersistentVolumes.
pub(crate) const PV_KEY: &str = "/persistentvolumes";
/// Storage key of StorageClasses.
pub(crate) const SC_KEY: &str = "storage.k8s.io/storageclasses";
/// Storage key of CSINodes.
pub(crate) const CSINODE_KEY: &str = "storage.k8s.io/csinodes";

/// Whether `key` is one of the kinds this module handles.
pub(crate) fn handles(key: &str) -> bool {
    matches!(key, PVC_KEY | PV_KEY | SC_KEY | CSINODE_KEY)
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
                .at("/metadata/annotations")
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
            if let Some(cap) = new.at("/status/capacity").and_then(Value::as_object) {
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
                old.at("/status/lastPhaseTransitionTime"),
                new.at("/status/lastPhaseTransitionTime"),
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
