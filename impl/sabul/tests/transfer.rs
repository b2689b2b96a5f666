//! SABUL sender and receiver over the in-memory pipe of `pair` with a virtual clock
//! (SABUL.md §2, §5, §6, §10).

mod pair;

use std::net::SocketAddr;
use std::sync::Arc;

use pair::{Impairment, Pair, StreamItem, CLEAN, R_ADDR, S_ADDR};
use sabul::cc::SabulRate;
use sabul::control_stream::{ControlDecoder, Decoded};
use sabul::wire::{Control, DataPacket, OptionBlock};
use sabul::{Event, Receiver, ReceiverConfig, Sender, SenderConfig, SessionError};
use transfer::prng::pattern;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use transfer::transmit::Source;

fn transfer(len: usize, imp: Impairment, seed: u64) -> Pair {
    let mut p = Pair::new(pattern(len, seed), imp, seed);
    p.run(Duration::from_secs(600));
    assert!(p.finished(), "len {len}: sender {:?} receiver {:?}", p.sender_events, p.receiver_events);
    assert_eq!(p.output.len(), len);
    assert!(p.output == p.input, "len {len}: bytes differ");
    p
}

#[test]
fn transfers_are_byte_exact_at_the_edge_sizes() {
    for len in [0, 1, 1467, 1468, 1469, 3 * 1468] {
        transfer(len, CLEAN, len as u64);
    }
}

#[test]
fn a_few_megabytes_arrive_byte_exact() {
    let p = transfer(5 << 20, CLEAN, 7);
    assert_eq!(p.data_sent, (5u64 << 20).div_ceil(1468), "no retransmission on a clean path");
}

#[test]
fn transfers_survive_loss_reordering_and_duplication() {
    for (i, loss) in [0.01, 0.03, 0.05].into_iter().enumerate() {
        let imp = Impairment { loss, reorder: 0.02, duplicate: 0.01 };
        let p = transfer(2 << 20, imp, 100 + i as u64);
        let path = p.data.stats();
        assert!(path.dropped_loss > 0 && path.reordered > 0 && path.duplicated > 0, "loss {loss}: {path:?}");
        assert!(p.sender.stats().retrans >= path.dropped_loss, "loss {loss}: every lost packet was sent again");
    }
}

#[test]
fn the_syn_counts_every_data_datagram_on_arrival_duplicates_included() {
    let mut p = Pair::new(pattern(300_000, 3), Impairment { loss: 0.0, reorder: 0.0, duplicate: 0.2 }, 3);
    p.run(Duration::from_secs(30));
    assert!(p.finished());
    let stats = p.receiver.stats();
    assert_eq!(stats.datagrams, p.data_sent + p.duplicates_made());
    assert!(p.duplicates_made() > 0);
    assert!(p.syn_total > p.data_sent, "duplicates count: {} SYN'd of {} distinct", p.syn_total, p.data_sent);
    assert!(p.syn_total <= stats.datagrams);
}

#[test]
fn exp_requeues_everything_unacknowledged_when_the_receiver_goes_silent() {
    // Slow start off: the fixed window lets all 100 packets out before the silence.
    let sc = SenderConfig { controller: Arc::new(SabulRate::new(100.0, false)), ..Default::default() };
    let rc = ReceiverConfig { data_port: 7001, ..Default::default() };
    let mut p = Pair::with(pattern(100 * 1468, 1), CLEAN, 1, sc, rc);
    // Set up, then cut the data path and the feedback.
    while p.sender.options().is_none() || p.sender.next_seq() == SeqNo::ZERO {
        p.step();
    }
    p.imp.loss = 1.0;
    let start = p.now;
    let mut buf = vec![0u8; 2048];
    let mut t = start;
    let mut seqs = Vec::new();
    // Only the sender runs now; the receiver's feedback never arrives.
    while t < start + Duration::from_millis(1_100) {
        t = p.sender.poll_timeout().unwrap().max(t);
        p.sender.handle_timeout(t);
        while let Some(x) = p.sender.poll_transmit(t, &mut buf) {
            if x.source == Source::Data && t >= start + Duration::from_millis(1_000) {
                seqs.push(DataPacket::new_checked(&buf[..x.size], 1472).unwrap().seq().get());
            }
        }
    }
    let sent = p.sender.next_seq().get();
    assert!(sent > 1);
    let want: Vec<u32> = (0..sent).collect();
    assert!(seqs.len() >= want.len(), "{seqs:?}");
    assert_eq!(seqs[..want.len()], want[..], "after EXP every unacknowledged packet is sent again, oldest first");
}

#[test]
fn a_receiver_that_vanishes_ends_the_sender_after_ten_exp_events() {
    let mut p = Pair::new(pattern(1 << 20, 2), CLEAN, 2);
    while p.sender.next_seq() == SeqNo::ZERO {
        p.step();
    }
    let mut buf = vec![0u8; 2048];
    let mut t = p.now;
    let mut events = Vec::new();
    while events.is_empty() {
        t = p.sender.poll_timeout().expect("a timer while data is outstanding").max(t);
        p.sender.handle_timeout(t);
        while p.sender.poll_transmit(t, &mut buf).is_some() {}
        events.extend(std::iter::from_fn(|| p.sender.poll_event()));
    }
    assert!(matches!(events[..], [Event::Aborted(SessionError::ExpGaveUp { .. })]), "{events:?}");
    assert!(t.duration_since(p.now) >= Duration::from_secs(10) && t.duration_since(p.now) < Duration::from_secs(11));
}

#[test]
fn a_gap_is_reported_at_once_and_re_reported_after_k_rtt() {
    let now = Instant::from_micros(1_000_000);
    let s: SocketAddr = S_ADDR.parse().unwrap();
    let mut r = Receiver::new(ReceiverConfig { data_port: 7001, ..Default::default() }, s, now);
    let mut buf = vec![0u8; 4096];
    let mut block = Vec::new();
    let n = r.poll_transmit(now, &mut buf).unwrap().size;
    let o = OptionBlock::parse(&buf[..n]).unwrap();
    o.emit(&mut block);
    r.handle_control(now + Duration::from_millis(2), &block); // R0 = 2 ms: RTT = 20 ms
    assert_eq!(r.rtt(), Duration::from_millis(20));
    let data = |seq: u32| {
        let mut d = vec![0u8; 104];
        sabul::wire::emit_data(SeqNo::new(seq), &[7u8; 100], &mut d);
        d
    };
    let t0 = now + Duration::from_millis(3);
    r.handle_datagram(t0, s, &data(0));
    r.handle_datagram(t0, s, &data(3));
    let frames = |r: &mut Receiver, t: Instant, buf: &mut Vec<u8>| {
        let mut out = Vec::new();
        while let Some(x) = r.poll_transmit(t, buf) {
            let mut b: &[u8] = &buf[..x.size];
            let mut d = ControlDecoder::frames(366);
            while let Ok(Some(Decoded::Frame(f))) = d.decode(&mut b) {
                out.push(f);
            }
        }
        out
    };
    let errs = |fs: Vec<Control>| -> Vec<Vec<(u32, u32)>> {
        fs.into_iter()
            .filter_map(|f| match f {
                Control::Err(l) => Some(l.ranges().into_iter().map(|(a, b)| (a.get(), b.get())).collect()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(errs(frames(&mut r, t0, &mut buf)), vec![vec![(1, 2)]], "one ERR at once, listing exactly the gap");
    // Drive the timers: re-reports at k·RTT = 40 ms, then 60 ms later (k = 3), on the 20 ms grid.
    let mut reports = Vec::new();
    let mut t = t0;
    while t < t0 + Duration::from_millis(200) {
        t = r.poll_timeout().unwrap();
        r.handle_timeout(t);
        if !errs(frames(&mut r, t, &mut buf)).is_empty() {
            reports.push(t.duration_since(t0).as_millis());
        }
        if t >= t0 + Duration::from_millis(120) {
            r.handle_datagram(t, s, &data(1));
            r.handle_datagram(t, s, &data(2));
        }
    }
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(reports[0] >= 40 && reports[0] < 60, "{reports:?}");
    assert!(reports[1] - reports[0] >= 60, "{reports:?}");
}

#[test]
fn data_from_a_foreign_address_is_neither_stored_nor_counted() {
    let now = Instant::from_micros(1_000_000);
    let s: SocketAddr = S_ADDR.parse().unwrap();
    let mut r = Receiver::new(ReceiverConfig::default(), s, now);
    let mut d = vec![0u8; 10];
    sabul::wire::emit_data(SeqNo::new(0), &[1; 6], &mut d);
    r.handle_datagram(now, "10.9.9.9:7000".parse().unwrap(), &d);
    r.handle_datagram(now, "10.0.0.1:9999".parse().unwrap(), &d);
    assert_eq!((r.stats().foreign, r.stats().datagrams), (1, 1));
}

#[test]
fn an_err_beyond_what_was_sent_aborts_the_sender() {
    let now = Instant::from_micros(1_000_000);
    let mut s = Sender::new(SenderConfig::default(), R_ADDR.parse().unwrap(), now);
    let mut b = Vec::new();
    OptionBlock::new(7001, 7000, 1472).emit(&mut b);
    Control::Err(sabul::wire::LossWords::new(vec![5]).unwrap()).emit(&mut b);
    s.handle_control(now, &b);
    let ev: Vec<_> = std::iter::from_fn(|| s.poll_event()).collect();
    assert!(matches!(ev[..], [Event::Connected, Event::Aborted(SessionError::ErrBeyondSent { .. })]), "{ev:?}");
}

#[test]
fn a_reset_before_the_fin_aborts_the_receiver_and_after_it_is_ignored() {
    let mut p = Pair::new(pattern(10_000, 4), CLEAN, 4);
    p.run(Duration::from_secs(5));
    assert!(p.finished());
    p.receiver.handle_control_closed(p.now, true);
    assert_eq!(p.receiver.poll_event(), None, "a reset after EOF is ignored");

    let mut p = Pair::new(pattern(1 << 20, 5), CLEAN, 5);
    while p.output.len() < 100_000 {
        p.step();
    }
    p.to_receiver.push_back((p.now, StreamItem::Reset));
    p.run(Duration::from_secs(5));
    assert!(matches!(p.receiver_events.last(), Some(Event::Aborted(SessionError::PeerClosed { reset: true, .. }))));
    let ack = p.receiver.ack().get() as usize;
    assert_eq!(p.output.len(), ack * 1468, "delivers everything before its ACK point, nothing after");
    assert_eq!(p.output[..], p.input[..p.output.len()]);
}

#[test]
fn an_echo_lowering_the_packet_size_sets_the_data_size_and_err_limit() {
    let sc = SenderConfig { pkt_size: 1024, controller: Arc::new(SabulRate::new(10.0, false)), ..Default::default() };
    let mut p = Pair::with(pattern(50_000, 6), CLEAN, 6, sc, ReceiverConfig { data_port: 7001, ..Default::default() });
    p.run(Duration::from_secs(5));
    assert!(p.finished());
    assert_eq!(p.output, p.input);
    let o = p.sender.options().unwrap();
    assert_eq!((o.pkt_size, o.payload_size, o.max_loss_length), (1024, 1020, 254));
    assert_eq!(p.data_sent, 50_000u64.div_ceil(1020));
}

#[test]
fn finishing_with_nothing_outstanding_half_closes_without_any_feedback() {
    // The application ends an empty input after the set-up, and the receiver stays silent:
    // the sender's own timer must bring the half-close (§10.1 step 1).
    let now = Instant::from_micros(1_000_000);
    let mut s = Sender::new(SenderConfig::default(), R_ADDR.parse().unwrap(), now);
    let mut b = Vec::new();
    OptionBlock::new(7001, 7000, 1472).emit(&mut b);
    s.handle_control(now, &b);
    while s.poll_transmit(now, &mut [0u8; 64]).is_some() {}
    assert_eq!(s.poll_event(), Some(Event::Connected));
    s.finish();
    let t = s.poll_timeout().expect("a timer for the half-close").max(now);
    assert_eq!(t, now, "due at once");
    s.handle_timeout(t);
    assert_eq!(s.poll_event(), Some(Event::ShutdownWrite));
}
