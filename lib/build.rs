//! `OJ_SANDBOX_BUILD`: a hash of the sources a sandbox helper runs (this
//! library and the crates below it), so that a helper exec'd from another
//! binary (`judge-exec`, for a test harness's process) is known to be
//! this build's and not a stale one (`sandbox/helper.rs`).

use std::path::{Path, PathBuf};

const SOURCES: [&str; 5] =
    ["src", "Cargo.toml", "../crates/daemon/src", "../crates/unix/src", "../crates/protocol/src"];

fn main() {
    let mut files = Vec::new();
    for s in SOURCES {
        println!("cargo:rerun-if-changed={s}");
        collect(Path::new(s), &mut files);
    }
    files.sort();
    // FNV-1a over each file's path and contents: stable across builds and toolchains.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        for b in f.to_string_lossy().bytes().chain([0]).chain(bytes).chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=OJ_SANDBOX_BUILD={h:016x}");
}

fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    match std::fs::read_dir(p) {
        Ok(dir) => dir.flatten().for_each(|e| collect(&e.path(), out)),
        Err(_) => out.push(p.to_path_buf()),
    }
}
