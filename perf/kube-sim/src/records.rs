//! What the simulator records for tests and benchmarks to read back: the [`BindingRecord`]s,
//! [`WriteRecord`]s and [`RequestRecord`]s (bounded logs, oldest dropped first) and the
//! connection and watch counters ([`Stats`], read as [`SimStats`]). Plain data: it uses no other
//! module of the crate; [`crate::inner::Inner`] holds the logs and the counters, the server and
//! the TLS listener fill them.

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

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

/// One write request (create, update, patch, delete, including subresources) and its outcome;
/// a deletecollection that succeeds is recorded once per object it deleted (code 200), one that
/// fails once, with its error's code and no name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteRecord {
    /// Kubernetes verb (`create`, `update`, `patch`, `delete`, `deletecollection`).
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

/// One API request of any verb (get, list, watch, create, update, patch, delete,
/// deletecollection), as RBAC sees it (what a Role must grant for the request to be allowed),
/// with the object name and the status code answered. Recorded when the response is produced (a watch when its stream opens),
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
    /// Whether the verb writes (create, update, patch, delete, deletecollection; `pods/binding`
    /// is a create).
    pub write: bool,
    /// HTTP status code answered (200 for a watch whose stream opened).
    pub code: u16,
    /// The request's protocol: `HTTP/1.1`, or `HTTP/2` when the client negotiated it (ALPN,
    /// over HTTPS).
    pub http_version: &'static str,
}

/// Connection and watch counters, read with [`crate::SimHandle::stats`] or `GET /sim/stats`.
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
    /// Versions never packed because the packer thread's queue was full when they were
    /// committed (`SimConfig::pack_versions`): they stay plain, costing memory only.
    pub versions_left_plain: u64,
}

impl Stats {
    pub(crate) fn snapshot(&self) -> SimStats {
        SimStats {
            connections_accepted: self.connections.load(Ordering::Relaxed),
            tls_handshakes: self.tls_handshakes.load(Ordering::Relaxed),
            tls_handshake_failures: self.tls_handshake_failures.load(Ordering::Relaxed),
            watches_forced_closed: self.watches_forced_closed.load(Ordering::Relaxed),
            versions_left_plain: 0,
        }
    }
}

/// Strings that repeat from record to record (resources, namespaces, user agents, nodes),
/// each kept once and named by its number. Object names and UIDs are not interned.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<Arc<str>, u32>,
    strs: Vec<Arc<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let a: Arc<str> = s.into();
        let i = u32::try_from(self.strs.len()).expect("fewer than 2^32 distinct strings");
        self.strs.push(a.clone());
        self.ids.insert(a, i);
        i
    }

    fn get(&self, i: u32) -> String {
        self.strs[i as usize].to_string()
    }
}

/// A [`RequestRecord`] as the log keeps it.
#[derive(Debug)]
struct Request {
    verb: &'static str,
    http_version: &'static str,
    group: u32,
    resource: u32,
    subresource: u32,
    namespace: u32,
    user_agent: u32,
    name: Box<str>,
    write: bool,
    code: u16,
}

/// A [`WriteRecord`] as the log keeps it.
#[derive(Debug)]
struct Write {
    verb: &'static str,
    resource: u32,
    namespace: u32,
    name: Box<str>,
    code: u16,
    at: SystemTime,
}

/// A [`BindingRecord`] as the log keeps it.
#[derive(Debug)]
struct Binding {
    namespace: u32,
    node: u32,
    name: Box<str>,
    uid: Box<str>,
    at: SystemTime,
}

/// The bounded logs, behind [`crate::inner::Inner`]'s records lock. A log grows with every
/// request (about three per bound pod) up to the record limit, so each entry is kept compact:
/// its repeating strings interned, the rest boxed; the public records are made as they are read.
#[derive(Debug, Default)]
pub(crate) struct Records {
    strings: Interner,
    requests: VecDeque<Request>,
    writes: VecDeque<Write>,
    bindings: VecDeque<Binding>,
}

impl Records {
    pub(crate) fn push_request(&mut self, r: RequestRecord, limit: usize) {
        let s = &mut self.strings;
        let rec = Request {
            verb: r.verb,
            http_version: r.http_version,
            group: s.id(&r.group),
            resource: s.id(&r.resource),
            subresource: s.id(&r.subresource),
            namespace: s.id(&r.namespace),
            user_agent: s.id(&r.user_agent),
            name: r.name.into_boxed_str(),
            write: r.write,
            code: r.code,
        };
        push_bounded(&mut self.requests, rec, limit);
    }

    pub(crate) fn push_write(&mut self, r: WriteRecord, limit: usize) {
        let s = &mut self.strings;
        let rec = Write {
            verb: r.verb,
            resource: s.id(&r.resource),
            namespace: s.id(&r.namespace),
            name: r.name.into_boxed_str(),
            code: r.code,
            at: r.at,
        };
        push_bounded(&mut self.writes, rec, limit);
    }

    pub(crate) fn push_binding(&mut self, r: BindingRecord, limit: usize) {
        let s = &mut self.strings;
        let rec = Binding {
            namespace: s.id(&r.namespace),
            node: s.id(&r.node),
            name: r.name.into_boxed_str(),
            uid: r.uid.into_boxed_str(),
            at: r.at,
        };
        push_bounded(&mut self.bindings, rec, limit);
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        let s = &self.strings;
        self.requests
            .iter()
            .map(|r| RequestRecord {
                verb: r.verb,
                group: s.get(r.group),
                resource: s.get(r.resource),
                subresource: s.get(r.subresource),
                namespace: s.get(r.namespace),
                name: r.name.to_string(),
                user_agent: s.get(r.user_agent),
                write: r.write,
                code: r.code,
                http_version: r.http_version,
            })
            .collect()
    }

    pub(crate) fn writes(&self) -> Vec<WriteRecord> {
        let s = &self.strings;
        self.writes
            .iter()
            .map(|w| WriteRecord {
                verb: w.verb,
                resource: s.get(w.resource),
                namespace: s.get(w.namespace),
                name: w.name.to_string(),
                code: w.code,
                at: w.at,
            })
            .collect()
    }

    pub(crate) fn bindings(&self) -> Vec<BindingRecord> {
        let s = &self.strings;
        self.bindings
            .iter()
            .map(|b| BindingRecord {
                namespace: s.get(b.namespace),
                name: b.name.to_string(),
                uid: b.uid.to_string(),
                node: s.get(b.node),
                at: b.at,
            })
            .collect()
    }

    /// Forgets every record (the interned strings stay: they are few).
    pub(crate) fn clear(&mut self) {
        self.requests.clear();
        self.writes.clear();
        self.bindings.clear();
    }
}

/// Append to a record log that keeps only the newest `limit` entries.
fn push_bounded<T>(log: &mut VecDeque<T>, item: T, limit: usize) {
    if log.len() >= limit {
        log.pop_front();
    }
    log.push_back(item);
}
