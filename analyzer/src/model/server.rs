//! The server-side evidence (SPEC §2 "Server-side evidence"): what the target's own metrics,
//! scraped into the journal, say beside what the client measured.

use serde::Serialize;

impl ServerEvidence {
    /// v0.5: the summary's line per scraped source (SPEC §2, issue 55 item 4): how many scrapes
    /// it answered, and over the main window (the baseline, else the measurement) its clock's
    /// first-token and end-to-end means against the client's with each verdict, and its
    /// finished count against the client's; or why there is no evidence.
    pub fn summary_lines(&self) -> Vec<String> {
        use std::fmt::Write as _;
        let server = self;
        let ms = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1} ms"));
        let mut lines = Vec::new();
        for source in &server.sources {
            let name = &source.source;
            if source.answered == 0 {
                lines.push(format!(
                    "server side (§2), {name}: none of {} scrapes answered Prometheus text ({}): no server-side evidence",
                    source.failed,
                    source.first_failure.as_deref().unwrap_or("no answer")
                ));
                continue;
            }
            if source.roles.is_empty() {
                lines.push(format!(
                    "server side (§2), {name}: {} scrapes answered, {} series journaled, none the analysis reads (not vLLM's, SGLang's or TGI's metrics): no server-side evidence",
                    source.answered, source.series
                ));
                continue;
            }
            let mut line = format!("server side (§2), {name}: {} scrapes", source.answered);
            let window = ["baseline", "measurement"].iter().find_map(|main| {
                server
                    .windows
                    .iter()
                    .find(|w| w.window == *main && w.source == *name)
            });
            if let Some(w) = window {
                if let Some(p) = &w.prefix_cache {
                    line.push_str(&p.summary_clause(w.window));
                }
                for (what, c) in [
                    ("first token", &w.first_token),
                    ("end to end", &w.end_to_end),
                ] {
                    if let Some(c) = c {
                        let _ = write!(
                            line,
                            "; {}, {what}, means: {} in the server's clock against the client's {} from each request written ({})",
                            w.window,
                            ms(c.server_mean_ms),
                            ms(c.client_mean_ms),
                            c.verdict
                        );
                    }
                }
            }
            if let Some(r) = server.reconciliation.iter().find(|r| r.source == *name) {
                let _ = write!(line, "; {}", r.text);
            }
            lines.push(line);
        }
        lines
    }
}

/// The section: one summary per scraped source, the per-window comparison, and the counts
/// reconciled over the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerEvidence {
    /// The scrape period the recorder used, ms (the pin, after the dev factor and its floor).
    pub period_ms: f64,
    /// Per source: how its scrapes went.
    pub sources: Vec<SourceSummary>,
    /// Per window and source: the server's figures beside the client's. Empty when the
    /// windows are withheld (an invalid run without `--diagnose`).
    pub windows: Vec<ServerWindow>,
    /// Why `windows` is empty, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windows_withheld: Option<String>,
    /// Per replica: the server's finished-request counter against the requests the client saw
    /// it finish, over the scraped span.
    pub reconciliation: Vec<Reconciliation>,
    /// Where the pre-flight's sample request stands in those counts.
    pub preflight: String,
    /// Per source and scrape, what the plots draw (not in report.json: the export has every
    /// reading).
    #[serde(skip)]
    pub timeline: Vec<ServerPoint>,
}

/// One scrape of one source, for the plots.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerPoint {
    /// The source.
    pub source: String,
    /// The scrape's moment (its midpoint), s from the epoch.
    pub t_s: f64,
    /// Requests waiting.
    pub queue: Option<f64>,
    /// Requests running.
    pub running: Option<f64>,
    /// The server's mean first-token time over the observations since the previous scrape, ms.
    pub server_first_token_ms: Option<f64>,
    /// The client's mean first-token time (from the request written) over the first tokens it
    /// saw from this source since the previous scrape, ms.
    pub client_first_token_ms: Option<f64>,
}

/// One source's scrapes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SourceSummary {
    /// The replica's (or extra endpoint's) name.
    pub source: String,
    /// Answered scrapes (records).
    pub answered: u64,
    /// Scrapes that gave no record (events), and the first reason.
    pub failed: u64,
    /// The first failure's detail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_failure: Option<String>,
    /// Series journaled, and the roles the analysis recognised among them.
    pub series: u64,
    /// The recognised roles (queue, running, kv-cache, ...).
    pub roles: Vec<&'static str>,
    /// When the first answer came, s from the epoch.
    pub first_answer_s: Option<f64>,
    /// When the source answered as a new process (a counter went down), s from the epoch.
    pub restarts_s: Vec<f64>,
    /// In a fault run, for the victim: its first answer after the fire, s from the epoch (the
    /// replacement's metrics endpoint answering: evidence of it serving, where no readiness
    /// event exists).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_answer_after_fire_s: Option<f64>,
}

/// One window of one source.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerWindow {
    /// The window's name.
    pub window: &'static str,
    /// The source.
    pub source: String,
    /// The span the server's increases cover: from the scrape at or before the window's start
    /// to the last at or before its end (scrape midpoints, s from the epoch). `None` when no two
    /// scrapes bound any of the window.
    pub span_s: Option<(f64, f64)>,
    /// The first-token comparison (SPEC §2's receive-path check).
    pub first_token: Option<ServerComparison>,
    /// The end-to-end comparison.
    pub end_to_end: Option<ServerComparison>,
    /// Requests waiting, over the span's scrapes.
    pub queue: Option<GaugeSummary>,
    /// Requests running.
    pub running: Option<GaugeSummary>,
    /// KV-cache use, percent of the cache.
    pub kv_cache_percent: Option<GaugeSummary>,
    /// Preemptions the server counted in the span.
    pub preemptions: Option<f64>,
    /// Requests the server counted finished in the span.
    pub server_finished: Option<f64>,
    /// Requests the client saw complete with this replica in the span.
    pub client_finished: u64,
    /// A4 (v0.5): the client's time to first token split at the server's clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<super::ServerPath>,
    /// A4 (v0.5): the prefix cache's hits over its lookups in the span, where the server
    /// counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache: Option<PrefixCache>,
}

/// A gauge over a span's scrapes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GaugeSummary {
    /// Its mean over the scrapes (equally spaced: a time mean at the scrape period).
    pub mean: f64,
    /// Its largest reading.
    pub max: f64,
    /// Scrapes read.
    pub scrapes: u64,
}

/// A4 (v0.5): the server's prefix cache over one span, from its own counters (SPEC §2).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PrefixCache {
    /// Prompt tokens the server looked up in its prefix cache.
    pub queried_tokens: f64,
    /// Of those, tokens the cache held.
    pub hit_tokens: f64,
    /// Hits over queries, percent; absent where nothing was looked up.
    pub hit_percent: Option<f64>,
    /// Where the workload declares shared prefixes: the reuse it designed for the requests
    /// written over the same span, and the verdict of the server's share against it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub designed: Option<DesignedReuse>,
    /// How the server's share compares with the design (absent without a design or a lookup).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<ReuseVerdict>,
}

impl PrefixCache {
    /// The summary's clause for `window` (empty where there is nothing to say): the share the
    /// server held, and against a design, the design and the verdict.
    pub fn summary_clause(&self, window: &str) -> String {
        let mut out = match (self.hit_percent, &self.designed) {
            (Some(h), _) => {
                format!("; {window}, prefix cache {h:.1} % of the prompt tokens it looked up")
            }
            (None, Some(_)) => format!("; {window}, prefix cache looked up no prompt token"),
            (None, None) => String::new(),
        };
        if let (Some(d), Some(v)) = (
            self.designed.as_ref().and_then(|d| d.designed_percent),
            self.verdict,
        ) {
            let blocks = self
                .designed
                .as_ref()
                .and_then(|d| d.block_tokens)
                .map_or(String::new(), |b| format!(" in whole {b}-token blocks"));
            out.push_str(&format!(
                " against {d:.1} % designed{blocks} ({})",
                v.words()
            ));
        }
        out
    }
}

/// A4 (v0.5): the prefix reuse a workload's shared-prefix pool or conversation history designed
/// over a set of requests (SPEC §1 "Shared prefixes", "Conversation histories"): what a prefix
/// cache with room would hold of their prompts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DesignedReuse {
    /// The requests counted (dispatched).
    pub requests: u64,
    /// Of those, how many opened with a shared prefix an earlier request to the same replica
    /// had sent, and how many with one sent for the first time.
    pub seen_before: u64,
    /// Shared prefixes sent for the first time.
    pub first_use: u64,
    /// The requests whose prompt length the server reported (usage).
    pub with_usage: u64,
    /// Their prompt tokens, as the server counted them.
    pub prompt_tokens: u64,
    /// What of their prompts a cache could hold by design: a shared prefix's length in filler
    /// units, an earlier turn's prompt in the server's tokens.
    pub designed_tokens: u64,
    /// Designed over prompt tokens, percent; absent without usage.
    pub designed_percent: Option<f64>,
    /// The server's prefix-cache block, tokens, where its metrics say it (vLLM's
    /// `cache_config_info`): each request's design is then cut to whole blocks, what such a
    /// cache can hold. Absent when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_tokens: Option<u32>,
    /// Whether each turn resent its session's earlier turns (SPEC §1 "Conversation
    /// histories"): an earlier turn's whole prompt counts in the design. Absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history: bool,
}

/// The server's prefix-cache hit share against the designed reuse (SPEC §2, pin
/// `server.prefix_reuse_tolerance_points`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReuseVerdict {
    /// Within the tolerance of the design.
    AsDesigned,
    /// Below it: caching off, evictions, or the requests' prefixes spread over caches that do
    /// not share.
    LessThanDesigned,
    /// Above it: the prompts share more than the design (a chat template's opening, a
    /// session's history).
    MoreThanDesigned,
}

impl ReuseVerdict {
    /// Its words in a report.
    pub fn words(self) -> &'static str {
        match self {
            ReuseVerdict::AsDesigned => "as designed",
            ReuseVerdict::LessThanDesigned => "the server reused less than the workload designed",
            ReuseVerdict::MoreThanDesigned => "the server reused more than the workload designed",
        }
    }
}

/// The server's distribution of one time against the client's, over one span.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerComparison {
    /// The server's histogram family.
    pub family: String,
    /// Observations the server's histogram gained in the span.
    pub server_n: u64,
    /// Their mean (the histogram's sum over its count: exact, not bucketed), ms.
    pub server_mean_ms: Option<f64>,
    /// The client's requests to this replica whose event falls in the span.
    pub client_n: u64,
    /// Their mean, ms, from the request written whole (the server's clock starts when it has
    /// read it).
    pub client_mean_ms: Option<f64>,
    /// Client mean minus server mean, ms: the time outside the server's clock.
    pub mean_difference_ms: Option<f64>,
    /// Server mean over client mean, percent: how much of the client's time the server
    /// accounts for.
    pub server_share_percent: Option<f64>,
    /// The quantiles compared.
    pub quantiles: Vec<QuantileComparison>,
    /// The loopback canary's largest lag in the window, ms (the read loop's bound), when the
    /// journal has one.
    pub canary_max_ms: Option<f64>,
    /// `within-bounds`, `client-later`, `client-earlier`, `not-comparable`, or (A4)
    /// `not-resolvable`: the means differ by more than the read loop's bound and a compared
    /// bucket is wider than that.
    pub verdict: &'static str,
    /// The verdict in words.
    pub text: String,
}

/// One quantile: the server's bucket against the client's order statistic.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct QuantileComparison {
    /// The probability (0.5, 0.9, 0.99).
    pub q: f64,
    /// The server's bucket holding it: lower bound, ms.
    pub server_low_ms: f64,
    /// Its upper bound, ms (`None`: the +Inf bucket).
    pub server_high_ms: Option<f64>,
    /// The client's quantile (the order statistic at rank ceil(q n)), ms.
    pub client_ms: f64,
}

/// The server's count of finished requests against the client's, over the scraped span.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reconciliation {
    /// The replica.
    pub source: String,
    /// The span: first to last answered scrape (midpoints), s from the epoch.
    pub span_s: (f64, f64),
    /// The server's finished-request counter's increase over the span (all finish reasons).
    pub server_finished: Option<f64>,
    /// Requests the client saw end with this replica in the span (completed or errored with a
    /// response from it).
    pub client_finished: u64,
    /// Requests the client saw end within one scrape of either end of the span: the margin
    /// within which the two counts may differ by timing alone.
    pub margin: u64,
    /// Whether they agree within the margin.
    pub reconciled: Option<bool>,
    /// In words.
    pub text: String,
    /// A4 (v0.5): the server's aborted requests against the client's abandoned ones, where the
    /// workload abandons by design (SPEC §1 "Abandonment").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborts: Option<AbortReconciliation>,
}

impl AbortReconciliation {
    /// In words: the server's evidence (its abort counter where it moved, else what its front
    /// end took and never finished) against the client's abandoned, and whether they agree.
    pub fn words(&self) -> String {
        let x = self;
        let (server, counted) = match (x.server_aborted, x.server_unfinished) {
            (Some(a), _) if a > 0.0 => (a, format!("the server counted {a:.0} aborted")),
            (aborted, Some(u)) => (
                u,
                format!(
                    "{}the server's front end answered {u:.0} more request(s) than it finished (taken and never finished)",
                    match aborted {
                        Some(_) => "the server's abort counter did not move; ",
                        None => "",
                    }
                ),
            ),
            (Some(a), None) => (a, format!("the server counted {a:.0} aborted")),
            (None, None) => {
                return format!(
                    "the client abandoned {} request(s) by design (SPEC §1); the server exposes no aborted-request counter to set beside them",
                    x.client_abandoned
                )
            }
        };
        match x.reconciled {
            Some(true) => format!(
                "{counted}, the client abandoned {} by design: reconciled (within the {} abandoned within one scrape period of either end)",
                x.client_abandoned, x.margin
            ),
            _ => format!(
                "{counted}, the client abandoned {} by design: NOT reconciled (they differ by {:.0}, more than the {} abandoned within one scrape period of either end: a server that finishes a closed request, or ends requests for its own reasons)",
                x.client_abandoned,
                (server - x.client_abandoned as f64).abs(),
                x.margin
            ),
        }
    }
}

/// A4 (v0.5): the requests the client closed by design against those the server counted
/// aborted, over a reconciliation's span.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbortReconciliation {
    /// The server's aborted-request counter's increase (vLLM: `request_success` with
    /// `finished_reason="abort"`), where it exposes one.
    pub server_aborted: Option<f64>,
    /// Requests its front end answered 2xx on the run's routes less those it finished, where it
    /// counts both (vLLM's `http_requests_total`): taken and never finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_unfinished: Option<f64>,
    /// Requests the client abandoned whose instant fell in the span.
    pub client_abandoned: u64,
    /// Abandoned within one scrape period of either end of the span.
    pub margin: u64,
    /// Whether they agree within the margin.
    pub reconciled: Option<bool>,
}
