//! One request's task from its dispatch to its record (`execute`): the exchange over the
//! worker's [`Transport`], held to the request's deadline on the worker's [`Clock`], its stamps
//! gathered and its verdict settled against the deadline ([`settle`]). The same code runs in a
//! recording and in the simulation.

use percentes_formats::journal::records::{Outcome, RequestRecord};
use percentes_formats::journal::stream::StreamRecord;
use percentes_formats::schedule::Entry;

use super::client::{blank, settle};
use super::context::WorkerContext;
use super::ground::{Clock, Transport};
use super::http2;
use percentes_response::exchange::{Exchange, Verdict};

/// Runs the request `entry`, dispatched at `dispatched` (ns from the epoch), to its record and
/// how it was carried: censored `timeout` at its deadline (intended time plus the client
/// timeout) if the exchange has not ended by then, and nothing in the record, nor in its
/// stream record, after its terminal time.
pub(super) async fn execute(
    ctx: &WorkerContext,
    clock: &impl Clock,
    net: &impl Transport,
    entry: Entry,
    dispatched: u64,
) -> (RequestRecord, (http2::Carried, Option<StreamRecord>)) {
    let mut record = blank(&entry);
    record.dispatched_ns = Some(dispatched);
    let streams = ctx
        .plan
        .streams
        .get(entry.route as usize)
        .copied()
        .unwrap_or(true);
    let deadline_ns = entry.intended_ns + ctx.plan.timeout.as_nanos() as u64;
    // A request the schedule marks for abandonment (SPEC §1 "Abandonment") is closed at its
    // drawn instant, if it has not ended by then: the dropped exchange closes its connection
    // (HTTP/1.1) or stream (HTTP/2), as a user closing the tab. Never before its dispatch.
    let abandon_ns = abandon_at(ctx, &entry)
        .map(|at| at.max(dispatched))
        .filter(|&at| at < deadline_ns);
    let until_ns = abandon_ns.unwrap_or(deadline_ns);
    let mut exchange = Exchange::with_rule(streams, net.rule(entry.route))
        .prompt(ctx.plan.params.content(&entry))
        .until(until_ns);
    let mut carried = http2::Carried::default();
    let verdict = clock
        .within(
            until_ns,
            net.talk(ctx, &entry, &mut record, &mut exchange, &mut carried),
        )
        .await;
    // An ending seen after the abandonment instant was no ending by it (as `settle` holds).
    let ended_ns = Some(record.terminal_ns).filter(|&t| t != 0);
    let ended_ns = ended_ns.unwrap_or_else(|| clock.now_ns());
    let verdict = match verdict {
        Some(v) if abandon_ns.is_none_or(|at| ended_ns <= at) => v,
        _ => unended(
            ctx,
            &entry,
            (abandon_ns, deadline_ns),
            &exchange,
            &mut record,
        ),
    };
    if record.terminal_ns == 0 {
        record.terminal_ns = clock.now_ns();
    }
    record.http_status = exchange.status.unwrap_or(0);
    record.replica = std::mem::take(&mut exchange.replica);
    record.response_head_ns = exchange.response_head_ns;
    record.first_content_ns = exchange.first_content_ns;
    record.content_gaps_us = std::mem::take(&mut exchange.content_gaps_us);
    record.content_events = exchange.content_events;
    record.usage_prompt_tokens = exchange.usage_prompt_tokens;
    record.usage_completion_tokens = exchange.usage_completion_tokens;
    settle(&mut record, verdict, entry.intended_ns, ctx.plan.timeout);
    if record.dispatched_ns.is_none() {
        carried = http2::Carried::default();
    }
    // Output read by the deadline only (`Exchange::until`), and none from a request never
    // sent: nothing the stream record holds is after the request's terminal time.
    let stream = record
        .dispatched_ns
        .and_then(|_| exchange.stream_record(record.index))
        .filter(|s| s.last_ns().is_some_and(|t| t <= record.terminal_ns));
    (record, (carried, stream))
}

/// The verdict of a request that had not ended by `until` (its abandonment instant where the
/// schedule marks it, else its deadline): abandoned there, or censored `timeout` at the
/// deadline. Its terminal time is that instant.
fn unended(
    ctx: &WorkerContext,
    entry: &Entry,
    (abandon_ns, deadline_ns): (Option<u64>, u64),
    exchange: &Exchange,
    record: &mut RequestRecord,
) -> Verdict {
    if let Some(at) = abandon_ns {
        record.terminal_ns = at;
        return Verdict {
            outcome: Outcome::Censored,
            class: "abandoned",
            detail: format!(
                "closed by the client {:.3} ms after its intended time, as the schedule's abandonment drew it (SPEC §1)",
                (at - entry.intended_ns) as f64 / 1e6
            ),
        };
    }
    record.terminal_ns = deadline_ns;
    let stalled = match exchange.waiting_for_window {
        Some((total, unsent)) => format!(
            "; the request body was still waiting for the server's HTTP/2 flow-control window ({unsent} of its {total} bytes unsent)"
        ),
        None => String::new(),
    };
    Verdict {
        outcome: Outcome::Censored,
        class: "timeout",
        detail: format!(
            "no terminal event by the {:?} timeout{stalled}",
            ctx.plan.timeout
        ),
    }
}

/// When the schedule's abandonment closes `entry`, ns from the epoch (its intended time plus
/// the drawn delay), if it marks it.
fn abandon_at(ctx: &WorkerContext, entry: &Entry) -> Option<u64> {
    let params = &ctx.plan.params;
    let delay = params.abandon?.draw(params.seed, entry.index)?;
    Some(entry.intended_ns.saturating_add(delay))
}
