//! `udt`'s JSON-lines statistics (`udt_cli::stats`): a thread that samples the socket every
//! interval, then the summary line.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use udt::{SocketStats, Stats, UdtSocket};
use udt_cli::stats::{self, Counters, Meter};
pub(crate) use udt_cli::stats::{Role, Sink};

/// One line of the shared schema from a UDT socket's counters. `extra` is appended inside
/// the object (summary fields).
pub(crate) fn line(role: Role, t: f64, bytes: u64, mbps: f64, s: &Stats, extra: &str) -> String {
    let c = Counters {
        rtt_ms: s.rtt_us as f64 / 1000.0,
        flow_window: u64::from(s.flow_window),
        cwnd: s.cwnd,
        period_us: s.period_us,
        losses: match role {
            Role::Send => s.pkts_lost_snd,
            Role::Recv => s.pkts_lost_rcv,
        },
        retrans: s.pkts_retrans,
        pkts_sent: s.pkts_sent,
        pkts_recv: s.pkts_recv,
        acks_sent: s.acks_sent,
        acks_recv: s.acks_recv,
        naks_sent: s.naks_sent,
        naks_recv: s.naks_recv,
        bandwidth_pps: matches!(role, Role::Send).then_some(u64::from(s.bandwidth)),
        oversize_drops: Some(s.oversize_drops),
    };
    stats::line("udt-rs", role, t, bytes, mbps, &c, extra)
}

/// Periodic reporter on its own thread.
pub(crate) struct Reporter {
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
pub(crate) fn progress_bytes(role: Role, st: &SocketStats, delivered: &AtomicU64) -> u64 {
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
    pub(crate) fn start(
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
    pub(crate) fn start_shared(
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
                let mut meter = Meter::default();
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
                    let (bytes, mbps) = meter.rate(t, progress_bytes(role, &st, &delivered));
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
    pub(crate) fn finish(mut self, bytes: u64, stats: &Stats) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let secs = self.start.elapsed().as_secs_f64();
        let (mbps, extra) = stats::summary(bytes, secs, &self.tag);
        let l = line(self.role, secs, bytes, mbps, stats, &extra);
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
    fn line_maps_the_role_s_loss_counter() {
        let s = Stats { pkts_lost_snd: 3, pkts_lost_rcv: 7, rtt_us: 1500, ..Stats::default() };
        assert!(line(Role::Send, 1.0, 0, 0.0, &s, "").contains("\"rtt_ms\":1.500,"));
        assert!(line(Role::Send, 1.0, 0, 0.0, &s, "").contains("\"losses\":3,"));
        assert!(line(Role::Recv, 1.0, 0, 0.0, &s, "").contains("\"losses\":7,"));
    }

    #[test]
    fn line_carries_the_connection_s_oversize_drops() {
        let s = Stats { oversize_drops: 2, ..Stats::default() };
        assert!(line(Role::Recv, 1.0, 0, 0.0, &s, "").ends_with(",\"oversize_drops\":2}"));
    }
}
