//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`) and field selectors
//! (`=`, `==`, `!=` joined by commas) with the per-resource field whitelist of the real server,
//! matched against an object's [`Index`]: its labels and the fields a selector may name, taken
//! from the object once when it is stored, so that a stored version is never parsed again to be
//! selected (the store keeps objects as serialized bytes).

use crate::meta;
use crate::meta::Pointer;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    NotExists,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct LabelReq {
    key: String,
    op: LabelOp,
    values: Vec<String>,
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses a selector string; the error names the offending term.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in split_top(s) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let bad =
                || format!("unable to parse requirement: invalid label selector term {term:?}");
            let req = if let Some(key) = term.strip_prefix('!') {
                LabelReq {
                    key: key.trim().to_string(),
                    op: LabelOp::NotExists,
                    values: vec![],
                }
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelReq {
                    key: k.trim().to_string(),
                    op: LabelOp::NotEq,
                    values: vec![v.trim().to_string()],
                }
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                LabelReq {
                    key: k.trim().to_string(),
                    op: LabelOp::Eq,
                    values: vec![v.trim().to_string()],
                }
            } else if let Some(pos) = term.find(|c: char| c.is_whitespace() || c == '(') {
                let key = term[..pos].trim().to_string();
                let rest = term[pos..].trim_start();
                let (op, rest) = if let Some(r) = rest.strip_prefix("notin") {
                    (LabelOp::NotIn, r)
                } else if let Some(r) = rest.strip_prefix("in") {
                    (LabelOp::In, r)
                } else {
                    return Err(bad());
                };
                LabelReq {
                    key,
                    op,
                    values: set_values(rest).ok_or_else(bad)?,
                }
            } else {
                LabelReq {
                    key: term.to_string(),
                    op: LabelOp::Exists,
                    values: vec![],
                }
            };
            if !valid_key(&req.key) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// No requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Matches an object's `metadata.labels` (their string values, from its index).
    pub fn matches(&self, obj: &Index) -> bool {
        self.reqs.iter().all(|r| {
            let v = obj.label(&r.key);
            match r.op {
                LabelOp::Eq => v == Some(r.values[0].as_str()),
                LabelOp::NotEq => v != Some(r.values[0].as_str()),
                LabelOp::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                LabelOp::NotIn => v.is_none_or(|v| r.values.iter().all(|x| x != v)),
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
            }
        })
    }
}

/// A parsed `fieldSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

/// Fields the real server accepts in field selectors, per resource (plural).
fn field_supported(plural: &str, field: &str) -> bool {
    if plural == "resourceslices" {
        // Its own conversion function: no `metadata.namespace`.
        return matches!(field, "metadata.name" | "spec.nodeName" | "spec.driver");
    }
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    match plural {
        "pods" => matches!(
            field,
            "spec.nodeName"
                | "spec.restartPolicy"
                | "spec.schedulerName"
                | "spec.serviceAccountName"
                | "spec.hostNetwork"
                | "status.phase"
                | "status.podIP"
                | "status.nominatedNodeName"
        ),
        "nodes" => field == "spec.unschedulable",
        // "This is a bug, but we need to support it for backward compatibility."
        "persistentvolumes" | "persistentvolumeclaims" => field == "name",
        "namespaces" => field == "status.phase",
        "events" => {
            field.starts_with("involvedObject.")
                || field.starts_with("regarding.")
                || matches!(field, "reason" | "reportingController" | "source" | "type")
        }
        // Custom resources support only metadata.name/namespace.
        _ => false,
    }
}

impl FieldSelector {
    /// Parses a selector and checks each field is supported for `plural`.
    pub fn parse(s: &str, plural: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for term in s.split(',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (field, eq, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let field = field.trim();
            if !field_supported(plural, field) {
                return Err(if plural == "resourceslices" {
                    format!(
                        "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {field}"
                    )
                } else {
                    format!("field label not supported: {field}")
                });
            }
            reqs.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// No requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The value `field` must equal, when the selector requires an exact match on it
    /// (`fields.Selector.RequiresExactMatch`): `spec.nodeName=` requires "".
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(f, eq, _)| *eq && f == field)
            .map(|(_, _, v)| v.as_str())
    }

    /// Matches an object (its index); missing fields compare as "".
    pub fn matches(&self, obj: &Index) -> bool {
        self.reqs.iter().all(|(field, eq, want)| {
            // The legacy `name` field of PVs and PVCs is `metadata.name`.
            let field = if field == "name" {
                "metadata.name"
            } else {
                field
            };
            (obj.field(field).unwrap_or("") == want) == *eq
        })
    }
}

/// The fields of a resource that field selectors may name (`field_supported`), found in `obj`:
/// each with its path and its value as a selector compares it (a string as it is, any other
/// value as JSON; missing or null: absent).
fn selectable_fields<'a>(plural: &str, obj: &'a Value, mut f: impl FnMut(&str, &'a Value)) {
    let mut at = |path: &str| {
        if let Some(v) = meta::path(obj, path) {
            f(path, v);
        }
    };
    at("metadata.name");
    at("metadata.namespace");
    let fixed: &[&str] = match plural {
        "resourceslices" => &["spec.nodeName", "spec.driver"],
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "nodes" => &["spec.unschedulable"],
        "namespaces" => &["status.phase"],
        "events" => &["reason", "reportingController", "source", "type"],
        _ => &[],
    };
    for path in fixed {
        at(path);
    }
    if plural == "events" {
        // `involvedObject.*` and `regarding.*`: every field of the reference.
        for top in ["involvedObject", "regarding"] {
            if let Some(m) = obj.get(top).and_then(Value::as_object) {
                for (k, v) in m {
                    if !v.is_null() {
                        f(&format!("{top}.{k}"), v);
                    }
                }
            }
        }
    }
}

/// The field paths an [`Index`] names by one letter instead of spelling them out (every field
/// `selectable_fields` can give but the references of events, and the two the store reads).
const KNOWN_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.resourceVersion",
    "spec.nodeName",
    "spec.driver",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
    "spec.unschedulable",
    "reason",
    "reportingController",
    "source",
    "type",
];

/// What selectors read of a stored object, taken from it once: its string labels, and the
/// fields of its resource that field selectors may name (`metadata.name` and
/// `metadata.namespace` always, `metadata.uid` and `metadata.resourceVersion` for the store).
/// Kept compact, since every retained version of every object has one: one string holding every
/// key and value, and where each ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Index {
    /// Keys and values back to back. A key is `l` and the label's key, `F` and a letter naming
    /// one of [`KNOWN_FIELDS`], or `f` and another field's path.
    text: Box<str>,
    /// Per entry, where its key and its value end in `text` (an entry starts where the one
    /// before it ends).
    ends: Box<[(u32, u32)]>,
}

impl Index {
    /// The index of `obj`, an object of the resource `plural`.
    pub fn new(plural: &str, obj: &Value) -> Self {
        let mut text = String::new();
        let mut ends = Vec::new();
        let mut push = |kind: char, key: &str, value: &str| {
            text.push(kind);
            text.push_str(key);
            let k = text.len() as u32;
            text.push_str(value);
            ends.push((k, text.len() as u32));
        };
        if let Some(labels) = obj.at("/metadata/labels").and_then(Value::as_object) {
            for (k, v) in labels {
                if let Some(v) = v.as_str() {
                    push('l', k, v);
                }
            }
        }
        let mut push_field = |path: &str, value: &str| match known(path) {
            Some(letter) => push('F', letter.encode_utf8(&mut [0; 4]), value),
            None => push('f', path, value),
        };
        selectable_fields(plural, obj, |path, v| match v {
            Value::String(s) => push_field(path, s),
            other => push_field(path, &other.to_string()),
        });
        for internal in ["uid", "resourceVersion"] {
            if let Some(v) = obj
                .get("metadata")
                .and_then(|m| m.get(internal))
                .and_then(Value::as_str)
            {
                push_field(&format!("metadata.{internal}"), v);
            }
        }
        Self {
            text: text.into_boxed_str(),
            ends: ends.into_boxed_slice(),
        }
    }

    fn find(&self, kind: char, key: &str) -> Option<&str> {
        let mut start = 0usize;
        for &(k, v) in self.ends.iter() {
            let (k, v) = (k as usize, v as usize);
            let entry_key = &self.text[start..k];
            if entry_key.len() == key.len() + 1
                && entry_key.starts_with(kind)
                && &entry_key[1..] == key
            {
                return Some(&self.text[k..v]);
            }
            start = v;
        }
        None
    }

    /// The value of label `key` (string values only).
    pub fn label(&self, key: &str) -> Option<&str> {
        self.find('l', key)
    }

    /// A selectable field (`spec.nodeName`), as a field selector compares it; None when the
    /// object does not have it (or it is null).
    pub fn field(&self, path: &str) -> Option<&str> {
        match known(path) {
            Some(letter) => self.find('F', letter.encode_utf8(&mut [0; 4])),
            None => self.find('f', path),
        }
    }
}

/// The letter naming `path` in an index, when it is one of [`KNOWN_FIELDS`].
fn known(path: &str) -> Option<char> {
    KNOWN_FIELDS
        .iter()
        .position(|p| *p == path)
        .map(|i| char::from(b'A' + i as u8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(labels: Value, node: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels},
               "spec": {"nodeName": node, "schedulerName": "magma", "hostNetwork": false},
               "status": {"phase": "Pending"}})
    }

    #[test]
    fn label_operators() {
        let p = Index::new("pods", &pod(json!({"app": "web", "tier": "fe"}), ""));
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&p);
        assert!(m("app=web") && m("app==web") && m("app!=db") && m("app") && m("!missing"));
        assert!(m("app in (web, db)") && m("tier notin (be)") && m("app=web,tier in (fe)"));
        assert!(!m("app=db") && !m("missing") && !m("!app") && !m("app notin (web)"));
        assert!(m("missing notin (x)") && !m("missing in (x)"));
        assert!(m(""));
        assert!(LabelSelector::parse("app in web").is_err());
    }

    /// Known fields by letter, other fields and labels spelled out: each reads back as it was.
    #[test]
    fn index_reads_back_labels_and_fields() {
        let ev = json!({"metadata": {"name": "e", "namespace": "ns", "uid": "u1",
                                     "resourceVersion": "7", "labels": {"a": "1", "n": 2}},
                        "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Scheduled",
                        "source": {"component": "magma"}, "type": null});
        let i = Index::new("events", &ev);
        assert_eq!(i.label("a"), Some("1"));
        assert_eq!(i.label("n"), None, "a label that is not a string");
        assert_eq!(i.field("metadata.name"), Some("e"));
        assert_eq!(i.field("metadata.uid"), Some("u1"));
        assert_eq!(i.field("metadata.resourceVersion"), Some("7"));
        assert_eq!(i.field("involvedObject.kind"), Some("Pod"));
        assert_eq!(i.field("involvedObject.name"), Some("p"));
        assert_eq!(i.field("reason"), Some("Scheduled"));
        assert_eq!(i.field("source"), Some(r#"{"component":"magma"}"#));
        assert_eq!(i.field("type"), None, "null is missing");
        assert_eq!(i.field("spec.nodeName"), None);
        let m = |s: &str| FieldSelector::parse(s, "events").unwrap().matches(&i);
        assert!(m("involvedObject.kind=Pod,reason=Scheduled,type="));
        assert!(!m("involvedObject.uid!="));
        assert!(KNOWN_FIELDS.len() < 26);
    }

    #[test]
    fn field_selectors() {
        let p = Index::new("pods", &pod(json!({}), ""));
        let m = |s: &str| FieldSelector::parse(s, "pods").unwrap().matches(&p);
        assert!(m("spec.nodeName=") && m("spec.schedulerName=magma,spec.nodeName="));
        assert!(m("status.phase!=Running") && m("metadata.name==p") && m("spec.hostNetwork=false"));
        assert!(!m("spec.nodeName!=") && !m("metadata.namespace=other"));
        assert!(FieldSelector::parse("spec.foo=bar", "pods").is_err());
        assert!(FieldSelector::parse("spec.nodeName=x", "nodeshards").is_err());
    }
}
