//! The x86 NT-store and portable regions store exactly the given bytes, zero-pad the
//! last word, touch nothing else, and read back what they stored.

mod common;
use common::*;
use nvs_core::{Media, Region, StoreKind, Sum};

fn check_kind(kind: StoreKind) {
    let mut rng = Rng(9);
    // Under miri (portable stores only) a sample in small regions: every length up to
    // 17, the ones around a word and a line, and one long store near a page end.
    let cases: Vec<(usize, usize)> = if cfg!(miri) {
        let lens = (0..=17).chain([31, 32, 33, 63, 64, 65, 255]);
        lens.flat_map(|l| [0usize, 56].map(|o| (l, o))).chain([(4096 + 24, 4096 - 8)]).collect()
    } else {
        let lens = (0..300).chain([1000, 4096 + 24, 10_000, 64 * 129, 64 * 130 + 8]);
        lens.flat_map(|l| [0usize, 8, 16, 24, 32, 40, 56, 64, 72, 4096 - 8].map(|o| (l, o))).collect()
    };
    for (len, off) in cases {
        let size = if cfg!(miri) { (off + len + 64).next_multiple_of(64) } else { 32 << 10 };
        let mut ram = Ram::new(size, 0xEE);
        let src = rng.bytes(len);
        // SAFETY: `ram` is 64-aligned, valid for its length, and outlives `region`.
        let region = unsafe { Region::with_kind(ram.bytes_mut().as_mut_ptr(), size, kind) };
        region.store_nt(off, &src);
        region.fence();
        let mut back = vec![0u8; len];
        region.read(off, &mut back);
        assert_eq!(back, src, "{kind:?} len {len} off {off}");
        let img = ram.bytes();
        let padded = len.next_multiple_of(8);
        assert!(img[off + len..off + padded].iter().all(|&b| b == 0), "padding {len}@{off}");
        assert!(img[..off].iter().all(|&b| b == 0xEE), "before {len}@{off}");
        assert!(img[off + padded..].iter().all(|&b| b == 0xEE), "after {len}@{off}");
        // The summed store (the fused kernel where there is one) stores the same bytes
        // and sums them as `Sum::write` does, whatever the sum was fed before (a line, a
        // word, a partial word); the summed read (plain and shared) likewise.
        let image = img.to_vec();
        let pres: &[usize] = if off == 0 { &[0, 8, 13, 64] } else { &[0, 13] };
        for &pre in pres {
            let prefix = &src[..pre.min(len)];
            let mut want = Sum::new(5);
            want.write(prefix);
            want.write(&src);
            let want = want.finish(99);
            let mut ram2 = Ram::new(size, 0xEE);
            // SAFETY: as above.
            let r2 = unsafe { Region::with_kind(ram2.bytes_mut().as_mut_ptr(), size, kind) };
            let mut got = Sum::new(5);
            got.write(prefix);
            r2.store_nt_summed(off, &src, &mut got);
            r2.fence();
            assert_eq!(got.finish(99), want, "{kind:?} summed store {len}@{off} after {pre}");
            assert!(ram2.bytes() == image, "{kind:?} summed store image {len}@{off}");
            for shared in [false, true] {
                // SAFETY: as above; nothing writes `ram2` while this region reads it.
                let r3 = unsafe { Region::with_kind(ram2.bytes_mut().as_mut_ptr(), size, kind) };
                let r3 = if shared { r3.shared() } else { r3 };
                let mut got = Sum::new(5);
                got.write(prefix);
                let mut back = vec![0u8; len];
                r3.read_summed(off, &mut back, &mut got);
                assert_eq!(back, src, "{kind:?} summed read {len}@{off} shared {shared}");
                assert_eq!(got.finish(99), want, "{kind:?} summed read {len}@{off} after {pre}, shared {shared}");
            }
        }
    }
    // Copies of 1 MiB and more (which prefetch their source ahead of the loads): every
    // byte, the padding, and nothing past it; the summed store too.
    if !cfg!(miri) {
        let size = 3 << 20;
        for (len, off) in [(1 << 20, 0usize), ((1 << 20) + 8, 56), ((2 << 20) + 13, 4096 - 8)] {
            let src = rng.bytes(len);
            for summed in [false, true] {
                let mut ram = Ram::new(size, 0xEE);
                // SAFETY: as above.
                let region = unsafe { Region::with_kind(ram.bytes_mut().as_mut_ptr(), size, kind) };
                let mut got = Sum::new(5);
                if summed {
                    region.store_nt_summed(off, &src, &mut got);
                } else {
                    region.store_nt(off, &src);
                }
                region.fence();
                let img = ram.bytes();
                let padded = len.next_multiple_of(8);
                assert!(img[off..off + len] == src[..], "{kind:?} len {len} off {off} summed {summed}");
                assert!(img[off + len..off + padded].iter().all(|&b| b == 0), "padding {len}@{off}");
                assert!(img[..off].iter().all(|&b| b == 0xEE), "before {len}@{off}");
                assert!(img[off + padded..].iter().all(|&b| b == 0xEE), "after {len}@{off}");
                if summed {
                    let mut want = Sum::new(5);
                    want.write(&src);
                    assert_eq!(got.finish(99), want.finish(99), "{kind:?} summed {len}@{off}");
                }
            }
        }
    }
    let mut ram = Ram::new(4096, 0);
    // SAFETY: as above.
    let region = unsafe { Region::with_kind(ram.bytes_mut().as_mut_ptr(), 4096, kind) };
    region.store_word_nt(128, 0x0102_0304_0506_0708);
    region.store(200, b"cached");
    region.flush(200, 6);
    region.fence();
    assert_eq!(region.load_word(128), 0x0102_0304_0506_0708);
    let mut b = [0u8; 6];
    region.read(200, &mut b);
    assert_eq!(&b, b"cached");
}

/// Both store kinds are byte-exact with zero padding and no stray writes; the NT kind
/// with the default bulk stores, AVX2 ones and AVX-512 ones where the CPU has them.
/// (One test: the store width is process-wide.)
#[test]
fn stores_are_exact() {
    check_kind(StoreKind::NonTemporal);
    check_kind(StoreKind::Portable);
    let avx512 = nvs_core::internals::use_avx512(true);
    assert_eq!(nvs_core::nt_store_width() == 64, avx512);
    if avx512 {
        check_kind(StoreKind::NonTemporal);
    }
    assert!(!nvs_core::internals::use_avx512(false));
    assert!(nvs_core::nt_store_width() <= 32);
    check_kind(StoreKind::NonTemporal);
}

/// An access outside the region is refused (panics) instead of touching other memory.
#[test]
#[should_panic(expected = "outside")]
fn out_of_bounds_is_refused() {
    let mut ram = Ram::new(4096, 0);
    // SAFETY: as above.
    let region = unsafe { Region::new(ram.bytes_mut().as_mut_ptr(), 4096) };
    region.store_nt(4096 - 8, &[1u8; 9]);
}

/// A shared region (a reader's view of memory another process writes) reads exactly
/// what a plain one does: every alignment of the start, lengths across a word, a line,
/// the short-copy limit (4 KiB) and the long-copy pieces (256 KiB).
#[test]
fn shared_reads_read_the_same_bytes() {
    let size = if cfg!(miri) { 8192 } else { 1 << 20 };
    let mut ram = Ram::new(size, 0);
    let mut rng = Rng(17);
    let bytes = rng.bytes(size);
    ram.bytes_mut().copy_from_slice(&bytes);
    // SAFETY: `ram` is 64-aligned, valid for its length, and outlives both regions.
    let (plain, shared) = unsafe {
        let p = ram.bytes_mut().as_mut_ptr();
        (Region::new(p, size), Region::new(p, size).shared())
    };
    let lens: Vec<usize> = if cfg!(miri) {
        vec![0, 1, 7, 8, 9, 63, 64, 65, 200]
    } else {
        vec![0, 1, 7, 8, 9, 63, 64, 65, 1000, 4095, 4096, 4097, 300_000, (1 << 20) - 64]
    };
    for len in lens {
        for off in [0usize, 1, 7, 8, 13, 64] {
            if off + len > size {
                continue;
            }
            let (mut a, mut b) = (vec![1u8; len], vec![2u8; len]);
            plain.read(off, &mut a);
            shared.read(off, &mut b);
            assert_eq!(a, b, "len {len} off {off}");
            assert_eq!(&b[..], &bytes[off..off + len]);
        }
    }
}

/// A large summed read (the copy-out by NT stores, aligned where the caller's buffer is
/// not; and a shared region's copy in `asm!`) copies every byte into any alignment of the
/// buffer, touches nothing around it, and sums as `Sum::write` does.
#[test]
fn large_summed_reads_into_any_alignment() {
    if cfg!(miri) {
        return; // megabytes: too slow there, and the portable path has no NT copy-out
    }
    summed_reads_into(
        (5 << 20) + 4096,
        &[(5 << 20, 0usize), ((4 << 20) + 64, 1), ((4 << 20) + 200, 8), (5 << 20, 17), (4 << 20, 63)],
    );
}

/// A summed store of 1 MiB or more (the folding copy that prefetches its source) stores
/// every byte, touches nothing around it, and sums as `Sum::write` does.
#[test]
fn large_summed_stores() {
    if cfg!(miri) {
        return; // megabytes: too slow there, and the portable path does not prefetch
    }
    let mut rng = Rng(31);
    for (len, off) in [(1 << 20, 0usize), ((1 << 20) + 4096 + 72, 64), ((2 << 20) + 8, 4096 - 8)] {
        let size = (off + len + 4096).next_multiple_of(64);
        let mut ram = Ram::new(size, 0xEE);
        let src = rng.bytes(len);
        // SAFETY: `ram` is 64-aligned, valid for its length, and outlives `region`.
        let region = unsafe { Region::new(ram.bytes_mut().as_mut_ptr(), size) };
        let mut got = Sum::new(7);
        region.store_nt_summed(off, &src, &mut got);
        region.fence();
        let mut want = Sum::new(7);
        want.write(&src);
        assert_eq!(got.finish(len as u64), want.finish(len as u64), "len {len} off {off}");
        let img = ram.bytes();
        assert!(img[off..off + len] == src[..], "len {len} off {off}");
        let end = off + len.next_multiple_of(8);
        assert!(img[..off].iter().chain(&img[end..]).all(|&b| b == 0xEE), "around len {len} off {off}");
    }
}

/// Summed reads below the NT copy-out's size (ordinary stores, aligned where the
/// caller's buffer is not) likewise, for every count of lines the folding kernel splits
/// differently (two lines, four accumulators of four lines and what is left after them).
#[test]
fn summed_reads_into_any_alignment() {
    let lines: Vec<usize> = if cfg!(miri) { vec![2, 5] } else { (1..=20).chain([63, 64, 65, 512, 513]).collect() };
    let cases: Vec<(usize, usize)> = lines
        .iter()
        .flat_map(|&n| [0usize, 1, 8, 17, 63].map(|at| (n * 64 + if n % 3 == 0 { 8 } else { 0 }, at)))
        .collect();
    summed_reads_into(64 * 600, &cases);
}

/// Read `len` bytes at offset 64 of a random region of `size` bytes into a buffer at
/// `at`, for each `(len, at)`, by a plain and a shared region: the bytes, nothing around
/// them, and the sum.
fn summed_reads_into(size: usize, cases: &[(usize, usize)]) {
    let mut ram = Ram::new(size, 0);
    let mut rng = Rng(23);
    let bytes = rng.bytes(size);
    ram.bytes_mut().copy_from_slice(&bytes);
    // SAFETY: `ram` is 64-aligned, valid for its length, and outlives both regions.
    let (plain, shared) = unsafe {
        let p = ram.bytes_mut().as_mut_ptr();
        (Region::new(p, size), Region::new(p, size).shared())
    };
    for &(len, at) in cases {
        let mut want = Sum::new(3);
        want.write(&bytes[64..64 + len]);
        let want = want.finish(len as u64);
        for region in [&plain, &shared] {
            let mut buf = Ram::new((len + 128).next_multiple_of(64), 0xA5);
            let buf = &mut buf.bytes_mut()[..len + 128];
            let mut got = Sum::new(3);
            region.read_summed(64, &mut buf[at..at + len], &mut got);
            assert!(buf[at..at + len] == bytes[64..64 + len], "len {len} at {at}");
            assert!(buf[..at].iter().chain(&buf[at + len..]).all(|&b| b == 0xA5), "around len {len} at {at}");
            assert_eq!(got.finish(len as u64), want, "len {len} at {at}");
        }
    }
}
