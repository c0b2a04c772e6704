//! Conversion tests: Kubernetes' effective-request rule, selector and toleration semantics,
//! and rejection of malformed input.

use super::pod::compile_port;
use super::selector::{compile_requirement, compile_term};
use super::*;

fn c(reqs: &[(&str, &str)]) -> ContainerInput {
    ContainerInput {
        requests: reqs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

fn pod(containers: Vec<ContainerInput>, init: Vec<ContainerInput>) -> PodInput {
    PodInput {
        uid: "u1".into(),
        namespace: "ns".into(),
        name: "p".into(),
        containers,
        init_containers: init,
        ..Default::default()
    }
}

fn compile(p: &PodInput) -> CompiledPod {
    compile_pod(
        p,
        &mut Interner::default(),
        &mut ResourceRegistry::default(),
    )
    .unwrap()
}

#[test]
fn effective_request_sums_containers_and_counts_one_pod() {
    let p = compile(&pod(
        vec![
            c(&[("cpu", "100m"), ("memory", "1Gi")]),
            c(&[("cpu", "200m")]),
        ],
        vec![],
    ));
    assert_eq!(p.request(CPU), 300);
    assert_eq!(p.request(MEMORY), 1 << 30);
    assert_eq!(p.request(PODS), 1);
}

#[test]
fn init_container_max_wins_when_larger() {
    // Regular: 300m; init container alone needs 1 CPU: the pod needs 1 CPU.
    let p = compile(&pod(vec![c(&[("cpu", "300m")])], vec![c(&[("cpu", "1")])]));
    assert_eq!(p.request(CPU), 1000);
    let p = compile(&pod(vec![c(&[("cpu", "2")])], vec![c(&[("cpu", "1")])]));
    assert_eq!(p.request(CPU), 2000);
}

#[test]
fn sidecars_add_to_regular_and_to_later_init_steps() {
    let mut sidecar = c(&[("cpu", "500m")]);
    sidecar.restartable = true;
    // init order: sidecar(500m), init(1) -> step = 1.5; regular 1 + sidecar 0.5 = 1.5.
    let p = compile(&pod(
        vec![c(&[("cpu", "1")])],
        vec![sidecar.clone(), c(&[("cpu", "1")])],
    ));
    assert_eq!(p.request(CPU), 1500);
    // init before the sidecar does not see it: max(2, 0.2+0.5=0.7) = 2 for init; regular 0.7.
    let p = compile(&pod(
        vec![c(&[("cpu", "200m")])],
        vec![c(&[("cpu", "2")]), sidecar],
    ));
    assert_eq!(p.request(CPU), 2000);
}

fn resized(
    spec: &[(&str, &str)],
    actuated: &[(&str, &str)],
    allocated: &[(&str, &str)],
) -> ContainerInput {
    let list = |l: &[(&str, &str)]| {
        l.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    ContainerInput {
        status: Some(ContainerStatusInput {
            requests: list(actuated),
            allocated: list(allocated),
        }),
        ..c(spec)
    }
}

/// In-place resize, as `resourcehelper.determineContainerReqs`: a pending or in-progress resize
/// counts the larger of spec, actuated and allocated; an infeasible one what the node holds.
#[test]
fn a_resizing_container_counts_the_larger_of_spec_and_what_it_holds() {
    // Scaled down in spec, not yet actuated: still 1 CPU.
    let down = resized(&[("cpu", "200m")], &[("cpu", "1")], &[("cpu", "1")]);
    assert_eq!(compile(&pod(vec![down.clone()], vec![])).request(CPU), 1000);
    // Actuated: 200m.
    let done = resized(&[("cpu", "200m")], &[("cpu", "200m")], &[("cpu", "200m")]);
    assert_eq!(compile(&pod(vec![done], vec![])).request(CPU), 200);
    // Scaled up, allocated but not actuated: the new 2 CPU count at once.
    let up = resized(&[("cpu", "2")], &[("cpu", "1")], &[("cpu", "2")]);
    assert_eq!(compile(&pod(vec![up.clone()], vec![])).request(CPU), 2000);
    // Infeasible: the 2 CPU asked are not held; 1 CPU is.
    let mut infeasible = pod(
        vec![resized(&[("cpu", "2")], &[("cpu", "1")], &[("cpu", "1")])],
        vec![],
    );
    infeasible.resize_infeasible = true;
    assert_eq!(compile(&infeasible).request(CPU), 1000);
    // A container without status resources counts its spec, sidecars included.
    let mut sidecar = resized(&[("cpu", "100m")], &[("cpu", "500m")], &[]);
    sidecar.restartable = true;
    let p = compile(&pod(vec![c(&[("cpu", "1")])], vec![sidecar]));
    assert_eq!(p.request(CPU), 1500);
    // The non-zero defaults fill in only what no list names: memory is named by the status.
    let mem = resized(&[("cpu", "1")], &[("memory", "0")], &[]);
    let p = compile(&pod(vec![mem], vec![]));
    assert_eq!(p.nonzero_memory, 0);
    assert_eq!(p.nonzero_cpu, 1000);
}

#[test]
fn overhead_and_extended_resources() {
    let mut p = pod(vec![c(&[("cpu", "1"), ("nvidia.com/gpu", "2")])], vec![]);
    p.overhead = vec![
        ("cpu".into(), "250m".into()),
        ("memory".into(), "120Mi".into()),
    ];
    let mut reg = ResourceRegistry::default();
    // A node offers the GPU (pods only look names up).
    let gpu = reg.slot("nvidia.com/gpu").unwrap();
    let cp = compile_pod(&p, &mut Interner::default(), &mut reg).unwrap();
    assert_eq!(cp.request(CPU), 1250);
    assert_eq!(cp.request(MEMORY), 120 << 20);
    assert_eq!(cp.request(gpu), 2);
}

#[test]
fn requests_default_to_limits() {
    let mut ctr = c(&[]);
    ctr.limits = vec![("cpu".into(), "2".into()), ("memory".into(), "1Gi".into())];
    let p = compile(&pod(vec![ctr], vec![]));
    assert_eq!(p.request(CPU), 2000);
    assert_eq!(p.request(MEMORY), 1 << 30);
}

#[test]
fn nonzero_defaults_apply_only_to_scoring() {
    let p = compile(&pod(vec![c(&[])], vec![]));
    assert_eq!(p.request(CPU), 0);
    assert_eq!(p.nonzero_cpu, DEFAULT_NONZERO_MILLI_CPU);
    assert_eq!(p.nonzero_memory, DEFAULT_NONZERO_MEMORY);
    let p = compile(&pod(vec![c(&[("cpu", "0")])], vec![]));
    assert_eq!(p.nonzero_cpu, 0, "an explicit zero request is kept as zero");
}

#[test]
fn rejects_bad_quantities_and_names() {
    let mut reg = ResourceRegistry::default();
    let mut i = Interner::default();
    for bad in [
        pod(vec![c(&[("cpu", "-1")])], vec![]),
        pod(vec![c(&[("memory", "lots")])], vec![]),
        pod(vec![c(&[("bad name!", "1")])], vec![]),
        pod(vec![c(&[("cpu", "1e30")])], vec![]),
    ] {
        assert!(compile_pod(&bad, &mut i, &mut reg).is_err(), "{bad:?}");
    }
}

#[test]
fn too_many_offered_resources_is_a_typed_error() {
    let mut reg = ResourceRegistry::default();
    for n in 0..(MAX_OFFERED_RESOURCES - 4) {
        reg.slot(&format!("example.com/r{n}")).unwrap();
    }
    assert!(matches!(
        reg.slot("example.com/one-more"),
        Err(ModelError::TooManyResources { .. })
    ));
    // Pods' requests never count against it.
    let s = reg.pod_slot("example.com/one-more").unwrap();
    assert!(ResourceRegistry::is_requested_only(s));
}

#[test]
fn a_name_no_node_offers_gets_a_requested_only_slot_until_one_does() {
    let mut reg = ResourceRegistry::default();
    let mut i = Interner::default();
    let p = pod(vec![c(&[("cpu", "1"), ("example.com/x", "2")])], vec![]);
    let cp = compile_pod(&p, &mut i, &mut reg).unwrap();
    assert_eq!(reg.len(), 4, "a pod's request takes no offered slot");
    assert!(cp.requests_unoffered);
    let x = cp
        .requests
        .iter()
        .find(|&&(s, _)| ResourceRegistry::is_requested_only(s))
        .unwrap()
        .0;
    assert_eq!(reg.name(x), "example.com/x");
    assert!(cp.reresolved(&reg).is_none(), "nothing changed");
    let offered = reg.slot("example.com/x").unwrap();
    let again = cp.reresolved(&reg).unwrap();
    assert!(!again.requests_unoffered);
    assert_eq!(again.request(offered), 2);
    assert_eq!(again.request(CPU), 1000);
    // Compiled after a node offers it: the offered slot directly.
    let cp = compile_pod(&p, &mut i, &mut reg).unwrap();
    assert!(!cp.requests_unoffered);
    assert_eq!(cp.request(offered), 2);
}

fn node(name: &str, labels: &[(&str, &str)], i: &mut Interner) -> NodeMeta {
    let input = NodeInput {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    (*compile_node(&input, i, &mut ResourceRegistry::default())
        .unwrap()
        .meta)
        .clone()
}

fn req(key: &str, op: &str, values: &[&str]) -> SelectorRequirementInput {
    SelectorRequirementInput {
        key: key.into(),
        operator: op.into(),
        values: values.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn every_affinity_operator() {
    let mut i = Interner::default();
    let n = node("n1", &[("zone", "a"), ("gen", "5")], &mut i);
    let cases = [
        (req("zone", "In", &["a", "b"]), true),
        (req("zone", "In", &["b"]), false),
        (req("zone", "NotIn", &["b"]), true),
        (req("zone", "NotIn", &["a"]), false),
        (req("missing", "NotIn", &["a"]), true),
        (req("zone", "Exists", &[]), true),
        (req("missing", "Exists", &[]), false),
        (req("missing", "DoesNotExist", &[]), true),
        (req("zone", "DoesNotExist", &[]), false),
        (req("gen", "Gt", &["4"]), true),
        (req("gen", "Gt", &["5"]), false),
        (req("gen", "Lt", &["6"]), true),
        (req("gen", "Lt", &["5"]), false),
        (req("zone", "Gt", &["1"]), false),
        (req("missing", "Lt", &["10"]), false),
    ];
    for (r, want) in cases {
        let term = SelectorTermInput {
            match_expressions: vec![r.clone()],
            match_fields: vec![],
        };
        let t = compile_term(&term, &mut i).unwrap();
        assert_eq!(t.matches(&n), want, "{r:?}");
    }
}

#[test]
fn match_fields_on_metadata_name() {
    let mut i = Interner::default();
    let n1 = node("n1", &[], &mut i);
    let n2 = node("n2", &[], &mut i);
    let term = SelectorTermInput {
        match_expressions: vec![],
        match_fields: vec![req("metadata.name", "In", &["n1"])],
    };
    let t = compile_term(&term, &mut i).unwrap();
    assert!(t.matches(&n1));
    assert!(!t.matches(&n2));
    let bad = SelectorTermInput {
        match_expressions: vec![],
        match_fields: vec![req("metadata.labels", "In", &["x"])],
    };
    assert!(matches!(
        compile_term(&bad, &mut i),
        Err(ModelError::FieldSelectorKey(_))
    ));
    let bad = SelectorTermInput {
        match_expressions: vec![],
        match_fields: vec![req("metadata.name", "Exists", &[])],
    };
    assert!(compile_term(&bad, &mut i).is_err());
}

#[test]
fn empty_term_matches_nothing() {
    let mut i = Interner::default();
    let n = node("n1", &[("a", "b")], &mut i);
    let t = compile_term(&SelectorTermInput::default(), &mut i).unwrap();
    assert!(!t.matches(&n));
}

#[test]
fn invalid_operators_and_values_are_rejected() {
    let mut i = Interner::default();
    for r in [
        req("k", "Like", &["x"]),
        req("k", "In", &[]),
        req("k", "Exists", &["x"]),
        req("k", "Gt", &["x"]),
        req("k", "Gt", &["1", "2"]),
        req("", "Exists", &[]),
    ] {
        assert!(compile_requirement(&r, &mut i).is_err(), "{r:?}");
    }
}

#[test]
fn toleration_semantics() {
    let mut i = Interner::default();
    let taint = Taint {
        key: i.intern("gpu"),
        value: i.intern("true"),
        effect: TaintEffect::NoSchedule,
    };
    let tol = |k: &str, op: &str, v: &str, e: &str, i: &mut Interner| {
        compile_toleration(
            &TolerationInput {
                key: k.into(),
                operator: op.into(),
                value: v.into(),
                effect: e.into(),
            },
            i,
        )
        .unwrap()
    };
    assert!(tol("gpu", "Equal", "true", "NoSchedule", &mut i).tolerates(&taint));
    assert!(tol("gpu", "", "true", "", &mut i).tolerates(&taint));
    assert!(!tol("gpu", "Equal", "false", "", &mut i).tolerates(&taint));
    assert!(tol("gpu", "Exists", "", "", &mut i).tolerates(&taint));
    assert!(!tol("gpu", "Exists", "", "NoExecute", &mut i).tolerates(&taint));
    assert!(tol("", "Exists", "", "", &mut i).tolerates(&taint));
    assert!(!tol("other", "Exists", "", "", &mut i).tolerates(&taint));
    let bad = TolerationInput {
        key: "k".into(),
        operator: "Maybe".into(),
        ..Default::default()
    };
    assert!(compile_toleration(&bad, &mut i).is_err());
    let bad = TolerationInput {
        key: "".into(),
        operator: "Equal".into(),
        ..Default::default()
    };
    assert!(compile_toleration(&bad, &mut i).is_err());
    let bad = TolerationInput {
        key: "k".into(),
        operator: "Exists".into(),
        value: "v".into(),
        ..Default::default()
    };
    assert!(compile_toleration(&bad, &mut i).is_err());
}

#[test]
fn host_ports_validated_and_conflict_rule() {
    let mut i = Interner::default();
    let p = |port, proto: &str, ip: &str, i: &mut Interner| {
        compile_port(
            &PortInput {
                host_port: port,
                protocol: proto.into(),
                host_ip: ip.into(),
            },
            i,
        )
    };
    assert_eq!(p(0, "TCP", "", &mut i).unwrap(), None);
    assert!(p(70000, "TCP", "", &mut i).is_err());
    assert!(p(-1, "TCP", "", &mut i).is_err());
    assert!(p(80, "ICMP", "", &mut i).is_err());
    let any = p(80, "TCP", "", &mut i).unwrap().unwrap();
    let ip1 = p(80, "TCP", "10.0.0.1", &mut i).unwrap().unwrap();
    let ip2 = p(80, "TCP", "10.0.0.2", &mut i).unwrap().unwrap();
    let udp = p(80, "UDP", "", &mut i).unwrap().unwrap();
    assert!(any.conflicts(&ip1));
    assert!(!ip1.conflicts(&ip2));
    assert!(ip1.conflicts(&ip1));
    assert!(!any.conflicts(&udp));
}

#[test]
fn node_allocatable_falls_back_to_capacity() {
    let input = NodeInput {
        name: "n".into(),
        allocatable: vec![("cpu".into(), "31".into())],
        capacity: vec![("cpu".into(), "32".into()), ("memory".into(), "1Gi".into())],
        ..Default::default()
    };
    let n = compile_node(
        &input,
        &mut Interner::default(),
        &mut ResourceRegistry::default(),
    )
    .unwrap();
    assert_eq!(get(&n.allocatable, CPU), 31_000);
    assert_eq!(get(&n.allocatable, MEMORY), 1 << 30);
    let bad = NodeInput {
        name: "n".into(),
        taints: vec![TaintInput {
            key: "k".into(),
            value: "".into(),
            effect: "Sometimes".into(),
        }],
        ..Default::default()
    };
    assert!(
        compile_node(
            &bad,
            &mut Interner::default(),
            &mut ResourceRegistry::default()
        )
        .is_err()
    );
}

#[test]
fn scheduling_priority_annotation_like_upstream() {
    assert_eq!(parse_scheduling_priority(Some("100")), 100);
    assert_eq!(parse_scheduling_priority(Some("x")), 0);
    assert_eq!(parse_scheduling_priority(None), 0);
}

#[test]
fn gates_and_unschedulable_toleration_precomputed() {
    let mut p = pod(vec![c(&[])], vec![]);
    p.scheduling_gates = vec!["example.com/wait".into()];
    p.tolerations = vec![TolerationInput {
        key: UNSCHEDULABLE_TAINT_KEY.into(),
        operator: "Exists".into(),
        ..Default::default()
    }];
    let cp = compile(&p);
    assert!(cp.gated);
    assert!(cp.tolerates_unschedulable);
}

// ---------------------------------------------------------------------------------------------
// Pod-level resources (`pod::resources`)
// ---------------------------------------------------------------------------------------------

fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn pod_level(mut p: PodInput, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> PodInput {
    p.resources = Some(PodResourcesInput {
        requests: kv(requests),
        limits: kv(limits),
        ..Default::default()
    });
    p
}

#[test]
fn pod_level_requests_replace_the_containers_aggregate_for_cpu_and_memory() {
    // The over-commit cases: pod-level 2500m / 5Gi count, whatever the containers ask.
    let p = compile(&pod_level(
        pod(vec![c(&[("cpu", "100m"), ("memory", "64Mi")])], vec![]),
        &[("cpu", "2500m"), ("memory", "5Gi")],
        &[],
    ));
    assert_eq!(p.request(CPU), 2500);
    assert_eq!(p.request(MEMORY), 5 << 30);
    assert_eq!((p.nonzero_cpu, p.nonzero_memory), (2500, 5 << 30));
    // Containers without requests at all: the pod-level values, not the scorers' defaults.
    let p = compile(&pod_level(
        pod(vec![c(&[])], vec![]),
        &[("cpu", "1500m")],
        &[],
    ));
    assert_eq!(p.request(CPU), 1500);
    assert_eq!(p.nonzero_cpu, 1500);
    assert_eq!(p.request(MEMORY), 0);
    assert_eq!(
        p.nonzero_memory, DEFAULT_NONZERO_MEMORY,
        "memory has no pod-level request: the containers' non-zero default stays"
    );
}

#[test]
fn pod_level_requests_then_overhead_other_resources_from_the_containers() {
    let mut input = pod_level(
        pod(
            vec![c(&[
                ("cpu", "200m"),
                ("ephemeral-storage", "1Gi"),
                ("example.com/nic", "1"),
            ])],
            vec![c(&[("cpu", "3")])],
        ),
        &[("cpu", "1500m")],
        &[("cpu", "2")],
    );
    input.overhead = kv(&[("cpu", "600m"), ("memory", "100Mi")]);
    let mut reg = ResourceRegistry::default();
    let nic = reg.slot("example.com/nic").unwrap();
    // The init container's 3 CPUs exceed the pod-level 1500m: the API server refuses that, and
    // so does the engine, with the server's text.
    let err = compile_pod(&input, &mut Interner::default(), &mut reg).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.resources.requests[cpu]: Invalid value: \"1500m\": must be greater than or equal to \
         aggregate container requests of 3"
    );
    input.init_containers.clear();
    let p = compile_pod(&input, &mut Interner::default(), &mut reg).unwrap();
    assert_eq!(p.request(CPU), 2100, "pod-level 1500m plus 600m overhead");
    assert_eq!(p.request(MEMORY), 100 << 20, "only the overhead");
    assert_eq!(p.request(EPHEMERAL_STORAGE), 1 << 30);
    assert_eq!(p.request(nic), 1);
}

#[test]
fn pod_level_hugepages_and_zero_requests() {
    let mut reg = ResourceRegistry::default();
    let huge = reg.slot("hugepages-2Mi").unwrap();
    let input = pod_level(
        pod(vec![c(&[("hugepages-2Mi", "2Mi"), ("cpu", "1")])], vec![]),
        &[("hugepages-2Mi", "8Mi"), ("cpu", "0"), ("memory", "1Gi")],
        &[("hugepages-2Mi", "8Mi"), ("cpu", "1")],
    );
    // cpu: a pod-level request of 0 below the containers' 1 is refused by the server.
    let err = compile_pod(&input, &mut Interner::default(), &mut reg).unwrap_err();
    assert!(
        err.to_string()
            .contains("aggregate container requests of 1"),
        "{err}"
    );
    let input = pod_level(
        pod(vec![c(&[("hugepages-2Mi", "2Mi")])], vec![]),
        &[("hugepages-2Mi", "8Mi"), ("cpu", "0"), ("memory", "1Gi")],
        &[("hugepages-2Mi", "8Mi")],
    );
    let p = compile_pod(&input, &mut Interner::default(), &mut reg).unwrap();
    assert_eq!(p.request(huge), 8 << 20);
    assert_eq!(p.request(CPU), 0);
    assert_eq!(
        p.nonzero_cpu, 0,
        "an explicit pod-level zero is kept for scoring"
    );
}

#[test]
fn pod_level_validation_matches_the_api_servers_causes_and_order() {
    // The request recorded in shared/upstream/apiserver-1.36/pod-level-resources-invalid-response.json.
    let input = pod_level(
        pod(vec![c(&[("cpu", "2")]), c(&[("cpu", "1")])], vec![]),
        &[("cpu", "2"), ("nvidia.com/gpu", "1")],
        &[("cpu", "1")],
    );
    let err = compile_pod(
        &input,
        &mut Interner::default(),
        &mut ResourceRegistry::default(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ModelError::PodResources(vec![
            "spec.resources.requests: Invalid value: \"2\": must be less than or equal to cpu \
             limit of 1"
                .into(),
            "spec.resources.requests[nvidia.com/gpu]: Unsupported value: \"nvidia.com/gpu\": \
             supported values: \"cpu\", \"hugepages-\", \"memory\""
                .into(),
            "spec.resources.limits: Required value: Limit must be set for non overcommitable \
             resources"
                .into(),
            "spec.resources.requests[cpu]: Invalid value: \"2\": must be greater than or equal to \
             aggregate container requests of 3"
                .into(),
        ])
    );
    assert!(err.to_string().starts_with("[spec.resources.requests: "));
    // Container limits above the pod's, huge pages without cpu or memory.
    let mut ctr = c(&[("memory", "1Gi")]);
    ctr.limits = kv(&[("memory", "3Gi")]);
    let bad = pod_level(pod(vec![ctr], vec![]), &[], &[("memory", "2Gi")]);
    let err = compile_pod(
        &bad,
        &mut Interner::default(),
        &mut ResourceRegistry::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.resources.containers[0][memory].limits: Invalid value: \"3Gi\": must be less than \
         or equal to pod limits of 2Gi"
    );
    let bad = pod_level(pod(vec![c(&[])], vec![]), &[], &[("hugepages-2Mi", "3Mi")]);
    let err = compile_pod(
        &bad,
        &mut Interner::default(),
        &mut ResourceRegistry::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "[spec.resources.limits[hugepages-2Mi]: Invalid value: \"3Mi\": 3Mi is not positive \
         integer multiple of hugepages-2Mi, spec.resources: Forbidden: HugePages require cpu or \
         memory]"
    );
}

#[test]
fn pod_level_in_place_resize_counts_the_larger_of_spec_and_what_the_pod_holds() {
    let resized = |status: &[(&str, &str)], allocated: &[(&str, &str)], infeasible: bool| {
        let mut p = pod_level(pod(vec![c(&[])], vec![]), &[("cpu", "1")], &[]);
        p.overhead = kv(&[("cpu", "100m")]);
        let r = p.resources.as_mut().unwrap();
        r.status_requests = Some(kv(status));
        r.allocated = Some(kv(allocated));
        p.resize_infeasible = infeasible;
        compile(&p).request(CPU)
    };
    // Scaling up to 1 CPU, the kubelet still holds 2100m (overhead included): 2 + 0.1.
    assert_eq!(
        resized(&[("cpu", "2100m")], &[("cpu", "2100m")], false),
        2100
    );
    // Scaling down from 500m to 1: the spec wins.
    assert_eq!(resized(&[("cpu", "600m")], &[("cpu", "600m")], false), 1100);
    // Infeasible: what it holds, whatever the spec asks.
    assert_eq!(resized(&[("cpu", "600m")], &[("cpu", "600m")], true), 600);
}

/// A pod's own selectors make their keys selectable before its labels are split, so it finds
/// its own labels interned; a namespace selector reads namespaces' labels and makes no pod
/// label key selectable; a label no selector reads stays a string, and a selector compiled
/// later leaves the pod stale until it is converted.
#[test]
fn a_pods_labels_are_interned_for_the_keys_selectors_read() {
    let mut interner = Interner::default();
    let mut registry = ResourceRegistry::default();
    let selector = |k: &str| LabelSelectorInput {
        match_labels: vec![(k.into(), "a".into())],
        match_expressions: vec![],
    };
    let mut p = PodInput {
        uid: "u".into(),
        name: "p".into(),
        namespace: "ns".into(),
        labels: vec![
            ("app".into(), "a".into()),
            ("team".into(), "a".into()),
            ("id".into(), "x1".into()),
        ],
        ..Default::default()
    };
    p.pod_affinity = Some(PodAffinityInput {
        required_anti: vec![PodAffinityTermInput {
            label_selector: Some(selector("app")),
            namespace_selector: Some(selector("team")),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    let c = compile_pod(&p, &mut interner, &mut registry).unwrap();
    let key = |i: &Interner, k: &str| i.get(k).unwrap();
    let app = key(&interner, "app");
    assert_eq!(c.info.labels.len(), 1, "app only: {:?}", c.info.labels);
    assert_eq!(c.info.labels[0].0, app);
    assert!(
        !interner.is_selectable(key(&interner, "team")),
        "a namespace selector's key"
    );
    assert_eq!(c.info.raw.len(), 2);
    assert!(
        interner.get("x1").is_none(),
        "a value no selector reads is not interned"
    );
    assert!(!c.info.stale(interner.label_epoch()));
    // A selector reading `id`, compiled later: the pod is stale until converted.
    compile_selector(Some(&selector("id")), &mut interner).unwrap();
    assert!(c.info.stale(interner.label_epoch()));
    assert!(c.info.has_selectable_raw(&interner));
    let converted = c.info.converted(&mut interner);
    assert!(!converted.stale(interner.label_epoch()));
    assert_eq!(converted.labels.len(), 2);
    assert_eq!(
        label_value(&converted.labels, key(&interner, "id")),
        interner.get("x1")
    );
    assert_eq!(converted.raw.len(), 1, "team stays a string");
}
