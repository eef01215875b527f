//! Each request's shared prefix, recomputed from the schedule's pool (SPEC §1 "Shared prefixes",
//! JOURNAL.md "Schedule" rule 6), and whether a prefix cache could have held it when it was sent:
//! the designed reuse the server's own counters are read beside (§2), and `analyze --by prefix`.

use percentes_formats::pins::value::PREFIX_REUSE_TOLERANCE_POINTS;
use percentes_formats::schedule::PrefixPool;

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

/// Per row: the entry its session drew and whether it was sent before.
#[derive(Clone, Debug, PartialEq)]
pub struct Prefixes {
    /// The pool the schedule declares.
    pub pool: PrefixPool,
    /// Each row's entry ([`NO_PREFIX`] for none).
    pub entry: Vec<u32>,
    /// Each row's [`Expectation`] (a row never dispatched: by its entry alone, never seen).
    pub expectation: Vec<Expectation>,
}

impl Prefixes {
    /// The rows' prefixes under `pool` and `seed`, `session(row)` naming each row's session:
    /// in dispatch order (ties by index), a row is [`Expectation::SeenBefore`] when an earlier
    /// dispatched row to the same replica (the name its answer gave; rows without a name are
    /// one replica) carried the same entry.
    pub fn of(
        pool: &PrefixPool,
        seed: u64,
        requests: &Requests,
        session: impl Fn(usize) -> u64,
    ) -> Prefixes {
        let entry: Vec<u32> = (0..requests.len())
            .map(|row| pool.draw(seed, session(row)).unwrap_or(NO_PREFIX))
            .collect();
        Prefixes::with_entries(pool, entry, requests)
    }

    /// [`Prefixes::of`] with each row's entry given.
    pub fn with_entries(pool: &PrefixPool, entry: Vec<u32>, requests: &Requests) -> Prefixes {
        let n = requests.len();
        let mut expectation: Vec<Expectation> = entry
            .iter()
            .map(|&e| match e {
                NO_PREFIX => Expectation::None,
                _ => Expectation::FirstUse,
            })
            .collect();
        let mut sent: Vec<usize> = (0..n)
            .filter(|&row| requests.dispatched_ns[row] != NONE && entry[row] != NO_PREFIX)
            .collect();
        sent.sort_by_key(|&row| (requests.dispatched_ns[row], requests.index[row]));
        let mut seen = std::collections::HashSet::new();
        for row in sent {
            if !seen.insert((requests.replica_name(row), entry[row])) {
                expectation[row] = Expectation::SeenBefore;
            }
        }
        Prefixes {
            pool: pool.clone(),
            entry,
            expectation,
        }
    }

    /// Row `row`'s designed reuse: its entry's length when a cache could hold it, else 0.
    pub fn designed_tokens(&self, row: usize) -> u32 {
        match self.expectation[row] {
            Expectation::SeenBefore => self.pool.tokens_of(self.entry[row]),
            _ => 0,
        }
    }
}

/// The designed reuse of `rows` (the dispatched ones): the prompt tokens a prefix cache with
/// room could have held (each row's shared prefix where an earlier request to its replica sent
/// it) over the prompt tokens the server reported, both over the rows with usage. `None` where
/// the run declares no pool.
pub(crate) fn designed(
    run: &super::Run,
    rows: impl IntoIterator<Item = usize>,
) -> Option<DesignedReuse> {
    let prefixes = run.prefixes.as_ref()?;
    Some(designed_of(prefixes, &run.requests, rows))
}

pub(crate) fn designed_of(
    prefixes: &Prefixes,
    requests: &Requests,
    rows: impl IntoIterator<Item = usize>,
) -> DesignedReuse {
    let mut out = DesignedReuse {
        requests: 0,
        seen_before: 0,
        first_use: 0,
        with_usage: 0,
        prompt_tokens: 0,
        designed_tokens: 0,
        designed_percent: None,
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
            out.designed_tokens += u64::from(prefixes.designed_tokens(row));
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
        let p = Prefixes::with_entries(&pool, entry, &requests);
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
        let d = designed_of(&p, &requests, 0..8);
        assert_eq!(
            (d.requests, d.seen_before, d.first_use, d.with_usage),
            (7, 3, 3, 6)
        );
        assert_eq!((d.prompt_tokens, d.designed_tokens), (290, 40));
        assert!((d.designed_percent.unwrap() - 13.793_103_448).abs() < 1e-6);
    }
}
