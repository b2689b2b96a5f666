//! N bulk UDT flows through one simulated bottleneck (same RTT): goodput per flow per second.
//!
//! `cargo run --release -p udt-proto --example pair_flows -- FLOWS RATE_MBIT RTT_MS QUEUE_PKTS SECONDS [LATE_US]`
//!
//! The deterministic counterpart of the testbed's multi-flow parts (SC'04 Fig. 13's bulk
//! flows on chicago-amsterdam): no CPU contention, so what it shows is the protocol's doing.
//! `LATE_US` > 0 delivers the data like a link emulator that gets the CPU only that often
//! (`Pair::set_late_release`): the testbed's collapse on a busy machine (docs/testbed/timing.md,
//! "CPU and emulation timing"), e.g. `-- 10 100 110 908 30 1000`.

use transfer::time::Duration;
use udt_proto::config::ConnectionConfig;
use udt_proto::pair::{Dir, LinkConfig, Pair};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (flows, rate, rtt_ms, queue, secs) =
        (num(0, 10.0) as usize, num(1, 100.0), num(2, 110.0), num(3, 908.0) as usize, num(4, 30.0));
    let late_us = num(5, 0.0) as u64;
    let link = LinkConfig {
        delay: Duration::from_secs_f64(rtt_ms / 2e3),
        rate_bps: Some((rate * 1e6) as u64),
        queue_pkts: queue,
        ..Default::default()
    };
    let mut p = Pair::new(42, link);
    p.tracing = false;
    p.set_late_release(Dir::AtoB, Duration::from_micros(late_us));
    let ids: Vec<(u32, u32)> = (0..flows).map(|_| p.connect(ConnectionConfig::default())).collect();
    let chunk = vec![0u8; 1 << 20];
    let mut buf = vec![0u8; 1 << 20];
    let start = p.now;
    let mut got = vec![0usize; flows];
    let mut next_report = start + Duration::from_secs(1);
    while p.now < start + Duration::from_secs_f64(secs) {
        for &(c, _) in &ids {
            let conn = p.a.connection_mut(c).unwrap();
            while conn.send_capacity() > chunk.len() {
                conn.send(p.now, &chunk);
            }
        }
        p.step();
        for (i, &(_, s)) in ids.iter().enumerate() {
            loop {
                let n = p.b.connection_mut(s).unwrap().recv(&mut buf);
                if n == 0 {
                    break;
                }
                got[i] += n;
            }
        }
        if p.now >= next_report {
            let lost: u64 = ids.iter().map(|&(c, _)| p.a.connection(c).unwrap().stats().pkts_retrans).sum();
            let mut period: Vec<f64> = ids.iter().map(|&(c, _)| p.a.connection(c).unwrap().stats().period_us).collect();
            period.sort_by(f64::total_cmp);
            let mbps: Vec<String> = got.iter().map(|&g| format!("{:5.1}", g as f64 * 8.0 / 1e6)).collect();
            println!(
                "t={:4.0}s total {:6.1} Mb/s  retrans {:7}  period min {:7.1} us  flows {}",
                (p.now - start).as_secs_f64(),
                got.iter().sum::<usize>() as f64 * 8.0 / 1e6,
                lost,
                period[0],
                mbps.join(" ")
            );
            got.iter_mut().for_each(|g| *g = 0);
            next_report += Duration::from_secs(1);
        }
    }
}
