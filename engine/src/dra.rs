//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the ResourceClaims pods name, kept by the
//! driver (single writer), and the resolution of a pod's claims when it is handed off
//! ([`PodClaims`], carried by the task to the `DynamicResources` filter), as kube-scheduler's
//! DynamicResources plugin sees them in PreEnqueue and PreFilter.
//!
//! A pod names each claim directly (`resourceClaimName`) or through a template, for which the
//! resource-claim controller makes a claim owned by the pod and records its name in the pod's
//! `status.resourceClaimStatuses` (`resourceclaim.Name`). A claim not made yet, missing, being
//! deleted, or made for another pod holds the pod back with upstream's text.
//!
//! **Devices are not allocated yet.** Until they are, and whenever the profile switches DRA off
//! (`predicate.DynamicResourceAllocationEnable: false`), a pod with claims is never bound: it
//! stays pending with a `PodScheduled=False` condition that names the claim and says why, and
//! takes nothing from other pods (the filter rejects every node before any resource is counted).
//!
//! Owns only this view of the claims; it touches nothing else. A bad object is reported without
//! changing how others are handled.

use crate::event::{self, Events};
use crate::model::{Interner, ModelError};
use std::collections::HashMap;
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

/// A ResourceClaim as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimInput {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The controller owner's UID (`metadata.ownerReferences[controller=true]`).
    pub owner_uid: Option<String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.allocation` is set.
    pub allocated: bool,
    /// `status.reservedFor[].uid`.
    pub reserved_for: Vec<String>,
}

/// A change to the ResourceClaims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraInput {
    Claim(ClaimInput),
    ClaimDelete {
        namespace: String,
        name: String,
    },
    /// A relist: the complete set.
    ClaimReset(Vec<ClaimInput>),
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

/// Why no node can take a pod because of its claims. Strings are interned ids (`Interner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Blocked {
    /// The profile switches DRA off: (the pod's claim name).
    SwitchedOff(u32),
    /// A template's claim is not made yet: (`<namespace>/<pod>`).
    NotCreated(u32),
    /// `resourceclaim.resource.k8s.io "X" not found`.
    Missing(u32),
    /// `resourceclaim "X" is being deleted`.
    Deleting(u32),
    /// A template's claim owned by someone else: (`<namespace>/<claim>`, `<namespace>/<pod>`).
    NotOwner(u32, u32),
    /// The claim exists but devices are not allocated by this scheduler yet: (claim name).
    NotAllocated(u32),
}

impl Blocked {
    /// Upstream's text (kube-scheduler's DynamicResources PreEnqueue), and Magma's where it has
    /// no counterpart (the switch, allocation).
    pub fn message(&self, names: &Interner) -> String {
        let n = |id: &u32| names.resolve(*id).to_owned();
        match self {
            Blocked::SwitchedOff(c) => format!(
                "pod resource claim \"{}\": dynamic resource allocation is switched off in this \
                 scheduler profile (predicate.DynamicResourceAllocationEnable: false)",
                n(c)
            ),
            Blocked::NotCreated(p) => format!("pod \"{}\": ResourceClaim not created yet", n(p)),
            Blocked::Missing(c) => format!("resourceclaim.resource.k8s.io \"{}\" not found", n(c)),
            Blocked::Deleting(c) => format!("resourceclaim \"{}\" is being deleted", n(c)),
            Blocked::NotOwner(c, p) => format!(
                "ResourceClaim {} was not created for pod {} (pod is not owner)",
                n(c),
                n(p)
            ),
            Blocked::NotAllocated(c) => format!(
                "resourceclaim \"{}\" cannot be allocated: this scheduler does not allocate \
                 devices (DynamicResources)",
                n(c)
            ),
        }
    }

    /// What can unblock it: a claim change (made, allocated, deleted), or a new profile (the
    /// switch), which requeues every waiting pod anyway.
    pub fn wake(&self) -> Events {
        event::CLAIM_CHANGED
    }
}

/// A pod's claims, resolved when it is handed off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodClaims {
    pub blocked: Option<Blocked>,
}

#[derive(Debug, Clone)]
struct Claim {
    owner: Option<Arc<str>>,
    deleting: bool,
    allocated: bool,
}

/// The ResourceClaims (see the module doc).
#[derive(Debug, Default)]
pub struct Claims {
    claims: HashMap<(Arc<str>, Arc<str>), Claim>,
}

fn key(ns: &str, name: &str) -> (Arc<str>, Arc<str>) {
    (Arc::from(ns), Arc::from(name))
}

impl Claims {
    /// Apply a change. Returns the events it amounts to.
    pub fn apply(&mut self, input: DraInput) -> Events {
        match input {
            DraInput::Claim(c) => self.insert(c),
            DraInput::ClaimDelete { namespace, name } => {
                self.claims.remove(&key(&namespace, &name));
            }
            DraInput::ClaimReset(all) => {
                self.claims.clear();
                for c in all {
                    self.insert(c);
                }
            }
        }
        event::CLAIM_CHANGED
    }

    fn insert(&mut self, c: ClaimInput) {
        self.claims.insert(
            key(&c.namespace, &c.name),
            Claim {
                owner: c.owner_uid.filter(|o| !o.is_empty()).map(Arc::from),
                deleting: c.deleting,
                allocated: c.allocated,
            },
        );
    }

    /// Resolve a pod's claims (`foreachPodResourceClaim`): the first that holds the pod back.
    /// `enabled`: the profile's DRA switch.
    pub fn resolve(
        &self,
        namespace: &str,
        pod_uid: &str,
        pod_name: &str,
        claims: &[PodClaim],
        enabled: bool,
        interner: &mut Interner,
    ) -> PodClaims {
        let blocked = claims.iter().find_map(|pc| {
            if !enabled {
                return Some(Blocked::SwitchedOff(interner.intern(&pc.name)));
            }
            let (name, must_own) = match &pc.source {
                ClaimSource::Named(n) => (n.clone(), false),
                ClaimSource::Template(None) => {
                    let pod = interner.intern(&format!("{namespace}/{pod_name}"));
                    return Some(Blocked::NotCreated(pod));
                }
                // The controller decided no claim is needed.
                ClaimSource::Template(Some(None)) => return None,
                ClaimSource::Template(Some(Some(n))) => (n.clone(), true),
            };
            let Some(c) = self.claims.get(&key(namespace, &name)) else {
                return Some(Blocked::Missing(interner.intern(&name)));
            };
            if c.deleting {
                return Some(Blocked::Deleting(interner.intern(&name)));
            }
            if must_own && c.owner.as_deref() != Some(pod_uid) {
                return Some(Blocked::NotOwner(
                    interner.intern(&format!("{namespace}/{name}")),
                    interner.intern(&format!("{namespace}/{pod_name}")),
                ));
            }
            // Allocated or not, no device is allocated or reserved by this scheduler yet (the
            // module doc): binding the pod would run it without its devices.
            let _ = c.allocated;
            Some(Blocked::NotAllocated(interner.intern(&name)))
        });
        PodClaims { blocked }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, claim: &str) -> PodClaimInput {
        PodClaimInput {
            name: name.into(),
            claim: Some(claim.into()),
            ..Default::default()
        }
    }

    fn templated(name: &str, made: Option<Option<&str>>) -> PodClaimInput {
        PodClaimInput {
            name: name.into(),
            template: Some("tpl".into()),
            made: made.map(|m| m.map(str::to_owned)),
            ..Default::default()
        }
    }

    fn claim(name: &str, owner: Option<&str>) -> ClaimInput {
        ClaimInput {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            owner_uid: owner.map(str::to_owned),
            ..Default::default()
        }
    }

    fn message(claims: &Claims, inputs: &[PodClaimInput], enabled: bool) -> Option<String> {
        let mut interner = Interner::default();
        let compiled = compile_claims(inputs).unwrap();
        let r = claims.resolve("ns", "pod-uid", "p", &compiled, enabled, &mut interner);
        r.blocked.map(|b| b.message(&interner))
    }

    #[test]
    fn every_way_a_claim_holds_a_pod_back() {
        let mut claims = Claims::default();
        assert_eq!(
            message(&claims, &[named("gpu", "c1")], true).as_deref(),
            Some("resourceclaim.resource.k8s.io \"c1\" not found")
        );
        assert_eq!(
            message(&claims, &[templated("gpu", None)], true).as_deref(),
            Some("pod \"ns/p\": ResourceClaim not created yet")
        );
        assert_eq!(
            message(&claims, &[templated("gpu", Some(None))], true),
            None
        );
        claims.apply(DraInput::Claim(claim("c1", None)));
        claims.apply(DraInput::Claim(claim("p-gpu-x", Some("other"))));
        assert_eq!(
            message(&claims, &[templated("gpu", Some(Some("p-gpu-x")))], true).as_deref(),
            Some("ResourceClaim ns/p-gpu-x was not created for pod ns/p (pod is not owner)")
        );
        assert!(
            message(&claims, &[named("gpu", "c1")], true)
                .unwrap()
                .starts_with("resourceclaim \"c1\" cannot be allocated")
        );
        assert!(
            message(&claims, &[named("gpu", "c1")], false)
                .unwrap()
                .contains("\"gpu\": dynamic resource allocation is switched off")
        );
        let mut deleting = claim("c1", None);
        deleting.deleting = true;
        claims.apply(DraInput::Claim(deleting));
        assert_eq!(
            message(&claims, &[named("gpu", "c1")], true).as_deref(),
            Some("resourceclaim \"c1\" is being deleted")
        );
        claims.apply(DraInput::ClaimReset(vec![]));
        assert!(message(&claims, &[named("gpu", "c1")], true).is_some());
    }

    #[test]
    fn the_api_servers_rules_for_pod_claims() {
        assert!(compile_claims(&[named("a", "x"), named("a", "y")]).is_err());
        assert!(
            compile_claims(&[PodClaimInput {
                name: "a".into(),
                ..Default::default()
            }])
            .is_err()
        );
        assert!(
            compile_claims(&[PodClaimInput {
                name: "a".into(),
                claim: Some("x".into()),
                template: Some("t".into()),
                made: None,
            }])
            .is_err()
        );
        assert_eq!(compile_claims(&[]).unwrap().len(), 0);
    }
}
