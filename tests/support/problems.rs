//! Problems, testdata and submissions made for a test: one-case problems,
//! a testdata directory as claimd unpacks one, a slow A+B, and the stream of
//! example submissions (with the verdict each must get) that the chaos and
//! lossy network suites feed a hub.

use super::hub::Hub;
use super::layout::examples;
use super::scratch::write_file;
use std::path::{Path, PathBuf};

/// A+B in Python that sleeps `secs` before answering: AC, slowly.
pub fn slow_ab(dir: &Path, secs: f64) -> PathBuf {
    write_file(
        dir,
        &format!("slow{secs}.py"),
        &format!("import sys, time\na, b = map(int, sys.stdin.read().split())\ntime.sleep({secs})\nprint(a + b)\n"),
    )
}

/// A problem directory `dir/name` of one task of one case: `input` and its
/// `answer`, under a time limit of `time_limit_ms`.
pub fn one_case_problem(dir: &Path, name: &str, time_limit_ms: u64, input: &str, answer: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(&p).unwrap();
    let meta = serde_json::json!({"tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": time_limit_ms, "caseCount": 1}]});
    write_file(&p, "meta.json", &meta.to_string());
    write_file(&p, "0000.in", input);
    write_file(&p, "0000.out", answer);
    p
}

/// One submission of a stream and what it must get: problem, language,
/// source, verdict, score.
pub type Dish = (i64, &'static str, PathBuf, &'static str, i64);

/// Example problems 1 and 2 added to `hub`, and a stream's menu of their
/// submissions with the verdict each must get; one of them, `slow.py` in
/// `dir`, sleeps `slow_secs` (a job held that long).
pub fn stream_menu(hub: &Hub, dir: &Path, slow_secs: f64) -> Vec<Dish> {
    hub.add_problem(1, &examples().join("problems/1"));
    hub.add_problem(2, &examples().join("problems/2"));
    let slow = write_file(
        dir,
        "slow.py",
        &format!(
            "import sys, time\na, b = map(int, sys.stdin.read().split())\ntime.sleep({slow_secs})\nprint(a + b)\n"
        ),
    );
    let ex = |f: &str| examples().join("submissions").join(f);
    vec![
        (1, "c11", ex("ab_ok.c"), "AC", 100),
        (1, "python3", ex("ab_ok.py"), "AC", 100),
        (1, "python3", slow, "AC", 100),
        (1, "c11", ex("ab_wa.c"), "WA", 0),
        (1, "c11", ex("ab_re_exit.c"), "RE", 0),
        (1, "c11", ex("ab_ce.c"), "CE", 0),
        (2, "c11", ex("sum_int32.c"), "WA", 40),
        (2, "python3", ex("sum_ok.py"), "AC", 100),
    ]
}

/// A testdata directory as claimd unpacks one (root's, mode 0700) under
/// `work`: cases `00CC.in` with `00CC.out`, and `extra` files (a relative
/// name, its bytes).
pub fn testdata_dir(work: &Path, cases: &[(&str, &str)], extra: &[(&str, Vec<u8>)]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = work.join("testdata");
    std::fs::create_dir(&dir).unwrap();
    for (c, (input, answer)) in cases.iter().enumerate() {
        std::fs::write(dir.join(format!("00{c:02}.in")), input).unwrap();
        std::fs::write(dir.join(format!("00{c:02}.out")), answer).unwrap();
    }
    for (name, bytes) in extra {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}
