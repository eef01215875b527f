//! Kind 7: one scrape of a server's metrics endpoint (formats/JOURNAL.md "7 scrape"; SPEC §2
//! "Server-side evidence"), and [`Scraper`], the per-source state that turns the samples of
//! successive answers into records: each series defined once, gauges as values, counters and
//! histogram parts as increases, unchanged values left out.

use std::collections::BTreeMap;

use bincode::{Decode, Encode};
use serde::Serialize;

use crate::prometheus::{Exposed, SeriesKind};

pub mod rules;

/// A series, defined in the first scrape record of its source that carries it.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct SeriesDefinition {
    /// Its id within its source (from 0, in order of first appearance).
    pub id: u32,
    /// A [`SeriesKind`] code: 0 untyped, 1 gauge, 2 counter, 3 histogram part.
    pub kind: u8,
    /// Its family (`vllm:time_to_first_token_seconds`).
    pub family: String,
    /// Its name as exposed (`vllm:time_to_first_token_seconds_bucket`).
    pub name: String,
    /// Its labels, in the order the server wrote them.
    pub labels: Vec<(String, String)>,
}

/// One series' reading in a scrape.
#[derive(Clone, Copy, Debug, Encode, Decode, Serialize)]
pub struct Sample {
    /// The series' id in its source.
    pub id: u32,
    /// A gauge's (or untyped series') value; a cumulative series' increase since its source's
    /// previous scrape (its value, in its source's first scrape or where it first appears).
    pub value: f64,
}

impl PartialEq for Sample {
    fn eq(&self, other: &Sample) -> bool {
        self.id == other.id && self.value.to_bits() == other.value.to_bits()
    }
}

impl Eq for Sample {}

/// One answered scrape of one source.
#[derive(Clone, Debug, PartialEq, Eq, Encode, Decode, Serialize)]
pub struct ScrapeRecord {
    /// The replica (a `target.replica_addresses` name) or `server_metrics.extra` name scraped.
    pub source: String,
    /// When the request was written, ns from the epoch.
    pub sent_ns: u64,
    /// When the answer had been read whole, ns from the epoch.
    pub received_ns: u64,
    /// This is the source's first answered scrape: its cumulative values are the base the run
    /// starts from, not increases within it.
    pub first: bool,
    /// A cumulative series went down since the previous scrape: the process behind the address
    /// is a new one (a replacement), and every cumulative value here counts from its zero.
    pub restarted: bool,
    /// The series this scrape is the first to carry.
    pub defined: Vec<SeriesDefinition>,
    /// Readings: every series defined here, and each other one whose value changed (a
    /// cumulative series: whose increase is not zero).
    pub samples: Vec<Sample>,
    /// Series of earlier scrapes this answer no longer carries.
    pub gone: Vec<u32>,
}

/// What a source's scraper remembers of each series.
#[derive(Debug)]
struct Known {
    id: u32,
    kind: SeriesKind,
    last: f64,
    seen: bool,
    present: bool,
}

/// The state of one source's scrapes: series ids and last values.
#[derive(Debug, Default)]
pub struct Scraper {
    series: BTreeMap<(String, Vec<(String, String)>), Known>,
    answered: bool,
}

/// The most series one source may define over a run; past it, new series are left out.
pub const SOURCE_SERIES_MAX: usize = 16_384;

impl Scraper {
    /// The record for an answer read between `sent_ns` and `received_ns`.
    pub fn record(
        &mut self,
        source: &str,
        (sent_ns, received_ns): (u64, u64),
        samples: &[Exposed],
    ) -> ScrapeRecord {
        let first = !self.answered;
        self.answered = true;
        for known in self.series.values_mut() {
            known.seen = false;
        }
        // A restart shows as any cumulative series going down; every increase then counts
        // from zero, so it is decided before any reading is taken.
        let restarted = !first
            && samples.iter().any(|s| {
                s.kind.cumulative()
                    && self
                        .series
                        .get(&(s.name.clone(), s.labels.clone()))
                        .is_some_and(|k| s.value < k.last)
            });
        let mut record = ScrapeRecord {
            source: source.to_owned(),
            sent_ns,
            received_ns,
            first,
            restarted,
            defined: Vec::new(),
            samples: Vec::new(),
            gone: Vec::new(),
        };
        for s in samples {
            self.read(s, restarted, &mut record);
        }
        for known in self.series.values_mut() {
            if !known.seen && known.present {
                known.present = false;
                record.gone.push(known.id);
                // Gone: a later reappearance reads from zero, as a series first seen.
                known.last = if known.kind.cumulative() {
                    0.0
                } else {
                    f64::NAN
                };
            }
        }
        record.gone.sort_unstable();
        record
    }
}

impl Scraper {
    /// One sample of an answer into `record`: a new series defined with its value, a known
    /// one's reading when it has changed (a cumulative series' increase, from zero after a
    /// restart).
    fn read(&mut self, s: &Exposed, restarted: bool, record: &mut ScrapeRecord) {
        let key = (s.name.clone(), s.labels.clone());
        let next_id = self.series.len() as u32;
        let room = self.series.len() < SOURCE_SERIES_MAX;
        match self.series.get_mut(&key) {
            Some(known) => {
                if known.seen {
                    return; // the same series twice in one answer: the first counts
                }
                known.seen = true;
                known.present = true;
                let value = if !known.kind.cumulative() {
                    (s.value.to_bits() != known.last.to_bits()).then_some(s.value)
                } else if restarted {
                    Some(s.value)
                } else {
                    let up = s.value - known.last;
                    (up != 0.0).then_some(up)
                };
                known.last = s.value;
                if let Some(value) = value {
                    record.samples.push(Sample {
                        id: known.id,
                        value,
                    });
                }
            }
            None if room => {
                record.defined.push(SeriesDefinition {
                    id: next_id,
                    kind: s.kind.code(),
                    family: s.family.clone(),
                    name: s.name.clone(),
                    labels: s.labels.clone(),
                });
                record.samples.push(Sample {
                    id: next_id,
                    value: s.value,
                });
                self.series.insert(
                    key,
                    Known {
                        id: next_id,
                        kind: s.kind,
                        last: s.value,
                        seen: true,
                        present: true,
                    },
                );
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposed(name: &str, kind: SeriesKind, value: f64) -> Exposed {
        Exposed {
            name: name.into(),
            family: name.into(),
            labels: vec![("model_name".into(), "m".into())],
            kind,
            value,
        }
    }

    /// Hand-worked: a counter 10 -> 13 -> 13 -> 2 (restart) -> 5, a gauge 1 -> 1 -> 4 -> 0 -> 0.
    #[test]
    fn counters_journal_increases_gauges_changes_and_a_restart_counts_from_zero() {
        let mut s = Scraper::default();
        let c = |v| exposed("c_total", SeriesKind::Counter, v);
        let g = |v| exposed("g", SeriesKind::Gauge, v);
        let values = |r: &ScrapeRecord| -> Vec<(u32, f64)> {
            r.samples.iter().map(|s| (s.id, s.value)).collect()
        };
        let r = s.record("replica-0", (1, 2), &[c(10.0), g(1.0)]);
        assert!(r.first && !r.restarted);
        assert_eq!(r.defined.len(), 2);
        assert_eq!(values(&r), [(0, 10.0), (1, 1.0)]);
        let r = s.record("replica-0", (3, 4), &[c(13.0), g(1.0)]);
        assert!(!r.first && r.defined.is_empty());
        assert_eq!(values(&r), [(0, 3.0)]);
        let r = s.record("replica-0", (5, 6), &[c(13.0), g(4.0)]);
        assert_eq!(values(&r), [(1, 4.0)]);
        let r = s.record("replica-0", (7, 8), &[c(2.0), g(0.0)]);
        assert!(r.restarted);
        assert_eq!(values(&r), [(0, 2.0), (1, 0.0)]);
        let r = s.record("replica-0", (9, 10), &[c(5.0), g(0.0)]);
        assert!(!r.restarted);
        assert_eq!(values(&r), [(0, 3.0)]);
        // The gauge disappears, then comes back; the counter disappears and comes back at 7.
        let r = s.record("replica-0", (11, 12), &[]);
        assert_eq!(r.gone, [0, 1]);
        assert!(
            s.record("replica-0", (12, 13), &[]).gone.is_empty(),
            "said once"
        );
        let r = s.record("replica-0", (13, 14), &[c(7.0), g(0.0)]);
        assert!(r.gone.is_empty() && !r.restarted);
        assert_eq!(values(&r), [(0, 7.0), (1, 0.0)]);
    }
}
