//! `scheduling.k8s.io/v1` PriorityClasses and the `Priority` admission plugin, as
//! kube-apiserver v1.36 serves them:
//!
//! - the registry (`pkg/registry/scheduling/priorityclass`): decoding (`value` an int32,
//!   `globalDefault` a bool, …: a 400 otherwise), `SetDefaults_PriorityClass`
//!   (`preemptionPolicy: PreemptLowerPriority`), `PrepareForCreate` (`generation: 1`, never
//!   bumped), `ValidatePriorityClass` (a DNS-subdomain name; names prefixed `system-` only for
//!   the built-in classes with their value and `globalDefault`; a user class's `value` at most
//!   `HighestUserDefinablePriority`; `preemptionPolicy` `PreemptLowerPriority` or `Never`),
//!   `ValidatePriorityClassUpdate` (`value` and `preemptionPolicy` immutable), and `REST.Delete`
//!   (the built-in classes cannot be deleted);
//! - the built-in classes the `scheduling/bootstrap-system-priority-classes` post-start hook
//!   creates (`system-node-critical`, 2000001000; `system-cluster-critical`, 2000000000);
//! - the admission plugin (`plugin/pkg/admission/priority`): on pod create, `spec.priority`
//!   and `spec.preemptionPolicy` from the class the pod names (403 when it does not exist), or
//!   from the `globalDefault` class with the lowest value (whose name the pod then carries), or
//!   0 and `PreemptLowerPriority`; a pod that already carries a different priority or policy is
//!   refused (403); on pod update the stored priority and policy are kept when the update leaves
//!   them out; a PriorityClass marked `globalDefault` while another one is is refused (403).

use crate::error::ApiError;
use crate::meta;
use crate::validation::{self as v, FieldError, quote};
use serde_json::{Value, json};

/// Storage key of PriorityClasses.
pub(crate) const PC_KEY: &str = "scheduling.k8s.io/priorityclasses";
/// API group.
pub(crate) const GROUP: &str = "scheduling.k8s.io";
const KIND: &str = "PriorityClass";
const PLURAL: &str = "priorityclasses";

/// `scheduling.HighestUserDefinablePriority`.
pub(crate) const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;
/// `scheduling.SystemCriticalPriority`.
pub(crate) const SYSTEM_CRITICAL_PRIORITY: i64 = 2 * HIGHEST_USER_DEFINABLE_PRIORITY;
/// `scheduling.SystemPriorityClassPrefix`.
const SYSTEM_PREFIX: &str = "system-";
/// `scheduling.DefaultPriorityWhenNoDefaultClassExists`.
const DEFAULT_PRIORITY: i64 = 0;

const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
/// The supported preemption policies, in `ValidatePreemptionPolicy`'s order.
const PREEMPTION_POLICIES: [&str; 2] = [PREEMPT_LOWER_PRIORITY, "Never"];

/// `schedulingapiv1.SystemPriorityClasses()`: name, value, description.
const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        SYSTEM_CRITICAL_PRIORITY + 1000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        SYSTEM_CRITICAL_PRIORITY,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The built-in classes as the bootstrap hook sends them (`globalDefault` false, so omitted).
pub(crate) fn system_classes() -> Vec<Value> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": KIND, "metadata": {"name": name},
                   "value": value, "description": description})
        })
        .collect()
}

/// The field manager of the bootstrap hook's writes (its loopback client's user agent).
pub(crate) const BOOTSTRAP_MANAGER: &str = "kube-apiserver";

fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "bool".into(),
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

/// Go's `UnmarshalTypeError` for `field` of `strukt`, as the decoder reports it.
fn unmarshal_error(v: &Value, strukt: &str, field: &str, typ: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {strukt}.{field} of type {typ}",
        json_type(v)
    )
}

fn is_int32(v: &Value) -> bool {
    v.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
}

/// A field: its JSON name, its Go type, and whether a (non-null) JSON value decodes into it.
type GoField = (&'static str, &'static str, fn(&Value) -> bool);

/// The decoder's 400 for the first of `fields` of `obj` that does not decode (`strukt` and
/// `path` name it as Go does; `kind` is the object's).
fn decode_fields(
    obj: &Value,
    fields: &[GoField],
    strukt: &str,
    path: &str,
    kind: &str,
) -> Result<(), ApiError> {
    for (f, typ, ok) in fields {
        if let Some(x) = obj.get(f)
            && !x.is_null()
            && !ok(x)
        {
            return Err(ApiError::bad_request(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: {}",
                unmarshal_error(x, strukt, &format!("{path}{f}"), typ)
            )));
        }
    }
    Ok(())
}

/// What the JSON decoder refuses in a PriorityClass (a 400).
fn decode(obj: &Value) -> Result<(), ApiError> {
    const FIELDS: [GoField; 4] = [
        ("value", "int32", is_int32),
        ("globalDefault", "bool", Value::is_boolean),
        ("description", "string", Value::is_string),
        ("preemptionPolicy", "v1.PreemptionPolicy", Value::is_string),
    ];
    decode_fields(obj, &FIELDS, KIND, "", KIND)
}

/// The object as decoding, defaulting and encoding leave it: `value` always present (0 when
/// left out), `globalDefault` and `description` omitted when empty, `preemptionPolicy`
/// defaulted to `PreemptLowerPriority`.
fn normalize(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if o.get("value").is_none_or(Value::is_null) {
        o.insert("value".into(), json!(0));
    }
    if o.get("globalDefault").is_some_and(|g| g != &json!(true)) {
        o.remove("globalDefault");
    }
    if o.get("description")
        .is_some_and(|d| d.as_str().is_none_or(str::is_empty))
    {
        o.remove("description");
    }
    if o.get("preemptionPolicy").is_none_or(Value::is_null) {
        o.insert("preemptionPolicy".into(), json!(PREEMPT_LOWER_PRIORITY));
    }
}

fn value_of(pc: &Value) -> i64 {
    pc.get("value").and_then(Value::as_i64).unwrap_or(0)
}

fn global_default(pc: &Value) -> bool {
    pc.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

fn policy_of(pc: &Value) -> Option<&str> {
    pc.get("preemptionPolicy").and_then(Value::as_str)
}

/// `IsKnownSystemPriorityClass`: Ok for a built-in class with its value and `globalDefault`.
fn known_system_class(name: &str, value: i64, global_default: bool) -> Result<(), String> {
    match SYSTEM_CLASSES.iter().find(|(n, ..)| *n == name) {
        None => Err(format!("{name} is not a known system priority class")),
        Some((n, want, _)) if *want != value => {
            Err(format!("value of {n} PriorityClass must be {want}"))
        }
        // No built-in class is the global default.
        Some((n, ..)) if global_default => {
            Err(format!("globalDefault of {n} PriorityClass must be false"))
        }
        Some(_) => Ok(()),
    }
}

/// `ValidatePreemptionPolicy`.
fn validate_policy(policy: &str, path: &str) -> Option<FieldError> {
    match policy {
        p if PREEMPTION_POLICIES.contains(&p) => None,
        "" => Some(FieldError::required(path, "")),
        p => Some(FieldError::not_supported(
            path,
            quote(p),
            &PREEMPTION_POLICIES,
        )),
    }
}

/// Decoding, defaults, `PrepareForCreate` and `ValidatePriorityClass` of a new class.
pub(crate) fn admit_create(obj: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(obj)?;
    normalize(obj);
    meta::metadata_mut(obj).insert("generation".into(), json!(1));
    let mut errs = v::subdomain_name(name);
    let value = value_of(obj);
    if name.starts_with(SYSTEM_PREFIX) {
        if let Err(e) = known_system_class(name, value, global_default(obj)) {
            errs.push(FieldError::forbidden(
                "metadata.name",
                &format!(
                    "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {e}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(FieldError::forbidden(
            "value",
            &format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    if let Some(p) = policy_of(obj) {
        errs.extend(validate_policy(p, "preemptionPolicy"));
    }
    v::check(GROUP, KIND, name, errs)
}

/// Decoding, defaults and `ValidatePriorityClassUpdate` of a replaced class (the generation
/// is kept: `PrepareForUpdate` does nothing).
pub(crate) fn admit_update(old: &Value, obj: &mut Value, name: &str) -> Result<(), ApiError> {
    decode(obj)?;
    normalize(obj);
    let mut errs = Vec::new();
    if value_of(obj) != value_of(old) {
        errs.push(FieldError::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    if policy_of(obj) != policy_of(old) {
        errs.push(FieldError::invalid(
            "preemptionPolicy",
            policy_of(obj).map_or("null".into(), quote),
            "field is immutable",
        ));
    }
    v::check(GROUP, KIND, name, errs)
}

/// `getDefaultPriorityClass`: of the classes marked `globalDefault`, the one with the lowest
/// value (the first by name among equals).
fn default_class<'a>(classes: impl IntoIterator<Item = &'a Value>) -> Option<&'a Value> {
    let mut best: Option<&Value> = None;
    for c in classes.into_iter().filter(|c| global_default(c)) {
        if best.is_none_or(|b| value_of(b) > value_of(c)) {
            best = Some(c);
        }
    }
    best
}

/// The plugin's `validatePriorityClass`, run after the registry's validation: a class marked
/// `globalDefault` while another one is (on create, any one; on update, one of another name)
/// is a 403.
pub(crate) fn check_global_default<'a>(
    pc: &Value,
    name: &str,
    classes: impl IntoIterator<Item = &'a Value>,
    update: bool,
) -> Result<(), ApiError> {
    if !global_default(pc) {
        return Ok(());
    }
    match default_class(classes) {
        Some(d) if !update || meta::meta_str(d, "name") != name => Err(ApiError::forbidden(
            GROUP,
            PLURAL,
            name,
            &format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                meta::meta_str(d, "name")
            ),
        )),
        _ => Ok(()),
    }
}

/// `REST.Delete`: the built-in classes cannot be deleted (403).
pub(crate) fn check_delete(name: &str) -> Result<(), ApiError> {
    if SYSTEM_CLASSES.iter().any(|(n, ..)| *n == name) {
        return Err(ApiError::forbidden(
            GROUP,
            PLURAL,
            name,
            "this is a system priority class and cannot be deleted",
        ));
    }
    Ok(())
}

/// What the decoder refuses in the priority fields of a pod's spec (a 400).
pub(crate) fn decode_pod(pod: &Value) -> Result<(), ApiError> {
    const FIELDS: [GoField; 3] = [
        ("priorityClassName", "string", Value::is_string),
        ("priority", "int32", is_int32),
        ("preemptionPolicy", "v1.PreemptionPolicy", Value::is_string),
    ];
    match pod.get("spec") {
        Some(spec) if spec.is_object() => decode_fields(spec, &FIELDS, "PodSpec", "spec.", "Pod"),
        _ => Ok(()),
    }
}

/// What the plugin writes into a new pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodPriority {
    /// The global default class's name, for a pod that names none.
    class: Option<String>,
    priority: i64,
    policy: Option<String>,
}

/// The plugin's `admitPod` on create: the pod's priority and preemption policy from the class
/// it names or the global default, or the 403 the plugin answers. `name` is the pod's name or,
/// before one is generated, its `generateName` (`admission.NewForbidden`).
pub(crate) fn resolve_pod<'a>(
    pod: &Value,
    name: &str,
    classes: impl IntoIterator<Item = &'a Value>,
) -> Result<PodPriority, ApiError> {
    let forbidden = |why: String| ApiError::forbidden("", "pods", name, &why);
    let spec = &pod["spec"];
    let class = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut classes = classes.into_iter();
    let resolved = if class.is_empty() {
        match default_class(classes) {
            Some(d) => PodPriority {
                class: Some(meta::meta_str(d, "name").to_string()),
                priority: value_of(d),
                policy: policy_of(d).map(str::to_string),
            },
            None => PodPriority {
                class: None,
                priority: DEFAULT_PRIORITY,
                policy: Some(PREEMPT_LOWER_PRIORITY.into()),
            },
        }
    } else {
        let pc = classes
            .find(|c| meta::meta_str(c, "name") == class)
            .ok_or_else(|| forbidden(format!("no PriorityClass with name {class} was found")))?;
        PodPriority {
            class: None,
            priority: value_of(pc),
            policy: policy_of(pc).map(str::to_string),
        }
    };
    if let Some(p) = spec.get("priority").and_then(Value::as_i64)
        && p != resolved.priority
    {
        return Err(forbidden(format!(
            "the integer value of priority ({p}) must not be provided in pod spec; priority admission controller computed {} from the given PriorityClass name",
            resolved.priority
        )));
    }
    if let (Some(want), Some(have)) = (
        &resolved.policy,
        spec.get("preemptionPolicy").and_then(Value::as_str),
    ) && have != want
    {
        return Err(forbidden(format!(
            "the string value of PreemptionPolicy ({have}) must not be provided in pod spec; priority admission controller computed {want} from the given PriorityClass name"
        )));
    }
    Ok(resolved)
}

/// Writes what [`resolve_pod`] computed (after the field manager has run: nobody owns it).
pub(crate) fn apply_pod(pod: &mut Value, p: PodPriority) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(c) = p.class {
        spec.insert("priorityClassName".into(), json!(c));
    }
    spec.insert("priority".into(), json!(p.priority));
    if let Some(policy) = p.policy {
        spec.insert("preemptionPolicy".into(), json!(policy));
    }
}

/// `ValidatePriorityClassName` and `ValidatePreemptionPolicy` of a pod spec (`validatePodSpec`).
pub(crate) fn validate_pod_spec(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(c) = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
    {
        for m in v::dns1123_subdomain(c) {
            errs.push(FieldError::invalid_str("spec.priorityClassName", c, &m));
        }
    }
    if let Some(p) = spec.get("preemptionPolicy").and_then(Value::as_str) {
        errs.extend(validate_policy(p, "spec.preemptionPolicy"));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(name: &str, value: i64) -> Value {
        json!({"metadata": {"name": name}, "value": value})
    }

    fn message(r: Result<(), ApiError>) -> String {
        r.unwrap_err().message
    }

    #[test]
    fn create_defaults_and_validation() {
        let mut c = json!({"metadata": {"name": "high"}, "value": 10, "globalDefault": false, "description": ""});
        admit_create(&mut c, "high").unwrap();
        assert_eq!(
            c,
            json!({"metadata": {"name": "high", "generation": 1}, "value": 10,
                   "preemptionPolicy": "PreemptLowerPriority"})
        );
        let mut c = json!({"metadata": {"name": "zero"}});
        admit_create(&mut c, "zero").unwrap();
        assert_eq!(c["value"], 0);
        assert_eq!(
            message(admit_create(&mut pc("huge", 1_000_000_001), "huge")),
            "PriorityClass.scheduling.k8s.io \"huge\" is invalid: value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        );
        admit_create(&mut pc("max", 1_000_000_000), "max").unwrap();
        assert_eq!(
            message(admit_create(&mut pc("system-x", 5), "system-x")),
            "PriorityClass.scheduling.k8s.io \"system-x\" is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-x is not a known system priority class"
        );
        assert!(
            message(admit_create(
                &mut pc("system-node-critical", 5),
                "system-node-critical"
            ))
            .ends_with("error: value of system-node-critical PriorityClass must be 2000001000")
        );
        let mut c = pc("system-cluster-critical", 2_000_000_000);
        c["globalDefault"] = json!(true);
        assert!(
            message(admit_create(&mut c, "system-cluster-critical")).ends_with(
                "error: globalDefault of system-cluster-critical PriorityClass must be false"
            )
        );
        for (name, value) in system_classes()
            .iter()
            .map(|c| (meta::meta_str(c, "name").to_string(), value_of(c)))
        {
            admit_create(&mut pc(&name, value), &name).unwrap();
        }
        let mut c = pc("p", 1);
        c["preemptionPolicy"] = json!("Sometimes");
        assert_eq!(
            message(admit_create(&mut c, "p")),
            "PriorityClass.scheduling.k8s.io \"p\" is invalid: preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \"PreemptLowerPriority\", \"Never\""
        );
        c["preemptionPolicy"] = json!("");
        assert_eq!(
            message(admit_create(&mut c, "p")),
            "PriorityClass.scheduling.k8s.io \"p\" is invalid: preemptionPolicy: Required value"
        );
        let e = admit_create(&mut json!({"value": "high"}), "p").unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "PriorityClass in version \"v1\" cannot be handled as a PriorityClass: json: cannot unmarshal string into Go struct field PriorityClass.value of type int32"
            )
        );
        let e = admit_create(&mut json!({"value": 3_000_000_000u64}), "p").unwrap_err();
        assert!(e.message.ends_with(
            "json: cannot unmarshal number 3000000000 into Go struct field PriorityClass.value of type int32"
        ));
    }

    #[test]
    fn value_and_policy_are_immutable() {
        let mut old = pc("p", 1);
        admit_create(&mut old, "p").unwrap();
        let mut new = pc("p", 1);
        new["description"] = json!("now described");
        admit_update(&old, &mut new, "p").unwrap();
        let mut new = pc("p", 2);
        new["preemptionPolicy"] = json!("Never");
        assert_eq!(
            message(admit_update(&old, &mut new, "p")),
            "PriorityClass.scheduling.k8s.io \"p\" is invalid: [value: Forbidden: may not be changed in an update., preemptionPolicy: Invalid value: \"Never\": field is immutable]"
        );
    }

    #[test]
    fn one_global_default() {
        let mut a = pc("a", 5);
        a["globalDefault"] = json!(true);
        let b = pc("b", 1);
        let classes = [a.clone(), b.clone()];
        check_global_default(&b, "b", &classes, false).unwrap();
        let mut c = pc("c", 1);
        c["globalDefault"] = json!(true);
        let e = check_global_default(&c, "c", &classes, false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "priorityclasses.scheduling.k8s.io \"c\" is forbidden: PriorityClass a is already marked as default. Only one default can exist"
            )
        );
        check_global_default(&a, "a", &classes, true).unwrap();
        assert_eq!(
            check_global_default(&c, "b", &classes, true)
                .unwrap_err()
                .code,
            403
        );
        // With two defaults (a race), the lower value wins.
        let mut low = pc("low", -5);
        low["globalDefault"] = json!(true);
        assert_eq!(
            meta::meta_str(default_class(&[a, low]).unwrap(), "name"),
            "low"
        );
    }

    #[test]
    fn pods_get_their_class_priority() {
        let mut never = pc("never", 100);
        never["preemptionPolicy"] = json!("Never");
        let classes = vec![never];
        let pod = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let r = resolve_pod(&pod(json!({"priorityClassName": "never"})), "p", &classes).unwrap();
        let mut p = pod(json!({"priorityClassName": "never"}));
        apply_pod(&mut p, r);
        assert_eq!(
            p["spec"],
            json!({"priorityClassName": "never", "priority": 100, "preemptionPolicy": "Never"})
        );
        let r = resolve_pod(&pod(json!({})), "p", &classes).unwrap();
        let mut p = pod(json!({}));
        apply_pod(&mut p, r);
        assert_eq!(
            p["spec"],
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );
        let e =
            resolve_pod(&pod(json!({"priorityClassName": "gone"})), "p-", &classes).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                403,
                "pods \"p-\" is forbidden: no PriorityClass with name gone was found"
            )
        );
        let e = resolve_pod(&pod(json!({"priority": 10})), "p", &classes).unwrap_err();
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: the integer value of priority (10) must not be provided in pod spec; priority admission controller computed 0 from the given PriorityClass name"
        );
        resolve_pod(
            &pod(
                json!({"priorityClassName": "never", "priority": 100, "preemptionPolicy": "Never"}),
            ),
            "p",
            &classes,
        )
        .unwrap();
        let e = resolve_pod(
            &pod(json!({"priorityClassName": "never", "preemptionPolicy": "PreemptLowerPriority"})),
            "p",
            &classes,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "pods \"p\" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
        );
    }

    #[test]
    fn pod_priority_fields_must_decode() {
        decode_pod(&json!({"spec": {"priority": null, "priorityClassName": "x"}})).unwrap();
        let e = decode_pod(&json!({"spec": {"priority": "high"}})).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                400,
                "Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field PodSpec.spec.priority of type int32"
            )
        );
        assert!(
            decode_pod(&json!({"spec": {"preemptionPolicy": 1}}))
                .unwrap_err()
                .message
                .ends_with("cannot unmarshal number 1 into Go struct field PodSpec.spec.preemptionPolicy of type v1.PreemptionPolicy")
        );
    }

    #[test]
    fn built_in_classes_cannot_be_deleted() {
        assert_eq!(
            check_delete("system-node-critical").unwrap_err().message,
            "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"
        );
        check_delete("system-other").unwrap();
    }
}
