//! The fuzz targets' bodies: one function per target of `fuzz/`, each
//! feeding any bytes to the parsers of outside input, through the very
//! functions the runner and the hub call.
//!
//! They live here, in the workspace, and not in `fuzz/` (cargo-fuzz's
//! crate, outside the workspace) so that `cargo test` replays every file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` through them
//! without libFuzzer (`tests/replay.rs`); a `fuzz/fuzz_targets/<target>.rs`
//! is one line that calls its function. [`TARGETS`] names them all.
//!
//! A target panics only where the code under test is wrong: a panic inside
//! it, or a property it breaks (say, a checker that finds an output wrong
//! against itself). A refusal is an answer, not a crash.
//!
//! Inputs that carry several values split them at NUL bytes ([`fields`]):
//! none of the values is text that holds a NUL.

use ojrunner::answer::{Answer, HttpReply, HubCall};
use ojrunner::checker::{self, Checker, Named};
use ojrunner::outcome::{self, OutcomeKind};
use ojrunner::protocol::{archive, icpc, testdata, AbortReason, Job, Task};
use ojrunner::spool::{ClaimState, Spool};
use ojrunner_daemon::duration;
use ojrunner_hub::{problem, result, server, submission};
use std::io::BufReader;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// A target's function: any bytes in; a panic is a crash.
pub type Target = fn(&[u8]);

/// Every target: its name (that of `fuzz/fuzz_targets/<name>.rs` and of
/// its corpus) and its function.
pub const TARGETS: &[(&str, Target)] = &[
    ("hub_register", hub_register),
    ("hub_next_job", hub_next_job),
    ("hub_answer", hub_answer),
    ("testdata_zip", testdata_zip),
    ("checker", checker),
    ("duration", duration),
    ("hubd_request", hubd_request),
    ("problem_add", problem_add),
    ("icpc_package", icpc_package),
    ("spool_rows", spool_rows),
];

/// `data` split at NUL bytes into at least `n` fields (the missing ones
/// empty; the last takes the rest, NULs and all).
pub fn fields(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out: Vec<&[u8]> = data.splitn(n, |&b| b == 0).collect();
    out.resize(n, &[]);
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A reply as the runner's client makes it: a body that is not UTF-8 fails
/// `read_to_string`, and is no answer.
fn reply(code: u16, body: &[u8]) -> HttpReply {
    match std::str::from_utf8(body) {
        Ok(body) => HttpReply::Status(code, body.to_string()),
        Err(e) => HttpReply::Unreachable(format!("HTTP {code}, then reading the body: {e}")),
    }
}

/// A fresh scratch directory of this process (on tmpfs where there is
/// one: the targets that write files would wait on the disk otherwise).
fn scratch() -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let dir = base.join(format!("ojrunner-fuzz-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// Writes up to `most` files into `dir` from `fields` taken two by two (a
/// path, its bytes); a path that would leave `dir` is skipped: the target
/// writes these files itself.
fn write_inside(dir: &Path, fields: &[&[u8]], most: usize) {
    for pair in fields.chunks(2).take(most) {
        let name = text(pair[0]);
        let rel = Path::new(&name);
        if name.is_empty() || name.len() > 100 || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::write(&path, pair.get(1).copied().unwrap_or_default());
    }
}

// ---- the hub's answers, as the runner reads them ---------------------------------

/// A `register` answer's body (201): the registration the runner keeps.
pub fn hub_register(data: &[u8]) {
    let answer = Answer::of(HubCall::Register, reply(201, data));
    let _ = (outcome::classify(HubCall::Register, &answer), answer.describe());
    if let Answer::Done { body, .. } = &answer {
        if let Ok(reg) = ojrunner::hub::parse_registration(body) {
            // What the spool stores is read back as it was.
            let stored = serde_json::to_string(&reg.config).expect("a config serialises");
            assert_eq!(serde_json::from_str::<ojrunner::protocol::RunnerConfig>(&stored).ok(), Some(reg.config));
        }
    }
}

/// A `next-job` answer's body (200): the job, or at least its id, and the
/// checker it names.
pub fn hub_next_job(data: &[u8]) {
    let answer = Answer::of(HubCall::NextJob, reply(200, data));
    let _ = (outcome::classify(HubCall::NextJob, &answer), answer.describe());
    let (Answer::Done { body, .. } | Answer::Garbled { body, .. }) = &answer else { return };
    let id = Job::id_of(body);
    if let Ok(job) = Job::parse(body) {
        assert_eq!(id.as_deref(), Some(job.job_id.as_str()), "a job's id is found alone too");
        let _ = job.case_count();
        let _ = checker::parse(job.checker.as_deref());
        // The spool stores the payload as sent and parses it again; the
        // hub's `complete` check reads the tasks the same way.
        let again = serde_json::to_string(&job).expect("a job serialises");
        assert_eq!(Job::parse(&again).ok().as_ref(), Some(&job));
    }
}

/// Any call's answer, any status and body: what it means and what becomes
/// of an outcome it answers (heartbeat, complete, abort, events, the
/// testdata channel's meta and checksum). `data`: the call, two bytes of
/// status, the body.
pub fn hub_answer(data: &[u8]) {
    const CALLS: [HubCall; 9] = HubCall::ALL;
    let [c, hi, lo, body @ ..] = data else { return };
    let call = CALLS[*c as usize % CALLS.len()];
    let code = 100 + u16::from_be_bytes([*hi, *lo]) % 500;
    let answer = Answer::of(call, reply(code, body));
    let meaning = outcome::classify(call, &answer);
    let _ = answer.describe();
    for kind in [OutcomeKind::Complete, OutcomeKind::Abort(AbortReason::Drain)] {
        let _ = outcome::delivery(kind, &answer);
        assert_eq!(OutcomeKind::from_row(&kind.row()), Some(kind));
    }
    let _ = OutcomeKind::from_row(&text(body));
    if let Answer::Done { body, .. } = &answer {
        assert_eq!(meaning, outcome::Meaning::Settled);
        if call == HubCall::Testdata {
            // /problem/{pid}/meta and /checksum: JSON, maybe wrapped.
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
                let _ = ojrunner::protocol::unwrap_envelope(v);
            }
        }
    }
}

// ---- testdata zips -----------------------------------------------------------------

/// A zip unpacked as testdata or as a submission's code (by the first
/// byte), then checked for the cases of a task of 1 to 4 cases: whatever it
/// holds, nothing lands outside the destination, and what is listed is
/// there, a regular file.
pub fn testdata_zip(data: &[u8]) {
    let Some((&sel, zip)) = data.split_first() else { return };
    let bounds = if sel & 1 == 0 { archive::TESTDATA } else { archive::CODE };
    let dir = scratch();
    let file = dir.join("data.zip");
    let dest = dir.join("out").join("testdata");
    std::fs::write(&file, zip).expect("writing the zip");
    if let Ok(files) = archive::extract(&file, &dest, bounds) {
        assert!(files.len() <= bounds.max_files);
        for f in &files {
            assert!(f.components().all(|c| matches!(c, Component::Normal(_))), "{f:?} stays inside");
            let meta = std::fs::symlink_metadata(dest.join(f)).expect("a listed file is there");
            assert!(meta.is_file(), "{f:?} is a regular file");
        }
        let task =
            Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: i64::from(sel >> 1) % 4 + 1 };
        let _ = testdata::check_cases(&dest, &[task]);
    }
    // Nothing was written beside the destination.
    let beside: Vec<_> =
        std::fs::read_dir(dir.join("out")).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(beside.iter().all(|n| n == "testdata"), "written beside the destination: {beside:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- checkers ------------------------------------------------------------------------

/// A checker name, an output and an answer (three fields): the named
/// checker and every built-in one compare them through large and through
/// tiny buffers alike, and agree with each other: `exact` AC implies
/// `diff` AC implies `token` AC implies `float` AC, and an output is
/// always AC against itself. Each built-in one's streaming comparison,
/// fed the output in chunks of every size, never says no to an accepted
/// output, nor before the byte that makes it wrong (the output up to
/// where it said no is wrong too, checked whole).
pub fn checker(data: &[u8]) {
    let [name, out, ans] = fields(data, 3)[..] else { unreachable!() };
    let check = |c: &Checker, out: &[u8], ans: &[u8]| {
        let whole = c.check(out, ans).expect("a checker of bytes in memory");
        for cap in [1, 2, 3, 7] {
            let tiny = c.check(BufReader::with_capacity(cap, out), BufReader::with_capacity(cap, ans));
            assert_eq!(tiny.expect("a checker of bytes in memory"), whole, "{c:?} through {cap}-byte buffers");
        }
        whole
    };
    if let Ok(Named::Builtin(c)) = checker::parse(Some(&text(name))) {
        check(&c, out, ans);
        assert!(check(&c, out, out), "{c:?}: an output is AC against itself");
    }
    let float = Checker::Float { abs: checker::FLOAT_EPS, rel: checker::FLOAT_EPS };
    let verdicts: Vec<bool> =
        [Checker::Exact, Checker::Diff, Checker::Token, float].iter().map(|c| check(c, out, ans)).collect();
    for w in verdicts.windows(2) {
        assert!(!w[0] || w[1], "exact => diff => token => float: {verdicts:?}");
    }
    let float = Checker::Float { abs: checker::FLOAT_EPS, rel: checker::FLOAT_EPS };
    for (c, whole) in [Checker::Exact, Checker::Diff, Checker::Token, float].iter().zip(verdicts) {
        for size in [1, 7, 4096] {
            assert_eq!(diverged(c, out, out, size), None, "{c:?}: a stream said no to the answer itself");
            if let Some(at) = diverged(c, out, ans, size) {
                assert!(!whole, "{c:?}: a stream said no at byte {at} to an accepted output");
                let fed = &out[..=at as usize];
                assert!(!c.check(fed, ans).expect("in memory"), "{c:?}: no at byte {at}, yet what was fed is accepted");
            }
        }
    }
}

/// Where `c`'s stream said no to `out` fed in chunks of `size` (the
/// answer read through as large a buffer), if it did.
fn diverged(c: &Checker, out: &[u8], ans: &[u8], size: usize) -> Option<u64> {
    let mut stream = checker::Stream::of(c, BufReader::with_capacity(size, ans)).expect("a built-in checker");
    for chunk in out.chunks(size) {
        if !stream.feed(chunk) {
            return stream.diverged().map(|d| d.byte);
        }
    }
    None
}

// ---- durations -------------------------------------------------------------------------

/// A duration as an operator writes it (a flag, an environment value).
pub fn duration(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(d) = duration::seconds("OJ_FUZZ", s) {
        let whole = duration::whole_seconds(d);
        assert!(whole >= 1 && whole >= d.as_secs());
        // Whole seconds read back as themselves (up to the 12 digits read).
        if whole < 1_000_000_000_000 {
            assert_eq!(duration::seconds("OJ_FUZZ", &whole.to_string()).map(|d| d.as_secs()), Ok(whole));
        }
    }
}

// ---- hubd ------------------------------------------------------------------------------

/// A request to hubd (method, path, query, body: four fields) as the
/// server reads it, and the body as a `complete` result against a few
/// problems' tasks.
pub fn hubd_request(data: &[u8]) {
    let [method, path, query, body] = fields(data, 4)[..] else { unreachable!() };
    let _ = server::read_request(&text(method), &text(path), &text(query), body);
    let Ok(body) = std::str::from_utf8(body) else { return };
    let task = |task_score, case_count| Task { task_score, memory_limit: 65536, time_limit: 1000, case_count };
    for tasks in [vec![task(100, 1)], vec![task(40, 2), task(60, 3)]] {
        if let Ok(scored) = result::judge(body, &tasks) {
            assert!((0..=100).contains(&scored.score));
        }
    }
}

/// `hubd problem add` of a directory: `meta.json` (the first field), then
/// the case files its tasks name (but those the second field's bytes
/// leave out), then more files (name and content, field by field). Also
/// `hubd submit --language` (the second field).
pub fn problem_add(data: &[u8]) {
    let f: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let (meta, skip) = (f[0], f.get(1).copied().unwrap_or_default());
    let _ = submission::LanguageTable::builtin().parse_language(&text(skip));
    let dir = scratch();
    let problem = dir.join("p");
    std::fs::create_dir(&problem).expect("the problem directory");
    std::fs::write(problem.join("meta.json"), meta).expect("meta.json");
    // The cases the meta names, read loosely here (the hub reads it strictly).
    let tasks = serde_json::from_slice::<serde_json::Value>(meta).ok();
    let tasks = tasks.as_ref().and_then(|m| m.get("tasks")).and_then(|t| t.as_array()).cloned().unwrap_or_default();
    let mut n = 0;
    for (t, task) in tasks.iter().take(8).enumerate() {
        let count = task.get("caseCount").and_then(|c| c.as_i64()).unwrap_or(0).clamp(0, 8) as usize;
        for c in 0..count {
            for ext in ["in", "out"] {
                if !skip.contains(&(n as u8)) {
                    let _ = std::fs::write(testdata::case_file(&problem, t, c, ext), format!("{t} {c}\n"));
                }
                n += 1;
            }
        }
    }
    write_inside(&problem, f.get(2..).unwrap_or_default(), 8);
    if let Ok(p) = problem::load_dir(1, &problem) {
        assert_eq!(problem::md5_hex(&[p.testdata.as_slice(), p.meta.as_bytes()].concat()), p.checksum);
        assert_eq!(problem::tasks_of(&p.meta), p.tasks, "the stored meta reads back as the tasks");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An ICPC problem package as `hubd problem add` and `judge-exec run` read
/// it: `problem.yaml`, then (NUL-separated) `.timelimit`, then pairs of a
/// path inside the package and its bytes (`data/secret/1.in`,
/// `output_validators/v/v.cpp`, a `testdata.yaml`…). A package read is a
/// protocol problem: its tasks pass the protocol's check, every file it
/// names is the package's own, and it lays out.
pub fn icpc_package(data: &[u8]) {
    let f: Vec<&[u8]> = data.split(|&b| b == 0).collect();
    let dir = scratch();
    let package = dir.join("p");
    std::fs::create_dir(&package).expect("the package directory");
    std::fs::write(package.join("problem.yaml"), f[0]).expect("problem.yaml");
    if let Some(limit) = f.get(1).filter(|l| !l.is_empty()) {
        std::fs::write(package.join(".timelimit"), limit).expect(".timelimit");
    }
    write_inside(&package, f.get(2..).unwrap_or_default(), 12);
    if let Ok(p) = icpc::read(&package, None) {
        assert!(ojrunner::protocol::check_tasks(&p.tasks).is_ok(), "a package read is a protocol problem: {p:?}");
        let cases: i64 = p.tasks.iter().map(|t| t.case_count).sum();
        assert!(p.files.len() as i64 >= 2 * cases, "every case has its input and answer: {p:?}");
        for (_, from) in &p.files {
            assert!(from.starts_with(&package), "a file of the package's own: {}", from.display());
        }
        p.lay_out(&dir.join("laid")).expect("a package read lays out");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the spool ---------------------------------------------------------------------------

/// One value as a row may hold it: SQLite keeps any type in any column.
fn value(b: &[u8]) -> rusqlite::types::Value {
    use rusqlite::types::Value;
    match b.split_first() {
        Some((b'i', rest)) => Value::Integer(text(rest).trim().parse().unwrap_or(i64::from(rest.len() as u32))),
        Some((b'n', _)) => Value::Null,
        Some((b'b', rest)) => Value::Blob(rest.to_vec()),
        Some((b'f', rest)) => Value::Real(text(rest).trim().parse().unwrap_or(0.5)),
        Some((_, rest)) => Value::Text(text(rest)),
        None => Value::Text(String::new()),
    }
}

/// Stored rows as a spool may hold them after a crash, a bad disk or
/// another program's hand: every field of a claim, its case results, its
/// outcome, its events, the identity and a counter, each of any type
/// (the first byte of a field: `i` integer, `n` null, `b` blob, `f` real,
/// anything else text), read back by every reader of the spool.
pub fn spool_rows(data: &[u8]) {
    static SPOOL: OnceLock<Mutex<(Spool, rusqlite::Connection)>> = OnceLock::new();
    let spool = SPOOL.get_or_init(|| {
        let dir = scratch();
        let spool = Spool::create(&dir).expect("a spool");
        let raw = rusqlite::Connection::open(dir.join("spool.db")).expect("the spool's database");
        raw.busy_timeout(std::time::Duration::from_secs(10)).expect("busy_timeout");
        Mutex::new((spool, raw))
    });
    let mut guard = spool.lock().unwrap_or_else(|e| e.into_inner());
    let (spool, raw) = &mut *guard;
    let v: Vec<_> = fields(data, 16).into_iter().map(value).collect();
    raw.execute_batch(
        "DELETE FROM events; DELETE FROM outbox; DELETE FROM case_results; DELETE FROM phases;
         DELETE FROM dead_outcomes; DELETE FROM claims; DELETE FROM identity; DELETE FROM counters;
         DELETE FROM control;",
    )
    .expect("emptying the spool");
    // Each row goes in alone: one that SQLite refuses (a NOT NULL column)
    // leaves the others.
    let put = |sql: &str, p: &[&rusqlite::types::Value]| {
        let _ = raw.execute(sql, rusqlite::params_from_iter(p));
    };
    put(
        "INSERT INTO identity (id, runner_id, token, config, registered_at) VALUES (1, ?, ?, ?, 0)",
        &[&v[0], &v[1], &v[2]],
    );
    put(
        "INSERT INTO claims (claim_id, job_id, runner_id, state, payload, claimed_at, updated_at, testdata, note)
         VALUES (1, ?, ?, ?, ?, ?, 0, ?, ?)",
        &[&v[3], &v[0], &v[4], &v[5], &v[6], &v[7], &v[8]],
    );
    put("INSERT INTO case_results (claim_id, task, case_no, result) VALUES (1, ?, ?, ?)", &[&v[9], &v[10], &v[11]]);
    put(
        "INSERT INTO outbox (claim_id, kind, body, created_at, next_try_at) VALUES (1, ?, ?, ?, 0)",
        &[&v[12], &v[13], &v[6]],
    );
    put("INSERT INTO events (claim_id, body) VALUES (1, ?)", &[&v[14]]);
    put("INSERT INTO counters (name, labels, value) VALUES (?, '', ?)", &[&v[15], &v[10]]);
    put("INSERT INTO control (key, value) VALUES ('draining', ?)", &[&v[15]]);
    put(
        "INSERT INTO control (key, value) VALUES (?, ?)",
        &[&rusqlite::types::Value::Text(ojrunner::lease::LAST_BEAT_AT.into()), &v[1]],
    );

    let _ = spool.identity();
    let _ = spool.claims_in(&ClaimState::ALL);
    let _ = spool.claim(1);
    let _ = spool.held_jobs();
    let _ = spool.held_count();
    let _ = spool.counts();
    let _ = spool.case_results(1);
    let _ = spool.outbox_due(i64::MAX);
    let _ = spool.outbox_len();
    let _ = spool.outbox_oldest();
    let _ = spool.event_claims();
    let _ = spool.events(1, 100);
    let _ = spool.counters();
    let _ = spool.dead_count();
    let _ = spool.draining();
    let _ = spool.last_beat();
}
