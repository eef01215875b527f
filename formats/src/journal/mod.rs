//! Journal format v1: the one contract between recorder and analyzer (formats/JOURNAL.md).
//!
//! A journal is a file header followed by blocks. The header is laid out byte by byte here (not by
//! a codec) and ends with its BLAKE3 hash, which starts the chain. A block is the unit of group
//! commit: a fixed 24-byte prefix, a payload of length-prefixed typed records, and the chain value
//! `BLAKE3-keyed(key = previous chain value, prefix || payload)`. Record payloads are bincode 2.0.1 in one
//! fixed configuration ([`CODEC`]). A checkpoint block restates the chain head and can carry an
//! ed25519 signature; the seal block ends the file.
//!
//! ```
//! use percentes_formats::journal::{self, verify, VerifyOptions, Verdict};
//! let bytes = journal::synthetic::small_sealed();
//! let report = verify::verify(&bytes, &VerifyOptions::default());
//! assert_eq!(report.verdict, Verdict::SealedIntact);
//! ```

pub mod cgroup;
pub mod change;
pub mod detail;
pub mod header;
pub mod keys;
pub mod manifest;
pub mod probe;
pub mod records;
pub mod scrape;
pub mod stream;
pub mod synthetic;
pub mod verify;
pub mod writer;

pub use header::{ClockAnchors, Header, HeaderError};
pub use records::{Outcome, Record, RecordKind};
pub use verify::{Verdict, VerifyOptions, VerifyReport};
pub use writer::{JournalWriter, WriteError};

/// First eight bytes of every journal.
pub const MAGIC: [u8; 8] = *b"PRCNTJNL";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Magic, version, flags, body length and its complement.
pub const FILE_PREFIX_BYTES: usize = 20;
/// Largest header body: a config is at most 1 MiB; the rest is small.
pub const HEADER_BODY_BYTES_MAX: u32 = 4 << 20;
/// Every block starts with these four bytes.
pub const BLOCK_MAGIC: [u8; 4] = *b"BLK1";
/// Block magic, payload length, its complement, record count, first record sequence number.
pub const BLOCK_PREFIX_BYTES: usize = 24;
/// Largest block payload.
pub const BLOCK_PAYLOAD_BYTES_MAX: u32 = 4 << 20;
/// A record's length (u32) and kind (u8).
pub const RECORD_PREFIX_BYTES: usize = 5;
/// Largest record body.
pub const RECORD_BYTES_MAX: u32 = 1 << 20;
/// BLAKE3 output, the chain value stored after the header and after every block.
pub const HASH_BYTES: usize = 32;
/// The writer closes a block once its payload reaches this size (a commit may close it sooner).
pub const BLOCK_TARGET_BYTES: usize = 64 << 10;
/// The codec the record bodies use, named in every header. A reader refuses any other.
pub const CODEC: &str = "bincode 2.0.1; config standard, little-endian, fixed-int, limit 1048576";

const _: () =
    assert!(RECORD_BYTES_MAX as usize + RECORD_PREFIX_BYTES <= BLOCK_PAYLOAD_BYTES_MAX as usize);
const _: () = assert!(BLOCK_TARGET_BYTES <= BLOCK_PAYLOAD_BYTES_MAX as usize);

/// The bincode configuration of [`CODEC`].
pub(crate) fn codec() -> impl bincode::config::Config {
    bincode::config::standard()
        .with_little_endian()
        .with_fixed_int_encoding()
        .with_limit::<{ RECORD_BYTES_MAX as usize }>()
}

/// Lowercase hex of a hash, as reports and `verify` print chain heads.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 64 hex digits into a hash.
pub fn parse_hash(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The chain step: BLAKE3 in keyed mode, keyed by the previous chain value, over the block's
/// prefix and payload. Keying (rather than hashing `previous || block`) keeps the block aligned to
/// BLAKE3's 1 KiB chunks, so verification runs at the hash's full SIMD speed.
pub fn chain_step(previous: &[u8; 32], block: &[u8]) -> [u8; 32] {
    *blake3::keyed_hash(previous, block).as_bytes()
}
