//! SABUL's rate control (SABUL.md §7) and flow window (§8) on the core's
//! [`CongestionControl`] trait.
//!
//! The rate is an inter-packet interval `I`. Once per SYN packet from the receiver (§5.4) the
//! sender runs the SYN event: the EWMA `H` of the period's loss ratio, and if `H ≤ α` and slow
//! start is over an increase by `inc` packets per SYN (§7.2). Each ERR may decrease `I` by
//! ×1.125: always for a new congestion event (its first loss later than the largest number
//! sent at the previous one), else at the 16th, 32nd, 64th … ERR of the event (§7.3); a new
//! event also freezes sending for one SYN (§7.4 TC). The window starts at 1 and grows by the
//! newly acknowledged packets until it reaches the receiver's `recv_flag_size` or the first
//! ERR (§8); `slow_start = false` is the 2003 code's fixed window.
//!
//! The SYN event is clocked by the receiver's SYN packets, not by a timer: the sender calls
//! [`on_tick`](CongestionControl::on_tick) itself on each one, so
//! [`tick_interval`](CongestionControl::tick_interval) stays `None`.

use transfer::cc::{CcInput, CongestionControl, SYN};
use transfer::seq::SeqNo;
use transfer::time::Instant;

/// `I_min`: the smallest interval, µs, applied after an increase only (§7, §9).
pub const MIN_INTERVAL_US: f64 = 10.0;
/// `I_max`: the largest interval, µs, applied after an increase only (§7, §9).
pub const MAX_INTERVAL_US: f64 = 1000.0;
/// The initial interval (§7.1, §9).
pub const INITIAL_INTERVAL_US: f64 = 10.0;
/// `α`: the loss threshold on the history (§7).
pub const LOSS_THRESHOLD: f64 = 0.001;
/// The history's weight on its previous value (§7, [C]).
pub const HISTORY_WEIGHT: f64 = 0.1;
/// The decrease factor on the interval (§7.3).
pub const DECREASE: f64 = 1.125;
/// `dec_count` after condition 1) (§7.3).
pub const DEC_COUNT_RESET: u32 = 4;

/// The interval, µs, for a rate in Mb/s at 1500-byte frames (§7.1: `I = 1500 · 8 / rate`).
pub fn interval_for_rate(mbit_per_s: f64) -> f64 {
    1500.0 * 8.0 / mbit_per_s
}

/// SABUL's controller (SABUL.md §7–§8). `Clone`, so it is its own factory.
#[derive(Clone, Debug, PartialEq)]
pub struct SabulRate {
    interval_us: f64,
    /// `I_min`, `I_max` (§7.1: the application may set them as rates).
    min_interval_us: f64,
    max_interval_us: f64,
    slow_start: bool,
    window: f64,
    max_window: f64,
    last_ack: SeqNo,
    history: f64,
    sent: u32,
    lost: u32,
    last_dec_seq: Option<SeqNo>,
    err_count: u32,
    dec_count: u32,
    frozen_until: Option<Instant>,
}

impl Default for SabulRate {
    fn default() -> SabulRate {
        SabulRate::new(INITIAL_INTERVAL_US, true)
    }
}

impl SabulRate {
    /// A controller starting at `initial_interval_us` (§7.1), with slow start on or off (§8).
    pub fn new(initial_interval_us: f64, slow_start: bool) -> SabulRate {
        SabulRate {
            interval_us: initial_interval_us,
            min_interval_us: MIN_INTERVAL_US,
            max_interval_us: MAX_INTERVAL_US,
            slow_start,
            window: 1.0,
            max_window: f64::from(crate::wire::DEFAULT_RECV_FLAG_SIZE),
            last_ack: SeqNo::ZERO,
            history: 0.0,
            sent: 0,
            lost: 0,
            last_dec_seq: None,
            err_count: 0,
            dec_count: DEC_COUNT_RESET,
            frozen_until: None,
        }
    }

    /// The same controller with the interval limits `I_min ≤ I ≤ I_max` of §7.1 set by the
    /// application (µs; `min_us ≤ max_us`).
    pub fn with_limits(self, min_us: f64, max_us: f64) -> SabulRate {
        SabulRate { min_interval_us: min_us, max_interval_us: max_us, ..self }
    }

    /// Whether slow start is still on (§8).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    fn end_slow_start(&mut self) {
        self.slow_start = false;
        self.window = self.max_window;
    }

    fn decrease(&mut self) {
        self.interval_us *= DECREASE;
    }
}

impl CongestionControl for SabulRate {
    fn name(&self) -> &'static str {
        "sabul"
    }

    /// `W_max` is the echoed `recv_flag_size` (§8); without slow start the window is `W_max`
    /// from the first packet.
    fn on_connect(&mut self, input: &CcInput) {
        if input.max_window > 0 {
            self.max_window = f64::from(input.max_window);
        }
        self.window = if self.slow_start { 1.0 } else { self.max_window };
    }

    fn on_sent(&mut self, _input: &CcInput, _seq: SeqNo, _retransmission: bool) {
        self.sent = self.sent.saturating_add(1);
    }

    /// Slow start (§8 TC): `W += newly acknowledged packets` until `W ≥ W_max`.
    fn on_ack(&mut self, _input: &CcInput, ack: SeqNo) {
        let newly = self.last_ack.offset_to(ack);
        if newly <= 0 {
            return;
        }
        self.last_ack = ack;
        if self.slow_start {
            self.window += f64::from(newly as u32);
            if self.window >= self.max_window {
                self.end_slow_start();
            }
        }
    }

    /// The ERR decrease with the dec_count rule (§7.3), the freeze (§7.4), the period's loss
    /// count (§5.2 step 3) and the end of slow start (§5.2 step 4, §8).
    fn on_loss(&mut self, input: &CcInput, losses: &[(SeqNo, SeqNo)]) {
        let Some(&(first, _)) = losses.first() else { return };
        if self.last_dec_seq.is_none_or(|d| first.is_after(d)) {
            self.decrease();
            self.last_dec_seq = Some(input.snd_curr_seq);
            self.frozen_until = Some(input.now + SYN);
            self.err_count = 1;
            self.dec_count = DEC_COUNT_RESET;
        } else {
            self.err_count += 1;
            if self.dec_count < 31 && self.err_count >= 1 << self.dec_count {
                self.dec_count += 1;
                self.decrease();
            }
        }
        let n: u32 = losses.iter().map(|&(a, b)| a.len_to(b)).fold(0, u32::saturating_add);
        self.lost = self.lost.saturating_add(n);
        if self.slow_start {
            self.end_slow_start();
        }
    }

    /// The SYN event (§7.2), run on each SYN packet from the receiver.
    fn on_tick(&mut self, _input: &CcInput) {
        if self.sent == 0 {
            self.lost = 0;
            return;
        }
        let sent = self.sent.max(self.lost);
        let loss = f64::from(self.lost) / f64::from(sent);
        self.history = HISTORY_WEIGHT * self.history + (1.0 - HISTORY_WEIGHT) * loss;
        if self.history <= LOSS_THRESHOLD && !self.slow_start {
            let syn = SYN.as_micros() as f64;
            let pps = syn / self.interval_us;
            let inc = (10f64.powf(pps.log10().ceil()) / 1000.0).max(1.0 / 1500.0);
            self.interval_us = (self.interval_us * syn) / (self.interval_us * inc + syn);
            self.interval_us = self.interval_us.clamp(self.min_interval_us, self.max_interval_us);
        }
        self.sent = 0;
        self.lost = 0;
    }

    fn pacing_period_us(&self) -> f64 {
        self.interval_us
    }

    fn window(&self) -> f64 {
        self.window
    }

    fn frozen_until(&self) -> Option<Instant> {
        self.frozen_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transfer::cc::Controller;
    use transfer::pacing::Pacer;

    fn at(us: u64) -> CcInput {
        CcInput { now: Instant::from_micros(us), mss: 1500, max_window: 25_600, ..CcInput::default() }
    }

    fn connected(interval: f64, slow_start: bool) -> SabulRate {
        let mut c = SabulRate::new(interval, slow_start);
        c.on_connect(&at(0));
        c
    }

    /// One SYN period with `sent` packets and no loss, then the SYN event.
    fn lossless_syn(c: &mut SabulRate, sent: u32) {
        for i in 0..sent {
            c.on_sent(&at(0), SeqNo::new(i), false);
        }
        c.on_tick(&at(0));
    }

    fn err(c: &mut SabulRate, now: u64, first: u32, largest_sent: u32) {
        let input = CcInput { snd_curr_seq: SeqNo::new(largest_sent), ..at(now) };
        c.on_loss(&input, &[(SeqNo::new(first), SeqNo::new(first))]);
    }

    #[test]
    fn syn_event_increases_as_the_section_7_2_examples() {
        for (i0, want) in [(12.0, 11.9856), (100.0, 99.9001), (1000.0, 999.0010)] {
            let mut c = connected(i0, false);
            lossless_syn(&mut c, 10);
            assert!((c.pacing_period_us() - want).abs() < 1e-3, "{i0} -> {}", c.pacing_period_us());
        }
    }

    #[test]
    fn a_syn_period_with_nothing_sent_changes_nothing() {
        let mut c = connected(100.0, false);
        c.on_tick(&at(10_000));
        assert_eq!(c.pacing_period_us(), 100.0);
    }

    #[test]
    fn new_congestion_event_decreases_and_freezes_for_one_syn() {
        let mut c = connected(100.0, false);
        err(&mut c, 5_000, 50, 99);
        assert!((c.pacing_period_us() - 112.5).abs() < 1e-9);
        assert_eq!(c.frozen_until(), Some(Instant::from_micros(15_000)));
        // The freeze reaches the pacer through the core's Controller.
        let mut ctl = Controller::new(&c);
        ctl.on_connect(&at(0));
        ctl.on_loss(&CcInput { snd_curr_seq: SeqNo::new(99), ..at(5_000) }, &[(SeqNo::new(50), SeqNo::new(50))]);
        let mut pacer = Pacer::new(Instant::from_micros(5_000), 100.0, 16);
        ctl.pace(&mut pacer, 0.0);
        assert_eq!(pacer.next_time(), Instant::from_micros(15_000));
    }

    #[test]
    fn errs_of_one_event_decrease_at_the_16th_32nd_and_64th() {
        let mut c = connected(100.0, false);
        err(&mut c, 0, 50, 99); // condition 1): ERR 1 of the event
        let mut decreases = Vec::new();
        for n in 2..=70u32 {
            let before = c.pacing_period_us();
            err(&mut c, 0, 60, 200); // not later than LastDecSeq = 99
            if c.pacing_period_us() > before {
                decreases.push(n);
            }
        }
        assert_eq!(decreases, [16, 32, 64]);
        assert_eq!(c.frozen_until(), Some(Instant::from_micros(10_000)), "condition 2) does not freeze");
        // A loss after the largest number sent at the event starts a new one.
        err(&mut c, 20_000, 100, 300);
        assert_eq!(c.frozen_until(), Some(Instant::from_micros(30_000)));
        assert!((c.pacing_period_us() - 100.0 * DECREASE.powi(5)).abs() < 1e-9);
    }

    #[test]
    fn slow_start_grows_by_acknowledged_packets_and_ends_at_the_first_err() {
        let mut c = connected(10.0, true);
        assert_eq!(c.window(), 1.0);
        c.on_ack(&at(0), SeqNo::new(1));
        c.on_ack(&at(0), SeqNo::new(3));
        assert_eq!(c.window(), 4.0);
        err(&mut c, 0, 3, 3);
        assert!(!c.in_slow_start());
        assert_eq!(c.window(), 25_600.0);
        assert_eq!(connected(10.0, false).window(), 25_600.0, "the 2003 code's fixed window");
    }

    /// §14.1: the window is `1 + acknowledged`, so slow start ends only when the ACK of the
    /// 25 599th packet arrives — for a transfer of at most 25 599 packets, at its end: it runs
    /// entirely at its initial rate. After that ACK the next SYN event increases.
    #[test]
    fn lossless_transfer_shorter_than_the_slow_start_window_never_raises_its_rate() {
        let i0 = interval_for_rate(100.0);
        let mut c = connected(i0, true);
        let mut acked = 0u32;
        while acked < 25_598 {
            lossless_syn(&mut c, 83);
            acked = (acked + 83).min(25_598);
            c.on_ack(&at(0), SeqNo::new(acked));
        }
        lossless_syn(&mut c, 83);
        assert!(c.in_slow_start());
        assert_eq!(c.pacing_period_us(), i0);
        c.on_ack(&at(0), SeqNo::new(25_599));
        assert!(!c.in_slow_start());
        lossless_syn(&mut c, 83);
        assert!(c.pacing_period_us() < i0);
        // Without slow start the first SYN event already increases.
        let mut off = connected(i0, false);
        lossless_syn(&mut off, 83);
        assert!(off.pacing_period_us() < i0);
    }

    /// §14.2: decreases are not clamped, increases are: after uncapped decreases the first
    /// increase sets the interval to exactly 1000 µs.
    #[test]
    fn first_increase_after_uncapped_decreases_clamps_at_1000_us() {
        let mut c = connected(10.0, false);
        for k in 0..40u32 {
            err(&mut c, 0, 2 * k + 1, 2 * k + 1);
        }
        assert!((c.pacing_period_us() - 10.0 * DECREASE.powi(40)).abs() < 1e-6);
        assert!(c.pacing_period_us() > 1111.0);
        // Let the history decay below α with loss-free periods.
        for _ in 0..4 {
            lossless_syn(&mut c, 5);
        }
        assert_eq!(c.pacing_period_us(), MAX_INTERVAL_US);
    }

    /// §14.2 item 1: a SYN period whose loss ratio exceeds α / 0.9 never increases.
    #[test]
    fn a_period_with_loss_above_the_threshold_never_increases() {
        let mut c = connected(12.0, false);
        c.on_loss(&CcInput { snd_curr_seq: SeqNo::new(800), ..at(0) }, &[(SeqNo::new(1), SeqNo::new(1))]);
        let after_decrease = c.pacing_period_us();
        lossless_syn(&mut c, 833); // 1 of 833 lost: x = 0.12 % > α / 0.9
        assert_eq!(c.pacing_period_us(), after_decrease);
    }

    #[test]
    fn application_limits_clamp_an_increase() {
        let input = CcInput::default();
        // 100 Mb/s links at a tenth of the paper's scale: I_max 10 000 µs (1.2 Mb/s).
        let mut c = SabulRate::new(20_000.0, false).with_limits(100.0, 10_000.0);
        c.on_sent(&input, SeqNo::ZERO, false);
        c.on_tick(&input);
        assert_eq!(c.pacing_period_us(), 10_000.0);
        let mut c = SabulRate::new(50.0, false).with_limits(100.0, 10_000.0);
        c.on_sent(&input, SeqNo::ZERO, false);
        c.on_tick(&input);
        assert_eq!(c.pacing_period_us(), 100.0);
    }
}
