//! Scripted steps produce real socket behaviour: what a raw TCP client (and reqwest) sees.

use crate::common;

use std::time::{Duration, Instant};

use fake_wireserver::{AnswerKind, EndpointId, Fake, FakeConfig, HealthState, Scenario};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{Outcome, exchange, get, goalstate_get, post, response, vectors_dir};

const T: Duration = Duration::from_secs(10);

async fn fake(scenario: &str) -> Fake {
    let scenario = Scenario::from_toml_str(scenario, "test.toml").unwrap();
    Fake::start(FakeConfig::default().scenario(scenario))
        .await
        .unwrap()
}

fn goalstate_plan(steps: &str) -> String {
    format!("[[endpoint]]\nid = \"wireserver.goalstate\"\n{steps}")
}

fn platform_throttle_body() -> String {
    let v: Value = serde_json::from_slice(
        &std::fs::read(vectors_dir().join("http/platform/throttled-403.json")).unwrap(),
    )
    .unwrap();
    v["body"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn throttled_preset_is_the_platform_reply() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n",
    ))
    .await;
    let r = response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await);
    assert_eq!(r.status, 403);
    assert_eq!(r.header("content-type"), Some("text/xml; charset=utf-8"));
    assert_eq!(r.header("server"), Some("Microsoft-IIS/10.0"));
    let body = platform_throttle_body();
    assert_eq!(r.text(), body);
    assert_eq!(
        r.header("content-length"),
        Some(body.len().to_string().as_str())
    );
    assert!(
        r.header("retry-after").is_none(),
        "the platform sends no Retry-After"
    );
    let e = &fake.journal()[0];
    assert_eq!(e.answer.kind, AnswerKind::Respond);
    assert_eq!(e.answer.status, Some(403));
    let step = e.answer.step.as_ref().unwrap();
    assert_eq!(
        (step.endpoint.as_str(), step.index, step.repeat),
        ("wireserver.goalstate", 0, 1)
    );
}

#[tokio::test]
async fn presets_and_explicit_replies() {
    let fake = fake(&goalstate_plan(
        r#"
[[endpoint.step]]
kind = "respond"
preset = "gone"
[[endpoint.step]]
kind = "respond"
preset = "internal-error"
[[endpoint.step]]
kind = "respond"
preset = "unavailable"
[[endpoint.step]]
kind = "respond"
preset = "too-many-requests"
[[endpoint.step]]
kind = "respond"
status = 503
headers = [["Retry-After", "30"]]
body = "busy"
"#,
    ))
    .await;
    let addr = fake.wireserver_addr().unwrap();
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(response(exchange(addr, &goalstate_get(), T).await));
    }
    let codes: Vec<u16> = statuses.iter().map(|r| r.status).collect();
    assert_eq!(codes, [410, 500, 503, 429, 503]);
    assert_eq!(statuses[4].header("retry-after"), Some("30"));
    assert_eq!(statuses[4].text(), "busy");
    // The plan ran out (end = "default"): the goal state again.
    let r = response(exchange(addr, &goalstate_get(), T).await);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("<GoalState"));
}

#[tokio::test]
async fn delay_answers_after_the_delay() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"delay\"\nseconds = 0.5\n",
    ))
    .await;
    let start = Instant::now();
    let r = response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await);
    assert!(start.elapsed() >= Duration::from_millis(500));
    assert_eq!(r.status, 200, "a delay without a reply answers normally");
    assert!(r.text().contains("<GoalState"));
    let e = &fake.journal()[0];
    assert_eq!(e.answer.kind, AnswerKind::Delay);
    assert!(e.done_ms.unwrap() >= e.at_ms + 500);
}

/// Agent time: at x20 a scripted 10 s delay takes half a second of the wall's and the journal
/// counts the agent's 10 s; a trigger 4 s in has passed after 0.2 s of wall time.
#[tokio::test]
async fn scripted_times_run_in_agent_time() {
    use fake_wireserver::clock::TimeScale;
    let scenario = Scenario::from_toml_str(
        &format!(
            "{}[goalstate]\nincarnation = \"1\"\n[[trigger]]\nafter = 4.0\naction = \"bump-incarnation\"\n",
            goalstate_plan("[[endpoint.step]]\nkind = \"delay\"\nseconds = 10\n")
        ),
        "test.toml",
    )
    .unwrap();
    let scale = TimeScale::new(20).unwrap();
    let fake = Fake::start(FakeConfig::default().scenario(scenario).time_scale(scale))
        .await
        .unwrap();
    assert_eq!(fake.clock().scale(), scale);
    let start = Instant::now();
    let r = response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await);
    let wall = start.elapsed();
    assert_eq!(r.status, 200);
    assert!(
        wall >= Duration::from_millis(500) && wall < Duration::from_secs(5),
        "10 s of agent time at x20 took {wall:?} of the wall's"
    );
    let e = &fake.journal()[0];
    let took = e.done_ms.unwrap() - e.at_ms;
    assert!(took >= 10_000, "the journal counts agent time: {took} ms");
    // Past the trigger (4 s of agent time) the incarnation moved on.
    assert!(fake.clock_ms() >= 10_000);
    assert_eq!(fake.served_ids().incarnation, "2");
}

#[tokio::test]
async fn hang_never_answers() {
    let fake = fake(&goalstate_plan("[[endpoint.step]]\nkind = \"hang\"\n")).await;
    let outcome = exchange(
        fake.wireserver_addr().unwrap(),
        &goalstate_get(),
        Duration::from_millis(700),
    )
    .await;
    match outcome {
        Outcome::TimedOut(bytes) => assert!(bytes.is_empty(), "no byte sent: {bytes:?}"),
        other => panic!("expected the client to time out, got {other:?}"),
    }
    // reqwest with a timeout gives up the same way.
    let err = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap()
        .get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .send()
        .await;
    // The plan's single hang step was consumed; the second request got the default answer.
    assert_eq!(err.unwrap().status(), 200);
    let e = &fake.journal()[0];
    assert_eq!(e.answer.kind, AnswerKind::Hang);
    assert_eq!((e.answer.status, e.done_ms), (None, None));
    // The client gave up after 700 ms and closed: the journal says when (the fake notices
    // the close on its own task, so allow it a moment).
    let until = Instant::now() + T;
    let closed = loop {
        if let Some(closed) = fake.journal()[0].client_closed_ms {
            break closed;
        }
        assert!(
            Instant::now() < until,
            "the client's close was not journaled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(
        (e.at_ms + 600..e.at_ms + 5_000).contains(&closed),
        "closed at {closed} ms, the request arrived at {} ms",
        e.at_ms
    );
}

#[tokio::test]
async fn hang_until_reqwest_times_out() {
    let fake = fake(&goalstate_plan("[[endpoint.step]]\nkind = \"hang\"\n")).await;
    let err = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap()
        .get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
}

#[tokio::test]
async fn reset_sends_rst() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"reset\"\ntimes = 2\n",
    ))
    .await;
    let outcome = exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await;
    assert!(
        matches!(outcome, Outcome::Reset),
        "expected a TCP reset, got {outcome:?}"
    );
    let err = reqwest::get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .await
        .unwrap_err();
    assert!(!err.is_timeout() && err.status().is_none(), "{err:?}");
    let j = fake.journal();
    assert_eq!(j[1].answer.kind, AnswerKind::Reset);
    assert_eq!(j[1].answer.step.as_ref().unwrap().repeat, 2);
    // Each entry made final once its RST was out (the client may see it first), without a
    // status.
    let mut j = j;
    for _ in 0..500 {
        if j.len() >= 2 && j[..2].iter().all(|e| e.done_ms.is_some()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        j = fake.journal();
    }
    for e in &j[..2] {
        assert!(e.done_ms.is_some_and(|d| d >= e.at_ms), "{e:?}");
        assert_eq!(e.answer.status, None, "{e:?}");
    }
}

#[tokio::test]
async fn close_ends_without_a_byte() {
    let fake = fake(&goalstate_plan("[[endpoint.step]]\nkind = \"close\"\n")).await;
    match exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await {
        Outcome::Eof(bytes) => assert!(bytes.is_empty(), "{bytes:?}"),
        other => panic!("expected EOF without a response, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_writes_raw_bytes_then_closes() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"malformed\"\nbytes = \"HTTP/1.1 2OO OK\\r\\nbroken\"\n",
    ))
    .await;
    match exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await {
        Outcome::Eof(bytes) => assert_eq!(bytes, b"HTTP/1.1 2OO OK\r\nbroken"),
        other => panic!("expected the raw bytes then EOF, got {other:?}"),
    }
}

#[tokio::test]
async fn partial_body_then_close() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"partial\"\nbytes_sent = 40\ntimes = 2\n",
    ))
    .await;
    let outcome = exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await;
    let Outcome::Eof(bytes) = outcome else {
        panic!("expected EOF inside the body, got {outcome:?}");
    };
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK"));
    let declared: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(body.len(), 40);
    assert!(declared > 40, "the full length is declared: {declared}");
    // reqwest reports a body error.
    let res = reqwest::get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.bytes().await.is_err());
}

#[tokio::test]
async fn slow_dribbles_the_body() {
    let fake = fake(&goalstate_plan(
        "[[endpoint.step]]\nkind = \"slow\"\nchunk = 8\ninterval = 0.1\n\n[[endpoint.step]]\nkind = \"slow\"\nchunk = 128\ninterval = 0.1\n",
    ))
    .await;
    let mut stream = TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    stream
        .write_all(b"GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let start = Instant::now();
    let mut all = Vec::new();
    let mut reads = 0;
    let mut first_body_at = None;
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(T, stream.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        if n == 0 {
            break;
        }
        reads += 1;
        all.extend_from_slice(&chunk[..n]);
        if first_body_at.is_none() && all.windows(4).any(|w| w == b"\r\n\r\n") {
            first_body_at = Some(start.elapsed());
        }
        if reads > 2 && all.len() > 200 {
            break;
        }
    }
    assert!(reads >= 3, "the body arrived in pieces ({reads} reads)");
    assert!(start.elapsed() >= Duration::from_millis(200));
    // reqwest gets the whole document, slowly.
    let t = Instant::now();
    let body = reqwest::get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("</GoalState>"));
    let pieces = body.len().div_ceil(128) as u32;
    assert!(t.elapsed() >= Duration::from_millis(100) * (pieces - 1));
}

#[tokio::test]
async fn end_policies_over_real_sockets() {
    let steps = "[[endpoint.step]]\nkind = \"respond\"\nstatus = 500\ntimes = 2\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 503\n";
    for (end, want) in [
        ("default", [500, 500, 503, 200, 200]),
        ("repeat-last", [500, 500, 503, 503, 503]),
        ("cycle", [500, 500, 503, 500, 500]),
    ] {
        let fake = fake(&format!(
            "[[endpoint]]\nid = \"wireserver.*\"\nend = \"{end}\"\n{steps}"
        ))
        .await;
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(
                response(exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await)
                    .status,
            );
        }
        assert_eq!(got, want, "end = {end}");
        // IMDS is not matched by "wireserver.*".
        let r = response(
            exchange(
                fake.imds_addr().unwrap(),
                &get(
                    "/metadata/versions",
                    "169.254.169.254",
                    &[("Metadata", "true")],
                ),
                T,
            )
            .await,
        );
        assert_eq!(r.status, 200);
    }
}

async fn chaos_run(seed: u64) -> Vec<&'static str> {
    let fake = fake(&format!(
        "seed = {seed}\n[[endpoint]]\nid = \"wireserver.goalstate\"\nend = \"repeat-last\"\n[[endpoint.step]]\nkind = \"close\"\nprobability = 0.5\n"
    ))
    .await;
    let mut out = Vec::new();
    for _ in 0..24 {
        out.push(
            match exchange(fake.wireserver_addr().unwrap(), &goalstate_get(), T).await {
                Outcome::Response(r) if r.status == 200 => "ok",
                Outcome::Eof(b) if b.is_empty() => "closed",
                other => panic!("unexpected outcome {other:?}"),
            },
        );
    }
    let kinds: Vec<&str> = fake
        .journal()
        .iter()
        .map(|e| {
            if e.answer.kind == AnswerKind::Close {
                "closed"
            } else {
                "ok"
            }
        })
        .collect();
    assert_eq!(kinds, out, "the journal says what the client saw");
    out
}

#[tokio::test]
async fn seeded_probability_replays_exactly() {
    let a = chaos_run(42).await;
    let b = chaos_run(42).await;
    assert_eq!(a, b);
    assert!(a.contains(&"ok") && a.contains(&"closed"), "{a:?}");
    let c = chaos_run(43).await;
    assert_ne!(a, c, "another seed, another run");
}

#[tokio::test]
async fn rate_limiter_answers_with_the_platform_403() {
    let fake = fake("[rate_limit]\nrequests = 2\nwindow = 60\n").await;
    let addr = fake.wireserver_addr().unwrap();
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(response(exchange(addr, &goalstate_get(), T).await));
        }
        v.iter().map(|r| r.status).collect()
    };
    assert_eq!(statuses, [200, 200, 403]);
    let r = response(exchange(addr, &goalstate_get(), T).await);
    assert_eq!(r.text(), platform_throttle_body());
    assert_eq!(r.header("server"), Some("Microsoft-IIS/10.0"));
    let j = fake.journal();
    assert_eq!(j[2].answer.kind, AnswerKind::Throttled);
    assert_eq!(j[2].answer.step, None);
    // Only wireserver endpoints by default.
    let imds = response(
        exchange(
            fake.imds_addr().unwrap(),
            &get(
                "/metadata/instance?api-version=2021-02-01",
                "169.254.169.254",
                &[("Metadata", "true")],
            ),
            T,
        )
        .await,
    );
    assert_eq!(imds.status, 200);
}

#[tokio::test]
async fn triggers_bump_incarnation_and_release_reprovision_data() {
    let fake = fake(
        "[goalstate]\nincarnation = \"3\"\n[[trigger]]\nafter = 0.4\naction = \"bump-incarnation\"\n[[trigger]]\nafter = 0.4\naction = \"reprovision-available\"\n",
    )
    .await;
    let ws = fake.wireserver_addr().unwrap();
    let imds = fake.imds_addr().unwrap();
    let reprov = get(
        "/metadata/reprovisiondata?api-version=2019-06-01",
        "169.254.169.254",
        &[("Metadata", "true")],
    );
    let r = response(exchange(ws, &goalstate_get(), T).await);
    assert!(r.text().contains("<Incarnation>3</Incarnation>"));
    assert_eq!(response(exchange(imds, &reprov, T).await).status, 404);

    // A report echoing the old incarnation after the bump is journaled with a mismatch.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let r = response(exchange(ws, &goalstate_get(), T).await);
    assert!(r.text().contains("<Incarnation>4</Incarnation>"));
    assert_eq!(fake.served_ids().incarnation, "4");
    let r = response(exchange(imds, &reprov, T).await);
    assert_eq!(r.status, 200);
    assert!(r.text().contains("LinuxProvisioningConfigurationSet"));

    let ids = fake.served_ids();
    let health = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Health><GoalStateIncarnation>3</GoalStateIncarnation><Container><ContainerId>{}</ContainerId><RoleInstanceList><Role><InstanceId>{}</InstanceId><Health><State>Ready</State></Health></Role></RoleInstanceList></Container></Health>",
        ids.container_id, ids.instance_id
    );
    let r = response(
        exchange(
            ws,
            &post(
                "/machine?comp=health",
                "168.63.129.16",
                &[
                    ("x-ms-version", "2012-11-30"),
                    ("Content-Type", "text/xml;charset=utf-8"),
                ],
                &health,
            ),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 200, "mismatches are recorded, never rejected");
    let e = fake.journal().into_iter().last().unwrap();
    let report = e.report.unwrap();
    assert_eq!(report.state, Some(HealthState::Ready));
    assert!(
        report.findings.iter().any(|f| f.id.contains("incarnation")),
        "{:?}",
        report.findings
    );
}

#[tokio::test]
async fn oversized_body_is_refused_with_413() {
    let fake = Fake::start(FakeConfig::default().max_body_bytes(1024))
        .await
        .unwrap();
    let body = "x".repeat(4096);
    let r = response(
        exchange(
            fake.wireserver_addr().unwrap(),
            &post("/machine?comp=telemetrydata", "168.63.129.16", &[], &body),
            T,
        )
        .await,
    );
    assert_eq!(r.status, 413);
    let e = &fake.journal()[0];
    assert_eq!(e.answer.status, Some(413));
    assert!(
        e.findings.iter().any(|f| f.id == "http.body-too-large"),
        "{:?}",
        e.findings
    );
}

#[tokio::test]
async fn malformed_http_gets_400_and_a_finding() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let r = response(
        exchange(
            fake.wireserver_addr().unwrap(),
            b"GET /\x01 HTTP/1.1\r\n\r\n",
            T,
        )
        .await,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.header("connection"), Some("close"));
    let e = &fake.journal()[0];
    assert_eq!(e.endpoint, EndpointId::WireserverUnknown);
    assert!(
        e.findings.iter().any(|f| f.id == "http.malformed"),
        "{:?}",
        e.findings
    );
}

#[tokio::test]
async fn chunked_request_bodies_are_read() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let req = b"POST /provisioning/health HTTP/1.1\r\nHost: 168.63.129.16\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n7\r\n{\"state\r\na\r\n\":\"Ready\"}\r\n0\r\n\r\n";
    let r = response(exchange(fake.wireserver_addr().unwrap(), req, T).await);
    assert_eq!(r.status, 201);
    let e = &fake.journal()[0];
    assert_eq!(e.body, "{\"state\":\"Ready\"}");
    assert_eq!(e.report.as_ref().unwrap().state, Some(HealthState::Ready));
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let mut stream = TcpStream::connect(fake.wireserver_addr().unwrap())
        .await
        .unwrap();
    for _ in 0..3 {
        stream
            .write_all(b"GET /?comp=versions HTTP/1.1\r\nHost: 168.63.129.16\r\n\r\n")
            .await
            .unwrap();
        let r = response(common::read_outcome(&mut stream, T).await);
        assert_eq!(r.status, 200);
    }
    let clients: Vec<String> = fake.journal().iter().map(|e| e.client.clone()).collect();
    assert_eq!(clients.len(), 3);
    assert!(
        clients.iter().all(|c| *c == clients[0]),
        "same connection: {clients:?}"
    );
}

/// A step's `then` moves the goal state as the fault is met: the health report answered 410
/// leaves the goal state at the next incarnation, so the agent's next fetch sees it (the
/// goal-state change between fetch and report a schedule can script).
#[tokio::test]
async fn a_step_then_moves_the_goal_state_as_its_410_is_given() {
    let fake = fake(
        "[goalstate]\nincarnation = \"3\"\n[[endpoint]]\nid = \"wireserver.health.*\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\n",
    )
    .await;
    let ws = fake.wireserver_addr().unwrap();
    let r = response(exchange(ws, &goalstate_get(), T).await);
    assert!(r.text().contains("<Incarnation>3</Incarnation>"));
    let report = |incarnation: &str| {
        let ids = fake.served_ids();
        post(
            "/machine?comp=health",
            "168.63.129.16",
            &[
                ("x-ms-version", "2012-11-30"),
                ("Content-Type", "text/xml;charset=utf-8"),
            ],
            &format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?><Health><GoalStateIncarnation>{incarnation}</GoalStateIncarnation><Container><ContainerId>{}</ContainerId><RoleInstanceList><Role><InstanceId>{}</InstanceId><Health><State>Ready</State></Health></Role></RoleInstanceList></Container></Health>",
                ids.container_id, ids.instance_id
            ),
        )
    };
    assert_eq!(response(exchange(ws, &report("3"), T).await).status, 410);
    // Compared with the goal state the agent fetched, before the move: no mismatch.
    let gone = fake.journal().into_iter().last().unwrap();
    assert_eq!(gone.report.unwrap().findings, vec![]);
    let r = response(exchange(ws, &goalstate_get(), T).await);
    assert!(
        r.text().contains("<Incarnation>4</Incarnation>"),
        "{}",
        r.text()
    );
    // The plan ran out: the report of the new incarnation is accepted, without a mismatch.
    assert_eq!(response(exchange(ws, &report("4"), T).await).status, 200);
    let e = fake.journal().into_iter().last().unwrap();
    assert_eq!(e.report.unwrap().findings, vec![]);
}
