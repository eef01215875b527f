//! The rules a reader holds kind-7 records to (formats/JOURNAL.md "7 scrape", "What a reader
//! refuses"): what a reader that sums readings over a span needs of them, each broken rule named
//! so `analyze` can refuse the record that breaks it, as it refuses a misplaced kind 6. A
//! recorder's [`Scraper`](super::Scraper) writes nothing these refuse; a record that breaks one
//! was written by something else, or rewritten.

use std::collections::HashMap;

use super::{ScrapeRecord, SOURCE_SERIES_MAX};
use crate::prometheus::SeriesKind;

/// The rule a scrape record breaks, by its number in JOURNAL.md's list, with what it found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokenScrapeRule {
    /// The rule's number (1 to 6).
    pub rule: u8,
    /// What the record holds that breaks it.
    pub what: String,
}

impl std::fmt::Display for BrokenScrapeRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (formats/JOURNAL.md \"7 scrape\", rule {})",
            self.what, self.rule
        )
    }
}

fn broken(rule: u8, what: String) -> Result<(), BrokenScrapeRule> {
    Err(BrokenScrapeRule { rule, what })
}

/// What a reader remembers of one source's records.
#[derive(Debug, Default)]
struct SourceState {
    records: u64,
    last_received_ns: u64,
    /// Each defined series' kind code, by id.
    kinds: Vec<u8>,
    /// Whether each series is gone (its last answer left it out) by id.
    gone: Vec<bool>,
}

/// The state the rules need over a journal's scrape records, in journal order.
#[derive(Debug, Default)]
pub struct ScrapeRules {
    sources: HashMap<String, SourceState>,
}

impl ScrapeRules {
    /// Holds `r`, the next scrape record in journal order, to the rules; on success its source's
    /// state includes it.
    pub fn check(&mut self, r: &ScrapeRecord) -> Result<(), BrokenScrapeRule> {
        let state = self.sources.entry(r.source.clone()).or_default();
        state.times_and_flags(r)?;
        let defined_from = state.kinds.len();
        state.definitions(r)?;
        let read = state.samples(r, defined_from)?;
        state.gone(r, defined_from, &read)?;
        for (i, was_read) in read.iter().enumerate() {
            if *was_read {
                state.gone[i] = false;
            }
        }
        for &id in &r.gone {
            state.gone[id as usize] = true;
        }
        state.records += 1;
        state.last_received_ns = r.received_ns;
        Ok(())
    }
}

impl SourceState {
    /// Rules 1 and 2: one answer at a time, in time order; `first` on the source's first record
    /// only, never with `restarted`.
    fn times_and_flags(&self, r: &ScrapeRecord) -> Result<(), BrokenScrapeRule> {
        let source = &r.source;
        if r.sent_ns > r.received_ns {
            return broken(
                1,
                format!(
                    "a scrape of {source:?} sent at {} ns and received at {} ns, before it was sent",
                    r.sent_ns, r.received_ns
                ),
            );
        }
        if self.records > 0 && r.sent_ns < self.last_received_ns {
            return broken(
                1,
                format!(
                    "a scrape of {source:?} sent at {} ns, before its previous answer was received ({} ns)",
                    r.sent_ns, self.last_received_ns
                ),
            );
        }
        if r.first != (self.records == 0) {
            return broken(
                2,
                format!(
                    "record {} of {source:?} {} `first`",
                    self.records + 1,
                    if r.first { "has" } else { "lacks" }
                ),
            );
        }
        if r.first && r.restarted {
            return broken(
                2,
                format!("the first record of {source:?} says `restarted`"),
            );
        }
        Ok(())
    }

    /// Rule 3: each definition the source's next id, of a known kind, within the bound.
    fn definitions(&mut self, r: &ScrapeRecord) -> Result<(), BrokenScrapeRule> {
        let source = &r.source;
        for d in &r.defined {
            if d.id as usize != self.kinds.len() {
                let what = if (d.id as usize) < self.kinds.len() {
                    format!("defines series {} of {source:?} again", d.id)
                } else {
                    format!(
                        "defines series {} of {source:?}, where the next id is {}",
                        d.id,
                        self.kinds.len()
                    )
                };
                return broken(3, what);
            }
            if SeriesKind::from_code(d.kind).is_none() {
                return broken(
                    3,
                    format!(
                        "defines series {} of {source:?} with kind {}, which no version defines (0 to 3)",
                        d.id, d.kind
                    ),
                );
            }
            if self.kinds.len() >= SOURCE_SERIES_MAX {
                return broken(
                    3,
                    format!("defines more than {SOURCE_SERIES_MAX} series of {source:?}"),
                );
            }
            self.kinds.push(d.kind);
            self.gone.push(false);
        }
        Ok(())
    }

    /// Rules 4 and 6: samples of defined series, each at most once, every new series read; a
    /// known cumulative series' increase never negative. Which ids the record reads.
    fn samples(
        &self,
        r: &ScrapeRecord,
        defined_from: usize,
    ) -> Result<Vec<bool>, BrokenScrapeRule> {
        let source = &r.source;
        let mut read = vec![false; self.kinds.len()];
        for s in &r.samples {
            let Some(kind) = self.kinds.get(s.id as usize).copied() else {
                return Err(BrokenScrapeRule {
                    rule: 4,
                    what: format!("reads series {} of {source:?}, which is not defined", s.id),
                });
            };
            if std::mem::replace(&mut read[s.id as usize], true) {
                return Err(BrokenScrapeRule {
                    rule: 4,
                    what: format!("reads series {} of {source:?} twice", s.id),
                });
            }
            let cumulative =
                kind == SeriesKind::Counter.code() || kind == SeriesKind::Histogram.code();
            let increase = !r.first
                && !r.restarted
                && (s.id as usize) < defined_from
                && !self.gone[s.id as usize];
            if cumulative && increase && s.value < 0.0 {
                return Err(BrokenScrapeRule {
                    rule: 6,
                    what: format!(
                        "reads cumulative series {} of {source:?} as an increase of {}, in a record that does not say `restarted`",
                        s.id, s.value
                    ),
                });
            }
        }
        if let Some(d) = r.defined.iter().find(|d| !read[d.id as usize]) {
            return Err(BrokenScrapeRule {
                rule: 4,
                what: format!("defines series {} of {source:?} without its reading", d.id),
            });
        }
        Ok(read)
    }

    /// Rule 5: gone only what was there, not read in the same record, once.
    fn gone(
        &self,
        r: &ScrapeRecord,
        defined_from: usize,
        read: &[bool],
    ) -> Result<(), BrokenScrapeRule> {
        let source = &r.source;
        let mut gone_here = vec![false; self.kinds.len()];
        for &id in &r.gone {
            let i = id as usize;
            if i >= self.kinds.len() || i >= defined_from {
                return broken(
                    5,
                    format!(
                        "says series {id} of {source:?} is gone, and no earlier record defines it"
                    ),
                );
            }
            if read[i] || std::mem::replace(&mut gone_here[i], true) || self.gone[i] {
                return broken(
                    5,
                    format!(
                        "says series {id} of {source:?} is gone, and it {}",
                        if read[i] {
                            "is read in the same record"
                        } else {
                            "was not there to go (already gone, or said twice)"
                        }
                    ),
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Sample, ScrapeRecord, SeriesDefinition};
    use super::*;

    fn record(first: bool, (sent, received): (u64, u64)) -> ScrapeRecord {
        ScrapeRecord {
            source: "r0".into(),
            sent_ns: sent,
            received_ns: received,
            first,
            restarted: false,
            defined: Vec::new(),
            samples: Vec::new(),
            gone: Vec::new(),
        }
    }

    fn define(r: &mut ScrapeRecord, id: u32, kind: SeriesKind, value: f64) {
        r.defined.push(SeriesDefinition {
            id,
            kind: kind.code(),
            family: format!("f{id}"),
            name: format!("f{id}"),
            labels: Vec::new(),
        });
        r.samples.push(Sample { id, value });
    }

    /// The first record, defining a counter (0) and a gauge (1), then a good second.
    fn started() -> ScrapeRules {
        let mut rules = ScrapeRules::default();
        let mut first = record(true, (0, 0));
        define(&mut first, 0, SeriesKind::Counter, 5.0);
        define(&mut first, 1, SeriesKind::Gauge, -2.0);
        rules.check(&first).unwrap();
        let mut second = record(false, (10, 20));
        second.samples.push(Sample { id: 0, value: 3.0 });
        second.gone.push(1);
        rules.check(&second).unwrap();
        rules
    }

    #[test]
    fn what_a_recorder_writes_passes_and_each_break_names_its_rule() {
        let mut rules = started();
        // The gauge comes back; a new series is defined in a later record.
        let mut third = record(false, (30, 40));
        third.samples.push(Sample { id: 1, value: 1.0 });
        define(&mut third, 2, SeriesKind::Histogram, 7.0);
        rules.check(&third).unwrap();
        type Break = Box<dyn Fn(&mut ScrapeRecord)>;
        let cases: Vec<(u8, Break)> = vec![
            (1, Box::new(|r| r.sent_ns = 35)),
            (1, Box::new(|r| (r.sent_ns, r.received_ns) = (60, 50))),
            (2, Box::new(|r| r.first = true)),
            (3, Box::new(|r| define(r, 1, SeriesKind::Gauge, 0.0))),
            (3, Box::new(|r| define(r, 4, SeriesKind::Gauge, 0.0))),
            (
                3,
                Box::new(|r| {
                    define(r, 3, SeriesKind::Gauge, 0.0);
                    r.defined[0].kind = 9;
                }),
            ),
            (
                4,
                Box::new(|r| r.samples.push(Sample { id: 3, value: 1.0 })),
            ),
            (
                4,
                Box::new(|r| {
                    r.samples.push(Sample { id: 1, value: 1.0 });
                    r.samples.push(Sample { id: 1, value: 2.0 });
                }),
            ),
            (
                4,
                Box::new(|r| {
                    define(r, 3, SeriesKind::Gauge, 0.0);
                    r.samples.clear();
                }),
            ),
            (5, Box::new(|r| r.gone.push(3))),
            (
                5,
                Box::new(|r| {
                    r.samples.push(Sample { id: 1, value: 1.0 });
                    r.gone.push(1);
                }),
            ),
            (5, Box::new(|r| r.gone.extend([2, 2]))),
            (
                6,
                Box::new(|r| r.samples.push(Sample { id: 0, value: -1.0 })),
            ),
            (
                6,
                Box::new(|r| r.samples.push(Sample { id: 2, value: -0.5 })),
            ),
        ];
        for (i, (rule, edit)) in cases.iter().enumerate() {
            let mut r = record(false, (50, 60));
            edit(&mut r);
            let mut fresh = started();
            let mut third = record(false, (30, 40));
            third.samples.push(Sample { id: 1, value: 1.0 });
            define(&mut third, 2, SeriesKind::Histogram, 7.0);
            fresh.check(&third).unwrap();
            let e = fresh.check(&r).unwrap_err();
            assert_eq!(e.rule, *rule, "case {i}: {e}");
            assert!(e.to_string().contains(&format!("rule {rule})")), "{e}");
        }
        // A restart reads counters from zero, so a value below the last is no break there; a
        // series back from gone reads as if first seen.
        let mut restarted = record(false, (50, 60));
        restarted.restarted = true;
        restarted.samples.push(Sample { id: 0, value: -1.0 });
        rules.check(&restarted).unwrap();
        // The first record: only one, and never `restarted`.
        let mut other = ScrapeRules::default();
        let mut r = record(false, (0, 0));
        assert_eq!(other.check(&r).unwrap_err().rule, 2);
        r.first = true;
        r.restarted = true;
        assert_eq!(other.check(&r).unwrap_err().rule, 2);
        // Another source starts its own count.
        let mut x = record(true, (5, 6));
        x.source = "r1".into();
        rules.check(&x).unwrap();
    }
}
