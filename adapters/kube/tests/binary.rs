//! End-to-end tests with real processes: the `kube-sim` binary and the `agent-scheduler`
//! binary, talking HTTP. Leader failover between two scheduler processes, and restart safety
//! (kill -9 mid-burst, start again: every pod bound exactly once, no node over allocatable).

use std::io::{BufRead, BufReader};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs;
use procs::{KillOnDrop as Proc, SimProc, free_port, http_get_blocking, wait_until};

fn start_scheduler(sim: &SimProc, extra: &[&str]) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
        .arg(sim.kubeconfig_flag())
        .args(["--scheduler-worker-count=2", "-v=2"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("agent-scheduler starts");
    let mut p = Proc(child);
    // Forward stderr lines (useful when a test fails) without blocking the child.
    let err = p.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if std::env::var_os("MAGMA_TEST_LOG").is_some() {
                eprintln!("[agent-scheduler] {line}");
            }
        }
    });
    p
}

/// (binding records as (pod, node), via the simulator's admin endpoint)
fn bindings(sim: &SimProc) -> Vec<(String, String)> {
    sim.records_blocking("bindings")
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| {
                    (
                        b["name"].as_str().unwrap_or("").to_owned(),
                        b["node"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn create_pods(sim: &SimProc, prefix: &str, n: usize, cpu: &str) {
    let mut yaml = String::new();
    for i in 0..n {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: {cpu}\n        memory: 64Mi\n"
        ));
    }
    kubectl_stdin(sim, "create", &yaml);
}

fn assert_each_bound_once(sim: &SimProc, expected: usize) {
    let b = bindings(sim);
    let mut names: Vec<&String> = b.iter().map(|(n, _)| n).collect();
    names.sort();
    let total = names.len();
    names.dedup();
    assert_eq!(names.len(), total, "a pod was bound twice");
    assert_eq!(total, expected);
}

#[test]
fn binary_schedules_and_reports_like_upstream() {
    let dir = procs::tmpdir("e2e-basic");
    let sim = SimProc::start(&dir, 4, &[]);
    let (hz, mx) = (free_port(), free_port());
    let hz_flag = format!("--healthz-address=127.0.0.1:{hz}");
    let mx_flag = format!("--listen-address=127.0.0.1:{mx}");
    let _s = start_scheduler(
        &sim,
        &[
            "--leader-elect=false",
            "--enable-healthz=true",
            "--enable-metrics",
            &hz_flag,
            &mx_flag,
        ],
    );
    create_pods(&sim, "p", 20, "100m");
    create_pods(&sim, "huge", 1, "100");
    // A pod of another scheduler, and one whose nodeSelector matches no node yet.
    apply(
        &sim,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: theirs\n  namespace: default\nspec:\n  schedulerName: volcano\n  containers:\n  - name: c\n    image: x\n",
    );
    apply(
        &sim,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: picky\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  nodeSelector:\n    disk: ssd\n  containers:\n  - name: c\n    image: x\n",
    );
    wait_until("20 bound", Duration::from_secs(30), || {
        bindings(&sim).len() >= 20
    });
    wait_until("picky unschedulable", Duration::from_secs(30), || {
        let p = sim.kubectl_json(&["get", "pod", "picky"]);
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "PodScheduled"
                    && c["reason"] == "Unschedulable"
                    && c["message"] == "0/4 nodes are unavailable: 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
            })
        })
    });
    let (ok, out) = sim.kubectl(&["label", "node", "node-00002", "disk=ssd"], None);
    assert!(ok, "{out}");
    wait_until(
        "picky scheduled after labelling",
        Duration::from_secs(30),
        || sim.kubectl_json(&["get", "pod", "picky"])["spec"]["nodeName"] == "node-00002",
    );
    wait_until("huge unschedulable", Duration::from_secs(30), || {
        let p = sim.kubectl_json(&["get", "pod", "huge-0"]);
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "PodScheduled"
                    && c["status"] == "False"
                    && c["reason"] == "Unschedulable"
            })
        })
    });
    assert_each_bound_once(&sim, 21);
    // Health, readiness and metrics on their flags' addresses.
    // The body, then the status code on its own line.
    let get = |port: u16, path: &str| {
        let (code, body) = http_get_blocking(port, path);
        format!("{body}\n{code}")
    };
    assert!(get(hz, "/healthz").ends_with("200"), "healthz");
    assert!(get(hz, "/readyz").ends_with("200"), "readyz");
    let metrics = get(mx, "/metrics");
    assert!(metrics.ends_with("200"), "metrics");
    assert!(
        metrics.contains("volcano_worker_scheduling_cycle_duration_milliseconds_bucket"),
        "upstream names"
    );
    let claims = metrics
        .lines()
        .find(|l| l.starts_with("magma_claims_total"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(claims >= 21.0, "magma_claims_total {claims}");
    let bound_latencies = metrics
        .lines()
        .find(|l| {
            l.starts_with("volcano_task_scheduling_latency_milliseconds_count")
                && l.contains("stage=\"Bound\"")
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(
        bound_latencies >= 21.0,
        "volcano_task_scheduling_latency_milliseconds{{stage=Bound}} count {bound_latencies}"
    );
    let theirs = sim.kubectl_json(&["get", "pod", "theirs"]);
    assert!(
        theirs["spec"]["nodeName"].is_null(),
        "another scheduler's pod is untouched"
    );
    assert!(
        theirs["status"]["conditions"]
            .as_array()
            .is_none_or(|c| c.is_empty())
    );
}

fn apply(sim: &SimProc, yaml: &str) {
    kubectl_stdin(sim, "apply", yaml);
}

/// `kubectl <verb> -f -` with `yaml` on standard input; the command must succeed.
fn kubectl_stdin(sim: &SimProc, verb: &str, yaml: &str) {
    let (ok, out) = sim.kubectl(&[verb, "-f", "-"], Some(yaml));
    assert!(ok, "kubectl {verb}: {out}");
}

#[test]
fn sigterm_releases_the_lease_and_exits_cleanly() {
    let dir = procs::tmpdir("e2e-sigterm");
    let sim = SimProc::start(&dir, 2, &[]);
    let mut s = start_scheduler(
        &sim,
        &[
            "--leader-elect=true",
            "--leader-elect-lease-duration=15s",
            "--leader-elect-renew-deadline=10s",
            "--leader-elect-retry-period=500ms",
        ],
    );
    wait_until("leading", Duration::from_secs(20), || {
        sim.kubectl_json(&["get", "lease", "agent-scheduler", "-n", "volcano-system"],
        )["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    });
    create_pods(&sim, "p", 5, "100m");
    wait_until("bound", Duration::from_secs(30), || {
        bindings(&sim).len() >= 5
    });
    let pid = s.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let end = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = s.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            Instant::now() < end,
            "agent-scheduler did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "clean exit: {status:?}");
    let lease = sim.kubectl_json(&["get", "lease", "agent-scheduler", "-n", "volcano-system"]);
    assert_eq!(
        lease["spec"]["holderIdentity"].as_str().unwrap_or(""),
        "",
        "the lease is released for a fast takeover"
    );
    assert_each_bound_once(&sim, 5);
}

#[test]
fn invalid_flags_fail_at_start_with_a_clear_message() {
    for (args, needle) in [
        (
            vec!["--scheduler-worker-count=0"],
            "scheduler-worker-count must be greater than 0",
        ),
        (
            vec!["--scheduler-sharding-mode=sideways"],
            "scheduler-sharding-mode",
        ),
        (
            vec!["--leader-elect-lease-duration=15"],
            "leader-elect-lease-duration",
        ),
        (vec!["--no-such-flag"], "no-such-flag"),
        (
            vec![
                "--scheduler-sharding-mode=hard",
                "--kubeconfig=/nonexistent",
            ],
            "--kubeconfig /nonexistent",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // pflag's word-separator normalisation (upstream's `cliflag.WordSepNormalizeFunc`): `_`
    // stands for `-`, so the underscored spelling reaches the same flag and its checks.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
        .args(["--scheduler_worker_count=0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("scheduler-worker-count must be greater than 0"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
        .args([
            "--scheduler_worker_count=2",
            "--leader_elect=false",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let help = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--scheduler-worker-count"));
}

#[test]
fn leader_failover_between_two_processes() {
    let dir = procs::tmpdir("e2e-failover");
    let sim = SimProc::start(&dir, 4, &[]);
    let le = [
        "--leader-elect=true",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=500ms",
    ];
    let mut first = start_scheduler(&sim, &le);
    wait_until("a lease holder", Duration::from_secs(20), || {
        let l = sim.kubectl_json(&["get", "lease", "agent-scheduler", "-n", "volcano-system"]);
        l["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    });
    let holder1 = sim.kubectl_json(&["get", "lease", "agent-scheduler", "-n", "volcano-system"],
    )["spec"]["holderIdentity"]
        .clone();
    let _second = start_scheduler(&sim, &le);
    create_pods(&sim, "a", 10, "100m");
    wait_until("first batch bound", Duration::from_secs(30), || {
        bindings(&sim).len() >= 10
    });
    // Kill the leader without letting it release: the standby takes over after the lease expires.
    let _ = first.0.kill();
    let _ = first.0.wait();
    create_pods(&sim, "b", 10, "100m");
    wait_until(
        "second batch bound by the new leader",
        Duration::from_secs(30),
        || bindings(&sim).len() >= 20,
    );
    let holder2 = sim.kubectl_json(&["get", "lease", "agent-scheduler", "-n", "volcano-system"],
    )["spec"]["holderIdentity"]
        .clone();
    assert_ne!(holder1, holder2, "the standby took the lease");
    assert_each_bound_once(&sim, 20);
}

#[test]
fn kill_9_mid_burst_then_restart_binds_every_pod_once() {
    let dir = procs::tmpdir("e2e-restart");
    let sim = SimProc::start(&dir, 10, &[]);
    let mut s = start_scheduler(&sim, &["--leader-elect=false"]);
    create_pods(&sim, "p", 300, "500m");
    wait_until("some bound", Duration::from_secs(30), || {
        !bindings(&sim).is_empty()
    });
    let _ = s.0.kill(); // SIGKILL
    let _ = s.0.wait();
    let _s2 = start_scheduler(&sim, &["--leader-elect=false"]);
    wait_until("all bound", Duration::from_secs(60), || {
        bindings(&sim).len() >= 300
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_each_bound_once(&sim, 300);
    // 10 nodes × 32 CPU; 300 × 500m = 150 CPU: no node may exceed 32 CPU.
    let pods = sim.kubectl_json(&["get", "pods", "-n", "default"]);
    let mut per_node = std::collections::HashMap::<String, i64>::new();
    for p in pods["items"].as_array().unwrap() {
        if let Some(n) = p["spec"]["nodeName"].as_str() {
            *per_node.entry(n.to_owned()).or_default() += 500;
        }
    }
    assert!(per_node.values().all(|&m| m <= 32_000), "{per_node:?}");
}
