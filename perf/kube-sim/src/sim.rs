//! The running simulator, the crate's top layer: start-up ([`Sim::start`]: namespaces, the
//! system PriorityClasses, fake nodes, the optional CRD, then the storage controllers when
//! configured and the resource claim and disruption controllers unless switched off, the HTTP or
//! HTTPS server) and the [`SimHandle`] tests and the binary use (address, kubeconfig, direct
//! object access, binding and write records, faults, shutdown).
//!
//! It may use every module below it: the shared state (`inner`), the server, `tls`, `kwok` and
//! the controllers; none of them uses it.

use crate::config::SimConfig;
use crate::error::ApiError;
use crate::faults::FaultHandle;
use crate::inner::Inner;
use crate::kwok;
use crate::managed::Manager;
use crate::meta;
use crate::meta::Pointer;
use crate::records::{BindingRecord, RequestRecord, SimStats, WriteRecord};
use crate::store::Part;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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
                    Some(&kwok::manager()),
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
        self.inner.sim_stats()
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
                .value()
                .at("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some()
        {
            self.inner.after_bound(&stored);
        }
        Ok(stored.value())
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
        Ok(self.inner.state().get(&def, ns, name)?.value())
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
        Ok(items.iter().map(|s| s.value()).collect())
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
            .value())
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
        Ok(self.inner.state().delete(&def, ns, name, None)?.value())
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
        self.inner.clear_records();
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

/// The field manager of objects created through [`SimHandle::create`].
const HANDLE_MANAGER: &str = "kube-sim";
