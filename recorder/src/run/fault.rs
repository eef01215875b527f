//! The fault plan (SPEC §1): arm, fire at T_inject, confirm the impact independently, remove or
//! expire, each step journaled as an event. The plan is written against [`FaultGround`], its
//! clock and its reach into the world: the host's in a recording ([`Host`]), a virtual clock and
//! a scripted victim in the simulator (`sim/beside.rs`), which runs this same thread in lockstep
//! with the production worker loop.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use percentes_formats::config::{Fault, Injector};
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{EventKind, EventRecord, Record};

use super::baseline::{BaselineTally, JUDGE_WAIT};
use super::ground::{Host, SideGround};
use super::plan::RunPlan;
use super::state::{Sender, Shared};
use crate::error::RecordError;

/// How long the confirmation waits between two looks at the victim.
const CONFIRM_PAUSE: Duration = Duration::from_millis(10);

/// What the fault plan stands on: the clock and name resolution of a thread beside the
/// workers, and its reach into the world (the injector, the victim's answers). Every effect goes
/// through here, so the plan's own decisions (when to fire, whether the baseline allows it,
/// whether the impact is confirmed, when to clean up) are the same code in a recording and in
/// the simulator.
pub(super) trait FaultGround: SideGround {
    /// Fires the fault with `injector`: what it did, in words, or why it failed.
    fn fire(
        &self,
        injector: Injector,
        fault: &Fault,
        partition_ns: Option<u64>,
    ) -> Result<String, RecordError>;

    /// The recorder's own removal of the fault ([`has_removal`]): what it did, or why it failed.
    fn remove(&self, fault: &Fault) -> Result<String, RecordError>;

    /// The status and body a `method path` request gets from `address` ([`answer_of`]).
    fn answer_of(
        &self,
        address: SocketAddr,
        method: &str,
        path: &str,
    ) -> Result<(u16, String), RecordError>;

    /// Whether `address` accepts a connection within 200 ms.
    fn accepts(&self, address: SocketAddr) -> bool;
}

/// The real injectors and sockets: a recording's fault plan.
impl FaultGround for Host {
    fn fire(
        &self,
        injector: Injector,
        fault: &Fault,
        partition_ns: Option<u64>,
    ) -> Result<String, RecordError> {
        apply(injector, fault, partition_ns)
    }

    fn remove(&self, fault: &Fault) -> Result<String, RecordError> {
        match (&fault.network_policy, fault.injector) {
            (Some(np), Some(Injector::NetworkPolicy)) => {
                super::netpol::remove(fault.victim.as_deref().unwrap_or_default(), np)
            }
            _ => run_command(&fault.remove_command),
        }
    }

    fn answer_of(
        &self,
        address: SocketAddr,
        method: &str,
        path: &str,
    ) -> Result<(u16, String), RecordError> {
        answer_of(address, method, path)
    }

    fn accepts(&self, address: SocketAddr) -> bool {
        std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
    }
}

/// Whether the recorder removes the fault itself (`remove_command`, or the NetworkPolicy it
/// made), rather than leaving it to the injector's own armed expiry.
pub(super) fn has_removal(fault: &Fault) -> bool {
    matches!(
        (&fault.network_policy, fault.injector),
        (Some(_), Some(Injector::NetworkPolicy))
    ) || !fault.remove_command.is_empty()
}

/// Ends the run the moment its fault did not happen as planned (seeds/004: abort when impact
/// cannot be confirmed): an `escape` event (`impact-unconfirmed`) after the `fault-failed` one,
/// offered load stopped, the seal `escaped`. The fault plan then cleans up at once.
fn impact_unconfirmed(shared: &Shared, sender: &Sender, stop: &AtomicBool, at_ns: u64, why: &str) {
    let detail = format!("the fault did not happen as planned: {why}");
    let subject = percentes_formats::journal::records::IMPACT_UNCONFIRMED;
    shared.abort(
        sender,
        stop,
        (at_ns, subject, &detail, None),
        "Offered load stopped; the journal is sealed escaped: an experiment whose fault is not confirmed is invalid, not a finding about the service (seeds/004; SPEC §10 fault fidelity)",
    );
}

/// Ends the run at T_inject without firing when the baseline just recorded fails a gate it can
/// be judged by (seeds/004: abort when baseline is unhealthy): an `escape` event
/// (`baseline-unhealthy`) naming each failure, offered load stopped, the seal `escaped`.
fn baseline_unhealthy(shared: &Shared, sender: &Sender, stop: &AtomicBool, at_ns: u64, why: &str) {
    let detail = format!("the baseline was not healthy before injection: {why}");
    let subject = percentes_formats::journal::records::BASELINE_UNHEALTHY;
    shared.abort(
        sender,
        stop,
        (at_ns, subject, &detail, None),
        "The fault was not fired; offered load stopped and the journal is sealed escaped: a fault injected into an unhealthy service measures nothing about its recovery (seeds/004; SPEC §10)",
    );
}

/// At T_inject: what the baseline failed, once its last request is journaled (waiting up to
/// [`JUDGE_WAIT`] for it on the fault plan's clock). `None` when there is nothing to judge, the
/// baseline is healthy as far as its evidence goes, or it was not whole in time (the analyzer
/// judges it then).
pub(super) fn baseline_failures(
    tally: Option<&Mutex<BaselineTally>>,
    ground: &impl FaultGround,
) -> Option<String> {
    let tally = tally?;
    let deadline = ground.now_ns() + JUDGE_WAIT.as_nanos() as u64;
    loop {
        let verdict = tally.lock().expect("baseline lock").verdict();
        match verdict {
            Some(failed) if failed.is_empty() => return None,
            Some(failed) => return Some(failed.join("; ")),
            None if ground.now_ns() >= deadline => return None,
            None => ground.sleep_until(ground.now_ns() + JUDGE_LOOK.as_nanos() as u64),
        }
    }
}

/// How often the judgement looks for the baseline's last record while it waits.
const JUDGE_LOOK: Duration = Duration::from_millis(2);

/// The fault plan (SPEC §1): armed at the epoch with its expiry, fired at T_inject on an absolute
/// deadline, confirmed independently within the pinned time (else the run ends, escaped),
/// removed or expired after the pinned partition (black-hole).
pub(super) fn fault_thread<G: FaultGround>(
    (plan, fault): (&RunPlan, &Fault),
    ground: &G,
    (sender, shared): (&Sender, &Shared),
    stop: &AtomicBool,
) {
    let (Some(inject_ns), Some(injector)) = (plan.inject_at_ns, fault.injector) else {
        return;
    };
    let victim = fault.victim.clone().unwrap_or_default();
    let partition_ns = plan.fault_duration_ns;
    let event = |kind: EventKind, at_ns: u64, detail: String, value: Option<i64>| {
        Record::Event(EventRecord::new(at_ns, kind, victim.clone(), detail, value))
    };
    let armed = armed_detail(fault, injector, inject_ns, partition_ns);
    let value = Some(inject_ns as i64);
    sender.send(event(EventKind::FaultArmed, ground.now_ns(), armed, value));
    let resolved_before = fault
        .confirm_address
        .as_deref()
        .is_some_and(|a| ground.resolve(a, plan.nameserver).is_ok());
    if !ground.sleep_until_or_stop(inject_ns, stop) {
        return;
    }
    if let Some(failed) = baseline_failures(shared.baseline.as_ref(), ground) {
        baseline_unhealthy(shared, sender, stop, ground.now_ns(), &failed);
        return;
    }
    let fired_ns = ground.now_ns();
    let result = ground.fire(injector, fault, partition_ns);
    let took_ns = ground.now_ns().saturating_sub(fired_ns);
    let late_ns = fired_ns as i64 - inject_ns as i64;
    match result {
        Ok(detail) => {
            let said = format!(
                "{detail} (took {:.1} ms; {:.3} ms after T_inject)",
                took_ns as f64 / 1e6,
                late_ns as f64 / 1e6
            );
            sender.send(event(EventKind::FaultFired, fired_ns, said, Some(late_ns)));
        }
        Err(why) => {
            let why = why.to_string();
            sender.send(event(EventKind::FaultFailed, fired_ns, why.clone(), None));
            impact_unconfirmed(shared, sender, stop, ground.now_ns(), &why);
            return;
        }
    }
    if let Some(address) = &fault.confirm_address {
        // It runs even when the run is stopping (an escape right after the fire): the confirmed
        // target is part of what an escaped experiment must retain.
        let look = Confirmation {
            address,
            nameserver: plan.nameserver,
            resolved_before,
            deadline_ns: fired_ns.saturating_add(plan.confirm_within.as_nanos() as u64),
        };
        let (kind, detail) = look.run(ground, fault, plan.confirm_within);
        let confirmed = kind == EventKind::FaultConfirmed;
        let at_ns = ground.now_ns();
        sender.send(event(kind, at_ns, detail.clone(), None));
        if !confirmed {
            impact_unconfirmed(shared, sender, stop, at_ns, &detail);
        }
    }
    let ended = partition_ns.and_then(|p| end_of_partition(ground, fault, inject_ns + p, stop));
    if let Some((at, kind, detail)) = ended {
        sender.send(event(kind, at, detail, None));
    }
}

/// The `fault-armed` event's words: the fault, its victim, its injector, T_inject and the
/// pinned expiry where there is one.
fn armed_detail(
    fault: &Fault,
    injector: Injector,
    inject_ns: u64,
    partition_ns: Option<u64>,
) -> String {
    format!(
        "{} of {} by {} at T_inject {:.3} s{}",
        fault.variant.name(),
        fault.victim.as_deref().unwrap_or_default(),
        injector.name(),
        inject_ns as f64 / 1e9,
        partition_ns
            .map(|p| format!(", expiry {:.3} s later (pinned duration)", p as f64 / 1e9))
            .unwrap_or_default()
    )
}

/// The fault's end once its pinned partition has elapsed: the recorder's own removal where it
/// has one, else the injector's armed expiry. When the run stops first (a signal, or an escape)
/// there is no further injection, and a removal runs now rather than at the pinned expiry,
/// recorded either way; an injector's own expiry is left to it, with nothing to journal. Each
/// event is stamped when the partition ended, before the removal ran.
fn end_of_partition<G: FaultGround>(
    ground: &G,
    fault: &Fault,
    expiry_ns: u64,
    stop: &AtomicBool,
) -> Option<(u64, EventKind, String)> {
    let early = !ground.sleep_until_or_stop(expiry_ns, stop);
    let at = ground.now_ns();
    if !has_removal(fault) {
        return (!early).then(|| {
            (
                at,
                EventKind::FaultExpired,
                "the pinned duration elapsed; the injector's own armed expiry removes it".into(),
            )
        });
    }
    let (kind, detail) = match (ground.remove(fault), early) {
        (Ok(detail), false) => (EventKind::FaultRemoved, detail),
        (Ok(detail), true) => (
            EventKind::FaultRemoved,
            format!("early, the run stopping: {detail}"),
        ),
        (Err(why), false) => (
            EventKind::FaultFailed,
            DetailWord::RemovalFailed.with(&why.to_string()),
        ),
        (Err(why), true) => (
            EventKind::FaultFailed,
            format!(
                "{} (early, the run stopping): {why}",
                DetailWord::RemovalFailed.word()
            ),
        ),
    };
    Some((at, kind, detail))
}

/// The independent confirmation of a fired fault's impact: the victim stops answering (refused,
/// or silent for 200 ms), or its `confirm_path` answers the expected status (and text).
struct Confirmation<'a> {
    address: &'a str,
    nameserver: Option<SocketAddr>,
    /// Whether the address resolved before the fire: a name (a headless Service's pod) that
    /// stops resolving after it went with the victim; one that never resolved proves nothing
    /// (issue 38: a hostname is confirmed as an address is, never read as "answers").
    resolved_before: bool,
    /// When the pinned time to confirm runs out, ns after the epoch.
    deadline_ns: u64,
}

impl Confirmation<'_> {
    /// Looks until the impact shows or the deadline passes: the event that says so
    /// (`fault-confirmed`, else `fault-failed`) and its detail.
    fn run<G: FaultGround>(
        &self,
        ground: &G,
        fault: &Fault,
        within: Duration,
    ) -> (EventKind, String) {
        let address = self.address;
        let expected = fault.confirm_path.as_deref().zip(fault.confirm_status);
        let method = fault.confirm_method.as_deref().unwrap_or("POST");
        let with_text = || {
            let contains = fault.confirm_contains.as_deref();
            contains.map_or(String::new(), |c| format!(" with {c:?}"))
        };
        let (mut last, mut gone, mut confirmed) = (String::new(), false, false);
        while ground.now_ns() < self.deadline_ns {
            let (impact, seen, went) = self.look(ground, fault);
            if let Some(seen) = seen {
                last = seen;
            }
            if impact {
                (confirmed, gone) = (true, went);
                break;
            }
            ground.sleep_until(ground.now_ns() + CONFIRM_PAUSE.as_nanos() as u64);
        }
        let detail = match (confirmed, expected) {
            (true, None) if gone => {
                format!("{address} no longer resolves ({last}): its name went with the victim")
            }
            (true, None) => format!("{address} stopped answering"),
            (true, Some((path, status))) => {
                format!("{method} {path} at {address} answered {status}{}", with_text())
            }
            (false, None) if !last.is_empty() => format!("{address} cannot be reached to confirm the impact ({last}), and did not resolve before the fire either: impact not confirmed"),
            (false, None) => {
                format!("{address} still answers {within:?} after the fault fired: impact not confirmed")
            }
            (false, Some((path, status))) => format!("{method} {path} at {address} did not answer {status}{} within {within:?} ({last}): impact not confirmed", with_text()),
        };
        let kind = match confirmed {
            true => EventKind::FaultConfirmed,
            false => EventKind::FaultFailed,
        };
        (kind, detail)
    }

    /// One look at the victim: whether the impact shows, what it showed where that is worth
    /// saying (`None`: nothing new), and whether its name has gone with it.
    fn look<G: FaultGround>(&self, ground: &G, fault: &Fault) -> (bool, Option<String>, bool) {
        let expected = fault.confirm_path.as_deref().zip(fault.confirm_status);
        let method = fault.confirm_method.as_deref().unwrap_or("POST");
        let contains = fault.confirm_contains.as_deref();
        match (ground.resolve(self.address, self.nameserver), expected) {
            (Ok(a), Some((path, status))) => match ground.answer_of(a, method, path) {
                Ok((got, body)) => {
                    let found = contains.is_none_or(|c| body.contains(c));
                    let missing = if found {
                        ""
                    } else {
                        " without the expected text"
                    };
                    let seen = format!("answered {got}{missing}");
                    (got == status && found, Some(seen), false)
                }
                Err(why) => (false, Some(why.to_string()), false),
            },
            (resolved, None) => match look_at(ground, resolved, self.resolved_before) {
                Look::Answers => (false, None, false),
                Look::Stopped => (true, None, false),
                Look::Gone(why) => (true, Some(why), true),
                Look::Unresolved(why) => (false, Some(why), false),
            },
            (Err(why), Some(_)) => (false, Some(why.to_string()), false),
        }
    }
}

/// The status and body a `method path` request (a `POST` carries `{}`) gets from `address`,
/// for confirming a degradation's impact independently of the injector. Reads at most 64 KiB.
/// What went wrong is of kind [`crate::ErrorKind::Answer`].
pub(super) fn answer_of(
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
) -> Result<(u16, String), RecordError> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&address, Duration::from_millis(200))
        .map_err(|e| RecordError::answer(format!("{address}: {e}")))?;
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let body = if method == "POST" { "{}" } else { "" };
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| RecordError::answer(format!("{address}: {e}")))?;
    // Read to the end of the body its content-length announces (a server may keep the
    // connection open), to the close, or to 64 KiB, whichever comes first.
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    while response.len() < 64 * 1024 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
        let text = String::from_utf8_lossy(&response);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())
                    .flatten()
            });
            if length.is_some_and(|n| body.len() >= n) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            RecordError::answer(format!(
                "{address} answered {:?}, not an HTTP/1.1 status line",
                text.lines().next().unwrap_or_default()
            ))
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    Ok((status, body))
}

/// Runs a fault's command (`fire_command`, `remove_command`) to its end: what it did, or why
/// it failed (of kind [`crate::ErrorKind::Command`]).
pub(super) fn run_command(argv: &[String]) -> Result<String, RecordError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| RecordError::command("empty command"))?;
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .map_err(|e| RecordError::command(format!("{program}: {e}")))?;
    if status.success() {
        Ok(format!("{} exited 0", argv.join(" ")))
    } else {
        Err(RecordError::command(format!(
            "{} exited {status}",
            argv.join(" ")
        )))
    }
}

/// The most of a pid file the `kill-pid-file` injector reads: a pid and a newline fit many
/// times over; a file that is not a pid file is refused, never read whole.
pub(super) const PID_FILE_BYTES_MAX: u64 = 64;

/// The pid a pid file names, when it may be killed: a positive pid that is neither init nor the
/// recorder itself. kill(2) reads 0 as the caller's own process group, -1 as every process the
/// caller may signal and other negatives as process groups, so a damaged or hostile pid file
/// must never reach it with one of those (issue 32). A refusal is of kind
/// [`crate::ErrorKind::Fault`].
pub(super) fn victim_pid(text: &str, own_pid: u32) -> Result<i32, RecordError> {
    let pid: i32 = text
        .trim()
        .parse()
        .map_err(|_| RecordError::fault(format!("holds {:?}, not a pid", text.trim())))?;
    if pid <= 1 {
        return Err(RecordError::fault(format!(
            "holds {pid}: not a replica's pid (0 and negative pids name process groups, -1 every process, 1 is init); refusing to signal it"
        )));
    }
    if u32::try_from(pid) == Ok(own_pid) {
        return Err(RecordError::fault(format!(
            "holds {pid}, the recorder's own pid; refusing to kill the recorder"
        )));
    }
    Ok(pid)
}

/// Whether the process group `pid` names may be killed whole: `pid` must lead it (its group id is
/// its own pid, as a process started in a group of its own is; a pid file naming a member of
/// someone else's group would otherwise take the whole group down), and it must not be the
/// recorder's own group. `theirs` and `ours` are getpgid(2)'s answers (-1: no such process). A
/// refusal is of kind [`crate::ErrorKind::Fault`].
pub(super) fn victim_group(pid: i32, theirs: i32, ours: i32) -> Result<(), RecordError> {
    if theirs < 0 {
        return Err(RecordError::fault(format!(
            "no process {pid} to read a process group from"
        )));
    }
    if theirs != pid {
        return Err(RecordError::fault(format!(
            "process {pid} is in process group {theirs}, which it does not lead; kill-process-group kills only a group its pid file's process leads (start the replica in a group of its own: setsid, or a supervisor's new process group)"
        )));
    }
    if theirs == ours {
        return Err(RecordError::fault(format!(
            "process group {pid} is the recorder's own; refusing to kill the recorder"
        )));
    }
    Ok(())
}

pub(super) fn apply(
    injector: Injector,
    fault: &percentes_formats::config::Fault,
    partition_ns: Option<u64>,
) -> Result<String, RecordError> {
    match injector {
        Injector::Exec => run_command(&fault.fire_command),
        Injector::NetworkPolicy => {
            let np = fault.network_policy.as_ref().ok_or_else(|| {
                RecordError::fault("injector network-policy without [fault.network_policy]")
            })?;
            let seconds = partition_ns.map_or(0, |p| p.div_ceil(1_000_000_000));
            super::netpol::fire(fault.victim.as_deref().unwrap_or_default(), np, seconds)
        }
        Injector::KillPidFile | Injector::KillProcessGroup => kill(injector, fault),
        Injector::MockAdmin => {
            let address = fault.admin_address.as_deref().unwrap_or_default();
            let mode = fault.mock_mode.as_deref().unwrap_or_default();
            let duration_ms = partition_ns.map(|p| p / 1_000_000).unwrap_or(3_600_000);
            let body = serde_json::json!({"mode": mode, "at_ms": 0, "duration_ms": duration_ms})
                .to_string();
            let request = format!("POST /admin/faults HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            let mut stream = std::net::TcpStream::connect(address)
                .map_err(|e| RecordError::fault(format!("mock admin {address}: {e}")))?;
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            std::io::Write::write_all(&mut stream, request.as_bytes())
                .map_err(|e| RecordError::fault(format!("mock admin {address}: {e}")))?;
            let mut response = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut response);
            if response.starts_with("HTTP/1.1 200") {
                Ok(format!("mock {address} armed {mode} for {duration_ms} ms"))
            } else {
                Err(RecordError::fault(format!(
                    "mock admin {address} answered {:?}",
                    response.lines().next().unwrap_or_default()
                )))
            }
        }
    }
}

/// `kill-pid-file` and `kill-process-group`: SIGKILL to the process (or the group it leads)
/// that `fault.pid_file` names, once the pid is one that may be killed.
fn kill(
    injector: Injector,
    fault: &percentes_formats::config::Fault,
) -> Result<String, RecordError> {
    let path = fault.pid_file.as_deref().unwrap_or_default();
    let unreadable =
        |e: std::io::Error| RecordError::fault(format!("cannot read pid file {path}: {e}"));
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(
            percentes_formats::files::open_regular(path.as_ref()).map_err(unreadable)?,
            PID_FILE_BYTES_MAX,
        ),
        &mut text,
    )
    .map_err(unreadable)?;
    let pid = victim_pid(&text, std::process::id())
        .map_err(|why| why.at(format_args!("pid file {path}")))?;
    let (target, what) = if injector == Injector::KillProcessGroup {
        // SAFETY: getpgid(2) reads two process group ids; no memory is involved.
        #[allow(unsafe_code)]
        let (theirs, ours) = unsafe { (libc::getpgid(pid), libc::getpgid(0)) };
        victim_group(pid, theirs, ours).map_err(|why| why.at(format_args!("pid file {path}")))?;
        (-pid, format!("the process group {pid} leads"))
    } else {
        (pid, format!("pid {pid}"))
    };
    // SAFETY: kill(2) with a pid (or, negated, a group the checks above allowed) read
    // from the operator's pid file; no memory is involved.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(target, libc::SIGKILL) };
    if rc == 0 {
        Ok(format!("SIGKILL to {what} from {path}"))
    } else {
        Err(RecordError::fault(format!(
            "kill({target}, SIGKILL) failed: {}",
            std::io::Error::last_os_error()
        )))
    }
}

/// What one look at a victim that must stop answering shows (a clean delete's or a
/// partition's confirmation, no `confirm_path`).
#[derive(Debug, PartialEq, Eq)]
enum Look {
    /// It accepts a connection.
    Answers,
    /// It refuses one, or lets 200 ms pass.
    Stopped,
    /// Its name no longer resolves, though it did before the fire: the name went with it (a
    /// headless Service's pod record).
    Gone(String),
    /// Its name does not resolve, and did not before the fire either: nothing is shown.
    Unresolved(String),
}

/// The look at the address `resolved` (now) gave, the name having resolved before the fire or
/// not, through `ground`.
fn look_at(
    ground: &impl FaultGround,
    resolved: Result<SocketAddr, RecordError>,
    resolved_before: bool,
) -> Look {
    match resolved {
        Ok(a) if ground.accepts(a) => Look::Answers,
        Ok(_) => Look::Stopped,
        Err(why) if resolved_before => Look::Gone(why.to_string()),
        Err(why) => Look::Unresolved(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kill(2) with 0 signals the recorder's own group, -1 everything root may signal: a pid
    /// file holding either, init, a negative group or the recorder itself is refused.
    #[test]
    fn a_pid_file_never_names_a_group_init_or_the_recorder() {
        assert_eq!(victim_pid("4242\n", 100).unwrap(), 4242);
        let refused = |text: &str| {
            let why = victim_pid(text, 100).unwrap_err();
            assert_eq!(why.kind(), crate::ErrorKind::Fault, "{text}: {why}");
            why.to_string()
        };
        for text in ["0", "-1", "-4242", "1", " 1 \n"] {
            let why = refused(text);
            assert!(why.contains("refusing"), "{text}: {why}");
        }
        assert!(refused("100").contains("recorder's own pid"));
        assert!(refused("12ab").contains("not a pid"));
        refused("");
    }

    /// kill-process-group kills only a group its process leads, never the recorder's own, and
    /// says why in words (hand-made getpgid answers).
    #[test]
    fn a_process_group_is_killed_only_where_its_process_leads_it() {
        assert!(victim_group(4242, 4242, 100).is_ok());
        for (theirs, ours, says) in [
            (4000, 100, "does not lead"),
            (4242, 4242, "recorder's own"),
            (-1, 100, "no process"),
        ] {
            let why = victim_group(4242, theirs, ours).unwrap_err();
            assert_eq!(why.kind(), crate::ErrorKind::Fault, "{why}");
            assert!(why.to_string().contains(says), "{why}");
        }
    }

    /// A replica made of several processes (a shell and two children, as vLLM's API server and
    /// its engine core) dies whole: after the injector, nothing of the group is left.
    #[test]
    fn kill_process_group_takes_every_process_of_the_group() {
        use std::os::unix::process::CommandExt;
        let dir = percentes_testkit::Scratch::new("group");
        let mut leader = std::process::Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = i32::try_from(leader.id()).unwrap();
        let pid_file = dir.join("replica.pid");
        std::fs::write(&pid_file, format!("{pid}\n")).unwrap();
        // Both children are started before the kill (sh forks them at once; wait for them).
        let members = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                        // Field 5 (after the command in parentheses) is the process group.
                        stat.rsplit_once(") ")
                            .and_then(|(_, rest)| rest.split(' ').nth(2)?.parse::<i32>().ok())
                            == Some(pid)
                            && !rest_is_zombie(&stat)
                    })
                })
                .count()
        };
        fn rest_is_zombie(stat: &str) -> bool {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        }
        let start = std::time::Instant::now();
        while members() < 3 && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(members(), 3, "the group's three processes started");
        let fault = percentes_formats::config::Fault {
            variant: percentes_formats::config::FaultVariant::CleanDelete,
            victim: Some("replica-1".into()),
            injector: Some(Injector::KillProcessGroup),
            fire_command: Vec::new(),
            remove_command: Vec::new(),
            pid_file: Some(pid_file.display().to_string()),
            admin_address: None,
            mock_mode: None,
            confirm_address: None,
            confirm_path: None,
            confirm_status: None,
            confirm_method: None,
            confirm_contains: None,
            network_policy: None,
        };
        let said = apply(Injector::KillProcessGroup, &fault, None).unwrap();
        assert!(
            said.contains(&format!("process group {pid} leads")),
            "{said}"
        );
        leader.wait().unwrap();
        let start = std::time::Instant::now();
        while members() > 0 && start.elapsed() < std::time::Duration::from_secs(5) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(members(), 0, "no live process of the group is left");
        // A pid that leads no group of its own is refused, and nothing is signalled.
        std::fs::write(&pid_file, format!("{}\n", std::process::id())).unwrap();
        let refused = apply(Injector::KillProcessGroup, &fault, None).unwrap_err();
        assert_eq!(refused.kind(), crate::ErrorKind::Fault, "{refused}");
        assert!(refused.to_string().contains("recorder's own"), "{refused}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A look at the victim (issue 38: a hostname is confirmed as an address is): a listener
    /// answers, a closed port has stopped, and a name that stopped resolving has gone only if it
    /// resolved before the fire.
    #[test]
    fn a_victim_is_confirmed_gone_by_a_refused_connect_or_a_vanished_name() {
        let host = Host {
            epoch: std::time::Instant::now(),
        };
        // A freed port can be taken at once by another test binding port 0 (the tests share the
        // host's ports), and then it answers again: such a round is tried again on a fresh port.
        let stopped = (0..5).any(|_| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let address = listener.local_addr().unwrap();
            assert_eq!(look_at(&host, Ok(address), true), Look::Answers);
            drop(listener);
            look_at(&host, Ok(address), true) == Look::Stopped
        });
        assert!(
            stopped,
            "a closed port answered in five rounds: taken each time, or misjudged"
        );
        let nxdomain = || {
            Err(RecordError::lookup(
                "cannot resolve replica-1.vllm:8000: no such name",
            ))
        };
        assert!(
            matches!(look_at(&host, nxdomain(), true), Look::Gone(w) if w.contains("no such name"))
        );
        assert!(matches!(
            look_at(&host, nxdomain(), false),
            Look::Unresolved(_)
        ));
    }
}
