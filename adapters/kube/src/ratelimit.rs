//! Client-side rate limiting: client-go's `flowcontrol` QPS/burst limiter, on `governor` (its
//! GCRA is the token bucket client-go uses: `burst` tokens, refilled at `qps` per second). The
//! `kube` client has none, so each budget that must be limited (the main client's binds and
//! condition patches, events, the shard controller's writes) owns one.
//!
//! **Priority.** Writes that share a budget may differ in urgency: a pod's `PodScheduled=False`
//! condition must not wait behind a 10,000-pod burst of bindings on the same budget
//! (`--kube-api-qps`). A [`TokenBucket::acquire_n_priority`] caller is served before every
//! ordinary caller that has not taken its tokens yet: while one waits, ordinary callers wait
//! for it (on a `Notify`), so the tokens that accrue go to it first. The rate is the bucket's
//! either way; priority only orders who gets the next tokens.
//!
//! A wait sleeps on tokio's timer, not governor's `until_ready` (which sleeps on `futures-timer`:
//! a thread of its own whose every expiry is one more cross-thread wake-up; 2 % of the
//! scheduler's CPU in a burst, while the events lane waits for its tokens). tokio's timer
//! rounds a sleep up to its next millisecond tick; the tokens due meanwhile stay in the bucket
//! (up to `burst`), so the rate holds whenever `burst` ≥ `qps` / 1000, as with every default.

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// A token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
pub struct TokenBucket {
    /// `None`: unlimited.
    limiter: Option<DefaultDirectRateLimiter>,
    /// The bucket's size (at least 1): the most tokens one [`TokenBucket::acquire_n`] takes.
    burst: NonZeroU32,
    /// Tokens per second (`None`: unlimited).
    qps: Option<f64>,
    /// Priority callers waiting for their tokens (module doc).
    priority: AtomicUsize,
    /// Signalled when the last priority caller got its tokens.
    priority_done: Notify,
}

impl TokenBucket {
    /// `qps <= 0` (or not finite) means unlimited, as in client-go when the limiter is
    /// disabled; a `burst` of 0 is taken as 1.
    pub fn new(qps: f64, burst: u32) -> TokenBucket {
        let burst = NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN);
        let limiter = (qps > 0.0 && qps.is_finite()).then(|| {
            let period = Duration::from_secs_f64(1.0 / qps).max(Duration::from_nanos(1));
            let quota = Quota::with_period(period)
                .unwrap_or_else(|| Quota::per_second(NonZeroU32::MAX))
                .allow_burst(burst);
            RateLimiter::direct(quota)
        });
        let qps = limiter.is_some().then_some(qps);
        TokenBucket {
            limiter,
            burst,
            qps,
            priority: AtomicUsize::new(0),
            priority_done: Notify::new(),
        }
    }

    /// Wait for a token. Returns the time spent waiting (for the throttling metric).
    pub async fn acquire(&self) -> Duration {
        self.acquire_n(1).await
    }

    /// Wait for `n` tokens, taken together (`n` clamped to `1..=burst`, so it can always be
    /// met), after every priority caller waiting. Returns the time spent waiting.
    pub async fn acquire_n(&self, n: u32) -> Duration {
        self.take(n, false).await
    }

    /// [`TokenBucket::acquire_n`] ahead of every ordinary caller (module doc).
    pub async fn acquire_n_priority(&self, n: u32) -> Duration {
        if self.limiter.is_none() {
            return Duration::ZERO;
        }
        self.priority.fetch_add(1, Ordering::AcqRel);
        // Decremented however this future ends (completed or dropped).
        struct Done<'a>(&'a TokenBucket);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                if self.0.priority.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.0.priority_done.notify_waiters();
                }
            }
        }
        let _done = Done(self);
        self.take(n, true).await
    }

    async fn take(&self, n: u32, priority: bool) -> Duration {
        let Some(limiter) = &self.limiter else {
            return Duration::ZERO;
        };
        let n = NonZeroU32::new(n.min(self.burst.get())).unwrap_or(NonZeroU32::MIN);
        let mut start = None;
        loop {
            if !priority {
                self.behind_priority(&mut start).await;
            }
            // `check_n` refuses only an `n` above the burst, which the clamp rules out.
            match limiter.check_n(n) {
                Ok(Err(not_until)) => {
                    start.get_or_insert_with(std::time::Instant::now);
                    tokio::time::sleep(not_until.wait_time_from(limiter.clock().now())).await;
                }
                _ => return start.map_or(Duration::ZERO, |s| s.elapsed()),
            }
        }
    }

    /// Wait while priority callers wait for their tokens.
    async fn behind_priority(&self, start: &mut Option<std::time::Instant>) {
        while self.priority.load(Ordering::Acquire) > 0 {
            start.get_or_insert_with(std::time::Instant::now);
            let notified = self.priority_done.notified();
            tokio::pin!(notified);
            // Registered before the re-check, so the last priority caller's signal is not missed.
            notified.as_mut().enable();
            if self.priority.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// The bucket's size.
    pub fn burst(&self) -> u32 {
        self.burst.get()
    }

    /// Tokens per second; `None` when unlimited.
    pub fn qps(&self) -> Option<f64> {
        self.qps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_burst_is_free_then_the_rate_holds() {
        let b = TokenBucket::new(50.0, 5);
        for _ in 0..5 {
            assert_eq!(b.acquire().await, Duration::ZERO);
        }
        // Five more at 50/s: at least four periods of 20 ms between them (a lower bound only,
        // so a slow machine cannot fail it).
        let start = std::time::Instant::now();
        let mut waited = Duration::ZERO;
        for _ in 0..5 {
            waited += b.acquire().await;
        }
        assert!(
            start.elapsed() >= Duration::from_millis(80),
            "{:?}",
            start.elapsed()
        );
        assert!(waited > Duration::ZERO);
    }

    #[tokio::test]
    async fn n_tokens_are_taken_together_and_n_is_clamped_to_the_burst() {
        let b = TokenBucket::new(50.0, 5);
        assert_eq!(b.acquire_n(5).await, Duration::ZERO);
        // Five more at 50/s come due together, after at least four periods (a lower bound).
        let start = std::time::Instant::now();
        assert!(b.acquire_n(5).await > Duration::ZERO);
        assert!(start.elapsed() >= Duration::from_millis(80));
        // More than the bucket holds is a full bucket, not a wait that never ends.
        assert!(b.acquire_n(1000).await > Duration::ZERO);
        assert_eq!(b.burst(), 5);
    }

    /// A priority caller gets its tokens while an ordinary loop keeps taking every token as
    /// it accrues: without priority the bucket would never hold the five it asks for until the
    /// loop ends.
    #[tokio::test]
    async fn a_priority_caller_is_served_before_a_busy_ordinary_loop() {
        use std::sync::atomic::AtomicU32;
        const LOOP: u32 = 60;
        let b = std::sync::Arc::new(TokenBucket::new(200.0, 5));
        b.acquire_n(5).await; // the bucket is empty now
        let taken = std::sync::Arc::new(AtomicU32::new(0));
        let ordinary = {
            let (b, taken) = (b.clone(), taken.clone());
            tokio::spawn(async move {
                for _ in 0..LOOP {
                    b.acquire().await;
                    taken.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        while taken.load(Ordering::SeqCst) < 5 {
            tokio::task::yield_now().await;
        }
        b.acquire_n_priority(5).await;
        let when = taken.load(Ordering::SeqCst);
        ordinary.await.unwrap();
        assert!(
            when < LOOP,
            "served only after the ordinary loop ended ({when})"
        );
        assert_eq!(b.priority.load(Ordering::Acquire), 0);
    }

    #[tokio::test]
    async fn unlimited_when_qps_is_zero_or_not_finite() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let b = TokenBucket::new(qps, 1);
            for _ in 0..1000 {
                assert_eq!(b.acquire().await, Duration::ZERO);
            }
        }
    }

    #[tokio::test]
    async fn a_tiny_or_huge_rate_is_accepted() {
        // 1e12 qps: a period under a nanosecond is rounded up, not a panic.
        let b = TokenBucket::new(1e12, 0);
        assert_eq!(b.acquire().await, Duration::ZERO);
        let _ = TokenBucket::new(1e-9, 1);
    }
}
