//! The one interface between a sans-IO protocol of the family and whatever drives it: the
//! runtime's I/O engine over real sockets (`udt::driver`) or a simulator in virtual time
//! (sans-IO: `handle_*` in, `poll_*` out).

use std::net::SocketAddr;

use crate::time::Instant;
use crate::transmit::Transmit;

/// A sans-IO protocol as the runtime drives it (sans-IO: `handle_*` in, `poll_*` out).
pub trait Protocol {
    /// A datagram from `from` arrived at `now`.
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, datagram: &[u8]);
    /// Bytes arrived on the control stream (protocols with one).
    fn handle_control(&mut self, _now: Instant, _bytes: &[u8]) {}
    /// The control stream ended: the peer closed it (`reset: false`) or it failed.
    fn handle_control_closed(&mut self, _now: Instant, _reset: bool) {}
    /// Runs the timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
    /// When [`handle_timeout`](Self::handle_timeout) or `poll_transmit` next has work.
    fn poll_timeout(&self) -> Option<Instant>;
    /// [`poll_timeout`](Self::poll_timeout) less the next paced data departure: when a timer
    /// is due or other output waits. A driver may let paced data out late, what fell due in
    /// one batch, to save wake-ups (the pacer keeps the average rate); it never lets a timer
    /// run late for that. By default every due time is a timer's: nothing is let out late.
    fn poll_timer(&self) -> Option<Instant> {
        self.poll_timeout()
    }
    /// Writes the next output into `buf` and says what it is.
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
}
