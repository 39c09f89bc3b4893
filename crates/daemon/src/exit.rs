//! Exit codes with fixed meanings, shared by every program (listed in each
//! man page's EXIT STATUS), so a supervisor reads them the same way
//! whichever program ended.

/// Clean exit (a drain completed, or a command succeeded).
pub const OK: i32 = 0;
/// Failure: the hub refused the runner's identity, or a drain had to be cut.
pub const FAILURE: i32 = 1;
/// Usage error (bad flags).
pub const USAGE: i32 = 2;
/// Bad configuration: do not restart until it is fixed.
pub const CONFIG: i32 = 100;
/// Temporary failure (spool unavailable, …): restarting may help.
pub const TEMPORARY: i32 = 111;
