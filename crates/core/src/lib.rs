//! superpager-core: a trace-driven model of the OS memory manager and the MMU, for studying
//! superpage (huge page) policies. See docs/ARCHITECTURE.md (the parts and their interfaces) and
//! docs/MODEL.md (what is modelled).
//!
//! Layout: `units` (typed quantities), `trace` (the .spt format, importers, generators), `mmu`
//! (TLBs, walker, machines), `os` (address spaces, page tables, frames, mechanisms), `policy`
//! (one module per system), `engine` (the event loop), `stats` (counters, cost model, time
//! series), `mrc` (one-pass miss-ratio curves), `scenario` (TOML-composed runs), `sim` (driving a run
//! from a trace file or a scenario).

pub mod bloat;
pub mod counters;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod fasthash;
pub mod fuzz_targets;
pub mod hint;
pub mod mmu;
pub mod mrc;
pub mod os;
pub mod pageset;
pub mod policy;
pub mod replacement;
pub mod scenario;
pub mod sim;
pub mod spec;
pub mod stats;
pub mod trace;
pub mod units;

pub use error::{Error, Result};
