//! The pre-flight: before the journal exists and long before the epoch, one GET to the target
//! (`target.preflight_path`, `/v1/models` by default) through the same connection path the run
//! uses (TLS, headers, key). A target that does not answer, answers an error, or does not list
//! the configured model refuses the run with the reason, instead of recording a run of errors.
//!
//! Then one request of the first route, as the run sends them but with an index no schedule
//! holds (its unique prefix is never a scheduled request's, so no request of the run finds it
//! cached), timed to its last byte: the target's service time, observed. It never refuses the
//! run (an error here is what the run is there to measure); a service time past the client
//! timeout, or an error status, is a warning at start (issue 18 item 2), and the time is in the
//! `preflight` host fact.

use crate::error::RecordError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use compio::BufResult;
use percentes_formats::config::Config;
use percentes_formats::journal::probe::CapacityProbe;

use super::client::READ_BUFFER;
use super::connect::{Conn, Dialer};
use super::dispatch::STOP_POLL;
use super::pacer::ring_setup;
use super::plan::RunPlan;
use super::tls::tls_connector;
use crate::request::{ExtraHeaders, Target, Template};
use crate::run::http2;
use percentes_response::http1;

/// The most of the pre-flight's body read (a models list is a few KB).
const PREFLIGHT_BODY_MAX: usize = 1 << 20;

/// The index the sample request carries: past any schedule (`REQUESTS_MAX`), so its unique
/// prefix and `x-request-id` are its own.
pub(super) const SAMPLE_INDEX: u64 = u64::MAX;

/// What the pre-flight established, for the host facts and the start line.
pub(super) struct Preflight {
    /// One line: the requests, the statuses, how long, what was checked.
    pub(super) summary: String,
    /// What to warn about at start: the sample's service time against the timeout, or its
    /// error status.
    pub(super) warning: Option<String>,
    /// The capacity probe (SPEC §10 "Capacity check"): the answered samples' times, where the
    /// configuration carries a calibration or is a calibration step.
    pub(super) probe: Option<CapacityProbe>,
}

/// One request on a fresh connection, read to the end of its response; `None` when `stop` or
/// `deadline` came first. What failed is the target's ([`crate::ErrorKind::Target`]), or
/// HTTP/2's ([`crate::ErrorKind::Protocol`]).
fn exchange(
    runtime: &compio::runtime::Runtime,
    dialer: &Dialer,
    request: Vec<u8>,
    deadline: Instant,
    stop: &AtomicBool,
) -> Option<Result<(u16, Vec<u8>), RecordError>> {
    runtime.block_on(async {
        let watch_stop = async {
            while !stop.load(Ordering::Relaxed) {
                compio::time::sleep(STOP_POLL).await;
            }
        };
        let exchange = async {
            let (mut conn, _) = dialer
                .open(Instant::now(), Some(deadline), None)
                .await
                .map_err(|e| {
                    RecordError::target(format!(
                        "cannot connect to {}: {}",
                        dialer.address,
                        http2::explain_tls(&e.error, dialer.http)
                    ))
                })?;
            if http2::speaks_h2(&conn, dialer.http)? {
                let scheme = if dialer.tls.is_some() {
                    "https"
                } else {
                    "http"
                };
                return http2::once(conn, &request, scheme, PREFLIGHT_BODY_MAX).await;
            }
            let BufResult(written, _) = conn.write_all(request).await;
            written.map_err(|e| RecordError::target(format!("cannot send the request: {e}")))?;
            read_http1(&mut conn).await
        };
        futures_select(exchange, watch_stop, deadline).await
    })
}

/// An HTTP/1.1 response read from `conn` to its end: its status and at most
/// [`PREFLIGHT_BODY_MAX`] bytes of its body, or what failed (the target's).
async fn read_http1(conn: &mut Conn) -> Result<(u16, Vec<u8>), RecordError> {
    let mut parser = http1::Parser::default();
    let (mut events, mut status, mut body) = (Vec::new(), None, Vec::new());
    let mut buf = Vec::with_capacity(READ_BUFFER);
    loop {
        buf.clear();
        let BufResult(read, b) = conn.read(buf).await;
        buf = b;
        let n = read.map_err(|e| RecordError::target(format!("the connection failed: {e}")))?;
        parser.read(&buf[..n], &mut events);
        let mut ended = false;
        for event in events.drain(..) {
            match event {
                http1::Event::Head { status: s, .. } => status = Some(s),
                http1::Event::Data(d) if body.len() < PREFLIGHT_BODY_MAX => {
                    body.extend_from_slice(&d)
                }
                http1::Event::Data(_) => {}
                http1::Event::End => ended = true,
                http1::Event::Malformed(why) => {
                    return Err(RecordError::target(format!(
                        "the response is not HTTP/1.1: {why}"
                    )))
                }
            }
        }
        if ended || n == 0 {
            break;
        }
    }
    status
        .map(|s| (s, body))
        .ok_or_else(|| RecordError::target("the connection closed before a response"))
}

/// The models the target lists at its pre-flight path (OpenAI's `{"data": [{"id": ...}]}`),
/// asked through the run's own connection path (TLS, headers, key) within the client timeout:
/// what a quick run without `--model` takes its model from.
pub fn served_models(config: &Config) -> Result<Vec<String>, RecordError> {
    let target = Target::parse(&config.target.base_url)?;
    let plan = RunPlan::new(config, 1)?;
    let extra = ExtraHeaders::new(&config.target, |v| std::env::var(v).ok())?;
    let tls = match target.tls {
        true => Some(tls_connector(config)?),
        false => None,
    };
    let dialer = Dialer::of(config, &target, &plan, tls);
    let runtime = compio::runtime::Runtime::builder()
        .with_proactor(ring_setup(false))
        .build()
        .map_err(|e| RecordError::target(format!("cannot start an io_uring runtime: {e}")))?;
    let path = target.request_target(config.target.preflight_path());
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: {}\r\naccept: application/json\r\n{}connection: close\r\n\r\n",
        target.host_header(),
        extra.lines()
    );
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + plan.timeout;
    let body = match exchange(&runtime, &dialer, request.into_bytes(), deadline, &stop) {
        Some(Ok((status, body))) if (200..300).contains(&status) => body,
        Some(Ok((status, _))) => {
            return Err(RecordError::target(format!(
                "GET {path} answered HTTP {status}"
            )))
        }
        Some(Err(why)) => {
            return Err(RecordError::target(format!(
                "GET {path}: {}",
                extra.redact(&why.to_string())
            )))
        }
        None => {
            return Err(RecordError::target(format!(
                "GET {path}: no answer within {:?}",
                plan.timeout
            )))
        }
    };
    let value: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
        RecordError::target(format!(
            "GET {path} answered something other than a JSON models list"
        ))
    })?;
    let ids = value
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or_else(|| {
            RecordError::target(format!(
                "GET {path} answered JSON without a `data` list of models"
            ))
        })?
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_owned))
        .collect();
    Ok(ids)
}

/// Runs the pre-flight, within the connect budget and the pinned client timeout, on a runtime
/// of its own; `stop` ends it early. `sample` is the first route's template and path.
pub(super) fn preflight(
    config: &Config,
    target: &Target,
    dialer: &Dialer,
    extra: &ExtraHeaders,
    plan: &RunPlan,
    sample: Option<(&Template, &str)>,
    stop: &AtomicBool,
) -> Result<Preflight, RecordError> {
    let timeout = plan.timeout;
    let path = target.request_target(config.target.preflight_path());
    let url = format!(
        "{}://{}{path}",
        if target.tls { "https" } else { "http" },
        target.host_header()
    );
    // Both ways a user states it: a quick run's flag, a configuration's key (issue 54 item 6).
    let skip = "(--no-preflight on a quick run, target.preflight = false in a configuration, skips this check)";
    let runtime = compio::runtime::Runtime::builder()
        .with_proactor(ring_setup(false))
        .build()
        .map_err(|e| {
            RecordError::target(format!("pre-flight: cannot start an io_uring runtime: {e}"))
        })?;
    let started = Instant::now();
    let request = format!(
        "GET {path} HTTP/1.1\r\nhost: {}\r\naccept: application/json\r\n{}connection: close\r\n\r\n",
        target.host_header(),
        extra.lines()
    );
    let answer = exchange(
        &runtime,
        dialer,
        request.into_bytes(),
        started + timeout,
        stop,
    );
    let elapsed = started.elapsed();
    let (status, body) = match answer {
        Some(Ok(answer)) => answer,
        Some(Err(why)) => {
            return Err(RecordError::target(format!(
                "pre-flight GET {url}: {}; is the server up and the URL right? {skip}",
                extra.redact(&why.to_string())
            )))
        }
        None if stop.load(Ordering::Relaxed) => {
            return Err(RecordError::target(
                "stopped by signal during the pre-flight",
            ))
        }
        None => {
            return Err(RecordError::target(format!(
                "pre-flight GET {url}: no response within {timeout:?} (the client timeout) {skip}"
            )))
        }
    };
    let shown = || {
        let text = String::from_utf8_lossy(&body);
        extra.redact(percentes_response::exchange::cut(text.trim(), 200))
    };
    if !(200..300).contains(&status) {
        let hint = match status {
            401 | 403 => " (the key: target.api_key_env, target.api_key_header)",
            404 => " (the path: target.base_url's path, target.preflight_path)",
            _ => "",
        };
        return Err(RecordError::target(format!(
            "pre-flight GET {url} answered HTTP {status}{hint}: {} {skip}",
            shown()
        )));
    }
    let mut checked = format!("HTTP {status}");
    // A models list (OpenAI's shape: {"data": [{"id": ...}]}) must list the configured model.
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&body) {
        if let Some(models) = value.get("data").and_then(|d| d.as_array()) {
            let ids: Vec<&str> = models
                .iter()
                .filter_map(|m| m.get("id").and_then(|i| i.as_str()))
                .collect();
            if !ids.iter().any(|id| *id == config.target.model) {
                return Err(RecordError::target(format!(
                    "pre-flight GET {url}: the server serves {ids:?}, not {:?} (target.model) {skip}",
                    config.target.model
                )));
            }
            checked.push_str(&format!(", serves {:?}", config.target.model));
        }
    }
    let mut summary = format!(
        "GET {path}: {checked} in {:.1} ms",
        elapsed.as_secs_f64() * 1e3
    );
    let (warning, probe) = match sample {
        Some((template, route_path)) => {
            let (line, warning, first) =
                sample_request(&runtime, dialer, extra, template, route_path, timeout, stop);
            summary.push_str(&format!("; {line}"));
            let probe = probing(config).then(|| {
                let probe = capacity_probe(
                    (&runtime, dialer),
                    template,
                    first,
                    plan.probe_samples,
                    (timeout, stop),
                );
                summary.push_str(&format!("; {}", probe_line(&probe)));
                probe
            });
            (warning, probe)
        }
        None => (None, None),
    };
    Ok(Preflight {
        summary,
        warning,
        probe,
    })
}

/// Whether the pre-flight probes the capacity: a run whose configuration carries the
/// calibration it is checked against, or a step of the calibration that measures it (§10).
fn probing(config: &Config) -> bool {
    config.calibration.lambda_max_rps.is_some() || config.calibration.step
}

/// The capacity probe: the first sample's time (when it was answered 2xx), then samples one
/// after another, each on a fresh connection with an index no schedule holds and no other
/// sample holds (so no prefix cache serves one from another), until `count` were answered or
/// one was not (a failing target is the run's to measure, not the probe's).
fn capacity_probe(
    (runtime, dialer): (&compio::runtime::Runtime, &Dialer),
    template: &Template,
    first: Option<f64>,
    count: u64,
    (timeout, stop): (Duration, &AtomicBool),
) -> CapacityProbe {
    let mut samples_ms: Vec<f64> = first.into_iter().collect();
    for k in 1..count {
        if samples_ms.len() as u64 != k {
            break;
        }
        let started = Instant::now();
        let request = template.sample_bytes(SAMPLE_INDEX - k);
        match exchange(runtime, dialer, request, started + timeout, stop) {
            Some(Ok((status, _))) if (200..300).contains(&status) => {
                samples_ms.push(started.elapsed().as_secs_f64() * 1e3)
            }
            _ => break,
        }
    }
    CapacityProbe { samples_ms }
}

/// The probe in the pre-flight's line.
fn probe_line(probe: &CapacityProbe) -> String {
    match probe.median_ms() {
        Some(median) => format!(
            "capacity probe: {} sample(s) answered, median {median:.1} ms",
            probe.samples_ms.len()
        ),
        None => "capacity probe: no sample answered".into(),
    }
}

/// The sample request: one line for the host fact, and the warning it earns. It waits up to
/// the client timeout, so a service time past it shows as no answer within it.
fn sample_request(
    runtime: &compio::runtime::Runtime,
    dialer: &Dialer,
    extra: &ExtraHeaders,
    template: &Template,
    route_path: &str,
    timeout: Duration,
    stop: &AtomicBool,
) -> (String, Option<String>, Option<f64>) {
    let started = Instant::now();
    let answer = exchange(
        runtime,
        dialer,
        template.sample_bytes(SAMPLE_INDEX),
        started + timeout,
        stop,
    );
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let answered = matches!(answer, Some(Ok((status, _))) if (200..300).contains(&status));
    let (line, warning) = sample_words(answer, ms, extra, route_path, timeout, stop);
    (line, warning, answered.then_some(ms))
}

/// The sample's line for the host fact and the warning it earns.
fn sample_words(
    answer: Option<Result<(u16, Vec<u8>), RecordError>>,
    ms: f64,
    extra: &ExtraHeaders,
    route_path: &str,
    timeout: Duration,
    stop: &AtomicBool,
) -> (String, Option<String>) {
    let advice = "every request like it will be censored at the timeout: raise the target's speed, or keep the pinned timeout (dev.scale_timeout = false, or durations stated in seconds; SPEC §P)";
    match answer {
        Some(Ok((status, _))) if (200..300).contains(&status) => {
            let line = format!("POST {route_path} (one sample request, not scheduled, before the epoch): HTTP {status} in {ms:.1} ms");
            // Within a tenth of the timeout of it counts: the run's requests queue behind
            // each other, the sample did not.
            let warning = (ms >= 0.9 * timeout.as_secs_f64() * 1e3).then(|| {
                format!(
                    "the sample request took {ms:.1} ms, at or past 90 % of the client timeout {:.3} s: {advice}",
                    timeout.as_secs_f64()
                )
            });
            (line, warning)
        }
        Some(Ok((status, body))) => {
            let text = String::from_utf8_lossy(&body);
            let shown = extra.redact(percentes_response::exchange::cut(text.trim(), 200));
            (
                format!("POST {route_path} (one sample request, not scheduled, before the epoch): HTTP {status} in {ms:.1} ms"),
                Some(format!(
                    "the sample request of {route_path} answered HTTP {status} ({shown}): the run's requests may all error; check [[routes]] path, target.model, the key, and the prompt's length against the server's context (input_tokens, workload.prefixes.tokens; words unless a tokenizer is given)"
                )),
            )
        }
        Some(Err(why)) => {
            let why = extra.redact(&why.to_string());
            (
                format!("POST {route_path} (one sample request): {why}"),
                Some(format!("the sample request of {route_path} failed: {why}")),
            )
        }
        None if stop.load(Ordering::Relaxed) => {
            (format!("POST {route_path} (one sample request): stopped"), None)
        }
        None => (
            format!(
                "POST {route_path} (one sample request): no answer within the client timeout {:.3} s",
                timeout.as_secs_f64()
            ),
            Some(format!(
                "the sample request of {route_path} had no complete answer within the client timeout {:.3} s: {advice}",
                timeout.as_secs_f64()
            )),
        ),
    }
}

/// The exchange's result, unless `stop` finishes first or `deadline` passes (then `None`).
async fn futures_select<T>(
    exchange: impl std::future::Future<Output = T>,
    stop: impl std::future::Future<Output = ()>,
    deadline: Instant,
) -> Option<T> {
    let exchange = std::pin::pin!(exchange);
    let stop = std::pin::pin!(stop);
    let raced = std::future::poll_fn({
        let mut exchange = exchange;
        let mut stop = stop;
        move |cx| {
            if let std::task::Poll::Ready(v) = exchange.as_mut().poll(cx) {
                return std::task::Poll::Ready(Some(v));
            }
            if stop.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(None);
            }
            std::task::Poll::Pending
        }
    });
    compio::time::timeout_at(deadline, raced)
        .await
        .ok()
        .flatten()
}
