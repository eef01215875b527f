//! The mock inference server that percentes is certified against (SPEC §8), and the pieces of the
//! local testbed.
//!
//! The mock speaks enough of the OpenAI API for a load test (`POST /v1/chat/completions` and
//! `/v1/completions`, streaming as SSE or not, `max_tokens`, `ignore_eos`), behaves like a
//! serving engine under overload (at most `max_num_seqs` sequences decode at once, the rest wait
//! in a FIFO queue, per-token time grows with occupancy), draws its timings from seeded analytic
//! distributions whose quantiles are known, and fails on purpose in precisely defined ways, each
//! fault leaving an audit record (armed, fired, expired) on the mock's monotonic clock.
//!
//! It is a portable test server, not part of the measurement path: it may use tokio, and it never
//! depends on the recorder or the analyzer.
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use percentes_scenarios::{config::MockConfig, mock};
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8000").await?;
//! mock::serve(listener, mock::Mock::new(MockConfig::default())).await
//! # }
//! ```

pub mod config;
pub mod http;
pub mod mock;
pub mod router;
pub mod testbed;
pub mod timing;

/// Blocks until Ctrl-C (SIGINT), for foreground commands that must clean up after themselves.
pub fn wait_for_ctrl_c() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())
}
