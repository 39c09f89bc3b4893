//! `leased`: its command line, logger, signals and exit code; the work is
//! `ojrunner::stage::leased::run`.

use clap::Parser;
use ojrunner::config::Common;
use ojrunner::stage::leased;
use ojrunner_daemon::signals;

/// leased: heartbeats for every job the runner holds.
#[derive(Parser, Debug)]
#[command(name = "leased", version, about = "Keep the leases of the jobs the runner holds")]
struct Cli {
    #[command(flatten)]
    common: Common,
}

fn main() {
    let cli = ojrunner_daemon::start("leased", Cli::parse);
    std::process::exit(signals::run_stage(|shutdown| leased::run(&cli.common, shutdown)).code());
}
