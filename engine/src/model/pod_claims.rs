//! A pod's `spec.resourceClaims` as the model compiles them with the pod: which claims it
//! names and where each comes from (a claim by name, or the one the resource-claim controller
//! made from a template). What the claims themselves hold, and their devices, is `dra`'s; this
//! is the part of a pod, so the model does not depend on DRA. Uses the model's errors only.

use super::ModelError;
use std::sync::Arc;

/// `spec.resourceClaims[]` of a pod as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodClaimInput {
    /// The pod's name for the claim (`spec.resourceClaims[].name`).
    pub name: String,
    /// `resourceClaimName`.
    pub claim: Option<String>,
    /// `resourceClaimTemplateName`.
    pub template: Option<String>,
    /// The pod's `status.resourceClaimStatuses` entry for `name`, if any: the claim made from the
    /// template (`None` inside: no claim is needed).
    pub made: Option<Option<String>>,
}

/// Where a pod's claim comes from (compiled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClaimSource {
    /// `resourceClaimName`.
    Named(Arc<str>),
    /// A template: the claim the controller made (`Some(None)`: none is needed), or `None` while
    /// the pod's status names none yet.
    Template(Option<Option<Arc<str>>>),
}

/// One of a pod's claims (compiled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaim {
    pub name: Arc<str>,
    pub source: ClaimSource,
}

/// Compile `spec.resourceClaims`: names unique and not empty, exactly one source each (the API
/// server's rules).
pub fn compile_claims(inputs: &[PodClaimInput]) -> Result<Box<[PodClaim]>, ModelError> {
    let mut out: Vec<PodClaim> = Vec::with_capacity(inputs.len());
    for c in inputs {
        if c.name.is_empty() || out.iter().any(|o| *o.name == *c.name) {
            return Err(ModelError::ResourceClaim(format!(
                "spec.resourceClaims: the claim name {:?} must be unique and not empty",
                c.name
            )));
        }
        let source = match (&c.claim, &c.template) {
            (Some(n), None) if !n.is_empty() => ClaimSource::Named(Arc::from(n.as_str())),
            (None, Some(t)) if !t.is_empty() => ClaimSource::Template(
                c.made
                    .as_ref()
                    .map(|m| m.as_deref().filter(|n| !n.is_empty()).map(Arc::from)),
            ),
            _ => {
                return Err(ModelError::ResourceClaim(format!(
                    "spec.resourceClaims[{:?}]: exactly one of resourceClaimName and \
                     resourceClaimTemplateName must be set",
                    c.name
                )));
            }
        };
        out.push(PodClaim {
            name: Arc::from(c.name.as_str()),
            source,
        });
    }
    Ok(out.into())
}
