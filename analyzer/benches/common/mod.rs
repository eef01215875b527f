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

/// (VmHWM, RssAnon) of this process in KiB, from /proc/self/status (0 where it cannot be read).
pub fn peak_rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("RssAnon:"))
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
