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
    pub const ALL: [Spec; 2] = [Spec::V0_1, Spec::V0_2];
    /// The version a new capture is recorded under.
    pub const CURRENT: Spec = Spec::V0_2;

    /// Its name as journals, reports and `--spec` write it (`v0.2`).
    pub fn name(self) -> &'static str {
        match self {
            Spec::V0_1 => "v0.1",
            Spec::V0_2 => "v0.2",
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
            Spec::V0_2 => ErrorTreatment::Compete,
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
        }
    }

    /// The versions' names joined for help and error text (`v0.1 and v0.2`).
    pub fn names() -> String {
        Spec::ALL.map(Spec::name).join(" and ")
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
        assert_eq!(Spec::parse("v0.3"), None);
        assert_eq!(Spec::parse("0.2"), None);
    }

    #[test]
    fn only_the_first_version_has_no_amendment() {
        assert_eq!(Spec::ALL[0].amendment(), None);
        assert!(Spec::ALL[1..].iter().all(|s| s.amendment().is_some()));
        assert_eq!(Spec::CURRENT, *Spec::ALL.last().unwrap());
    }
}
