//! The bottleneck: a DropTail queue drained at the link rate.
//!
//! A frame of `len` bytes takes `len·8/rate` seconds to serialize, and it starts no earlier
//! than it arrives nor before the previous frame finished, so its departure is
//! `max(arrival, previous departure) + len·8/rate`. The queue is the set of frames that have
//! arrived but not yet departed (the one being serialized included); DropTail refuses an
//! arrival that would push it past its limit in packets or bytes. The serialization time is
//! computed in integer nanoseconds with the remainder carried over, so a backlogged link
//! runs at exactly its rate however long it runs.
//!
//! Time is nanoseconds on the caller's clock; the model owns no clock.

use crate::link_spec::QueueLimit;
use std::collections::VecDeque;

/// Time and durations on the caller's clock, in nanoseconds.
pub type Nanos = u64;

/// Why the queue refused a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull;

/// The bottleneck of one direction: when each frame finishes serializing, and DropTail on the
/// frames not yet departed.
#[derive(Debug, Clone)]
pub struct SerializationQueue {
    rate_bps: Option<u64>,
    limit: QueueLimit,
    /// When the last admitted frame finishes serializing.
    busy_until: Nanos,
    /// `bits·1e9 mod rate` not yet turned into whole nanoseconds.
    carry: u64,
    /// (departure, len) of frames not yet departed, oldest first.
    backlog: VecDeque<(Nanos, u32)>,
    backlog_bytes: u64,
}

impl SerializationQueue {
    /// An idle queue draining at `rate_bps` (`None`: no serialization delay and no limit) up to
    /// `limit`.
    pub fn new(rate_bps: Option<u64>, limit: QueueLimit) -> Self {
        Self { rate_bps, limit, busy_until: 0, carry: 0, backlog: VecDeque::new(), backlog_bytes: 0 }
    }

    /// Offers a frame of `len` bytes arriving at `now`; returns its departure time
    /// (the end of its serialization) or refuses it.
    pub fn handle_enqueue(&mut self, now: Nanos, len: u32) -> Result<Nanos, QueueFull> {
        let Some(rate) = self.rate_bps else {
            return Ok(now);
        };
        self.expire(now);
        let full = match self.limit {
            QueueLimit::Packets(n) => self.backlog.len() as u64 >= n,
            QueueLimit::Bytes(n) => self.backlog_bytes + len as u64 > n,
            QueueLimit::Unlimited => false,
        };
        if full {
            return Err(QueueFull);
        }
        let start = if self.busy_until <= now {
            // The link went idle: the fraction owed to the previous frame is forgiven.
            self.carry = 0;
            now
        } else {
            self.busy_until
        };
        let scaled = len as u64 * 8 * 1_000_000_000 + self.carry;
        let departure = start + scaled / rate;
        self.carry = scaled % rate;
        self.busy_until = departure;
        self.backlog.push_back((departure, len));
        self.backlog_bytes += len as u64;
        Ok(departure)
    }

    /// Forgets frames that have departed by `now`.
    fn expire(&mut self, now: Nanos) {
        while let Some(&(dep, len)) = self.backlog.front() {
            if dep > now {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= len as u64;
        }
    }

    /// Frames and bytes queued (including the one being serialized) at `now`.
    pub fn occupancy(&mut self, now: Nanos) -> (usize, u64) {
        self.expire(now);
        (self.backlog.len(), self.backlog_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_rate_departs_on_arrival() {
        let mut q = SerializationQueue::new(None, QueueLimit::Packets(1));
        for t in [0, 0, 0, 5] {
            assert_eq!(q.handle_enqueue(t, 1500), Ok(t));
        }
    }

    #[test]
    fn back_to_back_frames_are_spaced_by_serialization_time() {
        // 1500 B at 100 Mbit/s = 120 µs.
        let mut q = SerializationQueue::new(Some(100_000_000), QueueLimit::Unlimited);
        let deps: Vec<_> = (0..4).map(|_| q.handle_enqueue(1_000, 1500).unwrap()).collect();
        assert_eq!(deps, vec![121_000, 241_000, 361_000, 481_000]);
    }

    #[test]
    fn idle_link_serializes_from_arrival() {
        let mut q = SerializationQueue::new(Some(1_000_000_000), QueueLimit::Unlimited);
        assert_eq!(q.handle_enqueue(0, 125), Ok(1_000));
        assert_eq!(q.handle_enqueue(50_000, 125), Ok(51_000));
    }

    #[test]
    fn long_run_rate_is_exact_despite_rounding() {
        // 1514 B at 3 Mbit/s = 4037.33.. µs: rounding per frame would drift by 1/3 ns each.
        let mut q = SerializationQueue::new(Some(3_000_000), QueueLimit::Unlimited);
        let mut last = 0;
        for _ in 0..3000 {
            last = q.handle_enqueue(0, 1514).unwrap();
        }
        assert_eq!(last, 3000 * 1514 * 8 * 1_000_000_000 / 3_000_000);
    }

    #[test]
    fn droptail_in_packets_refuses_the_arrival_beyond_the_limit() {
        let mut q = SerializationQueue::new(Some(8_000_000), QueueLimit::Packets(3)); // 1000 B = 1 ms
        for _ in 0..3 {
            q.handle_enqueue(0, 1000).unwrap();
        }
        assert_eq!(q.handle_enqueue(0, 1000), Err(QueueFull));
        assert_eq!(q.occupancy(0), (3, 3000));
        // After the first frame departs at 1 ms there is room for one more.
        assert_eq!(q.handle_enqueue(1_000_000, 1000), Ok(4_000_000));
        assert_eq!(q.handle_enqueue(1_000_000, 1000), Err(QueueFull));
    }

    #[test]
    fn droptail_in_bytes_counts_bytes() {
        let mut q = SerializationQueue::new(Some(8_000_000), QueueLimit::Bytes(2500));
        q.handle_enqueue(0, 1000).unwrap();
        q.handle_enqueue(0, 1000).unwrap();
        assert_eq!(q.handle_enqueue(0, 1000), Err(QueueFull));
        // A small frame still fits.
        assert!(q.handle_enqueue(0, 500).is_ok());
        assert_eq!(q.occupancy(0), (3, 2500));
    }

    #[test]
    fn queue_drains_completely_at_the_last_departure() {
        let mut q = SerializationQueue::new(Some(8_000_000), QueueLimit::Packets(10));
        let last = (0..5).map(|_| q.handle_enqueue(0, 1000).unwrap()).last().unwrap();
        assert_eq!(q.occupancy(last - 1), (1, 1000));
        assert_eq!(q.occupancy(last), (0, 0));
    }
}
