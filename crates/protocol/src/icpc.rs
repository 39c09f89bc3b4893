//! The ICPC problem package format (Kattis, DOMjudge, the ICPC World
//! Finals; its legacy version, the one they all read) mapped to what the
//! protocol carries: tasks, a testdata zip of flat `TTCC.in`/`TTCC.out`,
//! and a checker name. `hubd problem add` and `judge-exec run` read a
//! package with [`read`] and lay it out with [`Package::lay_out`]; a key
//! the protocol cannot carry is refused by name, never dropped.
//!
//! # The mapping
//!
//! | package | protocol |
//! |---|---|
//! | `data/sample/**.in` + `.ans` | task 0, `taskScore` 0 (judged and shown, worth nothing), when there are samples |
//! | `data/secret/**.in` + `.ans` | the next tasks, at most 100 cases each, their scores 100 split evenly (one task, so pass-fail, up to 100 cases) |
//! | nested groups | flattened, in the format's order (names sorted, a group where its name sorts) |
//! | `limits.time_limit` (s), else `.timelimit` (s, DOMjudge), else `domjudge-problem.ini`'s `timelimit` | every task's `timeLimit` (ms, rounded up) |
//! | `limits.memory` (MiB; default 2048) | every task's `memoryLimit` (KiB) |
//! | `validation: custom` + `output_validators/X` | checker `icpc`; the source as `icpc/validator.cpp` (or `.c`), its headers beside it |
//! | `validation: custom interactive` | checker `icpc-interactive`, the same files |
//! | `validator_flags` | `icpc/validator_flags` (custom), or the built-in checker (default) |
//! | `validation: default` with `case_sensitive` | checker `token`, or `float:abs=A,rel=R` with `float_*tolerance` flags |
//! | `limits.time_multiplier`, `time_safety_margin`; `name`, `uuid`, `author`, `source`, `source_url`, `license`, `rights_owner`, `keywords`; `input_validators/`, `input_format_validators/`, `submissions/`, `problem_statement/` | ignored: they derive a time limit that is given, describe the problem, or check the testdata (a judge needs neither) |
//!
//! Refused, by name: `type: scoring` and `validation: … score` (per-group
//! scores), `limits.output`, `code`, `compilation_*` and `validation_*`
//! (the runner's own), `validation: default` without `case_sensitive` (no
//! ojrunner checker ignores case) or with `space_change_sensitive`, an
//! output validator with `build`/`run` scripts, in a language other than C
//! or C++, or of more than one source; more than one validator; a
//! `testdata.yaml` with `output_validator_flags`; `include/`, `graders/`;
//! a group of `data/` other than `sample` and `secret`; any other
//! key; a package without a time limit. Every file must be a regular file
//! or a directory: a symbolic link is refused by its path, as `hubd problem
//! add` refuses one (a zip cannot carry it).

use crate::archive;
use crate::Task;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use yaml_rust2::Yaml;

/// Where a package's output validator goes in the testdata: its source as
/// `icpc/validator.cpp` or `icpc/validator.c`, its headers beside it.
pub const VALIDATOR_STEM: &str = "icpc/validator";

/// Where a package's `validator_flags` go in the testdata: the validator's
/// arguments after its three, separated by white space.
pub const FLAGS_FILE: &str = "icpc/validator_flags";

/// The memory limit of a package that names none: 2 GiB, as the format's
/// current draft and DOMjudge default to.
pub const DEFAULT_MEMORY_MIB: i64 = 2048;

/// The most a configuration file of a package holds (`problem.yaml`,
/// `testdata.yaml`, `.timelimit`, `domjudge-problem.ini`).
const CONFIG_MAX: u64 = 1 << 20;

/// How deep test groups nest, and how many entries the data walk reads.
const MAX_DEPTH: usize = 16;
const MAX_ENTRIES: usize = 100_000;

/// The cases of one task at most ([`crate::check_tasks`]'s bound).
const CASES_PER_TASK: usize = 100;

/// The directories of a package the protocol cannot carry, and why.
const REFUSED_DIRS: [(&str, &str); 2] = [
    ("include", "files added to submissions, which the protocol does not carry"),
    ("graders", "graders score groups, which the protocol's tasks cannot express"),
];

/// A package mapped to the protocol: its tasks, its checker name, and the
/// files of its testdata as the protocol names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    pub tasks: Vec<Task>,
    pub checker: String,
    /// Each file of the testdata: its name there, and where it is now.
    pub files: Vec<(String, PathBuf)>,
    /// The validator's flags (`icpc/validator_flags`), if it has any.
    pub validator_flags: Option<String>,
}

/// Why a package cannot be carried: names the key or the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ICPC package: {0}")]
pub struct BadPackage(pub String);

fn bad<T>(m: impl Into<String>) -> Result<T, BadPackage> {
    Err(BadPackage(m.into()))
}

/// Whether `dir` is an ICPC problem package: it has a `problem.yaml`.
pub fn is_package(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("problem.yaml")).is_ok()
}

/// Reads the package in `dir`. `time_limit_ms`, when given, is its time
/// limit whatever the package says (`judge-exec run --time`).
pub fn read(dir: &Path, time_limit_ms: Option<i64>) -> Result<Package, BadPackage> {
    let yaml = load_yaml(&dir.join("problem.yaml"), "problem.yaml")?;
    let settings = Settings::from_yaml(&yaml)?;
    for (refused, why) in REFUSED_DIRS {
        if std::fs::symlink_metadata(dir.join(refused)).is_ok() {
            return bad(format!("{refused}/: {why}"));
        }
    }
    check_data_dir(dir)?;
    let time_limit = match time_limit_ms {
        Some(ms) => ms,
        None => seconds_to_ms(time_limit_s(dir, &settings)?)?,
    };
    let memory_limit =
        settings.memory_mib.checked_mul(1024).ok_or_else(|| BadPackage("limits.memory: too large".into()))?;

    let sample = cases(dir, "data/sample", false)?;
    let secret = cases(dir, "data/secret", true)?;
    if secret.is_empty() {
        return bad("data/secret holds no .in cases");
    }
    let mut groups: Vec<(i64, &[Case])> = Vec::new();
    if !sample.is_empty() {
        for chunk in sample.chunks(CASES_PER_TASK) {
            groups.push((0, chunk));
        }
    }
    let chunks: Vec<&[Case]> = secret.chunks(CASES_PER_TASK).collect();
    let n = chunks.len() as i64;
    for (i, chunk) in chunks.into_iter().enumerate() {
        // 100 split evenly, the first tasks taking what does not divide.
        groups.push((100 / n + i64::from((i as i64) < 100 % n), chunk));
    }
    let mut tasks = Vec::new();
    let mut files = Vec::new();
    for (t, (score, chunk)) in groups.iter().enumerate() {
        tasks.push(Task { task_score: *score, memory_limit, time_limit, case_count: chunk.len() as i64 });
        for (c, case) in chunk.iter().enumerate() {
            files.push((format!("{t:02}{c:02}.in"), case.input.clone()));
            files.push((format!("{t:02}{c:02}.out"), case.answer.clone()));
        }
    }
    crate::check_tasks(&tasks).map_err(|e| BadPackage(format!("as tasks: {e}")))?;

    let validators = dir.join("output_validators");
    let has_validators = std::fs::symlink_metadata(&validators).is_ok();
    let (checker, validator_flags) = match settings.validation {
        Validation::Default => {
            if has_validators {
                return bad("output_validators/ is given, but validation is default (want validation: custom)");
            }
            (default_checker(settings.validator_flags.as_deref().unwrap_or(""))?, None)
        }
        Validation::Custom { interactive } => {
            files.extend(validator_files(&validators)?);
            let name = if interactive { "icpc-interactive" } else { "icpc" };
            (name.to_string(), settings.validator_flags.filter(|f| !f.trim().is_empty()))
        }
    };
    Ok(Package { tasks, checker, files, validator_flags })
}

impl Package {
    /// Writes the testdata into `dest` (made if need be) as the protocol
    /// lays it out. Each file is read as a user's file: regular, bounded
    /// by a testdata zip's bound, as is the whole.
    pub fn lay_out(&self, dest: &Path) -> Result<(), BadPackage> {
        let io = |what: &Path, e: std::io::Error| BadPackage(format!("{}: {e}", what.display()));
        let mut total = 0u64;
        for (name, from) in &self.files {
            let to = dest.join(name);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            let bytes =
                ojrunner_daemon::user_file::read_user_file_in_tree(from, archive::TESTDATA.max_bytes, "package file")
                    .map_err(|e| io(from, e))?;
            total += bytes.len() as u64;
            if total > archive::TESTDATA.max_bytes {
                return bad(format!("the testdata passes {} bytes (a runner's bound)", archive::TESTDATA.max_bytes));
            }
            std::fs::write(&to, bytes).map_err(|e| io(&to, e))?;
        }
        if let Some(flags) = &self.validator_flags {
            let to = dest.join(FLAGS_FILE);
            std::fs::create_dir_all(to.parent().unwrap_or(dest)).map_err(|e| io(dest, e))?;
            std::fs::write(&to, format!("{}\n", flags.trim())).map_err(|e| io(&to, e))?;
        }
        Ok(())
    }
}

/// How output is judged (`validation`).
#[derive(Debug, PartialEq)]
enum Validation {
    Default,
    Custom { interactive: bool },
}

/// What `problem.yaml` says that the mapping uses.
#[derive(Debug)]
struct Settings {
    validation: Validation,
    validator_flags: Option<String>,
    time_limit_s: Option<f64>,
    memory_mib: i64,
}

impl Settings {
    fn from_yaml(doc: &Yaml) -> Result<Settings, BadPackage> {
        let map = match doc {
            Yaml::Hash(h) => h,
            // An empty file: every default.
            Yaml::Null => &yaml_rust2::yaml::Hash::new(),
            _ => return bad("problem.yaml: not a mapping"),
        };
        let mut s = Settings {
            validation: Validation::Default,
            validator_flags: None,
            time_limit_s: None,
            memory_mib: DEFAULT_MEMORY_MIB,
        };
        for (k, v) in map {
            let key =
                k.as_str().ok_or_else(|| BadPackage(format!("problem.yaml: a key that is not a string: {k:?}")))?;
            match key {
                "name" | "uuid" | "author" | "source" | "source_url" | "license" | "rights_owner" | "keywords" => {}
                "problem_format_version" => match v.as_str() {
                    Some("legacy" | "legacy-icpc") => {}
                    other => {
                        return bad(format!(
                            "problem_format_version {}: ojrunner reads the legacy format",
                            other.map_or_else(|| format!("{v:?}"), str::to_string)
                        ))
                    }
                },
                "type" => match v.as_str() {
                    Some("pass-fail") => {}
                    Some("scoring") => {
                        return bad("type: scoring: per-group scores, which the protocol's tasks cannot express")
                    }
                    _ => return bad(format!("type: {v:?}: want pass-fail")),
                },
                // Only a scoring problem's: a pass-fail problem has no grades.
                "grading" => {}
                "validation" => s.validation = validation(v)?,
                "validator_flags" => {
                    s.validator_flags =
                        Some(scalar(v).ok_or_else(|| BadPackage("validator_flags: not a string".into()))?)
                }
                "limits" => s.read_limits(v)?,
                other => {
                    return bad(format!(
                        "problem.yaml: key {other}: not in the legacy format, or not carried by ojrunner"
                    ))
                }
            }
        }
        Ok(s)
    }

    fn read_limits(&mut self, v: &Yaml) -> Result<(), BadPackage> {
        let Yaml::Hash(map) = v else { return bad("limits: not a mapping") };
        for (k, v) in map {
            let key = k.as_str().unwrap_or("?");
            let number = || number(v).ok_or_else(|| BadPackage(format!("limits.{key}: not a number: {v:?}")));
            match key {
                // They derive a time limit from the judges' solutions; ojrunner takes it as given.
                "time_multiplier" | "time_safety_margin" => {
                    number()?;
                }
                "time_limit" => self.time_limit_s = Some(number()?),
                "memory" => {
                    let mib = number()?;
                    if !(1.0..=16.0 * 1024.0).contains(&mib) || mib.fract() != 0.0 {
                        return bad(format!("limits.memory: {mib} MiB, want a whole number of MiB from 1 to 16384"));
                    }
                    self.memory_mib = mib as i64;
                }
                "output" => return bad("limits.output: the protocol carries no output limit (a runner allows 64 MiB)"),
                "code" => return bad("limits.code: the protocol carries no limit on a submission's size"),
                "compilation_time" | "compilation_memory" => {
                    return bad(format!("limits.{key}: a compile's limits are the runner's own (20 s, 1 GiB)"))
                }
                "validation_time" | "validation_memory" | "validation_output" => {
                    return bad(format!("limits.{key}: a validator's limits are the runner's own (10 s, 1 GiB)"))
                }
                other => return bad(format!("limits.{other}: not a limit of the legacy format")),
            }
        }
        Ok(())
    }
}

fn validation(v: &Yaml) -> Result<Validation, BadPackage> {
    let text = v.as_str().ok_or_else(|| BadPackage(format!("validation: not a string: {v:?}")))?;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.first() == Some(&"custom") && words.contains(&"score") {
        return bad(format!("validation: {text}: a validator's score, which the protocol's tasks cannot express"));
    }
    match words.as_slice() {
        ["default"] => Ok(Validation::Default),
        ["custom"] => Ok(Validation::Custom { interactive: false }),
        ["custom", "interactive"] => Ok(Validation::Custom { interactive: true }),
        _ => bad(format!("validation: {text}: want default, custom or custom interactive")),
    }
}

/// The built-in checker that is the default output validator under `flags`.
fn default_checker(flags: &str) -> Result<String, BadPackage> {
    let mut words = flags.split_whitespace();
    let (mut case_sensitive, mut abs, mut rel) = (false, None, None);
    while let Some(w) = words.next() {
        let mut tolerance = |w: &str| {
            let v = words.next().ok_or_else(|| BadPackage(format!("validator_flags: {w} wants a value")))?;
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(v.to_string()),
                _ => bad(format!("validator_flags: {w} {v}: not a tolerance")),
            }
        };
        match w {
            "case_sensitive" => case_sensitive = true,
            "space_change_sensitive" => {
                return bad("validator_flags: space_change_sensitive: no ojrunner checker compares white space so")
            }
            "float_tolerance" => {
                let t = tolerance(w)?;
                (abs, rel) = (Some(t.clone()), Some(t));
            }
            "float_absolute_tolerance" => abs = Some(tolerance(w)?),
            "float_relative_tolerance" => rel = Some(tolerance(w)?),
            other => return bad(format!("validator_flags: {other}: not a flag of the default validator")),
        }
    }
    if !case_sensitive {
        return bad("validation: default compares words ignoring case, which no ojrunner checker does: \
             add validator_flags: case_sensitive, or ship an output validator");
    }
    Ok(match (abs, rel) {
        (None, None) => "token".to_string(),
        (abs, rel) => format!("float:abs={},rel={}", abs.as_deref().unwrap_or("0"), rel.as_deref().unwrap_or("0")),
    })
}

/// The time limit in seconds: `limits.time_limit`, else DOMjudge's
/// `.timelimit`, else its `domjudge-problem.ini`.
fn time_limit_s(dir: &Path, settings: &Settings) -> Result<f64, BadPackage> {
    if let Some(s) = settings.time_limit_s {
        return Ok(s);
    }
    let dot = dir.join(".timelimit");
    if std::fs::symlink_metadata(&dot).is_ok() {
        let text = config_text(&dot, ".timelimit")?;
        return text.trim().parse().map_err(|_| BadPackage(format!(".timelimit: {:?} is not seconds", text.trim())));
    }
    let ini = dir.join("domjudge-problem.ini");
    if std::fs::symlink_metadata(&ini).is_ok() {
        let text = config_text(&ini, "domjudge-problem.ini")?;
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == "timelimit" {
                    let v = v.trim().trim_matches(|c| c == '\'' || c == '"');
                    return v
                        .parse()
                        .map_err(|_| BadPackage(format!("domjudge-problem.ini: timelimit {v:?} is not seconds")));
                }
            }
        }
    }
    bad("no time limit: give limits.time_limit (seconds) in problem.yaml, or a .timelimit file (DOMjudge's)")
}

fn seconds_to_ms(s: f64) -> Result<i64, BadPackage> {
    if !s.is_finite() || s <= 0.0 || s > 60.0 {
        return bad(format!("time limit {s} s: want more than 0 and at most 60"));
    }
    Ok((s * 1000.0).ceil() as i64)
}

/// `data/` itself: `sample/` and `secret/` are judged, another group would
/// not be; a `testdata.yaml` there is checked as in the groups.
fn check_data_dir(dir: &Path) -> Result<(), BadPackage> {
    let data = dir.join("data");
    if !std::fs::symlink_metadata(&data).is_ok_and(|m| m.is_dir()) {
        return bad("data/: no such directory");
    }
    for (name, kind) in visible_entries(&data, "data")? {
        if kind.is_dir() && name != "sample" && name != "secret" {
            return bad(format!("data/{name}/: only data/sample and data/secret are judged"));
        }
        if name == "testdata.yaml" {
            check_testdata_yaml(dir, Path::new("data/testdata.yaml"))?;
        }
    }
    Ok(())
}

/// A `testdata.yaml` (`path`, in the package): flags per group are refused.
fn check_testdata_yaml(dir: &Path, path: &Path) -> Result<(), BadPackage> {
    let yaml = load_yaml(&dir.join(path), &path.display().to_string())?;
    if !matches!(yaml["output_validator_flags"], Yaml::BadValue | Yaml::Null) {
        return bad(format!("{}: output_validator_flags: flags per group, which a job cannot carry", path.display()));
    }
    Ok(())
}

/// One case: its input and its answer, in the package.
#[derive(Debug)]
struct Case {
    input: PathBuf,
    answer: PathBuf,
}

/// The cases under `dir/rel` in the format's order; none if it is absent
/// (and `required` is false).
fn cases(dir: &Path, rel: &str, required: bool) -> Result<Vec<Case>, BadPackage> {
    let top = dir.join(rel);
    match std::fs::symlink_metadata(&top) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return bad(format!("{rel} is not a directory")),
        Err(_) if required => return bad(format!("{rel}: no such directory")),
        Err(_) => return Ok(Vec::new()),
    }
    let mut out = Vec::new();
    let mut seen = 0;
    walk(dir, Path::new(rel), 0, &mut seen, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, rel: &Path, depth: usize, seen: &mut usize, out: &mut Vec<Case>) -> Result<(), BadPackage> {
    if depth > MAX_DEPTH {
        return bad(format!("{}: groups nest deeper than {MAX_DEPTH}", rel.display()));
    }
    let here = dir.join(rel);
    let io = |e: std::io::Error| BadPackage(format!("{}: {e}", rel.display()));
    let mut entries = std::fs::read_dir(&here).and_then(|d| d.collect::<Result<Vec<_>, _>>()).map_err(io)?;
    *seen += entries.len();
    if *seen > MAX_ENTRIES {
        return bad(format!("data/ holds more than {MAX_ENTRIES} entries"));
    }
    entries.sort_by_key(|e| e.file_name());
    let names: BTreeMap<String, std::fs::FileType> = entries
        .iter()
        .map(|e| Ok((e.file_name().to_string_lossy().into_owned(), e.file_type().map_err(io)?)))
        .collect::<Result<_, BadPackage>>()?;
    for (name, kind) in &names {
        let path = rel.join(name);
        if kind.is_symlink() {
            return bad(format!("{} is a symbolic link (a zip carries regular files only)", path.display()));
        }
        if kind.is_dir() {
            walk(dir, &path, depth + 1, seen, out)?;
            continue;
        }
        if !kind.is_file() {
            return bad(format!("{} is not a regular file or a directory", path.display()));
        }
        if name == "testdata.yaml" {
            check_testdata_yaml(dir, &path)?;
        } else if let Some(stem) = name.strip_suffix(".in") {
            let ans = format!("{stem}.ans");
            if !names.get(&ans).is_some_and(|k| k.is_file()) {
                return bad(format!("{} has no {ans} beside it", path.display()));
            }
            out.push(Case { input: dir.join(&path), answer: dir.join(rel.join(ans)) });
        } else if let Some(stem) = name.strip_suffix(".ans") {
            if !names.contains_key(&format!("{stem}.in")) {
                return bad(format!("{} has no {stem}.in beside it", path.display()));
            }
        }
    }
    Ok(())
}

/// The output validator's files, as the testdata names them.
fn validator_files(validators: &Path) -> Result<Vec<(String, PathBuf)>, BadPackage> {
    let rel = "output_validators";
    if !std::fs::symlink_metadata(validators).is_ok_and(|m| m.is_dir()) {
        return bad("validation is custom, but there is no output_validators/ directory");
    }
    let programs = visible_entries(validators, rel)?;
    let (name, kind) = match programs.as_slice() {
        [] => return bad("validation is custom, but output_validators/ holds no validator"),
        [one] => one.clone(),
        more => {
            let names: Vec<&str> = more.iter().map(|(n, _)| n.as_str()).collect();
            return bad(format!(
                "output_validators/: {} validators ({}); ojrunner runs one",
                names.len(),
                names.join(", ")
            ));
        }
    };
    let path = validators.join(&name);
    if kind.is_file() {
        let ext = source_ext(&format!("{rel}/{name}"), &name)?;
        return Ok(vec![(format!("{VALIDATOR_STEM}.{ext}"), path)]);
    }
    let prefix = format!("{rel}/{name}");
    let mut source = None;
    let mut files = Vec::new();
    for (file, kind) in visible_entries(&path, &prefix)? {
        let shown = format!("{prefix}/{file}");
        if file == "build" || file == "run" {
            return bad(format!(
                "{shown}: build and run scripts; the runner builds a validator from one C or C++ source"
            ));
        }
        if !kind.is_file() {
            return bad(format!(
                "{shown}: a directory; the runner builds a validator from the files beside its source"
            ));
        }
        if [".h", ".hpp", ".hh"].iter().any(|e| file.ends_with(e)) {
            files.push((format!("icpc/{file}"), path.join(&file)));
            continue;
        }
        let ext = source_ext(&shown, &file)?;
        if let Some(first) = source.replace((ext, path.join(&file))) {
            return bad(format!(
                "{prefix}: more than one source ({} and {file}); the runner builds one",
                first.1.display()
            ));
        }
    }
    let (ext, source) = source.ok_or_else(|| BadPackage(format!("{prefix}: no C or C++ source")))?;
    files.push((format!("{VALIDATOR_STEM}.{ext}"), source));
    Ok(files)
}

/// The entries of `dir` but dot files, sorted, links refused.
fn visible_entries(dir: &Path, shown: &str) -> Result<Vec<(String, std::fs::FileType)>, BadPackage> {
    let io = |e: std::io::Error| BadPackage(format!("{shown}: {e}"));
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io)? {
        let e = e.map_err(io)?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let kind = e.file_type().map_err(io)?;
        if kind.is_symlink() {
            return bad(format!("{shown}/{name} is a symbolic link (a zip carries regular files only)"));
        }
        if !kind.is_file() && !kind.is_dir() {
            return bad(format!("{shown}/{name} is not a regular file or a directory"));
        }
        out.push((name, kind));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// `cpp` or `c`: the source's language as the runner builds it; any other
/// is refused by name.
fn source_ext(shown: &str, file: &str) -> Result<&'static str, BadPackage> {
    let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
    match ext {
        "c" => Ok("c"),
        "cpp" | "cc" | "cxx" | "c++" | "C" => Ok("cpp"),
        _ => {
            let language = match ext {
                "py" | "py3" => "Python",
                "java" => "Java",
                "kt" => "Kotlin",
                "sh" => "a shell script",
                "" => "a file without an extension",
                _ => "an unknown language",
            };
            bad(format!("{shown}: a validator in {language}; the runner builds validators in C and C++ only"))
        }
    }
}

/// How deep a package's YAML may nest: problem.yaml's deepest key is 3
/// levels down; the tree is built and dropped by recursion, so a file of
/// nothing but `- - - …` would overflow the stack.
const YAML_DEPTH: usize = 32;

/// A package's YAML file: bounded, aliases refused (a few lines of them
/// can expand to gigabytes), nesting bounded ([`YAML_DEPTH`]), one document.
fn load_yaml(path: &Path, shown: &str) -> Result<Yaml, BadPackage> {
    let text = config_text(path, shown)?;
    // The events one by one, before any tree is built (the parser's own
    // `load` recurses as deep as the text nests): aliases, and the depth.
    let mut parser = yaml_rust2::parser::Parser::new_from_str(&text);
    let mut depth = 0usize;
    loop {
        use yaml_rust2::parser::Event;
        let (event, _) = parser.next_token().map_err(|e| BadPackage(format!("{shown}: {e}")))?;
        match event {
            Event::StreamEnd => break,
            Event::Alias(_) => return bad(format!("{shown}: YAML aliases (*name) are not read")),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > YAML_DEPTH {
                    return bad(format!(
                        "{shown}: nested more than {YAML_DEPTH} levels deep, more than a package needs"
                    ));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(&text).map_err(|e| BadPackage(format!("{shown}: {e}")))?;
    match docs.len() {
        0 => Ok(Yaml::Null),
        1 => Ok(docs.into_iter().next().unwrap_or(Yaml::Null)),
        n => bad(format!("{shown}: {n} YAML documents, want one")),
    }
}

/// A package's configuration file, a link refused.
fn config_text(path: &Path, shown: &str) -> Result<String, BadPackage> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return bad(format!("{shown} is a symbolic link (a zip carries regular files only)"));
    }
    ojrunner_daemon::user_file::read_user_text(path, CONFIG_MAX, shown).map_err(|e| BadPackage(format!("{shown}: {e}")))
}

fn number(v: &Yaml) -> Option<f64> {
    match v {
        Yaml::Integer(i) => Some(*i as f64),
        Yaml::Real(_) => v.as_f64(),
        _ => None,
    }
}

/// A scalar as its text (a flag list may read as a number).
fn scalar(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Null => Some(String::new()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package in a fresh directory: `problem.yaml` and `files` (a
    /// relative path, its text).
    fn package(tag: &str, yaml: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = ojrunner_daemon::test_dir(&format!("icpc-{tag}"));
        std::fs::write(dir.join("problem.yaml"), yaml).unwrap();
        for (name, text) in files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const ONE_SECRET: [(&str, &str); 2] = [("data/secret/1.in", "1\n"), ("data/secret/1.ans", "1\n")];

    fn refusal(yaml: &str, files: &[(&str, &str)]) -> String {
        let dir = package("refused", yaml, files);
        let e = read(&dir, None).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        e
    }

    fn names(p: &Package) -> Vec<(&str, String)> {
        p.files.iter().map(|(n, f)| (n.as_str(), f.file_name().unwrap().to_string_lossy().into_owned())).collect()
    }

    #[test]
    fn a_package_maps_to_tasks_files_and_a_checker() {
        let yaml = "name: Sum\nvalidation: custom\nvalidator_flags: nonnegative  strict\nlimits:\n  time_limit: 1.5\n  memory: 256\n  time_multiplier: 3\n";
        let dir = package(
            "map",
            yaml,
            &[
                ("data/sample/1.in", "5\n"),
                ("data/sample/1.ans", "2 3\n"),
                ("data/sample/1.png", "a picture: not a case"),
                ("data/secret/b.in", "7\n"),
                ("data/secret/b.ans", "3 4\n"),
                ("data/secret/a/2.in", "9\n"),
                ("data/secret/a/2.ans", "4 5\n"),
                ("data/secret/a/testdata.yaml", "input_validator_flags: x\n"),
                ("output_validators/sum/sum.cc", "int main() {}"),
                ("output_validators/sum/validate.h", ""),
                ("input_validators/v/v.py", "ignored"),
            ],
        );
        let p = read(&dir, None).unwrap();
        let task =
            |score, count| Task { task_score: score, memory_limit: 256 * 1024, time_limit: 1500, case_count: count };
        assert_eq!(p.tasks, [task(0, 1), task(100, 2)]);
        assert_eq!(p.checker, "icpc");
        assert_eq!(p.validator_flags.as_deref(), Some("nonnegative  strict"));
        // Groups sort where their names sort: a/2 before b.
        assert_eq!(
            names(&p),
            [
                ("0000.in", "1.in".into()),
                ("0000.out", "1.ans".into()),
                ("0100.in", "2.in".into()),
                ("0100.out", "2.ans".into()),
                ("0101.in", "b.in".into()),
                ("0101.out", "b.ans".into()),
                ("icpc/validate.h", "validate.h".into()),
                ("icpc/validator.cpp", "sum.cc".into()),
            ]
        );
        let out = dir.join("laid");
        p.lay_out(&out).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("0101.out")).unwrap(), "3 4\n");
        assert_eq!(std::fs::read_to_string(out.join(FLAGS_FILE)).unwrap(), "nonnegative  strict\n");
        assert!(out.join("icpc/validator.cpp").is_file());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn many_secret_cases_split_into_tasks_whose_scores_sum_to_100() {
        let files: Vec<(String, &str)> = (0..250)
            .flat_map(|i| [(format!("data/secret/{i:03}.in"), "1"), (format!("data/secret/{i:03}.ans"), "1")])
            .collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        let dir = package("many", "validation: custom interactive\nlimits: {time_limit: 2}\n", &files);
        std::fs::create_dir_all(dir.join("output_validators")).unwrap();
        std::fs::write(dir.join("output_validators/i.c"), "int main(void) { return 42; }").unwrap();
        let p = read(&dir, None).unwrap();
        let got: Vec<(i64, i64)> = p.tasks.iter().map(|t| (t.task_score, t.case_count)).collect();
        assert_eq!(got, [(34, 100), (33, 100), (33, 50)]);
        assert_eq!(p.checker, "icpc-interactive");
        assert_eq!(p.tasks[0].memory_limit, DEFAULT_MEMORY_MIB * 1024);
        assert_eq!(p.files.last().unwrap().0, "icpc/validator.c");
        // A time limit given on the command line wins.
        assert_eq!(read(&dir, Some(700)).unwrap().tasks[0].time_limit, 700);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_time_limit_comes_from_problem_yaml_or_domjudges_files() {
        let dir = package("tl", "validation: default\nvalidator_flags: case_sensitive\n", &ONE_SECRET);
        assert!(read(&dir, None).unwrap_err().to_string().contains("no time limit"));
        std::fs::write(dir.join("domjudge-problem.ini"), "name='x'\ntimelimit='2.5'\n").unwrap();
        assert_eq!(read(&dir, None).unwrap().tasks[0].time_limit, 2500);
        std::fs::write(dir.join(".timelimit"), "0.25\n").unwrap();
        assert_eq!(read(&dir, None).unwrap().tasks[0].time_limit, 250, ".timelimit first");
        std::fs::write(dir.join("problem.yaml"), "validator_flags: case_sensitive\nlimits: {time_limit: 3}\n").unwrap();
        assert_eq!(read(&dir, None).unwrap().tasks[0].time_limit, 3000, "problem.yaml first");
        std::fs::write(dir.join(".timelimit"), "soon\n").unwrap();
        std::fs::write(dir.join("problem.yaml"), "validator_flags: case_sensitive\n").unwrap();
        assert!(read(&dir, None).unwrap_err().to_string().contains(".timelimit: \"soon\""));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_default_validator_is_a_builtin_checker_when_one_compares_alike() {
        let checker = |flags: &str| {
            let yaml = format!("limits: {{time_limit: 1}}\nvalidator_flags: {flags}\n");
            let dir = package("default", &yaml, &ONE_SECRET);
            let r = read(&dir, None).map(|p| p.checker).map_err(|e| e.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            r
        };
        assert_eq!(checker("case_sensitive"), Ok("token".into()));
        assert_eq!(checker("case_sensitive float_tolerance 1e-4"), Ok("float:abs=1e-4,rel=1e-4".into()));
        assert_eq!(checker("float_relative_tolerance 1e-6 case_sensitive"), Ok("float:abs=0,rel=1e-6".into()));
        assert!(checker("float_tolerance 1e-4").unwrap_err().contains("ignoring case"));
        assert!(checker("case_sensitive space_change_sensitive").unwrap_err().contains("space_change_sensitive"));
        assert!(checker("case_sensitive float_tolerance").unwrap_err().contains("float_tolerance wants a value"));
        assert!(checker("case_sensitive loose").unwrap_err().contains("validator_flags: loose"));
    }

    #[test]
    fn what_the_protocol_cannot_carry_is_refused_by_name() {
        let tl = "limits: {time_limit: 1}\n";
        let custom = format!("{tl}validation: custom\n");
        let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
            ONE_SECRET.iter().chain(extra).copied().collect()
        };
        let c_validator = [("output_validators/v/v.c", "int main(void){return 42;}")];
        for (yaml, files, why) in [
            (format!("{tl}type: scoring\n"), with(&[]), "type: scoring"),
            (format!("{tl}validation: custom score\n"), with(&c_validator), "validation: custom score"),
            (format!("{tl}validation: custom interactive score\n"), with(&c_validator), "a validator's score"),
            ("limits: {time_limit: 1, output: 8}\n".into(), with(&[]), "limits.output"),
            ("limits: {time_limit: 1, validation_time: 60}\n".into(), with(&[]), "limits.validation_time"),
            ("limits: {time_limit: 1, compilation_memory: 64}\n".into(), with(&[]), "limits.compilation_memory"),
            ("limits: {time_limit: 1, memory: 0.5}\n".into(), with(&[]), "limits.memory"),
            ("limits: {time_limit: 120}\n".into(), with(&[]), "time limit 120 s"),
            (format!("{tl}languages: all\n"), with(&[]), "key languages"),
            (format!("{tl}problem_format_version: 2023-07-draft\n"), with(&[]), "problem_format_version 2023-07-draft"),
            (
                custom.clone(),
                with(&[("output_validators/v/v.py", "")]),
                "output_validators/v/v.py: a validator in Python",
            ),
            (custom.clone(), with(&[("output_validators/v.java", "")]), "a validator in Java"),
            (
                custom.clone(),
                with(&[("output_validators/v/build", ""), ("output_validators/v/v.c", "")]),
                "output_validators/v/build",
            ),
            (
                custom.clone(),
                with(&[("output_validators/v/a.c", ""), ("output_validators/v/b.cpp", "")]),
                "more than one source",
            ),
            (
                custom.clone(),
                with(&[("output_validators/v.c", ""), ("output_validators/w.c", "")]),
                "2 validators (v.c, w.c)",
            ),
            (custom.clone(), with(&[]), "there is no output_validators/ directory"),
            (tl.into(), with(&c_validator), "output_validators/ is given, but validation is default"),
            (
                format!("{tl}validator_flags: case_sensitive\n"),
                with(&[("data/secret/testdata.yaml", "output_validator_flags: float_tolerance 1\n")]),
                "data/secret/testdata.yaml: output_validator_flags",
            ),
            (format!("{tl}validator_flags: case_sensitive\n"), with(&[("include/cpp/x.h", "")]), "include/"),
            (
                format!("{tl}validator_flags: case_sensitive\n"),
                with(&[("data/testdata.yaml", "output_validator_flags: float_tolerance 1\n")]),
                "data/testdata.yaml: output_validator_flags",
            ),
            (format!("{tl}validator_flags: case_sensitive\n"), with(&[("data/extra/1.in", "")]), "data/extra/"),
            (
                format!("{tl}validator_flags: case_sensitive\n"),
                with(&[("data/secret/2.in", "")]),
                "data/secret/2.in has no 2.ans",
            ),
            (
                format!("{tl}validator_flags: case_sensitive\n"),
                with(&[("data/secret/3.ans", "")]),
                "data/secret/3.ans has no 3.in",
            ),
            (
                format!("{tl}validator_flags: case_sensitive\n"),
                vec![("data/sample/1.in", ""), ("data/sample/1.ans", "")],
                "data/secret",
            ),
            ("a: &x [1]\nb: *x\n".into(), with(&[]), "YAML aliases"),
            // 100,000 levels of a block sequence: the tree's recursion would
            // overflow the stack (an abort, seen before the bound).
            ("- ".repeat(100_000) + "x\n", with(&[]), "nested more than 32 levels deep"),
            (
                "a:\n".to_string() + &(1..40).map(|i| format!("{}b{i}:\n", " ".repeat(i))).collect::<String>(),
                with(&[]),
                "levels deep",
            ),
            ("[1, 2]\n".into(), with(&[]), "problem.yaml: not a mapping"),
            ("name: {\n".into(), with(&[]), "problem.yaml: "),
        ] {
            let e = refusal(&yaml, &files);
            assert!(e.contains(why), "{yaml:?}: {e}");
        }
    }

    #[test]
    fn links_and_special_files_in_a_package_are_refused_by_path() {
        let dir = package("link", "limits: {time_limit: 1}\nvalidator_flags: case_sensitive\n", &ONE_SECRET);
        std::os::unix::fs::symlink("/etc/passwd", dir.join("data/secret/2.in")).unwrap();
        std::fs::write(dir.join("data/secret/2.ans"), "").unwrap();
        assert!(read(&dir, None).unwrap_err().to_string().contains("data/secret/2.in is a symbolic link"));
        std::fs::remove_file(dir.join("data/secret/2.in")).unwrap();
        std::fs::remove_file(dir.join("data/secret/2.ans")).unwrap();
        std::fs::create_dir_all(dir.join("output_validators")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("output_validators/v.c")).unwrap();
        std::fs::write(dir.join("problem.yaml"), "limits: {time_limit: 1}\nvalidation: custom\n").unwrap();
        assert!(read(&dir, None).unwrap_err().to_string().contains("output_validators/v.c is a symbolic link"));
        std::fs::remove_file(dir.join("problem.yaml")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("problem.yaml")).unwrap();
        assert!(is_package(&dir));
        assert!(read(&dir, None).unwrap_err().to_string().contains("problem.yaml is a symbolic link"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
