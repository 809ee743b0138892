//! The Rust API a test author meets: step constructors equal to the TOML they stand for, typed
//! endpoint ids, typos refused with the valid ids, `times` ranges, failures pointing at the test
//! line, and a blocking start for tests without a runtime.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use fake_wireserver::endpoint::ENDPOINT_IDS;
use fake_wireserver::{
    AnswerKind, EndPolicy, EndpointId, Expectation, Fake, FakeConfig, Preset, Scenario, Step, Times,
};

use wirecheck_test_support::http::wire_text as send;

const GOALSTATE: &str = "GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\n\
                         x-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n";

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
fn every_step_constructor_is_the_step_its_toml_parses_to() {
    let toml = r#"
        [[endpoint]]
        id = "wireserver.goalstate"
        end = "cycle"
        [[endpoint.step]]
        kind = "hang"
        [[endpoint.step]]
        kind = "delay"
        seconds = 1.5
        [[endpoint.step]]
        kind = "delay"
        seconds = 0.25
        status = 503
        [[endpoint.step]]
        kind = "reset"
        times = 2
        [[endpoint.step]]
        kind = "close"
        probability = 0.5
        [[endpoint.step]]
        kind = "malformed"
        bytes = "HTTP/1.1 2OO OK\r\n"
        [[endpoint.step]]
        kind = "partial"
        bytes_sent = 40
        [[endpoint.step]]
        kind = "slow"
        chunk = 8
        interval = 0.1
        [[endpoint.step]]
        kind = "respond"
        preset = "throttled"
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
        status = 404
        headers = [["Retry-After", "1"]]
        body = "nope"
    "#;
    let parsed = Scenario::from_toml_str(toml, "api.toml").unwrap();
    let built = Scenario::new().endpoint(
        EndpointId::WireserverGoalstate,
        EndPolicy::Cycle,
        vec![
            Step::hang(),
            Step::delay(Duration::from_millis(1500)),
            Step::delay(Duration::from_millis(250)).status(503),
            Step::reset().times(2),
            Step::close().probability(0.5),
            Step::malformed("HTTP/1.1 2OO OK\r\n"),
            Step::partial(40),
            Step::slow(8, Duration::from_millis(100)),
            Step::throttled(),
            Step::gone(),
            Step::internal_error(),
            Step::unavailable(),
            Step::too_many_requests(),
            Step::respond(404).header("Retry-After", "1").body("nope"),
        ],
    );
    assert_eq!(built.endpoints, parsed.endpoints);
    // Every kind the file format knows has a constructor above.
    let kinds: Vec<AnswerKind> = built.endpoints[0]
        .steps
        .iter()
        .map(|s| s.action.kind())
        .fold(Vec::new(), |mut seen, k| {
            if !seen.contains(&k) {
                seen.push(k);
            }
            seen
        });
    let mut every = AnswerKind::STEP_KINDS.to_vec();
    every.retain(|k| !kinds.contains(k));
    assert!(every.is_empty(), "no constructor above for {every:?}");
    assert_eq!(Step::throttled(), Step::preset(Preset::Throttled));
}

#[test]
fn a_reply_part_on_a_step_without_a_reply_panics_naming_the_kind() {
    let payload =
        std::panic::catch_unwind(|| Step::hang().status(500)).expect_err("hang has no reply");
    let message = panic_message(payload);
    assert_eq!(message, "Step::status: a \"hang\" step sends no reply");
}

#[test]
fn endpoint_ids_are_the_architecture_table_and_serialize_as_their_strings() {
    let strings: Vec<&str> = EndpointId::ALL.iter().map(|id| id.as_str()).collect();
    assert_eq!(strings, ENDPOINT_IDS);
    for id in EndpointId::ALL {
        assert_eq!(id.as_str().parse::<EndpointId>(), Ok(id));
        assert_eq!(id.to_string(), id.as_str());
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{}\"", id.as_str()));
        assert_eq!(serde_json::from_str::<EndpointId>(&json).unwrap(), id);
    }
    let err = serde_json::from_str::<EndpointId>("\"imds.instanse\"").unwrap_err();
    assert!(err.to_string().contains("expected one of"), "{err}");
}

#[test]
fn a_typo_in_a_string_id_is_an_error_listing_the_valid_ids() {
    let all = ENDPOINT_IDS.join(", ");
    let err = "wireserver.goalstat".parse::<EndpointId>().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("\"wireserver.goalstat\" matches no endpoint id; expected one of {all}")
    );
    // The same message the scenario file gives for the same mistake.
    let toml = "[[endpoint]]\nid = \"wireserver.goalstat\"\n[[endpoint.step]]\nkind = \"hang\"\n";
    let file_err = Scenario::from_toml_str(toml, "typo.toml").unwrap_err();
    assert!(
        file_err.to_string().ends_with(&err.to_string()),
        "{file_err}"
    );

    let built = Scenario::new().try_endpoint("wireserver.goalstat", EndPolicy::Default, vec![]);
    assert_eq!(built.unwrap_err(), err);
    assert_eq!(
        Expectation::try_requests("wireserver.goalstat").unwrap_err(),
        err
    );
    // Globs that match something are fine, as in files.
    assert!(Expectation::try_requests("wireserver.health.*").is_ok());
    assert!(Expectation::try_requests("nothing.*").is_err());

    let panic = std::panic::catch_unwind(|| {
        Scenario::new().endpoint("imds.instanse", EndPolicy::Default, vec![Step::hang()])
    })
    .unwrap_err();
    let message = panic_message(panic);
    assert!(message.starts_with("Scenario::endpoint: \"imds.instanse\" matches no endpoint id; expected one of wireserver.versions"), "{message}");
    let panic = std::panic::catch_unwind(|| Expectation::requests("imds.instanse")).unwrap_err();
    assert!(panic_message(panic).contains(&all));
    let panic = std::panic::catch_unwind(|| {
        Scenario::new().rate_limit(1, 1.0, ["wireserver.*", "imds.instanse"])
    })
    .unwrap_err();
    assert!(panic_message(panic).starts_with(
        "Scenario::rate_limit: \"imds.instanse\" matches no endpoint id; expected one of"
    ));
    let limited = Scenario::new().rate_limit(1, 1.0, [EndpointId::WireserverGoalstate]);
    assert_eq!(
        limited.rate_limit.unwrap().endpoints,
        ["wireserver.goalstate"]
    );
}

#[test]
fn times_takes_counts_and_ranges() {
    assert_eq!(Times::from(2), Times::Exactly(2));
    assert_eq!(Times::from(1..=3), Times::Between(1, 3));
    assert_eq!(Times::from(2..), Times::AtLeast(2));
    assert_eq!(Times::from(..=4), Times::AtMost(4));

    let fake = Fake::start_blocking(FakeConfig::default()).unwrap();
    let ws = fake.wireserver_addr().unwrap();
    for _ in 0..2 {
        assert!(send(ws, GOALSTATE).starts_with("HTTP/1.1 200 OK"));
    }
    let journal = fake.journal();
    let check = |e: Expectation| e.check(&journal);
    let goalstate = || Expectation::requests(EndpointId::WireserverGoalstate);
    assert_eq!(check(goalstate().times(1..=3)), Ok(()));
    assert_eq!(check(goalstate().times(2)), Ok(()));
    assert_eq!(check(goalstate().times(2..)), Ok(()));
    assert_eq!(check(goalstate().times(..=2)), Ok(()));
    let err = check(goalstate().times(3..=5)).unwrap_err();
    assert!(
        err.starts_with("expected between 3 and 5 request(s) to wireserver.goalstate, got 2"),
        "{err}"
    );
    assert!(check(goalstate().times(3..)).is_err());
    assert!(check(goalstate().times(..=1)).is_err());
    assert!(check(goalstate().times(0..=1)).is_err());
    assert!(check(Expectation::health_reports(0..=1)).is_ok());
    assert!(check(Expectation::health_reports(1..)).is_err());
}

#[test]
fn a_failed_expectation_names_the_test_line_that_set_it() {
    let fake = Fake::start_blocking(FakeConfig::default()).unwrap();
    let ws = fake.wireserver_addr().unwrap();
    assert!(send(ws, GOALSTATE).starts_with("HTTP/1.1 200 OK"));
    fake.expect(Expectation::requests(EndpointId::WireserverGoalstate).times(1)); // met
    let line = line!() + 1;
    fake.expect(Expectation::requests(EndpointId::WireserverVersions));
    let panic = std::panic::catch_unwind(AssertUnwindSafe(|| drop(fake))).unwrap_err();
    let message = panic_message(panic);
    let at = format!("{}:{line}:", file!());
    assert!(
        message.starts_with(&format!("fake-wireserver: 1 expectation(s) not met:\n{at}")),
        "{message}"
    );
    assert!(
        message.contains(": expected at least 1 request(s) to wireserver.versions, got 0"),
        "{message}"
    );
    assert!(!message.contains("wireserver.goalstate, got"), "{message}");
}

/// A plain `#[test]`: no runtime anywhere but the fake's own.
#[test]
fn start_blocking_serves_a_scenario_without_a_runtime() {
    let scenario = Scenario::new().endpoint(
        EndpointId::WireserverGoalstate,
        EndPolicy::Default,
        vec![Step::throttled()],
    );
    let fake = Fake::start_blocking(FakeConfig::default().scenario(scenario)).unwrap();
    assert!(tokio::runtime::Handle::try_current().is_err());
    fake.expect(Expectation::requests("wireserver.*").answered(403).times(1));
    let ws = fake.wireserver_addr().unwrap();
    let first = send(ws, GOALSTATE);
    assert!(first.starts_with("HTTP/1.1 403 Forbidden"), "{first}");
    assert!(first.contains("RequestRateLimitExceeded"), "{first}");
    let second = send(ws, GOALSTATE);
    assert!(second.starts_with("HTTP/1.1 200 OK"), "{second}");
    let journal = fake.journal();
    assert_eq!(journal.len(), 2);
    assert_eq!(journal[0].endpoint, EndpointId::WireserverGoalstate);
    assert_eq!(journal[0].answer.status, Some(403));
    assert_eq!(fake.verify(), Ok(()));
    drop(fake);
    // The runtime is gone with the handle: the port no longer answers.
    assert!(std::net::TcpStream::connect(ws).is_err());
}

#[tokio::test]
async fn start_blocking_inside_a_runtime_is_an_error_not_a_panic() {
    let err = Fake::start_blocking(FakeConfig::default()).err().unwrap();
    assert_eq!(
        err.to_string(),
        "cannot start the fake's runtime: Fake::start_blocking was called inside a tokio runtime; \
         use Fake::start(config).await there"
    );
}
