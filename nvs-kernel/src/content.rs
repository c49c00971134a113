//! What the kernel puts: four names, and version `v` of name `n` is `len_of(n, v)` bytes
//! of `byte_of(n, v, i)`. The host's test includes this file to check the same bytes.

/// The names the kernel writes, in turn.
pub const NAMES: [&str; 4] = ["temperature", "pressure", "velocity", "step"];

/// The length of version `v` of name `n`: 1 to 8192 bytes.
pub fn len_of(n: usize, v: u64) -> usize {
    1 + ((v.wrapping_mul(2_654_435_761) ^ (n as u64).wrapping_mul(977)) % 8192) as usize
}

/// Byte `i` of version `v` of name `n`.
pub fn byte_of(n: usize, v: u64, i: usize) -> u8 {
    let i = i as u64;
    (v.wrapping_mul(31) ^ (n as u64).wrapping_mul(17) ^ i.wrapping_mul(7) ^ (i >> 8)) as u8
}
