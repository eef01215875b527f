//! Campaigns (SPEC §5, §7): the runs of each (variant, configuration), their run-level scalars
//! verbatim, median, mean, the pinned t-interval at N = 5, the range, the run-to-run coefficient of
//! variation as the noise floor, Welch comparisons between two variants with Holm's correction
//! over the secondaries, the sweep-ordering check, G5 across runs, and the headline with its slots
//! filled from measurements only.
//!
//! A run that failed a run-invalidating gate is dropped and named, never imputed; a value a run
//! could not measure (a TTR that did not happen, an equilibrium not estimable) is dropped from that
//! scalar and named the same way. There is no bootstrap (§7).

use std::collections::BTreeMap;

use percentes_formats::journal::header::HostFact;
use percentes_formats::journal::probe::CapacityProbe;

use crate::estimate::runs;
use crate::headline;
use crate::model::{Campaign, Comparison, Group, RecoveryReport, Report};
use crate::summaries::{self, RunRef};

/// One analyzed run of a campaign.
#[derive(Clone, Debug)]
pub struct CampaignRun {
    /// How the campaign names it (the journal's file name).
    pub name: String,
    /// Its analysis.
    pub report: Report,
    /// The journal header's `accelerator.*` host facts (G5).
    pub accelerator: Vec<(String, String)>,
    /// Its configuration's design hash (runs are grouped by it), or its config hash where the
    /// configuration is not TOML.
    pub design: String,
    /// The median of its capacity probe, ms, when its journal holds one (§10).
    pub probe_ms: Option<f64>,
}

impl CampaignRun {
    /// One journal's run: its report under `spec`, named `name`, with the header's
    /// `accelerator.*` host facts for G5.
    pub fn analyze<'a>(
        name: String,
        run: &crate::load::Run,
        file: impl Into<crate::Files<'a>>,
        spec: percentes_formats::spec::Spec,
        analyzer: &crate::model::Analyzer,
    ) -> CampaignRun {
        let report = crate::analysis::analyze(run, file, spec, analyzer);
        CampaignRun {
            name,
            design: percentes_formats::config::design_hash(&run.header.config_bytes)
                .unwrap_or_else(|| report.provenance.config_hash.clone()),
            report,
            probe_ms: run
                .header
                .fact(HostFact::CapacityProbe)
                .and_then(|v| CapacityProbe::parse(v).ok())
                .and_then(|p| p.median_ms()),
            accelerator: run
                .header
                .host
                .iter()
                .filter(|(k, _)| k.starts_with("accelerator"))
                .cloned()
                .collect(),
        }
    }

    fn as_ref(&self) -> RunRef<'_> {
        RunRef {
            name: &self.name,
            report: &self.report,
            accelerator: &self.accelerator,
            design: &self.design,
            probe_ms: self.probe_ms,
        }
    }
}

/// Each journal (or merged run's manifest) of `paths` loaded with `options` and analyzed under
/// `spec`, named as [`run_names`] names them: what `percentes campaign` reads.
pub fn journals(
    paths: &[std::path::PathBuf],
    spec: percentes_formats::spec::Spec,
    options: &crate::load::Options,
    analyzer: &crate::model::Analyzer,
) -> Result<Vec<CampaignRun>, crate::shards::ShardError> {
    let mut runs = Vec::new();
    for (path, name) in paths.iter().zip(run_names(paths)) {
        let (files, run) = crate::shards::open_with(path, options)?;
        runs.push(CampaignRun::analyze(name, &run, &files, spec, analyzer));
    }
    Ok(runs)
}

/// How a campaign names its runs: by file name, or by the path as given where two files share
/// a name (five scenario runs' `run.pj`, each in its own folder).
pub fn run_names(paths: &[std::path::PathBuf]) -> Vec<String> {
    let file_name = |p: &std::path::Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    paths
        .iter()
        .map(|path| {
            let shared = paths
                .iter()
                .filter(|p| file_name(p) == file_name(path))
                .count()
                > 1;
            match file_name(path) {
                Some(name) if !shared => name,
                _ => path.display().to_string(),
            }
        })
        .collect()
}

/// Builds the campaign from analyzed runs.
pub fn build(runs: &[CampaignRun]) -> Campaign {
    let mut by_config: BTreeMap<(String, String), Vec<&CampaignRun>> = BTreeMap::new();
    for run in runs {
        let key = (
            run.report.provenance.fault_variant.clone(),
            run.design.clone(),
        );
        by_config.entry(key).or_default().push(run);
    }
    let mut not_publishable: Vec<String> = Vec::new();
    for run in runs {
        for why in &run.report.not_publishable {
            let line = format!("{}: {why}", run.name);
            if !not_publishable.contains(&line) {
                not_publishable.push(line);
            }
        }
    }
    let refs: Vec<RunRef<'_>> = runs.iter().map(CampaignRun::as_ref).collect();
    let groups = summaries::groups(&refs);
    let (comparisons, comparison_note) = compare(&groups);
    let ordering = ordering(runs);
    // The headline of the version the runs were analyzed under (one version per campaign).
    let headline = match runs.first() {
        Some(run) => headline::sentence(
            &groups,
            &summaries::clean_delete_recoveries(&refs),
            &run.report.rules,
        ),
        None => headline::unmeasured(),
    };
    Campaign {
        schema: "percentes-campaign/2",
        spec_applied: runs
            .first()
            .map_or_else(String::new, |r| r.report.provenance.spec_applied.clone()),
        not_publishable,
        groups,
        comparisons,
        comparison_note,
        ordering,
        headline,
    }
}

/// Welch tests between exactly two variants over the secondary scalars, Holm-adjusted.
fn compare(groups: &[Group]) -> (Vec<Comparison>, String) {
    let variants: Vec<&Group> = groups.iter().collect();
    if variants.len() != 2 || variants[0].variant == variants[1].variant {
        return (
            Vec::new(),
            "no comparison: it needs exactly two groups of different variants".into(),
        );
    }
    let (a, b) = (variants[0], variants[1]);
    let mut raw = Vec::new();
    for (sa, sb) in a.scalars.iter().zip(&b.scalars) {
        if sa.role != "secondary" {
            continue;
        }
        let xa: Vec<f64> = sa.values.iter().map(|(_, v)| *v).collect();
        let xb: Vec<f64> = sb.values.iter().map(|(_, v)| *v).collect();
        if let Some((t, df, p)) = runs::welch(&xa, &xb) {
            raw.push((sa.name, t, df, p));
        }
    }
    let adjusted = runs::holm_adjusted(&raw.iter().map(|r| r.3).collect::<Vec<_>>());
    let comparisons = raw
        .into_iter()
        .zip(adjusted)
        .map(|((scalar, t, df, p), p_holm)| Comparison {
            scalar,
            variants: (a.variant.clone(), b.variant.clone()),
            t,
            df,
            p,
            p_holm,
        })
        .collect();
    (
        comparisons,
        format!(
            "Welch two-sample t-tests, {} against {}, Holm-adjusted over the secondaries (§7)",
            a.variant, b.variant
        ),
    )
}

/// Whether two variants keep one order by median TTR to the pre-fault baseline across the sweep.
fn ordering(runs: &[CampaignRun]) -> String {
    let mut by_variant: BTreeMap<&str, Vec<&RecoveryReport>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.report.validity.valid) {
        if let Some(rec) = &r.report.recovery {
            by_variant
                .entry(r.report.provenance.fault_variant.as_str())
                .or_default()
                .push(rec);
        }
    }
    if by_variant.len() != 2 {
        return "no ordering claim: it needs two variants".into();
    }
    let names: Vec<&str> = by_variant.keys().copied().collect();
    let median_at = |reports: &[&RecoveryReport], cell: usize| {
        let values: Vec<f64> = reports
            .iter()
            .filter_map(|r| r.sweep.get(cell).and_then(|c| c.to_pre_fault_s))
            .collect();
        runs::summarize(&values).map(|s| s.median)
    };
    let mut orders = Vec::new();
    for cell in 0..27 {
        let a = median_at(&by_variant[names[0]], cell);
        let b = median_at(&by_variant[names[1]], cell);
        orders.push(a.zip(b).map(|(a, b)| a.total_cmp(&b)));
    }
    if orders.iter().all(|o| o.is_some() && *o == orders[0]) {
        let word = match orders[0] {
            Some(std::cmp::Ordering::Less) => "faster than",
            Some(std::cmp::Ordering::Greater) => "slower than",
            _ => "as fast as",
        };
        format!(
            "stable across all 27 cells: {} recovers to the pre-fault baseline {word} {}",
            names[0], names[1]
        )
    } else {
        "the order of the variants changes across the sweep (or a cell has no recovery): no ordering claim is made (§5)".into()
    }
}

/// Writes campaign.json (pretty, sorted keys) and campaign.md into `output`, creating it; returns
/// the markdown.
pub fn write(c: &Campaign, output: &std::path::Path) -> std::io::Result<String> {
    std::fs::create_dir_all(output)?;
    let value = serde_json::to_value(c).map_err(std::io::Error::other)?;
    let mut json = serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?;
    json.push('\n');
    std::fs::write(output.join("campaign.json"), json)?;
    let md = markdown(c);
    std::fs::write(output.join("campaign.md"), &md)?;
    Ok(md)
}

/// The campaign as markdown (campaign.md).
pub fn markdown(c: &Campaign) -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    let _ = writeln!(md, "# percentes campaign\n");
    for why in &c.not_publishable {
        let _ = writeln!(
            md,
            "**NOT PUBLISHABLE: {}**\n",
            why.trim_start_matches("NOT PUBLISHABLE: ")
        );
    }
    let _ = writeln!(md, "Spec applied: {}. No bootstrap at N = 5 (§7); dropped runs and values are named, never imputed.\n", c.spec_applied);
    let _ = writeln!(md, "## Headline\n\n> {}\n", c.headline);
    for g in &c.groups {
        let _ = writeln!(
            md,
            "## {} (design {}; {})\n",
            g.variant,
            &g.design_hash[..16.min(g.design_hash.len())],
            match g.config_hashes.len() {
                1 => format!("config {}", &g.config_hashes[0][..16.min(g.config_hashes[0].len())]),
                n => format!("{n} configs that differ only in the addresses and files their testbeds assigned"),
            }
        );
        let _ = writeln!(md, "Runs: {}. G5: {}.\n", g.runs.join(", "), g.g5);
        if let Some(capacity) = &g.capacity {
            let _ = writeln!(md, "Capacity check (§10): {capacity}.\n");
        }
        for d in &g.dropped {
            let _ = writeln!(md, "- Dropped: {d}");
        }
        let _ = writeln!(
            md,
            "\n| scalar | role | summary | dropped |\n|---|---|---|---|"
        );
        for s in &g.scalars {
            let _ = writeln!(
                md,
                "| {} ({}) | {} | {} | {} |",
                s.name,
                s.unit,
                s.role,
                s.text,
                s.dropped.join("; ")
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "## Comparison\n\n{}.\n", c.comparison_note);
    if !c.comparisons.is_empty() {
        let _ = writeln!(
            md,
            "| scalar | t | df | p | p (Holm) |\n|---|---|---|---|---|"
        );
        for x in &c.comparisons {
            let _ = writeln!(
                md,
                "| {} | {:.3} | {:.2} | {:.4} | {:.4} |",
                x.scalar, x.t, x.df, x.p, x.p_holm
            );
        }
    }
    let _ = writeln!(
        md,
        "\nOrdering across the sensitivity sweep: {}.",
        c.ordering
    );
    md
}
