//! `judge-exec run`: judging without a hub or a spool, for problem setters
//! and shell pipelines. One JSON line per case (the fields of a case in the
//! `complete` payload, plus its name), then a summary line.

use crate::config::exit;
use crate::judge::{Compiled, Judge, Slot};
use crate::language::Languages;
use crate::protocol::{CaseResult, Status};
use log::error;
use serde_json::json;
use std::path::Path;

/// `judge-exec run`: judge a source against a directory of cases, printing
/// JSON lines; exits 0 when every case is AC, 1 otherwise.
pub fn run(languages: &Languages, lang: &str, src: &Path, tests: &Path, time: i64, mem: i64) -> i32 {
    let Some(lang) = lang.parse::<i64>().ok().and_then(|i| languages.by_id(i)).or_else(|| languages.by_name(lang))
    else {
        error!("unknown language {lang:?}");
        return exit::USAGE;
    };
    let mut names: Vec<String> = std::fs::read_dir(tests)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".in")).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        error!("{}: no TTCC.in cases", tests.display());
        return exit::USAGE;
    }
    let work = std::env::temp_dir().join(format!("judge-exec-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let srcdir = work.join("src");
    if let Err(e) =
        std::fs::create_dir_all(&srcdir).and_then(|_| std::fs::copy(src, srcdir.join(&lang.source)).map(drop))
    {
        error!("{}: {e}", src.display());
        let _ = std::fs::remove_dir_all(&work);
        return exit::USAGE;
    }
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o711));
    let judge = Judge::default();
    let slot = Slot::for_index(0);
    let task =
        crate::protocol::Task { task_score: 100, memory_limit: mem, time_limit: time, case_count: names.len() as i64 };
    let compiled = judge.compile(lang, &srcdir, &slot);
    let mut worst = Status::AC;
    for name in &names {
        let r = match &compiled {
            Compiled::Ready => {
                let scratch = work.join("cases").join(name);
                let _ = std::fs::create_dir_all(&scratch);
                judge.run_case(
                    lang,
                    &srcdir,
                    &tests.join(format!("{name}.in")),
                    &tests.join(format!("{name}.out")),
                    &task,
                    &slot,
                    &scratch,
                )
            }
            Compiled::Failed { message } => CaseResult::compile_error(message),
            Compiled::JudgeError(w) => CaseResult::judge_error(w),
        };
        worst = worst.worst(r.status);
        let mut v = serde_json::to_value(&r).unwrap();
        v["case"] = json!(name);
        println!("{v}");
    }
    println!("{}", json!({"summary": true, "cases": names.len(), "status": worst}));
    let _ = std::fs::remove_dir_all(&work);
    if worst == Status::AC {
        exit::OK
    } else {
        exit::FAILURE
    }
}
