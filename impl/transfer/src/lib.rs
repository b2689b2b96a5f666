//! The transfer core of the UDT protocol family: what UDT4 (`docs/spec/UDT4.md`), SABUL and
//! FRTP (`SABUL.md`, `FRTP.md`) have in common, so that each protocol crate holds only what is
//! its own (packet formats, handshake, which timer sends what).
//!
//! * [`seq`]: 31-bit sequence numbers; [`time`]: the driver's [`time::Instant`];
//! * [`loss_list`]: loss lists as range sets, and the loss-word codec of UDT's NAK and SABUL's
//!   ERR;
//! * [`ring`]: one packet ring under [`send_buffer`] and [`recv_buffer`];
//! * [`pacing`]: the pacer; [`rtt`]: the RTT estimator;
//! * [`cc`]: congestion control as a trait, with a factory and the hooks SABUL's rate control
//!   needs;
//! * [`transmit`]: what `poll_transmit` produced and which socket it leaves from;
//! * [`protocol`]: the trait every protocol core offers its driver;
//! * [`prng`]: the family's one seeded generator.
//!
//! Like the protocols built on it, nothing here owns a socket, a thread or a clock: time is
//! the driver's [`time::Instant`], passed into every call (`docs/architecture.md`).

pub mod cc;
pub mod loss_list;
pub mod pacing;
pub mod protocol;
pub mod recv_buffer;
pub mod ring;
pub mod rtt;
pub mod send_buffer;
pub mod seq;
pub mod time;
pub mod transmit;

/// The family's one seeded PRNG (`impl/prng`, shared with the link emulator): the protocols
/// draw socket IDs, ISNs and cookie keys from it, the simulator its link losses.
pub use prng;
