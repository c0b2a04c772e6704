//! Latency percentiles and CDFs from histograms of nanoseconds: what every report and the naive
//! baseline print. Uses nothing else of the harness.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// From a histogram of nanoseconds.
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let ms = |v: u64| v as f64 / 1e6;
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// Percentiles at which [`latency_cdf`] samples a histogram: every whole percent, then the tail.
const CDF_PERCENTILES_TAIL: [f64; 6] = [99.5, 99.9, 99.95, 99.99, 99.999, 100.0];

/// A compact CDF of a histogram of nanoseconds: `[percentile, milliseconds]` points, 0 to 100
/// (106 points), enough to draw `latency-cdf.svg` without the histogram itself.
pub fn latency_cdf(h: &Histogram<u64>) -> Vec<[f64; 2]> {
    if h.is_empty() {
        return Vec::new();
    }
    (0..100)
        .map(f64::from)
        .chain(CDF_PERCENTILES_TAIL)
        .map(|p| [p, h.value_at_quantile(p / 100.0) as f64 / 1e6])
        .collect()
}
