//! A loaded run analyzed under one spec version: windows, per-window metrics, the completion
//! curve and its quantile readings, tail intervals, the SLO, in-flight loss at fire, the
//! client-validity gate and the coordinated-omission audit (SPEC §2-§4, §7, §9).
//!
//! Everything here is a pure function of the [`Run`] and the spec version, so the same journal
//! gives the same [`Report`] on any machine. Rendering is in [`crate::report`].

use percentes_formats::config::{FaultVariant, TargetKind};
use percentes_formats::journal::hex;
use percentes_formats::journal::records::EventKind;
use percentes_formats::pins;
use percentes_formats::spec::{
    Claims, FirstTokenPath, RecoveryRules, RefusalWords, Rules, Spec, StreamReading,
};

use crate::estimate::incidence::Method;
use crate::estimate::quantile::Printing;
use crate::estimate::recovery::Detection;
use crate::estimate::slo::Slo;
use crate::load::Run;
use crate::windows::{self, FaultTimes, Kind, Timeline, Window};
use crate::{Files, JournalFile};

mod artifact;
mod audit;
mod change;
mod client_gate;
mod columns;
mod declared;
mod distribution;
mod path;
mod rows;
mod segment;
mod stopped;
mod streams;
mod tokens;
mod window;
mod workload;

use crate::model::{
    Analyzer, Gate, Provenance, Report, TimelineReport, Validity, WindowBounds, WindowReport,
    REPORT_SCHEMA,
};
pub use distribution::{distribution, QUANTILES, TAIL_QUANTILES};
pub use rows::{latency_samples, LatencySamples};
use rows::{seconds, slo_input};
use window::{in_flight_at, inter_chunk, window_report, INTER_CHUNK};

/// Analyzes `run` under the rules of spec version `spec`.
///
/// `file` is the journal `run` was loaded from: the pooled inter-chunk gaps are read from it in a
/// second pass once the windows are known, so they are never held per request.
pub fn analyze<'a>(
    run: &Run,
    files: impl Into<Files<'a>>,
    spec: Spec,
    analyzer: &Analyzer,
) -> Report {
    let files = files.into();
    // The one place the version becomes its rules: everything below asks `rules`.
    let rules = Rules::of(spec);
    let method = Method::of(&rules);
    let requests = &run.requests;
    let config = &run.config;
    let horizon_ns = config.duration_ns(&pins::CLIENT_TIMEOUT_S);
    let timeline = timeline_of(run);
    let slo = Slo::pinned();

    // Per row: whether the SLO was met (for goodput and the recovery boundary).
    let met: Vec<bool> = (0..requests.len())
        .map(|row| slo.met_by(&slo_input(requests, row, rules.streams)))
        .collect();
    // A spilled table's pages are handed back after each whole-run pass (`Requests::release`),
    // so that what stays resident is what the running statistic reads.
    requests.release();

    // The recovery boundary: the pinned detector against the baseline's goodput (§5).
    let provisional = windows::cut(&timeline, None);
    let (recovered_at_ns, mut recovery_note) =
        recovery_boundary(run, &met, &timeline, provisional[1], &rules);
    let cut = windows::cut(&timeline, recovered_at_ns);
    requests.release();

    // Rows per window, by intended time.
    let mut rows_of: Vec<Vec<usize>> = vec![Vec::new(); cut.len()];
    for row in 0..requests.len() {
        if let Some(w) = windows::locate(&cut, requests.intended_ns[row]) {
            rows_of[w].push(row);
        }
    }
    // A4: the requests a stopped run never sent leave every window; the figures' windows end
    // at the stop (§3 "A run stopped before its end").
    let (cut_figures, stop) = stopped::apply(requests, &rules, &cut, &mut rows_of);

    let skews = client_gate::measured_skews(run, &cut, &rows_of, rules.skew);
    let mut validity = client_gate::evaluate(run, &cut, &skews, &rules);
    validity.gates.extend(crate::gates::evaluate(
        run,
        &cut,
        &rows_of,
        &met,
        rules.claims,
    ));
    validity.gates.push(crate::escape::containment_gate(run));
    validity
        .gates
        .extend(crate::gates::capacity::gate(run, rules.capacity));
    validity.valid = validity.gates.iter().all(Gate::holds);
    requests.release();
    let mut audit = audit::audit(run, &cut, &skews, &validity, &rules);
    requests.release();
    // Eight bytes a measured request, not needed by anything after the audit.
    drop(skews);
    if let Some(artifact) = audit.artifact.as_mut() {
        artifact.connection_waits = Some(artifact::connection_waits(
            client_gate::connection_waits(run, &cut, &rows_of),
        ));
    }
    let mut not_publishable = run.not_publishable.clone();
    let stopped = stop.map(|s| stopped_report(run, s));
    if let Some(s) = &stopped {
        not_publishable.insert(0, format!("NOT PUBLISHABLE: {}", s.said));
    }
    if !validity.valid {
        not_publishable.push(format!(
            "NOT PUBLISHABLE: the run is invalid (§9, §10): {} did not pass",
            failed_gates(&validity)
        ));
    }
    // An invalid run's statistics, computed only when asked for as a diagnosis (§9).
    let diagnosis = !validity.valid && analyzer.diagnose;
    if diagnosis {
        not_publishable.push(
            "NOT PUBLISHABLE: the statistics of this invalid run are shown for diagnosis only (--diagnose); a run that fails a gate supports no published number (§9)".into(),
        );
    }
    let shown = validity.valid || diagnosis;
    if config.target.tls.insecure {
        not_publishable.push(
            "TLS certificate verification was OFF for this run (target.tls.insecure = true)".into(),
        );
    }

    let baseline_rows = cut
        .iter()
        .position(|w| w.kind == Kind::Baseline)
        .map(|i| rows_of[i].as_slice())
        .unwrap_or(&[]);
    let (windows_out, withheld) = if shown {
        let reports = window_reports(
            run,
            files.0,
            (&cut_figures, &rows_of),
            baseline_rows,
            (method, horizon_ns, &rules),
        );
        (reports, None)
    } else {
        (
            Vec::new(),
            Some(format!(
                "the run is invalid (§9, §10): {} did not pass; no statistic is published",
                failed_gates(&validity)
            )),
        )
    };
    let (segments, segments_note) = match (&analyzer.by[..], shown) {
        ([], _) => (Vec::new(), None),
        (by, true) => {
            match segment::reports(run, &cut_figures, &rows_of, by, method, horizon_ns, &rules) {
                Ok(segments) => (segments, None),
                Err(too_many) => (Vec::new(), Some(too_many.to_string())),
            }
        }
        (_, false) => (
            Vec::new(),
            Some(
                "withheld with the windows: the run is invalid (§9); --diagnose shows them".into(),
            ),
        ),
    };
    let in_flight = timeline
        .fault
        .and_then(|f| f.fired_ns)
        .map(|fired| in_flight_at(run, fired, rules.lost_in_flight));
    requests.release();
    let recovery =
        crate::recovery::analyze(run, &met, &timeline, &cut, &validity.gates, &rules, shown);
    requests.release();
    // A2: an invalid run prints no recovery figure, not even as a window bound (§9).
    let a2_withholds = rules.recovery == RecoveryRules::Amended && !shown;
    // A3: and no recovery sentence of any kind, "not recovered" included.
    if rules.claims == Claims::Supported && !shown && timeline.fault.is_some() {
        recovery_note = "withheld: the run is invalid (§9); the fault window is shown to the end of the recovery timeout".into();
    }
    let (cut_shown, recovered_at_ns) = if a2_withholds && recovered_at_ns.is_some() {
        recovery_note = "withheld: the run is invalid (§9); the fault window is shown to the end of the recovery timeout".into();
        (windows::cut(&timeline, None), None)
    } else {
        (cut.clone(), recovered_at_ns)
    };

    // The server's own metrics (§2), per window where the windows are shown.
    let spans: Vec<crate::server::WindowSpan> = cut_shown
        .iter()
        .map(|w| crate::server::WindowSpan {
            name: w.kind.name(),
            start_ns: w.start_ns,
            end_ns: w.end_ns,
            canary_max_ns: windows_out
                .iter()
                .find(|r: &&WindowReport| r.window == w.kind.name())
                .and_then(|r| r.receive_path.canary_max_us)
                .map(|us| (us * 1e3).round() as u64),
        })
        .collect();
    let server = crate::server::evidence(
        (run, &rules),
        shown.then_some(&spans[..]),
        (!shown).then(|| {
            "withheld with the windows: the run is invalid (§9); --diagnose shows them".into()
        }),
        config.scrape_period_ms() as f64,
    );
    let cleanup = crate::escape::cleanup(run);
    let escape = crate::escape::escape(run, cleanup.as_ref());
    let mut report = Report {
        schema: REPORT_SCHEMA,
        provenance: provenance(run, (spec, &rules), method, analyzer),
        not_publishable,
        validity,
        timeline: TimelineReport {
            inject_s: timeline.fault.map(|f| seconds(f.inject_ns)),
            fired_s: timeline.fault.and_then(|f| f.fired_ns).map(seconds),
            fire_anchor_s: timeline.fault.map(|f| seconds(f.anchor_ns())),
            recovered_s: recovered_at_ns.map(seconds),
            recovery_note,
            windows: cut_shown
                .iter()
                .map(|w| WindowBounds {
                    window: w.kind.name(),
                    start_s: seconds(w.start_ns),
                    end_s: seconds(w.end_ns),
                    scheduled: requests
                        .intended_ns
                        .iter()
                        .filter(|&&t| {
                            windows::locate(&cut_shown, t).is_some_and(|i| cut_shown[i] == *w)
                        })
                        .count() as u64,
                    start_ns: w.start_ns,
                    end_ns: w.end_ns,
                })
                .collect(),
        },
        windows: windows_out,
        windows_withheld: withheld,
        segments,
        segments_note,
        in_flight_at_fire: in_flight,
        recovery,
        cleanup,
        escape,
        stopped,
        change: shown
            .then(|| change::read(run, &rules, server.as_ref()))
            .flatten(),
        server,
        headline: String::new(),
        audit,
        rules,
        workload: run.header.schedule.workload.clone(),
        history: run.header.schedule.history,
        identity: crate::model::Identity {
            target: run.config.target.base_url.clone(),
            model: run.config.target.model.clone(),
            workload: format!(
                "{}, {} arrivals",
                run.header.schedule.workload.name(),
                run.header.schedule.arrival.name()
            ),
            rate_rps: run.config.rate_rps(),
            started_unix_ns: run.header.clock.realtime_epoch_ns,
        },
    };
    // The appendix's headline is the §1 experiment's sentence; a degradation scenario has none.
    if report.validity.valid && config.fault.variant.is_replica_loss() {
        report.headline = crate::headline::of_run(&report);
    }
    report
}

/// What a stopped run's report says of its stop: where, how many went unsent, and what the
/// figures are over.
fn stopped_report(run: &Run, stop: stopped::Stop) -> crate::model::StoppedReport {
    let scheduled = run.requests.len() as u64;
    let before = scheduled.saturating_sub(stop.not_sent);
    crate::model::StoppedReport {
        at_s: seconds(stop.at_ns),
        not_sent: stop.not_sent,
        scheduled_before: before,
        said: format!(
            "the run stopped at {:.3} s, before its schedule's end: {} of its {scheduled} scheduled requests were not sent (the run stopped before their turn; neither censored nor the target's), and every window's figures are over the {before} scheduled before the stop (§3, A4)",
            seconds(stop.at_ns),
            stop.not_sent
        ),
    }
}

/// Every window's report, its inter-token figures from a second pass over the journal: the
/// gaps between answer content events (v0.1-v0.4, and per token), or (A4) between deliveries,
/// with the streams' figures.
fn window_reports(
    run: &Run,
    files: &[JournalFile],
    (cut, rows_of): (&[Window], &[Vec<usize>]),
    baseline_rows: &[usize],
    (method, horizon_ns, rules): (Method, u64, &Rules),
) -> Vec<WindowReport> {
    let report = |window: &Window, rows: &[usize]| {
        window_report(run, window, rows, baseline_rows, method, horizon_ns, rules)
    };
    if rules.streams == StreamReading::EveryDelta {
        // A declared SLO's `itl` objective reads each row's longest gap from the same pass.
        let mut longest = declared::longest_gaps_wanted(run, rules);
        let delivered = streams::delivered(run, files, cut, &mut longest);
        let judge = declared::Judge::of(run, rules, &longest);
        return cut
            .iter()
            .zip(rows_of)
            .zip(delivered)
            .map(|((window, rows), delivered)| {
                let mut report = report(window, rows);
                let (inter, share) = streams::inter_token(delivered.gaps.clone());
                report.inter_chunk_at_floor = Some(window::floor_share(Some(&delivered.gaps)));
                report.inter_chunk = inter;
                let mut figures = streams::figures(
                    &run.requests,
                    &rows::in_intended_order(&run.requests, rows),
                    &delivered,
                    share,
                    rules.tails,
                );
                if rules.refusals == RefusalWords::WhatPublishes {
                    let duration_s = seconds(window.duration_ns());
                    for d in [&mut figures.ttfat, &mut figures.reasoning_span] {
                        distribution::say_what_publishes(d, duration_s);
                    }
                }
                report.streams = Some(figures);
                if rules.path == FirstTokenPath::Decomposed {
                    report.first_token_path =
                        Some(path::of(&run.requests, rows, &delivered, rules.streams));
                }
                declared::fill(&mut report, run, rows, (rules, judge.as_ref()));
                report
            })
            .collect();
    }
    let mut gaps = inter_chunk(run, files, cut, rules.streams).into_iter();
    cut.iter()
        .zip(rows_of)
        .map(|(window, rows)| {
            let mut report = report(window, rows);
            let (pooled, per_token) = gaps.next().unzip();
            report.inter_chunk_at_floor = (rules.printing != Printing::Archived)
                .then(|| window::floor_share(pooled.as_ref()));
            report.inter_chunk = distribution(&[], pooled);
            report.inter_chunk.label = INTER_CHUNK;
            report.tokens.itl_per_token = Some(distribution(&[], per_token));
            if let Some(d) = report.tokens.itl_per_token.as_mut() {
                d.label = tokens::ITL_PER_TOKEN;
            }
            report
        })
        .collect()
}

/// The recovery boundary (§5): when the run recovered to the pre-fault baseline by the pinned
/// detector, if it did, and what the timeline says of it either way.
fn recovery_boundary(
    run: &Run,
    met: &[bool],
    timeline: &Timeline,
    baseline: Window,
    rules: &Rules,
) -> (Option<u64>, String) {
    let bucket_ns = run.config.duration_ns(&pins::RECOVERY_BUCKET_S).max(1);
    let mut recovered_at_ns = None;
    let mut recovery_note = String::from("no fault in this run");
    if timeline.fault.is_some() {
        let boundary = crate::recovery::boundary(run, met, timeline, baseline, rules);
        match boundary {
            Some((Detection::Recovered { entry_end_s, ttr_s }, Some(removal_ns))) => {
                recovered_at_ns = Some(entry_end_s * bucket_ns);
                recovery_note = format!(
                    "recovered to the pre-fault baseline within R of the fault's removal at {:.3} s, by {:.3} s after the fire anchor: a bound at the detector's resolution, not a measured time (pinned detector, §5, A3)",
                    seconds(removal_ns),
                    seconds(ttr_s * bucket_ns)
                );
            }
            Some((Detection::Recovered { entry_end_s, ttr_s }, None)) => {
                recovered_at_ns = Some(entry_end_s * bucket_ns);
                recovery_note = format!(
                    "recovered to the pre-fault baseline {:.3} s after the fire anchor (pinned detector, §5)",
                    seconds(ttr_s * bucket_ns)
                );
            }
            Some((Detection::NotRecovered, _)) => {
                recovery_note = "no recovery to the pre-fault baseline within the recovery timeout: the fault window runs to its end and the recovery window is empty".into();
            }
            Some((Detection::Unreadable { reason }, _)) => {
                recovery_note = format!("recovery to the pre-fault baseline not determined ({reason}, §5 A2): the fault window runs to the end of the recovery timeout");
            }
            Some((Detection::NoBaseline, _)) | None => {
                recovery_note = "the baseline has no goodput to recover to: the fault window runs to the end of the recovery timeout".into();
            }
        }
    }
    (recovered_at_ns, recovery_note)
}

/// A verification fact of the run: one journal's, or, for a merged run, the shards' when they
/// agree, else each shard's (`0/3 completed; 1/3 aborted (SIGINT); ...`), so that no shard's
/// seal hides behind shard 0's.
fn per_shard(
    run: &Run,
    fact: impl Fn(&percentes_formats::journal::verify::VerifyReport) -> String,
) -> String {
    let facts: Vec<String> = if run.parts.len() > 1 {
        run.parts.iter().map(&fact).collect()
    } else {
        vec![fact(&run.report)]
    };
    if facts.iter().all(|f| *f == facts[0]) {
        return facts[0].clone();
    }
    facts
        .iter()
        .enumerate()
        .map(|(k, f)| format!("{k}/{} {f}", facts.len()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The names of the gates that do not hold, joined for a sentence.
fn failed_gates(validity: &Validity) -> String {
    validity
        .failed()
        .map(|g| g.id.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The timeline of `run`: phase ends from the recorded schedule, the fire from its events.
pub fn timeline_of(run: &Run) -> Timeline {
    let schedule = &run.header.schedule;
    let schedule_end_ns = schedule.total_duration_ns();
    // The one definition of the measured span, shared with the recorder (formats).
    let (warmup_end_ns, measured_end_ns) = match schedule.measured_span_ns() {
        (_, 0) => (0, schedule_end_ns),
        span => span,
    };
    let fault = run
        .header
        .schedule
        .inject_at_ns
        .map(|inject_ns| FaultTimes {
            inject_ns,
            fired_ns: run.events.first(EventKind::FaultFired).map(|e| e.at_ns),
        });
    Timeline {
        warmup_end_ns,
        measured_end_ns,
        schedule_end_ns,
        timeout_ns: run.config.duration_ns(&pins::CLIENT_TIMEOUT_S),
        fault,
    }
}

fn provenance(
    run: &Run,
    (spec, rules): (Spec, &Rules),
    method: Method,
    analyzer: &Analyzer,
) -> Provenance {
    let header = &run.header;
    Provenance {
        spec_applied: spec.name().into(),
        spec_at_capture: header.spec_version.clone(),
        curve_method: match rules.printing {
            Printing::Archived => method_name(method).into(),
            Printing::Honest | Printing::Resolved => {
                method_name(method).replace("(v0.2)", "(A1, since v0.2)")
            }
        },
        analyzer_version: analyzer.version.clone(),
        analyzer_commit: analyzer.commit.clone(),
        recorder_version: header.tool_version.clone(),
        recorder_commit: header.tool_commit.clone(),
        config_hash: hex(&header.config_hash),
        chain_head: match &run.manifest {
            Some(manifest) => manifest.binding.clone(),
            None => run.report.chain_head.map(|h| hex(&h)).unwrap_or_default(),
        },
        shard_heads: run.manifest.as_ref().map(|m| {
            m.shards
                .iter()
                .map(|s| format!("{}/{} {}", s.index, m.shard_count, s.chain_head))
                .collect()
        }),
        journal_verdict: per_shard(run, |p| p.verdict.name().into()),
        vouched: run.vouched.clone(),
        seal: per_shard(run, |p| {
            p.seal
                .as_ref()
                .map(|s| {
                    if s.reason.is_empty() {
                        s.status.to_string()
                    } else {
                        format!("{} ({})", s.status, s.reason)
                    }
                })
                .unwrap_or_else(|| "none (unsealed)".into())
        }),
        schedule_digest: hex(&header.schedule_digest),
        profile: header.profile.clone(),
        dev_time_factor: header.dev_time_factor,
        target_kind: run.config.target.kind.name().into(),
        fault_variant: run.config.fault.variant.name().into(),
        tls_insecure: run.config.target.tls.insecure,
    }
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::AalenJohansen => "Aalen-Johansen cumulative incidence, errors compete (v0.2)",
        Method::KaplanMeierErrorsCensored => {
            "Kaplan-Meier with errors censored (v0.1; overstates completion when errors precede completions, A1)"
        }
    }
}

/// Whether the variant and target make a fault analysis applicable (for callers that label).
pub fn has_fault(run: &Run) -> bool {
    run.config.fault.variant != FaultVariant::None && run.config.target.kind != TargetKind::Hosted
}

#[cfg(test)]
mod tests;
