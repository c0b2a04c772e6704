//! `deploy/`: the Helm chart (rendered by Helm's own Go SDK), the kustomize overlays (rendered by
//! `kubectl kustomize`), the Dockerfile and the Grafana dashboard, checked against the binaries.
//!
//! - Every rendered object validates offline against the Kubernetes OpenAPI schemas
//!   (`kubernetes-validate`, strict) and the kinds the API simulator serves load into it with
//!   `kubectl apply`.
//! - The overlays equal the chart's renderings (base, ha = chart defaults, sharded = two releases).
//! - Every Deployment's arguments are accepted by the binary it runs (`--dry-run`, exit 0).
//! - RBAC both ways: the real binaries run scenarios against kube-sim, which records every
//!   request (`/sim/requests`); every request must be granted by the rendered roles, and every
//!   rule must be used (the schedulers' scenarios include a pod whose claim is provisioned, for
//!   the claim patch and the PV and node reads of volume PreBind).
//! - Every metric the dashboard queries is served on `/metrics`.
//!
//! Tools come from `deploy/tools/install.sh` (into `target/tools/`), which the first test that
//! needs them runs (`procs::deploy_tools`); a tool still missing after it fails the test. The shard-controller binary and the schedulers' soft/hard modes
//! are being built in parallel: the parts that need them run as soon as they exist, and print
//! what they could not check until then.

use crate::procs;
use procs::{
    KillOnDrop as Proc, SimProc, free_port, http_get_blocking, kubectl, poll_until, run_with_stdin,
    try_http_get_blocking, wait_until,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Tools and rendering

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tool(name: &str) -> PathBuf {
    let p = procs::deploy_tools().join("bin").join(name);
    assert!(
        p.exists(),
        "{} is missing after deploy/tools/install.sh",
        p.display()
    );
    p
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `helm template --include-crds RELEASE deploy/helm/magma -n volcano-system -f ... --set ...`
fn helm(release: &str, values: &[&str], sets: &[&str]) -> String {
    let mut c = Command::new(tool("helm-render"));
    c.arg(repo().join("deploy/helm/magma")).args([
        "--release",
        release,
        "--namespace",
        "volcano-system",
        "--lint",
    ]);
    for v in values {
        c.arg("-f").arg(repo().join(v));
    }
    for s in sets {
        c.args(["--set", s]);
    }
    run(&mut c)
}

fn kustomize(dir: &str) -> String {
    run(Command::new(kubectl())
        .arg("kustomize")
        .arg(repo().join("deploy/manifests").join(dir)))
}

/// A YAML stream as JSON objects (PyYAML from the tools directory: YAML 1.1 like kubectl).
fn objects(yaml: &str) -> Vec<Value> {
    let (ok, out) = run_with_stdin(
        Command::new("python3")
            .env("PYTHONPATH", procs::deploy_tools().join("python"))
            .args([
                "-c",
                "import json,sys,yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))",
            ]),
        yaml,
    );
    assert!(ok, "parsing YAML: {out}");
    serde_json::from_str(&out).unwrap()
}

fn default_chart() -> Vec<Value> {
    objects(&helm("magma", &[], &[]))
}

fn sharded_chart() -> Vec<Value> {
    let mut a = objects(&helm(
        "magma-a",
        &["deploy/helm/examples/sharded-a.yaml"],
        &["metrics.serviceMonitor.enabled=true"],
    ));
    a.extend(
        objects(&helm(
            "magma-b",
            &["deploy/helm/examples/sharded-b.yaml"],
            &[],
        ))
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition"),
    );
    a
}

fn id(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or(""),
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

fn of_kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

// ---------------------------------------------------------------------------------------------
// Rendering, schemas, structure

fn validate(name: &str, objs: &[Value]) {
    let dir = procs::tmpdir(&format!("deploy-validate-{name}"));
    let file = dir.join("objects.yaml");
    let stream: String = objs
        .iter()
        .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
        .collect();
    std::fs::write(&file, stream).unwrap();
    let out = Command::new(tool("kubernetes-validate"))
        .args(["-k", "1.34.0", "--strict"])
        .arg(&file)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name}: schema validation failed:\n{text}"
    );
    for o in objs {
        let kind = o["kind"].as_str().unwrap();
        let line = format!(
            "{}/{}",
            kind.to_lowercase(),
            o["metadata"]["name"].as_str().unwrap()
        );
        if kind == "ServiceMonitor" {
            // Not a Kubernetes kind: no schema ships for it; checked structurally below.
            assert!(
                text.contains("Couldn't find schema for kind ServiceMonitor"),
                "{text}"
            );
            continue;
        }
        assert!(
            text.contains(&format!("passed for resource {line} ")),
            "{name}: {line} was not validated:\n{text}"
        );
    }
}

fn check_structure(name: &str, objs: &[Value]) {
    let crd: Value = objects(
        &std::fs::read_to_string(repo().join("deploy/crd/shard.volcano.sh_nodeshards.yaml"))
            .unwrap(),
    )
    .remove(0);
    let crds = of_kind(objs, "CustomResourceDefinition");
    assert_eq!(crds.len(), 1, "{name}: one CRD");
    assert_eq!(
        crds[0], &crd,
        "{name}: the NodeShard CRD is upstream's, unchanged"
    );
    for d in of_kind(objs, "Deployment") {
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(
            spec["priorityClassName"],
            "system-cluster-critical",
            "{}",
            id(d)
        );
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            spec["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        for c in spec["containers"].as_array().unwrap() {
            let sc = &c["securityContext"];
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{}", id(d));
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["runAsNonRoot"], true);
            assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
            assert!(c["resources"]["requests"]["cpu"].is_string());
            assert!(c["resources"]["limits"]["memory"].is_string());
        }
    }
    // Every Service selects a Deployment's pods and names a port its containers expose.
    for s in of_kind(objs, "Service") {
        let sel = s["spec"]["selector"].as_object().unwrap();
        let target = of_kind(objs, "Deployment").into_iter().find(|d| {
            let l = &d["spec"]["template"]["metadata"]["labels"];
            sel.iter().all(|(k, v)| &l[k] == v)
        });
        let target = target.unwrap_or_else(|| panic!("{name}: {} selects no pods", id(s)));
        let port = s["spec"]["ports"][0]["targetPort"].as_str().unwrap();
        let ports = &target["spec"]["template"]["spec"]["containers"][0]["ports"];
        assert!(
            ports.as_array().unwrap().iter().any(|p| p["name"] == port),
            "{}: port {port}",
            id(s)
        );
    }
    for m in of_kind(objs, "ServiceMonitor") {
        assert_eq!(m["apiVersion"], "monitoring.coreos.com/v1");
        let sel = m["spec"]["selector"]["matchLabels"].as_object().unwrap();
        let svcs: Vec<_> = of_kind(objs, "Service")
            .into_iter()
            .filter(|s| sel.iter().all(|(k, v)| &s["metadata"]["labels"][k] == v))
            .collect();
        assert!(
            !svcs.is_empty(),
            "{name}: the ServiceMonitor selects no Service"
        );
        let port = m["spec"]["endpoints"][0]["port"].as_str().unwrap();
        assert!(svcs.iter().all(|s| {
            s["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == port)
        }));
    }
    // The sharding ConfigMap is valid and names every hard/soft scheduler's NodeShard.
    for cm in of_kind(objs, "ConfigMap") {
        if let Some(y) = cm["data"]["sharding.yaml"].as_str() {
            let conf = magma_kube::shardctl::ShardingConfig::parse(y)
                .unwrap_or_else(|e| panic!("{name}: {}: {e}", id(cm)));
            let names: BTreeSet<_> = conf.schedulers.iter().map(|s| s.name.clone()).collect();
            for d in of_kind(objs, "Deployment") {
                let args = container_args(d);
                if args.iter().any(|a| a == "--scheduler-sharding-mode=hard") {
                    let shard = flag(&args, "--scheduler-sharding-name").unwrap();
                    assert!(
                        names.contains(&shard),
                        "{name}: no shard config for {shard}"
                    );
                }
            }
        }
    }
}

fn container_args(d: &Value) -> Vec<String> {
    d["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .find_map(|a| a.strip_prefix(&format!("{name}=")).map(str::to_string))
}

#[test]
fn chart_and_overlays_render_and_validate() {
    let defaults = default_chart();
    let kinds: BTreeSet<_> = defaults
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    for k in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
    ] {
        assert!(kinds.contains(k), "default chart renders a {k}");
    }
    let dep = of_kind(&defaults, "Deployment")[0];
    assert_eq!(dep["spec"]["replicas"], 2);
    assert!(dep["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"].is_object());
    let args = container_args(dep);
    assert_eq!(flag(&args, "--leader-elect").as_deref(), Some("true"));
    assert_eq!(
        flag(&args, "--leader-elect-resource-name").as_deref(),
        Some("agent-scheduler")
    );
    // Upstream's default configuration.
    let cm = of_kind(&defaults, "ConfigMap")[0];
    let conf = cm["data"]["agent-scheduler.conf"].as_str().unwrap();
    let conf = objects(conf).remove(0);
    assert_eq!(
        conf,
        serde_json::json!({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates"}, {"name": "nodeorder"}]}]})
    );
    // The controller's sharding ConfigMap is never empty by default.
    let with_ctl = objects(&helm("magma", &[], &["shardController.enabled=true"]));
    assert!(
        of_kind(&with_ctl, "ConfigMap")
            .iter()
            .any(|c| c["data"]["sharding.yaml"].is_string())
    );

    let mut sets = vec![
        ("chart-default", defaults),
        ("chart-controller", with_ctl),
        ("chart-sharded", sharded_chart()),
    ];
    for o in ["base", "overlays/ha", "overlays/sharded"] {
        sets.push((o, objects(&kustomize(o))));
    }
    for (name, objs) in &sets {
        validate(&name.replace('/', "-"), objs);
        check_structure(name, objs);
    }
}

/// Chart and kustomize outputs as comparable maps: Helm's managed-by label dropped, the
/// Namespace (kustomize creates it, Helm's `--create-namespace` does) left out.
fn normalised(objs: Vec<Value>) -> BTreeMap<String, Value> {
    objs.into_iter()
        .filter(|o| o["kind"] != "Namespace")
        .map(|mut o| {
            if let Some(l) = o["metadata"]["labels"].as_object_mut() {
                l.remove("app.kubernetes.io/managed-by");
            }
            (id(&o), o)
        })
        .collect()
}

fn assert_same(what: &str, chart: BTreeMap<String, Value>, kust: BTreeMap<String, Value>) {
    let a: BTreeSet<_> = chart.keys().collect();
    let b: BTreeSet<_> = kust.keys().collect();
    assert_eq!(a, b, "{what}: the same objects");
    for (k, v) in &chart {
        assert_eq!(
            v, &kust[k],
            "{what}: {k} differs between the chart and kustomize"
        );
    }
}

#[test]
fn overlays_equal_the_chart() {
    assert_same(
        "ha overlay vs chart defaults",
        normalised(default_chart()),
        normalised(objects(&kustomize("overlays/ha"))),
    );
    assert_same(
        "base vs chart with one replica",
        normalised(objects(&helm(
            "magma",
            &[],
            &[
                "scheduler.replicas=1",
                "scheduler.podDisruptionBudget.enabled=false",
                "scheduler.podAntiAffinity=",
            ],
        ))),
        normalised(objects(&kustomize("base"))),
    );
    let mut sharded = sharded_chart();
    sharded.retain(|o| o["kind"] != "ServiceMonitor");
    assert_same(
        "sharded overlay vs releases magma-a + magma-b",
        normalised(sharded),
        normalised(objects(&kustomize("overlays/sharded"))),
    );
}

// ---------------------------------------------------------------------------------------------
// Processes

/// The shard-controller binary (built with the crate's binaries).
fn shard_controller() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_shard-controller"))
}

/// `kubectl apply` of `objs`, which must succeed.
fn apply(sim: &SimProc, objs: &[&Value]) {
    let stream: String = objs
        .iter()
        .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
        .collect();
    let (ok, out) = sim.kubectl(&["apply", "-f", "-"], Some(&stream));
    assert!(ok, "kubectl apply: {out}");
}

/// A simulator with `nodes` nodes, holding the rendered CRDs and ConfigMaps (what the binaries
/// read besides nodes and pods), with its volume provisioner on (the volume scenario).
fn sim_with_crds_and_configmaps(dir: &Path, nodes: usize, objs: &[Value]) -> SimProc {
    let sim = SimProc::start(dir, nodes, &["--provisioner-delay", "100ms"]);
    let load: Vec<&Value> = objs
        .iter()
        .filter(|o| {
            ["CustomResourceDefinition", "ConfigMap"].contains(&o["kind"].as_str().unwrap())
        })
        .collect();
    apply(&sim, &load);
    sim
}

/// The rendered Deployment called `name`.
fn deployment(objs: &[Value], name: &str) -> Value {
    of_kind(objs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no Deployment {name}"))
        .clone()
}

/// The rendered args made runnable here: the simulator's kubeconfig, loopback ports, the
/// rendered scheduler configuration as a file.
fn local_args(args: &[String], kc: &Path, conf: Option<&Path>) -> (Vec<String>, u16) {
    let metrics = free_port();
    let mut out: Vec<String> = args
        .iter()
        .map(|a| {
            if a.starts_with("--healthz-address=") {
                format!("--healthz-address=127.0.0.1:{}", free_port())
            } else if a.starts_with("--listen-address=") {
                format!("--listen-address=127.0.0.1:{metrics}")
            } else if let (Some(c), true) = (conf, a.starts_with("--scheduler-conf=")) {
                format!("--scheduler-conf={}", c.display())
            } else {
                a.clone()
            }
        })
        .collect();
    out.push(format!("--kubeconfig={}", kc.display()));
    (out, metrics)
}

fn write_scheduler_conf(dir: &Path, objs: &[Value], dep: &Value) -> PathBuf {
    let vol = dep["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|v| v["configMap"]["name"].as_str())
        .unwrap();
    let cm = objs
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == vol)
        .unwrap_or_else(|| panic!("{} mounts ConfigMap {vol}, which is rendered", id(dep)));
    let p = dir.join(format!("{vol}.conf"));
    std::fs::write(&p, cm["data"]["agent-scheduler.conf"].as_str().unwrap()).unwrap();
    p
}

fn binary_of(dep: &Value) -> PathBuf {
    let cmd = dep["spec"]["template"]["spec"]["containers"][0]["command"][0]
        .as_str()
        .unwrap();
    match cmd.rsplit('/').next().unwrap() {
        "agent-scheduler" => PathBuf::from(env!("CARGO_BIN_EXE_agent-scheduler")),
        "shard-controller" => shard_controller(),
        other => panic!("{}: unknown binary {other}", id(dep)),
    }
}

#[test]
fn every_rendered_argument_is_accepted_by_its_binary() {
    let dir = procs::tmpdir("deploy-args");
    let kc = dir.join("kubeconfig-unused");
    let mut sets = vec![
        default_chart(),
        sharded_chart(),
        objects(&helm("magma", &[], &["shardController.enabled=true"])),
    ];
    for o in ["base", "overlays/ha", "overlays/sharded"] {
        sets.push(objects(&kustomize(o)));
    }
    let mut checked = 0;
    for objs in &sets {
        for dep in of_kind(objs, "Deployment") {
            let binary = binary_of(dep);
            let conf = container_args(dep)
                .iter()
                .any(|a| a.starts_with("--scheduler-conf="))
                .then(|| write_scheduler_conf(&dir, objs, dep));
            let (mut args, _) = local_args(&container_args(dep), &kc, conf.as_deref());
            args.push("--dry-run".into());
            let out = Command::new(&binary).args(&args).output().unwrap();
            assert!(
                out.status.success(),
                "{} {args:?} --dry-run failed:\n{}{}",
                id(dep),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 7, "checked {checked} deployments");
    // And the check can fail: an unknown flag is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_agent-scheduler"))
        .args(["--plugins-dirr=/x", "--dry-run"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn rendered_objects_load_into_the_simulator() {
    let dir = procs::tmpdir("deploy-load");
    let sim = SimProc::start(&dir, 2, &[]);
    let supported = ["Namespace", "CustomResourceDefinition", "ConfigMap"];
    for objs in [sharded_chart(), objects(&kustomize("overlays/ha"))] {
        let load: Vec<&Value> = objs
            .iter()
            .filter(|o| supported.contains(&o["kind"].as_str().unwrap()))
            .collect();
        assert!(load.len() >= 3);
        apply(&sim, &load);
        for o in &load {
            let kind = o["kind"].as_str().unwrap().to_lowercase();
            let name = o["metadata"]["name"].as_str().unwrap();
            let got = match o["metadata"]["namespace"].as_str() {
                Some(ns) => sim.kubectl_json(&["get", &kind, name, "-n", ns]),
                None => sim.kubectl_json(&["get", &kind, name]),
            };
            assert_eq!(got["metadata"]["name"], name);
            if o["kind"] == "ConfigMap" {
                assert_eq!(got["data"], o["data"]);
            }
        }
    }
    // The CRD serves NodeShards.
    let (ok, out) = sim.kubectl(
        &["apply", "-f", "-"],
        Some("apiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: agent-scheduler-a\nspec:\n  nodesDesired: [node-00000]\n"),
    );
    assert!(ok, "{out}");
    let ns = sim.kubectl_json(&["get", "nodeshards.shard.volcano.sh", "agent-scheduler-a"]);
    assert_eq!(ns["spec"]["nodesDesired"][0], "node-00000");
}

// ---------------------------------------------------------------------------------------------
// RBAC from recorded requests, and metrics

/// (verb, group, resource[/subresource], namespace) of one request.
type Req = (String, String, String, String);

fn requests(sim: &SimProc) -> BTreeSet<Req> {
    sim.records_blocking("requests")
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            !r["user_agent"]
                .as_str()
                .unwrap_or("")
                .starts_with("kubectl")
        })
        .map(|r| {
            let res = r["resource"].as_str().unwrap();
            let sub = r["subresource"].as_str().unwrap();
            (
                r["verb"].as_str().unwrap().to_string(),
                r["group"].as_str().unwrap().to_string(),
                if sub.is_empty() {
                    res.to_string()
                } else {
                    format!("{res}/{sub}")
                },
                r["namespace"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// A rule of a rendered role: (verb, group, resource) and the namespace it applies in ("" =
/// cluster-wide).
type Grant = (String, String, String, String);

/// The rules bound to `service_account` by the rendered (Cluster)RoleBindings.
fn grants(objs: &[Value], service_account: &str) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for b in objs
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
    {
        let bound = b["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == service_account);
        if !bound {
            continue;
        }
        let role_kind = b["roleRef"]["kind"].as_str().unwrap();
        let ns = if b["kind"] == "RoleBinding" {
            b["metadata"]["namespace"].as_str().unwrap().to_string()
        } else {
            String::new()
        };
        let role = objs
            .iter()
            .find(|o| {
                o["kind"] == role_kind
                    && o["metadata"]["name"] == b["roleRef"]["name"]
                    && (role_kind == "ClusterRole" || o["metadata"]["namespace"] == ns.as_str())
            })
            .unwrap_or_else(|| panic!("{} refers to a role that is not rendered", id(b)));
        for rule in role["rules"].as_array().unwrap() {
            for g in rule["apiGroups"].as_array().unwrap() {
                for r in rule["resources"].as_array().unwrap() {
                    for v in rule["verbs"].as_array().unwrap() {
                        assert_ne!(v, "*", "no wildcard verbs");
                        out.insert((
                            v.as_str().unwrap().to_string(),
                            g.as_str().unwrap().to_string(),
                            r.as_str().unwrap().to_string(),
                            ns.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// Both directions: every request is granted, every grant is used.
fn assert_rbac(what: &str, used: &BTreeSet<Req>, granted: &BTreeSet<Grant>) {
    assert!(!used.is_empty(), "{what}: no requests recorded");
    for (v, g, r, ns) in used {
        let ok = granted.iter().any(|(gv, gg, gr, gns)| {
            gv == v && gg == g && gr == r && (gns.is_empty() || gns == ns)
        });
        assert!(
            ok,
            "{what}: the binary made a request its role does not grant: {v} {g}/{r} in namespace \
             {ns:?}; granted: {granted:?}; used: {used:?}"
        );
    }
    for (gv, gg, gr, gns) in granted {
        let ok = used
            .iter()
            .any(|(v, g, r, ns)| gv == v && gg == g && gr == r && (gns.is_empty() || gns == ns));
        assert!(
            ok,
            "{what}: the role grants {gv} {gg}/{gr} (namespace {gns:?}), which the binary never \
             used; used: {used:?}"
        );
    }
}

/// The metric families served on `port`, empty while it does not answer `200`.
fn try_families(port: u16) -> BTreeSet<String> {
    match try_http_get_blocking(port, "/metrics") {
        Some((200, body)) => families(&body),
        _ => BTreeSet::new(),
    }
}

/// Whether every rule of `granted` has been used by the recorded requests.
fn all_grants_used(used: &BTreeSet<Req>, granted: &BTreeSet<Grant>) -> bool {
    granted.iter().all(|(gv, gg, gr, gns)| {
        used.iter()
            .any(|(v, g, r, ns)| gv == v && gg == g && gr == r && (gns.is_empty() || gns == ns))
    })
}

/// Requests on Leases with `verb` (of the binaries, not kubectl), and successful Lease
/// updates (renewals).
fn lease_activity(sim: &SimProc, verb: &str) -> (usize, usize) {
    let reqs = sim
        .records_blocking("requests")
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["resource"] == "leases"
                && r["verb"] == verb
                && !r["user_agent"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("kubectl")
        })
        .count();
    let renewals = sim
        .records_blocking("writes")
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["resource"] == "leases" && w["verb"] == "update" && w["code"] == 200)
        .count();
    (reqs, renewals)
}

/// Waits until the process serves `/metrics` on `port`; panics with its log if it exits first.
fn wait_serving(p: &mut Proc, port: u16, log: &Path, what: &str) {
    wait_until(
        &format!("{what} serving /metrics"),
        Duration::from_secs(30),
        || {
            if let Some(st) = p.0.try_wait().unwrap() {
                panic!(
                    "{what} exited ({st}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            matches!(try_http_get_blocking(port, "/metrics"), Some((200, _)))
        },
    );
}

fn scrape(port: u16) -> String {
    let (code, body) = http_get_blocking(port, "/metrics");
    assert_eq!(code, 200, "GET /metrics on port {port}: {body}");
    body
}

/// Metric family names served in a Prometheus text exposition.
fn families(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let name = it.next().unwrap();
            let ty = it.next().unwrap_or("");
            out.insert(name.to_string());
            match ty {
                "histogram" => {
                    for s in ["_bucket", "_sum", "_count"] {
                        out.insert(format!("{name}{s}"));
                    }
                }
                "info" => {
                    out.insert(format!("{name}_info"));
                }
                "counter" if !name.ends_with("_total") => {
                    out.insert(format!("{name}_total"));
                }
                _ => {}
            }
        } else if !l.starts_with('#') && !l.is_empty() {
            let name = l.split(['{', ' ']).next().unwrap();
            out.insert(name.to_string());
        }
    }
    out
}

/// Metric names the dashboard's PromQL expressions query.
fn dashboard_metrics() -> BTreeSet<String> {
    let d: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/dashboards/magma.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if let (true, Some(s)) = (k == "expr" || k == "query", v.as_str()) {
                        out.push(s.to_string());
                    }
                    walk(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&d, &mut exprs);
    assert!(exprs.len() >= 10, "the dashboard has its panels");
    let mut names = BTreeSet::new();
    for e in exprs {
        let mut word = String::new();
        for ch in e.chars().chain(std::iter::once(' ')) {
            if ch.is_ascii_alphanumeric() || ch == '_' || ch == ':' {
                word.push(ch);
            } else {
                if word.starts_with("magma_") || word.starts_with("volcano_") {
                    names.insert(word.clone());
                }
                word.clear();
            }
        }
    }
    names
}

fn spawn(binary: &Path, args: &[String], log: &Path) -> Proc {
    Proc(
        Command::new(binary)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap(),
    )
}

fn pods_yaml(prefix: &str, scheduler: &str, n: usize, cpu: &str) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\n  namespace: default\nspec:\n  schedulerName: {scheduler}\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: {cpu}\n        memory: 64Mi\n"
            )
        })
        .collect()
}

/// A WaitForFirstConsumer claim and a pod of `scheduler` using it: the scheduler annotates the
/// claim with its node (patch), the simulator's provisioner binds it to a new PV, the scheduler
/// reads that PV and the node (get) and binds the pod. Waits until the pod is bound.
fn volume_scenario(sim: &SimProc, scheduler: &str) {
    let yaml = format!(
        "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: wffc\nprovisioner: sim.csi.magma.io\nvolumeBindingMode: WaitForFirstConsumer\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: wffc\n  resources:\n    requests:\n      storage: 1Gi\n\
         ---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: vol-0\n  namespace: default\nspec:\n  schedulerName: {scheduler}\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n        memory: 64Mi\n    volumeMounts:\n    - name: data\n      mountPath: /data\n  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: data\n"
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
    wait_until(
        "the pod with a provisioned volume bound",
        Duration::from_secs(60),
        || bound(sim, "vol-") == 1,
    );
    let pvc = sim.kubectl_json(&["get", "pvc", "data", "-n", "default"]);
    assert_eq!(pvc["status"]["phase"], "Bound", "{pvc}");
}

/// A claim of a `kubernetes.io/no-provisioner` class and the PV made for it by hand: the
/// scheduler reads the claim (get) and writes the PV's claimRef (patch); the simulator's PV
/// controller binds them. Waits until the pod is bound.
fn static_volume_scenario(sim: &SimProc, scheduler: &str, node: &str) {
    let yaml = format!(
        "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: local\nprovisioner: kubernetes.io/no-provisioner\nvolumeBindingMode: WaitForFirstConsumer\n\
         ---\napiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: nvme\nspec:\n  capacity:\n    storage: 10Gi\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  local:\n    path: /mnt/nvme\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - key: kubernetes.io/hostname\n          operator: In\n          values: [{node}]\n\
         ---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: local-data\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: local\n  resources:\n    requests:\n      storage: 1Gi\n\
         ---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: local-0\n  namespace: default\nspec:\n  schedulerName: {scheduler}\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n  volumes:\n  - name: data\n    persistentVolumeClaim:\n      claimName: local-data\n"
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
    wait_until(
        "the pod with an existing local volume bound",
        Duration::from_secs(60),
        || bound(sim, "local-") == 1,
    );
}

/// A pod with a ResourceClaim (DRA) for the one device a ResourceSlice publishes on `node`:
/// the scheduler watches the claims, slices and classes, adds the finalizer to the claim
/// (patch) and writes its allocation and the pod's reservation (patch of the status). The
/// status writes first answer `409` (injected) until the scheduler has read the claim afresh
/// (get): the conflict path of PreBind, then the bind once the writes go through. Waits until
/// the pod is bound.
fn dra_scenario(sim: &SimProc, scheduler: &str, node: &str) {
    let yaml = format!(
        "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu.example.com\nspec:\n  selectors:\n  - cel:\n      expression: device.driver == \"gpu.example.com\"\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata:\n  name: {node}-gpus\nspec:\n  driver: gpu.example.com\n  nodeName: {node}\n  pool:\n    name: {node}\n    generation: 1\n    resourceSliceCount: 1\n  devices:\n  - name: gpu-0\n\
         ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: gpu\n  namespace: default\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.example.com\n"
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
    procs::post_faults(
        sim,
        &serde_json::json!({"errors": [
            {"verb": "patch", "resource": "resourceclaims/status", "rate": 1.0, "code": 409}]}),
    );
    let pod = format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: dra-0\n  namespace: default\nspec:\n  schedulerName: {scheduler}\n  resourceClaims:\n  - name: gpu\n    resourceClaimName: gpu\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: 100m\n"
    );
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&pod));
    assert!(ok, "{out}");
    wait_until(
        "the claim read afresh after a conflicting write",
        Duration::from_secs(60),
        || {
            requests(sim)
                .iter()
                .any(|(v, g, r, _)| v == "get" && g == "resource.k8s.io" && r == "resourceclaims")
        },
    );
    procs::post_faults(sim, &serde_json::json!({}));
    wait_until(
        "the pod with a device bound",
        Duration::from_secs(60),
        || bound(sim, "dra-") == 1,
    );
    let claim = sim.kubectl_json(&["get", "resourceclaims", "gpu", "-n", "default"]);
    assert_eq!(
        claim["status"]["allocation"]["devices"]["results"][0]["device"], "gpu-0",
        "{claim}"
    );
}

/// A pod of higher priority that fits nowhere until a lower one on `nodes` goes: each node gets a
/// 30-CPU pod placed directly (another scheduler's), then a 3-CPU pod of a PriorityClass of
/// value 1000 preempts one of them (the scheduler lists the PodDisruptionBudgets, patches the
/// victim's status and deletes it). Waits until the preemptor is bound.
fn preemption_scenario(sim: &SimProc, scheduler: &str, nodes: &[&str]) {
    let mut yaml = "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: magma-test-high\nvalue: 1000\n".to_owned();
    for (i, n) in nodes.iter().enumerate() {
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: hog-{i}\n  namespace: default\nspec:\n  nodeName: {n}\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: \"30\"\n"
        ));
    }
    yaml.push_str(&format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: preemptor-0\n  namespace: default\nspec:\n  schedulerName: {scheduler}\n  priorityClassName: magma-test-high\n  containers:\n  - name: c\n    image: sandbox\n    resources:\n      requests:\n        cpu: \"3\"\n"
    ));
    let (ok, out) = sim.kubectl(&["create", "-f", "-"], Some(&yaml));
    assert!(ok, "{out}");
    wait_until(
        "the preemptor bound in its victim's room",
        Duration::from_secs(60),
        || bound(sim, "preemptor-") == 1,
    );
}

fn bound(sim: &SimProc, prefix: &str) -> usize {
    sim.records_blocking("bindings")
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["name"].as_str().unwrap_or("").starts_with(prefix))
        .count()
}

#[test]
fn rbac_and_dashboard_match_what_the_binaries_do() {
    let objs = default_chart();
    let dep = of_kind(&objs, "Deployment")[0].clone();
    let sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap()
        .to_string();
    let dir = procs::tmpdir("deploy-rbac");
    let sim = sim_with_crds_and_configmaps(&dir, 4, &objs);
    let conf = write_scheduler_conf(&dir, &objs, &dep);
    // Both replicas of the Deployment, with its exact arguments: one leads, one stands by.
    let mut procs = Vec::new();
    let mut metrics_ports = Vec::new();
    for i in 0..2 {
        let (args, m) = local_args(&container_args(&dep), &sim.kubeconfig, Some(&conf));
        procs.push(spawn(
            Path::new(env!("CARGO_BIN_EXE_agent-scheduler")),
            &args,
            &dir.join(format!("scheduler-{i}.log")),
        ));
        metrics_ports.push(m);
    }
    // Schedulable pods, and one that fits nowhere (events, PodScheduled=False).
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pods_yaml("ok", "agent-scheduler", 20, "100m")),
    );
    assert!(ok, "{out}");
    let (ok, out) = sim.kubectl(
        &["create", "-f", "-"],
        Some(&pods_yaml("huge", "agent-scheduler", 1, "1000")),
    );
    assert!(ok, "{out}");
    wait_until("20 pods bound", Duration::from_secs(60), || {
        bound(&sim, "ok-") == 20
    });
    volume_scenario(&sim, "agent-scheduler");
    static_volume_scenario(&sim, "agent-scheduler", "node-00001");
    dra_scenario(&sim, "agent-scheduler", "node-00002");
    preemption_scenario(
        &sim,
        "agent-scheduler",
        &["node-00000", "node-00001", "node-00002", "node-00003"],
    );
    wait_until(
        "the unschedulable pod's condition",
        Duration::from_secs(30),
        || {
            let p = sim.kubectl_json(&["get", "pod", "huge-0", "-n", "default"]);
            p["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            })
        },
    );
    // The leader has renewed the Lease and the standby has read it a few times: both replicas
    // got the Lease at start (404), one created it; the other's reads after that are its
    // retries.
    wait_until(
        "a Lease renewal and two standby retries",
        Duration::from_secs(60),
        || {
            let (gets, renewals) = lease_activity(&sim, "get");
            gets >= 4 && renewals >= 1
        },
    );
    // The events and conditions of the scenario are written off the scheduling path: wait until
    // every rule of the role has been used (asserted below, with what was used).
    let granted = grants(&objs, &sa);
    poll_until(Duration::from_secs(30), || {
        all_grants_used(&requests(&sim), &granted)
    });
    let served: BTreeSet<String> = metrics_ports
        .iter()
        .flat_map(|p| families(&scrape(*p)))
        .collect();
    let leaders: usize = metrics_ports
        .iter()
        .filter(|p| scrape(**p).lines().any(|l| l == "magma_leader 1"))
        .count();
    assert_eq!(leaders, 1, "exactly one replica leads");
    drop(procs);

    let used = requests(&sim);
    assert_rbac("agent-scheduler (default chart)", &used, &granted);

    // The dashboard only charts what is served. Sharding metrics come from the soft/hard
    // scheduler and the shard-controller, checked below when those run.
    let wanted = dashboard_metrics();
    let mut pending: BTreeSet<String> = BTreeSet::new();
    for m in &wanted {
        if m.starts_with("magma_shard") {
            pending.insert(m.clone());
            continue;
        }
        assert!(
            served.contains(m),
            "the dashboard queries {m}, which agent-scheduler does not serve"
        );
    }

    // Sharded: the hard-mode scheduler and the shard-controller, each in its own simulator so
    // the requests are told apart.
    let sharded = sharded_chart();
    let mut sharded_served = BTreeSet::new();
    let hard = deployment(&sharded, "magma-a-agent-scheduler");
    {
        let dir = procs::tmpdir("deploy-rbac-hard");
        let sim = sim_with_crds_and_configmaps(&dir, 4, &sharded);
        let (ok, out) = sim.kubectl(
            &["apply", "-f", "-"],
            Some("apiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: agent-scheduler-a\nspec:\n  nodesDesired: [node-00000, node-00001]\n"),
        );
        assert!(ok, "{out}");
        let conf = write_scheduler_conf(&dir, &sharded, &hard);
        let (args, m) = local_args(&container_args(&hard), &sim.kubeconfig, Some(&conf));
        let log = dir.join("hard.log");
        let mut p = spawn(
            Path::new(env!("CARGO_BIN_EXE_agent-scheduler")),
            &args,
            &log,
        );
        wait_serving(&mut p, m, &log, "the hard-mode agent-scheduler");
        {
            let (ok, out) = sim.kubectl(
                &["create", "-f", "-"],
                Some(&pods_yaml("a", "agent-scheduler-a", 6, "100m")),
            );
            assert!(ok, "{out}");
            wait_until("hard-mode pods bound", Duration::from_secs(60), || {
                bound(&sim, "a-") == 6
            });
            volume_scenario(&sim, "agent-scheduler-a");
            static_volume_scenario(&sim, "agent-scheduler-a", "node-00001");
            dra_scenario(&sim, "agent-scheduler-a", "node-00000");
            preemption_scenario(&sim, "agent-scheduler-a", &["node-00000", "node-00001"]);
            let (ok, out) = sim.kubectl(
                &["create", "-f", "-"],
                Some(&pods_yaml("huge", "agent-scheduler-a", 1, "1000")),
            );
            assert!(ok, "{out}");
            wait_until(
                "the unschedulable pod's condition",
                Duration::from_secs(30),
                || {
                    let p = sim.kubectl_json(&["get", "pod", "huge-0", "-n", "default"]);
                    p["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "PodScheduled" && c["status"] == "False")
                    })
                },
            );
            let on_shard = sim
                .records_blocking("bindings")
                .as_array()
                .unwrap()
                .iter()
                .all(|b| ["node-00000", "node-00001"].contains(&b["node"].as_str().unwrap_or("")));
            assert!(on_shard, "hard mode binds only inside the NodeShard");
            let sa = hard["spec"]["template"]["spec"]["serviceAccountName"]
                .as_str()
                .unwrap();
            let granted = grants(&sharded, sa);
            // Until the shard metrics are served and every rule has been used (both asserted
            // below, with what was seen).
            let shard_metrics: Vec<&String> = wanted
                .iter()
                .filter(|m| m.starts_with("magma_shard_"))
                .collect();
            poll_until(Duration::from_secs(30), || {
                let served = try_families(m);
                shard_metrics.iter().all(|x| served.contains(*x))
                    && all_grants_used(&requests(&sim), &granted)
            });
            sharded_served.extend(families(&scrape(m)));
            drop(p);
            assert_rbac("agent-scheduler (hard mode)", &requests(&sim), &granted);
            for m in wanted.iter().filter(|m| m.starts_with("magma_shard_")) {
                assert!(
                    sharded_served.contains(m),
                    "the dashboard queries {m}, which the hard-mode agent-scheduler does not serve"
                );
            }
            pending.retain(|m| !m.starts_with("magma_shard_"));
        }
    }
    {
        let ctl_bin = shard_controller();
        let ctl = deployment(&sharded, "magma-a-shard-controller");
        let dir = procs::tmpdir("deploy-rbac-ctl");
        let sim = sim_with_crds_and_configmaps(&dir, 6, &sharded);
        // A stale shard for the controller to delete, one to update (agent-scheduler-a takes
        // every node: it comes first and its node limit is 500), one to create (b).
        let (ok, out) = sim.kubectl(
            &["apply", "-f", "-"],
            Some("apiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: stale\nspec:\n  nodesDesired: [node-00000]\n---\napiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: agent-scheduler-a\nspec:\n  nodesDesired: [node-00001]\n"),
        );
        assert!(ok, "{out}");
        let (args, m) = local_args(&container_args(&ctl), &sim.kubeconfig, None);
        let log = dir.join("ctl.log");
        let mut p = spawn(&ctl_bin, &args, &log);
        wait_serving(&mut p, m, &log, "shard-controller");
        wait_until(
            "the controller updates, creates and deletes NodeShards",
            Duration::from_secs(60),
            || {
                let l = sim.kubectl_json(&["get", "nodeshards.shard.volcano.sh"]);
                let shards: BTreeMap<String, usize> = l["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| {
                        (
                            i["metadata"]["name"].as_str().unwrap().to_string(),
                            i["spec"]["nodesDesired"].as_array().map_or(0, Vec::len),
                        )
                    })
                    .collect();
                shards.get("agent-scheduler-a") == Some(&6)
                    && shards.contains_key("agent-scheduler-b")
                    && !shards.contains_key("stale")
            },
        );
        let sa = ctl["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap();
        let granted = grants(&sharded, sa);
        // Until the controller's metrics are served and every rule has been used (both asserted
        // below, with what was seen).
        let ctl_metrics: Vec<&String> = wanted
            .iter()
            .filter(|m| m.starts_with("magma_shardctl_"))
            .collect();
        poll_until(Duration::from_secs(30), || {
            let served = try_families(m);
            ctl_metrics.iter().all(|x| served.contains(*x))
                && all_grants_used(&requests(&sim), &granted)
        });
        sharded_served.extend(families(&scrape(m)));
        assert_rbac("shard-controller", &requests(&sim), &granted);
        pending.retain(|m| !m.starts_with("magma_shardctl_"));
        for m in wanted.iter().filter(|m| m.starts_with("magma_shardctl_")) {
            assert!(
                sharded_served.contains(m),
                "the dashboard queries {m}, which shard-controller does not serve"
            );
        }
    }
    assert!(
        pending.is_empty(),
        "the dashboard queries metrics no scenario served: {pending:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Dockerfile

#[test]
fn dockerfile_builds_both_binaries_and_runs_as_non_root() {
    let df = std::fs::read_to_string(repo().join("deploy/Dockerfile")).unwrap();
    let froms = df
        .lines()
        .filter(|l| l.trim_start().starts_with("FROM "))
        .count();
    assert!(froms >= 2, "multi-stage");
    assert!(df.contains("cargo build --release --locked -p magma-kube --bins"));
    for b in ["agent-scheduler", "shard-controller"] {
        assert!(
            df.contains(&format!("/usr/local/bin/{b}")),
            "the image ships {b}"
        );
    }
    let user = df
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("USER "))
        .expect("a USER line");
    let uid = user.split(':').next().unwrap();
    assert!(uid != "0" && uid != "root", "runs as non-root: {user}");
    // The chart's commands are the image's paths and its uid is the image's.
    let dep = of_kind(&default_chart(), "Deployment")[0].clone();
    assert_eq!(
        dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"].to_string(),
        uid
    );
}
