//! A network namespace of its own for one replica, joined to the host by a veth pair: what lets
//! a black-hole drop every packet of one replica (iptables inside its namespace) and nothing
//! else. The mock testbed's isolated replicas and the real-parts testbed's both stand in one.
//!
//! Addresses are link-local: replica `i`'s pair is 169.254.T.(4i+1) on the host side and
//! .(4i+2) inside, where T is drawn from the process id and the bed's kind, so two testbeds of
//! one process, or of two processes, do not collide. Link-local traffic never leaves the machine.

use std::net::Ipv4Addr;
use std::process::Command;

/// At most this many isolated replicas a testbed (the /24 holds 64 /30 pairs).
pub const ISOLATED_REPLICAS_MAX: usize = 64;

/// One replica's namespace; dropping it deletes the namespace, and with it both veth ends.
#[derive(Debug)]
pub struct Netns {
    name: String,
    inside: Ipv4Addr,
}

impl Netns {
    /// Creates the namespace of replica `index` of a bed of `kind` (one ASCII letter the bed's
    /// names carry: `r` the mock testbed's, `v` the real-parts testbed's), with its veth pair up
    /// and its loopback up. Needs root and `ip` ([`crate::testbed::isolation_unavailable`]).
    pub fn create(kind: char, index: usize) -> std::io::Result<Netns> {
        if index >= ISOLATED_REPLICAS_MAX || !kind.is_ascii_lowercase() {
            return Err(std::io::Error::other(format!(
                "replica {index} of kind {kind:?}: at most {ISOLATED_REPLICAS_MAX} isolated replicas, kinds a-z"
            )));
        }
        let pid = std::process::id();
        let tag = pid % 100_000;
        // The kind shifts the third octet, so the mock's and the real bed's pairs of one
        // process differ; both stay in 1..=254.
        let octet = 1 + (pid + u32::from(kind as u8) * 37) % 254;
        let at = |host: usize| Ipv4Addr::new(169, 254, octet as u8, (4 * index + host) as u8);
        let name = format!("pc{kind}{tag}r{index}");
        let (host_if, ns_if) = (
            format!("p{kind}{tag}h{index}"),
            format!("p{kind}{tag}n{index}"),
        );
        run("ip", &["netns", "add", &name])?;
        // Owned at once, so that a later step's failure deletes it.
        let netns = Netns {
            name,
            inside: at(2),
        };
        let ns = netns.name.as_str();
        run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
        )?;
        run("ip", &["link", "set", &ns_if, "netns", ns])?;
        let host_cidr = format!("{}/30", at(1));
        run("ip", &["addr", "add", &host_cidr, "dev", &host_if])?;
        run("ip", &["link", "set", &host_if, "up"])?;
        let inside_cidr = format!("{}/30", netns.inside);
        run(
            "ip",
            &["-n", ns, "addr", "add", &inside_cidr, "dev", &ns_if],
        )?;
        run("ip", &["-n", ns, "link", "set", &ns_if, "up"])?;
        run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        Ok(netns)
    }

    /// Its name, as `ip netns exec NAME` takes it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its address inside, where a replica in it listens.
    pub fn address(&self) -> Ipv4Addr {
        self.inside
    }

    /// `argv` run inside it: `ip netns exec NAME argv...` (the command is exec'd, so its pid
    /// and process group are the ones started).
    pub fn wrap(&self, argv: &[String]) -> Vec<String> {
        ["ip", "netns", "exec", self.name.as_str()]
            .into_iter()
            .map(str::to_owned)
            .chain(argv.iter().cloned())
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace removes its veth end, and with it the host end.
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// Runs `program args`; its stderr is the error when it fails.
pub(crate) fn run(program: &str, args: &[&str]) -> std::io::Result<()> {
    let out = Command::new(program).args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}
