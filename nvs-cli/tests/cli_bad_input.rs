//! The `nvs` tool on bad input (promise 6 of the README, for the tool): a file that is not a
//! pool, an empty file, a directory, a missing path, a truncated pool, a pool of a newer
//! format version, a read-only file opened for writing, a pool locked by a writer, a
//! FIFO, a character device, a damaged segment header (never a silent loss). Every
//! command answers with one line on stderr naming the problem and the documented exit
//! code (1: the bytes are bad / not a pool; 2: usage, I/O, lock or other refusal), never
//! panics or hangs, and modifies nothing.

use nvs_core::internals::format::{FORMAT_VERSION, SUPERBLOCK_SEED};
use nvs_core::internals::hash::hash64;
use nvs_core::Object;
use nvs_std::{Access, FilePool};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `nvs` with `args` (stdin: a few bytes), killing it after 20 s: a hang is a failure.
fn nvs(args: &[&str]) -> Output {
    nvs_as(args, None)
}

fn nvs_as(args: &[&str], uid: Option<u32>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvs"));
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(uid);
    }
    let mut child = cmd.spawn().expect("run nvs");
    // A command that does not read stdin may exit first: a broken pipe is fine.
    let _ = child.stdin.take().expect("stdin").write_all(b"input bytes");
    let start = Instant::now();
    while child.try_wait().expect("poll nvs").is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nvs {args:?} hung (killed after 20 s)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collect nvs output")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("nvs-bad-input").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

/// One line `nvs: ...` on stderr containing `want`, exit `code`, nothing on stdout.
fn assert_refused(o: &Output, code: i32, want: &str, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{what}: exit status (stderr: {err})");
    assert!(err.starts_with("nvs: ") && err.ends_with('\n'), "{what}: {err:?}");
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err:?}");
    assert!(err.contains(want), "{what}: expected {want:?} in {err:?}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(o.stdout.is_empty(), "{what}: printed {:?}", String::from_utf8_lossy(&o.stdout));
}

/// Every command that opens an existing pool, writers and readers.
fn commands(p: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["put", p, "name"],
        vec!["put", p, "name", "--lane", "1", "--version", "9"],
        vec!["get", p, "name"],
        vec!["ls", p],
        vec!["info", p],
        vec!["info", p, "--stats", "--json"],
        vec!["check", p],
        vec!["follow", p, "--timeout", "5"],
    ]
}

/// Run every command on `path`, each refused as `code` + `want` (`want_write` for the
/// writing commands), and the file's bytes unchanged.
fn refused_everywhere(path: &Path, code: i32, want: &str, want_write: &str) {
    let before = std::fs::read(path).ok();
    for args in commands(s(path)) {
        let mut o = nvs(&args);
        let w = if args[0] == "put" { want_write } else { want };
        if args[0] == "check" {
            // check lists the damaged places its raw walk finds, on stdout, and only those.
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.lines().all(|l| l.starts_with("damaged: ")), "{args:?}: printed {out:?}");
            o.stdout.clear();
        }
        assert_refused(&o, code, w, &format!("{args:?}"));
        assert_eq!(std::fs::read(path).ok(), before, "{args:?} modified {}", path.display());
    }
}

/// A real pool with a few objects, 1 MiB.
fn pool(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let o = nvs(&["create", s(&p), "--size", "1M", "--segment-size", "64K"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let mut w = FilePool::open(&p, Access::ReadWrite).expect("open");
    w.put(0, Object::new(b"name", b"first")).expect("put");
    w.put(1, Object::new(b"name", b"second").version(5)).expect("put");
    p
}

#[test]
fn not_a_pool() {
    let dir = tmp();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect::<Vec<_>>()).unwrap();
    refused_everywhere(&junk, 1, "not an nvs pool", "not an nvs pool");
    let small = dir.path().join("small");
    std::fs::write(&small, b"NVSPOOL").unwrap();
    refused_everywhere(&small, 1, "not an nvs pool", "not an nvs pool");
}

/// A sparse file that is not a pool is refused by the writing commands as it is: none of
/// them fills its holes first (a writer reserves a pool's blocks, not a stranger's).
#[test]
fn a_sparse_file_that_is_not_a_pool_stays_sparse() {
    use std::os::unix::fs::MetadataExt;
    let dir = tmp();
    let sparse = dir.path().join("sparse");
    std::fs::File::create(&sparse).unwrap().set_len(256 << 20).unwrap();
    let blocks = || std::fs::metadata(&sparse).unwrap().blocks();
    if blocks() * 512 >= 256 << 20 {
        return; // a file system without holes: nothing to show
    }
    for args in [vec!["put", s(&sparse), "name"], vec!["close", s(&sparse)], vec!["reclaim", s(&sparse), "--keep", "1"]]
    {
        assert_refused(&nvs(&args), 1, "not an nvs pool", &format!("{args:?}"));
        assert!(blocks() * 512 < 1 << 20, "{args:?} allocated {} KiB of the file", blocks() / 2);
    }
}

#[test]
fn empty_file() {
    let dir = tmp();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    refused_everywhere(&empty, 1, "not an nvs pool", "not an nvs pool");
}

#[test]
fn directory() {
    let dir = tmp();
    let d = dir.path().join("a-directory");
    std::fs::create_dir(&d).unwrap();
    refused_everywhere(&d, 2, "not a regular file", "Is a directory");
    assert_refused(&nvs(&["create", s(&d), "--size", "1M"]), 2, "already exists", "create on a directory");
}

#[test]
fn missing_path() {
    let dir = tmp();
    let missing = dir.path().join("missing.pool");
    refused_everywhere(&missing, 2, "No such file or directory", "No such file or directory");
    assert!(!missing.exists(), "a command created {}", missing.display());
    let deep = dir.path().join("no-such-dir").join("p.pool");
    assert_refused(&nvs(&["create", s(&deep), "--size", "1M"]), 2, "No such file or directory", "create");
}

#[test]
fn truncated_pool() {
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    let bytes = std::fs::read(&p).unwrap();
    // The pool ends at pool_len (FORMAT.md: bytes 24..32); the file may be longer.
    let pool_len = u64::from_le_bytes(bytes[24..32].try_into().unwrap()) as usize;
    for cut in [pool_len - 1, pool_len - 65536, 8192, 4096, 100] {
        let t = dir.path().join(format!("cut-{cut}"));
        std::fs::write(&t, &bytes[..cut]).unwrap();
        let want = if cut < 64 { "not an nvs pool" } else { "truncated: the file is shorter than the pool" };
        refused_everywhere(&t, 1, want, want);
    }
}

#[test]
fn newer_format_version() {
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    let mut bytes = std::fs::read(&p).unwrap();
    // FORMAT.md: format_version at bytes 8..12, the checksum of bytes 0..56 at 56..64.
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let sum = hash64(SUPERBLOCK_SEED, &bytes[..56]);
    bytes[56..64].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let want = format!("pool format version {} is not supported", FORMAT_VERSION + 1);
    refused_everywhere(&p, 2, &want, &want);
}

#[test]
fn damaged_superblock() {
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[30] ^= 0x40;
    std::fs::write(&p, &bytes).unwrap();
    refused_everywhere(&p, 1, "superblock checksum mismatch", "superblock checksum mismatch");
}

/// A file without write permission: writers are refused (as any user: run as root, the
/// refused command runs as `nobody`, since root ignores permission bits); readers work.
#[test]
fn read_only_file_opened_for_writing() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&p).unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let uid = root.then_some(65534);
    if root && !nobody_can_reach(&p) {
        eprintln!("skipped: running as root and user nobody cannot reach {}", p.display());
        return;
    }
    for args in [vec!["put", s(&p), "name"], vec!["put", s(&p), "other", "--version", "3"]] {
        let o = nvs_as(&args, uid);
        assert_refused(&o, 2, "Permission denied", &format!("{args:?}"));
        assert!(String::from_utf8_lossy(&o.stderr).contains(s(&p)), "names the path");
    }
    assert_eq!(std::fs::read(&p).unwrap(), before, "a refused writer modified the pool");
    let o = nvs_as(&["get", s(&p), "name", "--version", "1"], uid);
    assert_eq!((o.status.code(), &o.stdout[..]), (Some(0), &b"first"[..]), "a reader of a read-only file");
    assert_eq!(nvs_as(&["check", s(&p)], uid).status.code(), Some(0));
    assert_eq!(std::fs::read(&p).unwrap(), before, "a reader modified the pool");
}

/// Whether user `nobody` can read `p` (every directory above it searchable).
fn nobody_can_reach(p: &Path) -> bool {
    let o = Command::new(env!("CARGO_BIN_EXE_nvs")).arg("--version").output();
    if o.is_err() {
        return false;
    }
    use std::os::unix::process::CommandExt;
    let r = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["ls", s(p)])
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    matches!(r, Ok(st) if st.code() == Some(0))
}

#[test]
fn locked_by_a_writer() {
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    // `pool` closed its writer, but a child another test spawned at that moment may
    // still hold a copy of the descriptor (and so the writer lock) until its exec closes it:
    // retry briefly.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let writer = loop {
        match FilePool::open(&p, Access::ReadWrite) {
            Err(nvs_std::Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5))
            }
            r => break r.expect("hold the writer lock"),
        }
    };
    let before = std::fs::read(&p).unwrap();
    for args in [vec!["put", s(&p), "name"], vec!["put", s(&p), "new", "--lane", "2"]] {
        let o = nvs(&args);
        assert_refused(&o, 2, "locked by another writer", &format!("{args:?}"));
    }
    assert_eq!(std::fs::read(&p).unwrap(), before, "a refused writer modified the pool");
    // Readers take no lock.
    let o = nvs(&["get", s(&p), "name"]);
    assert_eq!((o.status.code(), &o.stdout[..]), (Some(0), &b"second"[..]));
    drop(writer);
}

/// A FIFO is not a pool: refused at once, never waited on (opening one for reading
/// blocks until a writer appears).
#[test]
fn fifo_is_refused_without_hanging() {
    let dir = tmp();
    let f = dir.path().join("fifo");
    let c = std::ffi::CString::new(s(&f)).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for args in commands(s(&f)) {
        assert_refused(&nvs(&args), 2, "not a regular file", &format!("{args:?}"));
    }
    assert_refused(&nvs(&["create", s(&f), "--size", "1M"]), 2, "already exists", "create on a fifo");
}

/// `put POOL NAME FIFO` waits for the FIFO's writer without holding the pool: another
/// put goes on meanwhile, and the waiting one commits once the FIFO is written.
#[test]
fn a_put_waiting_on_a_fifo_input_holds_no_lock() {
    let dir = tmp();
    let p = pool(dir.path(), "p.pool");
    let f = dir.path().join("input");
    let c = std::ffi::CString::new(s(&f)).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let waiting = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", s(&p), "late", s(&f)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn put");
    std::thread::sleep(Duration::from_millis(200));
    let meanwhile = nvs(&["put", s(&p), "meanwhile"]);
    // The FIFO is written before any assertion, so the waiting put never outlives the test.
    std::fs::write(&f, b"at last").unwrap();
    let o = waiting.wait_with_output().unwrap();
    assert_eq!(meanwhile.status.code(), Some(0), "{}", String::from_utf8_lossy(&meanwhile.stderr));
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let got = nvs(&["get", s(&p), "late"]);
    assert_eq!(got.stdout, b"at last");
}

#[test]
fn character_device_is_refused() {
    refused_everywhere(Path::new("/dev/null"), 2, "not a regular file", "not a regular file");
    assert_refused(&nvs(&["create", "/dev/null", "--size", "1M"]), 2, "already exists", "create on /dev/null");
}

/// `create --size 0` (and any size that cannot hold a pool) is a usage refusal, exit 2,
/// and leaves no file behind (it used to make an empty one and call it "not an nvs pool",
/// exit 1).
#[test]
fn create_with_a_size_too_small_is_refused_before_anything_is_made() {
    let dir = tmp();
    for size in ["0", "4096", "8000"] {
        let p = dir.path().join(format!("small-{size}.pool"));
        let o = nvs(&["create", s(&p), "--size", size]);
        assert_refused(&o, 2, "cannot lay out a pool", &format!("create --size {size}"));
        assert!(!p.exists(), "create --size {size} left a file");
    }
}

/// `follow --timeout` takes a number of seconds a duration can hold; anything else is a
/// usage error (exit 2), never a panic ("cannot convert float seconds to Duration").
#[test]
fn follow_timeout_must_be_a_duration() {
    let dir = tmp();
    let p = dir.path().join("t.pool");
    assert!(nvs(&["create", s(&p), "--size", "1M"]).status.success());
    for bad in ["-1", "nan", "inf", "1e300", "99999999999999999999", "soon"] {
        let o = nvs(&["follow", s(&p), &format!("--timeout={bad}")]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--timeout={bad}: {err}");
        assert!(err.contains("--timeout") && !err.contains("panicked"), "--timeout={bad}: {err}");
    }
}

/// A reader that stops reading (`nvs get P n | head -c 10`) ends `get` quietly with exit
/// 0, as Unix tools do (it printed "cannot write stdout: Broken pipe", exit 2).
#[test]
fn get_into_a_closed_pipe_ends_quietly() {
    let dir = tmp();
    let p = dir.path().join("pipe.pool");
    assert!(nvs(&["create", s(&p), "--size", "64M"]).status.success());
    let big = dir.path().join("big");
    std::fs::write(&big, vec![7u8; 1 << 20]).unwrap();
    let put = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", s(&p), "big"])
        .stdin(std::fs::File::open(&big).unwrap())
        .output()
        .unwrap();
    assert!(put.status.success(), "{put:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["get", s(&p), "big"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out); // 1 MiB does not fit a pipe: the rest of the write meets a closed pipe
    let o = child.wait_with_output().unwrap();
    assert_eq!(first, [7u8; 10]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `nvs follow P | head -1`: the follower ends quietly (exit 0) at the next line it
/// cannot print, as `get` does.
#[test]
fn follow_into_a_closed_pipe_ends_quietly() {
    let dir = tmp();
    let p = dir.path().join("follow-pipe.pool");
    let mut writer = FilePool::create(&p, 8 << 20, &nvs_std::CreateOptions::new()).expect("create");
    writer.put(0, Object::new("a", b"first")).expect("put");
    let mut child = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["follow", s(&p), "--timeout", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert!(first.contains("\ta\t1\t5"), "{first:?}");
    drop(out);
    writer.put(0, Object::new("a", b"second")).expect("put"); // its line meets a closed pipe
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `get -o` onto the pool itself — by its name, a symlink, a hard link, or stdout
/// redirected onto it — is refused by identity (exit 2) and the pool stays whole (it
/// used to be overwritten by the object's bytes, exit 0).
#[test]
fn get_never_writes_onto_its_own_pool() {
    let dir = tmp();
    let p = dir.path().join("self.pool");
    assert!(nvs(&["create", s(&p), "--size", "16M"]).status.success());
    let put = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", s(&p), "a"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"hello\n")?;
            c.wait()
        })
        .unwrap();
    assert!(put.success());
    let (sym, hard) = (dir.path().join("sym"), dir.path().join("hard"));
    std::os::unix::fs::symlink(&p, &sym).unwrap();
    std::fs::hard_link(&p, &hard).unwrap();
    let before = std::fs::read(&p).unwrap();
    for out in [&p, &sym, &hard] {
        let o = nvs(&["get", s(&p), "a", "-o", s(out)]);
        assert_refused(&o, 2, "is the pool itself", &format!("get -o {}", out.display()));
    }
    let appended = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["get", s(&p), "a"])
        .stdout(std::fs::OpenOptions::new().append(true).open(&p).unwrap())
        .output()
        .unwrap();
    assert_eq!(appended.status.code(), Some(2), "get >> pool");
    assert_eq!(std::fs::read(&p).unwrap(), before, "the pool changed");
    assert!(nvs(&["ls", s(&p)]).status.success());
}

/// `ls` shows names unambiguously: a name with a newline and the four characters `a\nb`
/// (which used to print alike), a backslash, and bytes that are not UTF-8.
#[test]
fn ls_shows_every_name_unambiguously() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tmp();
    let p = dir.path().join("names.pool");
    assert!(nvs(&["create", s(&p), "--size", "4M"]).status.success());
    let names: [&[u8]; 4] = [b"a\nb", b"a\\nb", b"q\xffr", b"plain"];
    for name in names {
        let st = Command::new(env!("CARGO_BIN_EXE_nvs"))
            .arg("put")
            .arg(&p)
            .arg(std::ffi::OsStr::from_bytes(name))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "put {name:?}");
    }
    let out = nvs(&["ls", s(&p)]);
    let shown: Vec<String> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.split("  ").next().unwrap().to_string()).collect();
    let mut distinct = shown.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!((shown.len(), distinct.len()), (4, 4), "{shown:?}");
    assert!(shown.contains(&"plain".to_string()) && shown.contains(&"a\\nb".to_string()), "{shown:?}");
    assert!(shown.contains(&"a\\\\nb".to_string()) && shown.contains(&"q\\xffr".to_string()), "{shown:?}");
}

/// `put` whose stdout cannot take the version (`> /dev/full`) still committed: it says
/// which version on stderr and exits 4 (it said only "cannot write stdout", exit 2, and a
/// retrying script stored a duplicate).
#[test]
fn put_that_cannot_print_its_version_says_what_it_committed() {
    let dir = tmp();
    let p = dir.path().join("full.pool");
    assert!(nvs(&["create", s(&p), "--size", "4M"]).status.success());
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
    let o = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", s(&p), "n"])
        .stdin(Stdio::null())
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("committed as version 1") && err.lines().count() == 1, "{err}");
    let ls = String::from_utf8_lossy(&nvs(&["ls", s(&p)]).stdout).to_string();
    assert!(ls.starts_with("n  versions=1"), "{ls}");
}

/// No false durability claims: on tmpfs, `--durability msync` does not claim a put
/// survives a power loss (it did), and `create` says the mode is chosen at each open
/// (a `create --durability process` looked kept, and a later `info` said msync).
#[test]
fn durability_claims_are_what_the_backing_gives() {
    let Ok(dir) = tempfile::Builder::new().prefix("nvs-dur").tempdir_in("/dev/shm") else { return };
    let p = dir.path().join("d.pool");
    let o = nvs(&["create", s(&p), "--size", "4M", "--durability", "process"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success() && out.contains("chosen at each open"), "{out}");
    for mode in ["msync", "dax", "process"] {
        let o = nvs(&["--durability", mode, "info", s(&p)]);
        let info = String::from_utf8_lossy(&o.stdout).to_string();
        if !o.status.success() {
            continue; // dax needs non-temporal stores: refused on a build without them
        }
        assert!(!info.contains("and a power loss"), "{mode} on tmpfs claims power-loss durability: {info}");
        assert!(info.contains("not a power loss"), "{mode}: {info}");
    }
}

/// `put` from an endless input (`< /dev/zero`, or `/dev/zero` as FILE) is refused as soon
/// as the input exceeds what an object of the pool can hold (it read until memory ran
/// out), and stores nothing.
#[test]
fn put_from_an_endless_input_is_refused_early() {
    let dir = tmp();
    let p = dir.path().join("endless.pool");
    assert!(nvs(&["create", s(&p), "--size", "4M"]).status.success());
    for file in [None, Some("/dev/zero")] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvs"));
        cmd.args(["put", s(&p), "z"]);
        if let Some(f) = file {
            cmd.arg(f);
        }
        let o = cmd.stdin(std::fs::File::open("/dev/zero").unwrap()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{file:?}: {err}");
        assert!(err.contains("more than the") && err.contains("bytes an object of this pool can hold"), "{err}");
    }
    assert!(String::from_utf8_lossy(&nvs(&["ls", s(&p)]).stdout).is_empty(), "something was stored");
}

/// Issue 13, defect 2(a): a pool truncated under a reader used to kill it with SIGBUS
/// (exit 135, no message). Now: one line naming the pool, exit 2.
#[test]
fn a_pool_truncated_under_a_follower_is_an_error_not_a_signal() {
    let dir = tmp();
    let p = dir.path().join("shrinks.pool");
    let opts = nvs_std::CreateOptions::new().segment_len(64 << 10);
    let mut writer = FilePool::create(&p, 8 << 20, &opts).expect("create");
    for i in 0..20u8 {
        writer.put(0, Object::new("a", &[i; 3000])).expect("put");
    }
    // The writer stays (alive, lane open): the follower keeps polling.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["follow", s(&p), "--timeout", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn follow");
    // Once it has printed an object it has the pool mapped.
    // The reader stays open until the follower ends: dropping it would end the follower
    // with a broken pipe instead of the SIGBUS under test.
    let mut stdout = std::io::BufReader::new(follower.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(!first.is_empty(), "the follower printed nothing");
    std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(4096).unwrap();
    let drain = std::thread::spawn(move || std::io::Read::read_to_end(&mut stdout, &mut Vec::new()));
    let out = follower.wait_with_output().unwrap();
    drain.join().unwrap().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("SIGBUS") && err.contains("shrinks.pool"), "{err}");
    std::mem::forget(writer); // its mapping is gone too: do not touch it (no drop)
}

/// A pool truncated while `get -o NEW` copies out of it: the get ends with the SIGBUS
/// line (exit 2), and the new output file is gone. The pool is cut as soon as the output
/// file exists (the get made it, and copies into it next); a get that finished first is
/// tried again.
#[test]
fn a_pool_truncated_under_get_o_leaves_no_output() {
    let Ok(dir) = tempfile::Builder::new().prefix("nvs-sigbus").tempdir_in("/dev/shm") else { return };
    let p = dir.path().join("shrinks.pool");
    let len = 192usize << 20;
    let mut w = FilePool::create(&p, 256 << 20, &nvs_std::CreateOptions::new()).expect("create");
    w.put(0, Object::new("big", &vec![7u8; len])).expect("put");
    drop(w);
    let image = std::fs::read(&p).unwrap();
    for attempt in 0..5 {
        std::fs::write(&p, &image).unwrap();
        let out = dir.path().join(format!("out{attempt}"));
        let mut get = Command::new(env!("CARGO_BIN_EXE_nvs"))
            .args(["get", s(&p), "big", "-o", s(&out)])
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn get");
        let t = Instant::now();
        while !out.exists() && get.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
            std::thread::yield_now();
        }
        std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(4096).unwrap();
        let o = get.wait_with_output().unwrap();
        if o.status.code() == Some(0) {
            assert_eq!(std::fs::metadata(&out).unwrap().len(), len as u64);
            continue; // the copy finished before the cut
        }
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("SIGBUS"), "{err}");
        assert!(!out.exists(), "a get killed by SIGBUS left {}", out.display());
        return;
    }
}

/// A pool truncated while `migrate` or `salvage` copies it into NEW: the command ends
/// with the SIGBUS line (exit 2) and NEW is gone (it was left, empty, and `check` called
/// it clean). The source is cut as soon as NEW exists (it is named once formatted, and
/// the copy starts next); a copy that finished first is tried again.
#[test]
fn a_pool_truncated_under_migrate_or_salvage_leaves_no_new() {
    let Ok(dir) = tempfile::Builder::new().prefix("nvs-sigbus").tempdir_in("/dev/shm") else { return };
    let p = dir.path().join("shrinks.pool");
    let mut w = FilePool::create(&p, 256 << 20, &nvs_std::CreateOptions::new()).expect("create");
    w.put(0, Object::new("big", &vec![7u8; 192 << 20])).expect("put");
    drop(w);
    let image = std::fs::read(&p).unwrap();
    for cmd in ["migrate", "salvage"] {
        let mut cut = false;
        for attempt in 0..5 {
            std::fs::write(&p, &image).unwrap();
            let new = dir.path().join(format!("{cmd}{attempt}.pool"));
            let mut run = Command::new(env!("CARGO_BIN_EXE_nvs"))
                .args([cmd, s(&p), s(&new)])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let t = Instant::now();
            while !new.exists() && run.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(20) {
                std::thread::yield_now();
            }
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(4096).unwrap();
            let o = run.wait_with_output().unwrap();
            if o.status.code() == Some(0) {
                std::fs::remove_file(&new).unwrap();
                continue; // the copy finished before the cut
            }
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
            assert!(err.contains("SIGBUS"), "{cmd}: {err}");
            assert!(!new.exists(), "{cmd} ended by SIGBUS left {}", new.display());
            cut = true;
            break;
        }
        assert!(cut, "{cmd}: every copy finished before the cut");
    }
}

/// The pool of the lost-segment reproduction: 16 KiB segments, payload checksums, and
/// `puts` objects of 9000 bytes put through the CLI (one segment each), on `lanes` in turn.
fn chained_pool(dir: &Path, puts: usize, lanes: u32) -> PathBuf {
    let p = dir.join("chain.pool");
    let o = nvs(&["create", s(&p), "--size", "1M", "--segment-size", "16K", "--payload-checksum"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    for i in 0..puts {
        let input = dir.join(format!("in{i}"));
        std::fs::write(&input, vec![i as u8 + 1; 9000]).unwrap();
        let lane = (i as u32 % lanes).to_string();
        let o = nvs(&["put", s(&p), "obj", s(&input), "--lane", &lane]);
        assert_eq!(o.status.code(), Some(0), "put {i}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), (i + 1).to_string(), "put {i}: its version");
    }
    p
}

/// Offset of the segment holding `version` of `obj` in a fresh `chained_pool`: one
/// object per segment, claimed in order, so version v lives in segment v - 1.
fn segment_of_version(version: u64) -> usize {
    4096 + (version as usize - 1) * 16384
}

/// A damaged header of the segment holding a lane's newest units is reported by every
/// command, naming the segment's offset: never a silent loss (a `get` of a lost version
/// answering "no version", a `put` handing out a lost version number again).
fn lost_segment_is_reported(p: &Path, seg: usize, what: &str) {
    let want = format!("pool corrupted at offset {seg:#x}: segment header damaged");
    refused_everywhere(p, 1, &want, &want);
    let before = std::fs::read(p).unwrap();
    for v in ["1", "2", "3"] {
        assert_refused(&nvs(&["get", s(p), "obj", "--version", v]), 1, &want, &format!("{what}: get --version {v}"));
    }
    assert_refused(&nvs(&["put", s(p), "obj"]), 1, &want, &format!("{what}: put"));
    assert_eq!(std::fs::read(p).unwrap(), before, "{what}: modified the pool");
}

/// The reproduction: one byte of the magic of the last segment of the lane's chain.
#[test]
fn damaged_magic_of_a_lanes_last_segment() {
    let dir = tmp();
    let p = chained_pool(dir.path(), 3, 1);
    let seg = segment_of_version(3);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[seg] = b'X';
    std::fs::write(&p, &bytes).unwrap();
    lost_segment_is_reported(&p, seg, "magic");
}

/// One bit of the checksum (bytes 56..64) of a lane's last segment, each bit in turn.
#[test]
fn flipped_checksum_bit_of_a_lanes_last_segment() {
    let dir = tmp();
    let p = chained_pool(dir.path(), 3, 1);
    let good = std::fs::read(&p).unwrap();
    let seg = segment_of_version(3);
    for byte in 56..64 {
        for bit in [0, 7] {
            let mut bytes = good.clone();
            bytes[seg + byte] ^= 1 << bit;
            std::fs::write(&p, &bytes).unwrap();
            lost_segment_is_reported(&p, seg, &format!("checksum byte {byte} bit {bit}"));
        }
    }
}

/// More than one damaged byte in the header of a lane's last segment: two bytes (magic
/// and pool id), the checksum word zeroed, the whole line zeroed, the line overwritten.
/// Every command reports it, `dump` shows the segment damaged with its unit, and
/// `salvage` gets the version behind it back (before, each lost version 3 silently:
/// check "clean", dump "free", salvage copied nothing).
#[test]
fn a_lanes_last_segment_header_damaged_in_many_bytes() {
    let dir = tmp();
    let p = chained_pool(dir.path(), 3, 1);
    let good = std::fs::read(&p).unwrap();
    let seg = segment_of_version(3);
    type Damage = fn(&mut [u8]);
    let cases: [(&str, Damage); 4] = [
        ("magic and pool id bytes", |h| {
            h[0] ^= 0x10;
            h[8] ^= 0x10;
        }),
        ("checksum word zeroed", |h| h[56..64].fill(0)),
        ("line zeroed", |h| h.fill(0)),
        ("line overwritten", |h| h.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8 ^ 0xA5)),
    ];
    for (what, damage) in cases {
        let mut bytes = good.clone();
        damage(&mut bytes[seg..seg + 64]);
        std::fs::write(&p, &bytes).unwrap();
        lost_segment_is_reported(&p, seg, what);
        let dump = nvs(&["dump", s(&p)]);
        let text = String::from_utf8_lossy(&dump.stdout);
        assert!(text.contains(&format!("segment 2 @{seg:#x}: DAMAGED header")), "{what}: dump:\n{text}");
        let new = dir.path().join(format!("salvaged-{}", what.replace(' ', "-")));
        let o = nvs(&["salvage", s(&p), s(&new)]);
        assert_eq!(o.status.code(), Some(1), "{what}: salvage: {}", String::from_utf8_lossy(&o.stdout));
        for v in 1..=3u8 {
            let got = nvs(&["get", s(&new), "obj", "--version", &v.to_string()]);
            assert_eq!(got.status.code(), Some(0), "{what}: salvaged v{v}: {}", String::from_utf8_lossy(&got.stderr));
            assert_eq!(got.stdout, vec![v; 9000], "{what}: salvaged v{v}");
        }
    }
}

/// One bit of the checksum of a lane's only segment (lanes 0 and 1 hold one each).
#[test]
fn flipped_checksum_bit_of_a_lanes_only_segment() {
    let dir = tmp();
    let p = chained_pool(dir.path(), 2, 2);
    let mut bytes = std::fs::read(&p).unwrap();
    let seg = segment_of_version(2);
    assert_eq!(bytes[seg + 16..seg + 20], 1u32.to_le_bytes(), "version 2 is lane 1's only segment");
    bytes[seg + 60] ^= 0x04;
    std::fs::write(&p, &bytes).unwrap();
    lost_segment_is_reported(&p, seg, "only segment");
}

/// Retention leaves released segments free with their old committed units: not a lost
/// segment. The pool stays clean, and versions continue where they were.
#[test]
fn released_segments_are_not_lost_segments() {
    let dir = tmp();
    let p = chained_pool(dir.path(), 6, 1);
    let o = nvs(&["reclaim", s(&p), "--keep", "1"]);
    assert_eq!(o.status.code(), Some(0), "reclaim: {}", String::from_utf8_lossy(&o.stderr));
    let o = nvs(&["check", s(&p)]);
    assert_eq!(o.status.code(), Some(0), "check after reclaim: {}", String::from_utf8_lossy(&o.stderr));
    let o = nvs(&["put", s(&p), "obj"]);
    assert_eq!(o.status.code(), Some(0), "put after reclaim: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "7");
    let o = nvs(&["get", s(&p), "obj", "--version", "6"]);
    assert_eq!(o.status.code(), Some(0), "get after reclaim: {}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.stdout, vec![6u8; 9000]);
    assert_eq!(nvs(&["check", s(&p)]).status.code(), Some(0));
}

/// `dump` and `salvage` on what holds no readable pool (garbage, an empty file, a
/// damaged superblock, a newer format, a directory, a FIFO, a character device): one
/// line and the documented code, nothing written, no NEW made; `dump --range` still
/// shows a regular file's bytes, whatever they are.
#[test]
fn dump_and_salvage_of_what_is_no_pool() {
    let dir = tmp();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0x5au8; 20_000]).unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let damaged = pool(dir.path(), "damaged.pool");
    let mut b = std::fs::read(&damaged).unwrap();
    b[30] ^= 0x40;
    std::fs::write(&damaged, &b).unwrap();
    let newer = pool(dir.path(), "newer.pool");
    let mut b = std::fs::read(&newer).unwrap();
    b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let sum = hash64(SUPERBLOCK_SEED, &b[..56]);
    b[56..64].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&newer, &b).unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let new = dir.path().join("new.pool");
    let cases: [(&Path, i32, &str); 7] = [
        (&junk, 1, "not an nvs pool"),
        (&empty, 1, "not an nvs pool"),
        (&damaged, 1, "superblock checksum mismatch"),
        (&newer, 2, "is not supported"),
        (dir.path(), 2, "not a regular file"),
        (&fifo, 2, "not a regular file"),
        (Path::new("/dev/null"), 2, "not a regular file"),
    ];
    for (path, code, want) in cases {
        // (Reading the FIFO would wait for a writer.)
        let before = if path.is_file() { std::fs::read(path).ok() } else { None };
        assert_refused(&nvs(&["dump", s(path)]), code, want, &format!("dump {}", path.display()));
        let o = nvs(&["salvage", s(path), s(&new)]);
        assert_refused(&o, code, want, &format!("salvage {}", path.display()));
        assert!(!new.exists(), "salvage of {} made NEW", path.display());
        if path.is_file() {
            assert_eq!(std::fs::read(path).ok(), before, "{} modified", path.display());
        }
    }
    // The bytes of a pool whose superblock is damaged are still there to look at.
    let o = nvs(&["dump", s(&damaged), "--range", "0:16"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("00000000  4e 56 53 50 4f 4f 4c 00"));
    assert_refused(&nvs(&["dump", s(&empty), "--range", "0:16"]), 2, "past its end", "range of an empty file");
    assert_refused(&nvs(&["dump", s(&fifo), "--range", "0:16"]), 2, "regular file", "range of a fifo");
}

/// `get --output NEW` writes the verified bytes straight into the new file's mapping:
/// a version that is not there creates no file, a damaged payload (payload checksums
/// are on by default) leaves no file behind, and a good get gives the exact bytes —
/// into a new file and, the usual way, over an existing one.
#[test]
fn get_into_a_new_file_leaves_nothing_behind_on_failure() {
    let dir = tmp();
    let p = pool(dir.path(), "p");
    let input = dir.path().join("in");
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 300) as u8).collect();
    std::fs::write(&input, &bytes).expect("input");
    let o = nvs(&["put", s(&p), "a", s(&input)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("out");
    assert_refused(&nvs(&["get", s(&p), "a", "--version", "9", "--output", s(&out)]), 2, "no version 9", "absent");
    assert!(!out.exists(), "a get of an absent version created its output");
    assert!(nvs(&["get", s(&p), "a", "--output", s(&out)]).status.success());
    assert_eq!(std::fs::read(&out).expect("out"), bytes);
    std::fs::write(&out, b"older, shorter or longer contents of the file").expect("old");
    assert!(nvs(&["get", s(&p), "a", "--output", s(&out)]).status.success());
    assert_eq!(std::fs::read(&out).expect("out"), bytes, "over an existing file");
    // Damage one payload byte.
    let mut image = std::fs::read(&p).expect("pool");
    let at = image.windows(64).position(|w| w == &bytes[5000..5064]).expect("payload in the pool");
    image[at + 10] ^= 0xff;
    std::fs::write(&p, &image).expect("damage");
    let bad = dir.path().join("bad");
    assert_refused(&nvs(&["get", s(&p), "a", "--output", s(&bad)]), 1, "payload checksum", "damaged");
    assert!(!bad.exists(), "a failed get left its new output file behind");
}

/// `put` of a regular file maps it (no copy into memory) and stores it byte-exact; a
/// file larger than an object of the pool can be is refused by its length.
#[test]
fn put_of_a_mapped_file() {
    let dir = tmp();
    let p = pool(dir.path(), "p");
    let input = dir.path().join("in");
    let bytes: Vec<u8> = (0..300_001u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    std::fs::write(&input, &bytes).expect("input");
    let o = nvs(&["put", s(&p), "a", s(&input)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("out");
    assert!(nvs(&["get", s(&p), "a", "--output", s(&out)]).status.success());
    assert_eq!(std::fs::read(&out).expect("out"), bytes);
    let big = dir.path().join("big");
    std::fs::File::create(&big).and_then(|f| f.set_len(1 << 30)).expect("sparse 1 GiB input");
    assert_refused(&nvs(&["put", s(&p), "b", s(&big)]), 2, "holds more than the", "too large");
}

/// Under a file size limit (`ulimit -f`, here 512 KiB) smaller than the pool, every command
/// that makes a pool file is refused with one line naming the limit, exit 2, and leaves
/// nothing: the kernel used to end `nvs` by SIGXFSZ when it sized the file.
#[test]
fn a_pool_over_the_file_size_limit_is_refused() {
    fn limited(args: &[&str]) -> Output {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvs"));
        cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe; SIGXFSZ keeps its default (the end of
        // the process), as in a shell with `ulimit -f`.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit { rlim_cur: 512 << 10, rlim_max: 512 << 10 };
                match libc::setrlimit(libc::RLIMIT_FSIZE, &limit) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            })
        };
        cmd.output().expect("run nvs")
    }
    let dir = tmp();
    let old = pool(dir.path(), "old");
    let before = std::fs::read_dir(dir.path()).expect("dir").count();
    let new = dir.path().join("new");
    let cases = [
        vec!["create", "--size", "64M", s(&new)],
        vec!["migrate", s(&old), s(&new)],
        vec!["salvage", s(&old), s(&new)],
    ];
    for args in &cases {
        let o = limited(args);
        assert_refused(&o, 2, "file size limit of 524288 bytes (ulimit -f)", &format!("{args:?}"));
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), before, "{args:?} left a file");
    }
    // A get whose output would pass the limit: the write's error, its partial output
    // removed (SIGXFSZ ended it with nothing said, leaving an empty file).
    let big = dir.path().join("big");
    assert!(nvs(&["create", s(&big), "--size", "4M"]).status.success());
    let input = dir.path().join("in");
    std::fs::write(&input, vec![7u8; 600 << 10]).expect("input");
    assert!(nvs(&["put", s(&big), "a", s(&input)]).status.success());
    let out = dir.path().join("out");
    let o = limited(&["get", s(&big), "a", "--output", s(&out)]);
    assert_refused(&o, 2, "File too large", "get past the limit");
    assert!(!out.exists(), "a get past the file size limit left its output");
}

/// An error reported to a stderr nobody reads any more (`nvs ... 2>&1 | true`, a closed
/// pipe) ends with the error's exit code, not a panic (exit 101).
#[test]
fn an_error_to_a_closed_stderr_is_still_its_exit_code() {
    let dir = tmp();
    let missing = dir.path().join("missing.pool");
    for args in [vec!["info", s(&missing)], vec!["no-such-command"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nvs"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nvs");
        drop(child.stderr.take()); // the read end closed before nvs writes
        let status = child.wait().expect("wait for nvs");
        assert!(matches!(status.code(), Some(1 | 2)), "{args:?}: {status:?}");
    }
}
