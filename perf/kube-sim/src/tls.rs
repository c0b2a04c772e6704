//! HTTPS as a real API server serves it: a self-signed CA generated at start (like
//! kube-apiserver's `--cert-dir` self-signed certificates), a serving certificate it signs for
//! `127.0.0.1`, `::1`, `localhost` and the in-cluster `kubernetes.default.svc` names, rustls with
//! ALPN `h2` and `http/1.1`, and a listener that accepts TCP connections at once and runs every
//! TLS handshake in its own task (a slow or failed handshake never holds up others). Accepted
//! connections and handshakes are counted in [`crate::records::Stats`].
//!
//! It uses only the counters (`records`); `sim` starts its listener.

use crate::records::Stats;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::server::TlsStream;

/// A handshake that has not finished after this long is dropped (the real server's
/// `http.Server` has no handshake timeout of its own, but Go closes idle TLS conns; a bound keeps
/// a stuck client from holding a task forever).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The generated CA and the rustls configuration serving with the certificate it signed.
#[derive(Debug, Clone)]
pub(crate) struct TlsMaterial {
    /// The CA certificate (PEM), for `certificate-authority-data`.
    pub ca_pem: String,
    /// The serving configuration (serving certificate chain and key, ALPN).
    pub server: Arc<ServerConfig>,
}

/// Generates a fresh CA and serving certificate.
pub(crate) fn generate() -> Result<TlsMaterial, String> {
    let err = |e: rcgen::Error| format!("generating the self-signed certificates: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ca.distinguished_name
        .push(DnType::CommonName, format!("kube-sim-ca@{started}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(err)?).map_err(err)?;
    let mut leaf = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
    ])
    .map_err(err)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().map_err(err)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &ca).map_err(err)?;
    let chain: Vec<CertificateDer<'static>> = vec![leaf_cert.der().clone(), ca.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("TLS configuration: {e}"))?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    })
}

/// A plain TCP listener that counts accepted connections.
pub(crate) struct CountingListener {
    pub listener: TcpListener,
    pub stats: Arc<Stats>,
}

impl axum::serve::Listener for CountingListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.listener.accept().await {
                Ok((io, addr)) => {
                    self.stats.connections.fetch_add(1, Ordering::Relaxed);
                    // TCP_NODELAY, as Go's server sets on every connection: without it a
                    // watch stream's events written while the last is unacknowledged wait for
                    // the client's delayed ACK (up to 40 ms on Linux), so a burst of events
                    // reaches watchers in 40 ms steps.
                    let _ = io.set_nodelay(true);
                    return (io, addr);
                }
                Err(e) => accept_error(e).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Accept errors (e.g. too many open files) are transient: wait a little, as axum's listener
/// does, instead of spinning.
async fn accept_error(e: std::io::Error) {
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(50)).await;
}

/// A TLS listener: a background task accepts TCP connections and hands each to its own
/// handshake task; finished handshakes are queued for axum.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`; the returned task stops with the simulator.
    pub fn start(
        listener: TcpListener,
        material: &TlsMaterial,
        stats: Arc<Stats>,
    ) -> std::io::Result<(Self, JoinHandle<()>)> {
        let addr = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(material.server.clone());
        let (tx, ready) = mpsc::channel(1024);
        let task = tokio::spawn(async move {
            loop {
                let (io, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        accept_error(e).await;
                        continue;
                    }
                };
                stats.connections.fetch_add(1, Ordering::Relaxed);
                let _ = io.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                let stats = stats.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(io)).await {
                        Ok(Ok(tls)) => {
                            stats.tls_handshakes.fetch_add(1, Ordering::Relaxed);
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            stats.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_) => {
                            stats.tls_handshake_failures.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%peer, "TLS handshake timed out");
                        }
                    }
                });
            }
        });
        Ok((Self { ready, addr }, task))
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The acceptor task is gone (shutdown): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
