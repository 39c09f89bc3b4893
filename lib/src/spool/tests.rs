use super::*;
use crate::counter::Counter;
use crate::outcome::OutcomeKind;
use crate::phase::{Phase, Timing};
use crate::protocol::Verdict;
use crate::protocol::{AbortReason, CaseResult, Outcome};
use rusqlite::{params, Connection};
use std::path::Path;
use std::time::Duration;

/// A test's directory, removed when the test ends.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(tag: &str) -> Scratch {
    let p = std::env::temp_dir().join(format!("ojspool-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    Scratch(p)
}

/// A new spool in a directory of its own.
fn fresh(tag: &str) -> (Scratch, Spool) {
    let d = tmp(tag);
    let s = Spool::create(&d).unwrap();
    (d, s)
}

/// A new claim of `job`.
fn claimed(s: &mut Spool, job: &str) -> i64 {
    s.insert_claim("rn_1", job, PAYLOAD).unwrap().0
}

/// A claim of `job`, prepped and started.
fn started(s: &mut Spool, job: &str) -> i64 {
    let id = claimed(s, job);
    assert!(s.mark_prepped(id, Path::new("/td"), &[]).unwrap() && s.start(id).unwrap());
    id
}

const PAYLOAD: &str = r#"{"job_id":"jb_1","submission_id":"s","problem_id":1,"language":0,"code_url":"http://x/c.zip",
    "tasks":[{"taskScore":100,"memoryLimit":65536,"timeLimit":1000,"caseCount":1}]}"#;

fn ok() -> CaseResult {
    CaseResult {
        status: Verdict::AC,
        exec_time: 1,
        memory_usage: 1,
        exit_code: 0,
        stdout: String::new(),
        stderr: String::new(),
    }
}

#[test]
fn a_claim_walks_its_states_and_its_outcome_is_written_once() {
    let (_d, mut s) = fresh("walk");
    let (id, old) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
    assert!(old.is_empty());
    assert_eq!(s.held_count().unwrap(), 1);
    assert!(!s.start(id).unwrap(), "a claim not prepped does not start");
    assert!(s.mark_prepped(id, Path::new("/td"), &[]).unwrap());
    assert!(s.start(id).unwrap());
    assert!(!s.start(id).unwrap(), "started once");
    assert!(s.record_case(id, 0, 0, &ok(), "{}", &[]).unwrap());
    let outcome = Outcome { tasks: vec![vec![ok()]] };
    assert!(s.mark_judged(id, &outcome).unwrap());
    assert!(!s.mark_judged(id, &outcome).unwrap(), "finished once");
    let due = s.outbox_due(now_ms()).unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].kind, OutcomeKind::Complete);
    s.outbox_settle(id, "204").unwrap();
    assert_eq!(s.claim(id).unwrap().unwrap().state, ClaimState::Reported);
    assert_eq!(s.outbox_len().unwrap().0, 0);
    assert_eq!(s.held_count().unwrap(), 0);
}

#[test]
fn a_claim_row_carries_its_job_parsed_or_why_it_cannot_be() {
    let (_d, mut s) = fresh("parsed");
    let good = claimed(&mut s, "jb_1");
    let (bad, _) = s.insert_claim("rn_1", "jb_2", r#"{"job_id":"jb_2","tasks":[]}"#).unwrap();
    let row = s.claim(good).unwrap().unwrap();
    let job = row.job.as_ref().expect("the payload parses");
    assert_eq!((job.job_id.as_str(), job.problem_id, job.tasks.len()), ("jb_1", 1, 1));
    // Kept as the hub sent it, refused as a job: prep ends it as prep_failed.
    assert!(s.claim(bad).unwrap().unwrap().job.is_err());
}

#[test]
fn the_latch_stops_starts_and_the_scan_aborts_unstarted_claims_as_drain() {
    let (_d, mut s) = fresh("latch");
    let a = claimed(&mut s, "jb_a");
    let b = claimed(&mut s, "jb_b");
    let c = claimed(&mut s, "jb_c");
    s.mark_prepped(b, Path::new("/td"), &[]).unwrap();
    s.mark_prepped(c, Path::new("/td"), &[]).unwrap();
    assert!(s.start(c).unwrap());
    s.set_draining(true).unwrap();
    assert!(!s.start(b).unwrap(), "nothing starts once the latch is set");
    assert_eq!(s.abort_unstarted().unwrap(), vec![a, b]);
    assert!(!s.mark_prepped(a, Path::new("/td"), &[]).unwrap(), "a prep finishing late changes nothing");
    let kinds: Vec<_> = s.outbox_due(now_ms()).unwrap().into_iter().map(|o| (o.claim_id, o.kind)).collect();
    assert_eq!(kinds, vec![(a, OutcomeKind::Abort(AbortReason::Drain)), (b, OutcomeKind::Abort(AbortReason::Drain))]);
    assert_eq!(s.claim(c).unwrap().unwrap().state, ClaimState::Started, "in flight goes on");
}

#[test]
fn a_job_claimed_again_supersedes_the_old_claim_and_its_late_work() {
    let (_d, mut s) = fresh("gen");
    let g1 = started(&mut s, "jb_1");
    let (g2, old) = s.insert_claim("rn_1", "jb_1", PAYLOAD).unwrap();
    assert_eq!(old, vec![g1]);
    assert_ne!(s.claim_dir(g1), s.claim_dir(g2));
    assert!(!s.record_case(g1, 0, 0, &ok(), "{}", &[]).unwrap(), "the old claim's late case is dropped");
    assert!(!s.mark_judged(g1, &Outcome { tasks: vec![vec![ok()]] }).unwrap(), "and its late outcome");
    assert_eq!(s.held_jobs().unwrap(), vec!["jb_1".to_string()], "the job is held once");
    assert_eq!(s.held_count().unwrap(), 1, "capacity counts claims");
    assert!(s.outbox_due(now_ms()).unwrap().is_empty());
}

#[test]
fn events_are_bounded_per_claim_and_count_what_was_lost() {
    let (_d, mut s) = fresh("events");
    let id = claimed(&mut s, "jb_1");
    let other = claimed(&mut s, "jb_2");
    s.add_event(other, "{\"other\":true}").unwrap();
    let bodies: Vec<String> = (0..MAX_EVENTS_PER_CLAIM + 10).map(|i| format!("{{\"i\":{i}}}")).collect();
    s.add_events(id, &bodies.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
    let (rows, lost) = s.events(id, 200).unwrap();
    assert_eq!((rows.len(), lost), (200, 10), "a batch of 200; ten lost, the oldest");
    assert_eq!(rows[0].body, "{\"i\":10}");
    s.events_sent(id, rows[199].id).unwrap();
    let (rows, lost) = s.events(id, 200).unwrap();
    assert_eq!((rows[0].body.as_str(), lost), ("{\"i\":210}", 0), "the lost count went with the batch");
    assert_eq!(s.events(other, 200).unwrap().0.len(), 1, "another claim's events are untouched");
}

fn counter(s: &Spool, name: &str, labels: &str) -> i64 {
    s.counters().unwrap().into_iter().find(|(n, l, _)| n == name && l == labels).map_or(0, |r| r.2)
}

#[test]
fn a_claims_life_is_counted_and_timed_once_and_pruning_never_takes_a_count_back() {
    let (_d, mut s) = fresh("metrics");
    let id = claimed(&mut s, "jb_1");
    let prep = [Timing::new(Phase::Code, 1_200), Timing::labelled(Phase::Testdata, "miss", 30_000)];
    assert!(s.mark_prepped(id, Path::new("/td"), &prep).unwrap());
    assert!(s.start(id).unwrap());
    let case = [Timing::new(Phase::Compile, 400_000), Timing::case(0, 0, Duration::from_micros(700))];
    assert!(s.record_case(id, 0, 0, &ok(), "{}", &case).unwrap());
    // The same case and compile again (a judge restarted): timed and counted once.
    assert!(s.record_case(id, 0, 0, &ok(), "{}", &case).unwrap());
    assert!(s.mark_judged(id, &Outcome { tasks: vec![vec![ok()]] }).unwrap());
    s.outbox_settle(id, "204").unwrap();
    let a = claimed(&mut s, "jb_2");
    s.abort(a, AbortReason::PrepFailed, "bad").unwrap();
    let counts = |s: &Spool| {
        [
            counter(s, Counter::JobsClaimed.name(), ""),
            counter(s, Counter::JobsJudged.name(), ""),
            counter(s, Counter::JobsReported.name(), "outcome=\"complete\""),
            counter(s, Counter::JobsAborted.name(), "reason=\"prep_failed\""),
            counter(s, Counter::CaseVerdicts.name(), "verdict=\"AC\""),
            counter(s, Counter::PhaseBucket.name(), "phase=\"case\",le=\"0.001\""),
            counter(s, Counter::PhaseSumMicros.name(), "phase=\"compile\""),
        ]
    };
    assert_eq!(counts(&s), [2, 1, 1, 1, 1, 1, 400_000]);
    let phases: Vec<&str> = Phase::ALL
        .into_iter()
        .filter(|p| {
            let labels: &[&str] = p.label().map(|l| l.1).unwrap_or(&[""]);
            labels.iter().any(|l| !s.recent_timings(*p, l, 10).unwrap().is_empty())
        })
        .map(Phase::as_str)
        .collect();
    assert_eq!(phases, ["code", "testdata", "queued", "compile", "case", "judge", "report", "total"]);
    assert_eq!(s.recent_timings(Phase::Testdata, "miss", 10).unwrap(), [30_000]);
    assert_eq!(s.recent_timings(Phase::Case, "", 10).unwrap(), [700]);
    // Forgetting the claims forgets their timings, not the counts.
    s.prune_ended(now_ms() + 1).unwrap();
    assert!(s.recent_timings(Phase::Case, "", 10).unwrap().is_empty());
    assert_eq!(counts(&s), [2, 1, 1, 1, 1, 1, 400_000], "counters survive pruning");
    let text = crate::metrics::render(&s).unwrap();
    assert!(text.contains("ojrunner_jobs_claimed_total 2\n"), "{text}");
    assert!(text.contains("ojrunner_phase_seconds_count{phase=\"case\"} 1\n"), "{text}");
}

#[test]
fn a_rejected_result_is_counted_as_an_abort_once() {
    let (_d, mut s) = fresh("rejected");
    let id = started(&mut s, "jb_1");
    s.mark_judged(id, &Outcome { tasks: vec![vec![ok()]] }).unwrap();
    s.outbox_reject(id, "complete rejected: HTTP 400").unwrap();
    s.outbox_reject(id, "complete rejected: HTTP 400").unwrap();
    assert_eq!(counter(&s, Counter::JobsAborted.name(), "reason=\"rejected\""), 1);
    s.outbox_settle(id, "202").unwrap();
    assert_eq!(counter(&s, Counter::JobsReported.name(), "outcome=\"abort\""), 1);
    assert_eq!(s.recent_timings(Phase::Total, "abort", 10).unwrap().len(), 1);
}

#[test]
fn a_spool_of_schema_1_is_migrated_keeping_its_claims_and_read_as_it_is_before() {
    let (d, mut s) = fresh("v1");
    let id = claimed(&mut s, "jb_1");
    drop(s);
    // What a runner of schema 1 left.
    let c = Connection::open(d.join(DB_FILE)).unwrap();
    c.execute_batch("DROP TABLE phases; DROP TABLE counters; PRAGMA user_version = 1;").unwrap();
    drop(c);
    let old = Spool::open_read_only(&d).unwrap();
    assert!(old.counters().unwrap().is_empty(), "read as it is, the tables it lacks empty");
    assert!(old.recent_timings(Phase::Case, "", 10).unwrap().is_empty());
    assert!(crate::metrics::render(&old).unwrap().contains("ojrunner_claims{state=\"claimed\"} 1\n"));
    drop(old);
    let mut s = Spool::create(&d).unwrap();
    let v: i64 = s.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    assert_eq!(s.claim(id).unwrap().unwrap().state, ClaimState::Claimed, "its claims kept");
    assert!(s.mark_prepped(id, Path::new("/td"), &[Timing::new(Phase::Code, 5)]).unwrap());
    assert_eq!(s.recent_timings(Phase::Code, "", 10).unwrap(), [5]);
}

#[test]
fn only_create_makes_a_spool_and_a_spool_deleted_or_replaced_is_gone() {
    let d = tmp("gone");
    let e = Spool::open(&d).err().expect("no spool");
    assert!(matches!(e, SpoolError::Unusable(_)) && e.retry() == Retry::Stop && e.message().contains("no database"));
    assert!(!d.join(DB_FILE).exists(), "open made nothing");
    let mut s = Spool::create(&d).unwrap();
    let again = Spool::open_as(&d, s.file_id()).unwrap();
    assert_eq!(s.gone(), None);
    s.set_control("k", Some("v")).unwrap();
    for f in ["spool.db", "spool.db-wal", "spool.db-shm"] {
        let _ = std::fs::remove_file(d.join(f));
    }
    assert!(s.gone().unwrap().contains("was deleted"), "{:?}", s.gone());
    let e = s.set_control("k", None).unwrap_err();
    assert!(e.is_gone() && e.retry() == Retry::Stop && e.message().contains("was deleted"), "a write refused: {e:?}");
    assert!(Spool::open(&d).is_err() && !d.join(DB_FILE).exists(), "never made again by open");
    drop(Spool::create(&d).unwrap());
    assert!(again.gone().unwrap().contains("was replaced"), "{:?}", again.gone());
    let e = Spool::open_as(&d, s.file_id()).err().expect("another file");
    assert!(e.is_gone() && e.message().contains("replaced"), "{e:?}");
    std::fs::write(d.join(DB_FILE), b"").unwrap();
    let e = Spool::open(&d).err().expect("empty");
    assert!(matches!(e, SpoolError::Unusable(_)) && e.message().contains("holds no spool"), "{e:?}");
}

#[test]
fn a_newer_schema_is_refused() {
    let d = tmp("schema");
    drop(Spool::create(&d).unwrap());
    let c = Connection::open(d.join(DB_FILE)).unwrap();
    c.pragma_update(None, "user_version", 99).unwrap();
    drop(c);
    let e = Spool::create(&d).err().expect("refused");
    assert!(matches!(e, SpoolError::Unusable(_)) && e.retry() == Retry::Stop && e.message().contains("newer"), "{e}");
}

/// Puts claim `id` in `state` by hand, as a test only may.
fn put(s: &Spool, id: i64, state: ClaimState) {
    s.conn.execute("UPDATE claims SET state = ? WHERE claim_id = ?", params![state.as_str(), id]).unwrap();
}

fn state_of(s: &Spool, id: i64) -> ClaimState {
    s.claim(id).unwrap().unwrap().state
}

/// Tries `op` on a claim put in each state in turn: it must move the claim
/// exactly as `t`'s row of the table says, and report whether it did.
fn try_from_every_state(s: &mut Spool, t: Transition, op: &dyn Fn(&mut Spool, i64) -> bool) {
    for from in ClaimState::ALL {
        let (id, _) = s.insert_claim("rn_1", &format!("jb_{t:?}_{from:?}"), PAYLOAD).unwrap();
        put(s, id, from);
        let allowed = t.from().contains(&from);
        assert_eq!(op(s, id), allowed, "{t:?} from {from:?}");
        assert_eq!(state_of(s, id), if allowed { t.to() } else { from }, "{t:?} from {from:?}");
    }
}

/// Whether `f` moved claim `id`.
fn moves(s: &mut Spool, id: i64, f: impl FnOnce(&mut Spool)) -> bool {
    let before = state_of(s, id);
    f(s);
    state_of(s, id) != before
}

#[test]
fn every_move_leaves_exactly_its_from_states_for_its_to_state_and_nothing_else() {
    let (_d, mut s) = fresh("moves");
    let id = claimed(&mut s, "jb_1");
    assert_eq!(state_of(&s, id), ClaimState::Claimed, "a claim is born claimed");
    for t in Transition::ALL {
        try_from_every_state(&mut s, t, &|s, id| {
            s.write("try a move", |tx| claims::move_in(tx, id, t, now_ms(), Some("tried"))).unwrap().is_some()
        });
    }
}

/// What each of the spool's operations does to a claim in each state: the
/// moves the code makes are the table's, each where the table has it.
#[test]
fn the_operations_move_claims_only_as_the_table_says() {
    let (_d, mut s) = fresh("ops");
    type Op = fn(&mut Spool, i64) -> bool;
    let ops: [(Transition, Op); 7] = [
        (Transition::Prep, |s, id| s.mark_prepped(id, Path::new("/td"), &[]).unwrap()),
        (Transition::Start, |s, id| s.start(id).unwrap()),
        (Transition::Judge, |s, id| s.mark_judged(id, &Outcome { tasks: vec![vec![ok()]] }).unwrap()),
        (Transition::Abort, |s, id| s.abort(id, AbortReason::PrepFailed, "bad").unwrap()),
        (Transition::Reject, |s, id| moves(s, id, |s| s.outbox_reject(id, "complete rejected").unwrap())),
        (Transition::Report, |s, id| moves(s, id, |s| s.outbox_settle(id, "delivered").unwrap())),
        (Transition::Discard, |s, id| moves(s, id, |s| s.outbox_bury(id, "gone").unwrap())),
    ];
    assert_eq!(ops.map(|o| o.0), Transition::ALL, "an operation for every move");
    for (t, op) in ops {
        try_from_every_state(&mut s, t, &op);
    }
}

#[test]
fn a_busy_spool_is_tried_later_and_a_corrupt_row_is_left_aside() {
    let (d, mut s) = fresh("policy");
    let id = claimed(&mut s, "jb_1");
    let other = Connection::open(d.join(DB_FILE)).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    s.conn.busy_timeout(Duration::from_millis(20)).unwrap();
    let e = s.set_control("k", Some("v")).unwrap_err();
    assert!(matches!(e, SpoolError::Busy(_)) && e.retry() == Retry::Later, "{e:?}");
    other.execute_batch("ROLLBACK").unwrap();
    s.set_control("k", Some("v")).expect("the lock freed, it goes");
    other.execute("UPDATE claims SET state = 'lost' WHERE claim_id = ?", [id]).unwrap();
    let e = s.claim(id).unwrap_err();
    assert!(matches!(e, SpoolError::Corrupt(_)) && e.retry() == Retry::Skip, "{e:?}");
    other.execute("UPDATE claims SET state = 7 WHERE claim_id = ?", [id]).unwrap();
    let e = s.claim(id).unwrap_err();
    assert!(matches!(e, SpoolError::Corrupt(_)), "a field of another type: {e:?}");
}

// See: make test, tests/manners.rs (claimd and judge-exec started alone at
// once on a new spool: claimd exited with "journal_mode: database is locked").
#[test]
fn stages_started_at_once_on_a_new_spool_both_open_it() {
    for round in 0..40 {
        let dir = tmp(&format!("race{round}"));
        let d = dir.to_path_buf();
        let made = ojrunner_daemon::at_once(4, move || Spool::create(&d).map(drop).map_err(|e| e.to_string()));
        assert_eq!(made, [Ok(()), Ok(()), Ok(()), Ok(())], "round {round}");
    }
}
