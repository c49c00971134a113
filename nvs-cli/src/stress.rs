//! The stress writer's objects (`nvs stress-writer`, `nvs follow --verify-stress`): a
//! deterministic payload and length for each `(name, version)`, so a follower or a test
//! can recompute and compare them. The real-process crash test (tests/sigkill.rs)
//! includes this file too.

/// Deterministic test payload of `len` bytes for `(name, version)` on `lane` (the stress
/// writer puts these; a follower or a test can recompute and compare them). Lanes differ,
/// so that in a pool with lane names one lane's bytes never pass for another's.
pub fn stress_payload(lane: u32, name: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut x = nvs_core::internals::hash::hash64(version ^ (lane as u64) << 48, name) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Length of the stress writer's object `(name, version)`, 1 ..= `max`.
pub fn stress_len(name: &[u8], version: u64, max: u64) -> usize {
    (1 + nvs_core::internals::hash::hash64(version ^ 0x5555, name) % max.max(1)) as usize
}
