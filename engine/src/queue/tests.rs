//! Queue tests: ordering (ported from upstream's `cache/util.go Less` semantics and the
//! kube-scheduler queue tests it copies), backoff, the unschedulable pool and its wake-ups,
//! updates, deletes and gates.

use super::*;
use crate::event;
use crate::model::{CPU, CompiledPod, Interner, PodInput, ResourceRegistry, compile_pod};
use crate::plugins::{Reason, node_affinity, noderesources};

/// The wake-ups of a pod rejected for CPU, and for a node selector (as the plugins declare them).
fn cpu_short() -> Events {
    noderesources::Insufficient(CPU).wake()
}

fn label_mismatch() -> Events {
    node_affinity::Mismatch.wake()
}

fn pod(name: &str, priority: i32, sp: Option<&str>) -> Arc<CompiledPod> {
    let input = PodInput {
        uid: name.into(),
        namespace: "ns".into(),
        name: name.into(),
        priority,
        scheduling_priority: sp.map(str::to_owned),
        ..Default::default()
    };
    Arc::new(
        compile_pod(
            &input,
            &mut Interner::default(),
            &mut ResourceRegistry::default(),
        )
        .unwrap(),
    )
}

fn gated(name: &str) -> Arc<CompiledPod> {
    let input = PodInput {
        uid: name.into(),
        namespace: "ns".into(),
        name: name.into(),
        scheduling_gates: vec!["g".into()],
        ..Default::default()
    };
    Arc::new(
        compile_pod(
            &input,
            &mut Interner::default(),
            &mut ResourceRegistry::default(),
        )
        .unwrap(),
    )
}

const S: u64 = 1_000_000_000;

fn t(secs: f64) -> Nanos {
    Nanos((secs * S as f64) as u64)
}

fn pop_all(q: &mut SchedulingQueue, now: Nanos) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((p, _, _)) = q.pop(now, true) {
        out.push(p.name.to_string());
    }
    out
}

#[test]
fn order_is_scheduling_priority_then_priority_then_fifo() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    q.upsert(pod("low-first", 0, None), t(0.0));
    q.upsert(pod("high", 1000, None), t(0.0));
    q.upsert(pod("low-second", 0, None), t(0.0));
    q.upsert(pod("annotated", 0, Some("50")), t(0.0));
    q.upsert(pod("bad-annotation", 10, Some("urgent!")), t(0.0));
    assert_eq!(
        pop_all(&mut q, t(0.0)),
        [
            "annotated",
            "high",
            "bad-annotation",
            "low-first",
            "low-second"
        ]
    );
}

#[test]
fn urgent_requeue_goes_first_without_backoff() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    q.upsert(pod("a", 1000, None), t(0.0));
    q.upsert(pod("b", 0, None), t(0.0));
    let (b, _, _) = {
        let first = q.pop(t(0.0), true).unwrap();
        assert_eq!(&*first.0.name, "a");
        q.pop(t(0.0), true).unwrap()
    };
    q.upsert(pod("c", 2000, Some("99")), t(0.0));
    q.requeue_urgent(&b.uid);
    assert_eq!(
        pop_all(&mut q, t(0.0)),
        ["b", "c"],
        "a conflicted pod retries at once, ahead of everyone"
    );
}

#[test]
fn exponential_backoff_one_to_ten_seconds() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    let p = pod("p", 0, None);
    q.upsert(p.clone(), t(0.0));
    let expected = [1.0, 2.0, 4.0, 8.0, 10.0, 10.0];
    let mut now = 0.0;
    for want in expected {
        assert!(q.pop(t(now), true).is_some());
        q.mark_unschedulable(&p.uid, cpu_short(), t(now));
        // A cluster event that helps moves it to backoffQ until its backoff expires.
        q.on_cluster_event(event::POD_REMOVED | event::ROOM_FREED, t(now));
        assert_eq!(q.depths().backoff, 1);
        assert_eq!(q.next_deadline(), Some(t(now + want)));
        // Behind a ready pod, it waits out its backoff.
        let busy = pod(&format!("busy-{want}"), 0, None);
        q.upsert(busy.clone(), t(now));
        assert_eq!(q.pop(t(now + want - 0.001), true).unwrap().0.uid, busy.uid);
        q.remove(&busy.uid);
        now += want;
        assert!(q.pop(t(now), true).is_some(), "ready after {want}s");
        q.requeue_active(&p.uid);
    }
}

#[test]
fn an_idle_queue_pops_the_first_backoff_early_but_never_an_error_backoff() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    let (a, b, e) = (pod("a", 0, None), pod("b", 0, None), pod("err", 0, None));
    for p in [&a, &b, &e] {
        q.upsert(p.clone(), t(0.0));
    }
    assert_eq!(pop_all(&mut q, t(0.0)), ["a", "b", "err"]);
    q.mark_unschedulable(&a.uid, cpu_short(), t(0.0));
    q.mark_unschedulable(&b.uid, cpu_short(), t(0.2));
    q.requeue_backoff(&e.uid, t(0.0));
    q.on_cluster_event(event::POD_REMOVED | event::ROOM_FREED, t(0.3));
    assert_eq!(q.depths().backoff, 3);
    // a's backoff ends first (1.0 s), then b's (1.2 s); the failed bind waits its full second.
    assert_eq!(pop_all(&mut q, t(0.3)), ["a", "b"]);
    assert!(
        q.pop(t(0.999), true).is_none(),
        "an error backoff is never cut short"
    );
    assert_eq!(q.pop(t(1.0), true).unwrap().0.uid, e.uid);
}

#[test]
fn pool_wakes_only_for_helpful_events() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    let a = pod("needs-cpu", 0, None);
    let b = pod("needs-label", 0, None);
    q.upsert(a.clone(), t(0.0));
    q.upsert(b.clone(), t(0.0));
    q.pop(t(0.0), true);
    q.pop(t(0.0), true);
    q.mark_unschedulable(&a.uid, cpu_short(), t(0.0));
    q.mark_unschedulable(&b.uid, label_mismatch(), t(0.0));
    assert_eq!(q.depths().unschedulable, 2);
    assert_eq!(q.on_cluster_event(event::NODE_TAINT_REMOVED, t(5.0)), 0);
    assert_eq!(
        q.on_cluster_event(event::POD_REMOVED | event::ROOM_FREED, t(5.0)),
        1
    );
    assert_eq!(pop_all(&mut q, t(5.0)), ["needs-cpu"]);
    assert_eq!(
        q.on_cluster_event(event::NODE_ADDED, t(5.0)),
        1,
        "a new node helps everyone"
    );
    assert_eq!(pop_all(&mut q, t(5.0)), ["needs-label"]);
}

#[test]
fn pool_is_flushed_after_five_minutes() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    let a = pod("a", 0, None);
    q.upsert(a.clone(), t(0.0));
    q.pop(t(0.0), true);
    q.mark_unschedulable(&a.uid, label_mismatch(), t(0.0));
    assert_eq!(q.next_deadline(), Some(t(300.0)));
    q.flush_unschedulable(t(299.0));
    assert!(q.pop(t(299.0), true).is_none());
    q.flush_unschedulable(t(300.0));
    assert_eq!(pop_all(&mut q, t(300.0)), ["a"]);
}

#[test]
fn delete_removes_from_every_sub_queue() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    for name in ["active", "backoff", "pool", "inflight", "gated"] {
        q.upsert(
            if name == "gated" {
                gated(name)
            } else {
                pod(name, 0, None)
            },
            t(0.0),
        );
    }
    let mut popped = Vec::new();
    while let Some((p, _, _)) = q.pop(t(0.0), true) {
        popped.push(p);
    }
    for p in &popped {
        match &*p.name {
            "backoff" => q.requeue_backoff(&p.uid, t(0.0)),
            "pool" => q.mark_unschedulable(&p.uid, cpu_short(), t(0.0)),
            "active" => q.requeue_active(&p.uid),
            _ => {}
        }
    }
    let d = q.depths();
    assert_eq!(
        (d.active, d.backoff, d.unschedulable, d.in_flight, d.gated),
        (1, 1, 1, 1, 1)
    );
    for name in ["active", "backoff", "pool", "inflight", "gated"] {
        assert!(q.remove(name).is_some(), "{name}");
    }
    assert!(q.is_empty());
    assert_eq!(q.depths(), QueueDepths::default());
    assert!(
        q.pop(t(100.0), true).is_none(),
        "stale heap entries are skipped"
    );
}

#[test]
fn updates_apply_in_place_and_unblock() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    q.upsert(pod("a", 0, None), t(0.0));
    q.upsert(pod("b", 0, None), t(0.0));
    // Raising b's priority reorders it.
    q.upsert(pod("b", 100, None), t(0.0));
    assert_eq!(pop_all(&mut q, t(0.0)), ["b", "a"]);
    // An update of an unschedulable pod retries it (after its backoff, or at once when
    // nothing else is ready).
    let a = pod("a", 0, None);
    q.mark_unschedulable(&a.uid, label_mismatch(), t(0.0));
    q.upsert(a.clone(), t(0.5));
    assert_eq!(q.depths().backoff, 1);
    assert!(
        q.pop(t(0.5), true).is_some(),
        "idle: popped before its backoff ends"
    );
    // An update while in flight is recorded, not queued twice.
    let a2 = pod("a", 5, None);
    q.upsert(a2.clone(), t(1.0));
    let e = q.get(&a.uid).unwrap();
    assert!(Arc::ptr_eq(e.pod(), &a2) && e.state() == PodState::InFlight);
    assert!(q.pop(t(1.0), true).is_none());
}

#[test]
fn gates_hold_pods_until_removed() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    q.upsert(gated("g"), t(0.0));
    assert!(q.pop(t(0.0), true).is_none());
    assert_eq!(q.depths().gated, 1);
    q.upsert(pod("g", 0, None), t(1.0));
    assert_eq!(pop_all(&mut q, t(1.0)), ["g"]);
}

#[test]
fn binding_pods_are_not_requeued_by_updates() {
    let mut q = SchedulingQueue::new(QueueOptions::default());
    let a = pod("a", 0, None);
    q.upsert(a.clone(), t(0.0));
    q.pop(t(0.0), true);
    q.mark_binding(&a.uid);
    q.upsert(a.clone(), t(0.1));
    assert!(q.pop(t(0.1), true).is_none());
    assert_eq!(q.depths().binding, 1);
}
