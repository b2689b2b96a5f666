//! A sender and a receiver of SABUL's family over an in-memory pipe with a virtual clock
//! (SABUL.md §2, §5, §6, §10; FRTP.md §2): the control stream is a pair of byte queues with
//! latency; the data path is a [`DelayLine`] of the workspace's one link model (`link-model`,
//! what `udt-linkem`, the simulator and UDT's `pair::Pair` run) with the same latency and
//! seeded loss, reordering and duplication. Shared by the SABUL and the FRTP tests
//! (`#[path]`), so that both protocols run on one harness.
//!
//! The data path's line is built from [`Impairment`] and `delay`: loss before anything else,
//! no rate limit, a held-back datagram arrives [`REORDER_DELAY`] late (so the ones sent
//! meanwhile overtake it), and a duplicated one arrives twice in a row. Time is the pair's
//! µs clock; the line counts ns, and a datagram it releases at `r` ns arrives at `⌈r/1000⌉` µs.
//! Changing `imp` or `delay` applies to datagrams sent afterwards: the next one starts a fresh
//! line, while the old one still delivers what it holds.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;

use link_model::delay_line::{Admission, DelayLine, DelayLineStats};
use link_model::link_spec::LinkSpec;
use link_model::loss::LossSpec;
use sabul::control_stream::{ControlDecoder, Decoded};
use sabul::wire::{Control, DataPacket};
use sabul::{Event, Receiver, ReceiverConfig, Sender, SenderConfig};
use transfer::time::{Duration, Instant};
use transfer::transmit::Source;

pub(crate) const S_ADDR: &str = "10.0.0.1:7000";
pub(crate) const R_ADDR: &str = "10.0.0.2:7001";

/// How a held-back datagram is late: several packet times at the rates the tests send at.
pub(crate) const REORDER_DELAY: Duration = Duration::from_millis(2);

/// The data path's impairments, each a probability per datagram offered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Impairment {
    pub loss: f64,
    pub reorder: f64,
    pub duplicate: f64,
}

pub(crate) const CLEAN: Impairment = Impairment { loss: 0.0, reorder: 0.0, duplicate: 0.0 };

pub(crate) enum StreamItem {
    Bytes(Vec<u8>),
    Fin,
    Reset,
}

pub(crate) struct Pair {
    pub now: Instant,
    pub sender: Sender,
    pub receiver: Receiver,
    pub delay: Duration,
    /// The data path: DATA from the sender's address to wherever it was sent.
    pub data: DataPath,
    pub to_sender: VecDeque<(Instant, StreamItem)>,
    pub to_receiver: VecDeque<(Instant, StreamItem)>,
    pub imp: Impairment,
    pub input: Vec<u8>,
    pub offered: usize,
    pub output: Vec<u8>,
    pub sender_events: Vec<Event>,
    pub receiver_events: Vec<Event>,
    pub data_sent: u64,
    /// The receiver's frames as the sender reads them.
    pub tap: ControlDecoder,
    pub syn_total: u64,
    pub steps: u64,
    /// Where DATA must go (the receiver's data address).
    pub data_to: SocketAddr,
    /// Every DATA departure: (time, sequence number).
    pub departures: Vec<(Instant, u32)>,
}

impl Pair {
    pub(crate) fn new(input: Vec<u8>, imp: Impairment, seed: u64) -> Pair {
        Pair::with(input, imp, seed, SenderConfig::default(), ReceiverConfig { data_port: 7001, ..Default::default() })
    }

    pub(crate) fn with(input: Vec<u8>, imp: Impairment, seed: u64, sc: SenderConfig, rc: ReceiverConfig) -> Pair {
        let now = Instant::from_micros(1_000_000);
        let tap = ControlDecoder::sender_for(&sc.profile);
        Pair {
            now,
            sender: Sender::new(sc, R_ADDR.parse().unwrap(), now),
            receiver: Receiver::new(rc, S_ADDR.parse().unwrap(), now),
            delay: Duration::from_millis(5),
            data: DataPath::new(seed),
            to_sender: VecDeque::new(),
            to_receiver: VecDeque::new(),
            imp,
            input,
            offered: 0,
            output: Vec::new(),
            sender_events: Vec::new(),
            receiver_events: Vec::new(),
            data_sent: 0,
            tap,
            data_to: R_ADDR.parse().unwrap(),
            departures: Vec::new(),
            syn_total: 0,
            steps: 0,
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        if self.steps == 0 {
            return Some(self.now); // the receiver's option block is queued from the start
        }
        [
            self.sender.poll_timeout(),
            self.receiver.poll_timeout(),
            self.data.poll_timeout(),
            self.to_sender.front().map(|x| x.0),
            self.to_receiver.front().map(|x| x.0),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(crate) fn step(&mut self) -> bool {
        let Some(t) = self.next_wakeup() else { return false };
        self.now = self.now.max(t);
        let now = self.now;
        self.steps += 1;
        // deliver
        let from: SocketAddr = S_ADDR.parse().unwrap();
        while let Some(bytes) = self.data.poll_datagram(now) {
            self.receiver.handle_datagram(now, from, &bytes);
        }
        while self.to_sender.front().is_some_and(|x| x.0 <= now) {
            match self.to_sender.pop_front().unwrap().1 {
                StreamItem::Bytes(b) => {
                    for c in b.chunks(7) {
                        self.sender.handle_control(now, c);
                    }
                }
                StreamItem::Fin => self.sender.handle_control_closed(now, false),
                StreamItem::Reset => self.sender.handle_control_closed(now, true),
            }
        }
        while self.to_receiver.front().is_some_and(|x| x.0 <= now) {
            match self.to_receiver.pop_front().unwrap().1 {
                StreamItem::Bytes(b) => self.receiver.handle_control(now, &b),
                StreamItem::Fin => self.receiver.handle_control_closed(now, false),
                StreamItem::Reset => self.receiver.handle_control_closed(now, true),
            }
        }
        self.sender.handle_timeout(now);
        self.receiver.handle_timeout(now);
        // application
        while self.offered < self.input.len() {
            let n = self.sender.send(&self.input[self.offered..]);
            if n == 0 {
                break;
            }
            self.offered += n;
        }
        if self.offered == self.input.len() {
            self.sender.finish();
        }
        let mut buf = vec![0u8; 65_536];
        loop {
            let n = self.receiver.read(&mut buf);
            if n == 0 {
                break;
            }
            self.output.extend_from_slice(&buf[..n]);
        }
        // transmit
        while let Some(t) = self.sender.poll_transmit(now, &mut buf) {
            let bytes = buf[..t.size].to_vec();
            match t.source {
                Source::Control => self.to_receiver.push_back((now + self.delay, StreamItem::Bytes(bytes))),
                Source::Data => {
                    assert_eq!(t.destination, self.data_to);
                    self.data_sent += 1;
                    self.departures.push((now, DataPacket::new_checked(&bytes[..], 65_507).unwrap().seq().get()));
                    self.data.send(now, self.imp, self.delay, bytes);
                }
            }
        }
        while let Some(t) = self.receiver.poll_transmit(now, &mut buf) {
            assert_eq!(t.source, Source::Control);
            let bytes = buf[..t.size].to_vec();
            let mut c: &[u8] = &bytes;
            while let Ok(Some(item)) = self.tap.decode(&mut c) {
                if let Decoded::Frame(Control::Syn(n)) = item {
                    self.syn_total += u64::from(n);
                }
            }
            self.to_sender.push_back((now + self.delay, StreamItem::Bytes(bytes)));
        }
        while let Some(e) = self.sender.poll_event() {
            if e == Event::ShutdownWrite {
                self.to_receiver.push_back((now + self.delay, StreamItem::Fin));
            }
            self.sender_events.push(e);
        }
        while let Some(e) = self.receiver.poll_event() {
            if e == Event::Finished {
                self.to_sender.push_back((now + self.delay, StreamItem::Fin));
            }
            self.receiver_events.push(e);
        }
        true
    }

    /// DATA datagrams the data path delivers twice (both copies arrive).
    pub(crate) fn duplicates_made(&self) -> u64 {
        self.data.stats().duplicated
    }

    /// Runs until both sides ended or `limit` of virtual time passed.
    pub(crate) fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        while self.now < end && self.step() {
            let done = |ev: &[Event]| ev.iter().any(|e| matches!(e, Event::Finished | Event::Aborted(_)));
            if done(&self.sender_events) && done(&self.receiver_events) && self.receiver.is_drained() {
                break;
            }
        }
    }

    pub(crate) fn finished(&self) -> bool {
        self.sender_events.last() == Some(&Event::Finished) && self.receiver_events.last() == Some(&Event::Finished)
    }
}

/// The data path: the delay line built from the current impairments, after the lines built
/// from earlier ones, which still deliver what they hold.
pub(crate) struct DataPath {
    /// Oldest first; the last is the current one.
    lines: Vec<DelayLine<Vec<u8>>>,
    /// What the current line was built from (`None` before the first datagram).
    built: Option<(Impairment, Duration)>,
    seed: u64,
}

/// Nanoseconds on the delay line's clock of `t` on the pair's.
fn nanos(t: Instant) -> u64 {
    t.as_micros() * 1000
}

impl DataPath {
    fn new(seed: u64) -> DataPath {
        DataPath { lines: Vec::new(), built: None, seed }
    }

    fn spec(imp: Impairment, delay: Duration, seed: u64) -> LinkSpec {
        LinkSpec {
            delay_ns: delay.as_micros() as u64 * 1000,
            loss: if imp.loss > 0.0 { LossSpec::Random { p: imp.loss } } else { LossSpec::None },
            duplicate: imp.duplicate,
            reorder: imp.reorder,
            reorder_delay_ns: REORDER_DELAY.as_micros() as u64 * 1000,
            seed,
            ..LinkSpec::default()
        }
    }

    /// Offers a datagram sent at `now`; returns whether the line took it (not lost). A
    /// change of `imp` or `delay` starts a new line (fresh random streams).
    fn send(&mut self, now: Instant, imp: Impairment, delay: Duration, bytes: Vec<u8>) -> bool {
        if self.built != Some((imp, delay)) {
            let generation = self.lines.len() as u64;
            let seed = self.seed ^ generation.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            self.lines.push(DelayLine::new(&DataPath::spec(imp, delay, seed)));
            self.built = Some((imp, delay));
        }
        let line = self.lines.last_mut().expect("just built");
        let wire_len = u32::try_from(bytes.len()).unwrap();
        matches!(line.handle_frame(nanos(now), wire_len, bytes), Admission::Queued { .. })
    }

    /// When the next datagram arrives, on the pair's µs clock.
    fn poll_timeout(&self) -> Option<Instant> {
        self.lines.iter().filter_map(DelayLine::poll_timeout).min().map(|ns| Instant::from_micros(ns.div_ceil(1000)))
    }

    /// The next datagram that has arrived by `now`, oldest line first. Released at `r` ns, a
    /// datagram arrives at ⌈r/1000⌉ µs: by `now` if `r ≤ now·1000`.
    fn poll_datagram(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.lines.iter_mut().find_map(|l| l.poll_frame(nanos(now)))
    }

    /// The counters of all the lines together: datagrams offered, lost, held back,
    /// duplicated, delivered.
    pub(crate) fn stats(&self) -> DelayLineStats {
        self.lines.iter().map(DelayLine::stats).fold(DelayLineStats::default(), |a, b| DelayLineStats {
            frames_in: a.frames_in + b.frames_in,
            bytes_in: a.bytes_in + b.bytes_in,
            frames_out: a.frames_out + b.frames_out,
            bytes_out: a.bytes_out + b.bytes_out,
            dropped_loss: a.dropped_loss + b.dropped_loss,
            dropped_queue: a.dropped_queue + b.dropped_queue,
            duplicated: a.duplicated + b.duplicated,
            reordered: a.reordered + b.reordered,
        })
    }

    /// Datagrams in flight on the path.
    pub(crate) fn in_flight(&self) -> usize {
        self.lines.iter().map(DelayLine::in_flight).sum()
    }
}
