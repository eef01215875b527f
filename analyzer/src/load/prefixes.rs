//! Each request's shared prefix, recomputed from the schedule's pool (SPEC §1 "Shared prefixes",
//! JOURNAL.md "Schedule" rule 6), and whether a prefix cache could have held it when it was sent:
//! the designed reuse the server's own counters are read beside (§2), and `analyze --by prefix`.

use percentes_formats::pins::value::PREFIX_REUSE_TOLERANCE_POINTS;
use percentes_formats::schedule::{PrefixPool, ScheduleParams};

use crate::frame::{Requests, NONE};
use crate::model::{DesignedReuse, ReuseVerdict};

/// A row without a shared prefix.
pub const NO_PREFIX: u32 = u32::MAX;

/// What a request's prompt could have found in a prefix cache, by design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expectation {
    /// It opens with no shared prefix.
    None,
    /// Its shared prefix's first dispatch to its replica: a cache could not have held it.
    FirstUse,
    /// An earlier request to the same replica sent its shared prefix: a cache with room holds it.
    SeenBefore,
}

impl Expectation {
    /// How `analyze --by prefix` names it.
    pub fn name(self) -> &'static str {
        match self {
            Expectation::None => "no shared prefix",
            Expectation::FirstUse => "shared, first use",
            Expectation::SeenBefore => "shared, seen before",
        }
    }
}

/// Per row: the entry its session drew, whether what it opens with was sent before, and how
/// much of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Prefixes {
    /// The pool the schedule declares, if it does.
    pub pool: Option<PrefixPool>,
    /// Whether each turn resends its session's earlier turns (SPEC §1 "Conversation
    /// histories").
    pub history: bool,
    /// Each row's entry ([`NO_PREFIX`] for none).
    pub entry: Vec<u32>,
    /// Each row's [`Expectation`] (a row never dispatched: by its design alone, never seen).
    pub expectation: Vec<Expectation>,
    /// Each row's designed reuse, tokens: what a prefix cache with room could have held of
    /// its prompt when it was sent (0 unless [`Expectation::SeenBefore`]).
    pub designed: Vec<u32>,
}

impl Prefixes {
    /// The rows' prefixes under `params` (its pool, history and seed), `places[row]` naming
    /// each row's session and turn.
    pub fn of(params: &ScheduleParams, requests: &Requests, places: Vec<(u64, u32)>) -> Prefixes {
        let pool = params.prefixes.as_ref();
        let entry: Vec<u32> = places
            .iter()
            .map(|&(session, _)| {
                pool.and_then(|p| p.draw(params.seed, session))
                    .unwrap_or(NO_PREFIX)
            })
            .collect();
        Prefixes::with_entries(pool, params.history.is_some(), entry, &places, requests)
    }

    /// [`Prefixes::of`] with each row's entry given. In dispatch order (ties by index), per
    /// replica (the name its answer gave; rows without a name are one replica): a row whose
    /// entry an earlier row sent there could find the entry's length cached; under a history,
    /// a later turn whose session sent an earlier turn there could find that turn's whole
    /// prompt, as long as the server counted it (the highest such count: a session's prompts
    /// only grow). A row's design is the longer of the two; seen before when either holds.
    pub fn with_entries(
        pool: Option<&PrefixPool>,
        history: bool,
        entry: Vec<u32>,
        places: &[(u64, u32)],
        requests: &Requests,
    ) -> Prefixes {
        let n = requests.len();
        let opens_shared = |row: usize| entry[row] != NO_PREFIX || (history && places[row].1 > 0);
        let mut expectation: Vec<Expectation> = (0..n)
            .map(|row| match opens_shared(row) {
                true => Expectation::FirstUse,
                false => Expectation::None,
            })
            .collect();
        let mut designed = vec![0u32; n];
        let mut sent: Vec<usize> = (0..n)
            .filter(|&row| requests.dispatched_ns[row] != NONE)
            .collect();
        sent.sort_by_key(|&row| (requests.dispatched_ns[row], requests.index[row]));
        let mut seen = std::collections::HashSet::new();
        // Per (replica, session): the longest prompt the server counted among its turns there
        // (0 when none was counted).
        let mut turns_sent = std::collections::HashMap::new();
        for row in sent {
            let replica = requests.replica_name(row);
            let mut reuse = None;
            if entry[row] != NO_PREFIX && !seen.insert((replica, entry[row])) {
                reuse = pool.map(|p| p.tokens_of(entry[row]));
            }
            if history {
                let session = places[row].0;
                if let Some(&tokens) = turns_sent.get(&(replica, session)) {
                    reuse = Some(reuse.unwrap_or(0).max(tokens));
                }
                let prompt = requests.usage_prompt_tokens[row];
                let counted = if prompt == u32::MAX { 0 } else { prompt };
                let longest = turns_sent.entry((replica, session)).or_insert(0);
                *longest = (*longest).max(counted);
            }
            if let Some(tokens) = reuse {
                expectation[row] = Expectation::SeenBefore;
                designed[row] = tokens;
            }
        }
        Prefixes {
            pool: pool.cloned(),
            history,
            entry,
            expectation,
            designed,
        }
    }

    /// Row `row`'s designed reuse: what a cache with room could have held, else 0.
    pub fn designed_tokens(&self, row: usize) -> u32 {
        self.designed[row]
    }
}

/// The designed reuse of `rows` (the dispatched ones): the prompt tokens a prefix cache with
/// room could have held (each row's shared prefix where an earlier request to its replica sent
/// it) over the prompt tokens the server reported, both over the rows with usage. `None` where
/// the run declares no pool.
/// With `block` (the server's prefix-cache block, tokens, where its metrics say it), each
/// row's design is cut to whole blocks: what such a cache can hold of it.
pub(crate) fn designed(
    run: &super::Run,
    rows: impl IntoIterator<Item = usize>,
    block: Option<u32>,
) -> Option<DesignedReuse> {
    let prefixes = run.prefixes.as_ref()?;
    Some(designed_of(prefixes, &run.requests, rows, block))
}

pub(crate) fn designed_of(
    prefixes: &Prefixes,
    requests: &Requests,
    rows: impl IntoIterator<Item = usize>,
    block: Option<u32>,
) -> DesignedReuse {
    let block = block.filter(|b| *b > 0);
    let mut out = DesignedReuse {
        requests: 0,
        seen_before: 0,
        first_use: 0,
        with_usage: 0,
        prompt_tokens: 0,
        designed_tokens: 0,
        designed_percent: None,
        block_tokens: block,
        history: prefixes.history,
    };
    for row in rows {
        if requests.dispatched_ns[row] == NONE {
            continue;
        }
        out.requests += 1;
        match prefixes.expectation[row] {
            Expectation::SeenBefore => out.seen_before += 1,
            Expectation::FirstUse => out.first_use += 1,
            Expectation::None => {}
        }
        let prompt = requests.usage_prompt_tokens[row];
        if prompt != u32::MAX {
            out.with_usage += 1;
            out.prompt_tokens += u64::from(prompt);
            let design = prefixes.designed_tokens(row);
            out.designed_tokens += u64::from(block.map_or(design, |b| design / b * b));
        }
    }
    out.designed_percent = (out.prompt_tokens > 0)
        .then(|| out.designed_tokens as f64 / out.prompt_tokens as f64 * 100.0);
    out
}

/// The server's hit share (percent) against the designed one: within the pinned tolerance
/// (`server.prefix_reuse_tolerance_points`) as designed, else which way it falls.
pub(crate) fn verdict(hit_percent: f64, designed_percent: f64) -> ReuseVerdict {
    let tolerance = PREFIX_REUSE_TOLERANCE_POINTS as f64;
    if hit_percent < designed_percent - tolerance {
        ReuseVerdict::LessThanDesigned
    } else if hit_percent > designed_percent + tolerance {
        ReuseVerdict::MoreThanDesigned
    } else {
        ReuseVerdict::AsDesigned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdict's edges by hand: 10 points either side of the design agree (the pin), a
    /// hair beyond does not.
    #[test]
    fn the_verdict_is_the_pinned_band_around_the_design() {
        assert_eq!(PREFIX_REUSE_TOLERANCE_POINTS, 10);
        assert_eq!(verdict(70.0, 80.0), ReuseVerdict::AsDesigned);
        assert_eq!(verdict(90.0, 80.0), ReuseVerdict::AsDesigned);
        assert_eq!(verdict(69.9, 80.0), ReuseVerdict::LessThanDesigned);
        assert_eq!(verdict(0.0, 80.0), ReuseVerdict::LessThanDesigned);
        assert_eq!(verdict(90.1, 80.0), ReuseVerdict::MoreThanDesigned);
        assert_eq!(verdict(12.0, 0.0), ReuseVerdict::MoreThanDesigned);
    }

    /// By hand: eight rows over replicas A and B, entries 0 (10 units) and 1 (30 units).
    /// In dispatch order row 1 is entry 0's first use on A, row 0 its repeat there although its
    /// index is lower; row 2 is entry 0's first use on B (caches are per replica); row 3 entry
    /// 1's on B, rows 4 and 7 repeats; row 5 was never sent; row 6 has no prefix. Counted: 7
    /// dispatched, 3 seen before, 3 first uses; with usage rows 0-3, 6, 7: 290 prompt tokens,
    /// designed 10 (row 0) + 30 (row 7) = 40, 13.7931 % (row 4's 30 has no usage to stand on).
    #[test]
    fn first_uses_are_per_replica_in_dispatch_order() {
        let mut requests = Requests::with_capacity(8);
        for i in 0..8 {
            requests.push_scheduled(i, i * 10, 0, 0);
        }
        requests.reserve_records().unwrap();
        let rows: [(u64, &str, u32, Option<u32>); 8] = [
            (30, "A", 0, Some(50)),
            (10, "A", 0, Some(50)),
            (20, "B", 0, Some(40)),
            (40, "B", 1, Some(60)),
            (50, "B", 1, None),
            (NONE, "A", 1, None),
            (60, "A", NO_PREFIX, Some(20)),
            (70, "B", 1, Some(70)),
        ];
        let mut entry = Vec::new();
        for (row, (at, replica, e, usage)) in rows.into_iter().enumerate() {
            requests.dispatched_ns[row] = at;
            requests.replica[row] = requests.replicas.id(replica);
            requests.usage_prompt_tokens[row] = usage.unwrap_or(u32::MAX);
            entry.push(e);
        }
        let pool = PrefixPool {
            entries: 2,
            tokens: vec![10, 30],
            share_ppm: 1_000_000,
        };
        let places: Vec<(u64, u32)> = (0..8).map(|row| (row, 0)).collect();
        let p = Prefixes::with_entries(Some(&pool), false, entry, &places, &requests);
        let (seen, first) = (Expectation::SeenBefore, Expectation::FirstUse);
        assert_eq!(
            p.expectation,
            [
                seen,
                first,
                first,
                first,
                seen,
                first,
                Expectation::None,
                seen
            ]
        );
        let d = designed_of(&p, &requests, 0..8, None);
        assert_eq!(
            (d.requests, d.seen_before, d.first_use, d.with_usage),
            (7, 3, 3, 6)
        );
        assert_eq!((d.prompt_tokens, d.designed_tokens), (290, 40));
        assert!((d.designed_percent.unwrap() - 13.793_103_448).abs() < 1e-6);
    }

    /// By hand, a history without a pool: sessions 0 (turns 0-4) and 1 (turns 0-2) over
    /// replicas A and B. Turn 0s open with nothing; s0 t1 on A finds t0's 100 counted tokens;
    /// s1 t1 on A and s0 t2 on B find nothing of their session there (first uses); s0 t3 on A
    /// finds the longest counted there, 220, and was not counted itself; s0 t4 on A still finds
    /// 220 (t3's count is missing, the longest counted stands); s1 t2 was never sent. Counted:
    /// 7 dispatched, 3 seen before, 2 first uses; with usage 6 rows, 1,340 prompt tokens,
    /// designed 100 + 220 = 320 (t3's 220 has no usage to stand on): 23.8806 %.
    #[test]
    fn a_history_reuses_the_longest_earlier_turn_counted_on_the_replica() {
        let mut requests = Requests::with_capacity(8);
        for i in 0..8 {
            requests.push_scheduled(i, i * 10, 0, 0);
        }
        requests.reserve_records().unwrap();
        // (dispatched, replica, (session, turn), prompt tokens counted)
        type Row<'a> = (u64, &'a str, (u64, u32), Option<u32>);
        let rows: [Row; 8] = [
            (10, "A", (0, 0), Some(100)),
            (20, "B", (1, 0), Some(50)),
            (30, "A", (0, 1), Some(220)),
            (40, "A", (1, 1), Some(120)),
            (50, "B", (0, 2), Some(350)),
            (60, "A", (0, 3), None),
            (70, "A", (0, 4), Some(500)),
            (NONE, "A", (1, 2), None),
        ];
        let mut places = Vec::new();
        for (row, (at, replica, place, usage)) in rows.into_iter().enumerate() {
            requests.dispatched_ns[row] = at;
            requests.replica[row] = requests.replicas.id(replica);
            requests.usage_prompt_tokens[row] = usage.unwrap_or(u32::MAX);
            places.push(place);
        }
        let p = Prefixes::with_entries(None, true, vec![NO_PREFIX; 8], &places, &requests);
        let (seen, first, none) = (
            Expectation::SeenBefore,
            Expectation::FirstUse,
            Expectation::None,
        );
        assert_eq!(
            p.expectation,
            [none, none, seen, first, first, seen, seen, first]
        );
        assert_eq!(p.designed, [0, 0, 100, 0, 0, 220, 220, 0]);
        let d = designed_of(&p, &requests, 0..8, None);
        assert_eq!(
            (d.requests, d.seen_before, d.first_use, d.with_usage),
            (7, 3, 2, 6)
        );
        assert_eq!((d.prompt_tokens, d.designed_tokens), (1_340, 320));
        assert!((d.designed_percent.unwrap() - 23.880_597_015).abs() < 1e-6);
        // In a server's 64-token blocks: 100 holds one (64), 220 three (192): 256 of 1,340.
        let d = designed_of(&p, &requests, 0..8, Some(64));
        assert_eq!((d.designed_tokens, d.block_tokens), (256, Some(64)));
        assert!((d.designed_percent.unwrap() - 19.104_477_611).abs() < 1e-6);
        // Without the history the same rows design nothing.
        let off = Prefixes::with_entries(None, false, vec![NO_PREFIX; 8], &places, &requests);
        assert!(off.expectation.iter().all(|e| *e == none) && off.designed == [0; 8]);
    }
}
