//! `nvs dump`, `nvs dump --range`, `nvs salvage`, `nvs info --stats` / `--json` and
//! `nvs follow --json`, on clean pools and on pools damaged byte by byte: what they print,
//! their exit codes, that the pool they read is never written, and that stderr (not a
//! terminal here) holds no progress bar.

use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::*;

/// Exit 0 and nothing at all on stderr.
fn ok(o: &Output) -> String {
    assert_eq!(code(o), 0, "stderr: {}", stderr(o));
    assert!(o.stderr.is_empty(), "stderr not clean: {:?}", stderr(o));
    stdout(o)
}

/// Exactly one `nvs: ` line on stderr containing `want`, exit `code`.
fn fails(o: &Output, want_code: i32, want: &str) -> String {
    let e = stderr(o);
    assert_eq!(code(o), want_code, "stderr: {e} stdout: {}", stdout(o));
    assert!(e.starts_with("nvs: ") && e.lines().count() == 1, "one line: {e:?}");
    assert!(e.contains(want), "expected {want:?} in {e:?}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("nvs-inspect").tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

/// A 1 MiB pool of 64 KiB segments: `a` v1 (lane 0), `big` v1 full and v2, v3 deltas
/// (lane 0; 100 000 bytes, a span), `c` v1 with metadata on lane 2, lane 2 closed.
fn sample(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("p.pool");
    ok(&nvs(&["create", s(&p), "--size", "1M", "--segment-size", "64K", "--lanes", "4"]));
    assert_eq!(ok(&nvs_stdin(&["put", s(&p), "a"], b"hello\n")), "1\n");
    let mut big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let f = dir.join("big");
    std::fs::write(&f, &big).unwrap();
    assert_eq!(ok(&nvs(&["put", s(&p), "big", s(&f)])), "1\n");
    for at in [5000, 50_000] {
        big[at] ^= 0xff;
        std::fs::write(&f, &big).unwrap();
        let o = nvs(&["put", s(&p), "big", s(&f), "--delta"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
    }
    assert_eq!(ok(&nvs_stdin(&["put", s(&p), "c", "--lane", "2", "--meta", "k=v"], b"xyz")), "1\n");
    ok(&nvs(&["close", s(&p), "--lane", "2"]));
    p
}

/// The `(offset, rest of line)` of every dump line starting with `prefix` (after
/// indentation), e.g. "unit" or "object".
fn dumped(dump: &str, prefix: &str) -> Vec<(usize, String)> {
    dump.lines()
        .filter_map(|l| l.trim_start().strip_prefix(prefix))
        .filter_map(|l| l.strip_prefix(" @0x"))
        .map(|l| {
            let (hex, rest) = l.split_once(':').expect("offset:");
            (usize::from_str_radix(hex, 16).expect("hex offset"), rest.to_string())
        })
        .collect()
}

fn flip(p: &Path, at: usize, mask: u8) {
    let mut b = std::fs::read(p).unwrap();
    b[at] ^= mask;
    std::fs::write(p, b).unwrap();
}

/// Salvage's listing of NEW: `ls -l` of it.
fn listing(p: &Path) -> String {
    ok(&nvs(&["ls", "-l", s(p)]))
}

#[test]
fn dump_of_a_clean_pool_shows_every_unit_and_object() {
    let dir = tmp();
    let p = sample(dir.path());
    let before = std::fs::read(&p).unwrap();
    let d = ok(&nvs(&["dump", s(&p)]));
    assert!(d.starts_with("pool "), "{d}");
    assert!(d.contains("recovery: ok: "), "{d}");
    let objects = dumped(&d, "object");
    let names: Vec<&str> = objects.iter().map(|(_, l)| l.split_whitespace().take(2).last().unwrap()).collect();
    assert_eq!(names, ["v1", "v1", "v2", "v3", "v1"], "{d}");
    assert!(objects[2].1.contains("delta depth 1 of v1") && objects[3].1.contains("delta depth 2 of v2"), "{d}");
    assert!(objects[4].1.contains(" meta 4 "), "c's metadata k=v and its newline: {d}");
    assert!(objects.iter().all(|(_, l)| l.contains(" ok checksum ")), "every payload verified: {d}");
    assert!(d.contains("marker end-of-stream"), "lane 2's close: {d}");
    assert!(d.contains("span 2"), "big v1 takes a span: {d}");
    assert!(d.contains("segments 4..=14: free"), "{d}");
    assert!(d.contains("summary: ") && d.contains(" 5 objects, ") && d.contains(" 0 damaged headers"), "{d}");
    // Offsets are where the bytes are: the first object's name follows its 48-byte header.
    let bytes = std::fs::read(&p).unwrap();
    let (a_off, _) = objects[0];
    assert_eq!(&bytes[a_off + 48..a_off + 49], b"a");
    assert_eq!(before, bytes, "dump wrote the pool");
}

#[test]
fn dump_of_a_damaged_pool_reports_the_damage_and_goes_on() {
    let dir = tmp();
    let p = sample(dir.path());
    let clean = ok(&nvs(&["dump", s(&p)]));
    let units = dumped(&clean, "unit");
    let objects = dumped(&clean, "object");
    // Damage the unit of big v2 (its header's unit_len), and a byte of big v1's payload.
    let v2_unit = units.iter().find(|(_, l)| l.contains("seq 4 ")).expect("unit seq 4").0;
    flip(&p, v2_unit + 20, 1);
    let payload =
        |l: &str| usize::from_str_radix(l.split("payload @0x").nth(1).unwrap().split(' ').next().unwrap(), 16);
    flip(&p, payload(&objects[1].1).unwrap() + 10, 0x10);
    let before = std::fs::read(&p).unwrap();
    let o = nvs(&["dump", s(&p)]);
    fails(&o, 1, "damage found: 1 damaged headers, 1 bad payloads");
    let d = stdout(&o);
    assert!(d.contains("recovery: FAILED: "), "{d}");
    assert!(
        d.contains(&format!("DAMAGE @{v2_unit:#x} (lane 0 seq 4): committed unit or object header checksum")),
        "{d}"
    );
    assert!(d.contains("; resumed at 0x"), "{d}");
    let after = dumped(&d, "object");
    assert_eq!(after.len(), 4, "big v2 is gone, the rest still shown: {d}");
    assert!(after[1].1.contains(" BAD checksum "), "{d}");
    assert!(after[2].1.contains(" v3 delta"), "walked past the damage: {d}");
    assert_eq!(before, std::fs::read(&p).unwrap(), "dump wrote the pool");
}

#[test]
fn dump_of_truncated_and_damaged_segment_headers() {
    let dir = tmp();
    let p = sample(dir.path());
    let clean = ok(&nvs(&["dump", s(&p)]));
    // c's segment (lane 2's only one): one byte of its header's magic.
    let seg3 = 0x1000 + 3 * 0x10000;
    assert!(clean.contains(&format!("segment 3 @{seg3:#x}: lane 2 ")), "{clean}");
    let bytes = std::fs::read(&p).unwrap();
    let h = dir.path().join("h.pool");
    std::fs::write(&h, &bytes).unwrap();
    flip(&h, seg3 + 2, 0x40);
    let o = nvs(&["dump", s(&h)]);
    fails(&o, 1, "damage found");
    let d = stdout(&o);
    assert!(d.contains("segment 3 @0x31000: DAMAGED header; its first unit is lane 2 seq 0"), "{d}");
    assert!(dumped(&d, "object").iter().any(|(_, l)| l.starts_with(" c v1 ")), "{d}");
    // Cut inside segment 3: segments 0..3 are walked.
    let t = dir.path().join("t.pool");
    std::fs::write(&t, &bytes[..seg3 + 4096]).unwrap();
    let o = nvs(&["dump", s(&t)]);
    fails(&o, 1, "truncated");
    let d = stdout(&o);
    assert!(d.contains("holds 3 of the 15 segments whole"), "{d}");
    assert!(d.contains("TRUNCATED: the file (204800 bytes)"), "{d}");
    assert_eq!(dumped(&d, "object").len(), 4, "{d}");
}

#[test]
fn dump_range_is_a_hex_dump_of_the_file() {
    let dir = tmp();
    let p = sample(dir.path());
    let o = ok(&nvs(&["dump", s(&p), "--range", "0:20"]));
    let lines: Vec<&str> = o.lines().collect();
    assert_eq!(lines.len(), 2, "{o}");
    assert_eq!(lines[0], "00000000  4e 56 53 50 4f 4f 4c 00  03 00 00 00 03 00 00 00  |NVSPOOL.........|");
    // The last line's ASCII column stays where the others have it.
    assert!(lines[1].starts_with("00000010  ") && lines[1].len() == lines[0].len() - 12, "{o}");
    assert_eq!(lines[1].find('|'), lines[0].find('|'), "{o}");
    // Hex and suffixes; clipped at the end of the file.
    let seg = ok(&nvs(&["dump", s(&p), "--range", "0x1000:8"]));
    assert!(seg.starts_with("00001000  4e 56 53 53 45 47 4d 00") && seg.contains("|NVSSEGM.|"), "{seg}");
    let end = ok(&nvs(&["dump", s(&p), "--range", "1048560:1K"]));
    assert_eq!(end.lines().count(), 1, "{end}");
    // Any file, even one that is no pool.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"hello, world").unwrap();
    assert!(ok(&nvs(&["dump", s(&junk), "--range", "7:5"])).contains("|world|"));
    fails(&nvs(&["dump", s(&junk)]), 1, "not an nvs pool");
    // Bad ranges.
    for bad in ["10", "a:b", "0x:4", "1:18446744073709551615", ":", "-1:4", "4:-1"] {
        fails(&nvs(&["dump", s(&p), &format!("--range={bad}")]), 2, "bad range");
    }
    fails(&nvs(&["dump", s(&p), "--range", "2M:1"]), 2, "past its end");
    fails(&nvs(&["dump", s(dir.path()), "--range", "0:1"]), 2, "regular file");
    fails(&nvs(&["dump"]), 2, "required");
}

#[test]
fn salvage_of_a_clean_pool_copies_everything() {
    let dir = tmp();
    let p = sample(dir.path());
    let before = std::fs::read(&p).unwrap();
    let new = dir.path().join("new.pool");
    let o = ok(&nvs(&["salvage", s(&p), s(&new)]));
    assert!(o.contains("salvaged 5 objects of 3 names") && o.contains("0 objects lost, 0 damaged"), "{o}");
    assert_eq!(before, std::fs::read(&p).unwrap(), "salvage wrote BAD");
    // Same names, versions, lengths and metadata; deltas stored full.
    let l = listing(&new);
    assert!(l.contains("v3  100000 bytes  full") && l.contains("meta k=v"), "{l}");
    for (name, v) in [("a", "1"), ("big", "1"), ("big", "2"), ("big", "3"), ("c", "1")] {
        let a = nvs(&["get", s(&p), name, "--version", v]);
        let b = nvs(&["get", s(&new), name, "--version", v]);
        assert_eq!((code(&a), code(&b)), (0, 0));
        assert_eq!(a.stdout, b.stdout, "{name} v{v}");
    }
    ok(&nvs(&["check", s(&new)]));
    // Lane 2 was closed in BAD, and is in NEW: its follower ends (lane 0 had a writer
    // that detached, so follow waits on it: a timeout).
    let info = ok(&nvs(&["info", s(&new), "--stats", "--json"]));
    assert!(info.contains(r#"{"kind":"lane","lane":2,"#) && info.contains(r#""closed":true}"#), "{info}");
}

/// A NEW too small for what BAD holds is a usage error (exit 2), not damage of BAD, and
/// leaves no half copy.
#[test]
fn salvage_into_a_pool_too_small_is_an_error_and_keeps_nothing() {
    let dir = tmp();
    let p = sample(dir.path());
    let new = dir.path().join("new.pool");
    let e = fails(&nvs(&["salvage", s(&p), s(&new), "--size", "192K"]), 2, "full after");
    assert!(!e.contains("damaged"), "{e}");
    assert!(std::fs::symlink_metadata(&new).is_err(), "a failed salvage left {}", new.display());
}

#[test]
fn salvage_of_a_damaged_pool_copies_what_verifies_and_lists_the_rest() {
    let dir = tmp();
    let p = sample(dir.path());
    let clean = ok(&nvs(&["dump", s(&p)]));
    let clean_bytes = std::fs::read(&p).unwrap();
    let units = dumped(&clean, "unit");
    let objects = dumped(&clean, "object");
    // a's payload (one bit), and big v2's unit header: v2 is gone, and v3 with it.
    let a_payload =
        usize::from_str_radix(objects[0].1.split("payload @0x").nth(1).unwrap().split(' ').next().unwrap(), 16);
    flip(&p, a_payload.unwrap(), 1);
    flip(&p, units.iter().find(|(_, l)| l.contains("seq 4 ")).unwrap().0 + 30, 4);
    let before = std::fs::read(&p).unwrap();
    let new = dir.path().join("new.pool");
    let o = nvs(&["salvage", s(&p), s(&new)]);
    // Lost: a v1 and big v3, named, and big v2's unit, whose header is gone.
    fails(&o, 1, "damaged: 2 objects lost and 1 unit of unknown objects, 1 damaged regions");
    let text = stdout(&o);
    assert!(text.contains("note: not read through recovery"), "{text}");
    assert!(text.contains("lost: a v1 (lane 0 seq 0): ") && text.contains("payload checksum mismatch"), "{text}");
    assert!(text.contains("lost: big v3 (lane 0 seq 6): its delta parent v2 is lost"), "{text}");
    assert!(text.contains("salvaged 2 objects of 2 names"), "{text}");
    assert_eq!(before, std::fs::read(&p).unwrap(), "salvage wrote BAD");
    let l = listing(&new);
    assert!(l.starts_with("big  versions=1 ") && l.contains("\nc  versions=1 "), "{l}");
    assert_eq!(ok(&nvs(&["get", s(&new), "c"])), "xyz");

    // Truncated: what the file still holds.
    let t = dir.path().join("t.pool");
    std::fs::write(&t, &clean_bytes[..0x31000]).unwrap();
    let new2 = dir.path().join("new2.pool");
    let o = nvs(&["salvage", s(&t), s(&new2)]);
    fails(&o, 1, "and what unread damaged space held");
    assert!(stdout(&o).contains("damaged: truncated: the file holds 3 of the 15 segments whole"), "{}", stdout(&o));
    let l = listing(&new2);
    assert!(l.contains("big  versions=3 ") && !l.contains("\nc "), "{l}");
}

#[test]
fn salvage_refuses_to_write_onto_bad_or_any_existing_file() {
    let dir = tmp();
    let p = sample(dir.path());
    let before = std::fs::read(&p).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    let hard = dir.path().join("hard");
    std::fs::hard_link(&p, &hard).unwrap();
    for new in [s(&p), s(&link), s(&hard)] {
        fails(&nvs(&["salvage", s(&p), new]), 2, "is the pool being salvaged");
    }
    // The pool as the child's stdin, named /proc/self/fd/0.
    let o = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["salvage", s(&p), "/proc/self/fd/0"])
        .stdin(std::fs::File::open(&p).unwrap())
        .output()
        .unwrap();
    fails(&o, 2, "is the pool being salvaged");
    let other = dir.path().join("other");
    std::fs::write(&other, b"keep me").unwrap();
    fails(&nvs(&["salvage", s(&p), s(&other)]), 2, "exists");
    assert_eq!(std::fs::read(&other).unwrap(), b"keep me");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    fails(&nvs(&["salvage", s(&p), s(&dangling)]), 2, "exists");
    assert!(!dir.path().join("nowhere").exists());
    assert_eq!(before, std::fs::read(&p).unwrap());
    // BAD that is no pool, a directory, missing: refused, NEW not made.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![7u8; 10_000]).unwrap();
    let new = dir.path().join("new.pool");
    fails(&nvs(&["salvage", s(&junk), s(&new)]), 1, "not an nvs pool");
    fails(&nvs(&["salvage", s(dir.path()), s(&new)]), 2, "not a regular file");
    fails(&nvs(&["salvage", s(&dir.path().join("missing")), s(&new)]), 2, "No such file");
    assert!(!new.exists());
    fails(&nvs(&["salvage", s(&p)]), 2, "required");
    fails(&nvs(&["salvage", s(&p), s(&new), "--size", "1Q"]), 2, "bad size");
    // A NEW too small for the pool's geometry is refused before anything is written.
    fails(&nvs(&["salvage", s(&p), s(&new), "--size", "4K"]), 2, "");
    assert!(!new.exists());
}

#[test]
fn info_stats_and_json() {
    let dir = tmp();
    let p = sample(dir.path());
    let t = ok(&nvs(&["info", s(&p), "--stats"]));
    assert!(t.contains("per lane") && t.contains("per segment"), "{t}");
    assert!(t.contains("free segments: 11 (720896 bytes)"), "{t}");
    let j = ok(&nvs(&["info", s(&p), "--json"]));
    assert_eq!(j.lines().count(), 1, "{j}");
    assert!(j.starts_with(r#"{"kind":"pool","pool":""#), "{j}");
    assert!(j.contains(r#","format_version":3,"pool_id":"0x"#), "{j}");
    assert!(j.contains(r#","segment_len":65536,"segment_count":15,"segments_used":4,"segments_free":11,"lanes_max":4,"lanes_in_use":2,"payload_checksum":true,"deltas":true,"#), "{j}");
    assert!(j.contains(r#","objects":5,"#), "{j}");
    let js = ok(&nvs(&["info", s(&p), "--json", "--stats"]));
    let lines: Vec<&str> = js.lines().collect();
    let upto_time = |l: &str| l.split(r#","open_us""#).next().unwrap().to_string();
    assert_eq!(upto_time(lines[0]), upto_time(&j), "the pool line, then the stats");
    assert!(lines[1].starts_with(r#"{"kind":"lane","lane":0,"segments":3,"units":8,"objects":4,"deltas":2,"#), "{js}");
    assert!(
        lines[2]
            .starts_with(r#"{"kind":"lane","lane":2,"segments":1,"units":3,"objects":1,"deltas":0,"payload_bytes":3,"#),
        "{js}"
    );
    assert!(lines[2].ends_with(r#""closed":true}"#), "{js}");
    let segs: Vec<&&str> = lines.iter().filter(|l| l.starts_with(r#"{"kind":"segment""#)).collect();
    assert_eq!(segs.len(), 3, "{js}");
    assert!(segs[1].contains(r#""segment":1,"lane":0,"chain_seq":1,"damaged":false,"span":2,"#), "{js}");
    assert_eq!(*lines.last().unwrap(), r#"{"kind":"free","segments":11,"free_bytes":720896}"#);
    // Per segment, bytes add up: in units + wasted + free = the segment's bytes.
    let num = |l: &str, k: &str| -> u64 {
        l.split(&format!("\"{k}\":")).nth(1).unwrap().split([',', '}']).next().unwrap().parse().unwrap()
    };
    for l in &segs {
        let total = num(l, "unit_bytes") + num(l, "wasted_bytes") + num(l, "free_bytes");
        assert_eq!(total, num(l, "span") * 65536, "{l}");
    }
    // Payload bytes: the lanes' add up to recovery's.
    assert_eq!(num(lines[1], "payload_bytes") + num(lines[2], "payload_bytes"), num(lines[0], "payload_bytes"));
    fails(&nvs(&["info", s(&dir.path().join("nope")), "--stats"]), 2, "No such file");
    fails(&nvs(&["info", s(&p), "--stats", "--bogus"]), 2, "unexpected argument");
}

#[test]
fn follow_json_one_object_per_commit() {
    let dir = tmp();
    let p = dir.path().join("f.pool");
    ok(&nvs(&["create", s(&p), "--size", "1M", "--lanes", "2"]));
    ok(&nvs_stdin(&["put", s(&p), "t\u{e9}mp"], b"12345"));
    ok(&nvs_stdin(&["put", s(&p), "x", "--lane", "1"], b"1"));
    ok(&nvs(&["close", s(&p), "--lane", "0"]));
    ok(&nvs(&["close", s(&p), "--lane", "1"]));
    let o = ok(&nvs(&["follow", s(&p), "--json", "--timeout", "5"]));
    let mut lines: Vec<&str> = o.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            r#"{"lane":0,"name":"témp","name_hex":"74c3a96d70","version":1,"len_bytes":5}"#,
            r#"{"lane":1,"name":"x","name_hex":"78","version":1,"len_bytes":1}"#,
        ]
    );
    let only = ok(&nvs(&["follow", s(&p), "x", "--json", "--timeout", "5"]));
    assert_eq!(only, "{\"lane\":1,\"name\":\"x\",\"name_hex\":\"78\",\"version\":1,\"len_bytes\":1}\n");
    fails(&nvs(&["follow", s(&dir.path().join("nope")), "--json"]), 2, "No such file");
}

/// Progress bars only on a terminal: with stderr a pipe, a big put, a salvage and a
/// check write nothing there.
#[test]
fn no_progress_output_when_stderr_is_not_a_terminal() {
    let dir = tmp();
    let p = dir.path().join("big.pool");
    ok(&nvs(&["create", s(&p), "--size", "64M"]));
    let f = dir.path().join("input");
    std::fs::write(&f, vec![3u8; 20 << 20]).unwrap();
    assert_eq!(ok(&nvs(&["put", s(&p), "x", s(&f)])), "1\n");
    ok(&nvs(&["check", s(&p)]));
    ok(&nvs(&["salvage", s(&p), s(&dir.path().join("copy.pool"))]));
}

/// The other half: with stderr a terminal (a pseudo-terminal here), a put of a big file
/// draws its spinner there, and stdout still holds the version alone.
#[test]
fn progress_bar_on_a_terminal() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let dir = tmp();
    let p = dir.path().join("big.pool");
    ok(&nvs(&["create", s(&p), "--size", "64M"]));
    let f = dir.path().join("input");
    std::fs::write(&f, vec![3u8; 20 << 20]).unwrap();
    // SAFETY: plain libc calls on a descriptor this test owns; ptsname's buffer is read
    // at once, before any other call could reuse it.
    let (master, slave) = unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0, "posix_openpt");
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(m)).to_owned();
        let sl = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(sl >= 0, "open the pty's slave");
        (std::fs::File::from_raw_fd(m), std::fs::File::from_raw_fd(sl))
    };
    let child = Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", s(&p), "x", s(&f)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(slave)
        .spawn()
        .unwrap();
    // Read the terminal until the child is gone (then reads fail with EIO).
    let reader = std::thread::spawn(move || {
        let mut master = master;
        let (mut all, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        all
    });
    let o = child.wait_with_output().unwrap();
    assert_eq!((code(&o), stdout(&o)), (0, "1\n".to_string()));
    let term = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
    assert!(term.contains("putting 20 MiB"), "no spinner on the terminal: {term:?}");
}

/// Lines of units zeroed (4 KiB of zeros, say) before later committed units of their
/// lane. Recovery ends the lane at the first zeroed slot, and used to do so silently:
/// `check` said clean, `dump` showed "end of units", `salvage` kept the objects before
/// the zeros and said nothing was lost. Now each names the damage, and salvage gets the
/// later units back and counts what is lost: here 3 whole units (by their seqs, their
/// objects unknown) when the zeros start at a unit, one object more (counted by its
/// unit's header) when they start inside one.
#[test]
fn zeroed_units_before_later_ones_are_damage_counted_and_salvaged_past() {
    let dir = tmp();
    let p = dir.path().join("z.pool");
    {
        let opts = nvs_std::CreateOptions::new().segment_len(256 << 10);
        let mut pool = nvs_std::FilePool::create(&p, 2 << 20, &opts).unwrap();
        for v in 0..40u32 {
            let bytes: Vec<u8> = (0..3000u32).map(|i| (i * 31 + v * 7) as u8).collect();
            pool.put(0, nvs_core::Object::new(&format!("n{}", v % 5), &bytes)).unwrap();
        }
        pool.close().unwrap();
    }
    let clean = std::fs::read(&p).unwrap();
    let units = dumped(&ok(&nvs(&["dump", s(&p)])), "unit");
    assert_eq!(units.len(), 41, "one unit per put, and the detach marker of the close");
    // (zeros from, zeros to, objects salvaged, lost as counted)
    let cases = [
        (units[20].0, units[23].0, 37, "0 objects lost and 3 units of unknown objects"),
        (units[20].0 + 64, units[23].0, 37, "1 object lost and 2 units of unknown objects"),
    ];
    for (from, to, kept, lost) in cases {
        let mut img = clean.clone();
        img[from..to].fill(0);
        std::fs::write(&p, &img).unwrap();
        let o = nvs(&["check", s(&p)]);
        assert_eq!(code(&o), 1, "check: {}{}", stdout(&o), stderr(&o));
        let d = nvs(&["dump", s(&p)]);
        assert_eq!(code(&d), 1);
        assert!(stdout(&d).contains(&format!("DAMAGE @{from:#x} (lane 0 seq 20)")), "{}", stdout(&d));
        let new = dir.path().join(format!("new-{from}.pool"));
        let o = nvs(&["salvage", s(&p), s(&new)]);
        fails(&o, 1, lost);
        assert!(stdout(&o).contains(&format!("salvaged {kept} objects")), "{}", stdout(&o));
        // Units 20..=22 held n0 v5, n1 v5, n2 v5.
        let l = listing(&new);
        assert!(l.contains("n0  versions=7 ") && l.contains("n3  versions=8 "), "{l}");
    }
}

/// Lines of units zeroed up to the end of a segment, the lane going on in its next
/// segment: no later unit in the segment shows the loss, and salvage used to count none
/// of those units ("1 object lost" beside 5 gone). The lane's next segment starts at a
/// later seq than the units reach: check and dump name the place, salvage counts them.
#[test]
fn zeroed_units_at_a_segments_end_are_counted_from_the_lanes_next_segment() {
    let dir = tmp();
    let p = dir.path().join("z.pool");
    {
        let opts = nvs_std::CreateOptions::new().segment_len(64 << 10);
        let mut pool = nvs_std::FilePool::create(&p, 1 << 20, &opts).unwrap();
        for v in 0..40u32 {
            let bytes: Vec<u8> = (0..3000u32).map(|i| (i * 31 + v * 7) as u8).collect();
            pool.put(0, nvs_core::Object::new("n", &bytes)).unwrap();
        }
        pool.close().unwrap();
    }
    let dump = ok(&nvs(&["dump", s(&p)]));
    let units = dumped(&dump, "unit");
    let line = dump.lines().find_map(|l| l.strip_prefix("segment 1 @0x")).expect("segment 1");
    assert!(line.contains("lane 0 chain 1"), "{dump}");
    let second = usize::from_str_radix(line.split_once(':').unwrap().0, 16).unwrap();
    // The last 4 units of the first segment (seqs 16..=19 of 20), zeroed to its end.
    let first_of_second = units.iter().position(|u| u.0 > second).unwrap();
    assert_eq!(first_of_second, 20, "{dump}");
    let from = units[16].0;
    let mut img = std::fs::read(&p).unwrap();
    img[from..second].fill(0);
    std::fs::write(&p, &img).unwrap();
    let o = nvs(&["check", s(&p)]);
    assert_eq!(code(&o), 1, "check: {}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("damaged: {from:#x} (lane 0 seq 16)")), "{}", stdout(&o));
    let d = nvs(&["dump", s(&p)]);
    assert!(stdout(&d).contains(&format!("DAMAGE @{from:#x} (lane 0 seq 16)")), "{}", stdout(&d));
    let new = dir.path().join("new.pool");
    let o = nvs(&["salvage", s(&p), s(&new)]);
    fails(&o, 1, "0 objects lost and 4 units of unknown objects");
    assert!(stdout(&o).contains("salvaged 36 objects"), "{}", stdout(&o));
    assert!(listing(&new).contains("n  versions=36 "), "{}", listing(&new));
}

/// A pool of many objects gets an index checkpoint at its writer's close: `nvs info`
/// says its open used it; `nvs check` recovers whatever lies beside the pool, and finds
/// damage to an old unit's header that an open from the checkpoint does not read.
#[test]
fn info_names_the_index_checkpoint_and_check_does_not_trust_it() {
    let dir = tmp();
    let p = dir.path().join("many.pool");
    let opts = nvs_std::CreateOptions { lanes_max: 2, ..Default::default() };
    let mut pool = nvs_std::FilePool::create(&p, 32 << 20, &opts).unwrap();
    for i in 0..nvs_std::CHECKPOINT_MIN_OBJECTS {
        pool.put(0, nvs_core::Object::new("step", &i.to_le_bytes())).unwrap();
    }
    let first_unit = {
        // The segment the first object is in: segments end at the pool's end.
        let l = pool.layout();
        let data_off = l.pool_len - l.segment_count as u64 * l.segment_len;
        let off = pool.stat("step", 1).unwrap().offset;
        (data_off + (off - data_off) / l.segment_len * l.segment_len) as usize
    };
    drop(pool);
    assert!(nvs_std::checkpoint_path(&p).exists());
    let t = ok(&nvs(&["info", s(&p)]));
    assert!(t.contains("the index checkpoint beside the pool, caught up"), "{t}");
    assert!(ok(&nvs(&["info", s(&p), "--json"])).contains(r#""index_checkpoint":"used""#));
    ok(&nvs(&["check", s(&p)]));
    // A byte of the first unit's header (after its segment's header line) flipped.
    let mut img = std::fs::read(&p).unwrap();
    let at = first_unit + 64 + 8;
    img[at] ^= 0x10;
    std::fs::write(&p, &img).unwrap();
    let t = ok(&nvs(&["info", s(&p)]));
    assert!(t.contains("caught up"), "an open from the checkpoint does not read old headers: {t}");
    let o = nvs(&["check", s(&p)]);
    assert_eq!(code(&o), 1, "check recovers and finds it: {}{}", stdout(&o), stderr(&o));
}
