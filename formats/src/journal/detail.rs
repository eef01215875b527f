//! The words an event's detail opens with where formats/JOURNAL.md gives them a meaning that a
//! reader acts on ("Conventions the analyzer reads"): a probe that found its replica up or down,
//! a fault whose removal failed, a scrape that gave no record. The recorder writes them and the
//! analyzer reads them through [`DetailWord`], so neither matches the other's text; the rest of a
//! detail is free text for people.

/// A detail's opening word with a meaning (formats/JOURNAL.md, event kinds 10, 30 and 45).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetailWord {
    /// `probe`: the replica's `/health` answered 200. The whole detail is `ok`.
    ProbeUp,
    /// `probe`: it did not answer, or not with 200 (still loading, say): `down: <why>`.
    ProbeDown,
    /// `fault-failed`: the fault could not be removed: `removal failed: <why>`, or
    /// `removal failed (<when>): <why>`.
    RemovalFailed,
    /// `scrape`: a scrape that gave no record: `failed: GET <path> at <address>: <why>`.
    ScrapeFailed,
    /// `scrape`: an answered scrape holding lines that are not kept: `answer: <what>`.
    ScrapeAnswer,
}

impl DetailWord {
    /// Every word.
    pub const ALL: [DetailWord; 5] = [
        DetailWord::ProbeUp,
        DetailWord::ProbeDown,
        DetailWord::RemovalFailed,
        DetailWord::ScrapeFailed,
        DetailWord::ScrapeAnswer,
    ];

    /// The word as the journal spells it.
    pub const fn word(self) -> &'static str {
        match self {
            DetailWord::ProbeUp => "ok",
            DetailWord::ProbeDown => "down",
            DetailWord::RemovalFailed => "removal failed",
            DetailWord::ScrapeFailed => "failed",
            DetailWord::ScrapeAnswer => "answer",
        }
    }

    /// Whether `detail` is this word's: the whole detail for [`DetailWord::ProbeUp`]; for the
    /// others the word, then the end, a colon or a space (so `failed` does not open `failedx`).
    pub fn opens(self, detail: &str) -> bool {
        match self {
            DetailWord::ProbeUp => detail == self.word(),
            _ => detail
                .strip_prefix(self.word())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', ' '])),
        }
    }

    /// The detail `<word>: <rest>`; for [`DetailWord::ProbeUp`], which carries nothing more,
    /// the word alone whatever `rest` is.
    pub fn with(self, rest: &str) -> String {
        match self {
            DetailWord::ProbeUp => self.word().to_owned(),
            _ => format!("{}: {rest}", self.word()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_word_opens_what_it_writes_and_nothing_near_it() {
        for word in DetailWord::ALL {
            assert!(word.opens(&word.with("why")), "{word:?}");
        }
        assert!(DetailWord::ProbeUp.opens("ok"));
        assert!(!DetailWord::ProbeUp.opens("ok: later"));
        assert!(DetailWord::ProbeDown.opens("down: connect refused"));
        assert!(!DetailWord::ProbeDown.opens("downstream"));
        assert!(DetailWord::RemovalFailed.opens("removal failed (early, the run stopping): x"));
        assert!(!DetailWord::ScrapeFailed.opens("failedx"));
        assert!(!DetailWord::ScrapeFailed.opens("removal failed: x"));
        assert_eq!(DetailWord::ProbeUp.with("ignored"), "ok");
        assert_eq!(
            DetailWord::ScrapeAnswer.with("3 of 9 lines"),
            "answer: 3 of 9 lines"
        );
    }
}
