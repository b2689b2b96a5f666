//! `frtp`: send a file or pipe over FRTP (`docs/spec/FRTP.md`), or receive one, on the
//! command-line contract the family shares (`docs/cli.md`).
//!
//! The sender listens on TCP on its control interface; the receiver connects over its own,
//! binds its data socket on the circuit (`--data-bind`) and asks for a fixed rate, which the
//! sender echoes or refuses (§2). DATA then travels to the data address at one constant
//! inter-packet time while ACK and ERR come back over the control connection (§4, §5). The
//! session runs in [`udt_cli::session`], shared with `sabul`.

use clap::{Args, Parser, Subcommand};
use frtp::Circuit;
use std::net::{IpAddr, Ipv4Addr};
use udt::driver::BufferSizes;
use udt_cli::exit::{self, open_input, open_output, usage, Failure, Outcome};
use udt_cli::session::{self, parse_addr, Common, RecvSetup, Report, SendSetup};
use udt_cli::stats::Role;

const EXAMPLES: &str = "\
Examples:
  # the sender listens on its control interface (start it first); the receiver connects
  # over its own, takes DATA on the circuit at 10.1.0.2 and asks for 500 Mb/s
  frtp send --listen 192.168.0.1:7000 --input /tmp/file.bin
  frtp recv --connect 192.168.0.1:7000 --data-bind 10.1.0.2:7001 --rate 500 --output /tmp/copy.bin

Exit status: 0 success, 2 usage error or bad address, 3 connection setup failed (a rate the
sender refuses included), 4 local I/O error (input/output file, address not bindable),
5 session broken during the transfer.";

/// FRTP.md §6: the UDP socket buffers, both ends.
const DEFAULT_UDP_BUFFER: usize = 256 << 10;
/// FRTP.md §6: the sender's retransmission buffer and the receiver's resequencing buffer.
const DEFAULT_FRTP_BUFFER: usize = 40_960_000;
/// The highest rate a sender honours unless told otherwise, Mbit/s.
const DEFAULT_MAX_RATE: f64 = 10_000.0;

#[derive(Parser, Debug)]
#[command(name = "frtp", version, about = "Send or receive data over FRTP (fixed-rate UDP data, TCP control on another path)", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Listen on TCP, wait for one receiver and send a file or standard input at the rate it
    /// asks for; exits 0 once every byte was acknowledged and the session closed.
    #[command(after_help = EXAMPLES)]
    Send(SendArgs),
    /// Connect to a listening sender, ask for a rate and write what arrives on the data
    /// address to a file or standard output; exits 0 once the sender closed and every byte
    /// was written.
    #[command(after_help = EXAMPLES)]
    Recv(RecvArgs),
}

#[derive(Args, Debug)]
struct SendArgs {
    /// Control address to listen on for the receiver, HOST:PORT.
    #[arg(long, value_name = "CTRL_ADDR:PORT")]
    listen: String,
    /// File to send; `-` reads standard input.
    #[arg(long, value_name = "PATH")]
    input: String,
    /// The highest rate this sender honours, Mbit/s; a receiver asking for more is refused
    /// (FRTP.md §2 step 3).
    #[arg(long, value_name = "MBIT", default_value_t = DEFAULT_MAX_RATE)]
    max_rate: f64,
    #[command(flatten)]
    buffers: Buffers,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct RecvArgs {
    /// The sender's control address, HOST:PORT.
    #[arg(long, value_name = "CTRL_ADDR:PORT")]
    connect: String,
    /// The local data-path (circuit) address DATA arrives on, IPv4:PORT; port 0 = any free
    /// port. Announced in the option block (FRTP.md §3.3); 0.0.0.0 = the control address.
    #[arg(long, value_name = "DATA_ADDR:PORT")]
    data_bind: String,
    /// The fixed sending rate to ask for, Mbit/s (normally the circuit rate, FRTP.md §2).
    #[arg(long, value_name = "MBIT")]
    rate: f64,
    /// Where to write the data; `-` writes standard output.
    #[arg(long, value_name = "PATH")]
    output: String,
    #[command(flatten)]
    buffers: Buffers,
    #[command(flatten)]
    common: Common,
}

/// FRTP.md §6's buffers.
#[derive(Args, Debug)]
struct Buffers {
    /// UDP socket buffer, bytes (both directions of the data socket).
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_UDP_BUFFER)]
    udp_buffer: usize,
    /// The sender's retransmission buffer or the receiver's resequencing buffer, bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_FRTP_BUFFER)]
    frtp_buffer: usize,
    /// The application side's block, bytes: the sender reads its input, the receiver writes
    /// its output this much at a time, in a thread of its own beside the one that paces the
    /// network (FRTP.md §1, the paper's two-thread design).
    #[arg(long, value_name = "BYTES", default_value_t = session::BLOCK as u64, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    block: u64,
}

impl Buffers {
    fn udp(&self) -> BufferSizes {
        BufferSizes { send: self.udp_buffer, recv: self.udp_buffer }
    }

    /// The FRTP buffer in packets of `pkt_size`.
    fn packets(&self, pkt_size: u32) -> Result<usize, Failure> {
        match self.frtp_buffer / (pkt_size as usize - 4) {
            0 => Err(usage(format!("--frtp-buffer {}: must hold at least one packet", self.frtp_buffer))),
            n => Ok(n),
        }
    }
}

/// Mbit/s as bit/s, for option `what`.
fn bits_per_s(what: &str, mbit: f64) -> Result<u64, Failure> {
    if mbit > 0.0 && mbit.is_finite() && mbit * 1e6 < u64::MAX as f64 {
        Ok((mbit * 1e6).round().max(1.0) as u64)
    } else {
        Err(usage(format!("{what} {mbit}: must be a positive number of Mbit/s")))
    }
}

fn send(a: SendArgs) -> Outcome {
    let pkt_size = a.common.pkt_size()?;
    let max_rate_bps = bits_per_s("--max-rate", a.max_rate)?;
    let send_buf_pkts = a.buffers.packets(pkt_size)?;
    let listen = parse_addr(&a.listen, "--listen")?;
    let input = open_input(&a.input)?;
    let report = Report::new("frtp", a.common.sink(false)?, Role::Send, a.common.stats_interval).with_ipt();
    session::send(SendSetup {
        stack: "frtp",
        listen,
        input,
        input_path: a.input,
        block: a.buffers.block as usize,
        report,
        config: frtp::SenderConfig { pkt_size, send_buf_pkts, ..frtp::sender_config(max_rate_bps) },
        udp_buffers: a.buffers.udp(),
        data_on_control_ip: false,
    })
}

fn recv(a: RecvArgs) -> Outcome {
    let pkt_size = a.common.pkt_size()?;
    let rate_bps = bits_per_s("--rate", a.rate)?;
    let window = a.buffers.packets(pkt_size)?.min(sabul::wire::DEFAULT_RECV_FLAG_SIZE as usize) as u32;
    let connect = parse_addr(&a.connect, "--connect")?;
    let data_bind = parse_addr(&a.data_bind, "--data-bind")?;
    if !data_bind.is_ipv4() {
        return Err(usage(format!("--data-bind {data_bind}: the option block carries an IPv4 address (FRTP.md §3.3)")));
    }
    let output = open_output(&a.output)?;
    let report = Report::new("frtp", a.common.sink(a.output == "-")?, Role::Recv, a.common.stats_interval).with_ipt();
    let announce_unspecified = data_bind.ip().is_unspecified();
    session::recv(RecvSetup {
        stack: "frtp",
        connect,
        output,
        output_path: a.output,
        block: a.buffers.block as usize,
        report,
        udp_buffers: a.buffers.udp(),
        data_bind,
        config: Box::new(move |data, ctrl_port| {
            let data_ip = match data.ip() {
                IpAddr::V4(ip) if !announce_unspecified => ip,
                _ => Ipv4Addr::UNSPECIFIED,
            };
            frtp::ReceiverConfig {
                pkt_size,
                recv_flag_size: window,
                ..frtp::receiver_config(data.port(), ctrl_port, Circuit { data_ip, rate_bps })
            }
        }),
    })
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Send(a) => exit::report("frtp send", exit::check_env().and_then(|_| send(a))),
        Command::Recv(a) => exit::report("frtp recv", exit::check_env().and_then(|_| recv(a))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_positive_mbit_and_buffers_hold_a_packet() {
        assert_eq!(bits_per_s("--rate", 500.0).unwrap(), 500_000_000);
        assert_eq!(bits_per_s("--rate", 0.0).unwrap_err().code, exit::USAGE);
        assert_eq!(bits_per_s("--rate", f64::NAN).unwrap_err().code, exit::USAGE);
        let b = |frtp_buffer| Buffers { udp_buffer: 1, frtp_buffer, block: 1 };
        assert_eq!(b(DEFAULT_FRTP_BUFFER).packets(1472).unwrap(), 27_901);
        assert_eq!(b(100).packets(1472).unwrap_err().code, exit::USAGE);
    }
}
