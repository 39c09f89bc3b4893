//! What an operator watches, in the Prometheus text format (`GET
//! /metrics`): the queue from the database at each scrape, counters the
//! server keeps since it started, its build and its process.

use rusqlite::Connection;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters since the server started.
#[derive(Default)]
pub struct Counters {
    pub claims: AtomicU64,
    pub leases_lapsed: AtomicU64,
    pub finalised_je: AtomicU64,
    pub results_landed: AtomicU64,
    pub polls_cancelled: AtomicU64,
    pub connections_refused: AtomicU64,
    pub requests: AtomicU64,
    /// Answers by class: 2xx, 3xx, 4xx, 5xx.
    pub answers: [AtomicU64; 4],
    pub panics: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn answered(&self, code: u16) {
        if let Some(class) = (code / 100).checked_sub(2).and_then(|i| self.answers.get(i as usize)) {
            Counters::add(class, 1);
        }
    }
}

/// The queue as the database has it now.
pub struct Queue {
    pending: i64,
    oldest_pending_ms: Option<i64>,
    leased: i64,
    runners: i64,
    runners_seen: i64,
}

/// Reads the queue; `seen_within_ms`: how recently a runner must have
/// called to count as seen.
pub fn queue(conn: &Connection, seen_within_ms: i64) -> rusqlite::Result<Queue> {
    let now = super::db::now_ms();
    let (pending, oldest, leased): (i64, Option<i64>, i64) = conn.query_row(
        "SELECT COUNT(*) FILTER (WHERE j.state = 'pending'),
                MIN(j.created_at) FILTER (WHERE j.state = 'pending'),
                COUNT(*) FILTER (WHERE j.state = 'leased')
         FROM jobs j JOIN submissions s ON s.current_job = j.id WHERE j.state IN ('pending', 'leased')",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let (runners, runners_seen): (i64, i64) = conn.query_row(
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE last_seen >= ?1) FROM runners",
        [now - seen_within_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Queue { pending, oldest_pending_ms: oldest.map(|t| (now - t).max(0)), leased, runners, runners_seen })
}

/// What the server holds at the moment of a scrape.
pub struct Now {
    pub polls_waiting: usize,
    pub connections_open: usize,
    /// `complete` bodies over the small cap being read.
    pub large_bodies_reading: usize,
}

/// The page: `queue`, the counters and what the server holds now.
pub fn render(q: &Queue, c: &Counters, now: &Now) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, value: String| {
        let _ = writeln!(out, "# HELP hubd_{name} {help}\n# TYPE hubd_{name} {kind}\nhubd_{name} {value}");
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    metric("jobs_pending", "gauge", "Jobs waiting for a runner (the queue depth).", q.pending.to_string());
    metric(
        "oldest_pending_age_seconds",
        "gauge",
        "How long the oldest pending job has waited (0 with none).",
        format!("{:.3}", q.oldest_pending_ms.unwrap_or(0) as f64 / 1000.0),
    );
    metric("jobs_leased", "gauge", "Jobs held by a runner now.", q.leased.to_string());
    metric("runners_registered", "gauge", "Runner identities registered.", q.runners.to_string());
    metric("runners_seen", "gauge", "Runners that called within the last lease time.", q.runners_seen.to_string());
    metric("polls_waiting", "gauge", "next-job long polls waiting for work now.", now.polls_waiting.to_string());
    metric("connections_open", "gauge", "Client connections open now.", now.connections_open.to_string());
    metric(
        "large_bodies_reading",
        "gauge",
        "Results over 64 KiB being read now (at most two at once).",
        now.large_bodies_reading.to_string(),
    );
    metric("claims_total", "counter", "Jobs handed out (claims and reclaims): attempts spent.", load(&c.claims));
    metric("leases_lapsed_total", "counter", "Leases found expired.", load(&c.leases_lapsed));
    metric("jobs_finalised_je_total", "counter", "Jobs ended as JE with their attempts spent.", load(&c.finalised_je));
    metric("results_landed_total", "counter", "Results that landed.", load(&c.results_landed));
    metric("polls_cancelled_total", "counter", "Long polls ended by DELETE.", load(&c.polls_cancelled));
    metric(
        "connections_refused_total",
        "counter",
        "Connections closed at once: over --max-connections or --max-connections-per-address.",
        load(&c.connections_refused),
    );
    metric("requests_total", "counter", "Requests received.", load(&c.requests));
    let _ = writeln!(
        out,
        "# HELP hubd_answers_total Requests answered, by status class.\n# TYPE hubd_answers_total counter"
    );
    for (i, class) in ["2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
        let _ = writeln!(out, "hubd_answers_total{{class=\"{class}\"}} {}", load(&c.answers[i]));
    }
    let _ = writeln!(
        out,
        "# HELP hubd_handler_panics_total Requests whose handler panicked (answered 500).\n# TYPE hubd_handler_panics_total counter\nhubd_handler_panics_total {}",
        load(&c.panics)
    );
    out.push_str(&ojrunner_daemon::process::build_info("hubd", "hubd", env!("CARGO_PKG_VERSION")));
    out.push_str(&ojrunner_daemon::process::render("hubd"));
    out
}
