//! Micro-benchmarks of the engine's hot paths (criterion; `cargo bench -p magma-perf`):
//!
//! - `allocate/*`: the allocate action (filter + score) for one pod on a 5k-node snapshot, as a
//!   full scan and with the default sampling, and in hard sharding mode on a 500-node shard
//!   (every tenth node; full scan of the shard). Throughput is in nodes, so criterion's
//!   "elements/s" is nodes filtered and scored per second; per-node cost = time / nodes.
//! - `publish/*`: change 1 or 64 nodes of a 10k-node cache (a pod bound or removed on each,
//!   spread over different chunks) and publish the next snapshot while the previous one is still
//!   held, as workers hold it (DESIGN.md §6: ≤ 50 µs per publication at 10k nodes).
//! - `claim/*`: `BindVersions::try_claim`, succeeding and conflicting.
//! - `preemption/*`: one DefaultPreemption attempt in the driver on 5k nodes laid out as
//!   upstream's PreemptionAsync (4-CPU nodes, each with four 900m pods of priority 0): a
//!   3-CPU pod of priority 10 finding its node and victims (`preemption::plan`, every node a
//!   potential one, 500 candidates sought), and a 3-CPU pod of priority 0 finding none and
//!   writing upstream's message (`plan` then `no_plan_message`).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use magma_engine::allocate::{Backlog, Decision, Scratch, allocate};
use magma_engine::binder::BindVersions;
use magma_engine::cache::Cache;
use magma_engine::conf::{Profile, Sampling};
use magma_engine::model::CompiledPod;
use magma_engine::shard::{NodeSet, View};
use magma_perf::plan::{NodeShape, node, pod};
use std::hint::black_box;
use std::sync::Arc;

fn cache_with(nodes: usize, profile: Profile) -> (Cache, Arc<BindVersions>) {
    let versions = Arc::new(BindVersions::default());
    let mut cache = Cache::new(versions.clone(), Arc::new(profile));
    for i in 0..nodes {
        cache
            .apply_node(&node(format!("node-{i:05}"), NodeShape::default()), 0)
            .expect("valid node");
    }
    (cache, versions)
}

fn compiled(cache: &mut Cache, name: String, on: Option<&str>) -> CompiledPod {
    let mut input = pod(name, 250, 512 << 20);
    input.node_name = on.map(str::to_owned);
    cache.compile_pod(&input).expect("valid pod")
}

fn bench_allocate(c: &mut Criterion) {
    const NODES: usize = 5_000;
    let mut g = c.benchmark_group("allocate");
    let full = Sampling {
        percentage_nodes_to_find: 100,
        ..Sampling::default()
    };
    for (name, sampling, shard) in [
        ("5k-nodes-full-scan", full, None),
        ("5k-nodes-default-sampling", Sampling::default(), None),
        ("5k-nodes-hard-shard-500-full-scan", full, Some(10)),
    ] {
        let profile = Profile {
            sampling,
            ..Profile::default()
        };
        let (mut cache, versions) = cache_with(NODES, profile);
        // Uneven usage, so scores differ from node to node.
        for i in 0..NODES {
            for j in 0..(i % 7) {
                let p = compiled(&mut cache, format!("used-{i}-{j}"), None);
                cache.apply_bound_pod(&p, &format!("node-{i:05}"), false);
            }
        }
        let mut scanned = NODES;
        if let Some(every) = shard {
            let slots: Vec<u32> = (0..NODES)
                .step_by(every)
                .filter_map(|i| cache.node_slot(&format!("node-{i:05}")))
                .collect();
            scanned = slots.len();
            cache.set_view(View::Only(Arc::new(NodeSet::from_slots(slots))));
        }
        let snap = cache.publish().expect("a first snapshot");
        let p = compiled(&mut cache, "probe".into(), None);
        let mut scratch = Scratch::new(1);
        g.throughput(Throughput::Elements(sampling.nodes_to_find(scanned) as u64));
        g.bench_function(name, |b| {
            b.iter(|| {
                let d = allocate(
                    &snap,
                    black_box(&p),
                    None,
                    None,
                    None,
                    &versions,
                    Backlog::default(),
                    &mut scratch,
                );
                debug_assert_eq!(d, Decision::Candidates);
                black_box(d)
            })
        });
    }
    g.finish();
}

fn bench_publish(c: &mut Criterion) {
    const NODES: usize = 10_000;
    let mut g = c.benchmark_group("publish");
    for changed in [1usize, 64] {
        let (mut cache, _versions) = cache_with(NODES, Profile::default());
        let mut held = cache.publish().expect("a first snapshot");
        // One pod per changed node, alternately bound and removed; nodes `NODES / changed`
        // apart, so 64 changes touch 64 different chunks (the worst case).
        let stride = NODES / changed;
        let targets: Vec<(CompiledPod, String)> = (0..changed)
            .map(|j| {
                let n = format!("node-{:05}", j * stride);
                (compiled(&mut cache, format!("churn-{j}"), Some(&n)), n)
            })
            .collect();
        let mut placed = false;
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("10k-nodes-{changed}-changed"), |b| {
            b.iter(|| {
                for (p, n) in &targets {
                    if placed {
                        cache.remove_pod(&p.uid);
                    } else {
                        cache.apply_bound_pod(p, n, false);
                    }
                }
                placed = !placed;
                held = cache.publish().expect("something changed");
                black_box(held.seq)
            })
        });
    }
    g.finish();
}

fn bench_claim(c: &mut Criterion) {
    let versions = BindVersions::default();
    for s in 0..1024 {
        versions.ensure(s);
        // Start every counter above 0 so the conflicting claim below never expects u64::MAX.
        assert!(versions.try_claim(s, 0));
    }
    let mut g = c.benchmark_group("claim");
    let mut slot = 0usize;
    g.bench_function("try_claim-success", |b| {
        b.iter(|| {
            slot = (slot + 1) & 1023;
            let v = versions.current(slot);
            black_box(versions.try_claim(black_box(slot), v))
        })
    });
    g.bench_function("try_claim-conflict", |b| {
        b.iter(|| {
            slot = (slot + 1) & 1023;
            let v = versions.current(slot);
            black_box(versions.try_claim(black_box(slot), v.wrapping_sub(1)))
        })
    });
    g.finish();
}

fn bench_preemption(c: &mut Criterion) {
    use magma_engine::allocate::FailureSummary;
    use magma_engine::preemption::{no_plan_message, plan};
    const NODES: usize = 5_000;
    let mut g = c.benchmark_group("preemption");
    let versions = Arc::new(BindVersions::default());
    let mut cache = Cache::new(versions, Arc::new(Profile::default()));
    let shape = NodeShape {
        cpu_milli: 4_000,
        ..NodeShape::default()
    };
    for i in 0..NODES {
        let name = format!("node-{i:05}");
        cache
            .apply_node(&node(name.clone(), shape), 0)
            .expect("valid node");
        for j in 0..4 {
            let p = cache
                .compile_pod(&pod(format!("low-{i}-{j}"), 900, 500 << 20))
                .expect("valid pod");
            cache.apply_bound_pod(&p, &name, false);
        }
    }
    cache.publish();
    // What the worker's failed attempt reports: every node one where removing pods may help.
    let summary = FailureSummary {
        nodes: NODES,
        resolvable: (0..NODES)
            .filter_map(|i| cache.node_slot(&format!("node-{i:05}")))
            .collect(),
        ..FailureSummary::default()
    };
    let mut high = pod("high".into(), 3_000, 500 << 20);
    high.priority = 10;
    let high = cache.compile_pod(&high).expect("valid pod");
    let equal = cache
        .compile_pod(&pod("equal".into(), 3_000, 500 << 20))
        .expect("valid pod");
    g.bench_function("5k-nodes-victims-found", |b| {
        let mut offset = 0;
        b.iter(|| {
            offset += 1;
            let p = plan(
                &cache,
                black_box(&high),
                None,
                None,
                &summary.resolvable,
                offset,
            );
            debug_assert_eq!(p.as_ref().map(|p| p.victims.len()), Some(3));
            black_box(p)
        })
    });
    g.bench_function("5k-nodes-none-with-message", |b| {
        b.iter(|| {
            let p = plan(
                &cache,
                black_box(&equal),
                None,
                None,
                &summary.resolvable,
                0,
            );
            debug_assert!(p.is_none());
            black_box(no_plan_message(&cache, &summary, &equal, None, None))
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    bench_allocate,
    bench_publish,
    bench_claim,
    bench_preemption
);
criterion_main!(benches);
