//! The Kubernetes adapter's integration tests, as one test binary: each file beside this one is a
//! module of it.
//! One binary per crate instead of one per file: every test binary links the crate and its
//! whole dependency graph, and the workspace's ninety-odd took 3.6 GB of disk (kube,
//! k8s-openapi and tokio in most) and much of the build's link time; CI ran out of disk. Run one file's tests with a filter on its module: for example
//! `cargo nextest run -p magma-kube -E 'test(/^adapter::/)'`.

mod common;
mod procs;

mod adapter;
mod binary;
mod client;
mod constraints;
mod constraints_e2e;
mod deploy;
mod dra_binary_e2e;
mod dra_e2e;
mod events_e2e;
mod flags;
mod http;
mod leader;
mod no_fit_e2e;
mod nodeshard;
mod reload;
mod reload_e2e;
mod shard_controller;
mod shardctl;
mod sharding;
mod sharding_e2e;
mod spec_e2e;
mod wakeup_e2e;
