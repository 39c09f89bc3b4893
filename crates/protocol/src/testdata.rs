//! A problem's testdata as the protocol lays it out: flat `TTCC.in` /
//! `TTCC.out` files (task TT, case CC, from 0000) beside optional folders.
//! The runner checks an unpacked zip with these rules before judging, and
//! `hubd problem add` checks a problem with the very same ones.

use crate::{BadProblem, Task};
use std::path::{Path, PathBuf};

/// The path of case `c` of task `t`: `TTCC.in` or `TTCC.out`.
pub fn case_file(dir: &Path, t: usize, c: usize, ext: &str) -> PathBuf {
    dir.join(format!("{t:02}{c:02}.{ext}"))
}

/// Checks that `dir` has every `TTCC.in`/`TTCC.out` the tasks name, each a
/// regular file (a symbolic link is not one: a zip cannot carry it).
pub fn check_cases(dir: &Path, tasks: &[Task]) -> Result<(), BadProblem> {
    for (t, task) in tasks.iter().enumerate() {
        for c in 0..task.case_count.max(0) as usize {
            for ext in ["in", "out"] {
                let p = case_file(dir, t, c, ext);
                if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
                    let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
                    return Err(BadProblem(format!("testdata has no {name} (task {t} has {} cases)", task.case_count)));
                }
            }
        }
    }
    Ok(())
}
