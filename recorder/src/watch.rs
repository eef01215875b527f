//! `percentes watch`: the cluster's timeline for the fault's target, journaled by the running
//! recorder (issue 38; SPEC §5 "External timeline events"). The watcher runs `kubectl get pods
//! --watch` over the serving pods (and, on request, `kubectl get nodes --watch`), reads the API's
//! watch events as kubectl prints them (`--output-watch-events -o json`: one JSON object per
//! event, `{"type", "object"}`), turns the transitions of the victim and its replacement into
//! timeline boundaries ([`cluster`]) and hands each to the recorder through its events socket
//! ([`crate::events`]), stated on CLOCK_MONOTONIC at the moment the watch delivered it; the API's
//! own times are quoted in the detail, and the recorder adds the moment it read the event: both
//! clocks.
//!
//! **Why kubectl and not the `kube` crate.** The recorder's image already holds kubectl (the
//! exec injector and the accelerator collectors run it), and kubectl brings every way a cluster
//! authenticates (the pod's service account, a kubeconfig, exec plugins) that a client of our own
//! would have to re-implement; the `kube` crate would bring an async HTTP and TLS stack (tokio,
//! hyper, the generated API types) into a recorder built on io_uring, and minutes to every CI
//! build, to read a stream of JSON objects. The cost: a child process, whose watch ends when the
//! API server closes it (a timeout, a compaction), so the watcher starts it again; the list it
//! prints first repeats what was seen and adds nothing ([`cluster::Cluster`] keeps each pod's last
//! state).
//!
//! The watcher waits for the socket to appear (a recorder still setting up) and ends when the
//! recorder has gone (its socket removed or refusing connections after it was reached once).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::RecordError;
use crate::events::{self, Clock, ExternalEvent};

pub mod cluster;

/// What a kubectl watch follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watched {
    /// The serving pods (a namespace and a label selector).
    Pods,
    /// Every node (cluster-scoped: the account needs a ClusterRole).
    Nodes,
}

/// What `percentes watch` was asked.
#[derive(Clone, Debug)]
pub struct Options {
    /// The recorder's `--events-socket`.
    pub socket: PathBuf,
    /// The serving pods' namespace.
    pub namespace: String,
    /// Their label selector (`app=vllm`).
    pub selector: String,
    /// The pod the fault targets.
    pub victim: String,
    /// The kubectl program and the arguments it always takes (`--server URL`, `--kubeconfig F`).
    pub kubectl: Vec<String>,
    /// Watch the nodes' Ready conditions too.
    pub nodes: bool,
    /// How long to wait for the recorder's socket to appear.
    pub wait: Duration,
}

/// The kubectl command line that watches `watched`.
pub fn kubectl_argv(
    kubectl: &[String],
    watched: Watched,
    namespace: &str,
    selector: &str,
) -> Vec<String> {
    let mut argv = kubectl.to_vec();
    match watched {
        Watched::Pods => argv.extend(
            [
                "get",
                "pods",
                "--namespace",
                namespace,
                "--selector",
                selector,
            ]
            .map(str::to_owned),
        ),
        Watched::Nodes => argv.extend(["get", "nodes"].map(str::to_owned)),
    }
    argv.extend(["--watch", "--output-watch-events", "--output", "json"].map(str::to_owned));
    argv
}

/// How long a watch that ended waits before kubectl is started again.
const RESTART_AFTER: Duration = Duration::from_secs(1);
/// The most bytes one watch event may take (a pod object is a few KiB).
const EVENT_BYTES_MAX: u64 = 1 << 20;

/// A message from a watch's reader thread.
enum Seen {
    /// A watch event and when it was read, CLOCK_MONOTONIC ns.
    Event(u64, Value),
    /// The watch ended (kubectl exited, or printed what is not JSON): why.
    Ended(Watched, String),
}

/// One running kubectl watch.
struct Watch {
    watched: Watched,
    child: Child,
}

impl Watch {
    fn start(
        options: &Options,
        watched: Watched,
        sink: mpsc::Sender<Seen>,
    ) -> Result<Watch, RecordError> {
        let argv = kubectl_argv(
            &options.kubectl,
            watched,
            &options.namespace,
            &options.selector,
        );
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| RecordError::command("no kubectl program given"))?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| RecordError::command(format!("cannot start {program}: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| RecordError::command("kubectl has no standard output"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| RecordError::command("kubectl has no standard error"))?;
        std::thread::Builder::new()
            .name("watch-reader".into())
            .spawn(move || read_watch(watched, stdout, stderr, &sink))
            .map_err(crate::error::io("cannot start a watch thread"))?;
        Ok(Watch { watched, child })
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads kubectl's stream of JSON objects until it ends; its standard error says why it ended.
fn read_watch(
    watched: Watched,
    stdout: impl Read,
    stderr: impl Read + Send + 'static,
    sink: &mpsc::Sender<Seen>,
) {
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stderr).take(4096).read_to_string(&mut text);
        text
    });
    let mut reader = BufReader::new(stdout);
    let why = loop {
        match next_object(&mut reader) {
            Ok(Some(value)) => {
                let at = crate::run::monotonic_now_ns();
                if sink.send(Seen::Event(at, value)).is_err() {
                    return;
                }
            }
            Ok(None) => break "the watch ended".to_owned(),
            Err(why) => break why.to_string(),
        }
    };
    let stderr = said.join().unwrap_or_default();
    let stderr = stderr.trim();
    let _ = sink.send(Seen::Ended(
        watched,
        if stderr.is_empty() {
            why
        } else {
            format!("{why}: kubectl said {stderr:?}")
        },
    ));
}

/// The next JSON object of a stream of them (kubectl prints each event indented over several
/// lines): its lines gathered until the braces balance outside strings, then parsed. `None` at
/// the end of the stream. What kubectl printed that is not one is of kind
/// [`crate::ErrorKind::Command`].
fn next_object(reader: &mut impl BufRead) -> Result<Option<Value>, RecordError> {
    let mut text = String::new();
    let (mut depth, mut in_string, mut escaped) = (0i64, false, false);
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .map_err(crate::error::io("cannot read kubectl's output"))?;
        if n == 0 {
            return if text.trim().is_empty() {
                Ok(None)
            } else {
                Err(RecordError::command(
                    "kubectl's output ended inside an object",
                ))
            };
        }
        for c in line.chars() {
            match (in_string, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (true, false, '"') => in_string = false,
                (false, _, '"') => in_string = true,
                (false, _, '{') => depth += 1,
                (false, _, '}') => depth -= 1,
                _ => {}
            }
        }
        text.push_str(&line);
        if text.len() as u64 > EVENT_BYTES_MAX {
            return Err(RecordError::command(format!(
                "a watch event over {EVENT_BYTES_MAX} bytes"
            )));
        }
        if depth == 0 && !text.trim().is_empty() {
            return serde_json::from_str(&text).map(Some).map_err(|e| {
                RecordError::command(format!("kubectl printed what is not a watch event: {e}"))
            });
        }
    }
}

/// Runs the watcher until the recorder is gone; each boundary delivered is printed. It fails
/// when no recorder appears ([`crate::ErrorKind::Event`]), kubectl cannot be started
/// ([`crate::ErrorKind::Command`]), or every watch stopped.
pub fn run(options: &Options) -> Result<(), RecordError> {
    await_socket(options)?;
    let (sink, seen) = mpsc::channel();
    let mut kinds = vec![Watched::Pods];
    if options.nodes {
        kinds.push(Watched::Nodes);
    }
    let mut watches = Vec::new();
    for &watched in &kinds {
        watches.push(Watch::start(options, watched, sink.clone())?);
    }
    let mut cluster = cluster::Cluster::new(&options.victim);
    let mut restart: Vec<(Watched, Instant)> = Vec::new();
    let result = loop {
        if !options.socket.exists() {
            break Ok(());
        }
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = restart.into_iter().partition(|(_, at)| *at <= now);
        restart = later;
        for (watched, _) in due {
            match Watch::start(options, watched, sink.clone()) {
                Ok(watch) => watches.push(watch),
                Err(why) => {
                    eprintln!("watch: {why}; trying again in {RESTART_AFTER:?}");
                    restart.push((watched, now + RESTART_AFTER));
                }
            }
        }
        match seen.recv_timeout(Duration::from_millis(200)) {
            Ok(Seen::Event(at_ns, event)) => {
                if deliver(options, &mut cluster, at_ns, &event) == Delivery::RecorderGone {
                    break Ok(());
                }
            }
            Ok(Seen::Ended(watched, why)) => {
                eprintln!("watch: kubectl's {watched:?} watch ended ({why}); starting it again in {RESTART_AFTER:?}");
                if let Some(i) = watches.iter().position(|w| w.watched == watched) {
                    watches.swap_remove(i).stop();
                }
                restart.push((watched, Instant::now() + RESTART_AFTER));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(RecordError::command("every watch stopped"))
            }
        }
    };
    for watch in watches {
        watch.stop();
    }
    result
}

/// Waits for the recorder's socket; an error when it never appears.
fn await_socket(options: &Options) -> Result<(), RecordError> {
    let deadline = Instant::now() + options.wait;
    while !options.socket.exists() {
        if Instant::now() > deadline {
            return Err(RecordError::event(format!(
                "no recorder is listening: {} did not appear within {:?} (start `percentes record --events-socket {}`)",
                options.socket.display(),
                options.wait,
                options.socket.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Whether the recorder still takes events.
#[derive(Debug, PartialEq, Eq)]
enum Delivery {
    Going,
    RecorderGone,
}

/// Hands the boundaries one event shows to the recorder. A refusal is printed and the watch goes
/// on; a recorder that is gone ends the watcher (its run is over).
fn deliver(
    options: &Options,
    cluster: &mut cluster::Cluster,
    at_ns: u64,
    event: &Value,
) -> Delivery {
    for boundary in cluster.observe(event) {
        let external = ExternalEvent {
            subject: boundary.subject.name().to_owned(),
            detail: boundary.detail.clone(),
            value: None,
            clock: Some(Clock::Monotonic),
            at_ns: Some(at_ns as i64),
        };
        match events::send(&options.socket, &external, Duration::from_secs(2)) {
            Ok(answer) => println!("{} {answer}: {}", boundary.subject.name(), boundary.detail),
            // No recorder takes connections on the socket any more: it is gone.
            Err(why) if !options.socket.exists() || why.kind() == crate::ErrorKind::Io => {
                return Delivery::RecorderGone;
            }
            Err(why) => eprintln!("watch: {}: {why}", boundary.subject.name()),
        }
    }
    Delivery::Going
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watch_commands_are_kubectl_s_own() {
        let kubectl = vec![
            "kubectl".to_owned(),
            "--server=http://127.0.0.1:1".to_owned(),
        ];
        assert_eq!(
            kubectl_argv(&kubectl, Watched::Pods, "serving", "app=vllm").join(" "),
            "kubectl --server=http://127.0.0.1:1 get pods --namespace serving --selector app=vllm --watch --output-watch-events --output json"
        );
        assert_eq!(
            kubectl_argv(&kubectl, Watched::Nodes, "serving", "app=vllm").join(" "),
            "kubectl --server=http://127.0.0.1:1 get nodes --watch --output-watch-events --output json"
        );
    }

    /// kubectl's indented objects one after another, a brace inside a string, and the end: each
    /// object whole; a stream cut inside one is an error, never a panic.
    #[test]
    fn a_stream_of_indented_objects_reads_one_at_a_time() {
        let text = "{\n    \"type\": \"ADDED\",\n    \"object\": {\"kind\": \"Pod\", \"note\": \"a } and a \\\" inside\"}\n}\n{\n    \"type\": \"DELETED\"\n}\n";
        let mut reader = BufReader::new(text.as_bytes());
        let first = next_object(&mut reader).unwrap().unwrap();
        assert_eq!(first["object"]["note"], "a } and a \" inside");
        assert_eq!(
            next_object(&mut reader).unwrap().unwrap()["type"],
            "DELETED"
        );
        assert_eq!(next_object(&mut reader).unwrap(), None);
        let mut cut = BufReader::new("{\n  \"type\": \"ADDED\",\n".as_bytes());
        let cut = next_object(&mut cut).unwrap_err();
        assert_eq!(cut.kind(), crate::ErrorKind::Command, "{cut}");
        assert!(cut.to_string().contains("ended inside"), "{cut}");
        let mut junk =
            BufReader::new("error: the server doesn't have a resource type\n".as_bytes());
        assert_eq!(
            next_object(&mut junk).unwrap_err().kind(),
            crate::ErrorKind::Command
        );
    }
}
