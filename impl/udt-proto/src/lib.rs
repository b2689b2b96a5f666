//! Sans-IO core of UDT4 as implemented by UDT 4.11 (`docs/spec/UDT4.md`).
//!
//! Nothing in this crate owns a socket, a thread or a clock. Time is passed in by the driver
//! as microseconds since an arbitrary epoch of its choosing (`now: u64`); datagrams are fed
//! in with `handle_*` and output is drained with `poll_*`. The same core runs on real UDP
//! sockets (crate `udt`), in the virtual-clock harness (`sim`) and under the active tester.

pub mod ack_window;
pub mod cc;
pub mod config;
pub mod connection;
pub mod endpoint;
pub mod measurement;
pub mod recv_buffer;
pub mod send_buffer;
pub mod seq;
pub mod sim;
pub mod stats;
pub mod wire;
