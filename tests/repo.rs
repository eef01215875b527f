//! Repository-level tests: the committed goldens, the CLI as a user runs it, the documents that
//! must agree with the code, and the direction of dependencies. One test binary on purpose: each
//! extra binary costs a link on CI's two cores.

/// The machine, shared out by weight (two cores; cargo runs a binary's tests in parallel), so
/// that the client-validity gate a test reads is not failed by its neighbours:
/// - [`machine`]: alone. Tests that put the CPU under pressure or keep both cores busy (hogs,
///   the Python verifier on every golden and the spilled table on both cores, several
///   recordings at once, a recording taking a third of a core or more, measured one at a time),
///   or whose verdict compares latencies to a fine margin (the degradation studies'
///   expectations).
/// - [`testbed`]: a study on a testbed of network namespaces (the black-hole beds, the partition
///   on real parts): about a third of a core each, their verdicts read by the target's side
///   (G3, censoring at the timeout within tens of milliseconds) and their client gates read as
///   a diagnosis; shares with one other such at the most (each bed's addresses are its own,
///   `scenarios::netns`), never with anything else.
/// - [`recording`]: a recording whose assertions read time the client kept, but which uses
///   little CPU (measured: `PERCENTES_TEST_HOLDS`, BENCHMARKS.md "The test suite's time"):
///   shares the machine with one other such recording at the most, never with heavier work.
///   Most of a recording's wall time is its schedule's waiting, and two of them together keep
///   the two cores mostly idle, so each still sees the quiet host its gates are judged on.
/// - [`beside`]: lighter work that reads no time the client kept (analysis, export,
///   verification, simulated runs, the Python verifier's single-core checks, `cargo tree`:
///   polars and the analyzer use every core; recordings whose assertions read only what a
///   server did to each request: classes, bytes, headers, counts, the pool's decisions at
///   margins of hundreds of milliseconds): shares with its own kind, never with a recording.
///
/// The holds are served in phases (see [`Holders::may_take`]): the oldest request starts one when
/// the machine is free, the requests of its weight that wait or come after join it while it has
/// room, and a request of another weight that has waited [`PATIENCE`] closes it to newcomers.
/// The suite runs on more test threads than cores (`.cargo/config.toml`), so that the queue
/// holds enough requests to pair: on two threads, a test waiting to be alone left the other
/// core idle behind each lone recording (about 80 s of the suite's 505 s, BENCHMARKS.md "The
/// test suite's time"). Pure file checks (tidy, docs) take nothing.
static MACHINE: std::sync::Mutex<Holders> = std::sync::Mutex::new(Holders {
    alone: false,
    recordings: 0,
    beside: 0,
    testbeds: 0,
    next_ticket: 0,
    waiting: Vec::new(),
});

/// When the suite's first hold was taken (for `PERCENTES_TEST_HOLDS`, see [`Held`]).
static FIRST_HOLD: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// The machine's turn changed: a hold was taken or given back.
static TURN: std::sync::Condvar = std::sync::Condvar::new();

/// Recordings that may share the machine at once (its two cores).
const RECORDINGS_AT_ONCE: usize = 2;

/// Testbeds of network namespaces that may share the machine at once.
const TESTBEDS_AT_ONCE: usize = 2;

/// Lighter tests that may share the machine at once: the analyses use every core through
/// polars, so two keep the machine busy, as two test threads did.
const BESIDE_AT_ONCE: usize = 2;

/// How long a request may wait while the machine serves another weight before that phase takes
/// no newcomer: a bound on how long a test waiting to be alone is passed over. Closing a phase
/// costs an idle core while its last hold drains, and passing a test over costs nothing (it
/// runs later, and the suite ends no later), so the bound is loose; the test threads bound a
/// phase first: once they all wait for another weight, the phase has no one left to admit.
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// Who holds the machine now, and who asks for it (a ticket each, in the order asked).
struct Holders {
    alone: bool,
    recordings: usize,
    beside: usize,
    testbeds: usize,
    next_ticket: u64,
    waiting: Vec<Request>,
}

/// A test waiting for its hold.
struct Request {
    ticket: u64,
    weight: Weight,
    since: std::time::Instant,
}

/// The kinds of hold; see [`MACHINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weight {
    Alone,
    Recording,
    Beside,
    Testbed,
}

impl Holders {
    /// Room for one more hold of `weight` beside those held now.
    fn room(&self, weight: Weight) -> usize {
        match weight {
            Weight::Alone if self.idle() => 1,
            Weight::Alone => 0,
            _ if self.held_but(weight) => 0,
            Weight::Recording => RECORDINGS_AT_ONCE - self.recordings,
            Weight::Beside => BESIDE_AT_ONCE - self.beside,
            Weight::Testbed => TESTBEDS_AT_ONCE - self.testbeds,
        }
    }

    /// Whether a hold of another weight than `weight` is taken.
    fn held_but(&self, weight: Weight) -> bool {
        self.alone
            || (weight != Weight::Recording && self.recordings > 0)
            || (weight != Weight::Beside && self.beside > 0)
            || (weight != Weight::Testbed && self.testbeds > 0)
    }

    fn idle(&self) -> bool {
        !self.held_but(Weight::Alone)
    }

    /// Whether the request `ticket` may take its hold now. It must fit beside the holds taken,
    /// older requests of its weight go first, and:
    /// - on a free machine, the oldest request starts the phase (its weight's requests join);
    /// - in a phase of its weight, it joins unless an older request of another weight has
    ///   waited longer than [`PATIENCE`]: then the phase drains and that one is served next.
    fn may_take(&self, ticket: u64) -> bool {
        let Some(at) = self.waiting.iter().position(|r| r.ticket == ticket) else {
            return false;
        };
        let me = &self.waiting[at];
        let older = &self.waiting[..at];
        let ahead = older.iter().filter(|r| r.weight == me.weight).count();
        if self.room(me.weight) <= ahead {
            return false;
        }
        if self.idle() {
            return older
                .first()
                .is_none_or(|oldest| oldest.weight == me.weight);
        }
        !older
            .iter()
            .any(|r| r.weight != me.weight && r.since.elapsed() > PATIENCE)
    }

    fn count(&mut self, weight: Weight, taken: bool) {
        match weight {
            Weight::Alone => self.alone = taken,
            Weight::Recording if taken => self.recordings += 1,
            Weight::Recording => self.recordings -= 1,
            Weight::Beside if taken => self.beside += 1,
            Weight::Beside => self.beside -= 1,
            Weight::Testbed if taken => self.testbeds += 1,
            Weight::Testbed => self.testbeds -= 1,
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
    holders.waiting.push(Request {
        ticket,
        weight,
        since: std::time::Instant::now(),
    });
    while !holders.may_take(ticket) {
        holders = TURN
            .wait(holders)
            .unwrap_or_else(|poisoned| poisoned.into_inner());
    }
    holders.waiting.retain(|r| r.ticket != ticket);
    holders.count(weight, true);
    drop(holders);
    // Another in line may be able to share with this one.
    TURN.notify_all();
    let since = std::time::Instant::now();
    FIRST_HOLD.get_or_init(|| since);
    Held {
        weight,
        since,
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

/// The machine shared with one other testbed of network namespaces at the most (see
/// [`MACHINE`]).
fn testbed() -> Held {
    hold(Weight::Testbed)
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
/// to FILE, then when it was taken, in seconds after the suite's first hold: the suite's critical
/// path is the holds alone and the recordings' (two at a time), whatever the tests that wait for
/// them, and the gaps between holds are what the order of asking cost (issue 51 item 3;
/// BENCHMARKS.md).
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
            "{:.1} {cpu} {:?} {name} {:.1}\n",
            self.since.elapsed().as_secs_f64(),
            self.weight,
            self.since
                .duration_since(*FIRST_HOLD.get_or_init(|| self.since))
                .as_secs_f64()
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

/// What this machine's own timer does just after a test's recording missed what it needed:
/// three windows of a bare 1 ms ticker (about 4.5 s), each window's p99 lateness beside G2.4's
/// pin, for the failure message. No test records again after a client-gate failure (issue 51
/// item 3): the two whose point is a real kernel or the real scenario runner at millisecond
/// budgets (the starved CPU's unpinned worker in stress.rs, the degradation studies in cli.rs)
/// fail with this, so a host too busy to keep a schedule reads as the host, not as a defect;
/// the acceptance criteria, the stream kinds, compare's journals, the workload models and the
/// shard merge check their timing on the simulator, or assert what needs no calm host.
fn host_timer_after(test: &str) -> String {
    let pin_us = percentes_formats::pins::value::GATES_RUNTIME_STALL_P99_US as u64;
    let windows: Vec<String> = (0..3)
        .map(|_| format!("{} us", host_timer_p99_us()))
        .collect();
    let seen = format!(
        "this machine's own 1 ms timer just after, p99 lateness in three 1.5 s windows: {} \
         (G2.4's pin {pin_us} us; a window over half of it is a host too busy to judge a \
         schedule by)",
        windows.join(", ")
    );
    eprintln!("{test}: {seen}");
    seen
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

/// The lock's phases, decided on a queue made by hand: light recordings pair past a test
/// waiting to be alone until it has waited [`PATIENCE`], a free machine serves the oldest
/// request first, and nothing shares with a test held alone.
#[test]
fn the_machine_lock_pairs_in_phases_and_passes_no_one_over_for_long() {
    let now = std::time::Instant::now();
    let waited = |secs: u64| now - std::time::Duration::from_secs(secs);
    let queue = |asks: &[(Weight, std::time::Instant)]| Holders {
        alone: false,
        recordings: 0,
        beside: 0,
        testbeds: 0,
        next_ticket: asks.len() as u64,
        waiting: asks
            .iter()
            .enumerate()
            .map(|(ticket, &(weight, since))| Request {
                ticket: ticket as u64,
                weight,
                since,
            })
            .collect(),
    };
    let (alone, rec, beside) = (Weight::Alone, Weight::Recording, Weight::Beside);
    let free = |h: &Holders| {
        (0..h.next_ticket)
            .filter(|&t| h.may_take(t))
            .collect::<Vec<_>>()
    };

    // A free machine: the oldest starts a phase of recordings, the next recording joins it past
    // the test waiting to be alone, the third has no room.
    let mut h = queue(&[(rec, now), (alone, now), (rec, now), (rec, now)]);
    assert_eq!(free(&h), [0, 2]);
    // One recording held: a younger one joins while the lone test has waited under PATIENCE...
    h.waiting.remove(0);
    h.recordings = 1;
    assert_eq!(free(&h), [2]);
    // ... and not once it has waited longer: the phase drains, and then it goes first.
    h.waiting[0].since = waited(PATIENCE.as_secs() + 1);
    assert!(free(&h).is_empty());
    h.recordings = 0;
    assert_eq!(free(&h), [1]);
    // Held alone: nothing else, however long it waited.
    h.alone = true;
    h.waiting.remove(0);
    h.waiting.push(Request {
        ticket: 4,
        weight: beside,
        since: waited(600),
    });
    h.next_ticket = 5;
    assert!(free(&h).is_empty());
    // Free again: the oldest (a recording) starts, and the beside test waits for its phase.
    h.alone = false;
    assert_eq!(free(&h), [2, 3]);
    h.recordings = 2;
    h.waiting.retain(|r| r.weight == beside);
    assert!(free(&h).is_empty());
    h.recordings = 0;
    assert_eq!(free(&h), [4]);
    // Lighter tests pair as recordings do, and never beside a recording.
    let mut h = queue(&[(beside, now), (beside, now), (beside, now)]);
    assert_eq!(free(&h), [0, 1]);
    h.recordings = 1;
    assert!(free(&h).is_empty());
    // Testbeds pair with each other only.
    let bed = Weight::Testbed;
    let mut h = queue(&[(bed, now), (rec, now), (bed, now), (bed, now)]);
    assert_eq!(free(&h), [0, 2]);
    h.testbeds = 1;
    h.waiting.remove(0);
    assert_eq!(free(&h), [2]);
    h.testbeds = 0;
    h.beside = 1;
    assert!(free(&h).is_empty());
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
