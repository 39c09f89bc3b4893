//! A dialogue's board: where an interactive case's two runs (the program
//! and its interactor, each in a helper of its own) share the interactor's
//! CPU time, so that the idleness rule sees the dialogue as one.
//!
//! A program that waits on a busy interactor is not idle: the dialogue
//! advances. Only when neither side's CPU time moves (a deadlock: both
//! reading, both writing to full pipes; a sleep) does the program's run
//! stand still. The interactor's watchdog writes its CPU time here at each
//! look ([`Side::Tells`]); the program's reads it and counts it with its
//! own ([`Side::Hears`]). The board is a `memfd` of one counter, passed
//! with the run's stdio: no path, nothing a judged program can see.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// Which side of the dialogue a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The interactor: writes its CPU time at each look.
    Tells,
    /// The program: its stillness is of its CPU time and the board's.
    Hears,
}

/// The counter both runs share: the interactor's CPU time, in ns.
#[derive(Debug)]
pub struct Board {
    file: File,
}

impl Board {
    pub fn new() -> io::Result<Board> {
        let file = super::sys::memfd(c"board")?;
        file.write_all_at(&0u64.to_ne_bytes(), 0)?;
        Ok(Board { file })
    }

    /// The board received with a request (its descriptor).
    pub fn from_file(file: File) -> Board {
        Board { file }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// The interactor's CPU time so far (zero if unreadable: the program's
    /// own time still counts).
    pub fn heard(&self) -> Duration {
        let mut b = [0u8; 8];
        match self.file.read_exact_at(&mut b, 0) {
            Ok(()) => Duration::from_nanos(u64::from_ne_bytes(b)),
            Err(_) => Duration::ZERO,
        }
    }

    /// Says the interactor's CPU time (a failed write is a board that stays
    /// still: at worst the program's wait is taken for idleness).
    pub fn tell(&self, cpu: Duration) {
        let _ = self.file.write_all_at(&(cpu.as_nanos() as u64).to_ne_bytes(), 0);
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

/// A run's part in a dialogue as its watchdog holds it: the progress it
/// measures stillness by.
pub(super) struct Part<'a> {
    pub board: &'a Board,
    pub side: Side,
}

impl Part<'_> {
    /// The progress of the dialogue at one look of a run whose own CPU time
    /// is `cpu`: the interactor tells it and counts its own; the program
    /// counts both.
    pub fn progress(&self, cpu: Duration) -> Duration {
        match self.side {
            Side::Tells => {
                self.board.tell(cpu);
                cpu
            }
            Side::Hears => cpu + self.board.heard(),
        }
    }
}

/// The progress of a run that may be part of a dialogue.
pub(super) fn progress(part: Option<&Part<'_>>, cpu: Duration) -> Duration {
    part.map_or(cpu, |p| p.progress(cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_hears_what_the_interactor_tells() {
        let board = Board::new().unwrap();
        let copy = Board::from_file(board.file().try_clone().unwrap());
        let (tells, hears) = (Part { board: &board, side: Side::Tells }, Part { board: &copy, side: Side::Hears });
        assert_eq!(progress(Some(&hears), Duration::from_millis(5)), Duration::from_millis(5));
        assert_eq!(progress(Some(&tells), Duration::from_millis(70)), Duration::from_millis(70));
        assert_eq!(progress(Some(&hears), Duration::from_millis(5)), Duration::from_millis(75));
        assert_eq!(progress(None, Duration::from_millis(5)), Duration::from_millis(5));
    }
}
