//! The coordinator's rules. The worker-sync cases are ported from Volcano's
//! `pkg/agentscheduler/cache/shard_coordinator_test.go` (Apache-2.0, volcano-sh/volcano):
//! already synced → no write; a worker on an old revision blocks the update; all workers
//! current → update; a revision bump while a worker is mid-cycle → exactly one update.

use super::*;

fn opts(mode: ShardingMode) -> ShardingOptions {
    ShardingOptions {
        mode,
        shard_name: "a".into(),
        handover_hold: Duration::from_secs(15),
    }
}

/// The next resourceVersion: NodeShards change in the order a test calls these helpers.
fn next_rv() -> Option<String> {
    static RV: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    Some(
        RV.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string(),
    )
}

/// The server's answer to the status write `w`: stored now, at the next resourceVersion.
fn answer(w: &ShardStatusIntent) -> Option<WrittenStatus> {
    Some(WrittenStatus {
        status: w.lists(),
        resource_version: next_rv(),
    })
}

/// A NodeShard as stored now (at the next resourceVersion).
fn shard(name: &str, desired: &[&str], in_use: &[&str]) -> ShardInput {
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let desired_set: BTreeSet<&str> = desired.iter().copied().collect();
    let in_use_set: BTreeSet<&str> = in_use.iter().copied().collect();
    ShardInput {
        name: name.into(),
        nodes_desired: v(desired),
        nodes_in_use: v(in_use),
        nodes_to_add: desired_set
            .difference(&in_use_set)
            .map(|s| s.to_string())
            .collect(),
        nodes_to_remove: in_use_set
            .difference(&desired_set)
            .map(|s| s.to_string())
            .collect(),
        resource_version: next_rv(),
    }
}

/// A status written by someone who only maintains `nodesInUse`.
fn stale(name: &str, desired: &[&str], in_use: &[&str]) -> ShardInput {
    ShardInput {
        nodes_to_add: vec![],
        nodes_to_remove: vec![],
        ..shard(name, desired, in_use)
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn view(c: &Coordinator) -> Option<Vec<&str>> {
    c.view().map(|v| v.iter().map(String::as_str).collect())
}

const T0: Nanos = Nanos(0);
const LATER: Nanos = Nanos(60_000_000_000);

/// A leading coordinator without a hand-over hold.
fn settled(mode: ShardingMode) -> Coordinator {
    let mut c = Coordinator::new(ShardingOptions {
        handover_hold: Duration::ZERO,
        ..opts(mode)
    });
    c.term_started();
    c
}

#[test]
fn own_shard_missing_gives_no_view_and_no_write() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("b", &["n1"], &["n1"]));
    c.refresh_view();
    assert_eq!(view(&c), None);
    assert!(c.gauges().missing);
    assert!(c.status_to_write(T0, true, |_| true).is_none());
}

#[test]
fn write_before_use_then_use() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2"], &[]));
    assert_eq!(c.refresh_view(), Some(true), "an empty view appears");
    assert_eq!(view(&c), Some(vec![]), "nothing used before it is claimed");
    let w = c.status_to_write(LATER, true, |_| true).expect("claim");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]));
    assert!(w.nodes_to_add.is_empty() && w.nodes_to_remove.is_empty());
    c.write_done(answer(&w), LATER);
    assert!(
        c.status_to_write(LATER, true, |_| true).is_none(),
        "written, waiting for the echo"
    );
    // The echo: now the nodes are used.
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    assert_eq!(c.refresh_view(), Some(true));
    assert_eq!(view(&c), Some(vec!["n1", "n2"]));
    assert!(c.status_to_write(LATER, true, |_| true).is_none(), "synced");
}

/// Our own NodeShard as stored by the write `a` answered (its echo), desiring `desired`.
fn echo(a: &Option<WrittenStatus>, desired: &[&str]) -> ShardInput {
    let a = a.as_ref().expect("written");
    ShardInput {
        name: "a".into(),
        nodes_desired: names(desired),
        nodes_in_use: a.status.nodes_in_use.clone(),
        nodes_to_add: a.status.nodes_to_add.clone(),
        nodes_to_remove: a.status.nodes_to_remove.clone(),
        resource_version: a.resource_version.clone(),
    }
}

/// Using n1 and n2, the controller takes n2 away: the release is asked for (in flight).
fn releasing_n2() -> (Coordinator, ShardStatusIntent) {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    c.apply(shard("a", &["n1"], &["n1", "n2"]));
    c.refresh_view();
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("release n2");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
    (c, w)
}

#[test]
fn an_older_own_object_after_the_answer_does_not_bring_back_a_released_node() {
    let (mut c, w) = releasing_n2();
    // The controller gives n2 back before our write lands, and the write's answer comes before
    // the watch shows that change: an object still listing n2 in use, older than our release.
    let back = shard("a", &["n1", "n2"], &["n1", "n2"]);
    let released = answer(&w);
    c.write_done(released.clone(), LATER);
    c.apply(back);
    c.refresh_view();
    assert_eq!(
        view(&c),
        Some(vec!["n1"]),
        "n2 was released by a write the watch has not shown yet"
    );
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("claim n2 anew");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]));
    let claimed = answer(&w);
    c.write_done(claimed.clone(), LATER);
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]), "claimed, not echoed");
    c.apply(echo(&released, &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]), "the release's echo");
    assert!(
        c.status_to_write(LATER, true, |_| true).is_none(),
        "the claim is written"
    );
    c.apply(echo(&claimed, &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1", "n2"]), "the claim's echo");
    assert!(c.status_to_write(LATER, true, |_| true).is_none(), "synced");
}

#[test]
fn a_node_given_back_while_its_release_is_in_flight_waits_for_a_new_claim() {
    let (mut c, w) = releasing_n2();
    // The controller gives n2 back while the release is in flight; the object the watch shows
    // still lists n2 in use.
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(
        view(&c),
        Some(vec!["n1"]),
        "the release may land at any moment"
    );
    let released = answer(&w);
    c.write_done(released.clone(), LATER);
    c.apply(echo(&released, &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("claim n2 anew");
    let claimed = answer(&w);
    c.write_done(claimed.clone(), LATER);
    c.apply(echo(&claimed, &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1", "n2"]));
}

#[test]
fn an_echo_before_its_answer_is_not_waited_for() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &[]));
    c.refresh_view();
    let w = c.status_to_write(LATER, true, |_| true).expect("claim");
    let a = answer(&w);
    c.apply(echo(&a, &["n1"]));
    c.write_done(a, LATER);
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
}

#[test]
fn resource_versions_compare_as_integers_or_only_for_equality() {
    use std::cmp::Ordering::*;
    assert_eq!(resource_version_order("9", "10"), Some(Less));
    assert_eq!(resource_version_order("10", "10"), Some(Equal));
    assert_eq!(
        resource_version_order("18446744073709551615", "2"),
        Some(Greater)
    );
    for bad in ["0", "010", "abc", "", "-1"] {
        assert_eq!(resource_version_order(bad, "5"), None, "{bad:?}");
    }
    assert!(includes(Some("11"), Some("10")) && !includes(Some("9"), Some("10")));
    assert!(includes(Some("x7"), Some("x7")) && !includes(Some("x8"), Some("x7")));
    assert!(!includes(None, Some("1")) && !includes(Some("1"), None));
}

#[test]
fn already_synced_writes_nothing() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.apply(shard("b", &["n2"], &["n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    assert!(c.status_to_write(LATER, true, |_| true).is_none());
}

#[test]
fn nodes_in_use_elsewhere_are_excluded_and_listed_to_add() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(stale("a", &["n1", "n2"], &["n1"]));
    c.apply(shard("b", &["n3"], &["n2", "n3"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("nodesToAdd changes");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
    assert_eq!(w.nodes_to_add, names(&["n2"]));
    c.write_done(answer(&w), LATER);
    c.apply(shard("a", &["n1", "n2"], &["n1"]));
    c.refresh_view();
    // b releases n2: we claim it, then use it after the echo.
    c.apply(shard("b", &["n3"], &["n3"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    let w = c.status_to_write(LATER, true, |_| true).expect("claim n2");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]));
    c.write_done(answer(&w), LATER);
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    // b held n2: its pods are listed afresh before we use it (rule 6).
    assert_eq!(view(&c), Some(vec!["n1"]));
    assert_eq!(c.take_pod_lists(), names(&["n2"]));
    assert!(c.take_pod_lists().is_empty(), "asked once");
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    assert!(
        c.take_pod_lists().is_empty(),
        "still asked once while the list runs"
    );
    c.pods_listed(&names(&["n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1", "n2"]));
    // Lost to b and back again: listed again.
    c.apply(shard("b", &["n3"], &["n2", "n3"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    c.apply(shard("b", &["n3"], &["n3"]));
    c.refresh_view();
    assert_eq!(c.take_pod_lists(), names(&["n2"]));
    assert_eq!(view(&c), Some(vec!["n1"]));
}

#[test]
fn a_worker_on_an_old_revision_blocks_the_update() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    c.apply(shard("a", &["n1"], &["n1", "n2"]));
    assert!(c.refresh_view().is_some(), "revision bump");
    assert_eq!(view(&c), Some(vec!["n1"]));
    assert!(
        c.status_to_write(LATER, false, |_| true).is_none(),
        "a worker still schedules against the old view"
    );
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("all workers current");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
}

#[test]
fn revision_bumps_mid_cycle_yield_exactly_one_update() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2", "n3"], &["n1", "n2", "n3"]));
    c.refresh_view();
    let r0 = c.revision();
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2", "n3"]));
    c.refresh_view();
    assert!(c.status_to_write(LATER, false, |_| true).is_none());
    c.apply(shard("a", &["n1"], &["n1", "n2", "n3"]));
    c.refresh_view();
    assert_eq!(c.revision(), r0 + 2);
    assert!(c.status_to_write(LATER, false, |_| true).is_none());
    let w = c
        .status_to_write(LATER, true, |_| true)
        .expect("one update");
    assert_eq!(w.nodes_in_use, names(&["n1"]), "the latest state");
    assert_eq!(w.revision, r0 + 2);
    assert!(
        c.status_to_write(LATER, true, |_| true).is_none(),
        "no second write while one is in flight"
    );
    c.write_done(answer(&w), LATER);
    assert!(c.status_to_write(LATER, true, |_| true).is_none());
}

#[test]
fn a_released_node_stays_in_use_until_drained() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    c.apply(shard("a", &["n1"], &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]), "n2 is no longer used");
    assert!(
        c.status_to_write(LATER, true, |n| n != "n2").is_none(),
        "n2 still has a pod binding: nothing changes yet"
    );
    assert_eq!(c.gauges().draining, 1);
    let w = c.status_to_write(LATER, true, |_| true).expect("drained");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
    assert!(w.nodes_to_remove.is_empty());
}

#[test]
fn a_release_waiting_to_drain_is_reported_as_to_remove() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    // The controller moved n2 to b: b waits for us.
    c.apply(stale("a", &["n1"], &["n1", "n2"]));
    c.refresh_view();
    let w = c
        .status_to_write(LATER, true, |n| n != "n2")
        .expect("nodesToRemove lists n2");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]));
    assert_eq!(w.nodes_to_remove, names(&["n2"]));
}

#[test]
fn handover_hold_keeps_inherited_nodes_until_it_ends() {
    let mut c = Coordinator::new(opts(ShardingMode::Hard));
    c.apply(stale("a", &["n1"], &["n1", "n2"]));
    c.refresh_view();
    c.term_started();
    let t = Nanos(1_000_000_000);
    let w = c.status_to_write(t, true, |_| true).expect("nodesToRemove");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]), "n2 held");
    c.write_done(answer(&w), t);
    c.apply(ShardInput {
        nodes_to_remove: names(&["n2"]),
        ..shard("a", &["n1"], &["n1", "n2"])
    });
    let before_end = Nanos(t.0 + 14_000_000_000);
    assert!(c.status_to_write(before_end, true, |_| true).is_none());
    assert_eq!(
        c.next_deadline(before_end),
        Some(Nanos(t.0 + 15_000_000_000))
    );
    let after = Nanos(t.0 + 15_000_000_000);
    let w = c.status_to_write(after, true, |_| true).expect("released");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
    assert_eq!(c.next_deadline(after), None);
}

#[test]
fn the_hold_is_taken_per_term_from_the_status_then() {
    let mut c = Coordinator::new(opts(ShardingMode::Hard));
    c.term_started();
    // Our shard appears only later: the hold is taken from the first status seen.
    c.apply(stale("a", &["n1"], &["n1", "n2"]));
    c.refresh_view();
    let w = c.status_to_write(T0, true, |_| true).expect("write");
    assert_eq!(w.nodes_in_use, names(&["n1", "n2"]));
    c.write_done(answer(&w), T0);
    // A new term inherits what the status says at that time.
    c.apply(shard("a", &["n1"], &["n1"]));
    c.term_started();
    c.refresh_view();
    assert!(c.status_to_write(Nanos(1), true, |_| true).is_none());
}

#[test]
fn failed_writes_are_retried_after_a_pause() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &[]));
    c.refresh_view();
    let w = c.status_to_write(LATER, true, |_| true).expect("claim");
    c.write_done(None, LATER);
    assert!(c.status_to_write(LATER, true, |_| true).is_none(), "paused");
    let retry = c.next_deadline(LATER).expect("retry time");
    assert_eq!(retry, Nanos(LATER.0 + RETRY_AFTER.as_nanos() as u64));
    let again = c.status_to_write(retry, true, |_| true).expect("retried");
    assert_eq!(again.nodes_in_use, w.nodes_in_use);
}

#[test]
fn failed_writes_in_a_row_are_kept_as_one_bound_on_the_view() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1", "n2", "n3"], &["n1", "n2", "n3"]));
    c.refresh_view();
    let mut t = LATER;
    for (desired, expect) in [
        (&["n1", "n2"][..], &["n1", "n2"][..]),
        (&["n1", "n3"], &["n1", "n3"]),
    ] {
        c.apply(shard("a", desired, &["n1", "n2", "n3"]));
        c.refresh_view();
        let w = c.status_to_write(t, true, |_| true).expect("release");
        assert_eq!(w.nodes_in_use, names(expect));
        c.write_done(None, t);
        t = c.next_deadline(t).expect("retry");
    }
    assert_eq!(c.unechoed.len(), 1, "{:?}", c.unechoed);
    c.apply(shard("a", &["n1", "n2", "n3"], &["n1", "n2", "n3"]));
    c.refresh_view();
    assert_eq!(
        view(&c),
        Some(vec!["n1"]),
        "either failed write may still land"
    );
    let w = c.status_to_write(t, true, |_| true).expect("written again");
    let a = answer(&w);
    c.write_done(a.clone(), t);
    c.apply(echo(&a, &["n1", "n2", "n3"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1", "n2", "n3"]));
    assert!(c.unechoed.is_empty());
}

#[test]
fn deadlines_that_have_passed_are_not_reported() {
    // A write that looked failed but landed: the status shows it, but whether that failed
    // write can still land later is unknown, so it is written once more at the retry time;
    // after that nothing is left to retry.
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &[]));
    c.refresh_view();
    let w = c.status_to_write(LATER, true, |_| true).expect("claim");
    c.write_done(None, LATER);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]), "the watch shows the claim");
    let retry = c.next_deadline(LATER).expect("retry time");
    let again = c
        .status_to_write(retry, true, |_| true)
        .expect("written again");
    assert_eq!(again.nodes_in_use, w.nodes_in_use);
    let a = answer(&again);
    c.write_done(a.clone(), retry);
    c.apply(echo(&a, &["n1"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    assert!(c.status_to_write(retry, true, |_| true).is_none());
    assert_eq!(c.next_deadline(retry), None, "nothing left to retry");
    // A hold that ends while this replica does not lead: nothing to wake up for.
    let mut c = Coordinator::new(opts(ShardingMode::Hard));
    c.apply(shard("a", &["n1"], &["n1"]));
    c.refresh_view();
    c.term_started();
    assert!(c.status_to_write(T0, true, |_| true).is_none());
    let end = c.next_deadline(T0).expect("end of the hold");
    assert_eq!(c.next_deadline(end), None);
}

#[test]
fn a_node_held_elsewhere_is_listed_even_when_the_holder_let_go_in_the_same_batch() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.refresh_view();
    // b held n2 (not ours yet) and released it; both statuses arrive before one flush.
    c.apply(shard("b", &["n2"], &["n2"]));
    c.apply(shard("b", &[], &[]));
    // The controller then gives n2 to us; we claim it, and the echo arrives.
    c.apply(shard("a", &["n1", "n2"], &["n1", "n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]), "n2 waits for its pods");
    assert_eq!(c.take_pod_lists(), names(&["n2"]));
    c.pods_listed(&names(&["n2"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1", "n2"]));
}

#[test]
fn someone_elses_status_write_is_corrected() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.refresh_view();
    assert!(c.status_to_write(LATER, true, |_| true).is_none());
    // Someone cleared our status: we claim again, and stop using n1 until the echo.
    c.apply(shard("a", &["n1"], &[]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec![]));
    let w = c.status_to_write(LATER, true, |_| true).expect("rewrite");
    assert_eq!(w.nodes_in_use, names(&["n1"]));
}

#[test]
fn a_later_claim_by_another_shard_takes_the_node_out_of_the_view() {
    let mut c = settled(ShardingMode::Hard);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.refresh_view();
    assert_eq!(view(&c), Some(vec!["n1"]));
    c.apply(shard("b", &["n1"], &["n1"]));
    assert_eq!(c.refresh_view(), Some(false), "shrank");
    assert_eq!(view(&c), Some(vec![]), "never two users at once");
}

#[test]
fn deleted_and_reset_shards() {
    let mut c = settled(ShardingMode::Soft);
    c.apply(shard("a", &["n1"], &["n1"]));
    c.apply(shard("b", &["n2"], &["n2"]));
    c.refresh_view();
    c.delete("a");
    c.refresh_view();
    assert_eq!(view(&c), None);
    assert!(c.gauges().missing);
    c.reset(vec![shard("a", &["n1", "n2"], &["n1", "n2"])]);
    c.refresh_view();
    // b is gone after the relist; it held n2, so n2's pods are listed before we use it.
    assert_eq!(view(&c), Some(vec!["n1"]));
    assert_eq!(c.take_pod_lists(), names(&["n2"]));
    c.pods_listed(&names(&["n2"]));
    c.refresh_view();
    assert_eq!(
        view(&c),
        Some(vec!["n1", "n2"]),
        "b is gone after the relist"
    );
    assert!(!c.gauges().missing);
    assert_eq!(c.gauges().desired, 2);
}

#[test]
fn node_sets_are_chunk_masks() {
    let s = NodeSet::from_slots([0, 1, 63, 64, 200, 1, 0]);
    assert_eq!(s.count, 5);
    assert_eq!(s.mask(0), 1 | 2 | 1 << 63);
    assert_eq!(s.mask(1), 1);
    assert_eq!(s.mask(3), 1 << 8);
    assert_eq!(s.mask(99), 0);
    assert!(s.contains(200) && !s.contains(199));
}
