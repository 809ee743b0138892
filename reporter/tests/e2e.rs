//! End-to-end: the `provision-report` binary against a scripted loopback server. Assertions are
//! on what the server received and on the pool file's bytes, not only on exit codes.

use crate::support;

use std::time::Duration;

use support::*;

fn json_body(request: &Recorded) -> serde_json::Value {
    serde_json::from_str(&request.body).expect("JSON body")
}

/// The one PROVISIONING_REPORT record of the pool, parsed.
fn kvp_report(scratch: &Scratch) -> Vec<(String, String)> {
    let records = pool_records(&scratch.pool());
    let reports: Vec<_> = records
        .iter()
        .filter(|(k, _)| k == "PROVISIONING_REPORT")
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "one PROVISIONING_REPORT record in {records:?}"
    );
    parse_encoded(&reports[0].1)
}

#[test]
fn ready_over_json() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    assert_eq!(
        server.targets(),
        vec![
            "GET /metadata/instance?api-version=2021-08-01&extended=true",
            "POST /provisioning/health"
        ]
    );
    let imds = &server.requests()[0];
    assert_eq!(imds.header("metadata"), Some("true"));
    let post = &server.requests_to("POST", "/provisioning/health")[0];
    assert_eq!(post.header("content-type"), Some("application/json"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        post.header("x-ms-guest-agent-name"),
        Some(format!("provision-report v{version}").as_str())
    );
    assert_eq!(
        post.header("user-agent"),
        Some(format!("provision-report/{version}").as_str())
    );
    assert_eq!(post.header("x-ms-version"), None);
    assert_eq!(json_body(post), serde_json::json!({"state": "Ready"}));
    assert_eq!(post.body, r#"{"state":"Ready"}"#);

    let report = kvp_report(&scratch);
    assert_eq!(keys(&report), ["result", "agent", "timestamp", "vm_id"]);
    assert_eq!(value(&report, "result"), Some("success"));
    assert_eq!(
        value(&report, "agent"),
        Some(format!("provision-report/{version}").as_str())
    );
    assert_eq!(value(&report, "vm_id"), Some(VM_ID));
    assert!(value(&report, "timestamp").unwrap().ends_with("+00:00"));
}

#[test]
fn failure_over_json_carries_the_encoded_report() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &[
            "failure",
            "--reason",
            "failed to provision user",
            "--data",
            "user=azure|user",
            "--data",
            "error=can't \"add\"\nline 2",
            "--data",
            "empty=",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let post = &server.requests_to("POST", "/provisioning/health")[0];
    let body = json_body(post);
    assert_eq!(body["state"], "NotReady");
    assert_eq!(body["details"]["subStatus"], "ProvisioningFailed");
    let description = body["details"]["description"].as_str().unwrap();
    let fields = parse_encoded(description);
    assert_eq!(
        keys(&fields),
        [
            "result",
            "reason",
            "agent",
            "pps_type",
            "user",
            "error",
            "empty",
            "vm_id",
            "timestamp",
            "documentation_url"
        ]
    );
    assert_eq!(value(&fields, "reason"), Some("failed to provision user"));
    assert_eq!(value(&fields, "pps_type"), Some("None"));
    assert_eq!(value(&fields, "user"), Some("azure|user"));
    assert_eq!(value(&fields, "error"), Some("can't \"add\"\nline 2"));
    assert_eq!(value(&fields, "empty"), Some(""));
    assert_eq!(value(&fields, "vm_id"), Some(VM_ID));
    assert_eq!(
        value(&fields, "documentation_url"),
        Some("https://aka.ms/linuxprovisioningerror")
    );
    // Whole fields quoted with ', quotes doubled, " literal.
    assert!(description.contains("|'user=azure|user'|"), "{description}");
    assert!(
        description.contains("|'error=can''t \"add\"\nline 2'|"),
        "{description}"
    );
    // KVP holds the same report (it fits the 1022 bytes the host reads).
    let kvp = pool_records(&scratch.pool());
    assert_eq!(kvp.len(), 1);
    assert_eq!(kvp[0].1, description);
}

#[test]
fn in_progress_over_json_writes_no_kvp_record() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["in-progress"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let post = &server.requests_to("POST", "/provisioning/health")[0];
    assert_eq!(
        json_body(post),
        serde_json::json!({"details": {
            "description": format!("Provisioning is still in progress for vm_id={VM_ID}."),
            "subStatus": "Provisioning"}, "state": "NotReady"})
    );
    assert_eq!(pool_records(&scratch.pool()), vec![]);

    let run = support::run(
        &server,
        &scratch,
        &["in-progress", "--description", "step 3 of 5"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let post = server
        .requests_to("POST", "/provisioning/health")
        .pop()
        .unwrap();
    assert_eq!(json_body(&post)["details"]["description"], "step 3 of 5");
}

fn assert_xml_flow_requests(server: &Server) {
    let requests = server.requests();
    let wire: Vec<_> = requests
        .iter()
        .filter(|r| !r.path.starts_with("/metadata"))
        .collect();
    assert_eq!(
        wire.iter().map(|r| r.target()).collect::<Vec<_>>(),
        vec![
            "GET /?comp=versions",
            "GET /machine/?comp=goalstate",
            "POST /machine?comp=health"
        ]
    );
    for request in &wire {
        assert_eq!(request.header("x-ms-agent-name"), Some("provision-report"));
        assert_eq!(request.header("x-ms-version"), Some("2012-11-30"));
    }
    assert_eq!(
        wire[2].header("content-type"),
        Some("text/xml; charset=utf-8")
    );
}

#[test]
fn ready_over_xml() {
    let server = Server::start();
    server.with_imds().with_xml_flow(vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--protocol", "xml", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_xml_flow_requests(&server);
    let health = server.requests_to("POST", "/machine").pop().unwrap();
    let texts = xml_texts(&health.body);
    let expected: std::collections::BTreeMap<String, String> = [
        ("Health/GoalStateIncarnation", INCARNATION),
        ("Health/Container/ContainerId", CONTAINER_ID),
        (
            "Health/Container/RoleInstanceList/Role/InstanceId",
            INSTANCE_ID,
        ),
        (
            "Health/Container/RoleInstanceList/Role/Health/State",
            "Ready",
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(texts, expected);
    assert_eq!(value(&kvp_report(&scratch), "result"), Some("success"));
}

#[test]
fn failure_over_xml_escapes_the_description() {
    let server = Server::start();
    server.with_imds().with_xml_flow(vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &[
            "--protocol",
            "xml",
            "failure",
            "--reason",
            "boom",
            "--data",
            "markup=<a href=\"x\">&amp;</a>",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_xml_flow_requests(&server);
    let health = server.requests_to("POST", "/machine").pop().unwrap();
    assert!(
        health
            .body
            .contains("markup=&lt;a href=\"x\"&gt;&amp;amp;&lt;/a&gt;"),
        "only & < > are escaped: {}",
        health.body
    );
    let texts = xml_texts(&health.body);
    let role = "Health/Container/RoleInstanceList/Role/Health";
    assert_eq!(texts[&format!("{role}/State")], "NotReady");
    assert_eq!(
        texts[&format!("{role}/Details/SubStatus")],
        "ProvisioningFailed"
    );
    let fields = parse_encoded(&texts[&format!("{role}/Details/Description")]);
    assert_eq!(value(&fields, "markup"), Some("<a href=\"x\">&amp;</a>"));
    assert_eq!(parse_encoded(&pool_records(&scratch.pool())[0].1), fields);
}

#[test]
fn in_progress_over_xml() {
    let server = Server::start();
    server.with_imds().with_xml_flow(vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &[
            "--protocol",
            "xml",
            "in-progress",
            "--description",
            "almost",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_xml_flow_requests(&server);
    let texts = xml_texts(&server.requests_to("POST", "/machine").pop().unwrap().body);
    let role = "Health/Container/RoleInstanceList/Role/Health";
    assert_eq!(texts[&format!("{role}/State")], "NotReady");
    assert_eq!(texts[&format!("{role}/Details/SubStatus")], "Provisioning");
    assert_eq!(texts[&format!("{role}/Details/Description")], "almost");
}

#[test]
fn auto_falls_back_to_xml_on_404() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(404)])
        .with_xml_flow(vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--protocol", "auto", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let wire: Vec<String> = server
        .targets()
        .into_iter()
        .filter(|t| !t.contains("/metadata"))
        .collect();
    assert_eq!(
        wire,
        vec![
            "POST /provisioning/health",
            "GET /?comp=versions",
            "GET /machine/?comp=goalstate",
            "POST /machine?comp=health"
        ]
    );
}

#[test]
fn json_mode_retries_404_instead_of_falling_back() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::Status(404), Reply::Status(201)],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 2);
    assert!(server.requests_to("GET", "/").is_empty());
}

#[test]
fn xml_health_410_fetches_the_goal_state_again() {
    let server = Server::start();
    server.with_imds();
    server.on("GET /?comp=versions", vec![Reply::xml(200, VERSIONS_DOC)]);
    server.on(
        "GET /machine/?comp=goalstate",
        vec![
            Reply::xml(200, goal_state_doc("7")),
            Reply::xml(200, goal_state_doc("8")),
        ],
    );
    server.on(
        "POST /machine?comp=health",
        vec![Reply::Status(410), Reply::Status(200)],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--protocol", "xml", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let wire: Vec<String> = server
        .targets()
        .into_iter()
        .filter(|t| !t.contains("/metadata"))
        .collect();
    assert_eq!(
        wire,
        vec![
            "GET /?comp=versions",
            "GET /machine/?comp=goalstate",
            "POST /machine?comp=health",
            "GET /machine/?comp=goalstate",
            "POST /machine?comp=health"
        ]
    );
    let posts = server.requests_to("POST", "/machine");
    assert_eq!(
        xml_texts(&posts[0].body)["Health/GoalStateIncarnation"],
        "7"
    );
    assert_eq!(
        xml_texts(&posts[1].body)["Health/GoalStateIncarnation"],
        "8"
    );
}

#[test]
fn xml_flow_refuses_a_wireserver_without_2012_11_30() {
    let server = Server::start();
    server.with_imds().on(
        "GET /?comp=versions",
        vec![Reply::xml(
            200,
            "<Versions><Preferred><Version>2012-11-30</Version></Preferred><Supported><Version>2010-12-15</Version></Supported></Versions>",
        )],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--protocol", "xml", "ready"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("2012-11-30"), "{}", run.stderr);
    assert!(server.requests_to("GET", "/machine/").is_empty());
    assert_eq!(value(&kvp_report(&scratch), "result"), Some("success"));
}

#[test]
fn throttled_403_then_success() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::throttled(), Reply::throttled(), Reply::Status(201)],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--retry-interval", "0.3", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 3);
    for pair in posts.windows(2) {
        let gap = pair[1].at - pair[0].at;
        assert!(gap >= Duration::from_millis(250), "retried after {gap:?}");
    }
    assert!(posts.iter().all(|p| p.body == r#"{"state":"Ready"}"#));
}

#[test]
fn plain_403_fails_at_once() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::xml(403, "<Error><Code>Forbidden</Code></Error>")],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 1);
}

#[test]
fn unauthorized_401_fails_at_once_and_keeps_kvp() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(401)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &["failure", "--reason", "boom", "--data", "k=v"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("401"), "{}", run.stderr);
    assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 1);
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    let report = kvp_report(&scratch);
    assert_eq!(value(&report, "reason"), Some("boom"));
    assert_eq!(value(&report, "k"), Some("v"));
}

#[test]
fn a_hang_longer_than_the_budget_ends_within_budget_plus_one_interval() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Hang]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &[
            "--timeout",
            "2",
            "--retry-interval",
            "1",
            "--request-timeout",
            "60",
            "ready",
        ],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    // Within budget 2 s + one interval 1 s, with 1.5 s of slack for a loaded machine.
    assert!(run.elapsed >= Duration::from_secs(2), "{:?}", run.elapsed);
    assert!(
        run.elapsed < Duration::from_millis(4500),
        "{:?}",
        run.elapsed
    );
    assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 1);
    assert_eq!(value(&kvp_report(&scratch), "result"), Some("success"));
}

#[test]
fn retryable_statuses_are_retried_until_the_budget_ends() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(503)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &["--timeout", "1.5", "--retry-interval", "0.25", "ready"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    let posts = server.requests_to("POST", "/provisioning/health").len();
    assert!((3..=7).contains(&posts), "{posts} POSTs in 1.5 s at 0.25 s");
    assert!(run.stderr.contains("HTTP 503"), "{}", run.stderr);
}

#[test]
fn imds_400_falls_back_to_2019_06_01() {
    let server = Server::start();
    server.on(
        "GET /metadata/instance",
        vec![
            Reply::json(400, r#"{"error":"Bad request"}"#),
            Reply::json(
                200,
                r#"{"compute":{"vmId":"22222222-0000-0000-0000-000000000000"}}"#,
            ),
        ],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["failure", "--reason", "boom"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let imds: Vec<_> = server
        .requests_to("GET", "/metadata/instance")
        .iter()
        .map(|r| r.query.clone().unwrap())
        .collect();
    assert_eq!(
        imds,
        [
            "api-version=2021-08-01&extended=true",
            "api-version=2019-06-01"
        ]
    );
    let report = kvp_report(&scratch);
    assert_eq!(
        value(&report, "vm_id"),
        Some("22222222-0000-0000-0000-000000000000")
    );
    // The older document has no ppsType, so there is no pps_type field.
    assert_eq!(value(&report, "pps_type"), None);
}

#[test]
fn imds_retries_410_then_uses_the_answer() {
    let server = Server::start();
    server.on(
        "GET /metadata/instance",
        vec![
            Reply::Status(410),
            Reply::Status(500),
            Reply::json(200, IMDS_DOC),
        ],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests_to("GET", "/metadata/instance").len(), 3);
    assert_eq!(value(&kvp_report(&scratch), "vm_id"), Some(VM_ID));
}

#[test]
fn without_imds_the_vm_id_comes_from_dmi_and_the_report_says_so() {
    let server = Server::start();
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let dmi = scratch.sysroot().join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(
        dmi.join("product_uuid"),
        "12345678-ABCD-EF01-2345-6789ABCDEF01\n",
    )
    .unwrap();
    // An EFI system (Generation 2): no byte swap.
    std::fs::create_dir_all(scratch.sysroot().join("sys/firmware/efi")).unwrap();
    let run = run(
        &server,
        &scratch,
        &["--no-imds", "failure", "--reason", "boom"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(server.requests_to("GET", "/metadata/instance").is_empty());
    let report = kvp_report(&scratch);
    assert_eq!(
        value(&report, "vm_id"),
        Some("12345678-abcd-ef01-2345-6789abcdef01")
    );
    assert_eq!(value(&report, "vm_id_source"), Some("dmi"));
    assert!(run.stderr.contains("source=\"dmi\""), "{}", run.stderr);
}

#[test]
fn without_imds_or_dmi_the_vm_id_is_the_zero_guid() {
    let server = Server::start();
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &["--no-imds", "failure", "--reason", "boom"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = kvp_report(&scratch);
    assert_eq!(
        value(&report, "vm_id"),
        Some("00000000-0000-0000-0000-000000000000")
    );
    assert_eq!(value(&report, "vm_id_source"), Some("none"));
}

#[test]
fn vm_id_flag_overrides_imds_but_keeps_its_pps_type() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &["--vm-id", "given-id", "failure", "--reason", "boom"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = kvp_report(&scratch);
    assert_eq!(value(&report, "vm_id"), Some("given-id"));
    assert_eq!(value(&report, "pps_type"), Some("None"));
    assert_eq!(value(&report, "vm_id_source"), None);
}

#[test]
fn upserts_one_record_next_to_other_writers_records() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let mut other = vec![0u8; 2560];
    other[..5].copy_from_slice(b"OTHER");
    other[512..517].copy_from_slice(b"value");
    std::fs::write(scratch.pool(), &other).unwrap();
    for _ in 0..2 {
        let run = support::run(&server, &scratch, &["ready"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let records = pool_records(&scratch.pool());
    assert_eq!(records.len(), 2);
    assert_eq!(records[0], ("OTHER".into(), "value".into()));
    assert_eq!(records[1].0, "PROVISIONING_REPORT");
}

#[test]
fn long_reports_are_cut_to_what_the_host_reads() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let long = format!("detail={}", "é".repeat(3000)); // 6000 bytes
    let run = run(
        &server,
        &scratch,
        &["failure", "--reason", "boom", "--data", &long],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let bytes = std::fs::read(scratch.pool()).unwrap();
    assert_eq!(bytes.len(), 2560);
    let value_field = &bytes[512..];
    let end = value_field.iter().position(|&b| b == 0).unwrap();
    assert!((1021..=1022).contains(&end), "value is {end} bytes");
    assert!(std::str::from_utf8(&value_field[..end]).is_ok());
    let post = &server.requests_to("POST", "/provisioning/health")[0];
    let description = json_body(post)["details"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!((4095..=4096).contains(&description.len()));
    assert!(description.starts_with("result=error|reason=boom|"));
}

#[test]
fn truncate_stale_empties_a_pool_from_an_earlier_boot() {
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
    let mut old = vec![0u8; 2560];
    old[..3].copy_from_slice(b"OLD");
    std::fs::write(scratch.pool(), &old).unwrap();
    let epoch =
        std::fs::FileTimes::new().set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1));
    std::fs::File::options()
        .write(true)
        .open(scratch.pool())
        .unwrap()
        .set_times(epoch)
        .unwrap();
    let run = run(&server, &scratch, &["--truncate-stale", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let records = pool_records(&scratch.pool());
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0, "PROVISIONING_REPORT");

    // A pool written during this boot is kept.
    let run = support::run(
        &server,
        &scratch,
        &["--truncate-stale", "--kvp-key", "SECOND", "ready"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(pool_records(&scratch.pool()).len(), 2);
}

#[test]
fn kvp_write_waits_for_the_daemons_fcntl_lock_and_for_flock() {
    use rustix::fs::FlockOperation;
    for lock_kind in ["fcntl", "flock"] {
        let server = Server::start();
        server
            .with_imds()
            .on("POST /provisioning/health", vec![Reply::Status(201)]);
        let scratch = Scratch::new();
        std::fs::create_dir_all(scratch.pool().parent().unwrap()).unwrap();
        std::fs::write(scratch.pool(), b"").unwrap();
        let holder = std::fs::File::options()
            .read(true)
            .write(true)
            .open(scratch.pool())
            .unwrap();
        match lock_kind {
            "fcntl" => rustix::fs::fcntl_lock(&holder, FlockOperation::LockExclusive).unwrap(),
            _ => rustix::fs::flock(&holder, FlockOperation::LockExclusive).unwrap(),
        }
        let server_url = server.url();
        let pool = scratch.pool();
        let child = std::thread::spawn(move || {
            run_raw(
                &[
                    "--wireserver",
                    &server_url,
                    "--imds",
                    &server_url,
                    "--kvp-pool",
                    pool.to_str().unwrap(),
                    "ready",
                ],
                &[],
            )
        });
        std::thread::sleep(Duration::from_millis(800));
        assert_eq!(
            std::fs::metadata(scratch.pool()).unwrap().len(),
            0,
            "wrote through a held {lock_kind} lock"
        );
        assert!(
            server
                .requests_to("POST", "/provisioning/health")
                .is_empty(),
            "reported before KVP was written ({lock_kind})"
        );
        drop(holder); // releases the lock
        let run = child.join().unwrap();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(pool_records(&scratch.pool()).len(), 1, "{lock_kind}");
    }
}

#[test]
fn retry_after_is_ignored() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![
            Reply::WithHeaders {
                status: 503,
                headers: vec![("retry-after", "120")],
            },
            Reply::Status(201),
        ],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--retry-interval", "0.2", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 2);
    assert!(posts[1].at - posts[0].at < Duration::from_secs(5));
}

#[test]
fn response_headers_are_logged_at_debug() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::WithHeaders {
            status: 201,
            headers: vec![("x-ms-request-id", "req-42")],
        }],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--log-level", "debug", "ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("x-ms-request-id: req-42"),
        "{}",
        run.stderr
    );
    let quiet = support::run(&server, &scratch, &["ready"]);
    assert!(!quiet.stderr.contains("req-42"), "{}", quiet.stderr);
}

#[test]
fn a_dribbled_body_cannot_extend_the_budget() {
    // 403 bodies are read (to recognise throttling); this one never finishes.
    let server = DribbleServer::start("HTTP/1.1 403 Forbidden", 10_000);
    let scratch = Scratch::new();
    let run = run_raw(
        &[
            "--wireserver",
            &server.url(),
            "--no-imds",
            "--kvp-pool",
            scratch.pool().to_str().unwrap(),
            "--timeout",
            "2",
            "--retry-interval",
            "1",
            "ready",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.elapsed >= Duration::from_secs(2), "{:?}", run.elapsed);
    assert!(
        run.elapsed < Duration::from_millis(4500),
        "{:?}",
        run.elapsed
    );
    assert_eq!(server.connections(), 1);
    assert_eq!(value(&kvp_report(&scratch), "result"), Some("success"));
}

#[test]
fn a_201_whose_body_is_dribbled_past_the_budget_is_not_delivered() {
    // RFC 9112 §8: an incomplete response is not a response, so this is no accepted report.
    let server = DribbleServer::start("HTTP/1.1 201 Created", 10_000);
    let scratch = Scratch::new();
    let run = run_raw(
        &[
            "--wireserver",
            &server.url(),
            "--no-imds",
            "--kvp-pool",
            scratch.pool().to_str().unwrap(),
            "--timeout",
            "2",
            "--retry-interval",
            "1",
            "ready",
        ],
        &[],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.elapsed >= Duration::from_secs(2), "{:?}", run.elapsed);
    assert!(
        run.elapsed < Duration::from_millis(4500),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn a_201_whose_body_is_cut_short_is_retried() {
    let server = CutBodyServer::start(2);
    let scratch = Scratch::new();
    let run = run_raw(
        &[
            "--wireserver",
            &server.url(),
            "--no-imds",
            "--kvp-pool",
            scratch.pool().to_str().unwrap(),
            "--timeout",
            "10",
            "--retry-interval",
            "0.2",
            "ready",
        ],
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    // Two cut answers are transport faults, retried; the third, whole, is the delivery.
    assert_eq!(server.requests(), 3, "{}", run.stderr);
}

#[test]
fn a_pool_that_cannot_be_opened_still_leaves_the_wireserver_report() {
    // sysfs refuses new files to everyone, root included: the pool cannot be opened.
    let server = Server::start();
    server
        .with_imds()
        .on("POST /provisioning/health", vec![Reply::Status(201)]);
    let run = run_raw(
        &[
            "--wireserver",
            &server.url(),
            "--imds",
            &server.url(),
            "--kvp-pool",
            "/sys/kernel/provision-report-pool",
            "--timeout",
            "5",
            "failure",
            "--reason",
            "disk full",
        ],
        &[],
    );
    assert_eq!(run.code, 3, "{}", run.stderr);
    assert!(run.stderr.contains("KVP NOT written"), "{}", run.stderr);
    let posts = server.requests_to("POST", "/provisioning/health");
    assert_eq!(posts.len(), 1, "{:?}", server.targets());
    assert!(posts[0].body.contains("reason=disk full"), "{:?}", posts[0]);
}
