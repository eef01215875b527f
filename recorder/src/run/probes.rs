//! Direct probes of each replica (`target.replica_addresses`) on their own threads, journaled as
//! `probe` events.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::config::Config;
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{EventKind, EventRecord, Record};

use super::ground::{Host, SideGround};
use super::plan::RunPlan;
use super::state::{Sender, Shared};
use crate::error::{io, RecordError};
use crate::probe::Probe;

/// What a replica's probe stands on: the clock and resolver of a thread beside the workers, and
/// the probe itself.
pub(super) trait ProbeGround: SideGround {
    /// Probes `address` once, giving up after `timeout` in all, reading the waiting-queue gauge
    /// too when `gauge` asks ([`crate::probe::probe`]).
    fn probe(&self, address: SocketAddr, timeout: Duration, gauge: bool) -> Probe;
}

/// The real probe, over TCP: a recording's.
impl ProbeGround for Host {
    fn probe(&self, address: SocketAddr, timeout: Duration, gauge: bool) -> Probe {
        crate::probe::probe(address, timeout, gauge)
    }
}

/// A probe's timing from the plan: its period, the gauge's, the telemetry-gap watch (its
/// pinned gap and T_inject) where the run has a fault, and the nameserver names resolve at.
pub(super) type ProbeTiming = (
    Duration,
    Duration,
    Option<(Duration, u64)>,
    Option<SocketAddr>,
);

/// The [`ProbeTiming`] of `plan`.
pub(super) fn probe_timing(plan: &RunPlan) -> ProbeTiming {
    (
        plan.probe_period,
        plan.gauge_period,
        plan.telemetry_gap.zip(plan.inject_at_ns),
        plan.nameserver,
    )
}

/// Probes one replica's own address each `period` on absolute deadlines until the run is done,
/// reading its waiting-queue gauge too at the first probe due after each `gauge_period`, and
/// journals each result as a `probe` event (formats/JOURNAL.md; a probe that did not read the
/// gauge carries no value). A DNS name is resolved again
/// at every probe, so a replacement pod behind the same name (a headless Service) is probed at
/// its new address, and an SRV name at its new port too; a name that does not resolve is
/// `down`.
pub(super) fn probe_thread<G: ProbeGround>(
    (name, address): (&str, &str),
    (period, gauge_period, watch, nameserver): ProbeTiming,
    ground: &G,
    (sender, shared): (&Sender, &Shared),
    stop: &AtomicBool,
) {
    let (period_ns, gauge_period_ns) = (period.as_nanos() as u64, gauge_period.as_nanos() as u64);
    let mut due = 0;
    let mut gauge_due = 0;
    let mut gap = watch.map(|(max, inject_ns)| GaugeGap::new(max, inject_ns));
    while !shared.done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let at_ns = ground.now_ns();
        let gauge = at_ns >= gauge_due;
        if gauge {
            gauge_due = (gauge_due + gauge_period_ns).max(at_ns);
        }
        let found = match ground.resolve(address, nameserver) {
            Ok(resolved) => ground.probe(resolved, period.min(Duration::from_millis(500)), gauge),
            Err(why) => Probe::Down(why.to_string()),
        };
        let (detail, value) = found.detail_and_value();
        let gone = gap
            .as_mut()
            .filter(|_| gauge)
            .and_then(|g| g.read(at_ns, value.is_some(), &detail));
        sender.send(Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Probe.code(),
            subject: name.to_owned(),
            detail,
            value,
        }));
        if let Some(gone) = gone {
            let why = format!("{name} ({address}): {gone}");
            telemetry_missing(shared, sender, stop, at_ns, &why);
        }
        // A slow probe (a silent replica) skips the deadlines it missed instead of bursting.
        due = (due + period_ns).max(ground.now_ns());
        ground.sleep_until(due);
    }
}

/// Starts the threads that watch the replicas from outside the workers: one probe thread per
/// replica with a direct address (G7, replica-ready), then the scrape threads of the server's
/// own metrics ([`super::scrapes`], SPEC §2). Shard 0 alone starts them.
pub(super) fn observers(
    config: &Config,
    plan: &RunPlan,
    epoch: Instant,
    (sender, shared): (&Sender, &Arc<Shared>),
    stop: &Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<()>>, RecordError> {
    let mut threads = Vec::new();
    for (name, address) in &config.target.replica_addresses {
        let (name, address) = (name.clone(), address.clone());
        let (sender, shared, stop) = (sender.clone(), Arc::clone(shared), Arc::clone(stop));
        let period = probe_timing(plan);
        threads.push(
            std::thread::Builder::new()
                .name(format!("probe-{name}"))
                .spawn(move || {
                    let (ground, on) = (Host { epoch }, (&sender, &*shared));
                    probe_thread((&name, &address), period, &ground, on, &stop)
                })
                .map_err(io("cannot start a probe thread"))?,
        );
    }
    threads.extend(super::scrapes::start(config, epoch, sender, shared, stop)?);
    Ok(threads)
}

/// Whether a replica's waiting-queue gauge, once read, has gone unread too long before the fire
/// (seeds/004: abort when required telemetry disappears; `fault.telemetry_gap_max_s`). A gauge
/// never read is not judged here: G7 is then unobserved, which the analyzer fails.
#[derive(Debug)]
pub(super) struct GaugeGap {
    max_ns: u64,
    inject_ns: u64,
    /// When the gauge was last read, ns from the epoch.
    last_read_ns: Option<u64>,
}

impl GaugeGap {
    pub(super) fn new(max: Duration, inject_ns: u64) -> GaugeGap {
        GaugeGap {
            max_ns: max.as_nanos() as u64,
            inject_ns,
            last_read_ns: None,
        }
    }

    /// One attempt to read the gauge at `at_ns` (`read`: it gave a value; `detail`: the probe's
    /// answer). Why the telemetry is gone, once, when it is.
    pub(super) fn read(&mut self, at_ns: u64, read: bool, detail: &str) -> Option<String> {
        if read {
            self.last_read_ns = Some(at_ns);
            return None;
        }
        let last = self.last_read_ns?;
        if at_ns >= self.inject_ns || at_ns - last < self.max_ns {
            return None;
        }
        self.last_read_ns = None;
        Some(format!(
            "its waiting-queue gauge, read at {:.3} s, has gone unread for {:.3} s (the last probe: {})",
            last as f64 / 1e9,
            (at_ns - last) as f64 / 1e9,
            if DetailWord::ProbeUp.opens(detail) {
                "answered without the gauge"
            } else {
                detail
            }
        ))
    }
}

/// Ends the run before the fire when a replica's gauge disappeared: an `escape` event
/// (`telemetry-missing`), offered load stopped, the seal `escaped`.
fn telemetry_missing(shared: &Shared, sender: &Sender, stop: &AtomicBool, at_ns: u64, why: &str) {
    let detail = format!("required telemetry disappeared before injection: {why}; G7 reads this gauge over the baseline");
    let subject = percentes_formats::journal::records::TELEMETRY_MISSING;
    shared.abort(
        sender,
        stop,
        (at_ns, subject, &detail, None),
        "The fault will not be fired; offered load stopped and the journal is sealed escaped (seeds/004; SPEC §10)",
    );
}

#[cfg(test)]
mod tests {
    use super::super::dns::resolve;
    use super::*;

    const S: u64 = 1_000_000_000;

    /// Hand-timed: a 5 s limit, T_inject at 60 s. A gauge never read is not judged; read at
    /// 10 s, missed until 14.9 s, nothing; missed at 15 s, gone (once); read again, the clock
    /// restarts; a gap reaching past T_inject is the fault's, not the telemetry's.
    #[test]
    fn a_gauge_that_was_read_and_then_goes_unread_is_gone_once() {
        let mut gap = GaugeGap::new(Duration::from_secs(5), 60 * S);
        assert_eq!(gap.read(0, false, "down: refused"), None);
        assert_eq!(gap.read(9 * S, false, "ok"), None);
        assert_eq!(gap.read(10 * S, true, "ok"), None);
        assert_eq!(gap.read(14_900_000_000, false, "down: refused"), None);
        let gone = gap.read(15 * S, false, "down: refused").expect("gone");
        assert!(
            gone.contains(
                "read at 10.000 s, has gone unread for 5.000 s (the last probe: down: refused)"
            ),
            "{gone}"
        );
        assert_eq!(gap.read(16 * S, false, "ok"), None, "said once");
        assert_eq!(gap.read(20 * S, true, "ok"), None);
        assert_eq!(gap.read(24 * S, false, "ok"), None);
        let gone = gap.read(25 * S, false, "ok").expect("gone");
        assert!(gone.contains("answered without the gauge"), "{gone}");
        let mut late = GaugeGap::new(Duration::from_secs(5), 60 * S);
        assert_eq!(late.read(56 * S, true, "ok"), None);
        assert_eq!(late.read(61 * S, false, "down: refused"), None);
    }

    #[test]
    fn an_address_is_an_ip_or_a_name_resolved_at_each_probe() {
        assert_eq!(resolve("127.0.0.1:8001", None).unwrap().port(), 8001);
        let named = resolve("localhost:8002", None).unwrap();
        assert!(named.ip().is_loopback() && named.port() == 8002, "{named}");
        let e = resolve("no-such-host.invalid:8000", None).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Lookup, "{e}");
        assert!(e.to_string().contains("no-such-host.invalid"), "{e}");
    }
}
