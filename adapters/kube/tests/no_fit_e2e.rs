//! When a pod does not fit, as a user meets it: the real `agent-scheduler` binary against the
//! `kube-sim` binary, objects created and read back with kubectl.
//!
//! - **Preemption** (kube-scheduler's DefaultPreemption): a pod of higher priority (a
//!   PriorityClass) evicts a lower one, is nominated to its node, and is bound there once the
//!   victim is gone; the victim carries upstream's `DisruptionTarget` condition and `Preempted`
//!   event; while it terminates, the room is kept (a lower pod that would fit is not given it).
//!   Equal priority and `preemptionPolicy: Never` evict nothing and say so in upstream's words.
//!   A PodDisruptionBudget steers the choice of victim. Two high-priority pods racing for one
//!   node's room at four workers: one victim, one bound, the other told why.
//! - **Static volume binding**: two pods whose local claims could each take the one existing PV
//!   matching them: exactly one gets it (the PV's claimRef written by the scheduler, the claim
//!   bound by the simulator's PV controller); the other waits with upstream's message.
//! - **Wake-ups**: a deletion wakes only the waiting pods the freed room can take (counted in
//!   the scheduler's attempts).

use std::path::Path;
use std::time::Duration;

use crate::procs;
use procs::{Proc, SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

fn exists(sim: &SimProc, name: &str) -> bool {
    sim.kubectl(&["get", "pod", name, "-n", "default"], None).0
}

/// Wait until the pod's `PodScheduled=False` message satisfies `ok`; returns it.
fn wait_message(sim: &SimProc, pod: &str, ok: impl Fn(&str) -> bool) -> String {
    sim.wait_message(pod, |_, m| ok(m)).1
}

fn priority_class(name: &str, value: i32, never: bool) -> String {
    let policy = if never {
        "preemptionPolicy: Never\n"
    } else {
        ""
    };
    format!(
        "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: {name}\nvalue: {value}\n{policy}"
    )
}

/// The classes the tests use: `low` 0, `high` 1000, `polite` 1000 that never preempts.
fn classes(sim: &SimProc) {
    sim.create(
        &[
            priority_class("low", 0, false),
            priority_class("high", 1000, false),
            priority_class("polite", 1000, true),
        ]
        .concat(),
    );
}

/// A pod of `class` asking for `cpu`; `node` binds it there directly (another scheduler's
/// placement), `labels` are `key: value` lines.
fn pod(name: &str, class: &str, cpu: &str, node: Option<&str>, labels: &str) -> String {
    let node = node.map_or(String::new(), |n| format!("  nodeName: {n}\n"));
    let labels = if labels.is_empty() {
        String::new()
    } else {
        format!("  labels:\n    {labels}\n")
    };
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n{labels}spec:\n  schedulerName: agent-scheduler\n  priorityClassName: {class}\n{node}  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: {cpu}\n        memory: 64Mi\n"
    )
}

fn scheduler(dir: &Path, sim: &SimProc, workers: usize) -> (Proc, u16) {
    let port = free_port();
    let p = start_scheduler(
        dir,
        sim,
        "agent-scheduler",
        &[
            &format!("--scheduler-worker-count={workers}"),
            "--enable-metrics",
            &format!("--listen-address=127.0.0.1:{port}"),
        ],
    );
    (p, port)
}

/// The scheduler's requests of `verb` on pods (`subresource` "" for the pod itself), by pod
/// name, as the simulator recorded them (kubectl's own are left out).
fn pod_requests(sim: &SimProc, verb: &str, subresource: &str) -> Vec<String> {
    sim.records_blocking("requests")
        .as_array()
        .expect("requests")
        .iter()
        .filter(|r| {
            r["verb"] == verb
                && r["resource"] == "pods"
                && r["subresource"] == subresource
                && !r["user_agent"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("kubectl")
        })
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

/// The case: a 2-CPU node holds a priority-0 pod of 1.5 CPU; a priority-1000 pod of 1
/// CPU evicts it. The simulated kubelet never finishes terminating pods here, so the victim
/// stays visible while it terminates: its condition, the preemptor's nomination and the kept
/// room are checked then; a forced deletion ends it and the preemptor is bound in its room.
#[test]
fn a_higher_priority_pod_evicts_a_lower_one_and_is_bound_in_its_room() {
    let dir = procs::tmpdir("no-fit-preempt");
    let sim = SimProc::start(
        &dir,
        1,
        &["--node-cpu", "2", "--termination-delay", "never"],
    );
    classes(&sim);
    let (_s, mx) = scheduler(&dir, &sim, 1);
    sim.create(&pod("low", "low", "1500m", None, ""));
    let node = sim.wait_bound("low");
    sim.create(&pod("high", "high", "1", None, ""));

    // The victim: DisruptionTarget, then deleted gracefully; a Preempted event.
    wait_until("low is being deleted", WAIT, || {
        sim.get("pod", "low")["metadata"]["deletionTimestamp"].is_string()
    });
    let c = sim
        .condition("low", "DisruptionTarget")
        .expect("DisruptionTarget");
    assert_eq!(c["status"], "True");
    assert_eq!(c["reason"], "PreemptionByScheduler");
    assert_eq!(
        c["message"],
        "agent-scheduler: preempting to accommodate a higher priority pod"
    );
    let high_uid = sim.get("pod", "high")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    wait_until("the Preempted event", WAIT, || {
        sim.kubectl_json(&["get", "events", "-n", "default"])["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| {
                e["reason"] == "Preempted"
                    && e["type"] == "Normal"
                    && e["involvedObject"]["name"] == "low"
                    && e["message"] == format!("Preempted by pod {high_uid} on node {node}")
            })
    });
    // The preemptor: nominated there, not bound while its victim terminates.
    wait_until("high nominated", WAIT, || {
        sim.get("pod", "high")["status"]["nominatedNodeName"] == node.as_str()
    });
    assert_eq!(sim.node_of("high"), None);
    // A lower pod that fits what is free now (500m) is not given the room kept for high.
    sim.create(&pod("sneaky", "low", "500m", None, ""));
    let m = wait_message(&sim, "sneaky", |_| true);
    assert!(
        m.starts_with("0/1 nodes are unavailable: 1 Insufficient cpu."),
        "{m}"
    );
    assert_eq!(sim.node_of("sneaky"), None);

    // The victim goes: high is bound there, and sneaky beside it in what high's kept room
    // leaves (1 CPU of 2).
    let (ok, out) = sim.kubectl(
        &["delete", "pod", "low", "--grace-period=0", "--force"],
        None,
    );
    assert!(ok, "{out}");
    assert_eq!(sim.wait_bound("high"), node);
    assert_eq!(sim.wait_bound("sneaky"), node);
    assert_eq!(
        pod_requests(&sim, "delete", ""),
        ["low"],
        "one victim, one delete"
    );
    assert_eq!(metric(mx, "magma_preemptions_total"), 1);
    assert_eq!(metric(mx, "magma_preemption_victims_total"), 1);
    assert_eq!(metric(mx, "magma_preemption_to_bound_seconds_count"), 1);
    assert_eq!(metric(mx, "magma_preemption_failures_total"), 0);
}

/// Equal priority, and a class with `preemptionPolicy: Never`, evict nothing: both wait, in
/// upstream's words.
#[test]
fn equal_priority_and_never_evict_nothing() {
    let dir = procs::tmpdir("no-fit-equal-never");
    let sim = SimProc::start(&dir, 1, &["--node-cpu", "2"]);
    classes(&sim);
    let (_s, mx) = scheduler(&dir, &sim, 1);
    sim.create(&pod("low", "low", "1500m", None, ""));
    sim.wait_bound("low");
    sim.create(&pod("equal", "low", "1", None, ""));
    sim.create(&pod("polite", "polite", "1", None, ""));
    let m = wait_message(&sim, "equal", |_| true);
    assert_eq!(
        m,
        format!(
            "0/1 nodes are unavailable: 1 Insufficient cpu. preemption: 0/1 nodes are available: \
             1 {NO_VICTIMS}."
        )
    );
    let m = wait_message(&sim, "polite", |_| true);
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient cpu. preemption: not eligible due to \
         preemptionPolicy=Never."
    );
    assert!(exists(&sim, "low"));
    assert!(sim.get("pod", "low")["metadata"]["deletionTimestamp"].is_null());
    assert!(pod_requests(&sim, "delete", "").is_empty());
    assert_eq!(metric(mx, "magma_preemptions_total"), 0);
    assert!(metric(mx, "magma_preemption_attempts_total") >= 2);
}

/// Two nodes, each full with a pod of priority 0 placed by another scheduler; a
/// PodDisruptionBudget allows no disruption of one of them. The preemptor evicts the other.
#[test]
fn a_disruption_budget_steers_the_choice() {
    let dir = procs::tmpdir("no-fit-pdb");
    let sim = SimProc::start(&dir, 2, &["--node-cpu", "2"]);
    classes(&sim);
    sim.create(
        &[
            pod("guarded", "low", "1500m", Some("node-00000"), "app: db"),
            pod("spare", "low", "1500m", Some("node-00001"), "app: cache"),
        ]
        .concat(),
    );
    sim.create("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: db\n  namespace: default\nspec:\n  minAvailable: 1\n  selector:\n    matchLabels:\n      app: db\n",
    );
    wait_until("the budget counts its pod", WAIT, || {
        let s = &sim.get("pdb", "db")["status"];
        s["currentHealthy"] == 1 && s["disruptionsAllowed"] == 0
    });
    let (_s, _mx) = scheduler(&dir, &sim, 1);
    sim.create(&pod("high", "high", "1", None, ""));
    assert_eq!(sim.wait_bound("high"), "node-00001");
    assert!(!exists(&sim, "spare"), "spare was the victim");
    assert!(exists(&sim, "guarded"));
    assert_eq!(pod_requests(&sim, "delete", ""), ["spare"]);
}

/// One node's room freed by one victim, two pods of high priority racing for it at four
/// workers: one victim, one bound. The other is told that even with preemption there is no
/// room (the victim's room is kept for the first, of equal priority), and stays pending.
#[test]
fn two_preemptors_racing_for_one_room_get_it_once() {
    let dir = procs::tmpdir("no-fit-race");
    let sim = SimProc::start(&dir, 1, &["--node-cpu", "2"]);
    classes(&sim);
    let (_s, mx) = scheduler(&dir, &sim, 4);
    sim.create(&pod("low", "low", "2", None, ""));
    let node = sim.wait_bound("low");
    sim.create(
        &[
            pod("h1", "high", "2", None, ""),
            pod("h2", "high", "2", None, ""),
        ]
        .concat(),
    );
    wait_until("one of them bound", WAIT, || {
        sim.node_of("h1").is_some() || sim.node_of("h2").is_some()
    });
    let (won, lost) = if sim.node_of("h1").is_some() {
        ("h1", "h2")
    } else {
        ("h2", "h1")
    };
    assert_eq!(sim.node_of(won).as_deref(), Some(node.as_str()));
    let m = wait_message(&sim, lost, |m| m.contains(" preemption: "));
    assert_eq!(
        m,
        "0/1 nodes are unavailable: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 \
         Insufficient cpu."
    );
    assert_eq!(sim.node_of(lost), None);
    assert!(!exists(&sim, "low"));
    assert_eq!(pod_requests(&sim, "delete", ""), ["low"], "one victim");
    assert_eq!(metric(mx, "magma_preemption_victims_total"), 1);
    let bindings = sim.records_blocking("bindings");
    assert_eq!(
        bindings.as_array().unwrap().len(),
        2,
        "low, then one of h1/h2: {bindings}"
    );
}

/// Two pods whose local claims could each take the one PV that exists (reachable from both
/// nodes), decided at four workers: exactly one gets it.
#[test]
fn two_pods_one_pv_exactly_one_gets_it() {
    let dir = procs::tmpdir("no-fit-static-pv");
    let sim = SimProc::start(&dir, 2, &["--provisioner-never"]);
    sim.create("---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n\
         ---\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nvme\nspec:\n  capacity:\n    storage: 100Gi\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  local:\n    path: /mnt/nvme\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - key: kubernetes.io/hostname\n          operator: In\n          values: [node-00000, node-00001]\n",
    );
    let mut yaml = String::new();
    for i in 0..2 {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data-{i}\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  resources:\n    requests:\n      storage: 10Gi\n\
             ---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: data-{i}\n"
        ));
    }
    sim.create(&yaml);
    let (_s, _mx) = scheduler(&dir, &sim, 4);
    wait_until("one pod bound", WAIT, || {
        sim.node_of("p0").is_some() || sim.node_of("p1").is_some()
    });
    let (won, lost) = if sim.node_of("p0").is_some() {
        (0, 1)
    } else {
        (1, 0)
    };
    let pv = sim.kubectl_json(&["get", "pv", "nvme"]);
    assert_eq!(pv["status"]["phase"], "Bound", "{pv}");
    assert_eq!(pv["spec"]["claimRef"]["name"], format!("data-{won}"));
    let claim = sim.get("pvc", &format!("data-{won}"));
    assert_eq!(claim["spec"]["volumeName"], "nvme");
    assert_eq!(claim["status"]["phase"], "Bound");
    let m = wait_message(&sim, &format!("p{lost}"), |_| true);
    assert_eq!(
        m,
        format!(
            "0/2 nodes are unavailable: 2 node(s) didn't find available persistent volumes to \
             bind. preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}."
        )
    );
    assert_eq!(sim.node_of(&format!("p{lost}")), None);
    assert_eq!(
        sim.get("pvc", &format!("data-{lost}"))["status"]["phase"],
        "Pending"
    );
}

/// Ten pods wait on a full 4-CPU node: five need 4 CPUs, five need 2. A 2-CPU pod is deleted:
/// only a pod that fits the freed room is woken, and it is bound; the others are not tried
/// again.
#[test]
fn a_deletion_wakes_only_the_pods_its_room_can_take() {
    let dir = procs::tmpdir("no-fit-wakeup");
    let sim = SimProc::start(&dir, 1, &["--node-cpu", "4"]);
    classes(&sim);
    sim.create(
        &[
            pod("b1", "low", "2", Some("node-00000"), ""),
            pod("b2", "low", "2", Some("node-00000"), ""),
        ]
        .concat(),
    );
    let (_s, mx) = scheduler(&dir, &sim, 1);
    let mut yaml = String::new();
    for i in 0..5 {
        yaml.push_str(&pod(&format!("big-{i}"), "low", "4", None, ""));
        yaml.push_str(&pod(&format!("mid-{i}"), "low", "2", None, ""));
    }
    sim.create(&yaml);
    for i in 0..5 {
        wait_message(&sim, &format!("big-{i}"), |_| true);
        wait_message(&sim, &format!("mid-{i}"), |_| true);
    }
    let before = metric(mx, "magma_scheduling_attempts_total");
    assert_eq!(before, 10, "one attempt each");
    let (ok, out) = sim.kubectl(&["delete", "pod", "b1", "--wait=false"], None);
    assert!(ok, "{out}");
    wait_until("one mid pod bound", WAIT, || {
        (0..5).any(|i| sim.node_of(&format!("mid-{i}")).is_some())
    });
    assert_eq!(
        metric(mx, "magma_scheduling_attempts_total"),
        before + 1,
        "only the pod the freed room was given to is tried again"
    );
    let bound: usize = (0..5)
        .filter(|i| sim.node_of(&format!("mid-{i}")).is_some())
        .count();
    assert_eq!(bound, 1);
    assert!((0..5).all(|i| sim.node_of(&format!("big-{i}")).is_none()));
}
