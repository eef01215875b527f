//! Sharded capture's start barrier and clock facts (SPEC §2 "Sharded capture").
//!
//! N recorders share one schedule and one epoch: an instant on the realtime clock agreed in
//! advance (`--start-at`). Each waits for it, then fixes its clock anchors so that the epoch on
//! its own monotonic clock is that instant; every timestamp it journals then counts from the same
//! moment as every other shard's, within the hosts' clock error, which each journals as the kernel
//! reports it. A recorder that comes to the barrier after the epoch has passed by more than
//! `shards.start_late_max_ms` refuses to record before its journal exists.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::manifest::Shard;

use super::dispatch::STOP_POLL;
use super::host::{monotonic_now_ns, read_trimmed};
use super::plan::EPOCH_LEAD;
use crate::error::{ErrorKind, RecordError};

/// The farthest ahead an agreed epoch may be: an epoch a day away is a typing error, not a plan.
pub const START_AT_AHEAD_MAX: Duration = Duration::from_secs(24 * 3600);

/// The epoch a run counts from, on both clocks, and what the start says about itself.
#[derive(Debug)]
pub(super) struct Start {
    /// The epoch on the process's monotonic clock.
    pub epoch: Instant,
    /// The epoch as a raw CLOCK_MONOTONIC reading, ns.
    pub monotonic_epoch_ns: u64,
    /// The epoch on the realtime clock, ns since the Unix epoch.
    pub realtime_epoch_ns: i64,
    /// Host facts of the start (the agreed epoch, how late) and of the clock.
    pub facts: Vec<(String, String)>,
}

fn realtime_now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Fixes the epoch: [`EPOCH_LEAD`] from now, or, with `start_at_ns`, the agreed instant, waited
/// for until [`EPOCH_LEAD`] before it (in [`STOP_POLL`] pieces, so a signal ends the wait).
pub(super) fn start(
    shard: Shard,
    start_at_ns: Option<i64>,
    late_max: Duration,
    stop: &AtomicBool,
) -> Result<Start, RecordError> {
    if shard.count > 1 && start_at_ns.is_none() {
        return Err(RecordError::new(ErrorKind::Start, format!(
            "shard {shard} needs --start-at: every shard of a schedule starts at one agreed instant (SPEC §2)"
        )));
    }
    let lead_ns = EPOCH_LEAD.as_nanos() as i64;
    let Some(start_at) = start_at_ns else {
        let epoch = Instant::now() + EPOCH_LEAD;
        let monotonic_epoch_ns = monotonic_now_ns() + lead_ns as u64;
        let realtime_epoch_ns = realtime_now_ns() + lead_ns;
        let mut facts = clock_facts(realtime_epoch_ns, monotonic_epoch_ns);
        facts.push((
            HostFact::BootId.key().into(),
            read_trimmed("/proc/sys/kernel/random/boot_id"),
        ));
        return Ok(Start {
            epoch,
            monotonic_epoch_ns,
            realtime_epoch_ns,
            facts,
        });
    };
    let ahead = start_at - realtime_now_ns();
    if ahead > START_AT_AHEAD_MAX.as_nanos() as i64 {
        return Err(RecordError::new(
            ErrorKind::Start,
            format!(
                "--start-at is {:.1} h away; an agreed epoch is at most {} h ahead",
                ahead as f64 / 3.6e12,
                START_AT_AHEAD_MAX.as_secs() / 3600
            ),
        ));
    }
    // Wait until the lead before the epoch, never past it, seeing a stop within STOP_POLL.
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(RecordError::new(
                ErrorKind::Start,
                "stopped by signal while waiting for --start-at; no journal was written",
            ));
        }
        let left = start_at - lead_ns - realtime_now_ns();
        if left <= 0 {
            break;
        }
        std::thread::sleep(Duration::from_nanos(left as u64).min(STOP_POLL));
    }
    // The three clocks read together: the epoch is `start_at` on the realtime clock, so on the
    // others it is now plus (start_at - realtime now), which is negative when late.
    let (instant, monotonic, realtime) = (Instant::now(), monotonic_now_ns(), realtime_now_ns());
    let until = start_at - realtime;
    let late_ns = (-until).max(0) as u64;
    if late_ns > late_max.as_nanos() as u64 {
        return Err(RecordError::new(ErrorKind::Start, format!(
            "this shard reached the start barrier {:.1} ms after the agreed epoch (--start-at); shards.start_late_max_ms is {} (SPEC §2): no journal was written. Start every shard earlier, or agree on a later epoch",
            late_ns as f64 / 1e6,
            late_max.as_millis()
        )));
    }
    let (epoch, monotonic_epoch_ns) = if until >= 0 {
        (
            instant + Duration::from_nanos(until as u64),
            monotonic + until as u64,
        )
    } else {
        let behind = Duration::from_nanos(late_ns);
        (
            instant.checked_sub(behind).unwrap_or(instant),
            monotonic.saturating_sub(late_ns),
        )
    };
    let mut facts = clock_facts(start_at, monotonic_epoch_ns);
    facts.push((
        HostFact::BootId.key().into(),
        read_trimmed("/proc/sys/kernel/random/boot_id"),
    ));
    facts.push((HostFact::StartAtNs.key().into(), start_at.to_string()));
    facts.push((HostFact::StartLateNs.key().into(), late_ns.to_string()));
    Ok(Start {
        epoch,
        monotonic_epoch_ns,
        realtime_epoch_ns: start_at,
        facts,
    })
}

/// The realtime clock's discipline and error bound as the kernel reports them (adjtimex with no
/// modes set only reads), and the two anchors' difference.
fn clock_facts(realtime_epoch_ns: i64, monotonic_epoch_ns: u64) -> Vec<(String, String)> {
    // SAFETY: a zeroed timex is a valid argument; with `modes` 0 adjtimex only fills it in.
    #[allow(unsafe_code)]
    let (state, timex) = unsafe {
        let mut timex: libc::timex = std::mem::zeroed();
        (libc::adjtimex(&mut timex), timex)
    };
    let mut facts = vec![(
        HostFact::RealtimeMinusMonotonicNs.key().to_owned(),
        (i128::from(realtime_epoch_ns) - i128::from(monotonic_epoch_ns)).to_string(),
    )];
    if state < 0 {
        facts.push((
            HostFact::ClockSync.key().into(),
            format!(
                "unknown (adjtimex refused: {})",
                std::io::Error::last_os_error()
            ),
        ));
        return facts;
    }
    let unsynchronized = state == libc::TIME_ERROR || timex.status & libc::STA_UNSYNC != 0;
    facts.push((
        HostFact::ClockSync.key().into(),
        format!(
            "{} (adjtimex state {state}, status {:#x})",
            if unsynchronized {
                "unsynchronized"
            } else {
                "synchronized"
            },
            timex.status
        ),
    ));
    facts.push((
        HostFact::ClockMaxerrorUs.key().into(),
        timex.maxerror.to_string(),
    ));
    facts.push((
        HostFact::ClockEsterrorUs.key().into(),
        timex.esterror.to_string(),
    ));
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fact_of<'a>(facts: &'a [(String, String)], key: &str) -> &'a str {
        facts.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v)
    }

    #[test]
    fn shards_start_at_the_agreed_instant_and_a_late_one_refuses() {
        let stop = AtomicBool::new(false);
        let late_max = Duration::from_millis(50);
        let whole = start(Shard::WHOLE, None, late_max, &stop).unwrap();
        assert!(whole
            .facts
            .iter()
            .any(|(k, _)| k == HostFact::ClockSync.key()));
        let two = Shard { index: 1, count: 2 };
        let e = start(two, None, late_max, &stop).unwrap_err().to_string();
        assert!(e.contains("needs --start-at"), "{e}");
        // An epoch 400 ms ahead: waited for, and the realtime anchor is that instant exactly.
        let at = realtime_now_ns() + 400_000_000;
        let s = start(two, Some(at), late_max, &stop).unwrap();
        assert_eq!(s.realtime_epoch_ns, at);
        let left = s.epoch.saturating_duration_since(Instant::now());
        assert!(left <= EPOCH_LEAD, "{left:?}");
        let late: u64 = fact_of(&s.facts, HostFact::StartLateNs.key())
            .parse()
            .unwrap();
        assert_eq!(late, 0);
        // Already 10 ms past: on time within the pin, and said so.
        let at = realtime_now_ns() - 10_000_000;
        let s = start(two, Some(at), late_max, &stop).unwrap();
        let late: u64 = fact_of(&s.facts, HostFact::StartLateNs.key())
            .parse()
            .unwrap();
        assert!(late >= 10_000_000, "{late}");
        assert!(s.epoch <= Instant::now());
        // A second past: refused.
        let e = start(
            two,
            Some(realtime_now_ns() - 1_000_000_000),
            late_max,
            &stop,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("after the agreed epoch"), "{e}");
        // Two days ahead: refused.
        let far = realtime_now_ns() + 48 * 3_600_000_000_000;
        assert!(start(two, Some(far), late_max, &stop).is_err());
        // A stop while waiting ends the wait.
        stop.store(true, Ordering::Relaxed);
        let e = start(
            two,
            Some(realtime_now_ns() + 5_000_000_000),
            late_max,
            &stop,
        )
        .unwrap_err();
        assert!(e.to_string().contains("stopped"), "{e}");
    }
}
