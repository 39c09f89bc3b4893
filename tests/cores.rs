//! Each slot's runs on a core of their own (`sandbox::cores`, issue #24):
//! a run sees one CPU in its affinity, its slot's, a neighbouring slot
//! another, the auxiliary slot its worker's; and it cannot move.
//!
//! Pinning needs slot uids, so root: as another user the test says
//! "skipped".

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::sandbox::{self, cores, Spec};
use std::io::{Read, Seek};
use testkit::*;

/// What the run in `slot` says of its CPUs: its affinity, then what
/// widening it to every CPU did.
fn affinity_in(slot: usize, dir: &std::path::Path) -> String {
    let script = "import os\n\
                  print(sorted(os.sched_getaffinity(0)))\n\
                  try:\n    os.sched_setaffinity(0, range(os.cpu_count()))\n    print('moved')\n\
                  except PermissionError:\n    print('EPERM')\n";
    let mut out = tempfile_in(dir);
    let spec =
        Spec { stdout: out.try_clone().unwrap(), ..slot_spec(&["/usr/bin/python3", "-c", script], dir, slot, 64, 16) };
    let usage = sandbox::run(spec).expect("the run");
    assert_eq!(usage.exit, sandbox::Exit::Code(0), "{usage:?}");
    let mut text = String::new();
    out.rewind().unwrap();
    out.read_to_string(&mut text).unwrap();
    text
}

fn tempfile_in(dir: &std::path::Path) -> std::fs::File {
    let p = dir.join(format!("out-{}", std::process::id()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    f
}

#[test]
fn a_run_is_pinned_to_its_slots_core_and_cannot_leave_it() {
    if !is_root() {
        skip("slots (and so pinning) need root");
        return;
    }
    let dir = TempDir::new("cores");
    let cpus = cores::judge_cpus();
    // Slots 0 and 1 of this suite's range, and slot 0's auxiliary uid.
    for (slot, worker) in [(0, 0), (1, 1), (1000, 0)] {
        let said = affinity_in(slot, dir.path());
        let core = cpus[worker % cpus.len()];
        assert_eq!(said, format!("[{core}]\nEPERM\n"), "slot {slot}: pinned to core {core}, and stays");
    }
    // Off (as `make bench` measures against): the run has the judge's CPUs.
    cores::set_pinned(false);
    let said = affinity_in(0, dir.path());
    cores::set_pinned(true);
    assert!(said.starts_with(&format!("{cpus:?}\n")), "unpinned, every CPU of the judge's: {said}");
}
