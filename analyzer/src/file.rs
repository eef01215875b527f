//! A journal file mapped read-only into memory.

use std::fmt;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use percentes_formats::journal::records::{DecodeError, Record};
use percentes_formats::journal::verify::{self, Framed, VerifyOptions, VerifyReport};
use percentes_formats::journal::Header;

/// While verifying, pages behind the verified offset are handed back every this many bytes, so a
/// journal of any size is verified in flat memory.
pub const RELEASE_EVERY_BYTES: u64 = 64 << 20;

/// Why a journal file could not be opened.
#[derive(Debug)]
pub struct OpenError {
    /// The file.
    pub path: PathBuf,
    /// What the operating system said.
    pub source: std::io::Error,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot open journal {}: {}",
            self.path.display(),
            self.source
        )
    }
}

/// The operating system's words are already in the sentence, so no source is chained: a
/// caller printing the chain (`{:#}`) would say them twice.
impl std::error::Error for OpenError {}

/// The journal files a run is read from: one, or a merged run's shards in index order.
#[derive(Clone, Copy, Debug)]
pub struct Files<'a>(pub &'a [JournalFile]);

impl<'a> From<&'a JournalFile> for Files<'a> {
    fn from(file: &'a JournalFile) -> Files<'a> {
        Files(std::slice::from_ref(file))
    }
}

impl<'a> From<&'a [JournalFile]> for Files<'a> {
    fn from(files: &'a [JournalFile]) -> Files<'a> {
        Files(files)
    }
}

impl<'a> From<&'a Vec<JournalFile>> for Files<'a> {
    fn from(files: &'a Vec<JournalFile>) -> Files<'a> {
        Files(files)
    }
}

/// An open journal. The map is read-only; the file must not be truncated while it is open
/// (appending, as a running recorder does, is fine: the map covers the length seen at open).
#[derive(Debug)]
pub struct JournalFile {
    path: PathBuf,
    map: Option<Mmap>,
}

impl JournalFile {
    /// Maps the file. An empty file maps to no bytes (it verifies as not-a-journal).
    pub fn open(path: &Path) -> Result<JournalFile, OpenError> {
        let error = |source| OpenError {
            path: path.to_owned(),
            source,
        };
        // A device or FIFO is refused unopened (a FIFO's open waits for a writer).
        let file = percentes_formats::files::open_regular(path).map_err(error)?;
        let len = file.metadata().map_err(error)?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is read-only and private to this process. A concurrent truncation of
            // the file by another process would fault on access; journals are append-only and
            // the documentation says not to truncate one that is being read.
            #[allow(unsafe_code)]
            let map = unsafe { Mmap::map(&file) }.map_err(error)?;
            // Sequential read-ahead; a failure only costs speed. madvise is a Unix call: on
            // other systems the map is read without the hint.
            #[cfg(unix)]
            let _ = map.advise(memmap2::Advice::Sequential);
            Some(map)
        };
        Ok(JournalFile {
            path: path.to_owned(),
            map,
        })
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Verifies the journal, releasing verified pages as it goes.
    pub fn verify(&self, options: &VerifyOptions) -> VerifyReport {
        let mut released = 0u64;
        let mut release = |verified: u64| {
            if verified - released >= RELEASE_EVERY_BYTES {
                self.release(released, verified);
                released = verified;
            }
        };
        let report = verify::verify_with_progress(self.bytes(), options, &mut release);
        self.release(0, self.bytes().len() as u64);
        report
    }

    /// The header, its length and the chain's first value, if the header decodes.
    pub fn header(&self) -> Option<(Header, usize)> {
        Header::decode(self.bytes())
            .ok()
            .map(|(h, len, _)| (h, len))
    }

    /// The framed records of the verified prefix, in order, not yet decoded (a reader that wants
    /// only some kinds decodes only those).
    pub fn framed<'a>(&'a self, report: &VerifyReport) -> impl Iterator<Item = Framed<'a>> + 'a {
        let header_end = self
            .header()
            .map(|(_, len)| len)
            .unwrap_or(self.bytes().len());
        verify::records(self.bytes(), header_end, report.verified_bytes as usize)
    }

    /// The records of the verified prefix, decoded, in order. Decoding errors are returned per
    /// record (a kind written by a later version is [`Record::Unknown`], not an error).
    pub fn records<'a>(
        &'a self,
        report: &VerifyReport,
    ) -> impl Iterator<Item = (Framed<'a>, Result<Record, DecodeError>)> + 'a {
        let header_end = self
            .header()
            .map(|(_, len)| len)
            .unwrap_or(self.bytes().len());
        verify::records(self.bytes(), header_end, report.verified_bytes as usize)
            .map(|framed| (framed, Record::decode(framed.kind, framed.body)))
    }

    /// Hands back the pages before `offset` (a reader that moves forward calls this as it goes).
    pub(crate) fn release_before(&self, offset: u64) {
        self.release(0, offset);
    }

    /// Tells the kernel the pages of `[from, to)` will not be needed soon. Only Unix has the
    /// call; elsewhere the operating system reclaims the pages of a read-only map on its own.
    #[cfg(not(unix))]
    fn release(&self, _from: u64, _to: u64) {}

    /// Tells the kernel the pages of `[from, to)` will not be needed soon.
    #[cfg(unix)]
    fn release(&self, from: u64, to: u64) {
        let Some(map) = &self.map else { return };
        let page = 4096u64;
        let start = from.div_ceil(page) * page;
        let end = (to.min(map.len() as u64) / page) * page;
        if end > start {
            // SAFETY: MADV_DONTNEED on a read-only file-backed mapping only drops this process's
            // page-table entries; a later access reads the same bytes back from the file. No
            // reference into the range is invalidated in content.
            #[allow(unsafe_code)]
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start as usize,
                    (end - start) as usize,
                )
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use percentes_formats::journal::{synthetic, Verdict};

    #[test]
    fn open_verify_and_decode_a_file() {
        let dir = percentes_testkit::Scratch::new("analyzer");
        let path = dir.join("small.pj");
        std::fs::write(&path, synthetic::small_sealed()).unwrap();
        let journal = JournalFile::open(&path).unwrap();
        let report = journal.verify(&Default::default());
        assert_eq!(report.verdict, Verdict::SealedIntact);
        let decoded: Vec<_> = journal.records(&report).collect();
        assert_eq!(decoded.len() as u64, report.records);
        assert!(decoded.iter().all(|(_, r)| r.is_ok()));

        let empty = dir.join("empty.pj");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(
            JournalFile::open(&empty)
                .unwrap()
                .verify(&Default::default())
                .verdict,
            Verdict::NotAJournal
        );
        let missing = JournalFile::open(&dir.join("missing.pj")).unwrap_err();
        assert!(missing.to_string().contains("missing.pj"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
