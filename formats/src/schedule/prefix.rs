//! A shared-prefix pool (SPEC §1 "Shared prefixes", issue 55 item 2): which requests open their
//! prompt with which shared text, fixed in advance from the seed, so the reuse a prefix cache can
//! obtain is designed, journaled and recomputable.
//!
//! Each session (an open or replayed request is its own session) draws once: with probability
//! `share` one of the pool's `entries` shared prefixes, uniformly, else none; all of a session's
//! turns open with the same one (a system prompt per user). Entry `k`'s length is
//! `tokens[k mod tokens.len()]` filler units. The draw for session `s` is
//! `d = mix(seed XOR mix(s XOR TAG))`: no shared prefix when `d mod 10^6 >= share_ppm`, else entry
//! `mix(d) mod entries` (JOURNAL.md, "Schedule" rule 6).

/// The header extension that carries the pool (absent: no shared prefixes).
pub const PREFIX_EXTENSION: &str = "prefix-pool";

/// Most entries a pool may have (each one's text is held by every worker).
pub const PREFIX_ENTRIES_MAX: u32 = 10_000;
/// Longest shared prefix, in filler units (tokens with a tokenizer, words without).
pub const PREFIX_TOKENS_MAX: u32 = 32_768;
/// Most distinct lengths a pool may list.
pub const PREFIX_LENGTHS_MAX: usize = 1_000;
/// `share` is held in parts per million, so the draw compares integers on every OS.
pub const SHARE_SCALE: u32 = 1_000_000;

/// A pool of shared prefixes and the draw that assigns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixPool {
    /// How many distinct shared prefixes.
    pub entries: u32,
    /// Their lengths in filler units, entry `k` taking `tokens[k mod len]`.
    pub tokens: Vec<u32>,
    /// Sessions that open with a shared prefix, parts per million (1..=10^6).
    pub share_ppm: u32,
}

impl PrefixPool {
    /// Entry `k`'s length in filler units.
    pub fn tokens_of(&self, k: u32) -> u32 {
        match self.tokens.len() {
            0 => 0,
            n => self.tokens[k as usize % n],
        }
    }

    /// The longest entry, in filler units.
    pub fn longest(&self) -> u32 {
        self.tokens.iter().copied().max().unwrap_or(0)
    }

    /// The header extension's value (JOURNAL.md field 23, `prefix-pool`): format byte 1, entries
    /// u32, share_ppm u32, the lengths' count u32, each length u32, little-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8];
        out.extend_from_slice(&self.entries.to_le_bytes());
        out.extend_from_slice(&self.share_ppm.to_le_bytes());
        out.extend_from_slice(&(self.tokens.len() as u32).to_le_bytes());
        for t in &self.tokens {
            out.extend_from_slice(&t.to_le_bytes());
        }
        out
    }

    /// Reads the extension's value, each field in its range.
    pub fn decode(bytes: &[u8]) -> Result<PrefixPool, PrefixError> {
        let u32_at = |at: usize| -> Result<u32, PrefixError> {
            bytes
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or(PrefixError::CutShort {
                    at,
                    len: bytes.len(),
                })
        };
        if bytes.first() != Some(&1) {
            return Err(PrefixError::Format(bytes.first().copied()));
        }
        let (entries, share_ppm, count) = (u32_at(1)?, u32_at(5)?, u32_at(9)? as usize);
        if count == 0 || count > PREFIX_LENGTHS_MAX || bytes.len() != 13 + 4 * count {
            return Err(PrefixError::LengthsDoNotFit {
                count,
                len: bytes.len(),
            });
        }
        let tokens = (0..count)
            .map(|i| u32_at(13 + 4 * i))
            .collect::<Result<Vec<_>, _>>()?;
        let pool = PrefixPool {
            entries,
            tokens,
            share_ppm,
        };
        pool.check().map(|()| pool)
    }

    /// Each field in its range (the configuration's and the header's one check).
    pub fn check(&self) -> Result<(), PrefixError> {
        let out = |field, value: usize, max: usize| PrefixError::OutOfRange { field, value, max };
        if !(1..=PREFIX_ENTRIES_MAX).contains(&self.entries) {
            return Err(out(
                "entries",
                self.entries as usize,
                PREFIX_ENTRIES_MAX as usize,
            ));
        }
        if !(1..=SHARE_SCALE).contains(&self.share_ppm) {
            return Err(out(
                "share (ppm)",
                self.share_ppm as usize,
                SHARE_SCALE as usize,
            ));
        }
        if self.tokens.is_empty() || self.tokens.len() > PREFIX_LENGTHS_MAX {
            return Err(out("lengths", self.tokens.len(), PREFIX_LENGTHS_MAX));
        }
        match self
            .tokens
            .iter()
            .find(|t| !(1..=PREFIX_TOKENS_MAX).contains(*t))
        {
            Some(&t) => Err(out("a length", t as usize, PREFIX_TOKENS_MAX as usize)),
            None => Ok(()),
        }
    }
}

/// What is wrong with a shared-prefix pool (a configuration's, or a header's extension).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// The extension's format byte is not 1 (or there is none).
    Format(Option<u8>),
    /// The extension ends inside a field.
    CutShort {
        /// The field's first byte.
        at: usize,
        /// The extension's length.
        len: usize,
    },
    /// The lengths' count is out of range, or does not fill the rest of the extension.
    LengthsDoNotFit {
        /// The count the extension states.
        count: usize,
        /// The extension's length.
        len: usize,
    },
    /// A field outside its range.
    OutOfRange {
        /// Which field.
        field: &'static str,
        /// Its value.
        value: usize,
        /// Its largest allowed value (the smallest is 1).
        max: usize,
    },
}

impl std::fmt::Display for PrefixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrefixError::Format(byte) => write!(f, "format byte {byte:?}; this build reads 1"),
            PrefixError::CutShort { at, len } => write!(f, "cut short at byte {at} of {len}"),
            PrefixError::LengthsDoNotFit { count, len } => write!(
                f,
                "{count} lengths in {len} bytes (1..={PREFIX_LENGTHS_MAX} lengths of 4 bytes after 13)"
            ),
            PrefixError::OutOfRange { field, value, max } => {
                write!(f, "{field} {value} is outside 1..={max}")
            }
        }
    }
}

impl std::error::Error for PrefixError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(share_ppm: u32) -> PrefixPool {
        PrefixPool {
            entries: 8,
            tokens: vec![64, 256],
            share_ppm,
        }
    }

    /// The draw by hand for seed 7, session 0: d = mix(7 ^ mix(0 ^ TAG)); the entry is
    /// mix(d) mod 8 when d mod 10^6 is under the share. Checked here from the definition's
    /// parts (mix64 is SplitMix64's finalizer, pinned by the schedule's own tests).
    #[test]
    fn the_draw_is_the_documented_function_of_seed_and_session() {
        let mix = crate::schedule::mix64;
        for session in [0u64, 1, 17, 1 << 40] {
            let d = mix(7 ^ mix(session ^ 0x7072_6566_6978_0000));
            let expected = (d % 1_000_000 < 600_000).then(|| (mix(d) % 8) as u32);
            assert_eq!(
                pool(600_000).draw(7, session),
                expected,
                "session {session}"
            );
        }
        // Every session draws under a share of 1; the entries spread over the pool.
        let full = pool(SHARE_SCALE);
        let mut seen = [0u32; 8];
        for s in 0..8_000 {
            seen[full.draw(3, s).unwrap() as usize] += 1;
        }
        assert!(seen.iter().all(|&n| (850..1150).contains(&n)), "{seen:?}");
        // A share of 0.25 leaves about three quarters without.
        let quarter = (0..8_000)
            .filter(|&s| pool(250_000).draw(3, s).is_some())
            .count();
        assert!((1_850..2_150).contains(&quarter), "{quarter}");
        assert_eq!(full.tokens_of(0), 64);
        assert_eq!(full.tokens_of(3), 256);
        assert_eq!(full.longest(), 256);
    }

    /// The extension's bytes round-trip; damage and out-of-range fields are refused, each
    /// naming what is wrong.
    #[test]
    fn the_extension_round_trips_and_refuses_damage() {
        let p = pool(750_000);
        let bytes = p.encode();
        assert_eq!(bytes.len(), 13 + 8);
        assert_eq!(PrefixPool::decode(&bytes).unwrap(), p);
        assert_eq!(
            PrefixPool::decode(&bytes[..20]).unwrap_err().to_string(),
            "2 lengths in 20 bytes (1..=1000 lengths of 4 bytes after 13)"
        );
        let mut other = bytes.clone();
        other[0] = 2;
        assert_eq!(
            PrefixPool::decode(&other).unwrap_err(),
            PrefixError::Format(Some(2))
        );
        let mut zero = p.clone();
        zero.share_ppm = 0;
        assert_eq!(
            PrefixPool::decode(&zero.encode()).unwrap_err(),
            PrefixError::OutOfRange {
                field: "share (ppm)",
                value: 0,
                max: 1_000_000
            }
        );
        let mut long = p;
        long.tokens = vec![PREFIX_TOKENS_MAX + 1];
        assert_eq!(
            long.check().unwrap_err().to_string(),
            "a length 32769 is outside 1..=32768"
        );
    }
}
