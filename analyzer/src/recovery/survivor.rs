//! The survivor read over the outage and over the recovery apart (SPEC §5 "What v0.4 reads",
//! amendment A3).
//!
//! v0.3's headline read the survivor over the fault window, which runs from the fire to the
//! recovery boundary or the end of the phase: in the goldens the victim was down for 1.3 of its
//! 6 s, so "TTFT went from 14 ms to 14 ms" averaged the outage away (TTFT p50 while the victim
//! was down: 156.6 ms). Under A3 the outage is the fire anchor to the confirmed removal, and the
//! recovery the removal to the recovery to the pre-fault baseline (or the recovery deadline);
//! each is read over the requests scheduled in it, by intended time, with its n.

use percentes_formats::journal::records::Outcome;
use percentes_formats::pins;

use super::seconds;
use crate::estimate::histogram::LatencyHistogram;
use crate::frame::Requests;
use crate::model::SurvivorReading;
use percentes_formats::spec::{SpanTtft, StreamReading};

/// The two spans of one run. `removal_ns` is the confirmed removal (None: not confirmed, so
/// neither span has an end it can be read to); `end_ns` where the recovery span stops (the
/// recovery to the pre-fault baseline, or the deadline); `met` the SLO verdict per row.
pub(crate) fn spans(
    (requests, reading, ttft): (&Requests, StreamReading, SpanTtft),
    met: &[bool],
    anchor_ns: u64,
    removal_ns: Option<u64>,
    end_ns: u64,
) -> Vec<SurvivorReading> {
    let Some(removal_ns) = removal_ns else {
        let why = "not read: the fault's removal was not confirmed, so the outage has no end";
        return vec![
            unread("outage", anchor_ns, None, why),
            unread("recovery", anchor_ns, None, why),
        ];
    };
    vec![
        read(
            (requests, reading, ttft),
            met,
            "outage",
            anchor_ns,
            removal_ns,
        ),
        read(
            (requests, reading, ttft),
            met,
            "recovery",
            removal_ns,
            end_ns.max(removal_ns),
        ),
    ]
}

fn unread(span: &'static str, from_ns: u64, to_ns: Option<u64>, why: &str) -> SurvivorReading {
    SurvivorReading {
        span,
        from_s: seconds(from_ns),
        to_s: to_ns.map(seconds),
        scheduled: 0,
        completed: 0,
        ttft_p50_ms: None,
        ttft_n: None,
        goodput: None,
        note: why.to_owned(),
    }
}

/// One span `[from_ns, to_ns)` by intended time: the TTFT p50 of its completed requests (the
/// pinned histogram, as every window's; under v0.5 of those whose first token was seen, where
/// any was), and its goodput, refused over fewer requests than `statistics.share_min_requests`.
pub(crate) fn read(
    (requests, reading, ttft): (&Requests, StreamReading, SpanTtft),
    met: &[bool],
    span: &'static str,
    from_ns: u64,
    to_ns: u64,
) -> SurvivorReading {
    let min = pins::value::STATISTICS_SHARE_MIN_REQUESTS as u64;
    let mut histogram = LatencyHistogram::pinned();
    // A4: the completed requests with a first token, apart.
    let mut streamed = LatencyHistogram::pinned();
    let (mut scheduled, mut completed, mut good) = (0u64, 0u64, 0u64);
    for (row, &met) in met.iter().enumerate().take(requests.len()) {
        let t = requests.intended_ns[row];
        if t < from_ns || t >= to_ns {
            continue;
        }
        scheduled += 1;
        good += u64::from(met);
        if requests.outcome(row) == Some(Outcome::Completed) {
            completed += 1;
            let first = requests.first_token_ns(row, reading);
            histogram.record_ns(first.saturating_sub(t));
            if requests.first_token_seen(row, reading) {
                streamed.record_ns(first.saturating_sub(t));
            }
        }
    }
    let mut notes = Vec::new();
    let without = completed - streamed.len();
    let mut ttft_n = None;
    if ttft == SpanTtft::Streamed && !streamed.is_empty() && without > 0 {
        ttft_n = Some(streamed.len());
        notes.push(format!(
            "TTFT over the {} completed requests with a generated delta; {without} responses without one (a route that streams no tokens) left out, their completion not being a first token",
            streamed.len()
        ));
        histogram = streamed;
    }
    let ttft_p50_ms = if completed == 0 {
        notes.push("no request completed: no TTFT".to_owned());
        None
    } else {
        Some(histogram.quantile_us(0.5) as f64 / 1e3)
    };
    let goodput = if scheduled >= min {
        Some(good as f64 / scheduled as f64)
    } else {
        notes.push(format!(
            "goodput refused: {scheduled} requests scheduled, fewer than the {min} a share may rest on (statistics.share_min_requests, §9)"
        ));
        None
    };
    SurvivorReading {
        span,
        from_s: seconds(from_ns),
        to_s: Some(seconds(to_ns)),
        scheduled,
        completed,
        ttft_p50_ms,
        ttft_n,
        goodput,
        note: notes.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of requests `(intended, Some(ttft))` completed at TTFT, or `(intended, None)`
    /// errored, each terminal 1 ms after its first content.
    fn requests_of(rows: &[(u64, Option<u64>)]) -> Requests {
        let mut requests = Requests::with_capacity(rows.len());
        for (i, (t, _)) in rows.iter().enumerate() {
            requests.push_scheduled(i as u64, *t, 0, 0);
        }
        requests.reserve_records().unwrap();
        for (i, (t, ttft)) in rows.iter().enumerate() {
            requests.dispatched_ns[i] = *t;
            match ttft {
                Some(ttft) => {
                    requests.outcome[i] = Outcome::Completed as u8;
                    requests.first_content_ns[i] = t + ttft;
                    requests.terminal_ns[i] = t + ttft + 1_000_000;
                }
                None => {
                    requests.outcome[i] = Outcome::Errored as u8;
                    requests.terminal_ns[i] = t + 1_000_000;
                }
            }
        }
        requests
    }

    /// Hand-counted: six requests at 0, 1, 2, 3, 4, 5 s; the ones at 1 and 2 s completed with
    /// TTFT 100 ms and 300 ms, the one at 3 s errored, the rest completed with TTFT 10 ms. The
    /// outage [1 s, 3 s) holds the two slow ones: TTFT p50 100 ms (the pinned histogram's
    /// value at the median rank, 1 of 2), n 2, goodput refused (2 < 20).
    #[test]
    fn the_outage_is_read_apart_from_the_recovery() {
        let s = 1_000_000_000u64;
        let rows: Vec<(u64, Option<u64>)> = vec![
            (0, Some(10_000_000)),
            (s, Some(100_000_000)),
            (2 * s, Some(300_000_000)),
            (3 * s, None),
            (4 * s, Some(10_000_000)),
            (5 * s, Some(10_000_000)),
        ];
        let requests = requests_of(&rows);
        let met = vec![true, true, true, false, true, true];
        let [outage, recovery] = spans(
            (&requests, StreamReading::EveryDelta, SpanTtft::Streamed),
            &met,
            s,
            Some(3 * s),
            6 * s,
        )
        .try_into()
        .unwrap();
        assert_eq!((outage.scheduled, outage.completed), (2, 2));
        assert_eq!(outage.ttft_p50_ms, Some(100.031));
        assert_eq!(outage.goodput, None);
        assert!(outage
            .note
            .contains("2 requests scheduled, fewer than the 20"));
        assert_eq!((recovery.scheduled, recovery.completed), (3, 2));
        assert_eq!(recovery.ttft_p50_ms, Some(10.007));
        assert_eq!((recovery.from_s, recovery.to_s), (3.0, Some(6.0)));

        // Twenty requests in one span: the goodput is printed, 15 of 20.
        let many: Vec<(u64, Option<u64>)> =
            (0..20).map(|i| (i * s / 20, Some(5_000_000))).collect();
        let met: Vec<bool> = (0..20).map(|i| i % 4 != 0).collect();
        let r = read(
            (
                &requests_of(&many),
                StreamReading::EveryDelta,
                SpanTtft::Streamed,
            ),
            &met,
            "outage",
            0,
            s,
        );
        assert_eq!((r.scheduled, r.goodput), (20, Some(0.75)));
        assert_eq!(r.note, "");

        let unconfirmed = spans(
            (&requests, StreamReading::EveryDelta, SpanTtft::Streamed),
            &met,
            s,
            None,
            6 * s,
        );
        assert!(unconfirmed
            .iter()
            .all(|r| r.goodput.is_none() && r.to_s.is_none()));
    }

    /// Issue 53: a span of a chat route (TTFT 150 ms) and a route that streams no tokens (its
    /// responses complete at 5 ms, with no first token). v0.4 read the five completions' TTFT
    /// p50 as 5 ms, the non-streamed route's completion; v0.5 reads the two chat requests,
    /// 150 ms, and counts the three it left out.
    #[test]
    fn a_span_reads_ttft_over_the_requests_that_have_a_first_token() {
        let ms = 1_000_000u64;
        let rows: Vec<(u64, Option<u64>)> = (0..5).map(|i| (i * ms, Some(150 * ms))).collect();
        let mut requests = requests_of(&rows);
        for row in 2..5 {
            requests.first_content_ns[row] = crate::frame::NONE;
            requests.terminal_ns[row] = requests.intended_ns[row] + 5 * ms;
        }
        let met = vec![true; 5];
        let at = |ttft| {
            read(
                (&requests, StreamReading::EveryDelta, ttft),
                &met,
                "outage",
                0,
                5 * ms,
            )
        };
        let v4 = at(SpanTtft::EveryCompleted);
        assert_eq!(v4.ttft_p50_ms, Some(5.003));
        assert_eq!(v4.note, "goodput refused: 5 requests scheduled, fewer than the 20 a share may rest on (statistics.share_min_requests, §9)");
        let v5 = at(SpanTtft::Streamed);
        assert_eq!(
            (v5.ttft_p50_ms, v5.ttft_n, v4.ttft_n),
            (Some(150.015), Some(2), None)
        );
        assert!(
            v5.note.starts_with("TTFT over the 2 completed requests with a generated delta; 3 responses without one"),
            "{}",
            v5.note
        );
        // A span with no streamed request reads every completion, as §3 does.
        let mut none = requests_of(&rows);
        for row in 0..5 {
            none.first_content_ns[row] = crate::frame::NONE;
            none.terminal_ns[row] = none.intended_ns[row] + 5 * ms;
        }
        let r = read(
            (&none, StreamReading::EveryDelta, SpanTtft::Streamed),
            &met,
            "outage",
            0,
            5 * ms,
        );
        assert_eq!(r.ttft_p50_ms, Some(5.003));
    }

    /// Issue 53 (SPEC §5 "What v0.5 reads"): the outage ends at the removal's instant, not at
    /// its bucket edge. A removal at 2.5 s: the request scheduled at 2.4 s is the outage's, the
    /// one at 2.6 s the recovery's, though both lie in the bucket [2 s, 3 s).
    #[test]
    fn the_outage_ends_at_the_removals_instant() {
        let ms = 1_000_000u64;
        let rows: Vec<(u64, Option<u64>)> = [1_000, 2_400, 2_600, 4_000]
            .iter()
            .map(|&t| (t * ms, Some(10 * ms)))
            .collect();
        let requests = requests_of(&rows);
        let [outage, recovery] = spans(
            (&requests, StreamReading::EveryDelta, SpanTtft::Streamed),
            &[true; 4],
            1_000 * ms,
            Some(2_500 * ms),
            5_000 * ms,
        )
        .try_into()
        .unwrap();
        assert_eq!((outage.scheduled, outage.to_s), (2, Some(2.5)));
        assert_eq!((recovery.scheduled, recovery.from_s), (2, 2.5));
        // And it starts at the fire anchor's instant: an anchor at 1.2 s leaves out the request
        // at 1.0 s, in the anchor's bucket [1 s, 2 s) though it is.
        let late = read(
            (&requests, StreamReading::EveryDelta, SpanTtft::Streamed),
            &[true; 4],
            "outage",
            1_200 * ms,
            2_500 * ms,
        );
        assert_eq!((late.scheduled, late.from_s), (1, 1.2));
    }
}
