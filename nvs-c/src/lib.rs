//! # nvs-c: the C ABI of nvs
//!
//! Builds `libnvs.so` and `libnvs.a`. Three headers, checked into `include/`:
//!
//! - `nvs.h` (generated from this crate by cbindgen; a test fails when it is stale):
//!   pools, lanes, puts (single, vectored, batch, delta, with metadata), gets into a
//!   caller's buffer, versions and names, followers, end of stream and retention.
//! - `nvstream.h`: the NVStream wrapper API (`nvs_init`, `nvs_alloc`, `nvs_snapshot`,
//!   ...), for codes already instrumented for NVStream, C and Fortran entry points.
//! - `nvs.f90`: a Fortran module (`use nvs`) over both, with `iso_c_binding`.
//!
//! Every function returns a status ([`NVS_OK`] or an `NVS_E_*` code) and, on failure,
//! leaves a one-line message for [`nvs_last_error`] (per thread). No Rust panic crosses
//! the boundary: one is caught and reported as [`NVS_E_PANIC`]. A null handle, a null
//! pointer with a non-zero length and a too-small buffer are error codes.

#![deny(missing_docs)]
#![allow(non_camel_case_types)]

mod error;
mod follow;
mod nvstream;
mod pool;

pub use error::*;
pub use follow::*;
pub use nvstream::*;
pub use pool::*;
