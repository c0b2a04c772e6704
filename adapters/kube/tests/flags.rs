//! The command line: upstream's defaults (after `cmd/agent-scheduler/app/options/options_test.go`
//! "flag defaults"), Go/pflag syntax, validation, and the argv Volcano's Helm chart renders.

use magma_engine::Sampling;
use magma_kube::flags::{
    FlagError, HelmExtras, KlogFlags, Options, ShardingMode, parse, parse_go_bool,
    parse_go_duration, usage,
};
use std::net::SocketAddr;
use std::time::Duration;

fn ok(args: &[&str]) -> Options {
    let mut argv = vec!["agent-scheduler"];
    argv.extend_from_slice(args);
    match parse(argv) {
        Ok(o) => o,
        Err(e) => panic!("{args:?} rejected: {e}"),
    }
}

fn err(args: &[&str]) -> FlagError {
    let mut argv = vec!["agent-scheduler"];
    argv.extend_from_slice(args);
    match parse(argv) {
        Ok(o) => panic!("{args:?} accepted: {o:?}"),
        Err(e) => e,
    }
}

fn err_text(args: &[&str]) -> String {
    err(args).to_string()
}

#[test]
fn defaults_match_upstream() {
    let expected = Options {
        master: String::new(),
        kubeconfig: String::new(),
        ca_cert_file: String::new(),
        tls_cert_file: String::new(),
        tls_private_key_file: String::new(),
        lock_object_namespace: String::new(),
        scheduler_name: "agent-scheduler".into(),
        scheduler_conf: String::new(),
        resync_period: Duration::ZERO,
        version: false,
        listen_address: ":8080".into(),
        healthz_address: ":11251".into(),
        kube_api_qps: 2000.0,
        kube_api_burst: 2000,
        minimum_feasible_nodes: 100,
        minimum_percentage_nodes_to_find: 5,
        percentage_nodes_to_find: 0,
        csi_storage: true,
        enable_healthz: false,
        enable_metrics: false,
        node_selector: vec![],
        cache_dumper: true,
        cache_dump_dir: "/tmp".into(),
        node_worker_threads: 20,
        resource_sync_timeout: Duration::from_secs(60),
        disable_default_scheduler_config: false,
        scheduler_worker_count: 1,
        scheduler_sharding_mode: ShardingMode::None,
        scheduler_sharding_name: "agent-scheduler".into(),
        leader_elect: true,
        leader_elect_lease_duration: Duration::from_secs(15),
        leader_elect_renew_deadline: Duration::from_secs(10),
        leader_elect_retry_period: Duration::from_secs(2),
        leader_elect_resource_lock: "leases".into(),
        leader_elect_resource_name: "agent-scheduler".into(),
        leader_elect_resource_namespace: "volcano-system".into(),
        feature_gates: String::new(),
        verbosity: 0,
        pin_workers: false,
        bind_concurrency: 256,
        event_qps: None,
        event_burst: None,
        preemption: true,
        dry_run: false,
        klog: KlogFlags {
            logtostderr: true,
            alsologtostderr: false,
            log_dir: String::new(),
            log_file: String::new(),
            log_file_max_size: 1800,
            stderrthreshold: 2,
            vmodule: String::new(),
            add_dir_header: false,
            skip_headers: false,
            skip_log_headers: false,
            one_output: false,
            log_backtrace_at: String::new(),
            log_flush_frequency: Duration::from_secs(5),
        },
        helm_extras: HelmExtras {
            enable_pprof: false,
            plugins_dir: String::new(),
            ignored_provisioners: vec![],
        },
        warnings: vec![],
    };
    assert_eq!(ok(&[]), expected);
    assert_eq!(Options::default(), expected);
    assert_eq!(ok(&[]).sampling().unwrap(), Sampling::default());
    // The events budget follows the main client's unless set: every bound pod's event keeps
    // up with the bindings.
    assert_eq!(
        (expected.event_qps(), expected.event_burst()),
        (2000.0, 2000)
    );
    let o = ok(&["--kube-api-qps=5000", "--kube-api-burst=6000"]);
    assert_eq!((o.event_qps(), o.event_burst()), (5000.0, 6000));
}

#[test]
fn upstream_flag_values_are_read() {
    let o = ok(&[
        "--master=https://10.0.0.1:6443",
        "--kubeconfig=/etc/kube/config",
        "--ca-cert-file=/ca",
        "--tls-cert-file=/cert",
        "--tls-private-key-file=/key",
        "--scheduler-name=sandbox",
        "--scheduler-conf=/etc/agent.conf",
        "--resync-period=30s",
        "--listen-address=127.0.0.1:9090",
        "--healthz-address=:11252",
        "--kube-api-qps=500.5",
        "--kube-api-burst=700",
        "--minimum-feasible-nodes=50",
        "--minimum-percentage-nodes-to-find=10",
        "--percentage-nodes-to-find=30",
        "--csi-storage=false",
        "--enable-healthz",
        "--enable-metrics",
        "--cache-dumper=false",
        "--cache-dump-dir=/var/dump",
        "--node-worker-threads=4",
        "--resource-sync-timeout=0",
        "--disable-default-scheduler-config",
        "--scheduler-worker-count=8",
        "--scheduler-sharding-mode=hard",
        "--scheduler-sharding-name=shard-a",
        "--pin-workers",
        "--bind-concurrency=64",
        "--event-qps=20",
        "--event-burst=40",
    ]);
    assert_eq!(o.master, "https://10.0.0.1:6443");
    assert_eq!(o.kubeconfig, "/etc/kube/config");
    assert!(o.tls_enabled());
    assert_eq!(o.scheduler_name, "sandbox");
    assert_eq!(o.scheduler_conf, "/etc/agent.conf");
    assert_eq!(o.resync_period, Duration::from_secs(30));
    assert_eq!(o.listen_addr().unwrap(), "127.0.0.1:9090".parse().unwrap());
    assert_eq!(o.healthz_addr().unwrap(), "0.0.0.0:11252".parse().unwrap());
    assert_eq!(o.kube_api_qps, 500.5);
    assert_eq!(o.kube_api_burst, 700);
    assert_eq!(o.sampling().unwrap(), Sampling::new(50, 10, 30).unwrap());
    assert!(!o.csi_storage && o.enable_healthz && o.enable_metrics && !o.cache_dumper);
    assert_eq!(o.cache_dump_dir, "/var/dump");
    assert_eq!(o.node_worker_threads, 4);
    assert_eq!(o.resource_sync_timeout, Duration::ZERO);
    assert!(o.disable_default_scheduler_config);
    assert_eq!(o.scheduler_worker_count, 8);
    assert_eq!(o.scheduler_sharding_mode, ShardingMode::Hard);
    assert_eq!(o.scheduler_sharding_name, "shard-a");
    assert!(o.pin_workers);
    assert_eq!(
        (o.bind_concurrency, o.event_qps(), o.event_burst()),
        (64, 20.0, 40)
    );
    // The TLS files are read by upstream only for healthz over TLS, which Magma does not do.
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
    assert!(o.warnings[0].contains("plain HTTP"), "{:?}", o.warnings);
}

#[test]
fn worker_count_zero_is_rejected_with_upstream_text() {
    let e = err(&["--scheduler-worker-count=0"]);
    assert_eq!(e, FlagError::WorkerCount);
    assert_eq!(
        e.to_string(),
        "scheduler-worker-count must be greater than 0"
    );
    assert!(err_text(&["--scheduler-worker-count=-1"]).contains("scheduler-worker-count"));
}

#[test]
fn sharding_mode_is_validated() {
    for (v, mode) in [
        ("none", ShardingMode::None),
        ("soft", ShardingMode::Soft),
        ("hard", ShardingMode::Hard),
    ] {
        assert_eq!(
            ok(&[&format!("--scheduler-sharding-mode={v}")]).scheduler_sharding_mode,
            mode
        );
    }
    for bad in ["medium", "Hard", ""] {
        let e = err_text(&[&format!("--scheduler-sharding-mode={bad}")]);
        assert!(e.contains("--scheduler-sharding-mode"), "{e}");
        assert!(e.contains(&format!("{bad:?}")), "{e}");
        assert!(e.contains("none, soft, hard"), "{e}");
    }
    let e = err_text(&[
        "--scheduler-sharding-mode=soft",
        "--scheduler-sharding-name=",
    ]);
    assert!(e.contains("scheduler-sharding-name"), "{e}");
}

#[test]
fn go_flag_forms() {
    let name = |args: &[&str]| ok(args).scheduler_name;
    assert_eq!(name(&["--scheduler-name=a"]), "a");
    assert_eq!(name(&["--scheduler-name", "a"]), "a");
    assert_eq!(name(&["-scheduler-name=a"]), "a");
    assert_eq!(name(&["-scheduler-name", "a"]), "a");
    // Underscores read as dashes (cliflag's WordSepNormalizeFunc).
    assert_eq!(name(&["--scheduler_name=a"]), "a");
    // The value of a non-boolean flag may start with a dash, like Go.
    assert_eq!(name(&["--scheduler-name", "-a"]), "-a");
    // Last one wins.
    assert_eq!(name(&["--scheduler-name=a", "-scheduler-name", "b"]), "b");
    // An empty value is a value.
    assert_eq!(ok(&["--scheduler-conf="]).scheduler_conf, "");
}

#[test]
fn go_bool_forms() {
    let le = |args: &[&str]| ok(args).leader_elect;
    assert!(le(&["--leader-elect"]));
    assert!(le(&["-leader-elect"]));
    for v in ["1", "t", "T", "true", "TRUE", "True"] {
        assert!(le(&[&format!("--leader-elect={v}")]), "{v}");
    }
    for v in ["0", "f", "F", "false", "FALSE", "False"] {
        assert!(!le(&[&format!("--leader-elect={v}")]), "{v}");
        assert!(!le(&[&format!("-leader-elect={v}")]), "{v}");
    }
    assert!(le(&["--leader-elect=false", "--leader-elect"]));
    assert!(!le(&["--leader-elect", "--leader-elect=f"]));
    // Go: a bool's value must be attached; `false` is then a positional argument.
    let e = err(&["--leader-elect", "false"]);
    assert_eq!(
        e,
        FlagError::UnexpectedArgument {
            arg: "false".into()
        }
    );
    let e = err_text(&["--enable-healthz=yes"]);
    assert!(
        e.contains("--enable-healthz") && e.contains("\"yes\""),
        "{e}"
    );
    let e = err_text(&["--enable-healthz="]);
    assert!(e.contains("--enable-healthz"), "{e}");

    assert_eq!(parse_go_bool("True"), Ok(true));
    assert!(parse_go_bool("yes").is_err());
}

#[test]
fn verbosity_forms() {
    for args in [
        &["-v=4"][..],
        &["-v", "4"],
        &["--v=4"],
        &["--v", "4"],
        &["-v4"],
    ] {
        assert_eq!(ok(args).verbosity, 4, "{args:?}");
    }
    assert_eq!(ok(&["-v=1", "-v=5"]).verbosity, 5);
    assert!(err_text(&["-v=x"]).contains("--v"));
    assert!(err_text(&["-v=-1"]).contains("\"-1\""));
    assert_eq!(err(&["-v"]), FlagError::MissingValue { flag: "v".into() });
}

#[test]
fn durations() {
    let table: &[(&str, i128)] = &[
        ("0", 0),
        ("+0", 0),
        ("-0", 0),
        ("300ms", 300_000_000),
        ("1.5h", 5_400_000_000_000),
        ("2h45m", 9_900_000_000_000),
        ("1m30s", 90_000_000_000),
        ("10us", 10_000),
        ("10µs", 10_000),
        ("10μs", 10_000),
        ("100ns", 100),
        (".5s", 500_000_000),
        ("1.s", 1_000_000_000),
        ("1.000000001s", 1_000_000_001),
        ("-1.5s", -1_500_000_000),
        ("15s", 15_000_000_000),
        ("2562047h", 2_562_047 * 3_600_000_000_000),
    ];
    for (s, nanos) in table {
        assert_eq!(parse_go_duration(s), Ok(*nanos), "{s}");
    }
    for bad in [
        "", "15", "1.5", "s", ".s", "1x", "1hh", "--1s", "3000000h", "1h-1m",
    ] {
        assert!(parse_go_duration(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(
        parse_go_duration("15").unwrap_err(),
        "missing unit in duration \"15\""
    );

    let o = ok(&["--resync-period=1m30s", "--resource-sync-timeout", "1.5h"]);
    assert_eq!(o.resync_period, Duration::from_secs(90));
    assert_eq!(o.resource_sync_timeout, Duration::from_secs(5400));
    let e = err_text(&["--resync-period=15"]);
    assert!(
        e.contains("--resync-period") && e.contains("\"15\"") && e.contains("missing unit"),
        "{e}"
    );
    let e = err_text(&["--resource-sync-timeout=-1s"]);
    assert!(
        e.contains("--resource-sync-timeout") && e.contains("negative"),
        "{e}"
    );
}

#[test]
fn integers_use_go_syntax() {
    assert_eq!(ok(&["--kube-api-burst=0x10"]).kube_api_burst, 16);
    assert_eq!(ok(&["--kube-api-burst=010"]).kube_api_burst, 8);
    assert_eq!(ok(&["--kube-api-burst=1_000"]).kube_api_burst, 1000);
    assert_eq!(ok(&["--kube-api-burst=+5"]).kube_api_burst, 5);
    let e = err_text(&["--kube-api-burst=lots"]);
    assert!(
        e.contains("--kube-api-burst") && e.contains("\"lots\""),
        "{e}"
    );
    let e = err_text(&["--node-worker-threads=-3"]);
    assert!(
        e.contains("--node-worker-threads") && e.contains("out of range"),
        "{e}"
    );
    let e = err_text(&["--kube-api-qps=0"]);
    assert!(e.contains("--kube-api-qps"), "{e}");
    let e = err_text(&["--bind-concurrency=0"]);
    assert!(e.contains("--bind-concurrency=0"), "{e}");
    let e = err_text(&["--minimum-percentage-nodes-to-find=101"]);
    assert!(e.contains("minimum-percentage-nodes-to-find=101"), "{e}");
    let e = err_text(&["--minimum-feasible-nodes=0"]);
    assert!(e.contains("minimum-feasible-nodes=0"), "{e}");
}

#[test]
fn node_selector_forms() {
    let sel = |args: &[&str]| ok(args).node_selector;
    let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        sel(&["--node-selector=role:train"]),
        vec![pair("role", "train")]
    );
    assert_eq!(
        sel(&[
            "--node-selector=volcano.sh/role:train",
            "--node-selector",
            "volcano.sh/role:serving",
        ]),
        vec![
            pair("volcano.sh/role", "train"),
            pair("volcano.sh/role", "serving")
        ]
    );
    assert_eq!(
        sel(&["--node-selector=a:1,b:2", "-node-selector=c:3"]),
        vec![pair("a", "1"), pair("b", "2"), pair("c", "3")]
    );
    // Trimmed and split at the first ':' like upstream.
    assert_eq!(sel(&["--node-selector= a : x:y "]), vec![pair("a", "x:y")]);
    // An empty value is an empty list, like Go's StringSlice.
    assert_eq!(sel(&["--node-selector="]), vec![]);
    for bad in ["novalue", "key:", ":value", "a:1,", "a:1,,b:2"] {
        let e = err_text(&[&format!("--node-selector={bad}")]);
        assert!(e.contains("--node-selector"), "{e}");
        assert!(e.contains("key:value"), "{e}");
    }
}

#[test]
fn klog_flags_are_accepted() {
    let o = ok(&[
        "--logtostderr",
        "--alsologtostderr=true",
        "--log_dir=/var/log",
        "--log-file=/var/log/x.log",
        "--log_file_max_size=10",
        "--stderrthreshold=INFO",
        "--vmodule=cache=4,binder=5",
        "--add_dir_header",
        "--skip_headers=true",
        "--skip_log_headers",
        "--one_output=true",
        "--log_backtrace_at=binder.go:120",
        "--log-flush-frequency=10s",
        "-v=2",
    ]);
    assert!(o.klog.logtostderr && o.klog.alsologtostderr);
    assert_eq!(o.klog.log_dir, "/var/log");
    assert_eq!(o.klog.log_file, "/var/log/x.log");
    assert_eq!(o.klog.log_file_max_size, 10);
    assert_eq!(o.klog.stderrthreshold, 0);
    assert_eq!(o.klog.vmodule, "cache=4,binder=5");
    assert!(o.klog.add_dir_header && o.klog.skip_headers && o.klog.skip_log_headers);
    assert!(o.klog.one_output);
    assert_eq!(o.klog.log_backtrace_at, "binder.go:120");
    assert_eq!(o.klog.log_flush_frequency, Duration::from_secs(10));
    assert_eq!(o.verbosity, 2);
    assert_eq!(ok(&["-log-dir", "/x"]).klog.log_dir, "/x");
    assert!(!ok(&["--logtostderr=false"]).klog.logtostderr);
    assert!(err_text(&["--stderrthreshold=LOUD"]).contains("--stderrthreshold"));
}

#[test]
fn helm_extras_are_accepted_with_warnings() {
    let o = ok(&[
        "--enable-pprof=true",
        "--plugins-dir=/plugins",
        "--ignored-provisioners=a.csi,b.csi",
    ]);
    assert!(o.helm_extras.enable_pprof);
    assert_eq!(o.helm_extras.plugins_dir, "/plugins");
    assert_eq!(o.helm_extras.ignored_provisioners, vec!["a.csi", "b.csi"]);
    assert_eq!(o.warnings.len(), 3, "{:?}", o.warnings);
    for flag in ["--enable-pprof", "--plugins-dir", "--ignored-provisioners"] {
        assert!(
            o.warnings.iter().any(|w| w.contains(flag)),
            "{flag}: {:?}",
            o.warnings
        );
    }
}

#[test]
fn unknown_flags_and_bad_syntax_are_rejected() {
    assert_eq!(err(&["-x"]), FlagError::Unknown { flag: "-x".into() });
    assert_eq!(
        err_text(&["--no-such-flag=1"]),
        "flag provided but not defined: --no-such-flag"
    );
    assert_eq!(
        err(&["--scheduler-name"]),
        FlagError::MissingValue {
            flag: "scheduler-name".into()
        }
    );
    for bad in ["---scheduler-name=a", "--=a", "-=a"] {
        assert!(matches!(err(&[bad]), FlagError::BadSyntax { .. }), "{bad}");
    }
    assert!(matches!(
        err(&["positional"]),
        FlagError::UnexpectedArgument { .. }
    ));
    assert!(matches!(err(&["-"]), FlagError::UnexpectedArgument { .. }));
    assert!(matches!(
        err(&["--", "x"]),
        FlagError::UnexpectedArgument { .. }
    ));
    // `--` alone ends the flags.
    assert_eq!(ok(&["-v=3", "--"]).verbosity, 3);
}

#[test]
fn help_and_version() {
    for h in ["--help", "-h", "-help"] {
        let e = err(&[h]);
        assert!(e.is_help(), "{h}");
        let text = e.to_string();
        assert!(text.contains("--scheduler-worker-count"), "{text}");
        assert!(text.contains("--leader-elect"), "{text}");
    }
    assert!(usage().contains("--node-selector"));
    assert!(ok(&["--version"]).version);
    assert!(!ok(&["--version=false"]).version);
}

#[test]
fn leader_election_validation() {
    let o = ok(&[
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=5s",
        "--leader-elect-resource-name=magma",
        "--leader-elect-resource-namespace=kube-system",
    ]);
    assert_eq!(o.leader_elect_lease_duration, Duration::from_secs(30));
    assert_eq!(o.leader_elect_renew_deadline, Duration::from_secs(20));
    assert_eq!(o.leader_elect_retry_period, Duration::from_secs(5));
    assert_eq!(o.leader_elect_resource_name, "magma");
    assert_eq!(o.leader_elect_resource_namespace, "kube-system");

    let cases: &[(&[&str], &str)] = &[
        (
            &["--leader-elect-lease-duration=0"],
            "leader-elect-lease-duration",
        ),
        (
            &["--leader-elect-renew-deadline=0s"],
            "leader-elect-renew-deadline",
        ),
        (
            &["--leader-elect-retry-period=0"],
            "leader-elect-retry-period",
        ),
        (
            &["--leader-elect-lease-duration=10s"],
            "leader-elect-lease-duration=10s",
        ),
        (
            &["--leader-elect-retry-period=9s"],
            "leader-elect-renew-deadline=10s",
        ),
        (
            &["--leader-elect-resource-lock=endpoints"],
            "leader-elect-resource-lock=endpoints",
        ),
        (&["--leader-elect-resource-lock=configmapsleases"], "leases"),
        (
            &["--leader-elect-resource-name="],
            "leader-elect-resource-name",
        ),
        (
            &["--leader-elect-resource-namespace="],
            "leader-elect-resource-namespace",
        ),
        (
            &["--leader-elect-lease-duration=-5s"],
            "leader-elect-lease-duration",
        ),
    ];
    for (args, needle) in cases {
        let e = err_text(args);
        assert!(e.contains(needle), "{args:?}: {e}");
    }
    // retry × 1.2 must stay below the renew deadline: 8s × 1.2 = 9.6s < 10s is fine.
    ok(&["--leader-elect-retry-period=8s"]);
    // Like component-base, nothing is checked when leader election is off.
    ok(&[
        "--leader-elect=false",
        "--leader-elect-lease-duration=0",
        "--leader-elect-resource-lock=endpoints",
    ]);
}

#[test]
fn lock_object_namespace_overrides_the_lease_namespace() {
    let o = ok(&[
        "--leader-elect-resource-namespace=a",
        "--lock-object-namespace=b",
    ]);
    assert_eq!(o.leader_elect_resource_namespace, "b");
    assert_eq!(o.lock_object_namespace, "b");
    assert!(
        o.warnings.iter().any(|w| w.contains("deprecated")),
        "{:?}",
        o.warnings
    );
    assert_eq!(
        ok(&["--lock-object-namespace="]).leader_elect_resource_namespace,
        "volcano-system"
    );
}

#[test]
fn addresses() {
    let addr = |s: &str| Options::http_addr(s).unwrap();
    let sa = |s: &str| s.parse::<SocketAddr>().unwrap();
    assert_eq!(addr(":8080"), sa("0.0.0.0:8080"));
    assert_eq!(addr("0.0.0.0:8080"), sa("0.0.0.0:8080"));
    assert_eq!(addr("[::]:8080"), sa("[::]:8080"));
    assert_eq!(addr("[::1]:9"), sa("[::1]:9"));
    assert_eq!(addr("127.0.0.1:0"), sa("127.0.0.1:0"));
    assert_eq!(addr("localhost:11251"), sa("127.0.0.1:11251"));
    for bad in ["8080", ":http", ":70000", "::1:80", "[::1:80", ""] {
        let e = Options::http_addr(bad).unwrap_err().to_string();
        assert!(e.contains(&format!("{bad:?}")), "{e}");
    }
    // Checked at parse time only when the server is enabled.
    ok(&["--listen-address=nonsense"]);
    let e = err_text(&["--enable-metrics", "--listen-address=nonsense"]);
    assert!(e.contains("--listen-address=nonsense"), "{e}");
    let e = err_text(&["--enable-healthz=true", "--healthz-address=:99999"]);
    assert!(e.contains("--healthz-address=:99999"), "{e}");
}

#[test]
fn feature_gates_are_recorded() {
    let o = ok(&["--feature-gates=PodDisruptionBudgetsSupport=true, VolcanoJobSupport=false"]);
    assert_eq!(
        o.feature_gates,
        "PodDisruptionBudgetsSupport=true, VolcanoJobSupport=false"
    );
    assert!(o.warnings.iter().any(|w| w.contains("--feature-gates")));
    let e = err_text(&["--feature-gates=Foo"]);
    assert!(
        e.contains("--feature-gates") && e.contains("\"Foo\""),
        "{e}"
    );
    let e = err_text(&["--feature-gates=Foo=maybe"]);
    assert!(e.contains("--feature-gates"), "{e}");
}

/// The container args of `installer/helm/chart/volcano/templates/agent_scheduler.yaml` with
/// every optional flag rendered (§9.1).
#[test]
fn helm_chart_argv_parses() {
    let o = ok(&[
        "--logtostderr",
        "--scheduler-conf=/volcano.scheduler/agent-scheduler.conf",
        "--scheduler-name=agent-scheduler",
        "--enable-healthz=true",
        "--enable-metrics=true",
        "--leader-elect=false",
        "--leader-elect-resource-namespace=volcano-system",
        "--kube-api-qps=2000",
        "--kube-api-burst=2000",
        "--node-worker-threads=20",
        "--feature-gates=PodDisruptionBudgetsSupport=true,VolcanoJobSupport=true",
        "--scheduler-worker-count=1",
        "--scheduler-sharding-mode=soft",
        "--scheduler-sharding-name=agent-scheduler",
        "-v=3",
        "--enable-pprof=true",
        "--plugins-dir=/plugins",
        "--ignored-provisioners=rancher.io/local-path",
    ]);
    assert_eq!(o.scheduler_conf, "/volcano.scheduler/agent-scheduler.conf");
    assert_eq!(o.scheduler_name, "agent-scheduler");
    assert!(o.enable_healthz && o.enable_metrics && !o.leader_elect);
    assert_eq!(o.leader_elect_resource_namespace, "volcano-system");
    assert_eq!((o.kube_api_qps, o.kube_api_burst), (2000.0, 2000));
    assert_eq!(o.node_worker_threads, 20);
    assert_eq!(o.scheduler_worker_count, 1);
    assert_eq!(o.scheduler_sharding_mode, ShardingMode::Soft);
    assert_eq!(o.verbosity, 3);
    assert!(o.klog.logtostderr);
    assert_eq!(o.healthz_addr().unwrap(), "0.0.0.0:11251".parse().unwrap());
    assert_eq!(o.listen_addr().unwrap(), "0.0.0.0:8080".parse().unwrap());
    assert_eq!(o.warnings.len(), 4, "{:?}", o.warnings);
}

#[test]
fn tls_flags_are_reported_not_silently_ignored() {
    let all = ok(&[
        "--ca-cert-file=/c",
        "--tls-cert-file=/t",
        "--tls-private-key-file=/k",
    ]);
    assert!(all.tls_enabled());
    assert!(
        all.warnings.iter().any(|w| w.contains("plain HTTP")),
        "{:?}",
        all.warnings
    );
    let some = ok(&["--tls-cert-file=/t"]);
    assert!(!some.tls_enabled());
    assert!(
        some.warnings.iter().any(|w| w.contains("only some")),
        "{:?}",
        some.warnings
    );
    assert!(ok(&[]).warnings.is_empty());
}
