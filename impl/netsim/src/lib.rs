//! A deterministic network simulator in virtual time that runs the family's real sans-IO
//! protocol cores (docs/simulator.md).

pub mod agent;
