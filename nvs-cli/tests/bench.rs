//! `nvs bench`: a short run writes the table, the JSON rows and the plot, and leaves no
//! files behind; bad options are usage errors.

use std::process::Command;

fn nvs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nvs")).args(args).output().expect("run nvs")
}

/// A one-trial quick run of two rows: every (size, threads) row is in the JSON with the
/// required fields, the SVG is an SVG, and the scratch directory is empty afterwards.
#[test]
fn quick_run_writes_table_json_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let sync = tempfile::tempdir().unwrap();
    let json = dir.path().join("rows.json");
    let svg = dir.path().join("plot.svg");
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let o = nvs(&[
        "bench",
        "--quick",
        "--trials",
        "1",
        "--only",
        "memcpy_into_mapping,nvs_put",
        "--dir",
        scratch.to_str().unwrap(),
        "--sync-dir",
        sync.path().to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stderr: {}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("nvs put (1 object per commit)") && out.contains("targets"), "{out}");
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.trim_start().starts_with('[') && j.trim_end().ends_with(']'));
    for field in ["\"method\"", "\"size_bytes\"", "\"threads\"", "\"gbps\"", "\"ns_per_op\"", "\"ratio_to_ceiling\""] {
        // 4 sizes x 2 thread counts x (the 2 rows asked for + the plain and batched
        // ceilings at 2 store widths, always run).
        assert_eq!(j.matches(field).count(), 4 * 2 * 6, "{field} in {j}");
    }
    // Ratios are over the faster ceiling of each family: a ceiling row at 1 in each cell
    // of the plain family (8) and of the batched one where it fits this small region
    // (1 KiB and 32 KiB: 4).
    assert!(j.matches("\"ratio_to_ceiling\": 1.000000").count() >= 4 * 2 + 2 * 2, "{j}");
    assert!(j.contains("\"method\": \"nvs_put\", \"description\": \"nvs put (1 object per commit)\", \"size_bytes\": 32768, \"threads\": 2"));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>") && s.contains("polyline"));
    assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0, "bench left files behind");
    assert_eq!(std::fs::read_dir(sync.path()).unwrap().count(), 0, "bench left files behind");
}

/// An unknown row name is a usage error (exit 2), before any file is made.
#[test]
fn unknown_row_is_a_usage_error() {
    let o = nvs(&["bench", "--quick", "--only", "nvs_teleport"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("nvs: unknown row 'nvs_teleport'"), "{err}");
}

/// `nvs ARGS` started with `setup` run in the child before it executes.
fn spawn(args: &[&str], setup: fn() -> std::io::Result<()>) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(env!("CARGO_BIN_EXE_nvs"));
    c.args(args).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
    // SAFETY: `setup` only makes async-signal-safe system calls (setrlimit, signal).
    unsafe { c.pre_exec(setup) };
    c.spawn().expect("run nvs")
}

/// The names in `dir`.
fn names(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

/// Wait up to `secs` for `child` to end.
fn wait_for(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Wait up to `secs` for `ready` to hold.
fn wait_until(secs: u64, ready: impl Fn() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// Files larger than 1 MiB cannot be made (as on a tiny tmpfs): the bench fails with
/// its one-line error, exit 2, and leaves none of the files it began behind (the region
/// file it could not size was left, 160 MiB of it).
#[test]
fn a_file_that_cannot_be_allocated_leaves_nothing_behind() {
    fn small_files() -> std::io::Result<()> {
        let limit = libc::rlimit { rlim_cur: 1 << 20, rlim_max: 1 << 20 };
        // SAFETY: plain system calls with a valid struct; SIGXFSZ ignored, a write past
        // the limit fails with EFBIG instead of killing the process.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
    for only in [None, Some("recovery")] {
        let dir = tempfile::tempdir().unwrap();
        let sync = tempfile::tempdir().unwrap();
        let mut args = vec!["bench", "--quick", "--dir", dir.path().to_str().unwrap()];
        args.extend(["--sync-dir", sync.path().to_str().unwrap()]);
        args.extend(only.iter().flat_map(|o| ["--only", o]));
        let o = spawn(&args, small_files).wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{only:?}: {err}");
        assert!(err.starts_with("nvs: cannot ") && err.contains("nvs-bench-"), "{only:?}: {err}");
        assert_eq!(names(dir.path()), Vec::<String>::new(), "{only:?}: bench left files behind");
        assert_eq!(names(sync.path()), Vec::<String>::new(), "{only:?}: bench left files behind");
    }
}

/// SIGINT's default disposition in the child (a test run in the background would
/// otherwise pass its ignored SIGINT on).
fn default_sigint() -> std::io::Result<()> {
    // SAFETY: plain system call.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    Ok(())
}

/// SIGINT (Ctrl-C) once the bench has begun making files: it ends by that signal
/// within seconds, and every file it made is gone (they were left: ~830 MiB in
/// /dev/shm by default).
#[test]
fn sigint_removes_every_file() {
    use std::os::unix::process::ExitStatusExt;
    for bench in [&["bench", "--quick"][..], &["bench-delta", "--quick"]] {
        let dir = tempfile::tempdir().unwrap();
        let sync = tempfile::tempdir().unwrap();
        let mut args = bench.to_vec();
        args.extend(["--dir", dir.path().to_str().unwrap()]);
        if bench[0] == "bench" {
            args.extend(["--sync-dir", sync.path().to_str().unwrap()]);
        }
        let mut child = spawn(&args, default_sigint);
        let began = wait_until(60, || !names(dir.path()).is_empty());
        // SAFETY: plain system call on our own child (not yet reaped).
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let status = wait_for(&mut child, 20);
        assert!(began, "{bench:?}: no file appeared");
        let status = status.unwrap_or_else(|| panic!("{bench:?}: still running 20 s after SIGINT"));
        assert_eq!(status.signal(), Some(libc::SIGINT), "{bench:?}: {status}");
        assert_eq!(names(dir.path()), Vec::<String>::new(), "{bench:?}: files left behind");
        assert_eq!(names(sync.path()), Vec::<String>::new(), "{bench:?}: files left behind");
    }
}

/// The processes whose command line mentions `what`.
fn processes_with(what: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(what) && c.contains("bench-worker") {
                found.push(format!("{}: {c}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// SIGTERM to the bench alone while its two-process row's workers run: the workers are
/// killed too, and the files are gone.
#[test]
fn sigterm_kills_the_workers_and_removes_every_file() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let sync = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = ["bench", "--quick", "--only", "nvs_put_2proc", "--dir", d, "--sync-dir", sync.path().to_str().unwrap()];
    let mut child = spawn(&args, default_sigint);
    let began = wait_until(120, || !processes_with(d).is_empty());
    // SAFETY: plain system call on our own child (not yet reaped).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = wait_for(&mut child, 20);
    assert!(began, "no worker appeared");
    let status = status.unwrap_or_else(|| panic!("still running 20 s after SIGTERM"));
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status}");
    assert!(wait_until(10, || processes_with(d).is_empty()), "workers left running: {:?}", processes_with(d));
    assert_eq!(names(dir.path()), Vec::<String>::new(), "files left behind");
    assert_eq!(names(sync.path()), Vec::<String>::new(), "files left behind");
}
