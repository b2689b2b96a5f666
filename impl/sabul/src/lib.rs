//! SABUL (`docs/spec/SABUL.md`, "the spec" below) on the family's transfer core: UDT's
//! predecessor, a one-way reliable transfer that sends DATA over UDP and takes its feedback
//! (ACK, ERR, SYN) over one TCP control connection (§1).
//!
//! Like `udt-proto`, nothing here owns a socket, a thread or a clock (`docs/architecture.md`):
//!
//! * [`wire`]: the DATA datagram, the control frames and the option block, with strict
//!   parse/emit (§3);
//! * [`control_stream`]: the incremental decoder of the TCP control stream — bytes arrive in
//!   arbitrary chunks, a frame's length is trusted only within the session's limits (§3.2);
//! * [`cc`]: SABUL's rate control on the core's `CongestionControl` trait: SYN-event
//!   increase, ×1.125 decrease with the dec_count rule, freeze, slow start (§7, §8).
//!
//! * [`sender`], [`receiver`]: the two roles' state machines (§2, §5, §6, §10), driven like
//!   `udt-proto`'s connection (`handle_*`, `poll_transmit` naming the channel, `poll_timeout`,
//!   `poll_event`); [`session`]: their events and errors.
//!
//! * [`profile`]: what tells SABUL and FRTP (`docs/spec/FRTP.md`) apart on the same two
//!   roles — the option-block layout, the receiver's timers and ERR policy, the rate's
//!   source; the `frtp` crate is these roles under [`Profile::FRTP`].
//!
//! The roles are two types rather than one connection with a role flag: SABUL is one-way,
//! and the two share nothing but the wire — the sender owns the send buffer, the pacer and
//! the controller, the receiver the reorder window, the loss reports and the three timers.
//!
//! Sequence numbers, the ERR loss-word codec, pacing and time are the core's (`transfer`).

pub mod cc;
pub mod control_stream;
pub mod profile;
pub mod receiver;
pub mod sender;
pub mod session;
pub mod wire;

pub use profile::{ErrPolicy, Profile};
pub use receiver::{Receiver, ReceiverConfig, ReceiverStats};
pub use sender::{Sender, SenderConfig, SenderStats};
pub use session::{Event, SessionError};
