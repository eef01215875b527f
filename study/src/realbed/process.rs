//! The real-parts testbed's processes: a program found where Debian puts it, a free port, a
//! process group started in a placement and stopped whole, a replica's readiness and log.

use std::io::{BufRead, Seek};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Context, Result};
use crate::placement::Joiner;
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;
use percentes_scenarios::netns::Netns;

/// A program on PATH, or where Debian puts daemons (/usr/sbin is not on every PATH).
pub(crate) fn program(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// One replica process: its name, where it listens, the process group it leads, and the
/// network namespace it runs in on an isolated bed (deleted when the replica is dropped, after
/// the bed stopped its group).
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) name: String,
    pub(crate) port: u16,
    pub(crate) child: Child,
    pub(crate) started: Instant,
    pub(crate) netns: Option<Netns>,
}

impl Replica {
    /// Where it listens: its namespace's address, or loopback.
    pub(crate) fn address(&self) -> SocketAddr {
        let host = self
            .netns
            .as_ref()
            .map_or(Ipv4Addr::LOCALHOST, Netns::address);
        SocketAddr::from((host, self.port))
    }
}

/// A port free on loopback now (the kernel's choice, released for the child to take).
pub(crate) fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Whether `GET path` at `address` answers 200 within a second.
pub fn answers(address: SocketAddr, path: &str) -> bool {
    matches!(
        percentes_scenarios::testbed::http_call(address, "GET", path, "", Duration::from_secs(1)),
        Ok((200, _))
    )
}

/// Starts `argv` as the leader of a new process group, in the placement's target groups, its
/// output appended to `log`.
pub(crate) fn spawn(argv: &[String], log: &Path, joiner: Option<Joiner>) -> Result<Child> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    let (program, args) = argv.split_first().context("an empty command")?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0);
    if let Some(joiner) = joiner {
        // SAFETY: the closure only calls Joiner::join, which uses async-signal-safe calls on
        // paths prepared before the fork.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || joiner.join());
        }
    }
    command
        .spawn()
        .with_context(|| format!("cannot start {program}"))
}

/// SIGTERM to a group, then SIGKILL after `grace`; reaps the leader.
pub(crate) fn stop_group(child: &mut Child, grace: Duration) {
    let Ok(pid) = i32::try_from(child.id()) else {
        return;
    };
    // SAFETY: kill(2) on a process group this runner started (its leader's pid); no memory.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(-pid, libc::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < grace {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above; the group's other members may outlive their leader.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Reads what `log` gained since `offset`, line by line; returns the new offset.
fn read_new_lines(log: &Path, offset: u64, mut each: impl FnMut(&str)) -> u64 {
    let Ok(mut file) = std::fs::File::open(log) else {
        return offset;
    };
    if file.seek(std::io::SeekFrom::Start(offset)).is_err() {
        return offset;
    }
    let mut reader = std::io::BufReader::new(file);
    let mut consumed = offset;
    let mut line = String::new();
    while let Ok(n) = reader.read_line(&mut line) {
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        consumed += n as u64;
        each(line.trim_end());
        line.clear();
    }
    consumed
}

/// A replica's log watched for the line that says its weights are loaded, reported once as
/// `weight-load` with the line itself.
pub(crate) struct WeightsLine<'a> {
    /// The log.
    pub(crate) log: &'a Path,
    /// What the log has been read up to.
    pub(crate) offset: u64,
    /// The fragment the line holds; `None`: nothing to wait for.
    pub(crate) fragment: Option<&'a str>,
    /// Whether it was seen (or there is nothing to wait for).
    pub(crate) seen: bool,
}

impl<'a> WeightsLine<'a> {
    /// Watches `log` from `offset` for `fragment`.
    pub(crate) fn new(log: &'a Path, offset: u64, fragment: Option<&'a str>) -> WeightsLine<'a> {
        WeightsLine {
            log,
            offset,
            fragment,
            seen: fragment.is_none(),
        }
    }

    /// Reads what the log gained; reports the line into `inbox` the first time it appears.
    pub(crate) fn look(&mut self, replica: &str, inbox: &TimelineInbox) {
        let (Some(fragment), false) = (self.fragment, self.seen) else {
            return;
        };
        let mut seen = false;
        self.offset = read_new_lines(self.log, self.offset, |line| {
            if !seen && line.contains(fragment) {
                seen = true;
                inbox.report(
                    TimelineSubject::WeightLoad,
                    &format!(
                        "{replica}'s log: {}",
                        line.chars().take(200).collect::<String>()
                    ),
                    None,
                );
            }
        });
        self.seen = seen;
    }
}
