//! The specification versions this build can apply, and what each one changes (SPEC.md §A).
//!
//! A journal records the version it was captured under; the analyzer applies whichever version
//! it is asked for, so an archived journal can be re-analyzed years later under a newer one, or
//! under an older one to reproduce a published number. What each version's rules are is one
//! table, [`Rules::of`], with one named field per rule a version changed; it holds the only
//! `match` on the version. Analysis reads the rule it needs by name ("how are errors treated on
//! the completion curve?"), never a version, a version string or a flag standing for one.
//!
//! ```
//! use percentes_formats::spec::{ErrorTreatment, Rules, Spec};
//! let old = Spec::parse("v0.1").unwrap();
//! assert_eq!(Rules::of(old).curve, ErrorTreatment::Censored);
//! assert_eq!(Rules::of(Spec::CURRENT).curve, ErrorTreatment::Compete);
//! ```

use std::fmt;

/// One version of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Spec {
    /// v0.1: the completion curve is Kaplan-Meier with errors treated as censored.
    V0_1,
    /// v0.2: amendment A1, errors compete (Aalen-Johansen cumulative incidence).
    V0_2,
    /// v0.3: amendment A2, recovery is read only where the data support it (SPEC §11).
    V0_3,
    /// v0.4: amendment A3, a reading says what it measured, over what and of how many, and the
    /// client's rules of issue 32 are read as the send path's (SPEC §11).
    V0_4,
    /// v0.5: amendment A4, a stream's figures say which tokens they are about: TTFT is the first
    /// generated delta of any kind, inter-token figures are per delivery, and a figure at the
    /// read's resolution is refused (SPEC §3, §11).
    V0_5,
}

/// How recovery is read (SPEC §5, §10; the rules amendment A2 changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryRules {
    /// v0.1 and v0.2: one-sided entry to either baseline, any window counts whatever it holds,
    /// the detector may fire before the fault is removed, and the plateau runs to the end of the
    /// recovering window.
    Original,
    /// v0.3 (A2): a two-sided band around the equilibrium, no recovery to the pre-fault baseline
    /// before the removal is confirmed, a pinned minimum of requests per window, a plateau that
    /// stops where the recovering window starts, relapse watched to the end of the observed
    /// series, an ordered timeline, and no recovery figure from an invalid run.
    Amended,
}

/// What G2.1 measures as a request's send skew (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkewDefinition {
    /// v0.1 and v0.2: the dispatch time minus the intended time.
    Dispatch,
    /// v0.3 (A2): the moment the request could be handed to the kernel (its dispatch, or the
    /// end of the connect and TLS handshake it waited for) minus the intended time.
    ReadyToSend,
}

/// What G2.2 counts as never sent (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UndispatchedCount {
    /// v0.1 and v0.2: undispatched records, or the recorders' own count where larger.
    Recorded,
    /// v0.3 (A2): those, plus the requests an unsealed journal holds no record of, whose
    /// dispatch was never observed.
    WithUnrecorded,
}

/// What G2.3 reads as the recorder's CPU (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSource {
    /// v0.1 and v0.2: the host's busy share from /proc/stat.
    HostShare,
    /// v0.3 (A2): the recorder's cgroup against its quota where the journal holds it, else the
    /// host's share.
    CgroupQuotaWhereJournaled,
}

/// What the audit holds beyond its tables (SPEC §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditContents {
    /// v0.1 and v0.2: the tables alone.
    Archived,
    /// v0.3 (A2): the generator's artifact (the prose an auditor reads), and the writer queue's
    /// largest observed depth with how it was read.
    WithArtifact,
}

/// How readings print (SPEC §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Printing {
    /// v0.1 and v0.2: milliseconds truncated, shares to four decimals, the curve's method named
    /// by the version that brought it ("Aalen-Johansen (v0.2)").
    Archived,
    /// v0.3 (A2): milliseconds rounded to the nearest; a share printed with as many decimals as
    /// it takes for the printed number to stand on the same side of the quantile as the value;
    /// the curve's method named by its amendment ("Aalen-Johansen (A1)"); a share of a window
    /// at the histogram's floor printed beside its inter-token quantiles.
    Honest,
    /// v0.5 (A4): as [`Printing::Honest`], and a curve reading under a millisecond printed in
    /// microseconds (`p50 = 171 µs`): to the millisecond it read `p50 = 0.000 s` beside a TTFT
    /// of 171 µs (a server answering a fixed body, issue 54).
    Resolved,
}

/// What G2.4 accepts as the runtime stall (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallReading {
    /// v0.1 to v0.3: whatever ticker the journal's recorder ran, as recorded.
    AsRecorded,
    /// v0.4 (A3): only a ticker on each worker's own loop (a journal with the `placement` host
    /// fact) bounds the send path; a journal whose recorder ran the ticker on a thread of its
    /// own leaves G2.4 unobserved.
    SendPathOnly,
}

/// What the client-late rule does to a journal recorded before it (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatenessReading {
    /// v0.1 to v0.3: every request as recorded.
    AsRecorded,
    /// v0.4 (A3): in a journal recorded before the rule, a request errored at connect with no
    /// connect attempted, at or after its deadline, is the client's lateness: G2.2 counts it as
    /// never sent, and the outcome table says how many of the errors it was.
    ClientLate,
}

/// How a recovery reading at the detector's resolution is reported (SPEC §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DetectorResolution {
    /// v0.1 to v0.3: as a measured duration.
    Measured,
    /// v0.4 (A3): as a bound ("within R of the removal", "within R of the fire"), never as a
    /// measured duration.
    Bound,
}

/// Over which span the survivor's figures are read for the headline (SPEC §9, appendix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SurvivorSpan {
    /// v0.1 to v0.3: the fault window, from the fire to the recovery boundary or the phase's end.
    FaultWindow,
    /// v0.4 (A3): the outage (the fire anchor to the confirmed removal) and the recovery (the
    /// removal to the recovery boundary) apart, each with its n.
    OutageThenRecovery,
}

/// What a published share must carry (SPEC §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareSupport {
    /// v0.1 to v0.3: the share alone.
    Bare,
    /// v0.4 (A3): its n, and none is printed over fewer than `report.share_min_requests`
    /// requests: it is refused as a quantile is.
    Counted,
}

/// Which recovery claims a report makes (SPEC §5, §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claims {
    /// v0.1 to v0.3: claims as each reading makes them.
    Unguarded,
    /// v0.4 (A3): no claim over zero measured cells; no component recovers before the removal,
    /// and one whose hold cannot be observed is not determined; a deadline passed without
    /// recovery is ResidualFailure with its reason; a slot that does not apply says "not
    /// applicable"; an invalid run prints no recovery reading anywhere.
    Supported,
}

/// How the dev profile's widening of R and H is sized (SPEC §5, A2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WideningRate {
    /// v0.3: from the baseline's observed count of scheduled requests, so that two runs of one
    /// configuration can be widened differently.
    ObservedCount,
    /// v0.4 (A3): from the configured rate, the same for every run of one configuration.
    ConfiguredRate,
}

/// Whether the completion curve's tail readings (p95, p99) keep §7's sample budget (SPEC §3
/// "Quantile readings", §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CurveBudget {
    /// v0.1 to v0.4: read wherever the curve crosses the quantile, whatever the window's n: a
    /// p99 at n = 18 printed, and a `completion_p99` threshold passed on it, where `e2e_p99` on
    /// the same requests was refused (issue 54).
    Unbounded,
    /// v0.5 (A4): a tail reading of a window with fewer scheduled requests than §7's interval
    /// needs at that quantile (73 for p95, 381 for p99) is refused, saying how many it needs,
    /// as the completed-only tails are.
    TailBudget,
}

/// Which runs fill the headline's survivor and recovery slots (SPEC appendix).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadlineSlots {
    /// v0.1 to v0.4: the clean-delete runs only, so a black-hole run's own outage, TTFT,
    /// goodput and recovery bounds, which its report holds, printed "[not applicable: no
    /// clean-delete run]" in ten slots (issue 53).
    CleanDeleteOnly,
    /// v0.5 (A4): the clean-delete runs where there are any (the primary experiment, §7), else
    /// the black-hole runs, the sentence naming whose they are; the in-flight shares stay with
    /// their own variant, and the decomposition (a replacement's boundaries) with clean delete.
    PrimaryElseBlackHole,
}

/// Which completed requests a survivor span's TTFT p50 is read over (SPEC §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanTtft {
    /// v0.4: every completed request, a response without a generated delta (a non-streamed
    /// route) counted at its completion, so store-outage's recovery span read 42 ms where its
    /// chat route's TTFT was 152 ms (issue 53).
    EveryCompleted,
    /// v0.5 (A4): the completed requests whose first generated delta was seen, where the span has
    /// any (the others, counted in its note, have no first token); a span with none reads every
    /// completed request as §3 does.
    Streamed,
}

/// Which requests are "in flight on the lost replica" at the fire (SPEC §3, §9's headline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostInFlight {
    /// v0.1 to v0.4: those a response head attributed to the victim; the ones never answered
    /// (reset or held silent before a head) are counted apart, so the black-hole golden's share
    /// rested on 11 where G3 read 13 (issue 53).
    Attributed,
    /// v0.5 (A4): those attributed to the victim and those never answered, as G3 reads them:
    /// a survivor answers, so an in-flight request no head ever attributed was the victim's.
    AttributedOrUnanswered,
}

/// What a backlog drain found at the first sample the removal allows is (SPEC §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainAtRemoval {
    /// v0.4: a measured drain time, though the sample before it was already drained and the
    /// drain came at or before it (issue 53).
    Measured,
    /// v0.5 (A4): where the sample before it already held the backlog at or under the level, a
    /// bound ("by x s after the fire"), as a recovery at the detector's resolution is (A3).
    Bound,
}

/// When a recovery's absence ("not recovered", "not settled") is claimed (SPEC §5, A2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absence {
    /// v0.3 and v0.4: wherever some window counted, none entered and no hold went unobserved,
    /// though a stretch read by no counting window could have held an entry (issue 53).
    SomeWindowCounted,
    /// v0.5 (A4): only where the counting windows read every bucket from the search's start to
    /// the series' end; otherwise the reading is not determined.
    EveryBucketRead,
}

/// Over what stretch the receive-path check's canary bound is read (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CanaryOver {
    /// v0.1 to v0.4: the canary seconds that overlap the window, though the client's times are
    /// taken over the span between the scrapes that bound it (up to a period off at each end).
    Window,
    /// v0.5 (A4): the canary seconds that overlap the span, the stretch the client's times and
    /// the server's increases are read over.
    Span,
}

/// What the receive-path check's verdict rests on (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerdictBasis {
    /// v0.1 to v0.4: each compared client quantile against the server's bucket, widened by the
    /// canary's bound; a bucket wider than the gap between the two sides reads "within-bounds"
    /// (issue 52: vLLM's 2.5-5 s bucket hid 282 ms outside its clock).
    Buckets,
    /// v0.5 (A4): the buckets, and the means (exact: the histogram's sum over its count). Where
    /// the means differ by more than the canary's bound and a compared bucket is wider than that
    /// difference, the verdict is "not-resolvable" and the means' difference is the figure;
    /// where every compared bucket is narrower, it is "client-later".
    MeansWhereBucketsCannot,
}

/// Whether the first token's path is decomposed (SPEC §2 "The first token's path").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstTokenPath {
    /// v0.1 to v0.4: the report gives the time to first token whole.
    Unread,
    /// v0.5 (A4): per window, the time to the response head, head to first token, the heads
    /// that came with the first token, the first delivery's deltas, and with server metrics the
    /// part inside the server's clock and the part after it; with the signatures the data show.
    Decomposed,
}

/// Whether a reading names what it measured where issue 52, reading the vLLM study's reports,
/// found one that did not (SPEC §2, §5, §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadingWords {
    /// v0.1 to v0.4, as archived: a deletion's removal read "from the impact (no `reschedule`
    /// timeline event)" beside a decomposition listing one that came a few ms before the
    /// impact's confirmation; the outage "to its confirmed removal" where that removal is the
    /// replacement's first ready probe; a boundary "weight load" that is the weight-load log
    /// line (vLLM's load itself took 0.00 s of the 35.7 s); a reconciliation silent on the
    /// requests the client timed out, which the server may count as finished or not at all;
    /// the audit's largest per-interval stall p99 beside G2.4's run p99 with no word on which
    /// is which.
    Archived,
    /// v0.5 (A4): each says what it measured.
    WhatWasMeasured,
}

/// Whether a run's capacity is checked against its calibration before the fault (SPEC §10
/// "Capacity check").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityCheck {
    /// v0.1 to v0.4: the configuration's lambda_max is taken as the host's; a host 2.2x slower
    /// than the calibrated one ran the study at 2.9x its capacity where it claimed 1.30x
    /// (issue 52).
    Unchecked,
    /// v0.5 (A4): the pre-flight's sample requests' median service time against the one the
    /// calibration measured, and the survivor's load against the calibration's throughput
    /// ceiling; a campaign refuses a group whose runs' probes differ beyond the tolerance.
    AgainstCalibration,
}

/// Which SLOs a window's goodput is read under (SPEC §4 "A declared SLO").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoodputReading {
    /// v0.1 to v0.4: the pinned SLO alone, a bare share with no interval; a user's own SLO is
    /// not read (issue 55: every summary said "SLO goodput" against an SLO nobody chose).
    PinnedOnly,
    /// v0.5 (A4): the pinned SLO's goodput with its 95 % interval, and beside it, where the
    /// configuration declares one, the goodput under the user's own SLO with its interval; a
    /// threshold's `goodput` reads the declared one, `pinned_goodput` the other.
    PinnedAndDeclared,
}

/// Whether the server's prefix-cache counters are read per window (SPEC §2 "Server-side
/// evidence").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixCacheReading {
    /// v0.1 to v0.4: not read (their presets did not journal them).
    Unread,
    /// v0.5 (A4): each window's share of the prompt tokens the server looked up that its prefix
    /// cache held, from its own counters (issue 55 item 2).
    HitShare,
}

/// How a request the client abandoned by design (class `abandoned`, outcome censored) is
/// counted (SPEC §1 "Abandonment").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbandonReading {
    /// v0.1 to v0.4: as its outcome byte says, censored (they knew no abandonment).
    AsCensored,
    /// v0.5 (A4): its own outcome, `abandoned`, beside completed, errored and censored: not in
    /// the censored count or rate; in the completion curve a censoring at its drawn instant (a
    /// planned, independent censoring); in goodput a request that did not meet the SLO; and
    /// reconciled with the server's abort counter.
    Planned,
}

/// Whether a testbed change's steps are read from the journal's timeline (SPEC §10 "Reading a
/// testbed change").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeReading {
    /// v0.1 to v0.4: the report lists no change; its steps are timeline events a reader finds
    /// with `inspect` (issue 56's studies read them with scripts of their own).
    Unread,
    /// v0.5 (A4): a rollout's, rollback's, scale-out's or proxy failover's steps as states
    /// from the run's epoch, the spans between them, and what the requests met: those in
    /// flight through a killed proxy, those sent while it was down, the first served after it,
    /// the first a new replica served, and the requests that did not complete while the
    /// change ran, by class.
    Read,
}

/// What a tail's refusal says (SPEC §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalWords {
    /// v0.1 to v0.4: that the sample budget is insufficient, and no more (issue 54: no refusal
    /// said how long to run to get the figure).
    Budget,
    /// v0.5 (A4): also what would publish it: the completed requests it needs (at the window's
    /// correlation, where that is known) and how long the window's own rate takes to reach them.
    WhatPublishes,
}

/// What §7's tail intervals take a window's completed requests to be (SPEC §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailSample {
    /// v0.1 to v0.4: n independent samples. Under continuous batching requests that share a
    /// batch share its step times, and on a correlated series (a Gaussian AR(1) at 0.8) the
    /// p95 interval so computed covered the true quantile 69 % of the time, not 95 % (issue 53).
    Independent,
    /// v0.5 (A4): as many as the exceedance series of each quantile, in intended-time order, is
    /// worth (its effective n, by Geyer's initial positive sequence); the interval is computed
    /// at that n, refused below §7's budget with that reason, and n / n_eff printed beside it,
    /// with a check that the window's halves agree.
    Effective,
}

/// What a request the run stopped before it was sent is (SPEC §3 "A run stopped before its
/// end"): journaled censored, class `run-end`, never dispatched, whatever the version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReading {
    /// v0.1 to v0.4: censored like any other, in every window's figures: a run stopped by
    /// SIGINT 7 s into 20 read "censored 88.61 %, SLO goodput 11.39 %" for requests never sent.
    Censored,
    /// v0.5 (A4): not sent (the run stopped): left out of every window's rows and figures and
    /// counted apart; each window's figures are over the requests scheduled before the stop,
    /// its span cut at the stop (the first such request's intended time), and the audit counts
    /// them as a stage of their own.
    NotSent,
}

/// Which tokens a stream's figures are about (SPEC §3 "What a stream's figures are about").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamReading {
    /// v0.1 to v0.4: the first answer content event ends TTFT (a reasoning phase or a tool
    /// call's arguments before it are folded in, unnamed; a stream with no answer content ends
    /// it at completion); inter-token figures are the gaps between answer content events, and
    /// per token each gap divided by its request's tokens per event; a gap at the 1 us floor is
    /// published like any other.
    AnswerContent,
    /// v0.5 (A4): every kind of generated delta is output (answer, reasoning, tool call,
    /// refusal: the journal's stream records, kind 8); TTFT ends at the first of any kind, and
    /// the time to first answer token, the reasoning span and the reasoning tokens are figures
    /// of their own; TPOT runs from that first delta over every token the usage counts;
    /// inter-token latency is the pooled gap between deliveries (reads that brought new deltas),
    /// never a gap divided among the tokens of one read; a quantile at the 1 us floor (the
    /// read's resolution) is refused, and every inter-token quantile of a window whose gaps are
    /// mostly at that floor.
    EveryDelta,
}

/// How report.json writes a duration in seconds (SPEC §9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonSeconds {
    /// v0.1 to v0.3: the float arithmetic gave it (0.052469064999999926).
    Float,
    /// v0.4 (A3): rounded to the journal's resolution, the nanosecond.
    Nanosecond,
}

/// Every rule a version of the specification changed, by name: the one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// How the completion curve treats an errored request (§3, A1).
    pub curve: ErrorTreatment,
    /// How recovery is read, and whether an invalid run shows any recovery reading (§5, §10,
    /// A2).
    pub recovery: RecoveryRules,
    /// G2.1's send skew (§2, A2).
    pub skew: SkewDefinition,
    /// G2.2's count (§2, A2).
    pub undispatched: UndispatchedCount,
    /// G2.3's reading (§2, A2).
    pub cpu: CpuSource,
    /// What the audit holds (§9, A2).
    pub audit: AuditContents,
    /// How readings print (§9, A2).
    pub printing: Printing,
    /// What G2.4 accepts (§2, A3).
    pub stall: StallReading,
    /// How an archived journal's late requests are read (§2, A3).
    pub lateness: LatenessReading,
    /// A TTR at the detector's resolution (§5, A3).
    pub resolution: DetectorResolution,
    /// The headline's survivor figures (§9, A3).
    pub survivor: SurvivorSpan,
    /// What a share carries (§9, A3).
    pub shares: ShareSupport,
    /// Which recovery claims are made (§5, §9, A3).
    pub claims: Claims,
    /// The dev widening's rate (§5, A3).
    pub widening: WideningRate,
    /// report.json's seconds (§9, A3).
    pub json_seconds: JsonSeconds,
    /// Which tokens a stream's figures are about (§3, A4).
    pub streams: StreamReading,
    /// What a request the run stopped before sending is (§3, A4).
    pub stopped: StopReading,
    /// Whether the curve's tail readings keep §7's sample budget (§3, §7, A4).
    pub curve_budget: CurveBudget,
    /// What the tail intervals take the samples to be worth (§7, A4).
    pub tails: TailSample,
    /// Which runs fill the headline's survivor and recovery slots (appendix, A4).
    pub headline: HeadlineSlots,
    /// Which requests a survivor span's TTFT reads (§5, A4).
    pub span_ttft: SpanTtft,
    /// Which requests were in flight on the lost replica (§3, A4).
    pub lost_in_flight: LostInFlight,
    /// A backlog drain at the removal's first sample (§5, A4).
    pub drain: DrainAtRemoval,
    /// When a recovery's absence is claimed (§5, A4).
    pub absence: Absence,
    /// Where the receive-path check's canary bound is read (§2, A4).
    pub canary: CanaryOver,
    /// What a tail's refusal says (§7, A4).
    pub refusals: RefusalWords,
    /// What the receive-path check's verdict may rest on (§2, A4).
    pub verdict: VerdictBasis,
    /// Whether the first token's path is decomposed (§2, A4).
    pub path: FirstTokenPath,
    /// Whether a reading names what it measured where issue 52 found it did not (§2, §5, §9,
    /// A4).
    pub words: ReadingWords,
    /// Whether the run's capacity is checked against its calibration (§10, A4).
    pub capacity: CapacityCheck,
    /// Which SLOs goodput is read under, and with what interval (§4, A4).
    pub goodput: GoodputReading,
    /// Whether the server's prefix-cache counters are read (§2, A4).
    pub prefix_cache: PrefixCacheReading,
    /// How a request the client abandoned by design is counted (§1 "Abandonment", §3, A4).
    pub abandoned: AbandonReading,
    /// Whether a testbed change's steps are read (§10 "Reading a testbed change", A4).
    pub change: ChangeReading,
}

impl Rules {
    /// v0.1's rules, from which every later version's are amended.
    const ORIGINAL: Rules = Rules {
        curve: ErrorTreatment::Censored,
        recovery: RecoveryRules::Original,
        skew: SkewDefinition::Dispatch,
        undispatched: UndispatchedCount::Recorded,
        cpu: CpuSource::HostShare,
        audit: AuditContents::Archived,
        printing: Printing::Archived,
        stall: StallReading::AsRecorded,
        lateness: LatenessReading::AsRecorded,
        resolution: DetectorResolution::Measured,
        survivor: SurvivorSpan::FaultWindow,
        shares: ShareSupport::Bare,
        claims: Claims::Unguarded,
        widening: WideningRate::ObservedCount,
        json_seconds: JsonSeconds::Float,
        streams: StreamReading::AnswerContent,
        stopped: StopReading::Censored,
        curve_budget: CurveBudget::Unbounded,
        tails: TailSample::Independent,
        headline: HeadlineSlots::CleanDeleteOnly,
        span_ttft: SpanTtft::EveryCompleted,
        lost_in_flight: LostInFlight::Attributed,
        drain: DrainAtRemoval::Measured,
        absence: Absence::SomeWindowCounted,
        canary: CanaryOver::Window,
        refusals: RefusalWords::Budget,
        verdict: VerdictBasis::Buckets,
        path: FirstTokenPath::Unread,
        words: ReadingWords::Archived,
        capacity: CapacityCheck::Unchecked,
        goodput: GoodputReading::PinnedOnly,
        prefix_cache: PrefixCacheReading::Unread,
        abandoned: AbandonReading::AsCensored,
        change: ChangeReading::Unread,
    };

    /// The rules of `spec`. The only place a version is matched on.
    pub fn of(spec: Spec) -> Rules {
        let original = Rules::ORIGINAL;
        let a2 = Rules {
            curve: ErrorTreatment::Compete,
            recovery: RecoveryRules::Amended,
            skew: SkewDefinition::ReadyToSend,
            undispatched: UndispatchedCount::WithUnrecorded,
            cpu: CpuSource::CgroupQuotaWhereJournaled,
            audit: AuditContents::WithArtifact,
            printing: Printing::Honest,
            ..original
        };
        let a3 = Rules {
            stall: StallReading::SendPathOnly,
            lateness: LatenessReading::ClientLate,
            resolution: DetectorResolution::Bound,
            survivor: SurvivorSpan::OutageThenRecovery,
            shares: ShareSupport::Counted,
            claims: Claims::Supported,
            widening: WideningRate::ConfiguredRate,
            json_seconds: JsonSeconds::Nanosecond,
            ..a2
        };
        match spec {
            Spec::V0_1 => original,
            Spec::V0_2 => Rules {
                curve: ErrorTreatment::Compete,
                ..original
            },
            Spec::V0_3 => a2,
            Spec::V0_4 => a3,
            Spec::V0_5 => Rules {
                streams: StreamReading::EveryDelta,
                stopped: StopReading::NotSent,
                printing: Printing::Resolved,
                curve_budget: CurveBudget::TailBudget,
                tails: TailSample::Effective,
                headline: HeadlineSlots::PrimaryElseBlackHole,
                span_ttft: SpanTtft::Streamed,
                lost_in_flight: LostInFlight::AttributedOrUnanswered,
                drain: DrainAtRemoval::Bound,
                absence: Absence::EveryBucketRead,
                canary: CanaryOver::Span,
                refusals: RefusalWords::WhatPublishes,
                verdict: VerdictBasis::MeansWhereBucketsCannot,
                path: FirstTokenPath::Decomposed,
                words: ReadingWords::WhatWasMeasured,
                capacity: CapacityCheck::AgainstCalibration,
                goodput: GoodputReading::PinnedAndDeclared,
                prefix_cache: PrefixCacheReading::HitShare,
                abandoned: AbandonReading::Planned,
                change: ChangeReading::Read,
                ..a3
            },
        }
    }
}

/// How the completion curve treats an errored request (the one rule A1 changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorTreatment {
    /// v0.1: an error is a censoring; the curve is 1 - Kaplan-Meier. It overstates completion
    /// whenever a completion follows an error.
    Censored,
    /// v0.2: an error is a competing terminal event that permanently consumes probability mass;
    /// the curve is the Aalen-Johansen cumulative incidence of completion.
    Compete,
}

impl Spec {
    /// Every version this build applies, oldest first.
    pub const ALL: [Spec; 5] = [Spec::V0_1, Spec::V0_2, Spec::V0_3, Spec::V0_4, Spec::V0_5];
    /// The version a new capture is recorded under.
    pub const CURRENT: Spec = Spec::V0_5;

    /// Its name as journals, reports and `--spec` write it (`v0.2`).
    pub fn name(self) -> &'static str {
        match self {
            Spec::V0_1 => "v0.1",
            Spec::V0_2 => "v0.2",
            Spec::V0_3 => "v0.3",
            Spec::V0_4 => "v0.4",
            Spec::V0_5 => "v0.5",
        }
    }

    /// The version with this name, if this build applies it.
    pub fn parse(name: &str) -> Option<Spec> {
        Spec::ALL.into_iter().find(|s| s.name() == name)
    }

    /// What this version changed from the one before, in SPEC.md's words; `None` for the first.
    pub fn amendment(self) -> Option<&'static str> {
        match self {
            Spec::V0_1 => None,
            Spec::V0_2 => Some(
                "A1: errors compete; the completion curve is the Aalen-Johansen cumulative incidence, \
                 not Kaplan-Meier with errors censored",
            ),
            Spec::V0_3 => Some(
                "A2: recovery read only where the data support it; a two-sided band for the \
                 equilibrium, no recovery before the fault's removal, a minimum of requests per \
                 detector window, an ordered timeline, no recovery figure from an invalid run",
            ),
            Spec::V0_4 => Some(
                "A3: a reading says what it measured, over what and of how many; a recovery at the \
                 detector's resolution is a bound, the survivor is read over the outage and the \
                 recovery apart, a share prints its n and is refused below a pinned minimum, no \
                 claim without a measured cell; G2.4 reads only a ticker on the send path",
            ),
            Spec::V0_5 => Some(
                "A4: a stream's figures say which tokens they are about; TTFT is the first generated \
                 delta of any kind (reasoning, tool call, answer), the time to first answer token and \
                 the reasoning span beside it, TPOT over every token the usage counts, inter-token \
                 latency per delivery, and a figure at the read's 1 us resolution refused; a request \
                 a stopped run never sent is not sent, not censored, and in no window's figures; \
                 a curve reading under a millisecond printed in microseconds",
            ),
        }
    }

    /// The versions' names joined for help and error text (`v0.1, v0.2 and v0.3`).
    pub fn names() -> String {
        let names = Spec::ALL.map(Spec::name);
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_versions_are_refused() {
        for spec in Spec::ALL {
            assert_eq!(Spec::parse(spec.name()), Some(spec));
        }
        assert_eq!(Spec::parse("v0.6"), None);
        assert_eq!(Spec::names(), "v0.1, v0.2, v0.3, v0.4 and v0.5");
        assert_eq!(Spec::parse("0.2"), None);
    }

    /// The table, version by version: A1 changed the curve alone; A2 the recovery reading and
    /// the client gate's definitions; A3 the rest, and nothing A2 set.
    #[test]
    fn each_version_changes_the_rules_its_amendment_names() {
        let [v1, v2, v3, v4, v5] = Spec::ALL.map(Rules::of);
        assert_eq!(v1.curve, ErrorTreatment::Censored);
        assert_eq!(
            v2,
            Rules {
                curve: ErrorTreatment::Compete,
                ..v1
            }
        );
        assert_eq!(v3.curve, ErrorTreatment::Compete);
        assert_eq!(v3.recovery, RecoveryRules::Amended);
        assert_eq!(v3.skew, SkewDefinition::ReadyToSend);
        assert_eq!(v3.undispatched, UndispatchedCount::WithUnrecorded);
        assert_eq!(v3.cpu, CpuSource::CgroupQuotaWhereJournaled);
        assert_eq!(v3.audit, AuditContents::WithArtifact);
        assert_eq!(v3.printing, Printing::Honest);
        assert_eq!(v2.recovery, RecoveryRules::Original);
        assert_eq!(
            (v1.stall, v1.json_seconds, v3.stall, v3.claims),
            (
                StallReading::AsRecorded,
                JsonSeconds::Float,
                StallReading::AsRecorded,
                Claims::Unguarded
            )
        );
        assert_eq!(
            v4,
            Rules {
                stall: StallReading::SendPathOnly,
                lateness: LatenessReading::ClientLate,
                resolution: DetectorResolution::Bound,
                survivor: SurvivorSpan::OutageThenRecovery,
                shares: ShareSupport::Counted,
                claims: Claims::Supported,
                widening: WideningRate::ConfiguredRate,
                json_seconds: JsonSeconds::Nanosecond,
                ..v3
            }
        );
        assert_eq!(v4.streams, StreamReading::AnswerContent);
        assert_eq!(v4.stopped, StopReading::Censored);
        assert_eq!(v4.tails, TailSample::Independent);
        assert_eq!(v4.headline, HeadlineSlots::CleanDeleteOnly);
        assert_eq!(v4.span_ttft, SpanTtft::EveryCompleted);
        assert_eq!(v4.lost_in_flight, LostInFlight::Attributed);
        assert_eq!(v4.drain, DrainAtRemoval::Measured);
        assert_eq!(v4.absence, Absence::SomeWindowCounted);
        assert_eq!(v4.canary, CanaryOver::Window);
        assert_eq!(v4.refusals, RefusalWords::Budget);
        assert_eq!(v4.verdict, VerdictBasis::Buckets);
        assert_eq!(v4.path, FirstTokenPath::Unread);
        assert_eq!(v4.words, ReadingWords::Archived);
        assert_eq!(v4.capacity, CapacityCheck::Unchecked);
        assert_eq!(v4.goodput, GoodputReading::PinnedOnly);
        assert_eq!(v4.prefix_cache, PrefixCacheReading::Unread);
        assert_eq!(v4.abandoned, AbandonReading::AsCensored);
        assert_eq!(v4.change, ChangeReading::Unread);
        assert_eq!(
            v5,
            Rules {
                streams: StreamReading::EveryDelta,
                stopped: StopReading::NotSent,
                printing: Printing::Resolved,
                curve_budget: CurveBudget::TailBudget,
                tails: TailSample::Effective,
                headline: HeadlineSlots::PrimaryElseBlackHole,
                span_ttft: SpanTtft::Streamed,
                lost_in_flight: LostInFlight::AttributedOrUnanswered,
                drain: DrainAtRemoval::Bound,
                absence: Absence::EveryBucketRead,
                canary: CanaryOver::Span,
                refusals: RefusalWords::WhatPublishes,
                verdict: VerdictBasis::MeansWhereBucketsCannot,
                path: FirstTokenPath::Decomposed,
                words: ReadingWords::WhatWasMeasured,
                capacity: CapacityCheck::AgainstCalibration,
                goodput: GoodputReading::PinnedAndDeclared,
                prefix_cache: PrefixCacheReading::HitShare,
                abandoned: AbandonReading::Planned,
                change: ChangeReading::Read,
                ..v4
            }
        );
    }

    #[test]
    fn only_the_first_version_has_no_amendment() {
        assert_eq!(Spec::ALL[0].amendment(), None);
        assert!(Spec::ALL[1..].iter().all(|s| s.amendment().is_some()));
        assert_eq!(Spec::CURRENT, *Spec::ALL.last().unwrap());
    }
}
