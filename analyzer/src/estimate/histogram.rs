//! The one pinned latency histogram (SPEC §3): microseconds, lowest 1, highest 600,000,000, three
//! significant figures, plain recording only. Every histogram a report shows has this shape, so
//! histograms merge losslessly and percentiles are never averaged. HdrHistogram's
//! coordinated-omission corrections are refused by clippy.toml (SPEC §2): an open-loop recorder
//! already has the samples they would invent.
//!
//! ```
//! use percentes_analyzer::estimate::histogram::LatencyHistogram;
//! let mut h = LatencyHistogram::pinned();
//! for ms in 1..=100u64 {
//!     h.record_ns(ms * 1_000_000);
//! }
//! assert_eq!(h.len(), 100);
//! assert!((h.quantile_us(0.5) as i64 - 50_000).abs() <= 50); // 3 significant figures
//! ```

use hdrhistogram::Histogram;
use percentes_formats::pins;

/// A latency distribution in the pinned configuration.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    /// Values above the highest trackable value, recorded at the highest (counted, never dropped).
    pub saturated: u64,
}

/// Nanoseconds to the histogram's microseconds: truncated, with the 1 us floor of SPEC §3.
pub fn ns_to_us(ns: u64) -> u64 {
    (ns / 1000).max(1)
}

impl LatencyHistogram {
    /// An empty histogram in the pinned configuration.
    pub fn pinned() -> LatencyHistogram {
        let lowest = pins::value::ANALYSIS_HISTOGRAM_LOWEST_US as u64;
        let highest = pins::value::ANALYSIS_HISTOGRAM_HIGHEST_US as u64;
        let figures = pins::value::ANALYSIS_HISTOGRAM_SIGNIFICANT_FIGURES as u8;
        let histogram = Histogram::new_with_bounds(lowest, highest, figures)
            .expect("the pinned configuration is valid");
        LatencyHistogram {
            histogram,
            saturated: 0,
        }
    }

    /// Records one latency (plain recording: one sample, no synthesized ones).
    pub fn record_ns(&mut self, ns: u64) {
        self.record_us(ns_to_us(ns));
    }

    /// Records one value already in microseconds (the journal's inter-chunk gaps).
    pub fn record_us(&mut self, us: u64) {
        let high = self.histogram.high();
        if us > high {
            self.saturated += 1;
        }
        self.histogram.saturating_record(us.clamp(1, high));
    }

    /// Adds another pinned histogram's samples (lossless: same configuration).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.histogram
            .add(&other.histogram)
            .expect("pinned histograms share one configuration");
        self.saturated += other.saturated;
    }

    /// Samples recorded (saturated ones included).
    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The value at quantile `q`, us (HdrHistogram's resolution: three significant figures).
    pub fn quantile_us(&self, q: f64) -> u64 {
        self.histogram.value_at_quantile(q)
    }

    /// The largest sample, us.
    pub fn max_us(&self) -> u64 {
        self.histogram.max()
    }

    /// Samples at the 1 us floor (SPEC §3): for inter-chunk gaps, the events the recorder read
    /// in one go, whose gap it cannot resolve. The floor's bucket holds 1 us alone.
    pub fn at_floor(&self) -> u64 {
        self.histogram.count_at(1)
    }

    /// The underlying histogram, for serialization into reports.
    pub fn inner(&self) -> &Histogram<u64> {
        &self.histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_the_pinned_one() {
        let h = LatencyHistogram::pinned();
        assert_eq!(
            (h.inner().low(), h.inner().high(), h.inner().sigfig()),
            (1, 600_000_000, 3)
        );
    }

    #[test]
    fn microseconds_are_truncated_with_a_one_microsecond_floor() {
        assert_eq!(ns_to_us(0), 1);
        assert_eq!(ns_to_us(999), 1);
        assert_eq!(ns_to_us(1_999), 1);
        assert_eq!(ns_to_us(2_000), 2);
    }

    #[test]
    fn merging_is_lossless_and_saturation_is_counted() {
        let mut a = LatencyHistogram::pinned();
        let mut b = LatencyHistogram::pinned();
        let mut all = LatencyHistogram::pinned();
        for i in 0..10_000u64 {
            let ns = 1_000 + i * 7_919_000;
            if i % 2 == 0 {
                a.record_ns(ns)
            } else {
                b.record_ns(ns)
            }
            all.record_ns(ns);
        }
        a.merge(&b);
        assert_eq!(a.inner(), all.inner());
        for q in [0.5, 0.95, 0.99, 0.999] {
            assert_eq!(a.quantile_us(q), all.quantile_us(q));
        }
        let mut over = LatencyHistogram::pinned();
        over.record_us(700_000_000);
        assert_eq!((over.len(), over.saturated), (1, 1));
    }

    #[test]
    fn quantiles_hold_three_significant_figures() {
        let mut h = LatencyHistogram::pinned();
        for us in 1..=100_000u64 {
            h.record_us(us);
        }
        for (q, truth) in [(0.5, 50_000f64), (0.95, 95_000.0), (0.99, 99_000.0)] {
            let got = h.quantile_us(q) as f64;
            assert!(
                (got - truth).abs() / truth <= 1e-3,
                "q {q}: {got} vs {truth}"
            );
        }
    }
}
