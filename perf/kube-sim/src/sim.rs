//! The running simulator: shared state (`Inner`: store, config, faults, records), start-up
//! (namespaces, fake nodes, optional CRD, the storage controllers when configured, the resource
//! claim and disruption controllers unless switched off), the
//! [`SimHandle`] tests and the binary use (address, kubeconfig, direct object access, binding and
//! write records, faults, shutdown).

use crate::config::SimConfig;
use crate::error::ApiError;
use crate::faults::FaultHandle;
use crate::kwok;
use crate::managed::Manager;
use crate::meta;
use crate::resources::ResourceDef;
use crate::store::{Part, State, Stored};
use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One successful `pods/binding`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BindingRecord {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod UID.
    pub uid: String,
    /// Target node.
    pub node: String,
    /// When the bind was committed.
    pub at: SystemTime,
}

/// One write request (create, update, patch, delete, including subresources) and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteRecord {
    /// Kubernetes verb (`create`, `update`, `patch`, `delete`).
    pub verb: &'static str,
    /// Resource with subresource, e.g. `pods/binding`, `leases`, `nodeshards/status`.
    pub resource: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Object name ("" for a create with `generateName` that failed).
    pub name: String,
    /// HTTP status code returned.
    pub code: u16,
    /// When the response was produced.
    pub at: SystemTime,
}

/// One API request of any verb (get, list, watch, create, update, patch, delete), as RBAC sees
/// it (what a Role must grant for the request to be allowed), with the object name and the
/// status code answered. Recorded when the response is produced (a watch when its stream opens),
/// for every routed request whatever its outcome: failed writes (a `409` binding, an injected
/// `500`/`429`) and requests for resources the simulator does not serve (`404`) included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestRecord {
    /// Kubernetes verb.
    pub verb: &'static str,
    /// API group ("" for core).
    pub group: String,
    /// Resource (plural), without the subresource.
    pub resource: String,
    /// Subresource ("" for none), e.g. `status`, `binding`.
    pub subresource: String,
    /// Namespace ("" for cluster-scoped or all-namespace requests).
    pub namespace: String,
    /// Object name from the URL, or the name a `generateName` create was given ("" for lists,
    /// watches and collection requests).
    pub name: String,
    /// The `User-Agent` header, to tell clients apart.
    pub user_agent: String,
    /// Whether the verb writes (create, update, patch, delete; `pods/binding` is a create).
    pub write: bool,
    /// HTTP status code answered (200 for a watch whose stream opened).
    pub code: u16,
    /// The request's protocol: `HTTP/1.1`, or `HTTP/2` when the client negotiated it (ALPN,
    /// over HTTPS).
    pub http_version: &'static str,
}

/// Connection and watch counters, read with [`SimHandle::stats`] or `GET /sim/stats`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// TCP connections accepted (HTTP and HTTPS).
    pub connections: AtomicU64,
    /// TLS handshakes completed.
    pub tls_handshakes: AtomicU64,
    /// TLS handshakes that failed (e.g. a client that does not trust the CA) or timed out.
    pub tls_handshake_failures: AtomicU64,
    /// Watches closed because their buffer stayed full past the dispatch budget.
    pub watches_forced_closed: AtomicU64,
}

/// A snapshot of the simulator's counters (`GET /sim/stats`, camelCase JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimStats {
    /// TCP connections accepted since start (HTTP and HTTPS): a client that reuses its
    /// connections keeps this flat while its request count grows.
    pub connections_accepted: u64,
    /// TLS handshakes completed (HTTPS mode).
    pub tls_handshakes: u64,
    /// TLS handshakes that failed or timed out (HTTPS mode).
    pub tls_handshake_failures: u64,
    /// Watches the simulator closed because they did not read fast enough, as the real watch
    /// cache's "Forcing … watcher close due to unresponsiveness".
    pub watches_forced_closed: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> SimStats {
        SimStats {
            connections_accepted: self.connections.load(Ordering::Relaxed),
            tls_handshakes: self.tls_handshakes.load(Ordering::Relaxed),
            tls_handshake_failures: self.tls_handshake_failures.load(Ordering::Relaxed),
            watches_forced_closed: self.watches_forced_closed.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Records {
    pub requests: VecDeque<RequestRecord>,
    pub writes: VecDeque<WriteRecord>,
    pub bindings: VecDeque<BindingRecord>,
}

/// State shared by the HTTP handlers, the KWOK tasks and the handle.
#[derive(Debug)]
pub struct Inner {
    pub(crate) cfg: SimConfig,
    state: Mutex<State>,
    records: Mutex<Records>,
    pub(crate) faults: FaultHandle,
    pub(crate) addr: Mutex<Option<SocketAddr>>,
    /// Connection and watch counters.
    pub(crate) stats: Arc<Stats>,
    /// The watch dispatch time budget shared by all watches.
    budget: Mutex<crate::watch::TimeBudget>,
    /// The runtime the simulator was started on: KWOK tasks run there even when a helper is
    /// called from a thread outside it.
    pub(crate) rt: tokio::runtime::Handle,
}

impl Inner {
    pub(crate) fn new(cfg: SimConfig) -> Arc<Self> {
        let state = State::new(cfg.history, cfg.watch_buffer, cfg.auto_create_namespaces);
        Arc::new(Self {
            faults: FaultHandle::new(cfg.faults.clone()),
            cfg,
            state: Mutex::new(state),
            records: Mutex::new(Records::default()),
            addr: Mutex::new(None),
            stats: Arc::new(Stats::default()),
            budget: Mutex::new(crate::watch::TimeBudget::default()),
            rt: tokio::runtime::Handle::current(),
        })
    }

    /// The state lock; a panic while holding it poisons nothing we cannot continue from.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn budget(&self) -> MutexGuard<'_, crate::watch::TimeBudget> {
        self.budget.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn record_write(
        &self,
        verb: &'static str,
        resource: String,
        namespace: &str,
        name: &str,
        code: u16,
    ) {
        let rec = WriteRecord {
            verb,
            resource,
            namespace: namespace.to_string(),
            name: name.to_string(),
            code,
            at: SystemTime::now(),
        };
        let limit = self.cfg.record_limit;
        push_bounded(&mut self.records().writes, rec, limit);
    }

    pub(crate) fn record_request(&self, rec: RequestRecord) {
        let limit = self.cfg.record_limit;
        push_bounded(&mut self.records().requests, rec, limit);
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.records().requests.iter().cloned().collect()
    }

    pub(crate) fn record_binding(&self, pod: &Stored, node: &str) {
        let rec = BindingRecord {
            namespace: pod.namespace().to_string(),
            name: meta::meta_str(&pod.value, "name").to_string(),
            uid: meta::meta_str(&pod.value, "uid").to_string(),
            node: node.to_string(),
            at: SystemTime::now(),
        };
        let limit = self.cfg.record_limit;
        push_bounded(&mut self.records().bindings, rec, limit);
    }

    pub(crate) fn snapshot_records(&self) -> (Vec<BindingRecord>, Vec<WriteRecord>) {
        let r = self.records();
        (
            r.bindings.iter().cloned().collect(),
            r.writes.iter().cloned().collect(),
        )
    }

    pub(crate) fn resolve(
        &self,
        api_version: &str,
        plural: &str,
    ) -> Result<Arc<ResourceDef>, ApiError> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.state()
            .registry
            .get(group, version, plural)
            .ok_or_else(ApiError::no_route)
    }

    /// Starts the KWOK lifecycle for a pod that is bound now.
    pub(crate) fn after_bound(self: &Arc<Self>, pod: &Stored) {
        let lifetime = pod
            .value
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(kwok::LIFETIME_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok());
        kwok::pod_bound(
            self,
            pod.namespace().to_string(),
            meta::meta_str(&pod.value, "name").to_string(),
            meta::meta_str(&pod.value, "uid").to_string(),
            lifetime,
        );
    }

    /// A pod was resized (`pods/resize`): the simulated kubelet checks that its node can take
    /// it (`kwok::resize_fits`) and actuates it or reports it pending, in its own status write
    /// after the resize (`kwok::actuate_resize`).
    pub(crate) fn after_resized(self: &Arc<Self>, pod: &Stored) {
        if self.cfg.running_delay.is_none() {
            return; // no simulated kubelet
        }
        let (ns, name) = (
            pod.namespace().to_string(),
            meta::meta_str(&pod.value, "name").to_string(),
        );
        let uid = meta::meta_str(&pod.value, "uid").to_string();
        let inner = self.clone();
        self.rt.clone().spawn(async move {
            let mut st = inner.state();
            let pods = st.registry.get("", "v1", "pods").expect("built in");
            let nodes = st.registry.get("", "v1", "nodes").expect("built in");
            let Ok(pod) = st.get(&pods, &ns, &name) else {
                return;
            };
            let node_name = pod
                .value
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let fits = match st.get(&nodes, "", &node_name) {
                Ok(node) => {
                    // What the node's other admitted (running) pods need.
                    let mut others = (0, 0);
                    for p in st.list(&pods, None).1 {
                        let v = &p.value;
                        if v.pointer("/spec/nodeName").and_then(Value::as_str) == Some(&node_name)
                            && meta::meta_str(v, "uid") != uid
                            && v.pointer("/status/phase").and_then(Value::as_str) == Some("Running")
                        {
                            let (c, m) = kwok::pod_needs(v);
                            others = (others.0 + c, others.1 + m);
                        }
                    }
                    kwok::resize_fits(&pod.value, &node.value, others)
                }
                Err(_) => Ok(()),
            };
            let _ = st.modify_status(&pods, &ns, &name, &kwok_manager(), |p| {
                kwok::actuate_resize(p, &uid, fits)
            });
        });
    }

    pub(crate) fn kwok_running(&self, ns: &str, name: &str, uid: &str) -> bool {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let nodes = st.registry.get("", "v1", "nodes").expect("built in");
        let node = st.get(&pods, ns, name).ok().and_then(|p| {
            p.value
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let Some(node) = node else { return false };
        let host_ip = st
            .get(&nodes, "", &node)
            .ok()
            .and_then(|n| {
                n.value
                    .pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|x| x["type"] == "InternalIP")
                            .and_then(|x| x["address"].as_str())
                            .map(str::to_string)
                    })
            })
            .unwrap_or_else(|| "10.255.255.254".into());
        st.modify_status(&pods, ns, name, &kwok_manager(), |p| {
            kwok::set_running(p, uid, &host_ip)
        })
        .is_some()
    }

    pub(crate) fn kwok_succeeded(&self, ns: &str, name: &str, uid: &str) -> bool {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        st.modify_status(&pods, ns, name, &kwok_manager(), |p| {
            kwok::set_succeeded(p, uid)
        })
        .is_some()
    }

    /// A DELETE left a pod terminating: the simulated kubelet finishes it (`kwok::pod_terminating`).
    pub(crate) fn after_graceful_delete(self: &Arc<Self>, pod: &Stored) {
        kwok::pod_terminating(self, &pod.value);
    }

    /// The simulated kubelet finishes a terminating pod: its terminal status (its own write),
    /// then a delete with grace period 0 and the pod's UID as precondition, as a kubelet's
    /// status manager sends once the pod's phase is terminal. A pod with finalizers stays
    /// (marked with grace period 0) until they are removed.
    pub(crate) fn kwok_finish(&self, ns: &str, name: &str, uid: &str) {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let Ok(pod) = st.get(&pods, ns, name) else {
            return;
        };
        if meta::meta_str(&pod.value, "uid") != uid || !crate::deletion::terminating(&pod.value) {
            return;
        }
        let _ = st.modify_status(&pods, ns, name, &kwok_manager(), |p| {
            kwok::set_terminated(p, uid)
        });
        if let Err(e) =
            st.delete_request(&pods, ns, name, &crate::deletion::DeleteOptions::force(uid))
        {
            tracing::debug!(pod = %format!("{ns}/{name}"), "the kubelet's delete failed: {e}");
        }
    }

    pub(crate) fn kwok_delete(&self, ns: &str, name: &str, uid: &str) {
        let mut st = self.state();
        let pods = st.registry.get("", "v1", "pods").expect("built in");
        let _ = st.delete(&pods, ns, name, Some(&serde_json::json!({"uid": uid})));
    }
}

/// Errors starting the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// Binding the listen address failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Creating the initial objects failed.
    #[error("creating initial objects: {0}")]
    Seed(#[from] ApiError),
    /// Generating the self-signed certificates or the TLS configuration failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The configuration is refused (as kube-apiserver refuses its flags), e.g. an unknown
    /// admission plugin in [`SimConfig::disable_admission_plugins`].
    #[error("{0}")]
    Config(String),
}

/// Entry point.
#[derive(Debug)]
pub struct Sim;

impl Sim {
    /// Seeds the store and starts serving on `cfg.addr`.
    pub async fn start(cfg: SimConfig) -> Result<SimHandle, SimError> {
        let admission = crate::admission::Admission::without(&cfg.disable_admission_plugins)
            .map_err(SimError::Config)?;
        let inner = Inner::new(cfg.clone());
        {
            let mut st = inner.state();
            st.set_admission(admission);
            let ns = st.registry.get("", "v1", "namespaces").expect("built in");
            for name in [
                "default",
                "kube-system",
                "kube-public",
                "kube-node-lease",
                "volcano-system",
            ] {
                st.create(&ns, None, serde_json::json!({"metadata": {"name": name}}))?;
            }
            // The `scheduling/bootstrap-system-priority-classes` post-start hook's classes.
            let pcs = st
                .registry
                .get("scheduling.k8s.io", "v1", "priorityclasses")
                .expect("built in");
            for pc in crate::scheduling::system_classes() {
                st.create_by(
                    &pcs,
                    None,
                    pc,
                    Some(&Manager::update(crate::scheduling::BOOTSTRAP_MANAGER)),
                    None,
                )?;
            }
            let nodes = st.registry.get("", "v1", "nodes").expect("built in");
            for i in 0..cfg.nodes {
                let name = kwok::node_name(i);
                st.create_by(
                    &nodes,
                    None,
                    kwok::node_object(&cfg, &name, i),
                    Some(&kwok_manager()),
                    None,
                )?;
            }
            if cfg.install_nodeshard_crd {
                let crds = st
                    .registry
                    .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
                    .expect("built in");
                st.create(&crds, None, kwok::nodeshard_crd())?;
            }
        }
        let listener = tokio::net::TcpListener::bind(cfg.addr)
            .await
            .map_err(|source| SimError::Bind {
                addr: cfg.addr,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: cfg.addr,
            source,
        })?;
        *inner.addr.lock().unwrap_or_else(|p| p.into_inner()) = Some(addr);
        let mut controllers: Vec<JoinHandle<()>> =
            crate::provisioner::spawn(&inner).into_iter().collect();
        controllers.extend(crate::claims::spawn(&inner));
        controllers.extend(crate::disruption::spawn(&inner));
        let app = crate::server::router(inner.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = rx.await;
        };
        let stats = inner.stats.clone();
        let (task, ca_pem) = if cfg.tls {
            let material = crate::tls::generate().map_err(SimError::Tls)?;
            let (listener, acceptor) = crate::tls::TlsListener::start(listener, &material, stats)
                .map_err(|source| SimError::Bind {
                addr: cfg.addr,
                source,
            })?;
            controllers.push(acceptor);
            let task = tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await;
            });
            (task, Some(material.ca_pem))
        } else {
            let listener = crate::tls::CountingListener { listener, stats };
            let task = tokio::spawn(async move {
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await;
            });
            (task, None)
        };
        Ok(SimHandle {
            addr,
            ca_pem,
            inner,
            shutdown: Some(tx),
            task: Some(task),
            controllers,
        })
    }
}

/// A running simulator. Dropping it stops the server (abruptly); prefer [`SimHandle::shutdown`].
#[derive(Debug)]
pub struct SimHandle {
    addr: SocketAddr,
    /// The CA certificate (PEM) when serving HTTPS.
    ca_pem: Option<String>,
    inner: Arc<Inner>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// Background controllers (the storage provisioner), stopped with the server.
    controllers: Vec<JoinHandle<()>>,
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
        for c in self.controllers.drain(..) {
            c.abort();
        }
        self.inner.faults.drop_all_watches();
    }
}

impl SimHandle {
    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://127.0.0.1:PORT` with [`SimConfig::tls`].
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The self-signed CA certificate (PEM) the serving certificate chains to, when serving
    /// HTTPS ([`SimConfig::tls`]); None for plain HTTP.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// A kubeconfig for this server, for kubectl and the kube client (a dummy token; with
    /// [`SimConfig::tls`] the `https://` URL and the CA as `certificate-authority-data`, so clients
    /// verify the server certificate).
    pub fn kubeconfig_yaml(&self) -> String {
        crate::kubeconfig_yaml_with_ca(&self.url(), self.ca_pem.as_deref())
    }

    /// The connection and watch counters (also `GET /sim/stats`).
    pub fn stats(&self) -> SimStats {
        self.inner.stats.snapshot()
    }

    /// Writes [`SimHandle::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// Fault injection at runtime.
    pub fn faults(&self) -> &FaultHandle {
        &self.inner.faults
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.state().rv()
    }

    /// Creates an object directly (no HTTP, no faults, not recorded as a write).
    /// `api_version` is `v1` or `group/version`; `plural` e.g. `pods`.
    pub fn create(&self, api_version: &str, plural: &str, obj: Value) -> Result<Value, ApiError> {
        let def = self.inner.resolve(api_version, plural)?;
        let ns = meta::meta_str(&obj, "namespace").to_string();
        let ns = def.namespaced.then_some(if ns.is_empty() {
            "default"
        } else {
            ns.as_str()
        });
        let stored = self.inner.state().create_by(
            &def,
            ns,
            obj,
            Some(&Manager::update(HANDLE_MANAGER)),
            None,
        )?;
        if def.key.as_ref() == "/pods"
            && stored
                .value
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some()
        {
            self.inner.after_bound(&stored);
        }
        Ok(stored.value.clone())
    }

    /// Creates a fake node like the ones made at start.
    pub fn create_node(&self, name: &str) -> Result<Value, ApiError> {
        let index = self.inner.state().count("/nodes");
        self.create(
            "v1",
            "nodes",
            kwok::node_object(&self.inner.cfg, name, index),
        )
    }

    /// Creates a pending pod with one container and the given requests.
    pub fn create_pod(
        &self,
        ns: &str,
        name: &str,
        scheduler: &str,
        cpu: &str,
        memory: &str,
    ) -> Result<Value, ApiError> {
        self.create(
            "v1",
            "pods",
            kwok::pod_object(ns, name, scheduler, cpu, memory),
        )
    }

    /// Reads an object (`ns` "" for cluster-scoped).
    pub fn get(
        &self,
        api_version: &str,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let def = self.inner.resolve(api_version, plural)?;
        Ok(self.inner.state().get(&def, ns, name)?.value.clone())
    }

    /// Lists objects (all namespaces when `ns` is None).
    pub fn list(
        &self,
        api_version: &str,
        plural: &str,
        ns: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        let def = self.inner.resolve(api_version, plural)?;
        let (_, items) = self.inner.state().list(&def, ns);
        Ok(items.iter().map(|s| s.value.clone()).collect())
    }

    /// Replaces an object's status directly.
    pub fn update_status(
        &self,
        api_version: &str,
        plural: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let def = self.inner.resolve(api_version, plural)?;
        let ns = meta::meta_str(&obj, "namespace").to_string();
        let name = meta::meta_str(&obj, "name").to_string();
        Ok(self
            .inner
            .state()
            .update(&def, &ns, &name, obj, Part::Status)?
            .value
            .clone())
    }

    /// Deletes an object directly.
    pub fn delete(
        &self,
        api_version: &str,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let def = self.inner.resolve(api_version, plural)?;
        Ok(self
            .inner
            .state()
            .delete(&def, ns, name, None)?
            .value
            .clone())
    }

    /// Every successful binding so far, in commit order.
    pub fn bindings(&self) -> Vec<BindingRecord> {
        self.inner.snapshot_records().0
    }

    /// Every write request so far, in completion order.
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.inner.snapshot_records().1
    }

    /// Every API request so far (any verb, any outcome), in completion order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.inner.requests()
    }

    /// Forgets the binding, write and request records.
    pub fn clear_records(&self) {
        let mut r = self.inner.records();
        r.requests.clear();
        r.writes.clear();
        r.bindings.clear();
    }

    /// Stops accepting requests, closes every watch and waits for the server to finish.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        for c in self.controllers.drain(..) {
            c.abort();
        }
        self.inner.faults.drop_all_watches();
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

/// Append to a record log that keeps only the newest `limit` entries.
fn push_bounded<T>(log: &mut std::collections::VecDeque<T>, item: T, limit: usize) {
    if log.len() >= limit {
        log.pop_front();
    }
    log.push_back(item);
}

/// The field manager of the simulated kubelet's writes (node creation, pod status).
fn kwok_manager() -> Manager {
    Manager::update("kubelet")
}

/// The field manager of objects created through [`SimHandle::create`].
const HANDLE_MANAGER: &str = "kube-sim";
