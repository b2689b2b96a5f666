//! Congestion control as a trait (UDT4.md §12; CONVENTIONS.md "Congestion control is a trait").
//!
//! This is UDT4's own CCC idea: the connection owns the mechanics (ACKs, NAKs, loss lists,
//! timers) and asks a controller for two numbers, the inter-packet period `P` and the
//! congestion window `W_cc`, reloading them after every controller call and at every timer
//! check (§12.6). New controllers need no change to the connection.
//!
//! Implementations:
//! * [`native::UdtNative`] — 4.11's `CUDTCC`, bit-exact, or the SC'04 paper's variant;
//! * [`fixed_rate::FixedRate`] — no congestion control, a constant period (FRTP, SABUL-style
//!   fixed-rate experiments).
//!
//! Call order, per connection: [`on_connect`](CongestionControl::on_connect) once when the
//! connection is established; then any sequence of [`on_ack`](CongestionControl::on_ack),
//! [`on_loss`](CongestionControl::on_loss) and [`on_timeout`](CongestionControl::on_timeout)
//! with non-decreasing `now`, each followed by reading
//! [`pacing_period_us`](CongestionControl::pacing_period_us) and
//! [`window`](CongestionControl::window).

use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};

pub mod fixed_rate;
pub mod glibc_rand;
pub mod native;

/// `SYN`: the rate-control interval and the ACK timer period (§1, §9.3, §12.1).
pub const SYN: Duration = Duration::from_micros(10_000);

/// What the connection tells its controller at every call (UDT4.md §12).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CcInput {
    /// Current time.
    pub now: Instant,
    /// Negotiated MSS in bytes, IP and UDP headers included (§1).
    pub mss: u32,
    /// The sender's smoothed RTT, µs (§8.6 step 6).
    pub rtt_us: u32,
    /// Packets/s: the sender's EWMA of ACK field 5 (4.11 `m_iRcvRate`, starts at 16).
    pub delivery_rate: u32,
    /// Packets/s: the sender's EWMA of ACK field 6 (4.11 `m_iBandwidth`, starts at 1).
    pub bandwidth: u32,
    /// Largest sequence number sent (4.11 `m_iSndCurrSeqNo`).
    pub snd_curr_seq: SeqNo,
    /// Peer's flight flag size from the handshake: the slow-start ceiling (§12.3).
    pub max_window: u32,
}

/// A congestion controller: turns ACK, NAK and timeout events into a pacing period and a
/// window (§12). See the module docs for the call order.
pub trait CongestionControl: Send + core::fmt::Debug {
    /// Short name for logs and statistics.
    fn name(&self) -> &'static str;
    /// The connection is established (4.11 `CUDTCC::init`: `LastAck = snd_curr_seq`,
    /// `LastDecSeq = snd_curr_seq − 1`, `LastRCTime = now`).
    fn on_connect(&mut self, input: &CcInput);
    /// A full or medium ACK advanced the send buffer to `ack` (§8.6 step 8).
    fn on_ack(&mut self, input: &CcInput, ack: SeqNo);
    /// A NAK arrived; `losses` is its decoded list, in order, before it is applied (§8.7).
    fn on_loss(&mut self, input: &CcInput, losses: &[(SeqNo, SeqNo)]);
    /// The EXP timer fired with unacknowledged data (§9.4).
    fn on_timeout(&mut self, input: &CcInput);
    /// `P`: the inter-packet interval, µs.
    fn pacing_period_us(&self) -> f64;
    /// `W_cc`: the congestion window in packets (the sender uses its integer part).
    fn window(&self) -> f64;
    /// The ACK timer period (`SYN` for every controller here, as 4.11's CUDTCC sets).
    fn ack_period(&self) -> Duration {
        SYN
    }
    /// Paper variant: sender must not send new packets before this time.
    fn frozen_until(&self) -> Option<Instant> {
        None
    }
}
