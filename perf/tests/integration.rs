//! The benchmark harness's integration tests, as one test binary: each file beside this one is a
//! module of it.
//! One binary per crate instead of one per file: every test binary links the crate and its
//! whole dependency graph, and the workspace's ninety-odd took 3.6 GB of disk (kube,
//! k8s-openapi and tokio in most) and much of the build's link time; CI ran out of disk. Run one file's tests with a filter on its module: for example
//! `cargo nextest run -p magma-perf -E 'test(/^e2e_smoke::/)'`.

mod e2e_smoke;
mod processes;
mod scheduler_perf;
mod smoke;
