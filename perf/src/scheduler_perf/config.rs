//! The scheduler_perf file format (`<topic>/performance-config.yaml`, README.md beside it): a
//! list of test cases, each a `workloadTemplate` (ops) with `workloads` that give the `params`
//! the ops refer to as `$name`. Parsing keeps every field it does not know, so the support
//! check can report it instead of dropping it; [`resolve`] turns one workload into concrete
//! [`Op`]s with all `$params` substituted and all template paths resolved against the file's
//! directory (upstream runs `go test` in the topic directory and opens the paths as given).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestCase {
    pub name: String,
    #[serde(default)]
    pub workload_template: Vec<Value>,
    #[serde(default)]
    pub workloads: Vec<Workload>,
    #[serde(default)]
    pub default_pod_template_path: Option<String>,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub threshold_metric_selector: Option<Value>,
    /// Fields this harness does not interpret (reported by the support check).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    pub name: String,
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// A number, or a map from topic name to number.
    #[serde(default)]
    pub threshold: Option<Value>,
    #[serde(default)]
    pub threshold_metric_selector: Option<Value>,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A parsed file and where its relative paths start.
#[derive(Debug, Clone)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub dir: PathBuf,
    /// The directory's name: upstream's topic, the key of per-topic thresholds.
    pub topic: String,
    pub test_cases: Vec<TestCase>,
}

pub fn load(path: &Path) -> anyhow::Result<ConfigFile> {
    use anyhow::Context;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: Value = serde_saphyr::from_str(&text)
        .with_context(|| format!("{}: not valid YAML", path.display()))?;
    let test_cases: Vec<TestCase> = serde_json::from_value(value).with_context(|| {
        format!(
            "{}: not a list of scheduler_perf test cases",
            path.display()
        )
    })?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let topic = std::fs::canonicalize(&dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    Ok(ConfigFile {
        path: path.to_path_buf(),
        dir,
        topic,
        test_cases,
    })
}

/// upstream's label filter (`-perf-scheduling-label-filter`): comma-separated labels, `-x`
/// must be absent, `x` or `+x` present. A workload has its own and its test case's labels.
pub fn labels_match(filter: &str, labels: &[String]) -> bool {
    filter
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|l| match l.strip_prefix('-') {
            Some(neg) => !labels.iter().any(|x| x == neg),
            None => {
                let pos = l.strip_prefix('+').unwrap_or(l);
                labels.iter().any(|x| x == pos)
            }
        })
}

/// A template path with the parameters the op passes to it.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateRef {
    pub path: PathBuf,
    pub params: BTreeMap<String, Value>,
}

/// One op of a workload, parameters substituted.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    CreateNodes {
        count: usize,
        template: Option<TemplateRef>,
        strategy: NodeStrategy,
    },
    CreateNamespaces {
        prefix: String,
        count: usize,
        template: Option<PathBuf>,
    },
    CreatePods {
        count: usize,
        namespace: Option<String>,
        /// `None`: the test case's default, or upstream's base pod.
        template: Option<TemplateRef>,
        collect_metrics: bool,
        skip_wait: bool,
        signature_batch: usize,
        /// `persistentVolumeTemplatePath` and `persistentVolumeClaimTemplatePath`: each pod gets
        /// its own PV and claim, bound to each other (upstream's
        /// `CreatePodWithPersistentVolume` with `bindVolume`).
        volumes: Option<PodVolumeTemplates>,
        /// `steadyState` with its `duration`: keep `count` pods in the namespace for that long,
        /// deleting them all and creating the next `count` each time `count` more got
        /// scheduled (upstream's `createPodsSteadily`).
        steady_state: Option<Duration>,
    },
    /// `createPodSets`: its `createPodsOp` once per namespace `<namespacePrefix>-<i>`, `i` below
    /// `count`, one after another (each waits as that op would).
    CreatePodSets(Vec<Op>),
    DeletePods {
        namespace: String,
        labels: BTreeMap<String, String>,
        per_second: u32,
        skip_wait: bool,
    },
    Churn {
        mode: ChurnMode,
        number: usize,
        interval: Duration,
        namespace: Option<String>,
        templates: Vec<PathBuf>,
    },
    Barrier {
        namespaces: Vec<String>,
        labels: BTreeMap<String, String>,
        attempted: bool,
    },
    Sleep(Duration),
    StartCollectingMetrics {
        name: String,
        namespaces: Vec<String>,
        labels: BTreeMap<String, String>,
    },
    StopCollectingMetrics,
    /// `createAny`: `count` objects (1 when unset) rendered from the template with `.Index`,
    /// `.Count` and `templateParams`, created one after another in `namespace` (for namespaced
    /// kinds).
    CreateAny {
        template: TemplateRef,
        count: usize,
        namespace: Option<String>,
    },
    /// `createResourceDriver`: a ResourceSlice of `max_claims_per_node` devices of `driver` for
    /// every node whose name matches the `nodes` glob (see `super::dra`).
    CreateResourceDriver {
        driver: String,
        max_claims_per_node: usize,
        nodes: String,
    },
    /// `allocResourceClaims`: allocate every unallocated claim of `namespace` (all namespaces
    /// when `None`) as a previous scheduler would have (see `super::dra`).
    AllocResourceClaims {
        namespace: Option<String>,
    },
    UpdateAny {
        template: PathBuf,
        count: usize,
        namespace: Option<String>,
        per_second: u32,
        /// Update through these subresources (e.g. `resize`) instead of the object itself.
        subresources: Vec<String>,
    },
}

/// The PV and claim templates of a `createPods` op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodVolumeTemplates {
    pub pv: PathBuf,
    pub pvc: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChurnMode {
    /// Create until `number` (0: forever).
    Create,
    /// A ring of `number` objects per template: each tick deletes the slot's object if it has
    /// one, else creates one.
    Recreate,
}

/// upstream's `PrepareNodeStrategy` choices (at most one; `nodeAllocatableStrategy` wins,
/// then `labelNodePrepareStrategy`, then `uniqueNodeLabelStrategy`).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum NodeStrategy {
    #[default]
    Trivial,
    /// `labelKey` set to `labelValues` round-robin.
    Label { key: String, values: Vec<String> },
    /// `labelKey` set to a fresh UUID per node.
    UniqueLabel { key: String },
    /// `nodeAllocatable` written over `status.allocatable`; `csiNodeAllocatable` as each node's
    /// CSINode drivers (`driver → count`).
    Allocatable {
        node: BTreeMap<String, String>,
        csi: BTreeMap<String, Option<i64>>,
    },
}

/// Why a workload cannot be resolved or run as written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unsupported {
    pub what: String,
    pub reason: String,
}

/// Substitutes `$name` from the workload's params. `Ok(None)` when `v` is absent.
fn param<'a>(w: &'a Workload, v: Option<&'a Value>) -> anyhow::Result<Option<&'a Value>> {
    match v {
        Some(Value::String(s)) if s.starts_with('$') => {
            let key = &s[1..];
            w.params.get(key).map(Some).ok_or_else(|| {
                anyhow::anyhow!("parameter {key:?} not found in workload {:?}", w.name)
            })
        }
        other => Ok(other),
    }
}

fn count_of(w: &Workload, op: &Value, field: &str, param_field: &str) -> anyhow::Result<usize> {
    let v = match op.get(param_field) {
        Some(p) => param(w, Some(p))?,
        None => op.get(field),
    };
    match v {
        None => Ok(0),
        Some(v) => v
            .as_u64()
            .map(|n| n as usize)
            .ok_or_else(|| anyhow::anyhow!("{field}: expected a non-negative integer, got {v}")),
    }
}

fn duration_of(
    w: &Workload,
    op: &Value,
    field: &str,
    param_field: &str,
) -> anyhow::Result<Duration> {
    let v = match op.get(param_field) {
        Some(p) => param(w, Some(p))?,
        None => op.get(field),
    };
    match v {
        None => Ok(Duration::ZERO),
        Some(Value::String(s)) => {
            kube_sim::parse_duration(s).map_err(|e| anyhow::anyhow!("{field}: {e}"))
        }
        Some(v) => anyhow::bail!("{field}: expected a Go duration string, got {v}"),
    }
}

fn string_map(v: Option<&Value>, field: &str) -> anyhow::Result<BTreeMap<String, String>> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Ok((k.clone(), other.to_string())),
            })
            .collect(),
        Some(v) => anyhow::bail!("{field}: expected a map, got {v}"),
    }
}

fn strings(v: Option<&Value>, field: &str) -> anyhow::Result<Vec<String>> {
    match v {
        None | Some(Value::Null) => Ok(vec![]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| anyhow::anyhow!("{field}: expected strings, got {x}"))
            })
            .collect(),
        Some(v) => anyhow::bail!("{field}: expected a list, got {v}"),
    }
}

fn str_field(op: &Value, field: &str) -> anyhow::Result<Option<String>> {
    match op.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => anyhow::bail!("{field}: expected a string, got {v}"),
    }
}

fn bool_field(w: &Workload, op: &Value, field: &str) -> anyhow::Result<bool> {
    match param(w, op.get(field))? {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => anyhow::bail!("{field}: expected a boolean, got {v}"),
    }
}

/// `templateParams` with `$name` values resolved (upstream's `resolveTemplateParams`).
fn template_params(w: &Workload, op: &Value) -> anyhow::Result<BTreeMap<String, Value>> {
    let Some(m) = op.get("templateParams") else {
        return Ok(BTreeMap::new());
    };
    let m = m
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("templateParams: expected a map"))?;
    m.iter()
        .map(|(k, v)| {
            Ok((
                k.clone(),
                param(w, Some(v))?.cloned().unwrap_or(Value::Null),
            ))
        })
        .collect()
}

/// The fields each implemented opcode interprets; anything else on the op is unsupported.
fn known_fields(opcode: &str) -> &'static [&'static str] {
    match opcode {
        "createNodes" => &[
            "count",
            "countParam",
            "nodeTemplatePath",
            "nodeAllocatableStrategy",
            "labelNodePrepareStrategy",
            "uniqueNodeLabelStrategy",
            "templateParams",
        ],
        "createNamespaces" => &["prefix", "count", "countParam", "namespaceTemplatePath"],
        "createPods" => &[
            "count",
            "countParam",
            "countMultiplierParam",
            "collectMetrics",
            "namespace",
            "podTemplatePath",
            "persistentVolumeTemplatePath",
            "persistentVolumeClaimTemplatePath",
            "skipWaitToCompletion",
            "templateParams",
            "signatureBatchSize",
            "signatureBatchSizeParam",
            "steadyState",
            "steadyStateParam",
            "duration",
            "durationParam",
        ],
        "createPodSets" => &["count", "countParam", "namespacePrefix", "createPodsOp"],
        "deletePods" => &[
            "namespace",
            "labelSelector",
            "skipWaitToCompletion",
            "deletePodsPerSecond",
        ],
        "churn" => &[
            "mode",
            "number",
            "intervalMilliseconds",
            "namespace",
            "templatePaths",
        ],
        "barrier" => &["namespaces", "labelSelector", "stageRequirement"],
        "sleep" => &["duration", "durationParam"],
        "startCollectingMetrics" => &["name", "namespaces", "labelSelector"],
        "stopCollectingMetrics" => &[],
        "createAny" => &[
            "templatePath",
            "count",
            "countParam",
            "namespace",
            "templateParams",
        ],
        "createResourceDriver" => &[
            "driverName",
            "maxClaimsPerNode",
            "maxClaimsPerNodeParam",
            "nodes",
        ],
        "allocResourceClaims" => &["namespace"],
        "updateAny" => &[
            "templatePath",
            "count",
            "countParam",
            "namespace",
            "updatePerSecond",
            "subresources",
        ],
        _ => &[],
    }
}

/// Why a field of an implemented opcode is not implemented here.
fn field_reason(opcode: &str, field: &str) -> String {
    format!("field {field:?} of {opcode} is not implemented by this harness")
}

fn opcode_reason(opcode: &str) -> String {
    match opcode {
        "updateDeviceConditions" | "checkPodScheduled" => {
            "DRA device binding conditions (DRADeviceBindingConditions): Magma does not wait for binding conditions".into()
        }
        "createPodGroups" | "waitForPodGroups" => {
            "PodGroups (gang scheduling): Magma does not schedule PodGroups".into()
        }
        "startCollectingProfile" | "stopCollectingProfile" => {
            "Go profiles of kube-scheduler's own process have no Magma equivalent".into()
        }
        _ => "unknown opcode".into(),
    }
}

/// Resolves a workload into ops; unsupported opcodes and fields are collected, not fatal.
pub fn resolve(
    file: &ConfigFile,
    tc: &TestCase,
    w: &Workload,
) -> anyhow::Result<(Vec<Op>, Vec<Unsupported>)> {
    let path = |p: &str| file.dir.join(p);
    let mut ops = Vec::new();
    let mut unsupported = Vec::new();
    for (i, op) in tc.workload_template.iter().enumerate() {
        let opcode = op
            .get("opcode")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("op {i}: missing opcode"))?;
        let known = known_fields(opcode);
        if known.is_empty() && opcode != "stopCollectingMetrics" {
            unsupported.push(Unsupported {
                what: format!("op {i}: opcode {opcode}"),
                reason: opcode_reason(opcode),
            });
            continue;
        }
        if let Some(m) = op.as_object() {
            for k in m.keys() {
                if k != "opcode" && !known.contains(&k.as_str()) {
                    unsupported.push(Unsupported {
                        what: format!("op {i}: {opcode}.{k}"),
                        reason: field_reason(opcode, k),
                    });
                }
            }
        }
        let ctx = |e: anyhow::Error| e.context(format!("op {i} ({opcode})"));
        ops.push(resolve_op(w, op, opcode, &path, tc).map_err(ctx)?);
    }
    Ok((ops, unsupported))
}

fn resolve_op(
    w: &Workload,
    op: &Value,
    opcode: &str,
    path: &dyn Fn(&str) -> PathBuf,
    tc: &TestCase,
) -> anyhow::Result<Op> {
    Ok(match opcode {
        "createNodes" => Op::CreateNodes {
            count: count_of(w, op, "count", "countParam")?,
            template: str_field(op, "nodeTemplatePath")?.map(|p| TemplateRef {
                path: path(&p),
                params: BTreeMap::new(),
            }),
            strategy: node_strategy(op)?,
        }
        .with_params(template_params(w, op)?),
        "createNamespaces" => Op::CreateNamespaces {
            prefix: str_field(op, "prefix")?.unwrap_or_default(),
            count: count_of(w, op, "count", "countParam")?,
            template: str_field(op, "namespaceTemplatePath")?.map(|p| path(&p)),
        },
        "createPods" => {
            let mut count = count_of(w, op, "count", "countParam")?;
            if let Some(m) = op.get("countMultiplierParam") {
                let m = param(w, Some(m))?
                    .and_then(Value::as_u64)
                    .ok_or_else(|| anyhow::anyhow!("countMultiplierParam: not an integer"))?;
                count *= m as usize;
            }
            let collect_metrics = bool_field(w, op, "collectMetrics")?;
            let skip_wait = bool_field(w, op, "skipWaitToCompletion")?;
            anyhow::ensure!(
                !(collect_metrics && skip_wait),
                "collectMetrics and skipWaitToCompletion cannot be true at the same time"
            );
            let steady = match op.get("steadyStateParam") {
                Some(p) => match param(w, Some(p))? {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(b)) => *b,
                    Some(v) => anyhow::bail!("steadyStateParam: expected a boolean, got {v}"),
                },
                None => bool_field(w, op, "steadyState")?,
            };
            // As upstream's createPodsOp.isValid.
            anyhow::ensure!(
                !(steady && skip_wait),
                "SkipWaitToCompletion and SteadyState cannot be true at the same time"
            );
            let duration = duration_of(w, op, "duration", "durationParam")?;
            anyhow::ensure!(
                !steady || !duration.is_zero(),
                "when creating pods in a steady state, the test duration must be > 0"
            );
            let template = str_field(op, "podTemplatePath")?
                .or_else(|| tc.default_pod_template_path.clone())
                .map(|p| TemplateRef {
                    path: path(&p),
                    params: BTreeMap::new(),
                });
            let params = template_params(w, op)?;
            let volumes = match (
                str_field(op, "persistentVolumeTemplatePath")?,
                str_field(op, "persistentVolumeClaimTemplatePath")?,
            ) {
                (Some(pv), Some(pvc)) => Some(PodVolumeTemplates {
                    pv: path(&pv),
                    pvc: path(&pvc),
                }),
                (None, None) => None,
                _ => anyhow::bail!(
                    "persistentVolumeTemplatePath and persistentVolumeClaimTemplatePath must be set together"
                ),
            };
            Op::CreatePods {
                count,
                namespace: str_field(op, "namespace")?,
                template: template.map(|t| TemplateRef { params, ..t }),
                collect_metrics,
                skip_wait,
                signature_batch: count_of(w, op, "signatureBatchSize", "signatureBatchSizeParam")?
                    .max(1),
                volumes,
                steady_state: steady.then_some(duration),
            }
        }
        "createPodSets" => {
            let count = count_of(w, op, "count", "countParam")?;
            let prefix = str_field(op, "namespacePrefix")?
                .ok_or_else(|| anyhow::anyhow!("namespacePrefix is required"))?;
            let inner = op
                .get("createPodsOp")
                .ok_or_else(|| anyhow::anyhow!("createPodsOp is required"))?;
            let base = resolve_op(w, inner, "createPods", path, tc)
                .map_err(|e| e.context("createPodsOp"))?;
            Op::CreatePodSets(
                (0..count)
                    .map(|i| {
                        let mut op = base.clone();
                        if let Op::CreatePods { namespace, .. } = &mut op {
                            *namespace = Some(format!("{prefix}-{i}"));
                        }
                        op
                    })
                    .collect(),
            )
        }
        "deletePods" => Op::DeletePods {
            namespace: str_field(op, "namespace")?
                .ok_or_else(|| anyhow::anyhow!("namespace is required"))?,
            labels: string_map(op.get("labelSelector"), "labelSelector")?,
            per_second: count_of(w, op, "deletePodsPerSecond", "-")? as u32,
            skip_wait: bool_field(w, op, "skipWaitToCompletion")?,
        },
        "churn" => {
            let mode = match str_field(op, "mode")?.as_deref() {
                Some("create") => ChurnMode::Create,
                Some("recreate") => ChurnMode::Recreate,
                other => anyhow::bail!("invalid mode: {other:?}. must be one of [recreate create]"),
            };
            let number = count_of(w, op, "number", "-")?;
            anyhow::ensure!(
                !(mode == ChurnMode::Recreate && number == 0),
                "number cannot be 0 when mode is recreate"
            );
            let templates: Vec<PathBuf> = strings(op.get("templatePaths"), "templatePaths")?
                .iter()
                .map(|p| path(p))
                .collect();
            anyhow::ensure!(
                !templates.is_empty(),
                "at least one template spec file needs to be specified"
            );
            let ms = op
                .get("intervalMilliseconds")
                .and_then(Value::as_u64)
                .filter(|&m| m > 0)
                .unwrap_or(500);
            Op::Churn {
                mode,
                number,
                interval: Duration::from_millis(ms),
                namespace: str_field(op, "namespace")?,
                templates,
            }
        }
        "barrier" => Op::Barrier {
            namespaces: strings(op.get("namespaces"), "namespaces")?,
            labels: string_map(op.get("labelSelector"), "labelSelector")?,
            attempted: match str_field(op, "stageRequirement")?.as_deref() {
                None | Some("") | Some("Scheduled") => false,
                Some("Attempted") => true,
                Some(s) => anyhow::bail!("invalid StageRequirement {s}"),
            },
        },
        "sleep" => Op::Sleep(duration_of(w, op, "duration", "durationParam")?),
        "startCollectingMetrics" => {
            let namespaces = strings(op.get("namespaces"), "namespaces")?;
            anyhow::ensure!(!namespaces.is_empty(), "namespaces cannot be empty");
            Op::StartCollectingMetrics {
                name: str_field(op, "name")?.unwrap_or_default(),
                namespaces,
                labels: string_map(op.get("labelSelector"), "labelSelector")?,
            }
        }
        "stopCollectingMetrics" => Op::StopCollectingMetrics,
        "createAny" => Op::CreateAny {
            template: TemplateRef {
                path: path(
                    &str_field(op, "templatePath")?
                        .ok_or_else(|| anyhow::anyhow!("TemplatePath must be set"))?,
                ),
                params: template_params(w, op)?,
            },
            count: match op.get("count").or(op.get("countParam")) {
                None => 1,
                Some(_) => count_of(w, op, "count", "countParam")?,
            },
            namespace: str_field(op, "namespace")?.filter(|n| !n.is_empty()),
        },
        "createResourceDriver" => {
            let driver = str_field(op, "driverName")?.unwrap_or_default();
            anyhow::ensure!(!driver.is_empty(), "DriverName must be set");
            let nodes = str_field(op, "nodes")?.unwrap_or_default();
            anyhow::ensure!(!nodes.is_empty(), "Nodes must be set");
            Op::CreateResourceDriver {
                driver,
                max_claims_per_node: count_of(w, op, "maxClaimsPerNode", "maxClaimsPerNodeParam")?,
                nodes,
            }
        }
        "allocResourceClaims" => Op::AllocResourceClaims {
            namespace: str_field(op, "namespace")?.filter(|n| !n.is_empty()),
        },
        "updateAny" => Op::UpdateAny {
            template: path(
                &str_field(op, "templatePath")?
                    .ok_or_else(|| anyhow::anyhow!("TemplatePath must be set"))?,
            ),
            count: match op.get("count").or(op.get("countParam")) {
                None => 1,
                Some(_) => count_of(w, op, "count", "countParam")?,
            },
            namespace: str_field(op, "namespace")?,
            per_second: count_of(w, op, "updatePerSecond", "-")? as u32,
            subresources: strings(op.get("subresources"), "subresources")?,
        },
        other => anyhow::bail!("opcode {other} has no resolver"),
    })
}

impl Op {
    fn with_params(self, params: BTreeMap<String, Value>) -> Op {
        match self {
            Op::CreateNodes {
                count,
                template,
                strategy,
            } => Op::CreateNodes {
                count,
                template: template.map(|t| TemplateRef { params, ..t }),
                strategy,
            },
            other => other,
        }
    }
}

fn node_strategy(op: &Value) -> anyhow::Result<NodeStrategy> {
    if let Some(s) = op.get("nodeAllocatableStrategy") {
        let node = string_map(s.get("nodeAllocatable"), "nodeAllocatable")?;
        let mut csi = BTreeMap::new();
        if let Some(m) = s.get("csiNodeAllocatable").and_then(Value::as_object) {
            for (driver, res) in m {
                csi.insert(driver.clone(), res.get("count").and_then(Value::as_i64));
            }
        }
        return Ok(NodeStrategy::Allocatable { node, csi });
    }
    if let Some(s) = op.get("labelNodePrepareStrategy") {
        let key = str_field(s, "labelKey")?
            .ok_or_else(|| anyhow::anyhow!("labelNodePrepareStrategy.labelKey is required"))?;
        let values = strings(s.get("labelValues"), "labelValues")?;
        anyhow::ensure!(
            !values.is_empty(),
            "labelNodePrepareStrategy.labelValues is empty"
        );
        return Ok(NodeStrategy::Label { key, values });
    }
    if let Some(s) = op.get("uniqueNodeLabelStrategy") {
        let key = str_field(s, "labelKey")?
            .ok_or_else(|| anyhow::anyhow!("uniqueNodeLabelStrategy.labelKey is required"))?;
        return Ok(NodeStrategy::UniqueLabel { key });
    }
    Ok(NodeStrategy::Trivial)
}

/// The workload's threshold for `topic` (a number, or a per-topic map).
pub fn threshold(w: &Workload, topic: &str) -> Option<f64> {
    match w.threshold.as_ref()? {
        Value::Number(n) => n.as_f64(),
        Value::Object(m) => m.get(topic).and_then(Value::as_f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
- name: Basic
  defaultPodTemplatePath: ../templates/pod.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
    nodeTemplatePath: templates/node.yaml
    templateParams:
      zone: $zone
      fixed: 3
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
  - opcode: sleep
    durationParam: $pause
  - opcode: createPods
    count: 2
    steadyState: true
    duration: 3s
  - opcode: startCollectingProfile
  workloads:
  - name: small
    labels: [integration-test]
    threshold: 100
    params: {initNodes: 5, measurePods: 10, zone: a, pause: 1500ms}
"#;

    fn parse(text: &str) -> ConfigFile {
        let v: Value = serde_saphyr::from_str(text).unwrap();
        ConfigFile {
            path: "/cfg/misc/performance-config.yaml".into(),
            dir: "/cfg/misc".into(),
            topic: "misc".into(),
            test_cases: serde_json::from_value(v).unwrap(),
        }
    }

    #[test]
    fn params_are_substituted_and_paths_resolved_against_the_file() {
        let f = parse(FILE);
        let tc = &f.test_cases[0];
        let (ops, unsupported) = resolve(&f, tc, &tc.workloads[0]).unwrap();
        assert_eq!(
            ops[0],
            Op::CreateNodes {
                count: 5,
                template: Some(TemplateRef {
                    path: "/cfg/misc/templates/node.yaml".into(),
                    params: BTreeMap::from([
                        ("fixed".to_string(), Value::from(3)),
                        ("zone".to_string(), Value::from("a")),
                    ]),
                }),
                strategy: NodeStrategy::Trivial,
            }
        );
        match &ops[1] {
            Op::CreatePods {
                count,
                template,
                collect_metrics,
                ..
            } => {
                assert_eq!(*count, 10);
                assert!(*collect_metrics);
                assert_eq!(
                    template.as_ref().unwrap().path,
                    PathBuf::from("/cfg/misc/../templates/pod.yaml")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ops[2], Op::Sleep(Duration::from_millis(1500)));
        let whats: Vec<&str> = unsupported.iter().map(|u| u.what.as_str()).collect();
        assert_eq!(whats, ["op 4: opcode startCollectingProfile"]);
        assert!(unsupported[0].reason.contains("Go profiles"));
        match &ops[3] {
            Op::CreatePods {
                count,
                steady_state,
                ..
            } => assert_eq!((*count, *steady_state), (2, Some(Duration::from_secs(3)))),
            other => panic!("{other:?}"),
        }
        assert_eq!(threshold(&tc.workloads[0], "misc"), Some(100.0));
    }

    #[test]
    fn a_missing_param_is_an_error_naming_it() {
        let f = parse(&FILE.replace("measurePods: 10, ", ""));
        let tc = &f.test_cases[0];
        let e = resolve(&f, tc, &tc.workloads[0]).unwrap_err();
        assert!(
            format!("{e:#}").contains("\"measurePods\" not found"),
            "{e:#}"
        );
    }

    #[test]
    fn create_pod_sets_run_their_op_once_per_prefixed_namespace() {
        let f = parse(
            r#"
- name: Sets
  defaultPodTemplatePath: ../templates/pod.yaml
  workloadTemplate:
  - opcode: createPodSets
    countParam: $initNamespaces
    namespacePrefix: init-ns
    createPodsOp:
      opcode: createPods
      countParam: $initPodsPerNamespace
  workloads:
  - name: small
    params: {initNamespaces: 2, initPodsPerNamespace: 3}
"#,
        );
        let tc = &f.test_cases[0];
        let (ops, unsupported) = resolve(&f, tc, &tc.workloads[0]).unwrap();
        assert!(unsupported.is_empty(), "{unsupported:?}");
        let [Op::CreatePodSets(sets)] = ops.as_slice() else {
            panic!("{ops:?}")
        };
        let got: Vec<(usize, Option<&str>)> = sets
            .iter()
            .map(|o| match o {
                Op::CreatePods {
                    count, namespace, ..
                } => (*count, namespace.as_deref()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, [(3, Some("init-ns-0")), (3, Some("init-ns-1"))]);
    }

    #[test]
    fn label_filter_as_upstream() {
        let l = vec!["performance".to_string(), "short".to_string()];
        assert!(labels_match("performance", &l));
        assert!(labels_match("+performance,-integration-test", &l));
        assert!(!labels_match("performance,-short", &l));
        assert!(labels_match("", &l));
    }
}
