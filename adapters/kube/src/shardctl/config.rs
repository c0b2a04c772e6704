//! The sharding controller's configuration: parses and validates the `sharding.yaml` key of the
//! sharding ConfigMap (upstream format, including the deprecated per-scheduler scalars) and the
//! deprecated `--scheduler-configs` flag form into a [`ShardingConfig`] whose policies are already
//! built. Pure: it reads strings and touches nothing else; the caller owns the ConfigMap watch.
//!
//! Differences from upstream, all deliberate (spec §7.4, §11 item 17):
//! - An unknown policy name is rejected here. Upstream accepts it and then gives that scheduler
//!   (and every later one) all remaining nodes.
//! - An empty document or an empty `schedulerConfigs` is an error ([`ConfigError::Empty`],
//!   [`ConfigError::NoSchedulers`]). The caller must keep its previous configuration and must
//!   never delete or empty NodeShards because of it; upstream deletes every NodeShard.
//! - Duplicate scheduler names are rejected (two schedulers cannot own one NodeShard).
//! - `preferWarmupNodes` from the flag form is honoured (upstream logs a warning and ignores it).
//! - `utilizationChangeThreshold` is a Magma-only key (see [`DEFAULT_UTIL_CHANGE_THRESHOLD`]);
//!   upstream ignores unknown keys, so a ConfigMap carrying it still loads there.
//!
//! Unknown keys are ignored, as upstream's YAML decoding does.

use super::policy::{ALLOCATION_RATE, NODE_LIMIT, Policy, PolicyError, WARMUP, known_policy};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// `shardSyncPeriod` used when the key is absent or not positive (upstream's internal fallback).
pub const FALLBACK_SYNC_PERIOD: Duration = Duration::from_secs(120);

/// Default `|Δ utilisation|` above which a node or pod event triggers a resync. Upstream uses
/// 0.5, which lets a node go from idle to half full without the shards noticing.
pub const DEFAULT_UTIL_CHANGE_THRESHOLD: f64 = 0.1;

/// Upstream's default `--scheduler-configs` values, used when the ConfigMap is absent and no flag
/// was given.
pub const DEFAULT_FLAG_CONFIGS: [&str; 2] = [
    "volcano:volcano:0.0:0.6:false:2:100",
    "agent-scheduler:agent:0.7:1.0:true:2:100",
];

/// A validated sharding configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardingConfig {
    /// In assignment order: earlier schedulers pick their nodes first.
    pub schedulers: Vec<SchedulerSpec>,
    /// Period of the full resync; never zero.
    pub shard_sync_period: Duration,
    /// Whether node and pod events trigger resyncs at all.
    pub enable_node_event_trigger: bool,
    /// See [`DEFAULT_UTIL_CHANGE_THRESHOLD`] and [`super::assign::significant_change`].
    pub utilization_change_threshold: f64,
}

/// One scheduler (= one NodeShard, named after it) and its ordered policies.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerSpec {
    pub name: String,
    /// Free text (`agent`, `volcano`, ...); informational only.
    pub kind: String,
    pub policies: Vec<WeightedPolicy>,
}

/// A built policy and its score weight (≥ 1: an omitted or zero weight means 1).
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedPolicy {
    pub policy: Policy,
    pub weight: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("sharding configuration is empty")]
    Empty,
    #[error("sharding configuration is not valid YAML: {0}")]
    Yaml(String),
    #[error("schedulerConfigs is empty: at least one scheduler is required")]
    NoSchedulers,
    #[error("schedulerConfigs[{index}]: name is required")]
    MissingName { index: usize },
    #[error("scheduler {name:?} is configured twice (schedulerConfigs[{first}] and [{second}])")]
    DuplicateName {
        name: String,
        first: usize,
        second: usize,
    },
    #[error("scheduler {scheduler:?}: {field} = {value}: {why}")]
    Field {
        scheduler: String,
        field: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("scheduler {scheduler:?}: policies[{index}]: name is required")]
    MissingPolicyName { scheduler: String, index: usize },
    #[error(
        "scheduler {scheduler:?}: unknown policy {policy:?} (known: allocation-rate, warmup, node-limit)"
    )]
    UnknownPolicy { scheduler: String, policy: String },
    #[error("scheduler {scheduler:?}: policy {policy:?}: weight {weight} must not be negative")]
    NegativeWeight {
        scheduler: String,
        policy: String,
        weight: i64,
    },
    #[error("scheduler {scheduler:?}: policy {policy:?}: {argument} is only allowed on node-limit")]
    NodeCountOutsideNodeLimit {
        scheduler: String,
        policy: String,
        argument: &'static str,
    },
    #[error("scheduler {scheduler:?}: policy {policy:?}")]
    Policy {
        scheduler: String,
        policy: String,
        #[source]
        source: PolicyError,
    },
    #[error("shardSyncPeriod {value:?}: {why}")]
    SyncPeriod { value: String, why: String },
    #[error("utilizationChangeThreshold {value}: must be within (0, 1]")]
    UtilThreshold { value: f64 },
    #[error("--scheduler-configs entry {entry:?}: {why}")]
    Flag { entry: String, why: String },
}

// ---- Raw (upstream) document ------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDoc {
    scheduler_configs: Option<Vec<RawScheduler>>,
    shard_sync_period: Option<String>,
    enable_node_event_trigger: Option<bool>,
    utilization_change_threshold: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawScheduler {
    name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    policies: Option<Vec<RawPolicy>>,
    cpu_utilization_min: Option<f64>,
    cpu_utilization_max: Option<f64>,
    prefer_warmup_nodes: Option<bool>,
    min_nodes: Option<i64>,
    max_nodes: Option<i64>,
    arguments: Option<BTreeMap<String, Value>>,
}

#[derive(Debug, Default, Deserialize)]
struct RawPolicy {
    name: Option<String>,
    weight: Option<i64>,
    arguments: Option<BTreeMap<String, Value>>,
}

impl ShardingConfig {
    /// Parse the `sharding.yaml` value of the sharding ConfigMap.
    pub fn parse(yaml: &str) -> Result<ShardingConfig, ConfigError> {
        if yaml.trim().is_empty() {
            return Err(ConfigError::Empty);
        }
        let doc: Option<RawDoc> =
            serde_saphyr::from_str(yaml).map_err(|e| ConfigError::Yaml(e.to_string()))?;
        // A document of only comments or `null` decodes to nothing.
        let doc = doc.ok_or(ConfigError::Empty)?;
        let period = match doc.shard_sync_period.as_deref() {
            None => FALLBACK_SYNC_PERIOD,
            Some(s) => sync_period(s)?,
        };
        let threshold = doc
            .utilization_change_threshold
            .unwrap_or(DEFAULT_UTIL_CHANGE_THRESHOLD);
        if !(threshold > 0.0 && threshold <= 1.0) {
            return Err(ConfigError::UtilThreshold { value: threshold });
        }
        Ok(ShardingConfig {
            schedulers: build_schedulers(doc.scheduler_configs.unwrap_or_default())?,
            shard_sync_period: period,
            enable_node_event_trigger: doc.enable_node_event_trigger.unwrap_or(true),
            utilization_change_threshold: threshold,
        })
    }

    /// Build the configuration from the deprecated `--scheduler-configs` entries
    /// (`name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes`), used only when the
    /// ConfigMap is absent. No entries means [`DEFAULT_FLAG_CONFIGS`]. A `sync_period` of zero
    /// means [`FALLBACK_SYNC_PERIOD`].
    ///
    /// Floats are read like Go's `strconv.ParseFloat`, so `inf`/`-inf` parse, but then fail the
    /// same [0, 1] range check as the ConfigMap's scalars. Unlike upstream, `preferWarmup`
    /// adds the `warmup` policy.
    pub fn from_flags<S: AsRef<str>>(
        entries: &[S],
        sync_period: Duration,
        enable_node_event_trigger: bool,
    ) -> Result<ShardingConfig, ConfigError> {
        let raw: Vec<RawScheduler> = if entries.is_empty() {
            DEFAULT_FLAG_CONFIGS
                .iter()
                .map(|e| parse_flag_entry(e))
                .collect::<Result<_, _>>()?
        } else {
            entries
                .iter()
                .map(|e| parse_flag_entry(e.as_ref()))
                .collect::<Result<_, _>>()?
        };
        Ok(ShardingConfig {
            schedulers: build_schedulers(raw)?,
            shard_sync_period: if sync_period.is_zero() {
                FALLBACK_SYNC_PERIOD
            } else {
                sync_period
            },
            enable_node_event_trigger,
            utilization_change_threshold: DEFAULT_UTIL_CHANGE_THRESHOLD,
        })
    }
}

/// A Go duration; zero or negative means [`FALLBACK_SYNC_PERIOD`] (upstream's fallback).
fn sync_period(s: &str) -> Result<Duration, ConfigError> {
    let nanos =
        crate::flags::parse_go_duration(s.trim()).map_err(|why| ConfigError::SyncPeriod {
            value: s.into(),
            why,
        })?;
    Ok(if nanos <= 0 {
        FALLBACK_SYNC_PERIOD
    } else {
        Duration::from_nanos(nanos as u64)
    })
}

fn parse_flag_entry(entry: &str) -> Result<RawScheduler, ConfigError> {
    let bad = |why: String| ConfigError::Flag {
        entry: entry.into(),
        why,
    };
    let f: Vec<&str> = entry.split(':').collect();
    if f.len() != 7 {
        return Err(bad(format!(
            "expected 7 fields name:type:minUtil:maxUtil:preferWarmup:minNodes:maxNodes, got {}",
            f.len()
        )));
    }
    let float = |i: usize, what: &str| {
        f[i].trim()
            .parse::<f64>()
            .map_err(|_| bad(format!("{what} {:?} is not a number", f[i])))
    };
    let int = |i: usize, what: &str| {
        f[i].trim()
            .parse::<i64>()
            .map_err(|_| bad(format!("{what} {:?} is not an integer", f[i])))
    };
    Ok(RawScheduler {
        name: Some(f[0].trim().to_owned()),
        kind: Some(f[1].trim().to_owned()),
        policies: None,
        cpu_utilization_min: Some(float(2, "minUtil")?),
        cpu_utilization_max: Some(float(3, "maxUtil")?),
        prefer_warmup_nodes: Some(
            crate::flags::parse_go_bool(f[4].trim())
                .map_err(|e| bad(format!("preferWarmup {:?}: {e}", f[4])))?,
        ),
        min_nodes: Some(int(5, "minNodes")?),
        max_nodes: Some(int(6, "maxNodes")?),
        arguments: None,
    })
}

fn build_schedulers(raw: Vec<RawScheduler>) -> Result<Vec<SchedulerSpec>, ConfigError> {
    if raw.is_empty() {
        return Err(ConfigError::NoSchedulers);
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::with_capacity(raw.len());
    for (index, r) in raw.into_iter().enumerate() {
        let name = r.name.as_deref().map(str::trim).unwrap_or_default();
        if name.is_empty() {
            return Err(ConfigError::MissingName { index });
        }
        if let Some(&first) = seen.get(name) {
            return Err(ConfigError::DuplicateName {
                name: name.into(),
                first,
                second: index,
            });
        }
        seen.insert(name.to_owned(), index);
        out.push(build_scheduler(name.to_owned(), r)?);
    }
    Ok(out)
}

fn build_scheduler(name: String, r: RawScheduler) -> Result<SchedulerSpec, ConfigError> {
    let field = |field: &'static str, value: String, why: &'static str| ConfigError::Field {
        scheduler: name.clone(),
        field,
        value,
        why,
    };
    // Legacy scalars are validated whether or not they end up used (as upstream does).
    let cpu_min = r.cpu_utilization_min.unwrap_or(0.0);
    let cpu_max = r.cpu_utilization_max.unwrap_or(0.0);
    for (f, v) in [
        ("cpuUtilizationMin", cpu_min),
        ("cpuUtilizationMax", cpu_max),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(field(f, v.to_string(), "must be within [0, 1]"));
        }
    }
    if cpu_min > cpu_max {
        return Err(field(
            "cpuUtilizationMin",
            cpu_min.to_string(),
            "must not exceed cpuUtilizationMax",
        ));
    }
    let min_nodes = r.min_nodes.unwrap_or(0);
    let max_nodes = r.max_nodes.unwrap_or(0);
    if min_nodes < 0 {
        return Err(field(
            "minNodes",
            min_nodes.to_string(),
            "must not be negative",
        ));
    }
    if max_nodes > 0 && max_nodes < min_nodes {
        return Err(field(
            "maxNodes",
            max_nodes.to_string(),
            "must be at least minNodes",
        ));
    }

    // (policy name, weight, arguments) before building.
    let mut specs: Vec<(String, u32, BTreeMap<String, Value>)> = Vec::new();
    let explicit = r.policies.unwrap_or_default();
    if explicit.is_empty() {
        // Legacy synthesis (upstream `applyPolicyDefaults`).
        let args = match r.arguments {
            Some(a) if !a.is_empty() => a,
            _ => BTreeMap::from([
                ("minCPUUtil".to_owned(), Value::from(cpu_min)),
                ("maxCPUUtil".to_owned(), Value::from(cpu_max)),
            ]),
        };
        specs.push((ALLOCATION_RATE.into(), 1, args));
        if r.prefer_warmup_nodes.unwrap_or(false) {
            specs.push((WARMUP.into(), 1, BTreeMap::new()));
        }
    } else {
        for (index, p) in explicit.into_iter().enumerate() {
            let pname = p.name.as_deref().map(str::trim).unwrap_or_default();
            if pname.is_empty() {
                return Err(ConfigError::MissingPolicyName {
                    scheduler: name,
                    index,
                });
            }
            if !known_policy(pname) {
                return Err(ConfigError::UnknownPolicy {
                    scheduler: name,
                    policy: pname.into(),
                });
            }
            let weight = p.weight.unwrap_or(0);
            if weight < 0 {
                return Err(ConfigError::NegativeWeight {
                    scheduler: name,
                    policy: pname.into(),
                    weight,
                });
            }
            let args = p.arguments.unwrap_or_default();
            if pname != NODE_LIMIT {
                for argument in ["minNodes", "maxNodes"] {
                    if args.contains_key(argument) {
                        return Err(ConfigError::NodeCountOutsideNodeLimit {
                            scheduler: name,
                            policy: pname.into(),
                            argument,
                        });
                    }
                }
            }
            let weight = u32::try_from(weight).unwrap_or(u32::MAX).max(1);
            specs.push((pname.to_owned(), weight, args));
        }
    }
    if (min_nodes > 0 || max_nodes > 0) && !specs.iter().any(|(n, _, _)| n == NODE_LIMIT) {
        specs.push((
            NODE_LIMIT.into(),
            1,
            BTreeMap::from([
                ("minNodes".to_owned(), Value::from(min_nodes)),
                ("maxNodes".to_owned(), Value::from(max_nodes)),
            ]),
        ));
    }

    let mut policies = Vec::with_capacity(specs.len());
    for (pname, weight, args) in specs {
        let policy = Policy::build(&pname, &args).map_err(|source| ConfigError::Policy {
            scheduler: name.clone(),
            policy: pname.clone(),
            source,
        })?;
        policies.push(WeightedPolicy { policy, weight });
    }
    Ok(SchedulerSpec {
        name,
        kind: r.kind.unwrap_or_default(),
        policies,
    })
}
