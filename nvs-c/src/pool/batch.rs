//! The caller's `nvs_object`s as nvs-core `Object`s, built without an allocation per
//! object or, in steady state, per call: in a [`Scratch`] a handle keeps between calls.

use super::{nvs_object, nvs_range};
use crate::error::*;
use nvs_core::{Changes, Object, PlanSlot};

/// Room every handle has from the start: batches of up to this many objects (and parts,
/// in all) never allocate, not even the first one. nvs-core plans a batch this large on
/// the stack.
const ROOM: usize = nvs_core::BATCH_MAX;

/// Room kept between calls at most, in objects (about 100 bytes each, and as much again
/// of plan slots): a larger batch allocates for its call and gives the memory back after.
const KEEP_MAX: usize = 1 << 16;

/// The memory a handle builds batches in, reused call after call. Between calls its
/// vectors are empty — only their capacity is kept — so the `'static` of their item
/// types is never the lifetime of anything held: a call takes them, fills them with
/// items that borrow the caller's objects, and empties them again before giving them
/// back ([`recycle`]).
pub(crate) struct Scratch {
    objects: Vec<Object<'static>>,
    parts: Vec<&'static [u8]>,
    ranges: Vec<Ranges<'static>>,
    /// The plan of a batch of more than `BATCH_MAX` objects (nvs-std's `put_batch_into`).
    slots: Vec<PlanSlot>,
}

// SAFETY: between calls a scratch holds no item (every vector is empty), so it shares
// nothing with any thread; the items a call puts in it live on that call's thread only.
unsafe impl Send for Scratch {}

impl Default for Scratch {
    /// A fresh scratch, empty (what a contended handle's call falls back to).
    fn default() -> Self {
        Scratch { objects: Vec::new(), parts: Vec::new(), ranges: Vec::new(), slots: Vec::new() }
    }
}

impl Scratch {
    /// A scratch with [`ROOM`] for objects and their parts (a handle's).
    pub(crate) fn with_room() -> Self {
        Scratch {
            objects: Vec::with_capacity(ROOM),
            parts: Vec::with_capacity(ROOM),
            ranges: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Check `objs` (`batch`: as a batch's, each error naming its object's index) and
    /// run `f` on them as `Object`s, with the plan slots for a large batch.
    ///
    /// # Safety
    /// Every pointer of every object of `objs` is NULL or valid for its length for the
    /// call.
    pub(crate) unsafe fn run<'a, T>(
        &mut self,
        objs: &'a [nvs_object],
        batch: bool,
        f: impl FnOnce(&[Object<'_>], &mut Vec<PlanSlot>) -> Res<T>,
    ) -> Res<T> {
        // Items of the caller's lifetime in the kept memory (a `'static` item type is a
        // subtype of any): nothing is in it yet.
        let mut parts: Vec<&'a [u8]> = std::mem::take(&mut self.parts);
        let mut ranges: Vec<Ranges<'a>> = std::mem::take(&mut self.ranges);
        let mut objects: Vec<Object<'_>> = std::mem::take(&mut self.objects);
        // SAFETY: the caller's promise.
        let r = match unsafe { collect(objs, batch, &mut objects, &mut parts, &mut ranges) } {
            Ok(linked) => {
                if !linked {
                    link(objs, &mut objects, &parts, &ranges);
                }
                f(&objects, &mut self.slots)
            }
            Err(e) => Err(e),
        };
        self.objects = recycle(objects);
        self.parts = recycle(parts);
        self.ranges = recycle(ranges);
        if self.slots.capacity() > KEEP_MAX {
            self.slots = Vec::new();
        }
        r
    }
}

/// `v`'s memory, emptied, as a vector of `U` — the same type as `T` but for lifetimes —
/// or a new vector if the two differ in layout, or if `v` grew past [`KEEP_MAX`] items
/// (a rare huge batch keeps no memory).
fn recycle<T, U>(mut v: Vec<T>) -> Vec<U> {
    v.clear();
    if size_of::<T>() != size_of::<U>() || align_of::<T>() != align_of::<U>() || v.capacity() > KEEP_MAX {
        return Vec::new();
    }
    let mut v = std::mem::ManuallyDrop::new(v);
    // SAFETY: the pointer and capacity of a `Vec<T>` (not freed: `ManuallyDrop`), whose
    // allocation has the layout of `capacity` items of `U` too (same size and alignment);
    // length 0, so no item is read as a `U`.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<U>(), 0, v.capacity()) }
}

/// The caller's changed ranges, as nvs-core asks for them.
pub(crate) struct Ranges<'a>(&'a [nvs_range]);

impl Changes for Ranges<'_> {
    fn for_each_range(&self, f: &mut dyn FnMut(u64, u64)) {
        self.0.iter().for_each(|r| f(r.offset, r.len));
    }
}

/// Check each of `objs`, in order, and push it to `objects`, its parts (if vectored) to
/// `parts` and its changed ranges (if a delta) to `ranges`. A vectored or delta object is
/// pushed without its parts or delta ([`link`] adds them once `parts` and `ranges` are
/// complete). Returns whether every object is complete already (no vectored or delta
/// one). The first refused object's error, its index named for a batch.
///
/// # Safety
/// As [`Scratch::run`].
unsafe fn collect<'a: 'p, 'p>(
    objs: &'a [nvs_object],
    batch: bool,
    objects: &mut Vec<Object<'p>>,
    parts: &mut Vec<&'a [u8]>,
    ranges: &mut Vec<Ranges<'a>>,
) -> Res<bool> {
    let mut linked = true;
    for (i, o) in objs.iter().enumerate() {
        // SAFETY: the caller's promise.
        match unsafe { one(o, parts, ranges) } {
            Ok(obj) => objects.push(obj),
            Err(f) if batch => return Err(Fail { msg: format!("object {i} of the batch: {}", f.msg), ..f }),
            Err(f) => return Err(f),
        }
        linked &= o.parts.is_null() && o.parent == 0;
    }
    Ok(linked)
}

/// One object, checked field by field (the first bad field's error); its parts and
/// ranges pushed, see [`collect`].
///
/// # Safety
/// As [`Scratch::run`], for `o`.
unsafe fn one<'a>(o: &'a nvs_object, parts: &mut Vec<&'a [u8]>, ranges: &mut Vec<Ranges<'a>>) -> Res<Object<'a>> {
    // SAFETY: the caller's promise, for each field.
    unsafe {
        let name = cstr(o.name, "object name")?;
        let mut obj = if o.parts.is_null() {
            Object::new(name, bytes(o.data.cast(), o.len, "object data")?)
        } else {
            if !o.data.is_null() || o.len != 0 {
                return Err(arg("an object has both data and parts: set one"));
            }
            for p in slice(o.parts, o.parts_len, "object parts")? {
                parts.push(bytes(p.base.cast(), p.len, "a part's base")?);
            }
            Object::new(name, &[]) // its parts: `link`
        };
        let meta = bytes(o.meta.cast(), o.meta_len, "object meta")?;
        let changes = Ranges(slice(o.changes, o.changes_len, "object changes")?);
        if o.parent == 0 && o.changes_len != 0 {
            return Err(arg("changed ranges without a parent version: set parent for a delta put"));
        }
        if o.parent != 0 {
            ranges.push(changes); // its delta: `link`
        }
        if o.version != 0 {
            obj = obj.version(o.version);
        }
        if !meta.is_empty() {
            obj = obj.meta(meta);
        }
        Ok(obj)
    }
}

/// Give each vectored object of `objects` its parts, and each delta its ranges, from
/// what [`collect`] pushed for them (in the objects' order; `objs` as `collect` read them:
/// a slice out of range, a caller changing them during the call, is a panic, never a
/// wrong object).
fn link<'p>(objs: &[nvs_object], objects: &mut [Object<'p>], parts: &'p [&'p [u8]], ranges: &'p [Ranges<'p>]) {
    let (mut at, mut delta) = (0, 0);
    for (obj, o) in objects.iter_mut().zip(objs) {
        if !o.parts.is_null() {
            let mine = &parts[at..at + o.parts_len];
            at += o.parts_len;
            let mut v = Object::vectored(obj.name(), mine).meta(obj.meta_bytes());
            if let Some(version) = obj.explicit_version() {
                v = v.version(version);
            }
            *obj = v;
        }
        if o.parent != 0 {
            *obj = obj.delta(o.parent, &ranges[delta]);
            delta += 1;
        }
    }
}
