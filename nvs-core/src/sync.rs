//! The synchronization primitives nvs-core uses, from one place: `core` atomics and
//! `spin` locks in normal builds, loom's under `--cfg loom` so the loom models in
//! `tests/loom.rs` explore every interleaving of the real code.
//!
//! Only what the pool needs: an `RwLock` (the shared index and allocation state), an
//! `AtomicBool` (lane claims) and an `UnsafeCell` (a lane's private write position,
//! touched only by the thread holding the lane's claim).

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// An Acquire fence: later reads stay after earlier ones.
pub(crate) fn fence_acquire() {
    #[cfg(not(loom))]
    core::sync::atomic::fence(Ordering::Acquire);
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::Acquire);
}

/// A reader-writer lock whose guards come back directly (no poisoning).
#[derive(Debug, Default)]
pub(crate) struct RwLock<T> {
    #[cfg(not(loom))]
    inner: spin::RwLock<T>,
    #[cfg(loom)]
    inner: loom::sync::RwLock<T>,
}

#[cfg(not(loom))]
pub(crate) type ReadGuard<'a, T> = spin::RwLockReadGuard<'a, T>;
#[cfg(not(loom))]
pub(crate) type WriteGuard<'a, T> = spin::RwLockWriteGuard<'a, T>;
#[cfg(loom)]
pub(crate) type ReadGuard<'a, T> = loom::sync::RwLockReadGuard<'a, T>;
#[cfg(loom)]
pub(crate) type WriteGuard<'a, T> = loom::sync::RwLockWriteGuard<'a, T>;

impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return RwLock { inner: spin::RwLock::new(value) };
        #[cfg(loom)]
        return RwLock { inner: loom::sync::RwLock::new(value) };
    }

    pub(crate) fn read(&self) -> ReadGuard<'_, T> {
        #[cfg(not(loom))]
        return self.inner.read();
        #[cfg(loom)]
        return self.inner.read().unwrap();
    }

    pub(crate) fn write(&self) -> WriteGuard<'_, T> {
        #[cfg(not(loom))]
        return self.inner.write();
        #[cfg(loom)]
        return self.inner.write().unwrap();
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        return self.inner.get_mut();
        #[cfg(loom)]
        return self.inner.get_mut().unwrap();
    }

    pub(crate) fn into_inner(self) -> T {
        #[cfg(not(loom))]
        return self.inner.into_inner();
        #[cfg(loom)]
        return self.inner.into_inner().unwrap();
    }
}

/// A cell for state owned by whoever holds a claim (a lane's write position).
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T> {
    #[cfg(not(loom))]
    inner: core::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
}

impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        #[cfg(not(loom))]
        return UnsafeCell { inner: core::cell::UnsafeCell::new(value) };
        #[cfg(loom)]
        return UnsafeCell { inner: loom::cell::UnsafeCell::new(value) };
    }

    /// Run `f` on the value.
    ///
    /// # Safety
    /// The caller has exclusive access (holds the claim that guards this cell), so no
    /// other reference to the value exists while `f` runs.
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        // SAFETY: exclusive access is the caller's obligation.
        return f(unsafe { &mut *self.inner.get() });
        #[cfg(loom)]
        // SAFETY: exclusive access is the caller's obligation (and loom checks it).
        return self.inner.with_mut(|p| f(unsafe { &mut *p }));
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        #[cfg(not(loom))]
        return self.inner.get_mut();
        #[cfg(loom)]
        // SAFETY: `&mut self` is exclusive.
        return self.inner.with_mut(|p| unsafe { &mut *p });
    }
}
