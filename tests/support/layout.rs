//! Where things are: the workspace's built binaries (which the suites run,
//! never build), the repository, its example problems, and the suite (test
//! binary) this process is.

use std::path::PathBuf;

/// The directory holding the workspace's built binaries (`target/debug`).
/// `make test` builds them first; the suite never builds on its own.
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("OJ_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // A test runs from target/debug/deps/, the demo from target/debug/.
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    assert!(dir.join("hubd").exists(), "{} has no hubd: build the workspace first (make test does)", dir.display());
    dir
}

/// The path of one built binary.
pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// The repository's top directory.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The example problems and submissions shipped in `examples/`.
pub fn examples() -> PathBuf {
    repo().join("examples")
}

/// The suite this process runs: its test binary's name without cargo's
/// hash (`restarts` for `target/debug/deps/restarts-0123abcd`).
pub fn suite() -> String {
    let exe = std::env::current_exe().ok();
    let name = exe.as_ref().and_then(|e| e.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.rsplit_once('-').map_or(name.clone(), |(suite, _)| suite.to_string())
}
