//! The specification versions this build can apply, and what each one changes (SPEC.md §A).
//!
//! A journal records the version it was captured under; the analyzer applies whichever version
//! it is asked for, so an archived journal can be re-analyzed years later under a newer one, or
//! under an older one to reproduce a published number. Each version is a value of [`Spec`] whose
//! methods say what its rules are; code asks the version ("how are errors treated on the
//! completion curve?"), never compares version strings.
//!
//! ```
//! use percentes_formats::spec::{ErrorTreatment, Spec};
//! let old = Spec::parse("v0.1").unwrap();
//! assert_eq!(old.errors_on_the_curve(), ErrorTreatment::Censored);
//! assert_eq!(Spec::CURRENT.errors_on_the_curve(), ErrorTreatment::Compete);
//! ```

use std::fmt;

/// One version of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Spec {
    /// v0.1: the completion curve is Kaplan-Meier with errors treated as censored.
    V0_1,
    /// v0.2: amendment A1, errors compete (Aalen-Johansen cumulative incidence).
    V0_2,
    /// v0.3: amendment A2, recovery is read only where the data support it (SPEC §11).
    V0_3,
}

/// How recovery is read (SPEC §5, §10; the rules amendment A2 changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryRules {
    /// v0.1 and v0.2: one-sided entry to either baseline, any window counts whatever it holds,
    /// the detector may fire before the fault is removed, and the plateau runs to the end of the
    /// recovering window.
    Original,
    /// v0.3 (A2): a two-sided band around the equilibrium, no recovery to the pre-fault baseline
    /// before the removal is confirmed, a pinned minimum of requests per window, a plateau that
    /// stops where the recovering window starts, relapse watched to the end of the observed
    /// series, an ordered timeline, and no recovery figure from an invalid run.
    Amended,
}

/// How the completion curve treats an errored request (the one rule A1 changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorTreatment {
    /// v0.1: an error is a censoring; the curve is 1 - Kaplan-Meier. It overstates completion
    /// whenever a completion follows an error.
    Censored,
    /// v0.2: an error is a competing terminal event that permanently consumes probability mass;
    /// the curve is the Aalen-Johansen cumulative incidence of completion.
    Compete,
}

impl Spec {
    /// Every version this build applies, oldest first.
    pub const ALL: [Spec; 3] = [Spec::V0_1, Spec::V0_2, Spec::V0_3];
    /// The version a new capture is recorded under.
    pub const CURRENT: Spec = Spec::V0_3;

    /// Its name as journals, reports and `--spec` write it (`v0.2`).
    pub fn name(self) -> &'static str {
        match self {
            Spec::V0_1 => "v0.1",
            Spec::V0_2 => "v0.2",
            Spec::V0_3 => "v0.3",
        }
    }

    /// The version with this name, if this build applies it.
    pub fn parse(name: &str) -> Option<Spec> {
        Spec::ALL.into_iter().find(|s| s.name() == name)
    }

    /// How the completion curve treats errors (§3, amendment A1).
    pub fn errors_on_the_curve(self) -> ErrorTreatment {
        match self {
            Spec::V0_1 => ErrorTreatment::Censored,
            Spec::V0_2 | Spec::V0_3 => ErrorTreatment::Compete,
        }
    }

    /// How recovery is read (§5, §10; amendment A2).
    pub fn recovery_rules(self) -> RecoveryRules {
        match self {
            Spec::V0_1 | Spec::V0_2 => RecoveryRules::Original,
            Spec::V0_3 => RecoveryRules::Amended,
        }
    }

    /// What this version changed from the one before, in SPEC.md's words; `None` for the first.
    pub fn amendment(self) -> Option<&'static str> {
        match self {
            Spec::V0_1 => None,
            Spec::V0_2 => Some(
                "A1: errors compete; the completion curve is the Aalen-Johansen cumulative incidence, \
                 not Kaplan-Meier with errors censored",
            ),
            Spec::V0_3 => Some(
                "A2: recovery read only where the data support it; a two-sided band for the \
                 equilibrium, no recovery before the fault's removal, a minimum of requests per \
                 detector window, an ordered timeline, no recovery figure from an invalid run",
            ),
        }
    }

    /// The versions' names joined for help and error text (`v0.1, v0.2 and v0.3`).
    pub fn names() -> String {
        let names = Spec::ALL.map(Spec::name);
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_versions_are_refused() {
        for spec in Spec::ALL {
            assert_eq!(Spec::parse(spec.name()), Some(spec));
        }
        assert_eq!(Spec::parse("v0.4"), None);
        assert_eq!(Spec::names(), "v0.1, v0.2 and v0.3");
        assert_eq!(Spec::parse("0.2"), None);
    }

    #[test]
    fn only_the_first_version_has_no_amendment() {
        assert_eq!(Spec::ALL[0].amendment(), None);
        assert!(Spec::ALL[1..].iter().all(|s| s.amendment().is_some()));
        assert_eq!(Spec::CURRENT, *Spec::ALL.last().unwrap());
    }
}
