//! Deletion as the generic registry store does it (`staging/src/k8s.io/apiserver/pkg/registry`:
//! `rest.BeforeDelete`, `Store.Delete`, `updateForGracefulDeletionAndFinalizers`,
//! `markAsDeleting`, `shouldDeleteDuringUpdate`) with the pod strategy's `CheckGracefulDelete`:
//! the `DeleteOptions` of a request (body, else query parameters) and their validation, the
//! preconditions with `BeforeDelete`'s messages, graceful deletion of pods (a
//! `deletionTimestamp` grace seconds ahead and `deletionGracePeriodSeconds`, shortened by a
//! later delete with a shorter grace, 0 deleting at once) and finalizers (an object with
//! `metadata.finalizers` keeps its `deletionTimestamp` until an update removes the last one).
//! The store applies these to pods (graceful and finalizers) and PodDisruptionBudgets
//! (finalizers); other resources are deleted at once.

use crate::error::ApiError;
use crate::meta;
use crate::meta::Pointer;
use crate::validation::{self as v, FieldError, quote};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `DeleteOptions` of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<String>,
    /// `orphanDependents` (deprecated).
    pub orphan_dependents: Option<bool>,
    /// A non-empty `dryRun` (kube's `DeleteParams` sends it in the body), which kube-sim
    /// refuses as it does in the query of any write.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Grace period 0 with a UID precondition: what a kubelet sends for a pod it has finished.
    pub fn force(uid: &str) -> Self {
        Self {
            grace_period_seconds: Some(0),
            uid: Some(uid.to_string()),
            ..Self::default()
        }
    }

    /// From the request body (a `DeleteOptions` object) or, without one, the query parameters,
    /// as the real DELETE handler decodes them; malformed values are a 400.
    pub fn parse(body: &[u8], q: &HashMap<String, String>) -> Result<Self, ApiError> {
        if !body.is_empty() {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
            })?;
            let bad = |f: &str, want: &str| {
                ApiError::bad_request(format!(
                    "json: cannot unmarshal {} into Go struct field DeleteOptions.{f} of type {want}",
                    kind(&v[f])
                ))
            };
            let grace = match v.get("gracePeriodSeconds") {
                None | Some(Value::Null) => None,
                Some(x) => Some(
                    x.as_i64()
                        .ok_or_else(|| bad("gracePeriodSeconds", "int64"))?,
                ),
            };
            let string = |p: &str| v.at(p).and_then(Value::as_str).map(str::to_string);
            let orphan = match v.get("orphanDependents") {
                None | Some(Value::Null) => None,
                Some(x) => Some(x.as_bool().ok_or_else(|| bad("orphanDependents", "bool"))?),
            };
            return Ok(Self {
                grace_period_seconds: grace,
                uid: string("/preconditions/uid"),
                resource_version: string("/preconditions/resourceVersion"),
                propagation_policy: string("/propagationPolicy"),
                orphan_dependents: orphan,
                dry_run: v
                    .get("dryRun")
                    .and_then(Value::as_array)
                    .is_some_and(|d| !d.is_empty()),
            });
        }
        let grace = match q.get("gracePeriodSeconds") {
            None => None,
            Some(s) => Some(s.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    quote(s)
                ))
            })?),
        };
        let orphan = match q.get("orphanDependents").map(String::as_str) {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(s) => {
                return Err(ApiError::bad_request(format!(
                    "strconv.ParseBool: parsing {}: invalid syntax",
                    quote(s)
                )));
            }
        };
        Ok(Self {
            grace_period_seconds: grace,
            uid: None,
            resource_version: None,
            propagation_policy: q.get("propagationPolicy").cloned(),
            orphan_dependents: orphan,
            dry_run: q.get("dryRun").is_some_and(|d| !d.is_empty()),
        })
    }

    /// `ValidateDeleteOptions`: a 422 on `DeleteOptions.meta.k8s.io ""`.
    pub fn validate(&self) -> Result<(), ApiError> {
        let mut errs = Vec::new();
        if let (Some(_), Some(p)) = (self.orphan_dependents, &self.propagation_policy) {
            errs.push(FieldError::invalid(
                "propagationPolicy",
                quote(p),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        if let Some(p) = &self.propagation_policy
            && !matches!(p.as_str(), "Foreground" | "Background" | "Orphan")
        {
            errs.push(FieldError::not_supported(
                "propagationPolicy",
                quote(p),
                &["Foreground", "Background", "Orphan", "nil"],
            ));
        }
        v::check("meta.k8s.io", "DeleteOptions", "", errs)
    }

    /// The preconditions as `BeforeDelete` checks them (409 on `Kind[.group] "name"`).
    pub fn check_preconditions(
        &self,
        group: &str,
        kind: &str,
        obj: &Value,
    ) -> Result<(), ApiError> {
        let name = meta::meta_str(obj, "name");
        let resource = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let conflict = |why: String| {
            let mut e = ApiError::conflict("", &resource, name, &why);
            if let Some(d) = e.details.as_mut() {
                d.group = group.to_string();
                d.kind = kind.to_string();
            }
            e
        };
        let uid = meta::meta_str(obj, "uid");
        if let Some(want) = &self.uid
            && want != uid
        {
            return Err(conflict(format!(
                "the UID in the precondition ({want}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
            )));
        }
        let rv = meta::meta_str(obj, "resourceVersion");
        if let Some(want) = &self.resource_version
            && want != rv
        {
            return Err(conflict(format!(
                "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({rv}). The object might have been modified"
            )));
        }
        Ok(())
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn at(secs: i64) -> String {
    meta::rfc3339(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// `metadata.deletionGracePeriodSeconds`.
pub(crate) fn grace_of(obj: &Value) -> Option<i64> {
    obj.at("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn terminating(obj: &Value) -> bool {
    !meta::meta_str(obj, "deletionTimestamp").is_empty()
}

/// Whether `metadata.finalizers` is non-empty.
pub(crate) fn has_finalizers(obj: &Value) -> bool {
    obj.at("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

fn bump_generation(obj: &mut Value) {
    if let Some(g) = obj
        .at("/metadata/generation")
        .and_then(Value::as_i64)
        .filter(|g| *g > 0)
    {
        meta::metadata_mut(obj).insert("generation".into(), json!(g + 1));
    }
}

/// The outcome of `BeforeDelete`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BeforeDelete {
    /// The object was changed for a graceful deletion.
    pub graceful: bool,
    /// A graceful deletion is already under way and this request does not shorten it.
    pub pending: bool,
}

/// `rest.BeforeDelete` for a pod (a graceful-delete strategy, `CheckGracefulDelete` of
/// `pkg/registry/core/pod/strategy.go`), changing `pod` and the request's `grace` as it does.
pub(crate) fn before_delete_pod(
    pod: &mut Value,
    grace: &mut Option<i64>,
    now: SystemTime,
) -> BeforeDelete {
    let no = BeforeDelete {
        graceful: false,
        pending: false,
    };
    // Negative values are treated as 1 s on the delete path.
    if grace.is_some_and(|g| g < 0) {
        *grace = Some(1);
    }
    if grace_of(pod).is_some_and(|g| g < 0) {
        meta::metadata_mut(pod).insert("deletionGracePeriodSeconds".into(), json!(1));
    }
    let now_s = secs(now);
    if terminating(pod) {
        let current = match grace_of(pod) {
            None | Some(0) => return no, // delete now
            Some(g) => g,
        };
        let Some(period) = *grace else {
            // A graceful deletion is pending: nothing to do.
            *grace = Some(current);
            return BeforeDelete {
                graceful: false,
                pending: true,
            };
        };
        if period >= current {
            return BeforeDelete {
                graceful: false,
                pending: true,
            };
        }
        let dt = meta::parse_rfc3339(meta::meta_str(pod, "deletionTimestamp")).map_or(now_s, secs);
        let mut new_dt = dt - current + period;
        let mut period = period;
        // Shortening may not move the timestamp into the past (metav1.Time has whole seconds,
        // so a timestamp in this second is already in the past).
        if new_dt <= now_s {
            new_dt = now_s;
            if period != 0 {
                period = 1;
            }
        }
        let m = meta::metadata_mut(pod);
        m.insert("deletionTimestamp".into(), json!(at(new_dt)));
        m.insert("deletionGracePeriodSeconds".into(), json!(period));
        return BeforeDelete {
            graceful: true,
            pending: false,
        };
    }
    // CheckGracefulDelete.
    let mut period = grace.unwrap_or_else(|| {
        pod.at("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    });
    if pod
        .at("/spec/nodeName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        period = 0; // not scheduled: delete immediately
    }
    if matches!(
        pod.at("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        period = 0; // already terminated: delete immediately
    }
    if period < 0 {
        period = 1;
    }
    *grace = Some(period);
    let m = meta::metadata_mut(pod);
    m.insert("deletionTimestamp".into(), json!(at(now_s + period)));
    m.insert("deletionGracePeriodSeconds".into(), json!(period));
    bump_generation(pod);
    BeforeDelete {
        graceful: true,
        pending: false,
    }
}

/// `markAsDeleting`: a deletion that waits for finalizers (grace period 0, the timestamp now
/// unless an earlier one is set; the generation bumped when the deletion starts).
pub(crate) fn mark_as_deleting(obj: &mut Value, now: SystemTime) {
    let now_s = secs(now);
    let existing = meta::parse_rfc3339(meta::meta_str(obj, "deletionTimestamp")).map(secs);
    if existing.is_none() {
        bump_generation(obj);
    }
    let m = meta::metadata_mut(obj);
    if existing.is_none_or(|t| t > now_s) {
        m.insert("deletionTimestamp".into(), json!(at(now_s)));
    }
    m.insert("deletionGracePeriodSeconds".into(), json!(0));
}

/// `shouldDeleteDuringUpdate`: an update that removes the last finalizer of an object whose
/// deletion waits only for them (grace period 0) deletes it.
pub(crate) fn delete_during_update(old: &Value, new: &Value) -> bool {
    has_finalizers(old) && !has_finalizers(new) && terminating(new) && grace_of(new) == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: &str, phase: &str) -> Value {
        json!({"metadata": {"name": "p", "uid": "u", "generation": 1}, "spec": {"nodeName": node,
               "terminationGracePeriodSeconds": 30}, "status": {"phase": phase}})
    }

    #[test]
    fn graceful_deletion_of_pods() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut p = pod("n1", "Running");
        let mut g = None;
        let r = before_delete_pod(&mut p, &mut g, now);
        assert!(r.graceful && !r.pending);
        assert_eq!(g, Some(30));
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 30);
        assert_eq!(p["metadata"]["deletionTimestamp"], at(1_000_030));
        assert_eq!(p["metadata"]["generation"], 2);
        // The same again: pending; a longer one too.
        for grace in [None, Some(30), Some(60)] {
            let mut q = p.clone();
            let mut g = grace;
            assert!(before_delete_pod(&mut q, &mut g, now).pending);
            assert_eq!(q, p);
        }
        // Shorter: the timestamp moves back.
        let mut g = Some(10);
        let r = before_delete_pod(&mut p, &mut g, now);
        assert!(r.graceful);
        assert_eq!(p["metadata"]["deletionTimestamp"], at(1_000_010));
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 10);
        assert_eq!(p["metadata"]["generation"], 2);
        // Later, shortening into the past: now, with 1 s (or 0 when asked).
        let later = now + Duration::from_secs(20);
        let mut q = p.clone();
        let mut g = Some(5);
        before_delete_pod(&mut q, &mut g, later);
        assert_eq!(q["metadata"]["deletionGracePeriodSeconds"], 1);
        assert_eq!(q["metadata"]["deletionTimestamp"], at(1_000_020));
        let mut g = Some(0);
        assert!(before_delete_pod(&mut p, &mut g, later).graceful);
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 0);
        // Grace 0 already: delete now.
        let mut g = Some(0);
        assert_eq!(
            before_delete_pod(&mut p, &mut g, later),
            BeforeDelete {
                graceful: false,
                pending: false
            }
        );
    }

    #[test]
    fn unbound_and_finished_pods_get_no_grace() {
        let now = UNIX_EPOCH + Duration::from_secs(5);
        for (node, phase, asked) in [
            ("", "Pending", Some(30)),
            ("n", "Succeeded", None),
            ("n", "Failed", Some(9)),
        ] {
            let mut p = pod(node, phase);
            let mut g = asked;
            assert!(before_delete_pod(&mut p, &mut g, now).graceful);
            assert_eq!(g, Some(0));
            assert_eq!(p["metadata"]["deletionTimestamp"], at(5));
        }
        let mut p = pod("n", "Running");
        let mut g = Some(-5);
        before_delete_pod(&mut p, &mut g, now);
        assert_eq!(g, Some(1));
    }

    #[test]
    fn finalizers() {
        let now = UNIX_EPOCH + Duration::from_secs(100);
        let mut o = json!({"metadata": {"name": "x", "generation": 1, "finalizers": ["f"]}});
        mark_as_deleting(&mut o, now);
        assert_eq!(o["metadata"]["deletionTimestamp"], at(100));
        assert_eq!(o["metadata"]["generation"], 2);
        let mut done = o.clone();
        done["metadata"]["finalizers"] = json!([]);
        assert!(delete_during_update(&o, &done));
        assert!(!delete_during_update(&o, &o));
        let mut graceful = done.clone();
        graceful["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert!(!delete_during_update(&o, &graceful));
    }

    #[test]
    fn options_from_body_or_query() {
        let q: HashMap<String, String> =
            [("gracePeriodSeconds".to_string(), "0".to_string())].into();
        assert_eq!(
            DeleteOptions::parse(b"", &q).unwrap().grace_period_seconds,
            Some(0)
        );
        let body = br#"{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":5,"preconditions":{"uid":"u"},"propagationPolicy":"Background"}"#;
        let o = DeleteOptions::parse(body, &q).unwrap();
        assert_eq!(
            (o.grace_period_seconds, o.uid.as_deref()),
            (Some(5), Some("u"))
        );
        o.validate().unwrap();
        let bad = DeleteOptions {
            propagation_policy: Some("Sideways".into()),
            ..DeleteOptions::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().message,
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
        );
        let e = DeleteOptions::force("other")
            .check_preconditions("", "Pod", &json!({"metadata": {"name": "p", "uid": "u"}}))
            .unwrap_err();
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (other) does not match the UID in record (u). The object might have been deleted and then recreated"
        );
    }
}
