//! The smoothed round-trip time and its variation, as UDT 4.11 keeps them (UDT4.md §8.5,
//! §8.6 step 6) in integer microseconds.
//!
//! UDT's sender folds in the RTT field of every full or medium ACK, its receiver each ACK2's
//! measured round trip. SABUL estimates the RTT once at setup and never again (SABUL.md §2
//! step 5): [`RttEstimator::new`] with that value, and no samples.
//!
//! ```
//! use transfer::rtt::RttEstimator;
//! use transfer::time::Duration;
//!
//! let mut rtt = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(50));
//! rtt.update(Duration::from_millis(20));
//! assert_eq!(rtt.rtt(), Duration::from_millis(90));     // ⅞·100 + ⅛·20
//! assert_eq!(rtt.var(), Duration::from_micros(57_500)); // ¾·50 + ¼·|100 − 20|
//! assert_eq!(rtt.rto(), Duration::from_millis(320));    // RTT + 4·RTTVar
//! ```

use crate::time::{micros, Duration};

/// The longest round trip a sample may report: longer ones count as this (UDT4.md §13.5).
/// A peer controls the RTT field of its ACKs, and RTT and RTTVar set the EXP period (§9.4):
/// one ACK claiming 2³¹ − 1 µs put a sender's EXP ~40 minutes out, past the peer's
/// dead-peer rule (~46 s), so that a retransmission lost just after it was never sent again.
/// With samples held to 10 s one forged ACK moves the EXP period to at most ~12 s. No path the
/// papers or the testbed know comes near it (the longest is 1 s); a genuine RTT beyond it is
/// under-estimated, which costs spurious EXP retransmissions, not the connection.
pub const MAX_SAMPLE: Duration = Duration::from_secs(10);

/// Smoothed RTT and RTT variation, µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    rtt: u32,
    var: u32,
}

impl RttEstimator {
    /// Starts from `rtt` and `var` (UDT 4.11: 100 ms and 50 ms), each saturated to `u32` µs.
    pub fn new(rtt: Duration, var: Duration) -> RttEstimator {
        let us = |d: Duration| u32::try_from(micros(d)).unwrap_or(u32::MAX);
        RttEstimator { rtt: us(rtt), var: us(var) }
    }

    /// Folds in one sample, held to [`MAX_SAMPLE`], with 4.11's integer EWMAs:
    /// `RTTVar ← ¾·RTTVar + ¼·|RTT − sample|`, then `RTT ← ⅞·RTT + ⅛·sample`.
    pub fn update(&mut self, sample: Duration) {
        let sample = micros(sample.min(MAX_SAMPLE)) as i64;
        let (rtt, var) = (i64::from(self.rtt), i64::from(self.var));
        self.var = ((3 * var + (sample - rtt).abs()) >> 2) as u32;
        self.rtt = ((7 * rtt + sample) >> 3) as u32;
    }

    /// The smoothed RTT.
    pub fn rtt(&self) -> Duration {
        Duration::from_micros(self.rtt.into())
    }

    /// The smoothed RTT variation.
    pub fn var(&self) -> Duration {
        Duration::from_micros(self.var.into())
    }

    /// The smoothed RTT in µs, as ACKs carry it (UDT4.md §5.3).
    pub fn rtt_us(&self) -> u32 {
        self.rtt
    }

    /// The RTT variation in µs, as ACKs carry it.
    pub fn var_us(&self) -> u32 {
        self.var
    }

    /// `RTT + 4·RTTVar`: UDT's unit for the EXP period, the NAK interval and the repeat of an
    /// unchanged ACK (§8.3, §8.4, §9.4).
    pub fn rto(&self) -> Duration {
        Duration::from_micros(u64::from(self.rtt) + 4 * u64::from(self.var))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_beyond_the_longest_round_trip_count_as_it_and_nothing_overflows() {
        let mut r = RttEstimator::new(Duration::MAX, Duration::ZERO);
        assert_eq!(r.rtt_us(), u32::MAX);
        r = RttEstimator::new(Duration::from_micros(8), Duration::ZERO);
        r.update(Duration::MAX);
        assert_eq!(r.rtt_us(), ((7 * 8 + micros(MAX_SAMPLE)) >> 3) as u32);
        r.update(Duration::ZERO);
        assert!(r.rto() > r.rtt());
    }

    #[test]
    fn one_absurd_sample_moves_the_timeout_unit_by_at_most_the_longest_round_trip() {
        // 4.11's defaults, then an ACK claiming 2^31 - 1 µs.
        let mut r = RttEstimator::new(Duration::from_millis(100), Duration::from_millis(50));
        r.update(Duration::from_micros(i32::MAX as u64));
        assert!(r.rto() < Duration::from_secs(12), "RTT + 4·RTTVar = {:?}", r.rto());
    }
}
