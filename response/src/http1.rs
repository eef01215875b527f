//! An incremental HTTP/1.1 response parser: bytes in as they arrive, events out. It never panics
//! on hostile input; every limit has a name, and malformed framing is an event, not an error the
//! caller has to guess at.

use percentes_formats::pins;

/// Largest response head accepted, and largest trailer section; larger is `malformed-framing`
/// (SPEC §2, `client.response_head_bytes_max`).
pub const RESPONSE_HEAD_BYTES_MAX: usize = pins::value::CLIENT_RESPONSE_HEAD_BYTES_MAX as usize;
/// Largest chunk-size line accepted, extensions included (`client.chunk_line_bytes_max`).
pub const CHUNK_LINE_BYTES_MAX: usize = pins::value::CLIENT_CHUNK_LINE_BYTES_MAX as usize;
/// Largest response body kept for verification (streams are parsed as they pass and not kept;
/// `client.body_kept_bytes_max`).
pub const BODY_KEPT_BYTES_MAX: usize = pins::value::CLIENT_BODY_KEPT_BYTES_MAX as usize;
/// Interim (1xx) responses skipped before a final one; more is `malformed-framing` (a server
/// that answers only 103s forever would otherwise hold the request to its deadline unclassified).
pub const INTERIM_RESPONSES_MAX: u32 = 16;

/// What the parser saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Status and headers (names lowercased).
    Head {
        /// The status code.
        status: u16,
        /// The headers, names lowercased, in order.
        headers: Vec<(String, String)>,
    },
    /// Body bytes, de-chunked.
    Data(Vec<u8>),
    /// The body ended as framed.
    End,
    /// The bytes violate HTTP/1.1 framing; the detail says how.
    Malformed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
    Failed,
}

/// The parser. Feed it bytes with [`Parser::feed`]; call [`Parser::eof`] when the peer closes.
#[derive(Debug)]
pub struct Parser {
    state: State,
    buf: Vec<u8>,
    /// The connection cannot carry another request after this response: HTTP/1.0 without
    /// keep-alive, `Connection: close`, or a body delimited by the close (RFC 9112 §9.3).
    closes: bool,
    /// The server's `Keep-Alive: timeout=N`, in seconds.
    keep_alive_timeout_s: Option<u64>,
    /// Interim responses skipped so far.
    interim: u32,
    /// Trailer-section bytes read so far.
    trailer_bytes: usize,
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            state: State::Head,
            buf: Vec::new(),
            closes: false,
            keep_alive_timeout_s: None,
            interim: 0,
            trailer_bytes: 0,
        }
    }
}

/// The `timeout=N` parameter of a `Keep-Alive` header value.
fn keep_alive_timeout(value: &str) -> Option<u64> {
    value.split(',').find_map(|part| {
        let (name, n) = part.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("timeout")
            .then(|| n.trim().parse().ok())?
    })
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

impl Parser {
    /// Whether the body ended as framed.
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
    }

    /// Whether the connection may carry another request: the response ended as framed, and
    /// neither its version, its `Connection` header nor its framing closes the connection.
    pub fn reusable(&self) -> bool {
        self.state == State::Done && !self.closes
    }

    /// The server's `Keep-Alive: timeout=N` on this response, in seconds, if it sent one.
    pub fn keep_alive_timeout_s(&self) -> Option<u64> {
        self.keep_alive_timeout_s
    }

    fn fail(&mut self, out: &mut Vec<Event>, why: String) {
        self.state = State::Failed;
        out.push(Event::Malformed(why));
    }

    /// Parses what it can of `bytes`, appending events to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        if self.done() {
            return;
        }
        self.buf.extend_from_slice(bytes);
        loop {
            match self.state.clone() {
                State::Done | State::Failed => return,
                State::Head => {
                    let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        if self.buf.len() > RESPONSE_HEAD_BYTES_MAX {
                            return self.fail(
                                out,
                                format!("response head over {RESPONSE_HEAD_BYTES_MAX} bytes"),
                            );
                        }
                        return;
                    };
                    if end > RESPONSE_HEAD_BYTES_MAX {
                        return self.fail(
                            out,
                            format!("response head over {RESPONSE_HEAD_BYTES_MAX} bytes"),
                        );
                    }
                    let head: Vec<u8> = self.buf.drain(..end + 4).collect();
                    match parse_head(&head[..end]) {
                        Err(BadHead(why)) => return self.fail(out, why),
                        Ok((101, _, _)) => {
                            return self.fail(
                                out,
                                "101 Switching Protocols to a request that asked for no upgrade"
                                    .into(),
                            )
                        }
                        Ok((status, _, _)) if (100..200).contains(&status) => {
                            // RFC 9110 §15.2: an interim response; the final one follows.
                            self.interim += 1;
                            if self.interim > INTERIM_RESPONSES_MAX {
                                return self.fail(
                                    out,
                                    format!(
                                        "more than {INTERIM_RESPONSES_MAX} interim (1xx) responses"
                                    ),
                                );
                            }
                        }
                        Ok((status, http10, headers)) => {
                            let header = |name: &str| {
                                headers
                                    .iter()
                                    .find(|(k, _)| k == name)
                                    .map(|(_, v)| v.clone())
                            };
                            let chunked = header("transfer-encoding")
                                .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
                            let length = header("content-length");
                            let connection = header("connection")
                                .unwrap_or_default()
                                .to_ascii_lowercase();
                            let has =
                                |token: &str| connection.split(',').any(|t| t.trim() == token);
                            self.closes = has("close") || (http10 && !has("keep-alive"));
                            self.keep_alive_timeout_s =
                                header("keep-alive").as_deref().and_then(keep_alive_timeout);
                            self.state = if status == 204 || status == 304 {
                                State::Done
                            } else if chunked {
                                State::ChunkSize
                            } else if let Some(length) = length {
                                match length.trim().parse::<u64>() {
                                    Ok(n) => State::Length(n),
                                    Err(_) => {
                                        return self
                                            .fail(out, format!("bad content-length {length:?}"))
                                    }
                                }
                            } else {
                                self.closes = true;
                                State::UntilClose
                            };
                            out.push(Event::Head { status, headers });
                            if self.state == State::Done || self.state == State::Length(0) {
                                self.state = State::Done;
                                out.push(Event::End);
                                return;
                            }
                        }
                    }
                }
                State::Length(left) => {
                    if self.buf.is_empty() {
                        return;
                    }
                    let take = (left as usize).min(self.buf.len());
                    out.push(Event::Data(self.buf.drain(..take).collect()));
                    let left = left - take as u64;
                    if left == 0 {
                        self.state = State::Done;
                        out.push(Event::End);
                        return;
                    }
                    self.state = State::Length(left);
                }
                State::ChunkSize => {
                    let Some(end) = find_crlf(&self.buf) else {
                        if self.buf.len() > CHUNK_LINE_BYTES_MAX {
                            return self.fail(out, "chunk-size line too long".into());
                        }
                        return;
                    };
                    if end > CHUNK_LINE_BYTES_MAX {
                        return self.fail(out, "chunk-size line too long".into());
                    }
                    let line: Vec<u8> = self.buf.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&line[..end]);
                    let size_text = text.split(';').next().unwrap_or_default().trim();
                    match u64::from_str_radix(size_text, 16) {
                        Ok(0) if !size_text.is_empty() => self.state = State::Trailers,
                        Ok(n) if !size_text.is_empty() => self.state = State::ChunkData(n),
                        _ => {
                            return self
                                .fail(out, format!("chunk-size line {text:?} is not hexadecimal"))
                        }
                    }
                }
                State::ChunkData(left) => {
                    if self.buf.is_empty() {
                        return;
                    }
                    let take = (left as usize).min(self.buf.len());
                    out.push(Event::Data(self.buf.drain(..take).collect()));
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::ChunkDataEnd
                    } else {
                        State::ChunkData(left)
                    };
                }
                State::ChunkDataEnd => {
                    // Fail on the first byte that cannot begin CRLF, without waiting for a second.
                    if self.buf.first().is_some_and(|&b| b != b'\r')
                        || self.buf.get(1).is_some_and(|&b| b != b'\n')
                    {
                        return self.fail(out, "chunk data not followed by CRLF".into());
                    }
                    if self.buf.len() < 2 {
                        return;
                    }
                    self.buf.drain(..2);
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(end) = find_crlf(&self.buf) else {
                        if self.trailer_bytes + self.buf.len() > RESPONSE_HEAD_BYTES_MAX {
                            return self.fail(
                                out,
                                format!("trailer section over {RESPONSE_HEAD_BYTES_MAX} bytes"),
                            );
                        }
                        return;
                    };
                    self.buf.drain(..end + 2); // trailer fields are read past, not kept
                    self.trailer_bytes += end + 2;
                    if end == 0 {
                        self.state = State::Done;
                        out.push(Event::End);
                        return;
                    }
                    if self.trailer_bytes > RESPONSE_HEAD_BYTES_MAX {
                        return self.fail(
                            out,
                            format!("trailer section over {RESPONSE_HEAD_BYTES_MAX} bytes"),
                        );
                    }
                }
                State::UntilClose => {
                    if !self.buf.is_empty() {
                        out.push(Event::Data(std::mem::take(&mut self.buf)));
                    }
                    return;
                }
            }
        }
    }

    /// What one read returned: `bytes`, or, when it is empty (a read of 0 bytes), the peer's
    /// close ([`Parser::eof`]).
    pub fn read(&mut self, bytes: &[u8], out: &mut Vec<Event>) {
        if bytes.is_empty() {
            self.eof(out);
        } else {
            self.feed(bytes, out);
        }
    }

    /// The peer closed. A body delimited by close ends here; anywhere else it is a premature close.
    pub fn eof(&mut self, out: &mut Vec<Event>) {
        match self.state {
            State::UntilClose => {
                self.state = State::Done;
                out.push(Event::End);
            }
            State::Done | State::Failed => {}
            State::Head if self.buf.is_empty() => self.state = State::Failed,
            _ => self.state = State::Failed,
        }
    }
}

/// Status, whether the version is HTTP/1.0, and the headers (names lowercased).
type Head = (u16, bool, Vec<(String, String)>);

/// What is malformed in a response head: the words the parser's `Malformed` event carries.
#[derive(Debug)]
struct BadHead(String);

/// A response head read, or what is malformed in it.
fn parse_head(head: &[u8]) -> Result<Head, BadHead> {
    let text =
        std::str::from_utf8(head).map_err(|_| BadHead("response head is not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !(version == "HTTP/1.1" || version == "HTTP/1.0")
        || code.len() != 3
        || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(BadHead(format!(
            "malformed status line {:?}",
            status_line.chars().take(80).collect::<String>()
        )));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| BadHead(format!("malformed status code {code:?}")))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| {
            BadHead(format!(
                "malformed header line {:?}",
                line.chars().take(80).collect::<String>()
            ))
        })?;
        if name.is_empty() || name.bytes().any(|b| b == b' ' || b == b'\t') {
            return Err(BadHead(format!("malformed header name {name:?}")));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok((status, version == "HTTP/1.0", headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of `step` and returns all events, plus the EOF's.
    fn run(bytes: &[u8], step: usize, eof: bool) -> Vec<Event> {
        let mut parser = Parser::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(step.max(1)) {
            parser.feed(piece, &mut out);
        }
        if eof {
            parser.eof(&mut out);
        }
        out
    }

    fn body(events: &[Event]) -> Vec<u8> {
        events
            .iter()
            .filter_map(|e| {
                if let Event::Data(d) = e {
                    Some(d.clone())
                } else {
                    None
                }
            })
            .flatten()
            .collect()
    }

    #[test]
    fn content_length_and_chunked_at_every_split() {
        let fixed = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nx-trailer: 1\r\n\r\n";
        for step in 1..=fixed.len() {
            let events = run(fixed, step, false);
            assert_eq!(body(&events), b"hello", "step {step}");
            assert_eq!(events.last(), Some(&Event::End));
            let events = run(chunked, step, false);
            assert_eq!(body(&events), b"hello", "step {step}");
            assert_eq!(events.last(), Some(&Event::End), "step {step}");
        }
        let events = run(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            4,
            false,
        );
        assert!(
            matches!(&events[0], Event::Head { status: 200, headers } if headers[0] == ("content-length".into(), "5".into()))
        );
    }

    #[test]
    fn until_close_and_premature_close() {
        let events = run(b"HTTP/1.0 200 OK\r\n\r\nabc", 2, true);
        assert_eq!(body(&events), b"abc");
        assert_eq!(events.last(), Some(&Event::End));
        // Closed before the framed end: no End event.
        let mut parser = Parser::default();
        let mut out = Vec::new();
        parser.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            &mut out,
        );
        parser.eof(&mut out);
        assert!(!out.contains(&Event::End) && parser.done());
    }

    #[test]
    fn each_hostile_shape_is_malformed_framing() {
        for (bytes, needle) in [
            (
                &b"HTTP/1.1 2x0 OK\r\ncontent-length: 2\r\n\r\n{}"[..],
                "status line",
            ),
            (&b"HTPT/1.1 200 OK\r\n\r\n"[..], "status line"),
            (
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n"[..],
                "hexadecimal",
            ),
            (
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcd"[..],
                "CRLF",
            ),
            (&b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n"[..], "header"),
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n"[..],
                "content-length",
            ),
        ] {
            let events = run(bytes, 3, false);
            assert!(
                matches!(events.last(), Some(Event::Malformed(why)) if why.contains(needle)),
                "{events:?}"
            );
        }
        let mut huge = b"HTTP/1.1 200 OK\r\nx-pad: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', RESPONSE_HEAD_BYTES_MAX + 10));
        let events = run(&huge, 4096, false);
        assert!(matches!(events.last(), Some(Event::Malformed(why)) if why.contains("head over")));
    }

    #[test]
    fn interim_responses_are_skipped_and_the_final_one_read() {
        // RFC 9110 §15.2: 100 Continue and 103 Early Hints come before the final response.
        let bytes = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for step in [1, 7, bytes.len()] {
            let events = run(bytes, step, false);
            assert!(
                matches!(&events[0], Event::Head { status: 200, .. }),
                "step {step}: {events:?}"
            );
            assert_eq!(body(&events), b"ok");
            assert_eq!(events.last(), Some(&Event::End));
        }
        let endless =
            b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(INTERIM_RESPONSES_MAX as usize + 1);
        assert!(
            matches!(run(&endless, 64, false).last(), Some(Event::Malformed(why)) if why.contains("interim"))
        );
        let upgrade = run(b"HTTP/1.1 101 Switching Protocols\r\n\r\n", 8, false);
        assert!(matches!(upgrade.last(), Some(Event::Malformed(why)) if why.contains("101")));
    }

    #[test]
    fn what_closes_the_connection_is_known_at_the_end() {
        let reusable = |bytes: &[u8], eof: bool| {
            let mut parser = Parser::default();
            let mut out = Vec::new();
            parser.feed(bytes, &mut out);
            if eof {
                parser.eof(&mut out);
            }
            (parser.reusable(), parser.keep_alive_timeout_s())
        };
        let timed =
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nKeep-Alive: timeout=5, max=100\r\n\r\nok";
        assert_eq!(reusable(timed, false), (true, Some(5)));
        // HTTP/1.0 closes unless it says keep-alive; a close-delimited body closes by definition.
        assert!(!reusable(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", false).0);
        let kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
        assert!(reusable(kept, false).0);
        assert!(!reusable(b"HTTP/1.1 200 OK\r\n\r\nuntil the close", true).0);
        let close = b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n";
        assert!(!reusable(close, false).0);
        // Not ended: never reusable.
        assert!(!reusable(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nok", false).0);
    }

    #[test]
    fn trailers_and_chunk_lines_are_bounded() {
        // An endless trailer line is framing gone wrong, not memory to spend.
        let mut parser = Parser::default();
        let mut out = Vec::new();
        parser.feed(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-t: ",
            &mut out,
        );
        let piece = vec![b'a'; 4096];
        for _ in 0..(RESPONSE_HEAD_BYTES_MAX / piece.len() + 2) {
            parser.feed(&piece, &mut out);
        }
        assert!(
            matches!(out.last(), Some(Event::Malformed(why)) if why.contains("trailer")),
            "{out:?}"
        );
        assert!(parser.buf.len() <= RESPONSE_HEAD_BYTES_MAX + piece.len());
        // Many short trailer lines add up to the same limit.
        let mut many = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
        for _ in 0..(RESPONSE_HEAD_BYTES_MAX / 8 + 1) {
            many.extend_from_slice(b"x-t: 1\r\n");
        }
        assert!(
            matches!(run(&many, 4096, false).last(), Some(Event::Malformed(why)) if why.contains("trailer"))
        );
        // A chunk extension that makes the size line longer than its limit, in one read.
        let mut long = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
        long.extend(std::iter::repeat_n(b'e', CHUNK_LINE_BYTES_MAX + 1));
        long.extend_from_slice(b"\r\na\r\n");
        assert!(
            matches!(run(&long, long.len(), false).last(), Some(Event::Malformed(why)) if why.contains("chunk-size line"))
        );
    }

    #[test]
    fn no_body_statuses_end_at_the_head() {
        let events = run(b"HTTP/1.1 204 No Content\r\n\r\n", 5, false);
        assert_eq!(events.last(), Some(&Event::End));
    }
}
