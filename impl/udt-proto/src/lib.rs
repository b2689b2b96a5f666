//! Sans-IO core of UDT4 as implemented by UDT 4.11 (`docs/spec/UDT4.md`).
//!
//! Nothing in this crate owns a socket, a thread or a clock. Time is passed in by the driver
//! as the core's [`transfer::time::Instant`] (`now: Instant`, microseconds since an epoch of
//! the driver's choosing); datagrams are fed in with `handle_*` and output is drained with
//! `poll_*`. The same core runs on real UDP sockets (crate `udt`), in the network simulator
//! (`netsim`), in the virtual-clock harness of the behaviour tests (`pair`, behind the `pair`
//! feature, which brings in the link model) and under the active tester.

pub mod ack_window;
pub mod cc;
pub mod config;
pub mod connection;
pub mod endpoint;
pub mod measurement;
#[cfg(feature = "pair")]
pub mod pair;
pub mod recv_buffer;
pub mod send_buffer;
pub mod seq;
pub mod stats;
pub mod wire;
