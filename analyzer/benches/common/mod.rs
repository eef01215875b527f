//! What the analyzer's benchmarks share: a no-fault experiment-profile config at a chosen rate,
//! this process's memory high-water marks, and running a measurement in a child process (so each
//! measurement's peak memory is its own).

use std::process::Command;

use percentes_formats::config::Config;

/// An experiment-profile configuration without a fault (phases 420 s in all) at `rate` rps.
pub fn config_at(rate: f64) -> Config {
    let text = format!(
        "schema_version = 1\nprofile = \"experiment\"\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:8000\"\n\
         model = \"mock\"\n[schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = {rate:.3}\n[fault]\nvariant = \"none\"\n\
         [[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    Config::parse(text.as_bytes()).expect("bench config")
}

/// The fields of this process's /proc/self/status named in `names` (each with its colon), in
/// KiB, 0 where one cannot be read.
fn status_kib<const N: usize>(names: [&str; N]) -> [u64; N] {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    names.map(|name| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// (VmHWM, RssAnon) of this process in KiB, from /proc/self/status (0 where it cannot be read).
pub fn peak_rss_kib() -> (u64, u64) {
    let [hwm, anon] = status_kib(["VmHWM:", "RssAnon:"]);
    (hwm, anon)
}

/// Runs this benchmark binary again with `args` and returns its standard output.
pub fn child(args: &[&str]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The largest anonymous and file-backed resident sets this process reaches while it runs,
/// sampled every 10 ms by a thread of its own (VmHWM is their sum at its peak; the split says
/// how much of it is memory the process must keep, and how much is pages the kernel may drop).
#[derive(Debug)]
#[allow(dead_code)] // the analyze bench's; the verify bench shares this module
pub struct RssSampler {
    peaks: std::sync::Arc<[std::sync::atomic::AtomicU64; 2]>,
}

#[allow(dead_code)]
impl RssSampler {
    /// Starts sampling.
    pub fn start() -> RssSampler {
        use std::sync::atomic::{AtomicU64, Ordering};
        let peaks = std::sync::Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let shared = peaks.clone();
        std::thread::spawn(move || loop {
            let [anon, file, shmem] = status_kib(["RssAnon:", "RssFile:", "RssShmem:"]);
            shared[0].fetch_max(anon, Ordering::Relaxed);
            shared[1].fetch_max(file + shmem, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(10));
        });
        RssSampler { peaks }
    }

    /// (largest RssAnon, largest RssFile + RssShmem) so far, in KiB.
    pub fn peaks_kib(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering;
        (
            self.peaks[0].load(Ordering::Relaxed),
            self.peaks[1].load(Ordering::Relaxed),
        )
    }
}
