//! `--scale-pods`: a workload with its measured pods multiplied, so that a workload Magma
//! schedules in well under two of upstream's 1 s throughput samples (a few hundred pods/s
//! thresholds, a few thousand pods) still yields a SchedulingThroughput. Not upstream's
//! workload as written: the report and the metrics file say so, and list what changed.
//!
//! What is scaled: the count of every measured `createPods` op (`collectMetrics: true`, or
//! between `startCollectingMetrics` and `stopCollectingMetrics`). Through the op's
//! `countParam` when it has one, so every other op counting by the same param scales with it;
//! a literal `count` on the op itself. Steady-state ops are left as they are (their duration,
//! not their count, sets the samples). Nodes and the pods created before the measurement are
//! not scaled: a workload whose measured pods need a node each (required hostname
//! anti-affinity) fits only up to the free nodes, which the caller chooses the factor for.

use super::config::{TestCase, Workload};
use serde_json::Value;
use std::collections::BTreeSet;

/// The scaled test case and workload, and each change as `what old → new`.
#[derive(Debug, Clone)]
pub struct Scaled {
    pub test_case: TestCase,
    pub workload: Workload,
    pub changes: Vec<String>,
}

fn scale_count(n: u64, factor: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    ((n as f64 * factor).round() as u64).max(1)
}

/// `tc`/`w` with the measured pods multiplied by `factor` (module doc).
pub fn scale_measured_pods(tc: &TestCase, w: &Workload, factor: f64) -> anyhow::Result<Scaled> {
    anyhow::ensure!(
        factor.is_finite() && factor > 0.0,
        "--scale-pods must be a positive number, got {factor}"
    );
    let mut test_case = tc.clone();
    let mut workload = w.clone();
    let mut changes = Vec::new();
    let mut params = BTreeSet::new();
    let mut collecting = false;
    for (i, op) in test_case.workload_template.iter_mut().enumerate() {
        let opcode = op.get("opcode").and_then(Value::as_str).unwrap_or("");
        match opcode {
            "startCollectingMetrics" => collecting = true,
            "stopCollectingMetrics" => collecting = false,
            "createPods" => {
                let measured = collecting || op.get("collectMetrics") == Some(&Value::Bool(true));
                let steady = op.get("steadyState") == Some(&Value::Bool(true))
                    || op.get("steadyStateParam").is_some();
                if !measured || steady {
                    continue;
                }
                match op.get("countParam").and_then(Value::as_str) {
                    Some(p) => {
                        params.insert(p.trim_start_matches('$').to_string());
                    }
                    None => {
                        let n = op.get("count").and_then(Value::as_u64).ok_or_else(|| {
                            anyhow::anyhow!("op {i}: a measured createPods without a count")
                        })?;
                        let m = scale_count(n, factor);
                        op["count"] = Value::from(m);
                        changes.push(format!("op {i} count {n} → {m}"));
                    }
                }
            }
            _ => {}
        }
    }
    for p in params {
        let v = workload
            .params
            .get_mut(&p)
            .ok_or_else(|| anyhow::anyhow!("parameter {p:?} not found in workload {:?}", w.name))?;
        let n = v
            .as_u64()
            .ok_or_else(|| anyhow::anyhow!("parameter {p:?}: expected a count, got {v}"))?;
        let m = scale_count(n, factor);
        *v = Value::from(m);
        changes.push(format!("{p} {n} → {m}"));
    }
    anyhow::ensure!(
        !changes.is_empty(),
        "--scale-pods: workload {:?} has no measured createPods op to scale",
        w.name
    );
    Ok(Scaled {
        test_case,
        workload,
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
- name: Affinity
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - opcode: createPods
    countParam: $initPods
  - opcode: createPods
    countParam: $measurePods
    collectMetrics: true
  - opcode: createAny
    templatePath: pv.yaml
    countParam: $measurePods
  - opcode: startCollectingMetrics
    namespaces: [a]
  - opcode: createPods
    count: 3
    namespace: a
  - opcode: stopCollectingMetrics
  - opcode: createPods
    count: 7
  - opcode: createPods
    count: 2
    steadyState: true
    duration: 3s
    collectMetrics: true
  workloads:
  - name: 5000Nodes
    params: {initNodes: 5000, initPods: 1000, measurePods: 2000}
"#;

    fn case() -> TestCase {
        let v: Value = serde_saphyr::from_str(FILE).unwrap();
        let mut t: Vec<TestCase> = serde_json::from_value(v).unwrap();
        t.remove(0)
    }

    #[test]
    fn measured_pods_and_what_counts_by_their_param_are_scaled_nothing_else() {
        let tc = case();
        let s = scale_measured_pods(&tc, &tc.workloads[0], 2.5).unwrap();
        let p = &s.workload.params;
        assert_eq!(p["measurePods"], Value::from(5000));
        assert_eq!(
            (p["initNodes"].clone(), p["initPods"].clone()),
            (5000.into(), 1000.into())
        );
        let ops = &s.test_case.workload_template;
        // The createAny counts by $measurePods and so scales with it, through the param.
        assert_eq!(ops[3]["countParam"], "$measurePods");
        // Measured between start/stopCollectingMetrics: its literal count, rounded.
        assert_eq!(ops[5]["count"], 8);
        // Not measured, and steady state: unchanged.
        assert_eq!(ops[7]["count"], 7);
        assert_eq!(ops[8]["count"], 2);
        assert_eq!(s.changes, ["op 5 count 3 → 8", "measurePods 2000 → 5000"]);
    }

    #[test]
    fn a_factor_must_be_positive_and_a_workload_must_have_measured_pods() {
        let tc = case();
        assert!(scale_measured_pods(&tc, &tc.workloads[0], 0.0).is_err());
        assert!(scale_measured_pods(&tc, &tc.workloads[0], f64::NAN).is_err());
        let mut none = tc.clone();
        none.workload_template.truncate(2);
        let e = scale_measured_pods(&none, &none.workloads[0], 2.0).unwrap_err();
        assert!(e.to_string().contains("no measured createPods"), "{e}");
        // Scaling down never leaves a measured op empty.
        let s = scale_measured_pods(&tc, &tc.workloads[0], 0.0001).unwrap();
        assert_eq!(s.workload.params["measurePods"], Value::from(1));
    }
}
