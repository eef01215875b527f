//! The audit's workload field (seed 003's "Target workload"): which generation model the run
//! used, what was fixed in advance, and what that implies for reading its latency (SPEC §1
//! "Workload models"). For a closed run it also checks the interactive response law on the
//! measured span: X = N / (R + Z), with the measured throughput X, the mean response time R of
//! the requests sent there and the mean think time Z the seed drew for their successors.

use percentes_formats::journal::header::HostFact;
use percentes_formats::schedule::{ThinkLaw, Workload};

use super::rows::seconds;
use crate::frame::NONE;
use crate::load::Run;

/// The workload model's paragraph; `timeout_s` is the client timeout in force.
pub(super) fn workload_model(run: &Run, timeout_s: f64) -> String {
    let params = &run.header.schedule;
    let arrivals = match params.arrival {
        percentes_formats::schedule::Arrival::Poisson => "Poisson",
        percentes_formats::schedule::Arrival::Deterministic => "deterministic",
    };
    let tail = format!("zero retries; client timeout {timeout_s:.3} s");
    let think = |t: &percentes_formats::schedule::Think| {
        format!(
            "{} think time of mean {:.3} s",
            match t.law {
                ThinkLaw::Fixed => "a fixed",
                ThinkLaw::Exponential => "an exponential",
            },
            seconds(t.mean_ns)
        )
    };
    match &params.workload {
        Workload::Open => format!(
            "open loop: {arrivals} arrivals on a schedule fixed before the first send (seed {}, digest in the header); latency measured from each request's intended send time; {tail}",
            params.seed
        ),
        Workload::Closed { users, think: t } => format!(
            "closed loop: {users} users, each sending its next request after its previous one's terminal event and {} (seed {}); the users' first requests and every think time are fixed in advance (digest in the header), each later send time is its user's previous terminal time plus its think time; latency measured from that intended time; {tail}. A closed run's latency is not latency at a fixed arrival rate: as the target slows its users send less, so the queue a fixed rate would build never forms (coordinated omission is this model, not a defect of the run); the rate is an outcome. {}",
            think(t),
            params.seed,
            response_law(run, *users, t.mean_ns)
        ),
        Workload::SemiOpen { turns, think: t } => format!(
            "semi-open: sessions arrive open loop ({arrivals}, at the phases' rates in sessions per second, on a schedule fixed before the first send, seed {}), each a closed sequence of {turns} requests, every one after the previous one's terminal event and {}; the session arrivals do not wait for the target, the turns within a session do; latency measured from each request's intended time; {tail}",
            params.seed,
            think(t)
        ),
        Workload::Replay { offsets_ns } => format!(
            "replay: open loop at a trace's times ({} requests within the schedule, every time in the header and in the digest{}); latency measured from each request's intended time, the trace's; {tail}",
            offsets_ns.len(),
            run.header
                .host
                .iter()
                .find(|(k, _)| k == HostFact::Trace.key())
                .map(|(_, v)| format!("; the trace: {v}"))
                .unwrap_or_default()
        ),
    }
}

/// The interactive response law over the measured span, as measured.
fn response_law(run: &Run, users: u32, think_mean_ns: u64) -> String {
    let (start, end) = run.header.schedule.measured_span_ns();
    let r = &run.requests;
    let (mut sent, mut response_ns) = (0u64, 0f64);
    for row in 0..r.len() {
        let dispatched = r.dispatched_ns[row];
        if dispatched == NONE || dispatched < start || dispatched >= end {
            continue;
        }
        sent += 1;
        response_ns += r.terminal_ns[row].saturating_sub(r.intended_ns[row]) as f64;
    }
    r.release();
    if sent == 0 || end <= start {
        return "No request was sent in the measured span, so the response law is not read.".into();
    }
    let x = sent as f64 / ((end - start) as f64 / 1e9);
    let resp = response_ns / sent as f64 / 1e9;
    let z = think_mean_ns as f64 / 1e9;
    let predicted = f64::from(users) / (resp + z);
    format!(
        "Over the measured span: throughput X = {x:.3} requests/s, mean response R = {resp:.3} s, mean think Z = {z:.3} s; N / (R + Z) = {predicted:.3} requests/s ({:+.1} % from X: the law holds at equilibrium, so a large gap says the users were not all at work, or the span was not in equilibrium).",
        (predicted / x - 1.0) * 100.0
    )
}
