//! The exit codes of every ojrunner program, the runner's stages, their
//! commands and `hubd` alike: one table, so a supervisor reads a code the
//! same way whichever program ended. Each man page's EXIT STATUS lists
//! [`ExitCode::ALL`] (tests/manpages.rs checks it against this enum) and
//! says what the code means for that program.

/// Why a program ended, as the number a supervisor sees. A code means one
/// thing everywhere (s6's convention for 100 and 111); each variant says
/// what a supervisor should do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ExitCode {
    /// Done: a drain finished, a stage stopped when told, a command did
    /// what it was asked. Nothing to do.
    Ok = 0,
    /// The work asked for was not done, for a reason that is in the log,
    /// not in the configuration: the hub forgot or refused the runner's
    /// identity, a drain was cut by its deadline or stopped at once, a
    /// command failed, `judge-exec run` judged a case not AC. A supervisor
    /// may restart (a runner registers again); a person should read the log.
    Failure = 1,
    /// Usage: a bad option, command or value. Fix the command line; do
    /// not restart as is.
    Usage = 2,
    /// Bad configuration (a URL, a token, a database, a language table):
    /// do not restart until it is fixed.
    Config = 100,
    /// A temporary failure of the system (the spool, a socket, a thread):
    /// restarting may help.
    Temporary = 111,
}

impl ExitCode {
    /// Every code, in numeric order: what each man page's EXIT STATUS lists.
    pub const ALL: [ExitCode; 5] =
        [ExitCode::Ok, ExitCode::Failure, ExitCode::Usage, ExitCode::Config, ExitCode::Temporary];

    /// The number the process exits with.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The code a process exited with, if it is one of ours (a stage
    /// killed by a signal, or exiting with a code of its own, is not).
    pub fn from_code(code: i32) -> Option<ExitCode> {
        ExitCode::ALL.into_iter().find(|c| c.code() == code)
    }
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> std::process::ExitCode {
        std::process::ExitCode::from(code as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_in_all_once_and_reads_back() {
        for (i, c) in ExitCode::ALL.iter().enumerate() {
            assert_eq!(ExitCode::from_code(c.code()), Some(*c));
            assert!(ExitCode::ALL[..i].iter().all(|d| d.code() < c.code()), "ALL is in numeric order");
        }
        assert_eq!(ExitCode::from_code(3), None);
        // A new variant stops this match compiling: list it in ALL too.
        for c in ExitCode::ALL {
            match c {
                ExitCode::Ok | ExitCode::Failure | ExitCode::Usage | ExitCode::Config | ExitCode::Temporary => {}
            }
        }
    }
}
