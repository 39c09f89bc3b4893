//! The reference hub, `hubd serve`, as the suites run it: on a loopback
//! address of its own, with leases short enough for a test, and its command
//! line (`hubd --db … submit`, `status`, …) to feed and read it.

use super::http::http_exchange;
use super::layout::bin;
use super::process::Proc;
use super::wait::{now_ms, wait_for};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A loopback address of this hub's own (127.0.0.0/8 is all loopback): a
/// port is only ever taken on it by this hub, so a hub stopped for an
/// outage gets its port back, whatever the tests running beside it (in
/// this process, or another suite's, or another checkout's) bind meanwhile.
pub fn loopback() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    // pid_max is 32768 here; above it, two processes may share an address.
    let pid = std::process::id() & 0x7fff;
    let n = N.fetch_add(1, Ordering::SeqCst) % 250;
    format!("127.{}.{}.{}", pid >> 8, pid & 0xff, n + 2)
}

/// Tokens the suite's hubs and runners share.
pub const REGISTRATION_TOKEN: &str = "test-registration-token";
pub const TESTDATA_TOKEN: &str = "test-testdata-token";

/// A reference hub (`hubd serve`) on a loopback port, with its database.
pub struct Hub {
    pub proc: Proc,
    pub url: String,
    pub db: PathBuf,
    pub listen: String,
    pub extra: Vec<String>,
}

impl Hub {
    /// Starts `hubd serve` on a fresh port with a 3 s lease and a 1 s
    /// heartbeat (so lease expiry fits in a test), plus `extra` flags
    /// (which may set those too).
    pub fn start(dir: &Path, extra: &[&str]) -> Hub {
        let db = dir.join("hub.db");
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Hub::start_on(db, format!("{}:0", loopback()), extra)
    }

    fn start_on(db: PathBuf, listen: String, extra: Vec<String>) -> Hub {
        let mut cmd = Command::new(bin("hubd"));
        cmd.arg("--db")
            .arg(&db)
            .arg("serve")
            .args(["--listen", &listen])
            .args(["--registration-token", REGISTRATION_TOKEN])
            .args(["--testdata-token", TESTDATA_TOKEN]);
        for (flag, value) in [("--lease-ttl", "3"), ("--heartbeat-interval", "1"), ("--poll-interval", "1")] {
            if !extra.iter().any(|e| e == flag) {
                cmd.args([flag, value]);
            }
        }
        cmd.args(&extra).stdout(Stdio::piped());
        let mut proc = Proc::spawn(&mut cmd, "hubd");
        // hubd prints its base URL as the first line of stdout once it listens.
        let mut out = BufReader::new(proc.child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).expect("read hubd's address");
        let url = line.trim().to_string();
        assert!(url.starts_with("http://"), "hubd printed {line:?}, not its URL");
        std::thread::spawn(move || for _ in out.lines() {});
        let listen = url.trim_start_matches("http://").to_string();
        Hub { proc, url, db, listen, extra }
    }

    /// Stops the hub (SIGKILL: an outage, not a goodbye) and starts it again
    /// on the same port and database.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Kills the hub; `start_again` brings it back on the same port.
    pub fn stop(&mut self) {
        self.proc.signal(nix::sys::signal::Signal::SIGKILL);
        self.proc.wait_exit(Duration::from_secs(10));
    }

    pub fn start_again(&mut self) {
        wait_for("the hub's port to be free again", Duration::from_secs(20), || {
            std::net::TcpListener::bind(&self.listen).ok().map(|_| true)
        });
        let h = Hub::start_on(self.db.clone(), self.listen.clone(), self.extra.clone());
        let old = std::mem::replace(self, h);
        drop(old);
    }

    /// Runs a `hubd --db DB …` command and returns its stdout; panics on failure.
    pub fn cli(&self, args: &[&str]) -> String {
        hub_cli(&self.db, args)
    }

    /// Adds a problem from a directory (meta.json + TTCC.in/out).
    pub fn add_problem(&self, id: i64, dir: &Path) {
        self.cli(&["problem", "add", "--id", &id.to_string(), dir.to_str().unwrap()]);
    }

    /// Submits a source file; the new submission's id.
    pub fn submit(&self, problem: i64, language: &str, file: &Path) -> String {
        self.cli(&["submit", "--problem", &problem.to_string(), "--language", language, file.to_str().unwrap()])
            .trim()
            .to_string()
    }

    /// `hubd status`, one JSON value per submission.
    pub fn status(&self) -> Vec<serde_json::Value> {
        self.cli(&["status"])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hubd status line {l:?}: {e}")))
            .collect()
    }

    /// Waits (at most 30 s) until a runner's long poll waits at the hub.
    pub fn wait_for_a_poll(&self) {
        wait_for("a runner's long poll to wait at the hub", Duration::from_secs(30), || {
            self.cli(&["status", "--runners"]).lines().any(|l| l.contains("\"polling\":true")).then_some(())
        });
    }

    /// One figure of the hub's `/metrics`, by its name (panics without it).
    pub fn metric(&self, name: &str) -> f64 {
        let (code, page) = http_exchange("GET", &format!("{}/metrics", self.url), None, None);
        assert_eq!(code, 200);
        let page = String::from_utf8(page).unwrap();
        page.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{page}"))
    }

    /// Waits (at most 30 s) until a runner's long poll waits at the hub
    /// with at least `left` to go: time for a test to act while it waits
    /// (polls are short under the suite's `OJ_TIME_SCALE`).
    pub fn wait_for_a_poll_lasting(&self, left: Duration) {
        let db = self.db.clone();
        wait_for("a runner's long poll with time left to wait", Duration::from_secs(30), || {
            let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
            let _ = c.busy_timeout(Duration::from_secs(10));
            let until: Option<i64> =
                c.query_row("SELECT max(polling_until) FROM runners", [], |r| r.get(0)).ok().flatten();
            until.filter(|t| *t >= now_ms() + left.as_millis() as i64).map(|_| ())
        });
    }

    /// The status of one submission.
    pub fn submission(&self, id: &str) -> serde_json::Value {
        self.status()
            .into_iter()
            .find(|s| s["submission_id"] == id)
            .unwrap_or_else(|| panic!("no submission {id} in hubd status"))
    }

    /// Waits until every submission is finished (has a verdict).
    pub fn wait_all_judged(&self, limit: Duration) -> Vec<serde_json::Value> {
        wait_for("every submission to be judged", limit, || {
            let s = self.status();
            s.iter().all(|x| x["state"] == "done").then_some(s)
        })
    }
}

/// Runs `hubd --db DB args…`, returning stdout; panics with stderr on failure.
pub fn hub_cli(db: &Path, args: &[&str]) -> String {
    let out = Command::new(bin("hubd")).arg("--db").arg(db).args(args).output().expect("run hubd");
    assert!(out.status.success(), "hubd {args:?} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}
