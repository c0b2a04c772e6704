//! Cluster events: what a change to the cluster can do for the pods waiting in the
//! unschedulable pool (kube-scheduler's `ClusterEvent`s).
//!
//! The cache reports, for every change it applies, the events it amounts to (a node added, its
//! labels changed, a pod left a node ...). Each filter's failure reasons say which events can
//! make a rejected pod fit (`plugins::Reason::wake`, kube-scheduler's `EventsToRegister`); the
//! queue records their union with the pod and moves it back when one of them happens. Nothing
//! here knows any plugin: adding a plugin never touches the cache or the queue, only, if it
//! needs a new kind of change, this list.

/// A set of events, one bit each.
pub type Events = u32;

/// A node appeared: added, or entered this scheduler's shard view. Helps every reason.
pub const NODE_ADDED: Events = 1;
/// A node's labels changed.
pub const NODE_LABELS_CHANGED: Events = 1 << 1;
/// A taint was removed from a node (or changed, which removes the old one).
pub const NODE_TAINT_REMOVED: Events = 1 << 2;
/// A cordoned node became schedulable.
pub const NODE_SCHEDULABLE: Events = 1 << 3;
/// A node's allocatable grew for some resource (including `pods`).
pub const NODE_ALLOCATABLE_GREW: Events = 1 << 4;
/// A pod left a node (deleted, completed, moved, or an assumption forgotten): its resources,
/// its pod slot and its host ports are free again.
pub const POD_REMOVED: Events = 1 << 5;

/// A pod was placed on a node (bound by anyone, or claimed by us): helps a pod waiting for a
/// required pod affinity.
pub const POD_ADDED: Events = 1 << 6;
/// A namespace appeared or its labels changed (pod affinity `namespaceSelector`).
pub const NAMESPACE_CHANGED: Events = 1 << 7;

/// A PersistentVolumeClaim, PersistentVolume, StorageClass or CSINode appeared or changed.
pub const STORAGE_CHANGED: Events = 1 << 8;

/// Devices (DRA) were freed: a ResourceClaim's allocation was removed or changed, an
/// allocated claim went away, or one of our own decisions gave its devices back. A change to a
/// pod's own claims wakes that pod by name instead (`Core::claim_waiters`), as
/// kube-scheduler's queueing hint for claims does: the scheduler's own allocation writes,
/// echoed by the watch, wake nobody.
pub const DEVICES_FREED: Events = 1 << 9;

/// A pod left a node, freeing room on it (resources, a pod slot, host ports): sent with
/// [`POD_REMOVED`], and woken on only by pods whose missing room it can give, judged on the node
/// it freed (`queue::SchedulingQueue::on_cluster_event_with`, kube-scheduler's queueing hints).
pub const ROOM_FREED: Events = 1 << 10;

/// A ResourceSlice or a DeviceClass (DRA) appeared, changed or went away.
pub const DEVICES_CHANGED: Events = 1 << 11;

/// Every event (for a pod whose decision predates the wake-up history).
pub const ALL: Events = u32::MAX;
