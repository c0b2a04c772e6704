//! Patch application: JSON merge patch (RFC 7386), a strategic merge patch that knows the merge
//! keys of the lists Magma and kubectl touch (conditions by `type`, containers by `name`, ...), and
//! JSON patch (RFC 6902).

use crate::meta::Pointer;
use serde_json::{Map, Value};

/// How a PATCH body is interpreted (from its `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (server-side apply, approximated as a merge patch).
    Apply,
}

impl PatchKind {
    /// From a `Content-Type` header value.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/json-patch+json" => Some(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// RFC 7386 merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// Merge key of a list field under strategic merge (the `patchMergeKey` of the Go types).
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "conditions" => "type",
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        // A pod's `status.resourceClaimStatuses` (`patchMergeKey:"name"`).
        | "resourceClaimStatuses"
        | "schedulingGates"
        | "drivers" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        // ResourceClaim `status.reservedFor` (`patchMergeKey:"uid"`): kube-scheduler's Unreserve
        // deletes its pod's entry with `{"$patch": "delete", "uid": …}`.
        "ownerReferences" | "reservedFor" => "uid",
        "addresses" => "type",
        "hostAliases" => "ip",
        "taints" => "key",
        _ => return None,
    })
}

/// Lists of scalars merged as sets under strategic merge.
fn merge_set(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Strategic merge patch, limited to the merge keys in [`merge_key`]; other lists are replaced.
/// Handles the `$patch: delete|replace`, `$setElementOrder/*`, `$retainKeys` and
/// `$deleteFromPrimitiveList/*` directives kubectl emits (order directives are ignored).
pub fn strategic_merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut p = p.clone();
        p.remove("$patch");
        *target = Value::Object(p);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("object");
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(del)) = (t.get_mut(field), v) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        if let Value::Object(vo) = v
            && vo.get("$patch").and_then(Value::as_str) == Some("delete")
        {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), v) {
            (Some(Value::Array(cur)), Value::Array(items)) if merge_key(k).is_some() => {
                let key = merge_key(k).expect("checked");
                merge_keyed_list(cur, items, key);
            }
            (Some(Value::Array(cur)), Value::Array(items)) if merge_set(k) => {
                for it in items {
                    if !cur.contains(it) {
                        cur.push(it.clone());
                    }
                }
            }
            (Some(cur @ Value::Object(_)), Value::Object(_)) => strategic_merge(cur, v),
            _ => {
                let mut fresh = Value::Null;
                strategic_merge_fresh(&mut fresh, v);
                t.insert(k.clone(), fresh);
            }
        }
    }
}

/// A value inserted where nothing was: directives still have to be stripped.
fn strategic_merge_fresh(target: &mut Value, v: &Value) {
    match v {
        Value::Object(_) => strategic_merge(target, v),
        Value::Array(items) => {
            *target = Value::Array(
                items
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .map(|i| {
                        let mut t = Value::Null;
                        strategic_merge_fresh(&mut t, i);
                        t
                    })
                    .collect(),
            )
        }
        _ => *target = v.clone(),
    }
}

fn merge_keyed_list(cur: &mut Vec<Value>, items: &[Value], key: &str) {
    for it in items {
        let Some(kv) = it.get(key) else {
            cur.push(it.clone());
            continue;
        };
        let pos = cur.iter().position(|c| c.get(key) == Some(kv));
        let delete = it.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                cur.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(&mut cur[i], it),
            (None, false) => {
                let mut t = Value::Null;
                strategic_merge_fresh(&mut t, it);
                cur.push(t);
            }
        }
    }
}

fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(ptr: &str) -> Result<(Vec<String>, String), String> {
    let rest = ptr
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {ptr:?}"))?;
    let mut toks: Vec<String> = rest.split('/').map(unescape).collect();
    let last = toks.pop().unwrap_or_default();
    Ok((toks, last))
}

fn walk_mut<'a>(root: &'a mut Value, toks: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = root;
    for t in toks {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(t)
                .ok_or_else(|| format!("missing path element {t:?}"))?,
            Value::Array(a) => {
                let i: usize = t
                    .parse()
                    .map_err(|_| format!("invalid array index {t:?}"))?;
                a.get_mut(i)
                    .ok_or_else(|| format!("array index {i} out of range"))?
            }
            _ => return Err(format!("cannot traverse into {t:?}")),
        };
    }
    Ok(cur)
}

fn pointer_remove(root: &mut Value, ptr: &str) -> Result<Value, String> {
    let (toks, last) = split_pointer(ptr)?;
    match walk_mut(root, &toks)? {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| format!("missing key {last:?}")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid array index {last:?}"))?;
            (i < a.len())
                .then(|| a.remove(i))
                .ok_or_else(|| format!("array index {i} out of range"))
        }
        _ => Err(format!("cannot remove {ptr:?}")),
    }
}

fn pointer_add(root: &mut Value, ptr: &str, v: Value) -> Result<(), String> {
    if ptr.is_empty() {
        *root = v;
        return Ok(());
    }
    let (toks, last) = split_pointer(ptr)?;
    match walk_mut(root, &toks)? {
        Value::Object(m) => {
            m.insert(last, v);
            Ok(())
        }
        Value::Array(a) if last == "-" => {
            a.push(v);
            Ok(())
        }
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid array index {last:?}"))?;
            if i > a.len() {
                return Err(format!("array index {i} out of range"));
            }
            a.insert(i, v);
            Ok(())
        }
        _ => Err(format!("cannot add at {ptr:?}")),
    }
}

/// RFC 6902 JSON patch.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops.as_array().ok_or("json patch must be an array")?;
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).ok_or("missing op")?;
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .ok_or("missing path")?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("missing value for {kind}"))
        };
        let from = || {
            op.get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("missing from for {kind}"))
        };
        match kind {
            "add" => pointer_add(target, path, value()?)?,
            "remove" => {
                pointer_remove(target, path)?;
            }
            "replace" => {
                pointer_remove(target, path)?;
                pointer_add(target, path, value()?)?;
            }
            "test" => {
                if target.at(path) != Some(&value()?) {
                    return Err(format!("test failed at {path:?}"));
                }
            }
            "move" => {
                let v = pointer_remove(target, from()?)?;
                pointer_add(target, path, v)?;
            }
            "copy" => {
                let v = target.at(from()?).cloned().ok_or("copy source missing")?;
                pointer_add(target, path, v)?;
            }
            other => return Err(format!("unknown op {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let mut t = json!({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]});
        merge_patch(&mut t, &json!({"a": null, "b": {"c": 5}, "l": [3]}));
        assert_eq!(t, json!({"b": {"c": 5, "d": 3}, "l": [3]}));
    }

    #[test]
    fn strategic_merges_conditions_by_type() {
        let mut t = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            {"type": "Other", "status": "True"}]}});
        strategic_merge(
            &mut t,
            &json!({"status": {"$setElementOrder/conditions": [{"type": "PodScheduled"}],
                "conditions": [{"type": "PodScheduled", "status": "True", "reason": null},
                               {"type": "New", "status": "True"},
                               {"type": "Other", "$patch": "delete"}]}}),
        );
        assert_eq!(
            t,
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "New", "status": "True"}]}})
        );
        strategic_merge(&mut t, &json!({"metadata": {"finalizers": ["a"]}}));
        strategic_merge(&mut t, &json!({"metadata": {"finalizers": ["b", "a"]}}));
        assert_eq!(t["metadata"]["finalizers"], json!(["a", "b"]));
    }

    /// A ResourceClaim's `status.reservedFor` merges by `uid`, as upstream's Unreserve patch
    /// relies on: its pod's entry goes, the others stay.
    #[test]
    fn strategic_merges_reservations_by_uid() {
        let mut t = json!({"status": {"reservedFor": [
            {"resource": "pods", "name": "a", "uid": "ua"},
            {"resource": "pods", "name": "b", "uid": "ub"}]}});
        strategic_merge(
            &mut t,
            &json!({"metadata": {"uid": "c"}, "status": {"reservedFor": [{"$patch": "delete", "uid": "ua"}]}}),
        );
        assert_eq!(
            t["status"]["reservedFor"],
            json!([{"resource": "pods", "name": "b", "uid": "ub"}])
        );
    }

    /// A pod's `status.resourceClaimStatuses` merges by `name`: a patch naming one claim keeps
    /// the others' entries.
    #[test]
    fn strategic_merges_pod_claim_statuses_by_name() {
        let mut t = json!({"status": {"resourceClaimStatuses": [
            {"name": "a", "resourceClaimName": "p-a-1"}]}});
        strategic_merge(
            &mut t,
            &json!({"status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-2"}]}}),
        );
        assert_eq!(
            t["status"]["resourceClaimStatuses"],
            json!([{"name": "a", "resourceClaimName": "p-a-1"}, {"name": "b", "resourceClaimName": "p-b-2"}])
        );
    }

    #[test]
    fn json_patch_ops() {
        let mut t = json!({"a": {"b": [1, 2]}, "c": "x"});
        json_patch(
            &mut t,
            &json!([{"op": "add", "path": "/a/b/-", "value": 3}, {"op": "replace", "path": "/c", "value": "y"},
                    {"op": "test", "path": "/c", "value": "y"}, {"op": "remove", "path": "/a/b/0"},
                    {"op": "copy", "from": "/c", "path": "/d"}]),
        )
        .unwrap();
        assert_eq!(t, json!({"a": {"b": [2, 3]}, "c": "y", "d": "y"}));
        assert!(json_patch(&mut t, &json!([{"op": "test", "path": "/c", "value": "z"}])).is_err());
    }
}
