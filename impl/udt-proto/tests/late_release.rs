//! What a late link emulator does to UDT 4.11's rate control (docs/testbed/timing.md, "CPU and
//! emulation timing"): on a busy machine `udt-linkem` releases what fell due while it was off
//! the CPU in one burst. Slow start ends with `P = 1e6 / DeliveryRate` (UDT4.md §12.4), and
//! the delivery rate is the receiver's packet arrival speed (§10.1): bunched arrivals make the
//! sender pace faster than the bottleneck can carry.

use transfer::time::Duration;
use udt_proto::config::ConnectionConfig;
use udt_proto::pair::{Dir, LinkConfig, Pair};

/// Period (µs) of a bulk sender 2 s into a transfer over 100 Mbit/s, 110 ms, a one-BDP queue
/// (SC'04 Fig. 13's path at scale 0.1), with data delivered late every `late_us` (0 = on time).
fn period_after_slow_start(late_us: u64) -> f64 {
    let link = LinkConfig {
        delay: Duration::from_millis(55),
        rate_bps: Some(100_000_000),
        queue_pkts: 908,
        ..Default::default()
    };
    let mut p = Pair::new(42, link);
    p.tracing = false;
    p.set_late_release(Dir::AtoB, Duration::from_micros(late_us));
    let (c, s) = p.connect(ConnectionConfig::default());
    let chunk = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let end = p.now + Duration::from_secs(2);
    while p.now < end {
        let conn = p.a.connection_mut(c).unwrap();
        while conn.send_capacity() > chunk.len() {
            conn.send(p.now, &chunk);
        }
        p.step();
        while p.b.connection_mut(s).unwrap().recv(&mut buf) > 0 {}
    }
    let st = p.a.connection(c).unwrap().stats();
    assert!(st.naks_recv > 0, "slow start should have ended at a NAK");
    eprintln!("late release every {late_us} µs: period {} µs", st.period_us);
    st.period_us
}

#[test]
fn bunched_arrivals_make_the_sender_pace_faster_than_the_bottleneck() {
    // A 1500-byte packet takes 122 µs on the 100 Mbit/s link (1528 bytes with IP/UDP headers).
    let on_time = period_after_slow_start(0);
    assert!(on_time >= 122.0, "on-time delivery: period {on_time} µs, want at least one packet time");
    // Released every millisecond (8 packets per burst): the arrival speed the receiver
    // measures is the burst's, several times the link's.
    let late = period_after_slow_start(1_000);
    assert!(late < 122.0 / 3.0, "late delivery: period {late} µs, want under a third of a packet time");
}
