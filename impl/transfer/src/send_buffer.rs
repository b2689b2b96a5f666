//! The sender's buffer of unacknowledged and unsent packets (UDT4.md §7, §13.3; SABUL.md §5).
//!
//! Application data is cut into payload-sized packets when it is added and kept in a
//! [`PacketRing`] until an ACK releases it: the packet at offset `k` is the `k`-th after the
//! oldest unacknowledged one, so a sequence number finds its packet by its distance from the
//! last ACK. What a protocol keeps per packet rides along as `M` (UDT's message layer,
//! `udt_proto::send_buffer`, keeps the message word and the TTL).

use crate::ring::PacketRing;

/// The packets sent and not yet acknowledged, then those not yet sent, oldest first (see the
/// [module docs](self)).
#[derive(Debug, Clone)]
pub struct SendBuffer<M> {
    ring: PacketRing<M>,
    count: usize,
    bytes: usize,
}

impl<M: Copy + Default> SendBuffer<M> {
    /// A buffer of `capacity_pkts` (at least 2) packets of `payload_size` bytes.
    pub fn new(capacity_pkts: usize, payload_size: usize) -> SendBuffer<M> {
        SendBuffer { ring: PacketRing::new(capacity_pkts.max(2), payload_size), count: 0, bytes: 0 }
    }

    /// Payload bytes of one packet (a full packet's data).
    pub fn payload_size(&self) -> usize {
        self.ring.payload_size()
    }

    /// Packets stored (acknowledged ones are removed).
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no packet is stored.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Payload bytes stored.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Packets that may still be added.
    pub fn free_packets(&self) -> usize {
        self.ring.capacity() - self.count
    }

    /// Bytes a stream `send` may add now.
    pub fn free_bytes(&self) -> usize {
        self.free_packets() * self.payload_size()
    }

    /// Packets needed for `len` bytes (an empty piece of data still takes one).
    ///
    /// # Panics
    /// If the buffer was made with a `payload_size` of 0.
    pub fn packets_for(&self, len: usize) -> usize {
        len.div_ceil(self.payload_size()).max(1)
    }

    /// Cuts `data` into payload-sized packets (at least one) and appends them all, or nothing
    /// if they do not fit. `meta(i, n)` gives the metadata of packet `i` of `n`.
    ///
    /// # Panics
    /// If the buffer was made with a `payload_size` of 0.
    pub fn push(&mut self, data: &[u8], mut meta: impl FnMut(usize, usize) -> M) -> bool {
        let n = self.packets_for(data.len());
        if n > self.free_packets() {
            return false;
        }
        let mut chunks = data.chunks(self.payload_size());
        for i in 0..n {
            let chunk = chunks.next().unwrap_or(&[]);
            self.ring.put(self.count, chunk, meta(i, n));
            self.count += 1;
            self.bytes += chunk.len();
        }
        true
    }

    /// The packet `offset` places after the oldest stored one, with its metadata.
    #[inline]
    pub fn get(&self, offset: usize) -> Option<(&[u8], &M)> {
        (offset < self.count).then(|| self.ring.get(offset))
    }

    /// Removes the `n` oldest packets (they were acknowledged).
    pub fn release(&mut self, n: usize) {
        let n = n.min(self.count);
        for i in 0..n {
            self.bytes -= self.ring.len_at(i);
        }
        self.ring.advance(n);
        self.count -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_cut_into_payload_pieces_and_released_from_the_front() {
        let mut b: SendBuffer<(usize, usize)> = SendBuffer::new(8, 4);
        assert!(b.push(b"abcdefghij", |i, n| (i, n)));
        assert_eq!(b.len(), 3);
        assert_eq!(b.get(0), Some((&b"abcd"[..], &(0, 3))));
        assert_eq!(b.get(2), Some((&b"ij"[..], &(2, 3))));
        assert_eq!(b.get(3), None);
        b.release(2);
        assert_eq!((b.len(), b.bytes()), (1, 2));
        assert_eq!(b.get(0).unwrap().0, b"ij");
    }

    #[test]
    fn data_that_does_not_fit_is_refused_whole() {
        let mut b: SendBuffer<()> = SendBuffer::new(2, 4);
        assert!(!b.push(&[0; 9], |_, _| ()));
        assert!(b.is_empty());
        assert!(b.push(&[], |_, _| ()));
        assert_eq!((b.len(), b.free_packets(), b.free_bytes()), (1, 1, 4));
    }

    #[test]
    fn ring_wraps() {
        let mut b: SendBuffer<()> = SendBuffer::new(3, 2);
        for round in 0..10u8 {
            assert!(b.push(&[round, round], |_, _| ()));
            assert!(b.push(&[round], |_, _| ()));
            assert_eq!(b.get(1).unwrap().0, &[round]);
            b.release(2);
        }
    }
}
