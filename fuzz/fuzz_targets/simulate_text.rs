#![no_main]
// The body is superpager_core::fuzz_targets::simulate_text (replayed as a test on stable).
libfuzzer_sys::fuzz_target!(|data: &[u8]| superpager_core::fuzz_targets::run("simulate_text", data));
