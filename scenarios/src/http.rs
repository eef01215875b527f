//! A minimal HTTP/1.1 server side: request heads with content-length bodies, keep-alive, and
//! response writers that put exactly the intended bytes on the wire (the hostile modes depend on
//! that, which is why the mock does not use a general-purpose HTTP library).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest request head accepted.
pub const REQUEST_HEAD_BYTES_MAX: usize = 64 << 10;
/// Largest request body accepted.
pub const REQUEST_BODY_BYTES_MAX: usize = 4 << 20;
/// Most request headers accepted.
pub const REQUEST_HEADERS_MAX: usize = 128;

/// A parsed request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The request method.
    pub method: String,
    /// The request target.
    pub path: String,
    /// The headers, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// `Connection: close` or HTTP/1.0 without keep-alive.
    pub close: bool,
}

impl Request {
    /// The first header of this name (lowercase), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read. `Closed` is the client's orderly goodbye.
#[derive(Debug)]
pub enum ReadError {
    /// The client closed before a full request.
    Closed,
    /// The socket failed.
    Io(std::io::Error),
    /// Malformed or over a limit: answer 400 (or 413) and close.
    Bad(u16, String),
}

/// Reads one request from `stream`, keeping bytes of a following (pipelined) request in `buf`.
pub async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Request, ReadError> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > REQUEST_HEAD_BYTES_MAX {
            return Err(ReadError::Bad(431, "request head too large".into()));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Err(if buf.is_empty() {
                ReadError::Closed
            } else {
                ReadError::Bad(400, "connection closed mid-request".into())
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end - 4])
        .map_err(|_| ReadError::Bad(400, "request head is not UTF-8".into()))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(path), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(
            400,
            format!("bad request line {request_line:?}"),
        ));
    };
    if !(version == "HTTP/1.1" || version == "HTTP/1.0") {
        return Err(ReadError::Bad(
            505,
            format!("unsupported version {version:?}"),
        ));
    }
    let mut headers = Vec::new();
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad(400, format!("bad header line {line:?}")));
        };
        if headers.len() == REQUEST_HEADERS_MAX {
            return Err(ReadError::Bad(431, "too many headers".into()));
        }
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let mut request = Request {
        method: method.into(),
        path: path.into(),
        headers,
        body: Vec::new(),
        close: false,
    };
    let connection = request.header("connection").map(str::to_ascii_lowercase);
    request.close = match version {
        "HTTP/1.0" => connection.as_deref() != Some("keep-alive"),
        _ => connection.as_deref() == Some("close"),
    };
    if request.header("transfer-encoding").is_some() {
        return Err(ReadError::Bad(
            411,
            "chunked request bodies are not accepted; send Content-Length".into(),
        ));
    }
    let length = match request.header("content-length") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .map_err(|_| ReadError::Bad(400, format!("bad Content-Length {v:?}")))?,
    };
    if length > REQUEST_BODY_BYTES_MAX {
        return Err(ReadError::Bad(
            413,
            format!("body of {length} bytes; at most {REQUEST_BODY_BYTES_MAX}"),
        ));
    }
    buf.drain(..head_end);
    while buf.len() < length {
        let mut chunk = vec![0u8; (length - buf.len()).min(64 << 10)];
        let n = stream.read(&mut chunk).await.map_err(ReadError::Io)?;
        if n == 0 {
            return Err(ReadError::Bad(400, "connection closed mid-body".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    request.body = buf.drain(..length).collect();
    Ok(request)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The reason phrase for the statuses the mock sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// A complete response with a body of known length.
pub fn full_response(
    status: u16,
    content_type: &str,
    extra_headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra_headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if close {
        out.push_str("connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// The head of a chunked response.
pub fn chunked_head(status: u16, content_type: &str, extra_headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n",
        reason(status)
    );
    for (k, v) in extra_headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The terminating chunk.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Answers a request that could not be read (malformed, over a limit) with its status and a JSON
/// error, asking the client to close.
pub async fn answer_unreadable(stream: &mut TcpStream, status: u16, why: &str) {
    let body = serde_json::json!({"error": {"message": why}}).to_string();
    let _ = send(
        stream,
        &full_response(status, "application/json", &[], body.as_bytes(), true),
    )
    .await;
}

/// Sets SO_LINGER to zero, so that dropping the socket sends RST instead of FIN.
pub fn reset_on_close(stream: &TcpStream) {
    let _ = socket2::SockRef::from(stream).set_linger(Some(std::time::Duration::ZERO));
}

/// Writes all bytes; an error means the client went away.
pub async fn send(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await
}

/// How long a server waits after an accept that failed for want of descriptors or memory before
/// it accepts again: the connections waiting meanwhile stay in the listen backlog (refused only
/// if it overflows), and the server goes on once a descriptor is free.
pub const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// The next connection on `listener`. An accept that fails for want of descriptors, ports or
/// memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) or because the peer gave up first (ECONNABORTED) is
/// not the end of the server (issue 32: the mock exited on EMFILE under a client's flood): it
/// is said once per episode on stderr and accepting resumes after [`ACCEPT_RETRY`]. Any other
/// error ends the server, as before.
pub async fn accept(
    listener: &tokio::net::TcpListener,
    who: &str,
) -> std::io::Result<(TcpStream, std::net::SocketAddr)> {
    let mut said = false;
    loop {
        match listener.accept().await {
            Ok(accepted) => return Ok(accepted),
            Err(e) if accept_can_resume(&e) => {
                if !std::mem::replace(&mut said, true) {
                    eprintln!(
                        "percentes {who}: cannot accept a connection now ({e}); it waits in the listen backlog and accepting resumes as descriptors free up"
                    );
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a failed accept leaves the listener usable (the process ran out of something, or the
/// peer left first).
pub fn accept_can_resume(error: &std::io::Error) -> bool {
    // EMFILE 24, ENFILE 23, ENOBUFS 105, ENOMEM 12, ECONNABORTED 103 on Linux; the kinds below
    // say the same on every OS where the standard library maps them.
    matches!(error.raw_os_error(), Some(24 | 23 | 105 | 12 | 103))
        || matches!(
            error.kind(),
            std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::OutOfMemory
        )
}
