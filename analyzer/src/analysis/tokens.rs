//! A window's token figures (SPEC §9's report, from the usage each response carried): time per
//! output token, output tokens per second (aggregate and per request), and inter-token latency
//! per token where a chunk carries several tokens. Completed requests only; a request without
//! usage is counted as such and left out of every token figure, never imputed.

use super::client_gate::nearest_rank;
use super::distribution::{distribution, distribution_of};
use percentes_formats::spec::{StreamReading, TailSample};

use super::rows::{completed, completion_tokens, e2e_ns, tokens_per_event, tpot_ns};
use crate::frame::Requests;
use crate::model::TokenReport;

/// What the TPOT distribution is, in words.
pub(super) const TPOT: &str = "conditional on completion; time per output token, (e2e - TTFT) / (completion tokens - 1), requests with usage and at least two tokens";
/// What the TPOT distribution is under A4, in words.
pub(super) const TPOT_A4: &str = "conditional on completion; time per output token, (e2e - TTFT) / (completion tokens - 1), TTFT to the first generated delta of any kind and every token the usage counts (reasoning and tool calls included), requests with usage and at least two tokens (A4)";
/// What the per-token inter-token distribution is, in words.
pub(super) const ITL_PER_TOKEN: &str = "conditional on completion; pooled inter-chunk gaps, each divided by its request's tokens per content event (completion tokens / content events)";

/// The token figures of a window's `rows` over its `duration_s`. The per-token inter-token
/// distribution is left empty, for the caller's pass over the gaps.
pub(super) fn token_report(
    requests: &Requests,
    rows: &[usize],
    duration_s: f64,
    (reading, sample): (StreamReading, TailSample),
) -> TokenReport {
    let mut completed_count = 0u64;
    let mut with_usage = 0u64;
    let (mut prompt_tokens, mut completion_total) = (0u64, 0u64);
    let mut tpots = Vec::new();
    let mut rates = Vec::new();
    let mut multi = 0u64;
    for row in rows.iter().copied().filter(|&r| completed(requests, r)) {
        completed_count += 1;
        let Some(tokens) = completion_tokens(requests, row) else {
            continue;
        };
        with_usage += 1;
        completion_total += tokens;
        let prompt = requests.usage_prompt_tokens[row];
        if prompt != u32::MAX {
            prompt_tokens += u64::from(prompt);
        }
        if tokens_per_event(requests, row, reading) > 1.0 {
            multi += 1;
        }
        let Some(e2e) = e2e_ns(requests, row) else {
            continue;
        };
        if let Some(tpot) = tpot_ns(requests, row, reading) {
            tpots.push(tpot);
        }
        // Milli-tokens per second, kept whole for the nearest-rank reading (in u128: a
        // hostile usage count times 10^12 does not fit a u64).
        if let Some(rate) = (u128::from(tokens) * 1_000_000_000_000).checked_div(u128::from(e2e)) {
            rates.push(u64::try_from(rate).unwrap_or(u64::MAX));
        }
    }
    rates.sort_unstable();
    let per_request_tokens_per_s = [("p10", 0.1), ("p50", 0.5), ("p90", 0.9)]
        .iter()
        .filter_map(|&(name, q)| Some((name.to_owned(), nearest_rank(&rates, q)? as f64 / 1e3)))
        .collect();
    let missing = completed_count - with_usage;
    let text = if completed_count == 0 {
        "no completed requests".to_owned()
    } else if with_usage == 0 {
        format!(
            "no usage: none of the {} completed responses reported token counts (a stream reports them when asked, stream_options.include_usage; target.include_usage), so no token figure is given",
            completed_count
        )
    } else if missing > 0 {
        format!(
            "usage missing from {missing} of the {completed_count} completed responses: the token figures cover the other {with_usage}",
        )
    } else {
        format!("usage reported by all {with_usage} completed responses")
    };
    let mut tpot = distribution_of(tpots, None, sample);
    tpot.label = match reading {
        StreamReading::AnswerContent => TPOT,
        StreamReading::EveryDelta => TPOT_A4,
    };
    // A4: no gap is divided among the tokens of one read; the deliveries say what each carried.
    let itl_per_token = (reading == StreamReading::AnswerContent).then(|| {
        let mut d = distribution(&[], None);
        d.label = ITL_PER_TOKEN;
        d
    });
    TokenReport {
        completed: completed_count,
        with_usage,
        prompt_tokens,
        completion_tokens: completion_total,
        output_tokens_per_s: (with_usage > 0 && duration_s > 0.0)
            .then(|| completion_total as f64 / duration_s),
        per_request_tokens_per_s,
        tpot,
        itl_per_token,
        multi_token_chunks: multi,
        text,
    }
}
