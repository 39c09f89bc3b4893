//! `claimd`: its command line, logger, signals and exit code; the work is
//! `ojrunner::stage::claimd::run`.

use clap::Parser;
use ojrunner::config::Common;
use ojrunner::stage::claimd;
use ojrunner_daemon::{signals, ExitCode};
use std::path::PathBuf;

/// claimd: claims jobs from the hub and prepares them for judging.
#[derive(Parser, Debug)]
#[command(name = "claimd", version, about = "Claim jobs from the hub and prepare them for judging")]
struct Cli {
    #[command(flatten)]
    common: Common,

    /// Long-poll the hub this many seconds per claim request (0: plain
    /// polls; scaled by OJ_TIME_SCALE, then rounded up to whole seconds,
    /// the wire's unit).
    #[arg(long, env = "OJ_CLAIM_WAIT", default_value = "5", value_name = "SEC")]
    claim_wait: String,

    /// The language table (default: the built-in copy of etc/languages.json).
    #[arg(long, env = "OJ_LANGUAGES", value_name = "FILE")]
    languages: Option<PathBuf>,
}

fn main() {
    let Cli { common, claim_wait, languages } = ojrunner_daemon::start("claimd", Cli::parse);
    let config = claimd::Config { common, claim_wait, languages };
    let ran = signals::run_stage(|shutdown| claimd::run(config, shutdown).map(|()| ExitCode::Ok));
    std::process::exit(ran.code());
}
