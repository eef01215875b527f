//! The seeds/004 scenario catalogue, compiled in, so `percentes scenario list` and
//! `scenario run NAME` work from any folder (as `percentes demo` does with its scenario). The
//! files in scenarios/catalogue stay the source; a test keeps this list and the folder equal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use percentes_scenarios::testbed::isolation_unavailable;

use crate::error::{bail, Context, Result};
use crate::scenario::Scenario;

/// Every catalogue file: (file name, its text).
pub const CATALOGUE: &[(&str, &str)] = &[
    (
        "load-under-rollback.toml",
        include_str!("../../scenarios/catalogue/load-under-rollback.toml"),
    ),
    (
        "load-under-rollout.toml",
        include_str!("../../scenarios/catalogue/load-under-rollout.toml"),
    ),
    (
        "noisy-neighbour-cpu-throttle.toml",
        include_str!("../../scenarios/catalogue/noisy-neighbour-cpu-throttle.toml"),
    ),
    (
        "pod-churn.toml",
        include_str!("../../scenarios/catalogue/pod-churn.toml"),
    ),
    (
        "proxy-failover-vllm.toml",
        include_str!("../../scenarios/catalogue/proxy-failover-vllm.toml"),
    ),
    (
        "replica-loss-black-hole-vllm.toml",
        include_str!("../../scenarios/catalogue/replica-loss-black-hole-vllm.toml"),
    ),
    (
        "replica-loss-black-hole.toml",
        include_str!("../../scenarios/catalogue/replica-loss-black-hole.toml"),
    ),
    (
        "replica-loss-clean-delete.toml",
        include_str!("../../scenarios/catalogue/replica-loss-clean-delete.toml"),
    ),
    (
        "replica-loss-vllm.toml",
        include_str!("../../scenarios/catalogue/replica-loss-vllm.toml"),
    ),
    (
        "scale-out-vllm.toml",
        include_str!("../../scenarios/catalogue/scale-out-vllm.toml"),
    ),
    (
        "store-outage-under-spike.toml",
        include_str!("../../scenarios/catalogue/store-outage-under-spike.toml"),
    ),
];

/// Whether scenario `s` runs, and on what; what is missing here, if anything.
fn status(s: &Scenario) -> String {
    match (&s.scenario.refused, &s.testbed) {
        (Some(why), _) => format!("refused: {why}"),
        (None, Some(t)) if t.replica.is_some() => {
            let how = match t.isolated {
                true => "runnable on real parts, isolated",
                false => "runnable on real parts",
            };
            match crate::realbed::unavailable(
                t.replica.as_ref(),
                t.names.is_some(),
                t.placement.is_some(),
            )
            .or_else(|| next_release_unavailable(t))
            .or_else(|| t.isolated.then(isolation_unavailable).flatten())
            {
                Some(why) => format!("{how} (not here: {why})"),
                None => how.into(),
            }
        }
        (None, Some(t)) if t.isolated => match isolation_unavailable() {
            Some(why) => format!("runnable (isolated testbed; not here: {why})"),
            None => "runnable (isolated testbed)".into(),
        },
        _ => "runnable".into(),
    }
}

/// The compiled-in scenario named `name` (`pod-churn` or `pod-churn.toml`), if there is one.
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let file = if name.ends_with(".toml") {
        name.to_owned()
    } else {
        format!("{name}.toml")
    };
    CATALOGUE.iter().copied().find(|(f, _)| *f == file)
}

/// The scenario at `file`: that file when it exists, else the compiled-in one of that name, else
/// an error that names both and lists the catalogue.
pub fn load(file: &Path) -> Result<Scenario> {
    if file.exists() {
        return Scenario::load(file);
    }
    let name = file.to_string_lossy();
    match find(&name) {
        Some((f, text)) => Scenario::parse(text, &format!("the compiled-in catalogue's {f}")),
        None => Err(crate::error::StudyError::refused(format!(
            "no scenario file {name}, and no catalogue scenario of that name; the catalogue holds {}",
            CATALOGUE
                .iter()
                .map(|(f, _)| f.trim_end_matches(".toml"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `percentes scenario list [DIR]`: the scenario files in DIR, or without it the compiled-in
/// catalogue (so it works from any folder).
pub fn list(dir: Option<&Path>) -> Result<ExitCode> {
    let entries: Vec<(String, Result<Scenario>)> = match dir {
        Some(dir) => {
            let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {}", dir.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .collect();
            paths.sort();
            if paths.is_empty() {
                bail!("{} holds no scenario files (*.toml)", dir.display());
            }
            paths
                .iter()
                .map(|p| (p.display().to_string(), Scenario::load(p)))
                .collect()
        }
        None => CATALOGUE
            .iter()
            .map(|(file, text)| {
                let origin = format!("catalogue: {file}");
                let parsed = Scenario::parse(text, &origin);
                (origin, parsed)
            })
            .collect(),
    };
    let mut bad = 0;
    // Written, not printed: a closed pipe (`| head`) ends the listing, never panics.
    let mut out = std::io::stdout().lock();
    for (path, parsed) in entries {
        match parsed {
            Ok(s) => {
                let status = status(&s);
                let _ = writeln!(
                    out,
                    "{}  [{path}]\n  question: {}\n  expects:  {}\n  status:   {status}",
                    s.scenario.name, s.scenario.question, s.scenario.expectation
                );
            }
            Err(e) => {
                bad += 1;
                let _ = writeln!(out, "{path}: {e:#}");
            }
        }
    }
    Ok(if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Why a rollout's next release cannot start here: its command's environment unset.
fn next_release_unavailable(t: &crate::scenario::TestbedPlan) -> Option<String> {
    let (rollout, base) = t.rollout.as_ref().zip(t.replica.as_ref())?;
    let argv = rollout
        .serving(base)
        .argv("replica-0", ([127, 0, 0, 1], 1).into());
    argv.err().map(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_catalogue_is_the_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/catalogue");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let compiled: Vec<&str> = CATALOGUE.iter().map(|(f, _)| *f).collect();
        assert_eq!(compiled, on_disk, "add the new file to CATALOGUE");
        for (file, text) in CATALOGUE {
            assert_eq!(*text, std::fs::read_to_string(dir.join(file)).unwrap());
            Scenario::parse(text, file).unwrap();
        }
    }

    #[test]
    fn a_name_finds_its_scenario_from_any_folder_and_a_wrong_one_lists_them() {
        assert_eq!(find("pod-churn").unwrap().0, "pod-churn.toml");
        assert_eq!(find("pod-churn.toml").unwrap().0, "pod-churn.toml");
        assert!(find("pod").is_none());
        let s = load(Path::new("pod-churn")).unwrap();
        assert_eq!(s.scenario.name, "pod-churn");
        let error = load(Path::new("no-such-scenario")).unwrap_err().to_string();
        assert!(
            error.contains("no-such-scenario") && error.contains("store-outage-under-spike"),
            "{error}"
        );
    }
}
