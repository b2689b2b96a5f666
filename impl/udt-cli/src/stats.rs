//! The `--stats` JSON lines (`docs/cli.md`), in the schema shared with the libudt peer and
//! the suite's SABUL peer: one line every interval, then a summary line with `"summary":true`.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Write};

/// Where the lines go.
pub enum Sink {
    /// Standard output.
    Stdout,
    /// Standard error (when standard output carries the data).
    Stderr,
    /// A file, created or truncated.
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

    /// Flushes a file (the standard streams are written through).
    pub fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            _ => Ok(()),
        }
    }

    /// Writes `line` and a newline.
    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
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

/// Which side of the transfer a line describes (`"role"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The sender.
    Send,
    /// The receiver.
    Recv,
}

impl Role {
    /// The name in the stats lines: `send` or `recv`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Send => "send",
            Role::Recv => "recv",
        }
    }
}

/// The counters of one line, as each stack fills them (`docs/cli.md` says what each means;
/// SABUL's ERR counts as a NAK).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    /// Smoothed RTT, ms.
    pub rtt_ms: f64,
    /// Flow window, packets (the peer's advertised window as the sender sees it).
    pub flow_window: u64,
    /// Congestion window, packets.
    pub cwnd: f64,
    /// Packet sending period (pacing), µs.
    pub period_us: f64,
    /// Total lost packets: the sender's loss count at the sender, the receiver's at the receiver.
    pub losses: u64,
    /// Total retransmitted data packets.
    pub retrans: u64,
    /// Total data packets sent, retransmissions included.
    pub pkts_sent: u64,
    /// Total data packets received, retransmissions included.
    pub pkts_recv: u64,
    /// Total ACKs sent (with an ACK number: full or medium; light ACKs are not counted).
    pub acks_sent: u64,
    /// Total ACKs received (full or medium).
    pub acks_recv: u64,
    /// Total NAKs sent (SABUL: ERRs).
    pub naks_sent: u64,
    /// Total NAKs received (SABUL: ERRs).
    pub naks_recv: u64,
    /// A UDT sender's smoothed link-capacity estimate, packets/s (UDT4.md §8.6 step 7, from the
    /// receiver's packet pairs §10.2); `None` where a stack or role has none.
    pub bandwidth_pps: Option<u64>,
    /// Data packets dropped unacknowledged because their payload was longer than negotiated
    /// MSS − 44 (UDT4.md §8.2 step 0); `None` where a stack does not count them.
    pub oversize_drops: Option<u64>,
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
pub fn line(stack: &str, role: Role, t: f64, bytes: u64, mbps: f64, c: &Counters, extra: &str) -> String {
    let mut out = String::with_capacity(400);
    let _ = write!(
        out,
        "{{\"stack\":\"{stack}\",\"role\":\"{}\",\"t\":{:.6},\"bytes\":{},\"mbps\":{:.3},\"rtt_ms\":{:.3},\
         \"flow_window\":{},\"cwnd\":{:.3},\"period_us\":{:.3},\"losses\":{},\"retrans\":{},\
         \"pkts_sent\":{},\"pkts_recv\":{},\"acks_sent\":{},\"acks_recv\":{},\"naks_sent\":{},\"naks_recv\":{}{}{}{}}}",
        role.name(),
        num(t),
        bytes,
        num(mbps),
        num(c.rtt_ms),
        c.flow_window,
        num(c.cwnd),
        num(c.period_us),
        c.losses,
        c.retrans,
        c.pkts_sent,
        c.pkts_recv,
        c.acks_sent,
        c.acks_recv,
        c.naks_sent,
        c.naks_recv,
        c.bandwidth_pps.map_or(String::new(), |b| format!(",\"bandwidth_pps\":{b}")),
        c.oversize_drops.map_or(String::new(), |n| format!(",\"oversize_drops\":{n}")),
        extra
    );
    out
}

/// The rate over the last interval and the summary line's fields, from `(t, bytes)` samples.
#[derive(Debug, Default)]
pub struct Meter {
    last_t: f64,
    last_bytes: u64,
}

impl Meter {
    /// Mb/s since the previous sample; `bytes` never goes back.
    pub fn rate(&mut self, t: f64, bytes: u64) -> (u64, f64) {
        let bytes = bytes.max(self.last_bytes);
        let dt = t - self.last_t;
        let mbps = if dt > 0.0 { (bytes - self.last_bytes) as f64 * 8.0 / dt / 1e6 } else { 0.0 };
        (self.last_t, self.last_bytes) = (t, bytes);
        (bytes, mbps)
    }
}

/// The mean time between packets, µs, since the previous sample (0 when none passed): FRTP's
/// inter-packet time as measured, beside the pacing period it aims at (`docs/cli.md`).
#[derive(Debug, Default)]
pub struct GapMeter {
    last_t: f64,
    last_pkts: u64,
}

impl GapMeter {
    /// The mean gap between packets, µs, between the previous sample and this one at `t` s
    /// with `pkts` packets counted so far; 0 when no packet passed.
    pub fn ipt_us(&mut self, t: f64, pkts: u64) -> f64 {
        let n = pkts.saturating_sub(self.last_pkts);
        let ipt = if n > 0 { (t - self.last_t) * 1e6 / n as f64 } else { 0.0 };
        (self.last_t, self.last_pkts) = (t, pkts.max(self.last_pkts));
        ipt
    }
}

/// The `ipt_us` field of a line.
pub fn ipt_field(ipt_us: f64) -> String {
    format!(",\"ipt_us\":{:.3}", num(ipt_us))
}

/// The summary line's average rate and its extra fields (`tag` first, e.g. `,"conn":2`).
pub fn summary(bytes: u64, secs: f64, tag: &str) -> (f64, String) {
    let mbps = if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 };
    (mbps, format!("{tag},\"summary\":true,\"seconds\":{secs:.6}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_every_shared_key_in_order() {
        let c = Counters { rtt_ms: 1.5, cwnd: f64::INFINITY, ..Counters::default() };
        let l = line("udt-rs", Role::Recv, 1.5, 42, 3.0, &c, ",\"summary\":true");
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
        assert!(!l.contains("bandwidth_pps"), "only where the stack has an estimate");
        let c = Counters { bandwidth_pps: Some(83_333), ..Counters::default() };
        let l = line("udt-rs", Role::Send, 1.0, 0, 0.0, &c, "");
        assert!(l.ends_with(",\"naks_recv\":0,\"bandwidth_pps\":83333}"), "{l}");
    }

    #[test]
    fn line_reports_oversize_drops_only_where_the_stack_counts_them() {
        let c = Counters { bandwidth_pps: Some(7), oversize_drops: Some(3), ..Counters::default() };
        let l = line("udt-rs", Role::Recv, 1.0, 0, 0.0, &c, ",\"summary\":true");
        assert!(l.ends_with(",\"bandwidth_pps\":7,\"oversize_drops\":3,\"summary\":true}"), "{l}");
        let l = line("sabul", Role::Recv, 1.0, 0, 0.0, &Counters::default(), "");
        assert!(!l.contains("oversize_drops"), "{l}");
    }

    #[test]
    fn meter_rates_each_interval_and_never_goes_back() {
        let mut m = Meter::default();
        assert_eq!(m.rate(1.0, 1_000_000), (1_000_000, 8.0));
        assert_eq!(m.rate(2.0, 500), (1_000_000, 0.0));
        let (mbps, extra) = summary(1_000_000, 2.0, "");
        assert_eq!(mbps, 4.0);
        assert_eq!(extra, ",\"summary\":true,\"seconds\":2.000000");
    }

    #[test]
    fn gap_meter_gives_the_mean_time_between_packets_of_each_interval() {
        let mut g = GapMeter::default();
        assert_eq!(g.ipt_us(1.0, 1000), 1000.0);
        assert_eq!(g.ipt_us(1.5, 1000), 0.0);
        assert_eq!(g.ipt_us(2.0, 1250), 2000.0);
        assert_eq!(ipt_field(24.0), ",\"ipt_us\":24.000");
    }
}
