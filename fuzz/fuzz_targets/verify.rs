//! The journal reader on arbitrary bytes: verification and decoding never panic; the verdict is
//! a function of the bytes (the same twice); it never claims more bytes than the file has; and
//! nothing passes as sealed-intact unless it is a well-formed journal: its header decodes, it is
//! verified to its last byte, it has a seal, and every record whose content `verify` checks
//! (all but kinds 6 and 8, whose framing alone it checks: formats/JOURNAL.md) decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::journal::records::Record;
use percentes_formats::journal::verify::{self, Verdict};
use percentes_formats::journal::Header;

fuzz_target!(|data: &[u8]| {
    let report = verify::verify(data, &Default::default());
    let text = verify::render(&report);
    assert_eq!(report.file_bytes, data.len() as u64);
    assert!(report.verified_bytes <= report.file_bytes, "{text}");
    let again = verify::verify(data, &Default::default());
    assert_eq!(text, verify::render(&again), "the verdict is a function of the bytes");
    let header = Header::decode(data);
    if report.verdict == Verdict::SealedIntact {
        let (_, header_end, _) = header.as_ref().expect("a sealed-intact journal's header decodes");
        assert_eq!(report.verified_bytes, report.file_bytes, "{text}");
        assert!(report.seal.is_some(), "{text}");
        let mut records = 0;
        for framed in verify::records(data, *header_end, data.len()) {
            records += 1;
            if !matches!(framed.kind, 6 | 8) {
                Record::decode(framed.kind, framed.body)
                    .expect("every record of a sealed-intact journal decodes");
            }
        }
        assert_eq!(records, report.records, "{text}");
    } else if let Ok((_, header_end, _)) = header {
        for framed in verify::records(data, header_end, report.verified_bytes as usize) {
            let _ = Record::decode(framed.kind, framed.body);
        }
    }
    for kind in 0u8..=8 {
        let _ = Record::decode(kind, data);
    }
});
