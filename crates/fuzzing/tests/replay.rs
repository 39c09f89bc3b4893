//! Replays every input kept for the fuzz targets, `fuzz/corpus/<target>/`
//! and `fuzz/regressions/<target>/` (the crashers found, fixed since),
//! through the targets' own functions, without libFuzzer: `make test`
//! holds every fix to its crasher.

use ojrunner_fuzzing::TARGETS;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(d) => d.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

fn replay(kind: &str) -> usize {
    let mut n = 0;
    for (target, run) in TARGETS {
        for file in inputs(kind, target) {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            eprintln!("{target}: {}", file.display());
            run(&data);
            n += 1;
        }
    }
    n
}

#[test]
fn every_target_has_a_seeded_corpus_and_every_kept_input_a_target() {
    for (target, _) in TARGETS {
        assert!(!inputs("corpus", target).is_empty(), "fuzz/corpus/{target} is empty");
        assert!(fuzz_dir().join("fuzz_targets").join(format!("{target}.rs")).is_file(), "no fuzz target {target}");
    }
    for kind in ["corpus", "regressions"] {
        for entry in std::fs::read_dir(fuzz_dir().join(kind)).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(TARGETS.iter().any(|(t, _)| *t == name), "fuzz/{kind}/{name} names no target");
        }
    }
}

#[test]
fn the_corpora_replay_without_a_crash() {
    assert!(replay("corpus") > 0);
}

#[test]
fn every_crasher_found_replays_without_a_crash() {
    replay("regressions");
}
