#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ojrunner_fuzzing::icpc_package(data));
