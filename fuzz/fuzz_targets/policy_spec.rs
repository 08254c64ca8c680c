#![no_main]
// The body is superpager_core::fuzz_targets::policy_spec (replayed as a test on stable).
libfuzzer_sys::fuzz_target!(|data: &[u8]| superpager_core::fuzz_targets::run("policy_spec", data));
