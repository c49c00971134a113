//! Running the `nvs` binary from the CLI tests: its output, exit code, stdout, stderr.
#![allow(dead_code)] // each test file uses its own part of it

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// `nvs ARGS` with an empty stdin.
pub fn nvs(args: &[&str]) -> Output {
    nvs_stdin(args, b"")
}

/// `nvs ARGS` with `stdin` as its input.
pub fn nvs_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run nvs");
    // A command refused before it reads its input (a locked pool: `put` opens the pool
    // first) may exit before taking it all: a broken pipe is fine.
    match child.stdin.take().expect("stdin").write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.expect("write stdin"),
    }
    child.wait_with_output().expect("wait nvs")
}

/// The exit code (a signal death fails the test).
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited, not killed by a signal")
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
