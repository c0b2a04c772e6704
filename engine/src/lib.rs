//! Magma's engine: the I/O-free core of a fast-path Kubernetes scheduler.
//!
//! Layout (DESIGN.md §1–3): [`model`] (compact objects and validated conversions: pods, nodes,
//! selectors), [`conf`] (Volcano's config schema, compiled into the [`profile`] every snapshot
//! carries), [`cache`] (the single writer) building [`snapshot`]s and reporting cluster
//! [`event`]s, [`queue`] (activeQ/backoffQ/unschedulable pool), [`plugins`] (one file per
//! filter/scorer plugin, the chain declared once in `plugins/mod.rs`, which also shows how to
//! add one) + [`allocate`] (the scan, candidate selection, failure messages), [`binder`]
//! (per-node bind versions and the claim), [`shard`] (the NodeShard coordinator, the snapshot's
//! sharding `View`, and `Sharding`, the driver's side of it; [`resource_version`] orders the
//! versions it and [`dra`] compare), [`worker`] (the scheduling cycle and `Worker::turn`, the
//! worker loop's body), [`core`] (the driver's state machine) and [`engine`] (threads).
//! [`index`] holds what the cross-node plugins look up instead of scanning (nodes by topology
//! domain, placed pods by label), kept by the cache and carried by every snapshot.
//! [`mutation`] names the deliberate bugs the loom models must catch; `testing` (feature
//! `testing`) is the deterministic harness the engine's tests and the loom models drive it with.
//!
//! No tokio, no kube, no HTTP, no OS clock, no sleeps: inputs are [`core::Input`]s, outputs are
//! [`core::Intent`]s, and time comes from a [`clock::Clock`].

pub mod allocate;
pub mod binder;
pub mod cache;
pub mod clock;
pub mod conf;
pub mod core;
pub mod dra;
// The runtime spawns OS threads and blocks on channels: not modelled under loom, which drives
// the protocol pieces (`worker::Shared`, `binder`, `cache`, `sync::HandOff`) directly.
#[cfg(not(loom))]
pub mod engine;
pub mod event;
pub mod index;
pub mod model;
pub mod mutation;
pub mod pdb;
pub mod plugins;
pub mod preemption;
pub mod profile;
pub mod queue;
pub mod resource_version;
pub mod shard;
pub mod snapshot;
pub mod stats;
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;
pub mod volumes;
pub mod worker;

pub use crate::clock::{Clock, ManualClock, Nanos};

/// The driver's maps keyed by strings from outside (interned strings, node names, pod uids):
/// foldhash, seeded per map, instead of SipHash, which cost more than the rest of compiling an
/// unconstrained pod. The seed keeps keys an attacker chooses from colliding predictably.
pub(crate) type FastMap<K, V> = foldhash::HashMap<K, V>;
pub(crate) type FastSet<K> = foldhash::HashSet<K>;
pub use crate::conf::{Profile, Sampling};
pub use crate::core::{BindIntent, BindResult, Input, Intent, StatusIntent, StatusReason};
#[cfg(not(loom))]
pub use crate::engine::{Engine, EngineError, EngineHandle, EngineOptions};
pub use crate::model::{NodeInput, PodInput};
pub use crate::shard::{
    ShardInput, ShardStatusIntent, ShardingMode, ShardingOptions, StatusLists, WrittenStatus,
};
