//! UDT's native congestion control: 4.11's `CUDTCC` (UDT4.md §12), or the SC'04 paper's
//! variant of it (§14 rows 22 and 27).
//!
//! Rate control does the work: every `SYN` without loss the sending rate `1e6/P` grows by
//! `inc` packets per SYN, where `inc` is a power of ten picked from the estimated spare
//! bandwidth (§12.3); a NAK multiplies `P` by 1.125, at most five times per congestion period,
//! spaced by a randomised number of NAKs (§12.4). The window is a safety net:
//! `W_cc = DeliveryRate · (RTT + SYN) + 16`. Slow start grows the window by the number of newly
//! acknowledged packets (+1) every SYN until it exceeds the peer's flow window, a NAK or a
//! timeout.
//!
//! Everything here follows the 4.11 code, including its quirks (§12.4 remarks, §14 rows
//! 20–27): the first NAK in slow start ends it without a decrease; a new congestion period is
//! detected from the *first* (smallest) number of the NAK; slow start without a delivery rate
//! computes `P = W_cc / (RTT + SYN)` (an inverted ratio); `P` is rounded up to whole µs at each
//! decrease; the decrease spacing uses glibc's `srand(LastDecSeq); rand()`.
//!
//! [`NativeVariant::Paper`] changes exactly two things, as the SC'04 paper describes (§3.3):
//! the new-period test uses the *largest* number in the NAK, and the sender freezes (sends no
//! new packets) for one SYN at the start of each congestion period ([`frozen_until`]).
//!
//! [`frozen_until`]: CongestionControl::frozen_until

use super::glibc_rand::{glibc_rand_first, RAND_MAX};
use transfer::cc::{CcInput, CongestionControl, SYN};
use transfer::seq::SeqNo;
use transfer::time::{micros, Duration, Instant};

/// Smallest increase, packets per SYN (4.11 since 2012; `1/MSS` before, §14 row 24).
pub const MIN_INC: f64 = 0.01;
/// `β` of the increase formula (§12.3).
pub const BETA: f64 = 1.5e-6;
/// Multiplicative decrease of the sending rate: `P := ceil(P · 1.125)` (§12.4).
pub const DECREASE_FACTOR: f64 = 1.125;
/// NAKs examined per congestion period (including the one opening it): so at most 5 decreases.
pub const MAX_DECREASES: i32 = 5;

/// Which flavour of the native controller to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NativeVariant {
    /// UDT 4.11's CUDTCC (normative, the default).
    #[default]
    Udt411,
    /// The SC'04 paper: largest lost number opens a congestion period, plus a one-SYN freeze.
    Paper,
}

/// 4.11's `CUDTCC` (§12) with the paper variant as an option. Field names follow 4.11's.
#[derive(Clone, Debug)]
pub struct UdtNative {
    variant: NativeVariant,
    rc_interval: Duration,
    last_rc_time: Instant,
    slow_start: bool,
    last_ack: SeqNo,
    loss: bool,
    last_dec_seq: SeqNo,
    last_dec_period: f64,
    avg_nak_num: i32,
    nak_count: i32,
    dec_random: i32,
    dec_count: i32,
    cwnd: f64,
    period: f64,
    frozen_until: Option<Instant>,
}

impl Default for UdtNative {
    fn default() -> Self {
        UdtNative::new(NativeVariant::Udt411)
    }
}

impl UdtNative {
    /// A controller in the §12.1 initial state; call [`CongestionControl::on_connect`] when the
    /// connection is established.
    pub fn new(variant: NativeVariant) -> UdtNative {
        UdtNative {
            variant,
            rc_interval: SYN,
            last_rc_time: Instant::ZERO,
            slow_start: true,
            last_ack: SeqNo::ZERO,
            loss: false,
            last_dec_seq: SeqNo::MAX,
            last_dec_period: 1.0,
            avg_nak_num: 0,
            nak_count: 0,
            dec_random: 1,
            dec_count: 0,
            cwnd: 16.0,
            period: 1.0,
            frozen_until: None,
        }
    }

    /// 4.11's controller or the SC'04 paper's.
    pub fn variant(&self) -> NativeVariant {
        self.variant
    }

    /// Whether the controller is still in slow start: the window grows by each ACK and no rate
    /// is set until the first loss, EXP or a window past the flow window (§12.3–§12.5).
    pub fn in_slow_start(&self) -> bool {
        self.slow_start
    }

    /// Largest sequence number sent when the rate was last decreased.
    pub fn last_dec_seq(&self) -> SeqNo {
        self.last_dec_seq
    }

    /// `P` just before the last decrease.
    pub fn last_dec_period(&self) -> f64 {
        self.last_dec_period
    }

    /// Average NAKs per congestion period (integer EWMA).
    pub fn avg_nak_num(&self) -> i32 {
        self.avg_nak_num
    }

    /// NAKs counted in the current congestion period.
    pub fn nak_count(&self) -> i32 {
        self.nak_count
    }

    /// Decrease every `dec_random`-th NAK of the current period.
    pub fn dec_random(&self) -> i32 {
        self.dec_random
    }

    /// NAKs seen in the current period (4.11 `m_iDecCount`).
    pub fn dec_count(&self) -> i32 {
        self.dec_count
    }

    /// Decreases `P` by the factor 1.125, rounded up to whole µs.
    fn decrease(&mut self) {
        self.period = (self.period * DECREASE_FACTOR).ceil();
    }

    fn leave_slow_start(&mut self, input: &CcInput) {
        self.slow_start = false;
        self.period = if input.delivery_rate > 0 {
            1e6 / f64::from(input.delivery_rate)
        } else {
            // 4.11 (onLoss, onTimeout): window over time — an inverted ratio (§14 row 25).
            self.cwnd / (f64::from(input.rtt_us) + micros(self.rc_interval) as f64)
        };
    }

    /// Packets per SYN to add for `spare` packets/s of spare capacity (§12.3).
    fn increase(spare: i64, mss: u32) -> f64 {
        if spare <= 0 {
            return MIN_INC;
        }
        let mss = f64::from(mss.max(1));
        let inc = 10f64.powf((spare as f64 * mss * 8.0).log10().ceil()) * BETA / mss;
        if inc >= MIN_INC {
            inc
        } else {
            MIN_INC
        }
    }
}

impl CongestionControl for UdtNative {
    fn name(&self) -> &'static str {
        match self.variant {
            NativeVariant::Udt411 => "udt411",
            NativeVariant::Paper => "udt-paper",
        }
    }

    fn on_connect(&mut self, input: &CcInput) {
        *self = UdtNative::new(self.variant);
        self.last_rc_time = input.now;
        self.last_ack = input.snd_curr_seq;
        self.last_dec_seq = input.snd_curr_seq.prev();
    }

    /// §12.3.
    fn on_ack(&mut self, input: &CcInput, ack: SeqNo) {
        if input.now - self.last_rc_time < self.rc_interval {
            return;
        }
        self.last_rc_time = input.now;
        let rtt = f64::from(input.rtt_us);
        let rc = micros(self.rc_interval) as f64;

        if self.slow_start {
            self.cwnd += f64::from(self.last_ack.len_to(ack));
            self.last_ack = ack;
            if self.cwnd > f64::from(input.max_window) {
                self.slow_start = false;
                self.period =
                    if input.delivery_rate > 0 { 1e6 / f64::from(input.delivery_rate) } else { (rtt + rc) / self.cwnd };
            }
        } else {
            self.cwnd = f64::from(input.delivery_rate) / 1e6 * (rtt + rc) + 16.0;
        }
        // No rate increase during slow start; but the ACK that ends it does increase.
        if self.slow_start {
            return;
        }
        if self.loss {
            self.loss = false;
            return;
        }

        let bandwidth = i64::from(input.bandwidth);
        let mut spare = (f64::from(input.bandwidth) - 1e6 / self.period) as i64;
        if self.period > self.last_dec_period && bandwidth / 9 < spare {
            spare = bandwidth / 9;
        }
        let inc = Self::increase(spare, input.mss);
        self.period = (self.period * rc) / (self.period * inc + rc);
    }

    /// §12.4.
    fn on_loss(&mut self, input: &CcInput, losses: &[(SeqNo, SeqNo)]) {
        let Some(&(first, _)) = losses.first() else { return };
        if self.slow_start {
            self.leave_slow_start(input);
            if input.delivery_rate > 0 {
                return;
            }
        }
        self.loss = true;

        let trigger = match self.variant {
            NativeVariant::Udt411 => first,
            NativeVariant::Paper => losses.iter().fold(first, |m, &(a, b)| m.max_seq(a).max_seq(b)),
        };
        if trigger.is_after(self.last_dec_seq) {
            self.last_dec_period = self.period;
            self.decrease();
            self.avg_nak_num = (f64::from(self.avg_nak_num) * 0.875 + f64::from(self.nak_count) * 0.125).ceil() as i32;
            self.nak_count = 1;
            self.dec_count = 1;
            self.last_dec_seq = input.snd_curr_seq;
            let r = f64::from(glibc_rand_first(self.last_dec_seq.get())) / f64::from(RAND_MAX);
            self.dec_random = ((f64::from(self.avg_nak_num) * r).ceil() as i32).max(1);
            if self.variant == NativeVariant::Paper {
                self.frozen_until = Some(input.now + SYN);
            }
        } else {
            let old = self.dec_count;
            self.dec_count = self.dec_count.saturating_add(1);
            if old < MAX_DECREASES {
                self.nak_count += 1;
                if self.nak_count % self.dec_random == 0 {
                    self.decrease();
                    self.last_dec_seq = input.snd_curr_seq;
                }
            }
        }
    }

    /// §12.5: only ends slow start; 4.11 has no timeout decrease.
    fn on_timeout(&mut self, input: &CcInput) {
        if self.slow_start {
            self.leave_slow_start(input);
        }
    }

    fn pacing_period_us(&self) -> f64 {
        self.period
    }

    fn window(&self) -> f64 {
        self.cwnd
    }

    fn frozen_until(&self) -> Option<Instant> {
        self.frozen_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISN: u32 = 1000;

    fn s(x: u32) -> SeqNo {
        SeqNo::new(x)
    }

    fn input(now: u64) -> CcInput {
        CcInput {
            now: Instant::from_micros(now),
            mss: 1500,
            rtt_us: 100_000,
            delivery_rate: 16,
            bandwidth: 1,
            snd_curr_seq: s(ISN).prev(),
            max_window: 8192,
        }
    }

    fn connected(variant: NativeVariant) -> UdtNative {
        let mut cc = UdtNative::new(variant);
        cc.on_connect(&input(0));
        cc
    }

    /// Out of slow start with `P = 1e6 / rate` and no pending loss skip, at t = 0.
    fn congestion_avoidance(rate: u32) -> UdtNative {
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_loss(
            &CcInput { delivery_rate: rate, snd_curr_seq: s(ISN + 100), ..input(0) },
            &[(s(ISN + 5), s(ISN + 5))],
        );
        assert!(!cc.in_slow_start());
        cc
    }

    fn approx(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn init_matches_4_11() {
        let cc = connected(NativeVariant::Udt411);
        assert_eq!((cc.window(), cc.pacing_period_us()), (16.0, 1.0));
        assert!(cc.in_slow_start());
        assert_eq!(cc.last_dec_seq(), s(ISN).prev().prev());
        assert_eq!((cc.avg_nak_num(), cc.nak_count(), cc.dec_count(), cc.dec_random()), (0, 0, 0, 1));
        assert_eq!(cc.ack_period(), SYN);
        assert_eq!(cc.frozen_until(), None);
        assert_eq!(cc.name(), "udt411");
    }

    #[test]
    fn slow_start_grows_window_by_newly_acked_plus_one_per_rc_interval() {
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_ack(&input(5_000), s(ISN + 16)); // within SYN of connect: ignored
        assert_eq!(cc.window(), 16.0);
        cc.on_ack(&input(10_000), s(ISN + 16));
        // LastAck starts at ISN − 1: seqlen(ISN − 1, ISN + 16) = 18.
        assert_eq!(cc.window(), 34.0);
        cc.on_ack(&input(20_000), s(ISN + 48)); // 32 newly acked → +33
        assert_eq!(cc.window(), 67.0);
        cc.on_ack(&input(25_000), s(ISN + 60)); // rate limited
        assert_eq!(cc.window(), 67.0);
        assert_eq!(cc.pacing_period_us(), 1.0);
        assert!(cc.in_slow_start());
    }

    #[test]
    fn slow_start_ends_above_max_window_with_period_from_delivery_rate() {
        let mut cc = connected(NativeVariant::Udt411);
        let inp = |now| CcInput { max_window: 50, delivery_rate: 5000, ..input(now) };
        cc.on_ack(&inp(10_000), s(ISN + 32)); // 16 + 34 = 50: not above 50
        assert!(cc.in_slow_start());
        cc.on_ack(&inp(20_000), s(ISN + 33)); // 50 + 2 = 52 > 50
        assert!(!cc.in_slow_start());
        assert_eq!(cc.window(), 52.0);
        // P = 1e6 / 5000 = 200, then the same ACK applies one increase (spare ≤ 0 → 0.01).
        let want = 200.0 * 10_000.0 / (200.0 * MIN_INC + 10_000.0);
        assert!(approx(cc.pacing_period_us(), want), "{}", cc.pacing_period_us());
        // Afterwards the window follows the delivery rate: 5000/1e6 · (100 000 + 10 000) + 16.
        cc.on_ack(&inp(30_000), s(ISN + 40));
        assert!(approx(cc.window(), 5000.0 / 1e6 * 110_000.0 + 16.0));
    }

    #[test]
    fn slow_start_exit_without_delivery_rate_uses_rtt_over_window() {
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_ack(&CcInput { max_window: 20, delivery_rate: 0, ..input(10_000) }, s(ISN + 16));
        assert!(!cc.in_slow_start());
        let p0 = 110_000.0 / 34.0;
        assert!(approx(cc.pacing_period_us(), p0 * 10_000.0 / (p0 * MIN_INC + 10_000.0)));
    }

    #[test]
    fn first_nak_in_slow_start_ends_it_without_decrease() {
        let mut cc = connected(NativeVariant::Udt411);
        let inp = CcInput { delivery_rate: 1000, snd_curr_seq: s(ISN + 40), ..input(3_000) };
        cc.on_loss(&inp, &[(s(ISN + 10), s(ISN + 12))]);
        assert!(!cc.in_slow_start());
        assert_eq!(cc.pacing_period_us(), 1000.0);
        assert_eq!(cc.last_dec_seq(), s(ISN).prev().prev()); // no congestion period opened
        assert_eq!(cc.nak_count(), 0);
        // Loss was not set: the next ACK after SYN increases the rate.
        cc.on_ack(&CcInput { delivery_rate: 1000, ..input(10_000) }, s(ISN + 10));
        assert!(cc.pacing_period_us() < 1000.0);
    }

    #[test]
    fn next_nak_decreases_rate_by_one_eighth_rounded_up() {
        let mut cc = congestion_avoidance(999); // P = 1001.001…
        let p = cc.pacing_period_us();
        let inp = CcInput { snd_curr_seq: s(ISN + 200), ..input(1_000) };
        cc.on_loss(&inp, &[(s(ISN + 150), s(ISN + 150))]);
        assert_eq!(cc.pacing_period_us(), (p * 1.125).ceil());
        assert_eq!(cc.pacing_period_us(), 1127.0);
        assert_eq!(cc.last_dec_period(), p);
        assert_eq!(cc.last_dec_seq(), s(ISN + 200));
        assert_eq!((cc.nak_count(), cc.dec_count(), cc.avg_nak_num(), cc.dec_random()), (1, 1, 0, 1));
    }

    #[test]
    fn slow_start_nak_without_delivery_rate_uses_inverted_ratio_then_decreases() {
        let mut cc = connected(NativeVariant::Udt411);
        let inp = CcInput { delivery_rate: 0, snd_curr_seq: s(ISN + 15), ..input(0) };
        cc.on_loss(&inp, &[(s(ISN + 3), s(ISN + 3))]);
        // P = 16 / 110 000 µs, then a new period: ceil(P · 1.125) = 1.
        assert!(approx(cc.last_dec_period(), 16.0 / 110_000.0));
        assert_eq!(cc.pacing_period_us(), 1.0);
        assert_eq!(cc.last_dec_seq(), s(ISN + 15));
    }

    #[test]
    fn at_most_five_decreases_per_congestion_period() {
        let mut cc = congestion_avoidance(1000);
        let inp = CcInput { snd_curr_seq: s(ISN + 500), ..input(1_000) };
        let mut p = cc.pacing_period_us();
        cc.on_loss(&inp, &[(s(ISN + 300), s(ISN + 300))]); // opens the period, DecRandom = 1
        p = (p * 1.125).ceil();
        assert_eq!(cc.pacing_period_us(), p);
        for k in 2..=5 {
            cc.on_loss(&inp, &[(s(ISN + 300 + k), s(ISN + 300 + k))]);
            p = (p * 1.125).ceil();
            assert_eq!(cc.pacing_period_us(), p, "NAK {k} of the period decreases");
        }
        for k in 6..=20 {
            cc.on_loss(&inp, &[(s(ISN + 300 + k), s(ISN + 300 + k))]);
            assert_eq!(cc.pacing_period_us(), p, "NAK {k} of the period does not");
        }
        assert_eq!(cc.nak_count(), 5);
        assert_eq!(cc.dec_count(), 20);
        assert!(p / 1000.0 <= 1.125f64.powi(5) * 1.01);
    }

    #[test]
    fn decrease_spacing_is_randomised_like_4_11() {
        let mut cc = congestion_avoidance(1000);
        let mut curr = ISN + 1000;
        for _ in 0..8 {
            // Each period: 1 opening NAK + 6 more in-period NAKs, then send beyond.
            let inp = CcInput { snd_curr_seq: s(curr), ..input(1_000) };
            cc.on_loss(&inp, &[(s(curr - 1), s(curr - 1))]);
            let avg = cc.avg_nak_num();
            let r = f64::from(glibc_rand_first(curr)) / f64::from(RAND_MAX);
            assert_eq!(cc.dec_random(), ((f64::from(avg) * r).ceil() as i32).max(1));
            assert!(1 <= cc.dec_random() && cc.dec_random() <= avg.max(1));
            let dr = cc.dec_random();
            for k in 2..=7 {
                let before = cc.pacing_period_us();
                cc.on_loss(&inp, &[(s(curr - 2), s(curr - 2))]);
                let decreased = cc.pacing_period_us() > before;
                let expect = k <= MAX_DECREASES && k % dr == 0;
                assert_eq!(decreased, expect, "period NAK {k} with DecRandom {dr}");
            }
            curr += 1000;
        }
        // The EWMA of NAKs per period (5 counted each time) climbs to 5: 1, 2, 3, 4, 5, 5…
        assert_eq!(cc.avg_nak_num(), 5);
    }

    #[test]
    fn loss_skips_one_increase() {
        let mut cc = congestion_avoidance(1000);
        let inp = |now| CcInput { delivery_rate: 1000, bandwidth: 100_000, snd_curr_seq: s(ISN + 500), ..input(now) };
        cc.on_loss(&inp(1_000), &[(s(ISN + 300), s(ISN + 300))]);
        let p = cc.pacing_period_us();
        cc.on_ack(&inp(20_000), s(ISN + 310));
        assert_eq!(cc.pacing_period_us(), p, "first ACK after a loss is skipped");
        cc.on_ack(&inp(30_000), s(ISN + 320));
        assert!(cc.pacing_period_us() < p);
    }

    /// Spare capacity `spare` pkts/s with `bandwidth = 10·spare`, sending at `9·spare`
    /// (so the `bandwidth/9` cap does not bind): the packets per SYN added.
    fn measured_inc(spare: u32, mss: u32) -> f64 {
        let mut cc = congestion_avoidance(9 * spare);
        let p = cc.pacing_period_us();
        cc.on_ack(&CcInput { mss, bandwidth: 10 * spare, delivery_rate: 9 * spare, ..input(10_000) }, s(ISN + 10));
        micros(SYN) as f64 / cc.pacing_period_us() - micros(SYN) as f64 / p
    }

    #[test]
    fn increase_follows_the_paper_table() {
        let pkts = |bits_per_sec: f64| (bits_per_sec / 12_000.0) as u32;
        let cases = [
            (0.5e6, 0.01), // the paper's 0.001 row, raised to min_inc by 4.11
            (5e6, 0.01),
            (50e6, 0.1),
            (500e6, 1.0),
            (5e9, 10.0),
        ];
        for (bits, want) in cases {
            let got = measured_inc(pkts(bits), 1500);
            assert!(approx(got, want) || (got - want).abs() < 1e-9, "{bits} b/s: inc {got}, want {want}");
        }
        // Other MSS: the byte increase is the same, so packets scale by 1500/MSS.
        let got = measured_inc((50e6 / (9000.0 * 8.0)) as u32, 9000);
        assert!((got - 0.1 * 1500.0 / 9000.0).abs() < 1e-9, "{got}");
    }

    #[test]
    fn spare_capacity_is_capped_below_the_pre_decrease_rate() {
        let mut cc = congestion_avoidance(1000);
        let inp = |now| CcInput { bandwidth: 900_000, snd_curr_seq: s(ISN + 500), ..input(now) };
        cc.on_loss(&inp(1_000), &[(s(ISN + 300), s(ISN + 300))]); // P > LastDecPeriod now
        cc.on_ack(&inp(20_000), s(ISN + 310)); // the loss skip
        let p = cc.pacing_period_us();
        cc.on_ack(&inp(30_000), s(ISN + 320));
        // B = min(900 000 − 1e6/P, 900 000/9 = 100 000) → 1.2 Gb/s → inc 10.
        let inc = micros(SYN) as f64 / cc.pacing_period_us() - micros(SYN) as f64 / p;
        assert!((inc - 10.0).abs() < 1e-9, "{inc}");
    }

    #[test]
    fn timeout_ends_slow_start_only() {
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_timeout(&CcInput { delivery_rate: 2000, ..input(500_000) });
        assert!(!cc.in_slow_start());
        assert_eq!(cc.pacing_period_us(), 500.0);
        cc.on_timeout(&CcInput { delivery_rate: 10, ..input(900_000) });
        assert_eq!(cc.pacing_period_us(), 500.0);
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_timeout(&CcInput { delivery_rate: 0, ..input(500_000) });
        assert!(approx(cc.pacing_period_us(), 16.0 / 110_000.0));
    }

    #[test]
    fn udt411_opens_a_period_on_the_first_number_only() {
        let mut cc = congestion_avoidance(1000);
        let inp = CcInput { snd_curr_seq: s(ISN + 500), ..input(1_000) };
        cc.on_loss(&inp, &[(s(ISN + 300), s(ISN + 300))]); // LastDecSeq := ISN + 500
        let p = cc.pacing_period_us();
        // Smallest number ≤ LastDecSeq, largest beyond it: 4.11 stays in the period.
        let inp2 = CcInput { snd_curr_seq: s(ISN + 900), ..input(2_000) };
        cc.on_loss(&inp2, &[(s(ISN + 400), s(ISN + 400)), (s(ISN + 600), s(ISN + 700))]);
        assert_eq!(cc.dec_count(), 2);
        assert_eq!(cc.pacing_period_us(), (p * 1.125).ceil()); // in-period decrease (DecRandom 1)
        assert_eq!(cc.frozen_until(), None);
    }

    #[test]
    fn paper_variant_opens_a_period_on_the_largest_number_and_freezes_one_syn() {
        let mut cc = connected(NativeVariant::Paper);
        assert_eq!(cc.name(), "udt-paper");
        cc.on_loss(
            &CcInput { delivery_rate: 1000, snd_curr_seq: s(ISN + 100), ..input(0) },
            &[(s(ISN + 5), s(ISN + 5))],
        );
        assert_eq!(cc.frozen_until(), None, "the slow-start exit is not a congestion period");
        let inp = CcInput { snd_curr_seq: s(ISN + 500), ..input(1_000) };
        cc.on_loss(&inp, &[(s(ISN + 300), s(ISN + 300))]);
        assert_eq!(cc.frozen_until(), Some(Instant::from_micros(1_000) + SYN));
        let inp2 = CcInput { snd_curr_seq: s(ISN + 900), ..input(50_000) };
        cc.on_loss(&inp2, &[(s(ISN + 400), s(ISN + 400)), (s(ISN + 600), s(ISN + 700))]);
        assert_eq!(cc.dec_count(), 1, "a new period");
        assert_eq!(cc.last_dec_seq(), s(ISN + 900));
        assert_eq!(cc.frozen_until(), Some(Instant::from_micros(50_000) + SYN));
        // In-period NAKs do not extend the freeze.
        cc.on_loss(&CcInput { now: Instant::from_micros(55_000), ..inp2 }, &[(s(ISN + 800), s(ISN + 800))]);
        assert_eq!(cc.frozen_until(), Some(Instant::from_micros(50_000) + SYN));
    }

    #[test]
    fn periods_work_across_the_sequence_wrap() {
        let mut cc = UdtNative::new(NativeVariant::Udt411);
        let isn = SeqNo::MAX.sub(10);
        cc.on_connect(&CcInput { snd_curr_seq: isn.prev(), ..input(0) });
        cc.on_loss(&CcInput { snd_curr_seq: isn.add(5), ..input(0) }, &[(isn, isn)]); // ends slow start
        cc.on_loss(&CcInput { snd_curr_seq: isn.add(30), ..input(0) }, &[(isn.add(20), isn.add(20))]);
        assert_eq!(cc.last_dec_seq(), isn.add(30)); // 19 — after the wrap
        assert_eq!(cc.dec_count(), 1);
        cc.on_loss(&CcInput { snd_curr_seq: isn.add(40), ..input(0) }, &[(isn.add(25), isn.add(25))]);
        assert_eq!(cc.dec_count(), 2, "25 past the ISN is before LastDecSeq");
    }

    #[test]
    fn empty_loss_list_and_odd_inputs_do_not_panic() {
        let mut cc = connected(NativeVariant::Udt411);
        cc.on_loss(&input(0), &[]);
        assert!(cc.in_slow_start());
        let odd = CcInput {
            mss: 0,
            rtt_us: u32::MAX,
            delivery_rate: 0,
            bandwidth: u32::MAX,
            max_window: 0,
            ..input(u64::MAX)
        };
        cc.on_ack(&odd, s(ISN + 3));
        cc.on_ack(&CcInput { now: Instant::MAX, ..odd }, s(ISN));
        cc.on_loss(&odd, &[(s(ISN), s(ISN + 2))]);
        cc.on_timeout(&odd);
        assert!(cc.pacing_period_us() >= 0.0);
    }
}
