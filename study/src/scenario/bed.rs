//! The testbed side of a scenario: `[testbed]` and its orchestrator, the mock testbed or the one
//! on real parts ([`crate::realbed`]), and the orchestrator's replacement on mocks.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{bail, Context, Result, StudyError};
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;
use percentes_scenarios::testbed::Testbed;

/// `[testbed]`: the local stand-in for the cluster.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedPlan {
    #[serde(default = "two")]
    /// Replicas the testbed starts.
    pub replicas: usize,
    /// Replicas in network namespaces (root, iproute2, iptables): needed for a black-hole. Real
    /// replicas so placed listen on their namespace's address (their command's `{host}`).
    #[serde(default)]
    pub isolated: bool,
    /// Each mock replica is built to serve exactly this many requests per second; the run's
    /// `calibration.lambda_max_rps` is set to it. With real replicas, the calibration's
    /// lambda_max on this host (`percentes calibrate`).
    pub capacity_rps: f64,
    /// With real replicas, the calibration's capacity probe, ms (`calibration.probe_ms`,
    /// SPEC §10 "Capacity check"): each run's probe is checked against it.
    #[serde(default)]
    pub probe_ms: Option<f64>,
    /// With real replicas, the calibration's throughput ceiling at the survivor's load and the
    /// rate that step offered, rps (`calibration.ceiling_rps`, `ceiling_offered_rps`).
    #[serde(default)]
    pub ceiling_rps: Option<f64>,
    /// The rate the ceiling's step offered, rps.
    #[serde(default)]
    pub ceiling_offered_rps: Option<f64>,
    /// What plays the control plane after the fault.
    pub orchestrator: OrchestratorPlan,
    /// The mocks' slowdown under a `cpu-throttle` (default 4).
    #[serde(default)]
    pub throttle_factor: Option<f64>,
    /// Real replica processes instead of the mock ([`crate::realbed`]); they need `proxy`.
    #[serde(default)]
    pub replica: Option<crate::realbed::ReplicaPlan>,
    /// The layer-7 proxy in front of real replicas (instead of `percentes router`).
    #[serde(default)]
    pub proxy: Option<crate::realbed::ProxyPlan>,
    /// The target's processes and the recorder on separate CPUs ([`crate::placement`]).
    #[serde(default)]
    pub placement: Option<crate::placement::PlacementPlan>,
    /// Real replicas addressed by name: a DNS server of the testbed's serves each one's SRV
    /// record, and a replacement comes back on a new port ([`crate::realbed::NamesPlan`]).
    #[serde(default)]
    pub names: Option<crate::realbed::NamesPlan>,
    /// Real replicas of one release replaced by another's under load, one at a time
    /// ([`crate::realbed::rollout`]).
    #[serde(default)]
    pub rollout: Option<crate::realbed::RolloutPlan>,
    /// The proxy in front of real replicas killed under load and started again
    /// ([`crate::realbed::failover`]).
    #[serde(default)]
    pub proxy_failover: Option<crate::realbed::failover::FailoverPlan>,
    /// A second real replica started under overload ([`crate::realbed::scale_out`]).
    #[serde(default)]
    pub scale_out: Option<crate::realbed::scale_out::ScaleOutPlan>,
}

fn two() -> usize {
    2
}

impl TestbedPlan {
    /// The run configuration's `[calibration]` keys (after its header): the capacity, and with
    /// real replicas what their calibration measured beside it.
    pub(super) fn calibration_lines(&self) -> String {
        let mut lines = match self.replica {
            None => "# The testbed's mocks are built to this capacity.\n".to_owned(),
            Some(_) => {
                "# This host's calibration (`percentes calibrate`; README \"Calibrate first\").\n"
                    .to_owned()
            }
        };
        lines.push_str(&format!("lambda_max_rps = {}\n", self.capacity_rps));
        for (key, value) in [
            ("probe_ms", self.probe_ms),
            ("ceiling_rps", self.ceiling_rps),
            ("ceiling_offered_rps", self.ceiling_offered_rps),
        ] {
            if let Some(value) = value {
                lines.push_str(&format!("{key} = {value}\n"));
            }
        }
        lines
    }

    /// Every number the runner turns into a process count, a rate or a sleep, in range.
    pub(super) fn check(&self) -> Result<()> {
        let finite_in = |key: &str, v: f64, low: f64, high: f64| {
            if v.is_finite() && (low..=high).contains(&v) {
                Ok(())
            } else {
                Err(StudyError::refused(format!(
                    "{key} = {v} must lie in {low}..={high}"
                )))
            }
        };
        if !(1..=percentes_scenarios::testbed::ISOLATED_REPLICAS_MAX).contains(&self.replicas) {
            bail!(
                "replicas = {} must lie in 1..={}",
                self.replicas,
                percentes_scenarios::testbed::ISOLATED_REPLICAS_MAX
            );
        }
        finite_in("capacity_rps", self.capacity_rps, 0.1, 10_000.0)?;
        for (key, value) in [
            ("probe_ms", self.probe_ms),
            ("ceiling_rps", self.ceiling_rps),
            ("ceiling_offered_rps", self.ceiling_offered_rps),
        ] {
            if let Some(value) = value {
                finite_in(key, value, 0.001, 1e9)?;
            }
        }
        if let Some(t) = self.throttle_factor {
            finite_in("throttle_factor", t, 1.0, 100.0)?;
        }
        self.check_real_parts()?;
        if let OrchestratorPlan::Replace {
            detection_s,
            reschedule_s,
            weight_load_s,
        } = self.orchestrator
        {
            for (key, v) in [
                ("orchestrator.detection_s", detection_s),
                ("orchestrator.reschedule_s", reschedule_s),
                ("orchestrator.weight_load_s", weight_load_s),
            ] {
                finite_in(key, v, 0.0, 3600.0)?;
            }
        }
        Ok(())
    }
}

impl TestbedPlan {
    /// Whether the run's change under test is the testbed's own (a rollout, a proxy failover, a
    /// scale-out): the run has no fault of its own.
    pub(super) fn changes_itself(&self) -> bool {
        self.rollout.is_some() || self.proxy_failover.is_some() || self.scale_out.is_some()
    }

    /// The measurement's real length a testbed change states (`dev.measure_s`), if it does.
    pub(super) fn measure_s(&self) -> Option<f64> {
        let rollout = self.rollout.as_ref().and_then(|r| r.measure_s);
        rollout.or(self.scale_out.as_ref().and_then(|s| s.measure_s))
    }

    /// The replicas HAProxy declares out of service for the change to start: the rollout's
    /// next release (as many as serve), or the scale-out's one.
    fn standby(&self) -> usize {
        match (&self.rollout, &self.scale_out) {
            (Some(_), _) => self.replicas,
            (None, Some(_)) => 1,
            (None, None) => 0,
        }
    }

    /// Real replicas come with a real proxy and a supervisor, mocks with neither; placement
    /// places real processes only.
    fn check_real_parts(&self) -> Result<()> {
        match (&self.replica, &self.proxy) {
            (Some(replica), Some(_)) => replica.check()?,
            (None, None) => {}
            (Some(_), None) => bail!("[testbed.replica] needs [testbed.proxy] (kind = \"haproxy\"): real replicas are reached through a real proxy"),
            (None, Some(_)) => bail!("[testbed.proxy] fronts real replicas: it needs [testbed.replica]"),
        }
        let real = self.replica.is_some();
        let supervised = matches!(self.orchestrator, OrchestratorPlan::Supervise { .. });
        if real && self.throttle_factor.is_some() {
            bail!("throttle_factor is the mock testbed's; real replicas take none");
        }
        if let (Some(replica), true) = (&self.replica, self.isolated) {
            if !replica.command.iter().any(|a| a.contains("{host}")) {
                bail!("isolated real replicas each listen in a network namespace of their own: [testbed.replica] command must name {{host}}, the address to listen on (vLLM: \"--host\", \"{{host}}\")");
            }
            if self.rollout.is_some() || self.names.is_some() {
                bail!("isolated real replicas keep their namespace's address for the run: they take no [testbed.rollout] or [testbed.names]");
            }
        }
        if real && matches!(self.orchestrator, OrchestratorPlan::Replace { .. }) {
            bail!("orchestrator \"replace\" plays a replacement on mocks; real replicas are restarted by orchestrator \"supervise\"");
        }
        if supervised && !real {
            bail!("orchestrator \"supervise\" restarts real replica processes: it needs [testbed.replica]");
        }
        if let OrchestratorPlan::Supervise { restart_delay_s } = self.orchestrator {
            if !(restart_delay_s.is_finite() && (0.0..=3600.0).contains(&restart_delay_s)) {
                bail!("orchestrator.restart_delay_s = {restart_delay_s} must lie in 0..=3600");
            }
        }
        if let Some(rollout) = &self.rollout {
            if !real || !matches!(self.orchestrator, OrchestratorPlan::None) || self.names.is_some()
            {
                bail!("[testbed.rollout] changes the release of real replicas behind HAProxy, found by port: it needs [testbed.replica], orchestrator \"none\" (the rollout controller is the only actor) and no [testbed.names]");
            }
            rollout.check()?;
        }
        if let Some(failover) = &self.proxy_failover {
            if !real
                || !matches!(self.orchestrator, OrchestratorPlan::None)
                || self.rollout.is_some()
            {
                bail!("[testbed.proxy_failover] kills and restarts the HAProxy in front of real replicas: it needs [testbed.replica], orchestrator \"none\" (the failover is the change under test) and no [testbed.rollout]");
            }
            failover.check()?;
        }
        if let Some(scale_out) = &self.scale_out {
            let others = self.rollout.is_some() || self.proxy_failover.is_some();
            if !real
                || !matches!(self.orchestrator, OrchestratorPlan::None)
                || others
                || self.isolated
            {
                bail!("[testbed.scale_out] starts one more real replica behind HAProxy: it needs [testbed.replica], orchestrator \"none\" (the scale-out is the change under test), no other testbed change, and no isolation");
            }
            scale_out.check()?;
        }
        if self.names.is_some() && !supervised {
            bail!("[testbed.names] addresses real replicas by name so that a replacement on a new port is found: it needs [testbed.replica] and orchestrator \"supervise\"");
        }
        match &self.placement {
            Some(_) if !real => bail!("[testbed.placement] places real replica processes and their proxy; the mock testbed is not placed"),
            Some(p) => p.check(crate::placement::online_cpus()),
            None => Ok(()),
        }
    }
}

/// `[testbed.orchestrator]`, in experiment seconds (divided by the time factor).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "kind", rename_all = "kebab-case")]
pub enum OrchestratorPlan {
    /// Nothing acts: the endpoint stays routable (a black-hole's stale endpoint) and the
    /// partition's own armed expiry heals it.
    None,
    /// A replacement: the endpoint is removed `detection_s` after the victim dies, the replica is
    /// rescheduled `reschedule_s` later and loads for `weight_load_s` before it is ready.
    Replace {
        /// Seconds from the victim's death to the endpoint's removal.
        detection_s: f64,
        /// Seconds from the removal to the replica's reschedule.
        reschedule_s: f64,
        /// Seconds the replica loads weights before it is ready.
        weight_load_s: f64,
    },
    /// Real replicas: a supervisor restarts the victim once it has died, `restart_delay_s`
    /// later, and the replacement loads and warms up for real ([`crate::realbed::supervise`]).
    Supervise {
        /// Seconds from the victim's death to its restart (default 0).
        #[serde(default)]
        restart_delay_s: f64,
    },
}

/// A mock whose capacity is exactly `capacity_rps`: constant timings, no slowdown, and a service
/// time of 40 % of the (scaled) client timeout, at most 6 s, so a baseline request completes well
/// inside the horizon and the SLO (TTFT 1 s, e2e 14 s, which no time factor scales) while an
/// overloaded survivor's queue pushes requests past it. Unscaled (the experiment profile) that is
/// 120 sequences of 6 s with a 0.75 s first token, about what a real replica shows.
pub(super) fn mock_text(capacity_rps: f64, factor: u32, throttle: Option<f64>) -> String {
    let timeout_s = 30.0 / f64::from(factor);
    let seqs = (capacity_rps * (0.4 * timeout_s).min(6.0)).round().max(1.0);
    let service_ms = seqs / capacity_rps * 1000.0;
    let ttft_ms = service_ms * 0.125;
    let gap_ms = (service_ms - ttft_ms) / 255.0;
    format!(
        "# Mock replicas written by the percentes study runner: capacity {capacity_rps} requests/s each.\n\
         [timing]\nttft = {{ kind = \"constant\", ms = {ttft_ms:.3} }}\ntoken_gap = {{ kind = \"constant\", ms = {gap_ms:.4} }}\n\
         [capacity]\nmax_num_seqs = {seqs}\nslowdown_per_running = 0.0\n{}",
        throttle.map_or(String::new(), |t| format!("throttle_factor = {t}\n"))
    )
}

/// The testbed a scenario runs on: the mock's, or real parts.
pub(super) enum Bed {
    Mock(Testbed),
    Real(Box<crate::realbed::RealBed>),
}

impl Bed {
    pub(super) fn service(&self) -> std::net::SocketAddr {
        match self {
            Bed::Mock(bed) => bed.service(),
            Bed::Real(bed) => bed.service(),
        }
    }

    pub(super) fn kind(&self) -> &'static str {
        match self {
            Bed::Mock(bed) if bed.namespace("replica-0").is_some() => " in network namespaces",
            Bed::Mock(_) => "",
            Bed::Real(bed) => match (bed.placement().is_some(), bed.namespaces().is_empty()) {
                (true, false) => {
                    " (real processes in network namespaces, placed on their own CPUs)"
                }
                (true, true) => " (real processes, placed on their own CPUs)",
                (false, false) => " (real processes in network namespaces)",
                (false, true) => " (real processes)",
            },
        }
    }

    pub(super) fn placement(&self) -> Option<String> {
        match self {
            Bed::Mock(_) => None,
            Bed::Real(bed) => bed.placement(),
        }
    }

    /// The proxy in front of the replicas and its settings, where the runner started one.
    pub(super) fn proxy(&self) -> Option<String> {
        match self {
            Bed::Mock(_) => None,
            Bed::Real(bed) => Some(bed.proxy()),
        }
    }
}

/// Starts the testbed on real parts, placed where the plan asks, with its placeholders.
fn start_real(
    plan: &TestbedPlan,
    replica: &crate::realbed::ReplicaPlan,
    output: &Path,
    stop: &AtomicBool,
) -> Result<(Bed, BTreeMap<String, String>)> {
    let placed = match &plan.placement {
        Some(p) => Some(crate::placement::Placed::apply(
            p,
            Path::new("/"),
            &format!("percentes-study-{}", std::process::id()),
        )?),
        None => None,
    };
    let folder = std::fs::canonicalize(output)?;
    out!(
        "starting {} replicas and HAProxy; a real engine may take minutes to load",
        plan.replicas
    );
    let bed = crate::realbed::RealBed::start(
        (replica, plan.names.as_ref()),
        (plan.replicas, plan.standby(), plan.isolated),
        &folder,
        placed,
        stop,
    )
    .context("cannot start the real-parts testbed")?;
    for (name, took) in bed.start_times() {
        out!("{name} ready after {:.1} s", took.as_secs_f64());
    }
    let mut values = BTreeMap::new();
    values.insert("service".to_owned(), bed.service().to_string());
    for (name, address) in bed.replica_addresses() {
        values.insert(format!("replica:{name}"), address);
    }
    if let Some(server) = bed.nameserver() {
        values.insert("nameserver".to_owned(), server.to_string());
    }
    for (name, file) in bed.pid_files() {
        values.insert(format!("pid-file:{name}"), file.display().to_string());
    }
    for (name, netns) in bed.namespaces() {
        values.insert(format!("netns:{name}"), netns);
    }
    Ok((Bed::Real(Box::new(bed)), values))
}

/// Starts the scenario's testbed and returns it with the placeholders it defines.
pub(super) fn start_bed(
    plan: &TestbedPlan,
    output: &Path,
    factor: u32,
    stop: &AtomicBool,
) -> Result<(Bed, BTreeMap<String, String>)> {
    if let Some(replica) = &plan.replica {
        return start_real(plan, replica, output, stop);
    }
    let mut values = BTreeMap::new();
    let binary =
        std::env::current_exe().context("cannot find this executable to start the mocks")?;
    let mock_path = output.join("mock.toml");
    std::fs::write(
        &mock_path,
        mock_text(plan.capacity_rps, factor, plan.throttle_factor),
    )?;
    let bed = if plan.isolated {
        Testbed::start_isolated(&binary, plan.replicas, Some(&mock_path))
    } else {
        Testbed::start(&binary, plan.replicas, Some(&mock_path))
    }
    .context("cannot start the testbed")?;
    values.insert("service".to_owned(), bed.service().to_string());
    for (name, pid) in bed.pids() {
        let pid_file = output.join(format!("{name}.pid"));
        std::fs::write(&pid_file, pid.to_string())?;
        values.insert(
            format!("pid-file:{name}"),
            std::fs::canonicalize(&pid_file)?.display().to_string(),
        );
        if let Some(address) = bed.replica(&name) {
            values.insert(format!("replica:{name}"), address.to_string());
        }
        if let Some(ns) = bed.namespace(&name) {
            values.insert(format!("netns:{name}"), ns.to_owned());
        }
    }
    Ok((Bed::Mock(bed), values))
}

/// Experiment `seconds` after the time factor.
pub(super) fn scaled(seconds: f64, factor: u32) -> Duration {
    Duration::from_secs_f64(seconds / f64::from(factor))
}

pub(super) struct Replacement {
    pub(super) detection: Duration,
    pub(super) reschedule: Duration,
    pub(super) weight_load: Duration,
}

/// The orchestrator's part in a replacement: notice the victim died (the recorder's injector
/// killed it at T_inject), remove its endpoint, reschedule it, let it load, mark it ready; each
/// boundary into the journal's timeline.
pub(super) fn replace(
    bed: &mut Testbed,
    victim: &str,
    steps: &Replacement,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) {
    let Some(address) = bed.replica(victim) else {
        inbox.report(
            TimelineSubject::Orchestrator,
            &format!("no replica named {victim} on the testbed"),
            None,
        );
        return;
    };
    loop {
        if finished.load(Ordering::Relaxed) {
            return;
        }
        if std::net::TcpStream::connect_timeout(&address, Duration::from_millis(100)).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = bed.reap(victim, Duration::from_secs(2));
    std::thread::sleep(steps.detection);
    if bed.set_ready(victim, false).is_ok() {
        inbox.report(
            TimelineSubject::Detected,
            &format!("the orchestrator removed {victim}'s endpoint from the service"),
            None,
        );
    }
    inbox.report(
        TimelineSubject::Reschedule,
        &format!("{victim} rescheduled; it starts after the scheduling delay"),
        None,
    );
    let started = bed.started_at();
    let records_before = bed.records().len();
    match bed.restart(
        victim,
        steps.reschedule,
        steps.weight_load,
        Duration::from_secs(30),
    ) {
        Ok(()) => {
            for record in &bed.records()[records_before..] {
                let at = started + Duration::from_nanos(record.at_ns);
                match record.event {
                    "fired" => inbox.report_at(
                        at,
                        TimelineSubject::ContainerStart,
                        &format!("{victim} process listening (loading)"),
                        None,
                    ),
                    "ready" => inbox.report_at(
                        at,
                        TimelineSubject::WeightLoad,
                        &format!("{victim} healthy: weights loaded; endpoint ready"),
                        None,
                    ),
                    _ => {}
                }
            }
        }
        Err(e) => inbox.report(TimelineSubject::RestartFailed, &e.to_string(), None),
    }
}

/// The control plane's part once the recorder runs, when the run has a fault and a victim:
/// the mock orchestrator's replacement, the real supervisor's restart, or (a partition on real
/// parts, where nothing acts) the watch of the proxy's verdicts. Returns when it is done or
/// the run ends (`finished`).
pub(super) fn orchestrate(
    plan: &TestbedPlan,
    bed: &mut Bed,
    config: &percentes_formats::config::Config,
    factor: u32,
    (inbox, finished): (&TimelineInbox, &AtomicBool),
) {
    use percentes_formats::config::FaultVariant;
    let Some(victim) = config.fault.victim.as_deref() else {
        return;
    };
    if config.fault.variant == FaultVariant::None {
        return;
    }
    match (&plan.orchestrator, bed) {
        (
            OrchestratorPlan::Replace {
                detection_s,
                reschedule_s,
                weight_load_s,
            },
            Bed::Mock(bed),
        ) => {
            let steps = Replacement {
                detection: scaled(*detection_s, factor),
                reschedule: scaled(*reschedule_s, factor),
                weight_load: scaled(*weight_load_s, factor),
            };
            replace(bed, victim, &steps, inbox, finished);
        }
        (OrchestratorPlan::Supervise { restart_delay_s }, Bed::Real(bed)) => {
            let steps = crate::realbed::Supervision {
                restart_delay: scaled(*restart_delay_s, factor),
            };
            crate::realbed::supervise(bed, victim, steps, inbox, finished);
        }
        // A partition kills nothing: what the proxy's health check made of it is watched.
        (OrchestratorPlan::None, Bed::Real(bed))
            if config.fault.variant == FaultVariant::BlackHole =>
        {
            crate::realbed::partition::watch(bed, victim, inbox, finished);
        }
        _ => {}
    }
}

/// What a real-parts testbed did during the run, as its timeline events journaled it (run
/// seconds from the epoch), and its teardown as confirmed.
pub(super) fn testbed_words(steps: &[(f64, String)], teardown: &str) -> String {
    let mut text = String::from("\n## The testbed's timeline (journaled as seen)\n\n");
    if steps.is_empty() {
        text.push_str("- nothing was reported\n");
    }
    for (at_s, what) in steps {
        text.push_str(&format!("- {at_s:.3} s: {what}\n"));
    }
    text.push_str(&format!("\nTeardown: {teardown}\n"));
    text
}
