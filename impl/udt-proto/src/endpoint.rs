//! Many UDT connections on one UDP port: demultiplexing by socket ID, the listener with its
//! stateless SYN-cookie round, and rendezvous routing (UDT4.md §3.3, §6.1, §6.2).
//!
//! Like a [`Connection`], an `Endpoint` is sans-IO. The driver feeds every datagram received
//! on the port to [`Endpoint::handle_datagram`], calls [`Endpoint::handle_timeout`] when
//! [`Endpoint::poll_timeout`] says so, and sends what [`Endpoint::poll_transmit`] returns to
//! the address it names. Connections are addressed by their local socket ID.
//!
//! Routing follows 4.11: destination ID 0 goes to the listener (or to a rendezvous connection
//! with that peer address); any other ID goes to the connection with that ID, and only if the
//! datagram comes from that connection's peer address. Nothing is stored for a peer before it
//! has returned a valid cookie.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;

use transfer::prng::Xoshiro256;

use crate::config::{ConnectionConfig, MIN_MSS};
use crate::connection::{Connection, Event, Role};
use crate::wire::{req_type, Control, Handshake, Packet, Repr};
use transfer::protocol::Protocol;
use transfer::seq::SeqNo;
use transfer::time::Instant;
use transfer::transmit::{Source, Transmit};

#[derive(Debug)]
struct Listener {
    config: ConnectionConfig,
    backlog: usize,
    key: (u64, u64),
    opened: Instant,
}

/// Counters of what the endpoint itself dropped or answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams that were not UDT packets, or handshakes that broke a rule.
    pub malformed: u64,
    /// Datagrams for a socket ID we do not have, or from the wrong address.
    pub unroutable: u64,
    /// Cookie responses sent to first handshakes (§6.1).
    pub cookies_sent: u64,
    /// Handshakes whose cookie was neither this minute's nor the last.
    pub bad_cookies: u64,
    /// Rejections sent (request type 1002).
    pub rejections_sent: u64,
    /// Connections that ended while waiting to be accepted, forgotten.
    pub unaccepted_reaped: u64,
}

/// A UDP port's worth of UDT sockets.
#[derive(Debug)]
pub struct Endpoint {
    /// Socket IDs, ISNs and the cookie key: seeded, so that a seeded endpoint behaves
    /// identically run after run (the simulator relies on it).
    rng: Xoshiro256,
    next_id: u32,
    listener: Option<Listener>,
    conns: HashMap<u32, Connection>,
    order: Vec<u32>,
    cursor: usize,
    accepted: HashMap<(SocketAddr, u32, u32), u32>,
    accept_queue: VecDeque<u32>,
    stateless: VecDeque<(SocketAddr, Handshake, u32)>,
    events: VecDeque<(u32, Event)>,
    stats: EndpointStats,
}

impl Endpoint {
    /// `seed` drives socket IDs, ISNs and the cookie key: use a random one in production and
    /// a fixed one in tests.
    pub fn new(seed: u64) -> Endpoint {
        let mut rng = Xoshiro256::seed_from_u64(seed);
        // 4.11 starts the ID counter at a random value in [1, 2^30] and counts down (§3.3).
        let next_id = rng.below(1 << 30) as u32 + 1;
        Endpoint {
            rng,
            next_id,
            listener: None,
            conns: HashMap::new(),
            order: Vec::new(),
            cursor: 0,
            accepted: HashMap::new(),
            accept_queue: VecDeque::new(),
            stateless: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
        }
    }

    fn alloc_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = if self.next_id <= 1 { 1 << 30 } else { self.next_id - 1 };
            if !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    fn random_isn(&mut self) -> SeqNo {
        SeqNo::new(self.rng.next_u64() as u32)
    }

    /// Accepts connections on this port with `config` for every accepted connection.
    pub fn listen(&mut self, config: ConnectionConfig, backlog: usize, now: Instant) {
        let key = (self.rng.next_u64(), self.rng.next_u64());
        self.listener = Some(Listener { config, backlog: backlog.max(1), key, opened: now });
    }

    /// Whether [`listen`](Self::listen) was called.
    pub fn is_listening(&self) -> bool {
        self.listener.is_some()
    }

    fn insert(&mut self, conn: Connection) -> u32 {
        let id = conn.local_id();
        self.conns.insert(id, conn);
        self.order.push(id);
        id
    }

    /// Starts connecting to a listener at `peer`; returns the new socket's ID.
    pub fn connect(&mut self, config: ConnectionConfig, peer: SocketAddr, now: Instant) -> u32 {
        let id = self.alloc_id();
        let isn = self.random_isn();
        self.insert(Connection::connect(config, id, isn, peer, now))
    }

    /// Starts a rendezvous with `peer`; returns the new socket's ID.
    pub fn rendezvous(&mut self, config: ConnectionConfig, peer: SocketAddr, now: Instant) -> u32 {
        let id = self.alloc_id();
        let isn = self.random_isn();
        self.insert(Connection::rendezvous(config, id, isn, peer, now))
    }

    /// The next connection accepted by the listener, if any. Until the application takes it
    /// here it counts against the listener's backlog: a handshake beyond the backlog is
    /// rejected (§6.1, 4.11's `listen(backlog)`).
    pub fn accept(&mut self) -> Option<u32> {
        self.accept_queue.pop_front()
    }

    /// Connections accepted by the listener and not yet taken by [`accept`](Self::accept).
    pub fn pending_accepts(&self) -> usize {
        self.accept_queue.len()
    }

    /// The connection with socket ID `id`, if it exists.
    pub fn connection(&self, id: u32) -> Option<&Connection> {
        self.conns.get(&id)
    }

    /// The connection with socket ID `id`, to drive its application side.
    pub fn connection_mut(&mut self, id: u32) -> Option<&mut Connection> {
        self.conns.get_mut(&id)
    }

    /// The UDP address of connection `id`'s peer.
    pub fn peer_addr(&self, id: u32) -> Option<SocketAddr> {
        self.conns.get(&id).map(|c| c.peer())
    }

    /// The socket IDs of every connection, in no particular order.
    pub fn connection_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.iter().copied()
    }

    /// Forgets a connection (after its final events were read).
    pub fn remove(&mut self, id: u32) {
        if self.conns.remove(&id).is_some() {
            self.order.retain(|&i| i != id);
            self.accepted.retain(|_, v| *v != id);
            self.accept_queue.retain(|&i| i != id);
        }
    }

    /// What the endpoint itself dropped or answered.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Next connection event, with the socket ID it concerns.
    pub fn poll_event(&mut self) -> Option<(u32, Event)> {
        if self.events.is_empty() {
            for &id in &self.order {
                if let Some(c) = self.conns.get_mut(&id) {
                    while let Some(ev) = c.poll_event() {
                        self.events.push_back((id, ev));
                    }
                }
            }
        }
        self.events.pop_front()
    }

    /// SYN cookie for a client address in time slot `slot` (whole minutes since listening):
    /// a keyed hash, so nothing has to be stored before the client echoes it (§6.1 rule 2).
    fn cookie(key: (u64, u64), from: SocketAddr, slot: u64) -> u32 {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        from.hash(&mut h);
        slot.hash(&mut h);
        h.finish() as u32
    }

    /// Handles one datagram received on the port.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        let Ok(packet) = Packet::new_checked(datagram) else {
            self.stats.malformed += 1;
            return;
        };
        let dst = packet.dst_socket_id();
        if dst != 0 {
            match self.conns.get_mut(&dst) {
                Some(c) if c.peer() == from => c.handle_packet(now, datagram),
                _ => self.stats.unroutable += 1,
            }
            return;
        }
        // Destination 0: a connection request, or a rendezvous peer that does not know our ID.
        let hs = match Repr::parse(&packet) {
            Ok(Repr::Control { control: Control::Handshake(h), .. }) => Some(h),
            Ok(_) => None,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if let Some(h) = hs.filter(|h| self.listener.is_some() && h.req_type != req_type::RENDEZVOUS) {
            return self.on_request(now, from, &h);
        }
        // Only now look for a rendezvous peer (a scan of the port's connections): a flood of
        // requests to a listener with many connections must not cost a scan each.
        let rendezvous = self.order.iter().copied().find(|id| {
            let c = &self.conns[id];
            c.peer() == from && c.role() == Role::Rendezvous
        });
        match rendezvous {
            Some(id) => self.conns.get_mut(&id).expect("listed").handle_packet(now, datagram),
            None => self.stats.unroutable += 1,
        }
    }

    fn on_request(&mut self, now: Instant, from: SocketAddr, h: &Handshake) {
        let l = self.listener.as_ref().expect("listening");
        let slot = (now - l.opened).as_secs() / 60;
        let cookie = Self::cookie(l.key, from, slot);
        if h.req_type == req_type::CLIENT {
            self.stats.cookies_sent += 1;
            self.stateless.push_back((from, Handshake { cookie, ..*h }, h.socket_id));
            return;
        }
        // Unlike 4.11 (whose fallback never matches), accept the previous minute's cookie too.
        let previous = slot.checked_sub(1).map(|s| Self::cookie(l.key, from, s));
        if h.cookie != cookie && Some(h.cookie) != previous {
            self.stats.bad_cookies += 1;
            return;
        }
        // An MSS below MIN_MSS cannot carry one byte of payload (4.11 aborts on MSS 0): rejected
        // rather than raised to the minimum, so that the client learns it asked for nonsense.
        if h.version != 4 || h.socket_type != l.config.socket_type || h.mss < MIN_MSS {
            self.reject(from, h);
            return;
        }
        if let Some(&id) = self.accepted.get(&(from, h.socket_id, h.isn)) {
            if let Some(c) = self.conns.get_mut(&id) {
                if !c.is_done() {
                    let r = c.repeat_response(h);
                    c.queue_handshake(r);
                }
            }
            return;
        }
        let pending = self.accept_queue.len();
        if pending >= l.backlog {
            self.reject(from, h);
            return;
        }
        let config = l.config.clone();
        let id = self.alloc_id();
        self.insert(Connection::accept(config, id, h, from, now));
        self.accepted.insert((from, h.socket_id, h.isn), id);
        self.accept_queue.push_back(id);
    }

    fn reject(&mut self, from: SocketAddr, h: &Handshake) {
        self.stats.rejections_sent += 1;
        self.stateless.push_back((from, Handshake { req_type: req_type::REJECT, ..*h }, h.socket_id));
    }

    /// Runs every connection's due timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        for c in self.conns.values_mut() {
            c.handle_timeout(now);
        }
        self.reap_unaccepted();
    }

    /// Forgets connections that ended (their client went silent, broke or closed) while
    /// waiting in the accept queue: no application holds them, so nobody would ever read
    /// their events or free them, and they would hold a backlog place.
    fn reap_unaccepted(&mut self) {
        let done: Vec<u32> =
            self.accept_queue.iter().copied().filter(|id| self.conns.get(id).is_none_or(|c| c.is_done())).collect();
        for id in done {
            self.stats.unaccepted_reaped += 1;
            self.remove(id);
        }
    }

    /// The earliest time anything is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.stateless.is_empty() {
            return Some(Instant::ZERO);
        }
        self.conns.values().filter_map(|c| c.poll_timeout()).min()
    }

    /// The earliest time anything but a data departure is due ([`Connection::poll_timer`]).
    pub fn poll_timer(&self) -> Option<Instant> {
        if !self.stateless.is_empty() {
            return Some(Instant::ZERO);
        }
        self.conns.values().filter_map(|c| c.poll_timer()).min()
    }

    /// Writes the next due datagram into `buf` (at least `max MSS − 28` bytes) and says where
    /// it goes and how long it is. Connections take turns.
    ///
    /// # Panics
    /// If `buf` is shorter than the datagram due (at most the largest `MSS − 28`).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some((to, h, dst)) = self.stateless.pop_front() {
            let repr = Repr::Control { dst_socket_id: dst, timestamp: 0, control: Control::Handshake(h) };
            repr.emit(buf);
            return Some(Transmit { destination: to, size: repr.buffer_len(), source: Source::Data });
        }
        let n = self.order.len();
        for i in 0..n {
            let idx = (self.cursor + i) % n;
            let id = self.order[idx];
            let c = self.conns.get_mut(&id).expect("listed");
            if let Some(t) = c.poll_transmit(now, buf) {
                self.cursor = (idx + 1) % n;
                return Some(t);
            }
        }
        None
    }

    /// Fast path for a driver that serves one connection at a time.
    ///
    /// # Panics
    /// As [`Endpoint::poll_transmit`]: if `buf` is shorter than the datagram due.
    pub fn poll_transmit_for(&mut self, id: u32, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.conns.get_mut(&id)?.poll_transmit(now, buf)
    }
}

/// The endpoint is the protocol the runtime's multiplexer drives: UDT over one UDP socket.
impl Protocol for Endpoint {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]) {
        Endpoint::handle_datagram(self, now, from, datagram)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Endpoint::handle_timeout(self, now)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Endpoint::poll_timeout(self)
    }
    fn poll_timer(&self) -> Option<Instant> {
        Endpoint::poll_timer(self)
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        Endpoint::poll_transmit(self, now, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SocketType;

    /// A first-round request whose ISN word has bit 31 set: outside §4's range, but 4.11
    /// echoes it and so must we (§6.1 listener rule 3).
    fn request(isn: u32) -> Handshake {
        Handshake {
            version: 4,
            socket_type: SocketType::Stream,
            isn,
            mss: 1500,
            flight_flag_size: 8192,
            req_type: req_type::CLIENT,
            socket_id: 0x1A2B_3C4D,
            cookie: 0,
            peer_ip: [0x0200_000a, 0, 0, 0],
        }
    }

    #[test]
    fn a_cookie_reply_echoes_a_client_isn_with_bit_31_set() {
        let mut ep = Endpoint::new(1);
        ep.listen(ConnectionConfig::default(), 4, Instant::ZERO);
        let from: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let req = request(0x8BAD_F00D);
        let pkt = Repr::Control { dst_socket_id: 0, timestamp: 0, control: Control::Handshake(req) }.to_vec();
        ep.handle_datagram(Instant::ZERO, from, &pkt);
        let mut buf = [0u8; 128];
        let t = ep.poll_transmit(Instant::ZERO, &mut buf).expect("a cookie reply");
        assert_eq!(t.destination, from);
        let reply = &buf[..t.size];
        // Byte for byte the request, but for the destination ID (header word 3) and the cookie.
        assert_eq!(reply[..12], pkt[..12]);
        assert_eq!(reply[12..16], req.socket_id.to_be_bytes());
        assert_eq!(reply[16..44], pkt[16..44], "words 0–6 of the handshake, the ISN's bit 31 too");
        assert_ne!(reply[44..48], [0; 4], "the cookie");
        assert_eq!(reply[48..], pkt[48..]);
    }
}
