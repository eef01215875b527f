//! Dependencies point one way, and the analyzer stays portable (DESIGN, style.md).

use std::collections::BTreeSet;
use std::process::Command;

/// Every package reachable from `root` through normal dependencies, for this host
/// (`cargo tree` resolves the locked graph without fetching other platforms' crates).
fn reachable(root: &str) -> BTreeSet<String> {
    reachable_pruned(root, &[], &[])
}

/// As [`reachable`], without the subtrees of the `pruned` packages, with `features` of `root`
/// turned on.
fn reachable_pruned(root: &str, pruned: &[&str], features: &[&str]) -> BTreeSet<String> {
    let mut args: Vec<String> = pruned.iter().map(|p| format!("--prune={p}")).collect();
    args.extend(features.iter().map(|f| format!("--features={f}")));
    args.extend(["-e", "normal", "--format", "{p}", "-p", root].map(String::from));
    let out = cargo_tree(&args);
    let names: BTreeSet<String> = out
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(names.contains(root), "cargo tree did not list {root}");
    names
}

/// `cargo tree` of the locked graph with `args`, in the repository, without the network:
/// its output, one line per entry with no tree drawing.
fn cargo_tree(args: &[String]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--locked", "--offline", "--prefix", "none"])
        .args(args)
        .current_dir(super::golden::root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What must never reach the analyzer: the recorder's runtime, an HTTP client or server, TLS,
/// and the crates that record.
const NOT_IN_THE_ANALYZER: &[&str] = &[
    "io-uring",
    "compio",
    "tokio-uring",
    "hyper",
    "reqwest",
    "h2",
    "rustls",
    "percentes-recorder",
    "percentes-scenarios",
    "percentes-study",
];

/// The polars crates the analyzer names in its default build: the walks that ask what reaches
/// it other than through polars cut the graph at these (`cargo tree` refuses to prune a package
/// the graph lacks).
const POLARS: &[&str] = &["polars-core", "polars-parquet"];

/// The same with `query`, which names the `polars` crate too.
const POLARS_QUERY: &[&str] = &["polars", "polars-core", "polars-parquet"];

#[test]
fn the_analyzer_has_no_io_uring_runtime_or_network_stack() {
    // `cargo tree` resolves the whole graph on one core, and reads no time: light work.
    let _machine = crate::beside();
    let deps = reachable("percentes-analyzer");
    assert!(
        deps.contains("memmap2") && deps.contains("blake3") && deps.contains("polars-parquet"),
        "the walk must see transitive dependencies: {deps:?}"
    );
    assert!(
        !deps.contains("polars-sql"),
        "polars' SQL engine is in the default build: `query` must stay a feature that is off"
    );
    // The default build names polars-core and polars-parquet, not the `polars` crate, whose
    // Parquet feature brings its streaming engine's categorical dtype and polars-ops (1.2 MB of
    // the shipped binary that no column uses), nor polars-io, whose Parquet feature brings four
    // codecs the export does not write (BENCHMARKS.md "A binary to ship").
    for heavy in ["polars", "polars-ops", "polars-io", "brotli", "lz4-sys"] {
        assert!(
            !deps.contains(heavy),
            "{heavy} is in the analyzer's default build"
        );
    }
    for banned in NOT_IN_THE_ANALYZER {
        assert!(
            !deps.contains(*banned),
            "percentes-analyzer depends on {banned}"
        );
    }
    // polars-core links tokio (with its `net` feature) as its internal task runtime; nothing in
    // the analyzer calls it for I/O. Any other path to an async runtime is a regression.
    let without_polars = reachable_pruned("percentes-analyzer", POLARS, &[]);
    assert!(
        !without_polars.contains("tokio") && !without_polars.contains("mio"),
        "tokio reaches the analyzer other than through polars"
    );
}

/// The `query` feature's known exception, held to its bounds: polars SQL needs polars' streaming
/// engine, which turns on polars-io's cloud reading, and that brings reqwest, hyper and rustls.
/// Nothing of ours reaches them (with polars cut off the tree is clean), and `query` refuses the
/// table functions through which SQL could read a file or a URL (analyzer/src/query.rs).
#[test]
fn the_query_features_network_stack_comes_only_through_polars() {
    let _machine = crate::beside();
    let deps = reachable_pruned("percentes-analyzer", &[], &["query"]);
    assert!(deps.contains("polars-sql"), "the walk must see the feature");
    for banned in [
        "io-uring",
        "compio",
        "tokio-uring",
        "percentes-recorder",
        "percentes-study",
    ] {
        assert!(!deps.contains(banned), "`query` brings {banned}");
    }
    let without_polars = reachable_pruned("percentes-analyzer", POLARS_QUERY, &["query"]);
    for banned in NOT_IN_THE_ANALYZER
        .iter()
        .chain(&["tokio", "mio", "object_store"])
    {
        assert!(
            !without_polars.contains(*banned),
            "{banned} reaches the analyzer's `query` other than through polars"
        );
    }
}

/// The interval logs' bytes are zlib-rs's deflate (analyzer/Cargo.toml): the build users make,
/// not only the tests' (whose dev-dependencies turn on more features), must choose it.
#[test]
fn the_interval_logs_deflate_is_zlib_rs_in_the_default_build() {
    let _machine = crate::beside();
    for root in ["percentes-analyzer", "percentes"] {
        let text =
            cargo_tree(&["-e", "normal,features", "-i", "flate2", "-p", root].map(String::from));
        assert!(
            text.lines()
                .any(|l| l.starts_with("flate2 feature \"zlib-rs\"")),
            "{root}'s default build writes interval logs with another deflate backend:\n{text}"
        );
    }
}

#[test]
fn formats_depends_on_no_io_policy() {
    // `cargo tree` resolves the whole graph on one core, and reads no time: light work.
    let _machine = crate::beside();
    let deps = reachable("percentes-formats");
    for banned in [
        "io-uring",
        "compio",
        "tokio",
        "hyper",
        "memmap2",
        "percentes-analyzer",
    ] {
        assert!(
            !deps.contains(banned),
            "percentes-formats depends on {banned}"
        );
    }
}

/// The response path is plain code over bytes (ARCHITECTURE.md, `response/`): no runtime, socket
/// or TLS, and nothing of the recorder's, so the fuzz build that links it rebuilds none of them.
#[test]
fn the_response_path_has_no_runtime() {
    // `cargo tree` resolves the whole graph on one core, and reads no time: light work.
    let _machine = crate::beside();
    let deps = reachable("percentes-response");
    assert!(
        deps.contains("percentes-formats") && deps.contains("serde_json"),
        "the walk must see the response path's dependencies: {deps:?}"
    );
    for banned in [
        "percentes-recorder",
        "percentes-analyzer",
        "io-uring",
        "compio",
        "tokio",
        "mio",
        "h2",
        "rustls",
        "libc",
    ] {
        assert!(
            !deps.contains(banned),
            "percentes-response depends on {banned}"
        );
    }
}

#[test]
fn the_mock_depends_on_neither_half_of_the_instrument() {
    // `cargo tree` resolves the whole graph on one core, and reads no time: light work.
    let _machine = crate::beside();
    let deps = reachable("percentes-scenarios");
    assert!(
        deps.contains("tokio"),
        "the walk must see the mock's runtime: {deps:?}"
    );
    for banned in [
        "percentes-analyzer",
        "percentes-recorder",
        "io-uring",
        "compio",
    ] {
        assert!(
            !deps.contains(banned),
            "percentes-scenarios depends on {banned}"
        );
    }
}

/// The build profiles' per-package settings (Cargo.toml) name packages the build has: a crate
/// renamed or dropped upstream would leave its override silently doing nothing (cargo only
/// warns), and the build times and sizes BENCHMARKS.md states would no longer be this build's.
/// The `dist` profile's opt-level-3 exceptions are there because the recorder runs them for
/// every request, so each must be in the recorder's own tree.
#[test]
fn every_profile_override_names_a_package_the_build_has() {
    let _machine = crate::beside();
    let root = super::golden::root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let locked: BTreeSet<&str> = lock
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|l| l.trim_end_matches('"'))
        .collect();
    let recorder = reachable("percentes-recorder");
    // (profile, package, the override's first setting)
    let mut overrides: Vec<(String, String, String)> = Vec::new();
    let mut lines = manifest.lines();
    while let Some(line) = lines.next() {
        let Some(spec) = line
            .strip_prefix("[profile.")
            .and_then(|l| l.strip_suffix(']'))
        else {
            continue;
        };
        let Some((profile, package)) = spec.split_once(".package.") else {
            continue;
        };
        let setting = lines.next().unwrap_or_default().trim().to_owned();
        overrides.push((profile.into(), package.trim_matches('"').into(), setting));
    }
    assert!(
        overrides
            .iter()
            .any(|(p, n, _)| p == "release" && n == "polars-core"),
        "the walk must see the release profile's overrides: {overrides:?}"
    );
    for (profile, package, setting) in &overrides {
        if package == "*" {
            continue;
        }
        assert!(
            locked.contains(package.as_str()),
            "[profile.{profile}.package.{package}] names no package in Cargo.lock"
        );
        if profile == "dist" && setting == "opt-level = 3" {
            assert!(
                recorder.contains(package),
                "[profile.dist.package.{package}] keeps opt-level 3 for the recorder, which does not use it"
            );
        }
    }
}
