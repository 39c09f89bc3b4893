//! One HTTP exchange on a fresh connection, whatever its status: the
//! suites' own client, for the hub's pages and the protocol by hand.

use std::time::Duration;

/// One HTTP exchange on a fresh connection: the status and the body,
/// whatever the status (a transport error panics, naming the call).
pub fn http_exchange(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> (u16, Vec<u8>) {
    use std::io::Read;
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(60)).build();
    let mut req = agent.request(method, url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match body {
        Some(b) => req.set("Content-Type", "application/json").send_string(b),
        None => req.call(),
    };
    let res = match res {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {url}: {e}"),
    };
    let code = res.status();
    let mut bytes = Vec::new();
    res.into_reader().read_to_end(&mut bytes).unwrap();
    (code, bytes)
}
