//! IMDS's per-VM rate limit over real sockets (docs/protocol.md §1.2): on by default at the
//! platform's 5 requests a second, a 429 beyond, journaled as `throttled` with status 429; a
//! scenario switches it off or sets another number; refused requests consume no scripted step.

use crate::common;

use std::time::Duration;

use fake_wireserver::{AnswerKind, EndpointId, Fake, FakeConfig, Scenario};
use serde_json::Value;

use common::{exchange, get, response};

const T: Duration = Duration::from_secs(10);
const INSTANCE: &str = "/metadata/instance?api-version=2021-08-01";

async fn fake(scenario: &str) -> Fake {
    let scenario = Scenario::from_toml_str(scenario, "test.toml").unwrap();
    Fake::start(FakeConfig::default().scenario(scenario))
        .await
        .unwrap()
}

/// Sends `n` IMDS GETs one after the other, each on its own connection; their statuses.
async fn burst(fake: &Fake, n: usize) -> Vec<u16> {
    let imds = fake.imds_addr().unwrap();
    let mut statuses = Vec::new();
    for _ in 0..n {
        let bytes = get(INSTANCE, "169.254.169.254", &[("Metadata", "true")]);
        statuses.push(response(exchange(imds, &bytes, T).await).status);
    }
    statuses
}

/// How many of the journal's IMDS requests arrived within one second of the first.
fn within_a_second(fake: &Fake) -> usize {
    let journal = fake.journal();
    let first = journal[0].at_ms;
    journal.iter().filter(|e| e.at_ms < first + 1000).count()
}

#[tokio::test]
async fn twenty_requests_in_a_second_get_429_beyond_the_fifth() {
    let fake = fake("").await;
    let statuses = burst(&fake, 20).await;
    assert_eq!(
        within_a_second(&fake),
        20,
        "the burst took over a second; nothing to judge"
    );
    assert_eq!(statuses[..5], [200; 5], "{statuses:?}");
    assert_eq!(statuses[5..], [429; 15], "{statuses:?}");

    // The answer: JSON like IMDS's other errors, no Retry-After (none is documented).
    let bytes = get(INSTANCE, "169.254.169.254", &[("Metadata", "true")]);
    let r = response(exchange(fake.imds_addr().unwrap(), &bytes, T).await);
    assert_eq!(r.status, 429);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("application/json")
    );
    assert!(r.header("retry-after").is_none());
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("Too many requests")
    );

    // The journal shows each 429 as a rate limit's refusal, on the line written out too.
    let journal = fake.journal();
    for e in &journal[5..20] {
        assert_eq!(e.endpoint, EndpointId::ImdsInstance);
        assert_eq!(
            (e.answer.kind, e.answer.status),
            (AnswerKind::Throttled, Some(429))
        );
        assert!(e.answer.step.is_none());
        let line = serde_json::to_value(e).unwrap();
        assert_eq!(line["answer"]["kind"], "throttled");
        assert_eq!(line["answer"]["status"], 429);
    }
    assert!(
        journal[..5]
            .iter()
            .all(|e| e.answer.kind == AnswerKind::Default)
    );
}

#[tokio::test]
async fn the_limit_is_per_vm_and_leaves_the_wireserver_alone() {
    let fake = fake("").await;
    let ws = fake.wireserver_addr().unwrap();
    for _ in 0..8 {
        let bytes = get(
            "/machine/?comp=goalstate",
            "168.63.129.16",
            &[("x-ms-version", "2012-11-30")],
        );
        assert_eq!(response(exchange(ws, &bytes, T).await).status, 200);
    }
    // Any IMDS endpoint counts: three versions GETs and two instance GETs fill the second.
    let imds = fake.imds_addr().unwrap();
    for target in [
        "/metadata/versions",
        "/metadata/versions",
        "/metadata/versions",
    ] {
        let bytes = get(target, "169.254.169.254", &[("Metadata", "true")]);
        assert_eq!(response(exchange(imds, &bytes, T).await).status, 200);
    }
    assert_eq!(burst(&fake, 3).await, [200, 200, 429]);
}

#[tokio::test]
async fn a_scenario_switches_the_limit_off_or_sets_it() {
    let off = fake("[imds]\nrate_limit = false\n").await;
    assert_eq!(burst(&off, 20).await, [200; 20]);

    let ten = fake("[imds]\nrate_limit = 10\n").await;
    let statuses = burst(&ten, 12).await;
    assert_eq!(within_a_second(&ten), 12, "the burst took over a second");
    assert_eq!(statuses[..10], [200; 10], "{statuses:?}");
    assert_eq!(statuses[10..], [429; 2], "{statuses:?}");

    let platform = fake("[imds]\nrate_limit = true\n").await;
    assert_eq!(burst(&platform, 6).await, [200, 200, 200, 200, 200, 429]);
}

#[tokio::test]
async fn refused_requests_consume_no_scripted_step() {
    // Three 410s scripted: the five admitted requests get them, then the document; the
    // refused ones in between do not use them up.
    let fake = fake(
        "[[endpoint]]\nid = \"imds.instance\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\ntimes = 3\n",
    )
    .await;
    let statuses = burst(&fake, 8).await;
    assert_eq!(within_a_second(&fake), 8, "the burst took over a second");
    assert_eq!(statuses, [410, 410, 410, 200, 200, 429, 429, 429]);
}
