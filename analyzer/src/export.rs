//! The run as polars frames, and the Parquet export (`percentes export JOURNAL --parquet FILE`).
//!
//! Three frames: one row per scheduled request, one per event, one per telemetry sample. Times
//! are ns from the run's epoch; an absent timestamp is null, never a sentinel. The request frame
//! is the export: pandas, DuckDB or Spark users read it without knowing the journal format, and
//! its Parquet key-value metadata cites the spec version at capture, the config hash, the
//! schedule digest and the journal's chain head, so a figure made from it can be traced back.

use std::ops::Range;
use std::path::Path;

use percentes_formats::journal::records::{class_name, event_kind_name, Outcome};
use percentes_formats::journal::scrape::{ScrapeRecord, SeriesDefinition};
use percentes_formats::journal::{hex, Header};
use polars_core::prelude::*;

use crate::frame::{Events, Requests, Telemetry, NONE};
use crate::load::Run;
use crate::model::Report;

mod parquet;

/// Rows per request-frame batch, and so per Parquet row group: polars' own default row group.
/// The export and `query` build the request frame a batch at a time from the table, so what
/// they hold besides the table is one batch, not a second whole copy of the run.
pub const BATCH_ROWS: usize = 512 * 512;

/// The rows of `column` in `rows`.
fn part<'a, T>(rows: &Range<usize>, column: &'a [T]) -> &'a [T] {
    &column[rows.clone()]
}

/// The name of code `i` in `names` (empty for a code the header does not name).
fn label(i: u32, names: &[String]) -> &str {
    names.get(i as usize).map_or("", String::as_str)
}

/// A time in ns as the frames carry it: signed (Int64), so that a reader's difference of two
/// times (`dispatched_ns - intended_ns` in DuckDB, for a request sent late or early) is a
/// number and not an unsigned overflow. A run's times lie far below 2^63 ns (292 years).
fn signed(ns: u64) -> i64 {
    i64::try_from(ns).unwrap_or(i64::MAX)
}

/// A timestamp column, null where the table holds [`NONE`].
fn nullable(name: &str, column: &[u64]) -> Column {
    let values: Int64Chunked = column
        .iter()
        .map(|&v| (v != NONE).then_some(signed(v)))
        .collect();
    values.with_name(name.into()).into_column()
}

/// A timestamp column with no absent value.
fn times(name: &str, column: &[u64]) -> Column {
    let values: Vec<i64> = column.iter().map(|&v| signed(v)).collect();
    Column::new(name.into(), values)
}

/// A count column, null where the table holds `u32::MAX` (not reported).
fn nullable32(name: &str, column: &[u32]) -> Column {
    let values: UInt32Chunked = column
        .iter()
        .map(|&v| (v != u32::MAX).then_some(v))
        .collect();
    values.with_name(name.into()).into_column()
}

/// A string column of `len` rows, each named by `value` (`None` is null).
fn strings<'a>(name: &str, len: usize, value: impl Fn(usize) -> Option<&'a str>) -> Column {
    let mut builder = StringChunkedBuilder::new(name.into(), len);
    for row in 0..len {
        builder.append_option(value(row));
    }
    builder.finish().into_column()
}

/// The request frame of the table's rows in `rows` (the export's columns, SPEC §9). Copies
/// those rows out of the table; phase, route and class are named by `phases`, `routes` and the
/// class registry, with no string kept per row.
pub fn requests_frame(
    requests: &Requests,
    rows: Range<usize>,
    phases: &[String],
    routes: &[String],
) -> PolarsResult<DataFrame> {
    let len = rows.len();
    let start = rows.start;
    let outcome = &requests.outcome[rows.clone()];
    let class = &requests.class[rows.clone()];
    let intended = part(&rows, &requests.intended_ns);
    let first_content = part(&rows, &requests.first_content_ns);
    // A4: TTFT ends at the first generated delta of any kind, where the journal says.
    let first_token: Vec<u64> = rows
        .clone()
        .map(|row| match &requests.streams {
            Some(s) => s.first_ns[row].min(requests.first_content_ns[row]),
            None => requests.first_content_ns[row],
        })
        .collect();
    let terminal = part(&rows, &requests.terminal_ns);
    let completed = |row: usize| outcome[row] == Outcome::Completed as u8;
    // A class outside the registry is named by its code; those few names are made once.
    let unknown: Vec<(u16, String)> = {
        let mut codes: Vec<u16> = class
            .iter()
            .zip(outcome)
            .filter(|&(&c, &o)| Outcome::from_byte(o).is_some() && class_name(c).is_none())
            .map(|(&c, _)| c)
            .collect();
        codes.sort_unstable();
        codes.dedup();
        codes
            .into_iter()
            .map(|c| (c, format!("class-{c}")))
            .collect()
    };
    let class_label = |c: u16| -> &str {
        class_name(c).unwrap_or_else(|| {
            unknown
                .binary_search_by_key(&c, |&(code, _)| code)
                .map_or("", |i| unknown[i].1.as_str())
        })
    };
    let latency = |name: &str, times: &[u64]| -> Column {
        let values: Int64Chunked = (0..len)
            .map(|row| {
                (completed(row) && times[row] != NONE)
                    .then(|| signed(times[row].saturating_sub(intended[row])))
            })
            .collect();
        values.with_name(name.into()).into_column()
    };
    let terminal_column: Int64Chunked = terminal
        .iter()
        .zip(outcome)
        .map(|(&t, &o)| Outcome::from_byte(o).is_some().then_some(signed(t)))
        .collect();
    let columns = vec![
        Column::new("index".into(), part(&rows, &requests.index)),
        strings("phase", len, |row| {
            Some(label(requests.phase[start + row], phases))
        }),
        strings("route", len, |row| {
            Some(label(requests.route[start + row], routes))
        }),
        strings("outcome", len, |row| {
            Outcome::from_byte(outcome[row]).map(Outcome::name)
        }),
        strings("class", len, |row| {
            Outcome::from_byte(outcome[row]).map(|_| class_label(class[row]))
        }),
        times("intended_ns", intended),
        nullable("dispatched_ns", part(&rows, &requests.dispatched_ns)),
        nullable("connect_start_ns", part(&rows, &requests.connect_start_ns)),
        nullable("connect_end_ns", part(&rows, &requests.connect_end_ns)),
        nullable("tls_done_ns", part(&rows, &requests.tls_done_ns)),
        nullable(
            "request_written_ns",
            part(&rows, &requests.request_written_ns),
        ),
        nullable("response_head_ns", part(&rows, &requests.response_head_ns)),
        nullable("first_content_ns", first_content),
        terminal_column
            .with_name("terminal_ns".into())
            .into_column(),
        latency("ttft_ns", &first_token),
        latency("e2e_ns", terminal),
        Column::new(
            "content_events".into(),
            part(&rows, &requests.content_events),
        ),
        Column::new("http_status".into(), &requests.http_status[rows.clone()]),
        Column::new("bytes_sent".into(), part(&rows, &requests.bytes_sent)),
        Column::new(
            "bytes_received".into(),
            part(&rows, &requests.bytes_received),
        ),
        nullable32(
            "usage_prompt_tokens",
            part(&rows, &requests.usage_prompt_tokens),
        ),
        nullable32(
            "usage_completion_tokens",
            part(&rows, &requests.usage_completion_tokens),
        ),
        nullable32("max_tokens", part(&rows, &requests.max_tokens)),
        nullable32(
            "prompt_tokens_sent",
            part(&rows, &requests.prompt_tokens_sent),
        ),
        strings("protocol", len, |row| {
            match requests.protocol[start + row] {
                1 => Some("HTTP/1.1"),
                2 => Some("HTTP/2"),
                _ => None,
            }
        }),
        nullable32("stream_id", part(&rows, &requests.stream_id)),
        strings("replica", len, |row| {
            Some(requests.replicas.get(requests.replica[start + row])).filter(|s| !s.is_empty())
        }),
        nullable("connection_id", part(&rows, &requests.connection_id)),
        Column::new(
            "connection_reused".into(),
            &requests.connection_reused[rows.clone()],
        ),
        strings("detail", len, |row| {
            Some(requests.details.get(requests.detail[start + row]))
        }),
    ];
    let mut columns = columns;
    columns.extend(stream_columns(requests, rows, latency));
    DataFrame::new(len, columns)
}

/// A4's columns (JOURNAL.md kind 8): the first delta of each kind, the deltas of each kind, the
/// usage's reasoning tokens, the deliveries and the first one's deltas (issue 52: how many
/// events the first token's read carried), the kinds as one value, and the time to first
/// answer token; null for a request without a stream record (every one of a journal recorded
/// before 2026-12-05), so the schema is the same for every journal.
fn stream_columns(
    requests: &Requests,
    rows: Range<usize>,
    latency: impl Fn(&str, &[u64]) -> Column,
) -> Vec<Column> {
    let len = rows.len();
    let none64 = vec![NONE; len];
    let none32 = vec![u32::MAX; len];
    let Some(s) = &requests.streams else {
        let mut out: Vec<Column> = [
            "first_delta_ns",
            "first_answer_ns",
            "first_reasoning_ns",
            "last_reasoning_ns",
            "first_tool_call_ns",
        ]
        .iter()
        .map(|name| nullable(name, &none64))
        .collect();
        for name in [
            "answer_deltas",
            "reasoning_deltas",
            "tool_call_deltas",
            "other_deltas",
            "reasoning_tokens",
            "deliveries",
            "first_delivery_deltas",
        ] {
            out.push(nullable32(name, &none32));
        }
        out.push(strings("output", len, |_| None));
        out.push(latency("ttfat_ns", &none64));
        return out;
    };
    let recorded = |row: usize| s.kinds[rows.start + row] != 0;
    let counts = |name: &str, column: &[u32]| {
        let values: Vec<u32> = (0..len)
            .map(|row| {
                if recorded(row) {
                    column[rows.start + row]
                } else {
                    u32::MAX
                }
            })
            .collect();
        nullable32(name, &values)
    };
    vec![
        nullable("first_delta_ns", part(&rows, &s.first_ns)),
        nullable("first_answer_ns", part(&rows, &s.first_answer_ns)),
        nullable("first_reasoning_ns", part(&rows, &s.first_reasoning_ns)),
        nullable("last_reasoning_ns", part(&rows, &s.last_reasoning_ns)),
        nullable("first_tool_call_ns", part(&rows, &s.first_tool_call_ns)),
        counts("answer_deltas", &s.answer_deltas),
        counts("reasoning_deltas", &s.reasoning_deltas),
        counts("tool_call_deltas", &s.tool_call_deltas),
        counts("other_deltas", &s.other_deltas),
        nullable32("reasoning_tokens", part(&rows, &s.reasoning_tokens)),
        counts("deliveries", &s.deliveries),
        counts("first_delivery_deltas", &s.first_delivery_deltas),
        {
            let labels: Vec<Option<String>> = (0..len)
                .map(|row| recorded(row).then(|| s.kinds_label(rows.start + row)))
                .collect();
            strings("output", len, |row| labels[row].as_deref())
        },
        latency("ttfat_ns", part(&rows, &s.first_answer_ns)),
    ]
}

/// The request frame in batches of `batch_rows` rows, in index order; at least one batch,
/// empty for an empty table (so a consumer always has the schema). A spilled table's pages are
/// handed back after each batch is made (`Requests::release`).
pub fn request_batches<'a>(
    requests: &'a Requests,
    phases: &'a [String],
    routes: &'a [String],
    batch_rows: usize,
) -> impl Iterator<Item = PolarsResult<DataFrame>> + 'a {
    let batch_rows = batch_rows.max(1);
    let len = requests.len();
    let batches = len.div_ceil(batch_rows).max(1);
    (0..batches).map(move |b| {
        let rows = (b * batch_rows).min(len)..((b + 1) * batch_rows).min(len);
        let frame = requests_frame(requests, rows, phases, routes);
        requests.release();
        frame
    })
}

/// The event frame.
pub fn events_frame(events: &Events) -> PolarsResult<DataFrame> {
    let rows = &events.rows;
    DataFrame::new(
        rows.len(),
        vec![
            Column::new(
                "at_ns".into(),
                rows.iter().map(|e| e.at_ns).collect::<Vec<_>>(),
            ),
            Column::new(
                "kind".into(),
                rows.iter()
                    .map(|e| {
                        event_kind_name(e.kind)
                            .map_or_else(|| format!("kind-{}", e.kind), str::to_owned)
                    })
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "subject".into(),
                rows.iter().map(|e| e.subject.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "detail".into(),
                rows.iter().map(|e| e.detail.as_str()).collect::<Vec<_>>(),
            ),
            Column::new(
                "value".into(),
                rows.iter().map(|e| e.value).collect::<Vec<_>>(),
            ),
        ],
    )
}

/// The telemetry frame.
pub fn telemetry_frame(telemetry: &Telemetry) -> PolarsResult<DataFrame> {
    let rows = &telemetry.rows;
    let u64s =
        |name: &str, f: &dyn Fn(&percentes_formats::journal::records::TelemetryRecord) -> u64| {
            Column::new(name.into(), rows.iter().map(f).collect::<Vec<u64>>())
        };
    DataFrame::new(
        rows.len(),
        vec![
            u64s("at_ns", &|t| t.at_ns),
            u64s("interval_ns", &|t| t.interval_ns),
            // A reading the recorder could not take is null (JOURNAL.md "3 telemetry").
            Column::new(
                "host_cpu_busy_ppm".into(),
                rows.iter()
                    .map(|t| t.host_cpu().map(|_| u64::from(t.host_cpu_busy_ppm)))
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "recorder_cpu_ns".into(),
                rows.iter().map(|t| t.recorder_cpu()).collect::<Vec<_>>(),
            ),
            u64s("stall_p99_ns", &|t| t.stall_p99_ns),
            u64s("stall_max_ns", &|t| t.stall_max_ns),
            u64s("stall_samples", &|t| u64::from(t.stall_samples)),
            u64s("skew_count", &|t| u64::from(t.skew_count)),
            u64s("skew_p50_ns", &|t| t.skew_p50_ns),
            u64s("skew_p99_ns", &|t| t.skew_p99_ns),
            u64s("skew_max_ns", &|t| t.skew_max_ns),
            u64s("undispatched_total", &|t| t.undispatched_total),
            u64s("in_flight", &|t| u64::from(t.in_flight)),
            u64s("writer_queue_depth", &|t| u64::from(t.writer_queue_depth)),
            u64s("writer_queue_max", &|t| u64::from(t.writer_queue_max)),
        ],
    )
}

/// The server's metrics (SPEC §2 "Server-side evidence"): one row per journaled reading of
/// every answered scrape, with its series spelled out. `value` is a gauge's reading, or a
/// cumulative series' increase since its source's previous scrape; `reading` says which
/// (`value`, `increase`, or `base`: a cumulative value in a source's first scrape, from before
/// the run).
pub fn server_frame(scrapes: &[ScrapeRecord]) -> PolarsResult<DataFrame> {
    let mut series: std::collections::BTreeMap<(&str, u32), &SeriesDefinition> = Default::default();
    let mut rows = ServerRows::default();
    for scrape in scrapes {
        for d in &scrape.defined {
            series.insert((scrape.source.as_str(), d.id), d);
        }
        for sample in &scrape.samples {
            let Some(d) = series.get(&(scrape.source.as_str(), sample.id)) else {
                continue;
            };
            let cumulative = crate::server::cumulative(d.kind);
            rows.source.push(scrape.source.clone());
            rows.sent_ns.push(scrape.sent_ns);
            rows.received_ns.push(scrape.received_ns);
            rows.restarted.push(scrape.restarted);
            rows.family.push(d.family.clone());
            rows.name.push(d.name.clone());
            rows.labels.push(
                d.labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join(","),
            );
            rows.role.push(
                percentes_formats::prometheus::role_of(&d.family).map(|r| r.name().to_owned()),
            );
            rows.reading.push(match (cumulative, scrape.first) {
                (false, _) => "value",
                (true, true) => "base",
                (true, false) => "increase",
            });
            rows.value.push(sample.value);
        }
    }
    DataFrame::new(
        rows.source.len(),
        vec![
            Column::new("source".into(), rows.source),
            times("sent_ns", &rows.sent_ns),
            times("received_ns", &rows.received_ns),
            Column::new("restarted".into(), rows.restarted),
            Column::new("family".into(), rows.family),
            Column::new("name".into(), rows.name),
            Column::new("labels".into(), rows.labels),
            Column::new("role".into(), rows.role),
            Column::new("reading".into(), rows.reading),
            Column::new("value".into(), rows.value),
        ],
    )
}

#[derive(Default)]
struct ServerRows {
    source: Vec<String>,
    sent_ns: Vec<u64>,
    received_ns: Vec<u64>,
    restarted: Vec<bool>,
    family: Vec<String>,
    name: Vec<String>,
    labels: Vec<String>,
    role: Vec<Option<String>>,
    reading: Vec<&'static str>,
    value: Vec<f64>,
}

/// Where [`parquet`] writes the server table beside the request table: `runs.parquet` ->
/// `runs.server.parquet`.
pub fn server_path(path: &Path) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.server.parquet"))
}

/// What `export` adds to its line when [`parquet`] writes the server table too: where.
pub fn server_note(run: &Run, path: &Path) -> String {
    match run.scrapes.is_empty() {
        true => String::new(),
        false => format!(
            ", and the server's metrics (one row per reading, SPEC §2) to {}",
            server_path(path).display()
        ),
    }
}

/// The run's phase names and route labels, by index, as the request frame names them.
pub(crate) fn labels(header: &Header) -> (Vec<String>, Vec<String>) {
    let schedule = &header.schedule;
    (
        schedule.phases.iter().map(|p| p.name.clone()).collect(),
        schedule.routes.iter().map(|r| r.label.clone()).collect(),
    )
}

/// The file's key-value metadata: what the run cites (§9), and its validity with `report`.
fn metadata(run: &Run, report: Option<&Report>) -> Vec<(String, String)> {
    let not_publishable = report.map_or(&run.not_publishable, |r| &r.not_publishable);
    let mut metadata = vec![
        (
            "percentes.spec_at_capture".to_owned(),
            run.header.spec_version.clone(),
        ),
        (
            "percentes.config_hash".to_owned(),
            hex(&run.header.config_hash),
        ),
        (
            "percentes.schedule_digest".to_owned(),
            hex(&run.header.schedule_digest),
        ),
        (
            "percentes.chain_head".to_owned(),
            run.report.chain_head.map(|h| hex(&h)).unwrap_or_default(),
        ),
        (
            "percentes.journal_verdict".to_owned(),
            run.report.verdict.name().to_owned(),
        ),
        ("percentes.profile".to_owned(), run.header.profile.clone()),
        (
            "percentes.not_publishable".to_owned(),
            not_publishable.join("; "),
        ),
        (
            "percentes.time_unit".to_owned(),
            "ns from the run's epoch (CLOCK_MONOTONIC), signed 64-bit".to_owned(),
        ),
    ];
    if let Some(report) = report {
        let failed: Vec<String> = report
            .validity
            .failed()
            .map(|g| format!("{} {}", g.id, g.status.name()))
            .collect();
        metadata.push((
            "percentes.validity".to_owned(),
            format!(
                "{} under spec {}{}",
                if report.validity.valid {
                    "valid"
                } else {
                    "INVALID"
                },
                report.provenance.spec_applied,
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(": {}", failed.join(", "))
                }
            ),
        ));
    }
    metadata
}

/// Writes the request frame of `run` to `path` as Parquet (zstd), one row group per batch of
/// [`BATCH_ROWS`] requests; returns the row count. With its `report`, the metadata carries the
/// run's validity under that report's spec and every NOT PUBLISHABLE reason, failed gates
/// included; without, only what loading the journal found.
pub fn parquet(run: Run, path: &Path, report: Option<&Report>) -> PolarsResult<usize> {
    parquet_in_batches(&run, path, BATCH_ROWS, report)
}

/// [`parquet`] in batches (and row groups) of `batch_rows` rows: the tests' way to write many.
pub fn parquet_in_batches(
    run: &Run,
    path: &Path,
    batch_rows: usize,
    report: Option<&Report>,
) -> PolarsResult<usize> {
    let metadata = metadata(run, report);
    let (phases, routes) = labels(&run.header);
    let mut batches = request_batches(&run.requests, &phases, &routes, batch_rows);
    let first = batches.next().transpose()?.unwrap_or_default();
    let file = std::fs::File::create(path)?;
    let mut writer = parquet::Writer::new(file, first.schema())?;
    let mut rows = first.height();
    writer.write(&first)?;
    drop(first);
    for batch in batches {
        let batch = batch?;
        rows += batch.height();
        writer.write(&batch)?;
    }
    writer.finish(metadata)?;
    if !run.scrapes.is_empty() {
        let mut frame = server_frame(&run.scrapes)?;
        let file = std::fs::File::create(server_path(path))?;
        parquet::write_frame(file, &mut frame)?;
    }
    Ok(rows)
}
