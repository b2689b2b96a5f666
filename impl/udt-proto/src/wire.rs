//! UDT4 packets on the wire (UDT4.md §2, §3, §5), in the style of smoltcp's `wire`.
//!
//! [`Packet`] is a zero-copy view over a datagram with field accessors; [`Repr`] is the parsed
//! form with [`Repr::parse`], [`Repr::emit`] and [`Repr::buffer_len`]. Every byte offset lives
//! in [`field`], and parsing and emitting both use it.
//!
//! # Panics
//! The contract, once for the whole module: once a length check has passed —
//! [`Packet::new_checked`] (or [`Packet::check_len`]) for the header, [`NakList::new_checked`]
//! for a loss list — no accessor panics. [`Repr::parse`] checks every type-specific length
//! itself, so malformed input yields an [`Error`], never a panic. What can panic is writing
//! into a buffer too short for it, and reading through a view made with `new_unchecked`
//! without the check: each such function says so in its own `# Panics` section.
//!
//! Control information is a sequence of big-endian 32-bit words (§2); data payloads are
//! opaque bytes.

use crate::seq::{AckNo, MsgNo};
use core::fmt;
use std::net::IpAddr;
use transfer::seq::SeqNo;

/// Byte offsets of every field, in the style of smoltcp's `wire::*::field`. The header's are
/// from the start of the datagram; the control types' are from the start of the control
/// information, i.e. after [`header::LEN`](field::header::LEN) bytes.
pub mod field {
    /// A big-endian 32-bit word (or, for [`handshake::PEER_IP`], four of them).
    pub type Field = core::ops::Range<usize>;

    /// The 16-byte header common to all packets (§3).
    pub mod header {
        use super::Field;
        /// Data: flag bit 0 and the sequence number. Control: flag bit 1, type, extended type.
        pub const WORD0: Field = 0..4;
        /// Data: boundary, in-order and message number. Control: additional info.
        pub const WORD1: Field = 4..8;
        /// The sender's timestamp, µs since its connection started.
        pub const TIMESTAMP: Field = 8..12;
        /// The socket ID of the connection the packet is for (0 in a first handshake).
        pub const DST_SOCKET: Field = 12..16;
        /// The header is this long.
        pub const LEN: usize = 16;
        /// Bit 31 of word 0: set in control packets.
        pub const CONTROL_FLAG: u32 = 0x8000_0000;
    }

    /// Handshake control information (§5.1).
    pub mod handshake {
        use super::Field;
        /// Word 0: the UDT version, 4.
        pub const VERSION: Field = 0..4;
        /// Word 1: the socket type, 1 = STREAM, 2 = DGRAM.
        pub const SOCKET_TYPE: Field = 4..8;
        /// Word 2: the initial sequence number.
        pub const ISN: Field = 8..12;
        /// Word 3: the MSS, bytes including IP and UDP headers.
        pub const MSS: Field = 12..16;
        /// Word 4: the largest flow window, packets, the handshake's sender can receive.
        pub const FLIGHT_FLAG_SIZE: Field = 16..20;
        /// Word 5: the request type ([`req_type`](crate::wire::req_type)).
        pub const REQ_TYPE: Field = 20..24;
        /// Word 6: the socket ID of the handshake's sender.
        pub const SOCKET_ID: Field = 24..28;
        /// Word 7: the listener's SYN cookie; 0 in a first request.
        pub const COOKIE: Field = 28..32;
        /// Four words, 4.11's byte order (see [`peer_ip_words`](crate::wire::peer_ip_words)).
        pub const PEER_IP: Field = 32..48;
        /// Word `i` (0–3) of [`PEER_IP`].
        pub const fn peer_ip_word(i: usize) -> Field {
            PEER_IP.start + 4 * i..PEER_IP.start + 4 * (i + 1)
        }
        /// The information is exactly this long.
        pub const LEN: usize = 48;
    }

    /// ACK control information (§5.3): the light form has the first field only, the medium
    /// form the first four.
    pub mod ack {
        use super::Field;
        /// Field 1: everything before this sequence number was received.
        pub const ACK: Field = 0..4;
        /// Field 2: the ACK sender's RTT estimate, µs.
        pub const RTT: Field = 4..8;
        /// Field 3: its RTT variance, µs.
        pub const RTT_VAR: Field = 8..12;
        /// Field 4: the available receive buffer (the flow window), packets.
        pub const AVAIL: Field = 12..16;
        /// Field 5: the packet arrival speed, packets/s (§10.1).
        pub const RATE: Field = 16..20;
        /// Field 6: the estimated link capacity, packets/s (§10.2).
        pub const CAPACITY: Field = 20..24;
        /// A light ACK's information: field 1.
        pub const LIGHT_LEN: usize = ACK.end;
        /// A medium ACK's information: fields 1–4.
        pub const MEDIUM_LEN: usize = AVAIL.end;
        /// A full ACK's information: fields 1–6.
        pub const FULL_LEN: usize = CAPACITY.end;
    }

    /// NAK control information (§5.4): one or more loss words.
    pub mod nak {
        /// Bytes per loss word.
        pub const WORD_LEN: usize = 4;
    }

    /// Message drop request control information (§5.6).
    pub mod drop_request {
        use super::Field;
        /// The first sequence number to drop.
        pub const FIRST: Field = 0..4;
        /// The last sequence number to drop (4.11: one past the message's last packet).
        pub const LAST: Field = 4..8;
        /// The information is exactly this long.
        pub const LEN: usize = LAST.end;
    }

    /// Information of the types that carry none: 4.11 pads them with one zero word (§2).
    pub const EMPTY_INFO_LEN: usize = 4;
}

/// Bytes of IPv4 + UDP headers counted in UDT's MSS (§1).
pub const IP_UDP_OVERHEAD: u32 = 28;
/// Payload bytes in a data packet for a given MSS: `MSS − 28 − 16` (§1).
pub const fn payload_size(mss: u32) -> usize {
    mss.saturating_sub(IP_UDP_OVERHEAD + field::header::LEN as u32) as usize
}

/// Why a datagram was not accepted as a UDT packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Shorter than the 16-byte header or than its type requires.
    Truncated,
    /// A control type this implementation does not know.
    UnknownType(u16),
    /// Control information whose length the type does not allow (e.g. an ACK of 8 bytes,
    /// a handshake that is not 48 bytes, a body that is not a multiple of 4).
    BadLength {
        /// The control type.
        ctrl_type: u16,
        /// The information's length, bytes.
        len: usize,
    },
    /// A field value that cannot occur (bad boundary bits are impossible; this covers e.g. a
    /// NAK with no words or a drop request whose range runs backwards).
    Malformed(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "datagram shorter than the UDT header or its type needs"),
            Error::UnknownType(t) => write!(f, "unknown UDT control type {t:#x}"),
            Error::BadLength { ctrl_type, len } => {
                write!(f, "control type {ctrl_type} with an information field of {len} bytes")
            }
            Error::Malformed(why) => write!(f, "malformed UDT packet: {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// The result of parsing: a value or the reason the datagram was not a UDT packet.
pub type Result<T> = core::result::Result<T, Error>;

/// Reads the big-endian word at `f`; the caller has checked that `b` holds it.
#[inline]
fn read(b: &[u8], f: field::Field) -> u32 {
    let w = &b[f];
    u32::from_be_bytes([w[0], w[1], w[2], w[3]])
}

/// Writes `v` big-endian at `f`; the caller has checked that `b` holds it.
#[inline]
fn write(b: &mut [u8], f: field::Field, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// A read/write view of a UDT packet.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// The accessors below panic on a buffer shorter than the 16-byte header; a [`Packet`] made by
/// [`Packet::new_checked`] never is.
impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without a length check; call [`Packet::check_len`] before any accessor.
    ///
    /// # Panics
    /// Never itself, but every accessor panics on a buffer shorter than the 16-byte header.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds at least the 16-byte header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the 16-byte header; after that no accessor panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < field::header::LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The buffer the packet was read from or written to.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn word(&self, f: field::Field) -> u32 {
        read(self.buffer.as_ref(), f)
    }

    /// Flag bit: `true` for control packets (§3).
    #[inline]
    pub fn is_control(&self) -> bool {
        self.word(field::header::WORD0) & field::header::CONTROL_FLAG != 0
    }

    /// Data: the packet sequence number.
    #[inline]
    pub fn seq_number(&self) -> SeqNo {
        SeqNo::new(self.word(field::header::WORD0))
    }

    /// Data: word 1 whole (boundary, in-order and message number).
    #[inline]
    pub fn msg_word(&self) -> u32 {
        self.word(field::header::WORD1)
    }

    /// Control: the 15-bit type.
    #[inline]
    pub fn control_type(&self) -> u16 {
        ((self.word(field::header::WORD0) >> 16) & 0x7FFF) as u16
    }

    /// Control: the extended type (user-defined packets).
    #[inline]
    pub fn ext_type(&self) -> u16 {
        (self.word(field::header::WORD0) & 0xFFFF) as u16
    }

    /// Control: additional info (word 1).
    #[inline]
    pub fn additional_info(&self) -> u32 {
        self.word(field::header::WORD1)
    }

    /// The sender's timestamp, µs since its connection started.
    #[inline]
    pub fn timestamp(&self) -> u32 {
        self.word(field::header::TIMESTAMP)
    }

    /// The destination socket ID.
    #[inline]
    pub fn dst_socket_id(&self) -> u32 {
        self.word(field::header::DST_SOCKET)
    }

    /// Data payload or control information.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::header::LEN..]
    }
}

/// Like the getters, the setters panic on a buffer shorter than the 16-byte header only.
impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    fn set_word(&mut self, f: field::Field, v: u32) {
        write(self.buffer.as_mut(), f, v)
    }
    /// Sets word 0 whole (data: the sequence number; control: flag, type, extended type).
    pub fn set_word0(&mut self, v: u32) {
        self.set_word(field::header::WORD0, v)
    }
    /// Sets word 1 whole (data: the message word; control: additional info).
    pub fn set_word1(&mut self, v: u32) {
        self.set_word(field::header::WORD1, v)
    }
    /// Sets the timestamp, µs.
    pub fn set_timestamp(&mut self, v: u32) {
        self.set_word(field::header::TIMESTAMP, v)
    }
    /// Sets the destination socket ID.
    pub fn set_dst_socket_id(&mut self, v: u32) {
        self.set_word(field::header::DST_SOCKET, v)
    }
    /// The data payload or control information, to write it.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::header::LEN..]
    }
}

/// Position of a data packet within its message (FF bits, §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// A packet inside a message of three or more.
    Middle = 0b00,
    /// The last packet of a message.
    Last = 0b01,
    /// The first packet of a message of two or more.
    First = 0b10,
    /// A message in a single packet.
    Solo = 0b11,
}

impl Boundary {
    /// The position from the FF bits (the lowest two bits of `bits`).
    pub fn from_bits(bits: u32) -> Boundary {
        match bits & 0b11 {
            0b00 => Boundary::Middle,
            0b01 => Boundary::Last,
            0b10 => Boundary::First,
            _ => Boundary::Solo,
        }
    }
    /// Whether the packet starts a message.
    pub fn is_first(self) -> bool {
        matches!(self, Boundary::First | Boundary::Solo)
    }
    /// Whether the packet ends a message.
    pub fn is_last(self) -> bool {
        matches!(self, Boundary::Last | Boundary::Solo)
    }
}

/// Header of a data packet (§3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// The packet sequence number.
    pub seq: SeqNo,
    /// Where the packet sits in its message.
    pub boundary: Boundary,
    /// The O bit: the message must be delivered in order.
    pub in_order: bool,
    /// The 29-bit message number.
    pub msg: MsgNo,
    /// The sender's timestamp, µs since its connection started.
    pub timestamp: u32,
    /// The destination socket ID.
    pub dst_socket_id: u32,
}

impl DataHeader {
    /// Word 1 as sent: FF bits, O bit, 29-bit message number.
    pub fn msg_word(&self) -> u32 {
        ((self.boundary as u32) << 30) | ((self.in_order as u32) << 29) | self.msg.get()
    }

    /// The header with word 1 as it came off the wire (see [`msg_word`](Self::msg_word)).
    pub fn from_msg_word(seq: SeqNo, word: u32, timestamp: u32, dst_socket_id: u32) -> Self {
        DataHeader {
            seq,
            boundary: Boundary::from_bits(word >> 30),
            in_order: word & (1 << 29) != 0,
            msg: MsgNo::new(word),
            timestamp,
            dst_socket_id,
        }
    }

    /// Writes the 16-byte header at the start of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than 16 bytes.
    pub fn emit(&self, buf: &mut [u8]) {
        use field::header::*;
        write(buf, WORD0, self.seq.get());
        write(buf, WORD1, self.msg_word());
        write(buf, TIMESTAMP, self.timestamp);
        write(buf, DST_SOCKET, self.dst_socket_id);
    }
}

/// Control packet types (§3.2, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    /// Connection set-up (§5.1).
    Handshake = 0,
    /// Keep-alive (§5.2).
    KeepAlive = 1,
    /// Acknowledgement (§5.3).
    Ack = 2,
    /// Negative acknowledgement: a loss list (§5.4).
    Nak = 3,
    /// Congestion or delay warning, never sent by 4.11 (§5.5).
    CongestionWarning = 4,
    /// The connection is closing (§5.6).
    Shutdown = 5,
    /// Acknowledgement of an ACK, for the RTT (§5.7).
    Ack2 = 6,
    /// Message drop request (§5.8).
    MsgDropRequest = 7,
    /// Error signal (§5.9).
    ErrorSignal = 8,
    /// User-defined, with an extended type (§5.10).
    UserDefined = 0x7FFF,
}

impl ControlType {
    /// The type with number `t`, if there is one.
    pub fn from_u16(t: u16) -> Option<ControlType> {
        Some(match t {
            0 => ControlType::Handshake,
            1 => ControlType::KeepAlive,
            2 => ControlType::Ack,
            3 => ControlType::Nak,
            4 => ControlType::CongestionWarning,
            5 => ControlType::Shutdown,
            6 => ControlType::Ack2,
            7 => ControlType::MsgDropRequest,
            8 => ControlType::ErrorSignal,
            0x7FFF => ControlType::UserDefined,
            _ => return None,
        })
    }
}

/// UDT socket type carried in the handshake: 1 = STREAM, 2 = DGRAM (§5.1, §14 row 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketType {
    /// A byte stream (1).
    Stream,
    /// Messages (2).
    Dgram,
    /// Any other value: kept so that a listener can answer it with a rejection (§6.1 rule 5).
    Other(u32),
}

impl SocketType {
    /// The type with wire value `v`.
    pub fn from_u32(v: u32) -> SocketType {
        match v {
            1 => SocketType::Stream,
            2 => SocketType::Dgram,
            o => SocketType::Other(o),
        }
    }
    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            SocketType::Stream => 1,
            SocketType::Dgram => 2,
            SocketType::Other(o) => o,
        }
    }
}

/// Handshake request types (§5.1 word 5).
pub mod req_type {
    /// A client's request (first, without the cookie).
    pub const CLIENT: i32 = 1;
    /// A rendezvous request.
    pub const RENDEZVOUS: i32 = 0;
    /// A response, or a client's request carrying the cookie.
    pub const RESPONSE: i32 = -1;
    /// A rendezvous peer's final response.
    pub const RENDEZVOUS_FINAL: i32 = -2;
    /// A rejection.
    pub const REJECT: i32 = 1002;
}

/// Handshake body: twelve words (§5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    /// Word 0: the UDT version, 4.
    pub version: u32,
    /// Word 1: the socket type.
    pub socket_type: SocketType,
    /// Word 2 as on the wire, all 32 bits: a listener echoes it unchanged (§6.1 listener rules
    /// 3 and 8), also from a client that set bit 31; [`Handshake::first_seq`] is the sequence
    /// number it starts.
    pub isn: u32,
    /// Word 3: the MSS, bytes including IP and UDP headers (default 1500).
    pub mss: u32,
    /// Word 4: the largest flow window, packets, the handshake's sender can receive.
    pub flight_flag_size: u32,
    /// Word 5: the request type ([`req_type`](crate::wire::req_type)).
    pub req_type: i32,
    /// Word 6: the socket ID of the handshake's sender.
    pub socket_id: u32,
    /// Word 7: the listener's SYN cookie; 0 in a first request.
    pub cookie: u32,
    /// Words 8–11 as they are on the wire (4.11's quirky byte order, see [`peer_ip_words`]).
    pub peer_ip: [u32; 4],
}

impl Handshake {
    /// The initial sequence number the ISN word stands for: its low 31 bits (§4), all that a
    /// data packet's word 0 can carry.
    pub fn first_seq(&self) -> SeqNo {
        SeqNo::new(self.isn)
    }

    fn parse(b: &[u8]) -> Result<Handshake> {
        use field::handshake::*;
        if b.len() != LEN {
            return Err(Error::BadLength { ctrl_type: 0, len: b.len() });
        }
        let ip = |i| read(b, peer_ip_word(i));
        Ok(Handshake {
            version: read(b, VERSION),
            socket_type: SocketType::from_u32(read(b, SOCKET_TYPE)),
            isn: read(b, ISN),
            mss: read(b, MSS),
            flight_flag_size: read(b, FLIGHT_FLAG_SIZE),
            req_type: read(b, REQ_TYPE) as i32,
            socket_id: read(b, SOCKET_ID),
            cookie: read(b, COOKIE),
            peer_ip: [ip(0), ip(1), ip(2), ip(3)],
        })
    }

    /// `b` is exactly [`field::handshake::LEN`] bytes (sized by [`Repr::buffer_len`]).
    fn emit(&self, b: &mut [u8]) {
        use field::handshake::*;
        write(b, VERSION, self.version);
        write(b, SOCKET_TYPE, self.socket_type.to_u32());
        write(b, ISN, self.isn);
        write(b, MSS, self.mss);
        write(b, FLIGHT_FLAG_SIZE, self.flight_flag_size);
        write(b, REQ_TYPE, self.req_type as u32);
        write(b, SOCKET_ID, self.socket_id);
        write(b, COOKIE, self.cookie);
        for (i, w) in self.peer_ip.iter().enumerate() {
            write(b, peer_ip_word(i), *w);
        }
    }
}

/// The handshake's peer-IP words as 4.11 on little-endian amd64 sends them (§5.1): each
/// 4-byte group of the address appears byte-reversed. 10.0.0.2 → first word bytes `02 00 00 0a`.
pub fn peer_ip_words(ip: IpAddr) -> [u32; 4] {
    let rev = |g: [u8; 4]| u32::from_be_bytes([g[3], g[2], g[1], g[0]]);
    match ip {
        IpAddr::V4(v4) => [rev(v4.octets()), 0, 0, 0],
        IpAddr::V6(v6) => {
            let o = v6.octets();
            let g = |i: usize| rev([o[i], o[i + 1], o[i + 2], o[i + 3]]);
            [g(0), g(4), g(8), g(12)]
        }
    }
}

/// The three ACK forms (§5.3). 4.11 tells them apart by length only: 4, 16 or 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// 4 bytes; additional info 0; never ACK2'd.
    Light {
        /// Everything before this sequence number was received.
        ack: SeqNo,
    },
    /// 16 bytes: sent within SYN of the previous full ACK.
    Medium {
        /// The ACK sub-sequence number the ACK2 echoes.
        ack_no: AckNo,
        /// Everything before this sequence number was received.
        ack: SeqNo,
        /// The ACK sender's RTT estimate, µs.
        rtt: u32,
        /// Its RTT variance, µs.
        rtt_var: u32,
        /// The available receive buffer (the flow window), packets.
        avail: u32,
    },
    /// 24 bytes.
    Full {
        /// The ACK sub-sequence number the ACK2 echoes.
        ack_no: AckNo,
        /// Everything before this sequence number was received.
        ack: SeqNo,
        /// The ACK sender's RTT estimate, µs.
        rtt: u32,
        /// Its RTT variance, µs.
        rtt_var: u32,
        /// The available receive buffer (the flow window), packets.
        avail: u32,
        /// The packet arrival speed, packets/s (§10.1).
        rate: u32,
        /// The estimated link capacity, packets/s (§10.2).
        capacity: u32,
    },
}

impl Ack {
    /// The ACK number: everything before it was received.
    pub fn ack(&self) -> SeqNo {
        match *self {
            Ack::Light { ack } | Ack::Medium { ack, .. } | Ack::Full { ack, .. } => ack,
        }
    }

    /// The sub-sequence number to echo in an ACK2, if this form is ACK2'd.
    pub fn ack_no(&self) -> Option<AckNo> {
        match *self {
            Ack::Light { .. } => None,
            Ack::Medium { ack_no, .. } | Ack::Full { ack_no, .. } => Some(ack_no),
        }
    }

    fn info_len(&self) -> usize {
        match self {
            Ack::Light { .. } => field::ack::LIGHT_LEN,
            Ack::Medium { .. } => field::ack::MEDIUM_LEN,
            Ack::Full { .. } => field::ack::FULL_LEN,
        }
    }

    /// Parses ACK information; the form follows from its length alone, as in 4.11.
    fn parse(info: &[u8], ack_no: AckNo) -> Result<Ack> {
        use field::ack::*;
        let w = |f| read(info, f);
        Ok(match info.len() {
            LIGHT_LEN => Ack::Light { ack: SeqNo::new(w(ACK)) },
            MEDIUM_LEN => {
                Ack::Medium { ack_no, ack: SeqNo::new(w(ACK)), rtt: w(RTT), rtt_var: w(RTT_VAR), avail: w(AVAIL) }
            }
            // Longer than 24 is read as full, as 4.11 does (fields beyond 6 ignored).
            n if n >= FULL_LEN => Ack::Full {
                ack_no,
                ack: SeqNo::new(w(ACK)),
                rtt: w(RTT),
                rtt_var: w(RTT_VAR),
                avail: w(AVAIL),
                rate: w(RATE),
                capacity: w(CAPACITY),
            },
            len => return Err(Error::BadLength { ctrl_type: ControlType::Ack as u16, len }),
        })
    }

    /// `info` is exactly [`Ack::info_len`] bytes (sized by [`Repr::buffer_len`]).
    fn emit(&self, info: &mut [u8]) {
        use field::ack::*;
        write(info, ACK, self.ack().get());
        if let Ack::Medium { rtt, rtt_var, avail, .. } | Ack::Full { rtt, rtt_var, avail, .. } = *self {
            write(info, RTT, rtt);
            write(info, RTT_VAR, rtt_var);
            write(info, AVAIL, avail);
        }
        if let Ack::Full { rate, capacity, .. } = *self {
            write(info, RATE, rate);
            write(info, CAPACITY, capacity);
        }
    }
}

/// A NAK's loss list (§5.4), in both directions: a view over the big-endian loss words as
/// they are on the wire, whether parsed from a datagram or about to be emitted. Build the
/// bytes to send with [`NakList::encode`]; read the ranges back with [`NakList::ranges`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NakList<'a> {
    bytes: &'a [u8],
}

impl<'a> NakList<'a> {
    /// Wraps loss words in wire form after checking there is at least one and that `bytes`
    /// holds whole words.
    pub fn new_checked(bytes: &'a [u8]) -> Result<NakList<'a>> {
        if bytes.is_empty() || !bytes.len().is_multiple_of(field::nak::WORD_LEN) {
            return Err(Error::BadLength { ctrl_type: ControlType::Nak as u16, len: bytes.len() });
        }
        Ok(NakList { bytes })
    }

    /// The wire form of loss `words` (from [`transfer::loss_list::encode_loss`]), for
    /// [`NakList::new_checked`].
    pub fn encode(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    /// The loss words as on the wire.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The loss words, decoded from big-endian.
    pub fn words(&self) -> impl Iterator<Item = u32> + 'a {
        self.bytes.chunks_exact(field::nak::WORD_LEN).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// How many loss words the list has.
    pub fn word_count(&self) -> usize {
        self.bytes.len() / field::nak::WORD_LEN
    }

    /// Decodes the list into inclusive ranges, enforcing §5.4's decoder rules (a range start
    /// must be followed by an end word, and the end must not be before the start); see
    /// [`transfer::loss_list::decode_loss`].
    pub fn ranges(&self) -> core::result::Result<Vec<(SeqNo, SeqNo)>, Error> {
        use transfer::loss_list::{decode_loss, LossError};
        let words: Vec<u32> = self.words().collect();
        decode_loss(&words).map_err(|e| {
            Error::Malformed(match e {
                LossError::Empty => "NAK without loss words",
                LossError::TrailingRangeStart { .. } => "NAK ends with a range start",
                LossError::RangeEndFlagged { .. } => "NAK range start followed by another range start",
                LossError::ReversedRange { .. } => "NAK range with start after end",
            })
        })
    }
}

impl fmt::Debug for NakList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.words().map(|w| format!("{w:#010x}"))).finish()
    }
}

/// Parsed control information (§5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control<'a> {
    /// Connection set-up (§5.1).
    Handshake(Handshake),
    /// Keep-alive (§5.2).
    KeepAlive,
    /// Acknowledgement, in one of its three forms (§5.3).
    Ack(Ack),
    /// Negative acknowledgement: the loss list (§5.4).
    Nak(NakList<'a>),
    /// Congestion or delay warning (§5.5).
    CongestionWarning,
    /// The connection is closing (§5.6).
    Shutdown,
    /// Acknowledgement of a full or medium ACK (§5.7).
    Ack2 {
        /// The sub-sequence number of the ACK acknowledged.
        ack_no: AckNo,
    },
    /// Message drop request (§5.8).
    MsgDropRequest {
        /// The message's 29-bit number.
        msg: MsgNo,
        /// The first sequence number to drop.
        first: SeqNo,
        /// The last sequence number to drop (4.11: one past the message's last packet).
        last: SeqNo,
    },
    /// Error signal (§5.9).
    ErrorSignal {
        /// The error code (4.11: 4000, a file error).
        code: u32,
    },
    /// User-defined (§5.10).
    UserDefined {
        /// The extended type (word 0's low 16 bits).
        ext_type: u16,
        /// The additional info.
        info: u32,
        /// The control information (as received, padding included; padded to whole words when
        /// sent).
        body: &'a [u8],
    },
}

impl Control<'_> {
    /// The packet's type.
    pub fn control_type(&self) -> ControlType {
        match self {
            Control::Handshake(_) => ControlType::Handshake,
            Control::KeepAlive => ControlType::KeepAlive,
            Control::Ack(_) => ControlType::Ack,
            Control::Nak(_) => ControlType::Nak,
            Control::CongestionWarning => ControlType::CongestionWarning,
            Control::Shutdown => ControlType::Shutdown,
            Control::Ack2 { .. } => ControlType::Ack2,
            Control::MsgDropRequest { .. } => ControlType::MsgDropRequest,
            Control::ErrorSignal { .. } => ControlType::ErrorSignal,
            Control::UserDefined { .. } => ControlType::UserDefined,
        }
    }

    fn info_len(&self) -> usize {
        match self {
            Control::Handshake(_) => field::handshake::LEN,
            Control::Ack(a) => a.info_len(),
            Control::Nak(l) => l.bytes.len(),
            Control::MsgDropRequest { .. } => field::drop_request::LEN,
            Control::UserDefined { body, .. } if !body.is_empty() => body.len().next_multiple_of(4),
            _ => field::EMPTY_INFO_LEN,
        }
    }

    fn additional_info(&self) -> u32 {
        match *self {
            Control::Ack(a) => a.ack_no().map_or(0, |n| n.get()),
            Control::Ack2 { ack_no } => ack_no.get(),
            Control::MsgDropRequest { msg, .. } => msg.get(),
            Control::ErrorSignal { code } => code,
            Control::UserDefined { info, .. } => info,
            _ => 0,
        }
    }
}

/// A parsed UDT packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// A data packet.
    Data {
        /// Its header.
        header: DataHeader,
        /// The application bytes.
        payload: &'a [u8],
    },
    /// A control packet.
    Control {
        /// The destination socket ID.
        dst_socket_id: u32,
        /// The sender's timestamp, µs since its connection started.
        timestamp: u32,
        /// The type and its information.
        control: Control<'a>,
    },
}

impl<'a> Repr<'a> {
    /// Parses a datagram. Accepts both the 16- and the 20-byte (padded) forms of info-less
    /// control packets (§2). Never panics.
    pub fn parse(packet: &Packet<&'a [u8]>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let buf: &'a [u8] = packet.buffer;
        let info = &buf[field::header::LEN..];
        if !packet.is_control() {
            return Ok(Repr::Data {
                header: DataHeader::from_msg_word(
                    packet.seq_number(),
                    packet.msg_word(),
                    packet.timestamp(),
                    packet.dst_socket_id(),
                ),
                payload: info,
            });
        }
        let t = packet.control_type();
        let ty = ControlType::from_u16(t).ok_or(Error::UnknownType(t))?;
        let addl = packet.additional_info();
        let control = match ty {
            ControlType::Handshake => Control::Handshake(Handshake::parse(info)?),
            ControlType::KeepAlive => Control::KeepAlive,
            ControlType::CongestionWarning => Control::CongestionWarning,
            ControlType::Shutdown => Control::Shutdown,
            ControlType::Ack2 => Control::Ack2 { ack_no: AckNo::new(addl) },
            ControlType::ErrorSignal => Control::ErrorSignal { code: addl },
            ControlType::Ack => Control::Ack(Ack::parse(info, AckNo::new(addl))?),
            ControlType::Nak => Control::Nak(NakList::new_checked(info)?),
            ControlType::MsgDropRequest => {
                use field::drop_request::*;
                if info.len() < LEN {
                    return Err(Error::BadLength { ctrl_type: t, len: info.len() });
                }
                Control::MsgDropRequest {
                    msg: MsgNo::new(addl),
                    first: SeqNo::new(read(info, FIRST)),
                    last: SeqNo::new(read(info, LAST)),
                }
            }
            ControlType::UserDefined => Control::UserDefined { ext_type: packet.ext_type(), info: addl, body: info },
        };
        Ok(Repr::Control { dst_socket_id: packet.dst_socket_id(), timestamp: packet.timestamp(), control })
    }

    /// Parses raw bytes (convenience for [`Packet::new_checked`] + [`Repr::parse`]).
    pub fn parse_bytes(bytes: &'a [u8]) -> Result<Repr<'a>> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    /// Length of the emitted datagram.
    pub fn buffer_len(&self) -> usize {
        field::header::LEN
            + match self {
                Repr::Data { payload, .. } => payload.len(),
                Repr::Control { control, .. } => control.info_len(),
            }
    }

    /// Writes the packet into `buf[..self.buffer_len()]`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`Repr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        match self {
            Repr::Data { header, payload } => {
                header.emit(buf);
                buf[field::header::LEN..].copy_from_slice(payload);
            }
            Repr::Control { dst_socket_id, timestamp, control } => {
                let ty = control.control_type() as u32;
                let ext = match control {
                    Control::UserDefined { ext_type, .. } => *ext_type as u32,
                    _ => 0,
                };
                {
                    use field::header::*;
                    write(buf, WORD0, CONTROL_FLAG | (ty << 16) | ext);
                    write(buf, WORD1, control.additional_info());
                    write(buf, TIMESTAMP, *timestamp);
                    write(buf, DST_SOCKET, *dst_socket_id);
                }
                let info = &mut buf[field::header::LEN..];
                info.fill(0);
                match control {
                    Control::Handshake(h) => h.emit(info),
                    Control::Ack(a) => a.emit(info),
                    Control::Nak(l) => info.copy_from_slice(l.bytes),
                    Control::MsgDropRequest { first, last, .. } => {
                        use field::drop_request::*;
                        write(info, FIRST, first.get());
                        write(info, LAST, last.get());
                    }
                    Control::UserDefined { body, .. } => info[..body.len()].copy_from_slice(body),
                    _ => {}
                }
            }
        }
    }

    /// Emits into a fresh vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.buffer_len()];
        self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transfer::loss_list::encode_loss;

    fn hex(s: &str) -> Vec<u8> {
        let digits: String = s
            .lines()
            .map(|l| l.trim())
            .map(|l| {
                if l.len() > 4 && l.as_bytes()[4] == b' ' && l[..4].chars().all(|c| c.is_ascii_hexdigit()) {
                    &l[5..]
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        digits.split_whitespace().map(|b| u8::from_str_radix(b, 16).unwrap()).collect()
    }

    fn roundtrip(bytes: &[u8]) -> Repr<'_> {
        let r = Repr::parse_bytes(bytes).expect("parses");
        assert_eq!(r.to_vec(), bytes, "re-emits byte for byte");
        r
    }

    const CLIENT: u32 = 0x1A2B_3C4D;
    const SERVER: u32 = 0x00C0_FFEE;

    fn hs(req_type: i32, socket_id: u32, cookie: u32, ip: [u8; 4]) -> Handshake {
        Handshake {
            version: 4,
            socket_type: SocketType::Stream,
            isn: 0x0BAD_F00D,
            mss: 1500,
            flight_flag_size: 8192,
            req_type,
            socket_id,
            cookie,
            peer_ip: peer_ip_words(IpAddr::from(ip)),
        }
    }

    #[test]
    fn spec_15_1_handshake_rounds() {
        let first = hex("80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
            00 00 20 00 00 00 00 01 1a 2b 3c 4d 00 00 00 00
            02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00");
        let r = roundtrip(&first);
        let expect = Repr::Control {
            dst_socket_id: 0,
            timestamp: 0,
            control: Control::Handshake(hs(1, CLIENT, 0, [10, 0, 0, 2])),
        };
        assert_eq!(r, expect);
        assert_eq!(expect.to_vec(), first);

        let cookie_reply = hex("80 00 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
            00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
            00 00 20 00 00 00 00 01 1a 2b 3c 4d 5e ed 12 34
            02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00");
        assert_eq!(
            roundtrip(&cookie_reply),
            Repr::Control {
                dst_socket_id: CLIENT,
                timestamp: 0,
                control: Control::Handshake(hs(1, CLIENT, 0x5EED_1234, [10, 0, 0, 2]))
            }
        );

        let second = hex("80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
            00 00 20 00 ff ff ff ff 1a 2b 3c 4d 5e ed 12 34
            02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00");
        assert_eq!(
            roundtrip(&second),
            Repr::Control {
                dst_socket_id: 0,
                timestamp: 0,
                control: Control::Handshake(hs(-1, CLIENT, 0x5EED_1234, [10, 0, 0, 2]))
            }
        );

        let response = hex("80 00 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
            00 00 00 04 00 00 00 01 0b ad f0 0d 00 00 05 dc
            00 00 20 00 ff ff ff ff 00 c0 ff ee 5e ed 12 34
            01 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00");
        assert_eq!(
            roundtrip(&response),
            Repr::Control {
                dst_socket_id: CLIENT,
                timestamp: 0,
                control: Control::Handshake(hs(-1, SERVER, 0x5EED_1234, [10, 0, 0, 1]))
            }
        );
    }

    #[test]
    fn a_handshake_keeps_all_32_bits_of_its_isn_word() {
        let mut request = hex("80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
            00 00 00 04 00 00 00 01 8b ad f0 0d 00 00 05 dc
            00 00 20 00 00 00 00 01 1a 2b 3c 4d 00 00 00 00
            02 00 00 0a 00 00 00 00 00 00 00 00 00 00 00 00");
        let Repr::Control { control: Control::Handshake(h), .. } = roundtrip(&request) else { panic!("handshake") };
        assert_eq!(h.isn, 0x8BAD_F00D);
        assert_eq!(h.first_seq(), SeqNo::new(0x0BAD_F00D), "sequence numbers are 31 bits");
        request[24] = 0x0b;
        let Repr::Control { control: Control::Handshake(h), .. } = roundtrip(&request) else { panic!("handshake") };
        assert_eq!(h.first_seq(), SeqNo::new(h.isn));
    }

    #[test]
    fn spec_15_2_data_packet() {
        let bytes = hex("0b ad f0 0d c0 00 00 01 00 00 27 10 00 c0 ff ee 55 44 54 34");
        let r = roundtrip(&bytes);
        let Repr::Data { header, payload } = r else { panic!("data") };
        assert_eq!(header.seq, SeqNo::new(0x0BAD_F00D));
        assert_eq!(header.boundary, Boundary::Solo);
        assert!(!header.in_order);
        assert_eq!(header.msg, MsgNo::new(1));
        assert_eq!(header.timestamp, 10_000);
        assert_eq!(header.dst_socket_id, SERVER);
        assert_eq!(payload, b"UDT4");
    }

    #[test]
    fn message_words_of_spec_3_1() {
        let h = |b, o, m| {
            DataHeader {
                seq: SeqNo::ZERO,
                boundary: b,
                in_order: o,
                msg: MsgNo::new(m),
                timestamp: 0,
                dst_socket_id: 1,
            }
            .msg_word()
        };
        assert_eq!(h(Boundary::Solo, false, 1), 0xC000_0001);
        assert_eq!(h(Boundary::First, true, 42), 0xA000_002A);
        assert_eq!(h(Boundary::Middle, true, 42), 0x2000_002A);
        assert_eq!(h(Boundary::Last, true, 42), 0x6000_002A);
    }

    #[test]
    fn spec_15_3_ack_forms_and_ack2() {
        let full = hex("80 02 00 00 00 00 00 07 00 00 00 00 1a 2b 3c 4d
            0b ad f0 a0 00 00 61 a8 00 00 18 6a 00 00 1f 40 00 01 3c 68 00 01 73 18");
        assert_eq!(
            roundtrip(&full),
            Repr::Control {
                dst_socket_id: CLIENT,
                timestamp: 0,
                control: Control::Ack(Ack::Full {
                    ack_no: AckNo::new(7),
                    ack: SeqNo::new(0x0BAD_F0A0),
                    rtt: 25_000,
                    rtt_var: 6_250,
                    avail: 8000,
                    rate: 81_000,
                    capacity: 95_000
                })
            }
        );
        let ack2 = hex("80 06 00 00 00 00 00 07 00 00 00 00 00 c0 ff ee 00 00 00 00");
        assert_eq!(
            roundtrip(&ack2),
            Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::Ack2 { ack_no: AckNo::new(7) } }
        );
        let medium = hex("80 02 00 00 00 00 00 08 00 00 00 00 1a 2b 3c 4d
            0b ad f0 b0 00 00 5d c0 00 00 13 88 00 00 1f 36");
        assert_eq!(
            roundtrip(&medium),
            Repr::Control {
                dst_socket_id: CLIENT,
                timestamp: 0,
                control: Control::Ack(Ack::Medium {
                    ack_no: AckNo::new(8),
                    ack: SeqNo::new(0x0BAD_F0B0),
                    rtt: 24_000,
                    rtt_var: 5_000,
                    avail: 7990
                })
            }
        );
        let light = hex("80 02 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d 0b ad f0 e0");
        assert_eq!(
            roundtrip(&light),
            Repr::Control {
                dst_socket_id: CLIENT,
                timestamp: 0,
                control: Control::Ack(Ack::Light { ack: SeqNo::new(0x0BAD_F0E0) })
            }
        );
    }

    #[test]
    fn spec_15_4_nak_mixed_list() {
        let bytes = hex("80 03 00 00 00 00 00 00 00 00 00 00 1a 2b 3c 4d
            0b ad f0 10 8b ad f0 12 0b ad f0 15 0b ad f0 20 8b ad f0 30 0b ad f0 31");
        let Repr::Control { control: Control::Nak(list), .. } = roundtrip(&bytes) else { panic!("nak") };
        let s = |x| SeqNo::new(x);
        let ranges = vec![
            (s(0x0BADF010), s(0x0BADF010)),
            (s(0x0BADF012), s(0x0BADF015)),
            (s(0x0BADF020), s(0x0BADF020)),
            (s(0x0BADF030), s(0x0BADF031)),
        ];
        assert_eq!(list.ranges().unwrap(), ranges);
        let mut words = vec![];
        encode_loss(ranges.iter().copied(), usize::MAX, &mut words);
        let info = NakList::encode(&words);
        let nak = Control::Nak(NakList::new_checked(&info).unwrap());
        let emitted = Repr::Control { dst_socket_id: CLIENT, timestamp: 0, control: nak }.to_vec();
        assert_eq!(emitted, bytes);
    }

    #[test]
    fn paper_appendix_nak_examples_decode() {
        let words = |ws: &[u32]| ws.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
        let b = words(&[3, 0x8000_0006, 0xF, 0x12]);
        let l = NakList { bytes: &b };
        let s = |x| SeqNo::new(x);
        assert_eq!(l.ranges().unwrap(), vec![(s(3), s(3)), (s(6), s(15)), (s(18), s(18))]);
        let b = words(&[2, 0x8000_0006, 0xB, 0xE]);
        assert_eq!(NakList { bytes: &b }.ranges().unwrap(), vec![(s(2), s(2)), (s(6), s(11)), (s(14), s(14))]);
    }

    #[test]
    fn nak_two_packet_gap_is_a_range() {
        let mut w = vec![];
        encode_loss([(SeqNo::new(5), SeqNo::new(6))], usize::MAX, &mut w);
        assert_eq!(w, vec![0x8000_0005, 6]);
    }

    #[test]
    fn nak_decoder_rejects_trailing_range_start_and_reversed_range() {
        let b = [0x80u8, 0, 0, 5];
        assert!(NakList { bytes: &b }.ranges().is_err());
        let b: Vec<u8> = [0x8000_0009u32, 5].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert!(NakList { bytes: &b }.ranges().is_err());
        // A range across the 2^31 wrap is fine.
        let b: Vec<u8> = [0xFFFF_FFFEu32, 1].iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(NakList { bytes: &b }.ranges().unwrap(), vec![(SeqNo::new(0x7FFF_FFFE), SeqNo::new(1))]);
    }

    #[test]
    fn spec_15_5_other_control_packets() {
        let ka = hex("80 01 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00");
        assert_eq!(roundtrip(&ka), Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::KeepAlive });
        let sd = hex("80 05 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00");
        assert_eq!(roundtrip(&sd), Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::Shutdown });
        let err = hex("80 08 00 00 00 00 0f a0 00 00 00 00 00 c0 ff ee 00 00 00 00");
        assert_eq!(
            roundtrip(&err),
            Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::ErrorSignal { code: 4000 } }
        );
        let user = hex("ff ff 00 01 00 00 00 00 00 00 00 00 00 c0 ff ee 00 00 00 00");
        let r = Repr::parse_bytes(&user).unwrap();
        assert!(matches!(r, Repr::Control { control: Control::UserDefined { ext_type: 1, info: 0, .. }, .. }));
        let emitted = Repr::Control {
            dst_socket_id: SERVER,
            timestamp: 0,
            control: Control::UserDefined { ext_type: 1, info: 0, body: &[] },
        }
        .to_vec();
        assert_eq!(emitted, user);
        let drop = hex("80 07 00 00 00 00 00 05 00 00 00 00 00 c0 ff ee 0b ad f2 00 0b ad f2 03");
        assert_eq!(
            roundtrip(&drop),
            Repr::Control {
                dst_socket_id: SERVER,
                timestamp: 0,
                control: Control::MsgDropRequest {
                    msg: MsgNo::new(5),
                    first: SeqNo::new(0x0BADF200),
                    last: SeqNo::new(0x0BADF203)
                }
            }
        );
        let warn = Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::CongestionWarning }.to_vec();
        assert_eq!(&warn[..4], &[0x80, 0x04, 0, 0]);
        assert_eq!(warn.len(), 20);
    }

    #[test]
    fn unpadded_16_byte_control_packets_are_accepted() {
        let ka = hex("80 01 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee");
        assert_eq!(
            Repr::parse_bytes(&ka).unwrap(),
            Repr::Control { dst_socket_id: SERVER, timestamp: 0, control: Control::KeepAlive }
        );
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        assert_eq!(Repr::parse_bytes(&[0x80, 0, 0]), Err(Error::Truncated));
        let mut unknown = hex("80 09 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee");
        assert_eq!(Repr::parse_bytes(&unknown), Err(Error::UnknownType(9)));
        unknown[1] = 0x02; // ACK with no body
        assert!(matches!(Repr::parse_bytes(&unknown), Err(Error::BadLength { ctrl_type: 2, len: 0 })));
        let mut ack8 = unknown.clone();
        ack8.extend_from_slice(&[0; 8]);
        assert!(matches!(Repr::parse_bytes(&ack8), Err(Error::BadLength { ctrl_type: 2, len: 8 })));
        let mut hs52 = hex("80 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00");
        hs52.extend_from_slice(&[0; 52]);
        assert!(matches!(Repr::parse_bytes(&hs52), Err(Error::BadLength { ctrl_type: 0, len: 52 })));
        let mut nak5 = hex("80 03 00 00 00 00 00 00 00 00 00 00 00 c0 ff ee");
        nak5.extend_from_slice(&[0; 5]);
        assert!(Repr::parse_bytes(&nak5).is_err());
        assert!(NakList::new_checked(&[]).is_err());
        let mut drop7 = hex("80 07 00 00 00 00 00 05 00 00 00 00 00 c0 ff ee");
        drop7.extend_from_slice(&[0; 7]);
        assert!(matches!(Repr::parse_bytes(&drop7), Err(Error::BadLength { ctrl_type: 7, len: 7 })));
    }

    #[test]
    fn peer_ip_words_reverse_each_group() {
        assert_eq!(peer_ip_words("127.0.0.1".parse().unwrap()), [0x0100_007F, 0, 0, 0]);
        let v6 = peer_ip_words("2001:db8::1".parse().unwrap());
        assert_eq!(v6[0], 0xB80D_0120);
        assert_eq!(v6[3], 0x0100_0000);
    }

    #[test]
    fn payload_size_for_default_mss() {
        assert_eq!(payload_size(1500), 1456);
    }
}
