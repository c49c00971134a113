//! The `ops_crash` target: the body is `nvs_fuzz_check::ops_crash::run` (nvs-fuzz-check/src/ops_crash.rs
//! says what it checks), shared with the stable corpus replay (`cargo test -p nvs-fuzz-check`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nvs_fuzz_check::ops_crash::run(data));
