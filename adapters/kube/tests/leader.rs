//! Leader election against the API simulator: acquisition, standby, hand-over on release and on
//! expiry, optimistic-concurrency losers, and the Lease record client-go writes.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_sim::{ErrorRule, Sim, SimConfig, SimHandle};
use magma_kube::leader::{LeaderElector, LeaseConfig};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::common;

const NS: &str = "volcano-system";
const NAME: &str = "agent-scheduler";

async fn sim() -> (SimHandle, kube::Client) {
    let sim = Sim::start(SimConfig {
        nodes: 0,
        ..SimConfig::default()
    })
    .await
    .expect("simulator starts");
    let client = client_as(&sim, "test").await;
    (sim, client)
}

/// A client whose requests the simulator records with `User-Agent: <who>`, so each
/// candidate's requests can be told apart.
async fn client_as(sim: &SimHandle, who: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    config.headers.push((
        axum::http::header::USER_AGENT,
        axum::http::HeaderValue::from_str(who).expect("header value"),
    ));
    kube::Client::try_from(config).expect("client")
}

/// How many `verb` requests on the Lease the candidate `who` has made so far.
fn lease_requests(sim: &SimHandle, who: &str, verb: &str) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.resource == "leases" && r.user_agent == who && r.verb == verb)
        .count()
}

/// Waits until `who` has made at least `n` `verb` requests on the Lease.
async fn lease_requests_reach(sim: &SimHandle, who: &str, verb: &str, n: usize) {
    common::wait_for(
        &format!("{n} {verb} requests by {who} on the Lease"),
        Duration::from_secs(10),
        || (lease_requests(sim, who, verb) >= n).then_some(()),
        || format!("{}", lease_requests(sim, who, verb)),
    )
    .await
}

/// `who`'s writes to the Lease so far.
fn lease_writes(sim: &SimHandle, who: &str) -> usize {
    lease_requests(sim, who, "create") + lease_requests(sim, who, "update")
}

/// Short timings: lease 1 s, renew 600 ms, retry 200 ms.
fn short(identity: &str) -> LeaseConfig {
    LeaseConfig {
        identity: identity.into(),
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(600),
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::default()
    }
}

struct Running {
    leading: watch::Receiver<bool>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<anyhow::Result<()>>,
}

fn start(client: &kube::Client, cfg: LeaseConfig) -> Running {
    let (lead_tx, leading) = watch::channel(false);
    let (shutdown, stop_rx) = watch::channel(false);
    let task = tokio::spawn(LeaderElector::new(client.clone(), cfg).run(lead_tx, stop_rx));
    Running {
        leading,
        shutdown,
        task,
    }
}

impl Running {
    /// Waits until the announced state is `want`; returns how long that took.
    async fn wait_for(&mut self, want: bool, within: Duration) -> Duration {
        let t0 = Instant::now();
        tokio::time::timeout(within, self.leading.wait_for(|v| *v == want))
            .await
            .unwrap_or_else(|_| panic!("leading never became {want} within {within:?}"))
            .expect("elector alive");
        t0.elapsed()
    }

    async fn stop(self) {
        self.shutdown.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("elector stops")
            .expect("task")
            .expect("clean shutdown");
    }
}

async fn spec(api: &Api<Lease>) -> LeaseSpec {
    api.get(NAME).await.expect("lease").spec.expect("spec")
}

fn holder(s: &LeaseSpec) -> &str {
    s.holder_identity.as_deref().unwrap_or("")
}

fn leases(client: &kube::Client) -> Api<Lease> {
    Api::namespaced(client.clone(), NS)
}

#[tokio::test]
async fn single_elector_acquires_and_writes_the_client_go_record() {
    let (sim, client) = sim().await;
    let api = leases(&client);
    let mut a = start(&client_as(&sim, "a").await, short("a"));
    a.wait_for(true, Duration::from_secs(3)).await;

    let first = spec(&api).await;
    assert_eq!(holder(&first), "a");
    assert_eq!(first.lease_duration_seconds, Some(1));
    assert_eq!(first.lease_transitions, Some(0));
    assert!(first.acquire_time.is_some());
    assert_eq!(first.acquire_time, first.renew_time);

    // The next renewal: a successful update by a after the create.
    let renewed = |sim: &SimHandle| {
        sim.writes()
            .iter()
            .any(|w| w.resource == "leases" && w.verb == "update" && w.code == 200)
    };
    common::wait_for(
        "a to renew",
        Duration::from_secs(3),
        || renewed(&sim).then_some(()),
        || format!("{:?}", sim.writes()),
    )
    .await;
    let later = spec(&api).await;
    assert_eq!(holder(&later), "a");
    assert!(later.renew_time > first.renew_time, "the leader renews");
    assert_eq!(
        later.acquire_time, first.acquire_time,
        "renewal keeps acquireTime"
    );
    assert_eq!(later.lease_transitions, Some(0));
    assert!(*a.leading.borrow());

    a.stop().await;
    let released = spec(&api).await;
    assert_eq!(holder(&released), "", "release empties holderIdentity");
    assert_eq!(released.lease_duration_seconds, Some(1));
    assert_eq!(released.lease_transitions, Some(0));
    assert_eq!(released.acquire_time, released.renew_time);
}

#[tokio::test]
async fn standby_waits_while_the_leader_renews_and_takes_over_on_release() {
    let (sim, client) = sim().await;
    let api = leases(&client);
    // A long lease, so a hand-over well inside it can only come from the release.
    let cfg = |id: &str| LeaseConfig {
        identity: id.into(),
        lease_duration: Duration::from_secs(5),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::default()
    };
    let mut a = start(&client_as(&sim, "a").await, cfg("a"));
    a.wait_for(true, Duration::from_secs(3)).await;
    let mut b = start(&client_as(&sim, "b").await, cfg("b"));

    // Over three more renewals by a, b reads the Lease (at least three times) and stays a
    // standby: it never writes.
    for round in 1..=3 {
        let renewals = lease_requests(&sim, "a", "update");
        lease_requests_reach(&sim, "a", "update", renewals + 1).await;
        lease_requests_reach(&sim, "b", "get", round).await;
    }
    assert_eq!(lease_writes(&sim, "b"), 0, "the standby never writes");
    assert!(!*b.leading.borrow(), "the standby must not lead");
    assert!(*a.leading.borrow(), "the leader keeps leading");
    assert_eq!(holder(&spec(&api).await), "a");

    a.stop().await;
    let took = b.wait_for(true, Duration::from_secs(4)).await;
    assert!(
        took < Duration::from_millis(1500),
        "standby took {took:?} after a release (lease 5 s)"
    );
    let s = spec(&api).await;
    assert_eq!(holder(&s), "b");
    assert_eq!(s.lease_duration_seconds, Some(5));
    assert_eq!(
        s.lease_transitions,
        Some(1),
        "a new holder bumps leaseTransitions"
    );
    assert_eq!(s.acquire_time, s.renew_time);
    b.stop().await;
}

#[tokio::test]
async fn killed_leader_is_replaced_once_its_lease_expires() {
    let (sim, client) = sim().await;
    let api = leases(&client);
    let mut a = start(&client_as(&sim, "a").await, short("a"));
    a.wait_for(true, Duration::from_secs(3)).await;
    let mut b = start(&client_as(&sim, "b").await, short("b"));
    // b has read a's valid Lease (twice) and stayed a standby.
    lease_requests_reach(&sim, "b", "get", 2).await;
    assert_eq!(lease_writes(&sim, "b"), 0, "the standby never writes");
    assert!(!*b.leading.borrow());

    // No release: the process died.
    a.task.abort();
    let killed = Instant::now();
    b.wait_for(true, Duration::from_secs(5)).await;
    let took = killed.elapsed();
    assert!(
        took >= Duration::from_millis(700),
        "took over after {took:?}, before the 1 s lease could expire"
    );
    assert!(took < Duration::from_secs(3), "took over after {took:?}");
    let s = spec(&api).await;
    assert_eq!(holder(&s), "b");
    assert_eq!(s.lease_transitions, Some(1));
    b.stop().await;
}

#[tokio::test]
async fn leadership_is_lost_at_the_renew_deadline_and_competed_for_again() {
    let (sim, client) = sim().await;
    let mut a = start(&client, short("a"));
    a.wait_for(true, Duration::from_secs(3)).await;

    // The API server fails every lease request: no renewal can succeed.
    sim.faults().update(|f| {
        f.errors = vec![ErrorRule {
            resource: Some("leases".into()),
            ..ErrorRule::new("*", 1.0)
        }]
    });
    let took = a.wait_for(false, Duration::from_secs(3)).await;
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_millis(1000),
        "lost after {took:?} (renew deadline 600 ms, retry 200 ms)"
    );

    // The Lease still names us and nobody else wrote it: once the API recovers we win it back.
    sim.faults().update(|f| f.errors.clear());
    a.wait_for(true, Duration::from_secs(3)).await;
    let s = spec(&leases(&client)).await;
    assert_eq!(holder(&s), "a");
    assert_eq!(
        s.lease_transitions,
        Some(0),
        "renewing our own lease is no transition"
    );
    a.stop().await;
}

#[tokio::test]
async fn a_foreign_holder_makes_the_leader_step_down() {
    let (sim, client) = sim().await;
    let api = leases(&client);
    let mut a = start(&client_as(&sim, "a").await, short("a"));
    a.wait_for(true, Duration::from_secs(3)).await;

    // Another scheduler (say a Go replica) writes the lease as its own.
    let mut lease = api.get(NAME).await.expect("lease");
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some("go-replica".into());
    spec.lease_duration_seconds = Some(15);
    api.replace(NAME, &PostParams::default(), &lease)
        .await
        .expect("foreign write");

    let took = a.wait_for(false, Duration::from_secs(2)).await;
    assert!(
        took < Duration::from_millis(700),
        "stepped down after {took:?}"
    );
    // a keeps competing: two more reads of the foreign Lease, and no write.
    let (reads, writes) = (lease_requests(&sim, "a", "get"), lease_writes(&sim, "a"));
    lease_requests_reach(&sim, "a", "get", reads + 2).await;
    assert_eq!(
        lease_writes(&sim, "a"),
        writes,
        "a valid foreign lease is not written"
    );
    assert!(!*a.leading.borrow(), "a valid foreign lease is respected");
    a.stop().await;
    assert_eq!(
        holder(
            &leases(&client)
                .get(NAME)
                .await
                .expect("lease")
                .spec
                .expect("spec")
        ),
        "go-replica",
        "shutdown never releases a lease held by someone else"
    );
}

#[tokio::test]
async fn racing_candidates_one_wins_the_loser_gets_409() {
    let (sim, client) = sim().await;
    let api = leases(&client);
    let mut a = LeaderElector::new(client.clone(), short("a"));
    let mut b = LeaderElector::new(client.clone(), short("b"));

    // Both read before either writes: every request is delayed 300 ms.
    sim.faults().update(|f| f.latency_ms = 300);
    let (ra, rb) = tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew());
    let (ra, rb) = (ra.expect("a"), rb.expect("b"));
    assert!(ra ^ rb, "exactly one creates the lease: a={ra} b={rb}");
    let (mut winner, mut loser, w, l) = if ra {
        (a, b, "a", "b")
    } else {
        (b, a, "b", "a")
    };
    assert!(winner.is_leader() && !loser.is_leader());
    sim.faults().update(|f| f.latency_ms = 0);

    // Expired lease of a dead holder: both candidates observe it, wait, and race to update it
    // with the same resourceVersion.
    let now = MicroTime(
        k8s_openapi::jiff::Timestamp::from_microsecond(
            i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("clock")
                    .as_micros(),
            )
            .expect("fits"),
        )
        .expect("timestamp"),
    );
    let mut lease = api.get(NAME).await.expect("lease");
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("ghost".into()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        lease_transitions: Some(4),
        ..LeaseSpec::default()
    });
    api.replace(NAME, &PostParams::default(), &lease)
        .await
        .expect("ghost takes the lease");
    assert!(!winner.try_acquire_or_renew().await.expect("step"));
    assert!(!loser.try_acquire_or_renew().await.expect("step"));
    assert_eq!(winner.observed_holder(), Some("ghost"));
    // Both observed the ghost's record before `observed`; it expires, for both, once its own
    // leaseDurationSeconds have passed since: wait until that instant, read from the record.
    let observed = Instant::now();
    let ghost_secs = spec(&api).await.lease_duration_seconds.expect("duration");
    assert_eq!(ghost_secs, 1);
    tokio::time::sleep_until(observed + Duration::from_secs(ghost_secs as u64)).await;

    sim.clear_records();
    sim.faults().update(|f| f.latency_ms = 300);
    let (rw, rl) = tokio::join!(winner.try_acquire_or_renew(), loser.try_acquire_or_renew());
    sim.faults().update(|f| f.latency_ms = 0);
    let (rw, rl) = (rw.expect("winner"), rl.expect("loser"));
    assert!(
        rw ^ rl,
        "exactly one takes the expired lease: {w}={rw} {l}={rl}"
    );
    let conflicts: Vec<_> = sim
        .writes()
        .into_iter()
        .filter(|r| r.resource == "leases" && r.verb == "update" && r.code == 409)
        .collect();
    assert_eq!(
        conflicts.len(),
        1,
        "the stale update is refused: {conflicts:?}"
    );
    let s = spec(&api).await;
    let new_holder = if rw { w } else { l };
    assert_eq!(holder(&s), new_holder);
    assert_eq!(s.lease_transitions, Some(5));

    // The loser now sees a valid foreign lease and stays a candidate.
    let (mut won, mut lost) = if rw { (winner, loser) } else { (loser, winner) };
    assert!(!lost.try_acquire_or_renew().await.expect("step"));
    assert!(!lost.is_leader());
    assert!(won.try_acquire_or_renew().await.expect("renew"));

    // A write that only touches metadata makes the leader's optimistic renewal conflict; it
    // re-reads, still finds itself the holder, and renews.
    let mut touched = api.get(NAME).await.expect("lease");
    touched
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("touched".into(), "yes".into());
    api.replace(NAME, &PostParams::default(), &touched)
        .await
        .expect("touch");
    sim.clear_records();
    assert!(won.try_acquire_or_renew().await.expect("renew after touch"));
    let codes: Vec<u16> = sim
        .writes()
        .iter()
        .filter(|r| r.resource == "leases")
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, [409, 200], "fast path conflicts, slow path renews");
}
