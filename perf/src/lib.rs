//! Magma's benchmark harness: workload plans ([`plan`]) from named presets ([`scenario`]),
//! run against the engine on an in-process simulated cluster ([`runner`]) that plays the API
//! server and keeps an independent ledger for integrity checks, and [`report`]s.

pub mod clock;
pub mod plan;
pub mod report;
pub mod runner;
pub mod scenario;
