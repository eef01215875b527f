//! The local testbed: N mock replicas and the router as child processes, and injectors that act
//! on them the way a cluster would, each leaving armed / fired / confirmed records.
//!
//! The testbed plays the control plane: it tells the router which endpoints are ready. A clean
//! delete kills the replica with SIGKILL (its sockets linger 0, so the kernel resets every
//! in-flight connection) and removes the endpoint at once, as deleting a pod with grace 0 does. A
//! restart brings the same replica back after a delay with a slow reload (503 until loaded) and
//! marks it ready when its health check passes.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, ErrorKind};
use crate::netns::{run, Netns};

/// How long a child may take to start listening.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);

/// One injector record, on the testbed's monotonic clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InjectorRecord {
    /// `clean-delete`, `restart`, `black-hole`.
    pub injector: &'static str,
    /// The replica acted on.
    pub target: String,
    /// `armed`, `fired`, `confirmed`, `expired`, `ready`, `failed`.
    pub event: &'static str,
    /// ns since the testbed started.
    pub at_ns: u64,
    /// What was done, in words.
    pub detail: String,
}

#[derive(Debug)]
struct Replica {
    name: String,
    address: SocketAddr,
    child: Option<Child>,
    /// The network namespace the replica runs in, for isolated testbeds (deleted after the
    /// replica is killed: fields drop after [`Testbed`]'s `drop`).
    namespace: Option<Netns>,
}

/// The port isolated replicas listen on inside their namespaces.
const ISOLATED_PORT: u16 = 8000;
pub use crate::netns::ISOLATED_REPLICAS_MAX;

/// Why an isolated testbed cannot run here, if it cannot: root, `ip` and `iptables` are needed.
pub fn isolation_unavailable() -> Option<String> {
    #[cfg(unix)]
    {
        // Root is uid 0, read from /proc: no unsafe libc call needed.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let uid = status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or("?");
        if uid != "0" {
            return Some(format!(
                "network namespaces need root (running as uid {uid})"
            ));
        }
    }
    for tool in ["ip", "iptables"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            return Some(format!(
                "`{tool}` is not installed (Debian: apt-get install iproute2 iptables)"
            ));
        }
    }
    None
}

/// A running testbed. Dropping it kills every child.
#[derive(Debug)]
pub struct Testbed {
    binary: PathBuf,
    mock_config: Option<PathBuf>,
    start: Instant,
    replicas: Vec<Replica>,
    router: Child,
    router_address: SocketAddr,
    records: Vec<InjectorRecord>,
}

/// Spawns `binary ARGS`, waits for its `listening on http://ADDR` line on stderr, and keeps
/// draining stderr in the background so the child never blocks on a full pipe.
fn spawn_listening(binary: &Path, args: &[String]) -> std::io::Result<(Child, SocketAddr)> {
    let mut command = Command::new(binary);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // A process group of its own: a Ctrl-C at the terminal reaches the controller, which stops
    // its run cleanly (the recorder drains in-flight requests against live replicas) and then
    // ends the children through Drop, instead of every replica dying mid-drain.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn()?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = String::new();
        let mut sent = false;
        while reader.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            if !sent {
                if let Some(addr) = line
                    .split("listening on http://")
                    .nth(1)
                    .and_then(|rest| rest.split([';', ' ', '\n']).next())
                {
                    let _ = tx.send(addr.parse::<SocketAddr>());
                    sent = true;
                }
            }
            line.clear();
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(Ok(addr)) => Ok((child, addr)),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            Err(std::io::Error::other(format!(
                "{} {args:?} did not report a listening address in time ({other:?})",
                binary.display()
            )))
        }
    }
}

/// A small blocking HTTP exchange for control traffic (health checks, router admin).
pub fn http_call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = format!("{method} {path} HTTP/1.1\r\nhost: testbed\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    Ok((status, body))
}

impl Testbed {
    /// Starts `replicas` mocks named replica-0.. and the router in front of them, all on
    /// ephemeral loopback ports. `binary` is the percentes executable.
    pub fn start(
        binary: &Path,
        replicas: usize,
        mock_config: Option<&Path>,
    ) -> std::io::Result<Testbed> {
        let start = Instant::now();
        let mut started = Vec::new();
        for i in 0..replicas {
            let name = format!("replica-{i}");
            let (child, address) =
                spawn_listening(binary, &mock_args(&name, "127.0.0.1:0", mock_config, None))?;
            started.push(Replica {
                name,
                address,
                child: Some(child),
                namespace: None,
            });
        }
        let mut args = vec!["router".to_owned(), "--listen".into(), "127.0.0.1:0".into()];
        for r in &started {
            args.push("--upstream".into());
            args.push(format!("{}={}", r.name, r.address));
        }
        let (router, router_address) = spawn_listening(binary, &args)?;
        Ok(Testbed {
            binary: binary.to_owned(),
            mock_config: mock_config.map(Path::to_owned),
            start,
            replicas: started,
            router,
            router_address,
            records: Vec::new(),
        })
    }

    /// Starts `replicas` mocks, each in a network namespace of its own behind a veth pair (so one
    /// can be black-holed), and the router on loopback in front of them. Needs root, `ip` and
    /// `iptables` ([`isolation_unavailable`] says what is missing).
    pub fn start_isolated(
        binary: &Path,
        replicas: usize,
        mock_config: Option<&Path>,
    ) -> std::io::Result<Testbed> {
        if let Some(why) = isolation_unavailable() {
            return Err(std::io::Error::other(why));
        }
        if replicas == 0 || replicas > ISOLATED_REPLICAS_MAX {
            return Err(std::io::Error::other(format!(
                "1..={ISOLATED_REPLICAS_MAX} isolated replicas"
            )));
        }
        let start = Instant::now();
        let mut bed = Testbed {
            binary: binary.to_owned(),
            mock_config: mock_config.map(Path::to_owned),
            start,
            replicas: Vec::new(),
            router: Command::new("true").spawn()?, // replaced below once the replicas run
            router_address: "127.0.0.1:0".parse().expect("literal"),
            records: Vec::new(),
        };
        for i in 0..replicas {
            let name = format!("replica-{i}");
            let netns = Netns::create('r', i)?;
            let listen = format!("{}:{ISOLATED_PORT}", netns.address());
            let argv: Vec<String> = std::iter::once(binary.display().to_string())
                .chain(mock_args(&name, &listen, mock_config, None))
                .collect();
            let args = netns.wrap(&argv);
            // Registered at once so that Drop removes the namespace even if the start fails.
            bed.replicas.push(Replica {
                name: name.clone(),
                address: listen.parse().expect("valid"),
                child: None,
                namespace: Some(netns),
            });
            let (child, address) = spawn_listening(Path::new(&args[0]), &args[1..])?;
            let replica = bed.replicas.last_mut().expect("pushed above");
            replica.child = Some(child);
            replica.address = address;
        }
        let mut args = vec!["router".to_owned(), "--listen".into(), "127.0.0.1:0".into()];
        for r in &bed.replicas {
            args.push("--upstream".into());
            args.push(format!("{}={}", r.name, r.address));
        }
        let (router, router_address) = spawn_listening(binary, &args)?;
        let _ = bed.router.wait();
        bed.router = router;
        bed.router_address = router_address;
        Ok(bed)
    }

    /// Black-hole: drops every packet to and from the replica's namespace for `partition`, after
    /// first arming the expiry as a process of its own (so the partition heals even if this
    /// controller dies). Confirmed when a connection attempt to the replica gets no answer.
    /// Returns the expiry process; [`Testbed::await_expiry`] waits for it and records the expiry.
    pub fn black_hole(&mut self, name: &str, partition: Duration) -> std::io::Result<Child> {
        let replica = self
            .replicas
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| std::io::Error::other(format!("no replica {name}")))?;
        let namespace = replica
            .namespace
            .as_ref()
            .map(|n| n.name().to_owned())
            .ok_or_else(|| {
                std::io::Error::other("black-hole needs a testbed started with start_isolated")
            })?;
        let address = replica.address;
        let seconds = format!("{:.3}", partition.as_secs_f64());
        let heal =
            format!("sleep {seconds}; iptables -D INPUT -j DROP; iptables -D OUTPUT -j DROP");
        let expiry = Command::new("ip")
            .args(["netns", "exec", &namespace, "sh", "-c", &heal])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.record(
            "black-hole",
            name,
            "armed",
            format!("expiry in {seconds} s armed (pid {})", expiry.id()),
        );
        run(
            "ip",
            &[
                "netns", "exec", &namespace, "iptables", "-I", "INPUT", "-j", "DROP",
            ],
        )?;
        run(
            "ip",
            &[
                "netns", "exec", &namespace, "iptables", "-I", "OUTPUT", "-j", "DROP",
            ],
        )?;
        self.record(
            "black-hole",
            name,
            "fired",
            format!("all traffic of {namespace} dropped"),
        );
        let silent = TcpStream::connect_timeout(&address, Duration::from_millis(300)).is_err();
        self.record(
            "black-hole",
            name,
            if silent { "confirmed" } else { "failed" },
            format!("{address} unanswered: {silent}"),
        );
        Ok(expiry)
    }

    /// Waits for a black-hole's expiry process and records the expiry.
    pub fn await_expiry(&mut self, name: &str, mut expiry: Child) -> std::io::Result<()> {
        let status = expiry.wait()?;
        let event = if status.success() {
            "expired"
        } else {
            "failed"
        };
        self.record(
            "black-hole",
            name,
            event,
            format!("expiry process exited {status}"),
        );
        Ok(())
    }

    /// The service address (the router).
    pub fn service(&self) -> SocketAddr {
        self.router_address
    }

    /// A replica's own address, for direct requests (replica-ready, calibration).
    pub fn replica(&self, name: &str) -> Option<SocketAddr> {
        self.replicas
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.address)
    }

    /// The network namespace a replica of an isolated testbed runs in (for injectors that act
    /// inside it, such as a black-hole's `ip netns exec NAMESPACE iptables ...`).
    pub fn namespace(&self, name: &str) -> Option<&str> {
        self.replicas
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.namespace.as_ref())
            .map(Netns::name)
    }

    /// Process ids of the replicas that are running, by name (for pid-file injectors).
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.replicas
            .iter()
            .filter_map(|r| r.child.as_ref().map(|c| (r.name.clone(), c.id())))
            .collect()
    }

    /// The instant the testbed started: every record's `at_ns` counts from it.
    pub fn started_at(&self) -> Instant {
        self.start
    }

    /// Every injector action so far, in order.
    pub fn records(&self) -> &[InjectorRecord] {
        &self.records
    }

    fn record(
        &mut self,
        injector: &'static str,
        target: &str,
        event: &'static str,
        detail: String,
    ) {
        let at_ns = self.start.elapsed().as_nanos() as u64;
        self.records.push(InjectorRecord {
            injector,
            target: target.to_owned(),
            event,
            at_ns,
            detail,
        });
    }

    /// Marks an endpoint ready or not in the router (the control plane's job: a scenario does it
    /// after the node-monitor grace period of a black-hole, for instance).
    pub fn set_ready(&self, name: &str, ready: bool) -> std::io::Result<()> {
        let body = format!("{{\"name\":\"{name}\",\"ready\":{ready}}}");
        match http_call(
            self.router_address,
            "POST",
            "/admin/endpoints",
            &body,
            Duration::from_secs(2),
        )? {
            (200, _) => Ok(()),
            (status, body) => Err(std::io::Error::other(format!(
                "router refused endpoint change: {status} {body}"
            ))),
        }
    }

    /// Clean delete: SIGKILL the replica (in-flight connections reset) and remove its endpoint.
    /// Confirmed when the replica's port refuses connections.
    pub fn clean_delete(&mut self, name: &str) -> std::io::Result<()> {
        let index = self
            .replicas
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| std::io::Error::other(format!("no replica {name}")))?;
        self.record("clean-delete", name, "armed", "grace 0".into());
        let address = self.replicas[index].address;
        let mut child = self.replicas[index]
            .child
            .take()
            .ok_or_else(|| std::io::Error::other(format!("{name} is not running")))?;
        child.kill()?;
        self.record(
            "clean-delete",
            name,
            "fired",
            format!("SIGKILL pid {}", child.id()),
        );
        let _ = child.wait();
        self.set_ready(name, false)?;
        let refused = TcpStream::connect_timeout(&address, Duration::from_millis(500)).is_err();
        let event = if refused { "confirmed" } else { "failed" };
        self.record(
            "clean-delete",
            name,
            event,
            format!("{address} refuses connections: {refused}"),
        );
        Ok(())
    }

    /// Collects a replica that something else killed (the recorder's kill-pid-file injector): waits
    /// for its exit so [`Testbed::restart`] can bring it back. Errors if it is still running after
    /// `timeout`.
    pub fn reap(&mut self, name: &str, timeout: Duration) -> std::io::Result<()> {
        let replica = self
            .replicas
            .iter_mut()
            .find(|r| r.name == name)
            .ok_or_else(|| std::io::Error::other(format!("no replica {name}")))?;
        let Some(child) = replica.child.as_mut() else {
            return Ok(());
        };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                replica.child = None;
                let detail = format!("exited: {status}");
                self.record("external-kill", name, "reaped", detail);
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!("{name} is still running")));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Brings a deleted replica back on the same address after `delay`, reloading for `reload`
    /// (503 until then), and marks its endpoint ready once its health check passes. Blocks until
    /// ready or `ready_timeout`.
    pub fn restart(
        &mut self,
        name: &str,
        delay: Duration,
        reload: Duration,
        ready_timeout: Duration,
    ) -> std::io::Result<()> {
        let index = self
            .replicas
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| std::io::Error::other(format!("no replica {name}")))?;
        if self.replicas[index].child.is_some() {
            return Err(std::io::Error::other(format!(
                "{name} is still running; delete it first"
            )));
        }
        self.record(
            "restart",
            name,
            "armed",
            format!("delay {delay:?}, reload {reload:?}"),
        );
        std::thread::sleep(delay);
        let address = self.replicas[index].address;
        let args = mock_args(
            name,
            &address.to_string(),
            self.mock_config.as_deref(),
            Some(reload),
        );
        let (child, _) = spawn_listening(&self.binary, &args)?;
        self.replicas[index].child = Some(child);
        self.record("restart", name, "fired", format!("listening on {address}"));
        let deadline = Instant::now() + ready_timeout;
        loop {
            if let Ok((200, _)) =
                http_call(address, "GET", "/health", "", Duration::from_millis(500))
            {
                self.set_ready(name, true)?;
                self.record(
                    "restart",
                    name,
                    "ready",
                    "health 200; endpoint ready".into(),
                );
                return Ok(());
            }
            if Instant::now() > deadline {
                self.record(
                    "restart",
                    name,
                    "failed",
                    format!("not healthy within {ready_timeout:?}"),
                );
                return Err(std::io::Error::other(format!(
                    "{name} not healthy within {ready_timeout:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn mock_args(
    name: &str,
    listen: &str,
    config: Option<&Path>,
    reload: Option<Duration>,
) -> Vec<String> {
    let mut args = vec![
        "mock".to_owned(),
        "--listen".into(),
        listen.into(),
        "--name".into(),
        name.into(),
    ];
    if let Some(config) = config {
        args.push("--config".into());
        args.push(config.display().to_string());
    }
    if let Some(reload) = reload {
        args.push("--slow-reload-ms".into());
        args.push(reload.as_millis().to_string());
    }
    args
}

/// `percentes testbed`: starts `replicas` replicas and the router (each replica in a network
/// namespace of its own when `isolated`), says where each listens and its pid through `say`,
/// writes `service.addr` and per replica `NAME.addr` and `NAME.pid` into `state_dir` when given,
/// and runs until Ctrl-C, then stops them all.
pub fn run_foreground(
    binary: &Path,
    replicas: usize,
    mock_config: Option<&Path>,
    isolated: bool,
    state_dir: Option<&Path>,
    say: impl Fn(&str),
) -> Result<(), Error> {
    if replicas == 0 {
        return Err(Error::refused("--replicas must be at least 1"));
    }
    let bed = if isolated {
        Testbed::start_isolated(binary, replicas, mock_config)
    } else {
        Testbed::start(binary, replicas, mock_config)
    }
    .map_err(|e| Error::new(ErrorKind::Start, format!("starting the testbed: {e}")))?;
    let io = |message: String| Error::new(ErrorKind::Io, message);
    let write = |name: &str, text: String| -> Result<(), Error> {
        let Some(dir) = state_dir else { return Ok(()) };
        std::fs::create_dir_all(dir)
            .map_err(|e| io(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join(name);
        std::fs::write(&path, format!("{text}\n"))
            .map_err(|e| io(format!("cannot write {}: {e}", path.display())))
    };
    say(&format!(
        "service (router): http://{}  (endpoints: GET/POST /admin/endpoints)",
        bed.service()
    ));
    write("service.addr", bed.service().to_string())?;
    for (name, pid) in bed.pids() {
        let address = bed
            .replica(&name)
            .map(|a| a.to_string())
            .unwrap_or_default();
        say(&format!("{name}: http://{address} pid {pid}"));
        write(&format!("{name}.addr"), address)?;
        write(&format!("{name}.pid"), pid.to_string())?;
    }
    say("Ctrl-C stops the testbed and every replica.");
    crate::wait_for_ctrl_c().map_err(|e| io(format!("waiting for Ctrl-C: {e}")))?;
    drop(bed);
    Ok(())
}

impl Drop for Testbed {
    fn drop(&mut self) {
        for replica in &mut self.replicas {
            if let Some(child) = replica.child.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = self.router.kill();
        let _ = self.router.wait();
    }
}
