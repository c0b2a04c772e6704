//! Immutable cluster snapshots, shared by every worker.
//!
//! A snapshot is a persistent two-level arena of reference-counted node chunks: a top vector of
//! segments, each holding up to [`SEGMENT`] chunks of [`CHUNK`] node slots. Inside a chunk the
//! data the filter and score loops read is laid out as struct-of-arrays rows (free and
//! allocatable amount per resource slot, non-zero requested CPU/memory, bind version, flags),
//! with the rarely-read node description (`NodeMeta`) and host ports beside them.
//!
//! The cache (single writer) mutates its working arena through [`Arena::chunk_mut`], which
//! copies a chunk (and its segment) only when a published snapshot still shares it. Publishing
//! clones the top vector — one pointer per 4,096 nodes — so building the next snapshot costs
//! O(changed chunks + N/4096), and taking one is a single atomic load (`sync::Published`).
//!
//! Owns the layout only; the cache decides what goes in, the workers only read. Beside the
//! model's node and pod descriptions it carries the [`Profile`](crate::profile::Profile) in
//! force, the sharding [`View`](crate::shard::View), the CSI limits (`volumes`) and the
//! indexes of nodes by topology domain and of placed pods by label (`index`); it knows
//! neither the configuration file (`conf`) nor the plugins that read it.

use crate::index::Indexes;
use crate::model::{HostPort, Namespaces, NodeMeta, PodInfo, Slot};
use crate::profile::Profile;
use crate::shard::View;
use crate::volumes::CsiLimits;
use std::sync::Arc;

/// Node slots per chunk.
pub const CHUNK: usize = 64;
// The sharding view is a mask word per chunk (`shard::NodeSet`).
const _: () = assert!(CHUNK == crate::shard::MASK_SLOTS);
/// Chunks per segment.
pub const SEGMENT: usize = 64;
/// Slots per segment.
pub const SEGMENT_SLOTS: usize = CHUNK * SEGMENT;

/// Per-slot flags. Apart from `PRESENT`, each bit belongs to the plugin that reads it (its
/// `FLAG`, computed by `plugins::node_flags`; the chain checks the bits are distinct).
pub mod flags {
    /// The slot holds a live node.
    pub const PRESENT: u8 = 1;
}

/// The pods counted on one node, as the cross-node plugins read them.
pub type NodePods = Option<Arc<[Arc<PodInfo>]>>;

/// A pod nominated to a node (`preemption`): its room there is kept for it against pods of no
/// higher priority (kube-scheduler's nominated pods in Filter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nominee {
    pub uid: Arc<str>,
    pub priority: i32,
    pub requests: crate::model::ResourceList,
}

/// One row: a value per node slot in a chunk.
pub type Row = [i64; CHUNK];

/// The row every missing resource reads as.
pub static ZERO_ROW: Row = [0; CHUNK];

/// `CHUNK` node slots, struct-of-arrays.
#[derive(Clone)]
pub struct Chunk {
    /// The slot of the chunk's first node (its index × `CHUNK`).
    pub base: u32,
    /// `free[slot][i]` = allocatable − requested for resource `slot` (may be negative when
    /// pods bound by others overcommit a node). Rows beyond `free.len()` are all zero.
    pub free: Vec<Row>,
    pub alloc: Vec<Row>,
    /// Requested CPU (millis) and memory with kube-scheduler's non-zero defaults, for scoring.
    pub nonzero_used: [Row; 2],
    /// Bind version of each node as of this snapshot (see `binder`).
    pub version: [u64; CHUNK],
    /// Incarnation of the slot: bumped each time the slot is given to a new node.
    pub incarnation: [u32; CHUNK],
    pub flags: [u8; CHUNK],
    /// CSI volume references of the pods in `pods` (every driver, a volume two pods use
    /// counted twice, saturating): an upper bound on each driver's volumes attached there, so
    /// NodeVolumeLimits passes most nodes without reading their pods. 0 where `pods` is None.
    pub csi_refs: [u16; CHUNK],
    /// Node descriptions, shared between versions of the chunk: copying a chunk for a claim
    /// does not touch 64 reference counts, and only a node change copies this array.
    pub meta: Arc<[Option<Arc<NodeMeta>>; CHUNK]>,
    /// Host ports in use on the node (only where some pod uses them), shared likewise.
    pub ports: Arc<[Option<Arc<[HostPort]>>; CHUNK]>,
    /// The pods counted on the node (bound or claimed), once the pod index is on
    /// (`Snapshot::pods_indexed`); shared likewise.
    pub pods: Arc<[NodePods; CHUNK]>,
    /// The pods nominated to the node (only where some are), shared likewise.
    pub nominees: Arc<[Option<Arc<[Nominee]>>; CHUNK]>,
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk {
            base: 0,
            free: Vec::new(),
            alloc: Vec::new(),
            nonzero_used: [[0; CHUNK]; 2],
            version: [0; CHUNK],
            incarnation: [0; CHUNK],
            flags: [0; CHUNK],
            csi_refs: [0; CHUNK],
            meta: Arc::new(std::array::from_fn(|_| None)),
            ports: Arc::new(std::array::from_fn(|_| None)),
            pods: Arc::new(std::array::from_fn(|_| None)),
            nominees: Arc::new(std::array::from_fn(|_| None)),
        }
    }
}

impl Chunk {
    #[inline]
    pub fn free(&self, slot: Slot, i: usize) -> i64 {
        self.free.get(slot as usize).map_or(0, |r| r[i])
    }

    #[inline]
    pub fn alloc(&self, slot: Slot, i: usize) -> i64 {
        self.alloc.get(slot as usize).map_or(0, |r| r[i])
    }

    /// Requested amount of `slot` on node `i`.
    #[inline]
    pub fn used(&self, slot: Slot, i: usize) -> i64 {
        self.alloc(slot, i) - self.free(slot, i)
    }

    #[inline]
    pub fn free_row(&self, slot: Slot) -> &Row {
        self.free.get(slot as usize).unwrap_or(&ZERO_ROW)
    }

    #[inline]
    pub fn alloc_row(&self, slot: Slot) -> &Row {
        self.alloc.get(slot as usize).unwrap_or(&ZERO_ROW)
    }

    /// Grow the rows so `slot` can be written.
    pub fn ensure_rows(&mut self, slot: Slot) {
        let need = slot as usize + 1;
        if self.free.len() < need {
            self.free.resize(need, [0; CHUNK]);
            self.alloc.resize(need, [0; CHUNK]);
        }
    }
}

#[derive(Clone, Default)]
struct Segment {
    chunks: Vec<Arc<Chunk>>,
}

/// The persistent arena of node chunks.
#[derive(Clone, Default)]
pub struct Arena {
    segments: Vec<Arc<Segment>>,
    /// Number of slots covered (a multiple of `CHUNK`).
    slots: usize,
}

impl Arena {
    /// Slots covered by allocated chunks (live or not).
    pub fn slots(&self) -> usize {
        self.slots
    }

    pub fn num_chunks(&self) -> usize {
        self.slots / CHUNK
    }

    #[inline]
    pub fn chunk(&self, chunk_index: usize) -> &Chunk {
        &self.segments[chunk_index / SEGMENT].chunks[chunk_index % SEGMENT]
    }

    /// Mutable access to the chunk holding `slot`, copying it (and its segment) if a published
    /// snapshot shares it; grows the arena as needed.
    pub fn chunk_mut(&mut self, slot: usize) -> &mut Chunk {
        let ci = slot / CHUNK;
        let (si, within) = (ci / SEGMENT, ci % SEGMENT);
        while self.segments.len() <= si {
            self.segments.push(Arc::new(Segment::default()));
        }
        let seg = Arc::make_mut(&mut self.segments[si]);
        while seg.chunks.len() <= within {
            let base = ((si * SEGMENT + seg.chunks.len()) * CHUNK) as u32;
            seg.chunks.push(Arc::new(Chunk {
                base,
                ..Chunk::default()
            }));
            self.slots = self.slots.max((si * SEGMENT + seg.chunks.len()) * CHUNK);
        }
        Arc::make_mut(&mut seg.chunks[within])
    }

    /// How many chunks this arena shares with `other` (for tests of copy-on-write).
    pub fn shared_chunks(&self, other: &Arena) -> usize {
        let mut n = 0;
        for (a, b) in self.segments.iter().zip(other.segments.iter()) {
            for (x, y) in a.chunks.iter().zip(b.chunks.iter()) {
                n += usize::from(Arc::ptr_eq(x, y));
            }
        }
        n
    }
}

/// An immutable view of the cluster that workers schedule against.
pub struct Snapshot {
    /// Publication sequence number (strictly increasing).
    pub seq: u64,
    pub arena: Arena,
    /// Live nodes.
    pub nodes: usize,
    pub profile: Arc<Profile>,
    /// Slot of `nvidia.com/gpu` (BalancedAllocation considers it when a pod requests it).
    pub gpu_slot: Option<Slot>,
    /// The nodes workers may use (`shard::View`; `All` without sharding).
    pub view: View,
    /// Chunks carry the pods of each node (`Chunk::pods`).
    pub pods_indexed: bool,
    /// Placed pods whose affinity terms score others, and their slots (the symmetric score;
    /// `plugins::inter_pod_affinity::scores_others`).
    pub affinity_pods: crate::index::ScoringPods,
    pub namespaces: Arc<Namespaces>,
    /// Bumps of the anti-affinity epoch this snapshot contains (`docs/constraints.md`).
    pub anti_epoch: u64,
    /// The label epoch its placed pods were converted at (`Cache::sync_labels`): a pending pod
    /// compiled at another one, with labels kept as strings, may have a label whose key some
    /// selector here reads, and is not decided on it (`PodInfo::stale`).
    pub label_epoch: u32,
    /// The interned id of `kubernetes.io/hostname` (a topology key of one node per domain).
    pub hostname_key: u32,
    /// CSI attach limits by node name id: (driver id, count), from CSINodes.
    pub csi_limits: Arc<CsiLimits>,
    /// Pods nominated to some node (`Chunk::nominees`): none, and no pod pays for them.
    pub nominated: usize,
    /// Nodes by topology domain for the keys constraints name, node slots by the labels of
    /// their pods once `pods_indexed`, placed pods' required anti-affinity terms by what they
    /// select (`index`); `None` until the cache indexes anything ([`Snapshot::index`]).
    pub index: Option<Arc<Indexes>>,
}

impl Snapshot {
    pub fn empty(profile: Arc<Profile>) -> Snapshot {
        Snapshot {
            seq: 0,
            arena: Arena::default(),
            nodes: 0,
            profile,
            gpu_slot: None,
            view: View::All,
            pods_indexed: false,
            affinity_pods: Default::default(),
            namespaces: Arc::default(),
            anti_epoch: 0,
            label_epoch: 0,
            hostname_key: u32::MAX,
            csi_limits: Arc::default(),
            nominated: 0,
            index: None,
        }
    }

    /// The indexes this snapshot carries (empty ones when it carries none).
    pub fn index(&self) -> &Indexes {
        self.index.as_deref().unwrap_or(Indexes::empty())
    }

    /// Node description of `slot`, if a node lives there.
    pub fn node(&self, slot: usize) -> Option<&Arc<NodeMeta>> {
        if slot >= self.arena.slots() {
            return None;
        }
        self.arena.chunk(slot / CHUNK).meta[slot % CHUNK].as_ref()
    }

    /// The pods counted on `slot` (empty unless `pods_indexed`).
    pub fn pods_on(&self, slot: usize) -> &[Arc<PodInfo>] {
        self.arena.chunk(slot / CHUNK).pods[slot % CHUNK]
            .as_deref()
            .unwrap_or(&[])
    }

    pub fn version(&self, slot: usize) -> u64 {
        self.arena.chunk(slot / CHUNK).version[slot % CHUNK]
    }

    pub fn incarnation(&self, slot: usize) -> u32 {
        self.arena.chunk(slot / CHUNK).incarnation[slot % CHUNK]
    }
}
