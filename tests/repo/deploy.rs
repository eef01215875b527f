//! deploy/: the Kubernetes manifests read as the real API types (k8s-openapi, Kubernetes 1.33),
//! every field they set one the API has, and every flag, path, name and file they use one that
//! exists (this repository's CLI, the manifests' own volumes and objects, the seccomp profile).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::golden::{percentes, root};

/// `value` read as `T`, then written back: equal to what was read only if every field the file
/// sets is one `T` has (the types skip unknown fields when reading).
pub(super) fn typed<T: DeserializeOwned + Serialize>(value: &serde_json::Value, what: &str) -> T {
    let parsed: T = serde_json::from_value(value.clone())
        .unwrap_or_else(|e| panic!("{what} is not a valid Kubernetes object: {e}"));
    let back = serde_json::to_value(&parsed).unwrap();
    assert_eq!(
        &back, value,
        "{what}: a field the Kubernetes API does not have, or a value it would rewrite"
    );
    parsed
}

#[derive(Default)]
struct Objects {
    service_accounts: Vec<ServiceAccount>,
    roles: Vec<Role>,
    bindings: Vec<RoleBinding>,
    cluster_roles: Vec<ClusterRole>,
    cluster_bindings: Vec<ClusterRoleBinding>,
    config_maps: Vec<ConfigMap>,
    claims: Vec<PersistentVolumeClaim>,
    jobs: Vec<Job>,
    services: Vec<Service>,
    deployments: Vec<Deployment>,
}

fn read(path: &str) -> Objects {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    let mut objects = Objects::default();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let yaml = <serde_yaml::Value as serde::Deserialize>::deserialize(document).unwrap();
        let value: serde_json::Value = serde_json::to_value(yaml).unwrap();
        let kind = value["kind"].as_str().unwrap_or_default().to_owned();
        let what = format!("{path}: {kind} {}", value["metadata"]["name"]);
        match kind.as_str() {
            "ServiceAccount" => objects.service_accounts.push(typed(&value, &what)),
            "Role" => objects.roles.push(typed(&value, &what)),
            "RoleBinding" => objects.bindings.push(typed(&value, &what)),
            "ClusterRole" => objects.cluster_roles.push(typed(&value, &what)),
            "ClusterRoleBinding" => objects.cluster_bindings.push(typed(&value, &what)),
            "ConfigMap" => objects.config_maps.push(typed(&value, &what)),
            "PersistentVolumeClaim" => objects.claims.push(typed(&value, &what)),
            "Job" => objects.jobs.push(typed(&value, &what)),
            "Service" => objects.services.push(typed(&value, &what)),
            "Deployment" => objects.deployments.push(typed(&value, &what)),
            other => panic!("{what}: kind {other:?} is not one this test knows"),
        }
    }
    objects
}

#[test]
fn the_recorder_job_is_valid_kubernetes_and_uses_only_what_exists() {
    let _beside = crate::beside();
    let objects = read("deploy/recorder-job.yaml");
    let [job] = objects.jobs.as_slice() else {
        panic!("one Job")
    };
    let spec = job.spec.as_ref().unwrap();
    assert_eq!(spec.completion_mode.as_deref(), Some("Indexed"));
    let pod = spec.template.spec.as_ref().unwrap();
    let [container] = pod.containers.as_slice() else {
        panic!("one container")
    };
    let command = container.args.as_ref().unwrap().join(" ");
    let all: Vec<&str> = command.split_whitespace().collect();
    // Shard 0's watcher in the background, then the recorder in the shell's place.
    let exec = all
        .iter()
        .position(|w| *w == "exec")
        .expect("exec percentes record");
    let words = &all[exec..];
    assert_eq!(&words[..3], ["exec", "percentes", "record"], "{command}");
    let watch_at = all
        .iter()
        .position(|w| *w == "watch")
        .expect("percentes watch");
    let watch_end = watch_at + all[watch_at..].iter().position(|w| *w == "&").unwrap();
    let watch = &all[watch_at + 1..watch_end];
    assert!(
        command.contains("if [ \"$JOB_COMPLETION_INDEX\" = 0 ]; then percentes watch"),
        "the watcher runs beside shard 0, which runs the fault plan: {command}"
    );
    let (code, help, _) = percentes(&["watch", "--help"]);
    assert_eq!(code, 0);
    for flag in watch.iter().filter(|w| w.starts_with('-')) {
        assert!(
            help.contains(&format!("{flag} ")),
            "watch has no flag {flag}"
        );
    }
    let value_of =
        |flag: &str| watch[watch.iter().position(|w| *w == flag).unwrap() + 1].to_owned();
    let socket = watch[0];
    assert!(
        words.windows(2).any(|w| w == ["--events-socket", socket]),
        "the recorder listens where the watcher sends: {command}"
    );

    // N agrees: --shards N, completions and parallelism.
    let shards: i32 = words[words.iter().position(|w| *w == "--shards").unwrap() + 1]
        .parse()
        .unwrap();
    assert_eq!(spec.completions, Some(shards));
    assert_eq!(spec.parallelism, Some(shards));

    // Every flag is one `percentes record` has.
    let (code, help, _) = percentes(&["record", "--help"]);
    assert_eq!(code, 0);
    for flag in words.iter().filter(|w| w.starts_with('-')) {
        assert!(
            help.contains(&format!("{flag} ")) || help.contains(&format!("{flag},")),
            "record has no flag {flag}"
        );
    }
    // The --start-at and the shard index come from variables the pod has.
    assert!(command.contains("\"$START_AT\"") && command.contains("${JOB_COMPLETION_INDEX}"));
    let env = container.env.as_ref().unwrap();
    let start = env.iter().find(|e| e.name == "START_AT").unwrap();
    let key = start
        .value_from
        .as_ref()
        .unwrap()
        .config_map_key_ref
        .as_ref()
        .unwrap();
    let text = std::fs::read_to_string(root().join("deploy/recorder-job.yaml")).unwrap();
    assert!(
        text.contains(&format!(
            "kubectl create configmap {} --from-literal={}=",
            key.name, key.key
        )),
        "the file says how to create the ConfigMap the epoch comes from"
    );

    // Every absolute path in the command lies on a mounted volume, and each volume exists.
    let mounts: BTreeMap<String, String> = container
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.mount_path.clone(), m.name.clone()))
        .collect();
    let volumes = pod.volumes.as_ref().unwrap();
    for path in all
        .iter()
        .map(|w| w.trim_matches('"'))
        .filter(|w| w.starts_with('/') && *w != "/bin/sh")
    {
        let (mount, volume) = mounts
            .iter()
            .find(|(mount, _)| path.starts_with(&format!("{mount}/")))
            .unwrap_or_else(|| panic!("{path} is on no mounted volume"));
        let volume = volumes.iter().find(|v| &v.name == volume).unwrap();
        if volume.empty_dir.is_some() {
            // The pod's own scratch: the events socket between the watcher and the recorder.
            continue;
        }
        if let Some(config) = &volume.config_map {
            // A file the ConfigMap holds, and a configuration that loads.
            let file = &path[mount.len() + 1..];
            let map = objects
                .config_maps
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(config.name.as_str()))
                .unwrap_or_else(|| panic!("no ConfigMap {}", config.name));
            let toml = &map.data.as_ref().unwrap()[file];
            let loaded = percentes_formats::config::Config::parse(toml.as_bytes())
                .unwrap_or_else(|e| panic!("{file} in the ConfigMap does not load: {e}"));
            assert_eq!(loaded.profile.name(), "experiment");
            // Issue 38: the routing regime is declared, so `config check` has nothing to warn
            // of; the same file claiming layer 7 without a replica header is refused at load.
            assert_eq!(loaded.warnings(), Vec::<String>::new(), "{file}");
            let layer_7 = toml.replace("routing = \"layer-4\"", "routing = \"layer-7\"");
            assert_ne!(&layer_7, toml, "{file} declares layer-4 routing");
            let refused = percentes_formats::config::Config::parse(layer_7.as_bytes())
                .expect_err("layer 7 with nothing naming the replica")
                .to_string();
            assert!(refused.contains("target.replica_header"), "{refused}");
            assert_eq!(
                loaded.fault.fire_command.first().map(String::as_str),
                Some("kubectl"),
                "the exec injector's command is the kubectl the image holds"
            );
        } else {
            let claim = &volume.persistent_volume_claim.as_ref().unwrap().claim_name;
            assert!(
                objects
                    .claims
                    .iter()
                    .any(|c| c.metadata.name.as_deref() == Some(claim)),
                "no PersistentVolumeClaim {claim}"
            );
        }
    }

    // The account exists and is bound to a Role that grants every verb the run's kubectl
    // commands need (the injector's and the collectors'), derived from the commands themselves.
    let account = pod.service_account_name.as_deref().unwrap();
    assert!(objects
        .service_accounts
        .iter()
        .any(|a| a.metadata.name.as_deref() == Some(account)));
    let binding = objects
        .bindings
        .iter()
        .find(|b| {
            b.subjects
                .iter()
                .flatten()
                .any(|s| s.kind == "ServiceAccount" && s.name == account)
        })
        .expect("the account is bound");
    let role = objects
        .roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
        .expect("the bound Role is in the file");
    // And the ClusterRoles bound to it (nodes are cluster-scoped).
    let cluster_rules: Vec<_> = objects
        .cluster_bindings
        .iter()
        .filter(|b| {
            b.subjects
                .iter()
                .flatten()
                .any(|s| s.kind == "ServiceAccount" && s.name == account)
        })
        .map(|b| {
            objects
                .cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(b.role_ref.name.as_str()))
                .expect("the bound ClusterRole is in the file")
        })
        .flat_map(|r| r.rules.iter().flatten())
        .collect();
    let rules: Vec<_> = role.rules.iter().flatten().chain(cluster_rules).collect();
    let granted = |resource: &str, verb: &str| {
        rules.iter().any(|rule| {
            rule.resources.iter().flatten().any(|r| r == resource)
                && rule.verbs.iter().any(|v| v == verb)
        })
    };
    let config = run_toml(&objects);
    assert_eq!(
        Some(value_of("--victim")),
        config.fault.victim,
        "the watcher follows the victim"
    );
    // The watcher's commands, as the watcher builds them from its flags.
    use percentes_recorder::watch::{kubectl_argv, Watched};
    let kubectl = ["kubectl".to_owned()];
    let (namespace, selector) = (value_of("--namespace"), value_of("--selector"));
    let mut watched = vec![kubectl_argv(&kubectl, Watched::Pods, &namespace, &selector)];
    if watch.contains(&"--nodes") {
        watched.push(kubectl_argv(
            &kubectl,
            Watched::Nodes,
            &namespace,
            &selector,
        ));
    }
    let commands: Vec<&Vec<String>> = std::iter::once(&config.fault.fire_command)
        .chain(config.target.accelerator_commands.values())
        .filter(|argv| argv.first().map(String::as_str) == Some("kubectl"))
        .chain(&watched)
        .collect();
    assert!(
        commands.len() >= 5,
        "the injector, two collectors and the watcher's two watches: {commands:?}"
    );
    let mut needed = std::collections::BTreeSet::new();
    for argv in commands {
        needed.extend(kubectl_needs(argv));
    }
    for (resource, verb) in &needed {
        assert!(
            granted(resource, verb),
            "the Role lacks {verb} on {resource}"
        );
    }
    // And nothing beyond them.
    for rule in &rules {
        for resource in rule.resources.iter().flatten() {
            for verb in &rule.verbs {
                assert!(
                    needed.contains(&(resource.as_str(), verb.as_str())),
                    "the Role grants {verb} on {resource}, which no shipped command uses"
                );
            }
        }
    }

    // Guaranteed QoS with whole CPUs, off the serving nodes, the journal volume writable by the
    // image's uid.
    let resources = container.resources.as_ref().unwrap();
    assert_eq!(
        resources.requests, resources.limits,
        "Guaranteed: requests = limits"
    );
    let cpu = &resources.limits.as_ref().unwrap()["cpu"].0;
    assert!(
        cpu.parse::<u32>().is_ok_and(|n| n >= 1),
        "whole CPUs: {cpu}"
    );
    let security = pod.security_context.as_ref().unwrap();
    assert_eq!(security.fs_group, Some(10001));
    assert_eq!(security.run_as_user, Some(10001));
    let anti = pod
        .affinity
        .as_ref()
        .unwrap()
        .pod_anti_affinity
        .as_ref()
        .unwrap();
    let required = anti
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap();
    assert!(
        required.iter().all(|t| t
            .label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()
            .get("job-name")
            .is_none()),
        "shards among themselves are preferred apart, not required"
    );
    assert!(anti
        .preferred_during_scheduling_ignored_during_execution
        .is_some());

    // The seccomp profile it names is the one in deploy/, and it lets io_uring through.
    let profile = pod
        .security_context
        .as_ref()
        .unwrap()
        .seccomp_profile
        .as_ref()
        .unwrap();
    assert_eq!(profile.type_, "Localhost");
    assert!(text.contains(&format!(
        "/var/lib/kubelet/seccomp/{}",
        profile.localhost_profile.as_deref().unwrap()
    )));
    let seccomp: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/seccomp-io-uring.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(seccomp["defaultAction"], "SCMP_ACT_ALLOW");
    for rule in seccomp["syscalls"].as_array().unwrap() {
        for name in rule["names"].as_array().unwrap() {
            let name = name.as_str().unwrap();
            assert!(
                !name.starts_with("io_uring"),
                "the profile must not refuse {name}"
            );
            assert_ne!(name, "adjtimex", "the recorder reads the clock's state");
        }
    }

    // The image holds both programs the Job runs, from nothing a registry serves: `scratch`,
    // this repository's static binary, and Debian's kubectl, unpacked by the script that builds
    // it (issue 57 item 3), never a download.
    let containerfile = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    let script = std::fs::read_to_string(root().join("scripts/build-image.sh")).unwrap();
    let froms: Vec<&str> = containerfile
        .lines()
        .filter(|l| l.starts_with("FROM "))
        .collect();
    assert_eq!(froms, ["FROM scratch"], "no registry image");
    assert!(containerfile.contains("COPY percentes /usr/local/bin/percentes"));
    assert!(containerfile.contains("COPY kubectl /usr/local/bin/kubectl"));
    // The image's binary is the dist profile's (Cargo.toml: LTO, one codegen unit).
    assert!(
        script.contains("cargo build --profile dist --locked -p percentes --target \"$target\"")
    );
    assert!(script.contains("apt-get download kubernetes-client"));
    assert!(!script.contains("dl.k8s.io") && !containerfile.contains("curl"));
    assert!(script.contains("podman build --quiet -f deploy/Containerfile -t \"$tag\""));
    assert_eq!(
        container.image.as_deref(),
        Some("percentes:latest"),
        "the image the Containerfile's usage line tags"
    );
    assert!(
        containerfile.contains("-t percentes:latest") && script.contains("tag=percentes:latest")
    );
}

/// The run.toml the Job's ConfigMap holds, loaded.
fn run_toml(objects: &Objects) -> percentes_formats::config::Config {
    let map = objects
        .config_maps
        .iter()
        .find(|c| c.data.as_ref().is_some_and(|d| d.contains_key("run.toml")))
        .expect("a ConfigMap with run.toml");
    percentes_formats::config::Config::parse(map.data.as_ref().unwrap()["run.toml"].as_bytes())
        .unwrap()
}

/// The (resource, verb) pairs of the Kubernetes API a kubectl command line needs: `delete pod
/// P` deletes a pod; `exec P -- ...` reads the pod and creates its exec subresource; `get pods
/// ... --watch` lists and watches. A command this test does not know fails it, so a new tool
/// cannot ship without its verbs being derived.
fn kubectl_needs(argv: &[String]) -> Vec<(&'static str, &'static str)> {
    let words: Vec<&str> = argv.iter().map(String::as_str).collect();
    match words.get(1..3) {
        Some(["delete", "pod" | "pods"]) => vec![("pods", "delete")],
        Some(["exec", _]) => vec![("pods", "get"), ("pods/exec", "create")],
        Some(["get", "pod" | "pods"]) if words.contains(&"--watch") => {
            vec![("pods", "list"), ("pods", "watch")]
        }
        Some(["get", "node" | "nodes"]) if words.contains(&"--watch") => {
            vec![("nodes", "list"), ("nodes", "watch")]
        }
        _ => panic!("a kubectl command this test cannot derive verbs for: {words:?}"),
    }
}

/// Issue 38 item 3: deploy/partition.yaml grants the recorder's account every verb the
/// network-policy injector's commands (and its expiry Job's) need, derived from the commands
/// the injector itself builds, each in the namespace it runs in (the CNI check in kube-system),
/// and nothing beyond them; the objects are the API's RBAC types.
#[test]
fn the_partition_rbac_grants_what_the_injector_runs_and_nothing_more() {
    let objects = read("deploy/partition.yaml");
    let labels = [("statefulset.kubernetes.io/pod-name", "replica-1")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let np = percentes_formats::config::NetworkPolicy::new(labels.into(), "percentes:latest");
    let mut needed = std::collections::BTreeSet::new();
    for (argv, input) in percentes_recorder::run::netpol::commands("replica-1", &np) {
        let flag = argv.iter().position(|a| a == "--namespace");
        let namespace = flag.map(|i| argv[i + 1].clone()).unwrap_or_default();
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        if let Some(["create", ..]) = words.get(1..) {
            // `create -f -`: each object of the document, in the namespace it names.
            for item in input.unwrap()["items"].as_array().unwrap() {
                let resource = match item["kind"].as_str().unwrap() {
                    "NetworkPolicy" => "networkpolicies",
                    "Job" => "jobs",
                    other => {
                        panic!("the injector creates a {other}, which this test does not know")
                    }
                };
                let namespace = item["metadata"]["namespace"].as_str().unwrap().to_owned();
                needed.insert((namespace, resource.to_owned(), "create".to_owned()));
            }
            continue;
        }
        let pairs: Vec<(String, &str)> = match words.get(1..3) {
            Some(["get", "daemonsets"]) => vec![("daemonsets".into(), "list")],
            Some(["get", "networkpolicy"]) => vec![("networkpolicies".into(), "get")],
            Some(["delete", "networkpolicy"]) => vec![("networkpolicies".into(), "delete")],
            Some(["delete", "job"]) => vec![("jobs".into(), "delete")],
            _ => panic!("a kubectl command this test cannot derive verbs for: {words:?}"),
        };
        for (resource, verb) in pairs {
            needed.insert((namespace.clone(), resource, verb.to_owned()));
        }
    }
    // Each Role bound to the account, with the namespace it lives in.
    let mut granted = std::collections::BTreeSet::new();
    for binding in &objects.bindings {
        assert!(binding
            .subjects
            .iter()
            .flatten()
            .any(|s| s.kind == "ServiceAccount" && s.name == "percentes-recorder"));
        let role = objects
            .roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
            .expect("the bound Role is in the file");
        let namespace = role
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        assert_eq!(
            binding
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            namespace
        );
        for rule in role.rules.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    granted.insert((namespace.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    assert_eq!(granted, needed, "granted (left) against needed (right)");
}

/// Issue 38: the layer-7 example names the replica in a response header, retries nothing and
/// reaches the replicas by the headless Service's names; the Job's run.toml switched to it
/// (base_url, routing, replica_header) loads with no warning, its replicas' addresses the
/// proxy's upstreams. Read as the API types; not run on a cluster (none here).
#[test]
fn the_layer_7_example_names_the_upstream_and_retries_nothing() {
    let _beside = crate::beside();
    let proxy = read("deploy/l7-proxy.yaml");
    let headless = proxy
        .services
        .iter()
        .find(|s| s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None"))
        .expect("a headless Service for the replicas");
    let headless_name = headless.metadata.name.clone().unwrap();
    let front = proxy
        .services
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("vllm-l7"))
        .expect("the proxy's Service");
    let [deployment] = proxy.deployments.as_slice() else {
        panic!("one Deployment")
    };
    let labels = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .clone();
    assert_eq!(
        front.spec.as_ref().unwrap().selector,
        labels,
        "the Service selects the proxy"
    );
    let conf = &proxy.config_maps[0].data.as_ref().unwrap()["nginx.conf"];
    for line in [
        "add_header x-upstream $upstream_addr always;",
        "proxy_next_upstream off;",
        "proxy_buffering off;",
        "tcp_nodelay on;",
    ] {
        assert!(conf.contains(line), "nginx.conf lacks {line}");
    }
    let upstreams: Vec<&str> = conf
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("server "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|host_port| host_port.contains(':'))
        .collect();
    assert_eq!(upstreams.len(), 2, "{conf}");
    for upstream in &upstreams {
        assert!(
            upstream.contains(&format!(".{headless_name}.")),
            "{upstream}"
        );
    }

    let job = read("deploy/recorder-job.yaml");
    let text = job
        .config_maps
        .iter()
        .find_map(|c| c.data.as_ref()?.get("run.toml").cloned())
        .unwrap();
    let layer_7 = text
        .replace(
            "base_url = \"http://vllm.default.svc.cluster.local:8000\"",
            "base_url = \"http://vllm-l7.default.svc.cluster.local:8000\"",
        )
        .replace(
            "routing = \"layer-4\"",
            "routing = \"layer-7\"\nreplica_header = \"x-upstream\"",
        );
    assert!(layer_7.contains("vllm-l7") && layer_7.contains("x-upstream"));
    let config = percentes_formats::config::Config::parse(layer_7.as_bytes()).unwrap();
    assert_eq!(config.warnings(), Vec::<String>::new());
    let mut addresses: Vec<&str> = config
        .target
        .replica_addresses
        .values()
        .map(String::as_str)
        .collect();
    addresses.sort_unstable();
    assert_eq!(
        addresses, upstreams,
        "the recorder probes what the proxy balances over"
    );
}

/// Every manifest in deploy/ passes `kubectl apply --dry-run=client --validate=false` (the
/// client maps each kind through the discovery [`super::kube::fake_api`] serves and builds every
/// object; nothing is sent to a cluster, none is here).
#[test]
fn kubectl_accepts_every_manifest_in_a_client_dry_run() {
    let _beside = crate::beside();
    if super::kube::lacks_kubectl("kubectl_accepts_every_manifest_in_a_client_dry_run") {
        return;
    }
    let server = format!(
        "http://{}",
        super::kube::fake_api(Default::default(), Default::default())
    );
    let home = percentes_testkit::Scratch::new("kubectl");
    for manifest in [
        "deploy/recorder-job.yaml",
        "deploy/l7-proxy.yaml",
        "deploy/partition.yaml",
    ] {
        let out = std::process::Command::new("kubectl")
            // No --namespace: an object that names its own (partition.yaml's kube-system Role)
            // would conflict with it; the others land in the empty configuration's "default".
            .args(["--server", &server])
            .args([
                "apply",
                "--dry-run=client",
                "--validate=false",
                "-f",
                manifest,
            ])
            .current_dir(root())
            // No kubeconfig of the user's, and no cache of a real cluster's discovery.
            .env("HOME", &home)
            .env("KUBECONFIG", home.join("none"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{manifest}: {stdout}{stderr}");
        let objects = stdout.lines().filter(|l| l.contains("(dry run)")).count();
        let documents = std::fs::read_to_string(root().join(manifest))
            .unwrap()
            .split("\n---")
            .count();
        assert_eq!(objects, documents, "{manifest}: {stdout}");
    }
    let _ = std::fs::remove_dir_all(home);
}

/// A kubectl that records its calls and plays a cluster where every Job succeeds (or, with
/// FAKE_FAIL set, fails): `cp` from the fetch pod hands out the shards prepared for the current
/// run (the count of epochs created so far).
const FAKE_KUBECTL: &str = r#"#!/usr/bin/env bash
echo "$*" >> "$FAKE_DIR/log"
case "$1" in
  create) n=$(cat "$FAKE_DIR/runs" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE_DIR/runs" ;;
  get)
    case "$*" in
      *failed*) [ -n "${FAKE_FAIL:-}" ] && echo 1 ;;
      *succeeded*) echo 3 ;;
    esac ;;
  cp) cp "$FAKE_DIR/run-$(cat "$FAKE_DIR/runs")/${2#percentes-fetch:/journals/}" "$3" ;;
  apply) [ "$3" = - ] && cat > /dev/null ;;
esac
exit 0
"#;

/// deploy/campaign.sh against [`FAKE_KUBECTL`]: for each run it waits for the replicas, starts
/// the Job on a fresh epoch, waits for it, copies every shard off the volume, empties it and
/// merges; then `percentes campaign` over the manifests writes the table. A failed Job stops
/// the campaign naming the run. Not run on a cluster (none here): the commands are the ones a
/// cluster would get, the journals the golden run split in three.
#[cfg(unix)]
#[test]
fn the_campaign_script_records_collects_merges_and_summarizes() {
    let _machine = crate::beside();
    let dir = percentes_testkit::Scratch::new("campaign");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let kubectl = bin.join("kubectl");
    std::fs::write(&kubectl, FAKE_KUBECTL).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let golden = std::fs::read(root().join("golden/runs/demo-clean-delete-factor10.pj")).unwrap();
    let shards = percentes_formats::journal::synthetic::split(&golden, 3);
    for run in 1..=2 {
        let run_dir = dir.join(format!("run-{run}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        for (i, bytes) in shards.iter().enumerate() {
            std::fs::write(run_dir.join(format!("shard-{i}.pj")), bytes).unwrap();
        }
    }
    let percentes_dir = std::path::Path::new(env!("CARGO_BIN_EXE_percentes"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        percentes_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let campaign = |out: &str, fail: bool| {
        let mut command = std::process::Command::new("bash");
        command
            .args(["deploy/campaign.sh", "2"])
            .arg(dir.join(out))
            .current_dir(root())
            .env("PATH", &path)
            .env("FAKE_DIR", &dir)
            .env("PERCENTES_LEAD_S", "1");
        if fail {
            command.env("FAKE_FAIL", "1");
        }
        command.output().unwrap()
    };
    let done = campaign("out", false);
    let stderr = String::from_utf8_lossy(&done.stderr);
    let stdout = String::from_utf8_lossy(&done.stdout);
    // Two valid runs: the table, which says the group is short of the five §5 asks for.
    assert_eq!(done.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("exit 0"), "{stdout}");
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("out/campaign/campaign.json")).unwrap())
            .unwrap();
    assert!(table.is_object(), "{table}");
    for run in 1..=2 {
        assert!(dir
            .join(format!("out/run-{run}/run.manifest.json"))
            .is_file());
    }
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    let run_calls: Vec<&str> = log.lines().filter(|l| !l.starts_with("get job")).collect();
    let one_run = [
        "wait --for=condition=Ready pod -l app=vllm --timeout=20m",
        "delete job percentes-recorders --ignore-not-found --wait=true",
        "delete configmap percentes-start --ignore-not-found",
        "create configmap percentes-start --from-literal=start_at=",
        "apply -f deploy/recorder-job.yaml",
        "apply -f -",
        "wait --for=condition=Ready pod/percentes-fetch --timeout=5m",
        "cp percentes-fetch:/journals/shard-0.pj",
        "cp percentes-fetch:/journals/shard-1.pj",
        "cp percentes-fetch:/journals/shard-2.pj",
        "exec percentes-fetch -- sh -c rm -f /journals/shard-*.pj",
        "delete pod percentes-fetch --wait=true",
    ];
    assert_eq!(run_calls.len(), 2 * one_run.len(), "{log}");
    for (call, expected) in run_calls.iter().zip(one_run.iter().cycle()) {
        assert!(
            call.starts_with(expected),
            "{call:?} where {expected:?} belongs:\n{log}"
        );
    }
    // A failed Job stops the campaign at its run, naming it.
    std::fs::remove_file(dir.join("runs")).unwrap();
    let failed = campaign("failed", true);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("run 1's Job failed"), "{stderr}");
    assert!(!dir.join("failed/campaign").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

/// A program that runs its arguments under a seccomp filter refusing `io_uring_setup` with
/// EPERM, as containerd 2.0's and Docker 25+'s default profiles do.
#[cfg(target_os = "linux")]
const REFUSE_IO_URING_C: &str = r#"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 425 /* io_uring_setup */, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = { sizeof filter / sizeof filter[0], filter };
    if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program)) {
        perror("seccomp");
        return 99;
    }
    execvp(argv[1], argv + 1);
    perror("exec");
    return 98;
}
"#;

#[cfg(target_os = "linux")]
#[test]
fn record_refuses_at_start_when_a_seccomp_profile_refuses_io_uring() {
    let _beside = crate::beside();
    let dir = percentes_testkit::Scratch::new("deploy");
    let source = dir.join("refuse-io-uring.c");
    std::fs::write(&source, REFUSE_IO_URING_C).unwrap();
    let helper = dir.join("refuse-io-uring");
    let built = std::process::Command::new("cc")
        .arg("-o")
        .arg(&helper)
        .arg(&source)
        .output();
    match built {
        Ok(out) if out.status.success() => {}
        other => {
            crate::prerequisite_missing(
                "record_refuses_at_start_when_a_seccomp_profile_refuses_io_uring",
                &format!("a C compiler (cc) to build the seccomp helper: {other:?}"),
            );
            return;
        }
    }
    let config = dir.join("run.toml");
    let (code, _, stderr) = percentes(&["init", "-o", config.to_str().unwrap(), "--force"]);
    assert_eq!(code, 0, "{stderr}");
    let journal = dir.join("run.pj");
    let out = std::process::Command::new(&helper)
        .arg(env!("CARGO_BIN_EXE_percentes"))
        .args(["record", config.to_str().unwrap(), "--quiet", "-o"])
        .arg(&journal)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("io_uring setup refused")
            && stderr.contains("deploy/seccomp-io-uring.json"),
        "{stderr}"
    );
    assert!(!journal.exists(), "no journal is written");
    std::fs::remove_dir_all(dir).unwrap();
}
