//! A connection's timers (UDT4.md §9): ACK, draft-mode NAK, EXP (retransmission, keep-alive,
//! dead peer), the controller's tick, the handshake resend and the linger deadline — when
//! each is due ([`Connection::poll_timeout`]) and what each does
//! ([`Connection::handle_timeout`]).
//!
//! The ACK timer is checked as 4.11 checks it (§9, §14 row 18): right after every packet from
//! the peer and, when none arrives, once the connection has gone [`IDLE_CHECK`] unchecked;
//! never on a bare 10 ms timer. The others fire at their deadlines.

use super::{BrokenReason, ConnectError, Connection, CtrlOut, State};
use crate::wire::{self, Ack, NakList};
use transfer::cc::SYN;
use transfer::rtt::RttEstimator;
use transfer::time::{micros, Duration, Instant};

/// With no packet from the peer, 4.11 evaluates a connection's timers only once it has gone
/// this long unchecked (§9, §14 row 18); see [`Connection::handle_timeout`].
pub const IDLE_CHECK: Duration = Duration::from_millis(100);
/// How long a client waits, after the handshake, for a packet of its own (data, an ACK) to
/// tell the listener it is connected before it sends a keep-alive for that (§16 pitfall 8).
/// A keep-alive at once would reach the listener just before the client's first data and run
/// the listener's ACK timer with nothing to acknowledge (§9.2: the timer restarts whether or
/// not an ACK leaves), so that the first burst of slow start waited for the idle check
/// (100 ms) to be acknowledged. 4.11 clients send no such keep-alive.
pub(super) const HELLO_DELAY: Duration = SYN;
/// The minimum EXP period per EXPCount (§9.4).
const MIN_EXP: Duration = Duration::from_millis(300);
/// Silence after which, with more than 16 EXP periods passed, the peer is dead (§9.4).
const PEER_DEAD: Duration = Duration::from_secs(5);

/// The EXP timer (§9.4): how many periods passed without a response, and since when.
#[derive(Debug)]
pub(super) struct ExpTimer {
    /// `EXPCount`, from 1.
    count: u64,
    last_response: Instant,
}

impl ExpTimer {
    pub(super) fn new(now: Instant) -> ExpTimer {
        ExpTimer { count: 1, last_response: now }
    }

    /// A packet from the peer: the period starts over at its shortest.
    pub(super) fn reset(&mut self, now: Instant) {
        *self = ExpTimer::new(now);
    }

    /// The silence so far does not count (a handshake from the peer; new data after idle).
    pub(super) fn touch(&mut self, now: Instant) {
        self.last_response = now;
    }

    /// `max(EXPCount · (RTT + 4·RTTVar) + SYN, EXPCount · 300 ms)`.
    fn interval(&self, rtt: &RttEstimator) -> Duration {
        let base = self.count.saturating_mul(micros(rtt.rto())) + micros(SYN);
        Duration::from_micros(base.max(self.count * micros(MIN_EXP)))
    }

    pub(super) fn deadline(&self, rtt: &RttEstimator) -> Instant {
        self.last_response + self.interval(rtt)
    }

    /// More than 16 periods and 5 s without a response.
    fn peer_dead(&self, now: Instant) -> bool {
        self.count > 16 && now - self.last_response > PEER_DEAD
    }

    /// A period passed without a response.
    fn fired(&mut self, now: Instant) {
        self.count += 1;
        self.last_response = now;
    }
}

impl Connection {
    /// The earliest time this connection needs [`Connection::handle_timeout`] or has a packet
    /// for [`Connection::poll_transmit`]. `None` when it is done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.due(true)
    }

    /// [`poll_timeout`](Self::poll_timeout) without the next data packet's departure: when a
    /// timer is due or a control packet waits. A runtime may let paced data out late, several
    /// packets at one wake-up, as 4.11's sender does (§7 step 3); it never sleeps past this.
    pub fn poll_timer(&self) -> Option<Instant> {
        self.due(false)
    }

    /// The earliest due time, with the next data departure or without it.
    fn due(&self, with_data: bool) -> Option<Instant> {
        if !self.ctrl.is_empty() {
            return Some(Instant::ZERO);
        }
        match self.state {
            State::Done => None,
            State::Connecting => Some(self.handshake.poll_timeout()),
            // Only the dead-peer rule runs until the client's first packet (§16 pitfall 8).
            State::Connected if self.awaiting_peer => Some(self.exp.deadline(&self.rtt)),
            State::Connected => {
                let rcv = self.rcv.as_ref().expect("connected");
                // The ACK timer is only looked at when a packet arrives or at the idle check.
                let mut t = rcv.ack_check_time().min(self.exp.deadline(&self.rtt));
                if self.config.periodic_nak {
                    if let Some(nak) = rcv.nak_check_time() {
                        t = t.min(nak);
                    }
                }
                if let Some(d) = self.close_deadline {
                    t = t.min(d);
                }
                if let Some(h) = self.hello_at {
                    t = t.min(h);
                }
                if let Some(next) = self.next_data_time().filter(|_| with_data) {
                    t = t.min(next);
                }
                if let Some(tick) = self.cc.poll_timeout() {
                    t = t.min(tick);
                }
                Some(t)
            }
        }
    }

    /// When the next data packet may leave, if one is ready to go.
    pub(super) fn next_data_time(&self) -> Option<Instant> {
        if self.awaiting_peer || self.state != State::Connected {
            return None;
        }
        self.snd.as_ref()?.next_data_time()
    }

    /// Runs the ACK, NAK, EXP, tick, handshake and linger timers that are due. The ACK timer
    /// is otherwise checked after each packet from the peer; here only at the idle check
    /// ([`IDLE_CHECK`] after the last check), as in 4.11.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.run_timers(now, false);
    }

    /// `after_packet`: called right after a packet from the peer was processed.
    pub(super) fn run_timers(&mut self, now: Instant, after_packet: bool) {
        match self.state {
            State::Done => {}
            State::Connecting => {
                if self.handshake.expired(now) {
                    self.fail(ConnectError::TimedOut);
                }
            }
            State::Connected => {
                if self.awaiting_peer {
                    self.check_exp_timer(now);
                    return;
                }
                if self.hello_at.is_some_and(|t| now >= t) {
                    self.hello_at = None;
                    // A data packet due now says it as well.
                    if self.next_data_time().is_none_or(|t| t > now) {
                        self.ctrl.push_back(CtrlOut::KeepAlive);
                    }
                }
                self.check_ack_timer(now, after_packet);
                self.check_nak_timer(now);
                self.check_exp_timer(now);
                self.check_cc_tick(now);
                if self.close_deadline.is_some() {
                    self.check_close(now);
                }
            }
        }
    }

    /// §9.2–§9.3. As in 4.11 (§9, §14 row 18), the ACK timer is evaluated right after a
    /// packet from the peer, or when none arrived for [`IDLE_CHECK`] — never on a bare 10 ms
    /// timer. So a timer ACK leaves with the first packet after the ACK period: more than SYN
    /// after the previous one (the sender's rate control runs at most once per SYN, §12.3, and
    /// would drop about half of ACKs spaced exactly SYN apart once the path adds any jitter),
    /// and in a slow start whose bursts leave idle gaps it is clocked by the arrivals (an
    /// ACK2, the next burst) as 4.11's is.
    fn check_ack_timer(&mut self, now: Instant, after_packet: bool) {
        let period = self.cc.get().ack_period();
        let rcv = self.rcv.as_mut().expect("connected");
        if let Some(ack) = rcv.check_ack_timer(now, after_packet, period, &self.rtt) {
            match ack {
                Ack::Light { .. } => self.stats.light_acks_sent += 1,
                Ack::Medium { .. } | Ack::Full { .. } => self.stats.acks_sent += 1,
            }
            self.ctrl.push_back(CtrlOut::Ack(ack));
        }
    }

    /// Draft mode only (§8.4): re-send the whole receiver loss list.
    fn check_nak_timer(&mut self, now: Instant) {
        if !self.config.periodic_nak {
            return;
        }
        let max_words = wire::payload_size(self.mss) / 4;
        let rcv = self.rcv.as_mut().expect("connected");
        if let Some(words) = rcv.check_nak_timer(now, &self.rtt, max_words) {
            self.ctrl.push_back(CtrlOut::Nak(NakList::encode(&words)));
        }
    }

    /// §9.4 EXP: retransmission timeout, keep-alive and dead-peer detection.
    fn check_exp_timer(&mut self, now: Instant) {
        if now <= self.exp.deadline(&self.rtt) {
            return;
        }
        if self.exp.peer_dead(now) {
            self.set_broken(BrokenReason::PeerSilent);
            return;
        }
        if self.awaiting_peer {
            // Nothing was sent yet and nothing may be: just count the silence.
        } else if let Some(lost) = self.snd.as_mut().expect("connected").on_exp(now) {
            self.stats.pkts_lost_snd += lost as u64;
            let input = self.cc_input(now);
            self.cc.on_timeout(&input);
            self.reload_cc();
            self.stats.exp_timeouts += 1;
        } else {
            self.ctrl.push_back(CtrlOut::KeepAlive);
        }
        self.exp.fired(now);
    }

    /// The controller's periodic hook, when it has one (`transfer::cc`).
    fn check_cc_tick(&mut self, now: Instant) {
        if self.cc.poll_timeout().is_some_and(|t| now >= t) {
            let input = self.cc_input(now);
            if self.cc.handle_timeout(&input) {
                self.reload_cc();
            }
        }
    }
}
