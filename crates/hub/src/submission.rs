//! Submissions: the code to judge, in the language table the hub shares
//! with runners, and the job that judges it (a rejudge is a new job).

use super::{db, queue, Context, Failure};
use rusqlite::{params, Connection, OptionalExtension};
use std::io::Write;
use std::path::Path;

/// Language names, their ids on the wire and the extension of `main.<ext>`.
/// 0–2 are Normal-OJ's; the rest follow the runner's language table.
pub const LANGUAGES: &[(&str, i64, &str)] = &[
    ("c11", 0, "c"),
    ("cpp17", 1, "cpp"),
    ("python3", 2, "py"),
    ("cpp20", 3, "cpp"),
    ("rust", 4, "rs"),
    ("java", 5, "java"),
];

/// A `--language` that is neither a known name nor an integer id.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownLanguage(pub String);

/// Reads `--language`: a name from [`LANGUAGES`] or any integer id.
pub fn parse_language(s: &str) -> Result<i64, UnknownLanguage> {
    if let Ok(id) = s.trim().parse::<i64>() {
        return Ok(id);
    }
    LANGUAGES.iter().find(|(name, _, _)| *name == s).map(|(_, id, _)| *id).ok_or_else(|| {
        let names: Vec<&str> = LANGUAGES.iter().map(|l| l.0).collect();
        UnknownLanguage(format!("unknown language {s:?} (an integer id or one of {})", names.join(", ")))
    })
}

/// The most a source (or a code zip) given to `submit` holds: the hub's
/// largest request body ([`crate::limits::LARGE_BODY`]).
pub const SOURCE_MAX: u64 = crate::limits::LARGE_BODY as u64;

/// The code zip of `file`: a `.zip` is taken as given (tests send hostile
/// ones); anything else becomes the single entry `main.<ext>`, the extension
/// from the language table, or from `file` itself for an id it lacks.
pub fn code_zip(file: &Path, language: i64) -> Result<Vec<u8>, Failure> {
    let bytes = ojrunner_daemon::user_file::read_user_file(file, SOURCE_MAX, "source")
        .context(|| format!("reading {}", file.display()))?;
    let own_ext = file.extension().and_then(|e| e.to_str()).unwrap_or("txt");
    if own_ext.eq_ignore_ascii_case("zip") {
        return Ok(bytes);
    }
    let ext = LANGUAGES.iter().find(|l| l.1 == language).map_or(own_ext, |l| l.2);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file(format!("main.{ext}"), options)
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
    #[test]
    fn languages_are_names_or_integers() {
        assert_eq!(super::parse_language("python3"), Ok(2));
        assert_eq!(super::parse_language("cpp20"), Ok(3));
        assert_eq!(super::parse_language("17"), Ok(17));
        assert!(super::parse_language("cobol").unwrap_err().0.contains("unknown language"));
    }
}
