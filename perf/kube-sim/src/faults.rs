//! Fault injection: per-verb / per-resource error rates (500 or 429 with `Retry-After`), added
//! latency, watch streams dropped after a fixed or random time, forced `410 Expired` on the next
//! watches, and an immediate "drop every open watch". Shared by the HTTP layer, the library handle
//! and the `/sim/faults` admin endpoint.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One error-injection rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorRule {
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`) or `*`.
    /// Binding is `create` on `pods/binding`.
    pub verb: String,
    /// Resource, optionally with subresource (`pods`, `pods/binding`, `pods/status`); None = any.
    #[serde(default)]
    pub resource: Option<String>,
    /// Probability in [0, 1].
    pub rate: f64,
    /// 500 or 429 (any other code is sent as an `InternalError` Status with that code).
    #[serde(default = "default_code")]
    pub code: u16,
    /// `Retry-After` seconds for 429.
    #[serde(default = "default_retry_after")]
    pub retry_after_secs: u32,
}

fn default_code() -> u16 {
    500
}
fn default_retry_after() -> u32 {
    1
}

impl ErrorRule {
    /// A rule for `verb` (any resource) with a 500.
    pub fn new(verb: &str, rate: f64) -> Self {
        Self {
            verb: verb.into(),
            resource: None,
            rate,
            code: 500,
            retry_after_secs: 1,
        }
    }

    /// Parses the CLI form `VERB[:RESOURCE]=RATE[:CODE]`, e.g. `create:pods/binding=0.01:429`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (lhs, rhs) = s
            .split_once('=')
            .ok_or_else(|| format!("expected VERB[:RESOURCE]=RATE[:CODE], got {s:?}"))?;
        let (verb, resource) = match lhs.split_once(':') {
            Some((v, r)) => (v, Some(r.to_string())),
            None => (lhs, None),
        };
        let (rate, code) = match rhs.split_once(':') {
            Some((r, c)) => (r, c.parse().map_err(|_| format!("bad code in {s:?}"))?),
            None => (rhs, 500),
        };
        let rate: f64 = rate.parse().map_err(|_| format!("bad rate in {s:?}"))?;
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("rate must be within [0, 1] in {s:?}"));
        }
        Ok(Self {
            verb: verb.into(),
            resource,
            rate,
            code,
            retry_after_secs: 1,
        })
    }

    fn applies(&self, verb: &str, resource: &str) -> bool {
        (self.verb == "*" || self.verb == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// The fault configuration; `Default` injects nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Faults {
    /// Error rules; the first applicable rule whose dice roll hits decides.
    pub errors: Vec<ErrorRule>,
    /// Latency added to every API request, in milliseconds.
    pub latency_ms: u64,
    /// Extra random latency in [0, jitter) milliseconds.
    pub latency_jitter_ms: u64,
    /// Close every watch stream this long after it opened (ms); None = only `timeoutSeconds`.
    pub drop_watches_after_ms: Option<u64>,
    /// Extra random delay in [0, jitter) ms before a watch is dropped.
    pub drop_watches_jitter_ms: u64,
    /// Every watch event reaches its client this long after it was committed (ms), in order:
    /// the real server's watch cache dispatches behind the write's own answer, so a client can
    /// read the answer to a write before the watch shows older changes. 0 = at once. Applies
    /// to watches opened after it is set; the delayed events occupy the watch's buffer
    /// meanwhile, so a small buffer at a high rate may see the watch closed as too slow.
    pub watch_delay_ms: u64,
}

/// Runtime handle to the faults; cheap to clone.
#[derive(Debug, Clone)]
pub struct FaultHandle {
    inner: Arc<FaultState>,
}

#[derive(Debug)]
struct FaultState {
    faults: Mutex<Faults>,
    expire_next: AtomicU32,
    drop_epoch: tokio::sync::watch::Sender<u64>,
}

impl FaultHandle {
    pub(crate) fn new(f: Faults) -> Self {
        Self {
            inner: Arc::new(FaultState {
                faults: Mutex::new(f),
                expire_next: AtomicU32::new(0),
                drop_epoch: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    /// Replaces the configuration.
    pub fn set(&self, f: Faults) {
        *self.inner.faults.lock().expect("faults lock") = f;
    }

    /// The current configuration.
    pub fn get(&self) -> Faults {
        self.inner.faults.lock().expect("faults lock").clone()
    }

    /// Edits the configuration in place.
    pub fn update(&self, f: impl FnOnce(&mut Faults)) {
        f(&mut self.inner.faults.lock().expect("faults lock"));
    }

    /// Removes every fault (also pending forced expirations).
    pub fn clear(&self) {
        self.set(Faults::default());
        self.inner.expire_next.store(0, Ordering::Relaxed);
    }

    /// The next `n` watch requests get a `410 Expired` ERROR event instead of events.
    pub fn expire_next_watches(&self, n: u32) {
        self.inner.expire_next.fetch_add(n, Ordering::Relaxed);
    }

    /// Closes every watch stream that is open now.
    pub fn drop_all_watches(&self) {
        self.inner.drop_epoch.send_modify(|e| *e += 1);
    }

    pub(crate) fn take_expire(&self) -> bool {
        self.inner
            .expire_next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(crate) fn drop_signal(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.drop_epoch.subscribe()
    }

    /// Latency to add to this request, and the error to return instead of serving it, if any.
    pub(crate) fn decide(&self, verb: &str, resource: &str) -> (Duration, Option<ApiError>) {
        let f = self.inner.faults.lock().expect("faults lock");
        let mut latency = f.latency_ms;
        if f.latency_jitter_ms > 0 {
            latency += rand::random_range(0..f.latency_jitter_ms);
        }
        let err = f
            .errors
            .iter()
            .filter(|r| r.applies(verb, resource))
            .find_map(|r| {
                (r.rate > 0.0 && rand::random::<f64>() < r.rate).then(|| match r.code {
                    429 => ApiError::too_many_requests(r.retry_after_secs),
                    500 => ApiError::internal("injected fault"),
                    c => {
                        let mut e = ApiError::internal("injected fault");
                        e.code = c;
                        e
                    }
                })
            });
        (Duration::from_millis(latency), err)
    }

    /// How long after its commit a watch event may be sent (`Faults::watch_delay_ms`).
    pub(crate) fn watch_delay(&self) -> Duration {
        Duration::from_millis(
            self.inner
                .faults
                .lock()
                .expect("faults lock")
                .watch_delay_ms,
        )
    }

    /// How long a newly opened watch may live before it is dropped by the fault config.
    pub(crate) fn watch_drop_after(&self) -> Option<Duration> {
        let f = self.inner.faults.lock().expect("faults lock");
        f.drop_watches_after_ms.map(|ms| {
            let jitter = if f.drop_watches_jitter_ms > 0 {
                rand::random_range(0..f.drop_watches_jitter_ms)
            } else {
                0
            };
            Duration::from_millis(ms + jitter)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_rules() {
        let r = ErrorRule::parse("create:pods/binding=0.25:429").unwrap();
        assert_eq!(
            (r.verb.as_str(), r.resource.as_deref(), r.rate, r.code),
            ("create", Some("pods/binding"), 0.25, 429)
        );
        assert_eq!(ErrorRule::parse("list=1").unwrap().code, 500);
        assert!(ErrorRule::parse("list=2").is_err() && ErrorRule::parse("list").is_err());
    }

    #[test]
    fn decides_by_verb_and_resource() {
        let h = FaultHandle::new(Faults {
            errors: vec![
                ErrorRule::parse("create:pods/binding=1:429").unwrap(),
                ErrorRule::new("list", 0.0),
            ],
            ..Faults::default()
        });
        assert_eq!(h.decide("create", "pods/binding").1.unwrap().code, 429);
        assert!(h.decide("create", "pods").1.is_none());
        assert!(h.decide("list", "pods").1.is_none());
        h.expire_next_watches(1);
        assert!(h.take_expire() && !h.take_expire());
    }
}
