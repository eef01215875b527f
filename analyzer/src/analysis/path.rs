//! A4 (v0.5): where a window's time to first token went, from the client's own stamps (SPEC
//! §2 "The first token's path"). A completed, streamed request's first token is split at the
//! moments the recorder journals: its intended time to the request written whole (the client's
//! lateness, the connection, the write), the request written to the response head, and the
//! head to the first generated delta; beside them, how often the head came in the same read as
//! the first token and how many deltas the first delivery carried. The signatures are stated
//! as what was measured, against pinned thresholds, never as a cause.

use percentes_formats::pins::value;
use percentes_formats::spec::StreamReading;

use super::rows::completed;
use super::streams::{counts_of, Delivered};
use crate::estimate::compare::nearest_rank;
use crate::frame::{Requests, NONE};
use crate::model::{FirstTokenPath, Signature, Spread};

/// The path of `rows` (a window's requests), with the first deliveries the second pass counted.
pub(super) fn of(
    requests: &Requests,
    rows: &[usize],
    delivered: &Delivered,
    reading: StreamReading,
) -> FirstTokenPath {
    let (mut to_written, mut to_head, mut head_to_first) = (Vec::new(), Vec::new(), Vec::new());
    let mut with_first = 0u64;
    for &row in rows {
        if !completed(requests, row) || !requests.first_token_seen(row, reading) {
            continue;
        }
        let (intended, written, head) = (
            requests.intended_ns[row],
            requests.request_written_ns[row],
            requests.response_head_ns[row],
        );
        let first = requests.first_token_ns(row, reading);
        if [written, head, first].contains(&NONE) || !(written <= head && head <= first) {
            continue;
        }
        to_written.push(written.saturating_sub(intended));
        to_head.push(head - written);
        head_to_first.push(first - head);
        with_first += u64::from(head == first);
    }
    let n = to_head.len() as u64;
    let first_delivery = counts_of(&delivered.first_deltas);
    let mut path = FirstTokenPath {
        n,
        to_written: spread(to_written),
        to_head: spread(to_head),
        head_to_first: spread(head_to_first),
        head_with_first: with_first,
        first_delivery,
        signatures: Vec::new(),
        text: String::new(),
    };
    path.signatures = signatures(&path);
    path.text = words(&path);
    path
}

/// Mean, p50 and p90 (nearest rank) of `ns`, in ms; `None` without samples.
fn spread(mut ns: Vec<u64>) -> Option<Spread> {
    ns.sort_unstable();
    let ms = |v: u64| v as f64 / 1e6;
    Some(Spread {
        mean_ms: ns.iter().map(|&v| v as f64).sum::<f64>() / ns.len().max(1) as f64 / 1e6,
        p50_ms: ms(nearest_rank(&ns, 0.5)?),
        p90_ms: ms(nearest_rank(&ns, 0.9)?),
    })
}

/// The signatures `path` shows against §2's pins.
fn signatures(path: &FirstTokenPath) -> Vec<Signature> {
    let mut out = Vec::new();
    let held = path.head_with_first as f64 / path.n.max(1) as f64 * 100.0;
    if path.n > 0 && held > value::PATH_HEAD_HELD_PERCENT as f64 {
        out.push(Signature {
            name: "head-held",
            text: format!(
                "the response head came in the same read as the first token in {} of {} requests ({held:.1} %, more than §2's {} %): the head was held until there was content to send with it (an intermediary buffering or corking the response, or a server that writes its head only with its first token), so the time to the head is not the server's time to accept the request",
                path.head_with_first,
                path.n,
                value::PATH_HEAD_HELD_PERCENT
            ),
        });
    }
    let median = path
        .first_delivery
        .percentiles
        .iter()
        .find(|(name, _)| name == "p50")
        .map(|(_, v)| *v);
    if let Some(median) = median.filter(|&m| m >= value::PATH_FIRST_DELIVERY_BATCHED_DELTAS as u64)
    {
        out.push(Signature {
            name: "batched-first-delivery",
            text: format!(
                "the first delivery carried a median of {median} deltas (§2: {} or more): the first tokens reached the client together, not as the server made them, so the time to first token is the time to the batch",
                value::PATH_FIRST_DELIVERY_BATCHED_DELTAS
            ),
        });
    }
    out
}

fn words(path: &FirstTokenPath) -> String {
    let (Some(written), Some(head), Some(first)) =
        (&path.to_written, &path.to_head, &path.head_to_first)
    else {
        return "no completed request has a response head and a first token: nothing to decompose"
            .into();
    };
    format!(
        "over {} completed, streamed requests (means): {:.3} ms from the intended time to the request written, {:.3} ms from there to the response head, {:.3} ms from the head to the first token",
        path.n, written.mean_ms, head.mean_ms, first.mean_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A table of completed, streamed requests from (intended, written, head, first) in ms.
    fn table(rows: &[(u64, u64, u64, u64)]) -> Requests {
        let mut r = Requests::with_capacity(rows.len());
        let ms = 1_000_000;
        for (i, &(intended, ..)) in rows.iter().enumerate() {
            r.push_scheduled(i as u64, intended * ms, 0, 0);
        }
        r.reserve_records().unwrap();
        for (i, &(_, written, head, first)) in rows.iter().enumerate() {
            r.outcome[i] = percentes_formats::journal::Outcome::Completed as u8;
            r.request_written_ns[i] = written * ms;
            r.response_head_ns[i] = head * ms;
            r.first_content_ns[i] = first * ms;
            r.terminal_ns[i] = (first + 10) * ms;
        }
        r
    }

    fn delivered(first: &[(u32, u64)]) -> Delivered {
        Delivered {
            first_deltas: first.iter().copied().collect::<BTreeMap<_, _>>(),
            ..Delivered::default()
        }
    }

    /// Hand-worked: four requests. Written 1, 1, 2, 2 ms after their intended time; heads 3,
    /// 5, 220, 220 ms after the write; first tokens 7, 0, 0, 0 ms after the head (three in the
    /// head's own read). Means 1.5, 112 and 1.75 ms; p50 (rank 2 of 4) 1, 5 and 0 ms; p90
    /// (rank 4) 2, 220 and 7 ms. Three of four heads with their first token (75 %) is the
    /// held-head signature; a median first delivery of 9 deltas the batched one.
    #[test]
    fn a_window_is_split_at_the_moments_the_recorder_journals() {
        let r = table(&[
            (0, 1, 4, 11),
            (100, 101, 106, 106),
            (200, 202, 422, 422),
            (300, 302, 522, 522),
        ]);
        let path = of(
            &r,
            &[0, 1, 2, 3],
            &delivered(&[(1, 1), (9, 3)]),
            StreamReading::EveryDelta,
        );
        assert_eq!(path.n, 4);
        let w = path.to_written.unwrap();
        assert_eq!((w.mean_ms, w.p50_ms, w.p90_ms), (1.5, 1.0, 2.0));
        let h = path.to_head.unwrap();
        assert_eq!((h.mean_ms, h.p50_ms, h.p90_ms), (112.0, 5.0, 220.0));
        let f = path.head_to_first.unwrap();
        assert_eq!((f.mean_ms, f.p50_ms, f.p90_ms), (1.75, 0.0, 7.0));
        assert_eq!(path.head_with_first, 3);
        let names: Vec<&str> = path.signatures.iter().map(|s| s.name).collect();
        assert_eq!(names, ["head-held", "batched-first-delivery"]);
        assert!(path.signatures[0].text.contains("3 of 4 requests (75.0 %"));
        assert!(path.signatures[1].text.contains("median of 9 deltas"));
    }

    /// A stream whose head came first and whose tokens came one a read shows neither
    /// signature; half the heads with their first token is not "more than half".
    #[test]
    fn a_server_that_sends_its_head_first_shows_no_signature() {
        let r = table(&[(0, 1, 4, 11), (100, 101, 104, 104)]);
        let path = of(
            &r,
            &[0, 1],
            &delivered(&[(1, 2)]),
            StreamReading::EveryDelta,
        );
        assert_eq!(path.head_with_first, 1);
        assert!(path.signatures.is_empty(), "{:?}", path.signatures);
    }

    /// Rows that did not complete, or whose stamps are missing or out of order, are not split.
    #[test]
    fn only_completed_requests_with_ordered_stamps_are_split() {
        let mut r = table(&[(0, 1, 4, 11), (100, 101, 104, 103), (200, 201, 204, 210)]);
        r.outcome[2] = percentes_formats::journal::Outcome::Errored as u8;
        let path = of(
            &r,
            &[0, 1, 2],
            &Delivered::default(),
            StreamReading::EveryDelta,
        );
        assert_eq!(path.n, 1);
        let empty = of(&r, &[], &Delivered::default(), StreamReading::EveryDelta);
        assert_eq!(empty.n, 0);
        assert!(empty.to_head.is_none() && empty.signatures.is_empty());
        assert!(empty.text.contains("nothing to decompose"));
    }
}
