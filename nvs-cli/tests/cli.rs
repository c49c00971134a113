//! The `nvs` tool end to end: every command's output and its documented exit codes
//! (0 ok, 1 corruption / not a pool / mismatch, 2 usage, I/O or lock error).

use nvs_core::internals::format::{object_head_len, LINE};
use nvs_std::{Access, FilePool};
use std::path::Path;
use std::process::Output;

mod common;
use common::*;

/// Assert a failure printed exactly one `nvs: ` line on stderr and exited with `want`.
fn assert_fails(o: &Output, want: i32) -> String {
    let err = stderr(o);
    assert_eq!(code(o), want, "stderr: {err}");
    assert!(err.starts_with("nvs: "), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    err
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("nvs-cli-test").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

fn create(pool: &Path, extra: &[&str]) {
    let mut args = vec!["create", s(pool), "--size", "4M"];
    args.extend_from_slice(extra);
    let o = nvs(&args);
    assert_eq!(code(&o), 0, "create: {}", stderr(&o));
}

/// create → put (file and stdin) → get (stdout and -o) → ls → info → check.
#[test]
fn round_trip() {
    let dir = tmp();
    let pool = dir.path().join("p.pool");
    // Payload checksums are on by default.
    create(&pool, &["--segment-size", "64K"]);

    let input = dir.path().join("in.bin");
    let data: Vec<u8> = (0..60_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&input, &data).unwrap();
    let o = nvs(&["put", s(&pool), "grid", s(&input)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "1\n", "put prints only the version");

    let o = nvs_stdin(&["put", s(&pool), "grid", "-"], b"from stdin");
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "2\n"), "{}", stderr(&o));
    let o = nvs_stdin(&["put", s(&pool), "note", "--version", "7", "--lane", "3"], b"seven");
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "7\n"), "{}", stderr(&o));

    let o = nvs(&["get", s(&pool), "grid"]);
    assert_eq!((code(&o), o.stdout.as_slice()), (0, &b"from stdin"[..]));
    let out = dir.path().join("out.bin");
    let o = nvs(&["get", s(&pool), "grid", "--version", "1", "-o", s(&out)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read(&out).unwrap(), data);

    let o = nvs(&["ls", s(&pool)]);
    assert_eq!(code(&o), 0);
    let ls = stdout(&o);
    assert!(ls.contains("grid  versions=2 latest=2 bytes=60010 stored=60010  sizes=v1:60000 v2:10"), "{ls}");
    assert!(ls.contains("note  versions=1 latest=7"), "{ls}");

    let o = nvs(&["info", s(&pool)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let info = stdout(&o);
    for want in [
        "format version    3 (one fence per commit: sealed units)",
        "payload checksum  on",
        "delta objects     allowed",
        "durability        msync",
        "power loss",
        "stores            ",
        "recovered         6 units, 3 objects, 60015 payload bytes", // 3 puts, each with its detach marker
        "open time",
        "segments          63 of 64 KiB",
        "lanes             64",
    ] {
        assert!(info.contains(want), "missing {want:?} in\n{info}");
    }

    let o = nvs(&["check", s(&pool)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("clean: 3 objects"), "{}", stdout(&o));
}

/// A second writer is refused (naming the lock and the path) while one holds the pool;
/// readers still work alongside it.
#[test]
fn second_writer_refused() {
    let dir = tmp();
    let pool = dir.path().join("p.pool");
    create(&pool, &[]);
    let mut held = FilePool::open(&pool, Access::ReadWrite).unwrap();
    held.put(0, nvs_core::Object::new(b"a", b"held")).unwrap();

    let o = nvs_stdin(&["put", s(&pool), "a"], b"second");
    let err = assert_fails(&o, 2);
    assert!(err.contains("locked by another writer"), "{err}");
    assert!(err.contains(s(&pool)), "{err}");
    assert!(o.stdout.is_empty(), "no version printed");

    let o = nvs(&["get", s(&pool), "a"]);
    assert_eq!((code(&o), o.stdout.as_slice()), (0, &b"held"[..]));
    drop(held);
    // The kernel drops the lock once no descriptor of the writer's open file remains:
    // a child that another test of this process was spawning meanwhile holds a copy of
    // it until its exec closes it, so wait (briefly) for the lock to go.
    let reader = FilePool::open(&pool, Access::ReadOnly).unwrap();
    let t = std::time::Instant::now();
    while reader.writer_alive() && t.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let o = nvs_stdin(&["put", s(&pool), "a"], b"now free");
    assert_eq!((code(&o), stdout(&o).as_str()), (0, "2\n"), "{}", stderr(&o));
}

/// check: 0 on a clean pool, 1 on a flipped byte in a committed record header (batch or
/// object header) or a non-pool file, 2 on a missing path.
#[test]
fn check_exit_codes() {
    let dir = tmp();
    let clean = dir.path().join("clean.pool");
    create(&clean, &[]);
    for (name, bytes) in [("a", &b"alpha"[..]), ("b", b"beta"), ("a", b"again")] {
        let o = nvs_stdin(&["put", s(&clean), name], bytes);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert_eq!(code(&nvs(&["check", s(&clean)])), 0);

    // Where the first object's header and its unit's unit header are.
    let payload = FilePool::open(&clean, Access::ReadOnly).unwrap().stat(b"a", 1).unwrap().offset;
    let object_header = payload - object_head_len(1);
    let batch_header = object_header - LINE;
    // +0 of an object header: its version; +16 of a unit header: its unit length
    // (not the commit word at +0, whose damage reads as an uncommitted tail).
    for (what, off) in [("object", object_header), ("batch", batch_header + 16)] {
        let bad = dir.path().join(format!("{what}.pool"));
        let mut bytes = std::fs::read(&clean).unwrap();
        bytes[off as usize] ^= 0x01;
        std::fs::write(&bad, &bytes).unwrap();
        let err = assert_fails(&nvs(&["check", s(&bad)]), 1);
        assert!(err.contains("corrupted"), "{what}: {err}");
    }

    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0xA5u8; 100_000]).unwrap();
    let err = assert_fails(&nvs(&["check", s(&junk)]), 1);
    assert!(err.contains("not an nvs pool"), "{err}");

    let missing = dir.path().join("missing");
    let err = assert_fails(&nvs(&["check", s(&missing)]), 2);
    assert!(err.contains("No such file"), "{err}");
}

/// Usage errors (bad sizes, missing arguments, unknown modes) exit 2 with one line.
#[test]
fn usage_errors_exit_2() {
    let dir = tmp();
    let pool = dir.path().join("p.pool");
    let err = assert_fails(&nvs(&["create", s(&pool), "--size", "12Q"]), 2);
    assert!(err.contains("bad size '12Q'"), "{err}");
    assert!(!pool.exists());
    // Only a /dev/dax device has a size of its own.
    let err = assert_fails(&nvs(&["create", s(&pool)]), 2);
    assert!(err.contains("--size is needed"), "{err}");
    assert!(!pool.exists());
    assert_fails(&nvs(&["create", s(&pool), "--size", "1M", "--durability", "fast"]), 2);
    assert_fails(&nvs(&["frobnicate"]), 2);
    let err = assert_fails(&nvs(&["create", s(&pool), "--size", "1M", "--durability", "dax"]), 2);
    assert!(err.contains("durability dax needs persistent memory mapped directly"), "{err}");
    assert!(!pool.exists());

    create(&pool, &[]);
    let err = assert_fails(&nvs(&["create", s(&pool), "--size", "1M"]), 2);
    assert!(err.contains("already exists"), "{err}");
    let err = assert_fails(&nvs(&["get", s(&pool), "nothing"]), 2);
    assert!(err.contains("no object named nothing"), "{err}");
    let err = assert_fails(&nvs_stdin(&["put", s(&pool), "x", "--lane", "999"], b"x"), 2);
    assert!(err.contains("lane 999"), "{err}");
    assert_eq!(code(&nvs(&["--help"])), 0);
}

/// The demo writes, reads back and checks every byte, reports GB/s next to memcpy, and
/// leaves no file behind.
#[test]
fn demo_runs_and_cleans_up() {
    let dir = tmp();
    let o = nvs(&["demo", "--dir", s(dir.path()), "--steps", "5", "--arrays", "3", "--size", "5000"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    for want in ["put:", "memcpy:", "GB/s", "every byte checked: ok", "removed"] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "demo left files: {left:?}");
}

/// `put --delta` stores only the changed chunks (full first, then deltas), `get` returns
/// every version whole, `ls` shows full/delta and the stored size, `check` is clean.
#[test]
fn put_delta_and_ls_show_stored_sizes() {
    let dir = tmp();
    let pool = dir.path().join("p");
    create(&pool, &["--payload-checksum"]); // the default, still accepted
    let v1: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let mut v2 = v1.clone();
    v2[50_000] ^= 1;
    let mut v3 = v2.clone();
    v3.truncate(90_000); // another length: stored whole
    for (data, version, note) in
        [(&v1, "1", "full: stored 100000"), (&v2, "2", "delta: stored 4160"), (&v3, "3", "full")]
    {
        let o = nvs_stdin(&["put", s(&pool), "grid", "--delta"], data);
        assert_eq!((code(&o), stdout(&o).trim()), (0, version), "{}", stderr(&o));
        assert!(stderr(&o).contains(note), "{}", stderr(&o));
    }
    for (v, want) in [("1", &v1), ("2", &v2), ("3", &v3)] {
        let o = nvs(&["get", s(&pool), "grid", "--version", v]);
        assert!(code(&o) == 0 && &o.stdout == want, "v{v}: {}", stderr(&o));
    }
    let o = nvs(&["ls", s(&pool)]);
    let out = stdout(&o);
    assert!(out.contains("stored=194160") && out.contains("v2:100000(delta 4160)"), "{out}");
    let o = nvs(&["ls", "--long", s(&pool)]);
    let out = stdout(&o);
    assert!(out.contains("v2  100000 bytes  delta depth 1  stored 4160"), "{out}");
    assert!(out.contains("v3  90000 bytes  full  stored 90000"), "{out}");
    assert_eq!(code(&nvs(&["check", s(&pool)])), 0);
    // --delta with --version is a usage error.
    assert_fails(&nvs(&["put", s(&pool), "grid", "--delta", "--version", "9"]), 2);
}

/// Issue 13, defect 6: on a pool no lane has joined, `follow` used to exit 3 ("writer
/// gone") at once. No writer was there to die: it waits, and a timeout is exit 2.
#[test]
fn follow_on_a_pool_no_writer_has_touched_waits() {
    let dir = tmp();
    let pool = dir.path().join("f.pool");
    create(&pool, &[]);
    let t = std::time::Instant::now();
    let o = nvs(&["follow", s(&pool), "--timeout", "0.3"]);
    let err = assert_fails(&o, 2);
    assert!(err.contains("timed out"), "{err}");
    assert!(t.elapsed() >= std::time::Duration::from_millis(300), "it waited");
}

/// Issue 13, defect 6 (rest): a follower beside a series of `nvs put` runs used to
/// report "writer gone" (exit 3) once one had exited. Each run now leaves a detach marker
/// (a clean exit): the follower sees every object and waits for the next run (here: a
/// timeout, exit 2); after a writer that died it still reports exit 3 (tests/sigkill.rs).
#[test]
fn follow_beside_a_series_of_puts_waits_for_the_next() {
    let dir = tmp();
    let pool = dir.path().join("series.pool");
    create(&pool, &[]);
    for i in 0..3u8 {
        assert_eq!(code(&nvs_stdin(&["put", s(&pool), "step"], &[i; 100])), 0);
    }
    let o = nvs(&["follow", s(&pool), "--timeout", "0.5"]);
    assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
    let err = assert_fails(&o, 2);
    assert!(err.contains("timed out"), "a clean exit is not a death: {err}");
    assert_eq!(code(&nvs(&["close", s(&pool)])), 0);
    assert_eq!(code(&nvs(&["follow", s(&pool), "--timeout", "5"])), 0, "closed: end of stream");
}

/// `nvs close` ends a lane's stream from the shell (a follower then ends with exit 0),
/// `nvs reclaim --keep K` runs retention; both refuse bad arguments with exit 2.
#[test]
fn close_and_reclaim_from_the_shell() {
    let dir = tmp();
    let pool = dir.path().join("r.pool");
    create(&pool, &["--segment-size", "64K"]);
    let big = vec![7u8; 20_000];
    for _ in 0..12 {
        assert_eq!(code(&nvs_stdin(&["put", s(&pool), "x"], &big)), 0);
    }
    let o = nvs(&["reclaim", s(&pool), "--keep", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let freed: u32 = stdout(&o).split(": ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
    assert!(freed > 0, "{}", stdout(&o));
    let o = nvs(&["get", s(&pool), "x"]);
    assert_eq!(o.stdout, big, "the latest version stays");
    assert_fails(&nvs(&["reclaim", s(&pool), "--keep", "0"]), 2);
    assert_fails(&nvs(&["reclaim", s(&pool)]), 2);
    // Close lane 0: a follower sees the end of the stream.
    let o = nvs(&["close", s(&pool), "--lane", "0"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("lane 0 closed"));
    let o = nvs(&["follow", s(&pool), "--timeout", "5"]);
    assert_eq!(code(&o), 0, "end of stream: {}", stderr(&o));
    let err = assert_fails(&nvs(&["close", s(&pool), "--lane", "999"]), 2);
    assert!(err.contains("lane"), "{err}");
    assert_fails(&nvs(&["close", s(&dir.path().join("missing.pool"))]), 2);
}

/// `ls --json` and `check --json`: one JSON object per line, for scripts; a name that is
/// not UTF-8 comes back exactly in `name_hex`.
#[test]
fn json_output_of_ls_and_check() {
    let dir = tmp();
    let pool = dir.path().join("j.pool");
    create(&pool, &[]);
    assert_eq!(code(&nvs_stdin(&["put", s(&pool), "temp\"1"], b"abc")), 0);
    assert_eq!(code(&nvs_stdin(&["put", s(&pool), "temp\"1"], b"abcdef")), 0);
    let o = nvs(&["ls", s(&pool), "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(
        lines,
        [
            r#"{"name":"temp\"1","name_hex":"74656d702231","version":1,"len_bytes":3,"stored_bytes":3,"delta_depth":0,"lane":0,"seq":0,"meta":""}"#,
            r#"{"name":"temp\"1","name_hex":"74656d702231","version":2,"len_bytes":6,"stored_bytes":6,"delta_depth":0,"lane":0,"seq":2,"meta":""}"#,
        ]
    );
    let o = nvs(&["check", s(&pool), "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with(r#"{"pool":""#) && out.ends_with("}\n"), "{out}");
    assert!(out.contains(r#""clean":true,"objects":2,"units":4,"lanes":1,"#), "{out}");
    assert_fails(&nvs(&["ls", s(&pool), "--json", "--long"]), 2);
}

/// Format 1 pools: read as they are, refused for writing with the way out, and
/// `nvs migrate` copies every version (deltas rebuilt as full versions) into a format 3
/// pool whose listing and bytes match; the old pool is left unchanged.
#[test]
fn format_1_pools_are_read_and_migrated() {
    let dir = tmp();
    let old = dir.path().join("old.pool");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../nvs-std/tests/data/v1.pool"), &old).unwrap();
    let before = std::fs::read(&old).unwrap();
    let o = nvs(&["info", s(&old)]);
    assert!(stdout(&o).contains("format version    1"), "{}", stdout(&o));
    let o = nvs_stdin(&["put", s(&old), "x"], b"x");
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("read-only") && stderr(&o).contains("nvs migrate"), "{}", stderr(&o));
    let new = dir.path().join("new.pool");
    let o = nvs(&["migrate", s(&old), s(&new)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("9 objects of 5 names"), "{}", stdout(&o));
    assert!(stdout(&nvs(&["info", s(&new)])).contains("format version    3"));
    let listing = |p: &Path| {
        let out = stdout(&nvs(&["ls", "-l", s(p)]));
        // Sizes and versions, not where the copy stored them (seq) nor how (delta).
        out.lines()
            .map(|l| l.split("  stored").next().unwrap_or(l).replace("delta depth 1", "full"))
            .collect::<Vec<_>>()
    };
    let (a, b) = (listing(&old), listing(&new));
    assert!(
        a.len() > 5 && a.iter().zip(&b).all(|(x, y)| x.split_whitespace().take(2).eq(y.split_whitespace().take(2))),
        "{a:?}\n{b:?}"
    );
    for (name, v) in [("a", "11"), ("a", "12"), ("b", "2"), ("c", "1"), ("c", "2"), ("temperature", "1"), ("u", "1")] {
        let x = nvs(&["get", s(&old), name, "--version", v]);
        let y = nvs(&["get", s(&new), name, "--version", v]);
        assert_eq!(code(&x), 0);
        assert!(x.stdout == y.stdout, "{name} v{v}");
    }
    assert!(std::fs::read(&old).unwrap() == before, "migrate changed the old pool");
    let o = nvs(&["migrate", s(&old), s(&new)]);
    assert_eq!(code(&o), 2, "never over an existing file");
}

/// `get -o` onto an existing file replaces its content whole (written beside it, then
/// renamed over it: a failure leaves it as it was), keeping its permissions; through a
/// symlink, the file it names is replaced and the link stays.
#[test]
fn get_o_replaces_an_existing_file_whole() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tmp();
    let pool = dir.path().join("p.pool");
    create(&pool, &[]);
    assert_eq!(code(&nvs_stdin(&["put", s(&pool), "x"], b"new bytes")), 0);
    let old = dir.path().join("old");
    std::fs::write(&old, vec![9u8; 100_000]).unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = nvs(&["get", s(&pool), "x", "-o", s(&old)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read(&old).unwrap(), b"new bytes");
    assert_eq!(std::fs::metadata(&old).unwrap().permissions().mode() & 0o777, 0o640);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    assert_eq!(code(&nvs_stdin(&["put", s(&pool), "x"], b"newer")), 0);
    assert_eq!(code(&nvs(&["get", s(&pool), "x", "-o", s(&link)])), 0);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&old).unwrap(), b"newer");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 3, "only the pool, the file and the link: {left:?}");
}

/// `nvs migrate` copies each object's metadata; a copy that fails (NEW too small)
/// leaves no NEW behind.
#[test]
fn migrate_keeps_metadata_and_leaves_nothing_when_it_fails() {
    let dir = tmp();
    let (old, new) = (dir.path().join("old.pool"), dir.path().join("new.pool"));
    create(&old, &[]);
    let o = nvs_stdin(&["put", s(&old), "arr", "--meta", "dtype=<f8", "--meta", "shape=100,125"], &[1u8; 3000]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for i in 0..6 {
        assert_eq!(code(&nvs_stdin(&["put", s(&old), &format!("o{i}")], &[i as u8; 100_000])), 0);
    }
    let o = nvs(&["migrate", s(&old), s(&new)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // The version line's metadata (what follows "meta"; not where the copy stored it).
    let meta = |p: &Path| {
        let out = stdout(&nvs(&["ls", "-l", s(p)]));
        out.lines().find_map(|l| l.split_once("  meta ").map(|(_, m)| m.to_owned()))
    };
    assert!(meta(&old).is_some_and(|m| m.contains("shape=100,125")), "{:?}", meta(&old));
    assert_eq!(meta(&new), meta(&old));
    let small = dir.path().join("small.pool");
    let err = assert_fails(&nvs(&["migrate", s(&old), s(&small), "--size", "600K"]), 2);
    assert!(err.contains("full"), "{err}");
    assert!(std::fs::symlink_metadata(&small).is_err(), "a failed migrate left {}", small.display());
}

/// An object larger than a segment (5 MB in 256 KiB segments) through the tool: put, get byte-exact, check clean; one larger than the pool is
/// refused, naming the limit.
#[test]
fn objects_larger_than_a_segment() {
    let dir = tmp();
    let pool = dir.path().join("big.pool");
    assert_eq!(code(&nvs(&["create", s(&pool), "--size", "16M", "--segment-size", "256K"])), 0);
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i ^ (i >> 11)) as u8).collect();
    let o = nvs_stdin(&["put", s(&pool), "big"], &data);
    assert_eq!((code(&o), stdout(&o).trim()), (0, "1"), "{}", stderr(&o));
    let o = nvs(&["get", s(&pool), "big"]);
    assert!(o.stdout == data, "get returned other bytes");
    let o = nvs(&["check", s(&pool)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = nvs_stdin(&["put", s(&pool), "huge"], &vec![0u8; 17 << 20]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("bytes an object of this pool can hold"), "{}", stderr(&o));
}

/// `--no-payload-checksum` turns them off (`info` and `check` say so); asking for both
/// is refused.
#[test]
fn create_without_payload_checksums() {
    let dir = tmp();
    let pool = dir.path().join("p.pool");
    create(&pool, &["--no-payload-checksum"]);
    let o = nvs_stdin(&["put", s(&pool), "a", "-"], b"bytes");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = nvs(&["info", s(&pool)]);
    assert!(stdout(&o).contains("payload checksum  off"), "{}", stdout(&o));
    let o = nvs(&["check", s(&pool)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("payload checksums off"), "{}", stdout(&o));
    let both = dir.path().join("q.pool");
    let o = nvs(&["create", s(&both), "--size", "4M", "--payload-checksum", "--no-payload-checksum"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

/// `put --meta KEY=VALUE` stores metadata under the object's commit; `ls -l` and
/// `ls --json` show it; a malformed pair is a usage error and stores nothing.
#[test]
fn put_with_metadata() {
    let dir = tmp();
    let pool = dir.path().join("meta.pool");
    create(&pool, &[]);
    let o = nvs_stdin(&["put", s(&pool), "t", "--meta", "dtype=<f8", "--meta", "shape=2,3"], &[0u8; 48]);
    assert_eq!((code(&o), stdout(&o).trim()), (0, "1"), "{}", stderr(&o));
    let o = nvs_stdin(&["put", s(&pool), "u", "--meta", "nokey"], b"x");
    assert_fails(&o, 2);
    let ls = stdout(&nvs(&["ls", "-l", s(&pool)]));
    assert!(ls.contains("meta dtype=<f8\\nshape=2,3\\n"), "{ls}");
    assert!(!ls.contains("u  "), "the refused put stored something: {ls}");
    let json = stdout(&nvs(&["ls", "--json", s(&pool)]));
    assert!(json.contains(r#""meta":"dtype=<f8\nshape=2,3\n""#), "{json}");
}

/// A put on a lane whose stream was ended is refused unless `--reopen` (it silently
/// reopened a stream whose followers had seen its end).
#[test]
fn a_put_after_close_needs_reopen() {
    let dir = tmp();
    let pool = dir.path().join("c.pool");
    create(&pool, &[]);
    assert_eq!(code(&nvs_stdin(&["put", s(&pool), "x"], b"1")), 0);
    assert_eq!(code(&nvs(&["close", s(&pool), "--lane", "0"])), 0);
    let err = assert_fails(&nvs_stdin(&["put", s(&pool), "x"], b"2"), 2);
    assert!(err.contains("lane 0's stream was ended") && err.contains("--reopen"), "{err}");
    assert_eq!(nvs(&["get", s(&pool), "x"]).stdout, b"1", "nothing was put");
    let o = nvs_stdin(&["put", s(&pool), "x", "--reopen"], b"2");
    assert_eq!((code(&o), stdout(&o).trim()), (0, "2"), "{}", stderr(&o));
}

/// In a pool with lane names, a producer's series stays on its lane: `nvs put` without
/// `--lane` takes the lane holding the name (two producers of one name used to get the
/// same versions twice, on two lanes), refuses a name several lanes hold, and prints
/// nothing on stderr when it succeeds (it printed "nvs: lane 0", shaped like an error).
#[test]
fn a_put_on_a_lane_names_pool_keeps_a_name_on_its_lane() {
    let dir = tmp();
    let pool = dir.path().join("l.pool");
    create(&pool, &["--lane-names"]);
    for v in 1..=3 {
        let o = nvs_stdin(&["put", s(&pool), "x"], b"a");
        assert_eq!((code(&o), stdout(&o).trim(), stderr(&o)), (0, v.to_string().as_str(), String::new()));
    }
    let o = nvs_stdin(&["put", s(&pool), "y", "--lane", "1"], b"b");
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = nvs_stdin(&["put", s(&pool), "y"], b"b");
    assert_eq!((code(&o), stdout(&o).trim()), (0, "2"), "y stays on lane 1: {}", stderr(&o));
    let o = nvs_stdin(&["put", s(&pool), "x", "--lane", "1"], b"c");
    assert_eq!((code(&o), stdout(&o).trim()), (0, "1"), "{}", stderr(&o));
    let err = assert_fails(&nvs_stdin(&["put", s(&pool), "x"], b"d"), 2);
    assert!(err.contains("lanes [0, 1] each hold x") && err.contains("--lane"), "{err}");
}
