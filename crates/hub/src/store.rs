//! How the server reaches its database without holding an async thread: one
//! writer thread that runs every write of the server, and a small pool of
//! reader connections, each call on a blocking thread.
//!
//! The writer commits in groups: it takes every write waiting (heartbeats,
//! results and aborts before claims), runs each inside its own savepoint of
//! one `BEGIN IMMEDIATE` transaction, and commits once: a thousand runners'
//! heartbeats cost a few fsyncs, not a thousand. A write answers only after
//! the commit that made it durable. Writes are serialised here rather than
//! by SQLite's busy handler, which sleeps and is unfair; the busy timeout is
//! left for the other processes (`hubd submit`, `fault`, ...).

use rusqlite::Connection;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use tokio::sync::{oneshot, Semaphore};

/// The most writes one transaction takes.
const GROUP: usize = 256;

/// Why a database call failed (the request is answered 500).
#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError(e.to_string())
    }
}

/// Which writes go first: a heartbeat or a result must not wait behind
/// the claims of a thousand polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    Urgent,
    Claims,
}

/// What a write asks of its savepoint.
pub enum Write<T> {
    /// Keep what it did; answer `T` once committed.
    Keep(T),
    /// Undo what it did; answer `T` (after the group's commit all the same).
    Undo(T),
}

/// A write as the writer thread runs it: the work inside its savepoint,
/// whether to keep it, and how to answer once the group has committed.
/// Given no connection (the group's transaction did not start), it runs
/// nothing and answers the error.
type Job = Box<dyn FnOnce(Option<&Connection>) -> (bool, Deliver) + Send>;
type Deliver = Box<dyn FnOnce(Result<(), String>) + Send>;

#[derive(Default)]
struct Queues {
    urgent: VecDeque<Job>,
    claims: VecDeque<Job>,
    closed: bool,
}

/// The database, as the server's handlers use it.
pub struct Store {
    queues: Arc<(Mutex<Queues>, Condvar)>,
    readers: Mutex<Vec<Connection>>,
    /// One permit per reader connection.
    reading: Semaphore,
}

impl Store {
    /// Starts the writer thread on `writer`; `readers` serve reads.
    pub fn new(writer: Connection, readers: Vec<Connection>) -> std::io::Result<Arc<Store>> {
        let queues = Arc::new((Mutex::new(Queues::default()), Condvar::new()));
        let q = queues.clone();
        std::thread::Builder::new().name("db-writer".into()).spawn(move || write_loop(&q, writer))?;
        let n = readers.len();
        Ok(Arc::new(Store { queues, readers: Mutex::new(readers), reading: Semaphore::new(n) }))
    }

    /// Runs `f` in its own savepoint of the writer's next group commit.
    pub async fn write<T: Send + 'static>(
        &self,
        lane: Lane,
        f: impl FnOnce(&Connection) -> rusqlite::Result<Write<T>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel::<Result<T, StoreError>>();
        let job: Job = Box::new(move |conn: Option<&Connection>| {
            let Some(conn) = conn else {
                let deliver: Deliver = Box::new(move |e| {
                    let _ = tx.send(Err(StoreError(e.err().unwrap_or_default())));
                });
                return (false, deliver);
            };
            let (keep, answer) = match catch_unwind(AssertUnwindSafe(|| f(conn))) {
                Ok(Ok(Write::Keep(t))) => (true, Ok(t)),
                Ok(Ok(Write::Undo(t))) => (false, Ok(t)),
                Ok(Err(e)) => (false, Err(StoreError(e.to_string()))),
                Err(_) => (false, Err(StoreError("a database write panicked".into()))),
            };
            let deliver: Deliver = Box::new(move |committed| {
                let _ = tx.send(match committed {
                    Ok(()) => answer,
                    Err(e) => Err(StoreError(format!("committing: {e}"))),
                });
            });
            (keep, deliver)
        });
        {
            let (lock, cv) = &*self.queues;
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            if q.closed {
                return Err(StoreError("the database writer has stopped".into()));
            }
            match lane {
                Lane::Urgent => q.urgent.push_back(job),
                Lane::Claims => q.claims.push_back(job),
            }
            cv.notify_one();
        }
        rx.await.unwrap_or_else(|_| Err(StoreError("the database writer dropped a write".into())))
    }

    /// Runs `f` on a reader connection, on a blocking thread.
    pub async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let _permit = self.reading.acquire().await.map_err(|_| StoreError("the readers are closed".into()))?;
        let store = self.clone();
        let run = tokio::task::spawn_blocking(move || {
            let conn = store.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
            let Some(conn) = conn else { return Err(StoreError("no reader connection free".into())) };
            // Given back even if `f` panics: the guard's drop runs while unwinding.
            let guard = Lent { store: &store, conn: Some(conn) };
            f(guard.conn.as_ref().expect("lent")).map_err(StoreError::from)
        });
        run.await.unwrap_or_else(|_| Err(StoreError("a database read panicked".into())))
    }

    /// Stops the writer once the writes queued so far are done.
    pub fn close(&self) {
        let (lock, cv) = &*self.queues;
        lock.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        cv.notify_all();
    }
}

/// A reader connection out of the pool, given back when dropped.
struct Lent<'a> {
    store: &'a Store,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.store.readers.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        }
    }
}

fn write_loop(queues: &(Mutex<Queues>, Condvar), conn: Connection) {
    let (lock, cv) = queues;
    loop {
        let group: Vec<Job> = {
            let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
            while q.urgent.is_empty() && q.claims.is_empty() && !q.closed {
                q = cv.wait(q).unwrap_or_else(|p| p.into_inner());
            }
            if q.urgent.is_empty() && q.claims.is_empty() {
                return;
            }
            let urgent = q.urgent.len().min(GROUP);
            let mut group: Vec<Job> = q.urgent.drain(..urgent).collect();
            let claims = q.claims.len().min(GROUP - group.len());
            group.extend(q.claims.drain(..claims));
            group
        };
        commit_group(&conn, group);
    }
}

/// One transaction for `group`, each write in its own savepoint.
fn commit_group(conn: &Connection, group: Vec<Job>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        let e = format!("starting a transaction: {e}");
        log::error!("{e}");
        for job in group {
            let (_, deliver) = job(None);
            deliver(Err(e.clone()));
        }
        return;
    }
    let mut answers = Vec::with_capacity(group.len());
    for job in group {
        if let Err(e) = conn.execute_batch("SAVEPOINT write") {
            log::error!("opening a savepoint: {e}");
        }
        let (keep, deliver) = job(Some(conn));
        let end = if keep { "RELEASE write" } else { "ROLLBACK TO write; RELEASE write" };
        if let Err(e) = conn.execute_batch(end) {
            log::error!("closing a savepoint: {e}");
        }
        answers.push(deliver);
    }
    let committed = conn.execute_batch("COMMIT").map_err(|e| {
        let _ = conn.execute_batch("ROLLBACK");
        log::error!("committing {} writes: {e}", answers.len());
        e.to_string()
    });
    for deliver in answers {
        deliver(committed.clone());
    }
}
