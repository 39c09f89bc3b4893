//! The compile: once per submission (and per checker program), as the
//! slot, in the submission's [`Workspace`], which the compiler may write to
//! and which is taken back afterwards (see "Files and owners" in [the module
//! doc](super)).

use super::capped::{cap_string, read_back};
use super::files::{annotate, create_fresh, own_tree, set_mode};
use super::spec::RunSpec;
use super::{Compiled, Judge, Slot, SRC};
use crate::archive;
use crate::compile_cache::CompileCache;
use crate::language::{Language, Placeholders, Toolchain};
use crate::sandbox::{self, Bind, Identity};
use crate::verdict;
use crate::workspace::Workspace;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

impl Judge {
    /// Compiles `src_dir/<lang.source>` with `lang.compile`, as the slot, in
    /// `src_dir`. Languages without a compile step are `Ready` at once.
    ///
    /// A language with an entry point to find (Java's class) has it found
    /// first, as root: a source without one is CE, saying why; one whose
    /// file must be named otherwise (`public class Foo`: `Foo.java`) is
    /// copied to that name. The workspace keeps what was found, for the
    /// runs' commands.
    pub fn compile(&self, lang: &Language, src: &Workspace, slot: &Slot) -> Compiled {
        self.compile_with(lang, src, slot, None)
    }

    /// [`Judge::compile`], through `cache` when given: a hit copies what
    /// the same compile left before into the workspace, and the compiler
    /// does not run; a miss compiles under the key's lock (a concurrent
    /// claim of the same source waits, then hits) and stores a success.
    pub(super) fn compile_with(
        &self,
        lang: &Language,
        src: &Workspace,
        slot: &Slot,
        cache: Option<&CompileCache>,
    ) -> Compiled {
        let src_dir = src.path();
        let source = src_dir.join(&lang.source);
        if !source.is_file() {
            return Compiled::JudgeError(format!("{} is missing", source.display()));
        }
        if let Some(why) = lang.cannot_judge() {
            return Compiled::JudgeError(why);
        }
        let placeholders = match placeholders_of(lang, src_dir) {
            Ok(Ok(p)) => p,
            Ok(Err(why)) => return Compiled::Failed { message: format!("{}: {why}\n", lang.source) },
            Err(e) => return Compiled::JudgeError(format!("naming the source: {e}")),
        };
        src.found(placeholders.clone());
        let Some(argv) = &lang.compile else { return Compiled::Ready };
        let argv = match placeholders.fill(argv) {
            Ok(argv) => argv,
            Err(why) => return Compiled::JudgeError(format!("the compile command: {why}")),
        };
        let keyed = cache.and_then(|c| CompileCache::key(&lang.name, &argv, src_dir).map(|k| (c, k)));
        let held = match &keyed {
            Some((c, key)) => match c.lock(key) {
                Ok(held) if c.fetch(key, src_dir, &held) => {
                    log::info!("compile cache: hit {} ({}): not compiled", &key[..16], lang.name);
                    return Compiled::Ready;
                }
                Ok(held) => Some(held),
                Err(e) => {
                    log::warn!("compile cache: {}: {e}; compiling without it", c.dir.display());
                    None
                }
            },
            None => None,
        };
        let identity = slot.identity();
        let result = self.compile_as(lang, &argv, &placeholders.source, src_dir, identity);
        if identity.is_some() {
            if let Err(e) = own_tree(src_dir, 0, 0, 0) {
                return Compiled::JudgeError(format!("taking back {}: {e}", src_dir.display()));
            }
        }
        if let (Compiled::Ready, Some((c, key)), Some(held)) = (&result, &keyed, &held) {
            c.store(key, src_dir, held);
        }
        result
    }

    fn compile_as(
        &self,
        lang: &Language,
        argv: &[String],
        source_name: &str,
        src_dir: &Path,
        identity: Option<Identity>,
    ) -> Compiled {
        let prepared = (|| {
            set_mode(src_dir, 0o755)?;
            let source = src_dir.join(source_name);
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

/// The placeholders of the source in `src_dir` (`Ok(Err)`: it has no entry
/// point, and why), with the source copied to the name they give it.
fn placeholders_of(lang: &Language, src_dir: &Path) -> std::io::Result<Result<Placeholders, String>> {
    if lang.entry.is_none() {
        return Ok(Ok(lang.plain_placeholders()));
    }
    let source = src_dir.join(&lang.source);
    // What a runner takes of a job's code, and no more: the scan is linear.
    let mut text = Vec::new();
    let file =
        File::options().read(true).custom_flags(libc::O_NOFOLLOW).open(&source).map_err(|e| annotate(e, &source))?;
    file.take(archive::CODE.max_bytes).read_to_end(&mut text).map_err(|e| annotate(e, &source))?;
    let found = match lang.placeholders(&String::from_utf8_lossy(&text)) {
        Ok(p) => p,
        Err(why) => return Ok(Err(why)),
    };
    if found.source != lang.source {
        let named = src_dir.join(&found.source);
        let mut copy = create_fresh(&named, 0o644)?;
        copy.write_all(&text).map_err(|e| annotate(e, &named))?;
    }
    Ok(Ok(found))
}
