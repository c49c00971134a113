//! A lane's write position, and the cell that gives it to one writer at a time.

use crate::format::{Superblock, LINE};
use crate::sync::{AtomicBool, Ordering, UnsafeCell};

/// What [`Lane::sound`] failing means (the `what` of its `Error::Invariant`).
pub(crate) const UNSOUND: &str = "a lane's write position is not a line inside its segment";

/// A lane's write position.
#[derive(Clone, Copy, Debug, Default)]
pub struct Lane {
    /// Holds a segment.
    pub active: bool,
    pub chain_seq: u64,
    /// The first byte of the lane's segment (of its span, if it spans several).
    pub seg_start: u64,
    /// Where the next unit goes.
    pub tail: u64,
    /// Just past the lane's segment (its span).
    pub seg_end: u64,
    /// Sequence number of the next unit.
    pub next_seq: u64,
    /// The last committed unit was an end-of-stream marker.
    pub closed: bool,
    /// The last committed unit was a detach marker.
    pub detached: bool,
}

impl Lane {
    /// Room at the tail for a unit of `len` bytes that leaves the segment's last line
    /// free. Only a truncate unit may take that line: retention must always be able to
    /// commit one, or a lane whose segment filled to its end when no segment was free
    /// could never release anything (every `reclaim` refused `Full`). A unit that claims
    /// a new segment may still fill it to the end (then a reclaim with no free segment
    /// left is refused `Full`).
    pub fn has_room(&self, len: u64) -> bool {
        self.active && self.tail + len + LINE <= self.seg_end
    }

    /// Room at the tail for a truncate unit (one line), the segment's last line included.
    pub fn has_room_for_truncate(&self) -> bool {
        self.active && self.tail + LINE <= self.seg_end
    }

    /// The write position is a place for a unit: no segment, or a tail on a line of the
    /// lane's segment (span), past its header line, and the segment on lines inside the
    /// pool's data — so what is stored at the tail stays in the lane's own segment and
    /// the pool. Checked in release builds before anything is stored there (a few
    /// compares).
    #[inline(always)]
    pub fn sound(&self, sb: &Superblock) -> bool {
        !self.active
            || ((self.tail | self.seg_start).is_multiple_of(LINE)
                && sb.data_off <= self.seg_start
                && self.seg_start < self.tail
                && self.tail <= self.seg_end
                && self.seg_end <= sb.pool_len)
    }
}

/// Every lane's cell of one pool. With `alloc`, on the heap and as many as the pool has
/// lanes: a pool is then small to make and move (an open moves it several times), not
/// a cell for each of the `LANES_MAX` lanes any pool may have.
#[cfg(feature = "alloc")]
pub type LaneCells = alloc::boxed::Box<[LaneCell]>;
/// Every lane's cell of one pool: without `alloc`, inline, one per lane a pool may have.
#[cfg(not(feature = "alloc"))]
pub type LaneCells = [LaneCell; crate::format::LANES_MAX as usize];

/// A lane's write position, touched only by whoever writes the lane: the `&mut Pool`,
/// or the one lane writer holding `claimed`.
pub struct LaneCell {
    claimed: AtomicBool,
    state: UnsafeCell<Lane>,
}

impl Default for LaneCell {
    fn default() -> Self {
        LaneCell { claimed: AtomicBool::new(false), state: UnsafeCell::new(Lane::default()) }
    }
}

impl LaneCell {
    /// The cells of a pool with `lanes` lanes, each unclaimed and at its default state.
    pub fn table(lanes: u32) -> LaneCells {
        #[cfg(feature = "alloc")]
        return (0..lanes).map(|_| LaneCell::default()).collect();
        #[cfg(not(feature = "alloc"))]
        return {
            let _ = lanes;
            core::array::from_fn(|_| LaneCell::default())
        };
    }

    /// Take the lane for one writer; false if another holds it. Acquire: the writer
    /// sees every change the lane's previous writer made to its state.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::Acquire)
    }

    /// Give the lane back. Release: the next writer (its Acquire swap) sees the state
    /// this one left.
    pub fn release(&self) {
        self.claimed.store(false, Ordering::Release);
    }

    /// Run `f` on the lane's state as its claimed writer.
    ///
    /// # Safety
    /// The caller won [`Self::claim`] and has not released it, and does not call this
    /// again from inside `f`: no other access to the state exists while `f` runs.
    pub unsafe fn with_claimed<R>(&self, f: impl FnOnce(&mut Lane) -> R) -> R {
        // SAFETY: exclusive access, by the caller's claim.
        unsafe { self.state.with_mut(f) }
    }

    /// The state through exclusive access to the pool.
    pub fn get_mut(&mut self) -> &mut Lane {
        self.state.get_mut()
    }
}
