//! Records the git commit the binary is built from; journals and reports cite it.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo:rerun-if-env-changed=PERCENTES_COMMIT");
    let commit = std::env::var("PERCENTES_COMMIT").ok().or_else(|| {
        let out = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    });
    println!(
        "cargo:rustc-env=PERCENTES_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
