//! Telling a supervisor the program is ready, and that it is stopping: a
//! newline on the notification fd (s6's `notification-fd`, the
//! `--notify-fd` flag) and state lines to `$NOTIFY_SOCKET` (systemd's
//! `Type=notify`).

/// Writes the readiness newline to `fd` and closes it. An `fd` that is not
/// open is an error, never a write to whatever opens as `fd` later.
pub fn notify_fd(fd: i32) -> std::io::Result<()> {
    ojrunner_unix::write_inherited_fd(fd, b"\n")
}

/// Tells a supervisor the program is ready, on `fd` if one was given and
/// to systemd; a readiness that cannot be told is logged, not fatal.
pub fn notify_ready(fd: Option<i32>) {
    if let Some(fd) = fd {
        if let Err(e) = notify_fd(fd) {
            log::warn!("readiness on fd {fd}: {e}");
        }
    }
    sd_notify("READY=1");
}

/// Sends a state line to systemd's `$NOTIFY_SOCKET`, if set.
pub fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(e) => return log::warn!("sd_notify: {e}"),
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).to_vec();
    let r = if bytes.first() == Some(&b'@') {
        // An abstract socket.
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(&bytes[1..])
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))
    };
    if let Err(e) = r {
        log::warn!("sd_notify {state}: {e}");
    }
}
