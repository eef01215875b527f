//! The journal writer thread: the only owner of the journal file, off the send path.

use super::*;

pub(super) fn writer_thread(
    file: File,
    header: &Header,
    signer: Option<SigningKey>,
    rx: Receiver<ToWriter>,
    shared: &Shared,
    epoch: Instant,
    mut watch: Option<EscapeWatch>,
) -> Result<Sealed, WriteError> {
    let mut escape = |record: &Record, shared: &Shared| -> Option<Record> {
        let event = watch.as_mut()?.observe(record)?;
        *shared.escaped.lock().expect("escape lock") =
            Some(format!("escaped ({}): {}", event.subject, event.detail));
        Some(Record::Event(event))
    };
    let now_ns = || Instant::now().saturating_duration_since(epoch).as_nanos() as u64;
    let mut writer = JournalWriter::create(file, header, signer)?;
    writer.get_mut().sync_data()?;
    let mut last_commit = Instant::now();
    let mut last_checkpoint = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(ToWriter::Record(record)) => {
                shared.queue_depth.fetch_sub(1, Ordering::Relaxed);
                writer.append(&record)?;
                if let Some(event) = escape(&record, shared) {
                    writer.append(&event)?;
                }
            }
            Ok(ToWriter::Batch(records)) => {
                shared
                    .queue_depth
                    .fetch_sub(records.len() as u64, Ordering::Relaxed);
                for record in &records {
                    writer.append(record)?;
                    if let Some(event) = escape(record, shared) {
                        writer.append(&event)?;
                    }
                }
            }
            Ok(ToWriter::Finish(status, reason)) => {
                let (file, sealed) = writer.seal(now_ns(), status, &reason)?;
                file.sync_data()?;
                return Ok(sealed);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let (file, sealed) = writer.seal(
                    now_ns(),
                    SealStatus::Aborted,
                    "the recorder stopped without finishing",
                )?;
                file.sync_data()?;
                return Ok(sealed);
            }
        }
        if last_commit.elapsed() >= COMMIT_INTERVAL {
            writer.commit()?;
            last_commit = Instant::now();
        }
        if last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL {
            writer.checkpoint(now_ns())?;
            writer.get_mut().sync_data()?;
            last_checkpoint = Instant::now();
        }
    }
}
