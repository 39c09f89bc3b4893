//! A hub written by hand, for the answers `hubd` never gives (a body that is
//! not UTF-8, nested past any parser's depth, 100 MB long): it hands out
//! scripted jobs and keeps every request it heard.

use super::hub::loopback;
use std::time::Duration;

/// One request a [`ScriptedHub`] heard: method, path, body.
#[derive(Clone, Debug)]
pub struct Heard {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// A hub written by hand, for answers `hubd` never gives: it registers any
/// runner (`rn_scripted`, a 1 s heartbeat and poll), answers heartbeats 204,
/// answers each `next-job` with the next of its scripted bodies as a 200
/// (then 204), completes 204, aborts 202, and keeps every request it heard.
pub struct ScriptedHub {
    pub url: String,
    pub heard: std::sync::Arc<std::sync::Mutex<Vec<Heard>>>,
    /// While set, an `events` request is read and dropped unanswered (a hub
    /// away, as far as its sender can tell), and not kept.
    pub events_unanswered: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ScriptedHub {
    /// Starts on a loopback port, handing out `jobs` in order.
    pub fn start(jobs: Vec<Vec<u8>>) -> ScriptedHub {
        use std::sync::{Arc, Mutex};
        let listener = std::net::TcpListener::bind(format!("{}:0", loopback())).expect("bind a scripted hub");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heard: Arc<Mutex<Vec<Heard>>> = Arc::default();
        let jobs = Arc::new(Mutex::new(std::collections::VecDeque::from(jobs)));
        let events_unanswered: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let (log, deaf) = (heard.clone(), events_unanswered.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, jobs, deaf) = (log.clone(), jobs.clone(), deaf.clone());
                std::thread::spawn(move || ScriptedHub::serve(conn, &log, &jobs, &deaf));
            }
        });
        ScriptedHub { url, heard, events_unanswered }
    }

    fn serve(
        mut conn: std::net::TcpStream,
        log: &std::sync::Mutex<Vec<Heard>>,
        jobs: &std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>,
        events_unanswered: &std::sync::atomic::AtomicBool,
    ) {
        use std::io::{Read, Write};
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or("").to_string(), words.next().unwrap_or("").to_string());
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
            .unwrap_or(0usize);
        let mut body = vec![0u8; length];
        if conn.read_exact(&mut body).is_err() {
            return;
        }
        if path.ends_with("/events") && events_unanswered.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        log.lock().unwrap().push(Heard { method: method.clone(), path: path.clone(), body });
        let (status, answer): (&str, Vec<u8>) = if path == "/runners/register" {
            let reg = r#"{"runner_id": "rn_scripted", "token": "rk_scripted", "config": {"heartbeat_interval_sec": 1, "poll_interval_sec": 1, "max_concurrent_jobs": 4}}"#;
            ("201 Created", reg.as_bytes().to_vec())
        } else if path.contains("/next-job") && method == "GET" {
            match jobs.lock().unwrap().pop_front() {
                Some(job) => ("200 OK", job),
                None => {
                    std::thread::sleep(Duration::from_millis(500));
                    ("204 No Content", Vec::new())
                }
            }
        } else if path.ends_with("/abort") {
            ("202 Accepted", b"{}".to_vec())
        } else {
            ("204 No Content", Vec::new())
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            answer.len()
        );
        // A runner may stop reading a body it will not take whole.
        let _ = conn.write_all(head.as_bytes()).and_then(|_| conn.write_all(&answer));
    }

    /// The requests heard so far whose method is `method` and whose path ends with `tail`.
    pub fn heard(&self, method: &str, tail: &str) -> Vec<Heard> {
        self.heard.lock().unwrap().iter().filter(|h| h.method == method && h.path.ends_with(tail)).cloned().collect()
    }
}
