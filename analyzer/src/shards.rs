//! Runs recorded by N shard recorders (SPEC §2 "Sharded capture"): `merge` checks the shard
//! journals against each other and writes the manifest that binds them; `open` reads either a
//! journal or a manifest into one [`Run`], so `analyze`, `export` and `campaign` give a merged run
//! exactly the result one recorder would have given for the same records.
//!
//! The header-level rules (one configuration, schedule and epoch; every shard once; starts and
//! clocks within their pins) are [`percentes_formats::journal::manifest::check_shards`]; the
//! record-level rule (each index recorded once, by the shard that holds it) is the loader's.

use std::fmt;
use std::path::{Path, PathBuf};

use percentes_formats::files::{open_regular, read_text_bounded, MANIFEST_BYTES_MAX};
use percentes_formats::journal::hex;
use percentes_formats::journal::manifest::{
    check_manifest, check_shards, Manifest, Refused, ShardFile, SigningKey,
};
use percentes_formats::journal::verify::{HeadMatch, VerifyOptions, VerifyReport};
use percentes_formats::journal::MAGIC;

use crate::load::{load_verified, load_verified_with, LoadError, Run};
use crate::{JournalFile, OpenError};

/// Why shards could not be merged, or a manifest not opened.
#[derive(Debug)]
#[non_exhaustive]
pub enum ShardError {
    /// A file could not be opened.
    Open(OpenError),
    /// The manifest could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The manifest does not parse.
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why, with its kind.
        why: percentes_formats::journal::manifest::ManifestError,
    },
    /// The shards (or the manifest against them) break the rules, each reason listed.
    Refused(Refused),
    /// The shards pass the header rules, but their records do not make one run.
    Load(LoadError),
    /// A single journal that does not load (it does not verify, or its records are not a run).
    Journal(LoadError),
    /// A file that is neither a journal nor a manifest (a configuration, a report).
    NotAJournal {
        /// The file.
        path: PathBuf,
    },
    /// One shard of a sharded run, given alone without [`crate::load::Options::shard_alone`].
    LoneShard {
        /// The file.
        path: PathBuf,
        /// Its shard index (from 0).
        index: u32,
        /// How many shards the run has.
        count: u32,
    },
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardError::Open(e) => write!(f, "{e}"),
            ShardError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ShardError::LoneShard { path, index, count } => write!(
                f,
                "{} is shard {index} of {count} of one run (the requests i mod {count} = {index}): \
                 merge every shard first (`percentes merge SHARD.pj... -o run.manifest.json`) and \
                 give the manifest, or pass --shard-alone to read this shard by itself (every \
                 output then says shard {index} of {count} and is not publishable)",
                path.display()
            ),
            ShardError::Manifest { path, why } => write!(f, "{}: {why}", path.display()),
            ShardError::Refused(why) => write!(
                f,
                "the shards do not make one run (SPEC §2 \"Sharded capture\"):\n{why}"
            ),
            ShardError::Load(e) => write!(f, "the shards' records do not make one run: {e}"),
            ShardError::Journal(e) => write!(f, "{e}"),
            ShardError::NotAJournal { path } => write!(
                f,
                "{} is not a journal (it does not start with the journal's magic bytes) nor a \
                 merged run's manifest: give a .pj file that `percentes record` wrote, or a \
                 manifest from `percentes merge`; a configuration is recorded first \
                 (`percentes record {} -o run.pj`)",
                path.display(),
                path.display()
            ),
        }
    }
}

impl std::error::Error for ShardError {}

/// Whether `path` holds a manifest rather than a journal: it does not start with the journal
/// magic, and its first byte that is not white space opens a JSON object.
pub fn is_manifest(path: &Path) -> bool {
    use std::io::Read;
    let mut start = [0u8; 64];
    let Ok(n) = open_regular(path).and_then(|mut f| f.read(&mut start)) else {
        return false;
    };
    let start = &start[..n];
    !start.starts_with(&MAGIC)
        && start
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b == b'{')
}

/// Shard journals verified and checked against each other, in shard index order.
#[derive(Debug)]
pub struct Checked {
    /// The files, by shard index.
    pub files: Vec<JournalFile>,
    /// Their verification reports, in the same order.
    pub reports: Vec<VerifyReport>,
    /// The manifest the header rules produced (unsealed, file names as given).
    pub manifest: Manifest,
}

/// Verifies every file (by `trusted` when given) and applies the cross-shard rules; the files come
/// back in shard index order.
pub fn check(paths: &[PathBuf], trusted: Option<[u8; 32]>) -> Result<Checked, ShardError> {
    let files = paths
        .iter()
        .map(|p| JournalFile::open(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ShardError::Open)?;
    let options = VerifyOptions {
        trusted_key: trusted,
        ..VerifyOptions::default()
    };
    let reports: Vec<VerifyReport> = files.iter().map(|f| f.verify(&options)).collect();
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let shard_files: Vec<ShardFile<'_>> = names
        .iter()
        .zip(&reports)
        .map(|(name, report)| ShardFile { name, report })
        .collect();
    let manifest = check_shards(&shard_files).map_err(ShardError::Refused)?;
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| reports[i].header.as_ref().map_or(0, |h| h.shard_index));
    let mut files: Vec<Option<JournalFile>> = files.into_iter().map(Some).collect();
    let mut reports: Vec<Option<VerifyReport>> = reports.into_iter().map(Some).collect();
    Ok(Checked {
        files: order.iter().filter_map(|&i| files[i].take()).collect(),
        reports: order.iter().filter_map(|&i| reports[i].take()).collect(),
        manifest,
    })
}

/// Merges shard journals: checks them (header rules, then every record), and writes the manifest
/// to `output`, naming each shard by its path relative to the manifest's folder, signed with
/// `key` when given. Refuses to replace an existing file without `force`.
pub fn merge(
    paths: &[PathBuf],
    output: &Path,
    key: Option<&SigningKey>,
    force: bool,
) -> Result<(Manifest, Run), ShardError> {
    if output.exists() && !force {
        return Err(ShardError::Io {
            path: output.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the manifest exists; pass --force to replace it",
            ),
        });
    }
    let checked = check(paths, None)?;
    let mut manifest = checked.manifest;
    let run = load_verified(&checked.files, checked.reports).map_err(ShardError::Load)?;
    let folder = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    for (shard, file) in manifest.shards.iter_mut().zip(&checked.files) {
        shard.file = relative_to(file.path(), folder);
    }
    manifest.seal(key).map_err(|why| ShardError::Manifest {
        path: output.to_owned(),
        why,
    })?;
    std::fs::write(output, manifest.to_json()).map_err(|source| ShardError::Io {
        path: output.to_owned(),
        source,
    })?;
    Ok((
        manifest.clone(),
        Run {
            manifest: Some(manifest),
            ..run
        },
    ))
}

/// `path` as the manifest in `folder` names it: relative when it lies under `folder`, else
/// absolute.
fn relative_to(path: &Path, folder: &Path) -> String {
    let absolute = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let (path, folder) = (absolute(path), absolute(folder));
    path.strip_prefix(&folder)
        .unwrap_or(&path)
        .display()
        .to_string()
}

/// A manifest checked against its shard files.
#[derive(Debug)]
pub struct Opened {
    /// The manifest as read.
    pub manifest: Manifest,
    /// The shard files, in index order.
    pub files: Vec<JournalFile>,
    /// Their verification reports.
    pub reports: Vec<VerifyReport>,
}

/// Reads a manifest and checks it: its binding (and signature, by `trusted` when given), then
/// every shard file it names (relative paths from the manifest's folder) against the rules and
/// against what the manifest bound.
pub fn open_manifest(path: &Path, trusted: Option<[u8; 32]>) -> Result<Opened, ShardError> {
    let text = read_text_bounded(path, MANIFEST_BYTES_MAX, "a manifest").map_err(|source| {
        ShardError::Io {
            path: path.to_owned(),
            source,
        }
    })?;
    let manifest = Manifest::parse(&text).map_err(|why| ShardError::Manifest {
        path: path.to_owned(),
        why,
    })?;
    manifest
        .check_binding(trusted)
        .map_err(ShardError::Refused)?;
    let folder = path.parent().unwrap_or(Path::new("."));
    let paths: Vec<PathBuf> = manifest
        .shards
        .iter()
        .map(|s| folder.join(&s.file))
        .collect();
    // The trusted key is the manifest's: its signed binding covers every shard's chain head, so
    // shards recorded without a key are covered by it; a shard's own signatures, where it has
    // them, are checked against its header's key as `verify` always does.
    let checked = check(&paths, None)?;
    // `check` returns the files in index order; the manifest's entries pair with the files they
    // name, so that a file swapped with another shard's is held to its own entry.
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let shard_files: Vec<ShardFile<'_>> = paths
        .iter()
        .zip(&names)
        .filter_map(|(path, name)| {
            let at = checked.files.iter().position(|f| f.path() == path)?;
            Some(ShardFile {
                name,
                report: &checked.reports[at],
            })
        })
        .collect();
    check_manifest(&manifest, &shard_files).map_err(ShardError::Refused)?;
    Ok(Opened {
        manifest,
        files: checked.files,
        reports: checked.reports,
    })
}

/// Reads a journal, or a manifest and its shards, into one run, with the files the analysis reads
/// again.
pub fn open(path: &Path) -> Result<(Vec<JournalFile>, Run), ShardError> {
    open_with(path, &crate::load::Options::default())
}

/// [`open`] with the request table placed by `options`.
pub fn open_with(
    path: &Path,
    options: &crate::load::Options,
) -> Result<(Vec<JournalFile>, Run), ShardError> {
    if !is_manifest(path) {
        let file = JournalFile::open(path).map_err(ShardError::Open)?;
        let report = file.verify(&VerifyOptions {
            expect_head: options.expect_head,
            trusted_key: options.trusted_key,
        });
        if report.verdict == percentes_formats::journal::Verdict::NotAJournal {
            return Err(ShardError::NotAJournal {
                path: path.to_owned(),
            });
        }
        if let Some(HeadMatch::Prefix { records }) = report.head_match {
            return Err(ShardError::Refused(Refused(vec![format!(
                "the trusted head (--expect-head) is the chain after {records} of its {} records: the records after it are not vouched for; give the seal's head (the last line `record --heads` writes)",
                report.records
            )])));
        }
        let shard = report
            .header
            .as_ref()
            .map(|h| (h.shard_index, h.shard_count))
            .filter(|(_, count)| *count > 1);
        if let (Some((index, count)), false) = (shard, options.shard_alone) {
            return Err(ShardError::LoneShard {
                path: path.to_owned(),
                index,
                count,
            });
        }
        let vouched = vouched(&report, options);
        let mut run =
            crate::load::load_verified_with(std::slice::from_ref(&file), vec![report], options)
                .map_err(ShardError::Journal)?;
        run.vouched = vouched;
        if let Some((index, count)) = shard {
            run.not_publishable.insert(
                0,
                format!(
                    "shard {index} of {count} read alone (--shard-alone): it holds every \
                     {count}-th scheduled request (i mod {count} = {index}) of a load {count} \
                     recorders offered together; merge the shards and analyze the manifest for \
                     the run"
                ),
            );
        }
        return Ok((vec![file], run));
    }
    let opened = open_manifest(path, options.trusted_key)?;
    if let Some(head) = options.expect_head
        && hex(&head) != opened.manifest.binding
    {
        return Err(ShardError::Refused(Refused(vec![format!(
            "the manifest's binding {} is not the trusted head given (--expect-head {})",
            opened.manifest.binding,
            hex(&head)
        )])));
    }
    let vouched = vouched(&opened.reports[0], options);
    let run =
        load_verified_with(&opened.files, opened.reports, options).map_err(ShardError::Load)?;
    Ok((
        opened.files,
        Run {
            manifest: Some(opened.manifest),
            vouched,
            ..run
        },
    ))
}

/// What a trusted head or key given to the analysis vouched for, once the journal (or
/// manifest) verified against them.
fn vouched(report: &VerifyReport, options: &crate::load::Options) -> Option<String> {
    let mut said = Vec::new();
    if let Some(head) = options.expect_head {
        said.push(format!("ends at the trusted head {}", hex(&head)));
    }
    if let (Some(key), true) = (options.trusted_key, report.signatures.key.is_some()) {
        said.push(format!("signed by the trusted key {}", hex(&key)));
    }
    (!said.is_empty()).then(|| said.join("; "))
}

/// What `merge` prints: the shards, their heads and the binding.
pub fn render_merged(manifest: &Manifest, run: &Run, output: &Path) -> String {
    let mut text = format!(
        "merged {} shards of one schedule ({} requests, every index exactly once) into {}\n",
        manifest.shard_count,
        run.requests.len(),
        output.display()
    );
    for shard in &manifest.shards {
        text.push_str(&format!(
            "  shard {}/{}: {} ({} requests, seal {}, head {}, host {}, clock {}, ready {:.1} ms late)\n",
            shard.index,
            manifest.shard_count,
            shard.file,
            shard.requests,
            shard.seal,
            shard.chain_head,
            shard.hostname,
            shard.clock,
            shard.start_late_ms
        ));
    }
    text.push_str(&format!(
        "binding: {}{}\n",
        manifest.binding,
        if manifest.signature.is_some() {
            " (signed)"
        } else {
            ""
        }
    ));
    text
}

/// A manifest verified against its shards ([`verify`]).
#[derive(Debug)]
pub struct Verified {
    /// The manifest.
    pub manifest: Manifest,
    /// Scheduled indices, each recorded exactly once.
    pub requests: usize,
    /// Whether a trusted key checked the signature.
    pub trusted: bool,
    /// Whether the binding is the expected head, when one was given.
    pub head_ok: bool,
}

/// `verify MANIFEST`: the binding (and signature, by `trusted`), every shard file against the
/// rules and against what the manifest bound, every index recorded exactly once, and the binding
/// against `expect_head` when given.
pub fn verify(
    path: &Path,
    expect_head: Option<[u8; 32]>,
    trusted: Option<[u8; 32]>,
) -> Result<Verified, ShardError> {
    let opened = open_manifest(path, trusted)?;
    let run = load_verified(&opened.files, opened.reports).map_err(ShardError::Load)?;
    let head_ok =
        expect_head.is_none_or(|h| percentes_formats::journal::hex(&h) == opened.manifest.binding);
    Ok(Verified {
        manifest: opened.manifest,
        requests: run.requests.len(),
        trusted: trusted.is_some(),
        head_ok,
    })
}

/// `verify --json` for a manifest that is refused: what it fails is damage to what it binds, so
/// the verdict is a journal's `tampered`, with every reason.
pub fn refused_json(path: &Path, why: &Refused) -> serde_json::Value {
    serde_json::json!({
        "manifest": path.display().to_string(),
        "verdict": "tampered",
        "refused": why.0,
    })
}

impl Verified {
    /// `verify --json` for a manifest: the manifest, with the verdict and the requests counted.
    pub fn json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(&self.manifest).expect("a manifest serializes");
        // A trusted head the binding is not means the manifest (or what it binds) is not the
        // one the auditor was given: tampered, as for a journal whose chain never passes
        // through its trusted head. No verdict of a manifest is outside a journal's five.
        let verdict = if self.head_ok {
            "sealed-intact"
        } else {
            "tampered"
        };
        value["verdict"] = verdict.into();
        value["requests"] = self.requests.into();
        value
    }

    /// What `verify` prints for a manifest.
    pub fn render(&self) -> String {
        let m = &self.manifest;
        let mut text = if self.head_ok {
            format!(
                "verdict: sealed-intact: {} shards of one schedule, each sealed-intact and bound by the manifest; every one of the {} scheduled indices recorded exactly once\n",
                m.shard_count, self.requests
            )
        } else {
            "verdict: tampered: the manifest's binding is not the trusted head given (--expect-head); the files below are not the run that head vouches for\n".to_owned()
        };
        for shard in &m.shards {
            text.push_str(&format!(
                "  shard {}/{}: {} seal {}, head {}\n",
                shard.index, m.shard_count, shard.file, shard.seal, shard.chain_head
            ));
        }
        text.push_str(&format!(
            "binding: {} ({})\n",
            m.binding,
            match (&m.signature, self.trusted) {
                (Some(_), true) => "signed by the trusted key",
                (Some(_), false) => "signed; give --pubkey to check whose key",
                (None, _) => "not signed",
            }
        ));
        text
    }
}
