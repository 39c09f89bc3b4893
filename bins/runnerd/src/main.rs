//! `runnerd`: its command line (the supervisor, and the commands that talk
//! to a running one), logger, signals and exit code; the work is
//! `ojrunner::stage::runnerd`.

use clap::{Parser, Subcommand};
use ojrunner::config::Common;
use ojrunner::stage::runnerd;
use ojrunner_daemon::{exit_code, signals, ExitCode, Failure};
use std::path::PathBuf;

/// runnerd: the runner's supervisor.
#[derive(Parser, Debug)]
#[command(name = "runnerd", version, about = "Run and supervise the runner's stages; drain them in order on TERM")]
struct Cli {
    #[command(flatten)]
    common: Common,

    /// Where the stage programs are (default: beside runnerd, else
    /// ../libexec/ojrunner from it, else PATH).
    #[arg(long, env = "OJ_LIBEXEC", value_name = "DIR")]
    libexec: Option<PathBuf>,

    /// Serve the metrics (GET /metrics, Prometheus' text format) on
    /// HOST:PORT.
    #[arg(long, env = "OJ_METRICS_LISTEN", value_name = "ADDR")]
    metrics_listen: Option<String>,

    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Print the runner's state as JSON lines: the spool, then each stage.
    Status,
    /// Print the runner's metrics in the Prometheus text format (read from
    /// the spool: the runner may be running or stopped).
    Metrics,
    /// Drain a running runnerd, as TERM would (for supervisors that stop
    /// services in parallel).
    Drain {
        /// Wait until runnerd has exited.
        #[arg(long, conflicts_with = "services")]
        wait: bool,
        /// Drain the split layout instead (one service per stage): DIR
        /// holds its ojrunner-* service directories.
        #[arg(long, value_name = "DIR", requires = "supervisor")]
        services: Option<PathBuf>,
        /// The supervisor of the --services layout.
        #[arg(long, value_enum, value_name = "NAME", requires = "services")]
        supervisor: Option<ojrunner::services::Supervisor>,
    },
    /// Exit 0 if runnerd runs with every stage up (runit's ./check).
    Check,
    /// Set the spool's drain latch (nothing starts judging from then on),
    /// or lift it: the first step of a drain done by hand, for layouts
    /// that run each stage as its own service.
    Latch {
        /// Lift the latch instead.
        #[arg(long)]
        off: bool,
    },
}

fn main() {
    let cli = ojrunner_daemon::start("runnerd", Cli::parse);
    if cli.command.is_some() {
        signals::default_sigpipe();
    }
    std::process::exit(dispatch(cli).code());
}

/// The supervisor, or one of the commands.
fn dispatch(cli: Cli) -> ExitCode {
    let spool = &cli.common.spool;
    match &cli.command {
        Some(Cmd::Status) => runnerd::status(spool),
        Some(Cmd::Metrics) => runnerd::metrics(spool),
        Some(Cmd::Drain { services: Some(dir), supervisor: Some(sup), .. }) => ojrunner::services::drain(dir, *sup),
        Some(Cmd::Drain { wait, .. }) => match cli.common.drain_timeout() {
            Ok(timeout) => runnerd::drain_command(spool, *wait, timeout),
            Err(e) => exit_code(Err(Failure::from(e))),
        },
        Some(Cmd::Check) => runnerd::check(spool),
        Some(Cmd::Latch { off }) => runnerd::latch(spool, !*off),
        None => {
            let cfg = runnerd::Config { common: cli.common, libexec: cli.libexec, metrics_listen: cli.metrics_listen };
            signals::run_stage(|shutdown| runnerd::run(&cfg, shutdown))
        }
    }
}
