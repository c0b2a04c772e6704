//! The harness's clock: monotonic real time, handed to the engine as its `Clock`.

use magma_engine::{Clock, Nanos};
use std::time::Instant;

#[derive(Debug)]
pub struct RealClock {
    origin: Instant,
}

impl RealClock {
    pub fn new() -> RealClock {
        RealClock {
            origin: Instant::now(),
        }
    }

    pub fn at(&self, t: Instant) -> Nanos {
        Nanos(t.saturating_duration_since(self.origin).as_nanos() as u64)
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> Nanos {
        Nanos(self.origin.elapsed().as_nanos() as u64)
    }
}
