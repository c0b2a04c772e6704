//! Client-side rate limiting: a token bucket like client-go's `flowcontrol` QPS/burst limiter.
//! The `kube` client has none, so each client that must be limited (binds, events) owns one.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// `qps <= 0` means unlimited (as in client-go when the limiter is disabled).
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Reserve one token; returns how long the caller must wait before using it.
    pub fn reserve(&self) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(s.1).as_secs_f64();
        s.0 = (s.0 + elapsed * self.qps).min(self.burst);
        s.1 = now;
        s.0 -= 1.0;
        if s.0 >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-s.0 / self.qps)
        }
    }

    /// Wait for a token. Returns the time spent waiting (for the throttling metric).
    pub async fn acquire(&self) -> Duration {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let b = TokenBucket::new(100.0, 5);
        for _ in 0..5 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
        let w = b.reserve();
        assert!(
            w > Duration::from_millis(5) && w <= Duration::from_millis(11),
            "{w:?}"
        );
        let w2 = b.reserve();
        assert!(w2 > w, "reservations queue up: {w2:?} after {w:?}");
    }

    #[test]
    fn unlimited_when_qps_is_zero() {
        let b = TokenBucket::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(b.reserve(), Duration::ZERO);
        }
    }
}
