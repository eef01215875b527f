//! Repository-level tests: the committed goldens, the CLI as a user runs it, the documents that
//! must agree with the code, and the direction of dependencies. One test binary on purpose: each
//! extra binary costs a link on CI's two cores.

/// The machine, shared out by weight (two cores; cargo runs a binary's tests in parallel), so
/// that the client-validity gate a test reads is not failed by its neighbours:
/// - [`machine`]: alone. Tests that put the CPU under pressure or keep cores busy (hogs, the
///   Python verifier, several recordings at once, a third of a core or more, measured one at a
///   time), that run a testbed of network namespaces, or whose verdict compares latencies to a
///   fine margin (compare's A/A pair, the degradation studies' expectations).
/// - [`recording`]: a recording whose assertions read time the client kept, but which uses
///   little CPU (measured: `PERCENTES_TEST_HOLDS`, BENCHMARKS.md "The test suite's time"):
///   shares the machine with one other such recording at the most, never with heavier work.
///   Most of a recording's wall time is its schedule's waiting, and two of them together keep
///   the two cores mostly idle, so each still sees the quiet host its gates are judged on.
/// - [`beside`]: lighter work that reads no time the client kept (analysis, export,
///   verification: polars and the analyzer use every core; recordings whose assertions read
///   only what a server did to each request: classes, bytes, headers, counts, the pool's
///   decisions at margins of hundreds of milliseconds): shares with its own kind, never with a
///   recording.
///
/// Holds are granted in the order asked for, so a test waiting to be alone is not passed over by
/// a stream of lighter ones. Pure file checks (tidy, docs) take nothing.
static MACHINE: std::sync::Mutex<Holders> = std::sync::Mutex::new(Holders {
    alone: false,
    recordings: 0,
    beside: 0,
    next_ticket: 0,
    serving: 0,
});

/// The machine's turn changed: a hold was taken or given back.
static TURN: std::sync::Condvar = std::sync::Condvar::new();

/// Recordings that may share the machine at once (its two cores).
const RECORDINGS_AT_ONCE: usize = 2;

/// Who holds the machine now, and the queue of those asking (a ticket each, served in order).
struct Holders {
    alone: bool,
    recordings: usize,
    beside: usize,
    next_ticket: u64,
    serving: u64,
}

/// The kinds of hold; see [`MACHINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weight {
    Alone,
    Recording,
    Beside,
}

impl Holders {
    fn admits(&self, weight: Weight) -> bool {
        match weight {
            Weight::Alone => !self.alone && self.recordings == 0 && self.beside == 0,
            Weight::Recording => {
                !self.alone && self.beside == 0 && self.recordings < RECORDINGS_AT_ONCE
            }
            Weight::Beside => !self.alone && self.recordings == 0,
        }
    }

    fn count(&mut self, weight: Weight, taken: bool) {
        match weight {
            Weight::Alone => self.alone = taken,
            Weight::Recording if taken => self.recordings += 1,
            Weight::Recording => self.recordings -= 1,
            Weight::Beside if taken => self.beside += 1,
            Weight::Beside => self.beside -= 1,
        }
    }
}

/// Waits for this test's turn and takes a hold of `weight`; a test that panicked while holding
/// one gives it back as it unwinds, and poisons nothing.
fn hold(weight: Weight) -> Held {
    let mut holders = MACHINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let ticket = holders.next_ticket;
    holders.next_ticket += 1;
    while holders.serving != ticket || !holders.admits(weight) {
        holders = TURN
            .wait(holders)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    holders.serving += 1;
    holders.count(weight, true);
    drop(holders);
    // The next in line may be able to share with this one.
    TURN.notify_all();
    Held {
        weight,
        since: std::time::Instant::now(),
        cpu_since: cpu_seconds(),
    }
}

/// The machine alone, for a test whose verdict needs it (see [`MACHINE`]).
fn machine() -> Held {
    hold(Weight::Alone)
}

/// The machine shared with one other light recording at the most (see [`MACHINE`]).
fn recording() -> Held {
    hold(Weight::Recording)
}

/// The machine shared with other light tests, never with a recording (see [`MACHINE`]).
fn beside() -> Held {
    hold(Weight::Beside)
}

/// The CPU time this test process and its reaped children have used, in seconds (from
/// `/proc/self/stat`, whose clock ticks are the kernel's fixed USER_HZ, 100 a second); `None`
/// where it cannot be read. A measurement aid for [`Held`]: one test's share is the difference
/// only when the tests run one at a time.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's closing parenthesis; utime is the 14th field of the line.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: Option<Vec<u64>> = fields.get(11..15)?.iter().map(|f| f.parse().ok()).collect();
    Some(ticks?.iter().sum::<u64>() as f64 / 100.0)
}

/// A hold on the machine, of what weight and since when. Under `PERCENTES_TEST_HOLDS=FILE` its
/// release appends the seconds it was held, the CPU seconds the test process and its reaped
/// children used meanwhile (meaningful with `--test-threads=1`), its weight and the test's name
/// to FILE: the suite's critical path is the holds alone and the recordings' (two at a time),
/// whatever the tests that wait for them (issue 51 item 3; BENCHMARKS.md).
struct Held {
    weight: Weight,
    since: std::time::Instant,
    cpu_since: Option<f64>,
}

impl Drop for Held {
    fn drop(&mut self) {
        MACHINE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .count(self.weight, false);
        TURN.notify_all();
        let Some(path) = std::env::var_os("PERCENTES_TEST_HOLDS") else {
            return;
        };
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        let cpu = match (self.cpu_since, cpu_seconds()) {
            (Some(since), Some(now)) => format!("{:.1}", now - since),
            _ => "?".to_owned(),
        };
        let line = format!(
            "{:.1} {cpu} {:?} {name}\n",
            self.since.elapsed().as_secs_f64(),
            self.weight
        );
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
