//! What a server says of itself on its metrics page, in the Prometheus
//! text format: its build (`<prefix>_build_info`) and the standard process
//! metrics of the process serving the page (`process_start_time_seconds`,
//! `process_resident_memory_bytes`, `process_open_fds`), read from
//! `/proc/self` at each scrape, as Prometheus' own clients read them.

use std::fmt::Write;

/// `<prefix>_build_info{version="…"} 1`, with its HELP and TYPE; `what`
/// names the program (`runnerd`, `hubd`).
pub fn build_info(prefix: &str, what: &str, version: &str) -> String {
    let name = format!("{prefix}_build_info");
    let version = version.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
    format!("# HELP {name} The version of {what}; always 1.\n# TYPE {name} gauge\n{name}{{version=\"{version}\"}} 1\n")
}

/// The process metrics of this process, which is `whose` (said in each
/// HELP). A value that cannot be read is left out, with its HELP and TYPE.
pub fn render(whose: &str) -> String {
    let mut out = String::new();
    let mut metric = |name: &str, help: &str, value: Option<String>| {
        if let Some(v) = value {
            let _ = writeln!(out, "# HELP {name} {help} of {whose}, the process serving these metrics.");
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {v}");
        }
    };
    metric(
        "process_start_time_seconds",
        "Start time since the epoch, in seconds,",
        start_time_seconds().map(|s| format!("{s:.2}")),
    );
    metric(
        "process_resident_memory_bytes",
        "Resident memory, in bytes,",
        resident_memory_bytes().map(|b| b.to_string()),
    );
    metric("process_open_fds", "Open file descriptors", open_fds().map(|n| n.to_string()));
    out
}

/// When this process started, in seconds since the epoch: its start in
/// clock ticks after boot (`/proc/self/stat`) plus the boot time
/// (`/proc/stat`).
pub fn start_time_seconds() -> Option<f64> {
    let ticks = starttime_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    let btime = boot_time(&std::fs::read_to_string("/proc/stat").ok()?)?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(-1);
    (hz > 0).then(|| btime as f64 + ticks as f64 / hz as f64)
}

/// This process's resident set, in bytes (`/proc/self/statm`).
pub fn resident_memory_bytes() -> Option<u64> {
    let pages: u64 = std::fs::read_to_string("/proc/self/statm").ok()?.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(-1);
    u64::try_from(page).ok().map(|p| pages * p)
}

/// The descriptors this process has open (`/proc/self/fd`), but the one
/// that reads the directory.
pub fn open_fds() -> Option<u64> {
    let n = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(n.saturating_sub(1))
}

/// Field 22 of `/proc/PID/stat`, `starttime`. The fields are counted after
/// the last `)`: the command name before it may hold spaces and parentheses.
fn starttime_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    // rest begins with field 3, state.
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_after_the_command_name_whatever_it_holds() {
        let stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(starttime_ticks(stat), Some(98765));
        assert_eq!(starttime_ticks("4242 (cut"), None);
        assert_eq!(boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000));
    }

    #[test]
    fn this_process_is_read_as_running_now_with_memory_and_descriptors() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let start = start_time_seconds().expect("start time");
        // Ticks and btime are whole: a little slack either way.
        assert!(start <= now + 2.0 && start > now - 3600.0, "started at {start}, now {now}");
        assert!(resident_memory_bytes().expect("resident memory") > 0);
        // Other tests open files at once: a few tries for a quiet moment.
        let counted = (0..20).any(|_| {
            let before = open_fds().expect("open fds");
            let f = std::fs::File::open("/proc/self/stat").unwrap();
            let with = open_fds();
            drop(f);
            with == Some(before + 1) && open_fds() == Some(before)
        });
        assert!(counted, "one more file open, one more counted");
    }

    #[test]
    fn the_page_names_whose_process_it_is_and_the_version() {
        let page = render("runnerd");
        for name in ["process_start_time_seconds", "process_resident_memory_bytes", "process_open_fds"] {
            assert!(page.contains(&format!("# TYPE {name} gauge\n{name} ")), "{page}");
        }
        assert!(page.contains("of runnerd, the process serving these metrics."), "{page}");
        assert_eq!(
            build_info("hubd", "hubd", "1.2.3"),
            "# HELP hubd_build_info The version of hubd; always 1.\n# TYPE hubd_build_info gauge\n\
             hubd_build_info{version=\"1.2.3\"} 1\n"
        );
    }
}
