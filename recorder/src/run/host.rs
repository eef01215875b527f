//! Facts about the recording host and its clocks: the monotonic clock, CPU accounting from
//! /proc, the CPUs this process may use, and the host facts the journal header carries.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use percentes_formats::config::Config;
use percentes_formats::journal::header::HostFact;

use super::dispatch::STALL_TICK;
use super::plan::RunPlan;
use crate::canary;
use crate::error::RecordError;
use crate::request::Target;

/// The raw CLOCK_MONOTONIC reading, ns.
pub(crate) fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to the valid, exclusively borrowed `ts`.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0, "CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPUs as `0-3,6`.
pub(super) fn cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    parts.join(",")
}

pub(super) fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

pub(super) fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

pub(super) fn host_facts(
    workers: usize,
    deferred_task_work: bool,
    canary: bool,
    config: &Config,
    target: &Target,
) -> Vec<(String, String)> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(String::new(), |n| n.get().to_string());
    vec![
        HostFact::Hostname.entry(read_trimmed("/proc/sys/kernel/hostname")),
        HostFact::Kernel.entry(read_trimmed("/proc/sys/kernel/osrelease")),
        HostFact::Cpu.entry(cpu),
        HostFact::Cores.entry(cores),
        HostFact::RecorderWorkers.entry(workers.to_string()),
        (
            HostFact::Canary.key().into(),
            if canary {
                format!(
                    "loopback, one event each {} ms to every worker",
                    canary::CANARY_INTERVAL.as_millis()
                )
            } else {
                "off".into()
            },
        ),
        (
            HostFact::Io.key().into(),
            if deferred_task_work {
                "compio 0.19.2, io_uring (single issuer, deferred task work)".into()
            } else {
                "compio 0.19.2, io_uring (plain setup: this kernel refuses deferred task work)"
                    .into()
            },
        ),
        (
            HostFact::ReplicaAttribution.key().into(),
            match &config.target.replica_header {
                Some(header) => format!("response header {header} (target.replica_header)"),
                None => {
                    "response header x-percentes-upstream or x-percentes-replica (the testbed's)"
                        .into()
                }
            },
        ),
        (
            HostFact::Tls.key().into(),
            match (target.tls, config.target.tls.insecure) {
                (false, _) => "none (plain HTTP/1.1)".into(),
                (true, false) => "rustls 0.23 (aws-lc-rs), certificate verification on".into(),
                (true, true) => {
                    "rustls 0.23 (aws-lc-rs), CERTIFICATE VERIFICATION OFF (target.tls.insecure)"
                        .into()
                }
            },
        ),
    ]
}

/// A /proc file opened once and read again from its start at each look: the telemetry's
/// readings go on when the process has run out of file descriptors (a run whose load takes
/// them all is when the readings matter most). It opens the file again if the first open
/// failed.
pub(super) struct ProcFile {
    path: &'static str,
    file: Option<std::fs::File>,
}

impl ProcFile {
    /// Opens `path` now, while descriptors are to be had.
    pub(super) fn open(path: &'static str) -> ProcFile {
        ProcFile {
            path,
            file: std::fs::File::open(path).ok(),
        }
    }

    /// The file's text now; `None` when it cannot be read.
    pub(super) fn read(&mut self) -> Option<String> {
        use std::io::{Read, Seek};
        if self.file.is_none() {
            self.file = std::fs::File::open(self.path).ok();
        }
        let file = self.file.as_mut()?;
        let mut text = String::new();
        let read = file
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut text));
        read.ok().map(|_| text)
    }
}

/// /proc/stat's aggregate cpu line: (busy, total) jiffies.
pub(super) fn host_cpu(stat: &mut ProcFile) -> Option<(u64, u64)> {
    let stat = stat.read()?;
    let line = stat.lines().next()?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// This process's CPU time, ns; `None` when /proc/self/stat cannot be read.
pub(super) fn recorder_cpu_ns(stat: &mut ProcFile, ticks: u64) -> Option<u64> {
    let stat = stat.read()?;
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<u64> = after
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // After the command name: state is not numeric, so utime and stime are fields 11 and 12 here.
    let jiffies = fields.get(10)? + fields.get(11)?;
    Some(jiffies * 1_000_000_000 / ticks.max(1))
}

/// The value of field `key` (`Cpus_allowed_list`, `FDSize`) of /proc/self/status, trimmed;
/// `None` where the file or the field cannot be read.
fn self_status(key: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        Some(value.trim().to_owned())
    })
}

/// The CPUs this process may run on (`Cpus_allowed_list` in /proc/self/status), ascending.
pub(super) fn allowed_cpus() -> Vec<usize> {
    let list = self_status("Cpus_allowed_list").unwrap_or_default();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.trim().parse::<usize>()),
        }
    }
    if cpus.is_empty() {
        cpus.push(0);
    }
    cpus
}

/// Raises this process's soft open-file limit to its hard limit (a connection is a descriptor,
/// and the common soft limit of 1,024 is below what a busy open-loop run holds); returns the
/// limit in force.
pub(super) fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the one struct passed.
    #[allow(unsafe_code)]
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

/// Descriptors the recorder needs besides its connections: stdio, the journal and its second
/// handle, a worker's ring and eventfd, the canary's listener and streams, a probe's socket,
/// with some room (a run with one worker uses about a dozen).
pub(super) const DESCRIPTORS_BESIDES_CONNECTIONS: u64 = 16;

/// Refuses a connection floor the open-file limit cannot hold, naming the key that sets it.
pub(super) fn check_connection_floor(plan: &RunPlan, open_files: u64) -> Result<(), RecordError> {
    let floor = (plan.connections_per_worker * plan.workers) as u64;
    if open_files > 0 && floor + DESCRIPTORS_BESIDES_CONNECTIONS > open_files {
        return Err(RecordError::host(format!(
            "config key `client.connections_floor_per_replica`: the pool floor is {floor} connections, and this process may open {open_files} files ({DESCRIPTORS_BESIDES_CONNECTIONS} of them kept for the recorder itself); raise the hard limit (ulimit -Hn) or lower the floor"
        )));
    }
    Ok(())
}

/// The process's descriptors made ready for `plan`, before any thread of the run exists: the
/// open-file limit raised to its hard limit, the connection floor checked against it, and the
/// descriptor table grown ahead ([`presize_descriptor_table`]). Returns the limit in force and
/// the table's size (`None` where the kernel's was not read); from here the telemetry thread
/// keeps the table ahead of the run ([`keep_table_ahead`]).
pub(super) fn ready_descriptors(plan: &RunPlan) -> Result<(u64, Option<u64>), RecordError> {
    let open_files = raise_open_file_limit();
    check_connection_floor(plan, open_files)?;
    presize_descriptor_table(descriptors_wanted(plan), open_files);
    let size = descriptor_table_size();
    TABLE.limit.store(open_files, Ordering::Relaxed);
    TABLE.size.store(size.unwrap_or(0), Ordering::Relaxed);
    Ok((open_files, size))
}

/// The process's descriptor table as the recorder knows it: one a process, as the kernel's is
/// (recordings that share a process, a study's in turn or tests' at once, share it).
static TABLE: DescriptorTable = DescriptorTable::new();

/// What [`keep_table_ahead`] goes by. Each field 0 until known.
#[derive(Debug)]
struct DescriptorTable {
    /// The open-file limit in force: the table never grows past it.
    limit: AtomicU64,
    /// The table's size as the kernel last reported it.
    size: AtomicU64,
    /// The highest descriptor a connection of the run was given.
    highest: AtomicU64,
}

impl DescriptorTable {
    const fn new() -> DescriptorTable {
        DescriptorTable {
            limit: AtomicU64::new(0),
            size: AtomicU64::new(0),
            highest: AtomicU64::new(0),
        }
    }
}

/// Notes a connection's descriptor (the dialer, as each connection opens): what
/// [`keep_table_ahead`] reads.
pub(super) fn note_descriptor(fd: RawFd) {
    if let Ok(fd) = u64::try_from(fd) {
        TABLE.highest.fetch_max(fd, Ordering::Relaxed);
    }
}

/// Keeps the descriptor table ahead of the run when the estimate it was grown to before the
/// run is outgrown (more connections held than [`descriptors_wanted`] allowed for: a target
/// slower than twice the timeout's arrivals, sessions' follow-ups): once a connection's
/// descriptor reaches half the table, the table is doubled (within the open-file limit) here,
/// on the telemetry thread that calls this every look. The kernel makes only a thread that
/// needs a descriptor past the table's end wait for a growth under way, so the worker, whose
/// next descriptors still fit, goes on; grown by the worker itself, the same growth would
/// stall it for an RCU grace period (BENCHMARKS.md, "The container stall, found").
pub(super) fn keep_table_ahead() {
    keep_ahead(&TABLE);
}

fn keep_ahead(table: &DescriptorTable) {
    let size = table.size.load(Ordering::Relaxed);
    let limit = table.limit.load(Ordering::Relaxed);
    let Some(target) = growth(table.highest.load(Ordering::Relaxed), size, limit) else {
        return;
    };
    presize_descriptor_table(target, limit);
    // What the kernel made it; if it could not be read, as asked (no second try each look).
    let now = descriptor_table_size().unwrap_or(target);
    table.size.fetch_max(now, Ordering::Relaxed);
}

/// The size to grow a table of `size` descriptors to, within `limit`, once a descriptor as
/// high as `highest` is in use: twice the size from half of it on; `None` while under half,
/// at the limit already, or with a size or limit not known (0).
fn growth(highest: u64, size: u64, limit: u64) -> Option<u64> {
    if size == 0 || limit <= size || highest.saturating_mul(2) < size {
        return None;
    }
    Some(size.saturating_mul(2).min(limit))
}

/// The process's descriptor table's size as the kernel reports it (`FDSize` in
/// /proc/self/status); `None` where it cannot be read.
fn descriptor_table_size() -> Option<u64> {
    self_status("FDSize")?.parse().ok()
}

/// The descriptors a run may hold at once, to size the descriptor table for before it starts:
/// the recorder's own, the connection floor, and a connection for each request in flight were
/// every request to run to its deadline at the schedule's peak rate, twice over for the pool's
/// idle connections and an arrival burst above the mean. An estimate, not a limit: a run that
/// outgrows it grows the table as it would have anyway.
pub(super) fn descriptors_wanted(plan: &RunPlan) -> u64 {
    let peak_rps = plan
        .params
        .phases
        .iter()
        .map(|p| p.rate_rps)
        .fold(0.0, f64::max);
    // A float past u64's range saturates in the cast; the sum saturates too.
    let in_flight = (2.0 * peak_rps * plan.timeout.as_secs_f64()).ceil() as u64;
    DESCRIPTORS_BESIDES_CONNECTIONS
        .saturating_add((plan.connections_per_worker * plan.workers) as u64)
        .saturating_add(in_flight)
}

/// Grows this process's descriptor table, before the run's threads start, to hold
/// `descriptors` (at most `open_files`, the limit in force), so that it never grows during the
/// run.
///
/// The kernel doubles a process's table of open files when a new descriptor does not fit, and
/// while threads share the table it waits for an RCU grace period before the new one is used
/// (`expand_fdtable`). The wait falls on whichever thread opened the descriptor: in a run, the
/// worker, inside the `io_uring_enter` whose socket operation opens a connection, blocked 5-15 ms
/// on the project's VM while the requests due meanwhile went out late (BENCHMARKS.md, "The
/// container stall, found"). Grown here, while the process has one thread, the table costs no
/// wait at all (a process with threads of its own already, as `demo` with its mock, waits once,
/// before the run), and its memory is about 8 bytes a descriptor.
pub(super) fn presize_descriptor_table(descriptors: u64, open_files: u64) {
    let size = descriptors.min(open_files);
    // The table starts at 64 entries; a descriptor numbered `size - 1` makes it hold `size`.
    let Ok(highest) = libc::c_int::try_from(size.saturating_sub(1)) else {
        return;
    };
    if highest < 64 {
        return;
    }
    let Ok(null) = std::fs::File::open("/dev/null") else {
        return;
    };
    // SAFETY: F_DUPFD_CLOEXEC duplicates a descriptor this function owns onto the lowest free
    // number at or above `highest`; the duplicate, when there is one, is owned here and closed
    // when `OwnedFd` drops. Failure (a limit lowered meanwhile) leaves the table as it was.
    #[allow(unsafe_code)]
    unsafe {
        let copy = libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, highest);
        if copy >= 0 {
            drop(OwnedFd::from_raw_fd(copy));
        }
    }
}

/// A file-size limit (RLIMIT_FSIZE) reached by the journal is then a write error the writer
/// handles (stop, drain, seal or leave the prefix), not SIGXFSZ killing the process mid-block.
pub(super) fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN has no handler to be unsafe in.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The `placement` host fact: where the workers run, and how the runtime stall is measured.
pub(super) fn placement_fact(cpus: Option<&[usize]>, allowed: &[usize], workers: usize) -> String {
    let stall = format!(
        "the runtime stall is each worker's own {} ms ticker (SPEC §2)",
        STALL_TICK.as_millis()
    );
    match cpus {
        Some(cpus) => format!(
            "{} pinned as --cpus asked: {}; {stall}",
            if workers == 1 {
                "the worker"
            } else {
                "workers"
            },
            (0..workers)
                .map(|w| format!("worker {w} on CPU {}", cpus[w % cpus.len()]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => format!(
            "{} unpinned: the kernel places {} on any of CPUs {} (no --cpus); {stall}",
            if workers == 1 {
                "the worker"
            } else {
                "workers"
            },
            if workers == 1 { "it" } else { "them" },
            cpu_list(allowed)
        ),
    }
}

pub(super) fn now_ns(epoch: Instant) -> u64 {
    Instant::now().saturating_duration_since(epoch).as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's size, as the kernel reports it (`FDSize` in /proc/self/status).
    fn table_size() -> u64 {
        descriptor_table_size().expect("FDSize in /proc/self/status")
    }

    #[test]
    fn the_table_doubles_from_half_use_within_the_limit() {
        // Under half: nothing; at half: double.
        assert_eq!(growth(2_047, 4_096, 1 << 20), None);
        assert_eq!(growth(2_048, 4_096, 1 << 20), Some(8_192));
        assert_eq!(growth(4_000, 4_096, 1 << 20), Some(8_192));
        // Never past the limit, and not at all at it.
        assert_eq!(growth(3_000, 4_096, 5_000), Some(5_000));
        assert_eq!(growth(4_999, 5_000, 5_000), None);
        // Nothing known, nothing done.
        assert_eq!(growth(3_000, 0, 1 << 20), None);
        assert_eq!(growth(3_000, 4_096, 0), None);
    }

    /// A connection's descriptor at half the table grows it, here, to twice its size; another
    /// look with nothing new does nothing more.
    #[test]
    fn the_table_is_kept_ahead_of_the_connections() {
        let limit = raise_open_file_limit();
        assert!(
            limit >= 16_384,
            "the open-file limit here is {limit}: too low to test with"
        );
        presize_descriptor_table(4_096, limit);
        let table = DescriptorTable::new();
        table.limit.store(limit, Ordering::Relaxed);
        table.size.store(4_096, Ordering::Relaxed);
        table.highest.store(1_000, Ordering::Relaxed);
        keep_ahead(&table);
        assert_eq!(
            table.size.load(Ordering::Relaxed),
            4_096,
            "under half: left"
        );
        table.highest.store(2_048, Ordering::Relaxed);
        keep_ahead(&table);
        assert!(table.size.load(Ordering::Relaxed) >= 8_192);
        assert!(
            table_size() >= 8_192,
            "FDSize {} after growing",
            table_size()
        );
        let after = table.size.load(Ordering::Relaxed);
        keep_ahead(&table);
        assert_eq!(table.size.load(Ordering::Relaxed), after);
    }

    /// The table holds what was asked for once it is presized, within the open-file limit, and
    /// a request past the limit stops at it rather than failing. Run alone, the test process's
    /// table is far smaller than 4,096 until it is presized.
    #[test]
    fn the_descriptor_table_is_grown_once_to_what_the_run_may_hold() {
        let limit = raise_open_file_limit();
        let want = 4_096.min(limit);
        assert!(
            want > 256,
            "the open-file limit here is {limit}: too low to test with"
        );
        presize_descriptor_table(want, limit);
        assert!(
            table_size() >= want,
            "FDSize {} after presizing for {want}",
            table_size()
        );
        // Past the limit: the table grows to the limit at most, and nothing fails.
        presize_descriptor_table(u64::MAX, limit.min(8_192));
        assert!(table_size() >= limit.min(8_192));
        // Nothing to do below the starting size, and no call leaves its duplicate open (other
        // tests open descriptors meanwhile, at the lowest free numbers, far below these).
        presize_descriptor_table(10, limit);
        presize_descriptor_table(want, limit);
        let high = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
            .filter(|&fd| fd >= want - 1)
            .count();
        assert_eq!(
            high,
            0,
            "a duplicate at or above {} was left open",
            want - 1
        );
    }
}
