//! `resource.k8s.io/v1` (dynamic resource allocation, GA since v1.34) as the real server serves
//! it: the defaults of `pkg/apis/resource/v1` (`allocationMode: ExactCount` and `count: 1` for
//! exact requests and sub-requests, toleration operator `Equal`, device taints' `timeAdded`),
//! what the registry strategies reset (a new claim's `status`), and the validation of
//! `pkg/apis/resource/validation` for the fields of v1 with the real paths and messages:
//! names (DNS subdomains, request and device names DNS labels, qualified attribute and capacity
//! names, pool names), device requests (`exactly` xor `firstAvailable`, `allocationMode`
//! `ExactCount`/`All` with `count`, class names, selectors whose `cel.expression` must compile,
//! tolerations), constraints and configs, device classes, slices (`driver`, `pool`, exactly one
//! of `nodeName`/`nodeSelector`/`allNodes`/`perDeviceNodeSelection`, devices with attributes,
//! capacity and taints within their limits), the immutability of claim and template specs and
//! of a slice's driver, pool name and node name, and claim status writes (`reservedFor` at most
//! 256 distinct consumers and only with an allocation, none added to a claim being deleted; a
//! new `allocation` checked, a set one immutable; `devices` entries naming allocated devices).
//! Lists too long are refused with `Too many` before their items are looked at.
//!
//! Consumable capacity (KEP-5075, `DRAConsumableCapacity`, on by default in v1.36) is checked as
//! upstream checks it: a multi-allocatable device's `requestPolicy` (`validateRequestPolicy`:
//! `validValues` xor `validRange`, each needing a `default` it admits), `shareID`s in RFC 4122
//! form (`validateUID`), a constraint needing `matchAttribute` or `distinctAttribute`. Every
//! quantity (capacity values and policies, counters, a request's `capacity.requests`, a
//! result's `consumedCapacity`) is parsed as the decoder does, a bad one a 400; upstream
//! validates requests and consumed capacity no further (no key or sign checks), nor does this.

use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use crate::resources::ResourceDef;
use crate::storage;
use crate::validation::{self as v, FieldError, quote, render};
use serde_json::{Map, Value, json};
use std::collections::HashSet;

pub(crate) const GROUP: &str = "resource.k8s.io";
pub(crate) const CLASS_KEY: &str = "resource.k8s.io/deviceclasses";
pub(crate) const CLAIM_KEY: &str = "resource.k8s.io/resourceclaims";
pub(crate) const TEMPLATE_KEY: &str = "resource.k8s.io/resourceclaimtemplates";
pub(crate) const SLICE_KEY: &str = "resource.k8s.io/resourceslices";

/// The finalizer the scheduler puts on claims it allocates (`resource.kubernetes.io/delete-protection`).
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";

const REQUESTS_MAX: usize = 32;
const SELECTORS_MAX: usize = 32;
const CONSTRAINTS_MAX: usize = 32;
const CONFIG_MAX: usize = 32;
const FIRST_AVAILABLE_MAX: usize = 8;
const TOLERATIONS_MAX: usize = 16;
const TAINTS_MAX: usize = 16;
const RESERVED_FOR_MAX: usize = 256;
const RESULTS_MAX: usize = 32;
const SLICE_DEVICES_MAX: usize = 128;
const SLICE_DEVICES_MAX_ADVANCED: usize = 64;
const ATTRIBUTES_AND_CAPACITY_MAX: usize = 32;
const ATTRIBUTE_VALUE_MAX: usize = 64;
const ID_MAX: usize = 32;
const POOL_NAME_MAX: usize = 253;
const OPAQUE_PARAMETERS_MAX: usize = 10 * 1024;
const SHARED_COUNTERS_MAX: usize = 8;
/// `CapacityRequestPolicyDiscreteMaxOptions`.
const POLICY_VALUES_MAX: usize = 10;
/// The longest attribute or capacity name shown in a path (`attributeAndCapacityMaxKeyLength`).
const QUALIFIED_NAME_KEY_MAX: usize = 63 + 1 + ID_MAX;
const DEVICE_STATUS_CONDITIONS_MAX: usize = 8;
const DEVICE_STATUS_DATA_MAX: usize = 10 * 1024;

/// Whether a storage key is one of the kinds of this module.
pub(crate) fn handles(key: &str) -> bool {
    matches!(key, CLASS_KEY | CLAIM_KEY | TEMPLATE_KEY | SLICE_KEY)
}

fn arr<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.at(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.at(ptr).and_then(Value::as_str).unwrap_or("")
}

fn present(obj: &Value, ptr: &str) -> bool {
    obj.at(ptr).is_some_and(|x| !x.is_null())
}

/// `resource.Quantity.UnmarshalJSON`: `null` is zero, a string is parsed without its quotes and
/// surrounding white space, any other JSON value as its text. `Err` is the decoder's message.
fn parse_quantity(q: &Value) -> Result<i128, &'static str> {
    match q {
        Value::Null => Ok(0),
        Value::String(t) => v::parse_quantity(t.trim()),
        other => v::parse_quantity(&other.to_string()),
    }
}

/// The JSON values of the `resource.Quantity` fields of an object of `def`.
fn quantities<'a>(def: &ResourceDef, obj: &'a Value) -> Vec<&'a Value> {
    fn map_values<'a>(out: &mut Vec<&'a Value>, m: Option<&'a Value>, field: Option<&str>) {
        for x in m
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(Map::values)
        {
            match field {
                Some(f) => out.extend(x.get(f)),
                None => out.push(x),
            }
        }
    }
    fn requests<'a>(out: &mut Vec<&'a Value>, devices: Option<&'a Value>) {
        for r in devices.map_or(&[][..], |d| arr(d, "/requests")) {
            let subs = arr(r, "/firstAvailable").iter();
            for e in r.get("exactly").into_iter().chain(subs) {
                map_values(out, e.at("/capacity/requests"), None);
            }
        }
    }
    let mut out = Vec::new();
    match def.key.as_ref() {
        SLICE_KEY => {
            for d in arr(obj, "/spec/devices") {
                let caps = d.get("capacity").and_then(Value::as_object);
                for c in caps.into_iter().flat_map(Map::values) {
                    // A missing value is a zero quantity, as `null` is.
                    out.push(c.get("value").unwrap_or(&Value::Null));
                    if let Some(p) = c.get("requestPolicy") {
                        out.extend(p.get("default"));
                        out.extend(arr(p, "/validValues"));
                        for f in ["min", "max", "step"] {
                            out.extend(p.get("validRange").and_then(|r| r.get(f)));
                        }
                    }
                }
                for cc in arr(d, "/consumesCounters") {
                    map_values(&mut out, cc.get("counters"), Some("value"));
                }
            }
            for cs in arr(obj, "/spec/sharedCounters") {
                map_values(&mut out, cs.get("counters"), Some("value"));
            }
        }
        CLAIM_KEY => {
            requests(&mut out, obj.at("/spec/devices"));
            for r in arr(obj, "/status/allocation/devices/results") {
                map_values(&mut out, r.get("consumedCapacity"), None);
            }
        }
        TEMPLATE_KEY => requests(&mut out, obj.at("/spec/spec/devices")),
        _ => {}
    }
    out
}

/// The 400 the decoder answers for a quantity field that is not a quantity.
fn decode(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    for q in quantities(def, obj) {
        if let Err(m) = parse_quantity(q) {
            let kind = &def.kind;
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: {m}"
            )));
        }
    }
    Ok(())
}

/// A decoded `resource.Quantity`: its value in nano-units and the format `String()` uses.
#[derive(Debug, Clone, Copy)]
struct Quantity {
    nanos: i128,
    format: v::QuantityFormat,
}

impl Quantity {
    /// A field that has been decoded (see [`decode`]).
    fn of(q: &Value) -> Self {
        let text = match q {
            Value::String(t) => t.trim().to_string(),
            other => other.to_string(),
        };
        Self {
            nanos: parse_quantity(q).unwrap_or(0),
            format: v::quantity_format(&text),
        }
    }

    /// `Quantity.String()`: the canonical form messages show.
    fn string(&self) -> String {
        v::canonical_nanos(self.nanos, self.format)
    }

    /// `Quantity.Value()`: rounded up, away from zero, to a whole number.
    fn value(&self) -> i128 {
        const NANO: i128 = 1_000_000_000;
        let whole = self.nanos / NANO;
        if self.nanos % NANO == 0 {
            whole
        } else {
            whole + self.nanos.signum()
        }
    }

    /// `Quantity.Add`: the sum keeps this quantity's format unless this one is zero.
    fn plus(&self, other: &Self) -> Self {
        Self {
            nanos: self.nanos.saturating_add(other.nanos),
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Defaults

fn default_exact(r: &mut Map<String, Value>) {
    let mode = r
        .entry("allocationMode")
        .or_insert_with(|| json!("ExactCount"));
    if mode.as_str() == Some("") {
        *mode = json!("ExactCount");
    }
    if r.get("allocationMode").and_then(Value::as_str) == Some("ExactCount")
        && r.get("count").and_then(Value::as_i64).unwrap_or(0) == 0
    {
        r.insert("count".into(), json!(1));
    }
    if let Some(Value::Array(ts)) = r.get_mut("tolerations") {
        for t in ts.iter_mut().filter_map(Value::as_object_mut) {
            t.entry("operator").or_insert_with(|| json!("Equal"));
        }
    }
}

/// The defaults of a `DeviceClaim` (`spec.devices` of a claim, `spec.spec.devices` of a template).
fn default_device_claim(devices: Option<&mut Value>) {
    let Some(Value::Array(requests)) = devices.and_then(|d| d.get_mut("requests")) else {
        return;
    };
    for r in requests.iter_mut() {
        if let Some(e) = r.get_mut("exactly").and_then(Value::as_object_mut) {
            default_exact(e);
        }
        if let Some(Value::Array(subs)) = r.get_mut("firstAvailable") {
            for sub in subs.iter_mut().filter_map(Value::as_object_mut) {
                default_exact(sub);
            }
        }
    }
}

fn default_slice(slice: &mut Value) {
    let now = meta::now();
    if let Some(Value::Array(devices)) = slice.pointer_mut("/spec/devices") {
        for d in devices.iter_mut() {
            if let Some(Value::Array(taints)) = d.get_mut("taints") {
                for t in taints.iter_mut().filter_map(Value::as_object_mut) {
                    if t.get("timeAdded").is_none_or(Value::is_null) {
                        t.insert("timeAdded".into(), json!(now));
                    }
                }
            }
        }
    }
}

/// The defaults of an object of `def` (every request body is defaulted as it is decoded).
fn default(def: &ResourceDef, obj: &mut Value) {
    match def.key.as_ref() {
        CLAIM_KEY => default_device_claim(obj.pointer_mut("/spec/devices")),
        TEMPLATE_KEY => default_device_claim(obj.pointer_mut("/spec/spec/devices")),
        SLICE_KEY => default_slice(obj),
        _ => {}
    }
}

/// What the serializer adds after the field manager has run: a claim's `status` and a
/// template's `spec.metadata` are structs, written as `{}` when empty.
pub(crate) fn after_record(def: &ResourceDef, obj: &mut Value) {
    match def.key.as_ref() {
        CLAIM_KEY if !obj.get("status").is_some_and(Value::is_object) => {
            obj["status"] = json!({});
        }
        TEMPLATE_KEY => {
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
                && !spec.get("metadata").is_some_and(Value::is_object)
            {
                spec.insert("metadata".into(), json!({}));
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Validation helpers

fn dns_label(name: &str, path: &str) -> Vec<FieldError> {
    v::dns1123_label(name)
        .into_iter()
        .map(|m| FieldError::invalid_str(path, name, &m))
        .collect()
}

fn dns_subdomain(name: &str, path: &str) -> Vec<FieldError> {
    v::dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid_str(path, name, &m))
        .collect()
}

/// `validateSlice`/`validateSet`: too many items is one error; otherwise each item, then (for a
/// set) duplicate keys.
fn list_items<'a>(
    errs: &mut Vec<FieldError>,
    items: &'a [Value],
    max: usize,
    path: &str,
    key: Option<&dyn Fn(&Value) -> String>,
    mut each: impl FnMut(&mut Vec<FieldError>, &'a Value, &str),
) {
    if items.len() > max {
        errs.push(FieldError::too_many(path, items.len(), max));
        return;
    }
    for (i, item) in items.iter().enumerate() {
        each(errs, item, &format!("{path}[{i}]"));
    }
    if let Some(key) = key {
        let mut seen = HashSet::new();
        for (i, item) in items.iter().enumerate() {
            let k = key(item);
            if !seen.insert(k.clone()) {
                errs.push(FieldError::duplicate(format!("{path}[{i}]"), quote(&k)));
            }
        }
    }
}

fn name_key(item: &Value) -> String {
    s(item, "/name").to_string()
}

/// `fldPath.Key(truncateIfTooLong(key, max))`: a map entry's path, a long key shortened in the
/// middle.
fn key_path(path: &str, key: &str, max: usize) -> String {
    let max = max.max(16);
    if key.len() <= max {
        return format!("{path}[{key}]");
    }
    let rest = max - 3;
    let b = key.as_bytes();
    let head = String::from_utf8_lossy(&b[..rest.div_ceil(2)]);
    let tail = String::from_utf8_lossy(&b[b.len() - rest / 2..]);
    format!("{path}[{head}...{tail}]")
}

fn driver_name(name: &str, path: &str) -> Vec<FieldError> {
    v::csi_driver_name(name, path)
}

/// `validateCIdentifier`.
fn c_identifier(id: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if id.len() > ID_MAX {
        errs.push(FieldError::too_long(path, ID_MAX));
    }
    let b = id.as_bytes();
    let ok = !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_');
    if !ok {
        errs.push(FieldError::invalid_str(
            path,
            id,
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')",
        ));
    }
    errs
}

/// `validateQualifiedName` (attribute and capacity names): `[domain/]id`.
fn qualified_name(name: &str, path: &str) -> Vec<FieldError> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [id] => c_identifier(id, path),
        [domain, id] => {
            let mut errs = Vec::new();
            if domain.is_empty() {
                errs.push(FieldError::invalid_str(
                    path,
                    "",
                    "the domain must not be empty",
                ));
            } else {
                errs.extend(driver_name(domain, path));
            }
            if id.is_empty() {
                errs.push(FieldError::invalid_str(
                    path,
                    "",
                    "the name must not be empty",
                ));
            } else {
                errs.extend(c_identifier(id, path));
            }
            errs
        }
        _ => vec![FieldError::invalid_str(
            path,
            name,
            "must not contain more than one slash",
        )],
    }
}

/// `validateFullyQualifiedName` (constraint attributes): a qualified name with a domain.
fn fully_qualified_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = qualified_name(name, path);
    if !name.contains('/') {
        errs.push(FieldError::invalid_str(
            path,
            name,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
    errs
}

fn pool_name(name: &str, path: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    let mut errs = Vec::new();
    if name.len() > POOL_NAME_MAX {
        errs.push(FieldError::too_long(path, POOL_NAME_MAX));
    }
    for part in name.split('/') {
        errs.extend(dns_subdomain(part, path));
    }
    errs
}

/// `github.com/google/uuid.Validate`: the four forms it accepts.
fn uuid_error(id: &str) -> Option<String> {
    let hex = |c: u8| c.is_ascii_hexdigit();
    let b = id.as_bytes();
    let b = match b.len() {
        36 => b,
        45 => {
            if !b[..9].eq_ignore_ascii_case(b"urn:uuid:") {
                let prefix = String::from_utf8_lossy(&b[..9]);
                return Some(format!("invalid urn prefix: {}", quote(&prefix)));
            }
            &b[9..]
        }
        38 => {
            if b[0] != b'{' || b[37] != b'}' {
                return Some("invalid bracketed UUID format".into());
            }
            &b[1..37]
        }
        32 => {
            return (!b.iter().all(|&c| hex(c))).then(|| "invalid UUID format".into());
        }
        n => return Some(format!("invalid UUID length: {n}")),
    };
    let dashes = [8, 13, 18, 23];
    let ok = b.iter().enumerate().all(|(i, &c)| {
        if dashes.contains(&i) {
            c == b'-'
        } else {
            hex(c)
        }
    });
    (!ok).then(|| "invalid UUID format".into())
}

/// `validateUID` (a `shareID`): a UUID, and in its normalized form.
fn uid(id: &str, path: &str) -> Vec<FieldError> {
    if let Some(e) = uuid_error(id) {
        return vec![FieldError::invalid_str(
            path,
            id,
            &format!("error validating uid: {e}"),
        )];
    }
    if id.len() != 36 || id != id.to_ascii_lowercase() {
        return vec![FieldError::invalid_str(
            path,
            id,
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
        )];
    }
    Vec::new()
}

fn node_name(name: &str, path: &str) -> Vec<FieldError> {
    dns_subdomain(name, path)
}

fn label_value(value: &str, path: &str) -> Vec<FieldError> {
    v::label_value(value)
        .into_iter()
        .map(|m| FieldError::invalid_str(path, value, &m))
        .collect()
}

const TAINT_EFFECTS: [&str; 3] = ["NoExecute", "NoSchedule", "None"];

fn taint(errs: &mut Vec<FieldError>, t: &Value, path: &str) {
    errs.extend(v::label_name(s(t, "/key"), &format!("{path}.key")));
    let value = s(t, "/value");
    if !value.is_empty() {
        errs.extend(label_value(value, &format!("{path}.value")));
    }
    match s(t, "/effect") {
        "" => errs.push(FieldError::required(format!("{path}.effect"), "")),
        e if !TAINT_EFFECTS.contains(&e) => errs.push(FieldError::not_supported(
            format!("{path}.effect"),
            quote(e),
            &TAINT_EFFECTS,
        )),
        _ => {}
    }
}

fn toleration(errs: &mut Vec<FieldError>, t: &Value, path: &str) {
    let key = s(t, "/key");
    if !key.is_empty() {
        errs.extend(v::label_name(key, &format!("{path}.key")));
    }
    let value = s(t, "/value");
    match s(t, "/operator") {
        "Exists" => {
            if !value.is_empty() {
                errs.push(FieldError::invalid_str(
                    format!("{path}.value"),
                    value,
                    "must be empty for operator `Exists`",
                ));
            }
        }
        "Equal" => errs.extend(label_value(value, &format!("{path}.value"))),
        "" => errs.push(FieldError::required(format!("{path}.operator"), "")),
        op => errs.push(FieldError::not_supported(
            format!("{path}.operator"),
            quote(op),
            &["Equal", "Exists"],
        )),
    }
    let effect = s(t, "/effect");
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        errs.push(FieldError::not_supported(
            format!("{path}.effect"),
            quote(effect),
            &TAINT_EFFECTS,
        ));
    }
}

/// A CEL selector expression (`validateCELExpression`); `stored` expressions are not compiled
/// again.
fn cel_expression(errs: &mut Vec<FieldError>, expr: &str, path: &str, stored: bool) {
    if stored {
        return;
    }
    if expr.len() > crate::cel::MAX_LENGTH {
        errs.push(FieldError::too_long(path, crate::cel::MAX_LENGTH));
        return;
    }
    if let Err(detail) = crate::cel::compile(expr) {
        errs.push(FieldError::invalid_str(path, expr, &detail));
    }
}

fn selectors(errs: &mut Vec<FieldError>, sels: &[Value], path: &str, stored: bool) {
    list_items(
        errs,
        sels,
        SELECTORS_MAX,
        path,
        None,
        |errs, sel, p| match sel.get("cel").filter(|c| !c.is_null()) {
            None => errs.push(FieldError::required(format!("{p}.cel"), "")),
            Some(c) => cel_expression(
                errs,
                c.get("expression").and_then(Value::as_str).unwrap_or(""),
                &format!("{p}.cel.expression"),
                stored,
            ),
        },
    );
}

fn device_class_ref(errs: &mut Vec<FieldError>, name: &str, path: &str) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else {
        errs.extend(dns_subdomain(name, path));
    }
}

fn allocation_mode(errs: &mut Vec<FieldError>, r: &Value, path: &str) {
    let count = r.get("count").and_then(Value::as_i64).unwrap_or(0);
    let count_path = format!("{path}.count");
    match s(r, "/allocationMode") {
        "All" => {
            if count != 0 {
                errs.push(FieldError::invalid(
                    count_path,
                    count.to_string(),
                    "must not be specified when allocationMode is 'All'",
                ));
            }
        }
        "ExactCount" => {
            if count <= 0 {
                errs.push(FieldError::invalid(
                    count_path,
                    count.to_string(),
                    "must be greater than zero",
                ));
            }
        }
        mode => errs.push(FieldError::not_supported(
            format!("{path}.allocationMode"),
            quote(mode),
            &["All", "ExactCount"],
        )),
    }
}

/// The fields an exact request and a sub-request share.
fn request_body(errs: &mut Vec<FieldError>, r: &Value, path: &str, stored: bool) {
    device_class_ref(
        errs,
        s(r, "/deviceClassName"),
        &format!("{path}.deviceClassName"),
    );
    selectors(
        errs,
        arr(r, "/selectors"),
        &format!("{path}.selectors"),
        stored,
    );
    allocation_mode(errs, r, path);
    list_items(
        errs,
        arr(r, "/tolerations"),
        TOLERATIONS_MAX,
        &format!("{path}.tolerations"),
        None,
        toleration,
    );
}

fn device_request(errs: &mut Vec<FieldError>, r: &Value, path: &str, stored: bool) {
    errs.extend(dns_label(s(r, "/name"), &format!("{path}.name")));
    let first = arr(r, "/firstAvailable");
    let exactly = r.get("exactly").filter(|e| !e.is_null());
    match (!first.is_empty(), exactly) {
        (false, None) => errs.push(FieldError::required(
            path,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        (true, Some(_)) => errs.push(FieldError::invalid(
            path,
            "null".into(),
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
        (true, None) => list_items(
            errs,
            first,
            FIRST_AVAILABLE_MAX,
            &format!("{path}.firstAvailable"),
            Some(&name_key),
            |errs, sub, p| {
                errs.extend(dns_label(s(sub, "/name"), &format!("{p}.name")));
                request_body(errs, sub, p, stored);
            },
        ),
        (false, Some(e)) => request_body(errs, e, &format!("{path}.exactly"), stored),
    }
}

/// The names requests can be referred to by: `req`, and `req/sub` for sub-requests.
fn request_names(devices: &Value) -> HashSet<String> {
    let mut names = HashSet::new();
    for r in arr(devices, "/requests") {
        let name = s(r, "/name");
        names.insert(name.to_string());
        for sub in arr(r, "/firstAvailable") {
            names.insert(format!("{name}/{}", s(sub, "/name")));
        }
    }
    names
}

/// `validateRequestNameRef`.
fn request_ref(errs: &mut Vec<FieldError>, name: &str, path: &str, names: &HashSet<String>) {
    const MSG: &str = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";
    let segments: Vec<&str> = name.split('/').collect();
    if segments.len() > 2 {
        errs.push(FieldError::invalid_str(path, name, MSG));
        return;
    }
    for seg in &segments {
        errs.extend(dns_label(seg, path));
    }
    if !names.contains(name) {
        errs.push(FieldError::invalid_str(path, name, MSG));
    }
}

fn request_refs(errs: &mut Vec<FieldError>, refs: &[Value], path: &str, names: &HashSet<String>) {
    list_items(
        errs,
        refs,
        REQUESTS_MAX,
        path,
        Some(&|x: &Value| x.as_str().unwrap_or("").to_string()),
        |errs, r, p| request_ref(errs, r.as_str().unwrap_or(""), p, names),
    );
}

/// `validateDeviceConfiguration`: an opaque driver configuration.
fn device_configuration(errs: &mut Vec<FieldError>, c: &Value, path: &str, stored: bool) {
    let Some(opaque) = c.get("opaque").filter(|o| !o.is_null()) else {
        errs.push(FieldError::required(format!("{path}.opaque"), ""));
        return;
    };
    let p = format!("{path}.opaque");
    errs.extend(driver_name(s(opaque, "/driver"), &format!("{p}.driver")));
    let pp = format!("{p}.parameters");
    match opaque.get("parameters") {
        None | Some(Value::Null) => errs.push(FieldError::required(pp, "")),
        Some(params) => {
            if !stored && params.to_string().len() > OPAQUE_PARAMETERS_MAX {
                errs.push(FieldError::too_long(pp, OPAQUE_PARAMETERS_MAX));
            } else if !params.is_object() {
                errs.push(FieldError::invalid(
                    pp,
                    quote("<value omitted>"),
                    "must be a valid JSON object",
                ));
            }
        }
    }
}

/// `validateDeviceClaim` at `path` (`spec.devices` or `spec.spec.devices`).
fn device_claim(devices: &Value, path: &str, stored: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let names = request_names(devices);
    list_items(
        &mut errs,
        arr(devices, "/requests"),
        REQUESTS_MAX,
        &format!("{path}.requests"),
        Some(&name_key),
        |errs, r, p| device_request(errs, r, p, stored),
    );
    list_items(
        &mut errs,
        arr(devices, "/constraints"),
        CONSTRAINTS_MAX,
        &format!("{path}.constraints"),
        None,
        |errs, c, p| {
            request_refs(errs, arr(c, "/requests"), &format!("{p}.requests"), &names);
            if let Some(m) = c.get("matchAttribute").and_then(Value::as_str) {
                errs.extend(fully_qualified_name(m, &format!("{p}.matchAttribute")));
            } else if let Some(d) = c.get("distinctAttribute").and_then(Value::as_str) {
                errs.extend(fully_qualified_name(d, &format!("{p}.distinctAttribute")));
            } else {
                // The message upstream gives when `DRAConsumableCapacity` is on (as in v1.36).
                errs.push(FieldError::required(
                    p,
                    r#"exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#,
                ));
            }
        },
    );
    list_items(
        &mut errs,
        arr(devices, "/config"),
        CONFIG_MAX,
        &format!("{path}.config"),
        None,
        |errs, c, p| {
            request_refs(errs, arr(c, "/requests"), &format!("{p}.requests"), &names);
            device_configuration(errs, c, p, stored);
        },
    );
    errs
}

fn template_metadata(errs: &mut Vec<FieldError>, m: &Value, path: &str) {
    if let Some(labels) = m.get("labels").and_then(Value::as_object) {
        for (k, val) in labels {
            errs.extend(v::label_name(k, &format!("{path}.labels")));
            errs.extend(label_value(
                val.as_str().unwrap_or(""),
                &format!("{path}.labels"),
            ));
        }
    }
    if let Some(ann) = m.get("annotations").and_then(Value::as_object) {
        for k in ann.keys() {
            errs.extend(
                v::qualified_name(&k.to_ascii_lowercase())
                    .into_iter()
                    .map(|msg| FieldError::invalid_str(format!("{path}.annotations"), k, &msg)),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// DeviceClass

fn validate_class(class: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(class, "name"));
    let stored_sel =
        old.is_some_and(|o| v::same(o.at("/spec/selectors"), class.at("/spec/selectors")));
    selectors(
        &mut errs,
        arr(class, "/spec/selectors"),
        "spec.selectors",
        stored_sel,
    );
    let stored_cfg = old.is_some_and(|o| v::same(o.at("/spec/config"), class.at("/spec/config")));
    list_items(
        &mut errs,
        arr(class, "/spec/config"),
        CONFIG_MAX,
        "spec.config",
        None,
        |errs, c, p| device_configuration(errs, c, p, stored_cfg),
    );
    if let Some(name) = class
        .at("/spec/extendedResourceName")
        .and_then(Value::as_str)
    {
        let native = !name.contains('/') || name.contains("kubernetes.io/");
        let extended = !native
            && !name.starts_with("requests.")
            && v::qualified_name(&format!("requests.{name}")).is_empty();
        if !extended {
            errs.push(FieldError::invalid_str(
                "spec.extendedResourceName",
                name,
                "must be a valid extended resource name",
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// ResourceSlice

fn attribute(errs: &mut Vec<FieldError>, a: &Value, path: &str) {
    let mut n = 0;
    for f in [
        "bool", "int", "string", "version", "bools", "ints", "strings", "versions",
    ] {
        if present(a, &format!("/{f}")) {
            n += 1;
        }
    }
    if let Some(sv) = a.get("string").and_then(Value::as_str)
        && sv.len() > ATTRIBUTE_VALUE_MAX
    {
        errs.push(FieldError::too_long(
            format!("{path}.string"),
            ATTRIBUTE_VALUE_MAX,
        ));
    }
    if let Some(ver) = a.get("version").and_then(Value::as_str) {
        if !semver(ver) {
            errs.push(FieldError::invalid_str(
                format!("{path}.version"),
                ver,
                "must be a string compatible with semver.org spec 2.0.0",
            ));
        }
        if ver.len() > ATTRIBUTE_VALUE_MAX {
            errs.push(FieldError::too_long(
                format!("{path}.version"),
                ATTRIBUTE_VALUE_MAX,
            ));
        }
    }
    for f in ["bools", "ints", "strings", "versions"] {
        if a.get(f)
            .and_then(Value::as_array)
            .is_some_and(Vec::is_empty)
        {
            errs.push(FieldError::invalid(
                format!("{path}.{f}"),
                "[]".into(),
                "must not be empty if specified",
            ));
        }
    }
    match n {
        0 => errs.push(FieldError::invalid_str(
            path,
            "",
            "exactly one value must be specified",
        )),
        1 => {}
        _ => errs.push(FieldError::invalid(
            path,
            render(a),
            "exactly one value must be specified",
        )),
    }
}

/// A semantic version as semver.org 2.0.0 (`semverRe`).
fn semver(s: &str) -> bool {
    let (core, build) = match s.split_once('+') {
        Some((c, b)) => (c, Some(b)),
        None => (s, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (core, None),
    };
    let numeric = |x: &str| {
        !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()) && (x == "0" || !x.starts_with('0'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    let ident_ok =
        |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    parts.len() == 3
        && parts.iter().all(|p| numeric(p))
        && pre.is_none_or(|p| {
            p.split('.')
                .all(|id| ident_ok(id) && (!id.bytes().all(|b| b.is_ascii_digit()) || numeric(id)))
        })
        && build.is_none_or(|b| b.split('.').all(ident_ok))
}

/// The quantity at `field` of `obj`, unless absent or `null` (a nil `*resource.Quantity`).
fn optional_quantity(obj: &Value, field: &str) -> Option<Quantity> {
    obj.get(field).filter(|q| !q.is_null()).map(Quantity::of)
}

/// `validateRequestPolicy`: a multi-allocatable device's capacity policy sets at most one of
/// `validValues` and `validRange`, and either needs a `default` it admits.
fn request_policy(errs: &mut Vec<FieldError>, capacity: &Quantity, policy: &Value, path: &str) {
    let values = arr(policy, "/validValues");
    let range = policy.get("validRange").filter(|r| !r.is_null());
    let default = optional_quantity(policy, "default");
    if !values.is_empty() && range.is_some() {
        errs.push(FieldError::forbidden(
            path,
            r#"exactly one policy can be specified, cannot specify "validValues" and "validRange" at the same time"#,
        ));
        return;
    }
    let required = |kind: &str| {
        FieldError::required(
            format!("{path}.default"),
            &format!("required when {kind} is defined"),
        )
    };
    if !values.is_empty() {
        match default {
            None => errs.push(required("validValues")),
            Some(d) => valid_values(errs, &d, capacity, values, &format!("{path}.validValues")),
        }
    } else if let Some(r) = range {
        match default {
            None => errs.push(required("validRange")),
            Some(d) => valid_range(errs, &d, capacity, r, &format!("{path}.validRange")),
        }
    }
}

/// `validateRequestPolicyValidValues`: ascending, at most 10, none above the capacity, no two
/// with the same whole value, the default among them.
fn valid_values(
    errs: &mut Vec<FieldError>,
    default: &Quantity,
    capacity: &Quantity,
    values: &[Value],
    path: &str,
) {
    let qs: Vec<Quantity> = values.iter().map(Quantity::of).collect();
    for (i, w) in qs.windows(2).enumerate() {
        if w[0].nanos > w[1].nanos {
            errs.push(FieldError::invalid_str(
                format!("{path}[{}]", i + 1),
                &w[1].string(),
                "values must be sorted in ascending order",
            ));
        }
    }
    let mut found = false;
    if qs.len() > POLICY_VALUES_MAX {
        // `validateSet` stops here, so the default is never found.
        errs.push(FieldError::too_many(path, qs.len(), POLICY_VALUES_MAX));
    } else {
        for (i, q) in qs.iter().enumerate() {
            if q.nanos > capacity.nanos {
                errs.push(FieldError::invalid_str(
                    format!("{path}[{i}]"),
                    &q.string(),
                    &format!(
                        "option is larger than capacity value: {}",
                        capacity.string()
                    ),
                ));
            }
            found |= q.nanos == default.nanos;
        }
        // Upstream's set key is `Value()`, the whole number rounded up.
        let mut seen = HashSet::new();
        for (i, q) in qs.iter().enumerate() {
            let key = q.value().to_string();
            if !seen.insert(key.clone()) {
                errs.push(FieldError::duplicate(format!("{path}[{i}]"), quote(&key)));
            }
        }
    }
    if !found {
        errs.push(FieldError::invalid_str(
            path,
            &default.string(),
            "default value is not valid according to the requestPolicy",
        ));
    }
}

/// `validateRequestPolicyRange`: a `min`, bounds within the capacity and each other, the
/// default within them and on a step.
fn valid_range(
    errs: &mut Vec<FieldError>,
    default: &Quantity,
    capacity: &Quantity,
    range: &Value,
    path: &str,
) {
    let Some(min) = optional_quantity(range, "min") else {
        errs.push(FieldError::required(
            format!("{path}.min"),
            "required when validRange is defined",
        ));
        return;
    };
    let (cap, min_s) = (capacity.string(), min.string());
    if min.nanos > capacity.nanos {
        errs.push(FieldError::invalid_str(
            format!("{path}.min"),
            &min_s,
            &format!("min is larger than capacity value: {cap}"),
        ));
    }
    // v1.36 reports the default's bounds at `min` and `max` (later releases: at `default`).
    if default.nanos < min.nanos {
        errs.push(FieldError::invalid_str(
            format!("{path}.min"),
            &default.string(),
            &format!("default is less than min: {min_s}"),
        ));
    }
    let max = optional_quantity(range, "max");
    if let Some(max) = max {
        let p = format!("{path}.max");
        let max_s = max.string();
        if min.nanos > max.nanos {
            let msg = format!("min is larger than max: {max_s}");
            errs.push(FieldError::invalid_str(&p, &min_s, &msg));
        }
        if max.nanos > capacity.nanos {
            let msg = format!("max is larger than capacity value: {cap}");
            errs.push(FieldError::invalid_str(&p, &max_s, &msg));
        }
        if default.nanos > max.nanos {
            let msg = format!("default is more than max: {max_s}");
            errs.push(FieldError::invalid_str(&p, &default.string(), &msg));
        }
    }
    let Some(step) = optional_quantity(range, "step") else {
        return;
    };
    let p = format!("{path}.step");
    let step_s = step.string();
    if step.nanos <= 0 {
        // v1.36.0 divides by a zero step (a panic, #139653) and takes a negative one; upstream's
        // fix (#139698) refuses both.
        errs.push(FieldError::invalid_str(
            p,
            &step_s,
            "must be greater than zero",
        ));
        return;
    }
    let added = min.plus(&step);
    if added.nanos > capacity.nanos {
        errs.push(FieldError::invalid_str(
            &p,
            &step_s,
            &format!(
                "one step {} is larger than capacity value: {cap}",
                added.string()
            ),
        ));
    }
    // The step arithmetic is on `Value()` as an int64, which a bound above its range does not
    // fit (v1.36.0 divides by its truncation; upstream's fix, #140666, refuses it).
    let bounds = [
        ("default", Some(*default)),
        ("min", Some(min)),
        ("max", max),
    ];
    let mut unsafe_bound = false;
    for (name, q) in bounds.into_iter().chain([("step", Some(step))]) {
        if let Some(q) = q
            && q.value() > i128::from(i64::MAX)
        {
            errs.push(FieldError::invalid_str(
                format!("{path}.{name}"),
                &q.string(),
                "must not be larger than 9223372036854775807",
            ));
            unsafe_bound = true;
        }
    }
    if unsafe_bound {
        return;
    }
    let on_step = |errs: &mut Vec<FieldError>, q: &Quantity| {
        if (q.value() - min.value()) % step.value() != 0 {
            errs.push(FieldError::invalid_str(
                &p,
                &q.string(),
                &format!("value is not a multiple of a given step ({step_s}) from ({min_s})"),
            ));
        }
    };
    on_step(errs, default);
    if let Some(max) = max {
        on_step(errs, &max);
    }
}

fn device(
    errs: &mut Vec<FieldError>,
    d: &Value,
    old: Option<&Value>,
    path: &str,
    per_device: bool,
) {
    errs.extend(dns_label(s(d, "/name"), &format!("{path}.name")));
    let attrs = d.get("attributes").and_then(Value::as_object);
    let caps = d.get("capacity").and_then(Value::as_object);
    let total = attrs.map_or(0, Map::len) + caps.map_or(0, Map::len);
    if total > ATTRIBUTES_AND_CAPACITY_MAX {
        errs.push(FieldError::invalid(
            path,
            total.to_string(),
            &format!(
                "the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITY_MAX}"
            ),
        ));
    }
    let mut keys: Vec<(&String, &Value)> = attrs.into_iter().flatten().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    let attrs_path = format!("{path}.attributes");
    for (k, a) in keys {
        errs.extend(qualified_name(k, &attrs_path));
        attribute(errs, a, &key_path(&attrs_path, k, QUALIFIED_NAME_KEY_MAX));
    }
    let same_caps = old.is_some_and(|o| v::same(o.get("capacity"), d.get("capacity")));
    if !same_caps {
        let multi = d.get("allowMultipleAllocations").and_then(Value::as_bool) == Some(true);
        let mut keys: Vec<(&String, &Value)> = caps.into_iter().flatten().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        let caps_path = format!("{path}.capacity");
        for (k, c) in keys {
            errs.extend(qualified_name(k, &caps_path));
            let Some(policy) = c.get("requestPolicy").filter(|p| !p.is_null()) else {
                continue;
            };
            let p = format!(
                "{}.requestPolicy",
                key_path(&caps_path, k, QUALIFIED_NAME_KEY_MAX)
            );
            if multi {
                let value = Quantity::of(c.get("value").unwrap_or(&Value::Null));
                request_policy(errs, &value, policy, &p);
            } else {
                errs.push(FieldError::forbidden(
                    p,
                    "allowMultipleAllocations must be true",
                ));
            }
        }
    }
    let same_taints = old.is_some_and(|o| v::same(o.get("taints"), d.get("taints")));
    if !same_taints {
        list_items(
            errs,
            arr(d, "/taints"),
            TAINTS_MAX,
            &format!("{path}.taints"),
            None,
            taint,
        );
    }
    let node_fields = ["nodeName", "nodeSelector", "allNodes"]
        .iter()
        .any(|f| present(d, &format!("/{f}")));
    if per_device {
        let mut set = Vec::new();
        if let Some(n) = d.get("nodeName").and_then(Value::as_str) {
            if n.is_empty() {
                errs.push(FieldError::invalid_str(
                    format!("{path}.nodeName"),
                    n,
                    "must not be empty",
                ));
            } else {
                set.push("`nodeName`");
                errs.extend(node_name(n, &format!("{path}.nodeName")));
            }
        }
        if let Some(sel) = d.get("nodeSelector").filter(|x| !x.is_null()) {
            set.push("`nodeSelector`");
            storage::node_selector(errs, sel, &format!("{path}.nodeSelector"));
        }
        if let Some(all) = d.get("allNodes").and_then(Value::as_bool) {
            if all {
                set.push("`allNodes`");
            } else {
                errs.push(FieldError::invalid(
                    format!("{path}.allNodes"),
                    "false".into(),
                    "must be either unset or set to true",
                ));
            }
        }
        const MSG: &str = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec";
        match set.len() {
            0 => errs.push(FieldError::required(path, MSG)),
            1 => {}
            _ => errs.push(FieldError::invalid_str(
                path,
                &format!("{{{}}}", set.join(", ")),
                MSG,
            )),
        }
    } else if node_fields {
        errs.push(FieldError::invalid(
            path,
            "null".into(),
            "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        ));
    }
}

fn validate_slice(slice: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = v::subdomain_name(meta::meta_str(slice, "name"));
    let spec = slice.get("spec").unwrap_or(&Value::Null);
    errs.extend(driver_name(s(spec, "/driver"), "spec.driver"));
    errs.extend(pool_name(s(spec, "/pool/name"), "spec.pool.name"));
    let count = spec
        .at("/pool/resourceSliceCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if count <= 0 {
        errs.push(FieldError::invalid(
            "spec.pool.resourceSliceCount",
            count.to_string(),
            "must be greater than zero",
        ));
    }
    let generation = spec
        .at("/pool/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation < 0 {
        errs.push(FieldError::invalid(
            "spec.pool.generation",
            generation.to_string(),
            "must be greater than or equal to zero",
        ));
    }
    if let Some(old) = old {
        for (ptr, path) in [
            ("/spec/pool/name", "spec.pool.name"),
            ("/spec/driver", "spec.driver"),
            ("/spec/nodeName", "spec.nodeName"),
        ] {
            if !v::same(old.at(ptr), slice.at(ptr)) {
                errs.push(FieldError::invalid(
                    path,
                    slice.at(ptr).map_or("null".into(), render),
                    "field is immutable",
                ));
            }
        }
    }
    let mut set = Vec::new();
    if let Some(n) = spec.get("nodeName").filter(|x| !x.is_null()) {
        let n = n.as_str().unwrap_or("");
        if n.is_empty() {
            errs.push(FieldError::invalid_str(
                "spec.nodeName",
                n,
                "must be either unset or set to a non-empty string",
            ));
        } else {
            set.push("`nodeName`");
            errs.extend(node_name(n, "spec.nodeName"));
        }
    }
    if let Some(sel) = spec.get("nodeSelector").filter(|x| !x.is_null()) {
        set.push("`nodeSelector`");
        storage::node_selector(&mut errs, sel, "spec.nodeSelector");
        let terms = arr(sel, "/nodeSelectorTerms");
        if terms.len() != 1 {
            errs.push(FieldError::invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                Value::Array(terms.to_vec()).to_string(),
                "must have exactly one node selector term",
            ));
        }
    }
    for (f, label) in [
        ("allNodes", "`allNodes`"),
        ("perDeviceNodeSelection", "`perDeviceNodeSelection`"),
    ] {
        if let Some(b) = spec.get(f).and_then(Value::as_bool) {
            if b {
                set.push(label);
            } else {
                errs.push(FieldError::invalid(
                    format!("spec.{f}"),
                    "false".into(),
                    "must be either unset or set to true",
                ));
            }
        }
    }
    const MSG: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => errs.push(FieldError::required("spec", MSG)),
        1 => {}
        _ => errs.push(FieldError::invalid_str(
            "spec",
            &format!("{{{}}}", set.join(", ")),
            &format!("{MSG}, but multiple fields are set"),
        )),
    }
    if present(spec, "/sharedCounters") && present(spec, "/devices") {
        errs.push(FieldError::invalid_str(
            "spec",
            "",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let devices = arr(spec, "/devices");
    let advanced = devices.iter().any(|d| {
        !arr(d, "/taints").is_empty()
            || !arr(d, "/consumesCounters").is_empty()
            || ["bools", "ints", "strings", "versions"].iter().any(|f| {
                d.get("attributes")
                    .and_then(Value::as_object)
                    .is_some_and(|a| a.values().any(|x| present(x, &format!("/{f}"))))
            })
    });
    let max = if advanced {
        SLICE_DEVICES_MAX_ADVANCED
    } else {
        SLICE_DEVICES_MAX
    };
    let per_device = spec.get("perDeviceNodeSelection").and_then(Value::as_bool) == Some(true);
    let old_devices = old.map(|o| arr(o, "/spec/devices")).unwrap_or_default();
    list_items(
        &mut errs,
        devices,
        max,
        "spec.devices",
        Some(&name_key),
        |errs, d, p| {
            let od = old_devices.iter().find(|o| s(o, "/name") == s(d, "/name"));
            device(errs, d, od, p, per_device);
        },
    );
    list_items(
        &mut errs,
        arr(spec, "/sharedCounters"),
        SHARED_COUNTERS_MAX,
        "spec.sharedCounters",
        Some(&name_key),
        |errs, c, p| {
            let name = s(c, "/name");
            if name.is_empty() {
                errs.push(FieldError::required(format!("{p}.name"), ""));
            } else {
                errs.extend(dns_label(name, &format!("{p}.name")));
            }
            if c.get("counters")
                .and_then(Value::as_object)
                .is_none_or(Map::is_empty)
            {
                errs.push(FieldError::required(format!("{p}.counters"), ""));
            }
        },
    );
    errs
}

// ---------------------------------------------------------------------------------------------
// ResourceClaim status

fn consumer_ref(errs: &mut Vec<FieldError>, r: &Value, path: &str) {
    for f in ["resource", "name", "uid"] {
        if s(r, &format!("/{f}")).is_empty() {
            errs.push(FieldError::required(format!("{path}.{f}"), ""));
        }
    }
}

fn allocation(errs: &mut Vec<FieldError>, a: &Value, path: &str, names: &HashSet<String>) {
    list_items(
        errs,
        arr(a, "/devices/results"),
        RESULTS_MAX,
        &format!("{path}.devices.results"),
        None,
        |errs, r, p| {
            request_ref(errs, s(r, "/request"), &format!("{p}.request"), names);
            errs.extend(driver_name(s(r, "/driver"), &format!("{p}.driver")));
            errs.extend(pool_name(s(r, "/pool"), &format!("{p}.pool")));
            errs.extend(dns_label(s(r, "/device"), &format!("{p}.device")));
            list_items(
                errs,
                arr(r, "/tolerations"),
                TOLERATIONS_MAX,
                &format!("{p}.tolerations"),
                None,
                toleration,
            );
            if let Some(id) = r.get("shareID").filter(|x| !x.is_null()) {
                errs.extend(uid(id.as_str().unwrap_or(""), &format!("{p}.shareID")));
            }
        },
    );
    list_items(
        errs,
        arr(a, "/devices/config"),
        2 * CONFIG_MAX,
        &format!("{path}.devices.config"),
        None,
        |errs, c, p| {
            match s(c, "/source") {
                "" => errs.push(FieldError::required(format!("{p}.source"), "")),
                "FromClaim" | "FromClass" => {}
                other => errs.push(FieldError::not_supported(
                    format!("{p}.source"),
                    quote(other),
                    &["FromClaim", "FromClass"],
                )),
            }
            request_refs(errs, arr(c, "/requests"), &format!("{p}.requests"), names);
            device_configuration(errs, c, p, false);
        },
    );
    if let Some(sel) = a.get("nodeSelector").filter(|x| !x.is_null()) {
        storage::node_selector(errs, sel, &format!("{path}.nodeSelector"));
    }
}

/// `structured.SharedDeviceID.String()`: `driver/pool/device[/shareID]`, the key of an allocated
/// device and of its status entry.
fn shared_device_id(d: &Value) -> String {
    let id = format!("{}/{}/{}", s(d, "/driver"), s(d, "/pool"), s(d, "/device"));
    match s(d, "/shareID") {
        "" => id,
        share => format!("{id}/{share}"),
    }
}

/// `validateDeviceStatus` over `status.devices`, keyed by the shared device ID: each entry names an
/// allocated device (with its `shareID`). Its `networkData` is not checked.
fn device_statuses(errs: &mut Vec<FieldError>, status: &Value) {
    let allocated: HashSet<String> = arr(status, "/allocation/devices/results")
        .iter()
        .map(shared_device_id)
        .collect();
    let devices = arr(status, "/devices");
    for (i, d) in devices.iter().enumerate() {
        let p = format!("status.devices[{i}]");
        errs.extend(driver_name(s(d, "/driver"), &format!("{p}.driver")));
        errs.extend(pool_name(s(d, "/pool"), &format!("{p}.pool")));
        errs.extend(dns_label(s(d, "/device"), &format!("{p}.device")));
        if let Some(id) = d.get("shareID").filter(|x| !x.is_null()) {
            errs.extend(uid(id.as_str().unwrap_or(""), &format!("{p}.shareID")));
        }
        let id = shared_device_id(d);
        if !allocated.contains(&id) {
            // A `SharedDeviceID` is rendered with its `String()`, unquoted.
            errs.push(FieldError::invalid(
                &p,
                id,
                "must be an allocated device in the claim",
            ));
        }
        let conditions = arr(d, "/conditions");
        if conditions.len() > DEVICE_STATUS_CONDITIONS_MAX {
            errs.push(FieldError::too_many(
                format!("{p}.conditions"),
                conditions.len(),
                DEVICE_STATUS_CONDITIONS_MAX,
            ));
        }
        errs.extend(crate::policy::validate_conditions(
            conditions,
            &format!("{p}.conditions"),
        ));
        if let Some(data) = d.get("data").filter(|x| !x.is_null()) {
            let dp = format!("{p}.data");
            if data.to_string().len() > DEVICE_STATUS_DATA_MAX {
                errs.push(FieldError::too_long(dp, DEVICE_STATUS_DATA_MAX));
            } else if !data.is_object() {
                errs.push(FieldError::invalid(
                    dp,
                    quote("<value omitted>"),
                    "must be a valid JSON object",
                ));
            }
        }
    }
    let mut seen = HashSet::new();
    for (i, d) in devices.iter().enumerate() {
        let id = shared_device_id(d);
        if !seen.insert(id.clone()) {
            errs.push(FieldError::duplicate(format!("status.devices[{i}]"), id));
        }
    }
}

fn validate_claim_status(claim: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let status = claim.get("status").unwrap_or(&Value::Null);
    let reserved = arr(status, "/reservedFor");
    list_items(
        &mut errs,
        reserved,
        RESERVED_FOR_MAX,
        "status.reservedFor",
        Some(&|r: &Value| s(r, "/uid").to_string()),
        consumer_ref,
    );
    device_statuses(&mut errs, status);
    let alloc = status.get("allocation").filter(|a| !a.is_null());
    if !reserved.is_empty() && alloc.is_none() {
        errs.push(FieldError::forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
    } else if !reserved.is_empty() && present(claim, "/metadata/deletionTimestamp") {
        // Consumers may leave a claim being deleted, not join it.
        let before: HashSet<&str> = arr(old, "/status/reservedFor")
            .iter()
            .map(|r| s(r, "/uid"))
            .collect();
        if reserved.iter().any(|r| !before.contains(s(r, "/uid"))) {
            errs.push(FieldError::forbidden(
                "status.reservedFor",
                "new entries may not be added while `deallocationRequested` or \
                 `deletionTimestamp` are set",
            ));
        }
    }
    let old_alloc = old.at("/status/allocation").filter(|a| !a.is_null());
    match (old_alloc, alloc) {
        (Some(o), Some(n)) if !v::same(Some(o), Some(n)) => {
            errs.push(FieldError::invalid(
                "status.allocation",
                render(n),
                "field is immutable",
            ));
        }
        (None, Some(n)) => {
            let names = request_names(claim.at("/spec/devices").unwrap_or(&Value::Null));
            allocation(&mut errs, n, "status.allocation", &names);
        }
        _ => {}
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Entry points

fn check(def: &ResourceDef, name: &str, errs: Vec<FieldError>) -> Result<(), ApiError> {
    v::check(&def.group, &def.kind, name, errs)
}

fn immutable_spec(old: &Value, new: &Value) -> Vec<FieldError> {
    if v::same(old.get("spec"), new.get("spec")) {
        Vec::new()
    } else {
        vec![FieldError::invalid(
            "spec",
            new.get("spec").map_or("null".into(), render),
            "field is immutable",
        )]
    }
}

/// Create: defaults, then the create validation (`.status` of a claim is already dropped).
pub(crate) fn admit_create(def: &ResourceDef, obj: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(def, obj)?;
    default(def, obj);
    let errs = match def.key.as_ref() {
        CLASS_KEY => validate_class(obj, None),
        CLAIM_KEY => {
            let mut errs = v::subdomain_name(name);
            errs.extend(device_claim(
                obj.at("/spec/devices").unwrap_or(&Value::Null),
                "spec.devices",
                false,
            ));
            errs
        }
        TEMPLATE_KEY => {
            let mut errs = v::subdomain_name(name);
            if let Some(m) = obj.at("/spec/metadata") {
                template_metadata(&mut errs, m, "spec.metadata");
            }
            errs.extend(device_claim(
                obj.at("/spec/spec/devices").unwrap_or(&Value::Null),
                "spec.spec.devices",
                false,
            ));
            errs
        }
        SLICE_KEY => validate_slice(obj, None),
        _ => Vec::new(),
    };
    check(def, name, errs)
}

/// Main-resource update: `new` carries the old status and metadata. Defaults, then the update
/// validation.
pub(crate) fn admit_update(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    name: &str,
) -> Result<(), ApiError> {
    decode(def, new)?;
    default(def, new);
    after_record(def, new);
    let errs = match def.key.as_ref() {
        CLASS_KEY => validate_class(new, Some(old)),
        CLAIM_KEY | TEMPLATE_KEY => immutable_spec(old, new),
        SLICE_KEY => validate_slice(new, Some(old)),
        _ => Vec::new(),
    };
    check(def, name, errs)
}

/// `/status` update of a claim: `new` is the old object with the new status.
pub(crate) fn admit_status_update(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    name: &str,
) -> Result<(), ApiError> {
    decode(def, new)?;
    after_record(def, new);
    let errs = match def.key.as_ref() {
        CLAIM_KEY => validate_claim_status(new, old),
        _ => Vec::new(),
    };
    check(def, name, errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantic_versions() {
        for ok in [
            "1.2.3",
            "0.0.0",
            "1.2.3-alpha.1",
            "1.2.3+build.5",
            "10.20.30-rc.1+x",
        ] {
            assert!(semver(ok), "{ok}");
        }
        for bad in ["1.2", "01.2.3", "1.2.3-01", "v1.2.3", "1.2.3-", "a.b.c"] {
            assert!(!semver(bad), "{bad}");
        }
    }

    #[test]
    fn qualified_names() {
        assert!(qualified_name("model", "p").is_empty());
        assert!(qualified_name("gpu.example.com/model", "p").is_empty());
        assert_eq!(qualified_name("a/b/c", "p").len(), 1);
        assert_eq!(
            qualified_name("/x", "p")[0].message(),
            "p: Invalid value: \"\": the domain must not be empty"
        );
        assert_eq!(c_identifier("1x", "p").len(), 1);
    }

    #[test]
    fn uuids_as_google_uuid_validates_them() {
        assert_eq!(uuid_error("0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f"), None);
        assert_eq!(uuid_error("0b9a1a773a474d369f496a1c2c3d4e5f"), None);
        assert_eq!(uuid_error("{0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f}"), None);
        assert_eq!(
            uuid_error("URN:uuid:0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f"),
            None
        );
        assert_eq!(
            uuid_error("urn:uid::0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f").as_deref(),
            Some("invalid urn prefix: \"urn:uid::\"")
        );
        assert_eq!(
            uuid_error("(0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f)").as_deref(),
            Some("invalid bracketed UUID format")
        );
        assert_eq!(
            uuid_error("0b9a1a77_3a47-4d36-9f49-6a1c2c3d4e5f").as_deref(),
            Some("invalid UUID format")
        );
        assert_eq!(uuid_error("").as_deref(), Some("invalid UUID length: 0"));
        // Valid, but not the normalized form a share ID must have.
        let braced = uid("{0b9a1a77-3a47-4d36-9f49-6a1c2c3d4e5f}", "p");
        assert!(braced[0].message().contains("RFC 4122 normalized form"));
    }

    #[test]
    fn quantities_round_up_and_add_as_resource_quantity() {
        let q = |s: &str| Quantity::of(&json!(s));
        assert_eq!(q("1500m").value(), 2);
        assert_eq!(q("-1500m").value(), -2);
        assert_eq!(q("2").value(), 2);
        assert_eq!(q(" 1Gi ").string(), "1Gi");
        assert_eq!(q("1Gi").plus(&q("512Mi")).string(), "1536Mi");
        assert_eq!(q("0").plus(&q("1Gi")).string(), "1Gi");
        assert_eq!(Quantity::of(&Value::Null).string(), "0");
        assert_eq!(parse_quantity(&json!(true)), Err(v::QUANTITY_FORMAT));
    }

    #[test]
    fn long_map_keys_are_shortened_in_paths() {
        assert_eq!(key_path("p", "k", 96), "p[k]");
        let key = format!("{}/{}", "d".repeat(63), "n".repeat(40));
        let path = key_path("p", &key, 96);
        assert_eq!(path.len(), "p[]".len() + 96);
        assert!(path.starts_with("p[ddd") && path.ends_with("nnn]") && path.contains("..."));
    }

    #[test]
    fn a_step_beyond_int64_is_refused_before_the_arithmetic() {
        let mut errs = Vec::new();
        let huge = json!("18446744073709551616");
        valid_range(
            &mut errs,
            &Quantity::of(&json!("0")),
            &Quantity::of(&huge),
            &json!({"min": "0", "step": huge}),
            "r",
        );
        assert_eq!(
            errs.iter().map(FieldError::message).collect::<Vec<_>>(),
            [
                "r.step: Invalid value: \"18446744073709551616\": must not be larger than 9223372036854775807"
            ]
        );
    }
}
