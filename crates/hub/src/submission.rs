//! Submissions: the code to judge, in the language table the hub shares
//! with runners, and the job that judges it (a rejudge is a new job).

use super::{db, queue, Context, Failure};
use ojrunner_daemon::ExitCode;
use ojrunner_protocol::languages::Languages;
use rusqlite::{params, Connection, OptionalExtension};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The language table `submit` names languages by: the runner's very
/// table and reader ([`ojrunner_protocol::languages`]), and where it came
/// from, to name in an error.
#[derive(Clone, Debug)]
pub struct LanguageTable {
    pub languages: Languages,
    /// The file it was read from; `None`: the built-in copy of
    /// `etc/languages.json`.
    pub path: Option<PathBuf>,
}

impl LanguageTable {
    /// The table at `path` (`--languages`, `OJ_LANGUAGES`), else the
    /// built-in one. `Err`: the file is unreadable or invalid (exit 100).
    pub fn load(path: Option<&Path>) -> Result<LanguageTable, Failure> {
        let languages = Languages::load_or_builtin(path).map_err(Failure::config)?;
        Ok(LanguageTable { languages, path: path.map(Path::to_path_buf) })
    }

    /// The built-in table (the runner's default too).
    pub fn builtin() -> LanguageTable {
        LanguageTable { languages: Languages::builtin(), path: None }
    }

    /// The table, as an error names it.
    pub fn describe(&self) -> String {
        match &self.path {
            Some(p) => format!("the language table {}", p.display()),
            None => "the built-in language table".into(),
        }
    }

    /// Reads `--language`: a name in the table or any integer id (the hub
    /// queues what it is told; a runner refuses an id its table lacks).
    pub fn parse_language(&self, s: &str) -> Result<i64, UnknownLanguage> {
        if let Ok(id) = s.trim().parse::<i64>() {
            return Ok(id);
        }
        self.languages.by_name(s).map(|l| l.id).ok_or_else(|| {
            UnknownLanguage(format!(
                "unknown language {s:?}: an integer id or a name in {} ({})",
                self.describe(),
                self.languages.names()
            ))
        })
    }
}

/// A `--language` that is neither a name in the table nor an integer id.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownLanguage(pub String);

impl From<UnknownLanguage> for Failure {
    /// A usage error (exit 2), as clap's own.
    fn from(e: UnknownLanguage) -> Failure {
        Failure(ExitCode::Usage, e.0)
    }
}

/// The most a source (or a code zip) given to `submit` holds: the hub's
/// largest request body ([`crate::limits::LARGE_BODY`]).
pub const SOURCE_MAX: u64 = crate::limits::LARGE_BODY as u64;

/// The code zip of `file`: a `.zip` is taken as given (tests send hostile
/// ones); anything else becomes the single entry `main.<ext>`, the extension
/// from the language table ([`Language::wire_file`]), or from `file` itself
/// for an id it lacks.
///
/// [`Language::wire_file`]: ojrunner_protocol::languages::Language::wire_file
pub fn code_zip(file: &Path, language: i64, table: &LanguageTable) -> Result<Vec<u8>, Failure> {
    let bytes = ojrunner_daemon::user_file::read_user_file(file, SOURCE_MAX, "source")
        .context(|| format!("reading {}", file.display()))?;
    let own_ext = file.extension().and_then(|e| e.to_str()).unwrap_or("txt");
    if own_ext.eq_ignore_ascii_case("zip") {
        return Ok(bytes);
    }
    let name = table.languages.by_id(language).map_or_else(|| format!("main.{own_ext}"), |l| l.wire_file());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(name, options)
        .and_then(|_| zip.write_all(&bytes).map_err(Into::into))
        .and_then(|_| zip.finish())
        .map(|c| c.into_inner())
        .context(|| format!("zipping {}", file.display()))
}

/// Stores a submission of `code` for `problem` and queues its first job.
/// `raw_job`, when given, is sent verbatim instead of the job payload (see
/// [`queue::payload`]). Returns the submission id.
pub fn submit(
    conn: &mut Connection,
    problem: i64,
    language: i64,
    code: &[u8],
    raw_job: Option<&str>,
) -> Result<String, Failure> {
    let what = || format!("submitting to problem {problem}");
    let tx = db::immediate(conn).context(what)?;
    let known: bool =
        tx.query_row("SELECT EXISTS (SELECT 1 FROM problems WHERE id = ?1)", [problem], |r| r.get(0)).context(what)?;
    if !known {
        return Err(Failure::runtime(format!("no problem {problem}: add it first (hubd problem add)")));
    }
    let seq: i64 = tx
        .query_row("SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'submissions'), 0) + 1", [], |r| {
            r.get(0)
        })
        .context(what)?;
    let id = format!("s{seq:04}");
    tx.execute(
        "INSERT INTO submissions (seq, id, problem_id, language, code, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![seq, id, problem, language, code, db::now_ms()],
    )
    .context(what)?;
    let job = queue::enqueue(&tx, &id, raw_job).context(what)?;
    tx.commit().context(what)?;
    log::info!("submission {id} for problem {problem} (language {language}) queued as job {job}");
    Ok(id)
}

/// Queues a new job for `submission` and makes it current: the old job's
/// result, if one ever comes, is dropped. Returns the new job id.
pub fn rejudge(conn: &mut Connection, submission: &str) -> Result<String, Failure> {
    let what = || format!("rejudging submission {submission}");
    let tx = db::immediate(conn).context(what)?;
    let old: Option<Option<String>> = tx
        .query_row("SELECT current_job FROM submissions WHERE id = ?1", [submission], |r| r.get(0))
        .optional()
        .context(what)?;
    let Some(old) = old else {
        return Err(Failure::runtime(format!("no submission {submission}")));
    };
    let job = queue::enqueue(&tx, submission, None).context(what)?;
    tx.commit().context(what)?;
    log::info!("submission {submission} rejudged: job {job} is current (was {})", old.as_deref().unwrap_or("none"));
    Ok(job)
}

/// The code zip served for `job_id`'s `code_url`.
pub fn code_of_job(conn: &Connection, job_id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.query_row(
        "SELECT s.code FROM jobs j JOIN submissions s ON s.id = j.submission_id WHERE j.id = ?1",
        [job_id],
        |r| r.get(0),
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_names_or_integers() {
        let table = LanguageTable::builtin();
        assert_eq!(table.parse_language("python3"), Ok(2));
        assert_eq!(table.parse_language("cpp20"), Ok(3));
        assert_eq!(table.parse_language("17"), Ok(17));
        let why = table.parse_language("cobol").unwrap_err().0;
        assert!(why.contains("unknown language") && why.contains("built-in language table"), "{why}");
    }

    #[test]
    fn a_table_given_names_its_languages_and_is_named_when_one_is_not_in_it() {
        let dir = ojrunner_daemon::test_dir("hub-languages");
        let path = dir.join("languages.json");
        let cobol = r#"{"id": 9, "name": "cobol", "source": "MAIN.cob", "run": ["/usr/bin/cobc"]}"#;
        std::fs::write(&path, format!(r#"{{"languages": [{cobol}]}}"#)).unwrap();
        let table = LanguageTable::load(Some(&path)).unwrap();
        assert_eq!(table.parse_language("cobol"), Ok(9));
        let why = table.parse_language("c11").unwrap_err().0;
        assert!(why.contains(&path.display().to_string()) && why.contains("cobol"), "{why}");
        // The code zip's file: main.<the source's extension>.
        let src = dir.join("hello.cob");
        std::fs::write(&src, "DISPLAY 'HI'.").unwrap();
        let zip = code_zip(&src, 9, &table).unwrap();
        let archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
        assert_eq!(archive.file_names().collect::<Vec<_>>(), ["main.cob"]);
        let bad = LanguageTable::load(Some(&dir.join("none.json"))).unwrap_err();
        assert_eq!(bad.0, ExitCode::Config);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
