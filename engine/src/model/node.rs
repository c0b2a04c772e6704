//! Nodes: a node as the adapter sees it ([`NodeInput`]), its compiled description
//! ([`NodeMeta`]: name, labels, taints) with its allocatable resources ([`CompiledNode`]), and
//! [`compile_node`].
//!
//! Owns these types and that conversion. Uses the model's shared parts (`model`: interner,
//! errors, resource registry and lists; `quantity`), nothing else.

use super::quantity::parse_scaled;
use super::{Interner, ModelError, ResourceList, ResourceRegistry, add_into, parse_resource_list};
use std::sync::Arc;

/// A node as the adapter sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInput {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub taints: Vec<TaintInput>,
    pub unschedulable: bool,
    /// `status.allocatable`; resources missing here fall back to `capacity`.
    pub allocatable: Vec<(String, String)>,
    pub capacity: Vec<(String, String)>,
    /// The `Ready` condition is `True`. Like kube-scheduler, readiness is enforced through the
    /// `node.kubernetes.io/not-ready` taint the node lifecycle controller adds, not as a filter;
    /// it is kept for reporting.
    pub ready: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaintInput {
    pub key: String,
    pub value: String,
    pub effect: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

impl TaintEffect {
    pub fn parse(s: &str) -> Result<TaintEffect, ModelError> {
        match s {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Ok(TaintEffect::PreferNoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(ModelError::TaintEffect(other.to_owned())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Taint {
    pub key: u32,
    pub value: u32,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    pub key: u32,
    pub value: u32,
    /// The value parsed as an integer, for `Gt`/`Lt`.
    pub num: Option<i64>,
}

/// The node's immutable description, shared by every snapshot until the node changes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeMeta {
    pub name: Arc<str>,
    pub name_id: u32,
    /// Sorted by key.
    pub labels: Box<[Label]>,
    pub taints: Box<[Taint]>,
    pub unschedulable: bool,
    pub ready: bool,
}

impl NodeMeta {
    pub fn label(&self, key: u32) -> Option<&Label> {
        self.labels
            .binary_search_by_key(&key, |l| l.key)
            .ok()
            .map(|i| &self.labels[i])
    }
}

/// A compiled node: its description and its allocatable resources.
#[derive(Debug, Clone)]
pub struct CompiledNode {
    pub meta: Arc<NodeMeta>,
    pub allocatable: ResourceList,
}

pub fn compile_node(
    input: &NodeInput,
    interner: &mut Interner,
    registry: &mut ResourceRegistry,
) -> Result<CompiledNode, ModelError> {
    if input.name.is_empty() {
        return Err(ModelError::Empty { what: "node name" });
    }
    let mut labels: Vec<Label> = input
        .labels
        .iter()
        .map(|(k, v)| Label {
            key: interner.intern(k),
            value: interner.intern(v),
            num: v.parse().ok(),
        })
        .collect();
    labels.sort_by_key(|l| l.key);
    labels.dedup_by_key(|l| l.key);
    let taints = input
        .taints
        .iter()
        .map(|t| {
            Ok(Taint {
                key: interner.intern(&t.key),
                value: interner.intern(&t.value),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect::<Result<Vec<_>, ModelError>>()?;
    let mut allocatable = parse_resource_list(registry, &input.allocatable)?;
    // Allocatable defaults to capacity for resources it does not list.
    for (name, q) in &input.capacity {
        let slot = registry.slot(name)?;
        if !input.allocatable.iter().any(|(n, _)| n == name) {
            let amount = parse_scaled(name, q, ResourceRegistry::scale(slot))?;
            if amount > 0 {
                add_into(&mut allocatable, slot, amount);
            }
        } else {
            // Validate capacity too, even when allocatable wins.
            parse_scaled(name, q, ResourceRegistry::scale(slot))?;
        }
    }
    let name_id = interner.intern(&input.name);
    Ok(CompiledNode {
        meta: Arc::new(NodeMeta {
            name: interner.strs[name_id as usize].clone(),
            name_id,
            labels: labels.into(),
            taints: taints.into(),
            unschedulable: input.unschedulable,
            ready: input.ready,
        }),
        allocatable,
    })
}
