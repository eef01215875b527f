//! The journal writer thread: the only owner of the journal file, off the send path.
//!
//! It never fails open. The first failure (disk full, an I/O error, a sync that fails) stops
//! dispatch at once through the run's stop flag, and the file is cut back to the last block that
//! was written whole, so it is a verifiable prefix from that moment on. The records that keep
//! arriving while in-flight requests drain are held in memory (the drain bounds them); at the end
//! the writer tries once more to write them and to seal the journal `aborted` with the cause. If
//! even that fails, the prefix stays and the run ends with an error that says so.

use std::io::{Seek, SeekFrom};

use super::*;

/// The writer's journal: the file, and a second handle to it that can cut it back after a
/// failed write (the writer's own handle is consumed by the seal).
pub(super) struct Journal {
    pub(super) writer: JournalWriter<File>,
    pub(super) file: File,
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
        let event = watch.as_mut()?.observe(record)?;
        *shared.escaped.lock().expect("escape lock") =
            Some(format!("escaped ({}): {}", event.subject, event.detail));
        Some(Record::Event(event))
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
            *shared.writer_failed.lock().expect("writer lock") = Some(e.to_string());
            stop.store(true, Ordering::SeqCst);
            journal.cut_back();
            say(&format!(
                "journal writer failed ({e}): dispatch stopped; draining in-flight requests, then \
                 sealing the journal as aborted if the file takes it"
            ));
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
            .queue_depth
            .fetch_sub(records.len() as u64, Ordering::Relaxed);
        for record in records {
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
            let synced = journal
                .writer
                .checkpoint(now_ns())
                .and_then(|_| journal.writer.get_mut().sync_data().map_err(WriteError::Io));
            if let Err(e) = synced {
                fail(e, &mut journal, &mut failed);
                continue;
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
    let Journal { writer, mut file } = journal;
    let good = writer.bytes_written();
    match writer.seal(at_ns, status, reason) {
        Ok((sealed_file, sealed)) => {
            sealed_file.sync_data()?;
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
