//! UDT's message numbers and ACK sub-sequence numbers (UDT4.md §3.1, §5.3). Data sequence
//! numbers are the family's, [`transfer::seq::SeqNo`].

use transfer::seq::SEQ_MAX;

/// Largest message number (29 bits).
pub const MSG_MAX: u32 = 0x1FFF_FFFF;

/// A 29-bit message number (UDT4.md §3.1). 4.11 starts at 1 and never uses 0 or `MSG_MAX`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct MsgNo(u32);

impl MsgNo {
    /// The first message number 4.11 allocates.
    pub const FIRST: MsgNo = MsgNo(1);

    /// Wraps `raw` into the 29-bit space (the top three bits are discarded).
    #[inline]
    pub const fn new(raw: u32) -> MsgNo {
        MsgNo(raw & MSG_MAX)
    }

    /// The number as it goes on the wire.
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Next message number as 4.11's sender allocates them: restarts at 1 before reaching
    /// `MSG_MAX`.
    #[inline]
    pub fn next(self) -> MsgNo {
        if self.0 + 1 >= MSG_MAX {
            MsgNo(1)
        } else {
            MsgNo(self.0 + 1)
        }
    }
}

/// ACK sub-sequence number (31-bit; first full ACK carries 1; light ACKs carry 0).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct AckNo(u32);

impl AckNo {
    /// Wraps `raw` into the 31-bit space (the top bit is discarded).
    #[inline]
    pub const fn new(raw: u32) -> AckNo {
        AckNo(raw & SEQ_MAX)
    }

    /// The number as it goes on the wire.
    #[inline]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// 4.11 `incack`.
    #[inline]
    pub fn next(self) -> AckNo {
        AckNo(if self.0 == SEQ_MAX { 0 } else { self.0 + 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_numbers_skip_zero_and_max() {
        assert_eq!(MsgNo::new(MSG_MAX - 1).next(), MsgNo::FIRST);
        assert_eq!(MsgNo::FIRST.next(), MsgNo::new(2));
    }
}
