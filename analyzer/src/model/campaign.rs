//! A campaign's report (`campaign.json`): the groups of runs, their scalars and summaries, the
//! comparisons and the headline.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
/// A campaign: N runs per (variant, configuration), summarized (§5, §7).
pub struct Campaign {
    /// The campaign schema (`percentes-campaign/2`: groups by design since issue 36).
    pub schema: &'static str,
    /// The spec version the runs were analyzed under.
    pub spec_applied: String,
    /// Every run's reasons not to publish, each named by its run.
    pub not_publishable: Vec<String>,
    /// One group per (variant, configuration hash).
    pub groups: Vec<Group>,
    /// Between exactly two variants: one Welch test per secondary scalar, Holm-adjusted.
    pub comparisons: Vec<Comparison>,
    /// Why there are or are no comparisons.
    pub comparison_note: String,
    /// Whether the variants' order by median TTR to the pre-fault baseline holds in all 27 cells.
    pub ordering: String,
    /// The appendix's headline, its slots filled from the groups.
    pub headline: String,
}

#[derive(Clone, Debug, Serialize)]
/// The runs of one (variant, configuration).
pub struct Group {
    /// The fault variant.
    pub variant: String,
    /// The configuration's design hash, hex: what groups the runs (the configuration less the
    /// addresses and files a testbed assigns per run; SPEC §5 "Campaign groups").
    pub design_hash: String,
    /// The distinct config hashes of its runs' journals, hex (one when every run had the same
    /// bytes; more when only testbed-local keys differed).
    pub config_hashes: Vec<String>,
    /// The runs, by name.
    pub runs: Vec<String>,
    /// Runs dropped from every scalar, with why.
    pub dropped: Vec<String>,
    /// G5 across the group's runs.
    pub g5: String,
    /// The capacity check across the group's runs (§10, v0.5): absent under an older version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    /// The run-level scalars.
    pub scalars: Vec<Scalar>,
}

#[derive(Clone, Debug, Serialize)]
/// One run-level scalar over a group's runs.
pub struct Scalar {
    /// Its name.
    pub name: &'static str,
    /// Its unit.
    pub unit: &'static str,
    /// `primary` or `secondary` (§7).
    pub role: &'static str,
    /// Heavy-tailed scalars lead with the median and the range (§7).
    pub heavy_tailed: bool,
    /// (run, value) for every run that measured it, verbatim.
    pub values: Vec<(String, f64)>,
    /// Runs without a value, with why.
    pub dropped: Vec<String>,
    /// Its summary over the values, when any run measured it.
    pub summary: Option<Summary>,
    /// The scalar in words.
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
/// A summary of one scalar's values.
pub struct Summary {
    /// Values.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// The pinned t-interval (df = 4), when it applies.
    pub t_interval: Option<(f64, f64)>,
    /// Why there is no t-interval.
    pub t_interval_note: Option<String>,
    /// Run-to-run coefficient of variation: the noise floor.
    pub coefficient_of_variation: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
/// A Welch test between two variants on one scalar.
pub struct Comparison {
    /// The scalar.
    pub scalar: &'static str,
    /// The two variants.
    pub variants: (String, String),
    /// Welch's t.
    pub t: f64,
    /// Its degrees of freedom.
    pub df: f64,
    /// The two-sided p-value.
    pub p: f64,
    /// The p-value after Holm's correction.
    pub p_holm: f64,
}
