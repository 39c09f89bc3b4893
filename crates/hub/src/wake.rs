//! The hint that new work is queued, from `hubd submit` and `hubd rejudge`
//! (other processes) to the serving hub: one datagram on a Unix socket
//! beside the database (`hub.db-wake` for `hub.db`), sent after the commit.
//! A hint carries nothing and proves nothing: the hub answers it by letting
//! one waiting poll claim, and a hint lost (no hub serving, a full socket
//! buffer, a path too long for a socket) is made up for by the hub's
//! re-check every second.
//!
//! One hub serves a database at a time (`hub.db-serve.lock`): a second
//! would take the socket from the first, and each keeps its waiting polls
//! and cancels in memory.

use std::fs::File;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The socket of the hub serving `db`.
pub fn socket_path(db: &Path) -> PathBuf {
    beside(db, "-wake")
}

/// `db`'s path with `suffix` after its name (`hub.db-wake`).
fn beside(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    db.with_file_name(name)
}

/// Makes this process the hub serving `db` for as long as the file returned
/// is open; an error if another hub serves it (`WouldBlock`), or if the
/// lock cannot be opened (made by another user, say: a configuration error).
pub fn serve_lock(db: &Path) -> io::Result<File> {
    let path = beside(db, "-serve.lock");
    ojrunner_daemon::lock::try_exclusive(&path)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::WouldBlock,
            format!("another hubd serves {} (it holds {})", db.display(), path.display()),
        )
    })
}

/// Tells the hub serving `db`, if any, that work is queued. Never fails:
/// the work is committed, and the hint only makes it found sooner.
pub fn hint(db: &Path) {
    let path = socket_path(db);
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|s| {
        s.set_nonblocking(true)?;
        s.send_to(b"!", &path)
    });
    if let Err(e) = sent {
        log::debug!("no wake hint to {}: {e} (the hub finds the work within a second)", path.display());
    }
}

/// The hub's end: binds the socket (a stale one from an earlier hub is
/// replaced), writable by those who may write the database: who may queue
/// work may say so, and no one else may make the hub look for it. `None`,
/// logged, if it cannot: hints are then not heard.
pub fn bind(db: &Path) -> Option<tokio::net::UnixDatagram> {
    let path = socket_path(db);
    let _ = std::fs::remove_file(&path);
    let bound = tokio::net::UnixDatagram::bind(&path).and_then(|s| {
        let mode = std::fs::metadata(db)?.permissions().mode() & 0o666;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        Ok(s)
    });
    match bound {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("wake socket {}: {e}; new submissions are found within a second instead", path.display());
            None
        }
    }
}

/// Waits for the next hint; hints that came meanwhile count as one.
pub async fn next(socket: &tokio::net::UnixDatagram) {
    let mut buf = [0u8; 16];
    if let Err(e) = socket.recv(&mut buf).await {
        log::warn!("wake socket: {e}");
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    while socket.try_recv(&mut buf).is_ok() {}
}
