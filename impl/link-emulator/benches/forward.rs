//! Calibration benchmark of `udt-linkem` (needs root): for a 100 Mbit/s and a 1 Gbit/s link
//! with 20 ms each way it reports
//! - the RTT error of an idle link (ping, 20 probes) against the configured 40 ms,
//! - the link rate achieved under a UDP blast offered at 1.1× the rate (Ethernet bytes),
//! - the emulator's own release lateness (max over the run) and
//! - its CPU time per forwarded frame (getrusage of the emulator, from its stats).
//!
//! Run: `cargo bench -p link-emulator --bench forward` (from `impl/`); `make bench` calls it.
//! Not a pass/fail test: it prints numbers to compare across machines and changes.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;
use support::*;

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` does not, and must stay quick.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    if !can_run_netns("link-emulator forward benchmark") {
        return;
    }
    let secs: u64 = std::env::var("LINKEM_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("udt-linkem calibration: delay=20ms each way, queue=1000p, 1472-byte UDP payloads, {secs} s blasts");
    println!(
        "{:>9} | {:>11} {:>11} {:>11} | {:>11} {:>11} {:>9} {:>8} | {:>10} {:>10}",
        "rate",
        "rtt avg ms",
        "rtt err ms",
        "rtt max ms",
        "offered",
        "achieved",
        "ratio",
        "reorder",
        "late max",
        "cpu/frame"
    );
    for (name, rate) in [("100mbit", 100e6), ("1gbit", 1e9)] {
        let spec = format!("delay=20ms,rate={name},queue=1000p");
        let topo = Topology::new(&format!("b{name}"));

        let emu = Emulator::start(&topo, &spec, &spec);
        ping(&topo, 1, 0.2);
        let rtt = ping(&topo, 20, 0.05);
        drop(emu);

        let emu = Emulator::start(&topo, &spec, &spec);
        ping(&topo, 1, 0.2);
        let b = udp_blast(&topo, rate * 1.1, Duration::from_secs(secs), 1472);
        let lines = emu.stop_all();
        let last = lines.last().unwrap();
        let late_max = lines
            .iter()
            .map(|l| stat(l, "a_to_b", "late_max_us").max(stat(l, "b_to_a", "late_max_us")))
            .fold(0.0, f64::max);
        let cpu = stat(last, "", "cpu_user_s") + stat(last, "", "cpu_sys_s");
        let frames = stat(last, "a_to_b", "frames_out") + stat(last, "b_to_a", "frames_out");
        println!(
            "{:>9} | {:>11.3} {:>+11.3} {:>11.3} | {:>8.1} Mb {:>8.1} Mb {:>9.4} {:>8} | {:>7.1} us {:>7.2} us",
            name,
            rtt.avg,
            rtt.avg - 40.0,
            rtt.max,
            b.offered_bps / 1e6,
            b.link_bps / 1e6,
            b.link_bps / rate,
            b.reordered,
            late_max,
            cpu / frames * 1e6,
        );
        if b.offered_bps < rate {
            println!(
                "{:>9}   note: the sender could not offer more than the link rate; the achieved rate is sender-bound",
                ""
            );
        }
    }
}
