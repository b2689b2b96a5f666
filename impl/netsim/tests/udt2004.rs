//! The 2004 UDT NS-2 model's rules, one behaviour each (`docs/spec/UDT-2004-NS2.md` §16.2; the
//! row number is in each test's doc), driven sans-IO: packets fed by hand, timers fired by
//! hand. Then one flow end to end through the `RunSpec` path.

mod by_hand;

use by_hand::at;
use netsim::agent::Agent;
use netsim::scenario::{run, Bottleneck, FlowSpec, Protocol, RunSpec, NS2_2004};
use netsim::udt2004::{dec_random_source, Packet, Receiver, Sender, SenderConfig};

fn sender(start: f64) -> Sender {
    Sender::new(SenderConfig::default(), dec_random_source(7), at(start))
}

by_hand::wire_helpers!(Packet);

fn ack(a: i64, rtt_us: u32) -> Packet {
    Packet::Ack { serial: 0, ack: a, rtt_us, speed: 0, capacity: 8333 }
}

fn nak(seqs: &[i64]) -> Packet {
    Packet::Nak { count: seqs.len(), seqs: seqs.to_vec() }
}

/// Rows 1, 2, 5: no handshake, numbers from 0, 1500-byte data; `W + 1` packets outstanding.
#[test]
fn window_allows_one_more_than_w_outstanding() {
    let mut s = sender(0.0);
    let out = run_to(&mut s, 0.0, 0.005);
    assert_eq!(data_seqs(&out), vec![0, 1], "W = 1 lets packets 0 and 1 out");
    assert!(out.iter().all(|(_, _, wire)| *wire == 1500));
    // The ACK makes W = 2 (slow start: W := a) and LastAck = 2: packets 2, 3, 4 may go.
    feed(&mut s, 0.006, &ack(2, 10_000));
    assert_eq!(s.window(), 2);
    let out = run_to(&mut s, 0.006, 0.009);
    assert_eq!(data_seqs(&out), vec![2, 3, 4]);
    assert_eq!(s.curr_seq() - s.last_ack() + 1, s.window() + 1);
    assert!(out.iter().any(|(_, p, wire)| matches!(p, Packet::Ack2 { .. }) && *wire == 32));
}

/// Row 6 (§3.5): an ACK that opens the window does not wake the sender: a frozen sender
/// sends its next packet when the freeze's `SYN + P` ends, not at the ACK.
#[test]
fn an_opening_ack_does_not_wake_the_sender() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.002, &nak(&[1])); // new period: one retransmission, then the freeze
    let out = run_to(&mut s, 0.002, 0.003);
    assert_eq!(data_seqs(&out), vec![1]);
    feed(&mut s, 0.005, &ack(2, 10_000)); // opens the window; P (1.125 µs) < RTT_s: no cap
    let out = run_to(&mut s, 0.005, 0.02);
    let first = out.iter().find(|(_, p, _)| matches!(p, Packet::Data { .. })).expect("sent after the freeze");
    assert!(first.0 >= 0.012, "first packet at {} s, before the freeze's end", first.0);
    assert!(first.0 < 0.0121);
}

/// Row 7 (slip): an ACK removes the 1st, 3rd, 5th … loss entries `≤ a`, keeps the others.
#[test]
fn ack_removes_every_other_acknowledged_loss_entry() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    // The NAK's pass retransmits 0 at once; {1, …, 7, 10} stay (the freeze holds the rest).
    feed(&mut s, 0.002, &nak(&[0, 1, 2, 3, 4, 5, 6, 7, 10]));
    let out = run_to(&mut s, 0.002, 0.003);
    assert_eq!(data_seqs(&out), vec![0]);
    assert_eq!(s.loss_list(), vec![1, 2, 3, 4, 5, 6, 7, 10]);
    feed(&mut s, 0.003, &ack(7, 10_000));
    assert_eq!(s.loss_list(), vec![2, 4, 6, 10], "the spec's example, §3.4");
}

/// Row 8 (slip): the removal includes `a`, the receiver's first hole.
#[test]
fn ack_cancels_the_pending_retransmission_of_its_own_number() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.002, &nak(&[0, 5]));
    run_to(&mut s, 0.002, 0.003);
    assert_eq!(s.loss_list(), vec![5]);
    feed(&mut s, 0.003, &ack(5, 10_000));
    assert_eq!(s.loss_list(), Vec::<i64>::new());
}

/// Rows 10, 11 (slip): a gap of 100 is listed in full (NAK of 32 + 100 bytes), but only its
/// first 75 numbers travel, and the sender retransmits just those.
#[test]
fn only_the_first_75_numbers_of_a_nak_are_retransmitted() {
    let mut r = Receiver::new(at(0.0));
    feed(&mut r, 0.001, &Packet::Data { seq: 0 });
    feed(&mut r, 0.002, &Packet::Data { seq: 101 });
    let out = run_to(&mut r, 0.002, 0.002);
    let (_, nak_packet, wire) = out.first().expect("an immediate NAK").clone();
    assert_eq!(wire, 32 + 100);
    let Packet::Nak { count, ref seqs } = nak_packet else { panic!("not a NAK: {nak_packet:?}") };
    assert_eq!(count, 100);
    assert_eq!(*seqs, (1..=75).collect::<Vec<i64>>());
    assert_eq!(r.loss_list().len(), 100, "the receiver keeps all 100");

    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.0015, &ack(1, 10_000)); // LastAck 1: the zeros past entry 75 are skipped
    feed(&mut s, 0.002, &nak_packet);
    let out = run_to(&mut s, 0.002, 0.1);
    let mut resent: Vec<i64> = data_seqs(&out).into_iter().filter(|&q| q <= 101).collect();
    resent.sort_unstable();
    resent.dedup();
    assert_eq!(resent, (1..=75).collect::<Vec<i64>>());
}

/// Row 12: the periodic NAK re-reports an entry once it is older than `RTT_r`, every
/// `NakInterval` after the last NAK sent (here `RTT_r` 2 ms < 10 ms: every 10 ms).
#[test]
fn periodic_nak_re_reports_entries_older_than_rtt() {
    let mut r = Receiver::new(at(0.0));
    feed(&mut r, 0.001, &Packet::Data { seq: 0 });
    let out = run_to(&mut r, 0.001, 0.011);
    assert!(matches!(out.as_slice(), [(t, Packet::Ack { serial: 0, ack: 1, .. }, 40)] if (t - 0.01).abs() < 1e-9));
    feed(&mut r, 0.012, &Packet::Ack2 { serial: 0 });
    assert!((r.rtt() - 0.002).abs() < 1e-9, "the first sample replaces 10 ms");
    assert_eq!(r.nak_interval(), 0.01);
    feed(&mut r, 0.013, &Packet::Data { seq: 2 });
    let out = run_to(&mut r, 0.013, 0.045);
    let naks: Vec<(f64, Vec<i64>)> = out
        .iter()
        .filter_map(|(t, p, _)| match p {
            Packet::Nak { seqs, .. } => Some((*t, seqs.clone())),
            _ => None,
        })
        .collect();
    let times: Vec<i64> = naks.iter().map(|(t, _)| (t * 1e6).round() as i64).collect();
    assert_eq!(times, vec![13_000, 23_000, 33_000, 43_000], "immediate, then every NakInterval");
    assert!(naks.iter().all(|(_, s)| s == &[1]));
}

/// Row 13: every NAK sent, immediate ones included, restarts the NAK timer.
#[test]
fn new_gaps_postpone_the_periodic_nak() {
    let mut r = Receiver::new(at(0.0));
    feed(&mut r, 0.001, &Packet::Data { seq: 0 });
    feed(&mut r, 0.003, &Packet::Data { seq: 2 }); // NAK [1]; timer to 13 ms
    assert!((r.next_nak_tick() - 0.013).abs() < 1e-9);
    feed(&mut r, 0.009, &Packet::Data { seq: 4 }); // NAK [3]; timer to 19 ms
    assert!((r.next_nak_tick() - 0.019).abs() < 1e-9);
}

/// Row 3: rate, ACK and NAK ticks on `k · 10 ms` from t = 0, whatever the start.
#[test]
fn timers_tick_on_the_global_10ms_grid_whatever_the_start_time() {
    for start in [0.0, 0.0123, 1.234_567, 7.0] {
        let s = sender(start);
        let grid = (start / 0.01 - 1e-6).ceil() * 0.01;
        assert!((s.next_rate_tick() - grid).abs() < 1e-9, "start {start}: rate tick {}", s.next_rate_tick());
        let mut r = Receiver::new(at(start));
        assert!((r.next_ack_tick() - grid).abs() < 1e-9);
        feed(&mut r, start + 0.000_5, &Packet::Data { seq: 0 });
        let out = run_to(&mut r, start + 0.000_5, start + 0.011);
        let acks: Vec<f64> =
            out.iter().filter(|(_, p, _)| matches!(p, Packet::Ack { .. })).map(|(t, _, _)| *t).collect();
        let first_tick = if grid >= start + 0.000_5 - 1e-9 { grid } else { grid + 0.01 };
        assert_eq!(acks.len(), 1);
        assert!((acks[0] - first_tick).abs() < 1e-9, "start {start}: ACK at {} not {first_tick}", acks[0]);
    }
}

/// Rows 21, 30: the first NAK ends slow start with one decrease, to 1.125 µs (no reset to the
/// receive rate), opens the first period: `AvgNakNum` 3, `DecRandom` from {1, 2, 3}.
#[test]
fn first_nak_leaves_the_period_near_one_microsecond() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    assert!(s.in_slow_start());
    assert_eq!(s.period(), 1e-6);
    feed(&mut s, 0.002, &nak(&[1]));
    assert!(!s.in_slow_start());
    assert_eq!(s.period(), 1e-6 * 1.125);
    assert_eq!(s.avg_nak_num(), 3);
    assert!((1..=3).contains(&s.dec_random()));
    assert_eq!(s.last_dec_seq(), s.curr_seq());
}

/// Row 30 (slip): `AvgNakNum` runs 3, 4, …, 9, 9 over the periods whatever the NAK counts.
#[test]
fn dec_random_range_widens_by_one_per_period_up_to_nine() {
    let mut s = sender(0.0);
    let mut t = 0.0;
    let mut seen = Vec::new();
    for _ in 0..9 {
        run_to(&mut s, t, t + 0.0005);
        let first = s.curr_seq() + 1; // above LastDecSeq: a new period
        feed(&mut s, t + 0.0006, &nak(&[first, first + 1]));
        seen.push(s.avg_nak_num());
        assert!((1..=s.avg_nak_num()).contains(&s.dec_random()));
        feed(&mut s, t + 0.0007, &ack(first, 10_000));
        t += 0.05;
    }
    assert_eq!(seen, vec![3, 4, 5, 6, 7, 8, 9, 9, 9]);
}

/// Row 29: no cap on decreases in a period: every `DecRandom`-th NAK decreases.
#[test]
fn decreases_are_not_capped_at_five_per_period() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.001, &nak(&[1]));
    let dec_random = s.dec_random();
    for k in 0..60 {
        feed(&mut s, 0.0011 + k as f64 * 1e-5, &nak(&[0]));
    }
    assert!(s.decreases() > 20, "{} decreases: more than 5 in one period", s.decreases());
    assert_eq!(s.decreases(), 1 + (2..=61).filter(|n| n % dec_random == 0).count() as u64);
    assert!((s.period() - 1e-6 * 1.125f64.powi(s.decreases() as i32)).abs() < 1e-15);
}

/// Row 18: an advancing ACK caps `P` at `RTT_s` and sends at once, cutting the freeze short.
#[test]
fn advancing_ack_caps_the_period_at_the_rtt() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.0011, &ack(1, 1)); // RTT_s := 1 µs (the first report replaces 10 ms)
    assert_eq!(s.rtt(), 1e-6);
    run_to(&mut s, 0.0011, 0.0012);
    let last = s.curr_seq();
    feed(&mut s, 0.002, &nak(&[last])); // P 1.125 µs > RTT_s; a freeze
    let out = run_to(&mut s, 0.002, 0.003);
    assert_eq!(out.len(), 1, "one packet, then the freeze's SYN + P");
    assert!(s.next_pass().unwrap() > 0.0119);
    feed(&mut s, 0.004, &ack(2, 1));
    assert_eq!(s.period(), 1e-6, "capped at RTT_s");
    let out = run_to(&mut s, 0.004, 0.004);
    assert!(out.iter().any(|(t, p, _)| matches!(p, Packet::Data { .. }) && (*t - 0.004).abs() < 1e-9));
}

/// Row 22: a timeout queues every unacknowledged packet and changes neither `P` nor slow start;
/// the first one falls on the 30 ms grid (row 36).
#[test]
fn timeout_changes_neither_rate_nor_slow_start() {
    let mut s = sender(0.0);
    let out = run_to(&mut s, 0.0, 0.035);
    assert_eq!(data_seqs(&out), vec![0, 1, 0, 1], "sent, then queued again by the EXP at 30 ms");
    assert!(out[2].0 >= 0.03 && out[2].0 < 0.0301);
    assert!(s.in_slow_start());
    assert_eq!(s.period(), 1e-6);
    assert!((s.exp_interval() - 0.03).abs() < 1e-12);
}

/// Rows 23, 24: the rate tick is skipped after any NAK, re-reports included; the ACK count
/// survives a skip (the slip), so the next quiet tick increases.
#[test]
fn increase_is_skipped_after_a_re_reported_nak() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.002, &ack(1, 10_000));
    feed(&mut s, 0.003, &nak(&[1])); // slow start ends, a new period
    let p0 = s.period();
    run_to(&mut s, 0.003, 0.0105); // tick at 10 ms: skipped (a NAK)
    assert_eq!(s.period(), p0);
    run_to(&mut s, 0.0105, 0.0205); // tick at 20 ms: the ACK of 2 ms still counts
    let p1 = s.period();
    assert!(p1 < p0, "the carried-over ACK allows the increase");
    // A re-reported NAK (first number ≤ LastDecSeq) and an ACK in the next interval: skipped.
    feed(&mut s, 0.021, &ack(2, 10_000));
    feed(&mut s, 0.022, &nak(&[1]));
    let p2 = s.period(); // the NAK itself may decrease (DecRandom)
    run_to(&mut s, 0.022, 0.0305);
    assert_eq!(s.period(), p2, "no increase after a re-reported NAK");
    feed(&mut s, 0.031, &ack(3, 10_000));
    run_to(&mut s, 0.031, 0.0405);
    assert!(s.period() < p2, "a quiet interval with an ACK increases");
}

/// Row 24 on its own: an increase without an ACK in its own interval.
#[test]
fn ack_counted_before_a_nak_skip_allows_the_next_increase() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.004, &nak(&[1]));
    feed(&mut s, 0.005, &ack(1, 10_000));
    let p0 = s.period();
    run_to(&mut s, 0.005, 0.0105);
    assert_eq!(s.period(), p0, "skipped for the NAK");
    run_to(&mut s, 0.0105, 0.0205); // no ACK between 10 and 20 ms
    assert!(s.period() < p0);
}

/// Row 25: the increase is Table 1's, floored at 1/1500; the spec's worked example.
#[test]
fn increase_follows_table_1_down_to_one_1500th() {
    use netsim::udt2004::increase;
    let inc = increase(150e-6, 8333.0, 100e-6); // P > PBeforeNak: the L/9 cap
    assert!((inc - 0.1).abs() < 1e-12, "{inc}");
    let p = 150e-6 * 0.01 / (150e-6 * inc + 0.01);
    assert!((p * 1e6 - 149.775).abs() < 1e-3);
    assert_eq!(increase(1e-6, 8333.0, 1.0), 1.0 / 1500.0, "L < C");
    assert_eq!(increase(1.0 / 8333.0, 8333.0, 1.0), 1.0 / 1500.0, "L = C");
    assert!((increase(1e-3, 8333.0, 1.0) - 0.1).abs() < 1e-12, "88 Mb/s spare: 0.1 packet");
    assert!((increase(1e-2, 8333.0, 1.0) - 0.1).abs() < 1e-12, "98.8 Mb/s spare: 0.1 packet");
    assert!((increase(1.0 / 8000.0, 8333.0, 1.0) - 0.01).abs() < 1e-12, "4 Mb/s spare: 0.01 packet");
}

fn one_flow(seed: u64, queue: u64) -> RunSpec {
    RunSpec {
        seed,
        duration_s: 10.0,
        sample_s: 1.0,
        bottleneck: Bottleneck {
            rate_mbps: 100.0,
            queue_pkts: queue,
            delay_ms: 0.0,
            loss: 0.0,
            access_rate_mbps: None,
            host_nic: None,
        },
        flows: vec![FlowSpec {
            name: None,
            protocol: Protocol::Udt,
            cc: Some(NS2_2004.into()),
            flow_control: true,
            rtt_ms: 10.0,
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
        }],
        short_flows: None,
    }
}

/// End to end: one flow through a 100 Mb/s, 10 ms RTT DropTail dumbbell keeps most of the link
/// busy once started, and a run is a function of its spec.
#[test]
fn one_flow_fills_most_of_a_100_mbps_10_ms_dumbbell_deterministically() {
    for queue in [10, 100] {
        let r = run(&one_flow(1, queue)).expect("a valid spec");
        let f = &r.flows[0];
        assert_eq!(f.cc.as_deref(), Some(NS2_2004));
        let after_1s: f64 = f.throughput_mbps[1..].iter().sum::<f64>() / (f.throughput_mbps.len() - 1) as f64;
        assert!(after_1s > 50.0, "queue {queue}: {after_1s:.1} Mb/s from 1 s to 10 s ({:?})", f.throughput_mbps);
        assert!(r.bottleneck.utilisation > 0.5);
        let again = run(&one_flow(1, queue)).expect("valid");
        assert_eq!(serde_json::to_string(&r).unwrap(), serde_json::to_string(&again).unwrap());
    }
}

/// What the model cannot honour is refused with the reason.
#[test]
fn finite_transfers_and_flow_control_off_are_refused() {
    let mut s = one_flow(1, 10);
    s.flows[0].bytes = Some(1_000_000);
    assert!(run(&s).unwrap_err().0.contains("no finite transfers"));
    let mut s = one_flow(1, 10);
    s.flows[0].flow_control = false;
    assert!(run(&s).unwrap_err().0.contains("window_pkts"));
}

/// Row 15: the sender answers every ACK with an ACK2, a repeated (non-advancing) one included.
#[test]
fn every_ack_gets_an_ack2() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    for (k, t) in [0.002, 0.003, 0.004].into_iter().enumerate() {
        feed(&mut s, t, &Packet::Ack { serial: k as u32, ack: 1, rtt_us: 10_000, speed: 0, capacity: 0 });
    }
    let out = run_to(&mut s, 0.004, 0.004);
    let serials: Vec<u32> = out
        .iter()
        .filter_map(|(_, p, _)| match p {
            Packet::Ack2 { serial } => Some(*serial),
            _ => None,
        })
        .collect();
    assert_eq!(serials, vec![0, 1, 2]);
    assert_eq!(s.last_ack(), 1);
}

/// Rows 19, 17: out of slow start, `W := ceil(0.875·W + 0.125·AS·(RTT_s + SYN))`, with `RTT_s`
/// replaced by the first report that is not exactly 10 ms.
#[test]
fn window_is_a_rounded_up_ewma_of_as_times_rtt_plus_syn() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.002, &nak(&[1])); // slow start ends with W = 1
    assert_eq!(s.window(), 1);
    feed(&mut s, 0.003, &Packet::Ack { serial: 0, ack: 1, rtt_us: 100_000, speed: 8000, capacity: 8333 });
    assert_eq!(s.rtt(), 0.1);
    assert_eq!(s.window(), (0.875f64 + 0.125 * 8000.0 * 0.11).ceil() as i64);
    assert_eq!(s.window(), 111);
    feed(&mut s, 0.004, &Packet::Ack { serial: 1, ack: 2, rtt_us: 20_000, speed: 0, capacity: 8333 });
    assert!((s.rtt() - (0.875 * 0.1 + 0.125 * 0.02)).abs() < 1e-15, "smoothed once more");
    assert_eq!(s.window(), 111, "AS = 0 leaves W");
}

/// Rows 31, 32 (slip): a new period sends one packet, then pauses `SYN + P`; a second NAK
/// cuts the pause short at once.
#[test]
fn second_nak_cuts_the_freeze_short() {
    let mut s = sender(0.0);
    run_to(&mut s, 0.0, 0.001);
    feed(&mut s, 0.002, &nak(&[1, 0]));
    let out = run_to(&mut s, 0.002, 0.005);
    assert_eq!(data_seqs(&out), vec![0], "one packet, then the pause");
    feed(&mut s, 0.005, &nak(&[1]));
    let out = run_to(&mut s, 0.005, 0.005);
    assert_eq!(data_seqs(&out), vec![1], "the second NAK's pass runs at once");
}

/// Rows 9, 38: duplicates are measured and counted as arrivals but change no ACK.
#[test]
fn duplicates_are_measured_but_not_acknowledged_twice() {
    let mut r = Receiver::new(at(0.0));
    for (k, seq) in [0, 1, 1, 0, 2].into_iter().enumerate() {
        feed(&mut r, 0.001 + k as f64 * 1e-4, &Packet::Data { seq });
    }
    assert_eq!(r.arrivals(), 5, "the module's own count includes duplicates");
    assert_eq!(r.stats().delivered, 3 * 1500, "delivered: unique in-order packets");
    let out = run_to(&mut r, 0.0015, 0.025);
    let acks: Vec<i64> = out
        .iter()
        .filter_map(|(_, p, _)| match p {
            Packet::Ack { ack, .. } => Some(*ack),
            _ => None,
        })
        .collect();
    assert_eq!(acks, vec![3], "one ACK at 10 ms; at 20 ms it has not advanced and 2·RTT_r has not passed");
}

/// Rows 33, 35: arrival speed from the arrival intervals; the capacity is 0 while 9 of the 16
/// probe slots hold 0.0 (7 pairs), then the pair gap once the sort has gathered the zeros.
#[test]
fn capacity_is_zero_before_eight_packet_pairs() {
    let mut r = Receiver::new(at(0.0));
    let gap = 50e-6;
    let mut t = 0.0101;
    for seq in 0..98 {
        feed(&mut r, t, &Packet::Data { seq }); // pairs (16n, 16n+1) for n = 0..6: 7 probes
        t += gap;
    }
    let first = run_to(&mut r, t - gap, 0.02);
    for seq in 98..130 {
        feed(&mut r, t, &Packet::Data { seq }); // two more pairs
        t += gap;
    }
    let second = run_to(&mut r, t - gap, 0.03);
    let field = |out: &[(f64, Packet, u32)]| match out.last() {
        Some((_, Packet::Ack { speed, capacity, .. }, _)) => (*speed, *capacity),
        other => panic!("no ACK: {other:?}"),
    };
    // 1/50 µs = 20 000 pkts/s, rounded up after the float difference of two µs instants.
    let near = |v: u32| (20_000..=20_001).contains(&v);
    let (speed, capacity) = field(&first);
    assert!(near(speed) && capacity == 0, "{:?}", field(&first));
    let (speed, capacity) = field(&second);
    assert!(near(speed) && near(capacity), "{:?}", field(&second));
}

/// Row 26: the `L/9` cap applies only while `P > PBeforeNak`; at `P = PBeforeNak` (after a NAK
/// that did not decrease) the spare capacity `L − C` sets the step.
#[test]
fn the_l_over_9_cap_holds_only_while_p_exceeds_p_before_nak() {
    use netsim::udt2004::increase;
    // L = 7000 pkts/s (84 Mb/s), C = 1000: L/9 is 9.3 Mb/s, L − C 72 Mb/s.
    assert!((increase(1e-3, 7000.0, 0.5e-3) - 0.01).abs() < 1e-12, "capped at L/9");
    assert!((increase(1e-3, 7000.0, 1e-3) - 0.1).abs() < 1e-12, "not capped");
}

/// §8.2, §8.4 consequence: once the sender only retransmits, the numbers 16n and 16n + 1 no
/// longer leave back to back, so a "pair" measures the sending period: the capacity report falls
/// from the link's 83 334 pkts/s to the sending rate, and with `L ≈ C` the increase of §6.2 sits
/// at its floor. (The sorting slip only speeds this up: with a correct exchange it happens too.)
#[test]
fn capacity_estimate_follows_the_rate_down_after_a_collapse() {
    let mut r = Receiver::new(at(0.0));
    let capacity = |out: &[(f64, Packet, u32)]| match out.iter().rev().find(|(_, p, _)| matches!(p, Packet::Ack { .. }))
    {
        Some((_, Packet::Ack { capacity, .. }, _)) => *capacity,
        _ => panic!("no ACK in {out:?}"),
    };
    // New data at the 1 Gb/s line rate (12 µs): 17 back-to-back pairs.
    let mut t = 0.0101;
    for seq in 0..272 {
        feed(&mut r, t, &Packet::Data { seq });
        t += 12e-6;
    }
    let before = capacity(&run_to(&mut r, t, 0.02));
    assert!((83_000..=84_000).contains(&before), "line-rate pairs: {before} pkts/s");
    // Retransmissions of the old pairs' numbers, one every 10 ms (P = 10 ms, 100 pkts/s): the
    // receiver times them as pairs all the same.
    let mut t = 0.021;
    for n in 0..17 {
        for seq in [16 * n, 16 * n + 1] {
            feed(&mut r, t, &Packet::Data { seq });
            run_to(&mut r, t, t + 0.0099);
            t += 0.01;
        }
    }
    let after = capacity(&run_to(&mut r, t, t + 0.05));
    assert!((99..=101).contains(&after), "pairs sent one period apart: {after} pkts/s");
}

/// 1 Gb/s, 100 ms RTT, queue one BDP (8333), `Wmax` 100 000: the rules of §6, §8, §9 trap the
/// flow (spec §6.5 "Consequence"). Slow start's 1 µs bursts overshoot; ~1430 immediate NAKs in
/// 0.2 s, all in the first period, decrease `P` by ×1.125 each (`DecRandom` = 1 for this seed)
/// or every 2nd/3rd; the ~16 600 lost numbers then block new data, so `CurrSeq` — hence
/// `LastDecSeq` — never moves, no new period starts, and the receiver's re-reports (one per
/// `RTT_r`) keep decreasing while `L` has followed the rate down; the advancing ACKs cap `P` at
/// the RTT: about 10 pkts/s, 0.12 Mb/s, for good.
#[test]
fn one_flow_on_a_1_gbps_100_ms_path_is_trapped_after_the_slow_start_overshoot() {
    for seed in [1, 2] {
        let mut spec = one_flow(seed, 8333);
        spec.duration_s = 12.0;
        spec.bottleneck.rate_mbps = 1000.0;
        spec.flows[0].rtt_ms = 100.0;
        spec.flows[0].window_pkts = Some(100_000);
        let r = run(&spec).expect("a valid spec");
        let f = &r.flows[0];
        assert!(f.throughput_mbps[1] > 300.0, "slow start reaches the link: {:?}", f.throughput_mbps);
        let tail = &f.throughput_mbps[9..];
        assert!(tail.iter().all(|&m| m < 1.0), "seed {seed}: trapped below 1 Mb/s: {:?}", f.throughput_mbps);
        assert!(f.loss_events > 1400, "seed {seed}: {} NAKs", f.loss_events);
        let p_end = *f.period_us.last().expect("samples");
        assert!(p_end > 50_000.0, "seed {seed}: P held near the RTT cap, {p_end} µs");
    }
}

/// SC'04 Fig. 6's setting (1 Gb/s, queue 8333, a 1 ms and a 100 ms flow): the 1 ms flow is
/// trapped another way (spec §6.5 "Consequence"). After its overshoot the ACK's every-other
/// removal (§3.4) leaves hundreds of numbers below `LastAck` in the loss list; each NAK sends
/// one of them (the smallest first, unchecked, §3.1), which the receiver discards, so no ACK
/// advances, nothing caps `P` (§6.8), and every re-reported NAK multiplies it by 1.125 without
/// bound.
#[test]
fn fig6_short_flow_stalls_on_stale_loss_entries_with_an_unbounded_period() {
    let mut spec = one_flow(1, 8333);
    spec.bottleneck.rate_mbps = 1000.0;
    spec.flows[0].rtt_ms = 1.0;
    spec.flows[0].window_pkts = Some(100_000);
    let mut long = spec.flows[0].clone();
    long.rtt_ms = 100.0;
    spec.flows.push(long);
    let r = run(&spec).expect("a valid spec");
    let short = &r.flows[0];
    assert!(short.throughput_mbps[2..].iter().all(|&m| m < 0.1), "{:?}", short.throughput_mbps);
    let p = &short.period_us;
    assert!(p[9] > 1e6 && p[9] > 100.0 * p[5], "P grows without bound: {p:?}");
    let long = &r.flows[1];
    assert!(long.throughput_mbps[9] < 1.0, "{:?}", long.throughput_mbps);
}
