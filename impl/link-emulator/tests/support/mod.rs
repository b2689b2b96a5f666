//! Shared by `tests/netns.rs` and `benches/forward.rs`: a three-namespace topology
//! h1 — r — h2 with `udt-linkem` bridging r's two veths, plus ping and a UDP blast.
//! Everything created is torn down on drop, also when a test panics.
#![allow(dead_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) const H1_ADDR: &str = "10.77.0.1";
pub(crate) const H2_ADDR: &str = "10.77.0.2";
/// Ethernet + IPv4 + UDP headers: what a UDP payload costs on the emulated link beyond itself.
pub(crate) const UDP_OVERHEAD: usize = 14 + 20 + 8;

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Returns false (after saying why) if this environment cannot build namespaces.
pub(crate) fn can_run_netns(test: &str) -> bool {
    if !is_root() {
        eprintln!("skipping {test}: needs root (network namespaces and raw sockets)");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipping {test}: iproute2 `ip` not found");
        return false;
    }
    true
}

fn run(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn run_quiet(args: &[&str]) {
    let _ = Command::new(args[0]).args(&args[1..]).stdout(Stdio::null()).stderr(Stdio::null()).status();
}

/// Namespaces `udtl-<pid>-<tag>-{h1,r,h2}`; h1's and h2's `eth0` are on one /24, joined
/// through r's `ra` and `rb`, which have no addresses (r does no IP forwarding of its own).
pub(crate) struct Topology {
    pub h1: String,
    pub r: String,
    pub h2: String,
}

impl Topology {
    pub(crate) fn new(tag: &str) -> Self {
        let p = format!("udtl-{}-{tag}", std::process::id());
        let t = Topology { h1: format!("{p}-h1"), r: format!("{p}-r"), h2: format!("{p}-h2") };
        for ns in [&t.h1, &t.r, &t.h2] {
            run(&["ip", "netns", "add", ns]);
        }
        run(&["ip", "-n", &t.h1, "link", "add", "eth0", "type", "veth", "peer", "name", "ra", "netns", &t.r]);
        run(&["ip", "-n", &t.h2, "link", "add", "eth0", "type", "veth", "peer", "name", "rb", "netns", &t.r]);
        for ns in [&t.h1, &t.r, &t.h2] {
            // No IPv6 chatter (router solicitations, MLD) in the measurements.
            run_quiet(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            run_quiet(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        for (ns, dev) in [(&t.h1, "eth0"), (&t.h2, "eth0"), (&t.r, "ra"), (&t.r, "rb")] {
            // Offloaded super-frames cannot be forwarded frame by frame.
            run_quiet(&[
                "ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
            ]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        run(&["ip", "-n", &t.h1, "addr", "add", &format!("{H1_ADDR}/24"), "dev", "eth0"]);
        run(&["ip", "-n", &t.h2, "addr", "add", &format!("{H2_ADDR}/24"), "dev", "eth0"]);
        t
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [&self.h1, &self.r, &self.h2] {
            run_quiet(&["ip", "netns", "del", ns]);
        }
    }
}

/// A running `udt-linkem` in r; SIGTERM on drop (SIGKILL if it lingers).
pub(crate) struct Emulator {
    child: Option<Child>,
    pub stats_path: PathBuf,
}

impl Emulator {
    pub(crate) fn start(topo: &Topology, a_to_b: &str, b_to_a: &str) -> Self {
        Self::start_with(topo, a_to_b, b_to_a, &[])
    }

    /// Like [`Emulator::start`] with extra `udt-linkem` flags.
    pub(crate) fn start_with(topo: &Topology, a_to_b: &str, b_to_a: &str, extra: &[&str]) -> Self {
        let stats_path = std::env::temp_dir().join(format!("{}-linkem-stats.jsonl", topo.r));
        let _ = std::fs::remove_file(&stats_path);
        let child = Command::new("ip")
            .args(["netns", "exec", &topo.r, env!("CARGO_BIN_EXE_udt-linkem")])
            .args(["--a", "ra", "--b", "rb", "--a-to-b", a_to_b, "--b-to-a", b_to_a, "--stats"])
            .arg(&stats_path)
            .args(extra)
            // Extra flags for experiments, e.g. LINKEM_ARGS="--spin-us 20".
            .args(std::env::var("LINKEM_ARGS").unwrap_or_default().split_whitespace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("starting udt-linkem");
        let mut emu = Emulator { child: Some(child), stats_path };
        std::thread::sleep(Duration::from_millis(300));
        if let Some(status) = emu.child.as_mut().unwrap().try_wait().unwrap() {
            panic!("udt-linkem exited at start: {status}");
        }
        emu
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Stops the emulator and returns its final stats line.
    pub(crate) fn stop(self) -> String {
        self.stop_all().pop().unwrap_or_default()
    }

    /// Stops the emulator and returns all its stats lines, the final one last.
    pub(crate) fn stop_all(mut self) -> Vec<String> {
        let status = self.terminate();
        assert!(status.is_some_and(|s| s.success()), "udt-linkem did not exit cleanly: {status:?}");
        let text = std::fs::read_to_string(&self.stats_path).expect("reading the stats file");
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let last = lines.last().cloned().unwrap_or_default();
        assert!(last.contains("\"final\":true"), "no final stats line: {last}");
        lines
    }

    fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) takes no pointers; the pid is our own child's, which has not been reaped
        // yet (`try_wait` below reaps it), so it cannot name another process.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.terminate();
        let _ = std::fs::remove_file(&self.stats_path);
    }
}

/// Reads a number field inside the `dir` object ("a_to_b"/"b_to_a") of a stats line, or at
/// top level with `dir` empty.
pub(crate) fn stat(line: &str, dir: &str, field: &str) -> f64 {
    let scope = if dir.is_empty() { line } else { &line[line.find(&format!("\"{dir}\":")).expect(dir)..] };
    let key = format!("\"{field}\":");
    let at = scope.find(&key).unwrap_or_else(|| panic!("{field} not in {line}")) + key.len();
    let end = scope[at..].find([',', '}']).unwrap() + at;
    scope[at..end].parse().unwrap()
}

/// Round-trip times in ms from `ping` h1 → h2.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rtt {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub mdev: f64,
    /// The middle reply: one probe preempted on a busy machine moves the mean, not this.
    pub median: f64,
}

pub(crate) fn ping(topo: &Topology, count: u32, interval_s: f64) -> Rtt {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &topo.h1,
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            &interval_s.to_string(),
            "-W",
            "2",
            H2_ADDR,
        ])
        .output()
        .expect("running ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let line =
        text.lines().find(|l| l.contains("min/avg/max")).unwrap_or_else(|| panic!("ping got no replies:\n{text}"));
    let nums: Vec<f64> = line
        .split('=')
        .nth(1)
        .unwrap()
        .trim()
        .trim_end_matches("ms")
        .trim()
        .split('/')
        .map(|x| x.parse().unwrap())
        .collect();
    let mut each: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .map(|t| t.trim_end_matches("ms").trim().parse().unwrap())
        .collect();
    each.sort_by(f64::total_cmp);
    let median = each[each.len() / 2];
    Rtt { min: nums[0], avg: nums[1], max: nums[2], mdev: nums[3], median }
}

/// Runs `f` on a thread that has entered network namespace `ns`.
pub(crate) fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: `file` is an open namespace file that outlives the call; setns(2) moves only this
        // thread, which runs `f` and ends.
        assert_eq!(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }, 0, "setns {path}");
        f()
    })
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Blast {
    pub sent: u64,
    pub received: u64,
    /// Datagrams that arrived with a lower sequence number than one before them.
    pub reordered: u64,
    /// Rate on the emulated link (Ethernet frames, no preamble/FCS) between the first and
    /// last datagram received.
    pub link_bps: f64,
    pub offered_bps: f64,
}

fn udp_socket() -> i32 {
    // SAFETY: socket(2) takes no pointers; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0);
    let big: libc::c_int = 32 << 20;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: `big` is a live `c_int` and the length passed (4) is its size.
        unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, opt, &big as *const _ as *const _, 4) };
    }
    fd
}

fn sockaddr(ip: &str, port: u16) -> libc::sockaddr_in {
    let ip: std::net::Ipv4Addr = ip.parse().unwrap();
    // SAFETY: `sockaddr_in` is plain integers and bytes; all zeroes is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as u16;
    sa.sin_port = port.to_be();
    sa.sin_addr.s_addr = u32::from(ip).to_be();
    sa
}

/// Sends sequence-numbered UDP datagrams of `payload` bytes from h1 to h2 at `offered_bps`
/// (counted as link bytes) for `duration`, and measures what arrives.
pub(crate) fn udp_blast(topo: &Topology, offered_bps: f64, duration: Duration, payload: usize) -> Blast {
    let port = 5001;
    let (tx_ready, rx_ready) = std::sync::mpsc::channel();
    let receiver = in_netns(&topo.h2, move || {
        let fd = udp_socket();
        let sa = sockaddr("0.0.0.0", port);
        // SAFETY: `sa` is a live `sockaddr_in` and the length passed is its size; bind(2) only
        // reads it.
        assert_eq!(unsafe { libc::bind(fd, &sa as *const _ as *const _, std::mem::size_of_val(&sa) as u32,) }, 0);
        let tv = libc::timeval { tv_sec: 0, tv_usec: 500_000 };
        // SAFETY: `tv` is a live `timeval` and the length passed is its size; the kernel only reads
        // it.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const _ as *const _,
                std::mem::size_of_val(&tv) as u32,
            )
        };
        tx_ready.send(()).unwrap();
        let mut buf = vec![0u8; 65536];
        let (mut n, mut reordered, mut max_seq) = (0u64, 0u64, None::<u64>);
        let (mut first, mut last) = (None::<Instant>, Instant::now());
        loop {
            // SAFETY: `buf` is writable for `buf.len()` bytes, the length passed, for the whole
            // call.
            let r = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut _, buf.len(), 0) };
            if r < 0 {
                // 500 ms of silence after traffic began: the blast is over.
                if first.is_some() {
                    break;
                } else {
                    continue;
                }
            }
            let now = Instant::now();
            first.get_or_insert(now);
            last = now;
            n += 1;
            let seq = u64::from_be_bytes(buf[..8].try_into().unwrap());
            if max_seq.is_some_and(|m| seq < m) {
                reordered += 1
            }
            max_seq = Some(max_seq.map_or(seq, |m| m.max(seq)));
        }
        // SAFETY: `fd` is the socket this closure opened; it is closed once and not used after.
        unsafe { libc::close(fd) };
        let span = first.map_or(0.0, |f| (last - f).as_secs_f64());
        (n, reordered, span)
    });
    rx_ready.recv().unwrap();
    let sender = in_netns(&topo.h1, move || {
        let fd = udp_socket();
        let sa = sockaddr(H2_ADDR, port);
        // SAFETY: `sa` is a live `sockaddr_in` and the length passed is its size; connect(2) only
        // reads it.
        assert_eq!(unsafe { libc::connect(fd, &sa as *const _ as *const _, std::mem::size_of_val(&sa) as u32,) }, 0);
        let frame_bits = ((payload + UDP_OVERHEAD) * 8) as f64;
        const BATCH: usize = 16;
        let mut bufs = vec![vec![0u8; payload]; BATCH];
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < duration {
            let due = (start.elapsed().as_secs_f64() * offered_bps / frame_bits) as u64;
            if sent >= due {
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
            let k = ((due - sent) as usize).min(BATCH);
            let mut iovs: Vec<libc::iovec> = Vec::with_capacity(k);
            for (i, b) in bufs.iter_mut().take(k).enumerate() {
                b[..8].copy_from_slice(&(sent + i as u64).to_be_bytes());
                iovs.push(libc::iovec { iov_base: b.as_mut_ptr() as *mut _, iov_len: payload });
            }
            let mut hdrs: Vec<libc::mmsghdr> = iovs
                .iter_mut()
                .map(|iov| {
                    // SAFETY: `mmsghdr` is integers and raw pointers; all zeroes is a valid value,
                    // and the iovec is set next.
                    let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    h.msg_hdr.msg_iov = iov;
                    h.msg_hdr.msg_iovlen = 1;
                    h
                })
                .collect();
            // SAFETY: The `k` headers each point at their own iovec in `iovs`, each iovec at
            // `payload` bytes of a buffer in `bufs`; all outlive the call, and sendmmsg(2) only
            // reads them.
            let r = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), k as u32, 0) };
            if r > 0 {
                sent += r as u64;
            }
        }
        let offered = sent as f64 * frame_bits / start.elapsed().as_secs_f64();
        // SAFETY: `fd` is the socket this closure opened; it is closed once and not used after.
        unsafe { libc::close(fd) };
        (sent, offered)
    });
    let (sent, offered_bps) = sender.join().unwrap();
    let (received, reordered, span) = receiver.join().unwrap();
    let link_bps =
        if received > 1 { (received - 1) as f64 * ((payload + UDP_OVERHEAD) * 8) as f64 / span } else { 0.0 };
    Blast { sent, received, reordered, link_bps, offered_bps }
}
