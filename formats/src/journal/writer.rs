//! Appends records to a journal: blocks, the chain, checkpoints, the seal.
//!
//! The writer is synchronous and single-threaded; the recorder runs it on its own thread behind a
//! bounded queue and decides when to commit and fsync (SPEC §J.6). Nothing is ever rewritten: each
//! block is written once, after the previous one.

use std::fmt;
use std::io::{self, Write};

use ed25519_dalek::{Signer, SigningKey};

use super::records::{
    checkpoint_message, seal_message, Checkpoint, CheckpointBody, Counts, Outcome, Record, Seal,
    SealBody, SealStatus,
};
use super::{
    chain_step, Header, BLOCK_MAGIC, BLOCK_PREFIX_BYTES, BLOCK_TARGET_BYTES, HASH_BYTES,
    RECORD_BYTES_MAX,
};

/// Why an append, checkpoint or seal failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing or syncing the file failed.
    Io(io::Error),
    /// A record body over [`RECORD_BYTES_MAX`].
    RecordTooLarge {
        /// The record kind.
        kind: u8,
        /// Its body size.
        bytes: usize,
    },
    /// Checkpoints and the seal are written by their own methods, never appended.
    ControlRecord,
    /// The header names a signing key other than the one given (or none).
    SigningKeyMismatch,
    /// A record that breaks a rule its readers check (JOURNAL.md): never written.
    BrokenRecord {
        /// The record kind.
        kind: u8,
        /// The request index it carries.
        index: u64,
        /// The rule broken.
        rule: String,
    },
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Io(e) => write!(f, "journal write failed: {e}"),
            WriteError::RecordTooLarge { kind, bytes } => {
                write!(
                    f,
                    "record of kind {kind} is {bytes} bytes; the limit is {RECORD_BYTES_MAX}"
                )
            }
            WriteError::ControlRecord => {
                write!(f, "checkpoints and the seal have their own methods")
            }
            WriteError::SigningKeyMismatch => {
                write!(f, "the header's signing key is not the public half of the key given to the writer")
            }
            WriteError::BrokenRecord { kind, index, rule } => write!(
                f,
                "a record of kind {kind} for request {index} breaks a rule its readers check, so it is not written: {rule} (JOURNAL.md)"
            ),
        }
    }
}

impl std::error::Error for WriteError {}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// What [`JournalWriter::seal`] reports.
#[derive(Clone, Debug)]
pub struct Sealed {
    /// The journal's root hash: the chain value after the seal block.
    pub chain_head: [u8; 32],
    /// Requests by outcome, and the other records, as the seal counts them.
    pub counts: Counts,
    /// Records written, the seal's own included.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes one journal.
#[derive(Debug)]
pub struct JournalWriter<W: Write> {
    out: W,
    chain: [u8; 32],
    bytes_written: u64,
    /// The block being assembled: a reserved prefix, then record frames.
    block: Vec<u8>,
    block_records: u32,
    /// Sequence number of the block's first record.
    block_first: u64,
    next_record: u64,
    counts: Counts,
    signer: Option<SigningKey>,
    block_target_bytes: usize,
}

impl<W: Write> JournalWriter<W> {
    /// Writes the header and returns a writer positioned after it.
    pub fn create(
        mut out: W,
        header: &Header,
        signer: Option<SigningKey>,
    ) -> Result<Self, WriteError> {
        let verifying = signer.as_ref().map(|k| k.verifying_key().to_bytes());
        if verifying != header.signing_key {
            return Err(WriteError::SigningKeyMismatch);
        }
        let bytes = header.encode();
        out.write_all(&bytes)?;
        let chain: [u8; 32] = bytes[bytes.len() - HASH_BYTES..]
            .try_into()
            .expect("32 bytes");
        Ok(JournalWriter {
            out,
            chain,
            bytes_written: bytes.len() as u64,
            block: vec![0; BLOCK_PREFIX_BYTES],
            block_records: 0,
            block_first: 0,
            next_record: 0,
            counts: Counts::default(),
            signer,
            block_target_bytes: BLOCK_TARGET_BYTES,
        })
    }

    /// Closes blocks at `bytes` of payload instead of [`BLOCK_TARGET_BYTES`] (tests and goldens
    /// use small blocks so that corruption tests cover many block boundaries).
    pub fn with_block_target(mut self, bytes: usize) -> Self {
        self.block_target_bytes = bytes.clamp(1, BLOCK_TARGET_BYTES);
        self
    }

    /// Adds a record to the current block; the block is written once it reaches its target size.
    pub fn append(&mut self, record: &Record) -> Result<(), WriteError> {
        if matches!(record, Record::Checkpoint(_) | Record::Seal(_)) {
            return Err(WriteError::ControlRecord);
        }
        // What the decoder checks just after decoding, asserted before the bytes exist: a
        // record one side refuses never passes the other. (A stream record's rules are the
        // analyzer's on one side and the recorder's, before it hands one over, on the other.)
        let outcome = match record {
            Record::Request(r) => {
                Some(
                    r.checked_outcome()
                        .map_err(|broken| WriteError::BrokenRecord {
                            kind: record.kind_byte(),
                            index: r.index,
                            rule: broken.rule,
                        })?,
                )
            }
            _ => None,
        };
        let body = record.encode_body();
        if body.len() > RECORD_BYTES_MAX as usize {
            return Err(WriteError::RecordTooLarge {
                kind: record.kind_byte(),
                bytes: body.len(),
            });
        }
        let payload = self.block.len() - BLOCK_PREFIX_BYTES;
        if self.block_records > 0 && payload + 5 + body.len() > self.block_target_bytes {
            self.commit()?;
        }
        self.push_frame(record.kind_byte(), &body);
        match record {
            Record::Request(_) => {
                self.counts.requests += 1;
                match outcome {
                    Some(Outcome::Completed) => self.counts.completed += 1,
                    Some(Outcome::Errored) => self.counts.errored += 1,
                    Some(Outcome::Censored) => self.counts.censored += 1,
                    Some(Outcome::Undispatched) => self.counts.undispatched += 1,
                    None => unreachable!("a request record's outcome was checked above"),
                }
            }
            Record::Event(_) => self.counts.events += 1,
            Record::Telemetry(_) => self.counts.telemetry += 1,
            // Kinds 6 to 8 came after v1's first release: the seal counts them with the kinds a
            // reader that predates them does not know, so that reader's count agrees.
            Record::RequestExtension(_)
            | Record::Scrape(_)
            | Record::Stream(_)
            | Record::Unknown { .. } => self.counts.other += 1,
            Record::Checkpoint(_) | Record::Seal(_) => unreachable!("refused above"),
        }
        Ok(())
    }

    /// Writes the current block, if it holds any record (a group commit). Does not fsync.
    pub fn commit(&mut self) -> Result<(), WriteError> {
        if self.block_records == 0 {
            return Ok(());
        }
        let payload_len = (self.block.len() - BLOCK_PREFIX_BYTES) as u32;
        let prefix = &mut self.block[..BLOCK_PREFIX_BYTES];
        prefix[0..4].copy_from_slice(&BLOCK_MAGIC);
        prefix[4..8].copy_from_slice(&payload_len.to_le_bytes());
        prefix[8..12].copy_from_slice(&(!payload_len).to_le_bytes());
        prefix[12..16].copy_from_slice(&self.block_records.to_le_bytes());
        prefix[16..24].copy_from_slice(&self.block_first.to_le_bytes());
        // The chain advances only once the block is written: a failed write leaves the writer as
        // it was, the block still pending, so a caller that makes room (and cuts the file back to
        // `bytes_written`) can commit it again.
        let chain = chain_step(&self.chain, &self.block);
        self.block.extend_from_slice(&chain);
        if let Err(e) = self.out.write_all(&self.block) {
            self.block.truncate(self.block.len() - HASH_BYTES);
            return Err(e.into());
        }
        self.chain = chain;
        self.bytes_written += self.block.len() as u64;
        self.block.clear();
        self.block.resize(BLOCK_PREFIX_BYTES, 0);
        self.block_records = 0;
        self.block_first = self.next_record;
        Ok(())
    }

    /// Commits, then writes a checkpoint block and flushes. Returns the chain head after it, which
    /// the recorder may print so it can be kept outside the file.
    pub fn checkpoint(&mut self, at_ns: u64) -> Result<[u8; 32], WriteError> {
        self.commit()?;
        let body = CheckpointBody {
            sequence: self.counts.checkpoints,
            at_ns,
            records_before: self.next_record,
            chain_before: self.chain,
        };
        let signature = self
            .signer
            .as_ref()
            .map(|k| k.sign(&checkpoint_message(&body)).to_bytes());
        let record = Record::Checkpoint(Checkpoint { body, signature });
        let before = (self.block.len(), self.block_records, self.next_record);
        self.push_frame(record.kind_byte(), &record.encode_body());
        if let Err(e) = self.commit() {
            // A checkpoint that did not reach the file is not pending: the next attempt writes a
            // fresh one with a fresh time.
            self.block.truncate(before.0);
            (self.block_records, self.next_record) = (before.1, before.2);
            return Err(e);
        }
        self.counts.checkpoints += 1;
        self.out.flush()?;
        Ok(self.chain)
    }

    /// Commits, writes the seal block, flushes, and hands back the output.
    pub fn seal(
        mut self,
        at_ns: u64,
        status: SealStatus,
        reason: &str,
    ) -> Result<(W, Sealed), WriteError> {
        self.commit()?;
        let body = SealBody {
            at_ns,
            status: status as u8,
            reason: reason.to_owned(),
            records_before: self.next_record,
            counts: self.counts,
            chain_before: self.chain,
        };
        let signature = self
            .signer
            .as_ref()
            .map(|k| k.sign(&seal_message(&body)).to_bytes());
        let record = Record::Seal(Seal { body, signature });
        self.push_frame(record.kind_byte(), &record.encode_body());
        self.commit()?;
        self.out.flush()?;
        let sealed = Sealed {
            chain_head: self.chain,
            counts: self.counts,
            records: self.next_record,
            bytes: self.bytes_written,
        };
        Ok((self.out, sealed))
    }

    /// Abandons the journal without a seal (what a crash leaves, for tests): commits nothing.
    pub fn into_inner_unsealed(self) -> W {
        self.out
    }

    /// The chain value after the last written block.
    pub fn chain_head(&self) -> [u8; 32] {
        self.chain
    }
    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }
    /// Records appended so far.
    pub fn records_appended(&self) -> u64 {
        self.next_record
    }
    /// The counts so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }
    /// The output, for fsync by the caller.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    fn push_frame(&mut self, kind: u8, body: &[u8]) {
        self.block
            .extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.block.push(kind);
        self.block.extend_from_slice(body);
        self.block_records += 1;
        self.next_record += 1;
    }
}
