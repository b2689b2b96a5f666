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

    /// Folds in one sample with 4.11's integer EWMAs: `RTTVar ← ¾·RTTVar + ¼·|RTT − sample|`,
    /// then `RTT ← ⅞·RTT + ⅛·sample`.
    pub fn update(&mut self, sample: Duration) {
        let (rtt, var, sample) = (i64::from(self.rtt), i64::from(self.var), micros(sample).min(i32::MAX as u64) as i64);
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
    fn samples_beyond_i32_are_clamped_and_nothing_overflows() {
        let mut r = RttEstimator::new(Duration::MAX, Duration::ZERO);
        assert_eq!(r.rtt_us(), u32::MAX);
        r = RttEstimator::new(Duration::from_micros(8), Duration::ZERO);
        r.update(Duration::MAX);
        assert_eq!(r.rtt_us(), ((7 * 8 + i32::MAX as i64) >> 3) as u32);
        r.update(Duration::ZERO);
        assert!(r.rto() > r.rtt());
    }
}
