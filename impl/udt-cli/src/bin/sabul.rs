//! `sabul`: send a file or pipe over SABUL (`docs/spec/SABUL.md`), or receive one, on the
//! command-line contract the family shares (`docs/cli.md`).
//!
//! The sender listens on TCP and waits for one receiver; the receiver connects, announces its
//! UDP data port in its option block, and the data flows over UDP while ACK, ERR and SYN come
//! back over the TCP connection (§1, §2). The session itself runs in [`udt_cli::session`],
//! shared with `frtp`.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sabul::cc::{interval_for_rate, SabulRate, INITIAL_INTERVAL_US, MAX_INTERVAL_US, MIN_INTERVAL_US};
use sabul::{ReceiverConfig, SenderConfig};
use udt::driver::BufferSizes;
use udt_cli::exit::{self, open_input, open_output, usage, Outcome};
use udt_cli::session::{self, parse_addr, Common, RecvSetup, Report, SendSetup};
use udt_cli::stats::Role;

const EXAMPLES: &str = "\
Examples:
  # the sender listens (start it first), the receiver connects
  sabul send --listen 0.0.0.0:9000 --input /tmp/file.bin
  sabul recv --connect 127.0.0.1:9000 --output /tmp/copy.bin

  # a pipe, starting at 500 Mb/s without slow start, statistics as JSON lines on stderr
  dd if=/dev/zero bs=1M count=2048 | sabul send --listen 127.0.0.1:9000 --input - --rate 500 --slow-start off
  sabul recv --connect 127.0.0.1:9000 --output - --stats - | sha256sum

Exit status: 0 success, 2 usage error or bad address, 3 connection setup failed,
4 local I/O error (input/output file, address not bindable), 5 session broken during the transfer.";

#[derive(Parser, Debug)]
#[command(name = "sabul", version, about = "Send or receive data over SABUL (UDP data, TCP control)", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Listen on TCP, wait for one receiver and send a file or standard input; exits 0 once
    /// every byte was acknowledged and the session closed (SABUL.md §10.1).
    #[command(after_help = EXAMPLES)]
    Send(SendArgs),
    /// Connect to a listening sender and write what arrives to a file or standard output;
    /// exits 0 once the sender closed and every byte was written.
    #[command(after_help = EXAMPLES)]
    Recv(RecvArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Address to listen on for the receiver's control connection, HOST:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: String,
    /// File to send; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    input: String,
    /// Initial rate in Mbit/s (SABUL.md §7.1: interval = 1500·8/rate µs); default: the
    /// spec's 10 µs interval.
    #[arg(long, value_name = "MBIT")]
    rate: Option<f64>,
    /// The lowest rate an increase may leave, Mbit/s (SABUL.md §7.1: `I_max`); default 12
    /// (1000 µs).
    #[arg(long, value_name = "MBIT")]
    min_rate: Option<f64>,
    /// The highest rate an increase may reach, Mbit/s (§7.1: `I_min`); default 1200 (10 µs).
    #[arg(long, value_name = "MBIT")]
    max_rate: Option<f64>,
    /// The flow window's slow start (SABUL.md §8); `off` is the 2003 code's fixed window.
    #[arg(long, value_name = "on|off", default_value = "on")]
    slow_start: OnOff,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct RecvArgs {
    /// The sender's control address, HOST:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    connect: String,
    /// Where to write the data; `-` writes standard output.
    #[arg(long, value_name = "PATH")]
    output: String,
    /// Local UDP port for the data (announced in the option block, §3.4); 0 = any free port.
    #[arg(long, value_name = "PORT", default_value_t = 0)]
    data_port: u16,
    #[command(flatten)]
    common: Common,
}

fn send(a: SendArgs) -> Outcome {
    let pkt_size = a.common.pkt_size()?;
    let interval = |what: &str, rate: Option<f64>, default: f64| match rate {
        None => Ok(default),
        Some(r) if r > 0.0 && r.is_finite() => Ok(interval_for_rate(r)),
        Some(r) => Err(usage(format!("{what} {r}: must be a positive number of Mbit/s"))),
    };
    let interval_us = interval("--rate", a.rate, INITIAL_INTERVAL_US)?;
    let max_interval_us = interval("--min-rate", a.min_rate, MAX_INTERVAL_US)?;
    let min_interval_us = interval("--max-rate", a.max_rate, MIN_INTERVAL_US)?;
    if min_interval_us > max_interval_us {
        return Err(usage("--min-rate must not be above --max-rate"));
    }
    let listen = parse_addr(&a.listen, "--listen")?;
    let input = open_input(&a.input)?;
    let report = Report::new("sabul", a.common.sink(false)?, Role::Send, a.common.stats_interval);

    let controller =
        Arc::new(SabulRate::new(interval_us, a.slow_start == OnOff::On).with_limits(min_interval_us, max_interval_us));
    session::send(SendSetup {
        stack: "sabul",
        listen,
        input,
        input_path: a.input,
        block: session::BLOCK,
        report,
        config: SenderConfig { pkt_size, controller, ..SenderConfig::default() },
        udp_buffers: BufferSizes { send: 8 << 20, recv: 1 << 20 },
        data_on_control_ip: true,
    })
}

fn recv(a: RecvArgs) -> Outcome {
    let pkt_size = a.common.pkt_size()?;
    let addr = parse_addr(&a.connect, "--connect")?;
    let output = open_output(&a.output)?;
    let report = Report::new("sabul", a.common.sink(a.output == "-")?, Role::Recv, a.common.stats_interval);
    session::recv(RecvSetup {
        stack: "sabul",
        connect: addr,
        output,
        output_path: a.output,
        block: session::BLOCK,
        report,
        udp_buffers: BufferSizes { send: 1 << 20, recv: 32 << 20 },
        data_bind: SocketAddr::from(([0, 0, 0, 0], a.data_port)),
        config: Box::new(move |data, ctrl_port| ReceiverConfig {
            data_port: data.port(),
            ctrl_port,
            pkt_size,
            ..ReceiverConfig::default()
        }),
    })
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Send(a) => exit::report("sabul send", exit::check_env().and_then(|_| send(a))),
        Command::Recv(a) => exit::report("sabul recv", exit::check_env().and_then(|_| recv(a))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sabul::wire::{MAX_PKT_SIZE, MIN_PKT_SIZE};

    #[test]
    fn mss_is_the_ip_packet_and_bounded_by_the_spec() {
        let c = |mss| Common { mss, stats: None, stats_interval: 100 };
        assert_eq!(c(1500).pkt_size().unwrap(), 1472);
        assert_eq!(c(60).pkt_size().unwrap(), MIN_PKT_SIZE);
        assert_eq!(c(59).pkt_size().unwrap_err().code, exit::USAGE);
        assert_eq!(c(20).pkt_size().unwrap_err().code, exit::USAGE);
        assert_eq!(c(65_535).pkt_size().unwrap(), MAX_PKT_SIZE);
    }
}
