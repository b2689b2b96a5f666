//! What the family's command-line tools share (`docs/cli.md`): `udt` (this crate's main
//! binary) and `sabul` (`src/bin/sabul.rs`) take the same options where they mean the same,
//! exit with the same statuses and write the same JSON-lines statistics.
//!
//! * [`exit`]: failures with their exit status, and the input/output files both tools open;
//! * [`stats`]: the `--stats` lines' schema and where they go;
//! * [`session`]: one session of SABUL's family (`sabul`, `frtp`) from the options to the
//!   exit status.

pub mod exit;
pub mod session;
pub mod stats;

/// Every tool's send and receive buffers on huge pages: `udt`, `sabul` and `frtp` all link
/// this crate, so this one declaration is their global allocator (udt::HugePages: a quarter of
/// the sender's CPU at 100 Mb/s went to TLB misses in the copies into and out of its buffer).
#[global_allocator]
static ALLOC: udt::HugePages = udt::HugePages;
