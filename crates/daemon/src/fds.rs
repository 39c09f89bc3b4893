//! The descriptors a program keeps to itself: whatever it inherited beyond
//! stdio (from a supervisor, a shell, a pipe; a notification fd among
//! them) must not reach the programs it starts, judged programs least of
//! all.

// The raw calls live in `ojrunner-unix` (this crate forbids `unsafe`).
pub use ojrunner_unix::{keep_inherited_fds_private, only_stdio_across_exec};
