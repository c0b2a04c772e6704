//! Instructions the scheduler process executes over the measured span, divided by the pods
//! bound: a CPU yardstick that, unlike CPU ms per pod, does not move with the machine's load
//! or clock (issue 32 point 4). Two counters:
//!
//! - **perf**: `perf stat -e instructions:u -x, -p <pid>` as a child of the harness, started
//!   at the span's start and stopped with SIGINT at its end (user-space instructions of every
//!   thread; needs hardware counters, which many VMs do not expose: `perf stat` then prints
//!   `<not supported>`, and [`Counter::Auto`] falls back to callgrind).
//! - **callgrind**: the scheduler runs under `valgrind --tool=callgrind`; at the span's start
//!   `callgrind_control -z` zeroes its counts (a burst: after its start-up; a backlog counts
//!   from its start, as its CPU does) and at the end `callgrind_control -d` dumps them; the
//!   dump's `totals:` line is the count (Ir). Valgrind runs the threads one at a time and
//!   about 50× slower, so the run's rates and latencies mean nothing, and its counts are
//!   comparable between builds, not with perf's.
//!
//! The parsing and the arithmetic are plain functions, tested below; the process handling
//! around them uses only `std::process`.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which counter `--instructions` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// perf where `perf stat -e instructions:u` counts on this machine, else callgrind.
    Auto,
    Perf,
    Callgrind,
}

impl std::str::FromStr for Counter {
    type Err = String;
    fn from_str(s: &str) -> Result<Counter, String> {
        match s {
            "auto" => Ok(Counter::Auto),
            "perf" => Ok(Counter::Perf),
            "callgrind" => Ok(Counter::Callgrind),
            _ => Err(format!("{s:?}: expected auto, perf or callgrind")),
        }
    }
}

/// The event perf counts: user-space instructions (the kernel's share would need a lower
/// `perf_event_paranoid` and depends on the kernel, not on the build).
const PERF_EVENT: &str = "instructions:u";

/// What `perf stat -x,` printed for [`PERF_EVENT`]: the count, or why there is none.
pub fn parse_perf_stat(csv: &str) -> Result<u64, String> {
    let line = csv
        .lines()
        .find(|l| l.split(',').nth(2).is_some_and(|e| e.trim() == PERF_EVENT))
        .ok_or_else(|| format!("no {PERF_EVENT} line in perf stat's output: {csv:?}"))?;
    let value = line.split(',').next().unwrap_or("").trim();
    match value {
        "<not supported>" => Err(format!(
            "perf stat: {PERF_EVENT} <not supported> (no hardware counters here)"
        )),
        "<not counted>" => Err(format!("perf stat: {PERF_EVENT} <not counted>")),
        v => v
            .parse::<u64>()
            .map_err(|_| format!("perf stat: {PERF_EVENT} count {v:?} is not a number")),
    }
}

/// The first event's total of a callgrind dump (`totals: <Ir> ...`; `summary:` where a dump
/// has no `totals:` line).
pub fn parse_callgrind_totals(dump: &str) -> Option<u64> {
    let first = |prefix: &str| {
        dump.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    first("totals:").or_else(|| first("summary:"))
}

/// Instructions per bound pod; `None` without a bound pod.
pub fn per_pod(instructions: u64, pods: usize) -> Option<f64> {
    (pods > 0).then(|| instructions as f64 / pods as f64)
}

/// Whether `perf stat -e instructions:u` counts on this machine (it runs `true` under it).
pub fn perf_counts() -> bool {
    Command::new("perf")
        .args(["stat", "-x,", "-e", PERF_EVENT, "true"])
        .stdout(Stdio::null())
        .output()
        .is_ok_and(|o| parse_perf_stat(&String::from_utf8_lossy(&o.stderr)).is_ok())
}

impl Counter {
    /// `Auto` decided on this machine.
    pub fn resolve(self) -> Counter {
        match self {
            Counter::Auto if perf_counts() => Counter::Perf,
            Counter::Auto => Counter::Callgrind,
            c => c,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Counter::Perf => "perf stat instructions:u",
            Counter::Callgrind => "callgrind Ir (valgrind: threads serialised, rates meaningless)",
            Counter::Auto => "auto",
        }
    }
}

/// The callgrind output file of a run in `dir` (its dumps are `<file>.1`, `<file>.2`, ...).
fn callgrind_file(dir: &Path) -> PathBuf {
    dir.join("callgrind.out")
}

/// The scheduler's command line under `counter`: the program and the arguments before the
/// scheduler's own (callgrind: valgrind and its flags, then the scheduler binary).
pub(super) fn wrap(counter: Counter, bin: &Path, dir: &Path) -> (PathBuf, Vec<String>) {
    match counter {
        Counter::Callgrind => (
            PathBuf::from("valgrind"),
            vec![
                "--tool=callgrind".into(),
                format!("--callgrind-out-file={}", callgrind_file(dir).display()),
                "--dump-instr=no".into(),
                "--dump-line=no".into(),
                bin.display().to_string(),
            ],
        ),
        _ => (bin.to_path_buf(), Vec::new()),
    }
}

/// A counter attached to the scheduler over the measured span.
pub(super) enum Span {
    Perf { child: Child, out: PathBuf },
    Callgrind { pid: u32, dir: PathBuf },
}

fn callgrind_control(flag: &str, pid: u32) -> anyhow::Result<()> {
    let out = Command::new("callgrind_control")
        .arg(flag)
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .output()
        .context("running callgrind_control (valgrind)")?;
    anyhow::ensure!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK"),
        "callgrind_control {flag} {pid}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Starts counting the scheduler `pid` (`zero`: callgrind discards what it counted so far).
pub(super) fn start(counter: Counter, pid: u32, dir: &Path, zero: bool) -> anyhow::Result<Span> {
    match counter {
        Counter::Perf => {
            let out = dir.join("perf-stat.csv");
            let child = Command::new("perf")
                .args(["stat", "-x,", "-e", PERF_EVENT, "-o"])
                .arg(&out)
                .args(["-p", &pid.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("starting perf stat")?;
            Ok(Span::Perf { child, out })
        }
        Counter::Callgrind => {
            if zero {
                callgrind_control("-z", pid)?;
            }
            Ok(Span::Callgrind {
                pid,
                dir: dir.to_path_buf(),
            })
        }
        Counter::Auto => anyhow::bail!("resolve the counter first"),
    }
}

/// Stops counting: the instructions over the span.
pub(super) fn finish(span: Span) -> anyhow::Result<u64> {
    match span {
        Span::Perf { mut child, out } => {
            // perf stat prints its counts when interrupted.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            child.wait()?;
            let text = std::fs::read_to_string(&out)
                .with_context(|| format!("reading {}", out.display()))?;
            parse_perf_stat(&text).map_err(anyhow::Error::msg)
        }
        Span::Callgrind { pid, dir } => {
            let before = dumps(&dir);
            callgrind_control("-d", pid)?;
            // The dump is written by the scheduler's process; wait for a new, complete file.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if let Some(p) = dumps(&dir).into_iter().find(|p| !before.contains(p))
                    && let Some(n) = std::fs::read_to_string(&p)
                        .ok()
                        .and_then(|t| parse_callgrind_totals(&t))
                {
                    return Ok(n);
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "callgrind wrote no dump in {} within 60 s",
                    dir.display()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The numbered dumps (`callgrind.out.N`) in `dir`.
fn dumps(dir: &Path) -> Vec<PathBuf> {
    let base = callgrind_file(dir);
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned() + ".")
        .unwrap_or_default();
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .and_then(|n| n.strip_prefix(&name).map(str::to_owned))
                        .is_some_and(|rest| rest.parse::<u32>().is_ok())
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_stat_csv_gives_the_count_or_why_not() {
        // `perf stat -x,` as printed with and without hardware counters (this VM: the second).
        let counted = "\n# started on Sun Dec  6 23:00:00 2026\n\n3512345678,,instructions:u,2004113927,100.00,,\n";
        assert_eq!(parse_perf_stat(counted), Ok(3_512_345_678));
        let e = parse_perf_stat("<not supported>,,instructions:u,0,100.00,,\n").unwrap_err();
        assert!(e.contains("not supported"), "{e}");
        assert!(
            parse_perf_stat("<not counted>,,instructions:u,0,0.00,,")
                .unwrap_err()
                .contains("not counted")
        );
        // Another event's line is not ours.
        assert!(parse_perf_stat("123,,cycles:u,1,100.00,,").is_err());
    }

    #[test]
    fn callgrind_totals_are_the_first_event() {
        let dump = "version: 1\ncreator: callgrind-3.19.0\npid: 3560\ncmd:  agent-scheduler\npart: 1\n\
                    events: Ir\nsummary: 24077813\n\nfn=(1) main\n0 5\ntotals: 24487518\n";
        assert_eq!(parse_callgrind_totals(dump), Some(24_487_518));
        // More events than Ir: the first column.
        assert_eq!(
            parse_callgrind_totals("events: Ir Dr\ntotals: 900 300\n"),
            Some(900)
        );
        assert_eq!(
            parse_callgrind_totals("events: Ir\nsummary: 77\n"),
            Some(77)
        );
        assert_eq!(parse_callgrind_totals("events: Ir\n"), None);
    }

    #[test]
    fn per_pod_divides_by_the_bound_pods() {
        assert_eq!(per_pod(3_000_000_000, 20_000), Some(150_000.0));
        assert_eq!(per_pod(5, 0), None);
    }

    #[test]
    fn counters_parse_from_the_flag() {
        assert_eq!("callgrind".parse::<Counter>(), Ok(Counter::Callgrind));
        assert_eq!("perf".parse::<Counter>(), Ok(Counter::Perf));
        assert_eq!("auto".parse::<Counter>(), Ok(Counter::Auto));
        assert!("papi".parse::<Counter>().is_err());
    }
}
