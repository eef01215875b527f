//! The estimators of SPEC §3, §4 and §7, on plain slices: the analyzer's frames feed them, and their
//! tests check them against hand-computed oracles and against R's survival package.

pub mod compare;
pub mod effective;
pub mod histogram;
pub mod incidence;
pub mod quantile;
pub mod recovery;
pub mod runs;
pub mod slo;
pub mod tails;

#[cfg(test)]
mod fixtures;
