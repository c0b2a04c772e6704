//! The `NodeShard` custom resource: the Rust types against Magma's deploy CRD (drift), the deploy
//! CRD against upstream Volcano's (compatibility), objects as Volcano's tools write them, and the
//! CRD and status-subresource semantics against the API simulator.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, ClusterResourceScope, GroupVersionKind};
use kube_sim::{Sim, SimConfig, SimHandle};
use magma_kube::nodeshard::{
    self, CRD_NAME, LIST_KIND, NodeShard, NodeShardSpec, NodeShardStatus, SHORT_NAMES, SINGULAR,
    status_for, status_merge_patch,
};
use serde_json::{Value, json};

/// Upstream Volcano's NodeShard CRD, an unmodified copy (provenance in `data/README.md`).
const UPSTREAM_CRD: &str = include_str!("data/upstream-shard.volcano.sh_nodeshards.yaml");
/// The shared checkout the copy was taken from, when it is next to the repository: the copy
/// must still be identical to it.
const SHARED_UPSTREAM_CRD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/upstream/shard.volcano.sh_nodeshards.yaml"
);
const TS: &str = "2026-01-01T00:00:00Z";

fn deploy_crd() -> Value {
    serde_saphyr::from_str(nodeshard::crd_yaml()).expect("deploy CRD parses as YAML")
}

fn only_version(crd: &Value) -> &Value {
    let versions = crd["spec"]["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), 1, "NodeShard has exactly one version");
    &versions[0]
}

fn schema(crd: &Value) -> &Value {
    &only_version(crd)["schema"]["openAPIV3Schema"]
}

/// Compile-time: the Rust type is cluster-scoped with a static identity.
fn assert_cluster_scoped<K: Resource<Scope = ClusterResourceScope, DynamicType = ()>>() {}

/// A value for every property the schema declares (nothing more), typed as the schema says.
fn sample(s: &Value, path: &str) -> Value {
    match s["type"].as_str() {
        Some("object") => match s.get("properties").and_then(Value::as_object) {
            Some(props) => props
                .iter()
                .map(|(k, v)| (k.clone(), sample(v, &format!("{path}.{k}"))))
                .collect::<serde_json::Map<_, _>>()
                .into(),
            // `metadata`: free-form in the schema.
            None => json!({"name": "sample"}),
        },
        Some("array") => json!([sample(&s["items"], &format!("{path}[]"))]),
        Some("string") => match s.get("format").and_then(Value::as_str) {
            Some("date-time") => json!(TS),
            None => match path {
                ".apiVersion" => json!(nodeshard::API_VERSION),
                ".kind" => json!(nodeshard::KIND),
                _ => json!(format!("v{}", path.replace(['.', '[', ']'], ""))),
            },
            Some(f) => panic!("{path}: unhandled string format {f}; extend the drift test"),
        },
        other => panic!("{path}: unhandled schema type {other:?}; extend the drift test"),
    }
}

/// `v` conforms to `s`: same JSON types, every object key declared, required keys present.
fn check(v: &Value, s: &Value, path: &str) {
    match s["type"].as_str() {
        Some("object") => {
            let o = v
                .as_object()
                .unwrap_or_else(|| panic!("{path}: not an object: {v}"));
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, sub) in o {
                    let ps = props
                        .get(k)
                        .unwrap_or_else(|| panic!("{path}.{k}: written by Rust, not in the CRD"));
                    check(sub, ps, &format!("{path}.{k}"));
                }
            }
            for r in s["required"].as_array().into_iter().flatten() {
                let r = r.as_str().expect("required name");
                assert!(
                    o.contains_key(r),
                    "{path}.{r}: required by the CRD, not written"
                );
            }
        }
        Some("array") => {
            let a = v
                .as_array()
                .unwrap_or_else(|| panic!("{path}: not an array: {v}"));
            for x in a {
                check(x, &s["items"], &format!("{path}[]"));
            }
        }
        Some("string") => {
            let x = v
                .as_str()
                .unwrap_or_else(|| panic!("{path}: not a string: {v}"));
            if s.get("format").and_then(Value::as_str) == Some("date-time") {
                x.parse::<k8s_openapi::jiff::Timestamp>()
                    .unwrap_or_else(|e| panic!("{path}: not a date-time: {x}: {e}"));
            }
        }
        other => panic!("{path}: unhandled schema type {other:?}"),
    }
}

fn full() -> NodeShard {
    let mut ns = NodeShard::new("agent-scheduler", ["n1", "n2"]);
    ns.status = Some(NodeShardStatus {
        last_update_time: Some(Time(TS.parse().expect("timestamp"))),
        nodes_in_use: vec!["n1".into(), "n3".into()],
        nodes_to_add: vec!["n2".into()],
        nodes_to_remove: vec!["n3".into()],
    });
    ns
}

// ---- (a) drift: Rust types vs deploy CRD ----

#[test]
fn identity_matches_deploy_crd() {
    assert_cluster_scoped::<NodeShard>();
    let crd = deploy_crd();
    assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(crd["kind"], "CustomResourceDefinition");
    let (group, plural) = (NodeShard::group(&()), NodeShard::plural(&()));
    assert_eq!(crd["metadata"]["name"], format!("{plural}.{group}"));
    assert_eq!(crd["metadata"]["name"], CRD_NAME);
    assert_eq!(
        crd["metadata"]["annotations"]["helm.sh/resource-policy"],
        "keep"
    );
    let spec = &crd["spec"];
    assert_eq!(spec["group"], *group);
    assert_eq!(spec["scope"], "Cluster");
    assert_eq!(spec["names"]["kind"], *NodeShard::kind(&()));
    assert_eq!(spec["names"]["plural"], *plural);
    assert_eq!(spec["names"]["singular"], SINGULAR);
    assert_eq!(spec["names"]["listKind"], LIST_KIND);
    assert_eq!(spec["names"]["shortNames"], json!(SHORT_NAMES));
    let v = only_version(&crd);
    assert_eq!(v["name"], *NodeShard::version(&()));
    assert_eq!(
        NodeShard::api_version(&()),
        format!("{group}/{}", NodeShard::version(&()))
    );
    assert_eq!(v["served"], true);
    assert_eq!(v["storage"], true);
    assert_eq!(v["subresources"]["status"], json!({}));
    assert_eq!(
        v["additionalPrinterColumns"],
        json!([{"jsonPath": ".metadata.creationTimestamp", "name": "AGE", "type": "date"}])
    );
    assert_eq!(
        NodeShard::url_path(&(), None),
        "/apis/shard.volcano.sh/v1alpha1/nodeshards"
    );
}

#[test]
fn every_schema_property_round_trips_through_the_rust_type() {
    let crd = deploy_crd();
    let s = schema(&crd);
    for part in ["spec", "status"] {
        assert!(
            s["properties"][part]["properties"].is_object(),
            "{part} has properties in the CRD"
        );
    }
    // Schema → Rust: an object with every declared property must read and write back unchanged
    // (unknown fields are ignored on read, so a renamed field would be lost here).
    let sample = sample(s, "");
    let ns: NodeShard = serde_json::from_value(sample.clone()).expect("sample deserialises");
    assert_eq!(
        serde_json::to_value(&ns).expect("serialise"),
        sample,
        "a schema property is not (de)serialised by the Rust type under the same name"
    );
}

#[test]
fn everything_rust_writes_is_declared_by_the_schema() {
    let crd = deploy_crd();
    let s = schema(&crd);
    // Rust → schema: a fully populated object, and a minimal one (required fields still written).
    let full = serde_json::to_value(full()).expect("serialise");
    for part in ["spec", "status"] {
        let keys = full[part].as_object().expect("object").len();
        let props = s["properties"][part]["properties"]
            .as_object()
            .expect("properties")
            .len();
        assert_eq!(
            keys, props,
            "{part}: fully populated object covers the schema"
        );
    }
    check(&full, s, "");
    let minimal = serde_json::to_value(NodeShard::new("x", Vec::<String>::new())).expect("ser");
    check(&minimal, s, "");
    assert_eq!(minimal["spec"], json!({"nodesDesired": []}));
    assert!(minimal.get("status").is_none());
    let empty_status = serde_json::to_value(NodeShardStatus::default()).expect("ser");
    assert_eq!(empty_status, json!({}));
}

// ---- (b) compatibility with upstream ----

#[test]
fn deploy_crd_is_upstreams() {
    if let Ok(shared) = std::fs::read_to_string(SHARED_UPSTREAM_CRD) {
        assert_eq!(
            UPSTREAM_CRD, shared,
            "tests/data/upstream-shard.volcano.sh_nodeshards.yaml is no longer the unmodified \
             upstream file {SHARED_UPSTREAM_CRD}"
        );
    }
    let upstream: Value = serde_saphyr::from_str(UPSTREAM_CRD).expect("upstream CRD parses");
    let ours = deploy_crd();
    assert_eq!(ours["apiVersion"], upstream["apiVersion"]);
    assert_eq!(ours["kind"], upstream["kind"]);
    assert_eq!(ours["metadata"], upstream["metadata"]);
    assert_eq!(schema(&ours), schema(&upstream), "openAPIV3Schema differs");
    assert_eq!(ours["spec"], upstream["spec"], "CRD spec differs");
}

#[test]
fn deploy_crd_parses_as_a_typed_crd() {
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(nodeshard::crd_yaml()).expect("typed CRD");
    assert_eq!(crd.metadata.name.as_deref(), Some(CRD_NAME));
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["nsh".to_owned()][..])
    );
}

// ---- (c) objects as Volcano's tools write them ----

fn parse(v: Value) -> NodeShard {
    serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

#[test]
fn reads_volcano_objects() {
    let ns = parse(json!({
        "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
        "metadata": {"name": "agent-scheduler"},
        "spec": {"nodesDesired": ["n1", "n2"]},
        "status": {"nodesInUse": ["n1"], "nodesToAdd": ["n2"], "lastUpdateTime": TS}
    }));
    assert_eq!(ns.metadata.name.as_deref(), Some("agent-scheduler"));
    assert_eq!(ns.spec.nodes_desired, ["n1", "n2"]);
    let st = ns.status.expect("status");
    assert_eq!(st.nodes_in_use, ["n1"]);
    assert_eq!(st.nodes_to_add, ["n2"]);
    assert!(st.nodes_to_remove.is_empty());
    assert_eq!(st.last_update_time, Some(Time(TS.parse().expect("ts"))));

    // Without status; with fractional seconds elsewhere in metadata.
    let ns = parse(json!({
        "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
        "metadata": {"name": "volcano", "resourceVersion": "7", "uid": "u",
                     "creationTimestamp": TS, "generation": 2},
        "spec": {"nodesDesired": ["a"]}
    }));
    assert!(ns.status.is_none());
    assert_eq!(ns.metadata.generation, Some(2));

    // Empty lists, empty status, null lists (Go nil slices without omitempty), a null status.
    for status in [
        json!({}),
        json!({"nodesInUse": [], "nodesToAdd": [], "nodesToRemove": []}),
        json!({"nodesInUse": null, "nodesToAdd": null, "nodesToRemove": null, "lastUpdateTime": null}),
    ] {
        let ns = parse(json!({
            "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
            "metadata": {"name": "s"}, "spec": {"nodesDesired": []}, "status": status
        }));
        assert_eq!(ns.spec, NodeShardSpec::default());
        assert_eq!(ns.status, Some(NodeShardStatus::default()));
    }
    let ns =
        parse(json!({"metadata": {"name": "s"}, "spec": {"nodesDesired": null}, "status": null}));
    assert!(ns.spec.nodes_desired.is_empty() && ns.status.is_none());

    // Unknown extra fields anywhere (newer Volcano versions, managedFields, …).
    let ns = parse(json!({
        "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShard",
        "metadata": {"name": "s", "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
        "spec": {"nodesDesired": ["a"], "futureField": {"x": 1}},
        "status": {"nodesInUse": ["a"], "conditions": [{"type": "Ready"}]},
        "extra": true
    }));
    assert_eq!(ns.spec.nodes_desired, ["a"]);
    assert_eq!(ns.status.expect("status").nodes_in_use, ["a"]);

    // YAML, as `kubectl apply -f` users write it.
    let ns: NodeShard = serde_saphyr::from_str(
        "apiVersion: shard.volcano.sh/v1alpha1\nkind: NodeShard\nmetadata:\n  name: agent-scheduler\nspec:\n  nodesDesired:\n  - node-1\n  - node-2\n",
    )
    .expect("yaml");
    assert_eq!(ns.spec.nodes_desired, ["node-1", "node-2"]);

    // A list, as the API server returns it.
    let list: kube::core::ObjectList<NodeShard> = serde_json::from_value(json!({
        "apiVersion": "shard.volcano.sh/v1alpha1", "kind": "NodeShardList",
        "metadata": {"resourceVersion": "5"},
        "items": [{"metadata": {"name": "a"}, "spec": {"nodesDesired": ["n"]}}]
    }))
    .expect("list");
    assert_eq!(list.items.len(), 1);
}

#[test]
fn round_trip_is_lossless() {
    let ns = full();
    let v = serde_json::to_value(&ns).expect("ser");
    assert_eq!(v["apiVersion"], nodeshard::API_VERSION);
    assert_eq!(v["kind"], nodeshard::KIND);
    assert_eq!(v["status"]["lastUpdateTime"], TS);
    assert_eq!(parse(v), ns);
}

// ---- (d) against the API simulator ----

async fn sim() -> (SimHandle, kube::Client) {
    let sim = Sim::start(SimConfig {
        nodes: 0,
        install_nodeshard_crd: false,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    (sim, client)
}

async fn install_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition =
        serde_saphyr::from_str(nodeshard::crd_yaml()).expect("typed CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let created = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("CRD registers");
    assert_eq!(created.metadata.name.as_deref(), Some(CRD_NAME));
}

/// The stored object as raw JSON, to see exactly which keys were written.
async fn raw(client: &kube::Client, name: &str) -> Value {
    let gvk = GroupVersionKind::gvk(nodeshard::GROUP, nodeshard::VERSION, nodeshard::KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, nodeshard::PLURAL);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let o = api.get(name).await.expect("get raw");
    serde_json::to_value(o).expect("json")
}

#[tokio::test]
async fn status_subresource_on_the_simulator() {
    let (sim, client) = sim().await;
    let api: Api<NodeShard> = Api::all(client.clone());
    // Not served before the CRD exists.
    assert!(api.list(&Default::default()).await.is_err());
    install_crd(&client).await;

    // Create: `.status` in the body is dropped (status subresource).
    let mut ns = NodeShard::new("agent-scheduler", ["n1", "n2"]);
    ns.status = Some(status_for(["zzz"], ["n1", "n2"]));
    let created = api
        .create(&PostParams::default(), &ns)
        .await
        .expect("create");
    assert_eq!(created.spec.nodes_desired, ["n1", "n2"]);
    assert!(created.status.is_none(), "status dropped on create");
    assert!(created.metadata.namespace.is_none(), "cluster-scoped");

    // replace_status (PUT /status), as upstream's UpdateStatus.
    let mut cur = api.get("agent-scheduler").await.expect("get");
    let want = status_for(["n1"], &cur.spec.nodes_desired);
    assert!(cur.status_differs(&want));
    cur.status = Some(want.clone());
    let put = api
        .replace_status("agent-scheduler", &PostParams::default(), &cur)
        .await
        .expect("replace_status");
    assert_eq!(put.status.as_ref(), Some(&want));
    let got = api.get("agent-scheduler").await.expect("get");
    assert_eq!(got.status.as_ref(), Some(&want));
    assert!(!got.status_differs(&want));
    assert_eq!(
        raw(&client, "agent-scheduler").await["status"],
        json!({"nodesInUse": ["n1"], "nodesToAdd": ["n2"]}),
        "minimal status written"
    );

    // A stale resourceVersion on PUT /status is a conflict, as on the real server.
    let mut stale = cur.clone();
    stale.status = Some(status_for(["n2"], ["n2"]));
    assert!(
        api.replace_status("agent-scheduler", &PostParams::default(), &stale)
            .await
            .is_err(),
        "stale resourceVersion rejected"
    );

    // patch_status (merge patch): emptied lists are cleared, not left behind.
    let next = status_for(["n1", "n2"], ["n1", "n2"]);
    assert!(got.status_differs(&next));
    let patched = api
        .patch_status(
            "agent-scheduler",
            &PatchParams::default(),
            &Patch::Merge(status_merge_patch(&next)),
        )
        .await
        .expect("patch_status");
    assert_eq!(patched.status.as_ref(), Some(&next));
    assert_eq!(
        raw(&client, "agent-scheduler").await["status"],
        json!({"nodesInUse": ["n1", "n2"]})
    );

    // A merge patch with lastUpdateTime keeps it.
    let mut timed = next.clone();
    timed.last_update_time = Some(Time(TS.parse().expect("ts")));
    let patched = api
        .patch_status(
            "agent-scheduler",
            &PatchParams::default(),
            &Patch::Merge(status_merge_patch(&timed)),
        )
        .await
        .expect("patch_status");
    assert_eq!(patched.status.as_ref(), Some(&timed));

    // Writing `.status` through the main resource is ignored; the spec change applies.
    let mut main = api.get("agent-scheduler").await.expect("get");
    main.spec.nodes_desired = vec!["n3".into()];
    main.status = Some(status_for(["bogus"], ["n3"]));
    let replaced = api
        .replace("agent-scheduler", &PostParams::default(), &main)
        .await
        .expect("replace");
    assert_eq!(replaced.spec.nodes_desired, ["n3"]);
    assert_eq!(replaced.status.as_ref(), Some(&timed), "status kept");
    let patched = api
        .patch(
            "agent-scheduler",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"nodesInUse": ["bogus"]}})),
        )
        .await
        .expect("patch");
    assert_eq!(patched.status.as_ref(), Some(&timed), "status kept");
    let got = api.get("agent-scheduler").await.expect("get");
    assert_eq!(got.spec.nodes_desired, ["n3"]);
    assert_eq!(got.status.as_ref(), Some(&timed));

    // Listing decodes into the typed list.
    let list = api.list(&Default::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    sim.shutdown().await;
}
