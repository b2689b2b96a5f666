//! The receiver's buffer (UDT4.md §8.2, §8.3, §13.3; SABUL.md §6): a reorder window of
//! [`PacketRing`] slots indexed by the offset of a sequence number from the next packet the
//! application will read.
//!
//! Packets become readable when an ACK covers them, as in 4.11 (`RcvLastAck`); one slot is
//! always kept empty so the advertised window is at most capacity − 1. A slot can also be
//! *skipped*: a packet that will never be delivered (UDT's message drop request, §5.8), which
//! the reader passes over. The stream reader is here; UDT's message reader
//! (`udt_proto::recv_buffer`) walks the readable slots with [`RecvBuffer::slot`].

use crate::ring::PacketRing;
use crate::seq::SeqNo;

/// What a slot of the window holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Slot {
    /// No packet yet.
    #[default]
    Empty,
    /// A packet waits to be read.
    Full,
    /// Never to be delivered: the reader skips it.
    Skipped,
}

/// What [`RecvBuffer::insert`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// Stored in its slot.
    Stored,
    /// Its slot already holds it (or skips it): a retransmission or a duplicate.
    Duplicate,
    /// Before what was already read, or beyond the buffer.
    OutOfWindow,
}

/// The receive window: one slot per sequence number from the next packet to read on, the
/// ACK point and the read position (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct RecvBuffer<M> {
    ring: PacketRing<(Slot, M)>,
    /// Sequence number of the packet in the head slot.
    head_seq: SeqNo,
    /// Bytes of the head packet already read (stream).
    head_read: usize,
    /// Packets from the head up to (excluding) this one are acknowledged and readable.
    readable: usize,
}

impl<M: Copy + Default> RecvBuffer<M> {
    /// A window of `capacity_pkts` (at least 2) slots of `payload_size` bytes whose first slot
    /// is for `first_seq`.
    pub fn new(capacity_pkts: usize, payload_size: usize, first_seq: SeqNo) -> RecvBuffer<M> {
        RecvBuffer {
            ring: PacketRing::new(capacity_pkts.max(2), payload_size),
            head_seq: first_seq,
            head_read: 0,
            readable: 0,
        }
    }

    /// Slots in the window, the one always kept empty included.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Slots free for new packets beyond the acknowledged-but-unread ones (UDT4.md §8.2, §11).
    pub fn available(&self) -> usize {
        self.capacity() - self.readable - 1
    }

    /// Stores the packet `seq` unless it is a duplicate or outside the window.
    pub fn insert(&mut self, seq: SeqNo, payload: &[u8], meta: M) -> Insert {
        let off = self.head_seq.offset_to(seq);
        if off < self.readable as i32 || off as usize >= self.capacity() - 1 || payload.len() > self.ring.payload_size()
        {
            return Insert::OutOfWindow;
        }
        let off = off as usize;
        if self.ring.meta(off).0 != Slot::Empty {
            return Insert::Duplicate;
        }
        self.ring.put(off, payload, (Slot::Full, meta));
        Insert::Stored
    }

    /// Marks every packet up to (excluding) `ack` readable (an ACK was sent for it).
    pub fn acknowledge(&mut self, ack: SeqNo) {
        let off = self.head_seq.offset_to(ack);
        if off > self.readable as i32 && (off as usize) < self.capacity() {
            self.readable = off as usize;
        }
    }

    /// Marks the slots of `[first, last]` not yet readable as skipped, where they are empty or
    /// `also(meta)` holds for what they store.
    pub fn skip(&mut self, first: SeqNo, last: SeqNo, also: impl Fn(&M) -> bool) {
        let a = self.head_seq.offset_to(first).max(self.readable as i32);
        let b = self.head_seq.offset_to(last).min(self.capacity() as i32 - 2);
        for off in a.max(0)..=b {
            let (state, meta) = self.ring.meta_mut(off as usize);
            if *state == Slot::Empty || also(meta) {
                *state = Slot::Skipped;
            }
        }
    }

    /// Forgets the `n` packets at the head (they were delivered or skipped).
    pub fn consume(&mut self, n: usize) {
        for i in 0..n {
            self.ring.meta_mut(i).0 = Slot::Empty;
        }
        self.ring.advance(n);
        self.head_seq = self.head_seq.add(n as u32);
        self.readable -= n;
        self.head_read = 0;
    }

    /// Acknowledged packets from the head on, delivered or not.
    pub fn readable(&self) -> usize {
        self.readable
    }

    /// Whether an acknowledged packet waits to be read.
    pub fn has_readable(&self) -> bool {
        self.readable > 0
    }

    /// The slot `offset` places after the head: its state, metadata and payload (the metadata
    /// and payload of a slot that is not [`Slot::Full`] are whatever it last held).
    #[inline]
    pub fn slot(&self, offset: usize) -> (Slot, &M, &[u8]) {
        let (payload, (state, meta)) = self.ring.get(offset);
        (*state, meta, payload)
    }

    /// Readable stream bytes.
    pub fn readable_bytes(&self) -> usize {
        (0..self.readable).filter(|&i| self.ring.meta(i).0 == Slot::Full).map(|i| self.ring.len_at(i)).sum::<usize>()
            - self.head_read
    }

    /// Stream read: copies acknowledged bytes in order, skipping skipped slots; returns the
    /// count.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut done = 0;
        let mut consumed = 0;
        while done < out.len() && consumed < self.readable {
            let (state, _, payload) = self.slot(consumed);
            if state != Slot::Full {
                consumed += 1;
                self.head_read = 0;
                continue;
            }
            let left = &payload[self.head_read..];
            let n = left.len().min(out.len() - done);
            out[done..done + n].copy_from_slice(&left[..n]);
            done += n;
            if n == left.len() {
                consumed += 1;
                self.head_read = 0;
            } else {
                self.head_read += n;
            }
        }
        let keep = self.head_read;
        self.consume(consumed);
        self.head_read = keep;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_bytes_are_readable_only_after_ack() {
        let mut b: RecvBuffer<()> = RecvBuffer::new(32, 4, SeqNo::new(100));
        assert_eq!(b.insert(SeqNo::new(101), b"efgh", ()), Insert::Stored);
        assert_eq!(b.insert(SeqNo::new(100), b"abcd", ()), Insert::Stored);
        assert_eq!(b.insert(SeqNo::new(100), b"abcd", ()), Insert::Duplicate);
        let mut out = [0; 16];
        assert_eq!(b.read(&mut out), 0);
        b.acknowledge(SeqNo::new(102));
        assert_eq!(b.readable_bytes(), 8);
        assert_eq!(b.read(&mut out[..3]), 3);
        assert_eq!(b.readable_bytes(), 5);
        assert_eq!(b.read(&mut out[3..]), 5);
        assert_eq!(&out[..8], b"abcdefgh");
        assert_eq!(b.insert(SeqNo::new(101), b"zzzz", ()), Insert::OutOfWindow);
    }

    #[test]
    fn window_keeps_one_slot_free() {
        let mut b: RecvBuffer<()> = RecvBuffer::new(32, 1, SeqNo::new(0));
        assert_eq!(b.available(), 31);
        assert_eq!(b.insert(SeqNo::new(31), b"x", ()), Insert::OutOfWindow);
        assert_eq!(b.insert(SeqNo::new(30), b"x", ()), Insert::Stored);
        assert_eq!(b.insert(SeqNo::new(0), b"xy", ()), Insert::OutOfWindow, "longer than a slot");
    }

    #[test]
    fn skipped_slots_are_passed_over_by_the_stream_reader() {
        let mut b: RecvBuffer<u8> = RecvBuffer::new(32, 2, SeqNo::new(0));
        b.insert(SeqNo::new(0), b"ab", 1);
        b.insert(SeqNo::new(1), b"xx", 2);
        b.insert(SeqNo::new(3), b"cd", 3);
        b.skip(SeqNo::new(1), SeqNo::new(2), |&m| m == 2); // slot 2 is empty: skipped too
        b.acknowledge(SeqNo::new(4));
        let mut out = [0; 8];
        assert_eq!(b.read(&mut out), 4);
        assert_eq!(&out[..4], b"abcd");
        assert!(!b.has_readable());
    }
}
