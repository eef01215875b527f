//! Abandonment (SPEC §1 "Abandonment", issue 55 item 3): a declared share of requests that the
//! client closes after a delay drawn in advance, as users close a tab. Which requests and when
//! is a pure function of the seed and the request's index (JOURNAL.md "Schedule" rule 7), so an
//! auditor recomputes every abandonment instant; a request that ends before its instant is not
//! abandoned.

use super::prefix::SHARE_SCALE;
use super::workload::ThinkLaw;

/// The header extension that carries the abandonment (absent: none).
pub const ABANDON_EXTENSION: &str = "abandonment";

/// Longest mean delay before a request is abandoned: an hour.
pub const ABANDON_MEAN_NS_MAX: u64 = 3_600_000_000_000;

/// Which requests the client abandons, and after how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abandonment {
    /// Requests marked for abandonment, parts per million (1..=10^6).
    pub share_ppm: u32,
    /// The mean delay from a request's intended time to its abandonment, ns (after the dev
    /// time factor).
    pub mean_ns: u64,
    /// How each delay is drawn: the mean, or exponential with the mean.
    pub law: ThinkLaw,
}

impl Abandonment {
    /// The header extension's value (JOURNAL.md field 23, `abandonment`): format byte 1,
    /// share_ppm u32, mean ns u64, law u8 (`0` fixed, `1` exponential), little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8];
        out.extend_from_slice(&self.share_ppm.to_le_bytes());
        out.extend_from_slice(&self.mean_ns.to_le_bytes());
        out.push(match self.law {
            ThinkLaw::Fixed => 0,
            ThinkLaw::Exponential => 1,
        });
        out
    }

    /// Reads the extension's value, each field in its range.
    pub fn decode(bytes: &[u8]) -> Result<Abandonment, AbandonError> {
        let [1, rest @ ..] = bytes else {
            return Err(AbandonError::Format(bytes.first().copied()));
        };
        if rest.len() != 13 {
            return Err(AbandonError::Length(bytes.len()));
        }
        let share_ppm = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let mut mean = [0u8; 8];
        mean.copy_from_slice(&rest[4..12]);
        let law = match rest[12] {
            0 => ThinkLaw::Fixed,
            1 => ThinkLaw::Exponential,
            other => return Err(AbandonError::Law(other)),
        };
        let a = Abandonment {
            share_ppm,
            mean_ns: u64::from_le_bytes(mean),
            law,
        };
        a.check().map(|()| a)
    }

    /// Each field in its range (the configuration's and the header's one check).
    pub fn check(&self) -> Result<(), AbandonError> {
        if !(1..=SHARE_SCALE).contains(&self.share_ppm) {
            return Err(AbandonError::Share(self.share_ppm));
        }
        if self.mean_ns > ABANDON_MEAN_NS_MAX {
            return Err(AbandonError::Mean(self.mean_ns));
        }
        Ok(())
    }
}

/// What is wrong with an abandonment (a configuration's, or a header's extension).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbandonError {
    /// The format byte is not 1 (or there is none).
    Format(Option<u8>),
    /// The value is not 14 bytes long.
    Length(usize),
    /// A law code other than 0 and 1.
    Law(u8),
    /// A share outside 1..=10^6 ppm.
    Share(u32),
    /// A mean delay past an hour, ns.
    Mean(u64),
}

impl std::fmt::Display for AbandonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbandonError::Format(byte) => write!(f, "format byte {byte:?}; this build reads 1"),
            AbandonError::Length(n) => write!(f, "{n} bytes where 14 belong"),
            AbandonError::Law(code) => {
                write!(f, "law {code} is neither 0 (fixed) nor 1 (exponential)")
            }
            AbandonError::Share(ppm) => {
                write!(
                    f,
                    "a share of {ppm} ppm (a share in (0, 1] of the requests)"
                )
            }
            AbandonError::Mean(ns) => write!(
                f,
                "a mean delay of {:.3} s (at most {} s)",
                *ns as f64 / 1e9,
                ABANDON_MEAN_NS_MAX / 1_000_000_000
            ),
        }
    }
}

impl std::error::Error for AbandonError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The draw by hand for seed 9: d = mix(9 ^ mix(i ^ TAG)); marked when d mod 10^6 is under
    /// the share; the delay the mean (fixed), or floor(-ln(u) x mean) with
    /// u = ((mix(d) >> 11) + 1) / 2^53 (exponential), written out here from JOURNAL.md rule 7.
    #[test]
    fn the_draw_is_the_documented_function_of_seed_and_index() {
        let mix = crate::schedule::mix64;
        let fixed = Abandonment {
            share_ppm: 300_000,
            mean_ns: 500_000_000,
            law: ThinkLaw::Fixed,
        };
        let exponential = Abandonment {
            law: ThinkLaw::Exponential,
            ..fixed
        };
        let mut marked = 0;
        for index in 0..2_000u64 {
            let d = mix(9 ^ mix(index ^ 0x6162_616e_646f_6e00));
            let is_marked = d % 1_000_000 < 300_000;
            marked += usize::from(is_marked);
            let u = ((mix(d) >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64);
            let delay = (-libm::log(u) * 500_000_000.0) as u64;
            assert_eq!(fixed.draw(9, index), is_marked.then_some(500_000_000));
            assert_eq!(exponential.draw(9, index), is_marked.then_some(delay));
        }
        assert!((540..660).contains(&marked), "{marked} of 2000 at 30 %");
    }

    /// The extension round-trips; damage and out-of-range fields are refused, each named.
    #[test]
    fn the_extension_round_trips_and_refuses_damage() {
        let a = Abandonment {
            share_ppm: 250_000,
            mean_ns: 1_500_000_000,
            law: ThinkLaw::Exponential,
        };
        let bytes = a.encode();
        assert_eq!(bytes.len(), 14);
        assert_eq!(Abandonment::decode(&bytes), Ok(a));
        assert_eq!(
            Abandonment::decode(&bytes[..13]),
            Err(AbandonError::Length(13))
        );
        let mut law = bytes.clone();
        law[13] = 7;
        assert_eq!(Abandonment::decode(&law), Err(AbandonError::Law(7)));
        let zero = Abandonment { share_ppm: 0, ..a };
        assert_eq!(
            Abandonment::decode(&zero.encode()),
            Err(AbandonError::Share(0))
        );
        assert_eq!(
            Abandonment::decode(&[2]).unwrap_err().to_string(),
            "format byte Some(2); this build reads 1"
        );
    }
}
