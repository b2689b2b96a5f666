//! The sender's buffer of unacknowledged and unsent packets (UDT4.md §3.1, §7, §13.3).
//!
//! Application data is cut into payload-sized packets when it is added (one `send` call = one
//! message, no coalescing, as in 4.11), and stored in a ring of fixed-size slots so that the
//! packet path neither allocates nor copies more than once. The slot of sequence number `s`
//! is found by its offset from the oldest unacknowledged packet.

use crate::seq::MsgNo;
use crate::wire::Boundary;
use transfer::time::Instant;

#[derive(Debug)]
pub struct SendBuffer {
    payload: usize,
    cap: usize,
    data: Vec<u8>,
    lens: Vec<u16>,
    /// Word 1 of the data header (boundary, in-order bit, message number).
    msg_words: Vec<u32>,
    /// When the packet's message expires (`None` = never), for DGRAM drop.
    expiry: Vec<Option<Instant>>,
    head: usize,
    count: usize,
    bytes: usize,
    next_msg: MsgNo,
}

/// One packet read out of the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    pub payload: &'a [u8],
    pub msg_word: u32,
    pub expiry: Option<Instant>,
}

impl SendBuffer {
    pub fn new(capacity_pkts: usize, payload_size: usize) -> SendBuffer {
        let cap = capacity_pkts.max(2);
        SendBuffer {
            payload: payload_size,
            cap,
            data: vec![0; cap * payload_size],
            lens: vec![0; cap],
            msg_words: vec![0; cap],
            expiry: vec![None; cap],
            head: 0,
            count: 0,
            bytes: 0,
            next_msg: MsgNo::FIRST,
        }
    }

    pub fn payload_size(&self) -> usize {
        self.payload
    }

    /// Packets stored (acknowledged ones are removed).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Payload bytes stored.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn free_packets(&self) -> usize {
        self.cap - self.count
    }

    /// Bytes a STREAM `send` may add now.
    pub fn free_bytes(&self) -> usize {
        self.free_packets() * self.payload
    }

    /// Packets needed for a message of `len` bytes (an empty message still takes one).
    ///
    /// # Panics
    /// If the buffer was made with a `payload_size` of 0.
    pub fn packets_for(&self, len: usize) -> usize {
        len.div_ceil(self.payload).max(1)
    }

    /// Adds one message. Returns `false` (and stores nothing) if it does not fit.
    ///
    /// # Panics
    /// If the buffer was made with a `payload_size` of 0.
    pub fn push_message(&mut self, data: &[u8], in_order: bool, expiry: Option<Instant>) -> bool {
        let n = self.packets_for(data.len());
        if n > self.free_packets() {
            return false;
        }
        let msg = self.next_msg;
        self.next_msg = msg.next();
        let mut chunks = data.chunks(self.payload);
        for i in 0..n {
            let chunk = chunks.next().unwrap_or(&[]);
            let boundary = match (i == 0, i + 1 == n) {
                (true, true) => Boundary::Solo,
                (true, false) => Boundary::First,
                (false, true) => Boundary::Last,
                (false, false) => Boundary::Middle,
            };
            let slot = (self.head + self.count) % self.cap;
            let at = slot * self.payload;
            self.data[at..at + chunk.len()].copy_from_slice(chunk);
            self.lens[slot] = chunk.len() as u16;
            self.msg_words[slot] = ((boundary as u32) << 30) | ((in_order as u32) << 29) | msg.get();
            self.expiry[slot] = expiry;
            self.count += 1;
            self.bytes += chunk.len();
        }
        true
    }

    /// The packet `offset` places after the oldest stored one.
    pub fn get(&self, offset: usize) -> Option<Stored<'_>> {
        if offset >= self.count {
            return None;
        }
        let slot = (self.head + offset) % self.cap;
        let at = slot * self.payload;
        Some(Stored {
            payload: &self.data[at..at + self.lens[slot] as usize],
            msg_word: self.msg_words[slot],
            expiry: self.expiry[slot],
        })
    }

    /// Removes the `n` oldest packets (they were acknowledged).
    pub fn release(&mut self, n: usize) {
        let n = n.min(self.count);
        for i in 0..n {
            self.bytes -= self.lens[(self.head + i) % self.cap] as usize;
        }
        self.head = (self.head + n) % self.cap;
        self.count -= n;
    }

    /// Offsets (from the oldest) of the first and last packet of the message that the packet
    /// at `offset` belongs to, as far as they are still stored.
    pub fn message_span(&self, offset: usize) -> Option<(usize, usize)> {
        let msg = self.get(offset)?.msg_word & 0x1FFF_FFFF;
        let same = |o: usize| self.get(o).is_some_and(|p| p.msg_word & 0x1FFF_FFFF == msg);
        let mut first = offset;
        while first > 0 && same(first - 1) {
            first -= 1;
        }
        let mut last = offset;
        while same(last + 1) {
            last += 1;
        }
        Some((first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_into_payload_pieces_with_boundaries() {
        let mut b = SendBuffer::new(8, 4);
        assert!(b.push_message(b"abcdefghij", false, None));
        assert!(b.push_message(b"xy", true, None));
        assert_eq!(b.len(), 4);
        assert_eq!(b.get(0).unwrap().payload, b"abcd");
        assert_eq!(b.get(0).unwrap().msg_word, 0x8000_0001);
        assert_eq!(b.get(1).unwrap().msg_word, 0x0000_0001);
        assert_eq!(b.get(2).unwrap().payload, b"ij");
        assert_eq!(b.get(2).unwrap().msg_word, 0x4000_0001);
        assert_eq!(b.get(3).unwrap().msg_word, 0xE000_0002);
        assert_eq!(b.message_span(1), Some((0, 2)));
        b.release(3);
        assert_eq!(b.get(0).unwrap().payload, b"xy");
        assert_eq!(b.bytes(), 2);
    }

    #[test]
    fn a_message_that_does_not_fit_is_refused_whole() {
        let mut b = SendBuffer::new(2, 4);
        assert!(!b.push_message(&[0; 9], false, None));
        assert!(b.is_empty());
        assert!(b.push_message(&[], false, None));
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn ring_wraps() {
        let mut b = SendBuffer::new(3, 2);
        for round in 0..10u8 {
            assert!(b.push_message(&[round, round], false, None));
            assert!(b.push_message(&[round], false, None));
            assert_eq!(b.get(1).unwrap().payload, &[round]);
            b.release(2);
        }
    }
}
