//! The blocking socket API, close to UDT4's own (`bind`, `listen`, `accept`, `connect`,
//! `send`/`recv`, `sendmsg`/`recvmsg`, `sendfile`/`recvfile`, `close` with linger).

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use transfer::cc::ControllerFactory;
use udt_proto::config::ConnectionConfig;
use udt_proto::connection::Connection;
use udt_proto::stats::Stats;
use udt_proto::wire::{self, SocketType};

use crate::error::{Result, UdtError};
use crate::mux::{Inner, Mux, MuxOptions};
use crate::udp::BufferSizes;

/// Most bytes copied in or out of the core per lock acquisition, so that the I/O thread is
/// never held up for long.
const MAX_COPY: usize = 256 << 10;
/// How long after connecting `close` waits before the Shutdown if the peer has sent nothing
/// yet (see `close`).
const STARTUP_GRACE: Duration = Duration::from_millis(100);
/// Chunk size of `sendfile` / `recvfile`.
const FILE_CHUNK: usize = 4 << 20;

/// Options for a new socket. `Default` gives UDT 4.11's defaults (see [`ConnectionConfig`]).
///
/// ```no_run
/// use std::sync::Arc;
/// use udt::{cc::native::UdtNative, UdtSocket};
/// let sock = UdtSocket::builder().mss(9000).cc(Arc::new(UdtNative::default())).connect("127.0.0.1:9000")?;
/// sock.send_all(b"hello")?;
/// # Ok::<(), udt::UdtError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    config: ConnectionConfig,
    rendezvous: bool,
    mux: MuxOptions,
}

impl Builder {
    /// A builder with the defaults: UDT 4.11's options, a STREAM socket, not rendezvous.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// All core options at once.
    pub fn config(mut self, config: ConnectionConfig) -> Self {
        self.config = config;
        self
    }
    /// `UDT_MSS`: packet size including IP and UDP headers (default 1500).
    pub fn mss(mut self, mss: u32) -> Self {
        self.config.mss = mss;
        self
    }
    /// `UDT_FC`: flow window in packets (default 25 600).
    pub fn flow_window(mut self, pkts: u32) -> Self {
        self.config.flight_flag_size = pkts;
        self
    }
    /// `UDT_SNDBUF` in packets (default 8192).
    pub fn send_buffer(mut self, pkts: u32) -> Self {
        self.config.snd_buf_pkts = pkts;
        self
    }
    /// `UDT_RCVBUF` in packets (default 8192; capped by the flow window).
    pub fn recv_buffer(mut self, pkts: u32) -> Self {
        self.config.rcv_buf_pkts = pkts;
        self
    }
    /// Congestion control (default UDT 4.11's native controller; [`crate::cc::by_name`] knows
    /// UDT's controllers by name, and any other [`ControllerFactory`] will do).
    pub fn cc(mut self, cc: Arc<dyn ControllerFactory>) -> Self {
        self.config.cc = cc;
        self
    }
    /// `UDT_MAXBW` in bytes/s (`None` = unlimited, the default).
    pub fn max_bandwidth(mut self, bytes_per_s: Option<u64>) -> Self {
        self.config.max_bw = bytes_per_s;
        self
    }
    /// STREAM (default) or DGRAM (message mode).
    pub fn socket_type(mut self, t: SocketType) -> Self {
        self.config.socket_type = t;
        self
    }
    /// `UDT_LINGER`: how long `close` waits for unacknowledged data (default 180 s).
    pub fn linger(mut self, d: Duration) -> Self {
        self.config.linger = d;
        self
    }
    /// `UDT_RENDEZVOUS`: `connect` meets a peer that connects to us at the same time.
    pub fn rendezvous(mut self, on: bool) -> Self {
        self.rendezvous = on;
        self
    }
    /// Connection setup timeout (default 3 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.config.connect_timeout = d;
        self
    }
    /// Kernel UDP buffer sizes in bytes (default 8 MiB send, 32 MiB receive).
    pub fn udp_buffers(mut self, send: usize, recv: usize) -> Self {
        self.mux.udp_buffers = BufferSizes { send, recv };
        self
    }
    /// The kernel UDP send buffer alone, in bytes (`UDT_UDP_SNDBUF`; default 8 MiB, 4.11's 64 KiB).
    pub fn udp_send_buffer(mut self, bytes: usize) -> Self {
        self.mux.udp_buffers.send = bytes;
        self
    }
    /// Waits of the I/O thread shorter than this are spun rather than slept (default 50 µs).
    pub fn spin_threshold(mut self, d: Duration) -> Self {
        self.mux.spin = d;
        self
    }

    /// Largest catch-up burst of the pacer after a late wake-up (`ConnectionConfig::pacing_burst`).
    pub fn pacing_burst(mut self, pkts: u32) -> Self {
        self.config.pacing_burst = pkts.max(1);
        self
    }

    /// An unbound socket with these options.
    pub fn build(&self) -> Result<UdtSocket> {
        self.config.validate().map_err(UdtError::InvalidConfig)?;
        Ok(UdtSocket {
            builder: self.clone(),
            state: State::Fresh,
            send_timeout_us: AtomicU64::new(0),
            recv_timeout_us: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            connected_at: None,
        })
    }

    /// Builds the socket and binds it to `addr`.
    pub fn bind(&self, addr: impl ToSocketAddrs + std::fmt::Debug) -> Result<UdtSocket> {
        let mut s = self.build()?;
        s.bind(addr)?;
        Ok(s)
    }

    /// Binds `addr` and listens (backlog 1024).
    pub fn listen(&self, addr: impl ToSocketAddrs + std::fmt::Debug) -> Result<UdtSocket> {
        let mut s = self.bind(addr)?;
        s.listen(1024)?;
        Ok(s)
    }

    /// Connects from an ephemeral port (or meets the peer, with `rendezvous(true)`).
    pub fn connect(&self, peer: impl ToSocketAddrs + std::fmt::Debug) -> Result<UdtSocket> {
        let mut s = self.build()?;
        s.connect(peer)?;
        Ok(s)
    }
}

/// An application's hold on a multiplexer; the I/O thread ends when none is left and every
/// connection on the port is finished.
struct Handle(Arc<Mux>);

impl Handle {
    /// A new port; [`Mux::open`] already counted this handle.
    fn open(addr: SocketAddr, options: MuxOptions) -> Result<Handle> {
        Ok(Handle(Mux::open(addr, options)?))
    }

    /// Another handle on an open port.
    fn share(mux: Arc<Mux>) -> Handle {
        mux.lock().handles += 1;
        Handle(mux)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.lock().handles -= 1;
        self.0.kick();
    }
}

enum State {
    Fresh,
    Bound(Handle),
    Listening(Handle),
    Connected { h: Handle, id: u32, peer: SocketAddr },
    Closed,
}

/// Counters of a connection: the core's [`Stats`] plus the application-side totals.
#[derive(Debug, Clone, Default)]
pub struct SocketStats {
    /// The protocol core's counters and estimates.
    pub core: Stats,
    /// Payload bytes handed to `send*` and accepted into the send buffer.
    pub bytes_sent: u64,
    /// Payload bytes returned by `recv*`.
    pub bytes_received: u64,
    /// Negotiated MSS.
    pub mss: u32,
    /// Payload bytes per full packet.
    pub payload_size: usize,
    /// Time since the connection was established (for this handle).
    pub elapsed: Duration,
}

/// A UDT socket: STREAM or DGRAM, listening or connected, on a UDP port it may share with
/// other UDT sockets (accepted sockets share their listener's port).
///
/// Setup calls (`bind`, `listen`, `connect`, `close`) take `&mut self`; data calls take
/// `&self`, so one thread may send while another receives (share it with an `Arc`).
pub struct UdtSocket {
    builder: Builder,
    state: State,
    send_timeout_us: AtomicU64,
    recv_timeout_us: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
    connected_at: Option<Instant>,
}

impl std::fmt::Debug for UdtSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("UdtSocket");
        match &self.state {
            State::Fresh => d.field("state", &"fresh"),
            State::Bound(h) => d.field("bound", &h.0.local_addr()),
            State::Listening(h) => d.field("listening", &h.0.local_addr()),
            State::Connected { h, id, peer } => d.field("local", &h.0.local_addr()).field("id", id).field("peer", peer),
            State::Closed => d.field("state", &"closed"),
        }
        .finish()
    }
}

fn resolve<A: ToSocketAddrs + std::fmt::Debug>(addr: A, prefer_v4: Option<bool>) -> Result<SocketAddr> {
    let name = format!("{addr:?}").trim_matches('"').to_string();
    let list: Vec<SocketAddr> = match addr.to_socket_addrs() {
        Ok(it) => it.collect(),
        Err(e) => return Err(UdtError::BadAddress { addr: name, reason: e.to_string() }),
    };
    let pick = match prefer_v4 {
        Some(v4) => list.iter().find(|a| a.is_ipv4() == v4).or(list.first()),
        None => list.iter().find(|a| a.is_ipv4()).or(list.first()),
    };
    pick.copied().ok_or(UdtError::BadAddress { addr: name, reason: "resolves to no address".into() })
}

/// Parses and resolves `HOST:PORT` with a message that names the input.
pub fn resolve_addr(s: &str) -> Result<SocketAddr> {
    resolve(s, None)
}

fn unspecified_for(peer: &SocketAddr) -> SocketAddr {
    match peer {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// The form in which the peer's datagrams will arrive on a socket bound to `local`.
fn as_seen_from(local: &SocketAddr, peer: SocketAddr) -> SocketAddr {
    match (local, peer) {
        (SocketAddr::V6(_), SocketAddr::V4(p)) => SocketAddr::new(IpAddr::V6(p.ip().to_ipv6_mapped()), p.port()),
        _ => peer,
    }
}

fn deadline(us: &AtomicU64) -> Option<Instant> {
    match us.load(Ordering::Relaxed) {
        0 => None,
        t => Some(Instant::now() + Duration::from_micros(t)),
    }
}

/// Why a connection cannot be used, if it cannot.
fn check_open(inner: &Inner, id: u32) -> Result<()> {
    if let Some(why) = &inner.stopped {
        return Err(UdtError::Io(io::Error::other(why.clone())));
    }
    let info = inner.socks.get(&id);
    if let Some(r) = info.and_then(|s| s.broken) {
        return Err(UdtError::Broken(r));
    }
    match inner.ep.connection(id) {
        None => Err(UdtError::Closed),
        Some(_) if info.is_some_and(|s| s.closed) => Err(UdtError::Closed),
        Some(_) => Ok(()),
    }
}

impl UdtSocket {
    /// A [`Builder`] for a socket with options.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// An unbound socket of type `t` with default options.
    pub fn new(t: SocketType) -> Result<UdtSocket> {
        Builder::new().socket_type(t).build()
    }

    /// Sets the options of a socket that is not connected yet.
    pub fn set_config(&mut self, config: ConnectionConfig) -> Result<()> {
        config.validate().map_err(UdtError::InvalidConfig)?;
        self.builder.config = config;
        Ok(())
    }

    /// The options the socket was made or last configured with.
    pub fn config(&self) -> &ConnectionConfig {
        &self.builder.config
    }

    /// `None` = block forever (default).
    pub fn set_send_timeout(&self, d: Option<Duration>) {
        self.send_timeout_us.store(d.map_or(0, |d| (d.as_micros() as u64).max(1)), Ordering::Relaxed);
    }

    /// How long `recv*` waits for data before [`UdtError::TimedOut`]; `None` = block forever
    /// (default).
    pub fn set_recv_timeout(&self, d: Option<Duration>) {
        self.recv_timeout_us.store(d.map_or(0, |d| (d.as_micros() as u64).max(1)), Ordering::Relaxed);
    }

    /// Binds the socket's own UDP port.
    pub fn bind(&mut self, addr: impl ToSocketAddrs + std::fmt::Debug) -> Result<()> {
        if !matches!(self.state, State::Fresh) {
            return Err(UdtError::InvalidState("bind() must come first, on a fresh socket"));
        }
        let addr = resolve(addr, None)?;
        self.state = State::Bound(Handle::open(addr, self.builder.mux)?);
        Ok(())
    }

    /// Accepts connections on the bound port (`backlog` = connections not yet `accept`ed).
    pub fn listen(&mut self, backlog: usize) -> Result<()> {
        if self.builder.rendezvous {
            return Err(UdtError::InvalidState("a rendezvous socket cannot listen"));
        }
        let h = match std::mem::replace(&mut self.state, State::Closed) {
            State::Bound(h) => h,
            other => {
                self.state = other;
                return Err(UdtError::InvalidState("listen() needs a bound, unconnected socket"));
            }
        };
        {
            let mut g = h.0.lock();
            if g.listening {
                drop(g);
                self.state = State::Bound(h);
                return Err(UdtError::InvalidState("another socket already listens on this port"));
            }
            let now = h.0.clock(&mut g);
            g.ep.listen(self.builder.config.clone(), backlog, now);
            g.listening = true;
        }
        self.state = State::Listening(h);
        Ok(())
    }

    /// Waits for the next incoming connection; it shares this socket's UDP port.
    pub fn accept(&self) -> Result<UdtSocket> {
        self.accept_until(None).map(|s| s.expect("no deadline"))
    }

    /// Like [`UdtSocket::accept`], giving up after `timeout` with `Ok(None)`.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Option<UdtSocket>> {
        self.accept_until(Some(Instant::now() + timeout))
    }

    fn accept_until(&self, deadline: Option<Instant>) -> Result<Option<UdtSocket>> {
        let State::Listening(h) = &self.state else {
            return Err(UdtError::InvalidState("accept() needs a listening socket"));
        };
        let mux = &h.0;
        let mut g = mux.lock();
        loop {
            if let Some(id) = g.ep.accept() {
                g.socks.entry(id).or_default();
                let peer = g.ep.peer_addr(id).expect("accepted connection exists");
                drop(g);
                let mut builder = self.builder.clone();
                builder.rendezvous = false;
                return Ok(Some(UdtSocket {
                    builder,
                    state: State::Connected { h: Handle::share(mux.clone()), id, peer },
                    send_timeout_us: AtomicU64::new(0),
                    recv_timeout_us: AtomicU64::new(0),
                    sent: AtomicU64::new(0),
                    received: AtomicU64::new(0),
                    connected_at: Some(Instant::now()),
                }));
            }
            g.want_accept = true;
            g = match mux.wait(g, deadline) {
                Ok(g) => g,
                Err(UdtError::TimedOut) => return Ok(None),
                Err(e) => return Err(e),
            };
        }
    }

    /// Connects to a listener at `peer` (or, with the rendezvous option, meets a peer doing
    /// the same towards us). Blocks until connected; fails after 3 s (rendezvous 30 s).
    pub fn connect(&mut self, peer: impl ToSocketAddrs + std::fmt::Debug) -> Result<()> {
        let rendezvous = self.builder.rendezvous;
        self.connect_inner(peer, rendezvous)
    }

    /// Rendezvous connection setup with `peer` (UDT4.md §6.2); bind first to the port the
    /// peer expects.
    pub fn rendezvous(&mut self, peer: impl ToSocketAddrs + std::fmt::Debug) -> Result<()> {
        self.connect_inner(peer, true)
    }

    fn connect_inner(&mut self, peer: impl ToSocketAddrs + std::fmt::Debug, rendezvous: bool) -> Result<()> {
        let prefer = match &self.state {
            State::Bound(h) => Some(h.0.local_addr().is_ipv4()),
            _ => None,
        };
        let peer = resolve(peer, prefer)?;
        if peer.port() == 0 || peer.ip().is_unspecified() {
            return Err(UdtError::BadAddress {
                addr: peer.to_string(),
                reason: "cannot connect to port 0 or an unspecified address".into(),
            });
        }
        let h = match std::mem::replace(&mut self.state, State::Closed) {
            State::Fresh => Handle::open(unspecified_for(&peer), self.builder.mux)?,
            State::Bound(h) => h,
            other => {
                let msg = match other {
                    State::Listening(_) => "a listening socket cannot connect",
                    State::Connected { .. } => "socket is already connected",
                    _ => "socket is closed",
                };
                self.state = other;
                return Err(UdtError::InvalidState(msg));
            }
        };
        let mux = h.0.clone();
        let peer = as_seen_from(&mux.local_addr(), peer);
        let mut config = self.builder.config.clone();
        config.connect_timeout = config.connect_timeout.max(Duration::from_micros(1));
        let id = {
            let mut g = mux.lock();
            let now = mux.clock(&mut g);
            let id = if rendezvous { g.ep.rendezvous(config, peer, now) } else { g.ep.connect(config, peer, now) };
            g.socks.entry(id).or_default();
            id
        };
        mux.kick();
        let mut g = mux.lock();
        let outcome = loop {
            let c = g.ep.connection(id);
            if c.is_some_and(|c| c.is_connected()) {
                break Ok(());
            }
            let info = g.socks.get(&id);
            if let Some(e) = info.and_then(|s| s.connect_error) {
                break Err(UdtError::from_connect(peer, e));
            }
            if let Some(r) = info.and_then(|s| s.broken) {
                break Err(UdtError::Broken(r));
            }
            if let Some(why) = &g.stopped {
                break Err(UdtError::Io(io::Error::other(why.clone())));
            }
            g.socks.entry(id).or_default().want_connect = true;
            match mux.wait(g, None) {
                Ok(ng) => g = ng,
                Err(e) => {
                    g = mux.lock();
                    break Err(e);
                }
            }
        };
        match outcome {
            Ok(()) => {
                drop(g);
                self.state = State::Connected { h, id, peer };
                self.connected_at = Some(Instant::now());
                Ok(())
            }
            Err(e) => {
                let now = mux.clock(&mut g);
                if let Some(c) = g.ep.connection_mut(id) {
                    c.close(now);
                }
                g.socks.entry(id).or_default().released = true;
                drop(g);
                mux.kick();
                self.state = State::Bound(h);
                Err(e)
            }
        }
    }

    fn conn(&self) -> Result<(&Arc<Mux>, u32)> {
        match &self.state {
            State::Connected { h, id, .. } => Ok((&h.0, *id)),
            State::Closed => Err(UdtError::Closed),
            _ => Err(UdtError::NotConnected),
        }
    }

    fn payload_size(&self) -> usize {
        wire::payload_size(self.builder.config.mss)
    }

    /// Buffers as much of `data` as fits now (blocking until at least one byte fits) and
    /// returns the count. STREAM sockets only.
    pub fn send(&self, data: &[u8]) -> Result<usize> {
        self.send_some(data, 1)
    }

    /// Sends all of `data` (blocks while the send buffer is full).
    pub fn send_all(&self, mut data: &[u8]) -> Result<()> {
        // Wake up as soon as an ACK frees one packet's room (at most one wake-up per ACK, every
        // 10 ms). Waiting for a quarter of the buffer starved the sender: unacknowledged
        // packets hold the buffer, so one as large as the flow window kept only 75–100 % of
        // the window in flight (issue 13: 75 % at 1 Gb/s × 110 ms).
        let packet = self.payload_size();
        while !data.is_empty() {
            let n = self.send_some(data, packet.min(data.len()))?;
            data = &data[n..];
        }
        Ok(())
    }

    fn send_some(&self, data: &[u8], want: usize) -> Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let (mux, id) = self.conn()?;
        if self.builder.config.socket_type != SocketType::Stream {
            return Err(UdtError::InvalidState("send() is for STREAM sockets; use sendmsg() on a DGRAM socket"));
        }
        let deadline = deadline(&self.send_timeout_us);
        let payload = self.payload_size();
        let mut g = mux.lock();
        loop {
            check_open(&g, id)?;
            let now = mux.clock(&mut g);
            let c: &mut Connection = g.ep.connection_mut(id).expect("checked");
            if c.peer_closed() {
                return Err(UdtError::PeerClosed);
            }
            let cap = c.send_capacity();
            if cap > 0 && cap >= want.min(cap.max(1)) {
                let mut n = data.len().min(MAX_COPY).min(cap);
                // Whole packets while more follows, so that only the very last one is short.
                if n < data.len() && n >= payload {
                    n -= n % payload;
                }
                let n = c.send(now, &data[..n]);
                drop(g);
                mux.kick();
                self.sent.fetch_add(n as u64, Ordering::Relaxed);
                return Ok(n);
            }
            if !c.is_connected() {
                return Err(UdtError::Closed);
            }
            g.socks.get_mut(&id).expect("checked").want_send = want.max(1);
            g = mux.wait(g, deadline)?;
        }
    }

    /// Receives at least one byte (blocking); `Ok(0)` once the peer closed and everything it
    /// sent was read.
    pub fn recv(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let (mux, id) = self.conn()?;
        if self.builder.config.socket_type != SocketType::Stream {
            return Err(UdtError::InvalidState("recv() is for STREAM sockets; use recvmsg() on a DGRAM socket"));
        }
        let deadline = deadline(&self.recv_timeout_us);
        let mut g = mux.lock();
        loop {
            if let Some(why) = &g.stopped {
                return Err(UdtError::Io(io::Error::other(why.clone())));
            }
            let broken = g.socks.get(&id).and_then(|s| s.broken);
            let Some(c) = g.ep.connection_mut(id) else { return Err(UdtError::Closed) };
            let limit = buf.len().min(MAX_COPY);
            let n = c.recv(&mut buf[..limit]);
            if n > 0 {
                let update = c.window_update_due();
                drop(g);
                if update {
                    mux.kick();
                }
                self.received.fetch_add(n as u64, Ordering::Relaxed);
                return Ok(n);
            }
            if c.at_eof() {
                return match broken {
                    Some(r) if !c.peer_closed() => Err(UdtError::Broken(r)),
                    _ => Ok(0),
                };
            }
            g.socks.get_mut(&id).expect("connected socket has info").want_recv = true;
            g = mux.wait(g, deadline)?;
        }
    }

    /// Sends one DGRAM message, in order, without TTL (blocks until it fits).
    pub fn sendmsg(&self, msg: &[u8]) -> Result<()> {
        self.sendmsg_with(msg, None, true)
    }

    /// Sends one DGRAM message; with a `ttl` it is dropped if not delivered in time.
    pub fn sendmsg_with(&self, msg: &[u8], ttl: Option<Duration>, in_order: bool) -> Result<()> {
        let (mux, id) = self.conn()?;
        if self.builder.config.socket_type != SocketType::Dgram {
            return Err(UdtError::InvalidState("sendmsg() is for DGRAM sockets; use send() on a STREAM socket"));
        }
        let payload = self.payload_size();
        let max = payload * self.builder.config.snd_buf_pkts as usize;
        if msg.len() > max {
            return Err(UdtError::MessageTooLarge { len: msg.len(), max });
        }
        let need = msg.len().div_ceil(payload).max(1) * payload;
        let deadline = deadline(&self.send_timeout_us);
        let mut g = mux.lock();
        loop {
            check_open(&g, id)?;
            let now = mux.clock(&mut g);
            let c = g.ep.connection_mut(id).expect("checked");
            if c.peer_closed() {
                return Err(UdtError::PeerClosed);
            }
            if c.send_msg(now, msg, in_order, ttl) {
                drop(g);
                mux.kick();
                self.sent.fetch_add(msg.len() as u64, Ordering::Relaxed);
                return Ok(());
            }
            if !c.is_connected() {
                return Err(UdtError::Closed);
            }
            g.socks.get_mut(&id).expect("checked").want_send = need;
            g = mux.wait(g, deadline)?;
        }
    }

    /// Receives the next whole DGRAM message into `buf` (a longer one is truncated, as in
    /// UDT). `Ok(None)` once the peer closed and every message was read.
    pub fn recvmsg(&self, buf: &mut [u8]) -> Result<Option<usize>> {
        let (mux, id) = self.conn()?;
        if self.builder.config.socket_type != SocketType::Dgram {
            return Err(UdtError::InvalidState("recvmsg() is for DGRAM sockets; use recv() on a STREAM socket"));
        }
        let deadline = deadline(&self.recv_timeout_us);
        let mut g = mux.lock();
        loop {
            if let Some(why) = &g.stopped {
                return Err(UdtError::Io(io::Error::other(why.clone())));
            }
            let broken = g.socks.get(&id).and_then(|s| s.broken);
            let Some(c) = g.ep.connection_mut(id) else { return Err(UdtError::Closed) };
            if let Some(n) = c.recv_msg(buf) {
                let update = c.window_update_due();
                drop(g);
                if update {
                    mux.kick();
                }
                self.received.fetch_add(n as u64, Ordering::Relaxed);
                return Ok(Some(n));
            }
            if c.at_eof() {
                return match broken {
                    Some(r) if !c.peer_closed() => Err(UdtError::Broken(r)),
                    _ => Ok(None),
                };
            }
            g.socks.get_mut(&id).expect("connected socket has info").want_recv = true;
            g = mux.wait(g, deadline)?;
        }
    }

    /// Sends `len` bytes of `file` from `offset` (fewer if the file ends first); returns the
    /// count.
    pub fn sendfile(&self, file: &File, offset: u64, len: u64) -> Result<u64> {
        let mut buf = vec![0u8; FILE_CHUNK.min(len as usize).max(1)];
        let mut done = 0u64;
        while done < len {
            let want = ((len - done) as usize).min(buf.len());
            let n = file.read_at(&mut buf[..want], offset + done)?;
            if n == 0 {
                break;
            }
            self.send_all(&buf[..n])?;
            done += n as u64;
        }
        Ok(done)
    }

    /// [`UdtSocket::sendfile`] of a whole file by path.
    pub fn sendfile_path(&self, path: impl AsRef<Path>) -> Result<u64> {
        let f = File::open(path)?;
        let len = f.metadata()?.len();
        self.sendfile(&f, 0, len)
    }

    /// Writes up to `len` received bytes into `file` at `offset` (fewer if the peer closes
    /// first); returns the count.
    pub fn recvfile(&self, file: &File, offset: u64, len: u64) -> Result<u64> {
        let mut buf = vec![0u8; FILE_CHUNK.min(len as usize).max(1)];
        let mut done = 0u64;
        while done < len {
            let want = ((len - done) as usize).min(buf.len());
            let n = self.recv(&mut buf[..want])?;
            if n == 0 {
                break;
            }
            file.write_all_at(&buf[..n], offset + done)?;
            done += n as u64;
        }
        Ok(done)
    }

    /// Blocks until everything sent so far is acknowledged by the peer.
    pub fn flush(&self) -> Result<()> {
        let (mux, id) = self.conn()?;
        let mut g = mux.lock();
        loop {
            check_open(&g, id)?;
            let c = g.ep.connection(id).expect("checked");
            if c.send_buffered() == 0 {
                return Ok(());
            }
            if !c.is_connected() {
                return Err(UdtError::Closed);
            }
            g.socks.get_mut(&id).expect("checked").want_flush = true;
            g = mux.wait(g, None)?;
        }
    }

    /// Alias of [`UdtSocket::flush`], UDT-style.
    pub fn wait_acked(&self) -> Result<()> {
        self.flush()
    }

    /// Closes the socket. A connected one lingers until all its data is acknowledged (at most
    /// the linger time, then `Err(Broken(LingerExpired))`) and tells the peer.
    pub fn close(&mut self) -> Result<()> {
        let state = std::mem::replace(&mut self.state, State::Closed);
        match state {
            State::Connected { h, id, .. } => {
                let mux = h.0.clone();
                let result = {
                    let mut g = mux.lock();
                    // UDT 4.11 drops control packets that reach a freshly connected socket
                    // before its receive thread registered it (UDT4.md §16): a Shutdown sent
                    // right after the handshake (an empty transfer) can vanish and leave the
                    // peer waiting. Until the peer has sent us anything, keep a short grace
                    // period after connecting before saying goodbye.
                    let quiet = g.ep.connection(id).is_some_and(|c| {
                        let s = c.stats();
                        s.pkts_recv + s.acks_recv + s.light_acks_recv + s.ack2_recv + s.naks_recv == 0
                    });
                    let young = self.connected_at.map_or(Duration::ZERO, |t| STARTUP_GRACE.saturating_sub(t.elapsed()));
                    if quiet && !young.is_zero() {
                        drop(g);
                        std::thread::sleep(young);
                        g = mux.lock();
                    }
                    let now = mux.clock(&mut g);
                    if let Some(c) = g.ep.connection_mut(id) {
                        c.close(now);
                    }
                    if g.pump(now) {
                        mux.notify();
                    }
                    drop(g);
                    mux.kick();
                    let mut g = mux.lock();
                    loop {
                        let info = g.socks.get(&id);
                        if let Some(r) = info.and_then(|s| s.broken) {
                            break Err(UdtError::Broken(r));
                        }
                        // Finished, and the Shutdown out of the endpoint...
                        if info.is_none_or(|s| s.closed || s.connect_error.is_some())
                            && g.ep.connection(id).is_none_or(|c| c.is_done())
                        {
                            // ...and in the kernel's hands.
                            break mux.wait_sent(g).map(drop);
                        }
                        if g.stopped.is_some() {
                            break Err(UdtError::Closed);
                        }
                        g.socks.get_mut(&id).expect("checked").want_close = true;
                        g = match mux.wait(g, None) {
                            Ok(g) => g,
                            Err(e) => break Err(e),
                        };
                    }
                };
                Self::release(&mux, id);
                drop(h);
                result
            }
            State::Listening(h) => {
                Self::stop_listening(&h.0);
                Ok(())
            }
            State::Bound(_) | State::Fresh => Ok(()),
            State::Closed => Err(UdtError::Closed),
        }
    }

    fn release(mux: &Mux, id: u32) {
        let mut g = mux.lock();
        let now = mux.clock(&mut g);
        if let Some(c) = g.ep.connection_mut(id) {
            // Dropped without close(): linger in the background, as UDT does.
            c.close(now);
        }
        g.socks.entry(id).or_default().released = true;
        g.pump(now);
        drop(g);
        mux.kick();
    }

    fn stop_listening(mux: &Mux) {
        let mut g = mux.lock();
        let now = mux.clock(&mut g);
        g.listening = false;
        while let Some(id) = g.ep.accept() {
            if let Some(c) = g.ep.connection_mut(id) {
                c.close(now);
            }
            g.socks.entry(id).or_default().released = true;
        }
        g.want_accept = false;
        drop(g);
        mux.notify();
        mux.kick();
    }

    /// Statistics of the connection (core counters plus application totals).
    pub fn stats(&self) -> Result<SocketStats> {
        let (mux, id) = self.conn()?;
        let g = mux.lock();
        let c = g.ep.connection(id).ok_or(UdtError::Closed)?;
        Ok(SocketStats {
            core: c.stats(),
            bytes_sent: self.sent.load(Ordering::Relaxed),
            bytes_received: self.received.load(Ordering::Relaxed),
            mss: c.mss(),
            payload_size: wire::payload_size(c.mss()),
            elapsed: self.connected_at.map_or(Duration::ZERO, |t| t.elapsed()),
        })
    }

    /// Packets in the send buffer (unsent or unacknowledged) — 0 once flushed.
    pub fn send_buffered_packets(&self) -> Result<usize> {
        let (mux, id) = self.conn()?;
        let g = mux.lock();
        Ok(g.ep.connection(id).map_or(0, |c| c.send_buffered()))
    }

    /// The local UDP address, once bound.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        match &self.state {
            State::Bound(h) | State::Listening(h) | State::Connected { h, .. } => Ok(h.0.local_addr()),
            State::Fresh => Err(UdtError::InvalidState("socket is not bound")),
            State::Closed => Err(UdtError::Closed),
        }
    }

    /// The peer's UDP address, once connected.
    pub fn peer_addr(&self) -> Result<SocketAddr> {
        match &self.state {
            State::Connected { peer, .. } => Ok(*peer),
            State::Closed => Err(UdtError::Closed),
            _ => Err(UdtError::NotConnected),
        }
    }

    /// The UDT socket ID of a connected socket.
    pub fn id(&self) -> Option<u32> {
        match &self.state {
            State::Connected { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// STREAM or DGRAM.
    pub fn socket_type(&self) -> SocketType {
        self.builder.config.socket_type
    }
}

impl Drop for UdtSocket {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.state, State::Closed) {
            State::Connected { h, id, .. } => Self::release(&h.0, id),
            State::Listening(h) => Self::stop_listening(&h.0),
            _ => {}
        }
    }
}

impl Read for &UdtSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.recv(buf)?)
    }
}

impl Read for UdtSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.recv(buf)?)
    }
}

impl Write for &UdtSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(self.send(buf)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(UdtSocket::flush(self)?)
    }
}

impl Write for UdtSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(self.send(buf)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(UdtSocket::flush(self)?)
    }
}
