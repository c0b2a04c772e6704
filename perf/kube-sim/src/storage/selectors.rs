//! Label and node selector validation as `pkg/apis/core/validation` does it
//! (`ValidateLabelSelector`, `ValidateNodeSelector` with its match expressions and match
//! fields), with the real field paths and messages. Volumes' node affinity uses them, and so do
//! PodDisruptionBudgets (`policy`) and the DRA kinds (`dra`).

use super::common::{arr_at, str_at};
use crate::validation::{self as v, FieldError};
use serde_json::Value;

/// `ValidateLabelSelector` at `path` (e.g. `spec.selector`).
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
