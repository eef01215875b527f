//! `percentes doctor` (issue 32 item 6): a few seconds' look at this host before a run, to say
//! whether the client gate's pins (SPEC §2, G2) can hold here and what to change when they
//! cannot. It measures what the gate will read, the way the recorder reads it: the wake lateness
//! of a 1 ms ticker on an io_uring ring set up as each worker's (G2.4, and the floor of G2.1's
//! skew), the host's busy share and the hypervisor's steal (G2.3), the load on each CPU the
//! recorder may use (or is pinned to), and the CPU quota of its control group.
//!
//! It predicts; it does not gate. A host that passes here can still be loaded during the run
//! (the run's own gate reads the run), and one that fails here can be quiet later.

use std::time::Duration;

use percentes_formats::pins;

use super::cgroup;
use super::dispatch::tick_lateness;
use super::dispatch::STALL_TICK;
use super::host::allowed_cpus;
use super::pacer::{deferred_task_work_available, io_uring_usable, ring_setup};
use super::telemetry::quantile;
use crate::error::{io, RecordError};
use crate::run::host::{self, cpu_list};
use crate::run::pacer;

/// What a look at the host found.
#[derive(Clone, Debug)]
pub struct Examination {
    /// How long it looked.
    pub duration: Duration,
    /// The CPUs this process may use.
    pub allowed: Vec<usize>,
    /// The CPUs asked for (`--cpus`), when any: the ticker ran pinned to the first.
    pub pinned: Option<Vec<usize>>,
    /// The 1 ms ticker's wake lateness, ns: p50, p99, max, and the ticks counted.
    pub wake_ns: (u64, u64, u64, u64),
    /// The host's busy share over the look (/proc/stat, all CPUs), and the steal share.
    pub host_busy: f64,
    /// The share of CPU time the hypervisor took (steal).
    pub steal: f64,
    /// Busy share of each CPU the recorder may use, over the look.
    pub per_cpu: Vec<(usize, f64)>,
    /// The control group's CPU quota, in CPUs, when it has one; and its fact in words.
    pub quota_cpus: Option<f64>,
    /// The cgroup as the journal's host fact states it.
    pub cgroup: String,
    /// The control group's CPU weight and the kernel's default for it, when read.
    pub weight: Option<(u64, u64)>,
}

/// A CPU busier than this share (with work other than the look's own ticker) is named busy.
pub const BUSY_CPU_SHARE: f64 = 0.5;

/// A wake floor at or above this share of G2.4's limit is named a risk: the run's own work comes
/// on top of it.
pub const WAKE_RISK_SHARE_OF_LIMIT: f64 = 0.5;

/// A steal share above this, in percent, is named: the hypervisor takes CPU from the recorder
/// at random moments.
pub const STEAL_RISK_PERCENT: f64 = 5.0;

/// Looks at the host for `duration`, with the ticker pinned to the first of `cpus` when given.
pub fn examine(duration: Duration, cpus: Option<&[usize]>) -> Result<Examination, RecordError> {
    io_uring_usable()?;
    let allowed = allowed_cpus();
    if let Some(cpus) = cpus {
        check_cpus(cpus, &allowed)?;
    }
    let cgroup = cgroup::Cgroup::discover(std::path::Path::new("/"));
    let (quota_cpus, cgroup_fact) = match &cgroup {
        Ok(c) => (
            match c.quota() {
                (0, _) => None,
                (q, p) => Some(q as f64 / p.max(1) as f64),
            },
            c.fact(),
        ),
        Err(why) => (None, format!("not read: {why}")),
    };
    let weight = cgroup.as_ref().ok().and_then(cgroup::Cgroup::weight);
    let before = per_cpu_jiffies();
    let host_before = host_jiffies();
    let mut runtime = compio::runtime::Runtime::builder();
    runtime.with_proactor(ring_setup(deferred_task_work_available()));
    if let Some(first) = cpus.and_then(|c| c.first()) {
        runtime.thread_affinity(std::collections::HashSet::from([*first]));
    }
    let runtime = runtime
        .build()
        .map_err(io("cannot start an io_uring runtime"))?;
    let mut late = runtime.block_on(async {
        let period_ns = STALL_TICK.as_nanos() as u64;
        let start = host::monotonic_now_ns();
        let end = start + duration.as_nanos() as u64;
        let mut deadline = start + period_ns;
        let mut late = Vec::new();
        while deadline < end {
            pacer::sleep_until_monotonic(deadline).await;
            let by = host::monotonic_now_ns().saturating_sub(deadline);
            late.extend(tick_lateness(by, period_ns));
            deadline += period_ns * (by / period_ns + 1);
        }
        late
    });
    drop(runtime);
    late.sort_unstable();
    let after = per_cpu_jiffies();
    let host_after = host_jiffies();
    let share = |(b0, t0): (u64, u64), (b1, t1): (u64, u64)| {
        if t1 > t0 {
            (b1.saturating_sub(b0)) as f64 / (t1 - t0) as f64
        } else {
            0.0
        }
    };
    let per_cpu = allowed
        .iter()
        .filter_map(|cpu| {
            let b = before.iter().find(|(c, _)| c == cpu)?.1;
            let a = after.iter().find(|(c, _)| c == cpu)?.1;
            Some((*cpu, share((b.0, b.1), (a.0, a.1))))
        })
        .collect();
    let (host_busy, steal) = match (host_before, host_after) {
        (Some(b), Some(a)) => (share((b.0, b.1), (a.0, a.1)), share((b.2, b.1), (a.2, a.1))),
        _ => (0.0, 0.0),
    };
    Ok(Examination {
        duration,
        allowed,
        pinned: cpus.map(<[usize]>::to_vec),
        wake_ns: (
            quantile(&late, 0.5),
            quantile(&late, 0.99),
            late.last().copied().unwrap_or(0),
            late.len() as u64,
        ),
        host_busy,
        steal,
        per_cpu,
        quota_cpus,
        cgroup: cgroup_fact,
        weight,
    })
}

/// Refuses CPUs this process may not run on, naming them and the ones it may.
pub(super) fn check_cpus(cpus: &[usize], allowed: &[usize]) -> Result<(), RecordError> {
    let refused: Vec<String> = cpus
        .iter()
        .filter(|c| !allowed.contains(c))
        .map(ToString::to_string)
        .collect();
    if cpus.is_empty() || !refused.is_empty() {
        return Err(RecordError::host(format!(
            "--cpus names CPU {}, which this process may not use; it may use CPUs {}",
            if refused.is_empty() {
                "(none)".into()
            } else {
                refused.join(", ")
            },
            cpu_list(allowed)
        )));
    }
    Ok(())
}

/// /proc/stat's per-CPU lines: (cpu, (busy, total)) jiffies.
fn per_cpu_jiffies() -> Vec<(usize, (u64, u64))> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cpu")?;
            let (cpu, fields) = rest.split_once(' ')?;
            let cpu: usize = cpu.parse().ok()?;
            let (busy, total, _) = jiffies(fields);
            Some((cpu, (busy, total)))
        })
        .collect()
}

/// /proc/stat's aggregate line: (busy, total, steal) jiffies.
fn host_jiffies() -> Option<(u64, u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields = stat.lines().next()?.strip_prefix("cpu ")?;
    Some(jiffies(fields))
}

/// (busy, total, steal) of one /proc/stat line's numbers: user nice system idle iowait irq
/// softirq steal (guest time is already in user).
fn jiffies(fields: &str) -> (u64, u64, u64) {
    let n: Vec<u64> = fields
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let at = |i: usize| n.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(at).sum();
    (total.saturating_sub(at(3) + at(4)), total, at(7))
}

impl Examination {
    /// What stands in the way of the G2 pins here, each with what to change; empty when
    /// nothing does.
    pub fn risks(&self) -> Vec<String> {
        let mut out = Vec::new();
        let stall_limit_ns = pins::value::GATES_RUNTIME_STALL_P99_US as u64 * 1_000;
        let (_, p99, _, _) = self.wake_ns;
        if p99 as f64 >= stall_limit_ns as f64 * WAKE_RISK_SHARE_OF_LIMIT {
            out.push(format!(
                "the timer wakes late: p99 {:.3} ms with nothing else to do, against G2.4's {} us limit for the whole run. Give the recorder a quiet CPU (`--cpus` with one that other work leaves alone) or a less loaded host",
                p99 as f64 / 1e6,
                pins::value::GATES_RUNTIME_STALL_P99_US
            ));
        }
        let cpu_limit = pins::value::GATES_HOST_CPU_MAX_PERCENT as f64 / 100.0;
        if self.host_busy > cpu_limit {
            out.push(format!(
                "the host is {:.0} % busy before any load, above G2.3's {} % limit: move the target and other work to another machine",
                self.host_busy * 100.0,
                pins::value::GATES_HOST_CPU_MAX_PERCENT
            ));
        }
        if self.steal * 100.0 > STEAL_RISK_PERCENT {
            out.push(format!(
                "the hypervisor took {:.1} % of this VM's CPU time (steal): the recorder loses the CPU at random moments; use a host with dedicated cores",
                self.steal * 100.0
            ));
        }
        let busy: Vec<String> = self
            .per_cpu
            .iter()
            .filter(|(_, s)| *s > BUSY_CPU_SHARE)
            .map(|(c, s)| format!("CPU {c} {:.0} %", s * 100.0))
            .collect();
        if let Some(cpus) = &self.pinned {
            let pinned_busy: Vec<String> = self
                .per_cpu
                .iter()
                .filter(|(c, s)| cpus.contains(c) && *s > BUSY_CPU_SHARE)
                .map(|(c, s)| format!("CPU {c} is {:.0} % busy", s * 100.0))
                .collect();
            if !pinned_busy.is_empty() {
                out.push(format!(
                    "{} with other work, and a worker pinned there cannot move off it: choose another with --cpus, or leave the workers unpinned",
                    pinned_busy.join(", ")
                ));
            }
        } else if !busy.is_empty() && busy.len() == self.per_cpu.len() {
            out.push(format!(
                "every CPU the recorder may use is busy ({}): free one for it",
                busy.join(", ")
            ));
        }
        let contended = self.per_cpu.iter().any(|(_, s)| *s > BUSY_CPU_SHARE);
        if let Some((weight, default)) = self.weight.filter(|(w, d)| w <= d && contended) {
            out.push(format!(
                "the recorder's control group has CPU weight {weight} (the default is {default}) while other work keeps a CPU it may use busy: tasks of equal weight take the CPU from it when they compete (issue 52: a placed recorder read G2.4 4.5 ms so); raise its weight (`scenario run` with [testbed.placement] sets the most the kernel allows) or move the other work"
            ));
        }
        if let Some(q) = self.quota_cpus {
            if q < 1.0 {
                out.push(format!(
                    "the recorder's control group may use {q:.2} CPUs: a quota below one CPU throttles each worker in every period; give it at least one"
                ));
            }
        }
        out
    }

    /// The report, a line each: what was measured, then the verdict and what to change.
    pub fn lines(&self) -> Vec<String> {
        let ms = |ns: u64| ns as f64 / 1e6;
        let (p50, p99, max, ticks) = self.wake_ns;
        let mut out = vec![
            format!(
                "percentes doctor: {:.1} s on this host; the recorder may use CPUs {}{}",
                self.duration.as_secs_f64(),
                cpu_list(&self.allowed),
                match &self.pinned {
                    Some(c) => format!(", pinned to {} as asked", cpu_list(c)),
                    None => String::new(),
                }
            ),
            format!(
                "  timer wake (a 1 ms ticker on an io_uring ring, as each worker runs one; {ticks} ticks): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms; G2.4 needs the run's p99 under {} us",
                ms(p50),
                ms(p99),
                ms(max),
                pins::value::GATES_RUNTIME_STALL_P99_US
            ),
            format!(
                "  host CPU {:.0} % busy, steal {:.1} %; G2.3 fails a run above {} % over {} s",
                self.host_busy * 100.0,
                self.steal * 100.0,
                pins::value::GATES_HOST_CPU_MAX_PERCENT,
                pins::value::GATES_HOST_CPU_WINDOW_S
            ),
            format!(
                "  per CPU: {}",
                self.per_cpu
                    .iter()
                    .map(|(c, s)| format!("CPU {c} {:.0} %", s * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "  cgroup: {}; CPU weight {}",
                self.cgroup,
                self.weight.map_or("not read".into(), |(w, d)| format!(
                    "{w} (default {d})"
                ))
            ),
        ];
        let risks = self.risks();
        if risks.is_empty() {
            out.push(
                "verdict: the client gate's pins (SPEC §2, G2) can hold here, as far as a quiet look can tell; the run's own gate decides".into(),
            );
        } else {
            out.push(format!(
                "verdict: a run here is likely to fail its client gate (SPEC §2, G2) and publish nothing; {} thing(s) to change:",
                risks.len()
            ));
            out.extend(risks.into_iter().map(|r| format!("  - {r}")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet() -> Examination {
        Examination {
            duration: Duration::from_secs(1),
            allowed: vec![0, 1],
            pinned: None,
            wake_ns: (60_000, 200_000, 900_000, 1_000),
            host_busy: 0.1,
            steal: 0.0,
            per_cpu: vec![(0, 0.1), (1, 0.1)],
            quota_cpus: None,
            cgroup: "v2 /: no CPU quota".into(),
            weight: Some((100, 100)),
        }
    }

    #[test]
    fn a_quiet_host_has_no_risk_and_says_so() {
        let e = quiet();
        assert!(e.risks().is_empty());
        assert!(e.lines().last().unwrap().contains("can hold here"));
    }

    /// Each risk is named with what to change: a late timer, a busy host, steal, a busy pinned
    /// CPU, every CPU busy, a quota under one CPU.
    #[test]
    fn every_risk_names_what_to_change() {
        let late = Examination {
            wake_ns: (300_000, 600_000, 5_000_000, 1_000),
            ..quiet()
        };
        assert!(late.risks()[0].contains("--cpus"), "{:?}", late.risks());
        let busy = Examination {
            host_busy: 0.9,
            steal: 0.2,
            per_cpu: vec![(0, 0.95), (1, 0.85)],
            quota_cpus: Some(0.5),
            ..quiet()
        };
        let risks = busy.risks().join("\n");
        for needle in ["90 % busy", "steal", "every CPU", "0.50 CPUs"] {
            assert!(risks.contains(needle), "{needle}: {risks}");
        }
        let pinned = Examination {
            pinned: Some(vec![0]),
            per_cpu: vec![(0, 0.95), (1, 0.05)],
            ..quiet()
        };
        let risks = pinned.risks().join("\n");
        assert!(
            risks.contains("CPU 0 is 95 % busy") && risks.contains("cannot move off it"),
            "{risks}"
        );
        assert!(pinned.lines()[0].contains("pinned to 0 as asked"));
        assert!(pinned.lines().last().unwrap().starts_with("  - "));
        // Issue 52: a default weight is a risk only where other work contends for a CPU.
        assert!(
            risks.contains("CPU weight 100 (the default is 100)"),
            "{risks}"
        );
        let weighty = Examination {
            weight: Some((10_000, 100)),
            ..pinned.clone()
        };
        assert!(!weighty.risks().join("\n").contains("CPU weight"));
        assert!(weighty
            .lines()
            .iter()
            .any(|l| l.contains("CPU weight 10000 (default 100)")));
    }

    #[test]
    fn cpu_lists_and_refused_cpus_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(cpu_list(&[5]), "5");
        let refused = check_cpus(&[1, 7], &[0, 1]).unwrap_err().to_string();
        assert!(
            refused.contains("CPU 7") && refused.contains("may use CPUs 0-1"),
            "{refused}"
        );
        assert!(check_cpus(&[], &[0]).is_err());
        assert!(check_cpus(&[1], &[0, 1]).is_ok());
        assert_eq!(jiffies("10 0 5 80 5 0 0 3 0 0"), (18, 103, 3));
    }

    /// On this machine the look runs: a ticker that ticked, shares within [0, 1].
    #[test]
    fn the_look_measures_this_host() {
        let e = examine(Duration::from_millis(200), None).unwrap();
        assert!(e.wake_ns.3 >= 150, "{:?}", e.wake_ns);
        assert!((0.0..=1.0).contains(&e.host_busy) && (0.0..=1.0).contains(&e.steal));
        assert_eq!(e.per_cpu.len(), e.allowed.len());
        let first = e.allowed[0];
        let pinned = examine(Duration::from_millis(50), Some(&[first])).unwrap();
        assert_eq!(pinned.pinned, Some(vec![first]));
    }
}
