//! A run's standard streams as the program gets them: never a file of the
//! host it could write, map, grow or name.
//!
//! - **Input**: a regular file is copied into a sealed memfd
//!   ([`Input::seal`]): the program reads, seeks and maps it as a file, but no
//!   descriptor it can get (its own, or `/proc/self/fd/0` opened again) can
//!   write, grow or shrink it (`F_SEAL_WRITE`, `GROW`, `SHRINK`), whatever
//!   the host file's mode; and `/proc/self/fd/0` reads
//!   `/memfd:stdin (deleted)`, not the testdata's path. A pipe or a device
//!   (an interactor's pipe, `/dev/null`) is handed as it is.
//! - **Outputs**: for a regular file the program gets the write end of a
//!   pipe, and the judge copies what comes out into the file ([`Outputs`]),
//!   at most the output limit: the disk an output holds is what the judge
//!   wrote, whatever the program calls (`fallocate`, `ftruncate`, a shared
//!   writable mapping: none works on a pipe). At the limit the judge closes
//!   its end: the program's next write gets `SIGPIPE` (or `EPIPE`), and the
//!   file's size, the limit, makes it OLE (`verdict::decide`); a program
//!   that opened its own pipe again for reading blocks instead, and is TLE.
//!   Two outputs
//!   into one file (a compiler's stdout and stderr) share one pipe, so
//!   their order is kept.
//! - **Watching stdout**: a judged run's stdout may be watched as it is
//!   copied ([`OutputWatch`]: the checker's streaming comparison). Each
//!   chunk the file gets (never past the limit) is fed to it in order;
//!   once it says the output can no longer be accepted, the drain returns
//!   [`Drained::Mismatch`] (once), the caller has the run stopped
//!   (`helper.rs`), and stdout is read no further: the file holds what
//!   came up to that chunk, and the program, blocked on a full pipe until
//!   the stop kills it, cannot reach the output limit meanwhile (the stop's
//!   WA, not an OLE that raced it).
//!
//! The pipes are mode 0666, as a file a program may open by name:
//! `/dev/stdout` is `/proc/self/fd/1`, which checks the pipe's own mode;
//! only a process holding an end (or allowed to trace one) can name it.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

/// The program's stdin: the caller's file, or a sealed copy of it.
pub struct Input {
    file: File,
    /// A sealed copy (or a device): it can be read again from its start.
    replayable: bool,
}

impl Input {
    /// A regular file becomes a sealed, read-only memfd copy of it (from
    /// its start); anything else stays as it is.
    pub fn seal(file: File) -> io::Result<Input> {
        let kind = file.metadata()?.file_type();
        if !kind.is_file() {
            use std::os::unix::fs::FileTypeExt;
            return Ok(Input { replayable: kind.is_char_device(), file });
        }
        let mut copy = super::sys::memfd_with(c"stdin", libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)?;
        let mut from = &file;
        from.seek(SeekFrom::Start(0))?;
        io::copy(&mut from, &mut copy)?;
        let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        // SAFETY: F_ADD_SEALS takes an int, on a descriptor `copy` owns.
        if unsafe { libc::fcntl(copy.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // A read-only description of its own: not even a same-size
        // `ftruncate` goes through it.
        let read_only = File::open(format!("/proc/self/fd/{}", copy.as_raw_fd()))?;
        Ok(Input { file: read_only, replayable: true })
    }

    /// Back to the start, for a run started again; false for a pipe, which
    /// cannot give again what the last run read.
    pub fn rewind(&self) -> bool {
        let mut f = &self.file;
        self.replayable && (f.metadata().is_ok_and(|m| !m.is_file()) || f.seek(SeekFrom::Start(0)).is_ok())
    }

    pub fn file(&self) -> &File {
        &self.file
    }
}

/// Where one of the program's outputs goes.
enum Sink {
    /// A pipe or a device, handed to the program as it is.
    Direct(File),
    /// A regular file the judge fills from a pipe.
    Drained(File),
    /// The same file as stdout's (`2>&1`).
    AsStdout,
}

/// The program's stdout and stderr, and the files the judge copies them to.
pub struct Outputs {
    sinks: [Sink; 2],
    /// Bytes the judge copies into each file, at most.
    limit: u64,
}

impl Outputs {
    pub fn new(stdout: File, stderr: File, limit: u64) -> io::Result<Outputs> {
        let regular = |f: &File| -> io::Result<Option<(u64, u64)>> {
            let m = f.metadata()?;
            Ok(m.is_file().then(|| (m.dev(), m.ino())))
        };
        let (o, e) = (regular(&stdout)?, regular(&stderr)?);
        let sink = |f: File, id: Option<(u64, u64)>| if id.is_some() { Sink::Drained(f) } else { Sink::Direct(f) };
        let err = if e.is_some() && e == o { Sink::AsStdout } else { sink(stderr, e) };
        Ok(Outputs { sinks: [sink(stdout, o), err], limit })
    }

    /// Empties the files again, for a run started again; false if one of
    /// the outputs cannot be put back (a pipe).
    pub fn rewind(&self) -> bool {
        if self.sinks.iter().any(|s| matches!(s, Sink::Direct(_))) {
            return false;
        }
        self.sinks.iter().all(|s| match s {
            Sink::Drained(f) => f.set_len(0).and_then(|()| (&*f).seek(SeekFrom::Start(0))).is_ok(),
            _ => true,
        })
    }

    /// The two descriptors the program gets this time, and the drain that
    /// fills the files from them. Drop the descriptors once they are sent.
    pub fn open(&self) -> io::Result<([OwnedFd; 2], Drain<'_>)> {
        let mut ends: Vec<OwnedFd> = Vec::with_capacity(2);
        let mut pipes = Vec::with_capacity(2);
        for sink in &self.sinks {
            let end = match sink {
                Sink::Direct(f) => f.try_clone()?.into(),
                Sink::Drained(file) => {
                    let (read, write) = output_pipe()?;
                    pipes.push(Pipe { read: Some(read), file, copied: 0, paused: false });
                    write
                }
                Sink::AsStdout => ends[0].try_clone()?,
            };
            ends.push(end);
        }
        let [out, err]: [OwnedFd; 2] = ends.try_into().map_err(|_| io::Error::other("two outputs"))?;
        // The copy buffer only where there is something to copy.
        let buf = if pipes.is_empty() { Vec::new() } else { vec![0u8; 64 << 10] };
        // Only stdout alone in its file can be watched (the first pipe).
        let stdout_alone = matches!(self.sinks, [Sink::Drained(_), Sink::Direct(_) | Sink::Drained(_)]);
        let drain = Drain { pipes, limit: self.limit, failed: None, buf, watch: None, stdout_alone, mismatch: false };
        Ok(([out, err], drain))
    }
}

/// What reads a run's standard output as the judge copies it (the
/// checker's streaming comparison, `checker.rs`).
pub trait OutputWatch {
    /// The next bytes of the output, in order (never past the output
    /// limit): `false` once no output that begins with all it was fed can
    /// be accepted. Not fed again after that.
    fn feed(&mut self, chunk: &[u8]) -> bool;
}

/// Why [`Drain::until_readable`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Drained {
    /// What it waited for is readable (or hung up).
    Readable,
    /// The watch said the output can no longer be accepted (said once).
    Mismatch,
}

/// The first look at an output pipe while its run goes on, and the
/// longest wait between two looks that found nothing.
const FIRST_LOOK: Duration = Duration::from_millis(2);
const LAST_LOOK: Duration = Duration::from_millis(32);

/// One output's pipe and the file it fills.
struct Pipe<'a> {
    /// The judge's end (non-blocking); `None` once closed.
    read: Option<OwnedFd>,
    file: &'a File,
    copied: u64,
    /// Read no further (the watch said no): neither polled nor copied.
    paused: bool,
}

/// Copies the program's outputs into their files while it runs.
pub struct Drain<'a> {
    pipes: Vec<Pipe<'a>>,
    limit: u64,
    /// Writing a file failed (the judge's disk): the run's result is lost.
    failed: Option<io::Error>,
    /// What each read copies through.
    buf: Vec<u8>,
    /// What reads stdout as it comes, until it says no.
    watch: Option<&'a mut dyn OutputWatch>,
    /// stdout has a file and a pipe of its own (the first).
    stdout_alone: bool,
    /// The watch said no, and `until_readable` has not yet said so.
    mismatch: bool,
}

impl<'a> Drain<'a> {
    /// Has `w` read stdout as it is copied (when stdout has a file of its
    /// own; else it is never fed).
    pub fn watch(&mut self, w: &'a mut dyn OutputWatch) {
        if self.stdout_alone {
            self.watch = Some(w);
        }
    }

    /// Copies what comes until `until` is readable (or hung up), or until
    /// the watch says no ([`Drained`]). `Err` if polling failed.
    ///
    /// Most programs write a little and end: waking the judge for each
    /// write, and again for each pipe's end, cost a tenth of a judged case.
    /// So a pipe is looked at on a timer (`FIRST_LOOK`, doubling to
    /// `LAST_LOOK`) until a look finds something, and from then on at
    /// every write: a writer that fills a pipe waits at most one look.
    pub fn until_readable(&mut self, until: RawFd) -> io::Result<Drained> {
        let mut armed = vec![false; self.pipes.len()];
        let mut look = FIRST_LOOK;
        let mut next_look = std::time::Instant::now() + look;
        loop {
            let mut fds = vec![libc::pollfd { fd: until, events: libc::POLLIN, revents: 0 }];
            fds.extend(self.pipes.iter().zip(&armed).map(|(p, &armed)| libc::pollfd {
                fd: p.read.as_ref().filter(|_| armed && !p.paused).map_or(-1, |r| r.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            }));
            let waiting = self.pipes.iter().zip(&armed).any(|(p, &armed)| p.read.is_some() && !armed && !p.paused);
            let timeout = match waiting {
                // Rounded up: a poll that wakes a little early would spin.
                true => next_look.saturating_duration_since(std::time::Instant::now()).as_micros().div_ceil(1000)
                    as libc::c_int,
                false => -1,
            };
            // SAFETY: poll reads and writes the entries of `fds`, a live local array, and no more (its length).
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if waiting && std::time::Instant::now() >= next_look {
                // A look at the pipes on the timer (even while a watched one
                // keeps the judge busy): one with something in it is watched
                // from now on.
                for (i, armed) in armed.iter_mut().enumerate() {
                    if !*armed && self.copy(i) {
                        *armed = true;
                    }
                }
                look = (look * 2).min(LAST_LOOK);
                next_look = std::time::Instant::now() + look;
            }
            for (i, p) in fds[1..].iter().enumerate() {
                if p.revents != 0 {
                    self.copy(i);
                }
            }
            if std::mem::take(&mut self.mismatch) {
                return Ok(Drained::Mismatch);
            }
            if fds[0].revents != 0 {
                return Ok(Drained::Readable);
            }
        }
    }

    /// Copies what is left in the pipes once the run is over (its writers
    /// gone): up to the end, or until nothing more is there, as a writer
    /// that outlived its run (the basic level without a slot) may keep its
    /// end. Then the files are complete; `Err` if one could not be written.
    pub fn finish(mut self) -> io::Result<()> {
        for i in 0..self.pipes.len() {
            // Past the limit or at the end, `copy` closes the pipe; a
            // paused one is left unread.
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            while self.pipes[i].read.is_some() && self.copy(i) && std::time::Instant::now() < deadline {}
            self.pipes[i].read = None;
        }
        match self.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// One read from pipe `i` into its file; false when nothing was there.
    /// Closes the pipe at its end, at the limit, and when the file fails.
    fn copy(&mut self, i: usize) -> bool {
        let (limit, buf) = (self.limit, &mut self.buf);
        let p = &mut self.pipes[i];
        let Some(read) = p.read.as_ref().filter(|_| !p.paused) else { return false };
        // SAFETY: read writes at most buf.len() bytes into `buf`.
        let n = unsafe { libc::read(read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::WouldBlock {
                return false;
            }
            if e.kind() == io::ErrorKind::Interrupted {
                return true;
            }
            p.read = None;
            return false;
        }
        if n == 0 {
            p.read = None;
            return false;
        }
        let keep = (n as u64).min(limit.saturating_sub(p.copied)) as usize;
        if let Err(e) = (&*p.file).write_all(&buf[..keep]) {
            self.failed.get_or_insert(e);
            p.read = None;
            return false;
        }
        if i == 0 && keep > 0 {
            if let Some(w) = self.watch.as_deref_mut() {
                if !w.feed(&buf[..keep]) {
                    self.watch = None;
                    self.mismatch = true;
                    p.paused = true;
                }
            }
        }
        p.copied += keep as u64;
        if p.copied >= limit {
            // The program's next write: SIGPIPE; its verdict: OLE.
            p.read = None;
        }
        true
    }
}

/// A pipe a run gets an end of, both ends close-on-exec: (read, write).
/// Mode 0666, so that a run may open its end again by name (`/dev/stdin`,
/// `/dev/stdout`: links to `/proc/self/fd`), as it may a file; only the
/// processes holding an end, or allowed to trace one, can name it.
pub fn pipe() -> io::Result<(File, File)> {
    let ends = super::sys::pipe()?;
    ends.0.set_permissions(std::fs::Permissions::from_mode(0o666))?;
    Ok(ends)
}

/// An output's pipe: [`pipe`], the judge's end non-blocking.
fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = pipe()?;
    // SAFETY: F_SETFL takes an int, on a descriptor `read` owns.
    if unsafe { libc::fcntl(read.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((read.into(), write.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn read_all(f: &mut File) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        f.seek(SeekFrom::Start(0))?;
        f.read_to_end(&mut v)?;
        Ok(v)
    }

    fn scratch(name: &str) -> File {
        let p = std::env::temp_dir().join(format!("ojstreams-{}-{name}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        f
    }

    #[test]
    fn an_input_copy_cannot_be_written_or_grown_through_any_descriptor() {
        let mut f = scratch("in");
        f.write_all(b"1 2\n").unwrap();
        let input = Input::seal(f).unwrap();
        let fd = input.file().as_raw_fd();
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        assert!(link.to_string_lossy().starts_with("/memfd:stdin"), "{link:?}");
        // Opened again by name for writing: the seals refuse every write.
        let again = std::fs::OpenOptions::new().write(true).open(format!("/proc/self/fd/{fd}"));
        if let Ok(mut w) = again {
            assert!(w.write_all(b"pwned").is_err(), "a sealed copy was written");
            assert!(w.set_len(100).is_err(), "a sealed copy grew");
        }
        let mut text = String::new();
        input.file().read_to_string(&mut text).unwrap();
        assert_eq!(text, "1 2\n");
    }

    #[test]
    fn outputs_are_copied_up_to_the_limit_and_the_pipe_then_closes() {
        let (out, err) = (scratch("out"), scratch("err"));
        let outputs = Outputs::new(out.try_clone().unwrap(), err.try_clone().unwrap(), 10).unwrap();
        let ([w_out, w_err], mut drain) = outputs.open().unwrap();
        let (mut w_out, mut w_err) = (File::from(w_out), File::from(w_err));
        w_err.write_all(b"err").unwrap();
        drop(w_err);
        w_out.write_all(b"0123456789abcdef").unwrap();
        // The judge's end closes at the limit; this writer then gets EPIPE.
        let (wake_r, wake_w) = output_pipe().unwrap();
        File::from(wake_w).write_all(b"x").unwrap();
        assert_eq!(drain.until_readable(wake_r.as_raw_fd()).unwrap(), Drained::Readable);
        drain.finish().unwrap();
        assert_eq!(read_all(&mut out.try_clone().unwrap()).unwrap(), b"0123456789");
        assert_eq!(read_all(&mut err.try_clone().unwrap()).unwrap(), b"err");
        // SAFETY: SIG_IGN installs no handler: no code of ours runs in signal context.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        assert_eq!(w_out.write_all(b"more").unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    /// A watch that says no at the first byte `bad`, and keeps what it was fed.
    struct Until {
        bad: u8,
        fed: Vec<u8>,
    }

    impl OutputWatch for Until {
        fn feed(&mut self, chunk: &[u8]) -> bool {
            self.fed.extend_from_slice(chunk);
            !chunk.contains(&self.bad)
        }
    }

    #[test]
    fn a_watch_reads_stdout_as_copied_and_after_its_no_said_once_stdout_is_read_no_further() {
        let (out, err) = (scratch("wout"), scratch("werr"));
        let outputs = Outputs::new(out.try_clone().unwrap(), err.try_clone().unwrap(), 1 << 20).unwrap();
        let mut until = Until { bad: b'!', fed: Vec::new() };
        let ([w_out, w_err], mut drain) = outputs.open().unwrap();
        drain.watch(&mut until);
        let (mut w_out, mut w_err) = (File::from(w_out), File::from(w_err));
        w_err.write_all(b"stderr is not watched!").unwrap();
        w_out.write_all(b"fine\n").unwrap();
        w_out.write_all(b"wrong!\n").unwrap();
        let (wake_r, wake_w) = output_pipe().unwrap();
        // Nothing wakes the drain but the watch's no.
        assert_eq!(drain.until_readable(wake_r.as_raw_fd()).unwrap(), Drained::Mismatch);
        w_out.write_all(b"more!\n").unwrap();
        drop((w_out, w_err));
        File::from(wake_w).write_all(b"x").unwrap();
        assert_eq!(drain.until_readable(wake_r.as_raw_fd()).unwrap(), Drained::Readable, "said once");
        drain.finish().unwrap();
        assert_eq!(until.fed, b"fine\nwrong!\n", "not fed after its no");
        assert_eq!(read_all(&mut out.try_clone().unwrap()).unwrap(), b"fine\nwrong!\n", "read no further");
        assert_eq!(read_all(&mut err.try_clone().unwrap()).unwrap(), b"stderr is not watched!", "stderr still is");
    }

    #[test]
    fn one_file_for_both_outputs_is_one_pipe() {
        let log = scratch("log");
        let outputs = Outputs::new(log.try_clone().unwrap(), log.try_clone().unwrap(), 1 << 20).unwrap();
        let ([a, b], drain) = outputs.open().unwrap();
        let (mut a, mut b) = (File::from(a), File::from(b));
        a.write_all(b"one ").unwrap();
        b.write_all(b"two ").unwrap();
        a.write_all(b"three").unwrap();
        drop((a, b));
        drain.finish().unwrap();
        assert_eq!(read_all(&mut log.try_clone().unwrap()).unwrap(), b"one two three");
    }
}
