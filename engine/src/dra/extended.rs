//! Extended resources backed by DRA (`DRAExtendedResource`, KEP-5004; kube-scheduler's
//! `extendeddynamicresources.go`): a pod asking for `example.com/gpu: 2` on a node that does not
//! offer `example.com/gpu` (allocatable 0) gets two devices of the DeviceClass whose
//! `extendedResourceName` it is (or of the class `<c>` for `deviceclass.resource.kubernetes.io/<c>`),
//! through a ResourceClaim the scheduler makes for it (upstream's special claim): one
//! `ExactCount` request per container and resource (`container-<i>-request-<j>`), owned by the pod,
//! annotated `resource.kubernetes.io/extended-resource-claim: "true"`, created in PreBind with
//! its allocation, and named in the pod's `status.extendedResourceClaimStatus` with which request
//! serves which container.
//!
//! Where a node offers the resource itself (a device plugin, allocatable > 0), NodeResourcesFit
//! counts it there and the claim has no request for it: the claim is made per node
//! ([`Extended::for_node`]). Until PreBind creates it, the claim lives only in the engine under a
//! name no real claim can have ([`special_name`]); the devices the driver decides for it are
//! assumed there and move to the real claim when its creation is seen (`Dra::insert`).
//!
//! Owns the request layout (upstream's `createRequestsAndMappings`) and the per-node choice;
//! the claims themselves are `dra`'s.

use super::allocator::{ClaimState, PodClaim};
use crate::model::{ExtendedRequest, Slot};
use std::borrow::Cow;
use std::sync::Arc;

/// The annotation marking the claim made for a pod's extended resources.
pub const EXTENDED_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// At most this many distinct extended resources per pod are provided by DRA (a bit each).
pub const MAX_RESOURCES: usize = 64;

/// The engine's name for the claim of pod `uid` before it exists (not a valid object name, so
/// no real claim has it).
pub fn special_name(pod_uid: &str) -> Arc<str> {
    Arc::from(format!("<extended-resources>/{pod_uid}").as_str())
}

/// Is `name` the engine's name of a claim not created yet?
pub fn is_special(name: &str) -> bool {
    name.starts_with("<extended-resources>/")
}

/// One device request of the claim: `container-<i>-request-<j>`, `ExactCount` `count` of
/// `class`, serving `resource` (its index in [`Extended::resources`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    pub name: Arc<str>,
    pub class: Arc<str>,
    pub count: i64,
    pub resource: u8,
}

impl ClaimRequest {
    /// The request as the claim's spec has it (`exactly`, `ExactCount`).
    pub fn input(&self) -> super::RequestInput {
        super::RequestInput {
            name: self.name.to_string(),
            exactly: Some(super::ExactInput {
                class: self.class.to_string(),
                count: self.count,
                ..Default::default()
            }),
            first_available: Vec::new(),
        }
    }
}

/// `status.extendedResourceClaimStatus.requestMappings[]`: which request serves a container's
/// request for a resource (its index in [`Extended::resources`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub container: Arc<str>,
    pub resource_name: Arc<str>,
    pub request: Arc<str>,
    pub resource: u8,
}

/// What the adapter creates in PreBind: the claim's requests and the pod's request mappings
/// for the node chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaim {
    pub requests: Vec<ClaimRequest>,
    pub mappings: Vec<Mapping>,
}

/// A pod's extended resources a class provides, resolved when it is handed off: the special
/// claim is the last of `PodClaims::claims`, with every resource's requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Extended {
    /// The resources a class provides (sorted by name): their slot in the pod's requests, so a
    /// node's allocatable tells whether the node offers them itself.
    pub resources: Box<[(Slot, Arc<str>)]>,
    /// The claim's requests in upstream's order (by name), each with its resource.
    pub requests: Box<[ClaimRequest]>,
    pub mappings: Box<[Mapping]>,
}

impl Extended {
    /// Every resource provided by devices.
    pub fn all(&self) -> u64 {
        if self.resources.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.resources.len()) - 1
        }
    }

    /// Which resources DRA provides on a node: those whose allocatable there is 0
    /// (`alloc(slot)`), as upstream's `filterExtendedResources`.
    pub fn provided(&self, alloc: impl Fn(Slot) -> i64) -> u64 {
        let mut mask = 0u64;
        for (k, &(slot, _)) in self.resources.iter().enumerate() {
            if alloc(slot) == 0 {
                mask |= 1 << k;
            }
        }
        mask
    }

    /// Is `slot` one of the resources DRA provides on a node whose allocatable of it is
    /// `allocatable`? (NodeResourcesFit leaves those to DynamicResources.)
    pub fn defers(&self, slot: Slot, allocatable: i64) -> bool {
        allocatable == 0 && self.resources.iter().any(|&(s, _)| s == slot)
    }

    /// The pod's claims on a node where DRA provides the resources in `mask`: `claims` (the
    /// special claim last, with every resource) as they are when it provides all of them,
    /// without the special claim when none, else with the special claim's requests for `mask`
    /// only (allocates: a node offering some but not all of them is rare).
    pub fn for_node<'a>(&self, claims: &'a [PodClaim], mask: u64) -> Cow<'a, [PodClaim]> {
        let n = claims.len();
        if mask == self.all() || n == 0 {
            return Cow::Borrowed(claims);
        }
        if mask == 0 {
            return Cow::Borrowed(&claims[..n - 1]);
        }
        let mut out = claims[..n - 1].to_vec();
        let special = &claims[n - 1];
        if let ClaimState::Unallocated {
            requests,
            constraints,
        } = &special.state
        {
            let kept: Box<[_]> = requests
                .iter()
                .zip(self.requests.iter())
                .filter(|(_, r)| mask & (1 << r.resource) != 0)
                .map(|(c, _)| c.clone())
                .collect();
            out.push(PodClaim {
                state: ClaimState::Unallocated {
                    requests: kept,
                    constraints: constraints.clone(),
                },
                ..special.clone()
            });
        }
        Cow::Owned(out)
    }

    /// What PreBind creates on a node where DRA provides `mask`.
    pub fn new_claim(&self, mask: u64) -> NewClaim {
        NewClaim {
            requests: self
                .requests
                .iter()
                .filter(|r| mask & (1 << r.resource) != 0)
                .cloned()
                .collect(),
            mappings: self
                .mappings
                .iter()
                .filter(|m| mask & (1 << m.resource) != 0)
                .cloned()
                .collect(),
        }
    }
}

/// Upstream's `createRequestsAndMappings` for the resources `classes` provides (in the order
/// given, sorted by name): per resource, a request for each long-lived container (a regular
/// container or a sidecar) asking for it, and for the init containers that run before them one
/// request, the largest they need beyond what the long-lived containers after them will hold
/// (each reuses those devices first); all requests sorted by name.
pub fn requests_and_mappings(
    pod: &[ExtendedRequest],
    classes: &[(Arc<str>, Arc<str>)],
) -> (Vec<ClaimRequest>, Vec<Mapping>) {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for (k, (resource, class)) in classes.iter().enumerate() {
        let k = k as u8;
        let of: Vec<&ExtendedRequest> = pod.iter().filter(|r| r.resource == *resource).collect();
        let request = |r: &ExtendedRequest, count: i64| ClaimRequest {
            name: Arc::from(r.request_name().as_str()),
            class: class.clone(),
            count,
            resource: k,
        };
        let mapping = |r: &ExtendedRequest, request: &Arc<str>| Mapping {
            container: r.container.clone(),
            resource_name: resource.clone(),
            request: request.clone(),
            resource: k,
        };
        let long: Vec<(&ExtendedRequest, ClaimRequest)> = of
            .iter()
            .filter(|r| !r.short_lived)
            .map(|r| (*r, request(r, r.count)))
            .collect();
        let mut long_mappings: Vec<Mapping> =
            long.iter().map(|(r, q)| mapping(r, &q.name)).collect();
        let mut short_mappings: Vec<Mapping> = Vec::new();
        let mut short_names: Vec<Arc<str>> = Vec::new();
        let mut max_short: Option<ClaimRequest> = None;
        for r in of.iter().filter(|r| r.short_lived) {
            // The long-lived containers after it, in order, hold devices it may use first.
            let mut sum = 0;
            for (_, q) in long.iter().filter(|(l, _)| l.index > r.index) {
                sum += q.count;
                short_mappings.push(mapping(r, &q.name));
                if sum >= r.count {
                    break;
                }
            }
            // What they do not hold, it asks for itself.
            if sum < r.count {
                let q = request(r, r.count - sum);
                short_mappings.push(mapping(r, &q.name));
                short_names.push(q.name.clone());
                if max_short.as_ref().is_none_or(|m| m.count < q.count) {
                    max_short = Some(q);
                }
            }
        }
        if let Some(max) = &max_short
            && short_names.len() > 1
        {
            for m in &mut short_mappings {
                if m.request != max.name && short_names.contains(&m.request) {
                    m.request = max.name.clone();
                }
            }
        }
        requests.extend(max_short);
        requests.extend(long.into_iter().map(|(_, q)| q));
        mappings.append(&mut long_mappings);
        mappings.append(&mut short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(container: &str, index: u32, short: bool, count: i64) -> ExtendedRequest {
        ExtendedRequest {
            container: Arc::from(container),
            index,
            short_lived: short,
            resource: Arc::from("example.com/gpu"),
            ridx: 0,
            count,
        }
    }

    fn gpu() -> Vec<(Arc<str>, Arc<str>)> {
        vec![(Arc::from("example.com/gpu"), Arc::from("gpu-class"))]
    }

    fn names(r: &[ClaimRequest]) -> Vec<(String, i64)> {
        r.iter().map(|r| (r.name.to_string(), r.count)).collect()
    }

    fn maps(m: &[Mapping]) -> Vec<(String, String)> {
        m.iter()
            .map(|m| (m.container.to_string(), m.request.to_string()))
            .collect()
    }

    #[test]
    fn one_request_per_long_lived_container() {
        let (r, m) = requests_and_mappings(&[req("a", 0, false, 1), req("b", 1, false, 2)], &gpu());
        assert_eq!(
            names(&r),
            [
                ("container-0-request-0".into(), 1),
                ("container-1-request-0".into(), 2)
            ]
        );
        assert_eq!(
            maps(&m),
            [
                ("a".into(), "container-0-request-0".into()),
                ("b".into(), "container-1-request-0".into())
            ]
        );
    }

    #[test]
    fn init_containers_reuse_the_devices_of_the_containers_after_them() {
        // init (2) before main (1): reuses main's device and asks for one more.
        let (r, m) =
            requests_and_mappings(&[req("init", 0, true, 2), req("main", 1, false, 1)], &gpu());
        assert_eq!(
            names(&r),
            [
                ("container-0-request-0".into(), 1),
                ("container-1-request-0".into(), 1)
            ]
        );
        assert_eq!(
            maps(&m),
            [
                ("main".into(), "container-1-request-0".into()),
                ("init".into(), "container-1-request-0".into()),
                ("init".into(), "container-0-request-0".into()),
            ]
        );
        // Enough after it: no request of its own.
        let (r, _) =
            requests_and_mappings(&[req("init", 0, true, 1), req("main", 1, false, 3)], &gpu());
        assert_eq!(names(&r), [("container-1-request-0".into(), 3)]);
    }

    #[test]
    fn init_containers_share_the_largest_of_their_requests() {
        let (r, m) = requests_and_mappings(&[req("i0", 0, true, 1), req("i1", 1, true, 3)], &gpu());
        assert_eq!(names(&r), [("container-1-request-0".into(), 3)]);
        assert_eq!(
            maps(&m),
            [
                ("i0".into(), "container-1-request-0".into()),
                ("i1".into(), "container-1-request-0".into())
            ]
        );
    }

    #[test]
    fn a_node_offering_a_resource_leaves_its_requests_out() {
        let mut other = req("a", 0, false, 1);
        other.resource = Arc::from("example.com/nic");
        let classes = vec![
            (Arc::from("example.com/gpu"), Arc::from("gpu-class")),
            (Arc::from("example.com/nic"), Arc::from("nic-class")),
        ];
        let (requests, mappings) = requests_and_mappings(&[req("a", 0, false, 2), other], &classes);
        let e = Extended {
            resources: vec![(10, classes[0].0.clone()), (11, classes[1].0.clone())].into(),
            requests: requests.into(),
            mappings: mappings.into(),
        };
        assert_eq!(e.all(), 0b11);
        assert_eq!(e.provided(|s| if s == 10 { 0 } else { 4 }), 0b01);
        let c = e.new_claim(0b10);
        assert_eq!(c.requests.len(), 1);
        assert_eq!(&*c.requests[0].class, "nic-class");
        assert_eq!(c.mappings.len(), 1);
        assert!(e.defers(10, 0) && !e.defers(10, 1) && !e.defers(12, 0));
        assert!(is_special(&special_name("u1")));
    }
}
