//! A hostile or broken server: redirects that would carry the report to another host, and
//! answers that would flood `provision-report`'s log (huge headers and bodies, endless
//! retryable answers, control characters that forge log lines, oversized ids).
//!
//! The stated bounds (docs/provision-report.md, "Logs"): no server-controlled value longer than
//! its excerpt limit reaches stderr, control characters are escaped, no log line is longer
//! than [`MAX_LINE_BYTES`], and retries are logged for the first 10 attempts of a budget, then
//! only at attempts 16, 32, 64, …

use crate::support;

use support::*;

/// No stderr line is longer than this, whatever the server sends (docs/provision-report.md).
const MAX_LINE_BYTES: usize = 2048;

/// A scripted redirect to `location`.
fn redirect(status: u16, location: &str) -> Reply {
    Reply::Custom {
        status,
        headers: vec![("location".to_owned(), location.to_owned())],
        body: String::new(),
    }
}

fn assert_lines_bounded(stderr: &str) {
    for line in stderr.lines() {
        assert!(
            line.len() <= MAX_LINE_BYTES,
            "a {}-byte log line: {}…",
            line.len(),
            &line[..200.min(line.len())]
        );
    }
}

/// The start of a long stderr, for assertion messages.
fn head(stderr: &str) -> &str {
    let mut end = 2000.min(stderr.len());
    while !stderr.is_char_boundary(end) {
        end -= 1;
    }
    &stderr[..end]
}

/// Runs `args` retrying without pause for `seconds`: the report is not accepted (exit 1).
/// Returns the run and its attempt count, from the final message.
fn flood(server: &Server, scratch: &Scratch, seconds: &str, args: &[&str]) -> (Run, u32) {
    let mut full = vec!["--retry-interval", "0", "--timeout", seconds];
    full.extend_from_slice(args);
    let run = run(server, scratch, &full);
    assert_eq!(run.code, 1, "{}", head(&run.stderr));
    assert_lines_bounded(&run.stderr);
    let attempts = attempts_given_up_after(&run.stderr);
    assert!(
        attempts > 40,
        "only {attempts} attempts: the test floods nothing"
    );
    (run, attempts)
}

/// The attempt count of the final "gave up after N attempt(s)" message.
fn attempts_given_up_after(stderr: &str) -> u32 {
    let (_, rest) = stderr
        .rsplit_once("gave up after ")
        .unwrap_or_else(|| panic!("no 'gave up after' in {stderr}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Lines a budget of `attempts` attempts may log per kind of line: the first 10, then 16, 32, …
fn sampled_lines(attempts: u32) -> usize {
    let powers = (4..32)
        .filter(|&p| 1u64 << p <= u64::from(attempts))
        .count();
    10 + powers
}

#[test]
fn redirect_from_the_wireserver_sends_nothing_to_the_other_host() {
    for status in [301, 302, 303, 307, 308] {
        // The other host would accept the report: following the redirect would "succeed".
        let elsewhere = Server::start();
        elsewhere.on("POST /provisioning/health", vec![Reply::Status(201)]);
        elsewhere.on("GET /provisioning/health", vec![Reply::Status(201)]);
        let server = Server::start();
        let location = format!("{}/provisioning/health", elsewhere.url());
        server.with_imds().on(
            "POST /provisioning/health",
            vec![redirect(status, &location)],
        );
        let scratch = Scratch::new();
        let run = run(&server, &scratch, &["failure", "--reason", "boom"]);
        assert_eq!(
            elsewhere.targets(),
            Vec::<String>::new(),
            "HTTP {status}: {}",
            run.stderr
        );
        assert_eq!(run.code, 1, "HTTP {status}: {}", run.stderr);
        // A redirect is an answer that is not retried (docs/provision-report.md, "Retries").
        assert_eq!(server.requests_to("POST", "/provisioning/health").len(), 1);
        assert!(
            run.stderr.contains(&format!("HTTP {status}"))
                && run.stderr.contains("not followed")
                && run.stderr.contains(&location),
            "HTTP {status}: {}",
            run.stderr
        );
        let records = pool_records(&scratch.pool());
        assert_eq!(records.len(), 1, "the KVP record stays");
    }
}

#[test]
fn redirect_in_the_xml_flow_sends_nothing_to_the_other_host() {
    for step in [
        "GET /?comp=versions",
        "GET /machine/?comp=goalstate",
        "POST /machine?comp=health",
    ] {
        let elsewhere = Server::start();
        elsewhere.with_xml_flow(vec![Reply::Status(200)]);
        let server = Server::start();
        server.with_imds();
        let path_and_query = step.split_once(' ').unwrap().1;
        server.on(
            step,
            vec![redirect(
                302,
                &format!("{}{path_and_query}", elsewhere.url()),
            )],
        );
        server.with_xml_flow(vec![Reply::Status(200)]);
        let scratch = Scratch::new();
        let run = run(&server, &scratch, &["--protocol", "xml", "ready"]);
        assert_eq!(
            elsewhere.targets(),
            Vec::<String>::new(),
            "{step}: {}",
            run.stderr
        );
        assert_eq!(run.code, 1, "{step}: {}", run.stderr);
        assert!(run.stderr.contains("HTTP 302"), "{step}: {}", run.stderr);
    }
}

#[test]
fn redirect_from_imds_sends_nothing_to_the_other_host() {
    let elsewhere = Server::start();
    elsewhere.on(
        "GET /metadata/instance",
        vec![Reply::json(
            200,
            r#"{"compute":{"vmId":"99999999-9999-9999-9999-999999999999"}}"#,
        )],
    );
    let server = Server::start();
    server.on(
        "GET /metadata/instance",
        vec![redirect(
            307,
            &format!(
                "{}/metadata/instance?api-version=2021-08-01&extended=true",
                elsewhere.url()
            ),
        )],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["failure", "--reason", "boom"]);
    assert_eq!(elsewhere.targets(), Vec::<String>::new(), "{}", run.stderr);
    // IMDS is optional: its redirect costs the vm id, not the report.
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(server.requests_to("GET", "/metadata/instance").len(), 1);
    let report = parse_encoded(&pool_records(&scratch.pool())[0].1);
    assert_eq!(
        value(&report, "vm_id"),
        Some("00000000-0000-0000-0000-000000000000")
    );
    assert!(run.stderr.contains("not followed"), "{}", run.stderr);
}

#[test]
fn log_flood_from_many_retryable_answers_with_huge_headers_and_bodies_is_bounded() {
    let server = Server::start();
    let headers = (0..20)
        .map(|n| (format!("x-flood-{n}"), "A".repeat(4000)))
        .collect();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::Custom {
            status: 503,
            headers,
            body: "B".repeat(200_000),
        }],
    );
    let scratch = Scratch::new();
    let (run, attempts) = flood(&server, &scratch, "3", &["--log-level", "debug", "ready"]);
    let posts = server.requests_to("POST", "/provisioning/health").len();
    assert_eq!(attempts as usize, posts);
    let retry_lines = run
        .stderr
        .lines()
        .filter(|line| line.contains(" WARN ") && line.contains("HTTP 503"))
        .count();
    assert!(
        retry_lines <= sampled_lines(attempts),
        "{retry_lines} retry lines for {attempts} attempts"
    );
    let header_lines = run.stderr.matches("response headers").count();
    // The IMDS answer's headers, then the sampled 503s'.
    assert!(
        header_lines <= 1 + sampled_lines(attempts),
        "{header_lines} header lines for {attempts} attempts"
    );
    // Still says what happened: the status, the headers (clipped, saying by how much), and (in
    // `flood`) the attempt count.
    assert!(run.stderr.contains("x-flood-0: AAAA"), "{}", run.stderr);
    assert!(run.stderr.contains("more bytes]"), "{}", run.stderr);
    assert!(
        run.stderr.len() < 64 * 1024,
        "{} bytes of stderr for {attempts} attempts",
        run.stderr.len()
    );
}

#[test]
fn log_flood_from_a_410_loop_in_the_xml_flow_is_sampled() {
    let server = Server::start();
    server.with_imds().with_xml_flow(vec![Reply::Status(410)]);
    let scratch = Scratch::new();
    let (run, attempts) = flood(&server, &scratch, "2", &["--protocol", "xml", "ready"]);
    let gone_lines = run.stderr.matches("goal state changed").count();
    // One more for the final message, which names the last failure.
    assert!(
        gone_lines <= sampled_lines(attempts) + 1,
        "{gone_lines} lines about a 410 for {attempts} attempts"
    );
}

#[test]
fn log_flood_server_text_cannot_forge_log_lines() {
    let server = Server::start();
    let forged = "2026-01-01T00:00:00Z  INFO reported ready over JSON (HTTP 201)";
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::Custom {
            status: 400,
            headers: vec![("content-type".to_owned(), "text/plain".to_owned())],
            body: format!("no\r\n{forged}\n\u{1b}[2J\u{202e}"),
        }],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        !run.stderr.lines().any(|line| line.starts_with(forged)),
        "a forged line: {}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&format!("no\\r\\n{forged}\\n\\u{{1b}}[2J\\u{{202e}}")),
        "the body, escaped: {}",
        run.stderr
    );
    assert!(!run.stderr.contains('\u{1b}') && !run.stderr.contains('\u{202e}'));
}

#[test]
fn log_flood_a_huge_error_body_is_clipped_saying_by_how_much() {
    let server = Server::start();
    server.with_imds().on(
        "POST /provisioning/health",
        vec![Reply::Custom {
            status: 400,
            headers: vec![],
            body: "E".repeat(100_000),
        }],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("HTTP 400"), "{}", run.stderr);
    assert!(run.stderr.contains("EEEE"), "{}", run.stderr);
    // 100 000 bytes, of which the excerpt keeps 200.
    assert!(run.stderr.contains("[99800 more bytes]"), "{}", run.stderr);
    assert_lines_bounded(&run.stderr);
}

#[test]
fn log_flood_a_huge_vm_id_from_imds_is_refused_not_logged() {
    let server = Server::start();
    let huge = "9".repeat(200_000);
    server.on(
        "GET /metadata/instance",
        vec![Reply::json(
            200,
            format!(r#"{{"compute":{{"vmId":"{huge}"}}}}"#),
        )],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["failure", "--reason", "boom"]);
    assert_eq!(run.code, 0, "{}", head(&run.stderr));
    assert_lines_bounded(&run.stderr);
    assert!(run.stderr.len() < 16 * 1024, "{} bytes", run.stderr.len());
    let report = parse_encoded(&pool_records(&scratch.pool())[0].1);
    assert_eq!(
        value(&report, "vm_id"),
        Some("00000000-0000-0000-0000-000000000000")
    );
    assert!(run.stderr.contains("vmId"), "{}", run.stderr);
}

#[test]
fn a_vm_id_from_imds_with_a_newline_is_refused() {
    let server = Server::start();
    server.on(
        "GET /metadata/instance",
        vec![Reply::json(
            200,
            r#"{"compute":{"vmId":"abc\n2026-01-01T00:00:00Z  INFO forged"}}"#,
        )],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["ready"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("2026-01-01")),
        "{}",
        run.stderr
    );
    let report = parse_encoded(&pool_records(&scratch.pool())[0].1);
    assert_eq!(
        value(&report, "vm_id"),
        Some("00000000-0000-0000-0000-000000000000")
    );
}

#[test]
fn a_huge_pps_type_from_imds_cannot_crowd_the_report_out() {
    let server = Server::start();
    let huge = "P".repeat(100_000);
    server.on(
        "GET /metadata/instance",
        vec![Reply::json(
            200,
            format!(
                r#"{{"compute":{{"vmId":"{VM_ID}"}},"extended":{{"compute":{{"ppsType":"{huge}"}}}}}}"#
            ),
        )],
    );
    server.on("POST /provisioning/health", vec![Reply::Status(201)]);
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["failure", "--reason", "boom"]);
    assert_eq!(run.code, 0, "{}", head(&run.stderr));
    let post = &server.requests_to("POST", "/provisioning/health")[0];
    let body: serde_json::Value = serde_json::from_str(&post.body).unwrap();
    let report = parse_encoded(body["details"]["description"].as_str().unwrap());
    assert_eq!(value(&report, "vm_id"), Some(VM_ID));
    assert!(value(&report, "timestamp").is_some(), "{report:?}");
    assert_eq!(value(&report, "pps_type"), None);
    assert_lines_bounded(&run.stderr);
    assert!(run.stderr.contains("ppsType"), "{}", run.stderr);
}

#[test]
fn log_flood_huge_goal_state_ids_are_clipped_in_the_debug_log() {
    let server = Server::start();
    server.with_imds();
    server.on("GET /?comp=versions", vec![Reply::xml(200, VERSIONS_DOC)]);
    let huge = "C".repeat(100_000);
    server.on(
        "GET /machine/?comp=goalstate",
        vec![Reply::xml(
            200,
            goal_state_doc(INCARNATION).replace(CONTAINER_ID, &huge),
        )],
    );
    server.on("POST /machine?comp=health", vec![Reply::Status(200)]);
    let scratch = Scratch::new();
    let run = run(
        &server,
        &scratch,
        &["--protocol", "xml", "--log-level", "debug", "ready"],
    );
    assert_eq!(run.code, 0, "{}", head(&run.stderr));
    assert_lines_bounded(&run.stderr);
    assert!(run.stderr.contains("goal state"), "{}", run.stderr);
    assert!(run.stderr.contains("CCCC"), "{}", run.stderr);
    // The health document still echoes the goal state's own id, whole.
    let health = server.requests_to("POST", "/machine").pop().unwrap();
    assert_eq!(
        xml_texts(&health.body)["Health/Container/ContainerId"],
        huge
    );
}

#[test]
fn log_flood_a_huge_versions_list_is_clipped_in_the_error() {
    let server = Server::start();
    let versions: String = (0..5_000)
        .map(|n| format!("<Version>1999-{n:05}</Version>"))
        .collect();
    server.with_imds().on(
        "GET /?comp=versions",
        vec![Reply::xml(
            200,
            format!("<Versions><Supported>{versions}</Supported></Versions>"),
        )],
    );
    let scratch = Scratch::new();
    let run = run(&server, &scratch, &["--protocol", "xml", "ready"]);
    assert_eq!(run.code, 1, "{}", head(&run.stderr));
    assert_lines_bounded(&run.stderr);
    assert!(run.stderr.contains("2012-11-30"), "{}", run.stderr);
    assert!(run.stderr.contains("1999-00000"), "{}", run.stderr);
    assert!(run.stderr.contains("more bytes]"), "{}", run.stderr);
}

#[test]
fn log_flood_a_malformed_goal_state_repeated_is_bounded() {
    let server = Server::start();
    server.with_imds();
    server.on("GET /?comp=versions", vec![Reply::xml(200, VERSIONS_DOC)]);
    let tag = "T".repeat(50_000);
    server.on(
        "GET /machine/?comp=goalstate",
        vec![Reply::xml(
            200,
            format!("<GoalState><{tag}>\n</{tag}x></GoalState>"),
        )],
    );
    let scratch = Scratch::new();
    let (run, attempts) = flood(&server, &scratch, "2", &["--protocol", "xml", "ready"]);
    let lines = run.stderr.matches("malformed goal state XML").count();
    // One more for the final message, which names the last failure.
    assert!(
        lines <= sampled_lines(attempts) + 1,
        "{lines} lines for {attempts} attempts"
    );
}
