//! The run-validity gates other than G2 (SPEC §1, §4, §10): G1 replica share, G3 victim silence
//! and G4 staleness (black-hole, label-only), G5 accelerator fingerprints (campaign-level), G6
//! baseline goodput, G7 baseline waiting queue, the node-monitor grace rule, and (v0.5) the
//! capacity check.
//!
//! They gate the §1 experiment, so they apply to fault runs; a run without a fault is gated by G2
//! alone. Hosted targets: only G2 and G6 are evaluable, and G6 is reported without invalidating
//! (§6). A gate that applies but was not observed counts as failed (§10).
//!
//! The waiting-queue gauge and replica readiness come from `probe` events (formats/JOURNAL.md):
//! subject the replica, detail `ok` with the gauge in thousandths as the value, or `down: why`.

use percentes_formats::config::{FaultVariant, TargetKind};
use percentes_formats::journal::detail::DetailWord;
use percentes_formats::journal::records::EventKind;
use percentes_formats::spec::Claims;

use crate::load::Run;
use crate::model::Gate;
use crate::windows::{Kind, Window};

mod baseline;
mod black_hole;
pub mod capacity;
mod fidelity;
mod share;

/// What every gate reads: the run, its windows and which requests met the SLO.
#[derive(Clone, Copy, Debug)]
struct Context<'a> {
    run: &'a Run,
    config: &'a percentes_formats::config::Config,
    hosted: bool,
    variant: FaultVariant,
    fault_run: bool,
    /// The baseline window's position in `cut`, when there is one.
    baseline: Option<usize>,
    baseline_rows: &'a [usize],
    cut: &'a [Window],
    met: &'a [bool],
    /// Which claims a gate's note may make (A3: none its status does not bear out).
    claims: Claims,
}

/// A waiting-queue probe sample: (at_ns, replica, gauge).
pub fn waiting_samples(run: &Run) -> Vec<(u64, &str, f64)> {
    run.events
        .all(EventKind::Probe)
        .filter(|e| DetailWord::ProbeUp.opens(&e.detail))
        .filter_map(|e| {
            e.value
                .map(|v| (e.at_ns, e.subject.as_str(), v as f64 / 1000.0))
        })
        .collect()
}

/// Every gate of this module for `run`, given its windows and the rows in each, in the order the
/// report lists them; `claims` is the version's rule for what a note may say.
pub fn evaluate(
    run: &Run,
    cut: &[Window],
    rows_of: &[Vec<usize>],
    met: &[bool],
    claims: Claims,
) -> Vec<Gate> {
    let config = &run.config;
    let variant = config.fault.variant;
    let baseline = cut.iter().position(|w| w.kind == Kind::Baseline);
    let ctx = Context {
        run,
        config,
        hosted: config.target.kind == TargetKind::Hosted,
        variant,
        fault_run: variant != FaultVariant::None,
        baseline,
        baseline_rows: baseline.map_or(&[], |i| rows_of[i].as_slice()),
        cut,
        met,
        claims,
    };
    let mut gates = vec![share::g1(&ctx), fidelity::fidelity(&ctx)];
    gates.extend(black_hole::g3_g4(&ctx));
    gates.extend([
        baseline::g5(&ctx),
        baseline::g6(&ctx),
        baseline::g7(&ctx),
        black_hole::grace(&ctx),
    ]);
    gates
}
