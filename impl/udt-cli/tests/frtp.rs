//! The `frtp` binary end to end over loopback (docs/cli.md, `frtp`): byte-exact transfers at
//! the packet boundaries with the data on its own address, the stats lines' inter-packet
//! time, a refused rate, and the usage and local failures with their exit status. Every child
//! runs under a time guard; nothing asserts on time.

use std::process::{Child, Command};

mod common;

use common::{command, finish, s, stderr_of, tmpdir};
use prng::pattern;

const BIN: &str = env!("CARGO_BIN_EXE_frtp");
const PAYLOAD: usize = 1468;

fn frtp(args: &[&str]) -> Command {
    command(BIN, args)
}

fn listening_sender(args: &[&str]) -> (Child, String) {
    common::listening_sender(BIN, args)
}

/// What a transfer left: the bytes that arrived and each side's stats lines.
struct Transfer {
    got: Vec<u8>,
    send: Vec<String>,
    recv: Vec<String>,
}

impl Transfer {
    fn summary(lines: &[String]) -> &str {
        lines.iter().find(|l| l.contains("\"summary\":true")).expect("a summary line")
    }
}

/// Sends `data` from a file into a file, `extra` options on both sides; the receiver takes
/// DATA on 127.0.0.2 (another address than the control connection's) and asks for `rate`.
fn transfer(name: &str, data: &[u8], rate: &str, extra: &[&str]) -> Transfer {
    let dir = tmpdir(&format!("frtp-{name}"));
    let (input, output) = (dir.join("in"), dir.join("out"));
    let (send_stats, recv_stats) = (dir.join("send.jsonl"), dir.join("recv.jsonl"));
    std::fs::write(&input, data).unwrap();
    let (sender, addr) = listening_sender(&[&["--input", s(&input), "--stats", s(&send_stats)], extra].concat());
    let recv_args = ["recv", "--connect", &addr, "--data-bind", "127.0.0.2:0", "--rate", rate, "--output", s(&output)];
    let mut receiver = frtp(&[&recv_args[..], &["--stats", s(&recv_stats)], extra].concat()).spawn().unwrap();
    let send = finish(sender, 60);
    if !send.status.success() {
        let _ = receiver.kill();
    }
    let recv = finish(receiver, 60);
    assert!(send.status.success(), "send failed: {}", stderr_of(&send));
    assert!(recv.status.success(), "recv failed: {}", stderr_of(&recv));
    assert!(stderr_of(&recv).contains("data on 127.0.0.2:"), "{}", stderr_of(&recv));
    let lines = |p| std::fs::read_to_string(p).unwrap().lines().map(String::from).collect();
    let got = Transfer { got: std::fs::read(&output).unwrap(), send: lines(&send_stats), recv: lines(&recv_stats) };
    let _ = std::fs::remove_dir_all(&dir);
    got
}

/// A line's numeric field.
fn field(line: &str, key: &str) -> f64 {
    let at = line.find(&format!("\"{key}\":")).unwrap_or_else(|| panic!("no {key} in {line}")) + key.len() + 3;
    line[at..].split([',', '}']).next().unwrap().parse().unwrap()
}

#[test]
fn transfers_are_byte_exact_at_packet_boundaries_on_the_data_address() {
    for (i, &len) in [0usize, 1, PAYLOAD - 1, PAYLOAD, PAYLOAD + 1, 3_000_017].iter().enumerate() {
        let data = pattern(len, i as u64);
        let t = transfer(&format!("sizes-{len}"), &data, "400", &[]);
        assert!(t.got == data, "{len} bytes: {} arrived, differing", t.got.len());
    }
}

#[test]
fn stats_carry_the_rate_s_inter_packet_time_and_the_measured_one_on_both_sides() {
    let data = pattern(2_000_000, 9);
    let t = transfer("stats", &data, "500", &[]);
    assert!(t.got == data);
    let summary = Transfer::summary(&t.send);
    assert!(summary.contains("\"stack\":\"frtp\""), "{summary}");
    assert!(summary.contains("\"period_us\":24.000"), "1500 B at 500 Mb/s: {summary}");
    assert!(summary.contains(&format!("\"bytes\":{}", data.len())), "{summary}");
    // `ipt_us`: the mean gap between the packets each side sent or received (docs/cli.md).
    for (lines, pkts) in [(&t.send, "pkts_sent"), (&t.recv, "pkts_recv")] {
        assert!(lines.iter().all(|l| l.contains("\"ipt_us\":")), "{lines:?}");
        let sum = Transfer::summary(lines);
        let expect = field(sum, "seconds") * 1e6 / field(sum, pkts);
        assert!((field(sum, "ipt_us") - expect).abs() < 0.01, "{sum}");
    }
}

#[test]
fn block_wise_input_and_output_keep_the_bytes_exact() {
    // Blocks smaller than a packet, one packet and a bit, and larger than the file.
    for block in ["1", "1469", "4096", "8000000"] {
        let data = pattern(1_000_003, 4);
        let t = transfer(&format!("block-{block}"), &data, "800", &["--block", block]);
        assert!(t.got == data, "--block {block}: {} bytes arrived, differing", t.got.len());
    }
}

#[test]
fn a_rate_above_the_sender_s_maximum_is_refused_on_both_sides() {
    let (sender, addr) = listening_sender(&["--input", "/dev/zero", "--max-rate", "100"]);
    let receiver =
        frtp(&["recv", "--connect", &addr, "--data-bind", "127.0.0.1:0", "--rate", "500", "--output", "/dev/null"])
            .spawn()
            .unwrap();
    let (send, recv) = (finish(sender, 30), finish(receiver, 30));
    assert_eq!(send.status.code(), Some(3), "{}", stderr_of(&send));
    assert!(stderr_of(&send).contains("asks for 500000000 bit/s"), "{}", stderr_of(&send));
    assert_eq!(recv.status.code(), Some(3), "{}", stderr_of(&recv));
    assert!(stderr_of(&recv).contains("control connection"), "{}", stderr_of(&recv));
}

#[test]
fn usage_and_local_errors_exit_2_and_4_with_a_message() {
    for (args, code, needle) in [
        (&["recv", "--connect", "127.0.0.1:1", "--data-bind", "127.0.0.1:0", "--output", "-"][..], 2, "--rate"),
        (
            &["recv", "--connect", "127.0.0.1:1", "--data-bind", "127.0.0.1:0", "--rate", "0", "--output", "-"][..],
            2,
            "--rate 0",
        ),
        (
            &["recv", "--connect", "127.0.0.1:1", "--data-bind", "[::1]:0", "--rate", "5", "--output", "-"][..],
            2,
            "IPv4",
        ),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--max-rate", "0"][..], 2, "--max-rate 0"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--frtp-buffer", "10"][..], 2, "--frtp-buffer 10"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--block", "0"][..], 2, "--block"),
        (&["send", "--listen", "192.0.2.1:9", "--input", "/dev/null"][..], 4, "cannot listen on 192.0.2.1:9"),
    ] {
        let out = finish(frtp(args).spawn().unwrap(), 10);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains(needle), "{args:?}: {}", stderr_of(&out));
    }
    // A data address that is not this host's: the receiver cannot bind it.
    let (sender, addr) = listening_sender(&["--input", "/dev/null"]);
    let out = finish(
        frtp(&["recv", "--connect", &addr, "--data-bind", "192.0.2.1:7001", "--rate", "5", "--output", "/dev/null"])
            .spawn()
            .unwrap(),
        30,
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("192.0.2.1:7001"), "{}", stderr_of(&out));
    let send = finish(sender, 30);
    assert_ne!(send.status.code(), Some(0), "the sender does not hang: {}", stderr_of(&send));
    let help = finish(frtp(&["recv", "--help"]).spawn().unwrap(), 10);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--data-bind"));
}
