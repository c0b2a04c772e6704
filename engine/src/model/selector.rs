//! Node selection as the API spells it for pods, volumes and devices: node selector terms
//! ([`SelectorTermInput`] compiled into a [`Term`] of [`Requirement`]s, matched against a
//! node's labels and name) and tolerations of node taints ([`TolerationInput`] compiled into a
//! [`Toleration`]), with Kubernetes' semantics and the API server's validation.
//!
//! Owns these types and their compilation. Uses the model's shared parts (`model`: interner,
//! errors) and the node description it matches (`node`), nothing else; `pod`, `volumes` and
//! `dra` compile their selectors and tolerations here.

use super::node::{Label, NodeMeta, Taint, TaintEffect};
use super::{Interner, ModelError};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorRequirementInput {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectorTermInput {
    pub match_expressions: Vec<SelectorRequirementInput>,
    pub match_fields: Vec<SelectorRequirementInput>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TolerationInput {
    pub key: String,
    pub operator: String,
    pub value: String,
    pub effect: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOp {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

impl SelectorOp {
    fn parse(s: &str) -> Result<SelectorOp, ModelError> {
        Ok(match s {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            "Gt" => SelectorOp::Gt,
            "Lt" => SelectorOp::Lt,
            other => return Err(ModelError::SelectorOperator(other.to_owned())),
        })
    }

    fn name(self) -> &'static str {
        match self {
            SelectorOp::In => "In",
            SelectorOp::NotIn => "NotIn",
            SelectorOp::Exists => "Exists",
            SelectorOp::DoesNotExist => "DoesNotExist",
            SelectorOp::Gt => "Gt",
            SelectorOp::Lt => "Lt",
        }
    }
}

/// One requirement of a node selector term.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    pub key: u32,
    pub op: SelectorOp,
    /// Sorted value ids (In/NotIn).
    pub values: Box<[u32]>,
    /// Gt/Lt bound.
    pub bound: i64,
}

impl Requirement {
    /// `metadata.name In [node]` (a field requirement: `Term::fields`).
    pub fn name_in(node_name_id: u32) -> Requirement {
        Requirement {
            key: 0,
            op: SelectorOp::In,
            values: Box::new([node_name_id]),
            bound: 0,
        }
    }

    fn matches_label(&self, label: Option<&Label>) -> bool {
        match self.op {
            SelectorOp::In => label.is_some_and(|l| self.values.binary_search(&l.value).is_ok()),
            SelectorOp::NotIn => label.is_none_or(|l| self.values.binary_search(&l.value).is_err()),
            SelectorOp::Exists => label.is_some(),
            SelectorOp::DoesNotExist => label.is_none(),
            SelectorOp::Gt => label.and_then(|l| l.num).is_some_and(|n| n > self.bound),
            SelectorOp::Lt => label.and_then(|l| l.num).is_some_and(|n| n < self.bound),
        }
    }
}

/// A node selector term: all expressions and all field requirements must match. An empty term
/// matches nothing (Kubernetes semantics).
#[derive(Debug, Clone, PartialEq)]
pub struct Term {
    pub expressions: Box<[Requirement]>,
    /// `metadata.name` requirements (In/NotIn over node-name ids).
    pub fields: Box<[Requirement]>,
}

impl Term {
    pub fn matches(&self, node: &NodeMeta) -> bool {
        if self.expressions.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.expressions
            .iter()
            .all(|r| r.matches_label(node.label(r.key)))
            && self.fields.iter().all(|r| {
                let name = Label {
                    key: 0,
                    value: node.name_id,
                    num: None,
                };
                r.matches_label(Some(&name))
            })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toleration {
    /// `None`: empty key (with Exists: tolerates every key).
    pub key: Option<u32>,
    pub exists: bool,
    pub value: u32,
    /// `None`: every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    pub fn tolerates(&self, t: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != t.effect) {
            return false;
        }
        match self.key {
            None => self.exists,
            Some(k) if k != t.key => false,
            Some(_) => self.exists || self.value == t.value,
        }
    }
}

/// Compile a node selector term (a PV's node affinity, a class's allowed topologies).
pub fn compile_node_term(
    term: &SelectorTermInput,
    interner: &mut Interner,
) -> Result<Term, ModelError> {
    compile_term(term, interner)
}

pub(super) fn compile_term(
    term: &SelectorTermInput,
    interner: &mut Interner,
) -> Result<Term, ModelError> {
    let expressions = term
        .match_expressions
        .iter()
        .map(|r| compile_requirement(r, interner))
        .collect::<Result<Vec<_>, _>>()?;
    let fields = term
        .match_fields
        .iter()
        .map(|r| {
            if r.key != "metadata.name" {
                return Err(ModelError::FieldSelectorKey(r.key.clone()));
            }
            let req = compile_requirement(r, interner)?;
            if !matches!(req.op, SelectorOp::In | SelectorOp::NotIn) {
                return Err(ModelError::SelectorValues {
                    key: r.key.clone(),
                    op: req.op.name(),
                    why: "field selectors support only In and NotIn".into(),
                });
            }
            if req.values.len() != 1 {
                return Err(ModelError::SelectorValues {
                    key: r.key.clone(),
                    op: req.op.name(),
                    why: "metadata.name requires exactly one value".into(),
                });
            }
            Ok(req)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Term {
        expressions: expressions.into(),
        fields: fields.into(),
    })
}

pub(super) fn compile_requirement(
    r: &SelectorRequirementInput,
    interner: &mut Interner,
) -> Result<Requirement, ModelError> {
    let op = SelectorOp::parse(&r.operator)?;
    let err = |why: &str| ModelError::SelectorValues {
        key: r.key.clone(),
        op: op.name(),
        why: why.into(),
    };
    if r.key.is_empty() {
        return Err(ModelError::Empty {
            what: "node selector requirement key",
        });
    }
    let mut bound = 0;
    match op {
        SelectorOp::In | SelectorOp::NotIn if r.values.is_empty() => {
            return Err(err("requires at least one value"));
        }
        SelectorOp::Exists | SelectorOp::DoesNotExist if !r.values.is_empty() => {
            return Err(err("must not have values"));
        }
        SelectorOp::Gt | SelectorOp::Lt => {
            if r.values.len() != 1 {
                return Err(err("requires exactly one value"));
            }
            bound = r.values[0]
                .parse::<i64>()
                .map_err(|_| err(&format!("value {:?} is not an integer", r.values[0])))?;
        }
        _ => {}
    }
    let mut values: Vec<u32> = match op {
        SelectorOp::In | SelectorOp::NotIn => r.values.iter().map(|v| interner.intern(v)).collect(),
        _ => Vec::new(),
    };
    values.sort_unstable();
    values.dedup();
    Ok(Requirement {
        key: interner.intern(&r.key),
        op,
        values: values.into(),
        bound,
    })
}

pub(crate) fn compile_toleration(
    t: &TolerationInput,
    interner: &mut Interner,
) -> Result<Toleration, ModelError> {
    let exists = match t.operator.as_str() {
        "Exists" => true,
        "Equal" | "" => false,
        other => return Err(ModelError::TolerationOperator(other.to_owned())),
    };
    if exists && !t.value.is_empty() {
        return Err(ModelError::TolerationExistsWithValue {
            key: t.key.clone(),
            value: t.value.clone(),
        });
    }
    if t.key.is_empty() && !exists {
        return Err(ModelError::TolerationEmptyKey);
    }
    let effect = if t.effect.is_empty() {
        None
    } else {
        Some(TaintEffect::parse(&t.effect)?)
    };
    Ok(Toleration {
        key: if t.key.is_empty() {
            None
        } else {
            Some(interner.intern(&t.key))
        },
        exists,
        value: interner.intern(&t.value),
        effect,
    })
}
