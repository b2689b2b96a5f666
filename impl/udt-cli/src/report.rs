//! JSON-lines statistics, in the schema shared with the libudt peer of the testbed:
//! one line every interval, then a summary line with `"summary":true`.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use udt::{SocketStats, Stats, UdtSocket};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Send,
    Recv,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Send => "send",
            Role::Recv => "recv",
        }
    }
}

/// Where the lines go.
pub enum Sink {
    Stdout,
    Stderr,
    File(File),
}

impl Sink {
    /// `-` is standard output, or standard error when standard output carries the data.
    pub fn open(path: &str, stdout_busy: bool) -> io::Result<Sink> {
        match path {
            "-" if stdout_busy => Ok(Sink::Stderr),
            "-" => Ok(Sink::Stdout),
            _ => File::create(path).map(Sink::File),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            _ => Ok(()),
        }
    }

    fn write_line(&mut self, line: &str) -> io::Result<()> {
        match self {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                writeln!(out, "{line}")?;
                out.flush()
            }
            Sink::Stderr => writeln!(io::stderr().lock(), "{line}"),
            Sink::File(f) => {
                f.write_all(line.as_bytes())?;
                f.write_all(b"\n")
            }
        }
    }
}

/// JSON has no NaN or infinity.
fn num(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// One line of the shared schema. `extra` is appended inside the object (summary fields).
pub fn line(role: Role, t: f64, bytes: u64, mbps: f64, s: &Stats, extra: &str) -> String {
    let losses = match role {
        Role::Send => s.pkts_lost_snd,
        Role::Recv => s.pkts_lost_rcv,
    };
    let mut out = String::with_capacity(400);
    let _ = write!(
        out,
        "{{\"stack\":\"udt-rs\",\"role\":\"{}\",\"t\":{:.6},\"bytes\":{},\"mbps\":{:.3},\"rtt_ms\":{:.3},\
         \"flow_window\":{},\"cwnd\":{:.3},\"period_us\":{:.3},\"losses\":{},\"retrans\":{},\
         \"pkts_sent\":{},\"pkts_recv\":{},\"acks_sent\":{},\"acks_recv\":{},\"naks_sent\":{},\"naks_recv\":{}{}}}",
        role.name(),
        num(t),
        bytes,
        num(mbps),
        s.rtt_us as f64 / 1000.0,
        s.flow_window,
        num(s.cwnd),
        num(s.period_us),
        losses,
        s.pkts_retrans,
        s.pkts_sent,
        s.pkts_recv,
        s.acks_sent,
        s.acks_recv,
        s.naks_sent,
        s.naks_recv,
        extra
    );
    out
}

/// Periodic reporter on its own thread.
pub struct Reporter {
    role: Role,
    start: Instant,
    sink: Arc<Mutex<Sink>>,
    /// Appended to every line inside the object, e.g. `,"conn":2` (empty: nothing).
    tag: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Payload bytes so far, as docs/cli.md counts them: the receiver's bytes written to the
/// output; the sender's bytes acknowledged (bytes accepted by the socket minus the send
/// buffer's content in whole packets, as the libudt peer does).
pub fn progress_bytes(role: Role, st: &SocketStats, delivered: &AtomicU64) -> u64 {
    match role {
        Role::Send => {
            let buffered = st.core.snd_buffered_pkts as u64 * st.payload_size as u64;
            st.bytes_sent.saturating_sub(buffered)
        }
        Role::Recv => delivered.load(Ordering::Relaxed),
    }
}

impl Reporter {
    /// Starts reporting on `sock` every `interval`; `delivered` counts the receiver's output.
    pub fn start(
        role: Role,
        sink: Sink,
        interval: Duration,
        sock: Arc<UdtSocket>,
        delivered: Arc<AtomicU64>,
    ) -> Reporter {
        Reporter::start_shared(role, Arc::new(Mutex::new(sink)), interval, sock, delivered, String::new())
    }

    /// Like [`Reporter::start`], writing to a sink that other reporters share (one line at a
    /// time) and appending `tag` (e.g. `,"conn":2`) inside every line.
    pub fn start_shared(
        role: Role,
        sink: Arc<Mutex<Sink>>,
        interval: Duration,
        sock: Arc<UdtSocket>,
        delivered: Arc<AtomicU64>,
        tag: String,
    ) -> Reporter {
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (sink2, stop2, tag2) = (sink.clone(), stop.clone(), tag.clone());
        let thread = std::thread::Builder::new()
            .name("udt-stats".into())
            .spawn(move || {
                let mut last_t = 0.0;
                let mut last_bytes = 0u64;
                let mut next = start + interval;
                while !stop2.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    if now < next {
                        std::thread::sleep((next - now).min(Duration::from_millis(20)));
                        continue;
                    }
                    next += interval;
                    let Ok(st) = sock.stats() else { break };
                    let t = start.elapsed().as_secs_f64();
                    let bytes = progress_bytes(role, &st, &delivered).max(last_bytes);
                    let dt = t - last_t;
                    let mbps = if dt > 0.0 { bytes.saturating_sub(last_bytes) as f64 * 8.0 / dt / 1e6 } else { 0.0 };
                    (last_t, last_bytes) = (t, bytes);
                    let l = line(role, t, bytes, mbps, &st.core, &tag2);
                    if sink2.lock().unwrap().write_line(&l).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn stats thread");
        Reporter { role, start, sink, tag, stop, thread: Some(thread) }
    }

    /// Stops the periodic lines and writes the summary.
    pub fn finish(mut self, bytes: u64, stats: &Stats) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let secs = self.start.elapsed().as_secs_f64();
        let mbps = if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 };
        let l = line(
            self.role,
            secs,
            bytes,
            mbps,
            stats,
            &format!("{},\"summary\":true,\"seconds\":{:.6}", self.tag, secs),
        );
        let mut sink = self.sink.lock().unwrap();
        sink.write_line(&l)?;
        sink.flush()
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_every_shared_key_in_order() {
        let s = Stats { rtt_us: 1500, cwnd: f64::INFINITY, ..Stats::default() };
        let l = line(Role::Recv, 1.5, 42, 3.0, &s, ",\"summary\":true");
        assert!(l.starts_with(
            "{\"stack\":\"udt-rs\",\"role\":\"recv\",\"t\":1.500000,\"bytes\":42,\"mbps\":3.000,\"rtt_ms\":1.500,"
        ));
        for key in [
            "flow_window",
            "cwnd",
            "period_us",
            "losses",
            "retrans",
            "pkts_sent",
            "pkts_recv",
            "acks_sent",
            "acks_recv",
            "naks_sent",
            "naks_recv",
            "summary",
        ] {
            assert!(l.contains(&format!("\"{key}\":")), "{key} missing in {l}");
        }
        assert!(l.contains("\"cwnd\":0.000"));
        assert!(l.ends_with("\"summary\":true}"));
    }
}
