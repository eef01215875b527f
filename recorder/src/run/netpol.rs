//! The black-hole on Kubernetes (`injector = "network-policy"`, `[fault.network_policy]`; SPEC
//! §1 "The partition on Kubernetes", issue 38 item 3): a NetworkPolicy that selects the victim
//! pod and allows nothing in or out, as the testbed's iptables rules drop everything in the
//! victim's network namespace.
//!
//! - **Before the run** (`check`): the cluster's CNI must enforce NetworkPolicy, or the API
//!   accepts the policy and nothing happens. The check reads kube-system's DaemonSets and
//!   recognises the agents of the CNIs that enforce it (`ENFORCING`); where it finds none, the
//!   run is refused unless the operator states `enforced = true`. No policy of the partition's
//!   name may be left over from an earlier run. What it found is the `fault-check` host fact.
//! - **At T_inject** (`fire`): the policy and an expiry Job, created together (`kubectl create
//!   -f -`, a List). The Job runs in the cluster, so the partition ends at its pinned length even
//!   if the recorder is gone: it waits until the wall-clock deadline (a restarted pod does not
//!   wait longer) and deletes the policy.
//! - **At the pinned end** (`remove`): the recorder deletes the policy and the Job, and
//!   confirms that the policy is gone.
//!
//! Its limits, which SPEC states: a CNI may let connections opened before the policy go on (it
//! filters new flows only), which the fire's confirmation, a new connection to the victim,
//! cannot see; and the policy isolates the pod, not its node, so the node stays Ready and the
//! node controller's grace period plays no part.

use percentes_formats::config::NetworkPolicy;
use serde_json::{json, Value};

use crate::error::RecordError;

/// The DaemonSets (or containers of one) whose presence in kube-system says the CNI enforces
/// NetworkPolicy, and the CNI's name.
pub(crate) const ENFORCING: [(&str, &str); 10] = [
    ("calico-node", "Calico"),
    ("cilium", "Cilium"),
    ("anetd", "GKE Dataplane V2 (Cilium)"),
    ("antrea-agent", "Antrea"),
    ("kube-router", "kube-router"),
    ("weave-net", "Weave Net"),
    ("canal", "Canal (Calico's policy over flannel)"),
    ("ovnkube-node", "OVN-Kubernetes"),
    ("azure-npm", "Azure Network Policy Manager"),
    (
        "aws-network-policy-agent",
        "the AWS VPC CNI's network policy agent",
    ),
];

/// The most of kubectl's output read.
const OUTPUT_BYTES_MAX: u64 = 4 << 20;

/// The partition's policy name: one per victim.
pub(crate) fn policy_name(victim: &str) -> String {
    let clean: String = victim
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("percentes-partition-{}", clean.trim_matches('-'))
        .chars()
        .take(63 - "-expiry".len())
        .collect()
}

/// The NetworkPolicy: the victim's pods selected, both directions named, no rule: nothing in,
/// nothing out.
pub(crate) fn policy(name: &str, np: &NetworkPolicy) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": np.namespace,
            "labels": {"app.kubernetes.io/managed-by": "percentes"}},
        "spec": {"podSelector": {"matchLabels": np.pod_labels},
            "policyTypes": ["Ingress", "Egress"]}
    })
}

/// What the expiry Job runs once its deadline has passed.
fn expiry_command(name: &str, namespace: &str) -> Vec<String> {
    let args = [
        "delete",
        "networkpolicy",
        name,
        "--namespace",
        namespace,
        "--ignore-not-found",
    ];
    std::iter::once("kubectl")
        .chain(args)
        .map(str::to_owned)
        .collect()
}

/// The expiry Job: waits until `deadline_s` (Unix seconds) and deletes the policy.
pub(crate) fn expiry_job(name: &str, np: &NetworkPolicy, deadline_s: u64) -> Value {
    let script = format!(
        "while [ \"$(date +%s)\" -lt {deadline_s} ]; do sleep 1; done; {}",
        expiry_command(name, &np.namespace).join(" ")
    );
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": format!("{name}-expiry"), "namespace": np.namespace,
            "labels": {"app.kubernetes.io/managed-by": "percentes"}},
        "spec": {
            "backoffLimit": 6,
            "ttlSecondsAfterFinished": 3600,
            "template": {"spec": {
                "serviceAccountName": np.service_account,
                "restartPolicy": "OnFailure",
                "containers": [{"name": "expiry", "image": np.expiry_image,
                    "command": ["/bin/sh", "-c", script]}]
            }}
        }
    })
}

/// kubectl with its fixed arguments, then `args`.
pub(crate) fn kubectl(np: &NetworkPolicy, args: &[&str]) -> Vec<String> {
    let mut argv = np.kubectl.clone();
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    argv
}

/// How long one kubectl call may take (an API server under load included).
const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs `argv` with `input` on its standard input; its standard output, or why it failed.
fn run(argv: &[String], input: Option<&str>) -> Result<String, RecordError> {
    super::child::run(argv, input, KUBECTL_TIMEOUT, OUTPUT_BYTES_MAX as usize)
        .map_err(|why| why.at(format_args!("`{}`", argv.join(" "))))
}

/// Before the run: the CNI enforces NetworkPolicy (or the operator says so) and no policy of
/// the partition's name is there. The `fault-check` fact's text, or why the run is refused: a
/// kubectl call that failed ([`crate::ErrorKind::Command`]), or a cluster where the partition
/// would not happen or one is already in place ([`crate::ErrorKind::Config`]).
pub(crate) fn check(victim: &str, np: &NetworkPolicy) -> Result<String, RecordError> {
    let listed = run(&daemonsets(np), None)?;
    let list: Value = serde_json::from_str(&listed).map_err(|e| {
        RecordError::command(format!(
            "kubectl's list of kube-system's DaemonSets is not JSON: {e}"
        ))
    })?;
    let cni = enforcing_cni(&list);
    let seen: Vec<&str> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["metadata"]["name"].as_str())
        .collect();
    let cni = match (cni, np.enforced) {
        (Some((daemonset, name)), _) => format!("{name} enforces NetworkPolicy (DaemonSet or container {daemonset} in kube-system)"),
        (None, true) => format!("the operator states the CNI enforces NetworkPolicy (fault.network_policy.enforced; kube-system's DaemonSets: {})", seen.join(", ")),
        (None, false) => return Err(RecordError::config(format!(
            "no CNI known to enforce NetworkPolicy runs in kube-system (its DaemonSets: {}; known: {}): a NetworkPolicy would be accepted and ignored, and the partition would not happen. If your CNI enforces it, set fault.network_policy.enforced = true (the fire's confirmation still tests it)",
            if seen.is_empty() { "none".to_owned() } else { seen.join(", ") },
            ENFORCING.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ")
        ))),
    };
    let name = policy_name(victim);
    let left = run(&look(&name, np), None)?;
    if !left.trim().is_empty() {
        return Err(RecordError::config(format!(
            "the NetworkPolicy {name} is already in namespace {} (left by an earlier run?): the victim may be partitioned now. Delete it (kubectl delete networkpolicy {name} --namespace {}) and record again",
            np.namespace, np.namespace
        )));
    }
    Ok(format!(
        "{cni}; no NetworkPolicy {name} in namespace {} before the run",
        np.namespace
    ))
}

/// The first enforcing CNI a DaemonSet list shows: (the DaemonSet or container, the CNI).
fn enforcing_cni(list: &Value) -> Option<(String, &'static str)> {
    list["items"].as_array()?.iter().find_map(|d| {
        let containers = d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str());
        std::iter::once(d["metadata"]["name"].as_str()?)
            .chain(containers)
            .find_map(|n| {
                ENFORCING
                    .iter()
                    .find(|(agent, _)| *agent == n)
                    .map(|(agent, cni)| ((*agent).to_owned(), *cni))
            })
    })
}

/// At T_inject: the policy and its expiry Job created, the Job's deadline `partition_s` after
/// now on the wall clock.
pub(crate) fn fire(
    victim: &str,
    np: &NetworkPolicy,
    partition_s: u64,
) -> Result<String, RecordError> {
    let name = policy_name(victim);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| RecordError::fault(format!("the wall clock is before 1970: {e}")))?
        .as_secs();
    let list = json!({"apiVersion": "v1", "kind": "List",
        "items": [policy(&name, np), expiry_job(&name, np, now_s + partition_s)]});
    let said = run(&create(np), Some(&list.to_string()))?;
    Ok(format!(
        "NetworkPolicy {name} isolates the pods {} in namespace {} (nothing in, nothing out), its expiry Job {name}-expiry armed for {partition_s} s: {}",
        labels(np),
        np.namespace,
        said.trim().replace('\n', "; ")
    ))
}

/// At the pinned end (or early, the run stopping): the policy and the Job deleted, and the
/// policy confirmed gone.
pub(crate) fn remove(victim: &str, np: &NetworkPolicy) -> Result<String, RecordError> {
    let name = policy_name(victim);
    run(&delete("networkpolicy", &name, np), None)?;
    let left = run(&look(&name, np), None)?;
    if !left.trim().is_empty() {
        return Err(RecordError::fault(format!(
            "the NetworkPolicy {name} is still there after its deletion"
        )));
    }
    let job = format!("{name}-expiry");
    run(&delete("job", &job, np), None)?;
    Ok(format!(
        "NetworkPolicy {name} deleted and confirmed gone; its expiry Job {job} deleted"
    ))
}

/// Every kubectl command the injector runs (before the run, at T_inject, at the pinned end) and
/// the one its expiry Job runs, each with the document it writes to kubectl's standard input:
/// what its account must be allowed (deploy/partition.yaml; tests/repo/deploy.rs derives the
/// verbs from these).
pub fn commands(victim: &str, np: &NetworkPolicy) -> Vec<(Vec<String>, Option<Value>)> {
    let name = policy_name(victim);
    let list = json!({"apiVersion": "v1", "kind": "List",
        "items": [policy(&name, np), expiry_job(&name, np, 0)]});
    vec![
        (daemonsets(np), None),
        (look(&name, np), None),
        (create(np), Some(list)),
        (delete("networkpolicy", &name, np), None),
        (delete("job", &format!("{name}-expiry"), np), None),
        (expiry_command(&name, &np.namespace), None),
    ]
}

/// kube-system's DaemonSets, as JSON.
fn daemonsets(np: &NetworkPolicy) -> Vec<String> {
    let args = "get daemonsets --namespace kube-system --output json";
    kubectl(np, &args.split(' ').collect::<Vec<_>>())
}

/// The policy's name if it is there, nothing if not.
fn look(name: &str, np: &NetworkPolicy) -> Vec<String> {
    let args = ["get", "networkpolicy", name, "--namespace", &np.namespace];
    let mut argv = kubectl(np, &args);
    argv.extend(["--ignore-not-found", "--output", "name"].map(str::to_owned));
    argv
}

/// The objects of standard input created. The API server checks them; kubectl's own check
/// would fetch the OpenAPI schema first, a round trip T_inject does not need (the documents
/// are checked against the API's types in tests/repo/kube.rs).
fn create(np: &NetworkPolicy) -> Vec<String> {
    kubectl(np, &["create", "--validate=false", "-f", "-"])
}

/// An object deleted if it is there, without waiting (the look that follows confirms).
fn delete(kind: &str, name: &str, np: &NetworkPolicy) -> Vec<String> {
    let mut argv = kubectl(np, &["delete", kind, name, "--namespace", &np.namespace]);
    argv.extend(["--ignore-not-found", "--wait=false"].map(str::to_owned));
    argv
}

fn labels(np: &NetworkPolicy) -> String {
    np.pod_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np() -> NetworkPolicy {
        let labels = [("statefulset.kubernetes.io/pod-name", "replica-1")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()));
        NetworkPolicy {
            namespace: "serving".into(),
            ..NetworkPolicy::new(labels.into(), "percentes:latest")
        }
    }

    /// The policy selects the victim's labels and names both directions with no rule (deny
    /// all); the Job waits for its wall-clock deadline and deletes that policy as the account
    /// given; a long victim name still makes names within the API's 63 characters.
    #[test]
    fn the_policy_denies_everything_and_the_job_deletes_it_at_its_deadline() {
        let name = policy_name("Replica_1");
        assert_eq!(name, "percentes-partition-replica-1");
        let p = policy(&name, &np());
        assert_eq!(
            p["spec"]["podSelector"]["matchLabels"]["statefulset.kubernetes.io/pod-name"],
            "replica-1"
        );
        assert_eq!(p["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert!(p["spec"].get("ingress").is_none() && p["spec"].get("egress").is_none());
        let job = expiry_job(&name, &np(), 1_764_840_120);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "percentes-recorder");
        let script = pod["containers"][0]["command"][2].as_str().unwrap();
        assert!(
            script.contains("-lt 1764840120 ]")
                && script.ends_with("kubectl delete networkpolicy percentes-partition-replica-1 --namespace serving --ignore-not-found"),
            "{script}"
        );
        assert!(format!("{}-expiry", policy_name(&"r".repeat(80))).len() <= 63);
    }

    /// The CNI is recognised by a DaemonSet's name or one of its containers' (AWS's agent runs
    /// inside aws-node); flannel alone enforces nothing.
    #[test]
    fn an_enforcing_cni_is_recognised_by_its_agent() {
        let list = |items: Value| json!({"kind": "DaemonSetList", "items": items});
        let ds = |name: &str, containers: &[&str]| {
            json!({"metadata": {"name": name}, "spec": {"template": {"spec": {"containers":
                containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()}}}})
        };
        assert_eq!(
            enforcing_cni(&list(json!([
                ds("kube-proxy", &["kube-proxy"]),
                ds("calico-node", &["calico-node"])
            ]))),
            Some(("calico-node".to_owned(), "Calico"))
        );
        assert_eq!(
            enforcing_cni(&list(json!([ds(
                "aws-node",
                &["aws-node", "aws-network-policy-agent"]
            )]))),
            Some((
                "aws-network-policy-agent".to_owned(),
                "the AWS VPC CNI's network policy agent"
            ))
        );
        assert_eq!(
            enforcing_cni(&list(json!([ds("kube-flannel-ds", &["kube-flannel"])]))),
            None
        );
        assert_eq!(enforcing_cni(&json!({"items": "odd"})), None);
    }
}
