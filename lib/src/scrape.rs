//! `runnerd --metrics-listen ADDR`: serves `GET /metrics` and its `HEAD`
//! ([`crate::metrics`], and the process metrics of runnerd, whose thread
//! this is) over plain HTTP/1.x, one request per connection.
//!
//! Written by hand rather than with an HTTP server crate: the runner's
//! programs carry no server code (`tests/layout.rs`), and one read-only
//! endpoint needs little. Every client is taken for an attacker: a request
//! head is read for at most [`READ_TIMEOUT`] and [`MAX_HEAD`] bytes, an
//! answer written for at most [`WRITE_TIMEOUT`], at most [`MAX_CLIENTS`]
//! are served at once (more are closed unanswered), and nothing a client
//! sends is ever more than looked at: the spool is opened read-only for
//! each scrape.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest a request head may take to arrive.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest an answer may take to be taken.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read.
pub const MAX_HEAD: usize = 8 * 1024;
/// Clients served at once.
pub const MAX_CLIENTS: usize = 4;

/// Binds `addr` (`HOST:PORT`) and serves the metrics of the spool in
/// `spool` from a thread of its own, for as long as the process lives.
/// The address bound (a port 0 becomes the one given).
pub fn serve(addr: &str, spool: &Path) -> std::io::Result<SocketAddr> {
    let context = |what: String| move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{what}: {e}"));
    let listener = TcpListener::bind(addr).map_err(context(format!("metrics: listen on {addr}")))?;
    let bound = listener.local_addr().map_err(context(format!("metrics: {addr}")))?;
    let spool = spool.to_path_buf();
    std::thread::Builder::new()
        .name("metrics".into())
        .stack_size(64 * 1024)
        .spawn(move || accept(listener, spool))
        .map_err(context("metrics: thread".into()))?;
    Ok(bound)
}

fn accept(listener: TcpListener, spool: PathBuf) {
    let busy = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if busy.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
            busy.fetch_sub(1, Ordering::SeqCst);
            drop(conn);
            continue;
        }
        let (held, spool) = (Arc::clone(&busy), spool.clone());
        let spawned = std::thread::Builder::new().name("metrics-client".into()).spawn(move || {
            answer(conn, &spool);
            held.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            busy.fetch_sub(1, Ordering::SeqCst);
            log::warn!("metrics: cannot start a thread for a client: {e}");
        }
    }
}

/// Reads one request head and answers it.
fn answer(mut conn: TcpStream, spool: &Path) {
    let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
    let (status, body, head_only) = match read_head(&mut conn, READ_TIMEOUT) {
        Some(head) => {
            let (status, body) = respond(&head, spool);
            (status, body, head.starts_with("HEAD "))
        }
        None => (400, "bad request\n".to_string(), false),
    };
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Internal Server Error",
    };
    let allow = if status == 405 { "Allow: GET, HEAD\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        body.len()
    );
    // HEAD: the head GET would get, the length of its body, no body.
    let body = if head_only { "" } else { body.as_str() };
    let _ = conn.write_all(head.as_bytes()).and_then(|()| conn.write_all(body.as_bytes()));
}

/// The request head, up to its blank line; `None` if it is too long, cut,
/// not text, or not all there `within` ([`READ_TIMEOUT`]: a byte now and
/// then keeps no client's place longer).
fn read_head(conn: &mut TcpStream, within: Duration) -> Option<String> {
    let deadline = std::time::Instant::now() + within;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if buf.len() >= MAX_HEAD || left.is_zero() {
            return None;
        }
        conn.set_read_timeout(Some(left)).ok()?;
        let n = conn.read(&mut chunk).ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(buf).ok()
}

/// The status and body answering a request head.
fn respond(head: &str, spool: &Path) -> (u16, String) {
    let mut words = head.lines().next().unwrap_or("").split(' ');
    let (method, target, version) = (words.next(), words.next(), words.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) || words.next().is_some() {
        return (400, "bad request\n".into());
    }
    let path = target.unwrap_or("").split('?').next().unwrap_or("");
    match (method, path) {
        (Some("GET" | "HEAD"), "/metrics") => {
            match crate::spool::Spool::open_read_only(spool).and_then(|s| crate::metrics::render(&s)) {
                // The server runs in runnerd: its process is runnerd's.
                Ok(text) => (200, text + &ojrunner_daemon::process::render("runnerd")),
                Err(e) => {
                    log::warn!("metrics: {e}");
                    (500, format!("{e}\n"))
                }
            }
        }
        (Some("GET" | "HEAD"), _) => (404, "not found: the metrics are at /metrics\n".into()),
        _ => (405, "only GET and HEAD\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_get_or_head_of_the_metrics_is_served_and_a_bad_head_is_a_400() {
        let none = Path::new("/nonexistent/spool");
        assert_eq!(respond("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", none).0, 500, "no spool: said, not served");
        assert_eq!(respond("GET / HTTP/1.1\r\n\r\n", none).0, 404);
        assert_eq!(respond("HEAD /metrics HTTP/1.1\r\n\r\n", none).0, 500, "HEAD as GET");
        assert_eq!(respond("HEAD / HTTP/1.1\r\n\r\n", none).0, 404);
        assert_eq!(respond("POST /metrics HTTP/1.1\r\n\r\n", none).0, 405);
        assert_eq!(respond("GET /metrics\r\n\r\n", none).0, 400, "HTTP/0.9 is not spoken");
        assert_eq!(respond("GET /metrics HTTP/1.1 extra\r\n\r\n", none).0, 400);
        assert_eq!(respond("\u{0}\u{1}", none).0, 400);
    }

    /// A head sent a byte at a time, never pausing long, is still cut off
    /// at its deadline; a whole one is read.
    #[test]
    fn a_head_has_a_deadline_not_only_a_pause() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let trickle = std::thread::spawn(move || {
            let mut c = TcpStream::connect(addr).unwrap();
            for _ in 0..1000 {
                if c.write_all(b"G").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let (mut conn, _) = listener.accept().unwrap();
        let began = std::time::Instant::now();
        assert_eq!(read_head(&mut conn, Duration::from_millis(200)), None);
        // Liveness only: the trickle alone would last 20 s.
        assert!(began.elapsed() < Duration::from_secs(10), "read for {:?}", began.elapsed());
        drop(conn);
        trickle.join().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        assert!(read_head(&mut conn, READ_TIMEOUT).is_some_and(|h| h.starts_with("GET /metrics")));
    }
}
