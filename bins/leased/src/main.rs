//! `leased`: its command line, logger, signals and exit code; the work is
//! `ojrunner::stage::leased::run`.

use clap::Parser;
use ojrunner::config::Common;
use ojrunner::stage::leased;
use ojrunner_daemon::{exit_code, signals};

/// leased: heartbeats for every job the runner holds.
#[derive(Parser, Debug)]
#[command(name = "leased", version, about = "Keep the leases of the jobs the runner holds")]
struct Cli {
    #[command(flatten)]
    common: Common,
}

fn main() {
    ojrunner_daemon::fds::keep_inherited_fds_private();
    ojrunner_daemon::logger::init("leased");
    let cli = Cli::parse();
    let ran = signals::forwarded().and_then(|shutdown| leased::run(&cli.common, shutdown));
    std::process::exit(exit_code(ran).code());
}
