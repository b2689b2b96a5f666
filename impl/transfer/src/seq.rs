//! 31-bit data sequence numbers and their modular arithmetic (UDT4.md §4; SABUL.md §4).
//!
//! Data sequence numbers are 31-bit and wrap at `2^31`; comparisons are only meaningful for
//! numbers less than `2^30` apart (the threshold `TH`), exactly as UDT 4.11's `CSeqNo`.
//! All arithmetic here reproduces 4.11's functions, including their asymmetries
//! (`len` counts inclusively and assumes `b` is after `a`). SABUL and FRTP use the same space
//! (SABUL.md §4 allows UDT's functions, whose threshold is `2^30 − 1`).

use core::cmp::Ordering;
use core::fmt;

/// Largest data sequence number (`2^31 − 1`).
pub const SEQ_MAX: u32 = 0x7FFF_FFFF;
/// Comparison threshold: numbers further apart than this are taken as wrapped.
pub const SEQ_TH: u32 = 0x3FFF_FFFF;

/// A 31-bit data packet sequence number (UDT4.md §3.1, §4; SABUL.md §3.1, §4).
///
/// `Ord` is deliberately not implemented: order is only defined within `2^30` of each other.
/// Use [`SeqNo::cmp_seq`], [`SeqNo::offset_to`] and friends.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNo(u32);

impl SeqNo {
    /// Sequence number 0.
    pub const ZERO: SeqNo = SeqNo(0);
    /// The largest sequence number, `2^31 − 1`; the next is [`SeqNo::ZERO`].
    pub const MAX: SeqNo = SeqNo(SEQ_MAX);

    /// Wraps `raw` into the 31-bit space (the top bit is discarded).
    #[inline]
    pub const fn new(raw: u32) -> SeqNo {
        SeqNo(raw & SEQ_MAX)
    }

    /// The number as it goes on the wire (bit 31 clear).
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// 4.11 `seqcmp`: positive if `self` is later than `other`.
    #[inline]
    pub fn diff(self, other: SeqNo) -> i32 {
        let (a, b) = (self.0 as i32, other.0 as i32);
        if (a - b).unsigned_abs() < SEQ_TH {
            a - b
        } else {
            b - a
        }
    }

    /// Order with wrap-around (4.11 `seqcmp` sign).
    #[inline]
    pub fn cmp_seq(self, other: SeqNo) -> Ordering {
        self.diff(other).cmp(&0)
    }

    /// Whether `self` is later than `other`, with wrap-around.
    #[inline]
    pub fn is_after(self, other: SeqNo) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` is earlier than `other`, with wrap-around.
    #[inline]
    pub fn is_before(self, other: SeqNo) -> bool {
        self.diff(other) < 0
    }

    /// 4.11 `seqlen(self, end)`: count of numbers from `self` to `end` inclusive, assuming
    /// `end` is not before `self`.
    #[inline]
    pub fn len_to(self, end: SeqNo) -> u32 {
        let (a, b) = (self.0 as i64, end.0 as i64);
        (if a <= b { b - a + 1 } else { b - a + SEQ_MAX as i64 + 2 }) as u32
    }

    /// 4.11 `seqoff(self, other)`: signed distance from `self` to `other`.
    #[inline]
    pub fn offset_to(self, other: SeqNo) -> i32 {
        let (a, b) = (self.0 as i64, other.0 as i64);
        let d = if (a - b).unsigned_abs() < SEQ_TH as u64 {
            b - a
        } else if a < b {
            b - a - SEQ_MAX as i64 - 1
        } else {
            b - a + SEQ_MAX as i64 + 1
        };
        d as i32
    }

    /// 4.11 `incseq`.
    #[inline]
    pub fn next(self) -> SeqNo {
        SeqNo(if self.0 == SEQ_MAX { 0 } else { self.0 + 1 })
    }

    /// 4.11 `decseq`.
    #[inline]
    pub fn prev(self) -> SeqNo {
        SeqNo(if self.0 == 0 { SEQ_MAX } else { self.0 - 1 })
    }

    /// 4.11 `incseq(a, n)`.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, n: u32) -> SeqNo {
        SeqNo(((self.0 as u64 + n as u64) % (SEQ_MAX as u64 + 1)) as u32)
    }

    /// Subtracts `n` modulo `2^31`.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn sub(self, n: u32) -> SeqNo {
        let m = SEQ_MAX as u64 + 1;
        SeqNo(((self.0 as u64 + m - (n as u64 % m)) % m) as u32)
    }

    /// The later of the two (4.11 `CSeqNo::seqcmp` based max).
    #[inline]
    pub fn max_seq(self, other: SeqNo) -> SeqNo {
        if self.diff(other) >= 0 {
            self
        } else {
            other
        }
    }
}

impl fmt::Debug for SeqNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for SeqNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_2_pow_31() {
        assert_eq!(SeqNo::MAX.next(), SeqNo::ZERO);
        assert_eq!(SeqNo::ZERO.prev(), SeqNo::MAX);
        assert_eq!(SeqNo::MAX.add(3), SeqNo::new(2));
        assert_eq!(SeqNo::new(2).sub(3), SeqNo::MAX);
        assert!(SeqNo::ZERO.is_after(SeqNo::MAX));
        assert_eq!(SeqNo::MAX.offset_to(SeqNo::new(1)), 2);
        assert_eq!(SeqNo::new(1).offset_to(SeqNo::MAX), -2);
        assert_eq!(SeqNo::MAX.len_to(SeqNo::new(1)), 3);
        assert_eq!(SeqNo::new(5).len_to(SeqNo::new(5)), 1);
    }

    fn seqcmp_411(a: i32, b: i32) -> i32 {
        if (a - b).abs() < SEQ_TH as i32 {
            a - b
        } else {
            b - a
        }
    }

    proptest! {
        #[test]
        fn add_then_offset_is_identity(a in 0..=SEQ_MAX, n in 0u32..SEQ_TH) {
            let s = SeqNo::new(a);
            prop_assert_eq!(s.offset_to(s.add(n)), n as i32);
            prop_assert_eq!(s.add(n).offset_to(s), -(n as i32));
            prop_assert_eq!(s.add(n).sub(n), s);
        }

        #[test]
        fn len_is_offset_plus_one(a in 0..=SEQ_MAX, n in 0u32..SEQ_TH) {
            let s = SeqNo::new(a);
            prop_assert_eq!(s.len_to(s.add(n)), n + 1);
        }

        #[test]
        fn diff_matches_4_11_seqcmp(a in 0..=SEQ_MAX, b in 0..=SEQ_MAX) {
            prop_assert_eq!(SeqNo::new(a).diff(SeqNo::new(b)), seqcmp_411(a as i32, b as i32));
        }

        #[test]
        fn order_is_antisymmetric_within_threshold(a in 0..=SEQ_MAX, n in 1u32..SEQ_TH) {
            let s = SeqNo::new(a);
            let t = s.add(n);
            prop_assert!(t.is_after(s));
            prop_assert!(s.is_before(t));
            prop_assert_eq!(s.max_seq(t), t);
        }

        #[test]
        fn next_is_add_one(a in 0..=SEQ_MAX) {
            let s = SeqNo::new(a);
            prop_assert_eq!(s.next(), s.add(1));
            prop_assert_eq!(s.next().prev(), s);
        }
    }
}
