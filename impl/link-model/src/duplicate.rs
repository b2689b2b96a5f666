//! Duplication: a frame that gets through the link is delivered twice with probability `p`
//! (`duplicate=`), the copy right behind the original.
//!
//! The decision is drawn for every offered frame, lost or not, from a stream of its own
//! (the direction's `seed` mixed with [`STREAM`]), so which arrivals are duplicated depends on
//! the seed alone — not on loss, the queue or timing — and the loss model draws exactly what
//! it drew before duplication existed. A spec without `duplicate=` draws nothing.

use prng::Xoshiro256;

/// Mixed into the direction's seed for this stream ("duplicat" in ASCII).
pub const STREAM: u64 = 0x6475_706c_6963_6174;

/// A running duplication model; call [`Duplicate::handle_frame`] once per offered frame.
#[derive(Debug, Clone)]
pub struct Duplicate {
    p: f64,
    rng: Xoshiro256,
}

impl Duplicate {
    /// Duplicates with probability `p`, drawing from the direction's `seed` mixed with [`STREAM`].
    pub fn new(p: f64, seed: u64) -> Self {
        Self { p, rng: Xoshiro256::seed_from_u64(seed ^ STREAM) }
    }

    /// True if this frame, should it get through, is to be delivered twice.
    pub fn handle_frame(&mut self) -> bool {
        self.p > 0.0 && self.rng.chance(self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(p: f64, seed: u64, n: usize) -> Vec<bool> {
        let mut d = Duplicate::new(p, seed);
        (0..n).map(|_| d.handle_frame()).collect()
    }

    #[test]
    fn duplicate_rate_matches_p_with_fixed_seed() {
        let n = draws(0.05, 1, 100_000).iter().filter(|&&x| x).count();
        // Pinned; 4 sigma of a binomial(100000, 0.05) is ~276.
        assert_eq!(n, 5026);
    }

    #[test]
    fn zero_never_duplicates_and_one_always_does() {
        assert!(draws(0.0, 1, 10_000).iter().all(|&x| !x));
        assert!(draws(1.0, 1, 10_000).iter().all(|&x| x));
    }

    #[test]
    fn stream_differs_from_the_loss_stream_of_the_same_seed() {
        let mut loss = Xoshiro256::seed_from_u64(3);
        let loss: Vec<bool> = (0..5000).map(|_| loss.chance(0.1)).collect();
        assert_ne!(draws(0.1, 3, 5000), loss);
        assert_eq!(draws(0.1, 3, 5000), draws(0.1, 3, 5000));
    }
}
