//! PodDisruptionBudgets (`policy/v1`), as preemption reads them: which pods each protects, and
//! how many disruptions its status still allows (the disruption controller's
//! `status.disruptionsAllowed`), kept by the driver (single writer).
//!
//! Owns only this view; it touches nothing else. A budget whose selector cannot be compiled is
//! reported and ignored, without changing how others are read.

use crate::model::{
    Interner, LabelSelector, LabelSelectorInput, ModelError, PodInfo, compile_selector,
};
use std::collections::HashMap;
use std::sync::Arc;

/// A PodDisruptionBudget as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PdbInput {
    pub namespace: String,
    pub name: String,
    /// `spec.selector`; `None` or empty selects nothing (as for a PDB upstream).
    pub selector: Option<LabelSelectorInput>,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
    /// `status.disruptedPods`: pods already being disrupted (names), not counted again.
    pub disrupted: Vec<String>,
}

/// A change to the PodDisruptionBudgets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdbChange {
    Apply(PdbInput),
    Delete {
        namespace: String,
        name: String,
    },
    /// A relist: the complete set.
    Reset(Vec<PdbInput>),
}

#[derive(Debug, Clone)]
struct Pdb {
    namespace: u32,
    selector: LabelSelector,
    allowed: i32,
    disrupted: Box<[Arc<str>]>,
}

/// The budgets (see the module doc).
#[derive(Debug, Default)]
pub struct Pdbs {
    pdbs: HashMap<(Arc<str>, Arc<str>), Pdb>,
}

impl Pdbs {
    /// Apply a change; the budgets it could not compile.
    pub fn apply(&mut self, change: PdbChange, interner: &mut Interner) -> Vec<ModelError> {
        let mut errors = Vec::new();
        match change {
            PdbChange::Apply(p) => errors.extend(self.insert(p, interner).err()),
            PdbChange::Delete { namespace, name } => {
                self.pdbs
                    .remove(&(Arc::from(namespace.as_str()), Arc::from(name.as_str())));
            }
            PdbChange::Reset(all) => {
                self.pdbs.clear();
                for p in all {
                    errors.extend(self.insert(p, interner).err());
                }
            }
        }
        errors
    }

    fn insert(&mut self, p: PdbInput, interner: &mut Interner) -> Result<(), ModelError> {
        let key = (Arc::from(p.namespace.as_str()), Arc::from(p.name.as_str()));
        // A nil or empty selector matches nothing.
        let empty = p
            .selector
            .as_ref()
            .is_none_or(|s| s.match_labels.is_empty() && s.match_expressions.is_empty());
        let selector = if empty {
            compile_selector(None, interner)?
        } else {
            compile_selector(p.selector.as_ref(), interner)?
        };
        self.pdbs.insert(
            key,
            Pdb {
                namespace: interner.intern(&p.namespace),
                selector,
                allowed: p.disruptions_allowed,
                disrupted: p.disrupted.iter().map(|n| Arc::from(n.as_str())).collect(),
            },
        );
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.pdbs.is_empty()
    }

    /// Split `pods` (name, how others see it), in their order, into those whose eviction would
    /// violate a budget and those it would not (kube-scheduler's `filterPodsWithPDBViolation`):
    /// each budget's allowance is used up by the pods before; a pod its budget already lists
    /// as disrupted uses none. Returns, per pod, whether it violates.
    pub fn violations<'a>(
        &self,
        pods: impl IntoIterator<Item = (&'a str, &'a PodInfo)>,
    ) -> Vec<bool> {
        let budgets: Vec<&Pdb> = self.pdbs.values().collect();
        let mut allowed: Vec<i32> = budgets.iter().map(|b| b.allowed).collect();
        pods.into_iter()
            .map(|(name, info)| {
                // Upstream: a pod without labels matches no budget. Labels kept as strings
                // (`PodInfo::raw`) have no key a budget's selector reads, but they are labels.
                if info.labels.is_empty() && info.raw.is_empty() {
                    return false;
                }
                let mut violated = false;
                for (i, b) in budgets.iter().enumerate() {
                    if b.namespace != info.namespace
                        || !b.selector.matches(&info.labels)
                        || b.disrupted.iter().any(|d| &**d == name)
                    {
                        continue;
                    }
                    allowed[i] -= 1;
                    violated |= allowed[i] < 0;
                }
                violated
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::compile_labels;

    fn info(interner: &mut Interner, ns: &str, labels: &[(&str, &str)]) -> PodInfo {
        let l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PodInfo {
            namespace: interner.intern(ns),
            labels: compile_labels(&l, interner),
            ..PodInfo::default()
        }
    }

    fn pdb(ns: &str, app: Option<&str>, allowed: i32, disrupted: &[&str]) -> PdbInput {
        PdbInput {
            namespace: ns.into(),
            name: format!("pdb-{}", app.unwrap_or("none")),
            selector: app.map(|a| LabelSelectorInput {
                match_labels: vec![("app".into(), a.into())],
                match_expressions: vec![],
            }),
            disruptions_allowed: allowed,
            disrupted: disrupted.iter().map(|d| d.to_string()).collect(),
        }
    }

    /// kube-scheduler's rule: each match uses one of the budget's allowance, a pod already
    /// disrupted uses none, and a pod past the allowance violates it; budgets of another
    /// namespace or with no selector match nothing.
    #[test]
    fn budgets_are_used_up_in_order() {
        let mut i = Interner::default();
        let mut pdbs = Pdbs::default();
        pdbs.apply(
            PdbChange::Reset(vec![
                pdb("ns", Some("web"), 1, &["web-0"]),
                pdb("other", Some("web"), 0, &[]),
                pdb("ns", None, 0, &[]),
            ]),
            &mut i,
        );
        let web = info(&mut i, "ns", &[("app", "web")]);
        let db = info(&mut i, "ns", &[("app", "db")]);
        let bare = info(&mut i, "ns", &[]);
        let got = pdbs.violations([
            ("web-0", &web),
            ("web-1", &web),
            ("db-0", &db),
            ("web-2", &web),
            ("x", &bare),
        ]);
        assert_eq!(got, [false, false, false, true, false]);
    }

    /// A pod whose labels no selector read when it was compiled (kept as strings) still has
    /// labels: a budget selecting pods without some key counts it; a pod without labels matches
    /// no budget (upstream).
    #[test]
    fn a_pod_with_only_unread_labels_is_matched_by_what_it_lacks() {
        let mut i = Interner::default();
        let (labels, raw) =
            crate::model::compile_pod_labels(&[("sandbox-id".into(), "s-1".into())], &mut i);
        assert!(labels.is_empty() && raw.len() == 1);
        let sandbox = PodInfo {
            namespace: i.intern("ns"),
            labels,
            raw,
            ..PodInfo::default()
        };
        let bare = info(&mut i, "ns", &[]);
        let mut pdbs = Pdbs::default();
        let mut untiered = pdb("ns", None, 0, &[]);
        untiered.selector = Some(LabelSelectorInput {
            match_labels: vec![],
            match_expressions: vec![crate::model::SelectorRequirementInput {
                key: "team".into(),
                operator: "DoesNotExist".into(),
                values: vec![],
            }],
        });
        pdbs.apply(PdbChange::Reset(vec![untiered]), &mut i);
        assert_eq!(
            pdbs.violations([("sandbox", &sandbox), ("bare", &bare)]),
            [true, false]
        );
    }
}
