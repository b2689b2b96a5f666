//! The sender's pacer: one packet every period `P` (UDT4.md §7 step 4, §12; SABUL.md §5
//! step 6, §7.4; FRTP.md §4), with a bounded catch-up and a freeze.
//!
//! The schedule is kept in fractional µs, so that a period of 11.986 µs (≈ 1 Gb/s of 1500-byte
//! packets) means just that on average, although each departure is due at a whole µs.
//! 4.11 as its Makefile builds it spins on the TSC and never catches up; built with
//! `NO_BUSY_WAITING`, as Debian's libudt0 is, it sleeps up to 10 ms at a time and then sends all
//! its lateness back to back (UDT4.md §7 step 3). We take the middle: a driver that batches its
//! system calls wakes late, so after a late wake-up up to `burst` packets may leave back to
//! back to hold the average rate (`burst = 1` is strict pacing). A freeze
//! (SABUL's, and UDT's SC'04 variant: no new packet for one SYN after a rate decrease) holds
//! every departure until it ends.
//!
//! ```
//! use transfer::pacing::Pacer;
//! use transfer::time::{Duration, Instant};
//!
//! let t = |us| Instant::from_micros(us);
//! let mut p = Pacer::new(t(1000), 10.0, 4);
//! assert_eq!(p.next_time(), t(1000));
//! p.on_sent(t(1000), false);
//! assert_eq!(p.next_time(), t(1010));
//! // Woken 100 µs late: the packet due and four periods of debt leave at once, then the
//! // schedule goes on 10 µs apart.
//! for _ in 0..5 {
//!     assert!(p.next_time() <= t(1110));
//!     p.on_sent(t(1110), false);
//! }
//! assert_eq!(p.next_time(), t(1120));
//! p.freeze(Some(t(5000)));
//! assert_eq!(p.next_time(), t(5000));
//! ```

use crate::time::Instant;

/// When the next packet may leave: the period `P` on a fractional-µs schedule, the catch-up
/// bound and the freeze (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Pacer {
    /// `P`, µs.
    period: f64,
    /// Next departure on the schedule, µs on the driver's clock.
    next: f64,
    /// The last departure, µs (−∞ before the first).
    last: f64,
    /// Packets a late sender may send back to back.
    burst: u32,
    frozen_until: Option<Instant>,
}

#[inline]
fn us(t: Instant) -> f64 {
    t.as_micros() as f64
}

impl Pacer {
    /// A pacer whose first packet may leave at `now`, then one every `period_us`.
    pub fn new(now: Instant, period_us: f64, burst: u32) -> Pacer {
        Pacer { period: period_us, next: us(now), last: f64::NEG_INFINITY, burst: burst.max(1), frozen_until: None }
    }

    /// `P`, µs.
    pub fn period(&self) -> f64 {
        self.period
    }

    /// Sets `P` (µs) for the departures after the next one.
    pub fn set_period(&mut self, period_us: f64) {
        self.period = period_us;
    }

    /// No departure before `until` (`None` lifts a freeze).
    pub fn freeze(&mut self, until: Option<Instant>) {
        self.frozen_until = until;
    }

    /// When the next packet may leave.
    #[inline]
    pub fn next_time(&self) -> Instant {
        let t = Instant::from_micros(self.next.ceil() as u64);
        self.frozen_until.map_or(t, |f| t.max(f))
    }

    /// A packet left at `now`. The next may leave one period after it was due — or at once when
    /// `back_to_back` (UDT's packet pairs, §10.2). A sender running later than `burst` periods
    /// keeps `burst` periods of debt rather than all of it.
    #[inline]
    pub fn on_sent(&mut self, now: Instant, back_to_back: bool) {
        let slack = self.period * self.burst as f64;
        let base = self.next.max(us(now) - slack).max(0.0);
        self.next = if back_to_back { base } else { base + self.period };
        self.last = us(now);
    }

    /// Data became available after an idle time: the schedule starts again at `now` (idle
    /// time is no credit).
    pub fn resume(&mut self, now: Instant) {
        self.next = self.next.max(us(now));
    }

    /// The next packet takes the first slot of the schedule at the current period: one period
    /// after the last departure, or at once if that is past (UDT: retransmissions after a NAK,
    /// §8.7 step 3). Sooner than the schedule when the sender was idle or slower; later when it
    /// was sending faster (slow start's bursts), so that the retransmission does not land right
    /// behind them in the queue they filled.
    pub fn hurry(&mut self, now: Instant) {
        self.next = us(now).max(self.last + self.period);
    }

    /// The schedule restarts at `now` (UDT's EXP, §9.4).
    pub fn restart(&mut self, now: Instant) {
        self.next = us(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hurry_takes_the_next_slot_at_the_current_period_after_the_last_departure() {
        let t = Instant::from_micros;
        // Bursting at 1 µs, then the period becomes 100 µs: not right behind the burst.
        let mut p = Pacer::new(t(0), 1.0, 16);
        for i in 0..10 {
            p.on_sent(t(i), false);
        }
        p.set_period(100.0);
        p.hurry(t(10));
        assert_eq!(p.next_time(), t(109));
        // Idle (or slower) for longer than a period: at once.
        p.on_sent(t(109), false);
        p.hurry(t(5000));
        assert_eq!(p.next_time(), t(5000));
    }
}
