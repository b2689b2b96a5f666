//! Driving one sans-IO agent by hand, as the network would: its timers fired up to an instant,
//! what it emitted collected with when it left, packets handed to it. Shared by the 2004 models'
//! rule tests (`udt2004.rs`, `sabul2004.rs`), each parsing its own wire format.

use netsim::agent::{Agent, Channel};
use netsim::network::EPOCH;
use transfer::time::Instant;

/// The simulator's instant for `t` seconds after t = 0.
pub(crate) fn at(t: f64) -> Instant {
    Instant::from_micros(EPOCH.as_micros() + (t * 1e6).round() as u64)
}

/// Runs `a`'s timers from `from` up to `until` and returns what it emitted: when (s), the packet
/// as `parse` reads it, and its wire size.
pub(crate) fn run_to<P>(a: &mut dyn Agent, from: f64, until: f64, parse: impl Fn(&[u8]) -> P) -> Vec<(f64, P, u32)> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut now = at(from);
    let end = at(until);
    loop {
        while let Some(e) = a.poll_transmit(now, &mut buf) {
            let t = (now.as_micros() - EPOCH.as_micros()) as f64 / 1e6;
            out.push((t, parse(&buf[..e.size]), e.wire_len));
        }
        match a.poll_timeout() {
            Some(due) if due <= end => {
                now = due.max(now);
                a.handle_timeout(now);
            }
            _ => return out,
        }
    }
}

/// Hands `a` one datagram, `bytes`, at `t` s.
pub(crate) fn feed(a: &mut dyn Agent, t: f64, bytes: &[u8]) {
    a.handle_packet(at(t), Channel::Datagram, bytes);
}

/// A model's by-hand helpers over its own wire format `$packet` (which has `parse`, `emit` and a
/// `Data { seq }` variant): `run_to` (emissions parsed), `feed` (a packet emitted into the agent)
/// and `data_seqs` (the data sequence numbers among emissions).
macro_rules! wire_helpers {
    ($packet:ident) => {
        /// Runs `a`'s timers up to `until` (as the network does) and returns what it emitted, with when.
        fn run_to(a: &mut dyn Agent, from: f64, until: f64) -> Vec<(f64, $packet, u32)> {
            by_hand::run_to(a, from, until, |b| $packet::parse(b).expect("a packet of the model"))
        }

        fn feed(a: &mut dyn Agent, t: f64, p: &$packet) {
            let mut buf = vec![0u8; 65_536];
            let n = p.emit(&mut buf);
            by_hand::feed(a, t, &buf[..n]);
        }

        fn data_seqs(out: &[(f64, $packet, u32)]) -> Vec<i64> {
            out.iter()
                .filter_map(|(_, p, _)| match p {
                    $packet::Data { seq } => Some(*seq),
                    _ => None,
                })
                .collect()
        }
    };
}
pub(crate) use wire_helpers;
