//! The network: links, flows and one event queue in virtual time.
//!
//! A [`Network`] holds one-way links, each a [`link_model::delay_line::DelayLine`] — the
//! very delay line, DropTail serialisation queue and loss model `udt-linkem` runs on real
//! interfaces (docs/link-emulation.md) — and flows, each two [`Agent`]s with a route of links
//! per direction. A datagram an agent emits enters the first link of its route; when a link
//! releases it, it enters the next one, and after the last it is handed to the other end.
//! [`Channel::Stream`] bytes skip the links and arrive, in order, after the route's summed
//! propagation delay.
//!
//! Time is integer nanoseconds since the start of the run (the links' unit); agents see
//! [`Instant`]s in µs, offset by [`EPOCH`] so that no core ever sees instant zero. Events sit
//! in one binary heap ordered by (time, insertion order), so a run is a pure function of its
//! setup and seeds: the same inputs give the same bytes of output.
//!
//! The call order per event: deliver or fire timers, then drain the agent's
//! [`Agent::poll_transmit`], then re-arm its timer from [`Agent::poll_timeout`]. An agent
//! whose timer is due again within the same µs is woken at the next µs (cores count in µs).
//!
//! A sender may have a socket buffer on its route's first link ([`SocketLimit`]): the sending
//! host's own NIC, whose queue holds the datagrams of every socket on the host. A socket may
//! have at most `packets` of its datagrams in that queue; while it has, its sender blocks, as a
//! blocking `sendto` does on a full UDP send buffer: the network asks it for nothing more
//! until one of them has left the NIC, and its timers that came due meanwhile fire then (a
//! block lasts as long as the NIC takes to send its queue: milliseconds). What the shared
//! queue cannot hold is still dropped (DropTail).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use link_model::delay_line::{Admission, DelayLine, DelayLineStats};
use link_model::link_spec::LinkSpec;
use transfer::time::Instant;

use crate::agent::{Agent, AgentStats, Channel};

/// Virtual time in nanoseconds since the run began.
pub type Nanos = u64;

/// The instant agents see when the run begins (1 s, like the runtime's clock).
pub const EPOCH: Instant = Instant::from_micros(1_000_000);

/// A link of the network, as [`Network::add_link`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// A flow of the network, as [`Network::add_flow`] returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub usize);

/// Builds a flow's two ends when it starts: `(sender, receiver)`, given the start instant.
pub type MakeEnds = Box<dyn FnOnce(Instant) -> (Box<dyn Agent>, Box<dyn Agent>)>;

/// A sender's UDP send buffer on the first link of its route (the host's NIC): at most
/// `packets` of its datagrams queued there, or its sends block (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketLimit {
    /// The first link of the sender's route.
    pub link: LinkId,
    /// How many of the sender's datagrams that link may hold before its sends block.
    pub packets: u32,
}

/// How a flow is set up: its routes, its life time and its ends.
pub struct FlowSetup {
    /// The flow's name in the results.
    pub name: String,
    /// Links from the sender to the receiver, in order.
    pub forward: Vec<LinkId>,
    /// Links from the receiver back to the sender, in order.
    pub reverse: Vec<LinkId>,
    /// When the flow starts: its ends are built and may send.
    pub start: Nanos,
    /// When the sender stops (`None`: never): it is told ([`Agent::stop`]) and then falls
    /// silent, as a host whose application ended; what it sent before still arrives.
    pub stop: Option<Nanos>,
    /// The sender's send buffer on its first link (`None`: its sends never block).
    pub socket: Option<SocketLimit>,
    /// Builds the two ends at the start.
    pub make: MakeEnds,
}

/// A datagram on its way: whose it is, where it goes and how far it got.
#[derive(Debug, Clone)]
struct Packet {
    flow: u32,
    /// The end it is for: 0 the sender, 1 the receiver.
    to: u8,
    /// Index into the route of the link it is on.
    hop: u8,
    wire_len: u32,
    bytes: Box<[u8]>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The flow's start time: build its ends.
    Start(u32),
    /// The flow's stop time: its sender offers no more new data.
    Stop(u32),
    /// The link's next frame may be due.
    Link(u32),
    /// The agent's timer may be due (agent index = flow·2 + end).
    Agent(u32),
    /// Stream bytes for the agent may have arrived.
    Stream(u32),
    /// Every flow's counters are sampled.
    Sample,
}

struct Link {
    name: String,
    line: DelayLine<Packet>,
    delay: Nanos,
    /// The time of this link's pending event in the heap, or `Nanos::MAX`.
    armed: Nanos,
}

struct Flow {
    name: String,
    routes: [Vec<LinkId>; 2],
    /// Propagation delay of each direction (index: the end it goes to).
    stream_delay: [Nanos; 2],
    start: Nanos,
    stop: Option<Nanos>,
    make: Option<MakeEnds>,
    /// Sender and receiver, once started.
    ends: [Option<Box<dyn Agent>>; 2],
    armed: [Nanos; 2],
    /// Stream bytes in flight to each end: (arrival, bytes; empty = the stream closed).
    stream: [VecDeque<(Nanos, Box<[u8]>)>; 2],
    /// What each sample saw.
    samples: Vec<FlowSample>,
    finished_at: Option<Nanos>,
    /// The stop time passed: the sender is silent (it neither sends nor hears anything more).
    stopped: bool,
    socket: Option<SocketLimit>,
    /// The sender's datagrams in the queue of its socket's link.
    in_socket: u32,
    /// The sender's socket is full: it is asked for nothing until one of them leaves.
    blocked: bool,
}

impl Flow {
    /// Whether `packet`, in link `l`'s queue, counts against the sender's socket buffer: a
    /// datagram to the receiver at its first hop, on its socket's link ([`SocketLimit`]).
    fn in_socket_buffer(&self, packet: &Packet, l: usize) -> bool {
        packet.to == 1 && packet.hop == 0 && self.socket.is_some_and(|s| s.link.0 == l)
    }
}

/// One flow's counters at one sample time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FlowSample {
    /// When the sample was taken, ns of virtual time.
    pub time: Nanos,
    /// The sender's counters (window, period, RTT, packets sent, retransmissions, losses).
    pub sender: AgentStats,
    /// Payload bytes delivered to the receiving application so far.
    pub delivered: u64,
}

/// One link's counters at one sample time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LinkSample {
    /// When the sample was taken, ns of virtual time.
    pub time: Nanos,
    /// Frames in the link's queue.
    pub queue_pkts: usize,
    /// Bytes in the link's queue.
    pub queue_bytes: u64,
    /// The link's cumulative counters.
    pub stats: DelayLineStats,
}

/// The simulated network. See the module docs.
pub struct Network {
    now: Nanos,
    heap: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    order: u64,
    links: Vec<Link>,
    flows: Vec<Flow>,
    sample_every: Nanos,
    link_samples: Vec<Vec<LinkSample>>,
    buf: Vec<u8>,
    /// What the agent being serviced emitted, reused from call to call (the packet path).
    out: Vec<(Channel, u32, Box<[u8]>)>,
    events: u64,
}

impl Network {
    /// An empty network whose flows and links are sampled every `sample_every` ns (0: never).
    pub fn new(sample_every: Nanos) -> Network {
        let mut net = Network {
            now: 0,
            heap: BinaryHeap::new(),
            order: 0,
            links: Vec::new(),
            flows: Vec::new(),
            sample_every,
            link_samples: Vec::new(),
            buf: vec![0; 65_536],
            out: Vec::new(),
            events: 0,
        };
        if sample_every > 0 {
            net.schedule(sample_every, Event::Sample);
        }
        net
    }

    /// Adds a one-way link shaped by `spec` (delay, rate, DropTail queue, loss, seed).
    pub fn add_link(&mut self, name: &str, spec: &LinkSpec) -> LinkId {
        self.links.push(Link {
            name: name.into(),
            line: DelayLine::new(spec),
            delay: spec.delay_ns,
            armed: Nanos::MAX,
        });
        self.link_samples.push(Vec::new());
        LinkId(self.links.len() - 1)
    }

    /// Adds a flow; its ends are built at its start time.
    ///
    /// # Panics
    /// If a route is empty, names a link not in the network, or is longer than 255 links.
    pub fn add_flow(&mut self, setup: FlowSetup) -> FlowId {
        for route in [&setup.forward, &setup.reverse] {
            assert!(!route.is_empty() && route.len() < 256, "a route has 1 to 255 links");
            assert!(route.iter().all(|l| l.0 < self.links.len()), "a route names a link not in the network");
        }
        if let Some(s) = setup.socket {
            assert!(s.link == setup.forward[0] && s.packets > 0, "a socket limit is on the route's first link, ≥ 1");
        }
        let delay = |route: &[LinkId]| route.iter().map(|l| self.links[l.0].delay).sum::<Nanos>();
        let stream_delay = [delay(&setup.reverse), delay(&setup.forward)];
        let id = self.flows.len() as u32;
        self.flows.push(Flow {
            name: setup.name,
            routes: [setup.forward, setup.reverse],
            stream_delay,
            start: setup.start,
            stop: setup.stop,
            make: Some(setup.make),
            ends: [None, None],
            armed: [Nanos::MAX; 2],
            stream: [VecDeque::new(), VecDeque::new()],
            samples: Vec::new(),
            finished_at: None,
            stopped: false,
            socket: setup.socket,
            in_socket: 0,
            blocked: false,
        });
        self.schedule(setup.start.max(self.now), Event::Start(id));
        if let Some(stop) = setup.stop {
            self.schedule(stop.max(self.now), Event::Stop(id));
        }
        FlowId(id as usize)
    }

    /// The current virtual time, ns.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Events processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    fn schedule(&mut self, at: Nanos, event: Event) {
        self.order += 1;
        self.heap.push(Reverse((at, self.order, event)));
    }

    /// Runs every event due before `until`, then sets the clock to `until`.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some(&Reverse((at, _, event))) = self.heap.peek() {
            if at >= until {
                break;
            }
            self.heap.pop();
            self.now = at;
            self.events += 1;
            match event {
                Event::Start(f) => self.start(f as usize),
                Event::Stop(f) => {
                    let flow = &mut self.flows[f as usize];
                    if let Some(end) = flow.ends[0].as_mut() {
                        end.stop(instant(at));
                    }
                    flow.stopped = true;
                }
                Event::Link(l) => self.release(l as usize),
                Event::Agent(a) => {
                    let (f, e) = (a as usize / 2, a as usize % 2);
                    if self.flows[f].armed[e] == at {
                        self.flows[f].armed[e] = Nanos::MAX;
                        self.service(a as usize, true);
                    }
                }
                Event::Stream(a) => self.stream_arrivals(a as usize),
                Event::Sample => self.sample(),
            }
        }
        self.now = self.now.max(until);
    }

    fn start(&mut self, f: usize) {
        let Some(make) = self.flows[f].make.take() else { return };
        let (sender, receiver) = make(instant(self.now));
        self.flows[f].ends = [Some(sender), Some(receiver)];
        self.service(f * 2, false);
        self.service(f * 2 + 1, false);
    }

    /// Fires the agent's due timers (when `timer`), sends what it has, re-arms its timer.
    fn service(&mut self, a: usize, timer: bool) {
        let (f, e) = (a / 2, a % 2);
        let now = self.now;
        let t = instant(now);
        if e == 0 && self.flows[f].stopped {
            return;
        }
        let mut buf = std::mem::take(&mut self.buf);
        // Room in the sender's socket buffer (receivers and unlimited senders: no limit).
        let flow = &self.flows[f];
        let mut room = match flow.socket {
            Some(s) if e == 0 => s.packets.saturating_sub(flow.in_socket),
            _ => u32::MAX,
        };
        let Some(agent) = self.flows[f].ends[e].as_mut() else {
            self.buf = buf;
            return;
        };
        if timer && agent.poll_timeout().is_some_and(|due| due <= t) {
            agent.handle_timeout(t);
        }
        let mut out = std::mem::take(&mut self.out);
        while room > 0 {
            let Some(emit) = agent.poll_transmit(t, &mut buf) else { break };
            if emit.channel == Channel::Datagram && room != u32::MAX {
                room -= 1;
            }
            out.push((emit.channel, emit.wire_len, buf[..emit.size].into()));
        }
        let blocked = room == 0;
        let next = agent.poll_timeout();
        let done = e == 1 && agent.is_done();
        if done && self.flows[f].finished_at.is_none() {
            self.flows[f].finished_at = Some(now);
        }
        self.buf = buf;
        let to = 1 - e as u8;
        for (channel, wire_len, bytes) in out.drain(..) {
            match channel {
                Channel::Datagram => {
                    let packet = Packet { flow: f as u32, to, hop: 0, wire_len, bytes };
                    self.enter(packet);
                }
                Channel::Stream => {
                    let at = now + self.flows[f].stream_delay[to as usize];
                    self.flows[f].stream[to as usize].push_back((at, bytes));
                    self.schedule(at, Event::Stream((f * 2 + to as usize) as u32));
                }
            }
        }
        self.out = out;
        // A datagram the shared queue dropped freed its room at once: not blocked, the timer
        // below asks again.
        let blocked = blocked && self.flows[f].socket.is_some_and(|s| self.flows[f].in_socket >= s.packets);
        if e == 0 {
            self.flows[f].blocked = blocked;
        }
        if blocked && next.is_some_and(|due| due <= t) {
            return; // the sender waits in `sendto`: the socket's next departure services it
        }
        if let Some(due) = next {
            // A core counts in µs: what is due within this µs runs at the next one.
            let us = due.as_micros().max(t.as_micros() + 1);
            let at = (us - EPOCH.as_micros()) * 1000;
            if at < self.flows[f].armed[e] {
                self.flows[f].armed[e] = at;
                self.schedule(at, Event::Agent(a as u32));
            }
        }
    }

    /// The packet enters the link of its route at its `hop`.
    fn enter(&mut self, packet: Packet) {
        let l = self.flows[packet.flow as usize].routes[1 - packet.to as usize][packet.hop as usize].0;
        let now = self.now;
        let flow = &mut self.flows[packet.flow as usize];
        let counted = flow.in_socket_buffer(&packet, l);
        let link = &mut self.links[l];
        if let Admission::Queued { release_at, .. } = link.line.handle_frame(now, packet.wire_len, packet) {
            if counted {
                flow.in_socket += 1;
            }
            if release_at < link.armed {
                link.armed = release_at;
                self.schedule(release_at, Event::Link(l as u32));
            }
        }
    }

    fn release(&mut self, l: usize) {
        let now = self.now;
        if self.links[l].armed != now {
            return;
        }
        self.links[l].armed = Nanos::MAX;
        while let Some(mut packet) = self.links[l].line.poll_frame(now) {
            let flow = &mut self.flows[packet.flow as usize];
            let unblock = if flow.in_socket_buffer(&packet, l) {
                flow.in_socket -= 1;
                std::mem::take(&mut flow.blocked)
            } else {
                false
            };
            if unblock {
                self.service(packet.flow as usize * 2, false);
            }
            let route_len = self.flows[packet.flow as usize].routes[1 - packet.to as usize].len();
            if (packet.hop as usize) + 1 < route_len {
                packet.hop += 1;
                self.enter(packet);
            } else {
                let a = packet.flow as usize * 2 + packet.to as usize;
                if packet.to == 0 && self.flows[packet.flow as usize].stopped {
                    continue;
                }
                if let Some(agent) = self.flows[packet.flow as usize].ends[packet.to as usize].as_mut() {
                    agent.handle_packet(instant(now), Channel::Datagram, &packet.bytes);
                    self.service(a, false);
                }
            }
        }
        if let Some(next) = self.links[l].line.poll_timeout() {
            if next < self.links[l].armed {
                self.links[l].armed = next;
                self.schedule(next, Event::Link(l as u32));
            }
        }
    }

    fn stream_arrivals(&mut self, a: usize) {
        let (f, e) = (a / 2, a % 2);
        let now = self.now;
        while self.flows[f].stream[e].front().is_some_and(|(at, _)| *at <= now) {
            let (_, bytes) = self.flows[f].stream[e].pop_front().expect("checked");
            if e == 0 && self.flows[f].stopped {
                continue;
            }
            if let Some(agent) = self.flows[f].ends[e].as_mut() {
                agent.handle_packet(instant(now), Channel::Stream, &bytes);
            }
        }
        self.service(a, false);
    }

    fn sample(&mut self) {
        let now = self.now;
        for flow in &mut self.flows {
            if flow.start >= now {
                continue; // a sample covers an interval the flow was alive in
            }
            let (Some(sender), Some(receiver)) = (&flow.ends[0], &flow.ends[1]) else { continue };
            flow.samples.push(FlowSample { time: now, sender: sender.stats(), delivered: receiver.stats().delivered });
        }
        for (link, samples) in self.links.iter_mut().zip(&mut self.link_samples) {
            let (queue_pkts, queue_bytes) = link.line.queue_occupancy(now);
            samples.push(LinkSample { time: now, queue_pkts, queue_bytes, stats: link.line.stats() });
        }
        self.schedule(now + self.sample_every, Event::Sample);
    }

    /// The flow's name, samples and when its receiver finished (a finite transfer).
    pub fn flow(&self, id: FlowId) -> (&str, &[FlowSample], Option<Nanos>) {
        let f = &self.flows[id.0];
        (&f.name, &f.samples, f.finished_at)
    }

    /// The flow's start and stop times.
    pub fn flow_times(&self, id: FlowId) -> (Nanos, Option<Nanos>) {
        (self.flows[id.0].start, self.flows[id.0].stop)
    }

    /// How many flows were added.
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// The flow's ends, once started: (sender, receiver).
    pub fn ends(&self, id: FlowId) -> Option<(&dyn Agent, &dyn Agent)> {
        let f = &self.flows[id.0];
        Some((f.ends[0].as_deref()?, f.ends[1].as_deref()?))
    }

    /// The link's name and samples.
    pub fn link(&self, id: LinkId) -> (&str, &[LinkSample]) {
        (&self.links[id.0].name, &self.link_samples[id.0])
    }

    /// The link's cumulative counters now.
    pub fn link_stats(&self, id: LinkId) -> DelayLineStats {
        self.links[id.0].line.stats()
    }
}

/// The agents' instant for virtual time `t`.
pub fn instant(t: Nanos) -> Instant {
    Instant::from_micros(EPOCH.as_micros() + t / 1000)
}
