//! Wake-up as a user meets it, with the real binary against kube-sim and kubectl: a pending pod
//! waiting for room is reported unschedulable; its own `PodScheduled=False` condition coming
//! back through the watch is not a change to the pod (no new attempt, no doubled backoff); and
//! deleting the pod that holds the room binds it with no attempt in between.

use std::time::Duration;

use crate::procs;
use procs::{SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);

fn pod(name: &str, node: Option<&str>) -> String {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n{node}  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: \"30\"\n        memory: 1Gi\n"
    )
}

#[test]
fn a_pod_waiting_for_room_is_bound_once_room_appears_without_extra_attempts() {
    let dir = procs::tmpdir("wakeup-e2e");
    let sim = SimProc::start(&dir, 1, &[]);
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pod("blocker", Some("node-00000"))),
    );
    assert!(ok, "{out}");
    let mx = free_port();
    let mut s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            "--enable-metrics",
            &format!("--listen-address=127.0.0.1:{mx}"),
        ],
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&pod("waiting", None)));
    assert!(ok, "{out}");
    wait_until("waiting is reported unschedulable", WAIT, || {
        let p = sim.kubectl_json(&["get", "pod", "waiting"]);
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "PodScheduled" && c["reason"] == "Unschedulable")
        })
    });
    // The condition comes back as a pod update: seen, and ignored.
    wait_until("the scheduler's own condition is ignored", WAIT, || {
        metric(mx, "magma_unchanged_pod_updates_total") >= 1
    });
    assert_eq!(
        metric(mx, "magma_scheduling_attempts_total"),
        1,
        "one attempt so far"
    );

    let (ok, out) = sim.kubectl(&["delete", "pod", "blocker", "--wait=false"], None);
    assert!(ok, "{out}");
    wait_until("waiting is bound once the room is free", WAIT, || {
        sim.kubectl_json(&["get", "pod", "waiting"])["spec"]["nodeName"] == "node-00000"
    });
    assert_eq!(
        metric(mx, "magma_scheduling_attempts_total"),
        2,
        "the failure and the bind, nothing in between"
    );
    s.assert_running();
}
