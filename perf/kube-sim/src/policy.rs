//! `policy/v1` PodDisruptionBudgets as `pkg/registry/policy/poddisruptionbudget` serves them:
//! decoding (`minAvailable` / `maxUnavailable` are `IntOrString`s of an int32 or a string), the
//! create strategy (status reset to the zero status, which serializes its four counters),
//! `ValidatePodDisruptionBudgetSpec` with the real messages (both bounds set, negative or
//! malformed `IntOrString`s, percentages over 100%, the label selector,
//! `unhealthyPodEvictionPolicy`), spec updates (allowed since v1.15; generation bumped by the
//! store), `ValidatePodDisruptionBudgetStatusUpdate` for `/status` writes (conditions and the
//! non-negative counters), and the label selector semantics the disruption controller uses
//! (`LabelSelectorAsSelector`: no selector selects nothing, an empty one everything).

use crate::error::ApiError;
use crate::meta::Pointer;
use crate::validation::{self as v, FieldError, quote};
use serde_json::{Map, Value, json};

/// Storage key of PodDisruptionBudgets.
pub(crate) const PDB_KEY: &str = "policy/poddisruptionbudgets";
/// API group.
pub(crate) const GROUP: &str = "policy";
const KIND: &str = "PodDisruptionBudget";

/// The counters of `PodDisruptionBudgetStatus` that are not `omitempty`: a stored status always
/// carries them.
const COUNTERS: [&str; 4] = [
    "disruptionsAllowed",
    "currentHealthy",
    "desiredHealthy",
    "expectedPods",
];

/// `supportedUnhealthyPodEvictionPolicies`, sorted as `sets.String.List()` returns them.
const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

/// An `intstr.IntOrString` as decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntOrString {
    Int(i32),
    Str(String),
}

impl IntOrString {
    /// From the JSON value of a field already checked by [`decode`].
    pub(crate) fn of(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Some(Self::Str(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .map(Self::Int),
            _ => None,
        }
    }

    /// How `encoding/json` renders it (`IntOrString.MarshalJSON`), as a field error shows it.
    fn rendered(&self) -> String {
        match self {
            Self::Int(i) => i.to_string(),
            Self::Str(s) => go_json_string(s),
        }
    }
}

/// A JSON string as Go's `encoding/json` writes it (`<`, `>` and `&` escaped).
fn go_json_string(s: &str) -> String {
    quote(s)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// `metav1.LabelSelector` as `encoding/json` writes it (struct field order, map keys sorted).
fn go_json_selector(sel: &Value) -> String {
    let Some(o) = sel.as_object() else {
        return "null".into();
    };
    let mut parts = Vec::new();
    if let Some(labels) = o
        .get("matchLabels")
        .and_then(Value::as_object)
        .filter(|m| !m.is_empty())
    {
        let mut keys: Vec<&String> = labels.keys().collect();
        keys.sort();
        let kv: Vec<String> = keys
            .iter()
            .map(|k| {
                format!(
                    "{}:{}",
                    go_json_string(k),
                    go_json_string(labels[*k].as_str().unwrap_or(""))
                )
            })
            .collect();
        parts.push(format!("\"matchLabels\":{{{}}}", kv.join(",")));
    }
    if let Some(exprs) = o
        .get("matchExpressions")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        let items: Vec<String> = exprs
            .iter()
            .map(|e| {
                let s = |f: &str| go_json_string(e.get(f).and_then(Value::as_str).unwrap_or(""));
                let mut item = format!("{{\"key\":{},\"operator\":{}", s("key"), s("operator"));
                if let Some(vals) = e
                    .get("values")
                    .and_then(Value::as_array)
                    .filter(|a| !a.is_empty())
                {
                    let vs: Vec<String> = vals
                        .iter()
                        .map(|x| go_json_string(x.as_str().unwrap_or("")))
                        .collect();
                    item.push_str(&format!(",\"values\":[{}]", vs.join(",")));
                }
                item.push('}');
                item
            })
            .collect();
        parts.push(format!("\"matchExpressions\":[{}]", items.join(",")));
    }
    format!("{{{}}}", parts.join(","))
}

/// The internal `policy.PodDisruptionBudgetSpec` as `field.Invalid` renders it (a Go struct
/// without JSON tags: its field names as keys).
fn go_json_spec(spec: &Value) -> String {
    let bound = |f: &str| {
        spec.get(f)
            .and_then(IntOrString::of)
            .map_or("null".to_string(), |x| x.rendered())
    };
    let policy = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        .map_or("null".to_string(), go_json_string);
    format!(
        "{{\"MinAvailable\":{},\"Selector\":{},\"MaxUnavailable\":{},\"UnhealthyPodEvictionPolicy\":{policy}}}",
        bound("minAvailable"),
        spec.get("selector")
            .map_or("null".to_string(), go_json_selector),
        bound("maxUnavailable"),
    )
}

fn decode_error(msg: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{KIND} in version \"v1\" cannot be handled as a {KIND}: {msg}"
    ))
}

/// What the JSON decoder refuses (a 400): `IntOrString`s that are neither a string nor an int32,
/// counters that are not int32s, a policy or selector of the wrong type.
fn decode(obj: &Value) -> Result<(), ApiError> {
    let int32 = |v: &Value| -> Result<(), ApiError> {
        match v {
            Value::Null => Ok(()),
            Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => Ok(()),
            Value::Number(n) => Err(decode_error(&format!(
                "json: cannot unmarshal number {n} into Go value of type int32"
            ))),
            other => Err(decode_error(&format!(
                "json: cannot unmarshal {} into Go value of type int32",
                json_type(other)
            ))),
        }
    };
    if let Some(spec) = obj.get("spec").filter(|s| !s.is_null()) {
        if !spec.is_object() {
            return Err(decode_error(&format!(
                "json: cannot unmarshal {} into Go struct field PodDisruptionBudget.spec of type v1.PodDisruptionBudgetSpec",
                json_type(spec)
            )));
        }
        for f in ["minAvailable", "maxUnavailable"] {
            match spec.get(f) {
                None | Some(Value::String(_)) => {}
                Some(x) => int32(x)?,
            }
        }
        if let Some(p) = spec.get("unhealthyPodEvictionPolicy")
            && !p.is_null()
            && !p.is_string()
        {
            return Err(decode_error(&format!(
                "json: cannot unmarshal {} into Go struct field PodDisruptionBudgetSpec.spec.unhealthyPodEvictionPolicy of type v1.UnhealthyPodEvictionPolicyType",
                json_type(p)
            )));
        }
        if let Some(s) = spec.get("selector")
            && !s.is_null()
            && !s.is_object()
        {
            return Err(decode_error(&format!(
                "json: cannot unmarshal {} into Go struct field PodDisruptionBudgetSpec.spec.selector of type v1.LabelSelector",
                json_type(s)
            )));
        }
    }
    if let Some(st) = obj.get("status").and_then(Value::as_object) {
        for f in COUNTERS.iter().copied().chain(["observedGeneration"]) {
            if let Some(x) = st.get(f) {
                if f == "observedGeneration" {
                    if !(x.is_null() || x.as_i64().is_some()) {
                        return Err(decode_error(&format!(
                            "json: cannot unmarshal {} into Go struct field PodDisruptionBudgetStatus.status.observedGeneration of type int64",
                            json_type(x)
                        )));
                    }
                } else {
                    int32(x)?;
                }
            }
        }
    }
    Ok(())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `validation.IsValidPercent`'s message.
const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

fn is_valid_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent` of `pkg/apis/apps/validation`.
fn int_or_percent(errs: &mut Vec<FieldError>, x: &IntOrString, path: &str) {
    match x {
        IntOrString::Str(s) if !is_valid_percent(s) => {
            errs.push(FieldError::invalid(path, x.rendered(), PERCENT_MSG));
        }
        IntOrString::Int(i) if *i < 0 => {
            errs.push(FieldError::invalid(
                path,
                i.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        _ => {}
    }
    // `getPercentValue` ignores a failed `Atoi` (the value is then 0).
    if let IntOrString::Str(s) = x
        && is_valid_percent(s)
        && s[..s.len() - 1].parse::<i64>().unwrap_or(0) > 100
    {
        errs.push(FieldError::invalid(
            path,
            x.rendered(),
            "must not be greater than 100%",
        ));
    }
}

/// `ValidatePodDisruptionBudgetSpec`; `allow_invalid_values`: the update of a budget whose
/// stored selector already had invalid `matchExpressions` values
/// (`AllowInvalidLabelValueInSelector`).
fn validate_spec(spec: &Value, allow_invalid_values: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let min = spec.get("minAvailable").and_then(IntOrString::of);
    let max = spec.get("maxUnavailable").and_then(IntOrString::of);
    if min.is_some() && max.is_some() {
        errs.push(FieldError::invalid(
            "spec",
            go_json_spec(spec),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    if let Some(m) = &min {
        int_or_percent(&mut errs, m, "spec.minAvailable");
    }
    if let Some(m) = &max {
        int_or_percent(&mut errs, m, "spec.maxUnavailable");
    }
    if let Some(sel) = spec.get("selector").filter(|s| s.is_object()) {
        let mut sel_errs = Vec::new();
        crate::storage::label_selector(&mut sel_errs, sel, "spec.selector");
        if allow_invalid_values {
            sel_errs.retain(|e| {
                !(e.field.starts_with("spec.selector.matchExpressions[")
                    && e.field.contains("].values["))
            });
        }
        errs.extend(sel_errs);
    }
    if let Some(p) = spec
        .get("unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        && !EVICTION_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            "spec.unhealthyPodEvictionPolicy",
            go_json_string(p),
            &EVICTION_POLICIES,
        ));
    }
    errs
}

fn check(name: &str, errs: Vec<FieldError>) -> Result<(), ApiError> {
    v::check(GROUP, KIND, name, errs)
}

/// The zero `PodDisruptionBudgetStatus` as it is serialized (its counters are not omitted).
fn zero_status() -> Value {
    json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
}

/// Create: decoding, `PrepareForCreate` (status reset; the store sets `generation: 1`) and
/// validation.
pub(crate) fn admit_create(obj: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(obj)?;
    obj["status"] = zero_status();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    check(name, validate_spec(&spec, false))
}

/// Main-resource update (`new` already carries the stored status): the spec may change
/// (generation bumped by the store); validated as on create, tolerating invalid selector values
/// the stored budget already had.
pub(crate) fn admit_update(old: &Value, new: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(new)?;
    let old_invalid = old.at("/spec/selector").is_some_and(|sel| {
        let mut e = Vec::new();
        crate::storage::label_selector(&mut e, sel, "spec.selector");
        !e.is_empty()
    });
    let spec = new.get("spec").cloned().unwrap_or(Value::Null);
    check(name, validate_spec(&spec, old_invalid))
}

/// `/status` update: decoding, the counters a status always carries, and
/// `ValidatePodDisruptionBudgetStatusUpdate` (policy/v1).
pub(crate) fn admit_status_update(new: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(new)?;
    if !new.get("status").is_some_and(Value::is_object) {
        new["status"] = json!({});
    }
    let st = new["status"].as_object_mut().expect("status object");
    for c in COUNTERS {
        if st.get(c).is_none_or(Value::is_null) {
            st.insert(c.into(), json!(0));
        }
    }
    let st = new["status"].clone();
    let mut errs = validate_conditions(
        st.get("conditions")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice),
        "status.conditions",
    );
    for c in COUNTERS {
        let n = st.get(c).and_then(Value::as_i64).unwrap_or(0);
        if n < 0 {
            errs.push(FieldError::invalid(
                format!("status.{c}"),
                n.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    check(name, errs)
}

const REASON_MSG: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

fn valid_reason(r: &str) -> bool {
    let b = r.as_bytes();
    let inner = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && (b.len() == 1
            || (b[1..].iter().all(|&c| inner(c))
                && (b[b.len() - 1].is_ascii_alphanumeric() || b[b.len() - 1] == b'_')))
}

/// `metav1validation.ValidateConditions` for `[]metav1.Condition`.
pub(crate) fn validate_conditions(conds: &[Value], path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (i, c) in conds.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let s = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or("");
        let t = s("type");
        if seen.contains(&t) {
            errs.push(FieldError::duplicate(format!("{p}.type"), quote(t)));
        } else {
            seen.push(t);
        }
        errs.extend(v::label_name(t, &format!("{p}.type")));
        if !matches!(s("status"), "True" | "False" | "Unknown") {
            errs.push(FieldError::not_supported(
                format!("{p}.status"),
                quote(s("status")),
                &["False", "True", "Unknown"],
            ));
        }
        if let Some(g) = c.get("observedGeneration").and_then(Value::as_i64)
            && g < 0
        {
            errs.push(FieldError::invalid(
                format!("{p}.observedGeneration"),
                g.to_string(),
                "must be greater than or equal to zero",
            ));
        }
        if s("lastTransitionTime").is_empty() {
            errs.push(FieldError::required(
                format!("{p}.lastTransitionTime"),
                "must be set",
            ));
        }
        let reason = s("reason");
        if reason.is_empty() {
            errs.push(FieldError::required(format!("{p}.reason"), "must be set"));
        } else {
            if !valid_reason(reason) {
                errs.push(FieldError::invalid_str(
                    format!("{p}.reason"),
                    reason,
                    REASON_MSG,
                ));
            }
            if reason.len() > 1024 {
                errs.push(FieldError::too_long(format!("{p}.reason"), 1024));
            }
        }
        if s("message").len() > 32 * 1024 {
            errs.push(FieldError::too_long(format!("{p}.message"), 32 * 1024));
        }
    }
    errs
}

/// Whether a budget's selector (`spec.selector`, absent: selects nothing, `{}`: everything,
/// as `LabelSelectorAsSelector`) selects an object with these labels.
pub(crate) fn selects(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(sel) = selector.and_then(Value::as_object) else {
        return false;
    };
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, want) in ml {
            if get(k) != want.as_str() {
                return false;
            }
        }
    }
    for e in sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let have = get(key);
        let ok = match e.get("operator").and_then(Value::as_str).unwrap_or("") {
            "In" => have.is_some_and(|h| values.contains(&h)),
            "NotIn" => have.is_none_or(|h| !values.contains(&h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// A strategic merge patch of a budget: `spec.selector` is `patchStrategy=replace` in policy/v1,
/// so the patch's selector replaces the stored one instead of merging into it.
pub(crate) fn strategic_selector_replace(patched: &mut Value, patch: &Value) {
    if let Some(sel) = patch.at("/spec/selector").filter(|s| s.is_object()) {
        let mut sel = sel.clone();
        strip_directives(&mut sel);
        patched["spec"]["selector"] = sel;
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(spec: Value) -> Vec<String> {
        validate_spec(&spec, false)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn spec_rules_and_messages() {
        assert!(
            msgs(json!({"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}})).is_empty()
        );
        assert_eq!(
            msgs(
                json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "agent"}}, "maxUnavailable": 1})
            ),
            vec![
                "spec: Invalid value: {\"MinAvailable\":1,\"Selector\":{\"matchLabels\":{\"app\":\"agent\"}},\"MaxUnavailable\":1,\"UnhealthyPodEvictionPolicy\":null}: minAvailable and maxUnavailable cannot be both set"
            ]
        );
        assert_eq!(
            msgs(json!({"minAvailable": -1})),
            vec!["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            msgs(json!({"maxUnavailable": "150%"})),
            vec!["spec.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%"]
        );
        assert_eq!(
            msgs(json!({"maxUnavailable": "5"})),
            vec![format!(
                "spec.maxUnavailable: Invalid value: \"5\": {PERCENT_MSG}"
            )]
        );
        assert_eq!(
            msgs(json!({"unhealthyPodEvictionPolicy": "Never"})),
            vec![
                "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
            ]
        );
        let both = json!({"minAvailable": "50%", "maxUnavailable": 2, "unhealthyPodEvictionPolicy": "AlwaysAllow",
            "selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": ["<x>"]}], "matchLabels": {"z": "1", "b": "2"}}});
        assert_eq!(
            go_json_spec(&both),
            "{\"MinAvailable\":\"50%\",\"Selector\":{\"matchLabels\":{\"b\":\"2\",\"z\":\"1\"},\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[\"\\u003cx\\u003e\"]}]},\"MaxUnavailable\":2,\"UnhealthyPodEvictionPolicy\":\"AlwaysAllow\"}"
        );
    }

    #[test]
    fn selectors_select_as_label_selector_as_selector() {
        let labels = json!({"app": "a", "tier": "web"});
        let l = labels.as_object();
        assert!(!selects(None, l));
        assert!(selects(Some(&json!({})), l));
        assert!(selects(Some(&json!({"matchLabels": {"app": "a"}})), l));
        assert!(!selects(Some(&json!({"matchLabels": {"app": "b"}})), l));
        let e = |op: &str, vals: Value| json!({"matchExpressions": [{"key": "tier", "operator": op, "values": vals}]});
        assert!(selects(Some(&e("In", json!(["web", "db"]))), l));
        assert!(!selects(Some(&e("NotIn", json!(["web"]))), l));
        assert!(selects(Some(&e("Exists", json!(null))), l));
        assert!(!selects(Some(&e("DoesNotExist", json!(null))), l));
        assert!(selects(Some(&e("NotIn", json!(["web"]))), None));
    }

    #[test]
    fn condition_reasons() {
        assert!(valid_reason("SufficientPods"));
        assert!(valid_reason("A"));
        assert!(valid_reason("a_b:c,d_"));
        assert!(!valid_reason("1a"));
        assert!(!valid_reason("a-b"));
        assert!(!valid_reason("ab,"));
    }
}
