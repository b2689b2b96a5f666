//! What can go wrong with a UDT socket, phrased so that the message says what to do.

use std::fmt;
use std::io;
use std::net::SocketAddr;

use udt_proto::connection::{BrokenReason, ConnectError};

/// Errors of the blocking socket API.
#[derive(Debug)]
pub enum UdtError {
    /// The address could not be parsed or resolved.
    BadAddress {
        /// The address as given.
        addr: String,
        /// Why it was not accepted.
        reason: String,
    },
    /// The UDP port could not be bound.
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error from bind(2).
        source: io::Error,
    },
    /// The connection options are out of range.
    InvalidConfig(String),
    /// No UDT peer answered the handshake in time.
    ConnectTimedOut {
        /// The address connected to.
        peer: SocketAddr,
    },
    /// The peer answered but refused the connection.
    ConnectRefused {
        /// The address connected to.
        peer: SocketAddr,
        /// How the handshake failed.
        reason: ConnectError,
    },
    /// The established connection broke.
    Broken(BrokenReason),
    /// The peer closed the connection; nothing more can be sent.
    PeerClosed,
    /// The operation needs a connected socket (or a listening one for `accept`).
    NotConnected,
    /// `bind`, `listen` or `connect` on a socket that is already past that stage.
    InvalidState(&'static str),
    /// The socket was closed by this side.
    Closed,
    /// A send or receive timeout set on the socket expired.
    TimedOut,
    /// A DGRAM message larger than the send buffer can ever hold.
    MessageTooLarge {
        /// The message's length, bytes.
        len: usize,
        /// The most a message may be, bytes.
        max: usize,
    },
    /// The I/O thread of the socket's UDP port failed.
    Io(io::Error),
}

/// The result of a socket operation.
pub type Result<T> = std::result::Result<T, UdtError>;

impl fmt::Display for UdtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UdtError::BadAddress { addr, reason } => {
                write!(f, "bad address {addr:?}: {reason} (use HOST:PORT, e.g. 127.0.0.1:9000 or [::1]:9000)")
            }
            UdtError::Bind { addr, source } => {
                write!(f, "cannot bind UDP {addr}: {source} (is another program using the port? pick another one)")
            }
            UdtError::InvalidConfig(m) => write!(f, "invalid socket option: {m}"),
            UdtError::ConnectTimedOut { peer } => write!(
                f,
                "connection to {peer} timed out: no UDT peer answered (check the address and that the peer is listening, and that no firewall drops UDP)"
            ),
            UdtError::ConnectRefused { peer, reason } => write!(f, "connection to {peer} refused: {reason}"),
            UdtError::Broken(BrokenReason::PeerSilent) => {
                f.write_str("connection broken: the peer stopped answering (it crashed or the network path failed); reconnect")
            }
            UdtError::Broken(BrokenReason::PeerShutdownWithUnackedData) => {
                f.write_str("connection broken: the peer closed before all our data was acknowledged; resend the rest on a new connection")
            }
            UdtError::Broken(BrokenReason::PeerClosedWithDataMissing) => f.write_str(
                "connection broken: the peer closed while data it had sent was still missing here; what arrived before the gap was delivered, the rest is lost (resend it on a new connection)",
            ),
            UdtError::Broken(BrokenReason::LingerExpired) => f.write_str(
                "connection closed with data still unacknowledged: the linger time ran out (raise the linger time or check the path)",
            ),
            UdtError::Broken(BrokenReason::PeerError(code)) => {
                write!(f, "connection broken: the peer signalled error {code}; reconnect")
            }
            UdtError::PeerClosed => f.write_str("the peer closed the connection; open a new one to send more"),
            UdtError::NotConnected => f.write_str("socket is not connected: call connect() or accept() first"),
            UdtError::InvalidState(m) => write!(f, "invalid socket state: {m}"),
            UdtError::Closed => f.write_str("socket already closed"),
            UdtError::TimedOut => f.write_str("operation timed out (the socket's send/receive timeout expired)"),
            UdtError::MessageTooLarge { len, max } => {
                write!(f, "message of {len} bytes is larger than the send buffer ({max} bytes); raise the send buffer or split it")
            }
            UdtError::Io(e) => write!(f, "UDP I/O error: {e}"),
        }
    }
}

impl std::error::Error for UdtError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UdtError::Bind { source, .. } | UdtError::Io(source) => Some(source),
            _ => None,
        }
    }
}

impl From<io::Error> for UdtError {
    fn from(e: io::Error) -> Self {
        UdtError::Io(e)
    }
}

impl From<UdtError> for io::Error {
    fn from(e: UdtError) -> io::Error {
        let kind = match &e {
            UdtError::BadAddress { .. } | UdtError::InvalidConfig(_) => io::ErrorKind::InvalidInput,
            UdtError::Bind { source, .. } => source.kind(),
            UdtError::ConnectTimedOut { .. } | UdtError::TimedOut => io::ErrorKind::TimedOut,
            UdtError::ConnectRefused { .. } => io::ErrorKind::ConnectionRefused,
            UdtError::Broken(_) => io::ErrorKind::ConnectionReset,
            UdtError::PeerClosed => io::ErrorKind::BrokenPipe,
            UdtError::NotConnected | UdtError::Closed => io::ErrorKind::NotConnected,
            UdtError::InvalidState(_) => io::ErrorKind::Other,
            UdtError::MessageTooLarge { .. } => io::ErrorKind::InvalidInput,
            UdtError::Io(e) => return io::Error::new(e.kind(), e.to_string()),
        };
        io::Error::new(kind, e)
    }
}

impl UdtError {
    pub(crate) fn from_connect(peer: SocketAddr, e: ConnectError) -> UdtError {
        match e {
            ConnectError::TimedOut => UdtError::ConnectTimedOut { peer },
            other => UdtError::ConnectRefused { peer, reason: other },
        }
    }
}
