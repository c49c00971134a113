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
/// 64 segments of 1 GiB, sparse (64 GiB of holes): an open reads each segment's header,
/// a get its object's pages, and both work; a check would read every unit and is
/// refused, naming why.
#[test]
fn a_sparse_pool_opens_and_gets_when_its_holes_read_fit_and_a_check_is_refused() {
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
    assert!(mem_available() < 128 << 30, "this host has too much memory free for the test");
    let before = allocated(&path);
    let p = FilePool::open(&path, Access::ReadOnly).expect("an open reads 64 headers, not 64 GiB");
    assert_eq!(p.get_vec("d", 1).unwrap(), b"hello");
    match p.verify() {
        Err(Error::Unsupported { what, .. }) => {
            assert!(what.contains("64.0 GiB are holes") && what.contains("reads every unit"), "{what}")
        }
        other => panic!("a check of 64 GiB of holes on tmpfs ran: {other:?}"),
    }
    assert!(allocated(&path) - before <= 64 * 8192 + 65536, "only the headers' pages were read");
    match MappedMedia::open_read_only(&path) {
        Err(Error::Unsupported { what, .. }) => assert!(what.contains("reads every unit"), "{what}"),
        other => panic!("a walker over 64 GiB of holes on tmpfs opened: {other:?}"),
    }
}
