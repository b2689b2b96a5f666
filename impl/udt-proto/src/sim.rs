//! A deterministic two-endpoint network with a virtual clock (CONVENTIONS: quinn's `Pair`,
//! smoltcp's `netsim`).
//!
//! Two [`Endpoint`]s, `a` and `b`, exchange datagrams over a pair of one-way [`Link`]s with
//! latency, a bottleneck rate with a DropTail queue, random loss, chosen-packet loss,
//! reordering and duplication, all driven by a seeded generator. Time only advances to the
//! next thing that is due, so a minute of protocol time costs milliseconds and every run
//! with the same seed is identical.
//!
//! ```
//! use udt_proto::sim::{Pair, LinkConfig};
//! use udt_proto::config::ConnectionConfig;
//! use transfer::time::Duration;
//! let mut p = Pair::new(1, LinkConfig { delay: Duration::from_millis(5), ..LinkConfig::default() });
//! let (client, server) = p.connect(ConnectionConfig::default());
//! let data = vec![7u8; 100_000];
//! p.a.connection_mut(client).unwrap().send(p.now, &data);
//! let got = p.transfer_to_b(server, data.len(), Duration::from_secs(10));
//! assert_eq!(got, data);
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;

use transfer::prng::Xoshiro256;

use crate::config::ConnectionConfig;
use crate::endpoint::Endpoint;
use crate::wire::{Control, Repr};
use transfer::time::{micros, Duration, Instant};

/// Which way a datagram travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB,
    BtoA,
}

/// One direction of the simulated path.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bottleneck rate in bits/s (`None` = infinitely fast).
    pub rate_bps: Option<u64>,
    /// DropTail queue limit in packets at the bottleneck.
    pub queue_pkts: usize,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram is delayed by an extra `reorder_delay` (so later ones pass it).
    pub reorder: f64,
    pub reorder_delay: Duration,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Duration::from_millis(1),
            rate_bps: None,
            queue_pkts: 1000,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(2),
            duplicate: 0.0,
        }
    }
}

/// A datagram seen on the simulated wire.
#[derive(Debug, Clone)]
pub struct Traced {
    pub time: Instant,
    pub dir: Dir,
    pub bytes: Vec<u8>,
    /// Dropped by the link (loss, queue overflow or the drop filter).
    pub dropped: bool,
}

impl Traced {
    pub fn repr(&self) -> Option<Repr<'_>> {
        Repr::parse_bytes(&self.bytes).ok()
    }
    pub fn control(&self) -> Option<Control<'_>> {
        match self.repr()? {
            Repr::Control { control, .. } => Some(control),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
struct Link {
    config: LinkConfig,
    /// Time the bottleneck finishes sending what is queued.
    busy_until: Instant,
    /// Departure times of queued packets (for the DropTail limit).
    queued: VecDeque<Instant>,
    /// See [`Pair::set_late_release`]: zero = deliver on time.
    release_every: Duration,
    last_release: Instant,
}

/// Drop filter: return `true` to drop the datagram.
pub type DropFilter = Box<dyn FnMut(Dir, &[u8]) -> bool>;

/// The harness.
pub struct Pair {
    pub now: Instant,
    pub a: Endpoint,
    pub b: Endpoint,
    pub a_addr: SocketAddr,
    pub b_addr: SocketAddr,
    links: [Link; 2],
    in_flight: Vec<(Instant, u64, Dir, Vec<u8>)>,
    order: u64,
    rng: Xoshiro256,
    pub drop_filter: Option<DropFilter>,
    pub trace: Vec<Traced>,
    /// Record every datagram in `trace` (on by default).
    pub tracing: bool,
    buf: Vec<u8>,
}

impl Pair {
    /// Both directions use `link`.
    pub fn new(seed: u64, link: LinkConfig) -> Pair {
        Pair::asymmetric(seed, link.clone(), link)
    }

    pub fn asymmetric(seed: u64, a_to_b: LinkConfig, b_to_a: LinkConfig) -> Pair {
        let mk = |c| Link {
            config: c,
            busy_until: Instant::ZERO,
            queued: VecDeque::new(),
            release_every: Duration::ZERO,
            last_release: Instant::ZERO,
        };
        Pair {
            now: Instant::from_micros(1_000_000),
            a: Endpoint::new(seed.wrapping_mul(3).wrapping_add(1)),
            b: Endpoint::new(seed.wrapping_mul(7).wrapping_add(2)),
            a_addr: "10.0.0.1:9000".parse().unwrap(),
            b_addr: "10.0.0.2:9000".parse().unwrap(),
            links: [mk(a_to_b), mk(b_to_a)],
            in_flight: Vec::new(),
            order: 0,
            rng: Xoshiro256::seed_from_u64(seed ^ 0x5DEE_CE66_D1CE_4E5B),
            drop_filter: None,
            trace: Vec::new(),
            tracing: true,
            buf: vec![0; 65_536],
        }
    }

    pub fn link_mut(&mut self, dir: Dir) -> &mut LinkConfig {
        &mut self.links[dir as usize].config
    }

    /// Makes `dir` deliver like a link emulator that gets the CPU only every `every`: what
    /// fell due meanwhile arrives in one burst, 2 µs apart (`udt-linkem`'s `bunched` frames on
    /// a busy machine). Zero restores on-time delivery.
    pub fn set_late_release(&mut self, dir: Dir, every: Duration) {
        self.links[dir as usize].release_every = every;
    }

    /// `a` connects to a listener on `b`; runs until both ends are connected. Returns (client
    /// ID on a, accepted ID on b).
    ///
    /// # Panics
    /// If the connection is not established within 10 s of virtual time.
    pub fn connect(&mut self, config: ConnectionConfig) -> (u32, u32) {
        self.b.listen(config.clone(), 16, self.now);
        let c = self.a.connect(config, self.b_addr, self.now);
        let deadline = self.now + Duration::from_secs(10);
        let mut server = None;
        while self.now < deadline {
            self.step();
            if server.is_none() {
                server = self.b.accept();
            }
            if let Some(s) = server {
                let ready = self.a.connection(c).is_some_and(|x| x.is_connected())
                    && self.b.connection(s).is_some_and(|x| x.is_connected());
                if ready {
                    return (c, s);
                }
            }
        }
        panic!("connection not established within 10 s of virtual time");
    }

    fn send_from(&mut self, dir: Dir, bytes: Vec<u8>) {
        let mut dropped = self.drop_filter.as_mut().is_some_and(|f| f(dir, &bytes));
        let cfg = self.links[dir as usize].config.clone();
        if !dropped && cfg.loss > 0.0 && self.rng.chance(cfg.loss) {
            dropped = true;
        }
        let now = self.now;
        let mut depart = now;
        if !dropped {
            let link = &mut self.links[dir as usize];
            while link.queued.front().is_some_and(|&t| t <= now) {
                link.queued.pop_front();
            }
            if let Some(rate) = cfg.rate_bps {
                if link.queued.len() >= cfg.queue_pkts {
                    dropped = true;
                } else {
                    let wire_bits = (bytes.len() as u64 + 28) * 8;
                    let start = link.busy_until.max(now);
                    link.busy_until = start + Duration::from_micros(wire_bits * 1_000_000 / rate);
                    depart = link.busy_until;
                    link.queued.push_back(depart);
                }
            }
        }
        if self.tracing {
            self.trace.push(Traced { time: now, dir, bytes: bytes.clone(), dropped });
        }
        if dropped {
            return;
        }
        let mut arrive = depart + cfg.delay;
        let link = &mut self.links[dir as usize];
        let every = micros(link.release_every);
        if every > 0 {
            let slot = Instant::from_micros(arrive.as_micros().div_ceil(every) * every);
            arrive = slot.max(link.last_release + Duration::from_micros(2));
            link.last_release = arrive;
        }
        if cfg.reorder > 0.0 && self.rng.chance(cfg.reorder) {
            arrive += cfg.reorder_delay;
        }
        if cfg.duplicate > 0.0 && self.rng.chance(cfg.duplicate) {
            self.order += 1;
            self.in_flight.push((arrive + Duration::from_micros(1), self.order, dir, bytes.clone()));
        }
        self.order += 1;
        self.in_flight.push((arrive, self.order, dir, bytes));
    }

    /// Processes everything due at the current time, then advances the clock to the next
    /// event. Returns false when nothing at all is pending.
    pub fn step(&mut self) -> bool {
        loop {
            let mut progressed = false;
            // Deliver arrivals due now, in arrival order.
            self.in_flight.sort_by_key(|&(t, o, _, _)| std::cmp::Reverse((t, o)));
            while self.in_flight.last().is_some_and(|&(t, ..)| t <= self.now) {
                let (_, _, dir, bytes) = self.in_flight.pop().expect("checked");
                match dir {
                    Dir::AtoB => self.b.handle_datagram(self.now, self.a_addr, &bytes),
                    Dir::BtoA => self.a.handle_datagram(self.now, self.b_addr, &bytes),
                }
                progressed = true;
            }
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
            let mut buf = std::mem::take(&mut self.buf);
            while let Some(t) = self.a.poll_transmit(self.now, &mut buf) {
                self.send_from(Dir::AtoB, buf[..t.size].to_vec());
                progressed = true;
            }
            while let Some(t) = self.b.poll_transmit(self.now, &mut buf) {
                self.send_from(Dir::BtoA, buf[..t.size].to_vec());
                progressed = true;
            }
            self.buf = buf;
            if !progressed {
                break;
            }
        }
        let next = [self.in_flight.iter().map(|&(t, ..)| t).min(), self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(t) => {
                self.now = t.max(self.now + Duration::from_micros(1));
                true
            }
            None => false,
        }
    }

    /// Runs until virtual time `t`.
    pub fn run_until(&mut self, t: Instant) {
        while self.now < t {
            if !self.step() {
                self.now = t;
            }
        }
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Reads from `b`'s connection `id` until `len` bytes arrived or `timeout` passed.
    pub fn transfer_to_b(&mut self, id: u32, len: usize, timeout: Duration) -> Vec<u8> {
        let deadline = self.now + timeout;
        let mut out = Vec::with_capacity(len);
        let mut chunk = vec![0u8; 1 << 16];
        while out.len() < len && self.now < deadline {
            if !self.step() {
                break;
            }
            if let Some(c) = self.b.connection_mut(id) {
                loop {
                    let n = c.recv(&mut chunk);
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&chunk[..n]);
                }
            }
        }
        out
    }

    /// Datagrams in one direction that parsed as control packets of the given type.
    pub fn controls(&self, dir: Dir) -> impl Iterator<Item = (&Traced, Control<'_>)> {
        self.trace.iter().filter(move |t| t.dir == dir).filter_map(|t| t.control().map(|c| (t, c)))
    }
}
