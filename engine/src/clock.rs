//! Time as the engine sees it. The engine never reads the OS clock: every deadline (backoff,
//! unschedulable-pool flush) and every latency stamp comes from a [`Clock`] the embedder injects.
//! Tests use [`ManualClock`] and move time by hand; binaries pass a monotonic system clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Monotonic nanoseconds since an arbitrary origin chosen by the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub fn saturating_add(self, d: Duration) -> Nanos {
        Nanos(
            self.0
                .saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        )
    }

    pub fn saturating_since(self, earlier: Nanos) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

/// A source of monotonic time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Nanos;
}

/// A clock that only moves when told to. Shared between threads through atomics.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
}

impl ManualClock {
    pub fn new(start: Nanos) -> Self {
        Self {
            now: AtomicU64::new(start.0),
        }
    }

    pub fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.now.fetch_add(d, Ordering::SeqCst);
    }

    pub fn set(&self, t: Nanos) {
        self.now.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        Nanos(self.now.load(Ordering::SeqCst))
    }
}
