//! SchedulingThroughput exactly as scheduler_perf's `throughputCollector` computes it
//! (`test/integration/scheduler_perf`, `scheduler_perf.go`):
//!
//! 1. Every `throughputSampleInterval` (1 s) read how many of the measured pods have been seen
//!    scheduled so far (a pod counts once, when a watch event first shows `spec.nodeName` set).
//! 2. While that number is zero, nothing is recorded. The first non-zero sample is only a
//!    baseline (skipped: sampling and pod creation start independently).
//! 3. An interval in which nothing new got scheduled is not recorded as 0 pods/s; the next
//!    interval with progress records `new pods ÷ time since the last recorded sample`, once for
//!    itself and once for every skipped interval, so percentiles stay weighted by time.
//! 4. At the end (the measured op finished): the samples are sorted; Average is their mean and
//!    PercN is `sorted[ceil(len·N/100) − 1]`. No samples (everything took under two intervals)
//!    gives no summary, as upstream ("Failed to measure SchedulingThroughput").
//!
//! Not upstream's: at every tick from the baseline on, how many of the measured pods exist and
//! are not scheduled yet ([`Sampler::waiting`]). A rate with few pods waiting is the rate the
//! pods were created at (the workload's own ceiling), not the scheduler's.

use serde::Serialize;
use std::time::Duration;

/// scheduler_perf's `throughputSampleInterval`.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// The sampling state machine (steps 1–3); `now` is any monotonic time.
#[derive(Debug, Default, Clone)]
pub struct Sampler {
    started: bool,
    last_count: usize,
    last_time: Duration,
    skipped: usize,
    /// Recorded throughputs, pods/s, in order.
    pub throughputs: Vec<f64>,
    /// Measured pods waiting to be scheduled at each tick from the baseline on.
    pub waiting: Vec<usize>,
}

impl Sampler {
    pub fn tick(&mut self, now: Duration, scheduled: usize, waiting: usize) {
        if scheduled == 0 {
            return;
        }
        self.waiting.push(waiting);
        if !self.started {
            self.started = true;
            self.last_count = scheduled;
            self.last_time = now;
            return;
        }
        let new = scheduled.saturating_sub(self.last_count);
        if new == 0 {
            self.skipped += 1;
            return;
        }
        let secs = now.saturating_sub(self.last_time).as_secs_f64();
        let throughput = new as f64 / secs.max(f64::MIN_POSITIVE);
        for _ in 0..=self.skipped {
            self.throughputs.push(throughput);
        }
        self.last_count = scheduled;
        self.last_time = now;
        self.skipped = 0;
    }
}

/// Step 4 (pods/s).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub average: f64,
    pub perc50: f64,
    pub perc90: f64,
    pub perc95: f64,
    pub perc99: f64,
    pub samples: usize,
}

/// The pods waiting at the ticks: median and most (`None` without ticks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Waiting {
    pub median: usize,
    pub max: usize,
    pub ticks: usize,
}

pub fn waiting(ticks: &[usize]) -> Option<Waiting> {
    let mut s = ticks.to_vec();
    s.sort_unstable();
    Some(Waiting {
        median: *s.get(s.len().checked_sub(1)? / 2)?,
        max: *s.last()?,
        ticks: s.len(),
    })
}

pub fn summarize(throughputs: &[f64]) -> Option<Summary> {
    if throughputs.is_empty() {
        return None;
    }
    let mut s = throughputs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let perc = |p: usize| s[(n * p).div_ceil(100) - 1];
    Some(Summary {
        average: s.iter().sum::<f64>() / n as f64,
        perc50: perc(50),
        perc90: perc(90),
        perc95: perc(95),
        perc99: perc(99),
        samples: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn zero_samples_and_the_first_progress_sample_are_not_recorded() {
        let mut s = Sampler::default();
        s.tick(secs(1.0), 0, 7);
        s.tick(secs(2.0), 0, 9);
        s.tick(secs(3.0), 40, 5); // baseline
        assert!(s.throughputs.is_empty());
        s.tick(secs(4.0), 140, 3);
        assert_eq!(s.throughputs, [100.0]);
        assert_eq!(s.waiting, [5, 3]);
    }

    #[test]
    fn a_stalled_interval_repeats_the_next_rate_over_the_whole_gap() {
        let mut s = Sampler::default();
        s.tick(secs(1.0), 10, 0);
        s.tick(secs(2.0), 10, 0); // nothing new: skipped
        s.tick(secs(3.0), 10, 0); // skipped
        s.tick(secs(4.0), 70, 0); // 60 pods over 3 s, recorded 3 times
        assert_eq!(s.throughputs, [20.0, 20.0, 20.0]);
        s.tick(secs(4.5), 120, 0); // a late timer: the real elapsed time counts
        assert_eq!(s.throughputs[3], 100.0);
    }

    #[test]
    fn percentiles_index_the_sorted_samples_as_upstream() {
        assert_eq!(summarize(&[]), None);
        let one = summarize(&[5.0]).unwrap();
        assert_eq!((one.average, one.perc50, one.perc99), (5.0, 5.0, 5.0));
        // 1..=10: Perc50 = s[ceil(5)-1] = 5, Perc90 = s[ceil(9)-1] = 9, Perc99 = s[ceil(9.9)-1] = 10.
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let s = summarize(&v).unwrap();
        assert_eq!(s.average, 5.5);
        assert_eq!(
            (s.perc50, s.perc90, s.perc95, s.perc99),
            (5.0, 9.0, 10.0, 10.0)
        );
        assert_eq!(s.samples, 10);
        // 3 samples: Perc50 = s[ceil(1.5)-1] = s[1].
        assert_eq!(summarize(&[30.0, 10.0, 20.0]).unwrap().perc50, 20.0);
    }

    #[test]
    fn waiting_is_the_lower_median_and_the_most() {
        assert_eq!(waiting(&[]), None);
        let w = waiting(&[40, 3, 900, 5]).unwrap();
        assert_eq!((w.median, w.max, w.ticks), (5, 900, 4));
        assert_eq!(waiting(&[7]).unwrap().median, 7);
    }
}
