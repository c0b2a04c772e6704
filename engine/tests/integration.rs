//! The engine's integration tests, as one test binary: each file beside this one is a
//! module of it.
//! One binary per crate instead of one per file: every test binary links the crate and its
//! whole dependency graph, and the workspace's ninety-odd took 3.6 GB of disk (kube,
//! k8s-openapi and tokio in most) and much of the build's link time; CI ran out of disk. Run one file's tests with a filter on its module: for example
//! `cargo nextest run -p magma-engine -E 'test(/^constraints::/)'`.

mod world;

mod constraints;
mod constraints_cost;
mod constraints_property;
mod dra;
mod placement;
mod preemption;
mod properties;
mod resize;
mod resources;
mod scenarios;
mod sharding;
mod sharding_property;
mod threads;
mod upstream_csi_limits;
mod upstream_dra;
mod upstream_dra_extended;
mod upstream_interpodaffinity;
mod upstream_pod_resources;
mod upstream_podtopologyspread;
mod upstream_preemption;
mod upstream_volume_binding;
