//! The sharding controller's pure core: ConfigMap and flag parsing, validation errors, legacy
//! synthesis, and the assignment pipeline (filter AND, weighted scores, node-limit, exclusivity,
//! global `maxNodes`, anti-flap).

use k8s_openapi::api::core::v1::ConfigMap;
use magma_kube::shardctl::config::{DEFAULT_UTIL_CHANGE_THRESHOLD, FALLBACK_SYNC_PERIOD};
use magma_kube::shardctl::policy::{AllocationRate, NodeLimit, Warmup};
use magma_kube::shardctl::{
    ConfigError, MinNodesUnmet, NodeUsage, Policy, ShardAssignment, ShardNode, ShardingConfig,
    assign,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `sharding.yaml` value of upstream's `example/sharding/sharding-config-configmap.yaml`
/// (deprecated scalar fields), read from the verbatim copy.
fn upstream_example() -> String {
    let cm: ConfigMap =
        serde_saphyr::from_str(include_str!("data/upstream-sharding-config-configmap.yaml"))
            .expect("upstream example ConfigMap parses");
    cm.data
        .and_then(|mut d| d.remove("sharding.yaml"))
        .expect("the example has sharding.yaml")
}

const WARM: &str = "node.volcano.sh/warmup";

fn node(name: &str, cpu_req: i64) -> ShardNode {
    ShardNode::new(name).with_usage(NodeUsage {
        cpu_capacity_millis: 1000,
        cpu_requested_millis: cpu_req,
        memory_capacity_bytes: 1 << 30,
        memory_requested_bytes: 0,
    })
}

fn parse(yaml: &str) -> ShardingConfig {
    ShardingConfig::parse(yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn err(yaml: &str) -> ConfigError {
    match ShardingConfig::parse(yaml) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e,
    }
}

fn fresh(nodes: &[ShardNode], config: &ShardingConfig) -> Vec<ShardAssignment> {
    assign(nodes, config, &BTreeMap::new())
}

fn desired<'a>(out: &'a [ShardAssignment], scheduler: &str) -> Vec<&'a str> {
    out.iter()
        .find(|a| a.scheduler == scheduler)
        .unwrap_or_else(|| panic!("no assignment for {scheduler}"))
        .nodes_desired
        .iter()
        .map(String::as_str)
        .collect()
}

// ---- Parsing -----------------------------------------------------------------------------------

#[test]
fn upstream_example_parses_with_legacy_synthesis() {
    let c = parse(&upstream_example());
    assert_eq!(c.shard_sync_period, Duration::from_secs(60));
    assert!(c.enable_node_event_trigger);
    assert_eq!(
        c.utilization_change_threshold,
        DEFAULT_UTIL_CHANGE_THRESHOLD
    );
    let names: Vec<&str> = c.schedulers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["agent-scheduler", "volcano"]);

    let agent = &c.schedulers[0];
    assert_eq!(agent.kind, "agent");
    let policies: Vec<(&Policy, u32)> = agent
        .policies
        .iter()
        .map(|p| (&p.policy, p.weight))
        .collect();
    assert_eq!(
        policies,
        [
            (
                &Policy::AllocationRate(AllocationRate::new(0.7, 1.0).unwrap()),
                1
            ),
            (
                &Policy::Warmup(Warmup {
                    label: WARM.into(),
                    value: "true".into()
                }),
                1
            ),
            (&Policy::NodeLimit(NodeLimit::new(1, 100).unwrap()), 1),
        ]
    );
    let volcano = &c.schedulers[1];
    let names: Vec<&str> = volcano.policies.iter().map(|p| p.policy.name()).collect();
    assert_eq!(
        names,
        ["allocation-rate", "node-limit"],
        "no warmup without preferWarmupNodes"
    );
}

#[test]
fn upstream_example_assigns_by_rounded_utilisation() {
    let c = parse(&upstream_example());
    let nodes = [
        node("busy", 900),
        node("edge", 695), // rounds to 0.70 → agent
        node("mid", 694),  // rounds to 0.69 → volcano
        node("idle", 0),
        ShardNode::new("nometrics"),
    ];
    let out = fresh(&nodes, &c);
    assert_eq!(desired(&out, "agent-scheduler"), ["busy", "edge"]);
    // Score (u − 0)/(0.69 − 0): fuller nodes first.
    assert_eq!(desired(&out, "volcano"), ["mid", "idle"]);
    assert!(
        out.iter()
            .all(|a| a.write && !a.kept_current && a.min_nodes_unmet.is_none())
    );
}

#[test]
fn policies_format_parses() {
    let c = parse(
        r#"
schedulerConfigs:
  - name: agent-scheduler
    type: agent
    policies:
      - name: allocation-rate
        weight: 3
        arguments: {minCPUUtil: 0.5, maxCPUUtil: "1"}
      - name: warmup
        arguments: {warmupLabel: pool, warmupLabelValue: hot}
      - name: node-limit
        weight: 0
        arguments: {minNodes: 2, maxNodes: "10"}
shardSyncPeriod: 2m30s
enableNodeEventTrigger: false
utilizationChangeThreshold: 0.25
"#,
    );
    assert_eq!(c.shard_sync_period, Duration::from_secs(150));
    assert!(!c.enable_node_event_trigger);
    assert_eq!(c.utilization_change_threshold, 0.25);
    let p: Vec<(&Policy, u32)> = c.schedulers[0]
        .policies
        .iter()
        .map(|p| (&p.policy, p.weight))
        .collect();
    assert_eq!(
        p,
        [
            (
                &Policy::AllocationRate(AllocationRate::new(0.5, 1.0).unwrap()),
                3
            ),
            (
                &Policy::Warmup(Warmup {
                    label: "pool".into(),
                    value: "hot".into()
                }),
                1
            ),
            (&Policy::NodeLimit(NodeLimit::new(2, 10).unwrap()), 1),
        ]
    );
}

#[test]
fn explicit_policies_ignore_cpu_scalars_but_synthesise_node_limit() {
    let c = parse(
        "schedulerConfigs:\n- name: a\n  cpuUtilizationMin: 0.9\n  cpuUtilizationMax: 1\n  \
         preferWarmupNodes: true\n  maxNodes: 5\n  policies:\n  - name: warmup\n",
    );
    let names: Vec<&str> = c.schedulers[0]
        .policies
        .iter()
        .map(|p| p.policy.name())
        .collect();
    assert_eq!(names, ["warmup", "node-limit"]);
    assert_eq!(
        c.schedulers[0].policies[1].policy,
        Policy::NodeLimit(NodeLimit::new(0, 5).unwrap())
    );
    // An explicit node-limit wins over the scalars.
    let c = parse(
        "schedulerConfigs:\n- name: a\n  maxNodes: 5\n  policies:\n  - name: node-limit\n    \
         arguments: {maxNodes: 7}\n",
    );
    assert_eq!(c.schedulers[0].policies.len(), 1);
    assert_eq!(
        c.schedulers[0].policies[0].policy,
        Policy::NodeLimit(NodeLimit::new(0, 7).unwrap())
    );
}

#[test]
fn legacy_arguments_map_feeds_allocation_rate() {
    let c = parse(
        "schedulerConfigs:\n- name: a\n  cpuUtilizationMin: 0.1\n  cpuUtilizationMax: 0.2\n  \
         arguments: {minCPUUtil: 0.3, maxCPUUtil: 0.8}\n",
    );
    assert_eq!(
        c.schedulers[0].policies[0].policy,
        Policy::AllocationRate(AllocationRate::new(0.3, 0.8).unwrap())
    );
    // Nothing at all: allocation-rate [0, 0], as upstream, and no node-limit.
    let c = parse("schedulerConfigs:\n- name: a\n");
    assert_eq!(c.schedulers[0].policies.len(), 1);
    assert_eq!(
        c.schedulers[0].policies[0].policy,
        Policy::AllocationRate(AllocationRate::new(0.0, 0.0).unwrap())
    );
    assert_eq!(c.shard_sync_period, FALLBACK_SYNC_PERIOD);
    assert!(c.enable_node_event_trigger);
}

#[test]
fn sync_period_fallbacks() {
    for (v, want) in [
        ("\"0s\"", FALLBACK_SYNC_PERIOD),
        ("\"-5s\"", FALLBACK_SYNC_PERIOD),
        ("\"1h\"", Duration::from_secs(3600)),
        ("\"1.5s\"", Duration::from_millis(1500)),
    ] {
        let c = parse(&format!(
            "schedulerConfigs: [{{name: a}}]\nshardSyncPeriod: {v}\n"
        ));
        assert_eq!(c.shard_sync_period, want, "{v}");
    }
}

// ---- Validation errors -------------------------------------------------------------------------

#[test]
fn empty_and_invalid_documents_are_errors() {
    assert!(matches!(err(""), ConfigError::Empty));
    assert!(matches!(err("  \n"), ConfigError::Empty));
    assert!(matches!(err("# only a comment\n"), ConfigError::Empty));
    assert!(matches!(
        err("schedulerConfigs: []\n"),
        ConfigError::NoSchedulers
    ));
    assert!(matches!(
        err("shardSyncPeriod: 60s\n"),
        ConfigError::NoSchedulers
    ));
    assert!(matches!(err("schedulerConfigs: [\n"), ConfigError::Yaml(_)));
    assert!(matches!(err("schedulerConfigs: 3\n"), ConfigError::Yaml(_)));
}

#[test]
fn name_errors() {
    let e = err("schedulerConfigs:\n- type: agent\n");
    assert!(matches!(e, ConfigError::MissingName { index: 0 }), "{e:?}");
    let e = err("schedulerConfigs:\n- name: a\n- name: \"  \"\n");
    assert!(matches!(e, ConfigError::MissingName { index: 1 }), "{e:?}");
    let e = err("schedulerConfigs:\n- name: a\n- name: b\n- name: a\n");
    assert!(
        matches!(&e, ConfigError::DuplicateName { name, first: 0, second: 2 } if name == "a"),
        "{e:?}"
    );
    assert!(e.to_string().contains("\"a\""), "{e}");
}

#[test]
fn unknown_policy_is_rejected() {
    let e = err("schedulerConfigs:\n- name: a\n  policies:\n  - name: allocation-rates\n");
    assert!(
        matches!(&e, ConfigError::UnknownPolicy { scheduler, policy }
            if scheduler == "a" && policy == "allocation-rates"),
        "{e:?}"
    );
    assert!(e.to_string().contains("allocation-rates"), "{e}");
}

#[test]
fn policy_shape_errors() {
    let e = err("schedulerConfigs:\n- name: a\n  policies:\n  - weight: 2\n");
    assert!(
        matches!(e, ConfigError::MissingPolicyName { index: 0, .. }),
        "{e:?}"
    );
    let e = err("schedulerConfigs:\n- name: a\n  policies:\n  - name: warmup\n    weight: -1\n");
    assert!(
        matches!(e, ConfigError::NegativeWeight { weight: -1, .. }),
        "{e:?}"
    );
    for (policy, arg) in [("warmup", "minNodes"), ("allocation-rate", "maxNodes")] {
        let e = err(&format!(
            "schedulerConfigs:\n- name: s\n  policies:\n  - name: {policy}\n    arguments: {{{arg}: 3}}\n"
        ));
        assert!(
            matches!(&e, ConfigError::NodeCountOutsideNodeLimit { scheduler, policy: p, argument }
                if scheduler == "s" && p == policy && *argument == arg),
            "{e:?}"
        );
    }
}

#[test]
fn policy_argument_range_errors() {
    for args in [
        "{minCPUUtil: -0.1, maxCPUUtil: 0.5}",
        "{minCPUUtil: 0.1, maxCPUUtil: 1.5}",
        "{minCPUUtil: 0.6, maxCPUUtil: 0.5}",
        "{minCPUUtil: lots}",
    ] {
        let e = err(&format!(
            "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: {args}\n"
        ));
        assert!(
            matches!(&e, ConfigError::Policy { scheduler, policy, .. }
                if scheduler == "s" && policy == "allocation-rate"),
            "{args}: {e:?}"
        );
    }
    for args in [
        "{minNodes: -1}",
        "{minNodes: 5, maxNodes: 3}",
        "{maxNodes: 1.5}",
    ] {
        let e = err(&format!(
            "schedulerConfigs:\n- name: s\n  policies:\n  - name: node-limit\n    arguments: {args}\n"
        ));
        assert!(matches!(e, ConfigError::Policy { .. }), "{args}: {e:?}");
    }
}

#[test]
fn legacy_scalar_range_errors() {
    for (body, field) in [
        ("cpuUtilizationMin: -0.1", "cpuUtilizationMin"),
        ("cpuUtilizationMax: 1.01", "cpuUtilizationMax"),
        (
            "{cpuUtilizationMin: 0.8, cpuUtilizationMax: 0.7}",
            "cpuUtilizationMin",
        ),
        ("minNodes: -1", "minNodes"),
        ("{minNodes: 5, maxNodes: 4}", "maxNodes"),
    ] {
        let yaml = if let Some(rest) = body.strip_prefix('{') {
            format!("schedulerConfigs:\n- {{name: s, {rest}\n")
        } else {
            format!("schedulerConfigs:\n- name: s\n  {body}\n")
        };
        let e = err(&yaml);
        assert!(
            matches!(&e, ConfigError::Field { scheduler, field: f, .. } if scheduler == "s" && *f == field),
            "{yaml}: {e:?}"
        );
    }
    // maxNodes ≤ 0 means unbounded, so it does not have to exceed minNodes.
    parse("schedulerConfigs:\n- {name: s, minNodes: 5, maxNodes: 0}\n");
}

#[test]
fn bad_duration_and_threshold() {
    let e = err("schedulerConfigs: [{name: a}]\nshardSyncPeriod: soon\n");
    assert!(
        matches!(&e, ConfigError::SyncPeriod { value, .. } if value == "soon"),
        "{e:?}"
    );
    let e = err("schedulerConfigs: [{name: a}]\nshardSyncPeriod: \"60\"\n");
    assert!(
        matches!(e, ConfigError::SyncPeriod { .. }),
        "a unit is required: {e:?}"
    );
    for t in ["0", "-0.1", "1.5"] {
        let e = err(&format!(
            "schedulerConfigs: [{{name: a}}]\nutilizationChangeThreshold: {t}\n"
        ));
        assert!(matches!(e, ConfigError::UtilThreshold { .. }), "{t}: {e:?}");
    }
}

// ---- Flag form ---------------------------------------------------------------------------------

#[test]
fn flag_defaults_match_upstream() {
    let c = ShardingConfig::from_flags::<&str>(&[], Duration::from_secs(60), true).unwrap();
    assert_eq!(c.shard_sync_period, Duration::from_secs(60));
    let names: Vec<&str> = c.schedulers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["volcano", "agent-scheduler"]);
    let volcano: Vec<&Policy> = c.schedulers[0].policies.iter().map(|p| &p.policy).collect();
    assert_eq!(
        volcano,
        [
            &Policy::AllocationRate(AllocationRate::new(0.0, 0.6).unwrap()),
            &Policy::NodeLimit(NodeLimit::new(2, 100).unwrap()),
        ]
    );
    // preferWarmup=true is honoured (upstream ignores it).
    let agent: Vec<&str> = c.schedulers[1]
        .policies
        .iter()
        .map(|p| p.policy.name())
        .collect();
    assert_eq!(agent, ["allocation-rate", "warmup", "node-limit"]);
    assert_eq!(c.schedulers[1].kind, "agent");
}

#[test]
fn flag_entries_and_errors() {
    let c = ShardingConfig::from_flags(&["a:x:0.1:0.9:f:0:0"], Duration::ZERO, false).unwrap();
    assert_eq!(c.shard_sync_period, FALLBACK_SYNC_PERIOD);
    assert!(!c.enable_node_event_trigger);
    assert_eq!(
        c.schedulers[0].policies.len(),
        1,
        "no warmup, no node-limit"
    );

    let bad =
        |entries: &[&str]| ShardingConfig::from_flags(entries, Duration::ZERO, true).unwrap_err();
    assert!(matches!(bad(&["a:x:0:1:true:0"]), ConfigError::Flag { .. }));
    assert!(matches!(
        bad(&["a:x:zero:1:true:0:0"]),
        ConfigError::Flag { .. }
    ));
    assert!(matches!(
        bad(&["a:x:0:1:maybe:0:0"]),
        ConfigError::Flag { .. }
    ));
    assert!(matches!(
        bad(&["a:x:0:1:true:two:0"]),
        ConfigError::Flag { .. }
    ));
    // `inf` parses (Go's ParseFloat), then fails the [0, 1] range check.
    let e = bad(&["a:x:0:inf:true:0:0"]);
    assert!(
        matches!(
            e,
            ConfigError::Field {
                field: "cpuUtilizationMax",
                ..
            }
        ),
        "{e:?}"
    );
    let e = bad(&["a:x:-inf:1:true:0:0"]);
    assert!(
        matches!(
            e,
            ConfigError::Field {
                field: "cpuUtilizationMin",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(matches!(
        bad(&[":x:0:1:true:0:0"]),
        ConfigError::MissingName { index: 0 }
    ));
    assert!(matches!(
        bad(&["a:x:0:1:true:0:0", "a:y:0:1:true:0:0"]),
        ConfigError::DuplicateName { .. }
    ));
    assert!(matches!(
        bad(&["a:x:0:1:true:3:2"]),
        ConfigError::Field {
            field: "maxNodes",
            ..
        }
    ));
}

// ---- Pipeline ----------------------------------------------------------------------------------

#[test]
fn filters_are_anded() {
    // allocation-rate twice: the intersection of [0.2, 0.8] and [0.5, 1].
    let c = parse(
        "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: \
         {minCPUUtil: 0.2, maxCPUUtil: 0.8}\n  - name: allocation-rate\n    arguments: \
         {minCPUUtil: 0.5, maxCPUUtil: 1}\n",
    );
    let nodes = [
        node("a", 100),
        node("b", 300),
        node("c", 600),
        node("d", 900),
    ];
    assert_eq!(desired(&fresh(&nodes, &c), "s"), ["c"]);
}

#[test]
fn weighted_scores_order_the_selection() {
    // allocation-rate [0,1] weight 1 vs warmup weight 3: a warm node beats any fuller cold one.
    let c = parse(
        "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: \
         {maxCPUUtil: 1}\n  - name: warmup\n    weight: 3\n  - name: node-limit\n    arguments: \
         {maxNodes: 3}\n",
    );
    let nodes = [
        node("cold-full", 1000),
        node("cold-half", 500),
        node("warm-idle", 0).with_label(WARM, "true"),
        node("warm-half", 500).with_label(WARM, "true"),
        node("cold-idle", 0),
    ];
    assert_eq!(
        desired(&fresh(&nodes, &c), "s"),
        ["warm-half", "warm-idle", "cold-full"]
    );
    // Weight 1 on warmup: cold-full (1.0) ties warm-idle (0 + 1); the tie keeps name order.
    let c = parse(
        "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: \
         {maxCPUUtil: 1}\n  - name: warmup\n",
    );
    assert_eq!(
        desired(&fresh(&nodes, &c), "s"),
        [
            "warm-half",
            "cold-full",
            "warm-idle",
            "cold-half",
            "cold-idle"
        ]
    );
}

#[test]
fn scheduler_without_filters_takes_every_remaining_node() {
    let c = parse(
        "schedulerConfigs:\n- name: first\n  policies:\n  - name: allocation-rate\n    \
         arguments: {minCPUUtil: 0.5, maxCPUUtil: 1}\n- name: rest\n  policies:\n  - name: warmup\n",
    );
    let nodes = [
        node("b", 900),
        node("a", 100),
        ShardNode::new("nometrics").with_label(WARM, "true"),
        node("c", 0),
    ];
    let out = fresh(&nodes, &c);
    assert_eq!(desired(&out, "first"), ["b"]);
    // No filter: even the node without metrics; warm first, then name order.
    assert_eq!(desired(&out, "rest"), ["nometrics", "a", "c"]);
}

#[test]
fn overcommitted_nodes_are_clamped_to_full() {
    // Utilisation is capped at 1, so an overcommitted node ties a full one (name order).
    let c = parse(
        "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: \
         {minCPUUtil: 0, maxCPUUtil: 1}\n    weight: 5\n",
    );
    let nodes = [node("z", 1000), node("y", 400), node("x", 3000)];
    assert_eq!(desired(&fresh(&nodes, &c), "s"), ["x", "z", "y"]);
}

#[test]
fn exclusive_in_config_order() {
    // Both schedulers accept everything; the first one's node-limit decides what it takes.
    let c = parse(
        "schedulerConfigs:\n- name: second-in-name-order\n  maxNodes: 2\n  policies:\n  - name: \
         warmup\n- name: a-first-in-name\n  policies:\n  - name: warmup\n",
    );
    let nodes: Vec<ShardNode> = (0..5).map(|i| node(&format!("n{i}"), 0)).collect();
    let out = fresh(&nodes, &c);
    assert_eq!(out[0].scheduler, "second-in-name-order");
    assert_eq!(desired(&out, "second-in-name-order"), ["n0", "n1"]);
    assert_eq!(desired(&out, "a-first-in-name"), ["n2", "n3", "n4"]);
}

#[test]
fn max_nodes_is_global_on_large_clusters() {
    let c = parse(
        "schedulerConfigs:\n- name: agent\n  policies:\n  - name: allocation-rate\n    \
         arguments: {maxCPUUtil: 1}\n  - name: node-limit\n    arguments: {minNodes: 1, \
         maxNodes: 70}\n- name: volcano\n  policies:\n  - name: warmup\n",
    );
    // 120 nodes with distinct utilisations in shuffled name order.
    let nodes: Vec<ShardNode> = (0..120)
        .map(|i| node(&format!("node-{:03}", (i * 37) % 120), i * 8))
        .collect();
    let out = fresh(&nodes, &c);
    let agent = desired(&out, "agent");
    assert_eq!(
        agent.len(),
        70,
        "upstream would give 50 + 20 per batch, or more"
    );
    // The 70 fullest nodes overall (not per batch): util ≥ (120−70)·8/1000.
    let by_name: BTreeMap<&str, &ShardNode> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let min_kept = agent
        .iter()
        .map(|n| by_name[n].cpu_utilization().unwrap())
        .fold(f64::INFINITY, f64::min);
    let max_left = desired(&out, "volcano")
        .iter()
        .map(|n| by_name[n].cpu_utilization().unwrap())
        .fold(0.0, f64::max);
    assert!(min_kept >= max_left, "{min_kept} < {max_left}");
    assert_eq!(desired(&out, "volcano").len(), 50);
}

#[test]
fn empty_cluster() {
    let c = parse(&upstream_example());
    let out = fresh(&[], &c);
    assert_eq!(out.len(), 2);
    for a in &out {
        assert!(a.nodes_desired.is_empty());
        assert!(a.write, "a missing NodeShard is created even when empty");
        assert_eq!(
            a.min_nodes_unmet,
            Some(MinNodesUnmet {
                min_nodes: 1,
                selected: 0
            })
        );
    }
}

#[test]
fn boundary_utilisations() {
    let c = parse(
        "schedulerConfigs:\n- name: s\n  policies:\n  - name: allocation-rate\n    arguments: \
         {minCPUUtil: 0.3, maxCPUUtil: 0.6}\n",
    );
    let nodes = [
        node("lo-out", 294), // 0.29
        node("lo-in", 295),  // rounds to 0.30
        node("lo", 300),
        node("hi", 600),
        node("hi-in", 604),  // rounds to 0.60
        node("hi-out", 605), // rounds to 0.61
    ];
    let out = fresh(&nodes, &c);
    let mut got = desired(&out, "s");
    got.sort_unstable();
    assert_eq!(got, ["hi", "hi-in", "lo", "lo-in"]);
    // [0, 0]: only completely idle nodes.
    let c = parse("schedulerConfigs:\n- name: s\n");
    let nodes = [node("idle", 0), node("tiny", 4), node("some", 5)];
    assert_eq!(desired(&fresh(&nodes, &c), "s"), ["idle", "tiny"]);
    // [1, 1]: only full nodes, overcommitted ones capped at 1.
    let c = parse("schedulerConfigs:\n- {name: s, cpuUtilizationMin: 1, cpuUtilizationMax: 1}\n");
    let nodes = [node("full", 1000), node("over", 3000), node("almost", 990)];
    assert_eq!(desired(&fresh(&nodes, &c), "s"), ["full", "over"]);
}

#[test]
fn duplicate_node_names_count_once() {
    let c = parse("schedulerConfigs:\n- name: s\n  policies:\n  - name: warmup\n");
    let nodes = [node("a", 0), node("a", 0), node("b", 0)];
    assert_eq!(desired(&fresh(&nodes, &c), "s"), ["a", "b"]);
}

#[test]
fn min_nodes_is_reported_not_enforced() {
    let c =
        parse("schedulerConfigs:\n- {name: s, cpuUtilizationMax: 1, minNodes: 3, maxNodes: 5}\n");
    let out = fresh(&[node("a", 0), node("b", 0)], &c);
    assert_eq!(desired(&out, "s"), ["a", "b"]);
    assert_eq!(
        out[0].min_nodes_unmet,
        Some(MinNodesUnmet {
            min_nodes: 3,
            selected: 2
        })
    );
}

// ---- Anti-flap in the pipeline -----------------------------------------------------------------

fn current(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.iter().map(|s| (*s).to_owned()).collect()))
        .collect()
}

#[test]
fn anti_flap_keeps_a_nearly_equal_current_list() {
    let c = parse(
        "schedulerConfigs:\n- name: a\n  policies:\n  - name: allocation-rate\n    arguments: \
         {maxCPUUtil: 1}\n  - name: node-limit\n    arguments: {maxNodes: 20}\n- name: b\n  \
         policies:\n  - name: warmup\n",
    );
    let nodes: Vec<ShardNode> = (0..30).map(|i| node(&format!("n{i:02}"), i * 10)).collect();
    let computed = fresh(&nodes, &c);
    let top: Vec<String> = computed[0].nodes_desired.clone();
    assert_eq!(top.len(), 20);
    // Current differs by one node (1 < max(1, 20/10) = 2): kept, no write.
    let mut cur_a: Vec<String> = top.clone();
    let swapped_out = cur_a.pop().unwrap();
    cur_a.push("n00".into());
    let mut cur = BTreeMap::from([("a".to_owned(), cur_a.clone())]);
    let out = assign(&nodes, &c, &cur);
    assert!(out[0].kept_current && !out[0].write);
    assert_eq!(out[0].nodes_desired, cur_a);
    // Exclusivity follows the kept list: b gets the swapped-out node, not n00.
    assert!(out[1].nodes_desired.contains(&swapped_out));
    assert!(!out[1].nodes_desired.iter().any(|n| n == "n00"));
    assert_eq!(out[1].nodes_desired.len(), 10);

    // Two swapped: updated.
    let mut cur_a2 = top.clone();
    cur_a2.truncate(18);
    cur_a2.extend(["n00".to_owned(), "n01".to_owned()]);
    cur.insert("a".into(), cur_a2);
    let out = assign(&nodes, &c, &cur);
    assert!(!out[0].kept_current && out[0].write);
    assert_eq!(out[0].nodes_desired, top);

    // Same set, other order: kept, nothing to write.
    let mut reordered = top.clone();
    reordered.reverse();
    let out = assign(&nodes, &c, &BTreeMap::from([("a".to_owned(), reordered)]));
    assert!(out[0].kept_current && !out[0].write);
}

#[test]
fn anti_flap_never_keeps_unavailable_nodes() {
    let c = parse(
        "schedulerConfigs:\n- name: a\n  policies:\n  - name: allocation-rate\n    arguments: \
         {maxCPUUtil: 1}\n- name: b\n  policies:\n  - name: warmup\n",
    );
    let nodes: Vec<ShardNode> = (0..20).map(|i| node(&format!("n{i:02}"), 0)).collect();
    // a: everything. b's current list holds a node a now owns, plus one that is gone.
    let cur = current(&[("b", &["n03", "gone"])]);
    let out = assign(&nodes, &c, &cur);
    assert_eq!(out[0].nodes_desired.len(), 20);
    assert!(out[1].nodes_desired.is_empty());
    assert!(!out[1].kept_current && out[1].write);
    // A current list naming a deleted node is rewritten even when the length matches.
    let cur = current(&[(
        "a",
        &[
            "n00", "n01", "n02", "n03", "n04", "n05", "n06", "n07", "n08", "n09", "n10", "n11",
            "n12", "n13", "n14", "n15", "n16", "n17", "n18", "gone",
        ],
    )]);
    let out = assign(&nodes, &c, &cur);
    assert!(!out[0].kept_current && out[0].write);
    assert!(!out[0].nodes_desired.iter().any(|n| n == "gone"));
}
