//! Readers of sparse pool files on tmpfs: a read fault on a hole of a tmpfs file gives
//! it a page of memory, and reading a pool reads its holes (every segment header at
//! open, payloads in a check or get). A file whose holes exceed what memory can give is
//! refused before anything is read; a sparse copy of a real pool still opens and reads.

use nvs_core::internals::format::{Superblock, SUPERBLOCK_SEED};
use nvs_core::internals::hash::hash64;
use nvs_std::{Access, CreateOptions, Error, FilePool, MappedMedia};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const SEGMENT: u64 = 4096;

/// A real pool of 4 KiB segments on tmpfs holding `d` v1, and its bytes.
fn small_pool(dir: &Path) -> Vec<u8> {
    let path = dir.join("real.pool");
    let opts = CreateOptions { segment_len: Some(SEGMENT), ..CreateOptions::default() };
    let mut p = FilePool::create(&path, 1 << 20, &opts).unwrap();
    p.put(0, nvs_core::Object::new("d", b"hello")).unwrap();
    p.close().unwrap();
    std::fs::read(&path).unwrap()
}

/// Write `bytes` to `path` as a file of `len` bytes, skipping every all-zero page (a
/// sparse copy: those pages are holes).
fn sparse_copy(path: &Path, bytes: &[u8], len: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    f.set_len(len).unwrap();
    for (i, page) in bytes.chunks(4096).enumerate() {
        if page.iter().any(|&b| b != 0) {
            f.seek(SeekFrom::Start(i as u64 * 4096)).unwrap();
            f.write_all(page).unwrap();
        }
    }
}

fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn mem_available() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = m.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[test]
fn a_sparse_pool_of_too_many_segments_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let bytes = small_pool(dir.path());
    // Its superblock, claiming 2^24 segments of 4 KiB (64 GiB), with a valid checksum.
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&bytes[..64]);
    sb.segment_count = 1 << 24;
    sb.pool_len = sb.data_off + u64::from(sb.segment_count) * SEGMENT;
    sb.checksum = hash64(SUPERBLOCK_SEED, &bytemuck::bytes_of(&sb)[..56]);
    let mut forged = bytes.clone();
    forged[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    let path = dir.path().join("forged.pool");
    sparse_copy(&path, &forged, sb.pool_len);
    let before = allocated(&path);
    // Reading every header would take 64 GiB of tmpfs: more than half of any memory
    // this test runs beside (checked, so the assertion below means what it says).
    assert!(mem_available() < 128 << 30, "this host has too much memory free for the test");
    // The mapping alone first: without the check it opens having read nothing, and the
    // test fails there rather than in the open's recovery, which would read 64 GiB.
    let opens: [&dyn Fn() -> Result<(), Error>; 2] =
        [&|| MappedMedia::open_read_only(&path).map(|_| ()), &|| FilePool::open(&path, Access::ReadOnly).map(|_| ())];
    for open in opens {
        match open() {
            Err(Error::Unsupported { what, .. }) => {
                assert!(
                    what.contains("sparse pool file on tmpfs, ramfs or an overlay")
                        && what.contains("64.0 GiB are holes"),
                    "{what}"
                )
            }
            other => panic!("a 64 GiB sparse pool on tmpfs opened: {other:?}"),
        }
    }
    assert_eq!(allocated(&path), before, "nothing of the file was read into memory");
}

#[test]
fn a_sparse_copy_of_a_real_pool_still_opens_and_reads() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let bytes = small_pool(dir.path());
    let path = dir.path().join("copy.pool");
    sparse_copy(&path, &bytes, bytes.len() as u64);
    assert!(allocated(&path) < bytes.len() as u64, "the copy is sparse");
    let p = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert_eq!(p.get_vec("d", 1).unwrap(), b"hello");
}

/// Issue 55, item 10: a read needs the holes it reads, not the whole file's. A pool of
/// 64 segments of 1 GiB, sparse (64 GiB of holes), each segment's header line not zero
/// (as if each were owned): an open reads each segment's header, a get its object's
/// pages, a check its objects, and all work; a walk (dump, salvage) would read every
/// segment a header owns and is refused, naming why.
#[test]
fn a_sparse_pool_opens_gets_and_checks_when_its_holes_read_fit_and_a_walk_is_refused() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let bytes = small_pool(dir.path());
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&bytes[..64]);
    sb.segment_len = 1 << 30;
    sb.segment_count = 64;
    sb.pool_len = sb.data_off + u64::from(sb.segment_count) * sb.segment_len;
    sb.checksum = hash64(SUPERBLOCK_SEED, &bytemuck::bytes_of(&sb)[..56]);
    let mut forged = bytes.clone();
    forged[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    let path = dir.path().join("big.pool");
    sparse_copy(&path, &forged, sb.pool_len);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        for i in 1..u64::from(sb.segment_count) {
            f.write_all_at(&[0xA5], sb.data_off + i * sb.segment_len).unwrap();
        }
    }
    assert!(mem_available() < 128 << 30, "this host has too much memory free for the test");
    let before = allocated(&path);
    let p = FilePool::open(&path, Access::ReadOnly).expect("an open reads 64 headers, not 64 GiB");
    assert_eq!(p.get_vec("d", 1).unwrap(), b"hello");
    assert_eq!(p.verify().expect("a check reads the one object, not the holes"), 1);
    assert!(allocated(&path) - before <= 64 * 8192 + 65536, "only the headers' pages were read");
    match MappedMedia::open_read_only(&path) {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("reads every unit"), "{what}"),
        other => panic!("a walker over 64 GiB of holes on tmpfs opened: {other:?}"),
    }
}

/// A sparse pool (`CreateOptions::sparse`) takes blocks as its segments are claimed: a
/// 64 MiB pool holding 300 KiB holds a few MiB, and every object reads back, also after
/// a writer reopens it (which gives its lane's open segment its blocks).
#[test]
fn a_sparse_pool_takes_its_blocks_as_segments_are_claimed() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let path = dir.path().join("grow.pool");
    let mib = 1u64 << 20;
    let opts = CreateOptions::new().segment_len(mib).sparse(true);
    let mut p = FilePool::create(&path, 64 * mib, &opts).unwrap();
    // The superblock's page and each segment header's.
    assert!(allocated(&path) <= 65 * 4096, "at create: {} bytes", allocated(&path));
    let obj = |v: u64, len: usize| (0..len).map(|i| (i as u64 * 13 + v) as u8).collect::<Vec<u8>>();
    for v in 1..=3 {
        p.put(0, nvs_core::Object::new("a", &obj(v, 100 << 10))).unwrap();
    }
    let one = allocated(&path);
    // One segment, and on tmpfs the next one prepared ahead (the likely next claim).
    let headers = 64 * 4096;
    assert!((mib..=2 * mib + headers).contains(&one), "one segment claimed: {one} bytes");
    // A span of 3 segments (and 3 more ahead).
    p.put(0, nvs_core::Object::new("a", &obj(4, 2_500_000))).unwrap();
    let four = allocated(&path);
    assert!((4 * mib..=7 * mib + headers).contains(&four), "four segments: {four} bytes");
    p.close().unwrap();
    let four = allocated(&path);
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    p.put(0, nvs_core::Object::new("a", &obj(5, 10))).unwrap();
    p.close().unwrap();
    assert_eq!(allocated(&path), four, "a writer's open and a put into the open segment take nothing new");
    let r = FilePool::open(&path, Access::ReadOnly).unwrap();
    for (v, len) in [(1, 100 << 10), (2, 100 << 10), (3, 100 << 10), (4, 2_500_000), (5, 10)] {
        assert!(r.get_vec("a", v).unwrap() == obj(v, len), "v{v}");
    }
    assert_eq!(allocated(&path), four, "a reader reads only what is there");
}

/// A writer of a sparse copy of a pool no longer fills every hole at open: the
/// superblock page and its lane's open segment get blocks, the free segments stay holes.
#[test]
fn a_writer_of_a_sparse_copy_gives_blocks_only_where_it_stores() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("tmpfs at /dev/shm");
    let real = dir.path().join("real64.pool");
    let seg = 64u64 << 10;
    let mut p = FilePool::create(&real, 4 << 20, &CreateOptions::new().segment_len(seg)).unwrap();
    p.put(0, nvs_core::Object::new("d", b"hello")).unwrap();
    p.close().unwrap();
    let bytes = std::fs::read(&real).unwrap();
    let path = dir.path().join("copy.pool");
    sparse_copy(&path, &bytes, bytes.len() as u64);
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    // The superblock's page, the 63 segment headers the open read, the open segment.
    let at_open = allocated(&path);
    assert!(at_open <= 4096 + 63 * 4096 + seg, "the writer's open took {at_open} bytes of a 4 MiB pool");
    // Fill the open segment's tail (holes in the copy) and claim more.
    for v in 2..=200 {
        p.put(0, nvs_core::Object::new("d", &[v as u8; 1000])).unwrap();
    }
    p.close().unwrap();
    let r = FilePool::open(&path, Access::ReadWrite).unwrap();
    assert_eq!(r.get_vec("d", 1).unwrap(), b"hello");
    for v in 2..=200u64 {
        assert_eq!(r.get_vec("d", v).unwrap(), vec![v as u8; 1000], "v{v}");
    }
}

/// On a file system that fills, a sparse pool refuses the put that needs a segment
/// (`NoSpace`, nothing written), every committed object stays, and puts go on once there
/// is room. Needs a small tmpfs of its own: skipped where this process may not mount one.
#[test]
fn a_sparse_pool_on_a_full_file_system_refuses_the_put_not_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_mount) = SmallTmpfs::mount(dir.path(), 3 << 20) else {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    };
    let path = dir.path().join("full.pool");
    let mib = 1u64 << 20;
    std::fs::write(dir.path().join("ballast"), vec![1u8; mib as usize]).unwrap();
    let mut p = FilePool::create(&path, 64 * mib, &CreateOptions::new().segment_len(mib).sparse(true)).unwrap();
    let obj = |v: u64| vec![v as u8; 300 << 10];
    let mut stored = 0;
    let err = loop {
        match p.put(0, nvs_core::Object::new("x", &obj(stored + 1))) {
            Ok(_) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 100, "the 3 MiB file system never filled");
    };
    assert!(err.core() == Some(nvs_core::Error::NoSpace), "{err}");
    assert!(err.to_string().contains("no space left"), "{err}");
    assert!(stored >= 3, "{stored}");
    for v in 1..=stored {
        assert!(p.get_vec("x", v).unwrap() == obj(v), "v{v}");
    }
    // Readers of the full file system's pool still open, check and walk it: they read
    // its headers' pages and its objects, none of its holes (the free segments).
    let r = FilePool::open(&path, Access::ReadOnly).expect("a reader's open on a full file system");
    assert_eq!(r.verify().unwrap(), stored);
    drop(r);
    MappedMedia::open_read_only(&path).expect("a walker's open on a full file system");
    // Room again (a file beside it removed): the next put goes on.
    std::fs::remove_file(dir.path().join("ballast")).unwrap();
    assert_eq!(p.put(0, nvs_core::Object::new("x", &obj(stored + 1))).unwrap().version, stored + 1);
    p.close().unwrap();
    let r = FilePool::open(&path, Access::ReadWrite).unwrap();
    assert_eq!(r.latest("x").unwrap(), stored + 1);
    for v in 1..=stored + 1 {
        assert!(r.get_vec("x", v).unwrap() == obj(v), "v{v} after reopen");
    }
}

/// A tmpfs of `bytes` mounted at a directory, unmounted when dropped.
struct SmallTmpfs(std::ffi::CString);

impl SmallTmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<SmallTmpfs> {
        use std::os::unix::ffi::OsStrExt;
        let target = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
        let opts = std::ffi::CString::new(format!("size={bytes}")).ok()?;
        // SAFETY: valid NUL-terminated strings for the call's duration.
        let rc = unsafe { libc::mount(c"tmpfs".as_ptr(), target.as_ptr(), c"tmpfs".as_ptr(), 0, opts.as_ptr().cast()) };
        (rc == 0).then_some(SmallTmpfs(target))
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        // SAFETY: a valid NUL-terminated string.
        unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
    }
}
