//! The recorder's host: `percentes doctor` (issue 32), the CPU list `--cpus` takes, and the end
//! of `percentes record`.

use std::process::ExitCode;
use std::time::Duration;

use percentes_formats::config::Config;
use percentes_recorder::run::{self, doctor, say, Options};

use crate::error::{bail, Result};
use crate::Tool;

/// Looks at this host for `seconds` (the ticker pinned to the first of `cpus`, a list such as
/// `0,2-3`, when given), prints what it saw and what to change; exit 2 when a check predicts a
/// failure of the client gate, 0 otherwise.
pub fn doctor(seconds: f64, cpus: Option<String>) -> Result<ExitCode> {
    if !(0.1..=600.0).contains(&seconds) {
        bail!("--seconds {seconds}: look for between 0.1 and 600 seconds");
    }
    let cpus = self::cpus(cpus.as_deref())?;
    let look = doctor::examine(Duration::from_secs_f64(seconds), cpus.as_deref())?;
    for line in look.lines() {
        out!("{line}");
    }
    Ok(if look.risks().is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `percentes record` once its configuration and options are settled: records, prints the
/// summary and the exit status's reason, and, when the client failed its own gate, what it
/// suffered in plain words ([`crate::scenario::client_check`]); the exit status the run owes.
pub fn record(config: &Config, options: &Options, tool: &Tool) -> Result<ExitCode> {
    let summary = run::record(config, options)?;
    for line in summary.lines() {
        out!("{line}");
    }
    let (code, why) = summary.exit();
    if let Some(why) = why {
        say(&format!("percentes: {why}"));
    }
    for line in crate::scenario::client_check(&options.output, tool)? {
        say(&line);
    }
    Ok(ExitCode::from(code))
}

/// A CPU list as the kernel writes one (`0,2-3`), ascending and without repeats; `None` for none.
pub fn cpus(list: Option<&str>) -> Result<Option<Vec<usize>>> {
    let Some(list) = list else {
        return Ok(None);
    };
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim) {
        let number = |s: &str| -> Result<usize> {
            match s.trim().parse::<usize>() {
                Ok(n) if n < 4096 => Ok(n),
                _ => bail!("--cpus {list}: `{s}` is not a CPU number (a list reads `0,2-3`)"),
            }
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    bail!("--cpus {list}: the range `{part}` runs backwards");
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(Some(cpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_list_reads_as_the_kernel_writes_it() {
        assert_eq!(cpus(None).unwrap(), None);
        assert_eq!(cpus(Some("3,0-1,1")).unwrap(), Some(vec![0, 1, 3]));
        for bad in ["", "a", "2-1", "1,,2", "-1", "99999"] {
            let e = cpus(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("--cpus"), "{bad}: {e}");
        }
    }
}
