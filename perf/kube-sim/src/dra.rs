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
//! new `allocation` checked, a set one immutable). Lists too long are refused with `Too many` before their items are looked at.

use crate::error::ApiError;
use crate::meta;
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

/// Whether a storage key is one of the kinds of this module.
pub(crate) fn handles(key: &str) -> bool {
    matches!(key, CLASS_KEY | CLAIM_KEY | TEMPLATE_KEY | SLICE_KEY)
}

fn arr<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn s<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn present(obj: &Value, ptr: &str) -> bool {
    obj.pointer(ptr).is_some_and(|x| !x.is_null())
}

/// The 400 the decoder answers for a capacity value that is not a quantity.
fn decode(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    if def.key.as_ref() != SLICE_KEY {
        return Ok(());
    }
    for d in arr(obj, "/spec/devices") {
        if let Some(cap) = d.get("capacity").and_then(Value::as_object) {
            for c in cap.values() {
                let q = c.get("value").cloned().unwrap_or(Value::Null);
                let text = match &q {
                    Value::String(t) => t.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                if let Err(m) = v::parse_quantity(&text) {
                    return Err(ApiError::bad_request(format!(
                        "ResourceSlice in version \"v1\" cannot be handled as a ResourceSlice: {m}"
                    )));
                }
            }
        }
    }
    Ok(())
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
                errs.push(FieldError::required(format!("{p}.matchAttribute"), ""));
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
    let stored_sel = old.is_some_and(|o| {
        v::same(
            o.pointer("/spec/selectors"),
            class.pointer("/spec/selectors"),
        )
    });
    selectors(
        &mut errs,
        arr(class, "/spec/selectors"),
        "spec.selectors",
        stored_sel,
    );
    let stored_cfg =
        old.is_some_and(|o| v::same(o.pointer("/spec/config"), class.pointer("/spec/config")));
    list_items(
        &mut errs,
        arr(class, "/spec/config"),
        CONFIG_MAX,
        "spec.config",
        None,
        |errs, c, p| device_configuration(errs, c, p, stored_cfg),
    );
    if let Some(name) = class
        .pointer("/spec/extendedResourceName")
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
    for (k, a) in keys {
        errs.extend(qualified_name(k, &format!("{path}.attributes")));
        attribute(errs, a, &format!("{path}.attributes[{k}]"));
    }
    let same_caps = old.is_some_and(|o| v::same(o.get("capacity"), d.get("capacity")));
    if !same_caps {
        let multi = d.get("allowMultipleAllocations").and_then(Value::as_bool) == Some(true);
        let mut keys: Vec<(&String, &Value)> = caps.into_iter().flatten().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        for (k, c) in keys {
            errs.extend(qualified_name(k, &format!("{path}.capacity")));
            if !multi && present(c, "/requestPolicy") {
                errs.push(FieldError::forbidden(
                    format!("{path}.capacity[{k}].requestPolicy"),
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
        .pointer("/pool/resourceSliceCount")
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
        .pointer("/pool/generation")
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
            if !v::same(old.pointer(ptr), slice.pointer(ptr)) {
                errs.push(FieldError::invalid(
                    path,
                    slice.pointer(ptr).map_or("null".into(), render),
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
    let old_alloc = old.pointer("/status/allocation").filter(|a| !a.is_null());
    match (old_alloc, alloc) {
        (Some(o), Some(n)) if !v::same(Some(o), Some(n)) => {
            errs.push(FieldError::invalid(
                "status.allocation",
                render(n),
                "field is immutable",
            ));
        }
        (None, Some(n)) => {
            let names = request_names(claim.pointer("/spec/devices").unwrap_or(&Value::Null));
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
                obj.pointer("/spec/devices").unwrap_or(&Value::Null),
                "spec.devices",
                false,
            ));
            errs
        }
        TEMPLATE_KEY => {
            let mut errs = v::subdomain_name(name);
            if let Some(m) = obj.pointer("/spec/metadata") {
                template_metadata(&mut errs, m, "spec.metadata");
            }
            errs.extend(device_claim(
                obj.pointer("/spec/spec/devices").unwrap_or(&Value::Null),
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
}
