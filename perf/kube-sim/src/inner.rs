//! The simulator's shared state, [`Inner`]: the store behind its single lock, the
//! configuration, the fault handle, the records and counters, the watch dispatch
//! [`TimeBudget`] and the runtime handle. The HTTP server, the list and watch handlers, the
//! simulated kubelet (`kwok`) and the controllers (`provisioner`, `claims`, `disruption`) all
//! hold an `Arc<Inner>`.
//!
//! This is the layer they share, so it uses only what lies below them: the store and the data
//! modules (`config`, `error`, `faults`, `meta`, `records`, `resources`), never the server,
//! watch, list, kwok or controller modules. Behaviour that belongs to one of those (the kubelet's
//! reaction to a binding, a resize or a graceful delete) is written there, as an `impl Inner`
//! block (see `kwok`).

use crate::config::SimConfig;
use crate::error::ApiError;
use crate::faults::FaultHandle;
use crate::records::{BindingRecord, Records, RequestRecord, Stats, WriteRecord};
use crate::resources::ResourceDef;
use crate::store::{State, Stored};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The cacher's `refreshPerSecond` and `maxBudget`.
const BUDGET_REFRESH_PER_SECOND: Duration = Duration::from_millis(50);
const BUDGET_MAX: Duration = Duration::from_millis(100);

/// The dispatch time budget shared by all watches (`timeBudget`): how long, in total, events
/// may wait for room in slow watches' buffers (see `watch`).
#[derive(Debug)]
pub(crate) struct TimeBudget {
    budget: Duration,
    last: Instant,
}

impl Default for TimeBudget {
    fn default() -> Self {
        Self {
            budget: BUDGET_MAX,
            last: Instant::now(),
        }
    }
}

impl TimeBudget {
    /// Refills the budget for the time since the last take and takes all of it.
    pub(crate) fn take(&mut self) -> Duration {
        let now = Instant::now();
        let acc = BUDGET_REFRESH_PER_SECOND.mul_f64(now.duration_since(self.last).as_secs_f64());
        self.budget = (self.budget + acc).min(BUDGET_MAX);
        self.last = now;
        std::mem::take(&mut self.budget)
    }

    /// Returns what a dispatch did not use.
    pub(crate) fn give_back(&mut self, unused: Duration) {
        self.budget = (self.budget + unused).min(BUDGET_MAX);
    }
}

/// State shared by the HTTP handlers, the KWOK tasks, the controllers and the handle.
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
    budget: Mutex<TimeBudget>,
    /// The runtime the simulator was started on: KWOK tasks run there even when a helper is
    /// called from a thread outside it.
    pub(crate) rt: tokio::runtime::Handle,
}

impl Inner {
    pub(crate) fn new(cfg: SimConfig) -> Arc<Self> {
        let mut state = State::new(cfg.history, cfg.watch_buffer, cfg.auto_create_namespaces);
        state.set_packing(cfg.pack_versions);
        Arc::new(Self {
            faults: FaultHandle::new(cfg.faults.clone()),
            cfg,
            state: Mutex::new(state),
            records: Mutex::new(Records::default()),
            addr: Mutex::new(None),
            stats: Arc::new(Stats::default()),
            budget: Mutex::new(TimeBudget::default()),
            rt: tokio::runtime::Handle::current(),
        })
    }

    /// The state lock; a panic while holding it poisons nothing we cannot continue from.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters ([`crate::SimStats`]), with the packer's from the store.
    pub(crate) fn sim_stats(&self) -> crate::SimStats {
        crate::SimStats {
            versions_left_plain: self.state().packing_skipped(),
            ..self.stats.snapshot()
        }
    }

    pub(crate) fn budget(&self) -> MutexGuard<'_, TimeBudget> {
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
        self.records().push_write(rec, limit);
    }

    pub(crate) fn record_request(&self, rec: RequestRecord) {
        let limit = self.cfg.record_limit;
        self.records().push_request(rec, limit);
    }

    pub(crate) fn requests(&self) -> Vec<RequestRecord> {
        self.records().requests()
    }

    pub(crate) fn record_binding(&self, pod: &Stored, node: &str) {
        let rec = BindingRecord {
            namespace: pod.namespace().to_string(),
            name: pod.name().to_string(),
            uid: pod.uid().to_string(),
            node: node.to_string(),
            at: SystemTime::now(),
        };
        let limit = self.cfg.record_limit;
        self.records().push_binding(rec, limit);
    }

    pub(crate) fn snapshot_records(&self) -> (Vec<BindingRecord>, Vec<WriteRecord>) {
        let r = self.records();
        (r.bindings(), r.writes())
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

    /// Forgets the binding, write and request records.
    pub(crate) fn clear_records(&self) {
        let mut r = self.records();
        r.clear();
    }
}
