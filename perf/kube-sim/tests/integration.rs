//! kube-sim's integration tests, as one test binary: each file beside this one is a
//! module of it.
//! One binary per crate instead of one per file: every test binary links the crate and its
//! whole dependency graph, and the workspace's ninety-odd took 3.6 GB of disk (kube,
//! k8s-openapi and tokio in most) and much of the build's link time; CI ran out of disk. Run one file's tests with a filter on its module: for example
//! `cargo nextest run -p kube-sim -E 'test(/^binary::/)'`.

// The `kube-sim` binary's allocator, so that what the tests measure (`memory`, `throughput`) is
// what the binary does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod common;

mod binary;
mod core;
mod deletecollection;
mod deletion;
mod dra;
mod kubectl;
mod kwok_faults;
mod list;
mod managed_fields;
mod memory;
mod misc;
mod pdb;
mod pod_level;
mod pod_status_dra;
mod priority;
mod recordings;
mod requests;
mod resize;
mod slow_watch;
mod storage;
mod throughput;
mod tls;
mod watch;
