//! Where the commands' output goes: stdout in one piece (a failed write reported, a
//! reader that went away ending the command quietly), notes for a person on stderr, and
//! the check that an output file is not the pool being read.

use super::CliError;
use std::io::Write;
use std::path::Path;

/// A line `nvs: msg` for a person on stderr (stdout keeps only what scripts read). A
/// stderr that cannot take it (closed, or a pipe whose reader left) is not reported —
/// there is nowhere left to — and never a panic (`eprintln!` panics there).
pub fn eprintln_note(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "nvs: {msg}");
}

/// Whether `a` and `b` name the same file (device and inode, links followed).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// `s` to stdout in one piece (see [`stdout_bytes`]).
pub fn stdout(s: &str) -> Result<(), CliError> {
    stdout_bytes(s.as_bytes())
}

/// `b` to stdout in one piece, flushed; a failed write is an error, a reader that went
/// away ends the process quietly (exit 0).
pub fn stdout_bytes(b: &[u8]) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(b).and_then(|()| out.flush()) {
        // The reader went away (`nvs get P n | head -c 10`): end quietly, as Unix tools do.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.map_err(|e| CliError::io("cannot write stdout", e)),
    }
}
