//! `judge-exec`: its command line (the stage, `--probe`, `judge-exec
//! run`), logger, signals and exit code; the work is
//! `ojrunner::stage::judge_exec::run` and `ojrunner::standalone`.

use clap::{Parser, Subcommand};
use ojrunner::config::Common;
use ojrunner::stage::judge_exec;
use ojrunner::standalone;
use ojrunner_daemon::{exit_code, signals, ExitCode};
use std::path::PathBuf;

/// judge-exec: compiles and runs submissions in a sandbox, and decides verdicts.
#[derive(Parser, Debug)]
#[command(name = "judge-exec", version, about = "Judge prepped claims in a sandbox")]
struct Cli {
    #[command(flatten)]
    common: Common,

    /// How many claims are judged at once (default: the number of CPUs).
    #[arg(long, env = "OJ_WORKERS", value_name = "N")]
    workers: Option<usize>,

    /// The language table (default: the built-in copy of etc/languages.json).
    #[arg(long, env = "OJ_LANGUAGES", value_name = "FILE")]
    languages: Option<PathBuf>,

    /// Print, as JSON, which isolation and measurement mechanisms this
    /// machine gives the sandbox (cgroups, namespaces, seccomp), and exit.
    #[arg(long)]
    probe: bool,

    /// Give each run a new network namespace of its own, not its helper's,
    /// which is as empty and cheaper (see judge-exec(8)).
    #[arg(long, env = "OJ_NETNS_PER_RUN", action = clap::ArgAction::SetTrue,
          value_parser = clap::builder::BoolishValueParser::new())]
    netns_per_run: bool,

    /// The first slot uid (workers' slots from it, checkers' 1000 above):
    /// a range no other runner on the host uses (default 60000).
    #[arg(long, env = "OJ_SLOT_UID_BASE", value_name = "UID", value_parser = ojrunner::judge::parse_slot_uid_base)]
    slot_uid_base: Option<u32>,

    /// The idleness rule's window, in ms: past its CPU limit in wall time, a
    /// case whose CPU time stood still this long is TLE (idle); 0 turns the
    /// rule off (default 500; see judge-exec(8)).
    #[arg(long, env = "OJ_IDLE_WINDOW_MS", value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    idle_window: Option<u64>,

    /// The directory of the slots' host-wide locks, shared by every runner
    /// that uses the same slot uids (default /run/ojrunner).
    #[arg(long, env = "OJ_SLOT_LOCK_DIR", value_name = "DIR")]
    slot_lock_dir: Option<PathBuf>,

    /// Bytes of compiled submissions kept (the runner's in $OJ_SPOOL/programs,
    /// `run`'s in its --cache), least recently used first out; 0: none kept,
    /// every submission compiled (default 1073741824, 1 GiB).
    #[arg(long, env = "OJ_COMPILE_CACHE_BYTES", value_name = "BYTES",
          default_value_t = ojrunner::compile_cache::DEFAULT_BUDGET)]
    compile_cache_bytes: u64,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Judge one source against a directory of TTCC.in/TTCC.out cases, or an
    /// ICPC problem package, no hub, no spool: one JSON line per case, then a
    /// summary line.
    Run {
        /// Language name or id (c11, cpp17, python3, …).
        #[arg(long)]
        lang: String,
        /// The source file.
        #[arg(long)]
        src: PathBuf,
        /// The directory of TTCC.in / TTCC.out files, or of an ICPC problem
        /// package (problem.yaml, data/, output_validators/).
        #[arg(long)]
        tests: PathBuf,
        /// CPU time limit per case, in ms (default 1000, or a package's own).
        #[arg(long)]
        time: Option<i64>,
        /// Memory limit per case, in KiB (default 262144, or a package's own).
        #[arg(long)]
        mem: Option<i64>,
        /// The checker: diff, exact, token, float[:EPS], special, interactive,
        /// icpc, icpc-interactive (default diff, or a package's own).
        // (The help text, not a link: clap shows it as written.)
        #[allow(rustdoc::broken_intra_doc_links)]
        #[arg(long, value_name = "NAME")]
        checker: Option<String>,
        /// Where compiled sources are kept for the next run (default
        /// $XDG_CACHE_HOME/ojrunner/programs, or ~/.cache/ojrunner/programs).
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
    },
}

fn main() {
    // A sandbox helper is a fresh exec of this binary: it serves and exits here.
    ojrunner::sandbox::enter_if_asked();
    let cli = ojrunner_daemon::start("judge-exec", Cli::parse);
    ojrunner::sandbox::set_netns_per_run(cli.netns_per_run);
    if let Some(ms) = cli.idle_window {
        ojrunner::judge::set_idle_window(std::time::Duration::from_millis(ms));
    }
    // The settings the library reads once from the environment: a flag
    // given on the command line wins (before any thread reads them).
    if let Some(base) = cli.slot_uid_base {
        std::env::set_var("OJ_SLOT_UID_BASE", base.to_string());
    }
    if let Some(dir) = &cli.slot_lock_dir {
        std::env::set_var("OJ_SLOT_LOCK_DIR", dir);
    }
    std::process::exit(dispatch(cli).code());
}

/// The stage, or `--probe`, or `judge-exec run`.
fn dispatch(cli: Cli) -> ExitCode {
    let languages = match ojrunner::daemon::languages(cli.languages.as_deref()) {
        Ok(l) => l,
        Err(f) => return exit_code(Err(f)),
    };
    if cli.probe {
        signals::default_sigpipe();
        return standalone::probe(&languages);
    }
    if let Some(Command::Run { lang, src, tests, time, mem, checker, cache }) = &cli.command {
        let cache = cache
            .clone()
            .or_else(standalone::default_cache)
            .and_then(|dir| ojrunner::compile_cache::CompileCache::new(dir, cli.compile_cache_bytes));
        return standalone::run(&languages, lang, src, tests, *time, *mem, checker.as_deref(), cache);
    }
    let cfg = judge_exec::Config {
        common: cli.common,
        workers: cli.workers,
        languages: cli.languages,
        compile_cache_bytes: cli.compile_cache_bytes,
    };
    signals::run_stage(|shutdown| judge_exec::run(&cfg, languages, shutdown))
}
