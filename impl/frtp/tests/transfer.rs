//! FRTP's behaviour on a virtual clock (FRTP.md §4, §5): constant inter-packet time with
//! retransmissions, the 20 ms whole-list ERR and its split, the 100 ms / buffer-full ACK, EXP,
//! no SYN, the data-path address, and byte-exact transfers under loss. The pipe is SABUL's
//! test harness, shared.

#[path = "../../sabul/tests/pair/mod.rs"]
mod pair;

use std::net::{Ipv4Addr, SocketAddr};

use frtp::{receiver_config, sender_config, Circuit, Event, Receiver, ReceiverConfig};
use pair::{Impairment, Pair, CLEAN, S_ADDR};
use sabul::control_stream::{ControlDecoder, Decoded};
use sabul::wire::{emit_data, Control, LossWords, OptionBlock};
use transfer::prng::pattern;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use transfer::transmit::Source;

/// 100 Mb/s of 1500-byte IP packets: one every 120 µs.
const RATE: u64 = 100_000_000;
const IPT: Duration = Duration::from_micros(120);

fn circuit(data_ip: Ipv4Addr) -> Circuit {
    Circuit { data_ip, rate_bps: RATE }
}

fn frtp_pair(len: usize, imp: Impairment, seed: u64) -> Pair {
    let rc = receiver_config(7001, 7000, circuit(Ipv4Addr::UNSPECIFIED));
    Pair::with(pattern(len, seed), imp, seed, sender_config(1_000_000_000), rc)
}

fn transfer(len: usize, imp: Impairment, seed: u64) -> Pair {
    let mut p = frtp_pair(len, imp, seed);
    p.run(Duration::from_secs(600));
    assert!(p.finished(), "len {len}: sender {:?} receiver {:?}", p.sender_events, p.receiver_events);
    assert!(p.output == p.input, "len {len}: bytes differ");
    p
}

#[test]
fn transfers_are_byte_exact_at_the_edge_sizes_and_under_loss() {
    for len in [0, 1, 1467, 1468, 1469, 3 * 1468] {
        transfer(len, CLEAN, len as u64);
    }
    for (i, loss) in [0.01, 0.05].into_iter().enumerate() {
        transfer(1 << 20, Impairment { loss, reorder: 0.02, duplicate: 0.01 }, 10 + i as u64);
    }
}

#[test]
fn every_packet_retransmissions_included_leaves_one_ipt_after_the_last() {
    let mut p = transfer(2 << 20, Impairment { loss: 0.05, reorder: 0.0, duplicate: 0.0 }, 3);
    let packets = (2u64 << 20).div_ceil(1468);
    assert!(p.sender.stats().retrans > 0 && p.data_sent > packets, "losses were repaired");
    let gaps: Vec<Duration> = p.departures.windows(2).map(|w| w[1].0.duration_since(w[0].0)).collect();
    assert!(gaps.iter().all(|&g| g >= IPT), "never faster than the rate: {:?}", gaps.iter().min());
    // While the sender has something to send, it sends it exactly one IPT after the last:
    // the new data is all in the buffer from the start, so only the tail waits for ERRs.
    let first_new_done = p.departures.iter().position(|&(_, s)| u64::from(s) == packets - 1).unwrap();
    let busy = &gaps[..first_new_done];
    assert!(busy.iter().all(|&g| g == IPT), "constant IPT: {:?}", busy.iter().max());
    let retrans_in_busy = {
        let mut seen = std::collections::HashSet::new();
        p.departures[..first_new_done].iter().filter(|&&(_, s)| !seen.insert(s)).count()
    };
    assert!(retrans_in_busy > 0, "retransmissions interleave at the same IPT");
    assert_eq!(p.sender.controller().get().pacing_period_us(), 120.0, "the rate never changes");
    p.departures.clear();
}

/// A receiver past the option exchange, and a way to send it DATA and read its frames.
struct Rx {
    r: Receiver,
    t: Instant,
    buf: Vec<u8>,
}

impl Rx {
    fn new(config: ReceiverConfig) -> Rx {
        let t = Instant::from_micros(1_000_000);
        let mut r = Receiver::new(config, S_ADDR.parse().unwrap(), t);
        let mut buf = vec![0u8; 1 << 16];
        let n = r.poll_transmit(t, &mut buf).unwrap().size;
        let echo = OptionBlock::parse_as(&buf[..n], true).unwrap();
        let mut b = Vec::new();
        echo.emit(&mut b);
        r.handle_control(t, &b);
        assert_eq!(r.poll_event(), Some(Event::Connected));
        Rx { r, t, buf }
    }

    fn data(&mut self, seq: u32) {
        let mut d = vec![0u8; 104];
        emit_data(SeqNo::new(seq), &[7u8; 100], &mut d);
        self.r.handle_datagram(self.t, S_ADDR.parse().unwrap(), &d);
    }

    fn frames(&mut self) -> Vec<Control> {
        let mut out = Vec::new();
        let mut d = ControlDecoder::frames(366);
        while let Some(x) = self.r.poll_transmit(self.t, &mut self.buf) {
            assert_eq!(x.source, Source::Control);
            let mut b: &[u8] = &self.buf[..x.size];
            while let Some(Decoded::Frame(f)) = d.decode(&mut b).unwrap() {
                out.push(f);
            }
        }
        out
    }

    /// Runs the timers up to `until`; returns each due time's frames, µs since the start.
    fn run_until(&mut self, until: Instant) -> Vec<(u128, Vec<Control>)> {
        let start = Instant::from_micros(1_000_000);
        let mut out = Vec::new();
        while let Some(t) = self.r.poll_timeout().filter(|&t| t <= until) {
            self.t = t;
            self.r.handle_timeout(t);
            let f = self.frames();
            if !f.is_empty() {
                out.push((t.duration_since(start).as_micros(), f));
            }
        }
        out
    }
}

fn default_rx() -> Rx {
    Rx::new(receiver_config(7001, 7000, circuit(Ipv4Addr::UNSPECIFIED)))
}

fn errs(frames: &[Control]) -> impl Iterator<Item = &LossWords> {
    frames.iter().filter_map(|f| match f {
        Control::Err(l) => Some(l),
        _ => None,
    })
}

fn losses(frames: &[Control]) -> Vec<u32> {
    errs(frames).flat_map(|l| l.ranges()).flat_map(|(a, b)| a.get()..=b.get()).collect()
}

#[test]
fn the_whole_loss_list_is_sent_every_20_ms_and_split_past_366_words() {
    let mut rx = default_rx();
    // 400 single losses: 1, 3, …, 799 — 400 words, more than one ERR holds.
    for s in (0..=800).step_by(2) {
        rx.data(s);
    }
    let at_once = rx.frames();
    assert_eq!(at_once.len(), 400, "each gap is reported at once, alone");
    let all: Vec<u32> = (1..800).step_by(2).collect();
    assert_eq!(losses(&at_once), all);

    let ticks = rx.run_until(Instant::from_micros(1_000_000 + 65_000));
    let err_ticks: Vec<_> = ticks.iter().filter(|(_, f)| errs(f).next().is_some()).collect();
    assert_eq!(err_ticks.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [20_000, 40_000, 60_000], "every 20 ms");
    for (_, f) in &err_ticks {
        let words: Vec<usize> = errs(f).map(|l| l.words().len()).collect();
        assert_eq!(words, [366, 34], "split past 366 words, in one tick");
        assert_eq!(losses(f), all, "the whole list, in order, each time");
    }
    // Repairs shrink the list; an empty list sends no ERR.
    for s in (1..700).step_by(2) {
        rx.data(s);
    }
    assert!(rx.frames().is_empty(), "retransmissions are not reported");
    let ticks = rx.run_until(Instant::from_micros(1_000_000 + 85_000));
    assert_eq!(losses(&ticks.last().unwrap().1), (701..800).step_by(2).collect::<Vec<_>>());
    for s in (701..800).step_by(2) {
        rx.data(s);
    }
    let ticks = rx.run_until(Instant::from_micros(1_000_000 + 200_000));
    assert!(ticks.iter().all(|(_, f)| losses(f).is_empty()), "{ticks:?}");
}

fn acks(frames: &[Control]) -> Vec<u32> {
    frames
        .iter()
        .filter_map(|f| match f {
            Control::Ack(a) => Some(a.get()),
            _ => None,
        })
        .collect()
}

#[test]
fn acks_go_every_100_ms_when_the_ack_point_moved() {
    let mut rx = default_rx();
    let mut sent = Vec::new();
    let mut next = 0;
    // 1000 packets over 350 ms, in order.
    while rx.t < Instant::from_micros(1_000_000 + 350_000) {
        let due = rx.r.poll_timeout().unwrap().min(rx.t + Duration::from_micros(350));
        rx.t = due;
        rx.r.handle_timeout(due);
        rx.data(next);
        next += 1;
        let f = rx.frames();
        assert!(losses(&f).is_empty());
        if !acks(&f).is_empty() {
            sent.push((due.duration_since(Instant::from_micros(1_000_000)).as_micros(), acks(&f)));
        }
    }
    assert_eq!(sent.iter().map(|x| x.0).collect::<Vec<_>>(), [100_000, 200_000, 300_000], "{sent:?}");
    assert!(sent.windows(2).all(|w| w[0].1[0] < w[1].1[0]), "each carries the new ACK point");
    // Nothing new arrives: no ACK at 400 ms (the point did not move).
    let ticks = rx.run_until(Instant::from_micros(1_000_000 + 450_000));
    let later: Vec<u32> = ticks.iter().flat_map(|(_, f)| acks(f)).collect();
    assert_eq!(later, [next], "one ACK for the packets since 300 ms, then none");
}

#[test]
fn a_full_resequencing_buffer_is_acknowledged_at_once() {
    // Beyond the window: offset ≥ recv_flag_size.
    let mut rx =
        Rx::new(ReceiverConfig { recv_flag_size: 16, ..receiver_config(7001, 7000, circuit(Ipv4Addr::UNSPECIFIED)) });
    for s in 0..16 {
        rx.data(s);
    }
    assert!(rx.frames().is_empty());
    rx.data(16); // offset 16 from the ACK point 0
    assert_eq!(acks(&rx.frames()), [16], "at once, with the next expected number");
    // Within the window, but the application has read nothing: no free slot.
    rx.data(16);
    assert_eq!(acks(&rx.frames()), [16], "sent although the point did not move");
    let mut out = vec![0u8; 1 << 16];
    assert_eq!(rx.r.read(&mut out), 1600);
    rx.data(16);
    assert!(rx.frames().is_empty(), "stored once there is room, acknowledged by the timer");
}

#[test]
fn the_receiver_never_sends_a_syn_and_the_sender_ignores_one() {
    let p = transfer(300_000, Impairment { loss: 0.02, reorder: 0.0, duplicate: 0.0 }, 5);
    assert_eq!(p.receiver.stats().syns_sent, 0);
    assert_eq!(p.syn_total, 0);

    let mut p = frtp_pair(1 << 20, CLEAN, 6);
    while p.sender.next_seq().get() < 100 {
        p.step();
    }
    let mut b = Vec::new();
    Control::Syn(1000).emit(&mut b);
    let now = p.now;
    p.sender.handle_control(now, &b);
    assert_eq!(p.sender.stats().syns_recv, 1);
    assert_eq!(p.sender.controller().get().pacing_period_us(), 120.0);
    p.run(Duration::from_secs(60));
    assert!(p.finished(), "a type-4 frame is no error: {:?}", p.sender_events);
    assert_eq!(p.output, p.input);
}

#[test]
fn each_departure_is_a_timer_the_runtime_may_not_batch() {
    // A runtime lets paced data out late, several at a wake-up, only where the protocol leaves
    // the departure out of `poll_timer` (transfer::protocol): FRTP's fixed IPT (§4) must not be
    // batched, so its next departure is a timer; SABUL's is paced data.
    use transfer::protocol::Protocol;
    let mut p = frtp_pair(100 * 1468, CLEAN, 1);
    while p.sender.next_seq().get() < 10 {
        p.step();
    }
    let next = p.sender.poll_timeout().expect("a departure is due");
    assert_eq!(Protocol::poll_timer(&p.sender), Some(next));
}

#[test]
fn exp_requeues_everything_unacknowledged_at_the_same_ipt() {
    let mut p = frtp_pair(100 * 1468, CLEAN, 1);
    while p.sender.next_seq().get() < 100 {
        p.step();
    }
    // The receiver goes silent: only the sender runs from here.
    let start = p.now;
    let mut buf = vec![0u8; 2048];
    let mut t = start;
    let mut sent = Vec::new();
    while let Some(due) = p.sender.poll_timeout().filter(|&d| d < start + Duration::from_millis(1_100)) {
        t = due.max(t);
        p.sender.handle_timeout(t);
        while let Some(x) = p.sender.poll_transmit(t, &mut buf) {
            if x.source == Source::Data {
                sent.push((t, sabul::wire::DataPacket::new_checked(&buf[..x.size], 1472).unwrap().seq().get()));
            }
        }
    }
    assert_eq!(p.sender.stats().exp_events, 1);
    let unacked = p.sender.next_seq().get() - p.receiver.ack().get();
    assert!(unacked > 0);
    let seqs: Vec<u32> = sent.iter().map(|x| x.1).collect();
    let want: Vec<u32> = (p.receiver.ack().get()..100).collect();
    assert_eq!(seqs[..want.len()], want[..], "every unacknowledged packet again, oldest first");
    assert!(sent[0].0.duration_since(start) >= Duration::from_secs(1) - Duration::from_millis(20));
    assert!(sent.windows(2).all(|w| w[1].0.duration_since(w[0].0) == IPT), "at the fixed IPT");
}

#[test]
fn data_goes_to_the_data_path_address_and_is_taken_from_any_source() {
    let data_ip = Ipv4Addr::new(192, 168, 10, 2);
    let rc = receiver_config(7001, 7000, circuit(data_ip));
    let mut p = Pair::with(pattern(50_000, 8), CLEAN, 8, sender_config(RATE), rc);
    p.data_to = SocketAddr::new(data_ip.into(), 7001);
    p.run(Duration::from_secs(10));
    assert!(p.finished());
    assert_eq!(p.output, p.input);

    let mut rx = Rx::new(receiver_config(7001, 7000, circuit(data_ip)));
    let mut d = vec![0u8; 10];
    emit_data(SeqNo::new(0), &[1; 6], &mut d);
    rx.r.handle_datagram(rx.t, "192.168.10.1:9000".parse().unwrap(), &d);
    assert_eq!((rx.r.stats().foreign, rx.r.stats().datagrams), (0, 1));
}
