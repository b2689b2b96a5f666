//! A deterministic two-endpoint network with a virtual clock (after quinn's `Pair` and
//! smoltcp's `netsim`).
//!
//! Two [`Endpoint`]s, `a` and `b`, exchange datagrams over a pair of one-way links with
//! latency, a bottleneck rate with a DropTail queue, random loss, chosen-packet loss,
//! reordering and duplication, all driven by seeded generators. Time only advances to the
//! next thing that is due, so a minute of protocol time costs milliseconds and every run
//! with the same seed is identical.
//!
//! Test plumbing, not part of the core: this module exists only with the crate's `pair`
//! feature (off by default), which brings in the link model (`link-model`). The crate's own
//! tests and examples turn it on through its dev-dependency on itself; the fuzzer names it.
//!
//! # The link model
//!
//! `Pair` has no link model of its own: each direction is a
//! [`link_model::delay_line::DelayLine`], the one model that the userspace link emulator
//! `udt-linkem` and the network simulator `netsim` run, built from the direction's
//! [`LinkConfig`] as a [`LinkSpec`] (`delay`, `rate`, `queue=<queue_pkts>p`,
//! `loss=random:<loss>`, `duplicate`, `reorder`, `reorder_delay`, and a `seed` derived from
//! the pair's seed and the direction). So a `Pair`'s links behave as `udt-linkem`'s do:
//!
//! - loss is decided before the bottleneck and a lost datagram takes no queue space;
//! - the bottleneck serializes `len + 28` bytes (the datagram plus IP and UDP headers) at
//!   `rate_bps`, in integer nanoseconds with the remainder carried, and DropTail refuses a
//!   datagram when `queue_pkts` are waiting or in serialization;
//! - a duplicated datagram is delivered twice in a row at its release time (the copy right
//!   behind the original), taking no second place in the queue;
//! - a reordered datagram is held back `reorder_delay` *after* the bottleneck, so the
//!   datagrams released within that time overtake it;
//! - loss, duplication and reordering draw from streams of their own, once per datagram
//!   offered to the link, so which datagrams they hit depends on the seed and the order of
//!   sending, not on timing.
//!
//! The [`Pair::drop_filter`] is not part of the link: it sees every datagram first, and one
//! it drops is never offered to the delay line (it draws no random numbers).
//!
//! # Time
//!
//! The pair's clock is [`transfer::time::Instant`] in whole µs; the delay line counts ns. A
//! datagram sent at `now` enters the line at `now·1000` ns (durations of a [`LinkConfig`]
//! are taken in whole µs, as everywhere on the µs clock), and one the line releases at `r` ns
//! arrives at `⌈r / 1000⌉` µs, the first µs tick at or after its release. Arrivals due at the
//! same µs are delivered in the line's release order (copy before original, then later
//! datagrams), and across the two directions in the order they left their lines.
//! [`Pair::set_late_release`] then moves arrival times later, on top of the line's release
//! times.
//!
//! ```
//! use udt_proto::pair::{Pair, LinkConfig};
//! use udt_proto::config::ConnectionConfig;
//! use transfer::time::Duration;
//! let mut p = Pair::new(1, LinkConfig { delay: Duration::from_millis(5), ..LinkConfig::default() });
//! let (client, server) = p.connect(ConnectionConfig::default());
//! let data = vec![7u8; 100_000];
//! p.a.connection_mut(client).unwrap().send(p.now, &data);
//! let got = p.transfer_to_b(server, data.len(), Duration::from_secs(10));
//! assert_eq!(got, data);
//! ```

use std::net::SocketAddr;

use link_model::delay_line::{Admission, DelayLine};
use link_model::link_spec::{LinkSpec, QueueLimit};
use link_model::loss::LossSpec;

use crate::config::ConnectionConfig;
use crate::endpoint::Endpoint;
use crate::wire::{Control, Repr};
use transfer::time::{micros, Duration, Instant};

/// IP (20) and UDP (8) header bytes the bottleneck serializes besides the datagram.
const IP_UDP_HEADERS: usize = 28;

/// Which way a datagram travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From `a` to `b`.
    AtoB,
    /// From `b` to `a`.
    BtoA,
}

/// One direction of the simulated path: the parameters of its delay line (see the
/// [module docs](self)). Durations are taken in whole µs.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bottleneck rate in bits/s of the datagram plus 28 bytes of IP and UDP headers
    /// (`None` = infinitely fast). Must not be `Some(0)`.
    pub rate_bps: Option<u64>,
    /// DropTail queue limit in packets at the bottleneck (only with a `rate_bps`).
    pub queue_pkts: usize,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram is held back an extra `reorder_delay` after the
    /// bottleneck (so later ones pass it).
    pub reorder: f64,
    /// The extra delay of a held-back datagram.
    pub reorder_delay: Duration,
    /// Probability that a datagram is delivered twice (the copy right behind it).
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

impl LinkConfig {
    /// The delay line's spec for this config, drawing from `seed`.
    fn spec(&self, seed: u64) -> LinkSpec {
        let ns = |d: Duration| micros(d).saturating_mul(1000);
        LinkSpec {
            delay_ns: ns(self.delay),
            rate_bps: self.rate_bps,
            queue: QueueLimit::Packets(self.queue_pkts as u64),
            loss: if self.loss > 0.0 { LossSpec::Random { p: self.loss } } else { LossSpec::None },
            duplicate: self.duplicate,
            reorder: self.reorder,
            reorder_delay_ns: ns(self.reorder_delay),
            seed,
        }
    }
}

/// A datagram seen on the simulated wire.
#[derive(Debug, Clone)]
pub struct Traced {
    /// When it was sent.
    pub time: Instant,
    /// Which way.
    pub dir: Dir,
    /// The datagram.
    pub bytes: Vec<u8>,
    /// Dropped by the link (loss, queue overflow or the drop filter).
    pub dropped: bool,
}

impl Traced {
    /// The datagram parsed, if it is a UDT packet.
    pub fn repr(&self) -> Option<Repr<'_>> {
        Repr::parse_bytes(&self.bytes).ok()
    }
    /// The control information, if it is a control packet.
    pub fn control(&self) -> Option<Control<'_>> {
        match self.repr()? {
            Repr::Control { control, .. } => Some(control),
            _ => None,
        }
    }
}

/// One direction: its config and the delay line built from it.
#[derive(Debug)]
struct Link {
    config: LinkConfig,
    /// The config `line` was built from; when [`Pair::link_mut`] changed `config`, the next
    /// datagram starts a new line.
    built: LinkConfig,
    line: DelayLine<Vec<u8>>,
    /// Lines replaced after a config change, still releasing what they hold.
    retired: Vec<DelayLine<Vec<u8>>>,
    /// Seed of this direction's first line; later lines mix in `generation`.
    seed: u64,
    generation: u64,
    /// See [`Pair::set_late_release`]: zero = deliver on time.
    release_every: Duration,
    last_release: Instant,
}

impl Link {
    fn new(config: LinkConfig, seed: u64) -> Link {
        Link {
            line: DelayLine::new(&config.spec(seed)),
            built: config.clone(),
            config,
            retired: Vec::new(),
            seed,
            generation: 0,
            release_every: Duration::ZERO,
            last_release: Instant::ZERO,
        }
    }

    /// Starts a new line if the config changed since the current one was built.
    fn refresh(&mut self) {
        if self.config == self.built {
            return;
        }
        self.generation += 1;
        let seed = self.seed ^ self.generation.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let old = std::mem::replace(&mut self.line, DelayLine::new(&self.config.spec(seed)));
        if old.in_flight() > 0 {
            self.retired.push(old);
        }
        self.built = self.config.clone();
    }

    /// When the next datagram leaves one of this direction's lines, on the µs clock.
    fn poll_timeout(&self) -> Option<Instant> {
        self.retired
            .iter()
            .chain(std::iter::once(&self.line))
            .filter_map(DelayLine::poll_timeout)
            .min()
            .map(|ns| Instant::from_micros(ns.div_ceil(1000)))
    }
}

/// Nanoseconds on the delay lines' clock of `t` on the pair's.
fn nanos(t: Instant) -> u64 {
    t.as_micros().saturating_mul(1000)
}

/// Drop filter: return `true` to drop the datagram.
pub type DropFilter = Box<dyn FnMut(Dir, &[u8]) -> bool>;

/// The harness.
pub struct Pair {
    /// The virtual clock.
    pub now: Instant,
    /// The endpoint at `a_addr` (the client in [`connect`](Self::connect)).
    pub a: Endpoint,
    /// The endpoint at `b_addr` (the listener in [`connect`](Self::connect)).
    pub b: Endpoint,
    /// `a`'s address, 10.0.0.1:9000.
    pub a_addr: SocketAddr,
    /// `b`'s address, 10.0.0.2:9000.
    pub b_addr: SocketAddr,
    links: [Link; 2],
    /// Datagrams released by a line, with their arrival time (after [`Pair::set_late_release`])
    /// and insertion order.
    in_flight: Vec<(Instant, u64, Dir, Vec<u8>)>,
    order: u64,
    /// Sees every datagram before the link; `true` drops it (see the [module docs](self)).
    pub drop_filter: Option<DropFilter>,
    /// Every datagram sent, with its fate, while `tracing` is on.
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

    /// `a_to_b` and `b_to_a` configure the two directions; each gets its own delay line,
    /// seeded from `seed` and the direction.
    pub fn asymmetric(seed: u64, a_to_b: LinkConfig, b_to_a: LinkConfig) -> Pair {
        let link_seed = |dir: Dir| (seed ^ 0x5DEE_CE66_D1CE_4E5B).wrapping_add((dir as u64 + 1) << 32);
        Pair {
            now: Instant::from_micros(1_000_000),
            a: Endpoint::new(seed.wrapping_mul(3).wrapping_add(1)),
            b: Endpoint::new(seed.wrapping_mul(7).wrapping_add(2)),
            a_addr: SocketAddr::from(([10, 0, 0, 1], 9000)),
            b_addr: SocketAddr::from(([10, 0, 0, 2], 9000)),
            links: [Link::new(a_to_b, link_seed(Dir::AtoB)), Link::new(b_to_a, link_seed(Dir::BtoA))],
            in_flight: Vec::new(),
            order: 0,
            drop_filter: None,
            trace: Vec::new(),
            tracing: true,
            buf: vec![0; 65_536],
        }
    }

    /// The config of `dir`. A change applies to datagrams sent afterwards: the next one
    /// starts a fresh delay line (idle bottleneck, new random streams) while the datagrams
    /// already on the old line arrive as it scheduled them.
    pub fn link_mut(&mut self, dir: Dir) -> &mut LinkConfig {
        &mut self.links[dir as usize].config
    }

    /// Makes `dir` deliver like a link emulator that gets the CPU only every `every`: what
    /// fell due meanwhile arrives in one burst, 2 µs apart (`udt-linkem`'s `bunched` frames on
    /// a busy machine). Zero restores on-time delivery. Applied to the delay line's release
    /// times: a datagram released at `r` arrives at the next multiple of `every` at or after
    /// `r`, and no sooner than 2 µs after the previous arrival of that direction.
    pub fn set_late_release(&mut self, dir: Dir, every: Duration) {
        self.links[dir as usize].release_every = every;
    }

    /// `a` connects to a listener on `b`; runs until both ends are connected. Returns (client
    /// ID on a, accepted ID on b).
    ///
    /// # Panics
    /// If the connection is not established within 10 s of virtual time, or as
    /// [`Pair::step`] does.
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

    /// Offers a datagram to `dir`: the drop filter first, then the delay line.
    fn send_from(&mut self, dir: Dir, bytes: Vec<u8>) {
        let now = self.now;
        let mut dropped = self.drop_filter.as_mut().is_some_and(|f| f(dir, &bytes));
        let traced = self.tracing.then(|| bytes.clone());
        if !dropped {
            let link = &mut self.links[dir as usize];
            link.refresh();
            let wire_len = u32::try_from(bytes.len() + IP_UDP_HEADERS).unwrap_or(u32::MAX);
            dropped = match link.line.handle_frame(nanos(now), wire_len, bytes) {
                Admission::Queued { .. } => false,
                Admission::DroppedLoss | Admission::DroppedQueue => true,
            };
        }
        if let Some(bytes) = traced {
            self.trace.push(Traced { time: now, dir, bytes, dropped });
        }
    }

    /// Moves what the delay lines release by `now` into `in_flight`, with its arrival time.
    fn release_due(&mut self) {
        let now_ns = nanos(self.now);
        for dir in [Dir::AtoB, Dir::BtoA] {
            let link = &mut self.links[dir as usize];
            let every = micros(link.release_every);
            for line in link.retired.iter_mut().chain(std::iter::once(&mut link.line)) {
                while let Some(release) = line.poll_timeout().filter(|&r| r <= now_ns) {
                    let Some(bytes) = line.poll_frame(now_ns) else { break };
                    let mut arrive = Instant::from_micros(release.div_ceil(1000));
                    if every > 0 {
                        let slot = Instant::from_micros(arrive.as_micros().div_ceil(every) * every);
                        arrive = slot.max(link.last_release + Duration::from_micros(2));
                        link.last_release = arrive;
                    }
                    self.order += 1;
                    self.in_flight.push((arrive, self.order, dir, bytes));
                }
            }
            link.retired.retain(|l| l.in_flight() > 0);
        }
    }

    /// Processes everything due at the current time, then advances the clock to the next
    /// event. Returns false when nothing at all is pending.
    ///
    /// # Panics
    /// If a link has `rate_bps: Some(0)` and a datagram is sent on it.
    pub fn step(&mut self) -> bool {
        loop {
            let mut progressed = false;
            // Deliver arrivals due now, in arrival order.
            self.release_due();
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
        let next = [
            self.in_flight.iter().map(|&(t, ..)| t).min(),
            self.links[0].poll_timeout(),
            self.links[1].poll_timeout(),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
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
    ///
    /// # Panics
    /// As [`Pair::step`] does.
    pub fn run_until(&mut self, t: Instant) {
        while self.now < t {
            if !self.step() {
                self.now = t;
            }
        }
    }

    /// Runs for `d` of virtual time.
    ///
    /// # Panics
    /// As [`Pair::step`] does.
    pub fn run_for(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Reads from `b`'s connection `id` until `len` bytes arrived or `timeout` passed.
    ///
    /// # Panics
    /// As [`Pair::step`] does.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Arrival times (µs after `t0`) and first bytes of what the lines released by `p.now`.
    fn released(p: &mut Pair, t0: Instant) -> Vec<(u64, u8)> {
        p.release_due();
        p.in_flight.sort_by_key(|&(t, o, ..)| (t, o));
        p.in_flight.iter().map(|(t, _, _, b)| (t.duration_since(t0).as_micros() as u64, b[0])).collect()
    }

    #[test]
    fn links_serialize_headers_too_drop_tail_and_arrive_at_the_next_microsecond() {
        // 1222 B + 28 B of IP/UDP = 10 000 bits: 3333.33.. µs at 3 Mbit/s, the remainder
        // carried in ns; a 3-packet queue takes the first three of a burst of five.
        let link = LinkConfig {
            delay: Duration::from_micros(500),
            rate_bps: Some(3_000_000),
            queue_pkts: 3,
            ..LinkConfig::default()
        };
        let mut p = Pair::new(1, link);
        let t0 = p.now;
        for i in 0..5 {
            p.send_from(Dir::AtoB, vec![i; 1222]);
        }
        let dropped: Vec<bool> = p.trace.iter().map(|t| t.dropped).collect();
        assert_eq!(dropped, [false, false, false, true, true]);
        p.now = t0 + Duration::from_micros(7_166);
        assert_eq!(released(&mut p, t0), [(3_834, 0)], "released at 3 833 833 ns");
        p.now = t0 + Duration::from_millis(20);
        assert_eq!(released(&mut p, t0), [(3_834, 0), (7_167, 1), (10_500, 2)]);
    }

    #[test]
    fn a_duplicate_arrives_right_behind_its_original() {
        let mut p = Pair::new(2, LinkConfig { duplicate: 1.0, ..LinkConfig::default() });
        let t0 = p.now;
        p.send_from(Dir::BtoA, vec![1; 100]);
        p.send_from(Dir::BtoA, vec![2; 100]);
        p.now = t0 + Duration::from_millis(1);
        assert_eq!(released(&mut p, t0), [(1_000, 1), (1_000, 1), (1_000, 2), (1_000, 2)]);
    }
}
