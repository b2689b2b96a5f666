//! A SABUL flow's two ends: the real [`sabul::Sender`] and [`sabul::Receiver`] (SABUL.md),
//! DATA as datagrams through the links, the control connection as the simulator's
//! [`Channel::Stream`] (in order, lossless, after the path's propagation delay).
//!
//! A zero-length stream packet stands for the control connection's FIN (§10.1): the sender
//! half-closes once everything is acknowledged, the receiver answers with its own.

use std::net::SocketAddr;

use sabul::{Event, Receiver, ReceiverConfig, Sender, SenderConfig};
use transfer::time::Instant;
use transfer::transmit::Source;

use crate::agent::{Agent, AgentStats, Channel, Emit};
use crate::udt::{SOURCE, UDP_IP_HEADERS};

const SENDER_ADDR: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 1), 7000));
const RECEIVER_ADDR: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 2), 7000));

/// TCP/IP header bytes of a control-stream segment (only for `Emit::wire_len`; streams skip
/// the links).
const TCP_IP_HEADERS: u32 = 40;

fn emit(size: usize, source: Source) -> Emit {
    match source {
        Source::Data => Emit { size, wire_len: size as u32 + UDP_IP_HEADERS, channel: Channel::Datagram },
        Source::Control => Emit { size, wire_len: size as u32 + TCP_IP_HEADERS, channel: Channel::Stream },
    }
}

/// The sending end: the receiver's control connection was accepted at the start.
pub struct SabulSender {
    sender: Sender,
    remaining: Option<u64>,
    stopped: bool,
    finished: bool,
    fin_due: bool,
    done: bool,
}

impl SabulSender {
    /// A sender with `config`, sending `bytes` (`None`: endlessly) from `now`.
    pub fn new(config: SenderConfig, bytes: Option<u64>, now: Instant) -> SabulSender {
        let mut s = SabulSender {
            sender: Sender::new(config, RECEIVER_ADDR, now),
            remaining: bytes,
            stopped: false,
            finished: false,
            fin_due: false,
            done: false,
        };
        s.fill();
        s
    }

    fn fill(&mut self) {
        // `has_room`: before the echo the sender would hold every byte offered (§3.4).
        while !self.stopped && self.remaining != Some(0) && self.sender.has_room() {
            let want = self.remaining.map_or(SOURCE.len(), |r| r.min(SOURCE.len() as u64) as usize);
            let n = self.sender.send(&SOURCE[..want]);
            if n == 0 {
                break;
            }
            if let Some(r) = self.remaining.as_mut() {
                *r -= n as u64;
            }
        }
        if (self.stopped || self.remaining == Some(0)) && !self.finished {
            self.sender.finish();
            self.finished = true;
        }
    }

    fn events(&mut self) {
        while let Some(e) = self.sender.poll_event() {
            match e {
                Event::ShutdownWrite => self.fin_due = true,
                Event::Finished | Event::Aborted(_) => self.done = true,
                Event::Connected => {}
            }
        }
    }
}

impl Agent for SabulSender {
    fn handle_packet(&mut self, now: Instant, channel: Channel, bytes: &[u8]) {
        match channel {
            Channel::Stream if bytes.is_empty() => self.sender.handle_control_closed(now, false),
            Channel::Stream => self.sender.handle_control(now, bytes),
            Channel::Datagram => {} // SABUL sends its sender no datagrams
        }
        self.fill();
        self.events();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.sender.handle_timeout(now);
        self.fill();
        self.events();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.sender.poll_timeout()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        if let Some(t) = self.sender.poll_transmit(now, buf) {
            self.fill();
            return Some(emit(t.size, t.source));
        }
        self.events();
        if std::mem::take(&mut self.fin_due) {
            return Some(Emit { size: 0, wire_len: TCP_IP_HEADERS, channel: Channel::Stream });
        }
        None
    }

    fn stop(&mut self, _now: Instant) {
        self.stopped = true;
        self.fill();
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn stats(&self) -> AgentStats {
        let s = self.sender.stats();
        AgentStats {
            delivered: 0,
            packets_sent: s.pkts_sent,
            retransmitted: s.retrans,
            loss_events: s.errs_recv,
            window: 0.0,
            period_us: self.sender.controller().get().pacing_period_us(),
            rtt_us: 0.0,
        }
    }
}

/// The receiving end: sends its option block at the start, reads and counts what arrives.
pub struct SabulReceiver {
    receiver: Receiver,
    delivered: u64,
    expect: Option<u64>,
    fin_due: bool,
    scratch: Vec<u8>,
}

impl SabulReceiver {
    /// A receiver with `config`, done once `expect` bytes were read (`None`: never).
    pub fn new(config: ReceiverConfig, expect: Option<u64>, now: Instant) -> SabulReceiver {
        SabulReceiver {
            receiver: Receiver::new(config, SENDER_ADDR, now),
            delivered: 0,
            expect,
            fin_due: false,
            scratch: vec![0; 1 << 16],
        }
    }

    fn drain(&mut self) {
        loop {
            let n = self.receiver.read(&mut self.scratch);
            if n == 0 {
                break;
            }
            self.delivered += n as u64;
        }
        while let Some(e) = self.receiver.poll_event() {
            if e == Event::Finished {
                self.fin_due = true;
            }
        }
    }
}

impl Agent for SabulReceiver {
    fn handle_packet(&mut self, now: Instant, channel: Channel, bytes: &[u8]) {
        match channel {
            Channel::Stream if bytes.is_empty() => self.receiver.handle_control_closed(now, false),
            Channel::Stream => self.receiver.handle_control(now, bytes),
            Channel::Datagram => self.receiver.handle_datagram(now, SENDER_ADDR, bytes),
        }
        self.drain();
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.receiver.handle_timeout(now);
        self.drain();
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.receiver.poll_timeout()
    }

    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        if let Some(t) = self.receiver.poll_transmit(now, buf) {
            return Some(emit(t.size, t.source));
        }
        if std::mem::take(&mut self.fin_due) {
            return Some(Emit { size: 0, wire_len: TCP_IP_HEADERS, channel: Channel::Stream });
        }
        None
    }

    fn stop(&mut self, _now: Instant) {}

    fn is_done(&self) -> bool {
        self.expect.is_some_and(|n| self.delivered >= n)
    }

    fn stats(&self) -> AgentStats {
        AgentStats { delivered: self.delivered, ..AgentStats::default() }
    }
}
