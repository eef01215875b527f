//! The testbed on real parts: replicas that are real server processes (vLLM, by the command a
//! scenario gives), a real layer-7 proxy from the distribution (HAProxy) in front of them, and a
//! supervisor that restarts a replica that died, each in the placement the scenario asks.
//!
//! - **Replicas** start from `[testbed.replica] command`, with `{port}` and `{name}` filled in
//!   and `{env:VAR}` read from the environment, each as the leader of a process group of its own
//!   (so `kill-process-group` takes the engine processes it spawns with it), its output appended
//!   to `NAME.log` in the run's folder, its pid in `NAME.pid`. A replica counts as started when
//!   its `ready_path` answers 200.
//! - **The proxy** is HAProxy: round robin over the replicas, an active health check of every
//!   replica's `ready_path` four times a second (down after two failures, up after one
//!   success; a check may take 2 s, since HAProxy's default, the interval, ejected an overloaded
//!   survivor whose /health answered in 250 ms or more, and turned its overload into 503s), a
//!   failed connection redispatched to another replica, and the serving replica's
//!   name in the `x-upstream` response header, which G1 reads (`target.replica_header`). Its
//!   runtime socket tells the supervisor when it took a replica out: that is the service's
//!   detection, journaled as `detected`.
//! - **The supervisor** ([`supervise`]) waits for the victim to die (the recorder's injector
//!   kills it at T_inject), restarts it after `restart_delay_s` (experiment seconds, divided by
//!   the time factor) on the same port, and reports each boundary it sees into the journal's
//!   timeline with the moment it saw it: `detected` (HAProxy marked it down), `reschedule` (it
//!   decided to restart), `container-start` (the new process started), `weight-load` (the
//!   replica's log printed `weights_loaded_line`). Readiness is not reported: the recorder's own
//!   direct probe measures it (`replica-ready`).
//!
//! - **Names** (`[testbed.names]`, [`names`]): optionally, the replicas are found by SRV names
//!   a dnsmasq of the testbed's serves, and the supervisor restarts the victim on a new port,
//!   as a replacement pod comes back at a new address behind its headless Service's name.
//!
//! Nothing here measures: every figure comes from the journal.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::{bail, Context, Result, StudyError};
use crate::placement::{Joiner, Placed};
use haproxy::{haproxy_program, haproxy_version, start_proxy};
use percentes_formats::journal::records::TimelineSubject;
use percentes_recorder::run::TimelineInbox;
use percentes_scenarios::netns::Netns;
use process::{free_port, spawn, stop_group, Replica, WeightsLine};

pub mod failover;
mod haproxy;
pub mod names;
pub mod partition;
mod process;
pub mod rollout;
pub mod scale_out;
pub use haproxy::{
    haproxy_config, haproxy_fact, haproxy_states, parse_states, HAPROXY_NO_DELAY, UPSTREAM_HEADER,
};
pub use names::NamesPlan;
pub use process::answers;
pub use rollout::RolloutPlan;

/// The port an isolated replica listens on, in its own namespace.
const ISOLATED_PORT: u16 = 8000;

/// `[testbed.replica]`: real replica processes instead of the mock.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplicaPlan {
    /// The argv that serves one replica in the foreground: `{port}`, `{host}` (the address it
    /// must listen on: loopback, or its namespace's on an isolated bed), `{name}` and
    /// `{env:VAR}` are filled in. SIGTERM must stop it.
    pub command: Vec<String>,
    /// The path that answers 200 once the replica serves (default `/health`).
    #[serde(default = "health")]
    pub ready_path: String,
    /// How long a replica may take to answer `ready_path`, real seconds (default 600).
    #[serde(default = "start_timeout")]
    pub start_timeout_s: f64,
    /// A fragment of the line the replica's log prints when its weights are loaded (vLLM:
    /// "Loading weights took"): the supervisor reports `weight-load` when it appears.
    #[serde(default)]
    pub weights_loaded_line: Option<String>,
}

fn health() -> String {
    "/health".into()
}
fn start_timeout() -> f64 {
    600.0
}

/// A table of one key, `kind`, and nothing else: how `[testbed.proxy]` and `[testbed.names]`
/// are read (an internally tagged enum of unit variants would take any other key silently).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindOnly {
    kind: String,
}

/// `[testbed.proxy]`, read through [`KindOnly`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(try_from = "KindOnly")]
pub enum ProxyPlan {
    /// HAProxy (Debian's `haproxy`), started in the foreground by the runner.
    Haproxy,
}

/// A `kind` no variant of the table has: the table, the kind given, the kinds there are.
#[derive(Debug)]
pub struct UnknownKind {
    table: &'static str,
    kind: String,
    known: &'static str,
}

impl std::fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "[{}] kind {:?} is not one this build starts ({})",
            self.table, self.kind, self.known
        )
    }
}

impl KindOnly {
    /// The table's kind, if it is `known`; else the error that names the table.
    pub(crate) fn kind<T>(
        self,
        table: &'static str,
        known: &'static str,
        of: impl FnOnce(&str) -> Option<T>,
    ) -> std::result::Result<T, UnknownKind> {
        of(&self.kind).ok_or(UnknownKind {
            table,
            kind: self.kind,
            known,
        })
    }
}

impl TryFrom<KindOnly> for ProxyPlan {
    type Error = UnknownKind;

    fn try_from(table: KindOnly) -> std::result::Result<ProxyPlan, UnknownKind> {
        table.kind("testbed.proxy", "\"haproxy\"", |kind| {
            (kind == "haproxy").then_some(ProxyPlan::Haproxy)
        })
    }
}

impl ReplicaPlan {
    /// The plan in range, and its command's placeholders known.
    pub fn check(&self) -> Result<()> {
        if self.command.is_empty() {
            bail!("[testbed.replica] command is empty: give the argv that serves one replica");
        }
        if !self.command.iter().any(|a| a.contains("{port}")) {
            bail!("[testbed.replica] command never names {{port}}: each replica needs a port of its own");
        }
        let request_path = self.ready_path.starts_with('/')
            && self.ready_path.bytes().all(|b| (b'!'..=b'~').contains(&b));
        if !request_path {
            bail!(
                "[testbed.replica] ready_path {:?} must start with / and hold no space, CR, LF or other byte a request line cannot carry",
                self.ready_path
            );
        }
        if self
            .weights_loaded_line
            .as_deref()
            .is_some_and(|line| line.trim().is_empty())
        {
            bail!("[testbed.replica] weights_loaded_line is empty: it would match every log line; give a fragment of the line the replica prints when its weights are loaded (vLLM: \"Loading weights took\"), or leave it out");
        }
        if !(self.start_timeout_s.is_finite() && (1.0..=3600.0).contains(&self.start_timeout_s)) {
            bail!(
                "[testbed.replica] start_timeout_s = {} must lie in 1..=3600",
                self.start_timeout_s
            );
        }
        Ok(())
    }

    /// The argv for replica `name` listening at `address`; an `{env:VAR}` that is not set is
    /// an error that names it.
    pub fn argv(&self, name: &str, address: SocketAddr) -> Result<Vec<String>> {
        self.command
            .iter()
            .map(|arg| {
                let mut out = arg
                    .replace("{port}", &address.port().to_string())
                    .replace("{host}", &address.ip().to_string())
                    .replace("{name}", name);
                while let Some(start) = out.find("{env:") {
                    let end = out[start..]
                        .find('}')
                        .map(|e| start + e)
                        .with_context(|| format!("[testbed.replica] command: {arg:?} opens {{env: and never closes it"))?;
                    let var = &out[start + 5..end];
                    let value = std::env::var(var).ok().with_context(|| {
                        format!("[testbed.replica] command needs the environment variable {var}, which is not set")
                    })?;
                    out.replace_range(start..=end, &value);
                }
                Ok(out)
            })
            .collect()
    }
}

/// Why a real-parts testbed cannot start here, if it cannot: HAProxy missing, the replica
/// command's environment unset, or (with a placement) no permission to make control groups.
/// Its arguments are a testbed plan's `replica`, whether it has `names`, and whether it has a
/// `placement`.
pub fn unavailable(replica: Option<&ReplicaPlan>, names: bool, placement: bool) -> Option<String> {
    let mut missing = Vec::new();
    if haproxy_program().is_none() {
        missing.push("haproxy is not installed (Debian: apt-get install haproxy)".to_owned());
    }
    if names && names::dnsmasq_program().is_none() {
        missing.push("dnsmasq is not installed (Debian: apt-get install dnsmasq-base)".to_owned());
    }
    if let Some(replica) = replica {
        if let Err(e) = replica.argv("replica-0", ([127, 0, 0, 1], 1).into()) {
            missing.push(format!("{e:#}"));
        }
    }
    if placement {
        // SAFETY: geteuid reads a number; no memory is involved.
        #[allow(unsafe_code)]
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            missing.push("placement makes control groups, which needs root".to_owned());
        }
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// The running testbed: replicas, proxy, the run's folder.
#[derive(Debug)]
pub struct RealBed {
    plan: ReplicaPlan,
    folder: PathBuf,
    replicas: Vec<Replica>,
    proxy: Child,
    proxy_port: u16,
    placed: Option<Placed>,
    names: Option<names::Names>,
    /// The next release's replicas, declared to HAProxy out of service (name, port): a
    /// rollout's ([`rollout`]); empty otherwise.
    standby: Vec<(String, u16)>,
}

impl RealBed {
    /// Starts `count` replicas (all at once) and the proxy; returns when every replica answers
    /// its ready path and the proxy counts each up. `standby` more replicas (`replica-COUNT`
    /// ...) are declared to HAProxy out of service, each on a port of its own, for a rollout or
    /// a scale-out to start and put in ([`rollout::roll`], [`scale_out::scale_out`]). `isolated`: each replica in a
    /// network namespace of its own ([`Netns`]), listening on its address there (the command's
    /// `{host}`), so a black-hole can drop its packets alone.
    pub fn start(
        (plan, names_plan): (&ReplicaPlan, Option<&NamesPlan>),
        (count, standby, isolated): (usize, usize, bool),
        folder: &Path,
        mut placed: Option<Placed>,
        stop: &AtomicBool,
    ) -> Result<RealBed> {
        if standby > 0 && names_plan.is_some() {
            bail!("a rollout's replicas are declared to HAProxy by port: [testbed.rollout] takes no [testbed.names]");
        }
        if isolated && (standby > 0 || names_plan.is_some()) {
            bail!("isolated real replicas keep their namespace's address for the run: they take no [testbed.rollout] or [testbed.names]");
        }
        let standby: Vec<(String, u16)> = (count..count + standby)
            .map(|i| Ok((format!("replica-{i}"), free_port()?)))
            .collect::<Result<_>>()?;
        let (mut replicas, bed_error) =
            Self::launch_all(plan, (count, isolated), folder, &mut placed);
        let (proxy, proxy_port, names) = match Self::front(
            plan,
            (names_plan, &standby),
            &replicas,
            folder,
            placed.as_mut(),
        ) {
            Ok(front) => front,
            Err(e) => {
                // Nothing of the testbed outlives a failed start: the replicas launched
                // are stopped before their placement's groups are removed.
                for r in &mut replicas {
                    stop_group(&mut r.child, Duration::from_secs(10));
                }
                return Err(e);
            }
        };
        let mut bed = RealBed {
            plan: plan.clone(),
            folder: folder.to_path_buf(),
            replicas,
            proxy,
            proxy_port,
            placed,
            names,
            standby,
        };
        if let Some(e) = bed_error {
            return Err(e);
        }
        bed.await_ready(count, stop)?;
        Ok(bed)
    }

    /// Launches replicas `0..count` (each in a namespace of its own with `isolated`), in order,
    /// until one fails: those launched, and the error that stopped the rest.
    fn launch_all(
        plan: &ReplicaPlan,
        (count, isolated): (usize, bool),
        folder: &Path,
        placed: &mut Option<Placed>,
    ) -> (Vec<Replica>, Option<StudyError>) {
        let mut replicas = Vec::new();
        for i in 0..count {
            let name = format!("replica-{i}");
            let launched = Self::place(i, isolated).and_then(|(port, netns)| {
                let child =
                    Self::launch(plan, (&name, port, netns.as_ref()), folder, placed.as_mut())?;
                Ok((port, child, netns))
            });
            match launched {
                Ok((port, child, netns)) => replicas.push(Replica {
                    name,
                    port,
                    child,
                    started: Instant::now(),
                    netns,
                }),
                Err(e) => return (replicas, Some(e)),
            }
        }
        (replicas, None)
    }

    /// What stands in front of the replicas: the names (with `[testbed.names]`) and HAProxy,
    /// with the port it listens on.
    fn front(
        plan: &ReplicaPlan,
        (names_plan, standby): (Option<&NamesPlan>, &[(String, u16)]),
        replicas: &[Replica],
        folder: &Path,
        mut placed: Option<&mut Placed>,
    ) -> Result<(Child, u16, Option<names::Names>)> {
        let proxy_port = free_port()?;
        let socket = folder.join("haproxy.sock");
        let _ = std::fs::remove_file(&socket);
        let pairs: Vec<(String, u16)> = replicas.iter().map(|r| (r.name.clone(), r.port)).collect();
        let addresses: Vec<(String, SocketAddr)> = replicas
            .iter()
            .map(|r| (r.name.clone(), r.address()))
            .collect();
        let names = match names_plan {
            Some(NamesPlan::Dnsmasq) => {
                Some(names::Names::start(&pairs, folder, placed.as_deref_mut())?)
            }
            None => None,
        };
        let resolvers = names.as_ref().map(names::Names::haproxy_resolvers);
        let mut config = haproxy_config(
            proxy_port,
            &addresses,
            &plan.ready_path,
            &socket,
            resolvers.as_deref(),
        );
        for (name, port) in standby {
            config.push_str(&rollout::standby_server_line(name, *port));
        }
        let proxy = start_proxy(&config, folder, placed)?;
        Ok((proxy, proxy_port, names))
    }

    /// Where replica `index` will listen: a free loopback port, or with `isolated` a namespace
    /// of its own (made now) and the port [`ISOLATED_PORT`] in it.
    fn place(index: usize, isolated: bool) -> Result<(u16, Option<Netns>)> {
        match isolated {
            true => {
                let netns = Netns::create('v', index)
                    .with_context(|| format!("cannot make replica-{index}'s network namespace"))?;
                Ok((ISOLATED_PORT, Some(netns)))
            }
            false => Ok((free_port()?, None)),
        }
    }

    /// Starts replica `name` on `port` (in `netns`, where given), its output appended to its
    /// log and its pid written beside it.
    fn launch(
        plan: &ReplicaPlan,
        (name, port, netns): (&str, u16, Option<&Netns>),
        folder: &Path,
        placed: Option<&mut Placed>,
    ) -> Result<Child> {
        let host = netns.map_or(std::net::Ipv4Addr::LOCALHOST, Netns::address);
        let argv = plan.argv(name, SocketAddr::from((host, port)))?;
        let argv = match netns {
            Some(ns) => ns.wrap(&argv),
            None => argv,
        };
        let joiner = match placed {
            Some(p) => Some(Joiner::new(&p.target_procs(name)?)?),
            None => None,
        };
        let log = folder.join(format!("{name}.log"));
        let _ = writeln!(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)?,
            "== percentes study runner: starting {name} on port {port}: {}",
            argv.join(" ")
        );
        let child = spawn(&argv, &log, joiner)?;
        std::fs::write(
            folder.join(format!("{name}.pid")),
            format!("{}\n", child.id()),
        )?;
        Ok(child)
    }

    fn await_ready(&mut self, count: usize, stop: &AtomicBool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs_f64(self.plan.start_timeout_s);
        let socket = self.folder.join("haproxy.sock");
        loop {
            for r in &mut self.replicas {
                if let Ok(Some(status)) = r.child.try_wait() {
                    bail!(
                        "{} exited while starting ({status}); see {}",
                        r.name,
                        self.folder.join(format!("{}.log", r.name)).display()
                    );
                }
            }
            if let Ok(Some(status)) = self.proxy.try_wait() {
                bail!(
                    "HAProxy exited ({status}); see {}",
                    self.folder.join("haproxy.log").display()
                );
            }
            let all_ready = self
                .replicas
                .iter()
                .all(|r| answers(r.address(), &self.plan.ready_path));
            let up = haproxy_states(&socket)
                .map(|s| s.values().filter(|v| v.starts_with("UP")).count())
                .unwrap_or(0);
            if all_ready && up == count {
                return Ok(());
            }
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted while the replicas started; they are stopped again");
            }
            if Instant::now() > deadline {
                bail!(
                    "the replicas were not all ready within {} s (start_timeout_s); see the NAME.log files in {}",
                    self.plan.start_timeout_s,
                    self.folder.display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The proxy's address: the service the recorder sends to.
    pub fn service(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.proxy_port))
    }

    /// Each replica's name and the address it is found by: its SRV name with
    /// `[testbed.names]`, else its own `127.0.0.1:port`.
    /// A rollout's standby replicas follow, each at the port it will serve on.
    pub fn replica_addresses(&self) -> Vec<(String, String)> {
        self.replicas
            .iter()
            .map(|r| {
                let address = match self.names {
                    Some(_) => names::srv_name(&r.name),
                    None => r.address().to_string(),
                };
                (r.name.clone(), address)
            })
            .chain(self.standby.iter().map(|(name, port)| {
                (
                    name.clone(),
                    SocketAddr::from(([127, 0, 0, 1], *port)).to_string(),
                )
            }))
            .collect()
    }

    /// The DNS server that serves the replicas' names, with `[testbed.names]`.
    pub fn nameserver(&self) -> Option<SocketAddr> {
        self.names.as_ref().map(names::Names::address)
    }

    /// Each isolated replica's name and network namespace (none on a bed not isolated): the
    /// scenario's `{netns:NAME}`.
    pub fn namespaces(&self) -> Vec<(String, String)> {
        self.replicas
            .iter()
            .filter_map(|r| Some((r.name.clone(), r.netns.as_ref()?.name().to_owned())))
            .collect()
    }

    /// Each replica's name and pid file.
    pub fn pid_files(&self) -> Vec<(String, PathBuf)> {
        self.replicas
            .iter()
            .map(|r| (r.name.clone(), self.folder.join(format!("{}.pid", r.name))))
            .collect()
    }

    /// How long each replica took from its start to its first readiness, in the order started.
    pub fn start_times(&self) -> Vec<(String, Duration)> {
        self.replicas
            .iter()
            .map(|r| (r.name.clone(), r.started.elapsed()))
            .collect()
    }

    /// Starts replica `index` again: on a new port with names (its record moved there), on
    /// its own port (in its own namespace) without. Returns the port.
    fn restart(&mut self, index: usize) -> Result<u16> {
        let port = match self.names {
            Some(_) => free_port()?,
            None => self.replicas[index].port,
        };
        let name = self.replicas[index].name.clone();
        let netns = self.replicas[index].netns.as_ref();
        let child = RealBed::launch(
            &self.plan,
            (&name, port, netns),
            &self.folder,
            self.placed.as_mut(),
        )?;
        let replica = &mut self.replicas[index];
        replica.child = child;
        replica.port = port;
        replica.started = Instant::now();
        self.rename()?;
        Ok(port)
    }

    /// Serves the replicas' current ports under their names (nothing without names).
    fn rename(&mut self) -> Result<()> {
        let pairs: Vec<(String, u16)> = self
            .replicas
            .iter()
            .map(|r| (r.name.clone(), r.port))
            .collect();
        match self.names.as_mut() {
            Some(names) => names.update(&pairs, self.placed.as_mut()),
            None => Ok(()),
        }
    }

    /// Takes the testbed down (as dropping it does) and confirms it: no process left in any
    /// group it started, HAProxy's port closed. The words say what was checked and what, if
    /// anything, is left.
    pub fn teardown(self) -> String {
        let groups: Vec<(String, i32)> = self
            .replicas
            .iter()
            .map(|r| (r.name.clone(), r.child.id()))
            .chain(std::iter::once(("HAProxy".to_owned(), self.proxy.id())))
            .filter_map(|(name, pid)| Some((name, i32::try_from(pid).ok()?)))
            .collect();
        let service = self.service();
        let namespaces: Vec<String> = self.namespaces().into_iter().map(|(_, ns)| ns).collect();
        drop(self);
        let alive = |pid: i32| {
            // SAFETY: kill(2) with signal 0 sends nothing: it asks whether any process of the
            // group exists; no memory is involved.
            #[allow(unsafe_code)]
            let alive = unsafe { libc::kill(-pid, 0) } == 0;
            alive
        };
        // A group's last members, killed, may still wait a moment for their new parent to reap
        // them.
        let since = Instant::now();
        while groups.iter().any(|(_, pid)| alive(*pid)) && since.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left: Vec<&str> = groups
            .iter()
            .filter(|(_, pid)| alive(*pid))
            .map(|(name, _)| name.as_str())
            .collect();
        let open =
            std::net::TcpStream::connect_timeout(&service, Duration::from_millis(200)).is_ok();
        // `ip netns` keeps a namespace's name under /run/netns while it exists.
        let kept: Vec<&str> = namespaces
            .iter()
            .filter(|ns| Path::new("/run/netns").join(ns).exists())
            .map(String::as_str)
            .collect();
        let namespaces_said = match (namespaces.is_empty(), kept.is_empty()) {
            (true, _) => String::new(),
            (false, true) => format!(", the namespaces {} deleted", namespaces.join(", ")),
            (false, false) => format!("; the namespaces {} still exist", kept.join(", ")),
        };
        match (left.is_empty(), open, kept.is_empty()) {
            (true, false, true) => format!(
                "confirmed: the process groups of {} gone, {service} closed{namespaces_said}",
                groups
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => format!(
                "NOT confirmed: {}{}{namespaces_said}",
                if left.is_empty() {
                    String::new()
                } else {
                    format!("processes left in the groups of {}; ", left.join(", "))
                },
                if open {
                    format!("{service} still accepts connections")
                } else {
                    format!("{service} closed")
                }
            ),
        }
    }

    /// The placement's description, if the bed is placed.
    pub fn placement(&self) -> Option<String> {
        self.placed.as_ref().map(|p| p.description.clone())
    }

    /// The proxy and its timing-relevant settings (the `proxy` host fact).
    pub fn proxy(&self) -> String {
        haproxy_fact(&haproxy_version())
    }
}

impl Drop for RealBed {
    fn drop(&mut self) {
        for r in &mut self.replicas {
            stop_group(&mut r.child, Duration::from_secs(10));
        }
        stop_group(&mut self.proxy, Duration::from_secs(2));
        self.names.take();
        // The placement's groups go last, once nothing of the target is in them.
        self.placed.take();
    }
}

/// What the supervisor does after the victim dies, in real time.
#[derive(Clone, Copy, Debug)]
pub struct Supervision {
    /// From noticing the death to starting the replacement.
    pub restart_delay: Duration,
}

/// The supervisor's part: wait for `victim` to die, restart it, and report every boundary into
/// the journal's timeline as it is seen. Returns when the replacement answers its ready path, the
/// run ends (`finished`), or the replacement cannot start (reported as `restart-failed`).
pub fn supervise(
    bed: &mut RealBed,
    victim: &str,
    steps: Supervision,
    inbox: &TimelineInbox,
    finished: &AtomicBool,
) {
    let Some(index) = bed.replicas.iter().position(|r| r.name == victim) else {
        inbox.report(
            TimelineSubject::Orchestrator,
            &format!("no replica named {victim} on the testbed"),
            None,
        );
        return;
    };
    let Some(status) = await_death(&mut bed.replicas[index], finished) else {
        return;
    };
    let mut detection = Detection {
        socket: bed.folder.join("haproxy.sock"),
        victim: victim.to_owned(),
        seen: false,
    };
    let delay_until = Instant::now() + steps.restart_delay;
    while Instant::now() < delay_until && !finished.load(Ordering::Relaxed) {
        detection.check(inbox);
        std::thread::sleep(Duration::from_millis(20));
    }
    let named = bed.names.is_some();
    inbox.report(
        TimelineSubject::Reschedule,
        &format!(
            "the supervisor saw {victim} exit ({status}) and restarts it on {}",
            if named {
                "a new port, found by its name"
            } else {
                "the same port"
            }
        ),
        None,
    );
    let log = bed.folder.join(format!("{victim}.log"));
    let offset = std::fs::metadata(&log).map_or(0, |m| m.len());
    let plan = bed.plan.clone();
    match bed.restart(index) {
        Ok(port) => inbox.report(
            TimelineSubject::ContainerStart,
            &format!(
                "{victim}'s replacement started (pid {}, port {port}{})",
                bed.replicas[index].child.id(),
                if named {
                    format!(", its record {} moved to it", names::srv_name(victim))
                } else {
                    String::new()
                }
            ),
            None,
        ),
        Err(e) => {
            inbox.report(TimelineSubject::RestartFailed, &format!("{e:#}"), None);
            return;
        }
    }
    let watch = Watch {
        log,
        offset,
        plan: &plan,
    };
    watch.until_ready(&mut bed.replicas[index], &mut detection, inbox, finished);
}

/// Waits for the replica's leader to exit, then kills what is left of its group (the injector
/// killed the group; a crash of the leader alone would leave its engine processes). `None`
/// when the run ended first.
fn await_death(replica: &mut Replica, finished: &AtomicBool) -> Option<std::process::ExitStatus> {
    let status = loop {
        if finished.load(Ordering::Relaxed) {
            return None;
        }
        if let Ok(Some(status)) = replica.child.try_wait() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if let Ok(pid) = i32::try_from(replica.child.id()) {
        // SAFETY: kill(2) on the group this runner started for the replica; no memory.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    Some(status)
}

/// The service's detection: HAProxy's health check marking the victim down, reported once.
struct Detection {
    socket: PathBuf,
    victim: String,
    seen: bool,
}

impl Detection {
    fn check(&mut self, inbox: &TimelineInbox) {
        if self.seen {
            return;
        }
        let state = haproxy_states(&self.socket)
            .ok()
            .and_then(|s| s.get(&self.victim).cloned())
            .unwrap_or_default();
        // DOWN: its health check failed twice. MAINT: its name stopped naming the old port (a
        // named replica whose replacement was started before the checks took it out).
        let why = if state.starts_with("DOWN") {
            "DOWN (its health check failed twice)"
        } else if state.starts_with("MAINT") {
            "MAINT (its name's record moved to the replacement)"
        } else {
            return;
        };
        self.seen = true;
        inbox.report(
            TimelineSubject::Detected,
            &format!(
                "HAProxy marked {} {why} and stopped routing to it",
                self.victim
            ),
            None,
        );
    }
}

/// The replacement's start-up as its log and its ready path show it.
struct Watch<'a> {
    log: PathBuf,
    offset: u64,
    plan: &'a ReplicaPlan,
}

impl Watch<'_> {
    /// Reports `weight-load` when the log shows it and `restart-failed` when the replacement
    /// dies; returns once it answers its ready path (and detection was seen), or at the run's
    /// end or the start timeout.
    fn until_ready(
        self,
        replica: &mut Replica,
        detection: &mut Detection,
        inbox: &TimelineInbox,
        finished: &AtomicBool,
    ) {
        let mut weights = WeightsLine::new(
            &self.log,
            self.offset,
            self.plan.weights_loaded_line.as_deref(),
        );
        let deadline = Instant::now() + Duration::from_secs_f64(self.plan.start_timeout_s);
        while !finished.load(Ordering::Relaxed) && Instant::now() < deadline {
            detection.check(inbox);
            weights.look(&replica.name, inbox);
            if let Ok(Some(status)) = replica.child.try_wait() {
                inbox.report(
                    TimelineSubject::RestartFailed,
                    &format!(
                        "{}'s replacement exited while starting ({status})",
                        replica.name
                    ),
                    None,
                );
                return;
            }
            if weights.seen && detection.seen && answers(replica.address(), &self.plan.ready_path) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_takes_its_port_name_and_environment() {
        let plan = ReplicaPlan {
            command: vec![
                "{env:PERCENTES_TEST_SERVE}".into(),
                "serve".into(),
                "--port={port}".into(),
                "--host={host}".into(),
                "{name}".into(),
            ],
            ready_path: "/health".into(),
            start_timeout_s: 60.0,
            weights_loaded_line: None,
        };
        plan.check().unwrap();
        std::env::set_var("PERCENTES_TEST_SERVE", "/opt/serve.sh");
        assert_eq!(
            plan.argv("replica-1", ([169, 254, 9, 2], 8101).into())
                .unwrap(),
            [
                "/opt/serve.sh",
                "serve",
                "--port=8101",
                "--host=169.254.9.2",
                "replica-1"
            ]
        );
        std::env::remove_var("PERCENTES_TEST_SERVE");
        let why = plan
            .argv("replica-1", ([127, 0, 0, 1], 8101).into())
            .unwrap_err()
            .to_string();
        assert!(why.contains("PERCENTES_TEST_SERVE"), "{why}");
        let mut no_port = plan.clone();
        no_port.command = vec!["serve".into()];
        assert!(no_port.check().unwrap_err().to_string().contains("{port}"));
    }

    /// The configuration names each replica as G1 reads it, checks health, and redispatches.
    /// Issue 50 item 5: a ready path that would split the health check's request, an empty
    /// weights line (it matches every log line), and a key the proxy's or names' table does not
    /// have are refused, each by name.
    #[test]
    fn a_testbed_value_out_of_its_domain_is_refused() {
        let plan = ReplicaPlan {
            command: vec!["serve".into(), "--port={port}".into()],
            ready_path: "/health".into(),
            start_timeout_s: 60.0,
            weights_loaded_line: Some("Loading weights took".into()),
        };
        plan.check().unwrap();
        for path in [
            "/health HTTP/1.1\r\nX-Injected: yes\r\nX-Pad: ",
            "/he alth",
            "health",
        ] {
            let bad = ReplicaPlan {
                ready_path: path.into(),
                ..plan.clone()
            };
            let why = bad.check().unwrap_err().to_string();
            assert!(why.contains("ready_path"), "{path:?}: {why}");
        }
        let empty = ReplicaPlan {
            weights_loaded_line: Some(" ".into()),
            ..plan.clone()
        };
        let why = empty.check().unwrap_err().to_string();
        assert!(why.contains("weights_loaded_line is empty"), "{why}");
        #[derive(Debug, Deserialize)]
        struct Bed {
            #[allow(dead_code)]
            names: NamesPlan,
            #[allow(dead_code)]
            proxy: ProxyPlan,
        }
        let read = |text: &str| toml::from_str::<Bed>(text).map_err(|e| e.to_string());
        read("[names]\nkind = \"dnsmasq\"\n[proxy]\nkind = \"haproxy\"\n").unwrap();
        let why = read("[names]\nkind = \"dnsmasq\"\nport = 53\n[proxy]\nkind = \"haproxy\"\n")
            .unwrap_err();
        assert!(why.contains("unknown field `port`"), "{why}");
        let why = read("[names]\nkind = \"dnsmasq\"\n[proxy]\nkind = \"haproxy\"\nmaxconn = 1\n")
            .unwrap_err();
        assert!(why.contains("unknown field `maxconn`"), "{why}");
        let why = read("[names]\nkind = \"bind9\"\n[proxy]\nkind = \"haproxy\"\n").unwrap_err();
        assert!(why.contains("bind9"), "{why}");
    }
}
