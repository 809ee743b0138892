//! Issue 23, "bounded, linear work per request body; one case's traffic cannot slow another
//! case's fake": in `wirecheck run` every case's fake shares one runtime, whose worker threads
//! (one per core) an agent's bodies must not hold.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fake_wireserver::{EndpointId, Fake, FakeConfig};

use common::post;

/// How long a neighbour's request may take while bombs are processed: generous (a loaded CI
/// machine), and far below the 10–30 s the finding froze every fake for.
const NEIGHBOUR_BOUND: Duration = Duration::from_secs(5);

/// The finding's body: 300 KB of nested tags.
fn xml_bomb() -> String {
    let depth = 300 * 1024 / 7;
    format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth))
}

/// One request on a fresh blocking connection (a thread of the test's own, not the fake's
/// runtime): the status line, or why there was none within `bound`.
fn status_within(addr: SocketAddr, request: &[u8], bound: Duration) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(bound)).unwrap();
    stream.set_write_timeout(Some(bound)).unwrap();
    stream
        .write_all(request)
        .map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buf) {
            Ok(0) => return Err("closed without an answer".into()),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("no answer within {bound:?}: {e}")),
        }
    }
    let line = String::from_utf8_lossy(&answer);
    Ok(line.lines().next().unwrap_or_default().to_owned())
}

/// Issue 23, "quadratic XML parsing": two 300 KB bodies of nested tags froze every case's
/// fake for 10–30 s (each parse held one of the runtime's two workers), and an innocent agent
/// in the same run went from 65/65 pass to 8 fail. On a two-worker runtime, as `wirecheck run`
/// has on two cores, a neighbour's requests are answered while two bombers keep sending, and
/// every bomb is journaled with its finding.
#[test]
fn quadratic_xml_parsing_bombs_leave_a_neighbour_answered() {
    let fake = Fake::start_blocking(FakeConfig::default()).unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let bomb = post(
        "/machine?comp=health",
        "168.63.129.16",
        &[
            ("x-ms-version", "2012-11-30"),
            ("Content-Type", "text/xml; charset=utf-8"),
        ],
        &xml_bomb(),
    );
    const ROUNDS: usize = 5;
    let done = Arc::new(AtomicBool::new(false));
    let bombers: Vec<_> = (0..2)
        .map(|_| {
            let bomb = bomb.clone();
            std::thread::spawn(move || {
                for _ in 0..ROUNDS {
                    // Generous: the bombs' answers are not what is judged here.
                    let status = status_within(addr, &bomb, Duration::from_secs(120));
                    assert!(
                        status.is_ok_and(|s| s.contains(" 200 ")),
                        "a bomb went unanswered"
                    );
                }
            })
        })
        .collect();
    let neighbour = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let versions = common::get("/?comp=versions", "168.63.129.16", &[]);
            let mut answered = 0;
            while !done.load(Ordering::Relaxed) || answered < 10 {
                let status =
                    status_within(addr, &versions, NEIGHBOUR_BOUND).unwrap_or_else(|why| {
                        panic!(
                            "the neighbour's request #{answered} while bombs were processed: {why}"
                        )
                    });
                assert!(status.contains(" 200 "), "{status}");
                answered += 1;
            }
            answered
        })
    };
    for bomber in bombers {
        bomber.join().expect("a bomber");
    }
    done.store(true, Ordering::Relaxed);
    let answered = neighbour
        .join()
        .expect("the neighbour was not answered in time");
    assert!(answered >= 10);

    let bombs: Vec<_> = fake
        .journal()
        .into_iter()
        .filter(|e| e.endpoint == EndpointId::WireserverHealthXml)
        .collect();
    assert_eq!(bombs.len(), 2 * ROUNDS);
    for entry in bombs {
        let report = entry.report.expect("every bomb is parsed");
        let ids: Vec<&str> = report.findings.iter().map(|f| f.id.as_str()).collect();
        assert!(
            ids.contains(&"health.xml.too-deep"),
            "#{}: {ids:?}",
            entry.seq
        );
        assert!(report.state.is_none());
        assert_eq!(entry.body_len, xml_bomb().len(), "the body is kept whole");
    }
}
