//! `reportd`: its command line, logger, signals and exit code; the work is
//! `ojrunner::stage::reportd::run`.

use clap::Parser;
use ojrunner::config::Common;
use ojrunner::stage::reportd;
use ojrunner_daemon::{exit_code, signals};

/// reportd: delivers outcomes and events to the hub.
#[derive(Parser, Debug)]
#[command(name = "reportd", version, about = "Deliver outcomes and progress events to the hub")]
struct Cli {
    #[command(flatten)]
    common: Common,
}

fn main() {
    ojrunner_daemon::fds::keep_inherited_fds_private();
    ojrunner_daemon::logger::init("reportd");
    let cli = Cli::parse();
    let ran = signals::forwarded().and_then(|shutdown| reportd::run(&cli.common, shutdown));
    std::process::exit(exit_code(ran).code());
}
