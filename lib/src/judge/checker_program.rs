//! Checker programs (special judges, interactors): compiled from the
//! testdata once per testdata version into the checkers' cache, and found
//! there by the next job (see "Checker programs" in [the module doc](super)).

use super::files::set_mode;
use super::{Compiled, Judge, Slot};
use crate::checker::{self, Checker, Named, Program, Validator};
use crate::language::Languages;
use crate::program_cache;
use crate::workspace::Workspace;
use ojrunner_daemon::lock;
use std::path::Path;

/// Where an ICPC validator's source is in the testdata (`.cpp` or `.c`),
/// and its arguments (`validator_flags`), as `icpc.rs` lays a package out.
pub const ICPC_VALIDATOR: &str = ojrunner_protocol::icpc::VALIDATOR_STEM;
pub const ICPC_FLAGS: &str = ojrunner_protocol::icpc::FLAGS_FILE;

/// The most a validator's flags file holds.
const FLAGS_MAX: u64 = 64 << 10;

impl Judge {
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
    ) -> Result<Checker, PrepareError> {
        match checker::parse(job_checker)? {
            Named::Builtin(c) => Ok(c),
            Named::Special => Ok(Checker::Special(self.build_program(testdata, "checker", cache, slot)?)),
            Named::Interactive => Ok(Checker::Interactive(self.build_program(testdata, "interactor", cache, slot)?)),
            Named::Icpc => Ok(Checker::Icpc(self.build_validator(testdata, cache, slot)?)),
            Named::IcpcInteractive => Ok(Checker::IcpcInteractive(self.build_validator(testdata, cache, slot)?)),
        }
    }

    /// An ICPC validator: `icpc/validator.cpp` (or `.c`) compiled, and its
    /// arguments, `icpc/validator_flags` split at white space (none when
    /// there is no such file).
    fn build_validator(&self, testdata: &Path, cache: &Path, slot: &Slot) -> Result<Validator, PrepareError> {
        let program = self.build_program(testdata, ICPC_VALIDATOR, cache, slot)?;
        let path = testdata.join(ICPC_FLAGS);
        let flags = match ojrunner_daemon::user_file::read_user_text(&path, FLAGS_MAX, "validator flags") {
            Ok(text) => text.split_whitespace().map(String::from).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(PrepareError::Io { stem: ICPC_VALIDATOR, what: ICPC_FLAGS.into(), source }),
        };
        Ok(Validator { program, flags })
    }

    /// Compiles `testdata/<stem>.cpp` (or `.c`), with the headers beside it,
    /// into the cache, or finds it there.
    fn build_program(
        &self,
        testdata: &Path,
        stem: &'static str,
        cache: &Path,
        slot: &Slot,
    ) -> Result<Program, PrepareError> {
        let fail = |what: &dyn std::fmt::Display| {
            let what = what.to_string();
            move |source| PrepareError::Io { stem, what, source }
        };
        let (source, lang_name) = [("cpp", "cpp17"), ("c", "c11")]
            .iter()
            .map(|(ext, l)| (testdata.join(format!("{stem}.{ext}")), *l))
            .find(|(p, _)| p.is_file())
            .ok_or(PrepareError::NoSource { stem })?;
        let languages = Languages::builtin();
        let lang = languages.by_name(lang_name).ok_or(PrepareError::NoLanguage { stem, lang: lang_name })?;
        let binary_name = lang
            .run
            .first()
            .and_then(|r| r.strip_prefix("./"))
            .ok_or(PrepareError::NoBinary { stem, lang: lang_name })?
            .to_string();
        let code = std::fs::read(&source).map_err(fail(&source.display()))?;
        // Headers shipped beside it (testlib.h), in name order.
        let beside = source.parent().unwrap_or(testdata);
        let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
        for entry in std::fs::read_dir(beside).map_err(fail(&beside.display()))? {
            let entry = entry.map_err(fail(&beside.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if (name.ends_with(".h") || name.ends_with(".hpp")) && entry.file_type().is_ok_and(|t| t.is_file()) {
                let bytes = std::fs::read(entry.path()).map_err(fail(&name))?;
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
        std::fs::create_dir_all(cache).map_err(fail(&cache.display()))?;
        set_mode(cache, 0o711).map_err(fail(&"cache"))?;
        program_cache::prune(cache, program_cache::KEEP);
        let _lookup = program_cache::enter(cache).map_err(fail(&"locking the cache"))?;
        let _lock = lock::exclusive(&cache.join(format!("{key}.lock"))).map_err(fail(&"locking the cache"))?;
        let dir = cache.join(&key);
        let binary = dir.join(&binary_name);
        if binary.is_file() {
            program_cache::touch(&dir);
            return Ok(Program::new(binary));
        }
        let build = cache.join(format!("{key}.build"));
        let _ = std::fs::remove_dir_all(&build);
        std::fs::create_dir(&build).map_err(fail(&"build directory"))?;
        let written = (|| {
            std::fs::write(build.join(&lang.source), &code)?;
            for (name, bytes) in &headers {
                std::fs::write(build.join(name), bytes)?;
            }
            Ok::<_, std::io::Error>(())
        })();
        written.map_err(fail(&"build directory"))?;
        let work = Workspace::stage(&build).map_err(fail(&"build directory"))?;
        let result = match self.compile(lang, &work, slot) {
            Compiled::Ready => (|| {
                // Only the binary is kept: the runs must not read the source.
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir(&dir)?;
                std::fs::copy(work.path().join(&binary_name), &binary)?;
                set_mode(&binary, 0o755)?;
                set_mode(&dir, 0o755)
            })()
            .map_err(fail(&"caching the binary")),
            Compiled::Failed { message } => Err(PrepareError::DoesNotCompile { stem, message }),
            Compiled::JudgeError(why) => Err(PrepareError::Compile { stem, why }),
        };
        let _ = std::fs::remove_dir_all(&build);
        result.map(|()| Program::new(binary))
    }
}

/// Why a job's checker cannot be prepared (its every case is JE with it).
/// `stem` names the program: `checker` or `interactor`.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Name(#[from] checker::BadName),
    #[error("{stem}: no {stem}.cpp or {stem}.c in the testdata")]
    NoSource { stem: &'static str },
    #[error("{stem}: no {lang} in the built-in table")]
    NoLanguage { stem: &'static str, lang: &'static str },
    #[error("{stem}: {lang} does not run ./BINARY")]
    NoBinary { stem: &'static str, lang: &'static str },
    #[error("{stem}: {what}: {source}")]
    Io { stem: &'static str, what: String, source: std::io::Error },
    /// A compile error: the compiler's message.
    #[error("{stem} does not compile: {message}")]
    DoesNotCompile { stem: &'static str, message: String },
    /// The judge could not compile it.
    #[error("{stem}: {why}")]
    Compile { stem: &'static str, why: String },
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
