//! A completed-only latency distribution as the report gives it (SPEC §7): percentiles from the
//! pinned histogram, p99.9 and the maximum as descriptive only, and the tail quantiles with
//! their order-statistic intervals. Windows, segments and token figures all read it.

use crate::estimate::histogram::LatencyHistogram;
use crate::estimate::quantile;
use crate::estimate::tails::{self, TailInterval};
use crate::model::{Distribution, Tail};

/// Quantiles read from the completion curve and the completed-only histograms.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];
/// Tail quantiles that get order-statistic intervals (§7).
pub const TAIL_QUANTILES: [f64; 2] = [0.95, 0.99];
/// The label of a distribution over completed requests only.
pub(super) const CONDITIONAL: &str = "conditional on completion";

/// A completed-only distribution: percentiles from the pinned histogram, tails from the exact
/// order statistics. `us_samples` are already microseconds (the inter-chunk gaps).
pub fn distribution(ns: &[u64], histogram: Option<LatencyHistogram>) -> Distribution {
    distribution_of(ns.to_vec(), histogram)
}

/// [`distribution`] over latencies the caller no longer needs: they become the sorted
/// microseconds in place, with no second per-request copy.
pub(super) fn distribution_of(ns: Vec<u64>, histogram: Option<LatencyHistogram>) -> Distribution {
    let mut sorted_us = ns;
    for v in &mut sorted_us {
        *v = crate::estimate::histogram::ns_to_us(*v);
    }
    sorted_us.sort_unstable();
    let histogram = histogram.unwrap_or_else(|| {
        let mut h = LatencyHistogram::pinned();
        for &us in &sorted_us {
            h.record_us(us);
        }
        h
    });
    let n = histogram.len();
    let tails = if sorted_us.is_empty() && n > 0 {
        Vec::new() // pooled gaps: no per-sample order statistics kept
    } else {
        TAIL_QUANTILES
            .iter()
            .map(|&p| tail(&sorted_us, p))
            .collect()
    };
    Distribution {
        label: CONDITIONAL,
        n,
        percentiles_us: if n == 0 {
            Vec::new()
        } else {
            QUANTILES
                .iter()
                .map(|&q| (quantile::name(q), histogram.quantile_us(q)))
                .collect()
        },
        p99_9_us: (n > 0).then(|| histogram.quantile_us(0.999)),
        max_us: (n > 0).then(|| histogram.max_us()),
        descriptive_only: "p99.9 and max are descriptive only (§7)",
        tails,
        saturated: histogram.saturated,
        refused: Vec::new(),
        histogram: Some(histogram),
    }
}

pub(super) fn tail(sorted_us: &[u64], p: f64) -> Tail {
    let name = quantile::name(p);
    let n = sorted_us.len() as u64;
    let point_rank = (n as f64 * p).ceil() as u64;
    let point_us = (n > 0).then(|| sorted_us[point_rank.clamp(1, n) as usize - 1]);
    match tails::interval(sorted_us, p) {
        TailInterval::Interval { lower_rank, upper_rank, lower, upper } => Tail {
            text: format!(
                "{name} = {} us, 95 % CI [{lower}, {upper}] us (ranks {lower_rank} and {upper_rank} of {n}, §7)",
                point_us.unwrap_or_default()
            ),
            quantile: name,
            point_us,
            interval_us: Some((lower, upper)),
            ranks: Some((lower_rank, upper_rank)),
        },
        TailInterval::Omitted => Tail {
            text: tails::omitted_line(&name),
            quantile: name,
            point_us,
            interval_us: None,
            ranks: None,
        },
    }
}
