//! Every type the analyzer's reports serialize, and nothing that computes them.
//!
//! This module is the bottom of the crate's upper floors: it imports nothing from the modules
//! that fill it (`analysis`, `gates`, `recovery`, `escape`, `campaign`, `report`), so each of
//! them, and a reader of `report.json` in another program, can see the whole shape in one place.
//! The field a report prints comes from exactly one function; ARCHITECTURE.md's field trace
//! names it.

mod campaign;
mod change;
mod escape;
mod gate;
mod path;
mod recovery;
mod report;
mod segment;
mod server;

pub use campaign::*;
pub use change::*;
pub use escape::*;
pub use gate::*;
pub use path::*;
pub use recovery::*;
pub use report::*;
pub use segment::*;
pub use server::*;
