//! The runner's slots, lent to whichever claim can use them.
//!
//! A claim holds one slot from its compile to its last case. While other
//! slots sit idle it borrows them, to run its cases side by side (one job of
//! a thousand cases then uses every core); a borrowed slot goes back after
//! the case it is running as soon as another claim waits for a slot, so a
//! claim never waits longer than one case of another.

use std::sync::{Condvar, Mutex};

/// A set of slot indices ([`crate::judge::Slot::for_index`]).
pub struct SlotPool {
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    free: Vec<usize>,
    /// Claims blocked in [`SlotPool::take`].
    waiting: usize,
}

impl SlotPool {
    pub fn new(indices: impl IntoIterator<Item = usize>) -> SlotPool {
        let mut free: Vec<usize> = indices.into_iter().collect();
        // Lowest index first out (`pop`), so a quiet runner uses slot 0.
        free.sort_unstable_by(|a, b| b.cmp(a));
        SlotPool { state: Mutex::new(State { free, waiting: 0 }), returned: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a claim, waiting for one if none is free.
    pub fn take(&self) -> usize {
        let mut s = self.lock();
        s.waiting += 1;
        loop {
            if let Some(i) = s.free.pop() {
                s.waiting -= 1;
                return i;
            }
            s = self.returned.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A slot to borrow: only one that is free while no claim waits.
    pub fn lend(&self) -> Option<usize> {
        let mut s = self.lock();
        if s.waiting > 0 {
            return None;
        }
        s.free.pop()
    }

    /// Whether a claim waits for a slot (a borrower should give its back).
    pub fn wanted(&self) -> bool {
        self.lock().waiting > 0
    }

    pub fn give(&self, i: usize) {
        self.lock().free.push(i);
        self.returned.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn nothing_is_lent_while_a_claim_waits() {
        let pool = Arc::new(SlotPool::new([0, 1]));
        assert_eq!(pool.take(), 0);
        assert_eq!(pool.lend(), Some(1));
        assert_eq!(pool.lend(), None);
        let waiter = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.take())
        };
        // The condition, not a guess: the waiter is counted.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !pool.wanted() {
            assert!(std::time::Instant::now() < deadline, "the waiter never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        pool.give(0);
        assert_eq!(waiter.join().unwrap(), 0);
        assert!(!pool.wanted());
        pool.give(1);
        assert_eq!(pool.lend(), Some(1));
    }
}
