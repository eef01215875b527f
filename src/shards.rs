//! `merge`, `verify MANIFEST` and `record --shard`'s arguments (SPEC §2 "Sharded capture"); the
//! rules and the rendering are `percentes_formats::journal::manifest` and
//! `percentes_analyzer::shards`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use percentes_analyzer::shards::{self, ShardError};
use percentes_formats::journal::manifest::Shard;

/// The shard and agreed epoch `record` was given.
pub fn of_record(args: &crate::args::RecordArgs) -> Result<(Shard, Option<i64>)> {
    let job = std::env::var("JOB_COMPLETION_INDEX").ok();
    Shard::with_epoch(
        args.shard.as_deref(),
        args.shards,
        job.as_deref(),
        args.start_at.as_deref(),
    )
    .map_err(anyhow::Error::msg)
}

/// A refusal is exit 1 with every reason on stderr; other errors are errors.
fn refused(error: ShardError) -> Result<ExitCode> {
    match error {
        ShardError::Refused(_) | ShardError::Load(_) => {
            warn!("percentes: REFUSED: {error}");
            Ok(ExitCode::from(1))
        }
        other => Err(other.into()),
    }
}

/// `percentes merge`.
pub fn merge(
    paths: &[PathBuf],
    output: &Path,
    sign_key: Option<&Path>,
    force: bool,
) -> Result<ExitCode> {
    let key = sign_key.map(percentes_formats::journal::keys::read_signing_key);
    let key = key.transpose().map_err(anyhow::Error::msg)?;
    match shards::merge(paths, output, key.as_ref(), force) {
        Ok((manifest, run)) => {
            print!("{}", shards::render_merged(&manifest, &run, output));
            for why in &run.not_publishable {
                warn!("percentes: {why}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => refused(e),
    }
}

/// `percentes verify MANIFEST`.
pub fn verify_manifest(
    path: &Path,
    expect_head: Option<[u8; 32]>,
    trusted: Option<[u8; 32]>,
    json: bool,
) -> Result<ExitCode> {
    let verified = match shards::verify(path, expect_head, trusted) {
        Ok(verified) => verified,
        Err(ShardError::Refused(why)) if json => {
            out!("{:#}", shards::refused_json(path, &why));
            return Ok(ExitCode::from(1));
        }
        Err(e) => return refused(e),
    };
    if json {
        out!("{}", serde_json::to_string_pretty(&verified.json())?);
    } else {
        out!("manifest: {}", path.display());
        print!("{}", verified.render());
    }
    Ok(if verified.head_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
