//! Separate processes: the shipped `agent-scheduler` binary against the `kube-sim` binary,
//! each its own process, with this harness as a third (the pod creator and bind watcher). What
//! a user deploying Magma would see, and what it costs: the scheduler's and the simulator's
//! CPU per pod (from `/proc/<pid>/stat`), the scheduler's API requests per pod by verb and
//! resource (the simulator's request record, told apart from the harness's by `User-Agent`),
//! its open sockets, throughput against the API's own ceiling measured in the same run, and
//! created → bound latency.
//!
//! A pod counts as bound when the simulator committed its first binding (the `at` of its
//! [`kube_sim::BindingRecord`]), not when the harness's own watch saw it: at 3,000 pods/s on two
//! CPUs that watch is the slowest of the run and is at times force-closed, and its lag then read
//! as the scheduler's (P50s of 0.7–2.1 s where the bindings were committed in about 0.1 s;
//! BENCHMARKS.md, "History"). The watch still tells the harness when every pod is bound.
//!
//! Scenarios:
//! - **burst**: the scheduler runs and is ready; `pods` pods are created as fast as the
//!   creators go. With `unschedulable_every` = k, every k-th of them asks for more CPU than any
//!   node has: the run ends when the others are bound and each of those has its
//!   `PodScheduled=False` condition, and the report gives the scheduler's decision → condition
//!   written latency (`magma_condition_write_seconds`, from its buckets) and created →
//!   condition committed (the simulator's write record).
//! - **backlog**: `pods` pods are created while no scheduler runs; then it starts. Time from
//!   its start to the last bind, and from its readiness (lists done, leading) to the last
//!   bind: the drain rate against the ceiling.
//!
//! The CPU per pod runs to the end of the scheduler's events tail: after the last bind the
//! harness waits until the scheduler reports nothing left to write
//! (`magma_status_writes_pending`, polled once a second: a scrape is its CPU too), then until
//! both processes are idle. A lane behind its budget sends in batches that cost less than
//! `until_idle`'s threshold, so idleness alone ended the count early.
//!
//! With `pin`, the simulator runs on CPU 0 and the scheduler and the harness on the others
//! (`taskset`), in the ceiling run and the scenario alike, so the API server has the same CPU
//! in both; unpinned, all three share every CPU and the fraction also says how much CPU the
//! scheduler took from the API server.
//!
//! The ceiling ("blast"): before the scenario, `pods` pods for a scheduler nobody runs are
//! created in their own namespace and bound by the harness itself, as fast as `creators`
//! concurrent requests go, over the same transport and with the scheduler's own client set-up
//! (`magma_kube::process::client_for`: HTTP/2 over HTTPS), while the harness watches them as it
//! watches the scenario's pods: the rate the API accepts bindings at. It runs on a simulator
//! of its own, started like the scenario's and stopped before it, so both binding windows
//! meet the API server in the same state: nodes loaded, `pods` pods just created, none bound
//! yet. On one simulator the scenario came second, and kube-sim binds its first window of
//! pods faster than any later one (its heap reuses what the creates freed, then grows, and
//! first-touch page zeroing makes its kubelet's status writes about twice as costly): the same
//! binder run twice bound 0.68–0.79 as fast the second time (BENCHMARKS.md, "History").
//! A second run after the scenario was tried, to bracket it, and dropped: with two to three
//! times the pods stored, and the informer (below) listing them all, it is no like-for-like
//! sample (14–31 % below the first unpinned, 10–13 % above it pinned).
//!
//! That is the backlog's ceiling. A burst cannot bind faster than its pods are created, so its
//! ceiling is the lower of that and the rate its pods were created at (first create sent to
//! last create answered, in the same run; the creates share the API server with the binds). A
//! harness that creates and binds by itself was tried as a burst's ceiling and dropped: it
//! measured the harness's own CPU, not the API's, and came out slower than the scenario.
//!
//! The binding ceiling is a scheduler that takes no time, and such a scheduler still watches
//! pods: during the ceiling run the harness also holds the scheduler's own pod informer (the
//! same field selector, every event decoded as the scheduler decodes it, then dropped), so the
//! API serves that watch in the ceiling as in the scenario. `bare_ceiling` leaves it out (the
//! API's bindings alone, as this harness measured before).

use crate::report::Latency;
use anyhow::Context;
use futures::StreamExt;
use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher::{self, Event};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Mutex;

/// The harness's own `User-Agent`: requests without it are the scheduler's.
const HARNESS_AGENT: &str = "magma-perf";

#[derive(Debug, Clone)]
pub struct ProcOptions {
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub creators: usize,
    pub backlog: bool,
    /// Serve the simulator over HTTPS (self-signed, as a real API server); needs a kube-sim
    /// with `--tls`.
    pub tls: bool,
    /// The simulator on CPU 0, the scheduler and the harness on the others (see the module doc).
    pub pin: bool,
    /// Ceiling runs without the scheduler's pod informer (see the module doc).
    pub bare_ceiling: bool,
    pub scheduler_bin: PathBuf,
    pub sim_bin: PathBuf,
    pub kube_api_qps: f64,
    pub kube_api_burst: u32,
    pub timeout: Duration,
    pub progress: bool,
    /// Every k-th scenario pod is unschedulable (module doc); `None`: none.
    pub unschedulable_every: Option<usize>,
    /// More flags for the scheduler (e.g. `--event-qps=...`).
    pub scheduler_args: Vec<String>,
}

impl ProcOptions {
    /// The binaries beside this executable (`target/release/` for `cargo run --release`).
    pub fn sibling(name: &str) -> PathBuf {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join(name)))
            .unwrap_or_else(|| PathBuf::from(name))
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcReport {
    pub scenario: String,
    pub transport: String,
    pub nodes: usize,
    pub pods: usize,
    pub workers: usize,
    pub bound: usize,
    /// Bound pods ÷ (last bind − first create), or − the scheduler's readiness for the backlog.
    pub throughput_pods_per_s: f64,
    /// Bindings/s the API accepted from the harness itself (same run, same transport).
    pub ceiling_pods_per_s: f64,
    /// Burst: pods/s created (first create sent → last create answered).
    pub created_pods_per_s: Option<f64>,
    /// Throughput ÷ the scenario's ceiling: for a backlog the binding ceiling, for a burst the
    /// lower of that and the creation rate.
    pub fraction_of_ceiling: f64,
    /// Whether the ceiling runs held the scheduler's pod informer (not `bare_ceiling`).
    pub ceiling_with_informer: bool,
    /// Backlog: scheduler start → last bind.
    pub drain_s: Option<f64>,
    /// Backlog: scheduler start → ready (its lists done).
    pub ready_s: Option<f64>,
    /// CPUs the simulator was pinned to (`--pin`), else empty.
    pub sim_cpus: String,
    pub latency_ms: Latency,
    /// Scheduler CPU (user + system) per bound pod, over the scenario until it is idle again.
    pub scheduler_cpu_ms_per_pod: f64,
    pub sim_cpu_ms_per_pod: f64,
    /// The scheduler's context switches (voluntary and not, over its threads) per bound pod,
    /// over the same span as its CPU: each is a thread that parked and was woken again.
    pub scheduler_context_switches_per_pod: f64,
    pub scheduler_rss_mib: f64,
    /// The scheduler's requests per bound pod, by `verb resource[/subresource]`.
    pub requests_per_pod: BTreeMap<String, f64>,
    pub scheduler_requests_per_pod: f64,
    /// The scheduler's requests by protocol (`HTTP/2` over HTTPS where negotiated), counts.
    pub scheduler_requests_by_protocol: BTreeMap<String, u64>,
    /// Sockets the scheduler holds open at the end (its connection pool).
    pub scheduler_open_sockets: usize,
    /// The simulator's accepted connections per pod over the scenario, when it reports them.
    pub new_connections_per_pod: Option<f64>,
    /// Watches the simulator force-closed for not keeping up (as the real watch cache does).
    pub watches_forced_closed: u64,
    /// The same, by watch: `resource labels fields` from the simulator's log, with counts.
    pub forced_closes_by_watch: BTreeMap<String, u64>,
    pub duplicate_binds: u64,
    pub lost_pods: u64,
    /// Unschedulable pods in the scenario (`unschedulable_every`), and how many of them the
    /// harness saw with their `PodScheduled=False` condition.
    pub unschedulable: usize,
    pub conditions_seen: usize,
    /// The scheduler's decision → condition written (`magma_condition_write_seconds`: the upper
    /// bound of the bucket each quantile falls in), ms.
    pub condition_write_ms: Option<BucketQuantiles>,
    /// Created → condition committed by the simulator (its write record), ms.
    pub condition_seen_ms: Option<Latency>,
    /// The scheduler's Scheduled events written / dropped (its metric).
    pub events_dropped: u64,
}

/// Quantiles of a Prometheus histogram, each the upper bound of the bucket it falls in.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BucketQuantiles {
    pub count: u64,
    pub p50: f64,
    pub p99: f64,
    pub max_bucket: f64,
}

impl BucketQuantiles {
    /// From the exposition's `<name>_bucket{le="…"} n` lines (cumulative), scaled by `scale`.
    pub fn from_metrics(text: &str, name: &str, scale: f64) -> Option<BucketQuantiles> {
        let prefix = format!("{name}_bucket{{le=\"");
        let mut buckets: Vec<(f64, u64)> = text
            .lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(&prefix)?;
                let (le, n) = rest.split_once("\"} ")?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((le, n.trim().parse().ok()?))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = buckets.last()?.1;
        if count == 0 {
            return Some(BucketQuantiles::default());
        }
        let q = |f: f64| {
            let want = (count as f64 * f).ceil() as u64;
            buckets
                .iter()
                .find(|(_, n)| *n >= want)
                .map_or(f64::INFINITY, |(le, _)| le * scale)
        };
        Some(BucketQuantiles {
            count,
            p50: q(0.5),
            p99: q(0.99),
            max_bucket: q(1.0),
        })
    }
}

impl ProcReport {
    pub fn print(&self) {
        println!(
            "processes/{} over {}: {} nodes, {} pods, {} workers",
            self.scenario, self.transport, self.nodes, self.pods, self.workers
        );
        let ceiling = match self.created_pods_per_s {
            Some(c) => format!(
                "ceiling: created at {c:.0}/s, the API binds {:.0}/s",
                self.ceiling_pods_per_s
            ),
            None => format!("API ceiling {:.0}/s", self.ceiling_pods_per_s),
        };
        let informer = if self.ceiling_with_informer {
            ", ceilings with the scheduler's pod informer"
        } else {
            ", bare ceilings"
        };
        println!(
            "  bound {}  throughput {:.0} pods/s = {:.0}% of the {ceiling}{informer}{}",
            self.bound,
            self.throughput_pods_per_s,
            self.fraction_of_ceiling * 100.0,
            self.drain_s
                .zip(self.ready_s)
                .map(|(d, r)| format!("  drained in {d:.2} s from start, ready after {r:.2} s"))
                .unwrap_or_default()
        );
        if !self.sim_cpus.is_empty() {
            println!(
                "  pinned: kube-sim on CPU {}, the scheduler and the harness on the others",
                self.sim_cpus
            );
        }
        println!(
            "  created→bound ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            self.latency_ms.p50, self.latency_ms.p90, self.latency_ms.p99, self.latency_ms.max
        );
        println!(
            "  CPU per pod: scheduler {:.3} ms ({:.1} context switches), kube-sim {:.3} ms;  scheduler RSS {:.0} MiB, {} open sockets",
            self.scheduler_cpu_ms_per_pod,
            self.scheduler_context_switches_per_pod,
            self.sim_cpu_ms_per_pod,
            self.scheduler_rss_mib,
            self.scheduler_open_sockets
        );
        let by: Vec<String> = self
            .requests_per_pod
            .iter()
            .map(|(k, v)| format!("{k} {v:.3}"))
            .collect();
        println!(
            "  scheduler requests per pod {:.3}: {}",
            self.scheduler_requests_per_pod,
            by.join(", ")
        );
        let protocols: Vec<String> = self
            .scheduler_requests_by_protocol
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        println!("  scheduler requests by protocol: {}", protocols.join(", "));
        if let Some(c) = self.new_connections_per_pod {
            println!("  new connections per pod {c:.4}");
        }
        println!(
            "  watches force-closed by the API: {}{}",
            self.watches_forced_closed,
            if self.forced_closes_by_watch.is_empty() {
                String::new()
            } else {
                let by: Vec<String> = self
                    .forced_closes_by_watch
                    .iter()
                    .map(|(w, n)| format!("{n}× {w}"))
                    .collect();
                format!(" ({})", by.join("; "))
            }
        );
        if self.unschedulable > 0 {
            println!(
                "  unschedulable pods {}: conditions seen {}; decision→written ms (bucket bounds) {}; created→committed ms {}",
                self.unschedulable,
                self.conditions_seen,
                self.condition_write_ms
                    .as_ref()
                    .map_or("n/a".into(), |q| format!(
                        "p50 ≤{:.1} p99 ≤{:.1} max ≤{:.1} ({} written)",
                        q.p50, q.p99, q.max_bucket, q.count
                    )),
                self.condition_seen_ms
                    .as_ref()
                    .map_or("n/a".into(), |l| format!(
                        "p50 {:.1} p99 {:.1} max {:.1}",
                        l.p50, l.p99, l.max
                    )),
            );
        }
        if self.events_dropped > 0 {
            println!("  events dropped by the scheduler: {}", self.events_dropped);
        }
        if self.duplicate_binds > 0 || self.lost_pods > 0 {
            println!(
                "  integrity: VIOLATED: {} duplicate bind(s), {} pod(s) not bound",
                self.duplicate_binds, self.lost_pods
            );
        } else {
            println!("  integrity: OK (every pod bound exactly once)");
        }
    }
}

/// A child process killed when dropped.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    /// `cpus`: run it under `taskset -c cpus` (the pid is the binary's: taskset execs it).
    fn spawn(
        name: &'static str,
        bin: &Path,
        args: &[String],
        dir: &Path,
        cpus: Option<&str>,
    ) -> anyhow::Result<Proc> {
        anyhow::ensure!(
            bin.exists(),
            "{} not found: build it first (cargo build --release -p magma-kube -p kube-sim) or \
             pass its path",
            bin.display()
        );
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log)?;
        let mut cmd = match cpus {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.arg("-c").arg(c).arg(bin);
                t
            }
            None => Command::new(bin),
        };
        if name == "kube-sim" && std::env::var_os("RUST_LOG").is_none() {
            // The simulator's warnings (a forced watch close) reach its log; it logs only
            // errors by default. The scheduler keeps its own default.
            cmd.env("RUST_LOG", "warn");
        }
        let child = cmd
            .args(args)
            .stdout(out.try_clone()?)
            .stderr(out)
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Proc { name, child, log })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with the log's tail if the process has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            anyhow::bail!(
                "{} exited ({status}):\n{}",
                self.name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        Ok(())
    }

    fn stop(&mut self) {
        // SIGTERM first, so the scheduler shuts down as in production.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// CPU time (user + system) of a process so far, from `/proc/<pid>/stat`.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may contain spaces) in parentheses.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("malformed /proc stat")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks: u64 =
        f.get(11).context("utime")?.parse::<u64>()? + f.get(12).context("stime")?.parse::<u64>()?;
    Ok(Duration::from_nanos(ticks * 1_000_000_000 / clock_ticks()))
}

/// Context switches (voluntary and involuntary) of a process's live threads so far, from
/// `/proc/<pid>/task/*/status`.
pub fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter_map(|l| {
                    l.strip_prefix("voluntary_ctxt_switches:")
                        .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                })
                .sum::<u64>()
        })
        .sum()
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `GET path` on a plain-HTTP admin port: the status code.
async fn admin_get(port: u16, path: &str) -> Option<u16> {
    admin_fetch(port, path).await.map(|(code, _)| code)
}

/// `GET path` on a plain-HTTP admin port: the status code and the whole answer.
async fn admin_fetch(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text))
}

/// The scheduler's events and conditions still queued or in flight
/// (`magma_status_writes_pending`, both lanes); `None` if it does not report them.
async fn status_writes_pending(admin: u16) -> Option<u64> {
    let (_, text) = admin_fetch(admin, "/metrics").await?;
    let mut found = false;
    let mut sum = 0u64;
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("magma_status_writes_pending{") {
            found = true;
            sum += rest.rsplit(' ').next()?.trim().parse::<u64>().ok()?;
        }
    }
    found.then_some(sum)
}

/// Until the scheduler has written every event and condition it queued, at most `cap`: its
/// events tail is its pods' cost, and at a low events budget it runs below [`until_idle`]'s
/// threshold. A scheduler that does not report them (another build) is not waited for.
async fn until_status_written(admin: u16, cap: Duration) {
    let end = Instant::now() + cap;
    while let Some(n) = status_writes_pending(admin).await {
        if n == 0 || Instant::now() > end {
            return;
        }
        // Seldom: each scrape is the scheduler's CPU too.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The simulator's JSON records (`/sim/<what>`), through the harness's client.
async fn sim_records(client: &kube::Client, what: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let req = http::Request::get(format!("/sim/{what}")).body(Vec::new())?;
    let text = client.request_text(req).await?;
    Ok(serde_json::from_str(&text)?)
}

/// When each pod the harness's watch saw bound had its first binding committed (module doc),
/// or, given the simulator's write records, its first write of that kind:
/// the simulator's records of namespace `ns`, their wall-clock `at` turned into this process's
/// `Instant`s (one machine, one clock). A pod without a record keeps the time the watch saw it.
fn committed_bindings(
    records: &[serde_json::Value],
    ns: &str,
    seen: &HashMap<String, Instant>,
) -> HashMap<String, Instant> {
    let (now, wall) = (Instant::now(), SystemTime::now());
    let to_instant = |at: SystemTime| match wall.duration_since(at) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(e) => now + e.duration(),
    };
    let mut first: HashMap<&str, Instant> = HashMap::new();
    for r in records.iter().filter(|r| r["namespace"] == ns) {
        let (Some(name), Ok(at)) = (
            r["name"].as_str(),
            serde_json::from_value::<SystemTime>(r["at"].clone()),
        ) else {
            continue;
        };
        let t = to_instant(at);
        first
            .entry(name)
            .and_modify(|e| *e = (*e).min(t))
            .or_insert(t);
    }
    seen.iter()
        .map(|(name, t)| {
            (
                name.clone(),
                first.get(name.as_str()).copied().unwrap_or(*t),
            )
        })
        .collect()
}

/// One of the simulator's counters (`/sim/stats`, camelCase), if it reports it.
async fn sim_stat(client: &kube::Client, name: &str) -> Option<u64> {
    let req = http::Request::get("/sim/stats").body(Vec::new()).ok()?;
    let v: serde_json::Value = serde_json::from_str(&client.request_text(req).await.ok()?).ok()?;
    v.get(name)?.as_u64()
}

async fn sim_connections(client: &kube::Client) -> Option<u64> {
    sim_stat(client, "connectionsAccepted").await
}

struct Cluster {
    sim: Proc,
    kubeconfig: PathBuf,
    client: kube::Client,
}

async fn start_sim(o: &ProcOptions, dir: &Path, cpus: Option<&str>) -> anyhow::Result<Cluster> {
    let port = free_port()?;
    let kubeconfig = dir.join("kubeconfig");
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--nodes",
        &o.nodes.to_string(),
        "--kubeconfig-out",
        &kubeconfig.display().to_string(),
        "--history",
        &(o.pods * 12).max(100_000).to_string(),
        "--auto-create-namespaces",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if o.tls {
        args.push("--tls".into());
    }
    let mut sim = Proc::spawn("kube-sim", &o.sim_bin, &args, dir, cpus)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kubeconfig.exists() || std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        sim.check_alive()?;
        anyhow::ensure!(Instant::now() < deadline, "kube-sim did not start in 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let yaml = std::fs::read_to_string(&kubeconfig)?;
    let (mut cfg, _) = crate::e2e::client_from(&yaml, true).await?;
    cfg.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(HARNESS_AGENT),
    ));
    // The scheduler's own client set-up (HTTP/2 over HTTPS): the ceiling and the creators use
    // the transport the scheduler uses, so the ceiling compares like with like.
    let client = magma_kube::process::client_for(&cfg).await?;
    Ok(Cluster {
        sim,
        kubeconfig,
        client,
    })
}

fn start_scheduler(
    o: &ProcOptions,
    c: &Cluster,
    dir: &Path,
    cpus: Option<&str>,
) -> anyhow::Result<(Proc, u16)> {
    let admin = free_port()?;
    let args: Vec<String> = vec![
        format!("--kubeconfig={}", c.kubeconfig.display()),
        format!("--scheduler-worker-count={}", o.workers),
        format!("--kube-api-qps={}", o.kube_api_qps),
        format!("--kube-api-burst={}", o.kube_api_burst),
        "--enable-healthz=true".into(),
        "--enable-metrics=true".into(),
        format!("--healthz-address=127.0.0.1:{admin}"),
        format!("--listen-address=127.0.0.1:{admin}"),
        "--leader-elect=false".into(),
    ];
    let args: Vec<String> = args
        .into_iter()
        .chain(o.scheduler_args.iter().cloned())
        .collect();
    Ok((
        Proc::spawn("agent-scheduler", &o.scheduler_bin, &args, dir, cpus)?,
        admin,
    ))
}

async fn wait_ready(p: &mut Proc, admin: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while admin_get(admin, "/readyz").await != Some(200) {
        p.check_alive()?;
        anyhow::ensure!(
            Instant::now() < deadline,
            "the scheduler was not ready in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Which watches the simulator force-closed: its "Forcing watcher close" log lines, by the
/// watch's resource, label and field selectors.
fn forced_closes(log: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut by = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("Forcing watcher close")) {
        let line = strip_ansi(line);
        let line = line.as_str();
        // `resource=R labels=L fields=F buffer=N`, the selectors in Debug form (with spaces).
        let between = |from: &str, to: &str| {
            line.split_once(from)
                .map(|(_, rest)| rest.split_once(to).map_or(rest, |(v, _)| v))
                .unwrap_or("")
                .to_string()
        };
        let key = format!(
            "{} labels={} fields={}",
            between("resource=", " "),
            between("labels=", " fields="),
            between("fields=", " buffer=")
        );
        *by.entry(key).or_default() += 1;
    }
    by
}

/// The text of a log line without its terminal colour codes (`ESC [ … m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Where each process runs under `--pin`: the simulator's CPU list and the others'.
#[derive(Debug, Clone)]
struct Pinning {
    sim: String,
    rest: String,
}

impl Pinning {
    /// CPU 0 for the simulator, the rest for the scheduler and this harness (all of this
    /// process's threads, and those it starts later, inherit the mask). Decided once per
    /// process: after the first call this process's own mask is `rest`, and an A/B's later
    /// runs must get the same split, not one counted from that mask.
    fn apply() -> anyhow::Result<Pinning> {
        static FIRST: std::sync::OnceLock<Pinning> = std::sync::OnceLock::new();
        if let Some(p) = FIRST.get() {
            return Ok(p.clone());
        }
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        anyhow::ensure!(n >= 2, "--pin needs at least 2 CPUs, this machine has {n}");
        let p = Pinning {
            sim: "0".into(),
            rest: if n == 2 {
                "1".into()
            } else {
                format!("1-{}", n - 1)
            },
        };
        let status = Command::new("taskset")
            .args(["-a", "-p", "-c", &p.rest, &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status()
            .context("running taskset (util-linux) for --pin")?;
        anyhow::ensure!(
            status.success(),
            "taskset could not pin the harness: {status}"
        );
        Ok(FIRST.get_or_init(|| p).clone())
    }
}

/// Wait until a process's CPU time stops growing (under 5 ms per 500 ms), at most `cap`.
async fn until_idle(pid: u32, cap: Duration) -> Duration {
    let end = Instant::now() + cap;
    let mut last = cpu_time(pid).unwrap_or_default();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = cpu_time(pid).unwrap_or_default();
        if now.saturating_sub(last) < Duration::from_millis(5) || Instant::now() > end {
            return now;
        }
        last = now;
    }
}

/// CPU of an unschedulable scenario pod: more than any simulated node has.
const UNSCHEDULABLE_CPU: &str = "100000";

fn pod_object(ns: &str, name: &str, scheduler: &str, cpu: &str) -> anyhow::Result<Pod> {
    let mut v = kube_sim::pod_object(ns, name, scheduler, cpu, "128Mi");
    v["metadata"]["labels"] = serde_json::json!({"magma-procs": "1"});
    Ok(serde_json::from_value(v)?)
}

/// A scenario's creation: when each pod was created, and which of them (by index) ask for more
/// than any node has.
struct Tracked<'a> {
    created: Arc<Mutex<HashMap<String, Instant>>>,
    unschedulable: &'a dyn Fn(usize) -> bool,
}

/// Create `n` pods named `{prefix}{i}` in `ns` for `scheduler`, `creators` at a time.
async fn create_pods(
    client: &kube::Client,
    ns: &str,
    prefix: &str,
    scheduler: &str,
    n: usize,
    creators: usize,
    scenario: Option<Tracked<'_>>,
) -> anyhow::Result<()> {
    let (created, unschedulable) = match scenario {
        Some(t) => (Some(t.created), t.unschedulable),
        None => (None, &(|_| false) as &dyn Fn(usize) -> bool),
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let sem = Arc::new(tokio::sync::Semaphore::new(creators.max(1)));
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        let name = format!("{prefix}{i:07}");
        let cpu = if unschedulable(i) {
            UNSCHEDULABLE_CPU
        } else {
            "100m"
        };
        let p = pod_object(ns, &name, scheduler, cpu)?;
        let (api, created) = (api.clone(), created.clone());
        tasks.push(tokio::spawn(async move {
            if let Some(c) = &created {
                c.lock().await.insert(name, Instant::now());
            }
            let r = api.create(&PostParams::default(), &p).await;
            drop(permit);
            r.map(|_| ())
        }));
    }
    for t in tasks {
        t.await?.context("creating a pod")?;
    }
    Ok(())
}

/// The harness's bind watch: when each pod of namespace `ns` (labelled `magma-procs=1`) was
/// first seen bound. Runs in the ceiling run too, so the API serves the harness's watch in both.
/// Pods are decoded as the scheduler decodes them (`magma_kube::slim::Pod`: name and node are
/// all this watch reads): decoding full k8s-openapi pods made the harness the slowest watcher
/// of a 3,000 pods/s burst on two CPUs, often force-closed by the simulator, and its waits used
/// up the dispatch budget all watches share, so the scheduler's watch was closed with it
/// (13 of 32 runs; with slim pods 4 of 16: on two saturated CPUs every watcher still lags at
/// times; BENCHMARKS.md, "History").
fn bind_watch(
    client: &kube::Client,
    ns: &str,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
) -> tokio::task::JoinHandle<()> {
    watch_scenario(client, ns, bound, None)
}

/// [`bind_watch`], also noting when each pod was first seen with its `PodScheduled=False`
/// `Unschedulable` condition (`conditioned`).
fn watch_scenario(
    client: &kube::Client,
    ns: &str,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
    conditioned: Option<Arc<Mutex<HashMap<String, Instant>>>>,
) -> tokio::task::JoinHandle<()> {
    let api: Api<magma_kube::slim::Pod> = Api::namespaced(client.clone(), ns);
    let wc = watcher::Config::default().labels("magma-procs=1");
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, wc).boxed();
        while let Some(ev) = s.next().await {
            let Ok(Event::Apply(p) | Event::InitApply(p)) = ev else {
                continue;
            };
            let Some(name) = p.metadata.name.clone() else {
                continue;
            };
            if p.spec.and_then(|s| s.node_name).is_some() {
                bound.lock().await.entry(name).or_insert_with(Instant::now);
            } else if let Some(c) = &conditioned
                && p.status
                    .and_then(|s| s.conditions)
                    .into_iter()
                    .flatten()
                    .any(|c| {
                        c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                    })
            {
                c.lock().await.entry(name).or_insert_with(Instant::now);
            }
        }
    })
}

/// A zero-cost scheduler's pod informer: the scheduler's own pod watch (its field selector),
/// every event decoded into the scheduler's pod type and dropped.
fn informer_watch(client: &kube::Client) -> tokio::task::JoinHandle<()> {
    let api: Api<magma_kube::slim::Pod> = Api::all(client.clone());
    tokio::spawn(async move {
        let mut s = watcher::watcher(api, magma_kube::watch::pod_watch_config()).boxed();
        while s.next().await.is_some() {}
    })
}

/// The API's binding ceiling over this transport (module doc): `n` pods for a scheduler nobody
/// runs, in their own namespace, bound by the harness itself `creators` at a time.
async fn ceiling(o: &ProcOptions, client: &kube::Client) -> anyhow::Result<f64> {
    let (nodes, n, creators) = (o.nodes, o.pods, o.creators);
    let ns = "magma-blast";
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await;
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    // The same watch as the scenario's, started as early (before the pods exist), so the
    // harness loads the API alike in both runs.
    let watch = bind_watch(client, ns, Arc::default());
    let informer = (!o.bare_ceiling).then(|| informer_watch(client));
    create_pods(client, ns, "blast-", "nobody", n, creators, None).await?;
    let sem = Arc::new(tokio::sync::Semaphore::new(creators.max(1)));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        let api = api.clone();
        let name = format!("blast-{i:07}");
        let node = kube_sim::node_name(i % nodes.max(1));
        tasks.push(tokio::spawn(async move {
            let ok = crate::e2e::post_binding(&api, &name, node).await;
            drop(permit);
            ok
        }));
    }
    let mut ok = 0usize;
    for t in tasks {
        ok += usize::from(t.await.unwrap_or(false));
    }
    let rate = ok as f64 / start.elapsed().as_secs_f64();
    watch.abort();
    if let Some(i) = informer {
        i.abort();
    }
    anyhow::ensure!(ok == n, "the ceiling run bound {ok} of {n} pods");
    Ok(rate)
}

pub async fn run(o: &ProcOptions) -> anyhow::Result<ProcReport> {
    anyhow::ensure!(
        o.pods > 0 && o.nodes > 0,
        "--pods and --nodes must be positive"
    );
    let dir = std::env::temp_dir().join(format!("magma-procs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let pin = if o.pin { Some(Pinning::apply()?) } else { None };
    let sched_cpus = pin.as_ref().map(|p| p.rest.as_str());
    let sim_cpus = pin.as_ref().map(|p| p.sim.as_str());
    // The ceiling on a simulator of its own (module doc), gone before the scenario's starts.
    let ceiling_rate = {
        let dir = dir.join("ceiling");
        std::fs::create_dir_all(&dir)?;
        let mut c = start_sim(o, &dir, sim_cpus).await?;
        let rate = ceiling(o, &c.client).await;
        c.sim.stop();
        rate?
    };
    let mut c = start_sim(o, &dir, sim_cpus).await?;
    let client = c.client.clone();

    // The bind watch over the scenario's pods.
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bound: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let conditioned: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch_task = watch_scenario(&client, "default", bound.clone(), Some(conditioned.clone()));
    let every = o.unschedulable_every.filter(|&k| k > 0);
    let is_unschedulable = move |i: usize| every.is_some_and(|k| (i + 1).is_multiple_of(k));
    let unschedulable = (0..o.pods).filter(|&i| is_unschedulable(i)).count();
    let expected = o.pods - unschedulable;

    let mut requests_before = sim_records(&client, "requests").await?.len();
    let mut connections_before = sim_connections(&client).await;
    let create_scenario_pods = || {
        create_pods(
            &client,
            "default",
            "procs-",
            "agent-scheduler",
            o.pods,
            o.creators,
            Some(Tracked {
                created: created.clone(),
                unschedulable: &is_unschedulable,
            }),
        )
    };
    // Burst: the simulator's cost includes the creates (a real API server serves them too);
    // backlog: from the scheduler's start, which lists the backlog.
    let mut ready_at = None;
    let mut created_rate = None;
    let mut sched_switches0 = 0;
    let (mut sched, admin, start, sched_cpu0, sim_cpu_start) = if o.backlog {
        create_scenario_pods().await?;
        let sim_cpu0 = cpu_time(c.sim.pid())?;
        let (s, admin) = start_scheduler(o, &c, &dir, sched_cpus)?;
        let start = Instant::now();
        // Readiness, polled beside the drain (the scheduler binds from the moment it is).
        ready_at = Some(tokio::spawn(async move {
            while admin_get(admin, "/readyz").await != Some(200) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Instant::now()
        }));
        (s, admin, start, Duration::ZERO, sim_cpu0)
    } else {
        let (mut s, admin) = start_scheduler(o, &c, &dir, sched_cpus)?;
        wait_ready(&mut s, admin).await?;
        // Idle before the burst: its start-up (lists, caches) is not the pods' cost.
        let cpu0 = until_idle(s.pid(), Duration::from_secs(10)).await;
        sched_switches0 = context_switches(s.pid());
        requests_before = sim_records(&client, "requests").await?.len();
        connections_before = sim_connections(&client).await;
        let sim_cpu0 = cpu_time(c.sim.pid())?;
        let start = Instant::now();
        create_scenario_pods().await?;
        created_rate = Some(o.pods as f64 / start.elapsed().as_secs_f64().max(1e-6));
        (s, admin, start, cpu0, sim_cpu0)
    };
    let bar = crate::progress::bar(o.pods as u64, o.progress);
    let deadline = Instant::now() + o.timeout;
    loop {
        let n = bound.lock().await.len();
        let c = conditioned.lock().await.len();
        bar.set_position((n + c) as u64);
        if (n >= expected && c >= unschedulable) || Instant::now() > deadline {
            break;
        }
        sched.check_alive()?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    // Until both are idle again: the scheduler's events and conditions count too.
    until_status_written(admin, Duration::from_secs(30)).await;
    let sched_cpu1 = until_idle(sched.pid(), Duration::from_secs(30)).await;
    let sched_switches1 = context_switches(sched.pid());
    let sim_cpu1 = until_idle(c.sim.pid(), Duration::from_secs(10)).await;
    let metrics = admin_fetch(admin, "/metrics").await.map(|(_, t)| t);
    let rss = rss_mib(sched.pid());
    let sockets = open_sockets(sched.pid());
    let requests = sim_records(&client, "requests").await?;
    let connections_after = sim_connections(&client).await;
    let forced_closed = sim_stat(&client, "watchesForcedClosed").await.unwrap_or(0);
    let bindings = sim_records(&client, "bindings").await?;
    // The unschedulable pods' condition patches, committed (their only status writes).
    let condition_writes: Vec<serde_json::Value> = if unschedulable > 0 {
        sim_records(&client, "writes")
            .await?
            .into_iter()
            .filter(|w| w["verb"] == "patch" && w["resource"] == "pods/status" && w["code"] == 200)
            .collect()
    } else {
        Vec::new()
    };
    sched.stop();
    watch_task.abort();

    let created = created.lock().await;
    let seen = bound.lock().await;
    let conditioned = conditioned.lock().await;
    let condition_seen_ms = (unschedulable > 0)
        .then(|| -> anyhow::Result<Latency> {
            let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
            // When each condition was committed (not when the harness's watch, the slowest of
            // a burst, saw it), as for the bindings.
            let committed = committed_bindings(&condition_writes, "default", &conditioned);
            for (name, t) in committed.iter() {
                if let Some(at) = created.get(name) {
                    h.record(t.saturating_duration_since(*at).as_nanos().max(1) as u64)?;
                }
            }
            Ok(Latency::from_histogram(&h))
        })
        .transpose()?;
    let metric_sum = |series: &str| -> u64 {
        metrics.as_deref().map_or(0, |t| {
            t.lines()
                .filter_map(|l| l.strip_prefix(series))
                .filter_map(|v| v.rsplit(' ').next()?.trim().parse::<u64>().ok())
                .sum()
        })
    };
    let bound = committed_bindings(&bindings, "default", &seen);
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)?;
    let mut last = start;
    for (name, t) in bound.iter() {
        if let Some(at) = created.get(name) {
            h.record(t.saturating_duration_since(*at).as_nanos().max(1) as u64)?;
        }
        last = last.max(*t);
    }
    let n = bound.len().max(1) as f64;
    let elapsed = last
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-6);
    let mut by: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0usize;
    let mut by_protocol: BTreeMap<String, u64> = BTreeMap::new();
    for r in requests.iter().skip(requests_before) {
        if r["user_agent"].as_str() == Some(HARNESS_AGENT) {
            continue;
        }
        let sub = r["subresource"].as_str().unwrap_or("");
        let key = format!(
            "{} {}{}{}",
            r["verb"].as_str().unwrap_or("?"),
            r["resource"].as_str().unwrap_or("?"),
            if sub.is_empty() { "" } else { "/" },
            sub
        );
        *by.entry(key).or_default() += 1.0;
        *by_protocol
            .entry(r["http_version"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
        total += 1;
    }
    for v in by.values_mut() {
        *v /= n;
    }
    let mut seen = std::collections::HashSet::new();
    let duplicate_binds = bindings
        .iter()
        .filter(|b| b["namespace"] == "default")
        .filter(|b| !seen.insert(b["name"].as_str().unwrap_or("").to_owned()))
        .count() as u64;
    let ready = match ready_at {
        Some(t) if t.is_finished() => Some(t.await?),
        Some(t) => {
            t.abort();
            anyhow::bail!("the scheduler bound the backlog but never reported ready");
        }
        None => None,
    };
    let throughput = match ready {
        Some(r) => bound.len() as f64 / last.saturating_duration_since(r).as_secs_f64().max(1e-6),
        None => bound.len() as f64 / elapsed,
    };
    let mut report = ProcReport {
        scenario: if o.backlog { "backlog" } else { "burst" }.into(),
        transport: if o.tls { "HTTPS" } else { "HTTP" }.into(),
        nodes: o.nodes,
        pods: o.pods,
        workers: o.workers,
        bound: bound.len(),
        throughput_pods_per_s: throughput,
        ceiling_pods_per_s: ceiling_rate,
        created_pods_per_s: created_rate,
        fraction_of_ceiling: throughput
            / created_rate
                .map_or(ceiling_rate, |c| c.min(ceiling_rate))
                .max(1e-9),
        ceiling_with_informer: !o.bare_ceiling,
        drain_s: o.backlog.then_some(elapsed),
        ready_s: ready.map(|r| r.saturating_duration_since(start).as_secs_f64()),
        sim_cpus: pin.map(|p| p.sim).unwrap_or_default(),
        latency_ms: Latency::from_histogram(&h),
        scheduler_cpu_ms_per_pod: sched_cpu1.saturating_sub(sched_cpu0).as_secs_f64() * 1e3 / n,
        sim_cpu_ms_per_pod: sim_cpu1.saturating_sub(sim_cpu_start).as_secs_f64() * 1e3 / n,
        scheduler_context_switches_per_pod: sched_switches1.saturating_sub(sched_switches0) as f64
            / n,
        scheduler_rss_mib: rss,
        requests_per_pod: by,
        scheduler_requests_per_pod: total as f64 / n,
        scheduler_requests_by_protocol: by_protocol,
        scheduler_open_sockets: sockets,
        new_connections_per_pod: connections_before
            .zip(connections_after)
            .map(|(a, b)| b.saturating_sub(a) as f64 / n),
        watches_forced_closed: forced_closed,
        forced_closes_by_watch: BTreeMap::new(),
        duplicate_binds,
        lost_pods: (expected - bound.len().min(expected)) as u64,
        unschedulable,
        conditions_seen: conditioned.len(),
        condition_write_ms: metrics
            .as_deref()
            .and_then(|t| BucketQuantiles::from_metrics(t, "magma_condition_write_seconds", 1e3)),
        condition_seen_ms,
        events_dropped: metric_sum("magma_events_dropped_total{"),
    };
    c.sim.stop();
    report.forced_closes_by_watch = forced_closes(&c.sim.log);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quantiles from a histogram's cumulative buckets: each the upper bound of its bucket.
    #[test]
    fn bucket_quantiles_from_the_exposition() {
        let text = "# TYPE x histogram\nx_bucket{le=\"0.001\"} 90\nx_bucket{le=\"0.002\"} 99\n\
                    x_bucket{le=\"0.004\"} 100\nx_bucket{le=\"+Inf\"} 100\nx_sum 0.1\nx_count 100\n";
        let q = BucketQuantiles::from_metrics(text, "x", 1e3).unwrap();
        assert_eq!((q.count, q.p50, q.p99, q.max_bucket), (100, 1.0, 2.0, 4.0));
        assert!(BucketQuantiles::from_metrics(text, "y", 1e3).is_none());
    }

    /// An A/B's second pinned run gets the first's split: pinning narrows this process's own
    /// mask to `rest`, and a split counted again from that mask refused to run ("needs at
    /// least 2 CPUs") or would give the simulator the scheduler's CPU. (Pins this test's own
    /// process, which nextest runs alone.)
    #[test]
    fn pinning_twice_keeps_the_first_split() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 {
            let e = Pinning::apply().expect_err("one CPU cannot be split");
            assert!(e.to_string().contains("needs at least 2 CPUs"), "{e}");
            return;
        }
        let first = Pinning::apply().expect("first pinning");
        assert_eq!(first.sim, "0");
        assert_eq!(
            std::thread::available_parallelism().unwrap().get(),
            cpus - 1,
            "the harness runs on the CPUs the simulator does not"
        );
        let second = Pinning::apply().expect("second pinning, as an A/B's next run");
        assert_eq!((second.sim, second.rest), (first.sim, first.rest));
    }

    /// The records as the simulator serves them: a pod's first binding is its bound time (a
    /// second one, a conflict's record, does not move it), other namespaces are not read, and a
    /// pod without a record keeps the time the watch saw it.
    #[test]
    fn a_pod_is_bound_when_its_first_binding_was_committed() {
        let wall = SystemTime::now();
        let record = |ns: &str, name: &str, ago_ms: u64| {
            serde_json::to_value(kube_sim::BindingRecord {
                namespace: ns.into(),
                name: name.into(),
                uid: format!("uid-{name}"),
                node: "node-00000".into(),
                at: wall - Duration::from_millis(ago_ms),
            })
            .unwrap()
        };
        let records = vec![
            record("default", "a", 900),
            record("default", "a", 100),
            record("other", "b", 800),
            record("default", "b", 500),
        ];
        let watch_saw = Instant::now();
        let seen: HashMap<String, Instant> = ["a", "b", "c"]
            .iter()
            .map(|n| (n.to_string(), watch_saw))
            .collect();
        let bound = committed_bindings(&records, "default", &seen);
        let ago = |n: &str| watch_saw.saturating_duration_since(bound[n]);
        let near = |d: Duration, ms: u64| {
            d.abs_diff(Duration::from_millis(ms)) < Duration::from_millis(50)
        };
        assert!(near(ago("a"), 900), "a: {:?}", ago("a"));
        assert!(near(ago("b"), 500), "b: {:?}", ago("b"));
        assert_eq!(bound["c"], watch_saw, "no record: the watch's time");
        assert_eq!(bound.len(), 3);
    }
}
