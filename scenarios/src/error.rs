//! The scenarios crate's error: a mock, router or testbed that could not be set up as asked.
//!
//! The mock's answers to a client (a 400 for a body it cannot read, the faults it plays) are
//! responses, not errors of this kind; what remains are inputs refused (a configuration, a
//! flag, a request body the mock answers 400), files that could not be read or written, and a
//! testbed that could not start. Each carries its sentence, which names the key, flag or file.

use std::fmt;

/// What failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input cannot be used as given: a configuration value out of its domain, a
    /// configuration that does not parse, a malformed flag, a request body the mock cannot read.
    Refused,
    /// A file could not be read or written.
    Io,
    /// The testbed's processes could not be started.
    Start,
}

/// Why a mock, router or testbed could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind`, said by `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// A refusal of the input; `message` names what to change.
    pub fn refused(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Refused, message)
    }

    /// What failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same error, its sentence after `context` (a file's name, a key's table).
    pub fn within(self, context: impl fmt::Display) -> Error {
        Error {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
