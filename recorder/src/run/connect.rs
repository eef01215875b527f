//! Opening a connection to the target ([`Dialer`]: TCP, then TLS, within the connect budget and
//! the request's deadline), the connection itself ([`Conn`]), and the verdicts of a connect or a
//! transport that failed.

use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use compio::io::{AsyncRead, AsyncWriteExt};
use compio::net::TcpStream;
use compio::tls::{TlsConnector, TlsStream};
use compio::BufResult;
use percentes_formats::config::{Config, HttpVersion};
use percentes_formats::journal::records::RequestRecord;

use super::host::now_ns;
use super::plan::RunPlan;
use crate::request::Target;
use percentes_response::exchange::Verdict;

/// A connection: plain TCP or TLS over TCP.
pub(super) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    pub(super) async fn read(&mut self, buf: Vec<u8>) -> BufResult<usize, Vec<u8>> {
        match self {
            Conn::Plain(s) => s.read(buf).await,
            Conn::Tls(s) => s.read(buf).await,
        }
    }
    pub(super) async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        match self {
            Conn::Plain(s) => s.write_all(buf).await,
            Conn::Tls(s) => {
                // TLS buffers inside the session: the request leaves only when flushed.
                let BufResult(written, buf) = s.write_all(buf).await;
                match written {
                    Ok(()) => BufResult(compio::io::AsyncWrite::flush(&mut **s).await, buf),
                    Err(e) => BufResult(Err(e), buf),
                }
            }
        }
    }
}

/// How to reach the target: the address, and TLS when the URL is https.
#[derive(Clone)]
pub(super) struct Dialer {
    pub(super) address: String,
    pub(super) tls: Option<TlsConnector>,
    pub(super) server_name: String,
    /// The pinned connect budget (SPEC §2, `client.connect_budget_s`).
    pub(super) budget: Duration,
    /// The HTTP version its connections speak (`target.http`).
    pub(super) http: HttpVersion,
}

impl Dialer {
    /// The dialer of `config`'s target: its address, TLS (`tls`, made by the caller once) and
    /// server name, the plan's connect budget and HTTP version.
    pub(super) fn of(
        config: &Config,
        target: &Target,
        plan: &RunPlan,
        tls: Option<TlsConnector>,
    ) -> Dialer {
        Dialer {
            address: target.address.clone(),
            tls,
            server_name: config
                .target
                .tls
                .server_name
                .clone()
                .unwrap_or_else(|| target.host.clone()),
            budget: plan.connect_budget,
            http: plan.http,
        }
    }
}

impl Dialer {
    /// Opens a connection (and its TLS session for https), recording connect and TLS times,
    /// within the connect budget (and within `deadline`, if sooner). A server that accepts and
    /// then never answers the handshake (an https URL to a plain-HTTP port) costs at most that.
    pub(super) async fn open(
        &self,
        epoch: Instant,
        deadline: Option<Instant>,
        mut record: Option<&mut RequestRecord>,
    ) -> Result<(Conn, RawFd), OpenError> {
        let start = Instant::now();
        let budget_end = start + self.budget;
        let until = deadline.map_or(budget_end, |d| d.min(budget_end));
        let at_deadline = until < budget_end;
        let allowed = until.saturating_duration_since(start);
        let tcp_done = Cell::new(false);
        let attempt =
            async {
                if let Some(r) = record.as_deref_mut() {
                    r.connect_start_ns = Some(now_ns(epoch));
                }
                let stream = TcpStream::connect(self.address.as_str())
                    .await
                    .map_err(|error| OpenError {
                        error,
                        in_tls: false,
                        at_deadline: false,
                    })?;
                let _ = stream.set_nodelay(true);
                let fd = stream.as_raw_fd();
                super::host::note_descriptor(fd);
                tcp_done.set(true);
                if let Some(r) = record.as_deref_mut() {
                    r.connect_end_ns = Some(now_ns(epoch));
                }
                match &self.tls {
                    None => Ok((Conn::Plain(stream), fd)),
                    Some(connector) => {
                        let tls = connector.connect(&self.server_name, stream).await.map_err(
                            |error| OpenError {
                                error,
                                in_tls: true,
                                at_deadline: false,
                            },
                        )?;
                        if let Some(r) = record.as_deref_mut() {
                            r.tls_done_ns = Some(now_ns(epoch));
                        }
                        Ok((Conn::Tls(Box::new(tls)), fd))
                    }
                }
            };
        match compio::time::timeout_at(until, attempt).await {
            Ok(result) => result,
            Err(_) => Err(OpenError {
                in_tls: tcp_done.get(),
                at_deadline,
                error: std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "{} took longer than {:?} (the connect budget, SPEC §2, or the request's deadline)",
                        if tcp_done.get() { "the TLS handshake" } else { "the TCP connect" },
                        allowed
                    ),
                ),
            }),
        }
    }
}

/// Why a connection could not be opened.
pub(super) struct OpenError {
    pub(super) error: std::io::Error,
    /// The TCP connect succeeded; the TLS handshake failed.
    pub(super) in_tls: bool,
    /// It was cut short by the request's own deadline, not by the connect budget: the request
    /// timed out (censored), the connect did not fail (one cause, one class: SPEC §3).
    pub(super) at_deadline: bool,
}

/// A connect failure that never reached the target (the client ran out of something): the
/// request was not dispatched.
pub(super) fn local_exhaustion(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM | libc::EADDRNOTAVAIL)
    )
}

pub(super) fn connect_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => Verdict::errored("refused", e.to_string()),
        ConnectionReset | ConnectionAborted => Verdict::errored("reset", e.to_string()),
        _ if e.to_string().contains("lookup") || e.kind() == NotFound => {
            Verdict::errored("dns", e.to_string())
        }
        _ => Verdict::errored("connect", e.to_string()),
    }
}

pub(super) fn transport_verdict(e: &std::io::Error) -> Verdict {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionReset | ConnectionAborted | BrokenPipe => {
            Verdict::errored("reset", e.to_string())
        }
        _ => Verdict::errored("premature-close", e.to_string()),
    }
}
