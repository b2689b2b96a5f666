//! What a protocol core hands its driver to send: a [`Transmit`] describes the bytes
//! `poll_transmit` just wrote into the driver's buffer.
//!
//! It names the driver's socket the bytes leave from, because the family's protocols do not
//! all use one: UDT sends everything over one UDP socket; SABUL sends DATA over UDP and its
//! control packets over a TCP connection (SABUL.md §1); FRTP does the same with each on its
//! own network interface (FRTP.md §1).

use std::net::SocketAddr;

/// The driver socket a transmit leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Source {
    /// The datagram socket: UDP (UDT: every packet; SABUL and FRTP: DATA).
    #[default]
    Data,
    /// The control connection: a byte stream (SABUL and FRTP: the TCP connection carrying ACK,
    /// ERR, SYN and the option block; on FRTP's second interface).
    Control,
}

/// One datagram, or one piece of a control stream, ready to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The peer it is for (for [`Source::Control`], the stream's peer).
    pub destination: SocketAddr,
    /// Bytes written at the start of the buffer given to `poll_transmit`.
    pub size: usize,
    /// The driver socket the bytes leave from.
    pub source: Source,
}
