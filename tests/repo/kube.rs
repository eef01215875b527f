//! A Kubernetes API server played by this test binary, for kubectl to talk to: the discovery
//! documents a client needs to map kinds to resources, lists, and watch streams replayed from the
//! fixtures in tests/data/kube/ (README there says how they were made). Used by deploy/'s client
//! dry run and by `percentes watch` (issue 38 item 2), which is tested here end to end: kubectl
//! watches the fake API, the watcher hands the boundaries to a recording recorder, and the
//! journal and the report's decomposition carry them.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::golden::root;

/// The legacy (pre-aggregated) discovery documents of the groups deploy/'s manifests and the
/// watcher use, as the API's reference documents them.
pub(crate) fn discovery() -> BTreeMap<&'static str, Value> {
    let resource = |name: &str, kind: &str, namespaced: bool| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
    };
    let list = |group_version: &str, resources: Vec<Value>| {
        json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": group_version, "resources": resources})
    };
    let group = |name: &str, version: &str| {
        let gv = format!("{name}/{version}");
        json!({"name": name, "versions": [{"groupVersion": gv, "version": version}],
            "preferredVersion": {"groupVersion": gv, "version": version}})
    };
    BTreeMap::from([
        (
            "/api",
            json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        (
            "/apis",
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            group("apps", "v1"), group("batch", "v1"), group("rbac.authorization.k8s.io", "v1"),
            group("networking.k8s.io", "v1")]}),
        ),
        (
            "/api/v1",
            list(
                "v1",
                vec![
                    resource("serviceaccounts", "ServiceAccount", true),
                    resource("configmaps", "ConfigMap", true),
                    resource("persistentvolumeclaims", "PersistentVolumeClaim", true),
                    resource("services", "Service", true),
                    resource("pods", "Pod", true),
                    resource("nodes", "Node", false),
                ],
            ),
        ),
        (
            "/apis/apps/v1",
            list(
                "apps/v1",
                vec![
                    resource("deployments", "Deployment", true),
                    resource("daemonsets", "DaemonSet", true),
                ],
            ),
        ),
        (
            "/apis/batch/v1",
            list("batch/v1", vec![resource("jobs", "Job", true)]),
        ),
        (
            "/apis/networking.k8s.io/v1",
            list(
                "networking.k8s.io/v1",
                vec![resource("networkpolicies", "NetworkPolicy", true)],
            ),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1",
            list(
                "rbac.authorization.k8s.io/v1",
                vec![
                    resource("roles", "Role", true),
                    resource("rolebindings", "RoleBinding", true),
                    resource("clusterroles", "ClusterRole", false),
                    resource("clusterrolebindings", "ClusterRoleBinding", false),
                ],
            ),
        ),
    ])
}

/// What the fake API serves besides discovery: per collection path, the list a GET returns
/// first, the watch events a first watch streams (then ends, as an API server ends a watch at
/// its timeout), and the list every later GET returns (after which a watch streams nothing
/// until the test is over).
#[derive(Clone, Default)]
pub(crate) struct Collections {
    pub(crate) served: BTreeMap<String, (Value, Vec<Value>, Value)>,
}

/// The fake API's switches: `go` opens the first watch streams (a test holds them until the
/// recorder's run is where it wants the events); `over` ends every stream; `watches` counts the
/// watch requests served. `store` holds what clients created (POST to a collection), by the
/// object's path, until they delete it; `created` keeps every object ever created, in order.
#[derive(Default)]
pub(crate) struct Controls {
    pub(crate) go: AtomicBool,
    pub(crate) over: AtomicBool,
    pub(crate) watches: AtomicUsize,
    pub(crate) store: std::sync::Mutex<BTreeMap<String, Value>>,
    pub(crate) created: std::sync::Mutex<Vec<Value>>,
}

/// Starts the fake API on loopback.
pub(crate) fn fake_api(collections: Collections, controls: Arc<Controls>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let documents = Arc::new(discovery());
    let collections = Arc::new(collections);
    let firsts: Arc<std::sync::Mutex<BTreeMap<String, bool>>> = Arc::default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (documents, collections, controls, firsts) = (
                Arc::clone(&documents),
                Arc::clone(&collections),
                Arc::clone(&controls),
                Arc::clone(&firsts),
            );
            std::thread::spawn(move || {
                serve(stream, &documents, &collections, &controls, &firsts);
            });
        }
    });
    address
}

fn serve(
    stream: TcpStream,
    documents: &BTreeMap<&'static str, Value>,
    collections: &Collections,
    controls: &Controls,
    firsts: &std::sync::Mutex<BTreeMap<String, bool>>,
) {
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    // The request's head, to its end, and its body (a POST's object).
    let mut header = String::new();
    let mut length = 0usize;
    while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        header.clear();
    }
    let mut body = vec![0u8; length];
    if std::io::Read::read_exact(&mut reader, &mut body).is_err() {
        return;
    }
    let method = line.split_whitespace().next().unwrap_or("GET");
    let target = line.split_whitespace().nth(1).unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let answer = |status: &str, body: String| {
        let _ = write!(
            &stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    };
    if let Some(doc) = documents.get(path) {
        return answer("200 OK", doc.to_string());
    }
    if let Some((status, body)) = stored(method, path, &body, controls) {
        return answer(status, body.to_string());
    }
    let Some((first_list, events, later_list)) = collections.served.get(path) else {
        return answer(
            "404 Not Found",
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "NotFound", "code": 404})
            .to_string(),
        );
    };
    let first = !firsts.lock().unwrap().get(path).copied().unwrap_or(false);
    if !watch {
        return answer(
            "200 OK",
            if first { first_list } else { later_list }.to_string(),
        );
    }
    controls.watches.fetch_add(1, Ordering::SeqCst);
    firsts.lock().unwrap().insert(path.to_owned(), true);
    let _ = write!(
        &stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    let chunk = |text: &str| write!(&stream, "{:x}\r\n{text}\r\n", text.len());
    while first && !controls.go.load(Ordering::SeqCst) && !controls.over.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if first {
        for event in events {
            if chunk(&format!("{event}\n")).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    } else {
        while !controls.over.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let _ = write!(&stream, "0\r\n\r\n");
}

/// A create, read or delete of an object clients made (`POST` to its collection, `GET` or
/// `DELETE` of its path), as the API answers it; `None` for what the store does not hold (a
/// list, a watch, an object never created: served from the collections, or 404).
fn stored(
    method: &str,
    path: &str,
    body: &[u8],
    controls: &Controls,
) -> Option<(&'static str, Value)> {
    let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "NotFound", "code": 404});
    let mut store = controls.store.lock().unwrap();
    match method {
        "POST" => {
            let object: Value = serde_json::from_slice(body).ok()?;
            let name = object["metadata"]["name"].as_str()?.to_owned();
            controls.created.lock().unwrap().push(object.clone());
            store.insert(format!("{path}/{name}"), object.clone());
            Some(("201 Created", object))
        }
        "DELETE" => Some(match store.remove(path) {
            Some(_) => (
                "200 OK",
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            ),
            None => ("404 Not Found", not_found),
        }),
        // An object's path: a namespaced collection's (core /api/v1/namespaces/N/R, a group's
        // /apis/G/V/namespaces/N/R) and a name.
        "GET" if path.matches('/').count() == if path.starts_with("/apis/") { 7 } else { 6 } => {
            Some(match store.get(path) {
                Some(object) => ("200 OK", object.clone()),
                None => ("404 Not Found", not_found),
            })
        }
        _ => None,
    }
}

/// A fixture of tests/data/kube/.
pub(crate) fn fixture(name: &str) -> Value {
    let path = root().join("tests/data/kube").join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pods and nodes of the fixtures: replica-1 (StatefulSet `replica`, node gpu-b) deleted and
/// replaced under its own name with a new uid; gpu-b's Ready condition going Unknown and back.
pub(crate) fn replacement_collections() -> Collections {
    let watch_events = |name: &str| fixture(name).as_array().unwrap().clone();
    Collections {
        served: BTreeMap::from([
            (
                "/api/v1/namespaces/default/pods".to_owned(),
                (
                    fixture("pods-list.json"),
                    watch_events("pods-watch.json"),
                    fixture("pods-list-after.json"),
                ),
            ),
            (
                "/api/v1/nodes".to_owned(),
                (
                    fixture("nodes-list.json"),
                    watch_events("nodes-watch.json"),
                    fixture("nodes-list.json"),
                ),
            ),
        ]),
    }
}

/// Whether kubectl is missing (then `test` is reported, and fails under PERCENTES_CI).
pub(crate) fn lacks_kubectl(test: &str) -> bool {
    crate::lacks(
        test,
        "kubectl",
        "kubectl is not installed (apt-get install kubernetes-client; .ci/run does)",
    )
}

/// A kubectl that talks to `server` only: no user's kubeconfig, no cached discovery.
pub(crate) fn kubectl_env(command: &mut std::process::Command, home: &Path) {
    command
        .env("HOME", home)
        .env("KUBECONFIG", home.join("none"));
}

/// Issue 38 item 2, end to end: `percentes watch` runs Debian's kubectl against the fake API,
/// whose watch streams replay a StatefulSet pod's deletion and replacement and a node going
/// Unknown; a fault run of the recorder listens on `--events-socket`. The journal carries, after
/// the fire, `detected` (the victim terminating), `reschedule` (the replacement given node gpu-b)
/// and `container-start` (its container running), each stated on CLOCK_MONOTONIC with the API's
/// own time in the detail and the recorder's reading beside it; the replacement's readiness and
/// the node's Ready changes as `orchestrator` notes; nothing twice, though the first pod watch
/// ends and kubectl is started again (its list repeats every pod). The analyzer's decomposition
/// reads the reschedule and the container start as its boundaries. The watcher ends on its own
/// when the recorder's socket goes.
///
/// Deliberate breaks: a watcher that reported the initial list would journal pods that never
/// changed; one that did not restart kubectl would leave the second watch unrequested; one whose
/// tracker keyed pods by name would take the replacement for the victim and journal no
/// reschedule.
#[test]
fn the_watcher_journals_a_pod_replacement_from_the_api_s_watch() {
    let _machine = crate::recording();
    if lacks_kubectl("the_watcher_journals_a_pod_replacement_from_the_api_s_watch") {
        return;
    }
    let controls = Arc::new(Controls::default());
    let api = fake_api(replacement_collections(), Arc::clone(&controls));
    let (dir, journal, socket, mut recorder) = super::record::fault_run_with_socket("watch");
    let home = dir.join("home");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"));
    command
        .args([
            "watch",
            socket.to_str().unwrap(),
            "--victim",
            "replica-1",
            "--nodes",
        ])
        .args([
            "--kubectl",
            "kubectl",
            "--kubectl",
            &format!("--server=http://{api}"),
        ])
        .args(["--wait", "30"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    kubectl_env(&mut command, &home);
    let watcher = command.spawn().unwrap();
    // The fire is about 3.6 s after the epoch (time factor 100), within a second of the
    // socket; the watch streams open after it.
    let started = std::time::Instant::now();
    while !socket.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(5));
    controls.go.store(true, Ordering::SeqCst);
    assert!(recorder.wait().unwrap().code().is_some());
    let watched = watcher.wait_with_output().unwrap();
    controls.over.store(true, Ordering::SeqCst);
    let said = String::from_utf8_lossy(&watched.stdout).to_string()
        + &String::from_utf8_lossy(&watched.stderr);
    assert_eq!(watched.status.code(), Some(0), "{said}");
    assert!(
        controls.watches.load(Ordering::SeqCst) >= 3,
        "the ended pod watch is started again: {said}"
    );
    let events = super::record::events(&journal);
    let timeline: Vec<(&str, &str, u64)> = events
        .iter()
        .filter(|e| {
            percentes_formats::journal::records::event_kind_name(e.kind) == Some("timeline")
        })
        .map(|e| (e.subject.as_str(), e.detail.as_str(), e.at_ns))
        .collect();
    // Each boundary once, whatever the interleaving of the two watches: the victim's detection,
    // the replacement's reschedule and container start; five notes (the old pod removed, the
    // replacement created and Ready, the node's two Ready changes).
    let mut subjects: Vec<&str> = timeline.iter().map(|t| t.0).collect();
    subjects.sort_unstable();
    assert_eq!(
        subjects,
        [
            "container-start",
            "detected",
            "orchestrator",
            "orchestrator",
            "orchestrator",
            "orchestrator",
            "orchestrator",
            "reschedule"
        ],
        "{said}\n{timeline:#?}"
    );
    let find = |subject: &str, words: &str| {
        timeline
            .iter()
            .find(|t| t.0 == subject && t.1.contains(words))
            .unwrap_or_else(|| panic!("no {subject} with {words:?}: {timeline:#?}"))
    };
    let detected = find("detected", "pod replica-1 (7d2e9b34-1c4f-4b6a-9e8d-2a1f0c3b5d21) is terminating (deletionTimestamp 2026-12-04T10:05:30Z)");
    let reschedule = find("reschedule", "replacement pod replica-1 scheduled to node gpu-b (PodScheduled, since 2026-12-04T10:05:01Z)");
    let start = find(
        "container-start",
        "container vllm of replacement pod replica-1 running since 2026-12-04T10:05:03Z",
    );
    find(
        "orchestrator",
        "replacement pod replica-1 (e41b7c09-8f3a-4d2e-b6c5-91a0d7f2c384) created",
    );
    find(
        "orchestrator",
        "Ready in the API's view (Ready=True, since 2026-12-04T10:06:12Z)",
    );
    find(
        "orchestrator",
        "node gpu-b Ready True -> Unknown (NodeStatusUnknown), since 2026-12-04T10:05:35Z",
    );
    find(
        "orchestrator",
        "node gpu-b Ready Unknown -> True (KubeletReady), since 2026-12-04T10:05:50Z",
    );
    for (subject, detail, _) in [detected, reschedule, start] {
        assert!(
            detail.contains("(external: stated at")
                && detail.contains("on CLOCK_MONOTONIC; read at"),
            "{subject}: {detail}"
        );
    }
    let fired = super::record::event_named(&events, "fault-fired").expect("fired");
    assert!(fired.at_ns < detected.2 && detected.2 < reschedule.2 && reschedule.2 < start.2);
    // The decomposition reads the watcher's boundaries.
    let json = super::record::diagnosed_report(&journal, &dir);
    for (boundary, at) in [("reschedule", reschedule.2), ("container start", start.2)] {
        let b = super::record::decomposed(&json, boundary);
        assert_eq!(b["at_s"].as_f64(), Some(at as f64 / 1e9), "{b}");
        assert!(
            b["evidence"]
                .as_str()
                .unwrap()
                .contains("scheduled to node gpu-b")
                || boundary != "reschedule",
            "{b}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// kube-system's DaemonSets as a cluster with Calico lists them (a fixture's worth, inline):
/// kube-proxy and calico-node; or, with `flannel`, a cluster whose CNI enforces no policy.
fn daemonsets(flannel: bool) -> Value {
    let ds = |name: &str| {
        json!({"kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [{"name": name, "image": format!("{name}:v1")}]}}}})
    };
    let agent = if flannel {
        "kube-flannel-ds"
    } else {
        "calico-node"
    };
    json!({"kind": "DaemonSetList", "apiVersion": "apps/v1", "metadata": {"resourceVersion": "7"},
        "items": [ds("kube-proxy"), ds(agent)]})
}

/// A black-hole fault run whose injector is `network-policy`, its kubectl pointed at the fake
/// API (`home` keeps the user's kubeconfig out), against a mock; the fault's confirmation looks
/// at a port nothing listens on (the fake cluster isolates nothing: the confirmation is the
/// fire's independent check, tested with the testbed's partition, not here).
fn partition_run(api: SocketAddr, dir: &Path) -> std::process::Output {
    let mock = percentes_scenarios::mock::spawn_background(
        percentes_scenarios::config::MockConfig::constant(2.0, 0.0, 16),
        1,
    )
    .unwrap()
    .0;
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        "schema_version = 1\nprofile = \"dev\"\n[dev]\ntime_factor = 100\n[target]\nkind = \"mock\"\nbase_url = \"http://{mock}\"\nmodel = \"mock\"\nreplicas = [\"replica-0\", \"replica-1\"]\nreplica_header = \"x-sent-by-no-one\"\n\
         [schedule]\nseed = 11\narrival = \"deterministic\"\n[calibration]\nlambda_max_rps = 20.0\n[fault]\nvariant = \"black-hole\"\nvictim = \"replica-1\"\ninjector = \"network-policy\"\nconfirm_address = \"{dead}\"\n\
         [fault.network_policy]\nnamespace = \"serving\"\npod_labels = {{ \"statefulset.kubernetes.io/pod-name\" = \"replica-1\" }}\nexpiry_image = \"percentes:latest\"\nkubectl = [\"kubectl\", \"--server=http://{api}\"]\n\
         [[routes]]\nlabel = \"chat\"\npath = \"/v1/chat/completions\"\n"
    );
    let toml = dir.join("run.toml");
    std::fs::write(&toml, config).unwrap();
    let home = dir.join("home");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_percentes"));
    command
        .args(["record", toml.to_str().unwrap(), "--quiet", "-o"])
        .arg(dir.join("run.pj"));
    kubectl_env(&mut command, &home);
    command.output().unwrap()
}

/// Issue 38 item 3: the black-hole on Kubernetes as a NetworkPolicy, against the fake API with
/// Debian's kubectl. Before the run the recorder finds the CNI (Calico's DaemonSet) and no
/// leftover policy, and says so in the `fault-check` host fact; at T_inject it creates the
/// policy (read as the API's NetworkPolicy type: the victim's pod selected, ingress and egress
/// named, no rule) and an expiry Job (the API's Job type) that deletes it at the wall-clock
/// deadline the pinned partition sets; at the pinned end it deletes both and confirms the
/// policy gone. A cluster whose CNI enforces no policy (flannel alone) is refused before the
/// journal exists, naming what it found; so is a policy left over from an earlier run.
///
/// Deliberate breaks: a policy with an `ingress` rule, or without Egress, would let traffic
/// through (the typed checks below); a removal that did not delete would leave the store
/// holding the policy; a start check that passed flannel would record.
#[test]
fn a_network_policy_partitions_the_victim_with_an_armed_expiry_and_is_removed() {
    let _machine = crate::recording();
    if lacks_kubectl("a_network_policy_partitions_the_victim_with_an_armed_expiry_and_is_removed") {
        return;
    }
    let dir = percentes_testkit::Scratch::new("netpol");
    let serve = |flannel: bool| {
        let mut collections = Collections::default();
        let list = daemonsets(flannel);
        collections.served.insert(
            "/apis/apps/v1/namespaces/kube-system/daemonsets".to_owned(),
            (list.clone(), Vec::new(), list),
        );
        let controls = Arc::new(Controls::default());
        (fake_api(collections, Arc::clone(&controls)), controls)
    };
    let (api, controls) = serve(false);
    let out = partition_run(api, &dir);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(matches!(out.status.code(), Some(0 | 2)), "{said}");
    let file = percentes_analyzer::JournalFile::open(&dir.join("run.pj")).unwrap();
    let run = percentes_analyzer::load::load(&file).unwrap();
    let check = run
        .header
        .fact(percentes_formats::journal::header::HostFact::FaultCheck)
        .expect("the fault-check fact");
    assert!(
        check.starts_with("Calico enforces NetworkPolicy (DaemonSet or container calico-node")
            && check.contains("no NetworkPolicy percentes-partition-replica-1 in namespace serving before the run"),
        "{check}"
    );
    use percentes_formats::journal::records::EventKind;
    let fired = run.events.first(EventKind::FaultFired).unwrap_or_else(|| {
        let all: Vec<_> = [
            EventKind::FaultArmed,
            EventKind::FaultFailed,
            EventKind::Escape,
        ]
        .into_iter()
        .flat_map(|k| run.events.all(k))
        .map(|e| e.detail.clone())
        .collect();
        panic!("not fired: {all:#?}\n{said}")
    });
    assert!(
        fired.detail.contains("NetworkPolicy percentes-partition-replica-1 isolates the pods statefulset.kubernetes.io/pod-name=replica-1 in namespace serving")
            && fired.detail.contains("networkpolicy.networking.k8s.io/percentes-partition-replica-1 created")
            && fired.detail.contains("job.batch/percentes-partition-replica-1-expiry created"),
        "{}",
        fired.detail
    );
    let removed = run.events.first(EventKind::FaultRemoved).expect("removed");
    assert!(
        removed.detail.contains("deleted and confirmed gone"),
        "{}",
        removed.detail
    );
    assert!(removed.at_ns > fired.at_ns);
    let created = controls.created.lock().unwrap().clone();
    let [policy, job] = created.as_slice() else {
        panic!("the policy and its expiry Job, in that order: {created:#?}")
    };
    let policy: k8s_openapi::api::networking::v1::NetworkPolicy =
        super::deploy::typed(policy, "the partition's NetworkPolicy");
    let spec = policy.spec.unwrap();
    assert_eq!(
        spec.pod_selector.unwrap().match_labels.unwrap()["statefulset.kubernetes.io/pod-name"],
        "replica-1"
    );
    assert_eq!(spec.policy_types.unwrap(), ["Ingress", "Egress"]);
    assert!(
        spec.ingress.is_none() && spec.egress.is_none(),
        "nothing allowed"
    );
    let job: k8s_openapi::api::batch::v1::Job = super::deploy::typed(job, "the expiry Job");
    let script = job.spec.unwrap().template.spec.unwrap().containers[0]
        .command
        .clone()
        .unwrap()
        .join(" ");
    assert!(
        script.contains(
            "kubectl delete networkpolicy percentes-partition-replica-1 --namespace serving"
        ),
        "{script}"
    );
    assert!(
        controls.store.lock().unwrap().is_empty(),
        "the policy and the Job are gone: {:?}",
        controls.store.lock().unwrap().keys()
    );

    // Refused before the journal exists: a CNI that enforces nothing, a leftover policy.
    let (api, _) = serve(true);
    let _ = std::fs::remove_file(dir.join("run.pj"));
    let out = partition_run(api, &dir);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(
        said.contains("no CNI known to enforce NetworkPolicy runs in kube-system (its DaemonSets: kube-proxy, kube-flannel-ds"),
        "{said}"
    );
    assert!(!dir.join("run.pj").exists(), "refused before the journal");
    let (api, controls) = serve(false);
    controls.store.lock().unwrap().insert(
        "/apis/networking.k8s.io/v1/namespaces/serving/networkpolicies/percentes-partition-replica-1".to_owned(),
        json!({"kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1",
            "metadata": {"name": "percentes-partition-replica-1", "namespace": "serving"}}),
    );
    let out = partition_run(api, &dir);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        said.contains(
            "the NetworkPolicy percentes-partition-replica-1 is already in namespace serving"
        ),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
