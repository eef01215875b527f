//! `percentes demo`: the replica-loss study end to end on this machine, with nothing to install.
//!
//! It runs the catalogue's clean-delete scenario (`scenarios/catalogue/replica-loss-clean-delete.toml`,
//! compiled in): two mock replicas behind the router, a clean delete of replica-1 under load in
//! the dev profile (time factor 10: about 1 m 45 s of load), recorded by the real recorder, the
//! orchestrator's replacement reported into the journal's timeline, verified, analyzed, and
//! written with its plots into one folder.

use std::path::Path;
use std::process::ExitCode;

use crate::error::Result;

use crate::scenario::{self, Scenario, Timing};
use crate::Tool;

/// Runs the demo into `output`, time-compressed by `time_factor` (10: about 1 m 45 s of load);
/// `diagnose` analyzes an invalid run's statistics anyway, marked NOT PUBLISHABLE.
pub fn run(
    output: &Path,
    force: bool,
    time_factor: u32,
    diagnose: bool,
    tool: &Tool,
) -> Result<ExitCode> {
    out!("percentes demo: needs no root; the clean-delete study from the scenario catalogue.");
    let scenario = Scenario::parse(scenario::DEMO_SCENARIO, "the built-in demo scenario")?;
    scenario::run(
        &scenario,
        output,
        force,
        Timing::Dev(time_factor),
        tool,
        diagnose,
    )
}
