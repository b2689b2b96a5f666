//! A fixed sending rate without congestion control (FRTP.md §4; SABUL's fixed-rate mode).
//!
//! For dedicated circuits the FRTP paper sends at a constant rate and relies on the
//! receiver's flow window alone. `FixedRate` keeps `P` constant whatever happens and
//! offers a window so large that only the flow window limits the sender.

use super::CongestionControl;

/// Window reported by [`FixedRate`]: large enough never to bind, small enough to convert to
/// any integer type without saturation surprises.
pub const FIXED_RATE_WINDOW: f64 = i32::MAX as f64;

/// Constant inter-packet period, no congestion response.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FixedRate {
    /// Inter-packet period in µs (e.g. 12 µs ≈ 1 Gb/s of 1500-byte packets).
    pub period_us: f64,
}

impl FixedRate {
    /// A controller sending one packet every `period_us` µs. Non-finite or negative values
    /// are taken as 0 (unpaced).
    pub fn new(period_us: f64) -> FixedRate {
        FixedRate { period_us: if period_us.is_finite() && period_us > 0.0 { period_us } else { 0.0 } }
    }

    /// A controller sending `packets_per_sec` packets per second.
    pub fn from_packet_rate(packets_per_sec: f64) -> FixedRate {
        FixedRate::new(1e6 / packets_per_sec)
    }
}

impl CongestionControl for FixedRate {
    fn name(&self) -> &'static str {
        "fixed-rate"
    }
    fn pacing_period_us(&self) -> f64 {
        self.period_us
    }
    fn window(&self) -> f64 {
        FIXED_RATE_WINDOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::CcInput;
    use crate::seq::SeqNo;
    use crate::time::{Duration, Instant};

    #[test]
    fn fixed_rate_ignores_every_event() {
        let mut cc = FixedRate::new(12.0);
        let input = CcInput { mss: 1500, ..CcInput::default() };
        cc.on_connect(&input);
        cc.on_loss(&input, &[(SeqNo::new(1), SeqNo::new(9))]);
        cc.on_timeout(&input);
        cc.on_ack(&CcInput { now: Instant::from_micros(50_000), ..input }, SeqNo::new(10));
        assert_eq!(cc.pacing_period_us(), 12.0);
        assert!(cc.window() >= 1e9);
        assert_eq!(cc.frozen_until(), None);
        assert_eq!(cc.ack_period(), Duration::from_millis(10));
    }

    #[test]
    fn bad_periods_become_unpaced() {
        assert_eq!(FixedRate::new(-1.0).period_us, 0.0);
        assert_eq!(FixedRate::new(f64::NAN).period_us, 0.0);
        assert_eq!(FixedRate::from_packet_rate(0.0).period_us, 0.0);
        assert_eq!(FixedRate::from_packet_rate(50_000.0).period_us, 20.0);
    }
}
