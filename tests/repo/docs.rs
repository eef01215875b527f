//! Documents that must agree with the code.

use super::golden::root;
use percentes_formats::journal::records::{EventKind, CLASSES};
use percentes_formats::pins;

fn read(name: &str) -> String {
    std::fs::read_to_string(root().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn spec_holds_the_pin_table_verbatim() {
    let spec = read("SPEC.md");
    let table = pins::markdown_table();
    assert!(
        spec.contains(&table),
        "SPEC.md's pin table differs from formats::pins::PINS; paste the output of `percentes config pins`"
    );
}

#[test]
fn journal_doc_lists_every_code() {
    let doc = read("formats/JOURNAL.md");
    for (code, name, _) in CLASSES {
        assert!(
            doc.contains(&format!("| {code} | `{name}` |")),
            "class {code} {name} missing from JOURNAL.md"
        );
    }
    for kind in EventKind::ALL {
        let (code, name) = (kind.code(), kind.name());
        assert!(
            doc.contains(&format!("| {code} | `{name}` |")),
            "event kind {code} {name} missing from JOURNAL.md"
        );
    }
    assert!(
        doc.contains(percentes_formats::journal::CODEC),
        "JOURNAL.md must quote the codec string"
    );
}

#[test]
fn readme_commands_are_the_ones_ci_runs() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    let test_command = "cargo test --workspace --locked";
    assert!(
        readme.contains(test_command),
        "README must show the test command"
    );
    assert!(
        ci.contains(test_command),
        ".ci/run must run the README's test command"
    );
}

#[test]
fn the_readmes_real_endpoint_example_loads() {
    let readme = read("README.md");
    let start = readme
        .find("```toml\nschema_version = 1\nprofile = \"hosted\"")
        .expect("README shows a hosted configuration")
        + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let config = percentes_formats::config::Config::parse(&readme.as_bytes()[start..end])
        .unwrap_or_else(|e| panic!("README's hosted example does not load: {e}"));
    assert_eq!(config.target.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert!(config.target.headers.contains_key("OpenAI-Organization"));
}
