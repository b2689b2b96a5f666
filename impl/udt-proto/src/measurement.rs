//! The data receiver's measurements reported in full ACKs (UDT4.md §10): packet arrival speed
//! (field 5) and link capacity from packet pairs (field 6), computed exactly as 4.11's
//! `CPktTimeWindow` does, quirks included (§14 rows 16–17): the medians are taken over all
//! slots but the last, the arrival-speed mean is an integer division and the capacity sum
//! counts its median once extra.
//!
//! Intervals are stored in whole µs, saturated to `u32` (71 minutes); 4.11 truncates them to
//! `int`, which only differs after more than 35 minutes between two packets. Sums use 64 bits
//! so no input overflows.
//!
//! ```
//! use udt_proto::measurement::{ArrivalSpeed, LinkCapacity};
//! use transfer::time::Instant;
//!
//! // What the first full ACK of a fresh 4.11 connection carries (§16).
//! let speed = ArrivalSpeed::new(Instant::ZERO);
//! let capacity = LinkCapacity::new();
//! assert_eq!((speed.speed(), capacity.capacity()), (1, 1000));
//! ```

use transfer::time::{micros, Instant};

/// Arrival-interval slots (§10.1).
pub const ARRIVAL_SLOTS: usize = 16;
/// Initial arrival interval, µs (§10.1).
pub const ARRIVAL_INIT_US: u32 = 1_000_000;
/// Packet-pair slots (§10.2; the draft says 16, 4.11 uses 64).
pub const PROBE_SLOTS: usize = 64;
/// Initial packet-pair interval, µs (§10.2).
pub const PROBE_INIT_US: u32 = 1000;

/// `k`-th smallest of `v` (0-based), without changing `v`'s order.
fn nth_smallest<const N: usize>(v: &[u32; N], used: usize, k: usize) -> u32 {
    let mut copy = *v;
    let part = &mut copy[..used];
    *part.select_nth_unstable(k).1
}

/// Intervals strictly between `m / 8` and `m · 8` (4.11's `m >> 3 < v < m << 3`).
fn filtered<'a>(slots: &'a [u32], m: u32) -> impl Iterator<Item = u64> + 'a {
    let (lower, upper) = (u64::from(m >> 3), u64::from(m) << 3);
    slots.iter().map(|&v| u64::from(v)).filter(move |&v| lower < v && v < upper)
}

fn interval(now: Instant, since: Instant) -> u32 {
    u32::try_from(micros(now - since)).unwrap_or(u32::MAX)
}

/// Packet arrival speed, packets/s (§10.1, ACK field 5).
///
/// Feed it every data packet, new or retransmitted, with [`on_data`](Self::on_data).
#[derive(Clone, Debug)]
pub struct ArrivalSpeed {
    slots: [u32; ARRIVAL_SLOTS],
    next: usize,
    last_arrival: Instant,
}

impl ArrivalSpeed {
    /// A window of 16 slots of 1 s each; the first interval is measured from `now`
    /// (connection setup).
    pub fn new(now: Instant) -> ArrivalSpeed {
        ArrivalSpeed { slots: [ARRIVAL_INIT_US; ARRIVAL_SLOTS], next: 0, last_arrival: now }
    }

    /// Records the interval since the previous data packet.
    pub fn on_data(&mut self, now: Instant) {
        self.slots[self.next] = interval(now, self.last_arrival);
        self.next = (self.next + 1) % ARRIVAL_SLOTS;
        self.last_arrival = now;
    }

    /// 4.11's `getPktRcvSpeed`: median `m` = element 8 of the first 15 slots sorted; mean of
    /// the slots within `(m/8, m·8)` (integer division) if more than 8 qualify, else 0;
    /// speed = `ceil(1e6 / mean)`.
    pub fn speed(&self) -> u32 {
        let m = nth_smallest(&self.slots, ARRIVAL_SLOTS - 1, ARRIVAL_SLOTS / 2);
        let (count, sum) = filtered(&self.slots, m).fold((0u64, 0u64), |(c, s), v| (c + 1, s + v));
        if count <= (ARRIVAL_SLOTS as u64 >> 1) {
            return 0;
        }
        let avg = sum / count; // ≥ 1: every kept value is > m/8 ≥ 0
        (1_000_000.0 / avg as f64).ceil() as u32
    }
}

/// Link capacity from receiver-based packet pairs, packets/s (§10.2, ACK field 6).
///
/// Call [`on_probe_first`](Self::on_probe_first) for a data packet with `seq & 0xF == 0` and
/// [`on_probe_second`](Self::on_probe_second) for `seq & 0xF == 1` (new or retransmitted;
/// 4.11 checks nothing else).
#[derive(Clone, Debug)]
pub struct LinkCapacity {
    slots: [u32; PROBE_SLOTS],
    next: usize,
    probe_first: Option<Instant>,
}

impl Default for LinkCapacity {
    fn default() -> Self {
        Self::new()
    }
}

impl LinkCapacity {
    /// 64 slots of 1000 µs each.
    pub fn new() -> LinkCapacity {
        LinkCapacity { slots: [PROBE_INIT_US; PROBE_SLOTS], next: 0, probe_first: None }
    }

    /// The first packet of a pair arrived.
    pub fn on_probe_first(&mut self, now: Instant) {
        self.probe_first = Some(now);
    }

    /// The second packet of a pair arrived: records `now − T1` against the most recent first
    /// packet, however old. Before any first packet it records nothing (4.11 would record an
    /// interval from its zero-initialised probe time, which the median filter then discards).
    pub fn on_probe_second(&mut self, now: Instant) {
        let Some(t1) = self.probe_first else { return };
        self.slots[self.next] = interval(now, t1);
        self.next = (self.next + 1) % PROBE_SLOTS;
    }

    /// 4.11's `getBandwidth`: median `m` = element 32 of the first 63 slots sorted; `sum = m`,
    /// `count = 1`, plus every slot within `(m/8, m·8)`; capacity = `ceil(1e6 / (sum/count))`
    /// in floating point. `m == 0` reports 0 (4.11 divides by zero there, §10.2).
    pub fn capacity(&self) -> u32 {
        let m = nth_smallest(&self.slots, PROBE_SLOTS - 1, PROBE_SLOTS / 2);
        if m == 0 {
            return 0;
        }
        let (count, sum) = filtered(&self.slots, m).fold((1u64, u64::from(m)), |(c, s), v| (c + 1, s + v));
        (1e6 / (sum as f64 / count as f64)).ceil() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t_us(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    #[test]
    fn fresh_connection_reports_speed_1_and_capacity_1000() {
        let mut s = ArrivalSpeed::new(t_us(5_000));
        assert_eq!(s.speed(), 1);
        // The first data packet 3 ms after setup still leaves 15 slots of 1 s.
        s.on_data(t_us(8_000));
        assert_eq!(s.speed(), 1);
        assert_eq!(LinkCapacity::new().capacity(), 1000);
    }

    #[test]
    fn steady_arrivals_give_the_packet_rate() {
        let mut s = ArrivalSpeed::new(t_us(0));
        for k in 1..=16u64 {
            s.on_data(t_us(k * 100));
        }
        assert_eq!(s.speed(), 10_000);
    }

    #[test]
    fn arrival_speed_hand_computed_mix() {
        // Slots: 9 × 100 µs, 6 × 1 s (initial), then slot 15 = 130 µs.
        let mut s = ArrivalSpeed::new(t_us(0));
        let mut t = 0;
        for _ in 0..9 {
            t += 100;
            s.on_data(t_us(t));
        }
        assert_eq!(s.speed(), 10_000); // median of 15 (9×100, 6×1e6) is 100; kept: 9 × 100
                                       // Fill slots 9..15 so that 15 = 130 µs: 6 more of 1e6 untouched, slot 15 written last.
        let mut s2 = s.clone();
        for _ in 0..6 {
            t += 1_000_000;
            s2.on_data(t_us(t));
        }
        t += 130;
        s2.on_data(t_us(t));
        // Median of the first 15 is still 100; kept = 9×100 + 130 (1e6 > 800): 10 values,
        // mean = 1030 / 10 = 103 (integer) → ceil(1e6 / 103) = 9709.
        assert_eq!(s2.speed(), 9709);
    }

    #[test]
    fn arrival_speed_needs_more_than_8_kept_values() {
        // 8 × 100 µs and 8 × 1 s: median of the first 15 (8×100, 7×1e6) is 1e6; kept: the 8 × 1e6
        // only (100 is not > 1e6/8) → 8 values, not > 8 → 0.
        let mut s = ArrivalSpeed::new(t_us(0));
        let mut t = 0;
        for _ in 0..8 {
            t += 100;
            s.on_data(t_us(t));
        }
        assert_eq!(s.speed(), 0);
    }

    #[test]
    fn arrival_speed_median_ignores_slot_15() {
        // Slots 0..7 = 10 µs, 8..14 = 1 s, 15 = 10 µs. Median of the first 15 (8×10, 7×1e6)
        // is 1e6, so only the 7 slots of 1 s are kept → 0. A median over all 16 (9×10, 7×1e6)
        // would have been 10 and given 100 000.
        let mut s = ArrivalSpeed::new(t_us(0));
        let mut t = 0;
        for dt in [10; 8].into_iter().chain([1_000_000; 7]).chain([10]) {
            t += dt;
            s.on_data(t_us(t));
        }
        assert_eq!(s.speed(), 0);
    }

    #[test]
    fn integer_mean_then_ceil() {
        // 16 intervals alternating 3 and 4 µs: median 3 or 4, all kept, mean = 56/16 = 3 (int).
        let mut s = ArrivalSpeed::new(t_us(0));
        let mut t = 0;
        for k in 0..16 {
            t += 3 + (k % 2);
            s.on_data(t_us(t));
        }
        assert_eq!(s.speed(), 333_334);
    }

    #[test]
    fn link_capacity_from_pairs() {
        let mut c = LinkCapacity::new();
        let mut t = 0;
        for _ in 0..64 {
            t += 10_000;
            c.on_probe_first(t_us(t));
            c.on_probe_second(t_us(t + 12));
        }
        // All slots 12 µs: m = 12, sum = 12·65, count 65 → 1e6 / 12 = 83 333.33 → 83 334.
        assert_eq!(c.capacity(), 83_334);
    }

    #[test]
    fn link_capacity_counts_the_median_twice() {
        // 33 slots of 100 µs, 31 slots left at 1000 µs: m = element 32 of the first 63 sorted
        // (33×100, 30×1000) = 100; kept: 33 × 100 (1000 is not < 800).
        // sum = 100 + 3300 = 3400, count = 34 → 100 µs → 10 000.
        let mut c = LinkCapacity::new();
        for k in 0..33u64 {
            c.on_probe_first(t_us(k * 1000));
            c.on_probe_second(t_us(k * 1000 + 100));
        }
        assert_eq!(c.capacity(), 10_000);
        // Now with 32 × 100 and the rest 1000 plus one 150: m still 100? First 63 sorted:
        // 32×100, 150, 30×1000 → index 32 = 150; kept (18.75, 1200): 32×100, 150, 31×1000.
        // sum = 150 + 3200 + 150 + 31 000 = 34 500, count = 65 → 530.77 µs → 1885 (ceil of 1884.06).
        let mut c = LinkCapacity::new();
        for k in 0..32u64 {
            c.on_probe_first(t_us(k * 1000));
            c.on_probe_second(t_us(k * 1000 + 100));
        }
        c.on_probe_first(t_us(50_000));
        c.on_probe_second(t_us(50_150));
        let expect = (1e6 / (34_500.0 / 65.0_f64)).ceil() as u32;
        assert_eq!(c.capacity(), expect);
        assert_eq!(expect, 1885);
    }

    #[test]
    fn zero_median_reports_zero_capacity() {
        let mut c = LinkCapacity::new();
        for _ in 0..40 {
            c.on_probe_first(t_us(7));
            c.on_probe_second(t_us(7));
        }
        assert_eq!(c.capacity(), 0);
    }

    #[test]
    fn second_probe_without_first_is_ignored_and_stale_first_is_reused() {
        let mut c = LinkCapacity::new();
        c.on_probe_second(t_us(123));
        assert_eq!(c.slots, [PROBE_INIT_US; PROBE_SLOTS]);
        c.on_probe_first(t_us(1000));
        c.on_probe_second(t_us(1010));
        c.on_probe_second(t_us(1500)); // pair's first lost: still measured from 1000
        assert_eq!(&c.slots[..3], &[10, 500, PROBE_INIT_US]);
    }

    proptest! {
        #[test]
        fn measurements_never_panic(times in prop::collection::vec(any::<u64>(), 0..100)) {
            let mut s = ArrivalSpeed::new(t_us(times.first().copied().unwrap_or(0)));
            let mut c = LinkCapacity::new();
            for (i, &t) in times.iter().enumerate() {
                s.on_data(t_us(t));
                if i % 2 == 0 { c.on_probe_first(t_us(t)) } else { c.on_probe_second(t_us(t)) }
                let _ = (s.speed(), c.capacity());
            }
        }
    }
}
