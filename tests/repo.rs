//! Repository-level tests: the committed goldens, the CLI as a user runs it, the documents that
//! must agree with the code, and the direction of dependencies. One test binary on purpose: each
//! extra binary costs a link on CI's two cores.

/// One machine-heavy test at a time: tests that record, run the testbed or put the CPU under
/// pressure take this lock, so the client-validity gate a test reads is not failed by its
/// neighbours (two cores; cargo runs a binary's tests in parallel). Light tests run beside them.
static MACHINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`MACHINE`]; a test that panicked while holding it does not poison the rest.
fn machine() -> std::sync::MutexGuard<'static, ()> {
    MACHINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

mod repo {
    pub mod acceptance;
    pub mod cli;
    pub mod deps;
    pub mod docs;
    pub mod golden;
    pub mod independent;
    pub mod real_servers;
    pub mod record;
    pub mod testbed;
    pub mod tidy;
}
