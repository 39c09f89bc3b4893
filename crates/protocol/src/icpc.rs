//! The ICPC problem package format (Kattis, DOMjudge, the ICPC World
//! Finals), mapped to what the protocol carries.

/// Where a package's output validator goes in the testdata: its source as
/// `icpc/validator.cpp` or `icpc/validator.c`, its headers beside it.
pub const VALIDATOR_STEM: &str = "icpc/validator";

/// Where a package's `validator_flags` go in the testdata: the validator's
/// arguments after its three, separated by white space.
pub const FLAGS_FILE: &str = "icpc/validator_flags";
