//! The verifier's checks of the header and of a block's control record (a checkpoint or the
//! seal), each a function that says what failed, the verdict and the problem, for
//! [`super::verify_with_progress`] to report.

use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};

use super::{CheckpointSeen, Problem, SealSeen, Verdict, VerifyOptions, VerifyReport};
use crate::journal::header::{Header, HeaderError};
use crate::journal::records::{checkpoint_message, seal_message, Record, RecordKind, SealStatus};
use crate::journal::{hex, CODEC, FILE_PREFIX_BYTES};

/// Why a journal failed a check: the verdict and the problem to report.
pub(super) type Failure = (Verdict, Problem);

/// A problem at `offset` (and at `record_index`, when a record is concerned).
pub(super) fn problem(record_index: Option<u64>, offset: usize, what: String) -> Problem {
    Problem {
        record_index,
        byte_offset: offset as u64,
        what,
        expected: None,
        found: None,
    }
}

/// Why a header that does not decode fails: not a journal, a version this build does not read,
/// cut off (an unsealed prefix), malformed or hashed wrong (tampered).
fn header_failure(error: HeaderError, len: usize) -> Failure {
    match error {
        HeaderError::NotAJournal => {
            let what = if len == 0 {
                "empty file"
            } else {
                "the first bytes are not the journal magic"
            };
            (Verdict::NotAJournal, problem(None, 0, what.into()))
        }
        HeaderError::UnsupportedVersion { found } => (
            Verdict::UnsupportedVersion,
            problem(
                None,
                8,
                format!("format version {found}; this build reads version 1"),
            ),
        ),
        e @ HeaderError::Truncated { .. } => {
            (Verdict::UnsealedPrefix, problem(None, len, e.to_string()))
        }
        e @ HeaderError::Malformed { offset, .. } => {
            (Verdict::Tampered, problem(None, offset, e.to_string()))
        }
        HeaderError::HashMismatch {
            offset,
            expected,
            found,
        } => {
            let mut p = problem(
                None,
                offset,
                "the header hash does not match the header bytes".into(),
            );
            p.expected = Some(hex(&expected));
            p.found = Some(hex(&found));
            (Verdict::Tampered, p)
        }
    }
}

/// The header's checks: it decodes and its hash holds, its codec is this build's, its signing
/// key is a valid one, and the trusted key when one is given. `Ok` (the header now in `report`):
/// where the first block starts, the chain's first value, and the signing key.
pub(super) fn verify_header(
    bytes: &[u8],
    options: &VerifyOptions,
    report: &mut VerifyReport,
) -> Result<(usize, [u8; 32], Option<VerifyingKey>), Failure> {
    let (header, header_end, chain0) =
        Header::decode(bytes).map_err(|e| header_failure(e, bytes.len()))?;
    if header.codec != CODEC {
        let at = FILE_PREFIX_BYTES;
        return Err((
            Verdict::UnsupportedVersion,
            problem(
                None,
                at,
                format!(
                    "record codec {:?}; this build reads {:?}",
                    header.codec, CODEC
                ),
            ),
        ));
    }
    report.signatures.key = header.signing_key;
    let signing_key = match header.signing_key.map(|k| VerifyingKey::from_bytes(&k)) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(_)) => {
            return Err((
                Verdict::Tampered,
                problem(
                    None,
                    header_end,
                    "the header's signing key is not a valid ed25519 key".into(),
                ),
            ))
        }
    };
    if let Some(trusted) = options.trusted_key {
        report.signatures.trusted = header.signing_key == Some(trusted);
        if !report.signatures.trusted {
            let mut p = problem(
                None,
                0,
                if header.signing_key.is_none() {
                    "a trusted key was given but the journal is not signed".into()
                } else {
                    "the journal is signed by a key other than the trusted one".into()
                },
            );
            p.expected = Some(hex(&trusted));
            p.found = header.signing_key.map(|k| hex(&k));
            report.header = Some(header);
            return Err((Verdict::Tampered, p));
        }
    }
    report.header = Some(header);
    Ok((header_end, chain0, signing_key))
}

/// A block's control record, a checkpoint or the seal, against the chain before it (`chain`,
/// and `stored`, the chain value of its own block), the counts so far and the signing key.
/// `Ok`: counted in `report`, and whether it was the seal.
pub(super) fn verify_control(
    report: &mut VerifyReport,
    (kind, body): (u8, &[u8]),
    at: (u64, usize),
    (chain, stored): (&[u8; 32], [u8; 32]),
    signing_key: Option<&VerifyingKey>,
) -> Result<bool, Failure> {
    match RecordKind::from_byte(kind) {
        Some(RecordKind::Checkpoint) => {
            verify_checkpoint(report, (kind, body), at, (chain, stored), signing_key)
                .map(|()| false)
        }
        Some(RecordKind::Seal) => {
            verify_seal(report, (kind, body), at, chain, signing_key).map(|()| true)
        }
        _ => unreachable!("scan_block marks only checkpoints and seals as control records"),
    }
}

/// A checkpoint: its sequence, the records before it and the chain before it agree with the
/// journal's, and its signature holds under the header's key.
fn verify_checkpoint(
    report: &mut VerifyReport,
    (kind, body): (u8, &[u8]),
    (index, offset): (u64, usize),
    (chain, stored): (&[u8; 32], [u8; 32]),
    signing_key: Option<&VerifyingKey>,
) -> Result<(), Failure> {
    let chain = *chain;
    let Ok(Record::Checkpoint(c)) = Record::decode(kind, body) else {
        return Err((
            Verdict::Tampered,
            problem(Some(index), offset, "checkpoint does not decode".into()),
        ));
    };
    let b = &c.body;
    if b.sequence != report.counts.checkpoints
        || b.records_before != index
        || b.chain_before != chain
    {
        let p = problem(
                Some(index),
                offset,
                format!(
                    "checkpoint {} disagrees with the chain (expected sequence {}, {} records before, head {})",
                    b.sequence,
                    report.counts.checkpoints,
                    index,
                    hex(&chain)
                ),
            );
        return Err((Verdict::Tampered, p));
    }
    if let Some(p) = check_signature(
        signing_key,
        c.signature,
        &checkpoint_message(b),
        index,
        offset,
    ) {
        return Err((Verdict::Tampered, p));
    }
    report.signatures.valid += u64::from(signing_key.is_some());
    report.counts.checkpoints += 1;
    report.last_checkpoint = Some(CheckpointSeen {
        sequence: b.sequence,
        at_ns: b.at_ns,
        records_before: b.records_before,
        chain_head: stored,
    });
    Ok(())
}

/// The seal: the records and chain before it, its counts against the records', a defined
/// status (a completed one gives no reason), and its signature.
fn verify_seal(
    report: &mut VerifyReport,
    (kind, body): (u8, &[u8]),
    (index, offset): (u64, usize),
    chain: &[u8; 32],
    signing_key: Option<&VerifyingKey>,
) -> Result<(), Failure> {
    let chain = *chain;
    let Ok(Record::Seal(s)) = Record::decode(kind, body) else {
        return Err((
            Verdict::Tampered,
            problem(Some(index), offset, "seal does not decode".into()),
        ));
    };
    let b = &s.body;
    if b.records_before != index || b.chain_before != chain {
        return Err((
            Verdict::Tampered,
            problem(
                Some(index),
                offset,
                "the seal disagrees with the chain before it".into(),
            ),
        ));
    }
    if b.counts != report.counts {
        let mut p = problem(
            Some(index),
            offset,
            "the seal's counts differ from the records".into(),
        );
        p.expected = Some(format!("{:?}", report.counts));
        p.found = Some(format!("{:?}", b.counts));
        return Err((Verdict::Tampered, p));
    }
    let Some(status) = SealStatus::from_byte(b.status) else {
        return Err((
            Verdict::Tampered,
            problem(Some(index), offset, "undefined seal status".into()),
        ));
    };
    if status == SealStatus::Completed && !b.reason.is_empty() {
        return Err((
            Verdict::Tampered,
            problem(
                Some(index),
                offset,
                "a completed seal gives a reason (only an aborted or escaped one does)".into(),
            ),
        ));
    }
    if let Some(p) = check_signature(signing_key, s.signature, &seal_message(b), index, offset) {
        return Err((Verdict::Tampered, p));
    }
    report.signatures.valid += u64::from(signing_key.is_some());
    report.seal = Some(SealSeen {
        status: status.name(),
        reason: b.reason.clone(),
        at_ns: b.at_ns,
    });
    Ok(())
}

/// The signature of a checkpoint or seal against the header's key: both or neither, and valid.
fn check_signature(
    key: Option<&VerifyingKey>,
    signature: Option<[u8; 64]>,
    message: &[u8],
    index: u64,
    offset: usize,
) -> Option<Problem> {
    let what = match (key, signature) {
        (None, None) => return None,
        (None, Some(_)) => "a signature in a journal whose header names no signing key",
        (Some(_), None) => "an unsigned checkpoint or seal in a signed journal",
        (Some(key), Some(sig)) => match key.verify(message, &Signature::from_bytes(&sig)) {
            Ok(()) => return None,
            Err(_) => "a signature that does not verify under the header's key",
        },
    };
    Some(Problem {
        record_index: Some(index),
        byte_offset: offset as u64,
        what: what.into(),
        expected: None,
        found: None,
    })
}
