//! The recorder over TLS against a local rustls server with a self-signed certificate:
//! verification on by default (unknown issuer: class `tls`), a CA file that makes it pass, and the
//! insecure flag, which passes and is written into the journal.

use percentes_formats::journal::header::HostFact;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use percentes_formats::config::Config;
use percentes_formats::journal::records::{class_name, Record};
use percentes_formats::journal::{verify, Header};

use super::run::{record, Options};

const SSE: &str = "data: {\"model\":\"mock\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n\
data: {\"model\":\"mock\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n\
data: {\"model\":\"mock\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";

/// A keep-alive HTTPS server answering every request with a short SSE stream.
fn tls_server(certificate: rcgen::CertifiedKey<rcgen::KeyPair>) -> SocketAddr {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key =
        rustls::pki_types::PrivateKeyDer::Pkcs8(certificate.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate.cert.der().clone()], key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let mut tls =
                    rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), tcp);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match tls.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .split("content-length: ")
                        .nth(1)
                        .and_then(|r| r.split("\r\n").next()?.parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + length {
                        match tls.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..end + 4 + length);
                    let response = format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{SSE}", SSE.len());
                    if tls
                        .write_all(response.as_bytes())
                        .and_then(|()| tls.flush())
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn run(addr: SocketAddr, tls_lines: &str, name: &str) -> (PathBuf, Config) {
    try_run(addr, tls_lines, name).unwrap()
}

fn try_run(
    addr: SocketAddr,
    tls_lines: &str,
    name: &str,
) -> Result<(PathBuf, Config), super::run::RecordError> {
    // Factor 100: a 0.3 s timeout and a 4.2 s schedule. At 250 the 120 ms timeout was shorter
    // than a TLS pre-flight on a busy CI machine, which refused the run (a failed CI run on
    // 2026-12-03).
    let text = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\n[target]\nkind = \"mock\"\nbase_url = \"https://localhost:{}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\"]\n{tls_lines}\n\
         [schedule]\nseed = 2\narrival = \"deterministic\"\nrate_rps = 15.0\n[fault]\nvariant = \"none\"\n[[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n",
        addr.port()
    );
    let config = Config::parse(text.as_bytes()).unwrap();
    let output = percentes_testkit::shared_folder("tls").join(format!("{name}.pj"));
    let options = Options {
        force: true,
        ..Options::new(output.clone())
    };
    record(&config, &options)?;
    Ok((output, config))
}

/// [`run`], read back, its sent requests only: a request the recorder reached past its deadline
/// (`client-late`, never sent) is a busy host's failure, not the TLS path's, and these tests share
/// the cores with the simulator's, which keep both busy (CI failed on one once). This test reads
/// no time, so such a run is read as a diagnosis of what was sent (ARCHITECTURE.md, "Goldens,
/// tests, scripts"); a run that sent nothing fails saying why.
fn run_sent(
    addr: SocketAddr,
    tls_lines: &str,
    name: &str,
) -> (
    Header,
    Vec<percentes_formats::journal::records::RequestRecord>,
) {
    let (path, _) = run(addr, tls_lines, name);
    let (header, requests) = journaled(&path);
    let scheduled = requests.len();
    let sent: Vec<_> = requests
        .into_iter()
        .filter(|r| class_name(r.class) != Some("client-late"))
        .collect();
    assert!(
        !sent.is_empty(),
        "{name}: all {scheduled} requests client-late: the host kept the recorder from sending any"
    );
    if sent.len() < scheduled {
        eprintln!(
            "{name}: {} of {scheduled} requests client-late (this busy host's): read as a diagnosis",
            scheduled - sent.len()
        );
    }
    (header, sent)
}

fn journaled(
    path: &Path,
) -> (
    Header,
    Vec<percentes_formats::journal::records::RequestRecord>,
) {
    let bytes = std::fs::read(path).unwrap();
    let report = verify::verify(&bytes, &Default::default());
    assert_eq!(report.verdict.name(), "sealed-intact");
    let (header, header_end, _) = Header::decode(&bytes).unwrap();
    let requests = verify::records(&bytes, header_end, report.verified_bytes as usize)
        .filter_map(|f| match Record::decode(f.kind, f.body).unwrap() {
            Record::Request(r) => Some(r),
            _ => None,
        })
        .collect();
    (header, requests)
}

#[test]
fn verification_is_on_by_default_a_ca_file_passes_and_insecure_is_recorded() {
    let certificate = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let pem = certificate.cert.pem();
    let addr = tls_server(certificate);
    let scratch = percentes_testkit::Scratch::new("tls-ca");
    let ca = scratch.join("ca.pem");
    std::fs::write(&ca, pem).unwrap();

    let (header, requests) = run_sent(
        addr,
        &format!("[target.tls]\nca_file = \"{}\"", ca.display()),
        "trusted",
    );
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(class_name(r.class), Some("correct-success"), "{r:?}");
        // Its own handshake, or a connection already open (reused, or opened ahead of need
        // through the same verifying dialer).
        assert!(
            r.tls_done_ns.is_some() || r.connect_start_ns.is_none(),
            "{r:?}"
        );
    }
    assert!(header
        .fact(HostFact::Tls)
        .unwrap()
        .contains("verification on"));

    // The pre-flight meets the unknown issuer first and refuses the run, saying why.
    let refused = try_run(addr, "", "refused").unwrap_err().to_string();
    assert!(
        refused.contains("pre-flight") && refused.contains("certificate"),
        "{refused}"
    );
    // Without it, every request is classified `tls`.
    let (_, requests) = run_sent(addr, "preflight = false", "untrusted");
    assert!(
        requests.iter().all(|r| class_name(r.class) == Some("tls")),
        "{:?}",
        requests.first()
    );

    let (header, requests) = run_sent(addr, "[target.tls]\ninsecure = true", "insecure");
    assert!(requests
        .iter()
        .all(|r| class_name(r.class) == Some("correct-success")));
    assert!(header
        .fact(HostFact::Tls)
        .unwrap()
        .contains("VERIFICATION OFF"));
}
