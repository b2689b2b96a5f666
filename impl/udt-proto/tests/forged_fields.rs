//! Fields a peer controls, forged (UDT4.md §13.5): one control packet with absurd values,
//! spoofed from the peer's address among real traffic, must leave the connection with either
//! progress or a reported failure. Each test forges one field and then runs a transfer that
//! must complete byte-exact.

use transfer::prng::pattern;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};
use udt_proto::config::ConnectionConfig;
use udt_proto::connection::Event;
use udt_proto::pair::{Dir, LinkConfig, Pair};
use udt_proto::seq::AckNo;
use udt_proto::wire::{Ack, Control, NakList, Repr};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The largest data sequence number `a` has sent so far.
fn last_sent(p: &Pair) -> SeqNo {
    p.trace
        .iter()
        .rev()
        .filter(|t| t.dir == Dir::AtoB)
        .find_map(|t| match t.repr()? {
            Repr::Data { header, .. } => Some(header.seq),
            _ => None,
        })
        .expect("data was sent")
}

/// Delivers `control` to `a`'s connection `id` as if `b` had sent it (a spoofed source).
fn forge(p: &mut Pair, id: u32, control: Control<'_>) {
    let repr = Repr::Control { dst_socket_id: id, timestamp: 0, control };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut buf);
    let (now, from) = (p.now, p.b_addr);
    p.a.handle_datagram(now, from, &buf);
}

/// A queue no transfer here fills: nothing sent before a forgery is lost.
const BIG_QUEUE: usize = 100_000;

/// How a forged transfer ended.
#[derive(Debug)]
struct Outcome {
    delivered: usize,
    /// Virtual time from the forgery to the last byte (or to the deadline).
    took: Duration,
    /// Both ends' events.
    events: Vec<Event>,
    /// Whether the sender reported its connection broken.
    sender_broken: bool,
}

/// Sends `len` bytes from a to b over a clean 100 Mb/s, 20 ms path with a DropTail queue of
/// `queue` packets; `setup` runs once the
/// two are connected (it may set a drop filter). Once `forge_after` bytes have been delivered,
/// `forgery` runs (it may forge packets to `a`) and the data direction loses `data_loss` from
/// then on; the transfer then has `deadline` of virtual time to finish.
#[allow(clippy::too_many_arguments)]
fn forged_transfer(
    seed: u64,
    queue: usize,
    len: usize,
    forge_after: usize,
    data_loss: f64,
    deadline: Duration,
    setup: impl FnOnce(&mut Pair, u32),
    forgery: impl FnOnce(&mut Pair, u32),
) -> Outcome {
    let link = LinkConfig { delay: ms(10), rate_bps: Some(100_000_000), queue_pkts: queue, ..Default::default() };
    let mut p = Pair::new(seed, link);
    p.tracing = true;
    let (c, s) = p.connect(ConnectionConfig::default());
    setup(&mut p, c);
    let data = pattern(len, seed);
    let (mut sent, mut got) = (0, Vec::with_capacity(len));
    let mut chunk = vec![0u8; 1 << 16];
    let mut forgery = Some(forgery);
    let mut forged_at = None;
    let mut events = Vec::new();
    let mut sender_broken = false;
    loop {
        if forged_at.is_none() && got.len() >= forge_after {
            (forgery.take().expect("once"))(&mut p, c);
            p.link_mut(Dir::AtoB).loss = data_loss;
            p.tracing = false;
            forged_at = Some(p.now);
        }
        if forged_at.is_some_and(|t: Instant| p.now > t + deadline) || got.len() == len {
            break;
        }
        if let Some(conn) = p.a.connection_mut(c) {
            if sent < len {
                sent += conn.send(p.now, &data[sent..]);
            }
        }
        let stepped = p.step();
        if let Some(conn) = p.b.connection_mut(s) {
            loop {
                let n = conn.recv(&mut chunk);
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&chunk[..n]);
            }
        }
        while let Some((_, ev)) = p.a.poll_event() {
            sender_broken |= matches!(ev, Event::Broken(_));
            events.push(ev);
        }
        while let Some((_, ev)) = p.b.poll_event() {
            events.push(ev);
        }
        if !stepped {
            break;
        }
    }
    assert!(got == data[..got.len()], "what arrived is the input's prefix");
    Outcome { delivered: got.len(), took: p.now - forged_at.unwrap_or(p.now), events, sender_broken }
}

/// The forged ACK of issue 41: it acknowledges exactly what was sent, with RTT = RTTVar =
/// 2³¹ − 1 µs and 1000 packets/s of rate and capacity; then 2 % of the data is lost.
fn absurd_rtt_ack(p: &mut Pair, id: u32) {
    let ack = last_sent(p).next();
    let full = Ack::Full {
        ack_no: AckNo::new(0x1234),
        ack,
        rtt: i32::MAX as u32,
        rtt_var: i32::MAX as u32,
        avail: 8192,
        rate: 1000,
        capacity: 1000,
    };
    forge(p, id, Control::Ack(full));
}

#[test]
fn an_ack_with_an_absurd_rtt_then_loss_leaves_the_transfer_to_complete() {
    for seed in 1..=6 {
        let out = forged_transfer(seed, BIG_QUEUE, 8_000_000, 1_000_000, 0.02, secs(60), |_, _| {}, absurd_rtt_ack);
        assert_eq!(out.delivered, 8_000_000, "seed {seed}: stalled after the forged ACK: {out:?}");
    }
}

#[test]
fn a_lost_last_packet_is_resent_by_exp_while_the_peers_keep_alives_arrive() {
    // An ACK with a long but admissible RTT (10 s) puts the sender's EXP period near 11 s. The
    // transfer's last packet is then lost: nothing after it makes a gap, so no NAK comes and
    // only EXP resends it. Meanwhile the receiver, hearing nothing, sends keep-alives every
    // 0.3 s × EXPCount; if they restarted the sender's EXP (4.11), it would never fire before
    // the receiver declared the sender dead (~41 s).
    const PKTS: usize = 2000;
    let payload = udt_proto::wire::payload_size(ConnectionConfig::default().mss);
    let drop_last = |p: &mut Pair, id: u32| {
        let last = p.a.connection(id).expect("connected").isn().add(PKTS as u32 - 1);
        let mut dropped = false;
        p.drop_filter = Some(Box::new(move |dir, bytes| {
            let is_last = dir == Dir::AtoB
                && matches!(Repr::parse_bytes(bytes), Ok(Repr::Data { header, .. }) if header.seq == last);
            let drop = is_last && !dropped;
            dropped |= drop;
            drop
        }));
    };
    let long_rtt = |p: &mut Pair, id: u32| {
        let ack = p.a.connection(id).expect("connected").isn().add(PKTS as u32 - 1);
        let full =
            Ack::Full { ack_no: AckNo::new(7), ack, rtt: 10_000_000, rtt_var: 0, avail: 8192, rate: 0, capacity: 0 };
        forge(p, id, Control::Ack(full));
    };
    let out = forged_transfer(11, BIG_QUEUE, PKTS * payload, (PKTS - 1) * payload, 0.0, secs(60), drop_last, long_rtt);
    assert_eq!(out.delivered, PKTS * payload, "{out:?}");
    assert!(out.took < secs(20), "{out:?}");
}

#[test]
fn an_ack_for_data_the_receiver_never_got_ends_in_a_reported_failure() {
    // A 200-packet queue drops some of slow start's packets; the forged ACK acknowledges them
    // anyway, so the sender frees them and can never resend them. UDT4 cannot tell a forged
    // ACK from a real one (§13.5): the bound is the EXP timer's dead-peer rule, with the RTT
    // the forgery left (held to 10 s a sample), ~29 minutes here.
    let out = forged_transfer(1, 200, 8_000_000, 1_000_000, 0.02, secs(3600), |_, _| {}, absurd_rtt_ack);
    assert!(out.delivered < 8_000_000, "the freed packets were lost: {out:?}");
    assert!(out.sender_broken, "the sender reported no failure: {out:?}");
}

/// The sequence number `b` has received everything before (in order, from `b`'s reads).
fn delivered_point(p: &Pair, id: u32, delivered: usize) -> SeqNo {
    let payload = udt_proto::wire::payload_size(ConnectionConfig::default().mss);
    p.a.connection(id).expect("connected").isn().add((delivered / payload) as u32)
}

/// A full ACK at `b`'s real ACK point with the given fields (`ack_no` far from the real ones).
fn ack_at(p: &Pair, id: u32, rtt: u32, avail: u32, rate: u32, capacity: u32) -> Control<'static> {
    let ack = delivered_point(p, id, 1_000_000);
    Control::Ack(Ack::Full { ack_no: AckNo::new(0x4000_0000), ack, rtt, rtt_var: rtt, avail, rate, capacity })
}

/// Forges `control` at 1 MB delivered, loses 2 % from then on; all 8 MB must arrive.
fn completes_after(name: &str, forgery: impl Fn(&mut Pair, u32) + Copy) {
    for seed in 1..=3 {
        let out = forged_transfer(seed, BIG_QUEUE, 8_000_000, 1_000_000, 0.02, secs(60), |_, _| {}, forgery);
        assert_eq!(out.delivered, 8_000_000, "{name}, seed {seed}: {out:?}");
        assert!(!out.events.iter().any(|e| matches!(e, Event::Broken(_))), "{name}, seed {seed}: {out:?}");
    }
}

#[test]
fn an_ack_with_a_zero_flow_window_is_read_as_two_and_the_transfer_completes() {
    completes_after("avail 0", |p, id| {
        let c = ack_at(p, id, 20_000, 0, 0, 0);
        forge(p, id, c);
    });
}

#[test]
fn an_ack_with_absurd_rate_and_capacity_leaves_the_transfer_to_complete() {
    completes_after("rate, capacity 2^31 - 1", |p, id| {
        let c = ack_at(p, id, 20_000, 8192, i32::MAX as u32, i32::MAX as u32);
        forge(p, id, c);
    });
    completes_after("rate, capacity 1", |p, id| {
        let c = ack_at(p, id, 20_000, 8192, 1, 1);
        forge(p, id, c);
    });
    completes_after("rtt 0", |p, id| {
        let c = ack_at(p, id, 0, 8192, 1000, 1000);
        forge(p, id, c);
    });
}

#[test]
fn a_light_ack_ahead_of_the_receiver_leaves_the_transfer_to_complete() {
    completes_after("light ACK of everything sent", |p, id| {
        let ack = last_sent(p).next();
        forge(p, id, Control::Ack(Ack::Light { ack }));
    });
}

#[test]
fn a_nak_reporting_everything_in_flight_lost_leaves_the_transfer_to_complete() {
    completes_after("NAK of everything", |p, id| {
        let (first, last) = (delivered_point(p, id, 1_000_000), last_sent(p));
        let words = [first.get() | 0x8000_0000, last.get()];
        let bytes = NakList::encode(&words);
        forge(p, id, Control::Nak(NakList::new_checked(&bytes).expect("two words")));
    });
}

#[test]
fn a_zero_flow_window_forged_while_idle_does_not_hold_new_data_back() {
    // Everything sent is acknowledged and the sender idles; a forged ACK at the same ACK point
    // says the receiver has no room. New data then finds a window of 0 and nothing in flight:
    // no ACK, NAK or EXP would ever open it again. 4.11's receivers never advertise less than 2
    // (§5.3) for this deadlock; the sender holds the field to that too.
    let link = LinkConfig { delay: ms(10), ..Default::default() };
    let mut p = Pair::new(5, link);
    let (c, s) = p.connect(ConnectionConfig::default());
    let half = 70 * udt_proto::wire::payload_size(ConnectionConfig::default().mss);
    let data = pattern(2 * half, 5);
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut read = |p: &mut Pair, got: &mut Vec<u8>| {
        let conn = p.b.connection_mut(s).expect("accepted");
        loop {
            let n = conn.recv(&mut chunk);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
    };
    assert_eq!(p.a.connection_mut(c).expect("connected").send(p.now, &data[..half]), half);
    p.run_for(secs(1));
    read(&mut p, &mut got);
    assert_eq!(got.len(), half);
    let ack = delivered_point(&p, c, got.len());
    forge(
        &mut p,
        c,
        Control::Ack(Ack::Full { ack_no: AckNo::new(3), ack, rtt: 20_000, rtt_var: 0, avail: 0, rate: 0, capacity: 0 }),
    );
    assert_eq!(p.a.connection_mut(c).expect("connected").send(p.now, &data[half..]), half);
    let deadline = p.now + secs(60);
    while got.len() < data.len() && p.now < deadline {
        p.step();
        read(&mut p, &mut got);
    }
    assert_eq!(got, data);
}

/// A control packet for `a`'s connection with fields drawn from `rng`: an ACK (full, medium or
/// light), a NAK, an ACK2, a keep-alive, a congestion warning or a shutdown, with numbers near
/// and far from the real ones.
fn random_control(p: &Pair, id: u32, rng: &mut transfer::prng::Xoshiro256) -> Vec<u8> {
    let sent = last_sent(p);
    let word = |rng: &mut transfer::prng::Xoshiro256| -> u32 {
        match rng.below(4) {
            0 => rng.next_u64() as u32,
            1 => rng.below(1 << 31) as u32,
            2 => [0, 1, 2, i32::MAX as u32, u32::MAX][rng.below(5) as usize],
            _ => rng.below(100_000) as u32,
        }
    };
    let near = |rng: &mut transfer::prng::Xoshiro256| sent.add(rng.below(4000) as u32).add(0u32.wrapping_sub(2000));
    let (kind, info, body): (u32, u32, Vec<u32>) = match rng.below(8) {
        0 => (2, word(rng), (0..6).map(|i| if i == 0 { near(rng).get() } else { word(rng) }).collect()),
        1 => (2, word(rng), (0..4).map(|i| if i == 0 { near(rng).get() } else { word(rng) }).collect()),
        2 => (2, 0, vec![near(rng).get()]),
        3 => {
            let (a, b) = (near(rng), near(rng));
            (3, 0, vec![a.get() | 0x8000_0000, b.get()])
        }
        4 => (6, word(rng), vec![0]),
        5 => (1, 0, vec![0]),
        6 => (4, 0, vec![0]),
        _ => (5, 0, vec![0]),
    };
    let mut d = Vec::new();
    for w in [0x8000_0000 | (kind << 16), info, 0, id].into_iter().chain(body) {
        d.extend_from_slice(&w.to_be_bytes());
    }
    d
}

#[test]
fn any_one_forged_control_packet_leaves_progress_or_a_reported_failure() {
    // 48 forgeries of every control type, each in its own 1 MB transfer with 2 % loss after
    // it: the transfer completes, or the sender reports its connection broken, within an hour
    // of virtual time (the longest, an ACK of data never received, takes ~29 min: §13.5).
    for seed in 0..48u64 {
        let out = forged_transfer(
            seed,
            BIG_QUEUE,
            1_000_000,
            300_000,
            0.02,
            secs(3600),
            |_, _| {},
            |p, id| {
                let mut rng = transfer::prng::Xoshiro256::seed_from_u64(seed);
                let d = random_control(p, id, &mut rng);
                let (now, from) = (p.now, p.b_addr);
                p.a.handle_datagram(now, from, &d);
            },
        );
        assert!(
            out.delivered == 1_000_000 || out.sender_broken,
            "seed {seed}: neither progress nor a failure: {out:?}"
        );
    }
}
