//! The run-validity gates as the report carries them (SPEC §2, §10): which gate, how its failure
//! acts, and what it read.

use std::fmt;

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// Every gate the analyzer evaluates. Its name and clause are fixed here, so code asks for a
/// gate by value (`GateId::BaselineGoodput`), never by the text of its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum GateId {
    /// G1: each replica's share of the baseline's requests (§1).
    ReplicaShare,
    /// The fault fired and its impact was independently confirmed (§1, seeds/004).
    FaultFidelity,
    /// G2.1: send skew p99 (§2).
    SendSkewP99,
    /// G2.1: send skew max (§2).
    SendSkewMax,
    /// G2.2: scheduled but never dispatched requests (§2).
    Undispatched,
    /// G2.3: host CPU over every pinned window (§2).
    HostCpu,
    /// G2.4: the recorder's runtime stall p99 (§2).
    RuntimeStall,
    /// The recorder's fall-behind policy stopped the run (§2 "Falling behind"); evaluated only
    /// where the journal holds that escape, so earlier reports keep their gate lists.
    FallBehind,
    /// G3: victim in-flight silence under black-hole (§1, label-only).
    VictimSilence,
    /// G4: dead-endpoint staleness under black-hole (§1, label-only).
    Staleness,
    /// G5: accelerator clock and power fingerprints (§10, campaign-level).
    AcceleratorFingerprints,
    /// G6: baseline goodput (§4).
    BaselineGoodput,
    /// G7: baseline mean waiting queue per replica (§10).
    WaitingQueue,
    /// A recorded node-monitor grace period (§1, black-hole).
    NodeMonitorGrace,
    /// No declared abort trigger fired (§10, seeds/004).
    Containment,
    /// The capacity probe against the calibration's (§10, A4; reported).
    Capacity,
}

impl GateId {
    /// The name the report prints.
    pub fn name(self) -> &'static str {
        match self {
            GateId::ReplicaShare => "G1 replica share",
            GateId::FaultFidelity => "fault fidelity",
            GateId::SendSkewP99 => "G2.1 send skew p99",
            GateId::SendSkewMax => "G2.1 send skew max",
            GateId::Undispatched => "G2.2 undispatched requests",
            GateId::HostCpu => "G2.3 host CPU, every 5 s window",
            GateId::RuntimeStall => "G2.4 runtime stall p99",
            GateId::FallBehind => "G2 fall-behind policy",
            GateId::VictimSilence => "G3 victim in-flight silence",
            GateId::Staleness => "G4 dead-endpoint staleness",
            GateId::AcceleratorFingerprints => "G5 accelerator fingerprints",
            GateId::BaselineGoodput => "G6 baseline goodput",
            GateId::WaitingQueue => "G7 baseline waiting queue",
            GateId::NodeMonitorGrace => "node-monitor grace",
            GateId::Containment => "containment",
            GateId::Capacity => "capacity check",
        }
    }

    /// The SPEC.md clause that defines it.
    pub fn clause(self) -> &'static str {
        match self {
            GateId::SendSkewP99
            | GateId::SendSkewMax
            | GateId::Undispatched
            | GateId::HostCpu
            | GateId::RuntimeStall
            | GateId::FallBehind => "§2",
            GateId::BaselineGoodput => "§4",
            GateId::AcceleratorFingerprints
            | GateId::WaitingQueue
            | GateId::Containment
            | GateId::Capacity => "§10",
            GateId::ReplicaShare
            | GateId::FaultFidelity
            | GateId::VictimSilence
            | GateId::Staleness
            | GateId::NodeMonitorGrace => "§1",
        }
    }

    /// Whether it is one of the client's own self-checks (G2), which bound the send path.
    pub fn is_client_gate(self) -> bool {
        self.clause() == "§2"
    }
}

/// How a gate's failure acts on the run (§10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A failure (or an applicable gate left unobserved) invalidates the run: nothing published.
    RunInvalidating,
    /// A failure strips a label (G3, G4: node-loss-representative) and the run stays valid.
    LabelOnly,
    /// Reported, never invalidating (hosted G6, §6).
    Reported,
}

impl Effect {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Effect::RunInvalidating => "run-invalidating",
            Effect::LabelOnly => "label-only",
            Effect::Reported => "reported",
        }
    }
}

/// What a gate found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Evaluated and within its limit.
    Pass,
    /// Evaluated and outside its limit.
    Fail,
    /// It applies but its evidence is absent; counts as failed (§10).
    Unobserved,
    /// Does not apply to this run.
    NotApplicable,
    /// A server-side gate against a hosted target (§6).
    NotEvaluable,
    /// Evaluated across the runs of a campaign (G5).
    CampaignLevel,
}

impl Status {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Unobserved => "unobserved",
            Status::NotApplicable => "not applicable",
            Status::NotEvaluable => "not evaluable",
            Status::CampaignLevel => "campaign-level",
        }
    }

    /// `Pass` when `passed`, else `Fail`.
    pub fn of(passed: bool) -> Status {
        if passed {
            Status::Pass
        } else {
            Status::Fail
        }
    }
}

macro_rules! display_by_name {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    )*};
}
display_by_name!(GateId, Effect, Status);

/// One gate's reading.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    /// Which gate.
    pub id: GateId,
    /// How its failure acts.
    pub effect: Effect,
    /// What it found.
    pub status: Status,
    /// Its limit, in words.
    pub limit: String,
    /// What it read.
    pub observed: String,
    /// By how much a failing gate missed, in the limit's unit.
    pub by: Option<String>,
    /// Samples the reading is over.
    pub n: u64,
    /// How the reading was taken, or why there is none.
    pub note: String,
}

impl Gate {
    /// A gate that does not apply until its evaluation says otherwise.
    pub fn new(id: GateId, effect: Effect) -> Gate {
        Gate {
            id,
            effect,
            status: Status::NotApplicable,
            limit: String::new(),
            observed: String::new(),
            by: None,
            n: 0,
            note: String::new(),
        }
    }

    /// Whether its reading leaves the run valid: only a run-invalidating gate that failed or went
    /// unobserved invalidates it.
    pub fn holds(&self) -> bool {
        self.effect != Effect::RunInvalidating
            || matches!(
                self.status,
                Status::Pass | Status::NotApplicable | Status::NotEvaluable | Status::CampaignLevel
            )
    }

    /// Whether it was evaluated and passed.
    pub fn passed(&self) -> bool {
        self.status == Status::Pass
    }
}

impl Serialize for Gate {
    /// The report's shape: `gate` (the name), `clause`, `effect`, `status` as text.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Gate", 9)?;
        s.serialize_field("gate", self.id.name())?;
        s.serialize_field("clause", self.id.clause())?;
        s.serialize_field("effect", self.effect.name())?;
        s.serialize_field("status", self.status.name())?;
        s.serialize_field("limit", &self.limit)?;
        s.serialize_field("observed", &self.observed)?;
        s.serialize_field("by", &self.by)?;
        s.serialize_field("n", &self.n)?;
        s.serialize_field("note", &self.note)?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failed_or_unobserved_run_invalidating_gate_invalidates() {
        let mut gate = Gate::new(GateId::BaselineGoodput, Effect::RunInvalidating);
        assert!(gate.holds(), "not applicable holds");
        for (status, holds) in [
            (Status::Pass, true),
            (Status::Fail, false),
            (Status::Unobserved, false),
            (Status::NotEvaluable, true),
            (Status::CampaignLevel, true),
        ] {
            gate.status = status;
            assert_eq!(gate.holds(), holds, "{status}");
        }
        gate.effect = Effect::LabelOnly;
        gate.status = Status::Fail;
        assert!(gate.holds(), "a label-only failure keeps the run valid");
    }

    #[test]
    fn the_client_gates_are_the_section_2_ones() {
        let client: Vec<GateId> = [
            GateId::ReplicaShare,
            GateId::SendSkewP99,
            GateId::SendSkewMax,
            GateId::Undispatched,
            GateId::HostCpu,
            GateId::RuntimeStall,
            GateId::FallBehind,
            GateId::BaselineGoodput,
        ]
        .into_iter()
        .filter(|g| g.is_client_gate())
        .collect();
        assert_eq!(client.len(), 6);
        assert!(client.iter().all(|g| g.name().starts_with("G2")));
    }
}
