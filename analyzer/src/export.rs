//! The run as polars frames, and the Parquet export (`percentes export JOURNAL --parquet FILE`).
//!
//! Three frames: one row per scheduled request, one per event, one per telemetry sample. Times
//! are ns from the run's epoch; an absent timestamp is null, never a sentinel. The request frame
//! is the export: pandas, DuckDB or Spark users read it without knowing the journal format, and
//! its Parquet key-value metadata cites the spec version at capture, the config hash, the
//! schedule digest and the journal's chain head, so a figure made from it can be traced back.

use std::path::Path;

use percentes_formats::journal::records::{class_name, event_kind_name, Outcome};
use percentes_formats::journal::{hex, Header};
use polars::prelude::*;

use crate::frame::{Events, Requests, Telemetry, NONE};
use crate::load::Run;

fn nullable(column: Vec<u64>) -> Vec<Option<u64>> {
    column
        .into_iter()
        .map(|v| (v != NONE).then_some(v))
        .collect()
}

fn nullable32(column: Vec<u32>) -> Vec<Option<u32>> {
    column
        .into_iter()
        .map(|v| (v != u32::MAX).then_some(v))
        .collect()
}

/// The request frame. Consumes the columns: the primitive ones move into polars without a copy
/// (a spilled table's are copied out of their files).
pub fn requests_frame(
    requests: Requests,
    phases: &[String],
    routes: &[String],
) -> PolarsResult<DataFrame> {
    let rows = requests.len();
    let name = |i: u32, names: &[String]| names.get(i as usize).cloned().unwrap_or_default();
    let phase: Vec<String> = requests.phase.iter().map(|&p| name(p, phases)).collect();
    let route: Vec<String> = requests.route.iter().map(|&r| name(r, routes)).collect();
    let outcome: Vec<Option<&str>> = requests
        .outcome
        .iter()
        .map(|&o| Outcome::from_byte(o).map(Outcome::name))
        .collect();
    let class: Vec<Option<String>> = requests
        .outcome
        .iter()
        .zip(&requests.class)
        .map(|(&o, &c)| {
            Outcome::from_byte(o)
                .map(|_| class_name(c).map_or_else(|| format!("class-{c}"), str::to_owned))
        })
        .collect();
    let completed: Vec<bool> = requests
        .outcome
        .iter()
        .map(|&o| o == Outcome::Completed as u8)
        .collect();
    let latency = |times: &[u64]| -> Vec<Option<u64>> {
        times
            .iter()
            .zip(&requests.intended_ns)
            .zip(&completed)
            .map(|((&t, &i), &done)| (done && t != NONE).then(|| t.saturating_sub(i)))
            .collect()
    };
    let ttft = latency(&requests.first_content_ns);
    let e2e = latency(&requests.terminal_ns);
    let replica: Vec<Option<&str>> = requests
        .replica
        .iter()
        .map(|&r| Some(requests.replicas.get(r)).filter(|s| !s.is_empty()))
        .collect();
    let detail: Vec<&str> = requests
        .detail
        .iter()
        .map(|&d| requests.details.get(d))
        .collect();
    let terminal: Vec<Option<u64>> = requests
        .terminal_ns
        .iter()
        .zip(&requests.outcome)
        .map(|(&t, &o)| (Outcome::from_byte(o).is_some()).then_some(t))
        .collect();
    let columns = vec![
        Column::new("index".into(), requests.index.into_vec()),
        Column::new("phase".into(), phase),
        Column::new("route".into(), route),
        Column::new("outcome".into(), outcome),
        Column::new("class".into(), class),
        Column::new("intended_ns".into(), requests.intended_ns.into_vec()),
        Column::new(
            "dispatched_ns".into(),
            nullable(requests.dispatched_ns.into_vec()),
        ),
        Column::new(
            "connect_start_ns".into(),
            nullable(requests.connect_start_ns.into_vec()),
        ),
        Column::new(
            "connect_end_ns".into(),
            nullable(requests.connect_end_ns.into_vec()),
        ),
        Column::new(
            "tls_done_ns".into(),
            nullable(requests.tls_done_ns.into_vec()),
        ),
        Column::new(
            "request_written_ns".into(),
            nullable(requests.request_written_ns.into_vec()),
        ),
        Column::new(
            "response_head_ns".into(),
            nullable(requests.response_head_ns.into_vec()),
        ),
        Column::new(
            "first_content_ns".into(),
            nullable(requests.first_content_ns.into_vec()),
        ),
        Column::new("terminal_ns".into(), terminal),
        Column::new("ttft_ns".into(), ttft),
        Column::new("e2e_ns".into(), e2e),
        Column::new("content_events".into(), requests.content_events.into_vec()),
        Column::new("http_status".into(), requests.http_status.into_vec()),
        Column::new("bytes_sent".into(), requests.bytes_sent.into_vec()),
        Column::new("bytes_received".into(), requests.bytes_received.into_vec()),
        Column::new(
            "usage_prompt_tokens".into(),
            nullable32(requests.usage_prompt_tokens.into_vec()),
        ),
        Column::new(
            "usage_completion_tokens".into(),
            nullable32(requests.usage_completion_tokens.into_vec()),
        ),
        Column::new(
            "max_tokens".into(),
            nullable32(requests.max_tokens.into_vec()),
        ),
        Column::new(
            "prompt_tokens_sent".into(),
            nullable32(requests.prompt_tokens_sent.into_vec()),
        ),
        Column::new(
            "protocol".into(),
            requests
                .protocol
                .iter()
                .map(|&p| match p {
                    1 => Some("HTTP/1.1"),
                    2 => Some("HTTP/2"),
                    _ => None,
                })
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "stream_id".into(),
            nullable32(requests.stream_id.into_vec()),
        ),
        Column::new("replica".into(), replica),
        Column::new(
            "connection_id".into(),
            nullable(requests.connection_id.into_vec()),
        ),
        Column::new("connection_reused".into(), requests.connection_reused),
        Column::new("detail".into(), detail),
    ];
    DataFrame::new(rows, columns)
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
            u64s("host_cpu_busy_ppm", &|t| u64::from(t.host_cpu_busy_ppm)),
            u64s("recorder_cpu_ns", &|t| t.recorder_cpu_ns),
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

/// The run's phase names and route labels, by index, as the request frame names them.
pub(crate) fn labels(header: &Header) -> (Vec<String>, Vec<String>) {
    let schedule = &header.schedule;
    (
        schedule.phases.iter().map(|p| p.name.clone()).collect(),
        schedule.routes.iter().map(|r| r.label.clone()).collect(),
    )
}

/// Writes the request frame of `run` to `path` as Parquet (zstd); returns the row count.
pub fn parquet(run: Run, path: &Path) -> PolarsResult<usize> {
    let metadata = vec![
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
            run.not_publishable.join("; "),
        ),
        (
            "percentes.time_unit".to_owned(),
            "ns from the run's epoch (CLOCK_MONOTONIC)".to_owned(),
        ),
    ];
    let (phases, routes) = labels(&run.header);
    let mut frame = requests_frame(run.requests, &phases, &routes)?;
    let file = std::fs::File::create(path)?;
    ParquetWriter::new(file)
        .with_compression(ParquetCompression::Zstd(None))
        .with_key_value_metadata(Some(KeyValueMetadata::from_static(metadata)))
        .finish(&mut frame)?;
    Ok(frame.height())
}
