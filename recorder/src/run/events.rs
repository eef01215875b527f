//! The recorder's end of the external timeline interface ([`crate::events`]): a Unix stream
//! socket at `record --events-socket PATH`, readable and writable by the recorder's user only,
//! served by one thread until the run is done, then removed. Each line read is placed on the
//! run's clock, answered, and journaled as a `timeline` event through the same writer as
//! everything else; a bad line is refused to its sender and never ends the run.

use super::{
    io, now_ns, Duration, EventKind, EventRecord, Instant, Ordering, Record, RecordError, Sender,
    Shared, STOP_POLL,
};
use std::io::Write;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};

/// The most events one connection may hand over (a supervisor sends a handful a run).
const EVENTS_PER_CONNECTION_MAX: usize = 200;

/// Binds `path` (a stale socket left by an earlier run is replaced; any other file is not).
pub(super) fn bind(path: &std::path::Path) -> Result<UnixListener, RecordError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() || UnixStream::connect(path).is_ok() {
            return Err(RecordError::Refused(format!(
                "--events-socket {}: {} exists; name a path that does not",
                path.display(),
                if meta.file_type().is_socket() {
                    "a socket another process listens on"
                } else {
                    "a file that is not a socket"
                }
            )));
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(io(format!(
        "cannot listen on --events-socket {}",
        path.display()
    )))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io(format!(
        "cannot restrict {} to its owner",
        path.display()
    )))?;
    listener
        .set_nonblocking(true)
        .map_err(io("cannot make the events socket non-blocking"))?;
    Ok(listener)
}

/// Serves the socket until the run is done, then removes it.
pub(super) fn serve(
    listener: UnixListener,
    path: std::path::PathBuf,
    clocks: (Instant, u64, i64),
    sender: &Sender,
    shared: &Shared,
) {
    while !shared.done.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => connection(stream, clocks, sender),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(STOP_POLL);
            }
            Err(_) => std::thread::sleep(STOP_POLL),
        }
    }
    let _ = std::fs::remove_file(path);
}

/// One sender: its lines read (each at most a line's bound), placed, answered, journaled.
fn connection(
    stream: UnixStream,
    (epoch, monotonic_ns, realtime_ns): (Instant, u64, i64),
    sender: &Sender,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let Ok(mut answers) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    for _ in 0..EVENTS_PER_CONNECTION_MAX {
        let mut line = String::new();
        let limit = crate::events::LINE_BYTES_MAX as u64 + 1;
        match (&mut reader).take(limit).read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let anchors = crate::events::Anchors {
            monotonic_epoch_ns: monotonic_ns,
            realtime_epoch_ns: realtime_ns,
            received_ns: now_ns(epoch),
        };
        let answer = if line.len() > crate::events::LINE_BYTES_MAX {
            format!(
                "refused: a line over {} bytes",
                crate::events::LINE_BYTES_MAX
            )
        } else {
            match crate::events::place(&line, anchors) {
                Ok((at_ns, subject, detail, value)) => {
                    sender.send(Record::Event(EventRecord {
                        at_ns,
                        kind: EventKind::Timeline.code(),
                        subject: subject.name().to_owned(),
                        detail,
                        value,
                    }));
                    format!("ok at_ns={at_ns}")
                }
                Err(why) => format!("refused: {}", why.replace('\n', " ")),
            }
        };
        if answers.write_all(format!("{answer}\n").as_bytes()).is_err() {
            return;
        }
        if line.len() > crate::events::LINE_BYTES_MAX {
            return; // the rest of an over-long line is not read as lines of its own
        }
    }
}
