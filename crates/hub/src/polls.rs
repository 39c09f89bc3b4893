//! Waiting long polls, held in memory: a poll that found no work waits on
//! its own wake, holding no thread and no database connection, in a FIFO
//! of waiters. New work wakes one waiter at a time: a poll that claims a
//! job wakes the next, and one that finds nothing ends the chain, so a job
//! costs a thousand waiters one claim each, not a thousand.
//!
//! Each poll moves through states under one lock: `Claiming` (a claim is
//! queued or running), `Waiting` (in the FIFO), `Committing` (its claim
//! found a job and is being committed: it will answer 200), `Cancelled`
//! (a `DELETE` ended it: it answers 204) and `Done`. A claim commits only if
//! it moves its poll from `Claiming` to `Committing` first, and a `DELETE`
//! cancels only a poll in `Claiming` or `Waiting`: so a poll answered 204
//! never handed out a job, and the cancel is answered at once, without
//! waiting for the claim's transaction.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a `DELETE` that found no poll of its runner is remembered for
/// that runner's next poll (a poll still on its way when the cancel came).
const CANCEL_REMEMBERED: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Claiming,
    Waiting,
    Committing,
    Cancelled,
    Done,
}

/// One `next-job` request, from its authentication to its answer.
pub struct Poll {
    runner: String,
    id: u64,
    state: Mutex<State>,
    /// Rung by a wake (work may be waiting) or a cancel; the state tells which.
    bell: Notify,
    /// A wake was handed to this poll and not yet spent on a claim: if the
    /// poll ends without claiming, the wake goes to the next waiter.
    woken: Mutex<bool>,
}

impl Poll {
    fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves to `to` if in one of `from`: the state it left, or the one it is in.
    fn swap(&self, from: &[State], to: State) -> Result<State, State> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if from.contains(&s) {
            Ok(std::mem::replace(&mut *s, to))
        } else {
            Err(*s)
        }
    }

    /// The claim's last step before it commits a job: false if the poll
    /// was cancelled (or its client left) meanwhile, and the claim must be
    /// undone.
    pub fn commit(&self) -> bool {
        self.swap(&[State::Claiming], State::Committing).is_ok()
    }

    pub fn cancelled(&self) -> bool {
        self.state() == State::Cancelled
    }

    /// Waits for a wake or a cancel.
    pub async fn rung(&self) {
        self.bell.notified().await
    }

    /// The runner this poll is for.
    pub fn runner(&self) -> &str {
        &self.runner
    }
}

/// Why a poll ended without a claim.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    Cancelled,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Waiting polls, oldest first (a poll that left the wait is skipped).
    fifo: VecDeque<Arc<Poll>>,
    /// Every poll being served, by runner: what a `DELETE` ends.
    by_runner: HashMap<String, Vec<Arc<Poll>>>,
    /// Cancels that found no poll, until when they hold.
    cancels: HashMap<String, Instant>,
    waiting: usize,
}

/// The hub's polls.
#[derive(Default)]
pub struct Polls {
    inner: Mutex<Inner>,
    /// Counts the hints that work may be waiting: a poll whose claim found
    /// nothing while a hint came claims again instead of waiting.
    generation: AtomicU64,
}

impl Polls {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new poll of `runner`, claiming; `Err` if a `DELETE` for it came first.
    pub fn begin(&self, runner: &str) -> Result<Arc<Poll>, Ended> {
        let mut inner = self.lock();
        if let Some(until) = inner.cancels.remove(runner) {
            if until > Instant::now() {
                return Err(Ended::Cancelled);
            }
        }
        inner.next_id += 1;
        let poll = Arc::new(Poll {
            runner: runner.to_string(),
            id: inner.next_id,
            state: Mutex::new(State::Claiming),
            bell: Notify::new(),
            woken: Mutex::new(false),
        });
        inner.by_runner.entry(runner.to_string()).or_default().push(poll.clone());
        Ok(poll)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The poll found nothing: it waits in the FIFO. `Err` if it was
    /// cancelled meanwhile.
    pub fn wait(&self, poll: &Arc<Poll>) -> Result<(), Ended> {
        let mut inner = self.lock();
        poll.swap(&[State::Claiming], State::Waiting).map_err(|_| Ended::Cancelled)?;
        inner.waiting += 1;
        inner.fifo.push_back(poll.clone());
        Ok(())
    }

    /// The poll leaves its wait (woken, or its time is up) to claim again.
    /// `Err` if it was cancelled.
    pub fn resume(&self, poll: &Arc<Poll>) -> Result<(), Ended> {
        let mut inner = self.lock();
        match poll.swap(&[State::Waiting], State::Claiming) {
            Ok(_) => {
                inner.waiting -= 1;
                // Still in the FIFO if it was not woken: out of it.
                inner.fifo.retain(|p| p.id != poll.id);
                Ok(())
            }
            Err(_) => Err(Ended::Cancelled),
        }
    }

    /// The poll claimed a job (it spent any wake it had).
    pub fn spent_wake(&self, poll: &Poll) {
        *poll.woken.lock().unwrap_or_else(|p| p.into_inner()) = false;
    }

    /// The poll is answered (or its client left): it is forgotten, and a
    /// wake it did not spend goes to the next waiter.
    pub fn end(&self, poll: &Arc<Poll>) {
        let unspent = {
            let mut inner = self.lock();
            let mut s = poll.state.lock().unwrap_or_else(|p| p.into_inner());
            if *s == State::Waiting {
                inner.waiting -= 1;
                inner.fifo.retain(|p| p.id != poll.id);
            }
            *s = State::Done;
            drop(s);
            if let Some(list) = inner.by_runner.get_mut(&poll.runner) {
                list.retain(|p| p.id != poll.id);
                if list.is_empty() {
                    inner.by_runner.remove(&poll.runner);
                }
            }
            std::mem::take(&mut *poll.woken.lock().unwrap_or_else(|p| p.into_inner()))
        };
        if unspent {
            self.wake(1);
        }
    }

    /// Work may be waiting: wakes up to `n` waiters, oldest first.
    pub fn wake(&self, n: usize) {
        let mut inner = self.lock();
        for _ in 0..n {
            let Some(poll) = inner.fifo.pop_front() else { return };
            *poll.woken.lock().unwrap_or_else(|p| p.into_inner()) = true;
            poll.bell.notify_one();
        }
    }

    /// A hint from outside (a submission, a rejudge, a requeue): counted,
    /// so a claim racing it looks again, and one waiter woken.
    pub fn hint(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.wake(1);
    }

    /// `DELETE /runners/{rn}/next-job`: ends `runner`'s polls that have not
    /// claimed a job; with none to end, the next poll of `runner` is
    /// answered 204 at once. Returns how many were ended.
    pub fn cancel(&self, runner: &str) -> usize {
        let mut inner = self.lock();
        let mut ended = 0;
        let polls = inner.by_runner.get(runner).cloned().unwrap_or_default();
        for poll in polls {
            let Ok(was) = poll.swap(&[State::Claiming, State::Waiting], State::Cancelled) else { continue };
            if was == State::Waiting {
                // It leaves the FIFO and the count now, not when its task runs.
                inner.waiting -= 1;
                inner.fifo.retain(|p| p.id != poll.id);
            }
            ended += 1;
            poll.bell.notify_one();
        }
        if ended == 0 {
            let now = Instant::now();
            inner.cancels.retain(|_, until| *until > now);
            inner.cancels.insert(runner.to_string(), now + CANCEL_REMEMBERED);
        }
        ended
    }

    /// Polls waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancel_ends_a_waiting_poll_and_one_that_claims_but_not_one_that_commits() {
        let polls = Polls::default();
        let a = polls.begin("rn_a").unwrap();
        polls.wait(&a).unwrap();
        assert_eq!(polls.waiting(), 1);
        assert_eq!(polls.cancel("rn_a"), 1);
        assert_eq!(polls.waiting(), 0);
        assert!(a.cancelled());
        assert_eq!(polls.resume(&a), Err(Ended::Cancelled));
        polls.end(&a);

        let b = polls.begin("rn_b").unwrap();
        assert!(b.commit(), "a claiming poll commits");
        assert_eq!(polls.cancel("rn_b"), 0, "a committing poll is not cancelled");
        polls.end(&b);
        assert_eq!(polls.begin("rn_b").err(), Some(Ended::Cancelled), "the cancel is remembered for the next poll");
        assert!(polls.begin("rn_b").is_ok(), "once");

        let c = polls.begin("rn_c").unwrap();
        assert_eq!(polls.cancel("rn_c"), 1);
        assert!(!c.commit(), "a cancelled poll's claim is undone");
    }

    #[test]
    fn a_wake_goes_to_the_oldest_waiter_and_an_unspent_wake_is_passed_on() {
        let polls = Polls::default();
        let (a, b) = (polls.begin("rn_a").unwrap(), polls.begin("rn_b").unwrap());
        polls.wait(&a).unwrap();
        polls.wait(&b).unwrap();
        polls.hint();
        assert!(*a.woken.lock().unwrap() && !*b.woken.lock().unwrap());
        // A ends without claiming (its client left): B gets the wake.
        polls.end(&a);
        assert!(*b.woken.lock().unwrap());
        assert_eq!(polls.waiting(), 1, "B is woken but still waiting until its task runs");
        polls.resume(&b).unwrap();
        assert_eq!(polls.waiting(), 0);
    }
}
