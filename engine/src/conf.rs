//! The scheduler configuration: Volcano's config schema (`actions`, `tiers[].plugins[]` with
//! `enablePredicate`/`enableNodeOrder`/`arguments`, `configurations[]`), its built-in default,
//! validation with clear errors, and compilation into the [`Profile`] every worker reads from
//! the snapshot it is scheduling against (so a reload takes effect at the next cycle).
//!
//! Owns parsing and validation only; the adapter reads files and watches for changes. Uses
//! [`profile`](crate::profile) (the types it compiles into, re-exported here) and the plugins'
//! declarations of their switches and weights (`plugins`); the snapshot and the plugins do not
//! use it (only the plugins' tests do).

use crate::plugins::volume_binding;
use crate::profile::{FilterSwitches, ScoreWeights};
pub use crate::profile::{Profile, Sampling};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Upstream's built-in default (`pkg/agentscheduler/util.go`).
pub const DEFAULT_SCHEDULER_CONF: &str = r#"actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
"#;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfError {
    #[error("invalid scheduler configuration YAML: {0}")]
    Yaml(String),
    #[error("unknown action {0:?} (the agent scheduler supports only \"allocate\")")]
    UnknownAction(String),
    #[error("no actions configured")]
    NoActions,
    #[error("argument {key:?} of {owner}: expected {expected}, got {got}")]
    ArgumentType {
        owner: String,
        key: String,
        expected: &'static str,
        got: String,
    },
    #[error("argument {key:?} of {owner}: {why}")]
    ArgumentValue {
        owner: String,
        key: String,
        why: String,
    },
    #[error("plugin entry without a name in tier {tier}")]
    PluginName { tier: usize },
    #[error(
        "unknown plugin {0:?} (the agent scheduler runs \"predicates\" and \"nodeorder\"; \
         Volcano's other plugins are accepted with a warning)"
    )]
    UnknownPlugin(String),
    #[error("unknown argument {key:?} of {owner}")]
    UnknownArgument { owner: String, key: String },
    #[error("unknown action {0:?} in configurations (known: \"allocate\")")]
    UnknownConfiguration(String),
    /// Any of the above, at a line of the file (1-based).
    #[error("line {line}: {error}")]
    At { line: u64, error: Box<ConfError> },
    #[error("invalid node sampling option {name}={value}: {why}")]
    Sampling {
        name: &'static str,
        value: i64,
        why: &'static str,
    },
}

/// A YAML argument value (Volcano's `Arguments` is `map[string]interface{}`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ArgValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl ArgValue {
    fn describe(&self) -> String {
        match self {
            ArgValue::Bool(b) => format!("boolean {b}"),
            ArgValue::Int(i) => format!("integer {i}"),
            ArgValue::Float(f) => format!("number {f}"),
            ArgValue::Str(s) => format!("string {s:?}"),
        }
    }
}

pub type Arguments = BTreeMap<String, ArgValue>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginOption {
    #[serde(default)]
    pub name: String,
    pub enable_predicate: Option<bool>,
    pub enable_node_order: Option<bool>,
    #[serde(default)]
    pub arguments: Arguments,
    /// Other `enableX` switches of the batch scheduler's schema are accepted and ignored.
    #[serde(flatten)]
    pub other: BTreeMap<String, ArgValue>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Tier {
    #[serde(default)]
    pub plugins: Vec<PluginOption>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Configuration {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub arguments: Arguments,
}

/// The file as written (Volcano's `SchedulerConfiguration`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SchedulerConf {
    #[serde(default)]
    pub actions: String,
    #[serde(default)]
    pub tiers: Vec<Tier>,
    #[serde(default)]
    pub configurations: Vec<Configuration>,
    #[serde(default)]
    pub metrics: BTreeMap<String, ArgValue>,
}

impl Sampling {
    /// Validate flag values (upstream does not; out-of-range values break its sampling).
    pub fn new(min_feasible: i64, min_pct: i64, pct: i64) -> Result<Sampling, ConfError> {
        if min_feasible <= 0 || min_feasible > u32::MAX as i64 {
            return Err(ConfError::Sampling {
                name: "minimum-feasible-nodes",
                value: min_feasible,
                why: "must be > 0",
            });
        }
        if !(0..=100).contains(&min_pct) {
            return Err(ConfError::Sampling {
                name: "minimum-percentage-nodes-to-find",
                value: min_pct,
                why: "must be within 0..=100",
            });
        }
        if !(0..=100).contains(&pct) {
            return Err(ConfError::Sampling {
                name: "percentage-nodes-to-find",
                value: pct,
                why: "must be within 0..=100 (0 = adaptive)",
            });
        }
        Ok(Sampling {
            minimum_feasible_nodes: min_feasible as u32,
            minimum_percentage_nodes_to_find: min_pct as u32,
            percentage_nodes_to_find: pct as u32,
        })
    }
}

impl Default for Profile {
    fn default() -> Self {
        Profile::parse(DEFAULT_SCHEDULER_CONF, Sampling::default())
            .expect("built-in default is valid")
    }
}

/// Predicate arguments for upstream filters and options Magma does not implement (the ones it
/// implements are declared by the plugins, `plugins::FilterSwitches`): accepted with a warning
/// (DRA, the equivalence cache, the VolumeBinding score, the proportional and GPU predicates of
/// the batch scheduler's `predicates`). Any other key is rejected.
/// The `predicates` argument switching DRA (`Profile::dynamic_resources`).
pub const DRA_SWITCH_KEY: &str = "predicate.DynamicResourceAllocationEnable";

const UNSUPPORTED_PREDICATE_KEYS: &[&str] = &[
    "predicate.CacheEnable",
    "predicate.ProportionalEnable",
    "predicate.GPUSharingEnable",
    "predicate.GPUNumberEnable",
    "predicate.resources",
    "volumebinding.weight",
    "volumebinding.shape",
    "dynamicresources.filterTimeoutSeconds",
];
/// `predicate.resources.<name>.cpu` and `.memory` (the proportional predicate's ratios).
const UNSUPPORTED_PREDICATE_PREFIX: &str = "predicate.resources.";
/// Upstream scorer weights Magma does not implement (see `plugins::ScoreWeights` for the rest).
const UNSUPPORTED_WEIGHT_KEYS: &[&str] = &["imagelocality.weight", "selectorspread.weight"];
/// Volcano's plugins the agent scheduler does not run (upstream's agent registers only
/// `predicates` and `nodeorder` and skips the rest): accepted with a warning each. Any other
/// name is rejected.
pub const UPSTREAM_ONLY_PLUGINS: &[&str] = &[
    "binpack",
    "capacity",
    "cdp",
    "conformance",
    "deviceshare",
    "drf",
    "extender",
    "gang",
    "network-topology-aware",
    "nodegroup",
    "numaaware",
    "overcommit",
    "pdb",
    "priority",
    "proportion",
    "rescheduling",
    "resource-strategy-fit",
    "sla",
    "task-topology",
    "tdm",
    "usage",
];
/// Volcano's batch actions: a `configurations` entry for one is accepted with a warning (the
/// `actions` list itself must name only `allocate`, as upstream's agent requires).
const UPSTREAM_ONLY_ACTIONS: &[&str] = &["enqueue", "backfill", "preempt", "reclaim", "shuffle"];

impl ConfError {
    /// The argument key an argument error names ("" for the others).
    fn argument_key(&self) -> String {
        match self {
            ConfError::ArgumentType { key, .. }
            | ConfError::ArgumentValue { key, .. }
            | ConfError::UnknownArgument { key, .. } => key.clone(),
            _ => String::new(),
        }
    }
}

/// Where in the file an error is (resolved to a line by [`locate`]).
#[derive(Debug, Clone)]
enum Site {
    Actions,
    Plugin {
        tier: usize,
        plugin: usize,
    },
    PluginArg {
        tier: usize,
        plugin: usize,
        key: String,
    },
    Configuration {
        index: usize,
    },
    ConfigurationArg {
        index: usize,
        key: String,
    },
}

/// The file again, with the source positions of what errors point at.
#[derive(Debug, Default, Deserialize)]
struct Located {
    #[serde(default)]
    actions: Option<serde_saphyr::Spanned<String>>,
    #[serde(default)]
    tiers: Vec<LocatedTier>,
    #[serde(default)]
    configurations: Vec<LocatedEntry>,
}

#[derive(Debug, Default, Deserialize)]
struct LocatedTier {
    #[serde(default)]
    plugins: Vec<LocatedEntry>,
}

#[derive(Debug, Default, Deserialize)]
struct LocatedEntry {
    #[serde(default)]
    name: Option<serde_saphyr::Spanned<String>>,
    #[serde(default)]
    arguments: BTreeMap<String, serde_saphyr::Spanned<serde::de::IgnoredAny>>,
}

/// The line of `site` in `yaml` (0 when it cannot be told).
fn locate(yaml: &str, site: &Site) -> u64 {
    let Ok(doc) = serde_saphyr::from_str::<Located>(yaml) else {
        return 0;
    };
    let line = |s: Option<&serde_saphyr::Spanned<String>>| s.map_or(0, |s| s.referenced.line());
    let entry = |e: Option<&LocatedEntry>, key: Option<&str>| match (e, key) {
        (Some(e), Some(k)) => e
            .arguments
            .get(k)
            .map_or_else(|| line(e.name.as_ref()), |v| v.referenced.line()),
        (Some(e), None) => line(e.name.as_ref()),
        (None, _) => 0,
    };
    let plugin =
        |tier: usize, plugin: usize| doc.tiers.get(tier).and_then(|t| t.plugins.get(plugin));
    match site {
        Site::Actions => line(doc.actions.as_ref()),
        Site::Plugin { tier, plugin: p } => entry(plugin(*tier, *p), None),
        Site::PluginArg {
            tier,
            plugin: p,
            key,
        } => entry(plugin(*tier, *p), Some(key)),
        Site::Configuration { index } => entry(doc.configurations.get(*index), None),
        Site::ConfigurationArg { index, key } => entry(doc.configurations.get(*index), Some(key)),
    }
}

fn get_bool(owner: &str, args: &Arguments, key: &str, default: bool) -> Result<bool, ConfError> {
    match args.get(key) {
        None => Ok(default),
        Some(ArgValue::Bool(b)) => Ok(*b),
        Some(ArgValue::Str(s)) => match s.as_str() {
            "true" | "True" | "TRUE" | "1" | "t" | "T" => Ok(true),
            "false" | "False" | "FALSE" | "0" | "f" | "F" => Ok(false),
            _ => Err(ConfError::ArgumentType {
                owner: owner.into(),
                key: key.into(),
                expected: "a boolean",
                got: format!("string {s:?}"),
            }),
        },
        Some(v) => Err(ConfError::ArgumentType {
            owner: owner.into(),
            key: key.into(),
            expected: "a boolean",
            got: v.describe(),
        }),
    }
}

fn get_int(owner: &str, args: &Arguments, key: &str, default: i64) -> Result<i64, ConfError> {
    let err = |v: &ArgValue| ConfError::ArgumentType {
        owner: owner.into(),
        key: key.into(),
        expected: "an integer",
        got: v.describe(),
    };
    match args.get(key) {
        None => Ok(default),
        Some(ArgValue::Int(i)) => Ok(*i),
        Some(v @ ArgValue::Float(f)) if f.fract() == 0.0 && f.abs() < 1e15 => {
            let _ = v;
            Ok(*f as i64)
        }
        Some(v @ ArgValue::Str(s)) => s.trim().parse().map_err(|_| err(v)),
        Some(v) => Err(err(v)),
    }
}

fn weight(owner: &str, args: &Arguments, key: &str, default: i64) -> Result<i64, ConfError> {
    let w = get_int(owner, args, key, default)?;
    if !(0..=1_000_000).contains(&w) {
        return Err(ConfError::ArgumentValue {
            owner: owner.into(),
            key: key.into(),
            why: format!("weight {w} must be within 0..=1000000"),
        });
    }
    Ok(w)
}

impl Profile {
    /// Parse and validate a configuration file's contents.
    pub fn parse(yaml: &str, sampling: Sampling) -> Result<Profile, ConfError> {
        let conf: SchedulerConf = if yaml.trim().is_empty() {
            SchedulerConf::default()
        } else {
            serde_saphyr::from_str(yaml).map_err(|e| ConfError::Yaml(e.to_string()))?
        };
        Profile::compile_at(&conf, sampling).map_err(|(error, site)| match locate(yaml, &site) {
            0 => error,
            line => ConfError::At {
                line,
                error: Box::new(error),
            },
        })
    }

    pub fn compile(conf: &SchedulerConf, sampling: Sampling) -> Result<Profile, ConfError> {
        Profile::compile_at(conf, sampling).map_err(|(e, _)| e)
    }

    #[expect(
        clippy::result_large_err,
        reason = "runs once per configuration file; the error carries its site"
    )]
    fn compile_at(conf: &SchedulerConf, sampling: Sampling) -> Result<Profile, (ConfError, Site)> {
        let mut warnings = Vec::new();
        let actions: Vec<&str> = conf
            .actions
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        if actions.is_empty() {
            return Err((ConfError::NoActions, Site::Actions));
        }
        for a in &actions {
            if *a != "allocate" {
                return Err((ConfError::UnknownAction((*a).to_owned()), Site::Actions));
            }
        }
        let mut filters = FilterSwitches::OFF;
        let mut dynamic_resources = true;
        let mut volume_bind_timeout =
            std::time::Duration::from_secs(volume_binding::BIND_TIMEOUT_DEFAULT as u64);
        let mut weights = ScoreWeights::NONE;
        // An argument error's site: the key it names.
        let arg_site = |tier: usize, plugin: usize| {
            move |e: ConfError| {
                let key = e.argument_key();
                (e, Site::PluginArg { tier, plugin, key })
            }
        };
        for (ti, tier) in conf.tiers.iter().enumerate() {
            for (pi, p) in tier.plugins.iter().enumerate() {
                let at = arg_site(ti, pi);
                if p.name.is_empty() {
                    return Err((
                        ConfError::PluginName { tier: ti },
                        Site::Plugin {
                            tier: ti,
                            plugin: pi,
                        },
                    ));
                }
                let owner = format!("plugin {:?}", p.name);
                let enable_predicate = p.enable_predicate.unwrap_or(true);
                let enable_node_order = p.enable_node_order.unwrap_or(true);
                let a = &p.arguments;
                let unknown = |key: &str| ConfError::UnknownArgument {
                    owner: owner.clone(),
                    key: key.to_owned(),
                };
                match p.name.as_str() {
                    "predicates" => {
                        for key in a.keys() {
                            if UNSUPPORTED_PREDICATE_KEYS.contains(&key.as_str())
                                || key.starts_with(UNSUPPORTED_PREDICATE_PREFIX)
                            {
                                warnings.push(format!("{owner}: argument {key:?} is accepted but Magma does not implement that filter"));
                            } else if !FilterSwitches::keys().any(|k| k == key)
                                && key != volume_binding::BIND_TIMEOUT_KEY
                                && key != DRA_SWITCH_KEY
                            {
                                return Err(at(unknown(key)));
                            }
                        }
                        let set = FilterSwitches::read(|key, default| get_bool(&owner, a, key, default)).map_err(&at)?;
                        for key in UNSUPPORTED_PREDICATE_KEYS.iter().filter(|k| k.ends_with("Enable")) {
                            get_bool(&owner, a, key, true).map_err(&at)?;
                        }
                        dynamic_resources = get_bool(&owner, a, DRA_SWITCH_KEY, true).map_err(&at)?;
                        let timeout = get_int(
                            &owner,
                            a,
                            volume_binding::BIND_TIMEOUT_KEY,
                            volume_binding::BIND_TIMEOUT_DEFAULT,
                        ).map_err(&at)?;
                        if !(0..=86_400).contains(&timeout) {
                            return Err(at(ConfError::ArgumentValue {
                                owner: owner.clone(),
                                key: volume_binding::BIND_TIMEOUT_KEY.into(),
                                why: format!("{timeout} must be within 0..=86400 seconds"),
                            }));
                        }
                        volume_bind_timeout = std::time::Duration::from_secs(timeout as u64);
                        if enable_predicate {
                            filters = set;
                        }
                    }
                    "nodeorder" => {
                        for key in a.keys() {
                            if UNSUPPORTED_WEIGHT_KEYS.contains(&key.as_str()) {
                                warnings.push(format!("{owner}: {key:?} is accepted but Magma does not implement that scorer"));
                            } else if !ScoreWeights::KEYS.contains(&key.as_str()) {
                                return Err(at(unknown(key)));
                            }
                        }
                        for key in UNSUPPORTED_WEIGHT_KEYS {
                            weight(&owner, a, key, 0).map_err(&at)?;
                        }
                        let w = ScoreWeights::read(|key, default| weight(&owner, a, key, default)).map_err(&at)?;
                        if enable_node_order {
                            weights = w;
                        }
                    }
                    other if UPSTREAM_ONLY_PLUGINS.contains(&other) => warnings.push(format!(
                        "plugin {other:?} is a Volcano plugin the agent scheduler does not run; skipped (as upstream)"
                    )),
                    other => {
                        return Err((
                            ConfError::UnknownPlugin(other.to_owned()),
                            Site::Plugin { tier: ti, plugin: pi },
                        ));
                    }
                }
            }
        }
        let mut candidate_node_count = 3;
        for (ci, c) in conf.configurations.iter().enumerate() {
            let at = |e: ConfError| {
                let key = e.argument_key();
                (e, Site::ConfigurationArg { index: ci, key })
            };
            if c.name != "allocate" {
                if UPSTREAM_ONLY_ACTIONS.contains(&c.name.as_str()) {
                    warnings.push(format!(
                        "configuration for action {:?} ignored: the agent scheduler runs only \"allocate\"",
                        c.name
                    ));
                    continue;
                }
                return Err((
                    ConfError::UnknownConfiguration(c.name.clone()),
                    Site::Configuration { index: ci },
                ));
            }
            let owner = "configuration \"allocate\"";
            for key in c.arguments.keys() {
                if key != "candidateNodeCount" && key != "predicateErrorCacheEnable" {
                    return Err(at(ConfError::UnknownArgument {
                        owner: owner.into(),
                        key: key.clone(),
                    }));
                }
            }
            let k = get_int(owner, &c.arguments, "candidateNodeCount", 3).map_err(at)?;
            if k <= 0 || k > 64 {
                return Err(at(ConfError::ArgumentValue {
                    owner: owner.into(),
                    key: "candidateNodeCount".into(),
                    why: format!("{k} must be within 1..=64"),
                }));
            }
            candidate_node_count = k as usize;
            get_bool(owner, &c.arguments, "predicateErrorCacheEnable", true).map_err(at)?;
        }
        Ok(Profile {
            filters,
            weights,
            candidate_node_count,
            volume_bind_timeout,
            dynamic_resources,
            sampling,
            warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(y: &str) -> Result<Profile, ConfError> {
        Profile::parse(y, Sampling::default())
    }

    #[test]
    fn default_config_enables_everything_with_upstream_weights() {
        let p = Profile::default();
        assert_eq!(p.weights, ScoreWeights::DEFAULT);
        assert_eq!(
            (p.weights.least_allocated, p.weights.most_allocated),
            (1, 0)
        );
        assert_eq!(
            (
                p.weights.balanced_allocation,
                p.weights.node_affinity,
                p.weights.taint_toleration
            ),
            (1, 2, 3)
        );
        assert_eq!(p.filters, FilterSwitches::DEFAULT);
        let f = p.filters;
        assert!(f.node_affinity && f.node_ports && f.taint_toleration);
        assert_eq!(p.candidate_node_count, 3);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn arguments_and_candidate_count() {
        let p = parse(
            r#"
actions: "allocate"
tiers:
- plugins:
  - name: predicates
    arguments:
      predicate.NodePortsEnable: false
      predicate.TaintTolerationEnable: "false"
  - name: nodeorder
    arguments:
      mostrequested.weight: 10
      leastrequested.weight: 0
configurations:
- name: allocate
  arguments:
    candidateNodeCount: 5
"#,
        )
        .unwrap();
        assert!(!p.filters.node_ports && !p.filters.taint_toleration && p.filters.node_affinity);
        assert_eq!(p.weights.most_allocated, 10);
        assert_eq!(p.weights.least_allocated, 0);
        assert_eq!(p.weights.taint_toleration, 3);
        assert_eq!(p.candidate_node_count, 5);
    }

    #[test]
    fn enable_flags_are_honoured() {
        let p = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    enablePredicate: false\n  - name: nodeorder\n    enableNodeOrder: false\n",
        )
        .unwrap();
        assert_eq!(p.filters, FilterSwitches::OFF);
        assert!(!p.filters.node_affinity && !p.filters.node_ports && !p.filters.taint_toleration);
        assert!(p.filters.fit && p.filters.node_unschedulable && p.filters.node_name);
        assert_eq!(p.weights, ScoreWeights::NONE);
    }

    /// The error without its line.
    fn bare(e: ConfError) -> ConfError {
        match e {
            ConfError::At { error, .. } => *error,
            e => e,
        }
    }

    #[test]
    fn rejects_unknown_actions_and_bad_values() {
        assert_eq!(
            parse("actions: \"enqueue, allocate, backfill\"\n"),
            Err(ConfError::At {
                line: 1,
                error: Box::new(ConfError::UnknownAction("enqueue".into()))
            })
        );
        assert_eq!(
            parse("tiers: []\n").map_err(bare),
            Err(ConfError::NoActions)
        );
        let e = parse("actions: allocate\nconfigurations:\n- name: allocate\n  arguments:\n    candidateNodeCount: 0\n").unwrap_err();
        assert!(e.to_string().contains("candidateNodeCount"), "{e}");
        let e = parse("actions: allocate\nconfigurations:\n- name: allocate\n  arguments:\n    candidateNodeCount: -2\n").unwrap_err();
        assert!(matches!(bare(e), ConfError::ArgumentValue { .. }));
        let e = parse("actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: heavy\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 6: argument \"leastrequested.weight\" of plugin \"nodeorder\": expected an integer, got string \"heavy\""
        );
        let e = parse("actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.NodeAffinityEnable: 3\n").unwrap_err();
        assert!(matches!(bare(e), ConfError::ArgumentType { .. }));
        assert!(matches!(parse("actions: [1, 2"), Err(ConfError::Yaml(_))));
    }

    #[test]
    fn unknown_plugins_keys_and_actions_are_rejected_at_their_line() {
        let e = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: no-such-plugin\n",
        )
        .unwrap_err();
        assert_eq!(
            bare(e.clone()),
            ConfError::UnknownPlugin("no-such-plugin".into())
        );
        assert!(
            e.to_string()
                .starts_with("line 5: unknown plugin \"no-such-plugin\""),
            "{e}"
        );
        let e = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments:\n      leastrequested.weight: 1\n      leastrequested.wieght: 2\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 7: unknown argument \"leastrequested.wieght\" of plugin \"nodeorder\""
        );
        let e = parse("actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments: {predicate.NodeAfinityEnable: true}\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 5: unknown argument \"predicate.NodeAfinityEnable\""),
            "{e}"
        );
        let e = parse("actions: allocate\nconfigurations:\n- name: allocate\n  arguments:\n    candidateNodeCnt: 2\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 5: unknown argument \"candidateNodeCnt\""),
            "{e}"
        );
        let e = parse("actions: allocate\nconfigurations:\n- name: alocate\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 3: unknown action \"alocate\""),
            "{e}"
        );
        // Upstream's proportional predicate keys and batch actions: warnings, not errors.
        let p = parse("actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.ProportionalEnable: true\n      predicate.resources.nvidia.com/gpu.cpu: 4\nconfigurations:\n- name: backfill\n").unwrap();
        assert_eq!(p.warnings.len(), 3, "{:?}", p.warnings);
    }

    #[test]
    fn unsupported_plugins_and_arguments_are_explicit_warnings() {
        let p = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n    arguments:\n      predicate.DynamicResourceAllocationEnable: true\n  - name: nodeorder\n    arguments:\n      imagelocality.weight: 2\n",
        )
        .unwrap();
        assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
        assert!(p.warnings.iter().any(|w| w.contains("gang")));
        assert!(p.dynamic_resources);
    }

    /// Upstream ignores `predicate.DynamicResourceAllocationEnable`; Magma honours it (a pod
    /// with claims then stays pending with a condition saying so), and it is on by default.
    #[test]
    fn the_dra_switch_is_read_and_on_by_default() {
        assert!(Profile::default().dynamic_resources);
        let off = |v: &str| {
            parse(&format!(
                "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.DynamicResourceAllocationEnable: {v}\n"
            ))
        };
        assert!(!off("false").unwrap().dynamic_resources);
        assert!(off("true").unwrap().dynamic_resources);
        assert!(off("maybe").is_err());
    }

    #[test]
    fn sampling_matches_upstream_examples() {
        let s = Sampling::default();
        assert_eq!(s.nodes_to_find(50), 50);
        assert_eq!(s.nodes_to_find(100), 100);
        assert_eq!(s.nodes_to_find(1000), 420);
        assert_eq!(s.nodes_to_find(5000), 500);
        assert_eq!(s.nodes_to_find(6000), 300);
        assert_eq!(s.nodes_to_find(10000), 500);
        assert_eq!(s.nodes_to_find(50000), 2500);
        let fixed = Sampling::new(100, 5, 100).unwrap();
        assert_eq!(fixed.nodes_to_find(10000), 10000);
        assert!(Sampling::new(0, 5, 0).is_err());
        assert!(Sampling::new(100, 101, 0).is_err());
        assert!(Sampling::new(100, 5, -1).is_err());
    }

    #[test]
    fn batch_config_from_upstream_repo_is_rejected() {
        let batch = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n";
        assert!(matches!(
            parse(batch).map_err(bare),
            Err(ConfError::UnknownAction(_))
        ));
    }
}
