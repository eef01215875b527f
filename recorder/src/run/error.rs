//! Why a run could not be done ([`RecordError`]): the recorder's own failures, never the
//! target's (those are outcomes in the journal).

use std::path::PathBuf;

use percentes_formats::journal::WriteError;

/// Why a run could not be done. Failures of the target are outcomes, never errors.
#[derive(Debug)]
pub enum RecordError {
    /// The configuration or the target cannot be run: what and why.
    Refused(String),
    /// A file or thread could not be made.
    Io {
        /// What the recorder was doing.
        what: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The journal writer failed.
    Journal(WriteError),
    /// The writer failed and the seal could not be written either: the file holds a verifiable
    /// prefix (`unsealed-prefix`), nothing more.
    Unsealed {
        /// The journal.
        output: PathBuf,
        /// The first failure.
        cause: String,
        /// Why the seal failed.
        seal: WriteError,
    },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Refused(why) => write!(f, "{why}"),
            RecordError::Io { what, source } => write!(f, "{what}: {source}"),
            RecordError::Journal(e) => write!(f, "{e}"),
            RecordError::Unsealed { output, cause, seal } => write!(
                f,
                "the journal writer failed ({cause}) and the seal could not be written ({seal}): dispatch was stopped at once; {} holds a verifiable prefix (`percentes verify` says unsealed-prefix) and cannot be published",
                output.display()
            ),
        }
    }
}

impl std::error::Error for RecordError {}

pub(super) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::Io { what, source }
}
