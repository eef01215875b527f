//! The machine's own wake-up floor: how late a compio (io_uring) timer wakes at an absolute
//! deadline when it does nothing else, and what each wake costs in CPU. A pacer cannot be more
//! punctual than this, nor cheaper than one wake a request while it wakes for each request, so
//! recorder skew and CPU are read against it (BENCHMARKS.md, scripts/bench-recorder.sh).
//!
//! ```text
//! cargo bench -p percentes-recorder --bench floor -- [WAKES] [SPACING_US]   (default 2000 x 1000 us)
//! cargo bench -p percentes-recorder --bench floor -- poisson RATE SECONDS    (the recorder's schedule)
//! ```
//!
//! The `poisson` mode sleeps to the very schedule `percentes record` would build for a Poisson
//! arrival process at RATE for SECONDS (seed 1): the same intended times, the same wake-ups, no
//! requests.

use std::time::{Duration, Instant};

use percentes_formats::schedule::{Arrival, Grid, Phase, RouteWeight, ScheduleParams};

/// CPU time of this thread, ns (the first field of /proc/thread-self/schedstat: time on a CPU,
/// user and kernel together, as the scheduler accounts it).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let (deadlines_ns, what): (Vec<u64>, String) =
        if args.first().map(String::as_str) == Some("poisson") {
            let rate: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10_000.0);
            let seconds: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10);
            let params = ScheduleParams {
                seed: 1,
                arrival: Arrival::Poisson,
                phases: vec![Phase {
                    name: "measurement".into(),
                    duration_ns: seconds.saturating_mul(1_000_000_000),
                    rate_rps: rate,
                }],
                routes: vec![RouteWeight {
                    label: "r".into(),
                    weight: 1,
                }],
                inject_at_ns: None,
                grid: Grid::Continuous,
                workload: Default::default(),
                prefixes: None,
                abandon: None,
                history: None,
            };
            if let Err(why) = params.validate() {
                eprintln!("floor: not a schedule: {why}");
                std::process::exit(2);
            }
            (
                params.iter().map(|e| e.intended_ns).collect(),
                format!("a Poisson schedule at {rate} rps for {seconds} s"),
            )
        } else {
            let wakes: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(2000);
            let spacing_us: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
            (
                (0..wakes)
                    .map(|i| i.saturating_mul(spacing_us).saturating_mul(1_000))
                    .collect(),
                format!("{spacing_us} us spacing"),
            )
        };
    let wakes = deadlines_ns.len();
    if wakes == 0 {
        eprintln!(
            "floor: {what} has no wakes to time; give a count, or a rate and seconds above 0"
        );
        std::process::exit(2);
    }
    let runtime = compio::runtime::Runtime::new().expect("io_uring runtime");
    let cpu_before = cpu_ns();
    let mut late_ns: Vec<u64> = runtime.block_on(async move {
        let start = Instant::now() + Duration::from_millis(10);
        let mut late = Vec::with_capacity(deadlines_ns.len());
        for at in deadlines_ns {
            let due = start + Duration::from_nanos(at);
            compio::time::sleep_until(due).await;
            late.push(Instant::now().saturating_duration_since(due).as_nanos() as u64);
        }
        late
    });
    let cpu = cpu_ns() - cpu_before;
    late_ns.sort_unstable();
    let q = |p: f64| {
        late_ns[((late_ns.len() as f64 * p).ceil() as usize).clamp(1, late_ns.len()) - 1] as f64
            / 1e3
    };
    println!(
        "floor: {wakes} wakes at {what} on compio sleep_until: lateness p50 {:.1} us, p99 {:.1} us, max {:.1} us; CPU {:.1} us a wake",
        q(0.5),
        q(0.99),
        late_ns[wakes - 1] as f64 / 1e3,
        cpu as f64 / 1e3 / wakes as f64
    );
}
