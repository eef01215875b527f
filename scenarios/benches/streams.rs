//! Benchmark client: holds N concurrent SSE streams against a mock and reports how many ran to
//! completion and how steadily tokens arrived. Driven by scripts/bench-mock.sh (BENCHMARKS.md).
//!
//! `cargo bench -p percentes-scenarios --bench streams -- ADDR STREAMS TOKENS`

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn one(addr: String, tokens: u32) -> std::io::Result<(u32, f64)> {
    let mut s = TcpStream::connect(&addr).await?;
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"x"}}],"max_tokens":{tokens},"stream":true,"ignore_eos":true}}"#
    );
    let request = format!("POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    s.write_all(request.as_bytes()).await?;
    // Count token events incrementally; keep the last (pattern - 1) bytes between reads so an
    // event split across two reads is counted once.
    const PATTERN: &[u8] = b"\"content\":\"tok";
    let mut buf = vec![0u8; 16384];
    let mut window: Vec<u8> = Vec::new();
    let mut seen = 0u32;
    let mut last = Instant::now();
    let mut worst_gap = 0f64;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        window.extend_from_slice(&buf[..n]);
        let found = window
            .windows(PATTERN.len())
            .filter(|w| *w == PATTERN)
            .count() as u32;
        if found > 0 {
            if seen > 0 {
                worst_gap = worst_gap.max(last.elapsed().as_secs_f64() * 1e3);
            }
            seen += found;
            last = Instant::now();
        }
        let keep = window.len().saturating_sub(PATTERN.len() - 1);
        window.drain(..keep);
    }
    Ok((seen, worst_gap))
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let addr = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:18081".into());
    let streams: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let tokens: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let start = Instant::now();
        let mut handles = Vec::with_capacity(streams);
        for _ in 0..streams {
            handles.push(tokio::spawn(one(addr.clone(), tokens)));
            tokio::time::sleep(Duration::from_micros(200)).await; // spread the connects
        }
        let mut complete = 0usize;
        let mut errors = Vec::new();
        let mut gaps = Vec::new();
        for h in handles {
            match h.await.unwrap() {
                Ok((seen, gap)) if seen == tokens => {
                    complete += 1;
                    gaps.push(gap);
                }
                Ok((seen, _)) => errors.push(format!("{seen} of {tokens} tokens")),
                Err(e) => errors.push(e.to_string()),
            }
        }
        gaps.sort_by(f64::total_cmp);
        let p = |q: f64| gaps.get(((gaps.len() as f64 - 1.0) * q) as usize).copied().unwrap_or(f64::NAN);
        println!(
            "streams {streams}, complete {complete}, failed {}, wall {:.1} s, worst inter-token gap per stream: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            errors.len(),
            start.elapsed().as_secs_f64(),
            p(0.5),
            p(0.99),
            p(1.0)
        );
        if let Some(e) = errors.first() {
            println!("first failure: {e}");
        }
    });
}
