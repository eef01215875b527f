//! Per-component recovery, backlog drain and the measured decomposition (SPEC §5).

use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{EventKind, Outcome, TimelineSubject};
use percentes_formats::spec::{Claims, DrainAtRemoval, ReadingWords};

use super::amended::RecoveryReading;
use super::{not_applicable, seconds, series_of, ttr};
use crate::estimate::recovery::{Detection, Detector};
use crate::frame::NONE;
use crate::load::Run;
use crate::model::{Boundary, Component, Ttr};
use crate::windows::Window;
use percentes_formats::spec::StreamReading;

#[allow(clippy::too_many_arguments)]
pub(super) fn components(
    run: &Run,
    met: &[bool],
    bucket_ns: u64,
    end_ns: u64,
    anchor: usize,
    anchor_ns: u64,
    baseline_rows: &[usize],
    baseline_window: Option<Window>,
    timeout_s: f64,
    detector: Detector,
    (rules, reading): (&RecoveryReading, StreamReading),
    not_before: NotBefore,
) -> Vec<Component> {
    let requests = &run.requests;
    let slo = crate::estimate::slo::Slo::pinned();
    let completed = |r: usize| requests.outcome(r) == Some(Outcome::Completed);
    let first = |r: usize| requests.first_token_ns(r, reading);
    let ttft_ok =
        |r: usize| completed(r) && first(r).saturating_sub(requests.intended_ns[r]) <= slo.ttft_ns;
    let e2e_ok = |r: usize| {
        completed(r)
            && requests.terminal_ns[r].saturating_sub(requests.intended_ns[r]) <= slo.e2e_ns
    };
    let not_errored = |r: usize| requests.outcome(r) != Some(Outcome::Errored);
    let _ = met;
    let mut out = Vec::new();
    let checks: [(&'static str, &dyn Fn(usize) -> bool); 3] = [
        ("TTFT-SLO share", &ttft_ok),
        ("end-to-end-SLO share", &e2e_ok),
        ("share not errored (error rate)", &not_errored),
    ];
    for (name, good) in checks {
        let series = series_of(requests, bucket_ns, end_ns, good);
        let baseline = (!baseline_rows.is_empty()).then(|| {
            baseline_rows.iter().filter(|&&r| good(r)).count() as f64 / baseline_rows.len() as f64
        });
        let detection = baseline.map_or(Detection::NoBaseline, |g| {
            rules.pre_fault(&series, anchor, g, detector)
        });
        out.push(Component {
            component: name,
            baseline,
            ttr: ttr(detection, bucket_ns, anchor_ns, timeout_s),
        });
    }
    out.push(backlog(
        run,
        bucket_ns,
        end_ns,
        anchor,
        anchor_ns,
        baseline_window,
        timeout_s,
        detector,
        not_before,
    ));
    out
}

/// The backlog drain's name in the component table.
pub(super) const BACKLOG: &str = "backlog drain";

/// When a component may recover: under v0.1 to v0.3 the backlog drain reads from its peak on;
/// under A3 (v0.4) no component recovers before the fault's confirmed removal, as the pre-fault
/// baseline does not (A2), and a drain whose hold the series cannot show is not determined.
#[derive(Clone, Copy, Debug)]
pub(super) struct NotBefore {
    pub(super) claims: Claims,
    pub(super) removal_ns: Option<u64>,
    /// A4: a drain at the removal's first sample, already drained at the sample before, is a
    /// bound.
    pub(super) drain: DrainAtRemoval,
}

/// Backlog drain: requests in flight (dispatched, not yet terminal) sampled at each bucket start.
/// A backlog exists when the count after the anchor exceeds the baseline's largest; it has
/// drained at the first sample after the peak back at or under that level that stays there for
/// the hold H.
#[allow(clippy::too_many_arguments)]
fn backlog(
    run: &Run,
    bucket_ns: u64,
    end_ns: u64,
    anchor: usize,
    anchor_ns: u64,
    baseline: Option<Window>,
    timeout_s: f64,
    detector: Detector,
    not_before: NotBefore,
) -> Component {
    let requests = &run.requests;
    let buckets = usize::try_from(end_ns / bucket_ns).unwrap_or(0);
    let mut delta = vec![0i64; buckets + 1];
    for r in 0..requests.len() {
        let d = requests.dispatched_ns[r];
        if d == NONE || requests.outcome(r).is_none() {
            continue;
        }
        // In flight at bucket start b*bucket iff d <= b*bucket < terminal.
        let from = d.div_ceil(bucket_ns) as usize;
        let to = requests.terminal_ns[r].div_ceil(bucket_ns) as usize;
        if from < to && from <= buckets {
            delta[from] += 1;
            delta[to.min(buckets)] -= 1;
        }
    }
    let mut in_flight = Vec::with_capacity(buckets);
    let mut level = 0i64;
    for d in delta.iter().take(buckets) {
        level += d;
        in_flight.push(level.max(0) as u64);
    }
    let base_max = baseline.map(|w| {
        let from = w.start_ns.div_ceil(bucket_ns) as usize;
        let to = (w.end_ns / bucket_ns) as usize;
        in_flight
            .get(from..to.min(in_flight.len()))
            .and_then(|s| s.iter().max().copied())
            .unwrap_or(0)
    });
    let Some(base_max) = base_max else {
        return Component {
            component: "backlog drain",
            baseline: None,
            ttr: not_applicable("no baseline window"),
        };
    };
    let after = in_flight.get(anchor..).unwrap_or(&[]);
    let (peak_at, peak) = after
        .iter()
        .enumerate()
        .max_by_key(|(i, v)| (**v, std::cmp::Reverse(*i)))
        .map(|(i, v)| (i, *v))
        .unwrap_or((0, 0));
    let baseline_value = Some(base_max as f64);
    if peak <= base_max {
        return Component {
            component: "backlog drain",
            baseline: baseline_value,
            ttr: not_applicable(&format!(
                "no backlog formed (in flight never exceeded the baseline's largest, {base_max})"
            )),
        };
    }
    let hold = detector.hold_s as usize;
    let from = match not_before {
        NotBefore {
            claims: Claims::Supported,
            removal_ns: None,
            ..
        } => {
            return Component {
                component: BACKLOG,
                baseline: baseline_value,
                ttr: undetermined(format!(
                    "the fault's removal was not confirmed, and no component recovers before it (peak {peak} in flight, A3)"
                )),
            };
        }
        NotBefore {
            claims: Claims::Supported,
            removal_ns: Some(r),
            ..
        } => peak_at.max(
            usize::try_from(r.div_ceil(bucket_ns))
                .unwrap_or(usize::MAX)
                .saturating_sub(anchor),
        ),
        NotBefore { .. } => peak_at,
    };
    let drained = (from..after.len())
        .find(|&i| i + hold < after.len() && after[i..=i + hold].iter().all(|&v| v <= base_max));
    // A3: a drain that starts but whose hold runs past the series is not observed, not "not
    // drained".
    let unobserved = not_before.claims == Claims::Supported
        && drained.is_none()
        && (from..after.len()).any(|i| after[i..].iter().all(|&v| v <= base_max));
    if unobserved {
        return Component {
            component: BACKLOG,
            baseline: baseline_value,
            ttr: undetermined(format!(
                "the backlog fell back to the baseline's largest ({base_max} in flight) but the series ends before its hold of H can be observed (peak {peak}, A3)"
            )),
        };
    }
    // A4: found at the removal's first sample with the sample before already drained, the drain
    // came at or before it: a bound, as a recovery at the detector's resolution is.
    let bounded = not_before.drain == DrainAtRemoval::Bound
        && drained.is_some_and(|i| i == from && from > peak_at && after[from - 1] <= base_max);
    Component {
        component: "backlog drain",
        baseline: baseline_value,
        ttr: match drained {
            Some(i) if bounded => {
                let by = seconds(((anchor + i) as u64 * bucket_ns).saturating_sub(anchor_ns));
                Ttr {
                    status: "bounded".into(),
                    ttr_s: None,
                    at_s: Some(seconds((anchor + i) as u64 * bucket_ns)),
                    text: format!("by {by:.3} s after the fire: the first sample after the confirmed removal held the backlog at or under the baseline's largest ({base_max} in flight), as the sample before it did, so it drained at or before then: a bound, not a measured time (peak {peak} in flight, A4)"),
                    flags: Vec::new(),
                    bound_s: Some(by),
                }
            }
            Some(i) => {
                let at = (anchor + i) as u64 * bucket_ns;
                let value = seconds(at.saturating_sub(anchor_ns));
                Ttr { status: "recovered".into(), ttr_s: Some(value), at_s: Some(seconds(at)), text: format!("{value:.3} s (peak {peak} in flight)"), flags: Vec::new(), bound_s: None }
            }
            None => Ttr {
                status: "not recovered within the recovery timeout".into(),
                ttr_s: None,
                at_s: None,
                text: format!("backlog not drained within {timeout_s:.3} s (peak {peak} in flight, baseline at most {base_max})"),
                flags: Vec::new(),
            bound_s: None,
            },
        },
    }
}

fn undetermined(why: String) -> Ttr {
    Ttr {
        status: "not determined".into(),
        ttr_s: None,
        at_s: None,
        text: format!("not determined: {why}"),
        flags: Vec::new(),
        bound_s: None,
    }
}

/// A3: a boundary observed before one listed before it (a weight load after the replica's
/// readiness probe, their clocks being different sources) bounds no segment: its evidence says
/// so, and the headline measures no segment from or to it.
pub(super) fn flag_out_of_order(boundaries: &mut [Boundary]) {
    let mut last: Option<(u64, &'static str)> = None;
    for b in boundaries.iter_mut() {
        let Some(at) = b.at_ns else { continue };
        match last {
            Some((before, name)) if at < before => {
                b.out_of_order = true;
                b.evidence.push_str(&format!(
                    "; observed {:.3} s before {name}, which is listed before it: the two come from different sources, so no segment between them is a measured duration (A3)",
                    seconds(before - at)
                ));
            }
            _ => last = Some((at, b.boundary)),
        }
    }
}

/// The seconds a weight-load log line says the load took (vLLM: "Loading weights took 0.00
/// seconds"), as written.
fn logged_load_s(detail: &str) -> Option<&str> {
    let after = &detail[detail.find("took ")? + 5..];
    let number = after.split_whitespace().next()?;
    (number.parse::<f64>().is_ok() && after[number.len()..].trim_start().starts_with("second"))
        .then_some(number)
}

/// Measured boundaries only (§5): timeline events the journal carries, the first direct probe
/// success against the victim, the first success through the service served by it.
pub(super) fn decomposition(run: &Run, anchor_ns: u64, words: ReadingWords) -> Vec<Boundary> {
    let mut out = Vec::new();
    let boundary = |name: &'static str, at: Option<u64>, evidence: String| Boundary {
        out_of_order: false,
        at_ns: at,
        boundary: name,
        at_s: at.map(seconds),
        since_anchor_s: at.map(|a| (a as f64 - anchor_ns as f64) / 1e9),
        evidence,
    };
    // A4 (issue 52): the weight-load boundary is the moment its log line was written: the end
    // of everything from the process's start, of which the load itself may be a sliver.
    let weights = match words {
        ReadingWords::Archived => "weight load",
        ReadingWords::WhatWasMeasured => "weight-load log line",
    };
    for (name, subject) in [
        ("reschedule", TimelineSubject::Reschedule),
        ("container start", TimelineSubject::ContainerStart),
        (weights, TimelineSubject::WeightLoad),
        ("CUDA-graph capture", TimelineSubject::GraphCapture),
    ] {
        let subject = subject.name();
        let event = run
            .events
            .all(EventKind::Timeline)
            .find(|e| e.subject == subject && e.at_ns >= anchor_ns);
        out.push(match event {
            Some(e) => boundary(
                name,
                Some(e.at_ns),
                match (words, logged_load_s(&e.detail)) {
                    (ReadingWords::WhatWasMeasured, Some(took)) => format!(
                        "timeline event `{subject}`: {}; the line ends the replica's start-up to its weights loaded, of which the load itself took {took} s as logged",
                        e.detail
                    ),
                    _ => format!("timeline event `{subject}`: {}", e.detail),
                },
            ),
            None => boundary(
                name,
                None,
                format!("N/A: the journal carries no `{subject}` timeline event (never inferred)"),
            ),
        });
    }
    let victim = run.config.fault.victim.clone().unwrap_or_default();
    let probes: Vec<_> = run
        .events
        .all(EventKind::Probe)
        .filter(|e| e.subject == victim)
        .collect();
    let went_down = probes
        .iter()
        .find(|e| e.at_ns >= anchor_ns && DetailWord::ProbeDown.opens(&e.detail))
        .map(|e| e.at_ns);
    let ready = went_down.and_then(|down| {
        probes
            .iter()
            .find(|e| e.at_ns > down && DetailWord::ProbeUp.opens(&e.detail))
    });
    out.push(match (probes.is_empty(), went_down, ready) {
        (true, _, _) => boundary(
            "replica-ready",
            None,
            format!("N/A: no direct probe of {victim} in the journal"),
        ),
        (false, None, _) => boundary(
            "replica-ready",
            None,
            format!("N/A: {victim} never stopped answering its direct probe"),
        ),
        (false, Some(_), None) => boundary(
            "replica-ready",
            None,
            format!("N/A: {victim} did not answer its direct probe again before the run ended"),
        ),
        (false, Some(_), Some(e)) => {
            // A4 (issue 52): a probe success bounds readiness from above only; the probe
            // before it bounds it from below, and the gap between them is its resolution.
            let before = probes.iter().rev().find(|p| p.at_ns < e.at_ns);
            let resolution = match (words, before) {
                (ReadingWords::WhatWasMeasured, Some(b)) => format!(
                    "; the probe before it, {:.3} s earlier at {:.3} s, was not answered: ready within that gap, not to the ms",
                    (e.at_ns - b.at_ns) as f64 / 1e9,
                    seconds(b.at_ns)
                ),
                _ => String::new(),
            };
            boundary(
                "replica-ready",
                Some(e.at_ns),
                format!("first direct probe success against {victim} after it went down{resolution}"),
            )
        }
    });
    let requests = &run.requests;
    let restored = (0..requests.len())
        .filter(|&r| {
            requests.outcome(r) == Some(Outcome::Completed) && requests.terminal_ns[r] > anchor_ns
        })
        .filter(|&r| {
            requests.replica_name(r) == Some(victim.as_str())
                && requests.dispatched_ns[r] > anchor_ns
        })
        .map(|r| requests.terminal_ns[r])
        .min();
    out.push(match restored {
        Some(at) => boundary(
            "traffic-restored",
            Some(at),
            format!("first success through the service served by {victim} after the fire"),
        ),
        None => boundary(
            "traffic-restored",
            None,
            format!("N/A: no success through the service was served by {victim} after the fire"),
        ),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::logged_load_s;

    /// vLLM's line as the testbed journals it; a line without a duration in seconds says none.
    #[test]
    fn a_weight_load_line_says_how_long_the_load_took() {
        let vllm = "replica-1's log: (Worker pid=14804) INFO 12-04 09:26:43 [default_loader.py:501] Loading weights took 0.00 seconds";
        assert_eq!(logged_load_s(vllm), Some("0.00"));
        assert_eq!(
            logged_load_s("Loading weights took 12.5 seconds"),
            Some("12.5")
        );
        assert_eq!(logged_load_s("Loading weights took a while"), None);
        assert_eq!(logged_load_s("took 3 ms"), None);
        assert_eq!(logged_load_s("listening on 127.0.0.1:8000"), None);
    }
}
