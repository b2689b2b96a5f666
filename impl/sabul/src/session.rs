//! What a SABUL session tells its driver (SABUL.md §10): the events of both roles and the
//! errors that end a session, and the queue of control-stream bytes both roles write.

use core::fmt;

use transfer::seq::SeqNo;

use crate::control_stream::StreamError;

/// What the driver must do or report. Polled with `poll_event` on [`crate::Sender`] and
/// [`crate::Receiver`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The option block was echoed (sender) or the echo accepted (receiver): data may flow.
    Connected,
    /// Sender: everything is acknowledged; half-close the control stream (`shutdown(SHUT_WR)`,
    /// a FIN) and keep reading it (§10.1 step 1).
    ShutdownWrite,
    /// The session ended normally (§10.1): the sender read the receiver's FIN or drained for
    /// 1 s; the receiver read the FIN and everything before it is readable. Close the sockets
    /// (no reset: nothing is left unread).
    Finished,
    /// The session aborted (§10.2): reset the control connection (`SO_LINGER` {on, 0}, then
    /// `close()`) unless the error came from it, and report the error. A receiver still
    /// delivers every byte before its ACK point.
    Aborted(SessionError),
}

/// Why a session ended abnormally (§10.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// The control stream broke a rule of §3 (framing, option block, echo).
    Protocol(StreamError),
    /// An ERR listed a number later than the largest sent (§5.5).
    ErrBeyondSent {
        /// The number the ERR listed.
        seq: SeqNo,
        /// The next number the sender would have sent.
        next_seq: SeqNo,
    },
    /// An ACK later than `NextSeq` (§5.5).
    AckBeyondSent {
        /// The ACK's number.
        ack: SeqNo,
        /// The next number the sender would have sent.
        next_seq: SeqNo,
    },
    /// Ten consecutive EXP events: the receiver or its data path is gone (§5.5).
    ExpGaveUp {
        /// The ACK point when the sender gave up.
        last_ack: SeqNo,
        /// The next number the sender would have sent.
        next_seq: SeqNo,
    },
    /// The peer closed (FIN) or reset the control connection before the normal end (§10.2).
    PeerClosed {
        /// A reset (RST), not a FIN.
        reset: bool,
        /// The ACK point when the stream ended.
        ack: SeqNo,
        /// The next number the sender would send (for the receiver: the next it expected).
        next_seq: SeqNo,
    },
    /// No option block within 1 s of the accept, no echo within 10 s of connecting, or a frame
    /// not complete 1 s after its first byte (§10.3).
    Timeout(&'static str),
    /// Receiver: the stream ended (FIN) with losses outstanding; bytes before `ack` were
    /// delivered (§10.1).
    Incomplete {
        /// The ACK point.
        ack: SeqNo,
        /// Packets still on the loss list.
        missing: u32,
    },
    /// FRTP sender: the block asks for a rate above the sender's maximum (FRTP.md §2 step 3).
    RateRefused {
        /// The rate the block asked for, bits/s.
        rate_bps: u64,
        /// The sender's maximum, bits/s.
        max_bps: u64,
    },
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::Protocol(e) => write!(f, "{e}"),
            SessionError::ErrBeyondSent { seq, next_seq } => {
                write!(f, "ERR lists {seq}, beyond the {next_seq} packets sent (SABUL.md §5.5); aborting")
            }
            SessionError::AckBeyondSent { ack, next_seq } => {
                write!(f, "ACK {ack} is beyond the {next_seq} packets sent (SABUL.md §5.5); aborting")
            }
            SessionError::ExpGaveUp { last_ack, next_seq } => write!(
                f,
                "no ACK or ERR for 10 s at ACK {last_ack} of {next_seq} packets: the receiver is gone, or the data or \
                 control path to it is down (SABUL.md §5.5)"
            ),
            SessionError::PeerClosed { reset, ack, next_seq } => write!(
                f,
                "the peer {} the control connection at ACK {ack} of {next_seq} packets (SABUL.md §10.2)",
                if *reset { "reset" } else { "closed" }
            ),
            SessionError::Timeout(what) => write!(f, "timed out waiting for {what} (SABUL.md §10.3)"),
            SessionError::RateRefused { rate_bps, max_bps } => write!(
                f,
                "the receiver asks for {rate_bps} bit/s; this sender honours at most {max_bps} bit/s (FRTP.md §2 step 3); closing"
            ),
            SessionError::Incomplete { ack, missing } => write!(
                f,
                "the sender closed with {missing} packets missing; delivered everything before {ack} (SABUL.md §10.1)"
            ),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<StreamError> for SessionError {
    fn from(e: StreamError) -> SessionError {
        SessionError::Protocol(e)
    }
}

/// Bytes queued for the control stream, handed out by `poll_transmit` as `Source::Control`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ControlQueue {
    bytes: Vec<u8>,
    start: usize,
}

impl ControlQueue {
    pub(crate) fn push(&mut self, emit: impl FnOnce(&mut Vec<u8>)) {
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        }
        emit(&mut self.bytes);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.bytes.len()
    }

    /// Copies as much as fits into `buf`; returns the count.
    pub(crate) fn pop_into(&mut self, buf: &mut [u8]) -> usize {
        let n = (self.bytes.len() - self.start).min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[self.start..self.start + n]);
        self.start += n;
        n
    }
}
