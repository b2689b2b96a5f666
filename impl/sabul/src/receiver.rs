//! The SABUL receiver (SABUL.md §2, §6, §10), sans-IO.
//!
//! The receiver connects: it writes its option block, waits for the echo (§2, §3.4), then
//! takes DATA from the control peer's IP (§2 step 7), reports each gap at once with an ERR
//! and re-reports a loss after k·RTT, k = 2, 3, … (checked every 20 ms), acknowledges every
//! 10 ms and writes a SYN with the arrival count every 10 ms (§6). The sender's FIN ends the
//! stream (§10.1); a reset before it is an abort, after it nothing (§10.2).
//!
//! Call order: as [`crate::Sender`], plus [`handle_datagram`](Receiver::handle_datagram) for
//! every UDP datagram; the application side is [`read`](Receiver::read).
//!
//! Under [`Profile::FRTP`] the same receiver is FRTP's (FRTP.md §5): its block carries the
//! data-path address and the rate (§3.3), it takes DATA from any source, acknowledges every
//! 100 ms or at once when the resequencing buffer is full, sends the whole loss list every
//! 20 ms (split past `max_loss_length` words) and never a SYN.
//!
//! DATA that arrives before the echo is taken at once with the receiver's own packet size
//! (the echo can only lower it): sans-IO, "it waits in the socket buffer" (§2 step 5) means
//! it is not lost.

use std::collections::VecDeque;
use std::net::SocketAddr;

use transfer::loss_list::RcvLossList;
use transfer::protocol::Protocol;
use transfer::recv_buffer::{Insert, RecvBuffer};
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use transfer::transmit::{Source, Transmit};

use crate::control_stream::{ControlDecoder, Decoded};
use crate::profile::{ErrPolicy, Profile};
use crate::session::{ControlQueue, Event, SessionError};
use crate::wire::{Circuit, Control, DataPacket, LossWords, OptionBlock, DEFAULT_PKT_SIZE, DEFAULT_RECV_FLAG_SIZE};

/// The echo must arrive this long after connecting (§10.3).
pub const ECHO_TIMEOUT: Duration = Duration::from_secs(10);
/// A frame (here: the echo) must be complete this long after its first byte (§10.3).
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(1);
/// The RTT when the setup round trip is at most this (§2 step 5).
pub const MIN_RTT: Duration = Duration::from_millis(20);

/// The receiver's settings; defaults are §3.4's and §9's.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// The UDP data port announced in the block (§3.4 word 0).
    pub data_port: u16,
    /// The sender's TCP port as dialled (§3.4 word 1).
    pub ctrl_port: u16,
    /// The UDP payload size of a full DATA packet announced in the block (§3.4 word 2); the
    /// sender's echo can only lower it.
    pub pkt_size: u32,
    /// The reorder window = the sender's maximum flow window (§3.4 word 8).
    pub recv_flag_size: u32,
    /// SABUL or FRTP (see [`crate::profile`]).
    pub profile: Profile,
    /// FRTP's data-path address and rate (FRTP.md §3.3): set exactly when
    /// `profile.circuit` is.
    pub circuit: Option<Circuit>,
}

impl Default for ReceiverConfig {
    fn default() -> ReceiverConfig {
        ReceiverConfig {
            data_port: 7000,
            ctrl_port: 7000,
            pkt_size: DEFAULT_PKT_SIZE,
            recv_flag_size: DEFAULT_RECV_FLAG_SIZE,
            profile: Profile::SABUL,
            circuit: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    AwaitEcho,
    Receiving,
    /// The FIN arrived (or the session aborted): no timers, the application reads the rest.
    Ended,
}

/// One gap, reported together: the losses in `[first, last]` still missing were last reported
/// at `last_report` and are due again after `k · RTT` (§6 step 3, ERR timer).
#[derive(Clone, Copy, Debug)]
struct Report {
    first: SeqNo,
    last: SeqNo,
    last_report: Instant,
    k: u32,
}

/// Counters of one receiver session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// DATA datagrams from the sender's address that parsed, duplicates included.
    pub datagrams: u64,
    /// Datagrams from another address, dropped uncounted otherwise (§2 step 7).
    pub foreign: u64,
    /// Datagrams from the sender's address that are not DATA (§3.1).
    pub malformed: u64,
    /// DATA for a packet already received or before the ACK point.
    pub duplicates: u64,
    /// ERR frames sent, the immediate reports and the timer's alike.
    pub errs_sent: u64,
    /// ACK frames sent.
    pub acks_sent: u64,
    /// SYN frames sent.
    pub syns_sent: u64,
    /// Packets found missing (each gap counted once, when it is seen).
    pub losses: u64,
}

/// A SABUL receiver. See the module docs for the call order.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    peer: SocketAddr,
    state: State,
    block: OptionBlock,
    decoder: ControlDecoder,
    frame_started: Option<Instant>,
    connected_at: Instant,
    control: ControlQueue,
    events: VecDeque<Event>,
    pkt_size: u32,
    max_loss_length: u32,
    rtt: Duration,
    buffer: RecvBuffer<()>,
    loss: RcvLossList,
    reports: VecDeque<Report>,
    last_ack: SeqNo,
    /// `LRSN + 1`: the number after the largest received.
    next_expected: SeqNo,
    syn_count: u32,
    next_ack: Instant,
    next_err: Instant,
    next_syn: Option<Instant>,
    stats: ReceiverStats,
}

impl Receiver {
    /// A receiver whose control connection to the sender at `peer` was just established at
    /// `now`; it queues its option block (§2 step 3).
    pub fn new(config: ReceiverConfig, peer: SocketAddr, now: Instant) -> Receiver {
        debug_assert_eq!(config.circuit.is_some(), config.profile.circuit, "FRTP's block has the circuit words");
        let block = OptionBlock {
            recv_flag_size: config.recv_flag_size,
            circuit: config.circuit,
            ..OptionBlock::new(config.data_port, config.ctrl_port, config.pkt_size)
        };
        let mut control = ControlQueue::default();
        control.push(|out| block.emit(out));
        Receiver {
            peer,
            state: State::AwaitEcho,
            block,
            decoder: ControlDecoder::receiver_for(&config.profile),
            frame_started: None,
            connected_at: now,
            control,
            events: VecDeque::new(),
            pkt_size: config.pkt_size,
            max_loss_length: block.max_loss_length,
            rtt: MIN_RTT,
            buffer: RecvBuffer::new(config.recv_flag_size as usize + 1, block.payload_size as usize, SeqNo::ZERO),
            loss: RcvLossList::new(config.recv_flag_size),
            reports: VecDeque::new(),
            last_ack: SeqNo::ZERO,
            next_expected: SeqNo::ZERO,
            syn_count: 0,
            next_ack: now + config.profile.ack_period,
            next_err: now + config.profile.err.period(),
            next_syn: config.profile.syn_period.map(|p| now + p),
            stats: ReceiverStats::default(),
            config,
        }
    }

    /// The session's counters so far.
    pub fn stats(&self) -> ReceiverStats {
        self.stats
    }

    /// The reorder window, packets (§3.4 word 8).
    pub fn recv_flag_size(&self) -> u32 {
        self.config.recv_flag_size
    }

    /// The session's RTT estimate (§2 step 5).
    pub fn rtt(&self) -> Duration {
        self.rtt
    }

    /// The ACK point: everything before it is readable.
    pub fn ack(&self) -> SeqNo {
        self.last_ack
    }

    /// The next event for the application ([`Event`]), oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Copies acknowledged bytes, in order; returns the count.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        self.buffer.read(out)
    }

    /// Whether the session is over and every delivered byte has been read.
    pub fn is_drained(&self) -> bool {
        self.state == State::Ended && self.buffer.readable_bytes() == 0
    }

    fn end(&mut self, event: Event) {
        self.state = State::Ended;
        self.frame_started = None;
        self.events.push_back(event);
    }

    /// Bytes from the control stream: the echo, then nothing (§3.2).
    pub fn handle_control(&mut self, now: Instant, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.state != State::Ended {
            match self.decoder.decode(&mut bytes) {
                Ok(Some(Decoded::Options(echo))) => {
                    if let Err(e) = self.block.check_echo(&echo) {
                        return self.end(Event::Aborted(SessionError::Protocol(e.into())));
                    }
                    let r0 = now.duration_since(self.connected_at);
                    self.rtt = if r0 > MIN_RTT { r0 * 3 / 2 } else { MIN_RTT };
                    self.pkt_size = echo.pkt_size;
                    self.max_loss_length = echo.max_loss_length;
                    self.state = State::Receiving;
                    self.events.push_back(Event::Connected);
                }
                Ok(Some(Decoded::Frame(_))) | Ok(None) => {}
                Err(e) => return self.end(Event::Aborted(e.into())),
            }
        }
        self.frame_started = self.decoder.is_mid_frame().then(|| self.frame_started.unwrap_or(now));
    }

    /// The control stream ended (§10.1, §10.2).
    pub fn handle_control_closed(&mut self, _now: Instant, reset: bool) {
        if self.state == State::Ended {
            return; // §10.2: a reset after EOF is ignored
        }
        if reset || self.decoder.finish().is_err() || self.state == State::AwaitEcho {
            self.acknowledge();
            let next_seq = self.next_expected;
            return self.end(Event::Aborted(SessionError::PeerClosed { reset, ack: self.last_ack, next_seq }));
        }
        self.acknowledge();
        if self.loss.is_empty() {
            self.end(Event::Finished);
        } else {
            let missing = self.loss.len();
            self.end(Event::Aborted(SessionError::Incomplete { ack: self.last_ack, missing }));
        }
    }

    /// The ACK number (§6 ACK timer): the first loss, else `LRSN + 1`; makes it readable.
    fn acknowledge(&mut self) -> bool {
        let ack = self.loss.first().unwrap_or(self.next_expected);
        if ack.is_after(self.last_ack) {
            self.last_ack = ack;
            self.buffer.acknowledge(ack);
            true
        } else {
            false
        }
    }

    fn send_ack(&mut self) {
        let ack = self.last_ack;
        self.stats.acks_sent += 1;
        self.control.push(|out| Control::Ack(ack).emit(out));
    }

    /// A UDP datagram (§6).
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        if self.state == State::Ended {
            return;
        }
        if !self.config.profile.data_from_any_source && from.ip() != self.peer.ip() {
            self.stats.foreign += 1; // §2 step 7
            return;
        }
        let Ok(packet) = DataPacket::new_checked(datagram, self.pkt_size) else {
            self.stats.malformed += 1; // §3.1: not a DATA packet, not counted
            return;
        };
        self.stats.datagrams += 1;
        self.syn_count = self.syn_count.saturating_add(1); // step 0 (§3.2 TC)
        let s = packet.seq();
        let off = self.last_ack.offset_to(s);
        if off < 0 {
            self.stats.duplicates += 1;
            return;
        }
        if off as u32 >= self.config.recv_flag_size {
            return self.ack_when_full(); // step 1: beyond the window, [C] acknowledges at once
        }
        let fresh = !s.is_before(self.next_expected);
        if !fresh && !self.loss.contains(s) {
            self.stats.duplicates += 1;
            return;
        }
        match self.buffer.insert(s, packet.payload(), ()) {
            Insert::Stored => {}
            Insert::Duplicate => {
                self.stats.duplicates += 1;
                return;
            }
            // The application has not read: drop it; the next packet reports the gap. FRTP
            // acknowledges a full buffer at once (FRTP.md §5).
            Insert::OutOfWindow if self.config.profile.ack_when_full => return self.ack_when_full(),
            Insert::OutOfWindow => return,
        }
        if fresh {
            if s != self.next_expected {
                // step 3: report the gap at once, one ERR listing exactly it
                let (first, last) = (self.next_expected, s.prev());
                self.stats.losses += first.offset_to(s) as u64;
                self.loss.append(first, last);
                if let ErrPolicy::Rereport { .. } = self.config.profile.err {
                    self.reports.push_back(Report { first, last, last_report: now, k: 2 });
                }
                if let Some(words) = LossWords::encode([(first, last)], self.max_loss_length as usize) {
                    self.control.push(|out| Control::Err(words).emit(out));
                    self.stats.errs_sent += 1;
                }
            }
            self.next_expected = s.next();
        } else {
            self.loss.remove(s);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) has something to do: the echo's or a frame's
    /// deadline while setting up, then the next ACK, ERR or SYN timer; `None` once ended.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Ended => None,
            State::AwaitEcho => {
                let t = self.connected_at + ECHO_TIMEOUT;
                Some(self.frame_started.map_or(t, |s| t.min(s + FRAME_TIMEOUT)))
            }
            State::Receiving => Some(self.next_syn.map_or(self.next_ack, |s| s.min(self.next_ack)).min(self.next_err)),
        }
    }

    /// Runs what is due at `now`: the set-up deadlines, or the ACK, ERR and SYN timers (§6).
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Ended => {}
            State::AwaitEcho => {
                if self.frame_started.is_some_and(|s| now >= s + FRAME_TIMEOUT) {
                    self.end(Event::Aborted(SessionError::Timeout("the rest of the echo")));
                } else if now >= self.connected_at + ECHO_TIMEOUT {
                    self.end(Event::Aborted(SessionError::Timeout("the echo")));
                }
            }
            State::Receiving => {
                let profile = self.config.profile;
                if now >= self.next_ack {
                    if self.acknowledge() {
                        self.send_ack();
                    }
                    self.next_ack = (self.next_ack + profile.ack_period).max(now);
                }
                if now >= self.next_err {
                    match profile.err {
                        ErrPolicy::Rereport { .. } => self.err_timer(now),
                        ErrPolicy::WholeList { .. } => self.report_whole_list(),
                    }
                    self.next_err = (self.next_err + profile.err.period()).max(now);
                }
                if let (Some(t), Some(period)) = (self.next_syn, profile.syn_period) {
                    if now >= t {
                        let n = std::mem::take(&mut self.syn_count);
                        self.stats.syns_sent += 1;
                        self.control.push(|out| Control::Syn(n).emit(out));
                        self.next_syn = Some((t + period).max(now));
                    }
                }
            }
        }
    }

    /// FRTP's ERR timer (FRTP.md §5): the whole loss list, in consecutive ERRs of at most
    /// `max_loss_length` words each (TC 6).
    fn report_whole_list(&mut self) {
        let max = self.max_loss_length as usize;
        let mut ranges = self.loss.ranges().peekable();
        while ranges.peek().is_some() {
            let mut words = 0;
            let part = std::iter::from_fn(|| {
                let &(a, b) = ranges.peek()?;
                let need = if a == b { 1 } else { 2 };
                (words + need <= max).then(|| {
                    words += need;
                    ranges.next();
                    (a, b)
                })
            });
            let Some(list) = LossWords::encode(part, max) else { break };
            self.control.push(|out| Control::Err(list).emit(out));
            self.stats.errs_sent += 1;
        }
    }

    /// FRTP's "buffer full" ACK, and SABUL's for a packet beyond the window: sent even when
    /// the ACK point did not move (FRTP.md §5, TC 7; SABUL.md §6 step 1).
    fn ack_when_full(&mut self) {
        if self.config.profile.ack_when_full {
            self.acknowledge();
        }
        self.send_ack();
    }

    /// The ERR timer (§6): the losses whose report is `k · RTT` old are reported again, up to
    /// `max_loss_length` words; each selected group's `k` grows by one.
    fn err_timer(&mut self, now: Instant) {
        // Reports and loss ranges are both disjoint and in sequence order (a report is made
        // when its gap appears past everything received), so one walk along the ranges serves
        // every report: O(reports + ranges) per timer, not their product, which at 1 s RTT and
        // thousands of open gaps cost the receiver most of its time.
        let ranges: Vec<(SeqNo, SeqNo)> = self.loss.ranges().collect();
        let mut i = 0;
        self.reports.retain(|r| {
            while ranges.get(i).is_some_and(|&(_, b)| b.is_before(r.first)) {
                i += 1;
            }
            ranges.get(i).is_some_and(|&(a, _)| !a.is_after(r.last))
        });
        let mut due = Vec::new();
        let mut words = 0usize;
        let max = self.max_loss_length as usize;
        let mut i = 0;
        for r in self.reports.iter_mut() {
            if now.duration_since(r.last_report) < self.rtt * r.k {
                continue;
            }
            while ranges.get(i).is_some_and(|&(_, b)| b.is_before(r.first)) {
                i += 1;
            }
            let parts: Vec<_> = ranges[i..]
                .iter()
                .take_while(|&&(a, _)| !a.is_after(r.last))
                .map(|&(a, b)| {
                    (if a.is_before(r.first) { r.first } else { a }, if b.is_after(r.last) { r.last } else { b })
                })
                .collect();
            let need: usize = parts.iter().map(|&(a, b)| if a == b { 1 } else { 2 }).sum();
            if words > 0 && words + need > max {
                break; // the rest waits for the next ERR (§3.3)
            }
            words += need;
            due.extend(parts);
            r.last_report = now;
            r.k += 1;
        }
        if let Some(list) = LossWords::encode(due, max) {
            self.control.push(|out| Control::Err(list).emit(out));
            self.stats.errs_sent += 1;
        }
    }

    /// The next output: control bytes (block, ACK, ERR, SYN) for the sender. The receiver
    /// sends nothing over UDP.
    pub fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.control.is_empty() {
            return None;
        }
        let size = self.control.pop_into(buf);
        Some(Transmit { destination: self.peer, size, source: Source::Control })
    }
}

/// The receiver as the runtime drives it: DATA and control bytes in, control bytes out.
impl Protocol for Receiver {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        Receiver::handle_datagram(self, now, from, datagram)
    }
    fn handle_control(&mut self, now: Instant, bytes: &[u8]) {
        Receiver::handle_control(self, now, bytes)
    }
    fn handle_control_closed(&mut self, now: Instant, reset: bool) {
        Receiver::handle_control_closed(self, now, reset)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Receiver::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Receiver::poll_timeout(self)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        Receiver::poll_transmit(self, now, buf)
    }
}
