//! A completed-only latency distribution as the report gives it (SPEC §7): percentiles from the
//! pinned histogram, p99.9 and the maximum as descriptive only, and the tail quantiles with
//! their order-statistic intervals (v0.5: at each tail's effective sample size, A4). Windows,
//! segments and token figures all read it.

use percentes_formats::spec::TailSample;

use crate::estimate::effective::{self, Exceedances};
use crate::estimate::histogram::LatencyHistogram;
use crate::estimate::quantile;
use crate::estimate::tails::{self, TailInterval};
use crate::model::{Distribution, EffectiveTail, Tail};

/// Quantiles read from the completion curve and the completed-only histograms.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];
/// Tail quantiles that get order-statistic intervals (§7).
pub const TAIL_QUANTILES: [f64; 2] = [0.95, 0.99];
/// The label of a distribution over completed requests only.
pub(super) const CONDITIONAL: &str = "conditional on completion";

/// A completed-only distribution: percentiles from the pinned histogram, tails from the exact
/// order statistics. `us_samples` are already microseconds (the inter-chunk gaps).
pub fn distribution(ns: &[u64], histogram: Option<LatencyHistogram>) -> Distribution {
    distribution_of(ns.to_vec(), histogram, TailSample::Independent)
}

/// [`distribution`] over latencies the caller no longer needs: they become the sorted
/// microseconds in place, with no second per-request copy (under [`TailSample::Effective`] one
/// while the tails' exceedances are read: `ns` must then be in intended-time order).
pub(super) fn distribution_of(
    ns: Vec<u64>,
    histogram: Option<LatencyHistogram>,
    sample: TailSample,
) -> Distribution {
    let mut sorted_us = ns;
    for v in &mut sorted_us {
        *v = crate::estimate::histogram::ns_to_us(*v);
    }
    let exceed = match sample {
        TailSample::Effective if !sorted_us.is_empty() => {
            let ordered = sorted_us.clone();
            sorted_us.sort_unstable();
            exceedances(&ordered, &sorted_us)
        }
        _ => {
            sorted_us.sort_unstable();
            [None; TAIL_QUANTILES.len()]
        }
    };
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
            .zip(exceed)
            .map(|(&p, e)| tail(&sorted_us, p, e))
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

/// The rank of a quantile's point estimate, ceil(np), within `1..=n`.
fn point_rank(n: u64, p: f64) -> u64 {
    ((n as f64 * p).ceil() as u64).clamp(1, n.max(1))
}

/// A4: each tail quantile's exceedances (the requests above its point estimate) read from the
/// microseconds in intended-time order, `sorted` being the same sorted.
fn exceedances(ordered: &[u64], sorted: &[u64]) -> [Option<Exceedances>; TAIL_QUANTILES.len()] {
    TAIL_QUANTILES.map(|p| {
        let point = sorted[point_rank(sorted.len() as u64, p) as usize - 1];
        let above: Vec<usize> = (0..ordered.len()).filter(|&i| ordered[i] > point).collect();
        let lag_max = percentes_formats::pins::value::STATISTICS_TAIL_LAG_MAX as usize;
        Some(effective::exceedances(ordered.len(), &above, lag_max))
    })
}

/// What a tail's effective n says, in words: `n/n_eff 1.84, effective n 543 of 1000 (...)`,
/// and where the window's halves differ, that it moved.
fn effective_tail(e: &Exceedances, name: &str) -> EffectiveTail {
    let Some(n_eff) = e.n_eff else {
        return EffectiveTail {
            n_eff: None,
            ratio: None,
            pairs: e.pairs,
            halves: e.halves,
            halves_z: None,
            halves_differ: false,
            words: format!(
                "its exceedances in intended-time order are still correlated {} requests apart (statistics.tail_lag_max): no effective n can be estimated",
                percentes_formats::pins::value::STATISTICS_TAIL_LAG_MAX
            ),
        };
    };
    let ratio = if n_eff > 0.0 { e.n as f64 / n_eff } else { 1.0 };
    let mut words = format!(
        "n/n_eff {ratio:.2}, effective n {n_eff:.0} of {} (its exceedances in intended-time order)",
        e.n
    );
    if e.halves_differ() {
        words.push_str(&format!(
            "; the window's halves differ ({:.1} % then {:.1} % above the {name}, z = {:.2}): its distribution moved, and the {name} describes a mixture",
            e.halves.0 * 100.0,
            e.halves.1 * 100.0,
            e.halves_z.unwrap_or_default()
        ));
    }
    EffectiveTail {
        n_eff: Some(n_eff),
        ratio: Some(ratio),
        pairs: e.pairs,
        halves: e.halves,
        halves_z: e.halves_z,
        halves_differ: e.halves_differ(),
        words,
    }
}

/// A4 (v0.5): each refused tail of `d` says what would publish it: the completed requests its
/// interval needs (scaled by n / n_eff where the window's correlation is known) and how long
/// the window's own completions take to reach them over `duration_s` of intended time.
pub(super) fn say_what_publishes(d: &mut Distribution, duration_s: f64) {
    let n = d.n;
    if n == 0 || duration_s <= 0.0 {
        return;
    }
    let per_s = n as f64 / duration_s;
    for t in d.tails.iter_mut().filter(|t| t.interval_us.is_none()) {
        let p = match t.quantile.as_str() {
            "p95" => 0.95,
            "p99" => 0.99,
            _ => continue,
        };
        let budget = tails::smallest_n(p);
        let (need, at) = match t.effective.as_ref().map(|e| e.n_eff) {
            // Correlated past the longest lag: no effective n, so no count would be honest.
            Some(None) => continue,
            Some(Some(n_eff)) if n_eff < n as f64 => (
                (budget as f64 * n as f64 / n_eff).ceil() as u64,
                " at this window's correlation",
            ),
            _ => (budget, ""),
        };
        t.text.push_str(&format!(
            ": it needs about {need} completed requests{at} and has {n}, some {:.0} s of this window's {per_s:.2} completions a second",
            need as f64 / per_s
        ));
    }
}

pub(super) fn tail(sorted_us: &[u64], p: f64, exceed: Option<Exceedances>) -> Tail {
    let name = quantile::name(p);
    let n = sorted_us.len() as u64;
    let point_us = (n > 0).then(|| sorted_us[point_rank(n, p) as usize - 1]);
    let effective = exceed.as_ref().map(|e| effective_tail(e, &name));
    let reading = match &exceed {
        None => tails::interval(sorted_us, p),
        Some(e) => match e.n_eff.and_then(|n_eff| effective::ranks(n, n_eff, p)) {
            Some((l, u)) => TailInterval::Interval {
                lower_rank: l,
                upper_rank: u,
                lower: sorted_us[l as usize - 1],
                upper: sorted_us[u as usize - 1],
            },
            None => TailInterval::Omitted,
        },
    };
    match reading {
        TailInterval::Interval { lower_rank, upper_rank, lower, upper } => Tail {
            text: format!(
                "{name} = {} us, 95 % CI [{lower}, {upper}] us (ranks {lower_rank} and {upper_rank} of {n}{}, §7)",
                point_us.unwrap_or_default(),
                effective.as_ref().map(|e| format!("; {}", e.words)).unwrap_or_default()
            ),
            quantile: name,
            point_us,
            interval_us: Some((lower, upper)),
            ranks: Some((lower_rank, upper_rank)),
            effective,
        },
        // Within §7's budget by count but not by what the count is worth.
        TailInterval::Omitted if tails::ranks(n, p).is_some() => Tail {
            text: effective.as_ref().map_or_else(
                || tails::omitted_line(&name),
                |e| match e.n_eff {
                    Some(_) => format!(
                        "{name}-CI omitted (correlated, below the {} samples the interval needs: {}, §7)",
                        tails::smallest_n(p),
                        e.words
                    ),
                    None => format!("{name}-CI omitted (correlated: {}, §7)", e.words),
                },
            ),
            quantile: name,
            point_us,
            interval_us: None,
            ranks: None,
            effective,
        },
        TailInterval::Omitted => Tail {
            text: tails::omitted_line(&name),
            quantile: name,
            point_us,
            interval_us: None,
            ranks: None,
            effective,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Latencies (ns) in intended-time order: slow stretches of `run` requests every `every`,
    /// the rest fast, so that the tail's exceedances come in bursts as a batch's do.
    fn bursts(n: usize, every: usize, run: usize) -> Vec<u64> {
        (0..n)
            .map(|i| {
                let slow = i % every < run;
                // Distinct values, so that no two requests tie at a quantile.
                (if slow { 500_000_000 } else { 100_000_000 }) + i as u64 * 1_000
            })
            .collect()
    }

    /// v0.4 reads the bursts as 2,000 independent requests; v0.5 as the bursts they are: the
    /// same point, a wider interval, n / n_eff beside it, and the words in the line.
    #[test]
    fn a_correlated_window_gets_a_wider_interval_with_its_ratio() {
        let ns = bursts(2000, 100, 8);
        let v4 = distribution_of(ns.clone(), None, TailSample::Independent);
        let v5 = distribution_of(ns, None, TailSample::Effective);
        let (t4, t5) = (&v4.tails[0], &v5.tails[0]);
        assert_eq!(t4.quantile, "p95");
        assert_eq!(t4.point_us, t5.point_us);
        assert!(t4.effective.is_none() && !t4.text.contains("n_eff"));
        let e = t5.effective.as_ref().unwrap();
        let ratio = e.ratio.unwrap();
        assert!(ratio > 2.0, "{e:?}");
        let (l4, u4) = t4.ranks.unwrap();
        let (l5, u5) = t5.ranks.unwrap();
        assert!(l5 < l4 && u5 > u4, "v0.4 ({l4}, {u4}), v0.5 ({l5}, {u5})");
        assert!(
            t5.text.contains(&format!("n/n_eff {ratio:.2}")),
            "{}",
            t5.text
        );
        // The p99 of the same bursts: 20 exceedances in 20 runs of 8 at most; the budget of
        // 381 is not met at the effective n, and the refusal says why.
        let p99 = &v5.tails[1];
        assert!(p99.interval_us.is_none(), "{p99:?}");
        assert!(
            p99.text.starts_with(
                "p99-CI omitted (correlated, below the 381 samples the interval needs: n/n_eff "
            ),
            "{}",
            p99.text
        );
        assert!(v4.tails[1].interval_us.is_some());
    }

    /// The same latencies shuffled out of their bursts are independent again: v0.5's interval
    /// is §7's, or within a rank or two of it.
    #[test]
    fn an_uncorrelated_window_keeps_its_interval() {
        let mut ns = bursts(2000, 100, 8);
        // A fixed permutation: i -> 7i mod 2000 spreads the bursts (7 and 2000 are coprime).
        let shuffled: Vec<u64> = (0..2000).map(|i| ns[(i * 7) % 2000]).collect();
        ns = shuffled;
        let v4 = distribution_of(ns.clone(), None, TailSample::Independent);
        let v5 = distribution_of(ns, None, TailSample::Effective);
        for (t4, t5) in v4.tails.iter().zip(&v5.tails) {
            let (l4, u4) = t4.ranks.unwrap();
            let (l5, u5) = t5.ranks.unwrap();
            assert!(l4 - l5 <= 3 && u5 - u4 <= 3, "{}: {t5:?}", t4.quantile);
        }
    }

    /// An empty window has no tails to read under either rule.
    #[test]
    fn an_empty_window_reads_alike() {
        let v5 = distribution_of(Vec::new(), None, TailSample::Effective);
        assert!(v5
            .tails
            .iter()
            .all(|t| t.effective.is_none() && t.point_us.is_none()));
    }

    /// Issue 54 item 1 (v0.5): a refusal says what would publish the figure. 100 independent
    /// requests over 10 s: a p99 needs 381, about 38 s at 10 a second; the bursts above, worth
    /// fewer than their count, need more (381 x n / n_eff), and say it is at their correlation.
    #[test]
    fn a_refusal_says_what_would_publish_the_figure() {
        let mut d = distribution_of(
            (1..=100).map(|i| i * 1_000_000).collect(),
            None,
            TailSample::Effective,
        );
        say_what_publishes(&mut d, 10.0);
        assert!(
            d.tails[1].text.ends_with(": it needs about 381 completed requests and has 100, some 38 s of this window's 10.00 completions a second"),
            "{}",
            d.tails[1].text
        );
        let mut bursts = distribution_of(bursts(2000, 100, 8), None, TailSample::Effective);
        say_what_publishes(&mut bursts, 100.0);
        let p99 = &bursts.tails[1];
        let ratio = p99.effective.as_ref().and_then(|e| e.ratio).unwrap();
        let need = (381.0 * ratio).ceil() as u64;
        assert!(
            p99.text.contains(&format!("it needs about {need} completed requests at this window's correlation and has 2000")),
            "{}",
            p99.text
        );
        // An interval given says nothing more.
        let before = bursts.tails[0].text.clone();
        say_what_publishes(&mut bursts, 100.0);
        assert_eq!(bursts.tails[0].text, before);
    }
}
