//! One session of SABUL's family from the command line: what `sabul` and `frtp` share
//! (`docs/cli.md`). A binary parses its options into a [`SendSetup`] or [`RecvSetup`]; [`send`]
//! and [`recv`] then run the session: one thread drives the sans-IO [`sabul::Sender`] or
//! [`sabul::Receiver`] through the family's I/O engine ([`udt::driver::Io`]), a second reads
//! the input or writes the output, so that a slow disk or pipe never holds up the protocol's
//! timers.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver as Rx, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant as StdInstant};

use clap::Args;
use sabul::wire::{MAX_PKT_SIZE, MIN_PKT_SIZE};
use sabul::{Event, Receiver, ReceiverConfig, Sender, SenderConfig, SessionError};
use udt::driver::{BufferSizes, Clock, Io, UdpSocket, Wakeup, CONTROL_USER_TIMEOUT};

use crate::exit::{local_io, read_full, usage, Failure, Outcome, BROKEN, LOCAL_IO, SETUP};
use crate::stats::{self, Counters, GapMeter, Meter, Role, Sink};

/// IP and UDP headers: `--mss` is the IP packet, the SABUL packet is the UDP payload
/// (SABUL.md §3.1).
const IP_UDP_HEADERS: u32 = 28;
/// Bytes moved between the I/O thread and the input or output thread at a time, unless the
/// binary says otherwise (`frtp --block`): the application side's block (FRTP.md §1).
pub const BLOCK: usize = 1 << 20;
/// Input bytes the I/O thread moves into the send buffer per pass at most (~20 µs of copying).
const COPY_PER_PASS: usize = 256 << 10;
/// A received block goes to the output thread once it holds this much (or the whole block if
/// smaller), or after [`FLUSH_AFTER`].
const FLUSH_BYTES: usize = 256 << 10;
const FLUSH_AFTER: Duration = Duration::from_millis(5);
/// How long `recv` keeps trying a sender that is not listening yet (§10.3: the echo is due
/// within 10 s of connecting).
const CONNECT_RETRY: Duration = Duration::from_secs(10);

/// Options both sides share.
#[derive(Args, Debug)]
pub struct Common {
    /// IP packet size in bytes: the SABUL packet (UDP payload) is N − 28 (SABUL.md §3.1;
    /// 60..=65535).
    #[arg(long, value_name = "N", default_value_t = 1500)]
    pub mss: u32,
    /// Write JSON-lines statistics to PATH (`-` = standard output, or standard error when the
    /// received data goes to standard output).
    #[arg(long, value_name = "PATH")]
    pub stats: Option<String>,
    /// Statistics interval in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    pub stats_interval: u64,
}

impl Common {
    /// The SABUL packet size for `--mss`.
    pub fn pkt_size(&self) -> Result<u32, Failure> {
        let pkt = self.mss.checked_sub(IP_UDP_HEADERS).filter(|p| (MIN_PKT_SIZE..=MAX_PKT_SIZE).contains(p));
        pkt.ok_or_else(|| {
            usage(format!(
                "--mss {}: the SABUL packet (MSS − 28) must be {MIN_PKT_SIZE}..={MAX_PKT_SIZE} bytes",
                self.mss
            ))
        })
    }

    /// Where `--stats` sends the lines, if given (`-` is standard error when standard output
    /// carries the data).
    pub fn sink(&self, stdout_busy: bool) -> Result<Option<Sink>, Failure> {
        match &self.stats {
            None => Ok(None),
            Some(p) => Sink::open(p, stdout_busy)
                .map(Some)
                .map_err(|e| local_io(format!("cannot write statistics to {p:?}: {e} (check the path)"))),
        }
    }
}

/// `ADDR:PORT` (a name resolves) for option `what`.
pub fn parse_addr(s: &str, what: &str) -> Result<SocketAddr, Failure> {
    udt::resolve_addr(s).map_err(|e| usage(format!("{what}: {e}")))
}

/// Waits shorter than this are spun rather than slept (`SABUL_SPIN_US`, default 50).
pub fn spin() -> Duration {
    Duration::from_micros(std::env::var("SABUL_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50))
}

/// The statistics of one session: a line every interval from the session's start, then the
/// summary (`docs/cli.md`).
pub struct Report {
    stack: &'static str,
    sink: Option<Sink>,
    role: Role,
    interval: Duration,
    start: Option<StdInstant>,
    next: StdInstant,
    meter: Meter,
    /// Lines carry the measured inter-packet time (`frtp`).
    gaps: Option<GapMeter>,
}

impl Report {
    /// A report for `stack` in `role`, a line every `interval_ms` to `sink` (none: nothing is
    /// written).
    pub fn new(stack: &'static str, sink: Option<Sink>, role: Role, interval_ms: u64) -> Report {
        let interval = Duration::from_millis(interval_ms);
        Report {
            stack,
            sink,
            role,
            interval,
            start: None,
            next: StdInstant::now(),
            meter: Meter::default(),
            gaps: None,
        }
    }

    /// Every line also carries `ipt_us`, the mean time between the DATA packets sent or
    /// received over its interval (the summary: over the session).
    pub fn with_ipt(self) -> Report {
        Report { gaps: Some(GapMeter::default()), ..self }
    }

    /// The packets this side sent or received.
    fn packets(&self, c: &Counters) -> u64 {
        match self.role {
            Role::Send => c.pkts_sent,
            Role::Recv => c.pkts_recv,
        }
    }

    fn started(&mut self) {
        let now = StdInstant::now();
        self.start = Some(now);
        self.next = now + self.interval;
    }

    fn elapsed(&self) -> f64 {
        self.start.map_or(0.0, |s| s.elapsed().as_secs_f64())
    }

    /// Writes a periodic line if one is due; `sample` gives the bytes and counters.
    fn tick(&mut self, sample: impl FnOnce() -> (u64, Counters)) -> io::Result<()> {
        if self.sink.is_none() || self.start.is_none() {
            return Ok(());
        }
        let now = StdInstant::now();
        if now < self.next {
            return Ok(());
        }
        self.next = (self.next + self.interval).max(now);
        let t = self.start.map_or(0.0, |s| s.elapsed().as_secs_f64());
        let (bytes, counters) = sample();
        let (bytes, mbps) = self.meter.rate(t, bytes);
        let pkts = self.packets(&counters);
        let extra = self.gaps.as_mut().map(|g| stats::ipt_field(g.ipt_us(t, pkts))).unwrap_or_default();
        let Some(sink) = self.sink.as_mut() else { return Ok(()) };
        sink.write_line(&stats::line(self.stack, self.role, t, bytes, mbps, &counters, &extra))
    }

    fn finish(&mut self, bytes: u64, counters: &Counters) -> Result<(), Failure> {
        let secs = self.elapsed();
        let tag = match self.gaps {
            Some(_) => stats::ipt_field(GapMeter::default().ipt_us(secs, self.packets(counters))),
            None => String::new(),
        };
        let Some(sink) = self.sink.as_mut() else { return Ok(()) };
        let (mbps, extra) = stats::summary(bytes, secs, &tag);
        let written = sink.write_line(&stats::line(self.stack, self.role, secs, bytes, mbps, counters, &extra));
        written.and_then(|()| sink.flush()).map_err(|e| local_io(format!("cannot write statistics: {e}")))
    }
}

/// The exit status of a session error: before the session was set up, 3; after, 5. When a
/// read or write on the control connection failed other than by the peer's reset, the
/// message says how.
fn session_failure(e: &SessionError, connected: bool, io: &Io) -> Failure {
    let code = if connected { BROKEN } else { SETUP };
    let msg = match (e, io.control_error()) {
        (SessionError::PeerClosed { reset: true, ack, next_seq }, Some(err))
            if err.raw_os_error() != Some(libc::ECONNRESET) =>
        {
            // ETIMEDOUT: our bytes went unacknowledged for CONTROL_USER_TIMEOUT;
            // EHOSTUNREACH / ENETUNREACH: the route or the link is gone.
            let down = matches!(err.raw_os_error(), Some(libc::ETIMEDOUT | libc::EHOSTUNREACH | libc::ENETUNREACH));
            let why = if down {
                format!(
                    " (control bytes unacknowledged up to {} s): the control path is down or the peer host is gone",
                    CONTROL_USER_TIMEOUT.as_secs()
                )
            } else {
                String::new()
            };
            format!("the control connection failed at ACK {ack} of {next_seq} packets: {err}{why}")
        }
        _ => e.to_string(),
    };
    Failure { code, msg }
}

/// Whether the error came from the control connection itself (then there is nothing to reset).
fn from_control(e: &SessionError) -> bool {
    matches!(e, SessionError::PeerClosed { reset: true, .. })
}

/// A block and how many of its bytes are filled: blocks keep their full length, so reuse
/// needs no zeroing.
type Block = (Vec<u8>, usize);
/// The input thread's blocks, where spent blocks go back to it, and the thread.
type Reader = (Rx<io::Result<Block>>, mpsc::Sender<Vec<u8>>, JoinHandle<()>);

/// The input thread: reads `input` a block of `block` bytes at a time into a channel (a block
/// with nothing filled at the end, an error instead of a block if reading fails) and wakes the
/// I/O thread after each. Blocks the I/O thread has sent come back for reuse.
fn spawn_reader(stack: &str, mut input: std::fs::File, block: usize, wakeup: Arc<Wakeup>) -> io::Result<Reader> {
    let (tx, rx) = mpsc::sync_channel(4);
    let (back_tx, back) = mpsc::channel::<Vec<u8>>();
    let thread = std::thread::Builder::new().name(format!("{stack}-input")).spawn(move || loop {
        let mut buf = back.try_recv().unwrap_or_else(|_| vec![0u8; block]);
        let r = read_full(&mut input, &mut buf).map(|n| (buf, n));
        let last = !matches!(&r, Ok((_, n)) if *n > 0);
        if tx.send(r).is_err() {
            return;
        }
        wakeup.kick();
        if last {
            return;
        }
    })?;
    Ok((rx, back_tx, thread))
}

/// What a binary decides for its sender; [`send`] does the rest.
pub struct SendSetup {
    /// `sabul` or `frtp`: in messages, thread names and the stats lines' `stack`.
    pub stack: &'static str,
    /// The control address to listen on.
    pub listen: SocketAddr,
    /// The input to send.
    pub input: std::fs::File,
    /// `--input` as given, for messages.
    pub input_path: String,
    /// Bytes read from the input at a time ([`BLOCK`] unless the binary says otherwise).
    pub block: usize,
    /// The session's statistics.
    pub report: Report,
    /// The sender's settings.
    pub config: SenderConfig,
    /// Kernel buffer sizes for the data socket.
    pub udp_buffers: BufferSizes,
    /// Bind the data socket to the control connection's local address (SABUL: one
    /// interface), or to any (FRTP: DATA leaves by the circuit, FRTP.md §1).
    pub data_on_control_ip: bool,
}

/// Listens, accepts one receiver and sends the input (SABUL.md §2, §5, §10.1): one thread
/// drives the sender through [`Io`], a second reads the input.
pub fn send(s: SendSetup) -> Outcome {
    let (stack, listen, input_path) = (s.stack, s.listen, s.input_path);
    let mut report = s.report;
    let listener = TcpListener::bind(listen).map_err(|e| {
        local_io(format!("cannot listen on {listen}: {e} (is the port in use, or the address not this host's?)"))
    })?;
    if let Ok(addr) = listener.local_addr() {
        eprintln!("{stack} send: listening on {addr}");
    }
    // One receiver per session (§2 step 4): the listener closes once it is accepted.
    let (tcp, peer) = listener.accept().map_err(|e| local_io(format!("accepting on {listen} failed: {e}")))?;
    drop(listener);
    eprintln!("{stack} send: accepted {peer}");
    let local_ip = tcp.local_addr().map_err(|e| local_io(format!("control connection: {e}")))?.ip();
    let data_ip = if s.data_on_control_ip { local_ip } else { IpAddr::from(Ipv4Addr::UNSPECIFIED) };
    let udp = UdpSocket::bind(SocketAddr::new(data_ip, 0), s.udp_buffers)
        .map_err(|e| local_io(format!("cannot bind a UDP data socket on {data_ip}: {e}")))?;

    let clock = Clock::default();
    let mut sender = Sender::new(s.config, peer, clock.now());
    let wakeup = Arc::new(Wakeup::new().map_err(|e| local_io(format!("cannot create an eventfd: {e}")))?);
    let (chunks, spent, reader) = spawn_reader(stack, s.input, s.block, wakeup.clone())
        .map_err(|e| local_io(format!("cannot start the input thread: {e}")))?;
    let mut io = Io::new(udp, Some(tcp), spin()).map_err(|e| local_io(format!("control connection: {e}")))?;

    let (mut current, mut fill, mut offset) = (Vec::new(), 0, 0);
    let mut input_done = false;
    let mut connected = false;
    let mut shutdown_pending = false;
    let mut outcome: Option<Outcome> = None;
    let counters = |s: &Sender| {
        let st = s.stats();
        let cc = s.controller().get();
        Counters {
            flow_window: s.options().map_or(0, |o| u64::from(o.recv_flag_size)),
            cwnd: cc.window(),
            period_us: cc.pacing_period_us(),
            losses: st.losses,
            retrans: st.retrans,
            pkts_sent: st.pkts_sent,
            acks_recv: st.acks_recv,
            naks_recv: st.errs_recv,
            ..Counters::default()
        }
    };
    let run = io.run(&mut sender, &clock, &wakeup, |s, io| {
        // The application's bytes, as far as the send buffer takes them, at most
        // COPY_PER_PASS a pass: an empty 40 MB buffer filled in one pass would hold the next
        // packet back by milliseconds and release a catch-up burst (FRTP.md §4: one IPT).
        let mut budget = COPY_PER_PASS;
        while !input_done && budget > 0 && s.has_room() {
            if offset == fill {
                match chunks.try_recv() {
                    Ok(Ok((_, 0))) => {
                        input_done = true;
                        s.finish();
                        break;
                    }
                    Ok(Ok((block, n))) => {
                        let done = std::mem::replace(&mut current, block);
                        if !done.is_empty() {
                            let _ = spent.send(done);
                        }
                        (fill, offset) = (n, 0);
                    }
                    Ok(Err(e)) => {
                        io.abort_control();
                        outcome = Some(Err(local_io(format!("reading input {input_path:?} failed: {e}"))));
                        return true;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        io.abort_control();
                        outcome = Some(Err(local_io("internal error: the input thread ended early")));
                        return true;
                    }
                }
            }
            let n = s.send(&current[offset..fill.min(offset + budget)]);
            offset += n;
            budget -= n;
            if n == 0 {
                break;
            }
        }
        while let Some(event) = s.poll_event() {
            match event {
                Event::Connected => {
                    connected = true;
                    report.started();
                    let to = s.data_destination().map_or_else(|| peer.to_string(), |d| d.to_string());
                    eprintln!("{stack} send: session set up, sending DATA to {to}");
                }
                Event::ShutdownWrite => shutdown_pending = true,
                Event::Finished => {
                    outcome = Some(Ok(()));
                    return true;
                }
                Event::Aborted(e) => {
                    if !from_control(&e) {
                        io.abort_control();
                    }
                    outcome = Some(Err(session_failure(&e, connected, io)));
                    return true;
                }
            }
        }
        // §10.1: the FIN goes once everything queued for the receiver is written.
        if shutdown_pending && io.shutdown_control().unwrap_or(true) {
            shutdown_pending = false;
        }
        if let Err(e) = report.tick(|| (s.bytes_acked(), counters(s))) {
            io.abort_control();
            outcome = Some(Err(local_io(format!("cannot write statistics: {e}"))));
            return true;
        }
        false
    });
    drop((chunks, spent)); // the input thread, blocked on a full channel, ends
    drop(reader);
    run.map_err(|e| Failure { code: BROKEN, msg: format!("socket error: {e}") })?;
    outcome.unwrap_or(Ok(()))?;
    report.finish(sender.bytes_acked(), &counters(&sender))?;
    eprintln!("{stack} send: sent {} bytes, all acknowledged", sender.bytes_acked());
    Ok(())
}

/// Where chunks go to the output thread, where its spent buffers come back, and the thread.
type Writer = (SyncSender<Block>, Rx<Vec<u8>>, JoinHandle<io::Result<()>>);

/// The output thread: writes each chunk, counts the bytes written, hands the buffer back for
/// reuse and wakes the I/O thread (which may be waiting for room). Returns the first error.
fn spawn_writer(
    stack: &str,
    mut output: Box<dyn Write + Send>,
    delivered: Arc<AtomicU64>,
    wakeup: Arc<Wakeup>,
) -> io::Result<Writer> {
    let (tx, rx) = mpsc::sync_channel::<Block>(4);
    let (back_tx, back) = mpsc::channel();
    let thread = std::thread::Builder::new().name(format!("{stack}-output")).spawn(move || {
        let result = (|| {
            for (chunk, len) in rx {
                output.write_all(&chunk[..len])?;
                delivered.fetch_add(len as u64, Ordering::Relaxed);
                let _ = back_tx.send(chunk);
                wakeup.kick();
            }
            output.flush()
        })();
        wakeup.kick();
        result
    })?;
    Ok((tx, back, thread))
}

/// Connects to the sender, retrying for a while if it is not listening yet.
fn connect(stack: &str, addr: SocketAddr) -> Result<TcpStream, Failure> {
    let deadline = StdInstant::now() + CONNECT_RETRY;
    loop {
        match TcpStream::connect_timeout(&addr, CONNECT_RETRY) {
            // Retrying a local port nobody listens on, the kernel may pick that very port as
            // ours: a TCP self-connection (simultaneous open). That is not the sender.
            Ok(s) if s.local_addr().ok() == Some(addr) => {
                drop(s);
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && StdInstant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(Failure {
                    code: SETUP,
                    msg: format!("cannot connect to {addr}: {e} (is `{stack} send --listen {addr}` running there?)"),
                })
            }
        }
    }
}

/// What a binary decides for its receiver; [`recv`] does the rest.
pub struct RecvSetup {
    /// `sabul` or `frtp`: in messages, thread names and the stats lines' `stack`.
    pub stack: &'static str,
    /// The sender's control address.
    pub connect: SocketAddr,
    /// Where the received bytes go.
    pub output: Box<dyn Write + Send>,
    /// `--output` as given, for messages.
    pub output_path: String,
    /// Bytes written to the output at a time at most ([`BLOCK`] unless the binary says
    /// otherwise).
    pub block: usize,
    /// The session's statistics.
    pub report: Report,
    /// Kernel buffer sizes for the data socket.
    pub udp_buffers: BufferSizes,
    /// The data socket's address; an unspecified IP is the control connection's local one.
    pub data_bind: SocketAddr,
    /// The receiver's settings, from the bound data address and the sender's control port.
    pub config: Box<dyn FnOnce(SocketAddr, u16) -> ReceiverConfig>,
}

/// Connects to the sender and writes what arrives to the output (SABUL.md §2, §6, §10): one
/// thread drives the receiver through [`Io`], a second writes the output.
pub fn recv(r: RecvSetup) -> Outcome {
    let (stack, addr) = (r.stack, r.connect);
    let mut report = r.report;
    let tcp = connect(stack, addr)?;
    let local_ip = tcp.local_addr().map_err(|e| local_io(format!("control connection: {e}")))?.ip();
    let peer = tcp.peer_addr().map_err(|e| Failure { code: SETUP, msg: format!("control connection: {e}") })?;
    let mut bind = r.data_bind;
    if bind.ip().is_unspecified() {
        bind.set_ip(local_ip);
    }
    let udp = UdpSocket::bind(bind, r.udp_buffers).map_err(|e| {
        local_io(format!("cannot bind the UDP data socket {bind}: {e} (is the address this host's, the port free?)"))
    })?;
    let data = udp.local_addr();
    eprintln!("{stack} recv: connected to {peer}, data on {data}");

    let clock = Clock::default();
    let mut receiver = Receiver::new((r.config)(data, addr.port()), peer, clock.now());
    let wakeup = Arc::new(Wakeup::new().map_err(|e| local_io(format!("cannot create an eventfd: {e}")))?);
    let delivered = Arc::new(AtomicU64::new(0));
    let (to_writer, spare, writer) = spawn_writer(stack, r.output, delivered.clone(), wakeup.clone())
        .map_err(|e| local_io(format!("cannot start the output thread: {e}")))?;
    let mut io = Io::new(udp, Some(tcp), spin()).map_err(|e| local_io(format!("control connection: {e}")))?;

    let block = r.block;
    let flush_bytes = FLUSH_BYTES.min(block);
    let mut chunk: Vec<u8> = vec![0; block];
    let mut fill = 0;
    let mut last_flush = StdInstant::now();
    let mut connected = false;
    let mut ended = false;
    let mut outcome: Option<Outcome> = None;
    let counters = |r: &Receiver| {
        let st = r.stats();
        Counters {
            rtt_ms: r.rtt().as_secs_f64() * 1e3,
            flow_window: u64::from(r.recv_flag_size()),
            losses: st.losses,
            pkts_recv: st.datagrams,
            acks_sent: st.acks_sent,
            naks_sent: st.errs_sent,
            ..Counters::default()
        }
    };
    let run = io.run(&mut receiver, &clock, &wakeup, |r, io| {
        while let Some(event) = r.poll_event() {
            match event {
                Event::Connected => {
                    connected = true;
                    report.started();
                }
                Event::Finished => ended = true,
                Event::Aborted(e) => {
                    if !from_control(&e) {
                        io.abort_control();
                    }
                    ended = true;
                    outcome = Some(Err(session_failure(&e, connected, io)));
                }
                Event::ShutdownWrite => {}
            }
        }
        // Everything delivered goes to the output thread, a chunk at a time; when it is
        // behind, the receive buffer holds the rest (and fills, and drops: §6 step 2).
        loop {
            fill += r.read(&mut chunk[fill..]);
            let due = fill >= flush_bytes || (fill > 0 && (ended || last_flush.elapsed() >= FLUSH_AFTER));
            if !due {
                break;
            }
            match to_writer.try_send((std::mem::take(&mut chunk), fill)) {
                Ok(()) => chunk = spare.try_recv().unwrap_or_else(|_| vec![0; block]),
                Err(TrySendError::Full((back, _))) => {
                    chunk = back;
                    break;
                }
                Err(TrySendError::Disconnected(_)) => {
                    io.abort_control();
                    outcome.get_or_insert(Err(local_io("the output thread ended: writing the output failed")));
                    return true;
                }
            }
            fill = 0;
            last_flush = StdInstant::now();
        }
        if let Err(e) = report.tick(|| (delivered.load(Ordering::Relaxed), counters(r))) {
            io.abort_control();
            outcome = Some(Err(local_io(format!("cannot write statistics: {e}"))));
            return true;
        }
        ended && fill == 0 && r.is_drained()
    });
    drop(to_writer);
    let written = writer.join().map_err(|_| local_io("internal error: the output thread panicked"))?;
    run.map_err(|e| Failure { code: BROKEN, msg: format!("socket error: {e}") })?;
    written.map_err(|e| Failure { code: LOCAL_IO, msg: format!("writing output {:?} failed: {e}", r.output_path) })?;
    let total = delivered.load(Ordering::Relaxed);
    if let Some(Err(f)) = outcome {
        return Err(Failure { msg: format!("{} ({total} bytes written)", f.msg), ..f });
    }
    report.finish(total, &counters(&receiver))?;
    eprintln!("{stack} recv: received {total} bytes");
    Ok(())
}
