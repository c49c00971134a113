//! nvs-kernel: nvs-core inside a minimal x86_64 kernel, booted by qemu's PVH entry. Its
//! pool lives on an emulated NVDIMM, which qemu maps at guest-physical 4 GiB from a host
//! file: the kernel recovers the pool (or formats one), checks every recovered version's
//! bytes, then puts versions in a loop and prints `ack NAME VERSION` on the serial line
//! after each put returned. No allocator: the index is a `static` [`FixedMemory`].
//!
//! Serial output, one line each: `pmem BYTES`, `nvdimm BYTES` (the device's size, from
//! the ACPI NFIT: a larger `pmem_mib` is refused, `bad pmem_mib=...`, exit 9), `formatted` or `recovered OBJECTS`,
//! `have NAME LO HI` (versions LO..=HI recovered, every byte checked) or `have NAME none`,
//! `ready`, then `ack NAME VERSION` and `reclaim FREED`; failures `bad ...`, `panic ...`.
//! Kernel command line (`-append`): `pmem_mib=N` (default 64), `puts=N` (stop after N
//! puts and close the lane's stream; `puts=0`: recover, check and exit), `probe=1` (first time a 1 MiB read of RAM and
//! of the NVDIMM, in TSC cycles: how fast this guest's memory is). Exit status through isa-debug-exit: 0 is
//! qemu's 1, a failure is an odd number above it.

#![no_std]
#![no_main]

mod acpi;
mod boot;
mod content;
mod serial;

use content::{byte_of, len_of, NAMES};
use core::fmt::Write;
use core::ptr::addr_of_mut;
use nvs_core::{Error, FixedMemory, FormatOptions, Object, Pool, Region};

/// Guest-physical address of the NVDIMM (qemu puts the first one at 4 GiB).
const PMEM_BASE: usize = 0x1_0000_0000;
/// Retention keeps this many newest versions of each name when the pool is full.
const KEEP: u32 = 4;
const MAX_LEN: usize = 8192;

/// Room for every object a 64 MiB pool of these sizes holds, and more.
type Index = FixedMemory<65536, 64, 262144, 1024>;
static mut INDEX: Index = Index::new();
static mut PUT_BUF: [u8; MAX_LEN] = [0; MAX_LEN];
static mut GET_BUF: [u8; MAX_LEN] = [0; MAX_LEN];

macro_rules! say {
    ($($t:tt)*) => {{
        let _ = writeln!(serial::Serial, $($t)*);
    }};
}

fn fail(code: u8, what: core::fmt::Arguments<'_>) -> ! {
    say!("{what}");
    serial::exit(code)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    fail(7, format_args!("panic {info}"))
}

/// The kernel command line's `key=N`, or `default`.
fn arg(cmdline: &[u8], key: &str, default: u64) -> u64 {
    for word in cmdline.split(|&b| b == b' ') {
        if let Some(v) = word.strip_prefix(key.as_bytes()).and_then(|r| r.strip_prefix(b"=")) {
            let mut n: u64 = 0;
            for &d in v {
                if !d.is_ascii_digit() {
                    return default;
                }
                n = n.saturating_mul(10).saturating_add(u64::from(d - b'0'));
            }
            return n;
        }
    }
    default
}

/// The command line from PVH's `hvm_start_info` (its `cmdline_paddr` at byte 24).
fn cmdline(start_info: u32) -> &'static [u8] {
    if start_info == 0 {
        return &[];
    }
    // SAFETY: qemu passes the physical address of a valid hvm_start_info (identity
    // mapped); its cmdline_paddr is 0 or a NUL-terminated string.
    unsafe {
        let info = start_info as usize as *const u8;
        if (info as *const u32).read_volatile() != 0x336e_c578 {
            return &[];
        }
        let p = (info.add(24) as *const u64).read_unaligned() as usize as *const u8;
        if p.is_null() {
            return &[];
        }
        let mut n = 0;
        while n < 512 && *p.add(n) != 0 {
            n += 1;
        }
        core::slice::from_raw_parts(p, n)
    }
}

fn rdtsc() -> u64 {
    // SAFETY: reads the time-stamp counter; no memory is touched.
    unsafe { core::arch::x86_64::_rdtsc() }
}

type KPool = Pool<Region, &'static mut Index>;

/// Open the pool on the NVDIMM, or format one when there is none.
fn open(len: usize) -> KPool {
    // SAFETY: qemu maps the NVDIMM's `len` bytes at PMEM_BASE (the command line says how
    // many); the page tables map them; nothing else uses them.
    let region = || unsafe { Region::new(PMEM_BASE as *mut u8, len) };
    // SAFETY: the one use of INDEX; a failed open dropped its borrow before the next.
    let index = || unsafe { &mut *addr_of_mut!(INDEX) };
    match Pool::open(region(), index()) {
        Ok(p) => {
            say!("recovered {}", p.stats().objects);
            p
        }
        Err(Error::NotFormatted) => {
            let mut o = FormatOptions::new(rdtsc() | 1);
            o.segment_len = Some(256 << 10);
            o.lanes_max = 1;
            let p = Pool::format(region(), o, index()).unwrap_or_else(|e| fail(2, format_args!("bad format {e}")));
            say!("formatted");
            p
        }
        Err(e) => fail(2, format_args!("bad open {e}")),
    }
}

/// Every recovered version of every name, byte by byte: `have NAME LO HI`.
fn check(pool: &KPool) {
    // SAFETY: the one use of GET_BUF.
    let buf = unsafe { &mut *addr_of_mut!(GET_BUF) };
    for (n, name) in NAMES.iter().enumerate() {
        let Ok(versions) = pool.versions(name) else {
            say!("have {name} none");
            continue;
        };
        let (mut lo, mut hi, mut count) = (u64::MAX, 0, 0u64);
        for info in versions {
            let v = info.version;
            let len = pool.get(name, v, buf).unwrap_or_else(|e| fail(3, format_args!("bad {name} {v} get {e}")));
            if len != len_of(n, v) || (0..len).any(|i| buf[i] != byte_of(n, v, i)) {
                fail(3, format_args!("bad {name} {v} bytes"));
            }
            (lo, hi, count) = (lo.min(v), hi.max(v), count + 1);
        }
        if count != hi - lo + 1 {
            fail(3, format_args!("bad {name} {count} versions in {lo}..={hi}"));
        }
        say!("have {name} {lo} {hi}");
    }
}

/// Put versions in turn, `ack NAME VERSION` after each put returned.
fn put_loop(pool: &mut KPool, puts: u64) -> ! {
    // SAFETY: the one use of PUT_BUF.
    let buf = unsafe { &mut *addr_of_mut!(PUT_BUF) };
    for i in 0..puts {
        let n = (i % NAMES.len() as u64) as usize;
        let name = NAMES[n];
        let v = pool.latest(name).map_or(1, |l| l + 1);
        let len = len_of(n, v);
        for (j, b) in buf[..len].iter_mut().enumerate() {
            *b = byte_of(n, v, j);
        }
        let put = loop {
            match pool.put(0, Object::new(name, &buf[..len])) {
                Ok(p) => break p,
                Err(Error::Full | Error::Fragmented { .. } | Error::IndexFull { .. }) => {
                    let freed = pool.reclaim(KEEP).unwrap_or_else(|e| fail(4, format_args!("bad reclaim {e}")));
                    say!("reclaim {freed}");
                    if freed == 0 {
                        fail(4, format_args!("bad full and nothing to reclaim"));
                    }
                }
                Err(e) => fail(5, format_args!("bad put {name} {v} {e}")),
            }
        };
        if put.version != v {
            fail(6, format_args!("bad {name} got version {} wanted {v}", put.version));
        }
        say!("ack {name} {v}");
    }
    // A run that ends: its stream too (followers on the host see the end).
    if puts > 0 {
        pool.close_lane(0).unwrap_or_else(|e| fail(5, format_args!("bad close {e}")));
        say!("closed");
    }
    say!("done");
    serial::exit(0)
}

#[no_mangle]
extern "C" fn kmain(start_info: u32) -> ! {
    serial::init();
    let cmd = cmdline(start_info);
    let len = (arg(cmd, "pmem_mib", 64) as usize) << 20;
    say!("pmem {len}");
    // The pool may not be larger than the NVDIMM (stores past its end go nowhere).
    match acpi::pmem_len(start_info, PMEM_BASE as u64) {
        Some(dev) if (len as u64) > dev => {
            fail(9, format_args!("bad pmem_mib={} but the NVDIMM holds {} MiB", len >> 20, dev >> 20))
        }
        Some(dev) => say!("nvdimm {dev}"),
        None => say!("nvdimm unknown (no ACPI NFIT range at 4 GiB): pmem_mib unchecked"),
    }
    if arg(cmd, "probe", 0) == 1 {
        for (what, base) in [("ram", 32usize << 20), ("pmem", PMEM_BASE), ("ram", 32 << 20), ("pmem", PMEM_BASE)] {
            let t = rdtsc();
            let mut sum = 0u64;
            for i in 0..(1usize << 17) {
                // SAFETY: probe reads of mapped memory.
                sum = sum.wrapping_add(unsafe { ((base + i * 8) as *const u64).read_volatile() });
            }
            say!("probe {what} 1 MiB read in {} cycles ({sum})", rdtsc() - t);
        }
    }
    let t0 = rdtsc();
    let mut pool = open(len);
    check(&pool);
    say!("ready {} cycles", rdtsc() - t0);
    put_loop(&mut pool, arg(cmd, "puts", u64::MAX))
}
