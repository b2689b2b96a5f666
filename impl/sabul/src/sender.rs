//! The SABUL sender (SABUL.md §2, §5, §8, §10), sans-IO.
//!
//! The sender owns the data: it reads the receiver's option block from the control stream,
//! echoes it (§3.4), then paces DATA to `(the control peer's IP, data_port)` — losses first,
//! then new packets within the flow window (§5 steps 4–5) — and reacts to ACK, ERR and SYN
//! (§5.1–§5.4). Rate and window come from a [`CongestionControl`] through the core's
//! [`Controller`]; SABUL's is [`SabulRate`], clocked by the SYN packets.
//!
//! Under [`Profile::FRTP`] the same sender is FRTP's (FRTP.md §4): the 52-byte block names
//! the data-path address DATA goes to and the rate, which the core's [`FixedRate`] turns into
//! one constant inter-packet time for every packet, retransmissions included; a rate above
//! [`SenderConfig::max_rate_bps`] is refused (§2 step 3) and SYN frames are ignored (§3.2).
//!
//! Call order: [`handle_control`](Sender::handle_control) with every chunk the control stream
//! delivers and [`handle_control_closed`](Sender::handle_control_closed) at its end;
//! [`handle_timeout`](Sender::handle_timeout) when [`poll_timeout`](Sender::poll_timeout) is
//! due; drain [`poll_transmit`](Sender::poll_transmit) (control bytes first, then DATA when
//! the pacer allows) and [`poll_event`](Sender::poll_event). The application side is
//! [`send`](Sender::send) and [`finish`](Sender::finish).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use transfer::cc::fixed_rate::FixedRate;
use transfer::cc::{CcInput, Controller, ControllerFactory};
use transfer::loss_list::SndLossList;
use transfer::pacing::Pacer;
use transfer::protocol::Protocol;
use transfer::send_buffer::SendBuffer;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use transfer::transmit::{Source, Transmit};

use crate::cc::SabulRate;
use crate::control_stream::{ControlDecoder, Decoded};
use crate::profile::Profile;
use crate::session::{ControlQueue, Event, SessionError};
use crate::wire::{emit_data, Control, OptionBlock, DEFAULT_PKT_SIZE};

/// EXP: no ACK or ERR for this long with data outstanding (§5.3, §9).
pub const EXP_TIMEOUT: Duration = Duration::from_secs(1);
/// Consecutive EXP events before the sender gives up (§5.5 TC).
pub const EXP_GIVE_UP: u32 = 10;
/// The option block must be complete this long after the accept; a frame this long after its
/// first byte; the drain after the half-close lasts at most this long (§9, §10).
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(1);

/// The sender's settings; defaults are §9's.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// The sender's own packet size: the echo lowers the receiver's to it (§3.4).
    pub pkt_size: u32,
    /// Send buffer, packets (§9: 40 960 000 bytes ≈ 27 900 packets).
    pub send_buf_pkts: usize,
    /// Packets the pacer may send back to back to catch up after a late wake-up.
    pub pacing_burst: u32,
    /// The controller: [`SabulRate`] by default. Unused when the block names a rate (FRTP).
    pub controller: Arc<dyn ControllerFactory>,
    /// SABUL or FRTP (see [`crate::profile`]).
    pub profile: Profile,
    /// The highest rate, bit/s, an FRTP block may ask for (FRTP.md §2 step 3).
    pub max_rate_bps: u64,
}

impl Default for SenderConfig {
    fn default() -> SenderConfig {
        SenderConfig {
            pkt_size: DEFAULT_PKT_SIZE,
            send_buf_pkts: 27_904,
            pacing_burst: 16,
            controller: Arc::new(SabulRate::default()),
            profile: Profile::SABUL,
            max_rate_bps: u64::MAX,
        }
    }
}

/// Counters of one sender session, for the `--stats` lines (docs/cli.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// DATA datagrams sent, retransmissions included.
    pub pkts_sent: u64,
    /// DATA datagrams that were retransmissions (after an ERR or EXP).
    pub retrans: u64,
    /// ACK frames received.
    pub acks_recv: u64,
    /// ERR frames received.
    pub errs_recv: u64,
    /// SYN frames received (FRTP: counted and ignored).
    pub syns_recv: u64,
    /// Packets the ERRs listed, each time it listed them.
    pub losses: u64,
    /// EXP events: the ACK timer ran out and everything unacknowledged was queued again (§5.5).
    pub exp_events: u64,
    /// UDP datagrams that reached the sender's data socket (SABUL sends it none).
    pub datagrams_ignored: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    AwaitOptions,
    Transferring,
    /// Half-closed; reading until the receiver's FIN, at most until the deadline (§10.1).
    Draining(Instant),
    Closed,
}

/// A SABUL sender for one receiver. See the module docs for the call order.
#[derive(Debug)]
pub struct Sender {
    config: SenderConfig,
    peer: SocketAddr,
    state: State,
    decoder: ControlDecoder,
    frame_started: Option<Instant>,
    accepted: Instant,
    control: ControlQueue,
    events: VecDeque<Event>,
    data_dest: Option<SocketAddr>,
    options: Option<OptionBlock>,
    buffer: Option<SendBuffer<()>>,
    pending: Vec<u8>,
    finishing: bool,
    loss: SndLossList,
    next_seq: SeqNo,
    last_ack: SeqNo,
    controller: Controller,
    pacer: Pacer,
    exp_deadline: Instant,
    exp_count: u32,
    /// The last poll found nothing to send: the pacer's schedule restarts when something
    /// comes (idle time is no credit: §5 step 6 waits `t0 + I` from each iteration).
    idle: bool,
    /// The block named a rate (FRTP.md §4): each departure is due at its IPT, a timer for
    /// [`poll_timer`](Self::poll_timer), not paced data a runtime may batch.
    fixed_ipt: bool,
    max_window: u32,
    loss_scratch: Vec<(SeqNo, SeqNo)>,
    /// Application bytes taken by [`send`](Sender::send).
    bytes_taken: u64,
    /// Packets acknowledged so far (sequence numbers wrap; this does not).
    acked_pkts: u64,
    stats: SenderStats,
}

impl Sender {
    /// A sender whose listener accepted the control connection from `peer` at `now` (§2).
    pub fn new(config: SenderConfig, peer: SocketAddr, now: Instant) -> Sender {
        let controller = Controller::new(&*config.controller);
        let period = controller.get().pacing_period_us();
        let burst = config.pacing_burst;
        let decoder = ControlDecoder::sender_for(&config.profile);
        Sender {
            config,
            peer,
            state: State::AwaitOptions,
            decoder,
            frame_started: None,
            accepted: now,
            control: ControlQueue::default(),
            events: VecDeque::new(),
            data_dest: None,
            options: None,
            buffer: None,
            pending: Vec::new(),
            finishing: false,
            loss: SndLossList::new(1 << 30),
            next_seq: SeqNo::ZERO,
            last_ack: SeqNo::ZERO,
            controller,
            pacer: Pacer::new(now, period, burst),
            exp_deadline: now + EXP_TIMEOUT,
            exp_count: 0,
            idle: false,
            fixed_ipt: false,
            max_window: 0,
            loss_scratch: Vec::new(),
            bytes_taken: 0,
            acked_pkts: 0,
            stats: SenderStats::default(),
        }
    }

    /// The session's counters so far.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Application bytes acknowledged by the receiver (only the last packet may be short,
    /// §3.1, so this is exact once everything is acknowledged).
    pub fn bytes_acked(&self) -> u64 {
        let payload = self.options.as_ref().map_or(0, |o| u64::from(o.payload_size));
        (self.acked_pkts * payload).min(self.bytes_taken)
    }

    /// Whether the sender can take more application bytes now (the session is set up and the
    /// send buffer has room for a packet).
    pub fn has_room(&self) -> bool {
        self.state == State::Transferring
            && !self.finishing
            && self.buffer.as_ref().is_some_and(|b| b.free_packets() > 0 && self.pending.len() < b.payload_size())
    }

    /// Where DATA goes once the session is set up: the control peer's address with the
    /// block's data port, or FRTP's data address (FRTP.md §2 step 5).
    pub fn data_destination(&self) -> Option<SocketAddr> {
        self.data_dest
    }

    /// The echoed option block, once the session is set up.
    pub fn options(&self) -> Option<&OptionBlock> {
        self.options.as_ref()
    }

    /// The controller, for its rate and window.
    pub fn controller(&self) -> &Controller {
        &self.controller
    }

    /// `NextSeq` (§5): packets sent so far, retransmissions not counted.
    pub fn next_seq(&self) -> SeqNo {
        self.next_seq
    }

    /// Queues application bytes; returns how many were taken (fewer when the buffer is full).
    ///
    /// The bytes are one stream: they leave in full packets, and only the stream's last
    /// packet may be short (§3.1). A tail shorter than a packet waits for more bytes or for
    /// [`finish`](Self::finish). Before the echo every byte is held, since the packet size
    /// is not known yet (§3.4).
    pub fn send(&mut self, data: &[u8]) -> usize {
        if self.finishing || matches!(self.state, State::Draining(_) | State::Closed) {
            return 0;
        }
        let Some(b) = &self.buffer else {
            self.pending.extend_from_slice(data);
            self.bytes_taken += data.len() as u64;
            return data.len();
        };
        // Room for the free packets, less what waits already, plus a tail.
        let payload = b.payload_size();
        let room = (b.free_packets() * payload + payload - 1).saturating_sub(self.pending.len());
        let take = data.len().min(room);
        self.bytes_taken += take as u64;
        let mut rest = &data[..take];
        if !self.pending.is_empty() {
            // Complete what waits to whole packets first, so that the stream stays in order.
            let need = ((payload - self.pending.len() % payload) % payload).min(rest.len());
            self.pending.extend_from_slice(&rest[..need]);
            rest = &rest[need..];
            self.flush_pending();
            if !self.pending.is_empty() {
                self.pending.extend_from_slice(rest);
                return take;
            }
        }
        // Whole packets go into the buffer straight from the caller's bytes; only a tail waits.
        let pushed = self.push_data(rest, false);
        self.pending.extend_from_slice(&rest[pushed..]);
        take
    }

    /// Cuts `data` into the packets that fit: full packets only, unless `last` (then the
    /// short packet at its end too). Returns the bytes taken.
    fn push_data(&mut self, data: &[u8], last: bool) -> usize {
        let Some(b) = &mut self.buffer else { return 0 };
        let payload = b.payload_size();
        let n = if last && b.packets_for(data.len()) <= b.free_packets() {
            data.len()
        } else {
            (data.len() / payload).min(b.free_packets()) * payload
        };
        if n > 0 && b.push(&data[..n], |_, _| ()) {
            n
        } else {
            0
        }
    }

    /// Moves what waits (bytes queued before the echo, a tail, what a full buffer left) into
    /// the buffer, as far as it takes them.
    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            let mut pending = std::mem::take(&mut self.pending);
            let taken = self.push_data(&pending, self.finishing);
            pending.drain(..taken);
            self.pending = pending;
        }
    }

    /// The application has no more data: once everything is acknowledged, the sender
    /// half-closes (§10.1).
    pub fn finish(&mut self) {
        self.finishing = true;
        self.flush_pending();
    }

    /// The next event for the application ([`Event`]), oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn abort(&mut self, e: SessionError) {
        if self.state != State::Closed {
            self.state = State::Closed;
            self.events.push_back(Event::Aborted(e));
        }
    }

    fn input(&self, now: Instant) -> CcInput {
        let o = self.options.as_ref();
        CcInput {
            now,
            mss: o.map_or(DEFAULT_PKT_SIZE, |o| o.pkt_size) + 28,
            rtt_us: 0,
            delivery_rate: 0,
            bandwidth: 0,
            snd_curr_seq: self.next_seq.prev(),
            max_window: self.max_window,
        }
    }

    /// Bytes from the control stream (§3.2, §3.4).
    pub fn handle_control(&mut self, now: Instant, mut bytes: &[u8]) {
        while !bytes.is_empty() && matches!(self.state, State::AwaitOptions | State::Transferring | State::Draining(_))
        {
            let draining = matches!(self.state, State::Draining(_));
            match self.decoder.decode(&mut bytes) {
                Ok(Some(Decoded::Options(o))) => self.on_options(now, o),
                Ok(Some(Decoded::Frame(_))) if draining => {}
                Ok(Some(Decoded::Frame(f))) => self.on_frame(now, f),
                Ok(None) => {}
                // §10.1 step 2: during the drain a framing error is only logged.
                Err(_) if draining => return,
                Err(e) => return self.abort(e.into()),
            }
        }
        self.frame_started = self.decoder.is_mid_frame().then(|| self.frame_started.unwrap_or(now));
    }

    /// The control stream ended: a FIN (`reset: false`) or a reset / read error (§10).
    pub fn handle_control_closed(&mut self, _now: Instant, reset: bool) {
        match self.state {
            State::Draining(_) => {
                self.state = State::Closed;
                self.events.push_back(Event::Finished);
            }
            State::Closed => {}
            _ => self.abort(SessionError::PeerClosed { reset, ack: self.last_ack, next_seq: self.next_seq }),
        }
    }

    fn on_options(&mut self, now: Instant, block: OptionBlock) {
        let mut data_ip = self.peer.ip();
        if let Some(c) = block.circuit {
            if c.rate_bps > self.config.max_rate_bps {
                let max_bps = self.config.max_rate_bps;
                return self.abort(SessionError::RateRefused { rate_bps: c.rate_bps, max_bps });
            }
            if !c.data_ip.is_unspecified() {
                data_ip = IpAddr::V4(c.data_ip);
            }
        }
        let echo = block.echo(self.config.pkt_size);
        if let Some(c) = echo.circuit {
            self.controller = Controller::new(&FixedRate::new(c.ipt_us(echo.pkt_size)));
            self.fixed_ipt = true;
        }
        self.control.push(|out| echo.emit(out));
        self.decoder.set_max_loss_length(echo.max_loss_length);
        self.data_dest = Some(SocketAddr::new(data_ip, block.data_port as u16));
        self.max_window = echo.recv_flag_size;
        self.buffer = Some(SendBuffer::new(self.config.send_buf_pkts, echo.payload_size as usize));
        self.flush_pending();
        self.options = Some(echo);
        self.state = State::Transferring;
        let input = self.input(now);
        self.controller.on_connect(&input);
        self.controller.pace(&mut self.pacer, 0.0);
        self.pacer.restart(now);
        self.exp_deadline = now + EXP_TIMEOUT;
        self.events.push_back(Event::Connected);
    }

    fn on_frame(&mut self, now: Instant, frame: Control) {
        let input = self.input(now);
        match frame {
            Control::Ack(ack) => {
                if ack.is_after(self.next_seq) {
                    return self.abort(SessionError::AckBeyondSent { ack, next_seq: self.next_seq });
                }
                self.exp_deadline = now + EXP_TIMEOUT;
                self.exp_count = 0;
                self.stats.acks_recv += 1;
                let newly = self.last_ack.offset_to(ack);
                if newly > 0 {
                    self.acked_pkts += newly as u64;
                    if let Some(b) = &mut self.buffer {
                        b.release(newly as usize);
                    }
                    self.last_ack = ack;
                    self.loss.remove_up_to(ack.prev());
                    self.controller.on_ack(&input, ack);
                    self.flush_pending();
                }
            }
            Control::Err(list) => {
                // §5.5: validate the whole frame before acting on any of it.
                let ranges = list.ranges();
                if let Some(&(_, last)) = ranges.iter().find(|&&(_, b)| !b.is_before(self.next_seq)) {
                    return self.abort(SessionError::ErrBeyondSent { seq: last, next_seq: self.next_seq });
                }
                self.exp_deadline = now + EXP_TIMEOUT;
                self.exp_count = 0;
                self.stats.errs_recv += 1;
                self.stats.losses += u64::from(list.lost_count());
                self.loss_scratch.clear();
                for &(a, b) in &ranges {
                    if b.is_before(self.last_ack) {
                        continue;
                    }
                    let a = if a.is_before(self.last_ack) { self.last_ack } else { a };
                    self.loss_scratch.push((a, b));
                }
                self.controller.on_loss(&input, &ranges);
                for &(a, b) in &self.loss_scratch {
                    self.loss.insert(a, b);
                }
            }
            // §5.4: the SYN clocks the rate-control event; its attribute is informational.
            // FRTP has no SYN: one that arrives is counted and ignored (FRTP.md §3.2).
            Control::Syn(_) => {
                self.stats.syns_recv += 1;
                if self.config.profile.syn_period.is_some() {
                    self.controller.on_tick(&input)
                }
            }
        }
        self.controller.pace(&mut self.pacer, 0.0);
    }

    fn outstanding(&self) -> bool {
        self.last_ack != self.next_seq || !self.loss.is_empty()
    }

    fn has_new_data(&self) -> bool {
        self.buffer.as_ref().is_some_and(|b| (self.last_ack.offset_to(self.next_seq) as usize) < b.len())
    }

    /// Whether a DATA packet may leave now by the window (§5 step 5) — not by the pacer.
    fn can_send(&self) -> bool {
        if self.state != State::Transferring {
            return false;
        }
        if !self.loss.is_empty() {
            return true;
        }
        let window = (self.controller.get().window() as u32).min(self.max_window.max(1)).max(1);
        self.has_new_data() && (self.last_ack.offset_to(self.next_seq) as u32) < window
    }

    /// When [`handle_timeout`](Self::handle_timeout) has something to do: the next packet's
    /// departure, the EXP deadline, the set-up, frame and teardown deadlines; `None` once closed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.due(true)
    }

    /// [`poll_timeout`](Self::poll_timeout) without the next packet's departure: the deadlines
    /// alone, which a runtime that lets paced data out in batches never sleeps past. Under a
    /// fixed rate (FRTP's circuit) the departure stays in: every packet leaves one IPT after
    /// the previous one (FRTP.md §4), never in a batch.
    pub fn poll_timer(&self) -> Option<Instant> {
        self.due(self.fixed_ipt)
    }

    /// The earliest due time, with the next data departure or without it.
    fn due(&self, with_data: bool) -> Option<Instant> {
        let mut t = None;
        let mut at = |x: Instant| t = Some(t.map_or(x, |y: Instant| y.min(x)));
        match self.state {
            State::AwaitOptions => at(self.accepted + CONTROL_TIMEOUT),
            State::Transferring => {
                // Due at once when [`finish`](Self::finish) came with nothing outstanding:
                // no feedback may ever come to wake the sender (FRTP sends no SYN).
                if self.half_close_due() {
                    at(self.accepted);
                }
                if with_data && self.can_send() {
                    at(self.pacer.next_time());
                }
                if self.outstanding() {
                    at(self.exp_deadline);
                }
            }
            State::Draining(deadline) => at(deadline),
            State::Closed => {}
        }
        if let Some(s) = self.frame_started {
            at(s + CONTROL_TIMEOUT);
        }
        t
    }

    /// Runs what is due at `now`: sends nothing itself (that is
    /// [`poll_transmit`](Protocol::poll_transmit)), but fires EXP and the set-up, frame and
    /// teardown deadlines.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.frame_started.is_some_and(|s| now >= s + CONTROL_TIMEOUT) && self.state != State::Closed {
            if let State::Draining(_) = self.state {
                self.state = State::Closed;
                self.events.push_back(Event::Finished);
            } else {
                self.abort(SessionError::Timeout("the rest of a control frame"));
            }
            return;
        }
        self.maybe_half_close(now);
        match self.state {
            State::AwaitOptions if now >= self.accepted + CONTROL_TIMEOUT => {
                self.abort(SessionError::Timeout("the option block"))
            }
            State::Transferring if self.outstanding() && now >= self.exp_deadline => {
                // §5.3: every unacknowledged packet goes back into the loss list; no rate change.
                self.exp_count += 1;
                self.stats.exp_events += 1;
                if self.exp_count >= EXP_GIVE_UP {
                    return self.abort(SessionError::ExpGaveUp { last_ack: self.last_ack, next_seq: self.next_seq });
                }
                if self.last_ack != self.next_seq {
                    self.loss.insert(self.last_ack, self.next_seq.prev());
                }
                let input = self.input(now);
                self.controller.on_timeout(&input);
                self.exp_deadline = now + EXP_TIMEOUT;
            }
            State::Draining(deadline) if now >= deadline => {
                self.state = State::Closed;
                self.events.push_back(Event::Finished);
            }
            _ => {}
        }
    }

    /// Everything is acknowledged and the application finished: half-close (§10.1 step 1).
    fn half_close_due(&self) -> bool {
        self.state == State::Transferring
            && self.finishing
            && self.pending.is_empty()
            && !self.outstanding()
            && !self.has_new_data()
            && self.control.is_empty()
    }

    fn maybe_half_close(&mut self, now: Instant) {
        if self.half_close_due() {
            self.state = State::Draining(now + CONTROL_TIMEOUT);
            self.events.push_back(Event::ShutdownWrite);
        }
    }

    /// The next output: queued control bytes (the echo) as [`Source::Control`], else a DATA
    /// datagram as [`Source::Data`] when the window and the pacer allow (§5 steps 4–6).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if !self.control.is_empty() {
            let size = self.control.pop_into(buf);
            return Some(Transmit { destination: self.peer, size, source: Source::Control });
        }
        self.maybe_half_close(now);
        if !self.can_send() {
            self.idle = true;
            return None;
        }
        if std::mem::take(&mut self.idle) {
            self.pacer.resume(now);
        }
        if now < self.pacer.next_time() {
            return None;
        }
        let dest = self.data_dest?;
        let buffer = self.buffer.as_ref()?;
        let (seq, retransmission) = loop {
            match self.loss.pop_first() {
                Some(s) if s.is_before(self.last_ack) => continue,
                Some(s) => break (s, true),
                None => break (self.next_seq, false),
            }
        };
        let (payload, _) = buffer.get(self.last_ack.offset_to(seq) as usize)?;
        if buf.len() < 4 + payload.len() {
            return None;
        }
        let size = emit_data(seq, payload, buf);
        if !retransmission {
            self.next_seq = self.next_seq.next();
            if self.last_ack.offset_to(self.next_seq) == 1 {
                self.exp_deadline = now + EXP_TIMEOUT;
            }
        }
        self.stats.pkts_sent += 1;
        self.stats.retrans += u64::from(retransmission);
        let input = self.input(now);
        self.controller.on_sent(&input, seq, retransmission);
        self.pacer.on_sent(now, false);
        // The freeze (§7.4) applies once: after it, the pacer's period alone.
        self.controller.pace(&mut self.pacer, 0.0);
        Some(Transmit { destination: dest, size, source: Source::Data })
    }
}

/// The sender as the runtime drives it: control bytes in, DATA and control bytes out. SABUL
/// sends the sender no datagrams (§1): any that reach its data socket are counted and dropped.
impl Protocol for Sender {
    fn handle_datagram(&mut self, _now: Instant, _from: SocketAddr, _datagram: &[u8]) {
        self.stats.datagrams_ignored += 1;
    }
    fn handle_control(&mut self, now: Instant, bytes: &[u8]) {
        Sender::handle_control(self, now, bytes)
    }
    fn handle_control_closed(&mut self, now: Instant, reset: bool) {
        Sender::handle_control_closed(self, now, reset)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Sender::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Sender::poll_timeout(self)
    }
    fn poll_timer(&self) -> Option<Instant> {
        Sender::poll_timer(self)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        Sender::poll_transmit(self, now, buf)
    }
}
