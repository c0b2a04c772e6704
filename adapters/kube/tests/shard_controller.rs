//! The sharding controller against the API simulator, in-process: NodeShards per ConfigMap,
//! exclusivity, hot reload, rejected configurations that leave NodeShards alone, the flag
//! fallback, node and utilisation triggers, stale shards, hand-off pinning, and metrics.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube_sim::{Sim, SimConfig, SimHandle};
use magma_kube::http::{MetricsEncoder, Readiness, router_with, serve};
use magma_kube::nodeshard::NodeShard;
use magma_kube::shardctl::ShardingConfig;
use magma_kube::shardctl::controller::{self, ControllerSettings, ControllerStatus};
use magma_kube::shardctl::metrics::ControllerMetrics;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::common;
use crate::procs;
use procs::http_get;

const NS: &str = "volcano-system";
const CM: &str = "volcano-sharding-configmap";
const WAIT: Duration = Duration::from_secs(15);

async fn sim(nodes: usize) -> (SimHandle, kube::Client) {
    let sim = Sim::start(SimConfig {
        nodes,
        install_nodeshard_crd: true,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let config = common::client_config(&sim).await;
    (sim, kube::Client::try_from(config).expect("client"))
}

fn n(i: usize) -> String {
    kube_sim::node_name(i)
}

fn flag_default() -> ShardingConfig {
    ShardingConfig::from_flags::<&str>(&[], Duration::from_secs(3600), true).expect("defaults")
}

struct Running {
    status: watch::Receiver<ControllerStatus>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: JoinHandle<Result<(), controller::ControllerError>>,
    metrics: ControllerMetrics,
    readiness: Arc<Readiness>,
}

fn start(client: &kube::Client, flag_config: ShardingConfig) -> Running {
    let mut s = ControllerSettings::new(client.clone(), flag_config);
    s.debounce = Duration::from_millis(50);
    s.api_qps = 1000.0;
    let status = s.subscribe();
    let metrics = s.metrics.clone();
    let readiness = s.readiness.clone();
    let (stop, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(controller::run(s, async move {
        let _ = rx.await;
    }));
    Running {
        status,
        stop: Some(stop),
        task,
        metrics,
        readiness,
    }
}

impl Running {
    async fn wait(
        &mut self,
        what: &str,
        f: impl Fn(&ControllerStatus) -> bool,
    ) -> ControllerStatus {
        let got = match tokio::time::timeout(WAIT, self.status.wait_for(|s| f(s))).await {
            Ok(Ok(s)) => Some(s.clone()),
            Ok(Err(_)) => panic!("{what}: the controller stopped"),
            Err(_) => None,
        };
        got.unwrap_or_else(|| {
            panic!(
                "{what}: not within {WAIT:?}; status {:?}",
                *self.status.borrow()
            )
        })
    }

    fn now(&self) -> ControllerStatus {
        self.status.borrow().clone()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().expect("once").send(());
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("controller stops promptly")
            .expect("task")
            .expect("clean stop");
    }
}

async fn put_cm(client: &kube::Client, data: Option<&str>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(CM.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: data.map(|d| BTreeMap::from([("sharding.yaml".to_owned(), d.to_owned())])),
        ..Default::default()
    };
    match api.get_opt(CM).await.expect("get cm") {
        None => {
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create cm");
        }
        Some(old) => {
            let mut cm = cm;
            cm.metadata.resource_version = old.metadata.resource_version;
            api.replace(CM, &PostParams::default(), &cm)
                .await
                .expect("replace cm");
        }
    }
}

async fn shards(client: &kube::Client) -> BTreeMap<String, NodeShard> {
    let api: Api<NodeShard> = Api::all(client.clone());
    api.list(&Default::default())
        .await
        .expect("list nodeshards")
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
        .collect()
}

fn desired(s: &BTreeMap<String, NodeShard>, name: &str) -> BTreeSet<String> {
    s.get(name)
        .map(|s| s.spec.nodes_desired.iter().cloned().collect())
        .unwrap_or_default()
}

/// Polls the NodeShards until `f` holds.
async fn until_shards(
    client: &kube::Client,
    what: &str,
    f: impl Fn(&BTreeMap<String, NodeShard>) -> bool,
) -> BTreeMap<String, NodeShard> {
    let end = Instant::now() + WAIT;
    loop {
        let s = shards(client).await;
        if f(&s) {
            return s;
        }
        assert!(
            Instant::now() < end,
            "{what}: not within {WAIT:?}; NodeShards: {:?}",
            s.iter()
                .map(|(k, v)| (k, &v.spec.nodes_desired, &v.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

async fn set_in_use(client: &kube::Client, shard: &str, nodes: &[String]) {
    let api: Api<NodeShard> = Api::all(client.clone());
    let patch = serde_json::json!({"status": {"nodesInUse": if nodes.is_empty() { serde_json::Value::Null } else { serde_json::json!(nodes) }}});
    api.patch_status(shard, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch status");
}

async fn create_shard(client: &kube::Client, name: &str, desired: &[String], in_use: &[String]) {
    let api: Api<NodeShard> = Api::all(client.clone());
    api.create(&PostParams::default(), &NodeShard::new(name, desired))
        .await
        .expect("create nodeshard");
    if !in_use.is_empty() {
        set_in_use(client, name, in_use).await;
    }
}

fn bound_pod(sim: &SimHandle, name: &str, node: &str, cpu: &str) {
    let mut p = kube_sim::pod_object("default", name, "agent-scheduler", cpu, "1Gi");
    p["spec"]["nodeName"] = serde_json::json!(node);
    sim.create("v1", "pods", p).expect("create pod");
}

/// Two bands over 32-CPU nodes: `busy` ≥ 50 % requested, `idle` below.
const BANDS: &str = r#"
schedulerConfigs:
  - name: busy
    policies:
      - name: allocation-rate
        arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}
  - name: idle
    policies:
      - name: allocation-rate
        arguments: {minCPUUtil: 0.0, maxCPUUtil: 0.49}
shardSyncPeriod: 1h
"#;

#[tokio::test]
async fn creates_exclusive_nodeshards_from_the_configmap_and_hot_reloads() {
    let (_sim, client) = sim(6).await;
    put_cm(
        &client,
        Some(
            "schedulerConfigs:\n\
             - name: first\n  policies:\n  - name: node-limit\n    arguments: {maxNodes: 2}\n\
             - name: second\n  policies:\n  - name: allocation-rate\n    arguments: {maxCPUUtil: 1}\n\
             shardSyncPeriod: 1h\n",
        ),
    )
    .await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let s = shards(&client).await;
    assert_eq!(
        s.keys().collect::<Vec<_>>(),
        ["first", "second"],
        "one per configured scheduler, nothing from the flags"
    );
    let (a, b) = (desired(&s, "first"), desired(&s, "second"));
    assert_eq!(a.len(), 2);
    assert_eq!(b.len(), 4);
    assert!(a.is_disjoint(&b), "exclusive: {a:?} / {b:?}");
    assert_eq!(a.union(&b).count(), 6);
    assert!(
        s.values().all(|s| s.status.is_none()),
        "the controller never writes status"
    );

    // Hot reload: first may take 4 now.
    put_cm(
        &client,
        Some(
            "schedulerConfigs:\n\
             - name: first\n  policies:\n  - name: node-limit\n    arguments: {maxNodes: 4}\n\
             - name: second\n  policies:\n  - name: allocation-rate\n    arguments: {maxCPUUtil: 1}\n\
             shardSyncPeriod: 1h\n",
        ),
    )
    .await;
    // The two NodeShards are written one after the other: wait for both (a reader between the
    // writes sees `first` grown and `second` not yet shrunk; the schedulers' rule `available =
    // desired − ⋃ other.nodesInUse` keeps that safe).
    let s = until_shards(&client, "reload applied", |s| {
        desired(s, "first").len() == 4 && desired(s, "second").len() == 2
    })
    .await;
    assert!(desired(&s, "first").is_disjoint(&desired(&s, "second")));
    // The reload is counted once its sync is done, which may be after its writes are seen.
    let st = c.wait("the reload counted", |s| s.reloads_ok >= 2).await;
    assert_eq!(st.reloads_ok, 2);
    c.stop().await;
}

#[tokio::test]
async fn allocation_rate_without_arguments_takes_the_whole_range() {
    // Upstream volcano-sh/volcano#5743: no bounds means [0, 1], not [0, 0] (which starved the
    // shard of every node with anything on it).
    let (sim, client) = sim(4).await;
    bound_pod(&sim, "busy", &n(0), "8");
    put_cm(
        &client,
        Some("schedulerConfigs:\n- name: all\n  policies:\n  - name: allocation-rate\nshardSyncPeriod: 1h\n"),
    )
    .await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let s = shards(&client).await;
    assert_eq!(desired(&s, "all").len(), 4, "{:?}", desired(&s, "all"));
    c.stop().await;
}

#[tokio::test]
async fn rejected_configmaps_leave_nodeshards_alone() {
    let (_sim, client) = sim(4).await;
    put_cm(&client, Some(&BANDS.replace("1h", "300ms"))).await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let before = until_shards(&client, "both shards", |s| s.len() == 2).await;
    assert_eq!(desired(&before, "idle").len(), 4);

    for (i, bad) in [
        Some("schedulerConfigs: [{name: busy, policies: [{name: no-such-policy}]}]"),
        Some(""),
        Some("schedulerConfigs: []"),
        None, // no sharding.yaml key
    ]
    .into_iter()
    .enumerate()
    {
        put_cm(&client, bad).await;
        let st = c
            .wait("rejected", |s| s.reloads_rejected as usize == i + 1)
            .await;
        // Periodic syncs keep running on the previous configuration.
        let base = st.syncs_ok;
        c.wait("a sync after the rejection", |s| s.syncs_ok >= base + 2)
            .await;
        let now = shards(&client).await;
        assert_eq!(
            now.keys().collect::<Vec<_>>(),
            ["busy", "idle"],
            "case {i}: nothing deleted"
        );
        for name in ["busy", "idle"] {
            assert_eq!(
                now[name].metadata.resource_version, before[name].metadata.resource_version,
                "case {i}: {name} untouched"
            );
        }
    }
    let text = c.metrics.encode();
    assert!(
        text.contains("magma_shardctl_config_reloads_total{result=\"rejected\"} 4"),
        "{text}"
    );
    c.stop().await;
}

#[tokio::test]
async fn an_invalid_configmap_at_start_writes_nothing_until_fixed() {
    let (_sim, client) = sim(3).await;
    create_shard(&client, "agent-scheduler", &[n(0)], &[]).await;
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: x, cpuUtilizationMin: 2}]"),
    )
    .await;
    let mut c = start(&client, flag_default());
    c.wait("rejected", |s| s.reloads_rejected == 1 && s.caches_synced)
        .await;
    // Neither the invalid configuration nor the flag fallback is synced.
    let synced_early = tokio::time::timeout(
        Duration::from_secs(1),
        c.status.wait_for(|s| s.syncs_ok > 0),
    )
    .await
    .is_ok();
    assert!(!synced_early, "a sync ran without a valid configuration");
    assert_eq!(
        desired(&shards(&client).await, "agent-scheduler"),
        BTreeSet::from([n(0)])
    );
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: agent-scheduler, cpuUtilizationMax: 1}]"),
    )
    .await;
    c.wait("fixed and synced", |s| s.syncs_ok >= 1).await;
    let first = c.now();
    assert_eq!(
        first.syncs_ok, 1,
        "no sync ran on the invalid configuration: {first:?}"
    );
    let s = until_shards(&client, "all nodes", |s| {
        desired(s, "agent-scheduler").len() == 3
    })
    .await;
    assert_eq!(s.len(), 1, "no flag-config shards were created");
    c.stop().await;
}

#[tokio::test]
async fn without_a_configmap_the_flag_configs_apply() {
    let (_sim, client) = sim(5).await;
    let flags = ShardingConfig::from_flags(
        &["a:agent:0.0:1.0:false:0:2", "b:volcano:0.0:1.0:false:0:0"],
        Duration::from_secs(3600),
        true,
    )
    .expect("flags");
    let mut c = start(&client, flags);
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    assert_eq!(c.now().config, Some(controller::ConfigSource::Flags));
    let s = shards(&client).await;
    assert_eq!(desired(&s, "a").len(), 2);
    assert_eq!(desired(&s, "b").len(), 3);

    // Creating the ConfigMap later switches to it.
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: a, cpuUtilizationMax: 1}]\nshardSyncPeriod: 1h"),
    )
    .await;
    let s = until_shards(&client, "switched to the ConfigMap", |s| {
        desired(s, "a").len() == 5 && !s.contains_key("b")
    })
    .await;
    // b is stale now, and its status lists nothing in use: deleted.
    assert!(!s.contains_key("b"));
    c.stop().await;
}

#[tokio::test]
async fn node_add_and_delete_trigger_a_resync() {
    let (sim, client) = sim(2).await;
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: all, cpuUtilizationMax: 1}]\nshardSyncPeriod: 1h"),
    )
    .await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    assert_eq!(desired(&shards(&client).await, "all").len(), 2);
    sim.create_node("extra").expect("node");
    until_shards(&client, "new node assigned", |s| {
        desired(s, "all").contains("extra")
    })
    .await;
    sim.delete("v1", "nodes", "", "extra").expect("delete node");
    until_shards(&client, "deleted node dropped", |s| {
        !desired(s, "all").contains("extra") && desired(s, "all").len() == 2
    })
    .await;
    c.stop().await;
}

#[tokio::test]
async fn utilisation_changes_move_nodes_between_bands() {
    let (sim, client) = sim(3).await;
    put_cm(&client, Some(BANDS)).await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let s = shards(&client).await;
    assert!(desired(&s, "busy").is_empty());
    assert_eq!(desired(&s, "idle").len(), 3);
    // 20 of 32 CPUs requested on node 1, by two pods (each alone stays in the idle band).
    bound_pod(&sim, "p1", &n(1), "10");
    bound_pod(&sim, "p2", &n(1), "10");
    let s = until_shards(&client, "node 1 is busy", |s| {
        desired(s, "busy") == BTreeSet::from([n(1)])
    })
    .await;
    assert_eq!(desired(&s, "idle"), BTreeSet::from([n(0), n(2)]));
    // A deleted pod no longer counts: node 1 goes back.
    sim.delete("v1", "pods", "default", "p1").expect("delete");
    until_shards(&client, "node 1 is idle again", |s| {
        desired(s, "idle").len() == 3
    })
    .await;
    c.stop().await;
}

#[tokio::test]
async fn a_stale_shard_is_emptied_and_deleted_only_once_released() {
    let (_sim, client) = sim(3).await;
    create_shard(&client, "gone", &[n(0)], &[n(0)]).await;
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: all, cpuUtilizationMax: 1}]\nshardSyncPeriod: 300ms"),
    )
    .await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let s = until_shards(&client, "gone emptied", |s| {
        s.get("gone")
            .is_some_and(|g| g.spec.nodes_desired.is_empty())
    })
    .await;
    assert_eq!(
        set(&s["gone"].status.as_ref().expect("status").nodes_in_use),
        BTreeSet::from([n(0)])
    );
    // Several periodic syncs later it is still there.
    let base = c.now().syncs_ok;
    c.wait("more syncs", |s| s.syncs_ok >= base + 3).await;
    assert!(
        shards(&client).await.contains_key("gone"),
        "not deleted while its status lists nodes in use"
    );
    // Its scheduler releases the node: the shard goes.
    set_in_use(&client, "gone", &[]).await;
    let s = until_shards(&client, "gone deleted", |s| !s.contains_key("gone")).await;
    assert_eq!(desired(&s, "all").len(), 3);
    c.stop().await;
}

#[tokio::test]
async fn an_in_transit_node_is_not_moved_again() {
    let (sim, client) = sim(3).await;
    // Node 1 is moving busy → idle: busy's spec dropped it, its status still uses it.
    create_shard(&client, "busy", &[], &[n(1)]).await;
    create_shard(&client, "idle", &[n(0), n(1), n(2)], &[]).await;
    // Node 1 then fills up, which would send it back to busy.
    bound_pod(&sim, "fill", &n(1), "20");
    put_cm(&client, Some(BANDS)).await;
    let mut c = start(&client, flag_default());
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let s = shards(&client).await;
    assert!(
        desired(&s, "busy").is_empty(),
        "node 1 not moved back mid-move"
    );
    assert_eq!(desired(&s, "idle").len(), 3);
    assert_eq!(c.now().last_sync_writes, 0);
    // The release completes: now the move back happens.
    set_in_use(&client, "busy", &[]).await;
    let s = until_shards(&client, "node 1 moves to busy", |s| {
        desired(s, "busy") == BTreeSet::from([n(1)])
    })
    .await;
    assert_eq!(desired(&s, "idle"), BTreeSet::from([n(0), n(2)]));
    c.stop().await;
}

#[tokio::test]
async fn metrics_are_served() {
    let (_sim, client) = sim(2).await;
    put_cm(
        &client,
        Some("schedulerConfigs: [{name: all, cpuUtilizationMax: 1}]"),
    )
    .await;
    let mut c = start(&client, flag_default());
    let m = c.metrics.clone();
    let encoder: MetricsEncoder = Arc::new(move || m.encode());
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, server) = serve(
        "127.0.0.1:0".parse().expect("addr"),
        router_with(c.readiness.clone(), Some(encoder), true),
        async move {
            let _ = rx.await;
        },
    )
    .await
    .expect("serve");
    c.wait("first sync", |s| s.syncs_ok >= 1).await;
    let (code, body) = http_get(addr.port(), "/metrics").await;
    assert_eq!(code, 200);
    for line in [
        "magma_shardctl_syncs_total{result=\"ok\"} 1",
        "magma_shardctl_shard_nodes{shard=\"all\"} 2",
        "magma_shardctl_config_reloads_total{result=\"ok\"} 1",
        "magma_shardctl_leader 1",
        "magma_shardctl_nodeshard_writes_total{verb=\"create\",result=\"ok\"} 1",
        "magma_shardctl_sync_duration_seconds_count 1",
    ] {
        assert!(body.contains(line), "missing {line:?} in\n{body}");
    }
    let (code, _) = http_get(addr.port(), "/healthz").await;
    assert_eq!(code, 200);
    // Ready once the caches synced (the first sync needs them).
    let (code, body) = http_get(addr.port(), "/readyz").await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    let _ = stop.send(());
    server.await.expect("server task").expect("server");
    c.stop().await;
}

// ---- The real binaries ---------------------------------------------------------------------

/// Upstream's `example/sharding/sharding-config-configmap.yaml`, verbatim (deprecated scalars).
const UPSTREAM_CM: &str = include_str!("data/upstream-sharding-config-configmap.yaml");

mod process {
    use super::*;
    use procs::{Proc, SHARD_CONTROLLER as BIN, SimProc, TempDir, free_port};
    use std::process::Command;

    #[test]
    fn dry_run_and_bad_flags() {
        let out = Command::new(BIN)
            .args([
                "--dry-run",
                "--scheduler-configs=agent-scheduler:agent:0.7:1.0:true:1:100",
                "--leader-elect=false",
                "--enable-metrics",
                "--listen-address=:0",
            ])
            .output()
            .expect("runs");
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("valid") && stdout.lines().count() == 1,
            "{stdout}"
        );

        for (arg, flag) in [
            ("--shard-sync-period=fast", "shard-sync-period"),
            ("--scheduler-configs=a:b", "scheduler-configs"),
            ("--no-such-flag", "no-such-flag"),
        ] {
            let out = Command::new(BIN)
                .args(["--dry-run", arg])
                .output()
                .expect("runs");
            assert_eq!(out.status.code(), Some(2), "{arg}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(flag), "{arg}: {stderr}");
        }
    }

    #[tokio::test]
    async fn upstream_example_configmap_then_sigterm_releases_the_lease() {
        let dir = TempDir::new("shardctl-upstream-example");
        let sim = SimProc::start(dir.path(), 4, &["--install-nodeshard-crd"]);
        let client = sim.client().await;
        let cm: ConfigMap = serde_saphyr::from_str(UPSTREAM_CM).expect("upstream example");
        Api::<ConfigMap>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &cm)
            .await
            .expect("apply the example");

        let metrics_port = free_port();
        let mut ctl = Proc::spawn(
            dir.path(),
            "shard-controller",
            BIN,
            &[
                sim.kubeconfig_flag(),
                "-v=2".to_owned(),
                "--enable-metrics".to_owned(),
                format!("--listen-address=127.0.0.1:{metrics_port}"),
            ],
        );
        // Idle nodes: volcano (0–0.69) takes all four; agent-scheduler (0.7–1) none.
        let s = until_shards(&client, "NodeShards from the example", |s| {
            s.contains_key("agent-scheduler") && desired(s, "volcano").len() == 4
        })
        .await;
        assert!(desired(&s, "agent-scheduler").is_empty());
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), NS);
        let holder = |l: &k8s_openapi::api::coordination::v1::Lease| {
            l.spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default()
        };
        let lease = leases.get("magma-shard-controller").await.expect("lease");
        assert!(!holder(&lease).is_empty(), "the controller leads");
        let (code, body) = http_get(metrics_port, "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("magma_shardctl_leader 1"), "{body}");

        let exit = ctl.terminate(Duration::from_secs(10));
        assert!(exit.success(), "{exit:?}");
        let lease = leases.get("magma-shard-controller").await.expect("lease");
        assert_eq!(
            holder(&lease),
            "",
            "the lease is released for a fast takeover"
        );
    }
}
