//! The live view (issue 18 item 5): once a second, where the run is (phase, the fault's state),
//! what it sees (completed-only TTFT p50 and p99 of the last second) and whether the client is
//! keeping its own gate; a warning the moment the CPU the gate reads passes its limit, since the
//! run will then be invalid and there is still time to act. A redrawn block on a terminal, one
//! line a second otherwise, or JSON lines under `--progress json`.

use std::collections::VecDeque;

use super::Progress;

/// The fault's state as the journal has it so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum FaultState {
    /// No fault in this run.
    #[default]
    None,
    Armed,
    Fired,
    /// Removed or expired.
    Removed,
    Failed,
}

impl FaultState {
    pub fn name(self) -> &'static str {
        match self {
            FaultState::None => "none",
            FaultState::Armed => "armed",
            FaultState::Fired => "fired",
            FaultState::Removed => "removed",
            FaultState::Failed => "failed",
        }
    }

    /// Its code in [`super::Shared::fault_state`].
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(code: u8) -> FaultState {
        [
            FaultState::None,
            FaultState::Armed,
            FaultState::Fired,
            FaultState::Removed,
            FaultState::Failed,
        ]
        .into_iter()
        .find(|s| s.code() == code)
        .unwrap_or_default()
    }
}

/// One second as the telemetry thread saw it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Second {
    pub at_ns: u64,
    pub sent: u64,
    pub scheduled: u64,
    pub in_flight: u64,
    pub completed: u64,
    pub errored: u64,
    pub censored: u64,
    pub skew_p99_ns: u64,
    /// The largest send skew of the second's dispatches, ns.
    pub skew_max_ns: u64,
    /// How far behind schedule the slowest worker was at its worst in the second: the time
    /// since the intended time of the request it waited to send, at the telemetry thread's
    /// looks (every 50 ms at most), ns (0 when every worker was on time at each).
    pub behind_ns: u64,
    /// Requests the recorder reached only past their deadline, never sent (`client-late`), and
    /// any other undispatched, so far.
    pub client_late: u64,
    pub stall_p99_ns: u64,
    /// The host's busy share over the second (/proc/stat); `None` when it was not read.
    pub host_cpu: Option<f64>,
    /// The cgroup's share of its quota over the second, when it has one.
    pub cgroup_cpu: Option<f64>,
    pub fault: FaultState,
    /// TTFT of the requests that completed in the second, ns, sorted.
    pub ttft_ns: Vec<u64>,
}

/// The view's state from second to second.
pub(crate) struct LiveView {
    progress: Progress,
    tty: bool,
    /// Phase names and their ends, ns from the epoch.
    phases: Vec<(String, u64)>,
    /// G2.3's limit (a share) and window, ns.
    cpu_limit: f64,
    window_ns: u64,
    recent: VecDeque<(f64, u64)>,
    warned: bool,
    /// The client timeout and the dev time factor that divided it, for the censoring warning.
    timeout: (std::time::Duration, u32),
    censoring_warned: bool,
    /// G2.1's send-skew maximum, ns: behind schedule by more is said at once.
    behind_limit_ns: u64,
    /// Whether the current episode of falling behind has been said.
    behind_warned: bool,
    /// Lines of the block last drawn on the terminal (to redraw over).
    drawn: usize,
}

/// Censored requests, with none completed, after which the view says the target is not
/// answering within the timeout (enough that it is not one slow first request).
pub(crate) const CENSORED_BEFORE_WARNING: u64 = 10;

impl LiveView {
    pub fn new(
        progress: Progress,
        tty: bool,
        phases: Vec<(String, u64)>,
        cpu_limit: f64,
        window_ns: u64,
    ) -> LiveView {
        LiveView {
            progress,
            tty,
            phases,
            cpu_limit,
            window_ns,
            recent: VecDeque::new(),
            warned: false,
            timeout: (std::time::Duration::ZERO, 1),
            censoring_warned: false,
            behind_limit_ns: u64::MAX,
            behind_warned: false,
            drawn: 0,
        }
    }

    /// G2.1's send-skew maximum: a run behind schedule by more is said the second it is.
    pub fn with_behind_limit(mut self, limit: std::time::Duration) -> LiveView {
        self.behind_limit_ns = limit.as_nanos() as u64;
        self
    }

    /// The client timeout in force and the dev time factor (1 outside dev) that divided it.
    pub fn with_timeout(mut self, timeout: std::time::Duration, time_factor: u32) -> LiveView {
        self.timeout = (timeout, time_factor);
        self
    }

    /// The phase `at_ns` falls in (`done` after the last).
    pub fn phase(&self, at_ns: u64) -> &str {
        self.phases
            .iter()
            .find(|(_, end)| at_ns < *end)
            .map_or("done", |(name, _)| name.as_str())
    }

    /// Something else wrote to the terminal since the last block: the next block goes below
    /// it instead of over it, so no message is erased.
    pub fn interrupted(&mut self) {
        self.drawn = 0;
    }

    /// What to write to stderr for this second: the warning if the CPU the gate reads has just
    /// gone over its limit, then the status (nothing under `Quiet`).
    pub fn render(&mut self, s: &Second, interval_ns: u64) -> String {
        let warnings: Vec<String> = [
            self.behind_warning(s),
            self.cpu_warning(s, interval_ns),
            self.censoring_warning(s),
        ]
        .into_iter()
        .flatten()
        .collect();
        let warning = (!warnings.is_empty()).then(|| warnings.join("\n"));
        match self.progress {
            Progress::Quiet => warning.map(|w| format!("{w}\n")).unwrap_or_default(),
            Progress::Json => {
                let mut out = String::new();
                if let Some(w) = warning {
                    out.push_str(&serde_json::json!({ "warning": w }).to_string());
                    out.push('\n');
                }
                out.push_str(&self.json(s).to_string());
                out.push('\n');
                out
            }
            Progress::Human => {
                let mut out = String::new();
                if self.tty && self.drawn > 0 {
                    // Back over the last block, and clear it.
                    out.push_str(&format!("\x1b[{}A\r\x1b[J", self.drawn));
                }
                if let Some(w) = warning {
                    out.push_str(&w);
                    out.push('\n');
                }
                let block = self.human(s);
                self.drawn = if self.tty { block.lines().count() } else { 0 };
                out.push_str(&block);
                out
            }
        }
    }

    /// The gate's reading (the cgroup's share of its quota where there is one, else the host's)
    /// as a mean over the last window; a warning the first second it passes the limit, again
    /// only after it has come back under.
    fn cpu_warning(&mut self, s: &Second, interval_ns: u64) -> Option<String> {
        let (share, which) = match (s.cgroup_cpu, s.host_cpu) {
            (Some(c), _) => (c, "the recorder's cgroup CPU (of its quota)"),
            (None, Some(host)) => (host, "host CPU"),
            // A second not read says nothing of the mean; the journal marks it.
            (None, None) => return None,
        };
        self.recent.push_back((share, interval_ns.max(1)));
        while self.recent.len() > 1
            && self.recent.iter().map(|(_, i)| i).sum::<u64>() - self.recent[0].1 >= self.window_ns
        {
            self.recent.pop_front();
        }
        let span: u64 = self.recent.iter().map(|(_, i)| i).sum();
        let mean = self.recent.iter().map(|(c, i)| c * *i as f64).sum::<f64>() / span as f64;
        let over = span >= self.window_ns && mean > self.cpu_limit;
        if !over {
            self.warned = false;
            return None;
        }
        if std::mem::replace(&mut self.warned, true) {
            return None;
        }
        Some(format!(
            "percentes: WARNING: {which} is {:.0} % over the last {:.0} s, above G2.3's {:.0} % limit: this run will fail the client gate and publish nothing (SPEC §2). Move the target and any other load off this machine, or give the recorder more CPU, and record again",
            mean * 100.0,
            self.window_ns as f64 / 1e9,
            self.cpu_limit * 100.0
        ))
    }

    /// The first second of each episode in which a worker is behind schedule by more than
    /// G2.1's maximum skew (or has given requests up as `client-late`): the run will fail its
    /// client gate, and the cause is the client, not the target.
    fn behind_warning(&mut self, s: &Second) -> Option<String> {
        if s.behind_ns < self.behind_limit_ns {
            self.behind_warned = false;
            return None;
        }
        if std::mem::replace(&mut self.behind_warned, true) {
            return None;
        }
        Some(format!(
            "percentes: WARNING: the recorder is behind schedule by {:.3} s: requests that were due have not been sent (its CPU is busy with other work, throttled, or it was stopped). This run will fail G2 (SPEC §2); the lateness is the client's, not the target's",
            s.behind_ns as f64 / 1e9
        ))
    }

    /// Once: every request that has finished was censored, none completed. At a high dev time
    /// factor that is the divided timeout, not the target (issue 18).
    fn censoring_warning(&mut self, s: &Second) -> Option<String> {
        if self.censoring_warned || s.completed > 0 || s.censored < CENSORED_BEFORE_WARNING {
            return None;
        }
        self.censoring_warned = true;
        let (timeout, factor) = self.timeout;
        let advice = if factor > 1 {
            format!("the dev profile divides the timeout by its time factor ({factor}): record with a smaller one, or make sure the target answers within {:.3} s", timeout.as_secs_f64())
        } else {
            "check that the target answers (its URL, model and load)".to_owned()
        };
        Some(format!(
            "percentes: WARNING: all {} requests that have finished were censored, none completed: nothing answered within the client timeout of {:.3} s, so the run will have no latency to report; {advice}",
            s.censored,
            timeout.as_secs_f64()
        ))
    }

    fn human(&self, s: &Second) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let ttft = match (quantile(&s.ttft_ns, 0.5), quantile(&s.ttft_ns, 0.99)) {
            (Some(p50), Some(p99)) => format!(
                "TTFT last 1 s p50 {:.1} ms, p99 {:.1} ms ({} completed)",
                ms(p50),
                ms(p99),
                s.ttft_ns.len()
            ),
            _ => "TTFT last 1 s: none completed".into(),
        };
        let host = match s.host_cpu {
            Some(h) => format!("{:.0} %", h * 100.0),
            None => "not read".into(),
        };
        let cpu = match s.cgroup_cpu {
            Some(c) => format!("cgroup CPU {:.0} % of quota, host {host}", c * 100.0),
            None => format!("host CPU {host}"),
        };
        let fault = match s.fault {
            FaultState::None => String::new(),
            state => format!(", fault {}", state.name()),
        };
        let mut send = format!(
            "skew p99 {:.2} ms, max {:.2} ms",
            ms(s.skew_p99_ns),
            ms(s.skew_max_ns)
        );
        if s.behind_ns >= self.behind_limit_ns {
            send = format!(
                "BEHIND SCHEDULE by {:.3} s; {send}",
                s.behind_ns as f64 / 1e9
            );
        }
        if s.client_late > 0 {
            send.push_str(&format!(", {} never sent (client late)", s.client_late));
        }
        format!(
            "[{:>7.1} s] {}{fault}: sent {}/{}, in flight {}, completed {}, errored {}, censored {}\n           {ttft}; {send}, stall p99 {:.2} ms, {cpu}\n",
            s.at_ns as f64 / 1e9,
            self.phase(s.at_ns),
            s.sent,
            s.scheduled,
            s.in_flight,
            s.completed,
            s.errored,
            s.censored,
            ms(s.stall_p99_ns),
        )
    }

    fn json(&self, s: &Second) -> serde_json::Value {
        serde_json::json!({
            "at_ns": s.at_ns, "phase": self.phase(s.at_ns), "fault": s.fault.name(),
            "sent": s.sent, "scheduled": s.scheduled, "in_flight": s.in_flight,
            "completed": s.completed, "errored": s.errored, "censored": s.censored,
            "ttft_completed_last_s": s.ttft_ns.len(),
            "ttft_p50_ns": quantile(&s.ttft_ns, 0.5), "ttft_p99_ns": quantile(&s.ttft_ns, 0.99),
            "skew_p99_ns": s.skew_p99_ns, "skew_max_ns": s.skew_max_ns,
            "behind_ns": s.behind_ns, "client_late": s.client_late,
            "stall_p99_ns": s.stall_p99_ns,
            "host_cpu_busy_ppm": s.host_cpu.map(|h| (h * 1e6).round() as u64),
            "cgroup_cpu_of_quota_ppm": s.cgroup_cpu.map(|c| (c * 1e6).round() as u64),
        })
    }
}

/// Nearest-rank quantile of sorted values; `None` when empty.
fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn view(progress: Progress, tty: bool) -> LiveView {
        LiveView::new(
            progress,
            tty,
            vec![("warmup".into(), 2 * S), ("measurement".into(), 10 * S)],
            0.7,
            5 * S,
        )
    }

    fn second(at: u64, host: f64) -> Second {
        Second {
            at_ns: at * S,
            sent: at * 10,
            scheduled: 100,
            host_cpu: Some(host),
            ttft_ns: vec![200_000_000, 210_000_000, 250_000_000],
            fault: FaultState::Fired,
            ..Second::default()
        }
    }

    #[test]
    fn the_line_shows_phase_fault_and_last_second_ttft() {
        let mut v = view(Progress::Human, false);
        let text = v.render(&second(1, 0.1), S);
        assert!(
            text.starts_with("[    1.0 s] warmup, fault fired: sent 10/100"),
            "{text}"
        );
        assert!(
            text.contains("TTFT last 1 s p50 210.0 ms, p99 250.0 ms (3 completed)"),
            "{text}"
        );
        assert_eq!(v.phase(5 * S), "measurement");
        assert_eq!(v.phase(10 * S), "done");
        let none = Second {
            ttft_ns: vec![],
            ..second(3, 0.1)
        };
        assert!(v.render(&none, S).contains("TTFT last 1 s: none completed"));
        let json: serde_json::Value = serde_json::from_str(
            view(Progress::Json, false)
                .render(&second(3, 0.25), S)
                .trim(),
        )
        .unwrap();
        assert_eq!(json["phase"], "measurement");
        assert_eq!(json["fault"], "fired");
        assert_eq!(json["ttft_p50_ns"], 210_000_000);
        assert_eq!(json["ttft_p99_ns"], 250_000_000);
        assert_eq!(json["host_cpu_busy_ppm"], 250_000);
    }

    /// Hand-computed: 5 s at 80 % is a mean of 80 % > 70 %: warned once, on the fifth second;
    /// not again while it stays over; again after a window back under.
    #[test]
    fn a_cpu_over_the_gate_warns_once_per_episode_and_names_what_to_do() {
        let mut v = view(Progress::Quiet, false);
        let warnings: Vec<bool> = (1..=12)
            .map(|t| {
                let host = if t <= 7 || t >= 11 { 0.8 } else { 0.1 };
                !v.render(&second(t, host), S).is_empty()
            })
            .collect();
        // Seconds 1-4: under a window; 5: first full window at 80 %; 6-7: still over, said
        // once; 8-10: the mean falls under (8: 0.8 x 4 + 0.1 = 3.3 / 5 = 66 %); 11-12 rise again
        // but stay under until a window's mean passes 70 % (12: 0.1 x 3 + 0.8 x 2 = 38 %).
        assert_eq!(
            warnings,
            [false, false, false, false, true, false, false, false, false, false, false, false]
        );
        let mut v = view(Progress::Human, false);
        let text: String = (1..=5).map(|t| v.render(&second(t, 0.9), S)).collect();
        assert!(
            text.contains("host CPU is 90 % over the last 5 s, above G2.3's 70 % limit")
                && text.contains("Move the target and any other load off this machine"),
            "{text}"
        );
        // The cgroup's share is what the gate reads where there is a quota.
        let mut v = view(Progress::Quiet, false);
        let text: String = (1..=5)
            .map(|t| {
                v.render(
                    &Second {
                        cgroup_cpu: Some(0.95),
                        ..second(t, 0.1)
                    },
                    S,
                )
            })
            .collect();
        assert!(
            text.contains("the recorder's cgroup CPU (of its quota) is 95 %"),
            "{text}"
        );
    }

    #[test]
    fn all_requests_censored_warns_once_with_the_divided_timeout() {
        let mut v =
            view(Progress::Quiet, false).with_timeout(std::time::Duration::from_millis(300), 100);
        let at = |censored: u64, completed: u64| Second {
            censored,
            completed,
            ..second(1, 0.1)
        };
        assert_eq!(v.render(&at(CENSORED_BEFORE_WARNING - 1, 0), S), "");
        let text = v.render(&at(CENSORED_BEFORE_WARNING, 0), S);
        assert!(
            text.contains("all 10 requests that have finished were censored")
                && text.contains("client timeout of 0.300 s")
                && text.contains("time factor (100)"),
            "{text}"
        );
        assert_eq!(v.render(&at(50, 0), S), "", "said once");
        let mut answering = view(Progress::Quiet, false);
        assert_eq!(
            answering.render(&at(20, 1), S),
            "",
            "one completion: the target answers"
        );
    }

    /// A worker behind schedule (nothing sent, requests due) is said the second it is, in
    /// the line and once as a warning per episode, blaming the client; under JSON too.
    #[test]
    fn falling_behind_is_said_at_once_and_blames_the_client() {
        let limit = std::time::Duration::from_millis(50);
        let mut v = view(Progress::Human, false).with_behind_limit(limit);
        let on_time = v.render(&second(1, 0.1), S);
        assert!(
            !on_time.contains("BEHIND") && !on_time.contains("WARNING"),
            "{on_time}"
        );
        let frozen = Second {
            behind_ns: 2_500_000_000,
            client_late: 3,
            ..second(2, 0.1)
        };
        let text = v.render(&frozen, S);
        assert!(
            text.contains("the recorder is behind schedule by 2.500 s")
                && text.contains("the client's, not the target's")
                && text.contains("BEHIND SCHEDULE by 2.500 s; skew p99 0.00 ms")
                && text.contains("3 never sent (client late)"),
            "{text}"
        );
        let again = v.render(
            &Second {
                behind_ns: 3 * S,
                ..second(3, 0.1)
            },
            S,
        );
        assert!(
            !again.contains("WARNING") && again.contains("BEHIND SCHEDULE by 3.000 s"),
            "{again}"
        );
        assert!(!v.render(&second(4, 0.1), S).contains("BEHIND"));
        assert!(
            v.render(&frozen, S).contains("WARNING"),
            "a new episode is said again"
        );
        let mut json = view(Progress::Json, false).with_behind_limit(limit);
        let lines = json.render(&frozen, S);
        let last: serde_json::Value =
            serde_json::from_str(lines.trim().lines().last().unwrap()).unwrap();
        assert_eq!(last["behind_ns"], 2_500_000_000u64);
        assert_eq!(last["client_late"], 3);
        assert!(lines.contains("\"warning\""), "{lines}");
    }

    #[test]
    fn a_terminal_block_is_redrawn_in_place() {
        let mut v = view(Progress::Human, true);
        let first = v.render(&second(1, 0.1), S);
        assert!(!first.contains('\x1b'), "nothing to draw over yet");
        let next = v.render(&second(2, 0.1), S);
        assert!(next.starts_with("\x1b[2A\r\x1b[J[    2.0 s]"), "{next:?}");
        // A message from elsewhere in between is never drawn over.
        v.interrupted();
        assert!(!v.render(&second(3, 0.1), S).contains('\x1b'));
        let mut plain = view(Progress::Human, false);
        plain.render(&second(1, 0.1), S);
        assert!(!plain.render(&second(2, 0.1), S).contains('\x1b'));
    }
}
