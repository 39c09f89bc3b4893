//! The language table, as the runner uses it: the format and its reader
//! are `ojrunner-protocol`'s ([`ojrunner_protocol::languages`], shared with
//! the hub, and re-exported here); what a row's commands mean on this
//! machine is this module's: their placeholders filled for one submission
//! ([`Placeholders`], Java's entry point in `language/java.rs`), and
//! whether their programs are installed ([`Toolchain::missing`]).
//!
//! In `compile` and `run`, `{source}` stands for the file the source is
//! compiled under (`source`, unless the entry point needs another name) and
//! `{entry}` for the entry point (only with `entry`): [`Placeholders`].

pub use ojrunner_protocol::languages::{EntryFinder, Language, Languages, Problem, TableError, DEFAULT_RUN_PROCESSES};
use ojrunner_protocol::languages::{ENTRY_PLACEHOLDER, SOURCE_PLACEHOLDER};

mod java;

/// What `{source}` and `{entry}` stand for in one submission's commands:
/// found in its source before the compile ([`Toolchain::placeholders`]),
/// the same for every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placeholders {
    /// The file the source is compiled under, in the source dir.
    pub source: String,
    /// The entry point; `None`: the language has no [`EntryFinder`].
    pub entry: Option<String>,
}

impl Placeholders {
    /// `argv` with each `{source}` and `{entry}` replaced. `Err`: it names
    /// `{entry}` and there is none (the judge's error: nothing was compiled).
    pub fn fill(&self, argv: &[String]) -> Result<Vec<String>, String> {
        argv.iter()
            .map(|arg| {
                let arg = arg.replace(SOURCE_PLACEHOLDER, &self.source);
                match (&self.entry, arg.contains(ENTRY_PLACEHOLDER)) {
                    (Some(entry), true) => Ok(arg.replace(ENTRY_PLACEHOLDER, entry)),
                    (None, true) => Err(format!("{arg:?} names {ENTRY_PLACEHOLDER}, and no entry point was found")),
                    (_, false) => Ok(arg),
                }
            })
            .collect()
    }
}

/// What a row of the table means on this machine, for one submission: the
/// runner's side of a [`Language`].
pub trait Toolchain {
    /// What the commands' placeholders stand for, given the submission's
    /// source text. `Err`: the source has no entry point the language
    /// needs, and why (a compile error's message).
    fn placeholders(&self, source_text: &str) -> Result<Placeholders, String>;

    /// The placeholders of a submission whose source was never read: only
    /// right for a language without an [`EntryFinder`].
    fn plain_placeholders(&self) -> Placeholders;

    /// The programs of its commands (absolute paths) this machine lacks:
    /// not there, or not executable by others (a slot uid). Empty: it can
    /// be judged here.
    fn missing(&self) -> Vec<String>;

    /// Why a job in this language cannot be judged here, if so: the
    /// language and the programs missing, never a bare JE.
    fn cannot_judge(&self) -> Option<String>;
}

impl Toolchain for Language {
    fn placeholders(&self, source_text: &str) -> Result<Placeholders, String> {
        match self.entry {
            None => Ok(self.plain_placeholders()),
            Some(EntryFinder::JavaClass) => java::find_entry(source_text, &self.source)
                .map(|found| Placeholders { source: found.file, entry: Some(found.class) }),
        }
    }

    fn plain_placeholders(&self) -> Placeholders {
        Placeholders { source: self.source.clone(), entry: None }
    }

    fn missing(&self) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let heads = self.compile.iter().filter_map(|c| c.first()).chain(self.run.first());
        let mut missing: Vec<String> = heads
            .filter(|p| p.starts_with('/'))
            .filter(|p| !std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o001 != 0))
            .cloned()
            .collect();
        missing.dedup();
        missing
    }

    fn cannot_judge(&self) -> Option<String> {
        let missing = self.missing();
        (!missing.is_empty()).then(|| {
            format!(
                "language {} cannot be judged on this runner: {} missing (its toolchain is not installed)",
                self.name,
                missing.join(", ")
            )
        })
    }
}

/// Logs which languages of `table` this machine can judge, and warns of
/// each it cannot and why: said when a runner starts, before a job arrives.
pub fn log_toolchains(table: &Languages) {
    let (ready, not): (Vec<&Language>, Vec<&Language>) = table.all().iter().partition(|l| l.missing().is_empty());
    let names = ready.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(", ");
    log::info!("languages this runner judges: {names}");
    for l in not {
        log::warn!("{}", l.cannot_judge().unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_language_whose_toolchain_is_missing_says_which_program() {
        let t = Languages::parse(
            r#"{"languages": [
                {"id": 7, "name": "ghost", "source": "m.g", "compile": ["/nonexistent/ghostc", "m.g"], "run": ["./m"]},
                {"id": 8, "name": "shell", "source": "m.sh", "run": ["/bin/sh", "m.sh"]}
            ]}"#,
        )
        .unwrap();
        let ghost = t.by_name("ghost").unwrap();
        assert_eq!(ghost.missing(), ["/nonexistent/ghostc"]);
        let why = ghost.cannot_judge().unwrap();
        assert!(why.contains("ghost") && why.contains("/nonexistent/ghostc"), "{why}");
        assert!(t.by_name("shell").unwrap().cannot_judge().is_none());
    }

    #[test]
    fn placeholders_fill_the_commands() {
        let java = Languages::builtin().by_name("java").unwrap().clone();
        assert_eq!(java.entry, Some(EntryFinder::JavaClass));
        let p = java.placeholders("package a.b; public class Foo { public static void main(String[] x) {} }").unwrap();
        assert_eq!(p, Placeholders { source: "Foo.java".into(), entry: Some("a.b.Foo".into()) });
        let compile = p.fill(java.compile.as_ref().unwrap()).unwrap();
        assert_eq!(compile.last().map(String::as_str), Some("Foo.java"), "{compile:?}");
        assert_eq!(p.fill(&java.run).unwrap().last().map(String::as_str), Some("a.b.Foo"));
        assert!(java.placeholders("public class Foo {}").unwrap_err().contains("main"));
        // A language without an entry point keeps its file name and commands.
        let c11 = Languages::builtin().by_name("c11").unwrap().clone();
        let plain = c11.placeholders("int main(void) { return 0; }").unwrap();
        assert_eq!(plain, c11.plain_placeholders());
        assert_eq!(plain.fill(c11.compile.as_ref().unwrap()).unwrap(), *c11.compile.as_ref().unwrap());
        // {entry} with nothing found is the judge's error, named.
        let unfound = java.plain_placeholders().fill(&java.run).unwrap_err();
        assert!(unfound.contains("{entry}"), "{unfound}");
        let inside = Placeholders { source: "s.x".into(), entry: Some("E".into()) };
        assert_eq!(inside.fill(&["-Dmain={entry}@{source}".into()]).unwrap(), ["-Dmain=E@s.x"]);
    }
}
