//! Repository-level tests: the committed goldens, the CLI as a user runs it, the documents that
//! must agree with the code, and the direction of dependencies. One test binary on purpose: each
//! extra binary costs a link on CI's two cores.

/// The machine, shared out by weight: tests that record, run the testbed or put the CPU under
/// pressure hold it alone ([`machine`]), so the client-validity gate a test reads is not failed
/// by its neighbours (two cores; cargo runs a binary's tests in parallel). Tests that spawn the
/// binary for lighter work (analysis, export, verification: polars and the analyzer use every
/// core) share it with each other but never with a recording that holds it ([`beside`]); so do
/// recordings whose assertions read no time the client kept, only what a server did to each
/// request (classes, bytes, headers, counts, the pool's decisions at margins of hundreds of
/// milliseconds), which a busy neighbour cannot change. Pure file checks (tidy, docs) take
/// nothing.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The machine alone, for a test whose verdict depends on the client keeping its schedule; a
/// test that panicked while holding it does not poison the rest.
fn machine() -> Alone {
    let guard = MACHINE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Alone {
        _guard: guard,
        since: std::time::Instant::now(),
    }
}

/// The machine held alone, and since when. Under `PERCENTES_TEST_HOLDS=FILE` its release appends
/// the test's name and the seconds it held the machine to FILE: the suite's critical path is the
/// sum of these, whatever the tests that wait for it (issue 51 item 3; BENCHMARKS.md).
struct Alone {
    _guard: std::sync::RwLockWriteGuard<'static, ()>,
    since: std::time::Instant,
}

impl Drop for Alone {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("PERCENTES_TEST_HOLDS") else {
            return;
        };
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        let line = format!("{:.1} {name}\n", self.since.elapsed().as_secs_f64());
        use std::io::Write;
        // A measurement aid: a file that cannot be written loses the line, never the test.
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// The machine shared with other light tests, never with one that holds [`machine`].
fn beside() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `work` on each of `items`, on as many threads as this machine has cores, each taking the next
/// item as it finishes one; the results in the items' order. For a test that holds the machine.
pub(crate) fn on_every_core<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..cores)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, work(item)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// The p99 lateness of a bare 1 ms ticker on this machine over 1.5 s (a calibration step at
/// time factor 100), in microseconds, counted as the recorder's stall ticker counts it (absolute
/// deadlines; a wake k periods late is k + 1 samples): the floor under gate G2.4, measured
/// without the recorder.
fn host_timer_p99_us() -> u64 {
    let period = std::time::Duration::from_millis(1);
    let mut late: Vec<u64> = Vec::with_capacity(1600);
    let mut deadline = std::time::Instant::now();
    while late.len() < 1500 {
        deadline += period;
        let now = std::time::Instant::now();
        if deadline > now {
            std::thread::sleep(deadline - now);
        }
        let behind = std::time::Instant::now().saturating_duration_since(deadline);
        let missed = (behind.as_nanos() / period.as_nanos()) as u32;
        for k in (0..=missed).rev() {
            late.push((behind - period * k).as_micros() as u64);
        }
        deadline += period * missed;
    }
    late.sort_unstable();
    late[late.len() * 99 / 100]
}

/// Before recording again after a client-gate failure: waits (up to three minutes) until this
/// machine's own timer is well inside the G2.4 pin (p99 under half of it) for three windows in a
/// row, so a retry is not spent inside the same burst of host noise (on the project's VM the
/// noise comes and goes within seconds, and a single calm window said little). Returns what it
/// saw, for the failure message.
fn await_calm(test: &str) -> String {
    let half_pin_us = percentes_formats::pins::value::GATES_RUNTIME_STALL_P99_US as u64 / 2;
    let start = std::time::Instant::now();
    let mut calm = 0;
    loop {
        let p99 = host_timer_p99_us();
        calm = if p99 < half_pin_us { calm + 1 } else { 0 };
        let waited = start.elapsed().as_secs();
        if calm == 3 || waited >= 180 {
            let seen = format!(
                "host timer p99 {p99} us ({calm} calm windows in a row) after waiting {waited} s"
            );
            eprintln!(
                "{test}: the client gate failed on this busy machine; {seen}; recording again"
            );
            return seen;
        }
    }
}

/// `count` CPU hogs at full load, for a minute at the most (`stress-ng`, which `.ci/run`
/// installs), pinned to CPU `on` when given; stopped and reaped with [`Hogs::stop`] or when
/// dropped, so a failing test does not leave them running.
fn hogs(count: usize, on: Option<usize>) -> Hogs {
    let mut command = std::process::Command::new("stress-ng");
    command.args(["--cpu", &count.to_string(), "--cpu-load", "100"]);
    if let Some(cpu) = on {
        command.args(["--taskset", &cpu.to_string()]);
    }
    command.args(["--timeout", "60s", "--quiet"]);
    Hogs(command.spawn().expect("stress-ng starts"))
}

/// Running CPU hogs ([`hogs`]).
struct Hogs(std::process::Child);

impl Hogs {
    /// Stops them now.
    fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.end();
    }
}

/// A test whose prerequisite is missing: under `PERCENTES_CI` (set by `.ci/run`, which installs
/// every prerequisite) it fails with the reason; elsewhere it says it skipped, on stderr.
fn prerequisite_missing(test: &str, why: &str) {
    assert!(
        std::env::var_os("PERCENTES_CI").is_none(),
        "{test} must run under PERCENTES_CI, and cannot: {why}"
    );
    eprintln!("SKIPPED {test}: {why}");
}

/// Whether `program` cannot run here (`program --version` fails to start): then it reports the
/// missing prerequisite for `test` ([`prerequisite_missing`]) with `why`, and the test returns.
fn lacks(test: &str, program: &str, why: &str) -> bool {
    let missing = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_err();
    if missing {
        prerequisite_missing(test, why);
    }
    missing
}

mod repo {
    pub mod acceptance;
    pub mod cli;
    pub mod deploy;
    pub mod deps;
    pub mod docs;
    pub mod golden;
    pub mod http2;
    pub mod independent;
    pub mod kube;
    pub mod proxy;
    pub mod query;
    pub mod real_servers;
    pub mod record;
    pub mod shards;
    pub mod streams;
    pub mod stress;
    pub mod testbed;
    pub mod tidy;
    pub mod workload;
}
