//! The I/O engine under every protocol of the family: it drives a sans-IO [`Protocol`] over
//! one UDP socket (UDT) or one UDP socket for data plus one TCP connection for control
//! (SABUL, FRTP: SABUL.md §1, FRTP.md §1).
//!
//! One pass, as the multiplexer has always made it:
//!
//! 1. [`Io::recv`]: `recvmmsg` what is waiting (with UDP GRO), and what the control stream
//!    has; while busy sending the socket is read at most every [`RX_POLL`];
//! 2. [`Io::feed`]: hand it to the protocol, each datagram stamped with its kernel arrival
//!    time mapped onto the core's clock; then the caller runs the protocol's timers and
//!    [`Io::drain`] collects `poll_transmit`'s output: datagrams into one batch, control bytes
//!    into the stream's queue, as each [`Transmit`] names its [`Source`];
//! 3. [`Io::flush`]: `sendmmsg` the batch (runs of equal-sized datagrams to one peer as one
//!    UDP GSO send) and write the stream;
//! 4. [`Io::idle`] when nothing happened: until the next due time in a `ppoll`, spinning
//!    through its last stretch (as long as this host's wake-ups have lately come late, at
//!    most [`SLEEP_EARLY`]), woken early by a datagram, control bytes or a [`Wakeup`] from
//!    another thread. A wait shorter than the spin threshold is slept whole, at least that
//!    threshold long, and the pacer then lets out what fell due back to back, one GSO send
//!    ([`Pacing::Sleep`], the default); with `UDT_PACING=spin` it is spun instead, each packet
//!    on its microsecond ([`Pacing::Spin`]; a core per sender at 1 Gb/s).
//!
//! [`Io::run`] is that loop for a protocol the calling thread owns; the multiplexer makes the
//! same pass with its endpoint behind a lock (`mux`).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use transfer::protocol::Protocol;
use transfer::time::Instant;
use transfer::transmit::Source;

use crate::udp::{self, RxBatch, TxBatch, Waker};
pub use crate::udp::{BufferSizes, UdpSocket};

/// A timed `ppoll` is cut at most this much short and the rest spun, so that a late wake-up
/// does not shift the pacing schedule ([`Pacing::Spin`] always cuts this much).
pub const SLEEP_EARLY: Duration = Duration::from_micros(20);
/// [`Pacing::Sleep`]'s least cut: spinning a little is cheaper than waking late.
pub const SLEEP_EARLY_MIN: Duration = Duration::from_micros(2);
/// While busy sending, the socket is read at least this often.
pub const RX_POLL: Duration = Duration::from_micros(10);
/// While busy, the control stream is read at least this often. Its frames come every few ms
/// (SABUL.md §6: ACK and SYN every 10 ms, an ERR per gap), so a read every `RX_POLL` would
/// mostly find nothing, at a system call each; after a wake-up it is read at once.
pub const STREAM_POLL: Duration = Duration::from_micros(100);
/// Datagrams drained from `poll_transmit` per batch.
const TX_BATCH: usize = 128;
/// While the engine sends a datagram at least every [`DEPARTURE_GAP_MAX`] on average, its
/// [`Pacing::Sleep`] threshold grows to this many of those gaps: a sleep then lets out about
/// this many datagrams at once, as a sleep of the 50 µs default does at 1 Gb/s. At 100 Mb/s it
/// is one wake-up, one `ppoll` and one GSO `sendmmsg` per 4 packets instead of per packet,
/// and no spinning (issue 40, part 4; docs/results/2026-11-28-cpu-per-gb.md). The pacer's
/// catch-up (`pacing_burst`, 16 in UDT's default configuration) holds the average rate.
/// While arrivals are at least every [`ARRIVAL_GAP_MAX`] apart, a receiver holds off reading
/// for this many of their gaps ([`Io::read_hold`]).
pub const SLEEP_QUANTUM_PKTS: u32 = 4;
/// The longest mean gap between departures at which the threshold grows
/// ([`SLEEP_QUANTUM_PKTS`]): 2.5 ms, about 4.8 Mb/s of 1500-byte packets, so that a sleep
/// never exceeds 10 ms, UDT's SYN and the longest that Debian's 4.11 (built `NO_BUSY_WAITING`)
/// waits between departures. Only paced data leaves late: a sleep never runs past the next
/// timer the protocol names ([`Protocol::poll_timer`]), so a receiver whose departures are
/// its ACKs, or a sender's EXP, keeps its timers' precision.
pub const DEPARTURE_GAP_MAX: Duration = Duration::from_micros(2_500);
/// The longest mean gap between departures at which a pass that has just sent sleeps even
/// though its next departure fell due during its own system calls ([`Io::idle`]): 250 µs,
/// about 48 Mb/s. Slower, that rarely happens to a paced sender, and a departure already due
/// means the sender is not held by its pacer but by its window (slow start sends as fast as
/// ACKs open it): a sleep there would change when it meets the window's edge. At 2.5 ms it
/// sent ~40 % more in the first 200 ms of slow start on chicago-ottawa at scale 0.1, lost four
/// times as many packets there, and then took 15–19 s instead of 5–8 to reach the link.
pub const SLEEP_WHEN_DUE_GAP_MAX: Duration = Duration::from_micros(250);
/// The longest mean gap between arrivals at which a receiver holds off reading
/// ([`Io::read_hold`]): 250 µs, about 48 Mb/s of 1500-byte packets, so a hold never exceeds
/// 1 ms (what waits is the reaction to a datagram, not its stamp).
pub const ARRIVAL_GAP_MAX: Duration = Duration::from_micros(250);
/// Control-stream bytes read per pass at most.
const STREAM_CHUNK: usize = 64 << 10;
/// How long control bytes may stay unacknowledged before the stream counts as broken
/// (`TCP_USER_TIMEOUT`): a control path that drops mid-transfer ends the session with an
/// error instead of TCP's many minutes of retransmissions (SABUL.md §10.3).
pub const CONTROL_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// The core's clock: µs since the driver started, plus one second so that no timer of the
/// core ever sits at 0.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { epoch: std::time::Instant::now() }
    }
}

impl Clock {
    /// The current instant: time since the clock was made, plus 1 s.
    pub fn now(&self) -> Instant {
        Instant::ZERO + self.epoch.elapsed() + Duration::from_secs(1)
    }
}

/// How other threads wake an idle I/O thread: a flag it checks while spinning, and an eventfd
/// for when it sleeps in `ppoll`.
#[derive(Debug)]
pub struct Wakeup {
    waker: Waker,
    /// Something changed that the I/O thread must look at.
    kick: AtomicBool,
    /// The I/O thread is about to block (or blocks) in `ppoll`: kicks must use the eventfd.
    sleeping: AtomicBool,
}

impl Wakeup {
    /// A wake-up with its own eventfd, nothing pending.
    pub fn new() -> io::Result<Wakeup> {
        Ok(Wakeup { waker: Waker::new()?, kick: AtomicBool::new(false), sleeping: AtomicBool::new(false) })
    }

    /// Tells the I/O thread to make a pass now.
    pub fn kick(&self) {
        self.kick.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            self.waker.wake();
        }
    }

    /// The I/O thread starts a pass: earlier kicks are served by it.
    pub fn take(&self) {
        self.kick.store(false, Ordering::SeqCst);
    }
}

/// Folds a batch of `n` datagrams at `now` into the mean gap between datagrams `gap` (a moving
/// average over about 8 batches since the batch at `last`), which a gap longer than `max` per
/// datagram resets to `None`.
fn mean_gap(gap: &mut Option<Duration>, last: &mut Option<Instant>, now: Instant, n: usize, max: Duration) {
    if let Some(prev) = *last {
        let sample = (now - prev) / n.max(1) as u32;
        *gap = if sample > max { None } else { Some(gap.map_or(sample, |g| (g * 7 + sample) / 8)) };
    }
    *last = Some(now);
}

/// The control stream: a non-blocking TCP connection with what is still to be written.
#[derive(Debug)]
struct Stream {
    tcp: TcpStream,
    out: Vec<u8>,
    /// Bytes read this pass (`input[..input_len]`), for [`Io::feed`].
    input: Vec<u8>,
    input_len: usize,
    /// Set once: `Some(reset)` when the stream ended.
    closed: Option<bool>,
    closed_reported: bool,
    /// Why the stream broke, when a read or a write failed.
    error: Option<io::Error>,
}

impl Stream {
    /// A read or write failed: the stream ended with a reset (as the protocol sees it).
    fn broke(&mut self, e: io::Error) {
        self.closed = Some(true);
        self.error.get_or_insert(e);
    }
}

/// `TCP_USER_TIMEOUT` on `tcp`.
fn set_user_timeout(tcp: &TcpStream, timeout: Duration) -> io::Result<()> {
    let ms = libc::c_uint::try_from(timeout.as_millis()).unwrap_or(libc::c_uint::MAX);
    // SAFETY: setsockopt on the stream's own fd with a valid `c_uint`.
    let rc = unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            &ms as *const libc::c_uint as *const libc::c_void,
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Which time a received datagram is given as its arrival (UDT4.md §10: the receiver's arrival
/// speed and packet pairs are made of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalStamp {
    /// The kernel's receive time stamp (SO_TIMESTAMPNS): when the datagram reached the host.
    Kernel,
    /// When the datagram was read, as 4.11 takes it (its receive thread reads one packet per
    /// call and stamps it then): the datagrams of one read batch are stamped 1 µs apart,
    /// ending at the time of the read. On a busy host reads come in batches, so this reports
    /// the host's batching as the link's speed; it is for comparisons with 4.11
    /// (docs/testbed/timing.md, "CPU and emulation timing": the check with 4.11's stamps).
    Read,
}

impl ArrivalStamp {
    /// `UDT_RX_STAMP`: `kernel` (the default) or `read`.
    pub fn from_env() -> io::Result<ArrivalStamp> {
        match std::env::var("UDT_RX_STAMP").as_deref() {
            Err(_) | Ok("") | Ok("kernel") => Ok(ArrivalStamp::Kernel),
            Ok("read") => Ok(ArrivalStamp::Read),
            Ok(other) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("UDT_RX_STAMP={other:?}: want kernel (the default) or read"),
            )),
        }
    }
}

/// How the I/O thread waits for a departure closer than its spin threshold (a packet's period
/// at 1 Gb/s is 12 µs, shorter than a sleep's wake-up on most hosts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    /// Sleep it, at least the spin threshold long: the pacer's catch-up (its `pacing_burst`)
    /// then sends what fell due meanwhile back to back, so the rate holds on average and
    /// packets leave in bursts of about the threshold's worth (4 at 1 Gb/s with 50 µs). The
    /// bottleneck spaces them again; the receiver's arrival speed and packet pairs are
    /// measured behind it. Waits longer than the threshold are slept until the last stretch,
    /// which is spun: as long as this host's wake-ups come late on average, and
    /// [`SLEEP_EARLY_MIN`] more (at most [`SLEEP_EARLY`]), so that a wake-up later than most
    /// delays that one departure by a few µs (the schedule itself does not slip).
    Sleep,
    /// Spin it, so that each packet leaves on its microsecond (a core per sender at high
    /// rates); a longer wait's last [`SLEEP_EARLY`] is spun too. The engine before issue 31.
    Spin,
}

impl Pacing {
    /// `UDT_PACING`: `sleep` (the default) or `spin`.
    pub fn from_env() -> io::Result<Pacing> {
        match std::env::var("UDT_PACING").as_deref() {
            Err(_) | Ok("") | Ok("sleep") => Ok(Pacing::Sleep),
            Ok("spin") => Ok(Pacing::Spin),
            Ok(other) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("UDT_PACING={other:?}: want sleep (the default) or spin"),
            )),
        }
    }
}

/// A protocol's sockets and the batches and timing state of its I/O thread.
pub struct Io {
    udp: UdpSocket,
    stream: Option<Stream>,
    tx: TxBatch,
    rx: RxBatch,
    spin: Duration,
    pacing: Pacing,
    /// How late a timed sleep wakes, a moving average over about 16 sleeps: the last stretch
    /// [`Pacing::Sleep`] spins is this and [`SLEEP_EARLY_MIN`] more.
    woke_late: Duration,
    /// Whether the next pass must look at the sockets; otherwise they are read at most every
    /// [`RX_POLL`] while busy sending (most of those calls would find nothing).
    poll_rx: bool,
    /// The last read filled the receive batch or the stream's buffer: more may be waiting.
    rx_full: bool,
    /// When the last batch of datagrams was drained, and the mean gap between departures
    /// (a moving average over about 8 batches; `None` after a pause longer than
    /// [`DEPARTURE_GAP_MAX`] per datagram): what [`Pacing::Sleep`]'s threshold grows with.
    last_departure: Option<Instant>,
    departure_gap: Option<Duration>,
    /// The same for arrivals: when the last read that found datagrams was made, and the mean
    /// gap between arrivals (`None` after a pause longer than [`ARRIVAL_GAP_MAX`] per
    /// datagram). While arrivals are that dense, a wait holds off reading the socket until
    /// [`SLEEP_QUANTUM_PKTS`] gaps after that read ([`Io::idle`]).
    last_arrival_read: Option<Instant>,
    arrival_gap: Option<Duration>,
    last_rx_poll: Instant,
    last_stream_poll: Instant,
    /// Arrival time given to the last datagram handed to the core.
    rx_last: Instant,
    /// Which time a datagram's arrival is (`UDT_RX_STAMP`).
    stamp: ArrivalStamp,
    received: usize,
    /// Datagrams received in all (GRO segments counted one by one).
    pub rx_datagrams: u64,
}

impl Io {
    /// An engine for `udp` and, for protocols with a control connection, `control` (made
    /// non-blocking, with TCP_NODELAY and [`CONTROL_USER_TIMEOUT`]). Waits shorter than
    /// `spin` are slept at least that long or spun, as `UDT_PACING` says ([`Pacing::from_env`]).
    /// Arrivals are stamped as `UDT_RX_STAMP` says ([`ArrivalStamp::from_env`]).
    pub fn new(udp: UdpSocket, control: Option<TcpStream>, spin: Duration) -> io::Result<Io> {
        let stamp = ArrivalStamp::from_env()?;
        let pacing = Pacing::from_env()?;
        let stream = match control {
            Some(tcp) => {
                tcp.set_nonblocking(true)?;
                tcp.set_nodelay(true)?;
                set_user_timeout(&tcp, CONTROL_USER_TIMEOUT)?;
                let input = vec![0; STREAM_CHUNK];
                Some(Stream {
                    tcp,
                    out: Vec::new(),
                    input,
                    input_len: 0,
                    closed: None,
                    closed_reported: false,
                    error: None,
                })
            }
            None => None,
        };
        let (_, gro) = udp.offloads();
        Ok(Io {
            rx: RxBatch::new(if gro { 32 } else { 64 }, 65_536),
            tx: TxBatch::new(TX_BATCH, udp::MAX_DATAGRAM),
            udp,
            stream,
            spin,
            pacing,
            woke_late: SLEEP_EARLY,
            poll_rx: true,
            rx_full: false,
            last_departure: None,
            departure_gap: None,
            last_arrival_read: None,
            arrival_gap: None,
            last_rx_poll: Instant::ZERO,
            last_stream_poll: Instant::ZERO,
            rx_last: Instant::ZERO,
            stamp,
            received: 0,
            rx_datagrams: 0,
        })
    }

    /// Waits for departures as `pacing` says from now on.
    pub fn set_pacing(&mut self, pacing: Pacing) {
        self.pacing = pacing;
    }

    /// Waits up to this long are too short to sleep to the microsecond: [`Pacing::Spin`] spins
    /// them, [`Pacing::Sleep`] sleeps this long. For `Sleep` it is the configured threshold, or
    /// [`SLEEP_QUANTUM_PKTS`] mean gaps between departures while those are at most
    /// [`DEPARTURE_GAP_MAX`], whichever is longer.
    pub fn sleep_threshold(&self) -> Duration {
        match (self.pacing, self.departure_gap) {
            (Pacing::Sleep, Some(gap)) => self.spin.max(gap * SLEEP_QUANTUM_PKTS),
            _ => self.spin,
        }
    }

    /// A batch of `n` datagrams was drained at `now`: updates the mean gap between departures.
    fn note_departures(&mut self, now: Instant, n: usize) {
        mean_gap(&mut self.departure_gap, &mut self.last_departure, now, n, DEPARTURE_GAP_MAX);
    }

    /// How long after a read that found datagrams the socket is left unread: while arrivals
    /// come at least every [`ARRIVAL_GAP_MAX`] on average, [`SLEEP_QUANTUM_PKTS`] mean gaps, so
    /// that one wake-up and one `recvmmsg` take about that many datagrams instead of one each.
    /// The kernel stamps each datagram on arrival, so the receiver's measurements (UDT4.md
    /// §10) do not move; what waits is the reaction to them (a NAK, a light ACK), by at most
    /// that hold (1 ms). `None` while arrivals are sparse, with [`Pacing::Spin`], and while
    /// the hold would be no longer than the spin threshold (above about 1 Gb/s, where a pass
    /// takes longer than a few gaps anyway and a sleep that short would only slow it). `None`
    /// too with [`ArrivalStamp::Read`]: a datagram is then stamped when it is read, so a hold
    /// would stamp several of them 1 µs apart, packet pairs included, and the receiver would
    /// read a capacity many times the link's; 4.11, which that mode stands in for, reads each
    /// datagram as it comes.
    pub fn read_hold(&self) -> Option<Duration> {
        match (self.pacing, self.arrival_gap, self.stamp) {
            (Pacing::Sleep, Some(gap), ArrivalStamp::Kernel) => {
                Some(gap * SLEEP_QUANTUM_PKTS).filter(|h| *h > self.spin)
            }
            _ => None,
        }
    }

    /// How much of a timed sleep is cut off and spun.
    fn sleep_early(&self) -> Duration {
        match self.pacing {
            Pacing::Spin => SLEEP_EARLY,
            Pacing::Sleep => (self.woke_late + SLEEP_EARLY_MIN).min(SLEEP_EARLY),
        }
    }

    /// Stamps arrivals with `stamp` from now on.
    pub fn set_arrival_stamp(&mut self, stamp: ArrivalStamp) {
        self.stamp = stamp;
    }

    /// The protocol's UDP socket.
    pub fn udp(&self) -> &UdpSocket {
        &self.udp
    }

    /// Step 1: reads the sockets if it is time to. Returns how many datagrams arrived (control
    /// bytes or the stream's end count as one).
    pub fn recv(&mut self, t: Instant) -> io::Result<usize> {
        self.received = 0;
        if !(self.poll_rx || t - self.last_rx_poll >= RX_POLL) {
            return Ok(0);
        }
        let woken = self.poll_rx;
        self.last_rx_poll = t;
        self.received = self.udp.recv_batch(&mut self.rx)?;
        self.rx_full = self.received == self.rx.capacity();
        if self.received > 0 {
            let n = self.rx.datagram_count();
            mean_gap(&mut self.arrival_gap, &mut self.last_arrival_read, t, n, ARRIVAL_GAP_MAX);
        }
        if let Some(s) = self.stream.as_mut().filter(|_| woken || t - self.last_stream_poll >= STREAM_POLL) {
            self.last_stream_poll = t;
            if s.closed.is_none() {
                s.input_len = 0;
                match s.tcp.read(&mut s.input) {
                    Ok(0) => s.closed = Some(false),
                    Ok(n) => s.input_len = n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => s.broke(e),
                }
                if s.input_len > 0 || s.closed.is_some() {
                    self.received += 1;
                }
                self.rx_full |= s.input_len == s.input.len();
            }
        }
        Ok(self.received)
    }

    /// Step 2a: hands what [`recv`](Self::recv) got to `p` at `now`. `floor` is the latest
    /// time the core had seen before: arrival times never go back past it.
    pub fn feed<P: Protocol + ?Sized>(&mut self, p: &mut P, now: Instant, floor: Instant) {
        if self.received == 0 {
            return;
        }
        // The receiver's measurements (arrival speed, packet pairs; UDT4.md §10) need each
        // datagram's arrival time. The kernel stamps every datagram on arrival
        // (SO_TIMESTAMPNS, wall clock): map that onto our clock. The segments of one GRO
        // message share a stamp: they were coalesced because they arrived back to back (on
        // loopback they were one GSO send), so they are stamped 1 µs apart, ending at the
        // message's stamp. Without a stamp a datagram counts as arriving now. Times never go
        // backwards. With ArrivalStamp::Read the batch's datagrams are stamped 1 µs apart,
        // ending now, whatever the kernel says.
        let wall_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let batch = self.rx.datagram_count() as u64;
        self.rx_datagrams += batch;
        let mut prev = self.rx_last.max(floor);
        let (read, mut left) = (self.stamp == ArrivalStamp::Read, batch);
        self.rx.for_each(|from, d, stamp, j, k| {
            if read {
                left = left.saturating_sub(1);
                let t = (now - Duration::from_micros(left)).max(prev);
                p.handle_datagram(t, from, d);
                prev = t;
                return;
            }
            let at = stamp.map_or(now, |ns| now - Duration::from_nanos(wall_ns.saturating_sub(ns))).clamp(prev, now);
            let t = (at - Duration::from_micros((k - 1 - j) as u64)).max(prev);
            p.handle_datagram(t, from, d);
            if j + 1 == k {
                prev = at;
            }
        });
        self.rx_last = prev;
        if let Some(s) = self.stream.as_mut() {
            if s.input_len > 0 {
                p.handle_control(now, &s.input[..s.input_len]);
                s.input_len = 0;
            }
            if let (Some(reset), false) = (s.closed, s.closed_reported) {
                s.closed_reported = true;
                p.handle_control_closed(now, reset);
            }
        }
    }

    /// Step 2b: drains `p`'s output at `now` into the datagram batch (until it is full) and
    /// the stream's queue. Returns whether there is anything to send.
    pub fn drain<P: Protocol + ?Sized>(&mut self, p: &mut P, now: Instant) -> bool {
        self.tx.clear();
        while !self.tx.is_full() {
            let Some(t) = p.poll_transmit(now, self.tx.next_slot()) else { break };
            match t.source {
                Source::Data => self.tx.commit(t.destination, t.size),
                Source::Control => {
                    debug_assert!(self.stream.is_some(), "control output from a protocol without a control stream");
                    // Once the stream ended there is nowhere for it to go.
                    if let Some(s) = self.stream.as_mut().filter(|s| s.closed.is_none()) {
                        s.out.extend_from_slice(&self.tx.next_slot()[..t.size]);
                    }
                }
            }
        }
        if !self.tx.is_empty() {
            self.note_departures(now, self.tx.len());
        }
        self.has_output()
    }

    /// Datagrams or control bytes wait to be sent.
    pub fn has_output(&self) -> bool {
        !self.tx.is_empty() || self.stream.as_ref().is_some_and(|s| !s.out.is_empty())
    }

    /// The last drain stopped because the batch was full: make the next pass at once.
    pub fn tx_full(&self) -> bool {
        self.tx.is_full()
    }

    /// Step 3: sends the batch and writes as much of the stream's queue as it takes.
    pub fn flush(&mut self) {
        if !self.tx.is_empty() {
            self.udp.send_batch(&mut self.tx);
        }
        if let Some(s) = self.stream.as_mut() {
            while !s.out.is_empty() && s.closed.is_none() {
                match s.tcp.write(&s.out) {
                    Ok(n) => {
                        s.out.drain(..n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => s.broke(e),
                }
            }
        }
    }

    /// Why the control stream broke, if a read or write on it failed (a reset, or
    /// [`CONTROL_USER_TIMEOUT`] with control bytes unacknowledged: the control path is down).
    pub fn control_error(&self) -> Option<&io::Error> {
        self.stream.as_ref().and_then(|s| s.error.as_ref())
    }

    /// Closes the write side of the control stream once its queue is written (SABUL's
    /// teardown, SABUL.md §10: half-close, then drain). Returns whether it did: while bytes
    /// are still queued it does nothing, and the caller asks again after the next flush.
    pub fn shutdown_control(&mut self) -> io::Result<bool> {
        match self.stream.as_mut() {
            Some(s) if s.out.is_empty() && s.closed.is_none() => {
                s.tcp.shutdown(std::net::Shutdown::Write)?;
                Ok(true)
            }
            Some(s) if s.closed.is_some() => Ok(true),
            _ => Ok(false),
        }
    }

    /// Makes the control stream end with a reset when the engine is dropped (`SO_LINGER`
    /// {on, 0}: SABUL's abort, SABUL.md §10.2), and writes nothing more to it.
    pub fn abort_control(&mut self) {
        if let Some(s) = self.stream.as_mut() {
            let linger = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: setsockopt on the stream's own fd with a valid `linger`.
            unsafe {
                libc::setsockopt(
                    s.tcp.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    &linger as *const libc::linger as *const libc::c_void,
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                );
            }
            s.out.clear();
            s.closed.get_or_insert(true);
        }
    }

    /// After a pass that filled a batch (datagrams read, control bytes read, or datagrams to
    /// send), the next pass comes at once. Returns whether it does. A read that did not fill
    /// its batch found the socket empty: what arrives after it wakes the next `ppoll` at once,
    /// so reading again now would mostly cost a system call that finds nothing.
    pub fn busy(&mut self) -> bool {
        if self.rx_full || self.tx.is_full() {
            self.poll_rx = self.rx_full;
            return true;
        }
        false
    }

    /// Step 4: waits until `next` (core time, the protocol's `poll_timeout`), a datagram or
    /// control bytes arrive, or `wakeup` is kicked. `timer` is the protocol's `poll_timer`:
    /// a wait the grown threshold stretches lets paced data out late, never a timer.
    pub fn idle(
        &mut self,
        clock: &Clock,
        next: Option<Instant>,
        timer: Option<Instant>,
        wakeup: &Wakeup,
    ) -> io::Result<()> {
        let now = clock.now();
        // A pass that has just sent while the threshold has grown (departures dense, but
        // further apart than a quarter of the spin threshold) and departures are at most
        // [`SLEEP_WHEN_DUE_GAP_MAX`] apart sleeps even when the next departure fell due
        // during its own system calls: the pacer lets it out with the next batch, one
        // `sendmmsg` instead of a second one for it alone. Otherwise a pass that is behind
        // goes on at once, as it always did, and so does a pass with a timer due.
        let coarse = self.sleep_threshold() > self.spin
            && self.departure_gap.is_some_and(|g| g <= SLEEP_WHEN_DUE_GAP_MAX)
            && !self.tx.is_empty()
            && timer.is_none_or(|t| t > now);
        let wait = match next {
            Some(t) if t <= now && !coarse => {
                self.poll_rx = false;
                return Ok(());
            }
            Some(t) => Some(t - now),
            None => None,
        };
        if let (Some(hold), Some(read)) = (self.read_hold(), self.last_arrival_read) {
            // Arrivals are dense: sleep without watching the socket until the hold after the
            // last read is over (or the next due time, or a kick), then read what came.
            let until = next.map_or(read + hold, |t| t.min(read + hold));
            if until > now {
                wakeup.sleeping.store(true, Ordering::SeqCst);
                if !wakeup.kick.load(Ordering::SeqCst) {
                    let stream = self.stream.as_ref().filter(|s| s.closed.is_none());
                    let other = stream.map(|s| (s.tcp.as_fd(), !s.out.is_empty()));
                    self.udp.wait_for(&wakeup.waker, other, Some(until - now), false)?;
                }
                wakeup.sleeping.store(false, Ordering::SeqCst);
                self.poll_rx = true;
                return Ok(());
            }
        }
        let spin_until = |deadline: Instant| {
            while clock.now() < deadline && !wakeup.kick.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        };
        // How long to sleep, and until when to spin after it.
        let threshold = self.sleep_threshold();
        let (timeout, then_spin) = match wait {
            Some(w) if w <= threshold && self.pacing == Pacing::Spin => {
                spin_until(now + w);
                self.poll_rx = false;
                return Ok(());
            }
            // Too short to sleep to the microsecond: sleep the threshold; the pacer catches up.
            // A timer due before the threshold is over is slept to as any longer wait is.
            Some(w) if w <= threshold => match timer.map(|t| t - now) {
                Some(tw) if tw < threshold && tw > self.spin => {
                    let early = self.sleep_early();
                    (Some(tw - early), Some((now + tw, early)))
                }
                Some(tw) if tw < threshold => (Some(self.spin), None),
                _ => (Some(threshold), None),
            },
            Some(w) => {
                let early = self.sleep_early();
                (Some(w - early), Some((now + w, early)))
            }
            None => (None, None),
        };
        wakeup.sleeping.store(true, Ordering::SeqCst);
        // Whether the sockets must be read: not after a `ppoll` that timed out with nothing
        // ready (on a paced sender, nearly every wake-up).
        let mut ready = true;
        if !wakeup.kick.load(Ordering::SeqCst) {
            let stream = self.stream.as_ref().filter(|s| s.closed.is_none());
            let other = stream.map(|s| (s.tcp.as_fd(), !s.out.is_empty()));
            ready = self.udp.wait_for(&wakeup.waker, other, timeout, true)?;
        }
        wakeup.sleeping.store(false, Ordering::SeqCst);
        let woke = clock.now();
        if let Some((deadline, early)) = then_spin {
            // Woken in the last stretch: the timer (or something as late); spin the rest. The
            // wake-up's lateness feeds the next stretch (a wake-up for a datagram in it counts
            // as late too, which errs towards spinning).
            let t = woke;
            let target = deadline - early;
            if t >= target {
                let late = (t - target).min(SLEEP_EARLY);
                self.woke_late = (self.woke_late * 15 + late) / 16;
                if deadline > t {
                    spin_until(deadline);
                }
            }
        }
        self.poll_rx = ready;
        if !ready {
            // The socket was found empty just now: the next pass reads it only if the spin
            // above took longer than RX_POLL.
            self.last_rx_poll = woke;
        }
        Ok(())
    }

    /// Drives `p`, owned by this thread, until `done(p, io)` holds after a pass. `done` is
    /// also where the caller does its own work each pass (application data in and out, the
    /// protocol's events), with the engine at hand for what they ask of the sockets.
    pub fn run<P: Protocol + ?Sized>(
        &mut self,
        p: &mut P,
        clock: &Clock,
        wakeup: &Wakeup,
        mut done: impl FnMut(&mut P, &mut Io) -> bool,
    ) -> io::Result<()> {
        let mut last = Instant::ZERO;
        loop {
            self.recv(clock.now())?;
            wakeup.take();
            let now = clock.now().max(last);
            self.feed(p, now, last);
            last = now;
            p.handle_timeout(now);
            if self.drain(p, now) {
                self.flush();
            }
            if done(p, self) {
                return Ok(());
            }
            if !self.busy() {
                self.idle(clock, p.poll_timeout(), p.poll_timer(), wakeup)?;
            }
        }
    }
}
