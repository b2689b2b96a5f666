//! What the command-line tests share: ports, scratch directories and a time guard on every
//! child process (it kills a hung child and fails the test; no test asserts on durations).

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
    guard(child, secs).unwrap_or_else(|out| panic!("the command hung; stderr: {}", stderr_of(&out)))
}

/// Waits for `child` while collecting its output: `Err` with what it wrote if it had to be
/// killed after `secs`.
fn guard(child: Child, secs: u64) -> Result<Output, Output> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output().unwrap());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(out) => Ok(out),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            Err(rx.recv().unwrap())
        }
    }
}

/// A child whose stderr is read as it comes, so that a test can wait for a line of it before
/// going on; [`Watched::finish`] is [`finish`] with the whole stderr in the output.
pub(crate) struct Watched {
    child: Child,
    lines: Arc<(Mutex<Vec<String>>, Condvar)>,
    reader: JoinHandle<()>,
}

impl Watched {
    /// Takes over `child`, whose stderr must be piped.
    pub(crate) fn new(mut child: Child) -> Self {
        let stderr = child.stderr.take().expect("the child's stderr is piped");
        let lines = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let seen = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                seen.0.lock().unwrap().push(line);
                seen.1.notify_all();
            }
        });
        Watched { child, lines, reader }
    }

    /// Waits up to `secs` for the child to write `line` (a whole line) on stderr; if it does
    /// not, kills it and fails the test.
    pub(crate) fn wait_for_line(&mut self, line: &str, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let (lines, cond) = &*self.lines;
        let mut seen = lines.lock().unwrap();
        while !seen.iter().any(|l| l == line) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let text = seen.join("\n");
                drop(seen);
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("no line `{line}` from the command in {secs} s; stderr: {text}");
            }
            seen = cond.wait_timeout(seen, left).unwrap().0;
        }
    }

    /// [`finish`]: waits for the child, killing it after `secs`; its stderr is all it wrote.
    pub(crate) fn finish(self, secs: u64) -> Output {
        let out = guard(self.child, secs);
        self.reader.join().unwrap();
        let mut text = self.lines.0.lock().unwrap().join("\n");
        text.push('\n');
        match out {
            Ok(mut out) => {
                out.stderr = text.into_bytes();
                out
            }
            Err(_) => panic!("the command hung; stderr: {text}"),
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
