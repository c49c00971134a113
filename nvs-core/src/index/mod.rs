//! The index rebuilt on open: O(1) `(name, version)` lookup, `latest`, the versions of a
//! name in order, and the list of names, in memory the caller provides.
//!
//! Layout: a dense array of [`Entry`] (one per committed object), a dense array of
//! [`NameSlot`] (one per distinct name; names themselves stay on the media), and one
//! open-addressed hash table of `u32` slots that maps a name to its `NameSlot` and a
//! `(name, version)` to its `Entry`. A name's entries form a singly linked list in
//! ascending version order (`first` → `next` → ... → `last`), so appending the newest
//! version is O(1) and listing versions never walks the log.
//!
//! Probing steps 17 slots at a time (odd, so it visits every slot of the power-of-two
//! table): a version's home slot lies in its 16-slot block (see `version_key`), and a
//! group of 16 versions whose block another group took moves, as a whole, one block and
//! one slot on, instead of each of its versions walking the other group's slots one by
//! one (with a step of 1, names appended in turn cost several extra probes per insert).
//!
//! Invariants: the table's usable size is a power of two at least twice the number of
//! keys (names + entries), so probing ends; slot values below `NAME_TAG` are entry
//! indices, values with `NAME_TAG` set are name indices, `EMPTY` is free.
//!
//! Media bytes: the only code here that reads the media is `media_eq` (a name's bytes,
//! at an offset recovery checked against its unit, or the put path computed), and it
//! is compiled with the decoders' lints denied (`indexing_slicing`, `unwrap_used`,
//! `panic`, as in `format` and `recover`). Everything else indexes the caller's arrays
//! by ids this index handed out, never by a value read from the media (versions, name
//! hashes and lengths from the media are compared, hashed and masked, not used as
//! indices), so a panic there would be an nvs bug, not a consequence of bad media; those
//! lints are not denied module-wide.

mod entry;
mod memory;

pub use entry::{Entry, NameSlot, SegSlot, NONE};
#[cfg(feature = "alloc")]
pub use memory::HeapMemory;
pub use memory::{FixedMemory, IndexMemory, Part};

use crate::format::hash::{finish, hash64};
use crate::media::Media;

/// A free table slot.
const EMPTY: u32 = u32::MAX;
/// The probe step (module docs).
const PROBE_STEP: usize = 17;
/// Table slots with this bit set point at names.
const NAME_TAG: u32 = 1 << 31;

/// Hash of a name in name space `space` (0: the pool's one name space; `lane + 1` in a
/// pool with lane names, `Superblock::name_space`), as the index keys it: the space is
/// its top 16 bits, so equal hashes mean equal spaces, and is mixed into the rest, so
/// one name in many lanes' spaces does not share one probe sequence.
pub fn name_key(name: &[u8], space: u32) -> u64 {
    let h = hash64(0x6e76_735f_6e61_6d65, name);
    let mixed = if space == 0 { h } else { h ^ finish(space as u64 ^ 0x6c61_6e65) };
    mixed & (u64::MAX >> 16) | (space as u64) << 48
}

/// The name space a key of [`name_key`] is in.
pub fn space_of(key: u64) -> u32 {
    (key >> 48) as u32
}

/// Table key of `(name, version)`: the 16 versions `16k..16k+15` of a name share one
/// hashed, 16-slot-aligned block (one cache line of slots), so a writer appending
/// versions and a reader walking them touch one table line per 16 objects instead of
/// one per object. The offset in the block is the version's low bits XOR bits of the
/// block's hash: a permutation within a block, and uniform over blocks for sparse or
/// strided versions (which would otherwise all land on the same offset).
fn version_key(name: u32, version: u64) -> u64 {
    let h = finish(((name as u64) << 40) ^ (version >> 4) ^ 0x5bd1_e995);
    (h & !15) | ((version ^ (h >> 60)) & 15)
}

/// Largest power of two not above `len` (0 for 0).
fn usable(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        1 << (usize::BITS - 1 - len.leading_zeros())
    }
}

/// Slots of a [`NameCache`] (a power of two).
const NAME_CACHE: usize = 256;

/// Recovery's shortcut to the names it met: a name's slot id by a cheap mix of its
/// length, its first and last words and its name space, so that an object of a name
/// met before is indexed without hashing the name ([`name_key`]) and probing the table
/// for it. Every hit is checked as [`Index::find_name`] checks a candidate (length,
/// space, bytes on the media), so it finds the one slot `find_name` would: an index
/// never holds two slots of the same name in the same space. A miss (a new name, or one
/// whose cache slot another name took) takes the table's way.
#[derive(Clone)]
pub struct NameCache {
    ids: [u32; NAME_CACHE],
}

impl NameCache {
    /// Empty.
    pub const fn new() -> Self {
        NameCache { ids: [NONE; NAME_CACHE] }
    }

    /// `name`'s cache slot in name space `space`.
    #[inline(always)]
    fn slot(name: &[u8], space: u32) -> usize {
        let first = crate::format::hash::word_le(name);
        let last = crate::format::hash::word_le(name.get(name.len().saturating_sub(8)..).unwrap_or(&[]));
        let k = (first ^ last.rotate_left(29) ^ (name.len() as u64) << 56 ^ (space as u64) << 40)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (k >> 56) as usize % NAME_CACHE
    }
}

impl Default for NameCache {
    fn default() -> Self {
        Self::new()
    }
}

/// Why an insert was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum InsertError {
    /// Out of memory (call `reserve` first): the part that is full ("entries", "names",
    /// "hash table slots").
    Full(&'static str),
    /// The name already has this version.
    Duplicate,
}

/// A reservation refused: the part of the memory that is full.
#[derive(Debug, PartialEq, Eq)]
pub struct Full(pub &'static str);

impl From<Full> for InsertError {
    fn from(f: Full) -> Self {
        InsertError::Full(f.0)
    }
}

/// The index over some [`IndexMemory`].
#[derive(Clone)]
pub struct Index<X: IndexMemory> {
    mem: X,
    entries: usize,
    names: usize,
}

impl<X: IndexMemory> Index<X> {
    /// An empty index over `mem`.
    pub fn new(mem: X) -> Self {
        Index { mem, entries: 0, names: 0 }
    }

    /// The memory back, for the next index (a pool formatted again keeps it).
    pub fn into_memory(self) -> X {
        self.mem
    }

    /// The memory the index lives in.
    pub fn memory(&self) -> &X {
        &self.mem
    }

    /// Forget every entry and name (before a recovery).
    pub fn clear(&mut self) {
        self.entries = 0;
        self.names = 0;
        let p = self.mem.parts();
        let cap = usable(p.table.len());
        for s in p.table.iter_mut().take(cap) {
            *s = EMPTY;
        }
    }

    /// How many entries (committed versions) it holds.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether it holds no entries.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// How many distinct names it holds.
    pub fn name_count(&self) -> usize {
        self.names
    }

    /// Make room for `entries` more entries and `names` more names, growing the memory
    /// if it can. Nothing is changed on error.
    pub fn reserve(&mut self, entries: usize, names: usize) -> Result<(), Full> {
        let need_e = self.entries.saturating_add(entries);
        let need_n = self.names.saturating_add(names);
        // Ids are u32 with bit 31 telling names from entries in the table, and NONE is
        // u32::MAX: neither count may reach bit 31.
        if need_e >= NAME_TAG as usize {
            return Err(Full("entry ids"));
        }
        if need_n >= NAME_TAG as usize {
            return Err(Full("name ids"));
        }
        let Some(need_t) = need_e.checked_add(need_n).and_then(|k| k.checked_mul(2)) else {
            return Err(Full("hash table slots"));
        };
        let p = self.mem.parts_ref();
        let (have_e, have_n, have_t) = (p.entries.len(), p.names.len(), usable(p.table.len()));
        if have_e < need_e && !self.mem.grow(Part::Entries, need_e) {
            return Err(Full("entries"));
        }
        if have_n < need_n && !self.mem.grow(Part::Names, need_n) {
            return Err(Full("names"));
        }
        if have_t < need_t {
            // Only a power of two of the table is used: growth must reach that much.
            if !self.mem.grow(Part::Table, need_t) || usable(self.mem.parts_ref().table.len()) < need_t {
                return Err(Full("hash table slots"));
            }
            self.rebuild_table();
        }
        Ok(())
    }

    /// Re-insert every key into a cleared table (after it grew).
    fn rebuild_table(&mut self) {
        let (entries, names) = (self.entries, self.names);
        let p = self.mem.parts();
        let cap = usable(p.table.len());
        let table = &mut p.table[..cap];
        table.fill(EMPTY);
        for (i, n) in p.names[..names].iter().enumerate() {
            let slot = free_slot(table, n.hash);
            table[slot] = i as u32 | NAME_TAG;
        }
        for (i, e) in p.entries[..entries].iter().enumerate() {
            let slot = free_slot(table, version_key(e.name, e.version));
            table[slot] = i as u32;
        }
    }

    /// The name slot of `name` (hash `hash`), comparing bytes on the media.
    pub fn find_name<M: Media + ?Sized>(&self, media: &M, hash: u64, name: &[u8]) -> Option<u32> {
        let p = self.mem.parts_ref();
        let cap = usable(p.table.len());
        if cap == 0 {
            return None;
        }
        let mask = cap - 1;
        let mut i = hash as usize & mask;
        for _ in 0..cap {
            let v = p.table[i];
            if v == EMPTY {
                return None;
            }
            if v & NAME_TAG != 0 {
                let n = &p.names[(v & !NAME_TAG) as usize];
                if n.hash == hash && n.name_len as usize == name.len() && media_eq(media, n.name_off, name) {
                    return Some(v & !NAME_TAG);
                }
            }
            i = (i + PROBE_STEP) & mask;
        }
        None
    }

    /// The name slot of `name` in name space `space` and its key ([`name_key`]), looked
    /// up in `cache` first (a `NameCache`); a slot found in the table is remembered
    /// there. The same answer as `find_name(media, name_key(name, space), name)`.
    #[inline]
    pub fn find_name_cached<M: Media + ?Sized>(
        &self,
        cache: &mut NameCache,
        media: &M,
        name: &[u8],
        space: u32,
    ) -> (Option<u32>, u64) {
        let at = NameCache::slot(name, space);
        let cached = cache.ids.get(at).copied().unwrap_or(NONE);
        if let Some(n) = self.mem.parts_ref().names.get(..self.names).and_then(|v| v.get(cached as usize)) {
            if n.name_len as usize == name.len() && space_of(n.hash) == space && media_eq(media, n.name_off, name) {
                return (Some(cached), n.hash);
            }
        }
        let hash = name_key(name, space);
        let found = self.find_name(media, hash, name);
        if let (Some(id), Some(c)) = (found, cache.ids.get_mut(at)) {
            *c = id;
        }
        (found, hash)
    }

    /// Remember name slot `id` (just made for `name` in `space`) in `cache`.
    #[inline]
    pub fn remember_name(cache: &mut NameCache, name: &[u8], space: u32, id: u32) {
        if let Some(c) = cache.ids.get_mut(NameCache::slot(name, space)) {
            *c = id;
        }
    }

    /// `Some(hash)` if name slot `id` exists and holds exactly `name` (compared on the
    /// media): the check behind the put and get paths' name hints. Any stale or wrong
    /// `id` just answers `None`.
    pub fn name_is<M: Media + ?Sized>(&self, media: &M, id: u32, name: &[u8]) -> Option<u64> {
        let n = self.mem.parts_ref().names.get(..self.names)?.get(id as usize)?;
        (n.name_len as usize == name.len() && media_eq(media, n.name_off, name)).then_some(n.hash)
    }

    /// `Some(entry id)` if entry `hint`, or the one after it in its name's version list,
    /// or the name's newest, is version `version` of name slot `name`: O(1) without a
    /// table probe for a reader walking versions in order or reading the latest.
    pub fn find_version_near(&self, name: u32, version: u64, hint: u32) -> Option<u32> {
        let p = self.mem.parts_ref();
        let entries = p.entries.get(..self.entries)?;
        let is = |i: u32| entries.get(i as usize).is_some_and(|e| e.name == name && e.version == version);
        if is(hint) {
            return Some(hint);
        }
        if let Some(next) = entries.get(hint as usize).filter(|e| e.name == name).map(|e| e.next) {
            if is(next) {
                return Some(next);
            }
        }
        let last = p.names.get(..self.names)?.get(name as usize)?.last;
        is(last).then_some(last)
    }

    /// The entry after entry `i` in its name's version list, if both exist.
    pub fn next_of(&self, i: u32) -> Option<&Entry> {
        let entries = self.mem.parts_ref().entries.get(..self.entries)?;
        entries.get(entries.get(i as usize)?.next as usize)
    }

    /// The entry of version `version` of name slot `name`.
    pub fn find_version(&self, name: u32, version: u64) -> Option<u32> {
        let p = self.mem.parts_ref();
        let cap = usable(p.table.len());
        if cap == 0 {
            return None;
        }
        let mask = cap - 1;
        let mut i = version_key(name, version) as usize & mask;
        for _ in 0..cap {
            let v = p.table[i];
            if v == EMPTY {
                return None;
            }
            if v & NAME_TAG == 0 {
                let e = &p.entries[v as usize];
                if e.name == name && e.version == version {
                    return Some(v);
                }
            }
            i = (i + PROBE_STEP) & mask;
        }
        None
    }

    /// Ask the caches for what adding `versions` (a unit's (name id, version) pairs,
    /// `NONE` for a new name) will write: the next entries and the versions' table
    /// slots. The put path calls it before storing the unit's payloads, so that these
    /// misses (a fresh line per entry, a random table line per version) are served
    /// while the payloads stream out, not when the index learns the unit.
    pub fn prefetch_for(&self, versions: impl Iterator<Item = (u32, u64)>) {
        let p = self.mem.parts_ref();
        let mask = usable(p.table.len()).wrapping_sub(1);
        for (n, (name, version)) in versions.enumerate() {
            if let Some(e) = p.entries.get(self.entries + n) {
                prefetch(e);
            }
            if name != NONE && mask != usize::MAX {
                if let Some(t) = p.table.get(version_key(name, version) as usize & mask) {
                    prefetch(t);
                }
            }
        }
    }

    /// Entry `i`. Panics if `i` is not an id the index gave out.
    pub fn entry(&self, i: u32) -> &Entry {
        &self.mem.parts_ref().entries[i as usize]
    }

    /// Name slot `i`, to change. Panics if `i` is not an id the index gave out.
    pub fn name_mut(&mut self, i: u32) -> &mut NameSlot {
        &mut self.mem.parts().names[i as usize]
    }

    /// Name slot `i`. Panics if `i` is not an id the index gave out.
    pub fn name(&self, i: u32) -> &NameSlot {
        &self.mem.parts_ref().names[i as usize]
    }

    /// Insert a committed object. `name_off` is where its name bytes are on the media.
    /// Keeps the name's version list sorted (an out-of-order version, possible when
    /// lanes are recovered one after another, walks the list once).
    pub fn insert<M: Media + ?Sized>(
        &mut self,
        media: &M,
        hash: u64,
        name: &[u8],
        name_off: u64,
        entry: Entry,
    ) -> Result<u32, InsertError> {
        // Room for a new name only if the name is new: recovery inserts every object, and
        // must fit in exactly the memory the puts that wrote them fitted in.
        let found = self.find_name(media, hash, name);
        self.reserve(1, usize::from(found.is_none()))?;
        if let Some(id) = found {
            return self.append(id, entry);
        }
        let id = self.names as u32;
        let p = self.mem.parts();
        p.names[id as usize] = NameSlot {
            hash,
            name_off,
            first: NONE,
            last: NONE,
            count: 0,
            name_len: name.len() as u16,
            pad: 0,
            reserved: 0,
        };
        let cap = usable(p.table.len());
        let slot = free_slot(&p.table[..cap], hash);
        p.table[slot] = id | NAME_TAG;
        self.names += 1;
        self.link(id, entry)
    }

    /// The table slots a rebuild of the table at `cap` slots (a power of two at least
    /// twice the keys) would give each name and each entry, with the names renumbered
    /// (`order[new id]` is the name's id here, `new_of` the inverse): names first, in
    /// their new order, then entries, in order — as (names' slots in the new order,
    /// entries' slots). What an index checkpoint records, so that an open from it places
    /// every key without probing.
    #[cfg(feature = "alloc")]
    pub fn rebuilt_slots(
        &self,
        cap: usize,
        order: &[u32],
        new_of: &[u32],
    ) -> Option<(alloc::vec::Vec<u32>, alloc::vec::Vec<u32>)> {
        let fits = cap.is_power_of_two() && cap >= 2 * (self.entries + self.names) && cap <= u32::MAX as usize;
        if !fits || order.len() != self.names || new_of.len() != self.names {
            return None;
        }
        let p = self.mem.parts_ref();
        let mut table = alloc::vec![EMPTY; cap];
        let mut place = |key: u64, id: u32| {
            let slot = free_slot(&table, key);
            table[slot] = id;
            slot as u32
        };
        let mut names = alloc::vec::Vec::with_capacity(order.len());
        for (new, &old) in order.iter().enumerate() {
            names.push(place(p.names.get(old as usize)?.hash, new as u32 | NAME_TAG));
        }
        let mut entries = alloc::vec::Vec::with_capacity(self.entries);
        for (i, e) in p.entries[..self.entries].iter().enumerate() {
            entries.push(place(version_key(*new_of.get(e.name as usize)?, e.version), i as u32));
        }
        Some((names, entries))
    }

    /// Make the table exactly `cap` usable slots (a power of two at least twice the
    /// keys reserved, and at least what it has), all free, before anything is restored
    /// into it: an index checkpoint's entries and names go back to the slots they had.
    #[cfg(feature = "alloc")]
    pub fn restore_table(&mut self, cap: usize) -> Result<(), Full> {
        let have = usable(self.mem.parts_ref().table.len());
        if !cap.is_power_of_two() || cap < have || cap > u32::MAX as usize {
            return Err(Full("hash table slots"));
        }
        if cap > have && (!self.mem.grow(Part::Table, cap) || usable(self.mem.parts_ref().table.len()) != cap) {
            return Err(Full("hash table slots"));
        }
        // Every slot free (memory made for the checkpoint comes zeroed, not cleared).
        self.rebuild_table();
        Ok(())
    }

    /// A hint that table slot `slot` is about to be restored into (its line is a cache
    /// miss, and the slots of consecutive entries are far apart).
    #[cfg(feature = "alloc")]
    #[inline]
    pub fn prefetch_slot(&self, slot: u32) {
        if let Some(t) = self.mem.parts_ref().table.get(slot as usize) {
            prefetch(t);
        }
    }

    /// Add a name with no versions yet at table slot `slot`, from what an index
    /// checkpoint recorded of it (its key, where its bytes are on the media, its slot):
    /// room reserved ([`Self::reserve`], [`Self::restore_table`]). `Duplicate` if the
    /// slot is not free or not in the table.
    #[cfg(feature = "alloc")]
    pub fn restore_name(&mut self, hash: u64, name_off: u64, name_len: u16, slot: u32) -> Result<u32, InsertError> {
        let id = self.names as u32;
        let p = self.mem.parts();
        let cap = usable(p.table.len());
        let (Some(t), Some(n)) =
            (p.table.get_mut(..cap).and_then(|t| t.get_mut(slot as usize)), p.names.get_mut(id as usize))
        else {
            return Err(InsertError::Full("names"));
        };
        if *t != EMPTY {
            return Err(InsertError::Duplicate);
        }
        *t = id | NAME_TAG;
        *n = NameSlot { hash, name_off, first: NONE, last: NONE, count: 0, name_len, pad: 0, reserved: 0 };
        self.names += 1;
        Ok(id)
    }

    /// Add `entry`, a version of the known name `name_id`, at table slot `slot`, as
    /// [`Self::append`] would (room reserved; a version the name has is `Duplicate`),
    /// from an index checkpoint. `Duplicate` too if the slot is not free or not in the
    /// table.
    #[cfg(feature = "alloc")]
    pub fn restore_entry(&mut self, name_id: u32, entry: Entry, slot: u32) -> Result<u32, InsertError> {
        let p = self.mem.parts_ref();
        let cap = usable(p.table.len());
        let free = p.table.get(..cap).and_then(|t| t.get(slot as usize)) == Some(&EMPTY);
        let room = self.entries < p.entries.len();
        let Some(n) = p.names.get(..self.names).and_then(|v| v.get(name_id as usize)) else {
            return Err(InsertError::Full("names"));
        };
        if !free {
            return Err(InsertError::Duplicate);
        }
        if !room {
            return Err(InsertError::Full("entries"));
        }
        let newest = n.last == NONE || p.entries[n.last as usize].version < entry.version;
        if !newest && self.find_version(name_id, entry.version).is_some() {
            return Err(InsertError::Duplicate);
        }
        self.link_at(name_id, entry, slot as usize)
    }

    /// Add a committed object as a version of the known name `name_id`: the put path
    /// (validation found the name's slot and checked that `entry.version` exceeds its
    /// latest, and `reserve` made room) and `insert` for a name it found. A version
    /// above the name's newest cannot be there and skips the probe for it: recovery
    /// meets a lane's versions in ascending order, and a probe for an absent key reads
    /// the entry of every other key it meets (a cache miss each, a large part of a
    /// recovery's time if every version were probed).
    #[inline]
    pub fn append(&mut self, name_id: u32, entry: Entry) -> Result<u32, InsertError> {
        let p = self.mem.parts_ref();
        let room = self.entries < p.entries.len() && 2 * (self.entries + self.names + 1) <= usable(p.table.len());
        let Some(n) = p.names.get(..self.names).and_then(|v| v.get(name_id as usize)) else {
            return Err(InsertError::Full("names"));
        };
        let newest = n.last == NONE || p.entries[n.last as usize].version < entry.version;
        if !room {
            self.reserve(1, 0)?;
        }
        if !newest && self.find_version(name_id, entry.version).is_some() {
            return Err(InsertError::Duplicate);
        }
        self.link(name_id, entry)
    }

    /// Add a unit's entries, each a version of a known name (`(name id, entry)`), as
    /// [`Self::append`] one by one would, with room for all of them made once: the put
    /// path's loop. A version that is not its name's newest (another lane committed a
    /// later one first) takes [`Self::append`]'s way. Stops at the first error.
    pub fn append_all(&mut self, items: impl ExactSizeIterator<Item = (u32, Entry)>) -> Result<(), InsertError> {
        self.reserve(items.len(), 0)?;
        for (name_id, entry) in items {
            let e_id = self.entries as u32;
            let p = self.mem.parts();
            let names = p.names.get_mut(..self.names).unwrap_or(&mut []);
            let Some(n) = names.get_mut(name_id as usize) else { return Err(InsertError::Full("names")) };
            let last = n.last;
            match p.entries.get_mut(last as usize) {
                Some(l) if l.version < entry.version => {
                    l.next = e_id;
                    n.last = e_id;
                    n.count += 1;
                }
                _ => {
                    self.append(name_id, entry)?;
                    continue;
                }
            }
            let cap = usable(p.table.len());
            let slot = free_slot(&p.table[..cap], version_key(name_id, entry.version));
            p.table[slot] = e_id;
            p.entries[e_id as usize] = Entry { name: name_id, next: NONE, ..entry };
            self.entries += 1;
        }
        Ok(())
    }

    /// Add `entry` as an entry of name `name_id` (room reserved, not a duplicate): its
    /// table slot, and its place in the name's ascending version list.
    #[inline(always)]
    fn link(&mut self, name_id: u32, entry: Entry) -> Result<u32, InsertError> {
        let p = self.mem.parts();
        let cap = usable(p.table.len());
        let slot = free_slot(&p.table[..cap], version_key(name_id, entry.version));
        // Versions in order (recovery, a writer's puts) reach the name's next block of
        // table slots 8 versions on: ask for its line now (a random line of a table that
        // outgrows the caches; a hint, wasted if versions skip).
        if entry.version & 7 == 0 {
            if let Some(t) =
                entry.version.checked_add(8).and_then(|v| p.table.get(version_key(name_id, v) as usize & (cap - 1)))
            {
                prefetch(t);
            }
        }
        self.link_at(name_id, entry, slot)
    }

    /// [`Self::link`] at table slot `slot` (free, in the table).
    #[inline(always)]
    fn link_at(&mut self, name_id: u32, entry: Entry, slot: usize) -> Result<u32, InsertError> {
        let e_id = self.entries as u32;
        let mut next = NONE;
        let p = self.mem.parts();
        p.table[slot] = e_id;
        let n = p.names[name_id as usize];
        if n.last == NONE {
            p.names[name_id as usize].first = e_id;
            p.names[name_id as usize].last = e_id;
        } else if p.entries[n.last as usize].version < entry.version {
            p.entries[n.last as usize].next = e_id;
            p.names[name_id as usize].last = e_id;
        } else if entry.version < p.entries[n.first as usize].version {
            next = n.first;
            p.names[name_id as usize].first = e_id;
        } else {
            // Somewhere in the middle: find the last entry below it (bounded by count).
            let mut at = n.first;
            for _ in 0..n.count {
                let next = p.entries[at as usize].next;
                if next == NONE || p.entries[next as usize].version > entry.version {
                    break;
                }
                at = next;
            }
            next = p.entries[at as usize].next;
            p.entries[at as usize].next = e_id;
        }
        p.entries[e_id as usize] = Entry { name: name_id, next, ..entry };
        p.names[name_id as usize].count += 1;
        self.entries += 1;
        Ok(e_id)
    }

    /// The first `count` segment slots (recovery and segment allocation use them), or
    /// `IndexFull` if the memory cannot hold that many.
    pub fn segments(&mut self, count: usize) -> crate::Result<&mut [SegSlot]> {
        if self.mem.parts_ref().segments.len() < count && !self.mem.grow(Part::Segments, count) {
            return Err(self.full(Full("segment slots")));
        }
        let (entries, names) = (self.entries, self.names);
        let full = crate::Error::IndexFull { what: "segment slots", entries, names };
        self.mem.parts().segments.get_mut(..count).ok_or(full)
    }

    /// The segment slots there are (see [`Self::segments`]).
    pub fn segments_ref(&self) -> &[SegSlot] {
        self.mem.parts_ref().segments
    }
}

/// A hint to bring `r` into the caches.
#[inline(always)]
fn prefetch<T>(r: &T) {
    // SAFETY: `r` is a valid reference: its bytes are inside a valid mapping.
    unsafe { crate::media::arch::prefetch_lines((r as *const T).cast(), core::mem::size_of::<T>()) }
}

/// First free slot for `key` (the table always has one: load ≤ 1/2).
fn free_slot(table: &[u32], key: u64) -> usize {
    let mask = table.len() - 1;
    let mut i = key as usize & mask;
    while table[i] != EMPTY {
        i = (i + PROBE_STEP) & mask;
    }
    i
}

/// `media[off..off + name.len()] == name`, compared a word at a time with aligned loads
/// when `off` is word-aligned (a name always follows its 48-byte object header), masking
/// the bytes past the name's end (padding, never trusted); else a chunk at a time. A
/// name that would end past the media is not there.
#[deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
fn media_eq<M: Media + ?Sized>(media: &M, off: u64, name: &[u8]) -> bool {
    let at = off as usize;
    let end = at.checked_add(name.len().next_multiple_of(8));
    if at.is_multiple_of(8) && end.is_some_and(|e| e <= media.len()) {
        // The wanted word is assembled in a register: a byte copy to the stack and a word
        // load back would miss store forwarding, and wait for every store before it (on
        // the put path: the previous unit's commit fence) to drain.
        return name.chunks(8).enumerate().all(|(k, chunk)| {
            let want = crate::format::hash::word_le(chunk);
            let mask = if chunk.len() == 8 { u64::MAX } else { (1u64 << (8 * chunk.len())) - 1 };
            (media.load_word(at + 8 * k) ^ want) & mask == 0
        });
    }
    if at.checked_add(name.len()).is_none_or(|e| e > media.len()) {
        return false;
    }
    let mut buf = [0u8; 32];
    let mut at = at;
    for chunk in name.chunks(buf.len()) {
        let Some(b) = buf.get_mut(..chunk.len()) else { return false };
        media.read(at, b);
        if b != chunk {
            return false;
        }
        at += chunk.len();
    }
    true
}

impl<X: IndexMemory> Index<X> {
    /// The error for a refused reservation or insert (`what` ran out).
    pub fn full(&self, Full(what): Full) -> crate::Error {
        crate::Error::IndexFull { what, entries: self.entries, names: self.names }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids are u32 with bit 31 marking names in the table: neither entries nor names may
    /// reach 2^31. The counts are set near the cap directly (no memory is allocated:
    /// the cap is checked before anything grows).
    #[test]
    fn entry_and_name_ids_stay_below_the_name_tag() {
        let mut idx = Index::new(FixedMemory::<4, 4, 16, 1>::new());
        assert_eq!(idx.reserve(1, 1), Ok(()));
        idx.entries = NAME_TAG as usize - 2;
        assert_eq!(idx.reserve(1, 0), Err(Full("entries")), "under the cap, memory decides");
        assert_eq!(idx.reserve(2, 0), Err(Full("entry ids")));
        idx.entries = 0;
        idx.names = NAME_TAG as usize - 2;
        assert_eq!(idx.reserve(0, 1), Err(Full("names")), "under the cap, memory decides");
        assert_eq!(idx.reserve(0, 2), Err(Full("name ids")));
    }

    /// Versions inserted above, below and between a name's versions keep its list in
    /// order, and a version it holds is refused wherever it is (the newest, the oldest,
    /// one in the middle).
    #[test]
    fn insert_keeps_order_and_refuses_every_duplicate() {
        #[repr(align(64))]
        struct Line([u8; 64]);
        let mut line = Line([0; 64]);
        line.0[..4].copy_from_slice(b"temp");
        // SAFETY: `line` is 64-aligned, outlives `media`, and nothing else touches it.
        let media = unsafe { crate::media::region::Region::new(line.0.as_mut_ptr(), 64) };
        let mut idx = Index::new(FixedMemory::<8, 2, 64, 1>::new());
        idx.clear(); // as recovery starts
        let h = name_key(b"temp", 0);
        let e = |version| Entry { version, ..Entry::default() };
        for v in [5, 9, 2, 7] {
            assert!(idx.insert(&media, h, b"temp", 0, e(v)).is_ok(), "v{v}");
        }
        for v in [9, 2, 5, 7] {
            assert_eq!(idx.insert(&media, h, b"temp", 0, e(v)), Err(InsertError::Duplicate), "v{v} again");
        }
        let n = idx.name_mut(0).first;
        let mut at = n;
        let mut order = [0u64; 4];
        for o in order.iter_mut() {
            *o = idx.entry(at).version;
            at = idx.entry(at).next;
        }
        assert_eq!((order, at), ([2, 5, 7, 9], NONE));
        assert!(idx.insert(&media, h, b"temp", 0, e(10)).is_ok());
        assert_eq!(idx.find_version(0, 10).map(|i| idx.entry(i).version), Some(10));
    }

    /// `find_name_cached` gives what `find_name` gives, for names met before (cache
    /// hits), names whose cache slot another name took (a cache of one slot's worth of
    /// names checked against 300), names of other spaces with the same bytes, and names
    /// not in the index.
    #[test]
    fn find_name_cached_agrees_with_find_name() {
        #[repr(align(64))]
        struct Lines([u8; 64 * 300]);
        let mut lines = Lines([0; 64 * 300]);
        let name = |i: usize| {
            let mut n = [b'n'; 20];
            n[..8].copy_from_slice(&(i as u64 * 0x0101_0101).to_le_bytes());
            n[8 + i % 12..].fill(0);
            (n, 8 + i % 12)
        };
        for i in 0..300 {
            let (n, len) = name(i);
            lines.0[64 * i..64 * i + len].copy_from_slice(&n[..len]);
        }
        // SAFETY: `lines` is 64-aligned, outlives `media`, and nothing else touches it.
        let media = unsafe { crate::media::region::Region::new(lines.0.as_mut_ptr(), 64 * 300) };
        let mut idx = Index::new(FixedMemory::<1024, 512, 4096, 1>::new());
        idx.clear();
        let mut cache = NameCache::new();
        let e = |version| Entry { version, ..Entry::default() };
        // Names 0..200 in space 0, names 100..200 in space 3 too.
        for (i, space) in (0..200).map(|i| (i, 0)).chain((100..200).map(|i| (i, 3))) {
            let (n, len) = name(i);
            let n = &n[..len];
            assert_eq!(idx.find_name_cached(&mut cache, &media, n, space), (None, name_key(n, space)));
            let id = idx.insert(&media, name_key(n, space), n, 64 * i as u64, e(1)).map(|x| idx.entry(x).name);
            Index::<FixedMemory<1024, 512, 4096, 1>>::remember_name(&mut cache, n, space, id.unwrap());
        }
        for round in 0..2 {
            for i in 0..300 {
                for space in [0, 3, 5] {
                    let (n, len) = name(i);
                    let n = &n[..len];
                    let key = name_key(n, space);
                    let want = (idx.find_name(&media, key, n), key);
                    assert_eq!(
                        idx.find_name_cached(&mut cache, &media, n, space),
                        want,
                        "name {i} space {space} round {round}"
                    );
                    let there = i < 200 && space == 0 || (100..200).contains(&i) && space == 3;
                    assert_eq!(want.0.is_some(), there, "name {i} space {space}");
                }
            }
        }
    }

    /// `append_all` as `append` one by one: newest versions in one pass, a version below a
    /// name's newest (another lane committed a later one first) in its place, a duplicate
    /// refused; every version found in the table.
    #[test]
    fn append_all_keeps_order_and_finds_every_version() {
        #[repr(align(64))]
        struct Line([u8; 64]);
        let mut line = Line([0; 64]);
        line.0[..2].copy_from_slice(b"ab");
        // SAFETY: `line` is 64-aligned, outlives `media`, and nothing else touches it.
        let media = unsafe { crate::media::region::Region::new(line.0.as_mut_ptr(), 64) };
        let mut idx = Index::new(FixedMemory::<16, 2, 64, 1>::new());
        idx.clear();
        let e = |version| Entry { version, ..Entry::default() };
        assert!(idx.insert(&media, name_key(b"a", 0), b"a", 0, e(1)).is_ok());
        assert!(idx.insert(&media, name_key(b"b", 0), b"b", 1, e(1)).is_ok());
        let items = [(0, e(2)), (1, e(5)), (1, e(3)), (0, e(3)), (1, e(4))];
        assert_eq!(idx.append_all(items.into_iter()), Ok(()));
        assert_eq!(idx.append_all([(1, e(4))].into_iter()), Err(InsertError::Duplicate));
        let order = |name: u32| {
            let mut v = [0u64; 4];
            let mut at = idx.name(name).first;
            for o in v.iter_mut().take(idx.name(name).count as usize) {
                *o = idx.entry(at).version;
                at = idx.entry(at).next;
            }
            (v, at)
        };
        assert_eq!(order(0), ([1, 2, 3, 0], NONE));
        assert_eq!(order(1), ([1, 3, 4, 5], NONE));
        for (name, version) in [(0, 1), (0, 2), (0, 3), (1, 1), (1, 3), (1, 4), (1, 5)] {
            let found = idx.find_version(name, version).map(|i| (idx.entry(i).name, idx.entry(i).version));
            assert_eq!(found, Some((name, version)));
        }
        assert_eq!(idx.len(), 7);
    }
}
