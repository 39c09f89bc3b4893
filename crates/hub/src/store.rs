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
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

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

/// One transaction for `group`, each write in its own savepoint. A write
/// whose error ends the transaction (a full disk: SQLite rolls it all back)
/// takes the group's earlier writes with it; none is answered as done, and
/// the rest are not run, lest each commit alone, unanswered.
fn commit_group(conn: &Connection, group: Vec<Job>) {
    let fail_all = |jobs: Vec<Job>, answers: Vec<Deliver>, e: String| {
        log::error!("{e}");
        answers.into_iter().for_each(|deliver| deliver(Err(e.clone())));
        for job in jobs {
            let (_, deliver) = job(None);
            deliver(Err(e.clone()));
        }
    };
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        return fail_all(group, Vec::new(), format!("starting a transaction: {e}"));
    }
    let mut answers = Vec::with_capacity(group.len());
    let mut jobs = group.into_iter();
    while let Some(job) = jobs.next() {
        if let Err(e) = conn.execute_batch("SAVEPOINT write") {
            let (_, deliver) = job(None);
            answers.push(deliver);
            let _ = conn.execute_batch("ROLLBACK");
            return fail_all(jobs.collect(), answers, format!("opening a savepoint: {e}"));
        }
        let (keep, deliver) = job(Some(conn));
        answers.push(deliver);
        if conn.is_autocommit() {
            return fail_all(jobs.collect(), answers, "a write's error ended the group's transaction".into());
        }
        let end = if keep { "RELEASE write" } else { "ROLLBACK TO write; RELEASE write" };
        if let Err(e) = conn.execute_batch(end) {
            let _ = conn.execute_batch("ROLLBACK");
            return fail_all(jobs.collect(), answers, format!("closing a savepoint: {e}"));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each job's answer, once given.
    type Answers = Vec<Option<Result<(), String>>>;

    /// Commits one group of writes, each running one of `sqls` on a table
    /// `t (x)`: the values kept, in order, and each write's answer.
    fn commit(sqls: [&'static str; 3]) -> (Connection, Vec<i64>, Answers) {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let answers = Arc::new(Mutex::new(vec![None; sqls.len()]));
        let group = sqls
            .into_iter()
            .enumerate()
            .map(|(i, sql)| {
                let answers = answers.clone();
                Box::new(move |conn: Option<&Connection>| {
                    let keep = conn.is_some_and(|c| c.execute_batch(sql).is_ok());
                    let deliver: Deliver = Box::new(move |r| answers.lock().unwrap()[i] = Some(r));
                    (keep, deliver)
                }) as Job
            })
            .collect();
        commit_group(&conn, group);
        let kept = conn
            .prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .flatten()
            .collect();
        let answers = answers.lock().unwrap().clone();
        (conn, kept, answers)
    }

    /// A write whose error ends the transaction (here by its own hand, as
    /// SQLite does on a full disk) fails the whole group, and the writes
    /// after it are not committed each on its own while answered "failed".
    #[test]
    fn a_write_that_ends_the_transaction_fails_its_group_and_commits_nothing() {
        let (conn, kept, answers) =
            commit(["INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2); ROLLBACK", "INSERT INTO t VALUES (3)"]);
        assert_eq!(kept, [0i64; 0], "no write of the group was kept");
        assert!(answers.iter().all(|a| matches!(a, Some(Err(_)))), "every write answered failed: {answers:?}");
        assert!(conn.is_autocommit(), "no transaction left open");
    }

    /// The group commits together when every write goes well, and an undone
    /// write is undone alone.
    #[test]
    fn a_group_commits_its_kept_writes() {
        let (_, kept, answers) = commit([
            "INSERT INTO t VALUES (1)",
            "INSERT INTO t VALUES (2); SELECT * FROM nowhere",
            "INSERT INTO t VALUES (3)",
        ]);
        assert_eq!(kept, [1, 3]);
        assert!(answers.iter().all(|a| matches!(a, Some(Ok(())))), "{answers:?}");
    }
}
