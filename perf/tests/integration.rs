//! The benchmark harness's integration tests, as one test binary: each file beside this one is a
//! module of it.
//! One binary per crate instead of one per file: every test binary links the whole dependency
//! graph (kube, k8s-openapi, tokio), and ninety of them took several GB of disk and most of the
//! build's link time. Run one file's tests with a filter on its module: for example
//! `cargo nextest run -p magma-perf -E 'test(/^e2e_smoke::/)'`.

mod e2e_smoke;
mod processes;
mod scheduler_perf;
mod smoke;
