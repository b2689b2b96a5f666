//! UDT's messages over the family's send buffer (UDT4.md §3.1, §5.8, §13.3).
//!
//! One `send` call is one message, cut into packets without coalescing, as in 4.11. Each
//! packet keeps word 1 of its data header (boundary, in-order bit, message number) and the
//! instant its message expires, for the DGRAM drop of §5.8. Reads go through
//! [`transfer::send_buffer::SendBuffer`] (`Deref`).

use crate::seq::{MsgNo, MSG_MAX};
use crate::wire::Boundary;
use transfer::send_buffer::SendBuffer as Packets;
use transfer::time::Instant;

/// What UDT keeps beside each packet's payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MsgMeta {
    /// Word 1 of the data header (boundary, in-order bit, message number).
    pub msg_word: u32,
    /// When the message expires (`None` = never), for DGRAM drop.
    pub expiry: Option<Instant>,
}

/// The send buffer with the message word and expiry of each packet, and the next message
/// number (see the [module docs](self)).
#[derive(Debug)]
pub struct SendBuffer {
    packets: Packets<MsgMeta>,
    next_msg: MsgNo,
}

/// One packet read out of the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    /// The payload bytes.
    pub payload: &'a [u8],
    /// Word 1 of the data header (boundary, in-order bit, message number).
    pub msg_word: u32,
    /// When the packet's message expires (`None` = never).
    pub expiry: Option<Instant>,
}

impl SendBuffer {
    /// A buffer of `capacity_pkts` packets of `payload_size` bytes; the first message is
    /// number 1.
    pub fn new(capacity_pkts: usize, payload_size: usize) -> SendBuffer {
        SendBuffer { packets: Packets::new(capacity_pkts, payload_size), next_msg: MsgNo::FIRST }
    }

    /// Adds one message. Returns `false` (and stores nothing) if it does not fit.
    ///
    /// # Panics
    /// If the buffer was made with a `payload_size` of 0.
    pub fn push_message(&mut self, data: &[u8], in_order: bool, expiry: Option<Instant>) -> bool {
        let msg = self.next_msg;
        let stored = self.packets.push(data, |i, n| {
            let boundary = match (i == 0, i + 1 == n) {
                (true, true) => Boundary::Solo,
                (true, false) => Boundary::First,
                (false, true) => Boundary::Last,
                (false, false) => Boundary::Middle,
            };
            MsgMeta { msg_word: ((boundary as u32) << 30) | ((in_order as u32) << 29) | msg.get(), expiry }
        });
        if stored {
            self.next_msg = msg.next();
        }
        stored
    }

    /// The packet `offset` places after the oldest stored one.
    #[inline]
    pub fn get(&self, offset: usize) -> Option<Stored<'_>> {
        self.packets.get(offset).map(|(payload, m)| Stored { payload, msg_word: m.msg_word, expiry: m.expiry })
    }

    /// Removes the `n` oldest packets (they were acknowledged).
    pub fn release(&mut self, n: usize) {
        self.packets.release(n)
    }

    /// Offsets (from the oldest) of the first and last packet of the message that the packet
    /// at `offset` belongs to, as far as they are still stored.
    pub fn message_span(&self, offset: usize) -> Option<(usize, usize)> {
        let msg = self.get(offset)?.msg_word & MSG_MAX;
        let same = |o: usize| self.get(o).is_some_and(|p| p.msg_word & MSG_MAX == msg);
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

impl core::ops::Deref for SendBuffer {
    type Target = Packets<MsgMeta>;
    fn deref(&self) -> &Packets<MsgMeta> {
        &self.packets
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
    fn a_message_that_does_not_fit_is_refused_whole_and_keeps_its_number() {
        let mut b = SendBuffer::new(2, 4);
        assert!(!b.push_message(&[0; 9], false, None));
        assert!(b.is_empty());
        assert!(b.push_message(&[], false, None));
        assert_eq!(b.len(), 1);
        assert_eq!(b.get(0).unwrap().msg_word & MSG_MAX, 1);
    }
}
