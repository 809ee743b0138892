//! Issue 13, "every parser of untrusted input bounded": hostile agent traffic gets a clean
//! answer and a journal entry (or is closed), never a panic, and cannot starve the listener.

mod common;

use std::time::{Duration, Instant};

use fake_wireserver::{EndpointId, Fake, FakeConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{Outcome, exchange, goalstate_get, read_outcome, response};

const T: Duration = Duration::from_secs(10);

fn health_post(headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /provisioning/health HTTP/1.1\r\nHost: 168.63.129.16\r\nContent-Type: application/json\r\n{headers}Connection: close\r\n\r\n{body}"
    )
    .into_bytes()
}

/// Sends `req`, expects `status` with `Connection: close`, one journal entry with `finding`,
/// and a normal request answered afterwards (the fake kept serving).
async fn refused(req: &[u8], status: u16, finding: &str) {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let r = response(exchange(addr, req, T).await);
    assert_eq!(r.status, status, "{}", String::from_utf8_lossy(req));
    assert_eq!(r.header("connection"), Some("close"));
    let journal = fake.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].answer.status, Some(status));
    assert!(
        journal[0].findings.iter().any(|f| f.id == finding),
        "{:?}",
        journal[0].findings
    );
    let r = response(exchange(addr, &goalstate_get(), T).await);
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn chunk_overflow_gets_413_and_a_journal_entry() {
    // One byte, then a chunk size of 2^64-1: the running total must not wrap.
    let req = health_post(
        "Transfer-Encoding: chunked\r\n",
        "1\r\n{\r\nffffffffffffffff\r\n",
    );
    refused(&req, 413, "http.body-too-large").await;
}

#[tokio::test]
async fn chunk_size_over_the_body_cap_gets_413() {
    let req = health_post("Transfer-Encoding: chunked\r\n", "200000\r\nxx");
    refused(&req, 413, "http.body-too-large").await;
}

#[tokio::test]
async fn header_block_over_64_kib_gets_431() {
    // A head of ~66 KB arriving at once (complete in one read past the limit).
    let big = "a".repeat(66_000);
    let req = format!(
        "GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\nx-big: {big}\r\n\r\n"
    );
    refused(req.as_bytes(), 431, "http.head-too-large").await;
    // Just under the limit is still a request.
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let ok = "a".repeat(60_000);
    let req = format!(
        "GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\nx-big: {ok}\r\nConnection: close\r\n\r\n"
    );
    let r = response(exchange(fake.wireserver_addr().unwrap(), req.as_bytes(), T).await);
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn more_than_128_header_fields_get_431() {
    let fields: String = (0..129).map(|i| format!("x-{i}: 1\r\n")).collect();
    let req = format!("GET / HTTP/1.1\r\nHost: 168.63.129.16\r\n{fields}\r\n");
    refused(req.as_bytes(), 431, "http.head-too-large").await;
}

#[tokio::test]
async fn duplicate_transfer_encoding_is_malformed() {
    for te in [
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked, chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
    ] {
        let req = health_post(te, "2\r\n{}\r\n0\r\n\r\n");
        refused(&req, 400, "http.malformed").await;
    }
}

#[tokio::test]
async fn transfer_encoding_with_content_length_is_malformed() {
    let req = health_post(
        "Transfer-Encoding: chunked\r\nContent-Length: 2\r\n",
        "2\r\n{}\r\n0\r\n\r\n",
    );
    refused(&req, 400, "http.malformed").await;
}

#[tokio::test]
async fn content_length_plus_2_is_malformed() {
    for cl in [
        "Content-Length: +2\r\n",
        "Content-Length: 1,1\r\n",
        "Content-Length: 2\r\nContent-Length: 2\r\n",
        "Content-Length: 2\r\nContent-Length: 3\r\n",
        "Content-Length: 0x2\r\n",
        "Content-Length: -2\r\n",
        "Content-Length: 2 2\r\n",
        "Content-Length: \r\n",
        "Content-Length: 99999999999999999999999\r\n",
    ] {
        let req = health_post(cl, "{}");
        refused(&req, 400, "http.malformed").await;
    }
}

#[tokio::test]
async fn chunk_extensions_and_trailers_are_bounded() {
    let ext = "a".repeat(1000);
    // 17 chunks with 1000-byte extensions: over the 16 KiB of extensions per body.
    let chunks: String = (0..17).map(|_| format!("1;{ext}\r\nx\r\n")).collect();
    let req = health_post(
        "Transfer-Encoding: chunked\r\n",
        &format!("{chunks}0\r\n\r\n"),
    );
    refused(&req, 400, "http.malformed").await;

    // A trailer section over 64 KiB, in small fields.
    let trailers: String = (0..100).map(|i| format!("t-{i}: {ext}\r\n")).collect();
    let req = health_post(
        "Transfer-Encoding: chunked\r\n",
        &format!("2\r\n{{}}\r\n0\r\n{trailers}\r\n"),
    );
    refused(&req, 431, "http.head-too-large").await;

    // Modest extensions and trailers are still read.
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let req = health_post(
        "Transfer-Encoding: chunked\r\n",
        "2;name=value\r\n{}\r\n0\r\nx-trailer: 1\r\n\r\n",
    );
    let r = response(exchange(fake.wireserver_addr().unwrap(), &req, T).await);
    let e = &fake.journal()[0];
    assert_eq!(e.body, "{}");
    assert!(
        !e.findings.iter().any(|f| f.id.starts_with("http.")),
        "{:?}",
        e.findings
    );
    assert_eq!(e.answer.status, Some(r.status));
}

#[tokio::test]
async fn slowloris_header_is_closed_after_the_head_timeout() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let mut stream = TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    let started = Instant::now();
    stream
        .write_all(b"GET /machine/?comp=goalstate HTTP/1.1\r\n")
        .await
        .unwrap();
    // One header byte every 500 ms: each read arrives well within any per-read timeout.
    let mut closed_after = None;
    let mut sink = [0u8; 1024];
    while started.elapsed() < Duration::from_secs(30) {
        if stream.write_all(b"x").await.is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        match tokio::time::timeout(Duration::from_millis(500), stream.read(&mut sink)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed_after = Some(started.elapsed());
                break;
            }
            _ => {}
        }
    }
    let closed_after = closed_after.expect("the fake never closed a dribbling head");
    let limit = fake_wireserver::DEFAULT_HEAD_TIMEOUT + Duration::from_secs(3);
    assert!(closed_after < limit, "closed after {closed_after:?}");
    let journal = fake.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert!(
        journal[0]
            .findings
            .iter()
            .any(|f| f.id == "http.incomplete"),
        "{:?}",
        journal[0].findings
    );
}

/// Lets this process hold a few thousand sockets (both ends of each connection are ours).
fn raise_fd_limit(want: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current.is_some_and(|c| c < want) {
        limit.current = Some(limit.maximum.map_or(want, |m| m.min(want)));
        let _ = setrlimit(Resource::Nofile, limit);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_1024_do_not_starve_the_wireserver() {
    raise_fd_limit(8192);
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let addr = fake.wireserver_addr().unwrap();
    assert_eq!(fake_wireserver::DEFAULT_MAX_CONNECTIONS, 1024);
    let mut idle = Vec::with_capacity(1024);
    for _ in 0..1024 {
        idle.push(TcpStream::connect(addr).await.unwrap());
    }
    // Let the fake accept all of them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let outcome = exchange(addr, &goalstate_get(), Duration::from_secs(2)).await;
    let r = match outcome {
        Outcome::Response(r) => r,
        other => panic!(
            "no answer within 2 s behind 1,024 idle connections: {other:?} after {:?}",
            started.elapsed()
        ),
    };
    assert_eq!(r.status, 200);
    // The idle connections are not requests.
    let journal = fake.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].endpoint, EndpointId::WireserverGoalstate);
    drop(idle);
}

/// At the cap, connections that never sent a byte make room first, then those inside their
/// first request, each the longest silent first (issue 13 review: a flood must push out its
/// own connections before an agent's slow head).
#[tokio::test]
async fn the_connection_idle_the_longest_makes_room() {
    let fake = Fake::start(FakeConfig::default().max_connections(3))
        .await
        .unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let pause = || tokio::time::sleep(Duration::from_millis(200));
    let half = b"GET /machine/?comp=goalstate HTTP/1.1\r\n";
    let connect = || TcpStream::connect(addr);
    // a: silent, b: half a head, c: silent.
    let mut a = connect().await.unwrap();
    pause().await;
    let mut b = connect().await.unwrap();
    b.write_all(half).await.unwrap();
    pause().await;
    let mut c = connect().await.unwrap();
    pause().await;
    // The oldest silent one goes.
    assert_eq!(
        response(exchange(addr, &goalstate_get(), T).await).status,
        200
    );
    pause().await;
    // d: half a head, newer than b. A silent one still goes before either.
    let mut d = connect().await.unwrap();
    d.write_all(half).await.unwrap();
    pause().await;
    assert_eq!(
        response(exchange(addr, &goalstate_get(), T).await).status,
        200
    );
    pause().await;
    // e: half a head. Only started heads are left: the one silent the longest goes.
    let mut e = connect().await.unwrap();
    e.write_all(half).await.unwrap();
    pause().await;
    assert_eq!(
        response(exchange(addr, &goalstate_get(), T).await).status,
        200
    );
    for (name, conn, closed) in [
        ("a", &mut a, true),
        ("c", &mut c, true),
        ("b", &mut b, true),
        ("d", &mut d, false),
        ("e", &mut e, false),
    ] {
        let outcome = read_outcome(conn, Duration::from_millis(300)).await;
        match (closed, outcome) {
            (true, Outcome::Eof(bytes)) | (false, Outcome::TimedOut(bytes)) => {
                assert!(bytes.is_empty(), "{name}")
            }
            (_, other) => panic!("connection {name}: {other:?}"),
        }
    }
    let journal = fake.journal();
    assert_eq!(journal.len(), 4, "{journal:?}");
    let half = journal
        .iter()
        .find(|e| e.findings.iter().any(|f| f.id == "http.incomplete"))
        .expect("the half-sent request is journaled");
    assert!(
        half.findings[0].message.contains("closed to make room"),
        "{:?}",
        half.findings
    );
}

/// Issue 13 review: an attacker opening connections as fast as it can (each closes an idle
/// one at the cap) must not push out an agent dribbling its head within the head timeout, nor
/// one idling on keep-alive between two requests: a silent connection goes first, and idle
/// time counts from the last byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_does_not_close_a_slow_head_or_a_keep_alive_agent() {
    let fake = Fake::start(FakeConfig::default().max_connections(8))
        .await
        .unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let keep_alive_get = b"GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\n\r\n";
    // The keep-alive agent's first request, before the flood.
    let mut polling = TcpStream::connect(addr).await.unwrap();
    polling.write_all(keep_alive_get).await.unwrap();
    assert_eq!(response(read_outcome(&mut polling, T).await).status, 200);
    let mut dribbling = TcpStream::connect(addr).await.unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let attacker = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let mut held = std::collections::VecDeque::new();
            let mut opened = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(s) = std::net::TcpStream::connect(addr) {
                    held.push_back(s);
                    opened += 1;
                }
                if held.len() > 64 {
                    held.pop_front();
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            opened
        }
    });
    // The slow agent: its head one byte every 40 ms (about 3 s, within the 10 s head timeout).
    let head = goalstate_get();
    let started = Instant::now();
    for byte in &head {
        dribbling
            .write_all(&[*byte])
            .await
            .unwrap_or_else(|e| panic!("the dribbling agent's connection was closed: {e}"));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let slow = read_outcome(&mut dribbling, T).await;
    // The keep-alive agent's second request, after 3 s idle under the flood.
    let second = match polling.write_all(keep_alive_get).await {
        Ok(()) => read_outcome(&mut polling, T).await,
        Err(e) => panic!("keep-alive connection gone: {e}"),
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = attacker.join().unwrap();
    assert!(
        opened > 200,
        "the flood must churn well past the cap: {opened} connections"
    );
    match slow {
        Outcome::Response(r) => assert_eq!(r.status, 200),
        other => panic!(
            "the dribbled head was not answered: {other:?} after {:?}",
            started.elapsed()
        ),
    }
    match second {
        Outcome::Response(r) => assert_eq!(r.status, 200),
        other => panic!("the keep-alive agent's second request: {other:?}"),
    }
}

#[tokio::test]
async fn busy_connections_are_never_closed_for_room() {
    // A scripted hang keeps its connection busy: at a cap of 2, two hung requests stay open
    // and a third connection waits instead of closing them.
    let scenario = fake_wireserver::Scenario::from_toml_str(
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"hang\"\ntimes = 2\n",
        "t.toml",
    )
    .unwrap();
    let fake = Fake::start(FakeConfig::default().scenario(scenario).max_connections(2))
        .await
        .unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let mut hung = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&goalstate_get()).await.unwrap();
        hung.push(s);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = exchange(addr, &goalstate_get(), Duration::from_millis(800)).await;
    assert!(matches!(third, Outcome::TimedOut(_)), "{third:?}");
    for s in &mut hung {
        match read_outcome(s, Duration::from_millis(200)).await {
            Outcome::TimedOut(bytes) => assert!(bytes.is_empty()),
            other => panic!("a hung request's connection was closed: {other:?}"),
        }
    }
    // When one ends, the waiting connection is served.
    drop(hung.pop());
    let r = response(exchange(addr, &goalstate_get(), T).await);
    assert_eq!(r.status, 200);
}

/// The admin listener (served by axum) is capped too: idle connections are closed for new
/// ones, and a silent one is closed after the read timeout. (Any answer counts below: the
/// admin API may refuse a request without its token; being answered at all is the point.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_admin_connections_are_capped_and_closed() {
    raise_fd_limit(8192);
    let fake = Fake::start(
        FakeConfig::default()
            .admin("127.0.0.1:0".parse().unwrap())
            .read_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    let admin = fake.admin_addr().unwrap();
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(TcpStream::connect(admin).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let req = format!("GET /__admin/served HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    let answered = exchange(admin, req.as_bytes(), Duration::from_secs(2)).await;
    assert!(matches!(answered, Outcome::Response(_)), "{answered:?}");
    // 200 + 1 connections on a cap of 64: the oldest were closed.
    match read_outcome(&mut idle[0], Duration::from_millis(500)).await {
        Outcome::Eof(bytes) => assert!(bytes.is_empty()),
        other => panic!("the oldest idle admin connection is still open: {other:?}"),
    }
    // A silent connection under the cap is closed after the read timeout.
    let last = idle.last_mut().unwrap();
    match read_outcome(last, Duration::from_secs(5)).await {
        Outcome::Eof(_) | Outcome::Reset => {}
        other => panic!("a silent admin connection outlived the read timeout: {other:?}"),
    }
}

/// Issue 13 review: an admin request in progress (from its first byte until its answer is
/// written) is not closed to make room for connections from someone without the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_request_in_progress_is_not_closed_for_room() {
    raise_fd_limit(8192);
    let fake = Fake::start(FakeConfig::default().admin("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let admin = fake.admin_addr().unwrap();
    let token = fake.admin_token().unwrap().to_owned();
    let mut library = TcpStream::connect(admin).await.unwrap();
    library
        .write_all(format!("GET /__admin/served HTTP/1.1\r\nHost: {admin}\r\n").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // 100 connections with nothing to say, on a cap of 64.
    let mut others = Vec::new();
    for _ in 0..100 {
        others.push(TcpStream::connect(admin).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rest = format!("Authorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    let sent = library.write_all(rest.as_bytes()).await;
    let outcome = match sent {
        Ok(()) => read_outcome(&mut library, Duration::from_secs(2)).await,
        Err(e) => panic!("the admin request in progress was closed: {e}"),
    };
    match outcome {
        Outcome::Response(r) => assert_eq!(r.status, 200, "{}", r.text()),
        other => panic!("the admin request in progress was closed for room: {other:?}"),
    }
    // The silent ones were closed for room instead: the oldest is gone.
    match read_outcome(&mut others[0], Duration::from_millis(500)).await {
        Outcome::Eof(bytes) => assert!(bytes.is_empty()),
        other => panic!("the oldest silent admin connection is still open: {other:?}"),
    }
}

/// Issue 13 review: a body has time of its own after the head; a slow but progressing body of
/// an allowed size is not cut off by the head's deadline.
#[tokio::test]
async fn a_slow_body_is_not_cut_off_by_the_head_deadline() {
    let fake = Fake::start(FakeConfig::default().head_timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    let mut stream = TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    let body = br#"{"state":"Ready"}"#;
    stream
        .write_all(&health_post(
            &format!("Content-Length: {}\r\n", body.len()),
            "",
        ))
        .await
        .unwrap();
    // One byte every 120 ms: about 2 s, twice the head timeout.
    for byte in body {
        stream.write_all(&[*byte]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(120)).await;
    }
    let outcome = read_outcome(&mut stream, T).await;
    assert!(matches!(outcome, Outcome::Response(_)), "{outcome:?}");
    let journal = fake.journal();
    assert_eq!(journal.len(), 1, "{journal:?}");
    assert_eq!(journal[0].body, r#"{"state":"Ready"}"#);
    assert!(
        !journal[0]
            .findings
            .iter()
            .any(|f| f.id.starts_with("http.")),
        "{:?}",
        journal[0].findings
    );
}

/// Issue 13 review: HTTP/1.0 with Transfer-Encoding is faulty framing (RFC 9112 §6.1): the
/// connection is closed after the answer even when the client asked to keep it open.
#[tokio::test]
async fn http_1_0_with_transfer_encoding_is_closed_after_the_answer() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let mut stream = TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    stream
        .write_all(
            b"POST /provisioning/health HTTP/1.0\r\nHost: 168.63.129.16\r\nContent-Type: application/json\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let r = response(read_outcome(&mut stream, T).await);
    assert_eq!(r.header("connection"), Some("close"));
    // And it is closed: nothing more is read from it.
    let _ = stream.write_all(&goalstate_get()).await;
    match read_outcome(&mut stream, Duration::from_secs(2)).await {
        Outcome::Eof(bytes) => assert!(bytes.is_empty()),
        Outcome::Reset => {}
        other => panic!("the connection stayed open: {other:?}"),
    }
}

/// Admin connections inside a request are not closed for room while others are idle, but they
/// do not lift the cap: 100 connections that each sent one byte (all "in a request") still
/// leave room for the library, the one silent the longest going first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_connections_that_each_sent_a_byte_do_not_lift_the_cap() {
    raise_fd_limit(8192);
    let fake = Fake::start(FakeConfig::default().admin("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let admin = fake.admin_addr().unwrap();
    let token = fake.admin_token().unwrap().to_owned();
    let mut started = Vec::new();
    for _ in 0..100 {
        let mut s = TcpStream::connect(admin).await.unwrap();
        s.write_all(b"G").await.unwrap();
        started.push(s);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let req = format!(
        "GET /__admin/served HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let r = response(exchange(admin, req.as_bytes(), Duration::from_secs(2)).await);
    assert_eq!(r.status, 200, "{}", r.text());
    match read_outcome(&mut started[0], Duration::from_millis(500)).await {
        Outcome::Eof(_) | Outcome::Reset => {}
        other => panic!("101 admin connections open on a cap of 64: {other:?}"),
    }
}

/// Issue 23, "memory held by unfinished request bodies": 1,024 connections per listener, each
/// holding all but the last byte of a 1 MiB body, used to hold a GiB until their read
/// timeouts. The bodies in progress share one budget (64 MiB): each is reserved as soon as its
/// size is known (here before one byte of it came: the 100 Continue says so), one that does
/// not fit gets 503 and `http.over-budget`, and a reservation is given back when its
/// connection ends, so the next body is served.
#[tokio::test]
async fn unfinished_bodies_hold_a_bounded_amount_of_memory_together() {
    const MIB: usize = 1 << 20;
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let addr = fake.wireserver_addr().unwrap();
    let head = |len: usize| {
        format!(
            "POST /provisioning/health HTTP/1.1\r\nHost: 168.63.129.16\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    let mut holders = Vec::new();
    for _ in 0..64 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(head(MIB).as_bytes()).await.unwrap();
        let mut got = [0u8; 25];
        tokio::time::timeout(T, s.read_exact(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&got, b"HTTP/1.1 100 Continue\r\n\r\n");
        holders.push(s);
    }
    // Budget spent: one more body is refused at once, sized or chunked.
    let r = response(exchange(addr, head(1).as_bytes(), T).await);
    assert_eq!(r.status, 503);
    assert_eq!(r.header("connection"), Some("close"));
    let chunked = health_post("Transfer-Encoding: chunked\r\n", "1\r\n{\r\n");
    let r = response(exchange(addr, &chunked, T).await);
    assert_eq!(r.status, 503);
    let journal = fake.journal();
    assert_eq!(journal.len(), 2, "{journal:?}");
    for entry in &journal {
        assert_eq!(entry.answer.status, Some(503));
        let finding = entry.findings.iter().find(|f| f.id == "http.over-budget");
        let message = &finding.expect("http.over-budget").message;
        assert!(message.contains(&format!("hold {}", 64 * MIB)), "{message}");
    }
    // A request without a body is still served, and a connection that ends gives its share back.
    let r = response(exchange(addr, &goalstate_get(), T).await);
    assert_eq!(r.status, 200);
    drop(holders.pop());
    let body = format!(
        "{{\"state\":\"Ready\",\"pad\":\"{}\"}}",
        "x".repeat(MIB - 40)
    );
    let whole = health_post(&format!("Content-Length: {}\r\n", body.len()), &body);
    let served = tokio::time::Instant::now() + T;
    loop {
        let r = response(exchange(addr, &whole, T).await);
        if r.status != 503 {
            break;
        }
        // The dropped connection's end reaches the fake a moment later.
        assert!(
            tokio::time::Instant::now() < served,
            "its share never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last = fake.journal().pop().unwrap();
    assert!(
        last.findings.iter().all(|f| f.id != "http.over-budget"),
        "{last:?}"
    );
}
