//! Conversation histories (SPEC §1 "Conversation histories", issue 55 item 2): each turn of a
//! semi-open session sends its session's earlier turns before its own, as a chat client resends
//! the conversation, so turn `k`'s prompt opens with turn `k - 1`'s whole prompt and a prefix
//! cache that kept it can serve all of it.
//!
//! What a history carries is fixed in advance: the session's shared prefix (if the pool drew
//! one), then for each turn `j` in order its marker `request {session}-{j} of percentes.` and its
//! own prompt text. The server's answers are not carried: they are not known before the run, and
//! a schedule that depended on them would no longer be fixed in advance (JOURNAL.md "Schedule"
//! rule 8). Under a history every request's marker names its session and turn, not its index,
//! so the text an earlier turn sent is the text a later one repeats.

/// The header extension that declares the history (absent: every request stands alone).
pub const HISTORY_EXTENSION: &str = "conversation-history";

/// What a turn carries of its session's earlier turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// Every earlier turn's own prompt text, in order (the user's side of the conversation).
    UserTurns,
}

impl History {
    /// Its name in a configuration and a report.
    pub fn name(self) -> &'static str {
        match self {
            History::UserTurns => "earlier user turns",
        }
    }

    /// The header extension's value (JOURNAL.md field 23, `conversation-history`): one format
    /// byte, `1` for [`History::UserTurns`].
    pub fn encode(self) -> Vec<u8> {
        match self {
            History::UserTurns => vec![1],
        }
    }

    /// Reads the extension's value.
    pub fn decode(bytes: &[u8]) -> Result<History, HistoryError> {
        match bytes {
            [1] => Ok(History::UserTurns),
            [_] | [] => Err(HistoryError::Form(bytes.first().copied())),
            _ => Err(HistoryError::Length(bytes.len())),
        }
    }

    /// The marker of turn `turn` of session `session` under a history, between `request ` and
    /// ` of percentes.`: `{session}-{turn}`, unique per request as the index is, and the same
    /// text in every later turn that repeats it.
    pub fn marker(session: u64, turn: u32) -> String {
        format!("{session}-{turn}")
    }
}

/// Why the `conversation-history` extension does not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HistoryError {
    /// Its form byte is not one this build knows (`None`: the value is empty).
    Form(Option<u8>),
    /// It holds this many bytes where one belongs.
    Length(usize),
}

impl std::fmt::Display for HistoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistoryError::Form(form) => {
                write!(
                    f,
                    "form byte {form:?}; this build reads 1 (earlier user turns)"
                )
            }
            HistoryError::Length(n) => write!(f, "{n} bytes where 1 belongs"),
        }
    }
}

impl std::error::Error for HistoryError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The extension round-trips; an unknown form and a wrong length are refused, each named.
    #[test]
    fn the_extension_round_trips_and_refuses_damage() {
        let bytes = History::UserTurns.encode();
        assert_eq!(bytes, [1]);
        assert_eq!(History::decode(&bytes), Ok(History::UserTurns));
        assert_eq!(History::decode(&[2]), Err(HistoryError::Form(Some(2))));
        assert_eq!(History::decode(&[]), Err(HistoryError::Form(None)));
        assert_eq!(History::decode(&[1, 0]), Err(HistoryError::Length(2)));
        assert_eq!(
            History::decode(&[0]).unwrap_err().to_string(),
            "form byte Some(0); this build reads 1 (earlier user turns)"
        );
        assert_eq!(History::marker(12, 3), "12-3");
    }
}
