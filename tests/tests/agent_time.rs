//! Agent time changes nothing but the wall clock: each real agent whose profile says its clock
//! can be scaled (`clock = "scalable"`: cloud-init 22.4.2, 25.1 and 26.2 and WALinuxAgent in
//! Python, libazureinit in Rust with tokio) gets the same verdicts on a sample of retrying cases run at
//! the wall clock (`--time-scale 1`) and sped up (`--time-scale 20`), and the sped-up run says
//! so in every timeline. A verdict only a loaded machine left unjudged (informational) is not
//! compared; at least 20 cases per agent are. afterburn (Rust, reqwest's blocking client) too.
//!
//! And the other direction: an agent whose profile keeps the wall clock is not sped up by the
//! runner (afterburn's profile without its `clock` key).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use wirecheck_e2e::{require_root, wirecheck_run};

/// Scenarios whose faults make the agent wait and retry, short enough to run at the wall clock.
const SAMPLE: &[&str] = &[
    "retry.status.500.xml.*",
    "transport.reset.xml.*",
    "retry.gone.health.xml.*",
    "wire.health.xml.ready.*",
];

/// One `wirecheck run` at a time: four agents' runs side by side would load the two cores enough
/// to leave timings unjudged.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// id → (verdict, time scale of its timeline).
fn run(agent: &str, scale: u32, out: &Path) -> BTreeMap<String, (String, Option<u64>)> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let scale_arg = scale.to_string();
    let mut args = vec!["--agent", agent, "--time-scale", scale_arg.as_str()];
    for cases in SAMPLE {
        args.extend(["--cases", cases]);
    }
    let output = wirecheck_run(out, &args);
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{agent} x{scale}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    results["agents"][0]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                (
                    c["verdict"].as_str().unwrap().to_owned(),
                    c["timeline"]["time_scale"].as_u64(),
                ),
            )
        })
        .collect()
}

/// `wirecheck run` with `args` into `out`: its results, and its output for the assertions.
fn run_cases(out: &Path, args: &[&str]) -> (Value, String) {
    let output = wirecheck_run(out, args);
    let context = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("results.json"))
            .unwrap_or_else(|e| panic!("{e}\n{context}")),
    )
    .unwrap();
    (results, context)
}

fn same_verdicts_at_both_speeds(agent: &str) {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let wall = run(agent, 1, &dir.path().join("wall"));
    let fast = run(agent, 20, &dir.path().join("fast"));
    assert_eq!(
        wall.keys().collect::<Vec<_>>(),
        fast.keys().collect::<Vec<_>>()
    );
    let mut compared = 0;
    let mut differ = Vec::new();
    for (id, (verdict, scale)) in &wall {
        let (fast_verdict, fast_scale) = &fast[id];
        assert_eq!(*scale, None, "{id} at the wall clock");
        if verdict == "skipped" {
            continue;
        }
        assert_eq!(*fast_scale, Some(20), "{id} sped up");
        if verdict == "informational" || fast_verdict == "informational" {
            continue;
        }
        compared += 1;
        if verdict != fast_verdict {
            differ.push(format!("{id}: {verdict} at x1, {fast_verdict} at x20"));
        }
    }
    assert!(differ.is_empty(), "{agent}: {differ:#?}");
    assert!(compared >= 20, "{agent}: only {compared} cases compared");
}

#[test]
fn cloud_init_22_4_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("cloud-init");
}

#[test]
fn cloud_init_25_1_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("cloud-init-25.1");
}

#[test]
fn cloud_init_26_2_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("cloud-init-26.2");
}

/// WALinuxAgent's daemon waits on `threading.Event`s with timeouts (`sem_clockwait`), which
/// libfaketime alone leaves hanging: sped up, it gets its verdicts only through wirecheck's agent
/// clock library.
#[test]
fn walinuxagent_2_7_3_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("walinuxagent-2.7.3");
}

#[test]
fn libazureinit_on_tokio_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("libazureinit-0.1.1");
}

/// afterburn's reqwest blocking client waits on futexes, which wirecheck's agent clock library
/// moves onto the agent's speed (libfaketime alone left a 30 s timeout at 289 s).
#[test]
fn afterburn_gets_the_same_verdicts_sped_up() {
    same_verdicts_at_both_speeds("afterburn");
}

/// `--time-scale` speeds only agents whose profile says their clock can be scaled: afterburn's
/// profile without its `clock` key keeps the wall's, so its timelines carry no scale.
#[test]
fn an_agent_whose_clock_cannot_be_scaled_keeps_the_wall_clock() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("afterburn");
    let profile = std::fs::read_to_string(
        wirecheck_e2e::repo_root().join("conformance/agents/afterburn.toml"),
    )
    .unwrap();
    let wall: String = profile
        .lines()
        .filter(|l| !l.starts_with("clock =") && !l.starts_with("fastest_clock ="))
        .map(|l| format!("{l}\n"))
        .collect();
    // Its `clock` line goes (afterburn has no fastest_clock of its own).
    assert_eq!(profile.lines().count(), wall.lines().count() + 1);
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("afterburn.toml"), wall).unwrap();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let output = wirecheck_run(
        &out,
        &[
            "--agents-dir",
            agents.to_str().unwrap(),
            "--agent",
            "afterburn",
            "--cases",
            "wire.health.xml.ready.*",
            "--time-scale",
            "20",
        ],
    );
    assert!(matches!(output.status.code(), Some(0 | 1)));
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let cases = results["agents"][0]["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        assert!(c["timeline"].get("time_scale").is_none(), "{c}");
    }
}

/// WALinuxAgent never stops on its own (`gives_up = false` in its profile): the scenarios that
/// never let its report through ran to its 3600 s stand-in budget in no case and were skipped
/// as too long. Now they run sped up to a horizon and are judged: the daemon is still running
/// when the runner ends it (behaviour.budget fails, declared non-strict with its source lines),
/// trying on where the wireserver refuses or hangs, idle after its 30 tries under 503s forever.
/// Here, one run at a time: three sped-up daemons load the two cores.
#[test]
fn walinuxagent_2_7_3_is_judged_where_its_report_never_gets_through() {
    require_root();
    wirecheck_e2e::walinuxagent_root("2.7.3", "2.7.3.0");
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (results, context) = run_cases(
        &out,
        &[
            "--agent",
            "walinuxagent-2.7.3",
            "--cases",
            "{wireserver.unreachable.ready,budget.exhausted.503.xml,budget.exhausted.hang.xml}.behaviour.{budget,terminal,exit}",
        ],
    );
    let cases = results["agents"][0]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 9, "{context}");
    for c in cases {
        assert_ne!(c["verdict"], "skipped", "{c}");
        assert!(
            c["timeline"]["time_scale"].as_u64().is_some_and(|s| s > 1),
            "{c}"
        );
    }
    for id in [
        "wireserver.unreachable.ready.behaviour.budget",
        "budget.exhausted.hang.xml.behaviour.budget",
        "budget.exhausted.503.xml.behaviour.budget",
    ] {
        let case = cases
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}"));
        let why = case["reason"].as_str().unwrap_or_default();
        assert_eq!(case["verdict"], "non-strict", "{id}: {why}");
        // Declared with its source lines, and what was seen: running on at the kill.
        assert!(why.contains("util.py:197-235"), "{id}: {why}");
        assert!(
            why.contains("observed: run 1 was still running at the"),
            "{id}: {why}"
        );
    }
    // Its 30 throttled health attempts, then nothing more on the wireserver until the kill.
    let journal = std::fs::read_to_string(
        out.join("artifacts/walinuxagent-2.7.3/budget.exhausted.503.xml/journal.jsonl"),
    )
    .unwrap();
    let posts = journal
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["endpoint"] == "wireserver.health.xml")
        .count();
    assert_eq!(posts, 30, "{journal}");
}

/// A refused wireserver: cloud-init 22.4.2 (attached by URL) tries it for its 20-minute budget
/// and the fake sees nothing. The runner watches the agent's network namespace for the SYNs of
/// those attempts, so its start-up and its loop are measured, and behaviour.budget judges its
/// exit sped up (before: informational, "having sent nothing, its own start-up ... was not
/// measured"), from its attempts' own times.
#[test]
fn cloud_init_22_4_is_judged_on_a_refused_wireserver() {
    require_root();
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (results, _) = run_cases(
        &out,
        &[
            "--agent",
            "cloud-init",
            "--cases",
            "wireserver.unreachable.ready.behaviour.budget",
        ],
    );
    let case = &results["agents"][0]["cases"][0];
    assert!(
        case["timeline"]["time_scale"]
            .as_u64()
            .is_some_and(|s| s > 1),
        "{case}"
    );
    assert_eq!(case["verdict"], "pass", "{case}");
    // Its loop, from its first refused attempt to its last: the 20-minute budget, no more.
    let note = case["evidence"][0]["note"].as_str().unwrap();
    let loop_s: f64 = note
        .strip_prefix("run 1: wireserver report ")
        .and_then(|rest| rest.split(" s of a 1200.00 s budget").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{note}"));
    assert!((1150.0..1260.0).contains(&loop_s), "{note}");
}
