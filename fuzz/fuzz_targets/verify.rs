//! The journal reader on arbitrary bytes: verification and decoding must never panic, and nothing
//! random may pass as sealed-intact unless it really is a well-formed journal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::journal::records::Record;
use percentes_formats::journal::{verify, Header};

fuzz_target!(|data: &[u8]| {
    let report = verify::verify(data, &Default::default());
    let _ = verify::render(&report);
    if let Ok((_, header_end, _)) = Header::decode(data) {
        for framed in verify::records(data, header_end, report.verified_bytes as usize) {
            let _ = Record::decode(framed.kind, framed.body);
        }
    }
    for kind in 0u8..=6 {
        let _ = Record::decode(kind, data);
    }
});
