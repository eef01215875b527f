//! The recorder's response path (`percentes-response`) on arbitrary bytes, fed in arbitrary pieces: the HTTP/1.1
//! parser, the SSE parser and the exchange's classification never panic, and every response
//! ends with exactly one verdict, whose class is one of the journal's (formats' `CLASSES`) with
//! that class's outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::journal::records::CLASSES;
use percentes_response::exchange::Exchange;
use percentes_response::http1::{Event, Parser};

fuzz_target!(|data: &[u8]| {
    let Some((&step, bytes)) = data.split_first() else { return };
    let step = usize::from(step).max(1);
    for streaming in [true, false] {
        let mut parser = Parser::default();
        let mut exchange = Exchange::new(streaming, Some("mock".into()));
        let mut events = Vec::new();
        let mut ended = false;
        for (i, piece) in bytes.chunks(step).enumerate() {
            parser.feed(piece, &mut events);
            for event in events.drain(..) {
                ended |= event == Event::End;
                exchange.on_http(event, i as u64);
            }
        }
        parser.eof(&mut events);
        for event in events.drain(..) {
            ended |= event == Event::End;
            exchange.on_http(event, u64::MAX);
        }
        let verdict = exchange.finish(ended, None, u64::MAX);
        let (_, _, outcome) = CLASSES
            .iter()
            .find(|(_, name, _)| *name == verdict.class)
            .unwrap_or_else(|| panic!("class {:?} is not the journal's", verdict.class));
        assert_eq!(*outcome, verdict.outcome, "{verdict:?}");
    }
});
