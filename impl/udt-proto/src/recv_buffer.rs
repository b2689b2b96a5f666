//! The receiver's buffer (UDT4.md §8.2, §8.3, §13.3).
//!
//! A ring of payload-sized slots indexed by the offset of a sequence number from the next
//! packet the application will read. Packets become readable when an ACK covers them, as in
//! 4.11 (`RcvLastAck`); one slot is always kept empty so the advertised window is at most
//! capacity − 1.

use crate::wire::Boundary;
use transfer::seq::SeqNo;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Empty,
    Full,
    /// Part of a message the sender dropped (message drop request, §5.8).
    Dropped,
}

#[derive(Debug)]
pub struct RecvBuffer {
    payload: usize,
    cap: usize,
    data: Vec<u8>,
    lens: Vec<u16>,
    msg_words: Vec<u32>,
    state: Vec<Slot>,
    head: usize,
    /// Sequence number of the packet in the head slot.
    head_seq: SeqNo,
    /// Bytes of the head packet already read (STREAM).
    head_read: usize,
    /// Packets from the head up to (excluding) this one are acknowledged and readable.
    readable: usize,
}

/// What [`RecvBuffer::insert`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Stored,
    Duplicate,
    /// Before what was already read, or beyond the buffer.
    OutOfWindow,
}

impl RecvBuffer {
    pub fn new(capacity_pkts: usize, payload_size: usize, first_seq: SeqNo) -> RecvBuffer {
        let cap = capacity_pkts.max(32);
        RecvBuffer {
            payload: payload_size,
            cap,
            data: vec![0; cap * payload_size],
            lens: vec![0; cap],
            msg_words: vec![0; cap],
            state: vec![Slot::Empty; cap],
            head: 0,
            head_seq: first_seq,
            head_read: 0,
            readable: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Slots free for new packets beyond the acknowledged-but-unread ones (§8.2, §11).
    pub fn available(&self) -> usize {
        self.cap - self.readable - 1
    }

    pub fn insert(&mut self, seq: SeqNo, msg_word: u32, payload: &[u8]) -> Insert {
        let off = self.head_seq.offset_to(seq);
        if off < self.readable as i32 || off as usize >= self.cap - 1 || payload.len() > self.payload {
            return Insert::OutOfWindow;
        }
        let slot = (self.head + off as usize) % self.cap;
        if self.state[slot] != Slot::Empty {
            return Insert::Duplicate;
        }
        let at = slot * self.payload;
        self.data[at..at + payload.len()].copy_from_slice(payload);
        self.lens[slot] = payload.len() as u16;
        self.msg_words[slot] = msg_word;
        self.state[slot] = Slot::Full;
        Insert::Stored
    }

    /// Marks every packet up to (excluding) `ack` readable (an ACK was sent for it).
    pub fn acknowledge(&mut self, ack: SeqNo) {
        let off = self.head_seq.offset_to(ack);
        if off > self.readable as i32 && (off as usize) < self.cap {
            self.readable = off as usize;
        }
    }

    /// Marks stored packets of message `msg` within `[first, last]` dropped (§5.8).
    pub fn drop_message(&mut self, msg: u32, first: SeqNo, last: SeqNo) {
        let a = self.head_seq.offset_to(first).max(self.readable as i32);
        let b = self.head_seq.offset_to(last).min(self.cap as i32 - 2);
        for off in a.max(0)..=b {
            let slot = (self.head + off as usize) % self.cap;
            if self.state[slot] == Slot::Empty || self.msg_words[slot] & 0x1FFF_FFFF == msg {
                self.state[slot] = Slot::Dropped;
            }
        }
    }

    fn advance(&mut self, n: usize) {
        for i in 0..n {
            self.state[(self.head + i) % self.cap] = Slot::Empty;
        }
        self.head = (self.head + n) % self.cap;
        self.head_seq = self.head_seq.add(n as u32);
        self.readable -= n;
        self.head_read = 0;
    }

    /// Readable STREAM bytes.
    pub fn readable_bytes(&self) -> usize {
        (0..self.readable)
            .map(|i| {
                let s = (self.head + i) % self.cap;
                if self.state[s] == Slot::Full {
                    self.lens[s] as usize
                } else {
                    0
                }
            })
            .sum::<usize>()
            - self.head_read
    }

    pub fn has_readable(&self) -> bool {
        self.readable > 0
    }

    /// STREAM read: copies acknowledged bytes in order, returns the count.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut done = 0;
        let mut consumed = 0;
        while done < out.len() && consumed < self.readable {
            let slot = (self.head + consumed) % self.cap;
            if self.state[slot] != Slot::Full {
                consumed += 1;
                self.head_read = 0;
                continue;
            }
            let at = slot * self.payload + self.head_read;
            let left = self.lens[slot] as usize - self.head_read;
            let n = left.min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.data[at..at + n]);
            done += n;
            if n == left {
                consumed += 1;
                self.head_read = 0;
            } else {
                self.head_read += n;
            }
        }
        let keep = self.head_read;
        self.advance(consumed);
        self.head_read = keep;
        done
    }

    /// DGRAM read: the next complete message (in order; dropped messages are skipped).
    /// Returns `Some(len)`; a message longer than `out` is truncated to `out.len()` and the
    /// rest discarded, like 4.11's `recvmsg`.
    pub fn read_message(&mut self, out: &mut [u8]) -> Option<usize> {
        loop {
            if self.readable == 0 {
                return None;
            }
            let slot = self.head;
            if self.state[slot] != Slot::Full {
                self.advance(1);
                continue;
            }
            // Find the end of this message within the readable region.
            let mut n = 0;
            let mut complete = false;
            let mut dropped = false;
            while n < self.readable {
                let s = (self.head + n) % self.cap;
                if self.state[s] != Slot::Full {
                    dropped = true;
                }
                let b = Boundary::from_bits(self.msg_words[s] >> 30);
                n += 1;
                if b.is_last() {
                    complete = true;
                    break;
                }
                if n < self.readable {
                    let next = (self.head + n) % self.cap;
                    if Boundary::from_bits(self.msg_words[next] >> 30).is_first() && self.state[next] == Slot::Full {
                        // The message's last packet never came: treat as broken, skip it.
                        dropped = true;
                        complete = true;
                        break;
                    }
                }
            }
            if !complete {
                return None;
            }
            if dropped || !Boundary::from_bits(self.msg_words[slot] >> 30).is_first() {
                self.advance(n);
                continue;
            }
            let mut done = 0;
            for i in 0..n {
                let s = (self.head + i) % self.cap;
                let len = self.lens[s] as usize;
                let take = len.min(out.len() - done);
                let at = s * self.payload;
                out[done..done + take].copy_from_slice(&self.data[at..at + take]);
                done += take;
            }
            self.advance(n);
            return Some(done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_bytes_are_readable_only_after_ack() {
        let mut b = RecvBuffer::new(32, 4, SeqNo::new(100));
        assert_eq!(b.insert(SeqNo::new(101), 0, b"efgh"), Insert::Stored);
        assert_eq!(b.insert(SeqNo::new(100), 0, b"abcd"), Insert::Stored);
        assert_eq!(b.insert(SeqNo::new(100), 0, b"abcd"), Insert::Duplicate);
        let mut out = [0; 16];
        assert_eq!(b.read(&mut out), 0);
        b.acknowledge(SeqNo::new(102));
        assert_eq!(b.read(&mut out[..3]), 3);
        assert_eq!(b.read(&mut out[3..]), 5);
        assert_eq!(&out[..8], b"abcdefgh");
        assert_eq!(b.insert(SeqNo::new(101), 0, b"zzzz"), Insert::OutOfWindow);
    }

    #[test]
    fn window_keeps_one_slot_free() {
        let mut b = RecvBuffer::new(32, 1, SeqNo::new(0));
        assert_eq!(b.available(), 31);
        assert_eq!(b.insert(SeqNo::new(31), 0, b"x"), Insert::OutOfWindow);
        assert_eq!(b.insert(SeqNo::new(30), 0, b"x"), Insert::Stored);
    }

    #[test]
    fn messages_come_out_whole_and_dropped_ones_are_skipped() {
        let mut b = RecvBuffer::new(32, 2, SeqNo::new(0));
        b.insert(SeqNo::new(0), 0x8000_0001, b"ab");
        b.insert(SeqNo::new(1), 0x4000_0001, b"c");
        b.insert(SeqNo::new(2), 0x8000_0002, b"xx");
        b.insert(SeqNo::new(4), 0xC000_0003, b"ok");
        b.drop_message(2, SeqNo::new(2), SeqNo::new(3));
        b.acknowledge(SeqNo::new(5));
        let mut out = [0; 8];
        assert_eq!(b.read_message(&mut out), Some(3));
        assert_eq!(&out[..3], b"abc");
        assert_eq!(b.read_message(&mut out), Some(2));
        assert_eq!(&out[..2], b"ok");
        assert_eq!(b.read_message(&mut out), None);
    }
}
