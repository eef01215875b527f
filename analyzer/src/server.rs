//! Server-side evidence (SPEC §2): the target's own metrics, scraped into the journal as kind-7
//! records, read back per source and per window beside what the client measured.
//!
//! A window's server figures are increases between two scrapes: the last at or before the
//! window's start and the last at or before its end (a scrape's moment is the midpoint of its
//! request and answer), so the server's span can differ from the window by up to one scrape
//! period at each end; the client's requests are taken over the same span, not the window, so
//! the two sides count the same stretch of time. Histogram quantiles are known only to their
//! bucket; means are exact (the histogram's sum over its count).

use percentes_formats::journal::detail::DetailWord;
use std::collections::{BTreeMap, BTreeSet};

use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::records::{EventKind, EventRecord};
use percentes_formats::journal::scrape::{ScrapeRecord, SeriesDefinition};
use percentes_formats::prometheus::{role_of, Role, SeriesKind};
use percentes_formats::spec::{
    AbandonReading, CanaryOver, FirstTokenPath, PrefixCacheReading, ReadingWords, Rules,
    StreamReading, VerdictBasis,
};

mod verdicts;

use crate::frame::NONE;
use crate::load::Run;
use crate::model::{
    AbortReconciliation, GaugeSummary, PrefixCache, QuantileComparison, Reconciliation,
    ServerComparison, ServerEvidence, ServerPoint, ServerWindow, SourceSummary,
};
use verdicts::{judge, judge_means, server_path};

/// The quantiles the receive-path check compares; each only where both sides hold enough
/// observations to place it (n at least 1 / (1 - q)).
const COMPARED: [f64; 3] = [0.5, 0.9, 0.99];

/// One source's answered scrapes, with its series and failures.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    name: &'a str,
    points: Vec<&'a ScrapeRecord>,
    series: BTreeMap<u32, &'a SeriesDefinition>,
    failures: Vec<&'a EventRecord>,
}

fn mid(p: &ScrapeRecord) -> u64 {
    p.sent_ns / 2 + p.received_ns / 2
}

/// Seconds from ns: the nearest double to the decimal, so report.json prints it clean.
fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl<'a> Source<'a> {
    /// The ids of the series of `role` whose name ends with `suffix` (`""`: any).
    fn ids(&self, role: Role, suffix: &str) -> Vec<u32> {
        self.series
            .values()
            .filter(|d| role_of(&d.family) == Some(role) && d.name.ends_with(suffix))
            .map(|d| d.id)
            .collect()
    }

    /// The ids of the finished-request series whose finish reason is an abort (vLLM's
    /// `finished_reason="abort"`).
    fn aborted_ids(&self) -> Vec<u32> {
        self.series
            .values()
            .filter(|d| role_of(&d.family) == Some(Role::Requests))
            .filter(|d| {
                d.labels
                    .iter()
                    .any(|(k, v)| k == "finished_reason" && v == "abort")
            })
            .map(|d| d.id)
            .collect()
    }

    /// The ids of the front end's answered-request series for POSTs to `paths` answered 2xx.
    fn received_ids(&self, paths: &[String]) -> Vec<u32> {
        let has = |d: &SeriesDefinition, key: &str, value: &str| {
            d.labels.iter().any(|(k, v)| k == key && v == value)
        };
        self.series
            .values()
            .filter(|d| role_of(&d.family) == Some(Role::Received))
            .filter(|d| has(d, "method", "POST") && has(d, "status", "2xx"))
            .filter(|d| paths.iter().any(|p| has(d, "handler", p)))
            .map(|d| d.id)
            .collect()
    }

    /// The summed increase of cumulative series `ids` over points `(from, to]`.
    fn increase(&self, ids: &[u32], (from, to): (usize, usize)) -> f64 {
        self.points[from + 1..=to]
            .iter()
            .filter(|p| !p.first)
            .flat_map(|p| &p.samples)
            .filter(|s| ids.contains(&s.id))
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .sum::<f64>()
            + 0.0 // an empty sum is -0.0, which prints as "-0"
    }

    /// A gauge's readings (summed over `ids`' label sets) at each point of `[from, to]`.
    fn gauge(&self, ids: &[u32], (from, to): (usize, usize)) -> Vec<f64> {
        let mut now: BTreeMap<u32, f64> = BTreeMap::new();
        let mut out = Vec::new();
        for (i, p) in self.points.iter().enumerate().take(to + 1) {
            for gone in &p.gone {
                now.remove(gone);
            }
            for s in p.samples.iter().filter(|s| ids.contains(&s.id)) {
                now.insert(s.id, s.value);
            }
            let values: Vec<f64> = now.values().copied().filter(|v| v.is_finite()).collect();
            if i >= from && !values.is_empty() {
                out.push(values.iter().sum());
            }
        }
        out
    }

    /// The points that bound `[start, end)`: the last at or before `start` (else the first
    /// after it), and the last at or before `end`; `None` when they do not make a span.
    fn span(&self, start_ns: u64, end_ns: u64) -> Option<(usize, usize)> {
        let from = self
            .points
            .iter()
            .rposition(|p| mid(p) <= start_ns)
            .or_else(|| self.points.iter().position(|p| mid(p) > start_ns))?;
        let to = self.points.iter().rposition(|p| mid(p) <= end_ns)?;
        (to > from).then_some((from, to))
    }

    /// The histogram of `role` over points `(from, to]`: (upper bound s, cumulative count) by
    /// bucket, its count and its sum.
    fn histogram(&self, role: Role, span: (usize, usize)) -> Option<Histogram> {
        let buckets = self.ids(role, "_bucket");
        if buckets.is_empty() {
            return None;
        }
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for id in &buckets {
            let le = self.series[id]
                .labels
                .iter()
                .find(|(k, _)| k == "le")
                .and_then(|(_, v)| match v.as_str() {
                    "+Inf" | "Inf" => Some(f64::INFINITY),
                    v => v.parse::<f64>().ok(),
                });
            let Some(le) = le.filter(|le| !le.is_nan()) else {
                continue;
            };
            let entry = by_le.entry(le.to_bits()).or_insert((le, 0.0));
            entry.1 += self.increase(&[*id], span);
        }
        let mut cumulative: Vec<(f64, f64)> = by_le.into_values().collect();
        cumulative.sort_by(|a, b| a.0.total_cmp(&b.0));
        let family = self.series[&buckets[0]].family.clone();
        Some(Histogram {
            family,
            cumulative,
            count: self.increase(&self.ids(role, "_count"), span),
            sum: self.increase(&self.ids(role, "_sum"), span),
        })
    }
}

/// A server histogram's increase over a span.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Its family.
    pub family: String,
    /// (upper bound, cumulative count), by bound.
    pub cumulative: Vec<(f64, f64)>,
    /// Observations.
    pub count: f64,
    /// Their sum, s.
    pub sum: f64,
}

impl Histogram {
    /// The bucket holding the quantile `q` (rank ceil(q n)): (lower, upper) bounds, s.
    pub fn bucket_of(&self, q: f64) -> Option<(f64, f64)> {
        let n = self.count.round();
        if n < 1.0 {
            return None;
        }
        let rank = (q * n).ceil().max(1.0);
        let mut low = 0.0;
        for (le, count) in &self.cumulative {
            if *count >= rank {
                return Some((low, *le));
            }
            low = *le;
        }
        Some((low, f64::INFINITY))
    }
}

/// The sources of `run`, by name, with their failures.
pub fn sources(run: &Run) -> Vec<Source<'_>> {
    let mut out: BTreeMap<&str, Source<'_>> = BTreeMap::new();
    for record in &run.scrapes {
        let source = out.entry(&record.source).or_insert_with(|| Source {
            name: &record.source,
            points: Vec::new(),
            series: BTreeMap::new(),
            failures: Vec::new(),
        });
        for d in &record.defined {
            source.series.insert(d.id, d);
        }
        source.points.push(record);
    }
    for e in run.events.all(EventKind::Scrape) {
        if let Some(source) = out.get_mut(e.subject.as_str()) {
            if DetailWord::ScrapeFailed.opens(&e.detail) {
                source.failures.push(e);
            }
        } else if DetailWord::ScrapeFailed.opens(&e.detail) {
            // A source that never answered still has its failures reported.
            let name = e.subject.as_str();
            out.entry(name)
                .or_insert_with(|| Source {
                    name,
                    points: Vec::new(),
                    series: BTreeMap::new(),
                    failures: Vec::new(),
                })
                .failures
                .push(e);
        }
    }
    out.into_values().collect()
}

/// A window as the evidence reads it: name, span, the canary's largest lag (ns).
#[derive(Clone, Debug)]
pub struct WindowSpan {
    /// The window's name.
    pub name: &'static str,
    /// Its start, ns from the epoch.
    pub start_ns: u64,
    /// Its end, ns from the epoch.
    pub end_ns: u64,
    /// The loopback canary's largest lag over it, ns.
    pub canary_max_ns: Option<u64>,
}

/// The client's side of one replica: per request row, (request written, first content,
/// terminal, completed), ns from the epoch.
struct Client {
    rows: Vec<(u64, u64, u64, bool)>,
    /// Each request's row and when it was written whole, for the designed prefix reuse.
    written: Vec<(u64, usize)>,
    /// When each request to the replica the client gave up on (censored) ended, ns.
    gave_up: Vec<u64>,
    /// When each request to the replica the client abandoned by design was closed, ns.
    abandoned: Vec<u64>,
    /// The paths the client sent to (the run's routes).
    paths: Vec<String>,
}

/// The `host:port` a base URL sends to.
fn authority(base_url: &str) -> &str {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())]
}

impl Client {
    /// The requests the client saw `replica` serve: those its replica header named, and, where
    /// the base URL is the replica's own address (a replica addressed directly, with no header
    /// to name it), every request without a name; where the source is the base URL's own host
    /// scraped for want of a replica address, every request.
    fn of(run: &Run, replica: &str, reading: StreamReading) -> Client {
        let r = &run.requests;
        let direct = run
            .config
            .scrape_addresses()
            .get(replica)
            .is_some_and(|address| *address == authority(&run.config.target.base_url));
        // The base URL's own host, scraped where no replica address is named (issue 55 item
        // 4): every request went there, whatever name its answer gave.
        let whole = direct && !run.config.target.replica_addresses.contains_key(replica);
        let rows_of: Vec<usize> = (0..r.len())
            .filter(|&row| match r.replica_name(row) {
                Some(name) => name == replica || whole,
                None => direct,
            })
            .collect();
        let rows = rows_of
            .iter()
            .map(|&row| {
                (
                    r.request_written_ns[row],
                    // A4: the first generated delta of any kind; the first content before it.
                    match (reading, &r.streams) {
                        (StreamReading::EveryDelta, Some(s)) => {
                            s.first_ns[row].min(r.first_content_ns[row])
                        }
                        _ => r.first_content_ns[row],
                    },
                    r.terminal_ns[row],
                    r.outcome(row) == Some(percentes_formats::journal::Outcome::Completed),
                )
            })
            .collect();
        let censored =
            |row: usize| r.outcome(row) == Some(percentes_formats::journal::Outcome::Censored);
        let abandon = percentes_formats::journal::records::class_code("abandoned");
        // SPEC §2's reading: requests to the replica censored at their deadline. Not a request
        // the run's end censored before it was sent (`run-end`): it never reached the server.
        let run_end = percentes_formats::journal::records::class_code("run-end");
        let gave_up = rows_of
            .iter()
            .filter(|&&row| censored(row) && ![abandon, run_end].contains(&Some(r.class[row])))
            .map(|&row| r.terminal_ns[row])
            .collect();
        let abandoned = rows_of
            .iter()
            .filter(|&&row| censored(row) && Some(r.class[row]) == abandon)
            .map(|&row| r.terminal_ns[row])
            .collect();
        let written = rows_of
            .iter()
            .map(|&row| (r.request_written_ns[row], row))
            .collect();
        Client {
            rows,
            written,
            gave_up,
            abandoned,
            paths: run.config.routes.iter().map(|r| r.path.clone()).collect(),
        }
    }

    /// The rows of the requests written whole in `(from, to]`.
    fn written_in(&self, (from, to): (u64, u64)) -> impl Iterator<Item = usize> + '_ {
        self.written
            .iter()
            .filter(move |(at, _)| *at != NONE && *at > from && *at <= to)
            .map(|(_, row)| *row)
    }

    /// Times from the request written whole to `event` (first content, or the end of a
    /// completed request), for events in `(from, to]`, ns.
    fn times(&self, first_token: bool, (from, to): (u64, u64)) -> Vec<u64> {
        self.rows
            .iter()
            .filter(|(_, _, _, completed)| first_token || *completed)
            .filter_map(|&(written, first, terminal, _)| {
                let at = if first_token { first } else { terminal };
                (written != NONE && at != NONE && at > from && at <= to && at >= written)
                    .then(|| at - written)
            })
            .collect()
    }

    /// Completed requests ending in `(from, to]`.
    fn finished(&self, (from, to): (u64, u64)) -> u64 {
        self.rows
            .iter()
            .filter(|(_, _, terminal, completed)| *completed && *terminal > from && *terminal <= to)
            .count() as u64
    }
}

/// The evidence of `run`, or `None` when it journaled no scrape (nor a failed one).
pub fn evidence(
    (run, rules): (&Run, &Rules),
    windows: Option<&[WindowSpan]>,
    withheld: Option<String>,
    period_ms: f64,
) -> Option<ServerEvidence> {
    let sources = sources(run);
    if sources.is_empty() {
        return None;
    }
    let fired_ns = run.events.first(EventKind::FaultFired).map(|e| e.at_ns);
    let victim = run.config.fault.victim.as_deref();
    let period_ns = (period_ms * 1e6) as u64;
    let mut out = ServerEvidence {
        period_ms,
        sources: Vec::new(),
        windows: Vec::new(),
        windows_withheld: withheld,
        reconciliation: Vec::new(),
        preflight: preflight_note(
            run.header.fact(HostFact::Preflight),
            run.header.fact(HostFact::CapacityProbe),
        ),
        timeline: Vec::new(),
    };
    for source in &sources {
        out.sources.push(summary(source, fired_ns, victim));
        let client = Client::of(run, source.name, rules.streams);
        if let Some(whole) = (!source.points.is_empty())
            .then(|| (0, source.points.len() - 1))
            .filter(|(a, b)| b > a)
        {
            out.reconciliation
                .push(reconcile(source, &client, whole, (period_ns, rules)));
        }
        for window in windows.unwrap_or_default() {
            let mut window = window.clone();
            // A4: the canary's bound over the span the client's times are read over.
            if rules.canary == CanaryOver::Span
                && let Some((a, b)) = source.span(window.start_ns, window.end_ns)
            {
                let (a, b) = (mid(source.points[a]), mid(source.points[b]));
                window.canary_max_ns = canary_max(run, (a, b));
            }
            out.windows
                .push(server_window(run, (source, &client), &window, rules));
        }
        if windows.is_some() {
            out.timeline.extend(timeline(source, &client));
        }
    }
    Some(out)
}

/// One `canary` event read back: (p99, samples, max, interval), ns; `None` when its detail is
/// not in the recorder's form (formats/JOURNAL.md), so a damaged or foreign event is skipped.
pub(crate) fn canary_reading(e: &EventRecord) -> Option<(u64, u64, u64, u64)> {
    let field = |key: &str| -> Option<u64> {
        e.detail
            .split_whitespace()
            .find_map(|t| t.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
    };
    Some((
        u64::try_from(e.value?).ok()?,
        field("samples")?,
        field("max_ns")?,
        field("interval_ns")?,
    ))
}

/// The loopback canary's largest lag over the seconds that overlap `(from, to]`, ns.
fn canary_max(run: &Run, span: (u64, u64)) -> Option<u64> {
    let readings = run.events.all(EventKind::Canary).filter_map(|e| {
        let (_, _, max, interval) = canary_reading(e)?;
        Some((e.at_ns, interval, max))
    });
    largest_overlapping(readings, span)
}

/// The largest `max` of the canary readings `(at, interval, max)` (each over `(at - interval,
/// at]`) that overlap `(from, to)`.
fn largest_overlapping(
    readings: impl Iterator<Item = (u64, u64, u64)>,
    (from, to): (u64, u64),
) -> Option<u64> {
    readings
        .filter(|&(at, interval, _)| at > from && at.saturating_sub(interval) < to)
        .map(|(_, _, max)| max)
        .max()
}

/// Where the pre-flight's sample request stands in the reconciled counts.
fn preflight_note(fact: Option<&str>, probe: Option<&str>) -> String {
    // A capacity probe's samples are the first one and those after it, each answered (§10
    // "Capacity check"); one not answered may have reached the server too.
    let probed = probe
        .and_then(|p| percentes_formats::journal::probe::CapacityProbe::parse(p).ok())
        .map(|p| p.samples_ms.len())
        .filter(|&n| n > 1);
    match (fact, probed) {
        (Some(fact), Some(n)) => format!(
            "the pre-flight's {n} sample requests, its capacity probe (not scheduled requests; host facts `preflight`: {fact}; `capacity-probe`), were sent before the epoch and the first scrape, so they are in neither count; a count the server kept from before the run has them, {n} more than the journal's requests (one more again where a last sample was not answered)"
        ),
        (Some(fact), None) if fact.contains("one sample request") => format!(
            "the pre-flight's one sample request (not a scheduled request; host fact `preflight`: {fact}) was sent before the epoch and the first scrape, so it is in neither count; a count the server kept from before the run has it, one more than the journal's requests"
        ),
        (Some(fact), None) => format!("the pre-flight sent no sample request (host fact `preflight`: {fact})"),
        (None, _) => "this journal has no pre-flight fact".into(),
    }
}

fn summary(source: &Source<'_>, fired_ns: Option<u64>, victim: Option<&str>) -> SourceSummary {
    let roles: BTreeSet<Role> = source
        .series
        .values()
        .filter_map(|d| role_of(&d.family))
        .collect();
    let after_fire = fired_ns
        .filter(|_| victim == Some(source.name))
        .and_then(|fired| {
            let failed = source.failures.iter().find(|e| e.at_ns >= fired)?;
            source
                .points
                .iter()
                .find(|p| p.sent_ns > failed.at_ns)
                .map(|p| seconds(p.received_ns))
        });
    SourceSummary {
        source: source.name.to_owned(),
        answered: source.points.len() as u64,
        failed: source.failures.len() as u64,
        first_failure: source.failures.first().map(|e| e.detail.clone()),
        series: source.series.len() as u64,
        roles: roles.into_iter().map(Role::name).collect(),
        first_answer_s: source.points.first().map(|p| seconds(p.received_ns)),
        restarts_s: source
            .points
            .iter()
            .filter(|p| p.restarted)
            .map(|p| seconds(p.received_ns))
            .collect(),
        first_answer_after_fire_s: after_fire,
    }
}

fn reconcile(
    source: &Source<'_>,
    client: &Client,
    (from, to): (usize, usize),
    (period_ns, rules): (u64, &Rules),
) -> Reconciliation {
    let words = rules.words;
    let (a, b) = (mid(source.points[from]), mid(source.points[to]));
    // A4: where abandonment is its own outcome, the server's aborted requests are reconciled
    // with it, not among the finished.
    let planned = rules.abandoned == AbandonReading::Planned;
    let mut ids = source.ids(Role::Requests, "");
    let abort_ids = source.aborted_ids();
    if planned {
        ids.retain(|id| !abort_ids.contains(id));
    }
    let server = (!ids.is_empty()).then(|| source.increase(&ids, (from, to)));
    let client_finished = client.finished((a, b));
    let near = |t: u64| client.finished((t.saturating_sub(period_ns), t + period_ns));
    let margin = near(a) + near(b);
    let reconciled = server.map(|s| (s - client_finished as f64).abs() <= margin as f64);
    let text = match (server, reconciled) {
        (None, _) => format!(
            "{}: no finished-request counter among the scraped series; the client saw {client_finished} complete",
            source.name
        ),
        (Some(s), Some(true)) => format!(
            "{}: the server counted {s:.0} finished, the client saw {client_finished} complete, between {:.3} s and {:.3} s: reconciled (within the {margin} that ended within one scrape period of either end)",
            source.name,
            seconds(a),
            seconds(b)
        ),
        (Some(s), _) => format!(
            "{}: the server counted {s:.0} finished, the client saw {client_finished} complete, between {:.3} s and {:.3} s: NOT reconciled (they differ by {:.0}, more than the {margin} that ended within one scrape period of either end: another client of the server, requests the client did not attribute to it, or requests it finished that the client saw fail)",
            source.name,
            seconds(a),
            seconds(b),
            (s - client_finished as f64).abs()
        ),
    };
    // A4 (issue 52): requests the client gave up on are in neither side's sure count.
    let gave_up = client.gave_up.iter().filter(|&&t| t > a && t <= b).count();
    let text = match words {
        ReadingWords::WhatWasMeasured if gave_up > 0 => format!(
            "{text}; the client gave up on {gave_up} request(s) to it in the span (censored at its deadline): not in the client's count, and in the server's only where it ran one to its end after the client left (a server that aborts it may count it among its finished, or not at all)"
        ),
        _ => text,
    };
    let aborts = (planned && !client.abandoned.is_empty())
        .then(|| aborts(source, client, (from, to), period_ns));
    let text = match &aborts {
        Some(x) => format!("{text}; {}", x.words()),
        None => text,
    };
    Reconciliation {
        source: source.name.to_owned(),
        span_s: (seconds(a), seconds(b)),
        server_finished: server,
        client_finished,
        margin,
        reconciled,
        text,
        aborts,
    }
}

/// A4: the server's aborted requests over `(from, to]` against the client's abandoned ones
/// whose instant fell there, within the ones abandoned within a scrape period of either end.
fn aborts(
    source: &Source<'_>,
    client: &Client,
    (from, to): (usize, usize),
    period_ns: u64,
) -> AbortReconciliation {
    let (a, b) = (mid(source.points[from]), mid(source.points[to]));
    let ids = source.aborted_ids();
    let server_aborted = (!ids.is_empty()).then(|| source.increase(&ids, (from, to)));
    // vLLM 0.32 stops a request whose client closed it without counting it under any finish
    // reason: what its front end answered 2xx on the run's paths, less what it finished, is.
    let received = source.received_ids(&client.paths);
    let finished = source.ids(Role::Requests, "");
    let server_unfinished = (!received.is_empty() && !finished.is_empty())
        .then(|| source.increase(&received, (from, to)) - source.increase(&finished, (from, to)));
    let evidence = server_aborted
        .filter(|&n| n > 0.0)
        .or(server_unfinished)
        .or(server_aborted);
    let count = |(x, y): (u64, u64)| {
        client
            .abandoned
            .iter()
            .filter(|&&t| t > x && t <= y)
            .count() as u64
    };
    let client_abandoned = count((a, b));
    let margin = count((a.saturating_sub(period_ns), a + period_ns))
        + count((b.saturating_sub(period_ns), b + period_ns));
    AbortReconciliation {
        server_aborted,
        server_unfinished,
        client_abandoned,
        margin,
        reconciled: evidence.map(|s| (s - client_abandoned as f64).abs() <= margin as f64),
    }
}

/// Each scrape of `source` as a point: its gauges, and the first-token means of the server
/// and the client over the interval since the previous scrape. One pass over the scrapes.
fn timeline(source: &Source<'_>, client: &Client) -> Vec<ServerPoint> {
    let (queue, running) = (source.ids(Role::Queue, ""), source.ids(Role::Running, ""));
    let (sum, count) = (
        source.ids(Role::FirstToken, "_sum"),
        source.ids(Role::FirstToken, "_count"),
    );
    let mut firsts: Vec<(u64, u64)> = client
        .rows
        .iter()
        .filter(|(written, first, _, _)| *written != NONE && *first != NONE && first >= written)
        .map(|&(written, first, _, _)| (first, first - written))
        .collect();
    firsts.sort_unstable();
    let mut now: BTreeMap<u32, f64> = BTreeMap::new();
    let mut out = Vec::new();
    let mut previous: Option<u64> = None;
    for p in &source.points {
        for gone in &p.gone {
            now.remove(gone);
        }
        let (mut s, mut n) = (0.0, 0.0);
        for sample in &p.samples {
            now.insert(sample.id, sample.value);
            if !p.first && sum.contains(&sample.id) {
                s += sample.value;
            }
            if !p.first && count.contains(&sample.id) {
                n += sample.value;
            }
        }
        let reading = |ids: &[u32]| {
            let values: Vec<f64> = ids.iter().filter_map(|id| now.get(id)).copied().collect();
            (!values.is_empty()).then(|| values.iter().sum())
        };
        let at = mid(p);
        let client_ms = previous.and_then(|from| {
            let lo = firsts.partition_point(|(t, _)| *t <= from);
            let hi = firsts.partition_point(|(t, _)| *t <= at);
            let times = &firsts[lo..hi];
            (!times.is_empty()).then(|| {
                times.iter().map(|(_, d)| *d as f64).sum::<f64>() / times.len() as f64 / 1e6
            })
        });
        out.push(ServerPoint {
            source: source.name.to_owned(),
            t_s: seconds(at),
            queue: reading(&queue),
            running: reading(&running),
            server_first_token_ms: (n >= 1.0).then(|| s / n * 1e3),
            client_first_token_ms: client_ms,
        });
        previous = Some(at);
    }
    out
}

fn gauge_summary(values: &[f64], scale: f64) -> Option<GaugeSummary> {
    (!values.is_empty()).then(|| GaugeSummary {
        mean: values.iter().sum::<f64>() / values.len() as f64 * scale,
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max) * scale,
        scrapes: values.len() as u64,
    })
}

fn server_window(
    run: &Run,
    (source, client): (&Source<'_>, &Client),
    window: &WindowSpan,
    rules: &Rules,
) -> ServerWindow {
    let mut out = ServerWindow {
        window: window.name,
        source: source.name.to_owned(),
        span_s: None,
        first_token: None,
        end_to_end: None,
        queue: None,
        running: None,
        kv_cache_percent: None,
        preemptions: None,
        server_finished: None,
        client_finished: 0,
        path: None,
        prefix_cache: None,
    };
    let Some(span) = source.span(window.start_ns, window.end_ns) else {
        return out;
    };
    let (a, b) = (mid(source.points[span.0]), mid(source.points[span.1]));
    out.span_s = Some((seconds(a), seconds(b)));
    let compare = |role: Role, first_token: bool| {
        let histogram = source.histogram(role, span)?;
        let times = client.times(first_token, (a, b));
        Some(comparison(
            &histogram,
            times,
            window.canary_max_ns,
            rules.verdict,
        ))
    };
    out.first_token = compare(Role::FirstToken, true);
    out.end_to_end = compare(Role::EndToEnd, false);
    if rules.path == FirstTokenPath::Decomposed {
        out.path = out
            .first_token
            .as_ref()
            .and_then(|first| server_path(first, out.end_to_end.as_ref()));
    }
    let gauge =
        |role: Role, scale: f64| gauge_summary(&source.gauge(&source.ids(role, ""), span), scale);
    out.queue = gauge(Role::Queue, 1.0);
    out.running = gauge(Role::Running, 1.0);
    out.kv_cache_percent = gauge(Role::KvCache, 100.0);
    let counter = |role: Role| {
        let ids = source.ids(role, "");
        (!ids.is_empty()).then(|| source.increase(&ids, span))
    };
    out.preemptions = counter(Role::Preemptions);
    out.server_finished = counter(Role::Requests);
    out.client_finished = client.finished((a, b));
    if rules.prefix_cache == PrefixCacheReading::HitShare {
        out.prefix_cache = prefix_reading(run, (source, client), span, (a, b));
    }
    out
}

/// A4: the server's prefix cache over `span` and, where the workload declares shared prefixes,
/// the reuse it designed for the requests written over the same times, with the verdict.
fn prefix_reading(
    run: &Run,
    (source, client): (&Source<'_>, &Client),
    span: (usize, usize),
    times: (u64, u64),
) -> Option<PrefixCache> {
    let mut p = prefix_cache(source, span)?;
    p.designed =
        crate::load::prefixes::designed(run, client.written_in(times), block_tokens(source));
    // A server that looked nothing up while prompts reached it (prefix caching off) held none
    // of them.
    p.verdict = p.designed.as_ref().and_then(|d| {
        let hit = p
            .hit_percent
            .or((p.queried_tokens == 0.0 && d.prompt_tokens > 0).then_some(0.0))?;
        Some(crate::load::prefixes::verdict(hit, d.designed_percent?))
    });
    Some(p)
}

/// The server's prefix-cache block, tokens: the `block_size` label of its cache configuration
/// (vLLM's `cache_config_info`); `None` where it exposes none.
fn block_tokens(source: &Source<'_>) -> Option<u32> {
    source
        .series
        .values()
        .filter(|d| role_of(&d.family) == Some(Role::CacheConfig))
        .flat_map(|d| &d.labels)
        .find(|(k, _)| k == "block_size")
        .and_then(|(_, v)| v.parse::<u32>().ok())
        .filter(|b| *b > 0)
}

/// A4: the prefix cache's hits over its lookups between the scrapes `span` names, from the
/// server's own counters (in tokens, as vLLM counts them; SGLang's cached prompt tokens over
/// its prompt tokens, where it counts no lookups); `None` where it exposes neither.
fn prefix_cache(source: &Source<'_>, span: (usize, usize)) -> Option<PrefixCache> {
    let hits = source.ids(Role::PrefixHits, "");
    let queries = match source.ids(Role::PrefixQueries, "") {
        none if none.is_empty() => source.ids(Role::PromptTokens, ""),
        queries => queries,
    };
    if queries.is_empty() || hits.is_empty() {
        return None;
    }
    let (queried_tokens, hit_tokens) = (
        source.increase(&queries, span),
        source.increase(&hits, span),
    );
    Some(PrefixCache {
        queried_tokens,
        hit_tokens,
        hit_percent: (queried_tokens > 0.0).then(|| hit_tokens / queried_tokens * 100.0),
        designed: None,
        verdict: None,
    })
}

/// The receive-path check of one histogram against the client's times over the same span
/// (SPEC §2): the means, the compared quantiles, and the verdict.
pub fn comparison(
    histogram: &Histogram,
    mut times: Vec<u64>,
    canary_max_ns: Option<u64>,
    basis: VerdictBasis,
) -> ServerComparison {
    times.sort_unstable();
    let ms = |ns: f64| ns / 1e6;
    let server_n = histogram.count.round().max(0.0) as u64;
    let client_n = times.len() as u64;
    let server_mean_ms = (server_n > 0).then(|| histogram.sum / histogram.count * 1e3);
    let client_mean_ms =
        (client_n > 0).then(|| ms(times.iter().map(|&t| t as f64).sum::<f64>() / client_n as f64));
    let canary_ms = canary_max_ns.map(|ns| ms(ns as f64));
    let mut quantiles = Vec::new();
    for q in COMPARED {
        let needed = (1.0 / (1.0 - q)).round() as u64;
        if server_n < needed || client_n < needed {
            continue;
        }
        let Some((low, high)) = histogram.bucket_of(q) else {
            continue;
        };
        let rank = ((q * client_n as f64).ceil() as usize).max(1);
        quantiles.push(QuantileComparison {
            q,
            server_low_ms: low * 1e3,
            server_high_ms: high.is_finite().then_some(high * 1e3),
            client_ms: ms(times[rank - 1] as f64),
        });
    }
    let mean_difference_ms = server_mean_ms.zip(client_mean_ms).map(|(s, c)| c - s);
    let (mut verdict, mut why) = judge(&quantiles, canary_ms, (server_n, client_n));
    if basis == VerdictBasis::MeansWhereBucketsCannot
        && verdict == "within-bounds"
        && let Some(judged) = judge_means(&quantiles, canary_ms, mean_difference_ms)
    {
        (verdict, why) = judged;
    }
    let server_share_percent = server_mean_ms
        .zip(client_mean_ms)
        .filter(|(_, c)| *c > 0.0)
        .map(|(s, c)| s / c * 100.0);
    let canary_words = canary_ms.map_or(
        "no loopback canary bounds the read loop here".to_owned(),
        |c| format!("the canary bounds the read loop's lag at {c:.3} ms"),
    );
    let text = match (server_mean_ms, client_mean_ms, mean_difference_ms) {
        (Some(s), Some(c), Some(d)) => format!(
            "{}: the server's mean {s:.3} ms over {server_n}, the client's {c:.3} ms over {client_n}: the server accounts for {:.1} % of it, {d:.3} ms lies outside its clock ({canary_words}); {why}",
            histogram.family,
            server_share_percent.unwrap_or(f64::NAN)
        ),
        _ => format!("{}: {why}", histogram.family),
    };
    ServerComparison {
        family: histogram.family.clone(),
        server_n,
        server_mean_ms,
        client_n,
        client_mean_ms,
        mean_difference_ms,
        server_share_percent,
        quantiles,
        canary_max_ms: canary_ms,
        verdict,
        text,
    }
}

/// Whether a series kind code is one the analysis reads as increases (for the export).
pub fn cumulative(kind: u8) -> bool {
    SeriesKind::from_code(kind).is_some_and(SeriesKind::cumulative)
}

#[cfg(test)]
mod tests {
    use super::*;

    use percentes_formats::journal::scrape::Scraper;
    use percentes_formats::prometheus::Exposed;

    #[test]
    fn the_count_the_server_kept_before_the_run_holds_every_sample_the_preflight_sent() {
        let fact = "GET /v1/models: HTTP 200 in 1.0 ms; POST /v1/completions (one sample request, not scheduled, before the epoch): HTTP 200 in 40.0 ms";
        let one = preflight_note(Some(fact), None);
        assert!(
            one.contains("one more than the journal's requests"),
            "{one}"
        );
        // A capacity probe of five answered samples (§10): five more.
        let five = preflight_note(Some(fact), Some("service_ms=40,41,40,39,42"));
        assert!(
            five.contains("5 more than the journal's requests"),
            "{five}"
        );
        // A probe of one sample is the one sample.
        assert_eq!(preflight_note(Some(fact), Some("service_ms=40")), one);
        assert!(preflight_note(None, None).contains("no pre-flight fact"));
    }

    fn exposed(
        name: &str,
        family: &str,
        le: Option<&str>,
        kind: SeriesKind,
        value: f64,
    ) -> Exposed {
        let mut labels = vec![("model_name".to_owned(), "m".to_owned())];
        if let Some(le) = le {
            labels.push(("le".into(), le.into()));
        }
        Exposed {
            name: name.into(),
            family: family.into(),
            labels,
            kind,
            value,
        }
    }

    /// `records` as one source, `replica-0`, with the series its first record defines.
    fn source_of(records: &[ScrapeRecord]) -> Source<'_> {
        let mut source = Source {
            name: "replica-0",
            points: records.iter().collect(),
            series: BTreeMap::new(),
            failures: Vec::new(),
        };
        for d in &records[0].defined {
            source.series.insert(d.id, d);
        }
        source
    }

    /// Hand-worked: scrapes at 0, 1, 2 and 3 s (midpoints). Finished requests 10 (a base from
    /// before the run), 12, 15, 15; waiting 1, 3, 3, 0; first-token observations 0, 2 (both at
    /// or below 10 ms, sum 0.012 s), then 1 more in (10, 20] ms (sum 0.027 s). The window
    /// [0.5, 2.5) s spans the scrapes at 0 and 2 s: 5 finished, waiting mean 7/3 and max 3, three
    /// first tokens with mean 9 ms, median in (0, 10] ms. A window before any scrape after the
    /// first has no span.
    #[test]
    fn a_window_reads_the_increases_between_the_scrapes_that_bound_it() {
        let ttft = "vllm:time_to_first_token_seconds";
        let answer = |finished: f64, waiting: f64, low: f64, all: f64, sum: f64| {
            vec![
                exposed(
                    "vllm:request_success_total",
                    "vllm:request_success",
                    None,
                    SeriesKind::Counter,
                    finished,
                ),
                exposed(
                    "vllm:num_requests_waiting",
                    "vllm:num_requests_waiting",
                    None,
                    SeriesKind::Gauge,
                    waiting,
                ),
                exposed(
                    &format!("{ttft}_bucket"),
                    ttft,
                    Some("0.01"),
                    SeriesKind::Histogram,
                    low,
                ),
                exposed(
                    &format!("{ttft}_bucket"),
                    ttft,
                    Some("0.02"),
                    SeriesKind::Histogram,
                    all,
                ),
                exposed(
                    &format!("{ttft}_bucket"),
                    ttft,
                    Some("+Inf"),
                    SeriesKind::Histogram,
                    all,
                ),
                exposed(
                    &format!("{ttft}_count"),
                    ttft,
                    None,
                    SeriesKind::Histogram,
                    all,
                ),
                exposed(
                    &format!("{ttft}_sum"),
                    ttft,
                    None,
                    SeriesKind::Histogram,
                    sum,
                ),
            ]
        };
        let s = 1_000_000_000u64;
        let mut scraper = Scraper::default();
        let records: Vec<ScrapeRecord> = [
            (0, answer(10.0, 1.0, 0.0, 0.0, 0.0)),
            (1, answer(12.0, 3.0, 2.0, 2.0, 0.012)),
            (2, answer(15.0, 3.0, 2.0, 3.0, 0.027)),
            (3, answer(15.0, 0.0, 2.0, 3.0, 0.027)),
        ]
        .iter()
        .map(|(t, samples)| scraper.record("replica-0", (t * s, t * s), samples))
        .collect();
        let source = source_of(&records);
        let span = source.span(s / 2, 5 * s / 2).unwrap();
        assert_eq!(span, (0, 2));
        assert_eq!(source.increase(&source.ids(Role::Requests, ""), span), 5.0);
        assert_eq!(
            source.gauge(&source.ids(Role::Queue, ""), span),
            [1.0, 3.0, 3.0]
        );
        let h = source.histogram(Role::FirstToken, span).unwrap();
        assert_eq!(h.count, 3.0);
        assert!((h.sum - 0.027).abs() < 1e-12);
        assert_eq!(
            h.cumulative,
            [(0.01, 2.0), (0.02, 3.0), (f64::INFINITY, 3.0)]
        );
        assert_eq!(h.bucket_of(0.5), Some((0.0, 0.01)));
        assert_eq!(source.span(0, s / 2), None, "no second scrape inside it");
        // Issue 53: a window that starts before the first scrape has no scrape at or before its
        // start; its span starts at the first scrape after it (here the window [0, 2.5 s) read
        // from the scrapes at 1 s and 2 s once the one at 0 s is gone).
        let later = Source {
            points: records[1..].iter().collect(),
            ..source.clone()
        };
        assert_eq!(later.span(s / 2, 5 * s / 2), Some((0, 1)));
        let whole = source.span(0, 3 * s).unwrap();
        assert_eq!(
            source.increase(&source.ids(Role::Requests, ""), whole),
            5.0,
            "the base is not an increase"
        );
    }

    /// The cache's block from vLLM's info gauge (its `block_size` label, as vLLM 0.32 serves
    /// it among a dozen others); none without the gauge, or with a label that is no count.
    #[test]
    fn the_block_is_read_from_the_cache_configuration() {
        let info = |block: &str| {
            let mut e = exposed(
                "vllm:cache_config_info",
                "vllm:cache_config_info",
                None,
                SeriesKind::Gauge,
                1.0,
            );
            e.labels
                .push(("enable_prefix_caching".into(), "True".into()));
            e.labels.push(("block_size".into(), block.into()));
            vec![e]
        };
        let block_of = |samples: Vec<Exposed>| {
            let mut scraper = Scraper::default();
            let records = [scraper.record("replica-0", (0, 0), &samples)];
            block_tokens(&source_of(&records))
        };
        assert_eq!(block_of(info("128")), Some(128));
        assert_eq!(block_of(info("None")), None);
        assert_eq!(block_of(info("0")), None);
        let waiting = exposed(
            "vllm:num_requests_waiting",
            "vllm:num_requests_waiting",
            None,
            SeriesKind::Gauge,
            1.0,
        );
        assert_eq!(block_of(vec![waiting]), None);
    }

    /// Hand-worked (issue 55 item 2): the prefix cache's counters at 0, 1, 2 and 3 s, queries
    /// 500 (a base), 600, 800, 800 tokens and hits 100, 140, 290, 290: between the scrapes at 0
    /// and 2 s it looked up 300 tokens and held 190 of them, 63.33 %; between 2 and 3 s it looked
    /// up none, and has no share. A source without the counters has no reading. SGLang's, below.
    #[test]
    fn the_prefix_cache_share_is_read_from_the_servers_own_counters() {
        let answer = |queries: f64, hits: f64| {
            vec![
                exposed(
                    "vllm:prefix_cache_queries_total",
                    "vllm:prefix_cache_queries",
                    None,
                    SeriesKind::Counter,
                    queries,
                ),
                exposed(
                    "vllm:prefix_cache_hits_total",
                    "vllm:prefix_cache_hits",
                    None,
                    SeriesKind::Counter,
                    hits,
                ),
            ]
        };
        let s = 1_000_000_000u64;
        let mut scraper = Scraper::default();
        let records: Vec<ScrapeRecord> = [
            (0, answer(500.0, 100.0)),
            (1, answer(600.0, 140.0)),
            (2, answer(800.0, 290.0)),
            (3, answer(800.0, 290.0)),
        ]
        .iter()
        .map(|(t, samples)| scraper.record("replica-0", (t * s, t * s), samples))
        .collect();
        let source = source_of(&records);
        let p = prefix_cache(&source, (0, 2)).unwrap();
        assert_eq!((p.queried_tokens, p.hit_tokens), (300.0, 190.0));
        assert!((p.hit_percent.unwrap() - 190.0 / 3.0).abs() < 1e-12);
        assert_eq!(prefix_cache(&source, (2, 3)).unwrap().hit_percent, None);
        let other = [exposed(
            "vllm:num_requests_waiting",
            "vllm:num_requests_waiting",
            None,
            SeriesKind::Gauge,
            1.0,
        )];
        let mut scraper = Scraper::default();
        let records: Vec<ScrapeRecord> = (0..2)
            .map(|t| scraper.record("replica-0", (t * s, t * s), &other))
            .collect();
        assert_eq!(prefix_cache(&source_of(&records), (0, 1)), None);
        // SGLang counts cached prompt tokens (by cache source) and prompt tokens, no lookups:
        // prompt 1,000, 1,400, 2,000 and cached (device + host) 0 + 0, 200 + 40, 500 + 100:
        // over (0, 2] 600 of 1,000, 60 %.
        let sglang = |prompt: f64, device: f64, host: f64| {
            let cached = |source: &str, value: f64| {
                let mut e = exposed(
                    "sglang:cached_tokens_total",
                    "sglang:cached_tokens",
                    None,
                    SeriesKind::Counter,
                    value,
                );
                e.labels.push(("cache_source".into(), source.into()));
                e
            };
            vec![
                exposed(
                    "sglang:prompt_tokens_total",
                    "sglang:prompt_tokens",
                    None,
                    SeriesKind::Counter,
                    prompt,
                ),
                cached("device", device),
                cached("host", host),
            ]
        };
        let mut scraper = Scraper::default();
        let records: Vec<ScrapeRecord> = [
            sglang(1_000.0, 0.0, 0.0),
            sglang(1_400.0, 200.0, 40.0),
            sglang(2_000.0, 500.0, 100.0),
        ]
        .iter()
        .enumerate()
        .map(|(t, samples)| scraper.record("replica-0", (t as u64 * s, t as u64 * s), samples))
        .collect();
        let p = prefix_cache(&source_of(&records), (0, 2)).unwrap();
        assert_eq!((p.queried_tokens, p.hit_tokens), (1_000.0, 600.0));
        assert!((p.hit_percent.unwrap() - 60.0).abs() < 1e-12);
    }

    fn histogram(cumulative: &[(f64, f64)], sum: f64) -> Histogram {
        Histogram {
            family: "vllm:time_to_first_token_seconds".into(),
            cumulative: cumulative.to_vec(),
            count: cumulative.last().unwrap().1,
            sum,
        }
    }

    /// Ten first tokens: 4 at or below 10 ms, 9 at or below 20 ms, all by 40 ms; mean 15 ms.
    fn ten_observations() -> Histogram {
        histogram(
            &[
                (0.01, 4.0),
                (0.02, 9.0),
                (0.04, 10.0),
                (f64::INFINITY, 10.0),
            ],
            0.15,
        )
    }

    /// Hand-worked: 10 observations, 4 at or below 10 ms, 9 at or below 20 ms, all by 40 ms;
    /// the median (rank 5) lies in (10, 20] ms, p90 (rank 9) too. The client's 10 times, 1 ms
    /// later each, put its median at 16 ms and its p90 at 21 ms: 1 ms past the bucket, within
    /// a 1.5 ms canary bound, outside a 0.5 ms one.
    #[test]
    fn quantiles_are_placed_in_their_buckets_and_judged_against_the_canary() {
        let h = ten_observations();
        assert_eq!(h.bucket_of(0.5), Some((0.01, 0.02)));
        assert_eq!(h.bucket_of(0.9), Some((0.01, 0.02)));
        assert_eq!(h.bucket_of(0.99), Some((0.02, 0.04)));
        let ms = 1_000_000;
        let times: Vec<u64> = [6, 7, 8, 9, 16, 17, 18, 19, 21, 31]
            .iter()
            .map(|t| t * ms)
            .collect();
        let c = comparison(&h, times.clone(), Some(3 * ms / 2), VerdictBasis::Buckets);
        assert_eq!(c.verdict, "within-bounds", "{}", c.text);
        assert_eq!(c.quantiles.len(), 2, "p99 needs 100 on each side");
        assert_eq!(c.quantiles[0].client_ms, 16.0);
        assert_eq!(c.quantiles[1].client_ms, 21.0);
        assert!((c.server_mean_ms.unwrap() - 15.0).abs() < 1e-9);
        assert!((c.client_mean_ms.unwrap() - 15.2).abs() < 1e-9);
        assert!((c.mean_difference_ms.unwrap() - 0.2).abs() < 1e-9);
        let c = comparison(&h, times.clone(), Some(ms / 2), VerdictBasis::Buckets);
        assert_eq!(c.verdict, "client-later", "{}", c.text);
        assert!(c.text.contains("p90 (21.000 ms)"), "{}", c.text);
        let early: Vec<u64> = times.iter().map(|t| t / 4).collect();
        assert_eq!(
            comparison(&h, early, None, VerdictBasis::Buckets).verdict,
            "client-earlier"
        );
        assert_eq!(
            comparison(&h, Vec::new(), None, VerdictBasis::Buckets).verdict,
            "not-comparable"
        );
    }

    /// Issue 53 (SPEC §2, v0.5): the canary's bound is read over the span, not the window. A
    /// canary second ending at 11 s lagged 9 ms, every other 1 ms: a window [1 s, 10 s) does
    /// not reach it; its span, the scrapes at 2 s and 11 s, does.
    #[test]
    fn the_canary_is_read_over_the_span() {
        let s = 1_000_000_000u64;
        let readings =
            || (1..=12u64).map(|t| (t * s, s, if t == 11 { 9_000_000 } else { 1_000_000 }));
        assert_eq!(
            largest_overlapping(readings(), (s, 10 * s)),
            Some(1_000_000)
        );
        assert_eq!(
            largest_overlapping(readings(), (2 * s, 11 * s)),
            Some(9_000_000)
        );
        assert_eq!(largest_overlapping(std::iter::empty(), (0, s)), None);
    }

    /// Issue 53 (SPEC §2): each side's quantile is at its own rank, ceil(q n) of its own n (the
    /// server's 10 against the client's 20 here: ranks 5 and 10); and a window where one client
    /// quantile lies below its bucket and another above it reads client-earlier, the two sides
    /// not counting the same requests making the other comparison moot.
    #[test]
    fn each_side_reads_its_own_rank_and_a_mixed_window_is_client_earlier() {
        let h = ten_observations();
        let ms = 1_000_000u64;
        // Twenty client times, 6 to 25 ms: rank 10 of 20 is 15 ms, inside the median's bucket
        // (10, 20] ms; the server's rank 5 would have read 10 ms.
        let times: Vec<u64> = (1..=20).map(|t| (t + 5) * ms).collect();
        let c = comparison(&h, times.clone(), None, VerdictBasis::Buckets);
        let median = c.quantiles.iter().find(|q| q.q == 0.5).unwrap();
        assert_eq!(median.client_ms, 15.0);
        // The p90 at rank 18 of 20 (23 ms), the server's at rank 9 of 10.
        let p90 = c.quantiles.iter().find(|q| q.q == 0.9).unwrap();
        assert_eq!((p90.client_ms, p90.server_high_ms), (23.0, Some(20.0)));
        // Mixed: the median below its bucket, the p90 far above it.
        let mixed: Vec<u64> = [1, 2, 3, 4, 5, 6, 7, 8, 90, 95]
            .iter()
            .map(|t| t * ms)
            .collect();
        let c = comparison(&h, mixed, None, VerdictBasis::Buckets);
        assert_eq!(c.verdict, "client-earlier", "{}", c.text);
    }

    /// Issue 53 (SPEC §2): the client's requests in a span are those whose event (the first
    /// token, or the completion) falls in it, as the server's histogram counts an observation
    /// when it is made, not those sent or intended in it. Span (1 s, 2 s]: a request written at
    /// 0.5 s whose first token came at 1.5 s is in it; one written at 1.8 s whose first token
    /// came at 2.3 s is not.
    #[test]
    fn a_spans_client_requests_are_read_by_event_time() {
        let s = 1_000_000_000u64;
        let client = Client {
            rows: vec![
                (s / 2, 3 * s / 2, 2 * s, true),
                (9 * s / 5, 23 * s / 10, 5 * s / 2, true),
            ],
            written: Vec::new(),
            gave_up: Vec::new(),
            abandoned: Vec::new(),
            paths: Vec::new(),
        };
        assert_eq!(client.times(true, (s, 2 * s)), [s]);
        assert_eq!(client.finished((s, 2 * s)), 1);
    }

    /// Issue 52 (SPEC §2, A4): the fault window of the vLLM study in small. Ten first tokens in
    /// vLLM's (1.0, 2.5] s bucket with a mean of 1.5 s; the client's ten at 1.782 s, 282 ms
    /// later, inside the same bucket. The buckets read "within-bounds"; v0.5 reads the means:
    /// 282 ms apart, more than the 12 ms canary bound, and the bucket 1.5 s wide, so the
    /// verdict is "not-resolvable" with the means' difference as the figure.
    #[test]
    fn a_bucket_wider_than_the_gap_cannot_pass_it_under_v0_5() {
        let h = histogram(&[(1.0, 0.0), (2.5, 10.0), (f64::INFINITY, 10.0)], 15.0);
        let ms = 1_000_000u64;
        let times = vec![1782 * ms; 10];
        let old = comparison(&h, times.clone(), Some(12 * ms), VerdictBasis::Buckets);
        assert_eq!(old.verdict, "within-bounds", "{}", old.text);
        let new = comparison(
            &h,
            times,
            Some(12 * ms),
            VerdictBasis::MeansWhereBucketsCannot,
        );
        assert_eq!(new.verdict, "not-resolvable", "{}", new.text);
        assert!(
            new.text.contains("1000.000-2500.000 ms")
                && new.text.contains("282.000 ms outside the server's clock"),
            "{}",
            new.text
        );
    }

    /// Hand-worked: ten server observations in (10, 12] ms, mean 11 ms; the client's nine at
    /// 11.5 ms and one at 100 ms (mean 20.35 ms): its p50 and p90 (ranks 5 and 9) lie in the
    /// bucket, but the means are 9.35 ms apart, wider than the 2 ms bucket: client-later under
    /// v0.5. Means within the canary's bound keep the buckets' verdict (the first test's
    /// 0.2 ms within 1.5 ms).
    #[test]
    fn means_further_apart_than_every_bucket_is_wide_are_client_later() {
        let h = histogram(&[(0.010, 0.0), (0.012, 10.0), (f64::INFINITY, 10.0)], 0.11);
        let ms = 1_000_000u64;
        let mut times = vec![11 * ms + ms / 2; 9];
        times.push(100 * ms);
        let c = comparison(&h, times.clone(), None, VerdictBasis::Buckets);
        assert_eq!(c.verdict, "within-bounds", "{}", c.text);
        let c = comparison(&h, times, None, VerdictBasis::MeansWhereBucketsCannot);
        assert_eq!(c.verdict, "client-later", "{}", c.text);
        assert!(c.text.contains("9.350 ms later"), "{}", c.text);
        let h = ten_observations();
        let agree: Vec<u64> = [6, 7, 8, 9, 16, 17, 18, 19, 21, 31]
            .iter()
            .map(|t| t * ms)
            .collect();
        let c = comparison(
            &h,
            agree,
            Some(3 * ms / 2),
            VerdictBasis::MeansWhereBucketsCannot,
        );
        assert_eq!(c.verdict, "within-bounds", "{}", c.text);
    }

    /// Hand-worked (issue 52's baseline): the server's first tokens average 30 ms and its
    /// end-to-end 450 ms; the client's 220 ms and 456 ms. The first-token gap is 190 ms, the
    /// end-to-end gap 6 ms: at most 6 ms came before the server's clock started, so at least
    /// 184 ms (83.6 % of 220) came after its first token: the held-after-the-server signature.
    /// Without end-to-end means the gap is not split; with the client's end-to-end below the
    /// server's (the spans' requests differ) neither.
    #[test]
    fn the_first_token_gap_is_split_by_the_end_to_end_gap() {
        let ms = 1_000_000u64;
        let first = comparison(
            &histogram(&[(0.05, 10.0), (f64::INFINITY, 10.0)], 0.3),
            vec![220 * ms; 10],
            None,
            VerdictBasis::MeansWhereBucketsCannot,
        );
        let e2e = comparison(
            &histogram(&[(0.5, 10.0), (f64::INFINITY, 10.0)], 4.5),
            vec![456 * ms; 10],
            None,
            VerdictBasis::MeansWhereBucketsCannot,
        );
        let split = server_path(&first, Some(&e2e)).unwrap();
        assert!((split.inside_server_ms - 30.0).abs() < 1e-9);
        assert!((split.end_to_end_gap_ms.unwrap() - 6.0).abs() < 1e-9);
        assert!((split.after_server_at_least_ms.unwrap() - 184.0).abs() < 1e-9);
        let signature = split.signature.unwrap();
        assert_eq!(signature.name, "held-after-the-server");
        assert!(signature.text.contains("(83.6 %"), "{}", signature.text);
        let alone = server_path(&first, None).unwrap();
        assert!(alone.after_server_at_least_ms.is_none() && alone.signature.is_none());
        assert!(alone.text.contains("not split"), "{}", alone.text);
        let below = comparison(
            &histogram(&[(0.5, 10.0), (f64::INFINITY, 10.0)], 4.5),
            vec![440 * ms; 10],
            None,
            VerdictBasis::MeansWhereBucketsCannot,
        );
        let mixed = server_path(&first, Some(&below)).unwrap();
        assert!(mixed.after_server_at_least_ms.is_none() && mixed.signature.is_none());
        // A gap that is mostly before the server's clock is no signature: end-to-end 180 ms
        // apart leaves at least 10 ms after the first token, 4.5 % of 220.
        let early = comparison(
            &histogram(&[(0.5, 10.0), (f64::INFINITY, 10.0)], 4.5),
            vec![630 * ms; 10],
            None,
            VerdictBasis::MeansWhereBucketsCannot,
        );
        let early = server_path(&first, Some(&early)).unwrap();
        assert!((early.after_server_at_least_ms.unwrap() - 10.0).abs() < 1e-9);
        assert!(early.signature.is_none());
    }

    /// Issue 52 (A4): a reconciliation says how many requests the client gave up on in its span
    /// (censored), which neither count holds for sure. Scrapes at 0, 1 and 2 s of a counter
    /// 0, 2, 3 (3 finished); the client saw 2 complete and gave up on one at 1.5 s, and one at
    /// 2.5 s, outside the span. v0.4 says nothing of them.
    #[test]
    fn a_reconciliation_names_the_requests_the_client_gave_up_on() {
        let s = 1_000_000_000u64;
        let mut scraper = Scraper::default();
        let records: Vec<ScrapeRecord> = [0.0, 2.0, 3.0]
            .iter()
            .enumerate()
            .map(|(t, &finished)| {
                let t = t as u64 * s;
                scraper.record(
                    "replica-0",
                    (t, t),
                    &[exposed(
                        "vllm:request_success_total",
                        "vllm:request_success",
                        None,
                        SeriesKind::Counter,
                        finished,
                    )],
                )
            })
            .collect();
        let source = source_of(&records);
        let client = Client {
            rows: vec![(0, s / 10, s / 2, true), (s, s + s / 10, 3 * s / 2, true)],
            written: Vec::new(),
            gave_up: vec![3 * s / 2, 5 * s / 2],
            abandoned: Vec::new(),
            paths: Vec::new(),
        };
        let period = s / 10;
        let v5 = Rules::of(percentes_formats::spec::Spec::V0_5);
        let r = reconcile(&source, &client, (0, 2), (period, &v5));
        assert_eq!((r.server_finished, r.client_finished), (Some(3.0), 2));
        assert!(
            r.text
                .contains("the client gave up on 1 request(s) to it in the span"),
            "{}",
            r.text
        );
        let v4 = Rules::of(percentes_formats::spec::Spec::V0_4);
        let old = reconcile(&source, &client, (0, 2), (period, &v4));
        assert!(!old.text.contains("gave up"), "{}", old.text);
    }

    /// By hand (issue 55 item 3): scrapes at 0, 1, 2 and 3 s of vLLM's finished counter by
    /// reason: `length` at 0, 2, 4, 5 and `abort` at 0, 1, 3, 3. Over (0 s, 2 s] the server
    /// finished 4 and aborted 3; the client completed 4 and abandoned 3 (at 0.5, 1.2 and 1.95 s,
    /// one more at 2.5 s outside the span). Under v0.5 the finished count leaves the aborts out
    /// (4 against 4, reconciled) and the aborts reconcile with the abandonments, the margin the
    /// one abandoned within 0.1 s of the span's end; under v0.4 the finished count holds them
    /// (7 against 4: not reconciled) and nothing is said of aborts. A server that exposes no
    /// abort series says so.
    #[test]
    fn the_servers_aborts_are_reconciled_with_the_abandoned_requests() {
        let s = 1_000_000_000u64;
        let mut scraper = Scraper::default();
        let by_reason = |reason: &str, value: f64| {
            let mut e = exposed(
                "vllm:request_success_total",
                "vllm:request_success",
                None,
                SeriesKind::Counter,
                value,
            );
            e.labels.push(("finished_reason".into(), reason.into()));
            e
        };
        let records: Vec<ScrapeRecord> = [(0.0, 0.0), (2.0, 1.0), (4.0, 3.0), (5.0, 3.0)]
            .iter()
            .enumerate()
            .map(|(t, &(length, abort))| {
                let t = t as u64 * s;
                scraper.record(
                    "replica-0",
                    (t, t),
                    &[by_reason("length", length), by_reason("abort", abort)],
                )
            })
            .collect();
        let source = source_of(&records);
        let ms = s / 1_000;
        let client = Client {
            rows: (0..4)
                .map(|k| (k * 100 * ms, k * 100 * ms, (k + 1) * 400 * ms, true))
                .collect(),
            written: Vec::new(),
            gave_up: Vec::new(),
            abandoned: vec![500 * ms, 1_200 * ms, 1_950 * ms, 2_500 * ms],
            paths: vec!["/v1/chat/completions".into()],
        };
        let v5 = Rules::of(percentes_formats::spec::Spec::V0_5);
        let r = reconcile(&source, &client, (0, 2), (s / 10, &v5));
        assert_eq!((r.server_finished, r.client_finished), (Some(4.0), 4));
        assert_eq!(r.reconciled, Some(true));
        assert_eq!(
            r.aborts,
            Some(AbortReconciliation {
                server_aborted: Some(3.0),
                server_unfinished: None,
                client_abandoned: 3,
                margin: 1,
                reconciled: Some(true),
            })
        );
        assert!(
            r.text.contains(
                "the server counted 3 aborted, the client abandoned 3 by design: reconciled"
            ),
            "{}",
            r.text
        );
        let v4 = Rules::of(percentes_formats::spec::Spec::V0_4);
        let old = reconcile(&source, &client, (0, 2), (s / 10, &v4));
        assert_eq!(
            (old.server_finished, old.reconciled),
            (Some(7.0), Some(false))
        );
        assert_eq!(old.aborts, None);
        let lengths: Vec<ScrapeRecord> = [0.0, 2.0, 4.0]
            .iter()
            .enumerate()
            .map(|(t, &length)| {
                let t = t as u64 * s;
                Scraper::default().record("replica-0", (t, t), &[by_reason("length", length)])
            })
            .collect();
        let bare = reconcile(&source_of(&lengths), &client, (0, 2), (s / 10, &v5));
        assert!(
            bare.text.contains("exposes no aborted-request counter"),
            "{}",
            bare.text
        );
        // vLLM 0.32: its abort series stays at 0 when a client closes; its front end answered
        // 0, 4, 7 POSTs 2xx on the route (and 5 on another path, not ours) while it finished 0,
        // 2, 4: 7 - 4 = 3 taken and never finished, against the 3 abandoned.
        let mut scraper = Scraper::default();
        let received = |handler: &str, value: f64| {
            let mut e = exposed(
                "http_requests_total",
                "http_requests",
                None,
                SeriesKind::Counter,
                value,
            );
            e.labels = vec![
                ("handler".into(), handler.into()),
                ("method".into(), "POST".into()),
                ("status".into(), "2xx".into()),
            ];
            e
        };
        let records: Vec<ScrapeRecord> = [(0.0, 0.0), (4.0, 2.0), (7.0, 4.0)]
            .iter()
            .enumerate()
            .map(|(t, &(taken, length))| {
                let t = t as u64 * s;
                scraper.record(
                    "replica-0",
                    (t, t),
                    &[
                        by_reason("length", length),
                        by_reason("abort", 0.0),
                        received("/v1/chat/completions", taken),
                        received("/v1/completions", 5.0 * t as f64),
                    ],
                )
            })
            .collect();
        let vllm = reconcile(&source_of(&records), &client, (0, 2), (s / 10, &v5));
        let aborts = vllm.aborts.unwrap();
        assert_eq!(
            (
                aborts.server_aborted,
                aborts.server_unfinished,
                aborts.reconciled
            ),
            (Some(0.0), Some(3.0), Some(true))
        );
        assert!(
            vllm.text.contains("the server's abort counter did not move; the server's front end answered 3 more request(s) than it finished"),
            "{}",
            vllm.text
        );
    }
}
