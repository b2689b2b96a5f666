//! The stats report: one JSON object per line, once per second and once more at exit.
//!
//! ```json
//! {"t_s":1.000,"final":false,"cpu_user_s":0.12,"cpu_sys_s":0.30,
//!  "a_to_b":{"frames_in":..,"frames_out":..,"bytes_in":..,"bytes_out":..,"dropped_queue":..,
//!            "dropped_loss":..,"dropped_oversize":..,"send_errors":..,"duplicated":..,
//!            "reordered":..,"in_flight":..,
//!            "queue_frames":..,"queue_delay_avg_us":..,"queue_delay_max_us":..,
//!            "bunched":..,"late_avg_us":..,"late_max_us":..},
//!  "b_to_a":{...}}
//! ```
//! Counters and CPU times are cumulative since start; `in_flight`/`queue_frames` are gauges;
//! `duplicated` counts frames delivered twice (both copies are in `frames_out`), `reordered`
//! frames held back by `reorder_delay`;
//! the `*_avg_us`/`*_max_us` pairs cover the interval since the previous line. `late_*` is
//! how far after its due time a frame was handed to the kernel — the emulator's own timing
//! error; `bunched` (cumulative) counts the frames that error squeezed against the frame before
//! them ([`crate::forwarder::Spacing`]).

use crate::forwarder::DirectionStats;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

/// Renders one stats line (without the newline) and resets the interval figures.
pub fn take_line(
    t_s: f64,
    is_final: bool,
    cpu: (f64, f64),
    a_to_b: &DirectionStats,
    b_to_a: &DirectionStats,
) -> String {
    let mut s = String::with_capacity(768);
    let _ = write!(s, "{{\"t_s\":{t_s:.3},\"final\":{is_final},\"cpu_user_s\":{:.3},\"cpu_sys_s\":{:.3}", cpu.0, cpu.1);
    for (name, d) in [("a_to_b", a_to_b), ("b_to_a", b_to_a)] {
        let _ = write!(s, ",\"{name}\":");
        direction(&mut s, d);
    }
    s.push('}');
    s
}

fn direction(s: &mut String, d: &DirectionStats) {
    let qsum = d.queue_delay_sum_ns.swap(0, Relaxed);
    let qn = d.queue_delay_count.swap(0, Relaxed);
    let qmax = d.queue_delay_max_ns.swap(0, Relaxed);
    let lsum = d.late_sum_ns.swap(0, Relaxed);
    let ln = d.late_count.swap(0, Relaxed);
    let lmax = d.late_max_ns.swap(0, Relaxed);
    let avg_us = |sum: u64, n: u64| {
        if n == 0 {
            0.0
        } else {
            sum as f64 / n as f64 / 1e3
        }
    };
    let _ = write!(
        s,
        "{{\"frames_in\":{},\"frames_out\":{},\"bytes_in\":{},\"bytes_out\":{},\"dropped_queue\":{},\
         \"dropped_loss\":{},\"dropped_oversize\":{},\"send_errors\":{},\"duplicated\":{},\"reordered\":{},\
         \"in_flight\":{},\"queue_frames\":{},\
         \"queue_delay_avg_us\":{:.1},\"queue_delay_max_us\":{:.1},\"bunched\":{},\"late_avg_us\":{:.1},\"late_max_us\":{:.1}}}",
        d.frames_in.load(Relaxed),
        d.frames_out.load(Relaxed),
        d.bytes_in.load(Relaxed),
        d.bytes_out.load(Relaxed),
        d.dropped_queue.load(Relaxed),
        d.dropped_loss.load(Relaxed),
        d.dropped_oversize.load(Relaxed),
        d.send_errors.load(Relaxed),
        d.duplicated.load(Relaxed),
        d.reordered.load(Relaxed),
        d.in_flight.load(Relaxed),
        d.queue_frames.load(Relaxed),
        avg_us(qsum, qn),
        qmax as f64 / 1e3,
        d.bunched.load(Relaxed),
        avg_us(lsum, ln),
        lmax as f64 / 1e3,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_figures_reset_after_each_line() {
        let a = DirectionStats::default();
        let b = DirectionStats::default();
        a.frames_in.store(3, Relaxed);
        a.late_sum_ns.store(3000, Relaxed);
        a.late_count.store(3, Relaxed);
        a.late_max_ns.store(2000, Relaxed);
        a.bunched.store(2, Relaxed);
        a.duplicated.store(4, Relaxed);
        a.reordered.store(5, Relaxed);
        let l1 = take_line(1.0, false, (0.5, 0.25), &a, &b);
        assert!(l1.starts_with("{\"t_s\":1.000,\"final\":false,\"cpu_user_s\":0.500"), "{l1}");
        assert!(l1.contains("\"a_to_b\":{\"frames_in\":3,"));
        assert!(l1.contains("\"send_errors\":0,\"duplicated\":4,\"reordered\":5,\"in_flight\":0,"), "{l1}");
        assert!(l1.contains("\"bunched\":2,\"late_avg_us\":1.0,\"late_max_us\":2.0}"));
        let l2 = take_line(2.0, true, (0.5, 0.25), &a, &b);
        assert!(
            l2.contains("\"frames_in\":3,") && l2.contains("\"bunched\":2,\"late_avg_us\":0.0,\"late_max_us\":0.0}")
        );
        assert!(l2.ends_with("}}"));
    }
}
