//! Replicas addressed by name on the real-parts testbed (`[testbed.names]`), as a Kubernetes
//! headless Service addresses its pods: Debian's dnsmasq, started by the runner on a loopback
//! port of its own, serves one SRV record per replica, `_NAME._tcp.percentes.test`, naming
//! `NAME.percentes.test` (an A record, 127.0.0.1, which dnsmasq adds to each answer) and the
//! replica's port. A replacement comes back on a new port and the record follows it, so
//! whatever finds the replica by its name finds the replacement: HAProxy (its `resolvers`
//! section re-asks every 250 ms), the recorder's probes and scrapes and the fault's
//! confirmation (`target.nameserver`, `{nameserver}` in the scenario's config).
//!
//! dnsmasq does not re-read SRV records on SIGHUP, so a changed record is served by a restarted
//! dnsmasq: its configuration rewritten, the old process stopped, a new one started on the same
//! port, a few milliseconds in which a question goes unanswered (HAProxy keeps what it last
//! resolved; a probe asking then is `down`, as the replica still is). The record is changed
//! when the replacement starts, not when it is ready, as a Service that publishes not-ready
//! addresses does: readiness stays the probes' and HAProxy's health check's to see.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::error::{bail, Context, Result};
use crate::placement::{Joiner, Placed};

/// The domain the replicas' names live in: reserved for testing (RFC 2606), never forwarded.
pub const DOMAIN: &str = "percentes.test";

/// `[testbed.names]`. Read through [`super::KindOnly`]: serde's internally tagged unit
/// variants take any other key silently, and a misspelt key must not be.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(try_from = "super::KindOnly")]
pub enum NamesPlan {
    /// Debian's dnsmasq (package dnsmasq-base), started in the foreground by the runner.
    Dnsmasq,
}

impl TryFrom<super::KindOnly> for NamesPlan {
    type Error = super::UnknownKind;

    fn try_from(table: super::KindOnly) -> std::result::Result<NamesPlan, super::UnknownKind> {
        table.kind("testbed.names", "\"dnsmasq\"", |kind| {
            (kind == "dnsmasq").then_some(NamesPlan::Dnsmasq)
        })
    }
}

/// The SRV name replica `name` is found by.
pub fn srv_name(name: &str) -> String {
    format!("_{name}._tcp.{DOMAIN}")
}

/// dnsmasq's configuration: authoritative for [`DOMAIN`] only (a question outside it is
/// refused, never forwarded), on loopback `port`, one SRV record per replica (priority 0,
/// weight 100: HAProxy takes an SRV record's weight as the server's, and a weight of 0 would
/// leave a healthy server unused).
pub fn dnsmasq_config(port: u16, replicas: &[(String, u16)]) -> String {
    let mut text = format!(
        "# Written by the percentes study runner: the replicas' names (SRV records).\n\
         port={port}\nlisten-address=127.0.0.1\nbind-interfaces\nno-resolv\nno-hosts\n\
         local=/{DOMAIN}/\n"
    );
    for (name, replica_port) in replicas {
        text.push_str(&format!(
            "host-record={name}.{DOMAIN},127.0.0.1\nsrv-host={},{name}.{DOMAIN},{replica_port},0,100\n",
            srv_name(name)
        ));
    }
    text
}

/// dnsmasq's executable: on PATH, or where Debian puts it.
pub fn dnsmasq_program() -> Option<PathBuf> {
    super::process::program("dnsmasq")
}

/// The running name server.
#[derive(Debug)]
pub struct Names {
    child: Child,
    port: u16,
    folder: PathBuf,
}

/// A port free on loopback now for both UDP and TCP (dnsmasq listens on both): the kernel's
/// choice of a UDP port, kept only if TCP's same port is free too.
fn free_port() -> Result<u16> {
    for _ in 0..64 {
        let socket = UdpSocket::bind("127.0.0.1:0").context("cannot find a free UDP port")?;
        let port = socket.local_addr()?.port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("found no loopback port free for both UDP and TCP in 64 tries")
}

impl Names {
    /// Starts dnsmasq serving `replicas` (name, port), in the placement's target groups, and
    /// returns once it holds its port.
    pub fn start(
        replicas: &[(String, u16)],
        folder: &Path,
        placed: Option<&mut Placed>,
    ) -> Result<Names> {
        // A port is free when chosen and may be taken before dnsmasq binds it (a replica, a
        // test beside this one): then dnsmasq exits, and another port is tried.
        let mut placed = placed;
        let mut last = None;
        for _ in 0..3 {
            let port = free_port()?;
            let child = Self::spawn(port, replicas, folder, placed.as_deref_mut())?;
            let mut names = Names {
                child,
                port,
                folder: folder.to_path_buf(),
            };
            match names.await_bound() {
                Ok(()) => return Ok(names),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| crate::error::StudyError::refused("dnsmasq did not start")))
    }

    fn spawn(
        port: u16,
        replicas: &[(String, u16)],
        folder: &Path,
        placed: Option<&mut Placed>,
    ) -> Result<Child> {
        let config = folder.join("dnsmasq.conf");
        std::fs::write(&config, dnsmasq_config(port, replicas))?;
        let joiner = match placed {
            Some(p) => Some(Joiner::new(&p.target_procs("names")?)?),
            None => None,
        };
        let program = dnsmasq_program()
            .context("dnsmasq is not installed (Debian: apt-get install dnsmasq-base)")?;
        super::process::spawn(
            &[
                program.display().to_string(),
                "--keep-in-foreground".into(),
                "--log-facility=-".into(),
                // Its own pid file, not the system's /run/dnsmasq.pid.
                format!("--pid-file={}", folder.join("dnsmasq.pid").display()),
                format!("--conf-file={}", config.display()),
            ],
            &folder.join("dnsmasq.log"),
            joiner,
        )
        .context("cannot start dnsmasq")
    }

    /// Waits until dnsmasq holds its UDP port (binding it fails), at most 5 s.
    fn await_bound(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!(
                    "dnsmasq exited ({status}); see {}",
                    self.folder.join("dnsmasq.log").display()
                );
            }
            if UdpSocket::bind(("127.0.0.1", self.port)).is_err() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("dnsmasq did not take UDP port {} within 5 s", self.port);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Serves `replicas` from now on: dnsmasq restarted on the same port with the new records.
    pub fn update(
        &mut self,
        replicas: &[(String, u16)],
        placed: Option<&mut Placed>,
    ) -> Result<()> {
        super::process::stop_group(&mut self.child, Duration::from_secs(2));
        self.child = Self::spawn(self.port, replicas, &self.folder, placed)?;
        self.await_bound()
    }

    /// The server's address (`target.nameserver`).
    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// HAProxy's `resolvers` section asking this server: re-resolve every 250 ms, drop a
    /// record the server stopped serving at once, keep the last answer 10 s when a question
    /// goes unanswered (a restart).
    pub fn haproxy_resolvers(&self) -> String {
        format!(
            "resolvers names\n    nameserver dnsmasq {}\n    timeout resolve 250ms\n    \
             timeout retry 100ms\n    resolve_retries 3\n    hold valid 10s\n    hold obsolete 0s\n\n",
            self.address()
        )
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        super::process::stop_group(&mut self.child, Duration::from_secs(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each replica is an SRV record with a non-zero weight naming an A record on loopback, and
    /// nothing outside the test domain is answered.
    #[test]
    fn each_replica_is_an_srv_record_of_the_test_domain() {
        let text = dnsmasq_config(
            25353,
            &[("replica-0".into(), 8101), ("replica-1".into(), 8107)],
        );
        for needed in [
            "port=25353",
            "listen-address=127.0.0.1",
            "no-resolv",
            "local=/percentes.test/",
            "host-record=replica-1.percentes.test,127.0.0.1",
            "srv-host=_replica-1._tcp.percentes.test,replica-1.percentes.test,8107,0,100",
            "srv-host=_replica-0._tcp.percentes.test,replica-0.percentes.test,8101,0,100",
        ] {
            assert!(text.contains(needed), "{needed} missing from\n{text}");
        }
        assert_eq!(srv_name("replica-1"), "_replica-1._tcp.percentes.test");
    }
}
