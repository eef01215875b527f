//! A4 (v0.5): where the time to first token went (SPEC §2 "The first token's path"): the
//! client's split of it per window, and with server metrics the part inside the server's clock.

use serde::Serialize;

use super::Counts;

/// A window's completed, streamed requests, their first token split at the moments the
/// recorder journals.
#[derive(Clone, Debug, Serialize)]
pub struct FirstTokenPath {
    /// Completed requests with a request written, a response head and a first token, in that
    /// order.
    pub n: u64,
    /// Intended time to the request written whole: the client's lateness, the connection, the
    /// write.
    pub to_written: Option<Spread>,
    /// The request written to the response head.
    pub to_head: Option<Spread>,
    /// The response head to the first token (the first generated delta of any kind, A4).
    pub head_to_first: Option<Spread>,
    /// Requests whose head came in the same read as their first token.
    pub head_with_first: u64,
    /// Deltas each completed request's first delivery carried (for a request without a stream
    /// record, its first content event and those read with it at the 1 us floor).
    pub first_delivery: Counts,
    /// The signatures the figures show against §2's pins.
    pub signatures: Vec<Signature>,
    /// The split in words.
    pub text: String,
}

/// A time's mean and two nearest-rank quantiles.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// Mean, ms.
    pub mean_ms: f64,
    /// p50, ms.
    pub p50_ms: f64,
    /// p90, ms.
    pub p90_ms: f64,
}

/// A pattern the figures show, named and stated as what was measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Signature {
    /// `head-held`, `batched-first-delivery` or `held-after-the-server`.
    pub name: &'static str,
    /// The measurement, in words.
    pub text: String,
}

/// With server metrics: the client's mean time to first token (from the request written)
/// against the server's, over one window's span of one source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerPath {
    /// The server's mean time to first token: the part inside its clock, ms.
    pub inside_server_ms: f64,
    /// The client's mean, from the request written, ms.
    pub client_ms: f64,
    /// The end-to-end means' difference (client minus server), ms, where both sides have
    /// end-to-end times: the time outside the server's clock at both ends of a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_to_end_gap_ms: Option<f64>,
    /// At least this much of the client's time came after the server's first token: the
    /// first-token gap beyond the end-to-end gap (both clocks start at the server's arrival),
    /// ms; `None` without end-to-end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_server_at_least_ms: Option<f64>,
    /// The held-after-the-server signature, where the figures show it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
    /// The split in words.
    pub text: String,
}
