//! A small, fixed RunResults used by the results_* tests: every verdict, a
//! retry burst, injected faults, a hang, a case with no requests, and hostile
//! strings from an "agent" everywhere a string can go.

#![allow(dead_code)] // each test file uses a different part

use wirecheck_results::{
    AgentResults, CaseResult, Evidence, RunEnd, RunResults, SCHEMA_VERSION, Timeline,
    TimelineEvent, Verdict,
};

pub const HOSTILE: &str = "<script>alert('x')</script> \"quoted\" & <img src=x onerror=alert(1)>";

fn event(
    at: u64,
    done: Option<u64>,
    endpoint: &str,
    label: &str,
    answer: &str,
    fault: bool,
) -> TimelineEvent {
    TimelineEvent {
        at_ms: at,
        done_ms: done,
        closed_ms: None,
        endpoint: endpoint.into(),
        label: label.into(),
        answer: answer.into(),
        fault,
    }
}

fn case(
    id: &str,
    title: &str,
    verdict: Verdict,
    reason: Option<&str>,
    timeline: Timeline,
) -> CaseResult {
    CaseResult {
        id: id.into(),
        title: title.into(),
        scenario: id.split('.').take(2).collect::<Vec<_>>().join("-"),
        verdict,
        reason: reason.map(Into::into),
        evidence: Vec::new(),
        duration_ms: timeline.agent_exit_ms.unwrap_or(timeline.deadline_ms),
        timeline,
        artifacts: None,
        not_judged: None,
        attempts: None,
    }
}

pub fn fixture() -> RunResults {
    let health = "wireserver.health.json";
    let post = "POST /provisioning/health";

    let mut retry = case(
        "retry.health.503-burst",
        "retries 503 about once a second within the budget",
        Verdict::Pass,
        None,
        Timeline {
            budget_ms: Some(10_000),
            deadline_ms: 12_000,
            agent_exit_ms: Some(3_150),
            events: vec![
                event(
                    20,
                    Some(25),
                    "imds.instance",
                    "GET /metadata/instance?api-version=2023-11-15",
                    "200",
                    false,
                ),
                event(60, Some(64), health, post, "503", true),
                event(1_070, Some(1_074), health, post, "503", true),
                event(2_080, Some(2_083), health, post, "503", true),
                event(3_090, Some(3_100), health, post, "201", false),
            ],
            runs: vec![RunEnd {
                exit: "exit status 0".into(),
                exit_code: Some(0),
                stderr_tail: "provision-report: reported Ready (4 attempts)".into(),
                stderr_bytes: 45,
            }],
            time_scale: None,
        },
    );
    retry.evidence.push(Evidence {
        note: "4 attempts, intervals 1.006 s, 1.006 s, 1.007 s".into(),
        journal_seq: vec![2, 3, 4, 5],
        excerpt: None,
    });
    retry.artifacts = Some("artifacts/provision-report/retry.health.503-burst".into());

    let mut too_fast = case(
        "retry.health.interval",
        "waits at least 500 ms between attempts",
        Verdict::Fail,
        Some("attempts 3 and 4 were 12 ms apart (expected >= 500 ms)"),
        Timeline {
            budget_ms: Some(5_000),
            deadline_ms: 6_000,
            agent_exit_ms: Some(6_000),
            events: vec![
                event(10, Some(12), health, post, "reset", true),
                event(30, Some(31), health, post, "reset", true),
                event(43, Some(44), health, post, "reset", true),
                event(56, Some(57), health, post, "reset", true),
                event(70, None, health, post, "hang", true),
            ],
            runs: vec![],
            time_scale: None,
        },
    );
    too_fast.evidence.push(Evidence {
        note: "request head of attempt 4".into(),
        journal_seq: vec![3, 4],
        excerpt: Some("POST /provisioning/health HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json".into()),
    });

    let mut hostile = case(
        "wire.health.json.description",
        HOSTILE,
        Verdict::NonStrict,
        Some(HOSTILE),
        Timeline {
            budget_ms: None,
            deadline_ms: 2_000,
            agent_exit_ms: Some(400),
            events: vec![event(100, Some(104), HOSTILE, HOSTILE, HOSTILE, false)],
            runs: vec![RunEnd {
                exit: format!("exit status 3 {HOSTILE}"),
                exit_code: Some(3),
                stderr_tail: format!("{HOSTILE}\u{0}\nlast line"),
                stderr_bytes: 9_000,
            }],
            time_scale: None,
        },
    );
    hostile.evidence.push(Evidence {
        note: format!("description {HOSTILE}"),
        journal_seq: vec![1],
        excerpt: Some(format!("{{\"description\":\"{HOSTILE}\\u0000\"}}\u{0}")),
    });
    hostile.artifacts = Some("javascript:alert(1)".into());

    let informational = case(
        "wire.headers.agent-name",
        "x-ms-agent-name is recorded",
        Verdict::Informational,
        Some("x-ms-agent-name: WALinuxAgent (claims to be WALA)"),
        Timeline {
            budget_ms: None,
            deadline_ms: 1_000,
            agent_exit_ms: Some(210),
            events: vec![
                event(
                    5,
                    Some(9),
                    "wireserver.goalstate",
                    "GET /machine/?comp=goalstate",
                    "200",
                    false,
                ),
                event(
                    15,
                    Some(19),
                    "wireserver.health.xml",
                    "POST /machine?comp=health",
                    "200",
                    false,
                ),
            ],
            runs: vec![],
            time_scale: None,
        },
    );
    let unimplemented = case(
        "kvp.report.written",
        "writes PROVISIONING_REPORT to KVP",
        Verdict::Unimplemented,
        Some("the profile says: no KVP support"),
        Timeline {
            budget_ms: None,
            deadline_ms: 1_000,
            agent_exit_ms: Some(120),
            events: vec![],
            runs: vec![],
            time_scale: None,
        },
    );
    let skipped = case(
        "sandbox.netns.ready",
        "reports Ready on the real addresses",
        Verdict::Skipped,
        Some("needs root for the network namespace"),
        Timeline {
            budget_ms: None,
            deadline_ms: 0,
            agent_exit_ms: None,
            events: vec![],
            runs: vec![],
            time_scale: None,
        },
    );

    RunResults {
        schema_version: SCHEMA_VERSION,
        started: "2025-01-02T03:04:05Z".into(),
        duration_ms: 21_345,
        wirecheck_version: "0.1.0".into(),
        wirecheck_commit: None,
        interrupted: None,
        uncontained: None,
        run: None,
        never_started: vec![],
        unclaimed_flows: vec![],
        agents: vec![
            AgentResults {
                agent: "provision-report".into(),
                cases: vec![
                    retry,
                    too_fast,
                    informational.clone(),
                    unimplemented,
                    skipped,
                ],
            },
            AgentResults {
                agent: format!("hostile {HOSTILE}"),
                cases: vec![hostile, informational],
            },
        ],
    }
}

/// Number of cases in the fixture, over all agents.
pub fn case_count(results: &RunResults) -> usize {
    results.agents.iter().map(|a| a.cases.len()).sum()
}
