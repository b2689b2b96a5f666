//! A deterministic network simulator in virtual time that runs the family's real sans-IO
//! protocol cores (docs/simulator.md).
//!
//! - [`network`]: links (`link-model`'s delay line, the one `udt-linkem` runs), flows and
//!   one event queue in virtual time;
//! - [`agent`]: what one end of a flow implements;
//! - [`udt`], [`sabul`]: the real `udt-proto` and `sabul` cores as flow ends;
//! - [`udt2004`]: the 2004 UDT NS-2 module behind SC'04 Figs. 2–7, a small sans-IO model;
//! - [`sabul2004`]: the 2004 SABUL NS-2 module behind the SABUL paper's Fig. 1, the same kind;
//! - [`tcp`]: TCP as NS-2's SACK agent ran it in the papers, a small sans-IO model;
//! - [`scenario`]: a run described as data (a dumbbell, its flows) and its results.

pub mod agent;
pub mod network;
pub mod sabul;
pub mod sabul2004;
pub mod scenario;
pub mod tcp;
pub mod udt;
pub mod udt2004;
