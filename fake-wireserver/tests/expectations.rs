//! Expectations are verified when the handle drops (wiremock style), with a message that says
//! what was expected and what arrived.

use crate::common;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use fake_wireserver::{Expectation, Fake, FakeConfig};

use common::{exchange, goalstate_get, post, response};

const T: Duration = Duration::from_secs(10);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn ready_json() -> Vec<u8> {
    post(
        "/provisioning/health",
        "168.63.129.16",
        &[("Content-Type", "application/json")],
        r#"{"state":"Ready"}"#,
    )
}

#[test]
fn met_expectations_pass_silently_on_drop() {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    fake.expect(Expectation::health_reports(1).state("Ready"));
    fake.expect(Expectation::requests("wireserver.goalstate").times(2));
    fake.expect(Expectation::requests("imds.*").never());
    fake.expect(Expectation::requests("wireserver.*").answered(200).times(2));
    fake.expect(Expectation::requests("wireserver.*").between(3, 4));
    let ws = fake.wireserver_addr().unwrap();
    rt.block_on(async {
        response(exchange(ws, &goalstate_get(), T).await);
        response(exchange(ws, &goalstate_get(), T).await);
        response(exchange(ws, &ready_json(), T).await);
    });
    assert_eq!(fake.verify(), Ok(()));
    drop(fake);
}

#[test]
fn unmet_expectation_panics_on_drop_with_a_clear_message() {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    let line = line!() + 1;
    fake.expect(Expectation::health_reports(1).state("NotReady"));
    let ws = fake.wireserver_addr().unwrap();
    rt.block_on(async {
        response(exchange(ws, &ready_json(), T).await);
    });
    let panic = std::panic::catch_unwind(AssertUnwindSafe(|| drop(fake))).unwrap_err();
    let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    // The line that set the expectation comes first, as a compiler would name it.
    assert_eq!(
        message,
        format!(
            "fake-wireserver: 1 expectation(s) not met:\n{}:{line}:10: \
         expected exactly 1 health report(s) with state NotReady, got 0; the fake received:\n  \
         #1 POST /provisioning/health -> wireserver.health.json 201 [Ready]",
            file!()
        )
    );
}

#[test]
fn verify_reports_every_unmet_expectation() {
    let rt = runtime();
    let fake = rt.block_on(Fake::start(FakeConfig::default())).unwrap();
    fake.expect(Expectation::requests("wireserver.goalstate"));
    fake.expect(Expectation::health_reports(2).substatus("ProvisioningFailed"));
    let err = fake.verify().unwrap_err();
    assert!(
        err.starts_with("fake-wireserver: 2 expectation(s) not met:"),
        "{err}"
    );
    assert!(
        err.contains("expected at least 1 request(s) to wireserver.goalstate, got 0"),
        "{err}"
    );
    assert!(err.contains("(nothing)"), "{err}");
    // Satisfy them, then the drop is quiet.
    let ws = fake.wireserver_addr().unwrap();
    rt.block_on(async {
        response(exchange(ws, &goalstate_get(), T).await);
        for _ in 0..2 {
            let body = r#"{"details":{"description":"x","subStatus":"ProvisioningFailed"},"state":"NotReady"}"#;
            let req = post("/provisioning/health", "168.63.129.16", &[("Content-Type", "application/json")], body);
            response(exchange(ws, &req, T).await);
        }
    });
    assert_eq!(fake.verify(), Ok(()));
}
