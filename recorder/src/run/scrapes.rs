//! The server's own metrics (SPEC §2 "Server-side evidence"): one thread per source (each
//! `target.replica_addresses` replica at `server_metrics.path`, or the base URL's own host where
//! `[server_metrics]` is written and names nothing else, each `server_metrics.extra` endpoint) scrapes its Prometheus text every period on absolute deadlines and journals what the
//! configuration selects as `scrape` records (formats/JOURNAL.md "7 scrape") through the same
//! writer and chain as everything else.
//!
//! A scrape that fails (no answer within one period, an answer over `server.scrape_bytes_max`,
//! not 200, not text) is a `scrape` event and the thread goes on at the next deadline: a broken
//! metrics endpoint never stalls, slows or ends a run. The threads are far from the dispatch
//! path, with blocking sockets, like the replica probes; after the run's last request they
//! scrape once more, so the counters' last increases are in the journal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use percentes_formats::config::Config;
use percentes_formats::config::ServerMetrics;
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::{EventKind, EventRecord, Record};
use percentes_formats::journal::scrape::Scraper;
use percentes_formats::pins;
use percentes_formats::prometheus;

use super::dispatch::STOP_POLL;
use super::ground::{Host, SideGround};
use super::state::{Sender, Shared};
use crate::error::{io, RecordError};

/// One endpoint to scrape.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Source {
    /// The replica's name, or the extra endpoint's.
    pub(super) name: String,
    /// `host:port` (resolved again at every scrape, as the probes do).
    pub(super) address: String,
    /// The request path.
    pub(super) path: String,
    /// The DNS server an SRV address is asked of (`target.nameserver`).
    pub(super) nameserver: Option<std::net::SocketAddr>,
}

/// What the configuration asks to scrape: nothing when `server_metrics.scrape` is off.
pub(super) fn sources(config: &Config) -> Vec<Source> {
    let section = &config.server_metrics;
    if !section.scrape {
        return Vec::new();
    }
    let nameserver = config
        .target
        .nameserver
        .as_deref()
        .and_then(|s| s.parse().ok());
    let replicas = config
        .scrape_addresses()
        .into_iter()
        .map(|(name, address)| Source {
            name,
            address,
            path: section.path().to_owned(),
            nameserver,
        });
    let extra = section.extra.iter().filter_map(|(name, url)| {
        let rest = url.strip_prefix("http://")?;
        let split = rest.find('/')?;
        Some(Source {
            name: name.clone(),
            address: rest[..split].to_owned(),
            path: rest[split..].to_owned(),
            nameserver,
        })
    });
    replicas.chain(extra).collect()
}

/// Starts one scrape thread per source.
pub(super) fn start(
    config: &Config,
    epoch: Instant,
    sender: &Sender,
    shared: &Arc<Shared>,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<()>>, RecordError> {
    let period = Duration::from_millis(config.scrape_period_ms());
    let mut handles = Vec::new();
    for source in sources(config) {
        let select = config.server_metrics.clone();
        let (sender, shared, stop) = (sender.clone(), Arc::clone(shared), Arc::clone(stop));
        handles.push(
            std::thread::Builder::new()
                .name(format!("scrape-{}", source.name))
                .spawn(move || {
                    lowest_priority();
                    let on = (&sender, &*shared, &*stop);
                    scrape_thread((&source, period, &select), &Host { epoch }, on)
                })
                .map_err(io("cannot start a scrape thread"))?,
        );
    }
    Ok(handles)
}

/// What a scrape thread stands on: the clock and resolver of a thread beside the workers, the
/// scrape itself, and the thread's own CPU time (what spaces its scrapes).
pub(super) trait ScrapeGround: SideGround {
    /// `GET path` at `address`, its body within `timeout` and `bytes_max`
    /// ([`crate::probe::scrape`]).
    fn scrape(
        &self,
        address: std::net::SocketAddr,
        path: &str,
        timeout: Duration,
        bytes_max: usize,
    ) -> Result<String, RecordError>;

    /// The calling thread's CPU time, ns (0 where it cannot be read).
    fn thread_cpu_ns(&self) -> u64;
}

/// The real scrape over TCP and the thread's own CPU clock: a recording's.
impl ScrapeGround for Host {
    fn scrape(
        &self,
        address: std::net::SocketAddr,
        path: &str,
        timeout: Duration,
        bytes_max: usize,
    ) -> Result<String, RecordError> {
        crate::probe::scrape(address, path, timeout, bytes_max)
    }

    fn thread_cpu_ns(&self) -> u64 {
        thread_cpu_ns()
    }
}

/// Scrapes `source` every `period` until the run is done (and once after), journaling each
/// answer as a record and each failure as an event.
pub(super) fn scrape_thread<G: ScrapeGround>(
    (source, period, select): (&Source, Duration, &ServerMetrics),
    ground: &G,
    (sender, shared, stop): (&Sender, &Shared, &AtomicBool),
) {
    let mut scraper = Scraper::default();
    let mut said: Option<String> = None;
    let mut spaced = false;
    let mut due = ground.now_ns();
    let poll_ns = STOP_POLL.as_nanos() as u64;
    loop {
        let last = shared.done.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed);
        let cpu_before = ground.thread_cpu_ns();
        let mut records = scrape_once((source, period, select), ground, &mut scraper, &mut said);
        let cpu_ns = ground.thread_cpu_ns().saturating_sub(cpu_before);
        let spacing = spacing(period, cpu_ns);
        // Said once when the spacing begins, and again only after it has ended.
        if spacing > period && !spaced {
            records.push(Record::Event(EventRecord {
                at_ns: ground.now_ns(),
                kind: EventKind::Scrape.code(),
                subject: source.name.clone(),
                detail: DetailWord::ScrapeAnswer.with(&format!(
                    "reading and parsing one answer took {:.1} ms of CPU, over the {} % of one CPU a source may take (server.scrape_cpu_max_percent): the next scrape waits {:.0} ms, not {:.0} ms, so the endpoint cannot compete with the workers",
                    cpu_ns as f64 / 1e6,
                    pins::value::SERVER_SCRAPE_CPU_MAX_PERCENT,
                    spacing.as_secs_f64() * 1e3,
                    period.as_secs_f64() * 1e3
                )),
                value: None,
            }));
        }
        spaced = spacing > period;
        for record in records {
            sender.send(record);
        }
        if last {
            return;
        }
        // A scrape that took its whole period skips the deadlines it missed.
        due = (due + spacing.as_nanos() as u64).max(ground.now_ns());
        while ground.now_ns() < due {
            if shared.done.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                break;
            }
            ground.sleep_until(due.min(ground.now_ns() + poll_ns));
        }
    }
}

/// The wait from one scrape's start to the next: the period, or longer when the scrape's CPU
/// (`cpu_ns`, reading and parsing the answer) was more than `server.scrape_cpu_max_percent` of
/// it, so that a source's scrapes take at most that share of one CPU however large or fast its
/// answers.
pub(super) fn spacing(period: Duration, cpu_ns: u64) -> Duration {
    let share = pins::value::SERVER_SCRAPE_CPU_MAX_PERCENT as f64 / 100.0;
    let needed = Duration::from_nanos((cpu_ns as f64 / share) as u64);
    period.max(needed)
}

/// The calling thread's CPU time, ns (CLOCK_THREAD_CPUTIME_ID); 0 where it cannot be read, which
/// leaves the spacing at the period.
fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `now` is.
    #[allow(unsafe_code)]
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if read != 0 {
        return 0;
    }
    (now.tv_sec as u64).saturating_mul(1_000_000_000) + now.tv_nsec as u64
}

/// Runs the calling thread at nice 19, the lowest priority: a scrape waits for the workers,
/// never the other way. (On Linux a thread's nice value is its own.) A refusal leaves it as it
/// is; the CPU share still bounds it.
fn lowest_priority() {
    // SAFETY: gettid and setpriority take and return integers; no memory is involved.
    #[allow(unsafe_code)]
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
    }
}

/// One scrape: its record, or the event that says why there is none; plus an event when the
/// answer held lines that are not Prometheus text or more series than are kept (said again
/// only when what is wrong changes, in `said`).
fn scrape_once(
    (source, period, select): (&Source, Duration, &ServerMetrics),
    ground: &impl ScrapeGround,
    scraper: &mut Scraper,
    said: &mut Option<String>,
) -> Vec<Record> {
    let event = |at_ns: u64, detail: String| {
        Record::Event(EventRecord {
            at_ns,
            kind: EventKind::Scrape.code(),
            subject: source.name.clone(),
            detail,
            value: None,
        })
    };
    let sent_ns = ground.now_ns();
    let bytes_max = pins::value::SERVER_SCRAPE_BYTES_MAX as usize;
    let answer = ground
        .resolve(&source.address, source.nameserver)
        .and_then(|address| ground.scrape(address, &source.path, period, bytes_max));
    let received_ns = ground.now_ns();
    let body = match answer {
        Ok(body) => body,
        Err(why) => {
            return vec![event(
                sent_ns,
                DetailWord::ScrapeFailed
                    .with(&format!("GET {} at {}: {why}", source.path, source.address)),
            )]
        }
    };
    let read = prometheus::parse(&body, |name| select.selects(name));
    let mut out = vec![Record::Scrape(scraper.record(
        &source.name,
        (sent_ns, received_ns),
        &read.samples,
    ))];
    let mut wrong = Vec::new();
    if let Some((line, why)) = &read.first_malformed {
        wrong.push(format!(
            "{} of {} lines are not Prometheus text (the first, line {line}: {why})",
            read.malformed,
            read.malformed + read.lines_read
        ));
    }
    if read.over_limit > 0 {
        wrong.push(format!(
            "{} selected samples past the {} kept of one answer were left out",
            read.over_limit,
            prometheus::SAMPLES_MAX
        ));
    }
    let wrong = (!wrong.is_empty()).then(|| wrong.join("; "));
    if wrong != *said {
        if let Some(text) = &wrong {
            out.push(event(received_ns, DetailWord::ScrapeAnswer.with(text)));
        }
        *said = wrong;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A metrics endpoint that answers each connection with what `answer` gives for it (the
    /// connection's number from 0); `None` holds the connection open without a word.
    fn endpoint(answer: fn(usize) -> Option<Vec<u8>>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request);
                match answer(n) {
                    Some(bytes) => {
                        std::thread::spawn(move || {
                            let _ = stream.write_all(&bytes);
                        });
                    }
                    None => {
                        std::thread::spawn(move || {
                            std::thread::sleep(Duration::from_secs(5));
                            drop(stream);
                        });
                    }
                }
            }
        });
        address
    }

    fn ok(body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    fn scrape_n(address: String, n: usize, period: Duration) -> (Vec<Record>, Duration) {
        let source = Source {
            name: "replica-0".into(),
            address,
            path: "/metrics".into(),
            nameserver: None,
        };
        let mut scraper = Scraper::default();
        let mut said = None;
        let started = Instant::now();
        let records = (0..n)
            .flat_map(|_| {
                let host = Host { epoch: started };
                let select = ServerMetrics::default();
                scrape_once((&source, period, &select), &host, &mut scraper, &mut said)
            })
            .collect();
        (records, started.elapsed())
    }

    fn details(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| match r {
                Record::Event(e) => format!("event: {}", e.detail),
                Record::Scrape(s) => format!("scrape: {} samples", s.samples.len()),
                other => format!("{other:?}"),
            })
            .collect()
    }

    const GAUGE: &str = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 2\n";

    /// A hang, a 50 MB answer and garbage between good answers: each failure is one event,
    /// each in its bound (one period; `server.scrape_bytes_max`), and the next scrape reads.
    #[test]
    fn a_hanging_a_huge_and_a_garbage_answer_are_events_and_the_scrapes_go_on() {
        let address = endpoint(|n| match n {
            0 | 2 | 4 => Some(ok(GAUGE)),
            1 => None,
            3 => {
                let mut huge = b"HTTP/1.1 200 OK\r\nContent-Length: 52428800\r\n\r\n".to_vec();
                huge.resize(50 << 20, b'#');
                Some(huge)
            }
            _ => Some(ok("\u{1}garbage {{{\nnot a metric line\n")),
        });
        let period = Duration::from_millis(300);
        let (records, took) = scrape_n(address, 6, period);
        let got = details(&records);
        assert_eq!(got.len(), 7, "{got:#?}");
        assert_eq!(got[0], "scrape: 1 samples");
        assert!(
            got[1].contains("failed: GET /metrics") && got[1].contains("in time"),
            "{got:#?}"
        );
        assert_eq!(
            got[2], "scrape: 0 samples",
            "unchanged gauge: nothing to say"
        );
        let limit = pins::value::SERVER_SCRAPE_BYTES_MAX;
        assert!(
            got[3].contains(&format!("answer over {limit} bytes")),
            "{got:#?}"
        );
        assert_eq!(got[4], "scrape: 0 samples");
        assert_eq!(got[5], "scrape: 0 samples");
        assert!(
            got[6].contains("2 of 2 lines are not Prometheus text"),
            "{got:#?}"
        );
        // The hang cost one period and the 50 MB answer no more than one; nothing waited on
        // the server's pace beyond that (a generous bound: the test host is shared).
        assert!(took < period * 5, "{took:?}");
        let Record::Scrape(last) = &records[5] else {
            panic!("{got:#?}")
        };
        assert_eq!(last.gone, [0], "the garbage answer carries no gauge");
    }

    /// Issue 50: a hostile endpoint (100,000 series at a 250 ms period) made the scraper's
    /// parsing compete with the workers. A scrape that took more than 5 % of one CPU over its
    /// period spaces the next one out until the share holds; a cheap one keeps the period.
    #[test]
    fn a_scrape_that_costs_more_than_its_share_spaces_the_next_out() {
        let period = Duration::from_millis(250);
        assert_eq!(
            spacing(period, 2_000_000),
            period,
            "2 ms of CPU in 250 ms: 0.8 %"
        );
        assert_eq!(spacing(period, 12_500_000), period, "exactly 5 %");
        assert_eq!(spacing(period, 60_000_000), Duration::from_millis(1_200));
        // The scraper's own thread: its CPU time is read, and it runs at nice 19.
        std::thread::spawn(|| {
            lowest_priority();
            let before = thread_cpu_ns();
            let mut x = 0u64;
            for i in 0..5_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            assert!(x != 1 && thread_cpu_ns() > before);
            // SAFETY: gettid takes nothing and returns the thread's id.
            #[allow(unsafe_code)]
            let tid = unsafe { libc::syscall(libc::SYS_gettid) };
            let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
            let after = stat.rsplit_once(')').unwrap().1;
            // Fields after the name: state, then 15 more to nice (field 19 of the whole line).
            let nice: i64 = after.split_whitespace().nth(16).unwrap().parse().unwrap();
            assert_eq!(nice, 19, "{stat}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn sources_are_the_replicas_and_the_extra_endpoints_unless_scraping_is_off() {
        let text = percentes_formats::journal::synthetic::GOLDEN_CONFIG.replace(
            "[target]",
            "[server_metrics]\nextra = { router = \"http://127.0.0.1:9000/stats/prometheus\" }\n\n[target]",
        );
        let config = Config::parse(text.as_bytes()).unwrap();
        let found = sources(&config);
        let router = found.iter().find(|s| s.name == "router").expect("extra");
        assert_eq!(
            (router.address.as_str(), router.path.as_str()),
            ("127.0.0.1:9000", "/stats/prometheus")
        );
        assert_eq!(found.len(), config.target.replica_addresses.len() + 1);
        let off = text.replace("[server_metrics]\n", "[server_metrics]\nscrape = false\n");
        assert!(sources(&Config::parse(off.as_bytes()).unwrap()).is_empty());
    }
}
