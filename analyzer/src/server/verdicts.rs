//! The receive-path check's verdicts (SPEC §2): a span's compared quantiles judged against the
//! server's buckets and, where the buckets cannot say (A4), its means; and the first token's
//! path split at the server's clock (`server_path`). Pure functions of the comparisons.

use percentes_formats::pins::value;

use crate::model::{QuantileComparison, ServerComparison, ServerPath, Signature};

/// The verdict of the compared quantiles: each client quantile must lie in the server's
/// bucket, widened upward by the canary's largest lag (the client sees an event after the
/// server makes it, by at most the transfer and the read loop's lag).
pub(super) fn judge(
    quantiles: &[QuantileComparison],
    canary_ms: Option<f64>,
    (server_n, client_n): (u64, u64),
) -> (&'static str, String) {
    if server_n == 0 || client_n == 0 {
        return (
            "not-comparable",
            format!("not comparable: the server observed {server_n}, the client {client_n} in this span"),
        );
    }
    if quantiles.is_empty() {
        return (
            "not-comparable",
            "too few observations on one side to place even the median".into(),
        );
    }
    let widen = canary_ms.unwrap_or(0.0);
    let label = |q: &QuantileComparison| format!("p{}", (q.q * 100.0).round());
    let bucket = |q: &QuantileComparison| {
        format!(
            "{:.3}-{} ms",
            q.server_low_ms,
            q.server_high_ms
                .map_or("+Inf".into(), |h| format!("{h:.3}"))
        )
    };
    if let Some(q) = quantiles.iter().find(|q| q.client_ms < q.server_low_ms) {
        return (
            "client-earlier",
            format!(
                "the client's {} ({:.3} ms) lies below the server's bucket ({}): the two do not measure the same requests (another client of the server, requests not attributed to this replica), or a clock is wrong",
                label(q),
                q.client_ms,
                bucket(q)
            ),
        );
    }
    if let Some(q) = quantiles
        .iter()
        .find(|q| q.server_high_ms.is_some_and(|h| q.client_ms > h + widen))
    {
        return (
            "client-later",
            format!(
                "the client's {} ({:.3} ms) lies above the server's bucket ({}) by more than the read loop's bound: the client's times include time the server's clock does not see and the canary does not explain (transfer, a proxy, the server's front end outside its engine's clock, host contention)",
                label(q),
                q.client_ms,
                bucket(q)
            ),
        );
    }
    let compared: Vec<String> = quantiles
        .iter()
        .map(|q| format!("{} {:.3} ms in {}", label(q), q.client_ms, bucket(q)))
        .collect();
    (
        "within-bounds",
        format!(
            "within bounds: each compared client quantile lies in the server's bucket, widened by the read loop's bound ({})",
            compared.join("; ")
        ),
    )
}

/// A4 (v0.5): a "within-bounds" of the buckets checked against the means, which the histogram's
/// sum gives exactly. Means further apart than the read loop's bound are time outside the
/// server's clock the canary does not explain: where a compared bucket is at least as wide as
/// that difference, the buckets cannot resolve it ("not-resolvable", the means' difference the
/// figure); where every compared bucket is narrower, the client is later ("client-later").
/// `None`: the means agree within the bound and the buckets' verdict stands.
pub(super) fn judge_means(
    quantiles: &[QuantileComparison],
    canary_ms: Option<f64>,
    mean_difference_ms: Option<f64>,
) -> Option<(&'static str, String)> {
    let widen = canary_ms.unwrap_or(0.0);
    let d = mean_difference_ms.filter(|d| *d > widen)?;
    let width = |q: &QuantileComparison| {
        q.server_high_ms
            .map_or(f64::INFINITY, |h| h - q.server_low_ms)
    };
    let widest = quantiles
        .iter()
        .max_by(|a, b| width(a).total_cmp(&width(b)))?;
    let label = format!("p{}", (widest.q * 100.0).round());
    let bucket = format!(
        "{:.3}-{} ms",
        widest.server_low_ms,
        widest
            .server_high_ms
            .map_or("+Inf".into(), |h| format!("{h:.3}"))
    );
    let bound = canary_ms.map_or("no canary bounds the read loop".to_owned(), |c| {
        format!("the read loop's bound is {c:.3} ms")
    });
    Some(if width(widest) >= d {
        (
            "not-resolvable",
            format!(
                "not resolvable at this bucket width: each compared client quantile lies in its server bucket, but the {label}'s bucket ({bucket}) is wider than the {d:.3} ms between the two sides' means ({bound}), so the buckets cannot say whether the sides agree; the means' difference, {d:.3} ms outside the server's clock, is the figure (A4)"
            ),
        )
    } else {
        (
            "client-later",
            format!(
                "the client's mean is {d:.3} ms later than the server's ({bound}), more than every compared bucket's width (the widest, the {label}'s, {bucket}): the client's times include time the server's clock does not see, though each compared quantile lies in its bucket (A4)"
            ),
        )
    })
}

/// A4 (v0.5): the client's mean time to first token against the server's, split where the two
/// clocks allow: both sides' first-token and end-to-end times start at the server's arrival
/// stamp on the server and at the request written on the client, so the first-token gap less
/// the end-to-end gap is time after the server's first token (at least: the end-to-end gap
/// holds any time after the server's last token too), and the end-to-end gap bounds the time
/// before the server's clock started. `None` without both means.
pub(super) fn server_path(
    first: &ServerComparison,
    end_to_end: Option<&ServerComparison>,
) -> Option<ServerPath> {
    let (inside, client) = (first.server_mean_ms?, first.client_mean_ms?);
    let gap = client - inside;
    let e2e_gap = end_to_end.and_then(|e| e.mean_difference_ms);
    let after = e2e_gap.filter(|g| *g >= 0.0).map(|g| (gap - g).max(0.0));
    let share = |ms: f64| {
        if client > 0.0 {
            ms / client * 100.0
        } else {
            0.0
        }
    };
    let signature = after
        .filter(|a| share(*a) > value::PATH_AFTER_SERVER_PERCENT as f64)
        .map(|a| Signature {
            name: "held-after-the-server",
            text: format!(
                "at least {a:.3} ms of the client's {client:.3} ms mean to the first token ({:.1} %, more than §2's {} %) came after the server's own first token, while the end-to-end means differ by only {:.3} ms: the first token was made and then held between the server's stamp and the client's read (a proxy, the server's send path, the network), not spent before the server had the request",
                share(a),
                value::PATH_AFTER_SERVER_PERCENT,
                e2e_gap.unwrap_or(0.0)
            ),
        });
    let split = match (e2e_gap, after) {
        (Some(g), Some(a)) => format!(
            "; end-to-end, the means differ by {g:.3} ms, so at most {g:.3} ms came before the server's clock started and at least {a:.3} ms after its first token"
        ),
        (Some(g), None) => format!(
            "; end-to-end, the client's mean is {:.3} ms below the server's (the two sides' requests in the span differ), so the gap is not split",
            -g
        ),
        (None, _) => "; without end-to-end means on both sides the gap is not split".into(),
    };
    Some(ServerPath {
        inside_server_ms: inside,
        client_ms: client,
        end_to_end_gap_ms: e2e_gap,
        after_server_at_least_ms: after,
        text: format!(
            "{}: the client's mean to the first token {client:.3} ms (from the request written, n {}), the server's {inside:.3} ms (n {}): {:.1} % inside the server's clock, {gap:.3} ms outside it{split}",
            first.family,
            first.client_n,
            first.server_n,
            share(inside)
        ),
        signature,
    })
}
