//! Magma's benchmark harness: workload plans ([`plan`]) from named presets ([`scenario`]),
//! run against the engine on an in-process simulated cluster ([`runner`]) that plays the API
//! server and keeps an independent ledger for integrity checks, compared with a straightforward
//! reference scheduler ([`baseline`]) on the same plan, swept over worker and candidate counts
//! ([`sweep`]), and reported as text, JSON, Markdown tables ([`report`]) and SVG plots ([`plot`]);
//! end to end through the API simulator ([`e2e`], [`wakeup`]), the shipped binaries as separate
//! processes with their CPU from `/proc` ([`procs`]), and kube-scheduler's own benchmark
//! workloads replayed against Magma ([`scheduler_perf`]).

pub mod ab;
pub mod baseline;
pub mod clock;
pub mod e2e;
pub mod latency;
pub mod plan;
pub mod plot;
pub mod procs;
pub mod progress;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod scheduler_perf;
pub mod sweep;
pub mod wakeup;
