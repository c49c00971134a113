//! The Media seam: [`Media`] (its docs state the persistence contract) and [`Region`](region::Region).

pub(crate) mod arch;
mod arch_sum;
pub mod region;

use crate::checksum::sum::Sum;

/// A byte-addressable persistent memory range: the Media seam, the one door to
/// persistent memory.
///
/// Every store, flush and fence that nvs makes to persistent memory goes through this
/// trait, and every read of it too. Nothing above it writes through a raw pointer. That is
/// what lets `nvs-sim` see every store (and build the crash images a real machine could
/// leave), and what lets a unikernel plug in its own memory.
///
/// Offsets are byte offsets from the start of the media. Callers (nvs-core) check every
/// range against [`Media::len`] before calling; implementations still refuse (panic on)
/// an out-of-range access rather than touch memory outside the media — that panic is a
/// bug in nvs, never a consequence of what the media holds.
///
/// # What survives a power loss (the persistency model)
///
/// An implementation must keep these rules; nvs's crash-consistency argument rests on them
/// (DESIGN.md, "What nvs assumes of the media").
///
/// - An aligned 8-byte store is failure-atomic: after a crash the word holds the old or
///   the new value, never a mix. Wider or unaligned stores may tear at 8-byte boundaries.
/// - A non-temporal store ([`Media::store_nt`], [`Media::store_word_nt`],
///   [`Media::store_line_nt`], [`Media::store_commit_line`]) is *pending*
///   until the issuing thread's next [`Media::fence`]; pending stores persist in any
///   order, each word independently, or not at all.
/// - A cached store ([`Media::store`]) may persist at any time (eviction), in order per
///   cache line; it is durable only after [`Media::flush`] of its line and then a fence.
/// - When [`Media::fence`] returns, every NT store and every flush the calling thread
///   issued before it is durable.
pub trait Media {
    /// Length of the media in bytes.
    fn len(&self) -> usize;

    /// `true` if the media is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `dst.len()` bytes starting at `off` into `dst`. Sees this thread's own
    /// stores, fenced or not. Persists nothing, changes nothing.
    fn read(&self, off: usize, dst: &mut [u8]);

    /// Load the aligned 8-byte word at `off` (`off % 8 == 0`) atomically, with Acquire
    /// ordering: a reader that sees a commit word also sees what was fenced before it.
    fn load_word(&self, off: usize) -> u64;

    /// Non-temporal (cache-bypassing) store of `src` at `off`, which must be 8-byte
    /// aligned. If `src.len()` is not a multiple of 8, the bytes after it up to the next
    /// multiple of 8 are set to zero. Durability: pending until this thread's next
    /// fence; until then any subset of its 8-byte words may persist.
    fn store_nt(&self, off: usize, src: &[u8]);

    /// [`Media::store_nt`] of `src` that also feeds `src` to `sum` (the payload checksum
    /// of format 2), ideally in the same pass over `src` (a [`Region`](region::Region)
    /// does: each source line is loaded once, streamed out and summed). The same stores,
    /// the same durability. The default stores, then sums.
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        self.store_nt(off, src);
        sum.write(src);
    }

    /// [`Media::read`] into `dst` that also feeds the bytes read to `sum`, ideally while
    /// copying (a [`Region`](region::Region) does). The default reads, then sums.
    fn read_summed(&self, off: usize, dst: &mut [u8], sum: &mut Sum) {
        self.read(off, dst);
        sum.write(dst);
    }

    /// Non-temporal store of one aligned 8-byte word (`off % 8 == 0`): failure-atomic,
    /// pending until this thread's next fence. (Commit words are written with
    /// [`Media::store_commit_line`], whose default is this.)
    fn store_word_nt(&self, off: usize, word: u64);

    /// The commit store: a non-temporal store of the whole aligned 64-byte line at `off`
    /// (`off % 64 == 0`) of which only the first word changes — bytes 8..64 of `line`
    /// must equal what the line holds now (a unit header stored and fenced before). So it
    /// persists exactly as [`Media::store_word_nt`] of the first word would: the other
    /// words are rewritten with the values they have. It exists for speed: a whole line is
    /// one write-combining flush, where a lone 8-byte NT store is a partial one, and the
    /// fence after a partial flush waits longer (DESIGN.md, write path, step 5, has the
    /// measurement). The default stores the first word alone.
    fn store_commit_line(&self, off: usize, line: &[u8; 64]) {
        let mut w = [0u8; 8];
        w.copy_from_slice(&line[..8]);
        self.store_word_nt(off, u64::from_le_bytes(w));
    }

    /// Non-temporal store of the whole aligned 64-byte line at `off` (`off % 64 == 0`),
    /// given as its eight words (little-endian): the same stores, the same durability as
    /// [`Media::store_nt`] of those 64 bytes, which is the default. It exists for speed:
    /// a header line assembled from fields goes from registers to the media (a
    /// [`Region`](region::Region) stores each word), instead of being written to memory
    /// and loaded back whole — a load that waits until every earlier store of the thread,
    /// the payloads' NT stores included, has left the store buffer.
    fn store_line_nt(&self, off: usize, words: [u64; 8]) {
        let mut line = [0u8; 64];
        for (b, w) in line.chunks_exact_mut(8).zip(words) {
            b.copy_from_slice(&w.to_le_bytes());
        }
        self.store_nt(off, &line);
    }

    /// Ordinary cached store of `src` at `off` (no alignment needed). It may persist at
    /// any time, per cache line in program order, torn at 8-byte boundaries; it is
    /// durable only after [`Media::flush`] of its lines followed by a fence.
    fn store(&self, off: usize, src: &[u8]);

    /// Write back the cache lines covering `off..off + len` (`clwb`). Durable after this
    /// thread's next fence; persists nothing by itself.
    fn flush(&self, off: usize, len: usize);

    /// Store fence (`sfence`). When it returns, every NT store and flush this thread
    /// issued before it is durable (for the mapping's durability domain; see nvs-std).
    fn fence(&self);

    /// Whether a [`Media::fence`] of this media can fail to make the stores before it
    /// durable (a media that syncs through the operating system, as nvs-std's `msync`
    /// mode). Then nvs-core lets readers see a unit only after its last fence, and only
    /// if [`Media::fence_failed`] says no fence failed. `false` by default: an `sfence`
    /// cannot fail.
    fn fence_may_fail(&self) -> bool {
        false
    }

    /// Whether a fence of this media has failed since it was made (sticky: once true,
    /// always true). `false` by default.
    fn fence_failed(&self) -> bool {
        false
    }

    /// A hint that `off..off + len` will be read soon (a reader walking versions in
    /// order). Reads nothing into the program, stores nothing, persists nothing; a range
    /// partly or wholly outside the media is clipped. The default does nothing.
    fn prefetch(&self, off: usize, len: usize) {
        let _ = (off, len);
    }

    /// A hint that `off..off + len`, the objects of a sealed unit (format 3 with payload
    /// checksums), is read next by a check that every byte of it is covered by (its
    /// object headers' checksums, their digest in the unit header, the payload sums).
    /// Reads nothing into the program, stores nothing. The default does nothing; the
    /// crash simulator, where every word a crash left undecided is a branch, decides the
    /// range's undecided words here as one: all their newest values, or all their
    /// oldest — its documented abstraction of a checksummed range.
    fn sealed_range(&self, off: usize, len: usize) {
        let _ = (off, len);
    }

    /// Make `off..off + len` (a free segment being claimed) ready to be stored into, or
    /// fail: a pool file that gets its blocks as it fills allocates them here, so a file
    /// system with no space left is an error ([`crate::Error::NoSpace`]) before the claim
    /// stores anything, never a fault at the first store into a hole. Not a store:
    /// persists nothing, changes no byte the media reads back (the simulator sees none).
    /// Called before every claim, outside any unit. The default does nothing.
    ///
    /// # Errors
    /// [`crate::Error::NoSpace`], as above.
    fn reserve(&self, off: usize, len: usize) -> crate::Result<()> {
        let _ = (off, len);
        Ok(())
    }

    /// Take the claim lock: until [`Media::unlock_claims`], no writer in another process
    /// that shares this media claims or releases a segment (nor opens: its recovery
    /// reads the segment headers under it). Only a pool opened for some lanes of a pool
    /// other processes write ([`crate::Pool::open_lanes`]) takes it, around each claim,
    /// release and recovery. Not a store: the simulator sees none, and a media with one
    /// writer process needs nothing (the default). A lock that dies with its holder (a
    /// kernel-held file lock) keeps a killed writer from blocking the others; one that
    /// is stopped (SIGSTOP, a debugger) is waited for a while, then the operation that
    /// needed the lock fails with [`crate::Error::ClaimLockTimeout`], having changed
    /// nothing.
    ///
    /// # Errors
    /// [`crate::Error::ClaimLockTimeout`], as above.
    fn lock_claims(&self) -> crate::Result<()> {
        Ok(())
    }

    /// Release the claim lock ([`Media::lock_claims`]).
    fn unlock_claims(&self) {}

    /// Lend `off..off + len` as a shared slice, if this media is plain memory that can
    /// (a [`Region`](region::Region)); `None` otherwise (the default: a simulator, say),
    /// or if the range is outside the media. nvs-core lends only committed payloads, for
    /// zero-copy reads.
    ///
    /// # Safety
    /// No store, flush or NT store to the range is made, by this process, while the
    /// returned slice lives.
    unsafe fn borrow(&self, off: usize, len: usize) -> Option<&[u8]> {
        let _ = (off, len);
        None
    }
}

/// Shared references to a media are media: lanes on several threads share one.
/// The claim lock ([`Media::lock_claims`]), released when dropped.
pub(crate) struct ClaimLock<'m, M: Media>(&'m M);

impl<'m, M: Media> ClaimLock<'m, M> {
    pub fn take(media: &'m M) -> crate::Result<Self> {
        media.lock_claims()?;
        Ok(ClaimLock(media))
    }
}

impl<M: Media> Drop for ClaimLock<'_, M> {
    fn drop(&mut self) {
        self.0.unlock_claims();
    }
}

impl<M: Media + ?Sized> Media for &M {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        (**self).read(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        (**self).load_word(off)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        (**self).store_nt(off, src)
    }
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        (**self).store_nt_summed(off, src, sum)
    }
    fn read_summed(&self, off: usize, dst: &mut [u8], sum: &mut Sum) {
        (**self).read_summed(off, dst, sum)
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        (**self).store_word_nt(off, word)
    }
    fn store_commit_line(&self, off: usize, line: &[u8; 64]) {
        (**self).store_commit_line(off, line)
    }
    fn store_line_nt(&self, off: usize, words: [u64; 8]) {
        (**self).store_line_nt(off, words)
    }
    fn store(&self, off: usize, src: &[u8]) {
        (**self).store(off, src)
    }
    fn flush(&self, off: usize, len: usize) {
        (**self).flush(off, len)
    }
    fn fence(&self) {
        (**self).fence()
    }
    fn fence_may_fail(&self) -> bool {
        (**self).fence_may_fail()
    }
    fn fence_failed(&self) -> bool {
        (**self).fence_failed()
    }
    fn prefetch(&self, off: usize, len: usize) {
        (**self).prefetch(off, len)
    }
    fn sealed_range(&self, off: usize, len: usize) {
        (**self).sealed_range(off, len)
    }
    fn reserve(&self, off: usize, len: usize) -> crate::Result<()> {
        (**self).reserve(off, len)
    }
    fn lock_claims(&self) -> crate::Result<()> {
        (**self).lock_claims()
    }
    fn unlock_claims(&self) {
        (**self).unlock_claims()
    }
    unsafe fn borrow(&self, off: usize, len: usize) -> Option<&[u8]> {
        // SAFETY: the caller's contract, passed on.
        unsafe { (**self).borrow(off, len) }
    }
}
