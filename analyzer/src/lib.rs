//! The analyzer side of percentes: reads journals on any OS.
//!
//! Today this crate opens a journal through a read-only memory map, verifies it (the chain, the
//! checkpoints, the signatures and the seal, by [`percentes_formats::journal::verify`]) and decodes
//! its records; and [`estimate`] holds the estimators of SPEC §3 and §7 (the Aalen-Johansen
//! completion curve and its v0.1 Kaplan-Meier predecessor, quantile readings with their refusals,
//! order-statistic tail intervals). Windows, frames, goodput, gates and reports build on these. It has no io_uring, no network and no clock in its dependency tree, so a
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

#![warn(missing_docs)]

pub mod analysis;
pub mod campaign;
pub mod compare;
pub mod escape;
pub mod estimate;
pub mod export;
pub mod figures;
mod file;
pub mod frame;
pub mod gates;
pub mod headline;
pub mod html;
pub mod load;
pub mod model;
pub mod plots;
pub mod query;
pub mod recovery;
pub mod report;
pub mod server;
pub mod shards;
pub mod summaries;
pub mod sweep;
pub mod windows;
pub mod words;

pub use file::{Files, JournalFile, OpenError, RELEASE_EVERY_BYTES};
