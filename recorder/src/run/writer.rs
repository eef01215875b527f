//! The journal writer thread: the only owner of the journal file, off the send path.
//!
//! It never fails open. The first failure (disk full, an I/O error, a sync that fails) stops
//! dispatch at once through the run's stop flag, and the file is cut back to the last block that
//! was written whole, so it is a verifiable prefix from that moment on. The records that keep
//! arriving while in-flight requests drain are held in memory (the drain bounds them); at the end
//! the writer tries once more to write them and to seal the journal `aborted` with the cause. If
//! even that fails, the prefix stays and the run ends with an error that says so.

use std::fs::File;
use std::io::Write;
use std::io::{Seek, SeekFrom};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::journal::records::{Record, SealStatus};
use percentes_formats::journal::writer::Sealed;
use percentes_formats::journal::{JournalWriter, WriteError};

use super::escape_watch::EscapeWatch;
use super::signals::say;
use super::state::{Shared, ToWriter};

/// The writer's journal: the file, and a second handle to it that can cut it back after a
/// failed write (the writer's own handle is consumed by the seal).
pub(super) struct Journal {
    pub(super) writer: JournalWriter<File>,
    pub(super) file: File,
    /// Where chain heads go as they are written (`record --heads`, `--progress json`).
    pub(super) heads: HeadLog,
}

/// Chain heads kept outside the journal while it is written (SPEC §J.8): one JSON line for the
/// header's hash, each checkpoint (after its sync) and the seal, to a file and, under
/// `--progress json`, to stderr. A failure to write the file is said once and never stops the
/// run: the journal is the record, the heads are a second anchor for it.
#[derive(Debug, Default)]
pub(super) struct HeadLog {
    pub(super) file: Option<File>,
    pub(super) to_stderr: bool,
    broken: bool,
}

impl HeadLog {
    pub(super) fn new(file: Option<File>, to_stderr: bool) -> HeadLog {
        HeadLog {
            file,
            to_stderr,
            broken: false,
        }
    }

    /// Emits one head: `kind` is `header`, `checkpoint` (with its sequence) or `seal` (with its
    /// status).
    pub(super) fn emit(&mut self, kind: &str, extra: (&str, String), at_ns: u64, head: &[u8; 32]) {
        if self.file.is_none() && !self.to_stderr {
            return;
        }
        let mut line = serde_json::json!({
            "kind": kind,
            "at_ns": at_ns,
            "chain_head": percentes_formats::journal::hex(head),
        });
        if !extra.0.is_empty() {
            line[extra.0] = serde_json::Value::String(extra.1);
        }
        let line = format!("{line}\n");
        if self.to_stderr {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        if let Some(file) = &mut self.file {
            if let Err(e) = file
                .write_all(line.as_bytes())
                .and_then(|_| file.sync_data())
            {
                if !self.broken {
                    self.broken = true;
                    say(&format!(
                        "cannot write the chain heads file ({e}); the journal goes on, and its heads are in its checkpoints"
                    ));
                }
            }
        }
    }
}

impl Journal {
    /// Cuts the file back to the end of the last block written whole, so a partly written block
    /// never sits in front of what comes next.
    fn cut_back(&mut self) {
        let good = self.writer.bytes_written();
        let _ = self.file.set_len(good);
        let _ = self.file.seek(SeekFrom::Start(good));
    }
}

/// What the writer thread ends with.
pub(super) type WriterResult = Result<Sealed, WriteError>;

pub(super) fn writer_thread(
    mut journal: Journal,
    rx: Receiver<ToWriter>,
    shared: &Shared,
    epoch: Instant,
    mut watch: Option<EscapeWatch>,
    stop: &AtomicBool,
) -> WriterResult {
    let mut escape = |record: &Record, shared: &Shared| -> Option<Record> {
        watch.as_mut()?.escape_after(record, shared)
    };
    let now_ns = || Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let mut last_commit = Instant::now();
    let mut last_checkpoint = Instant::now();
    // Records that could not be appended once the writer failed, in arrival order.
    let mut held: Vec<Record> = Vec::new();
    let mut failed = false;
    let fail = |e: WriteError, journal: &mut Journal, failed: &mut bool| {
        if !*failed {
            *failed = true;
            say(&format!(
                "journal writer failed ({e}): dispatch stopped; draining in-flight requests, then \
                 sealing the journal as aborted if the file takes it"
            ));
            *shared.writer_failed.lock().expect("writer lock") = Some(Arc::new(e));
            stop.store(true, Ordering::SeqCst);
            journal.cut_back();
        }
    };
    loop {
        let message = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(ToWriter::Finish(
                SealStatus::Aborted,
                "the recorder stopped without finishing".into(),
            )),
        };
        let records = match message {
            Some(ToWriter::Record(record)) => vec![*record],
            Some(ToWriter::Batch(records)) => records,
            Some(ToWriter::Finish(status, reason)) => {
                return finish(journal, held, status, &reason, now_ns())
            }
            None => Vec::new(),
        };
        shared
            .queue
            .depth
            .fetch_sub(records.len() as u64, Ordering::Relaxed);
        let mut baseline = shared
            .baseline
            .as_ref()
            .map(|b| b.lock().expect("baseline lock"));
        for record in records {
            if let Some(tally) = baseline.as_mut() {
                tally.observe(&record);
            }
            let event = escape(&record, shared);
            for record in std::iter::once(record).chain(event) {
                if failed {
                    held.push(record);
                } else if let Err(e) = journal.writer.append(&record) {
                    held.push(record);
                    fail(e, &mut journal, &mut failed);
                }
            }
        }
        drop(baseline);
        if failed {
            continue;
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            if let Err(e) = journal.writer.commit() {
                fail(e, &mut journal, &mut failed);
                continue;
            }
            last_commit = Instant::now();
        }
        if last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
            let at_ns = now_ns();
            let synced = journal.writer.checkpoint(at_ns).and_then(|head| {
                journal
                    .writer
                    .get_mut()
                    .sync_data()
                    .map_err(WriteError::Io)?;
                Ok(head)
            });
            match synced {
                Ok(head) => {
                    let sequence = journal.writer.counts().checkpoints.saturating_sub(1);
                    journal.heads.emit(
                        "checkpoint",
                        ("sequence", sequence.to_string()),
                        at_ns,
                        &head,
                    );
                }
                Err(e) => {
                    fail(e, &mut journal, &mut failed);
                    continue;
                }
            }
            last_checkpoint = Instant::now();
        }
    }
}

/// Writes what is held and the seal. On failure the file is cut back to its verifiable prefix.
fn finish(
    mut journal: Journal,
    held: Vec<Record>,
    status: SealStatus,
    reason: &str,
    at_ns: u64,
) -> WriterResult {
    let attempt = (|| {
        for record in &held {
            journal.writer.append(record)?;
        }
        Ok(())
    })();
    if let Err(e) = attempt {
        journal.cut_back();
        let _ = journal.file.sync_data();
        return Err(e);
    }
    let Journal {
        writer,
        mut file,
        mut heads,
    } = journal;
    let good = writer.bytes_written();
    match writer.seal(at_ns, status, reason) {
        Ok((sealed_file, sealed)) => {
            sealed_file.sync_data()?;
            heads.emit(
                "seal",
                ("status", status.name().to_owned()),
                at_ns,
                &sealed.chain_head,
            );
            Ok(sealed)
        }
        Err(e) => {
            let _ = file.set_len(good);
            let _ = file.seek(SeekFrom::Start(good));
            let _ = file.sync_data();
            Err(e)
        }
    }
}

/// Messages the writer queue holds before a sender blocks (and a queue-full event is recorded); a
/// message is one record or a worker's batch of up to [`BATCH_RECORDS_MAX`](super::pacer::BATCH_RECORDS_MAX).
pub const WRITER_QUEUE_RECORDS_MAX: usize = 65_536;
/// The writer commits a block at least this often.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);
/// The writer checkpoints (and fdatasyncs) at least this often (SPEC §J.5, §J.6).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
