//! Failures with their exit status (`docs/cli.md`: 0 success, 2 usage error or bad address,
//! 3 connection setup failed, 4 local I/O, 5 connection broken during the transfer), and the
//! input and output both tools read and write.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};

/// Exit status: a usage error or a bad address.
pub const USAGE: u8 = 2;
/// Exit status: the connection could not be set up.
pub const SETUP: u8 = 3;
/// Exit status: reading the input or writing the output failed.
pub const LOCAL_IO: u8 = 4;
/// Exit status: the connection broke during the transfer.
pub const BROKEN: u8 = 5;

/// A failure with its exit status; the message says what went wrong and what to do.
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub code: u8,
    /// What went wrong and what to do, for standard error.
    pub msg: String,
}

/// What a tool's run ends with: success, or a failure with its exit status.
pub type Outcome = Result<(), Failure>;

/// A usage error (exit status 2) saying `msg`.
pub fn usage(msg: impl Into<String>) -> Failure {
    Failure { code: USAGE, msg: msg.into() }
}

/// The environment the family's I/O engine reads (docs/cli.md, "Environment"), checked before
/// anything starts: a bad value is a usage error.
pub fn check_env() -> Outcome {
    udt::driver::ArrivalStamp::from_env().map_err(|e| usage(e.to_string()))?;
    udt::driver::Pacing::from_env().map(|_| ()).map_err(|e| usage(e.to_string()))
}

/// A local I/O failure (exit status 4) saying `msg`.
pub fn local_io(msg: impl Into<String>) -> Failure {
    Failure { code: LOCAL_IO, msg: msg.into() }
}

/// Prints `name: message` for a failure and turns the outcome into the exit status.
pub fn report(name: &str, result: Outcome) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("{name}: {}", f.msg);
            std::process::ExitCode::from(f.code)
        }
    }
}

/// Reads until `buf` is full or the input ends; returns the count.
pub fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A duplicate of standard input or output as a plain file: no line buffering, no locking.
/// If it is a pipe, the pipe is enlarged so that each read or write moves more than the
/// default 64 KiB (fewer context switches with the process at the other end).
fn std_file(fd: impl AsFd) -> io::Result<File> {
    let f = File::from(fd.as_fd().try_clone_to_owned()?);
    // SAFETY: fcntl on an fd we own; failure (not a pipe, over pipe-max-size) is harmless.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    Ok(f)
}

/// `--input PATH`: the file, or standard input for `-`. Opened before any connection, so that
/// a bad path fails at once.
pub fn open_input(path: &str) -> Result<File, Failure> {
    if path == "-" {
        return std_file(io::stdin()).map_err(|e| local_io(format!("cannot read standard input: {e}")));
    }
    let f = File::open(path)
        .map_err(|e| local_io(format!("cannot read input {path:?}: {e} (check the path and permissions)")))?;
    if f.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(local_io(format!("cannot read input {path:?}: it is a directory")));
    }
    Ok(f)
}

/// `--output PATH`: the file, created or truncated, or standard output for `-`. Opened before
/// any connection, so that an unwritable path fails at once.
pub fn open_output(path: &str) -> Result<Box<dyn Write + Send>, Failure> {
    if path == "-" {
        return Ok(Box::new(
            std_file(io::stdout()).map_err(|e| local_io(format!("cannot write standard output: {e}")))?,
        ));
    }
    Ok(Box::new(File::create(path).map_err(|e| {
        local_io(format!("cannot write output {path:?}: {e} (check that the directory exists and is writable)"))
    })?))
}
