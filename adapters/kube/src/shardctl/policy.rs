//! The three sharding policies, each with upstream's Filter / Score / Select role:
//! `allocation-rate` (filter + score on CPU allocation), `warmup` (score on a node label) and
//! `node-limit` (select: cap the count). Owns argument parsing and validation for each policy;
//! pure functions over [`ShardNode`]s, it touches nothing else.

use super::node::ShardNode;
use serde_json::Value;
use std::collections::BTreeMap;

pub const ALLOCATION_RATE: &str = "allocation-rate";
pub const WARMUP: &str = "warmup";
pub const NODE_LIMIT: &str = "node-limit";

/// Default label and value the `warmup` policy looks for.
pub const DEFAULT_WARMUP_LABEL: &str = "node.volcano.sh/warmup";
pub const DEFAULT_WARMUP_LABEL_VALUE: &str = "true";

/// Whether `name` is a policy this controller implements.
pub fn known_policy(name: &str) -> bool {
    matches!(name, ALLOCATION_RATE | WARMUP | NODE_LIMIT)
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy {0:?}")]
    Unknown(String),
    #[error("argument {key} = {value}: {why}")]
    Argument {
        key: String,
        value: String,
        why: &'static str,
    },
}

/// Upstream rounds every utilisation value and bound to two decimals (half away from zero).
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A built policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    AllocationRate(AllocationRate),
    Warmup(Warmup),
    NodeLimit(NodeLimit),
}

impl Policy {
    /// Build the policy `name` from its `arguments`. Unknown argument keys are ignored.
    pub fn build(name: &str, args: &BTreeMap<String, Value>) -> Result<Policy, PolicyError> {
        match name {
            // Missing bounds mean the whole range [0, 1] (upstream volcano-sh/volcano#5743;
            // before it, a missing maxCPUUtil meant 0 and starved the shard).
            ALLOCATION_RATE => AllocationRate::new(
                arg_f64(args, "minCPUUtil", 0.0)?,
                arg_f64(args, "maxCPUUtil", 1.0)?,
            )
            .map(Policy::AllocationRate),
            WARMUP => Ok(Policy::Warmup(Warmup {
                label: arg_string(args, "warmupLabel", DEFAULT_WARMUP_LABEL)?,
                value: arg_string(args, "warmupLabelValue", DEFAULT_WARMUP_LABEL_VALUE)?,
            })),
            NODE_LIMIT => {
                NodeLimit::new(arg_i64(args, "minNodes", 0)?, arg_i64(args, "maxNodes", 0)?)
                    .map(Policy::NodeLimit)
            }
            other => Err(PolicyError::Unknown(other.into())),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Policy::AllocationRate(_) => ALLOCATION_RATE,
            Policy::Warmup(_) => WARMUP,
            Policy::NodeLimit(_) => NODE_LIMIT,
        }
    }

    /// Filter role: `None` if this policy does not filter.
    pub fn filter(&self, node: &ShardNode) -> Option<bool> {
        match self {
            Policy::AllocationRate(p) => Some(p.filter(node)),
            Policy::Warmup(_) | Policy::NodeLimit(_) => None,
        }
    }

    /// Score role (in [0, 1], before weighting): `None` if this policy does not score.
    pub fn score(&self, node: &ShardNode) -> Option<f64> {
        match self {
            Policy::AllocationRate(p) => Some(p.score(node)),
            Policy::Warmup(p) => Some(p.score(node)),
            Policy::NodeLimit(_) => None,
        }
    }

    /// Select role: `None` if this policy does not select.
    pub fn as_selector(&self) -> Option<&NodeLimit> {
        match self {
            Policy::NodeLimit(p) => Some(p),
            _ => None,
        }
    }
}

/// `allocation-rate`: nodes whose CPU allocation (requested ÷ capacity) lies in `[min, max]`,
/// scored higher the closer they are to `max`. Bounds are rounded to 0.01.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocationRate {
    min: f64,
    max: f64,
}

impl AllocationRate {
    /// Requires `0 ≤ min ≤ max ≤ 1` (checked on the values as written, then rounded).
    pub fn new(min: f64, max: f64) -> Result<AllocationRate, PolicyError> {
        let bad = |key: &str, v: f64, why| PolicyError::Argument {
            key: key.into(),
            value: v.to_string(),
            why,
        };
        if !(0.0..=1.0).contains(&min) {
            return Err(bad("minCPUUtil", min, "must be within [0, 1]"));
        }
        if !(0.0..=1.0).contains(&max) {
            return Err(bad("maxCPUUtil", max, "must be within [0, 1]"));
        }
        if min > max {
            return Err(bad("minCPUUtil", min, "must not exceed maxCPUUtil"));
        }
        Ok(AllocationRate {
            min: round2(min),
            max: round2(max),
        })
    }

    pub fn min(&self) -> f64 {
        self.min
    }

    pub fn max(&self) -> f64 {
        self.max
    }

    /// Keep nodes with metrics whose rounded CPU utilisation is within `[min, max]`.
    pub fn filter(&self, node: &ShardNode) -> bool {
        node.cpu_utilization()
            .map(round2)
            .is_some_and(|u| u >= self.min && u <= self.max)
    }

    /// `(util − min) / (max − min)` clamped to [0, 1]; 1 when `max = min`; 0 without metrics.
    pub fn score(&self, node: &ShardNode) -> f64 {
        let Some(u) = node.cpu_utilization().map(round2) else {
            return 0.0;
        };
        if self.max <= self.min {
            return 1.0;
        }
        ((u - self.min) / (self.max - self.min)).clamp(0.0, 1.0)
    }
}

/// `warmup`: prefer nodes carrying `label = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Warmup {
    pub label: String,
    pub value: String,
}

impl Warmup {
    pub fn score(&self, node: &ShardNode) -> f64 {
        if node.labels.get(&self.label) == Some(&self.value) {
            1.0
        } else {
            0.0
        }
    }
}

/// `node-limit`: keep at most `max_nodes` candidates (≤ 0 = unbounded). `min_nodes` is only
/// reported when not met; nothing enforces it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLimit {
    pub min_nodes: i64,
    pub max_nodes: i64,
}

impl NodeLimit {
    /// Requires `min_nodes ≥ 0` and, when `max_nodes > 0`, `max_nodes ≥ min_nodes`.
    pub fn new(min_nodes: i64, max_nodes: i64) -> Result<NodeLimit, PolicyError> {
        if min_nodes < 0 {
            return Err(PolicyError::Argument {
                key: "minNodes".into(),
                value: min_nodes.to_string(),
                why: "must not be negative",
            });
        }
        if max_nodes > 0 && max_nodes < min_nodes {
            return Err(PolicyError::Argument {
                key: "maxNodes".into(),
                value: max_nodes.to_string(),
                why: "must be at least minNodes",
            });
        }
        Ok(NodeLimit {
            min_nodes,
            max_nodes,
        })
    }

    /// Keep the first `max_nodes` of the (already ordered) candidates.
    pub fn select<T>(&self, mut candidates: Vec<T>) -> Vec<T> {
        if self.max_nodes > 0 {
            candidates.truncate(usize::try_from(self.max_nodes).unwrap_or(usize::MAX));
        }
        candidates
    }
}

// ---- Argument readers ---------------------------------------------------------------------

fn bad_arg(key: &str, v: &Value, why: &'static str) -> PolicyError {
    PolicyError::Argument {
        key: key.into(),
        value: v.to_string(),
        why,
    }
}

/// A float argument: a YAML number or a numeric string.
pub fn arg_f64(
    args: &BTreeMap<String, Value>,
    key: &str,
    default: f64,
) -> Result<f64, PolicyError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| bad_arg(key, &args[key], "not a number")),
        Some(v @ Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| bad_arg(key, v, "not a number")),
        Some(v) => Err(bad_arg(key, v, "not a number")),
    }
}

/// An integer argument: a YAML integer, an integral float, or an integer string.
pub fn arg_i64(
    args: &BTreeMap<String, Value>,
    key: &str,
    default: i64,
) -> Result<i64, PolicyError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v @ Value::Number(n)) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| bad_arg(key, v, "not an integer")),
        Some(v @ Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| bad_arg(key, v, "not an integer")),
        Some(v) => Err(bad_arg(key, v, "not an integer")),
    }
}

/// A string argument; scalars (numbers, booleans) are accepted as their text.
fn arg_string(
    args: &BTreeMap<String, Value>,
    key: &str,
    default: &str,
) -> Result<String, PolicyError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(default.into()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(v) => Err(bad_arg(key, v, "not a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shardctl::node::NodeUsage;

    fn node(cpu_req: i64, cpu_cap: i64) -> ShardNode {
        ShardNode::new("n").with_usage(NodeUsage {
            cpu_capacity_millis: cpu_cap,
            cpu_requested_millis: cpu_req,
            memory_capacity_bytes: 1,
            memory_requested_bytes: 0,
        })
    }

    #[test]
    fn round2_is_half_away_from_zero() {
        assert_eq!(round2(0.695), 0.7);
        assert_eq!(round2(0.694), 0.69);
        assert_eq!(round2(0.125), 0.13);
    }

    #[test]
    fn allocation_rate_ranges() {
        assert!(AllocationRate::new(0.0, 0.0).is_ok());
        assert!(AllocationRate::new(0.0, 1.0).is_ok());
        assert!(AllocationRate::new(-0.1, 0.5).is_err());
        assert!(AllocationRate::new(0.2, 1.1).is_err());
        assert!(AllocationRate::new(0.6, 0.5).is_err());
        assert!(AllocationRate::new(f64::NAN, 0.5).is_err());
        let p = AllocationRate::new(0.123, 0.456).unwrap();
        assert_eq!((p.min(), p.max()), (0.12, 0.46));
    }

    #[test]
    fn allocation_rate_filter_uses_rounded_util_and_rejects_missing_metrics() {
        let p = AllocationRate::new(0.7, 1.0).unwrap();
        assert!(p.filter(&node(695, 1000)), "0.695 rounds to 0.70");
        assert!(!p.filter(&node(694, 1000)));
        assert!(p.filter(&node(1000, 1000)));
        assert!(p.filter(&node(5000, 1000)), "capped at 1");
        assert!(!p.filter(&ShardNode::new("bare")));
        assert!(!p.filter(&node(0, 0)), "no capacity = no metrics");
    }

    #[test]
    fn allocation_rate_score_clamps_and_handles_equal_bounds() {
        let p = AllocationRate::new(0.2, 0.6).unwrap();
        assert_eq!(p.score(&node(200, 1000)), 0.0);
        assert!((p.score(&node(400, 1000)) - 0.5).abs() < 1e-9);
        assert_eq!(p.score(&node(600, 1000)), 1.0);
        assert_eq!(p.score(&node(900, 1000)), 1.0, "clamped above");
        assert_eq!(p.score(&node(100, 1000)), 0.0, "clamped below");
        assert_eq!(p.score(&ShardNode::new("bare")), 0.0);
        let flat = AllocationRate::new(0.5, 0.5).unwrap();
        assert_eq!(flat.score(&node(500, 1000)), 1.0);
        assert_eq!(flat.score(&node(100, 1000)), 1.0);
    }

    #[test]
    fn warmup_defaults_and_custom_label() {
        let p = Policy::build(WARMUP, &BTreeMap::new()).unwrap();
        let warm = ShardNode::new("w").with_label(DEFAULT_WARMUP_LABEL, "true");
        let cold = ShardNode::new("c").with_label(DEFAULT_WARMUP_LABEL, "false");
        assert_eq!(p.score(&warm), Some(1.0));
        assert_eq!(p.score(&cold), Some(0.0));
        assert_eq!(p.score(&ShardNode::new("x")), Some(0.0));
        assert_eq!(p.filter(&warm), None);
        let args = BTreeMap::from([
            ("warmupLabel".to_owned(), Value::from("pool")),
            ("warmupLabelValue".to_owned(), Value::from("hot")),
        ]);
        let p = Policy::build(WARMUP, &args).unwrap();
        assert_eq!(
            p.score(&ShardNode::new("h").with_label("pool", "hot")),
            Some(1.0)
        );
        assert_eq!(p.score(&warm), Some(0.0));
    }

    #[test]
    fn node_limit_select_and_validation() {
        let l = NodeLimit::new(1, 2).unwrap();
        assert_eq!(l.select(vec![1, 2, 3]), vec![1, 2]);
        assert_eq!(
            NodeLimit::new(0, 0).unwrap().select(vec![1, 2, 3]),
            vec![1, 2, 3]
        );
        assert_eq!(
            NodeLimit::new(0, -5).unwrap().select(vec![1, 2]),
            vec![1, 2]
        );
        assert!(NodeLimit::new(-1, 0).is_err());
        assert!(NodeLimit::new(5, 3).is_err());
        assert!(NodeLimit::new(5, 0).is_ok(), "maxNodes ≤ 0 is unbounded");
    }

    #[test]
    fn argument_types() {
        let args = BTreeMap::from([
            ("a".to_owned(), Value::from("0.25")),
            ("b".to_owned(), Value::from(3.0)),
            ("c".to_owned(), Value::from(true)),
            ("d".to_owned(), Value::from(2.5)),
        ]);
        assert_eq!(arg_f64(&args, "a", 0.0).unwrap(), 0.25);
        assert_eq!(arg_f64(&args, "zz", 0.5).unwrap(), 0.5);
        assert!(arg_f64(&args, "c", 0.0).is_err());
        assert_eq!(arg_i64(&args, "b", 0).unwrap(), 3);
        assert!(arg_i64(&args, "d", 0).is_err());
        assert!(Policy::build("nope", &args).is_err());
    }
}
