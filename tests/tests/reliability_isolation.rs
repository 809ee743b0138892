//! Isolation and safety:
//!
//! * a symlink or a directory at the KVP pool path is not written by `provision-report` (the
//!   link's target and the directory untouched) yet the health report still goes out (exit 3,
//!   "reported, KVP failed"): what sits at the pool path at boot is the machine's state;
//! * the fake's admin API cannot be reached through the agent-facing listeners or proxy mode;
//! * an encoded report built by `provision-report` from hostile values (`|`, quotes, newlines,
//!   `=`) never parses (oracle) into extra or different fields, in KVP or in the health report.

mod reliability_support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_wireserver::{Fake, FakeConfig};
use proptest::prelude::*;
use reliability_support::{
    EXCHANGE_TIMEOUT, FakeProcess, Finished, provision_report, read_pool, run_with_hard_stop,
    runtime,
};
use wirecheck_oracle::EncodedReport;
use wirecheck_oracle::encoded::{Mode, parse};
use wirecheck_test_support::http::{Outcome, exchange_blocking};

const VM_ID: &str = "0e5a1c6d-7b2f-4c3e-9d8a-1f2e3d4c5b6a";

fn reporter(pool: &Path, fake: &Fake, protocol: &str, action: &[&str]) -> Finished {
    run_with_hard_stop(
        Command::new(provision_report())
            .args(action)
            .arg(format!("--kvp-pool={}", pool.display()))
            .arg(format!("--wireserver={}", fake.wireserver_url()))
            .arg(format!("--protocol={protocol}"))
            .args(["--no-imds", &format!("--vm-id={VM_ID}")])
            .args(["--timeout=5", "--retry-interval=0.2", "--request-timeout=2"]),
        Duration::from_secs(30),
    )
}

// ---------------------------------------------------------------------------------------------
// The pool path

fn assert_reported_without_kvp(what: &str, finished: &Finished, fake: &Fake) {
    assert_eq!(
        finished.code(),
        Some(3),
        "{what}: expected exit 3 (reported, KVP failed):\n{}",
        finished.stderr
    );
    assert!(
        finished.stderr.contains("KVP NOT written"),
        "{what}: the log should say the KVP record was not written:\n{}",
        finished.stderr
    );
    let health = fake
        .journal()
        .iter()
        .filter(|e| e.endpoint.is_health())
        .count();
    assert_eq!(
        health,
        1,
        "{what}: the health report must still go out once; the fake got {:?}",
        fake.journal()
            .iter()
            .map(|e| format!("{} {}", e.method, e.target))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_symlink_at_the_pool_path_is_not_followed_and_the_report_still_goes_out() {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("precious");
    std::fs::write(&target, b"not a pool: must stay as it is").unwrap();
    let before = std::fs::metadata(&target).unwrap().modified().unwrap();
    let link = dir.path().join("kvp_pool_1");
    symlink(&target, &link).unwrap();

    let finished = reporter(&link, &fake, "json", &["ready"]);
    assert_reported_without_kvp("symlink to a file", &finished, &fake);
    assert_eq!(
        std::fs::read(&target).unwrap(),
        b"not a pool: must stay as it is"
    );
    assert_eq!(
        std::fs::metadata(&target).unwrap().modified().unwrap(),
        before
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // A dangling link: its target must not be created.
    let missing = dir.path().join("missing");
    let dangling = dir.path().join("kvp_pool_2");
    symlink(&missing, &dangling).unwrap();
    fake.reset();
    let finished = reporter(&dangling, &fake, "json", &["failure", "--reason", "x"]);
    assert_reported_without_kvp("dangling symlink", &finished, &fake);
    assert!(!missing.exists(), "the dangling link's target was created");
}

#[test]
fn a_directory_at_the_pool_path_is_left_empty_and_the_report_still_goes_out() {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("kvp_pool_1");
    std::fs::create_dir(&pool).unwrap();
    let finished = reporter(&pool, &fake, "xml", &["ready"]);
    assert_reported_without_kvp("directory", &finished, &fake);
    assert_eq!(std::fs::read_dir(&pool).unwrap().count(), 0);
}

// ---------------------------------------------------------------------------------------------
// The admin API

#[test]
fn the_admin_api_is_not_reachable_through_agent_facing_listeners_or_the_proxy() {
    let fake = FakeProcess::start(&["--proxy", "127.0.0.1:0"]);
    let a = fake.addrs.clone();
    let proxy = a.proxy.expect("proxy listener");
    // A scenario that, if it were ever loaded, would break the goal state.
    let scenario = "[[endpoint]]\nid = \"wireserver.goalstate\"\nend = \"repeat-last\"\n\
                    [[endpoint.step]]\nkind = \"respond\"\nstatus = 500\n";
    let admin_requests = |host: &str, absolute: bool| -> Vec<Vec<u8>> {
        let target = |path: &str| {
            if absolute {
                format!("http://{host}{path}")
            } else {
                path.to_owned()
            }
        };
        vec![
            format!(
                "GET {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n",
                target("/__admin/journal")
            ),
            format!(
                "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                target("/__admin/reset")
            ),
            format!(
                "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/toml\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{scenario}",
                target("/__admin/scenario"),
                scenario.len()
            ),
        ]
        .into_iter()
        .map(String::into_bytes)
        .collect()
    };
    let admin_host = a.admin.to_string();
    let mut attempts: Vec<(String, std::net::SocketAddr, Vec<u8>)> = Vec::new();
    for (name, listener) in [("wireserver", a.wireserver), ("imds", a.imds)] {
        for host in ["168.63.129.16", "169.254.169.254", admin_host.as_str()] {
            for req in admin_requests(host, false) {
                attempts.push((format!("{name}, Host {host}"), listener, req));
            }
        }
    }
    for host in [
        "168.63.129.16",
        "169.254.169.254",
        admin_host.as_str(),
        "localhost",
    ] {
        for absolute in [false, true] {
            for req in admin_requests(host, absolute) {
                attempts.push((
                    format!("proxy, Host {host}, absolute-form {absolute}"),
                    proxy,
                    req,
                ));
            }
        }
    }
    for (what, listener, req) in &attempts {
        let first_line = String::from_utf8_lossy(req.split(|b| *b == b'\r').next().unwrap());
        let answer = exchange_blocking(*listener, req, EXCHANGE_TIMEOUT);
        let Outcome::Response(answer) = answer else {
            panic!("{what}: `{first_line}` got no answer: {answer:?}");
        };
        let (status, text) = (answer.status, answer.raw_text());
        assert!(
            (400..600).contains(&status),
            "{what}: `{first_line}` got {status}:\n{text}"
        );
        assert!(
            !text.contains("\"seq\""),
            "{what}: `{first_line}` leaked journal entries:\n{text}"
        );
    }

    // Nothing was reset or loaded: the journal (on the admin listener) holds every attempt, and
    // the goal state is still served.
    let journal = a.admin_get("/__admin/journal");
    assert_eq!(journal.status, 200, "{}", journal.raw_text());
    let entries: Vec<serde_json::Value> =
        serde_json::from_slice(&journal.body).expect("the admin journal is a JSON array");
    assert_eq!(
        entries.len(),
        attempts.len(),
        "the journal lost entries: a reset got through"
    );
    reliability_support::assert_still_serving(&a);
}

// ---------------------------------------------------------------------------------------------
// Hostile values in encoded reports

/// Runs `provision-report failure` with `reason` and `data` over `protocol`, then checks that
/// both the KVP record and the health report's description parse into exactly the fields given.
fn check_hostile(
    rt: &tokio::runtime::Runtime,
    protocol: &str,
    reason: &str,
    data: &[(&str, &str)],
) {
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("kvp_pool_1");
    let mut action = vec![
        "failure".to_owned(),
        "--reason".to_owned(),
        reason.to_owned(),
    ];
    for (k, v) in data {
        action.push(format!("--data={k}={v}"));
    }
    let action: Vec<&str> = action.iter().map(String::as_str).collect();
    let finished = reporter(&pool, &fake, protocol, &action);
    let what = format!("{protocol}, reason {reason:?}, data {data:?}");
    assert_eq!(finished.code(), Some(0), "{what}:\n{}", finished.stderr);

    let view = read_pool(&pool);
    let (_, kvp_report) = view
        .provisioning_report
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no PROVISIONING_REPORT"));
    assert_fields(&format!("{what} (KVP)"), kvp_report, reason, data);
    // The oracle's lenient parse is the strict one's superset; parse the raw value again in
    // strict mode to be sure quoting follows the dialect.
    let raw = &view
        .records
        .iter()
        .rev()
        .find(|r| r.key == "PROVISIONING_REPORT")
        .unwrap()
        .value;
    let strict = parse(raw, Mode::Strict)
        .unwrap_or_else(|e| panic!("{what}: KVP value fails the strict parse ({e}): {raw:?}"));
    assert_fields(&format!("{what} (KVP, strict)"), &strict, reason, data);

    let journal = fake.journal();
    let health = journal
        .iter()
        .find_map(|e| e.report.as_ref())
        .unwrap_or_else(|| panic!("{what}: no health report reached the fake"));
    let encoded = health
        .encoded
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: the health description is not an encoded report"));
    assert_fields(
        &format!("{what} (health {protocol})"),
        encoded,
        reason,
        data,
    );
}

fn assert_fields(what: &str, report: &EncodedReport, reason: &str, data: &[(&str, &str)]) {
    assert!(!report.truncated, "{what}: truncated: {:?}", report.fields);
    let keys: Vec<&str> = report.fields.iter().map(|(k, _)| k.as_str()).collect();
    let mut expected: Vec<&str> = vec!["result", "reason", "agent"];
    expected.extend(data.iter().map(|(k, _)| *k));
    expected.extend(["vm_id", "timestamp", "documentation_url"]);
    assert_eq!(keys, expected, "{what}: fields {:?}", report.fields);
    let value = |k: &str| {
        report
            .fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(value("result"), Some("error"), "{what}");
    assert_eq!(value("reason"), Some(reason), "{what}");
    assert_eq!(value("vm_id"), Some(VM_ID), "{what}");
    for (k, v) in data {
        assert_eq!(value(k), Some(*v), "{what}: field {k}");
    }
}

#[test]
fn hostile_values_never_become_extra_or_different_fields() {
    let rt = runtime();
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "boom|vm_id=evil|result=success",
            &[("detail", "a|b"), ("vm", "vm_id=evil")],
        ),
        (
            "it's \"quoted\" and 'single'",
            &[("q", "he said \"hi\""), ("s", "can't"), ("both", "'\"'\"")],
        ),
        (
            "line1\nline2\r\nline3=x",
            &[("nl", "\n"), ("crlf", "a\r\nb"), ("eq", "x=y=z")],
        ),
        (
            "'starts with a quote",
            &[("lead", "'x"), ("trail", "x'"), ("pipe_only", "|")],
        ),
        (
            "ends with a quote'",
            &[("quotes", "''"), ("dq", "\"\""), ("u", "é ü \u{1F600}")],
        ),
    ];
    for protocol in ["json", "xml"] {
        for (reason, data) in cases {
            check_hostile(&rt, protocol, reason, data);
        }
    }
}

fn hostile_text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('|'),
            Just('\''),
            Just('"'),
            Just('\n'),
            Just('\r'),
            Just('='),
            Just('\\'),
            Just(' '),
            Just('a'),
            Just('é'),
        ],
        1..24,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_hostile_values_keep_their_fields(
        reason in hostile_text().prop_filter("a reason with text", |r| !r.trim().is_empty()),
        first in hostile_text(),
        second in hostile_text(),
        xml in any::<bool>(),
    ) {
        let rt = runtime();
        check_hostile(
            &rt,
            if xml { "xml" } else { "json" },
            &reason,
            &[("first", &first), ("second", &second)],
        );
    }
}
