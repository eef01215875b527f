//! The recorder's error ([`RecordError`]): why a run could not be done, or an input the recorder
//! was given (a configuration's target, a prompt set, a tokenizer) could not be used. The
//! target's failures are outcomes in the journal, never errors. Each carries its kind ([`ErrorKind`]), for a
//! caller or a test to act on, a sentence that says what and what to do, and the error beneath
//! it where there is one (`{:#}` prints the chain, as the study's errors do).

use std::fmt;
use std::path::Path;

use percentes_formats::journal::WriteError;

/// Which part of a recording failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The configuration, a flag or a file it names cannot be run as given: the target's URL,
    /// the shard, the plan, a prompt set or tokenizer, a secret's variable, the TLS trust
    /// anchors, the fault's set-up. The sentence says what to change.
    Config,
    /// This host cannot record it: io_uring refused, `--cpus` outside what the process may use,
    /// too few descriptors for the connection floor, an accelerator collector that fails, the
    /// host check's verdict, an events socket path in use.
    Host,
    /// The target, asked before the journal exists, cannot be recorded: the pre-flight (it does
    /// not answer, does not serve the model, refuses the protocol asked for).
    Target,
    /// A shard cannot start at the agreed epoch (passed, or too far ahead; SPEC §2 "Sharded
    /// capture").
    Start,
    /// A file, socket or thread the recorder needs could not be made.
    Io,
    /// The journal writer failed; the run was stopped and the journal sealed aborted.
    Journal,
    /// The writer failed and the seal could not be written either: the file holds a verifiable
    /// prefix (`unsealed-prefix`), nothing more.
    Unsealed,
    /// A thread of the recorder failed (a panic): the recorder's defect, never the run's.
    Internal,
}

/// Why a run could not be done. Failures of the target are outcomes, never errors.
#[derive(Debug)]
pub struct RecordError {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl RecordError {
    /// An error of `kind`, said by `message`, with nothing beneath it.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> RecordError {
        RecordError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// An error of `kind`, said by `message`, with `source` beneath it.
    pub(crate) fn caused(
        kind: ErrorKind,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> RecordError {
        RecordError {
            kind,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The configuration cannot be run as given.
    pub(crate) fn config(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Config, message)
    }

    /// The target, asked before the journal exists, cannot be recorded.
    pub(crate) fn target(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Target, message)
    }

    /// This host cannot record it.
    pub(crate) fn host(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Host, message)
    }

    /// The journal writer failed.
    pub(crate) fn journal(error: WriteError) -> RecordError {
        RecordError::caused(ErrorKind::Journal, error.to_string(), error)
    }

    /// The writer failed with `cause`, and the seal with `seal`: `output` holds a prefix.
    pub(crate) fn unsealed(output: &Path, cause: &str, seal: WriteError) -> RecordError {
        RecordError::caused(
            ErrorKind::Unsealed,
            format!(
                "the journal writer failed ({cause}) and the seal could not be written ({seal}): dispatch was stopped at once; {} holds a verifiable prefix (`percentes verify` says unsealed-prefix) and cannot be published",
                output.display()
            ),
            seal,
        )
    }

    /// Which part failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        // An I/O error's sentence says what the recorder was doing; the OS's words follow.
        if self.kind == ErrorKind::Io {
            if let Some(source) = &self.source {
                write!(f, ": {source}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// The error of an I/O failure while the recorder was doing `what`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::caused(ErrorKind::Io, what, source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_says_what_and_keeps_its_kind_and_what_lies_beneath() {
        let e = io("cannot create the journal")(std::io::Error::other("no space left"));
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(
            e.to_string().starts_with("cannot create the journal: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = RecordError::unsealed(Path::new("run.pj"), "disk full", WriteError::ControlRecord);
        assert_eq!(e.kind(), ErrorKind::Unsealed);
        assert!(
            e.to_string().contains("run.pj holds a verifiable prefix"),
            "{e}"
        );
        assert_eq!(RecordError::config("x").kind(), ErrorKind::Config);
    }
}
