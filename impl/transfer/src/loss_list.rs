//! Loss lists as range sets (UDT4.md §13.1, §13.2) and the loss-word codec of UDT's NAK and
//! SABUL's ERR (UDT4.md §5.4 = SABUL.md §3.3).
//!
//! A [`RangeSet`] stores lost sequence numbers as disjoint, non-adjacent inclusive ranges in
//! ascending order, so their cost grows with the number of *loss events*, not with the number
//! of lost packets — the design of the UDT paper's appendix (SC'04, Fig. 16). The ranges live
//! in a [`VecDeque`]: appending a new gap at the tail, taking the smallest number and cutting
//! the front (on an ACK, on an in-order retransmission) are O(1) amortised; operations in the
//! middle binary-search the deque (O(log r)) and shift at most O(r) ranges.
//!
//! Sequence numbers wrap at `2^31` and are only ordered within `2^30` of each other (§4). Every
//! comparison here is an offset from the list's smallest number, so a list straddling the wrap
//! (`0x7FFF_FFFE ..= 1`) behaves like any other. To keep that true whatever the caller feeds
//! in, a list never spans more than its capacity (itself at most `2^30 − 1`): numbers that would
//! stretch it further are not stored. 4.11 sizes its arrays the same way (`2 ×` flow window for
//! the sender, `UDT_FC` for the receiver) and would corrupt them instead; a well-behaved
//! connection never reaches the limit.
//!
//! ```
//! use transfer::loss_list::{decode_loss, RcvLossList};
//! use transfer::seq::SeqNo;
//!
//! let s = SeqNo::new;
//! let mut rcv = RcvLossList::new(25_600);
//! rcv.append(s(0x7FFF_FFFF), s(1)); // a gap across the wrap
//! rcv.append(s(5), s(5));
//! rcv.remove(s(0));                 // a retransmission arrives
//! let mut words = Vec::new();
//! rcv.encode(364, &mut words);
//! assert_eq!(words, [0x7FFF_FFFF, 1, 5]);
//! assert_eq!(decode_loss(&words).unwrap(), [(s(0x7FFF_FFFF), s(0x7FFF_FFFF)), (s(1), s(1)), (s(5), s(5))]);
//! ```

use crate::seq::{SeqNo, SEQ_TH};
use core::fmt;
use std::collections::VecDeque;

/// Bit 31 of a loss word: this word starts a range (UDT4.md §5.4, SABUL.md §3.3).
pub const RANGE_FLAG: u32 = 0x8000_0000;

/// Disjoint, non-adjacent inclusive ranges of sequence numbers in ascending order, bounded in
/// span: the storage of every loss list of the family (the protocols' lists below, SABUL's
/// receiver list with its report times on top).
///
/// Invariants: every stored number lies within `cap − 1` of the smallest one, and
/// `cap ≤ SEQ_TH`, so `offset_to` from the front orders everything correctly.
#[derive(Clone)]
pub struct RangeSet {
    ranges: VecDeque<(SeqNo, SeqNo)>,
    len: u32,
    cap: u32,
}

impl RangeSet {
    /// An empty set that never spans more than `capacity` numbers, clamped to `1 ..= 2^30 − 1`.
    pub fn new(capacity: u32) -> RangeSet {
        RangeSet { ranges: VecDeque::new(), len: 0, cap: capacity.clamp(1, SEQ_TH) }
    }

    /// Offsets are taken from the current smallest number; `base` is that number or, for an
    /// empty list, the caller's reference point.
    #[inline]
    fn base_or(&self, fallback: SeqNo) -> SeqNo {
        self.ranges.front().map_or(fallback, |r| r.0)
    }

    /// Inserts `[first, last]` (if `first` is not after `last`), merging with overlapping and
    /// adjacent ranges. Returns how many numbers were not present before. Numbers that would
    /// stretch the span beyond the capacity are not stored.
    pub fn insert(&mut self, first: SeqNo, last: SeqNo) -> u32 {
        if last.is_before(first) {
            return 0;
        }
        let base = self.base_or(first);
        let key = |s: SeqNo| i64::from(base.offset_to(s));
        let cap = i64::from(self.cap);

        // Keep the span within `cap`: allowed keys are [hi − cap + 1, lo + cap − 1].
        let mut kf = key(first);
        let mut kl = kf + i64::from(first.offset_to(last));
        let (lo, hi) = match (self.ranges.front(), self.ranges.back()) {
            (Some(_), Some(b)) => (0, key(b.1)),
            _ => (kf, kf),
        };
        kf = kf.max(hi - cap + 1);
        kl = kl.min(lo + cap - 1);
        if kf > kl {
            return 0;
        }
        let (first, last) = (from_key(base, kf), from_key(base, kl));

        // Fast path: a new gap strictly above everything (the receiver's normal case, and
        // the sender's when NAKs arrive in order).
        let n = self.ranges.len();
        if n == 0 || key(self.ranges[n - 1].1) + 1 < kf {
            self.ranges.push_back((first, last));
            let added = (kl - kf + 1) as u32;
            self.len += added;
            return added;
        }

        // Below everything, not adjacent: O(1) at the front.
        if kl + 1 < key(self.ranges[0].0) {
            self.ranges.push_front((first, last));
            let added = (kl - kf + 1) as u32;
            self.len += added;
            return added;
        }

        // Ranges i..j touch [kf, kl] (overlap or adjacency) and merge with it.
        let i = self.ranges.partition_point(|r| key(r.1) < kf - 1);
        let j = self.ranges.partition_point(|r| key(r.0) <= kl + 1);
        if i == j {
            self.ranges.insert(i, (first, last));
            let added = (kl - kf + 1) as u32;
            self.len += added;
            return added;
        }
        let mut covered: i64 = 0;
        for r in self.ranges.range(i..j) {
            covered += key(r.1) - key(r.0) + 1;
        }
        let mf = kf.min(key(self.ranges[i].0));
        let ml = kl.max(key(self.ranges[j - 1].1));
        self.ranges[i] = (from_key(base, mf), from_key(base, ml));
        self.ranges.drain(i + 1..j);
        let added = (ml - mf + 1 - covered) as u32;
        self.len += added;
        added
    }

    /// Removes every number in `[first, last]`; returns how many were present.
    pub fn remove_range(&mut self, first: SeqNo, last: SeqNo) -> u32 {
        if last.is_before(first) || self.ranges.is_empty() {
            return 0;
        }
        let base = self.base_or(first);
        let key = |s: SeqNo| i64::from(base.offset_to(s));
        let kf = key(first);
        let kl = kf + i64::from(first.offset_to(last));

        // i..j: the ranges meeting [kf, kl]. The front and the back are found in O(1), which is
        // where in-order retransmissions and late packets land.
        let n = self.ranges.len();
        let i = if key(self.ranges[0].1) >= kf {
            0
        } else if key(self.ranges[n - 1].1) < kf {
            return 0;
        } else if n >= 2 && key(self.ranges[n - 2].1) < kf {
            n - 1
        } else {
            self.ranges.partition_point(|r| key(r.1) < kf)
        };
        let j = if key(self.ranges[i].0) > kl {
            return 0;
        } else if !matches!(self.ranges.get(i + 1), Some(r) if key(r.0) <= kl) {
            i + 1
        } else {
            self.ranges.partition_point(|r| key(r.0) <= kl)
        };
        let (a, _) = self.ranges[i];
        let (_, b) = self.ranges[j - 1];
        let mut present: i64 = 0;
        for r in self.ranges.range(i..j) {
            present += key(r.1) - key(r.0) + 1;
        }
        let left = (key(a) < kf).then(|| (a, first.prev()));
        let right = (key(b) > kl).then(|| (last.next(), b));
        let kept: i64 = [left, right].iter().flatten().map(|&(x, y)| key(y) - key(x) + 1).sum();

        match (left, right) {
            (Some(l), Some(r)) if j - i == 1 => {
                self.ranges[i] = l;
                self.ranges.insert(i + 1, r);
            }
            (Some(l), Some(r)) => {
                self.ranges[i] = l;
                self.ranges[i + 1] = r;
                self.ranges.drain(i + 2..j);
            }
            (Some(p), None) | (None, Some(p)) => {
                self.ranges[i] = p;
                self.ranges.drain(i + 1..j);
            }
            (None, None) if i == 0 && j == 1 => {
                self.ranges.pop_front();
            }
            (None, None) => {
                self.ranges.drain(i..j);
            }
        }
        let removed = (present - kept) as u32;
        self.len -= removed;
        removed
    }

    /// Removes every number not after `last`.
    pub fn remove_up_to(&mut self, last: SeqNo) {
        let Some(&(base, _)) = self.ranges.front() else { return };
        let kx = i64::from(base.offset_to(last));
        let key = |s: SeqNo| i64::from(base.offset_to(s));
        while let Some(&(a, b)) = self.ranges.front() {
            if key(b) <= kx {
                self.len -= (key(b) - key(a) + 1) as u32;
                self.ranges.pop_front();
            } else {
                if key(a) <= kx {
                    self.len -= (kx - key(a) + 1) as u32;
                    self.ranges[0].0 = last.next();
                }
                break;
            }
        }
    }

    /// Removes and returns the smallest number.
    pub fn pop_first(&mut self) -> Option<SeqNo> {
        let front = self.ranges.front_mut()?;
        let s = front.0;
        if front.0 == front.1 {
            self.ranges.pop_front();
        } else {
            front.0 = s.next();
        }
        self.len -= 1;
        Some(s)
    }

    /// Whether `seq` is in the set (O(log r)).
    pub fn contains(&self, seq: SeqNo) -> bool {
        let Some(&(base, _)) = self.ranges.front() else { return false };
        let key = |s: SeqNo| i64::from(base.offset_to(s));
        let k = key(seq);
        let i = self.ranges.partition_point(|r| key(r.1) < k);
        self.ranges.get(i).is_some_and(|r| key(r.0) <= k)
    }

    /// The smallest number, if any.
    pub fn first(&self) -> Option<SeqNo> {
        self.ranges.front().map(|r| r.0)
    }

    /// The largest number, if any.
    pub fn last(&self) -> Option<SeqNo> {
        self.ranges.back().map(|r| r.1)
    }

    /// Removes every number.
    pub fn clear(&mut self) {
        self.ranges.clear();
        self.len = 0;
    }

    /// Count of numbers (not ranges), O(1).
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the set holds no number.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Count of disjoint ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// The span limit in effect.
    pub fn capacity(&self) -> u32 {
        self.cap
    }

    /// The ranges in ascending order, inclusive.
    pub fn ranges(&self) -> impl ExactSizeIterator<Item = (SeqNo, SeqNo)> + '_ {
        self.ranges.iter().copied()
    }
}

#[inline]
fn from_key(base: SeqNo, k: i64) -> SeqNo {
    // |k| < 2^30 by construction; the mask keeps this total anyway.
    SeqNo::new(base.get().wrapping_add(k as u32))
}

impl fmt::Debug for RangeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RangeSet")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .field("ranges", &DebugRanges(&self.ranges))
            .finish()
    }
}

struct DebugRanges<'a>(&'a VecDeque<(SeqNo, SeqNo)>);

impl fmt::Debug for DebugRanges<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|&(a, b)| if a == b { format!("{a}") } else { format!("{a}..={b}") }))
            .finish()
    }
}

/// The data sender's loss list (UDT4.md §13.1; SABUL.md §5): numbers to retransmit, smallest
/// first. Reads go through [`RangeSet`] (`Deref`); the changes a sender makes are below.
///
/// Filled from NAKs or ERRs (after the protocol's clipping and validation, UDT4.md §5.4) and by
/// the EXP timer (§9.4); drained by the send scheduler with [`pop_first`](Self::pop_first)
/// (§7 step 1) and cut by ACKs with [`remove_up_to`](Self::remove_up_to) (§8.6 step 5).
#[derive(Clone, Debug)]
pub struct SndLossList {
    set: RangeSet,
}

impl SndLossList {
    /// An empty list that never spans more than `capacity_pkts` numbers (4.11: twice the
    /// initial flow window). Clamped to `1 ..= 2^30 − 1`.
    pub fn new(capacity_pkts: u32) -> SndLossList {
        SndLossList { set: RangeSet::new(capacity_pkts) }
    }

    /// Adds the inclusive range `[first, last]`, merging with what is present. Returns the
    /// count of numbers newly added (4.11 uses it for the retransmission statistics).
    /// A range with `first` after `last` is ignored; numbers beyond the capacity span are
    /// dropped (see the module docs).
    pub fn insert(&mut self, first: SeqNo, last: SeqNo) -> u32 {
        self.set.insert(first, last)
    }

    /// Removes and returns the smallest number.
    pub fn pop_first(&mut self) -> Option<SeqNo> {
        self.set.pop_first()
    }

    /// Removes every number `<= last`. On an ACK carrying `a` ("everything before `a`
    /// received") call `remove_up_to(a.prev())`.
    pub fn remove_up_to(&mut self, last: SeqNo) {
        self.set.remove_up_to(last)
    }

    /// Forgets every loss (the sender's list after EXP requeued everything unacknowledged).
    pub fn clear(&mut self) {
        self.set.clear()
    }
}

impl core::ops::Deref for SndLossList {
    type Target = RangeSet;
    fn deref(&self) -> &RangeSet {
        &self.set
    }
}

/// The data receiver's loss list (UDT4.md §13.2; SABUL.md §6): gaps not yet filled, smallest
/// first. Reads go through [`RangeSet`] (`Deref`); the changes a receiver makes are below.
///
/// New gaps come from loss detection (§8.2 step 4) and are always above everything present;
/// numbers leave when a retransmission or a late packet arrives (§8.2 step 6) or on a message
/// drop request (§5.8). The first number is the ACK point (§8.3).
#[derive(Clone, Debug)]
pub struct RcvLossList {
    set: RangeSet,
}

impl RcvLossList {
    /// An empty list that never spans more than `capacity` numbers (4.11: `UDT_FC`).
    /// Clamped to `1 ..= 2^30 − 1`.
    pub fn new(capacity: u32) -> RcvLossList {
        RcvLossList { set: RangeSet::new(capacity) }
    }

    /// Records the gap `[first, last]`. O(1) when it lies above everything present, as it
    /// does in §8.2; anything else is merged correctly too. Returns the count newly added.
    pub fn append(&mut self, first: SeqNo, last: SeqNo) -> u32 {
        self.set.insert(first, last)
    }

    /// Removes one number (a range may split in two). Returns whether it was present.
    pub fn remove(&mut self, seq: SeqNo) -> bool {
        self.set.remove_range(seq, seq) != 0
    }

    /// Removes every number in `[first, last]` (message drop request, §5.8). Returns how many
    /// were present.
    pub fn remove_range(&mut self, first: SeqNo, last: SeqNo) -> u32 {
        self.set.remove_range(first, last)
    }

    /// Removes every number `<= last`.
    pub fn remove_up_to(&mut self, last: SeqNo) {
        self.set.remove_up_to(last)
    }

    /// Forgets every loss.
    pub fn clear(&mut self) {
        self.set.clear()
    }

    /// Appends the list as loss words (UDT4.md §5.4, §13.2) to `out`, using at most
    /// `max_words` words (see [`encode_loss`]): the protocol's per-packet limit (UDT:
    /// `(MSS − 44) / 4`, §8.4; SABUL: `max_loss_length`, §3.3).
    pub fn encode(&self, max_words: usize, out: &mut Vec<u32>) {
        encode_loss(self.ranges(), max_words, out)
    }
}

impl core::ops::Deref for RcvLossList {
    type Target = RangeSet;
    fn deref(&self) -> &RangeSet {
        &self.set
    }
}

/// Encodes inclusive loss ranges as loss words (UDT4.md §5.4, SABUL.md §3.3), appending at
/// most `max_words` words to `out`: a single number is one word, a run of two or more is
/// `first | 0x8000_0000, last`. Stops at the first range that would not fit, so the output
/// never ends in a range start. The inverse of [`decode_loss`].
pub fn encode_loss(ranges: impl IntoIterator<Item = (SeqNo, SeqNo)>, max_words: usize, out: &mut Vec<u32>) {
    let mut room = max_words;
    for (a, b) in ranges {
        if a == b {
            if room < 1 {
                break;
            }
            out.push(a.get());
            room -= 1;
        } else {
            if room < 2 {
                break;
            }
            out.push(a.get() | RANGE_FLAG);
            out.push(b.get());
            room -= 2;
        }
    }
}

/// Why a loss list (UDT's NAK, SABUL's ERR) was rejected (UDT4.md §5.4, SABUL.md §3.3). A
/// 4.11 sender breaks the connection on these; ours should do the same (or at least drop the
/// packet) rather than guess.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossError {
    /// The list has no words at all (UDT4.md §5: a NAK carries at least one).
    Empty,
    /// The last word starts a range that has no end word.
    TrailingRangeStart {
        /// The position of the range's start word in the list.
        index: usize,
    },
    /// The word after a range start has bit 31 set too.
    RangeEndFlagged {
        /// The position of the range's start word in the list (the flagged word follows it).
        index: usize,
    },
    /// A range whose end is before its start under `seqcmp`.
    ReversedRange {
        /// The position of the range's start word in the list.
        index: usize,
        /// The range's start.
        first: SeqNo,
        /// The range's end, before its start.
        last: SeqNo,
    },
}

impl fmt::Display for LossError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LossError::Empty => write!(f, "loss list carries no words; drop it"),
            LossError::TrailingRangeStart { index } => {
                write!(f, "loss word {index} starts a range but is the last word; the peer is broken")
            }
            LossError::RangeEndFlagged { index } => {
                write!(f, "loss word {index} should end a range but has bit 31 set; the peer is broken")
            }
            LossError::ReversedRange { index, first, last } => {
                write!(f, "loss range at word {index} runs backwards ({first} > {last}); the peer is broken")
            }
        }
    }
}

impl std::error::Error for LossError {}

/// Iterator over the inclusive ranges of a loss list (UDT4.md §5.4, SABUL.md §3.3); yields an
/// error once and then stops. A single number `s` comes out as `(s, s)`.
#[derive(Clone, Debug)]
pub struct LossDecoder<'a> {
    words: &'a [u32],
    pos: usize,
    failed: bool,
}

impl<'a> LossDecoder<'a> {
    /// Decodes `words`, a loss list as it came off the wire.
    pub fn new(words: &'a [u32]) -> LossDecoder<'a> {
        LossDecoder { words, pos: 0, failed: false }
    }
}

impl Iterator for LossDecoder<'_> {
    type Item = Result<(SeqNo, SeqNo), LossError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let index = self.pos;
        let w = *self.words.get(index)?;
        let item = if w & RANGE_FLAG == 0 {
            self.pos += 1;
            Ok((SeqNo::new(w), SeqNo::new(w)))
        } else {
            match self.words.get(index + 1) {
                None => Err(LossError::TrailingRangeStart { index }),
                Some(&e) if e & RANGE_FLAG != 0 => Err(LossError::RangeEndFlagged { index }),
                Some(&e) => {
                    let (first, last) = (SeqNo::new(w), SeqNo::new(e));
                    self.pos += 2;
                    if first.diff(last) > 0 {
                        Err(LossError::ReversedRange { index, first, last })
                    } else {
                        Ok((first, last))
                    }
                }
            }
        };
        self.failed = item.is_err();
        Some(item)
    }
}

/// Decodes a loss list (UDT4.md §5.4, SABUL.md §3.3) into inclusive ranges, in the order
/// sent; the inverse of [`encode_loss`].
///
/// Enforces the rules a 4.11 sender enforces on the list itself: no trailing range start, a
/// range end without bit 31, `seqcmp(first, last) ≤ 0`. The rules that need connection state
/// (not beyond the largest sent number; clipping at the last ACK) are the caller's.
pub fn decode_loss(words: &[u32]) -> Result<Vec<(SeqNo, SeqNo)>, LossError> {
    if words.is_empty() {
        return Err(LossError::Empty);
    }
    LossDecoder::new(words).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seq::SEQ_MAX;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn s(x: u32) -> SeqNo {
        SeqNo::new(x)
    }

    fn rs<I: Iterator<Item = (SeqNo, SeqNo)>>(it: I) -> Vec<(u32, u32)> {
        it.map(|(a, b)| (a.get(), b.get())).collect()
    }

    #[test]
    fn insert_merges_overlapping_and_adjacent_ranges() {
        let mut l = SndLossList::new(10_000);
        assert_eq!(l.insert(s(10), s(12)), 3);
        assert_eq!(l.insert(s(20), s(20)), 1);
        assert_eq!(l.insert(s(13), s(13)), 1); // adjacent on the right of 10..=12
        assert_eq!(rs(l.ranges()), [(10, 13), (20, 20)]);
        assert_eq!(l.insert(s(14), s(19)), 6); // bridges both
        assert_eq!(rs(l.ranges()), [(10, 20)]);
        assert_eq!(l.insert(s(5), s(25)), 10);
        assert_eq!(l.insert(s(7), s(9)), 0);
        assert_eq!(rs(l.ranges()), [(5, 25)]);
        assert_eq!(l.len(), 21);
    }

    #[test]
    fn insert_ignores_reversed_range() {
        let mut l = SndLossList::new(100);
        assert_eq!(l.insert(s(9), s(8)), 0);
        assert!(l.is_empty());
        assert_eq!(l.first(), None);
    }

    #[test]
    fn insert_in_the_middle_and_before_the_front() {
        let mut l = SndLossList::new(10_000);
        l.insert(s(100), s(100));
        l.insert(s(300), s(310));
        l.insert(s(200), s(201));
        l.insert(s(50), s(60));
        assert_eq!(rs(l.ranges()), [(50, 60), (100, 100), (200, 201), (300, 310)]);
        assert_eq!(l.len(), 11 + 1 + 2 + 11);
        assert_eq!(l.first(), Some(s(50)));
        assert!(l.contains(s(201)) && !l.contains(s(202)) && !l.contains(s(49)));
    }

    #[test]
    fn pop_first_walks_ranges_in_order() {
        let mut l = SndLossList::new(100);
        l.insert(s(3), s(4));
        l.insert(s(7), s(7));
        let popped: Vec<u32> = core::iter::from_fn(|| l.pop_first()).map(SeqNo::get).collect();
        assert_eq!(popped, [3, 4, 7]);
        assert!(l.is_empty());
        assert_eq!(l.pop_first(), None);
    }

    #[test]
    fn ack_removes_everything_before_the_ack_number() {
        let mut l = SndLossList::new(1000);
        l.insert(s(10), s(20));
        l.insert(s(30), s(40));
        let ack = s(15);
        l.remove_up_to(ack.prev());
        assert_eq!(rs(l.ranges()), [(15, 20), (30, 40)]);
        l.remove_up_to(s(35));
        assert_eq!(rs(l.ranges()), [(36, 40)]);
        assert_eq!(l.len(), 5);
        l.remove_up_to(s(5)); // older than everything: no-op
        assert_eq!(l.len(), 5);
        l.remove_up_to(s(40));
        assert!(l.is_empty());
    }

    #[test]
    fn ranges_straddle_the_2_pow_31_wrap() {
        let mut l = SndLossList::new(1000);
        assert_eq!(l.insert(s(SEQ_MAX - 1), s(2)), 5);
        assert_eq!(l.insert(s(3), s(3)), 1);
        assert_eq!(l.insert(s(SEQ_MAX - 5), s(SEQ_MAX - 3)), 3);
        assert_eq!(rs(l.ranges()), [(SEQ_MAX - 5, SEQ_MAX - 3), (SEQ_MAX - 1, 3)]);
        assert_eq!(l.first(), Some(s(SEQ_MAX - 5)));
        l.remove_up_to(s(0));
        assert_eq!(rs(l.ranges()), [(1, 3)]);
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn span_is_bounded_by_capacity() {
        let mut l = SndLossList::new(10);
        assert_eq!(l.insert(s(100), s(200)), 10);
        assert_eq!(rs(l.ranges()), [(100, 109)]);
        assert_eq!(l.insert(s(50), s(60)), 0); // would stretch the span below
        assert_eq!(l.insert(s(500), s(500)), 0); // and above
        assert_eq!(l.len(), 10);
        // A number 2^30 away is not misordered into the list either.
        assert_eq!(l.insert(s(100 + SEQ_TH + 5), s(100 + SEQ_TH + 5)), 0);
        assert_eq!(SndLossList::new(0).capacity(), 1);
        assert_eq!(SndLossList::new(u32::MAX).capacity(), SEQ_TH);
    }

    #[test]
    fn rcv_remove_splits_a_range() {
        let mut l = RcvLossList::new(25_600);
        l.append(s(10), s(20));
        assert!(l.remove(s(15)));
        assert!(!l.remove(s(15)));
        assert_eq!(rs(l.ranges()), [(10, 14), (16, 20)]);
        assert!(l.remove(s(10)));
        assert!(l.remove(s(20)));
        assert_eq!(rs(l.ranges()), [(11, 14), (16, 19)]);
        assert_eq!(l.len(), 8);
        assert_eq!(l.first(), Some(s(11)));
    }

    #[test]
    fn rcv_remove_range_spanning_several_ranges() {
        let mut l = RcvLossList::new(25_600);
        for k in 0..5 {
            l.append(s(k * 10), s(k * 10 + 4));
        }
        assert_eq!(l.remove_range(s(12), s(31)), 3 + 5 + 2);
        assert_eq!(rs(l.ranges()), [(0, 4), (10, 11), (32, 34), (40, 44)]);
        assert_eq!(l.remove_range(s(5), s(9)), 0);
        assert_eq!(l.remove_range(s(0), s(100)), 15);
        assert!(l.is_empty());
        assert_eq!(l.remove_range(s(0), s(100)), 0);
    }

    #[test]
    fn rcv_out_of_order_append_is_merged() {
        let mut l = RcvLossList::new(25_600);
        l.append(s(100), s(110));
        assert_eq!(l.append(s(90), s(100)), 10);
        assert_eq!(rs(l.ranges()), [(90, 110)]);
    }

    #[test]
    fn nak_reports_two_packet_gap_as_range() {
        let mut l = RcvLossList::new(100);
        l.append(s(5), s(6));
        let mut w = Vec::new();
        l.encode(10, &mut w);
        assert_eq!(w, [0x8000_0005, 6]);
    }

    #[test]
    fn encode_matches_udt4_spec_15_4() {
        let b = 0x0BAD_F000;
        let mut l = RcvLossList::new(25_600);
        l.append(s(b + 0x10), s(b + 0x10));
        l.append(s(b + 0x12), s(b + 0x15));
        l.append(s(b + 0x20), s(b + 0x20));
        l.append(s(b + 0x30), s(b + 0x31));
        let mut w = Vec::new();
        l.encode(364, &mut w); // UDT's limit at MSS 1500: (1500 − 44) / 4
        assert_eq!(w, [0x0BAD_F010, 0x8BAD_F012, 0x0BAD_F015, 0x0BAD_F020, 0x8BAD_F030, 0x0BAD_F031]);
    }

    #[test]
    fn encode_stops_before_an_entry_that_does_not_fit() {
        let mut l = RcvLossList::new(1000);
        l.append(s(1), s(1));
        l.append(s(3), s(4));
        l.append(s(6), s(6));
        let mut w = Vec::new();
        l.encode(2, &mut w);
        assert_eq!(w, [1]); // the range needs two words; never a trailing range start
        w.clear();
        l.encode(3, &mut w);
        assert_eq!(w, [1, 0x8000_0003, 4]);
        w.clear();
        l.encode(0, &mut w);
        assert!(w.is_empty());
    }

    #[test]
    fn decode_paper_vectors() {
        let got = decode_loss(&[0x0000_0003, 0x8000_0006, 0x0000_000F, 0x0000_0012]).unwrap();
        assert_eq!(rs(got.into_iter()), [(3, 3), (6, 15), (18, 18)]);
        let got = decode_loss(&[0x0000_0002, 0x8000_0006, 0x0000_000B, 0x0000_000E]).unwrap();
        assert_eq!(rs(got.into_iter()), [(2, 2), (6, 11), (14, 14)]);
    }

    #[test]
    fn decode_rejects_malformed_lists() {
        assert_eq!(decode_loss(&[]), Err(LossError::Empty));
        assert_eq!(decode_loss(&[1, 0x8000_0005]), Err(LossError::TrailingRangeStart { index: 1 }));
        assert_eq!(decode_loss(&[0x8000_0005, 0x8000_0006]), Err(LossError::RangeEndFlagged { index: 0 }));
        assert_eq!(decode_loss(&[0x8000_0009, 5]), Err(LossError::ReversedRange { index: 0, first: s(9), last: s(5) }));
        // A range across the wrap is fine; its mirror image is reversed.
        assert_eq!(rs(decode_loss(&[0xFFFF_FFFE, 1]).unwrap().into_iter()), [(SEQ_MAX - 1, 1)]);
        assert!(decode_loss(&[0x8000_0001, SEQ_MAX - 1]).is_err());
        // The iterator stops after the first error.
        let mut it = LossDecoder::new(&[7, 0x8000_0009, 5, 11]);
        assert_eq!(it.next(), Some(Ok((s(7), s(7)))));
        assert!(matches!(it.next(), Some(Err(_))));
        assert_eq!(it.next(), None);
        assert!(!LossError::Empty.to_string().is_empty());
    }

    /// Naive model: the set of offsets from an origin near which everything lives.
    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, u32),
        Remove(u32),
        RemoveRange(u32, u32),
        RemoveUpTo(u32),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..4000, 0u32..40).prop_map(|(a, n)| Op::Insert(a, a + n)),
            1 => (0u32..4000, 0u32..300).prop_map(|(a, n)| Op::Insert(a, a + n)),
            3 => (0u32..4100).prop_map(Op::Remove),
            1 => (0u32..4100, 0u32..200).prop_map(|(a, n)| Op::RemoveRange(a, a + n)),
            1 => (0u32..4100).prop_map(Op::RemoveUpTo),
            2 => Just(Op::Pop),
        ]
    }

    fn origin() -> impl Strategy<Value = u32> {
        prop_oneof![Just(SEQ_MAX - 2000), Just(SEQ_MAX - 3), Just(0), 0..=SEQ_MAX]
    }

    fn model_ranges(m: &BTreeSet<u32>, origin: u32) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for &k in m {
            match out.last_mut() {
                Some(r) if r.1 + 1 == k => r.1 = k,
                _ => out.push((k, k)),
            }
        }
        out.into_iter().map(|(a, b)| (s(origin).add(a).get(), s(origin).add(b).get())).collect()
    }

    fn check(set: &RangeSet, m: &BTreeSet<u32>, origin: u32) -> Result<(), TestCaseError> {
        prop_assert_eq!(set.len as usize, m.len());
        prop_assert_eq!(rs(set.ranges.iter().copied()), model_ranges(m, origin));
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn loss_lists_match_a_naive_set(origin in origin(), ops in prop::collection::vec(op(), 1..80)) {
            let o = s(origin);
            let mut snd = SndLossList::new(1 << 20);
            let mut rcv = RcvLossList::new(1 << 20);
            let mut m: BTreeSet<u32> = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(a, b) => {
                        let added = (a..=b).filter(|k| m.insert(*k)).count() as u32;
                        prop_assert_eq!(snd.insert(o.add(a), o.add(b)), added);
                        prop_assert_eq!(rcv.append(o.add(a), o.add(b)), added);
                    }
                    Op::Remove(a) => {
                        let was = m.remove(&a);
                        prop_assert_eq!(rcv.remove(o.add(a)), was);
                        snd.set.remove_range(o.add(a), o.add(a));
                    }
                    Op::RemoveRange(a, b) => {
                        let n = (a..=b).filter(|k| m.remove(k)).count() as u32;
                        prop_assert_eq!(rcv.remove_range(o.add(a), o.add(b)), n);
                        snd.set.remove_range(o.add(a), o.add(b));
                    }
                    Op::RemoveUpTo(a) => {
                        m.retain(|&k| k > a);
                        // Only meaningful when `a` is comparable with the list: within 2^30.
                        snd.remove_up_to(o.add(a));
                        rcv.remove_up_to(o.add(a));
                    }
                    Op::Pop => {
                        let want = m.pop_first().map(|k| o.add(k));
                        prop_assert_eq!(snd.pop_first(), want);
                        prop_assert_eq!(rcv.set.pop_first(), want);
                    }
                }
                check(&snd.set, &m, origin)?;
                check(&rcv.set, &m, origin)?;
                prop_assert_eq!(snd.first(), m.first().map(|&k| o.add(k)));
                for k in [0u32, 17, 1000, 3999] {
                    prop_assert_eq!(snd.contains(o.add(k)), m.contains(&k));
                }
            }
        }

        #[test]
        fn loss_encoding_round_trips(origin in origin(), ops in prop::collection::vec(op(), 1..40), max in 0usize..64) {
            let o = s(origin);
            let mut rcv = RcvLossList::new(1 << 20);
            for op in ops {
                if let Op::Insert(a, b) = op { rcv.append(o.add(a), o.add(b)); }
                if let Op::Remove(a) = op { rcv.remove(o.add(a)); }
            }
            let mut w = Vec::new();
            rcv.encode(max, &mut w);
            prop_assert!(w.len() <= max);
            let decoded = if w.is_empty() { Vec::new() } else { decode_loss(&w).unwrap() };
            let all: Vec<_> = rcv.ranges().collect();
            prop_assert_eq!(&all[..decoded.len()], &decoded[..]);
            // Stopped only because the next entry did not fit.
            if let Some(&(a, b)) = all.get(decoded.len()) {
                let need = if a == b { 1 } else { 2 };
                prop_assert!(w.len() + need > max);
            }
        }

        #[test]
        fn decode_never_panics(words in prop::collection::vec(any::<u32>(), 0..16)) {
            let _ = decode_loss(&words);
        }

        #[test]
        fn arbitrary_inputs_keep_invariants(ops in prop::collection::vec((any::<u32>(), any::<u32>(), 0u8..4), 0..60), cap in 0u32..5000) {
            let mut l = RcvLossList::new(cap);
            for (a, b, k) in ops {
                match k {
                    0 => { l.append(s(a), s(b)); }
                    1 => { l.remove_range(s(a), s(b)); }
                    2 => { l.remove_up_to(s(a)); }
                    _ => { l.remove(s(a)); }
                }
                let total: u64 = l.ranges().map(|(x, y)| u64::from(x.len_to(y))).sum();
                prop_assert_eq!(total, u64::from(l.len()));
                if let (Some(f), Some(z)) = (l.first(), l.last()) {
                    prop_assert!(f.len_to(z) <= l.capacity());
                }
                let v: Vec<_> = l.ranges().collect();
                for w in v.windows(2) {
                    prop_assert!(w[0].1.next().is_before(w[1].0));
                }
            }
        }
    }
}
