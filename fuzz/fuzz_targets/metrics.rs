//! A server's metrics answer, as the recorder's scrapes read it: any bytes as Prometheus text,
//! then twice through a source's scrape state (a second answer with every value doubled). The
//! reader never panics, keeps within its bounds, and each record fits a journal record and
//! decodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use percentes_formats::journal::records::Record;
use percentes_formats::journal::scrape::Scraper;
use percentes_formats::journal::RECORD_BYTES_MAX;
use percentes_formats::prometheus::{self, KEPT_BYTES_MAX, SAMPLES_MAX};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let read = prometheus::parse(&text, |_| true);
    assert!(read.samples.len() <= SAMPLES_MAX);
    let kept: usize = read
        .samples
        .iter()
        .map(|s| s.name.len() + s.family.len() + s.labels.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>())
        .sum();
    assert!(kept <= KEPT_BYTES_MAX);
    let mut scraper = Scraper::default();
    let mut later = read.samples.clone();
    for s in &mut later {
        s.value *= 2.0;
    }
    for (n, samples) in [read.samples, later].iter().enumerate() {
        let record = Record::Scrape(scraper.record("fuzz", (n as u64, n as u64 + 1), samples));
        let body = record.encode_body();
        assert!(body.len() <= RECORD_BYTES_MAX as usize, "{} bytes", body.len());
        let back = Record::decode(record.kind_byte(), &body).expect("a scrape record decodes");
        assert_eq!(back, record);
    }
});
