//! Model 6 — the worker-epoch rule (`worker::Shared::{publish, enter, leave, horizon}`).
//!
//! The driver publishes snapshots 2 and 3 and, after each, reads the horizon: the lowest
//! sequence a worker may still hold. Everything a snapshot below the horizon names (e.g. a
//! removed node's slot) may then be reused. Two workers each enter, use their snapshot, and
//! leave. A model-side ledger (a loom mutex, taken only after the engine's own operations, so
//! it adds no ordering to them) records what each worker holds and what the driver reclaimed;
//! whichever side records second checks the other: a reclaim of `seq` while a worker holds a
//! snapshot older than `seq` fails the model.
//!
//! Mutations `epoch_after_load` (the worker loads the snapshot before announcing its epoch) and
//! `publish_seq_first` (the driver announces a sequence before its snapshot is published) must
//! fail this model.
//!
//! The sharding coordinator's worker-sync rule (DESIGN.md §3 "Sharding": NodeShard status is
//! published only when no worker still schedules against an older node set) builds on these
//! epochs; its model, on the real `Core` and workers, is `sharding_worker_sync.rs`.
#![cfg(loom)]

use loom::sync::Mutex;
use magma_engine::binder::BindVersions;
use magma_engine::conf::Profile;
use magma_engine::snapshot::Snapshot;
use magma_engine::worker::{IDLE, Shared};
use std::sync::Arc;

const LAST: u64 = 3;

struct Ledger {
    /// The driver concluded no worker holds a snapshot below this.
    reclaimed_below: u64,
    /// Sequence of the snapshot each worker is using, `IDLE` when none.
    holding: [u64; 2],
}

fn snapshot(seq: u64, profile: &Arc<Profile>) -> Arc<Snapshot> {
    let mut s = Snapshot::empty(profile.clone());
    s.seq = seq;
    Arc::new(s)
}

#[test]
fn worker_epochs() {
    magma_loom_tests::model(|| {
        let profile = Arc::new(Profile::default());
        let versions = Arc::new(BindVersions::default());
        let shared = Arc::new(Shared::new(2, snapshot(1, &profile), versions));
        let ledger = Arc::new(Mutex::new(Ledger {
            reclaimed_below: 1,
            holding: [IDLE; 2],
        }));

        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (shared, ledger) = (shared.clone(), ledger.clone());
                magma_loom_tests::spawn(move || {
                    let snap = shared.enter(w);
                    {
                        let mut l = ledger.lock().unwrap();
                        assert!(
                            snap.seq >= l.reclaimed_below,
                            "worker {w} uses snapshot {} after the driver reclaimed everything below {}",
                            snap.seq,
                            l.reclaimed_below
                        );
                        l.holding[w] = snap.seq;
                    }
                    ledger.lock().unwrap().holding[w] = IDLE; // done with it
                    shared.leave(w);
                })
            })
            .collect();

        for seq in 2..=LAST {
            shared.publish(snapshot(seq, &profile));
            let horizon = shared.horizon();
            assert!(
                horizon <= seq,
                "horizon {horizon} beyond the latest snapshot {seq}"
            );
            let mut l = ledger.lock().unwrap();
            for (w, &held) in l.holding.iter().enumerate() {
                assert!(
                    held >= horizon,
                    "horizon {horizon} while worker {w} still holds snapshot {held}"
                );
            }
            l.reclaimed_below = l.reclaimed_below.max(horizon);
        }
        for w in workers {
            w.join().unwrap();
        }
    });
}
