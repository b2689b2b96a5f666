//! Time as the protocol cores see it: an [`Instant`] on the driver's clock and the standard
//! [`Duration`].
//!
//! The cores own no clock (they are sans-IO): every entry point takes `now`. The driver
//! picks the epoch — the runtime counts from its start plus one second, the simulator runs a
//! virtual clock — and the core only compares instants and adds durations. Resolution is one
//! microsecond, the unit of every timer, field and formula of the specs (UDT 4.11 and SABUL
//! 2003 both count µs): a [`Duration`] added to an instant is truncated to whole µs.
//!
//! Arithmetic saturates rather than panics, so that a forged or absurd value from the peer
//! (a TTL of `u64::MAX` µs, an instant far in the past) cannot take the core down.
//!
//! ```
//! use transfer::time::{Duration, Instant};
//!
//! let t = Instant::from_micros(1_000_000);
//! let due = t + Duration::from_millis(10);
//! assert_eq!(due.as_micros(), 1_010_000);
//! assert_eq!(due - t, Duration::from_micros(10_000));
//! assert_eq!(t - due, Duration::ZERO); // saturates, like std's `duration_since`
//! ```

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

pub use core::time::Duration;

/// A point in time on the driver's clock, in whole microseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// Later than any time a driver will reach (half a million years of µs).
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `us` µs after the driver's epoch.
    #[inline]
    pub const fn from_micros(us: u64) -> Instant {
        Instant(us)
    }

    /// Microseconds since the driver's epoch.
    #[inline]
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// `self − earlier`, or zero when `earlier` is later.
    #[inline]
    pub fn duration_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` past [`Instant::MAX`].
    #[inline]
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        u64::try_from(d.as_micros()).ok().and_then(|us| self.0.checked_add(us)).map(Instant)
    }
}

/// Whole microseconds of `d`, saturated to `u64`.
#[inline]
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`].
    #[inline]
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(micros(d)))
    }
}

impl AddAssign<Duration> for Instant {
    #[inline]
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the epoch.
    #[inline]
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(micros(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// [`Instant::duration_since`]: zero when `rhs` is later.
    #[inline]
    fn sub(self, rhs: Instant) -> Duration {
        self.duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Instant::from_micros(5);
        assert_eq!(t - Duration::from_micros(9), Instant::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(t + Duration::MAX, Instant::MAX);
        assert_eq!(t.checked_add(Duration::MAX), None);
        assert_eq!(t.checked_add(Duration::from_micros(1)), Some(Instant::from_micros(6)));
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
    }

    #[test]
    fn durations_are_truncated_to_whole_microseconds() {
        let t = Instant::from_micros(10);
        assert_eq!(t + Duration::from_nanos(1_999), Instant::from_micros(11));
        assert_eq!(micros(Duration::from_nanos(999)), 0);
        assert_eq!(format!("{:?}", Instant::from_micros(1_000_042)), "1.000042s");
    }
}
