//! The SABUL NS-2 module of 2004 (SABUL v2.0), the model behind the SABUL paper's simulated
//! Fig. 1: a second SABUL line beside the `sabul` crate, selected by `cc = "ns2-2004"` on a
//! SABUL flow.
//!
//! The module is not `SABUL.md`'s protocol: no handshake, no buffers, no data (a packet is a
//! sequence number and a size), numbers from 0 that never wrap, an unlimited source, a fixed
//! window, and a rate control of its own (`docs/spec/SABUL-2004-NS2.md`; every rule below cites
//! the section it implements; the slips are reproduced, not fixed).
//!
//! * [`Sender`] (§3, §5): one send pass per expiry of its send timer — the first loss-list
//!   number, else a new packet while `NextSeq − LastAck < Wsend` — re-armed after `I`, or after
//!   `SYN + I` once after a period-starting decrease (the freeze, §5.4). ERR: ×1.125 at a
//!   period's start (first listed number above `LastDec`) and at the 16th, 32nd, … ERR of the
//!   period (§5.3). SYN message: unless two or more losses were reported since the last one,
//!   the MIMD increase `max(10^⌈log10(SYN/I)⌉/1000, 1/1500)` packets per SYN, then `I` capped at
//!   `threshold_` (the only rate limit, §5.5). ACK (via UDP): `LastAck` and the alternating
//!   loss-list removal (§3.3). EXP (§3.5).
//! * [`Receiver`] (§4): ACK every `ackinterval_` over UDP, ERR at once on a gap and every
//!   `errinterval_` with entries not reported for `2 · rtt_` (stamped "t = 0" when new), SYN
//!   (the cumulative received count) every `syninterval_`.
//! * The control connection (§6): the module's FullTcp pair is a TCP connection between the
//!   same two nodes, so ERR and SYN messages travel here as control segments *through the
//!   links* (16-byte message + 40 bytes of TCP/IP header), the receiver's ACKs as 16-byte UDP
//!   datagrams, and each control segment is answered by a 40-byte TCP acknowledgement the other
//!   way. What is not modelled is TCP's own recovery and window: a segment is never resent and
//!   never waits for a window (§6.3 says why that is enough for Fig. 1: the dumbbell's reverse
//!   queue, which control segments cross, holds everything; forward, only acknowledgements
//!   and the sender's discarded SYN messages cross the congested queue). Control messages carry
//!   a number so that a lost one is counted ([`Sender::control_lost`]).
//!
//! Time is `f64` seconds since t = 0 inside the model (the module's NS-2 clock); the simulator's
//! clock is whole µs, so a timer due at `t` fires at the first µs at or after `t` and acts with
//! its own `t` (a 12.3 µs gap sends at 12.3 µs spacing on average). An agent first fires its own
//! timers due at or before a packet's arrival, then handles the packet.
//!
//! **Blocked passes.** A pass that finds the window full and the loss list empty sends nothing
//! and only re-arms; the model does not wake for those (with no shortest `I`, a flow the window
//! holds back keeps increasing its rate, so they come at ever shorter gaps) but steps over them
//! at the next event, so the first pass that can send runs at its exact time.
//!
//! **Counts.** [`AgentStats::delivered`] is the distinct data packets the receiver accepted ×
//! 1500 B: the module has no payload, so a packet's whole 1500 bytes count, as its trace parser
//! counted them (§7).

use std::collections::{BTreeSet, VecDeque};

use transfer::time::Instant;

use crate::agent::{Agent, AgentStats, Channel, Emit};
use crate::udt2004::{instant_at, secs};

/// Bytes of a data packet on the wire (`pktsize_`, §2).
pub const PACKET_BYTES: u32 = 1500;
/// Bytes of a control message (`sizeof` the message object on a 32-bit build, §6.1).
pub const MESSAGE_BYTES: u32 = 16;
/// TCP/IP header bytes of a control segment and of its acknowledgement (§6.2).
pub const TCP_HEADER_BYTES: u32 = 40;
/// Slack for comparing an `f64` due time with the µs clock.
const EPS: f64 = 1e-9;
/// The shortest gap between passes the model schedules, s. Not the module's: with no shortest
/// `I` a flow its window holds back raises its rate without end, and once `I` falls below a
/// double's resolution of the clock NS-2's timer, and ours, would fire at the same time for
/// ever. A picosecond is far below any `I` that sends (1500 B at 10^4 Gb/s is 1.2 ns).
const MIN_GAP: f64 = 1e-12;

/// The module's Tcl parameters (`sabul.tcl`'s class defaults, §2.2), one set for both ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Initial inter-packet time `I`, s (`interval_`: 10 µs).
    pub initial_interval: f64,
    /// The largest `I` after an increase, s (`threshold_`: 0.01).
    pub threshold: f64,
    /// SYN interval, s (`syninterval_`: 0.01), the sender's increase unit and freeze too.
    pub syn: f64,
    /// The receiver's ACK interval, s (`ackinterval_`: 0.005).
    pub ack: f64,
    /// The receiver's ERR interval, s (`errinterval_`: 0.001).
    pub err: f64,
    /// The sender's EXP interval, s (`expinterval_`: 1).
    pub exp: f64,
    /// The sender's window `Wsend`, packets (`sendflagsize_`: 100 000).
    pub send_window: i64,
    /// The receiver's window `R`, packets (`recvflagsize_`: 100 000).
    pub recv_window: i64,
    /// The most numbers in one ERR (`maxlosslen_`: 366).
    pub max_loss_len: usize,
    /// The Tcl RTT constant `rtt_`, s (0.2 in `sabul.tcl`; `build-sabul` passes the path's).
    pub rtt: f64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            initial_interval: 1e-5,
            threshold: 0.01,
            syn: 0.01,
            ack: 0.005,
            err: 0.001,
            exp: 1.0,
            send_window: 100_000,
            recv_window: 100_000,
            max_loss_len: 366,
            rtt: 0.2,
        }
    }
}

/// What travels (our own encoding; the module passes C++ objects).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packet {
    /// A data packet (UDP, 1500 B).
    Data {
        /// Its sequence number.
        seq: i64,
    },
    /// The receiver's acknowledgement (UDP, 16 B): everything below `seq`.
    Ack {
        /// The first number not acknowledged.
        seq: i64,
    },
    /// A loss report (control segment).
    Err {
        /// The sending end's control-message number.
        msg: u32,
        /// The lost numbers listed.
        seqs: Vec<i64>,
    },
    /// A SYN message (control segment): the sender's count of received packets.
    Syn {
        /// The sending end's control-message number.
        msg: u32,
        /// Data packets received so far.
        received: u64,
    },
    /// The control TCP's acknowledgement of a segment (40 B).
    TcpAck,
}

impl Packet {
    /// Bytes on the wire.
    pub fn wire_len(&self) -> u32 {
        match self {
            Packet::Data { .. } => PACKET_BYTES,
            Packet::Ack { .. } => MESSAGE_BYTES,
            Packet::Err { .. } | Packet::Syn { .. } => MESSAGE_BYTES + TCP_HEADER_BYTES,
            Packet::TcpAck => TCP_HEADER_BYTES,
        }
    }

    /// Writes the packet at the start of `buf` and returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let mut w = Vec::with_capacity(16);
        match self {
            Packet::Data { seq } => {
                w.push(0);
                w.extend_from_slice(&seq.to_le_bytes());
            }
            Packet::Ack { seq } => {
                w.push(1);
                w.extend_from_slice(&seq.to_le_bytes());
            }
            Packet::Err { msg, seqs } => {
                w.push(2);
                w.extend_from_slice(&msg.to_le_bytes());
                for s in seqs {
                    w.extend_from_slice(&s.to_le_bytes());
                }
            }
            Packet::Syn { msg, received } => {
                w.push(3);
                w.extend_from_slice(&msg.to_le_bytes());
                w.extend_from_slice(&received.to_le_bytes());
            }
            Packet::TcpAck => w.push(4),
        }
        buf[..w.len()].copy_from_slice(&w);
        w.len()
    }

    /// Reads a packet [`Packet::emit`] wrote.
    pub fn parse(b: &[u8]) -> Option<Packet> {
        let i64_at = |o: usize| Some(i64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        match *b.first()? {
            0 => Some(Packet::Data { seq: i64_at(1)? }),
            1 => Some(Packet::Ack { seq: i64_at(1)? }),
            2 if b.len() > 5 && (b.len() - 5).is_multiple_of(8) => {
                Some(Packet::Err { msg: u32_at(1)?, seqs: (5..b.len()).step_by(8).map(i64_at).collect::<Option<_>>()? })
            }
            3 => Some(Packet::Syn { msg: u32_at(1)?, received: i64_at(5)? as u64 }),
            4 => Some(Packet::TcpAck),
            _ => None,
        }
    }

    fn channel_emit(&self, buf: &mut [u8]) -> Emit {
        Emit { size: self.emit(buf), wire_len: self.wire_len(), channel: Channel::Datagram }
    }
}

/// The MIMD increase step (§5.5): packets added per SYN at inter-packet time `i`.
pub fn increase(i: f64, syn: f64) -> f64 {
    (10f64.powf((syn / i).log10().ceil()) / 1000.0).max(1.0 / 1500.0)
}

/// The sender's ordered insert (§3.4): walks past smaller numbers, skips an equal one. While
/// the list is in order (`sorted`: always, except after an EXP appended below its tail) the
/// walk's stop is found by bisection, with the same result.
fn insert_ordered(list: &mut VecDeque<i64>, sorted: bool, seq: i64) {
    let at = if sorted {
        list.partition_point(|&x| x < seq)
    } else {
        list.iter().position(|&x| x >= seq).unwrap_or(list.len())
    };
    if list.get(at) != Some(&seq) {
        list.insert(at, seq);
    }
}

/// The ACK's removal of numbers `≤ a` (§3.3, slip): after each removal the walk steps over
/// the next entry, so every other acknowledged entry stays. In terms of the list before the
/// walk: the entries at even positions are removed up to the first even one above `a`.
fn remove_alternate(list: &mut VecDeque<i64>, a: i64) {
    let stop = (0..list.len()).step_by(2).find(|&j| list[j] > a).unwrap_or(list.len());
    if stop == 0 {
        return;
    }
    let kept: Vec<i64> = (1..stop).step_by(2).map(|j| list[j]).collect();
    list.drain(..stop);
    for x in kept.into_iter().rev() {
        list.push_front(x);
    }
}

/// The data sender (§3, §5). See the module docs.
#[derive(Debug)]
pub struct Sender {
    config: Config,
    interval: f64,
    freeze: bool,
    err_count: i64,
    dec_count: i64,
    last_dec: i64,
    local_err: i64,
    last_ack: i64,
    next_seq: i64,
    loss: VecDeque<i64>,
    /// Whether `loss` is in non-decreasing order (only an EXP append can break it).
    sorted: bool,
    next_pass: Option<f64>,
    next_exp: f64,
    next_own_syn: Option<f64>,
    own_msg: u32,
    expected_msg: u32,
    control_lost: u64,
    out: VecDeque<Packet>,
    sent: u64,
    retransmitted: u64,
    errs: u64,
    decreases: u64,
    increases: u64,
}

impl Sender {
    /// A sender started at `now`: its first packet goes at once, EXP armed (§3.1).
    pub fn new(config: Config, now: Instant) -> Sender {
        let t = secs(now);
        Sender {
            config,
            interval: config.initial_interval,
            freeze: false,
            err_count: 0,
            dec_count: 0,
            last_dec: -1,
            local_err: 0,
            last_ack: 0,
            next_seq: 0,
            loss: VecDeque::new(),
            sorted: true,
            next_pass: Some(t),
            next_exp: t + config.exp,
            next_own_syn: None,
            own_msg: 0,
            expected_msg: 0,
            control_lost: 0,
            out: VecDeque::new(),
            sent: 0,
            retransmitted: 0,
            errs: 0,
            decreases: 0,
            increases: 0,
        }
    }

    /// The inter-packet time `I`, s.
    pub fn interval(&self) -> f64 {
        self.interval
    }
    /// The acknowledged point.
    pub fn last_ack(&self) -> i64 {
        self.last_ack
    }
    /// The next new number.
    pub fn next_seq(&self) -> i64 {
        self.next_seq
    }
    /// `LastDec`: `NextSeq` at the last period-starting decrease (−1 before any).
    pub fn last_dec(&self) -> i64 {
        self.last_dec
    }
    /// The sender's loss list, in list order.
    pub fn loss_list(&self) -> Vec<i64> {
        self.loss.iter().copied().collect()
    }
    /// Decreases so far.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }
    /// Increases so far.
    pub fn increases(&self) -> u64 {
        self.increases
    }
    /// Whether the next gap is `SYN + I`.
    pub fn frozen(&self) -> bool {
        self.freeze
    }
    /// Control messages from the receiver that never arrived (gaps in their numbers).
    pub fn control_lost(&self) -> u64 {
        self.control_lost
    }
    /// When the send timer fires next, s.
    pub fn next_pass(&self) -> Option<f64> {
        self.next_pass
    }

    /// Whether a pass now would find nothing to send (§3.2).
    fn blocked(&self) -> bool {
        self.loss.is_empty() && self.next_seq - self.last_ack >= self.config.send_window
    }

    /// The passes due up to `bound` while blocked send nothing: each only re-arms (the first
    /// consuming the freeze). They are not woken one by one — at `I` of nanoseconds that would
    /// be billions — but stepped over by one multiplication when the next event comes (a
    /// difference of float rounding only).
    fn skip_blocked_passes(&mut self, bound: f64) {
        let Some(mut pass) = self.next_pass else { return };
        if pass > bound + EPS {
            return;
        }
        if std::mem::take(&mut self.freeze) {
            pass += self.config.syn + self.interval;
        }
        if pass <= bound + EPS {
            let gap = self.interval.max(MIN_GAP);
            pass = (pass + (((bound + EPS - pass) / gap).floor() + 1.0) * gap).max(bound + 2.0 * EPS);
        }
        self.next_pass = Some(pass);
    }

    fn advance(&mut self, t: f64) {
        loop {
            let own = self.next_own_syn.unwrap_or(f64::INFINITY);
            if self.blocked() {
                self.skip_blocked_passes(self.next_exp.min(own).min(t));
            }
            let Some(pass) = self.next_pass else { return };
            let due = pass.min(self.next_exp).min(own);
            if due > t + EPS {
                return;
            }
            if pass == due {
                self.send_pass(pass);
            } else if self.next_exp == due {
                self.on_exp(due);
            } else {
                self.on_own_syn(due);
            }
        }
    }

    /// §3.2: one pass, then the timer re-armed from its own expiry time.
    fn send_pass(&mut self, t: f64) {
        if let Some(seq) = self.loss.pop_front() {
            if self.loss.is_empty() {
                self.sorted = true;
            }
            self.out.push_back(Packet::Data { seq });
            self.sent += 1;
            self.retransmitted += 1;
        } else if self.next_seq - self.last_ack < self.config.send_window {
            self.out.push_back(Packet::Data { seq: self.next_seq });
            self.next_seq += 1;
            self.sent += 1;
        }
        let gap = if std::mem::take(&mut self.freeze) { self.config.syn + self.interval } else { self.interval };
        self.next_pass = Some(t + gap.max(MIN_GAP));
    }

    /// §3.5: every unacknowledged number appended at the tail, unordered, duplicates kept.
    fn on_exp(&mut self, t: f64) {
        if self.loss.back().is_some_and(|&b| b > self.last_ack) && self.last_ack < self.next_seq {
            self.sorted = false;
        }
        self.loss.extend(self.last_ack..self.next_seq);
        self.next_exp = t + self.config.exp;
    }

    /// §5.6 (slip): the sender's own SYN timer sends a SYN message the receiver discards.
    fn on_own_syn(&mut self, t: f64) {
        self.next_own_syn = Some(t + self.config.syn);
        self.out.push_back(Packet::Syn { msg: self.own_msg, received: 0 });
        self.own_msg = self.own_msg.wrapping_add(1);
    }

    fn control_message(&mut self, msg: u32) {
        self.control_lost += u64::from(msg.wrapping_sub(self.expected_msg));
        self.expected_msg = msg.wrapping_add(1);
        self.out.push_back(Packet::TcpAck);
    }

    fn on_ack(&mut self, a: i64) {
        if a > self.last_ack {
            self.last_ack = a;
            remove_alternate(&mut self.loss, a);
            if self.loss.is_empty() {
                self.sorted = true;
            }
        }
    }

    fn on_err(&mut self, seqs: &[i64]) {
        self.errs += 1;
        self.local_err += seqs.len() as i64;
        let Some(&first) = seqs.first() else { return };
        if first > self.last_dec {
            self.interval *= 1.125;
            self.freeze = true;
            self.last_dec = self.next_seq;
            self.err_count = 1;
            self.dec_count = 4;
            self.decreases += 1;
        } else {
            self.err_count += 1;
            if self.err_count >= 1i64 << self.dec_count.min(62) {
                self.interval *= 1.125;
                self.dec_count += 1;
                self.decreases += 1;
            }
        }
        for &s in seqs {
            insert_ordered(&mut self.loss, self.sorted, s);
        }
    }

    fn on_syn(&mut self, t: f64) {
        if self.local_err >= 2 {
            self.local_err = 0;
            return;
        }
        let syn = self.config.syn;
        let inc = increase(self.interval, syn);
        self.interval = self.interval * syn / (self.interval * inc + syn);
        self.increases += 1;
        if self.interval > self.config.threshold {
            self.interval = self.config.threshold;
        }
        self.local_err = 0;
        self.next_own_syn = Some(t + syn);
    }
}

impl Agent for Sender {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        if self.next_pass.is_none() {
            return;
        }
        let t = secs(now);
        self.advance(t);
        match Packet::parse(bytes) {
            Some(Packet::Ack { seq }) => self.on_ack(seq),
            Some(Packet::Err { msg, seqs }) => {
                self.control_message(msg);
                self.on_err(&seqs);
            }
            Some(Packet::Syn { msg, .. }) => {
                self.control_message(msg);
                self.on_syn(t);
            }
            _ => return,
        }
        self.next_exp = t + self.config.exp; // every control message re-arms EXP (§3.5)
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance(secs(now));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let pass = self.next_pass?;
        let pass = if self.blocked() { f64::INFINITY } else { pass };
        Some(instant_at(pass.min(self.next_exp).min(self.next_own_syn.unwrap_or(f64::INFINITY))))
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        if self.out.is_empty() && self.next_pass.is_some() {
            self.advance(secs(now)); // the flow's first pass runs at its start, not 1 µs later
        }
        Some(self.out.pop_front()?.channel_emit(buf))
    }

    fn stop(&mut self, _now: Instant) {
        self.next_pass = None;
        self.out.clear();
    }

    fn is_done(&self) -> bool {
        false // an unlimited source
    }

    fn stats(&self) -> AgentStats {
        AgentStats {
            delivered: 0,
            packets_sent: self.sent,
            retransmitted: self.retransmitted,
            loss_events: self.errs,
            window: self.config.send_window as f64,
            period_us: self.interval * 1e6,
            rtt_us: 0.0,
        }
    }
}

/// The data receiver (§4). See the module docs.
#[derive(Debug)]
pub struct Receiver {
    config: Config,
    last_ack: i64,
    largest: i64,
    /// (number, when last reported; 0 = "at t = 0" for a new entry).
    loss: Vec<(i64, f64)>,
    flags: BTreeSet<i64>,
    received: u64,
    accepted: u64,
    next_ack: f64,
    next_err: f64,
    next_syn: f64,
    msg: u32,
    out: VecDeque<Packet>,
}

impl Receiver {
    /// A receiver started at `now`: its ACK, SYN and ERR timers first fire one interval later.
    pub fn new(config: Config, now: Instant) -> Receiver {
        let t = secs(now);
        Receiver {
            config,
            last_ack: 0,
            largest: 0,
            loss: Vec::new(),
            flags: BTreeSet::new(),
            received: 0,
            accepted: 0,
            next_ack: t + config.ack,
            next_err: t + config.err,
            next_syn: t + config.syn,
            msg: 0,
            out: VecDeque::new(),
        }
    }

    /// The receiver's loss list, in list order.
    pub fn loss_list(&self) -> Vec<i64> {
        self.loss.iter().map(|e| e.0).collect()
    }
    /// What the receiver acknowledged last.
    pub fn last_ack(&self) -> i64 {
        self.last_ack
    }
    /// Distinct data packets accepted.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    fn advance(&mut self, t: f64) {
        loop {
            let due = self.next_ack.min(self.next_syn).min(self.next_err);
            if due > t + EPS {
                return;
            }
            if self.next_ack == due {
                self.send_ack(due);
            } else if self.next_syn == due {
                self.send_syn(due);
            } else {
                self.send_err(due);
            }
        }
    }

    fn send_ack(&mut self, t: f64) {
        self.next_ack = t + self.config.ack;
        let a = self.loss.first().map_or(self.largest + 1, |e| e.0);
        if a <= self.last_ack {
            return;
        }
        self.flags = self.flags.split_off(&a);
        self.last_ack = a;
        self.out.push_back(Packet::Ack { seq: a });
    }

    fn send_err(&mut self, t: f64) {
        self.next_err = t + self.config.err;
        let mut seqs = Vec::new();
        for e in &mut self.loss {
            if seqs.len() >= self.config.max_loss_len {
                break;
            }
            if t - e.1 > 2.0 * self.config.rtt {
                seqs.push(e.0);
                e.1 = t;
            }
        }
        if !seqs.is_empty() {
            self.out.push_back(Packet::Err { msg: self.msg, seqs });
            self.msg = self.msg.wrapping_add(1);
        }
    }

    fn send_syn(&mut self, t: f64) {
        self.next_syn = t + self.config.syn;
        self.out.push_back(Packet::Syn { msg: self.msg, received: self.received });
        self.msg = self.msg.wrapping_add(1);
    }

    fn on_data(&mut self, t: f64, s: i64) {
        self.received += 1;
        if s < self.last_ack {
            return;
        }
        if s - self.last_ack >= self.config.recv_window {
            self.send_ack(t);
            return;
        }
        if self.flags.contains(&s) {
            return;
        }
        if s > self.largest + 1 {
            self.loss.extend((self.largest + 1..s).map(|i| (i, 0.0)));
            self.send_err(t);
            self.largest = s;
        } else if s < self.largest {
            // The module's walk stops at the first entry not below `s`; the receiver's list is
            // always in order (gaps are appended above everything in it), so bisect.
            let at = self.loss.partition_point(|e| e.0 < s);
            if self.loss.get(at).is_some_and(|e| e.0 == s) {
                self.loss.remove(at);
            }
        } else {
            self.largest = s;
        }
        self.flags.insert(s);
        self.accepted += 1;
    }
}

impl Agent for Receiver {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        let t = secs(now);
        self.advance(t);
        match Packet::parse(bytes) {
            Some(Packet::Data { seq }) => self.on_data(t, seq),
            // The sender's own SYN messages reach the receiver's control application, which
            // drops them; its TCP still acknowledges the segment.
            Some(Packet::Syn { .. }) => self.out.push_back(Packet::TcpAck),
            _ => {}
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance(secs(now));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(instant_at(self.next_ack.min(self.next_syn).min(self.next_err)))
    }

    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Emit> {
        Some(self.out.pop_front()?.channel_emit(buf))
    }

    fn stop(&mut self, _now: Instant) {}

    fn is_done(&self) -> bool {
        false
    }

    fn stats(&self) -> AgentStats {
        AgentStats { delivered: self.accepted * u64::from(PACKET_BYTES), ..AgentStats::default() }
    }
}
