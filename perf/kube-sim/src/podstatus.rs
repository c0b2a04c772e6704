//! The DRA part of `ValidatePodStatusUpdate` (`pkg/apis/core/validation`, Kubernetes 1.36) on
//! every pod status write (update, patch and apply of `pods/status`): the resource claim
//! controller's `status.resourceClaimStatuses` (`validatePodResourceClaimStatuses`) and the
//! scheduler's `status.extendedResourceClaimStatus` (`validatePodExtendedResourceClaimStatus`,
//! DRA extended resources, KEP-5004), judged against the stored spec as the status strategy
//! does (`PrepareForUpdate` keeps the old spec). Upstream has no immutability rule for either
//! field: a set status may be changed or removed by a later write.

use crate::error::ApiError;
use crate::meta::Pointer;
use crate::validation::{self, FieldError, quote};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// `Ok` when the pod's (new status, stored spec) pass the checks, else the 422 the real server
/// answers (`Pod "p" is invalid: …`).
pub(crate) fn validate_update(pod: &Value, name: &str) -> Result<(), ApiError> {
    let mut errs = claim_statuses(pod);
    errs.extend(extended_claim_status(pod));
    validation::check("", "Pod", name, errs)
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// `validatePodResourceClaimStatuses`: each entry names an entry of `spec.resourceClaims`, at
/// most once, and a set `resourceClaimName` is a valid claim name (reported at
/// `resourceClaimName` since 1.36, kubernetes#137321; before it at `name`).
fn claim_statuses(pod: &Value) -> Vec<FieldError> {
    let path = "status.resourceClaimStatuses";
    let pod_claims = items(pod.at("/spec/resourceClaims"));
    let mut seen = HashSet::new();
    let mut errs = Vec::new();
    for (i, st) in items(pod.at("/status/resourceClaimStatuses"))
        .iter()
        .enumerate()
    {
        let claim = str_at(st, "name");
        if !pod_claims.iter().any(|c| str_at(c, "name") == claim) {
            errs.push(FieldError::invalid_str(
                format!("{path}[{i}].name"),
                claim,
                "must match the name of an entry in `spec.resourceClaims`",
            ));
        }
        if !seen.insert(claim) {
            errs.push(FieldError::duplicate(
                format!("{path}[{i}].name"),
                quote(claim),
            ));
        }
        if let Some(generated) = st.get("resourceClaimName").and_then(Value::as_str) {
            claim_name(
                &mut errs,
                format!("{path}[{i}].resourceClaimName"),
                generated,
            );
        }
    }
    errs
}

/// `validatePodExtendedResourceClaimStatus`: at least one request mapping; each names a
/// container or init container, one of that container's requests and a DNS-label request
/// name; no mapping twice; a valid `resourceClaimName`. Upstream reports a bad request name at
/// `status.extendedResourceClaimStatus.requestName` (its `fldPath`, not the mapping's index
/// path), and a repeated mapping as three `Duplicate value`s; both kept.
fn extended_claim_status(pod: &Value) -> Vec<FieldError> {
    let path = "status.extendedResourceClaimStatus";
    let Some(st) = pod
        .at("/status/extendedResourceClaimStatus")
        .filter(|s| !s.is_null())
    else {
        return Vec::new();
    };
    // Init containers first, then containers, as upstream fills its map.
    let mut containers: BTreeMap<&str, &Value> = BTreeMap::new();
    for list in ["initContainers", "containers"] {
        for c in items(pod.at(&format!("/spec/{list}"))) {
            containers.insert(str_at(c, "name"), c);
        }
    }
    let mut errs = Vec::new();
    let rm_path = format!("{path}.requestMappings");
    let mappings = items(st.get("requestMappings"));
    if mappings.is_empty() {
        errs.push(FieldError::required(
            &rm_path,
            "at least one request mapping is required",
        ));
    }
    let mut seen = HashSet::new();
    for (i, rm) in mappings.iter().enumerate() {
        let idx = format!("{rm_path}[{i}]");
        let (container, resource, request) = (
            str_at(rm, "containerName"),
            str_at(rm, "resourceName"),
            str_at(rm, "requestName"),
        );
        match containers.get(container) {
            Some(c) => {
                if c.at("/resources/requests")
                    .and_then(Value::as_object)
                    .is_none_or(|r| !r.contains_key(resource))
                {
                    errs.push(FieldError::invalid_str(
                        format!("{idx}.resourceName"),
                        resource,
                        "must match the extended resource name of an entry in spec.initContainers.resources.requests or spec.containers.resources.requests",
                    ));
                }
            }
            None => errs.push(FieldError::invalid_str(
                format!("{idx}.containerName"),
                container,
                "must match the name of an entry in spec.initContainers.name or spec.containers.name",
            )),
        }
        for m in validation::dns1123_label(request) {
            errs.push(FieldError::invalid_str(
                format!("{path}.requestName"),
                request,
                &m,
            ));
        }
        if !seen.insert((container, resource, request)) {
            errs.push(FieldError::duplicate(
                format!("{idx}.containerName"),
                quote(container),
            ));
            errs.push(FieldError::duplicate(
                format!("{idx}.resourceName"),
                quote(resource),
            ));
            errs.push(FieldError::duplicate(
                format!("{idx}.requestName"),
                quote(request),
            ));
        }
    }
    let claim = str_at(st, "resourceClaimName");
    if claim.is_empty() {
        errs.push(FieldError::required(
            format!("{path}.resourceClaimName"),
            "",
        ));
    } else {
        claim_name(&mut errs, format!("{path}.resourceClaimName"), claim);
    }
    errs
}

/// A claim name at `path` must be a DNS subdomain (`ValidateDNS1123Subdomain`).
fn claim_name(errs: &mut Vec<FieldError>, path: String, name: &str) {
    for m in validation::dns1123_subdomain(name) {
        errs.push(FieldError::invalid_str(path.clone(), name, &m));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    /// A pod with a template claim `gpu`, an init container `init` asking for
    /// `example.com/fpga` and a container `main` asking for `example.com/gpu`.
    fn pod(status: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            "initContainers": [{"name": "init", "image": "i",
                "resources": {"requests": {"example.com/fpga": "1"}, "limits": {"example.com/fpga": "1"}}}],
            "containers": [{"name": "main", "image": "i",
                "resources": {"requests": {"cpu": "1", "example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}}}]},
            "status": status})
    }

    fn message(status: Value) -> String {
        validate_update(&pod(status), "p").unwrap_err().message
    }

    fn extended(mappings: Value, claim: &str) -> Value {
        json!({"extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": claim}})
    }

    #[test]
    fn valid_statuses_are_accepted() {
        validate_update(&pod(json!({"phase": "Pending"})), "p").unwrap();
        validate_update(
            &pod(json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]})),
            "p",
        )
        .unwrap();
        // No generated name: nothing was made for the claim.
        validate_update(
            &pod(json!({"resourceClaimStatuses": [{"name": "gpu"}]})),
            "p",
        )
        .unwrap();
        validate_update(
            &pod(extended(
                json!([{"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-0-request-0"},
                       {"containerName": "init", "resourceName": "example.com/fpga", "requestName": "container-1-request-0"}]),
                "p-extended-resources-abcde",
            )),
            "p",
        )
        .unwrap();
        // A null status is no status.
        validate_update(&pod(json!({"extendedResourceClaimStatus": null})), "p").unwrap();
    }

    #[test]
    fn resource_claim_statuses_are_refused_with_upstream_messages() {
        assert_eq!(
            message(
                json!({"resourceClaimStatuses": [{"name": "other", "resourceClaimName": "x"}]})
            ),
            "Pod \"p\" is invalid: status.resourceClaimStatuses[0].name: Invalid value: \"other\": must match the name of an entry in `spec.resourceClaims`"
        );
        assert_eq!(
            message(
                json!({"resourceClaimStatuses": [{"name": "gpu"}, {"name": "gpu", "resourceClaimName": "x"}]})
            ),
            "Pod \"p\" is invalid: status.resourceClaimStatuses[1].name: Duplicate value: \"gpu\""
        );
        assert_eq!(
            message(
                json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "Bad_Name"}]})
            ),
            format!(
                "Pod \"p\" is invalid: status.resourceClaimStatuses[0].resourceClaimName: Invalid value: \"Bad_Name\": {SUBDOMAIN_MSG}"
            )
        );
    }

    #[test]
    fn extended_resource_claim_status_is_refused_with_upstream_messages() {
        assert_eq!(
            message(extended(json!([]), "c")),
            "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping is required"
        );
        assert_eq!(
            message(json!({"extendedResourceClaimStatus": {"resourceClaimName": "c"}})),
            "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping is required"
        );
        assert_eq!(
            message(extended(
                json!([{"containerName": "nope", "resourceName": "example.com/gpu", "requestName": "r"}]),
                "c"
            )),
            "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings[0].containerName: Invalid value: \"nope\": must match the name of an entry in spec.initContainers.name or spec.containers.name"
        );
        // The init container does not ask for the container's resource.
        assert_eq!(
            message(extended(
                json!([{"containerName": "init", "resourceName": "example.com/gpu", "requestName": "r"}]),
                "c"
            )),
            "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestMappings[0].resourceName: Invalid value: \"example.com/gpu\": must match the extended resource name of an entry in spec.initContainers.resources.requests or spec.containers.resources.requests"
        );
        assert_eq!(
            message(extended(
                json!([{"containerName": "main", "resourceName": "example.com/gpu", "requestName": "Request_0"}]),
                "c"
            )),
            format!(
                "Pod \"p\" is invalid: status.extendedResourceClaimStatus.requestName: Invalid value: \"Request_0\": {LABEL_MSG}"
            )
        );
        let m =
            json!({"containerName": "main", "resourceName": "example.com/gpu", "requestName": "r"});
        assert_eq!(
            message(extended(json!([m, m]), "c")),
            "Pod \"p\" is invalid: [status.extendedResourceClaimStatus.requestMappings[1].containerName: Duplicate value: \"main\", status.extendedResourceClaimStatus.requestMappings[1].resourceName: Duplicate value: \"example.com/gpu\", status.extendedResourceClaimStatus.requestMappings[1].requestName: Duplicate value: \"r\"]"
        );
        assert_eq!(
            message(extended(json!([m]), "")),
            "Pod \"p\" is invalid: status.extendedResourceClaimStatus.resourceClaimName: Required value"
        );
        assert_eq!(
            message(extended(json!([m]), "Claim")),
            format!(
                "Pod \"p\" is invalid: status.extendedResourceClaimStatus.resourceClaimName: Invalid value: \"Claim\": {SUBDOMAIN_MSG}"
            )
        );
    }

    /// Both checks run, the claim statuses' errors first, with one cause each.
    #[test]
    fn errors_of_both_fields_are_aggregated() {
        let e = validate_update(
            &pod(json!({"resourceClaimStatuses": [{"name": "x"}],
                "extendedResourceClaimStatus": {"requestMappings": [], "resourceClaimName": "c"}})),
            "p",
        )
        .unwrap_err();
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "Pod \"p\" is invalid: [status.resourceClaimStatuses[0].name: Invalid value: \"x\": must match the name of an entry in `spec.resourceClaims`, status.extendedResourceClaimStatus.requestMappings: Required value: at least one request mapping is required]"
        );
    }
}
