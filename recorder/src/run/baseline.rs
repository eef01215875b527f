//! The live baseline judgement (seeds/004: "abort when baseline is unhealthy"; SPEC §10): the
//! journal writer tallies the baseline's requests and gauge readings as it journals them, and at
//! T_inject the fault plan asks for the verdict before it fires. A baseline that fails a gate the
//! analyzer would fail it for (G6 goodput, G7 waiting queue, G1 share) ends the run there,
//! escaped, instead of injecting a fault into a service that was not healthy to begin with.
//!
//! The tally reads the same records by the same rules as the analyzer's gates (the window by
//! intended time, the pinned SLO, the probe events' gauge), so the verdict is the one `analyze`
//! reaches later on the same journal. It judges evidence only: a gate with nothing to read
//! (no replica header, no probed gauge) is left to the analyzer, which fails it as unobserved.

use std::time::Duration;

use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{EventKind, Outcome, Record};

use super::plan::BaselineRule;
use super::plan::RunPlan;

/// How long the fault plan waits at T_inject for the last of the baseline's records to reach
/// the writer (a request that ran to its deadline ends at T_inject itself, and a worker hands its
/// records over every [`BATCH_INTERVAL`](super::pacer::BATCH_INTERVAL)). A baseline not whole by then is not judged live.
pub(super) const JUDGE_WAIT: Duration = Duration::from_millis(100);

/// The baseline as journaled so far.
#[derive(Debug)]
pub(super) struct BaselineTally {
    rule: BaselineRule,
    /// The baseline's requests in this recorder's share of the schedule.
    expected: u64,
    seen: u64,
    met: u64,
    /// Requests attributed to each declared replica, and to names outside them.
    served: Vec<u64>,
    strangers: u64,
    /// Each declared replica's gauge readings in the window: sum and count.
    gauges: Vec<(f64, u64)>,
}

impl BaselineTally {
    /// The tally of `plan`'s baseline, when the plan has one to judge and this recorder fires
    /// the fault (shard 0 coordinates; it judges the baseline of its own share of the schedule).
    pub(super) fn new(plan: &RunPlan) -> Option<BaselineTally> {
        let rule = plan.baseline.clone().filter(|_| plan.shard.index == 0)?;
        let expected = plan
            .params
            .iter()
            .filter(|e| plan.shard.holds(e.index) && rule.holds(e.intended_ns))
            .count() as u64;
        Some(BaselineTally::of(rule, expected))
    }

    /// An empty tally of `expected` baseline requests.
    fn of(rule: BaselineRule, expected: u64) -> BaselineTally {
        let n = rule.replicas.len();
        BaselineTally {
            rule,
            expected,
            seen: 0,
            met: 0,
            served: vec![0; n],
            strangers: 0,
            gauges: vec![(0.0, 0); n],
        }
    }

    /// Counts one record on its way into the journal.
    pub(super) fn observe(&mut self, record: &Record) {
        match record {
            Record::Request(r) if self.rule.holds(r.intended_ns) => {
                self.seen += 1;
                let (ttft_ns, e2e_ns) = self.rule.slo_ns;
                let first = r.first_content_ns.unwrap_or(r.terminal_ns);
                if r.outcome == Outcome::Completed as u8
                    && first.saturating_sub(r.intended_ns) <= ttft_ns
                    && r.terminal_ns.saturating_sub(r.intended_ns) <= e2e_ns
                {
                    self.met += 1;
                }
                if !r.replica.is_empty() {
                    match self.rule.replicas.iter().position(|(name, address)| {
                        *name == r.replica || address.as_deref() == Some(r.replica.as_str())
                    }) {
                        Some(i) => self.served[i] += 1,
                        None => self.strangers += 1,
                    }
                }
            }
            Record::Event(e)
                if e.is(EventKind::Probe)
                    && DetailWord::ProbeUp.opens(&e.detail)
                    && self.rule.holds(e.at_ns) =>
            {
                let Some(value) = e.value else { return };
                if let Some(i) = self.rule.replicas.iter().position(|(n, _)| *n == e.subject) {
                    self.gauges[i].0 += value as f64 / 1000.0;
                    self.gauges[i].1 += 1;
                }
            }
            _ => {}
        }
    }

    /// `None` while a baseline request is not journaled yet; then what the baseline failed, in
    /// words, one line a gate (empty: nothing the evidence shows is unhealthy).
    pub(super) fn verdict(&self) -> Option<Vec<String>> {
        if self.seen < self.expected {
            return None;
        }
        let rule = &self.rule;
        let mut failed = Vec::new();
        if self.expected > 0 {
            let goodput = self.met as f64 / self.expected as f64;
            if goodput < rule.goodput_min {
                failed.push(format!(
                    "G6: {} of the baseline's {} requests met the SLO (goodput {goodput:.4} < {})",
                    self.met, self.expected, rule.goodput_min
                ));
            }
        }
        for ((name, _), &(sum, n)) in rule.replicas.iter().zip(&self.gauges) {
            let mean = sum / n.max(1) as f64;
            if n > 0 && mean > rule.waiting_max {
                failed.push(format!(
                    "G7: {name}'s waiting queue averaged {mean:.3} over {n} readings (> {})",
                    rule.waiting_max
                ));
            }
        }
        let attributed = self.served.iter().sum::<u64>() + self.strangers;
        if let (Some((low, high)), true) = (rule.share_percent, attributed > 0) {
            for ((name, _), &count) in rule.replicas.iter().zip(&self.served) {
                let share = count as f64 / attributed as f64 * 100.0;
                if share < low || share > high {
                    failed.push(format!(
                        "G1: {name} served {share:.2} % of the baseline's {attributed} attributed requests (outside {low}-{high} %)"
                    ));
                }
            }
        }
        Some(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::BaselineRule;
    use super::*;
    use percentes_formats::journal::records::{EventRecord, RequestRecord};

    const MS: u64 = 1_000_000;

    fn rule(share: bool) -> BaselineRule {
        BaselineRule {
            window_ns: (1_000 * MS, 2_000 * MS),
            slo_ns: (1_000 * MS, 14_000 * MS),
            goodput_min: 0.99,
            waiting_max: 1.0,
            share_percent: share.then_some((45.0, 55.0)),
            replicas: vec![("a".into(), Some("10.0.0.1:80".into())), ("b".into(), None)],
        }
    }

    fn tally(rule: BaselineRule, expected: u64) -> BaselineTally {
        BaselineTally::of(rule, expected)
    }

    fn request(intended_ms: u64, outcome: Outcome, ttft_ms: u64, replica: &str) -> Record {
        let intended_ns = intended_ms * MS;
        Record::Request(RequestRecord {
            index: intended_ms,
            outcome: outcome as u8,
            class: 0,
            route: 0,
            intended_ns,
            dispatched_ns: Some(intended_ns),
            connect_start_ns: None,
            connect_end_ns: None,
            tls_done_ns: None,
            request_written_ns: None,
            response_head_ns: None,
            first_content_ns: Some(intended_ns + ttft_ms * MS),
            terminal_ns: intended_ns + (ttft_ms + 5) * MS,
            content_gaps_us: Vec::new(),
            content_events: 1,
            http_status: 200,
            bytes_sent: 0,
            bytes_received: 0,
            usage_prompt_tokens: None,
            usage_completion_tokens: None,
            replica: replica.into(),
            connection_id: 0,
            connection_reused: false,
            detail: String::new(),
        })
    }

    fn gauge(at_ms: u64, replica: &str, waiting: i64) -> Record {
        Record::Event(EventRecord::new(
            at_ms * MS,
            EventKind::Probe,
            replica,
            "ok",
            Some(waiting * 1000),
        ))
    }

    /// Hand-counted: 100 baseline requests, one over the TTFT threshold and one errored, so
    /// 98 met (0.98 < 0.99); requests outside the window count nowhere; no verdict until the
    /// hundredth is in.
    #[test]
    fn goodput_is_counted_over_the_baseline_by_intended_time() {
        let mut t = tally(rule(false), 100);
        t.observe(&request(999, Outcome::Errored, 0, "a"));
        t.observe(&request(2_000, Outcome::Errored, 0, "a"));
        for i in 0..99 {
            let ttft = if i == 0 { 1_001 } else { 1_000 };
            t.observe(&request(1_000 + i, Outcome::Completed, ttft, "a"));
        }
        assert_eq!(t.verdict(), None, "99 of 100 journaled");
        t.observe(&request(1_500, Outcome::Errored, 0, "b"));
        let failed = t.verdict().unwrap();
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(
            failed[0].starts_with(
                "G6: 98 of the baseline's 100 requests met the SLO (goodput 0.9800 < 0.99)"
            ),
            "{failed:?}"
        );
        // One fewer miss passes: 99 of 100 is 0.99, the limit itself.
        let mut t = tally(rule(false), 100);
        for i in 0..100 {
            let outcome = if i == 0 {
                Outcome::Censored
            } else {
                Outcome::Completed
            };
            t.observe(&request(1_000 + i, outcome, 10, "a"));
        }
        assert_eq!(t.verdict(), Some(Vec::new()));
    }

    /// G7 reads the mean of each replica's gauge readings inside the window (1, 1, 2 -> 1.333
    /// for `a`; `b`'s 5 falls after the window's end); a replica with no reading is not judged.
    #[test]
    fn the_waiting_queue_mean_is_per_replica_inside_the_window() {
        let mut t = tally(rule(false), 0);
        for (at, waiting) in [(1_000, 1), (1_500, 1), (1_999, 2)] {
            t.observe(&gauge(at, "a", waiting));
        }
        t.observe(&gauge(2_000, "b", 5));
        t.observe(&Record::Event(EventRecord::new(
            1_200 * MS,
            EventKind::Probe,
            "a",
            "down: refused",
            None,
        )));
        let failed = t.verdict().unwrap();
        assert_eq!(
            failed,
            vec!["G7: a's waiting queue averaged 1.333 over 3 readings (> 1)".to_owned()]
        );
    }

    /// G1 over attributed requests only, an address reading as its replica and a stranger in
    /// the denominator: at 60-40 both replicas are outside 45-55 %.
    #[test]
    fn the_share_counts_attributed_requests_and_reads_addresses_as_replicas() {
        let mut t = tally(rule(true), 10);
        for i in 0..6 {
            t.observe(&request(1_000 + i, Outcome::Completed, 1, "10.0.0.1:80"));
        }
        for i in 6..10 {
            t.observe(&request(1_000 + i, Outcome::Completed, 1, "b"));
        }
        let failed = t.verdict().unwrap();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(failed[0].starts_with("G1: a served 60.00 %"), "{failed:?}");
        // Unattributed requests are not judged; with no replica named at all G1 is left alone.
        let mut t = tally(rule(true), 3);
        for i in 0..3 {
            t.observe(&request(1_000 + i, Outcome::Completed, 1, ""));
        }
        assert_eq!(t.verdict(), Some(Vec::new()));
        // Without a replica-loss variant, no share is judged.
        let mut t = tally(rule(false), 2);
        t.observe(&request(1_000, Outcome::Completed, 1, "a"));
        t.observe(&request(1_001, Outcome::Completed, 1, "a"));
        assert_eq!(t.verdict(), Some(Vec::new()));
    }
}
