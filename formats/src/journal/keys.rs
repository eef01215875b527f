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

/// What went wrong with a key file: which file, and what to do.
#[derive(Debug)]
pub enum KeyError {
    /// The file could not be read.
    Read {
        /// `signing` or `public`.
        which: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// It does not hold 64 hex digits.
    NotAKey {
        /// `secret` or `public`.
        which: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// It holds 64 hex digits that are not an ed25519 point.
    NotAPoint {
        /// The file.
        path: PathBuf,
    },
    /// The file exists and `force` was not given.
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The file could not be written.
    Write {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Read {
                which,
                path,
                source,
            } => write!(f, "cannot read {which} key {}: {source}", path.display()),
            KeyError::NotAKey { which, path } => write!(
                f,
                "{} does not hold a {which} key (64 hex digits, as `percentes keygen` writes)",
                path.display()
            ),
            KeyError::NotAPoint { path } => {
                write!(f, "{} is not a valid ed25519 public key", path.display())
            }
            KeyError::Exists { path } => {
                write!(f, "{} exists; pass --force to overwrite it", path.display())
            }
            KeyError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Read { source, .. } | KeyError::Write { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The 32 bytes a key file holds as hex; `which` names the key in errors.
fn read_key(path: &Path, which: &'static str, what: &'static str) -> Result<[u8; 32], KeyError> {
    let text = read_text_bounded(path, KEY_FILE_BYTES_MAX, "a key file").map_err(|source| {
        KeyError::Read {
            which,
            path: path.to_owned(),
            source,
        }
    })?;
    parse_hash(&text).ok_or_else(|| KeyError::NotAKey {
        which: what,
        path: path.to_owned(),
    })
}

/// Reads a secret key file.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    Ok(SigningKey::from_bytes(&read_key(
        path, "signing", "secret",
    )?))
}

/// Reads a public key file; refuses bytes that are not an ed25519 point.
pub fn read_public_key(path: &Path) -> Result<[u8; 32], KeyError> {
    let key = read_key(path, "public", "public")?;
    VerifyingKey::from_bytes(&key).map_err(|_| KeyError::NotAPoint {
        path: path.to_owned(),
    })?;
    Ok(key)
}

/// Writes `PREFIX.key` (mode 0600 on Unix) and `PREFIX.pub` for the secret `seed`; refuses to
/// replace either without `force`. Returns the two paths.
pub fn write_key_pair(
    prefix: &Path,
    seed: &[u8; 32],
    force: bool,
) -> Result<(PathBuf, PathBuf), KeyError> {
    let secret = prefix.with_extension("key");
    let public = prefix.with_extension("pub");
    for path in [&secret, &public] {
        if path.exists() && !force {
            return Err(KeyError::Exists { path: path.clone() });
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
        .map_err(|source| KeyError::Write {
            path: secret.clone(),
            source,
        })?;
    std::fs::write(
        &public,
        format!("{}\n", hex(&key.verifying_key().to_bytes())),
    )
    .map_err(|source| KeyError::Write {
        path: public.clone(),
        source,
    })?;
    Ok((secret, public))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal is its kind, naming the file: a file that is not there, one that is not 64
    /// hex digits, 64 hex digits that are no ed25519 point (y = 2 has no x on the curve), a pair
    /// written over without `force`; and a pair written reads back.
    #[test]
    fn key_files_are_read_and_refused_by_kind() {
        let dir = percentes_testkit::Scratch::new("keys");
        let (secret, public) = write_key_pair(&dir.join("op"), &[7; 32], true).unwrap();
        assert_eq!(
            read_signing_key(&secret)
                .unwrap()
                .verifying_key()
                .to_bytes(),
            read_public_key(&public).unwrap()
        );
        let again = write_key_pair(&dir.join("op"), &[7; 32], false).unwrap_err();
        assert!(matches!(again, KeyError::Exists { .. }), "{again:?}");
        assert!(again.to_string().contains("pass --force"), "{again}");
        let missing = read_public_key(&dir.join("none.pub")).unwrap_err();
        assert!(
            matches!(
                missing,
                KeyError::Read {
                    which: "public",
                    ..
                }
            ),
            "{missing:?}"
        );
        let garbage = dir.join("garbage.key");
        std::fs::write(&garbage, "not hex\n").unwrap();
        let e = read_signing_key(&garbage).unwrap_err();
        assert!(
            matches!(
                e,
                KeyError::NotAKey {
                    which: "secret",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("does not hold a secret key"), "{e}");
        let off_curve = dir.join("off.pub");
        let mut y = [0u8; 32];
        y[0] = 2;
        std::fs::write(&off_curve, format!("{}\n", hex(&y))).unwrap();
        let e = read_public_key(&off_curve).unwrap_err();
        assert!(matches!(e, KeyError::NotAPoint { .. }), "{e:?}");
    }
}
