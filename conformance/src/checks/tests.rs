//! The checks on hand-made observations: each rule catches the behaviour it names, and lets
//! the right behaviour pass. Its observation builders serve the snapshot tests too.

use std::path::Path;

use fake_wireserver::EndpointId;
use fake_wireserver::journal::{Answer, AnswerKind, Entry, Listener, StepRef};
use wirecheck_oracle::ServedIds;
use wirecheck_oracle::kvp::decode_pool;

use super::Judgement;
use crate::agent::AgentProfile;
use crate::exec::{Captured, Exit};
use crate::observe::{Observation, RunRecord};
use crate::scenario::Scenario;
use wirecheck_results::Verdict;

const PROFILE: &str = r#"name = "t"
description = "t"
capabilities = ["json", "xml", "failure", "in-progress", "kvp"]
[commands]
ready = ["t"]
failure = ["t"]
in-progress = ["t"]
[reactions]
retryable = [404, 410, 429, 500, 503]
transport_errors = "retry"
status_403 = "throttle-body"
refresh_goal_state_on_410 = true
[exit]
reported = [0]
failed = [1]
"#;

pub(crate) fn scenario(extra: &str) -> Scenario {
    let text = format!(
        "id = \"t\"\ntitle = \"t\"\nchecks = [\"*\"]\n[agent]\naction = \"ready\"\nbudget = 3.0\nretry_interval = 0.2\nrequest_timeout = 1.0\n{extra}"
    );
    Scenario::from_toml_str(&text, Path::new("t.toml"))
        .unwrap()
        .remove(0)
}

pub(crate) fn profile() -> AgentProfile {
    AgentProfile::from_toml_str(PROFILE, Path::new("t.toml")).unwrap()
}

/// A request at `at` ms answered `status` (None: `kind` without a status) at `done`.
pub(crate) fn entry(
    seq: u64,
    endpoint: EndpointId,
    at: u64,
    done: Option<u64>,
    kind: AnswerKind,
    status: Option<u16>,
) -> Entry {
    let (method, target) = match endpoint {
        EndpointId::WireserverHealthJson => ("POST", "/provisioning/health"),
        EndpointId::WireserverHealthXml => ("POST", "/machine?comp=health"),
        EndpointId::WireserverGoalstate => ("GET", "/machine/?comp=goalstate"),
        _ => ("GET", "/metadata/instance?api-version=2021-08-01"),
    };
    let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    if endpoint.is_imds() {
        headers = vec![("Metadata".to_owned(), "true".to_owned())];
    }
    Entry {
        seq,
        at_ms: at,
        received_by_kernel: false,
        done_ms: done,
        listener: Listener::Wireserver,
        client: "127.0.0.1:1".into(),
        method: method.into(),
        target: target.into(),
        http_version: "HTTP/1.1".into(),
        headers,
        body: r#"{"state":"Ready"}"#.into(),
        body_b64: None,
        body_len: 17,
        body_truncated: false,
        endpoint,
        answer: Answer {
            kind,
            status,
            step: (kind != AnswerKind::Default).then(|| StepRef {
                endpoint: endpoint.to_string(),
                index: 0,
                repeat: 1,
            }),
        },
        report: (endpoint == EndpointId::WireserverHealthJson)
            .then(|| wirecheck_oracle::health::parse_json(br#"{"state":"Ready"}"#)),
        findings: vec![],
        client_closed_ms: None,
    }
}

pub(crate) fn health(seq: u64, at: u64, status: u16) -> Entry {
    let kind = if status == 201 {
        AnswerKind::Default
    } else {
        AnswerKind::Respond
    };
    entry(
        seq,
        EndpointId::WireserverHealthJson,
        at,
        Some(at + 2),
        kind,
        Some(status),
    )
}

/// A goal state fetch at `at` ms answered with the default document.
pub(crate) fn goal_state(seq: u64, at: u64) -> Entry {
    entry(
        seq,
        EndpointId::WireserverGoalstate,
        at,
        Some(at + 2),
        AnswerKind::Default,
        Some(200),
    )
}

/// An IMDS instance request at `at` ms answered `status`.
pub(crate) fn imds(seq: u64, at: u64, status: u16) -> Entry {
    entry(
        seq,
        EndpointId::ImdsInstance,
        at,
        Some(at + 2),
        AnswerKind::Respond,
        Some(status),
    )
}

pub(crate) fn run(start: u64, end: u64, exit: Exit) -> RunRecord {
    RunRecord {
        run: crate::scenario::Run {
            action: crate::agent::Action::Ready,
            reason: None,
            data: vec![],
            description: None,
        },
        argv: vec!["t".into()],
        start_ms: start,
        clock_ms: start,
        end_ms: end,
        exit,
        stdout: Captured::default(),
        stderr: Captured::default(),
        pid: None,
        refused: Vec::new(),
    }
}

fn judge(check: &str, scenario: &Scenario, journal: Vec<Entry>, runs: Vec<RunRecord>) -> Judgement {
    judge_with(&profile(), check, scenario, journal, runs)
}

/// [`judge`] on a machine whose runner stalled at these moments.
fn judge_stalled(
    check: &str,
    scenario: &Scenario,
    journal: Vec<Entry>,
    runs: Vec<RunRecord>,
    stalls: Vec<crate::observe::Stall>,
) -> Judgement {
    judge_full(&profile(), check, scenario, journal, runs, stalls)
}

fn judge_with(
    profile: &AgentProfile,
    check: &str,
    scenario: &Scenario,
    journal: Vec<Entry>,
    runs: Vec<RunRecord>,
) -> Judgement {
    judge_full(profile, check, scenario, journal, runs, Vec::new())
}

fn judge_full(
    profile: &AgentProfile,
    check: &str,
    scenario: &Scenario,
    journal: Vec<Entry>,
    runs: Vec<RunRecord>,
    stalls: Vec<crate::observe::Stall>,
) -> Judgement {
    judge_at(
        profile,
        check,
        scenario,
        journal,
        runs,
        stalls,
        Default::default(),
    )
}

/// [`judge_full`] with the agent's clock and the fake's at `time_scale`.
fn judge_at(
    profile: &AgentProfile,
    check: &str,
    scenario: &Scenario,
    journal: Vec<Entry>,
    runs: Vec<RunRecord>,
    stalls: Vec<crate::observe::Stall>,
    time_scale: fake_wireserver::clock::TimeScale,
) -> Judgement {
    let mut obs = observation(profile, scenario, journal, runs);
    obs.stalls = stalls;
    obs.time_scale = time_scale;
    judge_obs(check, &obs)
}

/// What the checks see of a run at the wall clock on a machine that kept time.
pub(crate) fn observation<'a>(
    profile: &'a AgentProfile,
    scenario: &'a Scenario,
    journal: Vec<Entry>,
    runs: Vec<RunRecord>,
) -> Observation<'a> {
    Observation {
        scenario,
        profile,
        journal,
        served: ServedIds {
            incarnation: "1".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        },
        imds_vm_id: None,
        pool: Some(Vec::new()),
        pool_view: decode_pool(&[]),
        runs,
        stalls: Vec::new(),
        agent_waited: Vec::new(),
        agent_working: Vec::new(),
        time_scale: Default::default(),
        deadline: scenario.agent.deadline,
        guest_calls: Vec::new(),
        guest_users: None,
    }
}

fn judge_obs(check: &str, obs: &Observation) -> Judgement {
    let def = super::get(crate::catalog::CheckId::from_id(check).unwrap());
    (def.run)(obs)
}

#[test]
fn retrying_a_fatal_answer_fails_and_stopping_passes() {
    let s = scenario("");
    let retried = judge(
        "behaviour.retry",
        &s,
        vec![health(1, 10, 401), health(2, 300, 201)],
        vec![run(0, 320, Exit::Code(0))],
    );
    assert_eq!(retried.verdict, Verdict::Fail);
    assert!(
        retried
            .reason
            .unwrap()
            .contains("retried after status 401 (#1)")
    );
    assert_eq!(retried.evidence[0].journal_seq, [1, 2]);

    let stopped = judge(
        "behaviour.retry",
        &s,
        vec![health(1, 10, 401)],
        vec![run(0, 30, Exit::Code(1))],
    );
    assert_eq!(stopped.verdict, Verdict::Pass);
}

#[test]
fn giving_up_early_on_a_retryable_answer_fails() {
    let s = scenario("");
    let early = judge(
        "behaviour.retry",
        &s,
        vec![health(1, 10, 503)],
        vec![run(0, 40, Exit::Code(1))],
    );
    assert_eq!(early.verdict, Verdict::Fail);
    assert!(
        early
            .reason
            .unwrap()
            .contains("gave up after status 503 (#1)")
    );
    // Near the end of the budget (counted from the first attempt), stopping is right.
    let late = judge(
        "behaviour.retry",
        &s,
        vec![health(1, 10, 503), health(2, 2900, 503)],
        vec![run(0, 2950, Exit::Code(1))],
    );
    assert_eq!(late.verdict, Verdict::Pass);
}

#[test]
fn the_throttle_body_decides_a_403() {
    let s = scenario(
        "[[fake.endpoint]]\nid = \"wireserver.health.json\"\n[[fake.endpoint.step]]\nkind = \"respond\"\npreset = \"throttled\"\n",
    );
    // Throttled 403, retried: fine for a "throttle-body" agent.
    let j = judge(
        "behaviour.retry",
        &s,
        vec![health(1, 10, 403), health(2, 250, 201)],
        vec![run(0, 260, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    // A plain 403, retried: not.
    let plain = scenario(
        "[[fake.endpoint]]\nid = \"wireserver.health.json\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 403\n",
    );
    let j = judge(
        "behaviour.retry",
        &plain,
        vec![health(1, 10, 403), health(2, 250, 201)],
        vec![run(0, 260, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Fail);
}

#[test]
fn an_interval_within_a_stall_of_its_floor_is_not_called_either_way() {
    use crate::observe::Stall;
    let s = scenario("");
    let stall = |end_ms, len_ms| vec![Stall { end_ms, len_ms }];
    // 150 ms looks too fast (floor 190 ms), but the runner stalled 60 ms around the 503: the
    // answer may have left earlier than recorded, and the agent waited long enough.
    let close = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 160, 201)],
        vec![run(0, 170, Exit::Code(0))],
        stall(40, 60),
    );
    assert_eq!(close.verdict, Verdict::Informational, "{close:?}");
    let reason = close.reason.unwrap();
    assert!(
        reason.contains("too loaded to judge timing") && reason.contains("60 ms late"),
        "{reason}"
    );
    // A pass just over the floor is not called either: the retry may have come earlier than
    // recorded.
    let pass = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 215, 201)],
        vec![run(0, 220, Exit::Code(0))],
        stall(210, 100),
    );
    assert_eq!(pass.verdict, Verdict::Informational, "{pass:?}");
    // Far from the floor, a stall changes nothing: 20 ms is too fast even 100 ms late...
    let fast = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 30, 201)],
        vec![run(0, 70, Exit::Code(0))],
        stall(25, 100),
    );
    assert_eq!(fast.verdict, Verdict::Fail, "{fast:?}");
    // ... and a stall elsewhere in the case, or one before the retry (it came earlier still),
    // does not touch this interval.
    let elsewhere = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 160, 201)],
        vec![run(0, 2000, Exit::Code(0))],
        stall(1500, 100),
    );
    assert_eq!(elsewhere.verdict, Verdict::Fail, "{elsewhere:?}");
    let before_retry = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 160, 201)],
        vec![run(0, 170, Exit::Code(0))],
        stall(155, 100),
    );
    assert_eq!(before_retry.verdict, Verdict::Fail, "{before_retry:?}");
}

/// `e` as the fake journals it when the kernel stamped its arrival.
fn stamped(mut e: Entry) -> Entry {
    e.received_by_kernel = true;
    e
}

/// Arrivals the kernel stamped are exact whatever the runner's stalls: a wait is judged from
/// them and the answer's write in between, and no stall leaves it unjudged (before, at agent
/// time each stall counted N times over, and cloud-init's waits of a 20-minute loop were
/// unjudged on every attempt). A wait too short is short however long the answer took; one
/// only as long as the floor is not called when the answer's write took longer than the margin.
#[test]
fn kernel_stamped_arrivals_judge_a_wait_a_stall_would_leave_unjudged() {
    use crate::observe::Stall;
    let s = scenario("");
    // The stall that left the 215 ms wait unjudged above, over both ends.
    let stall = || {
        vec![Stall {
            end_ms: 215,
            len_ms: 300,
        }]
    };
    let exact = |first: Entry, retry: u64| vec![stamped(first), stamped(health(2, retry, 201))];
    // `first`, then its retry at `retry` ms, both stamped, under that stall.
    let judged = |first: Entry, retry: u64| {
        judge_stalled(
            "behaviour.interval",
            &s,
            exact(first, retry),
            vec![run(0, retry + 5, Exit::Code(0))],
            stall(),
        )
    };
    let pass = judged(health(1, 10, 503), 215);
    assert_eq!(pass.verdict, Verdict::Pass, "{pass:?}");
    // 150 ms (floor 190): too fast, however late the runner was.
    let fast = judged(health(1, 10, 503), 160);
    assert_eq!(fast.verdict, Verdict::Fail, "{fast:?}");
    // The 503's write took 40 ms: the agent had it between 10 and 50 ms, and 205 ms after 10
    // may be 165 ms after 50.
    let mut slow_answer = health(1, 10, 503);
    slow_answer.done_ms = Some(50);
    let slow = judge_stalled(
        "behaviour.interval",
        &s,
        exact(slow_answer, 215),
        vec![run(0, 220, Exit::Code(0))],
        vec![],
    );
    assert_eq!(slow.verdict, Verdict::Informational, "{slow:?}");
    assert!(slow.reason.unwrap().contains("took 40 ms over its answer"));
    // A closed (or reset) connection is measured from the fake's end of it: the agent had it
    // between the arrival at 10 and that end.
    let closed = |done, kind| {
        stamped(entry(
            1,
            EndpointId::WireserverHealthJson,
            10,
            Some(done),
            kind,
            None,
        ))
    };
    assert_eq!(
        judged(closed(12, AnswerKind::Close), 215).verdict,
        Verdict::Pass
    );
    assert_eq!(
        judged(closed(12, AnswerKind::Close), 150).verdict,
        Verdict::Fail
    );
    let unsure = judged(closed(50, AnswerKind::Close), 215);
    assert_eq!(unsure.verdict, Verdict::Informational, "{unsure:?}");
    let rst = judged(closed(12, AnswerKind::Reset), 215);
    assert_eq!(rst.verdict, Verdict::Pass, "{rst:?}");
    // A delayed answer's end is the fake's, which a stall only makes late (the wait measured
    // shorter): measured long enough to a stamped retry, it was so in fact, stall or not;
    // measured short, the stall leaves it unjudged.
    let delayed = judged(closed(12, AnswerKind::Delay), 215);
    assert_eq!(delayed.verdict, Verdict::Pass, "{delayed:?}");
    let delayed_short = judged(closed(50, AnswerKind::Delay), 215);
    assert_eq!(
        delayed_short.verdict,
        Verdict::Informational,
        "{delayed_short:?}"
    );
    // An immediate answer's end is its arrival, earlier than the agent had it; but the fake
    // records its write's end, after which the agent cannot have had it later than the unseen
    // lag: from an unstamped 503 written at once, a stamped retry 205 ms on is judged.
    let unstamped_503 = judge_stalled(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), stamped(health(2, 215, 201))],
        vec![run(0, 220, Exit::Code(0))],
        stall(),
    );
    assert_eq!(unstamped_503.verdict, Verdict::Pass, "{unstamped_503:?}");
    // A stall between an unstamped 503's read (at 10) and its write (400): the agent had it
    // only then, so a retry stamped at 460 is 60 ms after it, not 450; no stall reaches the
    // retry itself.
    let mut slow_write = health(1, 10, 503);
    slow_write.done_ms = Some(400);
    let hidden = judge_stalled(
        "behaviour.interval",
        &s,
        vec![slow_write, stamped(health(2, 460, 201))],
        vec![run(0, 470, Exit::Code(0))],
        vec![Stall {
            end_ms: 400,
            len_ms: 390,
        }],
    );
    assert_eq!(hidden.verdict, Verdict::Informational, "{hidden:?}");
    // The retry's arrival unstamped: the stall may have made it late, the wait longer.
    let unstamped = judge_stalled(
        "behaviour.interval",
        &s,
        vec![closed(12, AnswerKind::Delay), health(2, 215, 201)],
        vec![run(0, 220, Exit::Code(0))],
        stall(),
    );
    assert_eq!(unstamped.verdict, Verdict::Informational, "{unstamped:?}");
    // A request that arrived before the 503 it follows in the journal (two connections read
    // out of order) is no retry of it: neither passed nor failed as one.
    let out_of_order = judge_stalled(
        "behaviour.interval",
        &s,
        exact(health(1, 300, 503), 215),
        vec![run(0, 320, Exit::Code(0))],
        vec![],
    );
    assert!(
        !matches!(out_of_order.verdict, Verdict::Pass | Verdict::Fail),
        "{out_of_order:?}"
    );
    // One end the fake's own time: the stall counts as before.
    let half = judge_stalled(
        "behaviour.interval",
        &s,
        vec![stamped(health(1, 10, 503)), health(2, 215, 201)],
        vec![run(0, 220, Exit::Code(0))],
        stall(),
    );
    assert_eq!(half.verdict, Verdict::Informational, "{half:?}");
}

/// `n` 503s then a 201, each request `step` ms after the one before (answers take 2 ms).
fn retries_every(n: u64, step: u64) -> Vec<Entry> {
    (0..=n)
        .map(|k| health(k + 1, 10 + k * step, if k < n { 503 } else { 201 }))
        .collect()
}

/// Stalls of 100 ms ending at the arrival of the retries `at` (1-based request numbers) of
/// [`retries_every`].
fn stalls_at(step: u64, at: &[u64]) -> Vec<crate::observe::Stall> {
    at.iter()
        .map(|k| crate::observe::Stall {
            end_ms: 10 + (k - 1) * step,
            len_ms: 100,
        })
        .collect()
}

/// A loop's waits of one kind come from one decision: among many waits judged clear of any
/// stall, the few a stall could flip are not judged and do not leave the case unjudged (before:
/// one stall among cloud-init 25.1's 1,640 retries of a 503 made every attempt informational).
/// An agent 30 % short fails on the clear ones whatever the stalls; few clear waits, or a
/// stalled quarter, still leave it unjudged.
#[test]
fn stalled_waits_among_many_clear_ones_are_sampled_out_not_a_reason_to_run_again() {
    let s = scenario("");
    let at_end = |n: u64, step: u64| vec![run(0, 20 + n * step, Exit::Code(0))];
    // Interval 200 ms (floor 190): every 212 ms leaves 210 ms, within a 100 ms stall of it.
    let correct = judge_stalled(
        "behaviour.interval",
        &s,
        retries_every(20, 212),
        at_end(20, 212),
        stalls_at(212, &[6, 13]),
    );
    assert_eq!(correct.verdict, Verdict::Pass, "{correct:?}");
    assert!(
        correct
            .evidence
            .iter()
            .any(|e| e.note.contains("not judged")),
        "{correct:?}"
    );
    // 30 % short (140 ms of 200): fails on the clear waits, the stalls change nothing.
    let short = judge_stalled(
        "behaviour.interval",
        &s,
        retries_every(20, 142),
        at_end(20, 142),
        stalls_at(142, &[6, 13]),
    );
    assert_eq!(short.verdict, Verdict::Fail, "{short:?}");
    // A wait measured short under a stall is not sampled out: 150 ms (floor 190) among
    // nineteen clear ones of 210 ms.
    let mut one_short = retries_every(20, 212);
    for e in one_short.iter_mut().skip(6) {
        e.at_ms -= 60;
        e.done_ms = e.done_ms.map(|d| d - 60);
    }
    let shortened = judge_stalled(
        "behaviour.interval",
        &s,
        one_short,
        at_end(20, 212),
        stalls_at(212, &[6]),
    );
    assert_eq!(shortened.verdict, Verdict::Informational, "{shortened:?}");
    // Few waits: one stalled among five is not sampled out.
    let few = judge_stalled(
        "behaviour.interval",
        &s,
        retries_every(5, 212),
        at_end(5, 212),
        stalls_at(212, &[3]),
    );
    assert_eq!(few.verdict, Verdict::Informational, "{few:?}");
    // Many waits, but over a quarter of them stalled: not sampled out either.
    let stalled: Vec<u64> = (2..=21).step_by(3).collect();
    let mostly_stalled = judge_stalled(
        "behaviour.interval",
        &s,
        retries_every(20, 212),
        at_end(20, 212),
        stalls_at(212, &stalled),
    );
    assert_eq!(
        mostly_stalled.verdict,
        Verdict::Informational,
        "{mostly_stalled:?}"
    );
}

#[test]
fn retrying_faster_than_the_interval_fails() {
    let s = scenario("");
    let fast = judge(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 60, 201)],
        vec![run(0, 70, Exit::Code(0))],
    );
    assert_eq!(fast.verdict, Verdict::Fail);
    assert!(fast.reason.unwrap().contains("only 50 ms after #1"));
    let ok = judge(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 503), health(2, 215, 201)],
        vec![run(0, 220, Exit::Code(0))],
    );
    assert_eq!(ok.verdict, Verdict::Pass);
    // Nothing retried: nothing to judge.
    let none = judge(
        "behaviour.interval",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(none.verdict, Verdict::Skipped);
}

#[test]
fn a_request_burst_breaks_the_rate() {
    let s = scenario("");
    let burst: Vec<Entry> = (0..12).map(|i| health(i + 1, 10 + i * 50, 503)).collect();
    let j = judge(
        "behaviour.rate",
        &s,
        burst,
        vec![run(0, 700, Exit::Code(1))],
    );
    assert_eq!(j.verdict, Verdict::Fail);
    assert!(
        j.reason
            .unwrap()
            .starts_with("12 requests to wireserver.health.json within one second; at most 6")
    );
}

/// Issue 23 (found running the XML bomber): the journal is in the order requests were
/// journaled (`seq`), which is not the order their heads arrived (`at_ms`) when one body took
/// longer to read or parse; the rate check subtracted arrival times in journal order and
/// panicked ("attempt to subtract with overflow"), taking the case with it.
#[test]
fn the_rate_is_judged_by_arrival_whatever_the_journal_order() {
    let s = scenario("");
    // Two posts: the later arrival journaled first (its body was shorter).
    let journal = vec![health(1, 900, 201), health(2, 100, 201)];
    let j = judge(
        "behaviour.rate",
        &s,
        journal,
        vec![run(0, 1000, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    // Out of order and too many: still a failure, its window read by arrival.
    let burst: Vec<Entry> = (0..12)
        .map(|i| health(i + 1, 10 + (11 - i) * 50, 503))
        .collect();
    let j = judge(
        "behaviour.rate",
        &s,
        burst,
        vec![run(0, 700, Exit::Code(1))],
    );
    assert_eq!(j.verdict, Verdict::Fail);
    assert!(
        j.reason
            .unwrap()
            .starts_with("12 requests to wireserver.health.json within one second")
    );
}

/// An agent that never gives up (`gives_up = false`: WALinuxAgent) is ended by the runner, and
/// fails for it whatever it did last: a long sleep (a `Retry-After` honoured) and an ended loop
/// look alike from outside, so a quiet daemon is not taken to have stopped. One that gives up
/// and is killed fails for its budget.
#[test]
fn an_agent_that_never_gives_up_fails_when_the_runner_ends_it() {
    let s = scenario("");
    let mut daemon = profile();
    daemon.reactions.gives_up = false;
    let killed_at = |p: &AgentProfile, attempts: &[u64], kill: u64| {
        let journal = (1..)
            .zip(attempts)
            .map(|(seq, &at)| health(seq, at, 503))
            .collect();
        judge_with(
            p,
            "behaviour.budget",
            &s,
            journal,
            vec![run(0, kill, Exit::KilledAtDeadline)],
        )
    };
    for (attempts, kill) in [
        // Quiet for 58 s before the kill (its loop over, or asleep): not a pass.
        (&[10, 1010, 2010][..], 60_000),
        // Still trying at the kill.
        (&[10, 1010, 2010], 2500),
        // Nothing reached the fake (a refused wireserver).
        (&[], 60_000),
    ] {
        let j = killed_at(&daemon, attempts, kill);
        assert_eq!(j.verdict, Verdict::Fail, "{attempts:?}");
        assert!(
            j.reason
                .unwrap()
                .contains("never stops on its own (reactions.gives_up = false)")
        );
    }
    // An agent that gives up and is killed fails for its budget.
    let gives_up = killed_at(&profile(), &[10, 1010, 2010], 60_000);
    assert!(gives_up.reason.unwrap().contains("its budget is 3.00 s"));
}

/// An agent that counts its tries (`reactions.tries`: afterburn's 11 per request, the exchange
/// 6 times) has its wireserver loop judged by counting what reached the fake, which agent time
/// cannot stretch: an endpoint asked more often in the run, or a request after the goal state
/// more often in one round, fails (an agent 30 % over its count of either kind: 15 tries a
/// round, or 8 rounds); a goal state failing in every round, asked 66 times in a row, does not
/// (where a round starts cannot be seen then). It must be gone one interval, its start-up and
/// the lag after its last attempt. A refused wireserver (nothing counted) is judged by its
/// time budget.
#[test]
fn an_agent_counting_its_tries_is_judged_by_its_counts() {
    let s = scenario("");
    let mut counting = profile();
    counting.reactions.retry_interval_min = Some(1.0);
    // Its tries with every answer at once: 6 rounds of 10 one-second sleeps, 5 between rounds.
    counting.reactions.budget = Some(65.0);
    counting.reactions.tries = Some(crate::agent::Tries {
        per_request: 11,
        sequences: 6,
    });
    let goalstate = |seq, at, status| {
        entry(
            seq,
            EndpointId::WireserverGoalstate,
            at,
            Some(at + 2),
            AnswerKind::Respond,
            Some(status),
        )
    };
    // `rounds` of a goal state (answered `gs`) and `posts` 503s each (none when the goal state
    // fails), 1 s apart from 10 ms on; and when the last attempt ended.
    let journal = |rounds: u64, gets: u64, gs: u16, posts: u64| {
        let mut j = Vec::new();
        let mut at = 10;
        for _ in 0..rounds {
            for _ in 0..gets {
                j.push(goalstate(j.len() as u64 + 1, at, gs));
                at += 1000;
            }
            for _ in 0..posts {
                j.push(health(j.len() as u64 + 1, at, 503));
                at += 1000;
            }
        }
        (j, at - 1000 + 2)
    };
    let judge_counts = |(j, last_end): (Vec<Entry>, u64), exit_after: u64| {
        judge_with(
            &counting,
            "behaviour.budget",
            &s,
            j,
            vec![run(0, last_end + exit_after, Exit::Code(1))],
        )
    };
    // Its whole count, 72 s long where the scenario's budget is 3 s: a pass, counted.
    let all = judge_counts(journal(6, 1, 200, 11), 5);
    assert_eq!(all.verdict, Verdict::Pass, "{all:?}");
    let fails_saying = |j: Judgement, says: &str| {
        assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
        let reason = j.reason.unwrap_or_default();
        assert!(reason.contains(says), "{reason}");
    };
    // 15 tries of the report in each of its 6 rounds: 90 where 66 are allowed.
    fails_saying(
        judge_counts(journal(6, 1, 200, 15), 5),
        "wireserver.health.json asked 90 times; its profile allows 11 tries of a request in each of 6 tries of the exchange, 66 in all",
    );
    // 15 tries of the report in each of 4 rounds: 60 in all, but 15 in a round where 11 are
    // allowed.
    fails_saying(
        judge_counts(journal(4, 1, 200, 15), 5),
        "wireserver.health.json tried 15 times in one round of the exchange (#2 to #16, no goal state between)",
    );
    // 8 rounds: 88 reports.
    fails_saying(judge_counts(journal(8, 1, 200, 11), 5), "asked 88 times");
    // A goal state failing in every round: 66 GETs in a row, its whole count.
    let goal_state = judge_counts(journal(6, 11, 500, 0), 5);
    assert_eq!(goal_state.verdict, Verdict::Pass, "{goal_state:?}");
    assert_eq!(
        judge_counts(journal(6, 12, 500, 0), 5).verdict,
        Verdict::Fail
    );
    // Gone one interval (1 s) plus its 10 ms start-up after its last attempt, no later.
    assert_eq!(
        judge_counts(journal(6, 1, 200, 11), 1010).verdict,
        Verdict::Pass
    );
    let lingered = judge_counts(journal(6, 1, 200, 11), 1011);
    assert_eq!(lingered.verdict, Verdict::Fail, "{lingered:?}");
    assert!(
        lingered
            .reason
            .unwrap()
            .contains("after its last attempt (#72)")
    );
    // A refused wireserver: nothing to count; its budget (65 s) judges, and it may exit one
    // interval after.
    let refused = |end: u64| {
        let mut r = run(0, end, Exit::Code(1));
        r.clock_ms = end;
        judge_with(&counting, "behaviour.budget", &s, vec![], vec![r])
    };
    assert_eq!(refused(66_000).verdict, Verdict::Pass);
    assert_eq!(refused(66_001).verdict, Verdict::Fail);
}

#[test]
fn the_budget_and_the_deadline() {
    let s = scenario("");
    let over = judge(
        "behaviour.budget",
        &s,
        vec![health(1, 10, 503)],
        vec![run(0, 6000, Exit::Code(1))],
    );
    assert_eq!(over.verdict, Verdict::Fail);
    let killed = judge(
        "behaviour.budget",
        &s,
        vec![health(1, 10, 503)],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert!(killed.reason.unwrap().contains("still running at the"));
    // Exited 1 ms after the budget plus one 200 ms interval: the old fixed margin (1 s + 10 %)
    // let it pass until 4.31 s.
    let beyond = judge(
        "behaviour.budget",
        &s,
        vec![health(1, 10, 503)],
        vec![run(0, 3221, Exit::Code(1))],
    );
    assert_eq!(beyond.verdict, Verdict::Fail, "{beyond:?}");
    let within = judge(
        "behaviour.budget",
        &s,
        vec![health(1, 10, 503)],
        vec![run(0, 3220, Exit::Code(1))],
    );
    assert_eq!(within.verdict, Verdict::Pass, "{within:?}");
}

/// A stall of 40 ms around the end of a 3 s budget (loop start at 10 ms, so the budget ends at
/// 3010 ms): the measured lag is the only slack.
fn stall_at_budget_end() -> Vec<crate::observe::Stall> {
    vec![crate::observe::Stall {
        end_ms: 3060,
        len_ms: 40,
    }]
}

#[test]
fn an_attempt_starting_one_ms_past_the_budget_and_the_measured_lag_fails() {
    let s = scenario("");
    let judge_at = |at: u64| {
        judge_stalled(
            "behaviour.budget",
            &s,
            vec![health(1, 10, 503), health(2, at, 503)],
            vec![run(0, at + 2, Exit::Code(1))],
            stall_at_budget_end(),
        )
    };
    // Seen past the budget but within the lag: not judged either way (before: a pass, so an
    // agent over its budget passed whenever the machine stalled long enough around it).
    let inside = judge_at(3010 + 40);
    assert_eq!(inside.verdict, Verdict::Informational, "{inside:?}");
    assert!(
        inside
            .reason
            .as_deref()
            .unwrap()
            .contains("may have started in time"),
        "{inside:?}"
    );
    assert_eq!(judge_at(3010).verdict, Verdict::Pass);
    let past = judge_at(3010 + 40 + 1);
    assert_eq!(past.verdict, Verdict::Fail, "{past:?}");
    let reason = past.reason.unwrap();
    assert!(
        reason.contains("a new wireserver attempt (#2) started 3.04 s into a 3.00 s budget, 1 ms past it and the runner's 40 ms lag"),
        "{reason}"
    );
    // Without the stall, the budget itself is the limit.
    let quiet = |at: u64| {
        judge(
            "behaviour.budget",
            &s,
            vec![health(1, 10, 503), health(2, at, 503)],
            vec![run(0, at + 2, Exit::Code(1))],
        )
        .verdict
    };
    assert_eq!(quiet(3010), Verdict::Pass);
    assert_eq!(quiet(3011), Verdict::Fail);
}

/// Sending an attempt is CPU-bound work: one seen past the budget by no more than the agent's
/// processes waited for a CPU since the answer before it is not judged, if sent promptly after
/// that answer and its interval it would have been in time (cloud-init 22.4.2 at x50 under
/// load: an attempt it decided on in time arrived 3.68 s past its 20 minutes). Later than
/// that, or with no such waits, or waits before that answer, or a decision itself too late (a
/// reporter 30 % over its budget), it fails.
#[test]
fn an_attempt_the_machine_held_back_is_not_judged_but_a_later_one_fails() {
    let s = scenario("");
    let p = profile();
    // The budget ends at 3010 ms; the 503 before the late attempt is over at `prev + 2` ms,
    // and the interval after it is 200 ms.
    let attempt_at = |prev: u64, at: u64, waited: &[(u64, u64)]| {
        let mut obs = observation(
            &p,
            &s,
            vec![health(1, 10, 503), health(2, prev, 503), health(3, at, 503)],
            vec![run(0, at + 2, Exit::Code(1))],
        );
        obs.agent_waited = waited
            .iter()
            .map(|&(end_ms, len_ms)| crate::observe::Stall { end_ms, len_ms })
            .collect();
        judge_obs("behaviour.budget", &obs)
    };
    let held = [(3000, 60), (3100, 60)];
    let j = attempt_at(2800, 3130, &held);
    assert_eq!(j.verdict, Verdict::Informational, "{j:?}");
    assert!(
        j.reason
            .as_deref()
            .unwrap()
            .contains("waited 120 ms for a CPU"),
        "{j:?}"
    );
    assert_eq!(attempt_at(2800, 3131, &held).verdict, Verdict::Fail);
    assert_eq!(attempt_at(2800, 3130, &[]).verdict, Verdict::Fail);
    assert_eq!(
        attempt_at(2800, 3130, &[(1000, 60), (2000, 60)]).verdict,
        Verdict::Fail
    );
    // Its interval after #2 already ran past the budget (2902 + 200 > 3010): late by decision.
    assert_eq!(
        attempt_at(2900, 3130, &[(3000, 100), (3100, 100)]).verdict,
        Verdict::Fail
    );
}

#[test]
fn the_loop_ends_by_the_budget_plus_its_in_flight_request_plus_the_lag() {
    let s = scenario("");
    // A hung request in flight at the budget's end (3010 ms) is allowed its own duration, at
    // most its timeout (1 s here): held by the agent until `close`, the loop ends there.
    let hang = entry(
        2,
        EndpointId::WireserverHealthJson,
        2900,
        None,
        AnswerKind::Hang,
        None,
    );
    let hung = |close: u64, stalls: Vec<crate::observe::Stall>| {
        judge_stalled(
            "behaviour.budget",
            &s,
            vec![
                health(1, 10, 503),
                Entry {
                    client_closed_ms: Some(close),
                    ..hang.clone()
                },
            ],
            vec![run(0, close, Exit::Code(1))],
            stalls,
        )
    };
    assert_eq!(hung(3500, vec![]).verdict, Verdict::Pass);
    assert_eq!(hung(4010, vec![]).verdict, Verdict::Pass);
    let over = hung(4011, vec![]);
    assert_eq!(over.verdict, Verdict::Fail, "{over:?}");
    assert!(
        over.reason.as_deref().unwrap().contains(
            "its last wireserver request (#2) was over 4.00 s into a 3.00 s budget: 1 ms past the budget plus its in-flight request #2 (1000 ms) plus the runner's 0 ms lag"
        ),
        "{over:?}"
    );
    // A 40 ms stall around then: 40 ms more, not one more.
    let stall = || {
        vec![crate::observe::Stall {
            end_ms: 4060,
            len_ms: 40,
        }]
    };
    assert_eq!(hung(4050, stall()).verdict, Verdict::Pass);
    assert_eq!(hung(4051, stall()).verdict, Verdict::Fail);
}

#[test]
fn the_agent_exits_within_one_interval_of_the_budget_plus_the_lag() {
    let s = scenario("");
    // The last request over at 2902 ms, the budget at 3010 ms, the interval 200 ms.
    let exit_at = |end: u64, stalls: Vec<crate::observe::Stall>| {
        judge_stalled(
            "behaviour.budget",
            &s,
            vec![health(1, 10, 503), health(2, 2900, 503)],
            vec![run(0, end, Exit::Code(1))],
            stalls,
        )
    };
    // Its start-up: spawned at 0, its first request at 10 ms.
    assert_eq!(exit_at(3220, vec![]).verdict, Verdict::Pass);
    let over = exit_at(3221, vec![]);
    assert_eq!(over.verdict, Verdict::Fail, "{over:?}");
    assert!(
        over.reason.as_deref().unwrap().contains(
            "the agent exited 1 ms after the budget (or its last request) plus one 0.20 s interval plus its own start-up's 10 ms plus the runner's 0 ms lag"
        ),
        "{over:?}"
    );
    // Its exit is CPU-bound work like its start: an agent whose first request came 300 ms
    // after its spawn gets those 300 ms to exit too (a loaded machine, or agent time), no more.
    let slow_start = |end: u64| {
        judge_stalled(
            "behaviour.budget",
            &s,
            vec![health(1, 300, 503), health(2, 3200, 503)],
            vec![run(0, end, Exit::Code(1))],
            vec![],
        )
    };
    assert_eq!(slow_start(3800).verdict, Verdict::Pass);
    assert_eq!(slow_start(3801).verdict, Verdict::Fail);
    // An agent that sent nothing has no start-up to measure, whatever the runner's start
    // allowance says: it gets none (a refused wireserver is judged by its exit alone).
    let silent = |end: u64| {
        let mut r = run(0, end, Exit::Code(1));
        r.clock_ms = end;
        judge_stalled("behaviour.budget", &s, vec![], vec![r], vec![])
    };
    assert_eq!(silent(3200).verdict, Verdict::Pass);
    assert_eq!(silent(3201).verdict, Verdict::Fail);
    // In agent time its start-up ran sped up on its clock, unmeasured: not judged either way.
    let x50 = fake_wireserver::clock::TimeScale::new(50).unwrap();
    for end in [3200, 60_000] {
        let mut r = run(0, end, Exit::Code(1));
        r.clock_ms = end;
        let j = judge_at(
            &profile(),
            "behaviour.budget",
            &s,
            vec![],
            vec![r],
            vec![],
            x50,
        );
        assert_eq!(j.verdict, Verdict::Informational, "{j:?}");
    }
    let stall = || {
        vec![crate::observe::Stall {
            end_ms: 3260,
            len_ms: 40,
        }]
    };
    assert_eq!(exit_at(3260, stall()).verdict, Verdict::Pass);
    assert_eq!(exit_at(3261, stall()).verdict, Verdict::Fail);
}

/// A refused wireserver: the fake sees nothing, the sandbox's watch sees each attempt's SYN.
/// Those attempts are the loop, judged as requests would be: its start-up is measured (so its
/// exit is judged in agent time too, where it was not before), its start and end are theirs,
/// and an attempt past the budget is a late one.
#[test]
fn attempts_on_a_refused_wireserver_are_the_loop_the_budget_judges() {
    use crate::observe::{RefusedAttempt, Service};
    let s = scenario("");
    let refused_run = |first: u64, last: u64, end: u64| {
        let mut r = run(0, end, Exit::Code(1));
        r.clock_ms = first;
        r.refused = (first..=last)
            .step_by(200)
            .chain([last])
            .map(|at_ms| RefusedAttempt {
                at_ms,
                service: Service::Wireserver,
            })
            .collect();
        r.refused.dedup();
        r
    };
    let judge_scaled = |r: RunRecord, scale: u32| {
        judge_at(
            &profile(),
            "behaviour.budget",
            &s,
            vec![],
            vec![r],
            vec![],
            fake_wireserver::clock::TimeScale::new(scale).unwrap(),
        )
    };
    // At the wall clock: spawned at 0, first attempt at 300 ms, the budget over at 3300 ms; gone
    // by then plus one 200 ms interval plus its 300 ms start-up.
    assert_eq!(
        judge_scaled(refused_run(300, 3300, 3800), 1).verdict,
        Verdict::Pass
    );
    let late_exit = judge_scaled(refused_run(300, 3300, 3801), 1);
    assert_eq!(late_exit.verdict, Verdict::Fail, "{late_exit:?}");
    // A new attempt after the budget fails, whenever the agent exits.
    let late = judge_scaled(refused_run(300, 3301, 3400), 1);
    assert_eq!(late.verdict, Verdict::Fail, "{late:?}");
    assert!(
        late.reason
            .as_deref()
            .unwrap()
            .contains("a new attempt on the refused wireserver (connection #17) came 3.00 s into a 3.00 s budget, 1 ms past it"),
        "{late:?}"
    );
    // At x50 its start-up (50 ms) was measured: the exit is judged, not left informational,
    // with the runner's unseen lag at that speed (2 ms x 50) besides.
    assert_eq!(
        judge_scaled(refused_run(50, 3050, 3400), 50).verdict,
        Verdict::Pass
    );
    let over = judge_scaled(refused_run(50, 3050, 3401), 50);
    assert_eq!(over.verdict, Verdict::Fail, "{over:?}");
}

/// An exit is the agent's own CPU-bound work: under a light load it runs half of each look and
/// waits for a CPU the rest, so the watcher calls its tree the load then, and those waits are
/// kept apart. Once its exit is due (one interval after its last request) they excuse a late
/// exit (not judged, run again), up to its own start-up, and excuse nothing else: not waits
/// through its interval, not more than its start-up (a spinner 30 % over waits that long too),
/// not a late attempt (seen: cloud-init 26.2 in CI, an exit 8.7 s of agent time past its
/// allowance at x50 with no wait counted).
#[test]
fn waits_while_the_agent_works_excuse_its_exit_only() {
    let (s, p) = (scenario(""), profile());
    let stalls = |v: &[(u64, u64)]| -> Vec<crate::observe::Stall> {
        v.iter()
            .map(|&(end_ms, len_ms)| crate::observe::Stall { end_ms, len_ms })
            .collect()
    };
    // Spawned at 0, its first request at 300 ms (its start-up), the last over at 3202 ms, the
    // budget's end at 3300 ms, the interval 200 ms: gone by 3800 ms; its exit due from 3402 ms.
    let exit_with = |end: u64, working: &[(u64, u64)]| {
        let mut obs = observation(
            &p,
            &s,
            vec![health(1, 300, 503), health(2, 3200, 503)],
            vec![run(0, end, Exit::Code(1))],
        );
        obs.agent_working = stalls(working);
        judge_obs("behaviour.budget", &obs)
    };
    assert_eq!(exit_with(3800, &[]).verdict, Verdict::Pass);
    assert_eq!(exit_with(4000, &[]).verdict, Verdict::Fail);
    // 200 ms late, 240 ms of waits while it exited.
    let held = exit_with(4000, &[(3600, 120), (3900, 120)]);
    assert_eq!(held.verdict, Verdict::Informational, "{held:?}");
    assert!(
        held.reason
            .unwrap()
            .contains("waited 240 ms for a CPU meanwhile, or worked")
    );
    // Fewer waits than it was late by, or waits before its exit was due: a failure.
    assert_eq!(exit_with(4000, &[(3600, 120)]).verdict, Verdict::Fail);
    assert_eq!(exit_with(4000, &[(3350, 400)]).verdict, Verdict::Fail);
    // No more than its start-up (300 ms) however long it waited: 600 ms late fails.
    assert_eq!(
        exit_with(4400, &[(3600, 500), (4300, 500)]).verdict,
        Verdict::Fail
    );
    // An attempt past the budget is not excused by the waits of a busy agent.
    let mut late = observation(
        &p,
        &s,
        vec![health(1, 10, 503), health(2, 3310, 201)],
        vec![run(0, 3320, Exit::Code(0))],
    );
    late.agent_working = stalls(&[(3300, 400)]);
    assert_eq!(
        judge_obs("behaviour.budget", &late).verdict,
        Verdict::Fail,
        "a busy agent's waits excused a late attempt"
    );
}

/// In agent time an exit past the budget is judged only when its allowance (one interval, its
/// own start-up and the runner's lag, both sped up on its clock) is under a fifth of the
/// budget; coarser, an exit the allowance alone would pass is not judged, so an agent 30 % over
/// its budget cannot pass inside it. Found: the bundled reporter 30 % over a 2 s budget passed
/// at a forced x10 under two CPU hogs.
#[test]
fn a_sped_up_exit_is_judged_only_as_finely_as_its_budget_needs() {
    let s = scenario("");
    let x10 = fake_wireserver::clock::TimeScale::new(10).unwrap();
    // Spawned at 0, its first request at `start_up` ms (the budget of 3 s counts from it), its
    // last one 2.9 s later: allowed to exit until the budget + 200 ms + `start_up` + the 20 ms
    // of lag the runner cannot see at x10.
    let exit_at_with = |p: &AgentProfile, start_up: u64, end: u64, scale| {
        judge_at(
            p,
            "behaviour.budget",
            &s,
            vec![health(1, start_up, 503), health(2, start_up + 2900, 503)],
            vec![run(0, end, Exit::Code(1))],
            vec![],
            scale,
        )
    };
    let exit_at = |start_up, end, scale| exit_at_with(&profile(), start_up, end, scale);
    // A fine allowance (320 ms of a 3 s budget, with its start-up again under a fifth): judged
    // as at the wall clock.
    assert_eq!(exit_at(100, 3420, x10).verdict, Verdict::Pass);
    assert_eq!(exit_at(100, 3421, x10).verdict, Verdict::Fail);
    // A coarse one (820 ms, over a fifth of 3 s, by its start-up and lag): an exit past the
    // budget that only the allowance would pass is not judged and says why; a calmer machine
    // might judge it, so the case may run again as for a stall. At the wall clock the same exit
    // passes, its allowance measured.
    let coarse = exit_at(600, 3900, x10);
    assert_eq!(coarse.verdict, Verdict::Informational, "{coarse:?}");
    assert!(coarse.stalled);
    assert!(
        coarse
            .reason
            .as_deref()
            .unwrap()
            .contains("run 1: exited 3.30 s into a 3.00 s budget, past it; at agent time x10 its exit can be judged only within 820 ms"),
        "{coarse:?}"
    );
    // Coarse by its 1 s interval alone (over a fifth of 3 s): the speed, not the machine,
    // leaves it unjudged, and running it again at that speed would not judge it either.
    let mut slow = profile();
    slow.reactions.retry_interval_min = Some(1.0);
    let inherent = exit_at_with(&slow, 10, 3500, x10);
    assert_eq!(inherent.verdict, Verdict::Informational, "{inherent:?}");
    assert!(!inherent.stalled);
    assert!(
        inherent
            .reason
            .as_deref()
            .unwrap()
            .starts_with("not judged at this speed: run 1: exited 3.49 s into a 3.00 s budget"),
        "{inherent:?}"
    );
    assert_eq!(
        exit_at(600, 3900, fake_wireserver::clock::TimeScale::WALL).verdict,
        Verdict::Pass
    );
    // Within the budget it needs no allowance; past the allowance it fails whatever its size.
    assert_eq!(exit_at(600, 3600, x10).verdict, Verdict::Pass);
    assert_eq!(exit_at(600, 4421, x10).verdict, Verdict::Fail);
}

/// A refused wireserver's case is judged by the exit alone, counted from the end of what came
/// before the loop (IMDS); an agent whose clock started its budget at its spawn hides its
/// start-up there, so the start-up counts twice in the resolution. Found in CI: the bundled
/// reporter 30 % over a 2 s budget at a forced x10 under two CPU hogs, its IMDS request 306 ms
/// after its spawn, exited 2.49 s after it and passed inside 0.2 s + 306 ms + the lag.
#[test]
fn a_sped_up_exit_hides_no_overrun_in_its_start_up() {
    let s = scenario("");
    let x10 = fake_wireserver::clock::TimeScale::new(10).unwrap();
    // Spawned at 0, its IMDS request at 370 ms, the wireserver refused: the loop is seen to
    // start with it. 30 % over its 3 s budget counted from its spawn, it exits at 3.9 s: past
    // the budget by less than the allowance (0.2 s + 370 ms + the runner's lag, under a fifth
    // of the budget alone), which would pass it; its start-up counted again puts the
    // resolution over a fifth, so it is not judged.
    let exit_at = |end: u64, scale| {
        let imds = entry(
            1,
            EndpointId::ImdsInstance,
            370,
            Some(372),
            AnswerKind::Default,
            Some(200),
        );
        judge_at(
            &profile(),
            "behaviour.budget",
            &s,
            vec![imds],
            vec![run(0, end, Exit::Code(1))],
            vec![],
            scale,
        )
    };
    let hidden = exit_at(3900, x10);
    assert_eq!(hidden.verdict, Verdict::Informational, "{hidden:?}");
    assert!(hidden.stalled, "{hidden:?}");
    assert!(
        hidden
            .reason
            .as_deref()
            .unwrap()
            .contains("of a loop that may have begun its start-up's 370 ms before it was seen"),
        "{hidden:?}"
    );
    // Past the whole allowance it fails; within the budget it passes; at the wall clock its
    // start-up is the machine's own and an exit is judged by the allowance (no lag there).
    assert_eq!(exit_at(3963, x10).verdict, Verdict::Fail);
    assert_eq!(exit_at(3370, x10).verdict, Verdict::Pass);
    let wall = fake_wireserver::clock::TimeScale::WALL;
    assert_eq!(exit_at(3940, wall).verdict, Verdict::Pass);
    assert_eq!(exit_at(3941, wall).verdict, Verdict::Fail);
}

/// Its exit is CPU-bound work: late by no more than its processes waited for a CPU since its
/// last request (all their waits added up, as the runner measured them), it is not judged; later
/// than that, or with no such waits, it fails. Waits before its last request excuse nothing.
#[test]
fn an_exit_the_machine_held_back_is_not_judged_but_a_later_one_fails() {
    let s = scenario("");
    let p = profile();
    // As above: the last request over at 2902 ms, the exit allowed until 3220 ms.
    let exit_at = |end: u64, waited: &[(u64, u64)]| {
        let mut obs = observation(
            &p,
            &s,
            vec![health(1, 10, 503), health(2, 2900, 503)],
            vec![run(0, end, Exit::Code(1))],
        );
        obs.agent_waited = waited
            .iter()
            .map(|&(end_ms, len_ms)| crate::observe::Stall { end_ms, len_ms })
            .collect();
        judge_obs("behaviour.budget", &obs)
    };
    let held = [(3000, 60), (3100, 60), (3200, 60)];
    let j = exit_at(3400, &held);
    assert_eq!(j.verdict, Verdict::Informational, "{j:?}");
    assert!(
        j.reason
            .as_deref()
            .unwrap()
            .contains("waited 180 ms for a CPU"),
        "{j:?}"
    );
    assert_eq!(exit_at(3401, &held).verdict, Verdict::Fail);
    assert_eq!(exit_at(3400, &[]).verdict, Verdict::Fail);
    // Waits before its last request (2902 ms) held back its loop, not its exit.
    assert_eq!(
        exit_at(3400, &[(1000, 60), (2000, 60), (2900, 60)]).verdict,
        Verdict::Fail
    );
}

/// cloud-init gives each request's retries a budget of their own (http_with_retries per call):
/// its health loop starts at its first POST, 700 ms after the goal state it fetched first. Seen
/// only in agent time, where those 7 ms of the wall's are 700 ms: judged against the goal
/// state's start, its last POST looked late. A flow-wide budget still fails it.
#[test]
fn a_budget_per_request_starts_at_that_requests_first_attempt() {
    let s = scenario("");
    let journal = || {
        let mut j = vec![entry(
            1,
            EndpointId::WireserverGoalstate,
            10,
            Some(12),
            AnswerKind::Default,
            Some(200),
        )];
        j.extend((0..15).map(|k| health(k + 2, 710 + 200 * k, 503)));
        j
    };
    let judge_scope = |p: &AgentProfile| {
        judge_with(
            p,
            "behaviour.budget",
            &s,
            journal(),
            vec![run(0, 3750, Exit::Code(1))],
        )
    };
    let flow = judge_scope(&profile());
    assert_eq!(flow.verdict, Verdict::Fail, "{flow:?}");
    let mut per_request = profile();
    per_request.reactions.budget_scope = crate::agent::BudgetScope::Request;
    let j = judge_scope(&per_request);
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
}

/// The bundled reporter with its budget stretched by 30 % (measured on main): new attempts
/// at 2.02, 2.22 and 2.42 s of a 2 s budget, exit at 2.6 s, which the old margin passed.
#[test]
fn a_30_percent_budget_overrun_fails() {
    let mut s = scenario("");
    s.agent.budget = 2.0;
    let mut journal: Vec<Entry> = (0..10).map(|k| health(k + 1, 10 + 200 * k, 503)).collect();
    for (k, at) in [2030, 2230, 2430].into_iter().enumerate() {
        journal.push(health(11 + k as u64, at, 503));
    }
    let j = judge(
        "behaviour.budget",
        &s,
        journal,
        vec![run(0, 2610, Exit::Code(1))],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(
        j.reason
            .as_deref()
            .unwrap()
            .contains("attempt (#11) started 2.02 s into a 2.00 s budget"),
        "{j:?}"
    );
}

#[test]
fn a_second_report_after_an_accepted_one_fails() {
    let s = scenario("");
    let twice = judge(
        "behaviour.terminal",
        &s,
        vec![health(1, 10, 201), health(2, 30, 201)],
        vec![run(0, 40, Exit::Code(0))],
    );
    assert_eq!(twice.verdict, Verdict::Fail);
    assert!(
        twice
            .reason
            .unwrap()
            .contains("another health report (#2) after #1 was accepted")
    );
    let silent = judge(
        "behaviour.terminal",
        &s,
        vec![],
        vec![run(0, 40, Exit::Code(0))],
    );
    assert_eq!(silent.verdict, Verdict::Fail);
}

/// A resend after the agent's request timeout, when the fake answered late on a machine that
/// stalled: the acceptance may have come too late for the agent, so it is not called. Quick
/// resends, and late ones on a machine that kept time, still fail.
#[test]
fn a_resend_after_a_late_acceptance_on_a_stalled_machine_is_not_called() {
    use crate::observe::Stall;
    let s = scenario("");
    let slow_accept = |seq, at, done| {
        entry(
            seq,
            EndpointId::WireserverHealthJson,
            at,
            Some(done),
            AnswerKind::Default,
            Some(201),
        )
    };
    let journal = || vec![slow_accept(1, 10, 900), health(2, 1020, 201)];
    let stalled = judge_stalled(
        "behaviour.terminal",
        &s,
        journal(),
        vec![run(0, 1100, Exit::Code(0))],
        vec![Stall {
            end_ms: 900,
            len_ms: 200,
        }],
    );
    assert_eq!(stalled.verdict, Verdict::Informational, "{stalled:?}");
    assert!(stalled.reason.unwrap().contains("may have come too late"));
    let quiet = judge(
        "behaviour.terminal",
        &s,
        journal(),
        vec![run(0, 1100, Exit::Code(0))],
    );
    assert_eq!(quiet.verdict, Verdict::Fail, "{quiet:?}");
    let quick = judge_stalled(
        "behaviour.terminal",
        &s,
        vec![health(1, 10, 201), health(2, 40, 201)],
        vec![run(0, 50, Exit::Code(0))],
        vec![Stall {
            end_ms: 12,
            len_ms: 200,
        }],
    );
    assert_eq!(quick.verdict, Verdict::Fail, "{quick:?}");
}

#[test]
fn exit_status_must_match_delivery() {
    let s = scenario("");
    let liar = judge(
        "behaviour.exit",
        &s,
        vec![health(1, 10, 401)],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(liar.verdict, Verdict::Fail);
    assert!(
        liar.reason
            .unwrap()
            .contains("exited with 0; expected one of [1]")
    );
    let honest = judge(
        "behaviour.exit",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(honest.verdict, Verdict::Pass);
}

/// "Not reported" of an accepted report is the machine's doing only when the answer ended
/// within the lag measured before the agent's deadline for it (its request timeout, or its
/// budget): the runner's stall around the request's arrival, the agent's waits for a CPU until
/// that deadline. Any earlier, or with lag only after it, the agent is wrong.
#[test]
fn not_reported_of_a_late_accepted_answer_is_the_machines_only_within_the_lag() {
    let (s, p) = (scenario(""), profile()); // budget 3 s, request timeout 1 s
    let exit_after =
        |at: u64, done: u64, code: i32, stalls: &[(u64, u64)], waits: &[(u64, u64)]| {
            let mut post = health(1, at, 201);
            post.done_ms = Some(done);
            let mut obs = observation(&p, &s, vec![post], vec![run(0, done + 5, Exit::Code(code))]);
            let to = |v: &[(u64, u64)]| {
                v.iter()
                    .map(|&(end_ms, len_ms)| crate::observe::Stall { end_ms, len_ms })
                    .collect()
            };
            obs.stalls = to(stalls);
            obs.agent_waited = to(waits);
            judge_obs("behaviour.exit", &obs)
        };
    // A prompt answer: "not reported" is the agent's error, stall or not.
    assert_eq!(exit_after(10, 12, 1, &[], &[]).verdict, Verdict::Fail);
    assert_eq!(
        exit_after(10, 12, 1, &[(10, 300)], &[(11, 300)]).verdict,
        Verdict::Fail
    );
    // Within a 10 ms stall around the request's arrival of the budget's end (3 s from the
    // run's start); not when the stall came only after the answer was written.
    let late = exit_after(2000, 2995, 1, &[(2000, 10)], &[]);
    assert_eq!(late.verdict, Verdict::Informational, "{late:?}");
    assert!(late.stalled);
    assert!(late.reason.unwrap().contains("may have come too late"));
    assert_eq!(
        exit_after(2000, 2989, 1, &[(2000, 10)], &[]).verdict,
        Verdict::Fail
    );
    assert_eq!(
        exit_after(2000, 2995, 1, &[(2995, 10)], &[]).verdict,
        Verdict::Fail
    );
    // Within 30 ms the agent waited for a CPU before the request's timeout (1 s after it);
    // waits after that deadline cannot make the answer late.
    assert_eq!(
        exit_after(500, 1480, 1, &[], &[(1200, 30)]).verdict,
        Verdict::Informational
    );
    assert_eq!(
        exit_after(500, 1460, 1, &[], &[(1200, 30)]).verdict,
        Verdict::Fail
    );
    assert_eq!(
        exit_after(500, 1480, 1, &[], &[(1700, 300)]).verdict,
        Verdict::Fail
    );
    // A status that is not its "not reported" one is wrong whatever the timing.
    assert_eq!(
        exit_after(2000, 2995, 2, &[(2000, 10)], &[]).verdict,
        Verdict::Fail
    );
}

/// Giving up on a hung request is the agent's CPU-bound work: late by no more than its
/// processes waited for a CPU meanwhile, it is the machine's maybe (and runs again); later, a
/// failure (seen: cloud-init 25.1 at x64 beside eleven other agents, 90.67 s on a 60 s timeout).
#[test]
fn a_timeout_the_machine_held_back_is_not_judged_but_a_later_one_fails() {
    let (s, p) = (scenario(""), profile()); // allowed: 1 s + 0.2 s interval + 1.1 s margin
    let hung = entry(
        1,
        EndpointId::WireserverHealthJson,
        10,
        None,
        AnswerKind::Hang,
        None,
    );
    let gave_up_at = |held: &[(u64, u64)]| {
        let mut obs = observation(
            &p,
            &s,
            vec![hung.clone(), health(2, 2900, 201)],
            vec![run(0, 2910, Exit::Code(0))],
        );
        obs.agent_waited = held
            .iter()
            .map(|&(end_ms, len_ms)| crate::observe::Stall { end_ms, len_ms })
            .collect();
        judge_obs("behaviour.timeout", &obs)
    };
    // 590 ms late; its processes waited 300 + 300 ms for a CPU meanwhile.
    let held = gave_up_at(&[(1500, 300), (2500, 300)]);
    assert_eq!(held.verdict, Verdict::Informational, "{held:?}");
    assert!(held.stalled);
    assert!(held.reason.unwrap().contains("waited 600 ms for a CPU"));
    // 500 ms of waits cannot make it 590 ms late; nor can waits after it gave up.
    assert_eq!(
        gave_up_at(&[(1500, 250), (2500, 250)]).verdict,
        Verdict::Fail
    );
    assert_eq!(gave_up_at(&[(4000, 900)]).verdict, Verdict::Fail);
}

/// A hung connection the agent closed (`client_closed_ms`) says exactly when it gave up.
#[test]
fn closing_a_hung_connection_is_when_the_agent_gave_up() {
    let s = scenario("");
    let mut hung = entry(
        1,
        EndpointId::WireserverHealthJson,
        10,
        None,
        AnswerKind::Hang,
        None,
    );
    hung.client_closed_ms = Some(1_030);
    // Closed at its 1 s timeout, then a long back-off before the next attempt: not a wait on
    // the hung request (by the next request alone it looked like 2.89 s).
    let backed_off = judge(
        "behaviour.timeout",
        &s,
        vec![hung.clone(), health(2, 2_900, 201)],
        vec![run(0, 2_910, Exit::Code(0))],
    );
    assert_eq!(backed_off.verdict, Verdict::Pass, "{backed_off:?}");
    assert!(
        backed_off.evidence.iter().any(|e| e
            .note
            .contains("gave up on #1 within 1.02 s (closed the connection)")),
        "{backed_off:?}"
    );
    // A connection left open past the next request is no sign of giving up: as before.
    hung.client_closed_ms = Some(2_905);
    let leaked = judge(
        "behaviour.timeout",
        &s,
        vec![hung.clone(), health(2, 2_900, 201)],
        vec![run(0, 2_910, Exit::Code(0))],
    );
    assert_eq!(leaked.verdict, Verdict::Fail);
    // Closed by the deadline's kill: it never gave up.
    hung.client_closed_ms = Some(5_990);
    let killed = judge(
        "behaviour.timeout",
        &s,
        vec![hung],
        vec![run(0, 6_000, Exit::KilledAtDeadline)],
    );
    assert_eq!(killed.verdict, Verdict::Fail);
    assert!(killed.reason.unwrap().contains("killed at the deadline"));
}

/// A hung request the runner's kill cut short, before the agent's limit for it was over, is not
/// judged: the agent was still within its timeout (WALinuxAgent's horizon at x17 fell 5.7 s
/// into its 10 s timeout). One it had waited on past its limit fails as before.
#[test]
fn a_hang_the_kill_cut_short_is_not_judged() {
    let s = scenario("");
    let hang = |seq, at, closed: Option<u64>| {
        let mut e = entry(
            seq,
            EndpointId::WireserverHealthJson,
            at,
            None,
            AnswerKind::Hang,
            None,
        );
        e.client_closed_ms = closed;
        e
    };
    let given_up = hang(1, 10, Some(1_030));
    // Its limit: the 1 s timeout, one 200 ms interval, and 1.1 s of margin.
    let cut = |at| {
        judge(
            "behaviour.timeout",
            &s,
            vec![given_up.clone(), hang(2, at, Some(6_000))],
            vec![run(0, 6_000, Exit::KilledAtDeadline)],
        )
    };
    let within = cut(5_000);
    assert_eq!(within.verdict, Verdict::Pass, "{within:?}");
    assert!(
        within.evidence.iter().any(|e| e.note.contains(
            "#2 not judged: the runner ended the agent 1.00 s after unanswered request #2"
        )),
        "{within:?}"
    );
    let past = cut(3_000);
    assert_eq!(past.verdict, Verdict::Fail, "{past:?}");
    assert!(
        past.reason
            .unwrap()
            .contains("waited 3.00 s on unanswered request #2 (killed at the deadline)")
    );
    // Cut short before it ever gave up on one: nothing shows it would have (a deadline inside
    // the limit of its first hang must not pass an agent that hangs forever), and a run again
    // would end the same way.
    let only = |profile: &AgentProfile| {
        judge_with(
            profile,
            "behaviour.timeout",
            &s,
            vec![hang(1, 5_000, Some(6_000))],
            vec![run(0, 6_000, Exit::KilledAtDeadline)],
        )
    };
    let first = only(&profile());
    assert_eq!(first.verdict, Verdict::Informational, "{first:?}");
    assert!(!first.stalled);
    assert!(
        first
            .reason
            .unwrap()
            .contains("not judged, the deadline came first")
    );
    // An agent that never stops on its own is ended at a horizon, wherever its loop is:
    // nothing to judge here (behaviour.budget fails it for still running).
    let mut daemon = profile();
    daemon.reactions.gives_up = false;
    assert_eq!(only(&daemon).verdict, Verdict::Skipped);
    // A late answer it took is no sign it gives up: a goal state delayed past its timeout and
    // answered, then the kill inside the report's limit.
    let late_goal_state = entry(
        1,
        EndpointId::WireserverGoalstate,
        10,
        Some(1_510),
        AnswerKind::Delay,
        None,
    );
    let took_it = judge(
        "behaviour.timeout",
        &s,
        vec![late_goal_state, hang(2, 1_600, Some(3_000))],
        vec![run(0, 3_000, Exit::KilledAtDeadline)],
    );
    assert!(
        took_it
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("not judged, the deadline came first")),
        "{took_it:?}"
    );
    // Killed past its limit inside a long budget: the kill, not the budget, ended the wait.
    let long_budget = Scenario::from_toml_str(
        "id = \"t\"\ntitle = \"t\"\nchecks = [\"*\"]\n[agent]\naction = \"ready\"\nbudget = 100.0\nretry_interval = 0.2\nrequest_timeout = 1.0\n",
        Path::new("t.toml"),
    )
    .unwrap()
    .remove(0);
    let killed_in_budget = judge(
        "behaviour.timeout",
        &long_budget,
        vec![hang(1, 10, Some(6_000))],
        vec![run(0, 6_000, Exit::KilledAtDeadline)],
    );
    assert_eq!(
        killed_in_budget.verdict,
        Verdict::Fail,
        "{killed_in_budget:?}"
    );
}

/// A hung request given up on within its limit, from an arrival the kernel stamped, passes
/// whatever the runner's stalls: a stall only makes the fake's record of the close late, the
/// wait measured longer (afterburn's endless hang at x50 was left unjudged on two of three
/// 50 s attempts by stalls around its arrivals). Past the limit, a stall around the close still
/// leaves it unjudged; from an unstamped arrival a stall around it still does too.
#[test]
fn a_hang_given_up_on_in_time_from_a_stamped_arrival_is_judged_whatever_the_stalls() {
    use crate::observe::Stall;
    let s = scenario("");
    let hang = |closed| {
        let mut e = entry(
            1,
            EndpointId::WireserverHealthJson,
            1_000,
            None,
            AnswerKind::Hang,
            None,
        );
        e.client_closed_ms = Some(closed);
        e
    };
    // Its limit is 2.3 s (1 s timeout, a 200 ms interval, 1.1 s of margin); a 1.5 s stall
    // around the arrival could make a 2.0 s wait look 3.5 s long, or hide one.
    let stall = vec![Stall {
        end_ms: 1_000,
        len_ms: 1_500,
    }];
    let timeout = |e: Entry, stalls: Vec<Stall>| {
        judge_stalled(
            "behaviour.timeout",
            &s,
            vec![e, health(2, 4_500, 201)],
            vec![run(0, 4_600, Exit::Code(0))],
            stalls,
        )
    };
    let stamped_in_time = timeout(stamped(hang(3_000)), stall.clone());
    assert_eq!(
        stamped_in_time.verdict,
        Verdict::Pass,
        "{stamped_in_time:?}"
    );
    let unstamped = timeout(hang(3_000), stall.clone());
    assert_eq!(unstamped.verdict, Verdict::Informational, "{unstamped:?}");
    // Closed 3.4 s after it, with a stall around the close: unjudged, stamped or not.
    let late_close = vec![Stall {
        end_ms: 4_400,
        len_ms: 1_500,
    }];
    let past = timeout(stamped(hang(4_400)), late_close);
    assert_eq!(past.verdict, Verdict::Informational, "{past:?}");
    // No stall: past the limit fails.
    assert_eq!(timeout(stamped(hang(4_400)), vec![]).verdict, Verdict::Fail);
}

/// The interval after a hung request counts from the close when the agent closed it.
#[test]
fn the_interval_after_a_closed_hang_counts_from_the_close() {
    let s = scenario("");
    let mut hung = entry(
        1,
        EndpointId::WireserverHealthJson,
        10,
        None,
        AnswerKind::Hang,
        None,
    );
    // It gave up after 0.5 s (its own timeout) and waited its 0.2 s interval.
    hung.client_closed_ms = Some(510);
    let j = judge(
        "behaviour.interval",
        &s,
        vec![hung.clone(), health(2, 715, 201)],
        vec![run(0, 720, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    // Without the close the end is estimated at the 1 s timeout, and 715 ms looks too soon.
    hung.client_closed_ms = None;
    let estimated = judge(
        "behaviour.interval",
        &s,
        vec![hung, health(2, 715, 201)],
        vec![run(0, 720, Exit::Code(0))],
    );
    assert_eq!(estimated.verdict, Verdict::Fail, "{estimated:?}");
}

#[test]
fn a_410_on_the_xml_report_needs_a_fresh_goal_state() {
    let s = scenario("");
    let gone = entry(
        2,
        EndpointId::WireserverHealthXml,
        20,
        Some(22),
        AnswerKind::Respond,
        Some(410),
    );
    let xml_ok = |seq, at| {
        entry(
            seq,
            EndpointId::WireserverHealthXml,
            at,
            Some(at + 2),
            AnswerKind::Default,
            Some(200),
        )
    };
    let stale = judge(
        "behaviour.refresh",
        &s,
        vec![goal_state(1, 10), gone.clone(), xml_ok(3, 240)],
        vec![run(0, 250, Exit::Code(0))],
    );
    assert_eq!(stale.verdict, Verdict::Fail);
    let fresh = judge(
        "behaviour.refresh",
        &s,
        vec![goal_state(1, 10), gone, goal_state(3, 230), xml_ok(4, 240)],
        vec![run(0, 250, Exit::Code(0))],
    );
    assert_eq!(fresh.verdict, Verdict::Pass);
}

/// A refresh whose result is not used is no refresh: the report after it echoes the
/// incarnation it was served (the goal state moved on as the 410 was given). Judged when
/// nothing moved the goal state between the goal state served and the report; a note when a
/// timer, or a step met in between, may have, or when the refresh was refused.
#[test]
fn the_report_after_a_refresh_echoes_the_incarnation_it_was_served() {
    let moved = "[[fake.endpoint]]\nid = \"wireserver.health.xml\"\n[[fake.endpoint.step]]\nkind = \"respond\"\npreset = \"gone\"\nthen = \"bump-incarnation\"\n";
    // A report echoing `incarnation` while the fake serves incarnation 2.
    let report = |seq, at, status, incarnation: &str| {
        let mut e = entry(
            seq,
            EndpointId::WireserverHealthXml,
            at,
            Some(at + 2),
            if status == 200 {
                AnswerKind::Default
            } else {
                AnswerKind::Respond
            },
            Some(status),
        );
        let body = format!(
            "<Health><GoalStateIncarnation>{incarnation}</GoalStateIncarnation><Container><ContainerId>c</ContainerId><RoleInstanceList><Role><InstanceId>i</InstanceId><Health><State>Ready</State></Health></Role></RoleInstanceList></Container></Health>"
        );
        let served = ServedIds {
            incarnation: "2".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        };
        e.report = Some(wirecheck_oracle::health::parse_xml(
            body.as_bytes(),
            Some(&served),
        ));
        e
    };
    let journal = |echoed: &str| {
        vec![
            goal_state(1, 10),
            report(2, 20, 410, "1"),
            goal_state(3, 230),
            report(4, 240, 200, echoed),
        ]
    };
    let runs = || vec![run(0, 250, Exit::Code(0))];
    let stale = judge("behaviour.refresh", &scenario(moved), journal("1"), runs());
    assert_eq!(stale.verdict, Verdict::Fail, "{stale:?}");
    assert!(
        stale
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("yet report #4 does not echo its incarnation")),
        "{stale:?}"
    );
    let fresh = judge("behaviour.refresh", &scenario(moved), journal("2"), runs());
    assert_eq!(fresh.verdict, Verdict::Pass, "{fresh:?}");
    let noted = |j: &Judgement, why: &str| {
        assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
        assert!(j.evidence.iter().any(|e| e.note.contains(why)), "{j:?}");
    };
    // A timer also moves it: the refresh may have been served the incarnation before it.
    let timed = format!("{moved}[[fake.trigger]]\nafter = 0.5\naction = \"bump-incarnation\"\n");
    let j = judge("behaviour.refresh", &scenario(&timed), journal("1"), runs());
    noted(&j, "moves on a timer");
    // A step met between the refresh and the report moved it (a JSON report taking the next
    // `moved` of a `wireserver.health.*` plan; the refresh's own answer by a step with `then`).
    let glob = moved.replace("wireserver.health.xml", "wireserver.health.*");
    let mut json = entry(
        4,
        EndpointId::WireserverHealthJson,
        235,
        Some(237),
        AnswerKind::Respond,
        Some(410),
    );
    json.answer.step = Some(StepRef {
        endpoint: "wireserver.health.*".into(),
        index: 0,
        repeat: 2,
    });
    let mut between = journal("1");
    between.insert(3, json);
    between[4].seq = 5;
    let j = judge("behaviour.refresh", &scenario(&glob), between, runs());
    noted(&j, "a request in between moved the goal state on");
    let on_fetch = format!(
        "{moved}[[fake.endpoint]]\nid = \"wireserver.goalstate\"\n[[fake.endpoint.step]]\nkind = \"delay\"\nseconds = 0.0\nthen = \"bump-incarnation\"\n"
    );
    let mut fetched = journal("1");
    fetched[2].answer.kind = AnswerKind::Delay;
    fetched[2].answer.step = Some(StepRef {
        endpoint: "wireserver.goalstate".into(),
        index: 0,
        repeat: 1,
    });
    let j = judge("behaviour.refresh", &scenario(&on_fetch), fetched, runs());
    noted(&j, "a request in between moved the goal state on");
    // A refresh that was refused served nothing to echo.
    let mut refused = journal("1");
    refused[2].answer = Answer {
        kind: AnswerKind::Respond,
        status: Some(503),
        step: None,
    };
    let j = judge("behaviour.refresh", &scenario(moved), refused, runs());
    noted(&j, "no goal state was served whole");
}

/// `entry` as the fake journals it: with `Host`, these headers, and the findings the fake's
/// request rulebook records for it (`fake_wireserver::inspect`).
fn request(
    seq: u64,
    endpoint: EndpointId,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> Entry {
    let mut e = entry(
        seq,
        endpoint,
        seq * 10,
        Some(seq * 10 + 1),
        AnswerKind::Default,
        Some(200),
    );
    e.method = method.into();
    e.target = target.into();
    e.headers = std::iter::once(("Host", "h"))
        .chain(headers.iter().copied())
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect();
    e.findings = fake_wireserver::inspect::request_findings(&e);
    e
}

fn protocol_verdicts(journal: Vec<Entry>) -> (Judgement, Judgement) {
    let s = scenario("");
    let runs = || vec![run(0, 1000, Exit::Code(0))];
    (
        judge("protocol.request", &s, journal.clone(), runs()),
        judge("protocol.headers", &s, journal, runs()),
    )
}

/// A request the rulebook did not inspect (the admin API asked on IMDS, a request that was not
/// HTTP) says nothing about headers: `protocol.headers` does not count it as judged, so a journal
/// of only such requests is not a pass. `protocol.request` fails them on their own finding.
#[test]
fn requests_the_rulebook_did_not_inspect_are_not_judged_for_headers() {
    for (target, id) in [
        ("/__admin/journal", "path.admin-on-agent-listener"),
        ("/metadata/instance", "http.malformed"),
    ] {
        let mut e = request(1, EndpointId::ImdsUnknown, "GET", target, &[]);
        e.findings = vec![wirecheck_oracle::Finding::warning(id, "not inspected")];
        let (r, h) = protocol_verdicts(vec![e]);
        assert_eq!(h.verdict, Verdict::Skipped, "{id}: {h:?}");
        assert_ne!(r.verdict, Verdict::Pass, "{id}: {r:?}");
    }
}

#[test]
fn missing_metadata_header_and_wrong_content_type_are_caught() {
    let imds = request(
        1,
        EndpointId::ImdsInstance,
        "GET",
        "/metadata/instance?api-version=2021-08-01",
        &[],
    );
    let post = request(
        2,
        EndpointId::WireserverHealthJson,
        "POST",
        "/provisioning/health",
        &[("Content-Type", "text/xml"), ("x-ms-guest-agent-name", "t")],
    );
    let (_, j) = protocol_verdicts(vec![imds, post]);
    assert_eq!(j.verdict, Verdict::Fail);
    let notes: Vec<&str> = j.evidence.iter().map(|e| e.note.as_str()).collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].contains("[header.missing.metadata]"), "{notes:?}");
    assert!(
        notes[1].contains("[header.unusual.content-type]"),
        "{notes:?}"
    );
    assert_eq!(
        j.reason.as_deref(),
        Some(
            "IMDS request without the Metadata: true header (the platform answers 400) (and 1 more)"
        )
    );
    assert!(
        j.evidence[1]
            .excerpt
            .as_deref()
            .unwrap()
            .contains("Content-Type: text/xml")
    );
}

/// The protocol checks grade what the fake's rulebook records: each rule gives the verdicts
/// the checks gave when they derived the rules themselves (request, headers).
#[test]
fn the_protocol_checks_grade_the_fakes_request_findings() {
    use Verdict::{Fail, NonStrict, Pass, Skipped};
    const MD: (&str, &str) = ("Metadata", "true");
    const XV: (&str, &str) = ("x-ms-version", "2012-11-30");
    const XML: (&str, &str) = ("Content-Type", "text/xml; charset=utf-8");
    const JSON: (&str, &str) = ("Content-Type", "application/json");
    const GUEST: (&str, &str) = ("x-ms-guest-agent-name", "t");
    let imds = "/metadata/instance?api-version=2021-08-01";
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        Verdict,
        Verdict,
    );
    let cases: &[Case] = &[
        (
            "right IMDS",
            "imds.instance",
            "GET",
            imds,
            &[MD],
            Pass,
            Pass,
        ),
        (
            "Metadata: True",
            "imds.instance",
            "GET",
            imds,
            &[("Metadata", "True")],
            Pass,
            Pass,
        ),
        ("no Metadata", "imds.instance", "GET", imds, &[], Pass, Fail),
        (
            "Metadata: false",
            "imds.instance",
            "GET",
            imds,
            &[("Metadata", "false")],
            Pass,
            Fail,
        ),
        (
            "X-Forwarded-For",
            "imds.instance",
            "GET",
            imds,
            &[MD, ("X-Forwarded-For", "1.2.3.4")],
            Fail,
            Fail,
        ),
        (
            "no api-version",
            "imds.instance",
            "GET",
            "/metadata/instance",
            &[MD],
            Fail,
            Pass,
        ),
        (
            "api-version twice",
            "imds.instance",
            "GET",
            "/metadata/instance?api-version=2021-08-01&api-version=2021-08-01",
            &[MD],
            Fail,
            Pass,
        ),
        (
            "unsupported api-version",
            "imds.instance",
            "GET",
            "/metadata/instance?api-version=1999-01-01",
            &[MD],
            Fail,
            Pass,
        ),
        (
            "IMDS POST",
            "imds.instance",
            "POST",
            imds,
            &[MD],
            Fail,
            Pass,
        ),
        (
            "unknown IMDS path",
            "imds.unknown",
            "GET",
            "/metadata/nothing?api-version=2021-08-01",
            &[MD],
            Fail,
            Pass,
        ),
        (
            "goal state",
            "wireserver.goalstate",
            "GET",
            "/machine/?comp=goalstate",
            &[XV],
            Pass,
            Pass,
        ),
        (
            "goal state, no slash",
            "wireserver.goalstate",
            "GET",
            "/machine?comp=goalstate",
            &[XV],
            Pass,
            Pass,
        ),
        (
            "goal state on /",
            "wireserver.goalstate",
            "GET",
            "/?comp=goalstate",
            &[XV],
            NonStrict,
            Pass,
        ),
        (
            "goal state POST",
            "wireserver.goalstate",
            "POST",
            "/machine/?comp=goalstate",
            &[XV],
            Fail,
            Pass,
        ),
        (
            "goal state, no x-ms-version",
            "wireserver.goalstate",
            "GET",
            "/machine/?comp=goalstate",
            &[],
            Pass,
            NonStrict,
        ),
        (
            "goal state, x-ms-version 2015",
            "wireserver.goalstate",
            "GET",
            "/machine/?comp=goalstate",
            &[("x-ms-version", "2015-04-05")],
            Pass,
            NonStrict,
        ),
        (
            "versions on /machine",
            "wireserver.versions",
            "GET",
            "/machine?comp=versions",
            &[],
            NonStrict,
            Skipped,
        ),
        (
            "XML health",
            "wireserver.health.xml",
            "POST",
            "/machine?comp=health",
            &[XV, XML],
            Pass,
            Pass,
        ),
        (
            "XML health, no Content-Type",
            "wireserver.health.xml",
            "POST",
            "/machine?comp=health",
            &[XV],
            Pass,
            NonStrict,
        ),
        (
            "XML health as JSON",
            "wireserver.health.xml",
            "POST",
            "/machine?comp=health",
            &[XV, JSON],
            Pass,
            Fail,
        ),
        (
            "JSON health",
            "wireserver.health.json",
            "POST",
            "/provisioning/health",
            &[JSON, GUEST],
            Pass,
            Pass,
        ),
        (
            "JSON health as text",
            "wireserver.health.json",
            "POST",
            "/provisioning/health",
            &[("Content-Type", "text/plain"), GUEST],
            Pass,
            Fail,
        ),
        (
            "JSON health GET",
            "wireserver.health.json",
            "GET",
            "/provisioning/health",
            &[JSON, GUEST],
            Fail,
            Pass,
        ),
        (
            "telemetry as JSON",
            "wireserver.telemetry",
            "POST",
            "/machine?comp=telemetrydata",
            &[XV, JSON],
            Pass,
            NonStrict,
        ),
        (
            "shared config",
            "wireserver.config",
            "GET",
            "/machine/?comp=config&type=sharedConfig",
            &[XV],
            Pass,
            Pass,
        ),
        (
            "unknown config type",
            "wireserver.config",
            "GET",
            "/machine/?comp=config&type=x",
            &[XV],
            NonStrict,
            Pass,
        ),
        (
            "unknown wireserver path",
            "wireserver.unknown",
            "GET",
            "/nothing",
            &[],
            Fail,
            Skipped,
        ),
        (
            "everything wrong at IMDS",
            "imds.instance",
            "POST",
            "/metadata/instance?a=1&a=2",
            &[("X-Forwarded-For", "x")],
            Fail,
            Fail,
        ),
        (
            "IMDS on the wireserver",
            "wireserver.metadata",
            "GET",
            "/metadata/instance/compute?api-version=2018-02-01",
            &[],
            Pass,
            Skipped,
        ),
        (
            "health service GET",
            "wireserver.healthservice",
            "GET",
            "/HealthService",
            &[],
            Fail,
            Skipped,
        ),
        (
            "hostplugin status GET",
            "hostplugin.status",
            "GET",
            "/status",
            &[],
            Fail,
            Skipped,
        ),
        (
            "role properties, no Content-Type",
            "wireserver.roleproperties",
            "POST",
            "/machine?comp=roleProperties",
            &[XV, ("x-ms-agent-name", "a")],
            Pass,
            NonStrict,
        ),
        (
            "hosting config, no x-ms-version",
            "wireserver.config.hosting",
            "GET",
            "/machine/?comp=config&type=hostingEnvironmentConfig",
            &[],
            Pass,
            NonStrict,
        ),
        (
            "x-ms headers to IMDS",
            "imds.instance",
            "GET",
            imds,
            &[MD, XV],
            Pass,
            Pass,
        ),
        // Several refusals in one request: each is recorded and graded by its check (before
        // issue 14 the fake journaled only the first, so an unsupported api-version behind a
        // missing Metadata header went unjudged).
        (
            "no Metadata and an unsupported api-version",
            "imds.instance",
            "GET",
            "/metadata/instance?api-version=1999-01-01",
            &[],
            Fail,
            Fail,
        ),
        (
            "Metadata not true and a duplicate query parameter",
            "imds.instance",
            "GET",
            "/metadata/instance?api-version=2021-08-01&api-version=2021-08-01",
            &[("Metadata", "yes")],
            Fail,
            Fail,
        ),
        // The one change: the check failed this on its own while the fake serves it (200);
        // the rulebook is the fake's, so `/metadata/versions` needs no api-version.
        (
            "IMDS versions, no api-version",
            "imds.versions",
            "GET",
            "/metadata/versions",
            &[MD],
            Pass,
            Pass,
        ),
    ];
    for (what, endpoint, method, target, headers, request_verdict, headers_verdict) in cases {
        let endpoint: EndpointId = endpoint.parse().expect("an endpoint id");
        let e = request(1, endpoint, method, target, headers);
        let (r, h) = protocol_verdicts(vec![e.clone()]);
        assert_eq!(
            r.verdict, *request_verdict,
            "{what}: protocol.request {r:?} from {:?}",
            e.findings
        );
        assert_eq!(
            h.verdict, *headers_verdict,
            "{what}: protocol.headers {h:?} from {:?}",
            e.findings
        );
    }
}

/// The checks grade the journal, they do not derive the rules again: a request the fake
/// recorded no finding for is not held against the agent, and one it recorded is.
#[test]
fn the_protocol_checks_judge_the_journals_findings_only() {
    let mut e = request(
        1,
        EndpointId::ImdsInstance,
        "GET",
        "/metadata/instance",
        &[],
    );
    assert!(!e.findings.is_empty());
    let (r, h) = protocol_verdicts(vec![e.clone()]);
    assert_eq!((r.verdict, h.verdict), (Verdict::Fail, Verdict::Fail));
    e.findings.clear();
    let (r, h) = protocol_verdicts(vec![e]);
    assert_eq!((r.verdict, h.verdict), (Verdict::Pass, Verdict::Pass));
}

#[test]
fn ready_must_be_ready() {
    let s = scenario("");
    let mut post = health(1, 10, 201);
    post.report = Some(wirecheck_oracle::health::parse_json(
        br#"{"state":"NotReady","details":{"subStatus":"ProvisioningFailed","description":"x"}}"#,
    ));
    let j = judge(
        "report.state",
        &s,
        vec![post],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Fail);
    assert!(
        j.reason
            .unwrap()
            .contains("expected Ready; got NotReady/ProvisioningFailed")
    );
}

#[test]
fn an_expected_reason_part_and_state_override_the_action() {
    let s = scenario(
        "[expect]\nstate = \"NotReady\"\nsubstatus = \"ProvisioningFailed\"\nreason_contains = \"querying IMDS\"\n",
    );
    let report = |reason: &str| {
        let mut post = health(1, 10, 201);
        let body = format!(
            r#"{{"state":"NotReady","details":{{"subStatus":"ProvisioningFailed","description":"result=error|reason={reason}|agent=t/1|vm_id={vm}|timestamp=2026-01-01T00:00:00+00:00|documentation_url=https://aka.ms/linuxprovisioningerror"}}}}"#,
            vm = crate::scenario::DEFAULT_VM_ID
        );
        post.report = Some(wirecheck_oracle::health::parse_json(body.as_bytes()));
        post
    };
    let good = judge(
        "report.description",
        &s,
        vec![report("connection error querying IMDS")],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(good.verdict, Verdict::Pass, "{good:?}");
    let state = judge(
        "report.state",
        &s,
        vec![report("x")],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(state.verdict, Verdict::Pass, "{state:?}");
    let bad = judge(
        "report.description",
        &s,
        vec![report("disk full")],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(bad.verdict, Verdict::Fail);
    assert!(
        bad.reason
            .unwrap()
            .contains("does not mention \"querying IMDS\"")
    );
}

/// In a guest the agent chooses its own failure text: judged against what its profile
/// declares for the scenario (`[guest.reasons]`), as exception text too, and failed when the
/// profile declares nothing; the expected state is the terminal report's, an in-progress run
/// before it staying in progress.
#[test]
fn a_guest_failure_is_judged_by_the_reason_its_profile_declares() {
    let s = scenario(
        "[expect]\nstate = \"NotReady\"\nsubstatus = \"ProvisioningFailed\"\n[guest]\n[guest.fail.useradd]\nexit = 9\n",
    );
    let text = PROFILE
        .replace("capabilities = [", "attach = \"sandbox\"\nfailure_description = \"exception-text\"\ncapabilities = [\"guest\", ")
        + "[guest.reasons]\nt = \"user account\"\n";
    let declared = AgentProfile::from_toml_str(&text, Path::new("t.toml")).unwrap();
    let undeclared = AgentProfile::from_toml_str(
        &text.replace("[guest.reasons]\nt = \"user account\"\n", ""),
        Path::new("t.toml"),
    )
    .unwrap();
    let report = |desc: &str| {
        let mut post = health(1, 10, 201);
        let body = format!(
            r#"{{"state":"NotReady","details":{{"subStatus":"ProvisioningFailed","description":"{desc}"}}}}"#
        );
        post.report = Some(wirecheck_oracle::health::parse_json(body.as_bytes()));
        post
    };
    let judge_desc = |p: &AgentProfile, desc: &str| {
        judge_with(
            p,
            "report.description",
            &s,
            vec![report(desc)],
            vec![run(0, 20, Exit::Code(0))],
        )
    };
    let said = "[ProvisionError] Failed to create user account:azureuser, Retcode: 9";
    let good = judge_desc(&declared, said);
    assert_eq!(good.verdict, Verdict::Pass, "{good:?}");
    let vague = judge_desc(&declared, "[ProvisionError] Failed to provision");
    assert_eq!(vague.verdict, Verdict::Fail, "{vague:?}");
    assert!(
        vague
            .reason
            .as_deref()
            .unwrap()
            .contains("does not mention \"user account\""),
        "{vague:?}"
    );
    let silent = judge_desc(&undeclared, said);
    assert_eq!(silent.verdict, Verdict::Fail, "{silent:?}");
    assert!(
        silent
            .reason
            .as_deref()
            .unwrap()
            .contains("declares none for t ([guest.reasons])"),
        "{silent:?}"
    );
    // Ready although the guest failed: the expected state is the failure.
    let mut ready = health(1, 10, 201);
    ready.report = Some(wirecheck_oracle::health::parse_json(
        br#"{"state":"Ready"}"#,
    ));
    let state = judge_with(
        &declared,
        "report.state",
        &s,
        vec![ready],
        vec![run(0, 20, Exit::Code(0))],
    );
    assert_eq!(state.verdict, Verdict::Fail, "{state:?}");
}

/// guest.users judges what the sandbox read of the guest after the run, not what the agent
/// said: a Ready report without the user fails, and so does a passwd it made unreadable.
#[test]
fn the_guests_users_are_judged_from_its_passwd_after_the_run() {
    let s = scenario("[expect]\nusers = [\"azureuser\"]\n[guest]\n");
    let p = profile();
    let users = |added: Option<Vec<&str>>| {
        let mut obs = observation(&p, &s, vec![], vec![run(0, 20, Exit::Code(0))]);
        obs.guest_users = added.map(|a| a.into_iter().map(String::from).collect());
        judge_obs("guest.users", &obs)
    };
    assert_eq!(users(Some(vec!["azureuser"])).verdict, Verdict::Pass);
    let missing = users(Some(vec!["someone"]));
    assert_eq!(missing.verdict, Verdict::Fail, "{missing:?}");
    assert!(
        missing
            .reason
            .as_deref()
            .unwrap()
            .contains("user \"azureuser\" is not in the guest's /etc/passwd"),
        "{missing:?}"
    );
    let unreadable = users(None);
    assert_eq!(unreadable.verdict, Verdict::Fail, "{unreadable:?}");
    assert!(
        unreadable
            .reason
            .as_deref()
            .unwrap()
            .contains("could not be read"),
        "{unreadable:?}"
    );
}

/// The profile of a cloud-init 25.1-like agent: its dialect declared in `[encoded]`.
fn declared_profile() -> AgentProfile {
    let text = format!(
        "{PROFILE}[encoded]\nquote = \"'\"\norder = \"cloud-init\"\ntimestamp = \"+00:00\"\ndescription_trim = 512\nkvp_cut = 1023\n"
    );
    AgentProfile::from_toml_str(&text, Path::new("t.toml")).unwrap()
}

/// A cloud-init 25.1 error report (no field needs quoting in these tests).
fn ci_report(reason: &str, agent: &str, timestamp: &str) -> String {
    format!(
        "result=error|reason={reason}|agent={agent}|device=/dev/sdb|vm_id={}|timestamp={timestamp}|documentation_url=https://aka.ms/linuxprovisioningerror",
        crate::scenario::DEFAULT_VM_ID
    )
}

fn chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn failure_scenario(reason: &str) -> Scenario {
    let text = format!(
        "id = \"t\"\ntitle = \"t\"\nchecks = [\"*\"]\n[agent]\naction = \"failure\"\nprotocol = \"json\"\nreason = {reason:?}\ndata = [\"device=/dev/sdb\"]\n"
    );
    Scenario::from_toml_str(&text, Path::new("t.toml"))
        .unwrap()
        .remove(0)
}

/// One failure run whose health report carries `description`, and a pool whose
/// PROVISIONING_REPORT is `kvp`.
fn judge_failure(
    check: &str,
    profile: &AgentProfile,
    reason: &str,
    description: &str,
    kvp: Option<&str>,
) -> Judgement {
    let pool = kvp
        .map(|v| {
            wirecheck_oracle::kvp::encode_record("PROVISIONING_REPORT", v)
                .unwrap()
                .to_vec()
        })
        .unwrap_or_default();
    judge_failure_pool(check, profile, reason, description, pool)
}

/// [`judge_failure`] with the pool file's bytes given whole.
fn judge_failure_pool(
    check: &str,
    profile: &AgentProfile,
    reason: &str,
    description: &str,
    pool: Vec<u8>,
) -> Judgement {
    let s = failure_scenario(reason);
    let mut post = health(1, 10, 200);
    let body = serde_json::json!({
        "state": "NotReady",
        "details": {"subStatus": "ProvisioningFailed", "description": description},
    })
    .to_string();
    post.report = Some(wirecheck_oracle::health::parse_json(body.as_bytes()));
    let mut r = run(0, 20, Exit::Code(0));
    r.run.action = crate::agent::Action::Failure;
    r.run.reason = Some(reason.into());
    r.run.data = vec![("device".into(), "/dev/sdb".into())];
    let obs = Observation {
        scenario: &s,
        profile,
        journal: vec![post],
        served: ServedIds {
            incarnation: "1".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        },
        imds_vm_id: None,
        pool_view: decode_pool(&pool),
        pool: Some(pool),
        runs: vec![r],
        stalls: Vec::new(),
        agent_waited: Vec::new(),
        agent_working: Vec::new(),
        time_scale: Default::default(),
        deadline: s.agent.deadline,
        guest_calls: Vec::new(),
        guest_users: None,
    };
    let def = super::get(crate::catalog::CheckId::from_id(check).unwrap());
    (def.run)(&obs)
}

const TS: &str = "2026-12-01T09:47:38.966203+00:00";

#[test]
fn a_declared_trim_is_kept_in_characters_and_nowhere_else() {
    let declared = declared_profile();
    let reason = format!("disk error: {}", "0123456789abcdef€".repeat(40));
    let full = ci_report(&reason, "Cloud-Init/25.1.4", TS);
    let first_512 = chars(&full, 512);
    let j = judge_failure("report.description", &declared, &reason, &first_512, None);
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");

    // Cut at 512 bytes (on a character boundary) instead of 512 characters.
    let mut at = 512;
    while !full.is_char_boundary(at) {
        at -= 1;
    }
    let j = judge_failure("report.description", &declared, &reason, &full[..at], None);
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.unwrap().contains("keeps exactly 512"));

    // Not cut at all, though the report cannot fit.
    let j = judge_failure("report.description", &declared, &reason, &full, None);
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");

    // Without the declaration the same 512-character cut is a report that lost its fields.
    let j = judge_failure("report.description", &profile(), &reason, &first_512, None);
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}

/// The evidence notes of `j`, one string each.
fn notes(j: &Judgement) -> Vec<&str> {
    j.evidence.iter().map(|e| e.note.as_str()).collect()
}

/// A request over the platform's 4096 bytes answered by a short report of the agent's own
/// (azure-init main on `report.description.long`): nothing was cut, so the missing `device`
/// is missing, not "cut off by the trim", and the whole documentation_url is not "cut short".
#[test]
fn a_field_missing_from_an_untrimmed_description_is_called_missing() {
    let reason = format!("disk error: {}", "0123456789abcdef€".repeat(400));
    let own = format!(
        "result=error|reason=failed to determine username|agent=Azure-Init/0.1.1|pps_type=None|vm_id={}|timestamp={TS}|documentation_url=https://aka.ms/linuxprovisioningerror",
        crate::scenario::DEFAULT_VM_ID
    );
    let j = judge_failure("report.description", &profile(), &reason, &own, None);
    let notes = notes(&j);
    assert!(
        notes.iter().any(|n| n.starts_with(&format!(
            "#1 data device is missing, not cut off by the trim: the {}-byte description has room for it",
            own.len()
        ))),
        "{j:?}"
    );
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("cut off by the trim") && !n.contains("not cut off")),
        "{j:?}"
    );
    assert!(!notes.iter().any(|n| n.contains("cut short")), "{j:?}");
}

/// The same request trimmed to the 4096 bytes: what did not fit was cut off by the trim.
#[test]
fn a_field_the_trim_left_no_room_for_is_called_cut_off() {
    let reason = format!("disk error: {}", "0123456789abcdef€".repeat(400));
    let full = ci_report(&reason, "Cloud-Init/25.1.4", TS);
    let mut at = super::DESCRIPTION_LIMIT;
    while !full.is_char_boundary(at) {
        at -= 1;
    }
    let trimmed = &full[..at];
    let j = judge_failure("report.description", &profile(), &reason, trimmed, None);
    let notes = notes(&j);
    for what in [
        "data device was cut off by the trim",
        "`vm_id` cut off by the trim",
        "`documentation_url` cut off by the trim",
    ] {
        assert!(
            notes.contains(&format!("#1 {what}").as_str()),
            "{what}: {j:?}"
        );
    }
    assert!(!notes.iter().any(|n| n.contains("is missing")), "{j:?}");
}

#[test]
fn the_declared_dialect_and_timestamp_style_are_required() {
    let declared = declared_profile();
    let good = ci_report("boom", "Cloud-Init/25.1.4", TS);
    let j = judge_failure("report.description", &declared, "boom", &good, Some(&good));
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    let j = judge_failure("kvp.report", &declared, "boom", &good, Some(&good));
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");

    let azure = ci_report("boom", "Azure-Init/0.1.1", TS).replace("|vm_id", "|pps_type=None|vm_id");
    let j = judge_failure("report.description", &declared, "boom", &azure, None);
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(
        j.reason
            .unwrap()
            .contains("declared to write the cloud-init dialect")
    );

    let naive = ci_report("boom", "Cloud-Init/25.1.4", "2026-12-01T09:47:38.966203");
    for check in ["report.description", "kvp.report"] {
        let j = judge_failure(check, &declared, "boom", &naive, Some(&naive));
        assert_eq!(j.verdict, Verdict::Fail, "{check}: {j:?}");
        assert!(
            j.reason.unwrap().contains("not in the declared style"),
            "{check}"
        );
    }
}

#[test]
fn the_kvp_record_and_the_description_are_cut_from_one_report() {
    let declared = declared_profile();
    let reason = format!("disk error: {}", "0123456789abcdef€".repeat(80));
    let full = ci_report(&reason, "Cloud-Init/25.1.4", TS);
    let desc = chars(&full, 512);
    let kvp = chars(&full, 1023);
    let j = judge_failure("kvp.report", &declared, &reason, &desc, Some(&kvp));
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");

    // Cut where the host's byte limit would be, not where the agent declares it cuts.
    let kvp_1022 = chars(&full, 1022);
    let j = judge_failure("kvp.report", &declared, &reason, &desc, Some(&kvp_1022));
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.unwrap().contains("keeps exactly 1023"));

    // The description's 512 characters, then something else than the requested report.
    let tampered = format!(
        "{desc}{}",
        &chars(&full, 1023)[desc.len()..].replace('€', "$")
    );
    assert_eq!(tampered.chars().count(), 1023);
    let j = judge_failure("kvp.report", &declared, &reason, &desc, Some(&tampered));
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.unwrap().contains("is not the requested"));

    // A record that is not the report the description was cut from.
    let other = chars(
        &ci_report(&reason.replace('€', "$"), "Cloud-Init/25.1.4", TS),
        1023,
    );
    let j = judge_failure("kvp.report", &declared, &reason, &desc, Some(&other));
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.unwrap().contains("differs from the description"));
}

/// azure-init main's long report: 1022-byte chunks under the one key, cut inside a character.
/// The host keeps one record per key, so the report is not delivered whole, though its chunks
/// joined are the description sent (all chunks considered, not the first alone).
#[test]
fn a_report_in_chunks_under_one_key_fails_kvp_report_as_the_host_sees_it() {
    let reason = "failed to provision user";
    let report = format!(
        "result=error|reason={reason}|agent=Azure-Init/0.1.1|device=/dev/sdb|user=x{}|pps_type=None|vm_id={}|timestamp={TS}",
        "\u{20ac}".repeat(400),
        crate::scenario::DEFAULT_VM_ID
    );
    let mut pool = Vec::new();
    for chunk in report.as_bytes().chunks(1022) {
        let mut record = [0u8; wirecheck_oracle::kvp::RECORD_SIZE];
        record[..19].copy_from_slice(b"PROVISIONING_REPORT");
        record[512..512 + chunk.len()].copy_from_slice(chunk);
        pool.extend_from_slice(&record);
    }
    let j = judge_failure_pool("kvp.report", &profile(), reason, &report, pool);
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    let why = j.reason.clone().unwrap();
    assert!(
        why.starts_with("the report is not delivered whole"),
        "{why}"
    );
    assert!(why.contains("one record per key"), "{why}");
    assert!(
        j.evidence.iter().any(|e| e
            .note
            .starts_with("equal to the description of health report #1")),
        "{j:?}"
    );
    assert!(!why.contains("differs from the description"), "{why}");
}

/// Two different reports under the one key (two runs appending): the host keeps one, and
/// nothing says which, so it may show the stale one. An identical copy loses nothing.
#[test]
fn an_earlier_different_report_under_the_key_fails_kvp_report() {
    let reason = "boom";
    let report = ci_report(reason, "Cloud-Init/25.1.4", TS);
    let stale = ci_report("an earlier failure", "Cloud-Init/25.1.4", TS);
    let pool = |first: &str| {
        wirecheck_oracle::kvp::encode_pool([
            ("PROVISIONING_REPORT", first),
            ("PROVISIONING_REPORT", report.as_str()),
        ])
        .unwrap()
    };
    let j = judge_failure_pool("kvp.report", &profile(), reason, &report, pool(&stale));
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(
        j.reason
            .unwrap()
            .starts_with("the host may show another report"),
    );
    let j = judge_failure_pool("kvp.report", &profile(), reason, &report, pool(&report));
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
}

#[test]
fn encoded_tables_name_the_field_that_is_wrong() {
    let load = |table: &str| {
        AgentProfile::from_toml_str(&format!("{PROFILE}[encoded]\n{table}"), Path::new("t.toml"))
    };
    let base = "quote = \"'\"\norder = \"cloud-init\"\ntimestamp = \"+00:00\"\n";
    assert!(load(base).unwrap().encoded.is_some());
    let err = load(&base.replace("\"cloud-init\"", "\"azure-init\"")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("encoded.order"));
    let err = load(&base.replace("\"'\"", "\"`\"")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("encoded.quote"));
    let err = load(&format!("{base}kvp_cut = 2048\n")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("encoded.kvp_cut"));
    let err = load(&format!("{base}description_trim = 0\n")).unwrap_err();
    assert_eq!(err.field.as_deref(), Some("encoded.description_trim"));
    assert!(load(&base.replace("+00:00", "Z")).is_err());
}

#[test]
fn a_503_and_imds_may_have_waits_of_their_own() {
    // cloud-init 25.1: 5 s between wireserver attempts, 1 s after a 503 (Retry-After default)
    // and between IMDS attempts.
    let text = PROFILE.replace(
        "refresh_goal_state_on_410 = true\n",
        "refresh_goal_state_on_410 = true\nretry_interval_min = 5.0\nretry_interval_503 = 1.0\nimds_retry_interval_min = 1.0\n",
    );
    let p = AgentProfile::from_toml_str(&text, Path::new("t.toml")).unwrap();
    let s = scenario("");
    let interval = |journal: Vec<Entry>| {
        judge_with(
            &p,
            "behaviour.interval",
            &s,
            journal,
            vec![run(0, 9000, Exit::Code(0))],
        )
    };
    let after_503 = interval(vec![health(1, 10, 503), health(2, 1020, 201)]);
    assert_eq!(after_503.verdict, Verdict::Pass, "{after_503:?}");
    let after_500 = interval(vec![health(1, 10, 500), health(2, 1020, 201)]);
    assert_eq!(after_500.verdict, Verdict::Fail, "{after_500:?}");
    assert!(after_500.reason.unwrap().contains("at least 5000 ms"));
    let imds_1s = interval(vec![imds(1, 10, 404), imds(2, 1020, 200)]);
    assert_eq!(imds_1s.verdict, Verdict::Pass, "{imds_1s:?}");
    let imds_fast = interval(vec![imds(1, 10, 404), imds(2, 300, 200)]);
    assert_eq!(imds_fast.verdict, Verdict::Fail, "{imds_fast:?}");
}

/// A daemon's profile, as WALinuxAgent's: never exits, exception-text failures.
const DAEMON: &str = r#"name = "d"
description = "d"
attach = "sandbox"
done = "terminal-report"
failure_description = "exception-text"
capabilities = ["xml", "failure"]
[commands]
ready = ["d"]
failure = ["d"]
[reactions]
retryable = [500]
transport_errors = "retry"
status_403 = "throttling"
"#;

fn daemon() -> AgentProfile {
    AgentProfile::from_toml_str(DAEMON, Path::new("d.toml")).unwrap()
}

#[test]
fn a_daemon_ended_after_its_report_passes_exit_by_its_declaration() {
    let s = scenario("");
    let d = daemon();
    let j = judge_with(
        &d,
        "behaviour.exit",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 1200, Exit::StoppedWhenDone)],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    assert!(format!("{:?}", j.evidence).contains("stopped by the harness"));
    // The same end without a delivered report is no pass.
    let j = judge_with(
        &d,
        "behaviour.exit",
        &s,
        vec![health(1, 10, 500)],
        vec![run(0, 1200, Exit::StoppedWhenDone)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // An agent whose profile says it exits may not be "stopped as done".
    let j = judge(
        "behaviour.exit",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 1200, Exit::StoppedWhenDone)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}

#[test]
fn a_daemon_that_exits_or_hangs_after_reporting_fails_exit() {
    let s = scenario("");
    let d = daemon();
    // Exiting by itself: the declaration says it never does.
    let j = judge_with(
        &d,
        "behaviour.exit",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 100, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // Reported, yet still running at the deadline: the harness would have ended it.
    let j = judge_with(
        &d,
        "behaviour.exit",
        &s,
        vec![health(1, 10, 201)],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // No report delivered: running until the deadline is how such a daemon ends.
    let j = judge_with(
        &d,
        "behaviour.exit",
        &s,
        vec![health(1, 10, 410)],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
}

/// A daemon that sends no health report in this mode (WALinuxAgent 2.16 with
/// `Provisioning.Agent=cloud-init`).
fn silent_daemon() -> AgentProfile {
    let text = DAEMON.replace(
        "done = \"terminal-report\"\n",
        "done = \"terminal-report\"\nhealth_report = \"none\"\n",
    );
    AgentProfile::from_toml_str(&text, Path::new("d.toml")).unwrap()
}

#[test]
fn an_agent_declared_silent_passes_only_without_a_health_report() {
    // The scenario lets a reporting agent deliver: that expectation is not the silent one's.
    let s = scenario("[expect]\noutcome = \"reported\"\n");
    let quiet = silent_daemon();
    let goalstate = || {
        entry(
            1,
            EndpointId::WireserverGoalstate,
            10,
            Some(12),
            AnswerKind::Default,
            Some(200),
        )
    };
    let j = judge_with(
        &quiet,
        "behaviour.terminal",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    assert!(
        format!("{:?}", j.evidence).contains("health_report = \\\"none\\\""),
        "{j:?}"
    );
    // Any health report fails, accepted or not, on either flow.
    for status in [201, 500] {
        let j = judge_with(
            &quiet,
            "behaviour.terminal",
            &s,
            vec![goalstate(), health(2, 20, status)],
            vec![run(0, 1200, Exit::StoppedWhenDone)],
        );
        assert_eq!(j.verdict, Verdict::Fail, "{status}: {j:?}");
        assert!(j.reason.as_deref().unwrap().contains("sends none"), "{j:?}");
        let j = judge_with(
            &quiet,
            "report.shape",
            &s,
            vec![goalstate(), health(2, 20, status)],
            vec![run(0, 1200, Exit::StoppedWhenDone)],
        );
        assert_eq!(j.verdict, Verdict::Fail, "{status}: {j:?}");
    }
    // Never done, so the deadline ends it: no budget overrun.
    let j = judge_with(
        &quiet,
        "behaviour.budget",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    // Silent but declared to exit: a run the deadline had to end did not stop on its own.
    let exits = AgentProfile::from_toml_str(
        &DAEMON.replace("done = \"terminal-report\"\n", "health_report = \"none\"\n"),
        Path::new("d.toml"),
    )
    .unwrap();
    let j = judge_with(
        &exits,
        "behaviour.budget",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    let j = judge_with(
        &daemon(),
        "behaviour.budget",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // Nothing to judge in report.shape without a report.
    let j = judge_with(
        &quiet,
        "report.shape",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Skipped, "{j:?}");
    // The same silence from an agent that reports is a failure.
    let j = judge_with(
        &daemon(),
        "behaviour.terminal",
        &s,
        vec![goalstate()],
        vec![run(0, 7000, Exit::KilledAtDeadline)],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.as_deref().unwrap().contains("never sent"), "{j:?}");
}

fn xml_failure(seq: u64, description: &str) -> Entry {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><Health><GoalStateIncarnation>1</GoalStateIncarnation><Container><ContainerId>c</ContainerId><RoleInstanceList><Role><InstanceId>i</InstanceId><Health><State>NotReady</State><Details><SubStatus>ProvisioningFailed</SubStatus><Description>{description}</Description></Details></Health></Role></RoleInstanceList></Container></Health>"
    );
    let mut e = entry(
        seq,
        EndpointId::WireserverHealthXml,
        10,
        Some(12),
        AnswerKind::Default,
        Some(200),
    );
    e.report = Some(wirecheck_oracle::health::parse_xml(
        body.as_bytes(),
        Some(&ServedIds {
            incarnation: "1".into(),
            container_id: "c".into(),
            instance_id: "i".into(),
        }),
    ));
    e.body = body;
    e
}

#[test]
fn exception_text_failures_are_informational_only_in_their_shape() {
    // An XML scenario: only reports on its flow count.
    let s = scenario("protocol = \"xml\"\n");
    let d = daemon();
    let mut failure = run(0, 100, Exit::StoppedWhenDone);
    failure.run.action = crate::agent::Action::Failure;
    failure.run.reason = Some("failed to provision user".into());
    let j = judge_with(
        &d,
        "report.description",
        &s,
        vec![xml_failure(
            1,
            "[ProvisionError] OVF xml could not be parsed",
        )],
        vec![failure.clone()],
    );
    assert_eq!(j.verdict, Verdict::Informational, "{j:?}");
    assert!(
        j.reason
            .as_deref()
            .unwrap_or("")
            .contains("[ProvisionError]")
    );
    // Free text or nothing is not that dialect.
    for bad in ["boom", "ProvisionError: boom", ""] {
        let j = judge_with(
            &d,
            "report.description",
            &s,
            vec![xml_failure(1, bad)],
            vec![failure.clone()],
        );
        assert_eq!(j.verdict, Verdict::Fail, "{bad:?}: {j:?}");
    }
    // An agent whose profile claims encoded reports gets no such leniency.
    let j = judge(
        "report.description",
        &s,
        vec![xml_failure(
            1,
            "[ProvisionError] OVF xml could not be parsed",
        )],
        vec![failure],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}

/// An agent that never reported: the verdict carries the end of its stderr, where its error is.
#[test]
fn a_run_that_never_reported_shows_its_stderr_tail() {
    let s = scenario("");
    let mut r = run(0, 500, Exit::Code(2));
    let stderr = format!(
        "{}Traceback (most recent call last):\nModuleNotFoundError: No module named 'azure'\n",
        "noise\n".repeat(40)
    );
    r.stderr = Captured {
        total: stderr.len(),
        bytes: stderr.into_bytes(),
    };
    for check in ["behaviour.terminal", "behaviour.exit"] {
        let j = judge(check, &s, vec![], vec![r.clone()]);
        assert_eq!(j.verdict, Verdict::Fail, "{check}: {j:?}");
        let excerpt = j.evidence[0].excerpt.as_deref().unwrap_or("");
        assert!(
            excerpt.contains("ModuleNotFoundError: No module named 'azure'"),
            "{check}: {excerpt}"
        );
        // The tail, not the whole stream.
        assert!(excerpt.matches("noise").count() < 40, "{check}: {excerpt}");
    }
    // With nothing on stderr, no empty excerpt.
    let j = judge(
        "behaviour.terminal",
        &s,
        vec![],
        vec![run(0, 500, Exit::Code(2))],
    );
    assert_eq!(j.evidence[0].excerpt, None);
}

/// The KVP record is not XML: mapped as the XML flow carries text only when the characters XML
/// cannot hold are the requested ones, so a record holding other controls is not equal.
#[test]
fn a_kvp_record_with_other_controls_than_requested_is_not_carried_equal() {
    let mut r = run(0, 20, Exit::Code(0)).run;
    r.reason = Some("a\u{1}b".into());
    let sent = "a\u{FFFD}b";
    assert_eq!(super::carried_record(true, "a\u{1}b", &r), sent);
    assert_eq!(super::carried_record(true, sent, &r), sent);
    assert_eq!(super::carried_record(true, "a\u{2}b", &r), "a\u{2}b");
    assert_eq!(super::carried_record(true, "a\u{7f}b", &r), "a\u{7f}b");
    // Over JSON nothing is mapped.
    assert_eq!(super::carried_record(false, "a\u{1}b", &r), "a\u{1}b");
}

/// A report cut to its limit through a tail field: that field's value findings are the cut's
/// (notes), not deviations; the same findings on an uncut field stay.
#[test]
fn a_tail_field_the_trim_cut_through_is_a_note() {
    use wirecheck_oracle::{Finding, Severity};
    let findings = vec![
        Finding::error(
            "health.description.report.timestamp.invalid",
            "`timestamp` is \"\"",
        ),
        Finding::warning(
            "health.description.report.agent.unknown",
            "`agent` is \"x\"",
        ),
    ];
    let cut_at_timestamp = "result=error|reason=a|agent=x|vm_id=v|timestamp=";
    let t = super::trimmed(&findings, cut_at_timestamp);
    assert_eq!(t[0].severity, Severity::Info, "{t:?}");
    assert_eq!(t[1].severity, Severity::Warning, "{t:?}");
    let cut_at_agent = "result=error|reason=a|agent=x";
    let t = super::trimmed(&findings, cut_at_agent);
    assert_eq!(t[0].severity, Severity::Error, "{t:?}");
    assert_eq!(t[1].severity, Severity::Info, "{t:?}");
}

/// IMDS 410s `every` ms apart from 0 to `last` ms, each retried, then `then` (a status, or
/// nothing: the agent stopped), for the 70 s bound (docs/protocol.md §1.2).
fn imds_gone_streak(every: u64, last: u64, then: Option<(u64, u16)>) -> Vec<Entry> {
    let mut journal: Vec<Entry> = (0..=last / every)
        .map(|i| {
            let at = i * every;
            entry(
                i + 1,
                EndpointId::ImdsInstance,
                at,
                Some(at + 2),
                AnswerKind::Respond,
                Some(410),
            )
        })
        .collect();
    if let Some((at, status)) = then {
        let seq = journal.len() as u64 + 1;
        let kind = if status == 200 {
            AnswerKind::Default
        } else {
            AnswerKind::Respond
        };
        journal.push(entry(
            seq,
            EndpointId::ImdsInstance,
            at,
            Some(at + 2),
            kind,
            Some(status),
        ));
    }
    journal
}

#[test]
fn imds_410_is_retried_for_at_most_70_seconds() {
    // A 300 s budget, so the platform's 70 s is the tighter bound.
    let text = PROFILE.replace(
        "refresh_goal_state_on_410 = true\n",
        "refresh_goal_state_on_410 = true\nbudget = 300.0\n",
    );
    let p = AgentProfile::from_toml_str(&text, Path::new("t.toml")).unwrap();
    let s = scenario("");
    let retry = |journal: Vec<Entry>, end: u64| {
        judge_with(
            &p,
            "behaviour.retry",
            &s,
            journal,
            vec![run(0, end, Exit::Code(1))],
        )
    };
    // Retried every 5 s until 75 s: the retry at 75 s is past the bound.
    let beyond = retry(imds_gone_streak(5000, 70_000, Some((75_000, 410))), 76_000);
    assert_eq!(beyond.verdict, Verdict::Fail, "{beyond:?}");
    let reason = beyond.reason.unwrap();
    assert!(
        reason.contains("retried an IMDS 410 (#16) 75.00 s after the first 410")
            && reason.contains("at most 70 s"),
        "{reason}"
    );
    assert_eq!(beyond.evidence[0].journal_seq, [15, 16]);
    // Retried until 65 s, the document at 70 s: within.
    let within = retry(imds_gone_streak(5000, 65_000, Some((70_000, 200))), 71_000);
    assert_eq!(within.verdict, Verdict::Pass, "{within:?}");
    // A streak ends with any other answer: 410s for 40 s, a 500, 410s for 35 s more, the
    // document: 90 s in all, but no streak over 70 s.
    let mut broken = imds_gone_streak(5000, 40_000, Some((45_000, 500)));
    for (i, at) in (50_000..=85_000).step_by(5000).enumerate() {
        broken.push(entry(
            10 + i as u64 + 1,
            EndpointId::ImdsInstance,
            at,
            Some(at + 2),
            AnswerKind::Respond,
            Some(410),
        ));
    }
    broken.push(entry(
        19,
        EndpointId::ImdsInstance,
        90_000,
        Some(90_002),
        AnswerKind::Default,
        Some(200),
    ));
    let broken = retry(broken, 91_000);
    assert_eq!(broken.verdict, Verdict::Pass, "{broken:?}");
    // Stopping at the bound, with the budget's 230 s still left, is right...
    let at_bound = retry(imds_gone_streak(5000, 65_000, None), 68_000);
    assert_eq!(at_bound.verdict, Verdict::Pass, "{at_bound:?}");
    // ... stopping at 30 s while IMDS still answers 410 is giving up early: the platform says
    // retry (for up to 70 s), and the profile retries a 410.
    let early = retry(imds_gone_streak(5000, 30_000, None), 31_000);
    assert_eq!(early.verdict, Verdict::Fail, "{early:?}");
    let reason = early.reason.unwrap();
    assert!(
        reason.contains(
            "gave up after status 410 (#7) with 39.00 s of the platform's 70 s for an IMDS 410"
        ),
        "{reason}"
    );
    // With a budget shorter than 70 s (the scenario's 3 s), the budget is the bound.
    let short = judge(
        "behaviour.retry",
        &s,
        imds_gone_streak(500, 2500, None),
        vec![run(0, 2900, Exit::Code(1))],
    );
    assert_eq!(short.verdict, Verdict::Pass, "{short:?}");
    let short_early = judge(
        "behaviour.retry",
        &s,
        imds_gone_streak(500, 500, None),
        vec![run(0, 600, Exit::Code(1))],
    );
    assert_eq!(short_early.verdict, Verdict::Fail, "{short_early:?}");
    assert!(
        short_early
            .reason
            .unwrap()
            .contains("of its 3.00 s budget left")
    );
}

/// An IMDS 200 the agent cannot read is a retry decision, but a `format=text` leaf's plain
/// text (`.../compute/vmId?format=text`) is what the agent asked for, not an unusable answer.
#[test]
fn an_unusable_imds_200_is_a_retry_decision_but_a_text_leaf_is_an_answer() {
    let s = scenario(
        "[[fake.endpoint]]\nid = \"imds.instance\"\n[[fake.endpoint.step]]\nkind = \"respond\"\nstatus = 200\nbody = \"5d3c2b1a-0f9e-4d8c-b7a6-958473625140\"\n",
    );
    let p = profile();
    let whole = entry(
        1,
        EndpointId::ImdsInstance,
        0,
        Some(2),
        AnswerKind::Respond,
        Some(200),
    );
    let mut leaf = whole.clone();
    leaf.target = "/metadata/instance/compute/vmId?api-version=2021-08-01&format=text".into();
    // WALinuxAgent asks for the compute leaf as JSON: a bare id is no JSON document.
    let mut compute = whole.clone();
    compute.target = "/metadata/instance/compute?api-version=2018-02-01".into();
    let mut proxied = whole.clone();
    proxied.target = "http://169.254.169.254/metadata/instance?api-version=2021-08-01".into();
    let obs = Observation {
        scenario: &s,
        profile: &p,
        journal: vec![whole.clone(), leaf.clone(), proxied.clone()],
        served: Default::default(),
        imds_vm_id: None,
        pool: Some(Vec::new()),
        pool_view: wirecheck_oracle::kvp::decode_pool(&[]),
        runs: vec![run(0, 3000, Exit::Code(0))],
        stalls: Vec::new(),
        agent_waited: Vec::new(),
        agent_working: Vec::new(),
        time_scale: Default::default(),
        deadline: s.agent.deadline,
        guest_calls: Vec::new(),
        guest_users: None,
    };
    assert!(matches!(
        obs.classify(&whole),
        crate::observe::Class::Retryable(_)
    ));
    assert!(matches!(
        obs.classify(&proxied),
        crate::observe::Class::Retryable(_)
    ));
    assert!(obs.classify(&leaf).is_success());
    assert!(matches!(
        obs.classify(&compute),
        crate::observe::Class::Retryable(_)
    ));
}

/// A request the runner cut off when it killed the agent at its deadline (the connection closed
/// inside it: `http.incomplete`, on no known endpoint) is the runner's doing, not judged; the
/// same cut request from an agent that ended by itself, or one cut long before the kill, fails.
#[test]
fn a_request_cut_off_by_the_deadline_kill_is_not_judged() {
    let s = scenario("");
    let good = request(
        1,
        EndpointId::WireserverGoalstate,
        "GET",
        "/machine/?comp=goalstate",
        &[("x-ms-version", "2012-11-30")],
    );
    let cut = |at: u64| {
        let mut e = entry(
            2,
            EndpointId::WireserverUnknown,
            at,
            None,
            AnswerKind::Default,
            None,
        );
        e.target = "/machine?comp=health".into();
        e.method = "POST".into();
        e.findings = vec![wirecheck_oracle::Finding::warning(
            "http.incomplete",
            "connection closed or timed out after 10 of 300 body bytes; connection closed without an answer",
        )];
        e
    };
    let verdict = |at: u64, exit: Exit| {
        judge(
            "protocol.request",
            &s,
            vec![good.clone(), cut(at)],
            vec![run(0, 1000, exit)],
        )
        .verdict
    };
    assert_eq!(verdict(999, Exit::KilledAtDeadline), Verdict::Pass);
    assert_eq!(verdict(1003, Exit::KilledAtDeadline), Verdict::Pass);
    // Seen by the fake well after the end the runner took before the kill (a loaded machine
    // at x50: the project CI at dae5fdf failed it as "not a known endpoint").
    assert_eq!(verdict(2300, Exit::KilledAtDeadline), Verdict::Pass);
    assert_eq!(verdict(999, Exit::Code(0)), Verdict::Fail);
    assert_eq!(verdict(500, Exit::KilledAtDeadline), Verdict::Fail);
    // A request cut once the next run has started is that run's agent's.
    let two_runs = judge(
        "protocol.request",
        &s,
        vec![good.clone(), cut(1500)],
        vec![
            run(0, 1000, Exit::KilledAtDeadline),
            run(1200, 3000, Exit::Code(0)),
        ],
    );
    assert_eq!(two_runs.verdict, Verdict::Fail);
}

/// A report's VM id: the scenario's when it gives one; else IMDS's, or the nil id from an
/// agent that asked IMDS and never got a usable instance document (a generated IMDS schedule
/// that ends it), never from one that did get it or never asked.
#[test]
fn the_nil_vm_id_is_accepted_only_from_an_agent_imds_never_answered() {
    const SERVED: &str = "5d3c2b1a-0f9e-4d8c-b7a6-958473625140";
    let nil = crate::observe::NIL_VM_ID;
    let p = profile();
    let from_imds = scenario("vm_id_from_imds = true\n");
    let imds = |seq: u64, status| imds(seq, seq * 10, status);
    let ready_with = |vm_id: &str, journal: Vec<Entry>, s: &Scenario| {
        let record =
            format!("result=success|agent=t/1|timestamp=2026-12-01T00:00:00+00:00|vm_id={vm_id}");
        let pool = wirecheck_oracle::kvp::encode_record("PROVISIONING_REPORT", &record)
            .unwrap()
            .to_vec();
        let mut obs = observation(&p, s, journal, vec![run(0, 100, Exit::Code(0))]);
        obs.imds_vm_id = Some(SERVED.into());
        obs.pool_view = decode_pool(&pool);
        obs.pool = Some(pool);
        (
            obs.may_not_know_vm_id(None),
            judge_obs("kvp.report", &obs).verdict,
        )
    };
    // IMDS answered 503 and nothing else: the agent could not know.
    let gave_up = vec![imds(1, 503), health(2, 50, 200)];
    let (unknown, verdict) = ready_with(nil, gave_up.clone(), &from_imds);
    assert!(unknown);
    assert_eq!(verdict, Verdict::Pass);
    assert_eq!(
        ready_with(SERVED, gave_up.clone(), &from_imds).1,
        Verdict::Pass
    );
    // cloud-init's own ways of saying so (25.1's, 25.2+'s): no failure, the oracle's warning
    // about them kept (non-strict); another id is still wrong.
    for said in ["failed to read vm id: RuntimeError('x')", "None"] {
        assert_eq!(
            ready_with(said, gave_up.clone(), &from_imds).1,
            Verdict::NonStrict,
            "{said}"
        );
    }
    let other = "11111111-2222-3333-4444-555555555555";
    assert_eq!(ready_with(other, gave_up, &from_imds).1, Verdict::Fail);
    // IMDS served the document: the nil id is wrong.
    let served = vec![imds(1, 503), imds(2, 200), health(3, 50, 200)];
    let (unknown, verdict) = ready_with(nil, served, &from_imds);
    assert!(!unknown);
    assert_eq!(verdict, Verdict::Fail);
    // Never asked: the id must come from elsewhere.
    let (unknown, verdict) = ready_with(nil, vec![health(1, 50, 200)], &from_imds);
    assert!(!unknown);
    assert_eq!(verdict, Verdict::Fail);
    // A report sent before the agent asked IMDS cannot blame IMDS for not knowing.
    let report_first = vec![health(1, 5, 200), imds(2, 503)];
    let obs = observation(
        &p,
        &from_imds,
        report_first.clone(),
        vec![run(0, 100, Exit::Code(0))],
    );
    assert!(!obs.may_not_know_vm_id(Some(&report_first[0])));
    assert!(obs.may_not_know_vm_id(None));
    // A scenario's own id stands whatever IMDS did.
    let given = scenario("");
    let (unknown, verdict) = ready_with(nil, vec![imds(1, 503), health(2, 50, 200)], &given);
    assert!(!unknown);
    assert_eq!(verdict, Verdict::Fail);
}

/// An agent that gives up on the goal state (XML flow) by its profile has no health document
/// to send: not sending one is no failure; one that stops after a goal-state answer it must
/// retry is.
#[test]
fn giving_up_on_a_fatal_goal_state_answer_is_not_a_lost_report() {
    let p = profile();
    let s = scenario("protocol = \"xml\"\n");
    let goal_state = |status| {
        entry(
            1,
            EndpointId::WireserverGoalstate,
            10,
            Some(12),
            AnswerKind::Respond,
            Some(status),
        )
    };
    let exited = || vec![run(0, 100, Exit::Code(1))];
    // A plain 403 is fatal to a throttle-body agent.
    let j = judge_obs(
        "behaviour.terminal",
        &observation(&p, &s, vec![goal_state(403)], exited()),
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    let j = judge_obs(
        "behaviour.terminal",
        &observation(&p, &s, vec![goal_state(500)], exited()),
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    assert!(j.reason.unwrap().contains("never sent its health report"));
    // A fatal IMDS answer excuses nothing once the agent went on to fetch the goal state.
    let imds_403 = imds(1, 5, 403);
    let mut fetched = goal_state(200);
    fetched.seq = 2;
    let j = judge_obs(
        "behaviour.terminal",
        &observation(&p, &s, vec![imds_403.clone(), fetched], exited()),
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    let j = judge_obs(
        "behaviour.terminal",
        &observation(&p, &s, vec![imds_403], exited()),
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
}

/// After an IMDS 400 an agent asks once more with the older api-version (docs/protocol.md
/// §1.2): a fallback, not a retry of a fatal answer; asking the same again is one.
#[test]
fn the_imds_api_version_fallback_after_a_400_is_not_a_retry() {
    let s = scenario("");
    let imds = |seq: u64, status, target: &str| {
        let mut e = imds(seq, seq * 10, status);
        e.target = target.into();
        e
    };
    let newer = "/metadata/instance?api-version=2021-08-01&extended=true";
    let older = "/metadata/instance?api-version=2019-06-01";
    let runs = || vec![run(0, 100, Exit::Code(0))];
    let fell_back = vec![imds(1, 400, newer), imds(2, 200, older), health(3, 50, 201)];
    let j = judge("behaviour.retry", &s, fell_back, runs());
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    let again = vec![imds(1, 400, newer), imds(2, 200, newer), health(3, 50, 201)];
    let j = judge("behaviour.retry", &s, again, runs());
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // Back to the refused version after the fallback, refused again, and down once more:
    // a fallback happens once.
    let alternating = vec![
        imds(1, 400, newer),
        imds(2, 503, older),
        imds(3, 400, newer),
        imds(4, 200, older),
        health(5, 60, 201),
    ];
    let j = judge("behaviour.retry", &s, alternating, runs());
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
    // The older version refused too: nothing older to fall back to.
    let twice = vec![imds(1, 400, older), imds(2, 200, older), health(3, 50, 201)];
    let j = judge("behaviour.retry", &s, twice, runs());
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}

/// A daemon the harness ends once its report was accepted (`done = "terminal-report"`) did not
/// give up on what it asked after the report; an agent that exits on its own did.
#[test]
fn a_request_after_the_report_of_a_daemon_ended_when_done_is_not_given_up() {
    let s = scenario("");
    let imds_503 = imds(2, 50, 503);
    let journal = || vec![health(1, 10, 201), imds_503.clone()];
    let j = judge(
        "behaviour.retry",
        &s,
        journal(),
        vec![run(0, 120, Exit::StoppedWhenDone)],
    );
    assert_eq!(j.verdict, Verdict::Pass, "{j:?}");
    let j = judge(
        "behaviour.retry",
        &s,
        journal(),
        vec![run(0, 120, Exit::Code(0))],
    );
    assert_eq!(j.verdict, Verdict::Fail, "{j:?}");
}
