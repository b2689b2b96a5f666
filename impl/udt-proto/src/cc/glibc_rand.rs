//! The first output of glibc's `rand()` after `srand(seed)` (UDT4.md §12.4).
//!
//! 4.11's CUDTCC draws its decrease spacing with `srand(LastDecSeq); rand()`. Reproducing
//! glibc's default generator (`TYPE_3`, an additive feedback generator of degree 31 seeded by
//! a Park–Miller LCG and warmed up by 310 discarded outputs) makes our controller's decisions
//! identical to 4.11's on the same inputs, with no global state.

/// glibc's `RAND_MAX`.
pub const RAND_MAX: u32 = 0x7FFF_FFFF;

/// Returns what `srand(seed); rand()` returns with glibc.
pub fn glibc_rand_first(seed: u32) -> u32 {
    let mut r = [0u32; 345];
    let seed = if seed == 0 { 1 } else { seed };
    r[0] = seed;
    // glibc's `__srandom_r` keeps `word` in an `int32_t` (so seeds ≥ 2^31 start negative) and
    // evaluates Schrage's step in `long`.
    let mut word = seed as i32;
    for slot in r.iter_mut().take(31).skip(1) {
        let (hi, lo) = (i64::from(word) / 127_773, i64::from(word) % 127_773);
        word = (16_807 * lo - 2_836 * hi) as i32;
        if word < 0 {
            word = word.wrapping_add(2_147_483_647);
        }
        *slot = word as u32;
    }
    for i in 31..34 {
        r[i] = r[i - 31];
    }
    for i in 34..345 {
        r[i] = r[i - 31].wrapping_add(r[i - 3]);
    }
    r[344] >> 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Well-known glibc outputs: srand(1) → 1804289383; srand(0) is srand(1).
        assert_eq!(glibc_rand_first(1), 1_804_289_383);
        assert_eq!(glibc_rand_first(0), 1_804_289_383);
        for s in [2, 42, 0x7FFF_FFFF, 0xFFFF_FFFF] {
            assert!(glibc_rand_first(s) <= RAND_MAX);
        }
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn matches_the_real_glibc() {
        extern "C" {
            fn srand(seed: u32);
            fn rand() -> i32;
        }
        let seeds = [
            0u32,
            1,
            2,
            3,
            42,
            12_345,
            127_773,
            127_774,
            0x0BAD_F00D,
            0x3FFF_FFFF,
            0x7FFF_FFFE,
            0x7FFF_FFFF,
            0x8000_0000,
            0xDEAD_BEEF,
            0xFFFF_FFFF,
        ];
        for seed in seeds {
            // SAFETY: plain libc calls; no other test in this crate touches glibc's global
            // generator.
            let want = unsafe {
                srand(seed);
                rand()
            };
            assert_eq!(glibc_rand_first(seed), want as u32, "seed {seed:#x}");
        }
    }
}
