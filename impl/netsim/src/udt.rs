//! A UDT flow's two ends: the real `udt-proto` [`Endpoint`]s, one per host, with a bulk (or
//! finite) application on each.
//!
//! The sender connects at the flow's start and keeps the connection's send buffer full from
//! an endless source (or until `bytes` are taken); the receiver listens, accepts and reads
//! everything delivered, counting it. Each end writes what its endpoint emits as a datagram
//! of `size + 28` bytes on the wire (IP and UDP headers), as `udt-linkem` and NS-2 count it.
//!
//! [`WithoutFlowControl`] wraps a controller so that its window never limits the sender: the
//! SC'04 paper's Fig. 7 compares UDT with and without its window-based flow control.

use std::net::SocketAddr;
use std::sync::Arc;

use transfer::cc::{CcInput, CongestionControl, ControllerFactory};
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use udt_proto::config::ConnectionConfig;
use udt_proto::endpoint::Endpoint;

use crate::agent::{Agent, AgentStats, Channel, Emit};

/// IP + UDP header bytes a datagram carries on the wire.
pub const UDP_IP_HEADERS: u32 = 28;

/// The endless source both protocols' senders offer from (payload bytes are not looked at).
pub(crate) static SOURCE: [u8; 1 << 16] = [0; 1 << 16];

/// A sender's thread that wakes only on a grid, `every_us` apart (at `phase_us` + k ×
/// `every_us`): a driver whose sleeps end on a coarse timer. UDT 4.11 built with
/// `NO_BUSY_WAITING`, as Debian's libudt0 is, sleeps in `pthread_cond_timedwait` and then
/// sends all the lateness it owes back to back (UDT4.md §7 step 3); on the full-scale host its
/// bursts left every 0.44–0.51 ms (docs/results/2026-11-28-fullscale-epochs.md). The flow's
/// `pacing_burst` bounds the catch-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendTick {
    every_us: u64,
    phase_us: u64,
}

impl SendTick {
    /// A grid `every_us` apart (at least 1) whose phase is drawn from `seed`.
    pub fn new(every_us: u64, seed: u64) -> SendTick {
        let every_us = every_us.max(1);
        SendTick { every_us, phase_us: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) % every_us }
    }

    /// Whether the thread is awake at `t`.
    pub fn is_wake(&self, t: Instant) -> bool {
        let us = t.as_micros();
        us >= self.phase_us && (us - self.phase_us).is_multiple_of(self.every_us)
    }

    /// The first wake-up at or after `t`.
    pub fn at_or_after(&self, t: Instant) -> Instant {
        let us = t.as_micros();
        if us <= self.phase_us {
            return Instant::from_micros(self.phase_us);
        }
        let k = (us - self.phase_us).div_ceil(self.every_us);
        Instant::from_micros(self.phase_us + k * self.every_us)
    }
}

/// The sending end: connects to the receiver and keeps its send buffer full.
pub struct UdtSender {
    endpoint: Endpoint,
    id: u32,
    /// Bytes still to offer; `None` = endless.
    remaining: Option<u64>,
    stopped: bool,
    closed: bool,
    /// The sender's wake-up grid; `None`: every departure on time.
    tick: Option<SendTick>,
    /// The last time the network called in.
    now: Instant,
}

impl UdtSender {
    /// A sender at `local` that connects to `peer` at `now`, sending `bytes` (`None`: endless).
    pub fn new(seed: u64, config: ConnectionConfig, peer: SocketAddr, bytes: Option<u64>, now: Instant) -> UdtSender {
        let mut endpoint = Endpoint::new(seed);
        let id = endpoint.connect(config, peer, now);
        let mut s = UdtSender { endpoint, id, remaining: bytes, stopped: false, closed: false, tick: None, now };
        s.fill(now);
        s
    }

    /// The same sender, waking only on `tick`'s grid ([`SendTick`]).
    pub fn with_send_tick(mut self, tick: Option<SendTick>) -> UdtSender {
        self.tick = tick;
        self
    }

    /// The application: offer data while the send buffer takes it, close when done.
    fn fill(&mut self, now: Instant) {
        let Some(conn) = self.endpoint.connection_mut(self.id) else { return };
        if !conn.is_connected() || self.closed {
            return;
        }
        while !self.stopped && self.remaining != Some(0) {
            let want = self.remaining.map_or(SOURCE.len(), |r| r.min(SOURCE.len() as u64) as usize);
            let n = conn.send(now, &SOURCE[..want]);
            if n == 0 {
                break;
            }
            if let Some(r) = self.remaining.as_mut() {
                *r -= n as u64;
            }
        }
        if self.remaining == Some(0) || self.stopped {
            conn.close(now);
            self.closed = true;
        }
    }

    /// Whether the connection has a control packet queued (it leaves before any data).
    fn control_waiting(&self) -> bool {
        self.connection().is_some_and(|c| c.control_queued())
    }

    /// The sender's UDT connection, while the endpoint has it.
    pub fn connection(&self) -> Option<&udt_proto::connection::Connection> {
        self.endpoint.connection(self.id)
    }
}

impl Agent for UdtSender {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        self.now = now;
        self.endpoint.handle_datagram(now, PEER_OF_SENDER, bytes);
        self.fill(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        self.endpoint.handle_timeout(now);
        self.fill(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let t = self.endpoint.poll_timeout()?;
        match self.tick {
            // With a control packet queued, at once (it is answered as it comes); everything
            // else at the next wake-up after the moment just served, so that data due off the
            // grid waits for it.
            Some(tick) if !self.control_waiting() => {
                Some(tick.at_or_after(t.max(Instant::from_micros(self.now.as_micros() + 1))))
            }
            _ => Some(t),
        }
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        self.now = now;
        if self.tick.is_some_and(|tick| !tick.is_wake(now)) && !self.control_waiting() {
            return None;
        }
        let t = self.endpoint.poll_transmit(now, buf)?;
        Some(Emit { size: t.size, wire_len: t.size as u32 + UDP_IP_HEADERS, channel: Channel::Datagram })
    }

    fn stop(&mut self, now: Instant) {
        self.stopped = true;
        self.fill(now);
    }

    fn is_done(&self) -> bool {
        self.connection().is_none_or(|c| c.is_done())
    }

    fn stats(&self) -> AgentStats {
        let Some(c) = self.connection() else { return AgentStats::default() };
        let s = c.stats();
        AgentStats {
            delivered: 0,
            packets_sent: s.pkts_sent,
            retransmitted: s.pkts_retrans,
            loss_events: s.naks_recv,
            window: s.cwnd,
            period_us: s.period_us,
            rtt_us: f64::from(s.rtt_us),
        }
    }
}

/// The address each sender sees its receiver at, and each receiver its sender: every flow has
/// its own pair of hosts, so one pair of addresses serves all.
pub const RECEIVER_ADDR: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 2), 9000));
const PEER_OF_SENDER: SocketAddr = RECEIVER_ADDR;
const PEER_OF_RECEIVER: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 1), 9000));

/// The receiving end: listens, accepts one connection and reads everything it delivers.
pub struct UdtReceiver {
    endpoint: Endpoint,
    id: Option<u32>,
    delivered: u64,
    /// The transfer's size, when finite: done once this much was read.
    expect: Option<u64>,
    scratch: Vec<u8>,
}

impl UdtReceiver {
    /// A receiver listening on an endpoint seeded with `seed`, done once `expect` bytes were
    /// read (`None`: never).
    pub fn new(seed: u64, config: ConnectionConfig, expect: Option<u64>, now: Instant) -> UdtReceiver {
        let mut endpoint = Endpoint::new(seed);
        endpoint.listen(config, 1, now);
        UdtReceiver { endpoint, id: None, delivered: 0, expect, scratch: vec![0; 1 << 16] }
    }

    fn drain(&mut self) {
        if self.id.is_none() {
            self.id = self.endpoint.accept();
        }
        let Some(conn) = self.id.and_then(|id| self.endpoint.connection_mut(id)) else { return };
        loop {
            let n = conn.recv(&mut self.scratch);
            if n == 0 {
                break;
            }
            self.delivered += n as u64;
        }
    }
}

impl Agent for UdtReceiver {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        self.endpoint.handle_datagram(now, PEER_OF_RECEIVER, bytes);
        self.drain();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drain();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let t = self.endpoint.poll_transmit(now, buf)?;
        Some(Emit { size: t.size, wire_len: t.size as u32 + UDP_IP_HEADERS, channel: Channel::Datagram })
    }

    fn stop(&mut self, _now: Instant) {}

    fn is_done(&self) -> bool {
        self.expect.is_some_and(|n| self.delivered >= n)
    }

    fn stats(&self) -> AgentStats {
        AgentStats { delivered: self.delivered, ..AgentStats::default() }
    }
}

/// A controller whose window never limits the sender: rate control alone (SC'04 Fig. 7).
#[derive(Debug)]
pub struct WithoutFlowControl(pub Arc<dyn ControllerFactory>);

impl ControllerFactory for WithoutFlowControl {
    fn build(&self) -> Box<dyn CongestionControl> {
        Box::new(RateOnly(self.0.build()))
    }
}

#[derive(Debug)]
struct RateOnly(Box<dyn CongestionControl>);

/// Larger than any flow window a connection advertises, so `min(cwnd, flow window)` is the
/// flow window.
const UNLIMITED_WINDOW: f64 = 1e9;

impl CongestionControl for RateOnly {
    fn name(&self) -> &'static str {
        "rate-only"
    }
    fn on_connect(&mut self, input: &CcInput) {
        self.0.on_connect(input)
    }
    fn on_sent(&mut self, input: &CcInput, seq: SeqNo, retransmission: bool) {
        self.0.on_sent(input, seq, retransmission)
    }
    fn on_ack(&mut self, input: &CcInput, ack: SeqNo) {
        self.0.on_ack(input, ack)
    }
    fn on_loss(&mut self, input: &CcInput, losses: &[(SeqNo, SeqNo)]) {
        self.0.on_loss(input, losses)
    }
    fn on_timeout(&mut self, input: &CcInput) {
        self.0.on_timeout(input)
    }
    fn tick_interval(&self) -> Option<Duration> {
        self.0.tick_interval()
    }
    fn on_tick(&mut self, input: &CcInput) {
        self.0.on_tick(input)
    }
    fn pacing_period_us(&self) -> f64 {
        self.0.pacing_period_us()
    }
    fn window(&self) -> f64 {
        UNLIMITED_WINDOW
    }
    fn ack_period(&self) -> Duration {
        self.0.ack_period()
    }
    fn frozen_until(&self) -> Option<Instant> {
        self.0.frozen_until()
    }
}
