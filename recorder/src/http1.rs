//! An incremental HTTP/1.1 response parser: bytes in as they arrive, events out. It never panics
//! on hostile input; every limit has a name, and malformed framing is an event, not an error the
//! caller has to guess at.

/// Largest response head accepted; a larger one is `malformed-framing` (oversized headers).
pub const RESPONSE_HEAD_BYTES_MAX: usize = 64 << 10;
/// Largest chunk-size line accepted.
pub const CHUNK_LINE_BYTES_MAX: usize = 1024;
/// Largest response body kept for verification (streams are parsed as they pass and not kept).
pub const BODY_KEPT_BYTES_MAX: usize = 4 << 20;

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
}

impl Default for Parser {
    fn default() -> Self {
        Parser {
            state: State::Head,
            buf: Vec::new(),
        }
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

impl Parser {
    /// Whether the body ended as framed.
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done | State::Failed)
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
                        Err(why) => return self.fail(out, why),
                        Ok((status, headers)) => {
                            let header = |name: &str| {
                                headers
                                    .iter()
                                    .find(|(k, _)| k == name)
                                    .map(|(_, v)| v.clone())
                            };
                            let chunked = header("transfer-encoding")
                                .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
                            let length = header("content-length");
                            self.state = if status == 204
                                || status == 304
                                || (100..200).contains(&status)
                            {
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
                        return;
                    };
                    let line: Vec<u8> = self.buf.drain(..end + 2).collect();
                    if end == 0 {
                        self.state = State::Done;
                        out.push(Event::End);
                        return;
                    }
                    let _ = line; // trailer fields are ignored
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

fn parse_head(head: &[u8]) -> Result<(u16, Vec<(String, String)>), String> {
    let text = std::str::from_utf8(head).map_err(|_| "response head is not UTF-8".to_owned())?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !(version == "HTTP/1.1" || version == "HTTP/1.0")
        || code.len() != 3
        || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!(
            "malformed status line {:?}",
            status_line.chars().take(80).collect::<String>()
        ));
    }
    let status: u16 = code
        .parse()
        .map_err(|_| format!("malformed status code {code:?}"))?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| {
            format!(
                "malformed header line {:?}",
                line.chars().take(80).collect::<String>()
            )
        })?;
        if name.is_empty() || name.bytes().any(|b| b == b' ' || b == b'\t') {
            return Err(format!("malformed header name {name:?}"));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    Ok((status, headers))
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
    fn no_body_statuses_end_at_the_head() {
        let events = run(b"HTTP/1.1 204 No Content\r\n\r\n", 5, false);
        assert_eq!(events.last(), Some(&Event::End));
    }
}
