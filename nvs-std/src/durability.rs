//! [`Durability`]: what an acknowledged put survives, and [`Backing`]: what a pool file is.
//!
//! Invariants:
//! - [`Durability::Dax`] is only ever used on persistent memory mapped directly, with
//!   non-temporal stores: a `/dev/dax` character device (the kernel's sysfs says its
//!   subsystem is `dax`), or a file on a DAX file system that the kernel mapped with
//!   `MAP_SYNC` (fsdax). There NT stores plus `sfence` reach the persistence domain.
//!   Asking for it anywhere else is an error.
//! - The default never promises more than it gives: `msync` on a disk file (every fence
//!   ends with `msync(MS_SYNC)`), `process` on tmpfs (nothing there survives a power
//!   loss, so an msync would buy nothing), `dax` on a DAX device or an fsdax file.

use crate::error::{Error, Result};
use std::fmt;
use std::fs::File;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::str::FromStr;

/// `statfs.f_type` of tmpfs (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// `statfs.f_type` of ramfs: memory like tmpfs (never written back, no size limit).
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// What a put must survive once it has returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// NT stores + `sfence` reach the persistence domain of persistent memory: process
    /// crash and power loss. Only for `/dev/dax*` character devices and files on a DAX
    /// file system mapped with `MAP_SYNC`.
    Dax,
    /// NT stores + `sfence`, then `msync(MS_SYNC)` of the pages dirtied since the last
    /// fence, at every fence: process crash and power loss. The default on a disk file.
    Msync,
    /// NT stores + `sfence` into the shared page cache: a process crash, not a power loss
    /// or an OS crash. The default on tmpfs; a faster explicit choice on a disk file.
    Process,
}

impl Durability {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Dax => "dax",
            Durability::Msync => "msync",
            Durability::Process => "process",
        }
    }

    /// One honest line: how stores are made durable, and what survives what.
    pub fn describe(self) -> &'static str {
        match self {
            Durability::Dax => {
                "dax: non-temporal stores + sfence reach persistent memory's persistence domain \
                 (no msync); an acknowledged put survives a process crash and a power loss"
            }
            Durability::Msync => {
                "msync: non-temporal stores + sfence, then msync(MS_SYNC) of the dirtied pages \
                 at every fence; an acknowledged put survives a process crash and a power loss \
                 (if the disk honours cache flushes)"
            }
            Durability::Process => {
                "process: non-temporal stores + sfence into the shared page cache, no msync; \
                 an acknowledged put survives a crash of the process, not a power loss or an \
                 OS crash"
            }
        }
    }

    /// `true` if an acknowledged put survives a power loss (given backing that can).
    pub fn survives_power_loss(self) -> bool {
        !matches!(self, Durability::Process)
    }

    /// [`Self::describe`] for a pool on `backing`, never claiming what the backing
    /// cannot give: on tmpfs nothing survives a power loss, whatever the mode.
    pub fn describe_on(self, backing: Backing) -> String {
        match (self, backing) {
            (Durability::Dax | Durability::Msync, Backing::Tmpfs) => format!(
                "{}: non-temporal stores + sfence{}; but this file is on tmpfs (memory): an acknowledged \
                 put survives a crash of the process, not a power loss or an OS crash",
                self.name(),
                if self == Durability::Msync { ", then msync(MS_SYNC) at every fence" } else { "" }
            ),
            _ => self.describe().to_string(),
        }
    }

    /// `true` if an acknowledged put on `backing` survives a power loss.
    pub fn survives_power_loss_on(self, backing: Backing) -> bool {
        self.survives_power_loss() && backing != Backing::Tmpfs
    }

    /// The default for a pool on `backing`.
    pub fn default_for(backing: Backing) -> Durability {
        match backing {
            Backing::DaxDevice | Backing::FsDax => Durability::Dax,
            Backing::Tmpfs => Durability::Process,
            Backing::DiskFile => Durability::Msync,
        }
    }

    /// Check that this mode can be honoured on `backing` (only `Dax` has a requirement).
    pub fn check(self, backing: Backing, path: &Path) -> Result<()> {
        if self == Durability::Dax && !matches!(backing, Backing::DaxDevice | Backing::FsDax) {
            return Err(Error::Unsupported {
                path: path.to_path_buf(),
                what: format!(
                    "durability dax needs persistent memory mapped directly (a /dev/dax character device, \
                     or a file on a file system mounted -o dax that the kernel maps with MAP_SYNC), \
                     and this is a {backing}; use msync (power-loss durable) or process"
                ),
            });
        }
        Ok(())
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "dax" => Ok(Durability::Dax),
            "msync" => Ok(Durability::Msync),
            "process" => Ok(Durability::Process),
            _ => Err(format!("unknown durability '{s}' (expected dax, msync or process)")),
        }
    }
}

/// What a pool lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backing {
    /// A device-DAX character device (`/dev/daxX.Y`): persistent memory, no page cache.
    DaxDevice,
    /// A regular file on tmpfs (e.g. `/dev/shm`): memory, gone at power loss.
    Tmpfs,
    /// A regular file on a DAX file system (ext4 or xfs mounted `-o dax` on persistent
    /// memory), mapped `MAP_SYNC`: no page cache, the file's bytes are the memory.
    FsDax,
    /// A regular file on any other file system: the page cache in front of a disk.
    DiskFile,
}

impl fmt::Display for Backing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backing::DaxDevice => "device-DAX character device",
            Backing::Tmpfs => "regular file on tmpfs",
            Backing::FsDax => "regular file on a DAX file system (fsdax, MAP_SYNC)",
            Backing::DiskFile => "regular file on a disk file system",
        })
    }
}

impl Backing {
    /// Find out what the open `file` is, and its usable length in bytes. Regular files
    /// and device-DAX character devices are accepted; anything else is refused (nvs never
    /// maps a block device: formatting one by a typo would destroy a disk). A file on a
    /// disk file system is [`Backing::DiskFile`] here; the mapping finds out whether it
    /// is [`Backing::FsDax`] (only the kernel's grant of `MAP_SYNC` says so).
    pub fn probe(file: &File, path: &Path) -> Result<(Backing, u64)> {
        let io = |op, source| Error::Io { op, path: path.to_path_buf(), source };
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        let ft = meta.file_type();
        if ft.is_file() {
            let kind = if is_tmpfs(file).map_err(|e| io("statfs", e))? { Backing::Tmpfs } else { Backing::DiskFile };
            return Ok((kind, meta.len()));
        }
        if ft.is_char_device() {
            if let Some(len) = device_len(meta.rdev()) {
                return Ok((Backing::DaxDevice, len));
            }
        }
        Err(Error::Unsupported {
            path: path.to_path_buf(),
            what: "not a regular file or a /dev/dax character device".into(),
        })
    }
}

/// `true` if `file` lives on tmpfs (or ramfs, memory too: treated as tmpfs).
#[cfg(target_os = "linux")]
fn is_tmpfs(file: &File) -> std::io::Result<bool> {
    fs_magic(file).map(|m| m == TMPFS_MAGIC || m == RAMFS_MAGIC)
}

/// `statfs.f_type` of the file system holding `file`.
#[cfg(target_os = "linux")]
fn fs_magic(file: &File) -> std::io::Result<i64> {
    use std::os::fd::AsRawFd;
    // SAFETY: `statfs` is plain old data, so all-zero bytes are a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open for the duration of the call (borrowed `file`), and
    // `st` is a valid, writable `statfs` the kernel fills in.
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // `f_type`'s integer type differs between libcs; the magic fits any of them.
    #[allow(clippy::unnecessary_cast)]
    Ok(st.f_type as i64)
}

/// Whether reading a hole of `file` (of this backing) can take memory for good: tmpfs
/// and ramfs, and an overlay, whose upper layer may be either (a live system's root, some
/// sandboxes). A disk file system reads holes into reclaimable page cache.
pub(crate) fn holes_take_memory(backing: Backing, file: &File) -> bool {
    #[cfg(target_os = "linux")]
    const OVERLAYFS_MAGIC: i64 = 0x794c_7630;
    #[cfg(target_os = "linux")]
    let overlay = backing == Backing::DiskFile && fs_magic(file).is_ok_and(|m| m == OVERLAYFS_MAGIC);
    #[cfg(not(target_os = "linux"))]
    let overlay = {
        let _ = file;
        false
    };
    backing == Backing::Tmpfs || overlay
}

/// Elsewhere tmpfs is not detected: such files get the power-loss-durable default.
#[cfg(not(target_os = "linux"))]
fn is_tmpfs(_file: &File) -> std::io::Result<bool> {
    Ok(false)
}

/// The usable size of `path` if it is a device-DAX character device (see [`Backing::probe`]).
pub fn dax_device_len(path: &Path) -> Option<u64> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_char_device() {
        return None;
    }
    device_len(meta.rdev())
}

/// The usable size of the character device `rdev` if sysfs says it is a device-DAX
/// instance: its size rounded down to its alignment (a device-DAX mapping's length must
/// be a multiple of it; 2 MiB unless the device says otherwise).
fn device_len(rdev: u64) -> Option<u64> {
    let (major, minor) = (libc::major(rdev as libc::dev_t), libc::minor(rdev as libc::dev_t));
    let dir = Path::new("/sys/dev/char").join(format!("{major}:{minor}"));
    let subsystem = std::fs::read_link(dir.join("subsystem")).ok()?;
    if subsystem.file_name()? != "dax" {
        return None;
    }
    let number = |file: &str| -> Option<u64> { std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok() };
    let size = number("size")?;
    // `align` is the device's own since Linux 5.10; its region's before.
    let align = number("align").or_else(|| number("device/dax_region/align")).filter(|a| a.is_power_of_two());
    let len = size - size % align.unwrap_or(2 << 20);
    (len > 0).then_some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A character device that is not device-DAX is refused, never taken for DAX.
    #[test]
    fn dev_null_is_not_dax() {
        let f = File::open("/dev/null").expect("open /dev/null");
        let r = Backing::probe(&f, Path::new("/dev/null"));
        assert!(matches!(r, Err(Error::Unsupported { .. })), "{r:?}");
    }

    /// Names round-trip and only the three modes parse.
    #[test]
    fn names_parse() {
        for d in [Durability::Dax, Durability::Msync, Durability::Process] {
            assert_eq!(d.name().parse::<Durability>(), Ok(d));
            assert!(d.describe().starts_with(d.name()));
        }
        assert!("fast".parse::<Durability>().is_err());
    }
}
