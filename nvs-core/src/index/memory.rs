//! The memory an index lives in, provided by the caller: fixed arrays or the heap.

use super::entry::{Entry, NameSlot, SegSlot};

/// Mutable view of the four arrays.
pub struct Parts<'a> {
    pub entries: &'a mut [Entry],
    pub names: &'a mut [NameSlot],
    pub table: &'a mut [u32],
    pub segments: &'a mut [SegSlot],
}

/// Shared view of the four arrays.
pub struct PartsRef<'a> {
    pub entries: &'a [Entry],
    pub names: &'a [NameSlot],
    pub table: &'a [u32],
    pub segments: &'a [SegSlot],
}

/// Which array to grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Entries,
    Names,
    Table,
    Segments,
}

/// Memory for the index, provided by the caller: fixed arrays ([`FixedMemory`]) in a
/// `no_std` program, or growable vectors (`HeapMemory`, feature `alloc`) in a std one
/// (or `&mut` either, for memory in a `static`).
///
/// Sealed: these are its only implementations, as the index's arrays are nvs's own
/// (their types are not public). What a program chooses is where the memory lives and,
/// for [`FixedMemory`], how large it is.
pub trait IndexMemory: sealed::Sealed {
    /// The arrays, to write.
    #[doc(hidden)]
    fn parts(&mut self) -> Parts<'_>;
    /// The arrays, to read.
    #[doc(hidden)]
    fn parts_ref(&self) -> PartsRef<'_>;
    /// Make `part` at least `min_len` long; `false` if this memory cannot grow.
    #[doc(hidden)]
    fn grow(&mut self, part: Part, min_len: usize) -> bool;
    /// Bytes this memory holds for the index.
    fn bytes(&self) -> usize {
        use core::mem::size_of_val;
        let p = self.parts_ref();
        size_of_val(p.entries) + size_of_val(p.names) + size_of_val(p.table) + size_of_val(p.segments)
    }
}

mod sealed {
    /// Implemented only here: see [`super::IndexMemory`].
    pub trait Sealed {}
    impl<T: Sealed + ?Sized> Sealed for &mut T {}
    impl<const R: usize, const N: usize, const T: usize, const S: usize> Sealed for super::FixedMemory<R, N, T, S> {}
    #[cfg(feature = "alloc")]
    impl Sealed for super::HeapMemory {}
}

/// Memory borrowed for the pool's life: a `static` [`FixedMemory`] passed as `&mut`, so
/// the arrays never move through the stack (a kernel's stack is small).
impl<T: IndexMemory + ?Sized> IndexMemory for &mut T {
    fn parts(&mut self) -> Parts<'_> {
        (**self).parts()
    }
    fn parts_ref(&self) -> PartsRef<'_> {
        (**self).parts_ref()
    }
    fn grow(&mut self, part: Part, min_len: usize) -> bool {
        (**self).grow(part, min_len)
    }
}

/// Index memory in fixed arrays: `ENTRIES` objects, `NAMES` distinct names, `TABLE`
/// hash slots, `SEGMENTS` segments. Only the largest power of two of `TABLE` is used and
/// the table is kept at most half full, so make it a power of two of at least
/// `2 * (ENTRIES + NAMES)`; a smaller one ends the index at half of it (`IndexFull`).
/// A pool filled to this memory's capacity reopens in it. Large: keep it in a `static`
/// or a `Box`.
pub struct FixedMemory<const ENTRIES: usize, const NAMES: usize, const TABLE: usize, const SEGMENTS: usize> {
    entries: [Entry; ENTRIES],
    names: [NameSlot; NAMES],
    table: [u32; TABLE],
    segments: [SegSlot; SEGMENTS],
}

impl<const R: usize, const N: usize, const T: usize, const S: usize> FixedMemory<R, N, T, S> {
    /// Zeroed arrays (a `const fn`: a `static` can hold one).
    pub const fn new() -> Self {
        FixedMemory {
            entries: [Entry {
                version: 0,
                payload_off: 0,
                len_bytes: 0,
                stored_bytes: 0,
                seq: 0,
                name: 0,
                next: 0,
                lane: 0,
                depth: 0,
                meta_len: 0,
                payload_sum: 0,
            }; R],
            names: [NameSlot { hash: 0, name_off: 0, first: 0, last: 0, count: 0, name_len: 0, pad: 0, reserved: 0 };
                N],
            table: [0; T],
            segments: [SegSlot { chain_seq: 0, first_seq: 0, lane: 0, index: 0, span: 1, head: 0 }; S],
        }
    }
}

impl<const R: usize, const N: usize, const T: usize, const S: usize> Default for FixedMemory<R, N, T, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const R: usize, const N: usize, const T: usize, const S: usize> IndexMemory for FixedMemory<R, N, T, S> {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            entries: &mut self.entries,
            names: &mut self.names,
            table: &mut self.table,
            segments: &mut self.segments,
        }
    }
    fn parts_ref(&self) -> PartsRef<'_> {
        PartsRef { entries: &self.entries, names: &self.names, table: &self.table, segments: &self.segments }
    }
    fn grow(&mut self, part: Part, min_len: usize) -> bool {
        let len = match part {
            Part::Entries => R,
            Part::Names => N,
            Part::Table => T,
            Part::Segments => S,
        };
        len >= min_len
    }
}

/// Index memory on the heap, growing by doubling. A growth the allocator refuses is
/// `IndexFull` (a forged pool's segment count, say), not an abort.
#[cfg(feature = "alloc")]
#[derive(Clone, Default)]
pub struct HeapMemory {
    entries: alloc::vec::Vec<Entry>,
    names: alloc::vec::Vec<NameSlot>,
    table: alloc::vec::Vec<u32>,
    segments: alloc::vec::Vec<SegSlot>,
}

#[cfg(feature = "alloc")]
impl HeapMemory {
    /// Empty: it grows as the pool needs.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where each of its arrays is, as (address, bytes): for a caller that asks the OS to
    /// prepare their pages ahead of the index writing them (an open from an index
    /// checkpoint, whose arrays are allocated at their final size).
    pub fn spans(&self) -> [(usize, usize); 4] {
        use core::mem::size_of_val;
        let span = |p: *const u8, n: usize| (p as usize, n);
        [
            span(self.entries.as_ptr().cast(), size_of_val(self.entries.as_slice())),
            span(self.names.as_ptr().cast(), size_of_val(self.names.as_slice())),
            span(self.table.as_ptr().cast(), size_of_val(self.table.as_slice())),
            span(self.segments.as_ptr().cast(), size_of_val(self.segments.as_slice())),
        ]
    }
}

#[cfg(feature = "alloc")]
impl IndexMemory for HeapMemory {
    fn parts(&mut self) -> Parts<'_> {
        Parts {
            entries: &mut self.entries,
            names: &mut self.names,
            table: &mut self.table,
            segments: &mut self.segments,
        }
    }
    fn parts_ref(&self) -> PartsRef<'_> {
        PartsRef { entries: &self.entries, names: &self.names, table: &self.table, segments: &self.segments }
    }
    /// Bytes allocated (capacity, not length).
    fn bytes(&self) -> usize {
        use core::mem::size_of;
        self.entries.capacity() * size_of::<Entry>()
            + self.names.capacity() * size_of::<NameSlot>()
            + self.table.capacity() * size_of::<u32>()
            + self.segments.capacity() * size_of::<SegSlot>()
    }
    fn grow(&mut self, part: Part, min_len: usize) -> bool {
        fn grow_vec<T: bytemuck::Zeroable + Default + Clone>(v: &mut alloc::vec::Vec<T>, min_len: usize) -> bool {
            if v.len() >= min_len {
                return true;
            }
            let new_len = min_len.max(v.len().saturating_mul(2)).max(64);
            if v.capacity() == 0 {
                // A first array: zeroed memory from the allocator (for a large one, the
                // kernel's zero pages, written only as entries arrive), not a pass of
                // stores over it (a large part of an open from an index checkpoint).
                let Ok(layout) = core::alloc::Layout::array::<T>(new_len) else { return false };
                if layout.size() == 0 {
                    return false;
                }
                // SAFETY: `layout` has a non-zero size; a null result is a refusal.
                let p = unsafe { alloc::alloc::alloc_zeroed(layout) };
                if p.is_null() {
                    return false;
                }
                // SAFETY: `p` was allocated by the global allocator with the layout of
                // `new_len` `T`s, all zero bytes, which is a valid `T` (`Zeroable`).
                *v = unsafe { alloc::vec::Vec::from_raw_parts(p.cast::<T>(), new_len, new_len) };
                return true;
            }
            if v.try_reserve_exact(new_len - v.len()).is_err() {
                return false;
            }
            v.resize(new_len, T::default());
            true
        }
        match part {
            Part::Entries => grow_vec(&mut self.entries, min_len),
            Part::Names => grow_vec(&mut self.names, min_len),
            Part::Table => grow_vec(&mut self.table, min_len.checked_next_power_of_two().unwrap_or(usize::MAX)),
            Part::Segments => grow_vec(&mut self.segments, min_len),
        }
    }
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    use super::*;

    #[test]
    fn heap_memory_refuses_a_growth_the_allocator_cannot_make() {
        let mut m = HeapMemory::new();
        assert!(m.grow(Part::Segments, 100));
        assert!(m.parts_ref().segments.len() >= 100);
        // Past what any allocation can hold: false (IndexFull for the pool), not a panic.
        assert!(!m.grow(Part::Segments, usize::MAX / 8));
        assert!(!m.grow(Part::Table, usize::MAX / 2 + 2));
        assert!(!m.grow(Part::Entries, usize::MAX / 64));
        assert!(m.parts_ref().segments.len() >= 100, "what was there stays");
    }
}
