//! How large the NVDIMM really is: the ACPI NFIT's system-physical-address range that
//! starts where the pool lives. qemu's PVH start info points at the RSDP; from it the
//! RSDT or XSDT lists the tables; the NFIT's SPA range structures (type 0) give each
//! persistent-memory range's base and length. The kernel refuses a `pmem_mib` larger
//! than that range (its stores past the device's end would go nowhere, and acknowledged
//! puts would be lost).
//!
//! Everything read here is checked before it is followed: signatures, lengths, and
//! addresses inside the identity-mapped low 8 GiB.

/// The identity map of the boot code covers this much.
const MAPPED: u64 = 8 << 30;

/// Read a `T` at physical address `at` if `at..at + size` is mapped.
fn read<T: Copy>(at: u64) -> Option<T> {
    let end = at.checked_add(core::mem::size_of::<T>() as u64)?;
    if at == 0 || end > MAPPED {
        return None;
    }
    // SAFETY: identity-mapped memory (checked above); an unaligned read of plain data.
    Some(unsafe { (at as usize as *const T).read_unaligned() })
}

/// The table at `at` if its signature is `sig`: (address, length).
fn table(at: u64, sig: &[u8; 4]) -> Option<(u64, u64)> {
    let (s, len) = (read::<[u8; 4]>(at)?, read::<u32>(at + 4)? as u64);
    (s == *sig && len >= 36 && read::<u8>(at + len - 1).is_some()).then_some((at, len))
}

/// The length of the NFIT's persistent-memory range starting at `base`, if the firmware
/// describes one (`None`: no RSDP, no NFIT, or no range there).
pub fn pmem_len(start_info: u32, base: u64) -> Option<u64> {
    // hvm_start_info: magic at 0, rsdp_paddr at 32.
    if start_info == 0 || read::<u32>(start_info as u64)? != 0x336e_c578 {
        return None;
    }
    let rsdp = read::<u64>(start_info as u64 + 32)?;
    if read::<[u8; 8]>(rsdp)? != *b"RSD PTR " {
        return None;
    }
    // ACPI 2+: the XSDT (64-bit entries); else the RSDT (32-bit entries).
    let (root, entry) = match (read::<u8>(rsdp + 15)?, read::<u64>(rsdp + 24)) {
        (r, Some(x)) if r >= 2 && x != 0 => (table(x, b"XSDT")?, 8),
        _ => (table(read::<u32>(rsdp + 16)? as u64, b"RSDT")?, 4),
    };
    let (at, len) = root;
    let nfit = (0..(len - 36) / entry).find_map(|i| {
        let p = at + 36 + i * entry;
        let t = if entry == 8 { read::<u64>(p)? } else { read::<u32>(p)? as u64 };
        table(t, b"NFIT")
    })?;
    // Structures after the header and 4 reserved bytes: type u16, length u16.
    let (mut p, end) = (nfit.0 + 40, nfit.0 + nfit.1);
    while p + 4 <= end {
        let (kind, slen) = (read::<u16>(p)?, read::<u16>(p + 2)? as u64);
        if slen < 4 || p + slen > end {
            return None;
        }
        // SPA range: base at 32, length at 40.
        if kind == 0 && slen >= 48 && read::<u64>(p + 32)? == base {
            return read::<u64>(p + 40);
        }
        p += slen;
    }
    None
}
