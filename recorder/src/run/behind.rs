//! The fall-behind policy (SPEC §2 "Falling behind", seeds/003's lag policy, seeds/004's "abort
//! when offered load collapses"): the judgement itself, a pure function of intended and observed
//! times, so it is tested on simulated clocks; the pacer and the telemetry thread feed it.
//!
//! A recorder that sends a request `client.behind_lag_ms` or more after its intended time is
//! *behind*. Behind for every request it reaches over `client.behind_span_ms` of intended time
//! without a break, the run it is recording is no longer the scheduled one: the client is unfit,
//! and the run ends at once, sealed `escaped` (trigger `client-behind`), instead of going on to the
//! end of the schedule to publish nothing. A worker that reaches nothing at all (starved, stopped)
//! is judged from the request it is waiting to send: once that one is `lag + span` overdue, every
//! request of the span before it is at least `lag` late, whatever the worker does next.

/// One worker's judgement, request by request.
#[derive(Clone, Debug)]
pub(super) struct Behind {
    lag_ns: u64,
    span_ns: u64,
    /// The intended time of the first request of the current run of late ones.
    since_ns: Option<u64>,
}

/// Why the policy fired: the run of late requests, in intended time, and the lateness now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fired {
    /// Intended time of the first late request of the run, ns from the epoch.
    pub(super) since_ns: u64,
    /// Intended time of the request that completed the span, ns from the epoch.
    pub(super) until_ns: u64,
    /// How late that request was reached, ns.
    pub(super) late_ns: u64,
}

impl Fired {
    /// The escape's detail, in words (journaled, printed at the end of `record`).
    pub(super) fn detail(&self, lag_ns: u64) -> String {
        format!(
            "the recorder fell behind its schedule: every request intended from {:.3} s to {:.3} s was reached {} ms or more after its intended time (the last {:.3} s late), so the load sent is not the load scheduled; the client is unfit (CPU starved, stopped or throttled), not the target",
            self.since_ns as f64 / 1e9,
            self.until_ns as f64 / 1e9,
            lag_ns / 1_000_000,
            self.late_ns as f64 / 1e9,
        )
    }
}

impl Behind {
    pub(super) fn new(lag_ns: u64, span_ns: u64) -> Behind {
        Behind {
            lag_ns,
            span_ns,
            since_ns: None,
        }
    }

    /// The worker reached the request intended at `intended_ns` at `now_ns` (sent it, or gave
    /// it up as `client-late`). A request reached in time ends the run of late ones.
    pub(super) fn reached(&mut self, intended_ns: u64, now_ns: u64) -> Option<Fired> {
        let late_ns = now_ns.saturating_sub(intended_ns);
        if late_ns < self.lag_ns {
            self.since_ns = None;
            return None;
        }
        let since_ns = *self.since_ns.get_or_insert(intended_ns);
        (intended_ns.saturating_sub(since_ns) >= self.span_ns).then_some(Fired {
            since_ns,
            until_ns: intended_ns,
            late_ns,
        })
    }

    /// A worker that has not reached the request intended at `waiting_ns` by `now_ns`: fired
    /// once it is `lag + span` overdue (the telemetry thread asks, since a starved worker cannot).
    pub(super) fn waiting(&self, waiting_ns: u64, now_ns: u64) -> Option<Fired> {
        let late_ns = now_ns.saturating_sub(waiting_ns);
        (late_ns >= self.lag_ns + self.span_ns).then(|| Fired {
            since_ns: waiting_ns,
            until_ns: now_ns - self.lag_ns,
            late_ns,
        })
    }

    /// The lag this policy counts as behind, ns.
    pub(super) fn lag_ns(&self) -> u64 {
        self.lag_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A simulated 3 s SIGSTOP at 100 rps (a request every 10 ms): the worker resumes at 13 s
    /// and reaches the requests intended from 10 s on at once. Those intended up to 12 s are
    /// 1 s late or more, a span of 2 s: the policy fires at the one intended at 11 s.
    #[test]
    fn a_stop_longer_than_lag_plus_span_fires_on_the_requests_it_delayed() {
        let mut behind = Behind::new(1_000 * MS, 1_000 * MS);
        for i in 0..1_000 {
            let intended = i * 10 * MS;
            assert_eq!(behind.reached(intended, intended + 200_000), None);
        }
        let resume = 13_000 * MS;
        let fired = (1_000..1_300)
            .map(|i| i * 10 * MS)
            .find_map(|intended| behind.reached(intended, resume))
            .expect("fires");
        assert_eq!(fired.since_ns, 10_000 * MS);
        assert_eq!(fired.until_ns, 11_000 * MS);
        assert_eq!(fired.late_ns, 2_000 * MS);
        assert!(fired
            .detail(1_000 * MS)
            .contains("from 10.000 s to 11.000 s"));
    }

    /// A stall shorter than lag + span catches up without firing, and a request in time breaks
    /// a run of late ones, so two short stalls never add up.
    #[test]
    fn short_stalls_and_broken_runs_do_not_fire() {
        let mut behind = Behind::new(1_000 * MS, 1_000 * MS);
        // 1.9 s stopped: requests intended 10.0-10.9 s are late by 1 s or more, a span of 0.9 s.
        let fired = (1_000..1_190)
            .map(|i| i * 10 * MS)
            .find_map(|intended| behind.reached(intended, 11_900 * MS));
        assert_eq!(fired, None);
        // Back in time: the run is broken.
        assert_eq!(behind.reached(12_000 * MS, 12_000 * MS + 1), None);
        // A second 1.9 s stall starts its own run.
        let fired = (1_300..1_490)
            .map(|i| i * 10 * MS)
            .find_map(|intended| behind.reached(intended, 14_900 * MS));
        assert_eq!(fired, None);
    }

    /// A worker that reaches nothing is judged from the request it waits for: not before it is
    /// lag + span overdue, and then at once; early in a run (now below the lag) nothing
    /// underflows.
    #[test]
    fn a_starved_worker_is_judged_from_the_request_it_waits_for() {
        let behind = Behind::new(1_000 * MS, 1_000 * MS);
        assert_eq!(behind.waiting(0, 0), None);
        assert_eq!(behind.waiting(10 * MS, 20 * MS), None);
        assert_eq!(behind.waiting(5_000 * MS, 4_000 * MS), None, "not yet due");
        assert_eq!(behind.waiting(5_000 * MS, 6_999 * MS), None);
        let fired = behind.waiting(5_000 * MS, 7_000 * MS).expect("fires");
        assert_eq!((fired.since_ns, fired.until_ns), (5_000 * MS, 6_000 * MS));
        assert_eq!(fired.late_ns, 2_000 * MS);
    }
}
