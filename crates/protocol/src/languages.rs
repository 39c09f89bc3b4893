//! The language table's format: what `etc/languages.json` may say, read
//! and checked alike by the runner (which compiles and runs by it,
//! `ojrunner::language`) and the hub (`hubd submit --language`, and the
//! file name of a code zip). One table, one reader: a language is added by
//! one row in `etc/languages.json` and its line in ojrunner-languages(5).
//!
//! A job names its language by number (`"language": 0`); ids 0, 1 and 2 are
//! Normal-OJ's (c11, cpp17, python3), further ids are ojrunner's own. The
//! table is compiled in ([`Languages::builtin`]) so that neither side needs
//! the file.
//!
//! # File format (`etc/languages.json`)
//!
//! ```json
//! {
//!   "notes": ["free text, ignored"],
//!   "languages": [
//!     {"id": 0, "name": "c11", "source": "main.c",
//!      "compile": ["/usr/bin/gcc", "-O2", "main.c", "-o", "main"],
//!      "run": ["./main"],
//!      "processes": 16, "limit_address_space": true, "note": "ignored"}
//!   ]
//! }
//! ```
//!
//! | key | meaning |
//! |---|---|
//! | `id` | the number jobs use (unique) |
//! | `name` | the name people use (`hubd submit --language c11`; unique) |
//! | `source` | the file name the submission is stored under in the source dir (`main.c`) |
//! | `compile` | optional argv, run in the source dir; absent: nothing to compile |
//! | `run` | argv, run in the source dir; a leading `./` means "in the source dir" |
//! | `entry` | optional: how the program's entry point is found in the source before the compile ([`EntryFinder`]; `"java_class"`) |
//! | `processes` | optional, default 16: processes + threads a run may have (`RLIMIT_NPROC`) |
//! | `limit_address_space` | optional, default true: whether runs and compiles get the `RLIMIT_AS` backstop (the JVM needs it off) |
//! | `note` | optional free text |
//!
//! In `compile` and `run`, [`SOURCE_PLACEHOLDER`] stands for the file the
//! source is compiled under (`source`, unless the entry point needs another
//! name) and [`ENTRY_PLACEHOLDER`] for the entry point (only with `entry`);
//! what they are filled with is the runner's (`ojrunner::language`).
//!
//! Commands use absolute paths: judged programs and compilers run with
//! `PATH=/usr/bin:/bin` as an unprivileged slot uid, so anything under a
//! private home (pyenv's shims, rustup's toolchains under `/root`) is out of
//! reach. That is why rust is Debian's `/usr/bin/rustc`, not rustup's.

use serde::Deserialize;
use std::path::Path;

/// The default number of processes + threads a judged run may have: room for
/// a few helper threads, too few for a fork bomb to matter.
pub const DEFAULT_RUN_PROCESSES: u64 = 16;

/// The placeholders of commands, as they are written in the table.
pub const SOURCE_PLACEHOLDER: &str = "{source}";
pub const ENTRY_PLACEHOLDER: &str = "{entry}";

/// How to build and run one language.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Language {
    pub id: i64,
    pub name: String,
    /// The submission's file name inside the source dir, e.g. `main.c`.
    pub source: String,
    /// The compiler's argv, run in the source dir; `None`: interpreted.
    #[serde(default)]
    pub compile: Option<Vec<String>>,
    /// The program's argv, run in the source dir.
    pub run: Vec<String>,
    /// How the entry point is found in the source; `None`: the language
    /// has none to find (the commands name no `{entry}`).
    #[serde(default)]
    pub entry: Option<EntryFinder>,
    /// `RLIMIT_NPROC` for runs (the slot uid's processes + threads).
    #[serde(default = "default_processes")]
    pub processes: u64,
    /// Whether to set the `RLIMIT_AS` backstop (the runner's
    /// `Judge::case_limits`). Runtimes that reserve far more address space
    /// than they use (the JVM) turn it off and rely on the resident-memory
    /// watchdog alone.
    #[serde(default = "yes")]
    pub limit_address_space: bool,
    /// Free text for people reading the table.
    #[serde(default)]
    pub note: Option<String>,
}

/// How a language's entry point is found in a submission's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryFinder {
    /// The top-level Java class that declares `public static void
    /// main(String[])` (the public one), qualified by its package; the
    /// source is compiled as its public class's file (the runner's
    /// `language/java.rs`).
    JavaClass,
}

impl Language {
    /// The name of the one file of a code zip in this language, as the
    /// protocol names it: `main.<ext>`, the extension `source`'s, in lower
    /// case (`Main.java` is sent as `main.java`; the runner renames it).
    pub fn wire_file(&self) -> String {
        let ext = Path::new(&self.source).extension().and_then(|e| e.to_str()).unwrap_or("txt");
        format!("main.{}", ext.to_ascii_lowercase())
    }
}

fn default_processes() -> u64 {
    DEFAULT_RUN_PROCESSES
}

fn yes() -> bool {
    true
}

/// The whole table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Languages {
    list: Vec<Language>,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    #[allow(dead_code)]
    notes: Vec<String>,
    languages: Vec<Language>,
}

/// The shipped table, compiled in.
const BUILTIN: &str = include_str!("../../../etc/languages.json");

impl Languages {
    /// Reads and checks a table in the format above.
    pub fn load(path: &Path) -> Result<Languages, TableError> {
        let text =
            ojrunner_daemon::user_file::read_user_text(path, ojrunner_daemon::user_file::CONFIG_MAX, "language table")
                .map_err(TableError::Read)?;
        Languages::parse(&text)
    }

    /// The table at `path`, or the built-in one; `Err`: why, naming the
    /// file (`languages FILE: …`).
    pub fn load_or_builtin(path: Option<&Path>) -> Result<Languages, String> {
        match path {
            Some(p) => Languages::load(p).map_err(|e| format!("languages {}: {e}", p.display())),
            None => Ok(Languages::builtin()),
        }
    }

    /// Parses and checks a table from its JSON text.
    pub fn parse(text: &str) -> Result<Languages, TableError> {
        let file: File = serde_json::from_str(text)?;
        let table = Languages { list: file.languages };
        table.validate()?;
        Ok(table)
    }

    /// The table shipped in `etc/languages.json`, compiled in.
    pub fn builtin() -> Languages {
        Languages::parse(BUILTIN).expect("etc/languages.json (compiled in) is valid")
    }

    pub fn by_id(&self, id: i64) -> Option<&Language> {
        self.list.iter().find(|l| l.id == id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Language> {
        self.list.iter().find(|l| l.name == name)
    }

    /// Every language, in table order.
    pub fn all(&self) -> &[Language] {
        &self.list
    }

    /// Every language's name, in table order, joined by `", "`.
    pub fn names(&self) -> String {
        self.list.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    fn validate(&self) -> Result<(), TableError> {
        if self.list.is_empty() {
            return Err(TableError::Empty);
        }
        for (i, l) in self.list.iter().enumerate() {
            if l.name.is_empty() {
                return Err(TableError::EmptyName { index: i });
            }
            let wrong = |problem| TableError::Language { name: l.name.clone(), id: l.id, problem };
            if self.list[..i].iter().any(|o| o.id == l.id) {
                return Err(wrong(Problem::DuplicateId));
            }
            if self.list[..i].iter().any(|o| o.name == l.name) {
                return Err(wrong(Problem::DuplicateName));
            }
            if l.source.is_empty() || l.source.contains('/') || l.source.starts_with('.') {
                return Err(wrong(Problem::Source(l.source.clone())));
            }
            if l.run.first().is_none_or(|p| p.is_empty()) {
                return Err(wrong(Problem::EmptyRun));
            }
            if l.compile.as_ref().is_some_and(|c| c.first().is_none_or(|p| p.is_empty())) {
                return Err(wrong(Problem::EmptyCompile));
            }
            if l.processes == 0 {
                return Err(wrong(Problem::NoProcesses));
            }
            let mut commands = l.compile.iter().flatten().chain(&l.run);
            if l.entry.is_none() && commands.any(|a| a.contains(ENTRY_PLACEHOLDER)) {
                return Err(wrong(Problem::EntryWithoutFinder));
            }
        }
        Ok(())
    }
}

/// Why a language table was refused. Its callers name the file.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("no languages")]
    Empty,
    #[error("language #{index} has an empty name")]
    EmptyName { index: usize },
    #[error("language {name:?} (id {id}): {problem}")]
    Language { name: String, id: i64, problem: Problem },
}

/// What is wrong with one language of a table.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("duplicate id")]
    DuplicateId,
    #[error("duplicate name")]
    DuplicateName,
    #[error("source {0:?} must be a plain file name")]
    Source(String),
    #[error("empty run command")]
    EmptyRun,
    #[error("empty compile command")]
    EmptyCompile,
    #[error("processes must be at least 1")]
    NoProcesses,
    #[error("a command names {{entry}} but the language has no \"entry\" to find it")]
    EntryWithoutFinder,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_table_has_normal_ojs_ids() {
        let t = Languages::builtin();
        assert_eq!(t.by_id(0).unwrap().name, "c11");
        assert_eq!(t.by_id(1).unwrap().name, "cpp17");
        assert_eq!(t.by_id(2).unwrap().name, "python3");
        assert_eq!(t.by_name("python3").unwrap().source, "main.py");
        // python3 is byte-compiled first: a SyntaxError is CE.
        assert!(t.by_id(2).unwrap().compile.as_ref().is_some_and(|c| c.contains(&"py_compile".to_string())));
        assert_eq!(t.by_name("c11").unwrap().processes, DEFAULT_RUN_PROCESSES);
        assert!(t.by_name("c11").unwrap().limit_address_space);
        assert!(t.by_id(42).is_none());
        assert!(t.by_name("cobol").is_none());
    }

    #[test]
    fn the_builtin_table_uses_absolute_commands() {
        for l in Languages::builtin().all() {
            let argv0 = &l.run[0];
            assert!(argv0.starts_with('/') || argv0.starts_with("./"), "{}: {argv0}", l.name);
            if let Some(c) = &l.compile {
                assert!(c[0].starts_with('/'), "{}: {}", l.name, c[0]);
            }
        }
    }

    #[test]
    fn the_file_on_disk_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../etc/languages.json");
        assert_eq!(Languages::load(&path).unwrap(), Languages::builtin());
        assert!(matches!(Languages::load(Path::new("/nonexistent/languages.json")), Err(TableError::Read(_))));
        let why = Languages::load_or_builtin(Some(Path::new("/nonexistent/languages.json"))).unwrap_err();
        assert!(why.starts_with("languages /nonexistent/languages.json: "), "{why}");
        assert_eq!(Languages::load_or_builtin(None).unwrap(), Languages::builtin());
    }

    #[test]
    fn a_code_zip_names_its_file_main_dot_the_sources_extension() {
        let t = Languages::builtin();
        let wire: Vec<String> = t.all().iter().map(Language::wire_file).collect();
        assert_eq!(wire, ["main.c", "main.cpp", "main.py", "main.cpp", "main.rs", "main.java"]);
        assert_eq!(t.names(), "c11, cpp17, python3, cpp20, rust, java");
    }

    #[test]
    fn bad_tables_are_refused() {
        let entry_unfound =
            r#"{"languages": [{"id": 0, "name": "j", "source": "M.java", "run": ["/usr/bin/java", "{entry}"]}]}"#;
        assert!(Languages::parse(entry_unfound).unwrap_err().to_string().contains("no \"entry\""));
        let unknown_finder =
            r#"{"languages": [{"id": 0, "name": "j", "source": "M.java", "run": ["./m"], "entry": "cobol"}]}"#;
        assert!(Languages::parse(unknown_finder).is_err());
        let one = r#"{"id": 0, "name": "c", "source": "main.c", "run": ["./main"]}"#;
        assert!(Languages::parse(&format!(r#"{{"languages": [{one}]}}"#)).is_ok());
        let dup = format!(r#"{{"languages": [{one}, {one}]}}"#);
        assert!(Languages::parse(&dup).unwrap_err().to_string().contains("duplicate id"));
        assert!(Languages::parse(r#"{"languages": []}"#).is_err());
        let typo = r#"{"languages": [{"id": 0, "name": "c", "source": "main.c", "run": ["./main"], "compiel": []}]}"#;
        assert!(Languages::parse(typo).is_err());
        let empty_run = r#"{"languages": [{"id": 0, "name": "c", "source": "main.c", "run": []}]}"#;
        assert!(Languages::parse(empty_run).unwrap_err().to_string().contains("empty run"));
        let bad_source = r#"{"languages": [{"id": 0, "name": "c", "source": "../x.c", "run": ["./main"]}]}"#;
        assert!(Languages::parse(bad_source).unwrap_err().to_string().contains("plain file name"));
    }
}
