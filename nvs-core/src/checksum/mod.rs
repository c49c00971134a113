//! The checksums every header and payload carries (FORMAT.md, "Checksum: nvs-hash64" and
//! "Payload checksum: nvs-sum"). They depend on nothing else in nvs, so both the format
//! (which stores them) and the media seam (whose summed stores and reads compute nvs-sum
//! while copying) build on them.

// Reachable only through `internals` (and `Sum`, whose public items are documented).
#![allow(missing_docs)]

pub mod hash;
pub mod sum;
