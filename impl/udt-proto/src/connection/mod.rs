//! One UDT connection (UDT4.md §6–§11), split by mechanism: `handshake` (setup: client,
//! accepted, rendezvous), `sender` (send buffer, loss list, windows, pacing), `receiver`
//! (receive buffer, loss detection, ACK generation, measurements) and `timers` (ACK, NAK,
//! EXP, the controller's tick, handshake resend, linger). This module ties them together:
//! packet dispatch, the control packets waiting to go out, events, and the application side.
//!
//! A `Connection` owns no socket and no clock. The driver (the [`crate::endpoint::Endpoint`],
//! which demultiplexes a UDP port by socket ID) calls, in any order and as often as it likes:
//!
//! * [`Connection::handle_packet`] with every datagram addressed to this connection,
//! * [`Connection::handle_timeout`] when the time of [`Connection::poll_timeout`] is reached
//!   (calling it early is harmless),
//! * [`Connection::poll_transmit`] until it returns `None`, sending each datagram to the peer,
//! * [`Connection::poll_event`] to learn about connection, close and breakage,
//!
//! and the application-side calls [`Connection::send`], [`Connection::send_msg`],
//! [`Connection::recv`], [`Connection::recv_msg`] and [`Connection::close`].
//! Every entry point takes `now`, an [`Instant`] on the driver's clock.
//!
//! Where UDT 4.11 and the draft differ, this follows 4.11 (§14); the deliberate exceptions
//! are listed on [`crate::config::ConnectionConfig`] (`pacing_burst`, `periodic_nak`) and
//! below: malformed NAKs and bogus ACKs from the peer are dropped and counted instead of
//! breaking the connection, and a retransmission pass skips stale loss entries instead of
//! sending nothing.

use std::collections::VecDeque;
use std::net::SocketAddr;

use crate::config::ConnectionConfig;
use crate::seq::{AckNo, MsgNo};
use crate::stats::Stats;
use crate::wire::{self, Ack, Control, Handshake, NakList, Packet, Repr, SocketType};
use transfer::cc::{CcInput, Controller};
use transfer::loss_list::encode_loss;
use transfer::rtt::RttEstimator;
use transfer::seq::SeqNo;
use transfer::time::{micros, Duration, Instant};
use transfer::transmit::{Source, Transmit};

mod handshake;
mod receiver;
mod sender;
mod timers;

use handshake::Handshaking;
use receiver::Receiver;
use sender::{Output, Sender};
use timers::ExpTimer;

pub use handshake::HANDSHAKE_RESEND;
pub use receiver::LIGHT_ACK_PACKETS;
pub use timers::IDLE_CHECK;

const INITIAL_RTT: Duration = Duration::from_millis(100);
const INITIAL_RTT_VAR: Duration = Duration::from_millis(50);

/// Why a connection attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectError {
    /// No answer within the setup timeout (3 s, rendezvous 30 s).
    TimedOut,
    /// The listener answered with request type 1002 (wrong version or socket type, or a full
    /// backlog).
    Rejected,
    /// The response did not echo our initial sequence number (4.11's "security check").
    IsnMismatch,
    /// A rendezvous peer answered with a regular client request (§6.2 rule 3).
    RendezvousRefused,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ConnectError::TimedOut => {
                "connection setup timed out: no UDT peer answered (is the address right and the peer listening?)"
            }
            ConnectError::Rejected => {
                "connection rejected by the peer (socket type or version mismatch, or its backlog is full)"
            }
            ConnectError::IsnMismatch => "peer's handshake response did not echo our initial sequence number",
            ConnectError::RendezvousRefused => "rendezvous peer is a regular client, not in rendezvous mode",
        })
    }
}

/// How many copies of Shutdown `close()` sends, back to back. 4.11 sends one (UDT4.md §5.6),
/// unacknowledged: when it is lost the peer waits out EXP (§9.4) and can only report a
/// silent peer, never a close, although every byte arrived. Independent copies make that
/// `loss³` (1 in 8000 at 5 % loss); a peer treats every copy after the first as a packet for a
/// closed connection (docs/architecture.md, deliberate deviations).
pub const SHUTDOWN_COPIES: usize = 3;

/// Why an established connection ended abnormally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokenReason {
    /// No packet from the peer for 17 EXP periods and more than 5 s (§9.4).
    PeerSilent,
    /// The peer shut down while data was still unacknowledged.
    PeerShutdownWithUnackedData,
    /// The peer shut down while packets it had sent were still missing here.
    PeerClosedWithDataMissing,
    /// `close()` lingered past `UDT_LINGER` with data still unacknowledged.
    LingerExpired,
    /// The peer signalled an error (type 8) with this code.
    PeerError(u32),
}

/// What a connection reports to its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed: data may flow.
    Connected,
    /// The handshake failed, for the reason given.
    ConnectFailed(ConnectError),
    /// The peer sent Shutdown; buffered data can still be read.
    PeerClosed,
    /// `close()` finished: everything was acknowledged (if lingering) and Shutdown sent.
    Closed,
    /// The connection broke (no response, a protocol error, an error signal).
    Broken(BrokenReason),
}

/// How this connection came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Connected to a listener ([`Endpoint::connect`](crate::endpoint::Endpoint::connect)).
    Client,
    /// Accepted by this endpoint's listener.
    Accepted,
    /// Both ends connected to each other
    /// ([`Endpoint::rendezvous`](crate::endpoint::Endpoint::rendezvous)).
    Rendezvous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Connecting,
    Connected,
    /// Closed or broken: nothing more is sent.
    Done,
}

#[derive(Debug, Clone)]
enum CtrlOut {
    Handshake(Handshake),
    KeepAlive,
    Ack(Ack),
    /// Loss words in wire form ([`NakList::encode`]), never empty.
    Nak(Vec<u8>),
    Ack2(AckNo),
    Shutdown,
    MsgDrop {
        msg: MsgNo,
        first: SeqNo,
        last: SeqNo,
    },
}

/// A UDT connection (see the module docs for the call order).
#[derive(Debug)]
pub struct Connection {
    config: ConnectionConfig,
    role: Role,
    state: State,
    local_id: u32,
    peer_id: u32,
    peer: SocketAddr,
    /// When this socket was opened: data time stamps count from here (§3.1).
    start: Instant,
    handshake: Handshaking,
    /// Accepted connections stay silent until the client's first packet (§16 pitfall 8).
    awaiting_peer: bool,
    /// A client's keep-alive that lets such a listener speak, due at this time unless some
    /// other packet for the peer leaves first (see `timers::HELLO_DELAY`).
    hello_at: Option<Instant>,
    mss: u32,
    isn: SeqNo,
    snd: Option<Sender>,
    rcv: Option<Receiver>,
    cc: Controller,
    rtt: RttEstimator,
    exp: ExpTimer,
    close_deadline: Option<Instant>,
    peer_closed: bool,
    ctrl: VecDeque<CtrlOut>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Connection {
    fn new(
        config: ConnectionConfig,
        role: Role,
        local_id: u32,
        isn: SeqNo,
        peer: SocketAddr,
        now: Instant,
        handshake: Handshaking,
    ) -> Connection {
        let cc = Controller::new(&*config.cc);
        Connection {
            mss: config.mss,
            config,
            role,
            state: State::Connecting,
            local_id,
            peer_id: 0,
            peer,
            start: now,
            handshake,
            awaiting_peer: false,
            hello_at: None,
            isn,
            snd: None,
            rcv: None,
            cc,
            rtt: RttEstimator::new(INITIAL_RTT, INITIAL_RTT_VAR),
            exp: ExpTimer::new(now),
            close_deadline: None,
            peer_closed: false,
            ctrl: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    // ---------------------------------------------------------------- accessors

    /// Whether a control packet waits for [`Connection::poll_transmit`] (it leaves before any
    /// data packet).
    pub fn control_queued(&self) -> bool {
        !self.ctrl.is_empty()
    }

    /// How the connection came to be.
    pub fn role(&self) -> Role {
        self.role
    }
    /// This end's socket ID.
    pub fn local_id(&self) -> u32 {
        self.local_id
    }
    /// The peer's socket ID (0 until its handshake arrived).
    pub fn peer_id(&self) -> u32 {
        self.peer_id
    }
    /// The peer's UDP address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
    /// This end's initial sequence number.
    pub fn isn(&self) -> SeqNo {
        self.isn
    }
    /// The negotiated MSS, bytes including IP and UDP headers (the smaller of the two ends').
    pub fn mss(&self) -> u32 {
        self.mss
    }
    /// STREAM or DGRAM, as configured.
    pub fn socket_type(&self) -> SocketType {
        self.config.socket_type
    }
    /// Whether the handshake completed and the connection is not closed or broken.
    pub fn is_connected(&self) -> bool {
        self.state == State::Connected
    }
    /// Whether the handshake is still under way.
    pub fn is_connecting(&self) -> bool {
        self.state == State::Connecting
    }
    /// Closed, broken or failed: the driver may forget it once events are drained.
    pub fn is_done(&self) -> bool {
        self.state == State::Done && self.ctrl.is_empty()
    }
    /// Whether the peer sent Shutdown.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }
    /// Our current handshake: the request while connecting, the response once accepted.
    pub fn handshake(&self) -> &Handshake {
        &self.handshake.hs
    }
    /// The controller's name (`udt411`, `paper`, `fixed:<Mbit/s>`, …).
    pub fn congestion_control(&self) -> &str {
        self.cc.get().name()
    }

    /// Counters and current estimates (like 4.11's `perfmon`).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.rtt_us = self.rtt.rtt_us();
        s.rtt_var_us = self.rtt.var_us();
        if let Some(snd) = &self.snd {
            snd.fill_stats(&mut s);
        }
        if let Some(rcv) = &self.rcv {
            rcv.fill_stats(&mut s);
        }
        s
    }

    /// The next event for the driver ([`Event`]), oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---------------------------------------------------------------- application side

    /// Bytes a STREAM `send` can take now.
    pub fn send_capacity(&self) -> usize {
        match (&self.snd, self.state) {
            (Some(s), State::Connected) if self.close_deadline.is_none() => s.free_bytes(),
            _ => 0,
        }
    }

    /// STREAM send: buffers as much of `data` as fits (one message per call, §3.1) and
    /// returns the count. 0 when the buffer is full or the connection is not open.
    pub fn send(&mut self, now: Instant, data: &[u8]) -> usize {
        let n = data.len().min(self.send_capacity());
        if n == 0 {
            return 0;
        }
        self.push_message(now, &data[..n], false, None);
        n
    }

    /// DGRAM send of one whole message. `ttl`: drop it if not delivered within this time
    /// (`None` = never). Returns false if it does not fit in the send buffer now.
    pub fn send_msg(&mut self, now: Instant, data: &[u8], in_order: bool, ttl: Option<Duration>) -> bool {
        let fits = match &self.snd {
            Some(s) => self.state == State::Connected && s.fits(data.len()),
            None => false,
        };
        if !fits || self.close_deadline.is_some() {
            return false;
        }
        let expiry = ttl.map(|t| now + t);
        self.push_message(now, data, in_order, expiry);
        true
    }

    fn push_message(&mut self, now: Instant, data: &[u8], in_order: bool, expiry: Option<Instant>) {
        let snd = self.snd.as_mut().expect("connected");
        if snd.is_empty() {
            // §9.4: an idle period must not look like a timeout to the first new packet.
            self.exp.touch(now);
        }
        snd.push(now, data, in_order, expiry);
    }

    /// Unacknowledged or unsent packets in the send buffer.
    pub fn send_buffered(&self) -> usize {
        self.snd.as_ref().map_or(0, |s| s.buffered())
    }

    /// STREAM receive: copies acknowledged bytes, returns the count (0 = nothing now).
    pub fn recv(&mut self, buf: &mut [u8]) -> usize {
        self.rcv.as_mut().map_or(0, |r| r.read(buf))
    }

    /// DGRAM receive of one whole message.
    pub fn recv_msg(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.rcv.as_mut().and_then(|r| r.read_message(buf))
    }

    /// Whether the last read made a window update due (UDT4.md §9.5): the runtime should run
    /// the timers now rather than at its next due time.
    pub fn window_update_due(&self) -> bool {
        self.rcv.as_ref().is_some_and(|r| r.update_due())
    }

    /// Whether acknowledged data waits to be read.
    pub fn has_readable(&self) -> bool {
        self.rcv.as_ref().is_some_and(|r| r.has_readable())
    }

    /// True when the peer closed and everything it sent has been read.
    pub fn at_eof(&self) -> bool {
        (self.peer_closed || self.state == State::Done) && !self.has_readable()
    }

    /// Graceful close (§6.3): linger until everything sent is acknowledged (at most
    /// `UDT_LINGER`), then send Shutdown.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            State::Connecting => {
                self.state = State::Done;
                self.events.push_back(Event::Closed);
            }
            State::Connected => {
                if self.close_deadline.is_none() {
                    self.close_deadline = Some(now + self.config.linger);
                }
                self.check_close(now);
            }
            State::Done => {}
        }
    }

    fn check_close(&mut self, now: Instant) {
        let Some(deadline) = self.close_deadline else { return };
        if self.state != State::Connected {
            return;
        }
        let drained = self.snd.as_ref().is_none_or(|s| s.is_empty());
        if drained || self.peer_closed || now >= deadline {
            if !self.peer_closed {
                for _ in 0..SHUTDOWN_COPIES {
                    self.ctrl.push_back(CtrlOut::Shutdown);
                }
            }
            self.state = State::Done;
            if drained || self.peer_closed {
                self.events.push_back(Event::Closed);
            } else {
                self.events.push_back(Event::Broken(BrokenReason::LingerExpired));
            }
        }
    }

    fn set_broken(&mut self, why: BrokenReason) {
        if self.state != State::Done {
            self.state = State::Done;
            self.events.push_back(Event::Broken(why));
        }
    }

    // ---------------------------------------------------------------- input

    /// Feeds one datagram addressed to this connection (already matched to it by socket ID
    /// and peer address). Malformed packets are counted and dropped.
    pub fn handle_packet(&mut self, now: Instant, datagram: &[u8]) {
        let repr = match Packet::new_checked(datagram).and_then(|p| Repr::parse(&p)) {
            Ok(r) => r,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        self.handle_repr(now, &repr);
    }

    /// Feeds an already parsed packet.
    pub fn handle_repr(&mut self, now: Instant, repr: &Repr<'_>) {
        if self.state == State::Done {
            return;
        }
        match *repr {
            Repr::Control { control: Control::Handshake(h), .. } => self.on_handshake(now, &h),
            _ if self.state == State::Connecting => {
                // Rendezvous rule 1: data or keep-alive completes a recorded handshake.
                let completes = matches!(repr, Repr::Data { .. } | Repr::Control { control: Control::KeepAlive, .. });
                if completes && self.complete_rendezvous(now) {
                    self.handle_repr(now, repr);
                }
            }
            _ => {
                self.awaiting_peer = false;
                // §9.4, §13.5: a keep-alive says the peer lives, not that our packets arrived;
                // while some are in flight unacknowledged it leaves the EXP timer running, so
                // that a lost retransmission is sent again however long the peer's keep-alives
                // hold it alive (4.11 restarts the timer on every packet, §14 row 13).
                let keep_alive = matches!(repr, Repr::Control { control: Control::KeepAlive, .. });
                if !(keep_alive && self.snd.as_ref().is_some_and(Sender::in_flight)) {
                    self.exp.reset(now);
                }
                match *repr {
                    Repr::Data { header, payload } => {
                        let full = wire::payload_size(self.mss);
                        if let Some(rcv) = self.rcv.as_mut() {
                            if let Some(gap) = rcv.on_data(now, &header, payload, full, &self.rtt, &mut self.stats) {
                                let mut words = Vec::with_capacity(2);
                                encode_loss([gap], 2, &mut words);
                                self.ctrl.push_back(CtrlOut::Nak(NakList::encode(&words)));
                            }
                        }
                    }
                    Repr::Control { control, .. } => self.on_control(now, &control),
                }
            }
        }
        // 4.11 checks the connection's timers right after every packet from the peer (§9).
        self.run_timers(now, true);
    }

    fn on_control(&mut self, now: Instant, c: &Control<'_>) {
        match *c {
            Control::Ack(ack) => self.on_ack(now, &ack),
            Control::Ack2 { ack_no } => self.on_ack2(now, ack_no),
            Control::Nak(list) => {
                self.stats.naks_recv += 1;
                match list.ranges() {
                    Ok(r) => self.on_nak(now, &r),
                    Err(_) => self.stats.malformed += 1,
                }
            }
            Control::KeepAlive => {}
            // A copy of a Shutdown already seen (SHUTDOWN_COPIES).
            Control::Shutdown if self.peer_closed => {}
            Control::Shutdown if !self.rcv.as_mut().is_none_or(Receiver::on_peer_shutdown) => {
                // The peer gave up on data we never got (its linger ran out, or a forged ACK
                // released it): what arrived before the hole can be read, then reads fail.
                self.set_broken(BrokenReason::PeerClosedWithDataMissing);
            }
            Control::Shutdown => {
                self.peer_closed = true;
                self.events.push_back(Event::PeerClosed);
                let unacked = self.snd.as_ref().is_some_and(|s| !s.is_empty());
                if unacked {
                    self.set_broken(BrokenReason::PeerShutdownWithUnackedData);
                } else if self.close_deadline.is_some() {
                    self.check_close(now);
                }
            }
            Control::CongestionWarning => {
                if let Some(s) = self.snd.as_mut() {
                    s.on_congestion_warning();
                }
            }
            // §5.8: only a DGRAM sender drops messages (those whose TTL expired). In a STREAM a
            // drop request would punch a hole in the byte stream and let the receiver deliver
            // past it as if nothing were missing: it is ignored and counted.
            Control::MsgDropRequest { .. } if self.config.socket_type == SocketType::Stream => {
                self.stats.drop_requests_ignored += 1;
            }
            Control::MsgDropRequest { msg, first, last } => {
                if let Some(rcv) = self.rcv.as_mut() {
                    if !rcv.on_msg_drop(msg, first, last) {
                        self.stats.malformed += 1;
                    }
                }
            }
            Control::ErrorSignal { code } => self.set_broken(BrokenReason::PeerError(code)),
            Control::UserDefined { .. } | Control::Handshake(_) => {}
        }
    }

    fn on_ack(&mut self, now: Instant, ack: &Ack) {
        if let Ack::Light { .. } = ack {
            self.stats.light_acks_recv += 1;
        } else {
            self.stats.acks_recv += 1;
        }
        let Some(snd) = self.snd.as_mut() else { return };
        let (ack_no, rtt) = match *ack {
            Ack::Light { ack } => return snd.on_light_ack(now, ack),
            Ack::Medium { ack_no, rtt, .. } | Ack::Full { ack_no, rtt, .. } => (ack_no, rtt),
        };
        self.ctrl.push_back(CtrlOut::Ack2(ack_no));
        match snd.on_ack(now, ack) {
            Err(sender::Malformed) => self.stats.malformed += 1,
            Ok(false) => {}
            Ok(true) => {
                self.rtt.update(Duration::from_micros(rtt.into()));
                let input = self.cc_input(now);
                self.cc.on_ack(&input, ack.ack());
                self.reload_cc();
                if self.close_deadline.is_some() {
                    self.check_close(now);
                }
            }
        }
    }

    fn on_ack2(&mut self, now: Instant, ack_no: AckNo) {
        let Some(rcv) = self.rcv.as_mut() else { return };
        self.stats.ack2_recv += 1;
        if let Some(rtt) = rcv.on_ack2(now, ack_no) {
            self.rtt.update(rtt);
        }
    }

    fn on_nak(&mut self, now: Instant, ranges: &[(SeqNo, SeqNo)]) {
        let Some(snd) = self.snd.as_mut() else { return };
        match snd.on_nak(ranges) {
            // §5.4: nothing reported may be later than what we sent.
            Err(sender::Malformed) => self.stats.malformed += 1,
            Ok(lost) => {
                self.stats.pkts_lost_snd += lost as u64;
                let input = self.cc_input(now);
                self.cc.on_loss(&input, ranges);
                self.reload_cc();
                if let Some(snd) = self.snd.as_mut() {
                    snd.hurry(now);
                }
            }
        }
    }

    // ---------------------------------------------------------------- controller

    fn cc_input(&self, now: Instant) -> CcInput {
        let mut input = CcInput {
            now,
            mss: self.mss,
            rtt_us: self.rtt.rtt_us(),
            delivery_rate: 16,
            bandwidth: 1,
            snd_curr_seq: self.isn.prev(),
            max_window: 2,
        };
        if let Some(snd) = &self.snd {
            snd.fill_cc_input(&mut input);
        }
        input
    }

    /// Copies `P`, the freeze and `W_cc` from the controller, applying `UDT_MAXBW` (§7 step 4,
    /// §12.6).
    fn reload_cc(&mut self) {
        let min_period = self.config.max_bw.map_or(0.0, |bw| 1e6 / (bw as f64 / self.mss as f64));
        if let Some(s) = self.snd.as_mut() {
            s.pace(&self.cc, min_period);
        }
    }

    // ---------------------------------------------------------------- output

    /// Writes the next datagram for the peer into `buf` (which must hold `mss − 28` bytes)
    /// and says how long it is, or `None` if nothing is due at `now`. Everything leaves from
    /// the one UDP socket ([`Source::Data`]) for [`Connection::peer`].
    ///
    /// # Panics
    /// If `buf` is shorter than the datagram due (at most `mss − 28` bytes).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let size = if let Some(c) = self.ctrl.pop_front() {
            if let (CtrlOut::Ack(Ack::Full { .. } | Ack::Medium { .. }), Some(rcv)) = (&c, self.rcv.as_mut()) {
                rcv.ack_left(now, self.cc.get().ack_period());
            }
            self.emit_control(c, buf)
        } else {
            match self.state {
                State::Connecting => {
                    let hs = self.handshake.poll(now)?;
                    let dst = if self.role == Role::Rendezvous { self.peer_id } else { 0 };
                    let repr = Repr::Control { dst_socket_id: dst, timestamp: 0, control: Control::Handshake(hs) };
                    repr.emit(buf);
                    self.stats.ctrl_sent += 1;
                    repr.buffer_len()
                }
                State::Connected => self.poll_data(now, buf)?,
                State::Done => return None,
            }
        };
        // Any packet tells an accepted peer we are here: the hello keep-alive is not needed.
        self.hello_at = None;
        Some(Transmit { destination: self.peer, size, source: Source::Data })
    }

    fn emit_control(&mut self, c: CtrlOut, buf: &mut [u8]) -> usize {
        let control = match &c {
            CtrlOut::Handshake(h) => Control::Handshake(*h),
            CtrlOut::KeepAlive => Control::KeepAlive,
            CtrlOut::Ack(a) => Control::Ack(*a),
            CtrlOut::Nak(info) => {
                self.stats.naks_sent += 1;
                Control::Nak(NakList::new_checked(info).expect("a NAK is queued with at least one word"))
            }
            CtrlOut::Ack2(n) => {
                self.stats.ack2_sent += 1;
                Control::Ack2 { ack_no: *n }
            }
            CtrlOut::Shutdown => Control::Shutdown,
            CtrlOut::MsgDrop { msg, first, last } => Control::MsgDropRequest { msg: *msg, first: *first, last: *last },
        };
        let repr = Repr::Control { dst_socket_id: self.peer_id, timestamp: 0, control };
        repr.emit(buf);
        self.stats.ctrl_sent += 1;
        repr.buffer_len()
    }

    fn poll_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let due = self.next_data_time()?;
        if now < due {
            return None;
        }
        let ts = micros(now - self.start) as u32;
        let snd = self.snd.as_mut().expect("connected");
        match snd.poll_data(now, ts, self.peer_id, buf)? {
            Output::Data { len, seq, payload, retransmission } => {
                self.stats.pkts_sent += 1;
                self.stats.bytes_sent += payload as u64;
                if retransmission {
                    self.stats.pkts_retrans += 1;
                } else {
                    self.stats.bytes_sent_unique += payload as u64;
                }
                let input = self.cc_input(now);
                self.cc.on_sent(&input, seq, retransmission);
                Some(len)
            }
            Output::MsgDrop { msg, first, last } => Some(self.emit_control(CtrlOut::MsgDrop { msg, first, last }, buf)),
        }
    }
}
