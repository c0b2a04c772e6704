//! The harness's control of the two processes of a run: starting `kube-sim` and
//! `agent-scheduler` (under `taskset` when pinned) with their logs in the run's directory,
//! connecting to the simulator with the scheduler's own client set-up, waiting for readiness on
//! the scheduler's admin port, checking that they are alive, stopping them (SIGTERM, then
//! SIGKILL), and the `--pin` split of the CPUs ([`Pinning`]). It uses the options (`options`)
//! and the end-to-end client helpers (`crate::e2e`).

use super::instructions::{self, Counter};
use super::options::ProcOptions;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The harness's own `User-Agent`: requests without it are the scheduler's.
pub(super) const HARNESS_AGENT: &str = "magma-perf";

/// A child process killed when dropped.
pub(super) struct Proc {
    name: &'static str,
    child: Child,
    pub(super) log: PathBuf,
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
        // A bare name (`valgrind`) is looked up in PATH.
        anyhow::ensure!(
            bin.exists() || bin.parent() == Some(Path::new("")),
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

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with the log's tail if the process has exited.
    pub(super) fn check_alive(&mut self) -> anyhow::Result<()> {
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

    pub(super) fn stop(&mut self) {
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

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// `GET path` on a plain-HTTP admin port: the status code.
pub(super) async fn admin_get(port: u16, path: &str) -> Option<u16> {
    admin_fetch(port, path).await.map(|(code, _)| code)
}

/// `GET path` on a plain-HTTP admin port: the status code and the whole answer.
pub(super) async fn admin_fetch(port: u16, path: &str) -> Option<(u16, String)> {
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

/// A running simulator and the harness's client of it.
pub(super) struct Cluster {
    pub(super) sim: Proc,
    kubeconfig: PathBuf,
    pub(super) client: kube::Client,
}

/// Starts a `kube-sim` process (on `cpus` when pinned) and connects to it as the scheduler does.
pub(super) async fn start_sim(
    o: &ProcOptions,
    dir: &Path,
    cpus: Option<&str>,
) -> anyhow::Result<Cluster> {
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

/// Starts the `agent-scheduler` process against `c`: the process and its admin port.
/// Under `counter` callgrind, inside valgrind (see `instructions`).
pub(super) fn start_scheduler(
    o: &ProcOptions,
    counter: Option<Counter>,
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
    let (program, wrapper) = match counter {
        Some(k) => {
            anyhow::ensure!(
                o.scheduler_bin.exists(),
                "{} not found: build it first (cargo build --release -p magma-kube) or pass its path",
                o.scheduler_bin.display()
            );
            instructions::wrap(k, &o.scheduler_bin, dir)
        }
        None => (o.scheduler_bin.clone(), Vec::new()),
    };
    let args: Vec<String> = wrapper
        .into_iter()
        .chain(args)
        .chain(o.scheduler_args.iter().cloned())
        .collect();
    Ok((
        Proc::spawn("agent-scheduler", &program, &args, dir, cpus)?,
        admin,
    ))
}

/// Until the scheduler answers `/readyz` (lists done, leading), failing if it exits.
pub(super) async fn wait_ready(p: &mut Proc, admin: u16) -> anyhow::Result<()> {
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

/// Where each process runs under `--pin`: the simulator's CPU list and the others'.
#[derive(Debug, Clone)]
pub(super) struct Pinning {
    pub(super) sim: String,
    pub(super) rest: String,
}

impl Pinning {
    /// CPU 0 for the simulator, the rest for the scheduler and this harness (all of this
    /// process's threads, and those it starts later, inherit the mask). Decided once per
    /// process: after the first call this process's own mask is `rest`, and an A/B's later
    /// runs must get the same split, not one counted from that mask.
    pub(super) fn apply() -> anyhow::Result<Pinning> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
