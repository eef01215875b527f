//! The recorder's end of the external timeline interface ([`crate::events`]): a Unix stream
//! socket at `record --events-socket PATH`, readable and writable by the recorder's user only,
//! served by one thread until the run is done, then removed. Each line read is placed on the
//! run's clock, answered, and journaled as a `timeline` event through the same writer as
//! everything else; a bad line is refused to its sender and never ends the run.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use percentes_formats::journal::records::{EventKind, EventRecord, Record};

use super::dispatch::STOP_POLL;
use super::host::now_ns;
use super::state::{Sender, Shared};
use crate::error::{io, RecordError};

/// The most events one connection may hand over (a supervisor sends a handful a run).
const EVENTS_PER_CONNECTION_MAX: usize = 200;

/// Binds `path` (a stale socket left by an earlier run is replaced; any other file is not).
pub(super) fn bind(path: &std::path::Path) -> Result<UnixListener, RecordError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() || UnixStream::connect(path).is_ok() {
            return Err(RecordError::host(format!(
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

/// How long a connection may sit between lines before it is closed.
const IDLE_MAX: Duration = Duration::from_secs(2);
/// How long a line may take from its first byte to its end: a sender that drips bytes holds
/// its own connection at most this long, and never anyone else's.
const LINE_DEADLINE: Duration = Duration::from_secs(2);
/// Senders served at once; one more is answered `refused` at once and closed.
const CONNECTIONS_MAX: usize = 8;

/// Serves the socket until the run is done, then removes it: each sender on a thread of its
/// own (at most [`CONNECTIONS_MAX`] at once), so a slow or silent one delays no other.
pub(super) fn serve(
    listener: UnixListener,
    path: std::path::PathBuf,
    clocks: (Instant, u64, i64),
    sender: &Sender,
    shared: &Shared,
) {
    let open = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        while !shared.done.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    if open.load(Ordering::Relaxed) >= CONNECTIONS_MAX {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
                        let _ = stream.write_all(
                            format!(
                                "refused: {CONNECTIONS_MAX} senders are connected; try again\n"
                            )
                            .as_bytes(),
                        );
                        continue;
                    }
                    open.fetch_add(1, Ordering::Relaxed);
                    let open = &open;
                    let spawned = std::thread::Builder::new()
                        .name("events-sender".into())
                        .spawn_scoped(scope, move || {
                            connection(stream, clocks, sender, &shared.done);
                            open.fetch_sub(1, Ordering::Relaxed);
                        });
                    if spawned.is_err() {
                        open.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                Err(_) => std::thread::sleep(STOP_POLL),
            }
        }
    });
    let _ = std::fs::remove_file(path);
}

/// What reading one line found.
#[derive(Debug, PartialEq)]
enum Next {
    /// A line, its newline left off.
    Line(Vec<u8>),
    /// More than a line's bound without a newline.
    TooLong,
    /// A line begun and not ended within [`LINE_DEADLINE`].
    Late,
    /// The sender closed, went quiet for [`IDLE_MAX`] between lines, or the run is done.
    Closed,
}

/// The next line from `stream` (`pending` holds what was read past the last one).
fn next_line(
    stream: &mut impl Read,
    pending: &mut Vec<u8>,
    timeout: &mut dyn FnMut(Duration),
    done: &std::sync::atomic::AtomicBool,
) -> Next {
    let mut began = (!pending.is_empty()).then(Instant::now);
    let idle_until = Instant::now() + IDLE_MAX;
    let mut buffer = [0u8; 512];
    loop {
        if let Some(at) = pending.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = pending.drain(..=at).collect();
            line.pop();
            return if line.len() > crate::events::LINE_BYTES_MAX {
                Next::TooLong
            } else {
                Next::Line(line)
            };
        }
        if pending.len() > crate::events::LINE_BYTES_MAX {
            return Next::TooLong;
        }
        let deadline = began.map_or(idle_until, |at| at + LINE_DEADLINE);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return if began.is_some() {
                Next::Late
            } else {
                Next::Closed
            };
        }
        if done.load(Ordering::Relaxed) && began.is_none() {
            return Next::Closed;
        }
        timeout(left.min(STOP_POLL));
        match stream.read(&mut buffer) {
            Ok(0) => return Next::Closed,
            Ok(n) => {
                began.get_or_insert_with(Instant::now);
                pending.extend_from_slice(&buffer[..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => return Next::Closed,
        }
    }
}

/// One sender: each line read whole within its deadline, placed, answered, journaled; a line
/// that is not UTF-8 text is answered `refused`, as any other bad line.
fn connection(
    stream: UnixStream,
    (epoch, monotonic_ns, realtime_ns): (Instant, u64, i64),
    sender: &Sender,
    done: &std::sync::atomic::AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let Ok(mut answers) = stream.try_clone() else {
        return;
    };
    let mut reader = stream;
    let Ok(timer) = reader.try_clone() else {
        return;
    };
    let mut timeout = |d: Duration| {
        let _ = timer.set_read_timeout(Some(d));
    };
    let mut pending = Vec::new();
    for _ in 0..EVENTS_PER_CONNECTION_MAX {
        let line = next_line(&mut reader, &mut pending, &mut timeout, done);
        let answer = match &line {
            Next::Closed => return,
            Next::TooLong => format!(
                "refused: a line over {} bytes",
                crate::events::LINE_BYTES_MAX
            ),
            Next::Late => format!(
                "refused: a line begun and not ended within {} s",
                LINE_DEADLINE.as_secs()
            ),
            Next::Line(bytes) => match std::str::from_utf8(bytes) {
                Err(e) => format!("refused: the line is not UTF-8 text ({e})"),
                Ok(text) => answer(text, (epoch, monotonic_ns, realtime_ns), sender),
            },
        };
        if answers.write_all(format!("{answer}\n").as_bytes()).is_err() {
            return;
        }
        if matches!(line, Next::TooLong | Next::Late) {
            return; // the rest of such a line is not read as lines of its own
        }
    }
}

/// A line placed and journaled: the answer to its sender.
fn answer(
    line: &str,
    (epoch, monotonic_ns, realtime_ns): (Instant, u64, i64),
    sender: &Sender,
) -> String {
    let anchors = crate::events::Anchors {
        monotonic_epoch_ns: monotonic_ns,
        realtime_epoch_ns: realtime_ns,
        received_ns: now_ns(epoch),
    };
    match crate::events::place(line, anchors) {
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
        Err(why) => format!("refused: {}", why.to_string().replace('\n', " ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out its pieces one read at a time, `None` standing for a read that
    /// timed out.
    struct Pieces(std::collections::VecDeque<Option<Vec<u8>>>);

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                Some(Some(mut bytes)) => {
                    let n = bytes.len().min(out.len());
                    out[..n].copy_from_slice(&bytes[..n]);
                    if n < bytes.len() {
                        self.0.push_front(Some(bytes.split_off(n)));
                    }
                    Ok(n)
                }
                Some(None) => {
                    std::thread::sleep(Duration::from_millis(60));
                    Err(std::io::ErrorKind::WouldBlock.into())
                }
                None => Ok(0),
            }
        }
    }

    fn lines(pieces: Vec<Option<&[u8]>>) -> Vec<Next> {
        let mut reader = Pieces(pieces.into_iter().map(|p| p.map(<[u8]>::to_vec)).collect());
        let (mut pending, done) = (Vec::new(), std::sync::atomic::AtomicBool::new(false));
        let mut out = Vec::new();
        loop {
            let next = next_line(&mut reader, &mut pending, &mut |_| {}, &done);
            let end = matches!(next, Next::Closed | Next::TooLong | Next::Late);
            out.push(next);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn lines_are_read_whole_across_reads_and_past_their_bound_refused() {
        let got = lines(vec![
            Some(b"{\"a\"".as_slice()),
            Some(b": 1}\n{\"b\": 2}\n{\"c\""),
        ]);
        assert_eq!(
            got,
            [
                Next::Line(b"{\"a\": 1}".to_vec()),
                Next::Line(b"{\"b\": 2}".to_vec()),
                Next::Closed
            ]
        );
        let long = vec![b'x'; crate::events::LINE_BYTES_MAX + 10];
        assert_eq!(lines(vec![Some(&long)])[0], Next::TooLong);
    }
}
