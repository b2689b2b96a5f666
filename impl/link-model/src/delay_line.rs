//! One direction of an emulated link, sans-IO: loss, then the bottleneck queue, then a fixed
//! propagation delay, with optional duplication and reordering past the bottleneck.
//!
//! Frames go in with [`DelayLine::handle_frame`] stamped with their arrival time and come out
//! of [`DelayLine::poll_frame`] once their release time has come; [`DelayLine::poll_timeout`]
//! tells the driver when that is. A frame admitted at `t` is released at
//! `departure(t) + delay` (see [`crate::queue`]); departures never decrease, so without
//! `reorder=` frames leave in the order they came. Loss is decided before the queue, as netem
//! does: a lost frame takes no queue space and no link time.
//!
//! Past the bottleneck a frame may be held back ([`crate::reorder`]): it is released at
//! `departure + delay + reorder_delay` instead, having left the serializer on time. Held frames
//! wait in a second FIFO line; their extra delay is the same for all, so each line's release
//! times are non-decreasing and the next frame due is the earlier of the two heads (on a tie
//! the held one, which arrived first). Without `reorder=` the held line stays empty and release
//! is the plain FIFO it always was. A duplicated frame ([`crate::duplicate`]) is released twice
//! at its release time, the copy first, taking no second place in the queue or on the link.
//!
//! ```
//! use link_model::{delay_line::{DelayLine, Admission}, link_spec::LinkSpec};
//! let spec: LinkSpec = "delay=20ms,rate=100mbit".parse().unwrap();
//! let mut line = DelayLine::new(&spec);
//! assert!(matches!(line.handle_frame(0, 1500, "frame"), Admission::Queued { .. }));
//! // 120 µs serialization + 20 ms propagation.
//! assert_eq!(line.poll_timeout(), Some(20_120_000));
//! assert_eq!(line.poll_frame(20_119_999), None);
//! assert_eq!(line.poll_frame(20_120_000), Some("frame"));
//! ```

use crate::duplicate::Duplicate;
use crate::link_spec::LinkSpec;
use crate::loss::LossModel;
use crate::queue::{Nanos, SerializationQueue};
use crate::reorder::Reorder;
use std::collections::VecDeque;

/// What happened to an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Will be released at `release_at` (a held-back frame's extra delay included), after
    /// `queue_delay` ns waiting for and in serialization.
    Queued {
        /// When the frame leaves the line, in ns on the caller's clock.
        release_at: Nanos,
        /// Time from arrival to the end of serialization, in ns.
        queue_delay: Nanos,
    },
    /// Lost by the loss model; it took no queue space.
    DroppedLoss,
    /// Refused by the full DropTail queue.
    DroppedQueue,
}

/// Cumulative counters of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelayLineStats {
    /// Frames offered.
    pub frames_in: u64,
    /// Bytes offered.
    pub bytes_in: u64,
    /// Frames released, copies of duplicated frames included.
    pub frames_out: u64,
    /// Bytes released, copies of duplicated frames included.
    pub bytes_out: u64,
    /// Frames lost by the loss model.
    pub dropped_loss: u64,
    /// Frames refused by the full queue.
    pub dropped_queue: u64,
    /// Admitted frames that are (or were) to be delivered twice; both copies are in
    /// `frames_out`, so `frames_in + duplicated = frames_out + dropped_* + in_flight`.
    pub duplicated: u64,
    /// Admitted frames held back by `reorder_delay` (whether or not a later frame then
    /// actually overtook them).
    pub reordered: u64,
}

/// A frame admitted and not yet released.
#[derive(Debug)]
struct Pending<T> {
    release_at: Nanos,
    len: u32,
    /// A duplicate's copy is still to be released.
    copy: bool,
    frame: T,
}

/// One direction of a link: the frames it holds, of type `T`, and the models they went
/// through (see the [module docs](self)).
#[derive(Debug)]
pub struct DelayLine<T> {
    delay: Nanos,
    loss: LossModel,
    duplicate: Duplicate,
    reorder: Reorder,
    queue: SerializationQueue,
    /// Frames on time, release times non-decreasing.
    in_flight: VecDeque<Pending<T>>,
    /// Frames held back by reordering, release times non-decreasing.
    held: VecDeque<Pending<T>>,
    /// Copies of duplicated frames not yet released.
    copies: usize,
    stats: DelayLineStats,
}

impl<T> DelayLine<T> {
    /// An empty line shaped by `spec`, its random streams seeded from `spec.seed`.
    pub fn new(spec: &LinkSpec) -> Self {
        Self {
            delay: spec.delay_ns,
            loss: LossModel::new(spec.loss, spec.seed),
            duplicate: Duplicate::new(spec.duplicate, spec.seed),
            reorder: Reorder::new(spec.reorder, spec.reorder_delay_ns, spec.seed),
            queue: SerializationQueue::new(spec.rate_bps, spec.queue),
            in_flight: VecDeque::new(),
            held: VecDeque::new(),
            copies: 0,
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
        // Drawn for every offered frame, so which arrivals are duplicated or held back does
        // not depend on what loss and the queue do.
        let copy = self.duplicate.handle_frame();
        let hold = self.reorder.handle_frame();
        if self.loss.handle_frame() {
            self.stats.dropped_loss += 1;
            return Admission::DroppedLoss;
        }
        let Ok(departure) = self.queue.handle_enqueue(now, len) else {
            self.stats.dropped_queue += 1;
            return Admission::DroppedQueue;
        };
        let mut release_at = departure + self.delay;
        let line = match hold {
            Some(extra) => {
                self.stats.reordered += 1;
                release_at += extra;
                &mut self.held
            }
            None => &mut self.in_flight,
        };
        if copy {
            self.stats.duplicated += 1;
            self.copies += 1;
        }
        debug_assert!(line.back().is_none_or(|last| last.release_at <= release_at));
        line.push_back(Pending { release_at, len, copy, frame });
        Admission::Queued { release_at, queue_delay: departure - now }
    }

    /// When the next frame is due, if any is in flight.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let line = if self.held_is_next() { &self.held } else { &self.in_flight };
        line.front().map(|p| p.release_at)
    }

    /// Whether the held line's head is due first: on a tie it is, having arrived first.
    /// Without reordering the held line is empty and this is one check.
    fn held_is_next(&self) -> bool {
        match (self.in_flight.front(), self.held.front()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(a), Some(h)) => h.release_at <= a.release_at,
        }
    }

    /// Frames admitted but not yet released (queued, propagating or held back), copies of
    /// duplicated frames included.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.held.len() + self.copies
    }

    /// Frames and bytes in the bottleneck queue at `now`.
    pub fn queue_occupancy(&mut self, now: Nanos) -> (usize, u64) {
        self.queue.occupancy(now)
    }

    /// The counters since the line was built.
    pub fn stats(&self) -> DelayLineStats {
        self.stats
    }
}

impl<T: Clone> DelayLine<T> {
    /// The next frame due at or before `now`. A duplicated frame comes out twice in a row,
    /// a clone first.
    pub fn poll_frame(&mut self, now: Nanos) -> Option<T> {
        let line = if self.held_is_next() { &mut self.held } else { &mut self.in_flight };
        let head = line.front_mut()?;
        if head.release_at > now {
            return None;
        }
        let len = head.len;
        let frame = if head.copy {
            head.copy = false;
            self.copies -= 1;
            head.frame.clone()
        } else {
            line.pop_front()?.frame
        };
        self.stats.frames_out += 1;
        self.stats.bytes_out += len as u64;
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_spec::parse;

    /// `n` frames of 64…1513 bytes at random gaps below `max_gap` ns, drawn from `seed`.
    fn random_arrivals(seed: u64, n: usize, max_gap: u64) -> Vec<(Nanos, u32)> {
        let mut rng = prng::Xoshiro256::seed_from_u64(seed);
        let mut t = 0;
        (0..n)
            .map(|_| {
                t += rng.next_u64() % max_gap;
                (t, 64 + (rng.next_u64() % 1450) as u32)
            })
            .collect()
    }

    /// Drives a line with a virtual clock: `arrivals` are (time, len); returns the
    /// (release time, index) of every frame that came out, polling at exactly each timeout.
    fn run(spec: &str, arrivals: &[(Nanos, u32)]) -> (Vec<(Nanos, usize)>, DelayLineStats) {
        let mut line = DelayLine::new(&parse(spec).unwrap());
        let mut out = Vec::new();
        let mut next = 0;
        loop {
            let st = line.stats();
            assert_eq!(
                st.frames_in + st.duplicated,
                st.frames_out + st.dropped_loss + st.dropped_queue + line.in_flight() as u64,
                "every frame in (and every copy) is out, dropped or in flight"
            );
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
        let arrivals = random_arrivals(3, 5000, 200_000);
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
        let arrivals = random_arrivals(11, 20_000, 150_000);
        for (spec, want) in [
            ("delay=3ms,rate=90mbit,queue=20p,loss=0.01,seed=5", (0x161d_7ff8_5e13_a119, 223, 7)),
            ("delay=1ms,rate=80mbit,queue=64kb,loss=ge:0.002,0.2,0.9,0.001,seed=9", (0x2ceb_02c5_9bf0_645a, 212, 522)),
        ] {
            let (out, st) = run(spec, &arrivals);
            assert_eq!((digest(&out), st.dropped_loss, st.dropped_queue), want, "{spec}: {st:?}");
        }
    }

    /// Release time of each arrival index (the first, for a duplicated frame).
    fn release_times(out: &[(Nanos, usize)], n: usize) -> Vec<Option<Nanos>> {
        let mut at = vec![None; n];
        for &(t, i) in out {
            at[i].get_or_insert(t);
        }
        at
    }

    #[test]
    fn held_frames_leave_reorder_delay_late_and_are_overtaken() {
        // A frame every 100 µs; a held frame is 350 µs late, so the next three overtake it.
        let arrivals: Vec<_> = (0..2000).map(|i| (i * 100_000, 100)).collect();
        let (out, st) = run("delay=1ms,reorder=0.2,reorder_delay=350us,seed=2", &arrivals);
        assert_eq!(out.len(), 2000);
        let mut held = 0;
        for &(t, i) in &out {
            match t - arrivals[i].0 {
                1_000_000 => {}
                1_350_000 => held += 1,
                d => panic!("frame {i} took {d} ns"),
            }
        }
        assert_eq!(held, st.reordered);
        assert_eq!(st.reordered, 385, "pinned by seed=2"); // binomial(2000, 0.2): 400 ± 18
                                                           // Released in order of release time (the virtual clock polls each timeout exactly).
        let mut by_time = out.clone();
        by_time.sort();
        assert_eq!(out, by_time);
        // What a receiver sees: frames arriving after a later-sent one.
        let mut max = 0;
        let late = out
            .iter()
            .filter(|&&(_, i)| {
                let overtaken = max > i;
                max = max.max(i);
                overtaken
            })
            .count() as u64;
        assert!(late > 0 && late <= st.reordered, "{late} of {} held", st.reordered);
    }

    #[test]
    fn reordering_comes_after_the_bottleneck() {
        // An overloaded 10 Mbit/s link with a small queue: holding frames back must change
        // neither which frames the queue drops nor when the others leave the serializer.
        let arrivals: Vec<_> = (0..3000).map(|i| (i * 600_000, 1250)).collect();
        let plain = "delay=2ms,rate=10mbit,queue=8p,seed=4";
        let (out_a, a) = run(plain, &arrivals);
        let (out_b, b) = run(&format!("{plain},reorder=0.3,reorder_delay=500us"), &arrivals);
        assert!(a.dropped_queue > 0);
        assert_eq!((a.dropped_queue, a.frames_out), (b.dropped_queue, b.frames_out));
        let (ta, tb) = (release_times(&out_a, 3000), release_times(&out_b, 3000));
        let mut held = 0;
        for (x, y) in ta.iter().zip(&tb) {
            match (x, y) {
                (None, None) => {}
                (Some(x), Some(y)) if y == x => {}
                (Some(x), Some(y)) if y - x == 500_000 => held += 1,
                _ => panic!("{x:?} became {y:?}"),
            }
        }
        assert_eq!(held, b.reordered);
        assert!(b.reordered > 500);
    }

    #[test]
    fn a_held_frame_due_with_an_on_time_frame_goes_first() {
        // A seed whose first frame is held back and second is not.
        let seed = (0..)
            .find(|&s| {
                let mut r = crate::reorder::Reorder::new(0.5, 1, s);
                r.handle_frame().is_some() && r.handle_frame().is_none()
            })
            .unwrap();
        // The second arrives exactly reorder_delay later: both are due at 3 ms.
        let (out, _) =
            run(&format!("delay=2ms,reorder=0.5,reorder_delay=1ms,seed={seed}"), &[(0, 64), (1_000_000, 64)]);
        assert_eq!(out, vec![(3_000_000, 0), (3_000_000, 1)]);
    }

    #[test]
    fn holding_every_frame_only_delays() {
        let arrivals: Vec<_> = (0..500).map(|i| (i * 10_000, 100)).collect();
        let (out, st) = run("delay=1ms,rate=100mbit,reorder=1,reorder_delay=2ms", &arrivals);
        assert_eq!(st.reordered, 500);
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1));
        let (plain, _) = run("delay=3ms,rate=100mbit", &arrivals);
        assert_eq!(out, plain);
    }

    #[test]
    fn a_duplicate_leaves_right_behind_its_original() {
        let arrivals: Vec<_> = (0..20_000).map(|i| (i * 100_000, 1000)).collect();
        let (out, st) = run("delay=1ms,rate=100mbit,loss=0.01,duplicate=0.05,seed=3", &arrivals);
        let twice = out.windows(2).filter(|w| w[0].1 == w[1].1).count() as u64;
        assert!(out.windows(2).all(|w| w[0].1 < w[1].1 || w[0] == w[1]), "copies share the original's release");
        assert_eq!(twice, st.duplicated);
        assert_eq!(st.duplicated, 1003, "pinned by seed=3"); // ~ binomial(19800, 0.05): 990 ± 31
        assert_eq!(st.frames_out, st.frames_in - st.dropped_loss + st.duplicated);
        assert_eq!(st.bytes_out, (st.frames_out) * 1000);
        // The copies take no link time: the originals leave as without duplication.
        let (plain, _) = run("delay=1ms,rate=100mbit,loss=0.01,seed=3", &arrivals);
        let mut originals = out.clone();
        originals.dedup();
        assert_eq!(originals, plain);
    }

    #[test]
    fn duplication_and_reordering_are_fixed_by_the_seed() {
        let arrivals = random_arrivals(8, 20_000, 150_000);
        let spec = |seed| format!("delay=2ms,rate=80mbit,queue=30p,loss=0.01,duplicate=0.02,reorder=0.05,seed={seed}");
        let (out_a, a) = run(&spec(5), &arrivals);
        let (out_b, b) = run(&spec(5), &arrivals);
        assert_eq!((digest(&out_a), a), (digest(&out_b), b));
        let (out_c, _) = run(&spec(6), &arrivals);
        assert_ne!(digest(&out_a), digest(&out_c));
        assert!(a.duplicated > 0 && a.reordered > 0 && a.dropped_loss > 0);
    }

    #[test]
    fn duplicate_and_reorder_leave_the_loss_pattern_alone() {
        let arrivals: Vec<_> = (0..50_000).map(|i| (i * 1000, 100)).collect();
        let (plain, p) = run("loss=0.02,seed=7", &arrivals);
        let (out, st) = run("loss=0.02,seed=7,duplicate=0.1,reorder=0.1,reorder_delay=5us", &arrivals);
        assert_eq!(st.dropped_loss, p.dropped_loss);
        let got = release_times(&out, arrivals.len());
        let want = release_times(&plain, arrivals.len());
        assert!(got.iter().zip(&want).all(|(g, w)| g.is_some() == w.is_some()), "the same frames are lost");
        assert!(st.duplicated > 0 && st.reordered > 0);
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
