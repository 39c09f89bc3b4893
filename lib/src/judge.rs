//! Judging one submission: compile it once, run it on each case under the
//! task's limits, decide each case's verdict.
//!
//! [`Judge`] turns a [`Language`] and a [`Task`] into sandbox [`Limits`],
//! runs [`sandbox::run`], hands the usage to [`verdict::decide`] and, when
//! the program ran cleanly, lets the [`Checker`] compare its output with the
//! answer.
//!
//! # Files and owners
//!
//! - `src_dir` (created by the caller, owned by root) holds the source. For
//!   the compile it is handed to the slot uid (the compiler writes the binary
//!   there) and afterwards taken back, with everything the compiler made:
//!   runs see it read-only, so no case can alter what the next case runs.
//! - `scratch` (one per case, created by the caller) is handed to the slot:
//!   it is the program's `TMPDIR`. Its stdout and stderr go to files there,
//!   opened by the judge.
//! - The input is opened by the judge and passed as stdin, so the slot uid
//!   needs no permission on the testdata. (It could still open a world-readable
//!   answer file by path; the namespace issue hides the file system.)
//! - Every directory above `src_dir` and `scratch` must be searchable by
//!   others (`o+x`), or the slot uid cannot reach them.

use crate::checker::Checker;
use crate::language::Language;
use crate::protocol::{CaseResult, Status, Task};
use crate::sandbox::{self, Bind, Identity, Limits};
use crate::verdict;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

/// The first uid (and gid) of the slots, when running as root.
pub const SLOT_BASE_UID: u32 = 60000;

/// Address space a run may reserve beyond its memory limit (the `RLIMIT_AS`
/// backstop): room for what runtimes reserve and never touch.
pub const ADDRESS_SPACE_HEADROOM: u64 = 1 << 30;

/// The unprivileged identity one concurrent worker runs programs as. A slot
/// must be used by one run at a time: after each run every process of its uid
/// is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub uid: u32,
    pub gid: u32,
}

impl Slot {
    /// Worker `i`'s slot: uid = gid = 60000 + i when running as root (the
    /// uids need no passwd entry, but nothing else may run as them); else the
    /// caller's own uid, and programs run as the caller.
    pub fn for_index(i: usize) -> Slot {
        if is_root() {
            let id = SLOT_BASE_UID + i as u32;
            Slot { uid: id, gid: id }
        } else {
            Slot { uid: unsafe { libc::getuid() }, gid: unsafe { libc::getgid() } }
        }
    }

    /// Whom the sandbox switches to: nobody unless we are root (and uid 0
    /// means "don't switch").
    pub fn identity(&self) -> Option<Identity> {
        (is_root() && self.uid != 0).then_some(Identity { uid: self.uid, gid: self.gid })
    }
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// The outcome of a compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compiled {
    /// Ready to run (or nothing to compile).
    Ready,
    /// CE: the compiler's message (capped to [`Judge::output_cap`]) and why.
    Failed { message: String },
    /// The judge could not compile (not the submission's fault).
    JudgeError(String),
}

/// One judged case and which limit stopped it (`cpu`, `wall`, `memory`,
/// `output`, `syscall`; `None` if none did).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseRun {
    pub result: CaseResult,
    pub limit: Option<&'static str>,
}

/// How to judge: limits that are the runner's, not the task's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judge {
    /// Bytes of stdout/stderr kept for the hub (and of a compiler's message).
    pub output_cap: usize,
    /// Bytes a program may write to stdout (or stderr) before OLE.
    pub output_limit: u64,
    /// The checker `run_case` uses.
    pub checker: Checker,
    /// Compile limits: CPU time of the compiler's process tree, wall time,
    /// resident memory, size of any file written (the binary), processes.
    pub compile_cpu: Duration,
    pub compile_wall: Duration,
    pub compile_memory: u64,
    pub compile_output: u64,
    pub compile_processes: u64,
}

impl Default for Judge {
    fn default() -> Judge {
        Judge {
            output_cap: 64 * 1024,
            output_limit: 64 << 20,
            checker: Checker::Diff,
            // Normal-OJ: 20 s, 1 GiB.
            compile_cpu: Duration::from_secs(20),
            compile_wall: Duration::from_secs(30),
            compile_memory: 1 << 30,
            compile_output: 256 << 20,
            compile_processes: 64,
        }
    }
}

impl Judge {
    /// The limits of one run of `lang` under `task`.
    pub fn case_limits(&self, lang: &Language, task: &Task) -> Limits {
        let time = Duration::from_millis(task.time_limit.max(1) as u64);
        let memory = task.memory_limit.max(1) as u64 * 1024;
        Limits {
            cpu: time,
            // A sleeper (or a program blocked on a read) is TLE, and never
            // holds a worker for long.
            wall: 3 * time + Duration::from_secs(1),
            memory,
            address_space: lang.limit_address_space.then_some(memory + ADDRESS_SPACE_HEADROOM),
            // A large stack, as Normal-OJ gives: deep recursion is legal.
            stack: Some(memory),
            output: self.output_limit,
            processes: Some(lang.processes),
        }
    }

    /// The limits of a compile of `lang`.
    pub fn compile_limits(&self, lang: &Language) -> Limits {
        Limits {
            cpu: self.compile_cpu,
            wall: self.compile_wall,
            memory: self.compile_memory,
            address_space: lang.limit_address_space.then_some(self.compile_memory + ADDRESS_SPACE_HEADROOM),
            stack: Some(self.compile_memory),
            output: self.compile_output,
            processes: Some(self.compile_processes),
        }
    }

    /// Compiles `src_dir/<lang.source>` with `lang.compile`, as the slot, in
    /// `src_dir`. Languages without a compile step are `Ready` at once.
    pub fn compile(&self, lang: &Language, src_dir: &Path, slot: &Slot) -> Compiled {
        let source = src_dir.join(&lang.source);
        if !source.is_file() {
            return Compiled::JudgeError(format!("{} is missing", source.display()));
        }
        let Some(argv) = &lang.compile else { return Compiled::Ready };
        let identity = slot.identity();
        let result = self.compile_as(lang, argv, src_dir, identity);
        if identity.is_some() {
            if let Err(e) = own_tree(src_dir, 0, 0, 0) {
                return Compiled::JudgeError(format!("taking back {}: {e}", src_dir.display()));
            }
        }
        result
    }

    fn compile_as(&self, lang: &Language, argv: &[String], src_dir: &Path, identity: Option<Identity>) -> Compiled {
        let prepared = (|| {
            set_mode(src_dir, 0o755)?;
            let source = src_dir.join(&lang.source);
            let mode = std::fs::metadata(&source)?.permissions().mode();
            set_mode(&source, mode | 0o444)?;
            // The compiler's messages: a file nobody else can open (unlinked at once).
            let log_path = src_dir.join(format!(".compile-{}.log", std::process::id()));
            let log = create_fresh(&log_path, 0o600)?;
            std::fs::remove_file(&log_path)?;
            if let Some(id) = identity {
                std::os::unix::fs::chown(src_dir, Some(id.uid), Some(id.gid))?;
            }
            Ok::<_, std::io::Error>(log)
        })();
        let mut log = match prepared {
            Ok(l) => l,
            Err(e) => return Compiled::JudgeError(format!("preparing {}: {e}", src_dir.display())),
        };
        let limits = self.compile_limits(lang);
        let spec = match (File::open("/dev/null"), log.try_clone(), log.try_clone()) {
            (Ok(stdin), Ok(stdout), Ok(stderr)) => sandbox::Spec {
                argv: argv.to_vec(),
                cwd: src_dir.to_path_buf(),
                env: environment(src_dir, if jailed(identity) { Path::new("/tmp") } else { src_dir }),
                stdin,
                stdout,
                stderr,
                identity,
                limits: limits.clone(),
                binds: vec![Bind { path: src_dir.to_path_buf(), writable: true }],
            },
            _ => return Compiled::JudgeError("cannot open the compiler's stdio".into()),
        };
        let usage = match sandbox::run(spec) {
            Ok(u) => u,
            Err(e) => return Compiled::JudgeError(format!("compiler: {e}")),
        };
        let Some(why) = verdict::compile_failure(&usage, &limits) else { return Compiled::Ready };
        let said = log.rewind().map(|_| read_capped(&mut log, self.output_cap)).unwrap_or_default();
        let message = match (said.trim().is_empty(), usage.fired.is_some()) {
            (true, _) => why,
            (false, false) => said,
            (false, true) => cap_string(format!("{}\n{why}", said.trim_end()), self.output_cap),
        };
        Compiled::Failed { message }
    }

    /// Runs one case with the judge's checker: see [`Judge::run_case_with`].
    #[allow(clippy::too_many_arguments)]
    pub fn run_case(
        &self,
        lang: &Language,
        src_dir: &Path,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
    ) -> CaseResult {
        self.run_case_with(lang, src_dir, input, answer, task, slot, scratch, self.checker)
    }

    /// Runs `lang.run` in `src_dir` as the slot, stdin from `input`, stdout
    /// and stderr to `scratch/stdout` and `scratch/stderr`, under `task`'s
    /// limits; decides the verdict ([`verdict::decide`]) and, if the program
    /// ran cleanly, compares its stdout with `answer` using `checker`.
    ///
    /// `exec_time` is CPU ms (user + system), `memory_usage` peak KiB,
    /// `exit_code` the exit code or 128 + the signal; `stdout`/`stderr` are
    /// the first [`Judge::output_cap`] bytes, lossily decoded as UTF-8. The
    /// judge's own failures are JE with the reason in `stderr`.
    #[allow(clippy::too_many_arguments)]
    pub fn run_case_with(
        &self,
        lang: &Language,
        src_dir: &Path,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
        checker: Checker,
    ) -> CaseResult {
        self.run_case_detailed(lang, src_dir, input, answer, task, slot, scratch, checker).result
    }

    /// [`Judge::run_case_with`], also telling which limit stopped the program.
    #[allow(clippy::too_many_arguments)]
    pub fn run_case_detailed(
        &self,
        lang: &Language,
        src_dir: &Path,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
        checker: Checker,
    ) -> CaseRun {
        let je = |why: &str| CaseRun { result: CaseResult::judge_error(why), limit: None };
        let identity = slot.identity();
        let opened = (|| {
            set_mode(src_dir, 0o755)?;
            if let Some(id) = identity {
                std::os::unix::fs::chown(scratch, Some(id.uid), Some(id.gid))?;
            }
            let stdin = File::open(input).map_err(|e| annotate(e, input))?;
            let (stdout, stderr) = (scratch.join("stdout"), scratch.join("stderr"));
            Ok::<_, std::io::Error>((stdin, create_fresh(&stdout, 0o644)?, create_fresh(&stderr, 0o644)?))
        })();
        let (stdin, mut stdout, mut stderr) = match opened {
            Ok(files) => files,
            Err(e) => return je(&format!("preparing the case: {e}")),
        };
        let limits = self.case_limits(lang, task);
        let (out_w, err_w) = match (stdout.try_clone(), stderr.try_clone()) {
            (Ok(o), Ok(e)) => (o, e),
            _ => return je("cannot duplicate the output files"),
        };
        let spec = sandbox::Spec {
            argv: lang.run.clone(),
            cwd: src_dir.to_path_buf(),
            env: environment(src_dir, if jailed(identity) { Path::new("/tmp") } else { scratch }),
            stdin,
            stdout: out_w,
            stderr: err_w,
            identity,
            limits: limits.clone(),
            // Jailed, the program writes only to its private /tmp: nothing on
            // the host's disk but the stdout and stderr the judge opened.
            binds: vec![Bind { path: src_dir.to_path_buf(), writable: false }],
        };
        let usage = match sandbox::run(spec) {
            Ok(u) => u,
            Err(e) => return je(&e),
        };
        let size = |f: &File| f.metadata().map(|m| m.len()).unwrap_or(0);
        let status = match verdict::decide(&usage, &limits, size(&stdout).max(size(&stderr))) {
            Some(s) => s,
            // Through the judge's own handle: `scratch` belongs to the slot, and
            // a program could have put a link to the answer at `scratch/stdout`.
            None => match checker.check_output(&mut stdout, answer) {
                Ok(true) => Status::AC,
                Ok(false) => Status::WA,
                Err(e) => return je(&format!("checker: {e}")),
            },
        };
        let capped = |f: &mut File| f.rewind().map(|_| read_capped(f, self.output_cap)).unwrap_or_default();
        let mut stderr = capped(&mut stderr);
        if let Some(call) = &usage.denied {
            // The note must fit: cut the program's own words first.
            let note = format!("\n[judge] system call {call} denied by the sandbox\n");
            stderr = cap_string(stderr, self.output_cap.saturating_sub(note.len()));
            stderr.push_str(&note);
            stderr = cap_string(stderr, self.output_cap);
        }
        let limit = match (usage.fired, &usage.denied) {
            (Some(f), _) => Some(f.as_str()),
            (None, Some(_)) => Some("syscall"),
            _ if status == Status::OLE => Some("output"),
            _ if status == Status::TLE => Some("cpu"),
            _ if status == Status::MLE => Some("memory"),
            _ => None,
        };
        let result = CaseResult {
            status,
            exec_time: usage.cpu.as_millis() as i64,
            memory_usage: (usage.memory / 1024) as i64,
            exit_code: usage.exit.code(),
            stdout: capped(&mut stdout),
            stderr,
        };
        CaseRun { result, limit }
    }
}

/// Whether runs as `identity` are jailed (then `TMPDIR` is the run's
/// private `/tmp`, and the scratch dir is not visible).
fn jailed(identity: Option<Identity>) -> bool {
    static NAMESPACES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    identity.is_some() && *NAMESPACES.get_or_init(sandbox::probe_namespaces)
}

/// A judged program's whole environment.
fn environment(home: &Path, tmp: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("HOME".into(), home.to_string_lossy().into_owned()),
        ("TMPDIR".into(), tmp.to_string_lossy().into_owned()),
    ]
}

/// The first `cap` bytes of a stream, as UTF-8 (lossy), at most `cap` bytes long.
fn read_capped(r: &mut impl Read, cap: usize) -> String {
    let mut buf = Vec::with_capacity(cap.min(1 << 20));
    let _ = r.take(cap as u64).read_to_end(&mut buf);
    cap_string(String::from_utf8_lossy(&buf).into_owned(), cap)
}

/// Cuts `s` to at most `cap` bytes, on a character boundary (a replacement
/// character is 3 bytes, so lossy decoding can grow a string).
fn cap_string(mut s: String, cap: usize) -> String {
    if s.len() > cap {
        let mut end = cap;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// Creates `p` anew, never through a link a judged program may have left.
fn create_fresh(p: &Path, mode: u32) -> std::io::Result<File> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(annotate(e, p)),
        _ => {}
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(p)
        .map_err(|e| annotate(e, p))
}

fn set_mode(p: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(|e| annotate(e, p))
}

fn annotate(e: std::io::Error, p: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

/// Gives `dir` and everything under it to `uid:gid` (symbolic links are not
/// followed: `lchown`).
fn own_tree(dir: &Path, uid: u32, gid: u32, depth: usize) -> std::io::Result<()> {
    std::os::unix::fs::lchown(dir, Some(uid), Some(gid)).map_err(|e| annotate(e, dir))?;
    if depth > 32 {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            own_tree(&path, uid, gid, depth + 1)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).map_err(|e| annotate(e, &path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::Languages;

    #[test]
    fn capped_output_never_exceeds_the_cap() {
        assert_eq!(read_capped(&mut "hello".as_bytes(), 3), "hel");
        assert_eq!(read_capped(&mut "hello".as_bytes(), 64), "hello");
        // "é" is 2 bytes: a cut inside it must not leave 3 bytes of U+FFFD past the cap.
        let s = read_capped(&mut "aé".as_bytes(), 2);
        assert!(s.len() <= 2, "{s:?}");
        // Invalid bytes become U+FFFD (3 bytes each): still capped.
        let s = read_capped(&mut [0xffu8; 10].as_slice(), 10);
        assert!(s.len() <= 10 && s.starts_with('\u{fffd}'), "{s:?}");
    }

    #[test]
    fn case_limits_follow_the_task() {
        let judge = Judge::default();
        let langs = Languages::builtin();
        let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: 1 };
        let l = judge.case_limits(langs.by_name("c11").unwrap(), &task);
        assert_eq!(l.cpu, Duration::from_secs(1));
        assert_eq!(l.wall, Duration::from_secs(4));
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(l.address_space, Some((64 << 20) + ADDRESS_SPACE_HEADROOM));
        assert_eq!(l.stack, Some(64 << 20));
        assert_eq!(l.output, 64 << 20);
        assert_eq!(l.processes, Some(16));
        let java = judge.case_limits(langs.by_name("java").unwrap(), &task);
        assert_eq!(java.address_space, None);
    }

    #[test]
    fn slots_are_distinct_when_root() {
        if is_root() {
            assert_eq!(Slot::for_index(3), Slot { uid: 60003, gid: 60003 });
            assert!(Slot::for_index(0).identity().is_some());
        } else {
            assert!(Slot::for_index(3).identity().is_none());
        }
        assert!(Slot { uid: 0, gid: 0 }.identity().is_none());
    }
}
