//! Hand-computed oracles for amendment A2's detector rules (spec v0.3), each beside what the
//! v0.2 rule reads on the same series, so the change each rule makes is visible.

use super::*;

/// A series from (seconds, met, scheduled) segments.
fn script(segments: &[(usize, u64, u64)]) -> Vec<Bucket> {
    segments
        .iter()
        .flat_map(|&(n, met, scheduled)| std::iter::repeat_n(Bucket { met, scheduled }, n))
        .collect()
}

#[test]
fn the_equilibrium_band_reads_the_settling_not_the_first_window() {
    // After the fire the survivor still serves 0.9 for 10 s (its queue filling), then settles at
    // 0.5. One-sided entry (>= 90 % of 0.5) is true of the very first window: TTR = R.
    let series = script(&[(10, 9, 10), (70, 5, 10)]);
    assert_eq!(
        detect(&series, 0, 0.5, Detector::pinned()),
        Detection::Recovered {
            ttr_s: 10,
            entry_end_s: 10
        }
    );
    // The band [0.45, 0.55]: W(t) = (0.9 (19 - t) + 0.5 (t - 9)) / 10 for t in 10..19 is at most
    // 0.55 first at t = 18 (W = 0.54); the hold band [0.425, 0.575] holds from there, so the
    // entering window ends at 19 s.
    assert_eq!(
        detect_from(
            &series,
            0,
            0,
            0.5,
            Detector::pinned(),
            Reader::equilibrium()
        ),
        Detection::Recovered {
            ttr_s: 19,
            entry_end_s: 19
        }
    );
    // A survivor that settles at once does read R, and only then.
    let at_once = script(&[(80, 5, 10)]);
    assert_eq!(
        detect_from(
            &at_once,
            0,
            0,
            0.5,
            Detector::pinned(),
            Reader::equilibrium()
        ),
        Detection::Recovered {
            ttr_s: 10,
            entry_end_s: 10
        }
    );
    // The band is two-sided: approaching from below (0.3 for 10 s, then 0.5) settles at the
    // first window with W >= 0.45: (0.3 a + 0.5 (10 - a)) / 10 >= 0.45 for a <= 2.5, so a = 2,
    // the window ending at bucket 17.
    let from_below = script(&[(10, 3, 10), (70, 5, 10)]);
    assert_eq!(
        detect_from(
            &from_below,
            0,
            0,
            0.5,
            Detector::pinned(),
            Reader::equilibrium()
        ),
        Detection::Recovered {
            ttr_s: 18,
            entry_end_s: 18
        }
    );
}

#[test]
fn no_recovery_to_the_pre_fault_baseline_before_the_removal() {
    // 10 s at 0.3, then 1.0. v0.2 enters at the window 9..=18 ((3 + 90) / 100 = 0.93).
    let series = script(&[(10, 3, 10), (100, 10, 10)]);
    assert_eq!(
        detect(&series, 0, 1.0, Detector::pinned()),
        Detection::Recovered {
            ttr_s: 19,
            entry_end_s: 19
        }
    );
    // The removal is confirmed at 30 s: the first window that may count is 30..=39; TTR is
    // still from the anchor.
    assert_eq!(
        detect_from(&series, 0, 30, 1.0, Detector::pinned(), Reader::pre_fault()),
        Detection::Recovered {
            ttr_s: 40,
            entry_end_s: 40
        }
    );
    // A removal before the anchor changes nothing: windows start at the later of the two.
    assert_eq!(
        detect_from(&series, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        detect(&series, 0, 1.0, Detector::pinned())
    );
}

#[test]
fn a_window_with_fewer_than_the_minimum_does_not_count() {
    // One request a second: a 10 s window holds 10, fewer than the pinned 20. v0.2 reads it.
    let thin = script(&[(10, 0, 1), (100, 1, 1)]);
    // (v0.2 enters at the window 9..=18, one miss in ten: 0.9.)
    assert!(matches!(
        detect(&thin, 0, 1.0, Detector::pinned()),
        Detection::Recovered { ttr_s: 19, .. }
    ));
    assert!(matches!(
        detect_from(&thin, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        Detection::Unreadable { reason } if reason.starts_with("no detector window")
    ));
    // 100 windows end in 9..110; every one is thin, none is empty.
    assert_eq!(
        thin_windows(&thin, 0, thin.len(), 10, Reader::pre_fault()),
        (101, 101, 0)
    );
    // Two a second: 20 a window, exactly the minimum, so it reads.
    let enough = script(&[(10, 0, 2), (100, 2, 2)]);
    assert!(matches!(
        detect_from(&enough, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        Detection::Recovered { ttr_s: 19, .. }
    ));
}

#[test]
fn a_hold_must_read_every_bucket_through_counting_windows() {
    // 10 s at 0, 10 s at 1.0, 25 s with nothing scheduled, then 1.0.
    let series = script(&[(10, 0, 10), (10, 10, 10), (25, 0, 0), (100, 10, 10)]);
    // v0.2: enters at the window 9..=18 (one bucket at 0 of ten: 0.9); the empty windows
    // neither break nor count toward the hold, so it survives: entry end 19.
    assert!(matches!(
        detect(&series, 0, 1.0, Detector::pinned()),
        Detection::Recovered {
            entry_end_s: 19,
            ..
        }
    ));
    // A2: the last counting window before the gap ends at 27 (buckets 18..=27); the window
    // ending at 28 holds bucket 19 alone (10 requests), those ending 29..=44 nothing, the one at
    // 45 bucket 45 alone. The next counting window, ending at 46, starts at 37: buckets 28..=36
    // are read by no counting window, so no hold through them is observed. The first entry
    // after the gap is the window ending at 46 (W = 1.0), whose hold is read throughout: entry
    // end 47.
    assert!(matches!(
        detect_from(&series, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        Detection::Recovered {
            entry_end_s: 47,
            ..
        }
    ));
    // Windows ending 9..=144: 136; thin: those ending 28..=45 (18), of which 29..=44 (16) are
    // empty.
    assert_eq!(
        thin_windows(&series, 0, series.len(), 10, Reader::pre_fault()),
        (136, 18, 16)
    );
    // A gap too long to read, and nothing after it: the data cannot decide.
    let cut_short = script(&[(10, 0, 10), (10, 10, 10), (25, 0, 0), (10, 10, 10)]);
    assert!(matches!(
        detect_from(
            &cut_short,
            0,
            0,
            1.0,
            Detector::pinned(),
            Reader::pre_fault()
        ),
        Detection::Unreadable { .. }
    ));
    // Goodput that stays down is not recovered, readably.
    let down = script(&[(100, 3, 10)]);
    assert_eq!(
        detect_from(&down, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        Detection::NotRecovered
    );
    // A gap shorter than R is read across: the windows on either side overlap it.
    let short = script(&[(10, 0, 10), (10, 10, 10), (5, 0, 0), (100, 10, 10)]);
    assert_eq!(
        detect_from(&short, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault()),
        detect(&short, 0, 1.0, Detector::pinned())
    );
    // A miss inside the hold, in a thin window, is still read by a counting window around it.
    let hidden = script(&[(10, 0, 10), (10, 10, 10), (1, 0, 1), (100, 10, 10)]);
    let Detection::Recovered { entry_end_s, .. } =
        detect_from(&hidden, 0, 0, 1.0, Detector::pinned(), Reader::pre_fault())
    else {
        panic!()
    };
    assert_eq!(entry_end_s, 19);
}

#[test]
fn the_plateau_stops_where_the_recovering_window_starts() {
    // 60 s at 0.6, then 1.0. The pre-fault entry: a window with two buckets at 0.6,
    // (12 + 80) / 100 = 0.92, ends at bucket 67: entry end 68.
    let series = script(&[(60, 6, 10), (200, 10, 10)]);
    let pre = detect(&series, 0, 1.0, Detector::pinned());
    assert!(matches!(
        pre,
        Detection::Recovered {
            entry_end_s: 68,
            ..
        }
    ));
    // v0.2: [10, 68), which holds the recovering window: goodput (50 x 6 + 8 x 10) / 580.
    let Plateau::Estimable { goodput, to_s, .. } = plateau(&series, 0, 600, pre, 10) else {
        panic!()
    };
    assert_eq!(to_s, 68);
    assert!((goodput - 380.0 / 580.0).abs() < 1e-15, "{goodput}");
    // A2: [10, 58), the plateau alone: exactly 0.6.
    // The caller ends it at the start of the recovering window, 68 - R.
    let found = plateau_until(&series, 0, 58, 10, Reader::pre_fault());
    assert_eq!(
        found,
        Plateau::Estimable {
            from_s: 10,
            to_s: 58,
            goodput: 0.6
        }
    );
    // Too few requests in the plateau: not estimable, with the reason.
    let thin = script(&[(40, 0, 0), (200, 1, 1)]);
    assert!(matches!(
        plateau_until(&thin, 0, 15, 10, Reader::pre_fault()),
        Plateau::NotEstimable {
            reason: "plateau shorter than R",
            ..
        }
    ));
    // [10, 50) holds buckets 40..=49: ten requests.
    assert!(matches!(
        plateau_until(&thin, 0, 50, 10, Reader::pre_fault()),
        Plateau::NotEstimable {
            reason: "fewer scheduled requests than a detector window must hold",
            ..
        }
    ));
}

#[test]
fn a_relapse_is_read_only_from_windows_that_count() {
    // Recovered from 20 s; then a dip to 0.5 for 5 s at one request a second (thin), then a
    // dip at ten a second.
    let series = script(&[
        (20, 10, 10),
        (30, 1, 1),
        (5, 0, 1),
        (30, 1, 1),
        (40, 10, 10),
        (10, 5, 10),
        (30, 10, 10),
    ]);
    // v0.2 (every window counts) finds the thin dip: the window ending at 51 holds two misses
    // of ten, 0.8 < 0.85.
    assert_eq!(
        relapse(&series, 20, series.len(), 1.0, Detector::pinned()),
        Some(51)
    );
    // A2 skips it (those windows hold ten requests). The dense dip fills buckets 125..=134 at
    // 0.5: the window ending at 125 reads (90 + 5) / 100 = 0.95, at 126 0.9, at 127 0.85 (not
    // below), at 128 0.8: the relapse.
    assert_eq!(
        relapse_from(
            &series,
            20,
            series.len(),
            1.0,
            Detector::pinned(),
            Reader::pre_fault()
        ),
        Some(128)
    );
}

/// Issue 53 (SPEC §5 "What v0.5 reads"): "no stretch longer than R goes unread" is strict: every
/// bucket of the hold lies in some counting window, so an unread stretch of one bucket leaves
/// the hold unobserved. Buckets of one request (a window of them is thin), and heavy buckets of
/// 20 that make every window holding them count: heavy at 10, 29, 39 and 49 read every bucket
/// of the hold 11-50 (the windows ending at 19 and at 29 meet); moving the second to 30 leaves
/// bucket 20 unread, and the hold is unobserved, though no stretch longer than R is.
#[test]
fn a_hold_reads_every_bucket_or_is_unobserved() {
    let hold_with = |heavy: &[usize]| {
        let series: Vec<Bucket> = (0..80)
            .map(|b| {
                let n = if heavy.contains(&b) { 20 } else { 1 };
                Bucket {
                    met: n,
                    scheduled: n,
                }
            })
            .collect();
        Reader::pre_fault().hold(&series, 10, 50, 10, 0.85, 1.0)
    };
    assert_eq!(hold_with(&[10, 29, 39, 49]), Hold::Held);
    assert_eq!(hold_with(&[10, 30, 39, 49]), Hold::Unobserved);
}

/// Issue 53 (SPEC §5 "What v0.5 reads"): an absence is shown only where the counting windows read
/// every bucket from the start. Buckets of 10 requests (every R-window counts) read everything;
/// a stretch of empty buckets longer than R leaves buckets no counting window reads, and a
/// stretch at the series' end that no counting window reaches is unread too.
#[test]
fn an_absence_is_shown_only_where_every_bucket_was_read() {
    let reader = Reader::pre_fault();
    let full = script(&[(60, 5, 10)]);
    assert!(every_bucket_read(&full, 0, 10, reader));
    assert!(every_bucket_read(&full, 25, 10, reader));
    // Buckets 20-39 empty: windows ending 20-27 hold two or more full buckets of 11-19 and
    // count (they read to 27); none ending 28-40 holds 20; the one ending 41 reads 32-41, so
    // 28-31 are read by none.
    let gap = script(&[(20, 5, 10), (20, 0, 0), (20, 5, 10)]);
    assert!(!every_bucket_read(&gap, 0, 10, reader));
    // A gap of R buckets or less is read by the windows either side of it.
    let short = script(&[(20, 5, 10), (8, 0, 0), (32, 5, 10)]);
    assert!(every_bucket_read(&short, 0, 10, reader));
    // Thin to the end: unread.
    let tail = script(&[(40, 5, 10), (20, 0, 0)]);
    assert!(!every_bucket_read(&tail, 0, 10, reader));
}

/// Issue 53 (SPEC §5 "What v0.5 reads"): the thin count includes the empty windows, which are
/// also given apart. Of the R-windows (R = 2) ending at buckets 1 to 5 over scheduled counts
/// [10, 10, 1, 1, 0, 0], the one ending at 1 holds 20 and counts; those ending at 2 to 5 hold
/// 11, 2, 1 and 0: four thin (under 20), one of them empty.
#[test]
fn thin_windows_include_the_empty_ones() {
    let series = script(&[(2, 10, 10), (2, 1, 1), (2, 0, 0)]);
    assert_eq!(
        thin_windows(&series, 0, 6, 2, Reader::pre_fault()),
        (5, 4, 1)
    );
}

/// Issue 53 (SPEC §5 "What v0.5 reads"): the plateau starts on the bucket grid, R after the
/// anchor's bucket (the first that starts at or after the fire anchor), not R after the anchor's
/// instant: with the anchor's bucket 20 and R 10, bucket 30.
#[test]
fn the_plateau_starts_on_the_grid() {
    let series = script(&[(120, 5, 10)]);
    assert_eq!(
        plateau_until(&series, 20, 80, 10, Reader::pre_fault()),
        Plateau::Estimable {
            from_s: 30,
            to_s: 80,
            goodput: 0.5
        }
    );
}
