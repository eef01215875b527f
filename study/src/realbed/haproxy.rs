//! HAProxy as the real-parts testbed runs it: its configuration (each chunk sent as it comes,
//! each replica health-checked, the upstream named), its start, and its runtime socket (each
//! server's state, the requests in flight on it, and commands).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use super::names;
use super::process::{program, spawn};
use crate::error::{bail, Context, Result};
use crate::placement::{Joiner, Placed};

/// The response header HAProxy names the serving replica in.
pub const UPSTREAM_HEADER: &str = "x-upstream";

/// HAProxy's executable.
pub(crate) fn haproxy_program() -> Option<PathBuf> {
    program("haproxy")
}

/// The HAProxy directive that sends each response chunk as it comes. Without it HAProxy sends
/// with MSG_MORE and the kernel holds a stream's head and early chunks until its cork timer
/// fires (about 200 ms): issue 52 measured a one-replica baseline TTFT of 84.0 ms through it
/// against 11.7 ms with it (12.3 ms direct), the head arriving in the same read as the first
/// token in 236 of 236 requests. A proxy that moves the figures it stands in front of is part
/// of the measurement: this one is configured not to.
pub const HAPROXY_NO_DELAY: &str = "option http-no-delay";

/// What the `proxy` host fact says of the testbed's HAProxy (SPEC §2 "The first token's path").
pub fn haproxy_fact(version: &str) -> String {
    format!(
        "haproxy {version}: {HAPROXY_NO_DELAY} (each response chunk sent as it comes, no MSG_MORE corking), timeout server 300s, health checks every 250 ms (fall 2, rise 1), the upstream named in {UPSTREAM_HEADER}"
    )
}

/// HAProxy's configuration for `replicas` (name, address), listening on `port`; with `resolvers`
/// (a `resolvers names` section, [`names::Names::haproxy_resolvers`]) each server is found by
/// its SRV name instead of its port.
pub fn haproxy_config(
    port: u16,
    replicas: &[(String, SocketAddr)],
    ready_path: &str,
    socket: &Path,
    resolvers: Option<&str>,
) -> String {
    let mut text = format!(
        "# Written by the percentes study runner: the layer-7 proxy in front of the replicas.\n\
         global\n    stats socket {} mode 600 level admin\n    maxconn 4096\n\n\
         defaults\n    mode http\n    {HAPROXY_NO_DELAY}\n    timeout connect 1s\n    timeout client 300s\n    \
         timeout server 300s\n    timeout check 2s\n    retries 2\n    option redispatch\n\n{}\
         frontend service\n    bind 127.0.0.1:{port}\n    default_backend replicas\n\n\
         backend replicas\n    balance roundrobin\n    option httpchk GET {ready_path}\n    \
         default-server inter 250ms fastinter 250ms downinter 250ms fall 2 rise 1\n    \
         http-response set-header {UPSTREAM_HEADER} %[srv_name]\n",
        socket.display(),
        resolvers.unwrap_or_default(),
    );
    for (name, address) in replicas {
        text.push_str(&match resolvers {
            Some(_) => format!(
                "    server {name} {} resolvers names init-addr none check\n",
                names::srv_name(name)
            ),
            None => format!("    server {name} {address} check\n"),
        });
    }
    text
}

/// Writes HAProxy's configuration into `folder` and starts it there, in the placement's target
/// groups.
pub(crate) fn start_proxy(
    config: &str,
    folder: &Path,
    placed: Option<&mut Placed>,
) -> Result<Child> {
    let path = folder.join("haproxy.cfg");
    std::fs::write(&path, config)?;
    let joiner = match placed {
        Some(p) => Some(Joiner::new(&p.target_procs("proxy")?)?),
        None => None,
    };
    let program =
        haproxy_program().context("haproxy is not installed (Debian: apt-get install haproxy)")?;
    spawn(
        &[
            program.display().to_string(),
            "-db".into(),
            "-f".into(),
            path.display().to_string(),
        ],
        &folder.join("haproxy.log"),
        joiner,
    )
    .context("cannot start HAProxy (Debian: apt-get install haproxy)")
}

/// HAProxy's view of each server's state (`show stat`'s `status` column: UP, DOWN, ...).
pub fn haproxy_states(socket: &Path) -> Result<BTreeMap<String, String>> {
    parse_states(&haproxy_ask(socket, "show stat")?)
}

/// Reads `show stat`'s CSV: each replica server's status.
pub fn parse_states(text: &str) -> Result<BTreeMap<String, String>> {
    Ok(parse_stat(text)?
        .into_iter()
        .map(|(name, stat)| (name, stat.status))
        .collect())
}

/// The installed HAProxy's version, as `haproxy -v` prints it (`2.6.12-1+deb12u1`), or
/// `unknown version`.
pub(crate) fn haproxy_version() -> String {
    haproxy_program()
        .and_then(|p| std::process::Command::new(p).arg("-v").output().ok())
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let first = text.lines().next()?.to_owned();
            first
                .split_whitespace()
                .skip_while(|w| *w != "version")
                .nth(1)
                .map(|v| format!("version {v}"))
        })
        .unwrap_or_else(|| "unknown version".into())
}

/// One command to HAProxy's runtime socket, its answer.
pub fn haproxy_ask(socket: &Path, command: &str) -> Result<String> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("cannot reach HAProxy's socket {}", socket.display()))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.write_all(format!("{command}\n").as_bytes())?;
    let mut text = String::new();
    stream.take(1 << 20).read_to_string(&mut text)?;
    Ok(text)
}

/// A runtime command that must answer nothing (HAProxy answers a refused one in words).
pub(crate) fn haproxy_do(socket: &Path, command: &str) -> Result<()> {
    let answer = haproxy_ask(socket, command)?;
    if answer.trim().is_empty() {
        Ok(())
    } else {
        bail!("HAProxy refused `{command}`: {}", answer.trim())
    }
}

/// One server's line of `show stat`: its status and the requests it serves now.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStat {
    /// `UP`, `DOWN`, `MAINT`, `DRAIN`, ...
    pub status: String,
    /// Its current sessions (`scur`): the requests in flight on it.
    pub in_flight: u64,
    /// Its last health check's result (`check_status`: `L7OK` passed, `L4CON` refused, ...;
    /// `* ` before it while a check runs).
    pub check: String,
}

impl ServerStat {
    /// Whether HAProxy's own last health check of it passed.
    pub fn check_passed(&self) -> bool {
        self.check.trim_start_matches("* ") == "L7OK"
    }
}

/// `show stat`'s CSV, the header naming the columns: each replica server's status, current
/// sessions and last check (empty where the header has no `check_status`).
pub fn parse_stat(text: &str) -> Result<BTreeMap<String, ServerStat>> {
    let mut lines = text.lines();
    let header = lines
        .next()
        .and_then(|h| h.strip_prefix("# "))
        .context("HAProxy's `show stat` answered without its header line")?;
    let column = |name: &str| header.split(',').position(|c| c == name);
    let (Some(proxy), Some(server), Some(status), Some(current)) = (
        column("pxname"),
        column("svname"),
        column("status"),
        column("scur"),
    ) else {
        bail!("HAProxy's `show stat` header lacks pxname, svname, status or scur");
    };
    let check = column("check_status");
    let mut out = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let name = fields.get(server).copied().unwrap_or_default();
        if fields.get(proxy) != Some(&"replicas") || matches!(name, "BACKEND" | "FRONTEND" | "") {
            continue;
        }
        let stat = ServerStat {
            status: fields.get(status).copied().unwrap_or_default().to_owned(),
            in_flight: fields
                .get(current)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            check: check
                .and_then(|c| fields.get(c).copied())
                .unwrap_or_default()
                .to_owned(),
        };
        out.insert(name.to_owned(), stat);
    }
    Ok(out)
}

/// One server's view in `show stat`, if HAProxy answers and lists it.
pub(crate) fn server_stat(socket: &Path, name: &str) -> Option<ServerStat> {
    haproxy_ask(socket, "show stat")
        .ok()
        .and_then(|text| parse_stat(&text).ok())
        .and_then(|mut stats| stats.remove(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_names_the_upstream_and_checks_health() {
        let text = haproxy_config(
            8100,
            &[
                ("replica-0".into(), ([127, 0, 0, 1], 8101).into()),
                ("replica-1".into(), ([127, 0, 0, 1], 8102).into()),
            ],
            "/health",
            Path::new("/run/x/haproxy.sock"),
            None,
        );
        for needed in [
            "bind 127.0.0.1:8100",
            "option httpchk GET /health",
            "http-response set-header x-upstream %[srv_name]",
            "server replica-1 127.0.0.1:8102 check",
            "option redispatch",
            "stats socket /run/x/haproxy.sock",
            "fall 2 rise 1",
            "timeout check 2s",
            "option http-no-delay",
        ] {
            assert!(text.contains(needed), "{needed} missing from\n{text}");
        }
        // Named replicas: each server found by its SRV record through the resolvers section.
        let named = haproxy_config(
            8100,
            &[
                ("replica-0".into(), ([127, 0, 0, 1], 8101).into()),
                ("replica-1".into(), ([127, 0, 0, 1], 8102).into()),
            ],
            "/health",
            Path::new("/run/x/haproxy.sock"),
            Some("resolvers names\n    nameserver dnsmasq 127.0.0.1:5353\n\n"),
        );
        for needed in [
            "resolvers names\n    nameserver dnsmasq 127.0.0.1:5353",
            "server replica-1 _replica-1._tcp.percentes.test resolvers names init-addr none check",
        ] {
            assert!(named.contains(needed), "{needed} missing from\n{named}");
        }
        assert!(!named.contains("127.0.0.1:8102"), "{named}");
    }

    /// `show stat` as HAProxy 2.6 answers it (abridged to the columns read, in its order).
    #[test]
    fn show_stat_gives_each_replicas_state() {
        let text = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight\n\
                    service,FRONTEND,,,0,1,4096,3,0,0,0,0,0,,,,,OPEN,\n\
                    replicas,replica-0,0,0,0,1,,2,0,0,,0,,0,0,0,0,UP,1\n\
                    replicas,replica-1,0,0,0,1,,1,0,0,,0,,0,0,0,0,DOWN 1/2,1\n\
                    replicas,BACKEND,0,0,0,1,410,3,0,0,0,0,,0,0,0,0,UP,1\n";
        let states = parse_states(text).unwrap();
        assert_eq!(states.len(), 2);
        assert_eq!(states["replica-0"], "UP");
        assert_eq!(states["replica-1"], "DOWN 1/2");
        assert!(parse_states("no header\n").is_err());
    }

    /// `show stat` as HAProxy 2.6 answers during a drain (abridged to the columns read, in its
    /// order): each server's status and the requests on it.
    #[test]
    fn show_stat_gives_each_servers_state_and_requests_in_flight() {
        let text = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status\n\
                    service,FRONTEND,,,0,1,4096,3,0,0,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,,,0,0,0,1,\n\
                    replicas,replica-0,0,0,3,4,,20,0,0,,0,,0,0,0,0,DRAIN,0,1,0,0,0,5,0,,1,3,1,,20,,2,0,,4,L7OK\n\
                    replicas,replica-1,0,0,1,4,,21,0,0,,0,,0,0,0,0,UP,1,1,0,0,0,5,0,,1,3,2,,21,,2,0,,4,* L7OK\n\
                    replicas,replica-2,0,0,0,0,,0,0,0,,0,,0,0,0,0,MAINT,1,1,0,3,1,5,5,,1,3,3,,0,,2,0,,0,L4CON\n\
                    replicas,BACKEND,0,0,4,8,410,41,0,0,0,0,,0,0,0,0,UP,1,2,0,,0,5,0,,1,3,0,,41,,1,0,,8,\n";
        let stats = parse_stat(text).unwrap();
        assert_eq!(stats.len(), 3);
        assert_eq!(
            stats["replica-0"],
            ServerStat {
                status: "DRAIN".into(),
                in_flight: 3,
                check: "L7OK".into(),
            }
        );
        assert!(
            stats["replica-1"].check_passed(),
            "a check in progress keeps its last result"
        );
        assert_eq!(stats["replica-2"].status, "MAINT");
        assert!(!stats["replica-2"].check_passed());
        assert!(parse_stat("# pxname,svname,status\n").is_err(), "no scur");
    }
}
