//! "Why is my pod pending?" answered at once, with the real binary against kube-sim: on a tiny
//! events budget (`--event-qps=2`), a burst's `Scheduled` events queue up (and the surplus is
//! shed, counted and logged), while an unschedulable pod's `PodScheduled=False` condition and
//! `FailedScheduling` event are written in their own lane without waiting behind them.

use std::time::Duration;

mod procs;
use procs::{SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);
const BURST: usize = 60;

fn pods_yaml(prefix: &str, n: usize, cpu: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: {cpu}\n        memory: 64Mi\n"
            )
        })
        .collect()
}

fn events_with_reason(sim: &SimProc, reason: &str) -> usize {
    let v = sim.kubectl_json(&["get", "events", "-n", "default"]);
    v["items"]
        .as_array()
        .map_or(0, |a| a.iter().filter(|e| e["reason"] == reason).count())
}

#[test]
fn conditions_never_wait_behind_scheduled_events() {
    let dir = procs::tmpdir("events-e2e");
    let sim = SimProc::start(&dir, 4, &[]);
    let mx = free_port();
    let s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--enable-metrics",
            &format!("--listen-address=127.0.0.1:{mx}"),
            "--event-qps=2",
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
    // Eight seconds of a 2/s budget hold 16 Scheduled events; the rest of the burst is shed.
    assert!(metric(mx, "magma_events_dropped_total{reason=\"Scheduled\"}") > 0);
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("shedding Scheduled events"), "{log}");

    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&pods_yaml("huge", 1, "100")));
    assert!(ok, "{out}");
    wait_until("huge-0 reports why it is pending", WAIT, || {
        let p = sim.kubectl_json(&["get", "pod", "huge-0"]);
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
        })
    });
    let scheduled_so_far = events_with_reason(&sim, "Scheduled");
    assert!(
        scheduled_so_far < 16,
        "the condition was written while Scheduled events were still queued ({scheduled_so_far} written)"
    );
    wait_until("its FailedScheduling event", WAIT, || {
        events_with_reason(&sim, "FailedScheduling") == 1
    });
    // Nothing lost: once the lane has written everything it took, every bound pod has its
    // Scheduled event or is counted as shed.
    let (_, body) = procs::http_get_blocking(mx, "/metrics");
    assert!(
        body.contains("magma_status_writes_pending{lane=\"scheduled\"} "),
        "{body}"
    );
    wait_until("the Scheduled lane is empty", WAIT, || {
        metric(mx, "magma_status_writes_pending{lane=\"scheduled\"}") == 0
    });
    let shed = metric(mx, "magma_events_dropped_total{reason=\"Scheduled\"}") as usize;
    assert_eq!(events_with_reason(&sim, "Scheduled") + shed, BURST);
    assert_eq!(
        metric(mx, "magma_status_writes_pending{lane=\"failed\"}"),
        0
    );
    assert_eq!(
        metric(
            mx,
            "magma_events_dropped_total{reason=\"FailedScheduling\"}"
        ),
        0
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
/// message, not one per attempt: on a budget of one write per 5 s, every added node changes the message
/// (`0/N nodes`), the queued write is replaced each time (`magma_status_writes_coalesced_total`),
/// and the condition ends with the last count. None is dropped.
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
            &format!("--listen-address=127.0.0.1:{mx}"),
            "--event-qps=0.2",
            "--event-burst=1",
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
    assert_eq!(
        metric(
            mx,
            "magma_events_dropped_total{reason=\"FailedScheduling\"}"
        ),
        0
    );
    // One write per 5 s: far fewer FailedScheduling events than attempts.
    let failed = events_with_reason(&sim, "FailedScheduling");
    assert!(failed < 1 + ADDED, "{failed} FailedScheduling events");
}
