//! The receiving side of a connection (UDT4.md §8, §10): the receive buffer, loss detection
//! and the receiver's loss list, ACK generation with its ACK history, and the measurements a
//! full ACK reports.
//!
//! The connection feeds it data, ACK2s and message drop requests and asks it for ACKs and
//! NAKs; it queues what comes back.

use super::IDLE_CHECK;
use crate::ack_window::AckWindow;
use crate::config::ConnectionConfig;
use crate::measurement::{ArrivalSpeed, LinkCapacity};
use crate::recv_buffer::RecvBuffer;
use crate::seq::{AckNo, MsgNo};
use crate::stats::Stats;
use crate::wire::{Ack, DataHeader};
use transfer::cc::SYN;
use transfer::loss_list::RcvLossList;
use transfer::recv_buffer::Insert;
use transfer::rtt::RttEstimator;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};

/// Light ACK every this many packets (§9.3).
pub const LIGHT_ACK_PACKETS: u32 = 64;
/// The minimum NAK interval (§8.4), as the minimum EXP period.
const MIN_NAK_INTERVAL: Duration = Duration::from_millis(300);

#[derive(Debug)]
pub(super) struct Receiver {
    buf: RecvBuffer,
    /// `RcvCurrSeqNo`: largest sequence number received.
    curr_seq: SeqNo,
    last_ack: SeqNo,
    last_ack_ack: SeqNo,
    ack_no: AckNo,
    last_ack_time: Option<Instant>,
    next_ack_time: Instant,
    /// When the ACK timer was last evaluated: at the last packet from the peer or idle check.
    last_check: Instant,
    pkt_count: u32,
    light_ack_count: u32,
    loss: RcvLossList,
    ack_window: AckWindow,
    arrival: ArrivalSpeed,
    capacity: LinkCapacity,
    next_nak_time: Instant,
    /// The right edge of the window the sender knows: the ACK number plus the available
    /// buffer our last full or medium ACK reported (§11; at first, the whole buffer).
    edge: SeqNo,
    /// A window update is due (§9.5): the sender is near the edge it knows, and an ACK now
    /// would open the window or make data readable that the application can then take.
    update: bool,
}

impl Receiver {
    /// 4.11's initial state (§8): the first packet expected is `peer_isn`.
    pub(super) fn new(config: &ConnectionConfig, peer_isn: SeqNo, payload: usize, now: Instant) -> Receiver {
        Receiver {
            buf: RecvBuffer::new(config.rcv_capacity() as usize, payload, peer_isn),
            curr_seq: peer_isn.prev(),
            last_ack: peer_isn,
            last_ack_ack: peer_isn,
            ack_no: AckNo::new(0),
            last_ack_time: None,
            next_ack_time: now + SYN,
            last_check: now,
            pkt_count: 0,
            light_ack_count: 1,
            loss: RcvLossList::new(config.flight_flag_size),
            ack_window: AckWindow::new(),
            arrival: ArrivalSpeed::new(now),
            capacity: LinkCapacity::new(),
            next_nak_time: now + MIN_NAK_INTERVAL,
            edge: peer_isn.add(config.rcv_capacity().saturating_sub(1)),
            update: false,
        }
    }

    pub(super) fn fill_stats(&self, s: &mut Stats) {
        s.rcv_loss_len = self.loss.len();
        s.rcv_avail = self.buf.available() as u32;
    }

    // ---------------------------------------------------------------- application side

    /// STREAM receive: copies acknowledged bytes, returns the count (0 = nothing now).
    pub(super) fn read(&mut self, out: &mut [u8]) -> usize {
        let n = self.buf.read(out);
        self.check_window(false);
        n
    }

    /// DGRAM receive of one whole message.
    pub(super) fn read_message(&mut self, out: &mut [u8]) -> Option<usize> {
        let m = self.buf.read_message(out);
        self.check_window(false);
        m
    }

    /// Whether a window update is due (§9.5): the runtime then runs the timers at once.
    pub(super) fn update_due(&self) -> bool {
        self.update
    }

    /// §9.5: marks a window update due when the sender has less than a quarter of the buffer
    /// left before the edge it knows and an ACK now would open the window by at least a
    /// quarter (the application read that much since the edge was reported) or, right after
    /// a data packet, make at least a quarter readable (which the application can then read).
    fn check_window(&mut self, after_data: bool) {
        let quarter = (self.buf.capacity() / 4).max(1) as i32;
        if self.curr_seq.next().offset_to(self.edge) >= quarter {
            return;
        }
        // The edge an ACK would report now: the ACK point plus the free slots, that is the
        // read position plus the buffer, whatever the ACK point is.
        let opens = self.edge.offset_to(self.last_ack.add(self.buf.available() as u32)) >= quarter;
        let readable = self.last_ack.offset_to(self.ack_number()) >= quarter;
        if opens || (after_data && readable) {
            self.update = true;
        }
    }

    /// The ACK number now (§8.3): the first loss, or the next packet expected.
    fn ack_number(&self) -> SeqNo {
        self.loss.first().unwrap_or(self.curr_seq.next())
    }

    pub(super) fn has_readable(&self) -> bool {
        self.buf.has_readable()
    }

    // ---------------------------------------------------------------- input

    /// A data packet (§8.2). Returns the gap it revealed, for an immediate NAK (§8.2 step 4).
    /// `full_payload`: the payload of a full-sized packet (negotiated MSS − 44); a shorter one
    /// makes the next ACK due at once, a longer one is dropped whole, as if lost on the way
    /// (§8.2 step 0): neither stored nor acknowledged nor measured, only counted.
    pub(super) fn on_data(
        &mut self,
        now: Instant,
        h: &DataHeader,
        payload: &[u8],
        full_payload: usize,
        rtt: &RttEstimator,
        stats: &mut Stats,
    ) -> Option<(SeqNo, SeqNo)> {
        if payload.len() > full_payload {
            stats.oversize_drops += 1;
            return None;
        }
        stats.pkts_recv += 1;
        stats.bytes_recv += payload.len() as u64;
        self.arrival.on_data(now);
        match h.seq.get() & 0xF {
            0 => self.capacity.on_probe_first(now),
            1 => self.capacity.on_probe_second(now),
            _ => {}
        }
        self.pkt_count += 1;

        match self.buf.insert(h.seq, h.msg_word(), payload) {
            Insert::Stored => {}
            Insert::Duplicate | Insert::OutOfWindow => {
                stats.pkts_recv_dropped += 1;
                return None;
            }
        }
        stats.bytes_recv_unique += payload.len() as u64;

        let expected = self.curr_seq.next();
        let mut gap = None;
        if h.seq.is_after(expected) {
            let last = h.seq.prev();
            self.loss.append(expected, last);
            stats.pkts_lost_rcv += expected.len_to(last) as u64;
            gap = Some((expected, last));
            // §8.4: every NAK restarts the NAK interval (used by draft mode only).
            self.next_nak_time = now + self.nak_interval(rtt);
        }
        if payload.len() != full_payload {
            self.next_ack_time = now;
        }
        if h.seq.is_after(self.curr_seq) {
            self.curr_seq = h.seq;
        } else if self.loss.remove(h.seq) {
            stats.pkts_recovered += 1;
        }
        self.check_window(true);
        gap
    }

    /// An ACK2 (§8.5): the RTT sample it yields, if it matches a recorded ACK and is positive.
    pub(super) fn on_ack2(&mut self, now: Instant, ack_no: AckNo) -> Option<Duration> {
        let (ack, rtt) = self.ack_window.acknowledge(ack_no, now)?;
        // 4.11 stops here when the RTT sample is not positive (§8.5).
        if rtt.is_zero() {
            return None;
        }
        self.last_ack_ack = self.last_ack_ack.max_seq(ack);
        Some(rtt)
    }

    /// A message drop request (§5.8). `false` when it is malformed: `last` before `first`, or
    /// beyond the buffer.
    pub(super) fn on_msg_drop(&mut self, msg: MsgNo, first: SeqNo, last: SeqNo) -> bool {
        let within = self.curr_seq.offset_to(last) <= self.buf.capacity() as i32;
        if last.is_before(first) || !within {
            return false;
        }
        self.buf.drop_message(msg.get(), first, last);
        self.loss.remove_range(first, last);
        if !first.is_after(self.curr_seq.next()) && last.is_after(self.curr_seq) {
            self.curr_seq = last;
        }
        true
    }

    /// The peer's Shutdown: everything received in order becomes readable (a light ACK can
    /// have let the sender finish before a full ACK moved the delivery point). `false` when
    /// packets the peer sent are still missing, so the stream can never be complete.
    pub(super) fn on_peer_shutdown(&mut self) -> bool {
        self.advance_delivery();
        self.loss.is_empty()
    }

    /// §8.3: when the ACK number — the first hole, or the next expected packet — is new,
    /// everything before it becomes readable and it is the last ACK.
    fn advance_delivery(&mut self) {
        let ack = self.loss.first().unwrap_or(self.curr_seq.next());
        if ack.is_after(self.last_ack) {
            self.buf.acknowledge(ack);
            self.last_ack = ack;
        }
    }

    // ---------------------------------------------------------------- timers

    /// When the ACK timer will next be looked at: at its deadline if a packet arrives then,
    /// otherwise at the idle check (see `timers`).
    pub(super) fn ack_check_time(&self) -> Instant {
        if self.update {
            return Instant::ZERO;
        }
        self.next_ack_time.max(self.last_check + IDLE_CHECK)
    }

    /// A timer ACK left at `now`: the next is due a period after it left, not only after the
    /// arrival that triggered it. 4.11 reads the clock in `checkTimers` right before
    /// `sendCtrl` (§9.2); a driver stamps each datagram with its kernel arrival time and sends
    /// the ACK after the batch, so the two differ by a varying latency, and ACKs a period
    /// apart by arrival left as little as 9.9 ms apart: the sender's rate control, which runs
    /// at most once per SYN (§12.3), skipped the ticks those brought (issue 40).
    pub(super) fn ack_left(&mut self, now: Instant, ack_period: Duration) {
        self.next_ack_time = self.next_ack_time.max(now + ack_period);
    }

    /// §9.2–§9.3: the ACK timer, looked at now (right after a packet from the peer, or at the
    /// idle check). Returns the ACK to send, if any; `ack_period` is the controller's.
    pub(super) fn check_ack_timer(
        &mut self,
        now: Instant,
        after_packet: bool,
        ack_period: Duration,
        rtt: &RttEstimator,
    ) -> Option<Ack> {
        if std::mem::take(&mut self.update) {
            // §9.5: out of turn, at once; the timer keeps its cadence.
            return self.ack(now, false, true, rtt);
        }
        if !after_packet && now < self.last_check + IDLE_CHECK {
            return None;
        }
        self.last_check = now;
        if now >= self.next_ack_time {
            let ack = self.ack(now, false, false, rtt);
            self.next_ack_time = now + ack_period;
            self.pkt_count = 0;
            self.light_ack_count = 1;
            ack
        } else if self.pkt_count >= LIGHT_ACK_PACKETS * self.light_ack_count {
            let ack = self.ack(now, true, false, rtt);
            self.light_ack_count += 1;
            ack
        } else {
            None
        }
    }

    /// §8.3 ACK generation; a window update (§9.5) is sent even when it repeats an ACK
    /// number the sender has confirmed, or repeats it early.
    fn ack(&mut self, now: Instant, light: bool, update: bool, rtt: &RttEstimator) -> Option<Ack> {
        let ack = self.ack_number();
        if ack == self.last_ack_ack && !update {
            return None;
        }
        if light {
            return Some(Ack::Light { ack });
        }
        if ack.is_after(self.last_ack) {
            self.advance_delivery();
        } else if ack == self.last_ack {
            let last = self.last_ack_time.unwrap_or(Instant::ZERO);
            if now - last < rtt.rto() && !update {
                return None;
            }
        } else {
            return None;
        }
        if !self.last_ack.is_after(self.last_ack_ack) && !update {
            return None;
        }
        self.ack_no = self.ack_no.next();
        let avail = (self.buf.available() as u32).max(2);
        self.edge = self.last_ack.add(avail);
        let (rtt, rtt_var) = (rtt.rtt_us(), rtt.var_us());
        // 4.11 tests `> SYN` against a timer that always fires a little late; with exact
        // timers that would alternate full and medium ACKs, so a timer ACK counts as due at SYN.
        let full = self.last_ack_time.is_none_or(|t| now - t >= SYN);
        let a = if full {
            self.last_ack_time = Some(now);
            Ack::Full {
                ack_no: self.ack_no,
                ack: self.last_ack,
                rtt,
                rtt_var,
                avail,
                rate: self.arrival.speed(),
                capacity: self.capacity.capacity(),
            }
        } else {
            Ack::Medium { ack_no: self.ack_no, ack: self.last_ack, rtt, rtt_var, avail }
        };
        self.ack_window.store(self.ack_no, self.last_ack, now);
        Some(a)
    }

    /// The draft's NAK timer is due (§8.4), if anything is lost.
    pub(super) fn nak_check_time(&self) -> Option<Instant> {
        (!self.loss.is_empty()).then_some(self.next_nak_time)
    }

    /// Draft mode only (§8.4): the whole loss list as NAK words (at most `max_words`), when
    /// the NAK interval has passed.
    pub(super) fn check_nak_timer(&mut self, now: Instant, rtt: &RttEstimator, max_words: usize) -> Option<Vec<u32>> {
        if self.loss.is_empty() || now < self.next_nak_time {
            return None;
        }
        let mut words = Vec::new();
        self.loss.encode(max_words, &mut words);
        self.next_nak_time = now + self.nak_interval(rtt);
        (!words.is_empty()).then_some(words)
    }

    /// The NAK interval of §8.4: `RTT + 4·RTTVar + losses / arrival speed`, at least 300 ms.
    fn nak_interval(&self, rtt: &RttEstimator) -> Duration {
        let (losses, speed) = (self.loss.len(), self.arrival.speed());
        let drain = Duration::from_micros(losses as u64 * 1_000_000 / speed.max(1) as u64);
        (rtt.rto() + drain).max(MIN_NAK_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    /// Full-sized packets every 100 µs from `from` to `to` (µs); the first full ACK the timer
    /// gives, with its arrival time.
    fn first_timer_ack(r: &mut Receiver, seq: &mut SeqNo, from: u64, to: u64) -> Option<u64> {
        let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(50));
        let mut stats = Stats::default();
        let payload = [0u8; 1456];
        for at in (from..to).step_by(100) {
            let h = DataHeader::from_msg_word(*seq, 0xE000_0001, 0, 0);
            r.on_data(t(at), &h, &payload, payload.len(), &rtt, &mut stats);
            *seq = seq.next();
            if let Some(Ack::Full { .. }) = r.check_ack_timer(t(at), true, SYN, &rtt) {
                return Some(at);
            }
        }
        None
    }

    /// Full-sized packets `seq..seq + n`, one every 100 µs from `from` (µs), each followed by
    /// the ACK timer's check; the ACKs it gave.
    fn feed(r: &mut Receiver, seq: &mut SeqNo, n: u32, from: u64) -> Vec<Ack> {
        let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(50));
        let mut stats = Stats::default();
        let payload = [0u8; 1456];
        let mut acks = Vec::new();
        for i in 0..n as u64 {
            let h = DataHeader::from_msg_word(*seq, 0xE000_0001, 0, 0);
            r.on_data(t(from + 100 * i), &h, &payload, payload.len(), &rtt, &mut stats);
            *seq = seq.next();
            acks.extend(r.check_ack_timer(t(from + 100 * i), true, SYN, &rtt));
        }
        acks
    }

    #[test]
    fn near_the_window_edge_a_read_that_frees_a_quarter_sends_a_window_update_at_once() {
        // §9.5, a 64-packet buffer: the edge the sender knows is 63 packets on.
        let config = ConnectionConfig { rcv_buf_pkts: 64, flight_flag_size: 64, ..Default::default() };
        let isn = SeqNo::new(1);
        let mut r = Receiver::new(&config, isn, 1456, t(0));
        let mut seq = isn;
        // 47 packets leave the sender 16 from the edge: nothing before the timer (10 ms).
        assert!(feed(&mut r, &mut seq, 47, 100).is_empty());
        // The 48th leaves it 15 from the edge with 48 packets not yet readable: an ACK at once
        // makes them readable, reporting the 15 slots left.
        let acks = feed(&mut r, &mut seq, 1, 4_800);
        let [Ack::Full { ack_no, ack, avail, .. }] = acks[..] else { panic!("one full ACK, got {acks:?}") };
        assert_eq!((ack, avail), (isn.add(48), 15));
        // The sender confirms it; nothing new arrives; the application reads everything.
        assert_eq!(r.on_ack2(t(6_000), ack_no), Some(Duration::from_micros(1_200)));
        let mut out = vec![0u8; 1456 * 64];
        assert_eq!(r.read(&mut out), 1456 * 48);
        assert!(r.update_due(), "the read opened the window by 48 packets");
        assert_eq!(r.ack_check_time(), Instant::ZERO, "the runtime runs the timers at once");
        let rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(50));
        match r.check_ack_timer(t(6_100), false, SYN, &rtt) {
            Some(Ack::Medium { ack, avail, .. }) => assert_eq!((ack, avail), (isn.add(48), 63)),
            other => panic!("a window update repeating the confirmed ACK number, got {other:?}"),
        }
        assert!(!r.update_due());
        assert_eq!(r.check_ack_timer(t(6_200), false, SYN, &rtt), None, "one update per opening");
    }

    #[test]
    fn far_from_the_window_edge_reads_send_no_window_update() {
        let isn = SeqNo::new(1);
        let mut r = Receiver::new(&ConnectionConfig::default(), isn, 1456, t(0));
        let mut seq = isn;
        // Two timer ACKs (at 10 and 20 ms) make 200 packets readable.
        assert_eq!(feed(&mut r, &mut seq, 200, 100).iter().filter(|a| matches!(a, Ack::Full { .. })).count(), 2);
        let mut out = vec![0u8; 1456 * 200];
        assert!(r.read(&mut out) > 0);
        assert!(!r.update_due(), "8192 slots, 200 used: the sender is nowhere near the edge");
    }

    #[test]
    fn the_next_timer_ack_is_due_a_period_after_the_last_one_left() {
        let isn = SeqNo::new(1);
        let mut r = Receiver::new(&ConnectionConfig::default(), isn, 1456, t(0));
        let mut seq = isn;
        assert_eq!(first_timer_ack(&mut r, &mut seq, 100, 12_000), Some(10_000));
        // The driver sent it 300 µs after the arrival that triggered it (the rest of its batch).
        r.ack_left(t(10_300), SYN);
        assert_eq!(
            first_timer_ack(&mut r, &mut seq, 10_100, 22_000),
            Some(20_300),
            "one SYN after the ACK left, not after the arrival that triggered it"
        );
    }
}
