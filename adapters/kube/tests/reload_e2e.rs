//! `--scheduler-conf` validation as a user meets it, with the real binary against kube-sim and
//! pods created with kubectl: an update naming an unknown plugin is rejected with the file and
//! the line, counted in `magma_config_reload_total{result="rejected"}`, and the configuration in
//! force (binpack here) keeps placing pods; a valid update naming a Volcano plugin the agent does
//! not run is applied with a warning. At start, an invalid file is fatal only with
//! `--disable-default-scheduler-config` (upstream's rule); otherwise the default is used.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::procs;
use procs::{SimProc, free_port, metric, start_scheduler, wait_until};

const WAIT: Duration = Duration::from_secs(60);

const BINPACK: &str = "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: nodeorder\n    arguments:\n      mostrequested.weight: 10\n      leastrequested.weight: 0\n      balancedresource.weight: 0\n";

/// The unknown plugin is on line 5.
const UNKNOWN_PLUGIN: &str = "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n  - name: no-such-plugin\n  - name: nodeorder\n";

fn create_pods(sim: &SimProc, prefix: &str, n: usize) {
    let mut yaml = String::new();
    for i in 0..n {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: default\nspec:\n  schedulerName: agent-scheduler\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: \"4\"\n        memory: 4Gi\n"
        ));
    }
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
}

fn nodes_of(sim: &SimProc, prefix: &str, n: usize) -> Option<Vec<String>> {
    (0..n)
        .map(|i| {
            let p = sim.kubectl_json(&["get", "pod", &format!("{prefix}-{i}")]);
            p["spec"]["nodeName"].as_str().map(str::to_owned)
        })
        .collect()
}

fn reloads(port: u16, result: &str) -> u64 {
    metric(
        port,
        &format!("magma_config_reload_total{{result=\"{result}\"}}"),
    )
}

/// Replace the file's contents in one rename, as an editor or a ConfigMap update does.
fn rewrite(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn an_update_with_an_unknown_plugin_is_rejected_and_the_old_configuration_stays() {
    let dir = procs::tmpdir("reload-e2e");
    let sim = SimProc::start(&dir, 4, &[]);
    let conf = dir.join("scheduler.conf");
    std::fs::write(&conf, BINPACK).unwrap();
    let mx = free_port();
    let mut s = start_scheduler(
        &dir,
        &sim,
        "agent-scheduler",
        &[
            &format!("--scheduler-conf={}", conf.display()),
            "--enable-metrics",
            &format!("--listen-address=127.0.0.1:{mx}"),
        ],
    );
    // One at a time: what binpack does, not what a concurrent burst does (issue 14, point 1).
    let place = |name: &str| {
        create_pods(&sim, name, 1);
        wait_until(name, WAIT, || nodes_of(&sim, name, 1).is_some());
        nodes_of(&sim, name, 1).unwrap().remove(0)
    };
    let first = [place("a"), place("b")];
    assert_eq!(first[0], first[1], "binpack puts both on one node");

    rewrite(&conf, UNKNOWN_PLUGIN);
    wait_until("the update is rejected", WAIT, || {
        reloads(mx, "rejected") == 1
    });
    assert_eq!(reloads(mx, "ok"), 0);
    let log = std::fs::read_to_string(&s.log).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("new scheduler configuration rejected"))
        .expect("the rejection is logged");
    assert!(
        line.contains(&conf.display().to_string())
            && line.contains("line 5")
            && line.contains("no-such-plugin"),
        "{line}"
    );
    assert!(!log.contains("scheduler configuration reloaded"), "{log}");

    // Binpack is still in force.
    let second = [place("c"), place("d")];
    assert!(
        second.iter().all(|n| *n == first[0]),
        "still packed onto {}: {second:?}",
        first[0]
    );

    // A valid update naming a Volcano plugin the agent does not run: applied, with a warning.
    rewrite(&conf, &format!("{BINPACK}  - name: gang\n"));
    wait_until("the valid update is applied", WAIT, || {
        reloads(mx, "ok") == 1
    });
    let log = std::fs::read_to_string(&s.log).unwrap();
    assert!(log.contains("scheduler configuration reloaded"), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("\"gang\"") && l.contains("does not run")),
        "{log}"
    );
    s.assert_running();
}

#[test]
fn an_invalid_file_at_start_is_fatal_only_with_disable_default_scheduler_config() {
    let dir = procs::tmpdir("reload-e2e-start");
    let conf = dir.join("scheduler.conf");
    std::fs::write(&conf, UNKNOWN_PLUGIN).unwrap();
    let conf_flag = format!("--scheduler-conf={}", conf.display());
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
            .args([conf_flag.as_str(), "--dry-run"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--disable-default-scheduler-config=true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&conf.display().to_string())
            && err.contains("line 5")
            && err.contains("no-such-plugin"),
        "{err}"
    );
    // Upstream's default: the built-in configuration, with a warning naming the file.
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("no-such-plugin") && err.contains("built-in default"),
        "{err}"
    );
}
