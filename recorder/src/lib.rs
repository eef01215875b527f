//! The recorder: sends every scheduled request at its intended time, open loop, and writes what
//! happened to the journal (SPEC §1, §2, §J).
//!
//! What a response's bytes mean (the HTTP/1.1 and event-stream parsers, and the classification of
//! one request's fate) is the portable crate [`percentes_response`], which every client here
//! feeds its reads: HTTP/1.1 on the worker's ring, HTTP/2 through h2, the simulator's scripted
//! target. The runtime parts (the pacer, the client on io_uring, the journal writer thread,
//! self-check telemetry) are Linux only.
//!
//! What it is not for: statistics. The recorder computes nothing beyond its live progress line;
//! the analyzer reads the journal.

#![warn(missing_docs)]

#[cfg(target_os = "linux")]
pub mod canary;
pub mod error;
#[cfg(target_os = "linux")]
pub mod events;
pub mod images;
pub mod probe;
pub mod prompts;
pub mod request;
#[cfg(target_os = "linux")]
pub mod run;
#[cfg(all(test, target_os = "linux"))]
mod tls_tests;
pub mod tokens;
#[cfg(target_os = "linux")]
pub mod watch;

pub use error::{ErrorKind, RecordError};
