//! A pod's requests for extended resources that Dynamic Resource Allocation may provide
//! (`DRAExtendedResource`, KEP-5004): each container's request for a resource named as an
//! extended resource (`example.com/gpu`) or a class's implicit name
//! (`deviceclass.resource.kubernetes.io/<class>`), kept per container because the claim the
//! scheduler makes for them has one device request per container and resource
//! (`container-<i>-request-<j>`). Whether a DeviceClass provides such a resource, and on which
//! nodes, is decided when the pod is handed off (`dra`); this is only the part of the pod.
//! Pods without such requests carry nothing (`None`).

use super::ContainerInput;
use crate::model::quantity::parse_scaled;
use std::sync::Arc;

/// The implicit extended resource name of every DeviceClass: this prefix and the class name.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// `schedutil.IsDRAExtendedResourceName`: an extended resource name (has a domain outside
/// `kubernetes.io`, and `requests.<name>` is a qualified name), or a class's implicit name.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    if name.starts_with(DEVICE_CLASS_PREFIX) {
        return true;
    }
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native && !name.starts_with("requests.")
}

/// One container's request for one such resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtendedRequest {
    /// The container's name.
    pub container: Arc<str>,
    /// Its index in init containers followed by containers.
    pub index: u32,
    /// An init container that is not a sidecar: it runs before the others and may reuse their
    /// devices (upstream's short-lived containers).
    pub short_lived: bool,
    pub resource: Arc<str>,
    /// The resource's index among the container's request names, sorted (the `<j>` of the
    /// request name).
    pub ridx: u32,
    /// The whole number of devices asked for.
    pub count: i64,
}

impl ExtendedRequest {
    /// Upstream's device request name for it.
    pub fn request_name(&self) -> String {
        format!("container-{}-request-{}", self.index, self.ridx)
    }
}

/// The pod's extended resource requests (non-zero, whole numbers, `is_dra_extended_resource_name`),
/// in container order; `None` when there are none. A quantity that is not a whole number is
/// left out, as upstream's `AsInt64` does (the API server rejects such requests anyway).
pub fn compile_extended(
    init: &[ContainerInput],
    containers: &[ContainerInput],
) -> Option<Arc<[ExtendedRequest]>> {
    let any = init
        .iter()
        .chain(containers)
        .flat_map(|c| &c.requests)
        .any(|(n, _)| is_dra_extended_resource_name(n));
    if !any {
        return None;
    }
    let mut out = Vec::new();
    for (index, c) in init.iter().chain(containers).enumerate() {
        let short_lived = index < init.len() && !c.restartable;
        let mut names: Vec<&str> = c.requests.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        for (name, q) in &c.requests {
            if !is_dra_extended_resource_name(name) {
                continue;
            }
            // Whole numbers only (`AsInt64`): milli-units that divide by 1000.
            let Ok(milli) = parse_scaled(name, q, 1000) else {
                continue;
            };
            if milli <= 0 || milli % 1000 != 0 {
                continue;
            }
            let count = milli / 1000;
            let ridx = names.iter().position(|n| n == name).unwrap_or(0) as u32;
            out.push(ExtendedRequest {
                container: Arc::from(c.name.as_str()),
                index: index as u32,
                short_lived,
                resource: Arc::from(name.as_str()),
                ridx,
                count,
            });
        }
    }
    (!out.is_empty()).then(|| out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, requests: &[(&str, &str)], restartable: bool) -> ContainerInput {
        ContainerInput {
            name: name.into(),
            requests: requests
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            restartable,
            ..Default::default()
        }
    }

    #[test]
    fn names_dra_may_provide() {
        assert!(is_dra_extended_resource_name("example.com/gpu"));
        assert!(is_dra_extended_resource_name(
            "deviceclass.resource.kubernetes.io/gpu.example.com"
        ));
        for native in [
            "cpu",
            "memory",
            "hugepages-2Mi",
            "kubernetes.io/foo",
            "requests.example.com/gpu",
        ] {
            assert!(!is_dra_extended_resource_name(native), "{native}");
        }
    }

    #[test]
    fn requests_per_container_with_upstreams_indices() {
        let init = [
            container("setup", &[("example.com/gpu", "2"), ("cpu", "1")], false),
            container("side", &[("example.com/gpu", "1"), ("b.io/y", "0.5")], true),
        ];
        let main = [container(
            "main",
            &[("memory", "1Gi"), ("example.com/gpu", "1"), ("a.io/x", "0")],
            false,
        )];
        let got = compile_extended(&init, &main).unwrap();
        let names: Vec<_> = got
            .iter()
            .map(|r| (&*r.container, r.request_name(), r.short_lived, r.count))
            .collect();
        // Request names sort: "a.io/x" < "example.com/gpu" < "memory"; zero requests are left out.
        assert_eq!(
            names,
            [
                ("setup", "container-0-request-1".to_string(), true, 2),
                ("side", "container-1-request-1".to_string(), false, 1),
                ("main", "container-2-request-1".to_string(), false, 1),
            ]
        );
        assert!(compile_extended(&[], &[container("c", &[("cpu", "1")], false)]).is_none());
    }
}
