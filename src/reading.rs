//! The commands that read journals and print what the analyzer made of them: `analyze`,
//! `campaign`, `export` and `query`. Each loads (verifying), calls one analyzer function, writes
//! its files and picks the exit code (SPEC §10); the work is `percentes_analyzer`'s.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use percentes_analyzer::model::{self, SegmentColumn};
use percentes_analyzer::JournalFile;
use percentes_formats::config::thresholds::Threshold;
use percentes_formats::spec::Spec;

use crate::args;

/// A journal, or a merged run's manifest and its shards, its request table placed by `options`
/// (`--table-memory`, `--spill-dir`).
pub fn load_run_with(
    path: &Path,
    options: &percentes_analyzer::load::Options,
) -> Result<(Vec<JournalFile>, percentes_analyzer::load::Run)> {
    percentes_analyzer::shards::open_with(path, options)
        .with_context(|| format!("cannot analyze {}", path.display()))
}

/// This build, as a report cites it.
pub fn analyzer(diagnose: bool) -> model::Analyzer {
    model::Analyzer {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: env!("PERCENTES_COMMIT").into(),
        diagnose,
        by: Vec::new(),
    }
}

/// What `analyze` was asked, beyond the journal and where its table lives.
pub struct Asked<'a> {
    pub spec: Spec,
    pub output: &'a Path,
    pub json: bool,
    pub diagnose: bool,
    pub by: Vec<SegmentColumn>,
    pub fail_on: &'a [Threshold],
}

pub fn analyze(
    path: &Path,
    asked: Asked<'_>,
    table: &percentes_analyzer::load::Options,
) -> Result<ExitCode> {
    use percentes_analyzer::{analysis, figures, report};
    let (file, run) = load_run_with(path, table)?;
    let analyzer = model::Analyzer {
        by: asked.by,
        ..analyzer(asked.diagnose)
    };
    let result = analysis::analyze(&run, &file, asked.spec, &analyzer);
    let output = asked.output;
    let mut written = report::write(&result, &run.requests, output)
        .with_context(|| format!("cannot write the report into {}", output.display()))?;
    let summary = figures::write(&result, (&run.config.thresholds, asked.fail_on), output)
        .with_context(|| format!("cannot write summary.json into {}", output.display()))?;
    written.push("summary.json");
    if asked.json {
        print!("{}", report::json(&result));
    } else {
        print!(
            "{}",
            report::summary(&result, &summary, path, output, &written)
        );
    }
    Ok(ExitCode::from(summary.exit_status(result.may_pass())))
}

pub fn campaign(
    paths: &[PathBuf],
    spec: Spec,
    output: &Path,
    table: &percentes_analyzer::load::Options,
) -> Result<ExitCode> {
    use percentes_analyzer::campaign;
    let runs = campaign::journals(paths, spec, table, &analyzer(false))?;
    let result = campaign::build(&runs);
    let md = campaign::write(&result, output)
        .with_context(|| format!("cannot write the campaign into {}", output.display()))?;
    print!("{md}");
    out!(
        "wrote campaign.json and campaign.md into {}",
        output.display()
    );
    let any_valid = runs.iter().any(|r| r.report.validity.valid);
    Ok(if any_valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// `percentes compare`: both sides loaded and analyzed as `analyze` would, then compared.
pub fn compare(a: &args::CompareArgs) -> Result<ExitCode> {
    use percentes_analyzer::compare::{self, Margins};
    let (side_a, side_b): (&[PathBuf], &[PathBuf]) = match (a.vs.is_empty(), a.runs.len()) {
        (false, _) => (&a.runs, &a.vs),
        (true, 2) => (&a.runs[..1], &a.runs[1..]),
        (true, n) => bail!("compare takes two journals (A B), or A's journals then --vs and B's; {n} given without --vs"),
    };
    let margins = Margins {
        latency_relative: a.margin,
        share_absolute: a.share_margin,
    };
    let (result, all_valid) = compare::journals(
        (side_a, side_b),
        a.spec,
        margins,
        &a.table.options()?,
        &analyzer(a.diagnose),
    )?;
    let text = if a.json {
        compare::json(&result)
    } else {
        compare::text(&result)
    };
    print!("{text}");
    Ok(ExitCode::from(
        result.exit_code(all_valid, a.fail_on_regression),
    ))
}

pub fn export(
    path: &Path,
    parquet: &Path,
    force: bool,
    table: &percentes_analyzer::load::Options,
) -> Result<ExitCode> {
    if parquet.exists() && !force {
        bail!("{} exists; pass --force to replace it", parquet.display());
    }
    let (file, run) = load_run_with(path, table)?;
    // Judged as `analyze` judges it, so the file's metadata names any failed gate.
    let report =
        percentes_analyzer::analysis::analyze(&run, &file, Spec::CURRENT, &analyzer(false));
    let server = percentes_analyzer::export::server_note(&run, parquet);
    let rows = percentes_analyzer::export::parquet(run, parquet, Some(&report))
        .with_context(|| format!("cannot write {}", parquet.display()))?;
    warn!(
        "wrote {rows} rows (one per scheduled request) to {}{server}",
        parquet.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `percentes query`; in a build without the `query` feature, an error that says how to get it.
pub fn query(q: &args::QueryArgs) -> Result<ExitCode> {
    use percentes_analyzer::query;
    query::check(&q.sql)?; // refused before the journal is read
    let (file, run) = load_run_with(&q.journal, &q.table.options()?)?;
    let answer = query::answer(run, &file, q.spec, &analyzer(false), &q.sql, q.format)?;
    if q.format == query::Format::Csv {
        for why in &answer.not_publishable {
            warn!("{why}");
        }
    }
    let _ = std::io::Write::write_all(&mut std::io::stdout(), answer.text.as_bytes());
    Ok(if answer.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
