//! The compile: once per submission (and per checker program), as the
//! slot, in the submission's [`Workspace`], which the compiler may write to
//! and which is taken back afterwards (see "Files and owners" in [the module
//! doc](super)).

use super::capped::{cap_string, read_back};
use super::files::{create_fresh, own_tree, set_mode};
use super::spec::RunSpec;
use super::{Compiled, Judge, Slot, SRC};
use crate::language::Language;
use crate::sandbox::{self, Bind, Identity};
use crate::verdict;
use crate::workspace::Workspace;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

impl Judge {
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
        let run = RunSpec::new(argv.to_vec(), identity, limits.clone(), Bind::at(src_dir, SRC, true));
        let Ok(spec) = run.logged(&log) else { return Compiled::JudgeError("cannot open the compiler's stdio".into()) };
        let usage = match sandbox::run(spec) {
            Ok(u) => u,
            Err(e) => return Compiled::JudgeError(format!("compiler: {e}")),
        };
        let said = read_back(&mut log, self.output_cap);
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
}
