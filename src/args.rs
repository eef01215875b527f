//! The binary's argument value types (clap `ValueEnum`s) and their mapping to the libraries'.

use clap::ValueEnum;
use percentes_formats::config::Profile;

/// How `record` shows its progress.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProgressArg {
    /// A line of counts, skew and stall each second.
    Human,
    /// One JSON object a second.
    Json,
}

/// The profile `init` writes an example for.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProfileArg {
    /// Every pin in force: the only profile whose results can be published.
    Experiment,
    /// Time-compressed by the dev time factor, for demos and tests; never publishable.
    Dev,
    /// A third-party endpoint: client-side pins apply, server-side ones are "not verifiable" (§6).
    Hosted,
}

impl From<ProfileArg> for Profile {
    fn from(p: ProfileArg) -> Profile {
        match p {
            ProfileArg::Experiment => Profile::Experiment,
            ProfileArg::Dev => Profile::Dev,
            ProfileArg::Hosted => Profile::Hosted,
        }
    }
}
