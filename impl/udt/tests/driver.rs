//! The runtime's I/O engine (`udt::driver`) drives a protocol that is not UDT: paced data over
//! UDP and a control conversation over a TCP connection, as SABUL and FRTP need (SABUL.md §1,
//! FRTP.md §1). The protocol here is a small stand-in: the sender paces `COUNT` numbered
//! datagrams one `PERIOD` apart, then, `DRAIN` later, says `DONE` on the control stream; the receiver counts
//! what arrived and answers `GOT <n>`, then closes the stream. Unless told otherwise the sender
//! says its departures are paced data (`Protocol::poll_timer` leaves them out), as UDT's and
//! SABUL's cores do, so the engine may let them out late in batches; it may run a timer of its
//! own beside them, which it records how late it ran.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use transfer::time::Instant;
use transfer::transmit::{Source, Transmit};
use udt::driver::{ArrivalStamp, BufferSizes, Clock, Io, Pacing, Protocol, UdpSocket, Wakeup};

const COUNT: u32 = 500;
/// Longer than [`SPIN`], for a protocol that does not say its departures are paced data: each
/// departure slept to and spun on.
const PERIOD: Duration = Duration::from_micros(400);
/// Dense (at most `driver::ARRIVAL_GAP_MAX` and `driver::DEPARTURE_GAP_MAX`) but longer than
/// [`SPIN`]: about 120 Mb/s of 1500-byte packets, where the threshold grows to
/// `driver::SLEEP_QUANTUM_PKTS` periods.
const DENSE_PERIOD: Duration = Duration::from_micros(100);
/// About 20 Mb/s of 1500-byte packets: longer than `driver::ARRIVAL_GAP_MAX`, within
/// `driver::DEPARTURE_GAP_MAX`: paced data still leaves `driver::SLEEP_QUANTUM_PKTS` at a time.
const SLOW_PERIOD: Duration = Duration::from_micros(600);
/// Shorter than [`SPIN`]: too short a wait to sleep to the microsecond.
const SHORT_PERIOD: Duration = Duration::from_micros(10);
/// From the last datagram to `DONE`.
const DRAIN: Duration = Duration::from_millis(20);
const SPIN: Duration = Duration::from_micros(50);

struct Sender {
    period: Duration,
    /// Whether [`Protocol::poll_timer`] leaves the departures out (they are paced data).
    paced_data: bool,
    /// Window-bound sending ([`Window`]); the current window opened at `window_start`, and
    /// the pass at `pass.0` has sent `pass.1` datagrams.
    window: Option<Window>,
    window_start: Option<Instant>,
    pass: (Instant, u32),
    /// A timer of the sender's own, every `.0`, next due at `.1`, and how late each ran.
    timer: Option<(Duration, Instant)>,
    timer_lateness: Vec<Duration>,
    to: SocketAddr,
    control_peer: SocketAddr,
    next: Option<Instant>,
    seq: u32,
    done_sent: bool,
    reply: Vec<u8>,
    closed: Option<bool>,
}

impl Protocol for Sender {
    fn handle_datagram(&mut self, _: Instant, _: SocketAddr, _: &[u8]) {}
    fn handle_control(&mut self, _: Instant, bytes: &[u8]) {
        self.reply.extend_from_slice(bytes);
    }
    fn handle_control_closed(&mut self, _: Instant, reset: bool) {
        self.closed = Some(reset);
    }
    fn handle_timeout(&mut self, now: Instant) {
        let running = self.seq < COUNT;
        if let Some((every, due)) =
            self.timer.as_mut().filter(|(_, due)| *due != Instant::ZERO && now >= *due && running)
        {
            self.timer_lateness.push(now - *due);
            *due = now + *every;
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        let departure = self.next.filter(|_| self.seq < COUNT);
        [departure, self.poll_timer()].into_iter().flatten().min()
    }
    fn poll_timer(&self) -> Option<Instant> {
        let window_opens = self.window.is_some_and(|w| self.seq.is_multiple_of(w.size));
        let departure = self.next.filter(|_| self.seq < COUNT && (!self.paced_data || window_opens));
        let done = self.next.filter(|_| self.seq >= COUNT && !self.done_sent).map(|n| n + DRAIN);
        let timer = self.timer.filter(|_| self.seq < COUNT).map(|(_, due)| due);
        [departure, done, timer].into_iter().flatten().min()
    }
    fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let next = *self.next.get_or_insert(now);
        if let Some((every, due)) = self.timer.as_mut().filter(|(_, due)| *due == Instant::ZERO) {
            *due = now + *every;
        }
        if now != self.pass.0 {
            self.pass = (now, 0);
        }
        let budget = self.window.is_none_or(|w| self.pass.1 < w.burst);
        if self.seq < COUNT && now >= next && budget {
            self.pass.1 += 1;
            buf[..4].copy_from_slice(&self.seq.to_be_bytes());
            buf[4..1000].fill(0x5A);
            if self.window.is_some_and(|w| self.seq.is_multiple_of(w.size)) {
                self.window_start = Some(next);
            }
            self.seq += 1;
            self.next = Some(match (self.window, self.window_start) {
                (Some(w), Some(start)) if self.seq.is_multiple_of(w.size) => start + w.every,
                (Some(_), _) => next,
                _ => next + self.period,
            });
            return Some(Transmit { destination: self.to, size: 1000, source: Source::Data });
        }
        // DONE a while after the last datagram, so that the receiver has read them all when
        // it hears it (it answers in the same pass).
        if self.seq == COUNT && !self.done_sent && now >= next + DRAIN {
            self.done_sent = true;
            buf[..5].copy_from_slice(b"DONE\n");
            return Some(Transmit { destination: self.control_peer, size: 5, source: Source::Control });
        }
        None
    }
}

/// Window-bound sending, as in slow start: `size` datagrams are due at once when a window
/// opens, `every` after the last one did (as an ACK would open it: a timer, not paced data);
/// a pass lets out at most `burst` of them (the pacer's catch-up), the rest stay due.
#[derive(Clone, Copy)]
struct Window {
    size: u32,
    every: Duration,
    burst: u32,
}

#[derive(Default)]
struct Receiver {
    arrivals: Vec<(Instant, u32)>,
    heard_done: bool,
    replied: bool,
    control_peer: Option<SocketAddr>,
    /// `recvmmsg` calls the receiver's engine made, and how many of them found datagrams.
    recv_calls: u64,
    recv_msgs: u64,
}

impl Protocol for Receiver {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, d: &[u8]) {
        self.arrivals.push((now, u32::from_be_bytes([d[0], d[1], d[2], d[3]])));
    }
    fn handle_control(&mut self, _: Instant, bytes: &[u8]) {
        self.heard_done |= bytes == b"DONE\n";
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_transmit(&mut self, _: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if !self.heard_done || self.replied {
            return None;
        }
        self.replied = true;
        let text = format!("GOT {}\n", self.arrivals.len());
        buf[..text.len()].copy_from_slice(text.as_bytes());
        let to = self.control_peer.expect("connected");
        Some(Transmit { destination: to, size: text.len(), source: Source::Control })
    }
}

fn udp() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0".parse().unwrap(), BufferSizes { send: 1 << 20, recv: 4 << 20 }).unwrap()
}

/// How a [`paced_run`] goes besides its period and pacing.
#[derive(Clone, Copy)]
struct Options {
    /// How the receiver stamps arrivals.
    rx_stamp: ArrivalStamp,
    /// Whether the sender says its departures are paced data ([`Sender::paced_data`]).
    paced_data: bool,
    /// A timer of the sender's own, every this long.
    timer: Option<Duration>,
    /// Window-bound sending ([`Sender::window`]).
    window: Option<Window>,
}

const DEFAULT: Options = Options { rx_stamp: ArrivalStamp::Kernel, paced_data: true, timer: None, window: None };

/// A [`Sender`] one `period` apart to a [`Receiver`], the sender's engine waiting as `pacing`
/// says: the receiver's protocol and how long the sender took.
fn paced_run(period: Duration, pacing: Pacing) -> (Sender, Receiver, Duration) {
    paced_run_with(period, pacing, DEFAULT)
}

/// [`paced_run`] as `o` says.
fn paced_run_with(period: Duration, pacing: Pacing, o: Options) -> (Sender, Receiver, Duration) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (rx_udp, tx_udp) = (udp(), udp());
    let rx_addr = rx_udp.local_addr();
    let ctrl_addr = listener.local_addr().unwrap();

    let receiver = std::thread::spawn(move || {
        let (tcp, peer) = listener.accept().unwrap();
        let mut p = Receiver { control_peer: Some(peer), ..Receiver::default() };
        let mut io = Io::new(rx_udp, Some(tcp), SPIN).unwrap();
        io.set_arrival_stamp(o.rx_stamp);
        io.run(&mut p, &Clock::default(), &Wakeup::new().unwrap(), |p, io| {
            (p.recv_calls, p.recv_msgs) = (io.udp().counters.recv_calls, io.udp().counters.recv_msgs);
            p.replied
        })
        .unwrap();
        p
    });
    let tcp = TcpStream::connect(ctrl_addr).unwrap();
    let mut p = Sender {
        period,
        paced_data: o.paced_data,
        timer: o.timer.map(|every| (every, Instant::ZERO)),
        window: o.window,
        window_start: None,
        pass: (Instant::ZERO, 0),
        timer_lateness: Vec::new(),
        to: rx_addr,
        control_peer: ctrl_addr,
        next: None,
        seq: 0,
        done_sent: false,
        reply: Vec::new(),
        closed: None,
    };
    let mut io = Io::new(tx_udp, Some(tcp), SPIN).unwrap();
    io.set_pacing(pacing);
    let started = std::time::Instant::now();
    io.run(&mut p, &Clock::default(), &Wakeup::new().unwrap(), |p, _| p.closed.is_some()).unwrap();
    let elapsed = started.elapsed();
    (p, receiver.join().unwrap(), elapsed)
}

/// Every datagram arrived, in order, once each, and the conversation ended cleanly.
fn assert_delivered(p: &Sender, r: &Receiver) {
    assert_eq!(String::from_utf8_lossy(&p.reply), format!("GOT {COUNT}\n"), "every datagram arrived");
    assert_eq!(p.closed, Some(false), "the receiver closed the stream after its answer: an EOF, not a reset");
    let seqs: Vec<u32> = r.arrivals.iter().map(|a| a.1).collect();
    assert_eq!(seqs, (0..COUNT).collect::<Vec<_>>(), "in order, once each");
}

/// The gaps between the receiver's kernel arrival stamps, sorted.
fn sorted_gaps(r: &Receiver) -> Vec<Duration> {
    let mut gaps: Vec<Duration> = r.arrivals.windows(2).map(|w| w[1].0 - w[0].0).collect();
    gaps.sort();
    gaps
}

#[test]
fn paced_datagrams_over_udp_and_a_conversation_over_tcp() {
    for pacing in [Pacing::Sleep, Pacing::Spin] {
        let (p, r, elapsed) = paced_run_with(PERIOD, pacing, Options { paced_data: false, ..DEFAULT });
        assert_delivered(&p, &r);
        // Paced: one PERIOD apart, by the kernel's arrival stamps (the median, against a busy
        // machine's outliers), and the whole run no faster than the schedule. A departure the
        // protocol counts among its timers, further off than the spin threshold, is slept to
        // its last stretch and spun there either way.
        let gaps = sorted_gaps(&r);
        let median = gaps[gaps.len() / 2];
        assert!(median >= PERIOD * 3 / 4 && median <= PERIOD * 5 / 4, "{pacing:?}: median gap {median:?}");
        assert!(elapsed >= PERIOD * (COUNT - 1), "{pacing:?}: {elapsed:?} for {COUNT} packets {PERIOD:?} apart");
    }
}

#[test]
fn a_dense_sender_sleeps_several_periods_and_lets_out_what_fell_due_on_average_on_schedule() {
    // Issue 40, part 4: at 100 Mb/s a wake-up and a `sendmmsg` per packet cost 3x 4.11's CPU.
    // Departures 100 µs apart are dense: the engine sleeps about four periods and the pacer
    // lets out what fell due together; the average rate holds.
    let (p, r, elapsed) = paced_run(DENSE_PERIOD, Pacing::Sleep);
    assert_delivered(&p, &r);
    let schedule = DENSE_PERIOD * (COUNT - 1);
    assert!(elapsed >= schedule, "{elapsed:?} for {COUNT} packets {DENSE_PERIOD:?} apart");
    let gaps = sorted_gaps(&r);
    let short = gaps.iter().filter(|g| **g < DENSE_PERIOD / 2).count();
    assert!(
        short * 2 >= gaps.len(),
        "bursts of several datagrams, not one a period: {short} of {} gaps under {:?}",
        gaps.len(),
        DENSE_PERIOD / 2
    );
}

#[test]
fn paced_data_at_20_mbps_leaves_several_packets_a_wake_up_on_average_on_schedule() {
    // Issue 40, part 4: below ~48 Mb/s each packet was its own wake-up, `ppoll` and
    // `sendmmsg`, and udt-rs's sender took twice 4.11's CPU (Ottawa, three-site at scale 0.1).
    // 600 µs apart, paced data still leaves about four periods' worth at a time.
    let (p, r, elapsed) = paced_run(SLOW_PERIOD, Pacing::Sleep);
    assert_delivered(&p, &r);
    let schedule = SLOW_PERIOD * (COUNT - 1);
    assert!(elapsed >= schedule, "{elapsed:?} for {COUNT} packets {SLOW_PERIOD:?} apart");
    let gaps = sorted_gaps(&r);
    let short = gaps.iter().filter(|g| **g < SLOW_PERIOD / 2).count();
    assert!(
        short * 2 >= gaps.len(),
        "bursts of several datagrams, not one a period: {short} of {} gaps under {:?}",
        gaps.len(),
        SLOW_PERIOD / 2
    );
}

#[test]
fn a_timer_beside_paced_data_runs_on_time_though_the_data_leaves_in_batches() {
    // Departures 2 ms apart grow the sleep to about 8 ms; the sender's own timer, every 3 ms,
    // is still slept to, not past (UDT's receiver ACK timer, EXP, SABUL's deadlines).
    let every = Duration::from_millis(3);
    let (p, r, _) = paced_run_with(Duration::from_millis(2), Pacing::Sleep, Options { timer: Some(every), ..DEFAULT });
    assert_delivered(&p, &r);
    let mut late = p.timer_lateness.clone();
    late.sort();
    assert!(late.len() >= 200, "the timer ran {} times in a second", late.len());
    let median = late[late.len() / 2];
    assert!(median < Duration::from_micros(500), "timer lateness: median {median:?}, worst {:?}", late.last().unwrap());
    let gaps = sorted_gaps(&r);
    let short = gaps.iter().filter(|g| **g < Duration::from_millis(1)).count();
    // A wake-up for the timer lets out what fell due by then (every 3 ms: one or two of the
    // 2-ms departures), so pairs, not quartets; one at a time would leave almost no short gap.
    assert!(short * 5 >= gaps.len(), "the data still leaves in batches: {short} of {} gaps under 1 ms", gaps.len());
}

#[test]
fn a_window_bound_sender_lets_its_window_out_at_once_not_a_sleep_apart() {
    // Slow start: the window lets 20 out at once every 8 ms (400 µs a datagram on average, so
    // the threshold grows to 1.6 ms), a pass 5 of them; the rest are due when the pass ends.
    // The sender is held by its window, not its pacer, and goes on at once. Sleeping then
    // (issue 40: `SLEEP_WHEN_DUE_GAP_MAX` at 2.5 ms) chopped slow start on chicago-ottawa
    // into sleeps and changed how it met its window's edge.
    let w = Window { size: 20, every: Duration::from_millis(8), burst: 5 };
    let (p, r, _) = paced_run_with(Duration::from_micros(1), Pacing::Sleep, Options { window: Some(w), ..DEFAULT });
    assert_delivered(&p, &r);
    let mut spreads: Vec<Duration> =
        r.arrivals.chunks(w.size as usize).map(|c| c.last().unwrap().0 - c.first().unwrap().0).collect();
    spreads.sort();
    let median = spreads[spreads.len() / 2];
    assert!(median < Duration::from_millis(1), "a window of {} took {median:?} (median) to leave", w.size);
}

#[test]
fn a_receiver_of_dense_arrivals_reads_several_per_call() {
    // Each datagram on its own period (the sender spins), 100 µs apart: the receiver holds off
    // reading for about four gaps after a read, so a `recvmmsg` takes several. (The datagrams
    // keep their kernel arrival stamps however late they are read:
    // `kernel_stamps_keep_the_arrival_spacing_of_a_batch_read_late`.)
    let (p, r, _) = paced_run(DENSE_PERIOD, Pacing::Spin);
    assert_delivered(&p, &r);
    assert!(
        r.recv_calls * 2 <= u64::from(COUNT),
        "{} reads ({} messages) for {COUNT} datagrams: not one (or two) per datagram",
        r.recv_calls,
        r.recv_msgs
    );
}

#[test]
fn a_receiver_stamping_at_read_time_reads_dense_arrivals_as_they_come() {
    // With read-time stamps (4.11's, UDT_RX_STAMP=read) a hold would stamp the datagrams it
    // held 1 µs apart and the receiver would read a capacity many times the link's: each
    // datagram is read as it comes, as 4.11 reads them. (A loaded machine batches some reads
    // anyway, hence "more than half", not "each".)
    let (p, r, _) = paced_run_with(DENSE_PERIOD, Pacing::Spin, Options { rx_stamp: ArrivalStamp::Read, ..DEFAULT });
    assert_delivered(&p, &r);
    assert!(
        r.recv_calls * 2 > u64::from(COUNT),
        "{} reads ({} messages) for {COUNT} datagrams: held and read in batches",
        r.recv_calls,
        r.recv_msgs
    );
}

#[test]
fn a_period_shorter_than_the_spin_threshold_is_slept_and_what_fell_due_leaves_back_to_back() {
    let (p, r, elapsed) = paced_run(SHORT_PERIOD, Pacing::Sleep);
    assert_delivered(&p, &r);
    // Never ahead of the schedule, and on it on average: the run takes the schedule's time
    // and one sleep more at most (plus a loaded machine's slack).
    let schedule = SHORT_PERIOD * (COUNT - 1);
    assert!(elapsed >= schedule, "{elapsed:?} for {COUNT} packets {SHORT_PERIOD:?} apart");
    // Each sleep lasts at least the spin threshold (5 periods): the datagrams that fell due
    // meanwhile leave together, so most gaps are far shorter than a period.
    // A loaded machine stretches some sleeps and shortens none, so the share of such gaps is
    // judged, not the median: a pacer that sent one datagram a period would leave almost none.
    let gaps = sorted_gaps(&r);
    let short = gaps.iter().filter(|g| **g < SHORT_PERIOD / 2).count();
    let q = |f: usize| gaps[(gaps.len() - 1) * f / 100];
    assert!(
        short * 4 >= gaps.len(),
        "bursts, not one datagram a period: {short} of {} gaps under {:?} (gaps at 10/50/90 %: {:?} {:?} {:?})",
        gaps.len(),
        SHORT_PERIOD / 2,
        q(10),
        q(50),
        q(90)
    );
}

/// Records the arrival time the engine gives each datagram.
#[derive(Default)]
struct Stamps(Vec<Instant>);

impl Protocol for Stamps {
    fn handle_datagram(&mut self, now: Instant, _: SocketAddr, _: &[u8]) {
        self.0.push(now);
    }
    fn handle_control(&mut self, _: Instant, _: &[u8]) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_transmit(&mut self, _: Instant, _: &mut [u8]) -> Option<Transmit> {
        None
    }
}

/// Eight datagrams 2 ms apart, read late in one batch: the stamps handed to the protocol.
fn stamps_of_a_late_read(stamp: ArrivalStamp) -> (Vec<Duration>, Duration) {
    let rx = udp();
    let to = rx.local_addr();
    let mut io = Io::new(rx, None, SPIN).unwrap();
    io.set_arrival_stamp(stamp);
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // The kernel turns its receive stamps on a moment after the first socket asks for them
    // (a deferred static key): until then datagrams are stamped when read. One datagram
    // first, read and dropped, so that the eight below are stamped on arrival whichever test
    // of this process opened the first socket.
    tx.send_to(&[0xFF; 100], to).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(io.recv(Clock::default().now()).unwrap(), 1, "the warm-up datagram");
    for i in 0u8..8 {
        tx.send_to(&[i; 100], to).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(20));
    let clock = Clock::default();
    let now = clock.now();
    let mut p = Stamps::default();
    assert_eq!(io.recv(now).unwrap(), 8, "one batch");
    io.feed(&mut p, now, Instant::ZERO);
    let gaps = p.0.windows(2).map(|w| w[1] - w[0]).collect();
    (gaps, now - *p.0.last().unwrap())
}

#[test]
fn kernel_stamps_keep_the_arrival_spacing_of_a_batch_read_late() {
    let (gaps, age) = stamps_of_a_late_read(ArrivalStamp::Kernel);
    assert!(gaps.iter().all(|g| *g >= Duration::from_millis(1)), "the 2 ms spacing survives: {gaps:?}");
    assert!(age >= Duration::from_millis(15), "the last one arrived 20 ms before the read: {age:?}");
}

#[test]
fn read_stamps_give_a_batch_the_time_it_was_read_one_microsecond_apart_as_4_11_does() {
    let (gaps, age) = stamps_of_a_late_read(ArrivalStamp::Read);
    assert_eq!(gaps, vec![Duration::from_micros(1); 7]);
    assert_eq!(age, Duration::ZERO);
}
