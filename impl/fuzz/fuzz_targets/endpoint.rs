//! Arbitrary datagrams thrown at both ends of a live connection, from the right addresses
//! and with the right socket IDs, must never panic the protocol core.
#![no_main]
use libfuzzer_sys::fuzz_target;
use transfer::time::Duration;
use udt_proto::config::ConnectionConfig;
use udt_proto::pair::{LinkConfig, Pair};

fuzz_target!(|data: &[u8]| {
    let mut p = Pair::new(1, LinkConfig::default());
    p.tracing = false;
    let (c, s) = p.connect(ConnectionConfig::default());
    p.a.connection_mut(c).unwrap().send(p.now, &[7u8; 20_000]);
    for (i, chunk) in data.split(|&b| b == 0xFE).enumerate() {
        let mut g = chunk.to_vec();
        if g.len() >= 16 {
            let dst = if i % 2 == 0 { s } else { c };
            g[12..16].copy_from_slice(&dst.to_be_bytes());
        }
        if i % 2 == 0 {
            p.b.handle_datagram(p.now, p.a_addr, &g);
        } else {
            p.a.handle_datagram(p.now, p.b_addr, &g);
        }
        p.step();
    }
    p.run_for(Duration::from_millis(100));
});
