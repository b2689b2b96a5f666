//! The multiplexer: one UDP port, one I/O thread, one [`Endpoint`] for every UDT socket on
//! that port (UDT4.md §3.3).
//!
//! The I/O thread owns the UDP socket and makes the [`crate::driver`]'s passes; the endpoint
//! lives behind a mutex that application threads take briefly to hand over or pick up data.
//! One pass:
//!
//! 1. `recvmmsg` whatever is waiting (non-blocking) and, under the lock, feed it to the
//!    endpoint;
//! 2. still under the lock: run due timers, drain `poll_transmit` into a batch, collect
//!    events, wake application threads whose wait is over;
//! 3. send the batch with `sendmmsg` (GSO where possible) after releasing the lock;
//! 4. if nothing happened, wait for the next due time: spin when it is closer than the spin
//!    threshold (pacing at microsecond intervals cannot afford a sleep), otherwise `ppoll` on
//!    the socket and an eventfd that application threads signal.
//!
//! Time handed to the core is the driver's [`Clock`], never going back.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use transfer::time::Instant as CoreTime;
use udt_proto::connection::{BrokenReason, ConnectError, Event};
use udt_proto::endpoint::Endpoint;

use crate::driver::{Clock, Io, Wakeup};
use crate::error::{Result, UdtError};
use crate::udp::{self, BufferSizes, UdpSocket};

/// Re-check interval for a connection that claims to be due but has nothing to do.
const STALE_RECHECK: Duration = Duration::from_millis(1);
/// How often released, finished connections are forgotten.
const REAP_INTERVAL: Duration = Duration::from_millis(100);
/// Application waits re-check their condition at least this often (defence in depth).
const MAX_WAIT: Duration = Duration::from_millis(500);

/// Runtime options of a multiplexer.
#[derive(Debug, Clone, Copy)]
pub struct MuxOptions {
    /// Kernel buffer sizes for the port's UDP socket.
    pub udp_buffers: BufferSizes,
    /// Waits shorter than this are spun instead of slept.
    pub spin: Duration,
}

impl Default for MuxOptions {
    fn default() -> Self {
        // UDT_SPIN_US overrides the spin threshold (a tuning knob for experiments).
        let spin_us = std::env::var("UDT_SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
        MuxOptions { udp_buffers: BufferSizes { send: 8 << 20, recv: 32 << 20 }, spin: Duration::from_micros(spin_us) }
    }
}

/// What application threads know about a connection beyond the core's own state.
#[derive(Debug, Default)]
pub(crate) struct SockInfo {
    pub connect_error: Option<ConnectError>,
    pub broken: Option<BrokenReason>,
    pub closed: bool,
    /// The application dropped or closed its handle: forget the connection once done.
    pub released: bool,
    /// A thread waits for this much send capacity.
    pub want_send: usize,
    pub want_recv: bool,
    pub want_flush: bool,
    /// A thread waits for the handshake to finish.
    pub want_connect: bool,
    /// A thread waits for `close` to finish.
    pub want_close: bool,
}

/// State shared between the I/O thread and application threads.
pub(crate) struct Inner {
    pub ep: Endpoint,
    pub socks: HashMap<u32, SockInfo>,
    pub listening: bool,
    pub want_accept: bool,
    /// Application handles (sockets) on this port.
    pub handles: usize,
    waiters: usize,
    /// Set when the I/O thread ended; every blocking call fails with it.
    pub stopped: Option<String>,
    /// The latest time given to the core by anyone: the core's clock never goes back.
    pub last_time: CoreTime,
    /// Count of the I/O thread's passes that drained datagrams out of the endpoint.
    pub drained_pass: u64,
    last_reap: CoreTime,
}

impl Inner {
    /// Moves connection events into the application-visible state, and closes connections
    /// accepted after the listener closed. Returns whether anything changed. Connections the
    /// listener accepted wait in the endpoint until `accept()` takes them, so that they
    /// count against its backlog (a handshake beyond it is rejected).
    pub(crate) fn pump(&mut self, now: CoreTime) -> bool {
        let mut changed = false;
        while !self.listening {
            let Some(id) = self.ep.accept() else { break };
            changed = true;
            if let Some(c) = self.ep.connection_mut(id) {
                c.close(now);
                self.socks.entry(id).or_default().released = true;
            }
        }
        while let Some((id, ev)) = self.ep.poll_event() {
            changed = true;
            let s = self.socks.entry(id).or_default();
            match ev {
                Event::ConnectFailed(e) => s.connect_error = Some(e),
                Event::Closed => s.closed = true,
                Event::Broken(r) => s.broken = Some(r),
                Event::Connected | Event::PeerClosed => {}
            }
        }
        if changed || now - self.last_reap > REAP_INTERVAL {
            self.last_reap = now;
            self.reap();
        }
        changed
    }

    /// Forgets connections that are finished and no longer held by the application.
    fn reap(&mut self) {
        let done: Vec<u32> = self
            .ep
            .connection_ids()
            .filter(|id| {
                self.socks.get(id).is_some_and(|s| s.released) && self.ep.connection(*id).is_none_or(|c| c.is_done())
            })
            .collect();
        for id in done {
            self.ep.remove(id);
            self.socks.remove(&id);
        }
        self.socks.retain(|id, s| !s.released || self.ep.connection(*id).is_some());
    }

    /// Clears the wishes of waiting threads that can now proceed; true if any could.
    fn take_ready(&mut self, events: bool) -> bool {
        let mut ready = false;
        if self.want_accept && self.ep.pending_accepts() > 0 {
            self.want_accept = false;
            ready = true;
        }
        for (id, s) in self.socks.iter_mut() {
            if s.want_send == 0 && !s.want_recv && !s.want_flush && !s.want_connect && !s.want_close {
                continue;
            }
            let hit = match self.ep.connection(*id) {
                None => true,
                Some(c) => {
                    let over = !c.is_connected() || s.broken.is_some() || s.connect_error.is_some();
                    (s.want_send > 0 && (over || c.peer_closed() || c.send_capacity() >= s.want_send))
                        || (s.want_recv && (over || c.has_readable() || c.at_eof()))
                        || (s.want_flush && (over || c.send_buffered() == 0))
                        || (s.want_connect && !c.is_connecting())
                        || (s.want_close && (events || c.is_done()))
                }
            };
            if hit {
                s.want_send = 0;
                s.want_recv = false;
                s.want_flush = false;
                s.want_connect = false;
                s.want_close = false;
                ready = true;
            }
        }
        ready
    }

    /// When the I/O thread must look again, having just drained every due transmission: the
    /// earliest due time of any connection, and the earliest of their timers alone (a sleep
    /// may let paced data out late, never a timer: `Io::idle`).
    ///
    /// Defensive: a connection whose deadline is still in the past at this point had nothing
    /// to send although it claimed to be due (the core should not do that; it once did for
    /// accepted connections waiting for their client). It is looked at again after a
    /// millisecond instead of being spun on, so it cannot disturb the others' pacing.
    fn next_due(&self, now: CoreTime) -> (Option<CoreTime>, Option<CoreTime>) {
        let earliest = |a: Option<CoreTime>, b: CoreTime| Some(a.map_or(b, |a| a.min(b)));
        let (mut next, mut timer) = (None, None);
        for c in self.ep.connection_ids().filter_map(|id| self.ep.connection(id)) {
            if let Some(t) = c.poll_timeout() {
                next = earliest(next, if t <= now { now + STALE_RECHECK } else { t });
            }
            if let Some(t) = c.poll_timer() {
                timer = earliest(timer, if t <= now { now + STALE_RECHECK } else { t });
            }
        }
        (next, timer)
    }

    fn all_done(&self) -> bool {
        self.ep.connection_ids().all(|id| self.ep.connection(id).is_none_or(|c| c.is_done()))
    }
}

/// A UDP port with its I/O thread.
pub(crate) struct Mux {
    inner: Mutex<Inner>,
    cond: Condvar,
    /// How application threads wake the I/O thread.
    wakeup: Wakeup,
    /// The last drained pass whose datagrams were handed to the kernel.
    sent_pass: AtomicU64,
    /// An application thread waits for `sent_pass` to advance.
    want_sent: AtomicBool,
    clock: Clock,
    local: SocketAddr,
}

fn random_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.write_u32(std::process::id());
    h.finish()
}

impl Mux {
    /// Binds `addr` and starts the I/O thread, counting one handle for the caller.
    pub(crate) fn open(addr: SocketAddr, options: MuxOptions) -> Result<Arc<Mux>> {
        let udp = UdpSocket::bind(addr, options.udp_buffers).map_err(|source| UdtError::Bind { addr, source })?;
        let mux = Arc::new(Mux {
            inner: Mutex::new(Inner {
                ep: Endpoint::new(random_seed()),
                socks: HashMap::new(),
                listening: false,
                want_accept: false,
                // The caller's handle: the thread must not see an unused port and quit.
                handles: 1,
                waiters: 0,
                stopped: None,
                drained_pass: 0,
                last_time: CoreTime::ZERO,
                last_reap: CoreTime::ZERO,
            }),
            cond: Condvar::new(),
            wakeup: Wakeup::new()?,
            sent_pass: AtomicU64::new(0),
            want_sent: AtomicBool::new(false),
            clock: Clock::default(),
            local: udp.local_addr(),
        });
        if std::env::var_os("UDT_DEBUG").is_some() {
            let (snd, rcv) = udp.buffer_sizes();
            let (gso, gro) = udp.offloads();
            eprintln!("udt: UDP {} sndbuf {snd} rcvbuf {rcv} gso {gso} gro {gro}", udp.local_addr());
        }
        let m = mux.clone();
        let name = format!("udt-mux-{}", udp.local_addr().port());
        std::thread::Builder::new().name(name).spawn(move || m.run(udp, options.spin))?;
        Ok(mux)
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The core's clock: µs since the multiplexer started (plus a fixed offset).
    pub(crate) fn now(&self) -> CoreTime {
        self.clock.now()
    }

    /// [`Mux::now`] for a call into the core under the lock, never earlier than a time the
    /// core has already seen.
    pub(crate) fn clock(&self, g: &mut Inner) -> CoreTime {
        let t = self.now().max(g.last_time);
        g.last_time = t;
        t
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic on another thread must not take every socket down with it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the I/O thread to look at the endpoint again (after a send, close, connect...).
    pub(crate) fn kick(&self) {
        self.wakeup.kick();
    }

    /// Waits for the I/O thread to report progress; the caller re-checks its condition.
    /// Err(TimedOut) once `deadline` passed.
    pub(crate) fn wait<'a>(
        &'a self,
        mut g: MutexGuard<'a, Inner>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'a, Inner>> {
        if let Some(why) = &g.stopped {
            return Err(UdtError::Io(std::io::Error::other(why.clone())));
        }
        let mut limit = MAX_WAIT;
        if let Some(d) = deadline {
            let now = Instant::now();
            if now >= d {
                return Err(UdtError::TimedOut);
            }
            limit = limit.min(d - now);
        }
        g.waiters += 1;
        let (mut g, _) = self.cond.wait_timeout(g, limit).unwrap_or_else(|e| e.into_inner());
        g.waiters -= 1;
        Ok(g)
    }

    /// Waits until every datagram the endpoint has given out so far is in the kernel's hands
    /// (so that a Shutdown queued by `close` leaves even if the process exits right after).
    pub(crate) fn wait_sent<'a>(&'a self, mut g: MutexGuard<'a, Inner>) -> Result<MutexGuard<'a, Inner>> {
        let target = g.drained_pass;
        while self.sent_pass.load(Ordering::SeqCst) < target {
            self.want_sent.store(true, Ordering::SeqCst);
            g = self.wait(g, None)?;
        }
        Ok(g)
    }

    /// Wakes every waiting application thread (after an application-side state change).
    pub(crate) fn notify(&self) {
        self.cond.notify_all();
    }

    fn run(self: Arc<Self>, udp: UdpSocket, spin: Duration) {
        udp::set_fine_timer_slack();
        let this = self.clone();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            // The batches are made here: they hold raw pointers and stay with this thread.
            this.io_loop(&mut Io::new(udp, None, spin)?)
        }));
        let why = match result {
            Ok(Ok(())) => "the UDP port was closed".to_string(),
            Ok(Err(e)) => format!("UDP I/O failed: {e}"),
            Err(p) => {
                let msg =
                    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                format!("the UDT I/O thread panicked: {}", msg.unwrap_or_default())
            }
        };
        self.lock().stopped = Some(why);
        self.cond.notify_all();
    }

    fn io_loop(&self, io: &mut Io) -> std::io::Result<()> {
        let debug = std::env::var_os("UDT_DEBUG").is_some();
        let mut passes = 0u64;
        loop {
            passes += 1;
            io.recv(self.now())?;
            self.wakeup.take();
            let ((next, timer), pass, stop, output) = {
                let mut g = self.lock();
                let inner = &mut *g;
                let floor = inner.last_time;
                let now = self.clock(inner);
                io.feed(&mut inner.ep, now, floor);
                inner.ep.handle_timeout(now);
                let output = io.drain(&mut inner.ep, now);
                if output {
                    inner.drained_pass += 1;
                }
                let events = inner.pump(now);
                if inner.waiters > 0 && inner.take_ready(events) {
                    self.cond.notify_all();
                }
                let stop = inner.handles == 0 && inner.all_done();
                (inner.next_due(now), inner.drained_pass, stop, output)
            };
            if output {
                io.flush();
                self.sent_pass.store(pass, Ordering::SeqCst);
                if self.want_sent.swap(false, Ordering::SeqCst) {
                    let _g = self.lock();
                    self.cond.notify_all();
                }
            }
            if stop {
                if debug {
                    eprintln!(
                        "udt: port {} passes {passes} rx datagrams {} {:?}",
                        self.local,
                        io.rx_datagrams,
                        io.udp().counters
                    );
                }
                return Ok(());
            }
            if !io.busy() {
                io.idle(&self.clock, next, timer, &self.wakeup)?;
            }
        }
    }
}
