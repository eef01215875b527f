//! A campaign's report (`campaign.json`): the groups of runs, their scalars and summaries, the
//! comparisons and the headline.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Campaign {
    pub schema: &'static str,
    pub spec_applied: String,
    pub not_publishable: Vec<String>,
    pub groups: Vec<Group>,
    /// Between exactly two variants: one Welch test per secondary scalar, Holm-adjusted.
    pub comparisons: Vec<Comparison>,
    pub comparison_note: String,
    /// Whether the variants' order by median TTR to the pre-fault baseline holds in all 27 cells.
    pub ordering: String,
    pub headline: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    pub variant: String,
    pub config_hash: String,
    pub runs: Vec<String>,
    /// Runs dropped from every scalar, with why.
    pub dropped: Vec<String>,
    pub g5: String,
    pub scalars: Vec<Scalar>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Scalar {
    pub name: &'static str,
    pub unit: &'static str,
    /// `primary` or `secondary` (§7).
    pub role: &'static str,
    /// Heavy-tailed scalars lead with the median and the range (§7).
    pub heavy_tailed: bool,
    /// (run, value) for every run that measured it, verbatim.
    pub values: Vec<(String, f64)>,
    /// Runs without a value, with why.
    pub dropped: Vec<String>,
    pub summary: Option<Summary>,
    pub text: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub t_interval: Option<(f64, f64)>,
    pub t_interval_note: Option<String>,
    pub coefficient_of_variation: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub scalar: &'static str,
    pub variants: (String, String),
    pub t: f64,
    pub df: f64,
    pub p: f64,
    pub p_holm: f64,
}
