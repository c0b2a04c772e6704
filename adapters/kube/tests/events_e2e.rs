//! Events and conditions with the real binary against kube-sim, read back with kubectl:
//!
//! - at the default budgets every bound pod gets its `Scheduled` event ("Successfully assigned
//!   …", in `kubectl describe pod` too) and nothing is dropped;
//! - an unschedulable pod's `PodScheduled=False` condition goes out on the main client's budget
//!   ahead of a burst of bindings queued on it (a tiny `--kube-api-qps`), and its
//!   `FailedScheduling` event follows;
//! - with an events budget the user set low (`--event-qps`), a burst's surplus of `Scheduled`
//!   events is shed, counted and logged, and every bound pod is either written or counted;
//! - a pod retried while its condition waits for the budget gets one write with its latest
//!   message, not one per attempt.

use std::time::Duration;

use crate::procs;
use procs::{SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(90);

fn pods_yaml(prefix: &str, n: usize, cpu: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: {cpu}\n        memory: 64Mi\n"
            )
        })
        .collect()
}

fn events_with_reason(sim: &SimProc, reason: &str) -> Vec<serde_json::Value> {
    let v = sim.kubectl_json(&["get", "events", "-n", "default"]);
    v["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["reason"] == reason)
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

fn scheduler_metrics(mx: u16) -> String {
    format!("--listen-address=127.0.0.1:{mx}")
}

#[test]
fn every_bound_pod_gets_its_scheduled_event_at_the_default_budgets() {
    const BURST: usize = 600;
    let dir = procs::tmpdir("events-all");
    let sim = SimProc::start(&dir, 8, &[]);
    let mx = free_port();
    let _s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &["--enable-metrics", &scheduler_metrics(mx)],
    );
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pods_yaml("fit", BURST, "10m")),
    );
    assert!(ok, "{out}");
    wait_until("the burst is bound", WAIT, || {
        metric(mx, "magma_binds_confirmed_total") as usize >= BURST
    });
    wait_until("every Scheduled event is written", WAIT, || {
        events_with_reason(&sim, "Scheduled").len() >= BURST
    });
    let events = events_with_reason(&sim, "Scheduled");
    assert_eq!(events.len(), BURST, "one per pod, no more");
    let pods = sim.kubectl_json(&["get", "pods", "-n", "default"]);
    for p in pods["items"].as_array().unwrap() {
        let (name, node) = (
            p["metadata"]["name"].as_str().unwrap(),
            p["spec"]["nodeName"].as_str().unwrap(),
        );
        let want = format!("Successfully assigned default/{name} to {node}");
        assert!(
            events.iter().any(|e| e["message"] == want.as_str()
                && e["type"] == "Normal"
                && e["involvedObject"]["name"] == name),
            "no event {want:?}"
        );
    }
    let (ok, described) = sim.kubectl(&["describe", "pod", "fit-7", "-n", "default"], None);
    assert!(ok, "{described}");
    assert!(
        described.contains("Successfully assigned default/fit-7 to"),
        "{described}"
    );
    for series in [
        "magma_events_dropped_total{reason=\"Scheduled\"}",
        "magma_events_dropped_total{reason=\"FailedScheduling\"}",
        "magma_conditions_dropped_total",
    ] {
        assert_eq!(metric(mx, series), 0, "{series}");
    }
}

#[test]
fn a_condition_goes_out_ahead_of_a_burst_of_bindings_on_the_shared_budget() {
    const BURST: usize = 60;
    let dir = procs::tmpdir("events-priority");
    let sim = SimProc::start(&dir, 4, &[]);
    let mx = free_port();
    let _s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--enable-metrics",
            &scheduler_metrics(mx),
            // Five bindings a second: the burst takes twelve seconds to bind.
            "--kube-api-qps=5",
            "--kube-api-burst=1",
        ],
    );
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pods_yaml("fit", BURST, "100m")),
    );
    assert!(ok, "{out}");
    wait_until("the burst starts binding", WAIT, || {
        metric(mx, "magma_binds_confirmed_total") >= 2
    });
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&pods_yaml("huge", 1, "100")));
    assert!(ok, "{out}");
    wait_until("huge-0 reports why it is pending", WAIT, || {
        let p = sim.kubectl_json(&["get", "pod", "huge-0"]);
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "PodScheduled"
                    && c["reason"] == "Unschedulable"
                    && c["message"].as_str().is_some_and(|m| {
                        m.starts_with("0/4 nodes are unavailable: 4 Insufficient cpu")
                    })
            })
        })
    });
    let bound = metric(mx, "magma_binds_confirmed_total") as usize;
    assert!(
        bound < BURST - 10,
        "the condition waited behind the bindings ({bound} of {BURST} bound first)"
    );
    wait_until("its FailedScheduling event", WAIT, || {
        events_with_reason(&sim, "FailedScheduling").len() == 1
    });
    wait_until("the burst is bound", WAIT, || {
        metric(mx, "magma_binds_confirmed_total") as usize >= BURST
    });
    assert!(
        metric(mx, "magma_condition_write_seconds_count") >= 1,
        "the decision-to-condition latency is recorded"
    );
}

#[test]
fn a_low_events_budget_sheds_the_surplus_and_counts_it() {
    const BURST: usize = 60;
    let dir = procs::tmpdir("events-shed");
    let sim = SimProc::start(&dir, 4, &[]);
    let mx = free_port();
    let s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--enable-metrics",
            &scheduler_metrics(mx),
            // A minute of this budget holds 30 events.
            "--event-qps=0.5",
            "--event-burst=2",
        ],
    );
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pods_yaml("fit", BURST, "100m")),
    );
    assert!(ok, "{out}");
    wait_until("the burst is bound", WAIT, || {
        metric(mx, "magma_binds_confirmed_total") as usize >= BURST
    });
    let shed = metric(mx, "magma_events_dropped_total{reason=\"Scheduled\"}") as usize;
    assert!(shed > 0, "nothing shed");
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("shedding events"), "{log}");
    // Nothing lost silently: every bound pod's event is queued (or written) or counted as shed.
    let pending = metric(mx, "magma_status_writes_pending{lane=\"events\"}") as usize;
    let written = events_with_reason(&sim, "Scheduled").len();
    assert!(
        written + pending + shed >= BURST && written + shed <= BURST,
        "written {written}, pending {pending}, shed {shed}"
    );
}

fn node_yaml(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nstatus:\n  capacity:\n    cpu: \"4\"\n    memory: 32Gi\n    pods: \"110\"\n  allocatable:\n    cpu: \"4\"\n    memory: 32Gi\n    pods: \"110\"\n  conditions:\n  - type: Ready\n    status: \"True\"\n"
    )
}

/// The pod's `PodScheduled` condition message, if it has one.
fn condition_message(sim: &SimProc, pod: &str) -> Option<String> {
    let p = sim.kubectl_json(&["get", "pod", pod]);
    p["status"]["conditions"].as_array().and_then(|cs| {
        cs.iter()
            .find(|c| c["type"] == "PodScheduled")
            .and_then(|c| c["message"].as_str().map(str::to_owned))
    })
}

/// A pod retried while its condition waits for the budget gets one write with its latest
/// message, not one per attempt: on a budget of one write per 5 s, every added node changes the
/// message (`0/N nodes`), the queued write is replaced each time
/// (`magma_status_writes_coalesced_total`), and the condition ends with the last count. None is
/// dropped.
#[test]
fn a_pods_queued_condition_is_replaced_by_its_latest_message() {
    let dir = procs::tmpdir("events-coalesce");
    let sim = SimProc::start(&dir, 2, &[]);
    let mx = free_port();
    let _s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--enable-metrics",
            &scheduler_metrics(mx),
            "--kube-api-qps=0.2",
            "--kube-api-burst=1",
        ],
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&pods_yaml("huge", 1, "100")));
    assert!(ok, "{out}");
    wait_until("huge-0's first condition", WAIT, || {
        condition_message(&sim, "huge-0").is_some()
    });
    const ADDED: usize = 12;
    for i in 0..ADDED {
        let (ok, out) = sim.kubectl(
            &["create", "-f", "-"],
            Some(&node_yaml(&format!("added-{i}"))),
        );
        assert!(ok, "{out}");
    }
    let last = format!("0/{} nodes are unavailable", 2 + ADDED);
    wait_until("the condition names every node", WAIT, || {
        condition_message(&sim, "huge-0").is_some_and(|m| m.starts_with(&last))
    });
    assert!(metric(mx, "magma_status_writes_coalesced_total") > 0);
    assert_eq!(metric(mx, "magma_conditions_dropped_total"), 0);
    // One write per 5 s: far fewer FailedScheduling events than attempts.
    let failed = events_with_reason(&sim, "FailedScheduling").len();
    assert!(failed < 1 + ADDED, "{failed} FailedScheduling events");
}
