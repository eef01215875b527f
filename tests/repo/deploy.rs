//! deploy/: the Kubernetes manifests read as the real API types (k8s-openapi, Kubernetes 1.33),
//! every field they set one the API has, and every flag, path, name and file they use one that
//! exists (this repository's CLI, the manifests' own volumes and objects, the seccomp profile).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::golden::{percentes, root};

/// `value` read as `T`, then written back: equal to what was read only if every field the file
/// sets is one `T` has (the types skip unknown fields when reading).
fn typed<T: DeserializeOwned + Serialize>(value: &serde_json::Value, what: &str) -> T {
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
    config_maps: Vec<ConfigMap>,
    claims: Vec<PersistentVolumeClaim>,
    jobs: Vec<Job>,
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
            "ConfigMap" => objects.config_maps.push(typed(&value, &what)),
            "PersistentVolumeClaim" => objects.claims.push(typed(&value, &what)),
            "Job" => objects.jobs.push(typed(&value, &what)),
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
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(&words[..3], ["exec", "percentes", "record"], "{command}");

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
    for path in words
        .iter()
        .map(|w| w.trim_matches('"'))
        .filter(|w| w.starts_with('/'))
    {
        let (mount, volume) = mounts
            .iter()
            .find(|(mount, _)| path.starts_with(&format!("{mount}/")))
            .unwrap_or_else(|| panic!("{path} is on no mounted volume"));
        let volume = volumes.iter().find(|v| &v.name == volume).unwrap();
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

    // The account exists and is bound to a Role that may delete pods.
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
    assert!(role.rules.iter().flatten().any(|rule| {
        rule.resources.iter().flatten().any(|r| r == "pods")
            && rule.verbs.iter().any(|v| v == "delete")
    }));

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

    // The image holds both programs the Job runs, and is built from this repository's binary.
    let containerfile = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    assert!(containerfile.contains("cargo build --release --locked -p percentes"));
    assert!(containerfile.contains("/usr/local/bin/percentes"));
    assert!(
        containerfile.contains("/usr/local/bin/kubectl")
            && containerfile.contains("sha256sum --check")
    );
    assert_eq!(
        container.image.as_deref(),
        Some("percentes:latest"),
        "the image the Containerfile's usage line tags"
    );
    assert!(containerfile.contains("-t percentes:latest"));
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
    let dir = std::env::temp_dir().join(format!("percentes-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
