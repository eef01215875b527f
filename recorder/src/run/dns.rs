//! SRV lookups for replica addresses given as `_service._proto.name` (RFC 2782): the records
//! carry the port, so a probe follows a replacement that came back on a new one, which an A
//! record cannot say. The C library has no SRV call, so this is a small DNS client of its own
//! (RFC 1035 over UDP): one question to `target.nameserver` or else the first `nameserver` of
//! /etc/resolv.conf, read again at every lookup as the C library would, and the answer's SRV
//! records parsed with name compression, with the A and AAAA records the server added for their
//! targets (CoreDNS does for a headless Service, dnsmasq for its own names), so a target only
//! that server knows is found. Nothing else of DNS is implemented; a target the answer gives no
//! address for is resolved by the system resolver.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use crate::error::RecordError;

/// One SRV record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Srv {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// The host, without the trailing dot.
    pub target: String,
    /// The target's address, when the answer carried an A or AAAA record for it.
    pub address: Option<std::net::IpAddr>,
}

/// The DNS type code of SRV, and of the Internet class.
const TYPE_SRV: u16 = 33;
const CLASS_IN: u16 = 1;
/// The type codes of an IPv4 and an IPv6 address record.
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;

/// Looks `name` up over UDP at `server`, waiting at most `timeout` for each of two tries.
pub(crate) fn srv(
    name: &str,
    server: SocketAddr,
    timeout: Duration,
) -> Result<Vec<Srv>, RecordError> {
    let bind: SocketAddr = if server.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind)
        .map_err(|e| RecordError::lookup(format!("cannot open a UDP socket: {e}")))?;
    socket
        .connect(server)
        .and_then(|()| socket.set_read_timeout(Some(timeout)))
        .map_err(|e| RecordError::lookup(format!("cannot reach the nameserver {server}: {e}")))?;
    let id = query_id();
    let question = query(name, id)?;
    let mut buf = [0u8; 4096];
    let mut last = String::new();
    for _ in 0..2 {
        socket
            .send(&question)
            .map_err(|e| RecordError::lookup(format!("cannot ask the nameserver {server}: {e}")))?;
        match socket.recv(&mut buf) {
            // A datagram that is not the answer (another id) is ignored; the try is spent.
            Ok(n) => match parse(&buf[..n], id) {
                Err(Mismatch) => {
                    last = format!("the nameserver {server} answered another question")
                }
                Ok(answer) => return answer.map_err(|why| why.at(format_args!("SRV {name}"))),
            },
            Err(e) => last = format!("the nameserver {server} did not answer in {timeout:?}: {e}"),
        }
    }
    Err(RecordError::lookup(last))
}

/// The record a probe uses: the lowest priority, then the highest weight, then the first (a
/// replica's name has one; RFC 2782's weighted choice matters only for load sharing).
pub(crate) fn choose(records: &[Srv]) -> Option<&Srv> {
    records
        .iter()
        .enumerate()
        .min_by_key(|(i, r)| (r.priority, std::cmp::Reverse(r.weight), *i))
        .map(|(_, r)| r)
}

/// The first `nameserver` line of a resolv.conf, on port 53.
pub(crate) fn nameserver(resolv_conf: &str) -> Option<SocketAddr> {
    resolv_conf.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next()? == "nameserver")
            .then(|| words.next()?.parse::<std::net::IpAddr>().ok())
            .flatten()
            .map(|ip| SocketAddr::new(ip, 53))
    })
}

fn query_id() -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (nanos ^ std::process::id()) as u16
}

/// A standard query for `name`'s SRV records, recursion desired.
fn query(name: &str, id: u16) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&[0x01, 0x00]); // RD
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // one question
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(RecordError::lookup(format!("{name:?} is not a DNS name")));
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    out.extend_from_slice(&TYPE_SRV.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// A datagram with another id: not the answer to this question.
#[derive(Debug, PartialEq, Eq)]
struct Mismatch;

/// The SRV records of a response to query `id`, or what the server said instead.
fn parse(bytes: &[u8], id: u16) -> Result<Result<Vec<Srv>, RecordError>, Mismatch> {
    if bytes.len() < 12 || u16::from_be_bytes([bytes[0], bytes[1]]) != id || bytes[2] & 0x80 == 0 {
        return Err(Mismatch);
    }
    Ok(answer(bytes))
}

/// The SRV records of an answer, with the addresses it gives for their targets, or what the
/// answer says instead (every error of kind [`crate::ErrorKind::Lookup`]).
fn answer(bytes: &[u8]) -> Result<Vec<Srv>, RecordError> {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(cut_short)
    };
    match bytes[3] & 0x0f {
        0 => {}
        3 => return Err(RecordError::lookup("no such name (NXDOMAIN)")),
        code => {
            return Err(RecordError::lookup(format!(
                "the nameserver answered rcode {code}"
            )))
        }
    }
    if bytes[2] & 0x02 != 0 {
        return Err(RecordError::lookup(
            "the answer was truncated (it does not fit a UDP datagram)",
        ));
    }
    let (questions, answers) = (u16_at(4)?, u16_at(6)?);
    // Answer, authority and additional records, read alike: SRV is taken from the answers
    // alone, addresses from any section.
    let all = usize::from(answers) + usize::from(u16_at(8)?) + usize::from(u16_at(10)?);
    let mut at = 12;
    for _ in 0..questions {
        at = name(bytes, at)?.1 + 4;
    }
    let mut records = Vec::new();
    let mut addresses: Vec<(String, std::net::IpAddr)> = Vec::new();
    for index in 0..all {
        let (owner, after) = name(bytes, at)?;
        let (kind, class, length) = (u16_at(after)?, u16_at(after + 2)?, u16_at(after + 8)?);
        let data = after + 10;
        let end = data + usize::from(length);
        if end > bytes.len() {
            return Err(cut_short());
        }
        if let Some(ip) = address_record(kind, class, &bytes[data..end]) {
            addresses.push((owner, ip));
        }
        if kind == TYPE_SRV && class == CLASS_IN && index < usize::from(answers) {
            if length < 7 {
                return Err(RecordError::lookup("an SRV record is too short"));
            }
            let (target, _) = name(bytes, data + 6)?;
            records.push(Srv {
                priority: u16_at(data)?,
                weight: u16_at(data + 2)?,
                port: u16_at(data + 4)?,
                target,
                address: None,
            });
        }
        at = end;
    }
    if records.is_empty() {
        return Err(RecordError::lookup("no SRV records"));
    }
    for record in &mut records {
        // The first address the answer gives for the target (names compare without case).
        record.address = addresses
            .iter()
            .find(|(owner, _)| owner.eq_ignore_ascii_case(&record.target))
            .map(|(_, ip)| *ip);
    }
    Ok(records)
}

/// An answer that ends before what it says it holds.
fn cut_short() -> RecordError {
    RecordError::lookup("the answer is cut short")
}

/// The address an A or AAAA record of the Internet class carries.
fn address_record(kind: u16, class: u16, rdata: &[u8]) -> Option<std::net::IpAddr> {
    match (kind, class) {
        (TYPE_A, CLASS_IN) => <[u8; 4]>::try_from(rdata).ok().map(Into::into),
        (TYPE_AAAA, CLASS_IN) => <[u8; 16]>::try_from(rdata).ok().map(Into::into),
        _ => None,
    }
}

/// The name at `at` (following compression pointers, each only backwards, so it ends) and the
/// offset just after it in the message.
fn name(bytes: &[u8], mut at: usize) -> Result<(String, usize), RecordError> {
    let short = cut_short;
    let mut labels: Vec<String> = Vec::new();
    let mut after = None;
    loop {
        let len = *bytes.get(at).ok_or_else(short)?;
        match len & 0xc0 {
            0xc0 => {
                let low = *bytes.get(at + 1).ok_or_else(short)?;
                let target = usize::from(len & 0x3f) << 8 | usize::from(low);
                if target >= at {
                    return Err(RecordError::lookup(
                        "a name's compression pointer points forward",
                    ));
                }
                after.get_or_insert(at + 2);
                at = target;
            }
            0x00 if len == 0 => {
                let end = after.unwrap_or(at + 1);
                return Ok((labels.join("."), end));
            }
            0x00 => {
                let label = bytes
                    .get(at + 1..at + 1 + usize::from(len))
                    .ok_or_else(short)?;
                labels.push(String::from_utf8_lossy(label).into_owned());
                at += 1 + usize::from(len);
            }
            _ => {
                return Err(RecordError::lookup(
                    "a name has a label type this reader does not know",
                ))
            }
        }
    }
}

/// `host:port` as one socket address: an IP as it is, a DNS name by the system resolver (its
/// first address). An SRV name (`_service._proto.name`, the only form without a port the
/// configuration accepts) is asked of `nameserver` (`target.nameserver`), or else of the
/// nameserver of /etc/resolv.conf, for its host and port ([`super::dns`]), the host at the
/// address the answer gave for it, or else resolved as a name.
pub(super) fn resolve(
    address: &str,
    nameserver: Option<std::net::SocketAddr>,
) -> Result<std::net::SocketAddr, RecordError> {
    use std::net::ToSocketAddrs;
    if let Ok(ip) = address.parse() {
        return Ok(ip);
    }
    if !address.contains(':') {
        let server = match nameserver {
            Some(server) => server,
            None => {
                let conf = std::fs::read_to_string("/etc/resolv.conf").map_err(|e| {
                    RecordError::lookup(format!("cannot read /etc/resolv.conf for {address}: {e}"))
                })?;
                super::dns::nameserver(&conf).ok_or_else(|| {
                    RecordError::lookup(format!(
                        "/etc/resolv.conf names no nameserver to ask for {address}"
                    ))
                })?
            }
        };
        let records = super::dns::srv(address, server, Duration::from_millis(500))?;
        let chosen =
            super::dns::choose(&records).ok_or_else(|| RecordError::lookup("no SRV records"))?;
        if let Some(ip) = chosen.address {
            return Ok(std::net::SocketAddr::new(ip, chosen.port));
        }
        return (chosen.target.as_str(), chosen.port)
            .to_socket_addrs()
            .map_err(|e| {
                RecordError::lookup(format!(
                    "cannot resolve {} (SRV {address}): {e}",
                    chosen.target
                ))
            })?
            .next()
            .ok_or_else(|| {
                RecordError::lookup(format!(
                    "{} (SRV {address}) resolves to no address",
                    chosen.target
                ))
            });
    }
    address
        .to_socket_addrs()
        .map_err(|e| RecordError::lookup(format!("cannot resolve {address}: {e}")))?
        .next()
        .ok_or_else(|| RecordError::lookup(format!("{address} resolves to no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A response built by hand the way a server writes one: the question echoed, then two SRV
    /// answers whose owner is a pointer to the question's name, the second's target compressed
    /// against the first's.
    fn response(id: u16) -> Vec<u8> {
        let mut r = id.to_be_bytes().to_vec();
        r.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0]);
        let question = query("_http._tcp.r.test", id).unwrap();
        r.extend_from_slice(&question[12..]);
        // Answer 1: owner -> offset 12; SRV 10 5 8001 a.r.test
        r.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 30]);
        let target = [1, b'a', 1, b'r', 4, b't', b'e', b's', b't', 0];
        r.extend_from_slice(&((6 + target.len()) as u16).to_be_bytes());
        r.extend_from_slice(&[0, 10, 0, 5]);
        r.extend_from_slice(&8001u16.to_be_bytes());
        let first_target = r.len();
        r.extend_from_slice(&target);
        // Answer 2: SRV 0 1 9002 b + pointer to "r.test" of the first target.
        r.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 30]);
        r.extend_from_slice(&(6u16 + 4).to_be_bytes());
        r.extend_from_slice(&[0, 0, 0, 1]);
        r.extend_from_slice(&9002u16.to_be_bytes());
        r.extend_from_slice(&[1, b'b', 0xc0, (first_target + 2) as u8]);
        r
    }

    /// [`response`] with one additional record: b.r.test's address, 127.0.0.1, its owner a
    /// pointer to the second answer's target.
    fn response_with_address(id: u16) -> Vec<u8> {
        let mut r = response(id);
        r[11] = 1; // ARCOUNT
        let b = r.len() - 4;
        r.extend_from_slice(&[0xc0, b as u8, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 127, 0, 0, 1]);
        r
    }

    #[test]
    fn an_answer_with_compressed_names_reads_and_the_lowest_priority_is_chosen() {
        let records = match parse(&response(7), 7) {
            Ok(Ok(records)) => records,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            records,
            vec![
                Srv {
                    priority: 10,
                    weight: 5,
                    port: 8001,
                    target: "a.r.test".into(),
                    address: None,
                },
                Srv {
                    priority: 0,
                    weight: 1,
                    port: 9002,
                    target: "b.r.test".into(),
                    address: None,
                },
            ]
        );
        assert_eq!(choose(&records).unwrap().port, 9002);
        let Ok(Ok(with)) = parse(&response_with_address(7), 7) else {
            panic!("the answer with an additional record does not read");
        };
        assert_eq!(with[1].address, Some([127, 0, 0, 1].into()), "{with:?}");
        assert_eq!(
            with[0].address, None,
            "a.r.test has no address in the answer"
        );
        assert!(
            matches!(parse(&response(7), 8), Err(Mismatch)),
            "another query's answer"
        );
    }

    #[test]
    fn a_damaged_or_refusing_answer_is_an_error_never_a_panic() {
        let good = response(7);
        for cut in 12..good.len() {
            // Every truncation is an error (or, once whole records remain, fewer records).
            let _ = parse(&good[..cut], 7);
        }
        let mut nx = good.clone();
        nx[3] = 0x83;
        let Ok(Err(nxdomain)) = parse(&nx, 7) else {
            panic!("NXDOMAIN read as records");
        };
        assert_eq!(nxdomain.kind(), crate::ErrorKind::Lookup);
        assert_eq!(
            nxdomain.to_string(),
            "no such name (NXDOMAIN)",
            "journaled as said"
        );
        let mut forward = good.clone();
        let at = forward.len() - 1;
        forward[at] = 0xff; // the last pointer now points past itself
        assert!(matches!(parse(&forward, 7), Ok(Err(e)) if e.kind() == crate::ErrorKind::Lookup));
        let mut looped = good;
        let at = looped.len() - 2;
        looped[at] = 0xc0;
        let target = looped.len() - 2;
        looped[at + 1] = target as u8; // points at itself
        assert!(matches!(parse(&looped, 7), Ok(Err(e)) if e.kind() == crate::ErrorKind::Lookup));
        assert_eq!(
            query("a..b", 1).unwrap_err().kind(),
            crate::ErrorKind::Lookup
        );
    }

    /// `target.nameserver`: an SRV name is asked of the configured server (here a UDP socket
    /// on loopback that answers with the records above), not of /etc/resolv.conf's, and the
    /// chosen record's target, b.r.test, which no system resolver knows, is found at the
    /// address the answer gave for it.
    #[test]
    fn an_srv_name_is_asked_of_the_configured_nameserver() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let address = server.local_addr().unwrap();
        let answering = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            let (n, from) = server.recv_from(&mut buf).unwrap();
            assert!(n > 12);
            let id = u16::from_be_bytes([buf[0], buf[1]]);
            server.send_to(&response_with_address(id), from).unwrap();
        });
        let found = super::super::dns::resolve("_http._tcp.r.test", Some(address));
        answering.join().unwrap();
        assert_eq!(found.unwrap(), SocketAddr::from(([127, 0, 0, 1], 9002)));
    }

    #[test]
    fn the_nameserver_is_the_first_of_resolv_conf() {
        let conf = "# generated\nsearch default.svc.cluster.local\nnameserver 10.96.0.10\nnameserver 8.8.8.8\noptions ndots:5\n";
        assert_eq!(nameserver(conf), Some("10.96.0.10:53".parse().unwrap()));
        assert_eq!(
            nameserver("nameserver ::1\n"),
            Some("[::1]:53".parse().unwrap())
        );
        assert_eq!(nameserver("search x\n"), None);
    }
}
