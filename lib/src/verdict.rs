//! Verdict rules: from what a run used to a status. All of them are here, in
//! [`decide`] (a judged run) and [`compile_failure`] (a compile).

use crate::protocol::Status;
use crate::sandbox::{Exit, Fired, Limits, Usage};

/// What a judged run earns before its output is looked at, first match wins:
///
/// | # | verdict | when |
/// |---|---|---|
/// | 1 | TLE | the watchdog killed it for CPU or wall time; or it died of `SIGXCPU` (the `RLIMIT_CPU` backstop); or its CPU time (user + system) exceeds the limit, however it ended |
/// | 2 | OLE | it died of `SIGXFSZ` (wrote past `RLIMIT_FSIZE`); or its stdout or stderr reached the output limit (a program that ignores `SIGXFSZ`, as Python does, gets `EFBIG` and may exit cleanly with truncated output) |
/// | 3 | MLE | the watchdog killed it for resident memory; or its peak memory exceeds the limit, however it ended (a crash after the limit was passed is the limit's doing) |
/// | 4 | RE | a non-zero exit code, or any other signal; a denied system call (the run is killed with `SIGSYS`, the call is named in `stderr` by `judge.rs`) |
/// | 5 | — (`None`) | it exited 0 within every limit: the checker decides AC or WA |
///
/// The order is Normal-OJ's (TLE → OLE → MLE → RE). Two consequences:
/// a program that dies because an allocation failed at the `RLIMIT_AS`
/// backstop while its resident memory was still under the limit is RE (as in
/// Normal-OJ, whose only memory limit is `RLIMIT_AS`); and CPU time counts
/// user + system time (Normal-OJ counts user time only).
pub fn decide(usage: &Usage, limits: &Limits, output_bytes: u64) -> Option<Status> {
    let signal = match usage.exit {
        Exit::Signal(s) => Some(s),
        Exit::Code(_) => None,
    };
    if matches!(usage.fired, Some(Fired::Cpu | Fired::Wall)) || signal == Some(libc::SIGXCPU) || usage.cpu > limits.cpu
    {
        Some(Status::TLE)
    } else if signal == Some(libc::SIGXFSZ) || output_bytes >= limits.output {
        Some(Status::OLE)
    } else if usage.fired == Some(Fired::Memory) || usage.memory > limits.memory {
        Some(Status::MLE)
    } else if usage.exit != Exit::Code(0) {
        Some(Status::RE)
    } else {
        None
    }
}

/// Why a compile failed, or `None` if it succeeded (exited 0 within every
/// limit). Every failure is CE, the compiler's own message first: a compile
/// that ran out of time or memory is the submission's problem, not the judge's.
pub fn compile_failure(usage: &Usage, limits: &Limits) -> Option<String> {
    let why = match (usage.fired, usage.exit) {
        (Some(Fired::Cpu), _) | (_, Exit::Signal(libc::SIGXCPU)) => {
            format!("compilation exceeded the time limit ({} s of CPU time)", limits.cpu.as_secs())
        }
        (Some(Fired::Wall), _) => format!("compilation exceeded the time limit ({} s)", limits.wall.as_secs()),
        (Some(Fired::Memory), _) => format!("compilation exceeded the memory limit ({} MiB)", limits.memory >> 20),
        (None, Exit::Signal(libc::SIGXFSZ)) => format!("compilation output exceeded {} MiB", limits.output >> 20),
        (None, Exit::Signal(s)) => format!("the compiler was killed by signal {s}"),
        (None, Exit::Code(0)) => return None,
        (None, Exit::Code(c)) => format!("the compiler exited with code {c}"),
    };
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            cpu: Duration::from_millis(1000),
            wall: Duration::from_millis(4000),
            memory: 64 << 20,
            address_space: None,
            stack: None,
            output: 1 << 20,
            processes: None,
        }
    }

    fn usage(exit: Exit, fired: Option<Fired>, cpu_ms: u64, memory_mib: u64) -> Usage {
        Usage {
            exit,
            fired,
            cpu: Duration::from_millis(cpu_ms),
            wall: Duration::from_millis(cpu_ms + 5),
            memory: memory_mib << 20,
            denied: None,
        }
    }

    const OK: Exit = Exit::Code(0);
    const KILLED: Exit = Exit::Signal(libc::SIGKILL);

    #[test]
    fn the_table() {
        let l = limits();
        let d = |u: Usage, out: u64| decide(&u, &l, out);
        // 5: clean.
        assert_eq!(d(usage(OK, None, 10, 1), 0), None);
        assert_eq!(d(usage(OK, None, 1000, 64), (1 << 20) - 1), None, "at the limits is within them");
        // 1: TLE.
        assert_eq!(d(usage(KILLED, Some(Fired::Cpu), 1010, 1), 0), Some(Status::TLE));
        assert_eq!(d(usage(KILLED, Some(Fired::Wall), 5, 1), 0), Some(Status::TLE), "a sleeper");
        assert_eq!(d(usage(Exit::Signal(libc::SIGXCPU), None, 999, 1), 0), Some(Status::TLE));
        assert_eq!(d(usage(OK, None, 1001, 1), 0), Some(Status::TLE), "over the CPU limit though it finished");
        // 2: OLE.
        assert_eq!(d(usage(Exit::Signal(libc::SIGXFSZ), None, 50, 1), 1 << 20), Some(Status::OLE));
        assert_eq!(d(usage(Exit::Code(1), None, 50, 1), 1 << 20), Some(Status::OLE), "SIGXFSZ ignored");
        // 3: MLE.
        assert_eq!(d(usage(KILLED, Some(Fired::Memory), 50, 60), 0), Some(Status::MLE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGSEGV), None, 50, 65), 0), Some(Status::MLE));
        assert_eq!(d(usage(OK, None, 50, 65), 0), Some(Status::MLE));
        // 4: RE.
        assert_eq!(d(usage(Exit::Code(3), None, 5, 1), 0), Some(Status::RE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGSEGV), None, 5, 1), 0), Some(Status::RE));
        assert_eq!(d(usage(Exit::Signal(libc::SIGABRT), None, 5, 1), 0), Some(Status::RE));
    }

    #[test]
    fn the_order_is_normal_ojs() {
        let l = limits();
        // TLE beats OLE beats MLE beats RE.
        assert_eq!(
            decide(&usage(Exit::Signal(libc::SIGXFSZ), Some(Fired::Cpu), 1100, 100), &l, 1 << 20),
            Some(Status::TLE)
        );
        assert_eq!(decide(&usage(Exit::Signal(libc::SIGXFSZ), None, 10, 100), &l, 1 << 20), Some(Status::OLE));
        assert_eq!(decide(&usage(Exit::Code(1), None, 10, 100), &l, 0), Some(Status::MLE));
    }

    #[test]
    fn compile_failures_say_why() {
        let l = limits();
        assert_eq!(compile_failure(&usage(OK, None, 10, 1), &l), None);
        assert!(compile_failure(&usage(Exit::Code(1), None, 10, 1), &l).unwrap().contains("code 1"));
        assert!(compile_failure(&usage(KILLED, Some(Fired::Cpu), 10, 1), &l).unwrap().contains("time limit"));
        assert!(compile_failure(&usage(KILLED, Some(Fired::Wall), 10, 1), &l).unwrap().contains("time limit"));
        assert!(compile_failure(&usage(KILLED, Some(Fired::Memory), 10, 1), &l).unwrap().contains("memory limit"));
        assert!(compile_failure(&usage(Exit::Signal(libc::SIGXFSZ), None, 10, 1), &l).unwrap().contains("output"));
        assert!(compile_failure(&usage(Exit::Signal(libc::SIGSEGV), None, 10, 1), &l).unwrap().contains("signal 11"));
    }
}
