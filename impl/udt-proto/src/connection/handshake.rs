//! Connection setup (UDT4.md §6.1, §6.2, §16 pitfall 8): the client's request with its cookie
//! round, the listener side created from a cookie-bearing request, rendezvous, and what a
//! connected socket answers to a stray handshake.
//!
//! [`Handshaking`] is the request and its resend timer; the `impl Connection` below turns
//! handshakes from the peer into an established connection.

use std::net::SocketAddr;

use super::receiver::Receiver;
use super::sender::Sender;
use super::timers::HELLO_DELAY;
use super::{ConnectError, Connection, CtrlOut, Event, Role, State};
use crate::config::{ConnectionConfig, MIN_MSS};
use crate::wire::{self, req_type, Handshake, SocketType};
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};

/// Handshake request re-send interval (§6.1).
pub const HANDSHAKE_RESEND: Duration = Duration::from_millis(250);

/// Our handshake and when it is (re)sent.
#[derive(Debug)]
pub(super) struct Handshaking {
    /// The request while connecting; the response once accepted.
    pub hs: Handshake,
    next_send: Instant,
    deadline: Instant,
    /// Rendezvous: the peer handshake recorded so far (§6.2).
    pub peer_hs: Option<Handshake>,
}

impl Handshaking {
    fn new(hs: Handshake, now: Instant, deadline: Instant) -> Handshaking {
        Handshaking { hs, next_send: now, deadline, peer_hs: None }
    }

    /// The request to send now, if its resend time has come within the setup timeout.
    pub(super) fn poll(&mut self, now: Instant) -> Option<Handshake> {
        if now >= self.next_send && now < self.deadline {
            self.next_send = now + HANDSHAKE_RESEND;
            Some(self.hs)
        } else {
            None
        }
    }

    /// Sends the (changed) request at the next poll.
    fn send_now(&mut self, now: Instant) {
        self.next_send = now;
    }

    /// When to poll or time out next.
    pub(super) fn poll_timeout(&self) -> Instant {
        self.next_send.min(self.deadline)
    }

    /// The setup timeout passed (3 s, rendezvous 30 s).
    pub(super) fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }
}

impl Connection {
    /// Starts a client connection to the listener at `peer` (§6.1): the first request goes out
    /// at once.
    pub fn connect(config: ConnectionConfig, local_id: u32, isn: SeqNo, peer: SocketAddr, now: Instant) -> Connection {
        Connection::initiate(config, Role::Client, local_id, isn, peer, now)
    }

    /// Starts a rendezvous connection with `peer` (§6.2).
    pub fn rendezvous(
        config: ConnectionConfig,
        local_id: u32,
        isn: SeqNo,
        peer: SocketAddr,
        now: Instant,
    ) -> Connection {
        Connection::initiate(config, Role::Rendezvous, local_id, isn, peer, now)
    }

    fn initiate(
        config: ConnectionConfig,
        role: Role,
        local_id: u32,
        isn: SeqNo,
        peer: SocketAddr,
        now: Instant,
    ) -> Connection {
        let (req, timeout) = match role {
            Role::Rendezvous => (req_type::RENDEZVOUS, config.rendezvous_timeout),
            _ => (req_type::CLIENT, config.connect_timeout),
        };
        let hs = Handshake {
            version: 4,
            socket_type: config.socket_type,
            isn: isn.get(),
            mss: config.mss,
            flight_flag_size: config.rcv_capacity(),
            req_type: req,
            socket_id: local_id,
            cookie: 0,
            peer_ip: wire::peer_ip_words(peer.ip()),
        };
        let handshake = Handshaking::new(hs, now, now + timeout);
        Connection::new(config, role, local_id, isn, peer, now, handshake)
    }

    /// Creates the listener side of a connection from the cookie-bearing request `req` of the
    /// client at `client` (§6.1 listener rule 8) and queues the response. Both directions
    /// start at the client's ISN; the response echoes its word whole, even with bit 31 set,
    /// where the connection's sequence numbers take its low 31 bits.
    pub fn accept(
        config: ConnectionConfig,
        local_id: u32,
        req: &Handshake,
        client: SocketAddr,
        now: Instant,
    ) -> Connection {
        let mss = req.mss.min(config.mss).max(MIN_MSS);
        let response = Handshake {
            version: 4,
            socket_type: config.socket_type,
            isn: req.isn,
            mss,
            flight_flag_size: config.rcv_capacity(),
            req_type: req_type::RESPONSE,
            socket_id: local_id,
            cookie: req.cookie,
            peer_ip: wire::peer_ip_words(client.ip()),
        };
        let handshake = Handshaking::new(response, now, Instant::MAX);
        let mut c = Connection::new(config, Role::Accepted, local_id, req.first_seq(), client, now, handshake);
        c.mss = mss;
        c.peer_id = req.socket_id;
        c.awaiting_peer = true;
        c.ctrl.push_back(CtrlOut::Handshake(response));
        c.establish(now, req.first_seq(), req.flight_flag_size);
        c
    }

    /// The handshake to re-send when the client repeats its request after we accepted it
    /// (§6.1 listener rule 6: FFS is `UDT_FC`, other words as in the request).
    pub fn repeat_response(&self, req: &Handshake) -> Handshake {
        Handshake { flight_flag_size: self.config.flight_flag_size, peer_ip: req.peer_ip, ..self.handshake.hs }
    }

    /// Queues a handshake for sending (used by the endpoint for repeated responses).
    pub fn queue_handshake(&mut self, hs: Handshake) {
        self.ctrl.push_back(CtrlOut::Handshake(hs));
    }

    /// Both directions are set up: the sender starts at our ISN, the receiver expects the
    /// peer's; the controller starts (§12.1).
    pub(super) fn establish(&mut self, now: Instant, peer_isn: SeqNo, peer_ffs: u32) {
        let payload = wire::payload_size(self.mss);
        self.snd = Some(Sender::new(&self.config, self.isn, peer_ffs, payload, now));
        self.rcv = Some(Receiver::new(&self.config, peer_isn, payload, now));
        self.state = State::Connected;
        self.exp.reset(now);
        let input = self.cc_input(now);
        self.cc.on_connect(&input);
        self.reload_cc();
        self.events.push_back(Event::Connected);
    }

    pub(super) fn on_handshake(&mut self, now: Instant, h: &Handshake) {
        match (self.state, self.role) {
            (State::Connecting, Role::Client) => {
                if h.req_type == req_type::CLIENT {
                    // Cookie round (§6.1 client rule 3).
                    self.handshake.hs.cookie = h.cookie;
                    self.handshake.hs.req_type = req_type::RESPONSE;
                    self.handshake.send_now(now);
                    return;
                }
                if h.req_type == req_type::REJECT {
                    return self.fail(ConnectError::Rejected);
                }
                if h.isn != self.isn.get() {
                    return self.fail(ConnectError::IsnMismatch);
                }
                self.mss = h.mss.clamp(MIN_MSS, self.config.mss.max(MIN_MSS));
                self.peer_id = h.socket_id;
                self.establish(now, h.first_seq(), h.flight_flag_size);
                // Let the listener know we are here so it may start sending (§16 pitfall 8),
                // unless our own first data or ACK does so sooner.
                self.hello_at = Some(now + HELLO_DELAY);
            }
            (State::Connecting, Role::Rendezvous) => {
                if h.req_type == req_type::CLIENT {
                    return self.fail(ConnectError::RendezvousRefused);
                }
                self.handshake.peer_hs = Some(*h);
                self.peer_id = h.socket_id;
                if self.handshake.hs.req_type == req_type::RENDEZVOUS || h.req_type == req_type::RENDEZVOUS {
                    self.handshake.hs.req_type = req_type::RESPONSE;
                    self.handshake.send_now(now);
                } else {
                    self.rendezvous_connected(now, h);
                }
            }
            (State::Connected, Role::Rendezvous) if h.req_type != req_type::RENDEZVOUS_FINAL => {
                self.exp.touch(now);
                self.ctrl.push_back(CtrlOut::Handshake(self.minimal_handshake(req_type::RENDEZVOUS_FINAL)));
            }
            (State::Connected, _) if h.req_type > 0 => {
                self.exp.touch(now);
                self.ctrl.push_back(CtrlOut::Handshake(self.minimal_handshake(req_type::RESPONSE)));
            }
            (State::Connected, _) => self.exp.touch(now),
            _ => {}
        }
    }

    /// The reply of a connected socket to a stray handshake (§6.2).
    fn minimal_handshake(&self, req: i32) -> Handshake {
        Handshake {
            version: 0,
            socket_type: SocketType::Other(0),
            isn: self.isn.get(),
            mss: self.mss,
            flight_flag_size: self.config.flight_flag_size,
            req_type: req,
            socket_id: self.local_id,
            cookie: 0,
            peer_ip: [0; 4],
        }
    }

    /// Rendezvous rule 1 (§6.2): data or a keep-alive after a recorded peer handshake
    /// completes the connection.
    pub(super) fn complete_rendezvous(&mut self, now: Instant) -> bool {
        match self.handshake.peer_hs {
            Some(p) if self.role == Role::Rendezvous => {
                self.rendezvous_connected(now, &p);
                true
            }
            _ => false,
        }
    }

    fn rendezvous_connected(&mut self, now: Instant, peer: &Handshake) {
        // 4.11 adopts the peer's MSS without a min (§6.2); we take the min so that
        // mismatched options cannot produce oversized packets.
        self.mss = peer.mss.clamp(MIN_MSS, self.config.mss.max(MIN_MSS));
        self.peer_id = peer.socket_id;
        self.establish(now, peer.first_seq(), peer.flight_flag_size);
        self.ctrl.push_back(CtrlOut::KeepAlive);
    }

    pub(super) fn fail(&mut self, e: ConnectError) {
        self.state = State::Done;
        self.events.push_back(Event::ConnectFailed(e));
    }
}
