//! A partition's view from the proxy: a replica black-holed on an isolated real-parts bed is
//! not dead, so no supervisor acts; what the study needs is when HAProxy's own health check
//! took it out of service (the service's detection) and when it put it back after the heal.
//! Each change of HAProxy's verdict on the victim is journaled as it is seen.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::haproxy::haproxy_states;
use super::RealBed;
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;

/// How often HAProxy's view is read: well inside its 250 ms check interval.
const LOOK: Duration = Duration::from_millis(20);

/// More verdict changes than this in one run are a flapping check: the rest go unjournaled,
/// and the last event says so.
const CHANGES_MAX: usize = 32;

/// HAProxy's verdict on a server, from `show stat`'s status (`UP`, `UP 1/2` going down,
/// `DOWN`, `DOWN 1/1` coming up, `MAINT`, `no check`): in service or not, and its words.
fn verdict(status: &str) -> Option<(bool, &'static str)> {
    if status.starts_with("UP") {
        Some((true, "UP (its health check passes) and routes to it again"))
    } else if status.starts_with("DOWN") {
        Some((
            false,
            "DOWN (its health check failed twice) and stopped routing to it",
        ))
    } else {
        None
    }
}

/// HAProxy's verdicts on one server as they change: what each change journals.
struct Verdicts<'a> {
    victim: &'a str,
    in_service: bool,
    changes: usize,
    detected: bool,
}

impl<'a> Verdicts<'a> {
    /// A server HAProxy has in service.
    fn new(victim: &'a str) -> Verdicts<'a> {
        Verdicts {
            victim,
            in_service: true,
            changes: 0,
            detected: false,
        }
    }

    /// HAProxy says `status` now: the timeline event to journal, if its verdict changed (the
    /// first time out of service is `detected`; every other change an `orchestrator` note).
    fn see(&mut self, status: &str) -> Option<(TimelineSubject, String)> {
        let (now, words) = verdict(status)?;
        if now == self.in_service || self.changes == CHANGES_MAX {
            return None;
        }
        self.in_service = now;
        self.changes += 1;
        let subject = match (now, self.detected) {
            (false, false) => TimelineSubject::Detected,
            _ => TimelineSubject::Orchestrator,
        };
        self.detected |= !now;
        let more = match self.changes == CHANGES_MAX {
            true => format!(" ({CHANGES_MAX} changes: later ones are not journaled)"),
            false => String::new(),
        };
        Some((
            subject,
            format!("HAProxy marked {} {words}{more}", self.victim),
        ))
    }
}

/// Watches HAProxy's verdict on `victim` until the run ends (`finished`), journaling each
/// change as it is seen: the first time out of service as `detected`, every later change as an
/// `orchestrator` note, at most 32.
pub fn watch(bed: &RealBed, victim: &str, inbox: &TimelineInbox, finished: &AtomicBool) {
    let socket = bed.folder.join("haproxy.sock");
    let mut verdicts = Verdicts::new(victim);
    while !finished.load(Ordering::Relaxed) {
        let status = haproxy_states(&socket)
            .ok()
            .and_then(|mut states| states.remove(victim));
        if let Some((subject, detail)) = status.and_then(|s| verdicts.see(&s)) {
            inbox.report(subject, &detail, None);
        }
        std::thread::sleep(LOOK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HAProxy's transitional states count as the side they are still on: `UP 1/2` (one check
    /// failed) is in service, `DOWN 1/1` (one passed of the one rise needs) is not yet.
    #[test]
    fn each_status_reads_as_the_side_haproxy_routes_by() {
        for (status, side) in [
            ("UP", Some(true)),
            ("UP 1/2", Some(true)),
            ("DOWN", Some(false)),
            ("DOWN 1/1", Some(false)),
            ("MAINT", None),
            ("no check", None),
        ] {
            assert_eq!(verdict(status).map(|v| v.0), side, "{status}");
        }
    }

    /// A partition as HAProxy reports it: in service (also while one check has failed), out
    /// (also while one has passed), back in. The first exit is the detection, the return a
    /// note; statuses that repeat or say neither (MAINT) journal nothing; a check that flaps
    /// stops being journaled after the cap, and its last event says so.
    #[test]
    fn the_first_exit_is_the_detection_and_each_later_change_a_note() {
        let mut v = Verdicts::new("replica-1");
        let seen: Vec<_> = [
            "UP", "UP 1/2", "DOWN", "DOWN 1/1", "MAINT", "DOWN", "UP", "UP",
        ]
        .into_iter()
        .filter_map(|s| v.see(s))
        .collect();
        assert_eq!(
            seen,
            [
                (
                    TimelineSubject::Detected,
                    "HAProxy marked replica-1 DOWN (its health check failed twice) and stopped routing to it".to_owned()
                ),
                (
                    TimelineSubject::Orchestrator,
                    "HAProxy marked replica-1 UP (its health check passes) and routes to it again".to_owned()
                ),
            ]
        );
        let flaps: Vec<_> = std::iter::repeat_n(["DOWN", "UP"], 40)
            .flatten()
            .filter_map(|s| v.see(s))
            .collect();
        assert_eq!(flaps.len(), CHANGES_MAX - 2);
        assert!(flaps
            .iter()
            .all(|(s, _)| *s == TimelineSubject::Orchestrator));
        assert!(flaps
            .last()
            .unwrap()
            .1
            .ends_with("(32 changes: later ones are not journaled)"));
    }
}
