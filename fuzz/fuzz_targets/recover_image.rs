//! The `recover_image` target: the body is `nvs_fuzz_check::recover_image::run` (nvs-fuzz-check/src/recover_image.rs
//! says what it checks), shared with the stable corpus replay (`cargo test -p nvs-fuzz-check`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nvs_fuzz_check::recover_image::run(data));
