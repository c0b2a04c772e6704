//! The engine on real threads (`Engine::start`: a driver thread and worker threads racing for
//! real, or with one worker the driver running its turns), next to the deterministic scenario
//! and property tests: a burst onto a nearly full cluster with pods deleted while it runs. The
//! test answers bind intents as the API server would and waits on them (a generous deadline only
//! guards against a hang). Checked: the threads the engine runs, every pod bound exactly once
//! or reported, no node over its allocatable, the engine's own audit clean. And that a driver
//! running its one worker decides every queued pod with no input to wake it.

#![allow(clippy::disallowed_methods)] // a real clock for a real-thread test
#![allow(clippy::disallowed_types)] // the test's own lock (`ONE_ENGINE`), not the engine's

use magma_engine::core::{BindResult, Input, Intent};
use magma_engine::testing::{bound, mk_node, mk_pod};
use magma_engine::{Clock, Engine, EngineOptions, Nanos};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tests of this file list the process's threads: one engine at a time (`cargo test` runs
/// tests on threads of one process; nextest runs each in its own).
static ONE_ENGINE: Mutex<()> = Mutex::new(());

/// The names of this process's threads (Linux: `/proc/self/task`).
fn threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

/// Wait until exactly `n` threads are named `prefix`*; fails after a generous deadline. A new
/// thread names itself once it runs, and a joined one leaves the list a moment after `join`.
fn wait_for_threads(prefix: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let named = threads().iter().filter(|t| t.starts_with(prefix)).count();
        if named == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{named} threads named {prefix}*, expected {n}: {:?}",
            threads()
        );
        std::thread::yield_now();
    }
}

struct RealClock(Instant);

impl Clock for RealClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos() as u64)
    }
}

#[test]
fn burst_on_real_threads_keeps_the_invariants() {
    burst(6);
}

/// One worker runs on the driver's thread (`engine` module doc): no worker thread, the same
/// guarantees.
#[test]
fn burst_with_the_one_worker_on_the_driver_keeps_the_invariants() {
    burst(1);
}

fn burst(workers: usize) {
    const NODES: usize = 12;
    const PODS: usize = 400;
    let _one = ONE_ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    // A thread starts with its parent's name and renames itself once it runs.
    let me = std::fs::read_to_string("/proc/thread-self/comm").expect("/proc/thread-self/comm");
    let engine = Engine::start(
        EngineOptions {
            workers,
            ..Default::default()
        },
        Arc::new(RealClock(Instant::now())),
    )
    .expect("engine starts");
    // The driver, and a thread per worker unless the one worker runs on the driver; no other.
    let spawned = if workers == 1 { 1 } else { 1 + workers };
    wait_for_threads("magma-", spawned);
    // One reading for every check: a thread is either named by now or still carries `me`.
    let now = threads();
    let count = |name: &str| now.iter().filter(|t| *t == name).count();
    assert_eq!(count(me.trim_end()), 1, "threads not yet named: {now:?}");
    let named = now.iter().filter(|t| t.starts_with("magma-")).count();
    assert_eq!(named, spawned, "{now:?}");
    assert_eq!(count("magma-driver"), 1, "{now:?}");
    let h = engine.handle();
    for i in 0..NODES {
        h.send(Input::NodeApply(mk_node(
            &format!("n{i}"),
            "8",
            "64Gi",
            110,
        )));
    }
    let mut pods = BTreeMap::new();
    for i in 0..PODS {
        let p = mk_pod(
            &format!("p{i}"),
            &format!("{}m", 300 + (i % 7) * 100),
            "256Mi",
        );
        pods.insert(p.uid.clone(), p.clone());
        h.send(Input::PodApply(p));
    }
    // Node i can take 8000m; the pods average 600m: about 160 fit, the rest are reported.
    let mut bound_to: BTreeMap<String, String> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut deleted = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pods
        .keys()
        .all(|u| bound_to.contains_key(u) || reported.contains(u))
    {
        assert!(
            Instant::now() < deadline,
            "no progress: {} bound, {} reported",
            bound_to.len(),
            reported.len()
        );
        let Ok(intent) = engine.intents().recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        match intent {
            Intent::Bind(b) => {
                let uid = b.pod.uid.to_string();
                let result = match pods.get(&uid) {
                    None => BindResult::PodGone,
                    Some(_) if bound_to.contains_key(&uid) => panic!("{uid} bound twice"),
                    Some(p) => {
                        bound_to.insert(uid.clone(), b.node.to_string());
                        h.send(Input::BindOutcome {
                            uid: uid.clone(),
                            result: BindResult::Bound,
                        });
                        h.send(Input::PodApply(bound(p.clone(), &b.node)));
                        // Every 40th bound pod completes at once: its room helps the waiting.
                        if bound_to.len().is_multiple_of(40) {
                            deleted += 1;
                            pods.remove(&uid);
                            bound_to.remove(&uid);
                            h.send(Input::PodDelete { uid });
                        }
                        continue;
                    }
                };
                h.send(Input::BindOutcome { uid, result });
            }
            Intent::Status(s) => {
                reported.insert(s.uid.to_string());
            }
            Intent::Error(e) => panic!("engine error: {e}"),
            _ => {}
        }
    }
    assert!(deleted > 0);
    let stats = engine.stats();
    let core = engine.shutdown();
    wait_for_threads("magma-", 0);
    assert!(
        stats.attempts >= PODS as u64,
        "every pod went through a worker's cycle"
    );
    assert!(core.audit().is_empty(), "{:?}", core.audit());
    // The engine's books against the test's: every bound pod is counted on its node.
    let mut used: BTreeMap<&str, i64> = BTreeMap::new();
    for (uid, node) in &bound_to {
        let cpu = &pods[uid].containers[0].requests[0].1;
        *used.entry(node).or_default() +=
            magma_engine::model::parse_scaled("cpu", cpu, 1000).unwrap();
    }
    for (node, cpu) in used {
        assert!(cpu <= 8000, "{node} overcommitted: {cpu}m of 8000m");
    }
}

/// With one worker the driver decides pod after pod without waiting for an input: after a turn
/// it flushes and takes the next (`engine::drive`). Binds are never answered here and the idle
/// tick is an hour, so nothing else would wake a driver that waited with pods still queued.
#[test]
fn one_worker_on_the_driver_decides_every_queued_pod_without_another_input() {
    const PODS: usize = 50;
    let _one = ONE_ENGINE.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Engine::start(
        EngineOptions {
            workers: 1,
            idle_tick: Duration::from_secs(3600),
            ..Default::default()
        },
        Arc::new(RealClock(Instant::now())),
    )
    .expect("engine starts");
    let h = engine.handle();
    h.send(Input::NodeApply(mk_node("n0", "64", "256Gi", 110)));
    for i in 0..PODS {
        h.send(Input::PodApply(mk_pod(&format!("p{i}"), "100m", "64Mi")));
    }
    let mut binds = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while binds.len() < PODS {
        let left = deadline.saturating_duration_since(Instant::now());
        match engine.intents().recv_timeout(left) {
            Ok(Intent::Bind(b)) => assert!(binds.insert(b.pod.uid.to_string()), "decided twice"),
            Ok(Intent::Error(e)) => panic!("engine error: {e}"),
            Ok(_) => {}
            Err(_) => panic!("{} of {PODS} pods decided", binds.len()),
        }
    }
    let core = engine.shutdown();
    assert!(core.audit().is_empty(), "{:?}", core.audit());
}
