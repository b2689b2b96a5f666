//! SABUL's wire (SABUL.md §3): the DATA datagram (UDP), the control frames ACK, ERR and SYN
//! (TCP) and the option block with its echo (TCP). FRTP uses the same wire with three more
//! option words, the data-path address and the rate ([`Circuit`], FRTP.md §3.3).
//!
//! Every integer on both channels is a 32-bit big-endian word (§1, TC 1). Field offsets live
//! in [`field`]. Parsing is strict and checks lengths first: once a `parse` returned `Ok`,
//! nothing that reads the result panics, and no length claimed by the peer is trusted beyond
//! the session's limits (§3.2 "TC — strict framing").

use core::fmt;
use std::net::Ipv4Addr;

use transfer::loss_list::{decode_loss, encode_loss, LossError};
use transfer::seq::SeqNo;

/// Field offsets, in bytes, of every SABUL structure.
pub mod field {
    /// DATA: the sequence number word (§3.1).
    pub const DATA_SEQ: core::ops::Range<usize> = 0..4;
    /// DATA: the payload, to the end of the datagram (§3.1).
    pub const DATA_PAYLOAD: usize = 4;
    /// Control frame: the packet type (§3.2).
    pub const CTRL_TYPE: core::ops::Range<usize> = 0..4;
    /// Control frame: the attribute (§3.2).
    pub const CTRL_ATTR: core::ops::Range<usize> = 4..8;
    /// Control frame: the ERR loss list (§3.2).
    pub const CTRL_BODY: usize = 8;
}

/// Bytes of a DATA header (§3.1).
pub const DATA_HEADER_LEN: usize = 4;
/// Bytes of a control frame header (§3.2).
pub const CTRL_HEADER_LEN: usize = 8;
/// Bytes of the option block and of its echo (§3.4).
pub const OPTION_BLOCK_LEN: usize = 40;
/// Bytes of FRTP's option block: SABUL's and [`Circuit`]'s three words (FRTP.md §3.3).
pub const CIRCUIT_OPTION_BLOCK_LEN: usize = 52;
/// Bytes a full DATA packet has below its UDP payload (IPv4 + UDP headers): FRTP's IPT is
/// taken from the IP-level size (FRTP.md §4).
pub const IP_UDP_HEADER_LEN: u32 = 28;

/// Control packet types (§3.2). Type 3 (EXP) is the sender's internal event, never on the wire.
pub mod ctrl_type {
    /// Acknowledgement: everything before the attribute received.
    pub const ACK: u32 = 1;
    /// Error report: the loss list.
    pub const ERR: u32 = 2;
    /// The sender's timeout event; never on the wire.
    pub const EXP: u32 = 3;
    /// Synchronisation: the receiver's count of DATA datagrams since the last SYN.
    pub const SYN: u32 = 4;
}

/// Default UDP payload of a full DATA packet (§3.1, §9).
pub const DEFAULT_PKT_SIZE: u32 = 1472;
/// The smallest `pkt_size` an option block may carry (§3.4 "TC — validity"): room for an ERR of
/// 6 words.
pub const MIN_PKT_SIZE: u32 = 32;
/// The largest `pkt_size` an option block may carry: the largest UDP payload over IPv4.
pub const MAX_PKT_SIZE: u32 = 65_507;
/// Default receiver reorder window, packets = the sender's maximum flow window (§3.4, §9).
pub const DEFAULT_RECV_FLAG_SIZE: u32 = 25_600;
/// Default protocol buffers, bytes (§3.4, §9).
pub const DEFAULT_BUF_SIZE: u32 = 40_960_000;

#[inline]
fn word(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// What was wrong with bytes from the peer. Every variant is a protocol error (§3.2, §3.4,
/// §5.5); the session's reaction is an abort (§10.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// A DATA datagram of fewer than 5 bytes (§3.1 TC): no sequence number and payload.
    DataTooShort {
        /// The datagram's length.
        len: usize,
    },
    /// A DATA datagram longer than the session's `pkt_size` (§3.1 TC).
    DataTooLong {
        /// The datagram's length.
        len: usize,
        /// The session's `pkt_size`.
        pkt_size: u32,
    },
    /// A DATA header with bit 31 set (§3.1 TC: sequence numbers are 31-bit).
    DataFlagSet,
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes the structure needs.
        need: usize,
        /// Bytes there were.
        have: usize,
    },
    /// A control type other than ACK (1), ERR (2), SYN (4) (§3.2 TC; 3 = EXP is internal).
    UnknownType(u32),
    /// An ERR whose attribute is 0 or claims more words than the session's `max_loss_length`
    /// (§3.2 TC): rejected from the header alone, nothing is allocated on its strength.
    ErrLength {
        /// The words the attribute claims.
        words: u32,
        /// The session's limit.
        max_loss_length: u32,
    },
    /// An ERR whose loss list does not decode (§3.3, §5.5).
    ErrList(LossError),
    /// An ACK whose attribute has bit 31 set: not a sequence number (§4).
    AckNotASequence(u32),
    /// An option block or echo that breaks a rule of §3.4 "TC — validity" (or, for `data_ip`
    /// and `rate_bps`, of FRTP.md §3.3).
    BadOption {
        /// The field's name in the block (§3.4).
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// An echo that differs from the block where it must not, or raises the packet size (§3.4).
    EchoMismatch {
        /// The field's name in the block (§3.4).
        field: &'static str,
        /// Its value in the block sent.
        sent: u64,
        /// Its value in the echo.
        echoed: u64,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::DataTooShort { len } => {
                write!(
                    f,
                    "DATA datagram of {len} bytes: a DATA packet has a 4-byte header and a payload (SABUL.md §3.1)"
                )
            }
            WireError::DataTooLong { len, pkt_size } => {
                write!(f, "DATA datagram of {len} bytes exceeds the session's packet size {pkt_size} (SABUL.md §3.1)")
            }
            WireError::DataFlagSet => write!(f, "DATA header has bit 31 set (SABUL.md §3.1)"),
            WireError::Truncated { need, have } => {
                write!(f, "truncated: {have} of {need} bytes (SABUL.md §3.2, §3.4)")
            }
            WireError::UnknownType(t) => {
                write!(f, "unknown control type {t}: only ACK (1), ERR (2) and SYN (4) travel on the control stream (SABUL.md §3.2); closing")
            }
            WireError::ErrLength { words, max_loss_length } => {
                write!(
                    f,
                    "ERR claims {words} loss words; the session allows 1..={max_loss_length} (SABUL.md §3.2); closing"
                )
            }
            WireError::ErrList(e) => write!(f, "ERR loss list: {e} (SABUL.md §3.3)"),
            WireError::AckNotASequence(a) => {
                write!(f, "ACK attribute {a:#x} is not a 31-bit sequence number (SABUL.md §4)")
            }
            WireError::BadOption { field, value } => {
                write!(f, "option block field {field} = {value} breaks {} validity; closing", section(field))
            }
            WireError::EchoMismatch { field, sent, echoed } => {
                write!(f, "option echo changed {field} from {sent} to {echoed} ({}); closing", section(field))
            }
        }
    }
}

impl std::error::Error for WireError {}

/// Where an option field is specified.
fn section(field: &str) -> &'static str {
    match field {
        "data_ip" | "rate_bps" => "FRTP.md §3.3",
        _ => "SABUL.md §3.4",
    }
}

/// A zero-copy view of a DATA datagram (§3.1). [`DataPacket::new_checked`] checks the length
/// and the header; after it, no accessor panics.
#[derive(Clone, Copy, Debug)]
pub struct DataPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> DataPacket<T> {
    /// Checks that `buffer` is a DATA packet by §3.1 for a session whose packet size (the
    /// echoed `pkt_size`) is `pkt_size`: at least 5 bytes, at most `pkt_size`, bit 31 clear.
    pub fn new_checked(buffer: T, pkt_size: u32) -> Result<DataPacket<T>, WireError> {
        let b = buffer.as_ref();
        if b.len() <= DATA_HEADER_LEN {
            return Err(WireError::DataTooShort { len: b.len() });
        }
        if b.len() > pkt_size as usize {
            return Err(WireError::DataTooLong { len: b.len(), pkt_size });
        }
        if word(b, field::DATA_SEQ.start) & 0x8000_0000 != 0 {
            return Err(WireError::DataFlagSet);
        }
        Ok(DataPacket { buffer })
    }

    /// The 31-bit sequence number (§3.1 word 0).
    pub fn seq(&self) -> SeqNo {
        SeqNo::new(word(self.buffer.as_ref(), field::DATA_SEQ.start))
    }

    /// The application bytes after the sequence number.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA_PAYLOAD..]
    }
}

/// Writes a DATA packet (§3.1) into `out`; returns its length. `out` must hold
/// `4 + payload.len()` bytes.
pub fn emit_data(seq: SeqNo, payload: &[u8], out: &mut [u8]) -> usize {
    out[field::DATA_SEQ].copy_from_slice(&seq.get().to_be_bytes());
    out[field::DATA_PAYLOAD..field::DATA_PAYLOAD + payload.len()].copy_from_slice(payload);
    DATA_HEADER_LEN + payload.len()
}

/// A control frame (§3.2), receiver → sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Everything before this number was received (§3.2, §6 ACK timer).
    Ack(SeqNo),
    /// A loss report: its loss words as sent (§3.3), checked to decode and to be
    /// `1..=max_loss_length` long.
    Err(LossWords),
    /// DATA datagrams counted on arrival since the previous SYN (§3.2 TC).
    Syn(u32),
}

/// The loss words of an ERR (§3.3), known to decode. Kept as words so that an uncompressed
/// ([C]-faithful) list re-emits byte for byte.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LossWords(Vec<u32>);

impl LossWords {
    /// Checks that `words` decode (§3.3).
    pub fn new(words: Vec<u32>) -> Result<LossWords, LossError> {
        decode_loss(&words)?;
        Ok(LossWords(words))
    }

    /// Encodes `ranges` with UDT's compression (§3.3 TC), at most `max_words` words; `None`
    /// when not even the first range fits or there is none.
    pub fn encode(ranges: impl IntoIterator<Item = (SeqNo, SeqNo)>, max_words: usize) -> Option<LossWords> {
        let mut w = Vec::new();
        encode_loss(ranges, max_words, &mut w);
        (!w.is_empty()).then_some(LossWords(w))
    }

    /// The words as on the wire (§3.3).
    pub fn words(&self) -> &[u32] {
        &self.0
    }

    /// The inclusive ranges, in the order sent.
    pub fn ranges(&self) -> Vec<(SeqNo, SeqNo)> {
        decode_loss(&self.0).unwrap_or_default()
    }

    /// Lost packets the list names (§12: this count feeds the sender's `lost`).
    pub fn lost_count(&self) -> u32 {
        self.ranges().iter().map(|&(a, b)| a.len_to(b)).sum()
    }
}

impl Control {
    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Control::Err(l) => CTRL_HEADER_LEN + 4 * l.0.len(),
            _ => CTRL_HEADER_LEN,
        }
    }

    /// Appends the frame to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let (ty, attr) = match self {
            Control::Ack(a) => (ctrl_type::ACK, a.get()),
            Control::Err(l) => (ctrl_type::ERR, l.0.len() as u32),
            Control::Syn(n) => (ctrl_type::SYN, *n),
        };
        out.extend_from_slice(&ty.to_be_bytes());
        out.extend_from_slice(&attr.to_be_bytes());
        if let Control::Err(l) = self {
            for w in &l.0 {
                out.extend_from_slice(&w.to_be_bytes());
            }
        }
    }

    /// From a frame header: how many bytes the whole frame has, or why the header alone is a
    /// protocol error (§3.2 TC: unknown type, ERR attribute 0 or above `max_loss_length`).
    pub fn frame_len(header: &[u8; CTRL_HEADER_LEN], max_loss_length: u32) -> Result<usize, WireError> {
        let (ty, attr) = (word(header, 0), word(header, 4));
        match ty {
            ctrl_type::ACK | ctrl_type::SYN => Ok(CTRL_HEADER_LEN),
            ctrl_type::ERR if attr == 0 || attr > max_loss_length => {
                Err(WireError::ErrLength { words: attr, max_loss_length })
            }
            ctrl_type::ERR => Ok(CTRL_HEADER_LEN + 4 * attr as usize),
            other => Err(WireError::UnknownType(other)),
        }
    }

    /// Parses exactly one frame (§3.2) occupying all of `b`.
    pub fn parse(b: &[u8], max_loss_length: u32) -> Result<Control, WireError> {
        let header: &[u8; CTRL_HEADER_LEN] = b
            .get(..CTRL_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(WireError::Truncated { need: CTRL_HEADER_LEN, have: b.len() })?;
        let need = Control::frame_len(header, max_loss_length)?;
        if b.len() != need {
            return Err(WireError::Truncated { need, have: b.len() });
        }
        let attr = word(b, field::CTRL_ATTR.start);
        Ok(match word(b, field::CTRL_TYPE.start) {
            ctrl_type::ACK if attr & 0x8000_0000 != 0 => return Err(WireError::AckNotASequence(attr)),
            ctrl_type::ACK => Control::Ack(SeqNo::new(attr)),
            ctrl_type::SYN => Control::Syn(attr),
            _ => {
                let words = b[field::CTRL_BODY..].chunks_exact(4).map(|c| word(c, 0)).collect();
                Control::Err(LossWords::new(words).map_err(WireError::ErrList)?)
            }
        })
    }
}

/// The option block (§3.4): ten big-endian words, receiver → sender, then echoed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionBlock {
    /// Word 0: the receiver's UDP data port.
    pub data_port: u32,
    /// Word 1: the sender's TCP port as dialled (informational).
    pub ctrl_port: u32,
    /// Word 2: the UDP payload size of a full DATA packet.
    pub pkt_size: u32,
    /// Word 3: `pkt_size − 4`, the application bytes of a full packet.
    pub payload_size: u32,
    /// Word 4: the most words an ERR may carry, `⌊pkt_size / 4⌋ − 2`.
    pub max_loss_length: u32,
    /// Word 5: the receiver's API mode, 0 or 1 (informational).
    pub blockable: u32,
    /// Word 6: the send buffer, bytes (informational).
    pub send_buf_size: u32,
    /// Word 7: the receiver's protocol buffer, bytes (informational).
    pub recv_buf_size: u32,
    /// Word 8: the receiver's reorder window in packets, the sender's maximum flow window.
    pub recv_flag_size: u32,
    /// Word 9: must be 0.
    pub reserved: u32,
    /// FRTP's words 10–12 (FRTP.md §3.3); `None` in SABUL's 40-byte block.
    pub circuit: Option<Circuit>,
}

/// FRTP's additions to the option block (FRTP.md §3.3): where the sender sends DATA and at
/// which fixed rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Circuit {
    /// Word 10: the receiver's IPv4 address on the data path; `0.0.0.0` = the control
    /// peer's address (FRTP.md §2 step 5).
    pub data_ip: Ipv4Addr,
    /// Words 11–12: the sending rate, bit/s, never changed after the exchange (FRTP.md §2).
    pub rate_bps: u64,
}

impl Circuit {
    /// FRTP's inter-packet time, µs, for packets of `pkt_size` UDP bytes: the IP-level
    /// size of a full packet at the rate, constant for the session (FRTP.md §4, TC 3).
    pub fn ipt_us(&self, pkt_size: u32) -> f64 {
        f64::from(pkt_size + IP_UDP_HEADER_LEN) * 8.0 * 1e6 / self.rate_bps as f64
    }
}

impl OptionBlock {
    /// A receiver's block with the defaults of §3.4 and §9 for packet size `pkt_size`.
    pub fn new(data_port: u16, ctrl_port: u16, pkt_size: u32) -> OptionBlock {
        OptionBlock {
            data_port: data_port.into(),
            ctrl_port: ctrl_port.into(),
            pkt_size,
            payload_size: pkt_size.wrapping_sub(4),
            max_loss_length: (pkt_size / 4).wrapping_sub(2),
            blockable: 0,
            send_buf_size: DEFAULT_BUF_SIZE,
            recv_buf_size: DEFAULT_BUF_SIZE,
            recv_flag_size: DEFAULT_RECV_FLAG_SIZE,
            reserved: 0,
            circuit: None,
        }
    }

    /// Bytes of the block on the stream: 40, or 52 with FRTP's words (FRTP.md §3.3).
    pub fn buffer_len(&self) -> usize {
        if self.circuit.is_some() {
            CIRCUIT_OPTION_BLOCK_LEN
        } else {
            OPTION_BLOCK_LEN
        }
    }

    fn words(&self) -> [u32; 10] {
        [
            self.data_port,
            self.ctrl_port,
            self.pkt_size,
            self.payload_size,
            self.max_loss_length,
            self.blockable,
            self.send_buf_size,
            self.recv_buf_size,
            self.recv_flag_size,
            self.reserved,
        ]
    }

    /// Appends the block's ten words, big-endian (and FRTP's three when it has a circuit).
    pub fn emit(&self, out: &mut Vec<u8>) {
        for w in self.words() {
            out.extend_from_slice(&w.to_be_bytes());
        }
        if let Some(c) = self.circuit {
            out.extend_from_slice(&c.data_ip.octets());
            out.extend_from_slice(&c.rate_bps.to_be_bytes());
        }
    }

    /// Parses and validates SABUL's 40 bytes (§3.4 "TC — validity").
    pub fn parse(b: &[u8]) -> Result<OptionBlock, WireError> {
        OptionBlock::parse_as(b, false)
    }

    /// Parses and validates a block of the layout a profile expects: SABUL's 40 bytes, or
    /// with `circuit` FRTP's 52 (FRTP.md §3.3).
    pub fn parse_as(b: &[u8], circuit: bool) -> Result<OptionBlock, WireError> {
        let need = if circuit { CIRCUIT_OPTION_BLOCK_LEN } else { OPTION_BLOCK_LEN };
        if b.len() != need {
            return Err(WireError::Truncated { need, have: b.len() });
        }
        let w = |i: usize| word(b, 4 * i);
        let o = OptionBlock {
            data_port: w(0),
            ctrl_port: w(1),
            pkt_size: w(2),
            payload_size: w(3),
            max_loss_length: w(4),
            blockable: w(5),
            send_buf_size: w(6),
            recv_buf_size: w(7),
            recv_flag_size: w(8),
            reserved: w(9),
            circuit: circuit.then(|| Circuit {
                data_ip: Ipv4Addr::from(w(10)),
                rate_bps: u64::from(w(11)) << 32 | u64::from(w(12)),
            }),
        };
        o.validate()?;
        Ok(o)
    }

    /// The rules of §3.4 "TC — validity", and FRTP.md §3.3's for the circuit words.
    pub fn validate(&self) -> Result<(), WireError> {
        let bad = |field, value: u32| Err(WireError::BadOption { field, value: value.into() });
        if !(1..=65_535).contains(&self.data_port) {
            return bad("data_port", self.data_port);
        }
        if self.ctrl_port > 65_535 {
            return bad("ctrl_port", self.ctrl_port);
        }
        if !(MIN_PKT_SIZE..=MAX_PKT_SIZE).contains(&self.pkt_size) {
            return bad("pkt_size", self.pkt_size);
        }
        if self.payload_size != self.pkt_size - 4 {
            return bad("payload_size", self.payload_size);
        }
        if self.max_loss_length != self.pkt_size / 4 - 2 {
            return bad("max_loss_length", self.max_loss_length);
        }
        if self.blockable > 1 {
            return bad("blockable", self.blockable);
        }
        if !(1..(1 << 30)).contains(&self.recv_flag_size) {
            return bad("recv_flag_size", self.recv_flag_size);
        }
        if self.reserved != 0 {
            return bad("reserved", self.reserved);
        }
        if let Some(c) = self.circuit {
            // FRTP.md §3.3 TC: DATA is unicast, and at some rate. A rate above what the
            // sender can honour is valid here; that sender refuses it (§2 step 3).
            if c.data_ip.is_multicast() || c.data_ip.is_broadcast() {
                return bad("data_ip", c.data_ip.into());
            }
            if c.rate_bps == 0 {
                return Err(WireError::BadOption { field: "rate_bps", value: c.rate_bps });
            }
        }
        Ok(())
    }

    /// The sender's echo (§3.4 "TC — the echo when the sender lowers the packet size"):
    /// `pkt_size' = min(pkt_size, own)`, words 3 and 4 derived from it, the rest unchanged.
    pub fn echo(&self, own_pkt_size: u32) -> OptionBlock {
        let pkt_size = self.pkt_size.min(own_pkt_size);
        OptionBlock { pkt_size, payload_size: pkt_size - 4, max_loss_length: pkt_size / 4 - 2, ..*self }
    }

    /// The receiver's check of an echo against its own block (§3.4): valid, words 0, 1 and
    /// 5–9 equal, `pkt_size'` not larger.
    pub fn check_echo(&self, echo: &OptionBlock) -> Result<(), WireError> {
        echo.validate()?;
        let names = [
            "data_port",
            "ctrl_port",
            "",
            "",
            "",
            "blockable",
            "send_buf_size",
            "recv_buf_size",
            "recv_flag_size",
            "reserved",
        ];
        for (i, (s, e)) in self.words().into_iter().zip(echo.words()).enumerate() {
            if !(2..=4).contains(&i) && s != e {
                return Err(WireError::EchoMismatch { field: names[i], sent: s.into(), echoed: e.into() });
            }
        }
        let circuit = |o: &OptionBlock| o.circuit.map_or((0, 0), |c| (u32::from(c.data_ip), c.rate_bps));
        let ((sent_ip, sent_rate), (echoed_ip, echoed_rate)) = (circuit(self), circuit(echo));
        if sent_ip != echoed_ip {
            return Err(WireError::EchoMismatch { field: "data_ip", sent: sent_ip.into(), echoed: echoed_ip.into() });
        }
        if sent_rate != echoed_rate {
            return Err(WireError::EchoMismatch { field: "rate_bps", sent: sent_rate, echoed: echoed_rate });
        }
        if echo.pkt_size > self.pkt_size {
            return Err(WireError::EchoMismatch {
                field: "pkt_size",
                sent: self.pkt_size.into(),
                echoed: echo.pkt_size.into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn emitted(c: &Control) -> Vec<u8> {
        let mut v = Vec::new();
        c.emit(&mut v);
        assert_eq!(v.len(), c.buffer_len());
        v
    }

    #[test]
    fn option_block_matches_spec_12_byte_for_byte() {
        let bytes = hex("00 00 1b 59 00 00 1b 58 00 00 05 c0 00 00 05 bc
                         00 00 01 6e 00 00 00 00 02 71 00 00 02 71 00 00
                         00 00 64 00 00 00 00 00");
        let o = OptionBlock::new(7001, 7000, DEFAULT_PKT_SIZE);
        let mut v = Vec::new();
        o.emit(&mut v);
        assert_eq!(v, bytes);
        assert_eq!(OptionBlock::parse(&bytes), Ok(o));
        assert_eq!(o.max_loss_length, 366);
    }

    #[test]
    fn data_matches_spec_12_byte_for_byte() {
        let bytes = hex("00 00 00 01 53 41 42 55 4c");
        let mut out = [0u8; 9];
        assert_eq!(emit_data(SeqNo::new(1), b"SABUL", &mut out), 9);
        assert_eq!(&out[..], &bytes[..]);
        let p = DataPacket::new_checked(&bytes[..], DEFAULT_PKT_SIZE).unwrap();
        assert_eq!((p.seq(), p.payload()), (SeqNo::new(1), &b"SABUL"[..]));
    }

    #[test]
    fn ack_syn_err_match_spec_12_byte_for_byte() {
        let cases = [
            ("00 00 00 01 00 00 04 00", Control::Ack(SeqNo::new(1024))),
            ("00 00 00 04 00 00 03 e8", Control::Syn(1000)),
            (
                "00 00 00 02 00 00 00 04 00 00 00 64 80 00 00 c8 00 00 00 cb 00 00 01 2c",
                Control::Err(
                    LossWords::encode(
                        [(100, 100), (200, 203), (300, 300)].map(|(a, b)| (SeqNo::new(a), SeqNo::new(b))),
                        366,
                    )
                    .unwrap(),
                ),
            ),
        ];
        for (h, c) in &cases {
            let bytes = hex(h);
            assert_eq!(emitted(c), bytes);
            assert_eq!(Control::parse(&bytes, 366).as_ref(), Ok(c));
        }
        let Control::Err(l) = Control::parse(&hex(cases[2].0), 366).unwrap() else { panic!("an ERR") };
        assert_eq!(l.lost_count(), 6);
    }

    #[test]
    fn uncompressed_err_of_the_2003_code_round_trips() {
        let c = Control::Err(LossWords::new(vec![5, 6, 7]).unwrap());
        let b = emitted(&c);
        assert_eq!(Control::parse(&b, 366), Ok(c.clone()));
        let Control::Err(l) = c else { unreachable!() };
        assert_eq!(l.lost_count(), 3);
    }

    #[test]
    fn err_claiming_a_billion_words_is_rejected_from_its_header() {
        let h: [u8; 8] = hex("00 00 00 02 3b 9a ca 00").try_into().unwrap();
        assert_eq!(
            Control::frame_len(&h, 366),
            Err(WireError::ErrLength { words: 1_000_000_000, max_loss_length: 366 })
        );
        let zero: [u8; 8] = hex("00 00 00 02 00 00 00 00").try_into().unwrap();
        assert!(matches!(Control::frame_len(&zero, 366), Err(WireError::ErrLength { words: 0, .. })));
    }

    #[test]
    fn unknown_types_and_exp_on_the_wire_are_protocol_errors() {
        for t in [0u32, 3, 5, 0xffff_ffff] {
            let mut b = t.to_be_bytes().to_vec();
            b.extend_from_slice(&[0, 0, 0, 1]);
            assert_eq!(Control::parse(&b, 366), Err(WireError::UnknownType(t)));
        }
    }

    #[test]
    fn malformed_frames_are_rejected() {
        // truncated header, truncated ERR body, oversized frame
        assert!(matches!(Control::parse(&hex("00 00 00 01 00 00"), 366), Err(WireError::Truncated { .. })));
        assert!(matches!(
            Control::parse(&hex("00 00 00 02 00 00 00 02 00 00 00 01"), 366),
            Err(WireError::Truncated { .. })
        ));
        assert!(matches!(Control::parse(&hex("00 00 00 01 00 00 00 01 00"), 366), Err(WireError::Truncated { .. })));
        // ERR start > end, trailing range start
        assert!(matches!(
            Control::parse(&hex("00 00 00 02 00 00 00 02 80 00 00 09 00 00 00 05"), 366),
            Err(WireError::ErrList(LossError::ReversedRange { .. }))
        ));
        assert!(matches!(
            Control::parse(&hex("00 00 00 02 00 00 00 01 80 00 00 09"), 366),
            Err(WireError::ErrList(LossError::TrailingRangeStart { .. }))
        ));
        assert_eq!(Control::parse(&hex("00 00 00 01 80 00 00 00"), 366), Err(WireError::AckNotASequence(0x8000_0000)));
    }

    #[test]
    fn data_outside_section_3_1_is_not_data() {
        assert_eq!(DataPacket::new_checked(&[0u8; 4][..], 1472).unwrap_err(), WireError::DataTooShort { len: 4 });
        assert_eq!(DataPacket::new_checked(&[0x80u8, 0, 0, 0, 1][..], 1472).unwrap_err(), WireError::DataFlagSet);
        assert!(matches!(DataPacket::new_checked(&[0u8; 1025][..], 1024), Err(WireError::DataTooLong { .. })));
        assert!(DataPacket::new_checked(&[0u8; 1024][..], 1024).is_ok());
    }

    #[test]
    fn echo_lowering_the_packet_size_derives_max_loss_length() {
        let o = OptionBlock::new(7001, 7000, 1472);
        let e = o.echo(1024);
        assert_eq!((e.pkt_size, e.payload_size, e.max_loss_length), (1024, 1020, 254));
        assert_eq!(o.check_echo(&e), Ok(()));
        assert_eq!(o.echo(9000), o);
        let raised = OptionBlock::new(7001, 7000, 1500);
        assert!(matches!(o.check_echo(&raised), Err(WireError::EchoMismatch { field: "pkt_size", .. })));
        let moved = OptionBlock { data_port: 7002, ..o };
        assert!(matches!(o.check_echo(&moved), Err(WireError::EchoMismatch { field: "data_port", .. })));
    }

    #[test]
    fn bogus_option_blocks_are_rejected() {
        let o = OptionBlock::new(7001, 7000, 1472);
        for (bad, field) in [
            (OptionBlock { data_port: 0, ..o }, "data_port"),
            (OptionBlock { ctrl_port: 70_000, ..o }, "ctrl_port"),
            (OptionBlock::new(7001, 7000, 31), "pkt_size"),
            (OptionBlock::new(7001, 7000, 65_508), "pkt_size"),
            (OptionBlock { payload_size: 1000, ..o }, "payload_size"),
            (OptionBlock { max_loss_length: 1_000_000_000, ..o }, "max_loss_length"),
            (OptionBlock { blockable: 2, ..o }, "blockable"),
            (OptionBlock { recv_flag_size: 0, ..o }, "recv_flag_size"),
            (OptionBlock { recv_flag_size: 1 << 30, ..o }, "recv_flag_size"),
            (OptionBlock { reserved: 1, ..o }, "reserved"),
        ] {
            let mut v = Vec::new();
            bad.emit(&mut v);
            assert!(
                matches!(OptionBlock::parse(&v), Err(WireError::BadOption { field: f, .. }) if f == field),
                "{field}"
            );
        }
        assert!(matches!(OptionBlock::parse(&[0u8; 39]), Err(WireError::Truncated { .. })));
    }
}
