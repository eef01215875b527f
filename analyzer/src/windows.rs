//! Windows by intended time (SPEC §3 "Windows").
//!
//! A request belongs to the window its intended send time t_i falls in, whatever its outcome
//! time. For a fault run, with W the end of warm-up, I = T_inject, A = the fire anchor (the
//! earlier of I and the recorded fire), tau the client timeout, T the recovery timeout and E the
//! schedule's end:
//!
//! | window | from | to | |
//! |---|---|---|---|
//! | warm-up | 0 | W | discarded |
//! | baseline | W | A - tau | the only window anything baseline-derived reads |
//! | guard | A - tau | I | full metric set, feeds nothing baseline-derived |
//! | fault | I | the recovery boundary | |
//! | recovery | the recovery boundary | I + T | empty when there was no recovery |
//! | cooldown | I + T | E | |
//!
//! The recovery boundary is the end of the detector window that entered recovery to the
//! pre-fault baseline (SPEC §5, pinned R, H, entry and exit), when that happened before I + T;
//! otherwise I + T, and the recovery window is empty. A run without a fault has warm-up,
//! measurement and cooldown. Every boundary is in ns from the epoch, and windows tile [0, E).

use serde::Serialize;

/// Which window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Discarded (§1).
    Warmup,
    /// A run without a fault: one measured window.
    Measurement,
    /// Pre-fault, ending one timeout before the fire anchor (§3).
    Baseline,
    /// The last timeout before the fire: reported on its own, feeds nothing baseline-derived.
    Guard,
    /// From T_inject to the recovery boundary (or the recovery timeout).
    Fault,
    /// From the recovery boundary to the recovery timeout.
    Recovery,
    /// After the measured span.
    Cooldown,
}

impl Kind {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Warmup => "warm-up",
            Kind::Measurement => "measurement",
            Kind::Baseline => "baseline",
            Kind::Guard => "guard",
            Kind::Fault => "fault",
            Kind::Recovery => "recovery",
            Kind::Cooldown => "cooldown",
        }
    }

    /// Whether the window is measured: the client-validity gate (§2) reads these, and the
    /// discarded warm-up and the cooldown are not among them.
    pub fn measured(self) -> bool {
        !matches!(self, Kind::Warmup | Kind::Cooldown)
    }
}

/// One window: `[start_ns, end_ns)` of intended time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Which window.
    pub kind: Kind,
    /// Its start, ns from the epoch (inclusive).
    pub start_ns: u64,
    /// Its end, ns from the epoch (exclusive).
    pub end_ns: u64,
}

impl Window {
    /// Whether a request intended at `intended_ns` belongs to it.
    pub fn contains(&self, intended_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&intended_ns)
    }
    /// Its length, ns.
    pub fn duration_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// The timeline the windows are cut from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeline {
    /// End of the warm-up phase.
    pub warmup_end_ns: u64,
    /// End of the measured phases: the measurement phase without a fault, I + T with one.
    pub measured_end_ns: u64,
    /// End of the whole schedule.
    pub schedule_end_ns: u64,
    /// The client timeout tau.
    pub timeout_ns: u64,
    /// For a fault run: T_inject and the recorded fire.
    pub fault: Option<FaultTimes>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// When the fault was planned and when it fired.
pub struct FaultTimes {
    /// T_inject, ns from the epoch.
    pub inject_ns: u64,
    /// The first recorded fire, if the fault fired.
    pub fired_ns: Option<u64>,
}

impl FaultTimes {
    /// The fire anchor: the earlier of T_inject and the recorded fire (T_inject if it never fired).
    pub fn anchor_ns(&self) -> u64 {
        self.fired_ns
            .map_or(self.inject_ns, |f| f.min(self.inject_ns))
    }
}

/// Cuts the windows. `recovered_at_ns` is the recovery boundary found by the detector, if any.
pub fn cut(timeline: &Timeline, recovered_at_ns: Option<u64>) -> Vec<Window> {
    let end = timeline.schedule_end_ns;
    let warm = timeline.warmup_end_ns.min(end);
    let window = |kind, start_ns: u64, end_ns: u64| Window {
        kind,
        start_ns,
        end_ns: end_ns.max(start_ns),
    };
    let measured_end = timeline.measured_end_ns.clamp(warm, end);
    let Some(fault) = timeline.fault else {
        return vec![
            window(Kind::Warmup, 0, warm),
            window(Kind::Measurement, warm, measured_end),
            window(Kind::Cooldown, measured_end, end),
        ];
    };
    let inject = fault.inject_ns.clamp(warm, end);
    let baseline_end = fault
        .anchor_ns()
        .saturating_sub(timeline.timeout_ns)
        .clamp(warm, inject);
    let phase_end = measured_end.max(inject);
    let boundary = recovered_at_ns.map_or(phase_end, |r| r.clamp(inject, phase_end));
    vec![
        window(Kind::Warmup, 0, warm),
        window(Kind::Baseline, warm, baseline_end),
        window(Kind::Guard, baseline_end, inject),
        window(Kind::Fault, inject, boundary),
        window(Kind::Recovery, boundary, phase_end),
        window(Kind::Cooldown, phase_end, end),
    ]
}

/// The window `intended_ns` falls in, by position in `windows` (they tile the schedule).
pub fn locate(windows: &[Window], intended_ns: u64) -> Option<usize> {
    let i = windows.partition_point(|w| w.end_ns <= intended_ns);
    (i < windows.len() && windows[i].contains(intended_ns)).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn fault_timeline(fired: Option<u64>) -> Timeline {
        Timeline {
            warmup_end_ns: 60 * S,
            measured_end_ns: 960 * S,
            schedule_end_ns: 1020 * S,
            timeout_ns: 30 * S,
            fault: Some(FaultTimes {
                inject_ns: 360 * S,
                fired_ns: fired,
            }),
        }
    }

    fn bounds(windows: &[Window]) -> Vec<(Kind, u64, u64)> {
        windows
            .iter()
            .map(|w| (w.kind, w.start_ns / S, w.end_ns / S))
            .collect()
    }

    #[test]
    fn the_pinned_experiment_cuts_as_spec_3_says() {
        // The fault fired 200 ms late: the anchor is T_inject itself.
        let windows = cut(&fault_timeline(Some(360 * S + 200_000_000)), Some(500 * S));
        assert_eq!(
            bounds(&windows),
            vec![
                (Kind::Warmup, 0, 60),
                (Kind::Baseline, 60, 330),
                (Kind::Guard, 330, 360),
                (Kind::Fault, 360, 500),
                (Kind::Recovery, 500, 960),
                (Kind::Cooldown, 960, 1020),
            ]
        );
        // They tile the schedule with no gap and no overlap.
        assert!(windows.windows(2).all(|p| p[0].end_ns == p[1].start_ns));
    }

    #[test]
    fn an_early_fire_moves_the_baseline_end_but_no_window_straddles_t_inject() {
        let windows = cut(&fault_timeline(Some(355 * S)), None);
        assert_eq!(
            windows[1].end_ns,
            325 * S,
            "baseline ends tau before the anchor"
        );
        assert_eq!(
            windows[2].end_ns,
            360 * S,
            "the guard still ends at T_inject"
        );
        // No recovery: the fault window runs to the end of the phase, the recovery window is empty.
        assert_eq!((windows[3].start_ns, windows[3].end_ns), (360 * S, 960 * S));
        assert_eq!(windows[4].duration_ns(), 0);
        for w in &windows {
            assert!(!(w.start_ns < 360 * S && w.end_ns > 360 * S), "{w:?}");
        }
    }

    #[test]
    fn membership_is_by_intended_time_at_the_edges() {
        let windows = cut(&fault_timeline(None), Some(400 * S));
        assert_eq!(locate(&windows, 0), Some(0));
        assert_eq!(locate(&windows, 60 * S - 1), Some(0));
        assert_eq!(locate(&windows, 60 * S), Some(1));
        assert_eq!(
            locate(&windows, 330 * S),
            Some(2),
            "the guard starts at A - tau"
        );
        assert_eq!(
            locate(&windows, 360 * S),
            Some(3),
            "T_inject opens the fault window"
        );
        assert_eq!(locate(&windows, 400 * S), Some(4));
        assert_eq!(locate(&windows, 1020 * S), None, "past the schedule");
    }

    #[test]
    fn a_run_without_a_fault_has_warmup_measurement_and_cooldown() {
        let timeline = Timeline {
            warmup_end_ns: 6 * S,
            measured_end_ns: 36 * S,
            schedule_end_ns: 42 * S,
            timeout_ns: 3 * S,
            fault: None,
        };
        let windows = cut(&timeline, None);
        assert_eq!(
            bounds(&windows),
            vec![
                (Kind::Warmup, 0, 6),
                (Kind::Measurement, 6, 36),
                (Kind::Cooldown, 36, 42)
            ]
        );
    }
}
