//! StorageClasses (`storage.k8s.io/v1`, cluster-scoped): the defaults (`SetDefaults_StorageClass`)
//! and `ValidateStorageClass[Update]` (provisioner, parameters, reclaim policy, binding mode,
//! allowed topologies; parameters, provisioner, reclaim policy and binding mode immutable). It
//! uses `common`.

use super::common::{arr_at, default_field, present, str_at};
use crate::meta;
use crate::validation::{self as v, FieldError, quote, render, same};
use serde_json::{Value, json};

const SC_RECLAIM_POLICIES: [&str; 2] = ["Delete", "Retain"];
const BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];

/// `SetDefaults_StorageClass`.
pub(super) fn default_sc(sc: &mut Value) {
    let m = sc.as_object_mut().expect("checked object");
    default_field(m, "reclaimPolicy", json!("Delete"));
    default_field(m, "volumeBindingMode", json!("Immediate"));
}

/// `ValidateStorageClass`.
pub(super) fn validate_sc(sc: &Value) -> Vec<FieldError> {
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
pub(super) fn validate_sc_update(old: &Value, new: &Value) -> Vec<FieldError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::common::msgs;

    #[test]
    fn storage_class_rules() {
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
    }
}
