//! The contract between percentes' recorder and analyzer.
//!
//! This crate owns every byte that crosses from capture to analysis and every number the
//! specification pins:
//! - [`journal`]: format v1 — the header laid out byte by byte, blocks chained with BLAKE3,
//!   bincode 2.0.1 record bodies, checkpoints, optional ed25519 signatures, the seal — with the
//!   writer and a verifier that is a pure function of the bytes.
//! - [`config`]: the strict TOML configuration, its three profiles, pin enforcement at load.
//! - [`pins`]: the one table of pinned numbers, each with its SPEC.md clause.
//! - [`schedule`]: intended send times as a pure function of the parameters and the index.
//! - [`spec`]: the specification versions and what each changes.
//! - [`prometheus`]: the reader of a server's own metrics and the engines' presets.
//!
//! It does no network I/O and reads no clock; the recorder and the analyzer bring those.
//!
//! ```
//! use percentes_formats::{config::Config, journal};
//! let config = Config::parse(journal::synthetic::GOLDEN_CONFIG.as_bytes()).unwrap();
//! assert!(config.publishability().is_err()); // a dev config is never publishable
//! let bytes = journal::synthetic::bytes(&config, &Default::default());
//! let report = journal::verify::verify(&bytes, &Default::default());
//! assert_eq!(report.verdict, journal::Verdict::SealedIntact);
//! ```

#![warn(missing_docs)]

pub mod config;
pub mod files;
pub mod journal;
pub mod pins;
pub mod prometheus;
pub mod schedule;
pub mod spec;
