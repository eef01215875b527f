//! The operator's ed25519 key files, as `percentes keygen` writes them and `record --sign-key`,
//! `merge --sign-key` and `verify --pubkey` read them: `PREFIX.key` holds the 32-byte secret seed
//! and `PREFIX.pub` the 32-byte public key, each as 64 lowercase hex digits and a newline
//! (surrounding white space is ignored when read). The secret file is created with mode 0600 on
//! Unix.

use std::io::Write;
use std::path::{Path, PathBuf};

use ed25519_dalek::{SigningKey, VerifyingKey};

use super::{hex, parse_hash};
use crate::files::{read_text_bounded, KEY_FILE_BYTES_MAX};

/// Reads a secret key file.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, String> {
    let text = read_text_bounded(path, KEY_FILE_BYTES_MAX, "a key file")
        .map_err(|e| format!("cannot read signing key {}: {e}", path.display()))?;
    let seed = parse_hash(&text).ok_or_else(|| {
        format!(
            "{} does not hold a secret key (64 hex digits, as `percentes keygen` writes)",
            path.display()
        )
    })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Reads a public key file; refuses bytes that are not an ed25519 point.
pub fn read_public_key(path: &Path) -> Result<[u8; 32], String> {
    let text = read_text_bounded(path, KEY_FILE_BYTES_MAX, "a key file")
        .map_err(|e| format!("cannot read public key {}: {e}", path.display()))?;
    let key = parse_hash(&text).ok_or_else(|| {
        format!(
            "{} does not hold a public key (64 hex digits, as `percentes keygen` writes)",
            path.display()
        )
    })?;
    VerifyingKey::from_bytes(&key)
        .map_err(|_| format!("{} is not a valid ed25519 public key", path.display()))?;
    Ok(key)
}

/// Writes `PREFIX.key` (mode 0600 on Unix) and `PREFIX.pub` for the secret `seed`; refuses to
/// replace either without `force`. Returns the two paths.
pub fn write_key_pair(
    prefix: &Path,
    seed: &[u8; 32],
    force: bool,
) -> Result<(PathBuf, PathBuf), String> {
    let secret = prefix.with_extension("key");
    let public = prefix.with_extension("pub");
    for path in [&secret, &public] {
        if path.exists() && !force {
            return Err(format!(
                "{} exists; pass --force to overwrite it",
                path.display()
            ));
        }
    }
    let key = SigningKey::from_bytes(seed);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(&secret)
        .and_then(|mut f| f.write_all(format!("{}\n", hex(seed)).as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", secret.display()))?;
    std::fs::write(
        &public,
        format!("{}\n", hex(&key.verifying_key().to_bytes())),
    )
    .map_err(|e| format!("cannot write {}: {e}", public.display()))?;
    Ok((secret, public))
}
