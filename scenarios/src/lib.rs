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

#![warn(missing_docs)]

pub use error::{Error, ErrorKind};

pub mod config;
pub mod error;
pub mod exposition;
pub mod http;
pub mod mock;
pub mod netns;
pub mod router;
pub mod testbed;
pub mod timing;

/// Starts a server on an ephemeral loopback port, on a runtime of its own (`workers` threads) in a
/// background thread. `make` builds the shared state inside the runtime (the mock arms its faults
/// as tasks); `serve` runs until the process ends. Returns the address and the state.
fn spawn_background<S, M, F, Fut>(
    name: String,
    workers: usize,
    make: M,
    serve: F,
) -> std::io::Result<(std::net::SocketAddr, std::sync::Arc<S>)>
where
    S: Send + Sync + 'static,
    M: FnOnce() -> std::sync::Arc<S> + Send + 'static,
    F: FnOnce(tokio::net::TcpListener, std::sync::Arc<S>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new().name(name).spawn(move || {
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => return drop(tx.send(Err(e))),
        };
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
                Ok(l) => l,
                Err(e) => return drop(tx.send(Err(e))),
            };
            let state = make();
            let _ = tx.send(
                listener
                    .local_addr()
                    .map(|a| (a, std::sync::Arc::clone(&state))),
            );
            let _ = serve(listener, state).await;
        });
    })?;
    rx.recv()
        .map_err(|_| std::io::Error::other("the server thread ended before it listened"))?
}

/// Blocks until Ctrl-C (SIGINT), for foreground commands that must clean up after themselves.
pub fn wait_for_ctrl_c() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(tokio::signal::ctrl_c())
}
