//! Control sockets: each stage listens on `$OJ_SPOOL/<stage>.sock` for JSON
//! lines (`{"cmd":"wake"}`, `{"cmd":"status"}`, `{"cmd":"drain"}`) and answers
//! each with one JSON line.
//!
//! Everything said here is a hint. The spool is the only copy of anything
//! that matters, and every stage re-reads it on a slow timer, so a lost
//! wake-up costs latency, never a job. Debug by hand with
//! `echo '{"cmd":"status"}' | socat - UNIX-CONNECT:$OJ_SPOOL/claimd.sock`.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::Duration;

/// What wakes a stage's main loop.
pub enum Event {
    /// Something changed in the spool that this stage may act on.
    Wake,
    /// A signal arrived (see [`crate::signals`]).
    Signal(i32),
    /// A command from a control socket; send the answer on `reply`.
    Command { cmd: String, body: Value, reply: Sender<Value> },
}

/// The longest line a control socket reads; longer is an error, not memory.
const MAX_LINE: usize = 64 * 1024;

/// The socket path of a stage.
pub fn socket_path(spool: &Path, stage: &str) -> PathBuf {
    spool.join(format!("{stage}.sock"))
}

/// A stage's inbox: its control socket and signals feed one channel.
pub struct Inbox {
    pub tx: Sender<Event>,
    pub rx: Receiver<Event>,
}

impl Default for Inbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Inbox {
    pub fn new() -> Inbox {
        let (tx, rx) = mpsc::channel();
        Inbox { tx, rx }
    }

    /// The next event, or None after `timeout` (time to re-read the spool).
    pub fn next(&self, timeout: Duration) -> Option<Event> {
        self.rx.recv_timeout(timeout).ok()
    }
}

/// Listens on the stage's socket, replacing a stale one, and feeds commands
/// to `tx` from a background thread. A `wake` is answered at once; other
/// commands are answered by the main loop.
pub fn listen(spool: &Path, stage: &str, tx: Sender<Event>) -> std::io::Result<PathBuf> {
    let path = socket_path(spool, stage);
    if UnixStream::connect(&path).is_ok() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("{} answers: another {stage} runs on this spool", path.display()),
        ));
    }
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    // Root and the spool's owner only: these sockets can drain the runner.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new().name("control".into()).spawn(move || {
        for conn in listener.incoming().flatten() {
            let tx = tx.clone();
            let _ = std::thread::Builder::new().name("control-conn".into()).spawn(move || serve(conn, tx));
        }
    })?;
    Ok(path)
}

fn serve(conn: UnixStream, tx: Sender<Event>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut out) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let answer = if line.len() > MAX_LINE {
            let _ = writeln!(out, "{}", json!({"error": format!("line longer than {MAX_LINE} bytes")}));
            return;
        } else {
            answer(&line, &tx)
        };
        if writeln!(out, "{answer}").is_err() {
            return;
        }
    }
}

fn answer(line: &[u8], tx: &Sender<Event>) -> Value {
    let body: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return json!({"error": format!("not a JSON line: {e}")}),
    };
    let Some(cmd) = body.get("cmd").and_then(Value::as_str).map(String::from) else {
        return json!({"error": "no \"cmd\" string"});
    };
    if cmd == "wake" {
        let _ = tx.send(Event::Wake);
        return json!({"ok": true});
    }
    let (reply, rx) = mpsc::channel();
    if tx.send(Event::Command { cmd, body, reply }).is_err() {
        return json!({"error": "stopping"});
    }
    rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| json!({"error": "no answer"}))
}

/// Sends one command to a stage and reads its one-line answer.
pub fn request(spool: &Path, stage: &str, body: &Value, timeout: Duration) -> std::io::Result<Value> {
    let path = socket_path(spool, stage);
    let conn = UnixStream::connect(&path)?;
    conn.set_read_timeout(Some(timeout))?;
    conn.set_write_timeout(Some(timeout))?;
    let mut w = conn.try_clone()?;
    writeln!(w, "{body}")?;
    let mut line = String::new();
    BufReader::new(conn).take(MAX_LINE as u64).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Whether a stage's socket accepts connections (a stale socket file left
/// by a dead stage does not).
pub fn answers(spool: &Path, stage: &str) -> bool {
    UnixStream::connect(socket_path(spool, stage)).is_ok()
}

/// Wakes a stage: a hint that the spool changed. Failure is fine (the stage
/// may be restarting); it will see the change on its next re-read.
pub fn poke(spool: &Path, stage: &str) {
    if let Err(e) = request(spool, stage, &json!({"cmd": "wake"}), Duration::from_millis(500)) {
        log::debug!("wake {stage}: {e} (it will notice on its own)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_lines_get_an_error_and_the_socket_keeps_serving() {
        let dir = crate::test_dir("ojctl");
        let inbox = Inbox::new();
        listen(&dir, "t", inbox.tx.clone()).unwrap();
        // A stage answering status from its main loop.
        std::thread::spawn(move || {
            while let Ok(ev) = inbox.rx.recv() {
                if let Event::Command { cmd, reply, .. } = ev {
                    let _ = reply.send(json!({ "cmd": cmd }));
                }
            }
        });
        let conn = UnixStream::connect(socket_path(&dir, "t")).unwrap();
        let mut w = conn.try_clone().unwrap();
        let mut r = BufReader::new(conn);
        let mut line = String::new();
        w.write_all(b"{not json\n").unwrap();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("not a JSON line"), "{line}");
        line.clear();
        w.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        r.read_line(&mut line).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), json!({"cmd": "status"}));
        assert!(listen(&dir, "t", mpsc::channel().0).is_err(), "a second listener is refused");
        let _ = std::fs::remove_dir_all(dir);
    }
}
