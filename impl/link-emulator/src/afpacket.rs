//! The IO: an AF_PACKET raw socket bound to one interface, read and written in batches with
//! `recvmmsg`/`sendmmsg`.
//!
//! The socket sees every frame arriving on the interface (promiscuous, `ETH_P_ALL`) and none
//! of the frames the kernel transmits on it: `PACKET_IGNORE_OUTGOING` (Linux ≥ 4.20) keeps
//! our own transmissions from looping back, and the `PACKET_OUTGOING` packet type is
//! filtered as well in case the option is missing. Frames are written to the interface
//! exactly as read, Ethernet header included.
//!
//! Offloads: a peer that does TSO/GSO hands the veth frames far larger than the MTU, which
//! cannot be sent on as they are. Receive buffers are 64 KiB so they are seen whole and
//! counted (`dropped_oversize`); the fix is `ethtool -K <host veth> tso off gso off gro off`.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Largest frame a receive slot holds (a GSO super-frame fits).
pub const SLOT_BYTES: usize = 65_536 + 256;

const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// Opening an interface failed; the message says what to do.
#[derive(Debug)]
pub enum AfPacketError {
    /// No interface of that name in this network namespace.
    NoSuchInterface {
        /// The name as given.
        iface: String,
    },
    /// The kernel refused a raw socket: root or `cap_net_raw` is needed.
    NeedsPrivilege {
        /// The interface.
        iface: String,
        /// The error from socket(2).
        source: io::Error,
    },
    /// Another step of opening the interface failed.
    Io {
        /// The interface.
        iface: String,
        /// The step, as the message names it.
        what: &'static str,
        /// Its error.
        source: io::Error,
    },
}

impl fmt::Display for AfPacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AfPacketError::NoSuchInterface { iface } => write!(
                f,
                "interface {iface:?} does not exist here: create it (ip link add ... type veth) or run \
                 udt-linkem inside the namespace that holds it (ip netns exec ROUTER udt-linkem ...); \
                 `ip link` lists this namespace's interfaces"
            ),
            AfPacketError::NeedsPrivilege { iface, source } => write!(
                f,
                "opening a raw packet socket on {iface:?} was refused ({source}): run as root, or grant \
                 the binary the capabilities with `setcap cap_net_raw,cap_net_admin+ep $(which udt-linkem)`"
            ),
            AfPacketError::Io { iface, what, source } => write!(f, "{what} on {iface:?} failed: {source}"),
        }
    }
}

impl std::error::Error for AfPacketError {}

/// A raw socket bound to one interface.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    /// The interface's name.
    pub iface: String,
    /// The interface's index.
    pub ifindex: i32,
    /// The interface's MTU, bytes (IP packet, no Ethernet header).
    pub mtu: u32,
    /// Whether the interface was up when opened.
    pub is_up: bool,
    /// False if the kernel lacks `PACKET_IGNORE_OUTGOING` and we filter by packet type only.
    pub ignores_outgoing: bool,
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

impl PacketSocket {
    /// Opens a promiscuous, non-blocking raw socket bound to interface `iface`, with deep
    /// kernel buffers, ignoring the frames this host sends where the kernel can.
    pub fn open(iface: &str) -> Result<Self, AfPacketError> {
        let io_err = |what, source| AfPacketError::Io { iface: iface.to_string(), what, source };
        let cname = CString::new(iface).map_err(|_| AfPacketError::NoSuchInterface { iface: iface.into() })?;
        // SAFETY: `cname` is a NUL-terminated string that outlives the call, which only reads it.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) } as i32;
        if ifindex == 0 || iface.len() >= libc::IFNAMSIZ {
            return Err(AfPacketError::NoSuchInterface { iface: iface.into() });
        }
        // Protocol 0 until bound, so no frame of another interface slips in before bind().
        // SAFETY: socket(2) takes no pointers; its result is checked before it is used as a
        // descriptor.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
        if fd < 0 {
            let e = last_err();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    AfPacketError::NeedsPrivilege { iface: iface.into(), source: e }
                }
                _ => io_err("socket(AF_PACKET)", e),
            });
        }
        // SAFETY: `fd` is a descriptor socket(2) just returned (checked above) and nothing else
        // owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();

        let ignores_outgoing = setsockopt_int(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1).is_ok();
        // Deep buffers absorb bursts while a thread spins towards a deadline.
        if setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 32 << 20).is_err() {
            let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, 32 << 20);
        }
        if setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20).is_err() {
            let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUF, 8 << 20);
        }

        // SAFETY: `packet_mreq` is plain integers; all zeroes is a valid value.
        let mut mreq: libc::packet_mreq = unsafe { zeroed() };
        mreq.mr_ifindex = ifindex;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: `mreq` is a live `packet_mreq` and the length passed is its size; the kernel only
        // reads it.
        let rc = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq as *const _ as *const libc::c_void,
                size_of::<libc::packet_mreq>() as u32,
            )
        };
        if rc < 0 {
            return Err(io_err("setting promiscuous mode (PACKET_ADD_MEMBERSHIP)", last_err()));
        }

        // SAFETY: `sockaddr_ll` is plain integers and bytes; all zeroes is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a live `sockaddr_ll` and the length passed is its size; bind(2) only
        // reads it.
        let rc = unsafe {
            libc::bind(raw, &sll as *const _ as *const libc::sockaddr, size_of::<libc::sockaddr_ll>() as u32)
        };
        if rc < 0 {
            let e = last_err();
            return Err(match e.raw_os_error() {
                Some(libc::ENODEV) => AfPacketError::NoSuchInterface { iface: iface.into() },
                _ => io_err("bind", e),
            });
        }

        let (mtu, flags) = iface_mtu_and_flags(raw, iface).map_err(|e| io_err("reading MTU/flags (SIOCGIFMTU)", e))?;
        Ok(Self { fd, iface: iface.into(), ifindex, mtu, is_up: flags & libc::IFF_UP as i16 != 0, ignores_outgoing })
    }

    /// Largest frame (Ethernet header included, no FCS) the interface accepts for sending;
    /// 4 bytes are allowed for an 802.1Q tag.
    pub fn max_frame(&self) -> usize {
        self.mtu as usize + 14 + 4
    }

    /// Waits until a frame is readable or `timeout_ns` passes (ppoll, ns resolution).
    pub fn wait_readable(&self, timeout_ns: u64) {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts =
            libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as _, tv_nsec: (timeout_ns % 1_000_000_000) as _ };
        // SAFETY: `pfd` is one valid pollfd (the count passed is 1) and `ts` a valid timespec, both
        // outliving the call; a null signal mask leaves the mask alone.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn setsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int, val: libc::c_int) -> io::Result<()> {
    // SAFETY: `val` is a live `c_int` and the length passed is its size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, &val as *const _ as *const libc::c_void, size_of::<libc::c_int>() as u32)
    };
    if rc < 0 {
        Err(last_err())
    } else {
        Ok(())
    }
}

fn iface_mtu_and_flags(fd: RawFd, iface: &str) -> io::Result<(u32, i16)> {
    // SAFETY: `ifreq` is plain integers, bytes and a union of them; all zeroes is a valid value.
    let mut ifr: libc::ifreq = unsafe { zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(iface.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name (the name is shorter than IFNAMSIZ, checked
    // in `open`, so the zeroed last byte stays) and writes the MTU into `ifr`, which we own.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFMTU as _, &mut ifr) } < 0 {
        return Err(last_err());
    }
    // SAFETY: SIOCGIFMTU succeeded, so the union's `ifru_mtu` member is the one written; every
    // bit pattern is a valid `c_int` anyway.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu } as u32;
    // SAFETY: As for SIOCGIFMTU: the same `ifr`, written with the flags.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut ifr) } < 0 {
        return Err(last_err());
    }
    // SAFETY: SIOCGIFFLAGS succeeded, so `ifru_flags` is the member written; any bits are a valid
    // `c_short`.
    Ok((mtu, unsafe { ifr.ifr_ifru.ifru_flags }))
}

/// A received frame, or why it is not one to forward.
#[derive(Debug, PartialEq, Eq)]
pub enum Received<'a> {
    /// A frame to forward, its Ethernet header included.
    Frame(&'a [u8]),
    /// Sent by this host (only seen without `PACKET_IGNORE_OUTGOING`).
    Outgoing,
    /// Larger than a receive slot.
    Truncated {
        /// The frame's length, bytes.
        len: usize,
    },
}

/// Reusable buffers for `recvmmsg`.
pub struct RecvBatch {
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_ll>,
    hdrs: Vec<libc::mmsghdr>,
    n: usize,
}

impl RecvBatch {
    /// Buffers for `batch` frames of up to [`SLOT_BYTES`] each.
    pub fn new(batch: usize) -> Self {
        Self {
            bufs: vec![0; batch * SLOT_BYTES],
            iovs: vec![libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; batch],
            // SAFETY: `sockaddr_ll` is plain integers and bytes; all zeroes is a valid value.
            addrs: vec![unsafe { zeroed() }; batch],
            // SAFETY: `mmsghdr` is integers and raw pointers; all zeroes (null pointers, zero
            // lengths) is a valid value, and `recv` sets every pointer before the kernel sees it.
            hdrs: vec![unsafe { zeroed() }; batch],
            n: 0,
        }
    }

    /// Frames one [`recv`](Self::recv) reads at most.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Reads up to a batch of frames without blocking; returns how many (0 if none ready).
    pub fn recv(&mut self, sock: &PacketSocket) -> io::Result<usize> {
        // Pointers are set on every call so the struct stays freely movable.
        for i in 0..self.hdrs.len() {
            self.iovs[i] =
                libc::iovec { iov_base: self.bufs[i * SLOT_BYTES..].as_mut_ptr() as *mut _, iov_len: SLOT_BYTES };
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = &mut self.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = size_of::<libc::sockaddr_ll>() as u32;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: The loop above pointed each of the `hdrs.len()` headers at its own iovec (a
        // `SLOT_BYTES` slot of `bufs`) and its own `sockaddr_ll`, all owned by `self` and not
        // moved or touched until the call returns; the kernel writes at most those lengths.
        let rc = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            let e = last_err();
            self.n = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        self.n = rc as usize;
        Ok(self.n)
    }

    /// The `i`-th frame of the last [`RecvBatch::recv`].
    ///
    /// # Panics
    /// If `i` is not below the count that call returned.
    pub fn get(&self, i: usize) -> Received<'_> {
        assert!(i < self.n);
        if self.addrs[i].sll_pkttype == libc::PACKET_OUTGOING {
            return Received::Outgoing;
        }
        let len = self.hdrs[i].msg_len as usize;
        if len > SLOT_BYTES || self.hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return Received::Truncated { len };
        }
        Received::Frame(&self.bufs[i * SLOT_BYTES..i * SLOT_BYTES + len])
    }
}

/// Reusable headers for `sendmmsg`.
pub struct SendBatch {
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl SendBatch {
    /// Headers for up to `batch` frames per call (more are sent in several calls).
    pub fn new(batch: usize) -> Self {
        Self { iovs: Vec::with_capacity(batch), hdrs: Vec::with_capacity(batch) }
    }

    /// Sends `frames` in order. Returns how many were sent; a frame the kernel refuses
    /// (e.g. EMSGSIZE) is skipped and counted in the second value, so one bad frame
    /// neither blocks nor reorders the rest. Transient ENOBUFS/EAGAIN are retried briefly.
    pub fn send<F: AsRef<[u8]>>(&mut self, sock: &PacketSocket, frames: &[F]) -> (usize, usize) {
        let (mut sent, mut failed, mut start, mut retries) = (0, 0, 0, 0);
        while start < frames.len() {
            self.iovs.clear();
            self.hdrs.clear();
            for f in &frames[start..] {
                let f = f.as_ref();
                self.iovs.push(libc::iovec { iov_base: f.as_ptr() as *mut _, iov_len: f.len() });
            }
            for iov in self.iovs.iter_mut() {
                // SAFETY: `mmsghdr` is integers and raw pointers; all zeroes is a valid value, and
                // the iovec is set next.
                let mut h: libc::mmsghdr = unsafe { zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                self.hdrs.push(h);
            }
            // SAFETY: Each header points at its own iovec in `self.iovs`, each iovec at a frame of
            // `frames`; both outlive the call, and sendmmsg(2) only reads the frames.
            let rc = unsafe { libc::sendmmsg(sock.as_raw_fd(), self.hdrs.as_mut_ptr(), self.hdrs.len() as u32, 0) };
            if rc > 0 {
                sent += rc as usize;
                start += rc as usize;
                continue;
            }
            let e = last_err();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) if retries < 1000 => {
                    retries += 1;
                    std::hint::spin_loop();
                }
                _ => {
                    failed += 1;
                    start += 1;
                }
            }
        }
        (sent, failed)
    }
}
