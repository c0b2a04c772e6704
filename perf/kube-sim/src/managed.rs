//! Server-side field management: `metadata.managedFields` as the real API server records it on
//! every write through the field manager, one entry per (manager, operation, subresource) with a
//! `FieldsV1` set of the fields that manager owns. The field sets are computed without schemas (see
//! the crate doc's deviations): every leaf present in the written object, lists of keyed items as
//! `k:{...}` members with a `.` entry, other lists as a whole.

use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use crate::validation::{self, FieldError};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// The longest `fieldManager` the real server accepts (bytes).
pub const FIELD_MANAGER_MAX_LEN: usize = 128;

/// The operation a managedFields entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Create, update and non-apply patches.
    Update,
    /// Server-side apply patches.
    Apply,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Update => "Update",
            Self::Apply => "Apply",
        }
    }
}

/// Who writes, and how (the managedFields entry a write updates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    /// `fieldManager`, or the User-Agent before its first `/`.
    pub name: String,
    /// Update or Apply.
    pub operation: Operation,
}

impl Manager {
    /// An Update by `name`.
    pub fn update(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            operation: Operation::Update,
        }
    }

    /// The manager of a request as the real server derives it: the `fieldManager` query parameter
    /// when given (validated as `ValidateFieldManager`: at most 128 bytes, printable characters,
    /// a 422 on `<options_kind>.meta.k8s.io ""` otherwise), else the User-Agent up to its first
    /// `/` (truncated to 128 bytes).
    pub fn from_request(
        field_manager: Option<&str>,
        user_agent: &str,
        operation: Operation,
        options_kind: &str,
    ) -> Result<Self, ApiError> {
        let name = match field_manager {
            Some(fm) => {
                let mut errs = Vec::new();
                if fm.len() > FIELD_MANAGER_MAX_LEN {
                    errs.push(FieldError::too_long("fieldManager", FIELD_MANAGER_MAX_LEN));
                }
                if fm
                    .chars()
                    .any(|c| c.is_control() || (c.is_whitespace() && c != ' ') || c == '\u{fffd}')
                {
                    errs.push(FieldError::invalid_str(
                        "fieldManager",
                        fm,
                        "invalid characters",
                    ));
                }
                if fm.is_empty() && operation == Operation::Apply {
                    errs.push(FieldError::required(
                        "fieldManager",
                        "is required for apply patch",
                    ));
                }
                validation::check("meta.k8s.io", options_kind, "", errs)?;
                fm.to_string()
            }
            None => {
                if operation == Operation::Apply {
                    validation::check(
                        "meta.k8s.io",
                        options_kind,
                        "",
                        vec![FieldError::required(
                            "fieldManager",
                            "is required for apply patch",
                        )],
                    )?;
                }
                let prefix = user_agent.split('/').next().unwrap_or("");
                let mut end = prefix.len().min(FIELD_MANAGER_MAX_LEN);
                while !prefix.is_char_boundary(end) {
                    end -= 1;
                }
                prefix[..end].to_string()
            }
        };
        Ok(Self { name, operation })
    }
}

/// Which part of the object a write's fields are taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything but server-set metadata (resources without a status subresource).
    All,
    /// Everything but server-set metadata and `.status` (main-resource writes of resources with
    /// a status subresource: the server resets status there).
    NoStatus,
    /// Only `.status` (`/status` writes).
    Status,
    /// Only the containers' and init containers' `resources` and `resizePolicy` (`pods/resize`
    /// writes: the resize strategy's reset-fields filter).
    Resize,
}

/// A leaf path, its elements (`f:spec`, `f:containers`, `k:{"name":"c"}`, `.`) joined by
/// [`SEP`]: one allocation per path, however deep. `SEP` sorts before every byte an element
/// holds, so joined paths sort as their element lists do and the paths under `p` come right
/// after `p` (what [`present`] relies on).
type Path = String;

/// The separator of a [`Path`]'s elements.
const SEP: char = '\0';

/// Appends the element `el` to `p`; returns the length to truncate back to.
fn push(p: &mut Path, el: &str) -> usize {
    let len = p.len();
    if !p.is_empty() {
        p.push(SEP);
    }
    p.push_str(el);
    len
}

/// Appends the element `f:<field>` to `p`; returns the length to truncate back to.
fn push_field(p: &mut Path, field: &str) -> usize {
    let len = push(p, "f:");
    p.push_str(field);
    len
}

/// Whether `path` is `p` or a path under it.
fn under(path: &str, p: &str) -> bool {
    path.strip_prefix(p)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(SEP))
}

static PRESENT: Value = Value::Bool(true);

/// Metadata the server sets: never owned by a client.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// String maps: the manager of the map itself owns a `.` member as in the real server.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "requests",
    "limits",
    "resources",
    "data",
    "binaryData",
    "capacity",
    "allocatable",
    "parameters",
];

/// Lists the real schemas mark atomic although their items have a `name`.
const ATOMIC_LISTS: &[&str] = &[
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
    "tolerations",
    "finalizers",
    "args",
    "command",
    // resource.k8s.io/v1: the device requests of a claim, the devices of a slice, selectors,
    // constraints, configs, sub-requests and allocation results are `listType=atomic`.
    "devices",
    "selectors",
    "constraints",
    "config",
    "firstAvailable",
    "results",
];

/// `metav1.LabelSelector` is `+structType=atomic`: a field holding one (a PVC's or a budget's
/// `selector`, the `labelSelector` / `namespaceSelector` of affinity terms and spread
/// constraints) is owned as a whole.
fn atomic_selector(name: &str, v: &Map<String, Value>) -> bool {
    matches!(name, "selector" | "labelSelector" | "namespaceSelector")
        && v.keys()
            .all(|k| k == "matchLabels" || k == "matchExpressions")
}

/// The `k:{...}` member of a list item, or None when the list is kept whole.
fn item_key(list: &str, item: &Value) -> Option<String> {
    let o = item.as_object()?;
    let one = |field: &str| {
        o.get(field).and_then(Value::as_str).map(|v| {
            format!(
                "k:{{{}:{}}}",
                validation::quote(field),
                validation::quote(v)
            )
        })
    };
    match list {
        l if ATOMIC_LISTS.contains(&l) => None,
        "conditions" => one("type"),
        // `requests` lists (of a claim's devices) are atomic; `requests`/`limits` maps are not
        // lists.
        "requests" => None,
        "reservedFor" => one("uid"),
        "podIPs" | "hostIPs" => one("ip"),
        "volumeMounts" | "volumeDevices" => one("mountPath").or_else(|| one("devicePath")),
        "ports" if o.contains_key("containerPort") => Some(format!(
            "k:{{\"containerPort\":{},\"protocol\":{}}}",
            o["containerPort"],
            validation::quote(o.get("protocol").and_then(Value::as_str).unwrap_or("TCP"))
        )),
        _ => one("name"),
    }
}

/// The `k:{...}` members of a list's items, when every item has one and no two are equal;
/// None when the list is owned whole.
fn item_keys(list: &str, items: &[Value]) -> Option<Vec<String>> {
    let keys: Vec<String> = items
        .iter()
        .map(|i| item_key(list, i))
        .collect::<Option<_>>()?;
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort_unstable();
    sorted.windows(2).all(|w| w[0] != w[1]).then_some(keys)
}

/// Whether a top-level member of an object is among the fields of `scope` (not for
/// [`Scope::Resize`], which [`fields`] filters from [`Scope::NoStatus`]).
fn kept_at_top(k: &str, scope: Scope) -> bool {
    match scope {
        Scope::Status => k == "status",
        Scope::Resize => unreachable!("filtered from NoStatus"),
        Scope::NoStatus => !matches!(k, "status" | "apiVersion" | "kind"),
        Scope::All => !matches!(k, "apiVersion" | "kind"),
    }
}

fn leaves_of<'a>(v: &'a Value, name: &str, prefix: &mut Path, out: &mut BTreeMap<Path, &'a Value>) {
    match v {
        // An empty embedded ObjectMeta (a template's `spec.metadata`) is dropped by the
        // converter the field manager uses: not a field.
        Value::Object(m) if m.is_empty() && name == "metadata" => {}
        Value::Object(m) if !m.is_empty() && atomic_selector(name, m) => {
            out.insert(prefix.clone(), v);
        }
        Value::Object(m) if !m.is_empty() => {
            if MAP_FIELDS.contains(&name) {
                let len = push(prefix, ".");
                out.insert(prefix.clone(), &PRESENT);
                prefix.truncate(len);
            }
            for (k, c) in m {
                let len = push_field(prefix, k);
                leaves_of(c, k, prefix, out);
                prefix.truncate(len);
            }
        }
        Value::Array(items) if !items.is_empty() => match item_keys(name, items) {
            Some(keys) => {
                for (k, item) in keys.into_iter().zip(items) {
                    let len = push(prefix, &k);
                    let item_len = push(prefix, ".");
                    out.insert(prefix.clone(), &PRESENT);
                    prefix.truncate(item_len);
                    if let Some(o) = item.as_object() {
                        for (f, c) in o {
                            let field_len = push_field(prefix, f);
                            leaves_of(c, f, prefix, out);
                            prefix.truncate(field_len);
                        }
                    }
                    prefix.truncate(len);
                }
            }
            _ => {
                out.insert(prefix.clone(), v);
            }
        },
        _ => {
            out.insert(prefix.clone(), v);
        }
    }
}

/// The leaf fields of an object a client can own, with their values.
fn fields(obj: &Value, scope: Scope) -> BTreeMap<Path, &Value> {
    if scope == Scope::Resize {
        let mut out = fields(obj, Scope::NoStatus);
        out.retain(|p, _| resize_field(p));
        return out;
    }
    let mut out = BTreeMap::new();
    let Some(o) = obj.as_object() else {
        return out;
    };
    let mut prefix = Path::new();
    for (k, v) in o {
        if !kept_at_top(k, scope) {
            continue;
        }
        let len = push_field(&mut prefix, k);
        if k == "metadata" {
            if let Some(m) = v.as_object() {
                for (mk, mv) in m {
                    if SERVER_METADATA.contains(&mk.as_str()) {
                        continue;
                    }
                    let meta_len = push_field(&mut prefix, mk);
                    leaves_of(mv, mk, &mut prefix, &mut out);
                    prefix.truncate(meta_len);
                }
            }
        } else {
            leaves_of(v, k, &mut prefix, &mut out);
        }
        prefix.truncate(len);
    }
    out
}

/// `render_set` of [`fields`]`(obj, scope)`, built in one walk of `obj` without a path per
/// leaf: a create's only entry owns every field it wrote, and building, sorting and joining
/// each leaf's path (then splitting them again) was most of what recording a create cost.
/// Not for [`Scope::Resize`] (never a create).
fn render_fields(obj: &Value, scope: Scope) -> Map<String, Value> {
    let mut root = Map::new();
    let Some(o) = obj.as_object() else {
        return root;
    };
    for (k, v) in o {
        if !kept_at_top(k, scope) {
            continue;
        }
        if k == "metadata" {
            let mut node = Map::new();
            if let Some(m) = v.as_object() {
                for (mk, mv) in m {
                    if !SERVER_METADATA.contains(&mk.as_str()) {
                        render_leaves(mv, mk, &mut node, format!("f:{mk}"));
                    }
                }
            }
            if !node.is_empty() {
                root.insert("f:metadata".into(), Value::Object(node));
            }
        } else {
            render_leaves(v, k, &mut root, format!("f:{k}"));
        }
    }
    root
}

/// Adds to `parent`, as the member `el`, the fields [`leaves_of`] finds in `v` (the field
/// `name`), case for case.
fn render_leaves(v: &Value, name: &str, parent: &mut Map<String, Value>, el: String) {
    let leaf = |parent: &mut Map<String, Value>, el: String| {
        parent.insert(el, Value::Object(Map::new()));
    };
    match v {
        Value::Object(m) if m.is_empty() && name == "metadata" => {}
        Value::Object(m) if !m.is_empty() && atomic_selector(name, m) => leaf(parent, el),
        Value::Object(m) if !m.is_empty() => {
            let mut node = Map::new();
            if MAP_FIELDS.contains(&name) {
                leaf(&mut node, ".".into());
            }
            for (k, c) in m {
                render_leaves(c, k, &mut node, format!("f:{k}"));
            }
            if !node.is_empty() {
                parent.insert(el, Value::Object(node));
            }
        }
        Value::Array(items) if !items.is_empty() => match item_keys(name, items) {
            Some(keys) => {
                let mut node = Map::new();
                for (k, item) in keys.into_iter().zip(items) {
                    let mut entry = Map::new();
                    leaf(&mut entry, ".".into());
                    if let Some(o) = item.as_object() {
                        for (f, c) in o {
                            render_leaves(c, f, &mut entry, format!("f:{f}"));
                        }
                    }
                    node.insert(k, Value::Object(entry));
                }
                parent.insert(el, Value::Object(node));
            }
            _ => leaf(parent, el),
        },
        _ => leaf(parent, el),
    }
}

/// Whether a path of [`fields`]`(obj, Scope::All)` is one of `fields(obj, scope)`: the scopes
/// differ only in the top-level fields they keep.
fn in_scope(p: &str, scope: Scope) -> bool {
    let status = under(p, "f:status");
    match scope {
        Scope::All => true,
        Scope::NoStatus => !status,
        Scope::Status => status,
        Scope::Resize => resize_field(p),
    }
}

/// A container's `resources` or `resizePolicy`, or a field under them ([`Scope::Resize`]).
fn resize_field(p: &str) -> bool {
    let mut el = p.split(SEP);
    el.next() == Some("f:spec")
        && matches!(el.next(), Some("f:containers" | "f:initContainers"))
        && el.next().is_some_and(|e| e.starts_with("k:"))
        && matches!(el.next(), Some("f:resources" | "f:resizePolicy"))
}

/// A FieldsV1 value as its leaf paths.
fn parse_set(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match v.as_object() {
        Some(m) if !m.is_empty() => {
            for (k, c) in m {
                let len = push(prefix, k);
                parse_set(c, prefix, out);
                prefix.truncate(len);
            }
        }
        _ => {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
        }
    }
}

/// Leaf paths as the nested FieldsV1 structure.
fn render_set(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for el in p.split(SEP) {
            let next = cur.entry(el).or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            cur = next.as_object_mut().expect("object");
        }
    }
    Value::Object(root)
}

/// Whether `p` (or a field under it) is in the object.
fn present(p: &str, in_obj: &BTreeMap<Path, &Value>) -> bool {
    in_obj
        .range::<str, _>((Bound::Included(p), Bound::Unbounded))
        .next()
        .is_some_and(|(k, _)| under(k, p))
}

/// One managedFields entry while a write is recorded.
#[derive(Debug)]
struct Entry<'a> {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    set: BTreeSet<Path>,
    /// The stored entry it was parsed from (None: the writer's new entry).
    stored: Option<&'a Value>,
    /// Whether `set` differs from the stored entry's.
    changed: bool,
}

impl<'a> Entry<'a> {
    fn parse(v: &'a Value) -> Option<Self> {
        let s = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let mut set = BTreeSet::new();
        parse_set(v.get("fieldsV1")?, &mut Path::new(), &mut set);
        Some(Self {
            manager: s("manager"),
            operation: s("operation"),
            api_version: s("apiVersion"),
            time: s("time"),
            subresource: s("subresource"),
            set,
            stored: Some(v),
            changed: false,
        })
    }

    /// Keeps the paths `keep` accepts, noting whether any went.
    fn retain(&mut self, keep: impl FnMut(&Path) -> bool) {
        let len = self.set.len();
        self.set.retain(keep);
        self.changed |= self.set.len() != len;
    }

    /// The entry as stored: an entry whose set and time did not change (`rewritten` false:
    /// not the writer's) is the stored one.
    fn render(&self, rewritten: bool) -> Value {
        if let Some(v) = self.stored.filter(|_| !self.changed && !rewritten) {
            return v.clone();
        }
        let mut e = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": render_set(&self.set),
        });
        if !self.subresource.is_empty() {
            e["subresource"] = json!(self.subresource);
        }
        e
    }
}

/// Records a write in `new`'s `metadata.managedFields`, from the entries of `old` (None: a
/// create). `applied` is the configuration of a server-side apply. The writer's entry gets the
/// fields the write changed (for Apply: the applied fields), merged with those it owned; other
/// entries lose the fields the write changed; fields no longer in the object leave every entry,
/// and empty entries are dropped. A write that changes no field leaves the entries (and their
/// times) alone, so a no-op update stays a no-op.
pub fn record(
    old: Option<&Value>,
    new: &mut Value,
    manager: &Manager,
    subresource: &str,
    scope: Scope,
    applied: Option<&Value>,
) {
    if old.is_none() && manager.operation == Operation::Update && scope != Scope::Resize {
        record_create(new, manager, subresource, scope);
        return;
    }
    let empty = Value::Null;
    let old_obj = old.unwrap_or(&empty);
    let old_entries = old_obj.at("/metadata/managedFields");
    let before: Vec<Entry> = old_entries
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default();
    let old_fields = fields(old_obj, scope);
    // One walk of the new object: presence is checked over all of it (a status write keeps
    // the spec's owners), and the write's own fields are those in its scope.
    let all_fields = fields(new, Scope::All);
    let changed: BTreeSet<Path> = all_fields
        .iter()
        .filter(|(p, v)| in_scope(p, scope) && old_fields.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect();
    let op = manager.operation.as_str();
    let mine =
        |e: &Entry| e.manager == manager.name && e.operation == op && e.subresource == subresource;
    let applied_set = || -> BTreeSet<Path> {
        match applied {
            Some(a) => fields(a, scope).into_keys().collect(),
            None => BTreeSet::new(),
        }
    };
    let mut after: Vec<Entry> = Vec::with_capacity(before.len() + 1);
    let mut found = false;
    let mut dropped = false;
    for mut e in before {
        if mine(&e) {
            found = true;
            match (manager.operation, applied) {
                (Operation::Apply, Some(_)) => {
                    let set = applied_set();
                    e.changed |= set != e.set;
                    e.set = set;
                }
                _ => {
                    let len = e.set.len();
                    e.set.extend(changed.iter().cloned());
                    e.changed |= e.set.len() != len;
                }
            }
        } else {
            e.retain(|p| !changed.contains(p));
        }
        e.retain(|p| present(p, &all_fields));
        if e.set.is_empty() {
            // Dropped; an entry stored empty does not count as a change.
            dropped |= e.changed;
        } else {
            after.push(e);
        }
    }
    if !found {
        let set: BTreeSet<Path> = match (manager.operation, applied) {
            (Operation::Apply, Some(_)) => applied_set(),
            _ => changed.clone(),
        };
        let set: BTreeSet<Path> = set
            .into_iter()
            .filter(|p| present(p, &all_fields))
            .collect();
        if !set.is_empty() {
            after.push(Entry {
                manager: manager.name.clone(),
                operation: op.to_string(),
                api_version: String::new(),
                time: String::new(),
                subresource: subresource.to_string(),
                set,
                stored: None,
                changed: true,
            });
        }
    }
    if changed.is_empty() && !dropped && after.iter().all(|e| !e.changed) {
        // Nothing the field manager tracks changed: keep the entries as they were.
        let m = meta::metadata_mut(new);
        match old_entries {
            Some(mf) => m.insert("managedFields".into(), mf.clone()),
            None => m.remove("managedFields"),
        };
        return;
    }
    let api_version = api_version_of(new);
    let now = meta::now();
    for e in after.iter_mut().filter(|e| mine(e)) {
        e.api_version.clone_from(&api_version);
        e.time.clone_from(&now);
    }
    let mut order: Vec<usize> = (0..after.len()).collect();
    // The real server sorts the entries: Apply before Update, then by time, then by manager.
    order.sort_by(|&a, &b| {
        let (a, b) = (&after[a], &after[b]);
        (a.operation != "Apply", &a.time, &a.manager, &a.subresource).cmp(&(
            b.operation != "Apply",
            &b.time,
            &b.manager,
            &b.subresource,
        ))
    });
    let rendered: Vec<Value> = order
        .iter()
        .map(|&i| after[i].render(mine(&after[i])))
        .collect();
    let m = meta::metadata_mut(new);
    if rendered.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(rendered));
    }
}

/// The `apiVersion` an entry records: the object's.
fn api_version_of(obj: &Value) -> String {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("v1")
        .to_string()
}

/// [`record`] of a create by an Update: the writer's entry is the only one and owns every field
/// of the object in `scope` ([`render_fields`]); no field, no entry.
fn record_create(new: &mut Value, manager: &Manager, subresource: &str, scope: Scope) {
    let set = render_fields(new, scope);
    debug_assert_eq!(
        Value::Object(set.clone()),
        render_set(&fields(new, scope).into_keys().collect()),
        "a create's field set, walked once, is the one its leaf paths give"
    );
    if set.is_empty() {
        meta::metadata_mut(new).remove("managedFields");
        return;
    }
    let mut e = json!({
        "manager": manager.name,
        "operation": Operation::Update.as_str(),
        "apiVersion": api_version_of(new),
        "time": meta::now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": Value::Object(set),
    });
    if !subresource.is_empty() {
        e["subresource"] = json!(subresource);
    }
    meta::metadata_mut(new).insert("managedFields".into(), Value::Array(vec![e]));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Edits `obj` with `edit` and records the write as an Update by `manager`.
    fn update_as(obj: &mut Value, manager: &str, scope: Scope, edit: impl FnOnce(&mut Value)) {
        let old = obj.clone();
        edit(obj);
        record(Some(&old), obj, &Manager::update(manager), "", scope, None);
    }

    /// A create's field set walked once ([`render_fields`]) is the set of its leaf paths
    /// rendered ([`render_set`] of [`fields`]), for every rule `leaves_of` has: keyed lists,
    /// a list with a repeated key (whole), atomic lists and selectors, string maps with their
    /// `.`, an empty template `metadata` (no field), empty objects and lists (leaves), server
    /// metadata (none), in every scope a create has.
    #[test]
    fn a_create_walked_once_owns_what_its_leaf_paths_give() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "uid": "u", "labels": {"a": "b"},
                "annotations": {}, "finalizers": ["x"], "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "o", "uid": "1"}]},
            "spec": {
                "containers": [
                    {"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                     "resources": {"requests": {"cpu": "1"}}, "args": ["x", "y"],
                     "env": [{"name": "E", "value": "1"}, {"name": "E", "value": "2"}]},
                    {"name": "d", "volumeMounts": [{"mountPath": "/m", "name": "v"}]}
                ],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"color": "green"}},
                     "topologyKey": "kubernetes.io/hostname"}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}],
                "tolerations": [{"key": "t", "operator": "Exists"}],
                "nodeSelector": {"zone": "a"},
                "volumes": [{"name": "v", "emptyDir": {}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
                "schedulingGates": []
            },
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}
        });
        let template = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}}
        });
        let claim = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": "p-gpu-", "namespace": "n"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                "deviceClassName": "gpu", "selectors": [{"cel": {"expression": "true"}}]}}]}}
        });
        let server_only = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "uid": "u", "resourceVersion": "1"}});
        for obj in [&pod, &template, &claim, &server_only, &json!(null)] {
            for scope in [Scope::All, Scope::NoStatus, Scope::Status] {
                assert_eq!(
                    Value::Object(render_fields(obj, scope)),
                    render_set(&fields(obj, scope).into_keys().collect()),
                    "{scope:?} of {obj}"
                );
            }
        }
        // And as recorded: one Update entry owning them, none when nothing is owned.
        let mut p = pod.clone();
        record(
            None,
            &mut p,
            &Manager::update("m"),
            "",
            Scope::NoStatus,
            None,
        );
        let mf = &p["metadata"]["managedFields"];
        assert_eq!(mf.as_array().map(Vec::len), Some(1), "{mf}");
        assert_eq!(mf[0]["manager"], "m");
        assert_eq!(mf[0]["operation"], "Update");
        assert_eq!(mf[0]["apiVersion"], "v1");
        assert!(
            mf[0]["fieldsV1"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:env"].is_object()
        );
        assert!(mf[0]["fieldsV1"].get("f:status").is_none());
        let mut c = server_only.clone();
        record(None, &mut c, &Manager::update("m"), "", Scope::All, None);
        assert!(c["metadata"].get("managedFields").is_none(), "{c}");
    }

    #[test]
    fn create_then_update_merges() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}], "schedulerName": "s"},
            "status": {"phase": "Pending"}});
        record(
            None,
            &mut pod,
            &Manager::update("me"),
            "",
            Scope::NoStatus,
            None,
        );
        let mf = &pod["metadata"]["managedFields"];
        assert_eq!(mf.as_array().unwrap().len(), 1);
        assert_eq!(mf[0]["manager"], "me");
        assert_eq!(mf[0]["operation"], "Update");
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                   "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}},
                              "f:schedulerName": {}}})
        );
        update_as(&mut pod, "other", Scope::NoStatus, |p| {
            p["metadata"]["labels"]["b"] = json!("x");
        });
        let mf = pod["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 2);
        assert_eq!(
            mf[1]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:b": {}}}})
        );
        // A no-op keeps the entries.
        let old = pod.clone();
        update_as(&mut pod, "third", Scope::NoStatus, |_| {});
        assert_eq!(pod, old);
        // Changing a field another manager owns moves it.
        update_as(&mut pod, "other", Scope::NoStatus, |p| {
            p["metadata"]["labels"]["app"] = json!("z");
        });
        let mf = pod["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(
            mf[0]["fieldsV1"]["f:metadata"]["f:labels"],
            json!({".": {}})
        );
        assert_eq!(
            mf[1]["fieldsV1"]["f:metadata"]["f:labels"],
            json!({"f:app": {}, "f:b": {}})
        );
    }

    #[test]
    fn a_field_named_like_the_start_of_another_is_its_own() {
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"a": "1", "ab": "2"}},
            "data": {"x": "1"}});
        record(None, &mut cm, &Manager::update("me"), "", Scope::All, None);
        let mine = cm["metadata"]["managedFields"][0].clone();
        // Another manager's write that changes none of my fields leaves my entry as stored.
        update_as(&mut cm, "other", Scope::All, |c| {
            c["data"]["y"] = json!("2")
        });
        assert_eq!(cm["metadata"]["managedFields"][0], mine);
        // Removing `a` takes `f:a` from my entry and leaves `f:ab`, which merely starts alike.
        update_as(&mut cm, "other", Scope::All, |c| {
            c["metadata"]["labels"].as_object_mut().unwrap().remove("a");
        });
        let mf = cm["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf[0]["manager"], "me");
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:x": {}}, "f:metadata": {"f:labels": {".": {}, "f:ab": {}}}})
        );
    }

    #[test]
    fn field_manager_validation() {
        let long = "x".repeat(129);
        let e =
            Manager::from_request(Some(&long), "", Operation::Update, "CreateOptions").unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("fieldManager: Too long"),
            "{}",
            e.message
        );
        let e = Manager::from_request(Some("a\u{7}b"), "", Operation::Update, "CreateOptions")
            .unwrap_err();
        assert!(e.message.contains("invalid characters"), "{}", e.message);
        let m =
            Manager::from_request(None, "kubectl/v1.34 (linux)", Operation::Update, "").unwrap();
        assert_eq!(m.name, "kubectl");
    }
}
