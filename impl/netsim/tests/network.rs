//! The simulator as a whole: its links behave as `udt-linkem`'s, runs are deterministic, and
//! the real protocol cores and the TCP model do what the textbook says on a dumbbell.

use link_model::delay_line::{Admission, DelayLine};
use link_model::link_spec::LinkSpec;
use netsim::agent::{Agent, AgentStats, Channel, Emit};
use netsim::network::{instant, FlowSetup, Nanos, Network, SocketLimit, EPOCH};
use netsim::scenario::{run, Bottleneck, FlowSpec, HostNic, Protocol, RunSpec, ShortFlows};
use prng::Xoshiro256;
use transfer::time::Instant;

/// Sends datagrams of given sizes at given times (µs since the run began); the other end
/// records when each arrived.
struct Trace {
    sends: Vec<(u64, u32)>,
    next: usize,
    arrivals: std::rc::Rc<std::cell::RefCell<Vec<(Instant, u32)>>>,
}

impl Agent for Trace {
    fn handle_packet(&mut self, now: Instant, _: Channel, bytes: &[u8]) {
        let id = u32::from_be_bytes(bytes[..4].try_into().unwrap());
        self.arrivals.borrow_mut().push((now, id));
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        self.sends.get(self.next).map(|&(t, _)| Instant::from_micros(EPOCH.as_micros() + t))
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        let &(t, len) = self.sends.get(self.next)?;
        if Instant::from_micros(EPOCH.as_micros() + t) > now {
            return None;
        }
        buf[..4].copy_from_slice(&(self.next as u32).to_be_bytes());
        self.next += 1;
        Some(Emit { size: 4, wire_len: len, channel: Channel::Datagram })
    }
    fn stop(&mut self, _: Instant) {}
    fn is_done(&self) -> bool {
        false
    }
    fn stats(&self) -> AgentStats {
        AgentStats::default()
    }
}

/// Random sizes at random times, bursts included, offered above the link's rate.
fn trace(seed: u64, n: usize) -> Vec<(u64, u32)> {
    let mut rng = Xoshiro256::seed_from_u64(seed);
    let mut t = 0;
    (0..n)
        .map(|_| {
            t += if rng.chance(0.3) { 0 } else { rng.below(200) };
            (t, 64 + rng.below(1437) as u32)
        })
        .collect()
}

/// What the network delivers of `sends` over one link of `spec`: (arrival µs, packet id).
fn through_network(spec: &LinkSpec, sends: Vec<(u64, u32)>) -> Vec<(u64, u32)> {
    through_socket(spec, None, sends)
}

/// As [`through_network`], the sender's socket holding at most `socket` packets in the link.
fn through_socket(spec: &LinkSpec, socket: Option<u32>, sends: Vec<(u64, u32)>) -> Vec<(u64, u32)> {
    let mut net = Network::new(0);
    let fwd = net.add_link("l", spec);
    let back = net.add_link("back", &LinkSpec::default());
    let arrivals = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let a2 = arrivals.clone();
    net.add_flow(FlowSetup {
        name: "trace".into(),
        forward: vec![fwd],
        reverse: vec![back],
        start: 0,
        stop: None,
        socket: socket.map(|packets| SocketLimit { link: fwd, packets }),
        make: Box::new(move |_| {
            let tx = Trace { sends, next: 0, arrivals: Default::default() };
            let rx = Trace { sends: Vec::new(), next: 0, arrivals: a2 };
            (Box::new(tx), Box::new(rx))
        }),
    });
    net.run_until(60_000_000_000);
    let got = arrivals.borrow().iter().map(|&(t, id)| (t.as_micros() - EPOCH.as_micros(), id)).collect();
    got
}

/// The same trace offered straight to `link-model`'s delay line, as `udt-linkem` does.
fn through_delay_line(spec: &LinkSpec, sends: &[(u64, u32)]) -> Vec<(u64, u32)> {
    let mut line = DelayLine::new(spec);
    let mut out = Vec::new();
    let mut pending: Vec<(Nanos, u32)> = Vec::new();
    for (id, &(t, len)) in sends.iter().enumerate() {
        if let Admission::Queued { release_at, .. } = line.handle_frame(t * 1000, len, id as u32) {
            pending.push((release_at, id as u32));
        }
    }
    while let Some(at) = line.poll_timeout() {
        let id = line.poll_frame(at).unwrap();
        out.push((instant(at).as_micros() - EPOCH.as_micros(), id));
    }
    assert_eq!(out.len(), pending.len() + line.stats().duplicated as usize);
    out
}

#[test]
fn a_simulated_link_delivers_what_the_emulators_delay_line_delivers() {
    let specs = [
        "delay=20ms,rate=10mbit,queue=20p",
        "delay=5ms,rate=100mbit,queue=8kb,loss=0.02,seed=7",
        "delay=1ms,rate=50mbit,queue=100p,loss=ge:0.01,0.3,0.5,seed=3",
        "delay=2ms,rate=20mbit,queue=50p,reorder=0.05,reorder_delay=3ms,duplicate=0.02,seed=9",
    ];
    for (i, s) in specs.iter().enumerate() {
        let spec: LinkSpec = s.parse().unwrap();
        let sends = trace(i as u64 + 1, 3000);
        let simulated = through_network(&spec, sends.clone());
        let emulated = through_delay_line(&spec, &sends);
        assert!(emulated.len() > 200, "{s}: the trace should get through in part");
        assert!(emulated.len() < sends.len() + 100, "{s}");
        assert_eq!(simulated, emulated, "{s}: the simulator's link and the emulator's delay line disagree");
    }
}

#[test]
fn a_sender_whose_socket_is_full_waits_for_the_nic_instead_of_losing_packets() {
    // 200 packets of 1500 bytes at once into a 10 Mb/s NIC (1.2 ms each) with a 10-packet queue.
    let spec: LinkSpec = "rate=10mbit,queue=10p".parse().unwrap();
    let burst = vec![(0, 1500); 200];
    let dropped = through_socket(&spec, None, burst.clone());
    assert!(dropped.len() <= 11, "without a socket limit the queue drops the burst: {} arrived", dropped.len());
    let blocked = through_socket(&spec, Some(5), burst);
    assert_eq!(blocked.iter().map(|a| a.1).collect::<Vec<_>>(), (0..200).collect::<Vec<_>>(), "all, in order");
    let gaps: Vec<u64> = blocked.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(gaps.iter().all(|&g| (1199..=1201).contains(&g)), "back to back at the NIC's rate: {gaps:?}");
}

fn spec(flows: Vec<FlowSpec>, rate: f64, queue: u64, secs: f64) -> RunSpec {
    RunSpec {
        seed: 1,
        duration_s: secs,
        sample_s: 1.0,
        bottleneck: Bottleneck {
            rate_mbps: rate,
            queue_pkts: queue,
            delay_ms: 0.0,
            loss: 0.0,
            access_rate_mbps: None,
            host_nic: None,
        },
        flows,
        short_flows: None,
    }
}

fn flow(protocol: Protocol, rtt_ms: f64) -> FlowSpec {
    FlowSpec {
        name: None,
        protocol,
        cc: None,
        flow_control: true,
        rtt_ms,
        start_s: 0.0,
        stop_s: None,
        bytes: None,
        window_pkts: None,
        initial_rate_mbps: None,
        own_rate_mbps: None,
        own_queue_pkts: None,
        count: 1,
        tcp_profile: None,
        send_tick_us: None,
        pacing_burst: None,
    }
}

#[test]
fn the_same_spec_gives_the_same_bytes_of_output() {
    let s =
        spec(vec![flow(Protocol::Udt, 20.0), flow(Protocol::Tcp, 20.0), flow(Protocol::Sabul, 40.0)], 50.0, 100, 5.0);
    let a = serde_json::to_string(&run(&s).unwrap()).unwrap();
    let b = serde_json::to_string(&run(&s).unwrap()).unwrap();
    assert_eq!(a, b);
    let other = RunSpec { seed: 2, ..s };
    assert_ne!(a, serde_json::to_string(&run(&other).unwrap()).unwrap(), "the seed must matter");
}

#[test]
fn one_reno_flow_on_a_bdp_queue_saws_and_fills_most_of_the_link() {
    // 10 Mb/s × 100 ms = 83 packets of 1500 bytes: the textbook's BDP queue.
    let r = run(&spec(vec![flow(Protocol::Tcp, 100.0)], 10.0, 84, 200.0)).unwrap();
    let f = &r.flows[0];
    assert!(r.bottleneck.utilisation > 0.75, "utilisation {}", r.bottleneck.utilisation);
    assert!(f.loss_events >= 5, "a sawtooth halves the window again and again: {} loss events", f.loss_events);
    // The window saws between about one and two BDPs once the start is over.
    let w: Vec<f64> = f.window_pkts[20..].to_vec();
    let (lo, hi) = (w.iter().cloned().fold(f64::MAX, f64::min), w.iter().cloned().fold(0.0, f64::max));
    assert!(lo > 40.0 && lo < 100.0 && hi > 120.0 && hi < 200.0, "cwnd range {lo}..{hi}");
}

#[test]
fn udt_fills_an_idle_link_and_ten_flows_share_it_fairly() {
    let one = run(&spec(vec![flow(Protocol::Udt, 10.0)], 100.0, 100, 20.0)).unwrap();
    let tail: f64 = one.flows[0].throughput_mbps[10..].iter().sum::<f64>() / 10.0;
    assert!(tail > 85.0, "one UDT flow: {tail} Mb/s of 100 (97 of payload at most)");
    let ten = run(&spec(vec![FlowSpec { count: 10, ..flow(Protocol::Udt, 10.0) }], 100.0, 100, 30.0)).unwrap();
    let means: Vec<f64> = ten.flows.iter().map(|f| f.throughput_mbps[10..].iter().sum::<f64>() / 20.0).collect();
    let jain = means.iter().sum::<f64>().powi(2) / (10.0 * means.iter().map(|x| x * x).sum::<f64>());
    assert!(jain > 0.95, "Jain's index {jain}: {means:?}");
    assert!(ten.bottleneck.utilisation > 0.85, "{}", ten.bottleneck.utilisation);
}

#[test]
fn finite_transfers_of_every_protocol_finish_byte_exact() {
    for p in [Protocol::Udt, Protocol::Tcp, Protocol::Sabul] {
        // SABUL starts at the rate the application sets (§7.1): its default 10 µs interval
        // is 60 times this link.
        let initial_rate_mbps = (p == Protocol::Sabul).then_some(20.0);
        let f = FlowSpec { bytes: Some(3_000_001), initial_rate_mbps, ..flow(p, 30.0) };
        let mut s = spec(vec![f], 20.0, 30, 20.0);
        s.bottleneck.loss = 0.01;
        let r = run(&s).unwrap();
        let f = &r.flows[0];
        assert_eq!(f.delivered_bytes, 3_000_001, "{p:?}");
        assert!(f.finished_s.is_some_and(|t| t < 20.0), "{p:?}: finished at {:?}", f.finished_s);
        assert!(f.retransmitted > 0, "{p:?}: 1 % loss must cost retransmissions");
    }
}

#[test]
fn flows_start_and_stop_on_time() {
    let late = FlowSpec { start_s: 5.0, stop_s: Some(8.0), ..flow(Protocol::Udt, 10.0) };
    let r = run(&spec(vec![flow(Protocol::Tcp, 10.0), late], 50.0, 100, 12.0)).unwrap();
    let f = &r.flows[1];
    assert_eq!(f.times_s.first(), Some(&6.0), "sampled from its start");
    assert!(f.throughput_mbps[1] > 1.0, "sending at 7 s");
    assert_eq!(*f.throughput_mbps.last().unwrap(), 0.0, "nothing after the stop once in-flight data arrived");
}

#[test]
fn a_flow_behind_its_own_slower_link_gets_at_most_that_links_rate() {
    let slow = FlowSpec { own_rate_mbps: Some(20.0), own_queue_pkts: Some(50), ..flow(Protocol::Udt, 10.0) };
    let r = run(&spec(vec![slow, flow(Protocol::Udt, 10.0)], 100.0, 100, 30.0)).unwrap();
    let mean = |i: usize| r.flows[i].throughput_mbps[10..].iter().sum::<f64>() / 20.0;
    assert!(mean(0) < 20.0 && mean(0) > 15.0, "behind 20 Mb/s: {}", mean(0));
    assert!(mean(1) > 60.0, "the other flow takes the rest: {}", mean(1));
}

#[test]
fn short_transfers_follow_one_another_at_the_set_concurrency() {
    let mut s = spec(vec![], 100.0, 100, 20.0);
    s.short_flows = Some(ShortFlows {
        protocol: Protocol::Tcp,
        bytes: 1 << 20,
        concurrency: 4,
        count: 40,
        rtt_ms: 20.0,
        window_pkts: None,
        start_s: 0.0,
        tcp_profile: None,
        until_done: false,
    });
    let r = run(&s).unwrap();
    let short = r.short_flows.unwrap();
    assert_eq!((short.started, short.completed), (40, 40), "40 × 1 MiB at 100 Mb/s take about 4 s");
    assert_eq!(short.bytes, 40 << 20);
    assert!(short.aggregate_mbps > 40.0 && short.aggregate_mbps < 100.0, "{}", short.aggregate_mbps);
    // Beside a bulk UDT flow the short transfers get less.
    let mut with_bulk = s.clone();
    with_bulk.flows = vec![flow(Protocol::Udt, 20.0)];
    let shared = run(&with_bulk).unwrap().short_flows.unwrap();
    assert!(shared.aggregate_mbps < short.aggregate_mbps, "{} vs {}", shared.aggregate_mbps, short.aggregate_mbps);
}

#[test]
fn udt_flows_behind_their_hosts_nic_block_rather_than_lose_and_share_it() {
    // The NIC is the bottleneck (50 of the router's 100 Mb/s): UDT's sockets fill its queue
    // only up to their send buffers, so nothing is dropped there and no NAK slows them down.
    let mut s = spec(vec![FlowSpec { count: 3, ..flow(Protocol::Udt, 20.0) }], 100.0, 100, 20.0);
    s.bottleneck.host_nic = Some(HostNic { rate_mbps: 50.0, queue_pkts: 1000, socket_pkts: 44 });
    let r = run(&s).unwrap();
    let nic = r.host_nic.as_ref().expect("the NIC's measurements");
    assert_eq!(nic.dropped_queue, 0, "sockets block before the NIC's queue is full");
    assert!(nic.queue_pkts[5..].iter().all(|&q| q <= 3 * 44), "{:?}", nic.queue_pkts);
    assert!(nic.utilisation > 0.9, "the NIC is kept busy: {}", nic.utilisation);
    assert_eq!(r.bottleneck.dropped_queue, 0, "the router behind it never fills");
    let means: Vec<f64> = r.flows.iter().map(|f| f.throughput_mbps[5..].iter().sum::<f64>() / 15.0).collect();
    assert!(means.iter().all(|&m| m > 13.0 && m < 17.5), "a third of 48.5 Mb/s each: {means:?}");
    // Without the NIC the same flows meet the router's queue and lose packets.
    s.bottleneck.host_nic = None;
    s.bottleneck.rate_mbps = 50.0;
    let r = run(&s).unwrap();
    assert!(r.bottleneck.dropped_queue > 0 && r.host_nic.is_none());
}

#[test]
fn count_bound_short_transfers_start_after_the_bulk_flows_and_end_the_run() {
    let mut s = spec(vec![flow(Protocol::Udt, 20.0)], 100.0, 100, 60.0);
    let short = ShortFlows {
        protocol: Protocol::Tcp,
        bytes: 1 << 20,
        concurrency: 4,
        count: 20,
        rtt_ms: 20.0,
        window_pkts: None,
        start_s: 5.0,
        tcp_profile: None,
        until_done: true,
    };
    s.short_flows = Some(short.clone());
    let r = run(&s).unwrap();
    assert_eq!(r.short_flows.as_ref().unwrap().completed, 20);
    let bulk = &r.flows[0];
    let ran = *bulk.times_s.last().unwrap();
    assert!(ran > 5.0 && ran < 59.0, "the run ends with the last transfer, not at 60 s: {ran}");
    let mbps = &bulk.throughput_mbps;
    assert!(mbps[2..5].iter().all(|&x| x > 50.0), "the bulk flow alone for 5 s: {mbps:?}");
    assert!(mbps[6] < mbps[4] / 2.0, "then beside the short transfers: {mbps:?}");
    // Time-bound, the same run goes on to the end.
    s.short_flows = Some(ShortFlows { until_done: false, ..short });
    let r = run(&s).unwrap();
    assert_eq!(r.flows[0].times_s.last(), Some(&60.0));
}

#[test]
fn a_bad_spec_is_refused_with_what_is_wrong() {
    let mut s = spec(vec![flow(Protocol::Udt, 10.0)], 100.0, 100, 10.0);
    s.flows[0].cc = Some("cubic".into());
    assert!(run(&s).unwrap_err().0.contains("udt411 or paper"));
    let s2 = spec(vec![flow(Protocol::Tcp, 1.0)], 100.0, 0, 10.0);
    assert!(run(&s2).unwrap_err().0.contains("queue_pkts"));
    let mut s3 = spec(vec![flow(Protocol::Tcp, 1.0)], 100.0, 10, 10.0);
    s3.bottleneck.delay_ms = 5.0;
    assert!(run(&s3).unwrap_err().0.contains("twice the bottleneck"));
    let s4 = spec(vec![], 100.0, 10, 10.0);
    assert!(run(&s4).unwrap_err().0.contains("at least one flow"));
    let mut s5 = spec(vec![flow(Protocol::Udt, 10.0)], 100.0, 10, 10.0);
    s5.bottleneck.host_nic = Some(HostNic { rate_mbps: 100.0, queue_pkts: 1000, socket_pkts: 0 });
    assert!(run(&s5).unwrap_err().0.contains("socket_pkts at least 1"));
    let mut s6 = spec(vec![flow(Protocol::Tcp, 10.0)], 100.0, 10, 10.0);
    s6.flows[0].tcp_profile = Some("ns2-2.27".into());
    assert!(run(&s6).unwrap_err().0.contains("use default or ns2-2.26"));
    s6.flows[0].protocol = Protocol::Udt;
    s6.flows[0].tcp_profile = Some("ns2-2.26".into());
    assert!(run(&s6).unwrap_err().0.contains("tcp_profile applies to TCP only"));
    let mut s7 = spec(vec![flow(Protocol::Tcp, 10.0)], 100.0, 10, 10.0);
    s7.flows[0].send_tick_us = Some(500);
    assert!(run(&s7).unwrap_err().0.contains("UDT flows on udt-proto's core only"));
    s7.flows[0].protocol = Protocol::Udt;
    s7.flows[0].pacing_burst = Some(0);
    assert!(run(&s7).unwrap_err().0.contains("at least 1"));
}
