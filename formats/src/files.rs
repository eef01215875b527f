//! Bounded reads of the files a user names: configurations, key files, manifests, prompt sets,
//! tokenizers, journals. Each kind has a size limit, and a file past it is refused with the
//! limit named; a path that is not a regular file (a device such as `/dev/zero`, a FIFO, a
//! directory, a socket) is refused before it is opened. So no read grows without bound and
//! none waits for a writer that never comes.
//!
//! The limits are the implementation's, not the specification's: each is far above any real
//! file of its kind, and below what would exhaust a small machine's memory.

use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// A key file: 64 hex digits and a newline (`keys.rs`), with room for white space.
pub const KEY_FILE_BYTES_MAX: u64 = 4 << 10;
/// A shard manifest: a few hundred bytes a shard (`analyzer::shards`).
pub const MANIFEST_BYTES_MAX: u64 = 16 << 20;
/// A prompt set: ShareGPT V3's largest published file is about 0.7 GB.
pub const PROMPT_FILE_BYTES_MAX: u64 = 2 << 30;
/// A Hugging Face `tokenizer.json` (256 MiB): the largest common ones are about 35 MB.
pub const TOKENIZER_BYTES_MAX: u64 = 1 << 28;
/// Largest image a route attaches (OpenAI's limit for one image is 20 MB; a data URL is a third
/// larger again).
pub const IMAGE_FILE_BYTES_MAX: u64 = 20 << 20;
/// The images a prompt file's lines carry, all lines together as sent (each line's data URLs,
/// base64): every line's body is built once and held for the run.
pub const LINE_IMAGES_BYTES_MAX: u64 = 1 << 30;
/// A configuration (1 MiB): a config is a page of TOML; a larger file is a mistake (a journal or
/// a prompt set passed by accident).
pub const CONFIG_FILE_BYTES_MAX: u64 = 1 << 20;

/// What `path` is when it is not a regular file, in words.
fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    let kind = meta.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() {
            return Some("a character device (such as /dev/zero)");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_fifo() {
            return Some("a FIFO (a pipe, as <(...) gives; write it to a file first)");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// Opens `path` for reading if it is a regular file; anything else is refused without being
/// opened (opening a FIFO waits for a writer).
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let meta = std::fs::metadata(path)?;
    if let Some(what) = not_regular(&meta) {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("it is {what}, not a regular file"),
        ));
    }
    std::fs::File::open(path)
}

/// The bytes of the regular file at `path`, refused past `limit` bytes; `what` names the kind
/// of file and the limit's constant in the refusal.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    let too_large = |size: String| {
        Error::new(
            ErrorKind::InvalidData,
            format!("it is {size} bytes, over the limit of {limit} bytes for {what}"),
        )
    };
    let size = file.metadata()?.len();
    if size > limit {
        return Err(too_large(size.to_string()));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large("more than that (it grew while read)".into()));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, limit: u64, what: &str) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit, what)?)
        .map_err(|e| Error::new(ErrorKind::InvalidData, format!("it is not UTF-8: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_to_its_limit_and_refused_past_it() {
        let dir = percentes_testkit::Scratch::new("files");
        let path = dir.join("four");
        std::fs::write(&path, b"abcd").unwrap();
        assert_eq!(read_bounded(&path, 4, "a test file").unwrap(), b"abcd");
        let err = read_bounded(&path, 3, "a test file")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("4 bytes") && err.contains("limit of 3 bytes for a test file"),
            "{err}"
        );
        let err = read_bounded(&dir, 3, "a test file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a directory"), "{err}");
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        assert!(read_text_bounded(&path, 4, "a test file")
            .unwrap_err()
            .to_string()
            .contains("UTF-8"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_fifos_are_refused_without_a_read() {
        let err = read_bounded(Path::new("/dev/zero"), 1 << 30, "a key file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("character device"), "{err}");
        let dir = percentes_testkit::Scratch::new("fifo");
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(
            made.is_ok_and(|s| s.success()),
            "mkfifo (coreutils) made no FIFO"
        );
        // With no writer, opening it would wait for ever; it is refused unopened.
        let err = read_bounded(&fifo, 10, "a key file")
            .unwrap_err()
            .to_string();
        assert!(err.contains("FIFO"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
