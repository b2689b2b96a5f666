//! Runs one bulk UDT flow over a simulated bottleneck and prints goodput per second.
//!
//! `cargo run --release -p udt-proto --example pair_path -- RATE_MBIT RTT_MS QUEUE_PKTS SECONDS [udt411|paper]`

use transfer::time::Duration;
use udt_proto::cc;
use udt_proto::config::ConnectionConfig;
use udt_proto::pair::{LinkConfig, Pair};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (rate, rtt_ms, queue, secs) = (num(0, 100.0), num(1, 110.0), num(2, 1000.0) as usize, num(3, 20.0));
    let cc = cc::by_name(args.get(4).map_or("udt411", |s| s.as_str()), 1500).expect("cc");
    let link = LinkConfig {
        delay: Duration::from_secs_f64(rtt_ms / 2e3),
        rate_bps: Some((rate * 1e6) as u64),
        queue_pkts: queue,
        ..Default::default()
    };
    let mut p = Pair::new(42, link);
    p.tracing = false;
    let config = ConnectionConfig {
        cc,
        rcv_buf_pkts: 100_000,
        flight_flag_size: 100_000,
        snd_buf_pkts: 100_000,
        ..Default::default()
    };
    let (c, s) = p.connect(config);
    let chunk = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let start = p.now;
    let mut got = 0usize;
    let mut last = 0usize;
    let mut next_report = start + Duration::from_secs(1);
    while p.now < start + Duration::from_secs_f64(secs) {
        let conn = p.a.connection_mut(c).unwrap();
        while conn.send_capacity() > chunk.len() {
            conn.send(p.now, &chunk);
        }
        p.step();
        loop {
            let n = p.b.connection_mut(s).unwrap().recv(&mut buf);
            if n == 0 {
                break;
            }
            got += n;
        }
        if p.now >= next_report {
            let st = p.a.connection(c).unwrap().stats();
            println!(
                "t={:5.1}s goodput {:7.1} Mb/s  rtt {:6.1} ms  period {:7.2} us  cwnd {:8.1}  lost {}",
                (p.now - start).as_secs_f64(),
                (got - last) as f64 * 8.0 / 1e6,
                st.rtt_us as f64 / 1e3,
                st.period_us,
                st.cwnd,
                st.pkts_lost_snd
            );
            last = got;
            next_report += Duration::from_secs(1);
        }
    }
}
