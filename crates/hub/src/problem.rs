//! Problems: a directory turned into what the testdata channel serves (the
//! meta, the zip and their checksum), checked the way Normal-OJ's backend
//! checks an upload, so a runner is never handed a problem the real
//! backend would have refused. An ICPC problem package (a directory with a
//! `problem.yaml`) is mapped to the same first (`ojrunner_protocol::icpc`),
//! and its checker is stored with it.

use super::pyjson::Ordered;
use super::{db, Context, Failure};
use md5::{Digest, Md5};
use ojrunner_protocol::testdata::check_cases;
use ojrunner_protocol::{archive, check_tasks, icpc, Task};

/// The most a problem's `meta.json` holds: what a runner reads of the
/// hub's answer to `meta` (16 MiB).
pub const META_MAX: u64 = 16 << 20;

/// The most one file of a problem holds: what a runner unpacks of a whole
/// testdata zip ([`archive::TESTDATA`]).
pub const FILE_MAX: u64 = archive::TESTDATA.max_bytes;
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
    /// The `checker` of its jobs (`None`: "diff", as Normal-OJ's).
    pub checker: Option<String>,
}

#[derive(serde::Deserialize)]
struct MetaFile {
    tasks: Vec<Task>,
}

/// Reads problem `id` from a directory: `meta.json`, the `TTCC.in`/`TTCC.out`
/// files it implies, and any other files (`include/`, `share/`, `chaos/`, a
/// checker…), all of which go into the zip with their relative paths.
///
/// A problem is refused when a runner would refuse it: its tasks by the
/// protocol's one rule ([`check_tasks`]), its files by unpacking the very
/// zip it would be served as with the runner's own unpacker and checking
/// the cases there. A symbolic link or a special file is refused by name:
/// a zip cannot carry it, so it would silently go missing.
///
/// A directory with a `problem.yaml` is an ICPC problem package instead
/// ([`load_package`]).
pub fn load_dir(id: i64, dir: &Path) -> Result<Problem, Failure> {
    if icpc::is_package(dir) {
        return load_package(id, dir);
    }
    load_layout(id, dir, dir)
}

/// Reads the ICPC problem package in `dir` as problem `id`: mapped to the
/// protocol's layout ([`icpc::read`]) in a scratch directory, which is then
/// read and checked as any problem directory is; its checker is the
/// package's (`icpc`, `icpc-interactive`, `token`, `float:…`).
pub fn load_package(id: i64, dir: &Path) -> Result<Problem, Failure> {
    let bad = |m: String| Failure::runtime(format!("problem {id} ({}): {m}", dir.display()));
    let package = icpc::read(dir, None).map_err(|e| bad(e.to_string()))?;
    let scratch = scratch_dir("hubd-package");
    let loaded = (|| {
        package.lay_out(&scratch).map_err(|e| bad(e.to_string()))?;
        let meta = serde_json::json!({ "tasks": package.tasks }).to_string();
        let meta_path = scratch.join("meta.json");
        std::fs::write(&meta_path, meta).map_err(|e| bad(format!("{}: {e}", meta_path.display())))?;
        load_layout(id, &scratch, dir)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(Problem { checker: Some(package.checker), ..loaded? })
}

/// A fresh path in the temporary directory, tagged `tag`.
fn scratch_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("{tag}-{}-{nanos}", std::process::id()))
}

/// Reads problem `id` from the protocol's layout in `dir`; errors name
/// `shown` (the directory the user named).
fn load_layout(id: i64, dir: &Path, shown: &Path) -> Result<Problem, Failure> {
    let bad = |m: String| Failure::runtime(format!("problem {id} ({}): {m}", shown.display()));
    let meta_path = dir.join("meta.json");
    let text = ojrunner_daemon::user_file::read_user_text(&meta_path, META_MAX, "meta.json")
        .context(|| format!("reading {}", meta_path.display()))?;
    let typed: MetaFile = serde_json::from_str(&text).map_err(|e| bad(format!("meta.json: {e}")))?;
    let ordered: Ordered = serde_json::from_str(&text).map_err(|e| bad(format!("meta.json: {e}")))?;
    let tasks_value = ordered.get("tasks").cloned().unwrap_or(Ordered::Array(vec![]));
    let meta = Ordered::Object(vec![("tasks".into(), tasks_value)]).dumps();
    let tasks = typed.tasks;
    check_tasks(&tasks).map_err(|e| bad(format!("meta.json: {e}")))?;

    let testdata = zip_dir(dir).map_err(|e| bad(e.to_string()))?;
    as_a_runner_unpacks_it(&testdata, &tasks).map_err(|e| bad(format!("a runner would refuse it: {e}")))?;
    let checksum = md5_hex(&[testdata.as_slice(), meta.as_bytes()].concat());
    Ok(Problem { meta, tasks, testdata, checksum, checker: None })
}

/// Unpacks `zip` as a runner does (its bounds, its name and type rules) into
/// a scratch directory, and checks every case is there.
fn as_a_runner_unpacks_it(zip: &[u8], tasks: &[Task]) -> Result<(), String> {
    let scratch = scratch_dir("hubd-problem");
    let result = (|| {
        std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let file = scratch.join("testdata.zip");
        std::fs::write(&file, zip).map_err(|e| format!("{}: {e}", file.display()))?;
        let unpacked = scratch.join("testdata");
        archive::extract(&file, &unpacked, archive::TESTDATA).map_err(|e| e.to_string())?;
        check_cases(&unpacked, tasks).map_err(|e| e.to_string())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
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
/// (and so the same checksum). Anything else but a directory is refused,
/// named by its path in the problem.
fn zip_dir(dir: &Path) -> Result<Vec<u8>, String> {
    use zip::write::SimpleFileOptions;
    let io = |what: &Path, e: &dyn std::fmt::Display| format!("{}: {e}", what.display());
    let options = SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .last_modified_time(zip::DateTime::default())
        .unix_permissions(0o644);
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let mut stack: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries = std::fs::read_dir(&here).and_then(|d| d.collect::<Result<Vec<_>, _>>());
        let mut entries = entries.map_err(|e| io(&here, &e))?;
        entries.sort_by_key(|e| e.file_name());
        for entry in entries.into_iter().rev() {
            let path = rel.join(entry.file_name());
            let name = path.to_string_lossy().into_owned();
            // Not followed: a link would be served as what it points to today.
            let kind = entry.file_type().map_err(|e| io(&path, &e))?;
            if kind.is_dir() {
                zip.add_directory(format!("{name}/"), options.unix_permissions(0o755)).map_err(|e| io(&path, &e))?;
                stack.push(path);
            } else if kind.is_file() {
                if name != "meta.json" {
                    let bytes = ojrunner_daemon::user_file::read_user_file(&entry.path(), FILE_MAX, "testdata file")
                        .map_err(|e| io(&path, &e))?;
                    zip.start_file(name, options)
                        .and_then(|_| Ok(zip.write_all(&bytes)?))
                        .map_err(|e| io(&path, &e))?;
                }
            } else if kind.is_symlink() {
                return Err(format!("{name} is a symbolic link (a runner takes regular files only)"));
            } else {
                return Err(format!("{name} is not a regular file or a directory"));
            }
        }
    }
    Ok(zip.finish().map_err(|e| format!("zipping: {e}"))?.into_inner())
}

/// Stores `problem` as `id`, replacing any problem of that id.
pub fn store(conn: &mut Connection, id: i64, problem: &Problem) -> Result<(), Failure> {
    let tx = db::immediate(conn).context(|| format!("storing problem {id}"))?;
    tx.execute(
        "INSERT INTO problems (id, meta, testdata, checksum, updated_at, checker) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (id) DO UPDATE SET meta = ?2, testdata = ?3, checksum = ?4, updated_at = ?5, checker = ?6",
        params![id, problem.meta, problem.testdata, problem.checksum, db::now_ms(), problem.checker],
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
        let p = load_dir(1, &dir).unwrap();
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
        assert_eq!(load_dir(1, &dir).unwrap().checksum, p.checksum);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn refusal(dir: &Path) -> String {
        load_dir(7, dir).unwrap_err().to_string()
    }

    #[test]
    fn missing_cases_and_bad_scores_are_refused() {
        let meta = r#"{"tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 2}]}"#;
        let dir = problem_dir("missing", meta, &["0000.in", "0000.out", "0001.in"]);
        assert!(refusal(&dir).contains("testdata has no 0001.out"), "{}", refusal(&dir));
        let meta = meta.replace("100,", "90,");
        let dir = problem_dir("score", &meta, &["0000.in", "0000.out", "0001.in", "0001.out"]);
        assert!(refusal(&dir).contains("sum to 90"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Each limit a runner refuses (`check_tasks`) is refused here, naming
    /// the problem: caseCount 0 once passed and made every submission JE.
    #[test]
    fn limits_a_runner_refuses_are_refused_naming_the_problem() {
        let files = ["0000.in", "0000.out"];
        for (tag, task, why) in [
            ("cases0", r#""caseCount": 0, "timeLimit": 1000, "memoryLimit": 65536"#, "caseCount 0"),
            ("tneg", r#""caseCount": 1, "timeLimit": -5, "memoryLimit": 65536"#, "timeLimit -5"),
            ("thuge", r#""caseCount": 1, "timeLimit": 1000000000000, "memoryLimit": 65536"#, "timeLimit 1000000000000"),
            ("mem0", r#""caseCount": 1, "timeLimit": 1000, "memoryLimit": 0"#, "memoryLimit 0"),
        ] {
            let dir = problem_dir(tag, &format!(r#"{{"tasks": [{{"taskScore": 100, {task}}}]}}"#), &files);
            let msg = refusal(&dir);
            assert!(msg.starts_with("problem 7 ") && msg.contains(why), "{tag}: {msg}");
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// A case file that is a link passed `is_file` but was left out of the
    /// zip: every submission then ended JE at the runner.
    #[test]
    fn links_and_special_files_are_refused_by_name() {
        let meta = r#"{"tasks": [{"taskScore": 100, "memoryLimit": 65536, "timeLimit": 1000, "caseCount": 1}]}"#;
        let dir = problem_dir("link", meta, &["0000.in", "real.out"]);
        std::os::unix::fs::symlink(dir.join("real.out"), dir.join("0000.out")).unwrap();
        assert!(refusal(&dir).contains("0000.out is a symbolic link"), "{}", refusal(&dir));
        let dir = problem_dir("fifo", meta, &["0000.in", "0000.out"]);
        nix::unistd::mkfifo(&dir.join("include/pipe"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(refusal(&dir).contains("include/pipe is not a regular file"), "{}", refusal(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
