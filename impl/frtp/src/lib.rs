//! FRTP (`docs/spec/FRTP.md`, "the spec" below): SABUL modified for dedicated circuits — a
//! fixed rate chosen by the receiver before the transfer, SABUL's selective ARQ, DATA on the
//! circuit and the TCP control connection on another interface (§1).
//!
//! FRTP is not a second implementation: it is `sabul`'s [`Sender`] and [`Receiver`] under
//! [`Profile::FRTP`] (§7 lists what differs, `sabul::profile` where each difference lives):
//!
//! * the 52-byte option block, SABUL's ten words + [`Circuit`]: the data-path IPv4 address
//!   and the 64-bit rate (§3.3); the sender echoes it or, for a rate above
//!   [`SenderConfig::max_rate_bps`], closes (§2 step 3, `SessionError::RateRefused`);
//! * DATA to `(data_ip, data_port)` from the block, the control peer's address when
//!   `data_ip` is 0 (§2 step 5); the receiver takes DATA from any source (§2 step 6);
//! * one constant inter-packet time from the rate for every packet, retransmissions
//!   included: the core's `FixedRate` controller, set from the echoed block (§4, [`ipt_us`]);
//! * the receiver's whole loss list as ERR every 20 ms, split past `max_loss_length` (366)
//!   words; an ACK every 100 ms, or at once when the resequencing buffer is full (§5);
//! * no SYN: the receiver never sends one and the sender ignores one (§3.2);
//! * SABUL's 1 s EXP re-queueing everything unacknowledged (§4), and SABUL's teardown (§9 TC 8).
//!
//! The call order, the events and the errors are SABUL's (`sabul::Sender`, `sabul::Receiver`).
//!
//! ```
//! use std::net::Ipv4Addr;
//! use frtp::{receiver_config, Circuit};
//!
//! // A receiver on the circuit at 192.168.10.2, UDP port 7001, asking for 500 Mb/s (§8).
//! let circuit = Circuit { data_ip: Ipv4Addr::new(192, 168, 10, 2), rate_bps: 500_000_000 };
//! let config = receiver_config(7001, 7000, circuit);
//! assert_eq!(frtp::ipt_us(config.pkt_size, circuit.rate_bps), 24.0);
//! ```

pub use sabul::profile::Profile;
pub use sabul::wire::Circuit;
pub use sabul::{Event, Receiver, ReceiverConfig, ReceiverStats, Sender, SenderConfig, SenderStats, SessionError};

/// The sender's TCP control port (§2 step 1: SABUL's).
pub const DEFAULT_CTRL_PORT: u16 = 7000;

/// A sender's settings: SABUL's defaults (§6: 40 960 000-byte buffer, 1472-byte packets)
/// under the FRTP profile, honouring rates up to `max_rate_bps`.
pub fn sender_config(max_rate_bps: u64) -> SenderConfig {
    SenderConfig { profile: Profile::FRTP, max_rate_bps, ..SenderConfig::default() }
}

/// A receiver's settings: its UDP data port, the sender's control port as dialled, and the
/// circuit it asks for (§3.3); SABUL's defaults otherwise (§6).
pub fn receiver_config(data_port: u16, ctrl_port: u16, circuit: Circuit) -> ReceiverConfig {
    ReceiverConfig { data_port, ctrl_port, profile: Profile::FRTP, circuit: Some(circuit), ..ReceiverConfig::default() }
}

/// The inter-packet time, µs, of packets of `pkt_size` UDP bytes at `rate_bps` (§4: the
/// IP-level size of a full packet over the rate, TC 3).
pub fn ipt_us(pkt_size: u32, rate_bps: u64) -> f64 {
    Circuit { data_ip: std::net::Ipv4Addr::UNSPECIFIED, rate_bps }.ipt_us(pkt_size)
}
