//! The data receiver's ACK history (UDT4.md §8.3, §8.5): which ACK number each full or medium
//! ACK carried and when it left, so that the matching ACK2 yields an RTT sample.
//!
//! Like 4.11's `CACKWindow` it is a ring of 1024 slots in which the oldest entry is overwritten
//! when the ring is full (so at most 1023 entries are live), an ACK2 is matched by exact
//! sub-sequence number from the oldest entry on, and a match discards that entry and every
//! older one. Exact matching makes the 31-bit wrap of [`AckNo`] a non-issue: a number is only
//! ever compared for equality, never ordered.
//!
//! ```
//! use udt_proto::ack_window::AckWindow;
//! use udt_proto::seq::AckNo;
//! use transfer::seq::SeqNo;
//! use transfer::time::{Duration, Instant};
//!
//! let ms = |t: u64| Instant::from_micros(t * 1000);
//! let mut w = AckWindow::new();
//! w.store(AckNo::new(1), SeqNo::new(100), ms(10));
//! w.store(AckNo::new(2), SeqNo::new(164), ms(20));
//! assert_eq!(w.acknowledge(AckNo::new(2), ms(45)), Some((SeqNo::new(164), Duration::from_millis(25))));
//! assert_eq!(w.acknowledge(AckNo::new(1), ms(46)), None); // discarded with ACK 2
//! ```

use crate::seq::AckNo;
use std::collections::VecDeque;
use transfer::seq::SeqNo;
use transfer::time::{Duration, Instant};

/// Slots in 4.11's ACK window (§8.5).
pub const ACK_WINDOW_SLOTS: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    ack_no: AckNo,
    ack: SeqNo,
    sent_at: Instant,
}

/// History of sent full/medium ACKs, oldest first (§8.5).
#[derive(Clone, Debug, Default)]
pub struct AckWindow {
    entries: VecDeque<Entry>,
}

impl AckWindow {
    /// Live entries at most: 4.11's ring of 1024 keeps one slot free.
    pub const CAPACITY: usize = ACK_WINDOW_SLOTS - 1;

    /// An empty history.
    pub fn new() -> AckWindow {
        AckWindow { entries: VecDeque::with_capacity(Self::CAPACITY) }
    }

    /// Records that the ACK with sub-sequence number `ack_no`, carrying ACK number `ack`, was
    /// sent at `now`. Overwrites the oldest entry when full.
    pub fn store(&mut self, ack_no: AckNo, ack: SeqNo, now: Instant) {
        if self.entries.len() >= Self::CAPACITY {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry { ack_no, ack, sent_at: now });
    }

    /// Handles an ACK2 for `ack_no` arriving at `now`. If the entry is still present,
    /// returns its ACK number and the round-trip time (zero if the clock did not advance;
    /// §8.5 only uses samples > 0) and discards it together with every older entry.
    /// Unknown numbers (overwritten, already acknowledged, bogus) give `None` and change nothing.
    pub fn acknowledge(&mut self, ack_no: AckNo, now: Instant) -> Option<(SeqNo, Duration)> {
        let i = self.entries.iter().position(|e| e.ack_no == ack_no)?;
        let e = self.entries[i];
        self.entries.drain(..=i);
        Some((e.ack, now - e.sent_at))
    }

    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no ACK awaits its ACK2.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets every entry.
    pub fn clear(&mut self) {
        self.entries.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transfer::seq::SEQ_MAX;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn a(x: u32) -> AckNo {
        AckNo::new(x)
    }

    #[test]
    fn ack2_yields_rtt_and_ack_number() {
        let mut w = AckWindow::new();
        w.store(a(7), SeqNo::new(0x0BAD_F0A0), t(1_000_000));
        assert_eq!(w.acknowledge(a(7), t(1_025_000)), Some((SeqNo::new(0x0BAD_F0A0), us(25_000))));
        assert!(w.is_empty());
    }

    #[test]
    fn ack2_discards_older_entries_but_keeps_newer() {
        let mut w = AckWindow::new();
        for k in 1..=5 {
            w.store(a(k), SeqNo::new(100 * k), t(u64::from(k) * 10_000));
        }
        assert_eq!(w.acknowledge(a(3), t(100_000)), Some((SeqNo::new(300), us(70_000))));
        assert_eq!(w.len(), 2);
        assert_eq!(w.acknowledge(a(2), t(100_000)), None);
        assert_eq!(w.acknowledge(a(3), t(100_000)), None); // a duplicate ACK2
        assert_eq!(w.acknowledge(a(5), t(100_000)), Some((SeqNo::new(500), us(50_000))));
        assert!(w.is_empty());
    }

    #[test]
    fn unknown_ack2_is_ignored() {
        let mut w = AckWindow::new();
        w.store(a(1), SeqNo::new(1), t(0));
        assert_eq!(w.acknowledge(a(99), t(10)), None);
        assert_eq!(w.acknowledge(a(0), t(10)), None); // light ACKs carry 0 and are never stored
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn full_window_overwrites_the_oldest() {
        let mut w = AckWindow::new();
        for k in 1..=ACK_WINDOW_SLOTS as u32 + 10 {
            w.store(a(k), SeqNo::new(k), t(u64::from(k)));
        }
        assert_eq!(w.len(), AckWindow::CAPACITY);
        // 1024 + 10 stored, 1023 live: 1..=11 are gone.
        assert_eq!(w.acknowledge(a(11), t(5_000)), None);
        assert_eq!(w.acknowledge(a(12), t(5_000)), Some((SeqNo::new(12), us(5_000 - 12))));
    }

    #[test]
    fn ack_numbers_wrap_at_2_pow_31() {
        let mut w = AckWindow::new();
        let mut n = a(SEQ_MAX - 1);
        for k in 0..4u64 {
            w.store(n, SeqNo::new(k as u32), t(k));
            n = n.next();
        }
        assert_eq!(n, a(2));
        assert_eq!(w.acknowledge(a(0), t(10)), Some((SeqNo::new(2), us(8))));
        assert_eq!(w.len(), 1);
        assert_eq!(w.acknowledge(a(SEQ_MAX), t(10)), None);
        assert_eq!(w.acknowledge(a(1), t(10)), Some((SeqNo::new(3), us(7))));
    }

    #[test]
    fn clock_going_backwards_gives_zero_rtt() {
        let mut w = AckWindow::new();
        w.store(a(1), SeqNo::new(1), t(100));
        assert_eq!(w.acknowledge(a(1), t(50)), Some((SeqNo::new(1), us(0))));
    }
}
