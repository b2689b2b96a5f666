//! The TCP control stream, decoded incrementally (SABUL.md §3.2, §3.4, §10).
//!
//! TCP delivers the stream in arbitrary chunks; [`ControlDecoder::decode`] takes bytes from
//! the front of a chunk into a pending buffer that never holds more than one frame, and
//! returns each frame as it completes. What the stream may carry depends on the side that
//! reads it: the sender reads one option block and then frames; the receiver reads one echo
//! and then nothing (§3.2 "the stream carries nothing else").
//!
//! A frame's length is taken from its header only within the session's `max_loss_length`
//! (§3.2 "TC — strict framing"), so the pending buffer is bounded by
//! `8 + 4 · max_loss_length` bytes whatever the peer claims.

use crate::profile::Profile;
use crate::wire::{Control, OptionBlock, WireError, CIRCUIT_OPTION_BLOCK_LEN, CTRL_HEADER_LEN, OPTION_BLOCK_LEN};

/// What the stream carries next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The option block or echo (§3.4): 40 bytes, or FRTP's 52 with `circuit` (FRTP.md §3.3).
    Options { circuit: bool },
    /// Control frames (§3.2), ERRs up to `max_loss_length` words.
    Frames { max_loss_length: u32 },
    /// Nothing more (the receiver after the echo, §3.2).
    Nothing,
}

/// One complete item read from the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// The option block (sender side) or its echo (receiver side), validated (§3.4).
    Options(OptionBlock),
    /// A control frame (§3.2).
    Frame(Control),
}

/// Why the stream broke. Every variant is a protocol error: abort (§10.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamError {
    /// The bytes broke a rule of §3.
    Wire(WireError),
    /// Bytes arrived where the stream must carry nothing (§3.2).
    Unexpected {
        /// How many bytes arrived.
        bytes: usize,
    },
    /// The stream ended inside a frame or block (§3.2 TC: a broken connection, not an end).
    EofMidFrame {
        /// How many bytes of the unfinished frame or block had arrived.
        have: usize,
    },
}

impl core::fmt::Display for StreamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StreamError::Wire(e) => write!(f, "control stream: {e}"),
            StreamError::Unexpected { bytes } => {
                write!(f, "control stream: {bytes} bytes where the peer must send nothing (SABUL.md §3.2); closing")
            }
            StreamError::EofMidFrame { have } => {
                write!(f, "control stream ended {have} bytes into a frame: the connection broke (SABUL.md §3.2, §10)")
            }
        }
    }
}

impl std::error::Error for StreamError {}

impl From<WireError> for StreamError {
    fn from(e: WireError) -> StreamError {
        StreamError::Wire(e)
    }
}

/// Incremental decoder of one side's view of the control stream. See the module docs.
#[derive(Clone, Debug)]
pub struct ControlDecoder {
    expect: Expect,
    /// After the block: what to expect on the sender side (frames) or receiver side (nothing).
    after_options: bool,
    pending: Vec<u8>,
    /// Bytes the current item needs; 0 until its header is known.
    need: usize,
}

impl ControlDecoder {
    /// SABUL's sender decoder: the option block, then frames with the echoed
    /// `max_loss_length` (call [`set_max_loss_length`](Self::set_max_loss_length) after
    /// echoing).
    pub fn sender() -> ControlDecoder {
        ControlDecoder::sender_for(&Profile::SABUL)
    }

    /// SABUL's receiver decoder: the echo, then nothing.
    pub fn receiver() -> ControlDecoder {
        ControlDecoder::receiver_for(&Profile::SABUL)
    }

    /// The sender's decoder for `profile`'s option block.
    pub fn sender_for(profile: &Profile) -> ControlDecoder {
        ControlDecoder::options(profile, true)
    }

    /// The receiver's decoder for `profile`'s echo.
    pub fn receiver_for(profile: &Profile) -> ControlDecoder {
        ControlDecoder::options(profile, false)
    }

    fn options(profile: &Profile, after_options: bool) -> ControlDecoder {
        let circuit = profile.circuit;
        let need = if circuit { CIRCUIT_OPTION_BLOCK_LEN } else { OPTION_BLOCK_LEN };
        ControlDecoder { expect: Expect::Options { circuit }, after_options, pending: Vec::new(), need }
    }

    /// A decoder that reads frames from the start (tests, the fuzzer).
    pub fn frames(max_loss_length: u32) -> ControlDecoder {
        ControlDecoder { expect: Expect::Frames { max_loss_length }, after_options: true, pending: Vec::new(), need: 0 }
    }

    /// The session's limit on ERR words, from the echo (§3.4).
    pub fn set_max_loss_length(&mut self, max_loss_length: u32) {
        if let Expect::Frames { .. } = self.expect {
            self.expect = Expect::Frames { max_loss_length };
        }
    }

    /// Whether part of an item has arrived and the rest has not (the 1 s frame timeout of
    /// §10.3 runs).
    pub fn is_mid_frame(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes bytes from the front of `input` until one item completes, and returns it;
    /// `Ok(None)` once `input` is used up without completing one. After an error the stream
    /// is broken and the decoder should be dropped.
    pub fn decode(&mut self, input: &mut &[u8]) -> Result<Option<Decoded>, StreamError> {
        loop {
            match self.expect {
                Expect::Nothing if !input.is_empty() => return Err(StreamError::Unexpected { bytes: input.len() }),
                Expect::Nothing => return Ok(None),
                Expect::Frames { .. } if self.need == 0 => self.need = CTRL_HEADER_LEN,
                _ => {}
            }
            let take = (self.need - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            *input = &input[take..];
            if self.pending.len() < self.need {
                return Ok(None);
            }
            match self.expect {
                Expect::Options { circuit } => {
                    let o = OptionBlock::parse_as(&self.pending, circuit)?;
                    self.pending.clear();
                    self.need = 0;
                    self.expect = if self.after_options {
                        Expect::Frames { max_loss_length: o.max_loss_length }
                    } else {
                        Expect::Nothing
                    };
                    return Ok(Some(Decoded::Options(o)));
                }
                Expect::Frames { max_loss_length } => {
                    if self.pending.len() == CTRL_HEADER_LEN && self.need == CTRL_HEADER_LEN {
                        let header: [u8; CTRL_HEADER_LEN] = self.pending[..].try_into().expect("8 bytes");
                        self.need = Control::frame_len(&header, max_loss_length)?;
                        if self.need > CTRL_HEADER_LEN {
                            continue;
                        }
                    }
                    let c = Control::parse(&self.pending, max_loss_length)?;
                    self.pending.clear();
                    self.need = 0;
                    return Ok(Some(Decoded::Frame(c)));
                }
                Expect::Nothing => unreachable!("handled above"),
            }
        }
    }

    /// The stream ended (FIN): an error when it ended inside an item (§3.2 TC, §10).
    pub fn finish(&self) -> Result<(), StreamError> {
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(StreamError::EofMidFrame { have: self.pending.len() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::LossWords;
    use proptest::prelude::*;
    use transfer::seq::SeqNo;

    fn stream() -> (Vec<u8>, Vec<Decoded>) {
        let o = OptionBlock::new(7001, 7000, 1472);
        let frames = vec![
            Control::Ack(SeqNo::new(1024)),
            Control::Err(LossWords::new(vec![100, 0x8000_00c8, 203, 300]).unwrap()),
            Control::Syn(1000),
        ];
        let mut bytes = Vec::new();
        o.emit(&mut bytes);
        frames.iter().for_each(|f| f.emit(&mut bytes));
        let mut want = vec![Decoded::Options(o)];
        want.extend(frames.into_iter().map(Decoded::Frame));
        (bytes, want)
    }

    fn decode_in_chunks(d: &mut ControlDecoder, bytes: &[u8], chunk: usize) -> Result<Vec<Decoded>, StreamError> {
        let mut out = Vec::new();
        for mut c in bytes.chunks(chunk.max(1)) {
            while let Some(x) = d.decode(&mut c)? {
                out.push(x);
            }
        }
        Ok(out)
    }

    #[test]
    fn frames_split_at_every_byte_boundary_decode_the_same() {
        let (bytes, want) = stream();
        for chunk in 1..=bytes.len() {
            let mut d = ControlDecoder::sender();
            assert_eq!(decode_in_chunks(&mut d, &bytes, chunk).unwrap(), want, "chunk {chunk}");
            assert_eq!(d.finish(), Ok(()));
        }
    }

    #[test]
    fn eof_inside_a_frame_is_a_broken_connection() {
        let (bytes, _) = stream();
        let mut d = ControlDecoder::sender();
        decode_in_chunks(&mut d, &bytes[..bytes.len() - 3], 7).unwrap();
        assert!(d.is_mid_frame());
        assert_eq!(d.finish(), Err(StreamError::EofMidFrame { have: 5 }));
    }

    #[test]
    fn a_billion_word_err_fails_on_its_header_with_nothing_buffered() {
        let mut d = ControlDecoder::frames(366);
        let mut input: &[u8] = &[0, 0, 0, 2, 0x3b, 0x9a, 0xca, 0x00, 1, 2, 3];
        let e = d.decode(&mut input).unwrap_err();
        assert!(matches!(e, StreamError::Wire(WireError::ErrLength { words: 1_000_000_000, .. })));
        assert!(d.pending.capacity() <= 64);
    }

    #[test]
    fn the_echo_lowers_the_err_limit_the_sender_enforces() {
        let mut d = ControlDecoder::sender();
        let mut b = Vec::new();
        OptionBlock::new(7001, 7000, 1472).emit(&mut b);
        decode_in_chunks(&mut d, &b, 40).unwrap();
        d.set_max_loss_length(254);
        let mut frame: &[u8] = &[0, 0, 0, 2, 0, 0, 0, 255];
        assert!(matches!(d.decode(&mut frame), Err(StreamError::Wire(WireError::ErrLength { words: 255, .. }))));
    }

    #[test]
    fn the_receiver_accepts_nothing_after_the_echo() {
        let mut d = ControlDecoder::receiver();
        let mut b = Vec::new();
        OptionBlock::new(7001, 7000, 1472).emit(&mut b);
        b.extend_from_slice(&[0, 0, 0, 1]);
        let mut input = &b[..];
        assert!(matches!(d.decode(&mut input), Ok(Some(Decoded::Options(_)))));
        assert_eq!(d.decode(&mut input), Err(StreamError::Unexpected { bytes: 4 }));
    }

    proptest! {
        #[test]
        fn decoder_never_panics_and_stays_bounded(bytes in prop::collection::vec(any::<u8>(), 0..2048), chunk in 1usize..64, sender in any::<bool>()) {
            let mut d = if sender { ControlDecoder::sender() } else { ControlDecoder::frames(366) };
            let _ = decode_in_chunks(&mut d, &bytes, chunk);
            prop_assert!(d.pending.len() <= 8 + 4 * 366);
            let _ = d.finish();
        }

        #[test]
        fn whatever_decodes_re_emits_identically(words in prop::collection::vec(any::<u32>(), 0..64)) {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
            let mut d = ControlDecoder::frames(366);
            if let Ok(items) = decode_in_chunks(&mut d, &bytes, 5) {
                let mut again = Vec::new();
                for i in &items {
                    if let Decoded::Frame(f) = i { f.emit(&mut again) }
                }
                prop_assert_eq!(&again[..], &bytes[..again.len()]);
            }
        }
    }
}
