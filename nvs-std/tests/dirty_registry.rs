//! The mprotect tracker's process-wide limits, in their own test binary (process) so that
//! filling the registry or the VMA table cannot disturb the other dirty-tracking tests:
//! the fixed registry of MPROTECT_CAPACITY buffers, and the overflow path of the SIGSEGV
//! handler when vm.max_map_count stops it from unprotecting a single page.

use nvs_std::dirty::{TrackedBuf, TrackerKind, MPROTECT_CAPACITY};
use std::io::Write;
use std::sync::Mutex;

/// The two tests both need the process's slots / VMA headroom to themselves.
static ALONE: Mutex<()> = Mutex::new(());

fn ps() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }) as usize
}

fn take(b: &mut TrackedBuf) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    b.take_dirty(&mut out);
    out
}

#[test]
fn registry_full_is_a_clear_error() {
    let _g = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let mut bufs: Vec<TrackedBuf> =
        (0..MPROTECT_CAPACITY).map(|_| TrackedBuf::new(ps(), TrackerKind::Mprotect).unwrap()).collect();
    let e = TrackedBuf::new(ps(), TrackerKind::Mprotect).unwrap_err();
    assert!(e.to_string().contains("registry full"), "{e}");
    // uffd-wp buffers have no such limit (when the kernel has it).
    if nvs_std::dirty::uffd_wp_async_available().is_ok() {
        TrackedBuf::new(ps(), TrackerKind::UffdWpAsync).unwrap();
    }
    // All tracked at once still work, each seeing only its own writes.
    for b in &mut bufs {
        take(b);
    }
    for (i, b) in bufs.iter_mut().enumerate() {
        b[i % ps()] = 1;
    }
    for b in &mut bufs {
        assert_eq!(take(b), vec![(0, ps() as u64)]);
    }
    bufs.swap_remove(17);
    let mut again = TrackedBuf::new(ps(), TrackerKind::Mprotect).expect("a dropped buffer frees its slot");
    take(&mut again);
    again[1] = 1;
    assert_eq!(take(&mut again), vec![(0, ps() as u64)]);
}

/// Writing every other page of a buffer larger than 2 * vm.max_map_count pages makes the
/// handler's single-page mprotect fail (ENOMEM: too many VMAs). It must then unprotect
/// the whole buffer, and the next take must report all of it, after which tracking works
/// page by page again.
#[test]
fn vma_limit_overflow_reports_everything() {
    let _g = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let max: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count").unwrap().trim().parse().unwrap();
    if max > 1 << 20 {
        let _ = writeln!(std::io::stderr().lock(), "SKIPPED vma_limit_overflow: vm.max_map_count = {max} is too large");
        return;
    }
    let p = ps();
    let npages = 2 * max + 4096;
    let len = npages * p;
    let mut b = TrackedBuf::new(len, TrackerKind::Mprotect).unwrap();
    take(&mut b);
    for pg in (0..npages).step_by(2) {
        b[pg * p] = 1;
    }
    assert_eq!(take(&mut b), vec![(0, len as u64)], "overflow: the whole buffer");
    b[3 * p] = 2;
    b[npages / 2 * p] = 2;
    let half = (npages / 2 * p) as u64;
    assert_eq!(take(&mut b), vec![((3 * p) as u64, p as u64), (half, p as u64)]);
    assert_eq!(take(&mut b), vec![]);
    // Release the memory before the next test's allocations.
    drop(b);
}
