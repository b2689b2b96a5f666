//! A userspace WAN link emulator for kernels without `sch_netem`.
//!
//! `udt-linkem` bridges two interfaces (typically the two veths of a "router" namespace)
//! and shapes each direction like a WAN path: a one-way delay, a bottleneck rate with a
//! DropTail queue, random or Gilbert–Elliott loss, and optionally duplication and reordering.
//! The shaping model is the sans-IO, deterministic [`link_model`] crate (its `DelayLine`);
//! [`afpacket`] and [`forwarder`] run it on raw sockets and the real clock ([`clock`]), and
//! [`stats`] reports what they did. See `docs/link-emulation.md`.

pub mod afpacket;
pub mod clock;
pub mod forwarder;
pub mod stats;
