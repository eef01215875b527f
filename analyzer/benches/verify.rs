//! Benchmark: `verify` throughput against raw single-core BLAKE3, and peak memory against
//! journal size (BENCHMARKS.md records the results).
//!
//! `cargo bench -p percentes-analyzer --bench verify [-- SIZE_MB...]` (default: 256 1024).
//! Each measurement runs in a child process of its own so that its peak RSS is its own. Journals
//! are synthetic (formats::journal::synthetic) with 64 content gaps per completed request, about
//! the shape of a 64-token stream; they live in a temporary folder and are deleted afterwards.

mod common;

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use percentes_analyzer::JournalFile;
use percentes_formats::config::Config;
use percentes_formats::journal::synthetic::{self, Options};
use percentes_formats::journal::Verdict;

/// Bytes per request record at 64 gaps, measured from the generator (about 450).
const BYTES_PER_REQUEST: f64 = 455.0;

fn config_for(megabytes: u64) -> Config {
    // Experiment-profile phases sum to 420 s; pick the rate that fills `megabytes`.
    let requests = megabytes as f64 * 1048576.0 / BYTES_PER_REQUEST;
    common::config_at(requests / 420.0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("generate") => {
            let megabytes: u64 = args[1].parse().unwrap();
            let path = PathBuf::from(&args[2]);
            let out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
            let options = Options {
                gaps_per_request: 64,
                checkpoint_every_records: 50_000,
                block_target_bytes: 64 << 10,
                ..Options::default()
            };
            synthetic::write(out, &config_for(megabytes), &options).unwrap();
        }
        Some("raw") => {
            // Raw single-core BLAKE3 over an in-memory buffer: the ceiling verify is held to.
            let megabytes: usize = args[1].parse().unwrap();
            let buffer: Vec<u8> = (0..megabytes << 20)
                .map(|i| (i * 7 + i / 4096) as u8)
                .collect();
            let mut best = f64::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                std::hint::black_box(blake3::hash(std::hint::black_box(&buffer)));
                best = best.min(start.elapsed().as_secs_f64());
            }
            println!("{:.3}", buffer.len() as f64 / best / 1e9);
        }
        Some("verify") => {
            let path = Path::new(&args[1]);
            let journal = JournalFile::open(path).unwrap();
            // Warm the page cache so the number is CPU, not disk (streamed: no copy held).
            std::io::copy(
                &mut std::fs::File::open(path).unwrap(),
                &mut std::io::sink(),
            )
            .unwrap();
            let start = Instant::now();
            let report = journal.verify(&Default::default());
            let seconds = start.elapsed().as_secs_f64();
            assert_eq!(report.verdict, Verdict::SealedIntact);
            let (hwm, anon) = common::peak_rss_kib();
            // Diagnostic: the chain's hashing alone over the same map, 64 KiB at a time (what
            // verify costs beyond raw BLAKE3 is then map faults plus framing).
            let start = Instant::now();
            let mut key = [0u8; 32];
            for piece in journal.bytes().chunks(64 << 10) {
                key = *blake3::keyed_hash(&key, piece).as_bytes();
            }
            std::hint::black_box(key);
            let hash_only = start.elapsed().as_secs_f64();
            println!(
                "{} {} {:.3} {} {} {:.3}",
                report.file_bytes, report.counts.requests, seconds, hwm, anon, hash_only
            );
        }
        _ => {
            let sizes: Vec<u64> = if args.is_empty() {
                vec![256, 1024]
            } else {
                args.iter().map(|a| a.parse().unwrap()).collect()
            };
            // The journals go with the folder when the run ends.
            let dir = percentes_testkit::Scratch::new("verify-bench");
            let raw: f64 = common::child(&["raw", "256"]).trim().parse().unwrap();
            println!("raw single-core BLAKE3 (in memory, best of 3): {raw:.3} GB/s");
            println!("| journal | requests | verify time | verify speed | share of raw BLAKE3 | keyed hashing alone over the map | peak RSS (VmHWM) | anonymous RSS |");
            println!("|---|---|---|---|---|---|---|---|");
            for megabytes in sizes {
                let path = dir.join(format!("{megabytes}.pj"));
                common::child(&["generate", &megabytes.to_string(), path.to_str().unwrap()]);
                let line = common::child(&["verify", path.to_str().unwrap()]);
                let f: Vec<&str> = line.split_whitespace().collect();
                let bytes: f64 = f[0].parse().unwrap();
                let seconds: f64 = f[2].parse().unwrap();
                let speed = bytes / seconds / 1e9;
                let hash_only: f64 = f[5].parse().unwrap();
                println!(
                    "| {:.0} MB | {} | {seconds:.3} s | {speed:.3} GB/s | {:.0} % | {:.3} GB/s | {} MiB | {} MiB |",
                    bytes / 1e6,
                    f[1],
                    100.0 * speed / raw,
                    bytes / hash_only / 1e9,
                    f[3].parse::<u64>().unwrap() / 1024,
                    f[4].parse::<u64>().unwrap() / 1024
                );
                std::fs::remove_file(&path).unwrap();
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
