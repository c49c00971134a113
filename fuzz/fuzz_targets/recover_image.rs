//! Arbitrary bytes as a pool image: open (recover), list every name, get every version,
//! verify every payload. Any panic, out-of-bounds access or hang is a finding
//! (ARCHITECTURE §4.6: bad media is an error, never a crash).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvs_core::{HeapMemory, Pool, Region, NAME_MAX};

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

fuzz_target!(|data: &[u8]| {
    let mut lines = vec![Line([0; 64]); data.len().div_ceil(64)];
    let len = lines.len() * 64;
    // SAFETY: `lines` is 64-aligned, `len` bytes long, outlives the pool, and only the
    // region touches it while the pool lives.
    let region = unsafe {
        let base: *mut u8 = lines.as_mut_ptr().cast();
        std::ptr::copy_nonoverlapping(data.as_ptr(), base, data.len());
        Region::new(base, len)
    };
    let Ok(pool) = Pool::open_read_only(region, HeapMemory::new()) else { return };
    let mut buf = vec![0u8; len];
    let names: Vec<_> = pool.names().collect();
    for n in names {
        let mut name_buf = [0u8; NAME_MAX];
        let name = pool.name_bytes(n.id, &mut name_buf).to_vec();
        let Ok(versions) = pool.versions(&name) else { continue };
        for v in versions.collect::<Vec<_>>() {
            let _ = pool.get(&name, v.version, &mut buf);
        }
        let _ = pool.latest(&name);
    }
    let _ = pool.verify_all();
});
