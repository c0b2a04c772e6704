//! What the storage kinds share: JSON accessors and defaulting helpers, and the field checks
//! that claims and volumes both make (access modes, volume modes, class names, quantities).
//! The bottom of `storage`: it uses only `validation`.

use crate::meta::Pointer;
use crate::validation::{self as v, FieldError, render};
use serde_json::{Map, Value, json};

const ACCESS_MODES: [&str; 4] = [
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];

const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];

/// A string at a JSON pointer, or "".
pub(crate) fn str_at<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.at(ptr).and_then(Value::as_str).unwrap_or("")
}

/// An array at a JSON pointer, or empty.
pub(crate) fn arr_at<'a>(obj: &'a Value, ptr: &str) -> &'a [Value] {
    obj.at(ptr)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// A present, non-null value at a JSON pointer.
pub(super) fn present<'a>(obj: &'a Value, ptr: &str) -> Option<&'a Value> {
    obj.at(ptr).filter(|v| !v.is_null())
}

/// `obj[field]` as an object, created (or replaced when not an object).
pub(super) fn object_mut<'a>(obj: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let m = obj.as_object_mut().expect("object");
    let e = m.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut().expect("object")
}

/// Sets `field` of `m` when missing or null.
pub(super) fn default_field(m: &mut Map<String, Value>, field: &str, value: Value) {
    if m.get(field).is_none_or(Value::is_null) {
        m.insert(field.into(), value);
    }
}

/// Sets `status.phase` when missing or empty.
pub(super) fn default_phase(obj: &mut Value, phase: &str) {
    let st = object_mut(obj, "status");
    if st
        .get("phase")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        st.insert("phase".into(), json!(phase));
    }
}

pub(super) fn access_modes(
    errs: &mut Vec<FieldError>,
    modes: Option<&Value>,
    path: &str,
    detail: &str,
) {
    let list = modes
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if list.is_empty() {
        errs.push(FieldError::required(path, detail));
    }
    let (mut rwop, mut other) = (false, false);
    for m in list {
        let s = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&s) {
            errs.push(FieldError::not_supported(path, render(m), &ACCESS_MODES));
        }
        if s == "ReadWriteOncePod" {
            rwop = true;
        } else if ACCESS_MODES.contains(&s) {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(
            path,
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

pub(super) fn class_name_errs(errs: &mut Vec<FieldError>, obj: &Value, ptr: &str, path: &str) {
    let name = str_at(obj, ptr);
    if !name.is_empty() {
        for m in v::dns1123_subdomain(name) {
            errs.push(FieldError::invalid_str(path, name, &m));
        }
    }
}

pub(super) fn volume_mode_errs(errs: &mut Vec<FieldError>, obj: &Value) {
    if let Some(m) = present(obj, "/spec/volumeMode")
        && !m.as_str().is_some_and(|s| VOLUME_MODES.contains(&s))
    {
        errs.push(FieldError::not_supported(
            "spec.volumeMode",
            render(m),
            &VOLUME_MODES,
        ));
    }
}

/// `Quantity.Value()`: rounded away from zero to an integer.
fn quantity_int(nanos: i128) -> i128 {
    let g = 1_000_000_000;
    if nanos >= 0 {
        (nanos + g - 1) / g
    } else {
        -((-nanos + g - 1) / g)
    }
}

/// The string form of a quantity value, as `Quantity.String()` (approximated by the input).
fn quantity_str(q: &Value) -> String {
    match q {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `validateBasicResource`.
pub(super) fn basic_quantity(errs: &mut Vec<FieldError>, q: &Value, path: &str) {
    let n = v::quantity_of(q).unwrap_or(0);
    if n < 0 {
        errs.push(FieldError::invalid(
            path,
            quantity_int(n).to_string(),
            "must be a valid resource quantity",
        ));
    }
}

/// `ValidatePositiveQuantityValue`.
pub(super) fn positive_quantity(errs: &mut Vec<FieldError>, q: &Value, path: &str) {
    if v::quantity_of(q).unwrap_or(0) <= 0 {
        errs.push(FieldError::invalid_str(
            path,
            &quantity_str(q),
            "must be greater than zero",
        ));
    }
}

/// The messages of field errors, for tests.
#[cfg(test)]
pub(super) fn msgs(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::message).collect()
}
