//! What the Rust API refuses, and where: a scenario built in code obeys the rules of a scenario
//! file (checked when the fake starts or loads it, with the parser's wording), builder methods
//! given an impossible argument panic at the test's line, and expectations refuse states,
//! substatuses and ranges that no report or count could ever match.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, Location};
use std::sync::Once;
use std::time::Duration;

use fake_wireserver::{
    Action, EndPolicy, EndpointId, EndpointPlan, Expectation, Fake, FakeConfig, FakeError,
    RateLimit, Scenario, ScenarioError, Step, Trigger, TriggerAction,
};

thread_local! {
    static PANIC_AT: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
}

/// Runs `f`, which must panic; its message and the file and line the panic names.
fn panic_of<R>(f: impl FnOnce() -> R) -> (String, String, u32) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| (l.file().to_owned(), l.line()));
            PANIC_AT.with(|p| *p.borrow_mut() = at);
            previous(info);
        }));
    });
    PANIC_AT.with(|p| *p.borrow_mut() = None);
    let payload = match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("expected a panic"),
        Err(payload) => payload,
    };
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default();
    let (file, line) = PANIC_AT
        .with(|p| p.borrow_mut().take())
        .expect("a location");
    (message, file, line)
}

/// Asserts that `f` panics with a message starting `start`, at a line of this file within the
/// statement calling this (which begins at `line` and, as formatted, spans at most 5 lines):
/// the closure's call, not the library's code.
#[track_caller]
fn assert_panics_here<R>(line: u32, start: &str, f: impl FnOnce() -> R) {
    let (message, file, at) = panic_of(f);
    assert!(
        message.starts_with(start),
        "{message:?} should start {start:?}"
    );
    assert!(
        file == file!() && (line..line + 5).contains(&at),
        "the panic ({message}) points at {file}:{at}, not at the test's call at {}",
        Location::caller()
    );
}

use wirecheck_test_support::http::wire_text as send;

const GOALSTATE: &str = "GET /machine/?comp=goalstate HTTP/1.1\r\nHost: 168.63.129.16\r\n\
                         x-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n";

fn plan(id: &str, steps: Vec<Step>) -> EndpointPlan {
    EndpointPlan {
        id: id.to_owned(),
        end: EndPolicy::Default,
        steps,
    }
}

fn field_and_message(e: &ScenarioError) -> (String, String) {
    match e {
        ScenarioError::Invalid { field, message, .. } => (field.clone(), message.clone()),
        other => panic!("not an invalid-scenario error: {other}"),
    }
}

/// Each mistake written into the struct fields (where no builder method looks) is refused by
/// `Scenario::validate` with the field and message the parser gives for the same mistake in a
/// file.
#[test]
fn a_scenario_built_by_hand_breaks_the_same_rules_as_a_file_with_the_same_words() {
    let hang = || Step::new(Action::Hang);
    let mut cases: Vec<(Scenario, &str)> = Vec::new();
    let mut s = Scenario::new();
    s.endpoints.push(plan("wireserver.goalstat", vec![hang()]));
    cases.push((
        s,
        "[[endpoint]]\nid = \"wireserver.goalstat\"\n[[endpoint.step]]\nkind = \"hang\"\n",
    ));
    let mut s = Scenario::new();
    s.endpoints.push(plan("wireserver goalstate", vec![hang()]));
    cases.push((
        s,
        "[[endpoint]]\nid = \"wireserver goalstate\"\n[[endpoint.step]]\nkind = \"hang\"\n",
    ));
    let mut s = Scenario::new();
    s.endpoints.push(plan("imds.*", vec![]));
    cases.push((s, "[[endpoint]]\nid = \"imds.*\"\n"));
    let mut s = Scenario::new();
    let mut step = hang();
    step.times = 0;
    s.endpoints.push(plan("imds.*", vec![step]));
    cases.push((
        s,
        "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"hang\"\ntimes = 0\n",
    ));
    let mut s = Scenario::new();
    let mut step = hang();
    step.times = 1_000_001;
    s.endpoints.push(plan("imds.*", vec![hang(), step]));
    cases.push((s, "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"hang\"\n[[endpoint.step]]\nkind = \"hang\"\ntimes = 1000001\n"));
    let mut s = Scenario::new();
    let mut step = hang();
    step.probability = 7.0;
    s.endpoints.push(plan("imds.*", vec![step]));
    cases.push((
        s,
        "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"hang\"\nprobability = 7.0\n",
    ));
    let mut s = Scenario::new();
    s.endpoints.push(plan(
        "imds.*",
        vec![Step::new(Action::Delay {
            seconds: -1.0,
            reply: None,
        })],
    ));
    cases.push((
        s,
        "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"delay\"\nseconds = -1.0\n",
    ));
    let mut s = Scenario::new();
    s.endpoints.push(plan(
        "imds.*",
        vec![Step::new(Action::Slow {
            chunk: 1,
            interval: 0.0,
            reply: None,
        })],
    ));
    cases.push((s, "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"slow\"\nchunk = 1\ninterval = 0.0\n"));
    let mut s = Scenario::new();
    let mut step = Step::respond(200);
    if let Action::Respond(reply) = &mut step.action {
        reply.status = Some(42);
    }
    s.endpoints.push(plan("imds.*", vec![step]));
    cases.push((
        s,
        "[[endpoint]]\nid = \"imds.*\"\n[[endpoint.step]]\nkind = \"respond\"\nstatus = 42\n",
    ));
    for (requests, window, endpoints, toml) in [
        (0, 1.0, "wireserver.*", "requests = 0\nwindow = 1.0\n"),
        (1, -1.0, "wireserver.*", "requests = 1\nwindow = -1.0\n"),
        (
            1,
            1.0,
            "wireserver.goalstat",
            "requests = 1\nwindow = 1.0\nendpoints = [\"wireserver.goalstat\"]\n",
        ),
    ] {
        let mut s = Scenario::new();
        s.rate_limit = Some(RateLimit {
            requests,
            window,
            endpoints: vec![endpoints.to_owned()],
        });
        cases.push((
            s,
            Box::leak(format!("[rate_limit]\n{toml}").into_boxed_str()),
        ));
    }
    let mut s = Scenario::new();
    s.triggers.push(Trigger {
        after: -1.0,
        action: TriggerAction::ReprovisionAvailable,
    });
    cases.push((
        s,
        "[[trigger]]\nafter = -1.0\naction = \"reprovision-available\"\n",
    ));
    let mut s = Scenario::new().incarnation("seven");
    s.triggers.push(Trigger {
        after: 1.0,
        action: TriggerAction::BumpIncarnation,
    });
    cases.push((s, "[goalstate]\nincarnation = \"seven\"\n[[trigger]]\nafter = 1.0\naction = \"bump-incarnation\"\n"));
    let s = Scenario::new().incarnation("seven").endpoint(
        "wireserver.health.*",
        EndPolicy::Default,
        vec![Step::gone().then(TriggerAction::BumpIncarnation)],
    );
    cases.push((s, "[goalstate]\nincarnation = \"seven\"\n[[endpoint]]\nid = \"wireserver.health.*\"\n[[endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\n"));

    for (scenario, toml) in cases {
        let from_file = Scenario::from_toml_str(toml, "case.toml").unwrap_err();
        let from_code = scenario.validate().unwrap_err();
        assert_eq!(
            field_and_message(&from_code),
            field_and_message(&from_file),
            "{toml}"
        );
        assert!(from_code.to_string().starts_with("<code>:"), "{from_code}");
    }
    // What parses is valid: every example and every conformance scenario's [fake] table.
    let mut checked = 0;
    for dir in ["../scenarios/examples", "../scenarios"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let scenario = if dir.ends_with("examples") {
                Scenario::from_file(&path).unwrap()
            } else {
                let text = std::fs::read_to_string(&path).unwrap();
                let origin = path.display().to_string();
                match Scenario::from_toml_section(&text, &origin, "fake").unwrap() {
                    Some(s) => s,
                    None => continue,
                }
            };
            assert_eq!(
                scenario.validate().map_err(|e| e.to_string()),
                Ok(()),
                "{}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} scenarios found");
    // And so is what the builder makes.
    let built = Scenario::new()
        .endpoint(
            "wireserver.health.*",
            EndPolicy::Cycle,
            vec![Step::throttled().times(3)],
        )
        .rate_limit(5, 1.0, [EndpointId::WireserverGoalstate])
        .trigger(0.0, TriggerAction::ReprovisionAvailable);
    assert_eq!(built.validate().map_err(|e| e.to_string()), Ok(()));
}

/// The review's case: a typo'd id in a struct literal used to start and answer nothing, so a
/// negative expectation on it passed vacuously.
#[test]
fn a_fake_refuses_to_start_on_a_plan_for_an_endpoint_that_does_not_exist() {
    let mut scenario = Scenario::new();
    scenario
        .endpoints
        .push(plan("wireserver.goalstat", vec![Step::throttled()]));
    let err = Fake::start_blocking(FakeConfig::default().scenario(scenario))
        .err()
        .expect("refused");
    assert!(matches!(err, FakeError::Scenario(_)), "{err:?}");
    assert!(
        err.to_string().starts_with(
            "invalid scenario: <code>:0:0: endpoint[1].id: \"wireserver.goalstat\" matches no endpoint id; expected one of wireserver.versions"
        ),
        "{err}"
    );
}

/// An empty plan used to panic the engine with its lock held: the request got no answer and
/// vanished from the journal. Now `load_scenario` refuses it and the scenario in effect stays.
#[test]
fn load_scenario_refuses_an_invalid_scenario_and_keeps_the_one_in_effect() {
    let throttle = Scenario::new().endpoint(
        EndpointId::WireserverGoalstate,
        EndPolicy::RepeatLast,
        vec![Step::throttled()],
    );
    let fake = Fake::start_blocking(FakeConfig::default().scenario(throttle.clone())).unwrap();
    let mut empty = Scenario::new();
    empty.endpoints.push(plan("wireserver.goalstate", vec![]));
    let err = fake.load_scenario(empty.clone()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "<code>:0:0: endpoint[1].step: a plan needs at least one [[endpoint.step]]"
    );
    assert_eq!(fake.scenario(), throttle);
    let ws = fake.wireserver_addr().unwrap();
    let answer = send(ws, GOALSTATE);
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
    assert_eq!(fake.journal().len(), 1);
    // And at start.
    let err = Fake::start_blocking(FakeConfig::default().scenario(empty))
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("endpoint[1].step: a plan needs at least one"),
        "{err}"
    );
    // A valid one loads.
    assert!(fake.load_scenario(Scenario::new()).is_ok());
    assert!(send(ws, GOALSTATE).starts_with("HTTP/1.1 200 OK"));
}

#[test]
fn builder_methods_refuse_what_a_file_refuses_at_the_callers_line() {
    let l = line!() + 1;
    assert_panics_here(l, "Step::times: times must be 1-1000000, got 0", || {
        Step::hang().times(0)
    });
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::probability: probability must be between 0.0 and 1.0, got 7",
        || Step::reset().probability(7.0),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::probability: probability must be between 0.0 and 1.0, got NaN",
        || Step::reset().probability(f64::NAN),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Scenario::rate_limit: requests must be 1-1000, got 0",
        || Scenario::new().rate_limit(0, 1.0, ["wireserver.*"]),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Scenario::rate_limit: window must be a positive number of seconds up to 86400, got -1",
        || Scenario::new().rate_limit(1, -1.0, ["wireserver.*"]),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Scenario::endpoint: a plan needs at least one [[endpoint.step]]",
        || Scenario::new().endpoint("imds.*", EndPolicy::Default, vec![]),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Scenario::trigger: after must be a number of seconds from 0 to 86400, got -1",
        || Scenario::new().trigger(-1.0, TriggerAction::BumpIncarnation),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::respond: status must be an HTTP status 100..=599, got 42",
        || Step::respond(42),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::status: status must be an HTTP status 100..=599, got 600",
        || Step::delay(Duration::from_secs(1)).status(600),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::header: headers \"Content-Length\" is computed by the fake",
        || Step::respond(200).header("Content-Length", "3"),
    );
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::delay: seconds must be a number of seconds >= 0 and at most 86400, got 86401",
        || Step::delay(Duration::from_secs(86_401)),
    );
    let l = line!() + 1;
    assert_panics_here(l, "Step::slow: chunk must be at least 1 byte", || {
        Step::slow(0, Duration::from_secs(1))
    });
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Step::slow: interval must be a number of seconds > 0 and at most 86400, got 0",
        || Step::slow(1, Duration::ZERO),
    );
}

/// `#[track_caller]` reaches only panics in the function's own body: the typo'd rate-limit id
/// used to be reported at builder.rs, inside a closure.
#[test]
fn a_typo_in_a_rate_limited_id_panics_at_the_callers_line() {
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Scenario::rate_limit: \"imds.instanse\" matches no endpoint id; expected one of",
        || Scenario::new().rate_limit(1, 1.0, ["wireserver.*", "imds.instanse"]),
    );
}

#[test]
fn expectations_refuse_states_and_substatuses_no_report_can_carry() {
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Expectation::state: unknown state \"Redy\"; expected one of Ready, NotReady (case-sensitive)",
        || Expectation::health_reports(0).state("Redy"),
    );
    let l = line!() + 1;
    assert_panics_here(l, "Expectation::state: unknown state \"ready\"", || {
        Expectation::health_reports(1).state("ready")
    });
    let l = line!() + 1;
    assert_panics_here(
        l,
        "Expectation::substatus: unknown substatus \"Provisoning\"; expected one of ProvisioningFailed, Provisioning (case-sensitive)",
        || Expectation::health_reports(1).substatus("Provisoning"),
    );
    // The values the oracle knows are fine.
    for state in ["Ready", "NotReady"] {
        let _ = Expectation::health_reports(1).state(state);
    }
    for substatus in ["ProvisioningFailed", "Provisioning"] {
        let _ = Expectation::health_reports(1).substatus(substatus);
    }
}

// Clippy flags a literal empty range; one computed at run time (`lo..=hi`) it cannot, and that is
// what the panic is for. The literals here keep the test readable.
#[allow(clippy::reversed_empty_ranges)]
#[test]
fn an_empty_range_of_counts_panics_at_the_callers_line() {
    let l = line!() + 1;
    assert_panics_here(l, "Expectation::times: empty range 3..=1", || {
        Expectation::requests("imds.*").times(3..=1)
    });
    let l = line!() + 1;
    assert_panics_here(l, "Expectation::between: empty range 3..=1", || {
        Expectation::requests("imds.*").between(3, 1)
    });
    let l = line!() + 1;
    assert_panics_here(l, "Expectation::health_reports: empty range 2..=0", || {
        Expectation::health_reports(2..=0)
    });
    // A one-count range is not empty.
    assert!(Expectation::health_reports(1..=1).check(&[]).is_err());
    assert_eq!(Expectation::health_reports(0..=0).check(&[]), Ok(()));
}
