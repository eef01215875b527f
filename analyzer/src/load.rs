//! Loading a journal for analysis: verification first, then the schedule regenerated from the
//! header and every scheduled index accounted for exactly once (SPEC §3, §9, §J.4).
//!
//! A tampered journal is refused. An unsealed, aborted or escaped one loads for diagnosis, and
//! the run says why it is not publishable, as does a dev-profile run.

use std::fmt;

use percentes_formats::config::Config;
use percentes_formats::journal::records::{Record, SealStatus};
use percentes_formats::journal::verify::{render, VerifyReport};
use percentes_formats::journal::{hex, Header, Verdict};
use percentes_formats::schedule::ScheduleParams;

use crate::frame::{Events, Requests, Telemetry, NO_RECORD};
use crate::JournalFile;

/// A journal, checked and decoded.
#[derive(Debug)]
pub struct Run {
    /// The journal's header.
    pub header: Header,
    /// The configuration the run was recorded with, parsed from the header's bytes.
    pub config: Config,
    /// Its verification report (verdict, counts, seal, signatures).
    pub report: VerifyReport,
    /// One row per scheduled request of the shard, in index order; rows without a record are
    /// listed in `missing`.
    pub requests: Requests,
    /// One row per event record.
    pub events: Events,
    /// One row per telemetry record.
    pub telemetry: Telemetry,
    /// Scheduled indices of this shard with no record (possible only in an unpublishable run).
    pub missing: Vec<u64>,
    /// Why nothing from this run may be published; empty when it may be.
    pub not_publishable: Vec<String>,
}

/// Why a journal cannot be analyzed.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoadError {
    /// Verification failed outright (tampered, not a journal, unsupported version).
    Unverified(Box<VerifyReport>),
    /// The header's configuration does not parse under this build.
    Config(String),
    /// The schedule regenerated from the header differs from the one the header recorded.
    Schedule(String),
    /// A record breaks the one-record-per-index rule or disagrees with the schedule.
    Record {
        /// The record's position in the journal.
        sequence: u64,
        /// What is wrong with it.
        message: String,
    },
    /// A sealed, completed journal lacks records for scheduled indices.
    Missing {
        /// How many indices have no record.
        count: usize,
        /// The first of them.
        first: u64,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Unverified(report) => write!(f, "the journal does not verify; nothing is analyzed:\n{}", render(report)),
            LoadError::Config(why) => write!(f, "the journal's configuration does not load: {why}"),
            LoadError::Schedule(why) => write!(f, "schedule check failed (SPEC §J.4): {why}"),
            LoadError::Record { sequence, message } => write!(f, "record {sequence}: {message}"),
            LoadError::Missing { count, first } => write!(
                f,
                "the journal is sealed as completed but {count} scheduled requests have no record (first: index {first}); \
                 every scheduled request must appear exactly once"
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// Verifies, decodes and checks a journal.
pub fn load(file: &JournalFile) -> Result<Run, LoadError> {
    let report = file.verify(&Default::default());
    match report.verdict {
        Verdict::SealedIntact | Verdict::UnsealedPrefix => {}
        _ => return Err(LoadError::Unverified(Box::new(report))),
    }
    let header = report
        .header
        .clone()
        .ok_or_else(|| LoadError::Unverified(Box::new(report.clone())))?;
    let config =
        Config::parse(&header.config_bytes).map_err(|e| LoadError::Config(e.to_string()))?;

    // The schedule, regenerated from the header's parameters, must match its recorded digest.
    let params = &header.schedule;
    // The header's schedule must be the one its own configuration defines: the analysis sizes
    // its windows and goodput series from it, and the configuration is what the pins bound.
    // The schedule rule is the recorder's, named in the header, not the configuration's.
    let expected = ScheduleParams {
        grid: params.grid,
        ..config.schedule_params()
    };
    if *params != expected {
        return Err(LoadError::Schedule(
            "the header's schedule parameters are not the ones its configuration defines".into(),
        ));
    }
    let digest = params.digest();
    if digest != header.schedule_digest {
        return Err(LoadError::Schedule(format!(
            "the parameters regenerate digest {}, the header recorded {}",
            hex(&digest),
            hex(&header.schedule_digest)
        )));
    }
    let shard = (u64::from(header.shard_index), u64::from(header.shard_count));
    if shard.1 == 0 || shard.0 >= shard.1 {
        return Err(LoadError::Schedule(format!(
            "shard {} of {} does not exist",
            shard.0, shard.1
        )));
    }
    // Dense rows: the shard's p-th scheduled index is row p, so no map from index to row is kept.
    let mut requests = Requests::with_capacity(
        usize::try_from(header.schedule_requests / shard.1 + 1).unwrap_or(0),
    );
    let mut total = 0u64;
    for entry in params.iter() {
        total += 1;
        if entry.index % shard.1 == shard.0 {
            requests.push_scheduled(entry.index, entry.intended_ns, entry.route, entry.phase);
        }
    }
    if total != header.schedule_requests {
        return Err(LoadError::Schedule(format!(
            "{total} requests regenerated, the header recorded {}",
            header.schedule_requests
        )));
    }
    requests.reserve_records();
    let mut first_sequence = vec![0u64; 0];
    let mut events = Events::default();
    let mut telemetry = Telemetry::default();
    let mut released = 0u64;
    for (framed, decoded) in file.records(&report) {
        if framed.byte_offset >= released + crate::RELEASE_EVERY_BYTES {
            file.release_before(framed.byte_offset);
            released = framed.byte_offset;
        }
        let record = decoded.map_err(|e| LoadError::Record {
            sequence: framed.sequence,
            message: format!("{e} (byte offset {})", framed.byte_offset),
        })?;
        match record {
            Record::Request(r) => {
                let row = (r.index % shard.1 == shard.0)
                    .then(|| usize::try_from(r.index / shard.1).ok())
                    .flatten()
                    .filter(|&row| row < requests.len());
                let Some(row) = row else {
                    return Err(LoadError::Record {
                        sequence: framed.sequence,
                        message: format!(
                            "request index {} is not scheduled in shard {} of {}",
                            r.index, shard.0, shard.1
                        ),
                    });
                };
                if requests.outcome[row] != NO_RECORD {
                    if first_sequence.is_empty() {
                        first_sequence = sequences_of(file, &report, r.index);
                    }
                    return Err(LoadError::Record {
                        sequence: framed.sequence,
                        message: format!(
                            "request index {} appears twice (records {:?})",
                            r.index, first_sequence
                        ),
                    });
                }
                let (intended_ns, route) = (requests.intended_ns[row], requests.route[row]);
                if r.intended_ns != intended_ns || r.route != route {
                    return Err(LoadError::Record {
                        sequence: framed.sequence,
                        message: format!(
                            "request {} says intended {} ns, route {}; the schedule says {intended_ns} ns, route {route}",
                            r.index, r.intended_ns, r.route
                        ),
                    });
                }
                if percentes_formats::journal::records::Outcome::from_byte(r.outcome).is_none() {
                    return Err(LoadError::Record {
                        sequence: framed.sequence,
                        message: format!(
                            "request {} has outcome byte {}, which no version defines",
                            r.index, r.outcome
                        ),
                    });
                }
                requests.fill(row, &r);
            }
            Record::Event(e) => events.rows.push(e),
            Record::Telemetry(t) => telemetry.rows.push(t),
            Record::Checkpoint(_) | Record::Seal(_) | Record::Unknown { .. } => {}
        }
    }
    let missing: Vec<u64> = (0..requests.len())
        .filter(|&row| requests.outcome[row] == NO_RECORD)
        .map(|row| requests.index[row])
        .collect();

    let mut not_publishable = Vec::new();
    if let Err(why) = config.publishability() {
        not_publishable.push(why);
    }
    match (&report.seal, report.verdict) {
        (_, Verdict::UnsealedPrefix) => not_publishable.push(format!(
            "NOT PUBLISHABLE: the journal is unsealed ({} records verify; it was cut off or the recorder crashed)",
            report.records
        )),
        (Some(seal), _) if seal.status != SealStatus::Completed.name() => {
            not_publishable.push(format!("NOT PUBLISHABLE: the run was {} ({})", seal.status, seal.reason))
        }
        _ => {}
    }
    if !missing.is_empty() {
        let sealed_completed = report
            .seal
            .as_ref()
            .is_some_and(|s| s.status == SealStatus::Completed.name());
        if sealed_completed {
            return Err(LoadError::Missing {
                count: missing.len(),
                first: missing[0],
            });
        }
        not_publishable.push(format!(
            "NOT PUBLISHABLE: {} scheduled requests have no record",
            missing.len()
        ));
    }
    Ok(Run {
        header,
        config,
        report,
        requests,
        events,
        telemetry,
        missing,
        not_publishable,
    })
}

/// The sequence numbers of every record of request `index` (only for the duplicate error).
fn sequences_of(file: &JournalFile, report: &VerifyReport, index: u64) -> Vec<u64> {
    file.records(report)
        .filter_map(|(framed, decoded)| match decoded {
            Ok(Record::Request(r)) if r.index == index => Some(framed.sequence),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use percentes_formats::journal::records::{Record, RequestRecord};
    use percentes_formats::journal::synthetic::{self, Ending, Options};
    use percentes_formats::journal::JournalWriter;

    fn file(name: &str, bytes: &[u8]) -> JournalFile {
        let dir = std::env::temp_dir().join(format!("percentes-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        JournalFile::open(&path).unwrap()
    }

    /// A journal of the golden config whose requests are edited by `edit` before writing.
    fn edited(edit: impl Fn(&mut Vec<RequestRecord>)) -> Vec<u8> {
        let config = synthetic::golden_config();
        let header = synthetic::header(&config, None);
        let mut requests: Vec<RequestRecord> = header
            .schedule
            .iter()
            .map(|e| {
                let mut r = synthetic::request(e.index, 50, e.intended_ns);
                r.route = e.route;
                r
            })
            .collect();
        edit(&mut requests);
        let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        for r in requests {
            writer.append(&Record::Request(r)).unwrap();
        }
        writer.seal(1, SealStatus::Completed, "").unwrap().0
    }

    #[test]
    fn a_golden_loads_with_every_index_once() {
        let run = load(&file("sealed.pj", &synthetic::small_sealed())).unwrap();
        assert_eq!(run.requests.len() as u64, run.header.schedule_requests);
        assert!(run.requests.index.windows(2).all(|w| w[0] + 1 == w[1]));
        assert!(run.missing.is_empty());
        assert_eq!(
            run.not_publishable.len(),
            1,
            "dev profile only: {:?}",
            run.not_publishable
        );
        assert!(!run.telemetry.rows.is_empty() && !run.events.rows.is_empty());
    }

    #[test]
    fn duplicates_foreign_indices_and_schedule_disagreements_are_refused() {
        let error = load(&file(
            "dup.pj",
            &edited(|r| {
                let copy = r[3].clone();
                r.push(copy);
            }),
        ))
        .unwrap_err();
        assert!(error.to_string().contains("appears twice"), "{error}");
        let error = load(&file("foreign.pj", &edited(|r| r[0].index = 10_000))).unwrap_err();
        assert!(error.to_string().contains("not scheduled"), "{error}");
        let error = load(&file("moved.pj", &edited(|r| r[2].intended_ns += 1))).unwrap_err();
        assert!(error.to_string().contains("the schedule says"), "{error}");
        // A header whose schedule disagrees with its own configuration (a crafted phase of any
        // length, its digest recomputed to match) is refused before anything is sized from it.
        let config = synthetic::golden_config();
        let mut header = synthetic::header(&config, None);
        header.schedule.phases[1].duration_ns *= 2;
        header.schedule_digest = header.schedule.digest();
        let writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        let crafted = writer.seal(1, SealStatus::Completed, "").unwrap().0;
        let error = load(&file("crafted.pj", &crafted)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("not the ones its configuration defines"),
            "{error}"
        );
        let error = load(&file(
            "missing.pj",
            &edited(|r| {
                r.remove(5);
            }),
        ))
        .unwrap_err();
        assert!(
            matches!(error, LoadError::Missing { count: 1, first: 5 }),
            "{error}"
        );
    }

    #[test]
    fn unsealed_and_aborted_runs_load_but_are_not_publishable() {
        let config = synthetic::golden_config();
        let torn = synthetic::bytes(
            &config,
            &Options {
                ending: Ending::Torn { after_requests: 20 },
                ..Options::default()
            },
        );
        let run = load(&file("torn.pj", &torn)).unwrap();
        assert!(!run.missing.is_empty());
        assert!(
            run.not_publishable.iter().any(|w| w.contains("unsealed")),
            "{:?}",
            run.not_publishable
        );
        let aborted = synthetic::bytes(
            &config,
            &Options {
                ending: Ending::Aborted { after_requests: 10 },
                ..Options::default()
            },
        );
        let run = load(&file("aborted.pj", &aborted)).unwrap();
        assert!(
            run.not_publishable.iter().any(|w| w.contains("aborted")),
            "{:?}",
            run.not_publishable
        );
        let mut tampered = synthetic::small_sealed();
        let at = tampered.len() - 100;
        tampered[at] ^= 1;
        assert!(matches!(
            load(&file("tampered.pj", &tampered)),
            Err(LoadError::Unverified(_))
        ));
    }
}
