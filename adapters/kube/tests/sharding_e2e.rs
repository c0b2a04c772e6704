//! Sharding end to end with the real binaries as processes: `kube-sim`, `agent-scheduler` and
//! `shard-controller`, talking HTTP. The in-process versions of the same cases are in
//! `sharding.rs`.
//!
//! - **Upstream's sharding e2e cases** (`volcano-agent-scheduler.md` §10.2). As upstream's e2e
//!   does, the test pins the agent shard through the controller's ConfigMap: `warmup` on a test
//!   label (weight 100) plus `node-limit` max 1, period "1s"; `volcano` takes the other nodes.
//!   Hard and soft put pods on the shard node; soft falls back outside when the shard node is
//!   full; hard leaves the pod Unschedulable with `PodScheduled=False/Unschedulable` and the
//!   message, then schedules it once room is made; none follows the scores and ignores the shard;
//!   the NodeShards exist and the scheduler writes its own status (`nodesInUse`,
//!   `lastUpdateTime`), and only in soft and hard mode. Another scheduler's placeholder is
//!   known to be in the scheduler's view once a witness pod, which can only be placed beside
//!   it (required pod affinity), is bound; that the pending pod stays pending in hard mode is
//!   checked after the scheduler has decided it again (room made outside the shard).
//! - **Live rebalance**: two hard-mode schedulers on two shards of six 4-CPU nodes, while the
//!   controller moves ten nodes between them in six steps (the test relabels nodes for the
//!   `warmup` policies and rewrites the ConfigMap's `maxNodes`; the controller rewrites
//!   `nodesDesired`), under a steady stream of short-lived pods (kube-sim `--pod-lifetime`, 25 ms
//!   API latency so binds are in flight for a while, and watches 20 ms behind the answers to
//!   writes, as a real server's watch cache can be) plus a burst at each move. Every change the
//!   API server commits to pods and NodeShards is recorded by two watches. kube-sim's
//!   resourceVersion is one global counter, so the two streams merge into one exact order of
//!   events, and the assertions are checked against that history:
//!   1. each binding commits while its scheduler's own status lists the node (write before use,
//!      drain before release; in hard mode, also inside the shard);
//!   2. between bindings of two schedulers on one node, the first one published the node's
//!      release: no node is ever used by both while in transit;
//!   3. no node is ever over allocatable (CPU, memory, pods), counting every bound pod until it
//!      finishes or is deleted;
//!   4. every pod is bound exactly once, by one binding request (a second one, answered 409,
//!      means it was decided twice), none is left pending;
//!   5. the hand-offs really happened under load: at least 6 of the moves had pods bound onto
//!      the node by the releasing scheduler just before and by the receiving one just after.
//!
//!   After each move the test waits, on the recorded history, until pods have landed on every
//!   node of the new layout (bound by its new holder) before the next move.
//!
//!   The check itself is tested on hand-made histories at the end of the file.

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use kube::core::WatchEvent;
use magma_kube::nodeshard::NodeShard;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use crate::procs;
use procs::{
    Proc, SimProc, TempDir, eventually, free_port, http_get, start_controller, start_scheduler,
};

const NS: &str = "volcano-system";
const CM: &str = "volcano-sharding-configmap";
/// Generous: the machine may be loaded.
const WAIT: Duration = Duration::from_secs(30);
/// The label the pinned ConfigMap's `warmup` policy scores.
const PIN_LABEL: &str = "e2e.magma.io/agent-shard";

fn node(i: usize) -> String {
    kube_sim::node_name(i)
}

// ---------------------------------------------------------------------------------------------
// API helpers

async fn put_configmap(client: &kube::Client, sharding_yaml: &str) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let mut cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "namespace": NS},
        "data": {"sharding.yaml": sharding_yaml},
    }))
    .expect("ConfigMap");
    match api.get_opt(CM).await.expect("get ConfigMap") {
        None => {
            api.create(&PostParams::default(), &cm)
                .await
                .expect("create ConfigMap");
        }
        Some(old) => {
            cm.metadata.resource_version = old.metadata.resource_version;
            api.replace(CM, &PostParams::default(), &cm)
                .await
                .expect("replace ConfigMap");
        }
    }
}

async fn label_node(client: &kube::Client, name: &str, key: &str, value: &str) {
    let api: Api<Node> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("labelling {name}: {e}"));
}

async fn shards(client: &kube::Client) -> BTreeMap<String, NodeShard> {
    let api: Api<NodeShard> = Api::all(client.clone());
    api.list(&ListParams::default())
        .await
        .expect("list NodeShards")
        .items
        .into_iter()
        .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
        .collect()
}

fn desired(s: &NodeShard) -> BTreeSet<String> {
    s.spec.nodes_desired.iter().cloned().collect()
}

fn in_use(s: &NodeShard) -> BTreeSet<String> {
    s.status
        .as_ref()
        .map(|st| st.nodes_in_use.iter().cloned().collect())
        .unwrap_or_default()
}

fn set<const N: usize>(nodes: [String; N]) -> BTreeSet<String> {
    nodes.into_iter().collect()
}

fn describe(s: &BTreeMap<String, NodeShard>) -> String {
    s.iter()
        .map(|(k, v)| {
            format!(
                "{k}: desired {:?} status {:?}",
                v.spec.nodes_desired, v.status
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

async fn create_pod(client: &kube::Client, name: &str, scheduler: &str, cpu: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod: Pod = serde_json::from_value(kube_sim::pod_object(
        "default", name, scheduler, cpu, "256Mi",
    ))
    .expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating pod {name}: {e}"));
}

/// The label every placeholder carries (its own name), for its witness's pod affinity.
const PLACEHOLDER_LABEL: &str = "e2e.magma.io/placeholder";

/// A pod of another scheduler created straight onto `node` (upstream's placeholder).
async fn create_bound_pod(client: &kube::Client, name: &str, node: &str, cpu: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut v = kube_sim::pod_object("default", name, "volcano", cpu, "1Gi");
    v["spec"]["nodeName"] = json!(node);
    v["metadata"]["labels"] = json!({ PLACEHOLDER_LABEL: name });
    let pod: Pod = serde_json::from_value(v).expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating placeholder {name}: {e}"));
}

async fn get_pod(client: &kube::Client, name: &str) -> Pod {
    Api::<Pod>::namespaced(client.clone(), "default")
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("get pod {name}: {e}"))
}

fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone()
}

/// `PodScheduled` as (status, reason, message).
fn scheduled_condition(p: &Pod) -> Option<(String, String, String)> {
    let c = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled")?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// Waits until the scheduler's view holds the placeholder `name` (on `node`). The scheduler
/// learns of another scheduler's pod from its assigned-pods watch, a stream separate from its
/// pending-pods watch, so a pod created next could be decided before it. The witness is a pod
/// of ours (10m CPU) that can only be placed beside the placeholder (required pod affinity to
/// its label, per hostname): once the scheduler has bound it there, its view holds the
/// placeholder.
async fn witness(client: &kube::Client, name: &str, node: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let witness = format!("{name}-witness");
    let mut v = kube_sim::pod_object("default", &witness, "agent-scheduler", "10m", "64Mi");
    v["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": { PLACEHOLDER_LABEL: name }},
        "topologyKey": "kubernetes.io/hostname",
    }]}});
    let pod: Pod = serde_json::from_value(v).expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creating {witness}: {e}"));
    let n = bound(client, std::slice::from_ref(&witness)).await;
    assert_eq!(n, [node], "{witness} is placed beside {name}");
}

/// One series of the scheduler's `/metrics` (e.g. `magma_unschedulable_total`).
async fn metric(port: u16, series: &str) -> Result<u64, String> {
    let (code, body) = http_get(port, "/metrics").await;
    body.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{code}: no {series}"))
}

/// Waits until every named pod is bound; returns their nodes.
async fn bound(client: &kube::Client, names: &[String]) -> Vec<String> {
    eventually(&format!("{} pod(s) bound", names.len()), WAIT, || async {
        let mut nodes = Vec::new();
        for n in names {
            match node_of(&get_pod(client, n).await) {
                Some(node) => nodes.push(node),
                None => return Err(format!("{n} not bound")),
            }
        }
        Ok(nodes)
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Upstream's cases: the agent shard pinned to one node

/// Upstream's e2e ConfigMap for pinning tests: warmup on a test label + node-limit 1, period 1s.
fn pinned_configmap() -> String {
    format!(
        r#"schedulerConfigs:
  - name: agent-scheduler
    type: agent
    policies:
      - name: warmup
        weight: 100
        arguments:
          warmupLabel: {PIN_LABEL}
          warmupLabelValue: "true"
      - name: node-limit
        arguments:
          minNodes: 1
          maxNodes: 1
  - name: volcano
    type: volcano
    policies:
      - name: node-limit
        arguments:
          minNodes: 0
          maxNodes: 100
shardSyncPeriod: "1s"
enableNodeEventTrigger: true
"#
    )
}

/// The pinned set-up: 4 nodes (upstream's kind cluster has 4 workers), the controller with the
/// pinned ConfigMap, and one `agent-scheduler` in `mode`.
struct Pinned {
    sched: Proc,
    metrics_port: u16,
    _ctl: Proc,
    sim: SimProc,
    client: kube::Client,
    shard_node: String,
    // Last, so the logs are still there when the processes print them on failure.
    _dir: TempDir,
}

impl Pinned {
    async fn start(name: &str, mode: &str) -> Pinned {
        let dir = TempDir::new(name);
        let sim = SimProc::start(dir.path(), 4, &["--install-nodeshard-crd"]);
        let client = sim.client().await;
        let shard_node = node(2);
        label_node(&client, &shard_node, PIN_LABEL, "true").await;
        put_configmap(&client, &pinned_configmap()).await;
        let mut ctl = start_controller(dir.path(), &sim, &[]);
        let others = set([node(0), node(1), node(3)]);
        let s = eventually("the controller pins the agent shard", WAIT, || async {
            let s = shards(&client).await;
            match (s.get("agent-scheduler"), s.get("volcano")) {
                (Some(a), Some(v))
                    if desired(a) == set([shard_node.clone()]) && desired(v) == others =>
                {
                    Ok(s)
                }
                _ => Err(describe(&s)),
            }
        })
        .await;
        assert_eq!(
            s.len(),
            2,
            "one NodeShard per configured scheduler: {}",
            describe(&s)
        );
        ctl.assert_running();
        let mode_flag = format!("--scheduler-sharding-mode={mode}");
        let metrics_port = free_port();
        let listen = format!("--listen-address=127.0.0.1:{metrics_port}");
        let sched = start_scheduler(
            dir.path(),
            &sim,
            "agent-scheduler",
            &[&mode_flag, "--enable-metrics", &listen],
        );
        Pinned {
            sched,
            metrics_port,
            _ctl: ctl,
            sim,
            client,
            shard_node,
            _dir: dir,
        }
    }

    /// Waits until the scheduler has claimed its node in its NodeShard's status and schedules
    /// with it, and checks the status as upstream's e2e and Volcano's tools read it. The
    /// scheduler uses a node only once its own status, as its NodeShard watch shows it, lists it
    /// (write before use), so the API server can hold the status a moment before the
    /// scheduler's view does; its `in_view` gauge says when the view has it.
    async fn wait_status_written(&self) {
        let want = set([self.shard_node.clone()]);
        let s = eventually(
            "the scheduler writes its NodeShard status",
            WAIT,
            || async {
                let s = shards(&self.client).await;
                match s.get("agent-scheduler") {
                    Some(a) if in_use(a) == want => Ok(s),
                    _ => Err(describe(&s)),
                }
            },
        )
        .await;
        eventually(
            "the scheduler's view holds the shard node",
            WAIT,
            || async {
                let port = self.metrics_port;
                if tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .is_err()
                {
                    return Err("metrics not served yet".to_owned());
                }
                let (code, body) = http_get(port, "/metrics").await;
                let line = body
                    .lines()
                    .find(|l| l.starts_with("magma_shard_nodes{state=\"in_view\"}"))
                    .unwrap_or_default()
                    .to_owned();
                if code == 200 && line.ends_with(" 1") {
                    Ok(())
                } else {
                    Err(format!("{code}: {line:?}"))
                }
            },
        )
        .await;
        let status = s["agent-scheduler"].status.clone().expect("status");
        assert!(
            status.last_update_time.is_some(),
            "lastUpdateTime set: {status:?}"
        );
        assert!(
            status.nodes_to_add.is_empty() && status.nodes_to_remove.is_empty(),
            "{status:?}"
        );
        assert!(
            in_use(&s["volcano"]).is_empty(),
            "another scheduler's status is not ours to write: {}",
            describe(&s)
        );
    }

    /// Upstream's placement case: a single pod (100m CPU), then a batch of 10 (30m): every one
    /// must be bound to the shard node (`failure` says what it means when one is not).
    async fn single_and_batch_land_on_the_shard_node(&self, failure: &str) {
        create_pod(&self.client, "single", "agent-scheduler", "100m").await;
        let mut all: Vec<String> = (0..10).map(|i| format!("batch-{i}")).collect();
        for n in &all {
            create_pod(&self.client, n, "agent-scheduler", "30m").await;
        }
        all.push("single".into());
        for (pod, n) in all.iter().zip(bound(&self.client, &all).await) {
            assert_eq!(n, self.shard_node, "{pod}: {failure}");
        }
    }

    /// Only our own NodeShard's status subresource is written, by the scheduler (the controller
    /// writes specs only).
    async fn assert_status_writes_only_own(&self) {
        let writes = self.sim.records("writes").await;
        let status_writes: Vec<&serde_json::Value> = writes
            .as_array()
            .expect("array")
            .iter()
            .filter(|w| w["resource"] == "nodeshards/status")
            .collect();
        assert!(
            status_writes.iter().any(|w| w["code"] == 200),
            "at least one status write succeeded"
        );
        for w in status_writes {
            assert_eq!(w["name"], "agent-scheduler", "{w}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_mode_schedules_in_the_shard_and_leaves_a_pod_unschedulable_when_it_is_full() {
    let mut t = Pinned::start("shard-hard", "hard").await;
    t.wait_status_written().await;
    // A single pod, then a batch of 10 (30m CPU): all on the shard node, and Running.
    t.single_and_batch_land_on_the_shard_node("outside the hard shard")
        .await;
    eventually("single Running", WAIT, || async {
        let p = get_pod(&t.client, "single").await;
        let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
        if phase == "Running" {
            Ok(())
        } else {
            Err(phase)
        }
    })
    .await;

    // Fill the shard node with a placeholder bound pod (31 of its 32 CPU; 0.4 are in use), and
    // put another scheduler's pod on a node outside the shard (deleted below).
    create_bound_pod(&t.client, "placeholder", &t.shard_node, "31").await;
    create_bound_pod(&t.client, "elsewhere", &node(0), "1").await;
    witness(&t.client, "placeholder", &t.shard_node).await;
    create_pod(&t.client, "too-big", "agent-scheduler", "1").await;
    let (status, reason, message) = eventually("too-big reported unschedulable", WAIT, || async {
        let p = get_pod(&t.client, "too-big").await;
        scheduled_condition(&p).ok_or_else(|| format!("{:?}", p.status))
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable")
    );
    assert_eq!(
        message,
        "0/4 nodes are unavailable: 1 Insufficient cpu, 3 node isn't in scheduler node shard. \
         preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling."
    );
    // Three nodes have room, but not in the shard: the pod stays pending (upstream checks a
    // minute). Room appears outside the shard (a pod there goes, at once): the freed room is
    // judged with the shard's view, so the pod is not even tried again. A small pod created
    // after the deletion and bound in the shard shows the deletion was seen.
    const UNSCHEDULABLE: &str = "magma_unschedulable_total";
    let decided = metric(t.metrics_port, UNSCHEDULABLE)
        .await
        .expect("unschedulable count");
    Api::<Pod>::namespaced(t.client.clone(), "default")
        .delete("elsewhere", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete elsewhere");
    // One pod watch carries both: the deletion comes before the probe.
    create_pod(&t.client, "probe", "agent-scheduler", "100m").await;
    let n = bound(&t.client, &["probe".to_owned()]).await;
    assert_eq!(n, [t.shard_node.clone()]);
    assert_eq!(
        metric(t.metrics_port, UNSCHEDULABLE).await,
        Ok(decided),
        "room outside the shard woke a pod it cannot help"
    );
    let p = get_pod(&t.client, "too-big").await;
    assert_eq!(
        node_of(&p),
        None,
        "hard mode placed a pod outside its shard"
    );
    assert_eq!(
        scheduled_condition(&p).map(|c| c.1).as_deref(),
        Some("Unschedulable")
    );

    // Room is made in the shard: the pod is requeued and lands there.
    Api::<Pod>::namespaced(t.client.clone(), "default")
        .delete("placeholder", &DeleteParams::default())
        .await
        .expect("delete placeholder");
    let n = bound(&t.client, &["too-big".to_owned()]).await;
    assert_eq!(n, [t.shard_node.clone()]);
    t.assert_status_writes_only_own().await;
    t.sched.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_mode_prefers_the_shard_and_falls_back_outside_when_it_is_full() {
    let mut t = Pinned::start("shard-soft", "soft").await;
    t.wait_status_written().await;
    // Least-requested scoring would spread these over the four nodes; soft mode keeps every one
    // on the shard node while it fits.
    t.single_and_batch_land_on_the_shard_node("soft mode did not prefer the shard")
        .await;

    create_bound_pod(&t.client, "placeholder", &t.shard_node, "31").await;
    witness(&t.client, "placeholder", &t.shard_node).await;
    create_pod(&t.client, "spill", "agent-scheduler", "1").await;
    let n = bound(&t.client, &["spill".to_owned()]).await;
    assert_ne!(n[0], t.shard_node, "the full shard node cannot take it");
    let p = get_pod(&t.client, "spill").await;
    assert_eq!(
        scheduled_condition(&p).map(|c| (c.0, c.1)),
        Some(("True".to_owned(), String::new())),
        "fell back at once, never reported unschedulable"
    );
    t.assert_status_writes_only_own().await;
    t.sched.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn none_mode_follows_the_scores_and_ignores_the_shard() {
    let mut t = Pinned::start("shard-none", "none").await;
    // Half of the shard node is taken by another scheduler's pod: by the scores, the other
    // three nodes are better. Soft or hard mode would still use the shard node.
    create_bound_pod(&t.client, "placeholder", &t.shard_node, "16").await;
    witness(&t.client, "placeholder", &t.shard_node).await;
    // One pod at a time, each after the previous is bound: with a burst, a node whose bind
    // version moved since the snapshot is tried after the unchanged ones whatever its score
    // (upstream's SelectBestNodes sets nodes in the binder aside the same way), so only
    // sequential pods follow the scores exactly.
    let mut nodes = Vec::new();
    for i in 0..6 {
        let name = format!("seq-{i}");
        create_pod(&t.client, &name, "agent-scheduler", "100m").await;
        let n = bound(&t.client, std::slice::from_ref(&name)).await;
        assert_ne!(
            n[0], t.shard_node,
            "{name}: mode none placed by the shard, not the scores"
        );
        nodes.extend(n);
    }
    let distinct: BTreeSet<&String> = nodes.iter().collect();
    assert!(
        distinct.len() >= 2,
        "least-requested spreads them: {nodes:?}"
    );

    // The NodeShards exist (the controller made them) but mode none writes no status.
    let s = shards(&t.client).await;
    assert_eq!(desired(&s["agent-scheduler"]), set([t.shard_node.clone()]));
    assert!(
        s.values()
            .all(|v| v.status.is_none() || in_use(v).is_empty()),
        "{}",
        describe(&s)
    );
    let writes = t.sim.records("writes").await;
    assert!(
        writes
            .as_array()
            .expect("array")
            .iter()
            .all(|w| w["resource"] != "nodeshards/status"),
        "mode none writes no NodeShard status"
    );
    t.sched.assert_running();
}

// ---------------------------------------------------------------------------------------------
// Live rebalance

/// The label the rebalance ConfigMap's `warmup` policies score (`a` or `b`).
const POOL: &str = "e2e.magma.io/pool";
const SHARD_A: &str = "magma-a";
const SHARD_B: &str = "magma-b";
const REBALANCE_NODES: usize = 6;
/// Pods per scheduler, created at a steady rate over `FEED_FOR`.
const PODS_EACH: usize = 300;
const FEED_FOR: Duration = Duration::from_secs(30);
/// CPU requests in millicores, cycled over the pods (nodes have 4 CPU).
const POD_CPU_M: [u64; 3] = [250, 500, 1000];
const POD_MEMORY: u64 = 256 << 20;

fn rebalance_configmap(max_a: usize, max_b: usize) -> String {
    let entry = |name: &str, pool: &str, max: usize| {
        format!(
            r#"  - name: {name}
    type: agent
    policies:
      - name: warmup
        weight: 100
        arguments:
          warmupLabel: {POOL}
          warmupLabelValue: "{pool}"
      - name: node-limit
        arguments:
          minNodes: 1
          maxNodes: {max}
"#
        )
    };
    format!(
        "schedulerConfigs:\n{}{}shardSyncPeriod: \"1s\"\nenableNodeEventTrigger: true\n",
        entry(SHARD_A, "a", max_a),
        entry(SHARD_B, "b", max_b)
    )
}

/// At most this many extra pods per scheduler are created while each move is under way, one
/// pair every `BURST_EVERY`, so that binds are in flight when the controller takes a node away
/// (the drain window).
const BURST: usize = 24;
const BURST_EVERY: Duration = Duration::from_millis(20);
const BURST_CPU_M: u64 = 250;

/// Creates burst pods for move `k` until `stop` is set or `BURST` pairs exist; returns their
/// names.
async fn burst_pods(client: kube::Client, k: usize, stop: Arc<AtomicBool>) -> Vec<String> {
    let cpu = format!("{BURST_CPU_M}m");
    let mut names = Vec::new();
    let mut creating = Vec::new();
    for j in 0..BURST {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        for s in [SHARD_A, SHARD_B] {
            let (client, cpu, name) = (client.clone(), cpu.clone(), format!("{s}-move{k}-{j}"));
            names.push(name.clone());
            creating.push(tokio::spawn(async move {
                create_pod(&client, &name, s, &cpu).await;
            }));
        }
        tokio::time::sleep(BURST_EVERY).await;
    }
    for c in creating {
        c.await.expect("burst pod created");
    }
    names
}

fn pod_cpu_m(i: usize) -> u64 {
    POD_CPU_M[i % POD_CPU_M.len()]
}

/// One committed change, as a watch delivered it.
#[derive(Debug, Clone)]
enum Rec {
    Shard {
        name: String,
        desired: BTreeSet<String>,
        in_use: BTreeSet<String>,
    },
    Pod {
        name: String,
        scheduler: String,
        node: Option<String>,
        /// `Succeeded` or `Failed`, or deleted: its requests no longer count.
        done: bool,
        /// Phase and `PodScheduled` condition, for the dump kept when the check fails.
        #[allow(dead_code, reason = "read through `Debug`, in the dump")]
        detail: String,
    },
}

#[derive(Debug, Clone)]
struct Seen {
    rv: u64,
    at: Instant,
    rec: Rec,
}

#[derive(Default)]
struct History {
    events: Vec<Seen>,
    errors: Vec<String>,
}

type SharedHistory = Arc<Mutex<History>>;

fn rv_of(meta: &kube::api::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("kube-sim resourceVersions are numbers")
}

fn shard_rec(s: &NodeShard, deleted: bool) -> Rec {
    Rec::Shard {
        name: s.metadata.name.clone().unwrap_or_default(),
        desired: if deleted { BTreeSet::new() } else { desired(s) },
        in_use: if deleted { BTreeSet::new() } else { in_use(s) },
    }
}

fn pod_rec(p: &Pod, deleted: bool) -> Rec {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    Rec::Pod {
        name: p.metadata.name.clone().unwrap_or_default(),
        scheduler: p
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.clone())
            .unwrap_or_default(),
        node: node_of(p),
        done: deleted || phase == "Succeeded" || phase == "Failed",
        detail: format!(
            "{phase}{} {:?}",
            if deleted { " deleted" } else { "" },
            scheduled_condition(p).map(|(s, r, _)| format!("{s}/{r}"))
        ),
    }
}

/// Records every change of `K` from now on: a list, then a watch from its version, resumed
/// from the last version seen whenever the server closes it. A `410` (history lost) is an
/// error: the recorded history would have a gap.
fn record<K>(
    api: Api<K>,
    history: SharedHistory,
    conv: fn(&K, bool) -> Rec,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    tokio::spawn(async move {
        let list = api
            .list(&ListParams::default())
            .await
            .expect("initial list");
        let mut version = list.metadata.resource_version.clone().unwrap_or_default();
        {
            let mut h = history.lock().unwrap();
            for o in &list.items {
                h.events.push(Seen {
                    rv: rv_of(o.meta()),
                    at: Instant::now(),
                    rec: conv(o, false),
                });
            }
        }
        loop {
            let stream = match api
                .watch(&WatchParams::default().timeout(60), &version)
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    note(&history, format!("watch failed to start: {e}"), false);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                let (obj, deleted) = match ev {
                    Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => (o, false),
                    Ok(WatchEvent::Deleted(o)) => (o, true),
                    Ok(WatchEvent::Bookmark(b)) => {
                        version = b.metadata.resource_version;
                        continue;
                    }
                    Ok(WatchEvent::Error(s)) => {
                        note(&history, format!("watch error: {s:?}"), true);
                        return;
                    }
                    Err(e) => {
                        note(&history, format!("watch stream: {e}"), false);
                        break;
                    }
                };
                let rv = rv_of(obj.meta());
                version = rv.to_string();
                history.lock().unwrap().events.push(Seen {
                    rv,
                    at: Instant::now(),
                    rec: conv(&obj, deleted),
                });
            }
        }
    })
}

/// Transport hiccups are retried (the resumed watch loses nothing); a watch error is fatal.
fn note(history: &SharedHistory, msg: String, fatal: bool) {
    if fatal {
        history.lock().unwrap().errors.push(msg);
    } else {
        eprintln!("recorder: {msg} (resuming)");
    }
}

/// How close, in bindings (of any pod, in commit order), a hand-off's last binding by the
/// releasing scheduler and first binding by the receiving one must be to the hand-off itself
/// for it to count as made while pods were being bound onto the node.
const HOT_WINDOW: usize = 40;

/// Per node: allocatable (cpu millicores, memory bytes, pods).
type Allocatable = HashMap<String, (u64, u64, u64)>;
/// Per pod the test created: requests (cpu millicores, memory bytes).
type Requests = HashMap<String, (u64, u64)>;

/// What the replay of the history found.
#[derive(Debug, Default)]
struct Findings {
    bindings: usize,
    /// A node entering a shard's `nodesInUse` after another shard had it.
    moves: usize,
    /// Consecutive bindings on one node by different schedulers (each checked to have the
    /// first scheduler's release between them).
    handoffs_with_pods: usize,
    /// Moves where the releasing scheduler's last binding onto the node came at most
    /// `HOT_WINDOW` bindings before the receiving scheduler's claim, and the receiving
    /// scheduler's first binding onto it at most `HOT_WINDOW` bindings after.
    hot_handoffs: usize,
    /// Bindings onto a node after the controller had moved it away and before its release
    /// was published (the drain window).
    bound_while_draining: usize,
    /// Longest time from the controller's move (spec) to the destination's claim (status).
    longest_transit: Duration,
    /// Highest CPU use seen on any node, in millicores.
    peak_cpu_m: u64,
    /// Times a status listed a node another status still listed (allowed by the protocol as
    /// long as no two schedulers bind there in turn without a release between).
    listing_overlaps: usize,
}

/// Per node, what the replay tracks for the hand-off rules.
#[derive(Debug, Default)]
struct NodeTrack {
    /// The last binding: (rv, scheduler, index among all bindings).
    last_bind: Option<(u64, String, usize)>,
    /// Every release: (rv, shard).
    releases: Vec<(u64, String)>,
    /// The last shard whose status listed the node.
    holder: Option<String>,
    /// When the controller took the node from a shard whose status listed it.
    moved_at: Option<Instant>,
    /// A claim after a move, waiting for the receiving scheduler's first binding:
    /// (shard, index among all bindings at the claim, the releasing side was hot).
    claimed: Option<(String, usize, bool)>,
}

/// Replays the merged history in resourceVersion order and checks the hand-off and capacity
/// rules at every step.
fn replay(mut events: Vec<Seen>, alloc: &Allocatable, requests: &Requests) -> Findings {
    events.sort_by_key(|e| e.rv);
    let mut f = Findings::default();
    // Per shard: (desired, in use).
    let mut shard_state: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    // Per pod: (node, counted on it).
    let mut pod_state: HashMap<String, (Option<String>, bool)> = HashMap::new();
    // Per node: (cpu m, memory, pods) of pods not done.
    let mut used: Allocatable = HashMap::new();
    let mut nodes: HashMap<String, NodeTrack> = HashMap::new();
    for e in events {
        match e.rec {
            Rec::Shard {
                name,
                desired,
                in_use,
            } => {
                let (old_desired, old_in_use) = shard_state
                    .insert(name.clone(), (desired.clone(), in_use.clone()))
                    .unwrap_or_default();
                for n in old_in_use.difference(&in_use) {
                    let t = nodes.entry(n.clone()).or_default();
                    t.releases.push((e.rv, name.clone()));
                }
                for n in old_desired.difference(&desired) {
                    if old_in_use.contains(n) {
                        let t = nodes.entry(n.clone()).or_default();
                        t.moved_at.get_or_insert(e.at);
                    }
                }
                for n in in_use.difference(&old_in_use) {
                    if shard_state
                        .iter()
                        .any(|(other, (_, u))| *other != name && u.contains(n))
                    {
                        f.listing_overlaps += 1;
                    }
                    let t = nodes.entry(n.clone()).or_default();
                    if let Some(prev) = t.holder.clone().filter(|h| *h != name) {
                        f.moves += 1;
                        if let Some(at) = t.moved_at.take() {
                            f.longest_transit = f.longest_transit.max(e.at - at);
                        }
                        let hot_before = t
                            .last_bind
                            .as_ref()
                            .is_some_and(|(_, s, i)| *s == prev && f.bindings - i <= HOT_WINDOW);
                        t.claimed = Some((name.clone(), f.bindings, hot_before));
                    }
                    t.holder = Some(name.clone());
                }
            }
            Rec::Pod {
                name,
                scheduler,
                node,
                done,
                ..
            } => {
                let (old_node, counted) = pod_state.get(&name).cloned().unwrap_or((None, false));
                let (cpu, mem) = requests
                    .get(&name)
                    .copied()
                    .unwrap_or_else(|| panic!("a pod the test did not create: {name}"));
                if let (None, Some(n)) = (&old_node, &node) {
                    // Bound while its scheduler's status lists the node (write before use, drain
                    // before release); in hard mode that also means inside its shard.
                    let (own_desired, own_in_use) =
                        shard_state.get(&scheduler).cloned().unwrap_or_default();
                    assert!(
                        own_in_use.contains(n),
                        "rv {}: {scheduler} bound {name} onto {n}, which its NodeShard status \
                         does not list (in use: {own_in_use:?})",
                        e.rv
                    );
                    if !own_desired.contains(n) {
                        f.bound_while_draining += 1;
                    }
                    let t = nodes.entry(n.clone()).or_default();
                    if let Some((prev_rv, prev, _)) = &t.last_bind
                        && *prev != scheduler
                    {
                        let released = t
                            .releases
                            .iter()
                            .any(|(rv, shard)| shard == prev && *rv > *prev_rv && *rv < e.rv);
                        assert!(
                            released,
                            "rv {}: {scheduler} bound {name} onto {n}, which {prev} had bound a \
                             pod onto at rv {prev_rv} and had not released since",
                            e.rv
                        );
                        f.handoffs_with_pods += 1;
                    }
                    if let Some((shard, at, hot_before)) = t.claimed.take() {
                        if shard == scheduler {
                            if hot_before && f.bindings - at <= HOT_WINDOW {
                                f.hot_handoffs += 1;
                            }
                        } else {
                            t.claimed = Some((shard, at, hot_before));
                        }
                    }
                    t.last_bind = Some((e.rv, scheduler.clone(), f.bindings));
                    f.bindings += 1;
                }
                if let (Some(a), Some(b)) = (&old_node, &node) {
                    assert_eq!(a, b, "{name} changed nodes");
                }
                let count = node.is_some() && !done;
                if count && !counted {
                    let n = node.clone().expect("bound");
                    let u = used.entry(n.clone()).or_default();
                    u.0 += cpu;
                    u.1 += mem;
                    u.2 += 1;
                    let a = alloc[&n];
                    assert!(
                        u.0 <= a.0 && u.1 <= a.1 && u.2 <= a.2,
                        "rv {}: {n} over allocatable after {name}: used (cpu m, memory, pods) \
                         {u:?}, allocatable {a:?}",
                        e.rv
                    );
                    f.peak_cpu_m = f.peak_cpu_m.max(u.0);
                } else if !count && counted {
                    let n = old_node.clone().expect("counted pods are bound");
                    let u = used.get_mut(&n).expect("counted");
                    u.0 -= cpu;
                    u.1 -= mem;
                    u.2 -= 1;
                }
                pod_state.insert(name, (node.or(old_node), count));
            }
        }
    }
    f
}

/// Parses the quantities kube-sim uses for node allocatable (`4`, `4000m`, `16Gi`, `110`).
fn quantity(q: &str, milli: bool) -> u64 {
    let (num, mult) = if let Some(n) = q.strip_suffix('m') {
        assert!(milli, "fractional quantity {q}");
        (n, 1)
    } else if let Some(n) = q.strip_suffix("Ki") {
        (n, 1 << 10)
    } else if let Some(n) = q.strip_suffix("Mi") {
        (n, 1 << 20)
    } else if let Some(n) = q.strip_suffix("Gi") {
        (n, 1 << 30)
    } else {
        (q, if milli { 1000 } else { 1 })
    };
    let v: u64 = num.parse().unwrap_or_else(|_| panic!("quantity {q}"));
    v * mult
}

async fn allocatable(client: &kube::Client) -> Allocatable {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list nodes");
    nodes
        .items
        .iter()
        .map(|n| {
            let a = n
                .status
                .as_ref()
                .and_then(|s| s.allocatable.clone())
                .expect("allocatable");
            (
                n.metadata.name.clone().unwrap_or_default(),
                (
                    quantity(&a["cpu"].0, true),
                    quantity(&a["memory"].0, false),
                    quantity(&a["pods"].0, false),
                ),
            )
        })
        .collect()
}

/// One move the test asks of the controller.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Relabel node `x` into pool b and node `y` into pool a.
    Swap(usize, usize),
    /// Rewrite the ConfigMap with these `maxNodes`.
    Limits(usize, usize),
}

/// Waits until the two NodeShards' specs satisfy `ok` (the controller has made the move) and
/// both schedulers have completed the hand-offs (each status lists exactly its desired nodes).
/// Returns the desired sets and the resourceVersion of that layout (the later of the two
/// NodeShards').
async fn settled(
    client: &kube::Client,
    what: &str,
    ok: impl Fn(&BTreeSet<String>, &BTreeSet<String>) -> bool,
) -> (BTreeSet<String>, BTreeSet<String>, u64) {
    eventually(what, WAIT, || async {
        let s = shards(client).await;
        let (Some(a), Some(b)) = (s.get(SHARD_A), s.get(SHARD_B)) else {
            return Err(describe(&s));
        };
        let (da, db) = (desired(a), desired(b));
        let done = |x: &NodeShard| {
            let st = x.status.clone().unwrap_or_default();
            in_use(x) == desired(x) && st.nodes_to_add.is_empty() && st.nodes_to_remove.is_empty()
        };
        if ok(&da, &db) && done(a) && done(b) && s.len() == 2 {
            Ok((da, db, rv_of(&a.metadata).max(rv_of(&b.metadata))))
        } else {
            Err(describe(&s))
        }
    })
    .await
}

/// Bindings per layout node before the next move (see [`landed`]).
const LANDED_PER_NODE: usize = 2;

/// Waits until pods have landed on the layout `(a, b)` settled at resourceVersion `since`: the
/// recorded history holds, for every node, `LANDED_PER_NODE` bindings after `since` by the
/// scheduler whose shard holds it.
async fn landed(
    history: &SharedHistory,
    layout: (&BTreeSet<String>, &BTreeSet<String>),
    since: u64,
) {
    eventually("pods land on the new layout", WAIT, || async {
        let h = history.lock().unwrap();
        assert!(h.errors.is_empty(), "recorder: {:?}", h.errors);
        // Each pod's binding: the first version at which it has a node.
        let mut bound_at: HashMap<&str, (u64, &str, &str)> = HashMap::new();
        for e in &h.events {
            if let Rec::Pod {
                name,
                scheduler,
                node: Some(n),
                ..
            } = &e.rec
            {
                let b = bound_at.entry(name).or_insert((e.rv, scheduler, n));
                if e.rv < b.0 {
                    *b = (e.rv, scheduler, n);
                }
            }
        }
        let mut per: HashMap<(&str, &str), usize> = HashMap::new();
        for (rv, sched, n) in bound_at.into_values() {
            if rv > since {
                *per.entry((sched, n)).or_default() += 1;
            }
        }
        let short: Vec<String> = [(SHARD_A, layout.0), (SHARD_B, layout.1)]
            .into_iter()
            .flat_map(|(shard, nodes)| nodes.iter().map(move |n| (shard, n)))
            .filter_map(|(shard, n)| {
                let c = per.get(&(shard, n.as_str())).copied().unwrap_or(0);
                (c < LANDED_PER_NODE).then(|| format!("{shard} on {n}: {c}"))
            })
            .collect();
        if short.is_empty() {
            Ok(())
        } else {
            Err(format!("bindings since rv {since}: {short:?}"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_rebalance_hands_nodes_over_without_sharing_or_overcommitting_them() {
    let dir = TempDir::new("shard-rebalance");
    let sim = SimProc::start(
        dir.path(),
        REBALANCE_NODES,
        &[
            "--install-nodeshard-crd",
            "--node-cpu",
            "4",
            "--node-memory",
            "16Gi",
            "--pod-lifetime",
            "1500ms",
            "--latency-ms",
            "25",
            // Watches lag behind the answers to writes, as a real server's watch cache does,
            // so the schedulers meet answers before the events that precede them.
            "--watch-delay-ms",
            "20",
        ],
    );
    let client = sim.client().await;
    let alloc = allocatable(&client).await;
    assert_eq!(alloc.len(), REBALANCE_NODES);

    // The recorders start before anything shards, so the history is complete.
    let history: SharedHistory = Arc::default();
    let rec_shards = record(
        Api::<NodeShard>::all(client.clone()),
        history.clone(),
        shard_rec,
    );
    let rec_pods = record(
        Api::<Pod>::namespaced(client.clone(), "default"),
        history.clone(),
        pod_rec,
    );

    // Pools: a = nodes 0–2, b = nodes 3–5.
    let mut pool: Vec<&str> = vec!["a", "a", "a", "b", "b", "b"];
    for (i, p) in pool.iter().enumerate() {
        label_node(&client, &node(i), POOL, p).await;
    }
    let in_pool = |pool: &[&str], p: &str| -> BTreeSet<String> {
        (0..REBALANCE_NODES)
            .filter(|&i| pool[i] == p)
            .map(node)
            .collect()
    };
    put_configmap(&client, &rebalance_configmap(3, 3)).await;
    let mut ctl = start_controller(dir.path(), &sim, &[]);
    let (wa, wb) = (in_pool(&pool, "a"), in_pool(&pool, "b"));
    eventually("the controller creates both shards", WAIT, || async {
        let s = shards(&client).await;
        match (s.get(SHARD_A), s.get(SHARD_B)) {
            (Some(a), Some(b)) if desired(a) == wa && desired(b) == wb => Ok(()),
            _ => Err(describe(&s)),
        }
    })
    .await;
    let mut scheds = Vec::new();
    for name in [SHARD_A, SHARD_B] {
        let flags = [
            format!("--scheduler-name={name}"),
            format!("--scheduler-sharding-name={name}"),
            "--scheduler-sharding-mode=hard".to_owned(),
        ];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        scheds.push(start_scheduler(dir.path(), &sim, name, &flags));
    }
    let (_, _, mut layout_rv) = settled(&client, "both schedulers claim their shards", |a, b| {
        *a == wa && *b == wb
    })
    .await;

    // The steady stream: at least PODS_EACH per scheduler over FEED_FOR, alternating, and on
    // at the same rate until the last move has completed.
    let moves_done = Arc::new(AtomicBool::new(false));
    let feed_client = client.clone();
    let feed_start = Instant::now();
    let feed_done = moves_done.clone();
    let feeder = tokio::spawn(async move {
        let period = FEED_FOR / PODS_EACH as u32;
        let mut i = 0;
        while i < PODS_EACH || !feed_done.load(Ordering::Relaxed) {
            tokio::time::sleep_until(feed_start + period * i as u32).await;
            for s in [SHARD_A, SHARD_B] {
                let cpu = format!("{}m", pod_cpu_m(i));
                create_pod(&feed_client, &format!("{s}-{i}"), s, &cpu).await;
            }
            i += 1;
        }
        i
    });

    // The moves, while the pods stream in: each waits for the hand-offs to complete, then for
    // pods to land on the new layout (every node used by its new holder).
    let steps = [
        Step::Swap(2, 3),
        Step::Swap(0, 4),
        Step::Limits(4, 2),
        Step::Limits(3, 3),
        Step::Swap(1, 5),
        Step::Swap(3, 2),
    ];
    landed(&history, (&wa, &wb), layout_rv).await;
    let mut last_settled = feed_start;
    let mut burst_names = Vec::new();
    for (k, step) in steps.iter().copied().enumerate() {
        let (before_a, before_b) = {
            let s = shards(&client).await;
            (desired(&s[SHARD_A]), desired(&s[SHARD_B]))
        };
        let stop_burst = Arc::new(AtomicBool::new(false));
        let burst = tokio::spawn(burst_pods(client.clone(), k, stop_burst.clone()));
        let (la, lb, rv) = match step {
            Step::Swap(x, y) => {
                pool[x] = "b";
                pool[y] = "a";
                label_node(&client, &node(x), POOL, "b").await;
                label_node(&client, &node(y), POOL, "a").await;
                let (wa, wb) = (in_pool(&pool, "a"), in_pool(&pool, "b"));
                settled(&client, &format!("{step:?} completes"), |a, b| {
                    *a == wa && *b == wb
                })
                .await
            }
            Step::Limits(ma, mb) => {
                put_configmap(&client, &rebalance_configmap(ma, mb)).await;
                let labelled_a = in_pool(&pool, "a");
                settled(&client, &format!("{step:?} completes"), |a, b| {
                    a.len() == ma
                        && b.len() == mb
                        && a.is_disjoint(b)
                        && (a.is_superset(&labelled_a) || labelled_a.is_superset(a))
                        && (*a != before_a || *b != before_b)
                })
                .await
            }
        };
        last_settled = Instant::now();
        layout_rv = rv;
        stop_burst.store(true, Ordering::Relaxed);
        burst_names.extend(burst.await.expect("burst"));
        landed(&history, (&la, &lb), layout_rv).await;
    }
    let moves_done_at = last_settled - feed_start;
    moves_done.store(true, Ordering::Relaxed);
    let per_scheduler = feeder.await.expect("feeder");
    let feed_took = feed_start.elapsed();
    let mut requests = Requests::new();
    for i in 0..per_scheduler {
        for s in [SHARD_A, SHARD_B] {
            requests.insert(format!("{s}-{i}"), (pod_cpu_m(i), POD_MEMORY));
        }
    }
    for name in burst_names {
        requests.insert(name, (BURST_CPU_M, POD_MEMORY));
    }

    // Every pod ends bound exactly once (none lost, none left pending).
    let total = requests.len();
    let bindings = eventually("every pod bound", Duration::from_secs(90), || async {
        let b = sim.records("bindings").await;
        let b = b.as_array().cloned().unwrap_or_default();
        if b.len() >= total {
            Ok(b)
        } else {
            Err(format!("{} of {total} bound", b.len()))
        }
    })
    .await;
    let mut names: Vec<&str> = bindings.iter().filter_map(|b| b["name"].as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "a pod was bound twice");
    let expected: BTreeSet<&str> = requests.keys().map(String::as_str).collect();
    assert_eq!(names.into_iter().collect::<BTreeSet<_>>(), expected);
    // By attempts, not only successes: a second binding request (answered 409) means a pod was
    // decided twice, and the node it was bound to counted it not meanwhile.
    let mut attempts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in sim
        .records("requests")
        .await
        .as_array()
        .into_iter()
        .flatten()
    {
        if r["resource"] == "pods" && r["subresource"] == "binding" {
            let name = r["name"].as_str().unwrap_or_default().to_owned();
            attempts
                .entry(name)
                .or_default()
                .push(r["code"].as_u64().unwrap_or(0));
        }
    }
    let twice: Vec<_> = attempts.iter().filter(|(_, c)| c.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "pods with more than one binding request (their answers): {twice:?}"
    );

    // The recorders have seen every binding: the history is complete.
    eventually("the recorded history holds every binding", WAIT, || async {
        let h = history.lock().unwrap();
        assert!(h.errors.is_empty(), "recorder: {:?}", h.errors);
        let seen: BTreeSet<&str> = h
            .events
            .iter()
            .filter_map(|e| match &e.rec {
                Rec::Pod {
                    name,
                    node: Some(_),
                    ..
                } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if seen.len() == total {
            Ok(())
        } else {
            Err(format!("{} of {total}", seen.len()))
        }
    })
    .await;
    rec_shards.abort();
    rec_pods.abort();
    ctl.assert_running();
    for s in &mut scheds {
        s.assert_running();
    }
    let mut h = std::mem::take(&mut *history.lock().unwrap());
    assert!(h.errors.is_empty(), "recorder: {:?}", h.errors);
    // Kept with the processes' logs when the check fails (the directory goes when it passes).
    h.events.sort_by_key(|e| e.rv);
    // Wall-clock times, to read beside the logs' timestamps.
    let (wall, mono) = (std::time::SystemTime::now(), Instant::now());
    let dump: String = h
        .events
        .iter()
        .map(|e| {
            let at = wall - (mono - e.at);
            let t = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            format!(
                "{} {}.{:06} {:?}\n",
                e.rv,
                t.as_secs(),
                t.subsec_micros(),
                e.rec
            )
        })
        .collect();
    std::fs::write(dir.path().join("history.txt"), dump).expect("history written");

    let f = replay(h.events, &alloc, &requests);
    eprintln!(
        "live rebalance: {} bindings, {} node moves, {} hand-offs with pods bound on both sides, \
         {} of them hot, {} bindings in drain windows, longest transit {:?}, peak node CPU {}m of {}m, {} \
         listing overlaps; moves done at {moves_done_at:?}, feed took {feed_took:?}",
        f.bindings,
        f.moves,
        f.handoffs_with_pods,
        f.hot_handoffs,
        f.bound_while_draining,
        f.longest_transit,
        f.peak_cpu_m,
        alloc.values().map(|a| a.0).max().unwrap_or(0),
        f.listing_overlaps
    );
    assert_eq!(f.bindings, total, "each pod bound once in the history");
    // Six steps move ten nodes: 2 + 2 + 1 + 1 + 2 + 2.
    assert!(f.moves >= 10, "nodes moved: {f:?}");
    assert!(
        f.hot_handoffs >= 6,
        "too few hand-offs happened while both schedulers were binding onto the node: {f:?}"
    );
}

// The history check on hand-made histories: it accepts a proper hand-off and catches each
// violation it exists for.

fn seen(rv: u64, rec: Rec) -> Seen {
    Seen {
        rv,
        at: Instant::now(),
        rec,
    }
}

fn shard_ev(name: &str, desired: &[&str], in_use: &[&str]) -> Rec {
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
    Rec::Shard {
        name: name.into(),
        desired: set(desired),
        in_use: set(in_use),
    }
}

fn pod_ev(name: &str, scheduler: &str, node: Option<&str>, done: bool) -> Rec {
    Rec::Pod {
        name: name.into(),
        scheduler: scheduler.into(),
        node: node.map(str::to_owned),
        done,
        detail: String::new(),
    }
}

/// Node `x` (1 CPU) held by `a`, with pod `p1` (600m) bound there by `a`.
fn held_by_a() -> (Vec<Seen>, Allocatable, Requests) {
    let events = vec![
        seen(1, shard_ev("a", &["x"], &[])),
        seen(2, shard_ev("b", &[], &[])),
        seen(3, shard_ev("a", &["x"], &["x"])),
        seen(4, pod_ev("p1", "a", None, false)),
        seen(5, pod_ev("p1", "a", Some("x"), false)),
        // The controller moves x to b.
        seen(6, shard_ev("b", &["x"], &[])),
        seen(7, shard_ev("a", &[], &["x"])),
        seen(8, pod_ev("p2", "b", None, false)),
    ];
    let alloc = HashMap::from([("x".to_owned(), (1000, 1 << 30, 110))]);
    let requests = HashMap::from([
        ("p1".to_owned(), (600, 1 << 20)),
        ("p2".to_owned(), (300, 1 << 20)),
    ]);
    (events, alloc, requests)
}

#[test]
fn history_check_accepts_a_proper_hand_off() {
    let (mut events, alloc, requests) = held_by_a();
    events.extend([
        seen(9, shard_ev("a", &[], &[])),
        seen(10, shard_ev("b", &["x"], &["x"])),
        seen(11, pod_ev("p2", "b", Some("x"), false)),
    ]);
    let f = replay(events, &alloc, &requests);
    assert_eq!(
        (f.bindings, f.moves, f.handoffs_with_pods, f.hot_handoffs),
        (2, 1, 1, 1)
    );
    assert_eq!(f.listing_overlaps, 0);
}

#[test]
#[should_panic(expected = "had not released since")]
fn history_check_catches_a_node_used_by_two_schedulers() {
    let (mut events, alloc, requests) = held_by_a();
    // b claims x while a still lists it, and binds there before a's release.
    events.extend([
        seen(9, shard_ev("b", &["x"], &["x"])),
        seen(10, pod_ev("p2", "b", Some("x"), false)),
        seen(11, shard_ev("a", &[], &[])),
    ]);
    replay(events, &alloc, &requests);
}

#[test]
#[should_panic(expected = "which its NodeShard status does not list")]
fn history_check_catches_a_binding_before_the_claim() {
    let (mut events, alloc, requests) = held_by_a();
    events.extend([
        seen(9, shard_ev("a", &[], &[])),
        seen(10, pod_ev("p2", "b", Some("x"), false)),
        seen(11, shard_ev("b", &["x"], &["x"])),
    ]);
    replay(events, &alloc, &requests);
}

#[test]
#[should_panic(expected = "over allocatable")]
fn history_check_catches_an_overcommitted_node() {
    let (mut events, alloc, mut requests) = held_by_a();
    requests.insert("p2".into(), (600, 1 << 20));
    events.extend([
        seen(9, shard_ev("a", &[], &[])),
        seen(10, shard_ev("b", &["x"], &["x"])),
        seen(11, pod_ev("p2", "b", Some("x"), false)),
    ]);
    replay(events, &alloc, &requests);
}

#[test]
fn history_check_frees_the_requests_of_finished_pods() {
    let (mut events, alloc, mut requests) = held_by_a();
    requests.insert("p2".into(), (600, 1 << 20));
    events.extend([
        seen(9, shard_ev("a", &[], &[])),
        seen(10, shard_ev("b", &["x"], &["x"])),
        seen(11, pod_ev("p1", "a", Some("x"), true)),
        seen(12, pod_ev("p2", "b", Some("x"), false)),
    ]);
    let f = replay(events, &alloc, &requests);
    assert_eq!(f.peak_cpu_m, 600);
}
