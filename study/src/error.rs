//! The study's error: what could not be done, with its context and the error beneath it.
//!
//! A study arranges an experiment around the recorder and the analyzer; failures of the target
//! are measurements and never errors. What remains are the ways the arrangement itself fails: a
//! scenario or configuration the study refuses, a file or process it cannot make, the recorder
//! or the analyzer refusing a run. Each carries a sentence in the study's words and the error
//! beneath it, so `{:#}` prints the whole chain.

use std::fmt;

/// Which part of the arrangement failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The input cannot run as given: a scenario file, a configuration, an option, a folder
    /// that holds other files. The message says what to change.
    Refused,
    /// A file, folder or process the study needs could not be made or read.
    Io,
    /// The recorder could not record (its own error is the source).
    Record,
    /// A journal could not be loaded for analysis (its own error is the source).
    Analyze,
}

/// Why a study could not be run.
#[derive(Debug)]
pub struct StudyError {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl StudyError {
    /// An error of `kind` with nothing beneath it.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> StudyError {
        StudyError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// A refusal: the input cannot run as given.
    pub fn refused(message: impl Into<String>) -> StudyError {
        StudyError::new(ErrorKind::Refused, message)
    }

    /// Which part failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    fn with_source(
        kind: ErrorKind,
        message: String,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    ) -> StudyError {
        StudyError {
            kind,
            message,
            source: Some(source),
        }
    }
}

impl fmt::Display for StudyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        // The alternate form ({:#}) prints the chain beneath, as the binary does.
        if f.alternate() {
            let mut next = self.source.as_deref().map(|s| s as &dyn std::error::Error);
            // Converted without a context of its own, the message is the source's: say it once.
            if next.is_some_and(|s| s.to_string() == self.message) {
                next = next.and_then(|s| s.source());
            }
            while let Some(error) = next {
                write!(f, ": {error}")?;
                next = error.source();
            }
        }
        Ok(())
    }
}

impl std::error::Error for StudyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// The kind an error beneath a study error gives it when no context names one.
trait Kinded {
    fn kind() -> ErrorKind;
}

macro_rules! from_error {
    ($($t:ty => $kind:ident),* $(,)?) => {$(
        impl Kinded for $t {
            fn kind() -> ErrorKind {
                ErrorKind::$kind
            }
        }
        impl From<$t> for StudyError {
            fn from(error: $t) -> StudyError {
                StudyError::with_source(ErrorKind::$kind, error.to_string(), Box::new(error))
            }
        }
    )*};
}

from_error! {
    std::io::Error => Io,
    percentes_formats::config::ConfigError => Refused,
    serde_json::Error => Io,
    toml::ser::Error => Io,
    toml::de::Error => Refused,
    std::str::Utf8Error => Refused,
}

#[cfg(target_os = "linux")]
from_error! {
    percentes_recorder::run::RecordError => Record,
    percentes_analyzer::load::LoadError => Analyze,
    percentes_analyzer::OpenError => Analyze,
}

/// The result of a study step.
pub type Result<T, E = StudyError> = std::result::Result<T, E>;

/// Context for a failed step: the sentence that says what the study was doing.
pub(crate) trait Context<T> {
    /// Wraps the error in `message`.
    fn context(self, message: impl Into<String>) -> Result<T>;
    /// Wraps the error in the message `f` makes (only on failure).
    fn with_context<M: Into<String>>(self, f: impl FnOnce() -> M) -> Result<T>;
}

impl<T, E> Context<T> for std::result::Result<T, E>
where
    E: std::error::Error + Send + Sync + 'static + Kinded,
{
    fn context(self, message: impl Into<String>) -> Result<T> {
        self.map_err(|e| StudyError::with_source(E::kind(), message.into(), Box::new(e)))
    }
    fn with_context<M: Into<String>>(self, f: impl FnOnce() -> M) -> Result<T> {
        self.map_err(|e| StudyError::with_source(E::kind(), f().into(), Box::new(e)))
    }
}

impl Kinded for StudyError {
    fn kind() -> ErrorKind {
        ErrorKind::Refused
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, message: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| StudyError::refused(message))
    }
    fn with_context<M: Into<String>>(self, f: impl FnOnce() -> M) -> Result<T> {
        self.ok_or_else(|| StudyError::refused(f()))
    }
}

/// Returns a refusal made from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::StudyError::refused(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternate_form_prints_the_chain_and_the_plain_form_the_sentence() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e: Result<()> = Err(io).context("cannot read scenario x.toml");
        let e = e.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), "cannot read scenario x.toml");
        assert_eq!(
            format!("{e:#}"),
            "cannot read scenario x.toml: no such file"
        );
    }

    #[test]
    fn a_bare_conversion_does_not_print_its_message_twice() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let e = StudyError::from(io);
        assert_eq!(format!("{e:#}"), "denied");
        let none: Option<u8> = None;
        let e = none.context("target.replicas is empty").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Refused);
    }
}
