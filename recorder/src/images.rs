//! Images a request carries (SPEC §2 "What a request carries"): a route's files, or a prompt
//! file's lines' files and data URLs, each read or decoded once, its size and BLAKE3 kept for
//! the journal and its data URL for the body. Never its bytes in the journal.

use std::path::Path;

use percentes_formats::config::parts::{image_media_type, PartError, IMAGE_TYPES};
use percentes_formats::config::Route;
use percentes_formats::files::{read_bounded, IMAGE_FILE_BYTES_MAX};

/// An image a request carries, read and encoded once.
#[derive(Clone, PartialEq, Eq)]
pub struct Image {
    /// Where it came from: the file, as the configuration or the line names it, or `data URL`.
    pub path: String,
    /// Its media type, from its extension or its data URL.
    pub media_type: &'static str,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its BLAKE3, hex.
    pub blake3: String,
    /// `data:MEDIA;base64,...`.
    pub data_url: String,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Image({}, {} bytes)", self.path, self.bytes)
    }
}

impl Image {
    /// The image file at `path` (`shown` is how it is named in messages and facts), within
    /// [`IMAGE_FILE_BYTES_MAX`]; `key` says where it was named, for errors.
    pub fn from_file(path: &Path, shown: &str, key: &str) -> Result<Image, PartError> {
        let media_type = image_media_type(shown).ok_or_else(|| {
            problem(
                key,
                format!("{shown:?} is not a .png, .jpg, .jpeg, .gif or .webp file"),
            )
        })?;
        let bytes = read_bounded(path, IMAGE_FILE_BYTES_MAX, "an image")
            .map_err(|e| problem(key, format!("{shown:?} cannot be read: {e}")))?;
        Ok(Image {
            path: shown.to_owned(),
            media_type,
            bytes: bytes.len() as u64,
            blake3: blake3::hash(&bytes).to_hex().to_string(),
            data_url: format!("data:{media_type};base64,{}", base64(&bytes)),
        })
    }

    /// An image given as a data URL (`data:image/png;base64,...`): one of the media types
    /// [`IMAGE_TYPES`] names, its payload standard base64 of at most [`IMAGE_FILE_BYTES_MAX`]
    /// bytes. It is sent as given; its decoded bytes are hashed. `key` says where it was given.
    pub fn from_data_url(url: &str, key: &str) -> Result<Image, PartError> {
        let head: String = url.chars().take(40).collect();
        let wrong = |why: String| problem(key, format!("the data URL {head:?}... {why}"));
        let rest = url
            .strip_prefix("data:")
            .ok_or_else(|| wrong("does not start with data:".into()))?;
        let (media, payload) = rest
            .split_once(";base64,")
            .ok_or_else(|| wrong("is not base64 (data:MEDIA;base64,...)".into()))?;
        let media_type = IMAGE_TYPES
            .iter()
            .map(|(_, m)| *m)
            .find(|m| m.eq_ignore_ascii_case(media))
            .ok_or_else(|| {
                wrong(format!(
                    "has {media:?}, which is not image/png, image/jpeg, image/gif or image/webp"
                ))
            })?;
        if payload.len() as u64 > IMAGE_FILE_BYTES_MAX.div_ceil(3) * 4 {
            return Err(wrong(format!(
                "holds more than {} MiB",
                IMAGE_FILE_BYTES_MAX >> 20
            )));
        }
        let bytes =
            unbase64(payload).ok_or_else(|| wrong("has a payload that is not base64".into()))?;
        Ok(Image {
            path: "data URL".into(),
            media_type,
            bytes: bytes.len() as u64,
            blake3: blake3::hash(&bytes).to_hex().to_string(),
            data_url: url.to_owned(),
        })
    }
}

/// What is wrong with an image, and where it was named.
fn problem(key: &str, problem: String) -> PartError {
    PartError {
        key: key.to_owned(),
        problem,
    }
}

/// The images of `route` (the `routes[i]` named `key`), read within their size limit.
pub fn load_images(route: &Route, key: &str) -> Result<Vec<Image>, PartError> {
    route
        .images
        .iter()
        .enumerate()
        .map(|(i, path)| Image::from_file(path.as_ref(), path, &format!("{key}.images[{i}]")))
        .collect()
}

/// The `images LABEL` host fact: each image's file, type, size and BLAKE3 (never its bytes).
pub fn images_fact(images: &[Image]) -> String {
    let each: Vec<String> = images
        .iter()
        .map(|i| {
            format!(
                "{} {} {} bytes BLAKE3 {}",
                i.path, i.media_type, i.bytes, i.blake3
            )
        })
        .collect();
    format!("{} images: {}", images.len(), each.join("; "))
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4), for data URLs.
pub(crate) fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 (RFC 4648 §4) decoded: padding required to a multiple of four characters,
/// nothing outside the alphabet; `None` otherwise.
fn unbase64(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| ALPHABET.iter().position(|&a| a == c).map(|v| v as u32);
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let quads = text.len() / 4;
    for (q, quad) in text.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &c in &quad[..4 - pad] {
            n = n << 6 | value(c)?;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_and_refuses_what_is_not_base64() {
        for bytes in [&b""[..], b"a", b"ab", b"abc", b"abcd", &[0, 255, 128, 7, 9]] {
            assert_eq!(unbase64(&base64(bytes)).as_deref(), Some(bytes));
        }
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
        for bad in ["YWJ", "YW=j", "Y===", "YQ==YWJj", "YW*j"] {
            assert_eq!(unbase64(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_data_url_is_hashed_by_its_bytes_and_sent_as_given() {
        let image = Image::from_data_url("data:image/png;base64,YWJj", "k").unwrap();
        assert_eq!((image.media_type, image.bytes), ("image/png", 3));
        assert_eq!(image.blake3, blake3::hash(b"abc").to_hex().to_string());
        assert_eq!(image.data_url, "data:image/png;base64,YWJj");
        for (bad, why) in [
            ("image/png;base64,YWJj", "does not start with data:"),
            ("data:image/png,abc", "is not base64"),
            ("data:text/plain;base64,YWJj", "is not image/png"),
            ("data:image/png;base64,YWJ", "payload that is not base64"),
        ] {
            let e = Image::from_data_url(bad, "line 3").unwrap_err().to_string();
            assert!(e.contains(why) && e.starts_with("line 3: "), "{bad}: {e}");
        }
    }
}
