//! Writing a caller's bytes to the media: NT-store streams at 8-byte aligned offsets
//! however the bytes are cut (vectored objects), padded to whole lines.

use crate::format::sum::Sum;
use crate::format::{line_up, LINE};
use crate::media::Media;
use crate::mutant::{self, Mutant};

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
/// slices are cut (vectored puts): a partial word is carried to the next slice. With a
/// [`Sum`] ([`NtStream::summed`]) the bytes are summed by the same stores
/// ([`Media::store_nt_summed`]: in one pass over them).
pub(crate) struct NtStream<'m, M: Media> {
    media: &'m M,
    off: u64,
    carry: [u8; 8],
    carry_len: usize,
    sum: Option<Sum>,
}

impl<'m, M: Media> NtStream<'m, M> {
    pub fn new(media: &'m M, off: u64) -> Self {
        debug_assert!(off.is_multiple_of(8));
        NtStream { media, off, carry: [0; 8], carry_len: 0, sum: None }
    }

    /// Sum the streamed bytes into `sum` (before anything is written).
    pub fn summed(mut self, sum: Sum) -> Self {
        self.sum = Some(sum);
        self
    }

    #[inline]
    fn store(&mut self, off: u64, src: &[u8]) {
        match &mut self.sum {
            Some(sum) => self.media.store_nt_summed(off as usize, src, sum),
            None => self.media.store_nt(off as usize, src),
        }
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
            let carry = self.carry;
            self.store(self.off, &carry);
            self.off += 8;
            self.carry_len = 0;
        }
        let whole = bytes.len() & !7;
        if whole > 0 {
            self.store(self.off, &bytes[..whole]);
            self.off += whole as u64;
        }
        let rest = &bytes[whole..];
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carry_len = rest.len();
    }

    /// Store the partial last word (zero-padded) and zeros to the end of its line: every
    /// stream ends where a line does (payloads are padded to 64 bytes), and a whole line
    /// is a faster write-combining flush than a partial one. Returns the sum, if any, of
    /// the bytes written (not of the padding).
    pub fn finish(mut self) -> Option<Sum> {
        let mut off = self.off;
        if self.carry_len > 0 {
            let carry = self.carry;
            if mutant::on(Mutant::SumMissesLastWord) {
                self.media.store_nt(off as usize, &carry[..self.carry_len]);
            } else {
                self.store(off, &carry[..self.carry_len]);
            }
            off += 8;
        }
        let pad = (line_up(off) - off) as usize;
        if pad > 0 {
            self.media.store_nt(off as usize, &[0u8; LINE as usize][..pad]);
        }
        self.sum
    }
}
