//! The admin API lives on its own listener only; the journal's JSON shape is a public
//! interface (snapshots), in memory bounded, on disk complete.

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use fake_wireserver::{AnswerKind, EndpointId, Entry, Fake, FakeConfig, Scenario, Severity};

use common::{exchange, exchange_blocking, get, goalstate_get, post, response};

const T: Duration = Duration::from_secs(10);

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

async fn full_fake() -> Fake {
    Fake::start(FakeConfig::default().with_proxy().admin(loopback()))
        .await
        .unwrap()
}

/// Volatile fields (time since start, client port) replaced so snapshots are stable. Whether
/// the kernel stamped the arrival is as after the fake's first moment (the first requests may
/// come before its stamping is on: `a_request_is_journaled_when_it_arrived_not_when_it_was_read`).
fn stable(mut e: Entry) -> Entry {
    e.at_ms = 0;
    e.received_by_kernel = true;
    e.done_ms = e.done_ms.map(|_| 1);
    e.client = "127.0.0.1:PORT".into();
    e
}

#[tokio::test]
async fn admin_paths_are_plain_404_on_agent_listeners_and_the_proxy() {
    let fake = full_fake().await;
    let admin = fake.admin_addr().unwrap();
    let cases = [
        (
            fake.wireserver_addr().unwrap(),
            "/__admin/journal".to_owned(),
            "168.63.129.16",
            EndpointId::WireserverUnknown,
        ),
        (
            fake.imds_addr().unwrap(),
            "/__admin/journal".to_owned(),
            "169.254.169.254",
            EndpointId::ImdsUnknown,
        ),
        (
            fake.proxy_addr().unwrap(),
            "http://168.63.129.16/__admin/journal".to_owned(),
            "168.63.129.16",
            EndpointId::WireserverUnknown,
        ),
        (
            fake.proxy_addr().unwrap(),
            format!("http://{admin}/__admin/journal"),
            "x",
            EndpointId::ProxyUnknownHost,
        ),
        (
            fake.proxy_addr().unwrap(),
            "/__admin/reset".to_owned(),
            "169.254.169.254",
            EndpointId::ImdsUnknown,
        ),
    ];
    for (addr, target, host, endpoint) in &cases {
        let r = response(exchange(*addr, &get(target, host, &[("Metadata", "true")]), T).await);
        assert_eq!(r.status, 404, "{target} via {addr}");
        assert!(r.body.is_empty(), "plain 404: {:?}", r.text());
        let e = fake.journal().into_iter().last().unwrap();
        assert_eq!(e.endpoint, *endpoint, "{target}");
        assert!(
            e.findings
                .iter()
                .any(|f| f.id == "path.admin-on-agent-listener"),
            "{:?}",
            e.findings
        );
    }
    // Nothing reached the admin API: the journal still has every request.
    assert_eq!(fake.journal().len(), cases.len());
}

/// An admin request as a client of the API sends it: the listener's Host, the token, and a
/// TOML content type when there is a body.
async fn admin_call(fake: &Fake, method: &str, path: &str, body: &str) -> common::Response {
    let admin = fake.admin_addr().unwrap();
    let token = fake.admin_token().unwrap();
    let content_type = if body.is_empty() {
        String::new()
    } else {
        "Content-Type: application/toml\r\n".to_owned()
    };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nAuthorization: Bearer {token}\r\n{content_type}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    response(exchange(admin, req.as_bytes(), T).await)
}

#[tokio::test]
async fn admin_api_journal_scenario_reset() {
    let fake = full_fake().await;
    let ws = fake.wireserver_addr().unwrap();
    assert_eq!(
        response(exchange(ws, &goalstate_get(), T).await).status,
        200
    );

    let r = admin_call(&fake, "GET", "/__admin/journal", "").await;
    assert_eq!(r.status, 200);
    let entries: Vec<Entry> = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].endpoint, EndpointId::WireserverGoalstate);

    // A bad scenario: 400 naming the origin, line and field; the old scenario stays.
    let r = admin_call(
        &fake,
        "POST",
        "/__admin/scenario?origin=plans/bad.toml",
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = \"x\"\n",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.text().trim(),
        "plans/bad.toml:5:10: endpoint[1].step[1].status: invalid type: string \"x\", expected u16"
    );
    assert_eq!(
        response(exchange(ws, &goalstate_get(), T).await).status,
        200
    );

    let r = admin_call(
        &fake,
        "POST",
        "/__admin/scenario",
        "[goalstate]\nincarnation = \"9\"\n[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\n",
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        response(exchange(ws, &goalstate_get(), T).await).status,
        410
    );
    let gs = response(exchange(ws, &goalstate_get(), T).await);
    assert!(gs.text().contains("<Incarnation>9</Incarnation>"));
    let served: serde_json::Value =
        serde_json::from_slice(&admin_call(&fake, "GET", "/__admin/served", "").await.body)
            .unwrap();
    assert_eq!(served["incarnation"], "9");

    // Reset: empty window, plan from its first step again.
    assert_eq!(
        admin_call(&fake, "POST", "/__admin/reset", "").await.status,
        200
    );
    assert!(fake.journal().is_empty());
    assert_eq!(
        response(exchange(ws, &goalstate_get(), T).await).status,
        410
    );
    let j = fake.journal();
    assert_eq!(j.len(), 1);
    assert_eq!(j[0].seq, 5, "seq numbers are never reused");
}

#[tokio::test]
async fn journal_window_is_bounded_and_the_file_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.jsonl");
    let fake = Fake::start(
        FakeConfig::default()
            .journal_capacity(3)
            .journal_file(&file),
    )
    .await
    .unwrap();
    for _ in 0..5 {
        response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await);
    }
    let seqs: Vec<u64> = fake.journal().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [3, 4, 5]);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Entry> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert!(
        lines
            .iter()
            .all(|e| e.done_ms.is_some() && e.answer.status == Some(200))
    );
}

#[tokio::test]
async fn journal_window_is_bounded_by_bytes_and_drops_the_oldest() {
    const MAX_BYTES: usize = 2 * 1024 * 1024;
    const REQUESTS: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.jsonl");
    let fake = Fake::start(
        FakeConfig::default()
            .journal_max_bytes(MAX_BYTES)
            .journal_file(&file),
    )
    .await
    .unwrap();
    let addr = fake.wireserver_addr().unwrap();
    // 64 KiB health bodies, half of them binary (kept as text and base64): 60 of them are
    // several MiB, far over the bound, while the count bound (10,000) is never reached.
    for i in 0..REQUESTS {
        let body: Vec<u8> = if i % 2 == 0 {
            let mut b = b"<Health>".to_vec();
            b.resize(64 * 1024, b'x');
            b
        } else {
            vec![0xff; 64 * 1024]
        };
        let mut req = format!(
            "POST /machine?comp=health HTTP/1.1\r\nHost: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\nContent-Type: text/xml; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        response(exchange(addr, &req, T).await);
    }
    let stats = fake.journal_stats();
    let journal = fake.journal();
    let summed: usize = journal.iter().map(Entry::retained_bytes).sum();
    let bodies: usize = journal
        .iter()
        .map(|e| e.body.len() + e.body_b64.as_ref().map_or(0, String::len))
        .sum();
    assert_eq!(stats.retained_bytes, summed);
    assert_eq!(stats.entries, journal.len());
    assert!(bodies <= summed && summed <= MAX_BYTES, "{stats:?}");
    assert!(
        stats.entries >= 3 && (stats.entries as u64) < REQUESTS,
        "the bound, not the count, limits the window: {stats:?}"
    );
    assert_eq!(stats.evicted + stats.entries as u64, REQUESTS);
    // The oldest were dropped: the window is the newest entries, in order, ending at the last.
    let seqs: Vec<u64> = journal.iter().map(|e| e.seq).collect();
    let first = REQUESTS - journal.len() as u64 + 1;
    assert_eq!(seqs, (first..=REQUESTS).collect::<Vec<_>>());
    assert!(journal.iter().all(|e| e.body_len == 64 * 1024));
    assert!(
        journal.iter().any(|e| e.body_b64.is_some()),
        "binary bodies are counted too"
    );
    // The file still has every entry.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count() as u64, REQUESTS);
}

#[tokio::test]
async fn journal_entry_shapes() {
    let scenario = Scenario::from_toml_str(
        "[goalstate]\nincarnation = \"7\"\ncontainer_id = \"c0ffee00-1111-2222-3333-444444444444\"\ninstance_id = \"11111111222233334444555555555555.vector-vm\"\n[[endpoint]]\nid = \"wireserver.health.json\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n",
        "snap.toml",
    )
    .unwrap();
    let fake = Fake::start(FakeConfig::default().with_proxy().scenario(scenario))
        .await
        .unwrap();
    let ws = fake.wireserver_addr().unwrap();

    // Health XML as WALA sends it (compact), with a stale incarnation: report + mismatch.
    let xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?><Health xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\"><GoalStateIncarnation>6</GoalStateIncarnation><Container><ContainerId>c0ffee00-1111-2222-3333-444444444444</ContainerId><RoleInstanceList><Role><InstanceId>11111111222233334444555555555555.vector-vm</InstanceId><Health><State>NotReady</State><Details><SubStatus>Provisioning</SubStatus><Description>Starting</Description></Details></Health></Role></RoleInstanceList></Container></Health>";
    response(
        exchange(
            ws,
            &post(
                "/machine?comp=health",
                "168.63.129.16",
                &[
                    ("x-ms-agent-name", "WALinuxAgent"),
                    ("x-ms-version", "2012-11-30"),
                    ("Content-Type", "text/xml;charset=utf-8"),
                ],
                xml,
            ),
            T,
        )
        .await,
    );
    // JSON health as azure-init sends a failure, answered by the scripted throttle.
    let json = r#"{"details":{"description":"result=error|reason=operation timed out|agent=Azure-Init/0.1.1|error=A timeout error occurred|pps_type=None|vm_id=11111111-2222-3333-4444-555555555555|timestamp=2026-11-29T14:41:10.903401841+00:00|documentation_url=https://aka.ms/linuxprovisioningerror","subStatus":"ProvisioningFailed"},"state":"NotReady"}"#;
    response(
        exchange(
            ws,
            &post(
                "/provisioning/health",
                "168.63.129.16",
                &[
                    ("content-type", "application/json"),
                    ("x-ms-guest-agent-name", "azure-init v0.1.1"),
                ],
                json,
            ),
            T,
        )
        .await,
    );
    // IMDS without the Metadata header, through the proxy.
    let r = response(
        exchange(
            fake.proxy_addr().unwrap(),
            &get(
                "http://169.254.169.254/metadata/instance?api-version=2021-02-01",
                "169.254.169.254",
                &[],
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["error"],
        "Bad request. Required metadata header not specified"
    );
    // An unknown wireserver path, with no x-ms headers.
    response(
        exchange(
            ws,
            &get("/machine?comp=nosuchcomp", "168.63.129.16", &[]),
            T,
        )
        .await,
    );

    let journal: Vec<Entry> = fake.journal().into_iter().map(stable).collect();
    assert_eq!(journal.len(), 4);
    assert!(
        journal[2]
            .findings
            .iter()
            .any(|f| f.severity == Severity::Error)
    );
    insta::assert_json_snapshot!("health_xml_entry", journal[0]);
    insta::assert_json_snapshot!("health_json_throttled_entry", journal[1]);
    insta::assert_json_snapshot!("imds_without_metadata_via_proxy_entry", journal[2]);
    insta::assert_json_snapshot!("unknown_path_entry", journal[3]);
}

/// A fake whose goal state answers only after a minute, journaling to `file`.
async fn slow_goalstate_fake(file: &std::path::Path, capacity: usize) -> Fake {
    let scenario = Scenario::from_toml_str(
        "[[endpoint]]\nid = \"wireserver.goalstate\"\n[[endpoint.step]]\nkind = \"delay\"\nseconds = 60\n",
        "slow.toml",
    )
    .unwrap();
    Fake::start(
        FakeConfig::default()
            .scenario(scenario)
            .journal_capacity(capacity)
            .journal_file(file),
    )
    .await
    .unwrap()
}

/// Sends the goal state request and leaves the connection open (the answer is a minute away);
/// returns once the fake has journaled it.
async fn pending_goalstate(fake: &Fake) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let mut stream = tokio::net::TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    stream.write_all(&goalstate_get()).await.unwrap();
    let until = std::time::Instant::now() + T;
    while !fake
        .journal()
        .iter()
        .any(|e| e.answer.kind == AnswerKind::Delay)
    {
        assert!(
            std::time::Instant::now() < until,
            "the request was not journaled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stream
}

fn file_entries(file: &std::path::Path) -> Vec<Entry> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn journal_file_keeps_requests_still_pending_when_the_fake_stops() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.jsonl");
    let fake = slow_goalstate_fake(&file, 100).await;
    let _open = pending_goalstate(&fake).await;
    let imds = get(
        "/metadata/instance?api-version=2021-08-01",
        "169.254.169.254",
        &[("Metadata", "true")],
    );
    assert_eq!(
        response(exchange(fake.imds_addr().unwrap(), &imds, T).await).status,
        200
    );
    fake.shutdown().await.unwrap();

    let lines = file_entries(&file);
    let summary: Vec<(u64, AnswerKind, Option<u16>, bool)> = lines
        .iter()
        .map(|e| (e.seq, e.answer.kind, e.answer.status, e.done_ms.is_some()))
        .collect();
    // The answered request once, then the one still waiting for its answer: no done_ms.
    assert_eq!(
        summary,
        [
            (2, AnswerKind::Default, Some(200), true),
            (1, AnswerKind::Delay, None, false)
        ]
    );
    assert_eq!(lines[1].endpoint, EndpointId::WireserverGoalstate);
}

#[tokio::test]
async fn journal_file_keeps_a_pending_request_the_window_drops() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("journal.jsonl");
    // A window of one entry: the next request evicts the one still waiting.
    let fake = slow_goalstate_fake(&file, 1).await;
    let _open = pending_goalstate(&fake).await;
    let versions = get("/?comp=versions", "168.63.129.16", &[]);
    assert_eq!(
        response(exchange(fake.wireserver_addr().unwrap(), &versions, T).await).status,
        200
    );
    let seqs: Vec<u64> = fake.journal().iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2]);
    let written: Vec<(u64, bool)> = file_entries(&file)
        .iter()
        .map(|e| (e.seq, e.done_ms.is_some()))
        .collect();
    assert_eq!(written, [(1, false), (2, true)]);
    // Stopping writes nothing twice.
    fake.shutdown().await.unwrap();
    assert_eq!(file_entries(&file).len(), 2);
}

/// An admin path on an agent listener is not inspected further (as before issue 14): its one
/// finding says so, whatever else the request gets wrong.
#[tokio::test]
async fn an_admin_path_on_an_agent_listener_has_only_the_admin_finding() {
    let fake = full_fake().await;
    let imds = fake.imds_addr().unwrap();
    let r = response(exchange(imds, &get("/__admin/journal", "169.254.169.254", &[]), T).await);
    assert_eq!(r.status, 404);
    let e = fake.journal().into_iter().last().unwrap();
    let ids: Vec<&str> = e.findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["path.admin-on-agent-listener"]);
}

/// A request is journaled when it arrived, not when the fake got round to reading it: with the
/// fake's runtime held for 600 ms (a loaded machine), a request sent 100 ms into that is
/// journaled when it was sent; the fake's own clock at reading would put it after the hold (the
/// checks then had to allow every such stall, N times over at agent time).
#[tokio::test(flavor = "current_thread")]
async fn a_request_is_journaled_when_it_arrived_not_when_it_was_read() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let addr = fake.wireserver_addr().unwrap();
    // The kernel turns its stamping on in deferred work once the listener asks: wait for it.
    let mut stamped = false;
    for _ in 0..100 {
        exchange(addr, &goalstate_get(), T).await;
        if fake.journal().last().is_some_and(|e| e.received_by_kernel) {
            stamped = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        stamped,
        "no arrival was stamped by the kernel: {:?}",
        fake.journal()
    );
    // A try proves something only if the second request went out well inside the hold: a
    // loaded machine may delay the client past it, so up to three tries.
    for _ in 0..3 {
        let first = fake.journal().len();
        let client = std::thread::spawn(move || {
            exchange_blocking(addr, &goalstate_get(), T);
            std::thread::sleep(Duration::from_millis(100));
            let sent = Instant::now();
            exchange_blocking(addr, &goalstate_get(), T);
            sent
        });
        // The first is answered while the runtime runs; then it is held, and the second arrives.
        let (answered, seen) = loop {
            if let Some(e) = fake.journal().get(first).filter(|e| e.done_ms.is_some()) {
                break (e.clone(), Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        std::thread::sleep(Duration::from_millis(600));
        let held_until = Instant::now();
        let late = loop {
            if let Some(e) = fake.journal().get(first + 1).cloned() {
                break e;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let sent = client.join().unwrap();
        if sent + Duration::from_millis(150) > held_until {
            continue;
        }
        assert!(late.received_by_kernel, "{late:?}");
        let after = late
            .at_ms
            .checked_sub(answered.done_ms.unwrap())
            .unwrap_or_else(|| {
                panic!("journaled before the answer before it: {late:?} {answered:?}")
            });
        let sent_after = sent.saturating_duration_since(seen).as_millis() as u64;
        let read_after = (held_until - seen).as_millis() as u64;
        assert!(
            after + 5 >= sent_after && after + 50 < read_after,
            "journaled {after} ms after the answer before it; sent {sent_after} ms after it, read {read_after} ms or more after it"
        );
        return;
    }
    panic!("the client never sent its request inside the held runtime in three tries");
}
