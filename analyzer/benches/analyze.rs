//! Benchmark: the whole analysis of one journal (verify, load, windows, estimators, gates, audit,
//! the inter-chunk second pass, and writing report.json, report.md and histograms.hlog), its wall
//! time per stage and its peak memory (after loading, and overall), for journals of 1 M and 10 M
//! requests (BENCHMARKS.md).
//!
//! `cargo bench -p percentes-analyzer --bench analyze [-- REQUESTS...]` (default: 1000000 10000000).
//! One journal by hand: `BENCH generate REQUESTS FILE`, then `BENCH analyze FILE OUT [TABLE_MEMORY]`
//! (BENCH the binary cargo built; the last argument as `analyze --table-memory`), for instance
//! inside a memory cgroup (BENCHMARKS.md, "A whole day in 4 GiB").
//! Journals are synthetic (formats::journal::synthetic): an experiment-profile schedule over 420 s
//! at the rate that gives the requested count, 94 % of requests completed with 32 content gaps
//! each (a streamed response), 4 % errored, 2 % censored. Each analysis runs in a child process
//! so its peak RSS (VmHWM, which counts the journal's mapped pages while they are resident) is
//! its own. Files live in a temporary folder and are deleted afterwards.

mod common;

use percentes_formats::spec::Spec;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Instant;

use percentes_analyzer::analysis;
use percentes_analyzer::model::Analyzer;
use percentes_analyzer::{load, report, JournalFile};
use percentes_formats::config::Config;
use percentes_formats::journal::synthetic::{self, Options};

const GAPS: u32 = 32;

fn config_for(requests: u64) -> Config {
    common::config_at(requests as f64 / 420.0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("generate") => {
            let requests: u64 = args[1].parse().unwrap();
            let path = PathBuf::from(&args[2]);
            let out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
            let options = Options {
                gaps_per_request: GAPS,
                checkpoint_every_records: 50_000,
                block_target_bytes: 64 << 10,
                ..Options::default()
            };
            synthetic::write(out, &config_for(requests), &options).unwrap();
        }
        Some("analyze") => {
            let path = Path::new(&args[1]);
            let out = PathBuf::from(&args[2]);
            // Warm the page cache so the number is CPU, not disk (streamed: no copy held).
            std::io::copy(
                &mut std::fs::File::open(path).unwrap(),
                &mut std::io::sink(),
            )
            .unwrap();
            let sampler = common::RssSampler::start();
            let start = Instant::now();
            let file = JournalFile::open(path).unwrap();
            // An optional third argument is the table's memory budget (`analyze --table-memory`).
            let options = match args.get(3) {
                Some(size) => load::Options {
                    table_memory: load::parse_size(size).unwrap(),
                    ..load::Options::default()
                },
                None => load::Options::default(),
            };
            let verified = vec![file.verify(&Default::default())];
            let run =
                load::load_verified_with(std::slice::from_ref(&file), verified, &options).unwrap();
            let loaded = start.elapsed().as_secs_f64();
            // The loaded run alone (the dense request table), before any statistic is made.
            let loaded_hwm_kib = common::peak_rss_kib().0;
            let result = analysis::analyze(&run, &file, Spec::CURRENT, &Analyzer::default());
            let analyzed = start.elapsed().as_secs_f64();
            report::write(&result, &run.requests, &out).unwrap();
            let total = start.elapsed().as_secs_f64();
            let (anon_kib, file_kib) = sampler.peaks_kib();
            println!(
                "{} {} {loaded:.3} {:.3} {:.3} {total:.3} {} {loaded_hwm_kib} {anon_kib} {file_kib} {}",
                file.bytes().len(),
                run.requests.len(),
                analyzed - loaded,
                total - analyzed,
                common::peak_rss_kib().0,
                if run.requests.is_spilled() { "spilled" } else { "heap" },
            );
        }
        _ => {
            let sizes: Vec<u64> = if args.is_empty() {
                vec![1_000_000, 10_000_000]
            } else {
                args.iter().map(|a| a.parse().unwrap()).collect()
            };
            // The journals (gigabytes at 10 M requests) go with the folder when the run ends.
            let dir = percentes_testkit::Scratch::new("analyze-bench");
            println!("| requests | journal | table | verify + load | analyze (windows, estimators, gates, audit, gap pass) | write reports | total | peak RSS (VmHWM) | peak RSS after load | peak anonymous | peak file-backed |");
            println!("|---|---|---|---|---|---|---|---|---|---|---|");
            for requests in sizes {
                let path = dir.join(format!("{requests}.pj"));
                common::child(&["generate", &requests.to_string(), path.to_str().unwrap()]);
                let line = common::child(&[
                    "analyze",
                    path.to_str().unwrap(),
                    dir.join(format!("report-{requests}")).to_str().unwrap(),
                ]);
                let f: Vec<&str> = line.split_whitespace().collect();
                let bytes: f64 = f[0].parse().unwrap();
                let hwm_kib: f64 = f[6].parse().unwrap();
                let loaded_kib: f64 = f[7].parse().unwrap();
                let anon_kib: f64 = f[8].parse().unwrap();
                let file_kib: f64 = f[9].parse().unwrap();
                println!(
                    "| {} | {:.2} GB | {} | {} s | {} s | {} s | {} s | {:.2} GiB | {:.2} GiB | {:.2} GiB | {:.2} GiB |",
                    f[1],
                    bytes / 1e9,
                    f[10],
                    f[2],
                    f[3],
                    f[4],
                    f[5],
                    hwm_kib / 1048576.0,
                    loaded_kib / 1048576.0,
                    anon_kib / 1048576.0,
                    file_kib / 1048576.0
                );
                let _ = std::fs::remove_file(&path);
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
