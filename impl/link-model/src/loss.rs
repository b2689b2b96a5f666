//! Loss models: independent (Bernoulli) loss and the Gilbert–Elliott two-state burst model.
//!
//! Each model draws from its own seeded [`Xoshiro256`], so a run's loss pattern depends only
//! on the link spec (`seed=`) and the sequence of frames offered — never on timing.
//!
//! Gilbert–Elliott: a Markov chain with a Good and a Bad state, stepped once per frame.
//! From Good the chain moves to Bad with probability `p`, from Bad back to Good with `r`;
//! a frame is lost with probability `h` in Bad and `k` in Good (default 0, the "Gilbert"
//! special case). Mean burst (Bad sojourn) length is `1/r` frames, the stationary share of
//! Bad is `p/(p+r)` and the mean loss rate `(p·h + r·k)/(p+r)`.
//! Note the convention: `h` here is the *loss* probability in Bad; netem's `gemodel` and
//! much of the literature take `1-h` instead.

use prng::Xoshiro256;

/// What a link spec asks for (`loss=`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossSpec {
    /// No loss.
    None,
    /// Each frame lost independently with probability `p`.
    Random {
        /// The loss probability of each frame.
        p: f64,
    },
    /// Gilbert–Elliott with transition probabilities `p` (Good→Bad), `r` (Bad→Good) and
    /// loss probabilities `h` (in Bad) and `k` (in Good).
    GilbertElliott {
        /// Probability of moving from Good to Bad, per frame.
        p: f64,
        /// Probability of moving from Bad back to Good, per frame.
        r: f64,
        /// Loss probability of a frame in Bad.
        h: f64,
        /// Loss probability of a frame in Good.
        k: f64,
    },
}

impl LossSpec {
    /// Long-run fraction of frames lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::None => 0.0,
            LossSpec::Random { p } => p,
            LossSpec::GilbertElliott { p, r, h, k } => {
                if p + r == 0.0 {
                    k
                } else {
                    (p * h + r * k) / (p + r)
                }
            }
        }
    }
}

/// A running loss model; call [`LossModel::handle_frame`] once per offered frame.
#[derive(Debug, Clone)]
pub struct LossModel {
    spec: LossSpec,
    rng: Xoshiro256,
    bad: bool,
}

impl LossModel {
    /// The Gilbert–Elliott chain starts in Good.
    pub fn new(spec: LossSpec, seed: u64) -> Self {
        Self { spec, rng: Xoshiro256::seed_from_u64(seed), bad: false }
    }

    /// Steps the model for one frame; returns true if the frame is lost.
    pub fn handle_frame(&mut self) -> bool {
        match self.spec {
            LossSpec::None => false,
            LossSpec::Random { p } => self.rng.chance(p),
            LossSpec::GilbertElliott { p, r, h, k } => {
                // Transition first, then draw the loss in the new state: a burst can start
                // with the very frame that triggered it.
                self.bad = if self.bad { !self.rng.chance(r) } else { self.rng.chance(p) };
                self.rng.chance(if self.bad { h } else { k })
            }
        }
    }

    /// Whether the Gilbert–Elliott chain is in its Bad state (never for the other models).
    pub fn in_bad_state(&self) -> bool {
        self.bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn losses(spec: LossSpec, seed: u64, n: usize) -> Vec<bool> {
        let mut m = LossModel::new(spec, seed);
        (0..n).map(|_| m.handle_frame()).collect()
    }

    /// Lengths of runs of consecutive losses.
    fn bursts(l: &[bool]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut run = 0;
        for &x in l {
            if x {
                run += 1
            } else if run > 0 {
                out.push(run);
                run = 0
            }
        }
        if run > 0 {
            out.push(run)
        }
        out
    }

    #[test]
    fn no_loss_loses_nothing() {
        assert!(losses(LossSpec::None, 1, 10_000).iter().all(|&x| !x));
    }

    #[test]
    fn random_loss_rate_matches_p_with_fixed_seed() {
        let n = 200_000;
        let lost = losses(LossSpec::Random { p: 0.01 }, 1, n).iter().filter(|&&x| x).count();
        // 4 sigma of a binomial(200000, 0.01) is ~178.
        assert!((lost as i64 - 2000).abs() < 180, "lost {lost}");
    }

    #[test]
    fn random_loss_is_reproducible_from_the_seed() {
        let spec = LossSpec::Random { p: 0.1 };
        assert_eq!(losses(spec, 42, 5000), losses(spec, 42, 5000));
        assert_ne!(losses(spec, 42, 5000), losses(spec, 43, 5000));
    }

    #[test]
    fn random_loss_is_not_bursty() {
        let l = losses(LossSpec::Random { p: 0.01 }, 3, 200_000);
        let b = bursts(&l);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(mean < 1.05, "mean burst {mean}");
    }

    #[test]
    fn gilbert_elliott_bursts_have_mean_length_one_over_r() {
        // h = 1: every frame in Bad is lost, so loss bursts are exactly Bad sojourns.
        let spec = LossSpec::GilbertElliott { p: 0.002, r: 0.25, h: 1.0, k: 0.0 };
        let l = losses(spec, 1, 1_000_000);
        let b = bursts(&l);
        let mean = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!((mean - 4.0).abs() < 0.3, "mean burst {mean}, want 1/r = 4");
        let rate = l.iter().filter(|&&x| x).count() as f64 / l.len() as f64;
        let want = spec.mean_loss();
        assert!((rate - want).abs() < 0.1 * want, "loss rate {rate}, want {want}");
    }

    #[test]
    fn gilbert_elliott_loss_in_bad_state_scales_the_rate() {
        let spec = LossSpec::GilbertElliott { p: 0.01, r: 0.1, h: 0.5, k: 0.0 };
        let l = losses(spec, 9, 1_000_000);
        let rate = l.iter().filter(|&&x| x).count() as f64 / l.len() as f64;
        let want = 0.01 / 0.11 * 0.5;
        assert!((rate - want).abs() < 0.05 * want, "loss rate {rate}, want {want}");
    }

    #[test]
    fn gilbert_elliott_is_burstier_than_random_at_equal_mean() {
        let ge = LossSpec::GilbertElliott { p: 0.001, r: 0.1, h: 1.0, k: 0.0 };
        let rnd = LossSpec::Random { p: ge.mean_loss() };
        let mb = |s| {
            let b = bursts(&losses(s, 5, 500_000));
            b.iter().sum::<usize>() as f64 / b.len() as f64
        };
        assert!(mb(ge) > 5.0 * mb(rnd));
    }
}
