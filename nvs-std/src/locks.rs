//! The file locks writers take on a pool file: open-file-description (OFD) locks, which
//! the kernel drops when the writer's file is closed — also when its process dies — and
//! whose write kind needs a descriptor opened for writing (a user who can only read a
//! pool can neither take a writer's place nor keep writers out). Locks cover bytes of
//! the file but guard nothing in them; they live in the superblock's first line and in
//! the unused bytes after it:
//!
//! - byte 0: the one writer of a whole pool ([`crate::Access::ReadWrite`]);
//! - byte 1: the claim lock, held for a segment claim, a release or a recovery by a
//!   writer of some lanes (nvs-core's `Media::lock_claims`);
//! - bytes 64 + lane: that lane's writer. The one writer of a whole pool holds all 256;
//!   a writer of some lanes ([`crate::FilePool::open_lanes`]) holds its own.
//!
//! A follower asks whether a lane's writer lives by looking for its lock (`F_OFD_GETLK`,
//! which takes nothing and so never gets in a writer's way).

use std::fs::File;
use std::os::fd::AsRawFd;

/// The writer of a whole pool.
pub const WRITER: i64 = 0;
/// The claim lock.
pub const CLAIMS: i64 = 1;
/// Lane `l`'s writer holds byte `LANES + l`.
pub const LANES: i64 = 64;
/// Bytes of lane locks: one per lane a pool may have.
pub const LANE_COUNT: i64 = nvs_core::LANES_MAX as i64;

fn ofd(kind: libc::c_int, start: i64, len: i64) -> libc::flock {
    // SAFETY: `flock` is plain data; all-zero is a valid value, completed below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start as libc::off_t;
    fl.l_len = len as libc::off_t;
    fl.l_pid = 0; // required for OFD locks
    fl
}

fn fcntl(file: &File, cmd: libc::c_int, fl: &mut libc::flock) -> std::io::Result<()> {
    // SAFETY: `fl` is a valid, initialised `struct flock`; the fd is open for the call.
    match unsafe { libc::fcntl(file.as_raw_fd(), cmd, fl as *mut libc::flock) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Take a write lock on `start .. start + len` without waiting: `Ok(false)` if another
/// open file description holds a lock there.
pub fn try_lock(file: &File, start: i64, len: i64) -> std::io::Result<bool> {
    match fcntl(file, libc::F_OFD_SETLK, &mut ofd(libc::F_WRLCK, start, len)) {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Drop this description's locks on `start .. start + len`.
pub fn unlock(file: &File, start: i64, len: i64) -> std::io::Result<()> {
    fcntl(file, libc::F_OFD_SETLK, &mut ofd(libc::F_UNLCK, start, len))
}

/// Does any open file description (another one than `file`'s) hold a write lock on a
/// byte of `start .. start + len`? Takes nothing.
pub fn held(file: &File, start: i64, len: i64) -> bool {
    let mut fl = ofd(libc::F_RDLCK, start, len);
    fcntl(file, libc::F_OFD_GETLK, &mut fl).is_ok() && fl.l_type != libc::F_UNLCK as libc::c_short
}

/// The process holding an OFD write lock on byte `at` of `file`, as far as `/proc` tells
/// (OFD locks report no owner through `fcntl` or `/proc/locks`: each process's
/// `/proc/PID/fdinfo` lists the locks of its descriptions); 0 if none is found.
pub fn holder(file: &File, at: i64) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else { return 0 };
    let (dev, ino) = (meta.dev(), meta.ino());
    // "fe:00:10010854": major:minor:inode, as fdinfo prints them (major, minor in hex).
    let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff));
    let id = format!("{major:02x}:{minor:02x}:{ino}");
    let range = format!(" {at} {at}");
    let Ok(procs) = std::fs::read_dir("/proc") else { return 0 };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else { continue };
        for fd in fds.flatten() {
            let Ok(info) = std::fs::read_to_string(fd.path()) else { continue };
            if info
                .lines()
                .any(|l| l.contains("OFDLCK") && l.contains("WRITE") && l.contains(&id) && l.ends_with(&range))
            {
                return pid;
            }
        }
    }
    0
}
