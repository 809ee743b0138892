//! The fake-wireserver binary under abuse: a bounded stream of random and malformed requests
//! over raw TCP on every agent-facing listener (wireserver, IMDS, proxy), 16 connections at a
//! time. It must not panic or exit, must still answer normal requests afterwards, and its
//! resident memory must stay under a bound.
//!
//! The test command sends a few thousand requests; a deep run sends 100,000:
//!
//! ```sh
//! WIRECHECK_DEEP=1 cargo test -p wirecheck-e2e --test reliability_fake_abuse -- --nocapture
//! ```

mod reliability_support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use reliability_support::{FakeAddrs, FakeProcess, assert_still_serving, vm_rss_kib};

const REQUESTS: usize = 4_000;
const DEEP_REQUESTS: usize = 100_000;
const CONNECTIONS: usize = 16;
/// The journal's in-memory window for this test. It is bounded by entries, not bytes (a kept
/// body is up to 64 KiB, plus its base64 copy when it is not UTF-8), so a small window lets
/// memory level off early: growth past it over 100,000 requests would be a leak.
const JOURNAL_CAPACITY: &str = "1000";
/// Resident memory bound (debug build): ~13 MiB idle, plus the window of what this test sends.
const RSS_BOUND_KIB: u64 = 64 * 1024;

/// xorshift64*: deterministic, so a failure can be replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const PATHS: &[&str] = &[
    "/machine/?comp=goalstate",
    "/machine?comp=health",
    "/provisioning/health",
    "/?comp=versions",
    "/metadata/instance?api-version=2021-08-01",
    "/metadata/instance/compute/vmId?api-version=2021-08-01&format=text",
    "/metadata/reprovisiondata?api-version=2019-06-01",
    "/__admin/journal",
    "/__admin/reset",
    "/machine/../../etc/passwd",
    "/%00%ff%fe?comp=%zz",
    "*",
];
const METHODS: &[&str] = &[
    "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE", "G\0T", "",
];
const HOSTS: &[&str] = &[
    "168.63.129.16",
    "169.254.169.254",
    "127.0.0.1",
    "example.com",
    "[::1]",
    "",
];

/// One abusive request, and whether to half-close after sending it (most of the time: the
/// fake then sees the end at once instead of waiting for its read timeout).
fn request(rng: &mut Rng) -> (Vec<u8>, bool) {
    let path = rng.pick(PATHS);
    let host = rng.pick(HOSTS);
    let half_close = rng.below(100) != 0;
    let bytes = match rng.below(16) {
        0 => {
            let n = rng.below(2048);
            rng.bytes(n)
        }
        1 => format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nMetadata: true\r\nx-ms-version: 2012-11-30\r\n\r\n"
        )
        .into_bytes(),
        2 => {
            let mut v = format!("{} ", rng.pick(METHODS)).into_bytes();
            let n = rng.below(300);
            v.extend(rng.bytes(n));
            v.extend_from_slice(b" HTTP/1.1\r\n\r\n");
            v
        }
        3 => format!(
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nX-Big: {}\r\n\r\n",
            "a".repeat(70 * 1024)
        )
        .into_bytes(),
        4 => {
            let cl = rng.pick(&["abc", "-1", "5, 6", "99999999999999999999", "+4", ""]);
            format!("POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {cl}\r\n\r\nbody")
                .into_bytes()
        }
        5 => format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n{}\r\nxx\r\n",
            rng.pick(&["zz", "-1", "fffffffffffffffffff", "3;ext=\"", "2"])
        )
        .into_bytes(),
        6 => {
            let n = if rng.below(10) == 0 {
                64 * 1024 + rng.below(4096)
            } else {
                rng.below(16 * 1024)
            };
            let body = rng.bytes(n);
            let mut v = format!(
                "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: text/xml\r\nContent-Length: {n}\r\n\r\n"
            )
            .into_bytes();
            v.extend(body);
            v
        }
        7 => format!(
            "POST /machine?comp=health HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5000\r\n\r\n<Health"
        )
        .into_bytes(),
        8 => {
            let one = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nMetadata: true\r\n\r\n");
            one.repeat(1 + rng.below(5)).into_bytes()
        }
        9 => format!(
            "GET http://{host}{path} HTTP/1.1\r\nHost: {}\r\n\r\n",
            rng.pick(HOSTS)
        )
        .into_bytes(),
        10 => b"GET /\r\n".to_vec(),
        11 => {
            let mut v = b"GET / HTTP/1.1\r\nHo\0st: x\r\nX-\xff\xfe: \x01\x02\r\n".to_vec();
            v.extend_from_slice(b"\r\n");
            v
        }
        12 => format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").into_bytes(),
        13 => format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n"
        )
        .into_bytes(),
        14 => format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\r\n",
            3 * 1024 * 1024
        )
        .into_bytes(),
        _ => {
            let mut v = b"GET / HTTP/1.1\r\n".to_vec();
            for i in 0..rng.below(400) {
                v.extend_from_slice(format!("X-H{i}: {i}\r\n").as_bytes());
            }
            v.extend_from_slice(b"\r\n");
            v
        }
    };
    (bytes, half_close)
}

fn abuse_once(addr: SocketAddr, bytes: &[u8], half_close: bool) {
    let Ok(mut conn) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        panic!("the fake stopped accepting connections on {addr}");
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(3)));
    // The fake may answer and close early (431, 413, 400): write errors are fine.
    let _ = conn.write_all(bytes);
    if half_close {
        let _ = conn.shutdown(Shutdown::Write);
    }
    let mut sink = [0u8; 16 * 1024];
    let mut total = 0;
    while let Ok(n) = conn.read(&mut sink) {
        total += n;
        if n == 0 || total > 1024 * 1024 {
            break;
        }
    }
}

fn abuse(addrs: &FakeAddrs, pid: u32, requests: usize, seed: u64) -> u64 {
    let targets = [
        addrs.wireserver,
        addrs.imds,
        addrs.proxy.expect("started with --proxy"),
    ];
    let next = AtomicUsize::new(0);
    let max_rss = AtomicU64::new(0);
    std::thread::scope(|s| {
        for worker in 0..CONNECTIONS {
            let (next, max_rss, targets) = (&next, &max_rss, &targets);
            s.spawn(move || {
                let mut rng = Rng(seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= requests {
                        break;
                    }
                    let (bytes, half_close) = request(&mut rng);
                    abuse_once(targets[rng.below(targets.len())], &bytes, half_close);
                    if i % 250 == 0 {
                        max_rss.fetch_max(vm_rss_kib(pid), Ordering::Relaxed);
                    }
                }
            });
        }
    });
    max_rss.load(Ordering::Relaxed).max(vm_rss_kib(pid))
}

#[test]
fn random_and_malformed_requests_do_not_break_the_fake() {
    let deep = std::env::var_os("WIRECHECK_DEEP").is_some_and(|v| v == "1");
    let requests = if deep { DEEP_REQUESTS } else { REQUESTS };
    let seed = 0x05EE_D0FA_B05E;
    // IMDS's per-VM limit off: with it, most IMDS requests of the flood would get its 429 and
    // never reach the paths that parse and answer them, and the check afterwards a 429.
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("unlimited.toml");
    std::fs::write(&scenario, "[imds]\nrate_limit = false\n").unwrap();
    let mut fake = FakeProcess::start(&[
        "--proxy",
        "127.0.0.1:0",
        "--read-timeout",
        "1",
        "--journal-capacity",
        JOURNAL_CAPACITY,
        "--scenario",
        scenario.to_str().unwrap(),
    ]);
    let idle = vm_rss_kib(fake.pid());
    let peak = abuse(&fake.addrs, fake.pid(), requests, seed);
    eprintln!(
        "abuse: {requests} requests (seed {seed:#x}): VmRSS idle {} KiB, peak {} KiB, bound {} KiB",
        idle, peak, RSS_BOUND_KIB
    );
    assert_eq!(
        fake.exited(),
        None,
        "the fake exited under abuse:\n{}",
        fake.stderr()
    );
    let stderr = fake.stderr();
    assert!(!stderr.contains("panicked"), "the fake panicked:\n{stderr}");
    assert_still_serving(&fake.addrs);
    assert!(
        peak < RSS_BOUND_KIB,
        "VmRSS peaked at {peak} KiB, over the {RSS_BOUND_KIB} KiB bound (idle {idle} KiB)"
    );
    // The journal is still served on the admin listener, and is a bounded window.
    let journal = fake.addrs.admin_get("/__admin/journal");
    assert_eq!(journal.status, 200, "{}", journal.raw_text());
}
