//! The studies percentes runs on this machine's local testbed, as a library the binary calls and
//! the tests can drive without a subprocess.
//!
//! - [`scenario`]: scenario files (seeds/004's catalogue: the question, the blast radius, the
//!   budgets and expectations, the testbed and the run configuration as a template), the runner
//!   that starts the testbed, records through the real recorder while it plays the orchestrator,
//!   then verifies, analyzes and writes `scenario.md` with every expectation checked.
//! - [`calibrate`]: SPEC §10's ramp of one replica addressed directly, each step a recorded and
//!   analyzed journal, the decision over two or three calibrations, the whole trace written.
//! - [`demo`]: the catalogue's clean-delete scenario, compiled in (README command 1).
//! - [`host`]: `percentes doctor`, the look at a recorder's host before a run.
//!
//! What it is not for: measuring anything itself. Every number comes from the recorder's journal
//! through the analyzer; this crate only arranges the experiment around them. It records, so it
//! is Linux only; elsewhere the crate is empty and the binary says why.
//!
//! ```no_run
//! # #[cfg(target_os = "linux")]
//! # fn main() -> percentes_study::Result<()> {
//! use percentes_study::{scenario, Tool};
//! let tool = Tool::of("0.1.0", "unknown");
//! let scenario = scenario::Scenario::parse(scenario::DEMO_SCENARIO, "built-in")?;
//! scenario::run(&scenario, "demo-out".as_ref(), false, scenario::Timing::Dev(10), &tool, false)?;
//! # Ok(())
//! # }
//! # #[cfg(not(target_os = "linux"))]
//! # fn main() {}
//! ```

#![warn(missing_docs)]

/// The build that runs a study: cited by every journal it records and every report it writes;
/// and, on Linux, what records its runs.
#[derive(Clone)]
pub struct Tool {
    /// The binary's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// The commit the binary was built from, or `unknown`.
    pub commit: String,
    /// What records every run a study makes (a calibration's steps, a sweep's rates, a
    /// scenario's run, `record`'s): the recorder, unless [`Tool::recording_with`] gave a
    /// stand-in.
    #[cfg(target_os = "linux")]
    recording: std::sync::Arc<Recording>,
}

/// How a study records one of its runs: a configuration and the recorder's options, to what
/// the recorder says of the journal it sealed at `options.output`.
#[cfg(target_os = "linux")]
pub type Recording = dyn Fn(
        &percentes_formats::config::Config,
        &percentes_recorder::run::Options,
    ) -> std::result::Result<
        percentes_recorder::run::Summary,
        percentes_recorder::error::RecordError,
    > + Send
    + Sync;

impl Tool {
    /// The build of `version` from `commit`, recording with the recorder itself.
    pub fn of(version: &str, commit: &str) -> Tool {
        Tool {
            version: version.into(),
            commit: commit.into(),
            #[cfg(target_os = "linux")]
            recording: std::sync::Arc::new(percentes_recorder::run::record),
        }
    }

    /// This tool, its studies' runs recorded by `recording` instead of the recorder: the
    /// repository's tests give the recorder's simulator (its production worker loop on a
    /// scripted target), so that a calibration's ramp or a sweep's table is checked exactly
    /// and in milliseconds. Nothing in the binary calls it.
    #[cfg(target_os = "linux")]
    pub fn recording_with(mut self, recording: std::sync::Arc<Recording>) -> Tool {
        self.recording = recording;
        self
    }

    /// Records one run with this tool's recording (the recorder's `record`, unless a stand-in
    /// was given).
    #[cfg(target_os = "linux")]
    pub fn record(
        &self,
        config: &percentes_formats::config::Config,
        options: &percentes_recorder::run::Options,
    ) -> std::result::Result<percentes_recorder::run::Summary, percentes_recorder::error::RecordError>
    {
        (self.recording)(config, options)
    }
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("version", &self.version)
            .field("commit", &self.commit)
            .finish_non_exhaustive()
    }
}

/// `println!` that a closed stdout (`percentes demo | head`, a terminal that went away) cannot
/// turn into a panic mid-run: the line is lost, and the run goes on to drain, seal and exit with
/// its status.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` with the same promise as [`out!`].
macro_rules! out_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

#[cfg(target_os = "linux")]
pub mod calibrate;
#[cfg(target_os = "linux")]
pub mod catalogue;
#[cfg(target_os = "linux")]
pub mod demo;
pub mod error;
#[cfg(target_os = "linux")]
pub mod host;
#[cfg(target_os = "linux")]
pub mod placement;
#[cfg(target_os = "linux")]
pub mod realbed;
#[cfg(target_os = "linux")]
pub mod scenario;
pub mod show;
#[cfg(target_os = "linux")]
pub mod sweep;

pub use error::{ErrorKind, Result, StudyError};
#[cfg(target_os = "linux")]
pub use host::{cpus, doctor};
