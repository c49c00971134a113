//! The media side of steps 3–6 of the commit protocol for one unit: one method per
//! step, called in protocol order by [`Committer::store_unit`] and
//! [`Committer::commit`]. This is the one place the commit-sequence mutants hook (the
//! seeded bugs nvs-verify must catch: a fence left out, the commit word stored early or
//! by a cached store, the payload moved after the first fence). In a normal build every
//! hook is a constant `false` and each method is its first line or two.
//!
//! A *sealed* unit (format 3 with payload checksums, `Superblock::one_fence`) takes one
//! fence: its header line is stored with the commit word in place, after its objects,
//! and the one fence follows; its checksums, not a fence, tell a torn unit from a whole
//! one (recovery verifies a lane's newest unit).
//!
//! [`Committer::store_unit`]: super::Committer::store_unit
//! [`Committer::commit`]: super::Committer::commit

use crate::error::Result;
use crate::format::{commit_word, sealed_commit_word, UnitHeader};
use crate::media::Media;
use crate::mutant::{self, Mutant};

/// The stores and fences of one unit at `off`.
pub(super) struct UnitStores<'a, M: Media> {
    media: &'a M,
    off: usize,
    pool_id: u64,
    /// Its header; the checksum and the commit word are computed by [`Self::header`].
    header: UnitHeader,
    commit: u64,
    /// A sealed unit (one fence).
    sealed: bool,
}

impl<'a, M: Media> UnitStores<'a, M> {
    /// The unit at `off` of the pool `pool_id`, with `header` (its checksum and commit
    /// slot left to the steps), sealed or not.
    pub fn new(media: &'a M, off: u64, pool_id: u64, header: UnitHeader, sealed: bool) -> Self {
        UnitStores { media, off: off as usize, pool_id, header, commit: 0, sealed }
    }

    /// The header's checksum and the commit word bound to it.
    fn seal_header(&mut self) {
        let h = &mut self.header;
        h.checksum = h.compute_checksum(self.pool_id);
        self.commit = match self.sealed {
            true => sealed_commit_word(self.pool_id, h.lane, h.seq, h.checksum, self.off as u64),
            false => commit_word(self.pool_id, h.lane, h.seq, h.checksum),
        };
    }

    /// The unit's objects digest (a sealed unit's header `reserved` word).
    pub fn set_digest(&mut self, digest: u64) {
        if self.sealed {
            self.header.reserved = digest;
        }
    }

    /// Whether a payload may be stored before its unit is planned (the named
    /// store-ahead branches: a lone put, a batch interleaved with its planning).
    pub fn may_store_ahead() -> bool {
        !mutant::on(Mutant::PayloadAfterFirstFence)
    }

    /// Step 3, the objects: `store` NT-stores every payload, object header and name.
    /// If it fails, what it stored is fenced (inside the unit, past the lane's log end)
    /// before the error returns: nothing is committed.
    pub fn body(&mut self, store: impl FnOnce() -> Result<()>) -> Result<()> {
        if mutant::on(Mutant::CommitBeforePayload) || mutant::on(Mutant::PayloadAfterFirstFence) {
            self.seal_header();
        }
        if mutant::on(Mutant::CommitBeforePayload) {
            self.media.store_word_nt(self.off, self.commit);
        }
        if mutant::on(Mutant::PayloadAfterFirstFence) {
            // The header and the first fence here, the payload beside the commit word.
            self.store_header();
            self.media.fence();
        }
        store().inspect_err(|_| self.media.fence())
    }

    /// Step 3, the unit header, computed now: after the payloads' stores are issued,
    /// that work overlaps their drain, where it is nearly free. One whole-line NT store
    /// from registers (`Media::store_line_nt`) whose first word, the commit word's slot,
    /// holds `!commit` — never the commit word itself, which follows alone after the
    /// fence. A whole line is one write-combining flush; the 56 bytes after the slot
    /// alone would be a partial one, which costs more.
    pub fn header(&mut self) {
        self.seal_header();
        if mutant::on(Mutant::PayloadAfterFirstFence) {
            return; // stored before the first fence, by `body`
        }
        self.store_header();
    }

    fn store_header(&self) {
        let mut h = self.header;
        h.commit = !self.commit;
        if self.sealed {
            // Sealed: the commit word goes with the line; the one fence follows.
            h.commit = self.commit;
            self.media.store_line_nt(self.off, h.words());
            return;
        }
        if mutant::on(Mutant::CommitBeforePayload) {
            // The commit word is in the slot already: the rest of the line only.
            self.media.store_nt(self.off + 8, &bytemuck::bytes_of(&h)[8..]);
            return;
        }
        self.media.store_line_nt(self.off, h.words());
    }

    /// Step 4: everything but the commit word is durable after this fence.
    pub fn fence_before_commit(&self) {
        if self.sealed {
            return;
        }
        if mutant::on(Mutant::NoFenceBeforeCommit) || mutant::on(Mutant::PayloadAfterFirstFence) {
            return;
        }
        self.media.fence();
    }

    /// Step 5: the commit word, alone. Stored as the header's whole line again with the
    /// commit word in its slot: bytes 8..64 are the ones just made durable, so only the
    /// commit word changes (a lone 8-byte store would be a partial write-combining
    /// flush, slower to fence).
    pub fn commit(&self) {
        if self.sealed {
            return; // stored with the header
        }
        let word = self.commit.to_le_bytes();
        if mutant::on(Mutant::CachedCommit) {
            self.media.store(self.off, &word);
        } else if mutant::on(Mutant::StraddlingCommit) {
            self.media.store(self.off, &word[..4]);
            self.media.store(self.off + 4, &word[4..]);
            self.media.flush(self.off, 8);
        } else if !mutant::on(Mutant::CommitBeforePayload) {
            let mut h = self.header;
            h.commit = self.commit;
            self.media.store_commit_line(self.off, bytemuck::cast_ref(&h));
        }
    }

    /// Step 6: the commit is durable after this fence.
    pub fn fence_after_commit(&self) {
        if mutant::on(Mutant::NoFinalFence) {
            return;
        }
        self.media.fence();
    }
}
