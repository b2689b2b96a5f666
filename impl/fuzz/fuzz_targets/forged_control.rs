//! One forged control packet among real traffic (UDT4.md §13.5): a live transfer over a lossy
//! path, and at a point the input picks, a control packet for the sender whose type and fields
//! the input gives, from the receiver's address with the right socket ID. The transfer must
//! complete, or the sender must report its connection broken, within an hour of virtual time.
#![no_main]
use libfuzzer_sys::fuzz_target;
use transfer::prng::pattern;
use transfer::time::Duration;
use udt_proto::config::ConnectionConfig;
use udt_proto::connection::Event;
use udt_proto::pair::{Dir, LinkConfig, Pair};
use udt_proto::wire::Repr;

const LEN: usize = 300_000;

fuzz_target!(|data: &[u8]| {
    let Some((&at, rest)) = data.split_first() else { return };
    let Some((&kind, fields)) = rest.split_first() else { return };
    let link = LinkConfig {
        delay: Duration::from_millis(10),
        rate_bps: Some(100_000_000),
        queue_pkts: 100_000,
        ..Default::default()
    };
    let mut p = Pair::new(1, link);
    p.tracing = false;
    let (c, s) = p.connect(ConnectionConfig::default());
    let input = pattern(LEN, 1);
    let forge_after = usize::from(at) * LEN / 256;
    let (mut sent, mut got, mut chunk) = (0, 0, vec![0u8; 1 << 16]);
    let (mut last_seq, mut forged_at, mut sender_broken) = (None, None, false);
    p.tracing = true;
    loop {
        if forged_at.is_none() && got >= forge_after {
            // Numbers near the real ones: each field word is XORed onto the last sequence
            // number sent, so that small inputs make plausible ACK and NAK numbers.
            let base = last_seq.unwrap_or(0);
            let mut d = Vec::new();
            for w in [0x8000_0000 | (u32::from(kind & 0x0F) << 16), 0, 0, c] {
                d.extend_from_slice(&w.to_be_bytes());
            }
            for (i, w) in fields.chunks(4).take(8).enumerate() {
                let mut b = [0u8; 4];
                b[..w.len()].copy_from_slice(w);
                let v = u32::from_be_bytes(b);
                let v = if i == 0 { base ^ (v & 0x0000_FFFF) } else { v };
                d.extend_from_slice(&v.to_be_bytes());
            }
            let (now, from) = (p.now, p.b_addr);
            p.a.handle_datagram(now, from, &d);
            p.link_mut(Dir::AtoB).loss = 0.02;
            p.tracing = false;
            forged_at = Some(p.now);
        }
        if got == LEN || forged_at.is_some_and(|t| p.now > t + Duration::from_secs(3600)) {
            break;
        }
        if let Some(conn) = p.a.connection_mut(c) {
            if sent < LEN {
                sent += conn.send(p.now, &input[sent..]);
            }
        }
        let stepped = p.step();
        if p.tracing {
            if let Some(seq) = p.trace.iter().rev().find_map(|t| match t.repr()? {
                Repr::Data { header, .. } if t.dir == Dir::AtoB => Some(header.seq.get()),
                _ => None,
            }) {
                last_seq = Some(seq);
            }
            p.trace.clear();
        }
        if let Some(conn) = p.b.connection_mut(s) {
            loop {
                let n = conn.recv(&mut chunk);
                if n == 0 {
                    break;
                }
                got += n;
            }
        }
        while let Some((_, ev)) = p.a.poll_event() {
            sender_broken |= matches!(ev, Event::Broken(_));
        }
        while p.b.poll_event().is_some() {}
        if !stepped {
            break;
        }
    }
    assert!(got == LEN || sender_broken, "neither progress nor a reported failure: {got} of {LEN} bytes");
});
