//! A reading at the detector's resolution is a bound, not a duration (SPEC §5 "What v0.4 reads",
//! amendment A3).
//!
//! The detector reads goodput over a window of R and reports the end of the first window that
//! enters and holds. When that window is the first one that could count (the first after the
//! confirmed removal for the pre-fault baseline, the first after the fire anchor for the
//! equilibrium), the reading says only that the service was back by then: the whole of R is the
//! detector's, not the service's. In v0.3's goldens every recovery to the pre-fault baseline that
//! was read was of this kind (pod-churn: removal 0.352 s + bucket rounding 0.008 s + R 1.4 s).
//! A3 reports it as "within R of the removal" with the bound, and no measured duration.
//!
//! The first countable window ends at most R plus one bucket after its start event (the start
//! rounds up to a bucket edge): a reading at or before that end is at the detector's resolution.

use super::seconds;
use crate::model::{Duration, RecoveryReport, State, Ttr};

/// Whether a recovery whose entering window ended at `at_ns` is the first window that could
/// count after `start_ns` (the removal, or the fire anchor): at most R (`window_ns`) plus one
/// bucket after it.
pub(crate) fn at_resolution(at_ns: u64, start_ns: u64, window_ns: u64, bucket_ns: u64) -> bool {
    at_ns <= start_ns.saturating_add(window_ns).saturating_add(bucket_ns)
}

/// Rewrites a recovered `ttr` as a bound when it is at the detector's resolution after
/// `start_ns` (`what` names the start: "the removal", "the fire"). Returns whether it did.
pub(crate) fn bound(
    ttr: &mut Ttr,
    start_ns: u64,
    what: &str,
    anchor_ns: u64,
    window_ns: u64,
    bucket_ns: u64,
) -> bool {
    let Some(at_s) = ttr.at_s.filter(|_| ttr.status == "recovered") else {
        return false;
    };
    let at_ns = (at_s * 1e9).round() as u64;
    if !at_resolution(at_ns, start_ns, window_ns, bucket_ns) {
        return false;
    }
    let by = seconds(at_ns.saturating_sub(anchor_ns));
    ttr.status = "bounded".into();
    ttr.ttr_s = None;
    ttr.bound_s = Some(by);
    ttr.text = format!(
        "within R ({:.3} s) of {what} at {:.3} s, so by {by:.3} s after the fire: the first detector window that could count already held, so this is the detector's resolution, a bound and not a measured duration (A3)",
        seconds(window_ns),
        seconds(start_ns),
    );
    // v0.3's remark on a TTR equal to R is what the bound now says.
    ttr.flags.retain(|f| !f.starts_with("TTR equals R"));
    true
}

/// The timeline's Recovered state and the durations that end at it, when the recovery to the
/// pre-fault baseline (`pre`) is a bound: the state's time is "by", and a duration to it is "at
/// most", never a measured length.
pub(crate) fn durations(states: &mut [State], durations: &mut [Duration], pre: &Ttr) {
    for state in states.iter_mut().filter(|s| s.state == "Recovered") {
        state
            .evidence
            .push_str("; a bound: recovered by this time, within R of the removal (A3)");
    }
    for d in durations
        .iter_mut()
        .filter(|d| matches!(d.duration, "degradation" | "recovery"))
    {
        if let Some(length) = d.seconds.take() {
            d.note = format!(
                "at most {length:.3} s: it ends at the recovery to the pre-fault baseline, which is a bound at the detector's resolution ({}), not a measured time (A3)",
                pre.status
            );
        }
    }
}

/// Rounds every duration and instant of a recovery report to the journal's resolution, the
/// nanosecond (A3), so report.json carries 0.052469065, not 0.052469064999999926.
pub(crate) fn to_the_nanosecond(r: &mut RecoveryReport) {
    let round = |x: &mut f64| *x = (*x * 1e9).round() / 1e9;
    let opt = |x: &mut Option<f64>| {
        if let Some(v) = x {
            *v = (*v * 1e9).round() / 1e9;
        }
    };
    let ttr = |t: &mut Ttr| {
        opt(&mut t.ttr_s);
        opt(&mut t.at_s);
        opt(&mut t.bound_s);
    };
    for x in [
        &mut r.bucket_s,
        &mut r.window_s,
        &mut r.hold_s,
        &mut r.timeout_s,
        &mut r.fire_anchor_s,
        &mut r.pre_fault_baseline.from_s,
        &mut r.pre_fault_baseline.to_s,
        &mut r.equilibrium.from_s,
        &mut r.equilibrium.to_s,
    ] {
        round(x);
    }
    ttr(&mut r.to_pre_fault);
    ttr(&mut r.to_equilibrium);
    opt(&mut r.deficit_goodput_s);
    for row in &mut r.sweep {
        round(&mut row.window_s);
        round(&mut row.hold_s);
        opt(&mut row.to_pre_fault_s);
        opt(&mut row.to_equilibrium_s);
        opt(&mut row.pre_fault_bound_s);
        opt(&mut row.equilibrium_bound_s);
    }
    for c in &mut r.components {
        ttr(&mut c.ttr);
    }
    for b in &mut r.decomposition {
        opt(&mut b.at_s);
        opt(&mut b.since_anchor_s);
    }
    for s in &mut r.timeline {
        opt(&mut s.from_s);
    }
    for d in &mut r.durations {
        opt(&mut d.seconds);
    }
    for p in &mut r.series {
        round(&mut p.t_s);
    }
    for s in &mut r.survivor {
        round(&mut s.from_s);
        opt(&mut s.to_s);
    }
    if let Some(a) = &mut r.amended {
        opt(&mut a.removal_s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recovered(at_s: f64, anchor_s: f64) -> Ttr {
        Ttr {
            status: "recovered".into(),
            ttr_s: Some(at_s - anchor_s),
            at_s: Some(at_s),
            text: String::new(),
            flags: vec!["TTR equals R (1.400 s) because ...".into()],
            bound_s: None,
        }
    }

    /// Hand-computed on pod-churn's v0.3 reading: bucket 10 ms, R 1.4 s (widened 14x), fire
    /// anchor 3.600 s, removal 3.952 s; the first window that may count starts at the bucket
    /// edge 3.960 s and ends at 5.360 s, 1.760 s after the fire. 5.360 <= 3.952 + 1.4 + 0.01 =
    /// 5.362: a bound. A window ending one bucket later, at 5.370 s, is past 5.362 s: the
    /// detector read at least one later window first, so that one is a measurement.
    /// Issue 53 (SPEC §5 "What v0.5 reads"): a relapse after a recovery given as a bound stays
    /// flagged on the bound; only the remark on a TTR equal to R, which the bound now says,
    /// goes.
    #[test]
    fn a_relapse_stays_flagged_on_a_bound() {
        let ms = 1_000_000u64;
        let mut ttr = recovered(5.36, 3.6);
        ttr.flags
            .push("relapsed: goodput fell below the exit threshold again".into());
        assert!(bound(
            &mut ttr,
            3_952 * ms,
            "the removal",
            3_600 * ms,
            1_400 * ms,
            10 * ms
        ));
        assert_eq!(
            ttr.flags,
            ["relapsed: goodput fell below the exit threshold again"]
        );
    }

    #[test]
    fn the_first_window_after_the_removal_is_a_bound() {
        let ms = 1_000_000u64;
        let (anchor, removal, r, bucket) = (3_600 * ms, 3_952 * ms, 1_400 * ms, 10 * ms);
        let mut first = recovered(5.36, 3.6);
        assert!(bound(&mut first, removal, "the removal", anchor, r, bucket));
        assert_eq!(first.status, "bounded");
        assert_eq!(first.ttr_s, None);
        assert_eq!(first.bound_s, Some(1.76));
        assert!(first.flags.is_empty());
        assert!(first
            .text
            .starts_with("within R (1.400 s) of the removal at 3.952 s, so by 1.760 s"));
        let mut later = recovered(5.37, 3.6);
        assert!(!bound(
            &mut later,
            removal,
            "the removal",
            anchor,
            r,
            bucket
        ));
        assert_eq!(later.status, "recovered");
        assert!((later.ttr_s.unwrap() - 1.77).abs() < 1e-12);
        assert_eq!(later.bound_s, None);
    }

    #[test]
    fn only_a_recovered_reading_becomes_a_bound() {
        let mut not = Ttr {
            status: "not determined".into(),
            ttr_s: None,
            at_s: None,
            text: "not determined".into(),
            flags: Vec::new(),
            bound_s: None,
        };
        assert!(!bound(&mut not, 0, "the fire", 0, 1, 1));
        assert_eq!(not.status, "not determined");
        assert!(at_resolution(12, 1, 10, 1) && !at_resolution(13, 1, 10, 1));
    }

    /// A duration that ends at a bounded recovery loses its length and says "at most" it.
    #[test]
    fn a_duration_to_a_bound_is_at_most() {
        let mut states = vec![State {
            state: "Recovered",
            from_s: Some(5.36),
            evidence: "held".into(),
        }];
        let mut durations = vec![Duration {
            duration: "recovery",
            seconds: Some(1.408),
            definition: "",
            note: String::new(),
        }];
        let mut pre = recovered(5.36, 3.6);
        pre.status = "bounded".into();
        super::durations(&mut states, &mut durations, &pre);
        assert_eq!(durations[0].seconds, None);
        assert!(durations[0].note.starts_with("at most 1.408 s"));
        assert!(states[0].evidence.ends_with("within R of the removal (A3)"));
    }

    /// The float noise of a subtraction in seconds goes; the nanosecond stays.
    #[test]
    fn seconds_are_rounded_to_the_nanosecond() {
        let noisy = 3.652469065 - 3.6;
        assert_ne!(noisy, 0.052469065);
        let round = |x: f64| (x * 1e9).round() / 1e9;
        assert_eq!(round(noisy), 0.052469065);
        assert_eq!(round(1.000000001), 1.000000001);
    }
}
