//! One ring of packet-sized slots under both the send and the receive buffer (UDT4.md §13.3;
//! SABUL.md §5–§6).
//!
//! Payloads are copied in once when they are buffered and read in place when they are sent
//! or delivered: the packet path neither allocates nor copies more than once. A slot is found
//! by its offset from the ring's head (the oldest unacknowledged packet for the sender, the
//! next packet to deliver for the receiver). Each slot carries a small `M` beside its payload:
//! what a protocol keeps per packet (UDT: the message word and the TTL; SABUL and FRTP:
//! nothing, `()`).

/// `capacity` slots of `payload_size` bytes, each with its length and metadata `M`.
#[derive(Debug, Clone)]
pub struct PacketRing<M> {
    payload: usize,
    cap: usize,
    data: Vec<u8>,
    lens: Vec<u16>,
    meta: Vec<M>,
    head: usize,
}

impl<M: Copy + Default> PacketRing<M> {
    /// A ring of `capacity` slots (at least 1) of `payload_size` bytes each.
    pub fn new(capacity: usize, payload_size: usize) -> PacketRing<M> {
        let cap = capacity.max(1);
        PacketRing {
            payload: payload_size,
            cap,
            data: vec![0; cap * payload_size],
            lens: vec![0; cap],
            meta: vec![M::default(); cap],
            head: 0,
        }
    }

    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes one slot holds.
    pub fn payload_size(&self) -> usize {
        self.payload
    }

    #[inline]
    fn slot(&self, offset: usize) -> usize {
        (self.head + offset) % self.cap
    }

    /// Stores `payload` and `meta` in the slot `offset` places after the head.
    ///
    /// # Panics
    /// If `payload` is longer than a slot.
    #[inline]
    pub fn put(&mut self, offset: usize, payload: &[u8], meta: M) {
        let slot = self.slot(offset);
        let at = slot * self.payload;
        self.data[at..at + payload.len()].copy_from_slice(payload);
        self.lens[slot] = payload.len() as u16;
        self.meta[slot] = meta;
    }

    /// The payload stored `offset` places after the head (whatever was last put there).
    #[inline]
    pub fn payload(&self, offset: usize) -> &[u8] {
        let slot = self.slot(offset);
        let at = slot * self.payload;
        &self.data[at..at + self.lens[slot] as usize]
    }

    /// Payload bytes stored `offset` places after the head.
    #[inline]
    pub fn len_at(&self, offset: usize) -> usize {
        self.lens[self.slot(offset)] as usize
    }

    /// The metadata of the slot `offset` places after the head.
    #[inline]
    pub fn meta(&self, offset: usize) -> &M {
        &self.meta[self.slot(offset)]
    }

    /// The metadata of the slot `offset` places after the head, to change it.
    #[inline]
    pub fn meta_mut(&mut self, offset: usize) -> &mut M {
        let slot = self.slot(offset);
        &mut self.meta[slot]
    }

    /// [`payload`](Self::payload) and [`meta`](Self::meta) of one slot.
    #[inline]
    pub fn get(&self, offset: usize) -> (&[u8], &M) {
        let slot = self.slot(offset);
        let at = slot * self.payload;
        (&self.data[at..at + self.lens[slot] as usize], &self.meta[slot])
    }

    /// Moves the head `n` slots on (their contents are forgotten).
    #[inline]
    pub fn advance(&mut self, n: usize) {
        self.head = self.slot(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_addressed_from_the_head_and_wrap() {
        let mut r: PacketRing<u8> = PacketRing::new(3, 4);
        r.put(0, b"ab", 1);
        r.put(2, b"wxyz", 3);
        assert_eq!((r.payload(0), *r.meta(0)), (&b"ab"[..], 1));
        r.advance(2);
        assert_eq!((r.payload(0), r.len_at(0), *r.meta(0)), (&b"wxyz"[..], 4, 3));
        r.put(1, b"c", 9); // the slot that held "ab"
        assert_eq!(r.payload(1), b"c");
        assert_eq!((r.capacity(), r.payload_size()), (3, 4));
    }
}
