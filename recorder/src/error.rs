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
    /// A name the recorder looks up itself (a replica's SRV or host name) gave no address: the
    /// nameserver unreachable or silent, no such name, an answer cut short or malformed. A
    /// probe or a scrape journals it as what it found; the run goes on.
    Lookup,
    /// A server's answer to one of the recorder's own side requests (a health probe, a metrics
    /// scrape, a fault's confirmation) could not be had or read: no connection, no complete
    /// answer in time, a status other than 200, a malformed head or body. Journaled as what the
    /// probe or scrape found, never a request's outcome.
    Answer,
    /// The protocol could not carry what was asked: a response head that is not HTTP/1.1, or
    /// HTTP/2 declined in ALPN where `target.http = "2"` asked for it, its handshake or an
    /// exchange failed, a request's bytes that cannot be carried as HTTP/2, a connection flooded
    /// with control frames. In a request it becomes that request's error class; before the
    /// journal, the pre-flight's refusal.
    Protocol,
    /// A timeline event from outside (`percentes event`, `--events-socket`) was refused or not
    /// delivered: not an event, a subject no timeline has, a time outside the run, no recorder
    /// listening, the recorder's refusal. Said to the sender; nothing is journaled.
    Event,
    /// The fault could not be fired or removed as planned: its pid file names no process that
    /// may be killed, the signal failed, the mock's admin endpoint refused. Journaled as a
    /// `fault-failed` event; the run ends escaped when the impact goes unconfirmed.
    Fault,
    /// A helper program (kubectl, a fault's command, an accelerator collector) could not be
    /// started, ran past its time or exited with a failure; the sentence quotes what it said.
    Command,
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

    /// The configuration cannot be run as given: a sentence, or a typed refusal's words.
    pub(crate) fn config(why: impl std::fmt::Display) -> RecordError {
        RecordError::new(ErrorKind::Config, why.to_string())
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

    /// A name the recorder looks up itself gave no address ([`ErrorKind::Lookup`]).
    pub(crate) fn lookup(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Lookup, message)
    }

    /// A side request's answer could not be had or read ([`ErrorKind::Answer`]).
    pub(crate) fn answer(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Answer, message)
    }

    /// The protocol could not carry what was asked ([`ErrorKind::Protocol`]).
    pub(crate) fn protocol(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Protocol, message)
    }

    /// A timeline event from outside was refused or not delivered ([`ErrorKind::Event`]).
    pub(crate) fn event(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Event, message)
    }

    /// The fault could not be fired or removed as planned ([`ErrorKind::Fault`]).
    pub(crate) fn fault(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Fault, message)
    }

    /// A helper program failed ([`ErrorKind::Command`]).
    pub(crate) fn command(message: impl Into<String>) -> RecordError {
        RecordError::new(ErrorKind::Command, message)
    }

    /// The same error, its sentence opened by where it happened (`health`, `SRV NAME`):
    /// `"{place}: {sentence}"`.
    pub(crate) fn at(mut self, place: impl std::fmt::Display) -> RecordError {
        self.message = format!("{place}: {}", self.message);
        self
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
