//! Loss-list micro-benchmark: nanoseconds per operation for loss events of 1 … 3000 packets
//! and for many small mixed events, next to the UDT paper's figure (SC'04 §4, Fig. 9: most
//! accesses within ~1 µs on a dual 2.4 GHz Xeon, independent of the number of losses).
//!
//! `cargo bench -p transfer --bench loss_list` — plain `Instant` timing, no harness. Every
//! scenario starts 50 000 numbers below the 2^31 wrap, so the lists cross it.

use prng::Xoshiro256 as Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};
use transfer::loss_list::{RcvLossList, SndLossList};
use transfer::seq::{SeqNo, SEQ_MAX};

const PAPER_NS: f64 = 1000.0;
/// Loss words in one UDT NAK at MSS 1500: `(1500 − 44) / 4` (UDT4.md §8.4).
const NAK_WORDS: usize = 364;
const BUDGET: Duration = Duration::from_millis(120);
const CAPACITY: u32 = 1 << 29;

/// Fisher–Yates with the workspace's seeded generator.
fn shuffle<T>(rng: &mut Rng, v: &mut [T]) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i as u64 + 1) as usize);
    }
}

/// A loss pattern: inclusive events in ascending order.
struct Pattern {
    events: Vec<(SeqNo, SeqNo)>,
    lost: usize,
}

impl Pattern {
    /// `n` events of `k` packets, each followed by `gap` received packets.
    fn uniform(k: u32, n: usize, gap: u32) -> Pattern {
        let base = SeqNo::new(SEQ_MAX - 50_000);
        let events: Vec<_> = (0..n as u32)
            .map(|i| {
                let a = base.add(i * (k + gap));
                (a, a.add(k - 1))
            })
            .collect();
        Pattern { lost: n * k as usize, events }
    }

    /// `n` events of 1–4 packets separated by 1–8 received packets.
    fn mixed(n: usize, rng: &mut Rng) -> Pattern {
        let mut s = SeqNo::new(SEQ_MAX - 50_000);
        let mut events = Vec::with_capacity(n);
        let mut lost = 0;
        for _ in 0..n {
            let k = 1 + rng.below(4) as u32;
            events.push((s, s.add(k - 1)));
            lost += k as usize;
            s = s.add(k + 1 + rng.below(8) as u32);
        }
        Pattern { events, lost }
    }

    fn numbers(&self) -> Vec<SeqNo> {
        let mut v = Vec::with_capacity(self.lost);
        for &(a, b) in &self.events {
            let mut s = a;
            loop {
                v.push(s);
                if s == b {
                    break;
                }
                s = s.next();
            }
        }
        v
    }

    fn snd(&self) -> SndLossList {
        let mut l = SndLossList::new(CAPACITY);
        for &(a, b) in &self.events {
            l.insert(a, b);
        }
        l
    }

    fn rcv(&self) -> RcvLossList {
        let mut l = RcvLossList::new(CAPACITY);
        for &(a, b) in &self.events {
            l.append(a, b);
        }
        l
    }
}

/// Runs `setup` (untimed) then `run` (timed, returns its operation count) until the budget is
/// spent; returns ns per operation.
fn measure<S>(mut setup: impl FnMut() -> S, mut run: impl FnMut(&mut S) -> usize) -> f64 {
    let (mut spent, mut ops) = (Duration::ZERO, 0usize);
    while spent < BUDGET {
        let mut state = setup();
        let t = Instant::now();
        ops += run(&mut state);
        spent += t.elapsed();
        black_box(&state);
    }
    spent.as_nanos() as f64 / ops.max(1) as f64
}

struct Row {
    label: String,
    events: usize,
    cols: Vec<f64>,
}

const COLS: [&str; 8] =
    ["snd.insert", "snd.ins.shuf", "snd.pop", "snd.ack", "rcv.append", "rcv.rm.order", "rcv.rm.shuf", "rcv.nak"];

fn run(label: String, p: &Pattern, rng: &mut Rng) -> Row {
    let mut shuffled = p.events.clone();
    shuffle(rng, &mut shuffled);
    let numbers = p.numbers();
    // Retransmissions arriving out of order inside each event (holes split ranges).
    let mut within: Vec<SeqNo> = Vec::with_capacity(numbers.len());
    let mut start = 0;
    for &(a, b) in &p.events {
        let n = a.len_to(b) as usize;
        let mut chunk = numbers[start..start + n].to_vec();
        shuffle(rng, &mut chunk);
        within.extend(chunk);
        start += n;
    }
    // ACKs advancing by half an event stride.
    let first = p.events[0].0;
    let last = p.events[p.events.len() - 1].1;
    let span = first.len_to(last);
    let step = (span / (2 * p.events.len() as u32)).max(1);
    let acks: Vec<SeqNo> = (1..=span / step).map(|i| first.add(i * step)).collect();
    let limit = NAK_WORDS;

    let cols = vec![
        measure(
            || SndLossList::new(CAPACITY),
            |l| {
                for &(a, b) in &p.events {
                    black_box(l.insert(a, b));
                }
                p.events.len()
            },
        ),
        measure(
            || SndLossList::new(CAPACITY),
            |l| {
                for &(a, b) in &shuffled {
                    black_box(l.insert(a, b));
                }
                shuffled.len()
            },
        ),
        measure(
            || p.snd(),
            |l| {
                let mut n = 0;
                while let Some(s) = l.pop_first() {
                    black_box(s);
                    n += 1;
                }
                n
            },
        ),
        measure(
            || p.snd(),
            |l| {
                for &a in &acks {
                    l.remove_up_to(black_box(a).prev());
                }
                acks.len()
            },
        ),
        measure(
            || RcvLossList::new(CAPACITY),
            |l| {
                for &(a, b) in &p.events {
                    black_box(l.append(a, b));
                }
                p.events.len()
            },
        ),
        measure(
            || p.rcv(),
            |l| {
                for &s in &numbers {
                    black_box(l.remove(s));
                }
                numbers.len()
            },
        ),
        measure(
            || p.rcv(),
            |l| {
                for &s in &within {
                    black_box(l.remove(s));
                }
                within.len()
            },
        ),
        measure(
            || (p.rcv(), Vec::with_capacity(limit)),
            |(l, out)| {
                for _ in 0..64 {
                    out.clear();
                    l.encode(limit, out);
                    black_box(&out);
                }
                64
            },
        ),
    ];
    Row { label, events: p.events.len(), cols }
}

fn main() {
    let t0 = Instant::now();
    let mut rng = Rng::seed_from_u64(0x5EED_1234_0BAD_F00D);
    let mut rows = Vec::new();
    for k in [1u32, 10, 100, 1000, 3000] {
        let n = (200_000 / k as usize).clamp(64, 20_000);
        rows.push(run(format!("{k} pkt"), &Pattern::uniform(k, n, 16), &mut rng));
    }
    let mixed = Pattern::mixed(50_000, &mut rng);
    rows.push(run("mixed 1-4".to_string(), &mixed, &mut rng));

    println!("loss list micro-benchmark: ns per operation (lower is better)");
    println!(
        "reference: UDT paper (SC'04, Fig. 9) ~{PAPER_NS:.0} ns per insert/delete/query on a dual 2.4 GHz Xeon (2004)"
    );
    println!(
        "columns: insert = one loss event; pop / rm = one number; ack = one remove_up_to; nak = one {}-word export",
        NAK_WORDS
    );
    print!("{:<10} {:>7}", "event", "events");
    for c in COLS {
        print!(" {c:>12}");
    }
    println!(" {:>10}", "worst/ref");
    for r in &rows {
        print!("{:<10} {:>7}", r.label, r.events);
        for v in &r.cols {
            print!(" {v:>12.1}");
        }
        let worst = r.cols[..7].iter().cloned().fold(0.0, f64::max);
        println!(" {:>9.3}x", worst / PAPER_NS);
    }
    println!("(worst/ref excludes rcv.nak, which exports up to {} numbers per call)", NAK_WORDS);
    println!("total {:.1} s", t0.elapsed().as_secs_f64());
}
