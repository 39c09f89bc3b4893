//! `hubd`: the reference hub's program. Its command line, logger, signals,
//! dispatch and exit code; the hub itself is the `ojrunner-hub` crate.

use clap::{Parser, Subcommand};
use ojrunner_daemon::{duration, signals, ExitCode};
use ojrunner_hub::{db, fault, problem, queue, runners, server, status, submission, wake, Context, Failure};
use ojrunner_protocol::RunnerConfig;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "hubd", version, about = "The reference hub of the ojrunner protocol, on an SQLite queue")]
struct Cli {
    /// The hub's database (created if missing).
    #[arg(long, global = true, default_value = "hubd.db", value_name = "FILE")]
    db: PathBuf,
    /// The language table whose names submit takes: the runner's (default:
    /// the built-in copy of etc/languages.json).
    #[arg(long, global = true, env = "OJ_LANGUAGES", value_name = "FILE")]
    languages: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the hub protocol until SIGTERM or SIGINT.
    Serve(Serve),
    /// Manage problems.
    #[command(subcommand)]
    Problem(ProblemCommand),
    /// Submit a source file (or a ready code zip); prints the submission id.
    Submit {
        #[arg(long)]
        problem: i64,
        /// A language id, or a name in the language table (--languages).
        #[arg(long, value_name = "LANG")]
        language: String,
        /// Send this JSON instead of the job payload ({{job_id}}, {{submission_id}}
        /// and {{code_url}} are replaced).
        #[arg(long, value_name = "JSON")]
        raw_job: Option<String>,
        file: PathBuf,
    },
    /// Queue a new job for a submission; prints the job id.
    Rejudge { submission: String },
    /// One JSON line per submission (or per runner, with --runners).
    Status {
        #[arg(long)]
        runners: bool,
    },
    /// Answer the next matching requests with an error status, a scripted
    /// answer, or a body cut short (outage and hostile-hub drills).
    Fault {
        /// The status to answer, unprocessed (without it, the hub's own answer, cut).
        #[arg(long, required_unless_present_any = ["clear", "cut_after"])]
        status: Option<u16>,
        #[arg(long, default_value_t = 1)]
        count: i64,
        #[arg(long, value_name = "STR")]
        path_contains: Option<String>,
        /// A Location header (a redirect, with --status 301 and the like).
        #[arg(long, value_name = "URL", requires = "status")]
        location: Option<String>,
        /// The body to send instead of the hub's error (a proxy's HTML page).
        #[arg(long, value_name = "TEXT", requires = "status")]
        body: Option<String>,
        /// The body's Content-Type (default text/html with --body).
        #[arg(long, value_name = "TYPE", requires = "body")]
        content_type: Option<String>,
        /// Send only this many bytes of the body, then close the connection.
        #[arg(long, value_name = "BYTES")]
        cut_after: Option<u64>,
        /// Wait this many seconds before the cut (a body that hangs).
        #[arg(long, value_name = "SEC", requires = "cut_after")]
        hang: Option<String>,
        /// Remove every rule.
        #[arg(long, conflicts_with_all = ["status", "path_contains", "cut_after"])]
        clear: bool,
    },
}

#[derive(Subcommand, Debug)]
enum ProblemCommand {
    /// Add (or replace) a problem from DIR: meta.json, TTCC.in/.out, other
    /// files; or an ICPC problem package (problem.yaml, data/, output_validators/).
    Add {
        #[arg(long)]
        id: i64,
        dir: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
struct Serve {
    /// Where to listen (port 0: any free port; the URL is printed).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: String,
    /// The shared secret runners register with (none: registration closed).
    #[arg(long, env = "RUNNER_REGISTRATION_TOKEN", hide_env_values = true, value_name = "T")]
    registration_token: Option<String>,
    /// Read the registration token from the first line of FILE.
    #[arg(long, value_name = "FILE")]
    registration_token_file: Option<PathBuf>,
    /// The token of the testdata channel (Normal-OJ's SANDBOX_TOKEN).
    #[arg(long, env = "SANDBOX_TOKEN", hide_env_values = true, value_name = "S")]
    testdata_token: Option<String>,
    /// Seconds a lease lasts without a heartbeat (decimal allowed).
    #[arg(long, default_value = "30", value_name = "SEC")]
    lease_ttl: String,
    /// Seconds between heartbeats (advertised to runners, rounded up to whole seconds).
    #[arg(long, default_value = "15", value_name = "SEC")]
    heartbeat_interval: String,
    /// Seconds between polls when idle (advertised to runners, rounded up to whole seconds).
    #[arg(long, default_value = "3", value_name = "SEC")]
    poll_interval: String,
    /// Jobs a runner may hold at once (advertised to runners).
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_concurrent_jobs: u32,
    /// Claims plus counted aborts before a job ends as JE.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: u32,
    /// Write "\n" to this fd and close it once listening (s6 readiness).
    #[arg(long, value_name = "N")]
    notify_fd: Option<i32>,
    /// Client connections open at once, in all (more are closed at once).
    #[arg(long, default_value_t = 16384, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Client connections open at once from one address: a runner holds
    /// about two (a poll and a beat).
    #[arg(long, default_value_t = 4096, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections_per_address: u32,
}

fn main() {
    ojrunner_daemon::fds::keep_inherited_fds_private();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version are clap errors that go to stdout.
            let code = if e.use_stderr() { ExitCode::Usage } else { ExitCode::Ok };
            std::process::exit(code.code());
        }
    };
    ojrunner_daemon::logger::init("hubd");
    std::process::exit(ojrunner_daemon::exit_code(run(cli).map(|()| ExitCode::Ok)).code());
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Serve(s) => serve(cli.db, s),
        Command::Problem(ProblemCommand::Add { id, dir }) => {
            let p = problem::load_dir(id, &dir)?;
            problem::store(&mut db::open(&cli.db)?, id, &p)?;
            log::info!("problem {id} stored from {} (checksum {})", dir.display(), p.checksum);
            Ok(())
        }
        Command::Submit { problem, language, raw_job, file } => {
            let table = submission::LanguageTable::load(cli.languages.as_deref())?;
            let language = table.parse_language(&language)?;
            let code = submission::code_zip(&file, language, &table)?;
            println!("{}", submission::submit(&mut db::open(&cli.db)?, problem, language, &code, raw_job.as_deref())?);
            wake::hint(&cli.db);
            Ok(())
        }
        Command::Rejudge { submission: sid } => {
            println!("{}", submission::rejudge(&mut db::open(&cli.db)?, &sid)?);
            wake::hint(&cli.db);
            Ok(())
        }
        Command::Status { runners: by_runner } => {
            signals::default_sigpipe();
            let conn = db::open(&cli.db)?;
            let lines = if by_runner { runners::list(&conn) } else { status::submissions(&conn) };
            for line in lines.context(|| "reading the status".into())? {
                println!("{line}");
            }
            Ok(())
        }
        Command::Fault { status, count, path_contains, location, body, content_type, cut_after, hang, clear } => {
            let mut conn = db::open(&cli.db)?;
            let hang = hang.map(|v| duration::seconds("--hang", &v)).transpose().map_err(|e| Failure::config(e.0))?;
            let rule = fault::Rule { status, location, body, content_type, cut_after, hang };
            if clear { fault::clear(&mut conn) } else { fault::add(&mut conn, &rule, count, path_contains.as_deref()) }
                .context(|| "storing the fault rule".into())
        }
    }
}

fn serve(db: PathBuf, s: Serve) -> Result<(), Failure> {
    let registration_token = match &s.registration_token_file {
        Some(file) => Some(
            ojrunner_daemon::token_file::read(file)
                .map_err(|e| Failure::config(format!("registration token file {}: {e}", file.display())))?,
        ),
        None => s.registration_token,
    };
    let registration_token = registration_token.filter(|t| !t.is_empty());
    if registration_token.is_none() {
        log::warn!("no registration token configured: every registration will be refused");
    }
    // TERM and INT stop it, HUP and CONT must not kill it: the same
    // signals as every ojrunner program, the same way.
    let positive = |flag: &str, v: &str| match duration::seconds(flag, v) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(Failure::config(format!("{flag}={v:?} must be more than 0 seconds"))),
        Err(e) => Err(Failure::config(e.0)),
    };
    let lease_ttl = positive("--lease-ttl", &s.lease_ttl)?;
    let heartbeat_interval = positive("--heartbeat-interval", &s.heartbeat_interval)?;
    let poll_interval = positive("--poll-interval", &s.poll_interval)?;
    let shutdown = signals::forwarded()?;
    server::serve(
        server::ServeConfig {
            db,
            listen: s.listen,
            registration_token,
            testdata_token: s.testdata_token.filter(|t| !t.is_empty()),
            runner_config: RunnerConfig {
                heartbeat_interval_sec: duration::whole_seconds(heartbeat_interval) as i64,
                poll_interval_sec: duration::whole_seconds(poll_interval) as i64,
                max_concurrent_jobs: s.max_concurrent_jobs.into(),
            },
            policy: queue::Policy {
                lease_ttl_ms: lease_ttl.as_millis().try_into().unwrap_or(i64::MAX),
                max_attempts: s.max_attempts.into(),
            },
            notify_fd: s.notify_fd,
            max_connections: s.max_connections as usize,
            max_connections_per_address: s.max_connections_per_address as usize,
        },
        shutdown,
    )
}
