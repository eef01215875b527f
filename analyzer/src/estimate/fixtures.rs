//! The estimators against R (analyzer/fixtures/incidence: survival's multi-state survfit, which
//! is the Aalen-Johansen estimator, and its Kaplan-Meier; cmprsk::cuminc agrees, see
//! versions.txt), and property tests of their identities.

use std::path::PathBuf;

use proptest::prelude::*;

use super::incidence::{CompletionCurve, Fate, Method, Observation};

const DATA_SETS: &[&str] = &["a1-censored", "heavy-ties", "latency-like", "no-errors"];

fn read_csv(name: &str) -> Vec<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/incidence")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

fn observations(set: &str) -> Vec<Observation> {
    read_csv(&format!("{set}.observations.csv"))
        .iter()
        .map(|row| Observation {
            time_ns: row[0].parse().unwrap(),
            fate: match row[1].as_str() {
                "0" => Fate::Censored,
                "1" => Fate::Completed,
                "2" => Fate::Errored,
                other => panic!("status {other}"),
            },
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12
}

#[test]
fn aalen_johansen_matches_r_survival() {
    for set in DATA_SETS {
        let curve = CompletionCurve::estimate(&observations(set), Method::AalenJohansen);
        let rows = read_csv(&format!("{set}.aj.csv"));
        assert_eq!(
            curve.steps.len(),
            rows.len(),
            "{set}: one row per distinct time"
        );
        for (step, row) in curve.steps.iter().zip(&rows) {
            let (time, n_risk): (u64, u64) = (row[0].parse().unwrap(), row[1].parse().unwrap());
            let (event_free, completed, errored): (f64, f64, f64) = (
                row[2].parse().unwrap(),
                row[3].parse().unwrap(),
                row[4].parse().unwrap(),
            );
            assert_eq!((step.time_ns, step.at_risk), (time, n_risk), "{set}");
            assert!(
                close(step.incidence, completed),
                "{set} at {time}: {} vs R {completed}",
                step.incidence
            );
            assert!(
                close(step.event_free, event_free),
                "{set} at {time}: {} vs R {event_free}",
                step.event_free
            );
            let error_incidence = 1.0 - step.event_free - step.incidence;
            assert!(
                close(error_incidence, errored),
                "{set} at {time}: {error_incidence} vs R {errored}"
            );
        }
    }
}

#[test]
fn v01_kaplan_meier_matches_r_survival() {
    for set in DATA_SETS {
        let curve =
            CompletionCurve::estimate(&observations(set), Method::KaplanMeierErrorsCensored);
        let rows = read_csv(&format!("{set}.km.csv"));
        assert_eq!(curve.steps.len(), rows.len(), "{set}");
        for (step, row) in curve.steps.iter().zip(&rows) {
            assert_eq!(step.time_ns, row[0].parse::<u64>().unwrap(), "{set}");
            assert_eq!(step.at_risk, row[1].parse::<u64>().unwrap(), "{set}");
            let incidence: f64 = row[2].parse().unwrap();
            assert!(
                close(step.incidence, incidence),
                "{set} at {}: {} vs R {incidence}",
                step.time_ns,
                step.incidence
            );
        }
    }
}

#[test]
fn without_errors_the_curve_is_one_minus_kaplan_meier_to_the_last_bit() {
    let obs = observations("no-errors");
    let aj = CompletionCurve::estimate(&obs, Method::AalenJohansen);
    let km = CompletionCurve::estimate(&obs, Method::KaplanMeierErrorsCensored);
    for (a, k) in aj.steps.iter().zip(&km.steps) {
        assert_eq!(
            a.incidence.to_bits(),
            k.incidence.to_bits(),
            "at {}",
            a.time_ns
        );
        assert_eq!(a.incidence.to_bits(), (1.0 - k.event_free).to_bits());
    }
}

fn arbitrary_observations() -> impl Strategy<Value = Vec<Observation>> {
    proptest::collection::vec(
        (0u64..40, prop_oneof![3 => Just(Fate::Completed), 1 => Just(Fate::Errored), 1 => Just(Fate::Censored)])
            .prop_map(|(time_ns, fate)| Observation { time_ns, fate }),
        0..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Completion incidence, error incidence and event-free survival add to one; the curve never
    /// decreases and never passes its ceiling.
    #[test]
    fn identities_hold(obs in arbitrary_observations()) {
        let curve = CompletionCurve::estimate(&obs, Method::AalenJohansen);
        let mut previous = 0.0;
        for step in &curve.steps {
            let error_incidence = 1.0 - step.event_free - step.incidence;
            prop_assert!(error_incidence >= -1e-12 && step.event_free >= -1e-12);
            prop_assert!(step.incidence >= previous - 1e-12);
            previous = step.incidence;
        }
        prop_assert!(curve.final_incidence() <= curve.ceiling() + 1e-12 && curve.ceiling() <= 1.0 + 1e-12);
        let completed = obs.iter().filter(|o| o.fate == Fate::Completed).count();
        if obs.iter().all(|o| o.fate != Fate::Censored) && !obs.is_empty() {
            // Without censoring the curve ends at the completed share.
            prop_assert!((curve.final_incidence() - completed as f64 / obs.len() as f64).abs() < 1e-12);
        }
    }

    /// v0.1 and v0.2 agree bit for bit before the first error, and v0.1 is strictly higher from
    /// the first completion after an error on: they differ exactly where errors precede completions.
    #[test]
    fn versions_differ_exactly_where_errors_precede_completions(obs in arbitrary_observations()) {
        let v02 = CompletionCurve::estimate(&obs, Method::AalenJohansen);
        let v01 = CompletionCurve::estimate(&obs, Method::KaplanMeierErrorsCensored);
        let first_error = obs.iter().filter(|o| o.fate == Fate::Errored).map(|o| o.time_ns).min();
        let first_completion_after = first_error.and_then(|e| {
            obs.iter().filter(|o| o.fate == Fate::Completed && o.time_ns > e).map(|o| o.time_ns).min()
        });
        for (a, b) in v02.steps.iter().zip(&v01.steps) {
            prop_assert_eq!(a.time_ns, b.time_ns);
            if first_error.is_none_or(|e| a.time_ns < e) {
                prop_assert_eq!(a.incidence.to_bits(), b.incidence.to_bits());
            } else if first_completion_after.is_some_and(|c| a.time_ns >= c) {
                prop_assert!(b.incidence > a.incidence + 1e-12, "at {}: v0.1 {} v0.2 {}", a.time_ns, b.incidence, a.incidence);
            } else {
                prop_assert!((a.incidence - b.incidence).abs() <= 1e-12);
            }
        }
    }
}
