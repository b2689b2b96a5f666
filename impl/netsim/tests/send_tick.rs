//! A UDT sender whose thread wakes only on a coarse grid (`send_tick_us`, [`SendTick`]): its
//! data leaves on the grid, in bursts that carry the lateness it caught up on, while it still
//! answers the receiver's control packets as they arrive.

use std::cell::RefCell;
use std::rc::Rc;

use link_model::link_spec::{LinkSpec, QueueLimit};
use netsim::agent::{Agent, AgentStats, Channel, Emit};
use netsim::network::{FlowSetup, Network};
use netsim::udt::{SendTick, UdtReceiver, UdtSender, RECEIVER_ADDR};
use transfer::time::Instant;
use udt_proto::config::ConnectionConfig;

/// What a sender emitted: when, and whether it was a data packet (UDT4.md §3: flag bit 0).
type Log = Rc<RefCell<Vec<(Instant, bool)>>>;

/// Passes everything through to the sender it wraps and logs what it emits.
struct Recorder {
    inner: UdtSender,
    log: Log,
}

impl Agent for Recorder {
    fn handle_packet(&mut self, now: Instant, channel: Channel, bytes: &[u8]) {
        self.inner.handle_packet(now, channel, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.inner.poll_timeout()
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let e = self.inner.poll_transmit(now, buf)?;
        self.log.borrow_mut().push((now, buf[0] & 0x80 == 0));
        Some(e)
    }
    fn stop(&mut self, now: Instant) {
        self.inner.stop(now);
    }
    fn is_done(&self) -> bool {
        self.inner.is_done()
    }
    fn stats(&self) -> AgentStats {
        self.inner.stats()
    }
}

/// One UDT 4.11 flow for `secs` over 1 Gb/s, 10 ms RTT, a 1000-packet queue; what its sender
/// emitted, and the run's delivered bytes.
fn run(tick: Option<SendTick>, burst: u32, secs: u64) -> (Vec<(Instant, bool)>, u64) {
    let mut net = Network::new(1_000_000_000);
    let fwd = net.add_link(
        "bottleneck",
        &LinkSpec {
            delay_ns: 5_000_000,
            rate_bps: Some(1_000_000_000),
            queue: QueueLimit::Packets(1000),
            ..LinkSpec::default()
        },
    );
    let back = net.add_link("back", &LinkSpec { delay_ns: 5_000_000, ..LinkSpec::default() });
    let log: Log = Rc::default();
    let l2 = log.clone();
    let flow = net.add_flow(FlowSetup {
        name: "udt".into(),
        forward: vec![fwd],
        reverse: vec![back],
        start: 0,
        stop: None,
        socket: None,
        make: Box::new(move |now| {
            let config = ConnectionConfig { pacing_burst: burst, ..ConnectionConfig::default() };
            let tx = UdtSender::new(7, config.clone(), RECEIVER_ADDR, None, now).with_send_tick(tick);
            let rx = UdtReceiver::new(8, config, None, now);
            (Box::new(Recorder { inner: tx, log: l2 }), Box::new(rx))
        }),
    });
    net.run_until(secs * 1_000_000_000);
    let delivered = net.ends(flow).expect("started").1.stats().delivered;
    let out = log.borrow().clone();
    (out, delivered)
}

/// Data packets per departure instant after `from`, sorted.
fn bursts(log: &[(Instant, bool)], from: Instant) -> Vec<usize> {
    let mut by: std::collections::BTreeMap<Instant, usize> = Default::default();
    for &(t, data) in log {
        if data && t >= from {
            *by.entry(t).or_default() += 1;
        }
    }
    let mut v: Vec<usize> = by.into_values().collect();
    v.sort_unstable();
    v
}

#[test]
fn a_coarse_sender_sends_data_only_on_its_ticks_in_bursts_and_answers_control_at_once() {
    let tick = SendTick::new(500, 3);
    let (log, delivered) = run(Some(tick), 64, 3);
    let start = log[0].0;
    let data: Vec<Instant> = log.iter().filter(|e| e.1).map(|e| e.0).collect();
    assert!(data.len() > 50_000, "{} data packets in 3 s", data.len());
    assert!(data.iter().all(|&t| tick.is_wake(t)), "every data packet leaves at a wake-up");
    let off_grid_control = log.iter().filter(|e| !e.1 && !tick.is_wake(e.0)).count();
    assert!(off_grid_control > 100, "ACK2s answer ACKs as they arrive: {off_grid_control} off the grid");
    // After a second the flow runs at 0.5–0.8 Gb/s: 20–35 packets a 500 µs tick, sent together.
    let b = bursts(&log, start + std::time::Duration::from_secs(1));
    let median = b[b.len() / 2];
    assert!((15..=64).contains(&median), "median burst {median} packets");
    assert!(delivered > 150_000_000, "{delivered} bytes in 3 s: the bursts carry the rate");
}

#[test]
fn an_exact_sender_never_sends_more_than_a_packet_pair_at_once() {
    let (log, delivered) = run(None, 1, 3);
    let start = log[0].0;
    let b = bursts(&log, start + std::time::Duration::from_secs(1));
    assert!(b.iter().sum::<usize>() > 50_000, "{} data packets in the last 2 s", b.iter().sum::<usize>());
    assert!(*b.last().unwrap() <= 2, "the largest burst: {} packets", b.last().unwrap());
    assert!(delivered > 150_000_000, "{delivered} bytes in 3 s");
}

#[test]
fn the_tick_grid_has_its_phase_and_rounds_up() {
    let t = SendTick::new(500, 3);
    let first = t.at_or_after(Instant::ZERO);
    assert!(first.as_micros() < 500 && t.is_wake(first));
    assert_eq!(t.at_or_after(first), first);
    assert_eq!(t.at_or_after(Instant::from_micros(first.as_micros() + 1)).as_micros(), first.as_micros() + 500);
    assert!(!t.is_wake(Instant::from_micros(first.as_micros() + 250)));
}
