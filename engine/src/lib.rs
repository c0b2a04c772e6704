//! Magma's engine: the I/O-free core of a fast-path Kubernetes scheduler.
//!
//! Layout (DESIGN.md §1–3): [`model`] (compact objects and validated conversions), [`conf`]
//! (Volcano's config schema), [`cache`] (the single writer) building [`snapshot`]s, [`queue`]
//! (activeQ/backoffQ/unschedulable pool), [`plugins`] + [`allocate`] (filters, scores,
//! candidate selection), [`binder`] (per-node bind versions and the claim), [`shard`] (the
//! NodeShard coordinator and the none/soft/hard node-set views), [`worker`] (the scheduling
//! cycle), [`core`] (the driver's state machine) and [`engine`] (threads).
//!
//! No tokio, no kube, no HTTP, no OS clock, no sleeps: inputs are [`core::Input`]s, outputs are
//! [`core::Intent`]s, and time comes from a [`clock::Clock`].

pub mod allocate;
pub mod binder;
pub mod cache;
pub mod clock;
pub mod conf;
pub mod core;
// The runtime spawns OS threads and blocks on channels: not modelled under loom, which drives
// the protocol pieces (`worker::Shared`, `binder`, `cache`, `sync::HandOff`) directly.
#[cfg(not(loom))]
pub mod engine;
pub mod event;
pub mod model;
pub mod mutation;
pub mod plugins;
pub mod queue;
pub mod shard;
pub mod snapshot;
pub mod stats;
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;
pub mod worker;

pub use crate::clock::{Clock, ManualClock, Nanos};
pub use crate::conf::{Profile, Sampling};
pub use crate::core::{BindIntent, BindResult, Input, Intent, StatusIntent, StatusReason};
#[cfg(not(loom))]
pub use crate::engine::{Engine, EngineError, EngineHandle, EngineOptions};
pub use crate::model::{NodeInput, PodInput};
pub use crate::shard::{ShardInput, ShardStatusIntent, ShardingMode, ShardingOptions};
