//! The analyzer side of percentes: reads journals on any OS.
//!
//! Today this crate opens a journal through a read-only memory map, verifies it (the chain, the
//! checkpoints, the signatures and the seal, by [`percentes_formats::journal::verify`]) and decodes
//! its records. The estimators of SPEC §3-§7 (windows, Aalen-Johansen, refusals, tails, gates) are
//! built on this reader. It has no io_uring, no network and no clock in its dependency tree, so a
//! journal captured on a Linux cluster can be audited and re-analyzed anywhere, years later.
//!
//! What it is not for: writing journals (the recorder does that through `formats`).
//!
//! ```no_run
//! use percentes_analyzer::JournalFile;
//! let journal = JournalFile::open("run.pj".as_ref()).unwrap();
//! let report = journal.verify(&Default::default());
//! println!("{}", report.verdict.name());
//! ```

mod file;

pub use file::{JournalFile, OpenError, RELEASE_EVERY_BYTES};
