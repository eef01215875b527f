//! What a Kubernetes watch stream says about the fault's target, as timeline boundaries: the
//! state each pod and node was last seen in, and the transitions that are boundaries of §5's
//! decomposition. Pure: the watch events go in, the boundaries come out; [`super`] runs kubectl
//! and hands them to the recorder.
//!
//! Which transition is which boundary (the victim is the pod named `fault.victim`'s pod when the
//! watch first saw it; a replacement is a pod of the selector first seen after the victim left):
//!
//! | seen | subject |
//! |---|---|
//! | the victim terminating (`deletionTimestamp` set), removed from the API, or Ready turning false | `detected`: its endpoints leave the Service (once) |
//! | a replacement created | `orchestrator` |
//! | a replacement given a node (`spec.nodeName`) | `reschedule` |
//! | a replacement's container running (or the victim's own, restarted in place) | `container-start` |
//! | a replacement Ready | `orchestrator` (readiness is the recorder's probe's to measure) |
//! | a node's Ready condition changing | `orchestrator` |
//!
//! Nothing in the API says when weights are loaded; `weight-load` comes from elsewhere (a log
//! line, an in-process controller) or stays N/A. The API's own times (RFC 3339, whole seconds)
//! are quoted in each detail; the boundary's time is when the watch delivered it, which is the
//! finer of the two.

use std::collections::{BTreeMap, BTreeSet};

use percentes_formats::journal::records::TimelineSubject;
use serde_json::Value;

/// A boundary seen: its subject and what happened, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Boundary {
    /// The timeline subject.
    pub subject: TimelineSubject,
    /// What the API showed.
    pub detail: String,
}

/// A pod as last seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct PodState {
    node: Option<String>,
    terminating: bool,
    ready: bool,
    /// Each container's `startedAt` while running.
    running: BTreeMap<String, String>,
    restarts: u64,
}

impl PodState {
    fn of(pod: &Value) -> PodState {
        let status = &pod["status"];
        let running = status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let started = c["state"]["running"]["startedAt"].as_str()?;
                Some((c["name"].as_str()?.to_owned(), started.to_owned()))
            })
            .collect();
        let restarts = status["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["restartCount"].as_u64())
            .sum();
        PodState {
            node: pod["spec"]["nodeName"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            terminating: pod["metadata"]["deletionTimestamp"].is_string(),
            ready: condition(status, "Ready").is_some_and(|c| c["status"] == "True"),
            running,
            restarts,
        }
    }
}

/// The condition of `kind` in a status, if it has one.
fn condition<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// ", since T" for a condition's last transition, when the API gave one.
fn since(condition: Option<&Value>) -> String {
    condition
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(|t| format!(", since {t}"))
        .unwrap_or_default()
}

/// A replacement's transitions: given a node, its containers running, Ready.
fn replacement_pod(pod: &Value, name: &str, was: &PodState, now: &PodState) -> Vec<Boundary> {
    let mut out = Vec::new();
    if let (None, Some(node)) = (&was.node, &now.node) {
        out.push(Boundary {
            subject: TimelineSubject::Reschedule,
            detail: format!(
                "replacement pod {name} scheduled to node {node} (PodScheduled{})",
                since(condition(&pod["status"], "PodScheduled"))
            ),
        });
    }
    for (container, started) in &now.running {
        if !was.running.contains_key(container) {
            out.push(Boundary {
                subject: TimelineSubject::ContainerStart,
                detail: format!(
                    "container {container} of replacement pod {name} running since {started}"
                ),
            });
        }
    }
    if now.ready && !was.ready {
        out.push(Boundary {
            subject: TimelineSubject::Orchestrator,
            detail: format!(
                "replacement pod {name} Ready in the API's view (Ready=True{}); the recorder's probe measures replica-ready",
                since(condition(&pod["status"], "Ready"))
            ),
        });
    }
    out
}

/// The cluster as the watch streams have shown it.
#[derive(Debug, Default)]
pub struct Cluster {
    victim: String,
    victim_uid: Option<String>,
    detected: bool,
    /// Pods seen before the victim left (never replacements).
    before: BTreeSet<String>,
    replacements: BTreeSet<String>,
    pods: BTreeMap<String, PodState>,
    nodes: BTreeMap<String, String>,
}

impl Cluster {
    /// A cluster whose fault targets the pod named `victim`.
    pub fn new(victim: &str) -> Cluster {
        Cluster {
            victim: victim.to_owned(),
            ..Cluster::default()
        }
    }

    /// One watch event (`{"type": ..., "object": ...}`, as `kubectl get --watch
    /// --output-watch-events -o json` prints it): the boundaries it shows, in order.
    pub fn observe(&mut self, event: &Value) -> Vec<Boundary> {
        let object = &event["object"];
        match object["kind"].as_str() {
            Some("Pod") => self.pod(event["type"].as_str().unwrap_or_default(), object),
            Some("Node") => self.node(object),
            _ => Vec::new(),
        }
    }

    fn pod(&mut self, kind: &str, pod: &Value) -> Vec<Boundary> {
        let (Some(uid), Some(name)) = (
            pod["metadata"]["uid"].as_str(),
            pod["metadata"]["name"].as_str(),
        ) else {
            return Vec::new();
        };
        if name == self.victim && self.victim_uid.is_none() && !self.detected {
            self.victim_uid = Some(uid.to_owned());
        }
        let now = PodState::of(pod);
        let previous = self.pods.insert(uid.to_owned(), now.clone());
        if self.victim_uid.as_deref() == Some(uid) {
            let was = previous.unwrap_or_default();
            return self.victim_pod(kind == "DELETED", pod, (name, uid), (&was, &now));
        }
        if previous.is_none() && !self.detected {
            self.before.insert(uid.to_owned());
        }
        if self.before.contains(uid) {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.replacements.insert(uid.to_owned()) {
            out.push(Boundary {
                subject: TimelineSubject::Orchestrator,
                detail: format!("replacement pod {name} ({uid}) created"),
            });
        }
        out.extend(replacement_pod(
            pod,
            name,
            &previous.unwrap_or_default(),
            &now,
        ));
        out
    }

    /// The victim's transitions: its detection (once), its removal, a restart in place.
    fn victim_pod(
        &mut self,
        gone: bool,
        pod: &Value,
        (name, uid): (&str, &str),
        (was, now): (&PodState, &PodState),
    ) -> Vec<Boundary> {
        let mut out = Vec::new();
        let terminating = now.terminating && !was.terminating;
        if !self.detected && (gone || terminating || (was.ready && !now.ready)) {
            self.detected = true;
            let why = if terminating {
                format!(
                    "is terminating (deletionTimestamp {})",
                    pod["metadata"]["deletionTimestamp"].as_str().unwrap_or("?")
                )
            } else if gone {
                "was removed from the API (a forced deletion)".to_owned()
            } else {
                format!(
                    "is not ready (Ready=False{})",
                    since(condition(&pod["status"], "Ready"))
                )
            };
            out.push(Boundary {
                subject: TimelineSubject::Detected,
                detail: format!("pod {name} ({uid}) {why}: its endpoints leave the Service"),
            });
        }
        if gone {
            out.push(Boundary {
                subject: TimelineSubject::Orchestrator,
                detail: format!("pod {name} ({uid}) removed from the API"),
            });
        } else if now.restarts > was.restarts {
            out.extend(now.running.iter().map(|(container, started)| Boundary {
                subject: TimelineSubject::ContainerStart,
                detail: format!(
                    "container {container} of pod {name} restarted in place (restart {}), running since {started}",
                    now.restarts
                ),
            }));
        }
        out
    }

    fn node(&mut self, node: &Value) -> Vec<Boundary> {
        let Some(name) = node["metadata"]["name"].as_str() else {
            return Vec::new();
        };
        let ready = condition(&node["status"], "Ready");
        let status = ready
            .and_then(|c| c["status"].as_str())
            .unwrap_or("absent")
            .to_owned();
        let previous = self.nodes.insert(name.to_owned(), status.clone());
        match previous {
            Some(was) if was != status => vec![Boundary {
                subject: TimelineSubject::Orchestrator,
                detail: format!(
                    "node {name} Ready {was} -> {status}{}{}",
                    ready
                        .and_then(|c| c["reason"].as_str())
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default(),
                    since(ready)
                ),
            }],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, uid: &str, extra: Value) -> Value {
        let mut pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "uid": uid, "namespace": "default"},
            "spec": {}, "status": {"phase": "Running"}});
        merge(&mut pod, extra);
        pod
    }

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }

    fn ready(status: &str, at: &str) -> Value {
        json!({"status": {"conditions": [{"type": "Ready", "status": status, "lastTransitionTime": at}]}})
    }

    fn subjects(found: &[Boundary]) -> Vec<&'static str> {
        found.iter().map(|b| b.subject.name()).collect()
    }

    /// A StatefulSet's replica-1 deleted and replaced under the same name with a new uid: the
    /// initial list says nothing; the deletion is the detection; the replacement's node, its
    /// container and its readiness follow in order; the old pod's removal is a note; a re-list
    /// (kubectl restarted) repeats nothing.
    #[test]
    fn a_deleted_pod_and_its_replacement_are_the_decomposition_s_boundaries() {
        let mut cluster = Cluster::new("replica-1");
        let running = json!({"spec": {"nodeName": "gpu-b"}, "status": {"containerStatuses": [
            {"name": "vllm", "restartCount": 0, "state": {"running": {"startedAt": "2026-12-04T10:00:00Z"}}}],
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let initial = [
            pod("replica-0", "u0", running.clone()),
            pod("replica-1", "u1", running.clone()),
        ];
        for p in &initial {
            assert!(cluster
                .observe(&json!({"type": "ADDED", "object": p}))
                .is_empty());
        }
        let mut terminating = initial[1].clone();
        merge(
            &mut terminating,
            json!({"metadata": {"deletionTimestamp": "2026-12-04T10:05:00Z"}}),
        );
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": terminating}));
        assert_eq!(subjects(&found), ["detected"]);
        assert!(
            found[0].detail.contains("replica-1 (u1) is terminating")
                && found[0].detail.contains("2026-12-04T10:05:00Z"),
            "{found:?}"
        );
        let found = cluster.observe(&json!({"type": "DELETED", "object": terminating}));
        assert_eq!(
            subjects(&found),
            ["orchestrator"],
            "detected once: {found:?}"
        );
        let fresh = pod("replica-1", "u2", json!({"status": {"phase": "Pending"}}));
        let found = cluster.observe(&json!({"type": "ADDED", "object": fresh}));
        assert_eq!(subjects(&found), ["orchestrator"]);
        assert!(found[0].detail.contains("replacement pod replica-1 (u2)"));
        let scheduled = pod(
            "replica-1",
            "u2",
            json!({"spec": {"nodeName": "gpu-b"}, "status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-04T10:05:01Z"}]}}),
        );
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": scheduled}));
        assert_eq!(subjects(&found), ["reschedule"]);
        assert!(
            found[0].detail.contains("to node gpu-b") && found[0].detail.contains("10:05:01Z"),
            "{found:?}"
        );
        let mut started = scheduled.clone();
        merge(
            &mut started,
            json!({"status": {"containerStatuses": [{"name": "vllm", "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-04T10:05:04Z"}}}]}}),
        );
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": started}));
        assert_eq!(subjects(&found), ["container-start"]);
        assert!(found[0]
            .detail
            .contains("running since 2026-12-04T10:05:04Z"));
        let mut serving = started.clone();
        merge(&mut serving, ready("True", "2026-12-04T10:06:10Z"));
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": serving}));
        assert_eq!(subjects(&found), ["orchestrator"]);
        assert!(found[0].detail.contains("Ready in the API's view"));
        // kubectl restarted: the list again, nothing new.
        for p in [&initial[0], &serving] {
            assert!(cluster
                .observe(&json!({"type": "ADDED", "object": p}))
                .is_empty());
        }
    }

    /// A black-hole or crash: the victim turns not ready (detection), its container is
    /// restarted in place by the kubelet (a container start, no reschedule); a node's Ready
    /// condition changing is a note, a heartbeat that changes nothing is silent.
    #[test]
    fn an_unready_victim_restarted_in_place_and_a_node_going_unknown() {
        let mut cluster = Cluster::new("replica-1");
        let up = pod(
            "replica-1",
            "u1",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "vllm", "restartCount": 0, "state": {"running": {"startedAt": "T0"}}}]}}),
        );
        cluster.observe(&json!({"type": "ADDED", "object": up}));
        let mut down = up.clone();
        merge(&mut down, ready("False", "2026-12-04T10:05:40Z"));
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": down}));
        assert_eq!(subjects(&found), ["detected"]);
        assert!(found[0]
            .detail
            .contains("not ready (Ready=False, since 2026-12-04T10:05:40Z)"));
        let mut restarted = down.clone();
        merge(
            &mut restarted,
            json!({"status": {"containerStatuses": [{"name": "vllm", "restartCount": 1,
            "state": {"running": {"startedAt": "T1"}}}]}}),
        );
        let found = cluster.observe(&json!({"type": "MODIFIED", "object": restarted}));
        assert_eq!(subjects(&found), ["container-start"]);
        assert!(found[0]
            .detail
            .contains("restarted in place (restart 1), running since T1"));

        let node = |status: &str, heartbeat: &str| {
            json!({"type": "MODIFIED", "object": {"kind": "Node", "metadata": {"name": "gpu-b"},
            "status": {"conditions": [{"type": "Ready", "status": status, "reason": "NodeStatusUnknown",
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2026-12-04T10:05:40Z"}]}}})
        };
        assert!(cluster.observe(&node("True", "h1")).is_empty());
        assert!(cluster.observe(&node("True", "h2")).is_empty());
        let found = cluster.observe(&node("Unknown", "h2"));
        assert_eq!(subjects(&found), ["orchestrator"]);
        assert_eq!(
            found[0].detail,
            "node gpu-b Ready True -> Unknown (NodeStatusUnknown), since 2026-12-04T10:05:40Z"
        );
        // Not a watch event of a kind this reads: nothing, never a panic.
        for odd in [
            json!(null),
            json!({"type": "ERROR", "object": {"kind": "Status"}}),
            json!({"object": {"kind": "Pod"}}),
        ] {
            assert!(cluster.observe(&odd).is_empty());
        }
    }
}
