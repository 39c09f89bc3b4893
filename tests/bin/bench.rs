//! `make bench`: the sandbox's cost and accuracy, against baselines measured
//! in the same run (see BENCHMARKS.md).
//!
//! 1. One run of a trivial static program: p50 and p99 wall cost of a
//!    sandboxed run (`sandbox::run`: helper, namespaces, cgroup, limits,
//!    measurement, teardown), of a bare fork/exec/wait, and of `bwrap`
//!    (installed with apt-get if missing), as ratios to bare.
//!    Then the same run timed step by step (clone, mounts, cgroup, seccomp,
//!    exec, wait, teardown: `sandbox::timeline`), p50 and p99 of each.
//!    And the kernel's floor for a fresh jail per run (`tests/bench/floor.c`:
//!    the namespaces, mounts, init, uid and filter alone, no code of ours),
//!    and the same without the namespaces and mounts, beside a bare run
//!    from the same small program.
//! 2. Judged cases per second: one job of 1,000 A+B cases through
//!    `Judge::run_cases` as judge-exec runs a lone job (its cases side by
//!    side on one slot per core; the checker and per-case results on).
//!    Beside it, the A+B program run by `floor.c` in a loop per core, bare,
//!    from an init under a uid and a filter, and each run in a fresh jail:
//!    the kernel's ceiling for each.
//! 3. The price of issue #3's letter, which the sandbox does not pay by
//!    default (each helper has one network namespace, and one cgroup reset
//!    per run): the cost of a run with `--netns-per-run`, of making and
//!    removing a cgroup, and the judged cases per second of the same job
//!    with a namespace per run, then also a cgroup made and removed per case.
//! 4. Accuracy: memory of a program touching N MiB, CPU time of a 0.5 s
//!    spin, the kill of a busy loop under a 1 s limit and of a sleeper at its
//!    wall limit.
//! 5. Pinning: the spread of the CPU time of a fixed piece of work while
//!    another slot is busy, each slot on its core and not.
//! 6. Early verdicts (issue #26, `bench_early.rs`): a wrong first line and
//!    a sleeper judged early, and what a correct program pays for it.
//!
//! Every target is printed with PASS or MISS. The exit status is 0 unless the
//! bench itself failed (a benchmark reports; it does not gate).

#![deny(clippy::undocumented_unsafe_blocks)]

use ojrunner::checker::Checker;
use ojrunner::judge::{Case, Judge, Slot, Slots, Submission};
use ojrunner::language::Languages;
use ojrunner::protocol::{Task, Verdict};
use ojrunner::sandbox::slot::SlotPool;
use ojrunner::sandbox::timeline::{Mark, MARKS};
use ojrunner::sandbox::{self, Bind, Fired, Limits, Spec, Usage};
use std::ffi::CString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testkit::{env_usize, is_root, machine, stats, Report, Stats, TempDir};

#[path = "bench_early.rs"]
mod early;

/// The slot the bench runs as (a high index, away from the tests' slots).
const SLOT: usize = 40;

const TRIVIAL: &str = "int main(void) { return 0; }\n";

/// Touches exactly `argv[1]` MiB with one anonymous mapping, then exits.
/// Static, no stdio: its own footprint is a few pages.
const TOUCH: &str = r#"
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    size_t n = (size_t)atol(argv[1]) << 20;
    volatile char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    return 0;
}
"#;

/// Spins until its own CPU clock reads `argv[1]` ms (the calibration is the
/// kernel's clock of the process itself), then exits.
const SPIN: &str = r#"
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
    long ms = atol(argv[1]);
    struct timespec t;
    volatile unsigned long x = 0;
    for (;;) {
        for (int i = 0; i < 10000; i++) x += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (t.tv_sec * 1000L + t.tv_nsec / 1000000L >= ms) return 0;
    }
}
"#;

/// A fixed piece of work, `argv[1]` rounds of arithmetic over a 256 KiB
/// table (in a core's own cache, or not, as the neighbours allow): its CPU
/// time is what varies with where it runs.
const WORK: &str = r#"
#include <stdlib.h>
static unsigned table[1 << 16];
int main(int argc, char **argv) {
    long rounds = atol(argv[1]);
    unsigned x = 1;
    for (long r = 0; r < rounds; r++)
        for (unsigned i = 0; i < (1 << 16); i += 16) { x = x * 1103515245u + table[(i + x) & 0xffff]; table[i] = x; }
    return x == 42;
}
"#;

const BUSY: &str = "int main(void) { volatile unsigned long x = 0; for (;;) x++; }\n";

/// A busy neighbour as a compile or a multithreaded program is: two
/// processes, each sweeping 16 MiB of its own for ever (the caches its
/// core shares are never its neighbour's).
const SWEEP: &str = r#"
#include <stdlib.h>
#include <unistd.h>
int main(void) {
    fork();
    size_t n = 16 << 20;
    volatile char *p = malloc(n);
    for (unsigned x = 0;; x++)
        for (size_t i = 0; i < n; i += 64) p[i] += x;
}
"#;
const SLEEPER: &str = "#include <unistd.h>\nint main(void) { sleep(30); return 0; }\n";
const APLUSB: &str =
    "#include <stdio.h>\nint main(void) { long a, b; if (scanf(\"%ld %ld\", &a, &b) != 2) return 1; printf(\"%ld\\n\", a + b); return 0; }\n";

fn main() {
    // The sandbox's helpers are fresh execs of this binary (as of judge-exec).
    sandbox::enter_if_asked();
    if let Err(e) = bench() {
        eprintln!("ojrunner-bench: {e}");
        std::process::exit(1);
    }
}

fn bench() -> Result<(), String> {
    let root = is_root();
    let work = TempDir::new("bench");
    let dir = work.path().join("bin");
    std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
    set_mode(&dir, 0o755);
    for (name, src) in [
        ("trivial", TRIVIAL),
        ("touch", TOUCH),
        ("spin", SPIN),
        ("work", WORK),
        ("busy", BUSY),
        ("sweep", SWEEP),
        ("sleeper", SLEEPER),
    ] {
        compile_static(&dir, name, src)?;
    }
    compile_static(&dir, "floor", include_str!("../bench/floor.c"))?;
    let floor_dir = work.path().join("floor");
    for d in ["tmp", "proc"] {
        std::fs::create_dir_all(floor_dir.join(d)).map_err(|e| e.to_string())?;
    }
    let floor = Floor { binary: dir.join("floor"), dir: floor_dir, uid: Slot::for_index(SLOT).uid };
    let mech = sandbox::probe_mechanisms();
    println!("ojrunner bench: {}", machine());
    println!(
        "  sandbox: namespaces {}, cgroup {}, slot uid {}",
        mech.namespaces,
        mech.cgroup.as_ref().map_or("none".to_string(), |h| format!("{:?}", h.kind).to_lowercase()),
        Slot::for_index(SLOT).uid
    );
    if !root {
        println!("  (not root: runs are the basic level, without namespaces or a cgroup)");
    }
    let mut rep = Report::default();
    if std::env::var_os("OJ_BENCH_EARLY_ONLY").is_some_and(|v| v == "1") {
        early::bench(work.path(), &mut rep)?;
        return finish(&rep);
    }

    // 1. The cost of one run.
    let n = env_usize("OJ_BENCH_RUNS", 1000);
    let trivial = dir.join("trivial");
    // The helper starts at the first run: not part of a run's cost.
    for _ in 0..20 {
        sandboxed_run(&dir, "./trivial", &[], limits(Duration::from_secs(1), 64 << 20))?;
    }
    let bwrap = match ensure_bwrap() {
        Ok(b) if bwrap_run(&b, &dir, &trivial) => Some(b),
        Ok(_) => {
            println!("  (bwrap fails here: not measured)");
            None
        }
        Err(e) => {
            println!("  (no bwrap: {e})");
            None
        }
    };
    let (mut err, mut bwrap_ok) = (None, true);
    let mut bare_f = || bare_run(&trivial);
    let mut sandbox_f = || {
        if let Err(e) = sandboxed_run(&dir, "./trivial", &[], limits(Duration::from_secs(1), 64 << 20)) {
            err.get_or_insert(e);
        }
    };
    let mut bwrap_f = || {
        if let Some(b) = &bwrap {
            bwrap_ok &= bwrap_run(b, &dir, &trivial);
        }
    };
    let mut fs: Vec<(usize, &mut dyn FnMut())> = vec![(n, &mut bare_f), (n, &mut sandbox_f)];
    if bwrap.is_some() {
        fs.push((n.min(300), &mut bwrap_f));
    }
    let stats = sample_in_turns(10, &mut fs);
    drop(fs);
    if let Some(e) = err {
        return Err(format!("a sandboxed run failed: {e}"));
    }
    let (bare, sandboxed) = (stats[0], stats[1]);
    if !bwrap_ok {
        println!("  (bwrap failed during the bench: not shown)");
    }
    let bwrap = stats.get(2).copied().filter(|_| bwrap_ok);
    println!();
    println!("one run of a trivial static program ({n} runs each, in 10 interleaved turns; wall time, ms)");
    println!("  {:<28} {:>8} {:>8} {:>10} {:>10}", "", "p50", "p99", "p50/bare", "p99/bare");
    let row = |name: &str, s: &Stats| {
        println!(
            "  {:<28} {:>8.3} {:>8.3} {:>10.2} {:>10.2}",
            name,
            ms(s.p50),
            ms(s.p99),
            s.p50.as_secs_f64() / bare.p50.as_secs_f64(),
            s.p99.as_secs_f64() / bare.p99.as_secs_f64()
        )
    };
    row("bare fork/exec/wait", &bare);
    row("ojrunner sandbox::run", &sandboxed);
    if let Some(b) = &bwrap {
        row("bwrap (unshare-all)", b);
    }
    // The kernel's own work for a fresh jail, measured the same way.
    let floor_stats = if root {
        let trivial_floor = floor.runs_in_turns(&trivial, None, n, 10)?;
        println!();
        println!(
            "the kernel's floor for a fresh jail per run (tests/bench/floor.c, no code of ours; {n} runs each, in 10 \
             interleaved turns; ms)"
        );
        println!("  {:<28} {:>8} {:>8} {:>10}", "", "p50", "p99", "p50-bare");
        let [b, p, j] = &trivial_floor;
        for (name, s) in
            [("bare (a small program's)", b), ("an init, a uid, a filter", p), ("a fresh jail (floor.c)", j)]
        {
            println!("  {:<28} {:>8.3} {:>8.3} {:>+10.3}", name, ms(s.p50), ms(s.p99), ms(s.p50) - ms(b.p50));
        }
        println!("  (a fresh jail: the same, and new PID, mount, IPC, UTS namespaces, a tmpfs and a proc mounted)");
        Some(trivial_floor)
    } else {
        None
    };
    let floor_note = floor_stats.as_ref().map_or(String::new(), |[b, _, j]| {
        format!("; the kernel's floor for a fresh jail {:+.3} ms", ms(j.p50) - ms(b.p50))
    });
    // Issue #26's targets, each beside its limits: bare fork/exec/wait, and
    // the kernel's own work for a fresh jail.
    rep.target(
        "sandbox p50 <= bare p50 + 0.30 ms",
        format!(
            "{:.3} ms vs {:.3} ms (bare {:.3} ms; over bare {:+.3} ms{floor_note})",
            ms(sandboxed.p50),
            ms(bare.p50) + 0.3,
            ms(bare.p50),
            ms(sandboxed.p50) - ms(bare.p50)
        ),
        sandboxed.p50 <= bare.p50 + Duration::from_micros(300),
    );
    rep.target(
        "sandbox p99 <= 2 ms",
        format!("{:.3} ms (bare {:.3} ms)", ms(sandboxed.p99), ms(bare.p99)),
        sandboxed.p99 <= Duration::from_millis(2),
    );
    cost_per_step(&dir, n.min(500))?;

    if std::env::var_os("OJ_BENCH_COST_ONLY").is_some() {
        ojrunner::sandbox::helper::shutdown();
        return Ok(());
    }

    // 2. Judged cases per second, beside what bare fork/exec/wait alone
    // would allow on as many cores (its p50 above, one run per core).
    println!();
    let cases = env_usize("OJ_BENCH_CASES", 1000);
    let cpu_before = host_cpu();
    let (rate, wrong) = judged_cases(work.path(), cases, &mut || {})?;
    let cpu_per_case = host_cpu().saturating_sub(cpu_before) / cases as u32;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ceiling = cores as f64 / bare.p50.as_secs_f64();
    // The A+B program itself (dynamically linked, as the language table
    // compiles it), fork/exec/wait with a case's input: the wire for a
    // judged case, where the trivial program above is the sandbox's.
    let ab_input = work.path().join("job/data/0000.in");
    let ab = bare_ab(&dir, &ab_input, 300)?;
    let ab_ceiling = cores as f64 / ab.as_secs_f64();
    // The A+B program in a loop per core in each of floor.c's modes.
    let floor_rates = match root {
        true => Some(floor.rates(&dir.join("ab"), &ab_input, cores, cases.min(2000))?),
        false => None,
    };
    println!(
        "one job of {cases} A+B cases through Judge::run_cases on {cores} slot(s) (diff checker, per-case results)"
    );
    println!(
        "  host CPU per case (all processes, the kernel's workers included): {:.3} ms; bare fork/exec/wait's ceiling \
         on {cores} cores: {ceiling:.0} cases/s",
        ms(cpu_per_case)
    );
    println!(
        "  bare fork/exec/wait of the A+B program itself (dynamic, a case's input): p50 {:.3} ms, a ceiling of \
         {ab_ceiling:.0} cases/s on {cores} cores",
        ms(ab)
    );
    let floor_note = match floor_rates {
        Some((bare_rate, plain_rate, jail_rate)) => {
            println!(
                "  the A+B program in a loop per core (floor.c): bare {bare_rate:.0} runs/s; with an init, a uid and a \
                 filter {plain_rate:.0}; each run in a fresh jail (the kernel's floor) {jail_rate:.0}"
            );
            format!("; the kernel's floor for a fresh jail {jail_rate:.0}")
        }
        None => String::new(),
    };
    rep.target(
        &format!("judged cases/s >= 1500 on {cores} cores"),
        format!(
            "{rate:.0} cases/s ({:.2} of bare's {ceiling:.0}{floor_note}){}",
            rate / ceiling,
            if wrong > 0 { format!(" ({wrong} not AC!)") } else { String::new() }
        ),
        rate >= 1500.0 && wrong == 0,
    );
    if std::env::var_os("OJ_BENCH_CASES_ONLY").is_some() {
        return finish(&rep);
    }

    // 3. The price of issue #3's letter: a network namespace of each run's
    // own (`--netns-per-run`, off by default) and a cgroup made and removed
    // for each run, where the sandbox gives each helper one of each (see
    // BENCHMARKS.md, jail.rs and cgroup.rs).
    if let (true, Some(h)) = (mech.namespaces, mech.cgroup.as_ref()) {
        println!();
        println!("what a network namespace and a cgroup of each run's own add (see BENCHMARKS.md)");
        let mut made = 0u64;
        let mut group = || {
            made += 1;
            let name = format!("helper-{}-price-{made}", std::process::id());
            h.create(&name, 64 << 20, Some(16)).and_then(|g| g.remove()).map_err(|e| format!("a cgroup: {e}"))
        };
        let err = std::cell::RefCell::new(None);
        let note = |r: Result<(), String>| {
            if let Err(e) = r {
                err.borrow_mut().get_or_insert(e);
            }
        };
        let trivial = || sandboxed_run(&dir, "./trivial", &[], limits(Duration::from_secs(1), 64 << 20)).map(|_| ());
        let stats = {
            let mut plain = || note(trivial());
            let mut fresh = || {
                sandbox::set_netns_per_run(true);
                note(trivial());
                sandbox::set_netns_per_run(false);
            };
            let mut making = || note(group());
            sample_in_turns(10, &mut [(300, &mut plain), (300, &mut fresh), (300, &mut making)])
        };
        if let Some(e) = err.into_inner() {
            return Err(e);
        }
        println!("  {:<44} {:>8} {:>8}", "wall time, ms", "p50", "p99");
        for (name, s) in [
            ("ojrunner sandbox::run", stats[0]),
            ("  with --netns-per-run", stats[1]),
            ("making and removing a cgroup", stats[2]),
        ] {
            println!("  {:<44} {:>8.3} {:>8.3}", name, ms(s.p50), ms(s.p99));
        }
        // The same job with a namespace per run, then with each case also
        // making and removing a cgroup beside it, on the same cores.
        sandbox::set_netns_per_run(true);
        let fresh = judged_cases(work.path(), cases, &mut || {});
        let mut failed = None;
        let both = judged_cases(work.path(), cases, &mut || {
            if let Err(e) = group() {
                failed.get_or_insert(e);
            }
        });
        sandbox::set_netns_per_run(false);
        let ((fresh, fresh_wrong), (both, both_wrong)) = (fresh?, both?);
        if let Some(e) = failed {
            return Err(e);
        }
        let wrong = |n: usize| if n > 0 { format!(", {n} not AC!") } else { String::new() };
        println!(
            "  judged cases/s with --netns-per-run: {fresh:.0} ({:.2} of the {rate:.0} above{})",
            fresh / rate,
            wrong(fresh_wrong)
        );
        println!("    and a cgroup made and removed per case: {both:.0} ({:.2}{})", both / rate, wrong(both_wrong));

        // What the kept jail saves: new namespaces made and torn down
        // around each run instead (`OJ_FRESH_JAIL=1`, new helpers).
        let fresh_jail = |on: bool| {
            ojrunner::sandbox::helper::shutdown();
            match on {
                true => std::env::set_var("OJ_FRESH_JAIL", "1"),
                false => std::env::remove_var("OJ_FRESH_JAIL"),
            }
        };
        fresh_jail(true);
        let single = (|| {
            for _ in 0..20 {
                trivial()?;
            }
            let mut t = Vec::with_capacity(300);
            for _ in 0..300 {
                let start = Instant::now();
                trivial()?;
                t.push(start.elapsed());
            }
            Ok::<_, String>(testkit::stats(t))
        })();
        let cases_fresh = judged_cases(work.path(), cases, &mut || {});
        fresh_jail(false);
        let (single, (fresh_rate, fresh_wrong)) = (single?, cases_fresh?);
        println!(
            "  a fresh jail per run (OJ_FRESH_JAIL=1): sandbox::run p50 {:.3} ms (+{:.3} over bare); judged cases/s \
             {fresh_rate:.0} ({:.2} of the kept jail's {rate:.0}{})",
            ms(single.p50),
            ms(single.p50) - ms(bare.p50),
            fresh_rate / rate,
            wrong(fresh_wrong)
        );
    }

    // 4. Accuracy, with a judge of 200 MiB (touched): its size must not show.
    println!();
    println!("accuracy (the bench holds 200 MiB of its own, touched)");
    let ballast = std::hint::black_box(vec![1u8; 200 << 20]);
    for mib in [1u64, 16, 64, 256] {
        let u = sandboxed_run(&dir, "./touch", &[mib.to_string()], limits(Duration::from_secs(5), 512 << 20))?;
        let got = u.memory as f64 / (1 << 20) as f64;
        rep.target(
            &format!("touching {mib} MiB reports {mib} MiB +- 1 MiB"),
            format!("{got:.2} MiB ({:?})", u.exit),
            u.exit == sandbox::Exit::Code(0) && (got - mib as f64).abs() <= 1.0,
        );
    }
    let mut worst: f64 = 0.0;
    let mut spins = Vec::new();
    for _ in 0..3 {
        let u = sandboxed_run(&dir, "./spin", &["500".into()], limits(Duration::from_secs(5), 64 << 20))?;
        worst = worst.max((ms(u.cpu) - 500.0).abs() / 500.0);
        spins.push(format!("{:.1}", ms(u.cpu)));
    }
    rep.target(
        "a 0.5 s spin reports 0.5 s +- 2 %",
        format!("{} ms (worst {:.2} %)", spins.join(", "), worst * 100.0),
        worst <= 0.02,
    );
    let mut l = limits(Duration::from_secs(1), 64 << 20);
    l.wall = Duration::from_secs(5);
    let u = sandboxed_run(&dir, "./busy", &[], l)?;
    rep.target(
        "a busy loop under 1 s is killed by 1.020 s CPU",
        format!("{:.1} ms CPU, fired {:?}", ms(u.cpu), u.fired),
        u.fired == Some(Fired::Cpu) && u.cpu <= Duration::from_millis(1020),
    );
    let mut l = limits(Duration::from_secs(1), 64 << 20);
    l.wall = Duration::from_secs(1);
    let t = Instant::now();
    let u = sandboxed_run(&dir, "./sleeper", &[], l)?;
    let outer = t.elapsed();
    rep.target(
        "a sleeper is killed within 50 ms of its 1 s wall limit",
        format!("{:.1} ms wall ({:.1} ms to the caller), fired {:?}", ms(u.wall), ms(outer), u.fired),
        u.fired == Some(Fired::Wall) && u.wall <= Duration::from_millis(1050),
    );
    drop(ballast);
    pinning(&dir)?;
    early::bench(work.path(), &mut rep)?;
    finish(&rep)
}

/// The bench's last line (how many targets it missed); its helpers closed.
fn finish(rep: &Report) -> Result<(), String> {
    println!("\n{} target(s) missed", rep.misses);
    ojrunner::sandbox::helper::shutdown();
    Ok(())
}

/// The same trivial run, timed step by step (`sandbox::set_timed`): p50 and
/// p99 of each step, so that a slower host shows where its time goes.
fn cost_per_step(dir: &Path, n: usize) -> Result<(), String> {
    let mut per: Vec<Vec<Duration>> = (0..MARKS).map(|_| Vec::with_capacity(n)).collect();
    let mut whole = Vec::with_capacity(n);
    sandbox::set_timed(true);
    let timed = (0..n).try_for_each(|_| {
        let u = sandboxed_run(dir, "./trivial", &[], limits(Duration::from_secs(1), 64 << 20))?;
        let t = u.steps.ok_or("a timed run came back without its steps")?;
        for (m, d) in t.steps() {
            per[m as usize].push(d);
        }
        let (called, returned) = (t.at[Mark::Called as usize], t.at[Mark::Returned as usize]);
        whole.push(Duration::from_nanos(returned.saturating_sub(called)));
        Ok::<_, String>(())
    });
    sandbox::set_timed(false);
    timed?;
    println!();
    println!("the cost of each step of one sandboxed run ({n} timed runs; µs; teardown is after the reply)");
    println!("  {:<44} {:>8} {:>8}", "step", "p50", "p99");
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut sum = Duration::ZERO;
    for m in Mark::ALL {
        let (Some(name), times) = (m.step(), &per[m as usize]) else { continue };
        if times.is_empty() {
            continue;
        }
        let s = stats(times.clone());
        if !name.starts_with("teardown") {
            sum += s.p50;
        }
        println!("  {name:<44} {:>8.0} {:>8.0}", us(s.p50), us(s.p99));
    }
    let w = stats(whole);
    println!("  {:<44} {:>8.0} {:>8.0}", "the run, called to returned", us(w.p50), us(w.p99));
    println!("  {:<44} {:>8.0}", "  (the sum of its steps' p50)", us(sum));
    Ok(())
}

/*** The runs ***/

/// Part 5, pinning (`sandbox::cores`): the CPU time of a fixed piece of
/// work (about 0.5 s), 50 runs with each slot on its core and 50 without,
/// in alternating blocks of 10, while the next slot is busy all along with
/// two processes sweeping memory (as a compile, or a multithreaded
/// program: more tasks than its one core); the spread, (max - min) /
/// median, of each. Reports; no target.
fn pinning(dir: &Path) -> Result<(), String> {
    let run = |slot: usize, program: &str, args: &[String], cpu: Duration| {
        sandboxed_run_in(slot, dir, program, args, limits(cpu, 64 << 20))
    };
    let probe = run(SLOT, "./work", &["200".into()], Duration::from_secs(10))?;
    let rounds = (200.0 * 500.0 / ms(probe.cpu).max(1.0)).round() as u64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let neighbour = {
        let (stop, dir) = (stop.clone(), dir.to_path_buf());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = sandboxed_run_in(SLOT + 1, &dir, "./sweep", &[], limits(Duration::from_millis(600), 128 << 20));
            }
        })
    };
    let (mut pinned, mut loose) = (Vec::new(), Vec::new());
    for block in 0..10 {
        let on = block % 2 == 1;
        sandbox::cores::set_pinned(on);
        for _ in 0..10 {
            let u = run(SLOT, "./work", &[rounds.to_string()], Duration::from_secs(10))?;
            if on { &mut pinned } else { &mut loose }.push(ms(u.cpu));
        }
    }
    sandbox::cores::set_pinned(true);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = neighbour.join();
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        (v[0], median, v[v.len() - 1], (v[v.len() - 1] - v[0]) / median)
    };
    let (lo, med, hi, sp) = spread(&mut loose);
    let (plo, pmed, phi, psp) = spread(&mut pinned);
    println!();
    println!(
        "pinning: the CPU time of a fixed piece of work ({rounds} rounds), 50 runs each, the next slot sweeping memory in two processes all along"
    );
    println!("  {:<24} {:>9} {:>9} {:>9} {:>9}", "", "min ms", "median", "max", "spread");
    println!("  {:<24} {lo:>9.1} {med:>9.1} {hi:>9.1} {:>8.1}%", "not pinned", sp * 100.0);
    println!("  {:<24} {plo:>9.1} {pmed:>9.1} {phi:>9.1} {:>8.1}%", "each slot on its core", psp * 100.0);
    println!("  pinned spread / not pinned: {:.2}", psp / sp);
    Ok(())
}

fn limits(cpu: Duration, memory: u64) -> Limits {
    Limits {
        cpu,
        wall: 3 * cpu + Duration::from_secs(1),
        memory,
        address_space: Some(memory + (1 << 30)),
        stack: Some(memory),
        output: 64 << 20,
        processes: Some(16),
    }
}

fn sandboxed_run(dir: &Path, program: &str, args: &[String], limits: Limits) -> Result<Usage, String> {
    sandboxed_run_in(SLOT, dir, program, args, limits)
}

fn sandboxed_run_in(slot: usize, dir: &Path, program: &str, args: &[String], limits: Limits) -> Result<Usage, String> {
    let null = |w: bool| File::options().read(!w).write(w).open("/dev/null").map_err(|e| e.to_string());
    let mut argv = vec![program.to_string()];
    argv.extend(args.iter().cloned());
    sandbox::run(Spec {
        argv,
        cwd: dir.to_path_buf(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        stdin: null(false)?,
        stdout: null(true)?,
        stderr: null(true)?,
        identity: Slot::for_index(slot).identity(),
        limits,
        // At a neutral name, as the judge binds a submission's directory.
        binds: vec![Bind { path: dir.to_path_buf(), writable: false, at: Some("/bench".into()) }],
    })
    .map_err(|e| e.to_string())
}

/// The p50 of `n` bare fork/exec/waits of the A+B program compiled as the
/// language table compiles C (dynamically linked), its stdin a case's
/// input, its stdout `/dev/null`.
fn bare_ab(dir: &Path, input: &Path, n: usize) -> Result<Duration, String> {
    let src = dir.join("ab.c");
    std::fs::write(&src, APLUSB).map_err(|e| e.to_string())?;
    let ab = dir.join("ab");
    let out = Command::new("gcc")
        .args(["-DONLINE_JUDGE", "-O2", "-w", "-std=c11"])
        .arg(&src)
        .args(["-lm", "-o"])
        .arg(&ab)
        .output()
        .map_err(|e| format!("gcc: {e}"))?;
    if !out.status.success() {
        return Err(format!("gcc ab.c: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let path = CString::new(ab.to_str().unwrap()).unwrap();
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    let null = File::options().write(true).open("/dev/null").map_err(|e| e.to_string())?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let stdin = File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
        use std::os::fd::AsRawFd;
        let (i, o) = (stdin.as_raw_fd(), null.as_raw_fd());
        let t = Instant::now();
        // SAFETY: the child only calls dup2, execve and _exit (async-signal-safe) on descriptors and arrays made
        // before the fork; waitpid writes only `status`.
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                libc::dup2(i, 0);
                libc::dup2(o, 1);
                libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                libc::_exit(127);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        times.push(t.elapsed());
    }
    Ok(stats(times).p50)
}

/// fork, execve, wait4: nothing else.
fn bare_run(program: &Path) {
    let path = CString::new(program.to_str().unwrap()).unwrap();
    let argv = [path.as_ptr(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    // SAFETY: the child only calls execve and _exit (async-signal-safe) on arrays made before the fork; waitpid
    // writes only `status`.
    unsafe {
        let pid = libc::fork();
        if pid == 0 {
            libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
}

fn ensure_bwrap() -> Result<PathBuf, String> {
    let found =
        || ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"].iter().map(PathBuf::from).find(|p| p.exists());
    if let Some(p) = found() {
        return Ok(p);
    }
    if !is_root() {
        return Err("not installed, and installing needs root".into());
    }
    println!("  (installing bubblewrap with apt-get)");
    let ok = Command::new("apt-get")
        .args(["install", "-y", "-q", "bubblewrap"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        let _ = Command::new("apt-get").args(["update", "-q"]).stdout(Stdio::null()).status();
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-q", "bubblewrap"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
    }
    found().ok_or_else(|| "apt-get install bubblewrap failed".into())
}

/// bwrap with its own namespaces (all but the user namespace, as root),
/// a read-only root of /usr and the program's directory, a private /tmp,
/// /dev and /proc: about what a sandboxed run gets.
fn bwrap_run(bwrap: &Path, dir: &Path, program: &Path) -> bool {
    let d = dir.to_str().unwrap();
    Command::new(bwrap)
        .args(["--unshare-all", "--die-with-parent", "--new-session"])
        .args(["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"])
        .args([
            "--symlink",
            "usr/bin",
            "/bin",
            "--tmpfs",
            "/tmp",
            "--ro-bind",
            d,
            d,
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ])
        .args(["--chdir", d, "--clearenv"])
        .arg(program)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `cases` A+B cases judged one after another, as a worker judges a job:
/// a scratch directory per case, the checker, the per-case result kept.
fn judged_cases(base: &Path, cases: usize, each: &mut dyn FnMut()) -> Result<(f64, usize), String> {
    let langs = Languages::builtin();
    let lang = langs.by_name("c11").ok_or("no c11")?;
    let job = base.join("job");
    let data = job.join("data");
    for d in [&job, &data] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        set_mode(d, 0o755);
    }
    let src = early::compile(&job, "src", APLUSB)?.src;
    let judge = Judge::default();
    let slot = Slot::for_index(SLOT);
    for i in 0..cases {
        let (a, b) = (i as i64 * 7919 - 1_000_000, 31337 - i as i64);
        std::fs::write(data.join(format!("{i:04}.in")), format!("{a} {b}\n")).map_err(|e| e.to_string())?;
        std::fs::write(data.join(format!("{i:04}.out")), format!("{}\n", a + b)).map_err(|e| e.to_string())?;
    }
    let task = Task { task_score: 100, memory_limit: 65536, time_limit: 1000, case_count: cases as i64 };
    // As judge-exec judges a lone job: on its own slot and the idle ones,
    // one slot per core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = SlotPool::new(SLOT + 1..SLOT + cores);
    let case = |i: usize| Case {
        task: 0,
        case: i,
        input: data.join(format!("{i:04}.in")),
        answer: data.join(format!("{i:04}.out")),
    };
    let scratch = job.join("cases");
    // A warm-up (the helpers start), not counted.
    let warm: Vec<Case> = (0..cores).map(case).collect();
    let sub = Submission { lang, src: &src, tasks: std::slice::from_ref(&task), checker: &Checker::Diff };
    let slots = Slots { own: slot, pool: Some(&pool), scratch: &scratch };
    judge.run_cases(&sub, &warm, &slots, |_, _| true);
    let all: Vec<Case> = (0..cases).map(case).collect();
    let start = Instant::now();
    let mut results = Vec::with_capacity(cases);
    judge.run_cases(&sub, &all, &slots, |_, r| {
        results.push(r.result);
        each();
        true
    });
    let rate = cases as f64 / start.elapsed().as_secs_f64();
    let wrong = results.iter().filter(|r| r.status != Verdict::AC).count();
    if let Some(r) = results.iter().find(|r| r.status != Verdict::AC) {
        println!("  a case was {:?}: {}", r.status, r.stderr.trim());
    }
    Ok((rate, wrong))
}

/// `floor.c`, compiled, with the directory it mounts on and the uid its
/// jailed runs take.
struct Floor {
    binary: PathBuf,
    dir: PathBuf,
    uid: u32,
}

impl Floor {
    /// `program` run `n` times in each of `floor.c`'s modes (bare, plain,
    /// jail), in `turns` turns: the wall time of each run, as it timed it.
    fn runs_in_turns(
        &self,
        program: &Path,
        input: Option<&Path>,
        n: usize,
        turns: usize,
    ) -> Result<[Stats; 3], String> {
        let mut times = [Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n)];
        for turn in 0..turns {
            let block = n / turns + usize::from(turn < n % turns);
            for (i, mode) in ["bare", "plain", "jail"].into_iter().enumerate() {
                let out = self.command(program, input, mode, block).output().map_err(|e| format!("floor: {e}"))?;
                if !out.status.success() {
                    return Err(format!("floor {mode}: {}", String::from_utf8_lossy(&out.stderr).trim()));
                }
                let text = String::from_utf8_lossy(&out.stdout);
                times[i].extend(text.lines().filter_map(|l| l.parse().ok()).map(Duration::from_micros));
            }
        }
        Ok(times.map(stats))
    }

    /// Runs of `program` per second with `loops` loops of `n` at once
    /// (one per core), in each of `floor.c`'s modes (bare, plain, jail).
    fn rates(&self, program: &Path, input: &Path, loops: usize, n: usize) -> Result<(f64, f64, f64), String> {
        let rate = |mode: &str| {
            let t = Instant::now();
            let children: Vec<_> = (0..loops)
                .map(|_| self.command(program, Some(input), mode, n).stdout(Stdio::null()).spawn())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("floor: {e}"))?;
            for c in children {
                let out = c.wait_with_output().map_err(|e| format!("floor: {e}"))?;
                if !out.status.success() {
                    return Err(format!("floor {mode}: {}", String::from_utf8_lossy(&out.stderr).trim()));
                }
            }
            Ok::<_, String>((loops * n) as f64 / t.elapsed().as_secs_f64())
        };
        Ok((rate("bare")?, rate("plain")?, rate("jail")?))
    }

    fn command(&self, program: &Path, input: Option<&Path>, mode: &str, n: usize) -> Command {
        let mut c = Command::new(&self.binary);
        c.arg(program).arg(input.unwrap_or(Path::new("-"))).arg(self.uid.to_string()).arg(&self.dir);
        c.args([mode, &n.to_string()]).stdin(Stdio::null()).stderr(Stdio::piped());
        c
    }
}

/*** Helpers ***/

/// The CPU time the whole host has spent so far, every CPU, idle and I/O
/// wait aside (`/proc/stat`'s first line).
fn host_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: u64 = stat
        .lines()
        .next()
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .enumerate()
                .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
                .filter_map(|(_, v)| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    // SAFETY: sysconf takes no pointer.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / hz)
}

/// Times each `(n, f)` `n` times, in `turns` turns (a block of each per
/// turn): a machine that slows down or speeds up during the bench weighs on
/// every contender alike, so the ratios compare like with like.
fn sample_in_turns(turns: usize, fs: &mut [(usize, &mut dyn FnMut())]) -> Vec<Stats> {
    let mut times: Vec<Vec<Duration>> = fs.iter().map(|(n, _)| Vec::with_capacity(*n)).collect();
    for turn in 0..turns {
        for (i, (n, f)) in fs.iter_mut().enumerate() {
            // This turn's share of n (the first turns take the remainder).
            let block = *n / turns + usize::from(turn < *n % turns);
            for _ in 0..block {
                let t = Instant::now();
                f();
                times[i].push(t.elapsed());
            }
        }
    }
    times.into_iter().map(stats).collect()
}

fn compile_static(dir: &Path, name: &str, src: &str) -> Result<(), String> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).map_err(|e| e.to_string())?;
    let out = Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(dir.join(name))
        .arg(&c)
        .output()
        .map_err(|e| format!("gcc: {e}"))?;
    if !out.status.success() {
        return Err(format!("gcc -static {name}.c: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode));
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
