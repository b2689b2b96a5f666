//! UDT's messages over the family's receive buffer (UDT4.md §3.1, §5.8, §8.2, §13.3).
//!
//! Each slot keeps word 1 of its data header; a message drop request (§5.8) skips the
//! dropped message's slots, and [`RecvBuffer::read_message`] delivers whole messages. The
//! stream reader and the window are the family's ([`transfer::recv_buffer::RecvBuffer`],
//! reads through `Deref`).

use crate::seq::MSG_MAX;
use crate::wire::Boundary;
use transfer::recv_buffer::{Insert, RecvBuffer as Window, Slot};
use transfer::seq::SeqNo;

/// The receive window with word 1 of each packet's data header: messages, drops and the
/// stream reader (see the [module docs](self)).
#[derive(Debug)]
pub struct RecvBuffer {
    window: Window<u32>,
}

impl RecvBuffer {
    /// A window of `capacity_pkts` (at least 32, as 4.11) packets whose first is `first_seq`.
    pub fn new(capacity_pkts: usize, payload_size: usize, first_seq: SeqNo) -> RecvBuffer {
        RecvBuffer { window: Window::new(capacity_pkts.max(32), payload_size, first_seq) }
    }

    /// Stores a data packet, keeping its message word for [`read_message`](Self::read_message).
    pub fn insert(&mut self, seq: SeqNo, msg_word: u32, payload: &[u8]) -> Insert {
        self.window.insert(seq, payload, msg_word)
    }

    /// Marks every packet up to (excluding) `ack` readable (an ACK was sent for it).
    pub fn acknowledge(&mut self, ack: SeqNo) {
        self.window.acknowledge(ack)
    }

    /// Marks stored packets of message `msg` within `[first, last]` dropped (§5.8).
    pub fn drop_message(&mut self, msg: u32, first: SeqNo, last: SeqNo) {
        self.window.skip(first, last, |&word| word & MSG_MAX == msg)
    }

    /// STREAM read: copies acknowledged bytes in order, returns the count.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        self.window.read(out)
    }

    /// DGRAM read: the next complete message (in order; dropped messages are skipped).
    /// Returns `Some(len)`; a message longer than `out` is truncated to `out.len()` and the
    /// rest discarded, like 4.11's `recvmsg`.
    pub fn read_message(&mut self, out: &mut [u8]) -> Option<usize> {
        let w = &mut self.window;
        let boundary = |w: &Window<u32>, i: usize| Boundary::from_bits(w.slot(i).1 >> 30);
        loop {
            let readable = w.readable();
            if readable == 0 {
                return None;
            }
            if w.slot(0).0 != Slot::Full {
                w.consume(1);
                continue;
            }
            // Find the end of this message within the readable region.
            let mut n = 0;
            let mut complete = false;
            let mut dropped = false;
            while n < readable {
                if w.slot(n).0 != Slot::Full {
                    dropped = true;
                }
                let b = boundary(w, n);
                n += 1;
                if b.is_last() {
                    complete = true;
                    break;
                }
                if n < readable && boundary(w, n).is_first() && w.slot(n).0 == Slot::Full {
                    // The message's last packet never came: treat as broken, skip it.
                    dropped = true;
                    complete = true;
                    break;
                }
            }
            if !complete {
                return None;
            }
            if dropped || !boundary(w, 0).is_first() {
                w.consume(n);
                continue;
            }
            let mut done = 0;
            for i in 0..n {
                let payload = w.slot(i).2;
                let take = payload.len().min(out.len() - done);
                out[done..done + take].copy_from_slice(&payload[..take]);
                done += take;
            }
            w.consume(n);
            return Some(done);
        }
    }
}

impl core::ops::Deref for RecvBuffer {
    type Target = Window<u32>;
    fn deref(&self) -> &Window<u32> {
        &self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_message_missing_its_last_packet_is_skipped() {
        let mut b = RecvBuffer::new(32, 2, SeqNo::new(0));
        b.insert(SeqNo::new(0), 0x8000_0001, b"ab"); // first of message 1, whose last never came
        b.insert(SeqNo::new(1), 0xC000_0002, b"ok");
        b.acknowledge(SeqNo::new(2));
        let mut out = [0; 8];
        assert_eq!(b.read_message(&mut out), Some(2));
        assert_eq!(&out[..2], b"ok");
    }
}
