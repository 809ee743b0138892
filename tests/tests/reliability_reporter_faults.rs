//! `provision-report` under every kind of step the fake can act out: each scripted status, a
//! delay past the request timeout, hang, reset, close, malformed bytes, a partial body, a
//! dribbled body, and a port nobody listens on (`every_step_kind_is_played` holds the table to
//! the fake's step kinds). Each fault is played on every request of the wireserver (JSON flow
//! and XML flow), and once more on IMDS as well.
//!
//! Every fault repeats for the whole run, so no report can get through: the reporter must end
//! within its budget plus one retry interval (generous margin for a loaded machine), never
//! panic, exit 1 ("not reported") and nothing else, and leave its `PROVISIONING_REPORT` record
//! in the pool (it is written before any HTTP call). A 2xx whose body is cut or dribbled past
//! the request timeout is an incomplete response (RFC 9112 §8), a transport fault like the
//! others, not a delivery.

// A test reads top to bottom as the story it checks; the length rule is for the code it tests.
#![allow(clippy::too_many_lines)]

mod reliability_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fake_wireserver::{AnswerKind, Fake, FakeConfig, Scenario, Service};
use reliability_support::{provision_report, read_pool, run_with_hard_stop, runtime};
use wirecheck_test_support::net::ClosedPort;

const BUDGET: f64 = 2.0;
const RETRY_INTERVAL: f64 = 0.2;
const REQUEST_TIMEOUT: f64 = 0.5;
const IMDS_BUDGET: f64 = 1.0;
/// Process start, scheduling on a shared machine, the last attempt's cleanup.
const MARGIN: f64 = 1.5;

/// A fault class: the `[[endpoint.step]]` table that plays it, or a closed port.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Step {
        /// `answer.kind` the journal records when the fault is played.
        kind: AnswerKind,
        step: &'static str,
    },
    Unreachable,
}

/// Where the fault is played.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    /// Every wireserver endpoint; the report goes over the JSON flow (`ready`).
    WireserverJson,
    /// Every wireserver endpoint; the XML flow (versions, goal state, health), a `failure`.
    WireserverXml,
    /// IMDS as well as the wireserver (JSON flow, `ready`).
    ImdsAndWireserver,
}

fn scenario(fault: Fault, target: Target) -> Scenario {
    let Fault::Step { step, .. } = fault else {
        return Scenario::new();
    };
    let mut text = String::new();
    let patterns: &[&str] = match target {
        Target::ImdsAndWireserver => &["imds.*", "wireserver.*"],
        _ => &["wireserver.*"],
    };
    for pattern in patterns {
        text.push_str(&format!(
            "[[endpoint]]\nid = \"{pattern}\"\nend = \"repeat-last\"\n[[endpoint.step]]\n{step}\n"
        ));
    }
    Scenario::from_toml_str(&text, "reliability_reporter_faults.rs")
        .unwrap_or_else(|e| panic!("scenario for {fault:?}: {e}"))
}

fn secs(x: f64) -> String {
    format!("{x}")
}

/// Runs one reporter against one fault and checks everything the module promises.
fn check(fault: Fault, target: Target, fake: &Fake, dir: &Path) {
    let pool = dir.join("kvp_pool_1");
    // Held until the reporter has run: nothing else can take the port meanwhile.
    let closed = ClosedPort::new();
    let (wireserver, imds) = match fault {
        Fault::Unreachable if target == Target::ImdsAndWireserver => (closed.url(), closed.url()),
        Fault::Unreachable => (closed.url(), fake.imds_url()),
        Fault::Step { .. } => (fake.wireserver_url(), fake.imds_url()),
    };
    let mut cmd = Command::new(provision_report());
    match target {
        Target::WireserverXml => {
            cmd.args(["failure", "--reason", "reliability check", "--data", "k=v"]);
            cmd.arg("--protocol=xml");
        }
        _ => {
            cmd.args(["ready", "--protocol=json"]);
        }
    }
    cmd.arg(format!("--wireserver={wireserver}"))
        .arg(format!("--imds={imds}"))
        .arg(format!("--kvp-pool={}", pool.display()))
        .arg(format!("--timeout={}", secs(BUDGET)))
        .arg(format!("--retry-interval={}", secs(RETRY_INTERVAL)))
        .arg(format!("--request-timeout={}", secs(REQUEST_TIMEOUT)))
        .arg(format!("--imds-timeout={}", secs(IMDS_BUDGET)))
        .arg("--log-level=debug")
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY");
    for (k, _) in std::env::vars() {
        if k.starts_with("PROVISION_REPORT_") {
            cmd.env_remove(k);
        }
    }
    let finished = run_with_hard_stop(&mut cmd, Duration::from_secs(30));
    let what = format!("{fault:?} on {target:?}");
    eprintln!(
        "{what}: exit {:?} after {:.2} s",
        finished.code(),
        finished.elapsed.as_secs_f64()
    );

    // Budget: the wireserver loop, plus the IMDS loop when IMDS is faulted too.
    let mut bound = BUDGET + RETRY_INTERVAL + MARGIN;
    if target == Target::ImdsAndWireserver {
        bound += IMDS_BUDGET + RETRY_INTERVAL;
    }
    assert!(
        finished.elapsed.as_secs_f64() <= bound,
        "{what}: ran {:.2} s, more than the budget + one interval + margin ({bound:.1} s)\n{}",
        finished.elapsed.as_secs_f64(),
        finished.stderr
    );
    assert!(
        !finished.stderr.contains("panicked"),
        "{what}: the reporter panicked:\n{}",
        finished.stderr
    );
    assert_eq!(
        finished.code(),
        Some(1),
        "{what}: expected exit 1 (not reported):\n{}",
        finished.stderr
    );

    let view = read_pool(&pool);
    let (_, report) = view.provisioning_report.as_ref().unwrap_or_else(|| {
        panic!(
            "{what}: no PROVISIONING_REPORT in the pool ({} records)\n{}",
            view.records.len(),
            finished.stderr
        )
    });
    let result = report
        .fields
        .iter()
        .find(|(k, _)| k == "result")
        .map(|(_, v)| v.as_str());
    let expected = if target == Target::WireserverXml {
        "error"
    } else {
        "success"
    };
    assert_eq!(
        result,
        Some(expected),
        "{what}: PROVISIONING_REPORT fields {:?}",
        report.fields
    );

    // The fault was really played (not bypassed by an earlier error).
    if let Fault::Step { kind, .. } = fault {
        let (service, prefix) = if target == Target::ImdsAndWireserver {
            (Service::Imds, "imds.")
        } else {
            (Service::Wireserver, "wireserver.")
        };
        let journal = fake.journal();
        assert!(
            journal
                .iter()
                .any(|e| e.endpoint.service() == Some(service) && e.answer.kind == kind),
            "{what}: no {prefix}* request was answered with {kind}; journal: {:?}",
            journal
                .iter()
                .map(|e| (e.endpoint.as_str(), e.answer.kind.as_str(), e.answer.status))
                .collect::<Vec<_>>()
        );
    }
}

/// The three placements of one fault, run side by side.
fn fault_everywhere(fault: Fault) {
    let rt = runtime();
    let targets = [
        Target::WireserverJson,
        Target::WireserverXml,
        Target::ImdsAndWireserver,
    ];
    let fakes: Vec<Fake> = targets
        .iter()
        .map(|t| {
            rt.block_on(Fake::start(
                FakeConfig::default().scenario(scenario(fault, *t)),
            ))
            .expect("fake starts")
        })
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = targets
            .iter()
            .zip(&fakes)
            .map(|(target, fake)| {
                s.spawn(move || {
                    let dir = tempfile::tempdir().expect("tempdir");
                    check(fault, *target, fake, dir.path());
                })
            })
            .collect();
        let mut failures = Vec::new();
        for h in handles {
            if let Err(panic) = h.join() {
                failures.push(
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                );
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    });
    drop(fakes);
}

/// A delay past the request timeout: the default answer, but twice as late as the reporter
/// waits for one.
const DELAY: &str = "kind = \"delay\"\nseconds = 1.0";
const _: () = assert!(
    REQUEST_TIMEOUT * 2.0 <= 1.0,
    "DELAY must outlast the request timeout"
);

/// The fault tests, one per row, and [`FAULTS`], the list of what they play: one table, so a
/// kind is in the list only when a test plays it.
macro_rules! faults {
    ($($(#[doc = $doc:literal])* $name:ident: $kind:ident, $step:expr;)+) => {
        const FAULTS: &[Fault] = &[$(Fault::Step { kind: AnswerKind::$kind, step: $step }),+];
        $(
            $(#[doc = $doc])*
            #[test]
            fn $name() {
                fault_everywhere(Fault::Step { kind: AnswerKind::$kind, step: $step });
            }
        )+
    };
}

faults! {
    status_401: Respond, "kind = \"respond\"\nstatus = 401";
    status_403_platform_throttle: Respond, "kind = \"respond\"\npreset = \"throttled\"";
    status_404: Respond, "kind = \"respond\"\nstatus = 404";
    status_410: Respond, "kind = \"respond\"\npreset = \"gone\"";
    status_429: Respond, "kind = \"respond\"\npreset = \"too-many-requests\"";
    status_500: Respond, "kind = \"respond\"\npreset = \"internal-error\"";
    status_503: Respond, "kind = \"respond\"\npreset = \"unavailable\"";
    /// Each attempt times out, so no report is ever delivered.
    delay_past_the_request_timeout: Delay, DELAY;
    hang: Hang, "kind = \"hang\"";
    reset: Reset, "kind = \"reset\"";
    close_without_reply: Close, "kind = \"close\"";
    malformed_bytes: Malformed,
        "kind = \"malformed\"\nbytes = \"HTTP/1.1 2OO OK\\r\\nContent-Length: -5\\r\\n\\r\\n\"";
    /// A complete 200 head with a body cut after 3 of its 16 bytes, on every attempt: an
    /// incomplete response, so no flow may count it as accepted.
    partial_body: Partial,
        "kind = \"partial\"\nbytes_sent = 3\nstatus = 200\nbody = \"0123456789abcdef\"";
    /// One byte a second of a 64-byte body, on every attempt: the 200 head comes at once but
    /// the body cannot finish within the request timeout, so it is never a delivery.
    slow_body: Slow,
        "kind = \"slow\"\nchunk = 1\ninterval = 1.0\nstatus = 200\nbody = \"________________________________________________________________\"";
}

#[test]
fn every_step_kind_is_played() {
    let played: Vec<AnswerKind> = FAULTS
        .iter()
        .filter_map(|f| match f {
            Fault::Step { kind, .. } => Some(*kind),
            Fault::Unreachable => None,
        })
        .collect();
    let missing: Vec<_> = AnswerKind::STEP_KINDS
        .into_iter()
        .filter(|k| !played.contains(k))
        .collect();
    assert!(missing.is_empty(), "no fault test plays {missing:?}");
}

#[test]
fn unreachable_port() {
    fault_everywhere(Fault::Unreachable);
}
