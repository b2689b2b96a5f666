//! A sender and a receiver of SABUL's family over an in-memory pipe with a virtual clock
//! (SABUL.md §2, §5, §6, §10; FRTP.md §2): the control stream is a pair of byte queues with
//! latency; the data path a datagram link with latency and seeded loss, reordering and
//! duplication (the core's PRNG). Shared by the SABUL and the FRTP tests (`#[path]`), so
//! that both protocols run on one harness.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;

use sabul::control_stream::{ControlDecoder, Decoded};
use sabul::wire::{Control, DataPacket};
use sabul::{Event, Receiver, ReceiverConfig, Sender, SenderConfig};
use transfer::prng::Xoshiro256;
use transfer::time::{Duration, Instant};
use transfer::transmit::Source;

pub const S_ADDR: &str = "10.0.0.1:7000";
pub const R_ADDR: &str = "10.0.0.2:7001";

#[derive(Clone, Copy, Debug)]
pub struct Impairment {
    pub loss: f64,
    pub reorder: f64,
    pub duplicate: f64,
}

pub const CLEAN: Impairment = Impairment { loss: 0.0, reorder: 0.0, duplicate: 0.0 };

pub enum StreamItem {
    Bytes(Vec<u8>),
    Fin,
    Reset,
}

pub struct Pair {
    pub now: Instant,
    pub sender: Sender,
    pub receiver: Receiver,
    pub delay: Duration,
    /// DATA in flight: (arrival, from, bytes).
    pub data: Vec<(Instant, SocketAddr, Vec<u8>)>,
    pub to_sender: VecDeque<(Instant, StreamItem)>,
    pub to_receiver: VecDeque<(Instant, StreamItem)>,
    pub rng: Xoshiro256,
    pub imp: Impairment,
    pub input: Vec<u8>,
    pub offered: usize,
    pub output: Vec<u8>,
    pub sender_events: Vec<Event>,
    pub receiver_events: Vec<Event>,
    pub data_sent: u64,
    pub duplicates_made: u64,
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
    pub fn new(input: Vec<u8>, imp: Impairment, seed: u64) -> Pair {
        Pair::with(input, imp, seed, SenderConfig::default(), ReceiverConfig { data_port: 7001, ..Default::default() })
    }

    pub fn with(input: Vec<u8>, imp: Impairment, seed: u64, sc: SenderConfig, rc: ReceiverConfig) -> Pair {
        let now = Instant::from_micros(1_000_000);
        let tap = ControlDecoder::sender_for(&sc.profile);
        Pair {
            now,
            sender: Sender::new(sc, R_ADDR.parse().unwrap(), now),
            receiver: Receiver::new(rc, S_ADDR.parse().unwrap(), now),
            delay: Duration::from_millis(5),
            data: Vec::new(),
            to_sender: VecDeque::new(),
            to_receiver: VecDeque::new(),
            rng: Xoshiro256::seed_from_u64(seed),
            imp,
            input,
            offered: 0,
            output: Vec::new(),
            sender_events: Vec::new(),
            receiver_events: Vec::new(),
            data_sent: 0,
            duplicates_made: 0,
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
            self.data.iter().map(|d| d.0).min(),
            self.to_sender.front().map(|x| x.0),
            self.to_receiver.front().map(|x| x.0),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub fn step(&mut self) -> bool {
        let Some(t) = self.next_wakeup() else { return false };
        self.now = self.now.max(t);
        let now = self.now;
        self.steps += 1;
        // deliver
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.data).into_iter().partition(|d| d.0 <= now);
        self.data = later;
        for (_, from, bytes) in due {
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
                    self.send_datagram(now, bytes);
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

    fn send_datagram(&mut self, now: Instant, bytes: Vec<u8>) {
        if self.rng.chance(self.imp.loss) {
            return;
        }
        let mut at = now + self.delay;
        if self.rng.chance(self.imp.reorder) {
            at += Duration::from_micros(self.rng.below(3_000));
        }
        if self.rng.chance(self.imp.duplicate) {
            self.duplicates_made += 1;
            self.data.push((at + Duration::from_micros(100), S_ADDR.parse().unwrap(), bytes.clone()));
        }
        self.data.push((at, S_ADDR.parse().unwrap(), bytes));
    }

    /// Runs until both sides ended or `limit` of virtual time passed.
    pub fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        while self.now < end && self.step() {
            let done = |ev: &[Event]| ev.iter().any(|e| matches!(e, Event::Finished | Event::Aborted(_)));
            if done(&self.sender_events) && done(&self.receiver_events) && self.receiver.is_drained() {
                break;
            }
        }
    }

    pub fn finished(&self) -> bool {
        self.sender_events.last() == Some(&Event::Finished) && self.receiver_events.last() == Some(&Event::Finished)
    }
}
