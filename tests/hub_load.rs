//! hubd under load and under attack (issue 16): a thousand waiting long
//! polls, stalled, oversized and malformed requests, cancels racing
//! hand-outs. A real hubd on loopback each time; waits are on conditions
//! with generous deadlines (liveness), and the latencies seen are printed.

#![deny(clippy::undocumented_unsafe_blocks)]

use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::*;

const LIMIT: Duration = Duration::from_secs(60);

use testkit::http_exchange as call;

/// A result of one AC case, for the one-case problem 1.
fn one_ac() -> String {
    let case = json!({"status": "AC", "execTime": 1, "memoryUsage": 1, "exitCode": 0, "stdout": "", "stderr": ""});
    json!({"tasks": [[case]]}).to_string()
}

/// A hub with a one-task, one-case problem 1 and a source to submit.
fn hub(tag: &str, flags: &[&str]) -> (TempDir, Hub, std::path::PathBuf) {
    let dir = TempDir::new(tag);
    let hub = Hub::start(dir.path(), flags);
    let p = one_case_problem(dir.path(), "problem", 1000, "1\n", "1\n");
    hub.add_problem(1, &p);
    let src = dir.path().join("main.py");
    std::fs::write(&src, "print(input())\n").unwrap();
    (dir, hub, src)
}

fn wait_polls_waiting(hub: &Hub, n: f64) {
    wait_for(&format!("{n} polls waiting at the hub"), LIMIT, || (hub.metric("hubd_polls_waiting") == n).then_some(()));
}

/// Runs `f` on `n` threads at once, each over its share of `items`.
fn on_threads<T: Sync, R: Send>(n: usize, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let chunks: Vec<_> = items
            .chunks(items.len().div_ceil(n).max(1))
            .map(|chunk| s.spawn(|| chunk.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        chunks.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_thousand_waiting_polls_leave_heartbeats_prompt_and_every_lease_kept() {
    const RUNNERS: usize = 1000;
    const HOLDERS: usize = 20;
    let (_dir, hub, src) = hub("hubload-thousand", &["--lease-ttl", "6"]);
    let indices: Vec<usize> = (0..RUNNERS).collect();
    let runners = on_threads(16, &indices, |_| HandRunner::register(&hub.url, "load"));

    // The first HOLDERS runners each hold a job.
    for _ in 0..HOLDERS {
        hub.submit(1, "python3", &src);
    }
    let held: Vec<String> = runners[..HOLDERS]
        .iter()
        .map(|r| r.next_job(0).1.expect("a job for each holder")["job_id"].as_str().unwrap().to_string())
        .collect();

    // Every runner long-polls, each on a thread of its own, again and again.
    let stop = Arc::new(AtomicBool::new(false));
    let handed: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let pollers: Vec<_> = runners
        .iter()
        .cloned()
        .map(|r| {
            let (stop, handed) = (stop.clone(), handed.clone());
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        match r.next_job(30) {
                            (200, Some(job)) => {
                                handed.lock().unwrap().push((job["job_id"].as_str().unwrap().into(), Instant::now()))
                            }
                            (204, _) => {}
                            (code, _) => panic!("next-job answered {code}"),
                        }
                    }
                })
                .unwrap()
        })
        .collect();
    wait_polls_waiting(&hub, RUNNERS as f64);
    // A waiting poll holds no thread.
    let proc_status = std::fs::read_to_string(format!("/proc/{}/status", hub.proc.pid())).unwrap();
    let field = |name: &str| {
        proc_status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_string()).unwrap_or_default()
    };
    let threads: usize = field("Threads:").parse().unwrap();
    eprintln!("hubd with {RUNNERS} polls waiting: {threads} threads, {} resident", field("VmRSS:"));
    assert!(threads < 64, "hubd runs {threads} threads with {RUNNERS} polls waiting");

    // The holders beat on a thread of their own, from now to the end: a
    // round of a thousand beats on a busy machine may take longer than a
    // lease, and a lease lapsed would be reclaimed by a waiting poll.
    let holders = {
        let (stop, pairs) = (stop.clone(), runners[..HOLDERS].iter().cloned().zip(held.clone()).collect::<Vec<_>>());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for (r, jb) in &pairs {
                    assert_eq!(r.heartbeat(&[jb.as_str()]), 204);
                }
                std::thread::sleep(Duration::from_millis(500)); // the pace of the beats, well inside the lease
            }
        })
    };
    // Two lease times of heartbeats from every runner, the holders listing
    // their job: each answered 204, promptly, and no lease lapses.
    let beat_until = Instant::now() + Duration::from_secs(12);
    let share = RUNNERS / 16;
    let beats: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = runners
            .chunks(share)
            .enumerate()
            .map(|(k, slice)| {
                let held = &held;
                s.spawn(move || {
                    // Each thread walks its runners in turn.
                    let mut seen = Vec::new();
                    while Instant::now() < beat_until {
                        for (j, r) in slice.iter().enumerate() {
                            let jobs: Vec<&str> = held.get(k * share + j).map(|j| vec![j.as_str()]).unwrap_or_default();
                            let started = Instant::now();
                            assert_eq!(r.heartbeat(&jobs), 204);
                            seen.push(started.elapsed());
                        }
                    }
                    seen
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let n = beats.len();
    let Stats { p50, p99, max, .. } = stats(beats);
    eprintln!("{n} heartbeats with {RUNNERS} polls waiting: p50 {p50:?}, p99 {p99:?}, max {max:?}");
    assert!(n >= 2 * RUNNERS, "every runner beat at least twice ({n} beats)");
    assert!(max < Duration::from_secs(5), "a heartbeat took {max:?} with {RUNNERS} polls waiting");
    let status = hub.status();
    for (i, jb) in held.iter().enumerate() {
        let s = status.iter().find(|s| s["job_id"] == jb.as_str()).unwrap();
        assert_eq!(
            (s["leased_by"].as_str(), s["attempts"].as_i64()),
            (Some(runners[i].id.as_str()), Some(1)),
            "the lease of {jb} was kept"
        );
    }
    assert_eq!(hub.metric("hubd_leases_lapsed_total"), 0.0);
    assert!(handed.lock().unwrap().is_empty(), "no job was handed out meanwhile");

    // A new submission goes to one waiting poll, promptly.
    wait_polls_waiting(&hub, RUNNERS as f64);
    let sub = hub.submit(1, "python3", &src);
    let submitted = Instant::now();
    let (job, at) = wait_for("the new job handed to a waiting poll", LIMIT, || handed.lock().unwrap().first().cloned());
    eprintln!(
        "hand-out to one of {RUNNERS} waiting polls: {:?} after submit returned",
        at.saturating_duration_since(submitted)
    );
    assert!(at.saturating_duration_since(submitted) < Duration::from_secs(5));
    let s = hub.submission(&sub);
    assert_eq!((s["job_id"].as_str(), s["attempts"].as_i64()), (Some(job.as_str()), Some(1)));

    stop.store(true, Ordering::SeqCst);
    holders.join().unwrap();
    hub.proc.signal(nix::sys::signal::Signal::SIGTERM);
    for p in pollers {
        p.join().unwrap();
    }
    assert_eq!(handed.lock().unwrap().len(), 1, "one job, one hand-out");
}

/// Writes `head` (and `body`) on a fresh connection and leaves it open.
fn raw(addr: &str, head: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    s
}

/// The status of the answer on `s` (0: closed without one); panics if
/// the hub neither answers nor closes within [`LIMIT`].
fn status_of(mut s: TcpStream) -> u16 {
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("the hub neither answered nor closed the connection within {LIMIT:?}")
            }
            Err(_) => break, // reset
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

#[test]
fn stalled_oversized_and_malformed_requests_cost_the_hub_nothing() {
    let (_dir, hub, src) = hub("hubload-hostile", &[]);
    let a = HandRunner::register(&hub.url, "load");
    hub.submit(1, "python3", &src);
    let (_, job) = a.next_job(0);
    let jb = job.expect("a job")["job_id"].as_str().unwrap().to_string();

    // A beats every 300 ms through everything below (its lease is 3 s).
    let stop = Arc::new(AtomicBool::new(false));
    let beater = {
        let (a, jb, stop) = (a.clone(), jb.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut worst = Duration::ZERO;
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                assert_eq!(a.heartbeat(&[&jb]), 204);
                worst = worst.max(started.elapsed());
                std::thread::sleep(Duration::from_millis(300));
            }
            worst
        })
    };
    let addr = hub.listen.clone();
    let host = format!("Host: {addr}\r\n");

    // Stalled: headers never finished, and register bodies half sent.
    let stalled_heads: Vec<TcpStream> =
        (0..40).map(|_| raw(&addr, &format!("POST /runners/register HTTP/1.1\r\n{host}Content-Le"), b"")).collect();
    let half = format!("POST /runners/register HTTP/1.1\r\n{host}Content-Length: 1000\r\n\r\n");
    let stalled_bodies: Vec<TcpStream> = (0..40).map(|_| raw(&addr, &half, &[b'{'; 500])).collect();

    // Oversized: register bodies over the cap, declared or streamed.
    let declared = format!("POST /runners/register HTTP/1.1\r\n{host}Content-Length: 1073741824\r\n\r\n");
    let streamed = format!("POST /runners/register HTTP/1.1\r\n{host}Transfer-Encoding: chunked\r\n\r\n");
    let chunk = format!("{:x}\r\n{}\r\n", 16 << 10, "x".repeat(16 << 10));
    let oversized: Vec<std::thread::JoinHandle<u16>> = (0..16)
        .map(|i| {
            let (addr, declared, streamed, chunk) = (addr.clone(), declared.clone(), streamed.clone(), chunk.clone());
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    status_of(raw(&addr, &declared, b""))
                } else {
                    let mut s = raw(&addr, &streamed, b"");
                    for _ in 0..8 {
                        if s.write_all(chunk.as_bytes()).is_err() {
                            break;
                        }
                    }
                    status_of(s)
                }
            })
        })
        .collect();
    // A complete with a huge body and no token: refused before the body.
    let huge = format!("PUT /runners/{}/jobs/{jb}/complete HTTP/1.1\r\n{host}Content-Length: 268435456\r\n\r\n", a.id);
    assert_eq!(status_of(raw(&addr, &huge, b"")), 401, "authenticated before its body is read");

    // Malformed: bad JSON, and waits that are not seconds, many at once.
    let waits = ["NaN", "inf", "-1", "garbage", "-inf", "1e400", "%00"];
    let malformed: Vec<std::thread::JoinHandle<u16>> = (0..70)
        .map(|i| {
            let a = a.clone();
            let wait = waits[i % waits.len()];
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    call("GET", &a.at(&format!("next-job?wait={wait}")), Some(&a.token), None).0
                } else {
                    call("POST", &format!("{}/runners/register", a.url), None, Some("{\"registration_token\": ")).0
                }
            })
        })
        .collect();
    for (i, m) in malformed.into_iter().enumerate() {
        assert_eq!(m.join().unwrap(), 400, "malformed request {i}");
    }
    for (i, o) in oversized.into_iter().enumerate() {
        assert_eq!(o.join().unwrap(), 413, "oversized request {i}");
    }
    // The hub keeps serving meanwhile: a new runner registers and asks.
    let b = HandRunner::register(&hub.url, "load");
    assert_eq!(b.next_job(0).0, 204, "A's lease is live");

    // The stalled clients are dropped by the hub, not waited for forever.
    let started = Instant::now();
    for s in stalled_heads.into_iter().chain(stalled_bodies) {
        let code = status_of(s);
        assert!(code == 0 || code == 408, "a stalled request answered {code}");
    }
    eprintln!("stalled clients dropped within {:?}", started.elapsed());

    stop.store(true, Ordering::SeqCst);
    let worst = beater.join().unwrap();
    eprintln!("A's slowest heartbeat through the attack: {worst:?}");
    assert!(worst < Duration::from_secs(2), "a heartbeat took {worst:?}");
    let s = hub.status().into_iter().next().unwrap();
    assert_eq!((s["leased_by"].as_str(), s["attempts"].as_i64()), (Some(a.id.as_str()), Some(1)), "A kept its lease");
    assert_eq!(a.complete(&jb, &one_ac()), 204, "the hub still lands results");
    assert_eq!(hub.metric("hubd_handler_panics_total"), 0.0);
}

#[test]
fn a_cancel_ends_a_waiting_poll_at_once_and_a_racing_hand_out_loses_nothing() {
    let (_dir, hub, src) = hub("hubload-cancel", &[]);
    let a = HandRunner::register(&hub.url, "load");
    let stranger = HandRunner { token: "rk_nope".into(), ..a.clone() };
    assert_eq!(stranger.cancel_poll(), 401);

    // A waiting poll answers 204 as soon as it is cancelled.
    let poll = {
        let a = a.clone();
        std::thread::spawn(move || {
            let code = a.next_job(20).0;
            (code, Instant::now())
        })
    };
    wait_polls_waiting(&hub, 1.0);
    let sent = Instant::now();
    assert_eq!(a.cancel_poll(), 204);
    let (code, answered) = poll.join().unwrap();
    let took = answered.saturating_duration_since(sent);
    eprintln!("a cancelled poll answered {took:?} after the DELETE was sent");
    assert_eq!(code, 204);
    assert!(took < Duration::from_secs(2), "the cancelled poll took {took:?}");
    assert_eq!(hub.metric("hubd_polls_waiting"), 0.0);

    // A cancel with no poll waiting holds for the next poll, which claims nothing.
    assert_eq!(a.cancel_poll(), 204);
    let sub = hub.submit(1, "python3", &src);
    let started = Instant::now();
    assert_eq!(a.next_job(20).0, 204);
    assert!(started.elapsed() < Duration::from_secs(2), "the remembered cancel answered at once");
    let s = hub.submission(&sub);
    assert_eq!((s["state"].as_str(), s["attempts"].as_i64()), (Some("pending"), Some(0)));
    let jb = a.next_job(0).1.expect("the job, once the cancel is spent")["job_id"].as_str().unwrap().to_string();
    assert_eq!(a.complete(&jb, &one_ac()), 204);

    // A cancel racing a hand-out: the job is in a 200 answer, or pending
    // with no attempt spent; never lost.
    let (mut delivered, mut kept) = (0, 0);
    for i in 0..40 {
        let poll = {
            let a = a.clone();
            std::thread::spawn(move || a.next_job(20))
        };
        wait_polls_waiting(&hub, 1.0);
        let (sub, cancel) = std::thread::scope(|s| {
            let submit = s.spawn(|| hub.submit(1, "python3", &src));
            let cancel = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(i % 8 * 4));
                a.cancel_poll()
            });
            (submit.join().unwrap(), cancel.join().unwrap())
        });
        assert_eq!(cancel, 204);
        let (code, job) = poll.join().unwrap();
        let s = hub.submission(&sub);
        let jb = match code {
            200 => {
                delivered += 1;
                let job = job.unwrap();
                assert_eq!(job["submission_id"], sub.as_str());
                assert_eq!((s["state"].as_str(), s["attempts"].as_i64()), (Some("leased"), Some(1)), "{s}");
                job["job_id"].as_str().unwrap().to_string()
            }
            204 => {
                kept += 1;
                assert_eq!(
                    (s["state"].as_str(), s["attempts"].as_i64(), s["handouts"].as_i64()),
                    (Some("pending"), Some(0), Some(0)),
                    "a poll answered 204 handed out no job: {s}"
                );
                wait_for("the kept job", LIMIT, || a.next_job(0).1)["job_id"].as_str().unwrap().to_string()
            }
            other => panic!("the poll answered {other}"),
        };
        assert_eq!(a.complete(&jb, &one_ac()), 204);
        // A cancel that came after the hand-out is remembered: spend it.
        let _ = a.next_job(0);
    }
    eprintln!("cancel against hand-out, 40 races: {delivered} delivered in the poll, {kept} kept pending");
    for s in hub.status() {
        assert_eq!((s["verdict"].as_str(), s["attempts"].as_i64()), (Some("AC"), Some(1)), "{s}");
    }
}

#[test]
fn connections_over_the_per_address_bound_are_closed_and_the_rest_still_served() {
    let (_dir, hub, _src) = hub("hubload-conns", &["--max-connections-per-address", "4"]);
    // Four connections, each with a request answered: all kept open.
    let open: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(&hub.listen).unwrap();
            s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", hub.listen).as_bytes()).unwrap();
            s.set_read_timeout(Some(LIMIT)).unwrap();
            let mut buf = [0u8; 16];
            s.read_exact(&mut buf).unwrap();
            assert!(buf.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf));
            s
        })
        .collect();
    // A fifth from the same address is closed without an answer.
    let fifth = raw(&hub.listen, &format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", hub.listen), b"");
    assert_eq!(status_of(fifth), 0, "a fifth connection from one address is closed");
    // Once they close, the hub answers again, and counted the refusal.
    drop(open);
    let refused = wait_for("a place free again", LIMIT, || {
        ureq::get(&format!("{}/metrics", hub.url)).call().ok()?;
        Some(hub.metric("hubd_connections_refused_total"))
    });
    assert!(refused >= 1.0, "{refused} refusals counted");
}

/// A TCP connection to `to` from the loopback address `src`.
fn connect_from(src: std::net::Ipv4Addr, to: &str) -> TcpStream {
    use std::os::fd::FromRawFd;
    let to: std::net::SocketAddrV4 = to.parse().expect("an IPv4 hub");
    let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket, owned by the stream at once; the addresses live across the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let stream = TcpStream::from_raw_fd(fd);
        let from = sockaddr(src, 0);
        assert_eq!(libc::bind(fd, &from as *const _ as *const libc::sockaddr, len), 0, "bind {src}");
        let at = sockaddr(*to.ip(), to.port());
        assert_eq!(libc::connect(fd, &at as *const _ as *const libc::sockaddr, len), 0, "connect {to}");
        stream
    }
}

/// Connections from strangers, from however many addresses, leave the
/// last quarter of the hub's places to clients that showed a runner's token.
#[test]
fn strangers_cannot_take_the_places_kept_for_runners() {
    let (_dir, hub, _src) = hub("hubload-reserve", &["--max-connections", "8"]);
    let runner = HandRunner::register(&hub.url, "kept");
    assert_eq!(runner.heartbeat(&[]), 204, "the runner is known by its token");
    // The runner's calls each closed their connection: only this one is open.
    wait_for("the runner's connections to close", LIMIT, || (hub.metric("hubd_connections_open") == 1.0).then_some(()));
    let get = format!("GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", hub.listen);
    let mut strangers = Vec::new();
    let mut answered = 0;
    for i in 0..8u8 {
        let mut s = connect_from(std::net::Ipv4Addr::new(127, 0, 0, 10 + i), &hub.listen);
        s.write_all(get.as_bytes()).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut head = [0u8; 12];
        if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200") {
            answered += 1;
            strangers.push(s); // kept open, idle
        }
    }
    // Six, or five while the hub has yet to see the last metrics call's close.
    assert!((5..=6).contains(&answered), "strangers took {answered} of the eight places, not six at most");
    assert_eq!(runner.heartbeat(&[]), 204, "the runner still gets in");
    drop(strangers);
}

#[test]
fn at_most_two_large_results_are_read_at_once() {
    let (_dir, hub, src) = hub("hubload-large", &["--lease-ttl", "30"]);
    let a = HandRunner::register(&hub.url, "load");
    hub.submit(1, "python3", &src);
    let jb = a.next_job(0).1.expect("a job")["job_id"].as_str().unwrap().to_string();
    let head = format!(
        "PUT /runners/{}/jobs/{jb}/complete HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
        a.id,
        hub.listen,
        a.token,
        1 << 20
    );
    // Two results over 64 KiB, sent slowly but never stalled for long.
    let stop = Arc::new(AtomicBool::new(false));
    let trickling: Vec<_> = (0..2)
        .map(|_| {
            let mut s = raw(&hub.listen, &head, &[b' '; 100 << 10]);
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if s.write_all(b" ").is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            })
        })
        .collect();
    // Both are being read: a third waits for a place, and is refused with
    // 503 when none frees up.
    wait_for("two large bodies being read", LIMIT, || (hub.metric("hubd_large_bodies_reading") == 2.0).then_some(()));
    let third = raw(&hub.listen, &head, &[b' '; 100 << 10]);
    let started = Instant::now();
    assert!(a.heartbeat(&[&jb]) == 204, "the hub answers meanwhile");
    assert_eq!(status_of(third), 503, "a third large body is not read at once");
    eprintln!("the third large body was refused after {:?}", started.elapsed());
    stop.store(true, Ordering::SeqCst);
    for t in trickling {
        t.join().unwrap();
    }
    assert_eq!(a.complete(&jb, &one_ac()), 204, "a small result still lands");
}
