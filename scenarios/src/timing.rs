//! The mock's timing model: seeded draws from analytic distributions whose quantiles are known,
//! so a test (and SPEC §8's AC1) can compare what the recorder measured with the truth.

use serde::Deserialize;

/// A distribution of a duration, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Distribution {
    /// Always the same.
    Constant {
        /// The value, ms.
        ms: f64,
    },
    /// Uniform between two values.
    Uniform {
        /// The low end, ms.
        low_ms: f64,
        /// The high end, ms.
        high_ms: f64,
    },
    /// Exponential.
    Exponential {
        /// The mean, ms.
        mean_ms: f64,
    },
    /// `median * exp(sigma * Z)`, Z standard normal.
    LogNormal {
        /// The median, ms.
        median_ms: f64,
        /// The log-scale standard deviation.
        sigma: f64,
    },
}

impl Distribution {
    /// Checks the parameters; the message names the bad one.
    pub fn validate(&self) -> Result<(), crate::error::Error> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        match *self {
            Distribution::Constant { ms } if ok(ms) => Ok(()),
            Distribution::Uniform { low_ms, high_ms } if ok(low_ms) && ok(high_ms) && low_ms <= high_ms => Ok(()),
            Distribution::Exponential { mean_ms } if ok(mean_ms) && mean_ms > 0.0 => Ok(()),
            Distribution::LogNormal { median_ms, sigma } if ok(median_ms) && median_ms > 0.0 && ok(sigma) => Ok(()),
            other => Err(crate::error::Error::refused(format!("{other:?}: parameters must be finite and non-negative (low <= high, mean and median > 0)"))),
        }
    }

    /// One draw, in ns.
    pub fn sample_ns(&self, rng: &mut Rng) -> u64 {
        let ms = match *self {
            Distribution::Constant { ms } => ms,
            Distribution::Uniform { low_ms, high_ms } => low_ms + (high_ms - low_ms) * rng.unit(),
            Distribution::Exponential { mean_ms } => -mean_ms * libm::log(rng.unit_open()),
            Distribution::LogNormal { median_ms, sigma } => {
                median_ms * libm::exp(sigma * rng.standard_normal())
            }
        };
        (ms * 1e6).round() as u64
    }

    /// The p-quantile in ms, analytically.
    pub fn quantile_ms(&self, p: f64) -> f64 {
        match *self {
            Distribution::Constant { ms } => ms,
            Distribution::Uniform { low_ms, high_ms } => low_ms + (high_ms - low_ms) * p,
            Distribution::Exponential { mean_ms } => -mean_ms * libm::log(1.0 - p),
            Distribution::LogNormal { median_ms, sigma } => {
                median_ms * libm::exp(sigma * normal_quantile(p))
            }
        }
    }
}

/// The standard normal CDF, from erfc (accurate in both tails).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z / std::f64::consts::SQRT_2)
}

/// The standard normal quantile by bisection on [`normal_cdf`] (to about 1e-13; speed is not
/// needed, quantiles are only asked for in tests and reports).
pub fn normal_quantile(p: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0, "normal_quantile({p})");
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if normal_cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// A small, seedable generator (SplitMix64): every request's draws follow from the mock's seed
/// and the request's arrival number, so a run can be replayed.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A stream of draws for `seed`; distinct `stream`s never overlap.
    pub fn new(seed: u64, stream: u64) -> Rng {
        Rng {
            state: seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x6a09_e667_f3bc_c909,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in (0, 1].
    pub fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal draw (Box-Muller, one of the pair).
    pub fn standard_normal(&mut self) -> f64 {
        let u = self.unit_open();
        let v = self.unit();
        libm::sqrt(-2.0 * libm::log(u)) * libm::cos(2.0 * std::f64::consts::PI * v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantiles_are_the_known_ones() {
        assert!(normal_quantile(0.5).abs() < 1e-12);
        assert!((normal_quantile(0.95) - 1.644_853_626_951_472_2).abs() < 1e-9);
        assert!((normal_quantile(0.99) - 2.326_347_874_040_841).abs() < 1e-9);
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-9);
    }

    /// The mock's own check of its timing model: empirical quantiles of its draws match the
    /// configured distribution's analytic quantiles.
    #[test]
    fn draws_match_the_analytic_quantiles() {
        let cases = [
            Distribution::LogNormal {
                median_ms: 120.0,
                sigma: 0.4,
            },
            Distribution::Exponential { mean_ms: 20.0 },
            Distribution::Uniform {
                low_ms: 5.0,
                high_ms: 15.0,
            },
            Distribution::Constant { ms: 7.5 },
        ];
        for dist in cases {
            let mut rng = Rng::new(42, 1);
            let mut draws: Vec<u64> = (0..200_000).map(|_| dist.sample_ns(&mut rng)).collect();
            draws.sort_unstable();
            for p in [0.5, 0.95, 0.99] {
                let empirical_ms = draws[(p * draws.len() as f64) as usize] as f64 / 1e6;
                let truth = dist.quantile_ms(p);
                // 200,000 draws: the p99 sample quantile's relative error is well under 2 %.
                assert!(
                    (empirical_ms - truth).abs() <= (0.02 * truth).max(1e-6),
                    "{dist:?} p{p}: empirical {empirical_ms} vs analytic {truth}"
                );
            }
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        assert!(Distribution::Uniform {
            low_ms: 5.0,
            high_ms: 1.0
        }
        .validate()
        .is_err());
        assert!(Distribution::LogNormal {
            median_ms: -1.0,
            sigma: 0.1
        }
        .validate()
        .is_err());
        assert!(Distribution::Exponential { mean_ms: f64::NAN }
            .validate()
            .is_err());
        assert!(Distribution::Constant { ms: 1.0 }.validate().is_ok());
    }
}
