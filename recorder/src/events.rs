//! Timeline events from outside the recorder (SPEC §5 "External timeline events"): an
//! orchestrator on the same host (a supervisor script, a cluster watcher) hands the running
//! recorder the boundaries it saw (`detected`, `reschedule`, `container-start`, `weight-load`,
//! ...) through a Unix stream socket (`record --events-socket PATH`), one JSON object per line:
//!
//! ```text
//! {"subject": "container-start", "detail": "pod replica-1-7f9c started", "clock": "realtime", "at_ns": 1764826800123456789}
//! ```
//!
//! `subject` is a `timeline` subject (formats/JOURNAL.md); `detail` (at most 1 KiB) and `value`
//! are optional; `clock` and `at_ns` say when it happened on the sender's clock: `monotonic`
//! (CLOCK_MONOTONIC, which a sender on this host shares with the recorder) or `realtime` (the
//! wall clock, as a cluster's API reports times; a step of the wall clock moves it). Without
//! them the event happened when the recorder read it. The recorder answers each line with one
//! line, `ok at_ns=N` (N: ns from the run's epoch) or `refused: why`, and journals each accepted
//! event as a `timeline` event at the stated time, the time it read it in its detail: both
//! clocks. `percentes event` is the client ([`send`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use percentes_formats::journal::records::TimelineSubject;
use serde::{Deserialize, Serialize};

use crate::error::RecordError;

/// The clock an event's time is stated on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// CLOCK_MONOTONIC of this host (the recorder's own).
    Monotonic,
    /// The wall clock, ns since the Unix epoch.
    Realtime,
}

/// One event as a sender states it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalEvent {
    /// A `timeline` subject (`detected`, `reschedule`, `container-start`, `weight-load`, ...).
    pub subject: String,
    /// What happened, in the sender's words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// A number the subject defines (`node-monitor-grace`: seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// The clock `at_ns` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<Clock>,
    /// When it happened on that clock, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ns: Option<i64>,
}

impl ExternalEvent {
    /// The event `percentes event` sends: stated on CLOCK_MONOTONIC when `monotonic_ns` is
    /// given, else on the wall clock when `realtime_ns` is, else not stated (read).
    pub fn stated(
        subject: &str,
        detail: &str,
        value: Option<i64>,
        (monotonic_ns, realtime_ns): (Option<i64>, Option<i64>),
    ) -> ExternalEvent {
        let at = match (monotonic_ns, realtime_ns) {
            (Some(ns), _) => Some((Clock::Monotonic, ns)),
            (None, Some(ns)) => Some((Clock::Realtime, ns)),
            (None, None) => None,
        };
        ExternalEvent {
            subject: subject.to_owned(),
            detail: detail.to_owned(),
            value,
            clock: at.map(|(c, _)| c),
            at_ns: at.map(|(_, ns)| ns),
        }
    }
}

/// The longest line the recorder reads (and the longest answer `send` reads).
pub const LINE_BYTES_MAX: usize = 4096;
/// The longest detail an event may carry: the bound a request's detail has in the journal.
pub const DETAIL_BYTES_MAX: usize =
    percentes_formats::pins::value::CLIENT_DETAIL_BYTES_MAX as usize;
/// How far past the moment it is read an event may be stated (clocks of one host agree; a
/// sender's wall clock may be a little ahead).
pub const FUTURE_MAX: Duration = Duration::from_secs(1);

/// The run's clocks at its epoch, and when a line was read: what [`place`] needs.
#[derive(Clone, Copy, Debug)]
pub struct Anchors {
    /// CLOCK_MONOTONIC at the epoch, ns.
    pub monotonic_epoch_ns: u64,
    /// The wall clock at the epoch, ns since the Unix epoch.
    pub realtime_epoch_ns: i64,
    /// When the line was read, ns from the epoch.
    pub received_ns: u64,
}

/// A line read: the event's time from the epoch, its subject, the journaled detail (with both
/// clocks) and value; or why it is refused (of kind [`crate::ErrorKind::Event`]).
pub fn place(
    line: &str,
    anchors: Anchors,
) -> Result<(u64, TimelineSubject, String, Option<i64>), RecordError> {
    let event: ExternalEvent = serde_json::from_str(line.trim()).map_err(|e| {
        RecordError::event(format!(
            "not an event: {e} (one JSON object a line: subject, detail, value, clock, at_ns)"
        ))
    })?;
    let subject = TimelineSubject::parse(&event.subject).ok_or_else(|| {
        let known: Vec<&str> = TimelineSubject::ALL.iter().map(|s| s.name()).collect();
        RecordError::event(format!(
            "{:?} is not a timeline subject ({})",
            event.subject,
            known.join(", ")
        ))
    })?;
    if event.detail.len() > DETAIL_BYTES_MAX {
        return Err(RecordError::event(format!(
            "the detail is over {DETAIL_BYTES_MAX} bytes"
        )));
    }
    let received = anchors.received_ns as i128;
    let (at, stated) = match (event.clock, event.at_ns) {
        (None, None) => (received, "stated no time: read".to_owned()),
        (Some(clock), Some(at)) => {
            let from_epoch = match clock {
                Clock::Monotonic => i128::from(at) - i128::from(anchors.monotonic_epoch_ns),
                Clock::Realtime => i128::from(at) - i128::from(anchors.realtime_epoch_ns),
            };
            let name = match clock {
                Clock::Monotonic => "CLOCK_MONOTONIC",
                Clock::Realtime => "CLOCK_REALTIME",
            };
            (from_epoch, format!("stated at {at} ns on {name}; read"))
        }
        _ => return Err(RecordError::event("`clock` and `at_ns` go together")),
    };
    if at < 0 {
        return Err(RecordError::event(format!(
            "stated {:.3} s before the run's epoch: the recorder journals only what happens during the run",
            -at as f64 / 1e9
        )));
    }
    if at > received + FUTURE_MAX.as_nanos() as i128 {
        return Err(RecordError::event(format!(
            "stated {:.3} s after the recorder read it: the sender's clock and the recorder's disagree",
            (at - received) as f64 / 1e9
        )));
    }
    let mut detail = event.detail;
    if !detail.is_empty() {
        detail.push(' ');
    }
    detail.push_str(&format!(
        "(external: {stated} at {} ns from the epoch)",
        anchors.received_ns
    ));
    Ok((at as u64, subject, detail, event.value))
}

/// Sends `event` to the recorder listening on `socket` and returns its answer (`ok at_ns=N`),
/// or why it was not delivered or was refused: no recorder takes connections on the socket
/// ([`crate::ErrorKind::Io`]), or the event was not delivered or was refused
/// ([`crate::ErrorKind::Event`]).
pub fn send(
    socket: &Path,
    event: &ExternalEvent,
    timeout: Duration,
) -> Result<String, RecordError> {
    let mut stream = UnixStream::connect(socket).map_err(crate::error::io(format!(
        "cannot connect to {} (is a recorder running with --events-socket {}?)",
        socket.display(),
        socket.display()
    )))?;
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    let mut line = serde_json::to_string(event)
        .map_err(|e| RecordError::event(format!("the event cannot be written as JSON: {e}")))?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(|e| RecordError::event(format!("cannot send to {}: {e}", socket.display())))?;
    let mut answer = String::new();
    BufReader::new(stream)
        .take(LINE_BYTES_MAX as u64)
        .read_line(&mut answer)
        .map_err(|e| RecordError::event(format!("no answer from {}: {e}", socket.display())))?;
    let answer = answer.trim().to_owned();
    match answer.strip_prefix("refused: ") {
        Some(why) => Err(RecordError::event(format!(
            "the recorder refused the event: {why}"
        ))),
        None if answer.starts_with("ok") => Ok(answer),
        None => Err(RecordError::event(format!(
            "the recorder answered {answer:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANCHORS: Anchors = Anchors {
        monotonic_epoch_ns: 5_000_000_000,
        realtime_epoch_ns: 1_764_826_800_000_000_000,
        received_ns: 2_000_000_000,
    };

    /// Hand-worked: the epoch at monotonic 5 s and realtime T; an event read 2 s into the run.
    /// Stated at monotonic 6.5 s: 1.5 s from the epoch. At T + 1.75 s: 1.75 s. No time: 2 s.
    #[test]
    fn a_stated_time_is_placed_on_the_run_s_clock_and_the_reading_kept() {
        let (at, subject, detail, value) = place(
            r#"{"subject": "container-start", "detail": "pod up", "clock": "monotonic", "at_ns": 6500000000}"#,
            ANCHORS,
        )
        .unwrap();
        assert_eq!(
            (at, subject, value),
            (1_500_000_000, TimelineSubject::ContainerStart, None)
        );
        assert_eq!(
            detail,
            "pod up (external: stated at 6500000000 ns on CLOCK_MONOTONIC; read at 2000000000 ns from the epoch)"
        );
        let line = format!(
            r#"{{"subject": "weight-load", "clock": "realtime", "at_ns": {}}}"#,
            ANCHORS.realtime_epoch_ns + 1_750_000_000
        );
        assert_eq!(place(&line, ANCHORS).unwrap().0, 1_750_000_000);
        let (at, _, detail, value) =
            place(r#"{"subject": "node-monitor-grace", "value": 40}"#, ANCHORS).unwrap();
        assert_eq!((at, value), (2_000_000_000, Some(40)));
        assert!(
            detail.starts_with("(external: stated no time: read at"),
            "{detail}"
        );
    }

    #[test]
    fn what_cannot_be_placed_is_refused_with_the_reason() {
        for (line, says) in [
            ("not json", "not an event"),
            (
                r#"{"subject": "ready"}"#,
                "not a timeline subject (detected, reschedule",
            ),
            (r#"{"subject": "detected", "at_ns": 1}"#, "go together"),
            (
                r#"{"subject": "detected", "clock": "monotonic", "at_ns": 1}"#,
                "before the run's epoch",
            ),
            (
                r#"{"subject": "detected", "clock": "monotonic", "at_ns": 9000000000}"#,
                "after the recorder read it",
            ),
            (r#"{"subject": "detected", "when": 3}"#, "unknown field"),
        ] {
            let why = place(line, ANCHORS).unwrap_err();
            assert_eq!(why.kind(), crate::ErrorKind::Event, "{line}: {why}");
            assert!(why.to_string().contains(says), "{line}: {why}");
        }
        let long = format!(
            r#"{{"subject": "detected", "detail": "{}"}}"#,
            "x".repeat(DETAIL_BYTES_MAX + 1)
        );
        assert!(place(&long, ANCHORS)
            .unwrap_err()
            .to_string()
            .contains(&format!("over {DETAIL_BYTES_MAX} bytes")));
    }
}
