//! Journal v1 against damage: truncation, bit flips, moved and spliced blocks, signatures,
//! trusted heads, and property tests of the framing.

use percentes_formats::journal::records::{EventRecord, Record, SealStatus};
use percentes_formats::journal::synthetic::{self, Ending, Options};
use percentes_formats::journal::verify::{self, HeadMatch, VerifyOptions};
use percentes_formats::journal::{Header, JournalWriter, Verdict, BLOCK_PREFIX_BYTES, HASH_BYTES};
use proptest::prelude::*;

fn small() -> Vec<u8> {
    synthetic::small_sealed()
}

fn check(bytes: &[u8]) -> verify::VerifyReport {
    verify::verify(bytes, &VerifyOptions::default())
}

/// (start offset, end offset, records) of each block, by walking the intact journal.
fn blocks(bytes: &[u8]) -> Vec<(usize, usize, u64)> {
    let (_, mut pos, _) = Header::decode(bytes).unwrap();
    let mut out = Vec::new();
    while pos < bytes.len() {
        let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
        let count = u32::from_le_bytes(bytes[pos + 12..pos + 16].try_into().unwrap()) as u64;
        let end = pos + BLOCK_PREFIX_BYTES + len + HASH_BYTES;
        out.push((pos, end, count));
        pos = end;
    }
    out
}

#[test]
fn the_small_journal_is_sealed_and_has_many_blocks() {
    let bytes = small();
    let report = check(&bytes);
    assert_eq!(
        report.verdict,
        Verdict::SealedIntact,
        "{}",
        verify::render(&report)
    );
    assert!(
        blocks(&bytes).len() >= 8,
        "corruption tests need several block boundaries"
    );
    assert!(report.counts.requests > 10);
    assert_eq!(
        report.counts.requests,
        report.header.as_ref().unwrap().schedule_requests
    );
}

#[test]
fn truncation_at_every_offset_is_never_sealed_and_counts_the_valid_prefix() {
    let bytes = small();
    let (_, header_end, _) = Header::decode(&bytes).unwrap();
    let blocks = blocks(&bytes);
    for cut in 0..bytes.len() {
        let report = check(&bytes[..cut]);
        assert_ne!(report.verdict, Verdict::SealedIntact, "cut at {cut}");
        if cut == 0 {
            assert_eq!(report.verdict, Verdict::NotAJournal);
            continue;
        }
        assert_eq!(
            report.verdict,
            Verdict::UnsealedPrefix,
            "cut at {cut}: {}",
            verify::render(&report)
        );
        let whole: u64 = blocks
            .iter()
            .take_while(|(_, end, _)| *end <= cut)
            .map(|(_, _, n)| n)
            .sum();
        let expected = if cut < header_end { 0 } else { whole };
        assert_eq!(report.records, expected, "cut at {cut}");
        let verified_end = blocks
            .iter()
            .take_while(|(_, end, _)| *end <= cut)
            .last()
            .map(|b| b.1);
        if cut >= header_end {
            assert_eq!(
                report.verified_bytes as usize,
                verified_end.unwrap_or(header_end),
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn every_single_bit_flip_is_detected_and_named() {
    let bytes = small();
    let mut copy = bytes.clone();
    for offset in 0..bytes.len() {
        for bit in 0..8 {
            copy[offset] ^= 1 << bit;
            let report = check(&copy);
            let expected = match offset {
                0..=7 => Verdict::NotAJournal,
                8..=9 => Verdict::UnsupportedVersion,
                _ => Verdict::Tampered,
            };
            assert_eq!(
                report.verdict,
                expected,
                "flip of bit {bit} at byte {offset}: {}",
                verify::render(&report)
            );
            copy[offset] ^= 1 << bit;
        }
    }
    assert_eq!(copy, bytes);
}

#[test]
fn a_flip_is_located_at_its_block() {
    let bytes = small();
    let blocks = blocks(&bytes);
    let (start, end, _) = blocks[3];
    let first_record: u64 = blocks[..3].iter().map(|b| b.2).sum();
    let mut copy = bytes.clone();
    copy[(start + end) / 2] ^= 0x10;
    let report = check(&copy);
    assert_eq!(report.verdict, Verdict::Tampered);
    let problem = report.problem.unwrap();
    assert_eq!(problem.record_index, Some(first_record));
    assert!(
        problem.byte_offset as usize >= start && (problem.byte_offset as usize) < end,
        "{problem:?}"
    );
    assert_eq!(
        report.records, first_record,
        "the blocks before the damage still verify"
    );
}

fn rebuild(bytes: &[u8], order: &[usize]) -> Vec<u8> {
    let (_, header_end, _) = Header::decode(bytes).unwrap();
    let blocks = blocks(bytes);
    let mut out = bytes[..header_end].to_vec();
    for &i in order {
        out.extend_from_slice(&bytes[blocks[i].0..blocks[i].1]);
    }
    out
}

#[test]
fn swapping_deleting_or_duplicating_blocks_is_tampering() {
    let bytes = small();
    let n = blocks(&bytes).len();
    let all: Vec<usize> = (0..n).collect();
    assert_eq!(rebuild(&bytes, &all), bytes);

    let mut swapped = all.clone();
    swapped.swap(2, 3);
    let mut deleted = all.clone();
    deleted.remove(2);
    let mut duplicated = all.clone();
    duplicated.insert(2, 2);
    let mut last_deleted = all.clone();
    last_deleted.remove(n - 2);
    for (name, order) in [
        ("swap", swapped),
        ("delete", deleted),
        ("duplicate", duplicated),
        ("delete before seal", last_deleted),
    ] {
        let report = check(&rebuild(&bytes, &order));
        assert_eq!(
            report.verdict,
            Verdict::Tampered,
            "{name}: {}",
            verify::render(&report)
        );
    }
}

#[test]
fn swapping_two_records_inside_a_block_is_tampering() {
    let bytes = small();
    let (start, _, count) = blocks(&bytes).into_iter().find(|b| b.2 >= 2).unwrap();
    assert!(count >= 2);
    let mut copy = bytes.clone();
    let first = start + BLOCK_PREFIX_BYTES;
    let len_a = u32::from_le_bytes(copy[first..first + 4].try_into().unwrap()) as usize + 5;
    let len_b =
        u32::from_le_bytes(copy[first + len_a..first + len_a + 4].try_into().unwrap()) as usize + 5;
    let a = copy[first..first + len_a].to_vec();
    let b = copy[first + len_a..first + len_a + len_b].to_vec();
    copy.splice(first..first + len_a + len_b, b.into_iter().chain(a));
    assert_eq!(check(&copy).verdict, Verdict::Tampered);
}

#[test]
fn splicing_two_journals_is_tampering() {
    let a = small();
    // Another run: same shape, other seed, so headers differ in a few bytes and lengths agree.
    let other = synthetic::GOLDEN_CONFIG.replace("seed = 20261130", "seed = 20261131");
    let config = percentes_formats::config::Config::parse(other.as_bytes()).unwrap();
    let b = synthetic::bytes(
        &config,
        &Options {
            gaps_per_request: 3,
            ..Options::default()
        },
    );
    assert_ne!(a[..header_len(&a)], b[..header_len(&b)]);
    let (_, header_end, _) = Header::decode(&a).unwrap();
    assert_eq!(
        Header::decode(&b).unwrap().1,
        header_end,
        "same config, same header length"
    );
    let blocks_a = blocks(&a);
    let blocks_b = blocks(&b);
    // A's header and first blocks, then B's blocks from the same record sequence on.
    let cut_a = blocks_a[2].1;
    let records_a: u64 = blocks_a[..3].iter().map(|x| x.2).sum();
    let mut records_b = 0;
    let start_b = blocks_b
        .iter()
        .find(|x| {
            let here = records_b;
            records_b += x.2;
            here == records_a
        })
        .map(|x| x.0);
    let mut spliced = a[..cut_a].to_vec();
    match start_b {
        Some(start) => spliced.extend_from_slice(&b[start..]),
        None => spliced.extend_from_slice(&b[blocks_b[3].0..]),
    }
    assert_eq!(check(&spliced).verdict, Verdict::Tampered);
    // B's header with A's blocks.
    let mut headers_swapped = b[..header_end].to_vec();
    headers_swapped.extend_from_slice(&a[header_end..]);
    assert_eq!(check(&headers_swapped).verdict, Verdict::Tampered);
}

#[test]
fn trailing_bytes_after_the_seal_are_tampering() {
    let mut bytes = small();
    bytes.push(0);
    let report = check(&bytes);
    assert_eq!(report.verdict, Verdict::Tampered);
    assert!(report.problem.unwrap().what.contains("after the seal"));
}

#[test]
fn aborted_and_torn_journals() {
    let config = synthetic::golden_config();
    let aborted = synthetic::bytes(
        &config,
        &Options {
            ending: Ending::Aborted { after_requests: 10 },
            ..Options::default()
        },
    );
    let report = check(&aborted);
    assert_eq!(report.verdict, Verdict::SealedIntact);
    assert_eq!(report.seal.as_ref().unwrap().status, "aborted");
    assert_eq!(report.counts.requests, 10);

    let torn = synthetic::bytes(
        &config,
        &Options {
            ending: Ending::Torn { after_requests: 30 },
            ..Options::default()
        },
    );
    let report = check(&torn);
    assert_eq!(report.verdict, Verdict::UnsealedPrefix);
    let checkpoint = report
        .last_checkpoint
        .clone()
        .expect("a checkpoint before the tear");
    assert!(
        report.records > checkpoint.records_before,
        "the checkpoint record itself verifies"
    );
}

/// What SIGKILL leaves: whatever the writer had written. Nothing before the last checkpoint is lost.
#[test]
fn a_kill_at_any_moment_keeps_everything_before_the_last_checkpoint() {
    let config = synthetic::golden_config();
    let header = synthetic::header(&config, None);
    let mut writer = JournalWriter::create(Vec::new(), &header, None)
        .unwrap()
        .with_block_target(300);
    let mut checkpoint_records = 0;
    for i in 0..200u64 {
        let event = EventRecord {
            at_ns: i,
            kind: 10,
            subject: "probe".into(),
            detail: "x".repeat((i % 50) as usize),
            value: Some(i as i64),
        };
        writer.append(&Record::Event(event)).unwrap();
        if i % 17 == 16 {
            writer.checkpoint(i).unwrap();
            checkpoint_records = writer.records_appended();
        }
        // Killed now: the file holds exactly what was written so far.
        let on_disk = writer.get_mut().clone();
        let report = check(&on_disk);
        assert_eq!(report.verdict, Verdict::UnsealedPrefix);
        assert!(
            report.records >= checkpoint_records,
            "after record {i}: {} < {checkpoint_records}",
            report.records
        );
        if checkpoint_records > 0 {
            assert_eq!(
                report.last_checkpoint.as_ref().unwrap().records_before + 1,
                checkpoint_records
            );
        }
    }
}

#[test]
fn signatures_bind_the_journal_to_the_operator_key() {
    let config = synthetic::golden_config();
    let key = synthetic::golden_signing_key();
    let public = key.verifying_key().to_bytes();
    let signed = synthetic::bytes(
        &config,
        &Options {
            signer: Some(key),
            ..Options::default()
        },
    );
    let trusted = VerifyOptions {
        trusted_key: Some(public),
        ..Default::default()
    };
    let report = verify::verify(&signed, &trusted);
    assert_eq!(
        report.verdict,
        Verdict::SealedIntact,
        "{}",
        verify::render(&report)
    );
    assert!(report.signatures.trusted);
    assert_eq!(report.signatures.valid, report.counts.checkpoints + 1);

    let other = ed25519_dalek_key(9);
    let wrong = VerifyOptions {
        trusted_key: Some(other.verifying_key().to_bytes()),
        ..Default::default()
    };
    assert_eq!(verify::verify(&signed, &wrong).verdict, Verdict::Tampered);

    // An attacker who rewrites the journal and signs it with their own key is caught by the trusted key.
    let forged = synthetic::bytes(
        &config,
        &Options {
            signer: Some(other),
            gaps_per_request: 2,
            ..Options::default()
        },
    );
    assert_eq!(
        check(&forged).verdict,
        Verdict::SealedIntact,
        "self-consistent"
    );
    assert_eq!(verify::verify(&forged, &trusted).verdict, Verdict::Tampered);

    // An unsigned journal cannot satisfy a trusted key.
    assert_eq!(
        verify::verify(&small(), &trusted).verdict,
        Verdict::Tampered
    );
}

fn ed25519_dalek_key(seed: u8) -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
}

#[test]
fn trusted_heads_cover_the_prefix_they_were_printed_for() {
    let bytes = small();
    let report = check(&bytes);
    let final_head = report.chain_head.unwrap();
    let checkpoint_head = report.last_checkpoint.as_ref().unwrap().chain_head;

    let with = |head| VerifyOptions {
        expect_head: Some(head),
        ..Default::default()
    };
    let r = verify::verify(&bytes, &with(final_head));
    assert!(r.ok());
    assert_eq!(
        (r.verdict, r.head_match),
        (Verdict::SealedIntact, Some(HeadMatch::Final))
    );
    let r = verify::verify(&bytes, &with(checkpoint_head));
    assert_eq!(r.verdict, Verdict::SealedIntact);
    assert!(matches!(r.head_match, Some(HeadMatch::Prefix { .. })));
    // The bytes are intact, but the head vouches for a prefix only: verify does not exit 0.
    assert!(!r.ok());
    assert!(verify::render(&r).contains("not vouched for"));

    // A full rewrite with a recomputed chain is self-consistent, but not on the trusted chain.
    let rewritten = synthetic::bytes(
        &synthetic::golden_config(),
        &Options {
            gaps_per_request: 5,
            ..Options::default()
        },
    );
    assert_eq!(check(&rewritten).verdict, Verdict::SealedIntact);
    let r = verify::verify(&rewritten, &with(final_head));
    assert_eq!(
        (r.verdict, r.head_match),
        (Verdict::Tampered, Some(HeadMatch::NotFound))
    );
}

#[test]
fn records_iterate_in_order_and_decode() {
    let bytes = small();
    let report = check(&bytes);
    let (_, header_end, _) = Header::decode(&bytes).unwrap();
    let framed: Vec<_> =
        verify::records(&bytes, header_end, report.verified_bytes as usize).collect();
    assert_eq!(framed.len() as u64, report.records);
    for (i, f) in framed.iter().enumerate() {
        assert_eq!(f.sequence, i as u64);
        Record::decode(f.kind, f.body).unwrap();
    }
    assert!(matches!(
        Record::decode(framed.last().unwrap().kind, framed.last().unwrap().body),
        Ok(Record::Seal(_))
    ));
}

fn arbitrary_record() -> impl Strategy<Value = Record> {
    prop_oneof![
        (
            any::<u64>(),
            any::<u16>(),
            ".{0,40}",
            ".{0,200}",
            any::<Option<i64>>()
        )
            .prop_map(|(at_ns, kind, subject, detail, value)| {
                Record::Event(EventRecord {
                    at_ns,
                    kind,
                    subject,
                    detail,
                    value,
                })
            }),
        (0u64..1_000_000, 0u64..100, 0u64..1 << 40)
            .prop_map(|(i, roll, t)| Record::Request(synthetic::request(i, roll, t))),
        (
            0u64..1_000_000,
            proptest::collection::vec((any::<u16>(), any::<u64>()), 0..4)
        )
            .prop_map(|(index, fields)| Record::RequestExtension(
                percentes_formats::journal::records::RequestExtension { index, fields }
            )),
        (
            ".{0,20}",
            any::<(u64, u64, bool, bool)>(),
            proptest::collection::vec(
                (
                    any::<u32>(),
                    any::<u8>(),
                    ".{0,30}",
                    proptest::collection::vec((".{0,8}", ".{0,8}"), 0..3)
                ),
                0..4
            ),
            proptest::collection::vec((any::<u32>(), any::<f64>()), 0..6),
            proptest::collection::vec(any::<u32>(), 0..3),
        )
            .prop_map(
                |(source, (sent_ns, received_ns, first, restarted), defined, samples, gone)| {
                    use percentes_formats::journal::scrape::{
                        Sample, ScrapeRecord, SeriesDefinition,
                    };
                    Record::Scrape(ScrapeRecord {
                        source,
                        sent_ns,
                        received_ns,
                        first,
                        restarted,
                        defined: defined
                            .into_iter()
                            .map(|(id, kind, name, labels)| SeriesDefinition {
                                id,
                                kind,
                                family: name.clone(),
                                name,
                                labels,
                            })
                            .collect(),
                        samples: samples
                            .into_iter()
                            .map(|(id, value)| Sample { id, value })
                            .collect(),
                        gone,
                    })
                }
            ),
        (
            any::<u64>(),
            proptest::collection::vec(any::<(u8, u64, u64, u32)>(), 0..5),
            any::<Option<u32>>(),
            proptest::collection::vec(any::<(u32, u32)>(), 0..40),
            any::<u32>(),
        )
            .prop_map(
                |(index, kinds, reasoning_tokens, deliveries, deliveries_total)| {
                    use percentes_formats::journal::stream::{Delivery, KindTally, StreamRecord};
                    // Any field values: the framing carries what the writer was given, and only
                    // `analyze` judges a record by JOURNAL.md's rules.
                    Record::Stream(StreamRecord {
                        index,
                        kinds: kinds
                            .into_iter()
                            .map(|(kind, first_ns, last_ns, deltas)| KindTally {
                                kind,
                                first_ns,
                                last_ns,
                                deltas,
                            })
                            .collect(),
                        reasoning_tokens,
                        deliveries: deliveries
                            .into_iter()
                            .map(|(gap_us, deltas)| Delivery { gap_us, deltas })
                            .collect(),
                        deliveries_total,
                    })
                }
            ),
        (9u8..=255, proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(kind_byte, body)| Record::Unknown { kind_byte, body }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever is appended, with whatever block size and checkpoints, comes back verified and
    /// identical, and every truncation of it is an unsealed prefix of it.
    #[test]
    fn framing_round_trips(
        records in proptest::collection::vec(arbitrary_record(), 0..60),
        block_target in 1usize..2048,
        checkpoint_every in 1usize..30,
        cut_fraction in 0.0f64..1.0,
    ) {
        let config = synthetic::golden_config();
        let header = synthetic::header(&config, None);
        let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap().with_block_target(block_target);
        for (i, record) in records.iter().enumerate() {
            writer.append(record).unwrap();
            if i % checkpoint_every == checkpoint_every - 1 {
                writer.checkpoint(i as u64).unwrap();
            }
        }
        let (bytes, sealed) = writer.seal(1, SealStatus::Completed, "").unwrap();
        let report = check(&bytes);
        prop_assert_eq!(report.verdict, Verdict::SealedIntact);
        prop_assert_eq!(report.chain_head, Some(sealed.chain_head));
        prop_assert_eq!(report.counts, sealed.counts);
        let (_, header_end, _) = Header::decode(&bytes).unwrap();
        let decoded: Vec<Record> = verify::records(&bytes, header_end, bytes.len())
            .map(|f| Record::decode(f.kind, f.body).unwrap())
            .filter(|r| !matches!(r, Record::Checkpoint(_) | Record::Seal(_)))
            .collect();
        prop_assert_eq!(&decoded, &records);

        let cut = header_end + ((bytes.len() - header_end) as f64 * cut_fraction) as usize;
        let partial = check(&bytes[..cut.min(bytes.len() - 1)]);
        prop_assert_eq!(partial.verdict, Verdict::UnsealedPrefix);
        prop_assert!(partial.records <= report.records);
    }

    /// Arbitrary bytes never panic the verifier, and are never sealed-intact.
    #[test]
    fn garbage_is_never_a_sealed_journal(noise in proptest::collection::vec(any::<u8>(), 0..4096), keep in 0usize..4096) {
        let mut bytes = small();
        let keep = keep.min(bytes.len());
        bytes.truncate(keep);
        bytes.extend_from_slice(&noise);
        let report = check(&bytes);
        prop_assert!(report.verdict != Verdict::SealedIntact || noise.is_empty() && keep == small().len());
    }
}

fn header_len(bytes: &[u8]) -> usize {
    Header::decode(bytes).unwrap().1
}

/// A sink that refuses every write while `full` is set (a disk with no room), writing nothing of
/// the refused buffer.
#[derive(Default)]
struct Disk {
    bytes: Vec<u8>,
    full: std::rc::Rc<std::cell::Cell<bool>>,
}

impl std::io::Write for Disk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.full.get() {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_commit_or_checkpoint_leaves_the_writer_able_to_finish_once_there_is_room() {
    let config = synthetic::golden_config();
    let header = synthetic::header(&config, None);
    let full = std::rc::Rc::new(std::cell::Cell::new(false));
    let disk = Disk {
        bytes: Vec::new(),
        full: std::rc::Rc::clone(&full),
    };
    let mut writer = JournalWriter::create(disk, &header, None)
        .unwrap()
        .with_block_target(300);
    let event = |i: u64| {
        Record::Event(EventRecord {
            at_ns: i,
            kind: 10,
            subject: "probe".into(),
            detail: "x".repeat(40),
            value: Some(i as i64),
        })
    };
    for i in 0..20 {
        writer.append(&event(i)).unwrap();
    }
    writer.checkpoint(20).unwrap();
    let good = writer.bytes_written();
    let head = writer.chain_head();
    writer.append(&event(21)).unwrap();
    full.set(true);
    // The disk is full: neither a commit nor a checkpoint gets through, and neither moves the
    // chain, the byte count or the checkpoint count.
    assert!(writer.commit().is_err());
    assert!(writer.checkpoint(22).is_err());
    assert_eq!((writer.bytes_written(), writer.chain_head()), (good, head));
    assert_eq!(writer.counts().checkpoints, 1);
    let verdict = check(&writer.get_mut().bytes);
    assert_eq!(
        verdict.verdict,
        Verdict::UnsealedPrefix,
        "a clean prefix meanwhile"
    );
    // Room again: the pending record, a checkpoint and the seal all land, and verify.
    full.set(false);
    writer.append(&event(23)).unwrap();
    writer.checkpoint(24).unwrap();
    let (disk, sealed) = writer
        .seal(25, SealStatus::Aborted, "journal writer failed: ENOSPC")
        .unwrap();
    let report = check(&disk.bytes);
    assert_eq!(
        report.verdict,
        Verdict::SealedIntact,
        "{}",
        verify::render(&report)
    );
    assert_eq!(sealed.counts.events, 22);
    assert_eq!(sealed.counts.checkpoints, 2);
}

/// The schedule rule travels as a header extension: rule 1 is its absence (so golden/v1's bytes
/// stay as they are), rule 2 reads back as written, and a rule this build does not know is a
/// malformed header, never a silently different schedule.
#[test]
fn the_schedule_rule_round_trips_through_the_header() {
    use percentes_formats::schedule::{Grid, SCHEDULE_RULE_EXTENSION};
    let config = synthetic::golden_config();
    let mut header = synthetic::header(&config, None);
    assert_eq!(header.schedule.grid, Grid::PerPhase);
    let old = header.encode();
    let (decoded, _, _) = Header::decode(&old).unwrap();
    assert_eq!(decoded.schedule.grid, Grid::PerPhase);
    assert!(decoded.extensions.is_empty());
    header.schedule.grid = Grid::Continuous;
    let new = header.encode();
    assert!(new.len() > old.len());
    let (decoded, _, _) = Header::decode(&new).unwrap();
    assert_eq!(decoded.schedule.grid, Grid::Continuous);
    assert!(
        decoded.extensions.is_empty(),
        "the rule is read out of the extensions"
    );
    assert_eq!(decoded.encode(), new, "encoding is stable");
    // An unknown rule: write the extension by hand with the value 9.
    header.schedule.grid = Grid::PerPhase;
    header.extensions = vec![(SCHEDULE_RULE_EXTENSION.to_owned(), vec![9])];
    let error = Header::decode(&header.encode()).unwrap_err().to_string();
    assert!(error.contains("schedule rule"), "{error}");
}

#[test]
fn a_header_whose_profile_or_time_factor_is_out_of_its_domain_is_tampering() {
    let config = synthetic::golden_config();
    let good = synthetic::header(&config, None);
    for (profile, factor, verdict) in [
        ("dev", 100, Verdict::SealedIntact),
        ("Xev", 100, Verdict::Tampered),
        ("dev", 5_000, Verdict::Tampered),
        ("dev", 0, Verdict::Tampered),
        ("experiment", 10, Verdict::Tampered),
        ("hosted", 1, Verdict::SealedIntact),
    ] {
        let mut header = good.clone();
        header.profile = profile.into();
        header.dev_time_factor = factor;
        let writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
        let bytes = writer.seal(1, SealStatus::Completed, "").unwrap().0;
        let report = check(&bytes);
        assert_eq!(
            report.verdict, verdict,
            "{profile} {factor}: {:?}",
            report.problem
        );
        if verdict == Verdict::Tampered {
            let what = &report.problem.as_ref().unwrap().what;
            assert!(
                what.contains("domain") || what.contains("none of"),
                "{what}"
            );
        }
    }
}

#[test]
fn a_consistent_block_length_over_the_limit_is_named_as_such() {
    let mut bytes = small();
    let (start, _, _) = blocks(&bytes)[0];
    let len: u32 = 5_000_000;
    bytes[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
    bytes[start + 8..start + 12].copy_from_slice(&(!len).to_le_bytes());
    let report = check(&bytes);
    assert_eq!(report.verdict, Verdict::Tampered);
    let what = &report.problem.unwrap().what;
    assert!(what.contains("over the 4194304-byte limit"), "{what}");
    // A length that disagrees with its complement is still named as damage.
    bytes[start + 8] ^= 1;
    let what = check(&bytes).problem.unwrap().what;
    assert!(what.contains("is damaged"), "{what}");
}

/// The reviewer's repros, each made whole (the chain computed anew) so that only the rule can
/// catch it: a completed seal that gives a reason, a host-fact key twice, an extension key twice
/// (the schedule rule, in either order). Each is tampered. Before, the first two verified and the
/// third's verdict depended on which copy came first.
#[test]
fn a_completed_seal_with_a_reason_and_a_key_twice_are_tampering() {
    let bytes = small();
    let check_tampered = |crafted: &[u8], says: &str| {
        let report = check(crafted);
        assert_eq!(
            report.verdict,
            Verdict::Tampered,
            "{}",
            verify::render(&report)
        );
        assert!(
            verify::render(&report).contains(says),
            "{}",
            verify::render(&report)
        );
    };
    let reasoned = synthetic::rewritten(
        &bytes,
        |_| {},
        Some((SealStatus::Completed, "all fine really")),
    );
    check_tampered(&reasoned, "a completed seal gives a reason");
    // The same reason on an aborted seal is the rule's own case.
    let aborted = synthetic::rewritten(&bytes, |_| {}, Some((SealStatus::Aborted, "stopped")));
    assert_eq!(check(&aborted).verdict, Verdict::SealedIntact);
    let twice = synthetic::rewritten(
        &bytes,
        |h| {
            let first = h.host[0].clone();
            h.host.push(first);
        },
        None,
    );
    check_tampered(&twice, "appears twice");
    for order in [[2u8, 9], [9, 2]] {
        let rule = synthetic::rewritten(
            &bytes,
            |h| {
                for value in order {
                    h.extensions.push(("schedule-rule".to_owned(), vec![value]));
                }
            },
            None,
        );
        check_tampered(&rule, "appears twice");
    }
}

/// Issue 51 item 5: the writer asserts what the decoder checks, before it encodes. A request
/// record with an outcome byte no version defines, or a known class of another outcome, is not
/// written (the error names the index and the rule), nothing is counted for it, and the journal
/// goes on; the decoder refuses the same bytes with the same words.
#[test]
fn the_writer_refuses_a_request_record_the_decoder_would_refuse() {
    let config = synthetic::golden_config();
    let header = synthetic::header(&config, None);
    let mut writer = JournalWriter::create(Vec::new(), &header, None).unwrap();
    let good = synthetic::request(0, 0, 1_000);
    writer.append(&Record::Request(good.clone())).unwrap();
    let mut unknown = synthetic::request(1, 0, 2_000);
    unknown.outcome = 9;
    let mut mismatched = synthetic::request(2, 0, 3_000);
    mismatched.outcome = percentes_formats::journal::records::Outcome::Errored as u8;
    mismatched.class = 0;
    for (record, rule) in [
        (&unknown, "outcome code 9 is undefined"),
        (
            &mismatched,
            "class correct-success does not belong to outcome errored",
        ),
    ] {
        let error = writer.append(&Record::Request(record.clone())).unwrap_err();
        match &error {
            percentes_formats::journal::WriteError::BrokenRecord {
                kind,
                index,
                rule: r,
            } => {
                assert_eq!((*kind, *index, r.as_str()), (1, record.index, rule));
            }
            other => panic!("{other}"),
        }
        assert!(
            error
                .to_string()
                .contains(&format!("request {}", record.index)),
            "{error}"
        );
        let body = Record::Request(record.clone()).encode_body();
        let decoded = Record::decode(1, &body).unwrap_err();
        assert_eq!(
            decoded.message, rule,
            "the decoder's words are the writer's"
        );
    }
    writer
        .append(&Record::Request(synthetic::request(3, 0, 4_000)))
        .unwrap();
    let (bytes, sealed) = writer.seal(2, SealStatus::Completed, "").unwrap();
    assert_eq!(
        sealed.counts.requests, 2,
        "only the two records written are counted"
    );
    assert_eq!(check(&bytes).verdict, Verdict::SealedIntact);
}
