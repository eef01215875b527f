//! The spare keeper's decisions on a simulated clock (issue 32): [`Keeper::wanted`] and
//! [`idle_expired`] every [`KEEPER_INTERVAL`] against a pool whose requests take idle
//! connections or connect in line. The keeper's loop itself (`pacer::keep_spares`) runs on a
//! real pool only; this is the one model of it that remains beside the production code.

use std::time::Duration;

use super::super::dispatch::KEEPER_INTERVAL;
use super::super::dispatch::{idle_expired, Keeper};

/// The keep-alive pool of one worker under a simulated clock: the spare keeper's turns every
/// [`KEEPER_INTERVAL`] ([`Keeper::wanted`], retiring by [`idle_expired`]), and requests that each
/// take an idle connection (retiring the expired ones first, as `Local::take` does) or connect in
/// line. `retire_ahead: None` stands for the keeper before issue 32, which counted idle
/// connections without retiring the expired ones.
pub(in crate::run) struct PoolWorld {
    pub(in crate::run) keeper: Keeper,
    pub(in crate::run) idle_limit: Duration,
    pub(in crate::run) retire_ahead: Option<Duration>,
    /// Intended times, ns.
    pub(in crate::run) requests: Vec<u64>,
    pub(in crate::run) service_ns: u64,
    pub(in crate::run) connect_ns: u64,
}

/// What the pool did.
#[derive(Debug, Default)]
pub(in crate::run) struct PoolRun {
    /// The requests that found no idle connection and connected in line (by index).
    pub(in crate::run) connected_in_line: Vec<usize>,
    /// Connections the keeper opened ahead of need.
    pub(in crate::run) opened_ahead: usize,
    /// Idle connections retired for their age.
    pub(in crate::run) expired: usize,
}

impl PoolWorld {
    pub(in crate::run) fn run(&self, until_ns: u64) -> PoolRun {
        let tick = KEEPER_INTERVAL.as_nanos() as u64;
        let mut run = PoolRun::default();
        // Idle connections by when they became idle; requests in flight by when they end.
        let mut idle: Vec<u64> = Vec::new();
        let mut busy: Vec<u64> = Vec::new();
        let mut service_s = None;
        let mut next = self.requests.iter().copied().enumerate().peekable();
        let retire = |idle: &mut Vec<u64>, now: u64, ahead: Duration| {
            let before = idle.len();
            idle.retain(|&since| {
                !idle_expired(Duration::from_nanos(now - since), ahead, self.idle_limit)
            });
            before - idle.len()
        };
        let mut now = 0;
        while now <= until_ns {
            // Requests that ended by now give their connection back.
            busy.retain(|&end| {
                if end <= now {
                    idle.push(end);
                    false
                } else {
                    true
                }
            });
            // Requests due by the next turn, in order.
            while let Some(&(i, at)) = next.peek().filter(|&&(_, at)| at < now + tick) {
                next.next();
                run.expired += retire(&mut idle, at, Duration::ZERO);
                let start = if idle.pop().is_some() {
                    at
                } else {
                    run.connected_in_line.push(i);
                    at + self.connect_ns
                };
                busy.push(start + self.service_ns);
                service_s = Some(self.service_ns as f64 / 1e9);
            }
            now += tick;
            // The keeper's turn.
            if let Some(ahead) = self.retire_ahead {
                run.expired += retire(&mut idle, now, ahead);
            }
            let wanted = self.keeper.wanted(now, service_s, busy.len(), idle.len());
            for _ in 0..wanted {
                idle.push(now + self.connect_ns);
                run.opened_ahead += 1;
            }
        }
        run
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::dispatch::KEEPER_AHEAD;
    use super::super::{MS, S};
    use super::*;

    /// Issue 32's idle-gap defect on the simulated pool: one request every 10 s, an idle limit of
    /// 4 s. The keeper keeps spares fresh, retiring each a look-ahead before its limit and
    /// replacing it, so only the first request (before any spare) connects in line; the keeper
    /// before issue 32, counting expired connections as spares, left every request after a gap
    /// to connect in line (at hosted rates over https, a TLS handshake in its skew and TTFT).
    #[test]
    fn after_an_idle_gap_the_next_request_finds_a_fresh_spare() {
        let world = |retire_ahead| PoolWorld {
            keeper: Keeper {
                phases: vec![(60 * S, 0.1)],
                workers: 1.0,
                timeout_s: 30.0,
                one_at_a_time: false,
            },
            idle_limit: Duration::from_secs(4),
            retire_ahead,
            requests: (0..6).map(|i| i * 10 * S).collect(),
            service_ns: 50 * MS,
            connect_ns: MS,
        };
        let now = world(Some(KEEPER_AHEAD)).run(60 * S);
        assert_eq!(now.connected_in_line, vec![0]);
        assert!(now.expired > 0 && now.opened_ahead > now.expired, "{now:?}");
        let before = world(None).run(60 * S);
        assert_eq!(
            before.connected_in_line,
            vec![0, 1, 2, 3, 4, 5],
            "{before:?}"
        );
    }
}
