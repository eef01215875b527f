//! The capacity probe (SPEC §10 "Capacity check", A4): the times to the last byte of the
//! pre-flight's sample requests, sent one after another before the epoch, as the `capacity-probe`
//! host fact holds them. One spelling, written by the recorder and read by the analyzer and
//! `percentes calibrate`: `service_ms=12.31,11.87,12.02`.

/// What the `capacity-probe` host fact says.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityProbe {
    /// Each sample's time to its last byte, ms, in the order they were sent.
    pub samples_ms: Vec<f64>,
}

/// What is wrong with a `capacity-probe` host fact (a damaged or hand-edited header).
#[derive(Clone, Debug, PartialEq)]
pub enum ProbeError {
    /// The value does not start with its field name.
    Field {
        /// The whole value, as the header holds it.
        value: String,
    },
    /// A sample that is not a positive time in ms.
    Sample {
        /// The sample, as the header holds it.
        sample: String,
    },
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Field { value } => write!(
                f,
                "the capacity-probe host fact {value:?} does not start with {FIELD:?}: it reads as no probe"
            ),
            ProbeError::Sample { sample } => write!(
                f,
                "the capacity-probe host fact holds {sample:?}, which is not a positive time in ms: it reads as no probe"
            ),
        }
    }
}

impl std::error::Error for ProbeError {}

/// The fact's one field name.
const FIELD: &str = "service_ms=";

impl CapacityProbe {
    /// The host fact's value.
    pub fn fact_value(&self) -> String {
        let samples: Vec<String> = self
            .samples_ms
            .iter()
            .map(|ms| format!("{ms:.3}"))
            .collect();
        format!("{FIELD}{}", samples.join(","))
    }

    /// The fact read back, or what is wrong with it.
    pub fn parse(value: &str) -> Result<CapacityProbe, ProbeError> {
        let list = value
            .trim()
            .strip_prefix(FIELD)
            .ok_or_else(|| ProbeError::Field {
                value: value.to_owned(),
            })?;
        // A probe whose first sample was not answered lists none.
        if list.trim().is_empty() {
            return Ok(CapacityProbe {
                samples_ms: Vec::new(),
            });
        }
        let samples_ms = list
            .split(',')
            .map(|s| match s.trim().parse::<f64>() {
                Ok(ms) if ms.is_finite() && ms > 0.0 => Ok(ms),
                _ => Err(ProbeError::Sample {
                    sample: s.to_owned(),
                }),
            })
            .collect::<Result<Vec<f64>, ProbeError>>()?;
        Ok(CapacityProbe { samples_ms })
    }

    /// The samples' median, ms (the mean of the middle two for an even count); `None` without
    /// samples.
    pub fn median_ms(&self) -> Option<f64> {
        median(&self.samples_ms)
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// How far apart two positive figures are, as a share of the larger (the capacity check's
/// measure, as the calibration's disagreement is: §10).
pub fn apart(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.max(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_reads_back_as_written() {
        let probe = CapacityProbe {
            samples_ms: vec![12.3104, 11.87, 40.0],
        };
        assert_eq!(probe.fact_value(), "service_ms=12.310,11.870,40.000");
        let back = CapacityProbe::parse(&probe.fact_value()).unwrap();
        assert_eq!(back.samples_ms, vec![12.31, 11.87, 40.0]);
        assert_eq!(back.median_ms(), Some(12.31));
    }

    #[test]
    fn a_damaged_probe_is_named_not_read() {
        for bad in [
            "",
            "ms=1",
            "service_ms=1,,2",
            "service_ms=1,x",
            "service_ms=-2",
            "service_ms=NaN",
        ] {
            assert!(CapacityProbe::parse(bad).is_err(), "{bad:?} was read");
        }
        // No sample answered: a probe of none, written and read so.
        let none = CapacityProbe {
            samples_ms: Vec::new(),
        };
        assert_eq!(none.fact_value(), "service_ms=");
        assert_eq!(CapacityProbe::parse("service_ms=").unwrap(), none);
        assert_eq!(none.median_ms(), None);
    }

    #[test]
    fn the_median_and_the_distance_are_the_hand_computed_ones() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // 40 against 88: 48 of 88 apart, 54.5 %.
        assert!((apart(40.0, 88.0) - 48.0 / 88.0).abs() < 1e-12);
        assert_eq!(apart(88.0, 40.0), apart(40.0, 88.0));
    }
}
