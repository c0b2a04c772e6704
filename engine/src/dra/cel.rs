//! The CEL device selectors of DRA (DeviceClass `spec.selectors[].cel.expression` and a
//! request's `selectors`), evaluated as kube-scheduler's structured allocator evaluates them
//! (`k8s.io/dynamic-resource-allocation/cel`), with the `cel` crate's interpreter.
//!
//! The environment: one variable `device` with
//! - `driver` (string), `allowMultipleAllocations` (bool);
//! - `attributes`: a map from domain to a map from attribute name to its value (int, bool,
//!   string, or a semantic version). An attribute named without a domain (`model`) belongs to
//!   the driver's domain (`device.attributes["gpu.example.com"].model`);
//! - `capacity`: the same shape, each value a quantity.
//!
//! Kubernetes' CEL library for them: `quantity("10Gi")`, `isQuantity(s)`, and on quantities
//! `compareTo`, `isGreaterThan`, `isLessThan`, `asInteger`, `asApproximateFloat`, `isInteger`,
//! `sign`, `add`, `sub`; `semver("1.2.3")`, `isSemver(s)`, and on versions `compareTo`,
//! `isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`.
//!
//! A selector that does not evaluate to a bool, or fails (a missing key: a device without the
//! attribute), does not match the device; the error text is kept for the message of a claim
//! no device matches (upstream reports a CEL runtime error the same way: the device is not
//! used). Expressions are compiled once ([`Selectors`]) and each (expression, device) pair is
//! evaluated once until the devices change: the driver memoises the results.

use crate::model::parse_scaled;
use cel::extractors::This;
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, Program, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A quantity, in milli-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity(pub i128);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version (`major.minor.patch`, pre-release and build kept for ordering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// Pre-release identifiers (`-rc.1`): a version with them sorts before the same without.
    pub pre: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    /// Parse `1.2.3`, `1.2.3-rc.1`, `1.2.3+build` (semver 2.0.0, as `blang/semver` does for
    /// `semver()`).
    pub fn parse(s: &str) -> Option<Semver> {
        let s = s.split_once('+').map_or(s, |(v, _)| v);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, p.split('.').map(str::to_owned).collect()),
            None => (s, Vec::new()),
        };
        let mut parts = core.split('.');
        let num = |p: Option<&str>| -> Option<u64> {
            let p = p?;
            if p.is_empty() || (p.len() > 1 && p.starts_with('0')) {
                return None;
            }
            p.parse().ok()
        };
        let v = Semver {
            major: num(parts.next())?,
            minor: num(parts.next())?,
            patch: num(parts.next())?,
            pre,
        };
        parts.next().is_none().then_some(v)
    }

    fn cmp(&self, o: &Semver) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        (self.major, self.minor, self.patch)
            .cmp(&(o.major, o.minor, o.patch))
            .then_with(|| match (self.pre.is_empty(), o.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&o.pre) {
                        let c = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if c != Ordering::Equal {
                            return c;
                        }
                    }
                    self.pre.len().cmp(&o.pre.len())
                }
            })
    }
}

/// An attribute value of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    Int(i64),
    Bool(bool),
    String(String),
    /// A semantic version (`version` in the API).
    Version(String),
}

/// What a selector reads of a device.
#[derive(Debug, Clone, Default)]
pub struct DeviceView {
    pub driver: String,
    /// (domain, name, value).
    pub attributes: Vec<(String, String, AttrValue)>,
    /// (domain, name, milli-units).
    pub capacity: Vec<(String, String, i128)>,
    pub allow_multiple_allocations: bool,
}

impl DeviceView {
    /// The CEL value of `device`.
    pub fn to_value(&self) -> Value {
        // The driver's own domain is always there (empty if the device has no attribute in
        // it), so `device.attributes[device.driver].x` on a device without `x` is upstream's
        // `no such key: x`.
        let mut attrs: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
        attrs.insert(Key::String(Arc::new(self.driver.clone())), HashMap::new());
        for (domain, name, v) in &self.attributes {
            let value = match v {
                AttrValue::Int(i) => Value::Int(*i),
                AttrValue::Bool(b) => Value::Bool(*b),
                AttrValue::String(s) => Value::String(Arc::new(s.clone())),
                AttrValue::Version(s) => match Semver::parse(s) {
                    Some(v) => Value::Opaque(Arc::new(v)),
                    None => Value::String(Arc::new(s.clone())),
                },
            };
            attrs
                .entry(Key::String(Arc::new(domain.clone())))
                .or_default()
                .insert(Key::String(Arc::new(name.clone())), value);
        }
        let mut caps: HashMap<Key, HashMap<Key, Value>> = HashMap::new();
        caps.insert(Key::String(Arc::new(self.driver.clone())), HashMap::new());
        for (domain, name, milli) in &self.capacity {
            caps.entry(Key::String(Arc::new(domain.clone())))
                .or_default()
                .insert(
                    Key::String(Arc::new(name.clone())),
                    Value::Opaque(Arc::new(Quantity(*milli))),
                );
        }
        let nested = |m: HashMap<Key, HashMap<Key, Value>>| -> Value {
            let outer: HashMap<Key, Value> = m
                .into_iter()
                .map(|(k, v)| (k, Value::Map(Map { map: Arc::new(v) })))
                .collect();
            Value::Map(Map {
                map: Arc::new(outer),
            })
        };
        let mut device: HashMap<Key, Value> = HashMap::new();
        device.insert(
            Key::String(Arc::new("driver".into())),
            Value::String(Arc::new(self.driver.clone())),
        );
        device.insert(Key::String(Arc::new("attributes".into())), nested(attrs));
        device.insert(Key::String(Arc::new("capacity".into())), nested(caps));
        device.insert(
            Key::String(Arc::new("allowMultipleAllocations".into())),
            Value::Bool(self.allow_multiple_allocations),
        );
        Value::Map(Map {
            map: Arc::new(device),
        })
    }
}

type CelResult<T> = Result<T, ExecutionError>;

fn quantity_of(v: &Arc<dyn Opaque>) -> CelResult<Quantity> {
    v.downcast_ref::<Quantity>()
        .copied()
        .ok_or_else(|| ExecutionError::function_error("quantity", "not a quantity"))
}

fn parse_quantity(s: &str) -> Option<Quantity> {
    parse_scaled("quantity", s, 1000)
        .ok()
        .map(|m| Quantity(i128::from(m)))
        .or_else(|| {
            s.strip_prefix('-')
                .and_then(|p| parse_scaled("quantity", p, 1000).ok())
                .map(|m| Quantity(-i128::from(m)))
        })
}

fn quantity(s: Arc<String>) -> CelResult<Value> {
    parse_quantity(&s)
        .map(|q| Value::Opaque(Arc::new(q)))
        .ok_or_else(|| {
            ExecutionError::function_error("quantity", format!("invalid quantity {s:?}"))
        })
}

fn is_quantity(s: Arc<String>) -> bool {
    parse_quantity(&s).is_some()
}

fn semver(s: Arc<String>) -> CelResult<Value> {
    Semver::parse(&s)
        .map(|v| Value::Opaque(Arc::new(v)))
        .ok_or_else(|| ExecutionError::function_error("semver", format!("invalid semver {s:?}")))
}

fn is_semver(s: Arc<String>) -> bool {
    Semver::parse(&s).is_some()
}

/// `compareTo`, for quantities and versions: -1, 0, 1.
fn compare_to(This(this): This<Arc<dyn Opaque>>, other: Arc<dyn Opaque>) -> CelResult<i64> {
    let ord = if let (Some(a), Some(b)) = (
        this.downcast_ref::<Quantity>(),
        other.downcast_ref::<Quantity>(),
    ) {
        a.0.cmp(&b.0)
    } else if let (Some(a), Some(b)) = (
        this.downcast_ref::<Semver>(),
        other.downcast_ref::<Semver>(),
    ) {
        a.cmp(b)
    } else {
        return Err(ExecutionError::function_error(
            "compareTo",
            "no such overload",
        ));
    };
    Ok(ord as i64)
}

fn is_greater_than(this: This<Arc<dyn Opaque>>, other: Arc<dyn Opaque>) -> CelResult<bool> {
    compare_to(this, other).map(|c| c > 0)
}

fn is_less_than(this: This<Arc<dyn Opaque>>, other: Arc<dyn Opaque>) -> CelResult<bool> {
    compare_to(this, other).map(|c| c < 0)
}

fn as_integer(This(this): This<Arc<dyn Opaque>>) -> CelResult<i64> {
    let q = quantity_of(&this)?;
    if q.0 % 1000 != 0 {
        return Err(ExecutionError::function_error(
            "asInteger",
            "quantity is not an integer",
        ));
    }
    i64::try_from(q.0 / 1000)
        .map_err(|_| ExecutionError::function_error("asInteger", "quantity overflows an int"))
}

fn as_approximate_float(This(this): This<Arc<dyn Opaque>>) -> CelResult<f64> {
    quantity_of(&this).map(|q| q.0 as f64 / 1000.0)
}

fn is_integer(This(this): This<Arc<dyn Opaque>>) -> CelResult<bool> {
    quantity_of(&this).map(|q| q.0 % 1000 == 0)
}

fn sign(This(this): This<Arc<dyn Opaque>>) -> CelResult<i64> {
    quantity_of(&this).map(|q| q.0.signum() as i64)
}

fn add(This(this): This<Arc<dyn Opaque>>, other: Value) -> CelResult<Value> {
    let a = quantity_of(&this)?;
    let b = match other {
        Value::Int(i) => i128::from(i) * 1000,
        Value::Opaque(o) => quantity_of(&o)?.0,
        _ => return Err(ExecutionError::function_error("add", "no such overload")),
    };
    Ok(Value::Opaque(Arc::new(Quantity(a.0 + b))))
}

fn sub(This(this): This<Arc<dyn Opaque>>, other: Value) -> CelResult<Value> {
    let a = quantity_of(&this)?;
    let b = match other {
        Value::Int(i) => i128::from(i) * 1000,
        Value::Opaque(o) => quantity_of(&o)?.0,
        _ => return Err(ExecutionError::function_error("sub", "no such overload")),
    };
    Ok(Value::Opaque(Arc::new(Quantity(a.0 - b))))
}

fn version_part(this: &Arc<dyn Opaque>, f: fn(&Semver) -> u64) -> CelResult<i64> {
    this.downcast_ref::<Semver>()
        .map(|v| f(v) as i64)
        .ok_or_else(|| ExecutionError::function_error("semver", "not a version"))
}

fn major(This(this): This<Arc<dyn Opaque>>) -> CelResult<i64> {
    version_part(&this, |v| v.major)
}

fn minor(This(this): This<Arc<dyn Opaque>>) -> CelResult<i64> {
    version_part(&this, |v| v.minor)
}

fn patch(This(this): This<Arc<dyn Opaque>>) -> CelResult<i64> {
    version_part(&this, |v| v.patch)
}

/// The root context with Kubernetes' quantity and semver functions.
pub fn root_context() -> Context<'static, 'static> {
    let mut ctx = Context::default();
    let add_fn = |r: Result<(), cel::DeclarationError>| {
        // The names are Kubernetes' own; none is in the standard library.
        r.expect("a Kubernetes CEL function");
    };
    add_fn(ctx.add_function("quantity", quantity));
    add_fn(ctx.add_function("isQuantity", is_quantity));
    add_fn(ctx.add_function("semver", semver));
    add_fn(ctx.add_function("isSemver", is_semver));
    add_fn(ctx.add_function("compareTo", compare_to));
    add_fn(ctx.add_function("isGreaterThan", is_greater_than));
    add_fn(ctx.add_function("isLessThan", is_less_than));
    add_fn(ctx.add_function("asInteger", as_integer));
    add_fn(ctx.add_function("asApproximateFloat", as_approximate_float));
    add_fn(ctx.add_function("isInteger", is_integer));
    add_fn(ctx.add_function("sign", sign));
    add_fn(ctx.add_function("add", add));
    add_fn(ctx.add_function("sub", sub));
    add_fn(ctx.add_function("major", major));
    add_fn(ctx.add_function("minor", minor));
    add_fn(ctx.add_function("patch", patch));
    ctx
}

/// A compiled selector.
pub struct Selector {
    pub source: Arc<str>,
    program: Result<Program, String>,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Selector")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl Selector {
    pub fn compile(source: &str) -> Selector {
        Selector {
            source: Arc::from(source),
            program: Program::compile(source).map_err(|e| e.to_string()),
        }
    }

    /// Does the device match? `Err`: the expression failed (not a bool, a missing key, a
    /// compile error), with its text.
    pub fn matches(
        &self,
        root: &Context<'static, 'static>,
        device: &Value,
    ) -> Result<bool, String> {
        let program = self.program.as_ref().map_err(Clone::clone)?;
        let mut scope = root.new_inner_scope();
        scope.add_variable_from_value("device", device.clone());
        match program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "expression must evaluate to bool, not {:?}",
                other.type_of()
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Value {
        DeviceView {
            driver: "gpu.example.com".into(),
            attributes: vec![
                (
                    "gpu.example.com".into(),
                    "model".into(),
                    AttrValue::String("a100".into()),
                ),
                ("gpu.example.com".into(), "index".into(), AttrValue::Int(3)),
                (
                    "gpu.example.com".into(),
                    "driverVersion".into(),
                    AttrValue::Version("1.2.3".into()),
                ),
            ],
            capacity: vec![(
                "gpu.example.com".into(),
                "memory".into(),
                80 * 1024 * 1024 * 1024 * 1000,
            )],
            allow_multiple_allocations: false,
        }
        .to_value()
    }

    fn eval(src: &str) -> Result<bool, String> {
        Selector::compile(src).matches(&root_context(), &gpu())
    }

    #[test]
    fn driver_attributes_capacity_and_kubernetes_functions() {
        assert_eq!(eval("device.driver == \"gpu.example.com\""), Ok(true));
        assert_eq!(
            eval("device.attributes[\"gpu.example.com\"].model == \"a100\""),
            Ok(true)
        );
        assert_eq!(
            eval("device.attributes[\"gpu.example.com\"].index > 2"),
            Ok(true)
        );
        assert_eq!(
            eval("device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) > 0"),
            Ok(true)
        );
        assert_eq!(
            eval("device.capacity[\"gpu.example.com\"].memory.isLessThan(quantity(\"40Gi\"))"),
            Ok(false)
        );
        assert_eq!(
            eval(
                "device.attributes[\"gpu.example.com\"].driverVersion.isGreaterThan(semver(\"1.2.0\"))"
            ),
            Ok(true)
        );
        assert_eq!(
            eval("device.attributes[\"gpu.example.com\"].driverVersion.major() == 1"),
            Ok(true)
        );
        assert_eq!(
            eval("isQuantity(\"10Gi\") && !isQuantity(\"ten\")"),
            Ok(true)
        );
        assert_eq!(eval("device.allowMultipleAllocations"), Ok(false));
    }

    #[test]
    fn failures_do_not_match() {
        assert!(eval("device.attributes[\"other.com\"].model == \"x\"").is_err());
        assert!(eval("1 + 1").is_err(), "not a bool");
        assert!(eval("device.driver ==").is_err(), "syntax");
    }

    #[test]
    fn versions_order_as_semver() {
        let v = |s| Semver::parse(s).unwrap();
        assert_eq!(v("1.2.3").cmp(&v("1.10.0")), std::cmp::Ordering::Less);
        assert_eq!(v("1.0.0-rc.1").cmp(&v("1.0.0")), std::cmp::Ordering::Less);
        assert_eq!(
            v("1.0.0-alpha").cmp(&v("1.0.0-alpha.1")),
            std::cmp::Ordering::Less
        );
        assert!(Semver::parse("1.2").is_none());
        assert!(Semver::parse("01.2.3").is_none());
    }
}
