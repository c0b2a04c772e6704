//! Which admission plugins run: kube-apiserver's `--disable-admission-plugins` as
//! [`crate::SimConfig::disable_admission_plugins`] takes it. Three of the plugins that are on by
//! default change what kube-sim does and can be switched off: `Priority` (see `scheduling.rs`),
//! `DefaultStorageClass` and `PersistentVolumeClaimResize` (see `storage/pvc.rs`). The other names
//! kube-apiserver registers are accepted and change nothing, kube-sim not running those plugins;
//! any other name is refused with kube-apiserver's own message (`AdmissionOptions.Validate`).

/// The admission plugins kube-apiserver v1.35 registers (`kube-apiserver --help`,
/// `--admission-control`), in its alphabetical order.
const REGISTERED: &[&str] = &[
    "AlwaysAdmit",
    "AlwaysDeny",
    "AlwaysPullImages",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "ClusterTrustBundleAttest",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "DenyServiceExternalIPs",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "ImagePolicyWebhook",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "NamespaceAutoProvision",
    "NamespaceExists",
    "NamespaceLifecycle",
    "NodeDeclaredFeatureValidator",
    "NodeRestriction",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "PodNodeSelector",
    "PodSecurity",
    "PodTolerationRestriction",
    "PodTopologyLabels",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
];

/// The simulated admission plugins that are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Admission {
    /// `Priority`: pods get their priority class's `value` and `preemptionPolicy` (or the
    /// global default's, or 0 and `PreemptLowerPriority`); a class that does not exist, or a
    /// `spec.priority` / `spec.preemptionPolicy` that differs from the computed one, is a 403;
    /// updates keep the stored priority; a second `globalDefault` class is a 403.
    pub priority: bool,
    /// `DefaultStorageClass`: a claim without `storageClassName` gets the default class.
    pub default_storage_class: bool,
    /// `PersistentVolumeClaimResize`: growing a claim needs a class that allows expansion.
    pub pvc_resize: bool,
}

impl Default for Admission {
    fn default() -> Self {
        Self {
            priority: true,
            default_storage_class: true,
            pvc_resize: true,
        }
    }
}

impl Admission {
    /// The default plugins without `disabled` (names as `--disable-admission-plugins` takes
    /// them; empty entries ignored); an unknown name is kube-apiserver's start error.
    pub(crate) fn without(disabled: &[String]) -> Result<Self, String> {
        let mut a = Self::default();
        for name in disabled.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
            match name {
                "Priority" => a.priority = false,
                "DefaultStorageClass" => a.default_storage_class = false,
                "PersistentVolumeClaimResize" => a.pvc_resize = false,
                n if REGISTERED.contains(&n) => {}
                n => return Err(format!("disable-admission-plugins plugin {n:?} is unknown")),
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabling_known_and_unknown_plugins() {
        let names = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(Admission::without(&[]).unwrap(), Admission::default());
        let a = Admission::without(&names(&[
            "ServiceAccount",
            "TaintNodesByCondition",
            " Priority",
            "",
        ]))
        .unwrap();
        assert!(!a.priority && a.default_storage_class && a.pvc_resize);
        let a = Admission::without(&names(&[
            "DefaultStorageClass",
            "PersistentVolumeClaimResize",
        ]))
        .unwrap();
        assert!(a.priority && !a.default_storage_class && !a.pvc_resize);
        assert_eq!(
            Admission::without(&names(&["Priority", "priority"])).unwrap_err(),
            "disable-admission-plugins plugin \"priority\" is unknown"
        );
    }
}
