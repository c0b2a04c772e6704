//! Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), as
//! client-go's typed clients send them (`kubectl create priorityclass …`): the `k8s\0` magic,
//! a `runtime.Unknown` envelope (`typeMeta`, `raw`), and the generated messages of the kinds
//! decoded here, turned into the JSON the rest of the server works on. Only PriorityClasses
//! (and their `ObjectMeta`) are decoded; another kind's protobuf body is a 415, as the real
//! server answers a media type it cannot decode (the real server decodes every built-in kind).
//! Answers are always JSON, which those clients also accept.

use crate::error::ApiError;
use serde_json::{Map, Value, json};

/// The media type.
pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// One field of a protobuf message.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed-width values (no field decoded here has one).
    Fixed,
}

/// The fields of a message, in wire order, or None when it is malformed.
fn fields(mut b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b)?;
        let f = match key & 7 {
            0 => Field::Varint(varint(&mut b)?),
            1 => {
                b = b.get(8..)?;
                Field::Fixed
            }
            2 => {
                let n = usize::try_from(varint(&mut b)?).ok()?;
                let (v, rest) = (b.get(..n)?, b.get(n..)?);
                b = rest;
                Field::Bytes(v)
            }
            5 => {
                b = b.get(4..)?;
                Field::Fixed
            }
            _ => return None,
        };
        out.push((key >> 3, f));
    }
    Some(out)
}

fn string(b: &[u8]) -> Option<String> {
    String::from_utf8(b.to_vec()).ok()
}

/// A `map<string, string>` entry.
fn entry(b: &[u8]) -> Option<(String, String)> {
    let (mut k, mut v) = (String::new(), String::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = string(x)?,
            (2, Field::Bytes(x)) => v = string(x)?,
            _ => {}
        }
    }
    Some((k, v))
}

/// `metav1.OwnerReference`.
fn owner_reference(b: &[u8]) -> Option<Value> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => o.insert("kind".into(), json!(string(x)?)),
            (3, Field::Bytes(x)) => o.insert("name".into(), json!(string(x)?)),
            (4, Field::Bytes(x)) => o.insert("uid".into(), json!(string(x)?)),
            (5, Field::Bytes(x)) => o.insert("apiVersion".into(), json!(string(x)?)),
            (6, Field::Varint(x)) => o.insert("controller".into(), json!(x != 0)),
            (7, Field::Varint(x)) => o.insert("blockOwnerDeletion".into(), json!(x != 0)),
            _ => None,
        };
    }
    Some(Value::Object(o))
}

/// `metav1.ObjectMeta`: the fields a client sets (the server-set ones, timestamps and
/// `managedFields` are left out, as the server replaces or ignores them).
fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut maps: [Map<String, Value>; 2] = [Map::new(), Map::new()];
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1 | 2 | 3 | 5 | 6, Field::Bytes(x)) => {
                let key = match n {
                    1 => "name",
                    2 => "generateName",
                    3 => "namespace",
                    5 => "uid",
                    _ => "resourceVersion",
                };
                let s = string(x)?;
                if !s.is_empty() {
                    m.insert(key.into(), json!(s));
                }
            }
            (11 | 12, Field::Bytes(x)) => {
                let (k, v) = entry(x)?;
                maps[usize::from(n == 12)].insert(k, json!(v));
            }
            (13, Field::Bytes(x)) => owners.push(owner_reference(x)?),
            (14, Field::Bytes(x)) => finalizers.push(json!(string(x)?)),
            _ => {}
        }
    }
    let [labels, annotations] = maps;
    for (k, v) in [("labels", labels), ("annotations", annotations)] {
        if !v.is_empty() {
            m.insert(k.into(), Value::Object(v));
        }
    }
    if !owners.is_empty() {
        m.insert("ownerReferences".into(), Value::Array(owners));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

/// `schedulingv1.PriorityClass`.
fn priority_class(b: &[u8]) -> Option<Value> {
    let mut o = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => o.insert("metadata".into(), object_meta(x)?),
            // An int32 is sent as the varint of its 64-bit two's complement.
            (2, Field::Varint(x)) => o.insert("value".into(), json!(x as i64 as i32)),
            (3, Field::Varint(x)) => o.insert("globalDefault".into(), json!(x != 0)),
            (4, Field::Bytes(x)) => o.insert("description".into(), json!(string(x)?)),
            (5, Field::Bytes(x)) => o.insert("preemptionPolicy".into(), json!(string(x)?)),
            _ => None,
        };
    }
    Some(Value::Object(o))
}

/// The object of a protobuf request body for `group`/`kind`, as JSON.
pub(crate) fn decode(body: &[u8], group: &str, kind: &str) -> Result<Value, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "the body of the request could not be decoded: malformed protobuf".to_string(),
        )
    };
    let envelope = body.strip_prefix(MAGIC).ok_or_else(bad)?;
    let (mut api_version, mut sent_kind, mut raw) = (String::new(), String::new(), None);
    for (n, f) in fields(envelope).ok_or_else(bad)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm).ok_or_else(bad)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = string(x).ok_or_else(bad)?,
                        (2, Field::Bytes(x)) => sent_kind = string(x).ok_or_else(bad)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = Some(x),
            _ => {}
        }
    }
    let mut obj = match (group, kind) {
        ("scheduling.k8s.io", "PriorityClass") => {
            priority_class(raw.unwrap_or_default()).ok_or_else(bad)?
        }
        _ => {
            return Err(ApiError::unsupported_body_media_type(
                CONTENT_TYPE,
                "application/json",
            ));
        }
    };
    if !api_version.is_empty() {
        obj["apiVersion"] = json!(api_version);
    }
    if !sent_kind.is_empty() {
        obj["kind"] = json!(sent_kind);
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn number(n: u64, v: u64, out: &mut Vec<u8>) {
        varint(n << 3, out);
        varint(v, out);
    }

    /// What client-go's typed client sends for `kubectl create priorityclass low --value=-5
    /// --preemption-policy=Never` (with a label), field for field.
    #[test]
    fn a_priority_class_is_decoded() {
        let mut label = Vec::new();
        bytes(1, b"tier", &mut label);
        bytes(2, b"batch", &mut label);
        let mut meta = Vec::new();
        bytes(1, b"low", &mut meta);
        bytes(2, b"", &mut meta);
        bytes(8, b"", &mut meta);
        bytes(11, &label, &mut meta);
        let mut pc = Vec::new();
        bytes(1, &meta, &mut pc);
        number(2, (-5i64) as u64, &mut pc);
        number(3, 0, &mut pc);
        bytes(4, b"", &mut pc);
        bytes(5, b"Never", &mut pc);
        let mut tm = Vec::new();
        bytes(1, b"scheduling.k8s.io/v1", &mut tm);
        bytes(2, b"PriorityClass", &mut tm);
        let mut env = MAGIC.to_vec();
        bytes(1, &tm, &mut env);
        bytes(2, &pc, &mut env);
        bytes(3, b"", &mut env);
        bytes(4, b"", &mut env);
        let got = decode(&env, "scheduling.k8s.io", "PriorityClass").unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": "low", "labels": {"tier": "batch"}},
                   "value": -5, "globalDefault": false, "description": "",
                   "preemptionPolicy": "Never"})
        );
        assert_eq!(decode(&env, "", "ConfigMap").unwrap_err().code, 415);
        assert_eq!(
            decode(&env[..env.len() - 3], "scheduling.k8s.io", "PriorityClass")
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            decode(b"{}", "scheduling.k8s.io", "PriorityClass")
                .unwrap_err()
                .code,
            400
        );
    }
}
