//! A4 (v0.5): a testbed change read from the journal (SPEC §10 "Reading a testbed change"): the
//! steps the real-parts testbed's controller journaled as `timeline` events (read back through
//! formats' [`ChangeStep`], never by matching its text here), the spans between them, and what
//! the requests met, from their records: those in flight through a killed proxy, those sent
//! while it was down, those sent while the change ran, the first served after each boundary.

use percentes_formats::journal::change::{Change, ChangeStep, Step};
use percentes_formats::journal::records::{class_name, EventKind, TimelineSubject};
use percentes_formats::journal::Outcome;
use percentes_formats::spec::{ChangeReading, Rules};

use super::rows::seconds;
use crate::frame::{Requests, NONE};
use crate::load::Run;
use crate::model::{
    After, ChangeReport, ChangeSpan, ChangeState, ClassCount, FirstServed, GaugeAround,
    RequestGroup, ServerEvidence,
};

/// The gauges a change's reading names (the server evidence's queue and running points).
const WAITING: &str = "requests waiting";
const RUNNING: &str = "requests running";

/// One step as journaled: its instant (ns from the epoch), what it is, the journal's words.
struct Seen {
    at_ns: u64,
    step: ChangeStep,
    detail: String,
}

/// The change `run`'s journal holds, read under `rules` (with the replicas' gauges from
/// `server`, where scraped); `None` before v0.5 and for a run with no change's step in its
/// timeline.
pub(super) fn read(
    run: &Run,
    rules: &Rules,
    server: Option<&ServerEvidence>,
) -> Option<ChangeReport> {
    if rules.change != ChangeReading::Read {
        return None;
    }
    let seen = steps(run);
    let change = seen.first()?.step.change?;
    let ended = ended(&seen);
    let mut reading = Reading {
        seen: &seen,
        requests: &run.requests,
        server,
        spans: Vec::new(),
        groups: Vec::new(),
        firsts: Vec::new(),
        last_failed: None,
        gauges: Vec::new(),
        said: Vec::new(),
    };
    match change {
        Change::ProxyFailover => reading.failover(),
        Change::ScaleOut => reading.scale_out(),
        Change::Rollout | Change::Rollback => reading.rollout(change),
    }
    let text = format!(
        "testbed change (§10): {} {ended}{}",
        change.name(),
        reading
            .said
            .iter()
            .map(|s| format!("; {s}"))
            .collect::<String>()
    );
    Some(ChangeReport {
        change: change.name(),
        ended,
        steps: seen
            .iter()
            .map(|s| ChangeState {
                at_s: seconds(s.at_ns),
                step: s.step.step.name(),
                number: s.step.number.map(|(i, n)| format!("{i} of {n}")),
                replica: s.step.replica.clone(),
                detail: s.detail.clone(),
            })
            .collect(),
        spans: reading.spans,
        requests: reading.groups,
        firsts: reading.firsts,
        last_failed: reading.last_failed,
        gauges: reading.gauges,
        text,
    })
}

/// The run's change steps in journal order: those of the first change its timeline names, and
/// the weights-loaded lines of the replicas that change started.
fn steps(run: &Run) -> Vec<Seen> {
    let mut change = None;
    let mut started: Vec<String> = Vec::new();
    let mut seen = Vec::new();
    for event in run.events.all(EventKind::Timeline) {
        let Some(step) = TimelineSubject::parse(&event.subject)
            .and_then(|subject| ChangeStep::read(subject, &event.detail))
        else {
            continue;
        };
        let ours = match step.change {
            Some(c) => *change.get_or_insert(c) == c,
            None => step.replica.as_ref().is_some_and(|r| started.contains(r)),
        };
        if !ours {
            continue;
        }
        if step.step == Step::Started {
            started.extend(step.replica.clone());
        }
        seen.push(Seen {
            at_ns: event.at_ns,
            step,
            detail: event.detail.clone(),
        });
    }
    seen
}

/// How the change ended, from its last word.
fn ended(seen: &[Seen]) -> String {
    let any = |step: Step| seen.iter().find(|s| s.step.step == step);
    if let Some(failed) = any(Step::Failed) {
        return format!("failed: {}", failed.detail);
    }
    match (any(Step::Complete), any(Step::ProxyUp)) {
        (Some(_), _) | (None, Some(_)) => "complete".into(),
        (None, None) => "unfinished: no end journaled (the run ended first)".into(),
    }
}

/// What is read of one change, filled by its kind's reading.
struct Reading<'a> {
    seen: &'a [Seen],
    requests: &'a Requests,
    server: Option<&'a ServerEvidence>,
    spans: Vec<ChangeSpan>,
    groups: Vec<RequestGroup>,
    firsts: Vec<FirstServed>,
    last_failed: Option<FirstServed>,
    gauges: Vec<GaugeAround>,
    /// The summary's words, in order.
    said: Vec<String>,
}

impl Reading<'_> {
    /// The instant of the first `step` (of rollout step `number`, where given).
    fn at(&self, step: Step, number: Option<u32>) -> Option<u64> {
        self.find(step, number).map(|s| s.at_ns)
    }

    fn find(&self, step: Step, number: Option<u32>) -> Option<&Seen> {
        self.seen.iter().find(|s| {
            s.step.step == step && number.is_none_or(|i| s.step.number.map(|n| n.0) == Some(i))
        })
    }

    /// The weights-loaded line of `replica`.
    fn weights(&self, replica: Option<&str>) -> Option<u64> {
        self.seen
            .iter()
            .find(|s| s.step.step == Step::WeightsLoaded && s.step.replica.as_deref() == replica)
            .map(|s| s.at_ns)
    }

    /// A span from `from` to `to` where both were journaled in that order; said in the
    /// summary when `say`.
    fn span(&mut self, span: String, (from, to): (Option<u64>, Option<u64>), say: bool) {
        let (Some(from), Some(to)) = (from, to) else {
            return;
        };
        let Some(length) = to.checked_sub(from) else {
            return;
        };
        if say {
            self.said.push(format!("{span} {:.3} s", seconds(length)));
        }
        self.spans.push(ChangeSpan {
            span,
            from_s: seconds(from),
            seconds: seconds(length),
        });
    }

    /// The requests `rows` picks, by class; the last one's end after `boundary` when asked.
    fn group(&mut self, group: String, rows: Vec<usize>, boundary: Option<u64>) {
        let requests = self.requests;
        let mut classes: Vec<ClassCount> = Vec::new();
        for &row in &rows {
            let class = class_name(requests.class[row]).unwrap_or("unknown");
            match classes.iter_mut().find(|c| c.class == class) {
                Some(c) => c.n += 1,
                None => classes.push(ClassCount {
                    class: class.to_owned(),
                    n: 1,
                }),
            }
        }
        classes.sort_by(|a, b| b.n.cmp(&a.n).then_with(|| a.class.cmp(&b.class)));
        let last_end_after_s = boundary.and_then(|b| {
            rows.iter()
                .map(|&row| requests.terminal_ns[row])
                .filter(|&t| t != NONE)
                .max()
                .map(|t| seconds(t.saturating_sub(b)))
        });
        let listed = if classes.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                classes
                    .iter()
                    .map(|c| format!("{} {}", c.n, c.class))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        self.said.push(format!(
            "{} {group}{listed}{}",
            rows.len(),
            last_end_after_s.map_or(String::new(), |s| format!(
                ", the last ended {:.1} ms after it",
                s * 1e3
            ))
        ));
        self.groups.push(RequestGroup {
            group,
            n: rows.len() as u64,
            classes,
            last_end_after_s,
        });
    }

    /// The rows sent (dispatched) in `(from, to)`; to the end of the run where `to` is none.
    fn sent_between(&self, from: u64, to: Option<u64>) -> Vec<usize> {
        let d = &self.requests.dispatched_ns;
        (0..self.requests.len())
            .filter(|&row| d[row] != NONE && d[row] > from && to.is_none_or(|to| d[row] < to))
            .collect()
    }

    /// The first completed request sent after `from` (and served by `replica`, where given):
    /// when it was sent, and how long after each of `boundaries`.
    fn first(
        &mut self,
        what: String,
        from: u64,
        replica: Option<&str>,
        boundaries: &[(&str, Option<u64>)],
    ) {
        let requests = self.requests;
        let sent = (0..requests.len())
            .filter(|&row| {
                requests.outcome(row) == Some(Outcome::Completed)
                    && replica.is_none_or(|r| requests.replica_name(row) == Some(r))
            })
            .map(|row| requests.dispatched_ns[row])
            .filter(|&d| d != NONE && d > from)
            .min();
        let picked = self.picked(what, sent, boundaries);
        self.firsts.push(picked);
    }

    /// The request sent at `sent` said as `what`, with how long after each of `boundaries`
    /// (those it came after).
    fn picked(
        &mut self,
        what: String,
        sent: Option<u64>,
        boundaries: &[(&str, Option<u64>)],
    ) -> FirstServed {
        let after: Vec<After> = boundaries
            .iter()
            .filter_map(|&(boundary, at)| {
                Some(After {
                    boundary: boundary.to_owned(),
                    seconds: seconds(sent?.checked_sub(at?)?),
                })
            })
            .collect();
        self.said.push(match sent {
            None => format!("{what}: none"),
            Some(_) => format!(
                "{what} {}",
                after
                    .iter()
                    .map(|a| format!("{:.3} s after {}", a.seconds, a.boundary))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
        FirstServed {
            what,
            sent_s: sent.map(seconds),
            after,
        }
    }

    /// Each scraped replica's `gauge` around `boundary` (all but `except`), from the server
    /// evidence's per-scrape points.
    fn gauges_around(
        &mut self,
        gauge: &'static str,
        (boundary, at_ns): (&str, u64),
        except: Option<&str>,
    ) {
        let Some(server) = self.server else {
            return;
        };
        let mut sources: Vec<&str> = server.timeline.iter().map(|p| p.source.as_str()).collect();
        sources.sort_unstable();
        sources.dedup();
        let at = seconds(at_ns);
        for source in sources.into_iter().filter(|s| Some(*s) != except) {
            let mut points: Vec<(f64, f64)> = server
                .timeline
                .iter()
                .filter(|p| p.source == source)
                .filter_map(|p| {
                    let value = if gauge == WAITING { p.queue } else { p.running };
                    Some((p.t_s, value?))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let before = points.iter().rev().find(|p| p.0 <= at).map(|p| p.1);
            let later = || points.iter().filter(|p| p.0 > at);
            let first_after = later().next().map(|p| (p.1, p.0 - at));
            let largest_after = later().map(|p| p.1).reduce(f64::max);
            let last = points.last().map(|p| p.1);
            let number = |v: Option<f64>| v.map_or("unread".into(), |v| format!("{v:.0}"));
            self.said.push(format!(
                "{source}'s {gauge}: {} at its last scrape by {boundary}, {} at its first after ({}), {} at most after it, {} at its last scrape",
                number(before),
                number(first_after.map(|f| f.0)),
                first_after.map_or("none".into(), |f| format!("{:.3} s later", f.1)),
                number(largest_after),
                number(last)
            ));
            self.gauges.push(GaugeAround {
                source: source.to_owned(),
                gauge,
                boundary: boundary.to_owned(),
                before,
                first_after,
                largest_after,
                last,
            });
        }
    }

    /// A new replica's way from its process start to its first ready answer, through its
    /// weights-loaded line where one was journaled; each span named by `name`.
    fn way_to_ready(
        &mut self,
        name: impl Fn(&str) -> String,
        (replica, started, ready): (Option<&str>, Option<u64>, Option<u64>),
        say: bool,
    ) {
        match self.weights(replica) {
            Some(weights) => {
                let weights = Some(weights);
                let first = name("process start to its weights-loaded line");
                self.span(first, (started, weights), say);
                let then = name("weights-loaded line to its first ready answer");
                self.span(then, (weights, ready), say);
            }
            None => {
                let whole = name("process start to its first ready answer");
                self.span(whole, (started, ready), say);
            }
        }
    }

    /// A proxy failover: down from the kill to the new process, up once it counts every
    /// replica; the requests in flight through it at the kill and those sent while it was
    /// down; the first served after the kill.
    fn failover(&mut self) {
        let killed = self.at(Step::ProxyKilled, None);
        let started = self.at(Step::ProxyStarted, None);
        let up = self.at(Step::ProxyUp, None);
        self.span(
            "down, the kill to its new process".into(),
            (killed, started),
            true,
        );
        self.span(
            "its new process to every replica up".into(),
            (started, up),
            true,
        );
        self.span("the kill to every replica up".into(), (killed, up), false);
        let Some(killed) = killed else {
            return;
        };
        let requests = self.requests;
        let through: Vec<usize> = (0..requests.len())
            .filter(|&row| {
                let (written, end) = (requests.request_written_ns[row], requests.terminal_ns[row]);
                written != NONE && written <= killed && end != NONE && end > killed
            })
            .collect();
        self.group(
            "in flight through the proxy at the kill".into(),
            through,
            Some(killed),
        );
        if let Some(started) = started {
            let down = self.sent_between(killed, Some(started));
            self.group("sent while it was down".into(), down, None);
        }
        self.first(
            "first served after the kill".into(),
            killed,
            None,
            &[("the kill", Some(killed)), ("the restart", started)],
        );
        self.gauges_around(RUNNING, ("the kill", killed), None);
    }

    /// A scale-out: the decision to in service, through the process's start, its weights,
    /// its first ready answer and the proxy's check; the requests sent before and after it
    /// entered service; the first the new replica served.
    fn scale_out(&mut self) {
        let replica = self
            .find(Step::Decided, None)
            .or_else(|| self.find(Step::Started, None))
            .and_then(|s| s.step.replica.clone());
        let decided = self.at(Step::Decided, None);
        let started = self.at(Step::Started, None);
        let ready = self.at(Step::Ready, None);
        let in_service = self.at(Step::InService, None);
        self.span(
            "decision to process start".into(),
            (decided, started),
            false,
        );
        self.way_to_ready(str::to_owned, (replica.as_deref(), started, ready), true);
        self.span(
            "ready to in service (the proxy's check)".into(),
            (ready, in_service),
            true,
        );
        self.span("decision to in service".into(), (decided, in_service), true);
        let Some(decided) = decided else {
            return;
        };
        let before = self.sent_between(decided, in_service);
        self.group("sent from the decision to in service".into(), before, None);
        if let Some(in_service) = in_service {
            let after = self.sent_between(in_service, None);
            self.group("sent after it entered service".into(), after, None);
        }
        self.first(
            format!(
                "first served by {}",
                replica.as_deref().unwrap_or("the new replica")
            ),
            decided,
            replica.as_deref(),
            &[("the decision", Some(decided)), ("in service", in_service)],
        );
        let requests = self.requests;
        let failed = (0..requests.len())
            .filter(|&row| {
                matches!(
                    requests.outcome(row),
                    Some(Outcome::Errored | Outcome::Censored)
                )
            })
            .map(|row| requests.dispatched_ns[row])
            .filter(|&d| d != NONE && d > decided)
            .max();
        let what = "the last sent after the decision that did not complete".to_owned();
        let boundaries = [("the decision", Some(decided)), ("in service", in_service)];
        self.last_failed = Some(self.picked(what, failed, &boundaries));
        self.gauges_around(WAITING, ("the decision", decided), replica.as_deref());
    }

    /// A rollout or rollback: each step's new replica from its start to in service, its old
    /// replica's drain and stop, the step whole and the change whole; the requests sent while
    /// it ran; the first each new replica served.
    fn rollout(&mut self, change: Change) {
        let mut numbers: Vec<u32> = Vec::new();
        for s in self.seen {
            if let Some((i, _)) = s.step.number.filter(|(i, _)| !numbers.contains(i)) {
                numbers.push(i);
            }
        }
        let new_replicas: Vec<(String, Option<u64>)> =
            numbers.into_iter().map(|i| self.rollout_step(i)).collect();
        let begin = self.seen.first().map(|s| s.at_ns);
        let end = self
            .at(Step::Complete, None)
            .or_else(|| self.at(Step::Failed, None));
        self.span(format!("the whole {}", change.name()), (begin, end), true);
        if let Some(begin) = begin {
            let during = self.sent_between(begin, end);
            self.group(
                format!("sent while the {} ran", change.name()),
                during,
                None,
            );
        }
        for (new, in_service) in new_replicas {
            if let Some(at) = in_service {
                let what = format!("first served by {new}");
                self.first(what, at, Some(&new), &[("in service", Some(at))]);
            }
        }
    }

    /// Rollout step `i`'s spans; its new replica and when it entered service.
    fn rollout_step(&mut self, i: u32) -> (String, Option<u64>) {
        let replica = |step| {
            self.find(step, Some(i))
                .and_then(|s| s.step.replica.clone())
                .unwrap_or_else(|| "?".into())
        };
        let (new, old) = (replica(Step::Started), replica(Step::Draining));
        let at = |step| self.at(step, Some(i));
        let (started, ready, in_service) =
            (at(Step::Started), at(Step::Ready), at(Step::InService));
        let (draining, drained, stopped) =
            (at(Step::Draining), at(Step::Drained), at(Step::Stopped));
        let named = |what: &str| format!("step {i}: {new}'s {what}");
        self.way_to_ready(named, (Some(&new), started, ready), false);
        for (span, ends) in [
            (
                format!("step {i}: {new} ready to in service"),
                (ready, in_service),
            ),
            (
                format!("step {i}: {old} draining to out of service"),
                (draining, drained),
            ),
            (
                format!("step {i}: {old} out of service to stopped"),
                (drained, stopped),
            ),
        ] {
            self.span(span, ends, false);
        }
        let whole = format!("step {i} whole, {new} started to {old} stopped");
        self.span(whole, (started, stopped), true);
        (new, in_service)
    }
}
