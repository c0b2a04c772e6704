//! What decoding one pod watch event costs the scheduler, split into the JSON scan every
//! decoder pays and what building the slim types and the engine's input adds.
//!
//! ```sh
//! cargo run --release -p magma-kube --example decode_cost [-- EVENTS.jsonl [ROUNDS]]
//! ```
//!
//! `EVENTS.jsonl` is a watch stream as the API server sends it, one event a line (default: the
//! three events kube-sim sends for one pod: created, bound, running, with their
//! `managedFields`). Each line is decoded `ROUNDS` times (default 100,000) as:
//! - `scan`: skipped whole (`serde::de::IgnoredAny`): the floor of any JSON decoder, and about
//!   what protobuf's length-prefixed skipping would save at most;
//! - `slim`: a `WatchEvent<slim::Pod>`, what the pod watch decodes;
//! - `slim+input`: that, then `convert::pod_input`, what reaches the engine.
//!
//! Figures for BENCHMARKS.md (issue 15); a timing, not a test.

use kube::core::WatchEvent;
use magma_kube::convert::pod_input;
use magma_kube::slim::Pod;
use std::hint::black_box;
use std::time::Instant;

const BUNDLED: &str = include_str!("pod-watch-events.jsonl");

fn per_event(lines: &[&str], rounds: usize, mut f: impl FnMut(&str)) -> f64 {
    let start = Instant::now();
    for _ in 0..rounds {
        for l in lines {
            f(l);
        }
    }
    start.elapsed().as_secs_f64() * 1e6 / (rounds * lines.len()) as f64
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let text = match args.next() {
        Some(path) => std::fs::read_to_string(&path)?,
        None => BUNDLED.to_string(),
    };
    let rounds: usize = args.next().map_or(Ok(100_000), |r| r.parse())?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    anyhow::ensure!(!lines.is_empty(), "no events");
    for l in &lines {
        // Every line must decode, or the timings below would time errors.
        let ev: WatchEvent<Pod> = serde_json::from_str(l)?;
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) = ev {
            anyhow::ensure!(
                pod_input(p).is_some(),
                "a pod the adapter would not convert: {l}"
            );
        }
    }
    let bytes = lines.iter().map(|l| l.len()).sum::<usize>() / lines.len();
    println!(
        "{} events, {bytes} bytes each on average, {rounds} rounds",
        lines.len()
    );
    for round in 1..=3 {
        let scan = per_event(&lines, rounds, |l| {
            black_box(serde_json::from_str::<serde::de::IgnoredAny>(l).ok());
        });
        let slim = per_event(&lines, rounds, |l| {
            black_box(serde_json::from_str::<WatchEvent<Pod>>(l).ok());
        });
        let input = per_event(&lines, rounds, |l| {
            if let Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) = serde_json::from_str(l) {
                black_box(pod_input(p));
            }
        });
        println!("round {round}: scan {scan:.2} µs/event, slim {slim:.2}, slim+input {input:.2}");
    }
    Ok(())
}
