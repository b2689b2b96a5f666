//! `udt`: send a file or pipe over UDT4, or receive one.

mod report;

use std::fs::File;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use udt::{Builder, SocketType, UdtError, UdtSocket};

use report::{Reporter, Role, Sink};
use udt_cli::exit::{self, local_io, open_input, open_output, read_full, usage, Failure, Outcome};

const EXAMPLES: &str = "\
Examples:
  # receiver (start first), then sender
  udt recv --listen 0.0.0.0:9000 --output /tmp/copy.bin
  udt send --connect 127.0.0.1:9000 --input /tmp/file.bin

  # a pipe, with statistics every 100 ms as JSON lines on stderr
  dd if=/dev/zero bs=1M count=2048 | udt send --connect 127.0.0.1:9000 --input - --stats -
  udt recv --listen 127.0.0.1:9000 --output /dev/null --stats recv.jsonl

  # rendezvous: both sides bind a port and meet
  udt recv --listen 10.0.0.2:9000 --rendezvous 10.0.0.1:9001 --output out.bin
  udt send --connect 10.0.0.2:9000 --bind 10.0.0.1:9001 --rendezvous --input in.bin

  # three senders at once to one port, one output file per connection
  udt recv --listen 0.0.0.0:9000 --connections 3 --output /tmp/incoming/
  #   writes /tmp/incoming/conn-1.bin, conn-2.bin, conn-3.bin in accept order

  # message mode: every 1 MB of input is one message
  udt send --connect 127.0.0.1:9000 --input in.bin --dgram --msg-size 1000000
  udt recv --listen 127.0.0.1:9000 --output out.bin --dgram

Exit status: 0 success, 2 usage error or bad address, 3 connection setup failed,
4 local I/O error (input/output file), 5 connection broken during the transfer.";

#[derive(Parser, Debug)]
#[command(name = "udt", version, about = "Send or receive data over UDT4 (UDP-based Data Transfer)", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Connect to a receiver and send a file or standard input; exits 0 once every byte was
    /// acknowledged by the receiver.
    #[command(after_help = EXAMPLES)]
    Send(SendArgs),
    /// Accept one connection (or --connections N, served concurrently) and write what arrives
    /// to a file or standard output (N > 1: one file per connection in a directory); exits 0
    /// once every sender closed and every byte was written.
    #[command(after_help = EXAMPLES)]
    Recv(RecvArgs),
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Receiver address, HOST:PORT (with --rendezvous: the peer's address).
    #[arg(long, value_name = "ADDR:PORT")]
    connect: String,
    /// File to send; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    input: String,
    /// Local address to bind (required with --rendezvous; default: any, ephemeral port).
    #[arg(long, value_name = "ADDR:PORT")]
    bind: Option<String>,
    /// Rendezvous mode: meet a `udt recv --rendezvous` peer instead of connecting to a listener.
    #[arg(long)]
    rendezvous: bool,
    /// DGRAM mode: bytes per message (each input chunk of this size is one message).
    #[arg(long, value_name = "BYTES", default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..))]
    msg_size: u32,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct RecvArgs {
    /// Address to listen on, HOST:PORT (with --rendezvous: the local address to bind).
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// Where to write the data; `-` writes standard output. With --connections N > 1: a
    /// directory (created if missing) that receives conn-1.bin ... conn-N.bin in accept order.
    #[arg(long, value_name = "PATH")]
    output: String,
    /// Rendezvous mode: meet the sender at PEER (HOST:PORT) instead of listening.
    #[arg(long, value_name = "PEER")]
    rendezvous: Option<String>,
    /// Accept N connections on the listening port and serve them concurrently (a thread each),
    /// each into its own file under the --output directory; exits 0 once all N senders closed
    /// and every byte was written, non-zero naming the connection if one fails. N > 1 is
    /// STREAM only (not with --dgram or --rendezvous). With --stats, every line carries
    /// "conn":K (1-based accept order), one series and one summary line per connection.
    /// The listener's backlog is N: handshakes beyond the connections not yet accepted are
    /// rejected, as 4.11's listen(backlog) does.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10000))]
    connections: u32,
    #[command(flatten)]
    common: Common,
}

/// Options both sides share.
#[derive(Args, Debug)]
struct Common {
    /// Maximum packet size in bytes, IP and UDP headers included (UDT_MSS, 76..=65535).
    #[arg(long, value_name = "N", default_value_t = 1500)]
    mss: u32,
    /// Message (DGRAM) mode instead of a byte stream; both sides must agree.
    #[arg(long)]
    dgram: bool,
    /// Congestion control: udt411 (UDT 4.11's native), paper (the SC'04 variant) or
    /// fixed:<Mbit/s> (constant rate, no congestion control).
    #[arg(long, value_name = "CC", default_value = "udt411")]
    cc: String,
    /// Write JSON-lines statistics to PATH (`-` = standard output, or standard error when the
    /// received data goes to standard output).
    #[arg(long, value_name = "PATH")]
    stats: Option<String>,
    /// Statistics interval in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    stats_interval: u64,
    /// Maximum flow window in packets (UDT_FC).
    #[arg(long, value_name = "PKTS")]
    flow_window: Option<u32>,
    /// Receive buffer in packets (UDT_RCVBUF / payload size).
    #[arg(long, value_name = "PKTS")]
    rcvbuf: Option<u32>,
    /// Send buffer in packets (UDT_SNDBUF / payload size).
    #[arg(long, value_name = "PKTS")]
    sndbuf: Option<u32>,
    /// The data socket's kernel send buffer in bytes (UDT_UDP_SNDBUF; default 8 MiB, 4.11's own
    /// default is 64 KiB).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1024..=1 << 30))]
    udp_sndbuf: Option<u32>,
    /// Bandwidth cap in Mbit/s of payload (UDT_MAXBW).
    #[arg(long, value_name = "MBIT")]
    max_bw: Option<f64>,
    /// Most packets the pacer may send back to back to catch up after a late wake-up.
    #[arg(long, value_name = "PKTS", default_value_t = 16)]
    pacing_burst: u32,
    /// Seconds `send` waits at the end for the last acknowledgements (UDT_LINGER).
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    linger: u64,
}

/// Maps a socket error to the exit status of its phase.
fn net(e: UdtError, during_setup: bool) -> Failure {
    let code = match &e {
        UdtError::BadAddress { .. } | UdtError::InvalidConfig(_) => 2,
        UdtError::Bind { .. } | UdtError::ConnectTimedOut { .. } | UdtError::ConnectRefused { .. } => 3,
        _ if during_setup => 3,
        _ => 5,
    };
    Failure { code, msg: e.to_string() }
}

fn builder(c: &Common) -> Result<udt::Builder, Failure> {
    let cc = udt::cc::by_name(&c.cc, c.mss).map_err(usage)?;
    let mut b =
        UdtSocket::builder().mss(c.mss).cc(cc).linger(Duration::from_secs(c.linger)).pacing_burst(c.pacing_burst);
    if c.dgram {
        b = b.socket_type(SocketType::Dgram);
    }
    if let Some(w) = c.flow_window {
        b = b.flow_window(w);
    }
    if let Some(n) = c.rcvbuf {
        b = b.recv_buffer(n);
    }
    if let Some(n) = c.sndbuf {
        b = b.send_buffer(n);
    }
    if let Some(n) = c.udp_sndbuf {
        b = b.udp_send_buffer(n as usize);
    }
    if let Some(m) = c.max_bw {
        if !(m > 0.0 && m.is_finite()) {
            return Err(usage("--max-bw must be a positive number of Mbit/s"));
        }
        b = b.max_bandwidth(Some((m * 1e6 / 8.0) as u64));
    }
    b.build().map_err(|e| net(e, true))?;
    Ok(b)
}

fn stats_sink(c: &Common, stdout_busy: bool) -> Result<Option<Sink>, Failure> {
    match &c.stats {
        None => Ok(None),
        Some(p) => Sink::open(p, stdout_busy)
            .map(Some)
            .map_err(|e| local_io(format!("cannot write statistics to {p:?}: {e} (check the path)"))),
    }
}

fn parse_addr(s: &str, what: &str) -> Result<std::net::SocketAddr, Failure> {
    udt::resolve_addr(s).map_err(|e| usage(format!("{what}: {e}")))
}

const CHUNK: usize = 8 << 20;

fn send(a: SendArgs) -> Outcome {
    let b = builder(&a.common)?;
    let peer = parse_addr(&a.connect, "--connect")?;
    let bind = a.bind.as_deref().map(|s| parse_addr(s, "--bind")).transpose()?;
    if a.rendezvous && bind.is_none() {
        return Err(usage("--rendezvous needs --bind LOCAL:PORT (the address the peer's --rendezvous names)"));
    }
    let mut input = open_input(&a.input)?;
    let sink = stats_sink(&a.common, false)?;

    let mut sock = match bind {
        Some(local) => b.clone().rendezvous(a.rendezvous).bind(local).map_err(|e| net(e, true))?,
        None => b.build().map_err(|e| net(e, true))?,
    };
    sock.connect(peer).map_err(|e| net(e, true))?;
    let sock = Arc::new(sock);
    let delivered = Arc::new(AtomicU64::new(0));
    let reporter = sink.map(|s| {
        Reporter::start(Role::Send, s, Duration::from_millis(a.common.stats_interval), sock.clone(), delivered.clone())
    });

    let dgram = a.common.dgram;
    let chunk = if dgram { a.msg_size as usize } else { CHUNK };
    let mut buf = vec![0u8; chunk];
    let mut total = 0u64;
    loop {
        let n = read_full(&mut input, &mut buf)
            .map_err(|e| local_io(format!("reading input {:?} failed: {e}", a.input)))?;
        if n == 0 {
            break;
        }
        if dgram {
            sock.sendmsg(&buf[..n]).map_err(|e| net(e, false))?;
        } else {
            sock.send_all(&buf[..n]).map_err(|e| net(e, false))?;
        }
        total += n as u64;
        if n < chunk && !dgram {
            break;
        }
    }
    // Every byte acknowledged, then the summary, then the close that tells the receiver.
    sock.flush().map_err(|e| net(e, false))?;
    let final_stats = sock.stats().map_err(|e| net(e, false))?;
    if let Some(r) = reporter {
        r.finish(total, &final_stats.core).map_err(|e| local_io(format!("cannot write statistics: {e}")))?;
    }
    let mut sock = Arc::try_unwrap(sock).map_err(|_| local_io("internal error: socket still shared"))?;
    sock.close().map_err(|e| net(e, false))?;
    eprintln!("udt send: sent {total} bytes, all acknowledged");
    Ok(())
}

/// A listener on `local` whose backlog is the `connections` it will accept: a flood of
/// completed handshakes holds at most that many connections (and their memory) besides.
fn listen(b: &Builder, local: SocketAddr, connections: usize) -> Result<UdtSocket, Failure> {
    let mut s = b.bind(local).map_err(|e| net(e, true))?;
    s.listen(connections).map_err(|e| net(e, true))?;
    Ok(s)
}

fn recv(a: RecvArgs) -> Outcome {
    if a.connections > 1 {
        return recv_many(a);
    }
    let b = builder(&a.common)?;
    let local = parse_addr(&a.listen, "--listen")?;
    let peer = a.rendezvous.as_deref().map(|s| parse_addr(s, "--rendezvous")).transpose()?;
    let mut output = open_output(&a.output)?;
    let sink = stats_sink(&a.common, a.output == "-")?;

    // The listener stays open until the transfer ends: connections it accepted but we do not
    // read are still served (acknowledged) rather than torn down, as 4.11 does.
    let mut _listener = None;
    let sock = match peer {
        Some(peer) => {
            let mut s = b.clone().rendezvous(true).bind(local).map_err(|e| net(e, true))?;
            s.connect(peer).map_err(|e| net(e, true))?;
            s
        }
        None => {
            let listener = listen(&b, local, 1)?;
            if let Ok(addr) = listener.local_addr() {
                eprintln!("udt recv: listening on {addr}");
            }
            let s = listener.accept().map_err(|e| net(e, true))?;
            if let Ok(peer) = s.peer_addr() {
                eprintln!("udt recv: accepted {peer}");
            }
            _listener = Some(listener);
            s
        }
    };
    let sock = Arc::new(sock);
    let delivered = Arc::new(AtomicU64::new(0));
    let reporter = sink.map(|s| {
        Reporter::start(Role::Recv, s, Duration::from_millis(a.common.stats_interval), sock.clone(), delivered.clone())
    });

    let write_err = |e: io::Error| local_io(format!("writing output {:?} failed: {e}", a.output));
    let total = if a.common.dgram {
        // A message can be as large as the receive buffer.
        let cfg = sock.config();
        let cap = cfg.rcv_capacity() as usize * udt_proto::wire::payload_size(cfg.mss);
        let mut buf = vec![0u8; cap];
        while let Some(n) = sock.recvmsg(&mut buf).map_err(|e| net(e, false))? {
            output.write_all(&buf[..n]).map_err(write_err)?;
            delivered.fetch_add(n as u64, Ordering::Relaxed);
        }
        output.flush().map_err(write_err)?;
        delivered.load(Ordering::Relaxed)
    } else {
        recv_stream(&sock, &mut output, &delivered, &a.output)?
    };
    let final_stats = sock.stats().map_err(|e| net(e, false))?;
    if let Some(r) = reporter {
        r.finish(total, &final_stats.core).map_err(|e| local_io(format!("cannot write statistics: {e}")))?;
    }
    let mut sock = Arc::try_unwrap(sock).map_err(|_| local_io("internal error: socket still shared"))?;
    // The sender already closed; this only releases our side.
    let _ = sock.close();
    eprintln!("udt recv: received {total} bytes");
    Ok(())
}

/// Copies a STREAM connection to `output` until the peer closes; returns the byte count.
fn recv_stream(sock: &UdtSocket, output: &mut dyn Write, delivered: &AtomicU64, path: &str) -> Result<u64, Failure> {
    let write_err = |e: io::Error| local_io(format!("writing output {path:?} failed: {e}"));
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = sock.recv(&mut buf).map_err(|e| net(e, false))?;
        if n == 0 {
            break;
        }
        output.write_all(&buf[..n]).map_err(write_err)?;
        delivered.fetch_add(n as u64, Ordering::Relaxed);
    }
    output.flush().map_err(write_err)?;
    Ok(delivered.load(Ordering::Relaxed))
}

/// `recv --connections N` (N > 1): N connections on one listening port, a thread each, each
/// into `<output>/conn-K.bin` (K = accept order from 1). A connection that fails is reported
/// at once and the others are served to completion; then the first failure is the exit status.
fn recv_many(a: RecvArgs) -> Outcome {
    let n = a.connections;
    if a.common.dgram {
        return Err(usage(format!("--connections {n} is STREAM only: it cannot be combined with --dgram")));
    }
    if a.rendezvous.is_some() {
        return Err(usage(format!("--connections {n} needs a listener: it cannot be combined with --rendezvous")));
    }
    if a.output == "-" {
        return Err(usage(format!(
            "--connections {n} writes one file per connection: --output must be a directory, not -"
        )));
    }
    let b = builder(&a.common)?;
    let local = parse_addr(&a.listen, "--listen")?;
    let dir = std::path::PathBuf::from(&a.output);
    std::fs::create_dir_all(&dir).map_err(|e| {
        local_io(format!("cannot create output directory {:?}: {e} (check the path and permissions)", a.output))
    })?;
    if !dir.is_dir() {
        return Err(local_io(format!("cannot write output directory {:?}: it is not a directory", a.output)));
    }
    let sink = stats_sink(&a.common, false)?.map(|s| Arc::new(std::sync::Mutex::new(s)));
    let interval = Duration::from_millis(a.common.stats_interval);

    let listener = listen(&b, local, n as usize)?;
    if let Ok(addr) = listener.local_addr() {
        eprintln!("udt recv: listening on {addr}, accepting {n} connections");
    }
    // Each worker reports (connection number, peer, outcome); the first failure is kept.
    let (tx, rx) = std::sync::mpsc::channel::<(u32, String, Result<u64, Failure>)>();
    let failed = |k: u32, peer: &str, f: Failure| Failure {
        code: f.code,
        msg: format!("connection {k} of {n} (from {peer}): {}", f.msg),
    };
    let mut workers = Vec::new();
    // (connections finished, bytes) so far, and the failures.
    let tally = std::cell::Cell::new((0u32, 0u64));
    let failures = std::cell::RefCell::new(Vec::<Failure>::new());
    let on_result = |(k, peer, r): (u32, String, Result<u64, Failure>)| {
        let (d, t) = tally.get();
        match r {
            Ok(bytes) => {
                eprintln!("udt recv: connection {k} (from {peer}): received {bytes} bytes");
                tally.set((d + 1, t + bytes));
            }
            Err(f) => {
                let f = failed(k, &peer, f);
                eprintln!("udt recv: {}; serving the others", f.msg);
                failures.borrow_mut().push(f);
                tally.set((d + 1, t));
            }
        }
    };
    for k in 1..=n {
        let sock = loop {
            while let Ok(r) = rx.try_recv() {
                on_result(r);
            }
            if let Some(s) = listener
                .accept_timeout(Duration::from_millis(100))
                .map_err(|e| Failure { code: 3, msg: format!("accepting connection {k} of {n} failed: {e}") })?
            {
                break s;
            }
        };
        let peer = sock.peer_addr().map(|p| p.to_string()).unwrap_or_else(|_| "?".into());
        eprintln!("udt recv: accepted connection {k} of {n} from {peer}");
        let path = dir.join(format!("conn-{k}.bin"));
        let path_s = path.display().to_string();
        let file = match File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                on_result((k, peer, Err(local_io(format!("cannot write output {path_s:?}: {e}")))));
                continue;
            }
        };
        let sock = Arc::new(sock);
        let delivered = Arc::new(AtomicU64::new(0));
        let reporter = sink.clone().map(|s| {
            Reporter::start_shared(Role::Recv, s, interval, sock.clone(), delivered.clone(), format!(",\"conn\":{k}"))
        });
        let tx = tx.clone();
        let worker = std::thread::Builder::new().name(format!("udt-recv-{k}")).spawn(move || {
            let r = (|| {
                let mut out = io::BufWriter::with_capacity(1 << 20, file);
                let total = recv_stream(&sock, &mut out, &delivered, &path_s)?;
                drop(out);
                let final_stats = sock.stats().map_err(|e| net(e, false))?;
                if let Some(r) = reporter {
                    r.finish(total, &final_stats.core)
                        .map_err(|e| local_io(format!("cannot write statistics: {e}")))?;
                }
                if let Ok(mut sock) = Arc::try_unwrap(sock) {
                    let _ = sock.close();
                }
                Ok(total)
            })();
            let _ = tx.send((k, peer, r));
        });
        workers.push(worker.map_err(|e| local_io(format!("cannot start a thread for connection {k}: {e}")))?);
    }
    drop(tx);
    while tally.get().0 < n {
        match rx.recv() {
            Ok(r) => on_result(r),
            Err(_) => return Err(local_io("internal error: a connection thread ended without a result")),
        }
    }
    for w in workers {
        let _ = w.join();
    }
    drop(listener);
    let failures = failures.into_inner();
    let ok = n - failures.len() as u32;
    eprintln!("udt recv: received {} bytes on {ok} of {n} connections", tally.get().1);
    match failures.into_iter().next() {
        None => Ok(()),
        Some(first) => Err(Failure { msg: format!("{ok} of {n} connections completed; {}", first.msg), ..first }),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Send(a) => ("udt send", exit::check_env().and_then(|_| send(a))),
        Command::Recv(a) => ("udt recv", exit::check_env().and_then(|_| recv(a))),
    };
    exit::report(name, result)
}
