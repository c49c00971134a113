//! Writing a caller's bytes to the media: NT-store streams at 8-byte aligned offsets
//! however the bytes are cut (vectored objects), padded to whole lines.

use crate::format::{line_up, LINE};
use crate::media::Media;

/// Call `f` on the slices of `parts` (one object cut into pieces) covering bytes
/// `off .. off + len` of the object, in order.
pub(crate) fn for_each_part_slice(parts: &[&[u8]], off: u64, len: u64, f: &mut dyn FnMut(&[u8])) {
    let (mut start, end) = (off as usize, (off + len) as usize);
    let mut base = 0usize;
    for p in parts {
        let p_end = base + p.len();
        if start < p_end && start < end {
            let stop = end.min(p_end);
            f(&p[start - base..stop - base]);
            start = stop;
        }
        base = p_end;
        if start >= end {
            break;
        }
    }
}

/// Streams slices to the media with NT stores at 8-byte aligned offsets, however the
/// slices are cut (vectored puts): a partial word is carried to the next slice.
pub(crate) struct NtStream<'m, M: Media> {
    media: &'m M,
    off: u64,
    carry: [u8; 8],
    carry_len: usize,
}

impl<'m, M: Media> NtStream<'m, M> {
    pub fn new(media: &'m M, off: u64) -> Self {
        debug_assert!(off.is_multiple_of(8));
        NtStream { media, off, carry: [0; 8], carry_len: 0 }
    }

    pub fn write(&mut self, mut bytes: &[u8]) {
        if self.carry_len > 0 {
            let take = (8 - self.carry_len).min(bytes.len());
            self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&bytes[..take]);
            self.carry_len += take;
            bytes = &bytes[take..];
            if self.carry_len < 8 {
                return;
            }
            self.media.store_nt(self.off as usize, &self.carry);
            self.off += 8;
            self.carry_len = 0;
        }
        let whole = bytes.len() & !7;
        if whole > 0 {
            self.media.store_nt(self.off as usize, &bytes[..whole]);
            self.off += whole as u64;
        }
        let rest = &bytes[whole..];
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carry_len = rest.len();
    }

    /// Store the partial last word (zero-padded) and zeros to the end of its line: every
    /// stream ends where a line does (payloads are padded to 64 bytes), and a whole line
    /// is a faster write-combining flush than a partial one.
    pub fn finish(self) {
        let mut off = self.off;
        if self.carry_len > 0 {
            self.media.store_nt(off as usize, &self.carry[..self.carry_len]);
            off += 8;
        }
        let pad = (line_up(off) - off) as usize;
        if pad > 0 {
            self.media.store_nt(off as usize, &[0u8; LINE as usize][..pad]);
        }
    }
}
