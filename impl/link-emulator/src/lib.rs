//! A userspace WAN link emulator for kernels without `sch_netem`.
//!
//! `udt-linkem` bridges two interfaces (typically the two veths of a "router" namespace)
//! and shapes each direction like a WAN path: a one-way delay, a bottleneck rate with a
//! DropTail queue, random or Gilbert–Elliott loss, and optionally duplication and reordering.
//! The shaping model is sans-IO and deterministic ([`delay_line`], [`queue`], [`loss`],
//! [`duplicate`], [`reorder`]); [`afpacket`] and [`forwarder`] run
//! it on raw sockets and the real clock. See `docs/link-emulation.md`.

pub mod afpacket;
pub mod clock;
pub mod delay_line;
pub mod duplicate;
pub mod forwarder;
pub mod link_spec;
pub mod loss;
pub mod queue;
pub mod reorder;
pub mod stats;
