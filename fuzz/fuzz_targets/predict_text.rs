#![no_main]
// The body is superpager_core::fuzz_targets::predict_text (replayed as a test on stable).
libfuzzer_sys::fuzz_target!(|data: &[u8]| superpager_core::fuzz_targets::run("predict_text", data));
