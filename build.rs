//! Records the git commit the binary is built from, with `-dirty` when tracked files differ from
//! it; journals and reports cite it.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    // Any change to the sources can make the tree dirty or clean again (cargo scans directories).
    for path in [
        "src",
        "formats",
        "analyzer",
        "recorder",
        "scenarios",
        "study",
        "Cargo.toml",
        "Cargo.lock",
        ".git/index",
    ] {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-env-changed=PERCENTES_COMMIT");
    let commit = std::env::var("PERCENTES_COMMIT").ok().or_else(|| {
        let out = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()?;
        let commit = out
            .status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())?;
        // A build from a work tree with changes to tracked files is not that commit: say so, so
        // a journal or report never cites a commit its code did not come from.
        let dirty = Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .is_some_and(|o| !o.stdout.is_empty());
        Some(if dirty {
            format!("{commit}-dirty")
        } else {
            commit
        })
    });
    println!(
        "cargo:rustc-env=PERCENTES_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
