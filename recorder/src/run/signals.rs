//! SIGINT and SIGTERM: a run that is told to stop drains and seals as aborted; the progress line.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use percentes_formats::journal::records::Counts;

/// The counts a sealed journal ended with (for the summary line).
pub fn counts_line(counts: &Counts) -> String {
    format!(
        "{} requests: {} completed, {} errored, {} censored, {} undispatched",
        counts.requests, counts.completed, counts.errored, counts.censored, counts.undispatched
    )
}

/// Writes `text` to stderr, ignoring a closed stderr.
pub fn say(text: &str) {
    SAID.store(true, Ordering::Relaxed);
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Set by [`say`]: something other than the live view wrote to stderr, so the view's block on a
/// terminal is no longer the last thing there and must not be drawn over.
pub(super) static SAID: AtomicBool = AtomicBool::new(false);

pub(super) static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Async-signal-safe: a single atomic store.
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// A flag that becomes true on SIGINT or SIGTERM (a watcher thread copies the signal handler's
/// static flag into it), for [`Options::stop`](super::Options::stop).
pub fn stop_on_signals() -> Arc<AtomicBool> {
    let handler = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to a static atomic, which is async-signal-safe.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    let flag = Arc::new(AtomicBool::new(false));
    let watched = Arc::clone(&flag);
    std::thread::spawn(move || loop {
        if SIGNALLED.load(Ordering::SeqCst) {
            watched.store(true, Ordering::SeqCst);
            return;
        }
        // Nobody else holds the flag any more (the run it belonged to is over): stop watching,
        // so a process that records many runs (calibrate) does not keep a poller per run.
        if Arc::strong_count(&watched) == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    });
    flag
}
