//! Chain-valid rewrites of a journal's scrape records (kind 7), not raw bytes: the fuzzer's
//! bytes are edits (times moved, flags flipped, ids and kinds changed, samples and `gone` ids
//! added, negated or dropped, records reordered, removed or repeated) to a real scraper's
//! records of vLLM-shaped answers in a golden journal, written again with the chain computed
//! anew, so the edit is the only thing wrong. `analyze` either refuses the journal, naming the
//! record and the kind-7 rule it breaks (formats/JOURNAL.md "7 scrape"), or reads it whole,
//! server evidence included; it never panics, and the same journal gets the same verdict twice.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use percentes_analyzer::load::{load, LoadError};
use percentes_analyzer::JournalFile;
use percentes_formats::journal::records::Record;
use percentes_formats::journal::scrape::{Sample, ScrapeRecord, Scraper};
use percentes_formats::journal::synthetic;
use percentes_formats::prometheus::{self, Preset};
use percentes_formats::spec::Spec;

/// A sealed journal without scrapes, and a scraper's records of eight vLLM-shaped answers, 1 s
/// apart, whose counters and histogram grow and whose gauge comes and goes.
fn base() -> &'static (Vec<u8>, Vec<ScrapeRecord>) {
    static BASE: OnceLock<(Vec<u8>, Vec<ScrapeRecord>)> = OnceLock::new();
    BASE.get_or_init(|| {
        let journal = include_bytes!("../../golden/v1/sealed.pj").to_vec();
        let mut scraper = Scraper::default();
        let records = (0..8u64)
            .map(|k| {
                let n = (k * k * 3) as f64;
                let mut text = format!(
                    "# TYPE vllm:request_success_total counter\nvllm:request_success_total{{finished_reason=\"length\"}} {n}\n\
                     # TYPE vllm:time_to_first_token_seconds histogram\n\
                     vllm:time_to_first_token_seconds_bucket{{le=\"0.05\"}} {}\n\
                     vllm:time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {n}\n\
                     vllm:time_to_first_token_seconds_count {n}\nvllm:time_to_first_token_seconds_sum {}\n",
                    (n / 2.0).floor(),
                    n * 0.04
                );
                if k % 3 != 1 {
                    text.push_str(&format!(
                        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running {}\n",
                        k % 4
                    ));
                }
                let read = prometheus::parse(&text, |name| Preset::Vllm.selects(name));
                let at = k * 1_000_000_000 + 100_000_000;
                scraper.record("replica-0", (at, at + 4_000_000), &read.samples)
            })
            .collect();
        (journal, records)
    })
}

/// Applies the edits `data` spells, four bytes each: an operation, a record, and a signed
/// 16-bit argument.
fn edit(records: &mut Vec<ScrapeRecord>, data: &[u8]) {
    for op in data.chunks_exact(4) {
        if records.is_empty() {
            return;
        }
        let k = op[1] as usize % records.len();
        let v = i16::from_le_bytes([op[2], op[3]]);
        let n = v.unsigned_abs() as usize;
        let shift = |t: u64| t.saturating_add_signed(i64::from(v) * 1_000_000);
        let r = &mut records[k];
        match op[0] % 14 {
            0 => r.sent_ns = shift(r.sent_ns),
            1 => r.received_ns = shift(r.received_ns),
            2 => r.first = !r.first,
            3 => r.restarted = !r.restarted,
            4 if !r.defined.is_empty() => {
                let i = n % r.defined.len();
                r.defined[i].id = (n % 16) as u32;
            }
            5 if !r.defined.is_empty() => {
                let i = n % r.defined.len();
                r.defined[i].kind = op[3];
            }
            6 => r.samples.push(Sample {
                id: (n % 16) as u32,
                value: f64::from(v),
            }),
            7 if !r.samples.is_empty() => {
                let i = n % r.samples.len();
                r.samples[i].value = match op[3] % 4 {
                    0 => -r.samples[i].value,
                    1 => f64::NAN,
                    2 => f64::NEG_INFINITY,
                    _ => f64::from(v) * 1e300,
                };
            }
            8 => r.gone.push((n % 16) as u32),
            9 if !r.defined.is_empty() => {
                let i = n % r.defined.len();
                r.defined.remove(i);
            }
            10 if !r.samples.is_empty() => {
                let i = n % r.samples.len();
                r.samples.remove(i);
            }
            11 => {
                let j = n % records.len();
                records.swap(k, j);
            }
            12 => {
                records.remove(k);
            }
            13 => {
                let copy = records[k].clone();
                records.insert(k, copy);
            }
            _ => {}
        }
    }
}

/// `analyze`'s verdict on `bytes`: the refusal, or a digest of the report's server evidence.
fn verdict(bytes: &[u8]) -> String {
    let path = std::env::temp_dir().join(format!("percentes-fuzz-scrapes-{}.pj", std::process::id()));
    std::fs::write(&path, bytes).expect("the scratch journal is written");
    let file = JournalFile::open(&path).expect("the scratch journal opens");
    // The map holds the bytes from here (nothing reopens the path): the name goes at once, so a
    // fuzzing process leaves no journal behind.
    let _ = std::fs::remove_file(&path);
    match load(&file) {
        Err(LoadError::Record { sequence, message }) => {
            assert!(
                message.contains("\"7 scrape\", rule"),
                "record {sequence}: a refusal that names no kind-7 rule: {message}"
            );
            format!("refused: record {sequence}: {message}")
        }
        Err(other) => panic!("a chain-valid rewrite of kind 7 alone is refused for something else: {other}"),
        Ok(run) => {
            // Diagnosed, so the server evidence's windows and timeline are computed even
            // though the golden run fails a gate (they are where backwards times panicked).
            let analyzer = percentes_analyzer::model::Analyzer {
                diagnose: true,
                ..Default::default()
            };
            let report =
                percentes_analyzer::analysis::analyze(&run, &file, Spec::CURRENT, &analyzer);
            format!("read: {}", serde_json::to_string(&report.server).unwrap_or_default())
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (journal, records) = base();
    let mut scrapes = records.clone();
    edit(&mut scrapes, data);
    let bytes = synthetic::with_records(journal, |all| {
        for (k, s) in scrapes.into_iter().enumerate() {
            all.insert(k, Record::Scrape(s));
        }
    });
    let first = verdict(&bytes);
    assert_eq!(first, verdict(&bytes), "the verdict is a function of the journal");
});
