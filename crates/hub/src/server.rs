//! The HTTP side of the hub (`PROTOCOL.md`): routes, authentication, status
//! codes. A fixed pool of worker threads pulls requests from one listener;
//! each owns its database connection, and each request is one short
//! transaction, never held across a sleep (a long poll re-asks every
//! 100 ms). The queue rules themselves live in [`super::queue`].

use super::{db, fault, problem, queue, runners, submission, Context, Failure};
use ojrunner_daemon::control::Event;
use ojrunner_daemon::readiness;
use ojrunner_daemon::signals::{self, Shutdown};
use ojrunner_protocol::{envelope, AbortReason, Registration, RunnerConfig};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_http::{Method, Request};

/// Requests served at once: long polls hold a worker each.
const WORKERS: usize = 16;
/// The largest body taken (a result carries whole outputs).
const MAX_BODY: u64 = 256 << 20;
/// The longest `next-job?wait=S` honoured.
const MAX_WAIT_SEC: f64 = 30.0;
/// The most event lines one batch may carry.
const MAX_EVENTS: usize = 200;

/// What `hubd serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub db: PathBuf,
    pub listen: String,
    /// `None`: registration is closed (every register is 401).
    pub registration_token: Option<String>,
    /// `None`: the testdata channel is closed (every call is 401).
    pub testdata_token: Option<String>,
    /// Advertised to runners at registration.
    pub runner_config: RunnerConfig,
    pub policy: queue::Policy,
    /// s6-style readiness: write "\n" to this fd and close it once listening.
    pub notify_fd: Option<i32>,
}

struct HubServer {
    cfg: ServeConfig,
    base_url: String,
    /// The port listened on (a fault closes connections to it by hand).
    port: u16,
    /// Listening on 0.0.0.0 or `[::]`: code URLs use the Host the runner used.
    wildcard: bool,
    shutdown: AtomicBool,
}

/// Serves until `shutdown` says TERM or INT (then finishes the requests in
/// hand) or QUIT (then stops at once).
pub fn serve(cfg: ServeConfig, shutdown: Shutdown) -> Result<(), Failure> {
    let mut conns = (0..WORKERS).map(|_| db::open(&cfg.db)).collect::<Result<Vec<_>, _>>()?;
    let extended = queue::extend_leases(&mut conns[0], &cfg.policy).context(|| "extending leases".into())?;
    if extended > 0 {
        log::info!("{extended} leased jobs given a full lease again (the hub was away)");
    }
    let server = tiny_http::Server::http(&cfg.listen)
        .map_err(|e| Failure::runtime(format!("listening on {}: {e}", cfg.listen)))?;
    let addr = server.server_addr().to_ip().ok_or_else(|| Failure::runtime("not listening on an IP"))?;
    let Shutdown { inbox, .. } = shutdown;
    let hub = Arc::new(HubServer {
        base_url: format!("http://{addr}"),
        port: addr.port(),
        wildcard: addr.ip().is_unspecified(),
        cfg,
        shutdown: AtomicBool::new(false),
    });
    let server = Arc::new(server);
    let workers: Vec<_> = conns
        .into_iter()
        .map(|conn| {
            let (hub, server) = (hub.clone(), server.clone());
            std::thread::spawn(move || work(&hub, &server, conn))
        })
        .collect();

    // Tests and scripts read the URL as the first line of stdout.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", hub.base_url).and_then(|_| out.flush());
    drop(out);
    if let Some(fd) = hub.cfg.notify_fd {
        readiness::notify_fd(fd).map_err(|e| Failure::config(format!("--notify-fd {fd}: {e}")))?;
    }
    readiness::sd_notify("READY=1");
    log::info!("listening on {} (database {})", hub.base_url, hub.cfg.db.display());

    for sig in inbox.rx.iter().filter_map(|event| match event {
        Event::Signal(sig) => Some(sig),
        _ => None,
    }) {
        match sig {
            libc::SIGHUP => log::info!("SIGHUP: nothing to reload (the database is read on every request)"),
            libc::SIGCONT | libc::SIGCHLD => {}
            libc::SIGQUIT => {
                log::info!("SIGQUIT: stopped at once");
                readiness::sd_notify("STOPPING=1");
                return Ok(());
            }
            _ => {
                log::info!("{}: stopping", signals::name(sig));
                break;
            }
        }
    }
    readiness::sd_notify("STOPPING=1");
    hub.shutdown.store(true, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    log::info!("stopped");
    Ok(())
}

fn work(hub: &HubServer, server: &tiny_http::Server, mut conn: Connection) {
    while !hub.shutdown.load(Ordering::SeqCst) {
        match server.recv_timeout(Duration::from_millis(200)) {
            Ok(Some(req)) => handle(hub, &mut conn, req),
            Ok(None) => {}
            Err(e) => {
                log::warn!("receiving a request: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// An answer, before it is written.
struct Reply {
    code: u16,
    body: Vec<u8>,
    content_type: Option<String>,
    location: Option<String>,
}

impl Reply {
    fn empty(code: u16) -> Reply {
        Reply { code, body: Vec::new(), content_type: None, location: None }
    }
    fn json(code: u16, text: String) -> Reply {
        Reply { code, body: text.into_bytes(), content_type: Some("application/json".into()), location: None }
    }
    fn zip(body: Vec<u8>) -> Reply {
        Reply { code: 200, body, content_type: Some("application/zip".into()), location: None }
    }
    fn error(code: u16, message: &str) -> Reply {
        Reply::json(code, json!({ "error": message }).to_string())
    }
}

fn handle(hub: &HubServer, conn: &mut Connection, mut req: Request) {
    let url = req.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let method = req.method().clone();
    let (rule, fault_error) = match fault::take(conn, &url) {
        Ok(rule) => (rule, None),
        Err(e) => (None, Some(e)),
    };
    let reply = match (&rule, fault_error) {
        (_, Some(e)) => {
            log::error!("{method} {path}: checking fault rules: {e}");
            Reply::error(500, "internal error")
        }
        (Some(fault::Rule { status: Some(code), .. }), _) => {
            log::info!("injected fault: {method} {path} answered {code}");
            scripted(*code, rule.as_ref().unwrap())
        }
        _ => route(hub, conn, &mut req, path, query).unwrap_or_else(|e| {
            log::error!("{method} {path}: {e}");
            Reply::error(500, "internal error")
        }),
    };
    // The path only: a query may hold the testdata token.
    log::debug!("{method} {path} -> {}", reply.code);
    if let Some(fault::Rule { cut_after: Some(cut), hang, .. }) = &rule {
        log::info!("injected fault: {method} {path}: body cut after {cut} bytes");
        return respond_cut(hub, req, reply, *cut, *hang);
    }
    let mut response = tiny_http::Response::from_data(reply.body).with_status_code(reply.code);
    if let Some(ct) = reply.content_type {
        response = response.with_header(header("Content-Type", &ct));
    }
    if let Some(location) = reply.location {
        response = response.with_header(header("Location", &location));
    }
    if let Err(e) = req.respond(response) {
        log::debug!("{method} {path}: answering: {e}");
    }
}

/// The answer a fault rule scripts.
fn scripted(code: u16, rule: &fault::Rule) -> Reply {
    let mut reply = match &rule.body {
        Some(body) => Reply {
            code,
            body: body.clone().into_bytes(),
            content_type: Some(rule.content_type.clone().unwrap_or_else(|| "text/html".into())),
            location: None,
        },
        None => Reply::error(code, "injected fault"),
    };
    reply.location = rule.location.clone();
    reply
}

/// Writes `reply` announcing its whole length but sends only `cut` bytes of
/// its body, waits `hang`, then closes the connection: a body that ends
/// early (or hangs first) as a dying proxy or hub sends it.
fn respond_cut(hub: &HubServer, req: Request, reply: Reply, cut: u64, hang: Option<Duration>) {
    let peer = req.remote_addr().copied();
    let mut head = format!("HTTP/1.1 {} Fault\r\nContent-Length: {}\r\n", reply.code, reply.body.len());
    if let Some(ct) = &reply.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    let mut w = req.into_writer();
    let sent = reply.body.len().min(cut as usize);
    let _ = w.write_all(head.as_bytes()).and_then(|_| w.write_all(&reply.body[..sent])).and_then(|_| w.flush());
    if let Some(d) = hang {
        std::thread::sleep(d);
    }
    drop(w);
    if let Some(peer) = peer {
        close_connection(hub, peer);
    }
}

/// Closes this server's connection to `peer` (tiny_http keeps it open for
/// the next request): the socket is found among our descriptors by its two
/// addresses and shut down.
fn close_connection(hub: &HubServer, peer: std::net::SocketAddr) {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::FileTypeExt;
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return };
    for fd in fds.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
        let is_socket = std::fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| m.file_type().is_socket());
        if !is_socket {
            continue;
        }
        // SAFETY: fd is an open socket of ours; ManuallyDrop leaves it open
        // for its owner, tiny_http, which sees the shutdown as a closed peer.
        let s = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        if s.peer_addr().ok() == Some(peer) && s.local_addr().ok().map(|a| a.port()) == Some(hub.port) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

/// Which endpoint a path names.
enum Endpoint<'a> {
    Register,
    Heartbeat(&'a str),
    NextJob(&'a str),
    Complete(&'a str, &'a str),
    Abort(&'a str, &'a str),
    Events(&'a str, &'a str),
    Problem(i64, &'a str),
    Code(&'a str),
}

fn route(
    hub: &HubServer,
    conn: &mut Connection,
    req: &mut Request,
    path: &str,
    query: &str,
) -> rusqlite::Result<Reply> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (want, endpoint) = match segments.as_slice() {
        ["runners", "register"] => (Method::Post, Endpoint::Register),
        ["runners", rn, "heartbeat"] => (Method::Post, Endpoint::Heartbeat(rn)),
        ["runners", rn, "next-job"] => (Method::Get, Endpoint::NextJob(rn)),
        ["runners", rn, "jobs", jb, "complete"] => (Method::Put, Endpoint::Complete(rn, jb)),
        ["runners", rn, "jobs", jb, "abort"] => (Method::Put, Endpoint::Abort(rn, jb)),
        ["runners", rn, "jobs", jb, "events"] => (Method::Post, Endpoint::Events(rn, jb)),
        ["problem", pid, what @ ("meta" | "checksum" | "testdata")] => match pid.parse() {
            Ok(pid) => (Method::Get, Endpoint::Problem(pid, what)),
            Err(_) => return Ok(Reply::error(404, "problem ids are integers")),
        },
        ["code", file] if file.ends_with(".zip") => (Method::Get, Endpoint::Code(&file[..file.len() - 4])),
        _ => return Ok(Reply::error(404, "no such endpoint")),
    };
    if *req.method() != want {
        return Ok(Reply::error(405, "method not allowed"));
    }
    let runner = match endpoint {
        Endpoint::Heartbeat(rn) | Endpoint::NextJob(rn) => Some(rn),
        Endpoint::Complete(rn, _) | Endpoint::Abort(rn, _) | Endpoint::Events(rn, _) => Some(rn),
        _ => None,
    };
    if let Some(rn) = runner {
        let token = req
            .headers()
            .iter()
            .find(|h| h.field.equiv("Authorization"))
            .and_then(|h| h.value.as_str().strip_prefix("Bearer "))
            .map(str::trim);
        if !token.map_or(Ok(false), |t| runners::authenticate(conn, rn, t))? {
            return Ok(Reply::error(401, "invalid runner token"));
        }
    }
    match endpoint {
        Endpoint::Register => register(hub, conn, req),
        Endpoint::Heartbeat(rn) => heartbeat(hub, conn, req, rn),
        Endpoint::NextJob(rn) => next_job(hub, conn, req, rn, query),
        Endpoint::Complete(rn, jb) => match read_body(req) {
            Ok(body) => queue::complete(conn, rn, jb, &body).map(|landing| match landing {
                queue::Landing::Rejected(why) => Reply::error(400, &why),
                other => reply_for(other.code()),
            }),
            Err(reply) => Ok(reply),
        },
        Endpoint::Abort(rn, jb) => abort(hub, conn, req, rn, jb),
        Endpoint::Events(_, jb) => events(conn, req, jb),
        Endpoint::Problem(pid, what) => testdata_channel(hub, conn, pid, what, query),
        Endpoint::Code(jb) => Ok(match submission::code_of_job(conn, jb)? {
            Some(zip) => Reply::zip(zip),
            None => Reply::error(404, "no such job"),
        }),
    }
}

fn reply_for(code: u16) -> Reply {
    match code {
        404 => Reply::error(404, "no such job"),
        409 => Reply::error(409, "the job is not held by this runner"),
        other => Reply::empty(other),
    }
}

/// The body as UTF-8 text, or the reply refusing it.
fn read_body(req: &mut Request) -> Result<String, Reply> {
    let mut buf = Vec::new();
    if let Err(e) = req.as_reader().take(MAX_BODY + 1).read_to_end(&mut buf) {
        return Err(Reply::error(400, &format!("reading the body: {e}")));
    }
    if buf.len() as u64 > MAX_BODY {
        return Err(Reply::error(413, "body too large"));
    }
    String::from_utf8(buf).map_err(|_| Reply::error(400, "the body is not UTF-8"))
}

/// The body as a JSON object, or the reply refusing it.
fn read_json(req: &mut Request) -> Result<Value, Reply> {
    let text = read_body(req)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(Reply::error(400, "the body is not a JSON object")),
    }
}

fn register(hub: &HubServer, conn: &mut Connection, req: &mut Request) -> rusqlite::Result<Reply> {
    let body = match read_json(req) {
        Ok(v) => v,
        Err(reply) => return Ok(reply),
    };
    let given = body.get("registration_token").and_then(Value::as_str).unwrap_or("");
    // Fail closed: no configured token means nobody may register.
    let ok = hub.cfg.registration_token.as_deref().is_some_and(|t| runners::same(t.as_bytes(), given.as_bytes()));
    let name: String = body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(100).collect();
    if !ok {
        log::warn!("registration of {name:?} refused: bad registration token");
        return Ok(Reply::error(401, "invalid registration token"));
    }
    let (runner_id, token) = runners::register(conn, &name)?;
    log::info!("runner {runner_id} registered as {name:?}");
    let answer = Registration { runner_id, token, config: hub.cfg.runner_config.clone() };
    Ok(Reply::json(201, serde_json::to_string(&answer).expect("a registration serialises")))
}

fn heartbeat(hub: &HubServer, conn: &mut Connection, req: &mut Request, rn: &str) -> rusqlite::Result<Reply> {
    let ids = read_json(req).and_then(|v| {
        serde_json::from_value::<Vec<String>>(v.get("active_job_ids").cloned().unwrap_or(Value::Null))
            .map_err(|_| Reply::error(400, "active_job_ids must be a list of job ids"))
    });
    match ids {
        Ok(ids) => {
            let renewed = queue::heartbeat(conn, rn, &ids, &hub.cfg.policy)?;
            log::debug!("heartbeat from {rn}: {renewed} of {} leases renewed", ids.len());
            Ok(Reply::empty(204))
        }
        Err(reply) => Ok(reply),
    }
}

fn next_job(hub: &HubServer, conn: &mut Connection, req: &Request, rn: &str, query: &str) -> rusqlite::Result<Reply> {
    let wait = query_param(query, "wait").and_then(|w| w.parse::<f64>().ok()).unwrap_or(0.0);
    let until = Instant::now() + Duration::from_secs_f64(wait.clamp(0.0, MAX_WAIT_SEC));
    runners::touch(conn, rn)?;
    let polling = wait > 0.0;
    if polling {
        runners::polling(conn, rn, Some(db::now_ms() + (until - Instant::now()).as_millis() as i64))?;
    }
    let reply = loop {
        if let Some(claim) = queue::claim(conn, rn, &hub.cfg.policy)? {
            break Reply::json(200, queue::payload(&claim, &base_url(hub, req)));
        }
        if Instant::now() >= until || hub.shutdown.load(Ordering::SeqCst) {
            break Reply::empty(204);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if polling {
        runners::polling(conn, rn, None)?;
    }
    Ok(reply)
}

/// The base of `code_url`: where this hub listens, or, when it listens on
/// every address, the host the runner reached it by.
fn base_url(hub: &HubServer, req: &Request) -> String {
    let host = req.headers().iter().find(|h| h.field.equiv("Host")).map(|h| h.value.as_str().to_string());
    match host {
        Some(host) if hub.wildcard => format!("http://{host}"),
        _ => hub.base_url.clone(),
    }
}

fn abort(hub: &HubServer, conn: &mut Connection, req: &mut Request, rn: &str, jb: &str) -> rusqlite::Result<Reply> {
    let reason = match read_json(req) {
        Ok(v) => v.get("reason").and_then(Value::as_str).and_then(AbortReason::parse),
        Err(reply) => return Ok(reply),
    };
    let Some(reason) = reason else {
        return Ok(Reply::error(400, "reason must be drain, prep_failed or rejected"));
    };
    Ok(match queue::abort(conn, rn, jb, reason, &hub.cfg.policy)? {
        queue::Handback::Requeued => Reply::json(202, r#"{"outcome": "requeued"}"#.into()),
        queue::Handback::FinalisedJe => Reply::json(202, r#"{"outcome": "JE"}"#.into()),
        queue::Handback::Superseded => Reply::json(202, r#"{"outcome": "superseded"}"#.into()),
        other => reply_for(other.code()),
    })
}

fn events(conn: &mut Connection, req: &mut Request, jb: &str) -> rusqlite::Result<Reply> {
    let events = match read_json(req) {
        Ok(mut v) => match v.get_mut("events").map(Value::take) {
            Some(Value::Array(events)) => events,
            _ => return Ok(Reply::error(400, "events must be a list")),
        },
        Err(reply) => return Ok(reply),
    };
    if events.len() > MAX_EVENTS {
        return Ok(Reply::error(400, &format!("{} events in one batch (at most {MAX_EVENTS})", events.len())));
    }
    Ok(if queue::add_events(conn, jb, &events)? { Reply::empty(204) } else { Reply::error(404, "no such job") })
}

/// `/problem/{pid}/meta|checksum|testdata?token=S`, wrapped as Normal-OJ's
/// backend wraps it (the zip aside).
fn testdata_channel(hub: &HubServer, conn: &Connection, pid: i64, what: &str, query: &str) -> rusqlite::Result<Reply> {
    let given = query_param(query, "token").unwrap_or_default();
    if !hub.cfg.testdata_token.as_deref().is_some_and(|t| runners::same(t.as_bytes(), given.as_bytes())) {
        return Ok(Reply::error(401, "Invalid sandbox token"));
    }
    let not_found = || Reply::error(404, "Problem not found");
    if what == "testdata" {
        return Ok(problem::testdata(conn, pid)?.map_or_else(not_found, Reply::zip));
    }
    let Some((meta, checksum)) = problem::meta_and_checksum(conn, pid)? else {
        return Ok(not_found());
    };
    Ok(if what == "meta" {
        // Spliced as text: the checksum covers these exact bytes, key order
        // included, and a Python runner recomputes it from them.
        Reply::json(200, format!(r#"{{"status": "ok", "message": "", "data": {meta}}}"#))
    } else {
        Reply::json(200, envelope(json!(checksum)).to_string())
    })
}

/// A query parameter, percent-decoded.
fn query_param(query: &str, name: &str) -> Option<String> {
    let raw = query.split('&').map(|kv| kv.split_once('=').unwrap_or((kv, ""))).find(|(k, _)| *k == name)?.1;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hub serves in-process until the `Shutdown` its caller handed it
    /// says TERM: no signal is sent or installed.
    #[test]
    fn the_hub_stops_through_its_shutdown_argument() {
        let dir = ojrunner_daemon::test_dir("ojhubstop");
        let cfg = ServeConfig {
            db: dir.join("hub.db"),
            listen: "127.0.0.1:0".into(),
            registration_token: None,
            testdata_token: None,
            runner_config: RunnerConfig { heartbeat_interval_sec: 15, poll_interval_sec: 3, max_concurrent_jobs: 8 },
            policy: queue::Policy { lease_ttl_ms: 30_000, max_attempts: 3 },
            notify_fd: None,
        };
        let (shutdown, stopper) = Shutdown::new();
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(serve(cfg, shutdown).map_err(|f| f.to_string()));
        });
        assert!(done.recv_timeout(Duration::from_millis(500)).is_err(), "the hub ended before it was stopped");
        assert!(stopper.stop(), "the hub's inbox is gone before it was stopped");
        let ended = done.recv_timeout(Duration::from_secs(10));
        assert_eq!(ended, Ok(Ok(())), "the hub was not stopped by its shutdown within 10 s");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn query_parameters_are_percent_decoded() {
        assert_eq!(super::query_param("wait=5&token=a%2Bb+c%zz", "token").as_deref(), Some("a+b c%zz"));
        assert_eq!(super::query_param("wait=5", "token"), None);
        assert_eq!(super::query_param("token", "token").as_deref(), Some(""));
    }
}
