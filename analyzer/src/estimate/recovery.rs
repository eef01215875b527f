//! Recovery detection (SPEC §5): the hysteresis detector over SLO-goodput, the single-replica
//! plateau, the two baselines, the 27-cell sensitivity sweep and the integrated deficit.
//!
//! The input is a goodput series in 1 s buckets by intended time: per bucket, how many scheduled
//! requests met the SLO and how many were scheduled. Windowed goodput is a ratio of sums:
//! `W(t) = sum met / sum scheduled` over the R buckets ending at bucket t (bucket t covers
//! `[t, t+1)` s). The detector looks only at windows that start at or after the fire anchor.
//! Recovery is entered at the first t with `W(t) >= X% x baseline` whose hold survives: `W`
//! stays at or above the exit level (85 % x baseline) at every t' in `(t, t + H]`. Time to
//! recovery is the entering window's end (`t + 1`) minus the fire anchor.
//!
//! ```
//! use percentes_analyzer::estimate::recovery::{detect, Bucket, Detector, Detection};
//! // 20 s at goodput 0.5 after the fault, then back to 1.0 for 60 s.
//! let series: Vec<Bucket> = (0..80).map(|s| Bucket { met: if s < 20 { 5 } else { 10 }, scheduled: 10 }).collect();
//! let found = detect(&series, 0, 1.0, Detector::pinned());
//! // W(t) over 10 s first reaches 0.9 with the window ending at 28 s.
//! assert!(matches!(found, Detection::Recovered { ttr_s, .. } if ttr_s == 28));
//! ```

use percentes_formats::pins;

/// One second of a run, by intended time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Scheduled requests that met the SLO.
    pub met: u64,
    /// Requests scheduled in the bucket.
    pub scheduled: u64,
}

/// Detector parameters: window R and hold H in buckets (seconds), entry and exit as fractions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detector {
    /// The sliding window R, in buckets.
    pub window_s: u64,
    /// The hold H, in buckets.
    pub hold_s: u64,
    /// Entry threshold, as a fraction of the baseline's goodput.
    pub entry: f64,
    /// Exit threshold, as a fraction of the baseline's goodput.
    pub exit: f64,
}

impl Detector {
    /// The pinned detector (R 10 s, H 30 s, entry 90 %, exit 85 %).
    pub fn pinned() -> Detector {
        Detector {
            window_s: pins::value::RECOVERY_WINDOW_S as u64,
            hold_s: pins::value::RECOVERY_HOLD_S as u64,
            entry: (pins::value::RECOVERY_ENTRY_PERCENT as f64) / 100.0,
            exit: (pins::value::RECOVERY_EXIT_PERCENT as f64) / 100.0,
        }
    }

    /// The 27 cells of the sensitivity sweep (entry x window x hold; exit fixed at the pin).
    pub fn sweep() -> Vec<Detector> {
        let exit = (pins::value::RECOVERY_EXIT_PERCENT as f64) / 100.0;
        let entries = [
            pins::value::RECOVERY_SWEEP_ENTRY_LOW_PERCENT,
            pins::value::RECOVERY_ENTRY_PERCENT,
            pins::value::RECOVERY_SWEEP_ENTRY_HIGH_PERCENT,
        ];
        let windows = [
            pins::value::RECOVERY_SWEEP_WINDOW_LOW_S,
            pins::value::RECOVERY_WINDOW_S,
            pins::value::RECOVERY_SWEEP_WINDOW_HIGH_S,
        ];
        let holds = [
            pins::value::RECOVERY_SWEEP_HOLD_LOW_S,
            pins::value::RECOVERY_HOLD_S,
            pins::value::RECOVERY_SWEEP_HOLD_HIGH_S,
        ];
        let mut cells = Vec::with_capacity(27);
        for &x in &entries {
            for &r in &windows {
                for &h in &holds {
                    cells.push(Detector {
                        window_s: r as u64,
                        hold_s: h as u64,
                        entry: x as f64 / 100.0,
                        exit,
                    });
                }
            }
        }
        cells
    }
}

/// What the detector found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Detection {
    /// Entered at the window ending `entry_end_s` (absolute, s from the series' start), surviving
    /// the hold. `ttr_s` is that end minus the fire anchor.
    Recovered {
        /// Buckets from the fire anchor to the end of the entering window.
        ttr_s: u64,
        /// The entering window's end, buckets from the series' start.
        entry_end_s: u64,
    },
    /// No entry survived its hold within the series (the 600 s timeout, when the series ends there).
    NotRecovered,
    /// The baseline goodput is zero or missing: there is nothing to recover to.
    NoBaseline,
    /// A2 (v0.3) only: the data cannot decide. An entry was found but its hold could not be
    /// observed (it ran past the end of the series, or through a stretch longer than R that no
    /// counting window reads), or no window after the start held enough requests to count; so
    /// neither a recovery nor its absence is claimed.
    Unreadable {
        /// Why, in words.
        reason: &'static str,
    },
}

/// Windowed goodput over buckets `[end + 1 - window, end]`; `None` when nothing was scheduled.
pub fn windowed(series: &[Bucket], end: usize, window: usize) -> Option<f64> {
    let start = (end + 1).checked_sub(window)?;
    let (met, scheduled) = series[start..=end]
        .iter()
        .fold((0, 0), |(m, s), b| (m + b.met, s + b.scheduled));
    (scheduled > 0).then(|| met as f64 / scheduled as f64)
}

/// Runs the detector from the fire anchor (bucket `anchor_s`) against `baseline` goodput.
pub fn detect(series: &[Bucket], anchor_s: usize, baseline: f64, detector: Detector) -> Detection {
    // Also catches NaN: a baseline that is not a positive number has nothing to recover to.
    if baseline.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Detection::NoBaseline;
    }
    let window = detector.window_s.max(1) as usize;
    let hold = detector.hold_s as usize;
    let entry = detector.entry * baseline;
    let exit = detector.exit * baseline;
    let first_end = anchor_s + window - 1;
    let mut t = first_end;
    while t < series.len() {
        if windowed(series, t, window).is_some_and(|w| w >= entry) {
            let hold_end = t + hold;
            if hold_end >= series.len() {
                // The hold cannot be observed to its end: not a recovery (never inferred).
                return Detection::NotRecovered;
            }
            let survived =
                (t + 1..=hold_end).all(|u| windowed(series, u, window).is_none_or(|w| w >= exit));
            if survived {
                let entry_end_s = (t + 1) as u64;
                return Detection::Recovered {
                    ttr_s: entry_end_s - anchor_s as u64,
                    entry_end_s,
                };
            }
        }
        t += 1;
    }
    Detection::NotRecovered
}

/// After a recovery entered at the window ending `entry_end_s` (exclusive end, as
/// [`Detection::Recovered`] gives it), the end bucket of the first later R-window whose goodput is
/// below the exit threshold, up to bucket `until` (exclusive): a relapse the hold did not see.
/// A degradation that builds slowly (a survivor's queue filling) can pass the hold at first and
/// fall through the baseline later; the TTR then understates the disruption.
pub fn relapse(
    series: &[Bucket],
    entry_end_s: usize,
    until: usize,
    baseline: f64,
    detector: Detector,
) -> Option<usize> {
    // Every window with a request counts (v0.2): A2's relapse with a minimum of one.
    let any = Reader {
        min_requests: 1,
        band: false,
    };
    relapse_from(series, entry_end_s, until, baseline, detector, any)
}

/// Goodput as a ratio of sums over buckets `[from, to)`.
pub fn goodput_between(series: &[Bucket], from: usize, to: usize) -> Option<f64> {
    let to = to.min(series.len());
    if from >= to {
        return None;
    }
    let (met, scheduled) = series[from..to]
        .iter()
        .fold((0, 0), |(m, s), b| (m + b.met, s + b.scheduled));
    (scheduled > 0).then(|| met as f64 / scheduled as f64)
}

/// The single-replica equilibrium (SPEC §5).
#[derive(Clone, Debug, PartialEq)]
pub enum Plateau {
    /// It spans at least R and its goodput is above zero.
    Estimable {
        /// Its first bucket.
        from_s: u64,
        /// Its end bucket (exclusive).
        to_s: u64,
        /// Its goodput (ratio of sums).
        goodput: f64,
    },
    /// It is too short or has no SLO-goodput.
    NotEstimable {
        /// Its first bucket.
        from_s: u64,
        /// Its end bucket (exclusive).
        to_s: u64,
        /// Why it is not estimable.
        reason: &'static str,
    },
}

/// The plateau window runs from the fire anchor + R to the earlier of the recovery-to-pre-fault
/// entry and the timeout; it is estimable only if it spans at least R and its goodput is above 0.
pub fn plateau(
    series: &[Bucket],
    anchor_s: usize,
    timeout_s: usize,
    pre_fault: Detection,
    window_s: usize,
) -> Plateau {
    let from = anchor_s + window_s;
    let timeout_end = anchor_s + timeout_s;
    let to = match pre_fault {
        Detection::Recovered { entry_end_s, .. } => (entry_end_s as usize).min(timeout_end),
        _ => timeout_end,
    }
    .min(series.len());
    estimable(series, from, to, (from as u64, to as u64), window_s, 0)
}

/// The plateau `[from, to)`, reported with `bounds`: estimable when it spans at least R
/// (`window_s`), holds at least `min_requests` scheduled requests (A2; 0 before it) and has
/// goodput above 0.
fn estimable(
    series: &[Bucket],
    from: usize,
    to: usize,
    bounds: (u64, u64),
    window_s: usize,
    min_requests: u64,
) -> Plateau {
    let refuse = |reason| Plateau::NotEstimable {
        from_s: bounds.0,
        to_s: bounds.1,
        reason,
    };
    if to < from + window_s {
        return refuse("plateau shorter than R");
    }
    let scheduled: u64 = series[from..to].iter().map(|b| b.scheduled).sum();
    if scheduled < min_requests {
        return refuse("fewer scheduled requests than a detector window must hold");
    }
    match goodput_between(series, from, to) {
        Some(g) if g > 0.0 => Plateau::Estimable {
            from_s: bounds.0,
            to_s: bounds.1,
            goodput: g,
        },
        _ => refuse("zero SLO-goodput"),
    }
}

/// The integrated goodput deficit: the area between the baseline and the observed bucket goodput
/// from the fire anchor to `until_s` (recovery, or the timeout), in goodput-seconds. Buckets with
/// nothing scheduled contribute nothing.
pub fn deficit(series: &[Bucket], anchor_s: usize, until_s: usize, baseline: f64) -> f64 {
    series[anchor_s.min(series.len())..until_s.min(series.len())]
        .iter()
        .filter(|b| b.scheduled > 0)
        .map(|b| baseline - b.met as f64 / b.scheduled as f64)
        .sum()
}

/// How amendment A2 (spec v0.3) reads a series: a window counts only when it holds at least
/// `min_requests` scheduled requests, a hold is observed only when every window in it counts, and
/// the equilibrium is entered inside a two-sided band instead of above a floor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reader {
    /// The fewest scheduled requests a window must hold for its goodput to count
    /// (`recovery.window_min_requests`).
    pub min_requests: u64,
    /// Two-sided: entry within `(1 - entry)` of the baseline on either side, exit beyond
    /// `(1 - exit)` on either side. One-sided (the pre-fault baseline): entry at or above
    /// `entry x baseline`, exit below `exit x baseline`.
    pub band: bool,
}

impl Reader {
    /// The pre-fault reading: one-sided, with the pinned minimum.
    pub fn pre_fault() -> Reader {
        Reader {
            min_requests: pins::value::RECOVERY_WINDOW_MIN_REQUESTS as u64,
            band: false,
        }
    }

    /// The equilibrium reading: two-sided, with the pinned minimum.
    pub fn equilibrium() -> Reader {
        Reader {
            band: true,
            ..Reader::pre_fault()
        }
    }

    /// Windowed goodput when the window holds enough requests to count.
    pub fn read(&self, series: &[Bucket], end: usize, window: usize) -> Option<f64> {
        let start = (end + 1).checked_sub(window)?;
        let (met, scheduled) = series[start..=end]
            .iter()
            .fold((0, 0), |(m, s), b| (m + b.met, s + b.scheduled));
        (scheduled >= self.min_requests.max(1)).then(|| met as f64 / scheduled as f64)
    }

    /// How the hold after an entry at `t` ends by `hold_end`: held when every counting window in
    /// it stays inside the exit level and the counting windows (with the entering one) read every
    /// bucket of it, so no scheduled request of the hold goes unread; broken by a counting window
    /// outside the exit level; unobserved when a stretch longer than R is read by no counting
    /// window (no requests, or too few). Thin windows neither break nor make a hold.
    pub fn hold(
        &self,
        series: &[Bucket],
        t: usize,
        hold_end: usize,
        window: usize,
        exit: f64,
        baseline: f64,
    ) -> Hold {
        let mut covered_to = t;
        let mut gap = false;
        for u in t + 1..=hold_end {
            let Some(w) = self.read(series, u, window) else {
                continue;
            };
            if !self.inside(w, exit, baseline) {
                return Hold::Broken;
            }
            gap |= u + 1 - window > covered_to + 1;
            covered_to = u;
        }
        if gap || covered_to != hold_end {
            Hold::Unobserved
        } else {
            Hold::Held
        }
    }

    fn inside(&self, w: f64, level: f64, baseline: f64) -> bool {
        if self.band {
            (w - baseline).abs() <= (1.0 - level) * baseline + 1e-12 * baseline
        } else {
            w >= level * baseline
        }
    }
}

/// Runs A2's detector: windows that start at or after both the fire anchor and bucket `from_s`
/// (the confirmed removal, for the pre-fault baseline; the anchor itself for the equilibrium),
/// read with `reader`. Entry is the first counting window inside the entry level whose hold
/// [`Reader::hold`]; a hold that is not observed lets the search go on, and one that runs past
/// the end of the series stops it (never inferred). TTR is still measured from the fire anchor.
pub fn detect_from(
    series: &[Bucket],
    anchor_s: usize,
    from_s: usize,
    baseline: f64,
    detector: Detector,
    reader: Reader,
) -> Detection {
    if baseline.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
        return Detection::NoBaseline;
    }
    let window = detector.window_s.max(1) as usize;
    let hold = detector.hold_s as usize;
    let mut t = anchor_s.max(from_s) + window - 1;
    let (mut read_any, mut unobserved) = (false, false);
    while t < series.len() {
        let reading = reader.read(series, t, window);
        read_any |= reading.is_some();
        if reading.is_some_and(|w| reader.inside(w, detector.entry, baseline)) {
            let hold_end = t + hold;
            if hold_end >= series.len() {
                return Detection::Unreadable {
                    reason: if unobserved {
                        "every entry's hold crossed a stretch longer than R that no counting window reads, or ran past the end of the series"
                    } else {
                        "an entry was found, but the series ends before its hold can be observed"
                    },
                };
            }
            match reader.hold(series, t, hold_end, window, detector.exit, baseline) {
                Hold::Held => {
                    let entry_end_s = (t + 1) as u64;
                    return Detection::Recovered {
                        ttr_s: entry_end_s - anchor_s as u64,
                        entry_end_s,
                    };
                }
                Hold::Broken => {}
                Hold::Unobserved => unobserved = true,
            }
        }
        t += 1;
    }
    if !read_any {
        Detection::Unreadable {
            reason: "no detector window after the start holds enough scheduled requests to count",
        }
    } else if unobserved {
        Detection::Unreadable {
            reason:
                "every entry's hold crossed a stretch longer than R that no counting window reads",
        }
    } else {
        Detection::NotRecovered
    }
}

/// How a hold ended (A2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// Every counting window stayed inside the exit level and they read every bucket.
    Held,
    /// A counting window left the exit level.
    Broken,
    /// A stretch longer than R was read by no counting window.
    Unobserved,
}

/// Whether the counting windows (read with `reader`, R = `window`) that start at or after bucket
/// `start` read every bucket from `start` to the series' end: where they do not, a recovery in
/// the unread stretch could not have been seen, and its absence is not shown (A4).
pub fn every_bucket_read(series: &[Bucket], start: usize, window: usize, reader: Reader) -> bool {
    let window = window.max(1);
    // The first bucket no counting window has read yet.
    let mut unread_from = start;
    for end in start + window - 1..series.len() {
        if reader.read(series, end, window).is_some() {
            if end + 1 - window > unread_from {
                return false;
            }
            unread_from = end + 1;
        }
    }
    unread_from >= series.len()
}

/// How many R-windows ending in `[first, until)` (each starting at or after bucket `from_s`) held
/// fewer requests than `reader` counts, and how many held none: A2 states them.
pub fn thin_windows(
    series: &[Bucket],
    from_s: usize,
    until: usize,
    window: usize,
    reader: Reader,
) -> (u64, u64, u64) {
    let window = window.max(1);
    let (mut total, mut thin, mut empty) = (0, 0, 0);
    for end in from_s + window - 1..until.min(series.len()) {
        total += 1;
        let scheduled: u64 = series[end + 1 - window..=end]
            .iter()
            .map(|b| b.scheduled)
            .sum();
        if scheduled < reader.min_requests.max(1) {
            thin += 1;
        }
        if scheduled == 0 {
            empty += 1;
        }
    }
    (total, thin, empty)
}

/// A2's relapse: the end bucket of the first counting window after the recovery (from
/// `entry_end_s` to `until`, exclusive) whose goodput is below the exit threshold.
pub fn relapse_from(
    series: &[Bucket],
    entry_end_s: usize,
    until: usize,
    baseline: f64,
    detector: Detector,
    reader: Reader,
) -> Option<usize> {
    let window = detector.window_s.max(1) as usize;
    (entry_end_s..until.min(series.len())).find(|&t| {
        reader
            .read(series, t, window)
            .is_some_and(|w| w < detector.exit * baseline)
    })
}

/// A2's plateau: from the fire anchor + R to bucket `end` (exclusive), where the caller puts the
/// earliest of the confirmed removal (the single replica is no longer alone), the start of the
/// window that entered recovery to the pre-fault baseline (so the plateau never contains it) and
/// the timeout; estimable only if it spans at least R, holds at least the reader's minimum of
/// requests, and its goodput is above 0.
pub fn plateau_until(
    series: &[Bucket],
    anchor_s: usize,
    end: usize,
    window_s: usize,
    reader: Reader,
) -> Plateau {
    let from = anchor_s + window_s;
    let to = end.min(series.len());
    let bounds = (from as u64, (to.max(from)) as u64);
    estimable(series, from, to, bounds, window_s, reader.min_requests)
}

#[cfg(test)]
mod amended_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A series from (seconds, goodput in tenths) segments, 10 scheduled per second.
    fn script(segments: &[(usize, u64)]) -> Vec<Bucket> {
        segments
            .iter()
            .flat_map(|&(n, tenths)| {
                std::iter::repeat_n(
                    Bucket {
                        met: tenths,
                        scheduled: 10,
                    },
                    n,
                )
            })
            .collect()
    }

    const R: u64 = 10;

    #[test]
    fn a_relapse_after_the_hold_is_found_where_the_window_first_drops_below_exit() {
        // Fault at 0: 20 s at 0.3, 40 s at 1.0 (past R + H = 40 s), then 0.5 for 30 s, then 1.0.
        let series = script(&[(20, 3), (40, 10), (30, 5), (30, 10)]);
        let Detection::Recovered { entry_end_s, .. } = detect(&series, 0, 1.0, Detector::pinned())
        else {
            panic!("no recovery")
        };
        // Entry: the window 19..=28 holds one 0.3 and nine 1.0, 0.93 >= 0.9 (the one before,
        // 18..=27, is 0.86); it ends at bucket 28, so entry_end 29. The hold runs to 58.
        assert_eq!(entry_end_s, 29);
        // The 10 s window ending at t holds (t - 59) buckets at 0.5 from t = 60: goodput
        // 1 - 0.05 (t - 59) < 0.85 first when t - 59 > 3, at t = 63.
        assert_eq!(
            relapse(&series, 30, series.len(), 1.0, Detector::pinned()),
            Some(63)
        );
        // Bounded by `until`, and absent when goodput stays up.
        assert_eq!(relapse(&series, 30, 63, 1.0, Detector::pinned()), None);
        let steady = script(&[(20, 3), (100, 10)]);
        assert_eq!(
            relapse(&steady, 30, steady.len(), 1.0, Detector::pinned()),
            None
        );
    }

    #[test]
    fn scripted_recovery_is_found_within_r() {
        // Fault at 0: 40 s at 0.3, then back at 1.0 for 100 s. Truth: recovery at 40 s.
        let series = script(&[(40, 3), (100, 10)]);
        match detect(&series, 0, 1.0, Detector::pinned()) {
            Detection::Recovered { ttr_s, .. } => assert!(ttr_s.abs_diff(40) <= R, "TTR {ttr_s}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hand_computed_entry_time() {
        // 20 s at 0.5, then 1.0. W(t) over 10 s reaches 0.9 when 8 of 10 buckets are at 1.0:
        // window [t-9, t] with 8 recovered buckets, 2 at 0.5: (8 + 1) / 10 = 0.9 at t = 27, so the
        // entering window ends at 28 s; W never drops below 0.85 afterwards.
        let series = script(&[(20, 5), (80, 10)]);
        assert_eq!(
            detect(&series, 0, 1.0, Detector::pinned()),
            Detection::Recovered {
                ttr_s: 28,
                entry_end_s: 28
            }
        );
        // Against a lower baseline (the plateau's 0.5), entry is immediate: the first full window.
        assert_eq!(
            detect(&series, 0, 0.5, Detector::pinned()),
            Detection::Recovered {
                ttr_s: 10,
                entry_end_s: 10
            }
        );
    }

    #[test]
    fn hysteresis_stops_a_flapping_script_from_reading_as_early_recovery() {
        // Flapping: 15 s recovered, 15 s at 0.2, repeated, then truly recovered from 120 s.
        let mut segments = Vec::new();
        for _ in 0..4 {
            segments.push((15, 10));
            segments.push((15, 2));
        }
        segments.push((120, 10));
        let series = script(&segments);
        match detect(&series, 0, 1.0, Detector::pinned()) {
            Detection::Recovered { ttr_s, .. } => assert!(
                (120..=120 + R).contains(&ttr_s),
                "flapping read as recovery at {ttr_s}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_recovery_within_the_timeout_is_reported() {
        let series = script(&[(600, 4)]);
        assert_eq!(
            detect(&series, 0, 1.0, Detector::pinned()),
            Detection::NotRecovered
        );
        // An entry whose hold would run past the series' end is not a recovery.
        let series = script(&[(590, 4), (10, 10)]);
        assert_eq!(
            detect(&series, 0, 1.0, Detector::pinned()),
            Detection::NotRecovered
        );
        assert_eq!(
            detect(&series, 0, 0.0, Detector::pinned()),
            Detection::NoBaseline
        );
    }

    #[test]
    fn the_two_baselines_give_distinct_answers_and_plateau_estimability() {
        // Fault at 0: 60 s at 0.6 (the survivor's equilibrium), then two replicas again.
        let series = script(&[(60, 6), (200, 10)]);
        let pre = detect(&series, 0, 1.0, Detector::pinned());
        let Detection::Recovered { entry_end_s, .. } = pre else {
            panic!("{pre:?}")
        };
        let found = plateau(&series, 0, 600, pre, R as usize);
        let Plateau::Estimable {
            from_s,
            to_s,
            goodput,
        } = found.clone()
        else {
            panic!("{found:?}")
        };
        assert_eq!((from_s, to_s), (R, entry_end_s));
        assert!(goodput > 0.6 - 1e-12 && goodput < 0.75, "{goodput}");
        let equilibrium = detect(&series, 0, goodput, Detector::pinned());
        assert_ne!(equilibrium, pre, "both baselines reported, never conflated");

        // Recovered to the pre-fault level too soon for a plateau of R seconds.
        let quick = script(&[(5, 6), (200, 10)]);
        let pre = detect(&quick, 0, 1.0, Detector::pinned());
        assert!(matches!(
            plateau(&quick, 0, 600, pre, R as usize),
            Plateau::NotEstimable {
                reason: "plateau shorter than R",
                ..
            }
        ));
        // A survivor that serves nothing within the SLO.
        let dead = script(&[(600, 0)]);
        assert!(matches!(
            plateau(&dead, 0, 600, Detection::NotRecovered, R as usize),
            Plateau::NotEstimable {
                reason: "zero SLO-goodput",
                ..
            }
        ));
    }

    #[test]
    fn sweep_has_27_cells_with_exit_fixed() {
        let cells = Detector::sweep();
        assert_eq!(cells.len(), 27);
        assert!(cells.iter().all(|c| (c.exit - 0.85).abs() < 1e-12));
        assert!(cells.contains(&Detector::pinned()));
        let windows: std::collections::BTreeSet<u64> = cells.iter().map(|c| c.window_s).collect();
        assert_eq!(windows.into_iter().collect::<Vec<_>>(), [5, 10, 20]);
    }

    #[test]
    fn deficit_by_hand() {
        // Baseline 1.0; 10 s at 0.5 then 1.0: deficit 10 x 0.5 = 5 goodput-seconds up to 20 s.
        let series = script(&[(10, 5), (10, 10)]);
        assert!((deficit(&series, 0, 20, 1.0) - 5.0).abs() < 1e-12);
    }
}
