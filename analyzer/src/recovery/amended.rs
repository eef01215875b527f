//! How a spec version reads recovery (SPEC §5, §11): v0.1 and v0.2's original rules, or
//! amendment A2's (v0.3). Every rule that A2 changed is a method of [`RecoveryReading`], so the report's
//! code asks "the pre-fault detection", "the plateau", "a relapse", never the version.
//!
//! A2, in short: a window counts only when it holds `recovery.window_min_requests` scheduled
//! requests, and a hold only when every window in it counts; the pre-fault baseline cannot return
//! before the fault's removal is confirmed; the equilibrium is entered inside a two-sided band;
//! the plateau stops where the recovering window starts; relapse is watched to the end of the
//! observed series. In the dev profile, where R divided by the time factor would hold a request
//! or two, R and H are widened together (never past their experiment values) until a window holds
//! the minimum at the baseline's scheduled rate, and the report says so.

use percentes_formats::config::{FaultVariant, Profile};
use percentes_formats::journal::records::EventKind;
use percentes_formats::pins;
use percentes_formats::spec::{Absence, Claims};

use crate::estimate::recovery::{self, Bucket, Detection, Detector, Plateau, Reader};
use crate::load::Run;
use crate::model::Boundary;

use super::seconds;

/// In the dev profile, R is widened until a window is expected to hold this share of the pinned
/// minimum (A2): at 150 % a Poisson count at the baseline's rate falls below the minimum in about
/// 4 windows in 100 (P(N < 20) for a mean of 30).
pub(crate) const DEV_TARGET_PERCENT: u64 = 150;

/// How one spec version's recovery rules read one run (the version's rules themselves are
/// `percentes_formats::spec::Rules`, the one table).
#[derive(Clone, Debug)]
pub(crate) struct RecoveryReading {
    /// `None` under v0.1 and v0.2.
    pub(crate) amended: Option<Plan>,
}

impl Plan {
    /// `found` as claimed: under A4 an absence ("not recovered", "not settled") only where the
    /// counting windows read every bucket from `start` on; otherwise not determined.
    fn shown(
        &self,
        found: Detection,
        series: &[Bucket],
        start: usize,
        detector: Detector,
        reader: Reader,
    ) -> Detection {
        let unread =
            || !recovery::every_bucket_read(series, start, detector.window_s as usize, reader);
        match found {
            Detection::NotRecovered if self.absence == Absence::EveryBucketRead && unread() => {
                Detection::Unreadable {
                    reason: "no counting window entered, but a stretch after the start is read by no counting window, so a recovery there could not be seen (A4)",
                }
            }
            other => other,
        }
    }
}

/// A2's plan for one run.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// How many times R and H were widened (1: not at all).
    pub(crate) stretch: u64,
    /// The confirmed removal, ns from the epoch, and its evidence (or why there is none).
    pub(crate) removal_ns: Option<u64>,
    /// What confirmed the removal.
    pub(crate) removal_evidence: String,
    /// The first bucket a pre-fault window may start in (after the removal).
    pub(crate) from: usize,
    /// When an absence is claimed (A4: only where every bucket was read).
    pub(crate) absence: Absence,
}

impl RecoveryReading {
    /// v0.1 and v0.2.
    pub(crate) fn original() -> RecoveryReading {
        RecoveryReading { amended: None }
    }

    /// The pinned detector under these rules (widened under A2 in the dev profile).
    pub(crate) fn detector(&self) -> Detector {
        self.cell(Detector::pinned())
    }

    /// One sweep cell's detector under these rules.
    pub(crate) fn cell(&self, cell: Detector) -> Detector {
        match &self.amended {
            Some(plan) => Detector {
                window_s: cell.window_s * plan.stretch,
                hold_s: cell.hold_s * plan.stretch,
                ..cell
            },
            None => cell,
        }
    }

    /// Recovery to the pre-fault baseline `g` (or a component's to its own baseline share).
    pub(crate) fn pre_fault(
        &self,
        series: &[Bucket],
        anchor: usize,
        g: f64,
        detector: Detector,
    ) -> Detection {
        match &self.amended {
            None => recovery::detect(series, anchor, g, detector),
            Some(plan) if plan.removal_ns.is_none() => Detection::NotRecovered,
            Some(plan) => {
                let found = recovery::detect_from(
                    series,
                    anchor,
                    plan.from,
                    g,
                    detector,
                    Reader::pre_fault(),
                );
                plan.shown(
                    found,
                    series,
                    anchor.max(plan.from),
                    detector,
                    Reader::pre_fault(),
                )
            }
        }
    }

    /// What the original rule reads where A2 refuses it before the removal: the end bucket of an
    /// entry that came before the removal (or with no removal at all).
    pub(crate) fn early(&self, series: &[Bucket], anchor: usize, g: f64) -> Option<u64> {
        let plan = self.amended.as_ref()?;
        // The v0.2 reading itself: the pinned detector, unwidened, on every window.
        let detector = Detector::pinned();
        match recovery::detect(series, anchor, g, detector) {
            Detection::Recovered { entry_end_s, .. }
                if plan.removal_ns.is_none()
                    || (entry_end_s as usize) < plan.from + detector.window_s as usize =>
            {
                Some(entry_end_s)
            }
            _ => None,
        }
    }

    /// The plateau (the single-replica equilibrium's window).
    pub(crate) fn plateau(
        &self,
        series: &[Bucket],
        anchor: usize,
        timeout: usize,
        pre: Detection,
        window: usize,
    ) -> Plateau {
        let Some(plan) = &self.amended else {
            return recovery::plateau(series, anchor, timeout, pre, window);
        };
        let from = anchor + window;
        let end = match (pre, plan.removal_ns) {
            (Detection::Unreadable { .. }, None) => {
                return Plateau::NotEstimable {
                    from_s: from as u64,
                    to_s: from as u64,
                    reason: "its end is not known: the fault's removal was not confirmed and the recovery to the pre-fault baseline is not determined",
                };
            }
            (Detection::Recovered { entry_end_s, .. }, _) => {
                (entry_end_s as usize).saturating_sub(window)
            }
            _ => usize::MAX,
        };
        let end = end.min(plan.from).min(anchor + timeout);
        recovery::plateau_until(series, anchor, end, window, Reader::pre_fault())
    }

    /// Time to the equilibrium `goodput` of the plateau ending at bucket `to`.
    pub(crate) fn equilibrium(
        &self,
        series: &[Bucket],
        anchor: usize,
        to: usize,
        goodput: f64,
        detector: Detector,
    ) -> Detection {
        match &self.amended {
            None => recovery::detect(series, anchor, goodput, detector),
            // The hold must be seen inside the plateau: past it the second replica is back.
            Some(plan) => {
                let plateau = &series[..to.min(series.len())];
                let found = recovery::detect_from(
                    plateau,
                    anchor,
                    anchor,
                    goodput,
                    detector,
                    Reader::equilibrium(),
                );
                plan.shown(found, plateau, anchor, detector, Reader::equilibrium())
            }
        }
    }

    /// A relapse after the recovery entered at `entry_end` (v0.2: within the timeout; A2: to the
    /// end of the observed series, counting windows only).
    pub(crate) fn relapse(
        &self,
        series: &[Bucket],
        entry_end: usize,
        timeout_end: usize,
        g: f64,
        detector: Detector,
    ) -> Option<usize> {
        match &self.amended {
            None => recovery::relapse(series, entry_end, timeout_end, g, detector),
            Some(_) => recovery::relapse_from(
                series,
                entry_end,
                series.len(),
                g,
                detector,
                Reader::pre_fault(),
            ),
        }
    }
}

/// A2's plan: the dev widening from the baseline's scheduled rate (`per_bucket`, requests per
/// bucket: observed under v0.3, configured under v0.4), and the confirmed removal.
pub(crate) fn plan(
    run: &Run,
    per_bucket: Option<f64>,
    (bucket_ns, absence): (u64, Absence),
    decomposition: &[Boundary],
) -> Plan {
    let config = &run.config;
    let min = pins::value::RECOVERY_WINDOW_MIN_REQUESTS as u64;
    let window = pins::value::RECOVERY_WINDOW_S as u64;
    // Scheduled requests per pinned window at the baseline's rate.
    let per_window = per_bucket.map(|per| per * window as f64);
    // The target is half again the minimum, so that a Poisson count at the baseline's rate falls
    // short of the minimum in a few windows in a hundred, not in half of them.
    let target = (min * DEV_TARGET_PERCENT / 100) as f64;
    let stretch = match (config.profile, per_window) {
        (Profile::Dev, Some(per)) if per > 0.0 && per < target => {
            ((target / per).ceil() as u64).clamp(1, u64::from(config.time_factor.max(1)))
        }
        _ => 1,
    };
    let (removal_ns, removal_evidence) = removal(run, decomposition);
    let from = removal_ns.map_or(usize::MAX, |at| {
        usize::try_from(at.div_ceil(bucket_ns.max(1))).unwrap_or(usize::MAX)
    });
    Plan {
        stretch,
        removal_ns,
        removal_evidence,
        from,
        absence,
    }
}

/// The confirmed removal of the fault (A2): the armed expiry or a removal the journal records
/// (black-hole, degradation), or the replacement answering (clean delete: replica-ready, else
/// traffic-restored, whichever the journal shows first).
fn removal(run: &Run, decomposition: &[Boundary]) -> (Option<u64>, String) {
    let events = &run.events;
    let fired = events.first(EventKind::FaultFired).map(|e| e.at_ns);
    match run.config.fault.variant {
        FaultVariant::CleanDelete => {
            let at = |name: &str| {
                decomposition
                    .iter()
                    .find(|b| b.boundary == name)
                    .and_then(|b| b.at_ns)
            };
            match (at("replica-ready"), at("traffic-restored")) {
                (Some(r), t) if t.is_none_or(|t| r <= t) => (
                    Some(r),
                    format!(
                        "replica-ready at {:.3} s: the replacement answered its direct probe",
                        seconds(r)
                    ),
                ),
                (_, Some(t)) => (
                    Some(t),
                    format!(
                        "traffic-restored at {:.3} s: the replacement served a request through the service",
                        seconds(t)
                    ),
                ),
                _ => (
                    None,
                    "not confirmed: no replica-ready probe and no request served by the replacement; a direct probe of the victim (target.replica_addresses) would confirm it".into(),
                ),
            }
        }
        _ => {
            let removed = [EventKind::FaultRemoved, EventKind::FaultExpired]
                .into_iter()
                .filter_map(|k| {
                    events
                        .all(k)
                        .find(|e| fired.is_some_and(|f| e.at_ns >= f))
                        .map(|e| (e.at_ns, k))
                })
                .min_by_key(|(at, _)| *at);
            match removed {
                Some((at, kind)) => (
                    Some(at),
                    format!(
                        "{} event at {:.3} s",
                        if kind == EventKind::FaultRemoved {
                            "fault-removed"
                        } else {
                            "fault-expired"
                        },
                        seconds(at)
                    ),
                ),
                None => (
                    None,
                    "not confirmed: the journal carries no fault-removed or fault-expired event after the fire".into(),
                ),
            }
        }
    }
}

/// What A2 says beside the figures of one run.
pub(crate) struct Flags<'a> {
    pub(crate) run: &'a Run,
    pub(crate) series: &'a [Bucket],
    pub(crate) anchor: usize,
    pub(crate) anchor_ns: u64,
    pub(crate) bucket_ns: u64,
    pub(crate) baseline: Option<f64>,
    pub(crate) detector: Detector,
    pub(crate) rules: &'a RecoveryReading,
    pub(crate) plan: &'a Plan,
}

impl Flags<'_> {
    fn after_anchor_s(&self, bucket_end: u64) -> f64 {
        seconds((bucket_end * self.bucket_ns).saturating_sub(self.anchor_ns))
    }

    /// The pre-fault reading's flags: an entry the original rule reads before the removal, a
    /// removal never confirmed, a relapse after the recovery.
    pub(crate) fn pre_fault(&self, pre: Detection, relapse_at: Option<usize>) -> Vec<String> {
        let mut flags = Vec::new();
        let removal = match self.plan.removal_ns {
            Some(at) => format!("the removal was confirmed at {:.3} s", seconds(at)),
            None => "the fault's removal was never confirmed".into(),
        };
        if let Some(end) = self
            .baseline
            .and_then(|g| self.rules.early(self.series, self.anchor, g))
        {
            flags.push(format!(
                "early detection, not counted: the v0.2 detector entered {:.3} s after the fire, in a window that began before the removal ({removal}); A2 counts no recovery to the pre-fault baseline before the fault has ended (§5)",
                self.after_anchor_s(end)
            ));
        }
        if self.plan.removal_ns.is_none() && !matches!(pre, Detection::NoBaseline) {
            flags.push(format!(
                "no recovery to the pre-fault baseline can be claimed: {} ({})",
                removal, self.plan.removal_evidence
            ));
        }
        if let Some(t) = relapse_at {
            flags.push(format!(
                "relapsed: goodput fell below the exit threshold again in the window ending {:.3} s after the fire; this TTR understates the disruption",
                self.after_anchor_s(t as u64 + 1)
            ));
        }
        flags
    }

    /// The equilibrium reading's flag: a TTR equal to R is said to be what the data show.
    pub(crate) fn equilibrium(&self, ttr: &crate::model::Ttr) -> Vec<String> {
        let r_s = seconds(self.detector.window_s * self.bucket_ns);
        let at_r = ttr
            .ttr_s
            .is_some_and(|t| (t - r_s).abs() < seconds(self.bucket_ns) / 2.0);
        if at_r {
            vec![format!(
                "TTR equals R ({r_s:.3} s) because the first full window after the fire was already inside the band around the plateau and stayed there: the survivor settled at once, so R is the shortest reading the detector can give"
            )]
        } else {
            Vec::new()
        }
    }

    /// The A2 section of the report, with the fault-fidelity evidence (`fidelity::table`).
    pub(crate) fn report(
        &self,
        valid: bool,
        fidelity: Vec<crate::model::Evidence>,
    ) -> crate::model::Amended {
        let min = pins::value::RECOVERY_WINDOW_MIN_REQUESTS as u64;
        let window = self.detector.window_s as usize;
        let (total, thin, empty) = recovery::thin_windows(
            self.series,
            self.anchor,
            self.series.len(),
            window,
            Reader::pre_fault(),
        );
        let config = &self.run.config;
        let mut notes = Vec::new();
        let pinned = Detector::pinned();
        if self.plan.stretch > 1 {
            notes.push(format!(
                "dev profile: R and H widened {}x, from {:.3} s and {:.3} s to {:.3} s and {:.3} s, so that a detector window is expected to hold {} % of the pinned {min} requests at the baseline's scheduled rate; never wider than their experiment values (A2)",
                self.plan.stretch,
                seconds(pinned.window_s * self.bucket_ns),
                seconds(pinned.hold_s * self.bucket_ns),
                seconds(self.detector.window_s * self.bucket_ns),
                seconds(self.detector.hold_s * self.bucket_ns),
                DEV_TARGET_PERCENT,
            ));
        }
        if thin > 0 {
            notes.push(format!(
                "{thin} of the {total} detector windows after the fire held fewer than {min} scheduled requests ({empty} held none): they count for nothing, neither entering nor holding a recovery (A2)"
            ));
        }
        if config.profile == Profile::Dev {
            let timeout_ms = seconds(config.duration_ns(&pins::CLIENT_TIMEOUT_S)) * 1e3;
            let ttft_ms = pins::value::SLO_TTFT_MS as f64;
            if timeout_ms < ttft_ms {
                notes.push(format!(
                    "dev profile: the SLO thresholds (TTFT {} ms, end-to-end {} ms) are not time-scaled, and the dev client timeout is {timeout_ms:.0} ms: every request that completes meets the SLO, so goodput here is the completed share and a slowdown short of the timeout cannot show (§P)",
                    pins::value::SLO_TTFT_MS,
                    pins::value::SLO_E2E_MS
                ));
            }
        }
        crate::model::Amended {
            withheld: (!valid).then(|| {
                "the run is invalid (§9, §10): no recovery figure is published; the timeline and the fault-fidelity evidence stay as the diagnosis".to_owned()
            }),
            removal_s: self.plan.removal_ns.map(seconds),
            removal_evidence: self.plan.removal_evidence.clone(),
            window_min_requests: min,
            windows: [total, thin, empty],
            notes,
            fidelity,
        }
    }
}

/// An invalid run's recovery report under A2: the timeline and the evidence stay, every recovery
/// figure goes.
pub(crate) fn withhold(
    mut report: crate::model::RecoveryReport,
    claims: Claims,
) -> crate::model::RecoveryReport {
    let withheld = || crate::model::Ttr {
        status: "withheld".into(),
        ttr_s: None,
        at_s: None,
        text: "withheld: the run is invalid (§9)".into(),
        flags: Vec::new(),
        bound_s: None,
    };
    report.to_pre_fault = withheld();
    report.to_equilibrium = withheld();
    report.equilibrium.goodput = None;
    report.equilibrium.note = "withheld: the run is invalid (§9)".into();
    report.pre_fault_baseline.goodput = None;
    report.relapse = None;
    report.deficit_goodput_s = None;
    report.sweep.clear();
    report.components.clear();
    report.series.clear();
    // A3: no recovery reading anywhere, the sweep's sentence and the survivor's spans included.
    if claims == Claims::Supported {
        report.sweep_note = "withheld: the run is invalid (§9)".into();
        report.survivor.clear();
        report.equilibrium.from_s = report.fire_anchor_s;
        report.equilibrium.to_s = report.fire_anchor_s;
        report.caveats.clear();
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buckets of 10 scheduled requests, `met` of them meeting the SLO, one per value.
    fn series(goodput_tenths: &[u64]) -> Vec<Bucket> {
        goodput_tenths
            .iter()
            .map(|&met| Bucket { met, scheduled: 10 })
            .collect()
    }

    fn amended() -> RecoveryReading {
        RecoveryReading {
            amended: Some(Plan {
                stretch: 1,
                removal_ns: None,
                removal_evidence: String::new(),
                from: 0,
                absence: Absence::EveryBucketRead,
            }),
        }
    }

    /// Issue 53 items 4 and 5 (SPEC §5 "What v0.5 reads"): the equilibrium is read inside the
    /// plateau, its entering window and its hold both. The fire at bucket 20, the plateau's
    /// goodput 0.5 to bucket 80, the pinned R 10 and H 30. A survivor that comes into the band
    /// at bucket 60 cannot hold it for H before the plateau ends: *not determined* (the plateau
    /// ended first), not *not settled*; one that never comes into it has *not settled*; one
    /// that comes in at bucket 30 settles with the window of buckets 30-39 (its last bucket,
    /// 39, is 19 after the anchor's).
    #[test]
    fn the_equilibrium_is_read_inside_the_plateau() {
        let rules = amended();
        let detector = Detector::pinned();
        let at = |into_band: usize| {
            let mut tenths = vec![10u64; 20];
            tenths.extend((20..120).map(|b| if b >= into_band { 5 } else { 1 }));
            rules.equilibrium(&series(&tenths), 20, 80, 0.5, detector)
        };
        assert!(
            matches!(at(60), Detection::Unreadable { .. }),
            "a hold cut by the plateau's end: {:?}",
            at(60)
        );
        assert_eq!(at(200), Detection::NotRecovered);
        assert_eq!(
            at(30),
            Detection::Recovered {
                ttr_s: 19,
                entry_end_s: 39
            }
        );
        // An entering window that would end past the plateau's end does not enter: the band
        // reached at bucket 75 gives no window inside the plateau, and none after it counts.
        assert!(!matches!(at(75), Detection::Recovered { .. }));
    }

    /// Issue 53 (v0.3's not-recovered): under A4 a survivor that never comes into the band is
    /// *not settled* only where the counting windows read the whole plateau; one whose plateau
    /// has a stretch of buckets too thin to count is not determined, and under v0.4's rule
    /// still not settled.
    #[test]
    fn an_absence_over_an_unread_stretch_is_not_determined() {
        let detector = Detector::pinned();
        let mut tenths: Vec<Bucket> = series(&[10u64; 20]);
        tenths.extend(series(&[1u64; 100]));
        // Buckets 40-59 hold nothing: no counting window reads 49 or 50.
        for b in &mut tenths[40..60] {
            *b = Bucket {
                met: 0,
                scheduled: 0,
            };
        }
        let v5 = amended();
        assert!(matches!(
            v5.equilibrium(&tenths, 20, 80, 0.5, detector),
            Detection::Unreadable { .. }
        ));
        let mut v4 = amended();
        if let Some(plan) = &mut v4.amended {
            plan.absence = Absence::SomeWindowCounted;
        }
        assert_eq!(
            v4.equilibrium(&tenths, 20, 80, 0.5, detector),
            Detection::NotRecovered
        );
        // Read everywhere, the absence stands under A4.
        let read = {
            let mut s = series(&[10u64; 20]);
            s.extend(series(&[1u64; 100]));
            s
        };
        assert_eq!(
            v5.equilibrium(&read, 20, 80, 0.5, detector),
            Detection::NotRecovered
        );
    }
}
