//! A case judged by an ICPC validator (the problem package format's
//! interface): `validator input answer feedback_dir/ [flags]`, sandboxed
//! as the auxiliary slot in the case's `<scratch>.judge/` (seen at
//! [`CHECK_DIR`]), its feedback directory there, writable. Exit 42 is AC,
//! 43 WA ([`verdict::icpc_validator`]); its `judgemessage.txt` becomes the
//! case's message, after the program's own stderr.
//!
//! After the program ([`CaseContext::run_validator`]), the program's output
//! is the validator's stdin. As an interactor
//! ([`CaseContext::run_icpc_interactive`]), alongside the program as
//! `interactive.rs` runs a testlib interactor, the two connected by two
//! pipes; the verdict is [`verdict::interactive`]'s, the validator's own
//! from its exit code.

use super::capped::{message_cap, read_back, read_capped};
use super::case::{with_message, CaseContext, CheckError};
use super::files::{annotate, create_fresh, CheckDir};
use super::spec::RunSpec;
use super::{CaseRun, CHECKER_DIR, CHECK_DIR};
use crate::checker::Validator;
use crate::protocol::Verdict;
use crate::sandbox::{self, Bind, Limits};
use crate::verdict;
use std::fs::File;
use std::io::Seek;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a validator is called in a case's errors.
const VALIDATOR: &str = "validator";

/// The feedback file whose words are the case's message.
const JUDGE_MESSAGE: &str = "judgemessage.txt";

impl CaseContext<'_> {
    /// Runs an output validator on a finished case, the program's output
    /// (`output`, the judge's own handle) its stdin: the verdict, and its
    /// message (`judgemessage.txt`, if it wrote one).
    pub(super) fn run_validator(
        &self,
        v: &Validator,
        output: &mut File,
    ) -> Result<(Verdict, Option<String>), CheckError> {
        let prepared = (|| {
            let (dir, feedback, log) = self.validator_dir()?;
            output.rewind()?;
            let streams = [output.try_clone()?, log.try_clone()?, log.try_clone()?];
            Ok::<_, std::io::Error>((dir, feedback, log, streams))
        })();
        let (dir, feedback, mut log, [stdin, out, err]) =
            prepared.map_err(|e| CheckError::Preparing { what: VALIDATOR, source: e })?;
        let spec = self.validator(v, &dir, &feedback, self.judge.checker_limits(None)).stdio(stdin, out, err);
        let usage = sandbox::run(spec);
        let message = read_feedback(&feedback.join(JUDGE_MESSAGE), message_cap(self.judge.output_cap));
        let status = self.validator_verdict(&usage, &mut log, &message)?;
        Ok((status, message))
    }

    /// The case's check directory, an empty feedback directory in it and a
    /// fresh log, handed to the auxiliary slot: a validator's place.
    fn validator_dir(&self) -> std::io::Result<(CheckDir, PathBuf, File)> {
        let dir = CheckDir::new(self.scratch, self.input, self.answer)?;
        let feedback = self.feedback_dir(&dir)?;
        let log = create_fresh(&dir.path.join("validator.log"), 0o600)?;
        dir.hand_to(&self.slot.auxiliary())?;
        Ok((dir, feedback, log))
    }

    /// A validator's verdict from its run: 42 AC, 43 WA; else why it
    /// failed, with what it said (its log, then its message).
    fn validator_verdict(
        &self,
        usage: &Result<sandbox::Usage, sandbox::Error>,
        log: &mut File,
        message: &Option<String>,
    ) -> Result<Verdict, CheckError> {
        let usage = usage.as_ref().map_err(|e| CheckError::Run { what: VALIDATOR, source: e.clone() })?;
        verdict::icpc_validator(VALIDATOR, usage).map_err(|failed| {
            let said = read_back(log, self.judge.output_cap).trim_end().to_string();
            let said = [Some(said), message.clone()].into_iter().flatten().filter(|s| !s.is_empty()).collect();
            CheckError::Failed { failed, said: said_together(said) }
        })
    }

    /// Runs the program against an ICPC interactor `v`: the validator's
    /// stdout is the program's stdin, the program's stdout the validator's
    /// (`interactive.rs`'s dialogue, its rules).
    pub(super) fn run_icpc_interactive(&self, v: &Validator) -> CaseRun {
        let (dir, feedback, mut log) = match self.validator_dir() {
            Ok(x) => x,
            Err(e) => return CaseRun::judge_error(&format!("preparing the case: {e}")),
        };
        let d = match self.converse(&log, |limits| self.validator(v, &dir, &feedback, limits)) {
            Ok(d) => d,
            Err(why) => return CaseRun::judge_error(&why),
        };
        let cap = self.judge.output_cap;
        let message = read_feedback(&feedback.join(JUDGE_MESSAGE), message_cap(cap));
        let validator = self.validator_verdict(&d.interactor, &mut log, &message);
        drop(dir);
        with_message(self.conclude(d, validator), message, cap)
    }

    /// `dir/feedback/`, empty, the auxiliary slot's.
    pub(super) fn feedback_dir(&self, dir: &CheckDir) -> std::io::Result<std::path::PathBuf> {
        let feedback = dir.path.join("feedback");
        std::fs::DirBuilder::new().mode(0o700).create(&feedback).map_err(|e| annotate(e, &feedback))?;
        if let Some(id) = self.slot.auxiliary().identity() {
            std::os::unix::fs::chown(&feedback, Some(id.uid), Some(id.gid)).map_err(|e| annotate(e, &feedback))?;
        }
        Ok(feedback)
    }

    /// A validator's run: `validator input answer feedback/ [flags]` in the
    /// case's `dir` (writable: the feedback directory is in it), as the
    /// auxiliary slot.
    pub(super) fn validator(&self, v: &Validator, dir: &CheckDir, feedback: &Path, limits: Limits) -> RunSpec {
        let arg = |p: &Path| p.to_string_lossy().into_owned();
        let mut argv = vec![arg(&v.program.binary), arg(&dir.path.join("input")), arg(&dir.path.join("answer"))];
        // With its slash: validators append file names to it as given.
        argv.push(format!("{}/", arg(feedback)));
        argv.extend(v.flags.iter().cloned());
        let home = Bind::at(&dir.path, CHECK_DIR, true);
        RunSpec::new(argv, self.slot.auxiliary().identity(), limits, home).bind(v.program.dir(), CHECKER_DIR)
    }
}

/// What a validator said, one part a line.
fn said_together(parts: Vec<String>) -> String {
    parts.join("\n")
}

/// The first `cap` bytes of a feedback file the validator wrote, `None` if
/// it wrote none. The validator owns the directory: a link or a FIFO put
/// there is never followed or waited on, only named.
fn read_feedback(path: &Path, cap: usize) -> Option<String> {
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path);
    let mut file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Some(format!("({name} is not a regular file: not read)"))
        }
        Err(e) => return Some(format!("({name}: {e})")),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Some(format!("({name} is not a regular file: not read)"));
    }
    Some(read_capped(&mut file, cap))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CaseResult;

    fn run_with(stderr: &str) -> CaseRun {
        let mut result = CaseResult::judge_error("");
        result.status = Verdict::WA;
        result.stderr = stderr.into();
        CaseRun { result, limit: None, timing: None }
    }

    #[test]
    fn the_message_follows_the_programs_words_and_fits_the_cap() {
        let r = with_message(run_with("debug"), Some("wrong sum\n".into()), 256);
        assert_eq!(r.result.stderr, "debug\n[validator] wrong sum\n");
        let r = with_message(run_with(""), Some("wrong".into()), 256);
        assert_eq!(r.result.stderr, "[validator] wrong\n");
        assert_eq!(with_message(run_with("x"), Some(" \n".into()), 256).result.stderr, "x", "a blank message is none");
        // The program's words are cut first; the message keeps its quarter.
        let r = with_message(run_with(&"p".repeat(300)), Some("m".repeat(100)), 256);
        let s = &r.result.stderr;
        assert!(s.len() <= 256 && s.starts_with("ppp") && s.contains("\n[validator] mmm") && s.len() > 250, "{s:?}");
    }

    #[test]
    fn feedback_is_read_bounded_and_never_through_a_link_or_a_fifo() {
        let dir = ojrunner_daemon::test_dir("ojfeedback");
        assert_eq!(read_feedback(&dir.join("none"), 10), None);
        std::fs::write(dir.join("m"), "0123456789abcdef").unwrap();
        assert_eq!(read_feedback(&dir.join("m"), 10).as_deref(), Some("0123456789"));
        std::os::unix::fs::symlink(dir.join("m"), dir.join("link")).unwrap();
        assert_eq!(read_feedback(&dir.join("link"), 10).as_deref(), Some("(link is not a regular file: not read)"));
        let fifo = std::ffi::CString::new(dir.join("fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; mkfifo only reads it.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(read_feedback(&dir.join("fifo"), 10).as_deref(), Some("(fifo is not a regular file: not read)"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
