//! # kube-sim: a protocol-faithful Kubernetes API server simulator
//!
//! An HTTP/1.1 and HTTP/2 server on loopback (plain HTTP by default, HTTPS with a self-signed CA
//! with [`SimConfig::tls`]) that speaks the subset of the Kubernetes REST API that the
//! unmodified `kube` client and `kubectl` (get / apply / delete) use, with all state in memory.
//! Magma's adapter tests, end-to-end tests and benchmarks run against it (DESIGN.md §5). It is
//! strict where that matters to a scheduler: the status codes, `Status` reasons and messages of
//! the real server, optimistic concurrency, `410 Expired` watches, binding conflicts, and the
//! validation, defaults and status subresources of the storage objects, pod-level resources and
//! the `resource.k8s.io/v1` (DRA) objects and `policy/v1` PodDisruptionBudgets, PriorityClasses
//! and the Priority admission plugin (switchable as kube-apiserver's
//! `--disable-admission-plugins`), graceful deletion of pods (a simulated kubelet finishing
//! terminating pods) and finalizers, with an optional simulated PV controller and CSI
//! provisioner and kube-controller-manager's resource claim and disruption controllers.
//!
//! Start it with [`Sim::start`] (tests use port 0) or the `kube-sim` binary, then point a client at
//! [`SimHandle::kubeconfig_yaml`].
//!
//! ## HTTPS
//!
//! With [`SimConfig::tls`] (binary: `--tls`) the simulator serves HTTPS as a real API server does
//! with its self-signed certificates: at start it generates a CA (`kube-sim-ca@<unix time>`) and a
//! serving certificate it signs for `127.0.0.1`, `::1`, `localhost`, `kubernetes`,
//! `kubernetes.default` and `kubernetes.default.svc`; rustls (ring) offers ALPN `h2` and
//! `http/1.1`, so Go clients (kubectl) and Magma's client speak HTTP/2 and kube-client's default
//! stack HTTP/1.1 (each request's protocol is in its [`RequestRecord`]). Unlike kube-apiserver
//! (`--http2-max-streams-per-connection`, 1000), a connection carries at most 200 concurrent
//! streams, hyper's default that `axum::serve` does not expose. TLS
//! handshakes run in their own tasks (a stalled handshake holds up no other connection; 10 s
//! timeout). [`SimHandle::url`] is then `https://127.0.0.1:PORT`, [`SimHandle::ca_pem`] the CA
//! (PEM), and [`SimHandle::kubeconfig_yaml`] / [`SimHandle::write_kubeconfig`] carry it as
//! `certificate-authority-data`, so `kube::Config::from_custom_kubeconfig` and
//! `kubectl --kubeconfig` verify the server; a client without the CA fails its handshake
//! (`UnknownIssuer` / "certificate signed by unknown authority"). [`kubeconfig_yaml_with_ca`]
//! builds the same YAML from a URL and PEM. Accepted TCP connections (both modes), completed and
//! failed handshakes are counted in [`SimHandle::stats`] / `GET /sim/stats`, so a test or
//! benchmark can report new connections per pod.
//!
//! ## Endpoints
//!
//! | Path | Methods | Semantics |
//! |---|---|---|
//! | `/version` | GET | `v1.34.0-kube-sim` version info |
//! | `/healthz`, `/readyz`, `/livez` | GET | `ok` |
//! | `/api` | GET | `APIVersions` (`v1`) |
//! | `/api/v1`, `/apis/<g>/<v>` | GET | `APIResourceList` (every resource with `deletecollection` but namespaces), with `pods/status`, `pods/binding`, `pods/resize`, `persistentvolume[claim]s/status`, `<crd>/status` |
//! | `/apis`, `/apis/<g>` | GET | `APIGroupList` / `APIGroup`; CRD groups appear once registered |
//! | `/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/<g>/<v>` | GET | a minimal OpenAPI v3: paths with `x-kubernetes-group-version-kind` and the `fieldValidation` parameter, no schemas (enough for kubectl to pick server-side validation) |
//! | `/openapi/v2` | GET | 404 |
//! | `/api/v1/[namespaces/<ns>/]<plural>` | GET | list (`labelSelector`, `fieldSelector`) or watch (`watch=true\|1`) |
//! | same | POST | create (201); `generateName` supported |
//! | `…/namespaces/<ns>/<plural>`, `/api[s]/…/<cluster-scoped plural>` | DELETE | deletecollection (see below); 405 on a namespaced resource's all-namespaces path and on namespaces |
//! | `…/<plural>/<name>` | GET, PUT, PATCH, DELETE | get, update (optimistic concurrency), patch, delete |
//! | `…/<plural>/<name>/status` | GET, PUT, PATCH | status subresource (pods, nodes, namespaces, persistentvolumeclaims, persistentvolumes, resourceclaims, poddisruptionbudgets, CRDs, CRs with `subresources.status`) |
//! | `/api/v1/namespaces/<ns>/pods/<name>/binding` | POST | bind a pod (201 `Status` Success) |
//! | `/api/v1/namespaces/<ns>/pods/<name>/resize` | GET, PUT, PATCH | in-place resize of the containers' and the pod-level cpu and memory (the whole Pod in and out; other verbs 405) |
//! | `/api/v1/watch/…` | GET | legacy watch paths |
//! | `/sim/faults` | GET, POST | read / replace the [`Faults`] (JSON, camelCase) |
//! | `/sim/faults/expire-watches` | POST | `{"count": n}`: the next n watches get `410 Expired` |
//! | `/sim/faults/drop-watches` | POST | close every open watch now |
//! | `/sim/bindings`, `/sim/writes` | GET | the [`BindingRecord`]s and [`WriteRecord`]s as JSON |
//! | `/sim/stats` | GET | the [`SimStats`] counters (connections accepted, TLS handshakes and failures, watches force-closed, versions the packer had no room for) as JSON |
//! | `/sim/requests` | GET | the [`RequestRecord`]s (every API request, any outcome: verb, group, resource, subresource, namespace, name, user agent, `write`, status `code`, `http_version`) as JSON |
//!
//! Served resources: core `v1` nodes, pods, configmaps, namespaces, events,
//! persistentvolumeclaims (`pvc`, `/status`), persistentvolumes (`pv`, cluster-scoped, `/status`);
//! `storage.k8s.io/v1` storageclasses (`sc`) and csinodes (both cluster-scoped);
//! `coordination.k8s.io/v1` leases; `events.k8s.io/v1` events; `resource.k8s.io/v1`
//! deviceclasses and resourceslices (cluster-scoped, with `metadata.generation`),
//! resourceclaims (`/status`) and resourceclaimtemplates (no short names, as the real
//! discovery); `policy/v1` poddisruptionbudgets (`pdb`, `/status`, with `metadata.generation`);
//! `scheduling.k8s.io/v1` priorityclasses (`pc`, cluster-scoped; `system-node-critical` and
//! `system-cluster-critical` exist at start); `apiextensions.k8s.io/v1`
//! customresourcedefinitions; and every resource a CRD defines (e.g. `shard.volcano.sh/v1alpha1`
//! nodeshards, cluster-scoped, with `/status`). Namespaces `default`, `kube-system`,
//! `kube-public`, `kube-node-lease` and `volcano-system` exist at start.
//!
//! ## Semantics
//!
//! - **Metadata** is server-managed: `uid`, `creationTimestamp`, `resourceVersion` (one global
//!   counter), `generation` (pods, CRDs, custom resources, DeviceClasses, ResourceSlices and
//!   PodDisruptionBudgets; set to 1 on create and bumped when anything outside metadata and
//!   status changes, a resize included, and when a deletion starts; a binding does not bump
//!   it). A no-op update does not bump the version.
//! - **Create**: 409 `AlreadyExists` once the object is valid (an invalid one is a 422 whatever
//!   its name, as the real server validates before its storage refuses), except that a name
//!   made from `generateName` and found taken is made again, eight names in all
//!   (RetryGenerateName); 422 `Invalid` without name/generateName; 400 when the body's
//!   namespace, kind or apiVersion disagree with the URL; 404 `namespaces "x" not found` for a
//!   missing namespace unless [`SimConfig::auto_create_namespaces`]. Pods are defaulted
//!   (`schedulerName: default-scheduler`, requests from limits, `status.phase: Pending`,
//!   `qosClass`; `priority` and `preemptionPolicy` are set by the Priority admission plugin,
//!   see below) and must have containers with name and image, valid container resources
//!   (`ValidateContainerResourceRequirements`, containers then init containers, see below), a
//!   valid `priorityClassName` and `preemptionPolicy`. Creating a pod with `spec.nodeName`
//!   starts its KWOK lifecycle. Resources with a status subresource (pods, PVs, PVCs, CRs) drop
//!   `.status` on create.
//! - **Update** (PUT): a set, stale `metadata.resourceVersion` is a 409 `Conflict` ("the object has
//!   been modified…"); an empty one is unconditional. Main-resource writes keep `.status`;
//!   `/status` writes change only `.status`. Pod spec updates follow the real immutability rules
//!   (only images, activeDeadlineSeconds, tolerations, gate removal), so `spec.nodeName` can only
//!   be set by a binding. The submitted pod is first defaulted as on create (the real server
//!   defaults every request body it decodes), and a left-out `priority` / `preemptionPolicy`
//!   is kept from the stored pod (Priority admission, when it is on), so a replace with a
//!   partial spec is judged on what it changes. A pod created with `schedulingGates` gets `PodScheduled=False`,
//!   reason `SchedulingGated` (`applySchedulingGatedCondition`).
//! - **Pod status writes** (update, patch and apply of `pods/status`) are judged, against the
//!   stored spec, by the DRA part of `ValidatePodStatusUpdate` (1.36; see `podstatus.rs`), 422
//!   with upstream's messages and nothing written: `status.resourceClaimStatuses[i].name` must
//!   name an entry of `spec.resourceClaims` (`Invalid value: "x": must match the name of an
//!   entry in `spec.resourceClaims``), at most once (`Duplicate value: "x"`), and a set
//!   `resourceClaimName` be a DNS subdomain (reported at `….resourceClaimName`, as since
//!   1.36); `status.extendedResourceClaimStatus` (DRA extended resources, KEP-5004) needs
//!   `requestMappings` (`Required value: at least one request mapping is required`), each
//!   naming a container or init container (`…requestMappings[i].containerName: Invalid value:
//!   "x": must match the name of an entry in spec.initContainers.name or
//!   spec.containers.name`), one of its requests (`…resourceName: Invalid value: "x": must
//!   match the extended resource name of an entry in spec.initContainers.resources.requests or
//!   spec.containers.resources.requests`) and a DNS-label `requestName` (reported, as upstream
//!   does, at `status.extendedResourceClaimStatus.requestName` without the index), no mapping
//!   twice (three `Duplicate value`s, container, resource and request), and a
//!   `resourceClaimName` that is set and a DNS subdomain. Neither field is immutable upstream:
//!   a set status may be changed or removed. The other checks of `ValidatePodStatusUpdate`
//!   (conditions, `nodeName`, `qosClass`, IPs, container state transitions) are not made.
//! - **Patch**: `application/merge-patch+json`; `application/strategic-merge-patch+json` (merge
//!   patch plus keyed list merge: conditions by `type`, containers/volumes/env and a pod's
//!   `status.resourceClaimStatuses` by `name`, ports,
//!   ownerReferences and a ResourceClaim's `status.reservedFor` by `uid`, taints, finalizers as
//!   a set; `$patch`, `$setElementOrder`, `$retainKeys`,
//!   `$deleteFromPrimitiveList` directives; rejected with 415 for custom resources like the real
//!   server); `application/json-patch+json`; `application/apply-patch+yaml` (approximated by a merge
//!   patch that creates missing objects; `fieldManager` required). A `resourceVersion` inside the
//!   patch is a precondition.
//! - **managedFields**: every create, update and patch records `metadata.managedFields` as the
//!   field manager does: one entry per (manager, operation, subresource) with `manager` (the
//!   `fieldManager` parameter, else the User-Agent before its first `/`), `operation` (`Apply`
//!   for apply patches, else `Update`), `apiVersion`, `time`, `fieldsType: FieldsV1`, `fieldsV1`
//!   and `subresource` (`status` for `/status` writes, `resize` for `pods/resize` writes, which own
//!   only the containers' `resources` and `resizePolicy` fields). The writer's entry gains the fields its
//!   write changed (an apply: exactly the applied fields) and its `time` is renewed; other
//!   entries lose those fields; removed fields leave every entry; empty entries are dropped;
//!   entries are sorted Apply first, then by time. A write that changes nothing leaves the entries
//!   alone. Server-set metadata (`name`, `namespace`, `uid`, `resourceVersion`,
//!   `creationTimestamp`, `generation`, `managedFields`) and, for resources with a status
//!   subresource, `.status` on main-resource writes are owned by nobody. A `pods/binding` records
//!   no entry (the real binding storage bypasses the field manager, so `spec.nodeName` and
//!   `PodScheduled` stay unowned); the simulated kubelet's status writes are `kubelet` /
//!   `Update` / `status` entries and the seeded nodes carry a `kubelet` create entry; objects
//!   created through [`SimHandle::create`] are owned by `kube-sim`; the storage controllers'
//!   writes keep the entries unchanged. `fieldManager` is validated as `ValidateFieldManager`
//!   (at most 128 bytes, printable characters; 422 on `CreateOptions`/`UpdateOptions`/
//!   `PatchOptions.meta.k8s.io ""`).
//! - **Delete** (`DeleteOptions` from the body, else the `gracePeriodSeconds`,
//!   `propagationPolicy` and `orphanDependents` query parameters; a bad `propagationPolicy` is
//!   a 422 on `DeleteOptions.meta.k8s.io ""`): `preconditions.uid/resourceVersion` are checked
//!   as `BeforeDelete` does (409 `Operation cannot be fulfilled on Pod "p": the UID in the
//!   precondition (…) does not match the UID in record (…). The object might have been deleted
//!   and then recreated`). Pods are deleted **gracefully** as the pod strategy and the generic
//!   store do it: the grace period is the request's `gracePeriodSeconds`, else
//!   `spec.terminationGracePeriodSeconds` (defaulted to 30), 0 for a pod without `spec.nodeName`
//!   or already Succeeded/Failed, 1 for a negative one; the DELETE writes
//!   `metadata.deletionTimestamp` (now + the grace period, whole seconds),
//!   `deletionGracePeriodSeconds` and `generation + 1` (a `MODIFIED` event) and answers 200
//!   with that pod; with grace 0 the same request then deletes it (`DELETED`), so an unbound
//!   or finished pod goes at once, after the update that marks it. A later DELETE with a
//!   shorter grace period moves the timestamp back (never before now; a non-zero grace that
//!   would is 1) and, with 0, deletes; an equal or longer one, or none, changes nothing (200,
//!   the pod as stored). A terminating pod stays until the simulated kubelet finishes it (see
//!   KWOK). **Finalizers** (pods, PodDisruptionBudgets and ResourceClaims): a DELETE of an
//!   object with `metadata.finalizers` marks it (`markAsDeleting`: grace 0, the timestamp
//!   now; for a pod its graceful update) and leaves it; an update or patch that removes the
//!   last finalizer of an object marked with grace 0 deletes it (`shouldDeleteDuringUpdate`;
//!   the request gets the object it sent, the `DELETED` event the stored one). Updates never
//!   change `deletionTimestamp` nor `deletionGracePeriodSeconds`; status writes (a
//!   `DisruptionTarget` condition…) work on terminating pods; a binding of a pod being deleted is a 409. A DELETE
//!   that leaves the object answers 202 when it asked `orphanDependents: false`, else 200.
//!   Pods answer with the object, PodDisruptionBudgets (whose storage does not return deleted
//!   objects) with a `Status` `Success` whose `details` name it (`name`, `group`,
//!   `kind: poddisruptionbudgets`, `uid`); other resources are deleted at once (no finalizers)
//!   and answer with the object. Deleting a namespace deletes its objects at once; deleting a
//!   CRD deletes its resources and unregisters them. [`SimHandle::delete`] removes an object
//!   directly (one `DELETED` event, no grace period, no finalizers).
//! - **DeleteCollection** (`DELETE` on a collection, verb `deletecollection`, as
//!   `Store.DeleteCollection` and its handler do it): the `ListOptions` are read and validated as
//!   a list's (selectors, `limit`, `continue`, `resourceVersion[Match]`: the same 400 and 422),
//!   then the `DeleteOptions` as a DELETE's. It lists the matching objects (all of them, in pages
//!   of 10,000 at the first page's version; with `limit`, only that page) and deletes each as a
//!   DELETE with those options would (graceful deletion, finalizers, preconditions per object,
//!   the same events and versions), skipping one already gone (404); any other error ends the
//!   request with that error, leaving what it deleted deleted. Like upstream, it deletes each
//!   through the generic store, so the system PriorityClasses are not protected from it. The
//!   answer is 200 with the list as listed (`<Kind>List`, the list's `resourceVersion`; with
//!   `limit` the page's `continue` and `remainingItemCount`, without it the first page's, as
//!   upstream keeps the first page's list metadata), items as they were before deletion. Only a namespace's collection of a namespaced resource has the verb (the
//!   all-namespaces path is 405), and namespaces have none (405), as discovery says.
//! - **List**: `resourceVersion` in list metadata; label selectors `=`, `==`, `!=`, `in`, `notin`,
//!   `key`, `!key`; field selectors `=`, `==`, `!=` over the fields the real server supports per
//!   resource (pods: `metadata.name/namespace`, `spec.nodeName`, `spec.schedulerName`,
//!   `status.phase`, …; PVs and PVCs also the legacy `name`; others 400 `field label not
//!   supported`; `status.phase!=Succeeded,status.phase!=Failed` as kube-scheduler's pod informer
//!   uses). `ListOptions` are validated as `ValidateListOptions` does (a 422 `Invalid` on
//!   `ListOptions.meta.k8s.io ""`: `resourceVersionMatch` without `resourceVersion` or with
//!   `continue`, an unsupported match, `Exact` with `0`, `sendInitialEvents` on a list). Reads:
//!   no `resourceVersion` → the latest state; `0` → any state, served whole (the watch cache
//!   ignores `limit`); `N` or `N` + `NotOlderThan` → the latest state once the server has
//!   reached N; `N` + `Exact` → the state at exactly N, rebuilt from the watch history (410
//!   `Expired` "The resourceVersion for the provided list is too old." beyond it); a version the
//!   server has not reached waits 3 s, then 504 `Timeout` "Too large resource version: N, current:
//!   C" (cause `ResourceVersionTooLarge`, `Retry-After: 1`). `limit` > 0 pages in key order
//!   (namespace, name), counting matching items; while more objects follow, the page carries an
//!   opaque `metadata.continue` (the real token format: base64url JSON `{v, rv, start}`) and,
//!   without selectors, `metadata.remainingItemCount`. A continue page reads the first page's
//!   version (later writes do not show); a token older than the history is 410 `Expired` ("The
//!   provided continue parameter is too old…"), a malformed one 400 "invalid continue token: …",
//!   and a token together with a non-zero `resourceVersion` 400 "specifying resource version is
//!   not allowed when using continue". kube-runtime's watcher lists in pages of 500.
//! - **Watch**: `resourceVersion` unset or `0` starts with synthetic `ADDED` events for the current
//!   state; otherwise events after that version are replayed from a bounded history
//!   ([`SimConfig::history`], default 100k events across all resources) and a version older than
//!   the history yields a single `ERROR` event with a `410 Expired` Status. `allowWatchBookmarks`
//!   adds a `BOOKMARK` (only `kind`, `apiVersion` and `metadata.resourceVersion`: the version the
//!   watcher is consistent with) every [`SimConfig::bookmark_interval`] (the real server: about a
//!   minute; 1 s by default here so tests see one quickly) and one as the watch ends at its
//!   timeout; a bookmark that finds the watch's buffer full is skipped; `sendInitialEvents` adds
//!   the `initial-events-end` bookmark. `timeoutSeconds` (default 1800) closes the stream.
//!   Selectors are applied to the object before and after each change as the watch cache does:
//!   an object that starts matching arrives as `ADDED`, one that stops matching as `DELETED`
//!   (its previous state at the new version) — a `spec.nodeName=` watch sees a bound pod leave, a
//!   `status.phase!=Succeeded,status.phase!=Failed` watch a finished pod leave, and neither its
//!   later deletion.
//! - **Slow watchers** are closed as the real watch cache closes them: each watch has a bounded
//!   input buffer sized as `suggestedWatchChannelSize` caps it on a busy server (10 for a pod
//!   watch with an exact `spec.nodeName` field selector, the indexed trigger; 1000 for other pod
//!   watches; 100 for other resources); an event that finds it full waits for room up to the
//!   dispatch budget shared by all watches (50 ms refilled per second, at most 100 ms), then the
//!   watch is ended ("Forcing watcher close due to unresponsiveness" at WARN) and counted in
//!   [`SimStats::watches_forced_closed`]; the client resumes from its last version. Unlike the
//!   real server a blocked watch does not delay the others' events (each watch dispatches for
//!   itself), and the initial events do not pass through the buffer. A watch more than
//!   [`SimConfig::watch_buffer`] events behind the store's broadcast is also closed.
//! - **Watch writes** follow the real handler's: it flushes only when its event channel is empty
//!   and otherwise lets its writer's 4 KiB buffer fill, so the events a watch is behind on leave
//!   together in chunks of about 4 KiB (HTTP/2 `DATA` frames), and a watch that keeps up gets a
//!   chunk per event.
//! - **Binding**: 404 when the pod is missing; 409 `Conflict` on `pods/binding` when already
//!   assigned (`pod p is already assigned to node "n"`), when `metadata.uid` mismatches, when the
//!   pod is being deleted, or when it still has `spec.schedulingGates` (`pod p has non-empty
//!   .spec.schedulingGates`, as the real server); 422 when `target.name` is empty. On success
//!   `spec.nodeName` is set, `PodScheduled=True` added, `status.nominatedNodeName` cleared and the
//!   binding's annotations copied.
//! - **Resize** (`pods/<name>/resize`, in-place pod vertical scaling, on by default since v1.33):
//!   GET answers the pod; PUT and PATCH (all four patch types) take from the submitted pod only
//!   `spec.containers[*]` and `spec.initContainers[*]` `resources` and `resizePolicy`, copied by
//!   position into the stored pod, and the pod-level `spec.resources`
//!   (InPlacePodLevelResourcesVerticalScaling, beta and on by default in v1.36); the rest (metadata, other spec fields, status) is silently
//!   reset, as the real resize strategy does. The write bumps `resourceVersion` and `generation`,
//!   reaches watchers as `MODIFIED`, and is recorded with subresource `resize` (verb `update` /
//!   `patch`; write resource `pods/resize`); a resize that changes nothing writes nothing. Refusals
//!   are `ValidatePodResize`'s 422s with its messages: containers added, removed, renamed or
//!   reordered; negative quantities, requests above limits; invalid pod-level resources (the
//!   create rules below); static (mirror) and windows pods; a changed QoS class (`spec: Invalid value: "Guaranteed": Pod QOS Class may
//!   not change as a result of resizing`); a running container whose status reports no
//!   `resources` (a node without resize support); removed requests or limits (containers and
//!   pod level: `spec.resources.requests: Forbidden: resource requests cannot be removed`);
//!   container memory limits decreased or added under the default `NotRequired` policy; any
//!   change other than cpu and memory, of a container or at pod level (`spec: Forbidden: only
//!   cpu and memory resources are mutable`, for sidecars `… for
//!   sidecar containers are mutable`, and `resources for non-sidecar init containers are
//!   immutable`). A malformed quantity is a 400 as in decoding, a missing pod 404. Unscheduled
//!   pods resize (the real server only checks the kubelet's support once containers run).
//!   Quantities in messages are canonical (`resource.Quantity.String()`).
//! - **Container resources** (`ValidateContainerResourceRequirements` of each container and init
//!   container, after requests are defaulted from limits): names qualified, without a domain a
//!   standard resource (`Invalid value: "gpu": must be a standard resource type or fully
//!   qualified`) and a container one (`… must be a standard resource for containers`), with a
//!   domain native (`kubernetes.io/` in it, so DRAExtendedResource's implicit
//!   `deviceclass.resource.kubernetes.io/<class>` is accepted, fractions and requests below
//!   limits included) or an extended resource name (`doesn't follow extended resource name
//!   standard`); quantities non-negative; extended resources (`example.com/gpu`) whole numbers
//!   (`Invalid value: "500m": must be an integer`), their requests equal to their limits
//!   (`spec.containers[0].resources.requests: Invalid value: "1": must be equal to
//!   example.com/gpu limit of 2`) and never without one (`spec.containers[0].resources.limits:
//!   Required value: Limit must be set for non overcommitable resources`); requests at most
//!   limits; hugepages multiples of their page size and only with cpu or memory. Resource
//!   names and quantities in these messages are quoted, as the 1.36 server renders values of
//!   named types (`json.Marshal`; a quantity as its canonical text). Resource `claims` of
//!   containers are not checked.
//! - **Pod-level resources** (`spec.resources`, KEP-2837, on by default since v1.34), defaulted
//!   as `SetDefaults_Pod` does after the container defaults: hugepage limits from the
//!   containers' aggregate limits (`defaultHugePagePodLimits`); with pod-level limits, the
//!   requests of overcommitable supported resources from the containers' aggregate requests,
//!   then the others from the limits (`defaultPodRequests`); with pod-level requests and no
//!   limits, cpu/memory limits from the containers' aggregate when every container sets one
//!   (`defaultPodLimits`); aggregates follow `AggregateContainerRequests` (containers and
//!   sidecars summed, each init container on top of the sidecars before it, the larger of
//!   both), sums written canonically. Validated as `validatePodResources` in the real order:
//!   windows pods may not set it; no `claims`; only `cpu`, `memory` and `hugepages-*`
//!   (`Unsupported value: "nvidia.com/gpu": supported values: "cpu", "hugepages-", "memory"`,
//!   names not standard nor qualified `must be a standard resource type or fully qualified`);
//!   non-negative quantities, hugepage multiples; requests at most the limits (`must be less
//!   than or equal to cpu limit of 1`), equal for non-overcommitable ones; a limit for each
//!   non-overcommitable request (`Limit must be set for non overcommitable resources`);
//!   `HugePages require cpu or memory`; then `validatePodResourceConsistency`: pod requests of
//!   supported resources set at pod level at least the containers' aggregate (`must be greater
//!   than or equal to aggregate container requests of 3`), pod hugepage limits at least the
//!   aggregate hugepage limits, no container limit above the pod's
//!   (`spec.resources.containers[0][cpu].limits: … must be less than or equal to pod limits of
//!   1`). The QoS class comes from the pod-level requests and limits when they are set.
//!   `spec.resources` is immutable on update (the generic pod update message); it changes only
//!   through `pods/resize`.
//! - **KWOK**: [`SimConfig::nodes`] Ready nodes `node-00000…` (32 CPU, 256Gi, 110 pods by default,
//!   label `type: kwok`); a bound pod becomes Running (podIP, hostIP, Ready conditions, container
//!   statuses reporting the containers' `resources`, as a v1.33+ kubelet with in-place resize;
//!   a pod with pod-level resources also `status.resources` {requests, limits} and
//!   `status.allocatedResources`, its pod-level requests, as a v1.36 kubelet) after
//!   [`SimConfig::running_delay`]. A resize of a Running pod is answered at once, in a status
//!   write of its own, with the kubelet's feasibility rules (`canResizePod`; the pod's needs are
//!   its pod-level requests where set, else its containers' aggregate): more cpu or memory than
//!   the node's allocatable is `PodResizePending` `Infeasible` (`Node didn't have enough
//!   capacity: cpu, requested: 8000, capacity: 4000`, millicores and bytes, memory checked
//!   first), more than the other Running pods on the node leave is `Deferred` (`Node didn't
//!   have enough resource: cpu, requested: 2000, used: 3000, capacity: 4000`), the condition
//!   carrying `observedGeneration`; otherwise the resize is actuated (the containers' statuses
//!   report the new `resources`, the pod-level `status.resources` / `status.allocatedResources`
//!   the new pod-level ones, a pending condition goes; no `PodResizeInProgress`). With
//!   [`SimConfig::pod_lifetime`] (or the `kube-sim.magma.io/lifetime-ms` annotation) a pod then
//!   becomes Succeeded and is deleted (removed at once, one `DELETED` event, as a garbage
//!   collector's force delete without its grace-0 update). A pod deleted gracefully is not
//!   started and does not complete: the kubelet **finishes** it after
//!   `min(`[`SimConfig::termination_delay`]`, deletionGracePeriodSeconds)` (default 100 ms,
//!   binary `--termination-delay`; `None` / `never`: terminating pods stay, as on a node that
//!   is down), as a kubelet's status manager does once the containers have stopped: first a
//!   status write of its own (`kubelet`, subresource `status`) with the containers that ran
//!   terminated (exit code 0, `Completed`, they stop on SIGTERM) and those that never ran
//!   `ContainerStatusUnknown` (137), the phase `Succeeded` when all exited 0 and else `Failed`,
//!   `Ready`/`ContainersReady` False (`PodCompleted`); then a DELETE with grace period 0 and the
//!   pod's UID as precondition, which updates the pod (`deletionGracePeriodSeconds: 0`) and
//!   deletes it. A watch of the pod therefore sees `MODIFIED` (marked), `MODIFIED` (terminal
//!   status), `MODIFIED` (grace 0), `DELETED`, as against a real cluster; a watch that selects
//!   non-terminal pods (`status.phase!=Succeeded,status.phase!=Failed`) sees the pod leave at
//!   the terminal status. A pod with finalizers stays marked until they are removed. The real
//!   kubelet takes as long as the containers need to stop (at most the grace period); the
//!   short default keeps tests fast while the terminating state stays observable.
//! - **Storage objects** (the defaults of `pkg/apis/{core,storage}/v1`, the validation of
//!   `pkg/apis/core/validation` and `pkg/apis/storage/validation` with the real field paths and
//!   messages, aggregated as `[e1, e2]` with one `details.causes` entry each; a malformed quantity
//!   is a 400 as in decoding):
//!   - PVC: `spec.accessModes` required, each of ReadWriteOnce/ReadOnlyMany/ReadWriteMany/
//!     ReadWriteOncePod, ReadWriteOncePod alone; `spec.resources[storage]` required and > 0;
//!     `spec.volumeMode` defaulted to `Filesystem` (Filesystem/Block); class name, selector and
//!     data source checks; `status` reset to `{phase: Pending}` on create (an empty phase is
//!     defaulted on status writes too); `DefaultStorageClass` admission (an unset
//!     `storageClassName` gets the newest class annotated `storageclass.kubernetes.io/
//!     is-default-class: "true"`). Updates: the spec is immutable except `volumeName` (set once),
//!     a nil class (set once) and, for Bound claims, the request; shrinking only down to above
//!     `status.capacity` (RecoverVolumeExpansionFailure, 1.34); `volumeMode` immutable;
//!     growing needs a Bound claim whose class has `allowVolumeExpansion: true` (403 `Forbidden`
//!     as `PersistentVolumeClaimResize` answers). `PUT …/status` needs a `resourceVersion`.
//!   - PV: `spec.capacity` with exactly `storage` (> 0); `spec.accessModes` as for claims;
//!     exactly one volume source (`csi` with `driver` and `volumeHandle`, `hostPath` with `path`
//!     and `type`, `local` with an absolute `path` and `spec.nodeAffinity`, `nfs`, … counted in
//!     the real order); `nodeAffinity.required.nodeSelectorTerms` as node selector terms
//!     (In/NotIn need values, Exists/DoesNotExist none, Gt/Lt exactly one, keys qualified
//!     names, `matchFields` only `metadata.name`); `persistentVolumeReclaimPolicy` defaulted to
//!     `Retain`, `volumeMode` to `Filesystem`, `hostPath.type` to `""`; `status` reset to
//!     `{phase: Pending, lastPhaseTransitionTime}` on create, `lastPhaseTransitionTime` renewed on
//!     phase changes. Updates: the volume source, `volumeMode` and a set `nodeAffinity` are
//!     immutable.
//!   - StorageClass: `provisioner` required (a qualified name); `volumeBindingMode` defaulted to
//!     `Immediate` (Immediate/WaitForFirstConsumer), `reclaimPolicy` to `Delete`
//!     (Delete/Retain); `allowedTopologies[].matchLabelExpressions[]` with a valid `key` and
//!     non-empty, distinct `values`, no duplicate terms; `provisioner`, `parameters`,
//!     `reclaimPolicy` and `volumeBindingMode` immutable.
//!   - CSINode: `spec.drivers[]` with a CSI driver `name` (unique) and `nodeID` (≤ 256 bytes),
//!     `allocatable.count` ≥ 0, valid `topologyKeys`; a driver entry may change only its
//!     `allocatable`; strategic merge patches merge `drivers` by `name`.
//! - **`resource.k8s.io/v1`** (DRA, GA since v1.34), as `pkg/apis/resource` and its registry
//!   serve it: defaults `allocationMode: ExactCount` and `count: 1` (exact requests and
//!   `firstAvailable` sub-requests), toleration `operator: Equal`, device taints' `timeAdded`;
//!   a claim's `status` is reset to `{}` on create and a template's `spec.metadata` is `{}`;
//!   `metadata.generation` on DeviceClasses and ResourceSlices only. Validation with the real
//!   paths and messages: names (DNS subdomains; request, sub-request and device names DNS
//!   labels; attribute and capacity names `[domain/]C identifier`; pool names), requests
//!   (`exactly one of `exactly` or `firstAvailable` is required`, `allocationMode`
//!   `ExactCount`/`All` with `count`, class names, at most 32 requests, 8 sub-requests, 32
//!   selectors, 16 tolerations, unique names), selectors whose `cel.expression` must compile
//!   (at most 10 KiB; the 422 is cel-go's: `compilation failed: ERROR: <input>:1:46: Syntax
//!   error: …` with the source line and caret, `undeclared reference to 'x' (in container '')`,
//!   `undefined field 'x'`, `must evaluate to bool or the unknown type, not string`; parsed by
//!   the `cel` crate's ANTLR parser built from cel-go's grammar, then checked by a small type
//!   checker of the `device` environment, see `cel.rs`), constraints and opaque configs;
//!   DeviceClass selectors and configs (not compiled again when unchanged on update) and
//!   `extendedResourceName`; ResourceSlice `driver`, `pool` (name, `generation` ≥ 0,
//!   `resourceSliceCount` > 0), exactly one of `nodeName`/`nodeSelector`/`allNodes`/
//!   `perDeviceNodeSelection`, at most 128 devices (64 with taints, counters or list
//!   attributes), per device at most 32 attributes and capacities, one value per attribute,
//!   strings and versions at most 64 bytes, semver versions, no `requestPolicy` without
//!   `allowMultipleAllocations` and consumable capacity's `validValues`/`validRange` policies
//!   as `validateRequestPolicy` checks them, at most 16 taints with a label key and effect
//!   `NoExecute`/`NoSchedule`/`None`, per-device node selection only with
//!   `perDeviceNodeSelection`; any DRA quantity that does not parse is a 400 as in decoding.
//!   Updates: claim and template specs are immutable (`spec: Invalid value: …: field is
//!   immutable`), slices keep `driver`, `pool.name` and `nodeName`. Claim `/status` writes:
//!   `reservedFor` at most 256 entries with `resource`, `name` and a unique `uid`, only with an
//!   `allocation` (`may not be specified when `allocated` is not set`), none added while the
//!   claim has a `deletionTimestamp` (`new entries may not be added while
//!   `deallocationRequested` or `deletionTimestamp` are set`); a new `allocation`'s
//!   results name requests of the claim, valid drivers, pools, devices and `shareID` UUIDs;
//!   `devices` entries name allocated shares; a set allocation is immutable. ResourceSlices
//!   take the field selectors `spec.nodeName`, `spec.driver` and
//!   `metadata.name` (others: 400 `field label not supported for resource.k8s.io/v1,
//!   Kind=ResourceSlice: …`), the other DRA kinds `metadata.name`/`metadata.namespace`.
//!   managedFields treat the v1 atomic lists (`requests` of a claim's devices, `devices`,
//!   `selectors`, `constraints`, `config`, `firstAvailable`, `results`) as a whole and key
//!   `reservedFor` by `uid`.
//! - **Resource claim controller** ([`SimConfig::resource_claim_controller`], on by default as
//!   in kube-controller-manager; binary `--no-resource-claim-controller`), following the store's
//!   commits of pods with `spec.resourceClaims`, claims and templates: a pod claim naming a
//!   `resourceClaimTemplateName` gets a claim made from the template (`generateName`
//!   `<pod>-<claim>-`, owner reference to the pod with `controller` and `blockOwnerDeletion`,
//!   the template's labels and annotations plus [`POD_CLAIM_NAME_ANNOTATION`], manager
//!   `kube-controller-manager`) and the pod's `status.resourceClaimStatuses` gets
//!   `{name, resourceClaimName}` by a server-side apply of `ResourceClaimController`; a missing
//!   template makes nothing until it is created; a scheduled pod is added to the `reservedFor`
//!   of its allocated claims; `reservedFor` entries of pods that are gone, replaced or done are
//!   removed and, when none is left and the claim carries the scheduler's
//!   [`DELETE_PROTECTION_FINALIZER`], the allocation is cleared in the same write and the
//!   finalizer removed in the next; a claim being deleted that nobody reserves is deallocated
//!   and loses that finalizer; an unreserved claim made for a pod that is done is deleted, and
//!   claims whose owning pods are all gone are garbage-collected (plain deletions: the
//!   finalizer holds a claim, marked with a `deletionTimestamp`, until it is removed, as for
//!   pods and PodDisruptionBudgets). Each step is its own write (these writes, like the
//!   storage controllers', are not in the request records).
//!   A pod is done when its phase is terminal or it is being deleted without a node
//!   (`isPodDone`).
//! - **`policy/v1` PodDisruptionBudgets** (`pkg/registry/policy/poddisruptionbudget`,
//!   `pkg/apis/policy/validation`): no defaults (`unhealthyPodEvictionPolicy` only when set,
//!   no `minAvailable` when neither bound is set); on create the status is reset to the zero
//!   status, which carries `disruptionsAllowed`, `currentHealthy`, `desiredHealthy` and
//!   `expectedPods` (0), and `generation: 1`. Validation with the real messages, aggregated as
//!   `[e1, e2]`: both bounds set (`spec: Invalid value: {"MinAvailable":1,"Selector":{…},
//!   "MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: minAvailable and maxUnavailable
//!   cannot be both set`, the internal spec rendered as Go's `encoding/json` does), negative
//!   integers (`must be greater than or equal to 0`), strings that are not `[0-9]+%` and
//!   percentages over 100% (`must not be greater than 100%`), the label selector
//!   (`ValidateLabelSelector`; invalid `matchExpressions` values the stored budget already had
//!   are tolerated on update), `unhealthyPodEvictionPolicy` (`IfHealthyBudget`/`AlwaysAllow`);
//!   a bound that is neither a string nor an int32 is a 400 as in decoding (`json: cannot
//!   unmarshal number 1.5 into Go value of type int32`). The spec may be updated (since v1.15;
//!   `generation` bumped); a strategic merge patch replaces `spec.selector`
//!   (`patchStrategy=replace`). `/status` writes fill in the four counters and are validated
//!   as `ValidatePodDisruptionBudgetStatusUpdate` (conditions as `metav1.Condition`s: type,
//!   status `True`/`False`/`Unknown`, `lastTransitionTime` and a well-formed `reason`
//!   required, unique types; counters non-negative).
//! - **Disruption controller** ([`SimConfig::disruption_controller`], on by default as in
//!   kube-controller-manager; binary `--no-disruption-controller`), following the store's
//!   commits of budgets and of pods (while budgets exist, or when they carry a
//!   `DisruptionTarget` condition); every budget's status is written by
//!   `kube-controller-manager` (`UpdateStatus`, subresource `status`) as `trySync` computes it,
//!   when it changed: the budget's pods are those of its namespace its selector selects (no
//!   selector: none, `{}`: all), whatever their phase; `expectedPods` is their number for an
//!   integer `minAvailable` (`desiredHealthy = minAvailable`) and otherwise the summed scale
//!   of their controllers, with `desiredHealthy` the percentage of it rounded up
//!   (`minAvailable: "50%"`) or `expectedPods - maxUnavailable` (percentages rounded up, at
//!   least 0); `currentHealthy` counts the pods without `deletionTimestamp` (nor a live
//!   `disruptedPods` entry) whose `Ready` condition is True (the simulated kubelet sets it when
//!   a pod becomes Running and clears it when it finishes); `disruptionsAllowed =
//!   currentHealthy - desiredHealthy`, 0 when negative or when `expectedPods` is 0;
//!   `observedGeneration`; `disruptedPods` kept as `buildDisruptedPodMap` does (nothing adds
//!   entries: no eviction API) and the `DisruptionAllowed` condition: `True`/`SufficientPods`
//!   or `False`/`InsufficientPods`, message `""`, `observedGeneration`, `lastTransitionTime`
//!   renewed when it flips. Controllers are found as `getExpectedScale`'s finders find them:
//!   pods without a controller owner reference are unmanaged and count 0 (upstream warns that
//!   the status is then undefined and asks for an integer `minAvailable`); kube-sim serves no
//!   ReplicationControllers, ReplicaSets, Deployments or StatefulSets, so owners of those kinds
//!   are never found and fail the sync (`found no controllers for pod "p"`); a custom resource
//!   whose CRD version declares a `scale` subresource counts its `specReplicasPath` when its UID
//!   matches; owners without a scale subresource (`jobs.batch does not implement the scale
//!   subresource`) and of unknown kinds (`no matches for kind "X" in version "g/v"`) fail too.
//!   A failed sync writes `failSafe`'s status: `disruptionsAllowed: 0` and
//!   `DisruptionAllowed=False`, reason `SyncFailed`, the error as message. So percentages
//!   and `maxUnavailable` work with owners that are scalable custom resources; for other pods
//!   use an integer `minAvailable`, as upstream recommends. The controller also sets a pod's
//!   `DisruptionTarget=True` condition to False (no reason) once it is older than
//!   [`SimConfig::stale_disruption_condition_timeout`] (2 minutes) on a pod that is neither
//!   terminating nor finished and when the kubelet did not set it (`TerminationByKubelet`).
//!   Commits that arrive together are handled once per budget.
//! - **Storage controllers** ([`SimConfig::provisioner`], off by default): with
//!   [`Provisioner::After`]`(delay)` a PV controller and a CSI external provisioner. A pending
//!   claim of an existing class (not `kubernetes.io/no-provisioner`) is handed over at once
//!   ([`STORAGE_PROVISIONER_ANNOTATION`] and its beta twin) — for `WaitForFirstConsumer` classes
//!   only once it carries [`SELECTED_NODE_ANNOTATION`] — and after `delay` gets the PV
//!   `pvc-<claim uid>` (the request, access modes, volume mode, class, reclaim policy, mount
//!   options, `claimRef`, `csi: {driver: <provisioner>, volumeHandle}`,
//!   [`PROVISIONED_BY_ANNOTATION`], and node affinity: for WaitForFirstConsumer the selected
//!   node's value of every key of the class's `allowedTopologies`, or of [`HOSTNAME_LABEL`]; for
//!   Immediate the class's first allowed topology term). Then the PV becomes `Bound`, the claim
//!   gets `spec.volumeName` with [`BIND_COMPLETED_ANNOTATION`] and
//!   [`BOUND_BY_CONTROLLER_ANNOTATION`] `"yes"`, and `status` `Bound` with the volume's access
//!   modes and capacity; each step is its own write (own resourceVersion and watch event). A PV
//!   whose `claimRef` names a pending claim (static pre-binding) is bound to it the same way; a
//!   claim naming a `volumeName` (pre-bound by its user) is never provisioned but bound to that
//!   PV as the PV controller does (`syncUnboundClaim`) when the PV exists and is unclaimed (and
//!   satisfies the claim) or its `claimRef` names the claim, and stays `Pending` otherwise;
//!   `bound-by-controller` goes only on what the controller set. A PV bound to no claim becomes
//!   `Available`; claims of a missing class are left alone (until the class appears); deleting
//!   a bound PV (or binding it to another claim) makes its claim `Lost`;
//!   deleting a claim makes its PV `Released`, and a provisioned `Delete` PV is deleted after
//!   `delay`. [`Provisioner::Never`] runs the PV controller but never provisions nor deletes.
//!   These writes are not in the write/request records.
//! - **PriorityClasses** (`scheduling.k8s.io/v1`, as `pkg/registry/scheduling/priorityclass`
//!   serves them; see `scheduling.rs`): the built-in `system-node-critical` (2000001000) and
//!   `system-cluster-critical` (2000000000) are created at start as the
//!   `scheduling/bootstrap-system-priority-classes` hook creates them (manager
//!   `kube-apiserver`, owning `description`, `preemptionPolicy`, `value`); deleting them is a
//!   403 (`this is a system priority class and cannot be deleted`), their description and
//!   labels may change. Decoding: `value` an int32, `globalDefault` a bool, `description` and
//!   `preemptionPolicy` strings (400 `PriorityClass in version "v1" cannot be handled as a
//!   PriorityClass: json: cannot unmarshal string into Go struct field PriorityClass.value of
//!   type int32`); a left-out `value` is 0 (it is `+k8s:optional` and not a pointer), a false
//!   `globalDefault` and an empty `description` are not shown, `preemptionPolicy` defaults to
//!   `PreemptLowerPriority`; `metadata.generation` is 1 and never bumped. `ValidatePriorityClass`
//!   (422): a DNS-subdomain name; a name prefixed `system-` only for a built-in class with its
//!   value and `globalDefault` (`metadata.name: Forbidden: priority class names with 'system-'
//!   prefix are reserved for system use only. error: system-x is not a known system priority
//!   class`, `… value of system-node-critical PriorityClass must be 2000001000`); otherwise a
//!   value at most 1000000000 (`value: Forbidden: maximum allowed value of a user defined
//!   priority is 1000000000`); `preemptionPolicy` `PreemptLowerPriority` or `Never`
//!   (`Unsupported value`, `""` a `Required value`). Updates: `value: Forbidden: may not be
//!   changed in an update.`, `preemptionPolicy: Invalid value: "Never": field is immutable`.
//!   Field selectors `metadata.name` (and `metadata.namespace`).
//! - **Priority admission** ([`SimConfig::disable_admission_plugins`] without `Priority`, the
//!   default; `plugin/pkg/admission/priority`), before anything else of a pod create (its 403s
//!   come before the 404 of a missing namespace and the 422s of validation): a pod naming
//!   `priorityClassName` gets the class's `value` as `spec.priority` and its `preemptionPolicy`
//!   (403 `pods "p" is forbidden: no PriorityClass with name gold was found`, the pod named by
//!   its `generateName` before a name is generated); a pod naming none gets the `globalDefault`
//!   class's (the lowest value if several), whose name it then carries, or 0 and
//!   `PreemptLowerPriority`. A pod that carries a different `spec.priority` is refused (403 `the
//!   integer value of priority (10) must not be provided in pod spec; priority admission
//!   controller computed 0 from the given PriorityClass name`), likewise a different
//!   `preemptionPolicy` (`the string value of PreemptionPolicy (PreemptLowerPriority) must not
//!   be provided in pod spec; priority admission controller computed Never from the given
//!   PriorityClass name`). What it writes comes after the field manager, so nobody owns it.
//!   Updates keep the stored `priority` and `preemptionPolicy` when the body leaves them out.
//!   A PriorityClass created or updated with `globalDefault: true` while another class is the
//!   default is a 403 (`priorityclasses.scheduling.k8s.io "b" is forbidden: PriorityClass a is
//!   already marked as default. Only one default can exist`), after the registry's validation.
//!   With `Priority` disabled (as kube-scheduler's integration harness, scheduler_perf, runs its
//!   API server) none of this happens: pods keep the `spec.priority` they carry and get none
//!   when they carry none, classes are not looked up, several defaults may exist.
//! - **Admission plugins switched off** ([`SimConfig::disable_admission_plugins`], binary
//!   `--disable-admission-plugins A,B`): `Priority`, `DefaultStorageClass` and
//!   `PersistentVolumeClaimResize` turn off what is described above; the other names
//!   kube-apiserver registers (`ServiceAccount`, `TaintNodesByCondition`, …) are accepted and
//!   change nothing, kube-sim not running those plugins; an unknown name fails the start with
//!   kube-apiserver's message (`disable-admission-plugins plugin "X" is unknown`).
//! - **Protobuf** request bodies (`application/vnd.kubernetes.protobuf`, what client-go's typed
//!   clients send, e.g. `kubectl create priorityclass`) are decoded for PriorityClasses (see
//!   `protobuf.rs`); answers are JSON, which those clients accept too.
//! - **Faults** ([`FaultHandle`], `/sim/faults`): per-verb/resource error rates answering 500
//!   `InternalError` or 429 `TooManyRequests` with `Retry-After`, latency with jitter, watches
//!   dropped after a fixed/random time, forced `410` on the next watches, drop-all-watches, and
//!   a watch delay (every live event sent a fixed time after its commit, in order), so a client
//!   can read a write's answer before the watch shows older changes, as against a real server
//!   whose watch cache lags.
//! - **Records**: every write request (verb, resource/subresource, namespace, name, code) and every
//!   successful binding with its time, for "bound exactly once" and "one write per pod" checks;
//!   and every request of any verb as RBAC sees it (verb, group, resource, subresource,
//!   namespace), so tests can derive the roles a client needs, with the object name, whether it
//!   writes and the status code answered, so "no pod bound twice" counts binding *attempts*
//!   (a second `pods/binding` is a recorded 409, not only a missing success).
//!
//! ## Binary
//!
//! `kube-sim --port P --nodes N --kubeconfig-out FILE [--node-cpu 32] [--node-memory 256Gi]
//! [--node-pods 110] [--running-delay 0s|never] [--pod-lifetime 30s]
//! [--error-rate VERB[:RESOURCE]=RATE[:CODE]]... [--latency-ms MS] [--drop-watches-after-ms MS]
//! [--watch-delay-ms MS]
//! [--history 100000] [--pack-versions=false] [--auto-create-namespaces] [--install-nodeshard-crd]
//! [--provisioner-delay 300ms | --provisioner-never] [--no-resource-claim-controller]
//! [--termination-delay 100ms|never] [--no-disruption-controller]
//! [--disable-admission-plugins Priority,…] [--tls [--ca-out FILE]]` serves on
//! `127.0.0.1:P` (HTTPS with `--tls`), writes the CA (PEM) to `--ca-out` and then, atomically, a
//! kubeconfig usable by `kubectl --kubeconfig FILE` and `kube::Config::from_custom_kubeconfig`
//! (with the CA embedded in TLS mode), and exits 0 on SIGTERM/SIGINT.
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
//! No authentication/authorization (any token is accepted; no client certificates), no admission
//! plugins beyond the pod defaults, Priority, DefaultStorageClass and PersistentVolumeClaimResize
//! above, no OpenAPI schemas (v2 is 404, v3 carries no schemas), no unknown-field
//! detection for `fieldValidation`, no CBOR and protobuf only in requests of PriorityClasses
//! (another kind's protobuf body is a 415; answers are JSON), no Table output (kubectl prints from
//! the plain objects), no `dryRun` (400, in the query of any write or a `DeleteOptions` body),
//! graceful deletion only for pods and finalizers only on pods, PodDisruptionBudgets and
//! ResourceClaims (other objects go at once; the garbage collector's `orphan`/`foregroundDeletion` finalizers are not
//! added, `propagationPolicy` is only validated), no eviction API (`pods/eviction`) and so no `disruptedPods` entries,
//! no inconsistent-continue token in a 410 list answer,
//! no CRD schema validation or conversion, server-side apply without conflict detection (an
//! apply takes the fields it changes as if `force=true`), managedFields sets computed without
//! schemas (every leaf present in the written object; lists of items with a `name` keyed
//! `k:{"name":…}` with a `.` member, `conditions` by `type`, `podIPs`/`hostIPs` by `ip`,
//! `volumeMounts` by `mountPath`, container `ports` by `containerPort`+`protocol`; label
//! selectors (`selector`, `labelSelector`, `namespaceSelector` holding only `matchLabels` /
//! `matchExpressions`) as a whole, being `structType=atomic`; other lists
//! and the known atomic ones (`tolerations`, `containerStatuses`, `args`, …) as a whole
//! `f:x: {}`; `.` members only on keyed items, `resources` and the known string maps (labels,
//! annotations, requests, limits, `data`, …); an empty embedded `metadata` (a template's) is no
//! field; no kubelet status entry on seeded nodes; a client-sent
//! `managedFields` is ignored rather than used to reset ownership), core and
//! `events.k8s.io` events are stored separately, and other resources (services, deployments, …)
//! are 404. Storage: quantities are stored as sent (the real server canonicalizes them, e.g.
//! `1024Mi` to `1Gi`); no `kubernetes.io/pvc-protection` / `pv-protection` finalizers; field
//! error messages omit the Go diff the real server appends to "spec is immutable" errors and
//! render structured bad values as JSON; the storage controllers emit no Events, and kubelets
//! create no CSINodes. Pods: the general defaults `imagePullPolicy`, `terminationMessagePath`,
//! `terminationMessagePolicy`, `enableServiceLinks` and the DefaultTolerationSeconds admission
//! plugin's `tolerations` are not applied; container resources are
//! not validated on create (only pod-level ones), nor `spec.resourceClaims`. Resize: the
//! simulated kubelet actuates at once (no `PodResizeInProgress`, no container
//! `allocatedResources`), counts only cpu and memory, and reports pod-level
//! `status.resources`/`allocatedResources` only for pods with pod-level resources (a v1.36
//! kubelet may report aggregates for others); a malformed quantity in a resize PATCH is a 400
//! (the real patch path answers a 422 on `patch`); container resource names are not
//! validated; no ResourceQuota or LimitRanger admission. DRA: fields of feature gates that are
//! off in v1.36 are kept rather than dropped; bindings conditions, counters and network
//! device data are barely checked; the CEL check knows no function signatures and no cost
//! limit (see `cel.rs`); no DeviceTaintRules or events of the claim controller
//! (`FailedResourceClaimCreation`), and claims of pods that are done are not made again.
//! PriorityClasses: the built-in classes are created once at start (the real hook re-creates
//! them at every API server start; [`SimHandle::delete`] can remove them for good); `kubectl get
//! pc` prints NAME and AGE only (no VALUE, GLOBAL-DEFAULT, PREEMPTIONPOLICY columns: no Table).
//! The names `--disable-admission-plugins` accepts are those
//! kube-apiserver v1.35 registers (a plugin v1.36 adds is refused as unknown).
//! Deletion: an update that changes `deletionGracePeriodSeconds` is silently given the stored
//! value back rather than refused (`field is immutable`). The simulated kubelet finishes a
//! terminating pod after the termination delay instead of the containers' real stop time, in
//! one status write (no intermediate container states), and assumes containers that ran exit
//! 0 on SIGTERM. PodDisruptionBudgets: the `/scale` subresource of custom resources is neither
//! served nor listed (the disruption controller reads `specReplicasPath` itself); the
//! disruption controller writes no Events (`NoPods`, `UnmanagedPods`,
//! `CalculateExpectedPodCountFailed`, `NotDeleted`, `MultiplePodDisruptionBudgets`),
//! recomputes every budget that selects a changed pod by its old or new labels (upstream: the
//! first budget its new labels match), and, as no workload controllers exist here, fails
//! percentage and `maxUnavailable` budgets over pods owned by ReplicaSets, Deployments,
//! StatefulSets or ReplicationControllers (`found no controllers for pod`, which a real
//! cluster answers only when the owner is missing); owners of other kinds kube-sim does not
//! serve (but Jobs, CronJobs and DaemonSets, which have no scale subresource) fail with `no
//! matches for kind` where a real cluster would try their scale subresource.

mod admission;
mod cel;
mod claims;
mod config;
mod deletion;
mod disruption;
mod dra;
mod error;
mod faults;
mod inner;
mod kinds;
mod kwok;
mod list;
mod managed;
mod meta;
mod pack;
mod patch;
mod podres;
mod podstatus;
mod policy;
mod protobuf;
mod provisioner;
mod records;
mod resize;
mod resources;
mod scheduling;
mod selector;
mod server;
mod sim;
mod storage;
mod store;
mod tls;
mod validation;
mod watch;

pub use claims::POD_CLAIM_NAME_ANNOTATION;
pub use config::{Provisioner, SimConfig, parse_duration};
pub use dra::DELETE_PROTECTION_FINALIZER;
pub use error::{ApiError, Cause, Details};
pub use faults::{ErrorRule, FaultHandle, Faults};
pub use kwok::{LIFETIME_ANNOTATION, node_name, node_object, nodeshard_crd, pod_object};
pub use provisioner::{
    BETA_STORAGE_PROVISIONER_ANNOTATION, BIND_COMPLETED_ANNOTATION, BOUND_BY_CONTROLLER_ANNOTATION,
    HOSTNAME_LABEL, NO_PROVISIONER, PROVISIONED_BY_ANNOTATION, SELECTED_NODE_ANNOTATION,
    STORAGE_PROVISIONER_ANNOTATION,
};
pub use records::{BindingRecord, RequestRecord, SimStats, WriteRecord};
pub use sim::{Sim, SimError, SimHandle};
pub use storage::{
    BETA_STORAGE_CLASS_ANNOTATION, DEFAULT_CLASS_ANNOTATION, pvc_object, storage_class_object,
};

/// A kubeconfig for a simulator at `server` (`http://127.0.0.1:PORT`): no TLS, a dummy token.
pub fn kubeconfig_yaml(server: &str) -> String {
    kubeconfig_yaml_with_ca(server, None)
}

/// A kubeconfig for a simulator at `server` with a dummy token; with `ca_pem` (an
/// `https://` server) the CA is embedded as `certificate-authority-data`.
pub fn kubeconfig_yaml_with_ca(server: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine as _;
    let ca = ca_pem.map_or(String::new(), |pem| {
        format!(
            "    certificate-authority-data: {}\n",
            base64::engine::general_purpose::STANDARD.encode(pem)
        )
    });
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: {server}
{ca}contexts:
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
