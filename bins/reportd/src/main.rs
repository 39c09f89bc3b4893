//! `reportd`: its command line, logger, signals and exit code; the work is
//! `ojrunner::stage::reportd::run`.

use clap::Parser;
use ojrunner::config::Common;
use ojrunner::stage::reportd;
use ojrunner_daemon::signals;

/// reportd: delivers outcomes and events to the hub.
#[derive(Parser, Debug)]
#[command(name = "reportd", version, about = "Deliver outcomes and progress events to the hub")]
struct Cli {
    #[command(flatten)]
    common: Common,
}

fn main() {
    let cli = ojrunner_daemon::start("reportd", Cli::parse);
    std::process::exit(signals::run_stage(|shutdown| reportd::run(&cli.common, shutdown)).code());
}
