//! Progress bars on stderr for long work (`salvage`, `check`, `put` of a big input),
//! drawn only when stderr is a terminal: otherwise (a pipe, a file, a test) nothing at
//! all is written, so stderr keeps only the one-line errors scripts read.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

fn on() -> bool {
    std::io::stderr().is_terminal()
}

/// A bar of `len` steps labelled `what` (hidden unless stderr is a terminal).
pub fn bar(len: u64, what: &str) -> ProgressBar {
    styled(len, what, "{msg} [{bar:40}] {pos}/{len} ({eta} left)")
}

/// A bar of `len` bytes labelled `what` (hidden unless stderr is a terminal).
pub fn bytes(len: u64, what: &str) -> ProgressBar {
    styled(len, what, "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)")
}

/// A spinner with the time elapsed, for work of unknown length (hidden likewise).
pub fn spinner(what: &str) -> ProgressBar {
    if !on() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        pb.set_style(style);
    }
    pb.set_message(what.to_string());
    pb.tick(); // drawn now, not only after the first 100 ms
    pb.enable_steady_tick(Duration::from_millis(100));
    pb
}

fn styled(len: u64, what: &str, template: &str) -> ProgressBar {
    if !on() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb.set_message(what.to_string());
    pb
}
