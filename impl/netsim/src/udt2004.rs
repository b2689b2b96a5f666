//! The UDT NS-2 module of 03/31/2004, the model behind the SC'04 paper's simulated Figs. 2–7:
//! a third UDT line beside the 4.11 controller and the paper variant, selected by
//! `cc = "ns2-2004"` on a UDT flow.
//!
//! The module is not UDT 4.11: no handshake, no buffers, no data (a packet is a sequence number
//! and a size), numbers from 0 that never wrap, an unlimited source (`docs/spec/UDT-2004-NS2.md`
//! §1.6, §3.7). Its rules, slips included, are those of the spec; every rule below cites the
//! section it implements, and the slips are reproduced, not fixed.
//!
//! * [`Sender`] (§3): one send pass per expiry of the send timer — the smallest loss-list
//!   number first (exempt from the window, not checked against `LastAck`), else a new packet
//!   while `CurrSeq − LastAck < W` (so `W + 1` outstanding, §3.2), packets 16n and 16n + 1 back
//!   to back (§3.3), the freeze as `SYN + P` after the next pass (§6.7); an ACK removes every
//!   *other* loss entry `≤ a` (§3.4); rate tick on its own 10 ms timer with the `AckCount` and
//!   re-reported-NAK skip rules, the increase with its `1/1500` floor and the `L/9` cap under
//!   `PBeforeNak` (§6.1–6.4); decreases ×1.125 at each period's start and every `DecRandom`-th
//!   NAK, uncapped, with `AvgNakNum`'s 3, 4, …, 9 schedule (§6.3–6.6); the RTT cap on every
//!   advancing ACK (§6.8); the window EWMA (§7.1); slow start (§12); EXP (§11).
//! * [`Receiver`] (§4): no buffer, no duplicate check; immediate NAKs listing every missing
//!   number (≤ 300, §9.1), periodic re-reports of entries older than `RTT_r`, restarted by every
//!   NAK sent (§9.2); only the first 75 numbers of a NAK reach the sender (§9.3); ACKs only on
//!   the 10 ms tick (§10.1); RTT from ACK2 (§10.4); arrival speed and capacity from 16-slot
//!   windows sorted in place, capacity's exchange taking the wrong array (§8).
//! * Timers (§5): the rate tick, the ACK tick and the first NAK tick sit on the global grid
//!   `k · 10 ms` from simulated t = 0 (the network's [`EPOCH`]), the EXP timer on `k · 30 ms`
//!   until the flow's first ACK or NAK, as if the agents had existed since t = 0 (§13.3) — the
//!   simulator builds them at the flow's start, so they join their grids there. A grid is
//!   accumulated by repeated addition of 0.01 s (0.03 s) as NS-2's timers re-arm themselves.
//!
//! Time is `f64` seconds since t = 0 inside the model (§2.1); the simulator's clock is whole
//! µs, so a timer due at `t` fires at the first µs at or after `t` and acts with its own `t`
//! (the period's fraction is kept: a 150.3 µs period sends at 150.3 µs spacing on average).
//! Arrivals carry the µs the network delivered them at.
//!
//! **Polling while blocked** (§3.5) uses the spec's lazy-but-exact form: a pass that finds
//! nothing to send is not woken; at the next event that could change the outcome (any packet,
//! a rate tick, an EXP) the polls that fell before it are replayed — each adds the `P` in force
//! (or `SYN + P` when it consumes the freeze) to the poll time, as the literal timer would —
//! so the first pass that can send runs at its exact poll time. More than 4096 polls in a row
//! are skipped by one multiplication (a difference of float rounding only).
//!
//! **Randomness** (§6.6): `DecRandom` is drawn from a [`DecRandomSource`], one xoshiro256**
//! stream per run shared by every 2004 sender, consumed once per new congestion period in
//! event order, like the module's unseeded shared `rand()`; not glibc's stream (§17 item 1).
//!
//! **Same-time events** (§2.6, §17 item 2): an agent first fires its own timers due at or
//! before the packet's arrival time, then handles the packet; among its own timers due at the
//! same instant the order is rate tick, EXP, send pass (the constructor's order at t = 0).
//!
//! **Counts.** [`AgentStats::delivered`] is the unique in-order data the receiver holds
//! (packets below its first hole) × 1500 B: the module has no payload, so a packet's whole
//! 1500 bytes count, as the trace parser counted them. The module's own throughput count —
//! every 1500-byte arrival, duplicates and spurious retransmissions included (§13.5) — is
//! [`Receiver::arrivals`]; `AgentStats` has no field for it.
//!
//! # Simplifications
//!
//! * The delay warning (type 4) is disabled in the module (§6.10) and absent here; the RTT-trend
//!   window nothing reads is not kept.
//! * Each end runs only its role's timers (§1.2 allows the split): the sender's ACK and NAK
//!   timers and the receiver's rate tick and EXP change nothing in the module.
//! * `RTT_s` and `RTT_r` are separate (one role per agent, as in every script).
//! * Uninitialised memory (§17 item 3) reads 0.0; sequence numbers are `i64`.
//!
//! # Wire format (private to the model, big-endian)
//!
//! Data `[0, seq: u64]`, 1500 B on the wire; ACK `[1, serial: u32, ack: u64, rtt_us: u32,
//! speed: u32, capacity: u32]`, 40 B; NAK `[2, count: u16, min(count, 75) × seq: u64]`,
//! `32 + count` B; ACK2 `[3, serial: u32]`, 32 B (§2.4). Anything else is ignored.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use prng::Xoshiro256;
use transfer::time::Instant;

use crate::agent::{Agent, AgentStats, Channel, Emit};
use crate::network::EPOCH;

/// The rate-control, ACK and first NAK interval `SYN`, s (§5.1).
pub const SYN: f64 = 0.01;
/// Packet size in bytes, on the wire and in the increase formula (`mtu_`, §2.2).
pub const MTU: u32 = 1500;
/// `Wmax` when the flow names none: `sim.tcl`'s single flow (§13.2).
pub const DEFAULT_WMAX: u32 = 100_000;
/// The most numbers a NAK lists (`MAX_LOSS_LEN`, §2.5).
pub const NAK_LISTED: usize = 300;
/// The numbers of a NAK that reach the sender (§9.3).
pub const NAK_DELIVERED: usize = 75;
/// Wire sizes (§2.4).
pub const ACK_WIRE: u32 = 40;
/// An ACK2's wire size, bytes.
pub const ACK2_WIRE: u32 = 32;
/// A NAK's wire size without its list, bytes (each listed number adds one).
pub const NAK_WIRE_BASE: u32 = 32;

const TYPE_DATA: u8 = 0;
const TYPE_ACK: u8 = 1;
const TYPE_NAK: u8 = 2;
const TYPE_ACK2: u8 = 3;
/// Blocked polls replayed one by one before the rest are skipped by multiplication.
const POLL_REPLAY: f64 = 4096.0;
/// Entries of the receiver's ACK history (§2.3).
const ACK_HISTORY: usize = 1024;
/// Slack for comparing an `f64` due time with the µs clock.
const EPS: f64 = 1e-9;

/// The run's shared `rand()` (§6.6): one stream every 2004 sender of a run draws from.
pub type DecRandomSource = Rc<RefCell<Xoshiro256>>;

/// A fresh `rand()` stream for a run of seed `seed`.
pub fn dec_random_source(seed: u64) -> DecRandomSource {
    Rc::new(RefCell::new(Xoshiro256::seed_from_u64(seed ^ 0x2004_0331_0000_0000)))
}

/// Seconds since t = 0 for the simulator's instant.
pub fn secs(now: Instant) -> f64 {
    now.as_micros().saturating_sub(EPOCH.as_micros()) as f64 / 1e6
}

/// The first µs at or after `t` seconds (float noise below 1 ns tolerated).
pub fn instant_at(t: f64) -> Instant {
    let us = (t * 1e6 - 1e-3).ceil().max(0.0) as u64;
    Instant::from_micros(EPOCH.as_micros() + us)
}

/// The first point of the grid `0, step, 2·step, …` (accumulated as NS-2 does) at or after `t`.
fn grid_at_or_after(t: f64, step: f64) -> f64 {
    let mut g = 0.0;
    while g < t - EPS {
        g += step;
    }
    g
}

/// A packet of the model (§2.4).
#[derive(Debug, Clone, PartialEq)]
pub enum Packet {
    /// A data packet.
    Data {
        /// Its sequence number.
        seq: i64,
    },
    /// An acknowledgement (§10.1).
    Ack {
        /// The ACK's serial number, echoed by the ACK2.
        serial: u32,
        /// Everything before this number was received.
        ack: i64,
        /// The receiver's RTT, µs.
        rtt_us: u32,
        /// The arrival speed, packets/s (§8).
        speed: u32,
        /// The link capacity, packets/s (§8).
        capacity: u32,
    },
    /// `count` numbers were listed; `seqs` are those that travel (the first 75).
    Nak {
        /// How many numbers the receiver listed.
        count: usize,
        /// The numbers that reach the sender.
        seqs: Vec<i64>,
    },
    /// The acknowledgement of an ACK, for the receiver's RTT (§10.4).
    Ack2 {
        /// The serial number of the ACK acknowledged.
        serial: u32,
    },
}

impl Packet {
    /// Bytes on the wire (§2.4).
    pub fn wire_len(&self) -> u32 {
        match self {
            Packet::Data { .. } => MTU,
            Packet::Ack { .. } => ACK_WIRE,
            Packet::Nak { count, .. } => NAK_WIRE_BASE + *count as u32,
            Packet::Ack2 { .. } => ACK2_WIRE,
        }
    }

    /// Writes the packet at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        match self {
            Packet::Data { seq } => {
                buf[0] = TYPE_DATA;
                buf[1..9].copy_from_slice(&seq.to_be_bytes());
                9
            }
            Packet::Ack { serial, ack, rtt_us, speed, capacity } => {
                buf[0] = TYPE_ACK;
                buf[1..5].copy_from_slice(&serial.to_be_bytes());
                buf[5..13].copy_from_slice(&ack.to_be_bytes());
                buf[13..17].copy_from_slice(&rtt_us.to_be_bytes());
                buf[17..21].copy_from_slice(&speed.to_be_bytes());
                buf[21..25].copy_from_slice(&capacity.to_be_bytes());
                25
            }
            Packet::Nak { count, seqs } => {
                buf[0] = TYPE_NAK;
                buf[1..3].copy_from_slice(&(*count as u16).to_be_bytes());
                for (i, s) in seqs.iter().enumerate() {
                    buf[3 + 8 * i..11 + 8 * i].copy_from_slice(&s.to_be_bytes());
                }
                3 + 8 * seqs.len()
            }
            Packet::Ack2 { serial } => {
                buf[0] = TYPE_ACK2;
                buf[1..5].copy_from_slice(&serial.to_be_bytes());
                5
            }
        }
    }

    /// Parses a packet; `None` for anything malformed.
    pub fn parse(b: &[u8]) -> Option<Packet> {
        let u32_at = |at: usize| b.get(at..at + 4).map(|s| u32::from_be_bytes(s.try_into().expect("4 bytes")));
        let i64_at = |at: usize| b.get(at..at + 8).map(|s| i64::from_be_bytes(s.try_into().expect("8 bytes")));
        match *b.first()? {
            TYPE_DATA => Some(Packet::Data { seq: i64_at(1)? }),
            TYPE_ACK => Some(Packet::Ack {
                serial: u32_at(1)?,
                ack: i64_at(5)?,
                rtt_us: u32_at(13)?,
                speed: u32_at(17)?,
                capacity: u32_at(21)?,
            }),
            TYPE_NAK => {
                let count = usize::from(u16::from_be_bytes(b.get(1..3)?.try_into().ok()?));
                let n = count.min(NAK_DELIVERED);
                let seqs = (0..n).map(|i| i64_at(3 + 8 * i)).collect::<Option<Vec<_>>>()?;
                Some(Packet::Nak { count, seqs })
            }
            TYPE_ACK2 => Some(Packet::Ack2 { serial: u32_at(1)? }),
            _ => None,
        }
    }
}

/// The sender's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    /// The window cap `Wmax` (`max_flow_window_`, §7.3), packets.
    pub wmax: u32,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig { wmax: DEFAULT_WMAX }
    }
}

/// The data sender (§3, §6, §7, §10.3, §11, §12). See the module docs.
#[derive(Debug)]
pub struct Sender {
    /// Sending period `P`, s.
    p: f64,
    w: i64,
    wmax: i64,
    last_ack: i64,
    curr_seq: i64,
    rtt: f64,
    /// Link capacity `L` from the latest advancing ACK, pkts/s.
    l: f64,
    slow_start: bool,
    freeze: bool,
    last_dec_seq: i64,
    p_before_nak: f64,
    nak_count: i64,
    dec_random: i64,
    avg_nak_num: i64,
    ack_count: u64,
    loss_count: u64,
    sent: u64,
    exp_interval: f64,
    loss: BTreeSet<i64>,
    rng: DecRandomSource,
    /// Time of the next send pass (`None`: stopped).
    next_pass: Option<f64>,
    next_syn: f64,
    next_exp: f64,
    out: VecDeque<Packet>,
    retransmitted: u64,
    naks: u64,
    decreases: u64,
}

impl Sender {
    /// A sender whose flow starts at `now`: the send timer at once, the rate tick and EXP on
    /// their grids from t = 0 (§5.2).
    pub fn new(config: SenderConfig, rng: DecRandomSource, now: Instant) -> Sender {
        let t = secs(now);
        Sender {
            p: 1e-6,
            w: 1,
            wmax: i64::from(config.wmax),
            last_ack: 0,
            curr_seq: -1,
            rtt: SYN,
            l: 0.0,
            slow_start: true,
            freeze: false,
            last_dec_seq: -1,
            p_before_nak: 1.0,
            nak_count: 0,
            dec_random: 2,
            avg_nak_num: 2,
            ack_count: 0,
            loss_count: 0,
            sent: 0,
            // The expiry at t = 0 already set it from the initial RTT (§11.2).
            exp_interval: 2.0 * SYN + SYN,
            loss: BTreeSet::new(),
            rng,
            next_pass: Some(t),
            next_syn: grid_at_or_after(t, SYN),
            next_exp: grid_at_or_after(t, 3.0 * SYN),
            out: VecDeque::new(),
            retransmitted: 0,
            naks: 0,
            decreases: 0,
        }
    }

    /// The sending period `P`, s.
    pub fn period(&self) -> f64 {
        self.p
    }
    /// The window `W`, packets.
    pub fn window(&self) -> i64 {
        self.w
    }
    /// Whether the sender is in slow start (§12).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }
    /// Whether the freeze holds new packets back (§6.7).
    pub fn frozen(&self) -> bool {
        self.freeze
    }
    /// `LastAck`, the highest ACK number received.
    pub fn last_ack(&self) -> i64 {
        self.last_ack
    }
    /// `CurrSeq`, the largest new number sent.
    pub fn curr_seq(&self) -> i64 {
        self.curr_seq
    }
    /// `LastDecSeq`, `CurrSeq` at the last decrease.
    pub fn last_dec_seq(&self) -> i64 {
        self.last_dec_seq
    }
    /// `AvgNakNum`, the NAKs per congestion period as averaged (§6.5).
    pub fn avg_nak_num(&self) -> i64 {
        self.avg_nak_num
    }
    /// `DecRandom`, every how many NAKs a period decreases again (§6.6).
    pub fn dec_random(&self) -> i64 {
        self.dec_random
    }
    /// Decreases of `P` so far.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }
    /// The sender's loss list, ascending.
    pub fn loss_list(&self) -> Vec<i64> {
        self.loss.iter().copied().collect()
    }
    /// The sender's RTT estimate `RTT_s`, s.
    pub fn rtt(&self) -> f64 {
        self.rtt
    }
    /// When the next rate tick is due, s.
    pub fn next_rate_tick(&self) -> f64 {
        self.next_syn
    }
    /// When the next send pass is due, s (whether or not it can send).
    pub fn next_pass(&self) -> Option<f64> {
        self.next_pass
    }
    /// The EXP interval, s (§11).
    pub fn exp_interval(&self) -> f64 {
        self.exp_interval
    }

    /// Whether a send pass would send something now.
    fn can_send(&self) -> bool {
        !self.loss.is_empty() || self.curr_seq - self.last_ack < self.w
    }

    /// Fires every timer due at or before `t`, in time order (ties: rate tick, EXP, send).
    fn advance(&mut self, t: f64) {
        loop {
            let other = self.next_syn.min(self.next_exp);
            if let Some(pass) = self.next_pass.filter(|&s| s < other && s <= t + EPS) {
                if self.can_send() {
                    self.send_pass(pass);
                } else {
                    self.skip_blocked_polls(other.min(t + 2.0 * EPS));
                }
                continue;
            }
            if other > t + EPS {
                return;
            }
            if self.next_syn <= self.next_exp {
                self.rate_tick();
            } else {
                self.exp();
            }
        }
    }

    /// Replays the polls of a blocked sender that fall before `bound` (§3.5's lazy form).
    fn skip_blocked_polls(&mut self, bound: f64) {
        let Some(mut at) = self.next_pass else { return };
        while at < bound {
            if self.p <= 0.0 {
                at = bound; // a zero RTT report zeroed `P`: the module would spin here
                break;
            }
            if self.freeze {
                self.freeze = false;
                at += SYN + self.p;
                continue;
            }
            let polls = ((bound - at) / self.p).floor();
            if polls > POLL_REPLAY {
                at += (polls - 1.0) * self.p;
            }
            at += self.p;
        }
        self.next_pass = Some(at);
    }

    /// One send pass at time `t` (§3.1).
    fn send_pass(&mut self, t: f64) {
        let probe;
        if let Some(seq) = self.loss.pop_first() {
            self.out.push_back(Packet::Data { seq });
            self.retransmitted += 1;
            probe = false;
        } else if self.curr_seq - self.last_ack < self.w {
            self.curr_seq += 1;
            self.out.push_back(Packet::Data { seq: self.curr_seq });
            probe = self.curr_seq % 16 == 0;
        } else {
            self.rearm_after_pass(t);
            return;
        }
        self.sent += 1;
        if probe {
            self.next_pass = Some(t);
        } else {
            self.rearm_after_pass(t);
        }
    }

    fn rearm_after_pass(&mut self, t: f64) {
        let delay = if std::mem::take(&mut self.freeze) { SYN + self.p } else { self.p };
        self.next_pass = Some(t + delay);
    }

    /// The rate tick (§6.1, §6.2).
    fn rate_tick(&mut self) {
        self.next_syn += SYN;
        if self.sent > 0 && !self.slow_start {
            if self.loss_count > 0 || self.ack_count == 0 {
                self.loss_count = 0;
                return;
            }
            let inc = increase(self.p, self.l, self.p_before_nak);
            self.p = self.p * SYN / (self.p * inc + SYN);
        } else {
            self.loss_count = 0;
        }
        if self.p < 1e-6 {
            self.p = 1e-6;
        }
        self.ack_count = 0;
    }

    /// The EXP timer (§11.1).
    fn exp(&mut self) {
        let t = self.next_exp;
        if self.curr_seq >= self.last_ack {
            self.loss.extend(self.last_ack..=self.curr_seq);
        }
        self.exp_interval = 2.0 * self.rtt + SYN;
        self.next_exp = t + self.exp_interval;
    }

    /// An ACK (§10.3, §3.4, §7.1, §8.3, §6.8).
    fn on_ack(&mut self, t: f64, serial: u32, a: i64, rtt_us: u32, speed: u32, capacity: u32) {
        self.out.push_back(Packet::Ack2 { serial });
        if a <= self.last_ack {
            return;
        }
        self.last_ack = a;
        // Slip §3.4: the removal loop steps over the entry after each one it removes.
        let acked: Vec<i64> = self.loss.range(..=a).copied().collect();
        for seq in acked.into_iter().step_by(2) {
            self.loss.remove(&seq);
        }
        let sample = f64::from(rtt_us) / 1e6;
        self.rtt = if self.rtt == SYN { sample } else { 0.875 * self.rtt + 0.125 * sample };
        if self.slow_start {
            self.w = a;
        } else if speed > 0 {
            self.w = (0.875 * self.w as f64 + 0.125 * f64::from(speed) * (self.rtt + SYN)).ceil() as i64;
        }
        if self.w > self.wmax {
            self.slow_start = false;
            self.w = self.wmax;
        }
        self.l = f64::from(capacity);
        self.next_exp = t + self.exp_interval;
        self.ack_count += 1;
        if self.p > self.rtt {
            self.p = self.rtt;
            self.next_pass = Some(t);
        }
    }

    /// A NAK (§6.3–6.7, §9.4): `count` numbers listed, `seqs` the first 75 of them.
    fn on_nak(&mut self, t: f64, count: usize, seqs: &[i64]) {
        self.naks += 1;
        self.slow_start = false;
        self.p_before_nak = self.p;
        // Entries past the 75 delivered read 0 (NS-2 zeroes its headers, §9.3).
        let entry = |i: usize| seqs.get(i).copied().unwrap_or(0);
        if entry(0) > self.last_dec_seq {
            self.freeze = true;
            self.p *= 1.125;
            self.decreases += 1;
            self.nak_count = 1;
            // Slip §6.6: NakCount is already 1 when it enters the average.
            self.avg_nak_num = 1 + (0.875 * self.avg_nak_num as f64 + 0.125 * self.nak_count as f64).ceil() as i64;
            self.dec_random = self.rng.borrow_mut().below(self.avg_nak_num as u64) as i64 + 1;
            self.last_dec_seq = self.curr_seq;
        } else {
            self.nak_count += 1;
            if self.nak_count % self.dec_random == 0 {
                self.p *= 1.125;
                self.decreases += 1;
                self.last_dec_seq = self.curr_seq;
            }
        }
        self.loss_count += count as u64;
        for i in 0..count {
            let seq = entry(i);
            if seq >= self.last_ack {
                self.loss.insert(seq);
            }
        }
        self.next_exp = t + self.exp_interval;
        self.next_pass = Some(t);
    }
}

/// Packets per SYN to add at a rate tick (§6.2), with `MTU` = 1500.
pub fn increase(p: f64, l: f64, p_before_nak: f64) -> f64 {
    let mtu = f64::from(MTU);
    let c = 1.0 / p;
    let step = |b: f64| (10f64.powf((8.0 * mtu * b).log10().ceil()) * 1.5e-6 / mtu).max(1.0 / mtu);
    if l < c {
        1.0 / mtu
    } else if p > p_before_nak && l / 9.0 < l - c {
        step(l / 9.0)
    } else {
        step(l - c)
    }
}

impl Agent for Sender {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        let t = secs(now);
        if self.next_pass.is_none() {
            return;
        }
        self.advance(t);
        match Packet::parse(bytes) {
            Some(Packet::Ack { serial, ack, rtt_us, speed, capacity }) => {
                self.on_ack(t, serial, ack, rtt_us, speed, capacity)
            }
            Some(Packet::Nak { count, seqs }) => self.on_nak(t, count, &seqs),
            _ => {}
        }
        self.advance(t);
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.next_pass.is_some() {
            self.advance(secs(now));
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let pass = self.next_pass?;
        let mut due = self.next_syn.min(self.next_exp);
        if self.can_send() {
            due = due.min(pass);
        }
        Some(instant_at(due))
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        if self.out.is_empty() && self.next_pass.is_some() {
            self.advance(secs(now)); // a pass due now (the flow's first) runs now, not 1 µs later
        }
        let p = self.out.pop_front()?;
        Some(Emit { size: p.emit(buf), wire_len: p.wire_len(), channel: Channel::Datagram })
    }

    fn stop(&mut self, _now: Instant) {
        self.next_pass = None;
        self.out.clear();
    }

    fn is_done(&self) -> bool {
        false // an unlimited source (§3.7)
    }

    fn stats(&self) -> AgentStats {
        AgentStats {
            delivered: 0,
            packets_sent: self.sent,
            retransmitted: self.retransmitted,
            loss_events: self.naks,
            window: self.w as f64,
            period_us: self.p * 1e6,
            rtt_us: self.rtt * 1e6,
        }
    }
}

/// The data receiver (§4, §8, §9, §10.1, §10.4). See the module docs.
#[derive(Debug)]
pub struct Receiver {
    rcv_curr: i64,
    rcv_last_ack: i64,
    rcv_last_ack2: i64,
    ack_seq: i64,
    last_ack_time: f64,
    rtt: f64,
    nak_interval: f64,
    /// Missing numbers with the time each was last reported.
    loss: BTreeMap<i64, f64>,
    /// (serial, ACK number, send time), oldest first.
    history: VecDeque<(u32, i64, f64)>,
    arrivals_window: [f64; 16],
    arrival_pos: usize,
    arrival_written: u64,
    probes: [f64; 16],
    probe_pos: usize,
    probe_time: f64,
    last_arrival: f64,
    next_ack: f64,
    next_nak: f64,
    out: VecDeque<Packet>,
    arrivals: u64,
}

impl Receiver {
    /// A receiver whose flow starts at `now`; its ACK and NAK ticks join the 10 ms grid (§5.2).
    pub fn new(now: Instant) -> Receiver {
        let t = secs(now);
        let grid = grid_at_or_after(t, SYN);
        Receiver {
            rcv_curr: -1,
            rcv_last_ack: 0,
            rcv_last_ack2: 0,
            ack_seq: -1,
            last_ack_time: 0.0,
            rtt: SYN,
            nak_interval: SYN,
            loss: BTreeMap::new(),
            history: VecDeque::new(),
            arrivals_window: [0.0; 16],
            arrival_pos: 0,
            arrival_written: 0,
            probes: [0.0; 16],
            probe_pos: 0,
            probe_time: 0.0,
            last_arrival: 0.0,
            next_ack: grid,
            next_nak: grid,
            out: VecDeque::new(),
            arrivals: 0,
        }
    }

    /// Data packets that arrived, duplicates and stale retransmissions included: the module's
    /// own throughput count (§13.5), in packets of 1500 B.
    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }
    /// The first number not received in order.
    pub fn in_order(&self) -> i64 {
        self.loss.keys().next().copied().unwrap_or(self.rcv_curr + 1)
    }
    /// The receiver's loss list, ascending.
    pub fn loss_list(&self) -> Vec<i64> {
        self.loss.keys().copied().collect()
    }
    /// `RTT_r`, s.
    pub fn rtt(&self) -> f64 {
        self.rtt
    }
    /// The NAK re-report interval, s: `max(RTT_r, SYN)` (§9.2).
    pub fn nak_interval(&self) -> f64 {
        self.nak_interval
    }
    /// When the next ACK tick is due, s.
    pub fn next_ack_tick(&self) -> f64 {
        self.next_ack
    }
    /// When the NAK timer next fires, s.
    pub fn next_nak_tick(&self) -> f64 {
        self.next_nak
    }

    fn advance(&mut self, t: f64) {
        loop {
            if self.next_ack <= self.next_nak && self.next_ack <= t + EPS {
                self.ack_tick();
            } else if self.next_nak <= t + EPS {
                self.nak_tick();
            } else {
                return;
            }
        }
    }

    /// A data packet (§4.1).
    fn on_data(&mut self, t: f64, s: i64) {
        self.arrivals_window[self.arrival_pos] = t - self.last_arrival;
        self.arrival_pos = (self.arrival_pos + 1) % 16;
        self.arrival_written += 1;
        self.last_arrival = t;
        if s.rem_euclid(16) == 0 {
            self.probe_time = t;
        } else if s.rem_euclid(16) == 1 {
            self.probes[self.probe_pos] = t - self.probe_time;
            self.probe_pos = (self.probe_pos + 1) % 16;
        }
        self.arrivals += 1;
        if s < self.rcv_last_ack {
            return;
        }
        if s > self.rcv_curr + 1 {
            for n in self.rcv_curr + 1..s {
                self.loss.insert(n, t);
            }
            let listed: Vec<i64> = (self.rcv_curr + 1..s).take(NAK_LISTED).collect();
            self.send_nak(t, listed);
        }
        if s > self.rcv_curr {
            self.rcv_curr = s;
        } else {
            self.loss.remove(&s);
        }
    }

    /// Sends a NAK listing `listed` (only the first 75 travel, §9.3); restarts the NAK timer.
    fn send_nak(&mut self, t: f64, listed: Vec<i64>) {
        let count = listed.len();
        let mut seqs = listed;
        seqs.truncate(NAK_DELIVERED);
        self.out.push_back(Packet::Nak { count, seqs });
        self.next_nak = t + self.nak_interval;
    }

    /// The periodic NAK (§9.2).
    fn nak_tick(&mut self) {
        let t = self.next_nak;
        let mut listed = Vec::new();
        for (&seq, reported) in self.loss.iter_mut() {
            if listed.len() == NAK_LISTED {
                break;
            }
            if t - *reported > self.rtt {
                *reported = t;
                listed.push(seq);
            }
        }
        if listed.is_empty() {
            self.next_nak = t + self.nak_interval;
        } else {
            self.send_nak(t, listed);
        }
    }

    /// The ACK tick (§10.1).
    fn ack_tick(&mut self) {
        let t = self.next_ack;
        self.next_ack += SYN;
        let a = self.in_order();
        if a > self.rcv_last_ack {
            self.rcv_last_ack = a;
        } else if t - self.last_ack_time < 2.0 * self.rtt {
            return;
        }
        if self.rcv_last_ack > self.rcv_last_ack2 {
            let speed = self.arrival_speed();
            let capacity = self.capacity();
            self.ack_seq += 1;
            let serial = self.ack_seq as u32;
            self.out.push_back(Packet::Ack {
                serial,
                ack: self.rcv_last_ack,
                rtt_us: (self.rtt * 1e6) as u32,
                speed,
                capacity,
            });
            if self.history.len() == ACK_HISTORY {
                self.history.pop_front();
            }
            self.history.push_back((serial, self.rcv_last_ack, t));
            self.last_ack_time = t;
        }
    }

    /// Arrival speed `AS`, pkts/s (§8.1); sorts the arrival window in place.
    fn arrival_speed(&mut self) -> u32 {
        let w = &mut self.arrivals_window;
        if self.arrival_written < 16 {
            if self.arrival_written == 0 {
                return 0;
            }
            let latest = w[(self.arrival_pos + 15) % 16];
            let before = w[(self.arrival_pos + 14) % 16];
            return if self.arrival_written >= 2 && latest < 2.0 * before { (1.0 / latest).ceil() as u32 } else { 0 };
        }
        for i in 0..9 {
            for j in i..16 {
                if w[i] > w[j] {
                    w.swap(i, j);
                }
            }
        }
        let m = w[8];
        let kept: Vec<f64> = w.iter().copied().filter(|&v| m / 2.0 < v && v < 2.0 * m).collect();
        if kept.len() > 8 {
            (1.0 / (kept.iter().sum::<f64>() / kept.len() as f64)).ceil() as u32
        } else {
            0
        }
    }

    /// Link capacity `L`, pkts/s (§8.2), with the slip: the exchange takes the arrival window.
    fn capacity(&mut self) -> u32 {
        for i in 0..9 {
            for j in i..16 {
                if self.probes[i] > self.probes[j] {
                    self.probes[i] = self.probes[j];
                    self.probes[j] = self.arrivals_window[i];
                }
            }
        }
        if self.probes[8] == 0.0 {
            0
        } else {
            (1.0 / self.probes[8]).ceil() as u32
        }
    }

    /// An ACK2 (§10.4).
    fn on_ack2(&mut self, t: f64, serial: u32) {
        let Some(k) = self.history.iter().position(|&(s, _, _)| s == serial) else { return };
        self.history.drain(..k);
        let (_, number, sent) = self.history[0];
        let rtt = t - sent;
        if rtt > 0.0 {
            self.rtt = if self.rtt == SYN { rtt } else { 0.875 * self.rtt + 0.125 * rtt };
            self.nak_interval = self.rtt.max(SYN);
            self.rcv_last_ack2 = self.rcv_last_ack2.max(number);
        }
    }
}

impl Agent for Receiver {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        let t = secs(now);
        self.advance(t);
        match Packet::parse(bytes) {
            Some(Packet::Data { seq }) => self.on_data(t, seq),
            Some(Packet::Ack2 { serial }) => self.on_ack2(t, serial),
            _ => {}
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.advance(secs(now));
    }

    fn poll_timeout(&self) -> Option<Instant> {
        Some(instant_at(self.next_ack.min(self.next_nak)))
    }

    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let p = self.out.pop_front()?;
        Some(Emit { size: p.emit(buf), wire_len: p.wire_len(), channel: Channel::Datagram })
    }

    fn stop(&mut self, _now: Instant) {}

    fn is_done(&self) -> bool {
        false
    }

    fn stats(&self) -> AgentStats {
        AgentStats { delivered: self.in_order() as u64 * u64::from(MTU), ..AgentStats::default() }
    }
}
