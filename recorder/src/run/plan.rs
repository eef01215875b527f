//! The run's plan: every number a recording derives from its configuration (and a replay's
//! trace), computed once, before the first send. The threads read the plan; none of them reads the
//! configuration for a number again, and none holds a copy of it.

use crate::error::RecordError;
use std::time::Duration;

use percentes_formats::config::{Config, FaultVariant, HttpVersion};
use percentes_formats::journal::manifest::Shard;
use percentes_formats::pins;
use percentes_formats::schedule::ScheduleParams;
use percentes_formats::schedule::Workload;

/// Workers a run may have at the most (each is a thread with its own ring).
pub const WORKERS_MAX: usize = 64;

/// `--workers` as given: 1 to [`WORKERS_MAX`], refused outside (a library caller's count is
/// clamped by [`RunPlan::new`]; the command line says what it will not do).
pub fn workers_flag(text: &str) -> Result<usize, percentes_formats::config::FlagError> {
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=WORKERS_MAX).contains(&n) => Ok(n),
        _ => Err(percentes_formats::config::FlagError {
            flag: "--workers",
            problem: format!("{text:?} is not a worker count: 1 to {WORKERS_MAX}"),
        }),
    }
}

/// What a recording does, derived from its configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPlan {
    /// The schedule (phases, rates, routes, seed) and its size and digest (§J.4).
    pub params: ScheduleParams,
    /// Requests the schedule holds.
    pub requests: u64,
    /// The schedule's digest (§J.4).
    pub digest: [u8; 32],
    /// Worker threads: the requested count, within 1..=[`WORKERS_MAX`].
    pub workers: usize,
    /// `max_tokens` on every request unless a route's lengths or a prompt's own say otherwise
    /// (§6, `target.max_tokens`).
    pub max_tokens: u32,
    /// Each request's deadline after its intended time (§3's censoring horizon).
    pub timeout: Duration,
    /// Sample requests the pre-flight's capacity probe sends, where it probes (§10
    /// "Capacity check", `calibration.probe_samples`).
    pub probe_samples: u64,
    /// Connections each worker opens before the epoch: the pinned floor per replica times the
    /// replicas, shared out over the workers (§1).
    pub connections_per_worker: usize,
    /// The measured span, ns from the epoch ([`ScheduleParams::measured_span_ns`]).
    pub measured_span_ns: (u64, u64),
    /// How often a replica's readiness is probed (`GET /health`): once per goodput bucket
    /// (within the probe bounds) in a fault run, whose recovery reads readiness at the bucket's
    /// resolution; otherwise at [`RunPlan::gauge_period`], since nothing reads it faster.
    pub probe_period: Duration,
    /// How often its waiting-queue gauge is read (`GET /metrics`, G7): once per bucket, never
    /// more often than the pinned floor in real time (§10, `client.gauge_period_floor_ms`).
    pub gauge_period: Duration,
    /// When the fault fires, ns from the epoch, in a fault run.
    pub inject_at_ns: Option<u64>,
    /// Whether each route's requests stream (SSE), by route index.
    pub streams: Vec<bool>,
    /// How long a keep-alive connection may sit idle before it is retired (`target.idle_limit_ms`;
    /// real time, never scaled by the dev factor: it answers the server's own idle timeout).
    pub idle_limit: Duration,
    /// The budget of one connect and TLS handshake (SPEC §2, `client.connect_budget_s`).
    pub connect_budget: Duration,
    /// The share of the schedule this recorder sends (SPEC §2 "Sharded capture").
    pub shard: Shard,
    /// The HTTP version requests use (`target.http`, SPEC §2 "HTTP/2").
    pub http: HttpVersion,
    /// The fall-behind policy's lag and span (SPEC §2 "Falling behind"; real time, never
    /// scaled: the client's fitness does not change with the dev factor).
    pub behind_lag: Duration,
    /// See [`RunPlan::behind_lag`].
    pub behind_span: Duration,
    /// What the baseline must show before the fault fires, in a fault run against a target the
    /// gates judge (seeds/004 "abort when baseline is unhealthy"; SPEC §10).
    pub baseline: Option<BaselineRule>,
    /// In a fault run: how long a replica's gauge, once read, may go unread before the fire
    /// (`fault.telemetry_gap_max_s`; real time, never scaled).
    pub telemetry_gap: Option<Duration>,
    /// How long the fault lasts before it is removed or expires: the pinned partition of a
    /// black-hole (§1), the pinned duration of a degradation (§10); none for a clean delete,
    /// which is not undone.
    pub fault_duration_ns: Option<u64>,
    /// The fault's impact is confirmed within this long of the fire, or the run ends
    /// (`fault.confirm_within_s`, §10; real time, never scaled).
    pub confirm_within: Duration,
    /// A shard ready this long after the agreed epoch refuses to record (§2,
    /// `shards.start_late_max_ms`).
    pub start_late_max: Duration,
    /// The DNS server SRV names are asked of (`target.nameserver`); `None`: /etc/resolv.conf's.
    pub nameserver: Option<std::net::SocketAddr>,
    /// A replay's trace, as read (its times are also [`RunPlan::params`]'s).
    pub trace: Option<percentes_formats::config::workload::Trace>,
    /// What the live view warns at: G2.3's CPU share and its window (ns, never divided by the
    /// dev factor), and G2.1's skew maximum.
    pub live_limits: (f64, u64, Duration),
}

impl RunPlan {
    /// The plan of `config` with `workers` requested. Refuses a schedule that cannot run.
    pub fn new(config: &Config, workers: usize) -> Result<RunPlan, RecordError> {
        let mut params = config.schedule_params();
        let mut trace = None;
        if matches!(params.workload, Workload::Replay { .. }) {
            let read = config.read_trace().map_err(RecordError::config)?;
            params = params.replaying(read.offsets_ns.clone());
            trace = Some(read);
        }
        params.validate().map_err(RecordError::config)?;
        let workers = workers.clamp(1, WORKERS_MAX);
        let floor = config.number(&pins::CLIENT_CONNECTIONS_FLOOR_PER_REPLICA) as usize;
        let bucket = Duration::from_nanos(config.duration_ns(&pins::RECOVERY_BUCKET_S))
            .clamp(PROBE_PERIOD_MIN, PROBE_PERIOD_MAX);
        let gauge_period = bucket.max(Duration::from_millis(
            pins::value::CLIENT_GAUGE_PERIOD_FLOOR_MS as u64,
        ));
        let inject_at_ns = config.inject_at_ns();
        let measured_span_ns = params.measured_span_ns();
        Ok(RunPlan {
            requests: params.iter().count() as u64,
            digest: params.digest(),
            measured_span_ns,
            workers,
            max_tokens: config.number(&pins::TARGET_MAX_TOKENS) as u32,
            timeout: Duration::from_nanos(config.duration_ns(&pins::CLIENT_TIMEOUT_S)),
            probe_samples: config.number(&pins::CALIBRATION_PROBE_SAMPLES) as u64,
            connections_per_worker: (floor * config.target.replicas.len().max(1)).div_ceil(workers),
            probe_period: if inject_at_ns.is_some() {
                bucket
            } else {
                gauge_period
            },
            gauge_period,
            inject_at_ns,
            streams: config
                .routes
                .iter()
                .map(|r| r.streams(&config.target))
                .collect(),
            idle_limit: Duration::from_millis(config.target.idle_limit_ms),
            connect_budget: Duration::from_secs(pins::value::CLIENT_CONNECT_BUDGET_S as u64),
            shard: Shard::WHOLE,
            http: config.target.http,
            behind_lag: Duration::from_millis(pins::value::CLIENT_BEHIND_LAG_MS as u64),
            behind_span: Duration::from_millis(pins::value::CLIENT_BEHIND_SPAN_MS as u64),
            baseline: BaselineRule::of(config, measured_span_ns),
            fault_duration_ns: fault_duration_ns(config),
            confirm_within: Duration::from_secs(pins::value::FAULT_CONFIRM_WITHIN_S as u64),
            start_late_max: Duration::from_secs_f64(
                config.number(&pins::SHARDS_START_LATE_MAX_MS) / 1000.0,
            ),
            live_limits: (
                config.number(&pins::GATES_HOST_CPU_MAX_PERCENT) / 100.0,
                (config.number(&pins::GATES_HOST_CPU_WINDOW_S) * 1e9) as u64,
                Duration::from_secs_f64(config.number(&pins::GATES_SEND_SKEW_MAX_MS) / 1000.0),
            ),
            trace,
            // Checked at load (`target.nameserver` is ip:port), so a failed parse cannot happen.
            nameserver: config
                .target
                .nameserver
                .as_deref()
                .and_then(|s| s.parse().ok()),
            telemetry_gap: inject_at_ns
                .map(|_| Duration::from_secs(pins::value::FAULT_TELEMETRY_GAP_MAX_S as u64)),
            params,
        })
    }

    /// The same plan for one shard of the schedule. A closed or semi-open run is one
    /// recorder's: its follow-ups take their indices as they come, which shards could not share
    /// out without talking to each other.
    pub fn for_shard(self, shard: Shard) -> Result<RunPlan, RecordError> {
        if shard != Shard::WHOLE && self.params.workload.follows() {
            return Err(RecordError::config(format!(
                "a {} workload runs on one recorder: its follow-up requests are numbered as they are sent, and shards cannot share that out (SPEC §1 \"Workload models\"); record it unsharded",
                self.params.workload.name()
            )));
        }
        Ok(RunPlan { shard, ..self })
    }

    /// Whether worker `worker` sends schedule index `index`: the shard's indices (i mod N = k),
    /// dealt out over the workers in turn.
    pub fn sends(&self, worker: usize, index: u64) -> bool {
        self.shard.holds(index)
            && (index / u64::from(self.shard.count)) % self.workers as u64 == worker as u64
    }
}

/// How long the configured fault lasts: the pinned partition of a black-hole (§1), the pinned
/// duration of a degradation (§10); none for a clean delete, which is not undone.
fn fault_duration_ns(config: &Config) -> Option<u64> {
    match config.fault.variant {
        FaultVariant::BlackHole => Some(config.duration_ns(&pins::FAULT_PARTITION_S)),
        FaultVariant::Degradation => Some(config.duration_ns(&pins::FAULT_DEGRADATION_S)),
        FaultVariant::None | FaultVariant::CleanDelete => None,
    }
}

/// Time between writing the header and the epoch, for the workers to start and connect.
pub const EPOCH_LEAD: Duration = Duration::from_millis(300);

/// What the baseline must show, derived once by the plan from the pins in force.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineRule {
    /// The baseline window by intended time, ns from the epoch: the end of warm-up to one client
    /// timeout before T_inject (SPEC §3; the fire anchor is T_inject until the fault fires).
    pub window_ns: (u64, u64),
    /// The SLO's thresholds from t_i, ns: time to first token and end to end (§4).
    pub slo_ns: (u64, u64),
    /// G6's least goodput.
    pub goodput_min: f64,
    /// G7's largest mean waiting-queue gauge per replica.
    pub waiting_max: f64,
    /// G1's share bounds in percent, for a replica-loss variant.
    pub share_percent: Option<(f64, f64)>,
    /// The declared replicas, and the address of each that has one (a replica header naming an
    /// address reads as that replica, as the analyzer reads it).
    pub replicas: Vec<(String, Option<String>)>,
}

impl BaselineRule {
    /// The rule of a fault run against a target whose health the gates judge (not hosted).
    pub(super) fn of(config: &Config, measured_span_ns: (u64, u64)) -> Option<BaselineRule> {
        let inject_ns = config.inject_at_ns()?;
        if config.fault.injector.is_none()
            || config.target.kind == percentes_formats::config::TargetKind::Hosted
        {
            return None;
        }
        let warm_ns = measured_span_ns.0.min(inject_ns);
        let end_ns = inject_ns
            .saturating_sub(config.duration_ns(&pins::CLIENT_TIMEOUT_S))
            .clamp(warm_ns, inject_ns);
        let ms = |v: i64| v.unsigned_abs() * 1_000_000;
        Some(BaselineRule {
            window_ns: (warm_ns, end_ns),
            slo_ns: (ms(pins::value::SLO_TTFT_MS), ms(pins::value::SLO_E2E_MS)),
            goodput_min: config.number(&pins::GATES_BASELINE_GOODPUT_MIN),
            waiting_max: config.number(&pins::GATES_WAITING_QUEUE_MAX),
            share_percent: config.fault.variant.is_replica_loss().then(|| {
                (
                    config.number(&pins::GATES_REPLICA_SHARE_MIN_PERCENT),
                    config.number(&pins::GATES_REPLICA_SHARE_MAX_PERCENT),
                )
            }),
            replicas: config
                .target
                .replicas
                .iter()
                .map(|r| (r.clone(), config.target.replica_addresses.get(r).cloned()))
                .collect(),
        })
    }

    pub(super) fn holds(&self, intended_ns: u64) -> bool {
        (self.window_ns.0..self.window_ns.1).contains(&intended_ns)
    }
}

/// Fastest and slowest replica probing: once per goodput bucket, within these bounds.
pub(super) const PROBE_PERIOD_MIN: Duration = Duration::from_millis(50);

pub(super) const PROBE_PERIOD_MAX: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text.as_bytes()).unwrap()
    }

    const DEV: &str = "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 10\n[target]\nkind = \"mock\"\nbase_url = \"http://127.0.0.1:1\"\nmodel = \"mock\"\nreplicas = [\"a\", \"b\", \"c\"]\n\
                       [schedule]\nseed = 1\narrival = \"poisson\"\nrate_rps = 5.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n\
                       [[routes]]\nlabel = \"lookup\"\npath = \"/v1/store/cached\"\nstream = false\n";

    #[test]
    fn the_plan_derives_each_number_once_from_the_pins() {
        let plan = RunPlan::new(&config(DEV), 2).unwrap();
        // Dev time factor 10: warm-up 6 s, measured 30 s, cooldown 6 s.
        assert_eq!(plan.measured_span_ns, (6_000_000_000, 36_000_000_000));
        assert_eq!(plan.timeout, Duration::from_secs(3));
        // Floor 4 a replica, three replicas, two workers.
        assert_eq!(plan.connections_per_worker, 6);
        // The descriptor table is sized ahead for the recorder's 16, the floor's 12, and twice
        // the 5 rps peak times the 3 s timeout: 58.
        assert_eq!(super::super::host::descriptors_wanted(&plan), 16 + 12 + 30);
        assert_eq!(plan.streams, vec![true, false]);
        assert_eq!(plan.inject_at_ns, None);
        assert_eq!(plan.requests, plan.params.iter().count() as u64);
        // The bucket is 100 ms after the dev factor, but the gauge is read at most every
        // 250 ms, and a run without a fault probes readiness no faster than that.
        assert_eq!(plan.gauge_period, Duration::from_millis(250));
        assert_eq!(plan.probe_period, Duration::from_millis(250));
        // The idle limit answers real servers' timeouts: the dev factor leaves it alone.
        assert_eq!(plan.idle_limit, Duration::from_millis(4_000));
        assert_eq!(plan.connect_budget, Duration::from_secs(10));
        // The fall-behind policy is the client's fitness: the dev factor leaves it alone.
        assert_eq!(plan.behind_lag, Duration::from_secs(1));
        assert_eq!(plan.behind_span, Duration::from_secs(1));
        // No fault: no baseline to judge before a fire, no telemetry watched for one.
        assert_eq!(plan.baseline, None);
        assert_eq!(plan.telemetry_gap, None);
        assert_eq!(plan.fault_duration_ns, None);
        assert_eq!(plan.confirm_within, Duration::from_secs(5));
        assert_eq!(plan.start_late_max, Duration::from_millis(50));
        // The live view's limits are the gates' own, the window never divided.
        assert_eq!(
            plan.live_limits,
            (0.7, 5_000_000_000, Duration::from_millis(50))
        );
    }

    #[test]
    fn a_fault_run_probes_readiness_each_bucket_and_the_gauge_no_faster_than_its_floor() {
        let fault = DEV
            .replace(
                "[fault]\nvariant = \"none\"\n",
                "[fault]\nvariant = \"clean-delete\"\nvictim = \"a\"\ninjector = \"mock-admin\"\nadmin_address = \"127.0.0.1:1\"\nmock_mode = \"error\"\n",
            )
            .replace("[\"a\", \"b\", \"c\"]", "[\"a\", \"b\"]")
            .replace("rate_rps = 5.0\n", "[calibration]\nlambda_max_rps = 20.0\n");
        let plan = RunPlan::new(&config(&fault), 1).unwrap();
        assert!(plan.inject_at_ns.is_some());
        assert_eq!(plan.probe_period, Duration::from_millis(100));
        assert_eq!(plan.gauge_period, Duration::from_millis(250));
        // The baseline is judged from the end of warm-up (6 s) to a timeout (3 s) before T_inject
        // (36 s), by the pinned SLO and gates; a clean delete is a replica loss, so G1 too.
        let rule = plan.baseline.clone().expect("a baseline rule");
        assert_eq!(rule.window_ns, (6_000_000_000, 33_000_000_000));
        assert_eq!(rule.slo_ns, (1_000_000_000, 14_000_000_000));
        assert_eq!((rule.goodput_min, rule.waiting_max), (0.99, 1.0));
        assert_eq!(rule.share_percent, Some((45.0, 55.0)));
        assert_eq!(plan.telemetry_gap, Some(Duration::from_secs(5)));
        // A clean delete is not undone: no fault duration.
        assert_eq!(plan.fault_duration_ns, None);
        // Without the dev factor the bucket is a second, over the floor: both once a bucket.
        let real = fault.replace("time_factor = 10", "time_factor = 1");
        let plan = RunPlan::new(&config(&real), 1).unwrap();
        assert_eq!(plan.probe_period, Duration::from_secs(1));
        assert_eq!(plan.gauge_period, Duration::from_secs(1));
    }

    #[test]
    fn workers_are_clamped_and_the_plan_is_a_pure_function() {
        let c = config(DEV);
        assert_eq!(RunPlan::new(&c, 0).unwrap().workers, 1);
        assert_eq!(RunPlan::new(&c, 1000).unwrap().workers, WORKERS_MAX);
        assert_eq!(RunPlan::new(&c, 3).unwrap(), RunPlan::new(&c, 3).unwrap());
    }
}
