//! CSINodes (`storage.k8s.io/v1`, cluster-scoped): `ValidateCSINode[Update]` (driver names, node
//! IDs, allocatable counts, topology keys; a driver entry may change only its `allocatable`).
//! It uses `common`.

use super::common::{arr_at, present, str_at};
use crate::meta;
use crate::validation::{self as v, FieldError, quote, render, same};
use serde_json::Value;

/// `ValidateCSINode` (node IDs up to 256 bytes, as the registry allows).
pub(super) fn validate_csinode(n: &Value) -> Vec<FieldError> {
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
pub(super) fn validate_csinode_update(old: &Value, new: &Value) -> Vec<FieldError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::common::msgs;
    use serde_json::json;

    #[test]
    fn csinode_rules() {
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
    }
}
