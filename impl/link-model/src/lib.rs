//! The one link model: one direction of a WAN path, sans-IO and deterministic.
//!
//! A [`delay_line::DelayLine`] shapes frames like a WAN link: random or Gilbert–Elliott
//! loss ([`loss`]), a bottleneck rate with a DropTail queue ([`queue`]), a one-way delay, and
//! optionally duplication ([`duplicate`]) and reordering ([`reorder`]) past the bottleneck,
//! configured by a [`link_spec::LinkSpec`] (parsed from `delay=…,rate=…,…`). Nothing here owns
//! a socket, a thread or a clock: the caller offers frames stamped with their arrival time in
//! nanoseconds and polls for what is due, so the same model runs in `udt-linkem` on the real
//! clock (crate `link-emulator`), in the network simulator (`netsim`) and in the behaviour
//! tests' harnesses on virtual clocks. See `docs/link-emulation.md`.
#![forbid(unsafe_code)]

pub mod delay_line;
pub mod duplicate;
pub mod link_spec;
pub mod loss;
pub mod queue;
pub mod reorder;
