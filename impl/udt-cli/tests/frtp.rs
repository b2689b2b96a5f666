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

/// Sends `data` from a file into a file; the receiver takes DATA on 127.0.0.2 (another
/// address than the control connection's) and asks for `rate`. Returns what arrived and the
/// sender's stats lines.
fn transfer(name: &str, data: &[u8], rate: &str) -> (Vec<u8>, Vec<String>) {
    let dir = tmpdir(&format!("frtp-{name}"));
    let (input, output, stats) = (dir.join("in"), dir.join("out"), dir.join("send.jsonl"));
    std::fs::write(&input, data).unwrap();
    let (sender, addr) = listening_sender(&["--input", s(&input), "--stats", s(&stats)]);
    let recv_args = ["recv", "--connect", &addr, "--data-bind", "127.0.0.2:0", "--rate", rate, "--output", s(&output)];
    let mut receiver = frtp(&recv_args).spawn().unwrap();
    let send = finish(sender, 60);
    if !send.status.success() {
        let _ = receiver.kill();
    }
    let recv = finish(receiver, 60);
    assert!(send.status.success(), "send failed: {}", stderr_of(&send));
    assert!(recv.status.success(), "recv failed: {}", stderr_of(&recv));
    assert!(stderr_of(&recv).contains("data on 127.0.0.2:"), "{}", stderr_of(&recv));
    let got =
        (std::fs::read(&output).unwrap(), std::fs::read_to_string(&stats).unwrap().lines().map(String::from).collect());
    let _ = std::fs::remove_dir_all(&dir);
    got
}

#[test]
fn transfers_are_byte_exact_at_packet_boundaries_on_the_data_address() {
    for (i, &len) in [0usize, 1, PAYLOAD - 1, PAYLOAD, PAYLOAD + 1, 3_000_017].iter().enumerate() {
        let data = pattern(len, i as u64);
        let (got, _) = transfer(&format!("sizes-{len}"), &data, "400");
        assert!(got == data, "{len} bytes: {} arrived, differing", got.len());
    }
}

#[test]
fn the_sender_s_stats_carry_the_inter_packet_time_of_the_rate() {
    let data = pattern(2_000_000, 9);
    let (got, lines) = transfer("stats", &data, "500");
    assert!(got == data);
    let summary = lines.iter().find(|l| l.contains("\"summary\":true")).expect("a summary line");
    assert!(summary.contains("\"stack\":\"frtp\""), "{summary}");
    assert!(summary.contains("\"period_us\":24.000"), "1500 B at 500 Mb/s: {summary}");
    assert!(summary.contains(&format!("\"bytes\":{}", data.len())), "{summary}");
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
