//! The objects a workload creates: its YAML templates rendered ([`super::template`]) and
//! parsed, upstream's base pod and base node, and the fix-ups the real API server would apply
//! on the way in.

use super::config::TemplateRef;
use super::template::{self, Env, TValue};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A template file, read once; rendered per object.
#[derive(Debug, Clone)]
pub struct Template {
    pub path: PathBuf,
    text: Arc<str>,
    params: Env,
    /// Parsed once when the file has no actions.
    fixed: Option<Value>,
}

impl Template {
    pub fn load(path: &Path, params: &BTreeMap<String, Value>) -> anyhow::Result<Template> {
        use anyhow::Context;
        let text: Arc<str> = std::fs::read_to_string(path)
            .with_context(|| format!("reading template {}", path.display()))?
            .into();
        let mut env = Env::new();
        for (k, v) in params {
            let t = TValue::from_json(v).ok_or_else(|| {
                anyhow::anyhow!("{}: template parameter {k} is not a scalar", path.display())
            })?;
            env.insert(k.clone(), t);
        }
        let fixed = if template::is_static(&text) {
            Some(parse_yaml(path, &text)?)
        } else {
            None
        };
        Ok(Template {
            path: path.to_path_buf(),
            text,
            params: env,
            fixed,
        })
    }

    pub fn from_ref(r: &TemplateRef) -> anyhow::Result<Template> {
        Template::load(&r.path, &r.params)
    }

    /// The object for `index` of `count` (`.Index`, `.Count` and the op's params).
    pub fn render(&self, index: usize, count: usize) -> anyhow::Result<Value> {
        if let Some(v) = &self.fixed {
            return Ok(v.clone());
        }
        let mut env = self.params.clone();
        env.insert("Index".into(), TValue::Int(index as i64));
        env.insert("Count".into(), TValue::Int(count as i64));
        let text = template::render(&self.text, &env)
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.path.display()))?;
        parse_yaml(&self.path, &text)
    }
}

fn parse_yaml(path: &Path, text: &str) -> anyhow::Result<Value> {
    let mut v: Value = serde_saphyr::from_str(text)
        .map_err(|e| anyhow::anyhow!("{}: not valid YAML: {e}", path.display()))?;
    anyhow::ensure!(
        v.get("kind").and_then(Value::as_str).is_some()
            && v.get("apiVersion").and_then(Value::as_str).is_some(),
        "{}: an object needs apiVersion and kind",
        path.display()
    );
    quantities_as_strings(&mut v);
    Ok(v)
}

/// YAML `cpu: 9` is a number; Kubernetes quantities travel as strings (the real server decodes
/// either and writes strings back), and typed clients only read strings.
fn quantities_as_strings(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if matches!(
                    k.as_str(),
                    "requests" | "limits" | "capacity" | "allocatable" | "overhead"
                ) && let Value::Object(q) = child
                {
                    for x in q.values_mut() {
                        if let Value::Number(n) = x {
                            *x = Value::String(n.to_string());
                        }
                    }
                }
                quantities_as_strings(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(quantities_as_strings),
        _ => {}
    }
}

/// upstream's `makeBasePod`: `generateName: pod-`, one pause container with port 80 and
/// 100m / 500Mi as limits and requests.
pub fn base_pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "pod-"},
        "spec": {"containers": [{
            "name": "pause",
            "image": "registry.k8s.io/pause:3.10.1",
            "ports": [{"containerPort": 80}],
            "resources": {
                "limits": {"cpu": "100m", "memory": "500Mi"},
                "requests": {"cpu": "100m", "memory": "500Mi"}
            }
        }]}
    })
}

/// upstream's `makeBaseNode(prefix)`: 110 pods, 4 CPU, 32Gi, Ready.
pub fn base_node(prefix: &str) -> Value {
    let res = json!({"pods": "110", "cpu": "4", "memory": "32Gi"});
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"generateName": prefix},
        "status": {
            "capacity": res,
            "allocatable": res,
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    })
}

/// The real API server defaults `status.allocatable` to `status.capacity` on a node that has
/// none (`SetDefaults_NodeStatus`); kube-sim does not, so the harness sends what the server
/// would have stored.
pub fn default_allocatable(node: &mut Value) {
    let Some(status) = node.get_mut("status").and_then(Value::as_object_mut) else {
        return;
    };
    if status.get("allocatable").is_none()
        && let Some(cap) = status.get("capacity").cloned()
    {
        status.insert("allocatable".into(), cap);
    }
}

/// Sets `spec.schedulerName` (every pod of a replayed workload goes to the scheduler under test).
pub fn set_scheduler(pod: &mut Value, scheduler: &str) {
    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("schedulerName".into(), Value::String(scheduler.into()));
    }
}

/// Lower-case alphanumerics, as upstream's `rand.String(5)` for node names.
pub fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..n)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn label_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    let meta = obj
        .as_object_mut()
        .expect("an object")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let labels = meta
        .as_object_mut()
        .expect("an object")
        .entry("labels")
        .or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels.as_object_mut().expect("an object")
}

/// CPU (millicores) and memory (bytes) a pod requests, from its containers.
pub fn pod_requests(pod: &Value) -> (i64, i64) {
    use magma_engine::model::parse_scaled;
    let mut cpu = 0;
    let mut mem = 0;
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let r = &c["resources"]["requests"];
        if let Some(q) = r["cpu"].as_str() {
            cpu += parse_scaled("cpu", q, 1000).unwrap_or(0);
        }
        if let Some(q) = r["memory"].as_str() {
            mem += parse_scaled("memory", q, 1).unwrap_or(0);
        }
    }
    (cpu, mem)
}

/// CPU (millicores) and memory (bytes) a node offers, from allocatable (or capacity).
pub fn node_allocatable(node: &Value) -> (i64, i64) {
    use magma_engine::model::parse_scaled;
    let st = &node["status"];
    let a = if st["allocatable"].is_object() {
        &st["allocatable"]
    } else {
        &st["capacity"]
    };
    let get = |k: &str, scale| {
        a[k].as_str()
            .map_or(0, |q| parse_scaled(k, q, scale).unwrap_or(0))
    };
    (get("cpu", 1000), get("memory", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_quantities_become_strings_and_allocatable_defaults_to_capacity() {
        let mut v = parse_yaml(
            Path::new("t.yaml"),
            "apiVersion: v1\nkind: Node\nstatus:\n  capacity:\n    cpu: 4\n    pods: \"110\"\n",
        )
        .unwrap();
        default_allocatable(&mut v);
        assert_eq!(v["status"]["allocatable"]["cpu"], "4");
        assert_eq!(node_allocatable(&v), (4000, 0));
        let p = parse_yaml(
            Path::new("p.yaml"),
            "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {cpu: 9, memory: 500Mi}\n",
        )
        .unwrap();
        assert_eq!(pod_requests(&p), (9000, 500 * 1024 * 1024));
    }
}
