//! Direct probes of each replica (`target.replica_addresses`) on their own threads, journaled as
//! `probe` events.

use super::*;

/// Fastest and slowest replica probing: once per goodput bucket, within these bounds.
pub(super) const PROBE_PERIOD_MIN: Duration = Duration::from_millis(50);
pub(super) const PROBE_PERIOD_MAX: Duration = Duration::from_secs(1);

/// Probes one replica's own address each `period` on absolute deadlines until the run is done,
/// reading its waiting-queue gauge too at the first probe due after each `gauge_period`, and
/// journals each result as a `probe` event (formats/JOURNAL.md; a probe that did not read the
/// gauge carries no value). A DNS name is resolved again
/// at every probe, so a replacement pod behind the same name (a headless Service) is probed at
/// its new address, and an SRV name at its new port too; a name that does not resolve is
/// `down`.
pub(super) fn probe_thread(
    name: &str,
    address: &str,
    (period, gauge_period): (Duration, Duration),
    epoch: Instant,
    sender: &Sender,
    shared: &Shared,
    stop: &AtomicBool,
) {
    let mut due = epoch;
    let mut gauge_due = epoch;
    while !shared.done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let at_ns = now_ns(epoch);
        let gauge = Instant::now() >= gauge_due;
        if gauge {
            gauge_due = (gauge_due + gauge_period).max(Instant::now());
        }
        let found = match resolve(address) {
            Ok(resolved) => {
                crate::probe::probe(resolved, period.min(Duration::from_millis(500)), gauge)
            }
            Err(why) => crate::probe::Probe::Down(why),
        };
        let (detail, value) = found.detail_and_value();
        sender.send(Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Probe.code(),
            subject: name.to_owned(),
            detail,
            value,
        }));
        due += period;
        let now = Instant::now();
        if due < now {
            // A slow probe (a silent replica) skips the deadlines it missed instead of bursting.
            due = now;
        }
        std::thread::sleep(due.saturating_duration_since(Instant::now()).min(period));
    }
}

/// `host:port` as one socket address: an IP as it is, a DNS name by the system resolver (its
/// first address). An SRV name (`_service._proto.name`, the only form without a port the
/// configuration accepts) is asked of the nameserver of /etc/resolv.conf for its host and port
/// ([`super::dns`]), then the host resolved as a name.
pub(super) fn resolve(address: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = address.parse() {
        return Ok(ip);
    }
    if !address.contains(':') {
        let conf = std::fs::read_to_string("/etc/resolv.conf")
            .map_err(|e| format!("cannot read /etc/resolv.conf for {address}: {e}"))?;
        let server = super::dns::nameserver(&conf)
            .ok_or_else(|| format!("/etc/resolv.conf names no nameserver to ask for {address}"))?;
        let records = super::dns::srv(address, server, Duration::from_millis(500))?;
        let chosen = super::dns::choose(&records).ok_or("no SRV records")?;
        return (chosen.target.as_str(), chosen.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {} (SRV {address}): {e}", chosen.target))?
            .next()
            .ok_or_else(|| format!("{} (SRV {address}) resolves to no address", chosen.target));
    }
    address
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {address}: {e}"))?
        .next()
        .ok_or_else(|| format!("{address} resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_an_ip_or_a_name_resolved_at_each_probe() {
        assert_eq!(resolve("127.0.0.1:8001").unwrap().port(), 8001);
        let named = resolve("localhost:8002").unwrap();
        assert!(named.ip().is_loopback() && named.port() == 8002, "{named}");
        let e = resolve("no-such-host.invalid:8000").unwrap_err();
        assert!(e.contains("no-such-host.invalid"), "{e}");
    }
}
