//! The HTTP side of the hub (`PROTOCOL.md`): connections, routes,
//! authentication, status codes.
//!
//! It runs on tokio and hyper (HTTP/1.1): a waiting long poll is a parked
//! future, not a thread, so a thousand runners' polls cost a thousand small
//! allocations, and a heartbeat never queues behind them. Database work is
//! [`super::store`]'s (one group-committing writer thread, a few readers), waiting
//! polls are [`super::polls`]', a client's share of the hub is bounded by
//! [`limits`]. A handler that panics answers 500 and costs nothing else.
//! The queue rules themselves live in [`super::queue`].

use super::limits::{self, Admission, Refused};
use super::polls::{Poll, Polls};
use super::store::{Lane, Store, Write};
use super::{db, fault, metrics, problem, queue, runners, submission, wake, Context, Failure};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HOST, LOCATION};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use ojrunner_daemon::control::Event;
use ojrunner_daemon::readiness;
use ojrunner_daemon::signals::{self, Shutdown};
use ojrunner_protocol::{envelope, AbortReason, Registration, RunnerConfig};
use serde_json::{json, Value};
use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll as TaskPoll};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// The longest `next-job?wait=S` honoured (a longer one is cut to it).
const MAX_WAIT_SEC: f64 = 30.0;
/// The most event lines one batch may carry.
const MAX_EVENTS: usize = 200;
/// Reader connections (the writer is one more).
const READERS: usize = 4;
/// How long a client may take to send a request's headers (and how long an
/// idle connection is kept between requests: hyper times both alike).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How often waiting polls look at the queue without a hint: lease expiries
/// and hints lost on the way are found within this.
const RECHECK: Duration = Duration::from_secs(1);
/// How long a TERM waits for the requests in hand before it stops anyway.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

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
    /// Open connections at most, in all and from one address.
    pub max_connections: usize,
    pub max_connections_per_address: usize,
}

struct Hub {
    cfg: ServeConfig,
    base_url: String,
    /// Listening on 0.0.0.0 or `[::]`: code URLs use the Host the runner used.
    wildcard: bool,
    store: Arc<Store>,
    polls: Polls,
    counters: metrics::Counters,
    /// Becomes true at TERM: waiting polls answer 204 at once.
    stopping: watch::Receiver<bool>,
    large_bodies: Semaphore,
    admission: Arc<Admission>,
}

/// The client's address, on each request of its connection.
#[derive(Clone, Copy)]
struct Peer(std::net::IpAddr);

/// Serves until `shutdown` says TERM or INT (then finishes the requests in
/// hand) or QUIT (then stops at once).
pub fn serve(cfg: ServeConfig, shutdown: Shutdown) -> Result<(), Failure> {
    // Before the database is opened: a second hub migrates nothing under the first.
    let _serving = wake::serve_lock(&cfg.db).map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock => Failure::runtime(e.to_string()),
        _ => Failure::config(format!("--db {}: {e}", cfg.db.display())),
    })?;
    let nofile = limits::raise_nofile();
    let mut writer = db::open(&cfg.db)?;
    let extended = queue::extend_leases(&mut writer, &cfg.policy).context(|| "extending leases".into())?;
    if extended > 0 {
        log::info!("{extended} leased jobs given a full lease again (the hub was away)");
    }
    let readers = (0..READERS).map(|_| db::open(&cfg.db)).collect::<Result<Vec<_>, _>>()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(READERS + 2)
        .thread_name("hubd")
        .enable_all()
        .build()
        .map_err(|e| Failure::runtime(format!("starting the runtime: {e}")))?;
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(&cfg.listen))
        .map_err(|e| Failure::runtime(format!("listening on {}: {e}", cfg.listen)))?;
    let addr = listener.local_addr().map_err(|e| Failure::runtime(format!("listening on {}: {e}", cfg.listen)))?;
    let store = Store::new(writer, readers).map_err(|e| Failure::runtime(format!("starting the writer: {e}")))?;
    let hints = {
        let _rt = rt.enter();
        wake::bind(&cfg.db)
    };
    // Leave descriptors for the database, the log and the like.
    let fd_room = nofile.saturating_sub(64).max(16) as usize;
    if cfg.max_connections > fd_room {
        log::warn!(
            "--max-connections {} is over the open-file limit ({nofile}): {fd_room} instead",
            cfg.max_connections
        );
    }
    let admission = Admission::new(cfg.max_connections.min(fd_room), cfg.max_connections_per_address);
    let (stop, stopping) = watch::channel(false);
    let hub = Arc::new(Hub {
        base_url: format!("http://{addr}"),
        wildcard: addr.ip().is_unspecified(),
        cfg,
        store,
        polls: Polls::default(),
        counters: metrics::Counters::default(),
        stopping,
        large_bodies: Semaphore::new(limits::LARGE_BODIES_AT_ONCE),
        admission,
    });
    let server = rt.spawn(accept(hub.clone(), listener));
    rt.spawn(recheck(hub.clone()));
    if let Some(socket) = hints {
        rt.spawn(hear_hints(hub.clone(), socket));
    }

    // Tests and scripts read the URL as the first line of stdout.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", hub.base_url).and_then(|_| out.flush());
    drop(out);
    if let Some(fd) = hub.cfg.notify_fd {
        readiness::notify_fd(fd).map_err(|e| Failure::config(format!("--notify-fd {fd}: {e}")))?;
    }
    readiness::sd_notify("READY=1");
    log::info!("listening on {} (database {})", hub.base_url, hub.cfg.db.display());

    let Shutdown { inbox, .. } = shutdown;
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
                rt.shutdown_background();
                return Ok(());
            }
            _ => {
                log::info!("{}: stopping", signals::name(sig));
                break;
            }
        }
    }
    readiness::sd_notify("STOPPING=1");
    let _ = stop.send(true);
    let _ = rt.block_on(server);
    hub.store.close();
    let _ = std::fs::remove_file(wake::socket_path(&hub.cfg.db));
    rt.shutdown_timeout(Duration::from_secs(2));
    log::info!("stopped");
    Ok(())
}

/// Takes connections until TERM, then lets the requests in hand finish
/// (at most [`DRAIN_LIMIT`]).
async fn accept(hub: Arc<Hub>, listener: tokio::net::TcpListener) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut stopping = hub.stopping.clone();
    let mut last_complaint: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopping.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, most likely: say so now and then, and
                // give the connections in hand a moment to end.
                if last_complaint.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    log::warn!("accepting a connection: {e}");
                    last_complaint = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(ticket) = hub.admission.admit(peer.ip()) else {
            metrics::Counters::add(&hub.counters.connections_refused, 1);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let for_requests = hub.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(Peer(peer.ip()));
            answer(for_requests.clone(), req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .max_buf_size(limits::SMALL_BODY)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                log::debug!("connection from {peer}: {e}");
            }
            drop(ticket);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_LIMIT, graceful.shutdown()).await.is_err() {
        log::warn!("requests still in hand after {DRAIN_LIMIT:?}: stopping anyway");
    }
}

/// Lets one waiting poll look at the queue every [`RECHECK`]: for leases
/// that expired, and hints that never came.
async fn recheck(hub: Arc<Hub>) {
    let mut tick = tokio::time::interval(RECHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        hub.polls.wake(1);
    }
}

async fn hear_hints(hub: Arc<Hub>, socket: tokio::net::UnixDatagram) {
    loop {
        wake::next(&socket).await;
        hub.polls.hint();
    }
}

type Body = BoxBody<Bytes, std::io::Error>;

/// An answer, before it is written.
struct Reply {
    code: u16,
    body: Bytes,
    content_type: Option<String>,
    location: Option<String>,
    /// A fault: send this many bytes of the body, wait, close the connection.
    cut: Option<(u64, Option<Duration>)>,
}

impl Reply {
    fn empty(code: u16) -> Reply {
        Reply { code, body: Bytes::new(), content_type: None, location: None, cut: None }
    }
    fn with(code: u16, content_type: &'static str, body: impl Into<Bytes>) -> Reply {
        Reply { code, body: body.into(), content_type: Some(content_type.into()), location: None, cut: None }
    }
    fn json(code: u16, text: String) -> Reply {
        Reply::with(code, "application/json", text)
    }
    fn error(code: u16, message: &str) -> Reply {
        Reply::json(code, json!({ "error": message }).to_string())
    }
    fn internal(what: &str, e: impl std::fmt::Display) -> Reply {
        log::error!("{what}: {e}");
        Reply::error(500, "internal error")
    }

    fn into_response(self) -> Response<Body> {
        let full_length = self.body.len();
        let body: Body = match self.cut {
            Some((cut, hang)) => CutBody {
                head: Some(self.body.slice(..full_length.min(cut as usize))),
                hang: hang.map(|d| Box::pin(tokio::time::sleep(d))),
            }
            .boxed(),
            None => Full::new(self.body).map_err(|never| match never {}).boxed(),
        };
        let mut res = Response::new(body);
        *res.status_mut() = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let headers = res.headers_mut();
        if let Some(ct) = self.content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
            headers.insert(CONTENT_TYPE, ct);
        }
        if let Some(location) = self.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            headers.insert(LOCATION, location);
        }
        if self.cut.is_some() {
            // The whole length announced, a part sent: a body that ends early.
            headers.insert(CONTENT_LENGTH, HeaderValue::from(full_length));
        }
        res
    }
}

/// A body cut short by a fault rule: its head, a wait, then an error, on
/// which the connection is closed mid-body.
struct CutBody {
    head: Option<Bytes>,
    hang: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for CutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> TaskPoll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(head) = self.head.take() {
            return TaskPoll::Ready(Some(Ok(Frame::data(head))));
        }
        if let Some(hang) = self.hang.as_mut() {
            if hang.as_mut().poll(cx).is_pending() {
                return TaskPoll::Pending;
            }
            self.hang = None;
        }
        TaskPoll::Ready(Some(Err(std::io::Error::other("body cut by a fault rule"))))
    }
}

/// A future that turns a panic while polling into `Err`: a handler that
/// panics costs its own request (500) and nothing else.
struct CatchPanic<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchPanic<F> {
    type Output = Result<F::Output, ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> TaskPoll<Self::Output> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(TaskPoll::Ready(v)) => TaskPoll::Ready(Ok(v)),
            Ok(TaskPoll::Pending) => TaskPoll::Pending,
            Err(_) => TaskPoll::Ready(Err(())),
        }
    }
}

async fn answer(hub: Arc<Hub>, req: Request<Incoming>) -> Result<Response<Body>, std::convert::Infallible> {
    metrics::Counters::add(&hub.counters.requests, 1);
    let method = req.method().clone();
    // The path only in logs: a query may hold the testdata token.
    let path = req.uri().path().to_string();
    let reply = match CatchPanic(Box::pin(handle(&hub, req))).await {
        Ok(reply) => reply,
        Err(()) => {
            metrics::Counters::add(&hub.counters.panics, 1);
            log::error!("{method} {path}: the handler panicked; answered 500");
            Reply::error(500, "internal error")
        }
    };
    hub.counters.answered(reply.code);
    log::debug!("{method} {path} -> {}", reply.code);
    Ok(reply.into_response())
}

async fn handle(hub: &Arc<Hub>, req: Request<Incoming>) -> Reply {
    let url = req.uri().path_and_query().map_or_else(|| req.uri().path().to_string(), |pq| pq.as_str().to_string());
    let method = req.method().clone();
    let endpoint = endpoint(req.method(), req.uri().path());
    // Before any body is read: an unknown client sends none.
    let claimed = endpoint.as_ref().ok().and_then(Endpoint::runner).map(|rn| (rn.to_string(), bearer(&req)));
    // One read for what every request asks the database: whether a fault
    // rule is armed, and whether the runner's token is its own.
    let checked = hub.store.read(move |c| {
        let runner = match claimed {
            Some((rn, Some(token))) => Some(runners::authenticate(c, &rn, &token)?),
            Some((_, None)) => Some(false),
            None => None,
        };
        Ok((fault::armed(c)?, runner))
    });
    let (armed, runner) = match checked.await {
        Ok(checked) => checked,
        Err(e) => return Reply::internal("checking fault rules and the runner's token", e),
    };
    let rule = if armed {
        match take_fault(hub, &url).await {
            Ok(rule) => rule,
            Err(reply) => return reply,
        }
    } else {
        None
    };
    if let Some(rule @ fault::Rule { status: Some(code), .. }) = &rule {
        log::info!("injected fault: {method} {} answered {code}", req.uri().path());
        let mut reply = scripted(*code, rule);
        reply.cut = rule.cut_after.map(|cut| (cut, rule.hang));
        return reply;
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let mut reply = match (endpoint, runner) {
        (Err(reply), _) => reply,
        (Ok(_), Some(false)) => Reply::error(401, "invalid runner token"),
        (Ok(endpoint), runner) => {
            if let (Some(true), Some(Peer(ip))) = (runner, req.extensions().get()) {
                hub.admission.known_runner(*ip);
            }
            route(hub, req, endpoint, &query).await
        }
    };
    if let Some(fault::Rule { cut_after: Some(cut), hang, .. }) = rule {
        log::info!("injected fault: {method} {path}: body cut after {cut} bytes");
        reply.cut = Some((cut, hang));
    }
    reply
}

/// The token of `Authorization: Bearer TOKEN`, if given.
fn bearer(req: &Request<Incoming>) -> Option<String> {
    let value = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    Some(value.strip_prefix("Bearer ")?.trim().to_string())
}

/// The fault rule that claims this request, once one is armed.
async fn take_fault(hub: &Arc<Hub>, url: &str) -> Result<Option<fault::Rule>, Reply> {
    let url = url.to_string();
    hub.store
        .write(Lane::Urgent, move |tx| fault::take(tx, &url).map(Write::Keep))
        .await
        .map_err(|e| Reply::internal("taking a fault rule", e))
}

/// The answer a fault rule scripts.
fn scripted(code: u16, rule: &fault::Rule) -> Reply {
    let mut reply = match &rule.body {
        Some(body) => {
            let content_type = rule.content_type.clone().unwrap_or_else(|| "text/html".into());
            Reply { code, body: body.clone().into(), content_type: Some(content_type), location: None, cut: None }
        }
        None => Reply::error(code, "injected fault"),
    };
    reply.location = rule.location.clone();
    reply
}

/// Which endpoint a path names.
enum Endpoint {
    Register,
    Heartbeat(String),
    NextJob(String),
    CancelPoll(String),
    Complete(String, String),
    Abort(String, String),
    Events(String, String),
    Problem(i64, String),
    Code(String),
    Metrics,
}

impl Endpoint {
    /// The runner a `/runners/{rn}/…` call is made as (its token is checked).
    fn runner(&self) -> Option<&str> {
        match self {
            Endpoint::Heartbeat(rn) | Endpoint::NextJob(rn) | Endpoint::CancelPoll(rn) => Some(rn),
            Endpoint::Complete(rn, _) | Endpoint::Abort(rn, _) | Endpoint::Events(rn, _) => Some(rn),
            _ => None,
        }
    }
}

fn endpoint(method: &Method, path: &str) -> Result<Endpoint, Reply> {
    // Each segment percent-decoded on its own, so an id may hold any
    // character (a `/` too) as a runner encodes it.
    let decoded: Option<Vec<String>> =
        path.trim_start_matches('/').split('/').map(ojrunner_protocol::unsegment).collect();
    let Some(decoded) = decoded else { return Err(Reply::error(404, "a path segment that is not UTF-8")) };
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let s = |x: &&str| x.to_string();
    let (want, endpoint) = match segments.as_slice() {
        ["runners", "register"] => (Method::POST, Endpoint::Register),
        ["runners", rn, "heartbeat"] => (Method::POST, Endpoint::Heartbeat(s(rn))),
        ["runners", rn, "next-job"] if method == Method::DELETE => (Method::DELETE, Endpoint::CancelPoll(s(rn))),
        ["runners", rn, "next-job"] => (Method::GET, Endpoint::NextJob(s(rn))),
        ["runners", rn, "jobs", jb, "complete"] => (Method::PUT, Endpoint::Complete(s(rn), s(jb))),
        ["runners", rn, "jobs", jb, "abort"] => (Method::PUT, Endpoint::Abort(s(rn), s(jb))),
        ["runners", rn, "jobs", jb, "events"] => (Method::POST, Endpoint::Events(s(rn), s(jb))),
        ["problem", pid, what @ ("meta" | "checksum" | "testdata")] => match pid.parse() {
            Ok(pid) => (Method::GET, Endpoint::Problem(pid, s(what))),
            Err(_) => return Err(Reply::error(404, "problem ids are integers")),
        },
        ["code", file] if file.ends_with(".zip") => (Method::GET, Endpoint::Code(file[..file.len() - 4].to_string())),
        ["metrics"] => (Method::GET, Endpoint::Metrics),
        _ => return Err(Reply::error(404, "no such endpoint")),
    };
    // HEAD where it costs nothing: hyper sends GET's head without its body.
    let head_of_get = *method == Method::HEAD && matches!(endpoint, Endpoint::Metrics);
    if *method != want && !head_of_get {
        return Err(Reply::error(405, "method not allowed"));
    }
    Ok(endpoint)
}

/// Serves `endpoint`, its caller checked (the runner's token, if any).
async fn route(hub: &Arc<Hub>, req: Request<Incoming>, endpoint: Endpoint, query: &str) -> Reply {
    match endpoint {
        Endpoint::Register => register(hub, req).await,
        Endpoint::Heartbeat(rn) => heartbeat(hub, req, rn).await,
        Endpoint::NextJob(rn) => match wait_of(query) {
            Ok(wait) => next_job(hub, rn, wait, base_url(hub, &req)).await,
            Err(reply) => reply,
        },
        Endpoint::CancelPoll(rn) => {
            let ended = hub.polls.cancel(&rn);
            metrics::Counters::add(&hub.counters.polls_cancelled, ended as u64);
            log::debug!("next-job of {rn} cancelled ({ended} polls ended)");
            Reply::empty(204)
        }
        Endpoint::Complete(rn, jb) => complete(hub, req, rn, jb).await,
        Endpoint::Abort(rn, jb) => abort(hub, req, rn, jb).await,
        Endpoint::Events(rn, jb) => events(hub, req, rn, jb).await,
        Endpoint::Problem(pid, what) => testdata_channel(hub, pid, what, query).await,
        Endpoint::Code(jb) => match hub.store.read(move |c| submission::code_of_job(c, &jb)).await {
            Ok(Some(zip)) => Reply::with(200, "application/zip", zip),
            Ok(None) => Reply::error(404, "no such job"),
            Err(e) => Reply::internal("reading a code zip", e),
        },
        Endpoint::Metrics => {
            let seen_within = hub.cfg.policy.lease_ttl_ms;
            match hub.store.read(move |c| metrics::queue(c, seen_within)).await {
                Ok(q) => {
                    let now = metrics::Now {
                        polls_waiting: hub.polls.waiting(),
                        connections_open: hub.admission.open(),
                        large_bodies_reading: limits::LARGE_BODIES_AT_ONCE - hub.large_bodies.available_permits(),
                    };
                    Reply::with(200, "text/plain; version=0.0.4", metrics::render(&q, &hub.counters, &now))
                }
                Err(e) => Reply::internal("reading the queue for metrics", e),
            }
        }
    }
}

/// `?wait=S`: seconds, from 0 (none given) to 30 (more is cut to 30).
fn wait_of(query: &str) -> Result<Duration, Reply> {
    let Some(raw) = query_param(query, "wait") else { return Ok(Duration::ZERO) };
    match raw.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s.min(MAX_WAIT_SEC))),
        _ => Err(Reply::error(400, "wait must be a number of seconds, 0 to 30")),
    }
}

/// The body, or the reply refusing it.
async fn body_of(hub: &Hub, req: Request<Incoming>, large: bool) -> Result<Bytes, Reply> {
    let (cap, slots) = if large { (limits::LARGE_BODY, Some(&hub.large_bodies)) } else { (limits::SMALL_BODY, None) };
    limits::read_body(req.into_body(), cap, slots).await.map_err(|Refused(code, why)| {
        log::debug!("body refused ({code}): {why}");
        Reply::error(code, &why)
    })
}

/// The body as a JSON object, or the reply refusing it.
async fn json_of(hub: &Hub, req: Request<Incoming>) -> Result<Value, Reply> {
    json_body(&body_of(hub, req, false).await?)
}

// ---- reading bodies ------------------------------------------------------------

fn json_body(bytes: &[u8]) -> Result<Value, Reply> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(Reply::error(400, "the body is not a JSON object")),
    }
}

/// A registration's token and name (at most 100 characters).
fn registration_of(body: &Value) -> (&str, String) {
    let given = body.get("registration_token").and_then(Value::as_str).unwrap_or("");
    (given, body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(100).collect())
}

fn active_jobs_of(body: &Value) -> Result<Vec<String>, Reply> {
    serde_json::from_value::<Vec<String>>(body.get("active_job_ids").cloned().unwrap_or(Value::Null))
        .map_err(|_| Reply::error(400, "active_job_ids must be a list of job ids"))
}

fn reason_of(body: &Value) -> Result<AbortReason, Reply> {
    body.get("reason")
        .and_then(Value::as_str)
        .and_then(AbortReason::parse)
        .ok_or_else(|| Reply::error(400, "reason must be drain, prep_failed or rejected"))
}

fn events_of(mut body: Value) -> Result<Vec<Value>, Reply> {
    let events = match body.get_mut("events").map(Value::take) {
        Some(Value::Array(events)) => events,
        _ => return Err(Reply::error(400, "events must be a list")),
    };
    if events.len() > MAX_EVENTS {
        return Err(Reply::error(400, &format!("{} events in one batch (at most {MAX_EVENTS})", events.len())));
    }
    Ok(events)
}

fn text_of(body: &[u8]) -> Result<String, Reply> {
    String::from_utf8(body.to_vec()).map_err(|_| Reply::error(400, "the body is not UTF-8"))
}

/// Reads a request as the server does before it asks its database anything:
/// the endpoint `method` and `path` name, the `wait` and `token` of `query`,
/// and `body` as that endpoint reads it (a `complete` body's content is
/// [`crate::result::judge`]'s). `Err` is the status the server refuses it
/// with. Public for the fuzz targets (`crates/fuzzing`), so that any
/// request reaches the very functions [`serve`] uses, with no socket and
/// no database.
pub fn read_request(method: &str, path: &str, query: &str, body: &[u8]) -> Result<(), u16> {
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| 400u16)?;
    let _ = query_param(query, "token");
    let read = match endpoint(&method, path) {
        Err(reply) => Err(reply),
        Ok(Endpoint::Register) => json_body(body).map(|v| {
            let _ = registration_of(&v);
        }),
        Ok(Endpoint::Heartbeat(_)) => json_body(body).and_then(|v| active_jobs_of(&v)).map(|_| ()),
        Ok(Endpoint::NextJob(_)) => wait_of(query).map(|_| ()),
        Ok(Endpoint::Complete(..)) => text_of(body).map(|_| ()),
        Ok(Endpoint::Abort(..)) => json_body(body).and_then(|v| reason_of(&v)).map(|_| ()),
        Ok(Endpoint::Events(..)) => json_body(body).and_then(events_of).map(|_| ()),
        Ok(_) => Ok(()),
    };
    read.map_err(|r| r.code)
}

async fn register(hub: &Arc<Hub>, req: Request<Incoming>) -> Reply {
    let body = match json_of(hub, req).await {
        Ok(v) => v,
        Err(reply) => return reply,
    };
    let (given, name) = registration_of(&body);
    // Fail closed: no configured token means nobody may register.
    let ok = hub.cfg.registration_token.as_deref().is_some_and(|t| runners::same(t.as_bytes(), given.as_bytes()));
    if !ok {
        log::warn!("registration of {name:?} refused: bad registration token");
        return Reply::error(401, "invalid registration token");
    }
    let n = name.clone();
    match hub.store.write(Lane::Urgent, move |tx| runners::register(tx, &n).map(Write::Keep)).await {
        Ok((runner_id, token)) => {
            log::info!("runner {runner_id} registered as {name:?}");
            let answer = Registration { runner_id, token, config: hub.cfg.runner_config.clone() };
            Reply::json(201, serde_json::to_string(&answer).expect("a registration serialises"))
        }
        Err(e) => Reply::internal("registering a runner", e),
    }
}

async fn heartbeat(hub: &Arc<Hub>, req: Request<Incoming>, rn: String) -> Reply {
    let ids = match json_of(hub, req).await.and_then(|v| active_jobs_of(&v)) {
        Ok(ids) => ids,
        Err(reply) => return reply,
    };
    let policy = hub.cfg.policy;
    let listed = ids.len();
    let r = rn.clone();
    match hub.store.write(Lane::Urgent, move |tx| queue::heartbeat(tx, &r, &ids, &policy).map(Write::Keep)).await {
        Ok(renewed) => {
            log::debug!("heartbeat from {rn}: {renewed} of {listed} leases renewed");
            Reply::empty(204)
        }
        Err(e) => Reply::internal("renewing leases", e),
    }
}

/// Forgets a poll however its request ends (answered, or its client gone).
struct Serving<'a> {
    hub: &'a Arc<Hub>,
    poll: Arc<Poll>,
    /// The `polling_until` written for it, while it may still be in the future.
    advertised: Option<i64>,
}

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.hub.polls.end(&self.poll);
        // (No runtime: the hub is stopping, and nobody asks any more.)
        let runtime = tokio::runtime::Handle::try_current();
        if let (Some(until), Ok(runtime)) = (self.advertised, runtime) {
            if until <= db::now_ms() {
                return;
            }
            // Ended before its time: `status --runners` must not show it waiting.
            let (store, rn) = (self.hub.store.clone(), self.poll.runner().to_string());
            runtime.spawn(async move {
                let cleared = store.write(Lane::Claims, move |tx| runners::polling(tx, &rn, None).map(Write::Keep));
                if let Err(e) = cleared.await {
                    log::warn!("clearing a runner's poll: {e}");
                }
            });
        }
    }
}

/// `next-job`: a claim, then (with `wait`) waiting for a wake and claiming
/// again, until a job, the end of the wait, a `DELETE` or a TERM.
async fn next_job(hub: &Arc<Hub>, rn: String, wait: Duration, base_url: String) -> Reply {
    let Ok(poll) = hub.polls.begin(&rn) else {
        log::debug!("next-job of {rn}: cancelled before it came");
        return Reply::empty(204);
    };
    let mut serving = Serving { hub, poll: poll.clone(), advertised: None };
    let until = Instant::now() + wait;
    let until_ms = db::now_ms() + wait.as_millis() as i64;
    let mut stopping = hub.stopping.clone();
    let policy = hub.cfg.policy;
    loop {
        if *stopping.borrow() {
            return Reply::empty(204);
        }
        let generation = hub.polls.generation();
        let advertise = (serving.advertised.is_none() && !wait.is_zero()).then_some(until_ms);
        let clear = serving.advertised.is_some();
        let (p, r, h) = (poll.clone(), rn.clone(), hub.clone());
        let claim = hub.store.write(Lane::Claims, move |tx| {
            let scan = queue::claim(tx, &r, &policy)?;
            if scan.claim.is_some() && !p.commit() {
                // Cancelled (or its client left) before the commit: undone,
                // and the job it found is for the next waiter to take.
                h.polls.hint();
                return Ok(Write::Undo(queue::Scan::default()));
            }
            if scan.claim.is_some() {
                if clear {
                    runners::polling(tx, &r, None)?;
                }
            } else if let Some(until) = advertise {
                runners::polling(tx, &r, Some(until))?;
            }
            if advertise.is_some() || scan.claim.is_some() {
                runners::touch(tx, &r)?;
            }
            Ok(Write::Keep(scan))
        });
        let mut claim = pin!(claim);
        let scan = loop {
            tokio::select! {
                scan = &mut claim => break scan,
                _ = poll.rung() => if poll.cancelled() {
                    return Reply::empty(204);
                },
            }
        };
        let scan = match scan {
            Ok(scan) => scan,
            Err(e) => return Reply::internal("claiming a job", e),
        };
        metrics::Counters::add(&hub.counters.leases_lapsed, scan.lapsed as u64);
        metrics::Counters::add(&hub.counters.finalised_je, scan.finalised as u64);
        hub.polls.spent_wake(&poll);
        if let Some(claim) = scan.claim {
            serving.advertised = None;
            // There may be more: the next waiter looks.
            hub.polls.wake(1);
            metrics::Counters::add(&hub.counters.claims, 1);
            log::info!(
                "job {} (submission {}) leased to {rn}, attempt {}",
                claim.job_id,
                claim.submission_id,
                claim.attempts
            );
            return Reply::json(200, queue::payload(&claim, &base_url));
        }
        if advertise.is_some() {
            serving.advertised = advertise;
        }
        if Instant::now() >= until {
            return Reply::empty(204);
        }
        if hub.polls.generation() != generation {
            continue; // work came while it claimed: look again
        }
        if hub.polls.wait(&poll).is_err() {
            return Reply::empty(204);
        }
        tokio::select! {
            _ = poll.rung() => {}
            _ = tokio::time::sleep_until(until) => {}
            _ = stopping.changed() => {}
        }
        if hub.polls.resume(&poll).is_err() || Instant::now() >= until {
            return Reply::empty(204);
        }
    }
}

/// The base of `code_url`: where this hub listens, or, when it listens on
/// every address, the host the runner reached it by.
fn base_url(hub: &Hub, req: &Request<Incoming>) -> String {
    let host = req.headers().get(HOST).and_then(|h| h.to_str().ok());
    match host {
        Some(host) if hub.wildcard => format!("http://{host}"),
        _ => hub.base_url.clone(),
    }
}

fn reply_for(code: u16) -> Reply {
    match code {
        404 => Reply::error(404, "no such job"),
        409 => Reply::error(409, "the job is not held by this runner"),
        other => Reply::empty(other),
    }
}

async fn complete(hub: &Arc<Hub>, req: Request<Incoming>, rn: String, jb: String) -> Reply {
    let body = match body_of(hub, req, true).await {
        Ok(b) => b,
        Err(reply) => return reply,
    };
    let body = match text_of(&body) {
        Ok(body) => body,
        Err(reply) => return reply,
    };
    match hub.store.write(Lane::Urgent, move |tx| queue::complete(tx, &rn, &jb, &body).map(Write::Keep)).await {
        Ok(queue::Landing::Rejected(why)) => Reply::error(400, &why),
        Ok(landing) => {
            if landing == queue::Landing::Landed {
                metrics::Counters::add(&hub.counters.results_landed, 1);
            }
            reply_for(landing.code())
        }
        Err(e) => Reply::internal("landing a result", e),
    }
}

async fn abort(hub: &Arc<Hub>, req: Request<Incoming>, rn: String, jb: String) -> Reply {
    let reason = match json_of(hub, req).await.and_then(|v| reason_of(&v)) {
        Ok(reason) => reason,
        Err(reply) => return reply,
    };
    let policy = hub.cfg.policy;
    match hub.store.write(Lane::Urgent, move |tx| queue::abort(tx, &rn, &jb, reason, &policy).map(Write::Keep)).await {
        Ok(queue::Handback::Requeued) => {
            // Back in the queue: a waiting poll takes it.
            hub.polls.hint();
            Reply::json(202, r#"{"outcome": "requeued"}"#.into())
        }
        Ok(queue::Handback::FinalisedJe) => Reply::json(202, r#"{"outcome": "JE"}"#.into()),
        Ok(queue::Handback::Superseded) => Reply::json(202, r#"{"outcome": "superseded"}"#.into()),
        Ok(other) => reply_for(other.code()),
        Err(e) => Reply::internal("handing a job back", e),
    }
}

async fn events(hub: &Arc<Hub>, req: Request<Incoming>, rn: String, jb: String) -> Reply {
    let events = match json_of(hub, req).await.and_then(events_of) {
        Ok(events) => events,
        Err(reply) => return reply,
    };
    match hub.store.write(Lane::Urgent, move |tx| queue::add_events(tx, &rn, &jb, &events).map(Write::Keep)).await {
        Ok(true) => Reply::empty(204),
        Ok(false) => Reply::error(404, "no such job held by this runner"),
        Err(e) => Reply::internal("storing events", e),
    }
}

/// `/problem/{pid}/meta|checksum|testdata?token=S`, wrapped as Normal-OJ's
/// backend wraps it (the zip aside).
async fn testdata_channel(hub: &Arc<Hub>, pid: i64, what: String, query: &str) -> Reply {
    let given = query_param(query, "token").unwrap_or_default();
    if !hub.cfg.testdata_token.as_deref().is_some_and(|t| runners::same(t.as_bytes(), given.as_bytes())) {
        return Reply::error(401, "Invalid sandbox token");
    }
    let not_found = || Reply::error(404, "Problem not found");
    if what == "testdata" {
        return match hub.store.read(move |c| problem::testdata(c, pid)).await {
            Ok(Some(zip)) => Reply::with(200, "application/zip", zip),
            Ok(None) => not_found(),
            Err(e) => Reply::internal("reading testdata", e),
        };
    }
    let (meta, checksum) = match hub.store.read(move |c| problem::meta_and_checksum(c, pid)).await {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(e) => return Reply::internal("reading a problem", e),
    };
    if what == "meta" {
        // Spliced as text: the checksum covers these exact bytes, key order
        // included, and a Python runner recomputes it from them.
        Reply::json(200, format!(r#"{{"status": "ok", "message": "", "data": {meta}}}"#))
    } else {
        Reply::json(200, envelope(json!(checksum)).to_string())
    }
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

    /// A handler that panics, at once or after it waited, ends in `Err`
    /// (answered 500) on a runtime that goes on serving; one that does not
    /// panic is untouched.
    #[test]
    fn a_panicking_handler_costs_its_request_only() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let at_once = CatchPanic(Box::pin(async { panic!("at once") }));
            assert_eq!(at_once.await, Err::<(), ()>(()));
            let later = CatchPanic(Box::pin(async {
                tokio::task::yield_now().await;
                panic!("after a wait")
            }));
            assert_eq!(later.await, Err::<(), ()>(()));
            assert_eq!(CatchPanic(Box::pin(async { 7 })).await, Ok(7));
        });
        assert_eq!(rt.block_on(async { 1 + 1 }), 2, "the runtime serves on");
    }

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
            max_connections: 64,
            max_connections_per_address: 64,
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

    #[test]
    fn waits_are_seconds_from_0_to_30_and_anything_else_is_refused() {
        assert_eq!(wait_of("").ok(), Some(Duration::ZERO));
        assert_eq!(wait_of("wait=2.5").ok(), Some(Duration::from_millis(2500)));
        assert_eq!(wait_of("wait=1e9").ok(), Some(Duration::from_secs(30)));
        for bad in ["NaN", "nan", "inf", "-inf", "-1", "", "five", "1e400"] {
            assert_eq!(wait_of(&format!("wait={bad}")).err().map(|r| r.code), Some(400), "wait={bad}");
        }
    }
}
