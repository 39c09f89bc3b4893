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
//! - `src` (a [`Workspace`], staged by the caller: as root, a copy on the
//!   workspaces' tmpfs under a random name, so that no jailed process
//!   reads where the claim lies) holds the source. For
//!   the compile it is handed to the slot uid (the compiler writes the binary
//!   there) and afterwards taken back, with everything the compiler made:
//!   runs see it read-only, so no case can alter what the next case runs.
//! - `scratch` (created by the caller; [`Judge::run_cases`] gives each slot
//!   one, reused from case to case) is handed to the slot: it is the
//!   program's `TMPDIR` at the basic level (a jailed run does not see it).
//!   Its stdout and stderr go to files there, root's alone: the program
//!   writes to pipes the judge copies into them, capped at the output limit
//!   (`streams.rs`); they are emptied and reused while they are still the
//!   judge's own.
//! - The input is opened by the judge and handed as a sealed copy
//!   (`streams.rs`), so the slot uid needs no permission on the testdata and
//!   can change nothing of it. A jailed run sees no testdata at all, and its
//!   directory at [`SRC`], not at its host path.
//! - Every directory above `scratch` (and `src`, not root) must be searchable by
//!   others (`o+x`), or the slot uid cannot reach them.
//!
//! # Checker programs (special judges, interactors)
//!
//! [`Judge::prepare_checker`] compiles `checker.cpp`/`.c` or
//! `interactor.cpp`/`.c` of the testdata (with the built-in `cpp17`/`c11`
//! command, as the worker's slot, any `*.h` of the testdata beside it, so a
//! shipped `testlib.h` is found) once per testdata version, into
//! `cache/<key>/` (root-owned, 0755; `key` hashes the testdata path, the
//! sources and the compile command; a `flock` on `cache/<key>.lock` makes a
//! second worker wait for the first one's compile and then reuse it).
//!
//! They run sandboxed like a case, under [`Judge::checker_limits`], as the
//! worker's *auxiliary* slot ([`Slot::auxiliary`]: the base + 1000 + i), never as
//! the contestant's slot: an interactor runs while the program does, and two
//! runs on one slot would serialize on the slot lock (and deadlock the
//! pair); a distinct uid also keeps the program away from the answer. Each
//! case gets `<scratch>.judge/`, made by root, owned by the auxiliary uid,
//! mode 0700, with copies of the input, the answer (and, for a checker, the
//! program's output): the testdata stays root-only, the contestant's uid
//! cannot enter the directory, and the program's jail does not even show it.
//! The run sees that directory and the binary's directory, nothing else of
//! the host. It is removed after the case.

use crate::checker::{self, Checker, Named, Program};
use crate::language::{Language, Languages};
use crate::program_cache;
use crate::protocol::{CaseResult, Status, Task};
use crate::sandbox::slot::SlotPool;
use crate::sandbox::{self, Bind, Identity, Limits};
use crate::verdict;
use crate::workspace::Workspace;

// Where a judge's slots come from (`sandbox/slot.rs`).
pub use crate::sandbox::slot::{parse_slot_uid_base, slot_uid_base, Slot, AUX_UID_OFFSET, SLOT_BASE_UID};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a jailed compile or run sees the submission's directory: a name
/// that tells nothing of the host (the spool, the claim).
pub const SRC: &str = "/src";

/// Where a jailed checker or interactor sees its case's files, and its binary.
pub const CHECK_DIR: &str = "/judge";
pub const CHECKER_DIR: &str = "/checker";

/// Address space a run may reserve beyond its memory limit (the `RLIMIT_AS`
/// backstop): room for what runtimes reserve and never touch.
pub const ADDRESS_SPACE_HEADROOM: u64 = 1 << 30;

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

    /// The limits of a checker's or interactor's run: 10 s of CPU, 1 GiB;
    /// wall time 20 s, or (an interactor) the program's wall limit + 10 s,
    /// since it waits for the program.
    pub fn checker_limits(&self, program_wall: Option<Duration>) -> Limits {
        let memory = 1 << 30;
        Limits {
            cpu: Duration::from_secs(10),
            wall: program_wall.map_or(Duration::from_secs(20), |w| w + Duration::from_secs(10)),
            memory,
            address_space: Some(memory + ADDRESS_SPACE_HEADROOM),
            stack: Some(memory),
            output: self.output_limit,
            processes: Some(16),
        }
    }

    /// The checker a job's `checker` field names (see `checker.rs`), ready
    /// to judge: `special` and `interactive` compile `checker.cpp`/`.c` or
    /// `interactor.cpp`/`.c` of `testdata` into `cache` (once per testdata
    /// version and source; concurrent callers wait for one compile) as
    /// `slot`. `Err` (the caller marks every case JE with it): a malformed
    /// name, no source, a compile error (the compiler's message).
    pub fn prepare_checker(
        &self,
        job_checker: Option<&str>,
        testdata: &Path,
        cache: &Path,
        slot: &Slot,
    ) -> Result<Checker, String> {
        match checker::parse(job_checker)? {
            Named::Builtin(c) => Ok(c),
            Named::Special => Ok(Checker::Special(self.build_program(testdata, "checker", cache, slot)?)),
            Named::Interactive => Ok(Checker::Interactive(self.build_program(testdata, "interactor", cache, slot)?)),
        }
    }

    /// Compiles `testdata/<stem>.cpp` (or `.c`) into the cache, or finds it there.
    fn build_program(&self, testdata: &Path, stem: &str, cache: &Path, slot: &Slot) -> Result<Program, String> {
        let (source, lang_name) = [("cpp", "cpp17"), ("c", "c11")]
            .iter()
            .map(|(ext, l)| (testdata.join(format!("{stem}.{ext}")), *l))
            .find(|(p, _)| p.is_file())
            .ok_or_else(|| format!("{stem}: no {stem}.cpp or {stem}.c in the testdata"))?;
        let languages = Languages::builtin();
        let lang =
            languages.by_name(lang_name).ok_or_else(|| format!("{stem}: no {lang_name} in the built-in table"))?;
        let binary_name = lang
            .run
            .first()
            .and_then(|r| r.strip_prefix("./"))
            .ok_or_else(|| format!("{stem}: {lang_name} does not run ./BINARY"))?
            .to_string();
        let code = std::fs::read(&source).map_err(|e| format!("{stem}: {}: {e}", source.display()))?;
        // Headers shipped beside it (testlib.h), in name order.
        let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
        for entry in std::fs::read_dir(testdata).map_err(|e| format!("{stem}: {}: {e}", testdata.display()))? {
            let entry = entry.map_err(|e| format!("{stem}: {e}"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if (name.ends_with(".h") || name.ends_with(".hpp")) && entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).map_err(|e| format!("{stem}: {name}: {e}"))?;
                headers.push((name, bytes));
            }
        }
        headers.sort();
        let key = cache_key(&[
            testdata.as_os_str().as_encoded_bytes(),
            stem.as_bytes(),
            &code,
            &serde_json::to_vec(&(&lang.compile, &headers)).unwrap_or_default(),
        ]);
        let fail = |what: &str, e: std::io::Error| format!("{stem}: {what}: {e}");
        std::fs::create_dir_all(cache).map_err(|e| fail(&cache.display().to_string(), e))?;
        set_mode(cache, 0o711).map_err(|e| fail("cache", e))?;
        program_cache::prune(cache, program_cache::KEEP);
        let _lookup = program_cache::enter(cache).map_err(|e| fail("locking the cache", e))?;
        let _lock = lock_file(&cache.join(format!("{key}.lock"))).map_err(|e| fail("locking the cache", e))?;
        let dir = cache.join(&key);
        let binary = dir.join(&binary_name);
        if binary.is_file() {
            program_cache::touch(&dir);
            return Ok(Program::new(binary));
        }
        let build = cache.join(format!("{key}.build"));
        let _ = std::fs::remove_dir_all(&build);
        std::fs::create_dir(&build).map_err(|e| fail("build directory", e))?;
        let written = (|| {
            std::fs::write(build.join(&lang.source), &code)?;
            for (name, bytes) in &headers {
                std::fs::write(build.join(name), bytes)?;
            }
            Ok::<_, std::io::Error>(())
        })();
        written.map_err(|e| fail("build directory", e))?;
        let work = Workspace::stage(&build).map_err(|e| fail("build directory", e))?;
        let result = match self.compile(lang, &work, slot) {
            Compiled::Ready => (|| {
                // Only the binary is kept: the runs must not read the source.
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir(&dir)?;
                std::fs::copy(work.path().join(&binary_name), &binary)?;
                set_mode(&binary, 0o755)?;
                set_mode(&dir, 0o755)
            })()
            .map_err(|e| fail("caching the binary", e)),
            Compiled::Failed { message } => Err(format!("{stem} does not compile: {message}")),
            Compiled::JudgeError(why) => Err(format!("{stem}: {why}")),
        };
        let _ = std::fs::remove_dir_all(&build);
        result.map(|()| Program::new(binary))
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
    pub fn compile(&self, lang: &Language, src: &Workspace, slot: &Slot) -> Compiled {
        let src_dir = src.path();
        let source = src_dir.join(&lang.source);
        if !source.is_file() {
            return Compiled::JudgeError(format!("{} is missing", source.display()));
        }
        if let Some(why) = lang.cannot_judge() {
            return Compiled::JudgeError(why);
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
                binds: vec![Bind::at(src_dir, SRC, true)],
            },
            _ => return Compiled::JudgeError("cannot open the compiler's stdio".into()),
        };
        let usage = match sandbox::run(spec) {
            Ok(u) => u,
            Err(e) => return Compiled::JudgeError(format!("compiler: {e}")),
        };
        let said = log.rewind().map(|_| read_capped(&mut log, self.output_cap)).unwrap_or_default();
        let said_bytes = log.metadata().map(|m| m.len()).unwrap_or(0);
        let Some(failed) = verdict::compile_failure(&usage, &limits, &said, said_bytes) else { return Compiled::Ready };
        let why = failed.why;
        // The limit's name must fit: the compiler's words are cut first.
        let message = match (said.trim().is_empty(), failed.limit) {
            (true, _) => why,
            (false, false) => said,
            (false, true) => {
                let room = self.output_cap.saturating_sub(why.len() + 1);
                format!("{}\n{why}", cap_string(said.trim_end().to_string(), room))
            }
        };
        Compiled::Failed { message }
    }

    /// Runs one case with the judge's checker: see [`Judge::run_case_with`].
    #[allow(clippy::too_many_arguments)]
    pub fn run_case(
        &self,
        lang: &Language,
        src: &Workspace,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
    ) -> CaseResult {
        self.run_case_with(lang, src, input, answer, task, slot, scratch, self.checker)
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
        src: &Workspace,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
        checker: Checker,
    ) -> CaseResult {
        self.run_case_detailed(lang, src, input, answer, task, slot, scratch, checker).result
    }

    /// [`Judge::run_case_with`], also telling which limit stopped the program.
    #[allow(clippy::too_many_arguments)]
    pub fn run_case_detailed(
        &self,
        lang: &Language,
        src: &Workspace,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
        checker: Checker,
    ) -> CaseRun {
        let src_dir = src.path();
        let je = |why: &str| CaseRun { result: CaseResult::judge_error(why), limit: None };
        match checker {
            Checker::Interactive(p) => {
                return self.run_interactive(lang, src_dir, input, answer, task, slot, scratch, p)
            }
            Checker::Unprepared => return je(&Checker::Unprepared.check(&b""[..], &b""[..]).unwrap_err().to_string()),
            _ => {}
        }
        let identity = slot.identity();
        let opened = (|| {
            set_mode(src_dir, 0o755)?;
            if let Some(id) = identity {
                std::os::unix::fs::chown(scratch, Some(id.uid), Some(id.gid))?;
            }
            let stdin = File::open(input).map_err(|e| annotate(e, input))?;
            let (stdout, stderr) = (scratch.join("stdout"), scratch.join("stderr"));
            Ok::<_, std::io::Error>((stdin, run_output(&stdout, identity)?, run_output(&stderr, identity)?))
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
            binds: vec![Bind::at(src_dir, SRC, false)],
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
            None => match checker {
                Checker::Special(p) => match self.run_checker(p, input, &mut stdout, answer, slot, scratch) {
                    Ok(s) => s,
                    Err(e) => return je(&e),
                },
                _ => match checker.check_output(&mut stdout, answer) {
                    Ok(true) => Status::AC,
                    Ok(false) => Status::WA,
                    Err(e) => return je(&format!("checker: {e}")),
                },
            },
        };
        let capped = |f: &mut File| f.rewind().map(|_| read_capped(f, self.output_cap)).unwrap_or_default();
        let (out, err) = (capped(&mut stdout), capped(&mut stderr));
        self.finish(status, &usage, out, err)
    }
}

/// One case of a job, for [`Judge::run_cases`].
#[derive(Clone, Debug)]
pub struct Case {
    /// Task and case index.
    pub task: usize,
    pub case: usize,
    pub input: PathBuf,
    pub answer: PathBuf,
}

impl Judge {
    /// Runs `cases` of one compiled submission (`tasks` gives their limits)
    /// on the claim's own slot and on whatever idle slots `pool` lends, side
    /// by side, each slot in its own scratch directory below `scratch`
    /// (`slot-<uid>`, reused from case to case); `record` gets each result
    /// (and which limit stopped the program), in this thread, as it comes, and
    /// stops the job by returning false (the cases already running finish,
    /// unrecorded). A borrowed slot goes back after its case as soon as
    /// another claim waits for one ([`SlotPool`]).
    #[allow(clippy::too_many_arguments)]
    pub fn run_cases(
        &self,
        lang: &Language,
        src: &Workspace,
        tasks: &[Task],
        checker: Checker,
        cases: &[Case],
        scratch: &Path,
        own: &Slot,
        pool: Option<&SlotPool>,
        mut record: impl FnMut(&Case, CaseRun) -> bool,
    ) {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let (next, stop) = (AtomicUsize::new(0), AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<(usize, CaseRun)>();
        /// Gives a borrowed slot back however its thread ends (a panic too).
        struct Borrowed<'p>(Option<(usize, &'p SlotPool)>);
        impl Drop for Borrowed<'_> {
            fn drop(&mut self) {
                if let Some((i, pool)) = self.0 {
                    pool.give(i);
                }
            }
        }
        let work = |slot: Slot, lent: Option<usize>, tx: std::sync::mpsc::Sender<(usize, CaseRun)>| {
            let _borrowed = Borrowed(lent.zip(pool));
            let dir = scratch.join(format!("slot-{}", slot.uid));
            let made = std::fs::create_dir_all(&dir);
            while !stop.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = cases.get(i) else { break };
                // What the last case left there (its TMPDIR at the basic level) goes.
                let made = made.as_ref().map_err(|e| e.to_string()).and_then(|()| clear_scratch(&dir));
                let je = |why: &str| CaseRun { result: CaseResult::judge_error(why), limit: None };
                let r = match (&made, tasks.get(c.task)) {
                    (Ok(()), Some(task)) => {
                        self.run_case_detailed(lang, src, &c.input, &c.answer, task, &slot, &dir, checker)
                    }
                    (Err(e), _) => je(&format!("scratch directory: {e}")),
                    (_, None) => je("a case of no task"),
                };
                if tx.send((i, r)).is_err() || (lent.is_some() && pool.is_some_and(|p| p.wanted())) {
                    break;
                }
            }
        };
        std::thread::scope(|s| {
            let mut borrowed = 0;
            while let Some(i) = pool.filter(|_| borrowed + 1 < cases.len()).and_then(|p| p.lend()) {
                let tx = tx.clone();
                let work = &work;
                s.spawn(move || work(Slot::for_index(i), Some(i), tx));
                borrowed += 1;
            }
            let own_tx = tx.clone();
            s.spawn(|| work(*own, None, own_tx));
            drop(tx);
            for (i, r) in rx {
                if !stop.load(Ordering::Relaxed) && !record(&cases[i], r) {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        });
    }
}

impl Judge {
    /// Runs a special checker on a finished case: `checker input output
    /// answer` in `<scratch>.judge/`, as the auxiliary slot. Exit 0 AC, 1 or
    /// 2 WA; `Err` (JE) for anything else, with the checker's stderr.
    fn run_checker(
        &self,
        p: Program,
        input: &Path,
        output: &mut File,
        answer: &Path,
        slot: &Slot,
        scratch: &Path,
    ) -> Result<Status, String> {
        let aux = slot.auxiliary();
        let dir = CheckDir::new(scratch, input, answer).map_err(|e| format!("checker: preparing: {e}"))?;
        let prepared = (|| {
            output.rewind()?;
            let out = dir.path.join("output");
            let mut copy = create_fresh(&out, 0o444)?;
            std::io::copy(output, &mut copy)?;
            let log = create_fresh(&dir.path.join("checker.log"), 0o600)?;
            dir.hand_to(&aux)?;
            Ok::<_, std::io::Error>(log)
        })();
        let mut log = prepared.map_err(|e| format!("checker: preparing: {e}"))?;
        let limits = self.checker_limits(None);
        let arg = |n: &str| dir.path.join(n).to_string_lossy().into_owned();
        let spec = sandbox::Spec {
            argv: vec![p.binary.to_string_lossy().into_owned(), arg("input"), arg("output"), arg("answer")],
            cwd: dir.path.clone(),
            env: environment(&dir.path, if jailed(aux.identity()) { Path::new("/tmp") } else { &dir.path }),
            stdin: File::open("/dev/null").map_err(|e| format!("checker: {e}"))?,
            stdout: log.try_clone().map_err(|e| format!("checker: {e}"))?,
            stderr: log.try_clone().map_err(|e| format!("checker: {e}"))?,
            identity: aux.identity(),
            limits: limits.clone(),
            binds: vec![Bind::at(&dir.path, CHECK_DIR, false), Bind::at(p.dir(), CHECKER_DIR, false)],
        };
        let usage = sandbox::run(spec).map_err(|e| format!("checker: {e}"))?;
        let said = log.rewind().map(|_| read_capped(&mut log, self.output_cap)).unwrap_or_default();
        program_verdict("checker", &usage, &said, self.output_cap)
    }

    /// An interactive case: the program and the interactor at once, each
    /// sandboxed as its own slot (the program as `slot`, the interactor as
    /// [`Slot::auxiliary`]), connected by two pipes. The program's own
    /// TLE/MLE/OLE wins; its RE too, except after the interactor's WA when
    /// it died of `SIGPIPE` (WA) and when the interactor failed (JE);
    /// otherwise the interactor's exit decides: 0 AC, 1 or 2 WA, else JE.
    #[allow(clippy::too_many_arguments)]
    fn run_interactive(
        &self,
        lang: &Language,
        src_dir: &Path,
        input: &Path,
        answer: &Path,
        task: &Task,
        slot: &Slot,
        scratch: &Path,
        p: Program,
    ) -> CaseRun {
        let je = |why: &str| CaseRun { result: CaseResult::judge_error(why), limit: None };
        let identity = slot.identity();
        let aux = slot.auxiliary();
        let opened = (|| {
            set_mode(src_dir, 0o755)?;
            if let Some(id) = identity {
                std::os::unix::fs::chown(scratch, Some(id.uid), Some(id.gid))?;
            }
            let stderr = run_output(&scratch.join("stderr"), identity)?;
            let dir = CheckDir::new(scratch, input, answer)?;
            let log = create_fresh(&dir.path.join("interactor.log"), 0o600)?;
            dir.hand_to(&aux)?;
            // Interactor -> program, program -> interactor.
            let (to_prog_r, to_prog_w) = crate::sandbox::streams::pipe()?;
            let (from_prog_r, from_prog_w) = crate::sandbox::streams::pipe()?;
            Ok::<_, std::io::Error>((stderr, dir, log, [to_prog_r, to_prog_w, from_prog_r, from_prog_w]))
        })();
        let (mut stderr, dir, mut log, [to_prog_r, to_prog_w, from_prog_r, from_prog_w]) = match opened {
            Ok(x) => x,
            Err(e) => return je(&format!("preparing the case: {e}")),
        };
        let limits = self.case_limits(lang, task);
        let ilimits = self.checker_limits(Some(limits.wall));
        let (err_w, log_w1, log_w2) = match (stderr.try_clone(), log.try_clone(), log.try_clone()) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            _ => return je("cannot duplicate the output files"),
        };
        let program = sandbox::Spec {
            argv: lang.run.clone(),
            cwd: src_dir.to_path_buf(),
            env: environment(src_dir, if jailed(identity) { Path::new("/tmp") } else { scratch }),
            stdin: to_prog_r,
            stdout: from_prog_w,
            stderr: err_w,
            identity,
            limits: limits.clone(),
            binds: vec![Bind::at(src_dir, SRC, false)],
        };
        let arg = |n: &str| dir.path.join(n).to_string_lossy().into_owned();
        let interactor = sandbox::Spec {
            argv: vec![p.binary.to_string_lossy().into_owned(), arg("input"), arg("output"), arg("answer")],
            cwd: dir.path.clone(),
            env: environment(&dir.path, if jailed(aux.identity()) { Path::new("/tmp") } else { &dir.path }),
            stdin: from_prog_r,
            stdout: to_prog_w,
            stderr: log_w1,
            identity: aux.identity(),
            limits: ilimits,
            binds: vec![Bind::at(&dir.path, CHECK_DIR, true), Bind::at(p.dir(), CHECKER_DIR, false)],
        };
        drop(log_w2);
        // Each run holds its pipe ends until it returns: the other side sees
        // EOF once a side has ended.
        let (usage, iusage) = std::thread::scope(|s| {
            let prog = s.spawn(|| sandbox::run(program));
            let i = sandbox::run(interactor);
            (prog.join().unwrap_or_else(|_| Err("the program's run panicked".into())), i)
        });
        let usage = match usage {
            Ok(u) => u,
            Err(e) => return je(&e),
        };
        let said = log.rewind().map(|_| read_capped(&mut log, self.output_cap)).unwrap_or_default();
        let interactor_verdict = match iusage {
            Ok(u) => program_verdict("interactor", &u, &said, self.output_cap),
            Err(e) => Err(format!("interactor: {e}")),
        };
        drop(dir);
        let size = |f: &File| f.metadata().map(|m| m.len()).unwrap_or(0);
        let own = verdict::decide(&usage, &limits, size(&stderr));
        let sigpipe = usage.exit == sandbox::Exit::Signal(libc::SIGPIPE) && usage.denied.is_none();
        let status = match (own, interactor_verdict) {
            (Some(Status::RE), Ok(Status::WA)) if sigpipe => Status::WA,
            // A failed interactor (testlib's _fail) is the judge's fault even
            // when the program then failed for want of a dialogue.
            (Some(Status::RE), Err(e)) => return je(&e),
            (Some(s), _) => s,
            (None, Ok(s)) => s,
            (None, Err(e)) => return je(&e),
        };
        let capped = |f: &mut File| f.rewind().map(|_| read_capped(f, self.output_cap)).unwrap_or_default();
        let stderr = capped(&mut stderr);
        self.finish(status, &usage, String::new(), stderr)
    }

    /// The case's result from the program's usage and its (capped) streams.
    fn finish(&self, status: Status, usage: &sandbox::Usage, stdout: String, mut stderr: String) -> CaseRun {
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
            stdout,
            stderr,
        };
        CaseRun { result, limit }
    }
}

/// A checker program's verdict (testlib's exit codes): 0 AC, 1 (WA) or 2
/// (PE) WA; `Err` for any other exit, a signal or a limit, with what it said.
fn program_verdict(what: &str, usage: &sandbox::Usage, said: &str, cap: usize) -> Result<Status, String> {
    let why = match (usage.fired, &usage.denied, usage.exit) {
        (None, None, sandbox::Exit::Code(0)) => return Ok(Status::AC),
        (None, None, sandbox::Exit::Code(1 | 2)) => return Ok(Status::WA),
        (Some(f), _, _) => format!("{what} exceeded its {} limit", f.as_str()),
        (None, Some(call), _) => format!("{what}: system call {call} denied by the sandbox"),
        (None, None, sandbox::Exit::Code(c)) => format!("{what} failed (exit {c})"),
        (None, None, sandbox::Exit::Signal(s)) => format!("{what} died of signal {s}"),
    };
    let said = said.trim_end();
    Err(cap_string(if said.is_empty() { why } else { format!("{why}: {said}") }, cap))
}

/// `<scratch>.judge/`: what a checker or interactor may see of one case.
/// Removed on drop.
struct CheckDir {
    path: PathBuf,
}

impl CheckDir {
    /// Makes the directory (root's, 0700) with copies of the input and the
    /// answer (0444).
    fn new(scratch: &Path, input: &Path, answer: &Path) -> std::io::Result<CheckDir> {
        let mut name = scratch.file_name().unwrap_or_default().to_os_string();
        name.push(".judge");
        let path = scratch.with_file_name(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).map_err(|e| annotate(e, &path))?,
            Ok(_) => std::fs::remove_file(&path).map_err(|e| annotate(e, &path))?,
            Err(_) => {}
        }
        std::fs::DirBuilder::new().mode(0o700).create(&path).map_err(|e| annotate(e, &path))?;
        let dir = CheckDir { path };
        for (from, to) in [(input, "input"), (answer, "answer")] {
            let mut src = File::open(from).map_err(|e| annotate(e, from))?;
            let mut dst = create_fresh(&dir.path.join(to), 0o444)?;
            std::io::copy(&mut src, &mut dst).map_err(|e| annotate(e, from))?;
        }
        Ok(dir)
    }

    /// Gives the directory (not the files in it) to the run's slot.
    fn hand_to(&self, slot: &Slot) -> std::io::Result<()> {
        if let Some(id) = slot.identity() {
            std::os::unix::fs::chown(&self.path, Some(id.uid), Some(id.gid)).map_err(|e| annotate(e, &self.path))?;
        }
        Ok(())
    }
}

impl Drop for CheckDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Opens (creating, root only) and `flock`s `p`; unlocked when dropped.
fn lock_file(p: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .map_err(|e| annotate(e, p))?;
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(f)
}

/// 128 bits (hex) of two differently seeded hashes of `parts`: a cache key.
/// (SipHash with fixed keys: stable within a build; a new Rust may change
/// it, which only costs a recompile.)
fn cache_key(parts: &[&[u8]]) -> String {
    use std::hash::{Hash, Hasher};
    let mut out = String::new();
    for seed in [0u8, 1] {
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(0x6f6a_7275_6e6e_6572, seed as u64);
        for p in parts {
            p.hash(&mut h);
        }
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
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

/// Empties a slot's scratch directory but for the output files the judge
/// reuses (see [`create_fresh`]).
fn clear_scratch(dir: &Path) -> Result<(), String> {
    for e in std::fs::read_dir(dir).map_err(|e| annotate(e, dir).to_string())?.flatten() {
        if e.file_name() == "stdout" || e.file_name() == "stderr" {
            continue;
        }
        let p = e.path();
        let gone = match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        gone.map_err(|e| annotate(e, &p).to_string())?;
    }
    Ok(())
}

/// A run's stdout or stderr file (see [`create_fresh`]): root's alone. The
/// program never gets it: it writes to a pipe the judge copies into it
/// (`streams.rs`), and opens that pipe by name (`/dev/stdout`) if it likes.
fn run_output(p: &Path, identity: Option<Identity>) -> std::io::Result<File> {
    create_fresh(p, if identity.is_some() { 0o600 } else { 0o644 })
}

/// Creates `p` anew, never through a link a judged program may have left.
fn create_fresh(p: &Path, mode: u32) -> std::io::Result<File> {
    // The last case's file, when it is still the judge's own (root's, a
    // regular file, one link: not swapped or linked by the program), is
    // emptied and reused: allocating a new inode per case on ext4 cost as
    // much CPU as the run itself.
    use std::os::unix::fs::MetadataExt;
    // (Opened read-write, a FIFO put in its place does not block.)
    let reuse = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOFOLLOW).open(p);
    if let Ok(f) = reuse {
        let ours = f.metadata().is_ok_and(|m| {
            m.is_file() && m.uid() == unsafe { libc::geteuid() } && m.nlink() == 1 && m.mode() & 0o7777 == mode
        });
        if ours && f.set_len(0).is_ok() {
            return Ok(f);
        }
    }
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(annotate(e, p)),
        _ => {}
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(p)
        .map_err(|e| annotate(e, p))?;
    // Exactly `mode`, whatever the umask took off: the next case reuses
    // only a file whose mode is still this.
    if f.metadata().map_err(|e| annotate(e, p))?.mode() & 0o7777 != mode {
        f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| annotate(e, p))?;
    }
    Ok(f)
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
    use crate::sandbox::slot::is_root;

    #[test]
    fn a_fresh_file_reuses_only_the_judges_own_and_never_truncates_through_a_link() {
        use std::io::Write;
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("ojfresh-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join("stdout");
        // The judge's own file from the last case: same inode, emptied.
        let mut f = create_fresh(&out, 0o644).unwrap();
        f.write_all(b"last case").unwrap();
        let inode = f.metadata().unwrap().ino();
        let f = create_fresh(&out, 0o644).unwrap();
        assert_eq!((f.metadata().unwrap().ino(), f.metadata().unwrap().len()), (inode, 0));
        // A second link to it (to the answer, say): left whole, a new file made.
        let answer = dir.join("answer");
        std::fs::write(&answer, "42\n").unwrap();
        std::fs::set_permissions(&answer, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::remove_file(&out).unwrap();
        std::fs::hard_link(&answer, &out).unwrap();
        let f = create_fresh(&out, 0o644).unwrap();
        assert_ne!(f.metadata().unwrap().ino(), std::fs::metadata(&answer).unwrap().ino());
        assert_eq!(std::fs::read_to_string(&answer).unwrap(), "42\n");
        // A symbolic link: not followed.
        std::fs::remove_file(&out).unwrap();
        std::os::unix::fs::symlink(&answer, &out).unwrap();
        create_fresh(&out, 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&answer).unwrap(), "42\n");
        assert!(!std::fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_slots_scratch_is_emptied_between_cases_but_for_the_output_files() {
        let dir = std::env::temp_dir().join(format!("ojclear-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("left/deeper")).unwrap();
        for f in ["stdout", "stderr", "left/deeper/file", "junk"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        if is_root() {
            // A directory the program locked itself out of: root removes it all the same.
            std::fs::set_permissions(dir.join("left"), std::fs::Permissions::from_mode(0o000)).unwrap();
        }
        clear_scratch(&dir).unwrap();
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["stderr", "stdout"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
            let base = slot_uid_base();
            assert_eq!(Slot::for_index(3), Slot { uid: base + 3, gid: base + 3 });
            assert_eq!(Slot::for_index(3).auxiliary(), Slot { uid: base + 1003, gid: base + 1003 });
            assert!(Slot::for_index(0).identity().is_some());
        } else {
            assert!(Slot::for_index(3).identity().is_none());
        }
        assert!(Slot { uid: 0, gid: 0 }.identity().is_none());
        assert_eq!(parse_slot_uid_base("70000"), Ok(70000));
        assert!(parse_slot_uid_base("12").is_err() && parse_slot_uid_base("x").is_err());
    }
}
