//! The `sabul` binary end to end over loopback (docs/cli.md, `sabul`): byte-exact transfers
//! at the packet boundaries and through pipes, the stats lines, and every failure with its
//! exit status and message. Every child runs under a time guard; nothing asserts on time.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;

use common::{command, finish, free_port, s, stderr_of, tmpdir};
use prng::pattern;

const BIN: &str = env!("CARGO_BIN_EXE_sabul");
/// At the default MSS 1500 the SABUL packet is 1472 bytes and its payload 1468 (SABUL.md §3.1).
const PAYLOAD: usize = 1468;

fn sabul(args: &[&str]) -> Command {
    command(BIN, args)
}

fn listening_sender(args: &[&str]) -> (Child, String) {
    common::listening_sender(BIN, args)
}

/// Sends `data` from a file into a file, with `extra` options on both sides and `send_only` on
/// the sender's; returns what arrived and both stats files' lines.
fn transfer(name: &str, data: &[u8], extra: &[&str], send_only: &[&str]) -> (Vec<u8>, Vec<String>, Vec<String>) {
    let dir = tmpdir(&format!("sabul-{name}"));
    let (input, output) = (dir.join("in"), dir.join("out"));
    let (send_stats, recv_stats) = (dir.join("send.jsonl"), dir.join("recv.jsonl"));
    std::fs::write(&input, data).unwrap();
    let mut send_args = vec!["--input", s(&input), "--stats", s(&send_stats)];
    send_args.extend_from_slice(extra);
    send_args.extend_from_slice(send_only);
    let (sender, addr) = listening_sender(&send_args);
    let mut recv_args = vec!["recv", "--connect", &addr, "--output", s(&output), "--stats", s(&recv_stats)];
    recv_args.extend_from_slice(extra);
    let mut receiver = sabul(&recv_args).spawn().unwrap();
    let send = finish(sender, 60);
    if !send.status.success() {
        let _ = receiver.kill();
    }
    let recv = finish(receiver, 60);
    assert!(send.status.success(), "send failed: {}", stderr_of(&send));
    assert!(recv.status.success(), "recv failed: {}", stderr_of(&recv));
    let lines = |p| std::fs::read_to_string(p).unwrap().lines().map(String::from).collect();
    let got = (std::fs::read(&output).unwrap(), lines(&send_stats), lines(&recv_stats));
    let _ = std::fs::remove_dir_all(&dir);
    got
}

#[test]
fn transfers_are_byte_exact_at_packet_boundaries() {
    for (i, &len) in [0usize, 1, PAYLOAD - 1, PAYLOAD, PAYLOAD + 1, 3_000_017].iter().enumerate() {
        let data = pattern(len, i as u64);
        let (got, _, _) = transfer(&format!("sizes-{len}"), &data, &[], &[]);
        assert!(got == data, "{len} bytes: {} arrived, differing", got.len());
    }
}

#[test]
fn a_smaller_mss_on_either_side_is_byte_exact() {
    // The echo lowers the receiver's packet size to the sender's (§3.4).
    let data = pattern(500_003, 7);
    assert!(transfer("mss", &data, &["--mss", "576"], &[]).0 == data);
}

#[test]
fn stats_lines_have_the_shared_keys_and_a_summary_of_every_byte() {
    let data = pattern(2_000_000, 3);
    let (_, send, recv) = transfer("stats", &data, &["--stats-interval", "5"], &["--slow-start", "off"]);
    for (role, lines) in [("send", &send), ("recv", &recv)] {
        let last = lines.last().unwrap_or_else(|| panic!("{role}: no stats lines"));
        assert!(last.starts_with(&format!("{{\"stack\":\"sabul\",\"role\":\"{role}\",")), "{last}");
        assert!(last.contains("\"bytes\":2000000,"), "{role} summary: {last}");
        assert!(last.ends_with("}") && last.contains("\"summary\":true,\"seconds\":"), "{last}");
        for key in ["rtt_ms", "flow_window", "cwnd", "period_us", "losses", "retrans", "pkts_sent", "naks_recv"] {
            assert!(last.contains(&format!("\"{key}\":")), "{role}: {key} missing in {last}");
        }
    }
    let packets = 2_000_000usize.div_ceil(PAYLOAD);
    assert!(recv.last().unwrap().contains(&format!("\"pkts_recv\":{packets},")), "{:?}", recv.last());
}

/// 1 GiB from a pipe to a pipe: the sender reads standard input as it goes, the receiver
/// writes standard output; both ends are checked against the same generated stream.
#[test]
fn one_gib_through_pipes_is_byte_exact() {
    const CHUNK: usize = 1 << 20;
    const CHUNKS: u64 = 1024;
    let (mut sender, addr) = {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut c = sabul(&["send", "--listen", &addr, "--input", "-"]);
        c.stdin(Stdio::piped());
        (c.spawn().unwrap(), addr)
    };
    let mut stdin = sender.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        for i in 0..CHUNKS {
            stdin.write_all(&pattern(CHUNK, i)).unwrap();
        }
    });
    let mut receiver = sabul(&["recv", "--connect", &addr, "--output", "-"]).spawn().unwrap();
    let mut stdout = receiver.stdout.take().unwrap();
    let checker = std::thread::spawn(move || {
        let mut buf = vec![0u8; CHUNK];
        for i in 0..CHUNKS {
            stdout.read_exact(&mut buf).unwrap_or_else(|e| panic!("chunk {i}: {e}"));
            assert!(buf == pattern(CHUNK, i), "chunk {i} differs");
        }
        let mut rest = Vec::new();
        stdout.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{} bytes more than were sent", rest.len());
    });
    let recv = finish(receiver, 300);
    let send = finish(sender, 300);
    feeder.join().unwrap();
    checker.join().unwrap();
    assert!(send.status.success(), "send failed: {}", stderr_of(&send));
    assert!(recv.status.success(), "recv failed: {}", stderr_of(&recv));
}

#[test]
fn usage_errors_exit_2_with_a_message() {
    for (args, needle) in [
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--mss", "50"][..], "--mss 50"),
        (&["recv", "--connect", "127.0.0.1:1", "--output", "-", "--mss", "70000"][..], "--mss 70000"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--rate", "0"][..], "--rate 0"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--min-rate", "0"][..], "--min-rate 0"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--min-rate", "100", "--max-rate", "10"][..], "above"),
        (&["recv", "--connect", "nonsense", "--output", "-"][..], "--connect"),
        (&["send", "--listen", "127.0.0.1:1", "--input", "-", "--slow-start", "maybe"][..], "slow-start"),
    ] {
        let out = finish(sabul(args).spawn().unwrap(), 10);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains(needle), "{args:?}: {}", stderr_of(&out));
    }
    let help = finish(sabul(&["send", "--help"]).spawn().unwrap(), 10);
    assert!(String::from_utf8_lossy(&help.stdout).contains("sabul recv --connect"));
}

#[test]
fn local_io_errors_exit_4_before_any_connection() {
    let dir = tmpdir("sabul-io");
    let missing = dir.join("missing");
    let out = finish(sabul(&["send", "--listen", "127.0.0.1:0", "--input", s(&missing)]).spawn().unwrap(), 10);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("cannot read input"), "{}", stderr_of(&out));
    let out = finish(sabul(&["send", "--listen", "127.0.0.1:0", "--input", s(&dir)]).spawn().unwrap(), 10);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    let unwritable = dir.join("no/such/dir/out");
    let out = finish(sabul(&["recv", "--connect", "127.0.0.1:1", "--output", s(&unwritable)]).spawn().unwrap(), 10);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("cannot write output"), "{}", stderr_of(&out));
    // An address that is not this host's cannot be listened on.
    let out = finish(sabul(&["send", "--listen", "192.0.2.1:9", "--input", "/dev/null"]).spawn().unwrap(), 10);
    assert_eq!(out.status.code(), Some(4), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("cannot listen on 192.0.2.1:9"), "{}", stderr_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connecting_to_nothing_fails_with_setup_status_after_retrying() {
    let addr = format!("127.0.0.1:{}", free_port());
    let out = finish(sabul(&["recv", "--connect", &addr, "--output", "/dev/null"]).spawn().unwrap(), 30);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains(&format!("cannot connect to {addr}")), "{}", stderr_of(&out));
}

#[test]
fn a_receiver_that_dies_mid_transfer_breaks_the_sender_with_status_5() {
    let (sender, addr) = listening_sender(&["--input", "/dev/zero", "--rate", "100"]);
    let mut receiver = sabul(&["recv", "--connect", &addr, "--output", "/dev/null"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    receiver.kill().unwrap();
    let _ = receiver.wait();
    let out = finish(sender, 30);
    assert_eq!(out.status.code(), Some(5), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("the control connection"), "{}", stderr_of(&out));
}

#[test]
fn a_sender_that_dies_mid_transfer_leaves_a_prefix_and_status_5() {
    let dir = tmpdir("sabul-sender-dies");
    let output = dir.join("out");
    let mut sender = {
        let addr = format!("127.0.0.1:{}", free_port());
        let mut c = sabul(&["send", "--listen", &addr, "--input", "-", "--rate", "100"]);
        c.stdin(Stdio::piped());
        (c.spawn().unwrap(), addr)
    };
    let mut stdin = sender.0.stdin.take().unwrap();
    let data = pattern(8 << 20, 11);
    let feed = data.clone();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&feed); // the pipe breaks when the sender is killed
        std::thread::sleep(Duration::from_secs(30));
    });
    let receiver = sabul(&["recv", "--connect", &sender.1, "--output", s(&output)]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Stopped first, the sender leaves the receiver's next SYNs unread, so the kernel's close
    // of the killed process is a reset, an abort (SABUL.md §10.2). Killed while it has read
    // everything, its close would be a FIN: "no more data" to the receiver, which cannot tell
    // a dead sender from a finished one (the protocol carries no length; §10.2).
    let pid = sender.0.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(100));
    sender.0.kill().unwrap();
    let _ = sender.0.wait();
    let out = finish(receiver, 30);
    assert_eq!(out.status.code(), Some(5), "{}", stderr_of(&out));
    let got = std::fs::read(&output).unwrap();
    assert!(got.len() < data.len() && got[..] == data[..got.len()], "{} bytes, not a prefix", got.len());
    assert!(stderr_of(&out).contains("bytes written"), "{}", stderr_of(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
