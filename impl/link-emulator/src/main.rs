//! `udt-linkem`: forwards Ethernet frames between two interfaces, shaping each direction
//! with a link spec. See `docs/link-emulation.md`.

use link_emulator::afpacket::PacketSocket;
use link_emulator::clock::{now_ns, process_cpu_seconds};
use link_emulator::forwarder::{self, DirectionStats, ForwarderConfig};
use link_emulator::stats::take_line;
use link_model::link_spec::LinkSpec;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

const USAGE: &str = "\
usage: udt-linkem --a IFACE --b IFACE [--a-to-b SPEC] [--b-to-a SPEC] [--stats PATH]
                  [--spin-us N] [--realtime]

Forwards Ethernet frames between interfaces A and B (run it in the namespace that holds
them), shaping each direction with a link spec:

  delay=55ms,rate=1gbit,queue=1000p,loss=0.001,seed=1

  delay          one-way delay: s, ms, us, ns                             (default 0)
  rate           bit|bps, kbit, mbit, gbit (bits/s) or unlimited          (default unlimited)
  queue          DropTail limit: 1000p packets, 1500b/64kb/1mb bytes      (default 1000p)
  loss           P, P%, random:P, ge:p,r,h[,k] (Gilbert-Elliott) or none  (default none)
  duplicate      P or P%: a frame that gets through is delivered twice,   (default 0)
                 the copy right behind it (no extra queue or link time)
  reorder        P or P%: a frame is held back reorder_delay after the    (default 0)
                 bottleneck, so the frames behind it overtake it
  reorder_delay  the held-back frame's extra delay (needs reorder)        (default 1ms)
  seed           PRNG seed: loss, duplicate and reorder draw from their   (default 1)
                 own streams of it, per offered frame

  e.g. delay=20ms,rate=100mbit,duplicate=0.1%,reorder=1%,reorder_delay=2ms,seed=3

  --stats PATH   append a JSON line per second (and one at exit) to PATH ('-' = stdout)
  --spin-us N    busy-wait the last N us before a release (default 80)
  --realtime     run the forwarding threads SCHED_FIFO (opt-in: spinning threads then
                 take priority over everything else on the machine)

Disable segmentation offloads on the hosts' interfaces (ethtool -K IFACE tso off gso off
gro off); frames above the MTU cannot be forwarded. SIGINT/SIGTERM stop it cleanly.";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

struct Args {
    a: String,
    b: String,
    a_to_b: LinkSpec,
    b_to_a: LinkSpec,
    stats: Option<String>,
    spin_us: u64,
    realtime: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut a, mut b, mut stats, mut spin_us, mut realtime) = (None, None, None, 80, false);
    let (mut ab, mut ba) = (LinkSpec::default(), LinkSpec::default());
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| it.next()).ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--a" => a = Some(value()?),
            "--b" => b = Some(value()?),
            "--a-to-b" => ab = value()?.parse().map_err(|e| format!("--a-to-b: {e}"))?,
            "--b-to-a" => ba = value()?.parse().map_err(|e| format!("--b-to-a: {e}"))?,
            "--stats" => stats = Some(value()?),
            "--spin-us" => spin_us = value()?.parse().map_err(|_| "--spin-us takes a whole number of microseconds")?,
            "--realtime" => realtime = true,
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    let a = a.ok_or("--a IFACE is required")?;
    let b = b.ok_or("--b IFACE is required")?;
    if a == b {
        return Err("--a and --b must be different interfaces".into());
    }
    Ok(Args { a, b, a_to_b: ab, b_to_a: ba, stats, spin_us, realtime })
}

fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is integers, a mask and a handler field; all zeroes (SIG_DFL, empty
        // flags) is a valid value.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `sa` is a live `sigaction` and its mask is initialised by sigemptyset before
        // sigaction(2) reads it; `on_signal` is an `extern "C"` function that only stores to an
        // atomic, which is async-signal-safe.
        unsafe {
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("udt-linkem: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let open = |iface: &str| PacketSocket::open(iface).map_err(|e| eprintln!("udt-linkem: {e}"));
    let (Ok(sa), Ok(sb)) = (open(&args.a), open(&args.b)) else {
        return ExitCode::from(1);
    };
    for s in [&sa, &sb] {
        if !s.is_up {
            eprintln!("udt-linkem: warning: {} is down; bring it up with `ip link set {} up`", s.iface, s.iface);
        }
        if !s.ignores_outgoing {
            eprintln!("udt-linkem: note: kernel lacks PACKET_IGNORE_OUTGOING; filtering outgoing frames by type");
        }
    }
    let mut stats_out: Option<Box<dyn Write>> = match args.stats.as_deref() {
        None => None,
        Some("-") => Some(Box::new(std::io::stdout())),
        Some(path) => match std::fs::OpenOptions::new().create(true).append(true).open(path) {
            Ok(f) => Some(Box::new(f)),
            Err(e) => {
                eprintln!(
                    "udt-linkem: cannot open stats file {path:?}: {e}; check the directory exists and is writable"
                );
                return ExitCode::from(1);
            }
        },
    };
    install_signal_handlers();
    eprintln!("udt-linkem: {} -> {}: {}", args.a, args.b, args.a_to_b);
    eprintln!("udt-linkem: {} -> {}: {}", args.b, args.a, args.b_to_a);

    let cfg = ForwarderConfig { spin_ns: args.spin_us * 1000, ..ForwarderConfig::default() };
    let (st_ab, st_ba) = (DirectionStats::default(), DirectionStats::default());
    let start = now_ns();
    let realtime = args.realtime;
    std::thread::scope(|scope| {
        let run = |rx, tx, spec, st| {
            move || {
                if realtime {
                    let p = libc::sched_param { sched_priority: 10 };
                    // SAFETY: `pthread_self()` is this live thread and `p` a valid `sched_param`
                    // for the call.
                    if unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &p) } != 0 {
                        eprintln!("udt-linkem: --realtime: SCHED_FIFO refused; continuing at normal priority");
                    }
                }
                forwarder::run(rx, tx, spec, cfg, st, &STOP)
            }
        };
        let spawn = |name: &str, f| {
            std::thread::Builder::new().name(name.into()).spawn_scoped(scope, f).expect("spawning a forwarding thread")
        };
        spawn("a-to-b", run(&sa, &sb, &args.a_to_b, &st_ab));
        spawn("b-to-a", run(&sb, &sa, &args.b_to_a, &st_ba));

        let mut next = start + 1_000_000_000;
        while !STOP.load(Ordering::Relaxed) {
            let now = now_ns();
            if now < next {
                std::thread::sleep(std::time::Duration::from_nanos((next - now).min(50_000_000)));
                continue;
            }
            next += 1_000_000_000;
            if let Some(out) = stats_out.as_mut() {
                let line = take_line((now - start) as f64 / 1e9, false, process_cpu_seconds(), &st_ab, &st_ba);
                let _ = writeln!(out, "{line}").and_then(|_| out.flush());
            }
        }
    });
    // The forwarding threads have stopped: the final line has complete counters.
    let line = take_line((now_ns() - start) as f64 / 1e9, true, process_cpu_seconds(), &st_ab, &st_ba);
    if let Some(out) = stats_out.as_mut() {
        let _ = writeln!(out, "{line}").and_then(|_| out.flush());
    }
    eprintln!("udt-linkem: stopped: {line}");
    ExitCode::SUCCESS
}
