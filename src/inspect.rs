//! `percentes inspect`: a journal's header, and its records as JSON lines.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use percentes_analyzer::JournalFile;
use percentes_formats::journal::records::RecordKind;
use percentes_formats::journal::{verify, Verdict};

use percentes_study::show;

/// Record kinds `--kind` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    Request,
    Event,
    Telemetry,
    Checkpoint,
    Seal,
    /// Kind 6: what a request asked for beyond its request record (`max_tokens`, its prompt's
    /// length in tokens).
    RequestExtension,
    /// Kind 7: one scrape of a server's metrics (SPEC §2 server-side evidence).
    Scrape,
    /// Kind 8: a response's generated output by kind and delivery (SPEC §3, A4).
    Stream,
    /// Kinds this build does not know.
    Other,
}

impl KindArg {
    fn matches(self, kind: u8) -> bool {
        match RecordKind::from_byte(kind) {
            Some(known) => self
                .to_possible_value()
                .is_some_and(|v| v.get_name() == known.name()),
            None => self == KindArg::Other,
        }
    }
}

#[derive(Debug)]
pub struct Options {
    pub records: bool,
    pub kinds: Vec<KindArg>,
    pub from: u64,
    pub limit: Option<u64>,
    pub json: bool,
    pub config: bool,
}

pub fn run(path: &Path, options: Options) -> Result<ExitCode> {
    let file = JournalFile::open(path)?;
    let report = file.verify(&Default::default());
    if report.verdict != Verdict::SealedIntact {
        warn!(
            "percentes: warning: {} verifies as {}; only its verified prefix is shown{}",
            path.display(),
            report.verdict.name(),
            report
                .problem
                .as_ref()
                .map(|p| format!(" ({})", p.what))
                .unwrap_or_default()
        );
    }
    let Some(header) = report.header.as_ref() else {
        anyhow::bail!(
            "{}: no readable journal header ({})",
            path.display(),
            report.verdict.name()
        );
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if !options.records {
        if options.json {
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&show::header_json(header, options.config))?
            )?;
        } else {
            writeln!(out, "journal: {}", path.display())?;
            write!(out, "{}", show::header_text(header, options.config))?;
            write!(out, "{}", verify::render(&report))?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut printed = 0u64;
    for (framed, decoded) in file.records(&report) {
        if framed.sequence < options.from {
            continue;
        }
        if !options.kinds.is_empty() && !options.kinds.iter().any(|k| k.matches(framed.kind)) {
            continue;
        }
        if options.limit.is_some_and(|limit| printed >= limit) {
            break;
        }
        let line = show::record_line(
            framed.kind,
            (framed.sequence, framed.byte_offset),
            decoded.map_err(|e| e.message),
        )?;
        writeln!(out, "{}", serde_json::to_string(&line)?)?;
        printed += 1;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
