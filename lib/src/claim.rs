//! Preparing a claim: one try ([`prepare`]: code, testdata, checks), what
//! a failed try costs the job, and what comes next ([`Tries`]). `claimd`
//! runs the tries, a thread per claim ([`crate::stage::claimd`]); the
//! pipeline and the rule are here, so they can be read, and the rule
//! tested, without a hub.
//!
//! Only the job's own faults cost it an attempt. A job that cannot be
//! judged goes back at once as `abort(prep_failed)`; a hub that said no is
//! tried 3 times, spaced by [`patience::PREP`]; the hub away or the
//! runner's own disk full are waited out as patiently as an outcome is
//! delivered ([`patience::PATIENT`], for [`patience::outcome_kept`]); a
//! refused `SANDBOX_TOKEN` is the runner's configuration, left to claimd's
//! main loop. A stop during the last try makes it a drain, not a failure.

use crate::archive;
use crate::hub::{self, HubClient};
use crate::language::Languages;
use crate::metrics;
use crate::patience;
use crate::phase::{Phase, Timing};
use crate::protocol::AbortReason;
use crate::spool::{ClaimRow, ClaimState, Spool};
use crate::testdata::{self, Cache};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Claims that may still read their testdata.
const HELD_STATES: [ClaimState; 3] = [ClaimState::Claimed, ClaimState::Prepped, ClaimState::Started];

/// A failed try, by whose fault and what it costs the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The hub said no (a 4xx): worth another try or two.
    Again(String),
    /// Not the job's fault, maybe for long (the hub away, a download cut
    /// midway, the runner's own disk): waited out patiently.
    Wait(String),
    /// The job cannot be judged (a bad payload, a refused archive): handed
    /// back at once as `abort(prep_failed)`.
    Bad(String),
    /// The testdata channel refused the runner's `SANDBOX_TOKEN`.
    Refused(String),
}

impl From<hub::FetchError> for Fault {
    fn from(e: hub::FetchError) -> Fault {
        match e.1 {
            hub::Reach::Away | hub::Reach::Ours => Fault::Wait(e.0),
            hub::Reach::Answered => Fault::Again(e.0),
            hub::Reach::Unusable => Fault::Bad(e.0),
            hub::Reach::Refused => Fault::Refused(e.0),
        }
    }
}

/// What a prep does after a failed try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Try again after this long; `counted` if the try cost one of the 3.
    Again { after: Duration, counted: bool },
    /// Hand the claim back.
    Abort(AbortReason),
    /// Leave it to claimd's main loop (the runner's configuration).
    Refused,
}

/// The tries of one claim's prep so far.
#[derive(Clone, Debug, Default)]
pub struct Tries {
    /// Tries that cost the job one of its 3.
    counted: usize,
    /// Waits for what is not the job's fault.
    waits: usize,
}

impl Tries {
    /// After a try failed with `fault`, `elapsed` since the prep began;
    /// `stopping` says whether a drain or stop came meanwhile.
    pub fn failed(&mut self, fault: &Fault, elapsed: Duration, stopping: impl FnOnce() -> bool) -> Next {
        match fault {
            Fault::Bad(_) => Next::Abort(AbortReason::PrepFailed),
            Fault::Refused(_) => Next::Refused,
            Fault::Wait(_) if elapsed < patience::outcome_kept() => {
                self.waits += 1;
                let after = patience::PATIENT.delay(self.waits).unwrap_or(Duration::from_secs(15));
                Next::Again { after, counted: false }
            }
            Fault::Again(_) | Fault::Wait(_) => {
                self.counted += 1;
                match patience::PREP.delay(self.counted) {
                    Some(after) => Next::Again { after, counted: true },
                    None if stopping() => Next::Abort(AbortReason::Drain),
                    None => Next::Abort(AbortReason::PrepFailed),
                }
            }
        }
    }

    /// Tries that cost the job one of its 3.
    pub fn counted(&self) -> usize {
        self.counted
    }
}

/// A claim prepared: where its testdata is, and how long the code and the
/// testdata took ([`Phase::Code`], [`Phase::Testdata`]), recorded when it
/// is marked prepped.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub testdata: PathBuf,
    pub timings: Vec<Timing>,
}

/// A download that failed: counted as the hub's error (if it is the
/// hub's), and what it costs the job.
fn fetch_fault(spool: &mut Spool, e: hub::FetchError) -> Fault {
    metrics::count_fetch_error(spool, &e);
    Fault::from(e)
}

/// One try at preparing `claim` in its directory: the code (one zip
/// holding exactly the language's source file), the problem's testdata
/// (cached per host by the hub's checksum), and the cases the tasks name.
/// On failure, whose fault it is.
pub fn prepare(
    spool: &mut Spool,
    hub: &HubClient,
    cache: &Cache,
    languages: &Languages,
    claim: &ClaimRow,
) -> Result<Prepared, Fault> {
    let job = claim.job.as_ref().map_err(|e| Fault::Bad(e.to_string()))?;
    let source = languages
        .by_id(job.language)
        .map(|l| l.source.clone())
        .ok_or_else(|| Fault::Bad(format!("language {} is not in this runner's table", job.language)))?;
    let dir = spool.claim_dir(claim.id);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Fault::Wait(format!("{}: {e}", dir.display())))?;
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711));
    let _ = std::fs::set_permissions(dir.parent().unwrap(), std::fs::Permissions::from_mode(0o711));
    // The code: one zip holding exactly one file, main.<ext>, ≤ 10 MB.
    let zip = dir.join("code.zip");
    hub.download(&job.code_url, "the submission's code", &zip, archive::CODE.max_bytes + 1024 * 1024)
        .map_err(|e| fetch_fault(spool, e))?;
    let files = archive::extract(&zip, &dir.join("src"), archive::CODE).map_err(|e| match e.1 {
        archive::Blame::Archive => Fault::Bad(format!("code zip: {e}")),
        archive::Blame::Ours => Fault::Wait(format!("code zip: {e}")),
    })?;
    let _ = std::fs::remove_file(&zip);
    // The protocol names the file main.<ext>; a language may want it
    // named otherwise (Java's Main.java): same name but for case.
    let name = files.first().and_then(|f| f.to_str()).unwrap_or("");
    if files.len() != 1 || !name.eq_ignore_ascii_case(&source) {
        return Err(Fault::Bad(format!("code zip holds {files:?}, not exactly {source}")));
    }
    if name != source {
        std::fs::rename(dir.join("src").join(name), dir.join("src").join(&source))
            .map_err(|e| Fault::Wait(format!("{source}: {e}")))?;
    }
    // The code is here: since the hub's answer was read (the claim's
    // time), tries that failed included.
    let code = Timing::new(Phase::Code, ojrunner_daemon::clock::now_us() - claim.claimed_at * 1000);
    let t0 = Instant::now();
    let (td, cached) = cache.ensure(hub, job.problem_id).map_err(|e| fetch_fault(spool, e))?;
    let in_use: Vec<PathBuf> =
        spool.claims_in(&HELD_STATES).unwrap_or_default().into_iter().filter_map(|c| c.testdata).collect();
    cache.prune(job.problem_id, &td, &in_use);
    testdata::check_cases(&td, &job.tasks).map_err(|e| Fault::Bad(format!("problem {}: {e}", job.problem_id)))?;
    let testdata = Timing::labelled(Phase::Testdata, cached.as_str(), t0.elapsed().as_micros() as i64);
    Ok(Prepared { testdata: td, timings: vec![code, testdata] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn again(after: Duration, counted: bool) -> Next {
        Next::Again { after, counted }
    }

    #[test]
    fn a_hub_that_says_no_gets_three_tries_spaced_by_the_schedule_then_prep_failed() {
        let mut t = Tries::default();
        let no = Fault::Again("404".into());
        let zero = Duration::ZERO;
        assert_eq!(t.failed(&no, zero, || false), again(patience::PREP.delay(1).unwrap(), true));
        assert_eq!(t.failed(&no, zero, || false), again(patience::PREP.delay(2).unwrap(), true));
        assert_eq!(t.failed(&no, zero, || false), Next::Abort(AbortReason::PrepFailed));
        assert_eq!(t.counted(), 3);
        // A stop that landed during the last try: a drain, costing nothing.
        let mut t = Tries::default();
        t.failed(&no, zero, || false);
        t.failed(&no, zero, || false);
        assert_eq!(t.failed(&no, zero, || true), Next::Abort(AbortReason::Drain));
    }

    #[test]
    fn what_is_not_the_jobs_fault_is_waited_out_and_costs_no_try() {
        let mut t = Tries::default();
        let away = Fault::Wait("connection refused".into());
        let zero = Duration::ZERO;
        for n in 1..=20 {
            assert_eq!(t.failed(&away, zero, || false), again(patience::PATIENT.delay(n).unwrap(), false), "wait {n}");
        }
        assert_eq!(t.counted(), 0);
        // Past the time an outcome is kept, waiting counts like a no.
        let late = patience::outcome_kept();
        assert_eq!(t.failed(&away, late, || false), again(patience::PREP.delay(1).unwrap(), true));
        assert_eq!(
            t.failed(&Fault::Again("404".into()), zero, || false),
            again(patience::PREP.delay(2).unwrap(), true)
        );
        assert_eq!(t.failed(&away, late, || false), Next::Abort(AbortReason::PrepFailed));
    }

    #[test]
    fn a_job_that_cannot_be_judged_goes_back_at_once_and_a_refused_token_is_the_runners() {
        let mut t = Tries::default();
        assert_eq!(
            t.failed(&Fault::Bad("not a zip".into()), Duration::ZERO, || true),
            Next::Abort(AbortReason::PrepFailed)
        );
        assert_eq!(t.failed(&Fault::Refused("401".into()), Duration::ZERO, || false), Next::Refused);
        assert_eq!(t.counted(), 0);
    }
}
