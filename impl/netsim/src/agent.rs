//! What the simulator drives: one end of a flow, sans-IO.
//!
//! A flow has two ends, each an [`Agent`] on its own host. Whatever one end emits travels the
//! flow's path to the other end: [`Channel::Datagram`]s through the links (serialised, queued,
//! perhaps dropped), [`Channel::Stream`] bytes in order and without loss after the path's
//! propagation delay (SABUL's and FRTP's TCP control connection, idealised: its few bytes
//! never meet a full queue in these scenarios). The agent owns its application too: a sender
//! fills its protocol's buffer from an endless or finite source, a receiver drains and counts
//! what is delivered.

use transfer::time::Instant;

/// How an emitted packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Through the path's links: serialised at each link's rate, DropTail-queued, lossy.
    Datagram,
    /// A reliable, ordered byte stream beside the links (the family's TCP control connection).
    Stream,
}

/// One packet an agent hands the network: the first `size` bytes of the buffer given to
/// [`Agent::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Emit {
    /// Bytes written at the start of the buffer.
    pub size: usize,
    /// Bytes on the wire, IP and transport headers included: what a link serialises and
    /// what its queue counts.
    pub wire_len: u32,
    /// Whether the packet takes the links or the stream beside them.
    pub channel: Channel,
}

/// Counters an agent reports at every sample (zero where they do not apply).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AgentStats {
    /// Payload bytes delivered to the application (receivers).
    pub delivered: u64,
    /// Data packets sent, retransmissions included (senders).
    pub packets_sent: u64,
    /// Data packets retransmitted (senders).
    pub retransmitted: u64,
    /// Loss events the sender reacted to (UDT: NAKs received; TCP: fast retransmits and
    /// timeouts; SABUL: ERR reports).
    pub loss_events: u64,
    /// The sender's window in packets (UDT: the congestion window; TCP: cwnd).
    pub window: f64,
    /// The sender's inter-packet period in µs (rate-based senders; 0 for TCP).
    pub period_us: f64,
    /// The sender's smoothed RTT in µs, where it keeps one.
    pub rtt_us: f64,
}

/// One end of a flow, driven by the simulator in virtual time.
pub trait Agent {
    /// A packet from the other end arrived (`bytes` as the other end emitted them).
    fn handle_packet(&mut self, now: Instant, channel: Channel, bytes: &[u8]);
    /// Timers that are due at `now` fire.
    fn handle_timeout(&mut self, now: Instant);
    /// When [`Agent::handle_timeout`] must next be called; `None` while nothing is pending.
    fn poll_timeout(&self) -> Option<Instant>;
    /// The next packet to send at `now`, written at the start of `buf` (65 536 bytes).
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit>;
    /// The flow's stop time came (senders only). The network then silences this end: it is
    /// neither polled nor fed again, so its counters stay as they were at the stop.
    fn stop(&mut self, now: Instant);
    /// Whether this end's application finished (a finite transfer fully delivered, for a
    /// receiver; everything acknowledged, for a sender).
    fn is_done(&self) -> bool;
    /// This end's counters now.
    fn stats(&self) -> AgentStats;
}
