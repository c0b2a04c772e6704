//! # kube-sim: a protocol-faithful Kubernetes API server simulator
//!
//! An HTTP/1.1 server on loopback that speaks the subset of the Kubernetes REST API that the
//! unmodified `kube` client and `kubectl` (get / apply / delete) use, with all state in memory.
//! Magma's adapter tests, end-to-end tests and benchmarks run against it (DESIGN.md §5). It is
//! strict where that matters to a scheduler: the status codes, `Status` reasons and messages of
//! the real server, optimistic concurrency, `410 Expired` watches, and binding conflicts.
//!
//! Start it with [`Sim::start`] (tests use port 0) or the `kube-sim` binary, then point a client at
//! [`SimHandle::kubeconfig_yaml`].
//!
//! ## Endpoints
//!
//! | Path | Methods | Semantics |
//! |---|---|---|
//! | `/version` | GET | `v1.34.0-kube-sim` version info |
//! | `/healthz`, `/readyz`, `/livez` | GET | `ok` |
//! | `/api` | GET | `APIVersions` (`v1`) |
//! | `/api/v1`, `/apis/<g>/<v>` | GET | `APIResourceList`, with `pods/status`, `pods/binding`, `<crd>/status` |
//! | `/apis`, `/apis/<g>` | GET | `APIGroupList` / `APIGroup`; CRD groups appear once registered |
//! | `/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>` | GET | a minimal OpenAPI v3: paths with `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, no schemas (enough for kubectl to pick server-side validation) |
//! | `/openapi/v2` | GET | 404 |
//! | `/api/v1/[namespaces/<ns>/]<plural>` | GET | list (`labelSelector`, `fieldSelector`) or watch (`watch=true\|1`) |
//! | same | POST | create (201); `generateName` supported |
//! | `…/<plural>/<name>` | GET, PUT, PATCH, DELETE | get, update (optimistic concurrency), patch, delete |
//! | `…/<plural>/<name>/status` | GET, PUT, PATCH | status subresource (pods, nodes, namespaces, CRDs, CRs with `subresources.status`) |
//! | `/api/v1/namespaces/<ns>/pods/<name>/binding` | POST | bind a pod (201 `Status` Success) |
//! | `/api/v1/watch/…` | GET | legacy watch paths |
//! | `/sim/faults` | GET, POST | read / replace the [`Faults`] (JSON, camelCase) |
//! | `/sim/faults/expire-watches` | POST | `{"count": n}`: the next n watches get `410 Expired` |
//! | `/sim/faults/drop-watches` | POST | close every open watch now |
//! | `/sim/bindings`, `/sim/writes` | GET | the [`BindingRecord`]s and [`WriteRecord`]s as JSON |
//! | `/sim/requests` | GET | the [`RequestRecord`]s (every API request: verb, group, resource, subresource, namespace, user agent) as JSON |
//!
//! Served resources: core `v1` nodes, pods, configmaps, namespaces, events;
//! `coordination.k8s.io/v1` leases; `events.k8s.io/v1` events; `apiextensions.k8s.io/v1`
//! customresourcedefinitions; and every resource a CRD defines (e.g. `shard.volcano.sh/v1alpha1`
//! nodeshards, cluster-scoped, with `/status`). Namespaces `default`, `kube-system`,
//! `kube-public`, `kube-node-lease` and `volcano-system` exist at start.
//!
//! ## Semantics
//!
//! - **Metadata** is server-managed: `uid`, `creationTimestamp`, `resourceVersion` (one global
//!   counter), `generation` (CRDs and custom resources; bumped when anything outside metadata and
//!   status changes). A no-op update does not bump the version.
//! - **Create**: 409 `AlreadyExists`; 422 `Invalid` without name/generateName; 400 when the body's
//!   namespace, kind or apiVersion disagree with the URL; 404 `namespaces "x" not found` for a
//!   missing namespace unless [`SimConfig::auto_create_namespaces`]. Pods are defaulted
//!   (`schedulerName: default-scheduler`, requests from limits, `status.phase: Pending`,
//!   `qosClass`) and must have containers with name and image. Creating a pod with `spec.nodeName`
//!   starts its KWOK lifecycle. Resources with a status subresource (pods, CRs) drop `.status` on
//!   create.
//! - **Update** (PUT): a set, stale `metadata.resourceVersion` is a 409 `Conflict` ("the object has
//!   been modified…"); an empty one is unconditional. Main-resource writes keep `.status`;
//!   `/status` writes change only `.status`. Pod spec updates follow the real immutability rules
//!   (only images, activeDeadlineSeconds, tolerations, gate removal), so `spec.nodeName` can only
//!   be set by a binding.
//! - **Patch**: `application/merge-patch+json`; `application/strategic-merge-patch+json` (merge
//!   patch plus keyed list merge: conditions by `type`, containers/volumes/env by `name`, ports,
//!   ownerReferences, taints, finalizers as a set; `$patch`, `$setElementOrder`, `$retainKeys`,
//!   `$deleteFromPrimitiveList` directives; rejected with 415 for custom resources like the real
//!   server); `application/json-patch+json`; `application/apply-patch+yaml` (approximated by a merge
//!   patch that creates missing objects; no field ownership). A `resourceVersion` inside the patch
//!   is a precondition.
//! - **Delete** returns the object (200), honours `preconditions.uid/resourceVersion`; there is no
//!   graceful deletion or finalizer handling (objects go at once). Deleting a namespace deletes its
//!   objects; deleting a CRD deletes its resources and unregisters them.
//! - **List**: `resourceVersion` in list metadata; label selectors `=`, `==`, `!=`, `in`, `notin`,
//!   `key`, `!key`; field selectors `=`, `==`, `!=` over the fields the real server supports per
//!   resource (pods: `metadata.name/namespace`, `spec.nodeName`, `spec.schedulerName`,
//!   `status.phase`, …; others 400 `field label not supported`). `limit`/`continue` are ignored
//!   (everything in one page, no continue token); `resourceVersion`/`resourceVersionMatch` on
//!   lists are ignored (always the latest state).
//! - **Watch**: `resourceVersion` unset or `0` starts with synthetic `ADDED` events for the current
//!   state; otherwise events after that version are replayed from a bounded history
//!   ([`SimConfig::history`], default 100k events across all resources) and a version older than
//!   the history yields a single `ERROR` event with a `410 Expired` Status. `allowWatchBookmarks`
//!   adds a `BOOKMARK` every [`SimConfig::bookmark_interval`] carrying the version the watcher is
//!   consistent with; `sendInitialEvents` adds the `initial-events-end` bookmark.
//!   `timeoutSeconds` (default 1800) closes the stream. Selectors filter events (an object that
//!   stops matching is not turned into `DELETED`). A watcher more than
//!   [`SimConfig::watch_buffer`] events behind is closed (the client resumes from its last
//!   version).
//! - **Binding**: 404 when the pod is missing; 409 `Conflict` on `pods/binding` when already
//!   assigned (`pod p is already assigned to node "n"`), when `metadata.uid` mismatches, when the
//!   pod is being deleted, or when it still has `spec.schedulingGates` (`pod p has non-empty
//!   .spec.schedulingGates`, as the real server); 422 when `target.name` is empty. On success
//!   `spec.nodeName` is set, `PodScheduled=True` added, `status.nominatedNodeName` cleared and the
//!   binding's annotations copied.
//! - **KWOK**: [`SimConfig::nodes`] Ready nodes `node-00000…` (32 CPU, 256Gi, 110 pods by default,
//!   label `type: kwok`); a bound pod becomes Running (podIP, hostIP, Ready conditions, container
//!   statuses) after [`SimConfig::running_delay`]; with [`SimConfig::pod_lifetime`] (or the
//!   `kube-sim.magma.io/lifetime-ms` annotation) it then becomes Succeeded and is deleted.
//! - **Faults** ([`FaultHandle`], `/sim/faults`): per-verb/resource error rates answering 500
//!   `InternalError` or 429 `TooManyRequests` with `Retry-After`, latency with jitter, watches
//!   dropped after a fixed/random time, forced `410` on the next watches, drop-all-watches.
//! - **Records**: every write request (verb, resource/subresource, namespace, name, code) and every
//!   successful binding with its time, for "bound exactly once" and "one write per pod" checks;
//!   and every request of any verb as RBAC sees it (verb, group, resource, subresource,
//!   namespace), so tests can derive the roles a client needs.
//!
//! ## Binary
//!
//! `kube-sim --port P --nodes N --kubeconfig-out FILE [--node-cpu 32] [--node-memory 256Gi]
//! [--node-pods 110] [--running-delay 0s|never] [--pod-lifetime 30s]
//! [--error-rate VERB[:RESOURCE]=RATE[:CODE]]... [--latency-ms MS] [--drop-watches-after-ms MS]
//! [--history 100000] [--auto-create-namespaces] [--install-nodeshard-crd]` serves on
//! `127.0.0.1:P`, writes a kubeconfig usable by `kubectl --kubeconfig FILE` and
//! `kube::Config::from_custom_kubeconfig`, and exits 0 on SIGTERM/SIGINT.
//!
//! ## Notes for clients
//!
//! - `kube`'s default client retries 429/503/504 itself (honouring `Retry-After`, up to 15
//!   attempts); set `Config::default_retry = false` to observe injected 429s directly.
//! - `kubectl apply` (plain, `--validate=false`, `--server-side`) works: kubectl finds the
//!   `fieldValidation` parameter in the minimal OpenAPI v3 and leaves validation to the server,
//!   which accepts `fieldValidation=Strict` but does not check unknown fields. `kubectl get` prints
//!   only NAME and AGE columns (no server-side Table).
//!
//! ## Deviations from the real API server
//!
//! No authentication/authorization (any token is accepted), no admission plugins beyond the pod
//! defaults above, no OpenAPI schemas (v2 is 404, v3 carries no schemas), no unknown-field
//! detection for `fieldValidation`, no protobuf/CBOR (JSON only), no Table output (kubectl prints from
//! the plain objects), no `dryRun` (400), no `deletecollection`, no paging, no graceful deletion,
//! no CRD schema validation or conversion, no server-side-apply field management, core and
//! `events.k8s.io` events are stored separately, and other resources (services, deployments, …)
//! are 404.

mod config;
mod error;
mod faults;
mod kinds;
mod kwok;
mod meta;
mod patch;
mod resources;
mod selector;
mod server;
mod sim;
mod store;
mod watch;

pub use config::{SimConfig, parse_duration};
pub use error::{ApiError, Details};
pub use faults::{ErrorRule, FaultHandle, Faults};
pub use kwok::{LIFETIME_ANNOTATION, node_name, node_object, nodeshard_crd, pod_object};
pub use sim::{BindingRecord, RequestRecord, Sim, SimError, SimHandle, WriteRecord};

/// A kubeconfig for a simulator at `server` (`http://127.0.0.1:PORT`): no TLS, a dummy token.
pub fn kubeconfig_yaml(server: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: {server}
contexts:
- name: kube-sim
  context:
    cluster: kube-sim
    user: kube-sim
    namespace: default
current-context: kube-sim
users:
- name: kube-sim
  user:
    token: kube-sim
preferences: {{}}
"
    )
}
