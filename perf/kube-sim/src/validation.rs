//! Field validation as `k8s.io/apimachinery/pkg/util/validation` does it: field errors with the
//! real type strings (`Required value`, `Invalid value: "x": …`, `Unsupported value: …`), their
//! aggregation into one `422 Invalid` Status with `details.causes`, the name validators (DNS-1123
//! subdomain, qualified name) with the real messages, and the `resource.Quantity` parser (the
//! format check the real server applies while decoding, and the value for comparisons).

use crate::error::{ApiError, Cause};
use crate::meta::Pointer;
use serde_json::Value;

/// The kind of a field error (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    Required,
    Invalid,
    NotSupported,
    Forbidden,
    Duplicate,
    TooLong,
    TooMany,
}

impl ErrorType {
    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
        }
    }

    fn cause(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
        }
    }
}

/// One field error (`field.Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldError {
    pub typ: ErrorType,
    pub field: String,
    /// The bad value as Go's `ErrorBody` renders it (`"x"` for strings), when it is shown.
    pub value: Option<String>,
    pub detail: String,
}

/// A Go `%q` rendering of a string (JSON escaping is close enough for printable text).
pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// A JSON value as `field.Error` renders a bad value: strings quoted, scalars plain, the rest as
/// compact JSON.
pub(crate) fn render(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Null => "null".into(),
        Value::Bool(_) | Value::Number(_) => v.to_string(),
        other => other.to_string(),
    }
}

impl FieldError {
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        Self {
            typ: ErrorType::Required,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self {
            typ: ErrorType::Forbidden,
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self {
            typ: ErrorType::TooLong,
            field: field.into(),
            value: None,
            detail: format!("may not be more than {max} {unit}"),
        }
    }

    /// `field.TooMany`: `Too many: <actual>: must have at most <max> items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self {
            typ: ErrorType::TooMany,
            field: field.into(),
            value: Some(actual.to_string()),
            detail: format!("must have at most {max} {unit}"),
        }
    }

    /// `Invalid value: <rendered>: detail`.
    pub fn invalid(field: impl Into<String>, rendered: String, detail: &str) -> Self {
        Self {
            typ: ErrorType::Invalid,
            field: field.into(),
            value: Some(rendered),
            detail: detail.into(),
        }
    }

    /// `Invalid value: "s": detail`.
    pub fn invalid_str(field: impl Into<String>, s: &str, detail: &str) -> Self {
        Self::invalid(field, quote(s), detail)
    }

    /// `Unsupported value: <rendered>: supported values: "a", "b"`.
    pub fn not_supported(field: impl Into<String>, rendered: String, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
        Self {
            typ: ErrorType::NotSupported,
            field: field.into(),
            value: Some(rendered),
            detail: format!("supported values: {}", list.join(", ")),
        }
    }

    pub fn duplicate(field: impl Into<String>, rendered: String) -> Self {
        Self {
            typ: ErrorType::Duplicate,
            field: field.into(),
            value: Some(rendered),
            detail: String::new(),
        }
    }

    /// `field.Error.ErrorBody`: the message without the field path.
    pub fn body(&self) -> String {
        let mut s = self.typ.text().to_string();
        if let Some(v) = &self.value {
            s.push_str(": ");
            s.push_str(v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// `field.Error.Error`: `path: body`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }
}

/// `Ok` when there are no errors, otherwise the `422 Invalid` the real server answers
/// (`Kind.group "name" is invalid: [e1, e2]`, one cause per error).
pub(crate) fn check(
    group: &str,
    kind: &str,
    name: &str,
    errs: Vec<FieldError>,
) -> Result<(), ApiError> {
    if errs.is_empty() {
        return Ok(());
    }
    let mut msgs: Vec<String> = Vec::new();
    let mut causes = Vec::new();
    for e in &errs {
        causes.push(Cause {
            reason: e.typ.cause().to_string(),
            message: e.body(),
            field: e.field.clone(),
        });
        let m = e.message();
        if !msgs.contains(&m) {
            msgs.push(m);
        }
    }
    let joined = if msgs.len() == 1 {
        msgs.remove(0)
    } else {
        format!("[{}]", msgs.join(", "))
    };
    Err(ApiError::invalid(group, kind, name, &joined).with_causes(causes))
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns1123_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// `validation.IsDNS1123Subdomain`.
pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".into());
    }
    if !s.split('.').all(is_dns1123_label_chars) {
        errs.push(DNS1123_SUBDOMAIN_MSG.into());
    }
    errs
}

/// `validation.IsDNS1123Label`.
pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !is_dns1123_label_chars(s) {
        errs.push(DNS1123_LABEL_MSG.into());
    }
    errs
}

fn qualified_name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `validation.IsQualifiedName`: `[prefix/]name`.
pub(crate) fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [n] => *n,
        [prefix, n] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                for m in dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *n
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    }
    if !qualified_name_part_ok(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `validation.IsValidLabelValue`.
pub(crate) fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !s.is_empty() && !qualified_name_part_ok(s) {
        errs.push(LABEL_VALUE_MSG.into());
    }
    errs
}

/// `ValidateLabelName` / `ValidateQualifiedName`: one `Invalid` per message.
pub(crate) fn label_name(key: &str, path: &str) -> Vec<FieldError> {
    qualified_name(key)
        .into_iter()
        .map(|m| FieldError::invalid_str(path, key, &m))
        .collect()
}

/// `metadata.name` of a resource whose names are DNS-1123 subdomains.
pub(crate) fn subdomain_name(name: &str) -> Vec<FieldError> {
    dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid_str("metadata.name", name, &m))
        .collect()
}

/// `ValidateCSIDriverName` (core): required, at most 63 bytes, a DNS-1123 subdomain once
/// lower-cased.
pub(crate) fn csi_driver_name(name: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > 63 {
        errs.push(FieldError::too_long(path, 63));
    }
    for m in dns1123_subdomain(&name.to_ascii_lowercase()) {
        errs.push(FieldError::invalid_str(path, name, &m));
    }
    errs
}

/// The message of a quantity that does not parse (`resource.ErrFormatWrong`).
pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `resource.ErrSuffix`.
pub(crate) const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";

/// Parses a `resource.Quantity` the way `resource.ParseQuantity` does and returns its value in
/// nano-units (saturating; sub-nano fractions are rounded up), or the parse error message.
pub(crate) fn parse_quantity(s: &str) -> Result<i128, &'static str> {
    if s.is_empty() {
        return Err(QUANTITY_FORMAT);
    }
    if s == "0" {
        return Ok(0);
    }
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b[0] {
        b'-' => {
            positive = false;
            pos += 1;
        }
        b'+' => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(0);
    }
    let num_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = &s[num_start..pos];
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let d = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[d..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QUANTITY_FORMAT);
    }
    let suffix = &s[suffix_start..];
    // (base 10 exponent, base 2 exponent)
    let (e10, e2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let e: i64 = s[1..].parse().map_err(|_| QUANTITY_SUFFIX)?;
            (e.clamp(-1000, 1000) as i32, 0)
        }
        _ => return Err(QUANTITY_SUFFIX),
    };
    // mantissa = digits / 10^len(denom); value_nano = mantissa * 2^e2 * 10^(e10 + 9).
    let digits = format!("{num}{denom}");
    let mut mant: i128 = 0;
    for c in digits.bytes() {
        mant = mant.saturating_mul(10).saturating_add(i128::from(c - b'0'));
    }
    mant = mant.saturating_mul(1i128 << e2);
    let exp = e10 + 9 - denom.len() as i32;
    let value = if exp >= 0 {
        (0..exp).fold(mant, |m, _| m.saturating_mul(10))
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-exp).min(38) {
            div = div.saturating_mul(10);
        }
        let q = mant / div;
        if mant % div != 0 { q + 1 } else { q }
    };
    Ok(if positive { value } else { -value })
}

/// The format a `resource.Quantity` keeps from its suffix (`DecimalSI`, `BinarySI`,
/// `DecimalExponent`), which `String()` renders in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuantityFormat {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// The format of a quantity's text (assumed to parse).
pub(crate) fn quantity_format(s: &str) -> QuantityFormat {
    let t = s.trim_end_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-');
    let unit = s[s.len() - s.len().min(2)..].to_string();
    if ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        .iter()
        .any(|u| unit.ends_with(u))
    {
        QuantityFormat::BinarySI
    } else if t.ends_with(['e', 'E']) && t.len() < s.len() {
        QuantityFormat::DecimalExponent
    } else {
        QuantityFormat::DecimalSI
    }
}

/// `resource.Quantity.String()` of a value in nano-units: the canonical form the real server
/// prints in messages (`1500m`, `1536Mi`, `2k`, `3`, `1e3`).
pub(crate) fn canonical_nanos(nanos: i128, format: QuantityFormat) -> String {
    if nanos == 0 {
        return "0".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let abs = nanos.unsigned_abs();
    const NANO: u128 = 1_000_000_000;
    let binary =
        format == QuantityFormat::BinarySI && abs >= 1024 * NANO && abs.is_multiple_of(NANO);
    if binary {
        let mut n = abs / NANO;
        let mut exp = 0;
        while exp < 6 && n.is_multiple_of(1024) {
            n /= 1024;
            exp += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
        return format!("{sign}{n}{suffix}");
    }
    // Decimal: strip factors of ten, then lower the exponent to a multiple of three.
    let (mut n, mut exp) = (abs, -9i32);
    while n % 10 == 0 {
        n /= 10;
        exp += 1;
    }
    match exp.rem_euclid(3) {
        1 => {
            n *= 10;
            exp -= 1;
        }
        2 => {
            n *= 100;
            exp -= 2;
        }
        _ => {}
    }
    let suffix = if format == QuantityFormat::DecimalExponent {
        if exp == 0 {
            String::new()
        } else {
            format!("e{exp}")
        }
    } else {
        match exp {
            -9 => "n".into(),
            -6 => "u".into(),
            -3 => "m".into(),
            0 => String::new(),
            3 => "k".into(),
            6 => "M".into(),
            9 => "G".into(),
            12 => "T".into(),
            15 => "P".into(),
            18 => "E".into(),
            e => format!("e{e}"),
        }
    };
    format!("{sign}{n}{suffix}")
}

/// A quantity value as `resource.Quantity.String()` renders it (the text as given when it does
/// not parse).
pub(crate) fn canonical(v: &Value) -> String {
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match parse_quantity(&text) {
        Ok(n) => canonical_nanos(n, quantity_format(&text)),
        Err(_) => text,
    }
}

/// A quantity field: a string or a JSON number (both decode into a `resource.Quantity`).
pub(crate) fn quantity_of(v: &Value) -> Option<i128> {
    match v {
        Value::String(s) => parse_quantity(s).ok(),
        Value::Number(n) => parse_quantity(&n.to_string()).ok(),
        _ => None,
    }
}

/// Checks the quantities of a `ResourceList` at `pointer` as the decoder would: an error is the
/// message of the 400 the real server answers.
pub(crate) fn decode_quantities(obj: &Value, pointer: &str) -> Result<(), &'static str> {
    let Some(list) = obj.at(pointer) else {
        return Ok(());
    };
    let Some(m) = list.as_object() else {
        return if list.is_null() {
            Ok(())
        } else {
            Err(QUANTITY_FORMAT)
        };
    };
    for v in m.values() {
        match v {
            Value::String(s) => {
                parse_quantity(s)?;
            }
            Value::Number(n) => {
                parse_quantity(&n.to_string())?;
            }
            _ => return Err(QUANTITY_FORMAT),
        }
    }
    Ok(())
}

/// A copy without nulls, empty lists and empty maps: Go's semantic equality of decoded objects
/// treats those as absent.
pub(crate) fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), normalized(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// Semantic equality of two optional JSON values (see [`normalized`]).
pub(crate) fn same(a: Option<&Value>, b: Option<&Value>) -> bool {
    let n = |v: Option<&Value>| v.map(normalized).filter(|v| !is_empty(v));
    n(a) == n(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities() {
        let g = 1_000_000_000i128;
        assert_eq!(parse_quantity("1Gi"), Ok((1 << 30) * g));
        assert_eq!(parse_quantity("1.5Gi"), Ok((3 << 29) * g));
        assert_eq!(parse_quantity("500m"), Ok(g / 2));
        assert_eq!(parse_quantity("2e3"), Ok(2000 * g));
        assert_eq!(parse_quantity("-1k"), Ok(-1000 * g));
        assert_eq!(parse_quantity("0.000"), Ok(0));
        assert_eq!(parse_quantity("1n"), Ok(1));
        assert_eq!(parse_quantity("abc"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("1Gb"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity("1e"), Err(QUANTITY_SUFFIX));
        assert_eq!(parse_quantity("1Q"), Err(QUANTITY_FORMAT));
        assert_eq!(parse_quantity(""), Err(QUANTITY_FORMAT));
        assert!(parse_quantity("10Gi").unwrap() > parse_quantity("10G").unwrap());
    }

    #[test]
    fn canonical_quantities() {
        let c = |s: &str| canonical(&json!(s));
        assert_eq!(c("2"), "2");
        assert_eq!(c("1.5"), "1500m");
        assert_eq!(c("1500m"), "1500m");
        assert_eq!(c("1000m"), "1");
        assert_eq!(c("0.1"), "100m");
        assert_eq!(c("2000"), "2k");
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("1.5Gi"), "1536Mi");
        assert_eq!(c("0.5Ki"), "512");
        assert_eq!(c("128974848"), "128974848");
        assert_eq!(c("1e3"), "1e3");
        assert_eq!(c("1.5e3"), "1500");
        assert_eq!(c("-1"), "-1");
        assert_eq!(c("0Gi"), "0");
        assert_eq!(canonical(&json!(3)), "3");
    }

    #[test]
    fn names_and_messages() {
        assert!(dns1123_subdomain("a.b-c.d").is_empty());
        assert_eq!(dns1123_subdomain("Foo").len(), 1);
        assert_eq!(dns1123_subdomain("").len(), 1);
        assert!(qualified_name("topology.kubernetes.io/zone").is_empty());
        assert_eq!(
            qualified_name(""),
            vec![
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        let e =
            FieldError::not_supported("spec.volumeMode", quote("Raw"), &["Block", "Filesystem"]);
        assert_eq!(
            e.message(),
            "spec.volumeMode: Unsupported value: \"Raw\": supported values: \"Block\", \"Filesystem\""
        );
        let errs = vec![
            FieldError::required("spec.accessModes", ""),
            FieldError::required("spec.accessModes", ""),
            FieldError::forbidden("spec", "nope"),
        ];
        let e = check("", "PersistentVolume", "pv", errs).unwrap_err();
        assert_eq!(
            e.message,
            "PersistentVolume \"pv\" is invalid: [spec.accessModes: Required value, spec: Forbidden: nope]"
        );
        assert_eq!(e.status()["details"]["causes"][2]["field"], "spec");
        assert!(same(Some(&json!({"a": [], "b": null})), None));
        assert!(!same(Some(&json!({"a": 1})), None));
    }
}
