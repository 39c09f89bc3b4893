//! Problems: a directory turned into what the testdata channel serves (the
//! meta, the zip and their checksum), checked the way Normal-OJ's backend
//! checks an upload, so a runner is never handed a problem the real
//! backend would have refused.

use super::pyjson::Ordered;
use super::{db, Context, Failure};
use md5::{Digest, Md5};
use ojrunner_protocol::Task;
use rusqlite::{params, Connection, OptionalExtension};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A problem as the hub stores and serves it.
#[derive(Debug)]
pub struct Problem {
    /// `{"tasks": [...]}` as `json.dumps` writes it, keys in the file's order.
    pub meta: String,
    pub tasks: Vec<Task>,
    /// The testdata zip (deflate).
    pub testdata: Vec<u8>,
    /// [`md5_hex`] of `testdata ++ meta`, as Normal-OJ's backend computes it.
    pub checksum: String,
}

#[derive(serde::Deserialize)]
struct MetaFile {
    tasks: Vec<Task>,
}

/// Reads a problem directory: `meta.json`, the `TTCC.in`/`TTCC.out` files it
/// implies, and any other files (`include/`, `share/`, `chaos/`, a checker…),
/// all of which go into the zip with their relative paths.
pub fn load_dir(dir: &Path) -> Result<Problem, Failure> {
    let bad = |m: String| Failure::runtime(format!("problem directory {}: {m}", dir.display()));
    let meta_path = dir.join("meta.json");
    let text = std::fs::read_to_string(&meta_path).context(|| format!("reading {}", meta_path.display()))?;
    let typed: MetaFile = serde_json::from_str(&text).map_err(|e| bad(format!("meta.json: {e}")))?;
    let ordered: Ordered = serde_json::from_str(&text).map_err(|e| bad(format!("meta.json: {e}")))?;
    let tasks_value = ordered.get("tasks").cloned().unwrap_or(Ordered::Array(vec![]));
    let meta = Ordered::Object(vec![("tasks".into(), tasks_value)]).dumps();

    let tasks = typed.tasks;
    if tasks.is_empty() {
        return Err(bad("meta.json has no tasks".into()));
    }
    let sum: i64 = tasks.iter().map(|t| t.task_score).sum();
    if sum != 100 {
        return Err(bad(format!("task scores sum to {sum}, not 100")));
    }
    for (t, task) in tasks.iter().enumerate() {
        if task.case_count < 0 || task.task_score < 0 {
            return Err(bad(format!("task {t}: negative caseCount or taskScore")));
        }
        for c in 0..task.case_count {
            for ext in ["in", "out"] {
                let name = format!("{t:02}{c:02}.{ext}");
                if !dir.join(&name).is_file() {
                    return Err(bad(format!("{name} is missing (task {t} has {} cases)", task.case_count)));
                }
            }
        }
    }

    let testdata = zip_dir(dir).context(|| format!("zipping {}", dir.display()))?;
    let checksum = md5_hex(&[testdata.as_slice(), meta.as_bytes()].concat());
    Ok(Problem { meta, tasks, testdata, checksum })
}

/// The MD5 digest of `data` in lowercase hex: the testdata checksum must be
/// the very digest Normal-OJ's backend and runner compute
/// (`hashlib.md5(...).hexdigest()`), so a Python runner's cache agrees with
/// ours. Not for anything secret.
pub fn md5_hex(data: &[u8]) -> String {
    Md5::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Every regular file under `dir` but the top-level `meta.json`, in sorted
/// order with fixed timestamps, so the same files always give the same zip
/// (and so the same checksum).
fn zip_dir(dir: &Path) -> zip::result::ZipResult<Vec<u8>> {
    use zip::write::SimpleFileOptions;
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join(&rel))?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries.into_iter().rev() {
            let path = rel.join(entry.file_name());
            let name = path.to_string_lossy().into_owned();
            let kind = entry.file_type()?; // symlinks are not followed: not regular files
            if kind.is_dir() {
                zip.add_directory(format!("{name}/"), options.unix_permissions(0o755))?;
                stack.push(path);
            } else if kind.is_file() && name != "meta.json" {
                zip.start_file(name, options)?;
                zip.write_all(&std::fs::read(entry.path())?)?;
            }
        }
    }
    Ok(zip.finish()?.into_inner())
}

/// Stores `problem` as `id`, replacing any problem of that id.
pub fn store(conn: &mut Connection, id: i64, problem: &Problem) -> Result<(), Failure> {
    let tx = db::immediate(conn).context(|| format!("storing problem {id}"))?;
    tx.execute(
        "INSERT INTO problems (id, meta, testdata, checksum, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (id) DO UPDATE SET meta = ?2, testdata = ?3, checksum = ?4, updated_at = ?5",
        params![id, problem.meta, problem.testdata, problem.checksum, db::now_ms()],
    )
    .and_then(|_| tx.commit())
    .context(|| format!("storing problem {id}"))
}

/// The stored meta text and checksum of problem `id`.
pub fn meta_and_checksum(conn: &Connection, id: i64) -> rusqlite::Result<Option<(String, String)>> {
    conn.query_row("SELECT meta, checksum FROM problems WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?))).optional()
}

/// The stored testdata zip of problem `id`.
pub fn testdata(conn: &Connection, id: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    conn.query_row("SELECT testdata FROM problems WHERE id = ?1", [id], |r| r.get(0)).optional()
}

/// The tasks of a stored meta text.
pub fn tasks_of(meta: &str) -> Vec<Task> {
    serde_json::from_str::<MetaFile>(meta).map(|m| m.tasks).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_dir(tag: &str, meta: &str, files: &[&str]) -> PathBuf {
        let dir = ojrunner_daemon::test_dir(&format!("hubd-problem-{tag}"));
        std::fs::create_dir_all(dir.join("include")).unwrap();
        std::fs::write(dir.join("meta.json"), meta).unwrap();
        for f in files {
            std::fs::write(dir.join(f), format!("data of {f}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn a_problem_directory_becomes_meta_zip_and_checksum() {
        let meta = r#"{"tasks": [{"timeLimit": 1000, "taskScore": 100, "memoryLimit": 65536, "caseCount": 2}]}"#;
        let dir = problem_dir("ok", meta, &["0000.in", "0000.out", "0001.in", "0001.out", "include/x.h"]);
        let p = load_dir(&dir).unwrap();
        // The file's key order is kept, with Python's separators.
        assert_eq!(
            p.meta,
            r#"{"tasks": [{"timeLimit": 1000, "taskScore": 100, "memoryLimit": 65536, "caseCount": 2}]}"#
        );
        assert_eq!(p.checksum, md5_hex(&[p.testdata.clone(), p.meta.clone().into_bytes()].concat()));
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(p.testdata.clone())).unwrap();
        let mut names: Vec<String> = (0..zip.len()).map(|i| zip.by_index(i).unwrap().name().to_string()).collect();
        names.sort();
        assert_eq!(names, ["0000.in", "0000.out", "0001.in", "0001.out", "include/", "include/x.h"]);
        // The same files give the same bytes.
        assert_eq!(load_dir(&dir).unwrap().checksum, p.checksum);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_cases_and_bad_scores_are_refused() {
        let meta = r#"{"tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 2}]}"#;
        let dir = problem_dir("missing", meta, &["0000.in", "0000.out", "0001.in"]);
        assert!(load_dir(&dir).unwrap_err().to_string().contains("0001.out is missing"));
        let meta = meta.replace("100,", "90,");
        let dir = problem_dir("score", &meta, &["0000.in", "0000.out", "0001.in", "0001.out"]);
        assert!(load_dir(&dir).unwrap_err().to_string().contains("sum to 90"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
