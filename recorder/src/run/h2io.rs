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

use compio::io::compat::AsyncStream;
use compio::net::TcpStream;
use compio::tls::TlsStream;
use futures_io::{AsyncRead as FuturesRead, AsyncWrite as FuturesWrite};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A futures-io stream seen through tokio's I/O traits.
pub(super) struct TokioIo<T>(pub(super) T);

impl<T: FuturesRead + Unpin> AsyncRead for TokioIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let unfilled = buf.initialize_unfilled();
        match Pin::new(&mut self.get_mut().0).poll_read(cx, unfilled) {
            Poll::Ready(Ok(n)) => {
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
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_close(cx)
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
            let mut io = TokioIo(Transport::plain(stream));
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
}
