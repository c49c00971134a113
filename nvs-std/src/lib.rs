//! # nvs-std
//!
//! The std shim of nvs: it maps real files and devices and hands them to `nvs-core`.
//!
//! - [`MappedMedia`]: a shared memory mapping of a pool file (or a `/dev/dax` device)
//!   that implements [`nvs_core::Media`] by delegating every access to an
//!   [`nvs_core::Region`] over the mapping. No other code writes the mapping: the Media
//!   seam stays the one door to persistent memory.
//! - [`Durability`]: what an acknowledged put survives (`dax`, `msync`, `process`), with
//!   honest defaults chosen from what the file is.
//! - [`FilePool`]: create/open a pool file, with the writer's lock, a random pool id
//!   and a growable heap index; the same puts as nvs-core's pool (`put(lane, Object)`,
//!   `put_batch`), lane writers for threads ([`FileLane`]), typed and zero-copy reads,
//!   and the safe delta path (`put_tracked`). An example walks all of it.
//! - Index checkpoints ([`checkpoint_path`]): the one writer of a pool of many objects
//!   leaves its index beside the pool file when it closes; a read-only open restores it
//!   and catches up instead of walking every unit ([`FilePool::checkpoint_use`]).
//! - [`Follower`]: a reader following live writers (objects as they commit, end of
//!   stream, writer gone), in this process or another.
//! - [`Error`]: every refusal, naming the path it concerns.
//! - [`dirty::TrackedBuf`]: object memory whose writes the OS tracks (userfaultfd
//!   write-protect or mprotect), for delta puts of the pages changed since the last put.
//!
//! A pool file that shrinks while mapped, or is sparse on a file system with no room
//! for its holes, raises SIGBUS at the access that finds no page (a writer fills the
//! holes of a sparse pool when it opens it). The `nvs` tool turns that into an error; a
//! program that must survive it installs its own SIGBUS handler. A reader of a sparse
//! pool file on tmpfs (ramfs, an overlay) makes it allocate each page of a hole it reads
//! (every segment header at open, its object's pages in a get, every unit in a check or
//! a walk): an open or a check whose holes read could exceed half of the memory free is
//! refused ([`Error::Unsupported`]) before it reads them.
//!
//! Linux is the target: the shim uses open-file-description locks, `fstatfs` and
//! `posix_fallocate`.

#![deny(missing_docs)]

pub mod dirty;
mod durability;
mod error;
mod follow;
mod fork;
mod locks;
mod media;
mod meta;
mod pool;

pub use durability::{dax_device_len, Backing, Durability};
pub use error::{show_name, Error, Held, Result};
pub use follow::{Committed, Followed, Follower};
pub use fork::generation as fork_generation;
pub use media::{Access, MappedMedia};
pub use meta::{Element, Meta};
pub use pool::{checkpoint_path, CorePool, CreateOptions, FileLane, FilePool, WriterHold, CHECKPOINT_MIN_OBJECTS};

// What users share between threads is shareable (checked at compile time): a pool and a
// follower move to or are shared by threads; each lane writer moves to its thread.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<FilePool>();
    send::<FileLane<'static>>();
    send::<Follower>();
};
