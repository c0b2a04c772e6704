//! Magma's Kubernetes adapter: everything that talks to the API server, around the I/O-free
//! engine. The engine never sees a `kube` type; this crate converts, watches, binds, reports,
//! elects a leader, serves health and metrics, and reloads configuration.
//!
//! Modules: [`flags`] (upstream-compatible command line), [`convert`] (API objects → engine
//! inputs), [`slim`] (pods and nodes decoded with only the fields the scheduler reads), [`feed`] (the relist feeder every watch goes through: watcher events → changes, a relist one reset), [`watch`] (the pod, node and storage watches → engine inputs), [`bind`] (the
//! bind executor: rate-limited `pods/binding` with outcome classification), [`prebind`]
//! (volume PreBind: annotate claims to provision, wait until bound, check the PVs), [`dra`] (ResourceClaim PreBind: write the allocation and the reservation, Unreserve), [`status`] (events
//! and `PodScheduled` conditions on a separate, bounded, lossy sink), [`leader`] (Lease-based
//! leader election with client-go semantics), [`reload`] (config file hot reload), [`metrics`]
//! and [`http`] (health, readiness, Prometheus), [`ratelimit`] (token bucket), [`process`] (the process scaffolding both binaries share: main,
//! signals, the API client (HTTP/2 over HTTPS), the component supervisor), [`app`] (the scheduler's components, their wiring
//! and shutdown order), [`nodeshard`] (Volcano's `NodeShard` custom resource types),
//! [`shardctl`] (the sharding controller: its pure core — config, policies, node assignment,
//! hand-off pinning, sync plan — and its runtime behind the `shard-controller` binary).

pub mod apicall;
pub mod app;
pub mod bind;
pub mod convert;
pub mod dra;
pub mod feed;
pub mod flags;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod nodeshard;
pub mod prebind;
pub mod preempt;
pub mod process;
pub mod ratelimit;
pub mod reload;
pub mod shard;
pub mod shardctl;
pub mod slim;
pub mod status;
pub mod watch;
