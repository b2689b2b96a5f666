//! The UDP socket under a multiplexer, with batched system calls.
//!
//! Output goes out with `sendmmsg`; runs of equal-sized datagrams to one peer are sent as a
//! single UDP GSO "super-datagram" (`UDP_SEGMENT` control message) that the kernel cuts into
//! segments, which on loopback and on GSO-capable NICs costs one trip through the stack for up
//! to 64 packets. Input comes in with `recvmmsg`; with `UDP_GRO` the kernel may hand several
//! same-sized datagrams of one sender over as one buffer plus the segment size, which
//! [`RxBatch::for_each`] splits again. Both offloads are optional: if the kernel refuses them
//! the socket falls back to one datagram per message for good.
//!
//! Waiting is `ppoll` on the socket and an eventfd ([`Waker`]) with a nanosecond timeout.

use std::io;
use std::mem::{self, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Largest UDP payload we ever send or expect (IPv4 limit).
pub(crate) const MAX_DATAGRAM: usize = 65_507;
/// The kernel's limit on segments per GSO send (`UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGMENTS: usize = 64;
/// Largest GSO super-datagram (payload bytes).
const GSO_MAX_BYTES: usize = 65_000;
const SO_SNDBUFFORCE: libc::c_int = 32;
const SO_RCVBUFFORCE: libc::c_int = 33;
/// Room for a `UDP_SEGMENT` / `UDP_GRO` control message (`CMSG_SPACE(sizeof(int))`) and an
/// `SCM_TIMESTAMPNS` one (`CMSG_SPACE(sizeof(struct timespec))`).
const CMSG_LEN: usize = 64;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int of the stated size.
    cvt(unsafe {
        libc::setsockopt(fd, level, name, &value as *const _ as *const libc::c_void, mem::size_of::<libc::c_int>() as _)
    })
    .map(drop)
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: as above, with the length in/out.
    cvt(unsafe { libc::getsockopt(fd, level, name, &mut value as *mut _ as *mut libc::c_void, &mut len) })?;
    Ok(value)
}

/// Writes `addr` into `storage` and returns its length.
fn write_sockaddr(addr: &SocketAddr, storage: &mut libc::sockaddr_storage) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and suitably aligned for sockaddr_in.
            let sin = unsafe { &mut *(storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) };
            mem::size_of::<libc::sockaddr_in>() as _
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above for sockaddr_in6.
            let sin6 = unsafe { &mut *(storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: a.ip().octets() };
            sin6.sin6_scope_id = a.scope_id();
            mem::size_of::<libc::sockaddr_in6>() as _
        }
    }
}

fn read_sockaddr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Kernel buffer sizes to ask for (bytes). As root the `*FORCE` options lift `rmem_max`.
#[derive(Debug, Clone, Copy)]
pub struct BufferSizes {
    /// Send buffer, bytes.
    pub send: usize,
    /// Receive buffer, bytes.
    pub recv: usize,
}

/// System-call counters, for tuning (printed with `UDT_DEBUG`).
#[derive(Debug, Default, Clone, Copy)]
pub struct IoCounters {
    pub send_calls: u64,
    pub send_msgs: u64,
    pub send_pkts: u64,
    pub recv_calls: u64,
    pub recv_msgs: u64,
}

/// A bound, non-connected UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    fd: OwnedFd,
    local: SocketAddr,
    gso: bool,
    /// Largest GSO super-datagram this socket sends, payload bytes: at most a quarter of its
    /// granted send buffer. The kernel admits a super-datagram whole whenever the buffer has
    /// any room, so a larger one would let the socket overfill a host's transmit queue that a
    /// small buffer is meant to back-pressure (docs/testbed/topologies.md, "A host's NIC as the bottleneck").
    gso_bytes: usize,
    gro: bool,
    /// System calls and datagrams so far.
    pub counters: IoCounters,
}

impl UdpSocket {
    /// Binds a UDP socket to `addr` with buffers of `bufs` (forced when root), GSO/GRO where
    /// the kernel has them (unless `UDT_OFFLOAD=0`) and kernel receive time stamps.
    pub fn bind(addr: SocketAddr, bufs: BufferSizes) -> io::Result<UdpSocket> {
        let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        // SAFETY: plain socket(2) call; the fd is owned below.
        let raw = cvt(unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::IPPROTO_UDP) })?;
        // SAFETY: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `sockaddr_storage` is plain integers and bytes; all zeroes is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let len = write_sockaddr(&addr, &mut storage);
        // SAFETY: storage holds a valid address of `len` bytes.
        cvt(unsafe { libc::bind(raw, &storage as *const _ as *const libc::sockaddr, len) })?;
        for (force, plain, size) in
            [(SO_SNDBUFFORCE, libc::SO_SNDBUF, bufs.send), (SO_RCVBUFFORCE, libc::SO_RCVBUF, bufs.recv)]
        {
            let size = size.min(i32::MAX as usize / 2) as libc::c_int;
            if setsockopt_int(raw, libc::SOL_SOCKET, force, size).is_err() {
                let _ = setsockopt_int(raw, libc::SOL_SOCKET, plain, size);
            }
        }
        // UDT_OFFLOAD=0 turns GSO/GRO off: a capture on the sending host sees GSO
        // super-datagrams before the kernel cuts them, which a wire checker cannot read.
        let offload = std::env::var("UDT_OFFLOAD").map_or(true, |v| v != "0");
        let gso = offload && getsockopt_int(raw, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
        let gro = offload && setsockopt_int(raw, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
        // Kernel receive time stamps: the receiver's arrival-speed and packet-pair measurements
        // (UDT4.md §10) need each datagram's arrival time, not the time we got round to it.
        let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        let mut socket = UdpSocket { fd, local: addr, gso, gso_bytes: 0, gro, counters: IoCounters::default() };
        socket.gso_bytes = GSO_MAX_BYTES.min(socket.buffer_sizes().0 / 4);
        socket.local = socket.query_local_addr()?;
        Ok(socket)
    }

    fn query_local_addr(&self) -> io::Result<SocketAddr> {
        // SAFETY: `sockaddr_storage` is plain integers and bytes; all zeroes is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: storage and len describe a writable buffer.
        cvt(unsafe {
            libc::getsockname(self.fd.as_raw_fd(), &mut storage as *mut _ as *mut libc::sockaddr, &mut len)
        })?;
        read_sockaddr(&storage).ok_or_else(|| io::Error::other("unknown address family"))
    }

    /// The bound address (the port the kernel chose, if `addr` had 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Kernel buffer sizes actually granted (send, receive).
    pub fn buffer_sizes(&self) -> (usize, usize) {
        let fd = self.fd.as_raw_fd();
        let s = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0);
        let r = getsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0);
        (s as usize, r as usize)
    }

    /// Whether GSO and GRO are on (send, receive).
    pub fn offloads(&self) -> (bool, bool) {
        (self.gso, self.gro)
    }

    /// Sends every datagram of `batch`. Datagrams the kernel refuses (full queue, unreachable
    /// address) are dropped like any UDP loss; UDT recovers them.
    pub fn send_batch(&mut self, batch: &mut TxBatch) {
        let mut start = 0;
        self.counters.send_pkts += batch.pkts.len() as u64;
        while start < batch.pkts.len() {
            let groups = batch.build(start, if self.gso { self.gso_bytes } else { 0 });
            let mut sent = 0;
            while sent < groups {
                // SAFETY: `build` filled `hdrs[..groups]` with pointers into `batch`, which is
                // not touched until the call returns.
                let r = unsafe {
                    libc::sendmmsg(self.fd.as_raw_fd(), batch.hdrs.as_mut_ptr().add(sent), (groups - sent) as _, 0)
                };
                self.counters.send_calls += 1;
                if r >= 0 {
                    self.counters.send_msgs += r as u64;
                    sent += r as usize;
                    continue;
                }
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOPROTOOPT)
                        if self.gso && batch.group_len(sent) > 1 =>
                    {
                        // No GSO on this path (driver or kernel): stop using it and re-send
                        // from the first unsent datagram one by one.
                        self.gso = false;
                        break;
                    }
                    _ => sent += 1,
                }
            }
            start = if sent < groups { batch.group_first(sent) } else { batch.pkts.len() };
        }
    }

    /// Receives what is waiting, without blocking. Returns the number of messages (a GRO
    /// message may hold several datagrams).
    pub fn recv_batch(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        batch.prepare();
        // SAFETY: `prepare` pointed every header at its own buffer, name and control space.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                batch.hdrs.len() as _,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        self.counters.recv_calls += 1;
        if r < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR | libc::ECONNREFUSED | libc::EHOSTUNREACH | libc::ENETUNREACH) => Ok(0),
                _ => Err(err),
            };
        }
        batch.count = r as usize;
        self.counters.recv_msgs += r as u64;
        Ok(batch.count)
    }

    /// Waits until the socket is readable, `waker` was signalled, `timeout` passed, or `other`
    /// (a control stream) is readable or, when its flag is set, writable. Returns whether
    /// anything is ready (false: the timeout passed with the socket and stream idle).
    pub fn wait(
        &self,
        waker: &Waker,
        other: Option<(BorrowedFd<'_>, bool)>,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        self.wait_for(waker, other, timeout, true)
    }

    /// [`wait`](Self::wait), watching the socket itself only when `socket` is set.
    pub fn wait_for(
        &self,
        waker: &Waker,
        other: Option<(BorrowedFd<'_>, bool)>,
        timeout: Option<Duration>,
        socket: bool,
    ) -> io::Result<bool> {
        let (other_fd, other_events) = match other {
            Some((fd, write)) => (fd.as_raw_fd(), libc::POLLIN | if write { libc::POLLOUT } else { 0 }),
            None => (-1, 0),
        };
        let mut fds = [
            libc::pollfd { fd: if socket { self.fd.as_raw_fd() } else { -1 }, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: waker.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: other_fd, events: other_events, revents: 0 },
        ];
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: three pollfds (a negative fd is ignored); the timespec outlives the call.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 3, tsp, std::ptr::null()) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
            // Interrupted: say ready, so that the caller looks at everything.
            return Ok(true);
        }
        if fds[1].revents & libc::POLLIN != 0 {
            waker.drain();
        }
        Ok(r > 0)
    }
}

/// An eventfd that application threads write to wake the I/O thread out of `ppoll`.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain eventfd(2) call; the fd is owned below.
        let raw = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `raw` is a descriptor eventfd(2) just returned (checked by `cvt`) and nothing
        // else owns.
        Ok(Waker { fd: unsafe { OwnedFd::from_raw_fd(raw) } })
    }

    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a u64 to an eventfd; failure (counter full) means a
        // wake-up is already pending.
        unsafe { libc::write(self.fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }

    fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a u64; EAGAIN when already drained is fine.
        unsafe { libc::read(self.fd.as_raw_fd(), &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

#[derive(Debug, Clone, Copy)]
struct TxPkt {
    to: SocketAddr,
    off: usize,
    len: usize,
}

/// Datagrams waiting to be sent, stored back to back so that a run of equal-sized ones to one
/// peer is a contiguous GSO buffer.
pub struct TxBatch {
    buf: Vec<u8>,
    slot: usize,
    used: usize,
    max_pkts: usize,
    pkts: Vec<TxPkt>,
    /// Per group: index of its first packet, packet count.
    groups: Vec<(usize, usize)>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<libc::sockaddr_storage>,
    cmsgs: Vec<[u64; CMSG_LEN / 8]>,
}

impl TxBatch {
    /// Room for `max_pkts` datagrams of at most `slot` bytes.
    pub fn new(max_pkts: usize, slot: usize) -> TxBatch {
        let slot = slot.min(MAX_DATAGRAM);
        TxBatch {
            buf: vec![0; max_pkts * slot],
            slot,
            used: 0,
            max_pkts,
            pkts: Vec::with_capacity(max_pkts),
            groups: Vec::with_capacity(max_pkts),
            // SAFETY: all-zero is a valid (empty) value for these C structs.
            hdrs: vec![unsafe { mem::zeroed() }; max_pkts],
            iovs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; max_pkts],
            // SAFETY: `sockaddr_storage` is plain integers and bytes; all zeroes is a valid value.
            names: vec![unsafe { mem::zeroed() }; max_pkts],
            cmsgs: vec![[0; CMSG_LEN / 8]; max_pkts],
        }
    }

    pub fn clear(&mut self) {
        self.used = 0;
        self.pkts.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.pkts.len() >= self.max_pkts
    }

    /// Datagrams in the batch.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// Space for the next datagram.
    ///
    /// # Panics
    /// May panic once the batch [`is_full`](TxBatch::is_full): check that first.
    pub fn next_slot(&mut self) -> &mut [u8] {
        &mut self.buf[self.used..self.used + self.slot]
    }

    /// Records that `len` bytes for `to` were written into [`TxBatch::next_slot`].
    pub fn commit(&mut self, to: SocketAddr, len: usize) {
        self.pkts.push(TxPkt { to, off: self.used, len });
        self.used += len;
    }

    fn group_first(&self, g: usize) -> usize {
        self.groups[g].0
    }

    fn group_len(&self, g: usize) -> usize {
        self.groups[g].1
    }

    /// Fills `hdrs` for the packets from `start` on, runs of them as GSO super-datagrams of at
    /// most `gso_bytes` payload bytes (0: no GSO); returns the number of messages.
    fn build(&mut self, start: usize, gso_bytes: usize) -> usize {
        self.groups.clear();
        let n = self.pkts.len();
        let mut i = start;
        while i < n {
            let first = self.pkts[i];
            let mut j = i + 1;
            if gso_bytes > 0 {
                let mut total = first.len;
                while j < n && j - i < GSO_MAX_SEGMENTS {
                    let p = self.pkts[j];
                    if p.to != first.to || p.len > first.len || total + p.len > gso_bytes {
                        break;
                    }
                    total += p.len;
                    j += 1;
                    if p.len < first.len {
                        break; // only the last segment may be shorter
                    }
                }
            }
            self.groups.push((i, j - i));
            i = j;
        }
        for (g, &(first, count)) in self.groups.iter().enumerate() {
            let p = self.pkts[first];
            let last = self.pkts[first + count - 1];
            let total = last.off + last.len - p.off;
            self.iovs[g] =
                libc::iovec { iov_base: self.buf[p.off..].as_mut_ptr() as *mut libc::c_void, iov_len: total };
            let namelen = write_sockaddr(&p.to, &mut self.names[g]);
            let hdr = &mut self.hdrs[g].msg_hdr;
            hdr.msg_name = &mut self.names[g] as *mut _ as *mut libc::c_void;
            hdr.msg_namelen = namelen;
            hdr.msg_iov = &mut self.iovs[g];
            hdr.msg_iovlen = 1;
            hdr.msg_flags = 0;
            if count > 1 {
                // SAFETY: CMSG_SPACE only computes a size from its argument.
                let space = unsafe { libc::CMSG_SPACE(mem::size_of::<u16>() as u32) } as usize;
                hdr.msg_control = self.cmsgs[g].as_mut_ptr() as *mut libc::c_void;
                hdr.msg_controllen = space as _;
                // SAFETY: the control buffer holds CMSG_SPACE(2) bytes, 8-aligned.
                unsafe {
                    let cmsg = libc::CMSG_FIRSTHDR(hdr);
                    (*cmsg).cmsg_level = libc::SOL_UDP;
                    (*cmsg).cmsg_type = libc::UDP_SEGMENT;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut u16, p.len as u16);
                }
            } else {
                hdr.msg_control = std::ptr::null_mut();
                hdr.msg_controllen = 0;
            }
            self.hdrs[g].msg_len = 0;
        }
        self.groups.len()
    }
}

/// Buffers for one `recvmmsg` call.
pub struct RxBatch {
    buf: Vec<u8>,
    slot: usize,
    count: usize,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    names: Vec<MaybeUninit<libc::sockaddr_storage>>,
    cmsgs: Vec<[u64; CMSG_LEN / 8]>,
}

impl RxBatch {
    /// `msgs` messages of up to `slot` bytes each (a GRO message can be up to 64 KiB).
    pub fn new(msgs: usize, slot: usize) -> RxBatch {
        RxBatch {
            buf: vec![0; msgs * slot],
            slot,
            count: 0,
            // SAFETY: all-zero is a valid value for these C structs.
            hdrs: vec![unsafe { mem::zeroed() }; msgs],
            iovs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; msgs],
            names: vec![MaybeUninit::zeroed(); msgs],
            cmsgs: vec![[0; CMSG_LEN / 8]; msgs],
        }
    }

    /// Messages one call can receive.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    fn prepare(&mut self) {
        self.count = 0;
        for i in 0..self.hdrs.len() {
            self.iovs[i] = libc::iovec {
                iov_base: self.buf[i * self.slot..].as_mut_ptr() as *mut libc::c_void,
                iov_len: self.slot,
            };
            let hdr = &mut self.hdrs[i].msg_hdr;
            hdr.msg_name = self.names[i].as_mut_ptr() as *mut libc::c_void;
            hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.cmsgs[i].as_mut_ptr() as *mut libc::c_void;
            hdr.msg_controllen = CMSG_LEN as _;
            hdr.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
    }

    /// Datagrams received by the last [`UdpSocket::recv_batch`] (GRO messages counted by
    /// segment).
    pub fn datagram_count(&self) -> usize {
        (0..self.count)
            .map(|i| {
                let m = &self.hdrs[i];
                let len = m.msg_len as usize;
                let seg = gro_segment_size(&m.msg_hdr).unwrap_or(len).max(1);
                len.div_ceil(seg).max(1)
            })
            .sum()
    }

    /// Calls `f(from, datagram, arrival, index, count)` for every datagram received by the last
    /// [`UdpSocket::recv_batch`], splitting GRO messages at their segment size: `arrival` is
    /// the kernel's receive time stamp (CLOCK_REALTIME, ns) if it gave one, `index`/`count`
    /// the datagram's place in its GRO message (0/1 without GRO).
    pub fn for_each(&self, mut f: impl FnMut(SocketAddr, &[u8], Option<u64>, usize, usize)) {
        for i in 0..self.count {
            let m = &self.hdrs[i];
            if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                continue;
            }
            // SAFETY: the kernel wrote a sockaddr of msg_namelen bytes (zeroed otherwise).
            let Some(from) = read_sockaddr(unsafe { self.names[i].assume_init_ref() }) else { continue };
            let len = m.msg_len as usize;
            let data = &self.buf[i * self.slot..i * self.slot + len];
            let seg = gro_segment_size(&m.msg_hdr).unwrap_or(len).max(1);
            let stamp = rx_timestamp(&m.msg_hdr);
            let count = len.div_ceil(seg).max(1);
            for (j, d) in data.chunks(seg).enumerate() {
                f(from, d, stamp, j, count);
            }
        }
    }
}

/// The `SCM_TIMESTAMPNS` receive time stamp of a message, in ns of CLOCK_REALTIME.
fn rx_timestamp(hdr: &libc::msghdr) -> Option<u64> {
    if hdr.msg_controllen == 0 {
        return None;
    }
    // SAFETY: walking the control buffer the kernel filled, with the CMSG_* helpers.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}

fn gro_segment_size(hdr: &libc::msghdr) -> Option<usize> {
    if hdr.msg_controllen == 0 {
        return None;
    }
    // SAFETY: walking the control buffer the kernel filled, with the CMSG_* helpers.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
                return (v > 0).then_some(v as usize);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}

/// Lets this thread's timed waits end within a microsecond of their deadline (the default
/// 50 µs timer slack would make short sleeps bursty).
pub(crate) fn set_fine_timer_slack() {
    // SAFETY: prctl with an integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (UdpSocket, UdpSocket) {
        let bufs = BufferSizes { send: 1 << 20, recv: 1 << 20 };
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), bufs).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), bufs).unwrap();
        (a, b)
    }

    fn recv_all(b: &mut UdpSocket, want: usize) -> Vec<Vec<u8>> {
        let mut rx = RxBatch::new(8, 65536);
        let mut got = Vec::new();
        for _ in 0..1000 {
            b.wait(&Waker::new().unwrap(), None, Some(Duration::from_millis(10))).unwrap();
            b.recv_batch(&mut rx).unwrap();
            rx.for_each(|_, d, stamp, _, _| {
                assert!(stamp.is_some(), "the kernel stamps received datagrams");
                got.push(d.to_vec())
            });
            if got.len() >= want {
                break;
            }
        }
        got
    }

    #[test]
    fn batch_with_gso_runs_arrives_as_separate_datagrams_in_order() {
        let (mut a, mut b) = pair();
        let to = b.local_addr();
        let mut tx = TxBatch::new(64, 1500);
        let lens = [1472, 1472, 1472, 100, 16, 1472, 1472, 1000, 1472];
        for (i, &len) in lens.iter().enumerate() {
            tx.next_slot()[..len].fill(i as u8);
            tx.commit(to, len);
        }
        a.send_batch(&mut tx);
        let got = recv_all(&mut b, lens.len());
        assert_eq!(got.len(), lens.len());
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d.len(), lens[i]);
            assert!(d.iter().all(|&x| x == i as u8));
        }
    }

    #[test]
    fn a_super_datagram_takes_at_most_a_quarter_of_the_socket_s_send_buffer() {
        let mut tx = TxBatch::new(8, 1500);
        let to: SocketAddr = "127.0.0.1:9".parse().unwrap();
        for _ in 0..5 {
            tx.commit(to, 1400);
        }
        assert_eq!(tx.build(0, 3000), 3, "two, two and one packet");
        assert_eq!((tx.group_len(0), tx.group_len(1), tx.group_len(2)), (2, 2, 1));
        assert_eq!(tx.build(0, 0), 5, "no GSO: one message each");
        // 6554 bytes asked for, 13 108 granted (the kernel doubles it): 3277 per super-datagram.
        let small = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), BufferSizes { send: 6554, recv: 1 << 20 }).unwrap();
        assert_eq!(small.gso_bytes, small.buffer_sizes().0 / 4);
        assert!(small.gso_bytes < 2 * 1472 + 1472, "at most two full packets: {}", small.gso_bytes);
        let large =
            UdpSocket::bind("127.0.0.1:0".parse().unwrap(), BufferSizes { send: 8 << 20, recv: 1 << 20 }).unwrap();
        assert_eq!(large.gso_bytes, GSO_MAX_BYTES);
    }

    #[test]
    fn send_without_gso_works_too() {
        let (mut a, mut b) = pair();
        a.gso = false;
        let to = b.local_addr();
        let mut tx = TxBatch::new(8, 1500);
        for i in 0..5 {
            tx.next_slot()[..10].fill(i);
            tx.commit(to, 10);
        }
        a.send_batch(&mut tx);
        assert_eq!(recv_all(&mut b, 5).len(), 5);
    }
}
