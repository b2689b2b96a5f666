//! The sending side of a connection (UDT4.md §7, §8.6, §8.7, §9.4, §11): the send buffer, the
//! sender's loss list, the flow and congestion windows and the pacer.
//!
//! The connection feeds it the peer's ACKs and NAKs and asks it for the next data packet; the
//! RTT, the controller and the statistics stay with the connection, which calls the
//! controller around these methods.

use crate::config::ConnectionConfig;
use crate::send_buffer::SendBuffer;
use crate::seq::MsgNo;
use crate::stats::Stats;
use crate::wire::{self, Ack, DataHeader};
use transfer::cc::{CcInput, Controller};
use transfer::loss_list::SndLossList;
use transfer::pacing::Pacer;
use transfer::seq::{SeqNo, SEQ_TH};
use transfer::time::Instant;

/// The smallest flow window a peer's ACK may set (§5.3: 4.11's receivers advertise at least 2
/// "to break potential deadlock").
const MIN_FLOW_WINDOW: u32 = 2;

/// A report from the peer that breaks a protocol rule (counted in `Stats::malformed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed;

/// What [`Sender::poll_data`] produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// A data packet of `len` bytes (`payload` of them payload) is in the buffer.
    Data { len: usize, seq: SeqNo, payload: usize, retransmission: bool },
    /// The message `[first, last)` expired before delivery: ask the receiver to drop it (§5.8).
    MsgDrop { msg: MsgNo, first: SeqNo, last: SeqNo },
}

#[derive(Debug)]
pub(super) struct Sender {
    buf: SendBuffer,
    /// `SndLastAck`: highest ACK number received.
    last_ack: SeqNo,
    /// `SndLastDataAck`: ACK that last released buffer; sequence of `buf`'s first packet.
    last_data_ack: SeqNo,
    /// `SndCurrSeqNo`: largest sequence number sent.
    curr_seq: SeqNo,
    flow_window: u32,
    max_window: u32,
    loss: SndLossList,
    pacer: Pacer,
    cwnd: f64,
    delivery_rate: u32,
    bandwidth: u32,
    /// The sender has left the send schedule (UDT4.md §7 step 2): its slot came while it had
    /// nothing it could send. Only a data-releasing ACK, a NAK, new data or EXP puts it back;
    /// a light ACK that opens the window does not.
    left_schedule: bool,
}

impl Sender {
    /// 4.11's initial state (§7, §12.1): the first packet will be `isn`; the peer's flight
    /// flag size bounds the flow window. A peer's absurd window (2^31, 0xFFFFFFFF) is cut to
    /// the largest one sequence numbers can order (`SEQ_TH`): beyond it a window and twice it
    /// (the loss list's span) would not fit the 31-bit space.
    pub(super) fn new(config: &ConnectionConfig, isn: SeqNo, peer_ffs: u32, payload: usize, now: Instant) -> Sender {
        let window = peer_ffs.clamp(2, SEQ_TH);
        Sender {
            buf: SendBuffer::new(config.snd_buf_pkts as usize, payload),
            last_ack: isn,
            last_data_ack: isn,
            curr_seq: isn.prev(),
            flow_window: window,
            max_window: window,
            loss: SndLossList::new(window.saturating_mul(2)),
            pacer: Pacer::new(now, 1.0, config.pacing_burst),
            cwnd: 16.0,
            delivery_rate: 16,
            bandwidth: 1,
            left_schedule: false,
        }
    }

    /// The sender's part of what the controller is told.
    pub(super) fn fill_cc_input(&self, input: &mut CcInput) {
        input.snd_curr_seq = self.curr_seq;
        input.delivery_rate = self.delivery_rate;
        input.bandwidth = self.bandwidth;
        input.max_window = self.max_window;
    }

    /// Takes `P`, the freeze and `W_cc` from the controller (§12.6).
    pub(super) fn pace(&mut self, cc: &Controller, min_period_us: f64) {
        self.cwnd = cc.pace(&mut self.pacer, min_period_us);
    }

    pub(super) fn fill_stats(&self, s: &mut Stats) {
        s.flow_window = self.flow_window;
        s.cwnd = self.cwnd;
        s.period_us = self.pacer.period();
        s.delivery_rate = self.delivery_rate;
        s.bandwidth = self.bandwidth;
        s.snd_buffered_pkts = self.buf.len() as u32;
        s.snd_loss_len = self.loss.len();
    }

    // ---------------------------------------------------------------- application side

    /// Bytes a STREAM `send` can take now.
    pub(super) fn free_bytes(&self) -> usize {
        self.buf.free_bytes()
    }

    /// Whether a message of `len` bytes fits now.
    pub(super) fn fits(&self, len: usize) -> bool {
        self.buf.packets_for(len) <= self.buf.free_packets()
    }

    /// Unacknowledged or unsent packets.
    pub(super) fn buffered(&self) -> usize {
        self.buf.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Whether packets were sent that the peer has not acknowledged.
    pub(super) fn in_flight(&self) -> bool {
        self.curr_seq.next() != self.last_ack
    }

    /// Buffers one message (the caller checked that it fits). A sender that had left its
    /// schedule (nothing it could send when its slot came) takes it up again at `now`: idle
    /// time is no credit. One with packets waiting keeps its schedule and the catch-up it owes,
    /// as 4.11 keeps a scheduled socket's place and `m_ullTimeDiff` on `send()` (UDT4.md §7
    /// step 3).
    pub(super) fn push(&mut self, now: Instant, data: &[u8], in_order: bool, expiry: Option<Instant>) {
        self.note_stall(now);
        self.buf.push_message(data, in_order, expiry);
        self.rejoin(now);
    }

    // ---------------------------------------------------------------- input

    /// A light ACK (§8.6 step 1): only moves the ACK point and shrinks the flow window. It
    /// does not bring back a sender that left its schedule, as 4.11's does not: such a
    /// sender waits, its window open, for the next full ACK (§7 step 2).
    pub(super) fn on_light_ack(&mut self, now: Instant, a: SeqNo) {
        self.note_stall(now);
        if !a.is_before(self.last_ack) && !a.is_after(self.curr_seq.next()) {
            let adv = self.last_ack.offset_to(a).max(0) as u32;
            self.flow_window = self.flow_window.saturating_sub(adv);
            self.last_ack = a;
        }
    }

    /// Whether the sender has something it may send now, pacing aside (§7 steps 1–2).
    fn has_sendable(&self) -> bool {
        let unsent = self.last_data_ack.offset_to(self.curr_seq.next()) < self.buf.len() as i32;
        let window_open = self.window() >= self.last_ack.len_to(self.curr_seq.next());
        !self.loss.is_empty() || (unsent && window_open)
    }

    /// Called before an event changes what the sender may send: a sender with nothing it
    /// could send whose slot has come has left the schedule, as 4.11's `packData` takes the
    /// socket off its send list when a pass at its scheduled time finds nothing (§7 step 2).
    fn note_stall(&mut self, now: Instant) {
        if !self.has_sendable() && self.pacer.next_time() <= now {
            self.left_schedule = true;
        }
    }

    /// A data-releasing ACK, a NAK, new data or EXP puts a sender that left its schedule
    /// back on it at `now`: 4.11 inserts the socket to send at once with `m_ullTimeDiff`
    /// zeroed, so it sends one packet at once and the next a period later, whatever time it
    /// spent off the schedule (UDT4.md §7 steps 2–3). Kept across a window stall, the
    /// catch-up let a sender at the edge of its window send faster than the ACKs came back;
    /// brought back by light ACKs, it sent at the link's pace where 4.11 waits for the next
    /// full ACK (issue 40).
    fn rejoin(&mut self, now: Instant) {
        if std::mem::take(&mut self.left_schedule) {
            self.pacer.resume(now);
        }
    }

    /// A full or medium ACK (§8.6 steps 3–9). `Ok(true)` when it released buffered packets:
    /// then the connection folds the ACK's RTT in and tells the controller.
    ///
    /// Every field of the peer's ACK enters the sender here, held to what a real receiver can
    /// send (UDT4.md §13.5): an ACK number past what was sent is refused; the available buffer
    /// is held to `[2, SEQ_TH]` (4.11's receivers never send less than 2, which keeps a zero
    /// window from holding the sender forever); a rate or capacity that is not positive is
    /// ignored. The RTT field is held to `transfer::rtt::MAX_SAMPLE` where it is folded in.
    pub(super) fn on_ack(&mut self, now: Instant, ack: &Ack) -> Result<bool, Malformed> {
        let a = ack.ack();
        if a.is_after(self.curr_seq.next()) {
            // 4.11 breaks the connection here; a forged or corrupt ACK must not kill ours.
            return Err(Malformed);
        }
        let avail = match *ack {
            Ack::Medium { avail, .. } | Ack::Full { avail, .. } => avail.clamp(MIN_FLOW_WINDOW, SEQ_TH),
            Ack::Light { .. } => return Ok(false),
        };
        self.note_stall(now);
        let mut opened = false;
        if !a.is_before(self.last_ack) {
            opened = self.last_ack.add(self.flow_window).offset_to(a.add(avail)) > 0;
            self.flow_window = avail;
            self.last_ack = a;
        }
        let released = self.last_data_ack.offset_to(a);
        if released <= 0 {
            // A duplicate: 4.11 stops before it reschedules the socket (§8.6 step 4). A window
            // update (§9.5) moves the window's edge: a sender that stopped there goes on.
            if opened {
                self.rejoin(now);
            }
            return Ok(false);
        }
        self.rejoin(now);
        self.buf.release(released as usize);
        self.last_data_ack = a;
        self.loss.remove_up_to(a.prev());
        if let Ack::Full { rate, capacity, .. } = *ack {
            let (rate, capacity) = (rate as i32, capacity as i32);
            if rate > 0 {
                self.delivery_rate = ((7 * self.delivery_rate as u64 + rate as u64) >> 3) as u32;
            }
            if capacity > 0 {
                self.bandwidth = ((7 * self.bandwidth as u64 + capacity as u64) >> 3) as u32;
            }
        }
        Ok(true)
    }

    /// A NAK (§8.7): queues the reported numbers for retransmission. Returns how many were
    /// newly lost. Refused when empty or when it reports anything not yet sent (§5.4). The
    /// connection then reloads the controller and calls [`Sender::hurry`].
    pub(super) fn on_nak(&mut self, ranges: &[(SeqNo, SeqNo)]) -> Result<u32, Malformed> {
        if ranges.is_empty() || ranges.iter().any(|&(_, last)| last.is_after(self.curr_seq)) {
            return Err(Malformed);
        }
        let mut lost = 0;
        for &(first, last) in ranges {
            if last.is_before(self.last_ack) {
                continue;
            }
            let first = if first.is_before(self.last_ack) { self.last_ack } else { first };
            lost += self.loss.insert(first, last);
        }
        Ok(lost)
    }

    /// After a NAK (§8.7 step 3): the retransmissions go out in the next slot of the schedule
    /// at the period the controller just set (see [`Pacer::hurry`]).
    pub(super) fn hurry(&mut self, now: Instant) {
        self.left_schedule = false;
        self.pacer.hurry(now);
    }

    /// The EXP timer fired (§9.4). With data outstanding, everything unacknowledged is lost
    /// (unless the loss list already has work) and the schedule restarts: returns the count
    /// newly lost. `None` when nothing is buffered (the connection sends a keep-alive).
    pub(super) fn on_exp(&mut self, now: Instant) -> Option<u32> {
        if self.buf.is_empty() {
            return None;
        }
        let mut lost = 0;
        if self.curr_seq.next() != self.last_ack && self.loss.is_empty() {
            lost = self.loss.insert(self.last_ack, self.curr_seq);
        }
        self.left_schedule = false;
        self.pacer.restart(now);
        Some(lost)
    }

    /// A congestion warning (§5.5): a transient slow-down until the controller's next reload.
    pub(super) fn on_congestion_warning(&mut self) {
        self.pacer.set_period((self.pacer.period() * 1.125).ceil());
    }

    // ---------------------------------------------------------------- output

    fn window(&self) -> u32 {
        (self.flow_window as f64).min(self.cwnd.floor()).max(0.0) as u32
    }

    /// When the next data packet may leave, if one is ready to go (§7).
    pub(super) fn next_data_time(&self) -> Option<Instant> {
        if self.left_schedule || !self.has_sendable() {
            return None;
        }
        Some(self.pacer.next_time())
    }

    /// The sender's loop body (§7): a retransmission first, else new data within the window,
    /// written into `buf` with time stamp `ts` for socket `dst`. The caller checked that
    /// [`next_data_time`](Self::next_data_time) has come. A retransmission pass skips stale
    /// loss entries instead of sending nothing.
    pub(super) fn poll_data(&mut self, now: Instant, ts: u32, dst: u32, buf: &mut [u8]) -> Option<Output> {
        // 1. Retransmissions first (§7 step 1).
        while let Some(seq) = self.loss.pop_first() {
            let off = self.last_data_ack.offset_to(seq);
            if off < 0 {
                continue;
            }
            let Some(p) = self.buf.get(off as usize) else { continue };
            if p.expiry.is_some_and(|e| e <= now) {
                // DGRAM message whose TTL expired: ask the receiver to drop it (§5.8).
                let (_, last) = self.buf.message_span(off as usize).expect("stored");
                let last_seq = self.last_data_ack.add(last as u32);
                let msg = MsgNo::new(p.msg_word);
                while let Some(s) = self.loss.first() {
                    if s.is_after(last_seq) {
                        break;
                    }
                    self.loss.pop_first();
                }
                if last_seq.is_after(self.curr_seq) {
                    self.curr_seq = last_seq;
                }
                return Some(Output::MsgDrop { msg, first: seq, last: last_seq.next() });
            }
            let len = write_data(buf, seq, p.msg_word, ts, dst, p.payload);
            let payload = p.payload.len();
            self.pacer.on_sent(now, false);
            return Some(Output::Data { len, seq, payload, retransmission: true });
        }

        // 2. New data if the window allows.
        let seq = self.curr_seq.next();
        let off = self.last_data_ack.offset_to(seq);
        if off < 0 || self.window() < self.last_ack.len_to(seq) {
            return None;
        }
        let p = self.buf.get(off as usize)?;
        let len = write_data(buf, seq, p.msg_word, ts, dst, p.payload);
        let payload = p.payload.len();
        self.curr_seq = seq;
        // Packet pairs: 16n+1 follows 16n immediately (§7 step 3, §10.2).
        self.pacer.on_sent(now, seq.get() & 0xF == 0);
        Some(Output::Data { len, seq, payload, retransmission: false })
    }
}

fn write_data(buf: &mut [u8], seq: SeqNo, msg_word: u32, ts: u32, dst: u32, payload: &[u8]) -> usize {
    let h = DataHeader::from_msg_word(seq, msg_word, ts, dst);
    h.emit(buf);
    let n = wire::field::header::LEN + payload.len();
    buf[wire::field::header::LEN..n].copy_from_slice(payload);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    /// A sender with a 10 µs period, a catch-up of 16 and room for 64 packets in flight.
    fn sender(now: Instant) -> Sender {
        let config = ConnectionConfig { pacing_burst: 16, ..ConnectionConfig::default() };
        let mut s = Sender::new(&config, SeqNo::new(1), 1000, 1000, now);
        s.pacer.set_period(10.0);
        s.cwnd = 64.0;
        s
    }

    /// Packets the sender lets go at `now`, back to back.
    fn drain(s: &mut Sender, now: Instant) -> usize {
        let mut buf = [0u8; 1100];
        let mut n = 0;
        while s.next_data_time().is_some_and(|due| due <= now) && s.poll_data(now, 0, 7, &mut buf).is_some() {
            n += 1;
        }
        n
    }

    /// A sender with room for four packets in flight that sent them at 0, 10, 20 and 30 µs;
    /// the fifth is due at 40 µs.
    fn window_full_at_30_us() -> Sender {
        let mut s = sender(t(0));
        s.cwnd = 4.0;
        s.push(t(0), &[0; 20_000], true, None);
        for at in [0, 10, 20, 30] {
            assert_eq!(drain(&mut s, t(at)), 1);
        }
        s
    }

    #[test]
    fn a_push_while_packets_wait_keeps_the_catch_up_a_late_sender_owes() {
        let mut s = sender(t(0));
        s.push(t(0), &[0; 10_000], true, None);
        assert_eq!(drain(&mut s, t(0)), 1);
        // The driver wakes 100 µs late; the application adds data first (an ACK freed room).
        s.push(t(100), &[0; 1000], true, None);
        assert_eq!(drain(&mut s, t(100)), 10, "the packet due at 10 µs and the nine after it, back to back");
    }

    fn full_ack(a: SeqNo) -> Ack {
        Ack::Full {
            ack_no: crate::seq::AckNo::new(1),
            ack: a,
            rtt: 1000,
            rtt_var: 0,
            avail: 1000,
            rate: 0,
            capacity: 0,
        }
    }

    #[test]
    fn time_spent_waiting_for_the_window_is_no_credit() {
        // Four packets fill the window (0, 10, 20, 30 µs); the fifth was due at 40 µs.
        let mut s = window_full_at_30_us();
        assert_eq!(s.next_data_time(), None, "the window is full");
        // The ACK for all four comes 100 µs late: one packet leaves at once, the next a period
        // later, as 4.11 resumes a sender that left its schedule (no catch-up of 6 periods).
        assert_eq!(s.on_ack(t(140), &full_ack(SeqNo::new(5))), Ok(true));
        assert_eq!(drain(&mut s, t(140)), 1);
        assert_eq!(s.next_data_time(), Some(t(150)));
    }

    #[test]
    fn an_ack_to_a_sender_still_on_schedule_keeps_its_schedule() {
        let mut s = sender(t(0));
        s.cwnd = 4.0;
        s.push(t(0), &[0; 20_000], true, None);
        assert_eq!(drain(&mut s, t(0)), 1);
        assert_eq!(drain(&mut s, t(10)), 1);
        // Not stalled (room for two more): a late driver still catches up what it owes.
        assert_eq!(s.on_ack(t(35), &full_ack(SeqNo::new(3))), Ok(true));
        assert_eq!(drain(&mut s, t(35)), 2, "the packets due at 20 and 30 µs");
    }

    #[test]
    fn a_push_after_the_sender_ran_dry_is_no_credit() {
        let mut s = sender(t(0));
        s.push(t(0), &[0; 1000], true, None);
        assert_eq!(drain(&mut s, t(0)), 1);
        assert_eq!(s.next_data_time(), None, "nothing left to send");
        s.push(t(500), &[0; 5000], true, None);
        assert_eq!(drain(&mut s, t(500)), 1, "idle time is no credit");
        assert_eq!(s.next_data_time(), Some(t(510)));
    }

    #[test]
    fn a_light_ack_does_not_bring_back_a_sender_that_left_its_schedule() {
        let mut s = window_full_at_30_us();
        // The fifth packet's slot (40 µs) comes with the window full: off the schedule. A light
        // ACK at 60 µs opens the window, but 4.11 sends nothing until the next full ACK.
        s.on_light_ack(t(60), SeqNo::new(3));
        assert_eq!(s.next_data_time(), None, "the window is open, the sender waits for a full ACK");
        // A full ACK repeating what the light ACK said releases buffer: back at once, one
        // packet, the next a period later.
        assert_eq!(s.on_ack(t(95), &full_ack(SeqNo::new(3))), Ok(true));
        assert_eq!(drain(&mut s, t(95)), 1);
        assert_eq!(s.next_data_time(), Some(t(105)));
    }

    #[test]
    fn a_light_ack_before_the_slot_keeps_the_sender_on_its_schedule() {
        let mut s = window_full_at_30_us();
        // The window reopens at 35 µs, before the fifth packet's slot: it leaves on time.
        s.on_light_ack(t(35), SeqNo::new(3));
        assert_eq!(s.next_data_time(), Some(t(40)));
    }

    #[test]
    fn a_duplicate_ack_does_not_bring_back_a_sender_that_left_its_schedule() {
        let mut s = window_full_at_30_us();
        assert_eq!(s.on_ack(t(45), &full_ack(SeqNo::new(3))), Ok(true));
        assert_eq!(drain(&mut s, t(45)), 1, "back on the schedule: one at once");
        assert_eq!(drain(&mut s, t(55)), 1, "and one a period later, which fills the window");
        // Full again; the slot passes; a light ACK and then a full ACK releasing nothing new.
        s.on_light_ack(t(80), SeqNo::new(5));
        assert_eq!(s.on_ack(t(90), &full_ack(SeqNo::new(3))), Ok(false));
        assert_eq!(s.next_data_time(), None, "a duplicate stops before the reschedule (§8.6 step 4)");
        assert_eq!(s.on_ack(t(99), &full_ack(SeqNo::new(5))), Ok(true));
        assert_eq!(s.next_data_time(), Some(t(99)));
    }
}
