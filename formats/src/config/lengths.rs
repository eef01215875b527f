//! Token lengths from a distribution (issue 18 item 3): `[routes.output_tokens]` gives each
//! request's `max_tokens` and `[routes.input_tokens]` the length of a generated prompt, each
//! `fixed`, `uniform` or `normal` as a pure function of the schedule's seed and the request's
//! index, so the journal's configuration fixes every request's lengths and an auditor can
//! recompute any of them (SPEC §P "Token lengths"); or, for output, `dataset`: each prompt's own
//! length (a JSONL line's `max_tokens`, a ShareGPT entry's reply as the tokenizer counts it).
//!
//! Each side has its own stream, apart from the schedule's gap and route draws:
//! `mix64(seed ^ SALT ^ mix64(2 i + k))` for the k-th uniform of request i, its top 53 bits over
//! 2^53 a uniform in [0, 1); SALT is [`OUTPUT_TOKENS_SALT`] or [`INPUT_TOKENS_SALT`].

use serde::Deserialize;

use crate::schedule::mix64;

/// The salt of the output-length stream: ASCII "outtoken".
pub const OUTPUT_TOKENS_SALT: u64 = 0x6f75_7474_6f6b_656e;
/// The salt of the input-length stream: ASCII "intokens".
pub const INPUT_TOKENS_SALT: u64 = 0x696e_746f_6b65_6e73;
/// The largest length a distribution may give.
pub const OUTPUT_TOKENS_MAX: u32 = 131_072;

/// `[routes.output_tokens]` or `[routes.input_tokens]`: how each request's length is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Lengths {
    /// Every request gets `tokens`.
    Fixed {
        /// The length.
        tokens: u32,
    },
    /// A whole number uniform in `min..=max`.
    Uniform {
        /// The shortest length.
        min: u32,
        /// The longest length.
        max: u32,
    },
    /// `mean + sd * z` (z standard normal, Box-Muller), rounded and clamped to `min..=max`.
    Normal {
        /// The mean length.
        mean: f64,
        /// Its standard deviation.
        sd: f64,
        /// The shortest length (default 1).
        min: Option<u32>,
        /// The longest length.
        max: u32,
    },
    /// Output only: each prompt's own length, from the prompt file (a JSONL line's
    /// `max_tokens`; a ShareGPT entry's first reply, counted by `target.tokenizer`).
    Dataset,
}

/// Which side of a request a length is drawn for: each has its own stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenSide {
    /// The prompt's length (`input_tokens`).
    Input,
    /// `max_tokens` (`output_tokens`).
    Output,
}

impl TokenSide {
    fn salt(self) -> u64 {
        match self {
            TokenSide::Input => INPUT_TOKENS_SALT,
            TokenSide::Output => OUTPUT_TOKENS_SALT,
        }
    }
}

/// The k-th uniform in [0, 1) of request `index` under `seed`, on `side`'s stream.
fn unit(side: TokenSide, seed: u64, index: u64, k: u64) -> f64 {
    let bits = mix64(seed ^ side.salt() ^ mix64(index.wrapping_mul(2).wrapping_add(k)));
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl Lengths {
    /// Request `index`'s `max_tokens` under the schedule's `seed`; `None` for `dataset` (each
    /// prompt carries its own).
    pub fn max_tokens(&self, seed: u64, index: u64) -> Option<u32> {
        self.draw(TokenSide::Output, seed, index)
    }

    /// Request `index`'s length on `side`'s stream; `None` for `dataset`.
    pub fn draw(&self, side: TokenSide, seed: u64, index: u64) -> Option<u32> {
        let unit = |k| unit(side, seed, index, k);
        Some(match *self {
            Lengths::Fixed { tokens } => tokens,
            Lengths::Uniform { min, max } => {
                // Validated min <= max; saturating so an unvalidated value cannot panic.
                let span = u64::from(max.saturating_sub(min)) + 1;
                min + ((unit(0) * span as f64) as u64).min(span - 1) as u32
            }
            Lengths::Normal { mean, sd, min, max } => {
                // Box-Muller: 1 - u is in (0, 1], so the logarithm is finite. libm's log and cos
                // (ports of FreeBSD's fdlibm), as the schedule's ln: the same bits on every OS.
                let (u1, u2) = (1.0 - unit(0), unit(1));
                let z = libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(std::f64::consts::TAU * u2);
                let low = f64::from(min.unwrap_or(1));
                // max(low) after min(max): never panics, even on unvalidated bounds.
                (mean + sd * z).round().min(f64::from(max)).max(low) as u32
            }
            Lengths::Dataset => return None,
        })
    }

    /// The longest length it can give (0 for `dataset`, whose lengths the prompt file holds).
    pub fn longest(&self) -> u32 {
        match *self {
            Lengths::Fixed { tokens } => tokens,
            Lengths::Uniform { max, .. } | Lengths::Normal { max, .. } => max,
            Lengths::Dataset => 0,
        }
    }

    /// Whether every request gets `tokens` (so the §6 pin can hold).
    pub fn always(&self, tokens: u32) -> bool {
        match *self {
            Lengths::Fixed { tokens: t } => t == tokens,
            Lengths::Uniform { min, max } => min == tokens && max == tokens,
            Lengths::Normal { min, max, .. } => min == Some(tokens) && max == tokens,
            // The prompt file decides; the §6 pin cannot be shown from the configuration.
            Lengths::Dataset => false,
        }
    }

    /// What is wrong with it, if anything.
    pub fn problem(&self) -> Option<String> {
        let in_range = |n: u32| (1..=OUTPUT_TOKENS_MAX).contains(&n);
        match *self {
            Lengths::Fixed { tokens } if !in_range(tokens) => Some(format!(
                "tokens = {tokens} is outside 1..={OUTPUT_TOKENS_MAX}"
            )),
            Lengths::Uniform { min, max } if !(in_range(min) && in_range(max) && min <= max) => {
                Some(format!(
                    "min = {min}, max = {max}: both in 1..={OUTPUT_TOKENS_MAX}, min <= max"
                ))
            }
            Lengths::Normal { mean, sd, min, max } => {
                let low = min.unwrap_or(1);
                if !(mean.is_finite() && mean > 0.0 && sd.is_finite() && sd >= 0.0) {
                    Some(format!(
                        "mean = {mean}, sd = {sd}: mean > 0 and sd >= 0, both finite"
                    ))
                } else if !(in_range(low) && in_range(max) && low <= max) {
                    Some(format!(
                        "min = {low}, max = {max}: both in 1..={OUTPUT_TOKENS_MAX}, min <= max"
                    ))
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_draw_is_the_pinned_formula() {
        // Computed outside this code, in Python from the formula in the module docs:
        //   M = 2**64 - 1
        //   def mix64(z):
        //       z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
        //       z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
        //       return z ^ (z >> 31)
        //   unit = lambda s, i, k: (mix64(s ^ 0x6f7574746f6b656e ^ mix64(2*i + k)) >> 11) / 2**53
        //   uniform 32..=512, seed 7: [32 + int(unit(7, i, 0) * 481) for i in range(5)]
        assert_eq!(
            (0..5)
                .map(|i| Lengths::Uniform { min: 32, max: 512 }
                    .max_tokens(7, i)
                    .unwrap())
                .collect::<Vec<_>>(),
            UNIFORM_32_512_SEED_7
        );
    }

    /// See [`the_draw_is_the_pinned_formula`].
    const UNIFORM_32_512_SEED_7: [u32; 5] = [274, 253, 279, 300, 349];

    #[test]
    fn input_lengths_have_their_own_stream_and_normal_draws_the_pinned_formula() {
        // In Python, as above, with the input salt ("intokens"):
        //   [32 + int(unit(7, i, 0) * 481) for i in range(5)], salt 0x696e746f6b656e73
        let uniform = Lengths::Uniform { min: 32, max: 512 };
        assert_eq!(
            (0..5)
                .map(|i| uniform.draw(TokenSide::Input, 7, i).unwrap())
                .collect::<Vec<_>>(),
            [129, 93, 475, 148, 156]
        );
        // Normal, mean 200, sd 40, clamped to 1..=1000, seed 3, the output stream, in Python:
        //   u1, u2 = 1 - unit(3, i, 0), unit(3, i, 1)
        //   z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        //   max(min(round(200 + 40 * z), 1000), 1)
        let normal = Lengths::Normal {
            mean: 200.0,
            sd: 40.0,
            min: None,
            max: 1000,
        };
        assert_eq!(
            (0..8)
                .map(|i| normal.max_tokens(3, i).unwrap())
                .collect::<Vec<_>>(),
            [208, 244, 168, 225, 238, 294, 209, 164]
        );
        assert_eq!(Lengths::Dataset.max_tokens(3, 0), None);
        assert!(!Lengths::Dataset.always(256));
    }

    #[test]
    fn each_distribution_keeps_its_bounds_and_its_moments() {
        let n = 20_000u64;
        let uniform = Lengths::Uniform { min: 10, max: 20 };
        let draws: Vec<u32> = (0..n).map(|i| uniform.max_tokens(3, i).unwrap()).collect();
        assert!(draws.iter().all(|&d| (10..=20).contains(&d)));
        for v in 10..=20 {
            // Each of the 11 values about n / 11 = 1818 times; 5 sigma is about 205.
            let count = draws.iter().filter(|&&d| d == v).count() as f64;
            assert!((count - n as f64 / 11.0).abs() < 205.0, "{v}: {count}");
        }
        let normal = Lengths::Normal {
            mean: 200.0,
            sd: 40.0,
            min: None,
            max: 1000,
        };
        let draws: Vec<f64> = (0..n)
            .map(|i| f64::from(normal.max_tokens(3, i).unwrap()))
            .collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        // Standard error of the mean 40 / sqrt(20000) = 0.28; of the sd about 0.2.
        assert!((mean - 200.0).abs() < 1.5, "{mean}");
        assert!((var.sqrt() - 40.0).abs() < 1.2, "{}", var.sqrt());
        let clamped = Lengths::Normal {
            mean: 5.0,
            sd: 50.0,
            min: Some(2),
            max: 9,
        };
        assert!((0..1000).all(|i| (2..=9).contains(&clamped.max_tokens(1, i).unwrap())));
        assert_eq!(Lengths::Fixed { tokens: 77 }.max_tokens(9, 12345), Some(77));
        // The same seed and index give the same length; another seed another sequence.
        assert_eq!(uniform.max_tokens(3, 17), uniform.max_tokens(3, 17));
        let a: Vec<Option<u32>> = (0..50).map(|i| uniform.max_tokens(3, i)).collect();
        let b: Vec<Option<u32>> = (0..50).map(|i| uniform.max_tokens(4, i)).collect();
        assert_ne!(a, b);
    }
}
