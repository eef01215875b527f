//! A short-lived helper program run to completion: the accelerator collectors (G5) and the
//! partition injector's kubectl calls. Its output is read on threads of its own (so a full pipe
//! never stalls it), at most a bound of each stream is kept, and a program past its time limit
//! is killed: a hung `kubectl` can neither block a run's start nor its fault plan.

use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::error::RecordError;

/// Runs `argv` with `input` on its standard input, for at most `timeout`; its standard output
/// (lossily UTF-8, at most `output_max` bytes kept), or why it failed: it could not start, it
/// exited with an error (its standard error quoted, cut to `output_max`), or it ran too long
/// (each of kind [`crate::ErrorKind::Command`]).
pub(crate) fn run(
    argv: &[String],
    input: Option<&str>,
    timeout: Duration,
    output_max: usize,
) -> Result<String, RecordError> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| RecordError::command("names no program"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| RecordError::command(format!("cannot start: {e}")))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = (&mut pipe).take(output_max as u64).read_to_end(&mut bytes);
                // The rest is read and dropped: a closed pipe would kill the program with
                // SIGPIPE and turn a long answer into a failure.
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        // A program that exits without reading its input is judged by its exit status.
        let _ = stdin.write_all(text.as_bytes());
    }
    let status = wait_within(&mut child, timeout)?;
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if !status.success() {
        return Err(RecordError::command(format!(
            "exited with {status}: {}",
            String::from_utf8_lossy(&stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// `child`'s exit status, or the program killed (and reaped) once `timeout` has passed.
fn wait_within(child: &mut Child, timeout: Duration) -> Result<ExitStatus, RecordError> {
    let started = Instant::now();
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| RecordError::command(format!("cannot wait: {e}")))?
        {
            return Ok(status);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RecordError::command(format!(
                "did not finish within {} s",
                timeout.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_program_s_output_its_failure_and_its_time_limit() {
        let limit = Duration::from_secs(10);
        assert_eq!(
            run(&argv(&["cat"]), Some("a document\n"), limit, 1024).unwrap(),
            "a document\n"
        );
        assert_eq!(
            run(
                &argv(&["sh", "-c", "yes | head -c 100000"]),
                None,
                limit,
                10
            )
            .unwrap()
            .len(),
            10,
            "at most output_max bytes kept"
        );
        let e = run(
            &argv(&["sh", "-c", "echo no GPU >&2; exit 9"]),
            None,
            limit,
            1024,
        )
        .unwrap_err();
        let said = e.to_string();
        assert!(
            said.contains("exit status: 9") && said.contains("no GPU"),
            "{said}"
        );
        assert_eq!(e.kind(), crate::ErrorKind::Command);
        let e = run(&argv(&["no-such-program-here"]), None, limit, 1024).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Command);
        assert!(e.to_string().contains("cannot start"), "{e}");
        let e = run(
            &argv(&["sleep", "5"]),
            None,
            Duration::from_millis(200),
            1024,
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Command);
        assert!(e.to_string().contains("did not finish"), "{e}");
    }
}
