//! Server-sent events, parsed as the HTML standard's event-stream interpretation specifies:
//! lines end with CRLF, LF or CR (even split across reads); a line starting with `:` is a comment;
//! `field: value` with one leading space stripped; `data` lines accumulate joined by newlines; a
//! blank line dispatches; a leading BOM is dropped. The stream must be UTF-8: anything else is an
//! error here, because the payloads are JSON.

/// Largest event (data accumulated before a blank line) accepted.
pub const EVENT_BYTES_MAX: usize =
    percentes_formats::pins::value::CLIENT_SSE_EVENT_BYTES_MAX as usize;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// `message` unless an `event:` field said otherwise.
    pub event: String,
    /// The event's data, its lines joined by newlines.
    pub data: String,
}

/// Why the stream is not a valid event stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseError {
    /// A line is not UTF-8.
    InvalidUtf8,
    /// An event is over the size limit.
    TooLarge,
}

/// The incremental parser.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous byte was CR: a following LF belongs to the same line ending.
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    /// Parses `bytes`, appending dispatched events to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        for &b in bytes {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\r' => {
                    self.after_cr = true;
                    self.end_line(out)?;
                }
                b'\n' => self.end_line(out)?,
                _ => {
                    self.line.push(b);
                    if self.line.len() + self.data.len() > EVENT_BYTES_MAX {
                        return Err(SseError::TooLarge);
                    }
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let raw = std::mem::take(&mut self.line);
        let mut line = std::str::from_utf8(&raw).map_err(|_| SseError::InvalidUtf8)?;
        if !self.started {
            self.started = true;
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: if self.event.is_empty() {
                        "message".into()
                    } else {
                        std::mem::take(&mut self.event)
                    },
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = value.to_owned(),
            // id and retry do not matter to a measurement; unknown fields are ignored by the standard.
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8], step: usize) -> Result<Vec<SseEvent>, SseError> {
        let mut p = SseParser::default();
        let mut out = Vec::new();
        for piece in bytes.chunks(step.max(1)) {
            p.feed(piece, &mut out)?;
        }
        Ok(out)
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    #[test]
    fn line_endings_comments_and_multi_line_data_at_every_split() {
        let stream = b"\xef\xbb\xbfdata: a\r\n\r\n: comment\ndata:b\ndata:  c\n\nevent: x\rdata: d\r\rdata\n\n";
        for step in 1..stream.len() {
            let events = parse(stream, step).unwrap();
            assert_eq!(data(&events), ["a", "b\n c", "d", ""], "step {step}");
            assert_eq!(events[2].event, "x");
            assert_eq!(events[0].event, "message");
        }
    }

    #[test]
    fn no_dispatch_without_a_blank_line_and_without_data() {
        assert!(parse(b"data: a\n", 1).unwrap().is_empty());
        assert!(parse(b"event: x\n\n: only a comment\n\n", 2)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn invalid_utf8_and_oversized_events_are_errors() {
        assert_eq!(
            parse(b"data: \xc3\x28\xff\n\n", 3),
            Err(SseError::InvalidUtf8)
        );
        let mut big = b"data: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', EVENT_BYTES_MAX + 1));
        assert_eq!(parse(&big, 4096), Err(SseError::TooLarge));
    }
}
