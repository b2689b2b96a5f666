//! Reordering: with probability `p` a frame is held back for an extra `reorder_delay` after
//! the bottleneck (`reorder=P,reorder_delay=D`), so the frames admitted in the following `D`
//! overtake it.
//!
//! The hold comes after the serializer, as netem reorders after its queue: a held frame left
//! the bottleneck on time and is not charged against the rate or the queue a second time; it
//! simply propagates `D` longer. A held frame is overtaken only if another frame is released
//! within `D` after its normal release time, so on an idle link a held frame is just late, and
//! `reorder=1` delays every frame alike and reorders nothing.
//!
//! As for [`crate::duplicate`], the decision is drawn for every offered frame from a stream of
//! its own (the direction's `seed` mixed with [`STREAM`]): which arrivals are held back depends
//! on the seed alone, and a spec without `reorder=` draws nothing.

use crate::queue::Nanos;
use prng::Xoshiro256;

/// Mixed into the direction's seed for this stream ("reorder" in ASCII).
pub const STREAM: u64 = 0x7265_6f72_6465_7200;

/// A running reordering model; call [`Reorder::handle_frame`] once per offered frame.
#[derive(Debug, Clone)]
pub struct Reorder {
    p: f64,
    hold_ns: Nanos,
    rng: Xoshiro256,
}

impl Reorder {
    /// Holds back with probability `p` by `hold_ns`, drawing from the direction's `seed` mixed
    /// with [`STREAM`].
    pub fn new(p: f64, hold_ns: Nanos, seed: u64) -> Self {
        Self { p, hold_ns, rng: Xoshiro256::seed_from_u64(seed ^ STREAM) }
    }

    /// The extra delay to hold this frame back by, if it is to be held back.
    pub fn handle_frame(&mut self) -> Option<Nanos> {
        (self.p > 0.0 && self.rng.chance(self.p)).then_some(self.hold_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_rate_matches_p_with_fixed_seed() {
        let mut r = Reorder::new(0.1, 2_000_000, 1);
        let held: Vec<_> = (0..100_000).filter_map(|_| r.handle_frame()).collect();
        assert!(held.iter().all(|&d| d == 2_000_000));
        // Pinned; 4 sigma of a binomial(100000, 0.1) is ~380.
        assert_eq!(held.len(), 9944);
    }

    #[test]
    fn zero_holds_nothing() {
        let mut r = Reorder::new(0.0, 1_000_000, 1);
        assert!((0..10_000).all(|_| r.handle_frame().is_none()));
    }
}
