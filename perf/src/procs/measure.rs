//! What the harness measures from outside the processes: their CPU time, context switches,
//! resident memory and open sockets from `/proc`, waiting until they are idle; the scheduler's
//! events tail from its metrics (`magma_status_writes_pending`); and the simulator's records
//! (`/sim/<what>`: when each binding or write was committed), counters (`/sim/stats`) and log
//! (which watches it force-closed). It uses the scheduler's admin port (`process`).

use super::process::admin_fetch;
use anyhow::Context;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

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

pub(super) fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

pub(super) fn open_sockets(pid: u32) -> usize {
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

/// Wait until a process's CPU time stops growing (under 5 ms per 500 ms), at most `cap`.
pub(super) async fn until_idle(pid: u32, cap: Duration) -> Duration {
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
pub(super) async fn until_status_written(admin: u16, cap: Duration) {
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
pub(super) async fn sim_records(
    client: &kube::Client,
    what: &str,
) -> anyhow::Result<Vec<serde_json::Value>> {
    let req = http::Request::get(format!("/sim/{what}")).body(Vec::new())?;
    let text = client.request_text(req).await?;
    Ok(serde_json::from_str(&text)?)
}

/// When each pod the harness's watch saw bound had its first binding committed (`procs` module doc),
/// or, given the simulator's write records, its first write of that kind:
/// the simulator's records of namespace `ns`, their wall-clock `at` turned into this process's
/// `Instant`s (one machine, one clock). A pod without a record keeps the time the watch saw it.
pub(super) fn committed_bindings(
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
pub(super) async fn sim_stat(client: &kube::Client, name: &str) -> Option<u64> {
    let req = http::Request::get("/sim/stats").body(Vec::new()).ok()?;
    let v: serde_json::Value = serde_json::from_str(&client.request_text(req).await.ok()?).ok()?;
    v.get(name)?.as_u64()
}

pub(super) async fn sim_connections(client: &kube::Client) -> Option<u64> {
    sim_stat(client, "connectionsAccepted").await
}

/// Which watches the simulator force-closed: its "Forcing watcher close" log lines, by the
/// watch's resource, label and field selectors.
pub(super) fn forced_closes(log: &Path) -> BTreeMap<String, u64> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
