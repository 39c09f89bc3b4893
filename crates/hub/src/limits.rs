//! What one client may cost the hub: connections (per address and in
//! total) and request bodies (a size cap, a read deadline, and a bound on
//! how many large bodies are read at once). A client over a limit gets an
//! error or a closed connection; the others never wait behind it.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The largest body of every call but `complete`.
pub const SMALL_BODY: usize = 64 << 10;
/// The largest `complete` body (a result carries whole outputs).
pub const LARGE_BODY: usize = 256 << 20;
/// `complete` bodies over [`SMALL_BODY`] read at once (memory stays bounded).
pub const LARGE_BODIES_AT_ONCE: usize = 2;
/// The longest pause between two pieces of a body.
const BODY_IDLE: Duration = Duration::from_secs(10);
/// The longest a small body may take in all.
const SMALL_BODY_TIME: Duration = Duration::from_secs(10);
/// The longest a large body may take in all.
const LARGE_BODY_TIME: Duration = Duration::from_secs(300);

/// Why a body was not read: the status and the reason to answer.
#[derive(Debug)]
pub struct Refused(pub u16, pub String);

/// Reads a body of at most `cap` bytes. With `large`, a body past
/// [`SMALL_BODY`] first takes one of its permits.
pub async fn read_body(
    mut body: hyper::body::Incoming,
    cap: usize,
    large: Option<&Semaphore>,
) -> Result<Bytes, Refused> {
    let too_large = || Refused(413, format!("body too large (at most {cap} bytes)"));
    // Its Content-Length, as hyper read it: refused before a byte is read.
    if hyper::body::Body::size_hint(&body).lower() > cap as u64 {
        return Err(too_large());
    }
    let deadline = Instant::now() + if large.is_some() { LARGE_BODY_TIME } else { SMALL_BODY_TIME };
    let mut buf = BytesMut::new();
    let mut permit = None;
    loop {
        let until = deadline.min(Instant::now() + BODY_IDLE);
        let frame = match tokio::time::timeout_at(until, body.frame()).await {
            Ok(frame) => frame,
            Err(_) => return Err(Refused(408, "the body stalled".into())),
        };
        let data = match frame {
            None => break,
            Some(Err(e)) => return Err(Refused(400, format!("reading the body: {e}"))),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue, // trailers
            },
        };
        let len = buf.len() + data.len();
        if len > cap {
            return Err(too_large());
        }
        if let (Some(slots), None) = (large, &permit) {
            if len > SMALL_BODY {
                let wait = tokio::time::timeout_at(until, slots.acquire()).await;
                permit = Some(
                    wait.ok()
                        .and_then(Result::ok)
                        .ok_or_else(|| Refused(503, "too many large bodies being read; send it again later".into()))?,
                );
            }
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
}

/// How long a client that showed a runner's token counts as a runner's.
const KNOWN_FOR: Duration = Duration::from_secs(600);

/// Open connections, per client address and in total. The last quarter of
/// the places is kept for clients that showed a runner's token within ten
/// minutes (`KNOWN_FOR`): connections from anywhere else, however many
/// addresses they come from, cannot shut the runners out.
pub struct Admission {
    open: Mutex<Open>,
    max_total: usize,
    max_per_address: usize,
    /// Places only runners' clients may take.
    reserve: usize,
}

#[derive(Default)]
struct Open {
    total: usize,
    per: HashMap<IpAddr, usize>,
    /// Addresses that authenticated as a runner, and when they last did
    /// (whole addresses: a neighbour in a runner's /64 is no runner).
    known: HashMap<IpAddr, Instant>,
    /// When `known` is next swept of addresses long gone.
    next_sweep: Option<Instant>,
}

/// One admitted connection; dropping it gives its place back.
pub struct Ticket {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Admission {
    pub fn new(max_total: usize, max_per_address: usize) -> Arc<Admission> {
        let reserve = max_total / 4;
        Arc::new(Admission { open: Mutex::default(), max_total, max_per_address, reserve })
    }

    /// A place for a connection from `ip`, or `None` over a limit.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Option<Ticket> {
        let ip = client(addr);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let Open { total, per, known, .. } = &mut *open;
        let runners_only = *total + self.reserve >= self.max_total;
        let runner = || known.get(&unmapped(addr)).is_some_and(|at| at.elapsed() < KNOWN_FOR);
        let mine = per.get(&ip).copied().unwrap_or(0);
        if *total >= self.max_total || mine >= self.max_per_address || (runners_only && !runner()) {
            return None;
        }
        per.insert(ip, mine + 1);
        *total += 1;
        Some(Ticket { admission: self.clone(), ip })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).total
    }

    /// `ip` showed a runner's token: it may take the reserved places.
    pub fn known_runner(&self, addr: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Only tokens put addresses here; those long gone go once in a while.
        if open.next_sweep.is_none_or(|at| now >= at) {
            open.known.retain(|_, at| now.duration_since(*at) < KNOWN_FOR);
            open.next_sweep = Some(now + KNOWN_FOR);
        }
        open.known.insert(unmapped(addr), now);
    }
}

/// The client a connection counts against: an IPv4 address, or an IPv6
/// /64 (the least a host is usually given: its 2^64 addresses are one
/// client, lest one host have 2^64 shares).
fn client(addr: IpAddr) -> IpAddr {
    match unmapped(addr) {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        v4 => v4,
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn unmapped(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.admission.open.lock().unwrap_or_else(|p| p.into_inner());
        let Open { total, per, .. } = &mut *open;
        *total -= 1;
        if let Some(n) = per.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per.remove(&self.ip);
            }
        }
    }
}

/// Raises this process's open-file limit to its hard limit: every
/// connection is a descriptor. Returns the limit in force.
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else { return 1024 };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_bounded_per_address_and_in_total() {
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let adm = Admission::new(3, 2);
        let (t1, _t2) = (adm.admit(a).unwrap(), adm.admit(a).unwrap());
        assert!(adm.admit(a).is_none(), "a third from one address");
        let _t3 = adm.admit(b).unwrap();
        assert!(adm.admit(b).is_none(), "a fourth in all");
        drop(t1);
        assert!(adm.admit(a).is_some(), "a place given back is taken again");
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// The last quarter of the places is for addresses known as runners',
    /// each by itself: a neighbour in a runner's /64 is a stranger.
    #[test]
    fn the_last_places_are_for_runners_each_known_by_its_own_address() {
        let adm = Admission::new(8, 8);
        let (stranger, runner) = (ip("192.0.2.1"), ip("2001:db8::1"));
        let held: Vec<Ticket> = (0..6).map(|_| adm.admit(stranger).unwrap()).collect();
        assert!(adm.admit(stranger).is_none(), "a stranger's seventh of eight");
        assert!(adm.admit(runner).is_none(), "nor a client not yet known");
        adm.known_runner(runner);
        assert!(adm.admit(ip("2001:db8::2")).is_none(), "a neighbour of the runner is a stranger");
        let _r = [adm.admit(runner).unwrap(), adm.admit(runner).unwrap()];
        assert!(adm.admit(runner).is_none(), "nothing past the total");
        drop(held);
        assert!(adm.admit(stranger).is_some(), "below the reserve, anyone");
        adm.known_runner(ip("::ffff:198.51.100.1"));
        let _held: Vec<Ticket> = (0..4).map(|_| adm.admit(stranger).unwrap()).collect();
        assert!(adm.admit(ip("198.51.100.1")).is_some(), "a mapped address is known as itself");
    }

    /// An IPv6 host has a /64 of addresses: they count as one client.
    #[test]
    fn an_ipv6_64_is_one_client() {
        let adm = Admission::new(10, 2);
        let _held = [adm.admit(ip("2001:db8::1")).unwrap(), adm.admit(ip("2001:db8::ffff:2")).unwrap()];
        assert!(adm.admit(ip("2001:db8::1:2:3:4")).is_none(), "a third address of the same /64");
        assert!(adm.admit(ip("2001:db8:0:1::1")).is_some(), "the next /64 is another client");
        let _v4 = adm.admit(ip("192.0.2.1")).unwrap();
        let _mapped = adm.admit(ip("::ffff:192.0.2.1")).unwrap();
        assert!(adm.admit(ip("192.0.2.1")).is_none(), "an IPv4-mapped address is its IPv4 address");
    }
}
