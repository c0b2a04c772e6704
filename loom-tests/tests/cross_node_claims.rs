//! Model 8 — claims whose constraints span nodes (`binder` steps 5–7, `docs/constraints.md`).
//!
//! Two nodes `x` and `y` in one zone. Pod `p` (`app=db`) has a required anti-affinity against
//! `app=web` on the zone key, so it is decided in the lane; pod `q` (`app=web`) has no constraint
//! of its own. Neither sees the other in the snapshot both are handed off on. Two workers run the
//! real scheduling cycle (`Worker::turn`: allocate, CAS, and the post-claim steps) at once; the
//! driver (the real `Core`) then applies their results, and a worker on the model's thread
//! retries whatever was burned until nothing is left.
//!
//! Checked in every interleaving: `p` and `q` never both stand in the zone (the symmetric rule:
//! `p`'s anti-affinity keeps `q` out, counting claims not yet in any snapshot); the one left out
//! is reported unschedulable, not lost; every claim, burned or not, is counted by the cache
//! (`check_settled`). The model also checks it reaches the race: some executions burn a claim.
//!
//! Mutations `lane_skips_validation` (the lane pod does not look at the other nodes of its
//! domain), `epoch_after_validation` (it bumps the epoch only after looking) and
//! `claim_ignores_epoch` (the other pod does not compare the epoch) must fail this model.
#![cfg(loom)]

use magma_engine::core::Input;
use magma_engine::model::{LabelSelectorInput, PodAffinityInput, PodAffinityTermInput, PodInput};
use magma_engine::testing::with_labels;
use magma_engine::worker::Outcome;
use magma_loom_tests::{harness, node, pod};
use std::sync::atomic::{AtomicUsize, Ordering};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Executions in which some claim was burned.
static BURNED: AtomicUsize = AtomicUsize::new(0);

fn labelled(mut p: PodInput, app: &str) -> PodInput {
    p.labels = vec![("app".into(), app.into())];
    p
}

/// `p`: app=db, required anti-affinity against app=web in the zone.
fn db() -> PodInput {
    let mut p = labelled(pod("p", 100), "db");
    p.pod_affinity = Some(PodAffinityInput {
        required_anti: vec![PodAffinityTermInput {
            label_selector: Some(LabelSelectorInput {
                match_labels: vec![("app".into(), "web".into())],
                match_expressions: vec![],
            }),
            topology_key: ZONE.into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    p
}

#[test]
fn cross_node_claims() {
    magma_loom_tests::model(|| {
        let mut d = harness(2, 2);
        for n in ["x", "y"] {
            d.input(Input::NodeApply(with_labels(
                node(n, 4000),
                &[(ZONE, "a"), ("kubernetes.io/hostname", n)],
            )));
        }
        d.input(Input::PodApply(db()));
        d.input(Input::PodApply(labelled(pod("q", 100), "web")));
        d.flush(); // both handed off on a snapshot that holds neither
        assert_eq!(d.handoff().len(), 2);

        let burned = magma_loom_tests::race_then_settle(&mut d, |r| {
            matches!(r.outcome, Outcome::Burned { .. })
        });
        if burned.into_iter().any(|b| b == Some(true)) {
            BURNED.fetch_add(1, Ordering::Relaxed);
        }

        let placed: Vec<&str> = d.binds.iter().map(|b| &*b.pod.uid).collect();
        assert!(
            !(placed.contains(&"uid-p") && placed.contains(&"uid-q")),
            "p's zone anti-affinity against app=web was broken: both p and q placed in zone a"
        );
        magma_loom_tests::other_is_unschedulable(&d, &placed, "p", "q");
        d.check_settled();
    });
    assert!(
        BURNED.load(Ordering::Relaxed) > 0,
        "no execution burned a claim: the model did not reach the race"
    );
}
