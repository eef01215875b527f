//! Proxy failover on real parts (issue 56 item 3): the testbed's HAProxy, the one proxy every
//! request goes through, killed under load and started again, as a proxy pod is lost and its
//! replacement comes up on the same Service address.
//!
//! At its stated second the controller reads HAProxy's view of each replica (the requests in
//! flight through it), SIGKILLs HAProxy's process group (nothing drains: the kernel closes its
//! sockets, on the client's side and on the replicas'), waits the stated restart delay, starts
//! HAProxy again from the same configuration on the same port, and waits until it counts every
//! replica UP. Each step is a `timeline` event journaled as it is seen: `orchestrator` for the
//! kill (with what was in flight), `container-start` for the new process, `orchestrator` when it
//! counts the replicas up again, `restart-failed` when it cannot start or never does. Between
//! the kill and the restart the service's port refuses connections; the requests' fates (those
//! in flight, those refused, the first one served again) are the journal's, read by the study.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::haproxy::{haproxy_ask, parse_stat, start_proxy};
use super::RealBed;
use crate::error::{bail, Context, Result};
use percentes_formats::journal::change::{Change, PROXY_KILLED, PROXY_STARTED, PROXY_UP};
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;

/// The tag every failover step's detail opens with (formats/JOURNAL.md).
const TAG: &str = Change::ProxyFailover.prefix();

/// How long a restarted HAProxy may take to count every replica UP: its checks run every 250 ms
/// and one success puts a server up, so seconds mean it is not checking them.
const UP_WAIT: Duration = Duration::from_secs(10);

/// How often the controller looks while it waits.
const LOOK: Duration = Duration::from_millis(10);

/// `[testbed.proxy_failover]`: when HAProxy is killed and how long it stays down.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailoverPlan {
    /// Experiment seconds into the measurement at which HAProxy is killed (divided by the time
    /// factor): the measurement before it is the baseline.
    pub start_s: f64,
    /// Experiment seconds from the kill to the new HAProxy's start (divided by the time
    /// factor): how long the service address refuses connections, as a replacement proxy's
    /// scheduling and start would take.
    pub restart_delay_s: f64,
}

impl FailoverPlan {
    /// Both times in range.
    pub fn check(&self) -> Result<()> {
        for (key, value) in [
            ("start_s", self.start_s),
            ("restart_delay_s", self.restart_delay_s),
        ] {
            if !(value.is_finite() && (0.0..=3600.0).contains(&value)) {
                bail!("[testbed.proxy_failover] {key} = {value} must lie in 0..=3600");
            }
        }
        Ok(())
    }
}

/// How a failover ended.
#[derive(Clone, Debug, PartialEq)]
pub enum FailoverEnd {
    /// HAProxy was killed, restarted, and counted every replica up again.
    Complete {
        /// From the kill to the new process's start.
        down: Duration,
        /// From the new process's start to every replica counted UP.
        up: Duration,
    },
    /// The new HAProxy did not start, or never counted every replica up; the detail says which.
    Failed(String),
    /// The run ended before the kill or before the failover finished.
    Unfinished,
}

/// Kills HAProxy at `at`, starts it again `restart_delay` later, and waits until it counts every
/// replica UP, journaling each step into `inbox`. Returns early, `Unfinished`, if the run ends.
pub fn fail_over(
    bed: &mut RealBed,
    (at, restart_delay): (Instant, Duration),
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> FailoverEnd {
    while Instant::now() < at {
        if finished.load(Ordering::Relaxed) {
            return FailoverEnd::Unfinished;
        }
        std::thread::sleep(LOOK.min(at.saturating_duration_since(Instant::now())));
    }
    let socket = bed.folder.join("haproxy.sock");
    let in_flight = in_flight(&socket);
    let pid = bed.proxy.id();
    // Journaled at the instant of the signal: what was in flight through it ends after it.
    let killed = Instant::now();
    kill_group(pid);
    let _ = bed.proxy.wait();
    inbox.report_at(
        killed,
        TimelineSubject::Orchestrator,
        &format!("{TAG}HAProxy (pid {pid}){PROXY_KILLED}, requests in flight through it by replica: {in_flight}"),
        None,
    );
    while killed.elapsed() < restart_delay {
        if finished.load(Ordering::Relaxed) {
            return FailoverEnd::Unfinished;
        }
        std::thread::sleep(LOOK);
    }
    let started = Instant::now();
    if let Err(e) = bed.restart_proxy() {
        let why = format!("{TAG}HAProxy did not start again: {e:#}");
        inbox.report(TimelineSubject::RestartFailed, &why, None);
        return FailoverEnd::Failed(why);
    }
    inbox.report_at(
        started,
        TimelineSubject::ContainerStart,
        &format!(
            "{TAG}{PROXY_STARTED} (pid {}), the same configuration on the same port, {:.3} s after the kill",
            bed.proxy.id(),
            (started - killed).as_secs_f64()
        ),
        None,
    );
    await_up(bed, (killed, started), inbox, finished)
}

/// Waits until the HAProxy `started` after the kill counts every replica UP; how the failover
/// ended.
fn await_up(
    bed: &RealBed,
    (killed, started): (Instant, Instant),
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) -> FailoverEnd {
    let socket = bed.folder.join("haproxy.sock");
    let replicas = bed.replicas.len();
    loop {
        if finished.load(Ordering::Relaxed) {
            return FailoverEnd::Unfinished;
        }
        let up = haproxy_ask(&socket, "show stat")
            .and_then(|text| parse_stat(&text))
            .map(|stats| stats.values().filter(|s| s.status == "UP").count())
            .unwrap_or(0);
        if up == replicas {
            let end = FailoverEnd::Complete {
                down: started - killed,
                up: started.elapsed(),
            };
            inbox.report(
                TimelineSubject::Orchestrator,
                &format!(
                    "{TAG}{PROXY_UP}{up} of {replicas} replicas UP, {:.3} s after its start",
                    started.elapsed().as_secs_f64()
                ),
                None,
            );
            return end;
        }
        if started.elapsed() > UP_WAIT {
            let why = format!(
                "{TAG}{PROXY_UP}{up} of {replicas} replicas UP after {} s",
                UP_WAIT.as_secs()
            );
            inbox.report(TimelineSubject::RestartFailed, &why, None);
            return FailoverEnd::Failed(why);
        }
        std::thread::sleep(LOOK);
    }
}

/// What HAProxy has in flight on each replica, in words (`show stat`'s `scur`).
fn in_flight(socket: &std::path::Path) -> String {
    haproxy_ask(socket, "show stat")
        .and_then(|text| parse_stat(&text))
        .map(|stats| {
            stats
                .iter()
                .map(|(name, s)| format!("{name} {}", s.in_flight))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|e| format!("not read: {e:#}"))
}

/// SIGKILL to the process group `pid` leads.
fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) on the group this runner started for HAProxy; no memory is involved.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

impl RealBed {
    /// Starts HAProxy again from the configuration it was started with (kept in the run's
    /// folder), on the same port, in the placement's target groups.
    pub(crate) fn restart_proxy(&mut self) -> Result<()> {
        let path = self.folder.join("haproxy.cfg");
        let config = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let _ = std::fs::remove_file(self.folder.join("haproxy.sock"));
        self.proxy = start_proxy(&config, &self.folder, self.placed.as_mut())?;
        Ok(())
    }
}

/// The declaration's lines on the failover: how it ended and each step as the journal holds it
/// (`steps`: seconds from the epoch and the event).
pub fn words(plan: &FailoverPlan, ended: Option<&FailoverEnd>, steps: &[(f64, String)]) -> String {
    let planned = format!(
        "HAProxy killed {} experiment seconds into the measurement, started again {} experiment seconds later",
        plan.start_s, plan.restart_delay_s
    );
    let ended = match ended {
        Some(FailoverEnd::Complete { down, up }) => format!(
            "complete: down {:.3} s, every replica counted UP {:.3} s after the restart",
            down.as_secs_f64(),
            up.as_secs_f64()
        ),
        Some(FailoverEnd::Failed(why)) => format!("FAILED: {why}"),
        Some(FailoverEnd::Unfinished) | None => {
            "unfinished: the run ended before the failover did".to_owned()
        }
    };
    super::rollout::change_words("The proxy failover", &planned, &ended, steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_out_of_range_is_refused_by_key() {
        let plan = FailoverPlan {
            start_s: 40.0,
            restart_delay_s: 10.0,
        };
        plan.check().unwrap();
        for (start_s, restart_delay_s, key) in [
            (-1.0, 10.0, "start_s"),
            (f64::NAN, 10.0, "start_s"),
            (40.0, 1e9, "restart_delay_s"),
        ] {
            let why = FailoverPlan {
                start_s,
                restart_delay_s,
            }
            .check()
            .unwrap_err()
            .to_string();
            assert!(why.contains(key), "{why}");
        }
    }

    #[test]
    fn the_words_say_how_it_ended() {
        let plan = FailoverPlan {
            start_s: 40.0,
            restart_delay_s: 10.0,
        };
        let done = FailoverEnd::Complete {
            down: Duration::from_millis(2_004),
            up: Duration::from_millis(261),
        };
        let text = words(&plan, Some(&done), &[(70.0, "orchestrator: killed".into())]);
        assert!(
            text.contains(
                "complete: down 2.004 s, every replica counted UP 0.261 s after the restart"
            ),
            "{text}"
        );
        assert!(text.contains("- 70.000 s: orchestrator: killed"), "{text}");
        let text = words(&plan, None, &[]);
        assert!(text.contains("unfinished"), "{text}");
    }
}
