//! A network namespace of its own for one replica, joined to the host by a veth pair: what lets
//! a black-hole drop every packet of one replica (iptables inside its namespace) and nothing
//! else. The mock testbed's isolated replicas and the real-parts testbed's both stand in one.
//!
//! Addresses are link-local: replica `i`'s pair is 169.254.T.(4i+1) on the host side and
//! .(4i+2) inside. T is first drawn from the process id and the bed's kind; the pair's host end
//! is named by T and `i`, so a pair whose /30 another bed holds (of this process or another,
//! about one draw in 254) is refused by the kernel's one name per interface, and moves to the
//! next T. Link-local traffic never leaves the machine.

use std::net::Ipv4Addr;
use std::process::Command;

/// At most this many isolated replicas a testbed (the /24 holds 64 /30 pairs).
pub const ISOLATED_REPLICAS_MAX: usize = 64;

/// One replica's namespace; dropping it deletes both veth ends, then the namespace.
#[derive(Debug)]
pub struct Netns {
    name: String,
    inside: Ipv4Addr,
    /// The host end of its veth pair, once made.
    host_if: Option<String>,
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
        let tag = std::process::id() % 100_000;
        let name = format!("pc{kind}{tag}r{index}");
        run("ip", &["netns", "add", &name])?;
        // Owned at once, so that a later step's failure deletes it (and with it the pair).
        let mut netns = Netns {
            name,
            inside: Ipv4Addr::UNSPECIFIED,
            host_if: None,
        };
        let (octet, host_if, ns_if) = veth_pair(drawn_octet(kind), index)?;
        netns.host_if = Some(host_if.clone());
        let at = |host: usize| Ipv4Addr::new(169, 254, octet, (4 * index + host) as u8);
        netns.inside = at(2);
        let ns = netns.name.as_str();
        if let Err(e) = run("ip", &["link", "set", &ns_if, "netns", ns]) {
            // Still on the host: the namespace's deletion would not take it.
            let _ = run("ip", &["link", "del", &host_if]);
            return Err(e);
        }
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

/// The third octet a bed of `kind` in this process tries first (1..=254): drawn from the process
/// id, and shifted by the kind, so that the mock's and the real bed's pairs of one process
/// differ.
pub fn drawn_octet(kind: char) -> u8 {
    (1 + (std::process::id() + u32::from(kind) * 37) % 254) as u8
}

/// The name of the host end of replica `index`'s pair on 169.254.`octet`.0/24: one name per
/// /30, so the kernel refuses a second bed on the same addresses.
pub fn host_end(octet: u8, index: usize) -> String {
    format!("pcl{octet}h{index}")
}

/// Creates replica `index`'s veth pair on the first third octet from `first` (wrapping within
/// 1..=254) whose host end's name no interface has: the octet and both ends' names. A refusal
/// for any other reason is the error.
fn veth_pair(first: u8, index: usize) -> std::io::Result<(u8, String, String)> {
    for step in 0..254u16 {
        let octet = (1 + (u16::from(first) - 1 + step) % 254) as u8;
        let (host_if, ns_if) = (host_end(octet, index), format!("pcl{octet}n{index}"));
        let added = run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &ns_if,
            ],
        );
        match added {
            Ok(()) => return Ok((octet, host_if, ns_if)),
            // Another bed holds this /30 (its host end stays on the host): the next one.
            Err(_) if interface_exists(&host_if) || interface_exists(&ns_if) => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "no free link-local /30 for replica {index}: every 169.254.T.{}/30 from T = {first} has a bed's pair on it; delete the namespaces a crashed run left (ip netns list, names pc<kind><pid>r<i>)",
        4 * index
    )))
}

/// Whether an interface of this name exists in the host's namespace.
fn interface_exists(name: &str) -> bool {
    Command::new("ip")
        .args(["link", "show", "dev", name])
        .output()
        .is_ok_and(|out| out.status.success())
}

impl Drop for Netns {
    fn drop(&mut self) {
        // The pair first, by its host end (both ends go at once): deleting the namespace alone
        // leaves its veth end to the kernel's asynchronous teardown of the namespace, so the
        // host end (and its name, and its /30) could outlive the bed for a while, and a bed
        // made just after could find them taken.
        if let Some(host_if) = &self.host_if {
            let _ = run("ip", &["link", "del", host_if]);
        }
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
