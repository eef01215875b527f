//! The "In flight at fire" section of report.md (SPEC §3): the requests in flight when the fault
//! fired, by who served them, and under v0.5 (A4) the lost replica's set the shares rest on.

use std::fmt::Write as _;

use crate::model::InFlight;

/// Appends the section for `f` to `md`.
pub(super) fn in_flight_section(md: &mut String, f: &InFlight) {
    let _ = writeln!(md, "\n## In flight at fire (§3)\n");
    let _ = writeln!(
        md,
        "Fired at {:.3} s; victim `{}`. {}.\n",
        f.fired_s, f.victim, f.note
    );
    let _ = writeln!(
        md,
        "| served by | completed | errored | censored |\n|---|---|---|---|"
    );
    let lost = f
        .on_lost
        .as_ref()
        .map(|o| ("lost replica (victim and never answered, the shares' n)", o));
    for (name, o) in [
        ("victim", &f.on_victim),
        ("survivors", &f.on_survivors),
        ("unattributed", &f.unattributed),
    ]
    .into_iter()
    .chain(lost)
    {
        let _ = writeln!(
            md,
            "| {name} | {} | {} | {} |",
            o.completed, o.errored, o.censored
        );
    }
}
