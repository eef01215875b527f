//! The machine's own wake-up floor: how late a compio (io_uring) timer wakes at an absolute
//! deadline when it does nothing else. A pacer cannot be more punctual than this, so recorder
//! skew is read against it (BENCHMARKS.md, scripts/bench-recorder.sh).
//!
//! `cargo bench -p percentes-recorder --bench floor -- [WAKES] [SPACING_US]` (default 2000 x 1000 us)

use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let wakes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let spacing_us: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let runtime = compio::runtime::Runtime::new().expect("io_uring runtime");
    let mut late_ns: Vec<u64> = runtime.block_on(async move {
        let start = Instant::now() + Duration::from_millis(10);
        let mut late = Vec::with_capacity(wakes);
        for i in 0..wakes as u64 {
            let due = start + Duration::from_micros(i * spacing_us);
            compio::time::sleep_until(due).await;
            late.push(Instant::now().saturating_duration_since(due).as_nanos() as u64);
        }
        late
    });
    late_ns.sort_unstable();
    let q = |p: f64| {
        late_ns[((late_ns.len() as f64 * p).ceil() as usize).clamp(1, late_ns.len()) - 1] as f64
            / 1e3
    };
    println!(
        "floor: {wakes} wakes at {spacing_us} us spacing on compio sleep_until: lateness p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        q(0.5),
        q(0.99),
        *late_ns.last().unwrap() as f64 / 1e3
    );
}
