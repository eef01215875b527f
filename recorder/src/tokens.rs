//! `target.tokenizer`: the model's `tokenizer.json`, read offline with Hugging Face's
//! tokenizers library (issue 18 item 3; SPEC §P "Token lengths").
//!
//! It does two things. A generated prompt is built to a length in tokens: its filler is a run of
//! common English words that the tokenizer reads as one token each (with the space before
//! them), checked once at start against the tokenizer's own offsets, so any first n words are
//! exactly n tokens and a request's prompt is cut to length by slicing, never by tokenizing on
//! the send path. And a ShareGPT entry's reply is counted, for `output_tokens = dataset`.
//! The file's BLAKE3 goes in the journal (the `tokenizer` host fact), so a re-run can show it
//! counted with the same tokenizer.
//!
//! The count is the prompt's own text, without special tokens or a chat template: the server's
//! `usage.prompt_tokens`, journaled with every response, adds the unique prefix and whatever
//! its template wraps around the message.

use crate::error::RecordError;
use std::sync::Arc;

use percentes_formats::files::{read_bounded, TOKENIZER_BYTES_MAX};
use tokenizers::Tokenizer;

/// Common English words a generated prompt is made of; those the model's tokenizer reads as one
/// token make its filler, in this order, over and over.
const WORDS: [&str; 96] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "they", "you", "were", "her", "she", "there", "been", "one", "all", "we", "their", "has",
    "would", "when", "if", "so", "no", "will", "more", "can", "who", "about", "up", "said", "out",
    "what", "some", "into", "them", "only", "time", "new", "may", "first", "any", "like", "now",
    "my", "such", "over", "our", "even", "most", "made", "after", "also", "did", "many", "before",
    "must", "through", "back", "where", "much", "your", "way", "well", "down", "should", "because",
    "each", "just", "those", "people", "how", "too", "little", "very", "make",
];

/// Fewest distinct words a filler is made of.
const FILLER_WORDS_MIN: usize = 8;

/// A model's tokenizer, loaded from its `tokenizer.json`.
pub struct ModelTokenizer {
    tokenizer: Tokenizer,
    blake3: [u8; 32],
    path: String,
}

impl std::fmt::Debug for ModelTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelTokenizer({})", self.path)
    }
}

impl ModelTokenizer {
    /// Reads and parses `path`; the error names the key, the file and what went wrong.
    pub fn load(path: &str) -> Result<ModelTokenizer, RecordError> {
        let bytes = read_bounded(path.as_ref(), TOKENIZER_BYTES_MAX, "a tokenizer")
            .map_err(|e| RecordError::config(format!("target.tokenizer {path}: {e}")))?;
        let tokenizer = Tokenizer::from_bytes(&bytes).map_err(|e| {
            RecordError::config(format!(
                "target.tokenizer {path}: not a tokenizer.json the tokenizers library reads ({e})"
            ))
        })?;
        Ok(ModelTokenizer {
            tokenizer,
            blake3: *blake3::hash(&bytes).as_bytes(),
            path: path.to_owned(),
        })
    }

    /// The tokens of `text` alone: no special tokens, no template.
    pub fn count(&self, text: &str) -> Result<u32, RecordError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.len() as u32)
            .map_err(|e| RecordError::config(format!("target.tokenizer {}: {e}", self.path)))
    }

    /// The `tokenizer` host fact: `BLAKE3 <hex>, vocabulary N, PATH`.
    pub fn fact(&self) -> String {
        format!(
            "BLAKE3 {}, vocabulary {}, {}",
            percentes_formats::journal::hex(&self.blake3),
            self.tokenizer.get_vocab_size(true),
            self.path
        )
    }

    /// Up to [`WORDS`]'s length of the vocabulary's own words, in token id order: tokens that
    /// decode to a space and 2 to 12 lower-case ASCII letters and encode back to themselves.
    fn vocabulary_words(&self) -> Result<Vec<String>, RecordError> {
        let mut ids: Vec<u32> = self.tokenizer.get_vocab(false).into_values().collect();
        ids.sort_unstable();
        let mut words = Vec::new();
        for id in ids {
            let Ok(text) = self.tokenizer.decode(&[id], true) else {
                continue;
            };
            let Some(word) = text.strip_prefix(' ') else {
                continue;
            };
            if (2..=12).contains(&word.len())
                && word.bytes().all(|b| b.is_ascii_lowercase())
                && self.count(&text)? == 1
            {
                words.push(word.to_owned());
                if words.len() == WORDS.len() {
                    break;
                }
            }
        }
        Ok(words)
    }

    /// A filler of `longest` tokens, each one word: the common English words the tokenizer
    /// reads as one token, or, where fewer than eight are, its own vocabulary's. Refused, with the reason, when too few of
    /// the words are single tokens or when the tokenizer does not split the filler at its words
    /// (then a slice would not be the length it says).
    pub fn filler(&self, longest: u32) -> Result<Arc<Filler>, RecordError> {
        let mut words: Vec<String> = Vec::new();
        for word in WORDS {
            if self.count(&format!(" {word}"))? == 1 {
                words.push(word.to_owned());
            }
        }
        if words.len() < FILLER_WORDS_MIN {
            // A small or specialised vocabulary: its own single-token words, in id order.
            words = self.vocabulary_words()?;
        }
        if words.len() < FILLER_WORDS_MIN {
            return Err(RecordError::config(format!(
                "target.tokenizer {}: fewer than {FILLER_WORDS_MIN} words (a space and lower-case letters) are one token each in it, so a prompt cannot be built to a length in tokens with it (is it a byte-level BPE tokenizer, as Llama 3's, Qwen's and GPT's are?)",
                self.path,
            )));
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let filler = Filler::from_words(&words, longest);
        let encoding = self
            .tokenizer
            .encode(filler.text.as_str(), false)
            .map_err(|e| RecordError::config(format!("target.tokenizer {}: {e}", self.path)))?;
        let ends: Vec<usize> = encoding.get_offsets().iter().map(|(_, end)| *end).collect();
        if ends != filler.ends {
            return Err(RecordError::config(format!(
                "target.tokenizer {}: a filler of {longest} words reads as {} tokens that do not fall on its words, so a prompt cannot be cut to a length in tokens",
                self.path,
                ends.len()
            )));
        }
        Ok(Arc::new(filler))
    }
}

/// The text a generated prompt's length is cut from: units (a token each with a tokenizer, a
/// word each without), each a space and a word.
#[derive(Debug)]
pub struct Filler {
    text: String,
    /// `ends[k]`: the byte where the first k + 1 units end.
    ends: Vec<usize>,
}

impl Filler {
    /// Without a tokenizer: `longest` words, a unit each.
    pub fn words(longest: u32) -> Arc<Filler> {
        Arc::new(Filler::from_words(&WORDS, longest))
    }

    fn from_words(words: &[&str], longest: u32) -> Filler {
        let mut text = String::new();
        let mut ends = Vec::with_capacity(longest as usize);
        for k in 0..longest as usize {
            text.push(' ');
            text.push_str(words[k % words.len()]);
            ends.push(text.len());
        }
        Filler { text, ends }
    }

    /// The first `n` units (at most all of them), beginning with a space; empty for 0.
    pub fn first(&self, n: u32) -> &str {
        match (n as usize).min(self.ends.len()) {
            0 => "",
            n => &self.text[..self.ends[n - 1]],
        }
    }

    /// How many units it holds.
    pub fn len(&self) -> u32 {
        self.ends.len() as u32
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sentence of a refusal of the configuration (kind `Config`, never another).
    fn refused<T: std::fmt::Debug>(result: Result<T, crate::error::RecordError>) -> String {
        let e = result.unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::Config, "{e}");
        e.to_string()
    }

    /// tests/data/tokenizer.json: a byte-level BPE (561 tokens) made by
    /// scripts/make-test-tokenizer.py with Python's tokenizers 0.23.3.
    fn fixture() -> ModelTokenizer {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/tokenizer.json");
        ModelTokenizer::load(path).unwrap()
    }

    #[test]
    fn counts_agree_with_pythons_tokenizers() {
        // scripts/make-test-tokenizer.py prints these counts from Python's implementation; the
        // vocabulary is 561 there too (the trainer ran out of merges before 600).
        let t = fixture();
        assert_eq!(t.count("request 17 of percentes.").unwrap(), 13);
        assert_eq!(t.count(" the of and to in is").unwrap(), 7);
        assert_eq!(t.count("unanticipated").unwrap(), 10);
        assert!(t.fact().starts_with("BLAKE3 "), "{}", t.fact());
        assert!(t.fact().contains("vocabulary 561"), "{}", t.fact());
    }

    #[test]
    fn any_first_n_units_of_the_filler_are_n_tokens() {
        let t = fixture();
        let filler = t.filler(700).unwrap();
        assert_eq!(filler.len(), 700);
        // Re-encoded from scratch, not read from the offsets the filler was checked with.
        for n in [0, 1, 2, 7, 95, 96, 97, 350, 699, 700] {
            let text = filler.first(n);
            assert_eq!(t.count(text).unwrap(), n, "{n}: {text:?}");
            assert_eq!(text.split_whitespace().count() as u32, n);
        }
        // After the unique prefix, the prompt's tokens are the prefix's plus n: the tokenizer
        // splits at the space, so nothing merges across.
        let prefix = "request 17 of percentes.";
        assert_eq!(
            t.count(&format!("{prefix}{}", filler.first(40))).unwrap(),
            t.count(prefix).unwrap() + 40
        );
        assert_eq!(filler.first(10_000), filler.first(700));
    }

    #[test]
    fn a_vocabulary_without_common_words_lends_its_own() {
        // tests/data/tokenizer-greek.json is trained on Greek letter names alone, as the tiny
        // vLLM model's is (scripts/make-test-tokenizer.py): " the" is four tokens in it.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/tokenizer-greek.json"
        );
        let t = ModelTokenizer::load(path).unwrap();
        assert!(t.count(" the").unwrap() > 1);
        let filler = t.filler(300).unwrap();
        for n in [1, 5, 23, 24, 25, 299, 300] {
            let text = filler.first(n);
            assert_eq!(t.count(text).unwrap(), n, "{n}: {text:?}");
        }
        // Its own pieces, in id order (" om", " ta", " eta" here), not English words.
        assert_eq!(filler.first(3), " om ta eta");
    }

    #[test]
    fn a_file_that_is_not_a_tokenizer_is_refused_by_name() {
        let dir = percentes_testkit::Scratch::new("tokens");
        let bad = dir.join("tokenizer.json");
        std::fs::write(&bad, "{\"not\": \"a tokenizer\"}").unwrap();
        let error = refused(ModelTokenizer::load(bad.to_str().unwrap()));
        assert!(error.starts_with("target.tokenizer "), "{error}");
        assert!(error.contains("not a tokenizer.json"), "{error}");
        let error = refused(ModelTokenizer::load("/nonexistent/tokenizer.json"));
        assert!(error.contains("/nonexistent/tokenizer.json"), "{error}");
    }

    #[test]
    fn without_a_tokenizer_a_unit_is_a_word() {
        let filler = Filler::words(5);
        assert_eq!(filler.first(3), " the of and");
        assert_eq!(filler.first(0), "");
    }
}
