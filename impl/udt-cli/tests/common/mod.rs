//! What the command-line tests share: ports, scratch directories and a time guard on every
//! child process (it kills a hung child and fails the test; no test asserts on durations).

#![allow(dead_code)] // each test binary uses its own subset

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub(crate) fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub(crate) fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("udt-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Waits for `child` while collecting its output, killing it after `secs`.
pub(crate) fn finish(child: Child, secs: u64) -> Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output().unwrap());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => out,
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let out = rx.recv().unwrap();
            panic!("the command hung; stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

pub(crate) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `bin` with `args`, no stdin, stdout and stderr captured.
pub(crate) fn command(bin: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

pub(crate) fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A `bin send` (sabul, frtp) listening on a fresh loopback port; returns it with the address.
pub(crate) fn listening_sender(bin: &str, args: &[&str]) -> (Child, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut a = vec!["send", "--listen", &addr];
    a.extend_from_slice(args);
    (command(bin, &a).spawn().unwrap(), addr)
}
