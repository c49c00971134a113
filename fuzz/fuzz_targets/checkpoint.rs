//! The `checkpoint` target: the body is `nvs_fuzz_check::checkpoint::run`
//! (nvs-fuzz-check/src/checkpoint.rs says what it checks), shared with the stable corpus
//! replay (`cargo test -p nvs-fuzz-check`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nvs_fuzz_check::checkpoint::run(data));
