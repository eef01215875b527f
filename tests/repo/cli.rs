//! The CLI as a user runs it.

use super::golden::{percentes, root};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("percentes-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn init_writes_valid_configs_for_every_profile() {
    let dir = scratch("init");
    for profile in ["dev", "experiment", "hosted"] {
        let path = dir.join(format!("{profile}.toml"));
        let p = path.to_str().unwrap();
        let (code, _, stderr) = percentes(&["init", "--profile", profile, "-o", p]);
        assert_eq!(code, 0, "{stderr}");
        let (code, stdout, stderr) = percentes(&["config", "check", p]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains(&format!("profile: {profile}")), "{stdout}");
        assert!(stdout.contains("blake3: "), "{stdout}");
        assert!(stdout.contains("client.timeout_s = 30 s"), "{stdout}");
        let (code, _, stderr) = percentes(&["init", "--profile", profile, "-o", p]);
        assert_eq!(code, 1);
        assert!(stderr.contains("--force"), "{stderr}");
    }
    let (_, stdout, _) = percentes(&["config", "check", dir.join("hosted.toml").to_str().unwrap()]);
    assert!(stdout.contains("NOT VERIFIABLE"), "{stdout}");
    let (_, stdout, _) = percentes(&["config", "check", dir.join("dev.toml").to_str().unwrap()]);
    assert!(stdout.contains("NOT PUBLISHABLE"), "{stdout}");
    let (code, stdout, _) = percentes(&[
        "config",
        "check",
        "--json",
        dir.join("dev.toml").to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["profile"], "dev");
    assert_eq!(json["publishable"], false);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_weakened_pin_is_refused_naming_key_clause_and_values() {
    let dir = scratch("weak");
    let path = dir.join("weak.toml");
    let text = percentes_formats::config::example(percentes_formats::config::Profile::Dev)
        .replace("[target]\n", "[gates]\nsend_skew_max_ms = 80\n\n[target]\n");
    std::fs::write(&path, text).unwrap();
    let (code, stdout, stderr) = percentes(&["config", "check", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    for needle in [
        "gates.send_skew_max_ms",
        "= 80",
        "§2",
        "pinned value is 50",
        "at most 50",
    ] {
        assert!(stderr.contains(needle), "{needle} missing from: {stderr}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn verify_reports_tampering_with_its_location_and_fails() {
    let dir = scratch("tamper");
    let mut bytes = std::fs::read(root().join("golden/v1/sealed.pj")).unwrap();
    let at = bytes.len() - 300;
    bytes[at] ^= 0x01;
    let path = dir.join("tampered.pj");
    std::fs::write(&path, &bytes).unwrap();
    let (code, stdout, _) = percentes(&["verify", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("verdict: tampered"), "{stdout}");
    assert!(stdout.contains("problem: record "), "{stdout}");
    assert!(
        stdout.contains("expected: ") && stdout.contains("found: "),
        "{stdout}"
    );

    let (code, stdout, _) = percentes(&["verify", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["verdict"], "tampered");
    assert!(json["problem"]["byte_offset"].as_u64().unwrap() <= at as u64);

    let not_journal = dir.join("notes.txt");
    std::fs::write(&not_journal, "hello").unwrap();
    let (code, stdout, _) = percentes(&["verify", not_journal.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stdout.contains("verdict: not-a-journal"), "{stdout}");
    let (code, _, stderr) = percentes(&["verify", dir.join("absent.pj").to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("absent.pj"), "{stderr}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn verify_checks_a_trusted_head() {
    let (_, stdout, _) = percentes(&["verify", "--json", "golden/v1/sealed.pj"]);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let head = json["chain_head"].as_str().unwrap().to_owned();
    let (code, stdout, _) = percentes(&["verify", "golden/v1/sealed.pj", "--expect-head", &head]);
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("trusted head: matches the final chain head"),
        "{stdout}"
    );
    let wrong = "0".repeat(64);
    let (code, stdout, _) = percentes(&["verify", "golden/v1/sealed.pj", "--expect-head", &wrong]);
    assert_eq!(code, 1);
    assert!(stdout.contains("NOT on the chain"), "{stdout}");
    let (code, _, stderr) = percentes(&["verify", "golden/v1/sealed.pj", "--expect-head", "abc"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("64 hex digits"), "{stderr}");
}

#[test]
fn keygen_writes_a_private_key_and_another_key_is_refused() {
    let dir = scratch("keygen");
    let prefix = dir.join("operator");
    let (code, _, stderr) = percentes(&["keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let public = dir.join("operator.pub");
    assert_eq!(std::fs::read_to_string(&public).unwrap().trim().len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("operator.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (code, stdout, _) = percentes(&[
        "verify",
        "golden/v1/signed.pj",
        "--pubkey",
        public.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains("signed by a key other than the trusted one"),
        "{stdout}"
    );
    let (code, _, _) = percentes(&["keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(code, 1, "refuses to overwrite");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn inspect_shows_the_header_and_filters_records() {
    let (code, stdout, _) = percentes(&["inspect", "golden/v1/sealed.pj", "--config"]);
    assert_eq!(code, 0);
    for needle in [
        "spec at capture: v0.2",
        "schedule: seed 20261130",
        "phase measurement",
        "--- config ---",
        "shard: 0 of 1",
    ] {
        assert!(stdout.contains(needle), "{needle} missing:\n{stdout}");
    }
    let (code, stdout, _) = percentes(&["inspect", "golden/v1/sealed.pj", "--json"]);
    assert_eq!(code, 0);
    let header: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(header["schedule"]["arrival"], "poisson");
    let (code, stdout, _) = percentes(&[
        "inspect",
        "golden/v1/sealed.pj",
        "--records",
        "--kind",
        "request",
        "--limit",
        "3",
    ]);
    assert_eq!(code, 0);
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert!(lines
        .iter()
        .all(|l| l["record"] == "request" && l["outcome_name"].is_string()));
    let (_, _, stderr) = percentes(&["inspect", "golden/v1/torn.pj"]);
    assert!(stderr.contains("unsealed-prefix"), "{stderr}");
}

#[test]
fn version_names_the_format_and_spec() {
    let (code, stdout, _) = percentes(&["--version"]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&format!(
            "journal format v{}",
            percentes_formats::journal::FORMAT_VERSION
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(percentes_formats::pins::SPEC_VERSION_CURRENT),
        "{stdout}"
    );
}
