//! The per-direction forwarding loop: reads frames from one [`PacketSocket`], runs them
//! through a [`DelayLine`] on the real clock and writes them to the other socket when due.
//!
//! Timing: with the next release more than `spin` away the thread sleeps in `ppoll` on the
//! input socket (so arrivals still wake it and are stamped promptly) until `spin` before the
//! deadline; the last stretch is a busy loop of non-blocking reads, so frames leave within a
//! few µs of their due time and never in sleep-sized bursts. Under load the deadlines are
//! closer together than `spin` and the thread simply runs.
//!
//! Counters are published to a [`DirectionStats`] of atomics that the stats writer reads.
//! A thread that gets the CPU late releases what fell due meanwhile in one burst; such frames
//! are counted as `bunched` ([`Spacing`]), because a receiver that times arrivals (UDT's
//! arrival speed, §10.1 of the spec) then sees a faster link than the emulated one.

use crate::afpacket::{PacketSocket, Received, RecvBatch, SendBatch};
use crate::clock::{now_ns, tighten_timer_slack};
use link_model::delay_line::{Admission, DelayLine};
use link_model::link_spec::LinkSpec;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Receive batches taken per loop round before turning to releases.
const INGRESS_BATCHES_PER_ROUND: usize = 4;

/// Tuning of the forwarding loop.
#[derive(Debug, Clone, Copy)]
pub struct ForwarderConfig {
    /// How long before a deadline sleeping gives way to spinning. Default 80 µs.
    pub spin_ns: u64,
    /// Frames per recvmmsg/sendmmsg. Default 64.
    pub batch: usize,
    /// Longest sleep, which bounds how late a stop request is noticed. Default 20 ms.
    pub max_sleep_ns: u64,
}

impl Default for ForwarderConfig {
    fn default() -> Self {
        Self { spin_ns: 80_000, batch: 64, max_sleep_ns: 20_000_000 }
    }
}

/// Live counters of one direction. Counters are cumulative; the `*_sum/_count/_max`
/// triples cover the interval since the stats writer last took them.
#[derive(Debug, Default)]
pub struct DirectionStats {
    /// Frames offered to the delay line (read from the input interface, oversize ones excepted).
    pub frames_in: AtomicU64,
    /// Bytes of those frames.
    pub bytes_in: AtomicU64,
    /// Frames the delay line released for sending, copies of duplicated frames included.
    pub frames_out: AtomicU64,
    /// Bytes of those frames.
    pub bytes_out: AtomicU64,
    /// Frames dropped by the loss model.
    pub dropped_loss: AtomicU64,
    /// Frames dropped by the full DropTail queue.
    pub dropped_queue: AtomicU64,
    /// Frames larger than the output interface takes, dropped.
    pub dropped_oversize: AtomicU64,
    /// Admitted frames delivered twice (`duplicate=`); both copies are in `frames_out`.
    pub duplicated: AtomicU64,
    /// Admitted frames held back by `reorder_delay` (`reorder=`).
    pub reordered: AtomicU64,
    /// Frames the kernel refused to send.
    pub send_errors: AtomicU64,
    /// Frames in the delay line now (gauge).
    pub in_flight: AtomicU64,
    /// Frames in the bottleneck queue now (gauge).
    pub queue_frames: AtomicU64,
    /// Queueing delay of the frames admitted this interval, summed, ns.
    pub queue_delay_sum_ns: AtomicU64,
    /// Frames admitted this interval.
    pub queue_delay_count: AtomicU64,
    /// The largest queueing delay this interval, ns.
    pub queue_delay_max_ns: AtomicU64,
    /// How late frames left relative to their due time (scheduling error).
    pub late_sum_ns: AtomicU64,
    /// Frames released this interval.
    pub late_count: AtomicU64,
    /// The latest release this interval, ns after its due time.
    pub late_max_ns: AtomicU64,
    /// Frames that left less than half their scheduled spacing after the previous frame
    /// (cumulative): released in a late burst. See [`Spacing`].
    pub bunched: AtomicU64,
}

/// Tells which released frames were bunched: handed to the kernel less than half their
/// scheduled spacing after the frame before them. The bottleneck spaces back-to-back frames
/// by their serialization time (121 µs for 1514 bytes at 100 Mbit/s); a release that comes
/// late and then catches up sends frames closer together than that, so whoever measures the
/// spacing at the far end (UDT's arrival speed and packet pairs) sees a faster link.
/// Jitter of a few µs around the due times does not count, nor do frames that arrived
/// back to back on a link without a rate (their scheduled spacing is already ~0).
#[derive(Debug, Default, Clone, Copy)]
pub struct Spacing {
    /// (due, released) of the previous frame.
    prev: Option<(u64, u64)>,
}

impl Spacing {
    /// Records a frame due at `due` and released at `released` (ns, non-decreasing);
    /// true if it left bunched with the previous one.
    pub fn bunched(&mut self, due: u64, released: u64) -> bool {
        let b = match self.prev {
            Some((pd, pr)) => released.saturating_sub(pr) < due.saturating_sub(pd) / 2,
            None => false,
        };
        self.prev = Some((due, released));
        b
    }
}

/// Runs one direction until `stop` is set. Frames still in flight then are discarded.
pub fn run(
    rx: &PacketSocket,
    tx: &PacketSocket,
    spec: &LinkSpec,
    cfg: ForwarderConfig,
    stats: &DirectionStats,
    stop: &AtomicBool,
) {
    tighten_timer_slack();
    let mut line: DelayLine<Vec<u8>> = DelayLine::new(spec);
    let mut recv = RecvBatch::new(cfg.batch);
    let mut send = SendBatch::new(cfg.batch);
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(cfg.batch);
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let max_frame = tx.max_frame();
    let mut warned_oversize = false;
    let mut warned_recv = false;
    let mut spacing = Spacing::default();

    while !stop.load(Relaxed) {
        // Take in what is ready, stamped with the time it was read — at most a few batches,
        // so a flood of arrivals cannot hold back releases that are due.
        for _ in 0..INGRESS_BATCHES_PER_ROUND {
            let n = match recv.recv(rx) {
                Ok(n) => n,
                Err(e) => {
                    if !warned_recv {
                        eprintln!("udt-linkem: reading {} failed: {e}", rx.iface);
                        warned_recv = true;
                    }
                    0
                }
            };
            if n == 0 {
                break;
            }
            let now = now_ns();
            for i in 0..n {
                let frame = match recv.get(i) {
                    Received::Frame(f) if f.len() <= max_frame => f,
                    Received::Outgoing => continue,
                    Received::Frame(f) => {
                        oversize(stats, &mut warned_oversize, f.len(), rx, tx);
                        continue;
                    }
                    Received::Truncated { len } => {
                        oversize(stats, &mut warned_oversize, len, rx, tx);
                        continue;
                    }
                };
                let mut buf = pool.pop().unwrap_or_else(|| Vec::with_capacity(2048));
                buf.clear();
                buf.extend_from_slice(frame);
                if let Admission::Queued { queue_delay, .. } = line.handle_frame(now, frame.len() as u32, buf) {
                    stats.queue_delay_sum_ns.fetch_add(queue_delay, Relaxed);
                    stats.queue_delay_count.fetch_add(1, Relaxed);
                    stats.queue_delay_max_ns.fetch_max(queue_delay, Relaxed);
                }
                // Dropped frames' buffers are dropped with them; the pool refills on send.
            }
            if n < recv.capacity() {
                break;
            }
        }

        // Release what is due, in release-time order, a batch at a time.
        loop {
            let now = now_ns();
            while out.len() < cfg.batch {
                let Some(due) = line.poll_timeout() else {
                    break;
                };
                let Some(f) = line.poll_frame(now) else { break };
                let late = now - due;
                stats.late_sum_ns.fetch_add(late, Relaxed);
                stats.late_count.fetch_add(1, Relaxed);
                stats.late_max_ns.fetch_max(late, Relaxed);
                if spacing.bunched(due, now) {
                    stats.bunched.fetch_add(1, Relaxed);
                }
                out.push(f);
            }
            if out.is_empty() {
                break;
            }
            let (_, failed) = send.send(tx, &out);
            if failed > 0 {
                stats.send_errors.fetch_add(failed as u64, Relaxed);
            }
            if pool.len() < 4096 {
                pool.append(&mut out);
            } else {
                out.clear();
            }
        }

        let st = line.stats();
        stats.frames_in.store(st.frames_in, Relaxed);
        stats.bytes_in.store(st.bytes_in, Relaxed);
        stats.frames_out.store(st.frames_out, Relaxed);
        stats.bytes_out.store(st.bytes_out, Relaxed);
        stats.dropped_loss.store(st.dropped_loss, Relaxed);
        stats.dropped_queue.store(st.dropped_queue, Relaxed);
        stats.duplicated.store(st.duplicated, Relaxed);
        stats.reordered.store(st.reordered, Relaxed);
        stats.in_flight.store(line.in_flight() as u64, Relaxed);

        // Sleep towards the next deadline, spinning the last stretch.
        let now = now_ns();
        stats.queue_frames.store(line.queue_occupancy(now).0 as u64, Relaxed);
        match line.poll_timeout() {
            None => rx.wait_readable(cfg.max_sleep_ns),
            Some(due) if due > now + cfg.spin_ns => rx.wait_readable((due - now - cfg.spin_ns).min(cfg.max_sleep_ns)),
            Some(_) => std::hint::spin_loop(),
        }
    }
}

fn oversize(stats: &DirectionStats, warned: &mut bool, len: usize, rx: &PacketSocket, tx: &PacketSocket) {
    stats.dropped_oversize.fetch_add(1, Relaxed);
    if !*warned {
        *warned = true;
        eprintln!(
            "udt-linkem: dropping a {len}-byte frame from {} larger than {}'s MTU {}: a host uses \
             segmentation offloads; turn them off on the hosts' interfaces: \
             ethtool -K IFACE tso off gso off gro off",
            rx.iface, tx.iface, tx.mtu
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Spacing;

    const TX: u64 = 121_120; // 1514 bytes at 100 Mbit/s, ns

    #[test]
    fn frames_released_on_time_are_not_bunched_despite_jitter() {
        let mut s = Spacing::default();
        let jitter = [0, 4_000, 1_000, 9_000, 0, 3_000];
        let n = jitter.iter().enumerate().filter(|&(i, &j)| s.bunched(i as u64 * TX, i as u64 * TX + j)).count();
        assert_eq!(n, 0);
    }

    #[test]
    fn frames_caught_up_after_a_late_wakeup_count_as_bunched() {
        // Frames 1..=8 fell due while the thread was off the CPU for 1 ms; it sends them
        // back to back (2 µs apart) when it runs again: all but the first of the burst,
        // which still left more than half its spacing after frame 0, are bunched.
        let mut s = Spacing::default();
        assert!(!s.bunched(0, 0));
        let wake = 1_000_000;
        let got: Vec<bool> = (1..=8u64).map(|i| s.bunched(i * TX, wake + i * 2_000)).collect();
        assert_eq!(got, [false, true, true, true, true, true, true, true]);
        // Caught up: frame 9 leaves at its due time, 74 µs after the burst's last frame.
        assert!(!s.bunched(9 * TX, 9 * TX));
    }

    #[test]
    fn back_to_back_arrivals_on_a_link_without_rate_are_not_bunched() {
        let mut s = Spacing::default();
        assert!(!s.bunched(1_000, 1_500));
        assert!(!s.bunched(1_000, 1_600));
        assert!(!s.bunched(1_001, 1_700));
    }
}
