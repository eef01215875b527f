//! `[workload]`: the generation model, chosen explicitly (SPEC §1 "Workload models", seed 003).
//!
//! ```toml
//! [workload]
//! model = "closed"      # open (default) | closed | semi-open | replay
//! users = 16            # closed: the population
//! think_ms = 500        # closed, semi-open: the mean think time (default 0)
//! think = "exponential" # fixed (default) | exponential
//! # turns = 4           # semi-open: requests per session
//! # history = true      # semi-open: each turn resends the session's earlier turns (SPEC §1)
//! # trace = "t.jsonl"   # replay: one JSON object a line with `timestamp` (ms)
//!
//! [workload.prefixes]   # any model: shared prefixes, drawn per session (SPEC §1)
//! entries = 8           # distinct shared prefixes
//! tokens = 256          # each one's length (or a list, entry k taking the (k mod n)-th)
//! share = 0.9           # sessions that open with one (default 1)
//!
//! [workload.abandon]    # any model: requests the client closes early (SPEC §1)
//! share = 0.1           # of the requests
//! after_ms = 800        # mean delay from the intended time to the close
//! law = "exponential"   # fixed (default) | exponential
//! ```

use serde::Deserialize;

use super::{Config, ConfigError, FaultVariant};
use crate::schedule::{
    Abandonment, History, PrefixPool, Think, ThinkLaw, Workload, SHARE_SCALE, TURNS_MAX, USERS_MAX,
};

/// The section as written.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSection {
    /// `open`, `closed`, `semi-open` or `replay`.
    #[serde(default)]
    pub model: Model,
    /// Closed: how many users.
    pub users: Option<u32>,
    /// Semi-open: requests per session.
    pub turns: Option<u32>,
    /// Closed and semi-open: the mean think time, ms.
    pub think_ms: Option<f64>,
    /// How think times are drawn.
    #[serde(default)]
    pub think: Law,
    /// Replay: the trace file.
    pub trace: Option<String>,
    /// Semi-open: each turn's prompt opens with its session's earlier turns (SPEC §1
    /// "Conversation histories").
    #[serde(default)]
    pub history: bool,
    /// `[workload.prefixes]`: a shared-prefix pool, under any model.
    pub prefixes: Option<PrefixSection>,
    /// `[workload.abandon]`: requests the client closes early, under any model.
    pub abandon: Option<AbandonSection>,
}

/// `[workload.abandon]` as written (SPEC §1 "Abandonment").
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbandonSection {
    /// Requests marked for abandonment, in (0, 1].
    pub share: f64,
    /// The mean delay from a request's intended time to its abandonment, ms.
    pub after_ms: f64,
    /// How each delay is drawn.
    #[serde(default)]
    pub law: Law,
}

/// `[workload.prefixes]` as written (SPEC §1 "Shared prefixes").
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixSection {
    /// How many distinct shared prefixes.
    pub entries: u32,
    /// Each one's length in filler units: one length, or a list cycled over the entries.
    pub tokens: Lengths,
    /// Sessions that open with a shared prefix, in (0, 1]; 1 when absent.
    pub share: Option<f64>,
}

/// `workload.prefixes.tokens`: one length or several.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Lengths {
    /// Every entry this long.
    One(u32),
    /// Entry k takes the (k mod n)-th.
    Each(Vec<u32>),
}

/// `workload.model`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Open loop (the default).
    #[default]
    Open,
    /// Closed loop.
    Closed,
    /// Open sessions of closed turns.
    SemiOpen,
    /// A trace's times.
    Replay,
}

/// `workload.think`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Law {
    /// Every think time the mean.
    #[default]
    Fixed,
    /// Exponential with the mean.
    Exponential,
}

/// Most requests a replay may schedule: their times travel in the journal header (8 bytes each),
/// whose body is at most 4 MiB, beside the configuration and the host facts.
pub const REPLAY_REQUESTS_MAX: usize = 250_000;

/// Most turns a semi-open session may have when each resends the earlier ones: the last
/// turn's body holds every earlier prompt.
pub const HISTORY_TURNS_MAX: u32 = 1_000;

/// Longest mean think time: an hour (a longer one is a typo for seconds or a different study).
pub const THINK_MS_MAX: f64 = 3_600_000.0;

fn invalid(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message,
        at: None,
    }
}

/// A trace read for replay: each request's intended time, and what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The intended times, ns from the schedule's start (after the timeline divisor), in order.
    pub offsets_ns: Vec<u64>,
    /// Lines at or past the schedule's end: not sent, and not scheduled.
    pub past_end: usize,
    /// Whether every line carries a request (`prompt` or `messages`): the trace's own requests
    /// are then sent, line i as request i.
    pub has_requests: bool,
    /// BLAKE3 of the file's bytes.
    pub blake3: [u8; 32],
}

impl Config {
    /// Reads `workload.trace`: one JSON object a line (blank lines skipped), each with
    /// `timestamp`, ms from the trace's start; the first line's timestamp is the schedule's
    /// start. Times must not go backwards; a line at or past the schedule's end is left out and
    /// counted. The error names the file and the line.
    pub fn read_trace(&self) -> Result<Trace, ConfigError> {
        let path = self.workload.trace.as_deref().unwrap_or_default();
        let wrong = |message: String| invalid("workload.trace", message);
        let bytes = crate::files::read_bounded(
            path.as_ref(),
            crate::files::PROMPT_FILE_BYTES_MAX,
            "a trace",
        )
        .map_err(|e| wrong(format!("{path}: {e}")))?;
        let text =
            std::str::from_utf8(&bytes).map_err(|e| wrong(format!("{path}: not UTF-8 ({e})")))?;
        let end_ns = self.schedule_params().total_duration_ns();
        let divisor = self.timeline_divisor();
        let (mut offsets_ns, mut past_end, mut has_requests) = (Vec::new(), 0, true);
        let mut first_ms = None;
        let mut previous_ms = f64::NEG_INFINITY;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let at = |why: String| wrong(format!("{path} line {}: {why}", i + 1));
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| at(format!("not JSON ({e})")))?;
            let ms = value
                .get("timestamp")
                .and_then(serde_json::Value::as_f64)
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .ok_or_else(|| at("no `timestamp` (ms from the trace's start, >= 0)".into()))?;
            if ms < previous_ms {
                return Err(at(format!(
                    "timestamp {ms} comes before the line above's {previous_ms}: a trace is in time order"
                )));
            }
            previous_ms = ms;
            let first = *first_ms.get_or_insert(ms);
            has_requests &= value.get("prompt").is_some() || value.get("messages").is_some();
            let ns = ((ms - first) * 1e6) as u64 / divisor;
            if ns >= end_ns {
                past_end += 1;
            } else {
                offsets_ns.push(ns);
            }
        }
        if offsets_ns.is_empty() {
            return Err(wrong(format!(
                "{path} has no request before the schedule's end ({:.3} s)",
                end_ns as f64 / 1e9
            )));
        }
        if offsets_ns.len() > REPLAY_REQUESTS_MAX {
            return Err(wrong(format!(
                "{path} holds {} requests within the schedule; a replay journals each time in its header, which holds at most {REPLAY_REQUESTS_MAX}",
                offsets_ns.len()
            )));
        }
        Ok(Trace {
            offsets_ns,
            past_end,
            has_requests,
            blake3: *blake3::hash(&bytes).as_bytes(),
        })
    }

    /// The workload model this configuration asks for. A replay's times are not here (the
    /// configuration names the trace; the recorder reads it and journals its times).
    pub fn workload(&self) -> Workload {
        let w = &self.workload;
        let think = || Think {
            mean_ns: (w.think_ms.unwrap_or(0.0) * 1e6) as u64 / self.timeline_divisor(),
            law: match w.think {
                Law::Fixed => ThinkLaw::Fixed,
                Law::Exponential => ThinkLaw::Exponential,
            },
        };
        match w.model {
            Model::Open => Workload::Open,
            Model::Closed => Workload::Closed {
                users: w.users.unwrap_or(0),
                think: think(),
            },
            Model::SemiOpen => Workload::SemiOpen {
                turns: w.turns.unwrap_or(0),
                think: think(),
            },
            Model::Replay => Workload::Replay {
                offsets_ns: Vec::new().into(),
            },
        }
    }

    /// The shared-prefix pool `[workload.prefixes]` declares, if it does (checked at load by
    /// [`PrefixPool::check`]).
    pub fn prefix_pool(&self) -> Option<PrefixPool> {
        let p = self.workload.prefixes.as_ref()?;
        Some(PrefixPool {
            entries: p.entries,
            tokens: match &p.tokens {
                Lengths::One(t) => vec![*t],
                Lengths::Each(list) => list.clone(),
            },
            share_ppm: (p.share.unwrap_or(1.0) * f64::from(SHARE_SCALE)).round() as u32,
        })
    }

    /// The abandonment `[workload.abandon]` declares, if it does (its delays divided with the
    /// timeline, as think times are; checked at load by [`Abandonment::check`]).
    pub fn abandonment(&self) -> Option<Abandonment> {
        let a = self.workload.abandon.as_ref()?;
        Some(Abandonment {
            share_ppm: (a.share * f64::from(SHARE_SCALE)).round() as u32,
            mean_ns: (a.after_ms.max(0.0) * 1e6) as u64 / self.timeline_divisor(),
            law: match a.law {
                Law::Fixed => ThinkLaw::Fixed,
                Law::Exponential => ThinkLaw::Exponential,
            },
        })
    }

    /// The conversation history `workload.history` declares, if it does (a semi-open session's
    /// earlier user turns; checked at load against the model).
    pub fn history(&self) -> Option<History> {
        self.workload.history.then_some(History::UserTurns)
    }

    /// What divides the timeline's own times (a think time, a trace's timestamps): the dev
    /// time factor, unless the phases' durations are stated in seconds (then every time of the
    /// timeline is as written, §P).
    pub fn timeline_divisor(&self) -> u64 {
        if self.profile == super::Profile::Dev && !self.dev.stated() {
            u64::from(self.time_factor)
        } else {
            1
        }
    }

    /// `[workload.prefixes]` and `[workload.abandon]`: each share in (0, 1], each bound.
    fn check_prefixes(&self) -> Result<(), ConfigError> {
        if let Some(share) = self.workload.prefixes.as_ref().and_then(|p| p.share) {
            if !(share.is_finite() && share > 0.0 && share <= 1.0) {
                return Err(invalid(
                    "workload.prefixes.share",
                    format!("{share} is not a share in (0, 1] of the sessions"),
                ));
            }
        }
        if let Some(a) = &self.workload.abandon {
            if !(a.share.is_finite() && a.share > 0.0 && a.share <= 1.0) {
                return Err(invalid(
                    "workload.abandon.share",
                    format!("{} is not a share in (0, 1] of the requests", a.share),
                ));
            }
            if !(a.after_ms.is_finite() && (0.0..=THINK_MS_MAX).contains(&a.after_ms)) {
                return Err(invalid(
                    "workload.abandon.after_ms",
                    format!("{} is outside 0..={THINK_MS_MAX} ms", a.after_ms),
                ));
            }
        }
        if let Some(a) = self.abandonment() {
            a.check()
                .map_err(|why| invalid("workload.abandon", why.to_string()))?;
        }
        if let Some(pool) = self.prefix_pool() {
            pool.check().map_err(|why| {
                invalid(
                    "workload.prefixes",
                    format!("{why}; a pool names its entries, their lengths and the share of sessions that draw one"),
                )
            })?;
        }
        Ok(())
    }

    /// What each model cannot run without: closed its users, semi-open its turns, replay its
    /// trace.
    fn check_model_needs(&self) -> Result<(), ConfigError> {
        let w = &self.workload;
        match w.model {
            Model::Open => {}
            Model::Closed => match w.users {
                Some(users) if (1..=USERS_MAX).contains(&users) => {}
                other => {
                    return Err(invalid(
                        "workload.users",
                        format!("a closed workload needs users in 1..={USERS_MAX} (got {other:?})"),
                    ))
                }
            },
            Model::SemiOpen => match w.turns {
                Some(turns) if (1..=TURNS_MAX).contains(&turns) => {}
                other => {
                    return Err(invalid(
                        "workload.turns",
                        format!("a semi-open workload needs turns in 1..={TURNS_MAX} per session (got {other:?})"),
                    ))
                }
            },
            Model::Replay => {
                if w.trace.as_deref().is_none_or(str::is_empty) {
                    return Err(invalid(
                        "workload.trace",
                        "a replay needs its trace file (one JSON object a line, each with `timestamp` in ms)".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `workload.history`: semi-open only, and within the turns a last turn may resend.
    fn check_history(&self) -> Result<(), ConfigError> {
        let w = &self.workload;
        if w.history && w.model != Model::SemiOpen {
            let name = self.workload().name();
            return Err(invalid(
                "workload.history",
                format!("resends a session's earlier turns, and a {name} workload has no session that ends (a closed user's would outgrow any context window); use model = \"semi-open\" with turns"),
            ));
        }
        match w.turns {
            Some(turns) if w.history && turns > HISTORY_TURNS_MAX => Err(invalid(
                "workload.turns",
                format!("{turns} turns with a history: the last turn would resend {} prompts; at most {HISTORY_TURNS_MAX}", turns - 1),
            )),
            _ => Ok(()),
        }
    }

    /// `[workload]` against itself and the rest: each model's own keys and no other's, and the
    /// models other than open only where the study they would change allows them.
    pub(super) fn check_workload(&self) -> Result<(), ConfigError> {
        let w = &self.workload;
        let set: Vec<&str> = [
            ("workload.users", w.users.is_some()),
            ("workload.turns", w.turns.is_some()),
            ("workload.think_ms", w.think_ms.is_some()),
            ("workload.think", w.think != Law::Fixed),
            ("workload.trace", w.trace.is_some()),
            ("workload.history", w.history),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        let allowed: &[&str] = match w.model {
            Model::Open => &[],
            Model::Closed => &["workload.users", "workload.think_ms", "workload.think"],
            Model::SemiOpen => &[
                "workload.turns",
                "workload.think_ms",
                "workload.think",
                "workload.history",
            ],
            Model::Replay => &["workload.trace"],
        };
        let name = self.workload().name();
        self.check_history()?;
        if let Some(key) = set.iter().find(|k| !allowed.contains(k)) {
            return Err(invalid(
                key,
                format!("does not apply to workload.model = \"{name}\""),
            ));
        }
        self.check_prefixes()?;
        if w.model == Model::Open {
            return Ok(());
        }
        self.check_model_needs()?;
        if let Some(ms) = w.think_ms {
            if !(ms.is_finite() && (0.0..=THINK_MS_MAX).contains(&ms)) {
                return Err(invalid(
                    "workload.think_ms",
                    format!("{ms} is outside 0..={THINK_MS_MAX} ms"),
                ));
            }
        }
        if matches!(w.model, Model::Closed | Model::Replay) && self.schedule.rate_rps.is_some() {
            return Err(invalid(
                "schedule.rate_rps",
                format!(
                    "a {name} workload sets its own rate ({}); remove schedule.rate_rps",
                    if w.model == Model::Closed {
                        "what its users achieve is an outcome of the run"
                    } else {
                        "the trace's times"
                    }
                ),
            ));
        }
        // The fault studies and the calibration ramp are open loop at a rate fixed in advance
        // (§1, §10): a closed loop would slow down with the fault it measures.
        if self.fault.variant != FaultVariant::None || self.calibration.step {
            return Err(ConfigError::Inconsistent {
                clause: "§1",
                message: format!(
                    "workload.model = \"{name}\": a fault run and a calibration step are open loop at a rate fixed in advance (§1, §10); use model = \"open\" there"
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 10\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:8000\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n[schedule]\nseed = 1\narrival = \"poisson\"\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n";

    fn load(schedule: &str, workload: &str) -> Result<Config, ConfigError> {
        let text = BASE.replace(
            "arrival = \"poisson\"\n",
            &format!("arrival = \"poisson\"\n{schedule}"),
        );
        Config::parse(format!("{text}[workload]\n{workload}").as_bytes())
    }

    fn refused(schedule: &str, workload: &str, says: &str) {
        let error = load(schedule, workload).unwrap_err().to_string();
        assert!(error.contains(says), "{workload}: {error}");
    }

    /// Each model takes its own keys and no other's; closed and replay set their own rate; the
    /// think time divides with the timeline under the dev profile.
    #[test]
    fn each_model_takes_its_keys_and_refuses_the_others() {
        let closed = load(
            "",
            "model = \"closed\"\nusers = 8\nthink_ms = 500\nthink = \"exponential\"",
        )
        .unwrap();
        assert_eq!(
            closed.workload(),
            Workload::Closed {
                users: 8,
                think: Think {
                    mean_ns: 50_000_000,
                    law: ThinkLaw::Exponential
                }
            }
        );
        assert_eq!(closed.rate_rps(), 8.0, "the pool's sizing");
        let semi = load("rate_rps = 2.0\n", "model = \"semi-open\"\nturns = 3").unwrap();
        assert!(matches!(
            semi.workload(),
            Workload::SemiOpen { turns: 3, .. }
        ));
        refused("", "model = \"closed\"", "workload.users");
        refused("", "model = \"closed\"\nusers = 0", "1..=100000");
        refused(
            "rate_rps = 2.0\n",
            "model = \"closed\"\nusers = 2",
            "remove schedule.rate_rps",
        );
        refused(
            "rate_rps = 2.0\n",
            "model = \"semi-open\"\nturns = 2\nusers = 2",
            "workload.users",
        );
        refused(
            "rate_rps = 2.0\n",
            "model = \"semi-open\"",
            "workload.turns",
        );
        refused("", "model = \"replay\"", "workload.trace");
        refused(
            "rate_rps = 2.0\n",
            "think_ms = 5",
            "does not apply to workload.model = \"open\"",
        );
        refused(
            "",
            "model = \"closed\"\nusers = 2\nthink_ms = -1",
            "think_ms",
        );
        refused("", "model = \"batch\"", "workload.model");
        let fault = BASE
            .replace("variant = \"none\"", "variant = \"clean-delete\"")
            .replace("[fault]", "[calibration]\nlambda_max_rps = 10.0\n[fault]");
        let error =
            Config::parse(format!("{fault}[workload]\nmodel = \"closed\"\nusers = 2\n").as_bytes());
        assert!(error.is_err());
    }

    /// `workload.history` under semi-open reaches the schedule (and so the digest); under
    /// another model, or past the turns a history may resend, it is refused at its key.
    #[test]
    fn a_history_is_semi_open_only_and_scheduled() {
        let semi = |extra: &str| {
            load(
                "rate_rps = 2.0\n",
                &format!("model = \"semi-open\"\nturns = 3\n{extra}"),
            )
        };
        let with = semi("history = true").unwrap().schedule_params();
        let without = semi("").unwrap().schedule_params();
        assert_eq!(with.history, Some(History::UserTurns));
        assert_eq!(without.history, None);
        assert_ne!(with.digest(), without.digest());
        assert_eq!(semi("history = false").unwrap().history(), None);
        refused(
            "",
            "model = \"closed\"\nusers = 2\nhistory = true",
            "resends a session's earlier turns, and a closed workload",
        );
        refused(
            "rate_rps = 2.0\n",
            "history = true",
            "use model = \"semi-open\" with turns",
        );
        refused(
            "rate_rps = 2.0\n",
            "model = \"semi-open\"\nturns = 1001\nhistory = true",
            "1001 turns with a history",
        );
    }

    /// `[workload.prefixes]` under any model: one length or a list, the share in (0, 1]
    /// (default 1), each bound refused at its key; the pool reaches the schedule (and so the
    /// digest and the header).
    #[test]
    fn a_prefix_pool_is_read_checked_and_scheduled() {
        let open = load(
            "rate_rps = 2.0\n",
            "[workload.prefixes]\nentries = 4\ntokens = [32, 64]\nshare = 0.5",
        )
        .unwrap();
        let pool = open.prefix_pool().unwrap();
        assert_eq!(
            (pool.entries, pool.tokens.clone(), pool.share_ppm),
            (4, vec![32, 64], 500_000)
        );
        assert_eq!(open.schedule_params().prefixes, Some(pool));
        let semi = load(
            "rate_rps = 2.0\n",
            "model = \"semi-open\"\nturns = 2\n[workload.prefixes]\nentries = 1\ntokens = 128",
        )
        .unwrap();
        assert_eq!(semi.prefix_pool().unwrap().share_ppm, SHARE_SCALE);
        let without = load("rate_rps = 2.0\n", "").unwrap();
        assert_eq!(without.schedule_params().prefixes, None);
        assert_ne!(
            open.schedule_params().digest(),
            without.schedule_params().digest(),
            "the pool is in the digest"
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.prefixes]\nentries = 4\ntokens = 64\nshare = 1.5",
            "workload.prefixes.share",
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.prefixes]\nentries = 0\ntokens = 64",
            "entries 0 is outside",
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.prefixes]\nentries = 2\ntokens = []",
            "lengths 0 is outside",
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.prefixes]\nentries = 2\ntokens = 64\nsize = 3",
            "size",
        );
    }

    /// `[workload.abandon]` under any model: the share in parts per million, the mean divided
    /// with the timeline (dev factor 10 here), the law; bounds refused at their keys; in the
    /// digest.
    #[test]
    fn an_abandonment_is_read_checked_and_scheduled() {
        let open = load(
            "rate_rps = 2.0\n",
            "[workload.abandon]\nshare = 0.2\nafter_ms = 800\nlaw = \"exponential\"",
        )
        .unwrap();
        assert_eq!(
            open.abandonment(),
            Some(Abandonment {
                share_ppm: 200_000,
                mean_ns: 80_000_000,
                law: ThinkLaw::Exponential
            })
        );
        assert_eq!(open.schedule_params().abandon, open.abandonment());
        let without = load("rate_rps = 2.0\n", "").unwrap();
        assert_ne!(
            open.schedule_params().digest(),
            without.schedule_params().digest()
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.abandon]\nshare = 0\nafter_ms = 800",
            "workload.abandon.share",
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.abandon]\nshare = 0.5\nafter_ms = -1",
            "workload.abandon.after_ms",
        );
        refused(
            "rate_rps = 2.0\n",
            "[workload.abandon]\nshare = 0.5",
            "after_ms",
        );
    }

    /// A trace's times, from its first, divided by the dev factor; past the end left out and
    /// counted; out of order refused naming its line.
    #[test]
    fn a_trace_is_read_in_order_and_cut_at_the_schedule_end() {
        let dir = percentes_testkit::Scratch::new("trace");
        let path = dir.join("t.jsonl");
        // Dev factor 10: 30 s + 300 s + 30 s of pins become 36 s; 1000 s is past it.
        std::fs::write(&path, "{\"timestamp\": 100}\n\n{\"timestamp\": 1100, \"prompt\": \"x\"}\n{\"timestamp\": 1000100}\n").unwrap();
        let config = load(
            "",
            &format!(
                "model = \"replay\"\ntrace = {:?}",
                path.display().to_string()
            ),
        )
        .unwrap();
        let trace = config.read_trace().unwrap();
        assert_eq!(trace.offsets_ns, [0, 100_000_000]);
        assert_eq!(trace.past_end, 1);
        assert!(!trace.has_requests, "the first line has no prompt");
        std::fs::write(&path, "{\"timestamp\": 5}\n{\"timestamp\": 4}\n").unwrap();
        let error = config.read_trace().unwrap_err();
        assert!(
            matches!(&error, ConfigError::Invalid { key, .. } if key == "workload.trace"),
            "{error}"
        );
        let error = error.to_string();
        assert!(
            error.contains("line 2") && error.contains("time order"),
            "{error}"
        );
        std::fs::write(&path, "{\"time\": 5}\n").unwrap();
        assert!(config
            .read_trace()
            .unwrap_err()
            .to_string()
            .contains("line 1: no `timestamp`"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
