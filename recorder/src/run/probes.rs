//! Direct probes of each replica (`target.replica_addresses`) on their own threads, journaled as
//! `probe` events.

use super::*;

/// Fastest and slowest replica probing: once per goodput bucket, within these bounds.
pub(super) const PROBE_PERIOD_MIN: Duration = Duration::from_millis(50);
pub(super) const PROBE_PERIOD_MAX: Duration = Duration::from_secs(1);

/// Probes one replica's own address each `period` on absolute deadlines until the run is done,
/// journaling each result as a `probe` event (formats/JOURNAL.md).
pub(super) fn probe_thread(
    name: &str,
    address: std::net::SocketAddr,
    period: Duration,
    epoch: Instant,
    sender: &Sender,
    shared: &Shared,
    stop: &AtomicBool,
) {
    let mut due = epoch;
    while !shared.done.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        let at_ns = now_ns(epoch);
        let found = crate::probe::probe(address, period.min(Duration::from_millis(500)));
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
