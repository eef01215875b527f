//! The adapter between compio's completion-based connections and the poll-based tokio I/O
//! traits the `h2` crate drives (issue 17; SPEC §2 "HTTP/2").
//!
//! compio already offers a connection through the futures-io traits: its TLS stream implements
//! them, and `compio::io::compat::AsyncStream` wraps a plain TCP stream in them (an owned read
//! buffer refilled by io_uring reads, writes buffered and submitted on flush). h2 wants tokio's
//! `AsyncRead` and `AsyncWrite`, which differ only in how a read hands its buffer over;
//! [`TokioIo`] translates that and nothing else. No thread, runtime or timer of tokio's is
//! involved: h2's connection future runs as a compio task on the worker's own ring.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use compio::io::compat::AsyncStream;
use compio::net::TcpStream;
use compio::tls::TlsStream;
use futures_io::{AsyncRead as FuturesRead, AsyncWrite as FuturesWrite};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::RecordError;

/// SPEC §2 "HTTP/2": SETTINGS and PING frames a server may send on one connection within a
/// second; h2 acknowledges each one it reads, without a limit of its own.
pub(super) const CONTROL_FRAMES_PER_S_MAX: u32 =
    percentes_formats::pins::value::CLIENT_H2_CONTROL_FRAMES_PER_S_MAX as u32;

/// The words that begin the error a control-frame flood ends a connection with; the stream
/// verdicts find it by them (h2 hands a stream its connection's I/O error as kind and text).
pub(super) const FLOOD_WORDS: &str = "HTTP/2 control-frame flood";

/// HTTP/2 frame types the watch counts (RFC 9113 §6.5, §6.7) and the ACK flag both share.
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const ACK: u8 = 0x1;

/// Follows the HTTP/2 frames a server sends (from the first byte: a server's preface is its
/// SETTINGS frame) by their 9-byte headers, and counts the SETTINGS and PING frames that ask for
/// an acknowledgement. More than [`CONTROL_FRAMES_PER_S_MAX`] within a second of real time is a
/// flood: the connection ends, as a server would end one for a client that floods it.
#[derive(Debug, Default)]
pub(super) struct ControlWatch {
    header: [u8; 9],
    /// Header bytes gathered so far.
    have: usize,
    /// Payload bytes of the current frame still to pass.
    skip: u64,
    /// The second the count belongs to, from its first counted frame.
    since: Option<Instant>,
    count: u32,
}

impl ControlWatch {
    /// Passes `bytes` (the next the server sent), read at `now`. `Err` with what was seen once
    /// the count passes the limit.
    pub(super) fn scan(&mut self, mut bytes: &[u8], now: Instant) -> Result<(), RecordError> {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len() as u64);
                self.skip -= n;
                bytes = &bytes[n as usize..];
                continue;
            }
            let n = (self.header.len() - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have < self.header.len() {
                break;
            }
            self.have = 0;
            let [a, b, c, kind, flags, ..] = self.header;
            self.skip = u64::from(u32::from_be_bytes([0, a, b, c]));
            if (kind == SETTINGS || kind == PING) && flags & ACK == 0 {
                self.count(kind, now)?;
            }
        }
        Ok(())
    }

    fn count(&mut self, kind: u8, now: Instant) -> Result<(), RecordError> {
        match self.since {
            Some(since) if now.saturating_duration_since(since) < Duration::from_secs(1) => {
                self.count += 1
            }
            _ => (self.since, self.count) = (Some(now), 1),
        }
        if self.count > CONTROL_FRAMES_PER_S_MAX {
            let name = if kind == PING { "PING" } else { "SETTINGS" };
            return Err(RecordError::protocol(format!(
                "{FLOOD_WORDS}: the server sent more than {CONTROL_FRAMES_PER_S_MAX} SETTINGS and PING frames within a second (the last a {name}), SPEC §2's limit; the client ended the connection"
            )));
        }
        Ok(())
    }
}

/// A futures-io stream seen through tokio's I/O traits, its incoming frames watched.
pub(super) struct TokioIo<T> {
    io: T,
    watch: ControlWatch,
}

impl<T> TokioIo<T> {
    pub(super) fn new(io: T) -> TokioIo<T> {
        TokioIo {
            io,
            watch: ControlWatch::default(),
        }
    }
}

impl<T: FuturesRead + Unpin> AsyncRead for TokioIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let unfilled = buf.initialize_unfilled();
        match Pin::new(&mut this.io).poll_read(cx, unfilled) {
            Poll::Ready(Ok(n)) => {
                if let Err(why) = this.watch.scan(&unfilled[..n], Instant::now()) {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
                }
                buf.advance(n);
                Poll::Ready(Ok(()))
            }
            // A TLS peer that closes without close_notify: the end of the stream, as compio's
            // own TLS read treats it; h2 then sees a connection that ended.
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: FuturesWrite + Unpin> AsyncWrite for TokioIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_close(cx)
    }
}

/// An HTTP/2 connection's transport: cleartext TCP (h2c) or TLS, through the futures-io traits.
pub(super) enum Transport {
    /// Prior knowledge over TCP. Boxed and pinned: compio's adapter is self-referential.
    Plain(Pin<Box<AsyncStream<TcpStream>>>),
    /// ALPN `h2` over TLS.
    Tls(Box<TlsStream<TcpStream>>),
}

impl Transport {
    /// Cleartext TCP through compio's futures-io adapter.
    pub(super) fn plain(stream: TcpStream) -> Transport {
        Transport::Plain(Box::pin(AsyncStream::new(stream)))
    }
}

impl FuturesRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => s.as_mut().poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl FuturesWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => s.as_mut().poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => s.as_mut().poll_write_vectored(cx, bufs),
            Transport::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => s.as_mut().poll_flush(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => s.as_mut().poll_close(cx),
            Transport::Tls(s) => Pin::new(&mut **s).poll_close(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Bytes written through the adapter arrive, bytes the peer sends are read back in order
    /// across reads of any size, and the peer's close reads as the end of the stream, on a real
    /// compio TCP connection driven by io_uring.
    #[test]
    fn the_adapter_carries_bytes_both_ways_and_sees_the_close() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut asked = [0u8; 5];
            socket.read_exact(&mut asked).unwrap();
            assert_eq!(&asked, b"hello");
            // Three writes the client will read as it pleases, then a close.
            for part in [&b"one "[..], b"two ", &[b'x'; 100_000]] {
                socket.write_all(part).unwrap();
            }
        });
        let runtime = compio::runtime::Runtime::new().unwrap();
        let received = runtime.block_on(async move {
            let stream = TcpStream::connect(address).await.unwrap();
            let mut io = TokioIo::new(Transport::plain(stream));
            io.write_all(b"hello").await.unwrap();
            io.flush().await.unwrap();
            let mut received = Vec::new();
            let mut small = [0u8; 3];
            let n = io.read(&mut small).await.unwrap();
            received.extend_from_slice(&small[..n]);
            io.read_to_end(&mut received).await.unwrap();
            received
        });
        peer.join().unwrap();
        assert_eq!(received.len(), 8 + 100_000);
        assert!(received.starts_with(b"one two "));
        assert!(received[8..].iter().all(|&b| b == b'x'));
    }

    /// A frame header split across reads, payloads of any size, ACKs passed over; the limit
    /// counts within a second and starts again after one.
    #[test]
    fn the_watch_counts_settings_and_pings_by_their_headers() {
        fn frame(kind: u8, flags: u8, payload: usize) -> Vec<u8> {
            let len = (payload as u32).to_be_bytes();
            let mut f = vec![len[1], len[2], len[3], kind, flags, 0, 0, 0, 0];
            f.resize(9 + payload, 0xAA);
            f
        }
        let start = Instant::now();
        let mut watch = ControlWatch::default();
        let mut bytes = frame(SETTINGS, 0, 12);
        bytes.extend(frame(0x0, 0, 70_000)); // DATA, bytes that look like anything
        bytes.extend(frame(SETTINGS, ACK, 0));
        bytes.extend(frame(PING, ACK, 8));
        // Split at every size: the count is the same.
        for step in [1, 4, 9, 1000] {
            let mut w = ControlWatch::default();
            for part in bytes.chunks(step) {
                w.scan(part, start).unwrap();
            }
            assert_eq!((w.count, w.have, w.skip), (1, 0, 0), "step {step}");
        }
        watch.scan(&bytes, start).unwrap();
        let ping = frame(PING, 0, 8);
        for _ in 1..CONTROL_FRAMES_PER_S_MAX {
            watch.scan(&ping, start).unwrap();
        }
        // The limit's frames in one second pass; one more is a flood.
        let later = start + Duration::from_millis(999);
        let why = watch.scan(&ping, later).unwrap_err();
        assert_eq!(why.kind(), crate::ErrorKind::Protocol);
        let why = why.to_string();
        assert!(
            why.starts_with(FLOOD_WORDS) && why.contains("PING"),
            "{why}"
        );
        // A second later the count starts again.
        let mut calm = ControlWatch::default();
        for second in 0..3u64 {
            let at = start + Duration::from_secs(second);
            for _ in 0..CONTROL_FRAMES_PER_S_MAX {
                calm.scan(&ping, at).unwrap();
            }
        }
    }
}
