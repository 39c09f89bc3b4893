//! Every sandboxed run the judge makes (a compile, a case, a checker, an
//! interactor and its program) is described through one [`RunSpec`], so
//! that what a judged program's environment holds, where its `TMPDIR` is and
//! which directories a jail shows are decided here once.

use crate::sandbox::{self, Bind, Identity, Limits};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A run before its stdio is open: `argv`, as whom, under which limits, in
/// which directory. Made into a [`sandbox::Spec`] by [`RunSpec::stdio`] or
/// [`RunSpec::logged`].
pub(super) struct RunSpec {
    argv: Vec<String>,
    identity: Option<Identity>,
    limits: Limits,
    /// The working directory and `HOME`; the first bind.
    dir: PathBuf,
    /// `TMPDIR` when the run is not jailed (a jailed run has a private
    /// `/tmp`); `dir` unless said otherwise.
    tmp: Option<PathBuf>,
    binds: Vec<Bind>,
}

impl RunSpec {
    /// `argv` as `identity` (`None`: as the caller) under `limits`, in the
    /// directory `home` binds: its working directory and `HOME`.
    pub(super) fn new(argv: Vec<String>, identity: Option<Identity>, limits: Limits, home: Bind) -> RunSpec {
        RunSpec { argv, identity, limits, dir: home.path.clone(), tmp: None, binds: vec![home] }
    }

    /// `TMPDIR` at the basic level (not jailed): a case's scratch directory,
    /// which a jailed run does not see.
    pub(super) fn tmp(mut self, dir: &Path) -> RunSpec {
        self.tmp = Some(dir.to_path_buf());
        self
    }

    /// One more host directory the jailed run sees, read-only, at `at`.
    pub(super) fn bind(mut self, dir: &Path, at: &str) -> RunSpec {
        self.binds.push(Bind::at(dir, at, false));
        self
    }

    /// The run, its stdio already open (`streams.rs` seals or pipes them).
    pub(super) fn stdio(self, stdin: File, stdout: File, stderr: File) -> sandbox::Spec {
        let RunSpec { argv, identity, limits, dir, tmp, binds } = self;
        let tmp = if jailed(identity) { PathBuf::from("/tmp") } else { tmp.unwrap_or_else(|| dir.clone()) };
        sandbox::Spec { argv, env: environment(&dir, &tmp), cwd: dir, stdin, stdout, stderr, identity, limits, binds }
    }

    /// The run of a compiler or a checker program: no input, and all it says
    /// (stdout and stderr) to `log`.
    pub(super) fn logged(self, log: &File) -> io::Result<sandbox::Spec> {
        Ok(self.stdio(File::open("/dev/null")?, log.try_clone()?, log.try_clone()?))
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
