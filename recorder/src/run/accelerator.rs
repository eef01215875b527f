//! Accelerator facts for G5 (SPEC §10): each replica's configured command
//! (`target.accelerator_commands`), run once before the journal exists; its standard output is
//! journaled as the host fact `accelerator.NAME`, the fingerprint `percentes campaign` compares
//! across a campaign's runs.

use std::time::Duration;

use percentes_formats::config::Config;
use percentes_formats::journal::header::HostFact;

use crate::error::RecordError;

/// The longest a collector may take (a `kubectl exec` to a busy node included).
pub const COLLECT_TIMEOUT: Duration = Duration::from_secs(20);
/// The most output of one collector journaled (a GPU query's line is far shorter).
pub const OUTPUT_BYTES_MAX: usize = 4096;

/// Runs every configured collector; refuses the run, naming the replica, when one cannot start,
/// fails, prints nothing or takes longer than [`COLLECT_TIMEOUT`].
pub(super) fn collect(config: &Config) -> Result<Vec<(String, String)>, RecordError> {
    let mut facts = Vec::new();
    for (name, argv) in &config.target.accelerator_commands {
        let refused = |why: RecordError| {
            RecordError::host(format!(
                "the accelerator collector for {name} ({}) {why}: fix target.accelerator_commands.{name}, or remove it (G5 is then unobserved)",
                argv.join(" ")
            ))
        };
        let output = run(argv, COLLECT_TIMEOUT).map_err(refused)?;
        facts.push((HostFact::accelerator(name), output));
    }
    Ok(facts)
}

/// Runs `argv`, returning its trimmed standard output; printing nothing is a failure.
fn run(argv: &[String], timeout: Duration) -> Result<String, RecordError> {
    let text = super::child::run(argv, None, timeout, OUTPUT_BYTES_MAX)?;
    let text = percentes_response::exchange::cut(text.trim(), OUTPUT_BYTES_MAX);
    if text.is_empty() {
        return Err(RecordError::command("printed nothing"));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_collector_s_output_is_the_fact_and_a_failing_one_says_why() {
        assert_eq!(
            run(
                &argv(&["echo", "NVIDIA H200, 1980 MHz, 700.00 W\n"]),
                COLLECT_TIMEOUT
            )
            .unwrap(),
            "NVIDIA H200, 1980 MHz, 700.00 W"
        );
        let e = run(
            &argv(&["sh", "-c", "echo no GPU >&2; exit 9"]),
            COLLECT_TIMEOUT,
        )
        .unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("exit status: 9") && said.contains("no GPU"),
            "{said}"
        );
        // Every failure is the helper's, of one kind; the sentence says which.
        for (argv, timeout, says) in [
            (argv(&["true"]), COLLECT_TIMEOUT, "printed nothing"),
            (
                argv(&["no-such-program-here"]),
                COLLECT_TIMEOUT,
                "cannot start",
            ),
            (
                argv(&["sleep", "5"]),
                Duration::from_millis(200),
                "did not finish",
            ),
        ] {
            let e = run(&argv, timeout).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Command, "{e}");
            assert!(e.to_string().contains(says), "{e}");
        }
        assert_eq!(e.kind(), crate::ErrorKind::Command);
    }
}
