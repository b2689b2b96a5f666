//! Congestion control as a trait (UDT4.md §12, SABUL.md §7, FRTP.md §4), injected rather than
//! enumerated, as quinn's `ControllerFactory` and smoltcp's no-op congestion hooks are.
//!
//! This is UDT4's own CCC idea: the connection owns the mechanics (ACKs, loss reports, loss
//! lists, timers) and asks a controller for two numbers, the inter-packet period `P` and the
//! congestion window `W_cc`, reloading them after every controller call (§12.6). The set of
//! controllers is open: a connection is configured with a [`ControllerFactory`], and a new
//! controller is a new type, never a change to a connection.
//!
//! Implementations: [`fixed_rate::FixedRate`] here (FRTP; no congestion control), UDT's
//! native controller in `udt_proto::cc` (4.11's `CUDTCC` and the SC'04 variant), SABUL's MIMD
//! controller in the SABUL crate.
//!
//! Call order, per connection: [`on_connect`](CongestionControl::on_connect) once when the
//! connection is established; then any sequence of [`on_sent`](CongestionControl::on_sent),
//! [`on_ack`](CongestionControl::on_ack), [`on_loss`](CongestionControl::on_loss),
//! [`on_timeout`](CongestionControl::on_timeout) and [`on_tick`](CongestionControl::on_tick)
//! with non-decreasing `now`, each followed by reading
//! [`pacing_period_us`](CongestionControl::pacing_period_us),
//! [`window`](CongestionControl::window) and [`frozen_until`](CongestionControl::frozen_until).
//! Every event has a no-op default, so a controller implements only what it reacts to.
//!
//! The periodic hook is the place for rate control clocked by time rather than by ACKs:
//! SABUL's increase runs once per SYN, counting what [`on_sent`](CongestionControl::on_sent)
//! and [`on_loss`](CongestionControl::on_loss) saw in that SYN (SABUL.md §7.2). A protocol
//! that has its own clock for it calls `on_tick` itself (SABUL: at each SYN packet from the
//! receiver, §5.4); otherwise a [`Controller`] calls it every
//! [`tick_interval`](CongestionControl::tick_interval) from the connection's timers.

use core::fmt;

use crate::pacing::Pacer;
use crate::seq::SeqNo;
use crate::time::{Duration, Instant};

pub mod fixed_rate;

/// `SYN`: the family's rate-control interval, UDT's ACK timer period (UDT4.md §1, §9.3,
/// §12.1) and SABUL's SYN packet interval (SABUL.md §6, §7).
pub const SYN: Duration = Duration::from_micros(10_000);

/// What the connection tells its controller at every call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CcInput {
    /// Current time.
    pub now: Instant,
    /// Negotiated MSS in bytes, IP and UDP headers included (UDT4.md §1).
    pub mss: u32,
    /// The sender's smoothed RTT, µs (UDT4.md §8.6 step 6; SABUL: the setup estimate).
    pub rtt_us: u32,
    /// Packets/s: the sender's EWMA of the receiver's arrival speed (UDT's ACK field 5, 4.11
    /// `m_iRcvRate`, starts at 16); 0 where the protocol reports none.
    pub delivery_rate: u32,
    /// Packets/s: the sender's EWMA of the receiver's capacity estimate (UDT's ACK field 6,
    /// 4.11 `m_iBandwidth`, starts at 1); 0 where the protocol reports none.
    pub bandwidth: u32,
    /// Largest sequence number sent (4.11 `m_iSndCurrSeqNo`).
    pub snd_curr_seq: SeqNo,
    /// The receiver's flow window from the handshake: the slow-start ceiling (UDT4.md §12.3;
    /// SABUL.md §8).
    pub max_window: u32,
}

/// A congestion controller: turns send, acknowledgement, loss, timeout and tick events into a
/// pacing period and a window. See the module docs for the call order.
pub trait CongestionControl: Send + fmt::Debug {
    /// Short name for logs and statistics.
    fn name(&self) -> &'static str;
    /// The connection is established.
    fn on_connect(&mut self, _input: &CcInput) {}
    /// A data packet left, `seq`, a retransmission or not.
    fn on_sent(&mut self, _input: &CcInput, _seq: SeqNo, _retransmission: bool) {}
    /// An acknowledgement advanced the send buffer to `ack` (everything before it arrived).
    fn on_ack(&mut self, _input: &CcInput, _ack: SeqNo) {}
    /// A loss report arrived (UDT's NAK, SABUL's ERR); `losses` is its decoded list, in
    /// order, before it is applied.
    fn on_loss(&mut self, _input: &CcInput, _losses: &[(SeqNo, SeqNo)]) {}
    /// The retransmission timer fired with unacknowledged data (UDT4.md §9.4, SABUL.md §5.3).
    fn on_timeout(&mut self, _input: &CcInput) {}
    /// How often [`on_tick`](Self::on_tick) runs when the connection's timers drive it;
    /// `None` (the default): never.
    fn tick_interval(&self) -> Option<Duration> {
        None
    }
    /// The periodic rate-control event (see the module docs).
    fn on_tick(&mut self, _input: &CcInput) {}
    /// `P`: the inter-packet interval, µs.
    fn pacing_period_us(&self) -> f64;
    /// `W_cc`: the congestion window in packets (the sender uses its integer part).
    fn window(&self) -> f64;
    /// UDT's ACK timer period (`SYN`, as 4.11's CUDTCC sets).
    fn ack_period(&self) -> Duration {
        SYN
    }
    /// No new packet may leave before this time (SABUL's freeze, UDT's SC'04 variant).
    fn frozen_until(&self) -> Option<Instant> {
        None
    }
}

/// Makes one controller per connection: what a connection's configuration holds, so that the
/// set of controllers stays open.
///
/// Any controller that is `Clone` is its own factory (each connection gets a copy of it in
/// its initial state), so a configuration can simply hold `Arc::new(FixedRate::new(12.0))`.
pub trait ControllerFactory: Send + Sync + fmt::Debug {
    /// A fresh controller for one connection, in its initial state.
    fn build(&self) -> Box<dyn CongestionControl>;
}

impl<C: CongestionControl + Clone + Sync + 'static> ControllerFactory for C {
    fn build(&self) -> Box<dyn CongestionControl> {
        Box::new(self.clone())
    }
}

/// A connection's controller, with what every protocol does around it: the periodic tick,
/// and handing `P` and the freeze to the [`Pacer`] after each event.
#[derive(Debug)]
pub struct Controller {
    cc: Box<dyn CongestionControl>,
    next_tick: Option<Instant>,
}

impl Controller {
    /// Wraps a fresh controller from `factory`; the tick clock starts at
    /// [`on_connect`](Self::on_connect).
    pub fn new(factory: &dyn ControllerFactory) -> Controller {
        Controller { cc: factory.build(), next_tick: None }
    }

    /// The controller itself, for its window and settings.
    pub fn get(&self) -> &dyn CongestionControl {
        &*self.cc
    }

    /// The connection is established: starts the tick clock.
    pub fn on_connect(&mut self, input: &CcInput) {
        self.cc.on_connect(input);
        self.next_tick = self.cc.tick_interval().map(|d| input.now + d);
    }

    /// A data packet `seq` left (`retransmission`: sent before).
    #[inline]
    pub fn on_sent(&mut self, input: &CcInput, seq: SeqNo, retransmission: bool) {
        self.cc.on_sent(input, seq, retransmission)
    }

    /// An ACK acknowledged everything before `ack`.
    pub fn on_ack(&mut self, input: &CcInput, ack: SeqNo) {
        self.cc.on_ack(input, ack)
    }

    /// The peer reported `losses`, inclusive ranges of sequence numbers.
    pub fn on_loss(&mut self, input: &CcInput, losses: &[(SeqNo, SeqNo)]) {
        self.cc.on_loss(input, losses)
    }

    /// The retransmission timer (EXP) fired.
    pub fn on_timeout(&mut self, input: &CcInput) {
        self.cc.on_timeout(input)
    }

    /// Runs the tick now, for a protocol with its own clock for it (SABUL: each SYN packet,
    /// SABUL.md §5.4); the controller's own tick schedule is untouched.
    pub fn on_tick(&mut self, input: &CcInput) {
        self.cc.on_tick(input)
    }

    /// When [`handle_timeout`](Self::handle_timeout) has a tick to run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
    }

    /// Runs the tick if it is due at `input.now`; returns whether it ran. A late call runs
    /// one tick and schedules the next one interval after it (ticks are not made up).
    pub fn handle_timeout(&mut self, input: &CcInput) -> bool {
        match self.next_tick {
            Some(t) if input.now >= t => {
                self.cc.on_tick(input);
                self.next_tick = self.cc.tick_interval().map(|d| if t + d > input.now { t + d } else { input.now + d });
                true
            }
            _ => false,
        }
    }

    /// Hands `P` (at least `min_period_us`, e.g. UDT's `UDT_MAXBW` limit, §12.6) and the
    /// freeze to `pacer`; returns `W_cc`.
    pub fn pace(&self, pacer: &mut Pacer, min_period_us: f64) -> f64 {
        pacer.set_period(self.cc.pacing_period_us().max(min_period_us).max(0.0));
        pacer.freeze(self.cc.frozen_until());
        self.cc.window()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A controller clocked by time, not by ACKs, as SABUL's is (SABUL.md §7.2): it counts
    /// the packets sent and lost in each tick and, at the tick, speeds up by a tenth when
    /// nothing was lost and slows down by a quarter otherwise. Its copies share one log of
    /// `(sent, lost)` per tick.
    #[derive(Clone, Debug)]
    struct PerTick {
        period: f64,
        sent: u32,
        lost: u32,
        log: Arc<Mutex<Vec<(u32, u32)>>>,
    }

    impl PerTick {
        fn new(period: f64) -> PerTick {
            PerTick { period, sent: 0, lost: 0, log: Arc::default() }
        }
    }

    impl CongestionControl for PerTick {
        fn name(&self) -> &'static str {
            "per-tick"
        }
        fn on_sent(&mut self, _: &CcInput, _: SeqNo, _: bool) {
            self.sent += 1;
        }
        fn on_loss(&mut self, _: &CcInput, losses: &[(SeqNo, SeqNo)]) {
            self.lost += losses.iter().map(|&(a, b)| a.len_to(b)).sum::<u32>();
        }
        fn tick_interval(&self) -> Option<Duration> {
            Some(SYN)
        }
        fn on_tick(&mut self, _: &CcInput) {
            self.log.lock().unwrap().push((self.sent, self.lost));
            self.period *= if self.lost == 0 { 1.0 / 1.1 } else { 1.25 };
            (self.sent, self.lost) = (0, 0);
        }
        fn pacing_period_us(&self) -> f64 {
            self.period
        }
        fn window(&self) -> f64 {
            f64::from(u32::MAX)
        }
    }

    fn at(us: u64) -> CcInput {
        CcInput { now: Instant::from_micros(us), mss: 1500, ..CcInput::default() }
    }

    #[test]
    fn the_periodic_hook_drives_a_time_clocked_controller_through_the_pacer() {
        let proto = PerTick::new(100.0);
        let log = proto.log.clone();
        let factory: Arc<dyn ControllerFactory> = Arc::new(proto);
        let mut c = Controller::new(&*factory);
        let mut pacer = Pacer::new(Instant::ZERO, 100.0, 1);
        c.on_connect(&at(0));
        assert_eq!(c.poll_timeout(), Some(Instant::from_micros(10_000)));
        // A sender that sends whenever the pacer lets it and runs the timers the core names.
        let mut seq = SeqNo::ZERO;
        for now in 0..35_000u64 {
            let input = at(now);
            if c.handle_timeout(&input) {
                c.pace(&mut pacer, 0.0);
            }
            if pacer.next_time() <= input.now {
                pacer.on_sent(input.now, false);
                c.on_sent(&input, seq, false);
                seq = seq.next();
            }
            if now == 15_000 {
                c.on_loss(&input, &[(SeqNo::new(3), SeqNo::new(4))]);
            }
        }
        let ticks = log.lock().unwrap().clone();
        // 100 µs apart: 100 packets in the first SYN, more in the second, which saw the loss
        // of two; the third is slower again.
        assert_eq!(ticks.len(), 3);
        assert_eq!(ticks[0], (100, 0));
        assert!(ticks[1].0 > 100 && ticks[1].1 == 2, "{ticks:?}");
        assert!(ticks[2].0 < ticks[1].0, "{ticks:?}");
        assert!((pacer.period() - 100.0 / 1.1 / 1.1 * 1.25).abs() < 1e-9, "{}", pacer.period());
        assert_eq!(c.poll_timeout(), Some(Instant::from_micros(40_000)));
    }

    #[test]
    fn a_late_timer_runs_one_tick_and_keeps_the_clock() {
        let mut c = Controller::new(&PerTick::new(10.0));
        c.on_connect(&at(0));
        assert!(!c.handle_timeout(&at(9_999)));
        assert!(c.handle_timeout(&at(10_500)));
        assert_eq!(c.poll_timeout(), Some(Instant::from_micros(20_000)));
        assert!(c.handle_timeout(&at(95_000))); // far behind: one tick, the next SYN from now
        assert_eq!(c.poll_timeout(), Some(Instant::from_micros(105_000)));
    }

    #[test]
    fn pace_applies_the_lower_bound_and_the_freeze() {
        #[derive(Clone, Debug)]
        struct Frozen;
        impl CongestionControl for Frozen {
            fn name(&self) -> &'static str {
                "frozen"
            }
            fn pacing_period_us(&self) -> f64 {
                5.0
            }
            fn window(&self) -> f64 {
                16.0
            }
            fn frozen_until(&self) -> Option<Instant> {
                Some(Instant::from_micros(777))
            }
        }
        let c = Controller::new(&Frozen);
        let mut pacer = Pacer::new(Instant::ZERO, 1.0, 1);
        assert_eq!(c.pace(&mut pacer, 8.0), 16.0);
        assert_eq!(pacer.period(), 8.0);
        assert_eq!(pacer.next_time(), Instant::from_micros(777));
        assert_eq!(c.get().name(), "frozen");
        assert_eq!(c.poll_timeout(), None, "no tick without a tick interval");
    }
}
