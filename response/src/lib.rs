//! A response's bytes to its verdict: what the recorder's client does with every read, as plain,
//! portable code with no runtime, no socket and no clock of its own.
//!
//! [`http1`] is an incremental HTTP/1.1 response parser, [`sse`] the HTML standard's event-stream
//! parsing, and [`exchange`] one request's observation: the HTTP events in, with the times the
//! caller read them, and out the timestamps, the class (formats/JOURNAL.md) and the stream record
//! (SPEC §3). Every buffer is bounded by a pin's byte limit, and hostile input is an outcome,
//! never a panic: the `response` fuzz target (fuzz/README.md) holds it to that.
//!
//! A crate of its own so that the fuzz build, which compiles everything it links optimized and
//! instrumented in one codegen unit, rebuilds this small crate and not the recorder's runtime when
//! the recorder changes (BENCHMARKS.md "The test suite's time").

#![warn(missing_docs)]

pub mod exchange;
pub mod http1;
pub mod sse;
