//! The C tests (tests/c/*.c): compiled with the system C compiler under AddressSanitizer
//! and UndefinedBehaviorSanitizer against libnvs.a, then run (leaks are errors too). `cargo test` builds only
//! the rlib of this crate, so the test builds the static library itself, in a target
//! directory of its own (`target/c-tests`: no wait on the lock of the one running).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// libnvs.a of the code under test, built once per test run.
fn static_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        // target/<profile>/deps/<test> -> target/c-tests
        let target = exe.ancestors().nth(3).expect("target dir").join("c-tests");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "nvs-c", "--lib", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .env("CARGO_TARGET_DIR", &target)
            .status()
            .expect("run cargo build");
        assert!(status.success(), "cargo build -p nvs-c failed");
        target.join("debug/libnvs.a")
    })
}

fn build(source: &str, out: &Path) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    compile(&cc, &["-std=c11", "-D_GNU_SOURCE"], source, out);
}

/// `source` built by the compiler `cc` with `lang` flags, the warnings as errors, sanitizers on.
fn compile(cc: &str, lang: &[&str], source: &str, out: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = static_lib();
    let status = Command::new(cc)
        .args(lang)
        .args(["-Wall", "-Wextra", "-Werror", "-g", "-O1"])
        .args(["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"])
        .arg("-I")
        .arg(dir.join("include"))
        .arg(dir.join("tests/c").join(source))
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(status.success(), "{cc} failed on {source}");
}

/// Run a C test; returns what it printed (stdout, then stderr).
fn run(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).env("ASAN_OPTIONS", "detect_leaks=1").output().expect("run the C test");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} {args:?} failed ({}):\n{text}", bin.display(), out.status);
    println!("{text}");
    text
}

/// Build `source` and run it with a scratch directory of its own as its one argument;
/// returns what it printed.
fn run_in_scratch(source: &str) -> String {
    run_in_scratch_with(source, &[])
}

#[test]
fn c_api() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let bin = tmp.path().join("api");
    build("api.c", &bin);
    let scratch = tmp.path().join("pools");
    std::fs::create_dir(&scratch).expect("mkdir");
    run(&bin, &[scratch.to_str().expect("utf-8 path")]);
}

#[test]
fn c_nvstream_wrapper() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let bin = tmp.path().join("nvstream");
    build("nvstream.c", &bin);
    for mode in ["full", "delta"] {
        let scratch = tmp.path().join(mode);
        std::fs::create_dir(&scratch).expect("mkdir");
        let text = run(&bin, &[scratch.to_str().expect("utf-8 path"), mode]);
        let early = "nvs: nvs_snapshot: nvs_init was not called";
        assert_eq!(text.lines().filter(|l| l.starts_with(early)).count(), 3, "printed at 1, 2, 4 of 5:\n{text}");
        assert!(text.contains(&format!("{early} (4 times in a row: a repeated failure")), "{text}");
    }
}

/// NVS_DELTA=1 on a kernel without userfaultfd write-protect (the program refuses the
/// system call): full snapshots, said once, and fread into the objects works.
#[test]
fn c_nvstream_delta_without_uffd() {
    let text = run_in_scratch("noufd.c");
    assert_eq!(text.matches("store every object in full").count(), 1, "said once:\n{text}");
    assert!(text.contains("userfaultfd"), "names what is missing:\n{text}");
}

/// nvstream.h from C++ under -pedantic-errors: a string literal names an object.
#[test]
fn cpp_nvstream_header() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let bin = tmp.path().join("cpp");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    compile(&cxx, &["-std=c++11", "-pedantic-errors"], "cpp.cc", &bin);
    run(&bin, &[tmp.path().to_str().expect("utf-8 path")]);
}

/// One rank started twice at once: the loser is told the pool is locked.
#[test]
fn c_nvstream_rank_started_twice() {
    run_in_scratch("twice.c");
}

#[test]
fn c_writer_processes_per_lane() {
    run_in_scratch("ranks.c");
}

/// A failure printed to a stderr that cannot take it returns its status (no abort).
#[test]
fn c_nvstream_error_to_a_full_stderr() {
    let text = run_in_scratch("fullerr.c");
    assert!(text.contains("fullerr: ok"), "{text}");
}

/// [`run_in_scratch`] with `args` after the scratch directory.
fn run_in_scratch_with(source: &str, args: &[&str]) -> String {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let bin = tmp.path().join(source.trim_end_matches(".c"));
    build(source, &bin);
    let mut all = vec![tmp.path().to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    run(&bin, &all)
}

/// A fork child of a lane writer refreshing in a loop beside a second writer process:
/// the pool stays whole, every version byte-exact.
#[test]
fn c_fork_child_refreshes_beside_writer_processes() {
    let text = run_in_scratch_with("fork.c", &["refresh"]);
    assert!(text.contains("all read back"), "{text}");
}

/// A fork child's close and close_detached: NVS_OK, the handle freed once, the parent's
/// streams and locks untouched.
#[test]
fn c_fork_child_closes() {
    let text = run_in_scratch_with("fork.c", &["close"]);
    assert!(text.contains("change nothing"), "{text}");
}

/// NVS_DELTA (uffd-wp where the kernel has it, and mprotect): a fork child's refused
/// snapshot leaves the parent's dirty pages for the parent's next snapshot.
#[test]
fn c_fork_child_snapshot_keeps_parents_deltas() {
    for mode in ["1", "mprotect"] {
        let text = run_in_scratch_with("fork.c", &["delta", mode]);
        assert!(text.contains("leaves the parent's next one whole"), "{text}");
    }
}

/// A fork child's threads (of a process that called nvs, with no call running at the
/// fork) alloc and free at once: none refused.
#[test]
fn c_fork_child_threads_are_not_refused() {
    let text = run_in_scratch_with("fork.c", &["threads"]);
    assert!(text.contains("none refused"), "{text}");
}

/// A signal handler calling nvs inside an nvs call of its thread (put, get, snapshot):
/// NVS_E_BUSY at once, the re-entry named; it used to hang.
#[test]
fn c_call_from_a_signal_handler_is_refused_not_hung() {
    let text = run_in_scratch("signal.c");
    assert!(text.contains("none hung"), "{text}");
}

/// NVStream's C++ Store API (nvs/store.h) as its microbenchmarks use it: seq_writer then
/// seq_reader, each a process of its own; a rank instrumented with nvstream.h read back by
/// pseq_reader through the Store. C++11, warnings as errors, sanitizers on.
#[test]
fn cpp_nvstream_store_api() {
    let tmp = tempfile::tempdir().expect("scratch dir");
    let bin = tmp.path().join("store");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    compile(&cxx, &["-std=c++11"], "store.cc", &bin);
    let dir = tmp.path().to_str().expect("utf-8 path");
    let mut text = String::new();
    for step in ["seq_writer", "seq_reader", "wrapper", "pseq_reader"] {
        text += &run(&bin, &[dir, step]);
    }
    assert!(text.contains("every version exact") && text.contains("4 versions of 2 objects exact"), "{text}");
}

/// nvs_free after nvs_finalize (miniAMR frees every object so): silent, no error.
#[test]
fn c_nvstream_free_after_finalize_is_silent() {
    let text = run_in_scratch("freeafter.c");
    assert!(text.contains("silent"), "{text}");
}

/// Fork children of a process whose other thread is inside a put: a get refused at once
/// (or the bytes), never a hang; the close always NVS_OK.
#[test]
fn c_fork_child_beside_a_busy_thread() {
    let text = run_in_scratch_with("fork.c", &["thread"]);
    assert!(text.contains("none hung"), "{text}");
}
