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

criterion_group!(benches, bench_allocate, bench_publish, bench_claim);
criterion_main!(benches);
