//! A small sans-IO TCP for the simulator: the TCP SACK flows of the 2004 UDT papers' NS-2
//! scenarios.
//!
//! The papers ran NS-2's one-way TCP: `Agent/TCP/Sack1` sending to `Agent/TCPSink/Sack1`,
//! delayed ACKs off, the advertised window `window_` at least the BDP. [`TcpSender`] models
//! that sender and [`TcpReceiver`] that sink; like NS-2's one-way agents there is no
//! handshake (but the NS-2.26 profile's one-way SYN), no FIN exchange and no real payload,
//! and sequence numbers count whole segments (`u64`, never wrapping).
//!
//! # The sender
//!
//! * Slow start (`cwnd += 1` per new ACK while `cwnd < ssthresh`) and congestion avoidance
//!   (`cwnd += 1/cwnd` per new ACK), as NS-2's `opencwnd` does: per ACK, not per byte acked.
//!   Outside recovery the sender keeps `snd_nxt < snd_una + min(⌊cwnd⌋, window_pkts)`.
//! * Fast retransmit on the third duplicate ACK that brings new SACK information (NS-2
//!   counts a duplicate only when its SACK blocks change the scoreboard), and only if the
//!   cumulative ACK has passed the `recover` point of the previous recovery or timeout (NS-2's
//!   `bug_fix_`, RFC 6582's rule): one window halving per window of data, and no spurious
//!   fast retransmit from the duplicates a go-back-N after a timeout provokes.
//! * On entering recovery `ssthresh = max(min(cwnd, window_pkts)/2, 2)`, `cwnd = ssthresh`
//!   (NS-2 `slowdown(CLOSE_SSTHRESH_HALF|CLOSE_CWND_HALF)`), `recover = snd_max`, and the
//!   first hole is retransmitted at once. During recovery cwnd stays put; the sender sends
//!   while `pipe < ⌊cwnd⌋`: holes first (lowest first), then new data within `window_pkts` of
//!   the cumulative ACK. Recovery ends when the cumulative ACK reaches `recover`; a partial
//!   ACK restarts the retransmission timer.
//! * The scoreboard is a `BTreeMap` of SACKed ranges above the cumulative ACK. As in NS-2's
//!   scoreboard, every unSACKed segment below the highest SACKed one counts as lost (the
//!   simulator never reorders), and a retransmission counts as lost again once a segment
//!   sent after it is SACKed; it is then retransmitted again. So
//!   `pipe = (snd_max − highest SACKed end) + retransmissions in flight`, RFC 3517's estimate
//!   with NS-2's loss rule, kept in O(log n) per packet rather than NS-2's per-ACK counter
//!   (`pipe_ −= 1` per duplicate, `−= 2` per partial ACK), which it replaces.
//! * Retransmission timeout: `ssthresh = max(flight/2, 2)` with `flight = snd_nxt − snd_una`
//!   before the timeout (RFC 5681; a second timeout in a row so gives 2, as NS-2's
//!   `window()/2` of a cwnd of 1 does), `cwnd = 1`, the RTO doubles (up to `max_rto`),
//!   recovery ends, `recover = snd_max`, and the sender goes back N: it resends from the
//!   cumulative ACK. The SACK scoreboard is cleared (NS-2 Sack1 does so; RFC 2018 lets the
//!   receiver renege) and SACK blocks are ignored until the cumulative ACK advances (NS-2's
//!   `timeout_` flag); after that, SACKed segments are skipped by the go-back-N.
//! * RTT: Karn's algorithm with one timed segment at a time, NS-2 without `timestamps_`: a
//!   new segment is timed when none is, the sample is taken when the cumulative ACK covers
//!   it, and any retransmission or timeout cancels the measurement. RFC 6298 smoothing
//!   (`srtt`, `rttvar`, `rto = srtt + 4·rttvar` clamped to `[min_rto, max_rto]`), at µs
//!   resolution by default, NS-2's integer estimator in ticks with `rtt_tick` (below). The
//!   backoff is cleared by every ACK that advances the cumulative ACK.
//!
//! # The NS-2.26 profile
//!
//! [`TcpConfig::default`] keeps NS-2 2.35's timer values with µs timing and neither Limited
//! Transmit nor SYN. [`TcpConfig::ns2_226`] (`tcp_profile = "ns2-2.26"` in a scenario) has
//! the defaults of NS-2 2.26, which the papers ran, each switch as NS-2 does it:
//!
//! * Timers: min RTO 1 s, initial RTO 6 s, max 64 s. The floor applies before the backoff
//!   (`rfc2988_`, on since 2002), so a backed-off RTO is `max(rto, min_rto) · 2^k`, capped.
//! * `rtt_tick` 10 ms, NS-2's `tcpTick_` estimator without timestamps: a sample is the
//!   number of tick boundaries between the timed segment's send and its ACK on a clock
//!   offset by a per-agent phase (`boot_time_`), at least 1. `srtt` is kept as 8 × ticks and
//!   `rttvar` as 4 × ticks in integers: the first sample sets them to `m` and `m/2`, later
//!   ones add `m − ⌊srtt⌋` and `|m − ⌊srtt⌋| − ⌊rttvar⌋` (each at least 1 in its scale). The
//!   RTO is `⌊srtt + 4·rttvar⌋` ticks, at least two. So 4·rttvar never decays below 3/4 of a
//!   tick: a steady RTT gets an RTO three ticks above it before the floor.
//! * Limited Transmit (`singledup_`): outside recovery, the first and the second duplicate
//!   ACK (those counted: with new SACK information) each send one new segment if it lies
//!   within the advertised window and no more than `cwnd + dupacks` beyond the cumulative
//!   ACK; a duplicate ACK sends nothing else.
//! * The SYN exchange (`syn_` with `delay_growth_`): segment 0 is a 40-byte SYN sent alone
//!   with cwnd 1 and timed like data (its ACK gives the first RTT sample); the ACK that
//!   covers it sets cwnd to `initial_cwnd`, and the data follow from segment 1: the first
//!   data leave one RTT later. A lost SYN waits out the 6 s initial RTO, and its timeout sets
//!   ssthresh to 2 as any timeout with one segment out does.
//! * Whole-segment reductions (`precisionReduce_` false): entering recovery,
//!   `cwnd = ⌊⌊min(cwnd, window)⌋/2⌋` (at least 1) and ssthresh the same (at least 2); a
//!   timeout's ssthresh is `⌊flight/2⌋`, at least 2.
//!
//! The profile leaves the rest of the model as it is (docs/simulator.md lists what 2.26 had
//! besides and the profile does not model).
//!
//! # The receiver
//!
//! It ACKs every data segment at once (delayed ACK off), cumulatively, with up to three
//! SACK blocks, the block holding the segment just received first and then the most recently
//! reported others (RFC 2018). Out-of-order segments are kept as a `BTreeMap` of ranges.
//! Delivered bytes count `mss` per in-order segment, the last segment of a finite transfer
//! its own length.
//!
//! # The end of a finite transfer
//!
//! The sender flags the last segment of a finite transfer (`TcpConfig::bytes`) FIN and
//! writes its payload length in its header; the receiver is done once everything up to and
//! including that segment arrived in order. A flow ended by [`Agent::stop`] sends no FIN:
//! its receiver is never done, its sender once all it sent is acknowledged.
//!
//! # Simplifications against NS-2
//!
//! * By default no Limited Transmit (NS-2's `singledup_`), no `tcpTick_` rounding and no SYN
//!   (the NS-2.26 profile has them); no `maxburst_`, no ECN, no slow-start restart after idle. cwnd is kept as an `f64` and capped at
//!   `window_pkts` (NS-2 lets it grow past `window_` when window-limited, to no effect).
//! * SACK recovery only; no NewReno fallback (`sack: false`) is offered.
//! * After a timeout, once the cumulative ACK moves again, the go-back-N skips what the
//!   receiver SACKs; NS-2 Sack1 resends it.
//! * Karn's rule is applied conservatively: any retransmission, not only of the timed
//!   segment, cancels the RTT measurement under way.
//! * A slow-start overshoot on a BDP-sized DropTail queue loses about half a window at once;
//!   SACK recovery repairs it but, as in NS-2, a retransmission lost with nothing new sent
//!   after it still waits for the RTO (the 10 Mb/s, 100 ms test sees one such timeout at
//!   start-up, none after).
//! * The ACK path carries no reverse data and an ACK is 40 bytes on the wire.
//!
//! # Wire format (private to the model)
//!
//! Data: `[1, flags, len: u32, seq: u64]` (14 bytes, big-endian; flag bit 0 = FIN, bit 1 =
//! SYN with `len` 0), on the wire `40 + len` bytes. ACK: `[2, n, ack: u64, n × (start: u64, end: u64)]` with `n ≤ 3`,
//! `ack` the next segment expected, blocks half-open; 40 bytes on the wire. Anything else is
//! ignored, never a panic.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use transfer::time::{Duration, Instant};

use crate::agent::{Agent, AgentStats, Channel, Emit};

/// Bytes of TCP/IP header counted on the wire for every segment.
pub const HEADER_BYTES: u32 = 40;

const TYPE_DATA: u8 = 1;
const TYPE_ACK: u8 = 2;
const FLAG_FIN: u8 = 1;
const FLAG_SYN: u8 = 2;
const DATA_HDR: usize = 14;
const ACK_HDR: usize = 10;
const MAX_SACK_BLOCKS: usize = 3;
const DUPACK_THRESHOLD: u32 = 3;

/// A TCP flow's parameters (both ends take the same).
#[derive(Debug, Clone, PartialEq)]
pub struct TcpConfig {
    /// Payload bytes per segment (default 1460: a 1500-byte packet with 40 bytes of header).
    pub mss: u32,
    /// The receiver's advertised window, the most segments in flight (NS-2 `window_`;
    /// default 20 000, scenarios set it at least to the BDP).
    pub window_pkts: u32,
    /// The initial congestion window in segments (default 2: ns-default.tcl's `windowInit_`
    /// since 2001; older NS-2 and its test suites use 1).
    pub initial_cwnd: f64,
    /// The initial slow-start threshold in segments (default: effectively unbounded, NS-2's
    /// `ssthresh_` of 0 meaning none).
    pub initial_ssthresh: f64,
    /// The retransmission timeout before any RTT sample (default 3 s: RFC 2988 and
    /// ns-default.tcl's `rtxcur_init_` since 2006; NS-2 before that used 6 s).
    pub initial_rto: Duration,
    /// The RTO's floor (default 200 ms, NS-2 `minrto_` 0.2).
    pub min_rto: Duration,
    /// The RTO's ceiling, backoff included (default 60 s, NS-2 `maxrto_`).
    pub max_rto: Duration,
    /// Payload bytes to send; `None` is an endless bulk source (NS-2's FTP).
    pub bytes: Option<u64>,
    /// The RTT estimator's clock (NS-2 `tcpTick_`). `None` (default): µs samples smoothed in
    /// floating point (RFC 6298). `Some(tick)`: NS-2's integer estimator, a sample counting
    /// the tick boundaries between a segment's send and its ACK, `srtt` and `rttvar` kept in
    /// ticks with 3 and 2 fraction bits, the RTO a whole number of ticks and at least two
    /// (module docs, "The NS-2.26 profile").
    pub rtt_tick: Option<Duration>,
    /// Where the tick clock's boundaries fall, an offset below `rtt_tick` (NS-2 draws its
    /// `boot_time_` uniformly per agent; the simulator draws it from the flow's seed).
    pub tick_phase: Duration,
    /// Limited Transmit (NS-2 `singledup_`, RFC 3042): the first and second duplicate ACK
    /// each send one new segment, up to `cwnd + dupacks` beyond the cumulative ACK (default
    /// off).
    pub limited_transmit: bool,
    /// The SYN exchange of NS-2's one-way TCP (`syn_` with `delay_growth_`): a 40-byte SYN
    /// (segment 0) with a window of 1 first, the data from segment 1 once it is acknowledged,
    /// when cwnd becomes `initial_cwnd` (default off).
    pub syn: bool,
    /// Whole-segment window reductions (NS-2 `precisionReduce_` false): entering recovery
    /// sets `ssthresh = max(⌊⌊w⌋/2⌋, 2)` and `cwnd = max(⌊⌊w⌋/2⌋, 1)`, a timeout
    /// `ssthresh = max(⌊flight/2⌋, 2)` (default off: the exact halves).
    pub integer_reductions: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            window_pkts: 20_000,
            initial_cwnd: 2.0,
            initial_ssthresh: 1e12,
            initial_rto: Duration::from_secs(3),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            bytes: None,
            rtt_tick: None,
            tick_phase: Duration::ZERO,
            limited_transmit: false,
            syn: false,
            integer_reductions: false,
        }
    }
}

/// The names a scenario gives `tcp_profile` ([`TcpConfig::profile`]).
pub const PROFILES: [&str; 2] = ["default", "ns2-2.26"];

impl TcpConfig {
    /// The named profile: `default` ([`TcpConfig::default`]) or `ns2-2.26`
    /// ([`TcpConfig::ns2_226`]); `None` for any other name.
    pub fn profile(name: &str) -> Option<TcpConfig> {
        match name {
            "default" => Some(TcpConfig::default()),
            "ns2-2.26" => Some(TcpConfig::ns2_226()),
            _ => None,
        }
    }

    /// NS-2 2.26's defaults, which the 2004 papers ran (module docs, "The NS-2.26 profile"):
    /// min RTO 1 s, initial RTO 6 s, max RTO 64 s, a 10 ms RTT clock, Limited Transmit, the
    /// SYN exchange and whole-segment reductions; everything else as [`TcpConfig::default`].
    pub fn ns2_226() -> TcpConfig {
        TcpConfig {
            initial_rto: Duration::from_secs(6),
            min_rto: Duration::from_secs(1),
            max_rto: Duration::from_secs(64),
            rtt_tick: Some(Duration::from_millis(10)),
            limited_transmit: true,
            syn: true,
            integer_reductions: true,
            ..TcpConfig::default()
        }
    }

    /// Segments of a finite transfer and the payload length of its last one.
    fn segments(&self) -> Option<(u64, u32)> {
        let mss = u64::from(self.mss.max(1));
        self.bytes.map(|b| {
            let n = b.div_ceil(mss);
            let last = if n == 0 { 0 } else { b - (n - 1) * mss };
            (n, last as u32)
        })
    }
}

/// A parsed segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Segment {
    Data { seq: u64, len: u32, fin: bool },
    Ack { ack: u64, blocks: [(u64, u64); MAX_SACK_BLOCKS], n: usize },
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Parses a segment; `None` for anything malformed.
fn parse(b: &[u8]) -> Option<Segment> {
    match *b.first()? {
        TYPE_DATA if b.len() >= DATA_HDR => {
            let len = u32::from_be_bytes([b[2], b[3], b[4], b[5]]);
            Some(Segment::Data { seq: u64_at(b, 6), len, fin: b[1] & FLAG_FIN != 0 })
        }
        TYPE_ACK if b.len() >= ACK_HDR => {
            let n = usize::from(b[1]);
            if n > MAX_SACK_BLOCKS || b.len() < ACK_HDR + 16 * n {
                return None;
            }
            let mut blocks = [(0, 0); MAX_SACK_BLOCKS];
            for (i, blk) in blocks.iter_mut().enumerate().take(n) {
                let at = ACK_HDR + 16 * i;
                *blk = (u64_at(b, at), u64_at(b, at + 8));
            }
            Some(Segment::Ack { ack: u64_at(b, 2), blocks, n })
        }
        _ => None,
    }
}

fn write_data(buf: &mut [u8], seq: u64, len: u32, flags: u8) -> usize {
    buf[0] = TYPE_DATA;
    buf[1] = flags;
    buf[2..6].copy_from_slice(&len.to_be_bytes());
    buf[6..14].copy_from_slice(&seq.to_be_bytes());
    DATA_HDR
}

fn write_ack(buf: &mut [u8], ack: u64, blocks: &[(u64, u64)]) -> usize {
    buf[0] = TYPE_ACK;
    buf[1] = blocks.len() as u8;
    buf[2..10].copy_from_slice(&ack.to_be_bytes());
    let mut at = ACK_HDR;
    for &(s, e) in blocks {
        buf[at..at + 8].copy_from_slice(&s.to_be_bytes());
        buf[at + 8..at + 16].copy_from_slice(&e.to_be_bytes());
        at += 16;
    }
    at
}

/// Disjoint, non-adjacent half-open ranges of segment numbers (start → end).
#[derive(Debug, Default, Clone)]
struct RangeSet {
    map: BTreeMap<u64, u64>,
}

impl RangeSet {
    /// The range holding `seq`.
    fn containing(&self, seq: u64) -> Option<(u64, u64)> {
        self.map.range(..=seq).next_back().filter(|(_, &e)| e > seq).map(|(&s, &e)| (s, e))
    }

    /// Adds `[s, e)`; whether any of it was new.
    fn insert(&mut self, mut s: u64, mut e: u64) -> bool {
        if s >= e {
            return false;
        }
        if let Some((&ps, &pe)) = self.map.range(..=s).next_back() {
            if pe >= e {
                return false;
            }
            if pe >= s {
                s = ps;
                self.map.remove(&ps);
            }
        }
        while let Some((&ns, &ne)) = self.map.range(s..=e).next() {
            self.map.remove(&ns);
            e = e.max(ne);
        }
        self.map.insert(s, e);
        true
    }

    /// Forgets everything below `seq`.
    fn trim_below(&mut self, seq: u64) {
        let mut upper = self.map.split_off(&seq);
        if let Some((&s, &e)) = self.map.iter().next_back() {
            if e > seq && s < seq {
                upper.insert(seq, e);
            }
        }
        self.map = upper;
    }

    fn highest_end(&self) -> Option<u64> {
        self.map.iter().next_back().map(|(_, &e)| e)
    }

    fn clear(&mut self) {
        self.map.clear();
    }
}

/// The sending end: NS-2's `Agent/TCP/Sack1` with an FTP source (module docs).
#[derive(Debug, Clone)]
pub struct TcpSender {
    cfg: TcpConfig,
    /// Segments the application offers (`u64::MAX` for an endless source), lowered by stop.
    end: u64,
    finite: bool,
    last_len: u32,
    una: u64,
    nxt: u64,
    max: u64,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    recover: u64,
    /// After a timeout, until the cumulative ACK advances: duplicates and SACKs ignored.
    after_timeout: bool,
    /// A hole to retransmit now, whatever the pipe (the fast retransmit itself).
    force: Option<u64>,
    sacked: RangeSet,
    high_sack: u64,
    rexmit_next: u64,
    /// Retransmissions in flight: segment → `snd_max` when it was sent.
    retx: BTreeMap<u64, u64>,
    retx_order: VecDeque<(u64, u64)>,
    relost: BTreeSet<u64>,
    srtt_us: Option<f64>,
    rttvar_us: f64,
    /// NS-2's integer estimator (`rtt_tick`): 8 × srtt and 4 × rttvar in ticks, 0 = no sample.
    t_srtt: i64,
    t_rttvar: i64,
    rto: Duration,
    backoff: u32,
    timed: Option<(u64, Instant)>,
    deadline: Option<Instant>,
    /// A first or second duplicate ACK just arrived: Limited Transmit may send one segment.
    limited_send: bool,
    /// The first data segment: 1 behind a SYN (segment 0), else 0.
    first_data: u64,
    packets_sent: u64,
    retransmitted: u64,
    fast_retransmits: u64,
    timeouts: u64,
}

impl TcpSender {
    /// A sender for the transfer `cfg` describes.
    pub fn new(cfg: TcpConfig) -> TcpSender {
        let first_data = u64::from(cfg.syn);
        let (end, last_len, finite) = match cfg.segments() {
            Some((n, last)) => (n + first_data, last, true),
            None => (u64::MAX, cfg.mss, false),
        };
        let cwnd = if cfg.syn { 1.0 } else { cfg.initial_cwnd.max(1.0).min(f64::from(cfg.window_pkts.max(1))) };
        TcpSender {
            end,
            finite,
            last_len,
            una: 0,
            nxt: 0,
            max: 0,
            cwnd,
            ssthresh: cfg.initial_ssthresh,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            after_timeout: false,
            force: None,
            sacked: RangeSet::default(),
            high_sack: 0,
            rexmit_next: 0,
            retx: BTreeMap::new(),
            retx_order: VecDeque::new(),
            relost: BTreeSet::new(),
            srtt_us: None,
            rttvar_us: 0.0,
            t_srtt: 0,
            t_rttvar: 0,
            rto: cfg.initial_rto,
            backoff: 0,
            timed: None,
            deadline: None,
            limited_send: false,
            first_data,
            packets_sent: 0,
            retransmitted: 0,
            fast_retransmits: 0,
            timeouts: 0,
            cfg,
        }
    }

    /// The congestion window in segments.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The slow-start threshold in segments.
    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    /// Fast retransmits so far (recoveries entered).
    pub fn fast_retransmits(&self) -> u64 {
        self.fast_retransmits
    }

    /// Retransmission timeouts so far.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// Whether SACK loss recovery is under way.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// The next segment the receiver expects, as far as the sender knows.
    pub fn cumulative_ack(&self) -> u64 {
        self.una
    }

    /// The retransmission timeout now in force, backoff included.
    pub fn rto(&self) -> Duration {
        self.current_rto()
    }

    fn current_rto(&self) -> Duration {
        let factor = 1u32 << self.backoff.min(16);
        self.rto.saturating_mul(factor).min(self.cfg.max_rto)
    }

    fn wnd(&self) -> u64 {
        u64::from(self.cfg.window_pkts.max(1))
    }

    fn pipe(&self) -> u64 {
        self.max.saturating_sub(self.high_sack) + self.retx.len() as u64
    }

    fn restart_timer(&mut self, now: Instant) {
        self.deadline = if self.una < self.max { Some(now + self.current_rto()) } else { None };
    }

    fn rtt_sample(&mut self, sent: Instant, now: Instant) {
        match self.cfg.rtt_tick {
            None => self.rtt_sample_us((now - sent).as_micros() as f64),
            Some(tick) => self.rtt_sample_ticks(tick, sent, now),
        }
    }

    /// NS-2's `rtt_update` without timestamps and `rtt_timeout` with `rfc2988_`, in ticks.
    fn rtt_sample_ticks(&mut self, tick: Duration, sent: Instant, now: Instant) {
        let t = (tick.as_micros() as u64).max(1);
        let phase = self.cfg.tick_phase.as_micros() as u64 % t;
        // The tick boundaries crossed between the send and the ACK, at least one.
        let ticks = ((now.as_micros() + phase) / t).saturating_sub((sent.as_micros() + phase) / t);
        let m = (ticks as i64).max(1);
        if self.t_srtt != 0 {
            let mut delta = m - (self.t_srtt >> 3);
            self.t_srtt = (self.t_srtt + delta).max(1);
            delta = delta.abs() - (self.t_rttvar >> 2);
            self.t_rttvar = (self.t_rttvar + delta).max(1);
        } else {
            self.t_srtt = m << 3;
            self.t_rttvar = m << 1;
        }
        self.srtt_us = Some(((self.t_srtt >> 3) as u64 * t) as f64);
        // srtt + 4·rttvar, truncated to whole ticks.
        let rto_ticks = ((self.t_rttvar << 3) + self.t_srtt) >> 3;
        let rto = Duration::from_micros(rto_ticks as u64 * t);
        self.rto = rto.clamp(self.cfg.min_rto, self.cfg.max_rto.max(self.cfg.min_rto)).max(2 * tick);
    }

    fn rtt_sample_us(&mut self, r_us: f64) {
        match self.srtt_us {
            None => {
                self.srtt_us = Some(r_us);
                self.rttvar_us = r_us / 2.0;
            }
            Some(srtt) => {
                self.rttvar_us = 0.75 * self.rttvar_us + 0.25 * (srtt - r_us).abs();
                self.srtt_us = Some(0.875 * srtt + 0.125 * r_us);
            }
        }
        let rto_us = self.srtt_us.unwrap_or(r_us) + 4.0 * self.rttvar_us;
        let rto = Duration::from_micros(rto_us.max(0.0) as u64);
        self.rto = rto.clamp(self.cfg.min_rto, self.cfg.max_rto.max(self.cfg.min_rto));
    }

    fn on_ack(&mut self, now: Instant, ack: u64, blocks: &[(u64, u64)]) {
        self.limited_send = false;
        if ack > self.max {
            return; // acknowledges what was never sent
        }
        let mut new_sack = false;
        if !(self.after_timeout && ack <= self.una) {
            let lo = ack.max(self.una);
            for &(s, e) in blocks {
                let (s, e) = (s.max(lo), e.min(self.max));
                if s < e && self.sacked.insert(s, e) {
                    new_sack = true;
                    let done: Vec<u64> = self.retx.range(s..e).map(|(&k, _)| k).collect();
                    for k in done {
                        self.retx.remove(&k);
                    }
                }
            }
        }
        if ack > self.una {
            if let Some((seq, sent)) = self.timed {
                if ack > seq {
                    self.rtt_sample(sent, now);
                    self.timed = None;
                }
            }
            self.una = ack;
            self.nxt = self.nxt.max(ack);
            self.sacked.trim_below(ack);
            self.retx = self.retx.split_off(&ack);
            self.rexmit_next = self.rexmit_next.max(ack);
            self.after_timeout = false;
            self.dupacks = 0;
            self.backoff = 0;
            if self.in_recovery {
                if ack >= self.recover {
                    self.in_recovery = false;
                    self.retx.clear();
                    self.retx_order.clear();
                    self.relost.clear();
                    self.force = None;
                }
            } else {
                if self.cwnd < self.ssthresh {
                    self.cwnd += 1.0;
                } else {
                    self.cwnd += 1.0 / self.cwnd;
                }
                self.cwnd = self.cwnd.min(self.wnd() as f64);
            }
            if self.cfg.syn && ack == 1 {
                // The SYN's ACK opens the window (NS-2's `delay_growth_`).
                self.cwnd = self.cfg.initial_cwnd.max(1.0).min(self.wnd() as f64);
            }
            self.restart_timer(now);
        } else if ack == self.una && self.una < self.max && new_sack && !self.after_timeout {
            self.dupacks += 1;
            if !self.in_recovery && self.dupacks == DUPACK_THRESHOLD && self.una >= self.recover {
                self.enter_recovery(now);
            } else if self.cfg.limited_transmit && !self.in_recovery && self.dupacks < DUPACK_THRESHOLD {
                self.limited_send = true;
            }
        }
        self.high_sack = self.sacked.highest_end().unwrap_or(0).max(self.una);
        // A retransmission is lost again once something sent after it is SACKed.
        while let Some(&(seq, stamp)) = self.retx_order.front() {
            if stamp >= self.high_sack {
                break;
            }
            self.retx_order.pop_front();
            if self.retx.get(&seq) == Some(&stamp) {
                self.retx.remove(&seq);
                self.relost.insert(seq);
            }
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        self.fast_retransmits += 1;
        let w = self.cwnd.min(self.wnd() as f64);
        if self.cfg.integer_reductions {
            let half = (w.floor() / 2.0).floor();
            self.ssthresh = half.max(2.0);
            self.cwnd = half.max(1.0);
        } else {
            self.ssthresh = (w / 2.0).max(2.0);
            self.cwnd = self.ssthresh;
        }
        self.in_recovery = true;
        self.recover = self.max;
        self.rexmit_next = self.una;
        self.retx.clear();
        self.retx_order.clear();
        self.relost.clear();
        self.force = Some(self.una);
        self.deadline = Some(now + self.current_rto());
    }

    fn on_timeout(&mut self, now: Instant) {
        if self.una >= self.max {
            self.deadline = None;
            return;
        }
        self.timeouts += 1;
        let flight = self.nxt.saturating_sub(self.una) as f64;
        let half = if self.cfg.integer_reductions { (flight / 2.0).floor() } else { flight / 2.0 };
        self.ssthresh = half.max(2.0);
        self.cwnd = 1.0;
        self.backoff = (self.backoff + 1).min(16);
        self.in_recovery = false;
        self.recover = self.max;
        self.after_timeout = true;
        self.dupacks = 0;
        self.nxt = self.una;
        self.force = None;
        self.sacked.clear();
        self.high_sack = self.una;
        self.rexmit_next = self.una;
        self.retx.clear();
        self.retx_order.clear();
        self.relost.clear();
        self.timed = None;
        self.deadline = Some(now + self.current_rto());
    }

    /// The next hole to retransmit in recovery.
    fn next_hole(&mut self) -> Option<u64> {
        while let Some(s) = self.relost.pop_first() {
            if s >= self.una && self.sacked.containing(s).is_none() && !self.retx.contains_key(&s) {
                return Some(s);
            }
        }
        let mut s = self.rexmit_next.max(self.una);
        loop {
            if s >= self.high_sack {
                self.rexmit_next = s;
                return None;
            }
            if let Some((_, e)) = self.sacked.containing(s) {
                s = e;
            } else if self.retx.contains_key(&s) {
                s += 1;
            } else {
                self.rexmit_next = s + 1;
                return Some(s);
            }
        }
    }

    /// `snd_nxt` past what the receiver already holds (after a go-back-N).
    fn skip_sacked(&mut self) {
        while self.nxt < self.max {
            match self.sacked.containing(self.nxt) {
                Some((_, e)) => self.nxt = e,
                None => break,
            }
        }
    }

    fn next_to_send(&mut self) -> Option<(u64, bool)> {
        if let Some(s) = self.force.take() {
            if s >= self.una && s < self.max {
                return Some((s, true));
            }
        }
        if std::mem::take(&mut self.limited_send) {
            // NS-2's `send_one`: one new segment within the advertised window and at most
            // `cwnd + dupacks` beyond the cumulative ACK; nothing else on a duplicate ACK.
            let room = (self.nxt + 1 - self.una) as f64 <= self.cwnd + f64::from(self.dupacks);
            if self.nxt < self.end && self.nxt < self.una + self.wnd() && room {
                return Some((self.nxt, false));
            }
            return None;
        }
        if self.in_recovery {
            if self.pipe() >= self.cwnd.floor() as u64 {
                return None;
            }
            if let Some(s) = self.next_hole() {
                return Some((s, true));
            }
            self.skip_sacked();
            if self.nxt < self.end && self.nxt < self.una + self.wnd() {
                return Some((self.nxt, false));
            }
            return None;
        }
        self.skip_sacked();
        let win = (self.cwnd.floor() as u64).max(1).min(self.wnd());
        if self.nxt < self.end && self.nxt < self.una + win {
            return Some((self.nxt, false));
        }
        None
    }
}

impl Agent for TcpSender {
    fn handle_packet(&mut self, now: Instant, _channel: Channel, bytes: &[u8]) {
        if let Some(Segment::Ack { ack, blocks, n }) = parse(bytes) {
            self.on_ack(now, ack, &blocks[..n]);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.deadline.is_some_and(|d| d <= now) {
            self.on_timeout(now);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let (seq, hole) = self.next_to_send()?;
        let is_retx = seq < self.max;
        if hole {
            self.retx.insert(seq, self.max);
            self.retx_order.push_back((seq, self.max));
        } else {
            self.nxt = seq + 1;
            self.max = self.max.max(self.nxt);
        }
        self.packets_sent += 1;
        if is_retx {
            self.retransmitted += 1;
            self.timed = None; // Karn
        } else if self.timed.is_none() {
            self.timed = Some((seq, now));
        }
        if self.deadline.is_none() {
            self.deadline = Some(now + self.current_rto());
        }
        let syn = seq < self.first_data;
        let fin = self.finite && seq + 1 == self.end && !syn;
        let len = if syn {
            0
        } else if fin {
            self.last_len
        } else {
            self.cfg.mss
        };
        let flags = if syn {
            FLAG_SYN
        } else if fin {
            FLAG_FIN
        } else {
            0
        };
        let size = write_data(buf, seq, len, flags);
        Some(Emit { size, wire_len: HEADER_BYTES + len, channel: Channel::Datagram })
    }

    fn stop(&mut self, _now: Instant) {
        self.end = self.end.min(self.max);
    }

    fn is_done(&self) -> bool {
        (self.finite || self.end != u64::MAX) && self.una >= self.end
    }

    fn stats(&self) -> AgentStats {
        AgentStats {
            packets_sent: self.packets_sent,
            retransmitted: self.retransmitted,
            loss_events: self.fast_retransmits + self.timeouts,
            window: self.cwnd,
            rtt_us: self.srtt_us.unwrap_or(0.0),
            ..AgentStats::default()
        }
    }
}

/// One ACK waiting to go.
#[derive(Debug, Clone, Copy)]
struct PendingAck {
    ack: u64,
    blocks: [(u64, u64); MAX_SACK_BLOCKS],
    n: usize,
}

/// The receiving end: NS-2's `Agent/TCPSink/Sack1` without delayed ACKs (module docs).
#[derive(Debug, Clone)]
pub struct TcpReceiver {
    mss: u32,
    /// The first data segment: 1 behind a SYN, else 0.
    first_data: u64,
    /// The next segment expected in order.
    cum: u64,
    ooo: RangeSet,
    /// Segments recently received out of order, most recent first (SACK block order).
    recent: VecDeque<u64>,
    /// The FIN segment and its payload length, once seen.
    fin: Option<(u64, u32)>,
    pending: VecDeque<PendingAck>,
    segments_received: u64,
}

impl TcpReceiver {
    /// A receiver for the transfer `cfg` describes.
    pub fn new(cfg: &TcpConfig) -> TcpReceiver {
        TcpReceiver {
            mss: cfg.mss,
            first_data: u64::from(cfg.syn),
            cum: 0,
            ooo: RangeSet::default(),
            recent: VecDeque::new(),
            fin: None,
            pending: VecDeque::new(),
            segments_received: 0,
        }
    }

    /// The next segment expected in order.
    pub fn cumulative_ack(&self) -> u64 {
        self.cum
    }

    /// Data segments received, duplicates included.
    pub fn segments_received(&self) -> u64 {
        self.segments_received
    }

    fn on_data(&mut self, seq: u64, len: u32, fin: bool) {
        self.segments_received += 1;
        if fin {
            self.fin = Some((seq, len));
        }
        if seq == self.cum {
            self.cum += 1;
            if let Some((s, e)) = self.ooo.containing(self.cum) {
                self.ooo.map.remove(&s);
                self.cum = e;
            }
        } else if seq > self.cum {
            self.ooo.insert(seq, seq + 1);
            self.recent.retain(|&r| r != seq);
            self.recent.push_front(seq);
            self.recent.truncate(8);
        }
        let mut blocks = [(0, 0); MAX_SACK_BLOCKS];
        let mut n = 0;
        for &r in &self.recent {
            if n == MAX_SACK_BLOCKS {
                break;
            }
            if let Some(b) = self.ooo.containing(r) {
                if !blocks[..n].contains(&b) {
                    blocks[n] = b;
                    n += 1;
                }
            }
        }
        let cum = self.cum;
        self.recent.retain(|&r| r >= cum);
        self.pending.push_back(PendingAck { ack: self.cum, blocks, n });
    }
}

impl Agent for TcpReceiver {
    fn handle_packet(&mut self, _now: Instant, _channel: Channel, bytes: &[u8]) {
        if let Some(Segment::Data { seq, len, fin }) = parse(bytes) {
            if seq < u64::MAX {
                self.on_data(seq, len, fin);
            }
        }
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn poll_transmit(&mut self, _now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let p = self.pending.pop_front()?;
        let size = write_ack(buf, p.ack, &p.blocks[..p.n]);
        Some(Emit { size, wire_len: HEADER_BYTES, channel: Channel::Datagram })
    }

    fn stop(&mut self, _now: Instant) {}

    fn is_done(&self) -> bool {
        self.fin.is_some_and(|(seq, _)| self.cum > seq)
    }

    fn stats(&self) -> AgentStats {
        let mss = u64::from(self.mss);
        let delivered = match self.fin {
            Some((seq, len)) if self.cum > seq => (seq - self.first_data.min(seq)) * mss + u64::from(len),
            _ => self.cum.saturating_sub(self.first_data).saturating_mul(mss),
        };
        AgentStats { delivered, ..AgentStats::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prng::Xoshiro256;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Decides whether a packet is lost before the bottleneck: `(to_receiver, seq or ack, now_ns)`.
    type DropFn = Box<dyn FnMut(bool, u64, u64) -> bool>;

    /// A packet in flight: (arrival ns, tie-break, towards the receiver, bytes).
    type Event = Reverse<(u64, u64, bool, Vec<u8>)>;

    /// A one-flow dumbbell: a one-way delay each way and, on the data direction, a bottleneck
    /// of `rate_mbps` with a DropTail queue of `queue_cap` packets (the one in service apart).
    struct Net {
        tx: TcpSender,
        rx: TcpReceiver,
        now_ns: u64,
        events: BinaryHeap<Event>,
        next_id: u64,
        delay_ns: u64,
        rate_mbps: f64,
        queue_cap: usize,
        departures: VecDeque<u64>,
        busy_until: u64,
        drop: DropFn,
        queue_drops: u64,
        /// (time ns, cwnd, in recovery) after every ACK the sender handles.
        trace: Vec<(u64, f64, bool)>,
        /// (time ns, cwnd, rto) at every retransmission timeout.
        timeouts: Vec<(u64, f64, Duration)>,
        buf: Vec<u8>,
    }

    impl Net {
        fn new(cfg: TcpConfig, rate_mbps: f64, one_way_ms: u64, queue_cap: usize) -> Net {
            Net {
                rx: TcpReceiver::new(&cfg),
                tx: TcpSender::new(cfg),
                now_ns: 0,
                events: BinaryHeap::new(),
                next_id: 0,
                delay_ns: one_way_ms * 1_000_000,
                rate_mbps,
                queue_cap,
                departures: VecDeque::new(),
                busy_until: 0,
                drop: Box::new(|_, _, _| false),
                queue_drops: 0,
                trace: Vec::new(),
                timeouts: Vec::new(),
                buf: vec![0; 65_536],
            }
        }

        fn with_drop(mut self, drop: impl FnMut(bool, u64, u64) -> bool + 'static) -> Net {
            self.drop = Box::new(drop);
            self
        }

        fn now(&self) -> Instant {
            Instant::from_micros(self.now_ns / 1000)
        }

        fn push(&mut self, at: u64, to_receiver: bool, bytes: Vec<u8>) {
            self.next_id += 1;
            self.events.push(Reverse((at, self.next_id, to_receiver, bytes)));
        }

        fn flush(&mut self) {
            let now = self.now();
            while let Some(e) = self.tx.poll_transmit(now, &mut self.buf) {
                assert_eq!(e.channel, Channel::Datagram);
                let bytes = self.buf[..e.size].to_vec();
                let Some(Segment::Data { seq, .. }) = parse(&bytes) else { panic!("sender sent a non-data segment") };
                if (self.drop)(true, seq, self.now_ns) {
                    continue;
                }
                while self.departures.front().is_some_and(|&d| d <= self.now_ns) {
                    self.departures.pop_front();
                }
                if self.departures.len() > self.queue_cap {
                    self.queue_drops += 1;
                    continue;
                }
                let start = self.now_ns.max(self.busy_until);
                let dep = start + (f64::from(e.wire_len) * 8.0 * 1000.0 / self.rate_mbps) as u64;
                self.busy_until = dep;
                self.departures.push_back(dep);
                self.push(dep + self.delay_ns, true, bytes);
            }
            while let Some(e) = self.rx.poll_transmit(now, &mut self.buf) {
                assert_eq!(e.wire_len, HEADER_BYTES);
                let bytes = self.buf[..e.size].to_vec();
                let Some(Segment::Ack { ack, .. }) = parse(&bytes) else { panic!("receiver sent a non-ACK") };
                if (self.drop)(false, ack, self.now_ns) {
                    continue;
                }
                self.push(self.now_ns + self.delay_ns, false, bytes);
            }
        }

        fn run_until(&mut self, end_ns: u64) {
            loop {
                self.flush();
                let ev = self.events.peek().map(|r| r.0 .0);
                let tmo = self.tx.poll_timeout().map(|t| t.as_micros() * 1000);
                let next = match (ev, tmo) {
                    (Some(a), Some(b)) => a.min(b),
                    (a, b) => match a.or(b) {
                        Some(t) => t,
                        None => break,
                    },
                };
                if next > end_ns {
                    break;
                }
                self.now_ns = next;
                if ev == Some(next) {
                    let Reverse((_, _, to_receiver, bytes)) = self.events.pop().unwrap();
                    if to_receiver {
                        self.rx.handle_packet(self.now(), Channel::Datagram, &bytes);
                    } else {
                        self.tx.handle_packet(self.now(), Channel::Datagram, &bytes);
                        self.trace.push((self.now_ns, self.tx.cwnd(), self.tx.in_recovery()));
                    }
                } else {
                    let before = self.tx.timeouts();
                    self.tx.handle_timeout(self.now());
                    if self.tx.timeouts() > before {
                        self.timeouts.push((self.now_ns, self.tx.cwnd(), self.tx.rto()));
                    }
                }
            }
            self.now_ns = self.now_ns.max(end_ns);
        }
    }

    const S: u64 = 1_000_000_000;

    fn drop_first_transmissions(seqs: &'static [u64]) -> impl FnMut(bool, u64, u64) -> bool {
        let mut done = BTreeSet::new();
        move |data, seq, _| data && seqs.contains(&seq) && done.insert(seq)
    }

    /// 100 Mb/s, 10 ms each way, a 64-segment window: window-limited, no queue loss.
    fn window_limited() -> TcpConfig {
        TcpConfig { window_pkts: 64, ..TcpConfig::default() }
    }

    #[test]
    fn slow_start_doubles_cwnd_each_rtt() {
        let mut net = Net::new(TcpConfig::default(), 1000.0, 50, 100_000);
        assert_eq!(net.tx.cwnd(), 2.0);
        for k in 0..10u32 {
            net.run_until(u64::from(k) * S / 10 + S / 20);
            assert_eq!(net.tx.cwnd(), f64::from(2u32 << k), "cwnd after {k} RTTs");
        }
        assert_eq!(net.tx.stats().retransmitted, 0);
        assert_eq!(net.queue_drops, 0);
        let rtt = net.tx.stats().rtt_us;
        assert!((100_000.0..101_000.0).contains(&rtt), "srtt {rtt} µs");
    }

    #[test]
    fn three_dupacks_trigger_one_fast_retransmit_and_halve_cwnd() {
        let mut net = Net::new(window_limited(), 100.0, 10, 1000).with_drop(drop_first_transmissions(&[2000]));
        net.run_until(S / 2);
        assert_eq!(net.tx.cwnd(), 64.0, "window-limited before the loss");
        assert!(net.tx.cumulative_ack() < 2000);
        net.run_until(3 * S);
        assert_eq!(net.tx.fast_retransmits(), 1);
        assert_eq!(net.tx.timeouts(), 0);
        assert_eq!(net.tx.stats().retransmitted, 1);
        assert_eq!(net.tx.stats().loss_events, 1);
        assert_eq!(net.tx.ssthresh(), 32.0);
        let first = net.trace.iter().find(|t| t.2).expect("recovery entered");
        assert_eq!(first.1, 32.0, "cwnd halved on entering recovery");
        // Recovery took about one RTT, then congestion avoidance regrew the window.
        let last = net.trace.iter().rev().find(|t| t.2).unwrap();
        assert!(last.0 - first.0 < 30_000_000, "recovery lasted {} ns", last.0 - first.0);
        assert!(net.tx.cwnd() > 32.0);
        assert!(net.rx.cumulative_ack() >= net.tx.cumulative_ack());
        assert!(net.rx.cumulative_ack() > 5000);
    }

    #[test]
    fn sack_recovers_several_losses_in_one_window_without_timeout() {
        let mut net =
            Net::new(window_limited(), 100.0, 10, 1000).with_drop(drop_first_transmissions(&[2000, 2010, 2020, 2041]));
        net.run_until(3 * S);
        assert_eq!(net.tx.fast_retransmits(), 1, "one halving for one window of losses");
        assert_eq!(net.tx.timeouts(), 0);
        assert_eq!(net.tx.stats().retransmitted, 4, "each hole resent once, nothing else");
        assert_eq!(net.tx.ssthresh(), 32.0);
        let first = net.trace.iter().position(|t| t.2).unwrap();
        let last = net.trace.iter().rposition(|t| t.2).unwrap();
        assert!(net.trace[first..=last].iter().all(|t| t.1 == 32.0 && t.2), "cwnd held through recovery");
        assert!(net.trace[last].0 - net.trace[first].0 < 30_000_000);
        assert!(net.rx.cumulative_ack() >= net.tx.cumulative_ack());
    }

    #[test]
    fn a_lost_retransmission_is_resent_without_timeout() {
        // Segment 2000 is dropped twice: its first retransmission is found lost once the new
        // data sent after it is SACKed. The advertised window leaves room for that new data
        // (with a window-limited flow nothing new could follow it, and only the RTO helps).
        let mut count = 0;
        let drop = move |data: bool, seq: u64, _| {
            if data && seq == 2000 && count < 2 {
                count += 1;
                return true;
            }
            false
        };
        let cfg = TcpConfig { window_pkts: 200, initial_ssthresh: 64.0, ..TcpConfig::default() };
        let mut net = Net::new(cfg, 100.0, 10, 1000).with_drop(drop);
        net.run_until(3 * S);
        assert_eq!(net.tx.timeouts(), 0);
        assert_eq!(net.tx.fast_retransmits(), 1);
        assert_eq!(net.tx.stats().retransmitted, 2);
        assert!(net.rx.cumulative_ack() >= net.tx.cumulative_ack());
        assert!(net.rx.cumulative_ack() > 5000);
    }

    #[test]
    fn timeout_resets_cwnd_to_one_and_backs_off() {
        // Everything, both ways, is lost from 1 s to 3 s.
        let blackout = |_: bool, _: u64, t: u64| (S..3 * S).contains(&t);
        let mut net = Net::new(window_limited(), 100.0, 10, 1000).with_drop(blackout);
        net.run_until(8 * S);
        let t = &net.timeouts;
        assert!(t.len() >= 3, "timeouts {t:?}");
        assert!(t.iter().all(|x| x.1 == 1.0), "cwnd is 1 after every timeout");
        let (g1, g2) = (t[1].0 - t[0].0, t[2].0 - t[1].0);
        assert!(g1 >= 200_000_000, "the RTO is at least min_rto");
        assert!(g2.abs_diff(2 * g1) <= 1_000_000, "the RTO doubles: {g1} then {g2} ns");
        assert_eq!(t[1].2, 2 * t[0].2);
        assert_eq!(net.tx.fast_retransmits(), 0, "no spurious fast retransmit after go-back-N");
        assert!(t.last().unwrap().0 > 3 * S, "the flow waited out the blackout");
        assert!(net.tx.rto() < Duration::from_secs(1), "backoff cleared by new ACKs");
        assert!(net.tx.cwnd() > 32.0, "slow start then avoidance regrew the window");
        assert!(net.rx.cumulative_ack() >= net.tx.cumulative_ack());
        assert!(net.rx.cumulative_ack() > 12_000, "{}", net.rx.cumulative_ack());
    }

    #[test]
    fn finite_transfer_is_fully_delivered_under_random_loss() {
        for (seed, profile) in (1..=6).flat_map(|k| [(k, TcpConfig::default()), (k, TcpConfig::ns2_226())]) {
            let bytes = 3_000_000 + 123 * seed;
            let cfg = TcpConfig { bytes: Some(bytes), window_pkts: 200, ..profile };
            let mut rng = Xoshiro256::seed_from_u64(seed);
            let mut net =
                Net::new(cfg, 20.0, 20, 50).with_drop(move |data, _, _| rng.chance(if data { 0.02 } else { 0.01 }));
            assert!(!net.rx.is_done() && !net.tx.is_done());
            net.run_until(300 * S);
            assert!(net.rx.is_done(), "seed {seed}: receiver done");
            assert!(net.tx.is_done(), "seed {seed}: sender done");
            assert_eq!(net.rx.stats().delivered, bytes, "seed {seed}");
            assert!(net.tx.stats().retransmitted > 0 && net.tx.stats().loss_events > 0);
            assert_eq!(net.tx.poll_timeout(), None, "nothing outstanding");
            let before = net.tx.stats().packets_sent;
            net.flush();
            assert_eq!(net.tx.stats().packets_sent, before, "nothing past the end");
        }
    }

    /// Hands the sender an ACK and returns what it sends then: (segment, wire bytes, flags).
    fn ack_and_poll(tx: &mut TcpSender, now: Instant, ack: u64, blocks: &[(u64, u64)]) -> Vec<(u64, u32, u8)> {
        let mut b = vec![0; 64];
        let n = write_ack(&mut b, ack, blocks);
        tx.handle_packet(now, Channel::Datagram, &b[..n]);
        poll_all(tx, now)
    }

    fn poll_all(tx: &mut TcpSender, now: Instant) -> Vec<(u64, u32, u8)> {
        let mut buf = vec![0; 1500];
        let mut out = Vec::new();
        while let Some(e) = tx.poll_transmit(now, &mut buf) {
            match parse(&buf[..e.size]) {
                Some(Segment::Data { seq, .. }) => out.push((seq, e.wire_len, buf[1])),
                other => panic!("{other:?}"),
            }
        }
        out
    }

    fn ms(n: u64) -> Instant {
        Instant::from_micros(n * 1000)
    }

    /// Four segments out, the first lost: the ACKs of the next three.
    fn lose_first_of_four(cfg: TcpConfig) -> (TcpSender, Vec<Vec<u64>>) {
        let mut tx = TcpSender::new(TcpConfig { initial_cwnd: 4.0, window_pkts: 100, ..cfg });
        assert_eq!(poll_all(&mut tx, ms(0)).iter().map(|s| s.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
        let sent =
            (2..=4).map(|k| ack_and_poll(&mut tx, ms(100), 0, &[(1, k)]).iter().map(|s| s.0).collect()).collect();
        (tx, sent)
    }

    #[test]
    fn limited_transmit_sends_new_data_on_the_first_and_second_duplicate_ack() {
        let (tx, sent) = lose_first_of_four(TcpConfig { limited_transmit: true, ..TcpConfig::default() });
        assert_eq!(sent, [vec![4], vec![5], vec![0]], "one new segment per duplicate, then the fast retransmit");
        assert_eq!(tx.fast_retransmits(), 1);
        let (_, sent) = lose_first_of_four(TcpConfig::default());
        // Without it the duplicates send nothing; recovery then sends the hole and, the pipe
        // (one segment out) below the halved cwnd, a new one.
        assert_eq!(sent, [vec![], vec![], vec![0, 4]]);
    }

    #[test]
    fn limited_transmit_stays_within_the_advertised_window() {
        let cfg = TcpConfig { limited_transmit: true, initial_cwnd: 4.0, window_pkts: 4, ..TcpConfig::default() };
        let mut tx = TcpSender::new(cfg);
        assert_eq!(poll_all(&mut tx, ms(0)).len(), 4);
        assert!(ack_and_poll(&mut tx, ms(100), 0, &[(1, 2)]).is_empty());
    }

    #[test]
    fn integer_reductions_halve_to_whole_segments() {
        for (integer, want) in [(true, 3.0), (false, 3.5)] {
            let mut tx =
                TcpSender::new(TcpConfig { integer_reductions: integer, initial_cwnd: 7.0, ..TcpConfig::default() });
            assert_eq!(poll_all(&mut tx, ms(0)).len(), 7);
            for k in 2..=4 {
                ack_and_poll(&mut tx, ms(100), 0, &[(1, k)]);
            }
            assert!(tx.in_recovery());
            assert_eq!((tx.ssthresh(), tx.cwnd()), (want, want), "integer reductions {integer}: half of 7");
            // A timeout with 7 segments in flight: half of the flight.
            let mut tx =
                TcpSender::new(TcpConfig { integer_reductions: integer, initial_cwnd: 7.0, ..TcpConfig::default() });
            poll_all(&mut tx, ms(0));
            tx.handle_timeout(ms(3000));
            assert_eq!((tx.ssthresh(), tx.cwnd()), (want.max(2.0), 1.0));
        }
    }

    #[test]
    fn the_syn_delays_the_first_data_by_one_rtt() {
        let mut tx = TcpSender::new(TcpConfig::ns2_226());
        assert_eq!(poll_all(&mut tx, ms(0)), [(0, HEADER_BYTES, FLAG_SYN)], "a 40-byte SYN alone");
        assert_eq!(tx.cwnd(), 1.0);
        let data = ack_and_poll(&mut tx, ms(100), 1, &[]);
        assert_eq!(data, [(1, 1500, 0), (2, 1500, 0)], "its ACK opens the window to initial_cwnd");
        assert_eq!(tx.cwnd(), 2.0);
        // End to end, 50 ms each way: the first data arrives after 150 ms instead of 50.
        let first_arrival = |cfg: TcpConfig| {
            let mut net = Net::new(cfg, 100.0, 50, 1000);
            (1..).map(|t| t * S / 1000).find(|&t| {
                net.run_until(t);
                net.rx.stats().delivered > 0
            })
        };
        let with_syn = first_arrival(TcpConfig { syn: true, ..TcpConfig::default() }).unwrap();
        let without = first_arrival(TcpConfig::default()).unwrap();
        assert_eq!(without, 51 * S / 1000, "serialisation at 100 Mb/s rounds up to the next ms");
        assert_eq!(with_syn - without, S / 10, "one RTT later");
    }

    #[test]
    fn the_initial_rto_is_six_seconds_in_the_ns2_226_profile() {
        let mut tx = TcpSender::new(TcpConfig::ns2_226());
        poll_all(&mut tx, ms(0));
        assert_eq!(tx.poll_timeout(), Some(ms(6000)));
        tx.handle_timeout(ms(6000));
        assert_eq!(poll_all(&mut tx, ms(6000)), [(0, HEADER_BYTES, FLAG_SYN)], "the SYN again");
        assert_eq!(tx.poll_timeout(), Some(ms(18_000)), "then 12 s");
        let mut tx = TcpSender::new(TcpConfig::default());
        poll_all(&mut tx, ms(0));
        assert_eq!(tx.poll_timeout(), Some(ms(3000)));
    }

    #[test]
    fn the_rto_floor_is_one_second_in_the_ns2_226_profile() {
        let mut tx = TcpSender::new(TcpConfig::ns2_226());
        poll_all(&mut tx, ms(0));
        assert_eq!(ack_and_poll(&mut tx, ms(50), 1, &[]).len(), 2);
        assert_eq!(tx.rto(), Duration::from_secs(1), "srtt + 4 rttvar = 150 ms, raised to the floor");
        assert_eq!(tx.poll_timeout(), Some(ms(1050)));
        let mut tx = TcpSender::new(TcpConfig::default());
        poll_all(&mut tx, ms(0));
        ack_and_poll(&mut tx, ms(50), 1, &[]);
        assert_eq!(tx.rto(), Duration::from_millis(200));
    }

    #[test]
    fn the_rto_backs_off_to_64_seconds_in_the_ns2_226_profile() {
        let mut tx = TcpSender::new(TcpConfig::ns2_226());
        poll_all(&mut tx, ms(0));
        let mut now = ms(0);
        let mut gaps = Vec::new();
        for _ in 0..6 {
            let due = tx.poll_timeout().unwrap();
            gaps.push((due - now).as_secs());
            now = due;
            tx.handle_timeout(now);
            poll_all(&mut tx, now);
        }
        assert_eq!(gaps, [6, 12, 24, 48, 64, 64]);
    }

    #[test]
    fn a_10_ms_tick_counts_rtt_samples_in_whole_ticks() {
        let tick = |phase_us: u64| TcpConfig {
            rtt_tick: Some(Duration::from_millis(10)),
            tick_phase: Duration::from_micros(phase_us),
            min_rto: Duration::from_millis(1),
            ..TcpConfig::default()
        };
        // One sample of 105 ms: ten tick boundaries (srtt 100 ms, rttvar 50 ms, RTO 300 ms),
        // or eleven when the clock's phase puts a boundary in the first 5 ms.
        for (phase_us, rto_ms) in [(0, 300), (6000, 330)] {
            let mut tx = TcpSender::new(tick(phase_us));
            poll_all(&mut tx, ms(0));
            ack_and_poll(&mut tx, ms(105), 1, &[]);
            assert_eq!(tx.rto(), Duration::from_millis(rto_ms), "phase {phase_us} µs");
        }
        let mut tx = TcpSender::new(TcpConfig { min_rto: Duration::from_millis(1), ..TcpConfig::default() });
        poll_all(&mut tx, ms(0));
        ack_and_poll(&mut tx, ms(105), 1, &[]);
        assert_eq!(tx.rto(), Duration::from_millis(315), "µs timing: 105 + 4 × 52.5 ms");
        // A sample within one tick counts one tick: the RTO is 3 ticks, not 3 ms.
        let mut tx = TcpSender::new(tick(0));
        poll_all(&mut tx, ms(0));
        ack_and_poll(&mut tx, ms(1), 1, &[]);
        assert_eq!(tx.rto(), Duration::from_millis(30));
    }

    #[test]
    fn a_10_ms_tick_keeps_the_rto_three_ticks_above_a_steady_rtt() {
        // NS-2's rttvar, 4 × rttvar in whole ticks, stops decaying at 3 (0.75 tick): with a
        // steady 100 ms RTT the RTO settles at 130 ms, where µs timing gives about 100 ms.
        let cfg = TcpConfig { window_pkts: 64, min_rto: Duration::from_millis(1), ..TcpConfig::default() };
        let tick = TcpConfig { rtt_tick: Some(Duration::from_millis(10)), ..cfg.clone() };
        let mut net = Net::new(tick, 1e6, 50, 100_000);
        net.run_until(3 * S);
        assert_eq!(net.tx.rto(), Duration::from_millis(130));
        assert_eq!(net.tx.stats().rtt_us, 100_000.0);
        let mut net = Net::new(cfg, 1e6, 50, 100_000);
        net.run_until(3 * S);
        assert!(net.tx.rto() < Duration::from_millis(102), "{:?}", net.tx.rto());
    }

    #[test]
    fn a_syn_flow_counts_only_data_as_delivered() {
        let cfg = TcpConfig { bytes: Some(3000), ..TcpConfig::ns2_226() };
        let mut net = Net::new(cfg, 100.0, 10, 100);
        net.run_until(S);
        assert!(net.rx.is_done() && net.tx.is_done());
        assert_eq!(net.rx.stats().delivered, 3000);
        assert_eq!(net.rx.segments_received(), 4, "the SYN and three data segments");
    }

    #[test]
    fn profiles_are_found_by_name() {
        assert_eq!(TcpConfig::profile("default"), Some(TcpConfig::default()));
        assert_eq!(TcpConfig::profile("ns2-2.26"), Some(TcpConfig::ns2_226()));
        assert_eq!(TcpConfig::profile("ns2-2.35"), None);
        assert!(PROFILES.iter().all(|p| TcpConfig::profile(p).is_some()));
    }

    #[test]
    fn reno_sawtooth_fills_a_bdp_queue_on_a_10_mbps_100_ms_path() {
        // One flow, 10 Mb/s, 100 ms RTT, queue = BDP = 10e6 × 0.1 / 12 000 ≈ 84 packets.
        let cfg = TcpConfig::default();
        let mss = u64::from(cfg.mss);
        let mut net = Net::new(cfg, 10.0, 50, 84);
        net.run_until(20 * S);
        let (d20, to20, fr20) = (net.rx.stats().delivered, net.tx.timeouts(), net.tx.fast_retransmits());
        net.run_until(200 * S);
        let delivered = net.rx.stats().delivered;
        let util = |bytes: u64, secs: f64| (bytes / mss * 1500 * 8) as f64 / (10e6 * secs);
        let (u_all, u_steady) = (util(delivered, 200.0), util(delivered - d20, 180.0));
        println!(
            "utilisation {u_all:.4} over 200 s, {u_steady:.4} over 20–200 s; fast retransmits {}, timeouts {}",
            net.tx.fast_retransmits(),
            net.tx.timeouts()
        );
        assert!((0.70..=1.0).contains(&u_all), "utilisation {u_all}");
        assert!((0.70..=1.0).contains(&u_steady), "steady utilisation {u_steady}");
        assert_eq!(net.tx.timeouts(), to20, "no timeout in steady state");
        let halvings = net.tx.fast_retransmits() - fr20;
        assert!(halvings >= 5, "{halvings} halvings in 180 s");
        // The sawtooth: every recovery halves cwnd, which then climbs back linearly.
        let steady: Vec<_> = net.trace.iter().filter(|t| t.0 >= 20 * S).collect();
        let mut drops = 0;
        for w in steady.windows(2) {
            if w[1].1 < w[0].1 {
                drops += 1;
                assert!((w[1].1 - w[0].1 / 2.0).abs() < 1.0, "a decrease is a halving: {} → {}", w[0].1, w[1].1);
            }
        }
        assert_eq!(drops, halvings, "cwnd only ever falls by halving");
        let peak = steady.iter().map(|t| t.1).fold(0.0, f64::max);
        let trough = steady.iter().map(|t| t.1).fold(f64::MAX, f64::min);
        println!("cwnd between {trough:.1} and {peak:.1}");
        assert!(peak > 150.0 && peak < 190.0, "peak cwnd {peak} ≈ BDP + queue");
        assert!(trough > 70.0, "trough {trough} ≈ half the peak");
    }

    #[test]
    fn a_16_000_packet_window_keeps_a_1_gbps_100_ms_path_busy() {
        // 1 Gb/s, 100 ms RTT, queue = BDP ≈ 8 333 packets: the slow-start overshoot loses
        // thousands of packets in one window, which SACK recovery must repair in O(log n) each.
        let started = std::time::Instant::now();
        let mut net = Net::new(TcpConfig::default(), 1000.0, 50, 8_333);
        net.run_until(30 * S);
        let util = (net.rx.stats().delivered / 1460 * 1500 * 8) as f64 / (1e9 * 30.0);
        println!(
            "1 Gb/s: utilisation {util:.4} over 30 s, cwnd {:.0}, fast retransmits {}, timeouts {}, {} packets in {:?}",
            net.tx.cwnd(),
            net.tx.fast_retransmits(),
            net.tx.timeouts(),
            net.tx.stats().packets_sent,
            started.elapsed()
        );
        assert!(net.queue_drops > 1000, "the overshoot filled the queue");
        assert!(util > 0.7, "utilisation {util}");
        assert!(net.tx.cwnd() > 8_000.0);
    }

    #[test]
    fn receiver_reports_the_most_recent_sack_block_first() {
        let mut rx = TcpReceiver::new(&TcpConfig::default());
        let mut buf = vec![0; 1500];
        let mut ack_after = |rx: &mut TcpReceiver, seq: u64| {
            let n = write_data(&mut buf, seq, 1460, 0);
            let data = buf[..n].to_vec();
            rx.handle_packet(Instant::ZERO, Channel::Datagram, &data);
            let e = rx.poll_transmit(Instant::ZERO, &mut buf).unwrap();
            assert!(rx.poll_transmit(Instant::ZERO, &mut buf).is_none(), "one ACK per segment");
            match parse(&buf[..e.size]) {
                Some(Segment::Ack { ack, blocks, n }) => (ack, blocks[..n].to_vec()),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(ack_after(&mut rx, 0), (1, vec![]));
        assert_eq!(ack_after(&mut rx, 2), (1, vec![(2, 3)]));
        assert_eq!(ack_after(&mut rx, 4), (1, vec![(4, 5), (2, 3)]));
        assert_eq!(ack_after(&mut rx, 6), (1, vec![(6, 7), (4, 5), (2, 3)]));
        assert_eq!(ack_after(&mut rx, 8), (1, vec![(8, 9), (6, 7), (4, 5)]));
        assert_eq!(ack_after(&mut rx, 3), (1, vec![(2, 5), (8, 9), (6, 7)]));
        assert_eq!(ack_after(&mut rx, 1), (5, vec![(8, 9), (6, 7)]));
        assert_eq!(ack_after(&mut rx, 1), (5, vec![(8, 9), (6, 7)]), "a duplicate is ACKed too");
        assert_eq!(rx.stats().delivered, 5 * 1460);
        assert!(!rx.is_done());
    }

    #[test]
    fn malformed_bytes_do_not_panic() {
        let cfg = TcpConfig::default();
        let mut tx = TcpSender::new(cfg.clone());
        let mut rx = TcpReceiver::new(&cfg);
        let mut buf = vec![0; 65_536];
        let now = Instant::from_micros(1);
        let sent = std::iter::from_fn(|| tx.poll_transmit(now, &mut buf)).count();
        assert_eq!(sent, 2);
        let mut crafted: Vec<Vec<u8>> = vec![vec![], vec![1], vec![2], vec![2, 255], vec![0; 40], vec![9; 100]];
        let mut ack = vec![TYPE_ACK, 3];
        ack.extend_from_slice(&0u64.to_be_bytes());
        for (s, e) in [(u64::MAX, 0), (0, u64::MAX), (u64::MAX - 1, u64::MAX)] {
            ack.extend_from_slice(&s.to_be_bytes());
            ack.extend_from_slice(&e.to_be_bytes());
        }
        crafted.push(ack.clone());
        crafted.push(ack[..ack.len() - 1].to_vec());
        let mut far = vec![TYPE_ACK, 0];
        far.extend_from_slice(&u64::MAX.to_be_bytes());
        crafted.push(far);
        let mut last = vec![0; DATA_HDR];
        write_data(&mut last, u64::MAX, u32::MAX, FLAG_FIN);
        crafted.push(last.clone());
        write_data(&mut last, u64::MAX - 1, u32::MAX, FLAG_FIN);
        crafted.push(last);
        let mut rng = Xoshiro256::seed_from_u64(99);
        for _ in 0..20_000 {
            let len = rng.below(80) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            if !b.is_empty() && rng.chance(0.7) {
                b[0] = if rng.chance(0.5) { TYPE_DATA } else { TYPE_ACK };
                if b.len() > 1 && rng.chance(0.5) {
                    b[1] = rng.below(4) as u8;
                }
            }
            crafted.push(b);
        }
        for b in &crafted {
            tx.handle_packet(now, Channel::Datagram, b);
            rx.handle_packet(now, Channel::Datagram, b);
            rx.handle_packet(now, Channel::Stream, b);
            while rx.poll_transmit(now, &mut buf).is_some() {}
            let _ = (tx.stats(), rx.stats(), tx.is_done(), rx.is_done());
        }
        // What was never sent cannot be acknowledged.
        assert_eq!(tx.cumulative_ack(), 0);
        assert!(tx.cwnd() >= 1.0);
    }
}
