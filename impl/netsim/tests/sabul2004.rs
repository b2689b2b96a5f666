//! The 2004 SABUL NS-2 model's rules, one behaviour each (`docs/spec/SABUL-2004-NS2.md`; the
//! section is in each test's doc), driven sans-IO: packets fed by hand, timers fired by hand.
//! Then the control connection through a dumbbell's links, and the `RunSpec` path.

mod by_hand;

use by_hand::at;
use std::cell::RefCell;
use std::rc::Rc;

use link_model::link_spec::{LinkSpec, QueueLimit};
use netsim::agent::{Agent, AgentStats, Channel, Emit};
use netsim::network::{FlowSetup, Network};
use netsim::sabul2004::{increase, Config, Packet, Receiver, Sender};
use netsim::scenario::{run, RunSpec};
use transfer::time::Instant;

by_hand::wire_helpers!(Packet);

fn err(msg: u32, seqs: &[i64]) -> Packet {
    Packet::Err { msg, seqs: seqs.to_vec() }
}

fn syn(msg: u32) -> Packet {
    Packet::Syn { msg, received: 0 }
}

fn slow() -> Config {
    Config { initial_interval: 1e-3, ..Config::default() }
}

/// §3.2: one packet per pass, `I` apart, 1500 bytes each, the first at the start.
#[test]
fn sender_sends_one_packet_every_interval_from_its_start() {
    let mut s = Sender::new(slow(), at(0.0));
    let out = run_to(&mut s, 0.0, 0.0045);
    assert_eq!(data_seqs(&out), vec![0, 1, 2, 3, 4]);
    assert!(out.iter().all(|(_, _, wire)| *wire == 1500));
}

/// §3.2: a pass that finds the window full sends nothing and only re-arms; the sender is not
/// woken for those, and the ACK that opens the window lets the next pass on the `I` grid send.
#[test]
fn window_blocked_passes_keep_their_grid_and_are_not_woken() {
    let mut s = Sender::new(Config { send_window: 2, ..slow() }, at(0.0));
    let out = run_to(&mut s, 0.0, 0.0035);
    assert_eq!(data_seqs(&out), vec![0, 1]);
    assert_eq!(s.poll_timeout(), Some(at(1.0)), "only EXP is pending while blocked");
    feed(&mut s, 0.0035, &Packet::Ack { seq: 2 });
    let out = run_to(&mut s, 0.0035, 0.0055);
    assert_eq!(data_seqs(&out), vec![2, 3]);
    assert!((out[0].0 - 0.004).abs() < 1e-6, "{out:?}");
}

/// §5.3: an ERR whose first number lies above `LastDec` slows by 1/8 and freezes the next gap
/// to `SYN + I`; `LastDec` becomes the next new number.
#[test]
fn err_starting_a_period_slows_by_an_eighth_and_freezes_one_syn() {
    let mut s = Sender::new(slow(), at(0.0));
    run_to(&mut s, 0.0, 0.0035); // 0, 1, 2, 3 sent; next pass at 4 ms
    feed(&mut s, 0.0035, &err(0, &[1]));
    assert!((s.interval() - 1.125e-3).abs() < 1e-12);
    assert_eq!(s.last_dec(), 4);
    assert!(s.frozen());
    let out = run_to(&mut s, 0.0035, 0.02);
    let times: Vec<f64> = out.iter().filter(|(_, p, _)| matches!(p, Packet::Data { .. })).map(|x| x.0).collect();
    assert_eq!(data_seqs(&out)[0], 1, "the reported loss goes first");
    assert!((times[0] - 0.004).abs() < 1e-6, "the pass already armed is not cut short: {times:?}");
    assert!((times[1] - (0.004 + 0.01 + 1.125e-3)).abs() < 2e-6, "then SYN + I: {times:?}");
}

/// §5.3: within a period the 16th ERR decreases again, then the 32nd, …; numbers not above
/// `LastDec` never start a new period.
#[test]
fn further_decreases_come_at_the_16th_then_the_32nd_err_of_a_period() {
    let mut s = Sender::new(slow(), at(0.0));
    run_to(&mut s, 0.0, 0.0095); // 0 … 9 sent
    feed(&mut s, 0.0095, &err(0, &[2]));
    assert_eq!(s.decreases(), 1);
    for k in 2..=15 {
        feed(&mut s, 0.0095, &err(k - 1, &[3]));
    }
    assert_eq!(s.decreases(), 1, "ERRs 2 … 15 of the period do nothing to the rate");
    feed(&mut s, 0.0095, &err(15, &[3]));
    assert_eq!(s.decreases(), 2, "the 16th does");
    for k in 17..=31 {
        feed(&mut s, 0.0095, &err(k - 1, &[3]));
    }
    assert_eq!(s.decreases(), 2);
    feed(&mut s, 0.0095, &err(31, &[3]));
    assert_eq!(s.decreases(), 3, "the 32nd does");
    assert!((s.interval() - 1e-3 * 1.125f64.powi(3)).abs() < 1e-12);
}

/// §5.5: the increase is `max(10^⌈log10(SYN/I)⌉/1000, 1/1500)` packets per SYN.
#[test]
fn increase_is_a_thousandth_of_the_rates_power_of_ten_per_syn() {
    assert_eq!(increase(1e-5, 0.01), 1.0); // 1000 packets per SYN
    assert!((increase(2e-5, 0.01) - 1.0).abs() < 1e-12); // 500 per SYN: 10^3 / 1000
    assert!((increase(1e-4, 0.01) - 0.1).abs() < 1e-12);
    assert!((increase(1e-2, 0.01) - 1e-3).abs() < 1e-15, "one packet per SYN: 1/1000");
    assert!((increase(0.2, 0.01) - 1.0 / 1500.0).abs() < 1e-15, "the floor 1/1500, only beyond 0.1 s");
    let mut s = Sender::new(Config { initial_interval: 1e-5, ..Config::default() }, at(0.0));
    feed(&mut s, 0.01, &syn(0));
    assert!((s.interval() - 1e-5 * 0.01 / (1e-5 * 1.0 + 0.01)).abs() < 1e-15);
}

/// §5.5: two or more reported losses since the last SYN message skip one increase; one does not.
#[test]
fn two_reported_losses_skip_the_next_increase() {
    let mut s = Sender::new(slow(), at(0.0));
    run_to(&mut s, 0.0, 0.0095);
    feed(&mut s, 0.0095, &err(0, &[2, 3]));
    let after_err = s.interval();
    feed(&mut s, 0.01, &syn(1));
    assert_eq!(s.interval(), after_err, "skipped");
    assert_eq!(s.increases(), 0);
    feed(&mut s, 0.02, &syn(2));
    assert!(s.interval() < after_err, "the count was reset: the next SYN increases");
    feed(&mut s, 0.021, &err(3, &[4]));
    let one = s.interval();
    feed(&mut s, 0.03, &syn(4));
    assert!(s.interval() < one, "one loss does not skip");
}

/// §5.5: `threshold_` caps `I` after an increase only; a decrease may leave it above.
#[test]
fn interval_is_capped_at_the_threshold_only_after_an_increase() {
    let mut s = Sender::new(Config { initial_interval: 9.5e-3, ..Config::default() }, at(0.0));
    feed(&mut s, 0.001, &err(0, &[0]));
    assert!(s.interval() > 0.01, "a decrease is not capped: {}", s.interval());
    feed(&mut s, 0.01, &syn(1));
    assert_eq!(s.interval(), 0.01);
}

/// §5.5: no lower limit on `I`: the rate climbs past SABUL.md's 10 µs (1.2 Gb/s).
#[test]
fn there_is_no_shortest_interval() {
    let mut s = Sender::new(Config { initial_interval: 1e-5, ..Config::default() }, at(0.0));
    for k in 0..200 {
        feed(&mut s, 0.01 * f64::from(k + 1), &syn(k));
    }
    assert!(s.interval() < 9e-6, "{}", s.interval());
}

/// §3.3 (slip): an ACK removes every other loss entry `≤ a`, `a` itself included.
#[test]
fn ack_removes_every_other_acknowledged_loss_entry() {
    let mut s = Sender::new(slow(), at(0.0));
    run_to(&mut s, 0.0, 0.0095);
    feed(&mut s, 0.0095, &err(0, &[1, 2, 3, 4, 5, 8]));
    feed(&mut s, 0.0095, &Packet::Ack { seq: 5 });
    assert_eq!(s.loss_list(), vec![2, 4, 8]);
    assert_eq!(s.last_ack(), 5);
}

/// §3.5: EXP appends every unacknowledged number at the tail, unordered, duplicates kept; any
/// control message re-arms it.
#[test]
fn exp_appends_the_unacknowledged_numbers_at_the_tail() {
    let mut s = Sender::new(Config { initial_interval: 0.3, ..Config::default() }, at(0.0));
    run_to(&mut s, 0.0, 0.95); // 0 … 3 sent
    feed(&mut s, 0.95, &err(0, &[5, 9])); // numbers never sent: inserted all the same
    feed(&mut s, 0.95, &Packet::Ack { seq: 1 });
    run_to(&mut s, 0.95, 1.949);
    assert!(s.loss_list().len() <= 2, "EXP re-armed by the control messages at 0.95 s");
    run_to(&mut s, 1.949, 1.951);
    let l = s.loss_list();
    assert!(l.ends_with(&(1..s.next_seq()).collect::<Vec<_>>()), "{l:?}");
}

/// §4.3 (slip): new loss entries are stamped "t = 0", so nothing is reported before
/// `t > 2 · rtt_`; after that a gap is reported at once and again every `2 · rtt_`.
#[test]
fn losses_are_reported_only_after_twice_rtt_from_time_zero_then_every_twice_rtt() {
    let config = Config { rtt: 0.1, ..Config::default() };
    let mut r = Receiver::new(config, at(0.0));
    feed(&mut r, 0.05, &Packet::Data { seq: 0 });
    feed(&mut r, 0.06, &Packet::Data { seq: 3 });
    let early = run_to(&mut r, 0.06, 0.199);
    assert!(!early.iter().any(|(_, p, _)| matches!(p, Packet::Err { .. })), "nothing before 0.2 s");
    let out = run_to(&mut r, 0.199, 0.45);
    let errs: Vec<(f64, Vec<i64>)> = out
        .iter()
        .filter_map(|(t, p, wire)| match p {
            Packet::Err { seqs, .. } => {
                assert_eq!(*wire, 56, "16-byte message + TCP/IP header");
                Some((*t, seqs.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].1, vec![1, 2]);
    assert!((errs[0].0 - 0.2).abs() < 2e-3 && (errs[1].0 - errs[0].0 - 0.2).abs() < 2e-3, "{errs:?}");
}

/// §4.2: the ACK — the first loss or the largest + 1 — goes over UDP (16 bytes) every 5 ms,
/// only when it advances; SYN messages carry the received count every 10 ms as TCP segments.
#[test]
fn ack_goes_over_udp_every_5_ms_and_syn_over_tcp_every_10_ms() {
    let mut r = Receiver::new(Config::default(), at(0.0));
    feed(&mut r, 0.001, &Packet::Data { seq: 0 });
    feed(&mut r, 0.002, &Packet::Data { seq: 1 });
    let out = run_to(&mut r, 0.002, 0.0201);
    let acks: Vec<_> = out.iter().filter(|(_, p, _)| matches!(p, Packet::Ack { .. })).collect();
    assert_eq!(acks.len(), 1, "the second tick has nothing new: {out:?}");
    assert_eq!((acks[0].0, &acks[0].1, acks[0].2), (0.005, &Packet::Ack { seq: 2 }, 16));
    let syns: Vec<_> = out.iter().filter(|(_, p, _)| matches!(p, Packet::Syn { .. })).collect();
    assert_eq!(syns.len(), 2);
    assert_eq!((&syns[0].1, syns[0].2), (&Packet::Syn { msg: 0, received: 2 }, 56));
}

/// An agent shared with the test, so that its state can be read after the network ran it.
struct Shared<A>(Rc<RefCell<A>>);

impl<A: Agent> Agent for Shared<A> {
    fn handle_packet(&mut self, now: Instant, channel: Channel, bytes: &[u8]) {
        self.0.borrow_mut().handle_packet(now, channel, bytes);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.borrow_mut().handle_timeout(now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.0.borrow().poll_timeout()
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Emit> {
        self.0.borrow_mut().poll_transmit(now, buf)
    }
    fn stop(&mut self, now: Instant) {
        self.0.borrow_mut().stop(now);
    }
    fn is_done(&self) -> bool {
        self.0.borrow().is_done()
    }
    fn stats(&self) -> AgentStats {
        self.0.borrow().stats()
    }
}

/// §6: on an overloaded 100 Mb/s, 100 ms dumbbell the control connection's segments and the
/// UDP ACKs cross the reverse links (and queue there) — only small packets go that way — and
/// no control message is lost, so the flow's decreases follow the ERRs the receiver sent.
#[test]
fn control_segments_cross_the_reverse_links_and_none_is_lost() {
    let mut net = Network::new(1_000_000_000);
    let link = |delay_ms: u64, queue| LinkSpec {
        delay_ns: delay_ms * 1_000_000,
        rate_bps: Some(100_000_000),
        queue,
        ..LinkSpec::default()
    };
    let forward = net.add_link("forward", &link(50, QueueLimit::Packets(834)));
    let reverse = net.add_link("reverse", &link(50, QueueLimit::Unlimited));
    let config = Config { rtt: 0.1, ..Config::default() };
    net.add_flow(FlowSetup {
        name: "sabul".into(),
        forward: vec![forward],
        reverse: vec![reverse],
        start: 0,
        stop: None,
        socket: None,
        make: Box::new(move |now| {
            let s = Rc::new(RefCell::new(Sender::new(config, now)));
            let handle = Rc::clone(&s);
            let ends: (Box<dyn Agent>, Box<dyn Agent>) = (Box::new(Shared(s)), Box::new(Receiver::new(config, now)));
            SENDER.with(|c| *c.borrow_mut() = Some(handle));
            ends
        }),
    });
    net.run_until(3_000_000_000);
    let s = SENDER.with(|c| c.borrow_mut().take()).expect("the flow started");
    let s = s.borrow();
    assert!(s.stats().loss_events > 0 && s.decreases() > 0, "the 1.2 Gb/s start overloads the link");
    assert_eq!(s.control_lost(), 0);
    let back = net.link_stats(reverse);
    assert!(back.frames_out > 1000, "{back:?}");
    assert!(back.bytes_out <= back.frames_out * 56, "only ACKs and control segments go back: {back:?}");
    assert_eq!(back.dropped_queue, 0);
}

thread_local! {
    static SENDER: RefCell<Option<Rc<RefCell<Sender>>>> = const { RefCell::new(None) };
}

fn fig1_spec(cc: &str, rtt_ms: f64, extra: &str) -> RunSpec {
    let text = format!(
        r#"{{"seed": 1, "duration_s": 3, "sample_s": 1,
            "bottleneck": {{"rate_mbps": 100, "queue_pkts": {q}}},
            "flows": [{{"protocol": "sabul", "cc": "{cc}", "rtt_ms": {rtt_ms}, "window_pkts": 100000 {extra}}},
                      {{"protocol": "tcp", "rtt_ms": {rtt_ms}, "window_pkts": 100000}}]}}"#,
        q = ((rtt_ms * 100e3 / 12e3).ceil() as u64).max(100), // max(BDP, 100) at 100 Mb/s
    );
    serde_json::from_str(&text).expect("a run spec")
}

/// The module beside TCP through the `RunSpec` path: both move data, the flow reports its
/// `cc`, and a run is a function of its spec (Fig. 1's shares are the scenario's claims).
#[test]
fn module_flow_runs_beside_tcp_from_a_run_spec_deterministically() {
    let r = run(&fig1_spec("ns2-2004", 10.0, "")).expect("valid");
    assert_eq!(r.flows[0].cc.as_deref(), Some("ns2-2004"));
    assert!(r.flows.iter().all(|f| f.delivered_bytes > 1_000_000), "{:?}", r.flows.iter().map(|f| f.delivered_bytes));
    let a = serde_json::to_string(&run(&fig1_spec("ns2-2004", 1.0, "")).unwrap()).unwrap();
    let b = serde_json::to_string(&run(&fig1_spec("ns2-2004", 1.0, "")).unwrap()).unwrap();
    assert_eq!(a, b);
}

/// A SABUL `cc` other than `ns2-2004`, and a finite transfer on the module, are refused.
#[test]
fn a_sabul_cc_other_than_ns2_2004_and_finite_module_transfers_are_refused() {
    let e = run(&fig1_spec("udt411", 1.0, "")).unwrap_err();
    assert!(e.0.contains("not a SABUL model") && e.0.contains("ns2-2004"), "{}", e.0);
    let e = run(&fig1_spec("ns2-2004", 1.0, r#", "bytes": 1000000"#)).unwrap_err();
    assert!(e.0.contains("no finite transfers"), "{}", e.0);
}
