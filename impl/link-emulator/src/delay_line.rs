//! One direction of an emulated link, sans-IO: loss, then the bottleneck queue, then a fixed
//! propagation delay.
//!
//! Frames go in with [`DelayLine::handle_frame`] stamped with their arrival time and come out
//! of [`DelayLine::poll_frame`] once their release time has come; [`DelayLine::poll_timeout`]
//! tells the driver when that is. A frame admitted at `t` is released at
//! `departure(t) + delay` (see [`crate::queue`]); departures never decrease, so frames leave
//! in the order they came. Loss is decided before the queue, as netem does: a lost frame
//! takes no queue space and no link time.
//!
//! ```
//! use link_emulator::{delay_line::{DelayLine, Admission}, link_spec::LinkSpec};
//! let spec: LinkSpec = "delay=20ms,rate=100mbit".parse().unwrap();
//! let mut line = DelayLine::new(&spec);
//! assert!(matches!(line.handle_frame(0, 1500, "frame"), Admission::Queued { .. }));
//! // 120 µs serialization + 20 ms propagation.
//! assert_eq!(line.poll_timeout(), Some(20_120_000));
//! assert_eq!(line.poll_frame(20_119_999), None);
//! assert_eq!(line.poll_frame(20_120_000), Some("frame"));
//! ```

use crate::link_spec::LinkSpec;
use crate::loss::LossModel;
use crate::queue::{Nanos, SerializationQueue};
use std::collections::VecDeque;

/// What happened to an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Will be released at `release_at`, after `queue_delay` ns waiting for and in
    /// serialization.
    Queued {
        release_at: Nanos,
        queue_delay: Nanos,
    },
    DroppedLoss,
    DroppedQueue,
}

/// Cumulative counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelayLineStats {
    pub frames_in: u64,
    pub bytes_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    pub dropped_loss: u64,
    pub dropped_queue: u64,
}

#[derive(Debug)]
pub struct DelayLine<T> {
    delay: Nanos,
    loss: LossModel,
    queue: SerializationQueue,
    /// (release time, len, frame), release times non-decreasing.
    in_flight: VecDeque<(Nanos, u32, T)>,
    stats: DelayLineStats,
}

impl<T> DelayLine<T> {
    pub fn new(spec: &LinkSpec) -> Self {
        Self {
            delay: spec.delay_ns,
            loss: LossModel::new(spec.loss, spec.seed),
            queue: SerializationQueue::new(spec.rate_bps, spec.queue),
            in_flight: VecDeque::new(),
            stats: DelayLineStats::default(),
        }
    }

    /// Offers a frame of `len` bytes that arrived at `now`. `now` must not go backwards
    /// between calls.
    ///
    /// # Panics
    /// In debug builds, if `now` went backwards far enough to release this frame before an
    /// earlier one.
    pub fn handle_frame(&mut self, now: Nanos, len: u32, frame: T) -> Admission {
        self.stats.frames_in += 1;
        self.stats.bytes_in += len as u64;
        if self.loss.handle_frame() {
            self.stats.dropped_loss += 1;
            return Admission::DroppedLoss;
        }
        let Ok(departure) = self.queue.handle_enqueue(now, len) else {
            self.stats.dropped_queue += 1;
            return Admission::DroppedQueue;
        };
        let release_at = departure + self.delay;
        debug_assert!(match self.in_flight.back() {
            Some(&(last, _, _)) => last <= release_at,
            None => true,
        });
        self.in_flight.push_back((release_at, len, frame));
        Admission::Queued { release_at, queue_delay: departure - now }
    }

    /// When the next frame is due, if any is in flight.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.in_flight.front().map(|&(t, _, _)| t)
    }

    /// The next frame due at or before `now`.
    pub fn poll_frame(&mut self, now: Nanos) -> Option<T> {
        if self.in_flight.front()?.0 > now {
            return None;
        }
        let (_, len, frame) = self.in_flight.pop_front()?;
        self.stats.frames_out += 1;
        self.stats.bytes_out += len as u64;
        Some(frame)
    }

    /// Frames admitted but not yet released (queued or propagating).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Frames and bytes in the bottleneck queue at `now`.
    pub fn queue_occupancy(&mut self, now: Nanos) -> (usize, u64) {
        self.queue.occupancy(now)
    }

    pub fn stats(&self) -> DelayLineStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_spec::parse;

    /// Drives a line with a virtual clock: `arrivals` are (time, len); returns the
    /// (release time, index) of every frame that came out, polling at exactly each timeout.
    fn run(spec: &str, arrivals: &[(Nanos, u32)]) -> (Vec<(Nanos, usize)>, DelayLineStats) {
        let mut line = DelayLine::new(&parse(spec).unwrap());
        let mut out = Vec::new();
        let mut next = 0;
        loop {
            let t_in = arrivals.get(next).map(|a| a.0);
            let t_out = line.poll_timeout();
            match (t_in, t_out) {
                (None, None) => break,
                (Some(ti), to) if to.is_none() || Some(ti) < to => {
                    line.handle_frame(ti, arrivals[next].1, next);
                    next += 1;
                }
                (_, Some(to)) => {
                    while let Some(i) = line.poll_frame(to) {
                        out.push((to, i));
                    }
                }
                _ => unreachable!(),
            }
        }
        (out, line.stats())
    }

    #[test]
    fn delay_is_exact_without_a_rate_limit() {
        let arrivals: Vec<_> = (0..100).map(|i| (i * 7_919, 1500)).collect();
        let (out, _) = run("delay=55ms", &arrivals);
        assert_eq!(out.len(), 100);
        for (t, i) in out {
            assert_eq!(t, arrivals[i].0 + 55_000_000);
        }
    }

    #[test]
    fn microsecond_delays_are_kept() {
        let (out, _) = run("delay=1234us", &[(10, 64)]);
        assert_eq!(out, vec![(1_234_010, 0)]);
    }

    #[test]
    fn rate_spaces_a_burst_by_serialization_time_then_adds_delay() {
        // 1250 B at 10 Mbit/s = 1 ms each.
        let arrivals = vec![(0, 1250); 5];
        let (out, _) = run("delay=10ms,rate=10mbit", &arrivals);
        let times: Vec<_> = out.iter().map(|o| o.0).collect();
        assert_eq!(times, vec![11_000_000, 12_000_000, 13_000_000, 14_000_000, 15_000_000]);
    }

    #[test]
    fn frames_are_never_reordered() {
        // Mixed sizes, bursts and gaps, with loss and a small queue.
        let mut rng = prng::Xoshiro256::seed_from_u64(3);
        let mut t = 0;
        let arrivals: Vec<_> = (0..5000)
            .map(|_| {
                t += rng.next_u64() % 200_000;
                (t, 64 + (rng.next_u64() % 1450) as u32)
            })
            .collect();
        let (out, st) = run("delay=3ms,rate=20mbit,queue=20p,loss=0.01", &arrivals);
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1 && w[0].0 <= w[1].0));
        assert_eq!(st.frames_in, 5000);
        assert_eq!(st.frames_out + st.dropped_loss + st.dropped_queue, 5000);
        assert!(st.dropped_queue > 0 && st.dropped_loss > 0);
    }

    #[test]
    fn overload_is_cut_to_the_rate_by_droptail() {
        // 2x overload of a 10 Mbit/s link for 1 s with 1250-byte frames (1000 frames/s fit).
        let arrivals: Vec<_> = (0..2000).map(|i| (i * 500_000, 1250)).collect();
        let (out, st) = run("delay=1ms,rate=10mbit,queue=10p", &arrivals);
        // About half dropped; the link never idles once the queue fills.
        assert!((st.dropped_queue as i64 - 1000).abs() <= 12, "{st:?}");
        let span = out.last().unwrap().0 - out[0].0;
        let rate = (out.len() as f64 - 1.0) * 1250.0 * 8.0 / (span as f64 / 1e9);
        assert!((rate - 10e6).abs() < 10e6 * 0.001, "rate {rate}");
    }

    #[test]
    fn queue_delay_is_bounded_by_the_limit() {
        let mut line = DelayLine::new(&parse("rate=8mbit,queue=4p").unwrap());
        let mut worst = 0;
        for i in 0..100 {
            if let Admission::Queued { queue_delay, .. } = line.handle_frame(i * 100_000, 1000, ()) {
                worst = worst.max(queue_delay);
            }
        }
        // 4 frames of 1 ms each at most.
        assert_eq!(worst, 4_000_000);
    }

    #[test]
    fn loss_statistics_are_fixed_by_the_seed() {
        let arrivals: Vec<_> = (0..100_000).map(|i| (i * 1000, 100)).collect();
        let (_, a) = run("loss=0.02,seed=7", &arrivals);
        let (_, b) = run("loss=0.02,seed=7", &arrivals);
        assert_eq!(a, b);
        assert!((a.dropped_loss as i64 - 2000).abs() < 180, "{a:?}");
    }

    /// FNV-1a over the (release time, index) pairs that came out.
    fn digest(out: &[(Nanos, usize)]) -> u64 {
        out.iter().fold(0xcbf2_9ce4_8422_2325, |h, &(t, i)| {
            [t, i as u64]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .fold(h, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
        })
    }

    #[test]
    fn specs_without_duplicate_or_reorder_behave_as_before() {
        // Pinned from the emulator before duplication and reordering existed: the same frames
        // are lost, queued and released at the same times.
        let mut rng = prng::Xoshiro256::seed_from_u64(11);
        let mut t = 0;
        let arrivals: Vec<_> = (0..20_000)
            .map(|_| {
                t += rng.next_u64() % 150_000;
                (t, 64 + (rng.next_u64() % 1450) as u32)
            })
            .collect();
        for (spec, want) in [
            ("delay=3ms,rate=90mbit,queue=20p,loss=0.01,seed=5", (0x161d_7ff8_5e13_a119, 223, 7)),
            ("delay=1ms,rate=80mbit,queue=64kb,loss=ge:0.002,0.2,0.9,0.001,seed=9", (0x2ceb_02c5_9bf0_645a, 212, 522)),
        ] {
            let (out, st) = run(spec, &arrivals);
            assert_eq!((digest(&out), st.dropped_loss, st.dropped_queue), want, "{spec}: {st:?}");
        }
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        let arrivals: Vec<_> = (0..200_000).map(|i| (i * 1000, 100)).collect();
        let (out, st) = run("loss=ge:0.001,0.2,1", &arrivals);
        // Gaps in the released indices are the loss bursts; mean length 1/r = 5.
        let gaps: Vec<usize> = out.windows(2).map(|w| w[1].1 - w[0].1 - 1).filter(|&g| g > 0).collect();
        let mean = gaps.iter().sum::<usize>() as f64 / gaps.len() as f64;
        assert!((mean - 5.0).abs() < 0.6, "mean burst {mean}");
        assert_eq!(gaps.iter().sum::<usize>() as u64, st.dropped_loss);
    }
}
