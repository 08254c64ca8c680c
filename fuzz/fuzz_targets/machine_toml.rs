#![no_main]
// The body is superpager_core::fuzz_targets::machine_toml (replayed as a test on stable).
libfuzzer_sys::fuzz_target!(|data: &[u8]| superpager_core::fuzz_targets::run("machine_toml", data));
