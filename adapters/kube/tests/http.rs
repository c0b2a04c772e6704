//! The admin server over real TCP: liveness, the readiness latch, and the metrics exposition
//! (upstream's names, labels and bucket layouts; Magma's metrics; engine counters read at scrape).

use magma_engine::queue::QueueDepths;
use magma_engine::stats::StatsSnapshot;
use magma_kube::http::{Readiness, router, serve};
use magma_kube::metrics::{BindOutcomeLabel, Metrics};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

struct Reply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

/// A minimal HTTP/1.1 GET (no client crate needed).
async fn get(addr: SocketAddr, path: &str) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

async fn start(
    readiness: Arc<Readiness>,
    metrics: Option<Metrics>,
    healthz: bool,
) -> (
    SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (tx, rx) = oneshot::channel();
    let (addr, task) = serve(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        router(readiness, metrics, healthz),
        async move {
            let _ = rx.await;
        },
    )
    .await
    .expect("serve");
    assert_ne!(addr.port(), 0, "the bound port is reported");
    (addr, tx, task)
}

#[tokio::test]
async fn healthz_is_liveness_and_readyz_follows_the_latch() {
    let readiness = Arc::new(Readiness::new(true));
    let (addr, stop, task) = start(readiness.clone(), None, true).await;

    for path in ["/healthz", "/healthz/ping"] {
        let r = get(addr, path).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{path}");
    }
    assert_eq!(
        get(addr, "/metrics").await.status,
        404,
        "metrics not enabled"
    );

    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 503);
    assert!(r.body.contains("caches not synced"), "{}", r.body);

    readiness.set_synced();
    let r = get(addr, "/readyz").await;
    assert_eq!(r.status, 503, "a cold standby is not ready");
    assert!(r.body.contains("not leading"), "{}", r.body);

    readiness.set_leader_state(true, false);
    let r = get(addr, "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));

    readiness.set_leader_state(false, false);
    assert_eq!(get(addr, "/readyz").await.status, 503, "lost the lease");

    readiness.set_leader_state(false, true);
    assert_eq!(get(addr, "/readyz").await.status, 200, "warm standby");
    assert_eq!(get(addr, "/healthz").await.status, 200);

    stop.send(()).expect("server running");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("graceful shutdown")
        .expect("task")
        .expect("server ok");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "port closed"
    );
}

#[tokio::test]
async fn without_leader_election_synced_is_ready() {
    let readiness = Arc::new(Readiness::new(false));
    let (addr, _stop, _task) = start(readiness.clone(), None, true).await;
    assert_eq!(get(addr, "/readyz").await.status, 503);
    readiness.set_synced();
    assert_eq!(get(addr, "/readyz").await.status, 200);
}

/// `name{labels}` → value, for every sample line; checks each belongs to a `# TYPE`d family.
fn samples(text: &str) -> BTreeMap<String, String> {
    let mut families: Vec<(String, String)> = Vec::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').expect("TYPE name kind");
            families.push((name.to_string(), kind.to_string()));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        let name = series.split('{').next().expect("name");
        let (family, kind) = families.last().expect("sample before any TYPE");
        let ok = match kind.as_str() {
            "histogram" => [
                format!("{family}_bucket"),
                format!("{family}_sum"),
                format!("{family}_count"),
            ]
            .contains(&name.to_string()),
            _ => name == family,
        };
        assert!(ok, "{name} is not a sample of family {family} ({kind})");
        out.insert(series.to_string(), value.to_string());
    }
    out
}

/// The `le` values of `series` (a histogram, with its other labels as a prefix like `stage="Bound",`).
fn les(text: &str, name: &str, labels: &str) -> Vec<String> {
    let prefix = format!("{name}_bucket{{{labels}le=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| rest.split('"').next().expect("le").to_string())
        .collect()
}

/// Go's `prometheus.ExponentialBucketsRange`.
fn go_range(min: f64, max: f64, count: i32) -> Vec<f64> {
    let growth = (max / min).powf(1.0 / f64::from(count - 1));
    (0..count).map(|i| min * growth.powi(i)).collect()
}

fn assert_range(text: &str, name: &str, labels: &str, min: f64, max: f64, count: i32) {
    let got = les(text, name, labels);
    assert_eq!(
        got.len(),
        count as usize + 1,
        "{name}{{{labels}}} buckets: {got:?}"
    );
    assert_eq!(got.last().map(String::as_str), Some("+Inf"));
    for (g, want) in got.iter().zip(go_range(min, max, count)) {
        let g: f64 = g.parse().expect("le parses");
        assert!(
            (g - want).abs() <= want * 1e-12,
            "{name}: le {g} vs Go's {want}"
        );
    }
}

#[tokio::test]
async fn metrics_expose_upstream_names_labels_and_buckets() {
    let metrics = Metrics::new();
    metrics.observe_cycle(Duration::from_millis(7));
    metrics.observe_cycle(Duration::from_millis(100));
    metrics.observe_task_latency("Assumed", Duration::from_millis(60));
    metrics.observe_task_latency("Bound", Duration::from_millis(120));
    metrics.observe_attempt("scheduled");
    metrics.observe_attempt("scheduled");
    metrics.observe_attempt("unschedulable");
    let (addr, _stop, _task) = start(Arc::new(Readiness::new(true)), Some(metrics), false).await;
    assert_eq!(
        get(addr, "/healthz").await.status,
        404,
        "healthz not enabled"
    );

    let r = get(addr, "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers.get("content-type").map(String::as_str),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = r.body;
    let s = samples(&text);

    for (name, kind) in [
        (
            "volcano_worker_scheduling_cycle_duration_milliseconds",
            "histogram",
        ),
        ("volcano_update_snapshot_duration_milliseconds", "histogram"),
        (
            "volcano_action_scheduling_latency_milliseconds",
            "histogram",
        ),
        (
            "volcano_scheduling_stage_duration_milliseconds",
            "histogram",
        ),
        ("volcano_task_scheduling_latency_milliseconds", "histogram"),
        ("volcano_schedule_attempts_total", "counter"),
    ] {
        assert!(
            text.contains(&format!("\n# TYPE {name} {kind}\n")),
            "missing `# TYPE {name} {kind}` in\n{text}"
        );
    }
    assert!(!text.contains("_total_total") && !text.contains("milliseconds_milliseconds"));

    let exp: Vec<String> = [
        "5", "10", "20", "40", "80", "160", "320", "640", "1280", "2560", "5120", "10240", "20480",
        "40960", "81920", "+Inf",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        les(
            &text,
            "volcano_worker_scheduling_cycle_duration_milliseconds",
            ""
        ),
        exp
    );
    assert_eq!(
        les(&text, "volcano_update_snapshot_duration_milliseconds", ""),
        exp
    );
    assert_range(
        &text,
        "volcano_action_scheduling_latency_milliseconds",
        "action=\"allocate\",",
        1.0,
        2000.0,
        20,
    );
    for stage in ["Predicate", "Scoring"] {
        let l = format!("stage=\"{stage}\",");
        assert_range(
            &text,
            "volcano_scheduling_stage_duration_milliseconds",
            &l,
            0.1,
            500.0,
            20,
        );
    }
    for stage in ["Assumed", "Bound"] {
        let l = format!("stage=\"{stage}\",");
        assert_range(
            &text,
            "volcano_task_scheduling_latency_milliseconds",
            &l,
            50.0,
            60000.0,
            30,
        );
    }

    let v = |k: &str| {
        s.get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no sample {k}"))
    };
    let cycle = "volcano_worker_scheduling_cycle_duration_milliseconds";
    assert_eq!(v(&format!("{cycle}_bucket{{le=\"5\"}}")), "0");
    assert_eq!(v(&format!("{cycle}_bucket{{le=\"10\"}}")), "1");
    assert_eq!(v(&format!("{cycle}_bucket{{le=\"160\"}}")), "2");
    assert_eq!(v(&format!("{cycle}_bucket{{le=\"+Inf\"}}")), "2");
    assert_eq!(v(&format!("{cycle}_count")), "2");
    assert_eq!(
        v(&format!("{cycle}_sum")).parse::<f64>().expect("sum"),
        107.0
    );
    let task = "volcano_task_scheduling_latency_milliseconds";
    assert_eq!(v(&format!("{task}_count{{stage=\"Bound\"}}")), "1");
    assert_eq!(
        v(&format!("{task}_bucket{{stage=\"Bound\",le=\"50\"}}")),
        "0"
    );
    let assumed = les(&text, task, "stage=\"Assumed\",");
    assert_eq!(
        v(&format!(
            "{task}_bucket{{stage=\"Assumed\",le=\"{}\"}}",
            assumed[0]
        )),
        "0"
    );
    assert_eq!(
        v(&format!(
            "{task}_bucket{{stage=\"Assumed\",le=\"{}\"}}",
            assumed[1]
        )),
        "1"
    );
    assert_eq!(
        v(&format!("{task}_sum{{stage=\"Bound\"}}"))
            .parse::<f64>()
            .expect("sum"),
        120.0
    );
    assert_eq!(
        v("volcano_schedule_attempts_total{result=\"scheduled\"}"),
        "2"
    );
    assert_eq!(
        v("volcano_schedule_attempts_total{result=\"unschedulable\"}"),
        "1"
    );
    assert_eq!(v("volcano_schedule_attempts_total{result=\"error\"}"), "0");
}

#[tokio::test]
async fn magma_metrics_and_engine_counters_at_scrape_time() {
    let metrics = Metrics::new();
    let claims = Arc::new(AtomicU64::new(7));
    let c = claims.clone();
    metrics.set_engine_source(move || {
        (
            StatsSnapshot {
                attempts: 11,
                claims: c.load(Ordering::Relaxed),
                conflicts: 2,
                urgent_requeues: 1,
                unschedulable: 3,
                publications: 40,
                publish_nanos: 1_500_000_000,
                device_conflicts: 5,
                ..StatsSnapshot::default()
            },
            QueueDepths {
                active: 3,
                backoff: 4,
                unschedulable: 5,
                gated: 6,
                in_flight: 1,
                binding: 2,
                preempting: 1,
            },
        )
    });
    metrics.observe_bind(BindOutcomeLabel::Bound, Duration::from_millis(3));
    metrics.observe_bind(BindOutcomeLabel::AlreadyBound, Duration::from_millis(20));
    metrics.observe_throttle("bind", Duration::from_millis(1));
    metrics.observe_throttle("events", Duration::from_secs(60));
    metrics.set_leader(true);

    // One server for both (the app's choice when --listen-address == --healthz-address).
    let readiness = Arc::new(Readiness::new(false));
    readiness.set_synced();
    let (addr, _stop, _task) = start(readiness, Some(metrics.clone()), true).await;
    assert_eq!(get(addr, "/healthz").await.status, 200);
    assert_eq!(get(addr, "/readyz").await.status, 200);

    let text = get(addr, "/metrics").await.body;
    let s = samples(&text);
    let v = |k: &str| {
        s.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no sample {k} in\n{text}"))
    };
    assert_eq!(v("magma_claims_total"), "7");
    assert_eq!(v("magma_conflicts_total"), "2");
    assert_eq!(v("magma_device_conflicts_total"), "5");
    assert_eq!(v("magma_urgent_requeues_total"), "1");
    assert_eq!(v("magma_unschedulable_total"), "3");
    assert_eq!(v("magma_scheduling_attempts_total"), "11");
    assert_eq!(v("magma_snapshot_publications_total"), "40");
    assert_eq!(
        v("magma_snapshot_publication_seconds_total")
            .parse::<f64>()
            .ok(),
        Some(1.5)
    );
    for (q, n) in [
        ("active", "3"),
        ("backoff", "4"),
        ("unschedulable", "5"),
        ("gated", "6"),
        ("in_flight", "1"),
        ("binding", "2"),
    ] {
        assert_eq!(v(&format!("magma_queue_pods{{queue=\"{q}\"}}")), n, "{q}");
    }
    assert!(text.contains("\n# TYPE magma_queue_pods gauge\n"));
    assert_eq!(v("magma_bind_total{outcome=\"bound\"}"), "1");
    assert_eq!(v("magma_bind_total{outcome=\"already_bound\"}"), "1");
    assert_eq!(v("magma_bind_total{outcome=\"pod_gone\"}"), "0");
    assert_eq!(v("magma_bind_total{outcome=\"failed\"}"), "0");
    assert_eq!(v("magma_bind_duration_seconds_count"), "2");
    assert_eq!(
        v("magma_bind_duration_seconds_sum").parse::<f64>().ok(),
        Some(0.023)
    );
    assert_eq!(
        v("magma_api_throttle_wait_seconds_count{client=\"bind\"}"),
        "1"
    );
    assert_eq!(
        v("magma_api_throttle_wait_seconds_bucket{client=\"events\",le=\"+Inf\"}"),
        "1"
    );
    assert_eq!(
        v(&format!(
            "magma_api_throttle_wait_seconds_bucket{{client=\"events\",le=\"{}\"}}",
            les(
                &text,
                "magma_api_throttle_wait_seconds",
                "client=\"events\","
            )
            .iter()
            .rev()
            .nth(1)
            .expect("finite buckets")
        )),
        "0",
        "a 60 s wait lands only in +Inf"
    );
    assert_eq!(v("magma_leader"), "1");
    assert_eq!(
        v(&format!(
            "magma_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )),
        "1"
    );

    // Read at scrape time, not copied at registration.
    claims.store(9, Ordering::Relaxed);
    metrics.set_leader(false);
    let s = samples(&get(addr, "/metrics").await.body);
    assert_eq!(s.get("magma_claims_total").map(String::as_str), Some("9"));
    assert_eq!(s.get("magma_leader").map(String::as_str), Some("0"));
}

#[tokio::test]
async fn metrics_without_an_engine_source_report_zeros() {
    let text = Metrics::new().encode();
    let s = samples(&text);
    assert_eq!(s.get("magma_claims_total").map(String::as_str), Some("0"));
    assert_eq!(
        s.get("magma_queue_pods{queue=\"active\"}")
            .map(String::as_str),
        Some("0")
    );
    assert_eq!(s.get("magma_leader").map(String::as_str), Some("0"));
}
